/*
 * Longest-prefix-match tables: address prefixes to uint32_t values.
 *
 * Two table kinds from an address prefix to a uint32_t value (an entry
 * index): IPv4 (/0../32) as DIR-24-8 (as rte_lpm, with 32-bit values),
 * IPv6 (/0../128) as a multibit trie with strides 16, 8, 8, ... (both
 * with depths kept beside the entries; design and figures in
 * docs/tables/lpm.md). A table's data is one position-independent image
 * (struct dpflow_lpm4_image, struct dpflow_lpm6_image: opaque here; the
 * layouts and the inline lookups that the pipe engine and the GPU target
 * share are internal to the library) that may be copied byte for byte to
 * other memory, including device memory, and still answers the same.
 * Each image also keeps its rules (prefix, length, value) in a hash, so
 * that a delete restores the next-shorter covering prefix.
 *
 * Prefixes: the address must have no bits set beyond the prefix length
 * (10.1.2.0/24, not 10.1.2.3/24); such prefixes are rejected with -EINVAL
 * rather than masked, so that a typo does not silently alias another rule.
 * IPv4 addresses are host-order uint32_t (10.0.0.0 is 0x0a000000); IPv6
 * addresses are 16 bytes in network order. The IPv6 trie also takes longer
 * keys, up to 24 bytes, fixed per image (key_bytes): the LPM pipes put
 * exact fields (a VRF id, a VLAN) in front of an address that way, as a
 * fixed part of every prefix.
 *
 * Errors: calls that can fail return 0 or a negative errno and, when @err
 * is not NULL, fill it naming the field (dpflow/error.h); constructors
 * return NULL instead.
 *
 * Threads: the calls that change an image (init, add, delete, update,
 * clear) are made by one control thread on an image that no reader uses at
 * the time (the pipe layer keeps two images and flips between them with
 * RCU). Lookups may run on any number of threads at once on an image that
 * is not being changed.
 *
 * Guarantees: every change is all or nothing; a call that fails (-EINVAL,
 * -EEXIST, -ENOENT, -ENOSPC) leaves every byte of the image as it was.
 * Images are zeroed at init and their bytes depend only on the parameters
 * and the sequence of successful calls, so replaying a batch on the second
 * image gives the same bytes. Second-level groups are taken by adds and
 * given back as soon as a group holds one rule again; IPv6 deletes and
 * updates never need one, IPv4 ones only when the value that takes over
 * a /24 is 2^31 or more (such values cannot sit in tbl24).
 */
#ifndef DPFLOW_TABLE_LPM_H
#define DPFLOW_TABLE_LPM_H

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

/* IPv6 trie key lengths: 16 bytes (an IPv6 address, the default) up to 24. */
#define DPFLOW_LPM6_KEY_DEFAULT 16u
#define DPFLOW_LPM6_KEY_MAX	24u
/* Largest max_rules accepted, both kinds. */
#define DPFLOW_LPM_RULES_MAX (1u << 26)
/* Largest group counts accepted. */
#define DPFLOW_LPM4_GROUPS_MAX (1u << 24)
#define DPFLOW_LPM6_GROUPS_MAX (1u << 22)

/* Images: 64-byte aligned, position independent. */
struct dpflow_lpm4_image;
struct dpflow_lpm6_image;

struct dpflow_lpm4_params {
	uint32_t max_rules; /* prefixes to hold: 1..DPFLOW_LPM_RULES_MAX */
	/*
	 * tbl8 groups (1 KiB + 256 bytes of depths each): one per /24 that
	 * holds a prefix longer than /24, or that a prefix with a value of
	 * 2^31 or more covers. 0 picks dpflow_lpm4_groups_for(max_rules).
	 */
	uint32_t max_groups;
};

struct dpflow_lpm6_params {
	uint32_t max_rules; /* prefixes to hold: 1..DPFLOW_LPM_RULES_MAX */
	/*
	 * 256-entry groups (2 KiB each) for prefixes longer than /16: a /L
	 * needs up to (L - 9) / 8 of them, shared with prefixes that have
	 * the same leading bytes. 0 picks (key_bytes - 12) * max_rules + 64
	 * (4 * max_rules + 64 for IPv6 addresses; clamped to
	 * DPFLOW_LPM6_GROUPS_MAX), enough for prefixes up to /48 of the
	 * address that share nothing.
	 */
	uint32_t max_groups;
	/*
	 * Bytes of a key (and of each address given to the calls below):
	 * 0 or 16 for IPv6 addresses, up to DPFLOW_LPM6_KEY_MAX (24) for
	 * longer keys; prefixes are then /0 to /(8 * key_bytes). Lookups of
	 * keys over 16 bytes read one entry more per extra byte they cover.
	 */
	uint32_t key_bytes;
};

/* What an image holds (dpflow_lpm4_info / dpflow_lpm6_info). */
struct dpflow_lpm_info {
	uint32_t max_rules;
	uint32_t n_rules;
	uint32_t max_groups;
	uint32_t n_groups; /* in use */
	size_t size;	   /* image bytes */
};

/*
 * The default IPv4 group count for @max_rules: max_rules / 4 + 256 (a
 * quarter of the prefixes longer than /24, each in its own /24), at most
 * DPFLOW_LPM4_GROUPS_MAX.
 */
uint32_t dpflow_lpm4_groups_for(uint32_t max_rules);

/*
 * Bytes of an image for @p, or 0 if a parameter is out of range.
 * Images need 64-byte alignment.
 */
size_t dpflow_lpm4_image_size(const struct dpflow_lpm4_params *p);
size_t dpflow_lpm6_image_size(const struct dpflow_lpm6_params *p);

/*
 * Make an empty image (every lookup misses) in caller memory @mem (64-byte
 * aligned, @size bytes, at least the image size). Returns 0, or -EINVAL
 * with @err naming the field ("max_rules", "max_groups", "key_bytes",
 * "mem", "size").
 */
int dpflow_lpm4_image_init(void *mem, size_t size,
			   const struct dpflow_lpm4_params *p,
			   struct dpflow_error *err);
int dpflow_lpm6_image_init(void *mem, size_t size,
			   const struct dpflow_lpm6_params *p,
			   struct dpflow_error *err);

/*
 * Check that @size bytes at @mem hold a well-formed image header (magic,
 * version, sizes and section offsets consistent and inside @size, counts
 * within capacity). Returns 0 or -EINVAL naming the field. Reads only the
 * header: for a full check of the contents see dpflow_lpm4_verify.
 */
int dpflow_lpm4_image_check(const void *mem, size_t size,
			    struct dpflow_error *err);
int dpflow_lpm6_image_check(const void *mem, size_t size,
			    struct dpflow_error *err);

/*
 * Walk the whole image and check its invariants: every entry's value and
 * depth backed by a rule, no group that could be folded into its parent,
 * each group used once, the free list and the counts right. For tests
 * and debugging: O(image). Returns 0 or -EINVAL with a message.
 */
int dpflow_lpm4_verify(const struct dpflow_lpm4_image *img,
		       struct dpflow_error *err);
int dpflow_lpm6_verify(const struct dpflow_lpm6_image *img,
		       struct dpflow_error *err);

/*
 * Allocate and init an image (64-byte aligned; 2 MiB aligned and advised
 * for transparent huge pages when it is that large). Returns it, or NULL
 * with @err set (-EINVAL as the image_init calls, -ENOMEM).
 */
struct dpflow_lpm4_image *dpflow_lpm4_create(const struct dpflow_lpm4_params *p,
					     struct dpflow_error *err);
struct dpflow_lpm6_image *dpflow_lpm6_create(const struct dpflow_lpm6_params *p,
					     struct dpflow_error *err);

/* A new image, allocated as by _create, equal to @src byte for byte. */
struct dpflow_lpm4_image *dpflow_lpm4_clone(const struct dpflow_lpm4_image *src,
					    struct dpflow_error *err);
struct dpflow_lpm6_image *dpflow_lpm6_clone(const struct dpflow_lpm6_image *src,
					    struct dpflow_error *err);

/* Free an image from _create or _clone. Accept NULL. */
void dpflow_lpm4_destroy(struct dpflow_lpm4_image *img);
void dpflow_lpm6_destroy(struct dpflow_lpm6_image *img);

/* Bytes in @img (what a copy must move). */
size_t dpflow_lpm4_image_bytes(const struct dpflow_lpm4_image *img);
size_t dpflow_lpm6_image_bytes(const struct dpflow_lpm6_image *img);

/*
 * Copy @src into @dst (64-byte aligned, @dst_size bytes): a memcpy of the
 * image bytes. The copy answers every lookup as @src and may be changed
 * independently. Returns 0 or -EINVAL ("dst", "dst_size").
 */
int dpflow_lpm4_image_copy(void *dst, size_t dst_size,
			   const struct dpflow_lpm4_image *src,
			   struct dpflow_error *err);
int dpflow_lpm6_image_copy(void *dst, size_t dst_size,
			   const struct dpflow_lpm6_image *src,
			   struct dpflow_error *err);

/*
 * Add prefix @addr/@len with @value. Returns 0;
 * -EINVAL: @len over 32 ("len"), host bits set ("addr"), @value is
 *          DPFLOW_TABLE_MISS ("value");
 * -EEXIST: the prefix is present ("addr"), whatever its value;
 * -ENOSPC: max_rules prefixes are present ("max_rules"), or the groups
 *          it needs are not free ("max_groups").
 * On failure the image is unchanged. Cost: a /L up to /24 writes the
 * 2^(24-L) tbl24 entries it covers (and the groups among them); a longer
 * one writes at most 256 entries of one group.
 */
int dpflow_lpm4_add(struct dpflow_lpm4_image *img, uint32_t addr, unsigned len,
		    uint32_t value, struct dpflow_error *err);

/*
 * Remove prefix @addr/@len: its addresses now match the next-shorter
 * covering prefix, or miss. Returns 0 and, when @old_value is not NULL,
 * the removed value in *@old_value; -ENOENT if absent ("addr"); -EINVAL
 * as for add ("len", "addr"); -ENOSPC ("max_groups") only if that
 * covering prefix's value is 2^31 or more and groups are short.
 */
int dpflow_lpm4_delete(struct dpflow_lpm4_image *img, uint32_t addr,
		       unsigned len, uint32_t *old_value,
		       struct dpflow_error *err);

/*
 * Set the value of prefix @addr/@len, which must be present. Returns 0,
 * -ENOENT ("addr"), -EINVAL ("len", "addr", "value"), or -ENOSPC as for
 * delete when @value is 2^31 or more.
 */
int dpflow_lpm4_update(struct dpflow_lpm4_image *img, uint32_t addr,
		       unsigned len, uint32_t value, struct dpflow_error *err);

/* The value of exactly @addr/@len in *@value: 0, -ENOENT or -EINVAL. */
int dpflow_lpm4_find(const struct dpflow_lpm4_image *img, uint32_t addr,
		     unsigned len, uint32_t *value);

/* Prefixes stored in @img. */
uint32_t dpflow_lpm4_count(const struct dpflow_lpm4_image *img);

/* Remove every prefix; the image then equals a freshly initialised one. */
void dpflow_lpm4_clear(struct dpflow_lpm4_image *img);

/* Fill @info from @img. */
void dpflow_lpm4_info(const struct dpflow_lpm4_image *img,
		      struct dpflow_lpm_info *info);

/*
 * IPv6, as the IPv4 calls above; @addr is key_bytes bytes (16 for an IPv6
 * address) in network order and @len 0..8 * key_bytes (0..128). Add fails
 * with -ENOSPC ("max_groups") when the groups it needs are not free.
 */
int dpflow_lpm6_add(struct dpflow_lpm6_image *img, const uint8_t *addr,
		    unsigned len, uint32_t value, struct dpflow_error *err);
int dpflow_lpm6_delete(struct dpflow_lpm6_image *img, const uint8_t *addr,
		       unsigned len, uint32_t *old_value,
		       struct dpflow_error *err);
int dpflow_lpm6_update(struct dpflow_lpm6_image *img, const uint8_t *addr,
		       unsigned len, uint32_t value, struct dpflow_error *err);
int dpflow_lpm6_find(const struct dpflow_lpm6_image *img, const uint8_t *addr,
		     unsigned len, uint32_t *value);
uint32_t dpflow_lpm6_count(const struct dpflow_lpm6_image *img);
void dpflow_lpm6_clear(struct dpflow_lpm6_image *img);
void dpflow_lpm6_info(const struct dpflow_lpm6_image *img,
		      struct dpflow_lpm_info *info);

/*
 * Data path (any thread; the image must not change during the call).
 * Out-of-line calls of the lookup code that the library's engine and the
 * GPU target inline; they give the same answers.
 */

/*
 * The value of @addr's longest prefix, or DPFLOW_TABLE_MISS (IPv6: @addr
 * is key_bytes bytes).
 */
uint32_t dpflow_lpm4_lookup(const struct dpflow_lpm4_image *img, uint32_t addr);
uint32_t dpflow_lpm6_lookup(const struct dpflow_lpm6_image *img,
			    const uint8_t *addr);

/*
 * Look up @n addresses (IPv4: host-order words; IPv6: key_bytes bytes
 * each, back to back: 16 for IPv6 addresses); values[i] gets the value or
 * DPFLOW_TABLE_MISS. Returns the number of hits. Any @n; bursts of 32 to 256
 * use the pipeline best.
 */
uint32_t dpflow_lpm4_lookup_bulk(const struct dpflow_lpm4_image *img,
				 const uint32_t *addrs, uint32_t n,
				 uint32_t *values);
uint32_t dpflow_lpm6_lookup_bulk(const struct dpflow_lpm6_image *img,
				 const uint8_t *addrs, uint32_t n,
				 uint32_t *values);

#ifdef __cplusplus
}
#endif

#endif /* DPFLOW_TABLE_LPM_H */
