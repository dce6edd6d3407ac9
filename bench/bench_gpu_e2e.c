/*
 * `dpflow bench e2e --target gpu`: the exact-1m pipeline (a BASIC pipe on
 * the outer 5-tuple, 1M entries, a counter per entry) end to end on the
 * GPU target: host ring -> CPU proxy -> queue-fed persistent kernel
 * (gpu_flow.h, "queue-fed persistent pipeline") -> CPU proxy -> host ring,
 * beside the same pipe on the CPU target, one core and all cores, and the
 * host<->device copy bandwidths, all measured in the same run.
 *
 * Throughput: per queue one proxy thread and one `ring:...,loop` port, so
 * that what the proxy transmits it receives again: --inflight pre-built
 * packets per queue circulate (no allocation, no copy by the bench), and
 * the figure is what the proxies transmitted over --seconds. Alongside:
 * the proxies' CPU cycles a packet (every proxy spins on its core), the
 * kernel's batches (size, GPU time from claim to transmit, busy share of
 * the receivers) and the bursts the proxies cut short for want of ring
 * room, which say where the time goes.
 *
 * Latency: fresh queues, each proxy between an input and an output ring;
 * a feeder thread offers batches of --batch packets at --load percent of
 * the measured peak (paced on the TSC, round robin over the queues) and a
 * drainer thread takes them back. A batch's latency is host TSC time from
 * the feeder's enqueue into the proxy's input ring to the drainer's
 * dequeue of its last packet from the proxy's output ring: the doorbell to
 * transmit-ready time plus the proxies' pick-up on both sides. The
 * kernel's own share (%globaltimer, claim to transmit) is printed beside.
 *
 * The CPU target: bench_common's pipe harness (64-byte frames in pool
 * slots through dpflow_ctx_process_burst, bursts of 64), one thread, then
 * one thread per online CPU each over its own packets; its batch latency
 * is the time one burst of --batch packets takes on one core.
 */
#include <getopt.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dpflow/dpflow.h"
#include "dpflow/gen.h"
#include "dpflow/gpu.h"
#include "dpflow/gpu_flow.h"
#include "dpflow/ring.h"

#include "bench.h"
#include "bench_common.h"

#define E2E_WORKLOAD   "e2e-exact-1m"
#define LAT_TABLE      (1u << 16) /* batches in flight, at most */
#define LAT_SAMPLES    (1u << 22)
#define LAT_POOL_PER_Q 4096u

struct e2e_opts {
	uint32_t size;	    /* frame bytes */
	uint32_t hdr_split; /* 0: whole frames to the GPU */
	unsigned queues;
	unsigned load_pct;
	enum dpflow_gpu_path path;
	enum dpflow_gpu_flow_recv recv;
	unsigned receivers; /* per queue */
	unsigned wpb;
	uint32_t window;
	uint32_t flows;
	uint32_t inflight; /* packets circulating per queue */
	uint32_t qsize;
	uint16_t burst;
	uint32_t batch; /* latency: packets a batch */
	double seconds, lat_seconds;
	unsigned cpu_threads; /* 0: every online CPU */
	uint32_t cpu_pkts;    /* packets per CPU thread */
	bool no_latency, no_cpu;
	int gpu;
	uint64_t seed;
};

/* ---- flows and entries (bench_exact.c's keys) -----------------------------
 */

static uint64_t rng_state;

static uint64_t rng64(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint32_t rng_below(uint32_t n)
{
	return (uint32_t)(((rng64() >> 32) * n) >> 32);
}

static void make_flow(uint32_t i, struct bench_flow *f)
{
	uint32_t src = bench_scramble(i), dst = (uint32_t)rng64();

	f->src[0] = (uint8_t)(src >> 24);
	f->src[1] = (uint8_t)(src >> 16);
	f->src[2] = (uint8_t)(src >> 8);
	f->src[3] = (uint8_t)src;
	memcpy(f->dst, &dst, 4);
	f->sport = (uint16_t)(1024 + rng_below(64512));
	f->dport = (uint16_t)(rng_below(4) ? 443 : 53);
	f->proto = f->dport == 53 ? 17 : 6;
}

/* A frame of @size bytes of flow @f in slot @idx of @pool. */
static int frame_build(struct dpflow_pool *pool, uint32_t idx,
		       const struct bench_flow *f, uint32_t size)
{
	struct dpflow_gen_spec s;
	struct dpflow_pkt_meta *m = dpflow_pool_meta(pool, idx);
	uint32_t hdrs = 14 + 20 + (f->proto == 17 ? 8 : 20), len;

	memset(&s, 0, sizeof(s));
	s.has_eth = true;
	s.src_mac[0] = 0x02;
	s.src_mac[5] = 1;
	s.dst_mac[0] = 0x02;
	s.dst_mac[5] = 2;
	s.outer.l3_type = DPFLOW_L3_IPV4;
	s.outer.l4_type = f->proto == 17 ? DPFLOW_L4_UDP : DPFLOW_L4_TCP;
	memcpy(s.outer.src, f->src, 4);
	memcpy(s.outer.dst, f->dst, 4);
	s.outer.sport = f->sport;
	s.outer.dport = f->dport;
	s.outer.ttl = 64;
	s.outer.payload_len = (uint16_t)(size > hdrs ? size - hdrs : 0);
	s.frame_len = (uint16_t)size;
	len = dpflow_gen_build(&s, dpflow_pkt_data(pool, idx), pool->data_room);
	if (len != size) {
		fprintf(stderr, "bench e2e: a %u-byte frame came out %u\n",
			size, len);
		return -1;
	}
	m->data_len = (uint16_t)len;
	m->rx_ts_ns = 1; /* set: the ring port leaves it alone */
	return 0;
}

/* ---- the two contexts -----------------------------------------------------
 */

struct e2e {
	const struct e2e_opts *o;
	struct bench_flow *flows;
	/* the CPU target's harness: T threads x cpu_pkts packets */
	struct bench_pipe bp;
	unsigned cpu_threads;
	/* the GPU target's context: hits out of port 1, misses dropped */
	struct dpflow_ctx *ctx;
	struct dpflow_pipe *pipe;
	struct dpflow_queue *q;
	uint16_t in_port;
	struct dpflow_gpu *gpu;
	struct dpflow_gpu_flow *g;
};

static int gpu_ctx_create(struct e2e *e, const struct dpflow_pipe_cfg *c)
{
	struct dpflow_ctx_params cp = {.pool_slots = 1024, .data_room = 256};
	struct dpflow_error err = {0};
	struct dpflow_pipe_cfg pc = *c;
	int in, out;

	e->ctx = dpflow_ctx_create(&cp, &err);
	if (!e->ctx)
		goto fail;
	in = dpflow_ctx_port_add(e->ctx, "in", "ring:e2e_in", &err);
	out = in < 0 ? in
		     : dpflow_ctx_port_add(e->ctx, "out", "ring:e2e_out", &err);
	if (in < 0 || out < 0)
		goto fail;
	e->in_port = (uint16_t)in;
	pc.root = true;
	pc.port = (uint16_t)in;
	pc.fwd.kind = DPFLOW_FWD_PORT;
	pc.fwd.port = (uint16_t)out;
	pc.miss_fwd.kind = DPFLOW_FWD_DROP;
	e->pipe = dpflow_pipe_create(e->ctx, &pc, &err);
	if (!e->pipe)
		goto fail;
	e->q = dpflow_queue_create(e->ctx, &err);
	if (!e->q)
		goto fail;
	return 0;
fail:
	fprintf(stderr, "bench e2e: GPU-side context: %s\n", err.msg);
	return -1;
}

/* Both contexts with the same pipe and entries; the CPU's packets. */
static int build(struct e2e *e)
{
	const struct e2e_opts *o = e->o;
	struct dpflow_error err = {0};
	struct dpflow_pipe_cfg c;
	struct dpflow_entry_cfg ec;
	uint32_t cpu_n = e->cpu_threads * o->cpu_pkts;
	uint64_t t0 = dpflow_tsc();

	bench_pipe_cfg(&c, "exact", DPFLOW_PIPE_BASIC, o->flows,
		       bench_exact_fields,
		       DPFLOW_ARRAY_SIZE(bench_exact_fields));
	c.monitor.counter = true;
	if (bench_pipe_create(&e->bp, &c, o->no_cpu ? 0 : cpu_n) ||
	    gpu_ctx_create(e, &c))
		return -1;
	e->flows = malloc((size_t)o->flows * sizeof(*e->flows));
	if (!e->flows) {
		fprintf(stderr, "bench e2e: out of memory\n");
		return -1;
	}
	rng_state = o->seed;
	for (uint32_t i = 0; i < o->flows; i++) {
		make_flow(i, &e->flows[i]);
		bench_exact_entry(&e->flows[i], &ec);
		if (!dpflow_entry_add(e->q, e->pipe, &ec, NULL, &err)) {
			fprintf(stderr, "bench e2e: entry add: %s\n", err.msg);
			return -1;
		}
		if (!o->no_cpu && bench_pipe_add(&e->bp, &ec))
			return -1;
		if ((i + 1) % 65536 && i + 1 < o->flows)
			continue;
		if (dpflow_entries_process(e->q, NULL, &err)) {
			fprintf(stderr, "bench e2e: entries: %s\n", err.msg);
			return -1;
		}
		if (!o->no_cpu && bench_pipe_commit(&e->bp))
			return -1;
	}
	for (uint32_t i = 0; !o->no_cpu && i < cpu_n; i++)
		if (bench_pipe_set_pkt(&e->bp, i,
				       &e->flows[rng_below(o->flows)]))
			return -1;
	printf("# %s: %u entries on both targets, %u CPU packets, in %.1f s\n",
	       E2E_WORKLOAD, o->flows, o->no_cpu ? 0 : cpu_n,
	       (double)(dpflow_tsc() - t0) / (double)dpflow_tsc_hz());
	return 0;
}

static void e2e_free(struct e2e *e)
{
	dpflow_gpu_flow_unbind(e->g);
	if (e->q)
		dpflow_queue_destroy(e->q);
	dpflow_ctx_destroy(e->ctx);
	bench_pipe_destroy(&e->bp);
	dpflow_gpu_close(e->gpu);
	free(e->flows);
}

/* ---- the CPU target -------------------------------------------------------
 */

struct cpu_worker {
	struct bench_pipe *bp;
	uint32_t lo, hi, burst;
	const int *stop;
	pthread_barrier_t *go;
	uint64_t pkts, t0, t1;
	uint32_t *samples; /* burst times in TSC ticks, or NULL */
	uint64_t n_samples;
	pthread_t th;
};

static void *cpu_work(void *arg)
{
	struct cpu_worker *w = arg;
	struct dpflow_ctx *ctx = w->bp->ctx;

	dpflow_ctx_thread_online(ctx);
	pthread_barrier_wait(w->go);
	w->t0 = dpflow_tsc();
	while (!__atomic_load_n(w->stop, __ATOMIC_RELAXED)) {
		for (uint32_t i = w->lo; i + w->burst <= w->hi; i += w->burst) {
			uint64_t a = w->samples ? dpflow_tsc() : 0;

			dpflow_ctx_process_burst(ctx, w->bp->port,
						 w->bp->idx + i,
						 (uint16_t)w->burst);
			if (w->samples && w->n_samples < LAT_SAMPLES)
				w->samples[w->n_samples++] =
				    (uint32_t)(dpflow_tsc() - a);
			dpflow_ctx_quiescent(ctx);
			w->pkts += w->burst;
		}
	}
	w->t1 = dpflow_tsc();
	dpflow_ctx_thread_offline(ctx);
	return NULL;
}

/*
 * @n threads over their own packets for @seconds: packets per second of
 * the whole (the sum over the common interval). @samples: per-burst times
 * of thread 0.
 */
static double cpu_run(struct e2e *e, unsigned n, uint32_t burst, double seconds,
		      uint32_t *samples, uint64_t *n_samples)
{
	struct cpu_worker *w = calloc(n, sizeof(*w));
	pthread_barrier_t go;
	struct timespec ts;
	int stop = 0;
	uint64_t pkts = 0, t0 = UINT64_MAX, t1 = 0;

	if (!w)
		return 0;
	pthread_barrier_init(&go, NULL, n + 1);
	for (unsigned i = 0; i < n; i++) {
		w[i].bp = &e->bp;
		w[i].lo = i * e->o->cpu_pkts;
		w[i].hi = w[i].lo + e->o->cpu_pkts;
		w[i].burst = burst;
		w[i].stop = &stop;
		w[i].go = &go;
		w[i].samples = i == 0 ? samples : NULL;
		pthread_create(&w[i].th, NULL, cpu_work, &w[i]);
	}
	pthread_barrier_wait(&go);
	ts.tv_sec = (time_t)seconds;
	ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
	nanosleep(&ts, NULL);
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (unsigned i = 0; i < n; i++) {
		pthread_join(w[i].th, NULL);
		pkts += w[i].pkts;
		t0 = w[i].t0 < t0 ? w[i].t0 : t0;
		t1 = w[i].t1 > t1 ? w[i].t1 : t1;
	}
	if (n_samples)
		*n_samples = w[0].n_samples;
	pthread_barrier_destroy(&go);
	free(w);
	return t1 > t0
		   ? (double)pkts * (double)dpflow_tsc_hz() / (double)(t1 - t0)
		   : 0;
}

/* ---- the GPU target: queues, proxies and the kernel -----------------------
 */

struct gq {
	struct dpflow_port *in, *out; /* the same port when looped */
	struct dpflow_gpu_queue *q;
	struct dpflow_gpu_proxy *px;
};

struct gpu_setup {
	struct dpflow_pool *pool;
	unsigned n;
	struct gq *qs;
	struct dpflow_gpu_queue **queues;
	struct dpflow_gpu_flow_run *run;
};

/* @n queues on a pool of @slots; @loop: one looped ring port each. */
static int gpu_setup(struct e2e *e, struct gpu_setup *s, unsigned n,
		     uint32_t slots, uint32_t ring_size, bool loop,
		     const char *tag)
{
	const struct e2e_opts *o = e->o;
	struct dpflow_pool_params pp = {tag, slots, 0, 0, NULL};
	struct dpflow_gpu_flow_run_params rp = {0};
	struct dpflow_error err = {0};

	memset(s, 0, sizeof(*s));
	s->n = n;
	s->qs = calloc(n, sizeof(*s->qs));
	s->queues = calloc(n, sizeof(*s->queues));
	pp.data_room = (uint16_t)(o->size > 2048 ? o->size : 2048);
	s->pool = dpflow_pool_create(&pp, &err);
	if (!s->qs || !s->queues || !s->pool)
		goto fail;
	for (unsigned i = 0; i < n; i++) {
		struct dpflow_gpu_queue_params qp = {0};
		char uri[96];

		snprintf(uri, sizeof(uri), "ring:%s%u,size=%u%s", tag, i,
			 ring_size, loop ? ",loop" : "");
		s->qs[i].in = dpflow_port_open(s->pool, uri, &err);
		if (!s->qs[i].in)
			goto fail;
		s->qs[i].out = s->qs[i].in;
		if (!loop) {
			snprintf(uri, sizeof(uri), "ring:%so%u,size=%u", tag, i,
				 ring_size);
			s->qs[i].out = dpflow_port_open(s->pool, uri, &err);
			if (!s->qs[i].out)
				goto fail;
		}
		qp.pool = s->pool;
		qp.size = o->qsize;
		qp.path = o->path;
		qp.hdr_split = o->hdr_split;
		s->qs[i].q = dpflow_gpu_queue_create(e->gpu, &qp, &err);
		if (!s->qs[i].q)
			goto fail;
		s->queues[i] = s->qs[i].q;
	}
	rp.gpu = e->gpu;
	rp.queues = s->queues;
	rp.n_queues = n;
	rp.port = e->in_port;
	rp.recv = o->recv;
	rp.receivers = o->receivers;
	rp.warps_per_block = o->wpb;
	rp.window = o->window;
	s->run = dpflow_gpu_flow_run_start(e->g, &rp, &err);
	if (!s->run)
		goto fail;
	return 0;
fail:
	fprintf(stderr, "bench e2e: GPU setup (%s): %s\n", tag, err.msg);
	return -1;
}

static int proxies_start(struct gpu_setup *s, uint16_t burst)
{
	struct dpflow_error err = {0};

	for (unsigned i = 0; i < s->n; i++) {
		struct dpflow_gpu_proxy_params xp = {0};

		xp.queue = s->qs[i].q;
		xp.rx_port = s->qs[i].in;
		xp.tx_port = s->qs[i].out;
		xp.burst = burst;
		xp.watch = dpflow_gpu_flow_run_kernel(s->run);
		s->qs[i].px = dpflow_gpu_proxy_start(&xp, &err);
		if (!s->qs[i].px) {
			fprintf(stderr, "bench e2e: proxy %u: %s\n", i,
				err.msg);
			return -1;
		}
	}
	return 0;
}

/* Sum of the proxies' counters now; -1 if one stopped with an error. */
static int proxies_stats(struct gpu_setup *s, struct dpflow_gpu_proxy_stats *t)
{
	struct dpflow_error err = {0};

	memset(t, 0, sizeof(*t));
	for (unsigned i = 0; i < s->n; i++) {
		struct dpflow_gpu_proxy_stats p;

		if (!s->qs[i].px)
			continue;
		if (dpflow_gpu_proxy_error(s->qs[i].px, &err) < 0) {
			fprintf(stderr, "bench e2e: proxy %u: %s\n", i,
				err.msg);
			return -1;
		}
		dpflow_gpu_proxy_stats_get(s->qs[i].px, &p);
		t->rx_pkts += p.rx_pkts;
		t->tx_pkts += p.tx_pkts;
		t->tx_dropped += p.tx_dropped;
		t->rx_ring_full += p.rx_ring_full;
		t->copies_h2d += p.copies_h2d;
		t->copies_d2h += p.copies_d2h;
	}
	return 0;
}

/* Free what is left in @r to @pool. */
static void ring_free(struct dpflow_ring *r, struct dpflow_pool *pool)
{
	uint32_t idx[256];
	unsigned k;

	while (r && (k = dpflow_ring_dequeue_burst(r, idx, 256)))
		dpflow_pool_free_bulk(pool, idx, k);
}

/* Kernel, then proxies (they flush), then the rings; every slot back. */
static void gpu_teardown(struct e2e *e, struct gpu_setup *s,
			 struct dpflow_gpu_flow_run_stats *st)
{
	struct dpflow_error err = {0};
	uint32_t slots = s->pool ? s->pool->n_slots : 0;

	if (s->run && dpflow_gpu_flow_run_stop(s->run, 0, st, &err))
		fprintf(stderr, "bench e2e: kernel: %s\n", err.msg);
	for (unsigned i = 0; s->qs && i < s->n; i++) {
		if (s->qs[i].px &&
		    dpflow_gpu_proxy_stop(s->qs[i].px, NULL, &err))
			fprintf(stderr, "bench e2e: proxy %u: %s\n", i,
				err.msg);
		ring_free(s->qs[i].in ? dpflow_port_ring_rx(s->qs[i].in) : NULL,
			  s->pool);
		ring_free(s->qs[i].out ? dpflow_port_ring_tx(s->qs[i].out)
				       : NULL,
			  s->pool);
	}
	/* the proxies watched the run's kernel: destroy it after them */
	dpflow_gpu_flow_run_destroy(s->run);
	for (unsigned i = 0; s->qs && i < s->n; i++) {
		dpflow_gpu_queue_destroy(s->qs[i].q);
		if (s->qs[i].out != s->qs[i].in)
			dpflow_port_close(s->qs[i].out);
		dpflow_port_close(s->qs[i].in);
	}
	if (s->pool) {
		if (dpflow_pool_avail(s->pool) != slots)
			fprintf(stderr,
				"bench e2e: %u of %u packets back in the "
				"pool\n",
				dpflow_pool_avail(s->pool), slots);
		dpflow_gpu_pool_unregister(e->gpu, s->pool);
		dpflow_pool_destroy(s->pool);
	}
	free(s->qs);
	free(s->queues);
	memset(s, 0, sizeof(*s));
}

/* ---- throughput -----------------------------------------------------------
 */

struct tput {
	double mpps, gbps, proxy_cpp, secs;
	double batch_pkts, busy_share;
	uint64_t ring_full, h2d, d2h, dropped;
	struct dpflow_gpu_flow_run_stats st;
};

static uint32_t pow2_at_least(uint32_t v)
{
	uint32_t p = 2;

	while (p < v)
		p <<= 1;
	return p;
}

static void sleep_s(double s)
{
	struct timespec ts;

	ts.tv_sec = (time_t)s;
	ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
	nanosleep(&ts, NULL);
}

static int tput_run(struct e2e *e, struct tput *t)
{
	const struct e2e_opts *o = e->o;
	struct gpu_setup s;
	struct dpflow_gpu_proxy_stats p0, p1;
	struct dpflow_gpu_flow_run_stats r0, r1;
	struct dpflow_error err = {0};
	uint32_t ring = pow2_at_least(2 * o->inflight);
	uint64_t c0, c1;
	int rc = -1;

	memset(t, 0, sizeof(*t));
	if (gpu_setup(e, &s, o->queues, o->queues * o->inflight + 1024, ring,
		      true, "e2e"))
		goto out;
	for (unsigned i = 0; i < s.n; i++) {
		uint32_t *idx = malloc(o->inflight * sizeof(*idx));

		if (!idx || dpflow_pool_alloc_bulk(s.pool, idx, o->inflight)) {
			free(idx);
			fprintf(stderr, "bench e2e: no room for packets\n");
			goto out;
		}
		for (uint32_t k = 0; k < o->inflight; k++)
			if (frame_build(s.pool, idx[k],
					&e->flows[rng_below(o->flows)],
					o->size)) {
				dpflow_pool_free_bulk(s.pool, idx, o->inflight);
				free(idx);
				goto out;
			}
		dpflow_ring_enqueue_bulk(dpflow_port_ring_rx(s.qs[i].in), idx,
					 o->inflight);
		free(idx);
	}
	if (proxies_start(&s, o->burst))
		goto out;
	sleep_s(0.5);
	if (proxies_stats(&s, &p0) ||
	    dpflow_gpu_flow_run_stats_get(s.run, &r0, &err))
		goto out;
	c0 = dpflow_tsc();
	sleep_s(o->seconds);
	c1 = dpflow_tsc();
	if (proxies_stats(&s, &p1) ||
	    dpflow_gpu_flow_run_stats_get(s.run, &r1, &err))
		goto out;
	t->secs = (double)(c1 - c0) / (double)dpflow_tsc_hz();
	t->mpps = (double)(p1.tx_pkts - p0.tx_pkts) / t->secs / 1e6;
	t->gbps = t->mpps * 1e6 * o->size * 8 / 1e9;
	t->proxy_cpp = p1.tx_pkts > p0.tx_pkts
			   ? (double)s.n * (double)(c1 - c0) /
				 (double)(p1.tx_pkts - p0.tx_pkts)
			   : 0;
	t->ring_full = p1.rx_ring_full - p0.rx_ring_full;
	t->h2d = p1.copies_h2d - p0.copies_h2d;
	t->d2h = p1.copies_d2h - p0.copies_d2h;
	t->dropped = p1.tx_dropped - p0.tx_dropped;
	t->batch_pkts = r1.batches > r0.batches
			    ? (double)(r1.pkts - r0.pkts) /
				  (double)(r1.batches - r0.batches)
			    : 0;
	t->busy_share = (double)(r1.busy_ns - r0.busy_ns) /
			(t->secs * 1e9 * (double)r1.receivers);
	t->st = r1;
	rc = 0;
out:
	if (err.msg[0])
		fprintf(stderr, "bench e2e: kernel: %s\n", err.msg);
	gpu_teardown(e, &s, rc ? NULL : &t->st);
	return rc;
}

/* ---- latency at a fixed offered load --------------------------------------
 */

struct lat_batch {
	uint64_t t0;
	uint32_t left;
	uint32_t pad;
};

struct lat {
	struct e2e *e;
	struct gpu_setup s;
	struct dpflow_ring *free; /* drainer -> feeder */
	struct lat_batch *tbl;
	uint32_t *batch_of; /* slot -> batch: a line holds 16 (not meta) */
	uint32_t *samples;  /* batch latencies, TSC ticks */
	uint64_t n_samples;
	double pps; /* offered */
	int stop_feed DPFLOW_CACHE_ALIGNED;
	int stop_drain;
	int recording;
	uint64_t fed, starved, late, drained;
	pthread_t feeder, drainer;
};

static void *lat_feed(void *arg)
{
	struct lat *l = arg;
	const uint32_t b = l->e->o->batch;
	const uint64_t gap =
	    (uint64_t)((double)dpflow_tsc_hz() * b / l->pps + 0.5);
	uint64_t next = dpflow_tsc(), id = 0;
	uint32_t idx[DPFLOW_BURST_MAX];
	unsigned q = 0;

	while (!__atomic_load_n(&l->stop_feed, __ATOMIC_RELAXED)) {
		uint64_t now = dpflow_tsc();
		struct lat_batch *lb;

		if (now < next)
			continue;
		if (now - next > 16 * gap) { /* fell behind: do not burst */
			l->late++;
			next = now;
		}
		next += gap;
		if (!dpflow_ring_dequeue_bulk(l->free, idx, b)) {
			l->starved++;
			continue;
		}
		lb = &l->tbl[id % LAT_TABLE];
		lb->left = b;
		for (uint32_t k = 0; k < b; k++)
			l->batch_of[idx[k]] = (uint32_t)id;
		lb->t0 = dpflow_tsc();
		if (!dpflow_ring_enqueue_bulk(
			dpflow_port_ring_rx(l->s.qs[q].in), idx, b)) {
			/* cannot happen: the ring holds the whole pool */
			l->starved++;
			continue;
		}
		l->fed += b;
		id++;
		q = (q + 1) % l->s.n;
	}
	return NULL;
}

static void *lat_drain(void *arg)
{
	struct lat *l = arg;
	uint32_t idx[256];

	while (!__atomic_load_n(&l->stop_drain, __ATOMIC_RELAXED)) {
		for (unsigned q = 0; q < l->s.n; q++) {
			struct dpflow_ring *r =
			    dpflow_port_ring_tx(l->s.qs[q].out);
			unsigned k = dpflow_ring_dequeue_burst(r, idx, 256);
			uint64_t now;

			if (!k)
				continue;
			now = dpflow_tsc();
			for (unsigned j = 0; j < k; j++) {
				uint32_t id = l->batch_of[idx[j]];
				struct lat_batch *lb = &l->tbl[id % LAT_TABLE];

				if (--lb->left == 0 &&
				    __atomic_load_n(&l->recording,
						    __ATOMIC_RELAXED) &&
				    l->n_samples < LAT_SAMPLES)
					l->samples[l->n_samples++] =
					    (uint32_t)(now - lb->t0);
			}
			l->drained += k;
			dpflow_ring_enqueue_bulk(l->free, idx, k);
		}
	}
	return NULL;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* Percentile @pct of sorted @v[0..n) in microseconds (TSC ticks in). */
static double pct_us(const uint32_t *v, uint64_t n, double pct)
{
	uint64_t i;

	if (!n)
		return 0;
	i = (uint64_t)((double)n * pct / 100.0);
	if (i >= n)
		i = n - 1;
	return (double)v[i] * 1e6 / (double)dpflow_tsc_hz();
}

struct lat_res {
	unsigned queues;
	double offered_mpps, achieved_mpps;
	double p50, p99, max; /* us */
	uint64_t batches, starved, late;
	struct dpflow_gpu_flow_run_stats st;
};

static int lat_run(struct e2e *e, double peak_mpps, struct lat_res *res)
{
	const struct e2e_opts *o = e->o;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned nq = o->queues;
	struct lat *l = calloc(1, sizeof(*l));
	uint32_t slots, ring;
	uint64_t d0, d1, c0, c1;
	struct dpflow_error err = {0};
	int rc = -1;

	memset(res, 0, sizeof(*res));
	/* a core each for the feeder and the drainer, one spare */
	if (ncpu > 4 && nq > (unsigned)ncpu - 3)
		nq = (unsigned)ncpu - 3;
	slots = nq * LAT_POOL_PER_Q;
	ring = pow2_at_least(slots);
	if (!l)
		return -1;
	l->e = e;
	l->pps = peak_mpps * 1e6 * o->load_pct / 100.0;
	l->tbl = calloc(LAT_TABLE, sizeof(*l->tbl));
	l->samples = malloc(LAT_SAMPLES * sizeof(*l->samples));
	if (!l->tbl || !l->samples || l->pps <= 0)
		goto out;
	if (gpu_setup(e, &l->s, nq, slots + 1024, ring, false, "lat"))
		goto out;
	l->batch_of = calloc(l->s.pool->n_slots, sizeof(*l->batch_of));
	if (!l->batch_of)
		goto out;
	l->free =
	    dpflow_ring_create("e2e_free", ring, DPFLOW_RING_F_SPSC, &err);
	if (!l->free)
		goto out;
	for (uint32_t k = 0; k < slots; k++) {
		uint32_t idx;

		if (dpflow_pool_alloc_bulk(l->s.pool, &idx, 1) ||
		    frame_build(l->s.pool, idx, &e->flows[rng_below(o->flows)],
				o->size))
			goto out;
		dpflow_ring_enqueue_bulk(l->free, &idx, 1);
	}
	if (proxies_start(&l->s, o->burst))
		goto out;
	pthread_create(&l->drainer, NULL, lat_drain, l);
	pthread_create(&l->feeder, NULL, lat_feed, l);
	sleep_s(0.3);
	__atomic_store_n(&l->recording, 1, __ATOMIC_RELAXED);
	d0 = __atomic_load_n(&l->drained, __ATOMIC_RELAXED);
	c0 = dpflow_tsc();
	sleep_s(o->lat_seconds);
	__atomic_store_n(&l->recording, 0, __ATOMIC_RELAXED);
	d1 = __atomic_load_n(&l->drained, __ATOMIC_RELAXED);
	c1 = dpflow_tsc();
	__atomic_store_n(&l->stop_feed, 1, __ATOMIC_RELAXED);
	pthread_join(l->feeder, NULL);
	sleep_s(0.05);
	__atomic_store_n(&l->stop_drain, 1, __ATOMIC_RELAXED);
	pthread_join(l->drainer, NULL);
	qsort(l->samples, l->n_samples, sizeof(*l->samples), cmp_u32);
	res->queues = nq;
	res->offered_mpps = l->pps / 1e6;
	res->achieved_mpps = (double)(d1 - d0) * (double)dpflow_tsc_hz() /
			     (double)(c1 - c0) / 1e6;
	res->p50 = pct_us(l->samples, l->n_samples, 50);
	res->p99 = pct_us(l->samples, l->n_samples, 99);
	res->max = pct_us(l->samples, l->n_samples, 100);
	res->batches = l->n_samples;
	res->starved = l->starved;
	res->late = l->late;
	rc = 0;
out:
	if (err.msg[0])
		fprintf(stderr, "bench e2e: latency: %s\n", err.msg);
	/* the free ring's packets go back with the rings' */
	if (l->free) {
		ring_free(l->free, l->s.pool);
		dpflow_ring_destroy(l->free);
	}
	gpu_teardown(e, &l->s, rc ? NULL : &res->st);
	free(l->tbl);
	free(l->samples);
	free(l->batch_of);
	free(l);
	return rc;
}

/* ---- the run --------------------------------------------------------------
 */

/* One result in bench.h's JSON format (workers and peer filled in). */
static void json_result(const char *variant, const char *target,
			unsigned workers, double mpps, double cpp, double gbps,
			const char *peer, double peer_mpps)
{
	printf("{\"workload\":\"%s\",\"variant\":\"%s\",\"target\":\"%s\","
	       "\"workers\":%u,\"mpps\":%.3f,\"cycles_per_pkt\":%.2f,"
	       "\"gbps\":%.3f,\"tsc_hz\":%lu,",
	       E2E_WORKLOAD, variant, target, workers, mpps, cpp, gbps,
	       (unsigned long)dpflow_tsc_hz());
	if (peer && peer_mpps > 0)
		printf("\"peer\":\"%s\",\"peer_mpps\":%.3f,\"ratio\":%.3f}\n",
		       peer, peer_mpps, mpps / peer_mpps);
	else
		printf("\"peer\":null,\"peer_mpps\":null,\"ratio\":null}\n");
}

static const char *path_name(enum dpflow_gpu_path p)
{
	return p == DPFLOW_GPU_PATH_DEVICE ? "device" : "zero-copy";
}

static int run(const struct e2e_opts *o)
{
	struct e2e e;
	struct dpflow_error err = {0};
	struct dpflow_gpu_copy_bw bw;
	struct tput t;
	struct lat_res lr;
	double cpu1 = 0, cpuall = 0, hz = (double)dpflow_tsc_hz();
	double cb50 = 0, cb99 = 0, cbmax = 0, bus;
	uint32_t *bsamples = NULL;
	uint64_t n_bs = 0;
	char variant[96], peer[48];
	int rc = 1;

	memset(&e, 0, sizeof(e));
	e.o = o;
	e.cpu_threads = o->cpu_threads;
	if (!e.cpu_threads) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		e.cpu_threads = n > 0 ? (unsigned)n : 1;
	}
	e.gpu = dpflow_gpu_open(o->gpu, &err);
	if (!e.gpu) {
		fprintf(stderr, "bench e2e: %s\n", err.msg);
		return 1;
	}
	if (build(&e))
		goto out;
	e.g = dpflow_gpu_flow_bind(e.ctx, o->gpu, &err);
	if (!e.g) {
		fprintf(stderr, "bench e2e: bind: %s\n", err.msg);
		goto out;
	}
	/* the copy bandwidths first, with nothing else on the bus */
	if (dpflow_gpu_copy_bw_measure(o->gpu, 256u << 20, 1ull << 30, &bw,
				       &err)) {
		fprintf(stderr, "bench e2e: copy bandwidth: %s\n", err.msg);
		goto out;
	}
	printf("# GPU %s; %u-byte frames, %s path, header split %u, %u "
	       "queues, %u packets circulating each, proxy bursts of %u\n",
	       dpflow_gpu_name(e.gpu), o->size, path_name(o->path),
	       o->hdr_split, o->queues, o->inflight, o->burst);
	if (tput_run(&e, &t))
		goto out;
	if (!o->no_cpu) {
		bsamples = malloc(LAT_SAMPLES * sizeof(*bsamples));
		cpu1 = cpu_run(&e, 1, 64, o->seconds, NULL, NULL);
		cpuall = cpu_run(&e, e.cpu_threads, 64, o->seconds, NULL, NULL);
		if (bsamples) {
			cpu_run(&e, 1, o->batch, 0.3, bsamples, &n_bs);
			qsort(bsamples, n_bs, sizeof(*bsamples), cmp_u32);
			cb50 = pct_us(bsamples, n_bs, 50);
			cb99 = pct_us(bsamples, n_bs, 99);
			cbmax = pct_us(bsamples, n_bs, 100);
		}
	}
	if (!o->no_latency && lat_run(&e, t.mpps, &lr))
		goto out;

	/* ---- figures ---- */
	snprintf(variant, sizeof(variant), "gpu-%s-%uB-split%u-%uq",
		 o->path == DPFLOW_GPU_PATH_DEVICE ? "dev" : "zc", o->size,
		 o->hdr_split, o->queues);
	snprintf(peer, sizeof(peer), "dpflow-cpu-%ucore", e.cpu_threads);
	json_result(variant, "gpu", o->queues, t.mpps, t.proxy_cpp, t.gbps,
		    o->no_cpu ? NULL : peer, cpuall / 1e6);
	if (!o->no_cpu) {
		json_result("pipe-cpu-1core", "cpu", 1, cpu1 / 1e6,
			    cpu1 > 0 ? hz / cpu1 : 0, cpu1 * o->size * 8 / 1e9,
			    NULL, 0);
		json_result(
		    "pipe-cpu-allcores", "cpu", e.cpu_threads, cpuall / 1e6,
		    cpuall > 0 ? hz * e.cpu_threads / cpuall : 0,
		    cpuall * o->size * 8 / 1e9, "dpflow-cpu-1core", cpu1 / 1e6);
	}
	/* frame bytes that crossed PCIe each way per second: the copies of
	 * the device path, or what the kernel read of the frames in host
	 * memory on the zero-copy path (its staged window) */
	bus = t.mpps * 1e6 *
	      (o->path == DPFLOW_GPU_PATH_DEVICE
		   ? (o->hdr_split && o->hdr_split < o->size ? o->hdr_split
							     : o->size)
		   : (t.st.window < o->size ? t.st.window : o->size));
	printf("{\"workload\":\"%s\",\"target\":\"gpu\",\"variant\":\"%s\","
	       "\"copy_h2d_gbs\":%.2f,\"copy_d2h_gbs\":%.2f,"
	       "\"copy_both_gbs\":%.2f,\"e2e_frames_gbs\":%.2f,"
	       "\"e2e_bus_gbs\":%.2f}\n",
	       E2E_WORKLOAD, variant, bw.h2d / 1e9, bw.d2h / 1e9, bw.both / 1e9,
	       t.gbps / 8, bus / 1e9);
	if (!o->no_latency)
		printf("{\"workload\":\"%s\",\"target\":\"gpu\",\"variant\":"
		       "\"%s-latency\",\"load_pct\":%u,\"offered_mpps\":%.3f,"
		       "\"achieved_mpps\":%.3f,\"batch\":%u,\"p50_us\":%.2f,"
		       "\"p99_us\":%.2f,\"max_us\":%.2f,\"gpu_batch_p50_us\":"
		       "%.2f,\"gpu_batch_p99_us\":%.2f,\"cpu_1core_batch_p50_"
		       "us\":%.2f,\"cpu_1core_batch_p99_us\":%.2f}\n",
		       E2E_WORKLOAD, variant, o->load_pct, lr.offered_mpps,
		       lr.achieved_mpps, o->batch, lr.p50, lr.p99, lr.max,
		       lr.st.batch_ns_p50 / 1e3, lr.st.batch_ns_p99 / 1e3, cb50,
		       cb99);

	/* ---- the readable summary ---- */
	printf("\n# end to end, %u-byte frames (%s, split %u):\n", o->size,
	       path_name(o->path), o->hdr_split);
	printf("#   GPU target  %8.2f Mpps %8.1f Gbps  (%u queues/proxies)\n",
	       t.mpps, t.gbps, o->queues);
	if (!o->no_cpu) {
		printf("#   CPU 1 core  %8.2f Mpps %8.1f Gbps\n", cpu1 / 1e6,
		       cpu1 * o->size * 8 / 1e9);
		printf("#   CPU %2u cores %7.2f Mpps %8.1f Gbps  (64-byte "
		       "frames; its pipe reads headers only)\n",
		       e.cpu_threads, cpuall / 1e6, cpuall * o->size * 8 / 1e9);
	}
	printf("#   copies: host->device %.1f GB/s, device->host %.1f GB/s, "
	       "both at once %.1f GB/s; end to end: %.1f GB/s of frames, "
	       "%.1f GB/s of frame bytes over PCIe each way (%s)\n",
	       bw.h2d / 1e9, bw.d2h / 1e9, bw.both / 1e9, t.gbps / 8, bus / 1e9,
	       o->path == DPFLOW_GPU_PATH_DEVICE
		   ? "the proxies' copies"
		   : "zero-copy: the kernel reads its window, payloads stay");
	printf("# where the time goes: proxies %.0f CPU cycles a packet "
	       "(%u spinning threads); %llu proxy bursts cut short for want "
	       "of ring room; %llu copies each way (device path); kernel: "
	       "%.1f packets a batch, receivers busy %.0f%% of the time, "
	       "batch GPU time p50 %.2f us p99 %.2f us; %llu packets "
	       "dropped\n",
	       t.proxy_cpp, o->queues, (unsigned long long)t.ring_full,
	       (unsigned long long)t.h2d, t.batch_pkts, 100 * t.busy_share,
	       t.st.batch_ns_p50 / 1e3, t.st.batch_ns_p99 / 1e3,
	       (unsigned long long)t.dropped);
	printf("#   kernel: %u receivers (%s), %u blocks of %u threads, "
	       "window %u bytes; %llu staged, %llu in place, %llu cut at the "
	       "split\n",
	       t.st.receivers,
	       o->recv == DPFLOW_GPU_FLOW_RECV_BLOCK ? "blocks" : "warps",
	       t.st.blocks, t.st.threads, t.st.window,
	       (unsigned long long)t.st.staged,
	       (unsigned long long)t.st.in_place,
	       (unsigned long long)t.st.split_cut);
	if (!o->no_latency) {
		printf("# latency at %u%% of the peak (%.2f Mpps offered over "
		       "%u queues, %.2f Mpps through, batches of %u): p50 "
		       "%.2f us, p99 %.2f us, max %.2f us over %llu batches "
		       "(host TSC, feeder's enqueue to drainer's dequeue)\n",
		       o->load_pct, lr.offered_mpps, lr.queues,
		       lr.achieved_mpps, o->batch, lr.p50, lr.p99, lr.max,
		       (unsigned long long)lr.batches);
		printf("#   of which the kernel (claim to transmit, "
		       "%%globaltimer): p50 %.2f us, p99 %.2f us; feeder late "
		       "%llu times, starved %llu; CPU target, one burst of %u "
		       "on one core: p50 %.2f us, p99 %.2f us, max %.2f us\n",
		       lr.st.batch_ns_p50 / 1e3, lr.st.batch_ns_p99 / 1e3,
		       (unsigned long long)lr.late,
		       (unsigned long long)lr.starved, o->batch, cb50, cb99,
		       cbmax);
	}
	if (o->size >= 1500)
		printf("# goal: >= 350 Gbps at 1500 bytes: %.1f Gbps, %s\n",
		       t.gbps, t.gbps >= 350 ? "met" : "missed");
	if (o->size <= 64)
		printf("# goal: >= 200 Mpps at 64 bytes: %.1f Mpps, %s\n",
		       t.mpps, t.mpps >= 200 ? "met" : "missed");
	if (!o->no_latency)
		printf("# goal: p99 <= 20 us at %u%% load: %.2f us, %s\n",
		       o->load_pct, lr.p99, lr.p99 <= 20 ? "met" : "missed");
	rc = 0;
out:
	free(bsamples);
	e2e_free(&e);
	return rc;
}

/* ---- options --------------------------------------------------------------
 */

static void usage(FILE *out)
{
	fprintf(out,
		"usage: dpflow bench e2e --target gpu [--size BYTES] "
		"[--hdr-split N]\n"
		"         [--queues N] [--load PCT] [--path zero-copy|device]\n"
		"         [--recv warp|block] [--receivers N] "
		"[--warps-per-block N]\n"
		"         [--window N] [--flows N] [--inflight N] "
		"[--queue-size N]\n"
		"         [--burst N] [--batch N] [--seconds S] "
		"[--lat-seconds S]\n"
		"         [--cpu-threads N] [--cpu-pkts N] [--no-latency] "
		"[--no-cpu]\n"
		"         [--gpu N] [--seed N]\n\n"
		"The exact-1m pipeline (BASIC pipe on the outer 5-tuple, "
		"--flows entries,\ndefault 1M) end to end on the GPU target: "
		"host ring -> CPU proxy -> the\nqueue-fed persistent kernel -> "
		"CPU proxy -> host ring, --queues queues\n(default 16) each "
		"with its proxy thread and --inflight packets (default\n4096) "
		"of --size bytes (default 64) circulating; --seconds (default "
		"2)\nmeasured. Beside it, in the same run: the host<->device "
		"copy bandwidths,\nthe same pipe on the CPU target on one core "
		"and on --cpu-threads cores\n(default all), and the batch "
		"latency at --load percent (default 10) of\nthe measured peak "
		"(batches of --batch packets, default 32, for\n--lat-seconds, "
		"default 2). Kernel: --recv warp (default) or block,\n"
		"--receivers per queue (default 4), --window staged bytes "
		"(default 128).\nExit 77 without a GPU.\n");
}

static int parse_u(const char *s, unsigned long long lo, unsigned long long hi,
		   unsigned long long *v)
{
	char *end;

	*v = strtoull(s, &end, 10);
	return *end || *v < lo || *v > hi ? -1 : 0;
}

int bench_gpu_e2e(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"size", required_argument, NULL, 's'},
	    {"hdr-split", required_argument, NULL, 'S'},
	    {"queues", required_argument, NULL, 'q'},
	    {"load", required_argument, NULL, 'l'},
	    {"path", required_argument, NULL, 'p'},
	    {"recv", required_argument, NULL, 'r'},
	    {"receivers", required_argument, NULL, 'R'},
	    {"warps-per-block", required_argument, NULL, 'W'},
	    {"window", required_argument, NULL, 'w'},
	    {"flows", required_argument, NULL, 'f'},
	    {"inflight", required_argument, NULL, 'i'},
	    {"queue-size", required_argument, NULL, 'Q'},
	    {"burst", required_argument, NULL, 'b'},
	    {"batch", required_argument, NULL, 'B'},
	    {"seconds", required_argument, NULL, 't'},
	    {"lat-seconds", required_argument, NULL, 'T'},
	    {"cpu-threads", required_argument, NULL, 'c'},
	    {"cpu-pkts", required_argument, NULL, 'C'},
	    {"no-latency", no_argument, NULL, 'L'},
	    {"no-cpu", no_argument, NULL, 'N'},
	    {"gpu", required_argument, NULL, 'g'},
	    {"seed", required_argument, NULL, 'e'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct e2e_opts o = {
	    .size = 64,
	    .queues = 16,
	    .load_pct = 10,
	    .path = DPFLOW_GPU_PATH_ZERO_COPY,
	    .recv = DPFLOW_GPU_FLOW_RECV_WARP,
	    .flows = 1u << 20,
	    .inflight = 4096,
	    .qsize = 1024,
	    .burst = 64,
	    .batch = 32,
	    .seconds = 2,
	    .lat_seconds = 2,
	    .cpu_pkts = 16384,
	    .seed = 1,
	};
	struct dpflow_error err = {0};
	unsigned long long v;
	int c, li = 0, n_gpu;
	char *end;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, &li)) != -1) {
		switch (c) {
		case 'h':
			usage(stdout);
			return 0;
		case 'L':
			o.no_latency = true;
			continue;
		case 'N':
			o.no_cpu = true;
			continue;
		case 'p':
			if (!strcmp(optarg, "zero-copy"))
				o.path = DPFLOW_GPU_PATH_ZERO_COPY;
			else if (!strcmp(optarg, "device"))
				o.path = DPFLOW_GPU_PATH_DEVICE;
			else
				goto bad;
			continue;
		case 'r':
			if (!strcmp(optarg, "warp"))
				o.recv = DPFLOW_GPU_FLOW_RECV_WARP;
			else if (!strcmp(optarg, "block"))
				o.recv = DPFLOW_GPU_FLOW_RECV_BLOCK;
			else
				goto bad;
			continue;
		case 't':
		case 'T': {
			double s = strtod(optarg, &end);

			if (*end || !(s > 0 && s < 600))
				goto bad;
			if (c == 't')
				o.seconds = s;
			else
				o.lat_seconds = s;
			continue;
		}
		case '?':
			usage(stderr);
			return 2;
		default:
			break;
		}
		if (parse_u(optarg, 0, 1ull << 32, &v))
			goto bad;
		switch (c) {
		case 's':
			if (v < 64 || v > 9000)
				goto bad;
			o.size = (uint32_t)v;
			break;
		case 'S':
			if (v > 1024)
				goto bad;
			o.hdr_split = (uint32_t)v;
			break;
		case 'q':
			if (!v || v > DPFLOW_GPU_FLOW_RUN_QUEUES_MAX)
				goto bad;
			o.queues = (unsigned)v;
			break;
		case 'l':
			if (!v || v > 100)
				goto bad;
			o.load_pct = (unsigned)v;
			break;
		case 'R':
			o.receivers = (unsigned)v;
			break;
		case 'W':
			o.wpb = (unsigned)v;
			break;
		case 'w':
			o.window = (uint32_t)v;
			break;
		case 'f':
			if (!v || v > (1u << 24))
				goto bad;
			o.flows = (uint32_t)v;
			break;
		case 'i':
			if (v < 64 || v > (1u << 20))
				goto bad;
			o.inflight = (uint32_t)v;
			break;
		case 'Q':
			o.qsize = (uint32_t)v;
			break;
		case 'b':
			if (!v || v > DPFLOW_BURST_MAX)
				goto bad;
			o.burst = (uint16_t)v;
			break;
		case 'B':
			if (!v || v > DPFLOW_BURST_MAX)
				goto bad;
			o.batch = (uint32_t)v;
			break;
		case 'c':
			o.cpu_threads = (unsigned)v;
			break;
		case 'C':
			if (v < 64 || v > (1u << 22))
				goto bad;
			o.cpu_pkts = (uint32_t)v;
			break;
		case 'g':
			o.gpu = (int)v;
			break;
		default:
			o.seed = v;
			break;
		}
	}
	n_gpu = dpflow_gpu_count(&err);
	if (n_gpu <= o.gpu) {
		printf("# dpflow bench e2e --target gpu: no GPU %d (%s): "
		       "nothing measured (exit 77, skipped)\n",
		       o.gpu,
		       n_gpu <= 0 ? err.msg : "this machine has fewer GPUs");
		return 77;
	}
	return run(&o);
bad:
	fprintf(stderr, "bench e2e: bad value '%s' for --%s\n", optarg,
		opts[li].name);
	return 2;
}
