/*
 * `dpflow validate CONFIG` (and `dpflow run --check CONFIG`, which calls
 * validate_config()): load a config as `dpflow run` would, with the
 * software handler `count` and the apps of its `apps:` section (found in
 * the app registry, dpflow/app.h), but open no port (the loader's
 * check-only mode: URIs checked, files and interfaces looked at, nothing
 * created, truncated or bound), then print what would run: ports, pipes
 * with their templates, forwarding and entries, and what each app
 * describes. Exit 0 valid, 1 not (the loader's FILE:LINE message on
 * stderr), 2 usage.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/app.h"
#include "dpflow/config.h"
#include "dpflow/dpflow.h"
#include "dpflow/runtime.h"

#include "cmds.h"

/* The `count` handler a run registers; a checked config never runs it. */
static void count_handler(void *arg, struct dpflow_pool *pool,
			  const uint32_t *idx, uint16_t n)
{
	(void)arg;
	dpflow_pool_free_bulk(pool, idx, n);
}

int validate_config(const char *path, unsigned workers, FILE *out)
{
	struct dpflow_handler_def handlers[] = {
	    {"count", count_handler, NULL},
	};
	struct dpflow_config_opts copts = {0};
	struct dpflow_app_opts aopts = {0};
	struct dpflow_error err = {0};
	struct dpflow_apps *apps;
	struct dpflow_ctx *ctx;
	int rc;

	copts.handlers = handlers;
	copts.n_handlers = 1;
	copts.check_only = true;
	ctx = dpflow_config_load(path, &copts, &err);
	if (!ctx) {
		fprintf(stderr, "dpflow: %s\n", err.msg);
		return 1;
	}
	aopts.workers = workers;
	aopts.target = DPFLOW_APP_TARGET_CPU;
	aopts.check_only = true;
	apps = dpflow_apps_load(ctx, path, &aopts, &err);
	if (!apps) {
		fprintf(stderr, "dpflow: %s\n", err.msg);
		dpflow_ctx_destroy(ctx);
		return 1;
	}
	rc = dpflow_config_describe(ctx, out);
	if (!rc)
		dpflow_apps_describe(apps, out);
	if (rc)
		fprintf(stderr, "dpflow: %s: out of memory\n", path);
	else
		fprintf(out, "%s: valid\n", path);
	dpflow_apps_destroy(apps);
	dpflow_ctx_destroy(ctx);
	return rc ? 1 : 0;
}

static void usage(FILE *f)
{
	fprintf(
	    f, "usage: dpflow validate [--workers N] CONFIG.yaml\n"
	       "\n"
	       "Load CONFIG as `dpflow run` would (ports, pipes, entries, the\n"
	       "'count' handler, the apps of its apps: section) without\n"
	       "opening any port: no file is created or truncated, no socket\n"
	       "opened, no interface touched. Port URIs are checked: the\n"
	       "kind, each port's keys, pcap rx files readable as captures,\n"
	       "tx paths writable, afpacket and afxdp interfaces present.\n"
	       "Then print the ports (name, kind, URI), the pipes (type, root\n"
	       "port, match, action templates, forwarding, miss) with their\n"
	       "entries as `dpflowctl entries list` prints them, and what\n"
	       "each app would run (`dpflow apps` lists the apps built in).\n"
	       "`dpflow run --check` does the same.\n"
	       "\n"
	       "  --workers N   check apps as a run with N workers builds\n"
	       "                them (default 1)\n"
	       "  -h, --help    this text\n"
	       "\n"
	       "Exit status: 0 valid, 1 invalid (FILE:LINE: KEY: message on\n"
	       "stderr), 2 usage.\n");
}

int cmd_validate(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"workers", required_argument, NULL, 'w'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	unsigned long workers = 1;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'w':
			if (opt_count("validate", "workers", optarg, 1,
				      DPFLOW_WORKERS_MAX, &workers))
				return 2;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return 2;
	}
	return validate_config(argv[optind], (unsigned)workers, stdout);
}
