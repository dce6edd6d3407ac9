/*
 * Apps: data planes built on dpflow (a load balancer, a firewall, a
 * switch, ...) as plugins. An app registers an ops table under its name;
 * `dpflow run` and `dpflow validate` load every app a config names under
 * `apps:` through the registry, the control socket hands it the requests
 * named NAME.VERB, the metrics endpoint appends its families, and the
 * run's control thread ticks it. Nothing in tools/ or lib/ names an app.
 *
 * Three registrations, each keyed by the app's name, because they live
 * in different programs:
 *   - struct dpflow_app_ops: the app itself (config section, control
 *     requests, metrics, tick, reports), linked into `dpflow` and into
 *     any program that runs data planes;
 *   - struct dpflow_app_cli: its `dpflowctl APP VERB ...` commands, linked
 *     into dpflowctl, which needs no data plane (jansson only);
 *   - struct dpflow_app_workload: its `dpflow bench` workloads, linked into
 *     `dpflow` beside the benchmark code.
 * Each is registered once per program by a constructor
 * (DPFLOW_APP_REGISTER() and its siblings), as DPDK's RTE_INIT drivers
 * are; an app's static library must then be linked whole (meson:
 * link_whole, or its objects), or its constructor is left out.
 * Registering a name twice
 * is refused: the macros stop the program with a message, since two
 * apps of one name linked together is a build mistake.
 *
 * Threads: registration runs before main() (or before any thread looks
 * at the registry); lookups and iteration read it from any thread after.
 * Every op of struct dpflow_app_ops runs on the run's control thread
 * (the thread that built the context); the app's data path runs on the
 * data threads through what it built on the context (pipes, software
 * handlers), never through these ops.
 *
 * docs/apps/writing-an-app.md is the guide; apps/l4lb is the example.
 */
#ifndef DPFLOW_APP_H
#define DPFLOW_APP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "dpflow/config_node.h"
#include "dpflow/error.h"
#include "dpflow/flow.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Apps (and app commands, and app workloads) one program may register. */
#define DPFLOW_APPS_MAX 32
/* An app's name: 1..31 bytes of [a-z0-9_-], a letter first. */
#define DPFLOW_APP_NAME_MAX 32

/* The targets a run may have; an app says which it supports. */
enum dpflow_app_target {
	DPFLOW_APP_TARGET_CPU = 1u << 0,
	DPFLOW_APP_TARGET_GPU = 1u << 1,
};

/* How the run that loads an app is set up. */
struct dpflow_app_opts {
	unsigned workers; /* data threads that will run the app (>= 1): more
			     than one means its state is shared */
	unsigned target;  /* the run's target: one DPFLOW_APP_TARGET_ bit */
	bool check_only;  /* `dpflow validate` / `run --check`: the context's
			     ports are placeholders; the app is described and
			     destroyed, never run */
};

/*
 * An app. Every op gets the instance its load returned. Ops marked
 * optional may be NULL.
 */
struct dpflow_app_ops {
	/* the config section `apps: {NAME: ...}` and the prefix of its
	 * control requests (NAME.VERB); see DPFLOW_APP_NAME_MAX */
	const char *name;
	/* one line for `dpflow apps` (optional) */
	const char *summary;
	/* DPFLOW_APP_TARGET_ bits it runs on; a run on another target is
	 * refused before load with "apps.NAME runs on the T target only" */
	unsigned targets;

	/*
	 * Build the app on @ctx (its ports and pipes loaded from the same
	 * config) from @section, the node of apps.NAME (config_node.h):
	 * check every key, create what it needs on the context (pipes,
	 * software handlers), and return the instance. NULL + @err on error
	 * (nothing left behind): errors about a node through
	 * dpflow_cfg_error(), which writes to @err, so that they read
	 * "FILE:LINE: apps.NAME.KEY: what is wrong" as the loader's do.
	 * The section's document is freed once every app has loaded:
	 * copy what the instance keeps (strings included).
	 */
	void *(*load)(struct dpflow_ctx *ctx,
		      const struct dpflow_cfg_node *section,
		      const struct dpflow_app_opts *opts,
		      struct dpflow_error *err);
	/* Free the instance; the context outlives it. */
	void (*destroy)(void *app);

	/* `dpflow validate`: what it would run, as indented lines (four
	 * spaces) under "apps:" and "  NAME:" (optional) */
	void (*describe)(void *app, FILE *out);
	/* The start-up banner's line about it, after "  app    NAME ": a
	 * few words, no newline (optional) */
	void (*banner)(void *app, FILE *out);
	/* `dpflow run`'s exit report: its counters, after dpflow's own
	 * (optional) */
	void (*report)(void *app, FILE *out);
	/*
	 * A control request named NAME.VERB (dpflow_ctl_hooks.request in
	 * ctl.h): @cmd the request's name, @req its whole text (a JSON
	 * object, valid). Returns the reply, a malloc'ed one-line JSON
	 * object with the request's "id" copied (optional: without it,
	 * requests for the app get "unknown cmd").
	 */
	char *(*request)(void *app, const char *cmd, const char *req,
			 size_t len);
	/* Prometheus text (HELP, TYPE and samples of its own families,
	 * named dpflow_NAME_*) appended to each scrape (optional) */
	void (*metrics)(void *app, FILE *out);
	/* Periodic work (health checks, timers), about every millisecond
	 * while the data plane runs, with dpflow_clock_mono_ns() time;
	 * must not block (optional) */
	void (*tick)(void *app, uint64_t now_ns);
};

/*
 * Register @ops (kept by pointer: static storage). 0, -EINVAL (a bad
 * name, no load or destroy, no target), -EEXIST (the name is taken) or
 * -ENOSPC (DPFLOW_APPS_MAX apps already).
 */
int dpflow_app_register(const struct dpflow_app_ops *ops);
/* The app named @name, or NULL. */
const struct dpflow_app_ops *dpflow_app_find(const char *name);
/* Registered apps, in name order: dpflow_app_at(0..count-1). */
unsigned dpflow_app_count(void);
const struct dpflow_app_ops *dpflow_app_at(unsigned i);

/* ---- dpflowctl: an app's client commands ---------------------------- */

struct json_t; /* jansson's */

/* Exit statuses of dpflowctl: a failed request (or no server), a usage
 * error. */
#define DPFLOW_APP_EXIT_FAIL  1
#define DPFLOW_APP_EXIT_USAGE 2

/* What dpflowctl lends an app's commands. */
struct dpflow_app_client {
	/*
	 * Send request @req (its reference is taken) on the control socket
	 * and return the reply whose "ok" was true. An error reply or a
	 * lost connection is printed ("dpflowctl: MESSAGE (field KEY)") and
	 * gives NULL; a socket that cannot be reached ends the program
	 * (exit 1) with a message.
	 */
	struct json_t *(*call)(struct json_t *req);
	/* Print @v as one line of compact JSON on stdout (--json). */
	void (*print_json)(struct json_t *v);
	/* The whole of file @path ("-": standard input), malloc'ed, not
	 * NUL-terminated, its size in *@len; NULL after a message. */
	char *(*read_file)(const char *path, size_t *len);
	/* @len bytes of YAML or JSON as JSON (plain nulls as null, every
	 * other scalar a string, as the server's config parsers read
	 * them); NULL with a message in @why. */
	struct json_t *(*yaml_to_json)(const char *text, size_t len,
				       const char *name, char *why,
				       size_t why_len);
	/* "dpflowctl CMD: WHY; try 'dpflowctl CMD --help'" on stderr;
	 * returns DPFLOW_APP_EXIT_USAGE. */
	int (*usage_error)(const char *cmd, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));
};

/* `dpflowctl APP VERB ...`. */
struct dpflow_app_verb {
	const char *name;
	/* `dpflowctl APP VERB --help`: starts "usage: dpflowctl APP VERB" */
	const char *usage;
	/* Run it: @argv[0] is VERB, the rest its arguments (none is -h or
	 * --help: dpflowctl answers those). Returns the exit status: 0,
	 * DPFLOW_APP_EXIT_FAIL or DPFLOW_APP_EXIT_USAGE. */
	int (*run)(const struct dpflow_app_client *cl, int argc, char **argv);
};

struct dpflow_app_cli {
	const char *app; /* the app's name: `dpflowctl APP ...` */
	/* dpflowctl --help's line for it; may hold newlines */
	const char *summary;
	/* `dpflowctl APP --help`: starts "usage: dpflowctl APP", then each
	 * verb on a line of its own as "  VERB ..." (the completion reads
	 * them there) */
	const char *usage;
	const struct dpflow_app_verb *verbs;
	unsigned n_verbs;
};

/* As dpflow_app_register(), for client commands (unique by app). */
int dpflow_app_cli_register(const struct dpflow_app_cli *cli);
const struct dpflow_app_cli *dpflow_app_cli_find(const char *app);
unsigned dpflow_app_cli_count(void);
const struct dpflow_app_cli *dpflow_app_cli_at(unsigned i);

/* ---- dpflow bench: an app's workloads -------------------------------- */

struct dpflow_app_workload {
	const char *app;     /* the app it measures */
	const char *name;    /* `dpflow bench NAME` (unique) */
	const char *summary; /* one line for `dpflow bench --help` */
	/* `dpflow bench NAME [OPTIONS]`: @argv[0] is NAME; an exit status */
	int (*run)(int argc, char **argv);
	/* `dpflow bench NAME --target gpu [OPTIONS]` (@argv without
	 * --target), or NULL; a build without the GPU target leaves it NULL
	 * but still sets gpu */
	int (*run_gpu)(int argc, char **argv);
	bool gpu; /* takes --target gpu where the GPU target is built */
};

/* As dpflow_app_register(), for workloads (unique by workload name). */
int dpflow_app_workload_register(const struct dpflow_app_workload *w);
const struct dpflow_app_workload *dpflow_app_workload_find(const char *name);
unsigned dpflow_app_workload_count(void);
const struct dpflow_app_workload *dpflow_app_workload_at(unsigned i);

/* ---- registration at start-up ---------------------------------------- */

/* For the macros below: @what ("app", "app commands", "app workload")
 * @name could not be registered (@rc): a message on stderr, abort(). */
void dpflow_app_register_failed(const char *what, const char *name, int rc)
    __attribute__((noreturn));

#define DPFLOW_APP_CTOR_(fn, var, what, key)                                 \
	__attribute__((constructor)) static void dpflow_app_ctor_##var(void) \
	{                                                                    \
		int rc_ = fn(&(var));                                        \
		if (rc_)                                                     \
			dpflow_app_register_failed(what, (var).key, rc_);    \
	}

/* Register the struct dpflow_app_ops (or _cli, _workload) variable @var
 * of this file when the program starts. */
#define DPFLOW_APP_REGISTER(var) \
	DPFLOW_APP_CTOR_(dpflow_app_register, var, "app", name)
#define DPFLOW_APP_CLI_REGISTER(var) \
	DPFLOW_APP_CTOR_(dpflow_app_cli_register, var, "app commands", app)
#define DPFLOW_APP_WORKLOAD_REGISTER(var)                                   \
	DPFLOW_APP_CTOR_(dpflow_app_workload_register, var, "app workload", \
			 name)

/* ---- running apps: what `dpflow run` and `dpflow validate` call ------ */

/* The apps of one run. */
struct dpflow_apps;

/*
 * Load every app that config file @path names under `apps:`, in the
 * order it names them, on @ctx (which dpflow_config_load() built from the
 * same file). No `apps` key (or an empty one): an empty set. NULL + @err
 * ("FILE:LINE: apps.X: ...") when an app is unknown (the message lists
 * those registered), does not run on @opts' target, or fails to load;
 * the apps loaded before it are destroyed. Control thread.
 */
struct dpflow_apps *dpflow_apps_load(struct dpflow_ctx *ctx, const char *path,
				     const struct dpflow_app_opts *opts,
				     struct dpflow_error *err);
/* Destroy every app, then the set (NULL ok). */
void dpflow_apps_destroy(struct dpflow_apps *apps);
/* How many apps the set holds, and the @i-th's ops (config order). */
unsigned dpflow_apps_count(const struct dpflow_apps *apps);
const struct dpflow_app_ops *dpflow_apps_ops(const struct dpflow_apps *apps,
					     unsigned i);

/* "apps:" and each app's "  NAME:" and describe() lines (nothing when
 * the set is empty). */
void dpflow_apps_describe(const struct dpflow_apps *apps, FILE *out);
/* One banner line an app: "  app    NAME" and its banner() words. */
void dpflow_apps_banner(const struct dpflow_apps *apps, FILE *out);
/* Each app's report(). */
void dpflow_apps_report(const struct dpflow_apps *apps, FILE *out);
/* Each app's tick(). */
void dpflow_apps_tick(const struct dpflow_apps *apps, uint64_t now_ns);
/*
 * dpflow_ctl_hooks.request with @arg the set: a request NAME.VERB goes
 * to app NAME's request(); NULL when the run has no such app (the
 * control socket then says "no NAME app in this run").
 */
char *dpflow_apps_request(void *arg, const char *cmd, const char *req,
			  size_t len);
/* dpflow_metrics_app()'s render with @arg the set: each app's metrics(). */
void dpflow_apps_metrics(void *arg, FILE *out);

#ifdef __cplusplus
}
#endif

#endif /* DPFLOW_APP_H */
