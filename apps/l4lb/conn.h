/*
 * The balancer's connection table: which backend each tracked flow went
 * to, so that an established flow keeps its backend when the backend set
 * changes, and (full NAT) the SNAT binding of each flow with its reverse
 * key, so that replies are translated back.
 *
 * A fixed-size set-associative table: buckets of 8 ways, entry id / 8
 * the bucket of entry id. IPv4 and IPv6 flows have buckets of their own,
 * each family as many (capacity / 8): ids 0 .. capacity - 1 are IPv4
 * flows' entries, capacity .. 2 * capacity - 1 IPv6 flows'. An IPv4
 * flow's entry is 32 bytes (its key in 16), an IPv6 flow's 64: a bucket
 * of IPv4 flows spans 320 bytes, of IPv6 flows 576, and most traffic
 * (IPv4) finds its flows in a table not much over half the size that
 * one entry size for both families would take; with 1M flows the
 * cost of a lookup follows the span of memory lookups hit
 * (PERFORMANCE.md).
 * A bucket's first cache line holds the 8 signatures and the 8 stamps
 * (last use in milliseconds and the state), so that a lookup reads one
 * line per bucket and one entry line per match; callers prefetch both
 * for a burst (l4lb_conn_prefetch(), then l4lb_conn_prefetch_entry())
 * before looking its flows up. A bucket's 8 entries follow its line in
 * memory, so that both lines of a lookup are mostly on one page: in a
 * large table each random page costs an address translation that misses
 * the TLB, and a second line of the same page costs little more.
 * Memory is fixed at creation: a flood of new flows cannot grow it. The
 * IPv6 buckets take no memory until IPv6 flows arrive (pages are mapped
 * on first use).
 *
 * Each key has two buckets of its family: its own (the family's first
 * bucket + (hash & (capacity / 8 - 1))) and an alternate (the family's
 * first bucket + l4lb_conn_alt_bucket()). A new flow takes the first
 * free or expired way of its own bucket, else of the alternate; a lookup
 * reads the alternate only when the key is not in its own bucket. So a
 * table half full keeps almost every flow in its own bucket (one line a
 * lookup) and almost never replaces one: the span of memory lookups hit,
 * and with it the cost of their address translations, is half that of a
 * table a quarter full with one bucket a key.
 *
 * Replacement, when both buckets have no free or expired way: a new
 * half-open flow replaces the least recently used half-open flow of the
 * two and never an established one (it is then forwarded untracked, by
 * Maglev, and counted as refused); a new established flow replaces the
 * least recently used flow of the two, half-open ones first. Entries
 * expire lazily: an entry older than its state's timeout is free for
 * reuse.
 * A hit refreshes an entry's last use only when the state changes or the
 * stamp is at least 1/32 of the state's timeout old (timeout >>
 * L4LB_CONN_REFRESH_SHIFT): an idle flow may expire up to 1/32 of its
 * timeout early, and LRU ages are that coarse; in exchange most hits
 * do not write.
 *
 * Times (@now_ms) are dpflow_clock_ns() / 10^6, the data path's clock.
 *
 * Threads: with @shared false, one thread uses the table; with @shared
 * true, any number of data threads may, and every operation holds the
 * striped spinlock of the bucket(s) it touches (two at once in lock
 * order: a key's two buckets, or the buckets of twin entries). The
 * control thread only reads counters.
 */
#ifndef DPFLOW_L4LB_CONN_H
#define DPFLOW_L4LB_CONN_H

#include <stdbool.h>
#include <stdint.h>

#include "dpflow/common.h"

#define L4LB_CONN_WAYS	    8u
#define L4LB_CONN_NONE	    UINT32_MAX
#define L4LB_CONN_MIN	    64u
#define L4LB_CONN_MAX	    (1u << 28)
#define L4LB_CONN_LOCKS	    4096u
#define L4LB_CONN_STAMP_MAX 0x3fffffffu /* stamps are ms modulo 2^30 */
/* a hit rewrites a stamp older than timeout >> this (or on a new state) */
#define L4LB_CONN_REFRESH_SHIFT 5u

/* Flow states (two bits of the stamp word). */
enum l4lb_conn_state {
	L4LB_CONN_FREE = 0,
	L4LB_CONN_HALF_OPEN, /* a TCP SYN or one UDP packet seen */
	L4LB_CONN_ESTABLISHED,
	L4LB_CONN_CLOSING, /* a FIN or RST seen */
};

/* A flow's key: addresses in network order (IPv4 in the first 4 bytes,
 * the rest zero), ports in host order. Also readable as five words. */
struct l4lb_conn_key {
	union {
		struct {
			uint8_t src[16];
			uint8_t dst[16];
			uint16_t sport;
			uint16_t dport;
			uint8_t proto;
			uint8_t v6;
			uint8_t pad[2];
		};
		uint64_t w[5];
	};
};
DPFLOW_STATIC_ASSERT(sizeof(struct l4lb_conn_key) == 40, "five words");

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "l4lb_conn_key_set() writes the key as little-endian words"
#endif

static inline uint64_t l4lb_ld64_(const uint8_t *p)
{
	uint64_t v;

	__builtin_memcpy(&v, p, 8);
	return v;
}

static inline uint64_t l4lb_ld32_(const uint8_t *p)
{
	uint32_t v;

	__builtin_memcpy(&v, p, 4);
	return v;
}

/* Fill @k (all of it: word stores, no byte-wise writes that later word
 * loads would have to wait for). */
static inline void l4lb_conn_key_set(struct l4lb_conn_key *k,
				     const uint8_t *src, const uint8_t *dst,
				     uint8_t v6, uint16_t sport, uint16_t dport,
				     uint8_t proto)
{
	if (v6) {
		k->w[0] = l4lb_ld64_(src);
		k->w[1] = l4lb_ld64_(src + 8);
		k->w[2] = l4lb_ld64_(dst);
		k->w[3] = l4lb_ld64_(dst + 8);
	} else {
		k->w[0] = l4lb_ld32_(src);
		k->w[1] = 0;
		k->w[2] = l4lb_ld32_(dst);
		k->w[3] = 0;
	}
	k->w[4] = (uint64_t)sport | (uint64_t)dport << 16 |
		  (uint64_t)proto << 32 | (uint64_t)v6 << 40;
}

static inline uint64_t l4lb_mix64_(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

/* The 64-bit hash of a key (also what Maglev slots are chosen by): five
 * independent multiplies, then one finaliser. */
static inline uint64_t l4lb_conn_hash(const struct l4lb_conn_key *k)
{
	return l4lb_mix64_(
	    (k->w[0] * 0x9e3779b97f4a7c15ull) ^
	    (k->w[1] * 0xc2b2ae3d27d4eb4full) ^
	    (k->w[2] * 0x165667b19e3779f9ull) ^
	    (k->w[3] * 0xd6e8feb86659fd93ull) ^
	    ((k->w[4] + 0x27d4eb2f165667c5ull) * 0xff51afd7ed558ccdull));
}

/*
 * A key's alternate bucket, where it goes when its bucket @b (@h & mask)
 * has no free or expired way: from the hash's high half, never @b.
 */
static inline uint32_t l4lb_conn_alt_bucket(uint32_t b, uint64_t h,
					    uint32_t mask)
{
	return (b ^ ((uint32_t)(h >> 32) | 1u)) & mask;
}

/* One tracked direction. */
struct l4lb_conn {
	struct l4lb_conn_key key;
	uint32_t backend;     /* forward entry: backend id */
	uint32_t peer;	      /* the twin entry (NAT), or L4LB_CONN_NONE */
	uint16_t service;     /* service id */
	uint16_t snat_port;   /* forward entry, NAT: the SNAT port */
	uint8_t reverse;      /* 1: a reply key (backend -> SNAT address) */
	uint8_t state;	      /* in a copy made by l4lb_conn_lookup(): the
				 entry's state before the lookup moved it */
	uint16_t backend_gen; /* forward entry: the backend's generation */
	uint8_t pad[8];
};
DPFLOW_STATIC_ASSERT(sizeof(struct l4lb_conn) == 64, "an entry is a line");

/* Timeouts per state, milliseconds. */
struct l4lb_conn_timeouts {   /* at most about 12 days (2^30 ms - 65 s) */
	uint32_t half_open;   /* default 5000 */
	uint32_t established; /* default 300000 */
	uint32_t closing;     /* default 10000 */
};

struct l4lb_conn_stats {
	uint64_t created;  /* entries inserted */
	uint64_t replaced; /* live entries replaced (LRU) */
	uint64_t refused;  /* half-open flows not tracked: bucket full */
	uint64_t expired;  /* expired entries reused */
};

struct l4lb_conn_table;

/*
 * A table of at least @entries entries a family (rounded up to a power
 * of two, L4LB_CONN_MIN..L4LB_CONN_MAX), @t timeouts (NULL or 0 fields:
 * the defaults). NULL when out of memory or @entries is out of range.
 */
struct l4lb_conn_table *l4lb_conn_create(uint32_t entries, bool shared,
					 const struct l4lb_conn_timeouts *t);
void l4lb_conn_destroy(struct l4lb_conn_table *ct);
/* Entries a family (ids: twice as many). */
uint32_t l4lb_conn_capacity(const struct l4lb_conn_table *ct);

/* Copy entry @id (< 2 * capacity) to @out, whatever it holds: a live
 * entry's copy is what l4lb_conn_lookup() gives, but for @out->state. */
void l4lb_conn_read(struct l4lb_conn_table *ct, uint32_t id,
		    struct l4lb_conn *out);

/* Prefetch the bucket line of hash @h of a key of family @v6 (its
 * key.v6). */
void l4lb_conn_prefetch(const struct l4lb_conn_table *ct, uint64_t h,
			uint8_t v6);

/* Prefetch the entry line of hash @h (family @v6) when its bucket has a
 * way with that signature (the bucket line should be in cache by now),
 * else the line of its alternate bucket. A hint: reads without the
 * lock. */
void l4lb_conn_prefetch_entry(const struct l4lb_conn_table *ct, uint64_t h,
			      uint8_t v6);

/*
 * Find the live entry of @k (hash @h) at time @now_ms: its id, or
 * L4LB_CONN_NONE. A hit refreshes the entry's stamp (see above: when
 * due) and, when @state is not FREE, moves it to @state (never back from
 * CLOSING). Copies the entry to @out when found (@out may be NULL).
 */
uint32_t l4lb_conn_lookup(struct l4lb_conn_table *ct,
			  const struct l4lb_conn_key *k, uint64_t h,
			  uint32_t now_ms, uint8_t state,
			  struct l4lb_conn *out);

/*
 * Insert @c (its key hashed to @h) in @state at @now_ms. Fails with
 * L4LB_CONN_NONE when a live entry with the same key exists (@unique) or
 * when no way may be taken (a half-open flow in a bucket of established
 * ones). A replaced entry's twin is freed with it. Returns the entry id.
 */
uint32_t l4lb_conn_insert(struct l4lb_conn_table *ct, const struct l4lb_conn *c,
			  uint64_t h, uint32_t now_ms, uint8_t state);

/*
 * NAT: l4lb_conn_insert() of @c, the reply key of forward entry @fwd,
 * that never takes @fwd's way (a live half-open entry of buckets the two
 * keys may share: replacing it would free the flow being bound). Fails
 * as l4lb_conn_insert() does, and also when @fwd is the only way the
 * policy would let it take; the caller then tries another SNAT port.
 */
uint32_t l4lb_conn_insert_reply(struct l4lb_conn_table *ct,
				const struct l4lb_conn *c, uint64_t h,
				uint32_t now_ms, uint8_t state, uint32_t fwd);

/*
 * Refresh entry @id at @now_ms and move it to @state as a lookup does
 * (FREE: keep its state). Returns its state, or L4LB_CONN_FREE when the
 * entry is free or expired (nothing changes then).
 */
uint8_t l4lb_conn_touch(struct l4lb_conn_table *ct, uint32_t id,
			uint32_t now_ms, uint8_t state);

/* Link two entries as twins (each one's peer is the other). */
void l4lb_conn_link(struct l4lb_conn_table *ct, uint32_t a, uint32_t b);

/* Free entry @id and its twin. */
void l4lb_conn_free(struct l4lb_conn_table *ct, uint32_t id);

/* Point forward entry @id at @backend (and @snat_port). */
void l4lb_conn_set_backend(struct l4lb_conn_table *ct, uint32_t id,
			   uint32_t backend, uint16_t snat_port);

/* Live entries at @now_ms (a scan: control thread, tests). */
uint32_t l4lb_conn_count(struct l4lb_conn_table *ct, uint32_t now_ms,
			 uint32_t *established);

void l4lb_conn_stats_get(const struct l4lb_conn_table *ct,
			 struct l4lb_conn_stats *s);

#endif /* DPFLOW_L4LB_CONN_H */
