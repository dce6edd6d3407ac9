/*
 * The balancer as a dpflow app (dpflow/app.h): the ops that `dpflow run`,
 * `dpflow validate`, the control socket and the metrics endpoint find
 * under the name "l4lb", registered when the program starts. Each op is
 * one of the balancer's own calls (l4lb.h, l4lb_config.h, l4lb_ctl.h).
 */
#include "dpflow/app.h"

#include "l4lb/l4lb_config.h"
#include "l4lb/l4lb_ctl.h"
#include "l4lb/lb_internal.h"

static void *app_load(struct dpflow_ctx *ctx,
		      const struct dpflow_cfg_node *section,
		      const struct dpflow_app_opts *opts,
		      struct dpflow_error *err)
{
	return l4lb_config_load(ctx, section, opts->workers > 1, err);
}

static void app_destroy(void *app)
{
	l4lb_destroy(app);
}

static void app_describe(void *app, FILE *out)
{
	lb_describe_services(app, out);
}

/* "N services, M backends" */
static void app_banner(void *app, FILE *out)
{
	const struct l4lb *lb = app;
	unsigned n_svc = 0, n_be = 0;

	for (int s = 0; s < (int)L4LB_SERVICES_MAX; s++)
		n_svc += l4lb_service_cfg(lb, s) != NULL;
	for (uint32_t b = 0; b < L4LB_BACKENDS_MAX; b++) {
		struct l4lb_backend_info bi;

		n_be += !l4lb_backend_info(lb, b, &bi);
	}
	fprintf(out, "%u service%s, %u backend%s", n_svc, n_svc == 1 ? "" : "s",
		n_be, n_be == 1 ? "" : "s");
}

static void app_report(void *app, FILE *out)
{
	l4lb_print(app, out);
}

static void app_tick(void *app, uint64_t now_ns)
{
	l4lb_health_tick(app, now_ns);
}

static const struct dpflow_app_ops l4lb_app = {
    .name = "l4lb",
    .summary = "L4 load balancer: VIPs over backends by Maglev, full NAT "
	       "or DSR (IP-in-IP, GUE), health checks (docs/apps/l4lb.md)",
    .targets = DPFLOW_APP_TARGET_CPU,
    .load = app_load,
    .destroy = app_destroy,
    .describe = app_describe,
    .banner = app_banner,
    .report = app_report,
    .request = l4lb_ctl_request,
    .metrics = l4lb_metrics_render,
    .tick = app_tick,
};

DPFLOW_APP_REGISTER(l4lb_app)
