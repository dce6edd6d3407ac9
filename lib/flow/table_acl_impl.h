/*
 * ACL table (ACL and CONTROL pipes): the image layout and the lookup code,
 * shared by the CPU and the GPU targets.
 *
 * Everything here is DPF_HD and written in the common subset of C11 and
 * CUDA C++ (DESIGN.md §1). table_acl.c builds images and wraps these
 * functions for the CPU; the GPU target copies an image byte for byte to
 * device memory and calls the same functions in its kernels.
 *
 * An image classifies keys against a set of rules. A key is an array of
 * n_fields uint32_t words, one per field, in host byte order (an 8- or
 * 16-bit field in the low bits of its word, the rest zero). The answer is
 * the value of the best matching rule (lowest rank: rules are ranked by
 * priority, then id) or DPFLOW_TABLE_MISS.
 *
 * Layout: one 64-byte-aligned block, every reference an index or an offset
 * from the block's start, so that a memcpy of `size` bytes anywhere
 * (64-byte aligned) answers the same:
 *
 *   struct dpflow_acl_image            256 bytes: magic, sizes, offsets,
 *                                      a descriptor per decision tree
 *   uint32_t jump[n_jump_words]        at jumps_off: trees' jump tables
 *   struct dpflow_acl_node[n_nodes]    at nodes_off, 64 bytes each
 *   leaf blocks                        at leaves_off, n_leaf_lines lines
 *
 * Decision trees (HyperSplit-style, multi-way): a node splits the range of
 * one field into up to 8 intervals at 7 ascending thresholds; the child of a
 * key is the number of thresholds <= the key's field value. Unused
 * thresholds are UINT32_MAX and their children repeat the last real child,
 * so the count needs no branch. A child reference is a node index, or
 * DPFLOW_ACL_LEAF | the leaf's first 64-byte line (from leaves_off).
 * Children always have higher indices than their parent. A tree starts at
 * its root, or at the entry of its jump table (2^bits child references)
 * picked by the top bits of one key field: address blocks are told apart
 * in one load.
 *
 * A leaf is one or more blocks of 4 rules in rank order, each block a
 * whole number of 64-byte lines of uint32_t words, field-major so that the
 * 4 rules are tested side by side without branches (F = n_fields):
 *
 *   rank[4] value[4] lo[F][4] span[F][4]                    (plain)
 *   rank[4] value[4] mask[F][4] lo[F][4] span[F][4]         (masked)
 *
 * A rule matches when, for every field, (key & mask) - lo <= span
 * (unsigned; plain blocks have no mask): a range [lo, lo + span], or, with
 * span 0, a value under a mask. A rank word holds the rank in its low 24
 * bits; rank[0] also carries DPFLOW_ACL_BLK_LAST on a leaf's last block and
 * DPFLOW_ACL_BLK_MASKED on masked blocks. Unused places have rank
 * DPFLOW_ACL_RANK_NONE, which never wins. Line 0 is the empty leaf.
 *
 * Several trees may hold disjoint parts of the rule set (to bound rule
 * replication); a key's answer is the lowest rank found in any tree. Trees
 * are ordered by their best rank (min_rank); a key whose answer is already
 * better than a tree's best rank skips that tree's leaf, and rules of a
 * leaf ranked after the answer so far never win.
 *
 * Nothing here allocates, fails or reads outside the image given a
 * well-formed, 64-byte-aligned image (dpflow_acl_image_check in
 * table_acl.h) and keys of n_fields words. Any number of threads may look
 * up in one image at once; the image must not change meanwhile.
 */
#ifndef DPFLOW_TABLE_ACL_IMPL_H
#define DPFLOW_TABLE_ACL_IMPL_H

#include <stdint.h>

#include "dpflow/common.h"
#include "dpflow/table_acl.h" /* DPFLOW_ACL_FIELDS_MAX, _TREES_MAX */
#include "flow/table.h"

/*
 * x86 builds (not CUDA) test a node's thresholds and a leaf block's rules
 * with SIMD instructions when the compiler targets them (AVX2 for the 7
 * thresholds, SSE4.1 for one field of the 4 rules per compare).
 * The _portable functions, which the GPU runs, are the reference and give
 * the same answers; the tests compare the two.
 */
#if !defined(__CUDACC__) && (defined(__x86_64__) || defined(__i386__))
#if defined(__SSE4_1__)
#include <immintrin.h>
#define DPFLOW_ACL_SIMD_SCAN 1
#endif
#if defined(__AVX2__) && defined(__POPCNT__)
#define DPFLOW_ACL_SIMD_NODE 1
#endif
#endif

#define DPFLOW_ACL_MAGIC   0x4c434144u /* "DACL" */
#define DPFLOW_ACL_VERSION 1u

/* Children per node, and thresholds (one fewer). */
#define DPFLOW_ACL_FANOUT 8
#define DPFLOW_ACL_THRESH (DPFLOW_ACL_FANOUT - 1)

/* Child reference: a leaf's first line, else a node index. */
#define DPFLOW_ACL_LEAF 0x80000000u
/* Rank words: the rank, and flags in rank[0] of a block. */
#define DPFLOW_ACL_RANK_MASK  0x00ffffffu
#define DPFLOW_ACL_RANK_NONE  0x00ffffffu /* an unused place */
#define DPFLOW_ACL_BLK_LAST   0x80000000u
#define DPFLOW_ACL_BLK_MASKED 0x40000000u
/* Rules in a leaf block. */
#define DPFLOW_ACL_BLK_RULES 4
/* uint32_t words in a 64-byte line. */
#define DPFLOW_ACL_LINE_WORDS 16

/* Keys classified together by the bulk walk (its state lives on the
 * stack). */
#define DPFLOW_ACL_CHUNK 64

/*
 * One decision tree: its root, or, when bits is not 0, a jump table of
 * 2^bits child references at word @jump of the jump section, indexed by
 * (key[field] >> shift) & (2^bits - 1): the top bits of one field pick a
 * subtree in one step.
 */
struct dpflow_acl_tree {
	uint32_t root;	   /* child reference, when bits is 0 */
	uint32_t min_rank; /* best rank in the tree */
	uint32_t jump;	   /* first word of the jump table */
	uint8_t field;	   /* key word that indexes the jump table */
	uint8_t shift;
	uint8_t bits; /* 0: no jump table; else 1..DPFLOW_ACL_JUMP_BITS_MAX */
	uint8_t pad;
};

/* Largest jump table: 2^12 references (16 KiB): larger ones cut few
 * steps and cost cache (measured on the acl-10k bench set). */
#define DPFLOW_ACL_JUMP_BITS_MAX 12

struct dpflow_acl_image {
	uint32_t magic;	       /* DPFLOW_ACL_MAGIC */
	uint32_t version;      /* DPFLOW_ACL_VERSION */
	uint64_t size;	       /* bytes of the whole image, a multiple of 64 */
	uint32_t n_fields;     /* words per key */
	uint32_t n_rules;      /* rules the image was built from */
	uint32_t n_trees;      /* 1..DPFLOW_ACL_TREES_MAX */
	uint32_t n_nodes;      /* entries at nodes_off */
	uint64_t jumps_off;    /* bytes from the image start, 64-aligned */
	uint64_t n_jump_words; /* uint32_t child references at jumps_off */
	uint64_t nodes_off;    /* bytes from the image start, 64-aligned */
	uint64_t leaves_off;   /* bytes from the image start, 64-aligned */
	uint64_t n_leaf_lines; /* 64-byte lines at leaves_off */
	uint32_t block_words;  /* plain block: dpflow_acl_block_words */
	uint32_t block_words_masked;			   /* masked block */
	struct dpflow_acl_tree tree[DPFLOW_ACL_TREES_MAX]; /* n_trees used */
	uint8_t reserved[48];
};

DPFLOW_STATIC_ASSERT(sizeof(struct dpflow_acl_image) == 256,
		     "ACL image header is four cache lines");

struct dpflow_acl_node {
	uint32_t thr[DPFLOW_ACL_THRESH];   /* ascending; unused: UINT32_MAX */
	uint32_t field;			   /* key word tested */
	uint32_t child[DPFLOW_ACL_FANOUT]; /* child references */
};

DPFLOW_STATIC_ASSERT(sizeof(struct dpflow_acl_node) == 64,
		     "ACL node is one cache line");

DPF_HD static inline const struct dpflow_acl_node *
dpflow_acl_nodes(const struct dpflow_acl_image *img)
{
	return (const struct dpflow_acl_node *)((const uint8_t *)img +
						img->nodes_off);
}

DPF_HD static inline const uint32_t *
dpflow_acl_jumps(const struct dpflow_acl_image *img)
{
	return (const uint32_t *)((const uint8_t *)img + img->jumps_off);
}

/* Where @key starts in tree @tr: its root, or its jump table's entry. */
DPF_HD static inline uint32_t
dpflow_acl_tree_start(const struct dpflow_acl_image *DPFLOW_RESTRICT img,
		      const struct dpflow_acl_tree *DPFLOW_RESTRICT tr,
		      const uint32_t *DPFLOW_RESTRICT key)
{
	if (!tr->bits)
		return tr->root;
	return dpflow_acl_jumps(img)[tr->jump + ((key[tr->field] >> tr->shift) &
						 ((1u << tr->bits) - 1u))];
}

DPF_HD static inline const uint32_t *
dpflow_acl_leaves(const struct dpflow_acl_image *img)
{
	return (const uint32_t *)((const uint8_t *)img + img->leaves_off);
}

/* Words of a leaf block for @n_fields fields, with or without masks. */
DPF_HD static inline uint32_t dpflow_acl_block_words(uint32_t n_fields,
						     int masked)
{
	uint32_t w = 2 * DPFLOW_ACL_BLK_RULES +
		     (masked ? 3 : 2) * DPFLOW_ACL_BLK_RULES * n_fields;

	return (w + DPFLOW_ACL_LINE_WORDS - 1) &
	       ~(uint32_t)(DPFLOW_ACL_LINE_WORDS - 1);
}

/* Which child of @nd a field value @v falls in (0..7). */
DPF_HD static inline uint32_t
dpflow_acl_child_idx_portable(const struct dpflow_acl_node *DPFLOW_RESTRICT nd,
			      uint32_t v)
{
	return (uint32_t)(v >= nd->thr[0]) + (uint32_t)(v >= nd->thr[1]) +
	       (uint32_t)(v >= nd->thr[2]) + (uint32_t)(v >= nd->thr[3]) +
	       (uint32_t)(v >= nd->thr[4]) + (uint32_t)(v >= nd->thr[5]) +
	       (uint32_t)(v >= nd->thr[6]);
}

DPF_HD static inline uint32_t
dpflow_acl_child_idx(const struct dpflow_acl_node *DPFLOW_RESTRICT nd,
		     uint32_t v)
{
#if defined(DPFLOW_ACL_SIMD_NODE)
	/* thresholds and the field word in one load; count thr <= v */
	__m256i t = _mm256_loadu_si256((const __m256i *)(const void *)nd);
#if defined(__AVX512VL__)
	__mmask8 ge = _mm256_cmpge_epu32_mask(_mm256_set1_epi32((int)v), t);

	return (uint32_t)__builtin_popcount((unsigned)ge & 0x7fu);
#else
	__m256i bias = _mm256_set1_epi32((int)0x80000000u);
	__m256i gt =
	    _mm256_cmpgt_epi32(_mm256_xor_si256(t, bias),
			       _mm256_set1_epi32((int)(v ^ 0x80000000u)));
	unsigned m = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(gt));

	return 7u - (uint32_t)__builtin_popcount(m & 0x7fu);
#endif
#else
	return dpflow_acl_child_idx_portable(nd, v);
#endif
}

/* Walk one tree from @ref down to a leaf; returns the leaf's reference. */
DPF_HD static inline uint32_t
dpflow_acl_walk(const struct dpflow_acl_node *DPFLOW_RESTRICT nodes,
		uint32_t ref, const uint32_t *DPFLOW_RESTRICT key)
{
	while (!(ref & DPFLOW_ACL_LEAF)) {
		const struct dpflow_acl_node *nd = nodes + ref;

		ref = nd->child[dpflow_acl_child_idx(nd, key[nd->field])];
	}
	return ref;
}

/* The first word of the leaf @ref (a child reference with
 * DPFLOW_ACL_LEAF). */
DPF_HD static inline const uint32_t *
dpflow_acl_leaf_at(const struct dpflow_acl_image *img, uint32_t ref)
{
	return dpflow_acl_leaves(img) +
	       (uint64_t)(ref & ~DPFLOW_ACL_LEAF) * DPFLOW_ACL_LINE_WORDS;
}

/* The rank and value of place @j of @blk if its bit is the lowest set in
 * the match mask @m (not 0). */
DPF_HD static inline uint32_t dpflow_acl_pick(const uint32_t *blk, uint32_t m,
					      uint32_t *DPFLOW_RESTRICT value)
{
	uint32_t j = (m & 1) ? 0 : (m & 2) ? 1 : (m & 4) ? 2 : 3;

	*value = blk[DPFLOW_ACL_BLK_RULES + j];
	return blk[j] & DPFLOW_ACL_RANK_MASK;
}

/*
 * Scan the leaf @ref (a child reference with DPFLOW_ACL_LEAF) for the
 * first rule matching @key with a rank below @best; returns that rule's
 * rank (and its value in *@value), or @best if none.
 */
DPF_HD static inline uint32_t dpflow_acl_leaf_scan_portable(
    const struct dpflow_acl_image *DPFLOW_RESTRICT img, uint32_t ref,
    const uint32_t *DPFLOW_RESTRICT key, uint32_t best,
    uint32_t *DPFLOW_RESTRICT value)
{
	const uint32_t *blk = dpflow_acl_leaf_at(img, ref);
	uint32_t nf = img->n_fields;

	for (;;) {
		uint32_t head = blk[0], masked = head & DPFLOW_ACL_BLK_MASKED;
		const uint32_t *mk = blk + 2 * DPFLOW_ACL_BLK_RULES;
		const uint32_t *lo = masked ? mk + 4 * nf : mk;
		const uint32_t *span = lo + 4 * nf;
		uint32_t ok[DPFLOW_ACL_BLK_RULES], m = 0;

		for (uint32_t j = 0; j < DPFLOW_ACL_BLK_RULES; j++)
			ok[j] =
			    (uint32_t)((blk[j] & DPFLOW_ACL_RANK_MASK) < best);
		for (uint32_t f = 0; f < nf; f++) {
			for (uint32_t j = 0; j < DPFLOW_ACL_BLK_RULES; j++) {
				uint32_t k =
				    masked ? key[f] & mk[4 * f + j] : key[f];

				ok[j] &= (uint32_t)(k - lo[4 * f + j] <=
						    span[4 * f + j]);
			}
		}
		for (uint32_t j = 0; j < DPFLOW_ACL_BLK_RULES; j++)
			m |= ok[j] << j;
		if (m)
			return dpflow_acl_pick(blk, m, value);
		if (head & DPFLOW_ACL_BLK_LAST)
			return best;
		blk += masked ? img->block_words_masked : img->block_words;
	}
}

#if defined(DPFLOW_ACL_SIMD_SCAN)
/* SSE4.1: one field of the block's 4 rules per compare. */
static inline uint32_t
dpflow_acl_leaf_scan_sse(const struct dpflow_acl_image *DPFLOW_RESTRICT img,
			 uint32_t ref, const uint32_t *DPFLOW_RESTRICT key,
			 uint32_t best, uint32_t *DPFLOW_RESTRICT value)
{
	const uint32_t *blk = dpflow_acl_leaf_at(img, ref);
	const __m128i vbest = _mm_set1_epi32((int)best);
	const __m128i rmask = _mm_set1_epi32((int)DPFLOW_ACL_RANK_MASK);
	uint32_t nf = img->n_fields;

	for (;;) {
		uint32_t head = blk[0], masked = head & DPFLOW_ACL_BLK_MASKED;
		const __m128i *mk = (const __m128i *)(const void *)blk + 2;
		const __m128i *lo = masked ? mk + nf : mk;
		const __m128i *span = lo + nf;
		/* ranks and best are below 2^24: a signed compare works */
		__m128i ok = _mm_cmplt_epi32(
		    _mm_and_si128(
			_mm_load_si128((const __m128i *)(const void *)blk),
			rmask),
		    vbest);
		uint32_t m;

		for (uint32_t f = 0; f < nf; f++) {
			__m128i k = _mm_set1_epi32((int)key[f]);
			__m128i d;

			if (masked)
				k = _mm_and_si128(k, _mm_load_si128(mk + f));
			d = _mm_sub_epi32(k, _mm_load_si128(lo + f));
			/* d <= span, unsigned: min(d, span) == d */
			ok = _mm_and_si128(
			    ok,
			    _mm_cmpeq_epi32(
				_mm_min_epu32(d, _mm_load_si128(span + f)), d));
		}
		m = (uint32_t)_mm_movemask_ps(_mm_castsi128_ps(ok));
		{
			/* take the match without a branch: whether a key
			 * matches is what a predictor cannot guess */
			uint32_t j = (uint32_t)__builtin_ctz(m | 0x10u) & 3u;
			uint32_t sel = 0u - (uint32_t)(m != 0);

			best = ((blk[j] & DPFLOW_ACL_RANK_MASK) & sel) |
			       (best & ~sel);
			*value = (blk[DPFLOW_ACL_BLK_RULES + j] & sel) |
				 (*value & ~sel);
		}
		if (m | (head & DPFLOW_ACL_BLK_LAST))
			return best;
		blk += masked ? img->block_words_masked : img->block_words;
	}
}
#endif

/* dpflow_acl_leaf_scan_portable, with the best instructions at hand. */
DPF_HD static inline uint32_t
dpflow_acl_leaf_scan(const struct dpflow_acl_image *DPFLOW_RESTRICT img,
		     uint32_t ref, const uint32_t *DPFLOW_RESTRICT key,
		     uint32_t best, uint32_t *DPFLOW_RESTRICT value)
{
#if defined(DPFLOW_ACL_SIMD_SCAN)
	return dpflow_acl_leaf_scan_sse(img, ref, key, best, value);
#else
	return dpflow_acl_leaf_scan_portable(img, ref, key, best, value);
#endif
}

/*
 * Classify one key (n_fields words). Returns the best matching rule's
 * value or DPFLOW_TABLE_MISS. The GPU target calls this per thread.
 */
DPF_HD static inline uint32_t
dpflow_acl_lookup_impl(const struct dpflow_acl_image *DPFLOW_RESTRICT img,
		       const uint32_t *DPFLOW_RESTRICT key)
{
	const struct dpflow_acl_node *nodes = dpflow_acl_nodes(img);
	uint32_t best = DPFLOW_ACL_RANK_NONE, value = DPFLOW_TABLE_MISS;

	for (uint32_t t = 0; t < img->n_trees; t++) {
		const struct dpflow_acl_tree *tr = &img->tree[t];
		uint32_t leaf;

		if (tr->min_rank >= best)
			break;
		leaf = dpflow_acl_walk(
		    nodes, dpflow_acl_tree_start(img, tr, key), key);
		best = dpflow_acl_leaf_scan(img, leaf, key, best, &value);
	}
	return value;
}

/*
 * dpflow_acl_lookup_impl with the portable node and leaf code only: what
 * the GPU computes, for tests that compare it with the CPU's paths.
 */
DPF_HD static inline uint32_t dpflow_acl_lookup_portable_impl(
    const struct dpflow_acl_image *DPFLOW_RESTRICT img,
    const uint32_t *DPFLOW_RESTRICT key)
{
	const struct dpflow_acl_node *nodes = dpflow_acl_nodes(img);
	uint32_t best = DPFLOW_ACL_RANK_NONE, value = DPFLOW_TABLE_MISS;

	for (uint32_t t = 0; t < img->n_trees; t++) {
		const struct dpflow_acl_tree *tr = &img->tree[t];
		uint32_t ref = dpflow_acl_tree_start(img, tr, key);

		if (tr->min_rank >= best)
			break;
		while (!(ref & DPFLOW_ACL_LEAF)) {
			const struct dpflow_acl_node *nd = nodes + ref;

			ref = nd->child[dpflow_acl_child_idx_portable(
			    nd, key[nd->field])];
		}
		best =
		    dpflow_acl_leaf_scan_portable(img, ref, key, best, &value);
	}
	return value;
}

/*
 * Prefetch the first block of the leaf @ref (up to 4 lines). Always
 * inlined, or GCC deletes its calls (DPFLOW_ALWAYS_INLINE): these
 * prefetches were missing from the CPU build until 2026-12-04.
 */
DPF_HD static DPFLOW_ALWAYS_INLINE void
dpflow_acl_prefetch_leaf(const struct dpflow_acl_image *DPFLOW_RESTRICT img,
			 uint32_t ref)
{
	const uint32_t *blk = dpflow_acl_leaf_at(img, ref);
	uint32_t lines = img->block_words / DPFLOW_ACL_LINE_WORDS;

	DPFLOW_PREFETCH(blk);
	if (lines > 1)
		DPFLOW_PREFETCH(blk + DPFLOW_ACL_LINE_WORDS);
	if (lines > 2)
		DPFLOW_PREFETCH(blk + 2 * DPFLOW_ACL_LINE_WORDS);
	if (lines > 3)
		DPFLOW_PREFETCH(blk + 3 * DPFLOW_ACL_LINE_WORDS);
}

/*
 * Classify up to DPFLOW_ACL_CHUNK keys. The walks of every key in every
 * tree advance one level per pass, each step prefetching the next node or
 * leaf, so that the memory accesses of many walks overlap; then each key's
 * leaves are scanned in tree order.
 */
DPF_HD static inline uint32_t
dpflow_acl_classify_chunk(const struct dpflow_acl_image *DPFLOW_RESTRICT img,
			  const uint32_t *const *DPFLOW_RESTRICT keys,
			  uint32_t n, uint32_t *DPFLOW_RESTRICT values)
{
	const struct dpflow_acl_node *nodes = dpflow_acl_nodes(img);
	uint32_t nt = img->n_trees, nw = 0, hits = 0;
	/* walk s: key s % CHUNK in tree s / CHUNK */
	uint32_t ref[DPFLOW_ACL_CHUNK * DPFLOW_ACL_TREES_MAX];
	uint16_t walk[DPFLOW_ACL_CHUNK * DPFLOW_ACL_TREES_MAX];

	/* the keys, then every key's jump table entries, then the roots */
	for (uint32_t i = 0; i < n; i++)
		DPFLOW_PREFETCH(keys[i]);
	for (uint32_t t = 0; t < nt; t++) {
		const struct dpflow_acl_tree *tr = &img->tree[t];
		const uint32_t *jt = dpflow_acl_jumps(img) + tr->jump;
		uint32_t jm = (1u << tr->bits) - 1u;

		for (uint32_t i = 0; tr->bits && i < n; i++)
			DPFLOW_PREFETCH(
			    jt + ((keys[i][tr->field] >> tr->shift) & jm));
	}
	for (uint32_t t = 0; t < nt; t++) {
		const struct dpflow_acl_tree *tr = &img->tree[t];

		for (uint32_t i = 0; i < n; i++) {
			uint32_t s = t * DPFLOW_ACL_CHUNK + i;
			uint32_t r = dpflow_acl_tree_start(img, tr, keys[i]);

			ref[s] = r;
			if (!(r & DPFLOW_ACL_LEAF)) {
				DPFLOW_PREFETCH(nodes + r);
				walk[nw++] = (uint16_t)s;
			} else {
				dpflow_acl_prefetch_leaf(img, r);
			}
		}
	}
	while (nw) {
		uint32_t m = 0;

		for (uint32_t k = 0; k < nw; k++) {
			uint32_t s = walk[k];
			const struct dpflow_acl_node *nd = nodes + ref[s];
			uint32_t r = nd->child[dpflow_acl_child_idx(
			    nd, keys[s % DPFLOW_ACL_CHUNK][nd->field])];

			ref[s] = r;
			if (r & DPFLOW_ACL_LEAF) {
				dpflow_acl_prefetch_leaf(img, r);
			} else {
				DPFLOW_PREFETCH(nodes + r);
				walk[m++] = (uint16_t)s;
			}
		}
		nw = m;
	}
	for (uint32_t i = 0; i < n; i++) {
		uint32_t best = DPFLOW_ACL_RANK_NONE, v = DPFLOW_TABLE_MISS;

		/* bring the leaves of a key a few places ahead back to L1 */
		if (i + 4 < n)
			for (uint32_t t = 0; t < nt; t++)
				dpflow_acl_prefetch_leaf(
				    img, ref[t * DPFLOW_ACL_CHUNK + i + 4]);
		for (uint32_t t = 0; t < nt; t++)
			if (best > img->tree[t].min_rank)
				best = dpflow_acl_leaf_scan(
				    img, ref[t * DPFLOW_ACL_CHUNK + i], keys[i],
				    best, &v);
		values[i] = v;
		hits += v != DPFLOW_TABLE_MISS;
	}
	return hits;
}

/*
 * Classify @n keys (keys[i] points at n_fields words); values[i] gets the
 * value of the best matching rule or DPFLOW_TABLE_MISS. Returns the number
 * of hits.
 */
DPF_HD static inline uint32_t
dpflow_acl_classify_impl(const struct dpflow_acl_image *DPFLOW_RESTRICT img,
			 const uint32_t *const *DPFLOW_RESTRICT keys,
			 uint32_t n, uint32_t *DPFLOW_RESTRICT values)
{
	uint32_t hits = 0;

	for (uint32_t i = 0; i < n; i += DPFLOW_ACL_CHUNK) {
		uint32_t c =
		    n - i < DPFLOW_ACL_CHUNK ? n - i : DPFLOW_ACL_CHUNK;

		hits += dpflow_acl_classify_chunk(img, keys + i, c, values + i);
	}
	return hits;
}

#endif /* DPFLOW_TABLE_ACL_IMPL_H */
