/*
 * Monitor pieces (lib/flow/meter.h): counters, srTCM / trTCM meters and
 * aging slots.
 *
 * Meters are checked against two models written here from the RFC texts:
 * a straightforward one (128-bit arithmetic: the bucket's total tokens by
 * time t are floor(t * rate / 1e9), capped at the bucket size) on random
 * configurations, packet sizes and arrival times, and a literal one that
 * adds tokens one at a time at their arrival instants (small rates). The
 * colour sequences and final buckets must be equal, packet for packet.
 * Concurrency: several threads on one counter or meter must lose nothing.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "flow/meter.h"

#define NS 1000000000ull

/* ---- helpers ------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t rng_below(uint64_t *s, uint64_t n)
{
	return n ? rng_next(s) % n : 0;
}

/* ---- counters ------------------------------------------------------------ */

Test(counters, init_checks_arguments)
{
	struct dpflow_error err = {0};
	static uint8_t mem[4096] __attribute__((aligned(64)));

	cr_assert_eq(dpflow_counters_image_size(0), 0);
	cr_assert_eq(dpflow_counters_image_size(DPFLOW_MONITOR_MAX + 1), 0);
	cr_assert_eq(dpflow_counters_image_size(3), 64 + 64);
	cr_assert_eq(dpflow_counters_image_init(mem, sizeof(mem), 0, &err),
		     -EINVAL);
	cr_assert_str_eq(err.field, "n");
	cr_assert_eq(dpflow_counters_image_init(mem + 8, 1000, 3, &err),
		     -EINVAL);
	cr_assert_str_eq(err.field, "mem");
	cr_assert_eq(dpflow_counters_image_init(mem, 127, 3, &err), -EINVAL);
	cr_assert_str_eq(err.field, "size");
	cr_assert_eq(dpflow_counters_image_init(mem, 128, 3, &err), 0);
	cr_assert_null(dpflow_counters_create(0, &err));
	cr_assert_str_eq(err.field, "n");
}

Test(counters, add_read_reset_copy)
{
	struct dpflow_error err = {0};
	struct dpflow_counters *c = dpflow_counters_create(5, &err);
	uint64_t p = 9, b = 9;
	void *copy;

	cr_assert_not_null(c);
	dpflow_counter_add(c, 0, 100);
	dpflow_counter_add(c, 0, 60);
	dpflow_counter_add_st(c, 4, 1500);
	dpflow_counter_add_st(c, 4, 0);
	cr_assert_eq(dpflow_counters_read(c, 0, &p, &b, &err), 0);
	cr_assert(p == 2 && b == 160);
	cr_assert_eq(dpflow_counters_read(c, 4, &p, &b, &err), 0);
	cr_assert(p == 2 && b == 1500);
	cr_assert_eq(dpflow_counters_read(c, 2, &p, NULL, &err), 0);
	cr_assert_eq(p, 0);
	cr_assert_eq(dpflow_counters_read(c, 5, &p, &b, &err), -EINVAL);
	cr_assert_str_eq(err.field, "index");

	/* a copy counts on by itself, from the same figures */
	copy = aligned_alloc(64, dpflow_counters_image_bytes(c));
	cr_assert_eq(dpflow_counters_image_copy(copy, 64, c, &err), -EINVAL);
	cr_assert_str_eq(err.field, "dst_size");
	cr_assert_eq(dpflow_counters_image_copy(
			 copy, dpflow_counters_image_bytes(c), c, &err),
		     0);
	dpflow_counter_add((struct dpflow_counters *)copy, 0, 40);
	cr_assert_eq(dpflow_counters_read((struct dpflow_counters *)copy, 0, &p,
					  &b, &err),
		     0);
	cr_assert(p == 3 && b == 200);

	cr_assert_eq(dpflow_counters_read_reset(c, 0, &p, &b, &err), 0);
	cr_assert(p == 2 && b == 160);
	cr_assert_eq(dpflow_counters_read(c, 0, &p, &b, &err), 0);
	cr_assert(p == 0 && b == 0);
	cr_assert_eq(dpflow_counters_read_reset(c, 7, &p, &b, &err), -EINVAL);
	free(copy);
	dpflow_counters_destroy(c);
	dpflow_counters_destroy(NULL);
}

#define CNT_ADDS  300000
#define LOCKSTEPS 30000

/*
 * Threads that meet at every step: each publishes the step it reached and
 * waits for the others, so that their next calls race for real even on a
 * loaded machine with few cores.
 */
struct lockstep {
	uint32_t step[4];
	unsigned n;
};

static void lockstep_wait(struct lockstep *l, unsigned id, uint32_t k)
{
	__atomic_store_n(&l->step[id], k, __ATOMIC_RELEASE);
	for (unsigned j = 0; j < l->n; j++)
		for (unsigned spin = 0;
		     __atomic_load_n(&l->step[j], __ATOMIC_ACQUIRE) < k; spin++)
			if (spin > 1000)
				sched_yield();
}

struct cnt_arg {
	struct dpflow_counters *c;
	unsigned id;
	struct lockstep *ls;
	volatile int *done;
};

static void *cnt_worker(void *p)
{
	struct cnt_arg *a = (struct cnt_arg *)p;

	lockstep_wait(a->ls, a->id, 1);
	for (uint32_t i = 0; i < CNT_ADDS; i++)
		dpflow_counter_add(a->c, 0, a->id + 1 + i % 7);
	__atomic_add_fetch(a->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* Two threads add to one counter as fast as they can while the control
 * thread read-resets it in a loop: nothing is lost. */
Test(counters, concurrent_adds_and_resets_lose_nothing)
{
	struct dpflow_counters *c = dpflow_counters_create(1, NULL);
	struct lockstep ls = {{0}, 3};
	volatile int done = 0;
	struct cnt_arg a[2] = {{c, 0, &ls, &done}, {c, 1, &ls, &done}};
	pthread_t t[2];
	uint64_t pkts = 0, bytes = 0, exp_bytes = 0, p, b, resets = 0;

	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, cnt_worker, &a[i]);
	lockstep_wait(&ls, 2, 1);
	while (__atomic_load_n(&done, __ATOMIC_ACQUIRE) < 2) {
		cr_assert_eq(dpflow_counters_read_reset(c, 0, &p, &b, NULL), 0);
		pkts += p;
		bytes += b;
		resets++;
	}
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	dpflow_counters_read(c, 0, &p, &b, NULL);
	pkts += p;
	bytes += b;
	for (uint32_t i = 0; i < CNT_ADDS; i++)
		exp_bytes += 1 + i % 7 + 2 + i % 7;
	cr_assert_eq(pkts, 2ull * CNT_ADDS);
	cr_assert_eq(bytes, exp_bytes);
	cr_assert_gt(resets, 0);
	dpflow_counters_destroy(c);
}

struct st_arg {
	struct dpflow_counters *c;
	uint64_t seen_max;
};

static void *st_writer(void *p)
{
	struct st_arg *a = (struct st_arg *)p;

	for (uint32_t i = 0; i < CNT_ADDS; i++)
		dpflow_counter_add_st(a->c, 0, 64);
	return NULL;
}

/* Single-writer counters: a reader sees monotonic values, the total is
 * exact. */
Test(counters, single_writer_counts_exactly_under_reads)
{
	struct st_arg a = {dpflow_counters_create(1, NULL), 0};
	pthread_t t;
	uint64_t p = 0, b = 0, last = 0;

	pthread_create(&t, NULL, st_writer, &a);
	for (int i = 0; i < 20000; i++) {
		dpflow_counters_read(a.c, 0, &p, NULL, NULL);
		cr_assert_geq(p, last);
		last = p;
	}
	pthread_join(t, NULL);
	dpflow_counters_read(a.c, 0, &p, &b, NULL);
	cr_assert_eq(p, CNT_ADDS);
	cr_assert_eq(b, 64ull * CNT_ADDS);
	dpflow_counters_destroy(a.c);
}

/* ---- meter models -------------------------------------------------------- */

typedef unsigned __int128 u128;

struct model {
	int alg;
	bool aware;
	uint64_t cir, pir, cbs, eb; /* eb: EBS (srTCM) or PBS (trTCM) */
	uint64_t tc, te;	    /* te: Te or Tp */
	uint64_t last;
	/* literal model: next token index of each bucket's feed */
	uint64_t next_c, next_p;
};

static void model_init(struct model *m, const struct dpflow_meter_params *p,
		       uint64_t now)
{
	memset(m, 0, sizeof(*m));
	m->alg = p->alg;
	m->aware = p->color_aware;
	m->cir = p->cir;
	m->pir = p->pir;
	m->cbs = p->cbs;
	m->eb = p->alg == DPFLOW_METER_TRTCM ? p->pbs : p->ebs;
	m->tc = m->cbs;
	m->te = m->eb;
	m->last = now;
}

/* Total tokens a feed of @rate bytes/s delivered by @t ns. */
static u128 tokens_by(uint64_t t, uint64_t rate)
{
	return (u128)t * rate / NS;
}

static u128 min128(u128 a, u128 b)
{
	return a < b ? a : b;
}

/* RFC 2697 / 2698 decision on the buckets (after crediting). */
static unsigned model_decide(struct model *m, uint32_t B, unsigned in)
{
	if (!m->aware)
		in = DPFLOW_METER_GREEN;
	if (m->alg == DPFLOW_METER_SRTCM) {
		/* RFC 2697 section 4 */
		if (in == DPFLOW_METER_GREEN && m->tc >= B) {
			m->tc -= B;
			return DPFLOW_METER_GREEN;
		}
		if ((in == DPFLOW_METER_GREEN || in == DPFLOW_METER_YELLOW) &&
		    m->te >= B) {
			m->te -= B;
			return DPFLOW_METER_YELLOW;
		}
		return DPFLOW_METER_RED;
	}
	/* RFC 2698 section 4 */
	if (in == DPFLOW_METER_RED || m->te < B)
		return DPFLOW_METER_RED;
	if (in == DPFLOW_METER_YELLOW || m->tc < B) {
		m->te -= B;
		return DPFLOW_METER_YELLOW;
	}
	m->te -= B;
	m->tc -= B;
	return DPFLOW_METER_GREEN;
}

/* Straightforward model: credit with 128-bit arithmetic, cap, decide. */
static unsigned model_color(struct model *m, uint64_t now, uint32_t B,
			    unsigned in)
{
	if (now > m->last) {
		u128 c = tokens_by(now, m->cir) - tokens_by(m->last, m->cir);

		if (m->alg == DPFLOW_METER_SRTCM) {
			/* C fills first; what C cannot take goes to E */
			u128 room = m->cbs - m->tc;

			if (c <= room) {
				m->tc += (uint64_t)c;
			} else {
				m->tc = m->cbs;
				m->te =
				    (uint64_t)min128(m->eb, m->te + c - room);
			}
		} else {
			u128 p =
			    tokens_by(now, m->pir) - tokens_by(m->last, m->pir);

			m->tc = (uint64_t)min128(m->cbs, m->tc + c);
			m->te = (uint64_t)min128(m->eb, m->te + p);
		}
		m->last = now;
	}
	return model_decide(m, B, in);
}

/* Arrival instant of token @k (k >= 1) of a feed at @rate: the first ns t
 * with floor(t * rate / 1e9) >= k. */
static uint64_t token_time(uint64_t k, uint64_t rate)
{
	return (uint64_t)(((u128)k * NS + rate - 1) / rate);
}

/* Literal model: tokens added one by one, as the RFCs describe. */
static unsigned literal_color(struct model *m, uint64_t now, uint32_t B,
			      unsigned in)
{
	if (m->next_c == 0 && m->cir) /* first token after the start */
		m->next_c = (uint64_t)tokens_by(m->last, m->cir) + 1;
	if (m->next_p == 0 && m->pir)
		m->next_p = (uint64_t)tokens_by(m->last, m->pir) + 1;
	if (now > m->last) {
		while (m->cir && token_time(m->next_c, m->cir) <= now) {
			/* "Tc is incremented by one ... up to CBS; else Te
			 * (srTCM) is incremented by one ... up to EBS" */
			if (m->tc < m->cbs)
				m->tc++;
			else if (m->alg == DPFLOW_METER_SRTCM && m->te < m->eb)
				m->te++;
			m->next_c++;
		}
		while (m->alg == DPFLOW_METER_TRTCM && m->pir &&
		       token_time(m->next_p, m->pir) <= now) {
			if (m->te < m->eb)
				m->te++;
			m->next_p++;
		}
		m->last = now;
	}
	return model_decide(m, B, in);
}

/* ---- meters vs the models ------------------------------------------------ */

static uint64_t random_rate(uint64_t *s)
{
	switch (rng_below(s, 8)) {
	case 0:
		return 0;
	case 1:
		return 1 + rng_below(s, 1000);
	case 2:
		return UINT64_MAX - rng_below(s, 1000);
	case 3:
		return rng_next(s); /* anything */
	default:
		/* 1 kB/s .. 100 GB/s, log-uniform */
		return (uint64_t)1000 << rng_below(s, 27) | rng_below(s, 1000);
	}
}

static uint32_t random_burst(uint64_t *s)
{
	switch (rng_below(s, 6)) {
	case 0:
		return 0;
	case 1:
		return UINT32_MAX - (uint32_t)rng_below(s, 10);
	default:
		return (uint32_t)rng_below(s, 200000);
	}
}

static void random_params(uint64_t *s, int alg, bool aware,
			  struct dpflow_meter_params *p)
{
	memset(p, 0, sizeof(*p));
	p->alg = (uint8_t)alg;
	p->color_aware = aware;
	p->cir = random_rate(s);
	p->cbs = random_burst(s);
	if (alg == DPFLOW_METER_SRTCM) {
		p->ebs = random_burst(s);
	} else {
		p->pir = random_rate(s);
		if (p->pir < p->cir) {
			uint64_t t = p->pir;

			p->pir = p->cir;
			p->cir = t;
		}
		p->pbs = random_burst(s);
	}
}

static uint64_t random_gap(uint64_t *s)
{
	switch (rng_below(s, 16)) {
	case 0:
		return 0; /* same nanosecond */
	case 1:
		return rng_below(s, 100 * NS); /* long idle */
	case 2:
		return (uint64_t)1 << rng_below(s, 63); /* very long idle */
	default:
		return rng_below(s, 2000000); /* up to 2 ms */
	}
}

static uint32_t random_size(uint64_t *s)
{
	switch (rng_below(s, 20)) {
	case 0:
		return 0;
	case 1:
		return (uint32_t)rng_next(s); /* larger than any burst */
	default:
		return 40 + (uint32_t)rng_below(s, 1500);
	}
}

/*
 * @configs random meters of @alg, @pkts packets each, against the
 * straightforward model: colours and buckets equal after every packet.
 */
static void check_vs_model(int alg, bool aware, uint64_t seed, int configs,
			   int pkts)
{
	struct dpflow_meters *m = dpflow_meters_create(1, NULL);
	uint64_t s = seed, total = 0;

	cr_assert_not_null(m);
	for (int c = 0; c < configs; c++) {
		struct dpflow_meter_params p;
		struct dpflow_meter_state st;
		struct model md;
		uint64_t now = rng_below(&s, 4) == 0 ? 0 : rng_next(&s) >> 2;

		random_params(&s, alg, aware, &p);
		cr_assert_eq(dpflow_meter_config(m, 0, &p, now, NULL), 0);
		model_init(&md, &p, now);
		for (int i = 0; i < pkts; i++) {
			uint32_t B = random_size(&s);
			unsigned in = (unsigned)rng_below(&s, 3), got, want;
			uint64_t gap = random_gap(&s);

			/* now and then a packet from the past */
			if (rng_below(&s, 50) == 0)
				now -= rng_below(&s,
						 now < 1000000 ? now : 1000000);
			else
				now = now + gap < now ? UINT64_MAX : now + gap;
			got = dpflow_meter_color(m, 0, now, B, in);
			want = model_color(&md, now, B, in);
			cr_assert_eq(
			    got, want,
			    "config %d (cir %lu pir %lu cbs %u eb %lu) "
			    "packet %d: %s, model %s",
			    c, (unsigned long)p.cir, (unsigned long)p.pir,
			    p.cbs, (unsigned long)md.eb, i,
			    dpflow_meter_color_name(got),
			    dpflow_meter_color_name(want));
			dpflow_meter_read(m, 0, &st, NULL);
			cr_assert(st.tc == md.tc && st.te_tp == md.te,
				  "config %d packet %d: buckets %u/%u, model "
				  "%lu/%lu",
				  c, i, st.tc, st.te_tp, (unsigned long)md.tc,
				  (unsigned long)md.te);
			total++;
		}
	}
	cr_assert_eq(total, (uint64_t)configs * (uint64_t)pkts);
	dpflow_meters_destroy(m);
}

Test(meter, srtcm_color_blind_matches_rfc2697_model)
{
	check_vs_model(DPFLOW_METER_SRTCM, false, 11, 300, 2000);
}

Test(meter, srtcm_color_aware_matches_rfc2697_model)
{
	check_vs_model(DPFLOW_METER_SRTCM, true, 12, 300, 2000);
}

Test(meter, trtcm_color_blind_matches_rfc2698_model)
{
	check_vs_model(DPFLOW_METER_TRTCM, false, 13, 300, 2000);
}

Test(meter, trtcm_color_aware_matches_rfc2698_model)
{
	check_vs_model(DPFLOW_METER_TRTCM, true, 14, 300, 2000);
}

/*
 * Small rates, realistic traffic: against the literal model that adds
 * tokens one at a time at their arrival instants.
 */
static void check_vs_literal(int alg, bool aware, uint64_t seed)
{
	struct dpflow_meters *m = dpflow_meters_create(1, NULL);
	uint64_t s = seed;
	int greens = 0, yellows = 0, reds = 0;

	for (int c = 0; c < 20; c++) {
		struct dpflow_meter_params p = {0};
		struct model md;
		uint64_t now = rng_next(&s) >> 4, gap;

		p.alg = (uint8_t)alg;
		p.color_aware = aware;
		p.cir = 1 + rng_below(&s, 100000);
		p.pir = p.cir + rng_below(&s, 100000);
		p.cbs = (uint32_t)rng_below(&s, 3000);
		p.ebs = (uint32_t)rng_below(&s, 3000);
		p.pbs = (uint32_t)rng_below(&s, 6000);
		/* offered load 0.5 to 3.5 times CIR, 170-byte packets on
		 * average: a mix of colours */
		gap = 170 * NS * 100 / (p.cir * (50 + rng_below(&s, 300)));
		cr_assert_eq(dpflow_meter_config(m, 0, &p, now, NULL), 0);
		model_init(&md, &p, now);
		for (int i = 0; i < 600; i++) {
			uint32_t B = 40 + (uint32_t)rng_below(&s, 261);
			unsigned in = (unsigned)rng_below(&s, 3);
			unsigned got, want;

			now += rng_below(&s, 2 * gap + 1);
			got = dpflow_meter_color(m, 0, now, B, in);
			want = literal_color(&md, now, B, in);
			cr_assert_eq(got, want, "config %d packet %d", c, i);
			greens += got == DPFLOW_METER_GREEN;
			yellows += got == DPFLOW_METER_YELLOW;
			reds += got == DPFLOW_METER_RED;
		}
	}
	/* the traffic exercised every colour */
	cr_assert(greens > 100 && yellows > 100 && reds > 100, "g %d y %d r %d",
		  greens, yellows, reds);
	dpflow_meters_destroy(m);
}

Test(meter, srtcm_matches_token_by_token_model)
{
	check_vs_literal(DPFLOW_METER_SRTCM, false, 21);
	check_vs_literal(DPFLOW_METER_SRTCM, true, 22);
}

Test(meter, trtcm_matches_token_by_token_model)
{
	check_vs_literal(DPFLOW_METER_TRTCM, false, 23);
	check_vs_literal(DPFLOW_METER_TRTCM, true, 24);
}

/* ---- meter edge cases ---------------------------------------------------- */

static struct dpflow_meters *one_meter(int alg, uint64_t cir, uint64_t pir,
				       uint32_t cbs, uint32_t eb, bool aware,
				       uint64_t now)
{
	struct dpflow_meters *m = dpflow_meters_create(2, NULL);
	struct dpflow_meter_params p = {0};

	p.alg = (uint8_t)alg;
	p.color_aware = aware;
	p.cir = cir;
	p.pir = pir;
	p.cbs = cbs;
	p.ebs = eb;
	p.pbs = eb;
	cr_assert_eq(dpflow_meter_config(m, 1, &p, now, NULL), 0);
	return m;
}

Test(meter, zero_bursts_color_everything_red)
{
	struct dpflow_meters *m =
	    one_meter(DPFLOW_METER_SRTCM, 1000000, 0, 0, 0, false, 0);
	struct dpflow_meters *t =
	    one_meter(DPFLOW_METER_TRTCM, 1000000, 2000000, 0, 0, false, 0);

	for (uint64_t now = 0; now < 10 * NS; now += NS / 3) {
		cr_assert_eq(dpflow_meter_color(m, 1, now, 1, 0),
			     DPFLOW_METER_RED);
		cr_assert_eq(dpflow_meter_color(t, 1, now, 1, 0),
			     DPFLOW_METER_RED);
		/* a zero-byte packet fits an empty bucket */
		cr_assert_eq(dpflow_meter_color(m, 1, now, 0, 0),
			     DPFLOW_METER_GREEN);
	}
	dpflow_meters_destroy(m);
	dpflow_meters_destroy(t);
}

Test(meter, zero_rate_never_refills)
{
	struct dpflow_meters *m =
	    one_meter(DPFLOW_METER_SRTCM, 0, 0, 1000, 500, false, 5);
	struct dpflow_meters *t =
	    one_meter(DPFLOW_METER_TRTCM, 0, 0, 1000, 1500, false, 5);
	unsigned seq_m[8], seq_t[8];

	for (int i = 0; i < 8; i++) {
		uint64_t now = 5 + (uint64_t)i * 1000 * NS; /* long gaps */

		seq_m[i] = dpflow_meter_color(m, 1, now, 300, 0);
		seq_t[i] = dpflow_meter_color(t, 1, now, 300, 0);
	}
	/* srTCM: 3 green (900 of 1000), 1 yellow (300 of 500), then red */
	cr_assert(seq_m[0] == 0 && seq_m[2] == 0 && seq_m[3] == 1 &&
		  seq_m[4] == 2 && seq_m[7] == 2);
	/* trTCM: green while C has 300 (3), yellow while P has (5), red */
	cr_assert(seq_t[2] == 0 && seq_t[3] == 1 && seq_t[4] == 1 &&
		  seq_t[5] == 2);
	dpflow_meters_destroy(m);
	dpflow_meters_destroy(t);
}

Test(meter, huge_rates_and_long_idle_do_not_overflow)
{
	struct dpflow_meters *m = one_meter(DPFLOW_METER_SRTCM, UINT64_MAX, 0,
					    UINT32_MAX, UINT32_MAX, false, 0);
	struct dpflow_meter_state st;
	uint64_t now = 0;

	/* drain C completely, then one nanosecond refills it */
	cr_assert_eq(dpflow_meter_color(m, 1, 0, UINT32_MAX, 0),
		     DPFLOW_METER_GREEN);
	dpflow_meter_read(m, 1, &st, NULL);
	cr_assert_eq(st.tc, 0);
	cr_assert_eq(dpflow_meter_color(m, 1, 1, UINT32_MAX, 0),
		     DPFLOW_METER_GREEN);
	dpflow_meters_destroy(m);

	/* 2^63 bytes/s for 2 s: 2^64 tokens, which must not wrap to 0 */
	m = one_meter(DPFLOW_METER_TRTCM, (uint64_t)1 << 63, (uint64_t)1 << 63,
		      1000, 1000, false, 0);
	cr_assert_eq(dpflow_meter_color(m, 1, 0, 1000, 0), DPFLOW_METER_GREEN);
	cr_assert_eq(dpflow_meter_color(m, 1, 2 * NS, 1000, 0),
		     DPFLOW_METER_GREEN);
	dpflow_meters_destroy(m);

	/* 1 byte/s with idle periods up to 2^63 ns: exactly the tokens */
	m = one_meter(DPFLOW_METER_SRTCM, 1, 0, UINT32_MAX, UINT32_MAX, false,
		      0);
	cr_assert_eq(dpflow_meter_color(m, 1, 0, UINT32_MAX, 0),
		     DPFLOW_METER_GREEN);
	now = 1000 * NS + 999999999; /* 1000.999999999 s: 1000 tokens */
	cr_assert_eq(dpflow_meter_color(m, 1, now, 0, 0), DPFLOW_METER_GREEN);
	dpflow_meter_read(m, 1, &st, NULL);
	cr_assert_eq(st.tc, 1000);
	now = (uint64_t)1 << 63; /* idle for ~292 years */
	dpflow_meter_color(m, 1, now, 0, 0);
	dpflow_meter_read(m, 1, &st, NULL);
	cr_assert(st.tc == UINT32_MAX && st.te_tp == UINT32_MAX);
	cr_assert_eq(dpflow_meter_color(m, 1, UINT64_MAX, UINT32_MAX, 0),
		     DPFLOW_METER_GREEN);
	dpflow_meters_destroy(m);
}

Test(meter, time_going_back_adds_nothing)
{
	struct dpflow_meters *m =
	    one_meter(DPFLOW_METER_SRTCM, NS, 0, 1000, 0, false, 10 * NS);
	struct dpflow_meter_state st;

	cr_assert_eq(dpflow_meter_color(m, 1, 10 * NS, 1000, 0),
		     DPFLOW_METER_GREEN);
	/* an earlier timestamp: no credit, last_ns stays */
	cr_assert_eq(dpflow_meter_color(m, 1, 9 * NS, 1, 0), DPFLOW_METER_RED);
	dpflow_meter_read(m, 1, &st, NULL);
	cr_assert(st.tc == 0 && st.last_ns == 10 * NS);
	/* 1 byte per ns from 10 s on */
	cr_assert_eq(dpflow_meter_color(m, 1, 10 * NS + 500, 500, 0),
		     DPFLOW_METER_GREEN);
	cr_assert_eq(dpflow_meter_color(m, 1, 10 * NS + 999, 500, 0),
		     DPFLOW_METER_RED);
	dpflow_meters_destroy(m);
}

Test(meter, color_aware_respects_precolor)
{
	struct dpflow_meters *s =
	    one_meter(DPFLOW_METER_SRTCM, 0, 0, 1000, 1000, true, 0);
	struct dpflow_meters *t =
	    one_meter(DPFLOW_METER_TRTCM, 0, 0, 1000, 1000, true, 0);

	/* red stays red and takes no tokens */
	cr_assert_eq(dpflow_meter_color(s, 1, 0, 10, DPFLOW_METER_RED),
		     DPFLOW_METER_RED);
	cr_assert_eq(dpflow_meter_color(t, 1, 0, 10, DPFLOW_METER_RED),
		     DPFLOW_METER_RED);
	/* yellow never becomes green; srTCM takes it from E */
	cr_assert_eq(dpflow_meter_color(s, 1, 0, 600, DPFLOW_METER_YELLOW),
		     DPFLOW_METER_YELLOW);
	cr_assert_eq(dpflow_meter_color(s, 1, 0, 600, DPFLOW_METER_YELLOW),
		     DPFLOW_METER_RED);
	cr_assert_eq(dpflow_meter_color(s, 1, 0, 1000, DPFLOW_METER_GREEN),
		     DPFLOW_METER_GREEN);
	cr_assert_eq(dpflow_meter_color(t, 1, 0, 600, DPFLOW_METER_YELLOW),
		     DPFLOW_METER_YELLOW);
	/* trTCM: P has 400 left, C still 1000: green needs both */
	cr_assert_eq(dpflow_meter_color(t, 1, 0, 400, DPFLOW_METER_GREEN),
		     DPFLOW_METER_GREEN);
	cr_assert_eq(dpflow_meter_color(t, 1, 0, 1, DPFLOW_METER_GREEN),
		     DPFLOW_METER_RED);
	dpflow_meters_destroy(s);
	dpflow_meters_destroy(t);
}

Test(meter, config_validates_and_unconfigured_is_green)
{
	struct dpflow_meters *m = dpflow_meters_create(2, NULL);
	struct dpflow_meter_params p = {0};
	struct dpflow_meter_state st, st2;
	struct dpflow_error err = {0};

	cr_assert_eq(dpflow_meter_color(m, 0, 5, 100000, 0),
		     DPFLOW_METER_GREEN);
	p.alg = DPFLOW_METER_SRTCM;
	p.cir = 1000;
	p.cbs = 10;
	cr_assert_eq(dpflow_meter_config(m, 0, &p, 7, &err), 0);
	dpflow_meter_read(m, 0, &st, NULL);
	cr_assert_eq(dpflow_meter_config(m, 2, &p, 0, &err), -EINVAL);
	cr_assert_str_eq(err.field, "index");
	cr_assert_eq(dpflow_meter_config(m, 0, NULL, 0, &err), -EINVAL);
	cr_assert_str_eq(err.field, "params");
	p.alg = 9;
	cr_assert_eq(dpflow_meter_config(m, 0, &p, 0, &err), -EINVAL);
	cr_assert_str_eq(err.field, "alg");
	p.alg = DPFLOW_METER_TRTCM;
	p.pir = 999;
	cr_assert_eq(dpflow_meter_config(m, 0, &p, 0, &err), -EINVAL);
	cr_assert_str_eq(err.field, "pir");
	cr_assert_eq(err.code, EINVAL);
	/* failed calls left the meter as it was */
	dpflow_meter_read(m, 0, &st2, NULL);
	cr_assert(st.tc == st2.tc && st.te_tp == st2.te_tp && st2.last_ns == 7);
	cr_assert_eq(dpflow_meter_read(m, 3, &st, &err), -EINVAL);
	cr_assert_str_eq(dpflow_meter_color_name(2), "red");
	cr_assert_str_eq(dpflow_meter_color_name(3), "unknown");
	dpflow_meters_destroy(m);
}

Test(meter, image_copy_meters_the_same)
{
	struct dpflow_meters *m = dpflow_meters_create(4, NULL);
	struct dpflow_meters *c;
	struct dpflow_meter_params p = {0};
	uint64_t s = 5;

	p.alg = DPFLOW_METER_TRTCM;
	p.cir = 1000000;
	p.pir = 3000000;
	p.cbs = 3000;
	p.pbs = 9000;
	dpflow_meter_config(m, 2, &p, 100, NULL);
	dpflow_meter_color(m, 2, 200, 1500, 0);
	c = (struct dpflow_meters *)aligned_alloc(64,
						  dpflow_meters_image_bytes(m));
	cr_assert_eq(
	    dpflow_meters_image_copy(c, dpflow_meters_image_bytes(m), m, NULL),
	    0);
	for (uint64_t now = 300; now < 50000000; now += rng_below(&s, 100000)) {
		uint32_t B = 64 + (uint32_t)rng_below(&s, 1400);

		cr_assert_eq(dpflow_meter_color(m, 2, now, B, 0),
			     dpflow_meter_color(c, 2, now, B, 0));
	}
	free(c);
	dpflow_meters_destroy(m);
}

/* ---- meters under concurrency -------------------------------------------- */

struct mt_arg {
	struct dpflow_meters *m;
	uint64_t t0;
	unsigned id;
	uint32_t bytes;
	struct lockstep *ls;
	uint64_t count[3];
	uint64_t green_bytes;
};

static void *mt_worker(void *p)
{
	struct mt_arg *a = (struct mt_arg *)p;

	for (uint32_t i = 1; i <= LOCKSTEPS; i++) {
		/* both threads bring the same time stamps, kept in step every
		 * 64 packets */
		uint64_t now = a->t0 + 4ull * i;
		unsigned c;

		if (i % 64 == 1)
			lockstep_wait(a->ls, a->id, i);
		c = dpflow_meter_color(a->m, 1, now, a->bytes, 0);
		a->count[c]++;
		if (c == DPFLOW_METER_GREEN)
			a->green_bytes += a->bytes;
	}
	return NULL;
}

static void run_mt(struct mt_arg *a)
{
	struct lockstep ls = {{0}, 2};
	pthread_t t[2];

	for (int i = 0; i < 2; i++) {
		a[i].ls = &ls;
		pthread_create(&t[i], NULL, mt_worker, &a[i]);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
}

/* No refill: exactly the buckets' bytes go green and yellow, however the
 * two threads interleave. */
Test(meter, shared_meter_loses_no_update)
{
	for (int alg = DPFLOW_METER_SRTCM; alg <= DPFLOW_METER_TRTCM; alg++) {
		/* srTCM: C 15000 packets, E 15000; trTCM: C 15000, P 30000 */
		struct dpflow_meters *m =
		    one_meter(alg, 0, 0, 15000 * 100,
			      (alg == DPFLOW_METER_SRTCM ? 15000 : 30000) * 100,
			      false, 0);
		struct mt_arg a[2] = {{m, 0, 0, 100, NULL, {0}, 0},
				      {m, 0, 1, 100, NULL, {0}, 0}};
		uint64_t g, y, r;

		run_mt(a);
		g = a[0].count[0] + a[1].count[0];
		y = a[0].count[1] + a[1].count[1];
		r = a[0].count[2] + a[1].count[2];
		cr_assert_eq(g, 15000);
		cr_assert_eq(y, 15000);
		cr_assert_eq(r, 2ull * LOCKSTEPS - 30000);
		dpflow_meters_destroy(m);
	}
}

/* With refill, and C never full: every credited byte is used exactly once
 * (green bytes + what is left = tokens credited), though both threads
 * bring the same time stamps. */
Test(meter, shared_meter_credits_each_nanosecond_once)
{
	uint64_t t0 = 123456789;
	/* 0.25 bytes per ns: 1 byte per step */
	struct dpflow_meters *m =
	    one_meter(DPFLOW_METER_SRTCM, NS / 4, 0, 1u << 31, 0, false, t0);
	struct mt_arg a[2] = {{m, t0, 0, 3, NULL, {0}, 0},
			      {m, t0, 1, 3, NULL, {0}, 0}};
	struct dpflow_meter_state st;
	uint64_t credited;

	/* empty C first: then it never reaches its cap during the run */
	cr_assert_eq(dpflow_meter_color(m, 1, t0, 1u << 31, 0),
		     DPFLOW_METER_GREEN);
	run_mt(a);
	dpflow_meter_read(m, 1, &st, NULL);
	credited =
	    (uint64_t)(tokens_by(st.last_ns, NS / 4) - tokens_by(t0, NS / 4));
	cr_assert_eq(st.last_ns, t0 + 4ull * LOCKSTEPS);
	cr_assert_eq(credited, LOCKSTEPS);
	cr_assert_eq(a[0].green_bytes + a[1].green_bytes + st.tc, credited);
	cr_assert_gt(a[0].count[0] + a[1].count[0], LOCKSTEPS / 4);
	dpflow_meters_destroy(m);
}

/* ---- aging --------------------------------------------------------------- */

struct aged {
	uint32_t n;
	uint32_t idx[64];
	uint64_t last[64];
};

static void aged_cb(uint32_t idx, uint64_t last_hit_ns, void *arg)
{
	struct aged *a = (struct aged *)arg;

	cr_assert_lt(a->n, 64);
	a->idx[a->n] = idx;
	a->last[a->n++] = last_hit_ns;
}

Test(aging, entries_age_out_exactly_at_their_timeout)
{
	struct dpflow_aging *a = dpflow_aging_create(8, NULL);
	struct dpflow_error err = {0};
	struct aged out = {0};
	uint64_t ms = 1000000;

	cr_assert_eq(dpflow_aging_arm(a, 1, 100, 1000 * ms, &err), 0);
	cr_assert_eq(dpflow_aging_arm(a, 2, 250, 1000 * ms, &err), 0);
	cr_assert_eq(dpflow_aging_arm(a, 3, 100, 1000 * ms + 999999, &err), 0);
	cr_assert_eq(dpflow_aging_arm(a, 8, 100, 0, &err), -EINVAL);
	cr_assert_str_eq(err.field, "index");
	cr_assert_eq(dpflow_aging_arm(a, 4, 0, 0, &err), -EINVAL);
	cr_assert_str_eq(err.field, "timeout_ms");

	/* a hit on 2 at 1100 ms moves its deadline to 1350 ms */
	dpflow_aging_touch(a, 2, 1100 * ms + 5);
	/* an older hit from a slower thread does not move it back */
	dpflow_aging_touch(a, 2, 1050 * ms);
	cr_assert_eq(
	    dpflow_aging_scan(a, 1099 * ms + 999999, NULL, 0, aged_cb, &out),
	    0);
	cr_assert_eq(dpflow_aging_scan(a, 1100 * ms, NULL, 0, aged_cb, &out),
		     2);
	cr_assert(out.idx[0] == 1 && out.idx[1] == 3);
	cr_assert(out.last[0] == 1000 * ms && out.last[1] == 1000 * ms);
	/* reported once */
	cr_assert_eq(dpflow_aging_scan(a, 1200 * ms, NULL, 0, aged_cb, &out),
		     0);
	cr_assert_eq(dpflow_aging_scan(a, 1349 * ms, NULL, 0, aged_cb, &out),
		     0);
	cr_assert_eq(dpflow_aging_scan(a, 1350 * ms, NULL, 0, aged_cb, &out),
		     1);
	cr_assert(out.idx[2] == 2 && out.last[2] == 1100 * ms);
	/* disarmed slots are never reported */
	dpflow_aging_arm(a, 5, 1, 0, NULL);
	cr_assert_eq(dpflow_aging_disarm(a, 5, NULL), 0);
	cr_assert_eq(dpflow_aging_disarm(a, 9, &err), -EINVAL);
	cr_assert_eq(dpflow_aging_scan(a, UINT64_MAX, NULL, 0, NULL, NULL), 0);
	dpflow_aging_destroy(a);
}

Test(aging, cursor_scans_a_slice_at_a_time)
{
	struct dpflow_aging *a = dpflow_aging_create(10, NULL);
	struct aged out = {0};
	uint32_t cursor = 7, total = 0;
	void *copy;

	for (uint32_t i = 0; i < 10; i++)
		dpflow_aging_arm(a, i, 1, 0, NULL);
	copy = aligned_alloc(64, dpflow_aging_image_bytes(a));
	cr_assert_eq(
	    dpflow_aging_image_copy(copy, dpflow_aging_image_bytes(a), a, NULL),
	    0);
	/* slices of 4 from 7: 7 8 9 0 | 1 2 3 4 | 5 6 7 8 */
	cr_assert_eq(dpflow_aging_scan(a, 5000000, &cursor, 4, aged_cb, &out),
		     4);
	cr_assert(out.idx[0] == 7 && out.idx[3] == 0 && cursor == 1);
	total += 4;
	total += dpflow_aging_scan(a, 5000000, &cursor, 4, aged_cb, &out);
	total += dpflow_aging_scan(a, 5000000, &cursor, 4, aged_cb, &out);
	cr_assert_eq(total, 10);
	cr_assert_eq(cursor, 9);
	/* a budget beyond the table scans it once */
	cr_assert_eq(dpflow_aging_scan((struct dpflow_aging *)copy, 5000000,
				       &cursor, 1000, NULL, NULL),
		     10);
	cr_assert_eq(cursor, 9);
	free(copy);
	dpflow_aging_destroy(a);
}
