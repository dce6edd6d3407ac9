/*
 * Packet pools (pool.h).
 *
 * The public struct dpflow_pool is the first member of struct pool, so the
 * data path reads base/stride straight from the handle and the rest stays
 * private. Free slots are indices in a multi-producer/multi-consumer ring
 * sized to the next power of two >= n_slots, filled with every index at
 * create. In front of it each thread keeps a cache of free slots (a
 * stack, as DPDK's per-core mempool caches): a slot freed is taken again
 * first, while its lines are in cache, and the ring is touched once every
 * few bursts. No allocator call after create.
 *
 * The default provider maps anonymous memory: huge pages (MAP_HUGETLB)
 * when the region is 2 MiB or more and some are reserved, else normal
 * pages (with a transparent huge page hint), faulted in at once. Either is
 * zeroed by the kernel.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "dpflow/log.h"
#include "dpflow/pool.h"
#include "dpflow/ring.h"

#define POOL_NAME_MAX	    32
#define POOL_SLOTS_MAX	    (1u << 30) /* the largest free ring */
#define POOL_DATA_ROOM_MIN  64
#define POOL_PREFETCH_AHEAD 4
#define HUGE_PAGE_SIZE	    (2u << 20)
/* a thread's cache: n_slots / 64 slots (a few bursts: enough to stay
 * in cache, and with many threads most slots stay where all can reach
 * them), at most this many; none under 16 */
#define POOL_CACHE_MAX 512u
#define POOL_CACHE_DIV 64u
#define POOL_CACHE_MIN 16u

struct pool;

/*
 * One thread's cache of one pool's free slots (thread-local). The pool
 * lists the caches that hold its slots (under caches_lock), so that a
 * pool's free count sees them, its check scans them, and its destroy
 * detaches them; a thread's cache goes back to the ring when the thread
 * exits or turns to another pool.
 */
struct pool_cache {
	struct pool *pool; /* whose slots (atomic: destroy clears it) */
	unsigned n;
	struct pool_cache *next; /* in pool->caches */
	uint32_t idx[POOL_CACHE_MAX];
};

struct pool {
	struct dpflow_pool pub; /* first: the handle callers hold */
	struct dpflow_ring *free_ring;
	unsigned cache_cap;	   /* slots a thread's cache holds; 0: none */
	struct pool_cache *caches; /* under caches_lock */
	size_t region_size;
	struct dpflow_mem_provider provider;
	/* Frees that found the free ring full: double frees (see check). */
	atomic_uint free_overflow;
	char name[POOL_NAME_MAX];
};

static pthread_mutex_t caches_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t cache_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t cache_key;
static __thread struct pool_cache thread_cache;

static inline struct pool *pool_priv(struct dpflow_pool *pool)
{
	return (struct pool *)pool;
}

static inline const struct pool *pool_cpriv(const struct dpflow_pool *pool)
{
	return (const struct pool *)pool;
}

/*
 * Default provider. Both calls derive the mapping length from @size the
 * same way: regions of 2 MiB or more are mapped in whole huge pages, even
 * when falling back to normal pages, so that free need not know which.
 */
static size_t map_len(size_t size)
{
	if (size < HUGE_PAGE_SIZE)
		return size;
	return (size + HUGE_PAGE_SIZE - 1) & ~(size_t)(HUGE_PAGE_SIZE - 1);
}

/*
 * Fault the whole region in now, as DPDK reserves its memory up front:
 * the data path then takes no first-touch page faults, and a process's
 * resident size does not creep up as a cache per thread reaches slots
 * not used before.
 */
static void populate(void *p, size_t len)
{
	const size_t page = (size_t)sysconf(_SC_PAGESIZE);

#ifdef MADV_POPULATE_WRITE
	if (!madvise(p, len, MADV_POPULATE_WRITE))
		return;
#endif
	for (size_t off = 0; off < len; off += page)
		((volatile uint8_t *)p)[off] = 0;
}

static void *mmap_alloc(size_t size, size_t align, void *arg)
{
	size_t len = map_len(size);
	void *p = MAP_FAILED;

	(void)arg;
	if (align > (size_t)sysconf(_SC_PAGESIZE))
		return NULL;
#ifdef MAP_HUGETLB
	if (len >= HUGE_PAGE_SIZE) {
		p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
		if (p != MAP_FAILED)
			DPFLOW_LOG_DEBUG("pool", "%zu bytes on huge pages",
					 len);
	}
#endif
	if (p == MAP_FAILED) {
		p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return NULL;
#ifdef MADV_HUGEPAGE
		if (len >= HUGE_PAGE_SIZE)
			madvise(p, len, MADV_HUGEPAGE);
#endif
	}
	populate(p, len);
	return p;
}

static void mmap_free(void *p, size_t size, void *arg)
{
	(void)arg;
	munmap(p, map_len(size));
}

static const struct dpflow_mem_provider default_provider = {
    .name = "mmap",
    .alloc = mmap_alloc,
    .free = mmap_free,
    .arg = NULL,
};

static int check_params(const struct dpflow_pool_params *p,
			struct dpflow_error *err)
{
	uint32_t headroom, data_room;

	if (!p)
		return dpflow_error_set(err, EINVAL, "params",
					"pool params are NULL");
	if (p->n_slots == 0 || p->n_slots > POOL_SLOTS_MAX)
		return dpflow_error_set(err, EINVAL, "n_slots",
					"pool n_slots %u out of range 1..%u",
					p->n_slots, POOL_SLOTS_MAX);
	headroom = p->headroom ? p->headroom : DPFLOW_POOL_HEADROOM_DEFAULT;
	data_room = p->data_room ? p->data_room : DPFLOW_POOL_DATA_ROOM_DEFAULT;
	if (data_room < POOL_DATA_ROOM_MIN)
		return dpflow_error_set(err, EINVAL, "data_room",
					"pool data_room %u below minimum %u",
					data_room, POOL_DATA_ROOM_MIN);
	/* data_off + data_len must stay within 16 bits. */
	if (headroom + data_room > UINT16_MAX)
		return dpflow_error_set(
		    err, EINVAL, "data_room",
		    "pool headroom %u + data_room %u exceeds %u", headroom,
		    data_room, UINT16_MAX);
	if (p->provider && (!p->provider->alloc || !p->provider->free))
		return dpflow_error_set(
		    err, EINVAL, "provider", "pool provider '%s' lacks %s",
		    p->provider->name ? p->provider->name : "(unnamed)",
		    p->provider->alloc ? "free" : "alloc");
	return 0;
}

static uint32_t ring_size_for(uint32_t n)
{
	uint32_t size = 2;

	while (size < n)
		size <<= 1;
	return size;
}

static int fill_free_ring(struct pool *pp)
{
	uint32_t chunk[DPFLOW_BURST_MAX];
	uint32_t i = 0;

	while (i < pp->pub.n_slots) {
		unsigned n = 0;

		while (n < DPFLOW_BURST_MAX && i < pp->pub.n_slots)
			chunk[n++] = i++;
		if (dpflow_ring_enqueue_bulk(pp->free_ring, chunk, n) != n)
			return -ENOSPC;
	}
	return 0;
}

struct dpflow_pool *dpflow_pool_create(const struct dpflow_pool_params *p,
				       struct dpflow_error *err)
{
	struct pool *pp;
	uint32_t slot_bytes;

	if (check_params(p, err))
		return NULL;

	pp = calloc(1, sizeof(*pp));
	if (!pp) {
		dpflow_error_set(err, ENOMEM, NULL, "cannot allocate pool");
		return NULL;
	}
	if (p->name)
		strncpy(pp->name, p->name, sizeof(pp->name) - 1);
	pp->provider = p->provider ? *p->provider : default_provider;
	atomic_init(&pp->free_overflow, 0);
	pp->cache_cap = p->n_slots / POOL_CACHE_DIV < POOL_CACHE_MAX
			    ? p->n_slots / POOL_CACHE_DIV
			    : POOL_CACHE_MAX;
	if (pp->cache_cap < POOL_CACHE_MIN)
		pp->cache_cap = 0;

	pp->pub.n_slots = p->n_slots;
	pp->pub.headroom =
	    p->headroom ? p->headroom : DPFLOW_POOL_HEADROOM_DEFAULT;
	pp->pub.data_room =
	    p->data_room ? p->data_room : DPFLOW_POOL_DATA_ROOM_DEFAULT;
	slot_bytes = (uint32_t)sizeof(struct dpflow_pkt_meta) +
		     pp->pub.headroom + pp->pub.data_room;
	pp->pub.stride = (slot_bytes + DPFLOW_CACHE_LINE - 1) &
			 ~(uint32_t)(DPFLOW_CACHE_LINE - 1);
	pp->region_size = (size_t)pp->pub.n_slots * pp->pub.stride;

	pp->free_ring =
	    dpflow_ring_create(pp->name, ring_size_for(p->n_slots), 0, err);
	if (!pp->free_ring)
		goto err_ring;

	pp->pub.base = pp->provider.alloc(pp->region_size, DPFLOW_CACHE_LINE,
					  pp->provider.arg);
	if (!pp->pub.base) {
		dpflow_error_set(err, ENOMEM, "n_slots",
				 "provider '%s' cannot supply %zu bytes for "
				 "%u slots of %u",
				 pp->provider.name ? pp->provider.name : "",
				 pp->region_size, pp->pub.n_slots,
				 pp->pub.stride);
		goto err_region;
	}
	if ((uintptr_t)pp->pub.base % DPFLOW_CACHE_LINE) {
		dpflow_error_set(err, EINVAL, "provider",
				 "provider '%s' returned %p, not aligned to %d",
				 pp->provider.name ? pp->provider.name : "",
				 (void *)pp->pub.base, DPFLOW_CACHE_LINE);
		goto err_fill;
	}
	if (fill_free_ring(pp)) {
		dpflow_error_set(err, ENOSPC, "n_slots",
				 "free ring cannot hold %u slots",
				 pp->pub.n_slots);
		goto err_fill;
	}
	DPFLOW_LOG_DEBUG("pool", "%s: %u slots of %u bytes, %zu bytes from %s",
			 pp->name, pp->pub.n_slots, pp->pub.stride,
			 pp->region_size,
			 pp->provider.name ? pp->provider.name : "provider");
	return &pp->pub;

err_fill:
	pp->provider.free(pp->pub.base, pp->region_size, pp->provider.arg);
err_region:
	dpflow_ring_destroy(pp->free_ring);
err_ring:
	free(pp);
	return NULL;
}

static void cache_detach(struct pool_cache *c);

void dpflow_pool_destroy(struct dpflow_pool *pool)
{
	struct pool *pp;

	if (!pool)
		return;
	pp = pool_priv(pool);
	/* other threads' caches of its slots let go of it */
	pthread_mutex_lock(&caches_lock);
	while (pp->caches)
		cache_detach(pp->caches);
	pthread_mutex_unlock(&caches_lock);
	pp->provider.free(pool->base, pp->region_size, pp->provider.arg);
	dpflow_ring_destroy(pp->free_ring);
	free(pp);
}

/*
 * Reset line 0 of each slot's metadata (buffer, tunnel and pipeline state,
 * timestamps): everything pool.h lists is in it. The header lines are left
 * for the parser, which defines them by their types.
 */
static void reset_meta(struct dpflow_pool *pool, const uint32_t *idx,
		       unsigned n)
{
	const unsigned warm = n < POOL_PREFETCH_AHEAD ? n : POOL_PREFETCH_AHEAD;

	for (unsigned i = 0; i < warm; i++)
		__builtin_prefetch(dpflow_pool_meta(pool, idx[i]), 1, 3);
	for (unsigned i = 0; i < n; i++) {
		struct dpflow_pkt_meta *m = dpflow_pool_meta(pool, idx[i]);

		if (i + POOL_PREFETCH_AHEAD < n)
			__builtin_prefetch(
			    dpflow_pool_meta(pool,
					     idx[i + POOL_PREFETCH_AHEAD]),
			    1, 3);
		memset(m, 0, offsetof(struct dpflow_pkt_meta, outer));
		m->data_off = pool->headroom;
	}
}

/* ---- per-thread caches ---------------------------------------------------
 */

/* Free @n indices to @pp's ring; a full ring means a double free. */
static void ring_put(struct pool *pp, const uint32_t *idx, unsigned n)
{
	unsigned done = dpflow_ring_enqueue_burst(pp->free_ring, idx, n);

	/*
	 * The ring holds every slot, so it can only be full if a slot was
	 * freed twice. Those indices are lost; count them for the check.
	 */
	if (DPFLOW_UNLIKELY(done < n)) {
		atomic_fetch_add_explicit(&pp->free_overflow, n - done,
					  memory_order_relaxed);
		DPFLOW_LOG_RL(DPFLOW_LOG_ERR, "pool", 5, 1000,
			      "%s: free ring full, %u indices dropped "
			      "(double free?)",
			      pp->name, n - done);
	}
}

/* Give @c's slots back to its pool and leave the pool's list. Lock held. */
static void cache_detach(struct pool_cache *c)
{
	struct pool *pp = __atomic_load_n(&c->pool, __ATOMIC_RELAXED);
	struct pool_cache **at;

	if (!pp)
		return;
	ring_put(pp, c->idx, c->n);
	__atomic_store_n(&c->n, 0, __ATOMIC_RELAXED);
	for (at = &pp->caches; *at && *at != c; at = &(*at)->next)
		;
	if (*at)
		*at = c->next;
	c->next = NULL;
	__atomic_store_n(&c->pool, NULL, __ATOMIC_RELAXED);
}

/* A thread ends: its cache goes back to its pool. */
static void cache_thread_exit(void *arg)
{
	pthread_mutex_lock(&caches_lock);
	cache_detach(arg);
	pthread_mutex_unlock(&caches_lock);
}

static void cache_key_make(void)
{
	(void)pthread_key_create(&cache_key, cache_thread_exit);
}

/* The calling thread's cache of @pp's slots, or NULL (no caching). */
static struct pool_cache *cache_of(struct pool *pp)
{
	struct pool_cache *c = &thread_cache;

	if (DPFLOW_LIKELY(__atomic_load_n(&c->pool, __ATOMIC_RELAXED) == pp))
		return c;
	if (!pp->cache_cap)
		return NULL;
	pthread_once(&cache_key_once, cache_key_make);
	pthread_mutex_lock(&caches_lock);
	cache_detach(c); /* the slots of another pool */
	c->next = pp->caches;
	pp->caches = c;
	__atomic_store_n(&c->pool, pp, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&caches_lock);
	(void)pthread_setspecific(cache_key, c);
	return c;
}

/* @c's height; other threads read it (dpflow_pool_avail). */
static inline void set_n(struct pool_cache *c, unsigned n)
{
	__atomic_store_n(&c->n, n, __ATOMIC_RELAXED);
}

/* Take @n slots from @c, refilling it from the ring (half full and @n);
 * all or none. */
static bool cache_take(struct pool *pp, struct pool_cache *c, uint32_t *idx,
		       unsigned n)
{
	if (c->n < n) {
		unsigned want = pp->cache_cap / 2 + n - c->n;

		if (want > pp->cache_cap - c->n)
			want = pp->cache_cap - c->n;
		set_n(c, c->n + dpflow_ring_dequeue_burst(pp->free_ring,
							  c->idx + c->n, want));
		if (c->n < n)
			return false;
	}
	set_n(c, c->n - n);
	memcpy(idx, c->idx + c->n, (size_t)n * sizeof(*idx));
	return true;
}

/* Put @n slots on @c, first sending all but half of it to the ring when
 * they would not fit. */
static void cache_put(struct pool *pp, struct pool_cache *c,
		      const uint32_t *idx, unsigned n)
{
	if (c->n + n > pp->cache_cap) {
		unsigned keep = pp->cache_cap / 2;

		ring_put(pp, c->idx + keep, c->n - keep);
		set_n(c, keep);
	}
	memcpy(c->idx + c->n, idx, (size_t)n * sizeof(*idx));
	set_n(c, c->n + n);
}

int dpflow_pool_alloc_bulk(struct dpflow_pool *pool, uint32_t *idx, unsigned n)
{
	struct pool *pp = pool_priv(pool);
	struct pool_cache *c;

	if (n == 0)
		return 0;
	c = cache_of(pp);
	if (c && n <= pp->cache_cap / 2) {
		if (!cache_take(pp, c, idx, n))
			return -ENOBUFS;
	} else if (dpflow_ring_dequeue_bulk(pp->free_ring, idx, n) != n) {
		return -ENOBUFS;
	}
	reset_meta(pool, idx, n);
	return 0;
}

unsigned dpflow_pool_alloc_burst(struct dpflow_pool *pool, uint32_t *idx,
				 unsigned n)
{
	struct pool *pp = pool_priv(pool);
	struct pool_cache *c = n ? cache_of(pp) : NULL;

	if (c && n <= pp->cache_cap / 2) {
		if (!cache_take(pp, c, idx, n)) {
			/* fewer than @n anywhere: what the cache has */
			n = c->n;
			set_n(c, 0);
			memcpy(idx, c->idx, (size_t)n * sizeof(*idx));
		}
	} else {
		n = dpflow_ring_dequeue_burst(pp->free_ring, idx, n);
	}
	reset_meta(pool, idx, n);
	return n;
}

void dpflow_pool_free_bulk(struct dpflow_pool *pool, const uint32_t *idx,
			   unsigned n)
{
	struct pool *pp = pool_priv(pool);
	struct pool_cache *c = n ? cache_of(pp) : NULL;

	if (c && n <= pp->cache_cap / 2)
		cache_put(pp, c, idx, n);
	else
		ring_put(pp, idx, n);
}

unsigned dpflow_pool_avail(const struct dpflow_pool *pool)
{
	const struct pool *pp = pool_cpriv(pool);
	unsigned n = dpflow_ring_count(pp->free_ring);

	if (!pp->cache_cap)
		return n;
	pthread_mutex_lock(&caches_lock);
	for (const struct pool_cache *c = pp->caches; c; c = c->next)
		n += __atomic_load_n(&c->n, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&caches_lock);
	return n;
}

const char *dpflow_pool_name(const struct dpflow_pool *pool)
{
	return pool_cpriv(pool)->name;
}

size_t dpflow_pool_region_size(const struct dpflow_pool *pool)
{
	return pool_cpriv(pool)->region_size;
}

/* Note free index @x in @seen; -EINVAL (logged) when bad or seen. */
static int check_one(const struct pool *pp, uint8_t *seen, uint32_t x)
{
	if (x >= pp->pub.n_slots) {
		DPFLOW_LOG_ERR("pool", "%s: free index %u >= n_slots %u",
			       pp->name, x, pp->pub.n_slots);
		return -EINVAL;
	}
	if (seen[x]++) {
		DPFLOW_LOG_ERR("pool", "%s: index %u free twice", pp->name, x);
		return -EINVAL;
	}
	return 0;
}

int dpflow_pool_check(struct dpflow_pool *pool)
{
	struct pool *pp = pool_priv(pool);
	const unsigned ring_cap = dpflow_ring_capacity(pp->free_ring);
	uint32_t *all = NULL;
	uint8_t *seen = NULL;
	unsigned n, i;
	int rc = 0;

	all = malloc((size_t)ring_cap * sizeof(*all));
	seen = calloc(pool->n_slots, 1);
	if (!all || !seen) {
		rc = -ENOMEM;
		goto out;
	}

	n = dpflow_ring_dequeue_burst(pp->free_ring, all, ring_cap);
	for (i = 0; i < n; i++)
		rc |= check_one(pp, seen, all[i]);
	/* Put everything back as it was, in the same order. */
	dpflow_ring_enqueue_bulk(pp->free_ring, all, n);
	pthread_mutex_lock(&caches_lock);
	for (const struct pool_cache *c = pp->caches; c; c = c->next)
		for (i = 0; i < c->n; i++)
			rc |= check_one(pp, seen, c->idx[i]);
	pthread_mutex_unlock(&caches_lock);

	if (atomic_load_explicit(&pp->free_overflow, memory_order_relaxed)) {
		DPFLOW_LOG_ERR("pool", "%s: %u frees found the ring full",
			       pp->name,
			       atomic_load_explicit(&pp->free_overflow,
						    memory_order_relaxed));
		rc = -EINVAL;
	}
out:
	free(seen);
	free(all);
	return rc;
}
