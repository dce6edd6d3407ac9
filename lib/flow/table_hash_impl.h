/*
 * The image of HASH pipes, plain and Maglev, and its lookup, shared by
 * both targets (DPF_HD: the common subset of C11 and CUDA C++).
 *
 * An image is a header holding the slot count, then that many slots, each
 * an entry index or DPFLOW_HASH_MISS (free). A packet's key takes slot
 * dpflow_hash32(key, seed) % n_slots. A plain HASH pipe has one slot per
 * entry of its size, each entry names its slot; a Maglev pipe has a prime
 * number of slots filled by the Maglev builder (maglev.h) from its
 * members. The lookup reads the slot count from the image, so an executor
 * needs nothing but the image, the key length and the seed. The image is
 * position-independent: the GPU target copies its bytes as they are.
 * pipe_table.c (the HASH table kind) writes images on control threads.
 */
#ifndef DPFLOW_TABLE_HASH_IMPL_H
#define DPFLOW_TABLE_HASH_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "dpflow/common.h"
#include "flow/hash_impl.h"

#define DPFLOW_HASH_MISS UINT32_MAX

struct dpflow_hash_image {
	uint32_t n_slots;  /* the modulus, >= 1 */
	uint32_t reserved; /* 0; keeps the slots 8-byte aligned */
			   /* uint32_t slots[n_slots] follow */
};

/* Bytes of an image of @n_slots slots. */
DPF_HD static inline size_t dpflow_hash_image_bytes(uint32_t n_slots)
{
	return sizeof(struct dpflow_hash_image) +
	       (size_t)n_slots * sizeof(uint32_t);
}

DPF_HD static inline uint32_t *dpflow_hash_slots(struct dpflow_hash_image *img)
{
	return (uint32_t *)(void *)(img + 1);
}

DPF_HD static inline const uint32_t *
dpflow_hash_slots_const(const struct dpflow_hash_image *img)
{
	return (const uint32_t *)(const void *)(img + 1);
}

/* The slot of @key (@len bytes): its hash with @seed modulo the slots. */
DPF_HD static inline uint32_t
dpflow_hash_slot_impl(const struct dpflow_hash_image *img, const uint8_t *key,
		      unsigned len, uint32_t seed)
{
	return dpflow_hash32_impl(key, len, seed) % img->n_slots;
}

/* The entry index of @key's slot, or DPFLOW_HASH_MISS. */
DPF_HD static inline uint32_t
dpflow_hash_lookup_impl(const struct dpflow_hash_image *img, const uint8_t *key,
			unsigned len, uint32_t seed)
{
	return dpflow_hash_slots_const(
	    img)[dpflow_hash_slot_impl(img, key, len, seed)];
}

#endif /* DPFLOW_TABLE_HASH_IMPL_H */
