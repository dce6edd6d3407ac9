/*
 * Longest-prefix-match tables (LPM pipes): image layout and lookup code,
 * shared by the CPU and the GPU targets.
 *
 * Everything here is DPF_HD and written in the common subset of C11 and
 * CUDA C++ (DESIGN.md §1). An image is one contiguous, 64-byte aligned
 * block: a header with section offsets, then arrays addressed by offsets
 * and indices only, so a byte-for-byte copy (to other host memory or to
 * device memory) answers every lookup as the original. Building and
 * changing images is the control code's job (table_lpm.c, table_lpm.h).
 *
 * IPv4 (struct dpflow_lpm4_image), DIR-24-8 as in rte_lpm:
 *   tbl24[1 << 24]  one 4-byte entry per /24: a value (below 2^31, or
 *                   DPFLOW_TABLE_MISS), or DPFLOW_LPM4_EXT | g, where
 *                   group g holds the /24's 256 addresses. Stored
 *                   complemented, so that an empty table is all zeros
 *                   and the pages of /24s no rule covers are never
 *                   written (nor backed by memory, in a fresh mapping);
 *   tbl8[][256]     the groups, raw 4-byte values (any but MISS).
 *   A lookup reads one entry, and a second one for a /24 that holds a
 *   prefix longer than /24 (or a value of 2^31 or more). One random line
 *   of a 64 MiB table per lookup: the image sits in transparent huge
 *   pages (dpflow_lpm4_create), so that the line costs no page walk.
 * IPv6 (struct dpflow_lpm6_image), a multibit trie:
 *   tbl[65536]  first level on the top 16 bits; then groups of 256
 *   grp[][256]  entries on each following byte (strides 16,8,8,...,8:
 *               at most 15 reads for a /128). An entry is {value, depth}
 *               or, with DPFLOW_LPM6_EXT set, {group index, EXT}.
 *   Keys are key_bytes long (fixed per image: 16 for an IPv6 address, up
 *   to 24 for exact fields such as a VRF id followed by the address);
 *   a key of B bytes takes at most B - 1 reads.
 * Both: a miss reads DPFLOW_TABLE_MISS, so stored values are never it.
 * Addresses are host-order uint32 for IPv4 and key_bytes bytes (16 for an
 * IPv6 address) in network order for the trie.
 *
 * Lookups only read the image; any number of threads (or GPU threads) may
 * run them at once on an image that the control thread is not changing.
 */
#ifndef DPFLOW_TABLE_LPM_IMPL_H
#define DPFLOW_TABLE_LPM_IMPL_H

#include <string.h>

#include "dpflow/common.h"
#include "dpflow/table_lpm.h" /* DPFLOW_LPM6_KEY_DEFAULT, _KEY_MAX */
#include "flow/table.h"

#define DPFLOW_LPM4_MAGIC  0x344d504cu /* "LPM4" */
#define DPFLOW_LPM6_MAGIC  0x364d504cu /* "LPM6" */
#define DPFLOW_LPM_VERSION 2u	       /* 2: lpm6 key_bytes */

#define DPFLOW_LPM4_TBL24_SIZE (1u << 24)
#define DPFLOW_LPM4_GRP_SIZE   256u
/* a tbl24 entry with this bit, other than MISS, names a group */
#define DPFLOW_LPM4_EXT 0x80000000u

#define DPFLOW_LPM6_TBL_BITS 16
#define DPFLOW_LPM6_TBL_SIZE (1u << DPFLOW_LPM6_TBL_BITS)
#define DPFLOW_LPM6_GRP_SIZE 256u
/* entry info: EXT (v is a group index) or the depth, prefix length + 1 */
#define DPFLOW_LPM6_EXT 0x80000000u

/* Lookups of a bulk call handled together (stage by stage). */
#define DPFLOW_LPM_BULK_GROUP 64u /* at most 64: a group's bit mask */

/*
 * IPv4 image header. Offsets are bytes from the header's first byte;
 * sizes are fixed at init. Lookups read the first line only.
 */
struct dpflow_lpm4_image {
	/* read by lookups */
	uint32_t magic;
	uint32_t version;
	uint64_t size;	    /* bytes of the whole image */
	uint64_t tbl24_off; /* uint32_t[DPFLOW_LPM4_TBL24_SIZE] */
	uint64_t tbl8_off;  /* uint32_t[max_groups][256] */
	/* control only */
	uint64_t dep24_off; /* uint8_t[DPFLOW_LPM4_TBL24_SIZE]: depths */
	uint64_t dep8_off;  /* uint8_t[max_groups][256] */
	uint64_t rules_off; /* struct dpflow_lpm4_rule[rule_slots] */
	uint32_t max_groups;
	uint32_t n_groups;   /* in use */
	uint32_t grp_unused; /* groups from here on were never handed out */
	uint32_t grp_free;   /* head of the free list (tbl8[g][0]), or MISS */
	uint32_t max_rules;
	uint32_t rule_slots; /* power of two, >= 2 * max_rules */
	uint32_t n_rules;
	uint32_t reserved[11]; /* zero; pads the header to two lines */
};

/* A rule in the control-side hash: tag 0 is an empty slot, else len + 1. */
struct dpflow_lpm4_rule {
	uint32_t addr;
	uint32_t value;
	uint32_t tag;
};

/* IPv6 trie entry. */
struct dpflow_lpm6_ent {
	uint32_t v;    /* value, DPFLOW_TABLE_MISS, or a group index */
	uint32_t info; /* DPFLOW_LPM6_EXT, or depth: 0 miss, else len + 1 */
};

/* IPv6 image header, as struct dpflow_lpm4_image. */
struct dpflow_lpm6_image {
	/* read by lookups */
	uint32_t magic;
	uint32_t version;
	uint64_t size;
	uint64_t tbl_off;   /* struct dpflow_lpm6_ent[DPFLOW_LPM6_TBL_SIZE] */
	uint64_t grp_off;   /* struct dpflow_lpm6_ent[max_groups][256] */
	uint32_t key_bytes; /* bytes of a key (bulk lookup stride): 16..24 */
	/* control only */
	uint32_t max_groups;
	uint64_t rules_off;  /* struct dpflow_lpm6_rule[rule_slots] */
	uint32_t n_groups;   /* in use */
	uint32_t grp_unused; /* groups from here on were never handed out */
	uint32_t grp_free;   /* head of the free list (v of entry 0), or MISS */
	uint32_t max_rules;
	uint32_t rule_slots;
	uint32_t n_rules;
	uint32_t reserved[14]; /* zero; pads the header to two lines */
};

/*
 * IPv6 rule: key words as loaded by dpflow_lpm6_w (big-endian), the words
 * past key_bytes zero.
 */
struct dpflow_lpm6_rule {
	uint32_t w[DPFLOW_LPM6_KEY_MAX / 4];
	uint32_t value;
	uint32_t tag;
};

DPFLOW_STATIC_ASSERT(sizeof(struct dpflow_lpm4_image) == 2 * DPFLOW_CACHE_LINE,
		     "lpm4 header is two cache lines");
DPFLOW_STATIC_ASSERT(sizeof(struct dpflow_lpm6_image) == 2 * DPFLOW_CACHE_LINE,
		     "lpm6 header is two cache lines");
/* depths (prefix length + 1) of the longest keys fit the control code's
 * uint8_t depths as well as the entries' info */
DPFLOW_STATIC_ASSERT(8 * DPFLOW_LPM6_KEY_MAX + 1 <= 0xff &&
			 DPFLOW_LPM6_KEY_MAX % 4 == 0,
		     "lpm6 depths fit 8 bits");

/* Section accessors (offsets, never stored pointers). */
DPF_HD static inline const uint32_t *
dpflow_lpm4_tbl24_c(const struct dpflow_lpm4_image *t)
{
	return (const uint32_t *)(const void *)((const uint8_t *)t +
						t->tbl24_off);
}

DPF_HD static inline const uint32_t *
dpflow_lpm4_tbl8_c(const struct dpflow_lpm4_image *t)
{
	return (const uint32_t *)(const void *)((const uint8_t *)t +
						t->tbl8_off);
}

DPF_HD static inline const struct dpflow_lpm6_ent *
dpflow_lpm6_tbl_c(const struct dpflow_lpm6_image *t)
{
	const uint8_t *b = (const uint8_t *)t;

	return (const struct dpflow_lpm6_ent *)(const void *)(b + t->tbl_off);
}

DPF_HD static inline const struct dpflow_lpm6_ent *
dpflow_lpm6_grp_c(const struct dpflow_lpm6_image *t)
{
	const uint8_t *b = (const uint8_t *)t;

	return (const struct dpflow_lpm6_ent *)(const void *)(b + t->grp_off);
}

/* Is tbl24 entry @e a group reference (EXT, but not MISS)? */
DPF_HD static inline int dpflow_lpm4_is_ext(uint32_t e)
{
	return (int32_t)e < -1;
}

/* Where the value of @addr lies in tbl8, given its group entry @e. */
DPF_HD static inline size_t dpflow_lpm4_tbl8_index(uint32_t e, uint32_t addr)
{
	return (size_t)(e & ~DPFLOW_LPM4_EXT) * DPFLOW_LPM4_GRP_SIZE +
	       (addr & 0xffu);
}

/* The value of the longest prefix covering @addr, or DPFLOW_TABLE_MISS. */
DPF_HD static inline uint32_t
dpflow_lpm4_lookup_impl(const struct dpflow_lpm4_image *t, uint32_t addr)
{
	uint32_t e = ~dpflow_lpm4_tbl24_c(t)[addr >> 8];

	if (DPFLOW_UNLIKELY(dpflow_lpm4_is_ext(e)))
		e = dpflow_lpm4_tbl8_c(t)[dpflow_lpm4_tbl8_index(e, addr)];
	return e;
}

/* Index of the lowest set bit of @x (not 0). */
DPF_HD static inline unsigned dpflow_ctz64(uint64_t x)
{
#ifdef __CUDA_ARCH__
	return (unsigned)(__ffsll((long long)x) - 1);
#else
	return (unsigned)__builtin_ctzll(x);
#endif
}

/*
 * Look up @n addresses: values[i] gets the value of addrs[i]'s longest
 * prefix or DPFLOW_TABLE_MISS. Returns the number of hits.
 *
 * Groups of DPFLOW_LPM_BULK_GROUP: the tbl24 lines of a whole group are
 * prefetched first, so that their cache misses overlap, then resolved by
 * a loop kept to the few instructions that depend on each read (index,
 * load, test, store); entries that go on to a tbl8 group have that line
 * prefetched there and are resolved after the group's first level, so
 * second-level misses overlap too. Hits are counted afterwards, from the values
 * just written: a counter in the loop would make each iteration wait on its
 * miss and hold back the ones behind it.
 */
DPF_HD static inline uint32_t
dpflow_lpm4_lookup_bulk_impl(const struct dpflow_lpm4_image *t,
			     const uint32_t *DPFLOW_RESTRICT addrs, uint32_t n,
			     uint32_t *DPFLOW_RESTRICT values)
{
	const uint32_t *tbl24 = dpflow_lpm4_tbl24_c(t);
	const uint32_t *tbl8 = dpflow_lpm4_tbl8_c(t);
	uint32_t hits = 0;

	for (uint32_t base = 0; base < n; base += DPFLOW_LPM_BULK_GROUP) {
		uint32_t end = n - base < DPFLOW_LPM_BULK_GROUP
				   ? n
				   : base + DPFLOW_LPM_BULK_GROUP;

		uint64_t ext = 0; /* bit i - base: entry i goes on to tbl8 */

		for (uint32_t i = base; i < end; i++)
			DPFLOW_PREFETCH(&tbl24[addrs[i] >> 8]);
		for (uint32_t i = base; i < end; i++) {
			uint32_t a = addrs[i], e = ~tbl24[a >> 8];

			values[i] = e;
			if (DPFLOW_UNLIKELY(dpflow_lpm4_is_ext(e))) {
				/* second level: start its miss now, resolve
				 * it after the group's first level */
				DPFLOW_PREFETCH(
				    &tbl8[dpflow_lpm4_tbl8_index(e, a)]);
				ext |= 1ull << (i - base);
			}
		}
		while (ext) {
			uint32_t i = base + (uint32_t)dpflow_ctz64(ext);

			ext &= ext - 1;
			values[i] =
			    tbl8[dpflow_lpm4_tbl8_index(values[i], addrs[i])];
		}
	}
	for (uint32_t i = 0; i < n; i++)
		hits += values[i] != DPFLOW_TABLE_MISS;
	return hits;
}

/* Big-endian 32-bit word @i (0..3) of a 16-byte IPv6 address. */
DPF_HD static inline uint32_t dpflow_lpm6_w(const uint8_t *a, unsigned i)
{
	return (uint32_t)a[4 * i] << 24 | (uint32_t)a[4 * i + 1] << 16 |
	       (uint32_t)a[4 * i + 2] << 8 | a[4 * i + 3];
}

/*
 * The value of the longest prefix covering @addr (key_bytes bytes: 16 for
 * an IPv6 address), or MISS. The walk ends at the first entry that is not
 * EXT; groups exist only for bytes 2..key_bytes - 1, so it reads at most
 * key_bytes - 1 entries.
 */
DPF_HD static inline uint32_t
dpflow_lpm6_lookup_impl(const struct dpflow_lpm6_image *t, const uint8_t *addr)
{
	const struct dpflow_lpm6_ent *grp = dpflow_lpm6_grp_c(t);
	struct dpflow_lpm6_ent e =
	    dpflow_lpm6_tbl_c(t)[(uint32_t)addr[0] << 8 | addr[1]];
	unsigned k = 2;

	while (e.info & DPFLOW_LPM6_EXT)
		e = grp[(size_t)e.v * DPFLOW_LPM6_GRP_SIZE + addr[k++]];
	return e.v;
}

/*
 * The bulk walk for keys of @kb bytes. Always inlined, so that the common
 * case is compiled with kb = 16, a constant stride (as before keys could
 * be longer), and the general one with the image's key_bytes.
 */
DPF_HD static DPFLOW_ALWAYS_INLINE uint32_t dpflow_lpm6_bulk_walk(
    const struct dpflow_lpm6_image *t, const uint8_t *DPFLOW_RESTRICT addrs,
    uint32_t n, uint32_t *DPFLOW_RESTRICT values, unsigned kb)
{
	const struct dpflow_lpm6_ent *tbl = dpflow_lpm6_tbl_c(t);
	const struct dpflow_lpm6_ent *grp = dpflow_lpm6_grp_c(t);
	uint32_t hits = 0;

	for (uint32_t base = 0; base < n; base += DPFLOW_LPM_BULK_GROUP) {
		uint32_t m = n - base < DPFLOW_LPM_BULK_GROUP
				 ? n - base
				 : DPFLOW_LPM_BULK_GROUP;
		struct dpflow_lpm6_ent e[DPFLOW_LPM_BULK_GROUP];
		const uint8_t *a = addrs + (size_t)base * kb;
		uint32_t ext = 0;

		for (uint32_t j = 0; j < m; j++) {
			e[j] = tbl[(uint32_t)a[kb * j] << 8 | a[kb * j + 1]];
			ext |= e[j].info;
		}
		for (unsigned k = 2; k < kb && (ext & DPFLOW_LPM6_EXT); k++) {
			ext = 0;
			for (uint32_t j = 0; j < m; j++) {
				if (e[j].info & DPFLOW_LPM6_EXT) {
					e[j] = grp[(size_t)e[j].v *
						       DPFLOW_LPM6_GRP_SIZE +
						   a[kb * j + k]];
					ext |= e[j].info;
				}
			}
		}
		for (uint32_t j = 0; j < m; j++) {
			values[base + j] = e[j].v;
			hits += e[j].v != DPFLOW_TABLE_MISS;
		}
	}
	return hits;
}

/*
 * Look up @n keys of key_bytes bytes each (addrs + key_bytes * i: 16 for
 * IPv6 addresses); as dpflow_lpm4_lookup_bulk_impl. A group walks the
 * trie level by level.
 */
DPF_HD static inline uint32_t
dpflow_lpm6_lookup_bulk_impl(const struct dpflow_lpm6_image *t,
			     const uint8_t *DPFLOW_RESTRICT addrs, uint32_t n,
			     uint32_t *DPFLOW_RESTRICT values)
{
	if (DPFLOW_LIKELY(t->key_bytes == DPFLOW_LPM6_KEY_DEFAULT))
		return dpflow_lpm6_bulk_walk(t, addrs, n, values,
					     DPFLOW_LPM6_KEY_DEFAULT);
	return dpflow_lpm6_bulk_walk(t, addrs, n, values, t->key_bytes);
}

#endif /* DPFLOW_TABLE_LPM_IMPL_H */
