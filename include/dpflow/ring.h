/*
 * Rings of 32-bit packet indices, in the manner of DPDK's rte_ring.
 *
 * A ring has a producer and a consumer side, each single-threaded
 * (DPFLOW_RING_F_SP_ENQ / DPFLOW_RING_F_SC_DEQ, the fast path: plain loads
 * and stores with acquire/release ordering) or multi-threaded (a CAS on the
 * side's head, then an in-order tail update). The producer and consumer
 * state sit on separate cache lines.
 *
 * `_bulk` calls move all @n or nothing and return n or 0; `_burst` calls move
 * as many as possible (0..n) and return the count. Ownership of a packet
 * passes with its index.
 */
#ifndef DPFLOW_RING_H
#define DPFLOW_RING_H

#include <stdint.h>

#include "dpflow/common.h"
#include "dpflow/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DPFLOW_RING_F_SP_ENQ 0x1 /* one producer thread */
#define DPFLOW_RING_F_SC_DEQ 0x2 /* one consumer thread */
#define DPFLOW_RING_F_SPSC   (DPFLOW_RING_F_SP_ENQ | DPFLOW_RING_F_SC_DEQ)

#define DPFLOW_RING_NAME_MAX 32

struct dpflow_ring;

/*
 * Create a ring holding up to @size indices; @size must be a power of two
 * between 2 and 2^30. @name (may be NULL) is copied. NULL + @err on failure.
 */
struct dpflow_ring *dpflow_ring_create(const char *name, uint32_t size,
				       unsigned flags,
				       struct dpflow_error *err);

/* Free the ring. Indices still inside are dropped, not freed. NULL ok. */
void dpflow_ring_destroy(struct dpflow_ring *r);

unsigned dpflow_ring_enqueue_bulk(struct dpflow_ring *r, const uint32_t *obj,
				  unsigned n);
unsigned dpflow_ring_enqueue_burst(struct dpflow_ring *r, const uint32_t *obj,
				   unsigned n);
unsigned dpflow_ring_dequeue_bulk(struct dpflow_ring *r, uint32_t *obj,
				  unsigned n);
unsigned dpflow_ring_dequeue_burst(struct dpflow_ring *r, uint32_t *obj,
				   unsigned n);

/* Entries now in the ring / free space now (a snapshot under concurrency). */
unsigned dpflow_ring_count(const struct dpflow_ring *r);
unsigned dpflow_ring_free_count(const struct dpflow_ring *r);
unsigned dpflow_ring_capacity(const struct dpflow_ring *r);
const char *dpflow_ring_name(const struct dpflow_ring *r);

#ifdef __cplusplus
}
#endif

#endif /* DPFLOW_RING_H */
