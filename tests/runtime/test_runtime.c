/*
 * The worker runtime on in-memory ring ports: every packet is run once,
 * both directions of every flow are run by the same worker (symmetric
 * RSS), the work is spread over the workers, the counters add up, stop
 * drains what was handed over, bad configurations are refused, and idle
 * workers back off.
 */
#define _GNU_SOURCE /* RUSAGE_THREAD */
#include <criterion/criterion.h>
#include <pthread.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "dpflow/config.h"
#include "dpflow/dpflow.h"
#include "dpflow/flow.h"
#include "dpflow/gen.h"
#include "dpflow/runtime.h"

#define FLOWS	  600
#define PER_DIR	  4 /* packets of each direction of a flow */
#define TOTAL	  (FLOWS * 2 * PER_DIR)
#define N_THREADS 8

/* What the handler saw: per flow, which thread ran its packets. */
static struct {
	pthread_mutex_t lock;
	pthread_t threads[N_THREADS];
	unsigned n_threads;
	int flow_thread[FLOWS];
	unsigned per_thread[N_THREADS];
	unsigned seen, mixed, bad;
} rec = {.lock = PTHREAD_MUTEX_INITIALIZER};

static unsigned thread_slot(void)
{
	pthread_t me = pthread_self();

	for (unsigned i = 0; i < rec.n_threads; i++)
		if (pthread_equal(rec.threads[i], me))
			return i;
	rec.threads[rec.n_threads] = me;
	return rec.n_threads++;
}

/* Flow f: 10.1.x.y:(1000 + f) <-> 10.2.x.y:80, sport tells the flow. */
static void record(void *arg, struct dpflow_pool *pool, const uint32_t *idx,
		   uint16_t n)
{
	(void)arg;
	pthread_mutex_lock(&rec.lock);
	for (uint16_t i = 0; i < n; i++) {
		const struct dpflow_pkt_meta *m =
		    dpflow_pool_meta(pool, idx[i]);
		unsigned t = thread_slot();
		unsigned port =
		    m->outer.sport == 80 ? m->outer.dport : m->outer.sport;
		unsigned f = port - 1000;

		rec.seen++;
		rec.per_thread[t]++;
		if (f >= FLOWS) {
			rec.bad++;
			continue;
		}
		if (rec.flow_thread[f] < 0)
			rec.flow_thread[f] = (int)t;
		else if (rec.flow_thread[f] != (int)t)
			rec.mixed++;
	}
	pthread_mutex_unlock(&rec.lock);
	dpflow_pool_free_bulk(pool, idx, n);
}

static const char cfg_yaml[] = "ports:\n"
			       "  - {name: in, uri: 'ring:in,size=16384'}\n"
			       "pipes:\n"
			       "  - name: all\n"
			       "    type: basic\n"
			       "    root: in\n"
			       "    match: [outer.ip.proto]\n"
			       "    miss: {handler: rec}\n";

static struct dpflow_ctx *ctx_new(void)
{
	struct dpflow_handler_def h[] = {{"rec", record, NULL}};
	struct dpflow_config_opts o = {0};
	struct dpflow_error err = {0};
	struct dpflow_ctx *ctx;

	o.handlers = h;
	o.n_handlers = 1;
	o.pool_slots = 16384;
	ctx = dpflow_config_load_string(cfg_yaml, "test.yaml", &o, &err);
	cr_assert_not_null(ctx, "config: %s", err.msg);
	memset(rec.flow_thread, 0xff, sizeof(rec.flow_thread));
	memset(rec.per_thread, 0, sizeof(rec.per_thread));
	rec.n_threads = rec.seen = rec.mixed = rec.bad = 0;
	return ctx;
}

/* TOTAL packets, both directions of FLOWS flows interleaved, onto the
 * input ring. */
static void load_traffic(struct dpflow_ctx *ctx)
{
	struct dpflow_pool *pool = dpflow_ctx_pool(ctx);
	struct dpflow_ring *r = dpflow_port_ring_rx(dpflow_ctx_port(ctx, 0));
	struct dpflow_gen_spec sp;
	unsigned k = 0;

	memset(&sp, 0, sizeof(sp));
	sp.has_eth = true;
	sp.outer.l3_type = DPFLOW_L3_IPV4;
	sp.outer.ttl = 64;
	for (unsigned rep = 0; rep < PER_DIR; rep++)
		for (unsigned f = 0; f < FLOWS; f++)
			for (unsigned dir = 0; dir < 2; dir++) {
				uint8_t a[4] = {10, 1, (uint8_t)(f >> 8),
						(uint8_t)f};
				uint8_t b[4] = {10, 2, (uint8_t)(f % 7), 9};
				uint32_t idx;
				struct dpflow_pkt_meta *m;

				cr_assert_eq(
				    dpflow_pool_alloc_bulk(pool, &idx, 1), 0);
				m = dpflow_pool_meta(pool, idx);
				sp.outer.l4_type =
				    f % 3 ? DPFLOW_L4_TCP : DPFLOW_L4_UDP;
				memcpy(sp.outer.src, dir ? b : a, 4);
				memcpy(sp.outer.dst, dir ? a : b, 4);
				sp.outer.sport =
				    (uint16_t)(dir ? 80 : 1000 + f);
				sp.outer.dport =
				    (uint16_t)(dir ? 1000 + f : 80);
				m->data_len = (uint16_t)dpflow_gen_build(
				    &sp, dpflow_pkt_data(pool, idx), 256);
				cr_assert(m->data_len > 0);
				cr_assert_eq(
				    dpflow_ring_enqueue_burst(r, &idx, 1), 1);
				k++;
			}
	cr_assert_eq(k, TOTAL);
}

static unsigned seen_now(void)
{
	unsigned n;

	pthread_mutex_lock(&rec.lock);
	n = rec.seen;
	pthread_mutex_unlock(&rec.lock);
	return n;
}

static void run_workers(unsigned workers, uint32_t handoff_size)
{
	struct dpflow_ctx *ctx = ctx_new();
	struct dpflow_rt_cfg cfg = {0};
	struct dpflow_error err = {0};
	struct dpflow_rt *rt;
	uint64_t rx = 0, ran = 0, out = 0, in = 0, drops = 0;
	struct timespec ts = {0, 1000000};
	unsigned used = 0;

	cfg.workers = (uint16_t)workers;
	cfg.handoff_size = handoff_size;
	load_traffic(ctx);
	rt = dpflow_rt_create(ctx, &cfg, &err);
	cr_assert_not_null(rt, "%s", err.msg);
	cr_assert_eq(dpflow_rt_start(rt, &err), 0, "%s", err.msg);
	for (unsigned i = 0; i < 10000 && seen_now() < TOTAL; i++)
		nanosleep(&ts, NULL);
	dpflow_rt_stop(rt);
	for (unsigned w = 0; w < workers; w++) {
		struct dpflow_worker_stats s;

		cr_assert_eq(dpflow_rt_worker_stats(rt, w, &s), 0);
		rx += s.rx_pkts;
		ran += s.pkts;
		out += s.handoff_out;
		in += s.handoff_in;
		drops += s.handoff_drops;
	}
	cr_expect_eq(rec.seen, TOTAL, "%u of %u packets run", rec.seen, TOTAL);
	cr_expect_eq(rec.bad, 0);
	cr_expect_eq(rec.mixed, 0,
		     "%u packets run by another worker than their flow's",
		     rec.mixed);
	cr_expect_eq(rx, TOTAL, "received %lu", (unsigned long)rx);
	cr_expect_eq(ran, TOTAL, "ran %lu", (unsigned long)ran);
	cr_expect_eq(out, in, "handed %lu, taken %lu", (unsigned long)out,
		     (unsigned long)in);
	cr_expect_eq(drops, 0);
	for (unsigned t = 0; t < rec.n_threads; t++)
		used += rec.per_thread[t] > 0;
	cr_expect_eq(used, workers, "%u of %u workers ran packets", used,
		     workers);
	/* with one worker nothing is handed over; with n, about (n-1)/n */
	if (workers == 1)
		cr_expect_eq(out, 0);
	else
		cr_expect(out > TOTAL / 2 / workers, "handed %lu",
			  (unsigned long)out);
	dpflow_rt_destroy(rt);
	cr_expect_eq(dpflow_pool_avail(dpflow_ctx_pool(ctx)),
		     dpflow_ctx_pool(ctx)->n_slots, "pool whole");
	dpflow_ctx_destroy(ctx);
}

Test(runtime, one_worker)
{
	run_workers(1, 0);
}

Test(runtime, two_workers_symmetric)
{
	run_workers(2, 0);
}

Test(runtime, four_workers_symmetric)
{
	run_workers(4, 0);
}

/* Rings of 64: the receiving worker waits for room instead of dropping
 * (the input ring holds the packets meanwhile). */
Test(runtime, small_handoff_rings_wait_not_drop)
{
	run_workers(4, 64);
}

/* Stop at once: whatever was taken from the input is run, the rest stays
 * on the ring; nothing is lost. */
Test(runtime, stop_drains)
{
	struct dpflow_ctx *ctx = ctx_new();
	struct dpflow_ring *r = dpflow_port_ring_rx(dpflow_ctx_port(ctx, 0));
	struct dpflow_rt_cfg cfg = {0};
	struct dpflow_error err = {0};
	struct dpflow_rt *rt;
	uint64_t rx = 0, drops = 0;
	unsigned left;

	cfg.workers = 3;
	load_traffic(ctx);
	rt = dpflow_rt_create(ctx, &cfg, &err);
	cr_assert_not_null(rt, "%s", err.msg);
	cr_assert_eq(dpflow_rt_start(rt, &err), 0, "%s", err.msg);
	dpflow_rt_stop(rt);
	for (unsigned w = 0; w < 3; w++) {
		struct dpflow_worker_stats s;

		dpflow_rt_worker_stats(rt, w, &s);
		rx += s.rx_pkts;
		drops += s.handoff_drops;
	}
	left = dpflow_ring_count(r);
	/* a full handoff ring (1024 by default) drops, counted */
	cr_expect_eq(rec.seen + drops, rx,
		     "received %lu, ran %u, handoff drops %lu",
		     (unsigned long)rx, rec.seen, (unsigned long)drops);
	cr_expect_eq(rx + left, TOTAL);
	cr_expect_eq(rec.mixed, 0);
	dpflow_rt_destroy(rt);
	{
		uint32_t idx[256];
		unsigned k;

		while ((k = dpflow_ring_dequeue_burst(r, idx, 256)))
			dpflow_pool_free_bulk(dpflow_ctx_pool(ctx), idx, k);
	}
	cr_expect_eq(dpflow_pool_avail(dpflow_ctx_pool(ctx)),
		     dpflow_ctx_pool(ctx)->n_slots, "pool whole");
	dpflow_ctx_destroy(ctx);
}

Test(runtime, the_given_key_is_used)
{
	struct dpflow_ctx *ctx = ctx_new();
	struct dpflow_rt_cfg cfg = {0};
	struct dpflow_error err = {0};
	struct dpflow_rt *a, *b;

	for (unsigned i = 0; i < DPFLOW_RSS_KEY_LEN; i++)
		cfg.rss_key[i] = (uint8_t)(i * 7 + 1);
	cfg.rss_key_set = true;
	a = dpflow_rt_create(ctx, &cfg, &err);
	cr_assert_not_null(a, "%s", err.msg);
	cr_expect_eq(
	    memcmp(dpflow_rt_rss_key(a), cfg.rss_key, DPFLOW_RSS_KEY_LEN), 0);
	cfg.rss_key_set = false;
	b = dpflow_rt_create(ctx, &cfg, &err);
	cr_assert_not_null(b, "%s", err.msg);
	cr_expect_neq(memcmp(dpflow_rt_rss_key(a), dpflow_rt_rss_key(b),
			     DPFLOW_RSS_KEY_LEN),
		      0, "a random key equals the given one");
	dpflow_rt_destroy(a);
	dpflow_rt_destroy(b);
	dpflow_ctx_destroy(ctx);
}

Test(runtime, bad_configs_refused)
{
	struct dpflow_ctx *ctx = ctx_new();
	struct dpflow_rt_cfg cfg = {0};
	struct dpflow_error err = {0};
	int cpus[2] = {0, 1 << 20};

	cfg.workers = DPFLOW_WORKERS_MAX + 1;
	cr_expect_null(dpflow_rt_create(ctx, &cfg, &err));
	cr_expect_str_eq(err.field, "workers");
	cfg.workers = 2;
	cfg.handoff_size = 100;
	cr_expect_null(dpflow_rt_create(ctx, &cfg, &err));
	cr_expect_str_eq(err.field, "handoff_size");
	cfg.handoff_size = 0;
	cfg.cpus = cpus;
	cr_expect_null(dpflow_rt_create(ctx, &cfg, &err));
	cr_expect_str_eq(err.field, "cpus");
	cfg.cpus = NULL;
	cfg.burst = DPFLOW_BURST_MAX + 1;
	cr_expect_null(dpflow_rt_create(ctx, &cfg, &err));
	cr_expect_str_eq(err.field, "burst");
	dpflow_ctx_destroy(ctx);
}

/* rss=port: each packet is run by the worker of its queue (the ring port
 * has one: worker 0), nothing is hashed or handed over. */
Test(runtime, port_rss_runs_packets_where_they_arrive)
{
	struct dpflow_ctx *ctx = ctx_new();
	struct dpflow_rt_cfg cfg = {0};
	struct dpflow_error err = {0};
	struct dpflow_rt *rt;
	struct dpflow_worker_stats s0, s1;
	struct timespec ts = {0, 1000000};

	cfg.workers = 2;
	cfg.rss = DPFLOW_RT_RSS_PORT;
	load_traffic(ctx);
	rt = dpflow_rt_create(ctx, &cfg, &err);
	cr_assert_not_null(rt, "%s", err.msg);
	cr_assert_eq(dpflow_rt_start(rt, &err), 0, "%s", err.msg);
	for (unsigned i = 0; i < 10000 && seen_now() < TOTAL; i++)
		nanosleep(&ts, NULL);
	dpflow_rt_stop(rt);
	dpflow_rt_worker_stats(rt, 0, &s0);
	dpflow_rt_worker_stats(rt, 1, &s1);
	cr_expect_eq(rec.seen, TOTAL);
	cr_expect_eq(s0.pkts, TOTAL, "worker 0 ran %lu",
		     (unsigned long)s0.pkts);
	cr_expect_eq(s1.pkts + s0.handoff_out + s1.handoff_out, 0);
	cr_expect_eq(rec.n_threads, 1);
	dpflow_rt_destroy(rt);
	cfg.rss = 7;
	cr_expect_null(dpflow_rt_create(ctx, &cfg, &err));
	cr_expect_str_eq(err.field, "rss");
	dpflow_ctx_destroy(ctx);
}

/* CPU seconds this process's threads other than the caller have used. */
static double others_cpu_s(void)
{
	struct rusage all, me;

	cr_assert_eq(getrusage(RUSAGE_SELF, &all), 0);
	cr_assert_eq(getrusage(RUSAGE_THREAD, &me), 0);
	return (double)(all.ru_utime.tv_sec + all.ru_stime.tv_sec -
			me.ru_utime.tv_sec - me.ru_stime.tv_sec) +
	       (double)(all.ru_utime.tv_usec + all.ru_stime.tv_usec -
			me.ru_utime.tv_usec - me.ru_stime.tv_usec) /
		   1e6;
}

/*
 * Two workers on a link that stays idle back off (docs/runtime.md: naps
 * up to 500 us): far below a core between them (about 28% before they
 * backed off; the bound leaves room for sanitizers and shared cores),
 * and packets that come after the long idle spell are all run.
 */
Test(runtime, idle_workers_back_off)
{
	struct dpflow_ctx *ctx = ctx_new();
	struct dpflow_rt_cfg cfg = {0};
	struct dpflow_error err = {0};
	struct dpflow_rt *rt;
	struct timespec settle = {0, 200000000}, idle = {2, 0};
	struct timespec ts = {0, 1000000};
	double cpu;

	cfg.workers = 2;
	rt = dpflow_rt_create(ctx, &cfg, &err);
	cr_assert_not_null(rt, "%s", err.msg);
	cr_assert_eq(dpflow_rt_start(rt, &err), 0, "%s", err.msg);
	nanosleep(&settle, NULL);
	cpu = others_cpu_s();
	nanosleep(&idle, NULL);
	cpu = others_cpu_s() - cpu;
	cr_expect_lt(cpu, 0.2,
		     "two idle workers used %.3f s of CPU in 2 s (%.1f%% of "
		     "a core; the bound is 10%%)",
		     cpu, cpu / 2 * 100);
	load_traffic(ctx);
	for (unsigned i = 0; i < 10000 && seen_now() < TOTAL; i++)
		nanosleep(&ts, NULL);
	dpflow_rt_stop(rt);
	cr_expect_eq(rec.seen, TOTAL,
		     "%u of %u packets run after the idle "
		     "spell",
		     rec.seen, TOTAL);
	cr_expect_eq(rec.mixed, 0);
	dpflow_rt_destroy(rt);
	cr_expect_eq(dpflow_pool_avail(dpflow_ctx_pool(ctx)),
		     dpflow_ctx_pool(ctx)->n_slots, "pool whole");
	dpflow_ctx_destroy(ctx);
}

/* ---- timed transmit ------------------------------------------------------ */

static const char timed_yaml[] = "ports:\n"
				 "  - {name: in, uri: 'ring:tin,size=4096'}\n"
				 "  - {name: out, uri: 'ring:tout,size=4096'}\n"
				 "pipes:\n"
				 "  - name: all\n"
				 "    type: basic\n"
				 "    root: in\n"
				 "    match: [outer.ip.proto]\n"
				 "    miss: {port: out}\n";

/*
 * Packets with send times up to 5 ms ahead (and some with none) go
 * through a worker to a ring port: none leaves the worker before its
 * time, all leave, untimed ones bypass the wheel, times beyond the
 * wheel's horizon are refused and counted. How late they leave is a
 * figure of `dpflow bench txtime`, not checked here (tests share cores).
 */
Test(runtime, timed_packets_leave_at_their_time)
{
	struct dpflow_config_opts o = {0};
	struct dpflow_error err = {0};
	struct dpflow_ctx *ctx;
	struct dpflow_pool *pool;
	struct dpflow_ring *in, *out;
	struct dpflow_rt_cfg cfg = {0};
	struct dpflow_rt *rt;
	struct dpflow_worker_stats st;
	struct dpflow_gen_spec sp;
	enum { N = 1000, FAR = 20 };
	static uint64_t due[N + FAR];
	unsigned got = 0, early = 0, far = 0;
	uint64_t t0;

	o.pool_slots = 4096;
	ctx = dpflow_config_load_string(timed_yaml, "t.yaml", &o, &err);
	cr_assert_not_null(ctx, "%s", err.msg);
	pool = dpflow_ctx_pool(ctx);
	in = dpflow_port_ring_rx(dpflow_ctx_port(ctx, 0));
	out = dpflow_port_ring_tx(dpflow_ctx_port(ctx, 1));
	cfg.workers = 1;
	rt = dpflow_rt_create(ctx, &cfg, &err);
	cr_assert_not_null(rt, "%s", err.msg);
	cr_assert_eq(dpflow_rt_start(rt, &err), 0, "%s", err.msg);
	memset(&sp, 0, sizeof(sp));
	sp.has_eth = true;
	sp.outer.l3_type = DPFLOW_L3_IPV4;
	sp.outer.l4_type = DPFLOW_L4_UDP;
	sp.outer.ttl = 64;
	t0 = dpflow_clock_ns() + 100000000; /* 100 ms: not due when run */
	for (unsigned i = 0; i < N + FAR; i++) {
		uint32_t idx;
		struct dpflow_pkt_meta *m;

		cr_assert_eq(dpflow_pool_alloc_bulk(pool, &idx, 1), 0);
		m = dpflow_pool_meta(pool, idx);
		sp.outer.sport = (uint16_t)i;
		m->data_len = (uint16_t)dpflow_gen_build(
		    &sp, dpflow_pkt_data(pool, idx), 256);
		/* every 10th untimed; the last FAR 10 s ahead, beyond the
		 * wheel's horizon: refused, never sent early */
		due[i] = i >= N ? dpflow_clock_ns() + 10000000000ull
			 : i % 10 == 0
			     ? 0
			     : t0 + (uint64_t)((i * 7919u) % 5000) * 1000;
		m->tx_time_ns = due[i];
		cr_assert_eq(dpflow_ring_enqueue_burst(in, &idx, 1), 1);
	}
	while (got < N && dpflow_clock_ns() < t0 + 10000000000ull) {
		uint32_t idx[64];
		unsigned k = dpflow_ring_dequeue_burst(out, idx, 64);
		uint64_t now = dpflow_clock_ns();

		for (unsigned j = 0; j < k; j++) {
			const struct dpflow_pkt_meta *m =
			    dpflow_pool_meta(pool, idx[j]);
			unsigned i = m->outer.sport;
			uint64_t d = due[i];

			if (i >= N)
				far++;
			else if (d && now < d)
				early++;
			got += i < N;
		}
		dpflow_pool_free_bulk(pool, idx, k);
	}
	cr_expect_eq(got, N, "%u of %u timed packets out", got, N);
	cr_expect_eq(early, 0, "%u packets left before their time", early);
	cr_expect_eq(far, 0, "a packet 10 s ahead left early");
	dpflow_rt_stop(rt);
	dpflow_rt_worker_stats(rt, 0, &st);
	cr_expect_eq(st.tx_timed, N - N / 10, "the wheel sent %lu",
		     (unsigned long)st.tx_timed);
	cr_expect_eq(st.tx_timed_refused, FAR, "refused %lu",
		     (unsigned long)st.tx_timed_refused);
	cr_expect_eq(dpflow_ring_count(out), 0);
	{
		uint32_t idx[64];
		unsigned k;

		while ((k = dpflow_ring_dequeue_burst(out, idx, 64)))
			dpflow_pool_free_bulk(pool, idx, k);
	}
	dpflow_rt_destroy(rt);
	cr_expect_eq(dpflow_pool_avail(pool), pool->n_slots, "pool whole");
	dpflow_ctx_destroy(ctx);
}
