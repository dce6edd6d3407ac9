/*
 * `dpflow bench runtime`: the worker runtime on an in-memory ring port,
 * against the flow engine driven directly, on the same pipeline in the
 * same run.
 *
 * The pipeline: exact-1m's pipe (a BASIC pipe on the outer 5-tuple, 1M
 * entries with a counter each) whose hits and misses go out of port `lp`,
 * a `ring:lp,loop` port: what it transmits it receives again, so packets
 * circle with no feeder thread. --pkts packets (default 131072, flows
 * drawn uniformly from the entries) are in flight.
 *
 * - engine: this thread takes bursts of 32 from the ring, runs them with
 *   dpflow_ctx_process_burst() (which puts them back on the ring) and
 *   reports quiescent states: the flow-engine benchmark's loop, with the
 *   port's transmit in it;
 * - runtime-1w / -2w ...: dpflow_rt with N workers polls the same port
 *   (one receive queue: worker 0 receives, RSS hands the others their
 *   flows); the rate is the packets the pipe looked up per second over
 *   --seconds.
 *
 * The runtime rows' peer is the engine row: the ratio is what the
 * runtime's loop (and, with more workers, the handoff) costs or gains.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "bench_common.h"
#include "dpflow/clock.h"
#include "dpflow/dpflow.h"
#include "dpflow/flow.h"
#include "dpflow/runtime.h"

struct rt_opts {
	uint32_t flows;
	uint32_t pkts;
	double seconds;
	unsigned trials;
	unsigned workers[8];
	unsigned n_workers;
	int cpu; /* -1: no pinning */
};

struct rt_bench {
	struct dpflow_ctx *ctx;
	struct dpflow_pipe *pipe;
	struct dpflow_ring *ring;
};

static void usage(FILE *out)
{
	fprintf(out,
		"usage: dpflow bench runtime [--flows N] [--pkts N] "
		"[--workers LIST]\n"
		"                            [--seconds S] [--trials N]\n"
		"\n"
		"exact-1m's pipe (5-tuple, N entries) behind a looping ring\n"
		"port, run by the flow engine directly and by the worker\n"
		"runtime with each worker count of LIST (default 1,2).\n"
		"  --flows N    entries (default 1048576)\n"
		"  --pkts N     packets in flight (default 131072)\n"
		"  --seconds S  per trial (default 1)\n"
		"  --trials N   best of N (default 3)\n"
		"  --cpu C      pin the engine loop to CPU C and worker i to\n"
		"               CPU C + i (default: no pinning)\n");
}

static uint64_t pipe_pkts(const struct rt_bench *b)
{
	struct dpflow_pipe_stats s;

	dpflow_pipe_stats_get(b->pipe, &s);
	return s.pkts;
}

static int setup(struct rt_bench *b, const struct rt_opts *o)
{
	struct dpflow_ctx_params cp = {.pool_slots = o->pkts + 1024,
				       .data_room = 256};
	struct dpflow_error err = {0};
	struct dpflow_pipe_cfg c;
	struct dpflow_queue *q;
	struct dpflow_pool *pool;
	char uri[64];
	int port;

	b->ctx = dpflow_ctx_create(&cp, &err);
	if (!b->ctx)
		goto fail;
	snprintf(uri, sizeof(uri), "ring:lp,loop,size=%u",
		 1u << (32 - __builtin_clz(o->pkts + 1023)));
	port = dpflow_ctx_port_add(b->ctx, "lp", uri, &err);
	if (port < 0)
		goto fail;
	b->ring = dpflow_port_ring_rx(dpflow_ctx_port(b->ctx, (unsigned)port));
	bench_pipe_cfg(&c, "exact", DPFLOW_PIPE_BASIC, o->flows,
		       bench_exact_fields, 5);
	c.monitor.counter = true;
	c.root = true;
	c.port = (uint16_t)port;
	c.fwd.kind = DPFLOW_FWD_PORT;
	c.fwd.port = (uint16_t)port;
	c.miss_fwd = c.fwd;
	b->pipe = dpflow_pipe_create(b->ctx, &c, &err);
	if (!b->pipe)
		goto fail;
	q = dpflow_queue_create(b->ctx, &err);
	if (!q)
		goto fail;
	for (uint32_t i = 0; i < o->flows; i++) {
		struct bench_flow f;
		struct dpflow_entry_cfg e;
		uint32_t s = bench_scramble(i);

		memcpy(f.src, &s, 4);
		f.dst[0] = 10;
		f.dst[1] = (uint8_t)(i >> 16);
		f.dst[2] = (uint8_t)(i >> 8);
		f.dst[3] = (uint8_t)i;
		f.sport = (uint16_t)(1024 + i % 60000);
		f.dport = 80;
		f.proto = 6;
		bench_exact_entry(&f, &e);
		if (!dpflow_entry_add(q, b->pipe, &e, NULL, &err))
			goto fail_q;
		if ((i + 1) % 65536 == 0 || i + 1 == o->flows)
			if (dpflow_entries_process(q, NULL, &err))
				goto fail_q;
	}
	dpflow_queue_destroy(q);
	/* packets of flows drawn uniformly, onto the ring */
	pool = dpflow_ctx_pool(b->ctx);
	for (uint32_t k = 0; k < o->pkts; k++) {
		uint32_t i = bench_scramble(k * 2654435761u) % o->flows, idx;
		uint32_t s = bench_scramble(i);
		struct dpflow_gen_spec sp;
		struct dpflow_pkt_meta *m;

		if (dpflow_pool_alloc_bulk(pool, &idx, 1)) {
			snprintf(err.msg, sizeof(err.msg), "pool empty");
			goto fail;
		}
		memset(&sp, 0, sizeof(sp));
		sp.has_eth = true;
		sp.outer.l3_type = DPFLOW_L3_IPV4;
		sp.outer.l4_type = DPFLOW_L4_TCP;
		sp.outer.ttl = 64;
		memcpy(sp.outer.src, &s, 4);
		sp.outer.dst[0] = 10;
		sp.outer.dst[1] = (uint8_t)(i >> 16);
		sp.outer.dst[2] = (uint8_t)(i >> 8);
		sp.outer.dst[3] = (uint8_t)i;
		sp.outer.sport = (uint16_t)(1024 + i % 60000);
		sp.outer.dport = 80;
		sp.frame_len = 64;
		m = dpflow_pool_meta(pool, idx);
		m->data_len = (uint16_t)dpflow_gen_build(
		    &sp, dpflow_pkt_data(pool, idx), 256);
		if (dpflow_ring_enqueue_burst(b->ring, &idx, 1) != 1) {
			snprintf(err.msg, sizeof(err.msg), "ring full");
			goto fail;
		}
	}
	return 0;
fail_q:
	dpflow_queue_destroy(q);
fail:
	fprintf(stderr, "bench runtime: %s%s%s\n", err.field ? err.field : "",
		err.field ? ": " : "", err.msg);
	return -1;
}

/* One trial of the engine loop: packets looked up, TSC ticks in *@ticks. */
static uint64_t engine_trial(struct rt_bench *b, double seconds,
			     uint64_t *ticks)
{
	uint64_t p0 = pipe_pkts(b), t0 = dpflow_tsc(),
		 end = t0 + (uint64_t)(seconds * (double)dpflow_tsc_hz());
	uint32_t idx[32];

	dpflow_ctx_thread_online(b->ctx);
	for (;;) {
		for (unsigned r = 0; r < 64; r++) {
			unsigned n =
			    dpflow_ring_dequeue_burst(b->ring, idx, 32);

			dpflow_ctx_process_burst(b->ctx, 0, idx, (uint16_t)n);
			dpflow_ctx_quiescent(b->ctx);
		}
		if (dpflow_tsc() >= end)
			break;
	}
	*ticks = dpflow_tsc() - t0;
	dpflow_ctx_thread_offline(b->ctx);
	return pipe_pkts(b) - p0;
}

/* One trial of the runtime with @workers workers. */
static int runtime_trial(struct rt_bench *b, unsigned workers, int cpu,
			 double seconds, uint64_t *pkts, uint64_t *ticks,
			 uint64_t *drops)
{
	int cpus[DPFLOW_WORKERS_MAX];
	struct dpflow_rt_cfg cfg = {0};
	struct dpflow_error err = {0};
	struct dpflow_rt *rt;
	struct timespec ts = {
	    (time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
	struct timespec warm = {0, 100000000};
	uint64_t p0, t0;

	cfg.workers = (uint16_t)workers;
	cfg.handoff_size = 4096;
	if (cpu >= 0) {
		for (unsigned w = 0; w < workers && w < DPFLOW_WORKERS_MAX; w++)
			cpus[w] = cpu + (int)w;
		cfg.cpus = cpus;
	}
	rt = dpflow_rt_create(b->ctx, &cfg, &err);
	if (!rt || dpflow_rt_start(rt, &err)) {
		fprintf(stderr, "bench runtime: %s\n", err.msg);
		dpflow_rt_destroy(rt);
		return -1;
	}
	nanosleep(&warm, NULL);
	p0 = pipe_pkts(b);
	t0 = dpflow_tsc();
	nanosleep(&ts, NULL);
	*pkts = pipe_pkts(b) - p0;
	*ticks = dpflow_tsc() - t0;
	*drops = 0;
	for (unsigned w = 0; w < workers; w++) {
		struct dpflow_worker_stats s;

		dpflow_rt_worker_stats(rt, w, &s);
		*drops += s.handoff_drops;
	}
	dpflow_rt_destroy(rt);
	return 0;
}

/* A row of @workers workers (cycles/pkt: TSC ticks of wall time). */
static void report(const char *variant, const struct bench_best *b,
		   unsigned workers, const struct bench_best *eng)
{
	struct bench_result r;

	memset(&r, 0, sizeof(r));
	r.workload = "runtime";
	r.variant = variant;
	r.pkts = b->pkts;
	r.tsc_cycles = b->ticks;
	r.seconds = (double)b->ticks / (double)dpflow_tsc_hz();
	r.bytes = b->pkts * 64;
	r.workers = workers;
	r.peer = "dpflow-engine-1core";
	r.peer_mpps = bench_best_mpps(eng);
	bench_report(&r);
}

static int parse_opts(int argc, char **argv, struct rt_opts *o)
{
	static const struct option opts[] = {
	    {"flows", required_argument, NULL, 'f'},
	    {"pkts", required_argument, NULL, 'p'},
	    {"workers", required_argument, NULL, 'w'},
	    {"seconds", required_argument, NULL, 's'},
	    {"trials", required_argument, NULL, 't'},
	    {"cpu", required_argument, NULL, 'c'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	char *end;
	int c;

	o->flows = 1u << 20;
	o->pkts = 131072;
	o->seconds = 1;
	o->trials = 3;
	o->workers[0] = 1;
	o->workers[1] = 2;
	o->n_workers = 2;
	o->cpu = -1;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		unsigned long v;

		switch (c) {
		case 'f':
		case 'p':
			v = strtoul(optarg, &end, 10);
			if (*end || v < 64 || v > (1u << 24)) {
				fprintf(stderr,
					"bench runtime: '%s': expected "
					"64..16777216\n",
					optarg);
				return 2;
			}
			*(c == 'f' ? &o->flows : &o->pkts) = (uint32_t)v;
			break;
		case 'w': {
			char *s = optarg;

			o->n_workers = 0;
			for (;;) {
				v = strtoul(s, &end, 10);
				if (end == s || v < 1 ||
				    v > DPFLOW_WORKERS_MAX ||
				    o->n_workers == 8 ||
				    (*end && *end != ',')) {
					fprintf(stderr,
						"bench runtime: --workers "
						"'%s': a list such as 1,2,4 "
						"(at most 8 counts)\n",
						optarg);
					return 2;
				}
				o->workers[o->n_workers++] = (unsigned)v;
				if (!*end)
					break;
				s = end + 1;
			}
			break;
		}
		case 's':
			o->seconds = strtod(optarg, &end);
			if (*end || !(o->seconds >= 0.05 && o->seconds <= 60)) {
				fprintf(stderr,
					"bench runtime: --seconds '%s': "
					"0.05..60\n",
					optarg);
				return 2;
			}
			break;
		case 't':
			v = strtoul(optarg, &end, 10);
			if (*end || v < 1 || v > 100) {
				fprintf(
				    stderr,
				    "bench runtime: --trials '%s': 1..100\n",
				    optarg);
				return 2;
			}
			o->trials = (unsigned)v;
			break;
		case 'c':
			v = strtoul(optarg, &end, 10);
			if (*end || v > 4095) {
				fprintf(stderr,
					"bench runtime: --cpu '%s': a CPU "
					"number\n",
					optarg);
				return 2;
			}
			o->cpu = (int)v;
			break;
		case 'h':
			usage(stdout);
			return 1;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	return 0;
}

int bench_runtime(int argc, char **argv)
{
	struct rt_opts o;
	struct rt_bench b = {0};
	struct bench_best eng = {0}, best[8];
	uint64_t drops[8] = {0};
	int rc = parse_opts(argc, argv, &o);

	if (rc)
		return rc == 1 ? 0 : rc;
	memset(best, 0, sizeof(best));
	if (o.cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(o.cpu, &set);
		if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set)) {
			fprintf(stderr, "bench runtime: --cpu %d: cannot pin\n",
				o.cpu);
			return 2;
		}
	}
	if (setup(&b, &o)) {
		dpflow_ctx_destroy(b.ctx);
		return 1;
	}
	printf("# exact-1m pipe, %u entries, %u packets circling a ring:lp,"
	       "loop port; best of %u trials of %.2f s\n",
	       o.flows, o.pkts, o.trials, o.seconds);
	/* taking turns, engine then each worker count, trial after trial:
	 * what the machine does meanwhile falls on every row alike */
	for (unsigned t = 0; t < o.trials; t++) {
		uint64_t ticks, n = engine_trial(&b, o.seconds, &ticks);

		bench_best_keep(&eng, n, ticks);
		for (unsigned i = 0; i < o.n_workers; i++) {
			uint64_t d;

			if (runtime_trial(&b, o.workers[i], o.cpu, o.seconds,
					  &n, &ticks, &d)) {
				dpflow_ctx_destroy(b.ctx);
				return 1;
			}
			bench_best_keep(&best[i], n, ticks);
			drops[i] += d;
		}
	}
	bench_report_header();
	bench_report_best("runtime", "engine-ring-loop", &eng, NULL, NULL, 64);
	for (unsigned i = 0; i < o.n_workers; i++) {
		char variant[32];

		snprintf(variant, sizeof(variant), "runtime-%uw", o.workers[i]);
		report(variant, &best[i], o.workers[i], &eng);
		if (drops[i])
			printf("# %s: %llu packets dropped at handoff (a full "
			       "ring)\n",
			       variant, (unsigned long long)drops[i]);
	}
	dpflow_ctx_destroy(b.ctx);
	return 0;
}
