/*
 * Ring tests: create validation, bulk/burst semantics, wrap-around, counts,
 * in every producer/consumer flag combination, then threaded stress tests
 * (SPSC in order; 2 producers x 2 consumers, every index exactly once and
 * each producer's indices in order at each consumer).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/ring.h"

static const unsigned all_flags[] = {
    0,
    DPFLOW_RING_F_SP_ENQ,
    DPFLOW_RING_F_SC_DEQ,
    DPFLOW_RING_F_SPSC,
};

static struct dpflow_ring *ring_new(uint32_t size, unsigned flags)
{
	struct dpflow_error err = {0};
	struct dpflow_ring *r = dpflow_ring_create("t", size, flags, &err);

	cr_assert_not_null(r, "create(%u, 0x%x): %s", size, flags, err.msg);
	return r;
}

Test(ring, create_reports_name_and_capacity)
{
	struct dpflow_ring *r = ring_new(64, 0);

	cr_assert_str_eq(dpflow_ring_name(r), "t");
	cr_assert_eq(dpflow_ring_capacity(r), 64);
	cr_assert_eq(dpflow_ring_count(r), 0);
	cr_assert_eq(dpflow_ring_free_count(r), 64);
	dpflow_ring_destroy(r);
}

Test(ring, create_null_and_long_name)
{
	char longname[100];
	struct dpflow_ring *r = dpflow_ring_create(NULL, 2, 0, NULL);

	cr_assert_not_null(r);
	cr_assert_str_eq(dpflow_ring_name(r), "");
	dpflow_ring_destroy(r);

	memset(longname, 'x', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	r = dpflow_ring_create(longname, 2, 0, NULL);
	cr_assert_not_null(r);
	cr_assert_eq(strlen(dpflow_ring_name(r)), DPFLOW_RING_NAME_MAX - 1);
	dpflow_ring_destroy(r);
	dpflow_ring_destroy(NULL);
}

Test(ring, bad_sizes_rejected)
{
	static const struct {
		uint32_t size;
		const char *text;
	} bad[] = {
	    {0, "0"},
	    {1, "1"},
	    {3, "3"},
	    {100, "100"},
	    {(1u << 30) + 1, "1073741825"},
	    {1u << 31, "2147483648"},
	    {UINT32_MAX, "4294967295"},
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct dpflow_error err = {0};
		struct dpflow_ring *r =
		    dpflow_ring_create("bad", bad[i].size, 0, &err);

		cr_assert_null(r, "size %u accepted", bad[i].size);
		cr_assert_eq(err.code, EINVAL);
		cr_assert_str_eq(err.field, "size");
		cr_assert_not_null(strstr(err.msg, bad[i].text),
				   "message '%s' lacks '%s'", err.msg,
				   bad[i].text);
	}
	/* NULL error object: still rejected, no crash. */
	cr_assert_null(dpflow_ring_create("bad", 3, 0, NULL));
}

Test(ring, bounds_accepted)
{
	struct dpflow_ring *r = ring_new(2, 0);

	cr_assert_eq(dpflow_ring_capacity(r), 2);
	dpflow_ring_destroy(r);
}

Test(ring, bad_flags_rejected)
{
	struct dpflow_error err = {0};

	cr_assert_null(dpflow_ring_create("f", 8, 0x10, &err));
	cr_assert_eq(err.code, EINVAL);
	cr_assert_str_eq(err.field, "flags");
	cr_assert_not_null(strstr(err.msg, "0x10"), "%s", err.msg);
}

Test(ring, fifo_order_all_flags)
{
	for (size_t f = 0; f < 4; f++) {
		struct dpflow_ring *r = ring_new(16, all_flags[f]);
		uint32_t in[10], out[10];

		for (uint32_t i = 0; i < 10; i++)
			in[i] = 1000 + i;
		cr_assert_eq(dpflow_ring_enqueue_bulk(r, in, 4), 4);
		cr_assert_eq(dpflow_ring_enqueue_burst(r, in + 4, 6), 6);
		cr_assert_eq(dpflow_ring_count(r), 10);
		cr_assert_eq(dpflow_ring_free_count(r), 6);
		cr_assert_eq(dpflow_ring_dequeue_bulk(r, out, 3), 3);
		cr_assert_eq(dpflow_ring_dequeue_burst(r, out + 3, 7), 7);
		cr_assert_arr_eq(in, out, sizeof(in), "flags 0x%x",
				 all_flags[f]);
		cr_assert_eq(dpflow_ring_count(r), 0);
		dpflow_ring_destroy(r);
	}
}

Test(ring, bulk_all_or_nothing)
{
	for (size_t f = 0; f < 4; f++) {
		struct dpflow_ring *r = ring_new(8, all_flags[f]);
		uint32_t in[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
		uint32_t out[9];

		/* More than the capacity: nothing moves. */
		cr_assert_eq(dpflow_ring_enqueue_bulk(r, in, 9), 0);
		cr_assert_eq(dpflow_ring_count(r), 0);
		cr_assert_eq(dpflow_ring_enqueue_bulk(r, in, 5), 5);
		/* 3 free, ask for 4: nothing moves. */
		cr_assert_eq(dpflow_ring_enqueue_bulk(r, in, 4), 0);
		cr_assert_eq(dpflow_ring_count(r), 5);
		/* Exactly the free space fills it. */
		cr_assert_eq(dpflow_ring_enqueue_bulk(r, in + 5, 3), 3);
		cr_assert_eq(dpflow_ring_free_count(r), 0);
		cr_assert_eq(dpflow_ring_enqueue_bulk(r, in, 1), 0);

		memset(out, 0xff, sizeof(out));
		cr_assert_eq(dpflow_ring_dequeue_bulk(r, out, 9), 0);
		cr_assert_eq(out[0], 0xffffffffu, "bulk failure wrote out");
		cr_assert_eq(dpflow_ring_count(r), 8);
		cr_assert_eq(dpflow_ring_dequeue_bulk(r, out, 8), 8);
		cr_assert_arr_eq(out, in, 8 * sizeof(uint32_t));
		cr_assert_eq(dpflow_ring_dequeue_bulk(r, out, 1), 0);
		/* n == 0 moves nothing and reports 0. */
		cr_assert_eq(dpflow_ring_enqueue_bulk(r, in, 0), 0);
		cr_assert_eq(dpflow_ring_dequeue_burst(r, out, 0), 0);
		dpflow_ring_destroy(r);
	}
}

Test(ring, burst_partial)
{
	for (size_t f = 0; f < 4; f++) {
		struct dpflow_ring *r = ring_new(8, all_flags[f]);
		uint32_t in[12], out[12];

		for (uint32_t i = 0; i < 12; i++)
			in[i] = i * 7;
		cr_assert_eq(dpflow_ring_enqueue_burst(r, in, 5), 5);
		/* Only 3 fit. */
		cr_assert_eq(dpflow_ring_enqueue_burst(r, in + 5, 7), 3);
		cr_assert_eq(dpflow_ring_count(r), 8);
		cr_assert_eq(dpflow_ring_enqueue_burst(r, in, 1), 0);
		/* Only 8 there. */
		cr_assert_eq(dpflow_ring_dequeue_burst(r, out, 12), 8);
		cr_assert_arr_eq(out, in, 8 * sizeof(uint32_t));
		cr_assert_eq(dpflow_ring_dequeue_burst(r, out, 12), 0);
		dpflow_ring_destroy(r);
	}
}

/* Push the positions round the ring many times with odd-sized moves. */
Test(ring, wrap_around)
{
	for (size_t f = 0; f < 4; f++) {
		struct dpflow_ring *r = ring_new(16, all_flags[f]);
		uint32_t next_in = 0, next_out = 0;

		for (unsigned round = 0; round < 500; round++) {
			uint32_t buf[16];
			unsigned n = 1 + round % 13, got;

			for (unsigned i = 0; i < n; i++)
				buf[i] = next_in + i;
			got = dpflow_ring_enqueue_burst(r, buf, n);
			next_in += got;
			cr_assert_eq(dpflow_ring_count(r), next_in - next_out);
			got = dpflow_ring_dequeue_burst(r, buf, 1 + round % 7);
			for (unsigned i = 0; i < got; i++)
				cr_assert_eq(buf[i], next_out + i,
					     "round %u: got %u want %u", round,
					     buf[i], next_out + i);
			next_out += got;
			cr_assert_eq(dpflow_ring_count(r) +
					 dpflow_ring_free_count(r),
				     16);
		}
		cr_assert_gt(next_out, 16 * 10, "wrapped only %u", next_out);
		dpflow_ring_destroy(r);
	}
}

/* A bulk move that straddles the end of the slot array. */
Test(ring, bulk_across_end)
{
	struct dpflow_ring *r = ring_new(8, DPFLOW_RING_F_SPSC);
	uint32_t in[8] = {10, 11, 12, 13, 14, 15, 16, 17}, out[8];

	cr_assert_eq(dpflow_ring_enqueue_bulk(r, in, 6), 6);
	cr_assert_eq(dpflow_ring_dequeue_bulk(r, out, 6), 6);
	/* Positions 6..13: two slots at the end, six at the start. */
	cr_assert_eq(dpflow_ring_enqueue_bulk(r, in, 8), 8);
	cr_assert_eq(dpflow_ring_dequeue_bulk(r, out, 8), 8);
	cr_assert_arr_eq(out, in, sizeof(in));
	dpflow_ring_destroy(r);
}

/* ---- threaded stress ---- */

/*
 * 1M indices through a small ring in small, uneven moves: many reservations
 * overlap, which is what catches a tail published out of order.
 */
#define STRESS_N      (1u << 20)
#define STRESS_RING   64
#define STRESS_BATCH  8
#define STRESS_ROUNDS 3

struct stress {
	struct dpflow_ring *r;
	unsigned n_prod;
	unsigned n_cons;
	atomic_uint consumed;
	atomic_uchar *seen;
	atomic_uint errors;
};

struct worker {
	struct stress *s;
	unsigned id;
};

static void *producer(void *arg)
{
	struct worker *w = arg;
	struct stress *s = w->s;
	const uint32_t per = STRESS_N / s->n_prod;
	uint32_t next = w->id * per, end = next + per;
	uint32_t buf[STRESS_BATCH];
	unsigned round = 0;

	while (next < end) {
		unsigned n = 1 + round++ % STRESS_BATCH, sent;

		if (n > end - next)
			n = end - next;
		for (unsigned i = 0; i < n; i++)
			buf[i] = next + i;
		sent = round & 1 ? dpflow_ring_enqueue_burst(s->r, buf, n)
				 : dpflow_ring_enqueue_bulk(s->r, buf, n);
		if (sent == 0)
			sched_yield();
		next += sent;
	}
	return NULL;
}

static void *consumer(void *arg)
{
	struct worker *w = arg;
	struct stress *s = w->s;
	const uint32_t per = STRESS_N / s->n_prod;
	uint32_t last[8];
	uint32_t buf[STRESS_BATCH];
	unsigned round = 0;

	for (unsigned p = 0; p < s->n_prod; p++)
		last[p] = UINT32_MAX;
	while (atomic_load(&s->consumed) < STRESS_N) {
		unsigned want = 1 + round++ % STRESS_BATCH;
		unsigned n = round & 1
				 ? dpflow_ring_dequeue_burst(s->r, buf, want)
				 : dpflow_ring_dequeue_bulk(s->r, buf, want);

		if (n == 0) {
			sched_yield();
			continue;
		}
		for (unsigned i = 0; i < n; i++) {
			uint32_t v = buf[i], p = v / per;

			if (v >= STRESS_N ||
			    atomic_fetch_add(&s->seen[v], 1) != 0) {
				atomic_fetch_add(&s->errors, 1);
				continue;
			}
			/* One producer's indices arrive in its order. */
			if (last[p] != UINT32_MAX && v <= last[p])
				atomic_fetch_add(&s->errors, 1);
			last[p] = v;
		}
		atomic_fetch_add(&s->consumed, n);
	}
	return NULL;
}

static void run_stress(unsigned flags, unsigned n_prod, unsigned n_cons)
{
	struct stress s = {.n_prod = n_prod, .n_cons = n_cons};
	pthread_t th[8];
	struct worker w[8];
	unsigned t = 0, missing = 0;

	s.r = ring_new(STRESS_RING, flags);
	s.seen = calloc(STRESS_N, sizeof(*s.seen));
	cr_assert_not_null(s.seen);
	atomic_init(&s.consumed, 0);
	atomic_init(&s.errors, 0);

	for (unsigned i = 0; i < n_cons; i++, t++) {
		w[t] = (struct worker){&s, i};
		cr_assert_eq(pthread_create(&th[t], NULL, consumer, &w[t]), 0);
	}
	for (unsigned i = 0; i < n_prod; i++, t++) {
		w[t] = (struct worker){&s, i};
		cr_assert_eq(pthread_create(&th[t], NULL, producer, &w[t]), 0);
	}
	for (unsigned i = 0; i < t; i++)
		pthread_join(th[i], NULL);

	for (uint32_t i = 0; i < STRESS_N; i++)
		missing += atomic_load(&s.seen[i]) != 1;
	cr_assert_eq(atomic_load(&s.errors), 0, "duplicates or disorder");
	cr_assert_eq(missing, 0, "%u indices not seen exactly once", missing);
	cr_assert_eq(atomic_load(&s.consumed), STRESS_N);
	cr_assert_eq(dpflow_ring_count(s.r), 0);
	free(s.seen);
	dpflow_ring_destroy(s.r);
}

Test(ring, stress_spsc, .timeout = 60)
{
	run_stress(DPFLOW_RING_F_SPSC, 1, 1);
}

Test(ring, stress_mpmc_2x2, .timeout = 60)
{
	for (int i = 0; i < STRESS_ROUNDS; i++)
		run_stress(0, 2, 2);
}

Test(ring, stress_mpsc_2x1, .timeout = 60)
{
	for (int i = 0; i < STRESS_ROUNDS; i++)
		run_stress(DPFLOW_RING_F_SC_DEQ, 2, 1);
}

Test(ring, stress_spmc_1x2, .timeout = 60)
{
	for (int i = 0; i < STRESS_ROUNDS; i++)
		run_stress(DPFLOW_RING_F_SP_ENQ, 1, 2);
}
