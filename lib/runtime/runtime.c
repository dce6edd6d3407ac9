/*
 * Worker threads over a context's ports (dpflow/runtime.h has the model).
 *
 * Each worker polls its receive queues, spreads what it receives by the
 * symmetric Toeplitz hash (rss.c) through the redirection table, runs its
 * own packets through the pipes and hands the others over SPSC rings
 * (ring[src][dst]) to their owners, which run them at their next pass.
 * Counters are single-writer words read by any thread.
 *
 * Stopping is two-phase: every worker stops receiving and counts itself
 * in rx_stopped; each then drains its incoming rings until all workers
 * have stopped receiving (no more handoffs can appear) and one last pass
 * finds them empty.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "dpflow/clock.h"
#include "dpflow/parse.h"
#include "dpflow/pool.h"
#include "dpflow/port.h"
#include "dpflow/ring.h"
#include "dpflow/runtime.h"
#include "dpflow/txtime.h"
#include "runtime/rss.h"

#define RT_BURST_DEFAULT   32
#define RT_HANDOFF_DEFAULT 1024
/* an idle worker: after RT_IDLE_POLLS empty passes it naps, RT_NAP_MIN_NS
 * first, each further empty pass twice as long, up to RT_NAP_MAX_NS (the
 * longest a packet waits for an idle worker, plus the timer's slack); the
 * first pass that finds work goes back to busy polling */
#define RT_IDLE_POLLS 64
#define RT_NAP_MIN_NS 1000
#define RT_NAP_MAX_NS 500000
/* receive queues one worker may own */
#define RT_RXQ_MAX 256
/* each worker's timing wheel per port: 65536 ticks of 16 us, a horizon of
 * about a second (the tick sets the buckets, not the precision: a packet
 * leaves at the first pass at or after its time); a time beyond the
 * horizon is refused: the packet is dropped and counted */
#define RT_WHEEL_SLOTS	  65536
#define RT_WHEEL_TICK_NS  16384
#define RT_WHEEL_CAPACITY 65536

struct rt_rxq {
	struct dpflow_port *port;
	uint16_t port_id;
	uint16_t queue;
};

struct rt_worker {
	struct dpflow_rt *rt;
	unsigned id;
	int cpu;
	pthread_t thread;
	bool running;
	unsigned n_rxq;
	struct rt_rxq rxq[RT_RXQ_MAX];
	/* single writer (the worker), any reader */
	struct dpflow_worker_stats st;
	/* set after a pass that found its inputs exhausted and nothing to
	 * do; cleared when it gets work */
	bool idle;
	/* the packets of one receive burst by owner, and the local ones */
	uint32_t out[DPFLOW_WORKERS_MAX][DPFLOW_BURST_MAX];
	uint16_t n_out[DPFLOW_WORKERS_MAX];
	/* timed transmit: a wheel per port that does not pace itself */
	struct dpflow_txsched *wheel[DPFLOW_PORTS_MAX];
	unsigned n_held; /* packets the wheels hold */
} __attribute__((aligned(64)));

struct dpflow_rt {
	struct dpflow_ctx *ctx;
	struct dpflow_pool *pool;
	unsigned n_workers;
	uint16_t burst;
	bool soft_rss; /* hash and hand over (else: the port's queues) */
	uint8_t key[DPFLOW_RSS_KEY_LEN];
	uint8_t reta[DPFLOW_RSS_RETA_LEN];
	struct rss_table *rss;
	/* ring[src * n_workers + dst]: src hands packets to dst */
	struct dpflow_ring **ring;
	struct rt_worker *w;
	int stop;
	unsigned rx_stopped;
	bool started;
};

static void ctr_add(uint64_t *c, uint64_t v)
{
	__atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + v,
			 __ATOMIC_RELAXED);
}

static uint64_t ctr_read(const uint64_t *c)
{
	return __atomic_load_n(c, __ATOMIC_RELAXED);
}

/* ---- the data path ------------------------------------------------------ */

/*
 * The pipes' transmit hook: packets whose send time is still ahead go to
 * the port's wheel; the rest (and what the wheel refuses: beyond its
 * horizon, or full) are sent now.
 */
static uint16_t timed_hook(void *arg, uint16_t port, struct dpflow_pool *pool,
			   uint32_t *idx, uint16_t n)
{
	struct rt_worker *w = arg;
	struct dpflow_txsched *wh =
	    port < DPFLOW_PORTS_MAX ? w->wheel[port] : NULL;
	uint64_t now = 0;
	uint16_t left = 0;

	if (!wh)
		return n;
	for (uint16_t i = 0; i < n; i++) {
		uint64_t t = dpflow_pool_meta(pool, idx[i])->tx_time_ns;

		if (t) {
			if (!now)
				now = dpflow_clock_ns();
			if (t > now) {
				if (dpflow_txsched_enqueue(wh, &idx[i], 1))
					w->n_held++;
				else {
					/* beyond the horizon, or full: a
					 * packet never leaves early */
					dpflow_pool_free_bulk(pool, &idx[i], 1);
					ctr_add(&w->st.tx_timed_refused, 1);
				}
				continue;
			}
		}
		idx[left++] = idx[i];
	}
	return left;
}

/* Send what the wheels hold that is due (@all: everything, at stop). */
static unsigned release_timed(struct rt_worker *w, bool all)
{
	struct dpflow_rt *rt = w->rt;
	uint32_t idx[DPFLOW_BURST_MAX];
	unsigned total = 0;
	uint64_t now;

	if (!w->n_held)
		return 0;
	now = dpflow_clock_ns();
	for (unsigned p = 0; p < DPFLOW_PORTS_MAX; p++) {
		unsigned k;

		if (!w->wheel[p])
			continue;
		while ((k = all ? dpflow_txsched_drain(w->wheel[p], idx,
						       DPFLOW_BURST_MAX)
				: dpflow_txsched_release(w->wheel[p], now, idx,
							 DPFLOW_BURST_MAX))) {
			dpflow_ctx_port_send(rt->ctx, (uint16_t)p, idx,
					     (uint16_t)k);
			w->n_held -= k;
			total += k;
			ctr_add(&w->st.tx_timed, k);
		}
	}
	return total;
}

/* Run @n packets through the pipes as if received on their own ports
 * (handoffs may mix ports): one call per run of the same port. */
static void run_parsed(struct rt_worker *w, uint32_t *idx, uint16_t n)
{
	struct dpflow_rt *rt = w->rt;
	uint16_t i = 0;

	while (i < n) {
		uint16_t port = dpflow_pool_meta(rt->pool, idx[i])->port;
		uint16_t j = (uint16_t)(i + 1);

		while (j < n &&
		       dpflow_pool_meta(rt->pool, idx[j])->port == port)
			j++;
		dpflow_ctx_process_burst_ex(rt->ctx, port, idx + i,
					    (uint16_t)(j - i),
					    DPFLOW_PROCESS_PARSED);
		i = j;
	}
	ctr_add(&w->st.pkts, n);
}

/* A received burst: by RSS to its owners, the own share run at once. */
static void dispatch(struct rt_worker *w, uint16_t port, uint32_t *idx,
		     uint16_t n)
{
	struct dpflow_rt *rt = w->rt;
	unsigned nw = rt->n_workers;
	uint16_t n_own = 0;

	if (!rt->soft_rss) {
		dpflow_ctx_process_burst(rt->ctx, port, idx, n);
		ctr_add(&w->st.pkts, n);
		return;
	}
	dpflow_parse_burst(rt->pool, idx, n);
	for (uint16_t i = 0; i < n; i++) {
		const struct dpflow_pkt_meta *m =
		    dpflow_pool_meta(rt->pool, idx[i]);
		unsigned to = rt->reta[rss_hash_tabled(rt->rss, m) &
				       (DPFLOW_RSS_RETA_LEN - 1)];

		if (to == w->id)
			idx[n_own++] = idx[i];
		else
			w->out[to][w->n_out[to]++] = idx[i];
	}
	if (n_own) {
		dpflow_ctx_process_burst_ex(rt->ctx, port, idx, n_own,
					    DPFLOW_PROCESS_PARSED);
		ctr_add(&w->st.pkts, n_own);
	}
	for (unsigned to = 0; to < nw; to++) {
		uint16_t k = w->n_out[to];
		unsigned sent;

		if (!k)
			continue;
		sent = dpflow_ring_enqueue_burst(rt->ring[w->id * nw + to],
						 w->out[to], k);
		ctr_add(&w->st.handoff_out, sent);
		if (sent < k) {
			dpflow_pool_free_bulk(rt->pool, w->out[to] + sent,
					      k - sent);
			ctr_add(&w->st.handoff_drops, k - sent);
		}
		w->n_out[to] = 0;
	}
}

/* Packets other workers handed over; returns how many were run. */
static unsigned drain_handoffs(struct rt_worker *w)
{
	struct dpflow_rt *rt = w->rt;
	unsigned nw = rt->n_workers, total = 0;
	uint32_t idx[DPFLOW_BURST_MAX];

	if (!rt->soft_rss)
		return 0;
	for (unsigned from = 0; from < nw; from++) {
		struct dpflow_ring *r;
		unsigned k;

		if (from == w->id)
			continue;
		r = rt->ring[from * nw + w->id];
		while ((k = dpflow_ring_dequeue_burst(r, idx, rt->burst))) {
			ctr_add(&w->st.handoff_in, k);
			run_parsed(w, idx, (uint16_t)k);
			total += k;
		}
	}
	return total;
}

/*
 * Room for a whole burst in every handoff ring out of @w? When a peer
 * falls behind, @w leaves packets in its receive queues (the port's own
 * ring fills and the port counts its drops) rather than receive packets
 * it would have to drop at the handoff.
 */
static bool handoff_room(const struct rt_worker *w)
{
	const struct dpflow_rt *rt = w->rt;
	unsigned nw = rt->n_workers;

	for (unsigned to = 0; to < nw; to++)
		if (to != w->id && dpflow_ring_free_count(
				       rt->ring[w->id * nw + to]) < rt->burst)
			return false;
	return true;
}

/* Are all of @w's inputs finite and exhausted? */
static bool inputs_exhausted(const struct rt_worker *w)
{
	for (unsigned i = 0; i < w->n_rxq; i++)
		if (!dpflow_port_rx_done(w->rxq[i].port))
			return false;
	return true;
}

static void *worker_main(void *arg)
{
	struct rt_worker *w = arg;
	struct dpflow_rt *rt = w->rt;
	unsigned idle = 0;
	long nap_ns = RT_NAP_MIN_NS;

	dpflow_ctx_thread_online(rt->ctx);
	dpflow_ctx_thread_tx_queue(rt->ctx, (uint16_t)w->id);
	dpflow_ctx_thread_tx_hook(rt->ctx, timed_hook, w);
	while (!__atomic_load_n(&rt->stop, __ATOMIC_ACQUIRE)) {
		unsigned got = 0;
		bool waited = false;
		uint64_t t0 = dpflow_tsc();

		for (unsigned i = 0; i < w->n_rxq; i++) {
			uint32_t idx[DPFLOW_BURST_MAX];
			uint16_t n;

			if (rt->soft_rss && !handoff_room(w)) {
				ctr_add(&w->st.handoff_waits, 1);
				waited = true;
				break;
			}
			n = dpflow_port_rx_burst(
			    w->rxq[i].port, w->rxq[i].queue, idx, rt->burst);
			if (!n)
				continue;
			ctr_add(&w->st.rx_pkts, n);
			ctr_add(&w->st.rx_bursts, 1);
			dispatch(w, w->rxq[i].port_id, idx, n);
			got += n;
		}
		got += drain_handoffs(w);
		release_timed(w, false);
		dpflow_ctx_quiescent(rt->ctx);
		if (got) {
			/* TSC ticks here; nanoseconds when read */
			ctr_add(&w->st.busy_ns, dpflow_tsc() - t0);
			__atomic_store_n(&w->idle, false, __ATOMIC_RELEASE);
			idle = 0;
			nap_ns = RT_NAP_MIN_NS;
			continue;
		}
		/* nothing this pass: a finite input ends on the receiving
		 * thread, so a port done now has nothing more for us */
		if (w->n_held || waited) {
			/* timed packets wait: keep the clock close; a full
			 * handoff ring: its owner is about to make room */
			idle = 0;
			nap_ns = RT_NAP_MIN_NS;
			continue;
		}
		if (inputs_exhausted(w))
			__atomic_store_n(&w->idle, true, __ATOMIC_RELEASE);
		ctr_add(&w->st.idle_polls, 1);
		/* live ports: after a run of empty polls, nap longer and
		 * longer instead of spinning on an idle link */
		if (++idle >= RT_IDLE_POLLS) {
			struct timespec nap = {0, nap_ns};

			nanosleep(&nap, NULL);
			nap_ns = nap_ns * 2 < RT_NAP_MAX_NS ? nap_ns * 2
							    : RT_NAP_MAX_NS;
		}
	}
	/* stop: no more receiving; finish what the others hand over */
	__atomic_fetch_add(&rt->rx_stopped, 1, __ATOMIC_ACQ_REL);
	for (;;) {
		bool all = __atomic_load_n(&rt->rx_stopped, __ATOMIC_ACQUIRE) ==
			   rt->n_workers;

		drain_handoffs(w);
		dpflow_ctx_quiescent(rt->ctx);
		if (all)
			break;
		sched_yield();
	}
	/* timed packets still held go now: a stop does not wait for them */
	release_timed(w, true);
	dpflow_ctx_thread_tx_hook(rt->ctx, NULL, NULL);
	dpflow_ctx_thread_offline(rt->ctx);
	return NULL;
}

/* ---- the control path --------------------------------------------------- */

static int rt_fail(struct dpflow_error *err, int code, const char *field,
		   const char *msg)
{
	return dpflow_error_set(err, code, field, "%s", msg);
}

/* Queue q of every port (in port order) to worker q % workers. */
static int assign_queues(struct dpflow_rt *rt, struct dpflow_error *err)
{
	for (unsigned p = 0; p < dpflow_ctx_port_count(rt->ctx); p++) {
		struct dpflow_port *port = dpflow_ctx_port(rt->ctx, p);

		for (uint16_t q = 0; q < dpflow_port_rx_queues(port); q++) {
			struct rt_worker *w = &rt->w[q % rt->n_workers];

			if (w->n_rxq == RT_RXQ_MAX)
				return rt_fail(err, ENOSPC, "workers",
					       "too many receive queues for "
					       "one worker");
			w->rxq[w->n_rxq].port = port;
			w->rxq[w->n_rxq].port_id = (uint16_t)p;
			w->rxq[w->n_rxq].queue = q;
			w->n_rxq++;
		}
	}
	return 0;
}

/* A wheel per worker for each port that transmits and does not pace
 * timed packets itself. */
static int wheels_create(struct dpflow_rt *rt, struct dpflow_error *err)
{
	struct dpflow_txsched_cfg c = {0};

	c.pool = rt->pool;
	c.slots = RT_WHEEL_SLOTS;
	c.tick_ns = RT_WHEEL_TICK_NS;
	c.capacity = rt->pool->n_slots < RT_WHEEL_CAPACITY ? rt->pool->n_slots
							   : RT_WHEEL_CAPACITY;
	c.start_ns = dpflow_clock_ns();
	for (unsigned p = 0; p < dpflow_ctx_port_count(rt->ctx); p++) {
		struct dpflow_port *port = dpflow_ctx_port(rt->ctx, p);

		if (p >= DPFLOW_PORTS_MAX || !dpflow_port_tx_queues(port) ||
		    dpflow_port_tx_paced(port))
			continue;
		for (unsigned i = 0; i < rt->n_workers; i++) {
			rt->w[i].wheel[p] = dpflow_txsched_create(&c, err);
			if (!rt->w[i].wheel[p])
				return -ENOMEM;
		}
	}
	return 0;
}

static int rings_create(struct dpflow_rt *rt, uint32_t size,
			struct dpflow_error *err)
{
	unsigned nw = rt->n_workers;

	if (!rt->soft_rss)
		return 0;
	rt->ring = calloc((size_t)nw * nw, sizeof(*rt->ring));
	if (!rt->ring)
		return rt_fail(err, ENOMEM, "workers", "out of memory");
	for (unsigned s = 0; s < nw; s++)
		for (unsigned d = 0; d < nw; d++) {
			char name[DPFLOW_RING_NAME_MAX];

			if (s == d)
				continue;
			snprintf(name, sizeof(name), "handoff-%u-%u", s, d);
			rt->ring[s * nw + d] = dpflow_ring_create(
			    name, size, DPFLOW_RING_F_SPSC, err);
			if (!rt->ring[s * nw + d])
				return -ENOMEM;
		}
	return 0;
}

struct dpflow_rt *dpflow_rt_create(struct dpflow_ctx *ctx,
				   const struct dpflow_rt_cfg *cfg,
				   struct dpflow_error *err)
{
	struct dpflow_rt_cfg dflt = {0};
	struct dpflow_rt *rt;
	uint32_t hsize;

	if (!ctx) {
		rt_fail(err, EINVAL, "ctx", "no context");
		return NULL;
	}
	if (!cfg)
		cfg = &dflt;
	if (cfg->workers > DPFLOW_WORKERS_MAX) {
		dpflow_error_set(err, EINVAL, "workers",
				 "%u workers: at most %u", cfg->workers,
				 DPFLOW_WORKERS_MAX);
		return NULL;
	}
	if (cfg->burst > DPFLOW_BURST_MAX) {
		dpflow_error_set(err, EINVAL, "burst", "burst %u: at most %u",
				 cfg->burst, DPFLOW_BURST_MAX);
		return NULL;
	}
	if (cfg->rss > DPFLOW_RT_RSS_PORT) {
		dpflow_error_set(err, EINVAL, "rss",
				 "rss mode %u: soft or port", cfg->rss);
		return NULL;
	}
	hsize = cfg->handoff_size ? cfg->handoff_size : RT_HANDOFF_DEFAULT;
	if (hsize < 64 || hsize > (1u << 20) || (hsize & (hsize - 1))) {
		dpflow_error_set(err, EINVAL, "handoff_size",
				 "%u: a power of 2 in 64..1048576", hsize);
		return NULL;
	}
	rt = calloc(1, sizeof(*rt));
	if (!rt) {
		rt_fail(err, ENOMEM, "workers", "out of memory");
		return NULL;
	}
	rt->ctx = ctx;
	rt->pool = dpflow_ctx_pool(ctx);
	rt->n_workers = cfg->workers ? cfg->workers : 1;
	rt->burst = cfg->burst ? cfg->burst : RT_BURST_DEFAULT;
	rt->soft_rss = rt->n_workers > 1 && cfg->rss == DPFLOW_RT_RSS_SOFT;
	if (cfg->rss_key_set)
		memcpy(rt->key, cfg->rss_key, sizeof(rt->key));
	else if (getrandom(rt->key, sizeof(rt->key), 0) !=
		 (ssize_t)sizeof(rt->key)) {
		rt_fail(err, errno ? errno : EIO, "rss_key",
			"getrandom failed for the RSS key");
		goto fail;
	}
	for (unsigned i = 0; i < DPFLOW_RSS_RETA_LEN; i++)
		rt->reta[i] = (uint8_t)(i % rt->n_workers);
	rt->w = aligned_alloc(64, rt->n_workers * sizeof(*rt->w));
	rt->rss = malloc(sizeof(*rt->rss));
	if (!rt->w || !rt->rss) {
		rt_fail(err, ENOMEM, "workers", "out of memory");
		goto fail;
	}
	memset(rt->w, 0, rt->n_workers * sizeof(*rt->w));
	rss_table_build(rt->rss, rt->key);
	for (unsigned i = 0; i < rt->n_workers; i++) {
		rt->w[i].rt = rt;
		rt->w[i].id = i;
		rt->w[i].cpu = cfg->cpus ? cfg->cpus[i] : -1;
		rt->w[i].st.cpu = rt->w[i].cpu;
		if (cfg->cpus &&
		    (cfg->cpus[i] < 0 || cfg->cpus[i] >= CPU_SETSIZE)) {
			dpflow_error_set(err, EINVAL, "cpus",
					 "worker %u: cpu %d out of range", i,
					 cfg->cpus[i]);
			goto fail;
		}
	}
	if (assign_queues(rt, err) || rings_create(rt, hsize, err) ||
	    wheels_create(rt, err))
		goto fail;
	return rt;
fail:
	dpflow_rt_destroy(rt);
	return NULL;
}

int dpflow_rt_start(struct dpflow_rt *rt, struct dpflow_error *err)
{
	if (rt->started)
		return rt_fail(err, EALREADY, "workers", "already started");
	rt->stop = 0;
	rt->rx_stopped = 0;
	for (unsigned i = 0; i < rt->n_workers; i++) {
		struct rt_worker *w = &rt->w[i];
		pthread_attr_t attr;
		int rc;

		pthread_attr_init(&attr);
		if (w->cpu >= 0) {
			cpu_set_t set;

			CPU_ZERO(&set);
			CPU_SET(w->cpu, &set);
			pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
		}
		rc = pthread_create(&w->thread, &attr, worker_main, w);
		pthread_attr_destroy(&attr);
		if (rc) {
			dpflow_error_set(
			    err, rc, w->cpu >= 0 ? "cpus" : "workers",
			    "worker %u%s: %s", i,
			    w->cpu >= 0 ? " (pinned)" : "", strerror(rc));
			/* stop the ones started: they see the flag, and the
			 * count of stopped receivers must reach n_workers */
			__atomic_fetch_add(&rt->rx_stopped, rt->n_workers - i,
					   __ATOMIC_RELEASE);
			__atomic_store_n(&rt->stop, 1, __ATOMIC_RELEASE);
			for (unsigned j = 0; j < i; j++)
				pthread_join(rt->w[j].thread, NULL);
			return -rc;
		}
		w->running = true;
	}
	rt->started = true;
	return 0;
}

bool dpflow_rt_inputs_done(const struct dpflow_rt *rt)
{
	uint64_t out = 0, in = 0;

	for (unsigned i = 0; i < rt->n_workers; i++)
		if (!__atomic_load_n(&rt->w[i].idle, __ATOMIC_ACQUIRE))
			return false;
	for (unsigned i = 0; i < rt->n_workers; i++) {
		out += ctr_read(&rt->w[i].st.handoff_out);
		in += ctr_read(&rt->w[i].st.handoff_in);
	}
	return out == in;
}

void dpflow_rt_stop(struct dpflow_rt *rt)
{
	if (!rt || !rt->started)
		return;
	__atomic_store_n(&rt->stop, 1, __ATOMIC_RELEASE);
	for (unsigned i = 0; i < rt->n_workers; i++)
		if (rt->w[i].running) {
			pthread_join(rt->w[i].thread, NULL);
			rt->w[i].running = false;
		}
	rt->started = false;
}

void dpflow_rt_destroy(struct dpflow_rt *rt)
{
	if (!rt)
		return;
	dpflow_rt_stop(rt);
	if (rt->ring) {
		uint32_t idx[DPFLOW_BURST_MAX];
		unsigned nw = rt->n_workers, k;

		for (unsigned i = 0; i < nw * nw; i++) {
			if (!rt->ring[i])
				continue;
			while ((k = dpflow_ring_dequeue_burst(
				    rt->ring[i], idx, DPFLOW_BURST_MAX)))
				dpflow_pool_free_bulk(rt->pool, idx, k);
			dpflow_ring_destroy(rt->ring[i]);
		}
		free(rt->ring);
	}
	for (unsigned i = 0; rt->w && i < rt->n_workers; i++)
		for (unsigned p = 0; p < DPFLOW_PORTS_MAX; p++)
			dpflow_txsched_destroy(rt->w[i].wheel[p]);
	free(rt->rss);
	free(rt->w);
	free(rt);
}

unsigned dpflow_rt_workers(const struct dpflow_rt *rt)
{
	return rt ? rt->n_workers : 0;
}

int dpflow_rt_worker_stats(const struct dpflow_rt *rt, unsigned worker,
			   struct dpflow_worker_stats *s)
{
	const struct dpflow_worker_stats *w;

	if (!rt || !s || worker >= rt->n_workers)
		return -EINVAL;
	w = &rt->w[worker].st;
	s->rx_pkts = ctr_read(&w->rx_pkts);
	s->rx_bursts = ctr_read(&w->rx_bursts);
	s->pkts = ctr_read(&w->pkts);
	s->handoff_out = ctr_read(&w->handoff_out);
	s->handoff_in = ctr_read(&w->handoff_in);
	s->handoff_drops = ctr_read(&w->handoff_drops);
	s->handoff_waits = ctr_read(&w->handoff_waits);
	s->tx_timed = ctr_read(&w->tx_timed);
	s->tx_timed_refused = ctr_read(&w->tx_timed_refused);
	s->idle_polls = ctr_read(&w->idle_polls);
	s->busy_ns = dpflow_tsc_to_ns(ctr_read(&w->busy_ns));
	s->cpu = w->cpu;
	return 0;
}

const uint8_t *dpflow_rt_rss_key(const struct dpflow_rt *rt)
{
	return rt->key;
}
