/*
 * Pool tests: geometry, alloc/free in bulk and burst, exhaustion, metadata
 * reset, slot addresses, the consistency check, providers, parameter
 * validation, and alloc/free from two threads at once.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/log.h"
#include "dpflow/pool.h"

/* Error logs from the consistency check, captured instead of printed. */
static char last_log[512];
static unsigned n_logs;

static void capture_sink(enum dpflow_log_level level, const char *module,
			 const char *msg, void *arg)
{
	(void)level;
	(void)module;
	(void)arg;
	n_logs++;
	snprintf(last_log, sizeof(last_log), "%s", msg);
}

static void capture_logs(void)
{
	n_logs = 0;
	last_log[0] = '\0';
	dpflow_log_set_sink(capture_sink, NULL);
}

static struct dpflow_pool *pool_new(uint32_t n_slots, uint16_t headroom,
				    uint16_t data_room)
{
	struct dpflow_pool_params p = {
	    .name = "test",
	    .n_slots = n_slots,
	    .headroom = headroom,
	    .data_room = data_room,
	};
	struct dpflow_error err = {0};
	struct dpflow_pool *pool = dpflow_pool_create(&p, &err);

	cr_assert_not_null(pool, "pool_create: %s", err.msg);
	return pool;
}

Test(pool, defaults_and_stride)
{
	struct dpflow_pool *pool = pool_new(10, 0, 0);

	cr_assert_eq(pool->headroom, DPFLOW_POOL_HEADROOM_DEFAULT);
	cr_assert_eq(pool->data_room, DPFLOW_POOL_DATA_ROOM_DEFAULT);
	/* 192 + 128 + 2048 = 2368 = 37 * 64 */
	cr_assert_eq(pool->stride, 2368);
	cr_assert_eq(pool->n_slots, 10);
	cr_assert_eq(dpflow_pool_region_size(pool), 10u * 2368);
	cr_assert_str_eq(dpflow_pool_name(pool), "test");
	cr_assert_eq(dpflow_pool_avail(pool), 10);
	dpflow_pool_destroy(pool);
}

Test(pool, stride_rounds_up_to_cache_line)
{
	static const struct {
		uint16_t headroom, data_room;
		uint32_t stride;
	} cases[] = {
	    {100, 1000, 1344}, /* 1292 -> 1344 */
	    {64, 64, 320},     /* exact */
	    {1, 64, 320},      /* 257 -> 320 */
	    {65, 64, 384},     /* 321 -> 384 */
	    {256, 9000, 9472}, /* 9448 -> 9472 */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct dpflow_pool *pool =
		    pool_new(3, cases[i].headroom, cases[i].data_room);

		cr_assert_eq(pool->stride, cases[i].stride,
			     "headroom %u data_room %u: stride %u",
			     cases[i].headroom, cases[i].data_room,
			     pool->stride);
		cr_assert_eq(pool->stride % 64, 0);
		cr_assert_geq(pool->stride, sizeof(struct dpflow_pkt_meta) +
						cases[i].headroom +
						cases[i].data_room);
		dpflow_pool_destroy(pool);
	}
}

Test(pool, slots_distinct_aligned_and_in_region)
{
	enum { N = 100 };
	struct dpflow_pool *pool = pool_new(N, 0, 0);
	uint32_t idx[N];
	uint8_t *end;

	cr_assert_eq(dpflow_pool_alloc_bulk(pool, idx, N), 0);
	end = pool->base + dpflow_pool_region_size(pool);
	for (unsigned i = 0; i < N; i++) {
		uint8_t *m = (uint8_t *)dpflow_pool_meta(pool, idx[i]);

		cr_assert_lt(idx[i], N);
		cr_assert_eq((uintptr_t)m % 64, 0, "slot %u at %p", idx[i],
			     (void *)m);
		cr_assert_eq((uintptr_t)dpflow_pool_buf(pool, idx[i]) % 64, 0);
		cr_assert_geq(m, pool->base);
		cr_assert_leq(m + pool->stride, end);
		for (unsigned j = 0; j < i; j++)
			cr_assert_neq(idx[i], idx[j], "index %u twice", idx[i]);
	}
	cr_assert_eq(dpflow_pool_avail(pool), 0);
	/* Every byte of every slot is ours: write it all. */
	memset(pool->base, 0xa5, dpflow_pool_region_size(pool));
	dpflow_pool_free_bulk(pool, idx, N);
	cr_assert_eq(dpflow_pool_avail(pool), N);
	cr_assert_eq(dpflow_pool_check(pool), 0);
	dpflow_pool_destroy(pool);
}

Test(pool, region_starts_zeroed)
{
	struct dpflow_pool *pool = pool_new(8, 0, 0);
	size_t size = dpflow_pool_region_size(pool);

	for (size_t i = 0; i < size; i++)
		cr_assert_eq(pool->base[i], 0, "byte %zu", i);
	dpflow_pool_destroy(pool);
}

/* Over 2 MiB: the huge page path, or its fallback. */
Test(pool, large_region_usable)
{
	struct dpflow_pool *pool = pool_new(4096, 0, 0);
	size_t size = dpflow_pool_region_size(pool);
	uint32_t idx[64];

	cr_assert_geq(size, 2u << 20);
	cr_assert_eq(pool->base[size - 1], 0);
	pool->base[0] = 1;
	pool->base[size - 1] = 1;
	cr_assert_eq(dpflow_pool_alloc_bulk(pool, idx, 64), 0);
	cr_assert_eq(dpflow_pool_avail(pool), 4096 - 64);
	dpflow_pool_free_bulk(pool, idx, 64);
	cr_assert_eq(dpflow_pool_check(pool), 0);
	dpflow_pool_destroy(pool);
}

Test(pool, meta_reset_on_alloc)
{
	struct dpflow_pool *pool = pool_new(4, 100, 0);
	uint32_t idx[4];

	cr_assert_eq(dpflow_pool_alloc_bulk(pool, idx, 4), 0);
	for (unsigned i = 0; i < 4; i++) {
		struct dpflow_pkt_meta *m = dpflow_pool_meta(pool, idx[i]);

		/* Dirty every line-0 field the header promises to reset. */
		memset(m, 0xee, sizeof(*m));
	}
	dpflow_pool_free_bulk(pool, idx, 4);
	cr_assert_eq(dpflow_pool_alloc_burst(pool, idx, 4), 4);
	for (unsigned i = 0; i < 4; i++) {
		struct dpflow_pkt_meta *m = dpflow_pool_meta(pool, idx[i]);

		cr_assert_eq(m->data_off, 100);
		cr_assert_eq(m->data_len, 0);
		cr_assert_eq(m->port, 0);
		cr_assert_eq(m->queue, 0);
		cr_assert_eq(m->drop, 0);
		cr_assert_eq(m->flags, 0);
		cr_assert_eq(m->tun_type, 0);
		cr_assert_eq(m->tun_id, 0);
		cr_assert_eq(m->tun_off, 0);
		cr_assert_eq(m->tun_hdr_len, 0);
		cr_assert_eq(m->rx_ts_ns, 0);
		cr_assert_eq(m->tx_time_ns, 0);
		cr_assert_eq(dpflow_pkt_data(pool, idx[i]),
			     dpflow_pool_buf(pool, idx[i]) + 100);
		cr_assert_eq(dpflow_pkt_tailroom(pool, idx[i]),
			     DPFLOW_POOL_DATA_ROOM_DEFAULT);
	}
	dpflow_pool_destroy(pool);
}

Test(pool, exhaustion_changes_nothing)
{
	struct dpflow_pool *pool = pool_new(8, 0, 0);
	uint32_t idx[9], more[9];

	memset(idx, 0xff, sizeof(idx));
	cr_assert_eq(dpflow_pool_alloc_bulk(pool, idx, 9), -ENOBUFS);
	cr_assert_eq(idx[0], UINT32_MAX, "failed alloc wrote indices");
	cr_assert_eq(dpflow_pool_avail(pool), 8);

	cr_assert_eq(dpflow_pool_alloc_bulk(pool, idx, 5), 0);
	cr_assert_eq(dpflow_pool_alloc_bulk(pool, more, 4), -ENOBUFS);
	cr_assert_eq(dpflow_pool_avail(pool), 3);
	cr_assert_eq(dpflow_pool_alloc_bulk(pool, more, 3), 0);
	cr_assert_eq(dpflow_pool_alloc_bulk(pool, more + 3, 1), -ENOBUFS);
	cr_assert_eq(dpflow_pool_alloc_burst(pool, more + 3, 1), 0);
	cr_assert_eq(dpflow_pool_avail(pool), 0);

	dpflow_pool_free_bulk(pool, idx, 5);
	dpflow_pool_free_bulk(pool, more, 3);
	cr_assert_eq(dpflow_pool_avail(pool), 8);
	cr_assert_eq(dpflow_pool_check(pool), 0);
	/* n == 0 is a successful no-op. */
	cr_assert_eq(dpflow_pool_alloc_bulk(pool, idx, 0), 0);
	cr_assert_eq(dpflow_pool_avail(pool), 8);
	dpflow_pool_destroy(pool);
}

Test(pool, alloc_burst_partial)
{
	struct dpflow_pool *pool = pool_new(10, 0, 0);
	uint32_t idx[16], rest[16];

	cr_assert_eq(dpflow_pool_alloc_burst(pool, idx, 7), 7);
	cr_assert_eq(dpflow_pool_alloc_burst(pool, rest, 16), 3);
	cr_assert_eq(dpflow_pool_alloc_burst(pool, rest + 3, 16), 0);
	for (unsigned i = 0; i < 3; i++)
		cr_assert_eq(dpflow_pool_meta(pool, rest[i])->data_off,
			     DPFLOW_POOL_HEADROOM_DEFAULT);
	dpflow_pool_free_bulk(pool, idx, 7);
	dpflow_pool_free_bulk(pool, rest, 3);
	cr_assert_eq(dpflow_pool_avail(pool), 10);
	cr_assert_eq(dpflow_pool_check(pool), 0);
	dpflow_pool_destroy(pool);
}

/* 6 slots -> a free ring of 8: room for the duplicate to go in. */
Test(pool, check_detects_double_free)
{
	struct dpflow_pool *pool = pool_new(6, 0, 0);
	uint32_t idx[2];

	cr_assert_eq(dpflow_pool_alloc_bulk(pool, idx, 2), 0);
	cr_assert_eq(dpflow_pool_check(pool), 0);
	dpflow_pool_free_bulk(pool, idx, 1);
	dpflow_pool_free_bulk(pool, idx, 1);
	cr_assert_eq(dpflow_pool_avail(pool), 6);
	capture_logs();
	cr_assert_eq(dpflow_pool_check(pool), -EINVAL);
	cr_assert_eq(n_logs, 1);
	cr_assert_not_null(strstr(last_log, "free twice"), "%s", last_log);
	/* The check leaves the free ring as it found it. */
	cr_assert_eq(dpflow_pool_avail(pool), 6);
	dpflow_pool_destroy(pool);
}

/* 8 slots -> a ring of 8: the duplicate does not fit and is counted. */
Test(pool, check_detects_double_free_into_full_ring)
{
	struct dpflow_pool *pool = pool_new(8, 0, 0);
	uint32_t idx[1];

	cr_assert_eq(dpflow_pool_alloc_bulk(pool, idx, 1), 0);
	dpflow_pool_free_bulk(pool, idx, 1);
	cr_assert_eq(dpflow_pool_check(pool), 0);
	capture_logs();
	dpflow_pool_free_bulk(pool, idx, 1);
	cr_assert_eq(n_logs, 1, "the lost free is logged");
	cr_assert_eq(dpflow_pool_avail(pool), 8);
	cr_assert_eq(dpflow_pool_check(pool), -EINVAL);
	cr_assert_not_null(strstr(last_log, "ring full"), "%s", last_log);
	dpflow_pool_destroy(pool);
}

Test(pool, check_detects_foreign_index)
{
	struct dpflow_pool *pool = pool_new(6, 0, 0);
	uint32_t bad = 6;

	dpflow_pool_free_bulk(pool, &bad, 1);
	capture_logs();
	cr_assert_eq(dpflow_pool_check(pool), -EINVAL);
	cr_assert_not_null(strstr(last_log, "index 6"), "%s", last_log);
	dpflow_pool_destroy(pool);
}

static void expect_invalid(const struct dpflow_pool_params *p,
			   const char *field, const char *text)
{
	struct dpflow_error err = {0};

	cr_assert_null(dpflow_pool_create(p, &err), "accepted (%s)", field);
	cr_assert_eq(err.code, EINVAL);
	cr_assert_str_eq(err.field, field);
	cr_assert_not_null(strstr(err.msg, text), "message '%s' lacks '%s'",
			   err.msg, text);
}

static void *never_alloc(size_t size, size_t align, void *arg)
{
	(void)size;
	(void)align;
	(void)arg;
	return NULL;
}

Test(pool, invalid_params_rejected)
{
	struct dpflow_pool_params p = {.name = "bad", .n_slots = 8};
	struct dpflow_mem_provider half = {.name = "half",
					   .alloc = never_alloc};

	expect_invalid(NULL, "params", "NULL");

	p.n_slots = 0;
	expect_invalid(&p, "n_slots", "n_slots 0 ");
	p.n_slots = (1u << 30) + 1;
	expect_invalid(&p, "n_slots", "n_slots 1073741825");

	p.n_slots = 8;
	p.data_room = 63;
	expect_invalid(&p, "data_room", "data_room 63");
	p.data_room = 65000;
	p.headroom = 1000;
	expect_invalid(&p, "data_room", "data_room 65000");

	p.data_room = 0;
	p.headroom = 0;
	p.provider = &half;
	expect_invalid(&p, "provider", "'half'");

	/* NULL error object: still rejected. */
	p.provider = NULL;
	p.n_slots = 0;
	cr_assert_null(dpflow_pool_create(&p, NULL));
}

Test(pool, largest_valid_rooms_accepted)
{
	/* headroom + data_room == 65535 is the limit that still fits. */
	struct dpflow_pool *pool = pool_new(2, 535, 65000);

	cr_assert_eq(pool->stride, 65728); /* 192 + 65535 -> 65728 */
	dpflow_pool_destroy(pool);
}

struct counting {
	unsigned allocs, frees;
	size_t size;
	void *p;
};

static void *counting_alloc(size_t size, size_t align, void *arg)
{
	struct counting *c = arg;
	size_t rounded = (size + align - 1) / align * align;

	c->allocs++;
	c->size = size;
	c->p = aligned_alloc(align, rounded);
	if (c->p)
		memset(c->p, 0, rounded);
	return c->p;
}

static void counting_free(void *p, size_t size, void *arg)
{
	struct counting *c = arg;

	cr_assert_eq(p, c->p);
	cr_assert_eq(size, c->size);
	c->frees++;
	free(p);
}

Test(pool, custom_provider)
{
	struct counting c = {0};
	struct dpflow_mem_provider prov = {
	    .name = "counting",
	    .alloc = counting_alloc,
	    .free = counting_free,
	    .arg = &c,
	};
	struct dpflow_pool_params p = {.n_slots = 5, .provider = &prov};
	struct dpflow_error err = {0};
	struct dpflow_pool *pool = dpflow_pool_create(&p, &err);

	cr_assert_not_null(pool, "%s", err.msg);
	cr_assert_eq(c.allocs, 1);
	cr_assert_eq(pool->base, c.p);
	cr_assert_eq(c.size, 5u * pool->stride);
	cr_assert_str_eq(dpflow_pool_name(pool), "");
	dpflow_pool_destroy(pool);
	cr_assert_eq(c.frees, 1);
	dpflow_pool_destroy(NULL);
}

Test(pool, provider_failure_reported)
{
	struct dpflow_mem_provider prov = {
	    .name = "empty",
	    .alloc = never_alloc,
	    .free = counting_free,
	};
	struct dpflow_pool_params p = {.n_slots = 5, .provider = &prov};
	struct dpflow_error err = {0};

	cr_assert_null(dpflow_pool_create(&p, &err));
	cr_assert_eq(err.code, ENOMEM);
	cr_assert_not_null(strstr(err.msg, "empty"), "%s", err.msg);
}

/* ---- two threads allocating and freeing at once ---- */

#define MT_SLOTS  256
#define MT_ROUNDS 20000

struct mt {
	struct dpflow_pool *pool;
	unsigned errors;
};

static void *mt_worker(void *arg)
{
	struct mt *t = arg;
	uint32_t idx[16];

	for (unsigned r = 0; r < MT_ROUNDS; r++) {
		unsigned n = dpflow_pool_alloc_burst(t->pool, idx, 1 + r % 16);

		/* Stamp the slots we own; a shared slot shows up here. */
		for (unsigned i = 0; i < n; i++)
			dpflow_pool_meta(t->pool, idx[i])->reg[0] =
			    (uint32_t)(uintptr_t)t;
		for (unsigned i = 0; i < n; i++)
			if (dpflow_pool_meta(t->pool, idx[i])->reg[0] !=
			    (uint32_t)(uintptr_t)t)
				t->errors++;
		dpflow_pool_free_bulk(t->pool, idx, n);
	}
	return NULL;
}

/* Two threads allocating and freeing in a pool of @slots at once: no
 * slot is handed to both, and all are free when they end. */
static void two_threads(uint32_t slots)
{
	struct dpflow_pool *pool = pool_new(slots, 0, 256);
	struct mt t[2] = {{pool, 0}, {pool, 0}};
	pthread_t th[2];

	for (int i = 0; i < 2; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, mt_worker, &t[i]), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	cr_assert_eq(t[0].errors + t[1].errors, 0);
	cr_assert_eq(dpflow_pool_avail(pool), slots);
	cr_assert_eq(dpflow_pool_check(pool), 0);
	dpflow_pool_destroy(pool);
}

Test(pool, concurrent_alloc_free, .timeout = 60)
{
	two_threads(MT_SLOTS);
}

/* ---- per-thread caches (pools of 1024 slots or more) ---- */

/* The slots freed last are the ones taken next (still in cache). */
Test(pool, thread_cache_reuses_the_last_freed_slots)
{
	struct dpflow_pool *pool = pool_new(8192, 0, 0);
	uint32_t a[8], b[8], x[32];

	cr_assert_eq(dpflow_pool_alloc_bulk(pool, x, 32), 0);
	cr_assert_eq(dpflow_pool_alloc_bulk(pool, a, 8), 0);
	dpflow_pool_free_bulk(pool, a, 8);
	cr_assert_eq(dpflow_pool_alloc_bulk(pool, b, 8), 0);
	cr_assert_eq(memcmp(a, b, sizeof(a)), 0, "other slots than freed");
	dpflow_pool_free_bulk(pool, b, 8);
	dpflow_pool_free_bulk(pool, x, 32);
	cr_assert_eq(dpflow_pool_avail(pool), 8192, "cached slots counted");
	cr_assert_eq(dpflow_pool_check(pool), 0);
	dpflow_pool_destroy(pool);
}

static void *cache_user(void *arg)
{
	struct dpflow_pool *pool = arg;
	uint32_t idx[32];

	for (unsigned r = 0; r < 100; r++) {
		cr_assert_eq(dpflow_pool_alloc_bulk(pool, idx, 32), 0);
		dpflow_pool_free_bulk(pool, idx, 32);
	}
	return NULL;
}

/* A thread's cache goes back to the ring when the thread ends: all the
 * slots can then be taken at once (past any cache). */
Test(pool, thread_cache_returns_when_the_thread_ends)
{
	struct dpflow_pool *pool = pool_new(8192, 0, 0);
	static uint32_t all[8192];
	pthread_t th;

	cr_assert_eq(pthread_create(&th, NULL, cache_user, pool), 0);
	pthread_join(th, NULL);
	cr_assert_eq(dpflow_pool_avail(pool), 8192);
	cr_assert_eq(dpflow_pool_alloc_bulk(pool, all, 8192), 0,
		     "slots left in the ended thread's cache");
	dpflow_pool_free_bulk(pool, all, 8192);
	dpflow_pool_destroy(pool);
}

struct two_pools {
	struct dpflow_pool *a, *b;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int step;
};

static void two_step_wait(struct two_pools *t, int step)
{
	pthread_mutex_lock(&t->mu);
	while (t->step < step)
		pthread_cond_wait(&t->cv, &t->mu);
	pthread_mutex_unlock(&t->mu);
}

static void two_step_set(struct two_pools *t, int step)
{
	pthread_mutex_lock(&t->mu);
	t->step = step;
	pthread_cond_broadcast(&t->cv);
	pthread_mutex_unlock(&t->mu);
}

static void *two_pools_user(void *arg)
{
	struct two_pools *t = arg;

	cache_user(t->a); /* its cache now holds pool a's slots */
	two_step_set(t, 1);
	two_step_wait(t, 2); /* a destroyed, b made */
	cache_user(t->b);
	return NULL;
}

/* A pool destroyed while another thread's cache holds some of its slots:
 * that thread goes on with another pool (ASan: no use after free). */
Test(pool, destroy_forgets_other_threads_caches)
{
	struct two_pools t = {.mu = PTHREAD_MUTEX_INITIALIZER,
			      .cv = PTHREAD_COND_INITIALIZER};
	pthread_t th;

	t.a = pool_new(4096, 0, 0);
	cr_assert_eq(pthread_create(&th, NULL, two_pools_user, &t), 0);
	two_step_wait(&t, 1);
	cr_assert_eq(dpflow_pool_avail(t.a), 4096);
	dpflow_pool_destroy(t.a);
	t.b = pool_new(4096, 0, 0);
	two_step_set(&t, 2);
	pthread_join(th, NULL);
	cr_assert_eq(dpflow_pool_avail(t.b), 4096);
	cr_assert_eq(dpflow_pool_check(t.b), 0);
	dpflow_pool_destroy(t.b);
}

/* A slot freed twice into a cache is found by the check. */
Test(pool, check_finds_a_double_free_in_a_cache)
{
	struct dpflow_pool *pool = pool_new(8192, 0, 0);
	uint32_t idx[2];

	cr_assert_eq(dpflow_pool_alloc_bulk(pool, idx, 2), 0);
	dpflow_pool_free_bulk(pool, idx, 1);
	dpflow_pool_free_bulk(pool, idx, 1);
	capture_logs();
	cr_assert_eq(dpflow_pool_check(pool), -EINVAL);
	cr_assert_not_null(strstr(last_log, "free twice"), "%s", last_log);
	dpflow_pool_destroy(pool);
}

/* Two threads through their caches at once (8192 slots: caches of 128):
 * no slot is handed to both, and all come back when they end. */
Test(pool, concurrent_alloc_free_through_caches, .timeout = 60)
{
	two_threads(8192);
}
