/*
 * Apps as plugins (dpflow/app.h, lib/app): the registry (register, find,
 * a duplicate or bad name refused, iteration in name order whatever the
 * registration order, the limit, a constructor's registration), the apps
 * of a run (dpflow_apps_load on a config file: config order, each hook
 * fanned out to the right app, errors naming file, line and key path,
 * the target refused, earlier apps destroyed on failure) and the config
 * nodes apps read their section with (dpflow/config_node.h: getters and
 * the loader's messages). Fake apps here; this program links no real one.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dpflow/app.h"
#include "dpflow/config.h"
#include "dpflow/config_node.h"

/* ---- fake apps -------------------------------------------------------- */

/* What the fake apps were asked to do, in order ("load alpha", ...). */
static char journal[2048];

static void note(const char *what, const char *name)
{
	size_t n = strlen(journal);

	snprintf(journal + n, sizeof(journal) - n, "%s %s;", what, name);
}

struct fake {
	const char *name;
	uint64_t n;
	char path[DPFLOW_CFG_PATH_MAX];
	unsigned line;
};

/* Reads {n: NUMBER} (n up to 1000), the only key. */
static void *fake_load(const char *name, const struct dpflow_cfg_node *sec,
		       struct dpflow_error *err)
{
	static const char *const keys[] = {"n", NULL};
	struct fake *f;
	uint64_t n = 7;

	note("load", name);
	if (dpflow_cfg_check_keys(sec, keys) ||
	    dpflow_cfg_opt_u64(sec, "n", 1000, &n))
		return NULL;
	f = calloc(1, sizeof(*f));
	if (!f) {
		dpflow_error_set(err, ENOMEM, NULL, "out of memory");
		return NULL;
	}
	f->name = name;
	f->n = n;
	snprintf(f->path, sizeof(f->path), "%s", sec->path);
	f->line = dpflow_cfg_line(sec);
	return f;
}

static void *alpha_load(struct dpflow_ctx *ctx,
			const struct dpflow_cfg_node *sec,
			const struct dpflow_app_opts *o,
			struct dpflow_error *err)
{
	cr_assert(ctx);
	cr_assert_eq(o->target, DPFLOW_APP_TARGET_CPU);
	return fake_load("alpha", sec, err);
}

static void *beta_load(struct dpflow_ctx *ctx,
		       const struct dpflow_cfg_node *sec,
		       const struct dpflow_app_opts *o,
		       struct dpflow_error *err)
{
	(void)ctx;
	(void)o;
	return fake_load("beta", sec, err);
}

static void fake_destroy(void *app)
{
	struct fake *f = app;

	note("destroy", f->name);
	free(f);
}

static void fake_describe(void *app, FILE *out)
{
	const struct fake *f = app;

	fprintf(out, "    n %llu at %s line %u\n", (unsigned long long)f->n,
		f->path, f->line);
}

static void fake_banner(void *app, FILE *out)
{
	fprintf(out, "n=%llu", (unsigned long long)((struct fake *)app)->n);
}

static void fake_report(void *app, FILE *out)
{
	fprintf(out, "%s report\n", ((struct fake *)app)->name);
}

static char *fake_request(void *app, const char *cmd, const char *req,
			  size_t len)
{
	char *r = malloc(256);

	cr_assert(r);
	snprintf(r, 256,
		 "{\"app\":\"%s\",\"cmd\":\"%s\",\"len\":%zu,\"req\":%s}",
		 ((struct fake *)app)->name, cmd, len, req);
	return r;
}

static void fake_metrics(void *app, FILE *out)
{
	fprintf(out, "dpflow_%s_n %llu\n", ((struct fake *)app)->name,
		(unsigned long long)((struct fake *)app)->n);
}

static void fake_tick(void *app, uint64_t now)
{
	cr_assert_eq(now, 42);
	note("tick", ((struct fake *)app)->name);
}

static const struct dpflow_app_ops alpha = {
    .name = "alpha",
    .targets = DPFLOW_APP_TARGET_CPU,
    .load = alpha_load,
    .destroy = fake_destroy,
    .describe = fake_describe,
    .banner = fake_banner,
    .report = fake_report,
    .request = fake_request,
    .metrics = fake_metrics,
    .tick = fake_tick,
};

/* beta: both targets, and none of the optional ops */
static const struct dpflow_app_ops beta = {
    .name = "beta",
    .targets = DPFLOW_APP_TARGET_CPU | DPFLOW_APP_TARGET_GPU,
    .load = beta_load,
    .destroy = fake_destroy,
};

/* Registered by a constructor, as apps are. */
static const struct dpflow_app_ops ctor_app = {
    .name = "ctor-app",
    .targets = DPFLOW_APP_TARGET_CPU,
    .load = beta_load,
    .destroy = fake_destroy,
};
DPFLOW_APP_REGISTER(ctor_app)

/* An ops table named @name, otherwise beta's (static: the registry keeps
 * the pointer). */
static const struct dpflow_app_ops *named(const char *name)
{
	static struct dpflow_app_ops pool[DPFLOW_APPS_MAX + 4];
	static char names[DPFLOW_APPS_MAX + 4][DPFLOW_APP_NAME_MAX + 8];
	static unsigned used;

	cr_assert_lt(used, DPFLOW_APPS_MAX + 4);
	snprintf(names[used], sizeof(names[used]), "%s", name);
	pool[used] = beta;
	pool[used].name = names[used];
	return &pool[used++];
}

/* ---- the registry ----------------------------------------------------- */

Test(registry, constructor_registered_before_main)
{
	cr_assert_eq(dpflow_app_count(), 1);
	cr_assert_eq(dpflow_app_find("ctor-app"), &ctor_app);
	cr_assert_eq(dpflow_app_at(0), &ctor_app);
}

Test(registry, find_and_iterate_in_name_order)
{
	const struct dpflow_app_ops *zeta = named("zeta"), *mid = named("mid");
	static const char *const order[] = {"alpha", "beta", "ctor-app", "mid",
					    "zeta"};

	cr_assert_eq(dpflow_app_register(zeta), 0);
	cr_assert_eq(dpflow_app_register(&beta), 0);
	cr_assert_eq(dpflow_app_register(mid), 0);
	cr_assert_eq(dpflow_app_register(&alpha), 0);
	cr_assert_eq(dpflow_app_count(), 5);
	for (unsigned i = 0; i < 5; i++)
		cr_expect_str_eq(dpflow_app_at(i)->name, order[i], "at(%u)", i);
	cr_expect_null(dpflow_app_at(5));
	cr_expect_eq(dpflow_app_find("alpha"), &alpha);
	cr_expect_eq(dpflow_app_find("beta"), &beta);
	cr_expect_eq(dpflow_app_find("zeta"), zeta);
	cr_expect_null(dpflow_app_find("alph"));
	cr_expect_null(dpflow_app_find("alphaa"));
	cr_expect_null(dpflow_app_find(""));
	cr_expect_null(dpflow_app_find(NULL));
}

Test(registry, duplicate_name_refused)
{
	cr_assert_eq(dpflow_app_register(&alpha), 0);
	cr_expect_eq(dpflow_app_register(named("alpha")), -EEXIST);
	cr_expect_eq(dpflow_app_register(&alpha), -EEXIST);
	cr_expect_eq(dpflow_app_register(named("ctor-app")), -EEXIST);
	cr_expect_eq(dpflow_app_count(), 2);
	cr_expect_eq(dpflow_app_find("alpha"), &alpha, "the first one stays");
}

Test(registry, bad_ops_refused)
{
	static const char *const bad_names[] = {
	    "",
	    "Alpha",
	    "1st",
	    "-x",
	    "a b",
	    "a.b",
	    "a/b",
	    "ä",
	    "abcdefghijklmnopqrstuvwxyz012345" /* 32 bytes: one too many */};
	struct dpflow_app_ops o;

	for (unsigned i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++)
		cr_expect_eq(dpflow_app_register(named(bad_names[i])), -EINVAL,
			     "name '%s'", bad_names[i]);
	cr_expect_eq(dpflow_app_register(NULL), -EINVAL);
	o = beta;
	o.name = NULL;
	cr_expect_eq(dpflow_app_register(&o), -EINVAL);
	o = beta;
	o.load = NULL;
	cr_expect_eq(dpflow_app_register(&o), -EINVAL);
	o = beta;
	o.destroy = NULL;
	cr_expect_eq(dpflow_app_register(&o), -EINVAL);
	o = beta;
	o.targets = 0;
	cr_expect_eq(dpflow_app_register(&o), -EINVAL);
	o = beta;
	o.targets = 4;
	cr_expect_eq(dpflow_app_register(&o), -EINVAL);
	cr_expect_eq(dpflow_app_count(), 1, "only the constructor's app");
	cr_expect_eq(
	    dpflow_app_register(named("abcdefghijklmnopqrstuvwxyz01234")), 0,
	    "31 bytes: the longest name");
	cr_expect_eq(dpflow_app_register(named("a_b-9")), 0);
}

Test(registry, full)
{
	unsigned i;

	for (i = dpflow_app_count(); i < DPFLOW_APPS_MAX; i++) {
		char name[16];

		snprintf(name, sizeof(name), "app%02u", i);
		cr_assert_eq(dpflow_app_register(named(name)), 0, "%s", name);
	}
	cr_expect_eq(dpflow_app_register(named("one-more")), -ENOSPC);
	cr_expect_eq(dpflow_app_count(), DPFLOW_APPS_MAX);
	cr_expect_null(dpflow_app_find("one-more"));
}

static int verb_run(const struct dpflow_app_client *cl, int argc, char **argv)
{
	(void)cl;
	(void)argv;
	return argc;
}

static int workload_run(int argc, char **argv)
{
	(void)argv;
	return argc;
}

Test(registry, client_commands_and_workloads)
{
	static const struct dpflow_app_verb verbs[] = {
	    {"show", "usage: dpflowctl zz show\n", verb_run}};
	static const struct dpflow_app_verb no_run[] = {
	    {"show", "usage: dpflowctl zz show\n", NULL}};
	static const struct dpflow_app_cli zz = {
	    "zz", "zz things", "usage: dpflowctl zz\n", verbs, 1};
	static const struct dpflow_app_cli aa = {
	    "aa", NULL, "usage: dpflowctl aa\n", NULL, 0};
	static const struct dpflow_app_cli zz2 = {"zz", NULL, "usage\n", NULL,
						  0};
	static const struct dpflow_app_cli broken = {"bb", NULL, "usage\n",
						     no_run, 1};
	static const struct dpflow_app_workload w1 = {
	    "zz", "zz-small", "small", workload_run, NULL, false};
	static const struct dpflow_app_workload w0 = {
	    "zz", "zz-big", "big", workload_run, workload_run, true};
	static const struct dpflow_app_workload w_dup = {
	    "aa", "zz-big", "big", workload_run, NULL, false};
	static const struct dpflow_app_workload w_bad = {"aa", "aa-x", "x",
							 NULL, NULL,   false};

	cr_assert_eq(dpflow_app_cli_register(&zz), 0);
	cr_assert_eq(dpflow_app_cli_register(&aa), 0);
	cr_expect_eq(dpflow_app_cli_register(&zz2), -EEXIST);
	cr_expect_eq(dpflow_app_cli_register(&broken), -EINVAL);
	cr_expect_eq(dpflow_app_cli_count(), 2);
	cr_expect_eq(dpflow_app_cli_at(0), &aa);
	cr_expect_eq(dpflow_app_cli_at(1), &zz);
	cr_expect_eq(dpflow_app_cli_find("zz"), &zz);
	cr_expect_null(dpflow_app_cli_find("bb"));
	cr_expect_eq(dpflow_app_cli_find("zz")->verbs[0].run(NULL, 3, NULL), 3);

	cr_assert_eq(dpflow_app_workload_register(&w1), 0);
	cr_assert_eq(dpflow_app_workload_register(&w0), 0);
	cr_expect_eq(dpflow_app_workload_register(&w_dup), -EEXIST);
	cr_expect_eq(dpflow_app_workload_register(&w_bad), -EINVAL);
	cr_expect_eq(dpflow_app_workload_count(), 2);
	cr_expect_eq(dpflow_app_workload_at(0), &w0, "zz-big < zz-small");
	cr_expect_eq(dpflow_app_workload_at(1), &w1);
	cr_expect_eq(dpflow_app_workload_find("zz-small"), &w1);
	cr_expect_null(dpflow_app_workload_find("zz"));
	/* the app registry is apart from these */
	cr_expect_eq(dpflow_app_count(), 1);
}

Test(registry, constructor_failure_stops_the_program, .signal = SIGABRT)
{
	dpflow_app_register_failed("app", "alpha", -EEXIST);
}

/* ---- the apps of a run ------------------------------------------------ */

struct run {
	char path[64];
	struct dpflow_ctx *ctx;
	struct dpflow_apps *apps;
	struct dpflow_error err;
};

static const char *const ports = "ports:\n"
				 "  - {name: in, uri: 'ring:in'}\n";

/* Write @yaml to a temporary file and load its context (not its apps). */
static void run_open(struct run *r, const char *yaml)
{
	int fd;

	memset(r, 0, sizeof(*r));
	snprintf(r->path, sizeof(r->path), "/tmp/dpflow-app-test-XXXXXX");
	fd = mkstemp(r->path);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, yaml, strlen(yaml)), (ssize_t)strlen(yaml));
	close(fd);
	r->ctx = dpflow_config_load(r->path, NULL, &r->err);
	cr_assert(r->ctx, "%s", r->err.msg);
	if (!dpflow_app_find("alpha")) {
		cr_assert_eq(dpflow_app_register(&alpha), 0);
		cr_assert_eq(dpflow_app_register(&beta), 0);
	}
	journal[0] = 0;
}

static void run_close(struct run *r)
{
	dpflow_apps_destroy(r->apps);
	dpflow_ctx_destroy(r->ctx);
	unlink(r->path);
}

static struct dpflow_apps *run_load(struct run *r, unsigned target)
{
	struct dpflow_app_opts o = {.workers = 1, .target = target};

	r->apps = dpflow_apps_load(r->ctx, r->path, &o, &r->err);
	return r->apps;
}

/* What @fn writes for @apps, malloc'ed. */
static char *text_of(void (*fn)(const struct dpflow_apps *, FILE *),
		     const struct dpflow_apps *apps)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	cr_assert(f);
	fn(apps, f);
	cr_assert_eq(fclose(f), 0);
	return text;
}

static void metrics_of(const struct dpflow_apps *apps, FILE *f)
{
	dpflow_apps_metrics((void *)apps, f);
}

Test(apps, loaded_in_config_order_and_each_hook_fanned_out)
{
	struct run r;
	char yaml[512], *t;

	snprintf(yaml, sizeof(yaml),
		 "%sapps:\n"
		 "  beta: {n: 2}\n"
		 "  alpha:\n"
		 "    n: 1\n",
		 ports);
	run_open(&r, yaml);
	cr_assert(run_load(&r, DPFLOW_APP_TARGET_CPU), "%s", r.err.msg);
	cr_assert_eq(dpflow_apps_count(r.apps), 2);
	cr_expect_eq(dpflow_apps_ops(r.apps, 0), &beta);
	cr_expect_eq(dpflow_apps_ops(r.apps, 1), &alpha);
	cr_expect_null(dpflow_apps_ops(r.apps, 2));
	cr_expect_str_eq(journal, "load beta;load alpha;");

	t = text_of(dpflow_apps_describe, r.apps);
	cr_expect_str_eq(t, "apps:\n"
			    "  beta:\n"
			    "  alpha:\n"
			    "    n 1 at apps.alpha line 6\n");
	free(t);
	t = text_of(dpflow_apps_banner, r.apps);
	cr_expect_str_eq(t, "  app    beta        \n"
			    "  app    alpha        n=1\n");
	free(t);
	t = text_of(dpflow_apps_report, r.apps);
	cr_expect_str_eq(t, "alpha report\n");
	free(t);
	t = text_of(metrics_of, r.apps);
	cr_expect_str_eq(t, "dpflow_alpha_n 1\n");
	free(t);

	t = dpflow_apps_request(r.apps, "alpha.ping", "{\"a\":1}", 7);
	cr_assert(t);
	cr_expect_str_eq(t, "{\"app\":\"alpha\",\"cmd\":\"alpha.ping\","
			    "\"len\":7,\"req\":{\"a\":1}}");
	free(t);
	/* beta has no request op, gamma is not in this run, and a name
	 * without a dot or with only a prefix of an app's is no app's */
	cr_expect_null(dpflow_apps_request(r.apps, "beta.x", "{}", 2));
	cr_expect_null(dpflow_apps_request(r.apps, "gamma.x", "{}", 2));
	cr_expect_null(dpflow_apps_request(r.apps, "alpha", "{}", 2));
	cr_expect_null(dpflow_apps_request(r.apps, "alph.ping", "{}", 2));
	cr_expect_null(dpflow_apps_request(r.apps, "alphaa.ping", "{}", 2));

	journal[0] = 0;
	dpflow_apps_tick(r.apps, 42);
	cr_expect_str_eq(journal, "tick alpha;");
	journal[0] = 0;
	dpflow_apps_destroy(r.apps);
	r.apps = NULL;
	cr_expect_str_eq(journal, "destroy alpha;destroy beta;",
			 "in reverse order");
	run_close(&r);
}

Test(apps, no_section_or_an_empty_one)
{
	static const char *const tails[] = {"", "apps:\n", "apps: {}\n",
					    "apps: ~\n"};

	for (unsigned i = 0; i < 4; i++) {
		struct run r;
		char yaml[256], *t;

		snprintf(yaml, sizeof(yaml), "%s%s", ports, tails[i]);
		run_open(&r, yaml);
		cr_assert(run_load(&r, DPFLOW_APP_TARGET_CPU), "%s: %s",
			  tails[i], r.err.msg);
		cr_expect_eq(dpflow_apps_count(r.apps), 0);
		cr_expect_null(
		    dpflow_apps_request(r.apps, "alpha.ping", "{}", 2));
		t = text_of(dpflow_apps_describe, r.apps);
		cr_expect_str_eq(t, "");
		free(t);
		cr_expect_str_eq(journal, "");
		run_close(&r);
	}
}

Test(apps, unknown_app_named_with_file_line_and_the_known_ones)
{
	struct run r;
	char yaml[256], want[512];

	snprintf(yaml, sizeof(yaml),
		 "%sapps:\n"
		 "  alpha: {n: 1}\n"
		 "  nope: {x: 1}\n",
		 ports);
	run_open(&r, yaml);
	cr_assert_null(run_load(&r, DPFLOW_APP_TARGET_CPU));
	snprintf(want, sizeof(want),
		 "%s:5: apps.nope: no app named 'nope' (apps: alpha, beta, "
		 "ctor-app; `dpflow apps` lists them)",
		 r.path);
	cr_expect_str_eq(r.err.msg, want);
	cr_expect_eq(r.err.code, ENOENT);
	cr_expect_str_eq(journal, "load alpha;destroy alpha;",
			 "the app loaded before is destroyed");
	run_close(&r);
}

Test(apps, target_refused_before_load)
{
	struct run r;
	char yaml[256];

	snprintf(yaml, sizeof(yaml), "%sapps:\n  beta: {}\n  alpha: {}\n",
		 ports);
	run_open(&r, yaml);
	cr_assert_null(run_load(&r, DPFLOW_APP_TARGET_GPU));
	cr_expect_str_eq(r.err.msg, "apps.alpha runs on the CPU target only");
	cr_expect_str_eq(journal, "load beta;destroy beta;",
			 "alpha never loaded");
	run_close(&r);
}

Test(apps, errors_in_a_section_name_file_line_and_key_path)
{
	static const struct {
		const char *section;
		unsigned line;
		const char *want;
	} cases[] = {
	    {"  alpha:\n    n: x\n", 5, "apps.alpha.n: 'x' is not a number"},
	    {"  alpha:\n    n: 1001\n", 5,
	     "apps.alpha.n: '1001' is out of range (max 1000)"},
	    {"  alpha:\n    n: 1\n    bogus: 2\n", 6,
	     "apps.alpha.bogus: unknown key 'bogus'"},
	    {"  alpha: [1]\n", 4, "apps.alpha: expected a mapping"},
	    {"  alpha:\n    n: 1\n    n: 2\n", 6,
	     "apps.alpha.n: duplicate key 'n' (first on line 5)"},
	    {"  alpha: {}\n  alpha: {}\n", 5,
	     "apps.alpha: duplicate key 'alpha' (first on line 4)"},
	};

	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct run r;
		char yaml[256], want[512];
		bool dup = strstr(cases[i].want, "duplicate") != NULL;

		/* the loader refuses duplicate keys first: load the context
		 * from a clean file, then the apps from the one at fault */
		snprintf(yaml, sizeof(yaml), "%sapps:\n%s", ports,
			 dup ? "  alpha: {}\n" : cases[i].section);
		run_open(&r, yaml);
		if (dup) {
			FILE *f = fopen(r.path, "w");

			cr_assert(f);
			fprintf(f, "%sapps:\n%s", ports, cases[i].section);
			fclose(f);
		}
		cr_expect_null(run_load(&r, DPFLOW_APP_TARGET_CPU), "case %u",
			       i);
		snprintf(want, sizeof(want), "%s:%u: %s", r.path, cases[i].line,
			 cases[i].want);
		cr_expect_str_eq(r.err.msg, want, "case %u", i);
		run_close(&r);
	}
}

Test(apps, a_section_that_is_no_mapping)
{
	struct run r;
	char yaml[256], want[512];

	snprintf(yaml, sizeof(yaml), "%sapps: [alpha]\n", ports);
	run_open(&r, yaml);
	cr_assert_null(run_load(&r, DPFLOW_APP_TARGET_CPU));
	snprintf(want, sizeof(want),
		 "%s:3: apps: a mapping of app names to their sections "
		 "(apps: {NAME: ...})",
		 r.path);
	cr_expect_str_eq(r.err.msg, want);
	run_close(&r);
}

/* ---- config nodes ----------------------------------------------------- */

Test(config_node, getters_and_paths)
{
	static const char *const yaml = "top:\n"
					"  list: [1, two, {k: v}]\n"
					"  flag: yes\n"
					"  name: ''\n"
					"  nothing: ~\n"
					"  hex: 0x10\n";
	struct dpflow_error err = {0};
	struct dpflow_cfg_doc *doc =
	    dpflow_cfg_doc_parse(yaml, strlen(yaml), "t.yaml", &err);
	struct dpflow_cfg_node root, top, list, it, v;
	const char *key, *s;
	uint64_t u;
	bool b;

	cr_assert(doc, "%s", err.msg);
	cr_assert(dpflow_cfg_doc_root(doc, NULL, &root));
	cr_expect_str_eq(root.path, "");
	cr_assert(dpflow_cfg_get(&root, "top", &top));
	cr_expect_str_eq(top.path, "top");
	cr_expect(dpflow_cfg_is_map(&top));
	cr_expect_eq(dpflow_cfg_len(&top), 5);
	cr_expect_not(dpflow_cfg_get(&top, "none", &v));
	cr_assert(dpflow_cfg_get(&top, "list", &list));
	cr_expect(dpflow_cfg_is_seq(&list));
	cr_expect_eq(dpflow_cfg_len(&list), 3);
	cr_assert(dpflow_cfg_item(&list, 1, &it));
	cr_expect_str_eq(it.path, "top.list[1]");
	cr_expect_str_eq(dpflow_cfg_str(&it), "two");
	cr_expect_eq(dpflow_cfg_line(&it), 2);
	cr_expect_not(dpflow_cfg_item(&list, 3, &it));
	cr_assert(dpflow_cfg_item(&list, 2, &it));
	cr_assert(dpflow_cfg_pair(&it, 0, &key, &v));
	cr_expect_str_eq(key, "k");
	cr_expect_str_eq(v.path, "top.list[2].k");
	cr_expect_null(dpflow_cfg_str(&it));
	cr_assert(dpflow_cfg_get(&top, "flag", &v));
	cr_expect_eq(dpflow_cfg_bool(&v, &b), 0);
	cr_expect(b);
	cr_assert(dpflow_cfg_get(&top, "nothing", &v));
	cr_expect(dpflow_cfg_is_null(&v));
	cr_expect(dpflow_cfg_is_scalar(&v));
	u = 5;
	cr_expect_eq(dpflow_cfg_opt_u64(&top, "absent", 10, &u), 0);
	cr_expect_eq(u, 5, "unchanged when absent");
	cr_expect_eq(dpflow_cfg_opt_u64(&top, "hex", 100, &u), 0);
	cr_expect_eq(u, 16);

	/* errors: the loader's words, FILE:LINE: PATH: */
	cr_assert(dpflow_cfg_get(&top, "name", &v));
	cr_expect_eq(dpflow_cfg_string(&v, &s), -EINVAL);
	cr_expect_str_eq(err.msg,
			 "t.yaml:4: top.name: expected a non-empty string");
	cr_expect_eq(dpflow_cfg_opt_u64(&top, "hex", 15, &u), -ERANGE);
	cr_expect_str_eq(err.msg,
			 "t.yaml:6: top.hex: '0x10' is out of range (max 15)");
	cr_expect_eq(dpflow_cfg_bool(&v, &b), -EINVAL);
	cr_expect_str_eq(err.msg, "t.yaml:4: top.name: expected true or false");
	cr_expect_eq(dpflow_cfg_error(&root, EPERM, "at the %s", "top"),
		     -EPERM);
	cr_expect_str_eq(err.msg, "t.yaml:1: (top): at the top");
	cr_expect_eq(err.code, EPERM);
	dpflow_cfg_doc_free(doc);
}

Test(config_node, request_text_with_a_path_prefix)
{
	/* what an app does with a control request's JSON (lb_ctl.c) */
	static const char *const json = "{\"vip\":\"1.2.3\",\"port\":\"x\"}";
	struct dpflow_error err = {0};
	struct dpflow_cfg_doc *doc =
	    dpflow_cfg_doc_parse(json, strlen(json), "request", &err);
	struct dpflow_cfg_node root, v;
	uint64_t u;

	cr_assert(doc, "%s", err.msg);
	cr_assert(dpflow_cfg_doc_root(doc, "service", &root));
	cr_assert(dpflow_cfg_get(&root, "port", &v));
	cr_expect_eq(dpflow_cfg_u64(&v, 65535, &u), -EINVAL);
	cr_expect_str_eq(err.msg,
			 "request:1: service.port: 'x' is not a number");
	dpflow_cfg_doc_free(doc);
}

Test(config_node, unreadable_and_invalid_documents)
{
	struct dpflow_error err = {0};

	cr_expect_null(dpflow_cfg_doc_load("/nonexistent/x.yaml", &err));
	cr_expect_str_eq(err.msg,
			 "/nonexistent/x.yaml: No such file or directory");
	cr_expect_null(dpflow_cfg_doc_load("/tmp", &err));
	cr_expect_str_eq(err.msg, "/tmp: is a directory, not a config file");
	cr_expect_null(dpflow_cfg_doc_parse("a: [1\nb: 2\n", 11, "bad", &err));
	cr_expect(strncmp(err.msg, "bad:", 4) == 0, "%s", err.msg);
	dpflow_cfg_doc_free(NULL);
}
