/*
 * `dpflow run CONFIG.yaml`: build the data plane a config describes, run
 * its ports until the inputs are exhausted (pcap), --duration passes or a
 * signal arrives, then print per-port, per-pipe and per-entry counters,
 * the drops by reason, the duration and rates, and a status line.
 *
 * Start-up checks everything that can fail before a packet moves: option
 * values, the CPUs of --cpus, the --control path (before any port is
 * opened: a second instance is refused there), the config, the GPU bind,
 * the workers (created, not started), the --metrics bind and the control
 * socket; SIGINT and SIGTERM are caught from before the config loads,
 * and one that arrived during start-up fails the start. A start that
 * fails discards the ports' outputs, so every existing file is left as it
 * was (pcap ports write to a temporary file renamed into place when the
 * port finishes); so does a run that fails (a capture cut short, a failed
 * write): every port is synced and its errors collected before any output
 * is committed. A banner on stderr says what runs; --stats-interval
 * prints per-port rates while it runs.
 *
 * Besides the ports, the loop serves what the config may forward to
 * inside the process: the software handler `count` (counts and frees
 * packets), the RSS software queues (drained after each burst, counted per
 * queue), and aging (every 100 ms each pipe is aged and the entries that
 * aged out are removed in one batch).
 *
 * With --target gpu (a build with the GPU target) the pipe graph runs on
 * GPU 0 through lib/gpu/flow (gpu_flow.h): same packets out, same
 * counters; what the GPU target cannot run yet is refused at start with
 * the pipe and the feature named.
 *
 * Apps (the config's `apps:` section) are found in the app registry
 * (dpflow/app.h) and loaded after the config; the control socket hands
 * them their requests, the metrics endpoint their families, the control
 * loop ticks them, and each adds a banner line and its exit report.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "dpflow/app.h"
#include "dpflow/config.h"
#include "dpflow/dpflow.h"
#include "dpflow/ctl.h"
#include "dpflow/flow.h"
#include "dpflow/metrics.h"
#include "dpflow/runtime.h"
#ifdef DPFLOW_HAVE_GPU
#include "dpflow/gpu_flow.h"
#endif

#include "cmds.h"

#define RUN_BURST  32
#define RUN_AGE_NS (100ull * 1000 * 1000)
/* empty polls of every port before the loop naps RUN_NAP_NS at a time */
#define RUN_IDLE_POLLS 1024
#define RUN_NAP_NS     20000
/* the control thread's nice value once the workers run */
#define RUN_CTL_NICE 10

static const struct timespec run_nap = {0, RUN_NAP_NS};
/* the control thread's pace while workers run */
static const struct timespec run_ctl_nap = {0, 1000000};

/* What the loop counts beside the engine's own counters. */
struct run_state {
	struct dpflow_ctx *ctx;
	struct dpflow_queue *q;
	struct dpflow_gpu_flow *gpu;	    /* NULL: the CPU target */
	struct dpflow_rt *rt;		    /* the CPU target's workers */
	const char *metrics_addr;	    /* --metrics, or NULL */
	struct dpflow_metrics *metrics;	    /* its endpoint */
	const char *ctl_path;		    /* --control, or NULL */
	struct dpflow_ctl *ctl;		    /* the control socket */
	struct dpflow_apps *apps;	    /* the config's apps */
	uint64_t stats_ns;		    /* --stats-interval, 0: none */
	uint64_t t_start, t_end;	    /* when packets began and stopped */
	uint64_t t_stats;		    /* the last rates line */
	uint64_t rx_prev[DPFLOW_PORTS_MAX]; /* packets at t_stats */
	uint64_t tx_prev[DPFLOW_PORTS_MAX];
	char why[2 * DPFLOW_ERROR_MSG_MAX]; /* the first failure, or "" */
	uint64_t handler_pkts;		    /* the `count` handler */
	uint64_t rss_pkts[DPFLOW_RSS_QUEUES_MAX];
	uint64_t aged[DPFLOW_PIPES_MAX];
	unsigned aging_pipe; /* the pipe being aged */
	unsigned n_removed;  /* removals queued */
};

/* the signal (SIGINT, SIGTERM) that asked the run to stop, or 0 */
static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	stop_requested = sig;
}

/*
 * SIGINT and SIGTERM ask for a stop. During start-up (@restart false) they
 * also interrupt what blocks (opening a FIFO that has no writer yet), so
 * the start fails at once; once the workers run, calls restart.
 */
static void catch_stop_signals(bool restart)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = restart ? SA_RESTART : 0;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

/* A start stopped by a signal: say so (the start then fails). */
static void stopped_at_start(void)
{
	fprintf(stderr,
		"dpflow run: %s during start-up: stopped before any packet "
		"moved, outputs discarded\n",
		stop_requested == SIGINT ? "SIGINT" : "SIGTERM");
}

/* Print "dpflow run: WHAT" on stderr and keep the first such failure. */
static void run_failed(struct run_state *st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void run_failed(struct run_state *st, const char *fmt, ...)
{
	char msg[sizeof(st->why)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "dpflow run: %s\n", msg);
	if (!st->why[0])
		snprintf(st->why, sizeof(st->why), "%s", msg);
}

/* The built-in software handler `count`. */
static void count_handler(void *arg, struct dpflow_pool *pool,
			  const uint32_t *idx, uint16_t n)
{
	/* workers call it concurrently */
	__atomic_fetch_add((uint64_t *)arg, n, __ATOMIC_RELAXED);
	dpflow_pool_free_bulk(pool, idx, n);
}

static void drain_rss(struct run_state *st)
{
	struct dpflow_pool *pool = dpflow_ctx_pool(st->ctx);

	for (unsigned q = 0; q < dpflow_ctx_rss_queues(st->ctx); q++) {
		uint32_t idx[RUN_BURST];
		uint16_t n;

		while ((n = dpflow_ctx_rss_rx(st->ctx, (uint16_t)q, idx,
					      RUN_BURST)) > 0) {
			st->rss_pkts[q] += n;
			dpflow_pool_free_bulk(pool, idx, n);
		}
	}
}

static void on_aged(struct dpflow_entry *e, uint64_t last_hit_ns, void *arg)
{
	struct run_state *st = arg;

	(void)last_hit_ns;
	if (!dpflow_entry_remove(st->q, e, NULL)) {
		st->aged[st->aging_pipe]++;
		st->n_removed++;
	}
}

/* The GPU target: apply the queued batch, then publish it to the device. */
static int gpu_batch(struct run_state *st)
{
#ifdef DPFLOW_HAVE_GPU
	struct dpflow_error err = {0};
	int rc = dpflow_entries_process(st->q, NULL, &err);

	if (!rc)
		rc = dpflow_gpu_flow_sync(st->gpu, &err);
	if (rc)
		fprintf(stderr, "dpflow run: removing aged entries: %s\n",
			err.msg);
	return rc;
#else
	(void)st;
	return -ENOTSUP;
#endif
}

/*
 * Age every pipe with aging (and expire the connections of ct pipes),
 * then remove the entries that aged out as one batch. The batch is
 * processed with this thread offline (flow.h: not an online reader).
 */
static int age_pipes(struct run_state *st)
{
	uint64_t now = dpflow_clock_ns();
	struct dpflow_error err = {0};
	int rc;

	st->n_removed = 0;
	for (unsigned i = 0; i < dpflow_ctx_pipe_count(st->ctx); i++) {
		struct dpflow_pipe *pipe = dpflow_ctx_pipe(st->ctx, i);
		const struct dpflow_pipe_cfg *cfg = dpflow_pipe_cfg(pipe);

		if (!cfg->monitor.aging_ms && cfg->type != DPFLOW_PIPE_CT)
			continue;
		st->aging_pipe = i;
		dpflow_pipe_age(pipe, now, 0, on_aged, st);
	}
	if (!st->n_removed)
		return 0;
	if (st->gpu)
		return gpu_batch(st);
	/* this thread is the control thread: never an RCU reader */
	rc = dpflow_entries_process(st->q, NULL, &err);
	if (rc)
		fprintf(stderr, "dpflow run: removing aged entries: %s\n",
			err.msg);
	return rc;
}

/* One burst on the GPU target; a GPU failure stops the run. */
static int run_gpu_burst(struct run_state *st, uint16_t port, uint32_t *idx,
			 uint16_t n)
{
#ifdef DPFLOW_HAVE_GPU
	struct dpflow_error err = {0};
	int rc = dpflow_gpu_flow_process(st->gpu, port, idx, n, &err);

	if (rc < 0) {
		run_failed(st, "--target gpu: %s", err.msg);
		return rc;
	}
	return 0;
#else
	(void)st;
	(void)port;
	(void)idx;
	(void)n;
	return -ENOTSUP;
#endif
}

#ifdef DPFLOW_HAVE_GPU
/* After an entry batch from the control socket: publish it to the GPU. */
static int gpu_after_batch(void *arg, struct dpflow_error *err)
{
	return dpflow_gpu_flow_sync(arg, err);
}
#endif

/*
 * The control socket (--control), with the runtime's workers (NULL on the
 * GPU target) and, on the GPU target, a hook that publishes each batch.
 */
static int open_ctl(struct run_state *st)
{
	struct dpflow_ctl_hooks h = {0};
	struct dpflow_error err = {0};

	if (!st->ctl_path)
		return 0;
	h.rt = st->rt;
	if (dpflow_apps_count(st->apps)) {
		h.request = dpflow_apps_request;
		h.request_arg = st->apps;
	}
#ifdef DPFLOW_HAVE_GPU
	if (st->gpu) {
		h.after_batch = gpu_after_batch;
		h.arg = st->gpu;
	}
#endif
	st->ctl = dpflow_ctl_open(st->ctx, st->ctl_path, &h, &err);
	if (!st->ctl) {
		fprintf(stderr, "dpflow run: --control: %s\n", err.msg);
		return -1;
	}
	return 0;
}

/*
 * Everything that can fail before packets flow, after the config: the
 * GPU bind, or the workers (created, not started) and the metrics
 * endpoint; then the control socket. 0, or -1 after a message.
 */
static int prepare(struct run_state *st, const struct dpflow_rt_cfg *rcfg,
		   bool use_gpu)
{
	struct dpflow_error err = {0};

	if (use_gpu) {
#ifdef DPFLOW_HAVE_GPU
		st->gpu = dpflow_gpu_flow_bind(st->ctx, 0, &err);
#endif
		if (!st->gpu) {
			fprintf(stderr, "dpflow run: --target gpu: %s\n",
				err.msg);
			return -1;
		}
		return open_ctl(st);
	}
	st->rt = dpflow_rt_create(st->ctx, rcfg, &err);
	if (!st->rt) {
		fprintf(stderr, "dpflow run: %s%s%s\n", err.field ? "--" : "",
			err.field ? err.field : "", err.msg);
		return -1;
	}
	if (st->metrics_addr) {
		st->metrics = dpflow_metrics_open(st->ctx, st->rt,
						  st->metrics_addr, &err);
		if (!st->metrics) {
			fprintf(stderr, "dpflow run: --metrics: %s\n", err.msg);
			return -1;
		}
		if (dpflow_apps_count(st->apps))
			dpflow_metrics_app(st->metrics, dpflow_apps_metrics,
					   st->apps);
	}
	return open_ctl(st);
}

/* Start-up banner on stderr: ports, workers and their CPUs, pipes. */
static void print_banner(const struct run_state *st, const char *path,
			 const struct dpflow_rt_cfg *rcfg)
{
	struct dpflow_ctx *ctx = st->ctx;
	unsigned n_ports = dpflow_ctx_port_count(ctx);
	unsigned n_pipes = dpflow_ctx_pipe_count(ctx);
	unsigned n_workers = st->rt ? dpflow_rt_workers(st->rt) : 0;

	fprintf(stderr, "dpflow run: %s: %u port%s, %u pipe%s, ", path, n_ports,
		n_ports == 1 ? "" : "s", n_pipes, n_pipes == 1 ? "" : "s");
	if (st->gpu)
		fprintf(stderr, "target gpu (GPU 0, one proxy thread)\n");
	else
		fprintf(stderr, "target cpu, %u worker%s\n", n_workers,
			n_workers == 1 ? "" : "s");
	for (unsigned p = 0; p < n_ports; p++)
		fprintf(stderr, "  port   %-12s %s\n",
			dpflow_ctx_port_name(ctx, p),
			dpflow_port_name(dpflow_ctx_port(ctx, p)));
	for (unsigned w = 0; w < n_workers; w++) {
		if (rcfg->cpus)
			fprintf(stderr, "  worker %-12u cpu %d\n", w,
				rcfg->cpus[w]);
		else
			fprintf(stderr, "  worker %-12u any cpu\n", w);
	}
	for (unsigned i = 0; i < n_pipes; i++) {
		struct dpflow_pipe *pipe = dpflow_ctx_pipe(ctx, i);
		const struct dpflow_pipe_cfg *cfg = dpflow_pipe_cfg(pipe);

		unsigned n_entries = dpflow_pipe_entry_count(pipe);

		fprintf(stderr, "  pipe   %-12s %s, %u entr%s",
			dpflow_pipe_name(pipe),
			dpflow_pipe_type_name(cfg->type), n_entries,
			n_entries == 1 ? "y" : "ies");
		if (cfg->root)
			fprintf(stderr, ", root of port %s",
				dpflow_ctx_port_name(ctx, cfg->port));
		fprintf(stderr, "\n");
	}
	dpflow_apps_banner(st->apps, stderr);
	if (st->ctl)
		fprintf(stderr, "  control socket %s\n", st->ctl_path);
	if (st->metrics)
		fprintf(stderr, "  metrics on http://%s/metrics (port %u)\n",
			st->metrics_addr, dpflow_metrics_port(st->metrics));
}

/* Every --stats-interval: each port's receive and transmit rates. */
static void stats_tick(struct run_state *st, uint64_t now)
{
	struct dpflow_ctx *ctx = st->ctx;
	double dt;

	if (!st->stats_ns || now < st->t_stats + st->stats_ns)
		return;
	dt = (double)(now - st->t_stats) / 1e9;
	fprintf(stderr,
		"dpflow run: %.1f s:", (double)(now - st->t_start) / 1e9);
	for (unsigned p = 0; p < dpflow_ctx_port_count(ctx); p++) {
		struct dpflow_port_stats s;

		dpflow_port_stats_get(dpflow_ctx_port(ctx, p), &s);
		fprintf(stderr, "%s %s rx %.0f pps tx %.0f pps", p ? "," : "",
			dpflow_ctx_port_name(ctx, p),
			(double)(s.rx_pkts - st->rx_prev[p]) / dt,
			(double)(s.tx_pkts - st->tx_prev[p]) / dt);
		st->rx_prev[p] = s.rx_pkts;
		st->tx_prev[p] = s.tx_pkts;
	}
	fprintf(stderr, "\n");
	st->t_stats = now;
}

/*
 * The GPU target: this thread receives, runs each burst on the GPU and
 * serves aging, until the inputs end, the deadline or a signal.
 */
static int run_gpu_loop(struct run_state *st, uint64_t deadline)
{
	struct dpflow_ctx *ctx = st->ctx;
	uint64_t next_age = dpflow_clock_ns() + RUN_AGE_NS;
	unsigned idle = 0;
	int rc = 0;

	while (!stop_requested && !rc) {
		bool all_done = true;
		unsigned got = 0;
		uint64_t now;

		for (unsigned p = 0; p < dpflow_ctx_port_count(ctx); p++) {
			struct dpflow_port *port = dpflow_ctx_port(ctx, p);
			uint32_t idx[RUN_BURST];
			uint16_t n;

			if (dpflow_port_rx_done(port))
				continue;
			all_done = false;
			for (uint16_t qi = 0;
			     qi < dpflow_port_rx_queues(port) && !rc; qi++) {
				n = dpflow_port_rx_burst(port, qi, idx,
							 RUN_BURST);
				got += n;
				if (n)
					rc = run_gpu_burst(st, (uint16_t)p, idx,
							   n);
			}
		}
		idle = got ? 0 : idle + 1;
		if (idle >= RUN_IDLE_POLLS)
			nanosleep(&run_nap, NULL);
		if (st->ctl)
			dpflow_ctl_serve(st->ctl, 0);
		drain_rss(st);
		now = dpflow_clock_ns();
		if (now >= next_age) {
			age_pipes(st);
			next_age = now + RUN_AGE_NS;
		}
		dpflow_apps_tick(st->apps, dpflow_clock_mono_ns());
		stats_tick(st, now);
		if (all_done || (deadline && now >= deadline))
			break;
	}
	return rc;
}

/*
 * The CPU target, its workers started: this thread is the control
 * thread (metrics, RSS queues, aging, the control socket, rates) until
 * the inputs end, the deadline or a signal; then the workers drain and
 * stop.
 */
static void run_workers(struct run_state *st, uint64_t deadline)
{
	uint64_t next_age = dpflow_clock_ns() + RUN_AGE_NS;

	/* control work (a batch of 10k entries parses for a while) yields
	 * to the workers where they share cores */
	if (setpriority(PRIO_PROCESS, (id_t)gettid(), RUN_CTL_NICE))
		fprintf(stderr, "dpflow run: control thread priority: %s\n",
			strerror(errno));
	while (!stop_requested) {
		uint64_t now;

		if (st->metrics)
			dpflow_metrics_serve(st->metrics);
		drain_rss(st);
		now = dpflow_clock_ns();
		if (now >= next_age) {
			age_pipes(st);
			next_age = now + RUN_AGE_NS;
		}
		dpflow_apps_tick(st->apps, dpflow_clock_mono_ns());
		stats_tick(st, now);
		if (dpflow_rt_inputs_done(st->rt) ||
		    (deadline && now >= deadline))
			break;
		if (st->ctl)
			dpflow_ctl_serve(st->ctl, 1); /* waits up to 1 ms */
		else
			nanosleep(&run_ctl_nap, NULL);
	}
	dpflow_rt_stop(st->rt);
	drain_rss(st);
}

static bool fwd_is_handler(const struct dpflow_fwd *f)
{
	return f->kind == DPFLOW_FWD_HANDLER;
}

/* Does any pipe or entry forward to a software handler? */
static bool uses_handlers(struct dpflow_ctx *ctx)
{
	for (unsigned i = 0; i < dpflow_ctx_pipe_count(ctx); i++) {
		struct dpflow_pipe *pipe = dpflow_ctx_pipe(ctx, i);
		const struct dpflow_pipe_cfg *cfg = dpflow_pipe_cfg(pipe);

		if (fwd_is_handler(&cfg->fwd) ||
		    fwd_is_handler(&cfg->miss_fwd) ||
		    (cfg->color_fwd.yellow_set &&
		     fwd_is_handler(&cfg->color_fwd.yellow)) ||
		    (cfg->color_fwd.red_set &&
		     fwd_is_handler(&cfg->color_fwd.red)))
			return true;
		if (cfg->fwd.kind != DPFLOW_FWD_PER_ENTRY)
			continue;
		for (uint32_t k = 0; k < dpflow_pipe_size(pipe); k++) {
			const struct dpflow_entry *e =
			    dpflow_pipe_entry(pipe, k);

			if (e && fwd_is_handler(&dpflow_entry_cfg(e)->fwd))
				return true;
		}
	}
	return false;
}

/* Colours, connections and aging of one pipe, under its counters line. */
static void print_pipe_extras(const struct run_state *st, unsigned i,
			      const struct dpflow_pipe_cfg *cfg,
			      const struct dpflow_pipe_stats *s)
{
	if (cfg->monitor.meter.alg || cfg->monitor.shared_meter)
		printf("    colors       %10lu green  %10lu yellow %10lu red\n",
		       (unsigned long)s->color[DPFLOW_COLOR_GREEN],
		       (unsigned long)s->color[DPFLOW_COLOR_YELLOW],
		       (unsigned long)s->color[DPFLOW_COLOR_RED]);
	if (cfg->type == DPFLOW_PIPE_CT)
		printf("    connections  %10lu live   %10lu created %10lu "
		       "expired %10lu invalid %10lu refused\n",
		       (unsigned long)s->ct_live, (unsigned long)s->ct_created,
		       (unsigned long)s->ct_expired,
		       (unsigned long)s->ct_invalid,
		       (unsigned long)s->ct_refused);
	if (cfg->type == DPFLOW_PIPE_CT &&
	    (cfg->ct.replace || cfg->ct.snat.n_addrs))
		printf("    connections  %10lu replaced %8lu nat_exhausted\n",
		       (unsigned long)s->ct_replaced,
		       (unsigned long)s->ct_nat_exhausted);
	if (cfg->monitor.aging_ms)
		printf("    aged out     %10lu entries\n",
		       (unsigned long)st->aged[i]);
}

/* RSS queues, the `count` handler and shared counters. */
static void print_ctx_extras(const struct run_state *st)
{
	struct dpflow_ctx *ctx = st->ctx;
	unsigned n_rss = dpflow_ctx_rss_queues(ctx);
	uint32_t n_sc = dpflow_ctx_shared_counters(ctx);

	if (n_rss) {
		printf("rss queues:\n");
		for (unsigned q = 0; q < n_rss; q++)
			printf("  queue %-6u %10lu pkts\n", q,
			       (unsigned long)st->rss_pkts[q]);
	}
	if (st->handler_pkts || uses_handlers(ctx))
		printf("handlers:\n  %-12s %10lu pkts\n", "count",
		       (unsigned long)st->handler_pkts);
	if (n_sc) {
		printf("shared counters:\n");
		for (uint32_t id = 1; id <= n_sc; id++) {
			struct dpflow_counter c = {0};

			dpflow_shared_counter_read(ctx, id, &c);
			printf("  counter %-4u %10lu pkts %12lu bytes\n", id,
			       (unsigned long)c.pkts, (unsigned long)c.bytes);
		}
	}
}

/* What each worker did (the CPU target). */
static void print_workers(const struct run_state *st)
{
	unsigned n = dpflow_rt_workers(st->rt);

	if (!n)
		return;
	printf("workers:\n");
	for (unsigned w = 0; w < n; w++) {
		struct dpflow_worker_stats s;

		dpflow_rt_worker_stats(st->rt, w, &s);
		printf("  worker %-5u rx %10lu pkts in %lu bursts   ran %10lu "
		       "pkts   handoff out %lu in %lu dropped %lu waits %lu",
		       w, (unsigned long)s.rx_pkts, (unsigned long)s.rx_bursts,
		       (unsigned long)s.pkts, (unsigned long)s.handoff_out,
		       (unsigned long)s.handoff_in,
		       (unsigned long)s.handoff_drops,
		       (unsigned long)s.handoff_waits);
		if (s.cpu >= 0)
			printf("   cpu %d", s.cpu);
		printf("\n");
	}
}

static void print_counters(const struct run_state *st)
{
	struct dpflow_ctx *ctx = st->ctx;
	uint64_t drops[DPFLOW_DROP__COUNT];

	printf("ports:\n");
	for (unsigned p = 0; p < dpflow_ctx_port_count(ctx); p++) {
		struct dpflow_port_stats s;

		dpflow_port_stats_get(dpflow_ctx_port(ctx, p), &s);
		printf("  %-12s rx %10lu pkts %12lu bytes   tx %10lu pkts "
		       "%12lu bytes\n",
		       dpflow_ctx_port_name(ctx, p), (unsigned long)s.rx_pkts,
		       (unsigned long)s.rx_bytes, (unsigned long)s.tx_pkts,
		       (unsigned long)s.tx_bytes);
		if (s.rx_nobuf || s.rx_oversize || s.rx_dropped || s.tx_errors)
			printf(
			    "  %-12s rx_nobuf %lu rx_oversize %lu rx_dropped "
			    "%lu tx_errors %lu\n",
			    "", (unsigned long)s.rx_nobuf,
			    (unsigned long)s.rx_oversize,
			    (unsigned long)s.rx_dropped,
			    (unsigned long)s.tx_errors);
	}
	print_workers(st);
	printf("pipes:\n");
	for (unsigned i = 0; i < dpflow_ctx_pipe_count(ctx); i++) {
		struct dpflow_pipe *pipe = dpflow_ctx_pipe(ctx, i);
		const struct dpflow_pipe_cfg *cfg = dpflow_pipe_cfg(pipe);
		struct dpflow_pipe_stats s;

		dpflow_pipe_stats_get(pipe, &s);
		printf("  %-12s %-8s %10lu pkts %10lu hits %10lu misses   "
		       "%u entries\n",
		       dpflow_pipe_name(pipe), dpflow_pipe_type_name(cfg->type),
		       (unsigned long)s.pkts, (unsigned long)s.hits,
		       (unsigned long)s.misses, dpflow_pipe_entry_count(pipe));
		print_pipe_extras(st, i, cfg, &s);
		if (!cfg->monitor.counter)
			continue;
		for (uint32_t k = 0; k < dpflow_pipe_size(pipe); k++) {
			const struct dpflow_entry *e =
			    dpflow_pipe_entry(pipe, k);
			struct dpflow_counter c;

			if (!e)
				continue;
			dpflow_entry_counter(e, &c);
			printf("    entry %-6lu %10lu pkts %12lu bytes\n",
			       (unsigned long)dpflow_entry_id(e),
			       (unsigned long)c.pkts, (unsigned long)c.bytes);
		}
	}
	/* drops stay last: scripts read them to the end */
	print_ctx_extras(st);
	dpflow_ctx_drops(ctx, drops);
	printf("drops:\n");
	for (unsigned d = 1; d < DPFLOW_DROP__COUNT; d++)
		if (drops[d])
			printf("  %-26s %10lu\n", dpflow_drop_name(d),
			       (unsigned long)drops[d]);
}

/*
 * The end of the report: how long packets flowed and at what rates, then
 * one status line ("status: ok", or "status: error: WHY").
 */
static void print_summary(const struct run_state *st)
{
	double secs = (double)(st->t_end - st->t_start) / 1e9;
	uint64_t rx = 0, tx = 0;

	for (unsigned p = 0; p < dpflow_ctx_port_count(st->ctx); p++) {
		struct dpflow_port_stats s;

		dpflow_port_stats_get(dpflow_ctx_port(st->ctx, p), &s);
		rx += s.rx_pkts;
		tx += s.tx_pkts;
	}
	if (secs <= 0)
		secs = 1e-9;
	printf("duration: %.6f s   rx %lu pkts %.0f pps   tx %lu pkts %.0f "
	       "pps\n",
	       secs, (unsigned long)rx, (double)rx / secs, (unsigned long)tx,
	       (double)tx / secs);
	if (st->why[0])
		printf("status: error: %s\n", st->why);
	else
		printf("status: ok\n");
}

/*
 * After the run: close every port's output (flushed and synced) and
 * collect the errors it met (a capture cut short, a failed write) as
 * failures of the run; then, only if the run met none, commit every
 * output (pcap: the rename onto the target). A failed run commits
 * nothing: its outputs are discarded. A commit that fails (a rename
 * refused) fails the run; the other outputs are still committed, and
 * that one is kept where the message says.
 */
static void finish_ports(struct run_state *st)
{
	unsigned n = dpflow_ctx_port_count(st->ctx);

	for (unsigned p = 0; p < n; p++) {
		struct dpflow_error err = {0};

		if (dpflow_port_sync(dpflow_ctx_port(st->ctx, p), &err))
			run_failed(st, "port %s: %s",
				   dpflow_ctx_port_name(st->ctx, p), err.msg);
	}
	if (st->why[0]) {
		/* a failed run leaves no partial output behind */
		dpflow_ctx_discard(st->ctx);
		strncat(st->why, " (outputs discarded)",
			sizeof(st->why) - strlen(st->why) - 1);
		fprintf(stderr, "dpflow run: the run failed: outputs "
				"discarded, existing files left as they "
				"were (but for any named above as written "
				"in place)\n");
		return;
	}
	for (unsigned p = 0; p < n; p++) {
		struct dpflow_error err = {0};

		if (dpflow_port_finish(dpflow_ctx_port(st->ctx, p), &err))
			run_failed(st, "port %s: %s",
				   dpflow_ctx_port_name(st->ctx, p), err.msg);
	}
}

/*
 * Refuse CPUs of --cpus that this machine lacks or that the process may
 * not run on (its affinity mask, as taskset or a cgroup set it).
 */
static int check_cpus(const int *cpus, int n)
{
	long n_conf = sysconf(_SC_NPROCESSORS_CONF);
	cpu_set_t allowed;
	char list[256] = "";
	size_t len = 0;

	CPU_ZERO(&allowed);
	if (sched_getaffinity(0, sizeof(allowed), &allowed)) {
		fprintf(stderr,
			"dpflow run: --cpus: reading this process's CPU "
			"affinity: %s\n",
			strerror(errno));
		return -1;
	}
	/* the allowed CPUs as ranges, for the message */
	for (int c = 0; c < CPU_SETSIZE && len < sizeof(list) - 16; c++) {
		int hi = c;

		if (!CPU_ISSET(c, &allowed))
			continue;
		while (hi + 1 < CPU_SETSIZE && CPU_ISSET(hi + 1, &allowed))
			hi++;
		len += (size_t)snprintf(list + len, sizeof(list) - len,
					hi > c ? "%s%d-%d" : "%s%d",
					len ? "," : "", c, hi);
		c = hi;
	}
	for (int i = 0; i < n; i++) {
		if (n_conf > 0 && cpus[i] >= n_conf) {
			fprintf(stderr,
				"dpflow run: --cpus: CPU %d does not exist "
				"(this machine has CPUs 0-%ld)\n",
				cpus[i], n_conf - 1);
			return -1;
		}
		if (cpus[i] >= CPU_SETSIZE || !CPU_ISSET(cpus[i], &allowed)) {
			fprintf(stderr,
				"dpflow run: --cpus: CPU %d is not one this "
				"process may run on (its affinity: %s)\n",
				cpus[i], list);
			return -1;
		}
	}
	return 0;
}

/* Free what a run holds, in the reverse order of start-up. */
static void release(struct run_state *st)
{
	dpflow_ctl_close(st->ctl);
	dpflow_metrics_close(st->metrics);
	dpflow_rt_destroy(st->rt);
	dpflow_apps_destroy(st->apps);
#ifdef DPFLOW_HAVE_GPU
	dpflow_gpu_flow_unbind(st->gpu);
#endif
	dpflow_queue_destroy(st->q);
	dpflow_ctx_destroy(st->ctx);
}

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: dpflow run CONFIG.yaml [--target cpu|gpu] [--workers N]\n"
	    "                  [--burst N] [--cpus LIST] [--rss soft|port]\n"
	    "                  [--rss-key HEX]\n"
	    "                  [--duration S] [--stats-interval S]\n"
	    "                  [--control PATH] [--metrics ADDR:PORT]\n"
	    "                  [--pool N]\n"
	    "       dpflow run --check CONFIG.yaml [--workers N]\n"
	    "\n"
	    "Run the data plane described by CONFIG.yaml (docs/config.md)\n"
	    "until its inputs are exhausted, S seconds pass, or SIGINT or\n"
	    "SIGTERM arrives (a normal stop: outputs kept); then drain and\n"
	    "print the counters, the duration and rates, and a last line\n"
	    "'status: ok' (exit 0) or 'status: error: WHY' (exit 1: a\n"
	    "capture cut short or unreadable, a failed write, an output\n"
	    "that could not be renamed into place). A banner on stderr\n"
	    "lists the ports, workers, pipes and apps. Everything that can\n"
	    "fail is checked before packets flow; pcap outputs are written\n"
	    "to a temporary file renamed into place at the end (or, where a\n"
	    "rename cannot keep the file, in place, truncated only when the\n"
	    "run starts writing), so a run that fails to start or fails\n"
	    "leaves every existing file as it was (outputs discarded); so\n"
	    "does SIGINT or SIGTERM during start-up (exit 1). Exit 2: a\n"
	    "usage error or a bad option value.\n"
	    "  --target T    cpu (default) or gpu (GPU 0; builds with nvcc)\n"
	    "  --workers N   worker threads of the CPU target (default 1,\n"
	    "                at most 64); flows spread by symmetric RSS\n"
	    "  --burst N     packets a worker takes from a queue at once\n"
	    "                (default 32, at most 256): a cap, not a wait;\n"
	    "                apps' software handlers may run faster with 64\n"
	    "  --cpus LIST   pin worker i to the i-th CPU of LIST (0,2,4 or\n"
	    "                2-5); at least one CPU per worker, each one\n"
	    "                this process may run on\n"
	    "  --rss MODE    soft (default): dpflow's symmetric hash picks\n"
	    "                each packet's worker, handing packets over;\n"
	    "                port: the worker of the queue it came on (ports\n"
	    "                whose queues keep both directions together)\n"
	    "  --rss-key HEX the 40-byte Toeplitz key (80 hex digits);\n"
	    "                default: random at start\n"
	    "  --control P   serve the control socket at P (dpflowctl; the\n"
	    "                usual path is " DPFLOW_CTL_SOCKET_DEFAULT "),\n"
	    "                making missing directories; a socket another\n"
	    "                instance serves is refused\n"
	    "  --metrics A   serve Prometheus metrics on http://A/metrics\n"
	    "                (A: 127.0.0.1:9464, [::1]:9464; CPU target)\n"
	    "  --duration S  stop after S seconds\n"
	    "  --stats-interval S\n"
	    "                every S seconds print each port's rx and tx\n"
	    "                packet rates on stderr\n"
	    "  --check       load the config as a run would, open no port,\n"
	    "                print what would run and exit 0 (valid) or 1\n"
	    "                (dpflow validate)\n"
	    "  --pool N      packet buffers (default 8192)\n"
	    "\n"
	    "Configs may forward to the software handler 'count' (counts\n"
	    "and frees packets), and run apps in their apps: section\n"
	    "(`dpflow apps` lists those built in; an unknown one, or one\n"
	    "that does not run on the target, is refused at start; each\n"
	    "prints its counters after dpflow's). RSS queues are drained by\n"
	    "the control thread and counted per queue; every 100 ms pipes\n"
	    "with aging are aged and their aged-out entries removed. The\n"
	    "counters include each worker's packets and handoffs, the meter\n"
	    "colours, connections of ct pipes, RSS queues, the count\n"
	    "handler, shared counters and aged-out entries.\n"
	    "docs/runtime.md describes workers and RSS.\n");
}

/* "0,2,4" or "2-5" or a mix: into @cpus (at most @max); count or -1. */
static int parse_cpus(const char *text, int *cpus, int max)
{
	int n = 0;
	const char *p = text;

	while (*p) {
		char *end;
		long lo = strtol(p, &end, 10), hi;

		if (end == p || lo < 0 || lo >= 4096)
			return -1;
		hi = lo;
		p = end;
		if (*p == '-') {
			hi = strtol(p + 1, &end, 10);
			if (end == p + 1 || hi < lo || hi >= 4096)
				return -1;
			p = end;
		}
		for (long c = lo; c <= hi; c++) {
			if (n == max)
				return -1;
			cpus[n++] = (int)c;
		}
		if (*p == ',')
			p++;
		else if (*p)
			return -1;
	}
	return n;
}

/* 80 hex digits into @key. */
static int parse_key(const char *text, uint8_t *key)
{
	if (strlen(text) != 2 * DPFLOW_RSS_KEY_LEN)
		return -1;
	for (unsigned i = 0; i < DPFLOW_RSS_KEY_LEN; i++) {
		unsigned v;

		if (sscanf(text + 2 * i, "%2x", &v) != 1 ||
		    !isxdigit((unsigned char)text[2 * i]) ||
		    !isxdigit((unsigned char)text[2 * i + 1]))
			return -1;
		key[i] = (uint8_t)v;
	}
	return 0;
}

int cmd_run(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"target", required_argument, NULL, 't'},
	    {"duration", required_argument, NULL, 'd'},
	    {"pool", required_argument, NULL, 'p'},
	    {"workers", required_argument, NULL, 'w'},
	    {"burst", required_argument, NULL, 'b'},
	    {"cpus", required_argument, NULL, 'c'},
	    {"rss-key", required_argument, NULL, 'k'},
	    {"rss", required_argument, NULL, 'r'},
	    {"metrics", required_argument, NULL, 'm'},
	    {"control", required_argument, NULL, 'C'},
	    {"stats-interval", required_argument, NULL, 'i'},
	    {"check", no_argument, NULL, 'K'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	static struct run_state st;
	struct dpflow_handler_def handlers[] = {
	    {"count", count_handler, &st.handler_pkts},
	};
	struct dpflow_config_opts copts = {0};
	struct dpflow_app_opts aopts = {0};
	struct dpflow_rt_cfg rcfg = {0};
	static int cpus[DPFLOW_WORKERS_MAX];
	int n_cpus = 0;
	const char *metrics_addr = NULL, *ctl_path = NULL;
	struct dpflow_error err = {0};
	struct dpflow_ctx *ctx;
	double duration = 0, stats_interval = 0;
	bool use_gpu = false, check = false;
	uint64_t deadline = 0;
	unsigned long n;
	char *end;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			if (!strcmp(optarg, "gpu")) {
#ifndef DPFLOW_HAVE_GPU
				fprintf(stderr,
					"dpflow run: --target gpu: this dpflow "
					"was built without the GPU target (no "
					"nvcc at build time)\n");
				return 2;
#endif
				use_gpu = true;
			} else if (strcmp(optarg, "cpu")) {
				fprintf(stderr,
					"dpflow run: --target '%s': expected "
					"cpu or gpu\n",
					optarg);
				return 2;
			}
			break;
		case 'd':
			duration = strtod(optarg, &end);
			if (*end || !(duration > 0)) {
				fprintf(stderr,
					"dpflow run: --duration '%s': expected "
					"seconds > 0\n",
					optarg);
				return 2;
			}
			break;
		case 'p':
			if (opt_count("run", "pool", optarg, 64, 1u << 24, &n))
				return 2;
			copts.pool_slots = (uint32_t)n;
			break;
		case 'w':
			if (opt_count("run", "workers", optarg, 1,
				      DPFLOW_WORKERS_MAX, &n))
				return 2;
			rcfg.workers = (uint16_t)n;
			break;
		case 'b':
			if (opt_count("run", "burst", optarg, 1,
				      DPFLOW_BURST_MAX, &n))
				return 2;
			rcfg.burst = (uint16_t)n;
			break;
		case 'c':
			n_cpus = parse_cpus(optarg, cpus, DPFLOW_WORKERS_MAX);
			if (n_cpus <= 0) {
				fprintf(stderr,
					"dpflow run: --cpus '%s': expected a "
					"list such as 0,2,4 or 2-5 (at most "
					"%u CPUs)\n",
					optarg, DPFLOW_WORKERS_MAX);
				return 2;
			}
			break;
		case 'k':
			if (parse_key(optarg, rcfg.rss_key)) {
				fprintf(stderr,
					"dpflow run: --rss-key: expected %u "
					"hex digits\n",
					2 * DPFLOW_RSS_KEY_LEN);
				return 2;
			}
			rcfg.rss_key_set = true;
			break;
		case 'm':
			metrics_addr = optarg;
			break;
		case 'r':
			if (!strcmp(optarg, "port")) {
				rcfg.rss = DPFLOW_RT_RSS_PORT;
			} else if (strcmp(optarg, "soft")) {
				fprintf(stderr,
					"dpflow run: --rss '%s': expected soft "
					"or port\n",
					optarg);
				return 2;
			}
			break;
		case 'C':
			ctl_path = optarg;
			break;
		case 'i':
			stats_interval = strtod(optarg, &end);
			if (*end || !(stats_interval >= 0.1) ||
			    stats_interval > 86400) {
				fprintf(stderr,
					"dpflow run: --stats-interval '%s': "
					"expected seconds from 0.1 to 86400\n",
					optarg);
				return 2;
			}
			break;
		case 'K':
			check = true;
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
	if (n_cpus) {
		unsigned need = rcfg.workers ? rcfg.workers : 1;

		if ((unsigned)n_cpus < need) {
			fprintf(stderr,
				"dpflow run: --cpus lists %d CPUs for %u "
				"workers\n",
				n_cpus, need);
			return 2;
		}
		rcfg.cpus = cpus;
	}
	if (use_gpu &&
	    (rcfg.workers > 1 || n_cpus || rcfg.burst || metrics_addr)) {
		fprintf(stderr, "dpflow run: --workers, --cpus, --burst and "
				"--metrics are for the CPU target (--target "
				"gpu runs one proxy thread)\n");
		return 2;
	}
	if (n_cpus && check_cpus(cpus, n_cpus))
		return 2;
	if (check)
		return validate_config(argv[optind],
				       rcfg.workers ? rcfg.workers : 1, stdout);
	/* a second instance on this socket stops here, before any port */
	if (ctl_path && dpflow_ctl_check_path(ctl_path, &err)) {
		fprintf(stderr, "dpflow run: --control: %s\n", err.msg);
		return 1;
	}
	memset(&st, 0, sizeof(st));
	st.metrics_addr = metrics_addr;
	st.ctl_path = ctl_path;
	st.stats_ns = (uint64_t)(stats_interval * 1e9);
	copts.handlers = handlers;
	copts.n_handlers = 1;
	/* from here a signal is a request to stop: during start-up the
	 * start fails (below), so the outputs the loader creates are
	 * discarded rather than left behind by a killed process */
	stop_requested = 0;
	catch_stop_signals(false);
	/* a config that fails leaves every file as it was (the loader
	 * discards its ports' outputs) */
	ctx = dpflow_config_load(argv[optind], &copts, &err);
	if (!ctx) {
		fprintf(stderr, "dpflow run: %s\n", err.msg);
		if (stop_requested)
			stopped_at_start();
		return 1;
	}
	st.ctx = ctx;
	st.q = dpflow_queue_create(ctx, &err);
	if (!st.q) {
		fprintf(stderr, "dpflow run: %s\n", err.msg);
		goto fail_start;
	}
	aopts.workers = rcfg.workers ? rcfg.workers : 1;
	aopts.target = use_gpu ? DPFLOW_APP_TARGET_GPU : DPFLOW_APP_TARGET_CPU;
	st.apps = dpflow_apps_load(ctx, argv[optind], &aopts, &err);
	if (!st.apps) {
		fprintf(stderr, "dpflow run: %s\n", err.msg);
		goto fail_start;
	}
	if (prepare(&st, &rcfg, use_gpu))
		goto fail_start;
	if (stop_requested) {
		stopped_at_start();
		goto fail_start;
	}
	print_banner(&st, argv[optind], &rcfg);
	if (st.rt && dpflow_rt_start(st.rt, &err)) {
		fprintf(stderr, "dpflow run: %s%s%s\n", err.field ? "--" : "",
			err.field ? err.field : "", err.msg);
		goto fail_start;
	}
	catch_stop_signals(true);
	st.t_start = st.t_stats = dpflow_clock_ns();
	if (duration > 0)
		deadline = st.t_start + (uint64_t)(duration * 1e9);

	if (st.gpu)
		run_gpu_loop(&st, deadline);
	else
		run_workers(&st, deadline);
	st.t_end = dpflow_clock_ns();
	finish_ports(&st);
	dpflow_ctl_close(st.ctl);
	st.ctl = NULL;
	print_counters(&st);
	dpflow_apps_report(st.apps, stdout);
	print_summary(&st);
	release(&st);
	return st.why[0] ? 1 : 0;

fail_start:
	/* nothing ran: every existing file stays as it was */
	dpflow_ctx_discard(ctx);
	release(&st);
	return 1;
}
