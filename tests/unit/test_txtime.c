/*
 * Timed-transmit wheel tests (txtime.h): create validation, then the wheel
 * against a reference model on random inputs. Send times are drawn as 0,
 * past, within the horizon, at its edge and beyond it; `now` moves in small
 * steps, in jumps of several revolutions and now and then backwards; the
 * release limit varies. Checked at every step: each packet released exactly
 * once, never before its time, "now" packets first and in the order taken,
 * wheel packets in time order (ties in the order taken), nothing due left
 * behind unless the limit stopped the call, refusals where the horizon or
 * the capacity says, and every counter equal to the model's. Then: error
 * below one tick when polled every tick, percentiles against the exact
 * values, drain and destroy giving every packet back.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/pool.h"
#include "dpflow/txtime.h"

static uint64_t rng_state;

static uint64_t rnd(void)
{
	uint64_t x = rng_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	rng_state = x;
	return x;
}

/* uniform in [lo, hi] */
static uint64_t rnd_in(uint64_t lo, uint64_t hi)
{
	return hi <= lo ? lo : lo + rnd() % (hi - lo + 1);
}

static struct dpflow_pool *pool_new(uint32_t n)
{
	struct dpflow_pool_params pp = {
	    .name = "txt", .n_slots = n, .data_room = 64};
	struct dpflow_error err = {0};
	struct dpflow_pool *p = dpflow_pool_create(&pp, &err);

	cr_assert_not_null(p, "pool: %s", err.msg);
	return p;
}

static struct dpflow_txsched *sched_new(struct dpflow_pool *pool,
					uint32_t slots, uint64_t tick,
					uint32_t cap, uint64_t start)
{
	struct dpflow_txsched_cfg c = {.pool = pool,
				       .slots = slots,
				       .tick_ns = tick,
				       .capacity = cap,
				       .start_ns = start};
	struct dpflow_error err = {0};
	struct dpflow_txsched *s = dpflow_txsched_create(&c, &err);

	cr_assert_not_null(s, "create: %s", err.msg);
	return s;
}

static void set_time(struct dpflow_pool *pool, uint32_t idx, uint64_t t)
{
	dpflow_pool_meta(pool, idx)->tx_time_ns = t;
}

Test(txtime, create_validates)
{
	struct dpflow_pool *pool = pool_new(64);
	struct dpflow_txsched_cfg c = {.pool = pool};
	struct dpflow_error err = {0};
	struct dpflow_txsched *s;
	static const struct {
		uint32_t slots;
		uint64_t tick;
		uint32_t cap;
		const char *field;
	} bad[] = {
	    {100, 0, 0, "slots"},
	    {32, 0, 0, "slots"},
	    {1u << 25, 0, 0, "slots"},
	    {0, 1000000001ull, 0, "tick_ns"},
	    {0, 0, (1u << 31) + 1, "capacity"},
	};

	cr_assert_null(dpflow_txsched_create(NULL, &err));
	cr_assert_str_eq(err.field, "pool");
	c.pool = NULL;
	cr_assert_null(dpflow_txsched_create(&c, &err));
	cr_assert_str_eq(err.field, "pool");
	c.pool = pool;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		c.slots = bad[i].slots;
		c.tick_ns = bad[i].tick;
		c.capacity = bad[i].cap;
		memset(&err, 0, sizeof(err));
		cr_assert_null(dpflow_txsched_create(&c, &err), "case %zu", i);
		cr_assert_str_eq(err.field, bad[i].field, "case %zu", i);
		cr_assert_gt(strlen(err.msg), 0);
	}
	/* defaults: 8192 slots of 1 us */
	memset(&c, 0, sizeof(c));
	c.pool = pool;
	c.start_ns = 5000;
	s = dpflow_txsched_create(&c, &err);
	cr_assert_not_null(s);
	cr_assert_eq(dpflow_txsched_horizon(s), (5 + 8192) * 1000ull);
	cr_assert_eq(dpflow_txsched_error_pct(s, 50), 0);
	dpflow_txsched_destroy(s);
	dpflow_txsched_destroy(NULL);
	dpflow_pool_destroy(pool);
}

Test(txtime, releases_at_time_in_order)
{
	struct dpflow_pool *pool = pool_new(64);
	struct dpflow_txsched *s = sched_new(pool, 64, 100, 64, 0);
	uint32_t idx[8], out[8];
	/* out of order, two in one tick, one tie */
	static const uint64_t t[8] = {550, 530, 530, 900, 101, 6399, 0, 10};

	cr_assert_eq(dpflow_pool_alloc_bulk(pool, idx, 8), 0);
	for (int i = 0; i < 8; i++)
		set_time(pool, idx[i], t[i]);
	cr_assert_eq(dpflow_txsched_enqueue(s, idx, 8), 8);
	cr_assert_eq(dpflow_txsched_pending(s), 8);
	/* 0 is "now"; 10 is in tick 0, due at 10 */
	cr_assert_eq(dpflow_txsched_release(s, 9, out, 8), 1);
	cr_assert_eq(out[0], idx[6]);
	cr_assert_eq(dpflow_txsched_release(s, 10, out, 8), 1);
	cr_assert_eq(out[0], idx[7]);
	cr_assert_eq(dpflow_txsched_release(s, 529, out, 8), 1);
	cr_assert_eq(out[0], idx[4]);
	cr_assert_eq(dpflow_txsched_release(s, 549, out, 8), 2);
	cr_assert_eq(out[0], idx[1]);
	cr_assert_eq(out[1], idx[2]);
	cr_assert_eq(dpflow_txsched_release(s, 6398, out, 1), 1);
	cr_assert_eq(out[0], idx[0]);
	cr_assert_eq(dpflow_txsched_release(s, 6398, out, 8), 1);
	cr_assert_eq(out[0], idx[3]);
	cr_assert_eq(dpflow_txsched_release(s, 6399, out, 8), 1);
	cr_assert_eq(out[0], idx[5]);
	cr_assert_eq(dpflow_txsched_pending(s), 0);
	dpflow_pool_free_bulk(pool, idx, 8);
	dpflow_txsched_destroy(s);
	dpflow_pool_destroy(pool);
}

Test(txtime, refuses_beyond_horizon_and_when_full)
{
	struct dpflow_pool *pool = pool_new(16);
	struct dpflow_txsched *s = sched_new(pool, 64, 10, 4, 1000);
	struct dpflow_txsched_stats st;
	uint32_t idx[6], out[8];
	uint64_t h = dpflow_txsched_horizon(s);

	cr_assert_eq(h, 1000 + 640);
	cr_assert_eq(dpflow_pool_alloc_bulk(pool, idx, 6), 0);
	set_time(pool, idx[0], h - 1);
	set_time(pool, idx[1], h);
	cr_assert_eq(dpflow_txsched_enqueue(s, idx, 2), 1);
	/* the horizon moves with the cursor */
	cr_assert_eq(dpflow_txsched_release(s, 1010, out, 8), 0);
	cr_assert_eq(dpflow_txsched_horizon(s), h + 10);
	cr_assert_eq(dpflow_txsched_enqueue(s, idx + 1, 1), 1);
	for (int i = 2; i < 6; i++)
		set_time(pool, idx[i], 1500);
	cr_assert_eq(dpflow_txsched_enqueue(s, idx + 2, 4), 2);
	dpflow_txsched_stats_get(s, &st);
	cr_assert_eq(st.too_far, 1);
	cr_assert_eq(st.full, 1);
	cr_assert_eq(st.enqueued, 4);
	cr_assert_eq(st.pending, 4);
	/* destroy frees what it holds */
	dpflow_pool_free_bulk(pool, idx + 4, 2);
	dpflow_txsched_destroy(s);
	cr_assert_eq(dpflow_pool_avail(pool), 16);
	cr_assert_eq(dpflow_pool_check(pool), 0);
	dpflow_pool_destroy(pool);
}

/* ---- the random model test --------------------------------------------- */

enum { NOT_HELD, IN_WHEEL, IN_READY };

struct model {
	struct dpflow_pool *pool;
	struct dpflow_txsched *s;
	uint32_t n_pool, slots, cap;
	uint64_t tick, last_now;
	uint8_t *state;	  /* per pool index */
	uint64_t *t;	  /* per pool index: its time */
	uint64_t *seq;	  /* per pool index: order taken */
	uint32_t *spare;  /* pool indices the test holds */
	uint32_t n_spare; /* of them */
	uint64_t next_seq;
	struct dpflow_txsched_stats st; /* expected */
};

static void model_init(struct model *m, uint32_t n_pool, uint32_t slots,
		       uint64_t tick, uint32_t cap, uint64_t start)
{
	memset(m, 0, sizeof(*m));
	m->n_pool = n_pool;
	m->slots = slots;
	m->tick = tick;
	m->cap = cap;
	m->last_now = start;
	m->pool = pool_new(n_pool);
	m->s = sched_new(m->pool, slots, tick, cap, start);
	m->state = calloc(n_pool, 1);
	m->t = calloc(n_pool, sizeof(*m->t));
	m->seq = calloc(n_pool, sizeof(*m->seq));
	m->spare = calloc(n_pool, sizeof(*m->spare));
	cr_assert(m->state && m->t && m->seq && m->spare);
	cr_assert_eq(dpflow_pool_alloc_bulk(m->pool, m->spare, n_pool), 0);
	m->n_spare = n_pool;
}

static void model_check_stats(const struct model *m)
{
	struct dpflow_txsched_stats st;

	dpflow_txsched_stats_get(m->s, &st);
	cr_assert_eq(st.enqueued, m->st.enqueued);
	cr_assert_eq(st.released, m->st.released);
	cr_assert_eq(st.immediate, m->st.immediate);
	cr_assert_eq(st.late, m->st.late);
	cr_assert_eq(st.too_far, m->st.too_far);
	cr_assert_eq(st.full, m->st.full);
	cr_assert_eq(st.pending, m->st.pending);
	cr_assert_eq(st.timed, m->st.timed);
	cr_assert_eq(st.err_sum_ns, m->st.err_sum_ns);
	cr_assert_eq(st.err_max_ns, m->st.err_max_ns);
	cr_assert_eq(st.enqueued, st.released + st.pending);
	cr_assert_eq(dpflow_txsched_pending(m->s), m->st.pending);
}

/* A send time of one of the classes the header names. */
static uint64_t pick_time(const struct model *m, uint64_t h)
{
	uint64_t span = m->tick * m->slots, now = m->last_now;
	unsigned c = (unsigned)(rnd() % 100);

	if (c < 5)
		return 0;
	if (c < 15) /* past, up to three horizons back */
		return rnd_in(now > 3 * span ? now - 3 * span : 1, now);
	if (c < 22) /* the horizon's edge */
		return h - 1 + rnd() % 2;
	if (c < 27) /* beyond it */
		return h + rnd_in(0, 3 * span);
	if (c < 35) /* in the current tick */
		return rnd_in(now, (now / m->tick + 1) * m->tick - 1);
	return rnd_in(now, h - 1);
}

static void model_enqueue(struct model *m)
{
	uint32_t idx[32];
	unsigned n = (unsigned)rnd_in(1, 32), want, got;
	uint64_t h = dpflow_txsched_horizon(m->s);
	uint64_t cur = h / m->tick - m->slots;

	cr_assert_eq(h % m->tick, 0);
	if (n > m->n_spare)
		n = m->n_spare;
	if (!n)
		return;
	for (unsigned i = 0; i < n; i++) {
		/* a random spare index */
		uint32_t j = (uint32_t)(rnd() % m->n_spare);

		idx[i] = m->spare[j];
		m->spare[j] = m->spare[--m->n_spare];
		set_time(m->pool, idx[i], pick_time(m, h));
	}
	/* the model: in order, stop at the first refusal */
	for (want = 0; want < n; want++) {
		uint64_t t = dpflow_pool_meta(m->pool, idx[want])->tx_time_ns;

		if (t && t >= h) {
			m->st.too_far++;
			break;
		}
		if (m->st.pending == m->cap) {
			m->st.full++;
			break;
		}
		m->t[idx[want]] = t;
		m->seq[idx[want]] = m->next_seq++;
		if (!t) {
			m->state[idx[want]] = IN_READY;
			m->st.immediate++;
		} else if (t / m->tick < cur) {
			m->state[idx[want]] = IN_READY;
			m->st.late++;
		} else {
			m->state[idx[want]] = IN_WHEEL;
		}
		m->st.pending++;
		m->st.enqueued++;
	}
	got = dpflow_txsched_enqueue(m->s, idx, n);
	cr_assert_eq(got, want, "enqueue took %u, model %u", got, want);
	for (unsigned i = got; i < n; i++)
		m->spare[m->n_spare++] = idx[i];
}

static void model_release(struct model *m)
{
	static uint32_t out[4096];
	uint64_t span = m->tick * m->slots, now, eff;
	unsigned c = (unsigned)(rnd() % 100), max, got;
	uint64_t last_t = 0, last_seq = 0;
	bool seen_wheel = false, seen_ready = false;

	if (c < 3) /* backwards: counts as the last now */
		now = m->last_now - (m->last_now > 50 ? rnd() % 50 : 0);
	else if (c < 6) /* a jump of up to three revolutions */
		now = m->last_now + rnd_in(0, 3 * span);
	else
		now = m->last_now + rnd_in(0, 2 * m->tick);
	max = rnd() % 4 ? (unsigned)rnd_in(1, 48) : 4096;
	eff = now > m->last_now ? now : m->last_now;
	got = dpflow_txsched_release(m->s, now, out, max);
	cr_assert_leq(got, max);
	for (unsigned i = 0; i < got; i++) {
		uint32_t x = out[i];

		cr_assert_lt(x, m->n_pool);
		cr_assert_neq(m->state[x], NOT_HELD,
			      "index %u released twice or never taken", x);
		cr_assert_leq(m->t[x], eff, "released before its time");
		if (m->state[x] == IN_READY) {
			cr_assert(!seen_wheel,
				  "a 'now' packet after the wheel's");
			cr_assert(!seen_ready || m->seq[x] > last_seq,
				  "'now' packets out of order");
			seen_ready = true;
		} else {
			uint64_t e = eff - m->t[x];

			cr_assert(
			    !seen_wheel || m->t[x] > last_t ||
				(m->t[x] == last_t && m->seq[x] > last_seq),
			    "wheel packets out of time order");
			seen_wheel = true;
			last_t = m->t[x];
			m->st.timed++;
			m->st.err_sum_ns += e;
			if (e > m->st.err_max_ns)
				m->st.err_max_ns = e;
		}
		last_seq = m->seq[x];
		m->state[x] = NOT_HELD;
		m->spare[m->n_spare++] = x;
	}
	m->st.released += got;
	m->st.pending -= got;
	/* what is left: nothing due unless the limit stopped the call, and
	 * never anything earlier than what left */
	for (uint32_t x = 0; x < m->n_pool; x++) {
		if (m->state[x] == NOT_HELD)
			continue;
		if (got < max)
			cr_assert(m->state[x] == IN_WHEEL && m->t[x] > eff,
				  "packet %u (t=%lu) due at %lu left behind", x,
				  (unsigned long)m->t[x], (unsigned long)eff);
		else if (m->state[x] == IN_WHEEL && seen_wheel)
			cr_assert_geq(m->t[x], last_t);
		else if (m->state[x] == IN_READY)
			cr_assert(!seen_wheel);
	}
	if (got < max)
		cr_assert_eq(dpflow_txsched_horizon(m->s),
			     (eff / m->tick + m->slots) * m->tick);
	m->last_now = eff;
}

/* Drain, check, free; returns the refusals for lack of room. */
static uint64_t model_finish(struct model *m)
{
	uint32_t out[64];
	unsigned got;

	while ((got = dpflow_txsched_drain(m->s, out, 64)) > 0) {
		for (unsigned i = 0; i < got; i++) {
			cr_assert_neq(m->state[out[i]], NOT_HELD);
			m->state[out[i]] = NOT_HELD;
			m->spare[m->n_spare++] = out[i];
		}
		m->st.released += got;
		m->st.pending -= got;
	}
	model_check_stats(m);
	/* every class of input was drawn */
	cr_assert_gt(m->st.immediate, 0);
	cr_assert_gt(m->st.late, 0);
	cr_assert_gt(m->st.too_far, 0);
	cr_assert_gt(m->st.timed, 0);
	cr_assert_eq(m->st.pending, 0);
	cr_assert_eq(m->n_spare, m->n_pool);
	dpflow_pool_free_bulk(m->pool, m->spare, m->n_spare);
	dpflow_txsched_destroy(m->s);
	cr_assert_eq(dpflow_pool_avail(m->pool), m->n_pool);
	cr_assert_eq(dpflow_pool_check(m->pool), 0);
	dpflow_pool_destroy(m->pool);
	free(m->state);
	free(m->t);
	free(m->seq);
	free(m->spare);
	return m->st.full;
}

static uint64_t model_run(uint64_t seed, uint32_t slots, uint64_t tick,
			  uint32_t cap, uint64_t start, unsigned steps)
{
	struct model m;

	rng_state = seed;
	model_init(&m, cap + 64, slots, tick, cap, start);
	for (unsigned i = 0; i < steps; i++) {
		if (rnd() % 2)
			model_enqueue(&m);
		else
			model_release(&m);
		model_check_stats(&m);
	}
	return model_finish(&m);
}

Test(txtime, model_small_wheel_many_revolutions)
{
	/* 64 slots of 7 ns: thousands of revolutions */
	model_run(0x9e3779b97f4a7c15ull, 64, 7, 256, 0, 40000);
}

Test(txtime, model_tight_capacity)
{
	cr_assert_gt(model_run(0x1234567ull, 128, 100, 16, 1000000, 40000), 0);
}

Test(txtime, model_various)
{
	static const struct {
		uint32_t slots;
		uint64_t tick, start;
		uint32_t cap;
	} cfg[] = {
	    {64, 1, 5, 512},
	    {256, 1000, 1ull << 60, 1024},
	    {1024, 3, 123456789, 300},
	    {4096, 1000000, 7, 2048},
	};

	for (size_t i = 0; i < sizeof(cfg) / sizeof(cfg[0]); i++)
		model_run(0xdeadbeefcafeull + i, cfg[i].slots, cfg[i].tick,
			  cfg[i].cap, cfg[i].start, 15000);
}

/* Polled at least once a tick, a packet filed ahead leaves within a tick. */
Test(txtime, error_below_one_tick_when_polled_every_tick)
{
	const uint64_t tick = 1000;
	struct dpflow_pool *pool = pool_new(2048);
	struct dpflow_txsched *s = sched_new(pool, 1024, tick, 2048, 0);
	uint32_t idx[2048], out[2048];
	uint64_t now = 0, sent = 0;

	rng_state = 42;
	cr_assert_eq(dpflow_pool_alloc_bulk(pool, idx, 2048), 0);
	for (int i = 0; i < 2048; i++)
		set_time(pool, idx[i], rnd_in(1, 1000 * tick - 1));
	cr_assert_eq(dpflow_txsched_enqueue(s, idx, 2048), 2048);
	while (sent < 2048) {
		unsigned got;

		now += rnd_in(1, tick);
		got = dpflow_txsched_release(s, now, out, 2048);
		for (unsigned i = 0; i < got; i++) {
			uint64_t t = dpflow_pool_meta(pool, out[i])->tx_time_ns;

			cr_assert_leq(t, now);
			cr_assert_lt(now - t, tick);
		}
		sent += got;
		cr_assert_lt(now, 2000 * tick);
	}
	cr_assert_lt(dpflow_txsched_error_pct(s, 100), tick);
	dpflow_pool_free_bulk(pool, idx, 2048);
	dpflow_txsched_destroy(s);
	dpflow_pool_destroy(pool);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

Test(txtime, percentiles_match_exact_values)
{
	enum { N = 1000 };
	struct dpflow_pool *pool = pool_new(N);
	struct dpflow_txsched *s = sched_new(pool, 8192, 1, N, 0);
	static const double pcts[] = {1, 50, 90, 99, 99.9, 100};
	uint32_t idx[N], out[N];
	uint64_t err[N];
	unsigned n = 0;

	rng_state = 7;
	cr_assert_eq(dpflow_pool_alloc_bulk(pool, idx, N), 0);
	/* packet i due at i + 1, released at a random later now */
	for (unsigned i = 0; i < N; i++)
		set_time(pool, idx[i], i + 1);
	cr_assert_eq(dpflow_txsched_enqueue(s, idx, N), N);
	for (uint64_t now = 1; n < N; now += rnd_in(1, 300)) {
		unsigned got = dpflow_txsched_release(s, now, out, N);

		for (unsigned i = 0; i < got; i++)
			err[n++] =
			    now - dpflow_pool_meta(pool, out[i])->tx_time_ns;
	}
	qsort(err, N, sizeof(err[0]), cmp_u64);
	for (size_t i = 0; i < sizeof(pcts) / sizeof(pcts[0]); i++) {
		uint64_t want = err[(size_t)(pcts[i] / 100 * N + 0.999999) - 1];
		uint64_t got = dpflow_txsched_error_pct(s, pcts[i]);

		cr_assert_geq(got, want, "p%g: %lu < %lu", pcts[i],
			      (unsigned long)got, (unsigned long)want);
		cr_assert_leq(got, want + want / 32 + 1, "p%g: %lu vs %lu",
			      pcts[i], (unsigned long)got, (unsigned long)want);
	}
	cr_assert_eq(dpflow_txsched_error_pct(s, 100), err[N - 1]);
	dpflow_pool_free_bulk(pool, idx, N);
	dpflow_txsched_destroy(s);
	dpflow_pool_destroy(pool);
}

Test(txtime, drain_keeps_the_cursor)
{
	struct dpflow_pool *pool = pool_new(8);
	struct dpflow_txsched *s = sched_new(pool, 64, 10, 8, 100);
	uint32_t idx[3], out[8];

	cr_assert_eq(dpflow_pool_alloc_bulk(pool, idx, 3), 0);
	set_time(pool, idx[0], 500);
	set_time(pool, idx[1], 0);
	set_time(pool, idx[2], 300);
	cr_assert_eq(dpflow_txsched_enqueue(s, idx, 3), 3);
	cr_assert_eq(dpflow_txsched_drain(s, out, 8), 3);
	cr_assert_eq(out[0], idx[1]);
	cr_assert_eq(out[1], idx[2]);
	cr_assert_eq(out[2], idx[0]);
	/* after a drain, a time ahead is still held until due */
	cr_assert_eq(dpflow_txsched_enqueue(s, idx + 2, 1), 1);
	cr_assert_eq(dpflow_txsched_release(s, 299, out, 8), 0);
	cr_assert_eq(dpflow_txsched_release(s, 300, out, 8), 1);
	dpflow_pool_free_bulk(pool, idx, 3);
	dpflow_txsched_destroy(s);
	dpflow_pool_destroy(pool);
}
