/*
 * Packet pools.
 *
 * A pool is one contiguous region of fixed-size slots, each named by a
 * 32-bit index. A slot holds the packet's metadata (meta.h, 192 bytes),
 * then headroom for encapsulation, then the data room:
 *
 *   slot i = base + i * stride:  [ meta | headroom | data room ]
 *                                         ^ buffer start; frame at data_off
 *
 * Because slots are addressed by index, the region can be mirrored into
 * GPU memory and named the same way there. The memory comes from a provider
 * chosen at creation (default: huge pages when available, else plain pages).
 *
 * Allocation and free go through a multi-producer/multi-consumer ring of
 * free indices, with a cache per thread in front of it (pools of 1024
 * slots or more: n_slots / 64 slots a thread, at most 512, as DPDK's
 * mempool caches; bursts of up to half that go through it): a thread
 * takes the slots it freed last first, while they are in cache. A
 * thread's cache goes back to the ring when the thread ends or turns to
 * another pool; dpflow_pool_avail() counts the caches too. Any thread may
 * alloc or free, and no allocator call is made after creation. Freeing an
 * index twice, or one not from this pool, is a caller bug (caught by
 * dpflow_pool_check() in tests).
 */
#ifndef DPFLOW_POOL_H
#define DPFLOW_POOL_H

#include <stdbool.h>
#include <stdint.h>

#include "dpflow/common.h"
#include "dpflow/error.h"
#include "dpflow/meta.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DPFLOW_POOL_HEADROOM_DEFAULT  128
#define DPFLOW_POOL_DATA_ROOM_DEFAULT 2048

/* Where a pool's region comes from. */
struct dpflow_mem_provider {
	const char *name;
	/* Return @size bytes aligned to @align, zeroed, or NULL. */
	void *(*alloc)(size_t size, size_t align, void *arg);
	void (*free)(void *p, size_t size, void *arg);
	void *arg;
};

struct dpflow_pool_params {
	const char *name;   /* copied; may be NULL */
	uint32_t n_slots;   /* > 0 */
	uint16_t headroom;  /* 0 selects DPFLOW_POOL_HEADROOM_DEFAULT */
	uint16_t data_room; /* 0 selects DPFLOW_POOL_DATA_ROOM_DEFAULT */
	const struct dpflow_mem_provider *provider; /* NULL: default */
};

/* Data-path view of a pool; the rest of the pool is private. */
struct dpflow_pool {
	uint8_t *base;	 /* slot 0 */
	uint32_t stride; /* bytes per slot, a multiple of 64 */
	uint32_t n_slots;
	uint16_t headroom;
	uint16_t data_room;
};

struct dpflow_pool *dpflow_pool_create(const struct dpflow_pool_params *p,
				       struct dpflow_error *err);
void dpflow_pool_destroy(struct dpflow_pool *pool);

/*
 * Take @n slots (all or none). Each returned slot's metadata is reset:
 * data_off = headroom, data_len = 0, drop/flags/tun = 0, port = queue = 0,
 * timestamps 0. Returns 0 or -ENOBUFS.
 */
int dpflow_pool_alloc_bulk(struct dpflow_pool *pool, uint32_t *idx, unsigned n);
/* Take up to @n slots; returns how many (reset as above). */
unsigned dpflow_pool_alloc_burst(struct dpflow_pool *pool, uint32_t *idx,
				 unsigned n);
/* Give slots back. */
void dpflow_pool_free_bulk(struct dpflow_pool *pool, const uint32_t *idx,
			   unsigned n);

/* Free slots now (a snapshot). */
unsigned dpflow_pool_avail(const struct dpflow_pool *pool);
const char *dpflow_pool_name(const struct dpflow_pool *pool);
/* Size of the region in bytes (n_slots * stride). */
size_t dpflow_pool_region_size(const struct dpflow_pool *pool);

/*
 * Consistency check for tests (not thread-safe): every index appears at
 * most once in the free ring and the threads' caches, and is < n_slots.
 * Returns 0 or -EINVAL.
 */
int dpflow_pool_check(struct dpflow_pool *pool);

DPF_HD static inline struct dpflow_pkt_meta *
dpflow_pool_meta(const struct dpflow_pool *pool, uint32_t idx)
{
	return (struct dpflow_pkt_meta *)(pool->base +
					  (size_t)idx * pool->stride);
}

/* Start of the buffer of the slot whose metadata is @m (headroom
 * included): a slot's buffer follows its metadata. */
DPF_HD static inline uint8_t *dpflow_meta_buf(struct dpflow_pkt_meta *m)
{
	return (uint8_t *)(m + 1);
}

/* First byte of the frame of the slot whose metadata is @m: the pool
 * arithmetic of dpflow_pkt_data() saved, for code that already holds @m. */
DPF_HD static inline uint8_t *dpflow_meta_data(struct dpflow_pkt_meta *m)
{
	return dpflow_meta_buf(m) + m->data_off;
}

/* Start of the slot's buffer (headroom included). */
DPF_HD static inline uint8_t *dpflow_pool_buf(const struct dpflow_pool *pool,
					      uint32_t idx)
{
	return dpflow_meta_buf(dpflow_pool_meta(pool, idx));
}

/* First byte of the frame. */
DPF_HD static inline uint8_t *dpflow_pkt_data(const struct dpflow_pool *pool,
					      uint32_t idx)
{
	return dpflow_meta_data(dpflow_pool_meta(pool, idx));
}

/* Room after the frame's first byte. */
DPF_HD static inline uint32_t
dpflow_pkt_tailroom(const struct dpflow_pool *pool, uint32_t idx)
{
	const struct dpflow_pkt_meta *m = dpflow_pool_meta(pool, idx);
	return (uint32_t)pool->headroom + pool->data_room - m->data_off -
	       m->data_len;
}

#ifdef __cplusplus
}
#endif

#endif /* DPFLOW_POOL_H */
