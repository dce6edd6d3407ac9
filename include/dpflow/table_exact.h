/*
 * Exact-match table: a hash table from fixed-length keys to uint32_t values.
 *
 * A bucketised cuckoo hash from fixed-length keys (4..64 bytes, a multiple
 * of 4, fixed at creation) to uint32_t values (entry indices). Buckets of 8
 * slots with 16-bit tags; two candidate buckets per key, the second
 * derived from the first and the tag; inserts displace entries along the
 * shortest chain found by a bounded breadth-first search over tags.
 * The table's data is one position-independent image (struct
 * dpflow_exact_image, opaque here: its layout and the inline lookups that
 * the pipe engine and the GPU target share are internal to the library),
 * which may be copied byte for byte to other memory, including device
 * memory, and still answers the same (design and figures:
 * docs/tables/exact.md).
 *
 * Threads: the calls that change an image (init, insert, delete, update,
 * clear) are made by one control thread on an image that no reader uses at
 * the time (the pipe layer keeps two images and flips between them with
 * RCU). Lookups may run on any number of threads at once on an image that
 * is not being changed.
 *
 * Errors: calls that can fail return 0 or a negative errno and, when @err
 * is not NULL, fill it naming the field (dpflow/error.h); constructors
 * return NULL instead.
 *
 * Guarantees: every change is all or nothing; a call that fails (-EINVAL,
 * -EEXIST, -ENOENT, -ENOSPC) leaves every byte of the image as it was. The
 * image bytes depend only on the parameters and the sequence of successful
 * calls, so replaying a batch on the second image gives the same bytes.
 * An image made for `capacity` entries holds them at most 15/16 of its
 * slots full; inserts beyond `capacity` go on while a displacement chain
 * is found (with random keys, to about 99.7% of the slots).
 */
#ifndef DPFLOW_TABLE_EXACT_H
#define DPFLOW_TABLE_EXACT_H

#include <stddef.h>
#include <stdint.h>

#include "dpflow/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * A lookup that found nothing: never a valid value. Every table header
 * defines it alike (a differing definition is diagnosed).
 */
#define DPFLOW_TABLE_MISS UINT32_MAX

/* Key lengths: multiples of 4 from DPFLOW_EXACT_KEY_MIN to _KEY_MAX. */
#define DPFLOW_EXACT_KEY_MIN 4
#define DPFLOW_EXACT_KEY_MAX 64
/* Largest capacity accepted (entries). */
#define DPFLOW_EXACT_CAPACITY_MAX (1u << 28)
/* Nodes a displacement search may visit before an insert gives up. */
#define DPFLOW_EXACT_BFS_MAX 2048

/* An image: 64-byte aligned, position independent; layout internal. */
struct dpflow_exact_image;

struct dpflow_exact_params {
	uint32_t key_len;  /* bytes: 4..64, a multiple of 4 */
	uint32_t capacity; /* entries to hold: 1..DPFLOW_EXACT_CAPACITY_MAX */
	uint64_t seed;	   /* hash seed; tables of one program may differ */
};

/* What an image holds (dpflow_exact_info). */
struct dpflow_exact_info {
	uint32_t key_len;
	uint32_t capacity;
	uint32_t n_buckets;
	uint32_t n_slots; /* n_buckets * 8: the most entries it can hold */
	uint32_t n_entries;
	size_t size; /* image bytes */
};

/*
 * Bytes of an image for @key_len and @capacity, or 0 if either is out of
 * range. Images need 64-byte alignment.
 */
size_t dpflow_exact_image_size(uint32_t key_len, uint32_t capacity);

/*
 * Make an empty image in caller memory @mem (64-byte aligned, @size bytes,
 * at least dpflow_exact_image_size()). Returns 0, or -EINVAL with @err
 * naming the field ("key_len", "capacity", "mem", "size"). The caller
 * keeps @mem; use it as a struct dpflow_exact_image and free it itself
 * (never with dpflow_exact_destroy).
 */
int dpflow_exact_image_init(void *mem, size_t size,
			    const struct dpflow_exact_params *p,
			    struct dpflow_error *err);

/*
 * Check that @size bytes at @mem hold a well-formed image header (magic,
 * version, key length, offsets and size consistent, count within slots).
 * Returns 0 or -EINVAL naming the field. Does not read the slots.
 */
int dpflow_exact_image_check(const void *mem, size_t size,
			     struct dpflow_error *err);

/*
 * Allocate and init an image (64-byte aligned; 2 MiB aligned and advised
 * for transparent huge pages when it is that large). Returns it, or NULL
 * with @err set (-EINVAL as dpflow_exact_image_init, -ENOMEM). The caller
 * owns it: free it with dpflow_exact_destroy.
 */
struct dpflow_exact_image *
dpflow_exact_create(const struct dpflow_exact_params *p,
		    struct dpflow_error *err);

/* A new image, allocated as by dpflow_exact_create, equal to @src. */
struct dpflow_exact_image *
dpflow_exact_clone(const struct dpflow_exact_image *src,
		   struct dpflow_error *err);

/* Free an image from dpflow_exact_create or _clone. Accepts NULL. */
void dpflow_exact_destroy(struct dpflow_exact_image *img);

/* Bytes in @img (what a copy must move). */
size_t dpflow_exact_image_bytes(const struct dpflow_exact_image *img);

/*
 * Copy @src into @dst (64-byte aligned, @dst_size bytes): a memcpy of
 * dpflow_exact_image_bytes(src). The copy answers every lookup as @src.
 * Returns 0 or -EINVAL ("dst", "dst_size").
 */
int dpflow_exact_image_copy(void *dst, size_t dst_size,
			    const struct dpflow_exact_image *src,
			    struct dpflow_error *err);

/*
 * Add @key (key_len bytes) with @value. Returns 0; -EEXIST if the key is
 * present ("key"); -EINVAL if @key is NULL or @value is DPFLOW_TABLE_MISS
 * ("value"); -ENOSPC if no slot could be freed within DPFLOW_EXACT_BFS_MAX
 * search nodes ("capacity"). On failure the image is unchanged. Moves at
 * most a few other entries between their two buckets.
 */
int dpflow_exact_insert(struct dpflow_exact_image *img, const void *key,
			uint32_t value, struct dpflow_error *err);

/*
 * Remove @key. Returns 0 and, when @old_value is not NULL, its value in
 * *@old_value; -ENOENT if absent ("key"); -EINVAL if @key is NULL.
 */
int dpflow_exact_delete(struct dpflow_exact_image *img, const void *key,
			uint32_t *old_value, struct dpflow_error *err);

/*
 * Set the value of @key, which must be present. Returns 0, -ENOENT
 * ("key") or -EINVAL (NULL key, @value DPFLOW_TABLE_MISS).
 */
int dpflow_exact_update(struct dpflow_exact_image *img, const void *key,
			uint32_t value, struct dpflow_error *err);

/* Keys stored in @img. */
uint32_t dpflow_exact_count(const struct dpflow_exact_image *img);

/* Remove every key; the image then equals a freshly initialised one. */
void dpflow_exact_clear(struct dpflow_exact_image *img);

/* Fill @info from @img. */
void dpflow_exact_info(const struct dpflow_exact_image *img,
		       struct dpflow_exact_info *info);

/*
 * Data path (any thread; the image must not change during the call).
 * Out-of-line calls of the lookup code that the library's engine and the
 * GPU target inline; they give the same answers.
 */

/* The value of @key, or DPFLOW_TABLE_MISS. */
uint32_t dpflow_exact_lookup(const struct dpflow_exact_image *img,
			     const void *key);

/*
 * Look up @n keys (keys[i] points at key_len bytes, any alignment; @n up to
 * DPFLOW_BURST_MAX by convention, any count works); values[i] gets the
 * value or DPFLOW_TABLE_MISS. Returns the number of hits.
 */
uint32_t dpflow_exact_lookup_bulk(const struct dpflow_exact_image *img,
				  const void *const *keys, uint32_t n,
				  uint32_t *values);

#ifdef __cplusplus
}
#endif

#endif /* DPFLOW_TABLE_EXACT_H */
