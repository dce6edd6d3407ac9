/*
 * `dpflow bench txtime`: timed transmit on the CPU path (txtime.h).
 *
 * Precision. One thread (pinned with --cpu) schedules --packets packets
 * from a pool at known times, --rate per second with a random offset
 * within each packet's spacing (so neighbours come out of order), starting
 * 1 ms ahead; each is enqueued once its time is less than the lookahead
 * (half the wheel's horizon) away. The same thread spins: it reads
 * dpflow_clock_ns(), enqueues what has come within the lookahead and
 * releases what is due into an in-memory sink, which records now - send
 * time for every packet (exact percentiles), checks that none left before
 * its time and none twice, and frees it. Run three ways in one process:
 * the wheel, a binary heap polled the same way, and the heap with the
 * thread sleeping in clock_nanosleep() until the next send time (what a
 * sender without a spinning core does). A packet released early, twice or
 * never is a correctness failure: exit status 1.
 *
 * Throughput. The scheduler's own cost, on virtual time: 4096 packets in
 * flight with random send times over the lookahead; each round advances
 * `now` by 32 packets' spacing, releases what is due and schedules the
 * packets again. Reported as the usual table row and JSON line, beside the
 * binary heap as peer.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dpflow/dpflow.h"
#include "dpflow/txtime.h"

#include "bench.h"
#include "bench_common.h"

#define BURST	      32
#define START_LEAD_NS 1000000ull /* the first send time: 1 ms ahead */
#define DRAIN_WAIT_NS 1000000000ull
#define TP_INFLIGHT   4096u
#define PACKETS_MAX   50000000u

struct txt_opts {
	uint64_t packets;
	double rate;
	uint64_t tick_ns;
	uint32_t slots;
	int cpu;
	double seconds;
	unsigned trials;
};

/* ---- the peer: a binary min-heap on (time, order taken) --------------- */

struct heap_ent {
	uint64_t t;
	uint64_t seq;
	uint32_t idx;
};

struct heap {
	struct dpflow_pool *pool;
	struct heap_ent *e;
	uint32_t n, cap;
	uint64_t seq;
};

static inline bool ent_less(const struct heap_ent *a, const struct heap_ent *b)
{
	return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static unsigned heap_enqueue(struct heap *h, const uint32_t *idx, unsigned n)
{
	unsigned i;

	for (i = 0; i < n && h->n < h->cap; i++) {
		struct heap_ent x = {
		    dpflow_pool_meta(h->pool, idx[i])->tx_time_ns, h->seq++,
		    idx[i]};
		uint32_t at = h->n++;

		while (at && ent_less(&x, &h->e[(at - 1) / 2])) {
			h->e[at] = h->e[(at - 1) / 2];
			at = (at - 1) / 2;
		}
		h->e[at] = x;
	}
	return i;
}

static unsigned heap_release(struct heap *h, uint64_t now, uint32_t *out,
			     unsigned max)
{
	unsigned k = 0;

	while (k < max && h->n && h->e[0].t <= now) {
		struct heap_ent x = h->e[--h->n];
		uint32_t at = 0;

		out[k++] = h->e[0].idx;
		for (;;) {
			uint32_t c = 2 * at + 1;

			if (c >= h->n)
				break;
			if (c + 1 < h->n && ent_less(&h->e[c + 1], &h->e[c]))
				c++;
			if (!ent_less(&h->e[c], &x))
				break;
			h->e[at] = h->e[c];
			at = c;
		}
		h->e[at] = x;
	}
	return k;
}

/* ---- one interface over both ------------------------------------------ */

enum impl { IMPL_WHEEL, IMPL_HEAP, IMPL_HEAP_SLEEP };

static const char *const impl_name[] = {
    "dpflow wheel (spin)", "binary heap (spin)", "heap + clock_nanosleep"};

struct sched {
	enum impl impl;
	struct dpflow_txsched *w;
	struct heap h;
};

static int sched_init(struct sched *s, enum impl impl, const struct txt_opts *o,
		      struct dpflow_pool *pool, uint32_t cap, uint64_t start)
{
	struct dpflow_txsched_cfg c = {.pool = pool,
				       .slots = o->slots,
				       .tick_ns = o->tick_ns,
				       .capacity = cap,
				       .start_ns = start};
	struct dpflow_error err = {0};

	memset(s, 0, sizeof(*s));
	s->impl = impl;
	if (impl == IMPL_WHEEL) {
		s->w = dpflow_txsched_create(&c, &err);
		if (!s->w)
			fprintf(stderr, "bench txtime: %s\n", err.msg);
		return s->w ? 0 : -1;
	}
	s->h.pool = pool;
	s->h.cap = cap;
	s->h.e = malloc(cap * sizeof(*s->h.e));
	return s->h.e ? 0 : -1;
}

static void sched_fini(struct sched *s)
{
	dpflow_txsched_destroy(s->w);
	free(s->h.e);
}

static inline unsigned sched_enqueue(struct sched *s, const uint32_t *idx,
				     unsigned n)
{
	return s->w ? dpflow_txsched_enqueue(s->w, idx, n)
		    : heap_enqueue(&s->h, idx, n);
}

static inline unsigned sched_release(struct sched *s, uint64_t now,
				     uint32_t *out, unsigned max)
{
	return s->w ? dpflow_txsched_release(s->w, now, out, max)
		    : heap_release(&s->h, now, out, max);
}

/* ---- precision --------------------------------------------------------- */

struct prec_result {
	uint64_t p50, p99, max;
	uint64_t wheel_p99, wheel_max; /* the wheel's own histogram */
	uint64_t early, dup, lost;
	double pps;
};

static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Send time of packet @i. */
static inline uint64_t send_time(uint64_t start, double spacing, uint64_t i,
				 uint64_t r)
{
	return start + (uint64_t)((double)i * spacing) +
	       (spacing >= 2 ? r % (uint64_t)spacing : 0);
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = {(time_t)(ns / 1000000000ull),
			      (long)(ns % 1000000000ull)};

	clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
}

static int run_precision(const struct txt_opts *o, enum impl impl,
			 struct prec_result *res)
{
	uint64_t horizon = o->tick_ns * o->slots, look = horizon / 2;
	double spacing = 1e9 / o->rate;
	uint64_t inflight = (uint64_t)((double)look / spacing) + 4 * BURST;
	uint32_t cap =
	    (uint32_t)(inflight < o->packets ? inflight : o->packets);
	struct dpflow_pool_params pp = {
	    .name = "txtime", .n_slots = cap, .data_room = 64};
	struct dpflow_error err = {0};
	struct dpflow_pool *pool = NULL;
	uint64_t *errs = NULL, *seen = NULL, *times = NULL;
	uint64_t next = 0, done = 0, carry_n = 0, rng = 0x9e3779b97f4a7c15ull;
	uint64_t start, first_t = 0, end_t = 0, deadline;
	uint32_t carry[BURST], out[256];
	struct sched s;
	int rc = -1;

	memset(res, 0, sizeof(*res));
	memset(&s, 0, sizeof(s));
	pool = dpflow_pool_create(&pp, &err);
	errs = malloc(o->packets * sizeof(*errs));
	times = malloc(o->packets * sizeof(*times));
	seen = malloc((o->packets + 63) / 64 * sizeof(*seen));
	if (!pool || !errs || !seen || !times) {
		fprintf(stderr, "bench txtime: out of memory (%s)\n", err.msg);
		goto out;
	}
	/* touch every page now: no page fault inside the timed loop */
	memset(errs, 0, o->packets * sizeof(*errs));
	memset(seen, 0, (o->packets + 63) / 64 * sizeof(*seen));
	for (uint64_t i = 0; i < o->packets; i++)
		times[i] = send_time(0, spacing, i, rng_next(&rng));
	if (sched_init(&s, impl, o, pool, cap, dpflow_clock_ns()))
		goto out;
	/* the times are known ahead; the clock starts now */
	start = dpflow_clock_ns() + START_LEAD_NS;
	for (uint64_t i = 0; i < o->packets; i++)
		times[i] += start;
	first_t = times[0];
	deadline = times[o->packets - 1] + DRAIN_WAIT_NS;
	for (;;) {
		uint64_t now = dpflow_clock_ns();
		unsigned got;

		/* schedule what has come within the lookahead */
		while (carry_n ||
		       (next < o->packets && times[next] < now + look)) {
			unsigned took;

			while (carry_n < BURST && next < o->packets &&
			       times[next] < now + look) {
				uint32_t x;
				struct dpflow_pkt_meta *m;

				if (!dpflow_pool_alloc_burst(pool, &x, 1))
					break;
				m = dpflow_pool_meta(pool, x);
				m->tx_time_ns = times[next];
				m->reg[0] = (uint32_t)next;
				m->reg[1] = (uint32_t)(next >> 32);
				carry[carry_n++] = x;
				next++;
			}
			if (!carry_n)
				break;
			took = sched_enqueue(&s, carry, (unsigned)carry_n);
			memmove(carry, carry + took,
				(carry_n - took) * sizeof(*carry));
			carry_n -= took;
			if (carry_n)
				break; /* full or too far: again next turn */
		}
		now = dpflow_clock_ns(); /* the release time, after that work */
		got = sched_release(&s, now, out, 256);
		for (unsigned i = 0; i < got; i++) {
			const struct dpflow_pkt_meta *m =
			    dpflow_pool_meta(pool, out[i]);
			uint64_t seq = m->reg[0] | (uint64_t)m->reg[1] << 32;

			if (m->tx_time_ns > now) {
				res->early++;
				continue;
			}
			if (seen[seq / 64] >> (seq % 64) & 1) {
				res->dup++;
				continue;
			}
			seen[seq / 64] |= 1ull << (seq % 64);
			errs[done++] = now - m->tx_time_ns;
			end_t = now;
		}
		dpflow_pool_free_bulk(pool, out, got);
		if (done + res->dup + res->early >= o->packets ||
		    now > deadline)
			break;
		if (impl == IMPL_HEAP_SLEEP) {
			uint64_t wake = s.h.n ? s.h.e[0].t : deadline;

			if (next < o->packets && times[next] - look < wake)
				wake = times[next] - look;
			now = dpflow_clock_ns();
			if (wake > now)
				sleep_ns(wake - now);
		}
	}
	res->lost = o->packets - done - res->dup - res->early;
	if (done) {
		qsort(errs, done, sizeof(*errs), cmp_u64);
		res->p50 = errs[(done * 50 + 99) / 100 - 1];
		res->p99 = errs[(done * 99 + 99) / 100 - 1];
		res->max = errs[done - 1];
	}
	if (s.w) {
		res->wheel_p99 = dpflow_txsched_error_pct(s.w, 99);
		res->wheel_max = dpflow_txsched_error_pct(s.w, 100);
	}
	if (end_t > first_t)
		res->pps = (double)done * 1e9 / (double)(end_t - first_t);
	rc = 0;
out:
	sched_fini(&s);
	dpflow_pool_destroy(pool);
	free(errs);
	free(seen);
	free(times);
	return rc;
}

/*
 * The core's own floor: a bare loop reading the clock for @ns; the share
 * of the time it lost in gaps over 1 us (interrupts, the hypervisor) and
 * how many such gaps a second. No scheduler releases better than this.
 */
static void core_stalls(uint64_t ns, double *pct, double *per_s)
{
	uint64_t start = dpflow_clock_ns(), prev = start, now, lost = 0, n = 0;

	while ((now = dpflow_clock_ns()) - start < ns) {
		if (now - prev > 1000) {
			lost += now - prev;
			n++;
		}
		prev = now;
	}
	*pct = 100.0 * (double)lost / (double)ns;
	*per_s = (double)n * 1e9 / (double)ns;
}

/* ---- throughput, on virtual time -------------------------------------- */

struct tp_state {
	struct sched s;
	struct dpflow_pool *pool;
	uint32_t idx[TP_INFLIGHT];
	uint64_t now, look, step, rng, early;
};

static uint64_t tp_pass(void *arg)
{
	struct tp_state *st = arg;
	uint32_t out[256];
	uint64_t n = 0;

	for (unsigned r = 0; r < TP_INFLIGHT / BURST; r++) {
		unsigned got;

		st->now += st->step;
		got = sched_release(&st->s, st->now, out, 256);
		for (unsigned i = 0; i < got; i++) {
			struct dpflow_pkt_meta *m =
			    dpflow_pool_meta(st->pool, out[i]);

			st->early += m->tx_time_ns > st->now;
			m->tx_time_ns =
			    st->now + 1 + rng_next(&st->rng) % st->look;
		}
		if (sched_enqueue(&st->s, out, got) != got)
			st->early += got; /* refused: cannot happen */
		n += got;
	}
	return n;
}

static int tp_init(struct tp_state *st, const struct txt_opts *o,
		   enum impl impl)
{
	struct dpflow_pool_params pp = {
	    .name = "txtime-tp", .n_slots = TP_INFLIGHT, .data_room = 64};
	struct dpflow_error err = {0};

	memset(st, 0, sizeof(*st));
	st->pool = dpflow_pool_create(&pp, &err);
	if (!st->pool ||
	    dpflow_pool_alloc_bulk(st->pool, st->idx, TP_INFLIGHT)) {
		fprintf(stderr, "bench txtime: %s\n", err.msg);
		return -1;
	}
	st->now = 1000000000ull;
	st->look = o->tick_ns * o->slots / 2;
	st->step = st->look * BURST / TP_INFLIGHT;
	if (!st->step)
		st->step = 1;
	st->rng = 12345;
	for (unsigned i = 0; i < TP_INFLIGHT; i++)
		dpflow_pool_meta(st->pool, st->idx[i])->tx_time_ns =
		    st->now + 1 + rng_next(&st->rng) % st->look;
	if (sched_init(&st->s, impl, o, st->pool, TP_INFLIGHT, st->now))
		return -1;
	if (sched_enqueue(&st->s, st->idx, TP_INFLIGHT) != TP_INFLIGHT) {
		fprintf(stderr, "bench txtime: cannot fill the scheduler\n");
		return -1;
	}
	return 0;
}

static void tp_fini(struct tp_state *st)
{
	uint32_t out[256];
	unsigned n;

	if (st->s.w) {
		/* the wheel frees what it holds at destroy */
		sched_fini(&st->s);
	} else {
		while ((n = heap_release(&st->s.h, UINT64_MAX, out, 256)))
			dpflow_pool_free_bulk(st->pool, out, n);
		sched_fini(&st->s);
	}
	dpflow_pool_destroy(st->pool);
}

/* ---- options and report ------------------------------------------------ */

static void usage(FILE *f)
{
	fputs("usage: dpflow bench txtime [OPTIONS]\n"
	      "\n"
	      "Timed transmit: the release error of the timing wheel against "
	      "a binary\nheap (spinning) and a heap with clock_nanosleep(), "
	      "then the\nscheduler's cost per packet against the heap.\n"
	      "\n"
	      "  --packets N    packets scheduled (default 1000000)\n"
	      "  --rate PPS     send rate, packets per second (default "
	      "1000000)\n"
	      "  --tick-ns N    wheel tick (default 1000)\n"
	      "  --slots N      wheel slots, a power of two (default 8192)\n"
	      "  --cpu N        pin the thread to CPU N (default: not "
	      "pinned)\n"
	      "  --seconds S    per throughput trial (default 0.3)\n"
	      "  --trials N     throughput trials (default 3)\n"
	      "  -h, --help     this text\n"
	      "\n"
	      "Exit status: 0; 1 when a packet left early, twice or never; 2 "
	      "usage.\n",
	      f);
}

static int parse_opts(int argc, char **argv, struct txt_opts *o)
{
	static const struct option lo[] = {
	    {"packets", required_argument, NULL, 'n'},
	    {"rate", required_argument, NULL, 'r'},
	    {"tick-ns", required_argument, NULL, 't'},
	    {"slots", required_argument, NULL, 's'},
	    {"cpu", required_argument, NULL, 'c'},
	    {"seconds", required_argument, NULL, 'S'},
	    {"trials", required_argument, NULL, 'T'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int c;

	*o = (struct txt_opts){.packets = 1000000,
			       .rate = 1e6,
			       .tick_ns = 1000,
			       .slots = 8192,
			       .cpu = -1,
			       .seconds = 0.3,
			       .trials = 3};
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		char *end = NULL;

		errno = 0;
		switch (c) {
		case 'n':
			o->packets = strtoull(optarg, &end, 0);
			if (!o->packets || o->packets > PACKETS_MAX)
				end = NULL;
			break;
		case 'r':
			o->rate = strtod(optarg, &end);
			if (!(o->rate >= 1 && o->rate <= 1e9))
				end = NULL;
			break;
		case 't':
			o->tick_ns = strtoull(optarg, &end, 0);
			if (!o->tick_ns || o->tick_ns > 1000000000ull)
				end = NULL;
			break;
		case 's':
			o->slots = (uint32_t)strtoul(optarg, &end, 0);
			if (o->slots < 64 || (o->slots & (o->slots - 1)) ||
			    o->slots > (1u << 24))
				end = NULL;
			break;
		case 'c':
			o->cpu = (int)strtol(optarg, &end, 0);
			if (o->cpu < 0 || o->cpu >= CPU_SETSIZE)
				end = NULL;
			break;
		case 'S':
			o->seconds = strtod(optarg, &end);
			if (!(o->seconds > 0 && o->seconds <= 60))
				end = NULL;
			break;
		case 'T':
			o->trials = (unsigned)strtoul(optarg, &end, 0);
			if (!o->trials || o->trials > 100)
				end = NULL;
			break;
		case 'h':
			usage(stdout);
			return 1;
		default:
			usage(stderr);
			return -1;
		}
		if (!end || *end || errno) {
			fprintf(stderr,
				"bench txtime: bad value '%s' for --%s\n",
				optarg,
				lo[c == 'n'   ? 0
				   : c == 'r' ? 1
				   : c == 't' ? 2
				   : c == 's' ? 3
				   : c == 'c' ? 4
				   : c == 'S' ? 5
					      : 6]
				    .name);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "bench txtime: unexpected '%s'\n",
			argv[optind]);
		return -1;
	}
	return 0;
}

static void prec_row(enum impl impl, const struct prec_result *r)
{
	printf("%-8s %-18s %-24s %9lu %9lu %10lu %9.3f %6lu %6lu\n", "txtime",
	       "precision", impl_name[impl], (unsigned long)r->p50,
	       (unsigned long)r->p99, (unsigned long)r->max, r->pps / 1e6,
	       (unsigned long)(r->early + r->dup), (unsigned long)r->lost);
}

int bench_txtime(int argc, char **argv)
{
	struct prec_result pr[3];
	struct tp_state tw, th;
	struct bench_best ob = {0}, pb = {0};
	struct txt_opts o;
	double stall_pct, stall_per_s;
	uint64_t bad = 0;
	int rc = parse_opts(argc, argv, &o);

	if (rc)
		return rc > 0 ? 0 : 2;
	if (o.tick_ns * o.slots / 2 < 2 * (uint64_t)(1e9 / o.rate)) {
		fprintf(stderr, "bench txtime: the horizon (tick x slots) "
				"must span a few packets at --rate\n");
		return 2;
	}
	if (o.cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(o.cpu, &set);
		if (sched_setaffinity(0, sizeof(set), &set)) {
			fprintf(stderr, "bench txtime: --cpu %d: %s\n", o.cpu,
				strerror(errno));
			return 2;
		}
	}
	printf("# txtime: %lu packets at %.0f/s, tick %lu ns x %u slots "
	       "(lookahead %lu ns), cpu %d\n",
	       (unsigned long)o.packets, o.rate, (unsigned long)o.tick_ns,
	       o.slots, (unsigned long)(o.tick_ns * o.slots / 2), o.cpu);
	core_stalls(500000000ull, &stall_pct, &stall_per_s);
	printf("# this core, a bare clock loop: %.2f%% of the time lost in "
	       "%.0f gaps > 1 us a second\n",
	       stall_pct, stall_per_s);
	printf("%-8s %-18s %-24s %9s %9s %10s %9s %6s %6s\n", "workload",
	       "variant", "implementation", "p50_ns", "p99_ns", "max_ns",
	       "Mpps", "early", "lost");
	for (int i = 0; i < 3; i++) {
		if (run_precision(&o, (enum impl)i, &pr[i]))
			return 1;
		prec_row((enum impl)i, &pr[i]);
		bad += pr[i].early + pr[i].dup + pr[i].lost;
	}
	printf("{\"workload\":\"txtime\",\"variant\":\"precision\","
	       "\"target\":\"cpu\",\"workers\":1,\"packets\":%lu,"
	       "\"rate_pps\":%.0f,\"tick_ns\":%lu,\"pps\":%.0f,"
	       "\"p50_ns\":%lu,\"p99_ns\":%lu,\"max_ns\":%lu,"
	       "\"hist_p99_ns\":%lu,\"early\":%lu,\"lost\":%lu,"
	       "\"heap_spin_p99_ns\":%lu,\"peer\":\"clock_nanosleep\","
	       "\"peer_p50_ns\":%lu,\"peer_p99_ns\":%lu,\"peer_max_ns\":%lu,"
	       "\"ratio\":%.3f,\"core_stall_pct\":%.3f,"
	       "\"core_stalls_per_s\":%.0f,\"tsc_hz\":%lu}\n",
	       (unsigned long)o.packets, o.rate, (unsigned long)o.tick_ns,
	       pr[0].pps, (unsigned long)pr[0].p50, (unsigned long)pr[0].p99,
	       (unsigned long)pr[0].max, (unsigned long)pr[0].wheel_p99,
	       (unsigned long)(pr[0].early + pr[0].dup),
	       (unsigned long)pr[0].lost, (unsigned long)pr[1].p99,
	       (unsigned long)pr[2].p50, (unsigned long)pr[2].p99,
	       (unsigned long)pr[2].max,
	       pr[0].p99 ? (double)pr[2].p99 / (double)pr[0].p99 : 0.0,
	       stall_pct, stall_per_s, (unsigned long)dpflow_tsc_hz());
	printf("# wheel p99 %s the 2000 ns target; its histogram: p99 <= "
	       "%lu ns, max %lu ns\n",
	       pr[0].p99 <= 2000 ? "meets" : "misses",
	       (unsigned long)pr[0].wheel_p99, (unsigned long)pr[0].wheel_max);

	if (tp_init(&tw, &o, IMPL_WHEEL) || tp_init(&th, &o, IMPL_HEAP))
		return 1;
	bench_pair_run(tp_pass, &tw, tp_pass, &th, o.trials, o.seconds, &ob,
		       &pb);
	bad += tw.early + th.early;
	bench_report_header();
	bench_report_best("txtime", "enqueue+release", &ob, "binary heap", &pb,
			  64);
	tp_fini(&tw);
	tp_fini(&th);
	if (bad) {
		fprintf(stderr,
			"bench txtime: %lu packets released early, twice or "
			"never\n",
			(unsigned long)bad);
		return 1;
	}
	return 0;
}
