/*
 * Exact-match table: the image layout and the lookup code shared by the CPU
 * and GPU targets.
 *
 * Owns: the byte layout of an exact-match image, its hash, and the read
 * side (one-key and bulk lookup). Everything here is DPF_HD and written in
 * the common subset of C11 and CUDA C++ (DESIGN.md §1); table_exact.c
 * builds and edits images on the control thread, the GPU target copies the
 * same bytes to device memory and calls the same functions.
 *
 * Who calls: any data thread (or GPU thread), on an image that no control
 * call is changing at the same time (the pipe layer flips between two
 * images with RCU). Lookups only read the image.
 *
 * Layout: one 64-byte-aligned block, no pointers inside.
 *   [header: struct dpflow_exact_image, 64 bytes]
 *   [tags: n_buckets x 8 x uint16_t, 16 bytes a bucket, 4 buckets a line]
 *   [entries: n_buckets x 8 x (key_len bytes of key, then uint32_t value)]
 * Entry (b, s) is slot s of bucket b: its tag at tags[b * 8 + s], its key and
 * value at entries + (b * 8 + s) * entry_size. Tag 0 marks an empty slot;
 * empty slots hold all-zero key and value bytes, so the image bytes depend
 * only on the sequence of control calls.
 *
 * Hash: 64 bits from a multiply-xorshift over the key's 8-byte words
 * (a 4-byte tail word for key lengths that are not multiples of 8) and a
 * murmur3-style finaliser. Bits 0-15 give the tag (0 becomes 1), bits
 * 32-63 the first bucket by multiply-shift range reduction (any bucket
 * count, not only powers of two); the second bucket is a function of the
 * first and the tag alone (dpflow_exact_alt), as in partial-key cuckoo
 * hashing. Integer arithmetic only, so CPU and GPU compute identical
 * values; both are little-endian.
 *
 * Guarantees: a key is in one of its two candidate buckets; a lookup reads
 * the header, at most two 16-byte tag groups, and the entries whose tag
 * matches (one, except with probability about 16/65535); it returns the
 * value or DPFLOW_TABLE_MISS and never reads outside the image.
 */
#ifndef DPFLOW_TABLE_EXACT_IMPL_H
#define DPFLOW_TABLE_EXACT_IMPL_H

#include <string.h>

#include "dpflow/common.h"
#include "flow/table.h"

#if defined(__SSE2__) && !defined(__CUDACC__)
#include <emmintrin.h>
#endif

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "exact-match images assume a little-endian host"
#endif

#define DPFLOW_EXACT_MAGIC   0x58455044u /* "DPEX" in memory */
#define DPFLOW_EXACT_VERSION 1
#define DPFLOW_EXACT_SLOTS   8 /* slots per bucket */
/* Keys hashed and prefetched together in one pass of the bulk lookup. */
#define DPFLOW_EXACT_CHUNK 64

/* The image header: the first 64 bytes of every exact-match image. */
struct dpflow_exact_image {
	uint32_t magic;	      /* DPFLOW_EXACT_MAGIC */
	uint16_t version;     /* DPFLOW_EXACT_VERSION */
	uint16_t key_len;     /* bytes: 4..64, a multiple of 4 */
	uint32_t entry_size;  /* key_len + 4: key, then the uint32_t value */
	uint32_t n_buckets;   /* >= 16; slots = n_buckets * 8 */
	uint64_t seed;	      /* hash seed, fixed at creation */
	uint64_t tags_off;    /* byte offset of the tag array (64) */
	uint64_t entries_off; /* byte offset of the entry array */
	uint64_t size;	      /* bytes in the whole image */
	/* cold: only the control path reads these */
	uint32_t n_entries; /* keys stored */
	uint32_t capacity;  /* entries asked for at creation */
	uint8_t reserved[8];
};

DPFLOW_STATIC_ASSERT(sizeof(struct dpflow_exact_image) == DPFLOW_CACHE_LINE,
		     "exact image header is one cache line");

#define DPFLOW_EXACT_M1 0x9e3779b97f4a7c15ull
#define DPFLOW_EXACT_M2 0xd6e8feb86659fd93ull
#define DPFLOW_EXACT_F1 0xff51afd7ed558ccdull
#define DPFLOW_EXACT_F2 0xc4ceb9fe1a85ec53ull

DPF_HD static inline uint64_t dpflow_exact_ld64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

DPF_HD static inline uint32_t dpflow_exact_ld32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

DPF_HD static inline unsigned dpflow_exact_ctz(uint32_t x)
{
#ifdef __CUDA_ARCH__
	return (unsigned)(__ffs((int)x) - 1);
#else
	return (unsigned)__builtin_ctz(x);
#endif
}

/*
 * The 64-bit hash of @key_len bytes at @key (@key_len a multiple of 4) with
 * @seed. Identical on every target.
 */
DPF_HD static DPFLOW_ALWAYS_INLINE uint64_t dpflow_exact_hash(const void *key,
							      uint32_t key_len,
							      uint64_t seed)
{
	const uint8_t *k = (const uint8_t *)key;
	uint64_t h = seed ^ ((uint64_t)key_len * DPFLOW_EXACT_M1);
	uint32_t i = 0;

	for (; i + 8 <= key_len; i += 8) {
		h ^= dpflow_exact_ld64(k + i);
		h *= DPFLOW_EXACT_M2;
		h ^= h >> 32;
	}
	if (i < key_len) {
		h ^= dpflow_exact_ld32(k + i);
		h *= DPFLOW_EXACT_M2;
		h ^= h >> 32;
	}
	h ^= h >> 33;
	h *= DPFLOW_EXACT_F1;
	h ^= h >> 33;
	h *= DPFLOW_EXACT_F2;
	h ^= h >> 33;
	return h;
}

/* A key's place: its tag (never 0) and its two candidate buckets. */
struct dpflow_exact_sig {
	uint32_t b1;
	uint32_t b2;
	uint16_t tag;
};

/*
 * The other bucket of a key with tag @tag that has bucket @b:
 * (C(tag) - b) mod n_buckets, where C(tag) is the tag scrambled and reduced
 * to 0..n_buckets-1. It is an involution (alt(alt(b)) == b), so moving an
 * entry needs only its bucket and tag, never its key. When it returns @b
 * (about one key in n_buckets) the key has one bucket.
 */
DPF_HD static inline uint32_t dpflow_exact_alt(uint32_t b, uint16_t tag,
					       uint32_t n_buckets)
{
	uint32_t c =
	    (uint32_t)((uint64_t)((uint32_t)tag * 0x9e3779b1u) * n_buckets >>
		       32);

	return c >= b ? c - b : c + n_buckets - b;
}

DPF_HD static inline struct dpflow_exact_sig
dpflow_exact_sig_of(uint64_t h, uint32_t n_buckets)
{
	struct dpflow_exact_sig s;
	uint16_t tag = (uint16_t)h;

	s.tag = (uint16_t)(tag | (tag == 0));
	s.b1 = (uint32_t)((h >> 32) * n_buckets >> 32);
	s.b2 = dpflow_exact_alt(s.b1, s.tag, n_buckets);
	return s;
}

/* The 16-byte tag group of bucket @b, as two 8-byte words. */
DPF_HD static inline const uint64_t *
dpflow_exact_tags(const struct dpflow_exact_image *img, uint32_t b)
{
	const uint8_t *base = (const uint8_t *)img;

	return (const uint64_t *)(base + img->tags_off) + (size_t)b * 2;
}

/* Entry (@b, @s): key_len key bytes, then the uint32_t value. */
DPF_HD static inline const uint8_t *
dpflow_exact_entry(const struct dpflow_exact_image *img, uint32_t b, unsigned s)
{
	const uint8_t *base = (const uint8_t *)img;

	return base + img->entries_off +
	       ((uint64_t)b * DPFLOW_EXACT_SLOTS + s) * img->entry_size;
}

/*
 * The 16-bit lanes of @w equal to @tag, as a 4-bit mask (lane i -> bit i).
 * Exact (no false lanes): the per-lane add cannot carry out of its lane.
 */
DPF_HD static inline uint32_t dpflow_exact_match4(uint64_t w, uint16_t tag)
{
	const uint64_t low = 0x7fff7fff7fff7fffull;
	uint64_t t = w ^ ((uint64_t)tag * 0x0001000100010001ull);
	uint64_t z = ~(((t & low) + low) | t) & ~low;

	/* bits 15, 31, 47, 63 -> bits 48..51 (no carries, see the design) */
	return (uint32_t)(((z >> 15) * 0x0001000200040008ull) >> 48) & 0xf;
}

/* Slots of bucket @b whose tag is @tag, as an 8-bit mask. */
DPF_HD static inline uint32_t
dpflow_exact_match8(const struct dpflow_exact_image *img, uint32_t b,
		    uint16_t tag)
{
	const uint64_t *w = dpflow_exact_tags(img, b);

	return dpflow_exact_match4(w[0], tag) | dpflow_exact_match4(w[1], tag)
						    << 4;
}

/* Whether the @len bytes at @a and @b are equal (@len a multiple of 4). */
DPF_HD static inline int dpflow_exact_key_eq(const uint8_t *a, const uint8_t *b,
					     uint32_t len)
{
	uint64_t d = 0;
	uint32_t i = 0;

	if (len == 16)
		return ((dpflow_exact_ld64(a) ^ dpflow_exact_ld64(b)) |
			(dpflow_exact_ld64(a + 8) ^
			 dpflow_exact_ld64(b + 8))) == 0;
	for (; i + 8 <= len; i += 8)
		d |= dpflow_exact_ld64(a + i) ^ dpflow_exact_ld64(b + i);
	if (i < len)
		d |= dpflow_exact_ld32(a + i) ^ dpflow_exact_ld32(b + i);
	return d == 0;
}

/*
 * Among the candidates in @m (bits 0-7: slots of @s.b1, bits 8-15: slots of
 * @s.b2), the value of the entry whose key is @key, or DPFLOW_TABLE_MISS.
 */
DPF_HD static inline uint32_t
dpflow_exact_resolve(const struct dpflow_exact_image *img,
		     struct dpflow_exact_sig s, uint32_t m, const uint8_t *key)
{
	uint32_t key_len = img->key_len;

	while (m) {
		unsigned i = dpflow_exact_ctz(m);
		const uint8_t *e = dpflow_exact_entry(
		    img, i < DPFLOW_EXACT_SLOTS ? s.b1 : s.b2,
		    i & (DPFLOW_EXACT_SLOTS - 1));

		if (dpflow_exact_key_eq(e, key, key_len))
			return dpflow_exact_ld32(e + key_len);
		m &= m - 1;
	}
	return DPFLOW_TABLE_MISS;
}

/* The value stored for @key (key_len bytes), or DPFLOW_TABLE_MISS. */
DPF_HD static inline uint32_t
dpflow_exact_lookup_impl(const struct dpflow_exact_image *img, const void *key)
{
	const uint8_t *k = (const uint8_t *)key;
	struct dpflow_exact_sig s = dpflow_exact_sig_of(
	    dpflow_exact_hash(k, img->key_len, img->seed), img->n_buckets);
	uint32_t v = dpflow_exact_resolve(
	    img, s, dpflow_exact_match8(img, s.b1, s.tag), k);

	if (v != DPFLOW_TABLE_MISS)
		return v;
	return dpflow_exact_resolve(
	    img, s, dpflow_exact_match8(img, s.b2, s.tag) << DPFLOW_EXACT_SLOTS,
	    k);
}

/*
 * Slots of bucket @b1 (bits 0-7) and of bucket @b2 (bits 8-15) whose tag
 * is @tag. On x86 CPUs two SSE2 compares and one pack; elsewhere (and on
 * the GPU) dpflow_exact_match8, the reference, which gives the same mask.
 */
DPF_HD static inline uint32_t
dpflow_exact_match_pair(const struct dpflow_exact_image *img, uint32_t b1,
			uint32_t b2, uint16_t tag)
{
#if defined(__SSE2__) && !defined(__CUDACC__)
	__m128i t = _mm_set1_epi16((short)tag);
	__m128i m1 = _mm_cmpeq_epi16(
	    _mm_load_si128((const __m128i *)dpflow_exact_tags(img, b1)), t);
	__m128i m2 = _mm_cmpeq_epi16(
	    _mm_load_si128((const __m128i *)dpflow_exact_tags(img, b2)), t);

	/* 0xffff lanes saturate to 0xff bytes: b1's 8 lanes, then b2's */
	return (uint32_t)_mm_movemask_epi8(_mm_packs_epi16(m1, m2));
#else
	return dpflow_exact_match8(img, b1, tag) |
	       dpflow_exact_match8(img, b2, tag) << DPFLOW_EXACT_SLOTS;
#endif
}

/*
 * Up to DPFLOW_EXACT_CHUNK keys of @key_len bytes in three passes, so that
 * the memory accesses of all keys overlap: hash every key and prefetch
 * both tag groups; compare tags and prefetch the first candidate entry;
 * compare keys. Always inlined, so that a constant @key_len unrolls the
 * hash and the key compare.
 */
DPF_HD static DPFLOW_ALWAYS_INLINE uint32_t dpflow_exact_lookup_chunk_len(
    const struct dpflow_exact_image *img, const void *const *keys, uint32_t n,
    uint32_t *DPFLOW_RESTRICT values, uint32_t key_len)
{
	struct dpflow_exact_sig sig[DPFLOW_EXACT_CHUNK];
	const uint8_t *first[DPFLOW_EXACT_CHUNK];
	uint32_t cand[DPFLOW_EXACT_CHUNK];
	uint64_t seed = img->seed;
	uint32_t nb = img->n_buckets, hits = 0, i;

	for (i = 0; i < n; i++) {
		sig[i] = dpflow_exact_sig_of(
		    dpflow_exact_hash(keys[i], key_len, seed), nb);
		DPFLOW_PREFETCH(dpflow_exact_tags(img, sig[i].b1));
		DPFLOW_PREFETCH(dpflow_exact_tags(img, sig[i].b2));
	}
	for (i = 0; i < n; i++) {
		uint32_t m = dpflow_exact_match_pair(img, sig[i].b1, sig[i].b2,
						     sig[i].tag);
		unsigned c = dpflow_exact_ctz(m | 1u << 16);
		const uint8_t *e = dpflow_exact_entry(
		    img, c < DPFLOW_EXACT_SLOTS ? sig[i].b1 : sig[i].b2,
		    c & (DPFLOW_EXACT_SLOTS - 1));

		cand[i] = m;
		first[i] = e;
		if (m) {
			/* the entry's first byte and its value's last byte:
			 * both its lines when it straddles a line boundary */
			DPFLOW_PREFETCH(e);
			DPFLOW_PREFETCH(e + key_len + 3);
		}
	}
	for (i = 0; i < n; i++) {
		const uint8_t *k = (const uint8_t *)keys[i];
		uint32_t m = cand[i], v = DPFLOW_TABLE_MISS;

		if (DPFLOW_LIKELY(m)) {
			if (DPFLOW_LIKELY(
				dpflow_exact_key_eq(first[i], k, key_len)))
				v = dpflow_exact_ld32(first[i] + key_len);
			else
				v = dpflow_exact_resolve(img, sig[i],
							 m & (m - 1), k);
		}
		values[i] = v;
		hits += v != DPFLOW_TABLE_MISS;
	}
	return hits;
}

/* One chunk, with the common key lengths (16 bytes, an IPv4 address) as
 * constants. */
DPF_HD static inline uint32_t
dpflow_exact_lookup_chunk(const struct dpflow_exact_image *img,
			  const void *const *keys, uint32_t n,
			  uint32_t *DPFLOW_RESTRICT values)
{
	if (img->key_len == 16)
		return dpflow_exact_lookup_chunk_len(img, keys, n, values, 16);
	if (img->key_len == 4)
		return dpflow_exact_lookup_chunk_len(img, keys, n, values, 4);
	return dpflow_exact_lookup_chunk_len(img, keys, n, values,
					     img->key_len);
}

/*
 * Look up @n keys (each key_len bytes at keys[i]); values[i] gets the value
 * or DPFLOW_TABLE_MISS. Returns the number of hits. Any @n works; callers
 * pass bursts of up to DPFLOW_BURST_MAX.
 */
DPF_HD static inline uint32_t
dpflow_exact_lookup_bulk_impl(const struct dpflow_exact_image *img,
			      const void *const *keys, uint32_t n,
			      uint32_t *DPFLOW_RESTRICT values)
{
	uint32_t hits = 0, off = 0;

	while (off < n) {
		uint32_t c =
		    n - off < DPFLOW_EXACT_CHUNK ? n - off : DPFLOW_EXACT_CHUNK;

		hits +=
		    dpflow_exact_lookup_chunk(img, keys + off, c, values + off);
		off += c;
	}
	return hits;
}

#endif /* DPFLOW_TABLE_EXACT_IMPL_H */
