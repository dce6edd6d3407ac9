/*
 * The balancer's connection table (conn.h; its layout and the inline
 * lookup are in conn_impl.h): buckets of 8 ways, each a line of
 * signatures and stamps followed by its 8 entries (32 bytes for IPv4
 * flows, 64 for IPv6); two buckets a key.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "l4lb/conn_impl.h"

static void count(struct l4lb_conn_table *ct, uint64_t *c)
{
	if (ct->shared)
		__atomic_fetch_add(c, 1, __ATOMIC_RELAXED);
	else
		(*c)++;
}

/* Take the locks of buckets @a and @b (either may repeat) in order. */
static void lock_two(struct l4lb_conn_table *ct, uint32_t a, uint32_t b)
{
	uint32_t la = lock_of(a), lb = lock_of(b);

	if (la == lb) {
		lock_take(ct, la);
	} else if (la < lb) {
		lock_take(ct, la);
		lock_take(ct, lb);
	} else {
		lock_take(ct, lb);
		lock_take(ct, la);
	}
}

static void unlock_two(struct l4lb_conn_table *ct, uint32_t a, uint32_t b)
{
	uint32_t la = lock_of(a), lb = lock_of(b);

	lock_give(ct, la);
	if (lb != la)
		lock_give(ct, lb);
}

/*
 * Zeroed memory for a table array, in transparent huge pages where the
 * kernel gives them: lookups hit random lines of hundreds of megabytes,
 * and with 4 KiB pages each would also miss the TLB. NULL on failure.
 */
static void *map_zeroed(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
#ifdef MADV_HUGEPAGE
	(void)madvise(p, len, MADV_HUGEPAGE);
#endif
	return p;
}

struct l4lb_conn_table *l4lb_conn_create(uint32_t entries, bool shared,
					 const struct l4lb_conn_timeouts *t)
{
	struct l4lb_conn_table *ct;
	uint32_t n = L4LB_CONN_MIN;

	if (entries > L4LB_CONN_MAX)
		return NULL;
	while (n < entries)
		n <<= 1;
	ct = aligned_alloc(DPFLOW_CACHE_LINE, sizeof(*ct));
	if (!ct)
		return NULL;
	memset(ct, 0, sizeof(*ct));
	ct->mask = n / L4LB_CONN_WAYS - 1;
	ct->shared = shared;
	ct->timeout[L4LB_CONN_HALF_OPEN] =
	    t && t->half_open ? t->half_open : 5000;
	ct->timeout[L4LB_CONN_ESTABLISHED] =
	    t && t->established ? t->established : 300000;
	ct->timeout[L4LB_CONN_CLOSING] = t && t->closing ? t->closing : 10000;
	for (unsigned i = 0; i < 4; i++)
		if (ct->timeout[i] > CONN_TIMEOUT_MAX)
			ct->timeout[i] = CONN_TIMEOUT_MAX;
	ct->g4_len = (size_t)(ct->mask + 1) * sizeof(*ct->g4);
	ct->g6_len = (size_t)(ct->mask + 1) * sizeof(*ct->g6);
	ct->g4 = map_zeroed(ct->g4_len);
	ct->g6 = map_zeroed(ct->g6_len);
	if (!ct->g4 || !ct->g6) {
		l4lb_conn_destroy(ct);
		return NULL;
	}
	return ct;
}

void l4lb_conn_destroy(struct l4lb_conn_table *ct)
{
	if (!ct)
		return;
	if (ct->g4)
		munmap(ct->g4, ct->g4_len);
	if (ct->g6)
		munmap(ct->g6, ct->g6_len);
	free(ct);
}

uint32_t l4lb_conn_capacity(const struct l4lb_conn_table *ct)
{
	return (ct->mask + 1) * L4LB_CONN_WAYS;
}

void l4lb_conn_read(struct l4lb_conn_table *ct, uint32_t id,
		    struct l4lb_conn *out)
{
	uint32_t b = id / L4LB_CONN_WAYS;

	lock_take(ct, lock_of(b));
	way_read(ct, b, id % L4LB_CONN_WAYS, out, bucket_v6(ct, b));
	lock_give(ct, lock_of(b));
}

void l4lb_conn_prefetch(const struct l4lb_conn_table *ct, uint64_t h,
			uint8_t v6)
{
	l4lb_conn_prefetch_inline(ct, h, v6);
}

void l4lb_conn_prefetch_entry(const struct l4lb_conn_table *ct, uint64_t h,
			      uint8_t v6)
{
	l4lb_conn_prefetch_entry_inline(ct, h, v6);
}

/* Write @c to way @w of bucket @b, without a twin (lock held). */
static void way_write(struct l4lb_conn_table *ct, uint32_t b, unsigned w,
		      const struct l4lb_conn *c)
{
	struct conn_entry4 *e;

	if (bucket_v6(ct, b)) {
		struct l4lb_conn *e6 = entry6_at(ct, b, w);

		*e6 = *c;
		e6->peer = L4LB_CONN_NONE;
		e6->state = L4LB_CONN_FREE;
		return;
	}
	e = entry4_at(ct, b, w);
	e->addrs = key4_addrs(&c->key);
	e->pw = c->key.w[4];
	memcpy(&e->backend, &c->backend, CONN_VAL_LEN);
	e->peer = L4LB_CONN_NONE;
	e->state = L4LB_CONN_FREE;
}

/* The twin of entry @id, and setting it (lock held). */
static uint32_t peer_of(const struct l4lb_conn_table *ct, uint32_t id)
{
	uint32_t b = id / L4LB_CONN_WAYS;
	unsigned w = id % L4LB_CONN_WAYS;

	return bucket_v6(ct, b) ? entry6_at(ct, b, w)->peer
				: entry4_at(ct, b, w)->peer;
}

static void peer_set(struct l4lb_conn_table *ct, uint32_t id, uint32_t peer)
{
	uint32_t b = id / L4LB_CONN_WAYS;
	unsigned w = id % L4LB_CONN_WAYS;

	if (bucket_v6(ct, b))
		entry6_at(ct, b, w)->peer = peer;
	else
		entry4_at(ct, b, w)->peer = peer;
}

/* refresh_at() of way @w, which a hit moves to @st (lock held). */
static inline void refresh(struct l4lb_conn_table *ct, struct conn_bucket *bk,
			   unsigned w, uint32_t now_ms, uint8_t st)
{
	uint32_t old = bk->stamp[w];

	refresh_at(bk, w, now_ms, (uint8_t)STATE_OF(old), st,
		   age_of(old, now_ms), ct->timeout[STATE_OF(old)]);
}

/* Id of the live entry of @k in buckets @b and @alt, or NONE (locks
 * held). */
static uint32_t find_id(struct l4lb_conn_table *ct, uint32_t b, uint32_t alt,
			const struct l4lb_conn_key *k, uint32_t sig,
			uint32_t now_ms)
{
	for (unsigned i = 0; i < 2; i++, b = alt) {
		const struct conn_bucket *bk = bucket_at(ct, b);

		for (unsigned m = sig_matches(bk, sig); m; m &= m - 1) {
			unsigned w = (unsigned)__builtin_ctz(m);

			if (expired(ct, bk->stamp[w], now_ms))
				continue;
			if (way_key_eq(ct, b, w, k, bucket_v6(ct, b)))
				return b * L4LB_CONN_WAYS + w;
		}
	}
	return L4LB_CONN_NONE;
}

uint32_t l4lb_conn_lookup_alt4_(struct l4lb_conn_table *ct,
				const struct l4lb_conn_key *k, uint64_t h,
				uint32_t now_ms, uint8_t state,
				struct l4lb_conn *out)
{
	uint32_t b = (uint32_t)h & ct->mask;

	return lookup_in(ct, key_alt_bucket(ct, b, h), k, sig_of(h), now_ms,
			 state, out, false);
}

uint32_t l4lb_conn_lookup_out_(struct l4lb_conn_table *ct,
			       const struct l4lb_conn_key *k, uint64_t h,
			       uint32_t now_ms, uint8_t state,
			       struct l4lb_conn *out)
{
	uint32_t b = key_bucket(ct, h, k->v6), sig = sig_of(h), id;
	uint32_t alt = key_alt_bucket(ct, b, h);

	lock_two(ct, b, alt);
	id = lookup_in(ct, b, k, sig, now_ms, state, out, k->v6);
	if (id == L4LB_CONN_NONE)
		id = lookup_in(ct, alt, k, sig, now_ms, state, out, k->v6);
	unlock_two(ct, b, alt);
	return id;
}

uint32_t l4lb_conn_lookup(struct l4lb_conn_table *ct,
			  const struct l4lb_conn_key *k, uint64_t h,
			  uint32_t now_ms, uint8_t state, struct l4lb_conn *out)
{
	return l4lb_conn_lookup_inline(ct, k, h, now_ms, state, out);
}

uint8_t l4lb_conn_touch(struct l4lb_conn_table *ct, uint32_t id,
			uint32_t now_ms, uint8_t state)
{
	uint32_t b = id / L4LB_CONN_WAYS, w = id % L4LB_CONN_WAYS;
	struct conn_bucket *bk = bucket_at(ct, b);
	uint8_t st = L4LB_CONN_FREE;

	lock_take(ct, lock_of(b));
	if (bk->sig[w] && !expired(ct, bk->stamp[w], now_ms)) {
		st = state_move((uint8_t)STATE_OF(bk->stamp[w]), state);
		refresh(ct, bk, w, now_ms, st);
	}
	lock_give(ct, lock_of(b));
	return st;
}

/* Free way @w of bucket @b (lock held). */
static void clear_way(struct l4lb_conn_table *ct, uint32_t b, unsigned w)
{
	struct conn_bucket *bk = bucket_at(ct, b);

	bk->sig[w] = 0;
	bk->stamp[w] = 0;
}

/* Free the twin of entry @id when it still points back (lock of the
 * twin's bucket taken here; the caller holds none of its own that could
 * be out of order: twins are freed after the caller's lock is released). */
static void free_twin(struct l4lb_conn_table *ct, uint32_t id, uint32_t peer)
{
	uint32_t pb = peer / L4LB_CONN_WAYS;

	if (peer == L4LB_CONN_NONE)
		return;
	lock_take(ct, lock_of(pb));
	if (bucket_at(ct, pb)->sig[peer % L4LB_CONN_WAYS] &&
	    peer_of(ct, peer) == id) {
		clear_way(ct, pb, peer % L4LB_CONN_WAYS);
		peer_set(ct, peer, L4LB_CONN_NONE);
	}
	lock_give(ct, lock_of(pb));
}

/*
 * Entry to take for a new flow in @state whose buckets are @b and @alt,
 * or NONE (locks held): the first free or expired way of @b, else of
 * @alt, else the least recently used entry of the two that conn.h's
 * policy lets it replace; never entry @keep (NONE: any). Sets
 * *@victim_peer to the twin of an entry replaced.
 */
static uint32_t choose_id(struct l4lb_conn_table *ct, uint32_t b, uint32_t alt,
			  uint8_t state, uint32_t now_ms, uint32_t keep,
			  uint32_t *victim_peer)
{
	uint32_t lru_half = L4LB_CONN_NONE, lru_any = L4LB_CONN_NONE;
	uint32_t age_half = 0, age_any = 0;

	*victim_peer = L4LB_CONN_NONE;
	for (unsigned i = 0; i < 2; i++, b = alt) {
		const struct conn_bucket *bk = bucket_at(ct, b);

		for (unsigned w = 0; w < L4LB_CONN_WAYS; w++) {
			uint32_t id = b * L4LB_CONN_WAYS + w, st, age;

			if (id == keep)
				continue;
			if (!bk->sig[w])
				return id;
			if (expired(ct, bk->stamp[w], now_ms)) {
				count(ct, &ct->stats.expired);
				*victim_peer = peer_of(ct, id);
				return id;
			}
			st = STATE_OF(bk->stamp[w]);
			age = age_of(bk->stamp[w], now_ms);
			if (st != L4LB_CONN_ESTABLISHED &&
			    (lru_half == L4LB_CONN_NONE || age >= age_half)) {
				lru_half = id;
				age_half = age;
			}
			if (lru_any == L4LB_CONN_NONE || age >= age_any) {
				lru_any = id;
				age_any = age;
			}
		}
	}
	if (lru_half == L4LB_CONN_NONE && state != L4LB_CONN_ESTABLISHED)
		return L4LB_CONN_NONE;
	if (lru_half == L4LB_CONN_NONE)
		lru_half = lru_any;
	count(ct, &ct->stats.replaced);
	*victim_peer = peer_of(ct, lru_half);
	return lru_half;
}

/* l4lb_conn_insert() that never takes entry @keep (NONE: any). */
static uint32_t insert_keep(struct l4lb_conn_table *ct,
			    const struct l4lb_conn *c, uint64_t h,
			    uint32_t now_ms, uint8_t state, uint32_t keep)
{
	uint32_t b = key_bucket(ct, h, c->key.v6);
	uint32_t alt = key_alt_bucket(ct, b, h);
	uint32_t sig = sig_of(h), id, victim_peer;
	struct conn_bucket *bk;
	unsigned w;

	lock_two(ct, b, alt);
	if (find_id(ct, b, alt, &c->key, sig, now_ms) != L4LB_CONN_NONE) {
		unlock_two(ct, b, alt);
		return L4LB_CONN_NONE;
	}
	id = choose_id(ct, b, alt, state, now_ms, keep, &victim_peer);
	if (id == L4LB_CONN_NONE) {
		unlock_two(ct, b, alt);
		count(ct, &ct->stats.refused);
		return L4LB_CONN_NONE;
	}
	bk = bucket_at(ct, id / L4LB_CONN_WAYS);
	w = id % L4LB_CONN_WAYS;
	way_write(ct, id / L4LB_CONN_WAYS, w, c);
	bk->sig[w] = sig;
	bk->stamp[w] = STAMP(now_ms, state);
	unlock_two(ct, b, alt);
	if (victim_peer != L4LB_CONN_NONE)
		free_twin(ct, id, victim_peer);
	count(ct, &ct->stats.created);
	return id;
}

uint32_t l4lb_conn_insert(struct l4lb_conn_table *ct, const struct l4lb_conn *c,
			  uint64_t h, uint32_t now_ms, uint8_t state)
{
	return insert_keep(ct, c, h, now_ms, state, L4LB_CONN_NONE);
}

uint32_t l4lb_conn_insert_reply(struct l4lb_conn_table *ct,
				const struct l4lb_conn *c, uint64_t h,
				uint32_t now_ms, uint8_t state, uint32_t fwd)
{
	return insert_keep(ct, c, h, now_ms, state, fwd);
}

void l4lb_conn_link(struct l4lb_conn_table *ct, uint32_t a, uint32_t b)
{
	uint32_t ba = a / L4LB_CONN_WAYS, bb = b / L4LB_CONN_WAYS;

	lock_two(ct, ba, bb);
	peer_set(ct, a, b);
	peer_set(ct, b, a);
	unlock_two(ct, ba, bb);
}

void l4lb_conn_free(struct l4lb_conn_table *ct, uint32_t id)
{
	uint32_t b = id / L4LB_CONN_WAYS, peer;

	lock_take(ct, lock_of(b));
	peer = peer_of(ct, id);
	clear_way(ct, b, id % L4LB_CONN_WAYS);
	peer_set(ct, id, L4LB_CONN_NONE);
	lock_give(ct, lock_of(b));
	free_twin(ct, id, peer);
}

void l4lb_conn_set_backend(struct l4lb_conn_table *ct, uint32_t id,
			   uint32_t backend, uint16_t snat_port)
{
	uint32_t b = id / L4LB_CONN_WAYS;
	unsigned w = id % L4LB_CONN_WAYS;

	lock_take(ct, lock_of(b));
	if (bucket_v6(ct, b)) {
		entry6_at(ct, b, w)->backend = backend;
		entry6_at(ct, b, w)->snat_port = snat_port;
	} else {
		entry4_at(ct, b, w)->backend = backend;
		entry4_at(ct, b, w)->snat_port = snat_port;
	}
	lock_give(ct, lock_of(b));
}

uint32_t l4lb_conn_count(struct l4lb_conn_table *ct, uint32_t now_ms,
			 uint32_t *established)
{
	uint32_t live = 0, est = 0;

	for (uint32_t b = 0; b <= 2 * ct->mask + 1; b++) {
		const struct conn_bucket *bk = bucket_at(ct, b);

		lock_take(ct, lock_of(b));
		for (unsigned w = 0; w < L4LB_CONN_WAYS; w++) {
			uint32_t s = bk->stamp[w];

			if (!bk->sig[w] || expired(ct, s, now_ms))
				continue;
			live++;
			est += STATE_OF(s) == L4LB_CONN_ESTABLISHED;
		}
		lock_give(ct, lock_of(b));
	}
	if (established)
		*established = est;
	return live;
}

void l4lb_conn_stats_get(const struct l4lb_conn_table *ct,
			 struct l4lb_conn_stats *s)
{
	s->created = __atomic_load_n(&ct->stats.created, __ATOMIC_RELAXED);
	s->replaced = __atomic_load_n(&ct->stats.replaced, __ATOMIC_RELAXED);
	s->refused = __atomic_load_n(&ct->stats.refused, __ATOMIC_RELAXED);
	s->expired = __atomic_load_n(&ct->stats.expired, __ATOMIC_RELAXED);
}
