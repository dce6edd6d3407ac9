/*
 * The apps of one run (dpflow/app.h): the config's `apps:` section read
 * with the public config nodes, each key's registered app loaded on the
 * context, and the run's hooks (control requests, metrics, tick, reports)
 * fanned out to them. Control thread only.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/app.h"
#include "dpflow/config_node.h"

struct dpflow_apps {
	unsigned n;
	const struct dpflow_app_ops *ops[DPFLOW_APPS_MAX];
	void *inst[DPFLOW_APPS_MAX];
};

static const char *target_name(unsigned t)
{
	return t == DPFLOW_APP_TARGET_GPU ? "GPU" : "CPU";
}

/* "no app named 'X' ..." at the section @x, with the registered names. */
static int unknown_app(const struct dpflow_cfg_node *x, const char *name)
{
	char list[DPFLOW_ERROR_MSG_MAX / 2] = "";
	size_t len = 0;

	for (unsigned i = 0; i < dpflow_app_count() && len < sizeof(list); i++)
		len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s",
					i ? ", " : "", dpflow_app_at(i)->name);
	if (!dpflow_app_count())
		return dpflow_cfg_error(x, ENOENT,
					"no app named '%s': this dpflow has "
					"none built in",
					name);
	return dpflow_cfg_error(x, ENOENT,
				"no app named '%s' (apps: %s; `dpflow apps` "
				"lists them)",
				name, list);
}

/* Load app @name from section @x into @a. 0 or -errno + @err. */
static int load_one(struct dpflow_apps *a, struct dpflow_ctx *ctx,
		    const char *name, const struct dpflow_cfg_node *x,
		    const struct dpflow_app_opts *opts,
		    struct dpflow_error *err)
{
	const struct dpflow_app_ops *ops = dpflow_app_find(name);
	void *inst;

	if (!ops)
		return unknown_app(x, name);
	if (!(ops->targets & opts->target))
		return dpflow_error_set(
		    err, ENOTSUP, NULL, "apps.%s runs on the %s target only",
		    name, target_name(ops->targets & ~opts->target));
	dpflow_error_clear(err);
	inst = ops->load(ctx, x, opts, err);
	if (!inst)
		return err->code ? -err->code
				 : dpflow_cfg_error(x, EINVAL, "did not load");
	a->ops[a->n] = ops;
	a->inst[a->n] = inst;
	a->n++;
	return 0;
}

struct dpflow_apps *dpflow_apps_load(struct dpflow_ctx *ctx, const char *path,
				     const struct dpflow_app_opts *opts,
				     struct dpflow_error *err)
{
	struct dpflow_apps *a = calloc(1, sizeof(*a));
	struct dpflow_cfg_node root, sec, x;
	struct dpflow_cfg_doc *doc;
	int rc = 0;

	if (!a) {
		dpflow_error_set(err, ENOMEM, NULL, "out of memory");
		return NULL;
	}
	doc = dpflow_cfg_doc_load(path, err);
	if (!doc) {
		free(a);
		return NULL;
	}
	if (!dpflow_cfg_doc_root(doc, NULL, &root) ||
	    !dpflow_cfg_get(&root, "apps", &sec) || dpflow_cfg_is_null(&sec))
		goto out; /* no apps */
	if (!dpflow_cfg_is_map(&sec)) {
		rc = dpflow_cfg_error(&sec, EINVAL,
				      "a mapping of app names to their "
				      "sections (apps: {NAME: ...})");
		goto out;
	}
	rc = dpflow_cfg_check(&sec);
	for (unsigned i = 0; !rc && i < dpflow_cfg_len(&sec); i++) {
		const char *name;

		if (!dpflow_cfg_pair(&sec, i, &name, &x))
			rc = dpflow_cfg_error(&sec, EINVAL,
					      "keys must be plain text");
		else if (a->n == DPFLOW_APPS_MAX)
			rc = dpflow_cfg_error(&x, ENOSPC, "more than %u apps",
					      DPFLOW_APPS_MAX);
		else
			rc = load_one(a, ctx, name, &x, opts, err);
	}
out:
	dpflow_cfg_doc_free(doc);
	if (rc) {
		dpflow_apps_destroy(a);
		return NULL;
	}
	return a;
}

void dpflow_apps_destroy(struct dpflow_apps *apps)
{
	if (!apps)
		return;
	for (unsigned i = apps->n; i-- > 0;)
		apps->ops[i]->destroy(apps->inst[i]);
	free(apps);
}

unsigned dpflow_apps_count(const struct dpflow_apps *apps)
{
	return apps ? apps->n : 0;
}

const struct dpflow_app_ops *dpflow_apps_ops(const struct dpflow_apps *apps,
					     unsigned i)
{
	return apps && i < apps->n ? apps->ops[i] : NULL;
}

void dpflow_apps_describe(const struct dpflow_apps *apps, FILE *out)
{
	if (!dpflow_apps_count(apps))
		return;
	fprintf(out, "apps:\n");
	for (unsigned i = 0; i < apps->n; i++) {
		fprintf(out, "  %s:\n", apps->ops[i]->name);
		if (apps->ops[i]->describe)
			apps->ops[i]->describe(apps->inst[i], out);
	}
}

void dpflow_apps_banner(const struct dpflow_apps *apps, FILE *out)
{
	for (unsigned i = 0; i < dpflow_apps_count(apps); i++) {
		fprintf(out, "  app    %-12s", apps->ops[i]->name);
		if (apps->ops[i]->banner) {
			fputc(' ', out);
			apps->ops[i]->banner(apps->inst[i], out);
		}
		fputc('\n', out);
	}
}

void dpflow_apps_report(const struct dpflow_apps *apps, FILE *out)
{
	for (unsigned i = 0; i < dpflow_apps_count(apps); i++)
		if (apps->ops[i]->report)
			apps->ops[i]->report(apps->inst[i], out);
}

void dpflow_apps_tick(const struct dpflow_apps *apps, uint64_t now_ns)
{
	for (unsigned i = 0; i < dpflow_apps_count(apps); i++)
		if (apps->ops[i]->tick)
			apps->ops[i]->tick(apps->inst[i], now_ns);
}

char *dpflow_apps_request(void *arg, const char *cmd, const char *req,
			  size_t len)
{
	const struct dpflow_apps *apps = arg;
	const char *dot = strchr(cmd, '.');

	if (!dot)
		return NULL;
	for (unsigned i = 0; i < dpflow_apps_count(apps); i++) {
		const struct dpflow_app_ops *ops = apps->ops[i];

		if (strlen(ops->name) == (size_t)(dot - cmd) &&
		    !strncmp(ops->name, cmd, (size_t)(dot - cmd)))
			return ops->request
				   ? ops->request(apps->inst[i], cmd, req, len)
				   : NULL;
	}
	return NULL;
}

void dpflow_apps_metrics(void *arg, FILE *out)
{
	const struct dpflow_apps *apps = arg;

	for (unsigned i = 0; i < dpflow_apps_count(apps); i++)
		if (apps->ops[i]->metrics)
			apps->ops[i]->metrics(apps->inst[i], out);
}
