/*
 * The gateway as a dpflow app (dpflow/app.h): the ops that `dpflow run`,
 * `dpflow validate`, the control socket and the metrics endpoint find
 * under the name "natgw", registered when the program starts. Each op is
 * one of the gateway's own calls (natgw.h).
 */
#include <errno.h>
#include <stdlib.h>

#include "dpflow/app.h"

#include "natgw.h"

static void *app_load(struct dpflow_ctx *ctx,
		      const struct dpflow_cfg_node *section,
		      const struct dpflow_app_opts *opts,
		      struct dpflow_error *err)
{
	struct natgw_cfg *cfg = malloc(sizeof(*cfg));
	struct natgw *gw = NULL;

	(void)opts; /* the pipes serve any number of workers */
	if (!cfg) {
		dpflow_error_set(err, ENOMEM, NULL, "out of memory");
		return NULL;
	}
	if (!natgw_config_read(ctx, section, cfg))
		gw = natgw_create(ctx, cfg, section);
	free(cfg);
	return gw;
}

static void app_destroy(void *app)
{
	natgw_destroy(app);
}

static void app_describe(void *app, FILE *out)
{
	natgw_describe(app, out);
}

static void app_banner(void *app, FILE *out)
{
	natgw_banner(app, out);
}

static void app_report(void *app, FILE *out)
{
	natgw_report(app, out);
}

static char *app_request(void *app, const char *cmd, const char *req,
			 size_t len)
{
	return natgw_request(app, cmd, req, len);
}

static void app_metrics(void *app, FILE *out)
{
	natgw_metrics(app, out);
}

static const struct dpflow_app_ops natgw_app = {
    .name = "natgw",
    .summary = "stateful source NAT gateway (masquerade) in pipes, built "
	       "on the public API only (tests/app/natgw/README.md)",
    .targets = DPFLOW_APP_TARGET_CPU,
    .load = app_load,
    .destroy = app_destroy,
    .describe = app_describe,
    .banner = app_banner,
    .report = app_report,
    .request = app_request,
    .metrics = app_metrics,
};

DPFLOW_APP_REGISTER(natgw_app)
