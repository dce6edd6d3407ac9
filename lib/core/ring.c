/*
 * Rings of 32-bit indices (ring.h), after DPDK's rte_ring C11 variant.
 *
 * Each side (producer, consumer) has a head and a tail, free-running 32-bit
 * counters on their own cache line. To move n entries a side first reserves
 * [head, head + n) by advancing its head (a plain store when the side is
 * single-threaded, a CAS otherwise), copies the entries, then publishes
 * them by storing its tail with release ordering. With several threads on a
 * side the tails are published in reservation order: a thread waits, with a
 * pause, until the tail reaches its own old head.
 *
 * The other side's tail is read with acquire ordering, so a producer never
 * overwrites a slot before the consumer that reserved it has read it, and a
 * consumer never reads a slot before its producer has written it.
 *
 * size == capacity: the counters run over 2^32, and since size <= 2^30 the
 * difference of two counters is always the exact distance between them.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/ring.h"

#define RING_SIZE_MIN 2u
#define RING_SIZE_MAX (1u << 30)

struct headtail {
	_Atomic uint32_t head; /* next position to reserve */
	_Atomic uint32_t tail; /* end of the entries handed to the other side */
};

struct dpflow_ring {
	/* read-only after create */
	uint32_t mask;
	uint32_t capacity;
	unsigned flags;
	char name[DPFLOW_RING_NAME_MAX];

	/* written by producers only */
	DPFLOW_CACHE_ALIGNED struct headtail prod;
	/* written by consumers only */
	DPFLOW_CACHE_ALIGNED struct headtail cons;
	/* the entries, from the next cache line on */
	DPFLOW_CACHE_ALIGNED uint32_t slots[];
};

/* _bulk reserves all or nothing; _burst as many as there are. */
enum behaviour {
	MOVE_FIXED,
	MOVE_VARIABLE,
};

static inline void cpu_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ volatile("yield" ::: "memory");
#endif
}

struct dpflow_ring *dpflow_ring_create(const char *name, uint32_t size,
				       unsigned flags, struct dpflow_error *err)
{
	struct dpflow_ring *r;
	size_t bytes;

	if (size < RING_SIZE_MIN || size > RING_SIZE_MAX) {
		dpflow_error_set(err, EINVAL, "size",
				 "ring size %u out of range %u..%u", size,
				 RING_SIZE_MIN, RING_SIZE_MAX);
		return NULL;
	}
	if (size & (size - 1)) {
		dpflow_error_set(err, EINVAL, "size",
				 "ring size %u is not a power of two", size);
		return NULL;
	}
	if (flags & ~(unsigned)DPFLOW_RING_F_SPSC) {
		dpflow_error_set(err, EINVAL, "flags",
				 "ring flags 0x%x has unknown bits 0x%x", flags,
				 flags & ~(unsigned)DPFLOW_RING_F_SPSC);
		return NULL;
	}

	/* aligned_alloc wants a size that is a multiple of the alignment. */
	bytes = sizeof(*r) + (size_t)size * sizeof(r->slots[0]);
	bytes =
	    (bytes + DPFLOW_CACHE_LINE - 1) & ~(size_t)(DPFLOW_CACHE_LINE - 1);
	r = aligned_alloc(DPFLOW_CACHE_LINE, bytes);
	if (!r) {
		dpflow_error_set(err, ENOMEM, "size",
				 "cannot allocate %zu bytes for a ring of %u",
				 bytes, size);
		return NULL;
	}
	memset(r, 0, sizeof(*r));
	r->mask = size - 1;
	r->capacity = size;
	r->flags = flags;
	if (name) {
		strncpy(r->name, name, sizeof(r->name) - 1);
		r->name[sizeof(r->name) - 1] = '\0';
	}
	atomic_init(&r->prod.head, 0);
	atomic_init(&r->prod.tail, 0);
	atomic_init(&r->cons.head, 0);
	atomic_init(&r->cons.tail, 0);
	return r;
}

void dpflow_ring_destroy(struct dpflow_ring *r)
{
	free(r);
}

/*
 * Reserve up to @n entries of free space; returns how many (0 under
 * MOVE_FIXED when fewer than @n are free) and the first position.
 */
static inline unsigned prod_move_head(struct dpflow_ring *r, unsigned n,
				      enum behaviour b, uint32_t *old_head)
{
	const bool single = r->flags & DPFLOW_RING_F_SP_ENQ;
	const unsigned max = n;
	uint32_t head, cons_tail, free_entries;
	bool done;

	head = atomic_load_explicit(&r->prod.head, memory_order_relaxed);
	do {
		n = max;
		/* Read our head before the consumer tail. */
		atomic_thread_fence(memory_order_acquire);
		/* Pairs with the consumers' release of cons.tail. */
		cons_tail =
		    atomic_load_explicit(&r->cons.tail, memory_order_acquire);
		free_entries = r->capacity + cons_tail - head;
		if (n > free_entries)
			n = b == MOVE_FIXED ? 0 : free_entries;
		if (n == 0)
			return 0;
		if (single) {
			atomic_store_explicit(&r->prod.head, head + n,
					      memory_order_relaxed);
			done = true;
		} else {
			/* On failure @head is reloaded and we retry. */
			done = atomic_compare_exchange_weak_explicit(
			    &r->prod.head, &head, head + n,
			    memory_order_relaxed, memory_order_relaxed);
		}
	} while (!done);
	*old_head = head;
	return n;
}

/* Reserve up to @n filled entries; as prod_move_head for the consumer. */
static inline unsigned cons_move_head(struct dpflow_ring *r, unsigned n,
				      enum behaviour b, uint32_t *old_head)
{
	const bool single = r->flags & DPFLOW_RING_F_SC_DEQ;
	const unsigned max = n;
	uint32_t head, prod_tail, entries;
	bool done;

	head = atomic_load_explicit(&r->cons.head, memory_order_relaxed);
	do {
		n = max;
		atomic_thread_fence(memory_order_acquire);
		/* Pairs with the producers' release of prod.tail. */
		prod_tail =
		    atomic_load_explicit(&r->prod.tail, memory_order_acquire);
		entries = prod_tail - head;
		if (n > entries)
			n = b == MOVE_FIXED ? 0 : entries;
		if (n == 0)
			return 0;
		if (single) {
			atomic_store_explicit(&r->cons.head, head + n,
					      memory_order_relaxed);
			done = true;
		} else {
			done = atomic_compare_exchange_weak_explicit(
			    &r->cons.head, &head, head + n,
			    memory_order_relaxed, memory_order_relaxed);
		}
	} while (!done);
	*old_head = head;
	return n;
}

/*
 * Publish [old, new) to the other side. With several threads on this side,
 * wait until those that reserved before us have published. The wait loads
 * with acquire so that their entries are ordered before our release.
 */
static inline void update_tail(struct headtail *ht, uint32_t old, uint32_t new,
			       bool single)
{
	if (!single)
		while (atomic_load_explicit(&ht->tail, memory_order_acquire) !=
		       old)
			cpu_pause();
	atomic_store_explicit(&ht->tail, new, memory_order_release);
}

static inline void copy_in(struct dpflow_ring *r, uint32_t head,
			   const uint32_t *obj, unsigned n)
{
	const uint32_t idx = head & r->mask;
	const uint32_t room = r->mask + 1 - idx;

	if (DPFLOW_LIKELY(n <= room)) {
		memcpy(&r->slots[idx], obj, n * sizeof(*obj));
	} else {
		memcpy(&r->slots[idx], obj, room * sizeof(*obj));
		memcpy(&r->slots[0], obj + room, (n - room) * sizeof(*obj));
	}
}

static inline void copy_out(const struct dpflow_ring *r, uint32_t head,
			    uint32_t *obj, unsigned n)
{
	const uint32_t idx = head & r->mask;
	const uint32_t room = r->mask + 1 - idx;

	if (DPFLOW_LIKELY(n <= room)) {
		memcpy(obj, &r->slots[idx], n * sizeof(*obj));
	} else {
		memcpy(obj, &r->slots[idx], room * sizeof(*obj));
		memcpy(obj + room, &r->slots[0], (n - room) * sizeof(*obj));
	}
}

static inline unsigned enqueue(struct dpflow_ring *r, const uint32_t *obj,
			       unsigned n, enum behaviour b)
{
	uint32_t head;

	n = prod_move_head(r, n, b, &head);
	if (n == 0)
		return 0;
	copy_in(r, head, obj, n);
	update_tail(&r->prod, head, head + n, r->flags & DPFLOW_RING_F_SP_ENQ);
	return n;
}

static inline unsigned dequeue(struct dpflow_ring *r, uint32_t *obj, unsigned n,
			       enum behaviour b)
{
	uint32_t head;

	n = cons_move_head(r, n, b, &head);
	if (n == 0)
		return 0;
	copy_out(r, head, obj, n);
	update_tail(&r->cons, head, head + n, r->flags & DPFLOW_RING_F_SC_DEQ);
	return n;
}

unsigned dpflow_ring_enqueue_bulk(struct dpflow_ring *r, const uint32_t *obj,
				  unsigned n)
{
	return enqueue(r, obj, n, MOVE_FIXED);
}

unsigned dpflow_ring_enqueue_burst(struct dpflow_ring *r, const uint32_t *obj,
				   unsigned n)
{
	return enqueue(r, obj, n, MOVE_VARIABLE);
}

unsigned dpflow_ring_dequeue_bulk(struct dpflow_ring *r, uint32_t *obj,
				  unsigned n)
{
	return dequeue(r, obj, n, MOVE_FIXED);
}

unsigned dpflow_ring_dequeue_burst(struct dpflow_ring *r, uint32_t *obj,
				   unsigned n)
{
	return dequeue(r, obj, n, MOVE_VARIABLE);
}

unsigned dpflow_ring_count(const struct dpflow_ring *r)
{
	/*
	 * Consumer tail first: the producer tail read after it can only be
	 * larger, so the difference never wraps below zero. It can exceed
	 * the capacity if consumers moved in between; clamp.
	 */
	uint32_t cons_tail =
	    atomic_load_explicit(&r->cons.tail, memory_order_acquire);
	uint32_t prod_tail =
	    atomic_load_explicit(&r->prod.tail, memory_order_acquire);
	uint32_t count = prod_tail - cons_tail;

	return count > r->capacity ? r->capacity : count;
}

unsigned dpflow_ring_free_count(const struct dpflow_ring *r)
{
	return r->capacity - dpflow_ring_count(r);
}

unsigned dpflow_ring_capacity(const struct dpflow_ring *r)
{
	return r->capacity;
}

const char *dpflow_ring_name(const struct dpflow_ring *r)
{
	return r->name;
}
