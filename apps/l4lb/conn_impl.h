/*
 * The connection table's layout and its lookup, inline (conn.h has the
 * interface): for conn.c and for the data path's per-packet lookup only.
 */
#ifndef DPFLOW_L4LB_CONN_IMPL_H
#define DPFLOW_L4LB_CONN_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "l4lb/conn.h"

/* stamp word: (ms & L4LB_CONN_STAMP_MAX) << 2 | state */
struct conn_bucket {
	uint32_t sig[L4LB_CONN_WAYS]; /* 0: free way */
	uint32_t stamp[L4LB_CONN_WAYS];
} DPFLOW_CACHE_ALIGNED;

/*
 * An IPv4 flow's entry: struct l4lb_conn in 32 bytes. Its key is two
 * words: the addresses (key.w[0] | key.w[2] << 32, the other address
 * words being zero for IPv4) and key.w[4] (ports, protocol, family).
 * The rest is struct l4lb_conn's 16 bytes from backend to backend_gen,
 * in its order, copied as one block (state unused: 0).
 */
struct conn_entry4 {
	uint64_t addrs;
	uint64_t pw;
	uint32_t backend;
	uint32_t peer;
	uint16_t service;
	uint16_t snat_port;
	uint8_t reverse;
	uint8_t state;
	uint16_t backend_gen;
};
DPFLOW_STATIC_ASSERT(sizeof(struct conn_entry4) == 32, "two a line");
#define CONN_VAL_LEN 16u /* backend .. backend_gen */
/* field @f at the same place in both value blocks */
#define CONN_VAL_SAME(f)                              \
	(offsetof(struct conn_entry4, f) -            \
	     offsetof(struct conn_entry4, backend) == \
	 offsetof(struct l4lb_conn, f) - offsetof(struct l4lb_conn, backend))
DPFLOW_STATIC_ASSERT(CONN_VAL_SAME(peer) && CONN_VAL_SAME(service) &&
			 CONN_VAL_SAME(snat_port) && CONN_VAL_SAME(reverse) &&
			 CONN_VAL_SAME(state) && CONN_VAL_SAME(backend_gen) &&
			 offsetof(struct l4lb_conn, backend_gen) + 2 ==
			     offsetof(struct l4lb_conn, backend) +
				 CONN_VAL_LEN &&
			 sizeof(struct conn_entry4) ==
			     offsetof(struct conn_entry4, backend) +
				 CONN_VAL_LEN,
		     "the same 16 bytes from backend on");

/*
 * A bucket line and its ways' entries after it (IPv4: 320 bytes, IPv6:
 * 576): a lookup's two lines are on one 4 KiB page but for the groups
 * that straddle two. With the entries in an array of their own (two
 * random pages a lookup), 1M flows were 7-9% slower: a second random
 * page costs a lookup more than a second line of the same page (`dpflow
 * bench mem`, PERFORMANCE.md).
 */
struct conn_group4 {
	struct conn_bucket bucket;
	struct conn_entry4 way[L4LB_CONN_WAYS];
};
DPFLOW_STATIC_ASSERT(sizeof(struct conn_group4) == 64 * 5,
		     "a bucket line and four entry lines");

struct conn_group6 {
	struct conn_bucket bucket;
	struct l4lb_conn way[L4LB_CONN_WAYS];
};
DPFLOW_STATIC_ASSERT(sizeof(struct conn_group6) == 64 * (1 + L4LB_CONN_WAYS),
		     "a bucket line and its entry lines");

/* Buckets are numbered 0 .. mask for IPv4 keys, mask + 1 .. 2 * mask + 1
 * for IPv6 keys (a bucket's number & ~mask: its family's first). */
struct l4lb_conn_table {
	struct conn_group4 *g4;
	struct conn_group6 *g6;
	size_t g4_len, g6_len; /* mapped bytes */
	uint32_t mask;	       /* a family's buckets - 1 */
	bool shared;
	uint32_t timeout[4]; /* by state */
	struct l4lb_conn_stats stats;
	uint8_t locks[L4LB_CONN_LOCKS] DPFLOW_CACHE_ALIGNED;
};

#define STAMP(ms, st) ((((ms)&L4LB_CONN_STAMP_MAX) << 2) | (st))
#define STATE_OF(w)   ((w)&3u)
#define MS_OF(w)      ((w) >> 2)
/* ms a thread's now_ms may trail stamps other threads wrote */
#define CONN_SKEW_MAX 0x10000u
/* longest timeout: ages beyond it are taken for stamps ahead */
#define CONN_TIMEOUT_MAX (L4LB_CONN_STAMP_MAX - CONN_SKEW_MAX)

static inline bool bucket_v6(const struct l4lb_conn_table *ct, uint32_t b)
{
	return b > ct->mask;
}

/* Bucket @b's line. */
static inline struct conn_bucket *bucket_at(const struct l4lb_conn_table *ct,
					    uint32_t b)
{
	return bucket_v6(ct, b) ? &ct->g6[b & ct->mask].bucket
				: &ct->g4[b].bucket;
}

/* The entries of way @w of bucket @b, by family. */
static inline struct conn_entry4 *entry4_at(const struct l4lb_conn_table *ct,
					    uint32_t b, unsigned w)
{
	return &ct->g4[b].way[w];
}

static inline struct l4lb_conn *entry6_at(const struct l4lb_conn_table *ct,
					  uint32_t b, unsigned w)
{
	return &ct->g6[b & ct->mask].way[w];
}

/* The bucket of hash @h of a key of family @v6, and its alternate. */
static inline uint32_t key_bucket(const struct l4lb_conn_table *ct, uint64_t h,
				  uint8_t v6)
{
	return (v6 ? ct->mask + 1 : 0) + ((uint32_t)h & ct->mask);
}

static inline uint32_t key_alt_bucket(const struct l4lb_conn_table *ct,
				      uint32_t b, uint64_t h)
{
	return (b & ~ct->mask) +
	       l4lb_conn_alt_bucket(b & ct->mask, h, ct->mask);
}

static inline uint32_t lock_of(uint32_t bucket)
{
	return bucket & (L4LB_CONN_LOCKS - 1);
}

static inline void lock_take(struct l4lb_conn_table *ct, uint32_t l)
{
	if (!ct->shared)
		return;
	for (;;) {
		if (!__atomic_exchange_n(&ct->locks[l], 1, __ATOMIC_ACQUIRE))
			return;
		while (__atomic_load_n(&ct->locks[l], __ATOMIC_RELAXED))
			__builtin_ia32_pause();
	}
}

static inline void lock_give(struct l4lb_conn_table *ct, uint32_t l)
{
	if (ct->shared)
		__atomic_store_n(&ct->locks[l], 0, __ATOMIC_RELEASE);
}

static inline uint32_t sig_of(uint64_t h)
{
	return (uint32_t)(h >> 32) | 1u;
}

static inline bool key_eq(const struct l4lb_conn_key *a,
			  const struct l4lb_conn_key *b)
{
	return ((a->w[0] ^ b->w[0]) | (a->w[1] ^ b->w[1]) |
		(a->w[2] ^ b->w[2]) | (a->w[3] ^ b->w[3]) |
		(a->w[4] ^ b->w[4])) == 0;
}

/* An IPv4 key's addresses as struct conn_entry4 holds them. */
static inline uint64_t key4_addrs(const struct l4lb_conn_key *k)
{
	return (uint64_t)(uint32_t)k->w[0] | k->w[2] << 32;
}

/* Whether way @w of bucket @b (of family @v6) holds key @k. */
static DPFLOW_ALWAYS_INLINE bool way_key_eq(const struct l4lb_conn_table *ct,
					    uint32_t b, unsigned w,
					    const struct l4lb_conn_key *k,
					    bool v6)
{
	const struct conn_entry4 *e;

	if (v6)
		return key_eq(&entry6_at(ct, b, w)->key, k);
	e = entry4_at(ct, b, w);
	return ((e->addrs ^ key4_addrs(k)) | (e->pw ^ k->w[4])) == 0;
}

/* Copy way @w of bucket @b (of family @v6) to @out (state: FREE). */
static DPFLOW_ALWAYS_INLINE void way_read(const struct l4lb_conn_table *ct,
					  uint32_t b, unsigned w,
					  struct l4lb_conn *out, bool v6)
{
	const struct conn_entry4 *e;

	if (v6) {
		*out = *entry6_at(ct, b, w);
		out->state = L4LB_CONN_FREE;
		return;
	}
	e = entry4_at(ct, b, w);
	out->key.w[0] = (uint32_t)e->addrs;
	out->key.w[1] = 0;
	out->key.w[2] = e->addrs >> 32;
	out->key.w[3] = 0;
	out->key.w[4] = e->pw;
	memcpy(&out->backend, &e->backend, CONN_VAL_LEN);
	memset(out->pad, 0, sizeof(out->pad));
}

/*
 * How long ago @stamp was written, in ms, at @now_ms. Data threads read
 * the clock once a burst, so a stamp another thread wrote may be a little
 * ahead of @now_ms: such a stamp is young (age 0), not 2^30 ms old.
 */
static inline uint32_t age_of(uint32_t stamp, uint32_t now_ms)
{
	uint32_t age = ((now_ms & L4LB_CONN_STAMP_MAX) - MS_OF(stamp)) &
		       L4LB_CONN_STAMP_MAX;

	return age > L4LB_CONN_STAMP_MAX - CONN_SKEW_MAX ? 0 : age;
}

static inline bool expired(const struct l4lb_conn_table *ct, uint32_t stamp,
			   uint32_t now_ms)
{
	return age_of(stamp, now_ms) > ct->timeout[STATE_OF(stamp)];
}

/* Bit w set where the bucket's signature w is @sig. */
static inline unsigned sig_matches(const struct conn_bucket *bk, uint32_t sig)
{
#ifdef __SSE2__
	__m128i s = _mm_set1_epi32((int)sig);
	__m128i lo = _mm_cmpeq_epi32(
	    _mm_load_si128((const __m128i *)(const void *)&bk->sig[0]), s);
	__m128i hi = _mm_cmpeq_epi32(
	    _mm_load_si128((const __m128i *)(const void *)&bk->sig[4]), s);

	return (unsigned)_mm_movemask_ps(_mm_castsi128_ps(lo)) |
	       (unsigned)_mm_movemask_ps(_mm_castsi128_ps(hi)) << 4;
#else
	unsigned m = 0;

	for (unsigned w = 0; w < L4LB_CONN_WAYS; w++)
		m |= (unsigned)(bk->sig[w] == sig) << w;
	return m;
#endif
}

/* The state a hit in state @st moves to on a request for @req (FREE:
 * stay; nothing leaves CLOSING but for CLOSING). */
static inline uint8_t state_move(uint8_t st, uint8_t req)
{
	if (req == L4LB_CONN_FREE ||
	    (st == L4LB_CONN_CLOSING && req != L4LB_CONN_CLOSING))
		return st;
	return req;
}

/*
 * A hit on way @w moves it from state @from to @to and refreshes its
 * stamp (@age ms old, of a state whose timeout is @timeout), unless
 * neither changes much: the state stays and the stamp is younger than
 * 1/2^L4LB_CONN_REFRESH_SHIFT of the timeout. Most hits then leave the
 * bucket line clean (no write back to memory for a line that is read at
 * random among hundreds of megabytes). Lock held.
 */
static inline void refresh_at(struct conn_bucket *bk, unsigned w,
			      uint32_t now_ms, uint8_t from, uint8_t to,
			      uint32_t age, uint32_t timeout)
{
	if (to != from || age >= timeout >> L4LB_CONN_REFRESH_SHIFT)
		bk->stamp[w] = STAMP(now_ms, to);
}

/*
 * l4lb_conn_prefetch() and l4lb_conn_prefetch_entry(), inline for the
 * data path's prefetch loops. Always inlined, or GCC deletes their calls
 * (DPFLOW_ALWAYS_INLINE; seen with GCC 12 -O3: no entry prefetch at all,
 * 1M flows 2.5x slower).
 */
static DPFLOW_ALWAYS_INLINE void
l4lb_conn_prefetch_inline(const struct l4lb_conn_table *ct, uint64_t h,
			  uint8_t v6)
{
	uint32_t b = (uint32_t)h & ct->mask;

	DPFLOW_PREFETCH(v6 ? &ct->g6[b].bucket : &ct->g4[b].bucket);
}

static DPFLOW_ALWAYS_INLINE void
l4lb_conn_prefetch_entry_inline(const struct l4lb_conn_table *ct, uint64_t h,
				uint8_t v6)
{
	uint32_t b = (uint32_t)h & ct->mask;
	unsigned m;

	/* a hint: a racing writer can only make it prefetch a wrong line;
	 * no match: the key is new or in its alternate bucket */
	if (v6) {
		m = sig_matches(&ct->g6[b].bucket, sig_of(h));
		if (m)
			DPFLOW_PREFETCH(&ct->g6[b].way[__builtin_ctz(m)]);
		else
			DPFLOW_PREFETCH(
			    &ct->g6[l4lb_conn_alt_bucket(b, h, ct->mask)]
				 .bucket);
		return;
	}
	m = sig_matches(&ct->g4[b].bucket, sig_of(h));
	if (m)
		DPFLOW_PREFETCH(&ct->g4[b].way[__builtin_ctz(m)]);
	else
		DPFLOW_PREFETCH(
		    &ct->g4[l4lb_conn_alt_bucket(b, h, ct->mask)].bucket);
}

/*
 * The live entry of @k (signature @sig) in bucket @b of its family
 * (@v6: a constant where inlined), moved to @state and copied to @out as
 * l4lb_conn_lookup() does; its id or L4LB_CONN_NONE. find_id() and
 * refresh() in one pass over the bucket (the path of every packet of a
 * tracked flow: the age is worked out once). Lock held.
 */
static DPFLOW_ALWAYS_INLINE uint32_t lookup_in(struct l4lb_conn_table *ct,
					       uint32_t b,
					       const struct l4lb_conn_key *k,
					       uint32_t sig, uint32_t now_ms,
					       uint8_t state,
					       struct l4lb_conn *out, bool v6)
{
	struct conn_bucket *bk =
	    v6 ? &ct->g6[b & ct->mask].bucket : &ct->g4[b].bucket;

	for (unsigned m = sig_matches(bk, sig); m; m &= m - 1) {
		unsigned w = (unsigned)__builtin_ctz(m);
		uint32_t stamp = bk->stamp[w], age = age_of(stamp, now_ms);
		uint32_t timeout = ct->timeout[STATE_OF(stamp)];
		uint8_t st = (uint8_t)STATE_OF(stamp), to;

		if (age > timeout || !way_key_eq(ct, b, w, k, v6))
			continue;
		to = state_move(st, state);
		if (out) {
			way_read(ct, b, w, out, v6);
			out->state = st;
		}
		refresh_at(bk, w, now_ms, st, to, age, timeout);
		return b * L4LB_CONN_WAYS + w;
	}
	return L4LB_CONN_NONE;
}

/* The rest of l4lb_conn_lookup_inline(), out of line (conn.c): the
 * whole lookup (a shared table: under the locks of the key's two
 * buckets; or an IPv6 key), or an IPv4 key's alternate bucket (few keys
 * live there). */
uint32_t l4lb_conn_lookup_out_(struct l4lb_conn_table *ct,
			       const struct l4lb_conn_key *k, uint64_t h,
			       uint32_t now_ms, uint8_t state,
			       struct l4lb_conn *out);
uint32_t l4lb_conn_lookup_alt4_(struct l4lb_conn_table *ct,
				const struct l4lb_conn_key *k, uint64_t h,
				uint32_t now_ms, uint8_t state,
				struct l4lb_conn *out);

/* l4lb_conn_lookup(), inline for the data path: an IPv4 key's bucket,
 * then its alternate. */
static inline uint32_t l4lb_conn_lookup_inline(struct l4lb_conn_table *ct,
					       const struct l4lb_conn_key *k,
					       uint64_t h, uint32_t now_ms,
					       uint8_t state,
					       struct l4lb_conn *out)
{
	uint32_t id;

	if (ct->shared || k->v6)
		return l4lb_conn_lookup_out_(ct, k, h, now_ms, state, out);
	id = lookup_in(ct, (uint32_t)h & ct->mask, k, sig_of(h), now_ms, state,
		       out, false);
	if (DPFLOW_UNLIKELY(id == L4LB_CONN_NONE))
		id = l4lb_conn_lookup_alt4_(ct, k, h, now_ms, state, out);
	return id;
}

#endif /* DPFLOW_L4LB_CONN_IMPL_H */
