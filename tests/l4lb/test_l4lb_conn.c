/*
 * Connection table tests (apps/l4lb/conn.*), against the contract of
 * conn.h. The main one is differential: a naive reference model (a plain
 * array of records, one per entry id, each with its key, state, last use,
 * twin and bucket) implements the documented policy, and random
 * operations on small tables with keys from a small pool (buckets
 * overflow all the time) are checked op by op against it. The model knows
 * of the layout only what conn.h documents: entry id / 8 is its bucket,
 * IPv4 keys have buckets 0 .. capacity / 8 - 1 and IPv6 keys the next
 * capacity / 8, and a key's buckets are its family's first + (h & mask)
 * and + l4lb_conn_alt_bucket(). An insert
 * may take any unused or expired id of the key's bucket while it has
 * one, else of its alternate bucket, else the least recently used
 * entry of the two that the policy allows. Where LRU ages tie, any tied
 * candidate is accepted.
 *
 * Then properties: a SYN flood never replaces established flows; expiry
 * at the exact boundary, also across the 2^30 ms stamp wrap and the 2^32
 * wrap of now_ms; twin entries; four threads on a shared table; argument
 * checks.
 *
 * Seeds: L4LB_CONN_SEED (environment) overrides the fixed base seed; a
 * mismatch prints the seed and the operation number.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "l4lb/conn.h"

#define NONE L4LB_CONN_NONE
#define WAYS L4LB_CONN_WAYS
#define HO   L4LB_CONN_HALF_OPEN
#define EST  L4LB_CONN_ESTABLISHED
#define CL   L4LB_CONN_CLOSING

/* ------------------------------------------------------------ helpers */

static uint64_t rng64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint32_t rng_below(uint64_t *s, uint32_t n)
{
	return (uint32_t)(((rng64(s) >> 32) * n) >> 32);
}

static uint64_t base_seed(void)
{
	const char *e = getenv("L4LB_CONN_SEED");

	return e ? strtoull(e, NULL, 0) : 0x1a4bc0de5eedull;
}

/* Context of the failure message: the seed and the operation number. */
static uint64_t g_seed;
static unsigned long g_op;

#define FAILF(fmt, ...)                                                       \
	cr_assert_fail("seed %#llx op %lu: " fmt, (unsigned long long)g_seed, \
		       g_op, __VA_ARGS__)
#define CHECK(cond, fmt, ...)                    \
	do {                                     \
		if (!(cond))                     \
			FAILF(fmt, __VA_ARGS__); \
	} while (0)

/* A key with a unique @tag (first 4 source bytes) and random rest. */
static void key_make(uint64_t *rs, uint32_t tag, struct l4lb_conn_key *k)
{
	uint64_t a = rng64(rs), b = rng64(rs);

	memset(k, 0, sizeof(*k));
	k->v6 = rng_below(rs, 4) == 0;
	k->src[0] = (uint8_t)(tag >> 24);
	k->src[1] = (uint8_t)(tag >> 16);
	k->src[2] = (uint8_t)(tag >> 8);
	k->src[3] = (uint8_t)tag;
	memcpy(k->dst, &a, 4);
	if (k->v6) {
		memcpy(k->src + 4, &b, 8);
		memcpy(k->dst + 4, &a, 8);
		memcpy(k->src + 12, &b, 4);
		memcpy(k->dst + 12, &b, 4);
	}
	k->sport = (uint16_t)(b >> 40);
	k->dport = (uint16_t)(b >> 24);
	k->proto = (b >> 60) & 1 ? 6 : 17;
}

static void conn_make(uint64_t *rs, uint32_t tag, struct l4lb_conn *c)
{
	memset(c, 0, sizeof(*c));
	key_make(rs, tag, &c->key);
	c->backend = (uint32_t)rng64(rs);
	c->peer = (uint32_t)rng64(rs); /* insert must reset it */
	c->service = (uint16_t)rng64(rs);
	c->snat_port = (uint16_t)rng64(rs);
	c->reverse = (uint8_t)(rng64(rs) & 1);
	c->backend_gen = (uint16_t)rng64(rs);
}

/* @k: @prev's addresses and family, and a port or the protocol changed. */
static void key_sibling(uint64_t *rs, const struct l4lb_conn_key *prev,
			struct l4lb_conn_key *k)
{
	uint32_t r = rng_below(rs, 3);

	*k = *prev;
	if (r == 0)
		k->sport = (uint16_t)(k->sport + 1 + rng_below(rs, 100));
	else if (r == 1)
		k->dport = (uint16_t)(k->dport + 1 + rng_below(rs, 100));
	else
		k->proto = k->proto == 6 ? 17 : 6;
}

/* The first bucket of family @v6 in a table of @buckets a family. */
static uint32_t family_base(uint32_t buckets, uint8_t v6)
{
	return v6 ? buckets : 0;
}

/* The bucket and the alternate bucket of hash @h of a key of family
 * @v6. */
static uint32_t bucket_of(const struct l4lb_conn_table *ct, uint64_t h,
			  uint8_t v6)
{
	uint32_t nb = l4lb_conn_capacity(ct) / WAYS;

	return family_base(nb, v6) + ((uint32_t)h & (nb - 1));
}

static uint32_t alt_of(const struct l4lb_conn_table *ct, uint64_t h, uint8_t v6)
{
	uint32_t nb = l4lb_conn_capacity(ct) / WAYS;

	return family_base(nb, v6) +
	       l4lb_conn_alt_bucket((uint32_t)h & (nb - 1), h, nb - 1);
}

/* The twin entry @id names. */
static uint32_t peer_of(struct l4lb_conn_table *ct, uint32_t id)
{
	struct l4lb_conn c;

	l4lb_conn_read(ct, id, &c);
	return c.peer;
}

/* A connection whose key's bucket is @b and alternate bucket @alt in
 * @ct. */
static uint64_t conn_in_buckets(const struct l4lb_conn_table *ct, uint64_t *rs,
				uint32_t *tag, uint32_t b, uint32_t alt,
				struct l4lb_conn *c)
{
	for (;;) {
		uint64_t h;

		conn_make(rs, (*tag)++, c);
		h = l4lb_conn_hash(&c->key);
		if (bucket_of(ct, h, c->key.v6) == b &&
		    alt_of(ct, h, c->key.v6) == alt)
			return h;
	}
}

/* ------------------------------------------------ the reference model */

struct mrec {
	bool used; /* holds an entry (maybe expired) */
	uint8_t state;
	uint32_t last_ms;
	struct l4lb_conn c; /* c.peer: the twin */
};

struct model {
	struct mrec *r;
	uint32_t cap, buckets; /* ids (both families), buckets a family */
	uint32_t to[4];
	struct l4lb_conn_stats st;
};

static void model_init(struct model *m, uint32_t cap,
		       const struct l4lb_conn_timeouts *t)
{
	memset(m, 0, sizeof(*m));
	m->cap = 2 * cap;
	m->buckets = cap / WAYS;
	m->r = calloc(m->cap, sizeof(*m->r));
	cr_assert(m->r);
	for (uint32_t i = 0; i < m->cap; i++)
		m->r[i].c.peer = NONE;
	m->to[HO] = t->half_open;
	m->to[EST] = t->established;
	m->to[CL] = t->closing;
}

static void model_fini(struct model *m)
{
	free(m->r);
}

static bool m_live(const struct model *m, uint32_t id, uint32_t now)
{
	const struct mrec *r = &m->r[id];

	return r->used && (uint32_t)(now - r->last_ms) <= m->to[r->state];
}

/* Live record of key @k, or NONE (naive: the whole array). */
static uint32_t m_find(const struct model *m, const struct l4lb_conn_key *k,
		       uint32_t now)
{
	for (uint32_t id = 0; id < m->cap; id++)
		if (m_live(m, id, now) &&
		    memcmp(&m->r[id].c.key, k, sizeof(*k)) == 0)
			return id;
	return NONE;
}

/* A hit on record @r at @now moving it to @st: the stamp is rewritten on
 * a state change or when at least timeout >> L4LB_CONN_REFRESH_SHIFT old. */
static void m_hit(const struct model *m, struct mrec *r, uint32_t now,
		  uint8_t st)
{
	if (st != r->state ||
	    now - r->last_ms >= m->to[r->state] >> L4LB_CONN_REFRESH_SHIFT)
		r->last_ms = now;
	r->state = st;
}

/* The state a lookup or touch moves an entry in @cur to for @req. */
static uint8_t m_move(uint8_t cur, uint8_t req)
{
	if (req == L4LB_CONN_FREE)
		return cur;
	if (cur == CL)
		return CL; /* never back from CLOSING */
	return req;
}

static void m_clear(struct model *m, uint32_t id)
{
	m->r[id].used = false;
	m->r[id].c.peer = NONE;
}

/* Free the twin @p of @id when it is one (its peer points back). */
static void m_free_twin(struct model *m, uint32_t id, uint32_t p)
{
	if (p != NONE && p < m->cap && m->r[p].used && m->r[p].c.peer == id)
		m_clear(m, p);
}

/* Records of bucket @b, added to @mb: in use, expired, and the LRU ages
 * (half-open or closing; any). */
struct m_bucket {
	unsigned used, expired;
	bool have_half;
	uint32_t max_half, max_any;
};

static void m_bucket_scan(const struct model *m, uint32_t b, uint32_t now,
			  struct m_bucket *mb)
{
	for (uint32_t id = b * WAYS; id < (b + 1) * WAYS; id++) {
		const struct mrec *r = &m->r[id];
		uint32_t age = now - r->last_ms;

		if (!r->used)
			continue;
		mb->used++;
		if (!m_live(m, id, now)) {
			mb->expired++;
			continue;
		}
		if (r->state != EST && (!mb->have_half || age > mb->max_half)) {
			mb->have_half = true;
			mb->max_half = age;
		}
		if (age > mb->max_any)
			mb->max_any = age;
	}
}

/* Whether bucket @mb has a way a new flow takes without replacing one. */
static bool m_room(const struct m_bucket *mb)
{
	return mb->used < WAYS || mb->expired;
}

/* Insert @c in the table and check the result against the policy. */
static uint32_t m_insert(struct l4lb_conn_table *ct, struct model *m,
			 const struct l4lb_conn *c, uint64_t h, uint32_t now,
			 uint8_t state)
{
	uint32_t base = family_base(m->buckets, c->key.v6);
	uint32_t b = bucket_of(ct, h, c->key.v6),
		 alt = alt_of(ct, h, c->key.v6);
	uint32_t got = l4lb_conn_insert(ct, c, h, now, state);
	uint32_t dup = m_find(m, &c->key, now);
	struct m_bucket mb = {0}, ma = {0}, both = {0};
	struct mrec *v;
	uint32_t p, gb;

	if (dup != NONE) {
		CHECK(got == NONE, "insert of a live key (entry %u) gave %u",
		      dup, got);
		return NONE;
	}
	CHECK(alt != b && alt >= base && alt < base + m->buckets,
	      "bucket %u: alternate %u", b, alt);
	m_bucket_scan(m, b, now, &mb);
	m_bucket_scan(m, alt, now, &ma);
	m_bucket_scan(m, b, now, &both); /* the two as one set */
	m_bucket_scan(m, alt, now, &both);
	if (got == NONE) {
		CHECK(!m_room(&mb) && !m_room(&ma) && !both.have_half &&
			  state != EST,
		      "insert (state %u) refused in buckets %u/%u: %u/%u in "
		      "use, %u/%u expired, half-open/closing ones: %d",
		      state, b, alt, mb.used, ma.used, mb.expired, ma.expired,
		      both.have_half);
		m->st.refused++;
		return NONE;
	}
	CHECK(got < m->cap, "insert gave id %u", got);
	gb = got / WAYS;
	v = &m->r[got];
	if (m_room(&mb) || m_room(&ma)) {
		uint32_t want = m_room(&mb) ? b : alt;

		CHECK(gb == want,
		      "insert took entry %u (bucket %u) while bucket %u had "
		      "room (bucket %u: %u in use, %u expired)",
		      got, gb, want, b, mb.used, mb.expired);
		CHECK(!m_live(m, got, now),
		      "insert took live entry %u while bucket %u had room", got,
		      want);
	} else {
		uint32_t age = now - v->last_ms;

		CHECK(v->used && (gb == b || gb == alt),
		      "insert in full buckets %u/%u took id %u (used %d "
		      "bucket %u)",
		      b, alt, got, v->used, gb);
		if (both.have_half)
			CHECK(v->state != EST && age == both.max_half,
			      "insert (state %u) replaced id %u in state %u "
			      "age %u; LRU half-open/closing age is %u",
			      state, got, v->state, age, both.max_half);
		else
			CHECK(state == EST && age == both.max_any,
			      "insert (state %u) replaced established id %u "
			      "age %u; LRU age %u",
			      state, got, age, both.max_any);
	}
	p = NONE;
	if (v->used) {
		p = v->c.peer;
		if (m_live(m, got, now))
			m->st.replaced++;
		else
			m->st.expired++;
	}
	m->st.created++;
	v->used = true;
	v->state = state;
	v->last_ms = now;
	v->c = *c;
	v->c.peer = NONE;
	m_free_twin(m, got, p);
	return got;
}

static void m_check_entry(const struct model *m, uint32_t id,
			  const struct l4lb_conn *e, const char *what)
{
	const struct l4lb_conn *x = &m->r[id].c;

	CHECK(memcmp(e, x, sizeof(*e)) == 0,
	      "%s of entry %u differs: backend %u/%u peer %u/%u service "
	      "%u/%u snat %u/%u reverse %u/%u key %s",
	      what, id, e->backend, x->backend, e->peer, x->peer, e->service,
	      x->service, e->snat_port, x->snat_port, e->reverse, x->reverse,
	      memcmp(&e->key, &x->key, sizeof(e->key)) ? "differs" : "same");
}

/* Counters, stats and the contents of every live entry. */
static void m_check_all(struct l4lb_conn_table *ct, const struct model *m,
			uint32_t now)
{
	uint32_t live = 0, est = 0, t_est = 0, t_live;
	struct l4lb_conn_stats s;

	for (uint32_t id = 0; id < m->cap; id++) {
		struct l4lb_conn e;

		if (!m_live(m, id, now))
			continue;
		live++;
		est += m->r[id].state == EST;
		l4lb_conn_read(ct, id, &e);
		m_check_entry(m, id, &e, "entry");
	}
	t_live = l4lb_conn_count(ct, now, &t_est);
	CHECK(t_live == live && t_est == est,
	      "count: %u live %u established, model %u %u", t_live, t_est, live,
	      est);
	l4lb_conn_stats_get(ct, &s);
	CHECK(s.created == m->st.created && s.replaced == m->st.replaced &&
		  s.refused == m->st.refused && s.expired == m->st.expired,
	      "stats created/replaced/refused/expired %llu/%llu/%llu/%llu, "
	      "model %llu/%llu/%llu/%llu",
	      (unsigned long long)s.created, (unsigned long long)s.replaced,
	      (unsigned long long)s.refused, (unsigned long long)s.expired,
	      (unsigned long long)m->st.created,
	      (unsigned long long)m->st.replaced,
	      (unsigned long long)m->st.refused,
	      (unsigned long long)m->st.expired);
}

static uint8_t random_state(uint64_t *rs)
{
	static const uint8_t pick[8] = {HO, HO, HO, EST, EST, EST, CL, CL};

	return pick[rng_below(rs, 8)];
}

static uint8_t random_req(uint64_t *rs)
{
	static const uint8_t pick[8] = {L4LB_CONN_FREE,
					L4LB_CONN_FREE,
					L4LB_CONN_FREE,
					HO,
					EST,
					EST,
					EST,
					CL};

	return pick[rng_below(rs, 8)];
}

/* --------------------------------------- 1. differential, random ops */

static void differential(uint32_t entries, bool shared, uint64_t seed,
			 unsigned long ops)
{
	uint64_t rs = seed;
	struct l4lb_conn_timeouts to = {
	    .half_open = 20 + rng_below(&rs, 1000),
	    .established = 100 + rng_below(&rs, 3000),
	    .closing = 5 + rng_below(&rs, 300),
	};
	struct l4lb_conn_table *ct = l4lb_conn_create(entries, shared, &to);
	static const uint32_t starts[] = {0,	       1000,	    0x3ffff000u,
					  0x3fffff00u, 0x7ffff800u, 0xfffff000u,
					  0xffffff00u};
	uint32_t cap, ids, npool, now, *live;
	struct l4lb_conn *pool;
	uint64_t *hash;
	struct model m;

	g_seed = seed;
	g_op = 0;
	cr_assert_not_null(ct);
	cap = l4lb_conn_capacity(ct);
	cr_assert_eq(cap, entries);
	model_init(&m, cap, &to);
	ids = m.cap;
	npool = cap * 4;
	pool = calloc(npool, sizeof(*pool));
	hash = calloc(npool, sizeof(*hash));
	live = calloc(ids, sizeof(*live));
	cr_assert(pool && hash && live);
	for (uint32_t i = 0; i < npool; i++) {
		conn_make(&rs, i, &pool[i]);
		/* a quarter: the previous key's addresses and family with
		 * other ports or protocol (one client's many flows) */
		if (i && rng_below(&rs, 4) == 0)
			key_sibling(&rs, &pool[i - 1].key, &pool[i].key);
		hash[i] = l4lb_conn_hash(&pool[i].key);
	}
	now = starts[rng_below(&rs, DPFLOW_ARRAY_SIZE(starts))] +
	      rng_below(&rs, 0x100);

	for (g_op = 0; g_op < ops; g_op++) {
		uint32_t op = rng_below(&rs, 100), nlive = 0;
		uint32_t k = rng_below(&rs, npool);
		struct l4lb_conn out;

		for (uint32_t id = 0; id < ids; id++)
			if (m_live(&m, id, now))
				live[nlive++] = id;

		if (op < 34) { /* insert */
			struct l4lb_conn c = pool[k];

			c.backend = (uint32_t)rng64(&rs);
			m_insert(ct, &m, &c, hash[k], now, random_state(&rs));
		} else if (op < 64) { /* lookup */
			uint8_t req = random_req(&rs);
			bool want = rng_below(&rs, 4) != 0;
			uint32_t got, exp;

			memset(&out, 0xa5, sizeof(out));
			got = l4lb_conn_lookup(ct, &pool[k].key, hash[k], now,
					       req, want ? &out : NULL);
			exp = m_find(&m, &pool[k].key, now);
			CHECK(got == exp, "lookup of pool key %u: %u, model %u",
			      k, got, exp);
			if (exp != NONE) {
				struct mrec *r = &m.r[exp];

				/* the copy carries the state before */
				if (want) {
					CHECK(out.state == r->state,
					      "lookup copy of entry %u: state "
					      "%u, model %u",
					      exp, out.state, r->state);
					out.state = r->c.state;
					m_check_entry(&m, exp, &out,
						      "lookup copy");
				}
				m_hit(&m, r, now, m_move(r->state, req));
			}
		} else if (op < 74) { /* touch, a live id or any */
			uint8_t req = random_req(&rs), got, exp;
			uint32_t id = nlive && rng_below(&rs, 4)
					  ? live[rng_below(&rs, nlive)]
					  : rng_below(&rs, ids);

			got = l4lb_conn_touch(ct, id, now, req);
			exp = L4LB_CONN_FREE;
			if (m_live(&m, id, now)) {
				exp = m_move(m.r[id].state, req);
				m_hit(&m, &m.r[id], now, exp);
			}
			CHECK(got == exp, "touch(%u, req %u): %u, model %u", id,
			      req, got, exp);
		} else if (op < 80) { /* free a live (rarely expired) entry */
			uint32_t id = NONE, p;

			if (rng_below(&rs, 8) == 0) {
				uint32_t i = rng_below(&rs, ids);

				if (m.r[i].used)
					id = i;
			} else if (nlive) {
				id = live[rng_below(&rs, nlive)];
			}
			if (id == NONE)
				continue;
			l4lb_conn_free(ct, id);
			p = m.r[id].c.peer;
			m_clear(&m, id);
			m_free_twin(&m, id, p);
			CHECK(l4lb_conn_touch(ct, id, now, L4LB_CONN_FREE) ==
				  L4LB_CONN_FREE,
			      "entry %u live after free", id);
		} else if (op < 88) { /* link two live entries */
			uint32_t a, b;

			if (nlive < 2)
				continue;
			a = live[rng_below(&rs, nlive)];
			b = live[rng_below(&rs, nlive)];
			if (a == b)
				continue;
			l4lb_conn_link(ct, a, b);
			m.r[a].c.peer = b;
			m.r[b].c.peer = a;
		} else if (op < 95) { /* set_backend */
			uint32_t id, be = (uint32_t)rng64(&rs);
			uint16_t port = (uint16_t)rng64(&rs);

			if (!nlive)
				continue;
			id = live[rng_below(&rs, nlive)];
			l4lb_conn_set_backend(ct, id, be, port);
			m.r[id].c.backend = be;
			m.r[id].c.snat_port = port;
		} else { /* time */
			uint32_t r = rng_below(&rs, 100);

			if (r < 90) /* 0 too: ties in age */
				now += rng_below(&rs, 3);
			else if (r < 99)
				now += rng_below(&rs, 2 * to.closing + 2);
			else
				now += rng_below(&rs, to.established + 50);
			l4lb_conn_prefetch(ct, hash[k], pool[k].key.v6);
			l4lb_conn_prefetch_entry(ct, hash[k], pool[k].key.v6);
		}
		if (g_op % 128 == 0 || op >= 95)
			m_check_all(ct, &m, now);
	}
	m_check_all(ct, &m, now);
	cr_log_info(
	    "%u entries seed %#llx: created %llu replaced %llu "
	    "refused %llu expired %llu",
	    cap, (unsigned long long)seed, (unsigned long long)m.st.created,
	    (unsigned long long)m.st.replaced, (unsigned long long)m.st.refused,
	    (unsigned long long)m.st.expired);
	free(pool);
	free(hash);
	free(live);
	model_fini(&m);
	l4lb_conn_destroy(ct);
}

Test(l4lb_conn, differential_random_ops)
{
	static const uint32_t sizes[] = {64, 128, 256, 512};
	uint64_t base = base_seed();

	for (unsigned i = 0; i < DPFLOW_ARRAY_SIZE(sizes); i++)
		differential(sizes[i], i & 1, base + i * 0x1000193, 50000);
}

/* ------------------------------------- 1b. keys that share a signature */

/*
 * Two keys of one family whose hashes agree in the signature and the
 * bucket of a table of 64 entries (so a lookup compares their keys), and
 * which differ only in the ports (@what 0), the destination address (1)
 * or, IPv6, the high half of the source address (2). Found among 2^20
 * candidates (about 30 such pairs are expected among them).
 */
struct hash_rec {
	uint64_t v; /* signature and bucket */
	uint32_t i;
};

static int hash_rec_cmp(const void *a, const void *b)
{
	const struct hash_rec *x = a, *y = b;

	return x->v < y->v ? -1 : x->v > y->v;
}

static void key_candidate(uint32_t i, uint8_t v6, int what,
			  struct l4lb_conn_key *k)
{
	memset(k, 0, sizeof(*k));
	k->v6 = v6;
	k->src[0] = 192;
	k->src[3] = 7;
	k->dst[0] = 10;
	k->sport = 40000;
	k->dport = 443;
	k->proto = 6;
	if (what == 0) {
		k->sport = (uint16_t)i;
		k->dport = (uint16_t)(i >> 16);
	} else if (what == 1) {
		k->dst[v6 ? 12 : 1] = (uint8_t)(i >> 16);
		k->dst[v6 ? 13 : 2] = (uint8_t)(i >> 8);
		k->dst[v6 ? 14 : 3] = (uint8_t)i;
	} else {
		k->src[9] = (uint8_t)(i >> 16);
		k->src[10] = (uint8_t)(i >> 8);
		k->src[11] = (uint8_t)i;
	}
}

static void keys_sharing_sig(uint8_t v6, int what, struct l4lb_conn_key *a,
			     struct l4lb_conn_key *b)
{
	const uint32_t n = 1u << 20;
	struct hash_rec *r = malloc(n * sizeof(*r));

	cr_assert_not_null(r);
	for (uint32_t i = 0; i < n; i++) {
		uint64_t h;

		key_candidate(i, v6, what, a);
		h = l4lb_conn_hash(a);
		r[i].v = ((h >> 32) | 1) << 3 | (h & 7);
		r[i].i = i;
	}
	qsort(r, n, sizeof(*r), hash_rec_cmp);
	for (uint32_t i = 1; i < n; i++) {
		if (r[i].v != r[i - 1].v)
			continue;
		key_candidate(r[i - 1].i, v6, what, a);
		key_candidate(r[i].i, v6, what, b);
		free(r);
		return;
	}
	free(r);
	cr_assert_fail("no two keys share a signature (family %u, case %d)", v6,
		       what);
}

Test(l4lb_conn, keys_sharing_a_signature_are_told_apart)
{
	static const struct {
		uint8_t v6;
		int what;
	} cases[] = {{0, 0}, {0, 1}, {1, 0}, {1, 1}, {1, 2}};

	for (unsigned i = 0; i < DPFLOW_ARRAY_SIZE(cases); i++) {
		struct l4lb_conn_table *ct = l4lb_conn_create(64, false, NULL);
		struct l4lb_conn ca, cb, out;
		uint64_t ha, hb;
		uint32_t a, b;

		cr_assert_not_null(ct);
		memset(&ca, 0, sizeof(ca));
		memset(&cb, 0, sizeof(cb));
		keys_sharing_sig(cases[i].v6, cases[i].what, &ca.key, &cb.key);
		ha = l4lb_conn_hash(&ca.key);
		hb = l4lb_conn_hash(&cb.key);
		cr_assert_eq(ha >> 32 | 1, hb >> 32 | 1);
		ca.backend = 1;
		cb.backend = 2;
		a = l4lb_conn_insert(ct, &ca, ha, 1000, EST);
		cr_assert_neq(a, NONE);
		cr_assert_eq(l4lb_conn_lookup(ct, &cb.key, hb, 1000,
					      L4LB_CONN_FREE, NULL),
			     NONE, "case %u: the other key's entry found", i);
		b = l4lb_conn_insert(ct, &cb, hb, 1000, EST);
		cr_assert(b != NONE && b != a, "case %u: insert gave %u", i, b);
		cr_assert_eq(l4lb_conn_lookup(ct, &ca.key, ha, 1000,
					      L4LB_CONN_FREE, &out),
			     a);
		cr_assert_eq(out.backend, 1);
		cr_assert_eq(memcmp(&out.key, &ca.key, sizeof(out.key)), 0);
		cr_assert_eq(l4lb_conn_lookup(ct, &cb.key, hb, 1000,
					      L4LB_CONN_FREE, &out),
			     b);
		cr_assert_eq(out.backend, 2);
		cr_assert_eq(memcmp(&out.key, &cb.key, sizeof(out.key)), 0);
		l4lb_conn_destroy(ct);
	}
}

/* ------------------------------------------------------- 2. SYN flood */

#define FLOOD_EST 2000u
#define FLOOD_N	  1000000u

static void key_seq(uint32_t i, uint8_t kind, struct l4lb_conn *c)
{
	memset(c, 0, sizeof(*c));
	c->key.src[0] = kind;
	c->key.src[1] = (uint8_t)(i >> 16);
	c->key.src[2] = (uint8_t)(i >> 8);
	c->key.src[3] = (uint8_t)i;
	c->key.dst[0] = 10;
	c->key.dst[3] = 1;
	c->key.sport = (uint16_t)(1024 + i % 50000);
	c->key.dport = 80;
	c->key.proto = 6;
	c->backend = i;
}

Test(l4lb_conn, syn_flood_keeps_established)
{
	struct l4lb_conn_table *ct = l4lb_conn_create(4096, false, NULL);
	static uint32_t ids[FLOOD_EST];
	static uint8_t est_in[4096 / WAYS]; /* established flows a bucket */
	struct l4lb_conn_stats s1, s2;
	uint32_t now = 1000, lost = 0, live, est, mask;
	uint64_t refused_exp = 0;

	g_seed = 0;
	g_op = 0;
	cr_assert_not_null(ct);
	cr_assert_eq(l4lb_conn_capacity(ct), 4096);
	mask = 4096 / WAYS - 1;
	for (uint32_t i = 0; i < FLOOD_EST; i++) {
		struct l4lb_conn c;

		key_seq(i, 1, &c);
		ids[i] =
		    l4lb_conn_insert(ct, &c, l4lb_conn_hash(&c.key), now, EST);
		cr_assert_neq(ids[i], NONE, "established flow %u refused", i);
	}
	/* Flows whose two buckets took more than 16 established flows
	 * replaced some: those are the only ones lost. */
	l4lb_conn_stats_get(ct, &s1);
	memset(est_in, 0, sizeof(est_in));
	for (uint32_t i = 0; i < FLOOD_EST; i++) {
		struct l4lb_conn c;
		uint64_t h;
		uint32_t got;

		key_seq(i, 1, &c);
		h = l4lb_conn_hash(&c.key);
		got =
		    l4lb_conn_lookup(ct, &c.key, h, now, L4LB_CONN_FREE, NULL);
		if (got == NONE) {
			ids[i] = NONE;
			lost++;
			continue;
		}
		cr_assert_eq(got, ids[i]);
		est_in[got / WAYS]++;
	}
	cr_assert_eq(lost, s1.replaced);
	cr_assert_eq(s1.refused, 0);
	cr_assert_eq(s1.created, FLOOD_EST);
	live = l4lb_conn_count(ct, now, &est);
	cr_assert_eq(live, FLOOD_EST - lost);
	cr_assert_eq(est, FLOOD_EST - lost);

	/* 1M distinct half-open flows over 10 s, with a 5001 ms pause
	 * halfway: the half-open entries (5 s) then all expire and are
	 * reused, the established ones (300 s) do not expire. */
	for (uint32_t j = 0; j < FLOOD_N; j++) {
		struct l4lb_conn c;
		uint64_t h;
		uint32_t id;

		if (j % 100 == 0)
			now++;
		if (j == FLOOD_N / 2)
			now += 5001;
		key_seq(j, 2, &c);
		h = l4lb_conn_hash(&c.key);
		id = l4lb_conn_insert(ct, &c, h, now, HO);
		if (est_in[h & mask] == WAYS &&
		    est_in[l4lb_conn_alt_bucket(h & mask, h, mask)] == WAYS) {
			refused_exp++;
			if (id != NONE)
				cr_assert_fail(
				    "half-open flow %u took entry %u "
				    "in buckets of established "
				    "flows",
				    j, id);
		} else if (id == NONE) {
			cr_assert_fail("half-open flow %u refused in bucket "
				       "%u with %u established (and its "
				       "alternate)",
				       j, (unsigned)(h & mask),
				       est_in[h & mask]);
		}
	}
	l4lb_conn_stats_get(ct, &s2);
	cr_assert_eq(s2.refused - s1.refused, refused_exp);
	cr_assert_eq(s2.created - s1.created, FLOOD_N - refused_exp);
	cr_assert_leq(s2.replaced - s1.replaced + s2.expired - s1.expired,
		      s2.created - s1.created);
	cr_assert_gt(s2.replaced - s1.replaced, 0);
	cr_assert_gt(s2.expired - s1.expired, 0);
	for (uint32_t i = 0; i < FLOOD_EST; i++) {
		struct l4lb_conn c, out;
		uint32_t got;

		if (ids[i] == NONE)
			continue;
		key_seq(i, 1, &c);
		got = l4lb_conn_lookup(ct, &c.key, l4lb_conn_hash(&c.key), now,
				       L4LB_CONN_FREE, &out);
		cr_assert_eq(got, ids[i], "established flow %u lost", i);
		cr_assert_eq(out.backend, i);
		cr_assert_eq(l4lb_conn_touch(ct, got, now, L4LB_CONN_FREE),
			     EST);
	}
	live = l4lb_conn_count(ct, now, &est);
	cr_assert_eq(est, FLOOD_EST - lost);
	cr_assert_leq(live, l4lb_conn_capacity(ct));
	cr_assert_gt(live, est);
	l4lb_conn_destroy(ct);
}

/* ---------------------------------------------------------- 3. expiry */

static const uint32_t expiry_starts[] = {
    1000,	 0x3fffffffu - 60,
    0x3fffffffu, 0x40000000u - 1,
    0x40000000u, 0x7fffffffu - 30,
    0xbfffffffu, 0xffffffffu - 60,
    0xffffffffu, 0,
};

Test(l4lb_conn, expiry_at_the_boundary)
{
	const struct l4lb_conn_timeouts to = {100, 1000, 50};
	const uint32_t tmo[4] = {0, 100, 1000, 50};
	uint64_t rs = base_seed() ^ 3;
	uint32_t tag = 0;

	for (unsigned i = 0; i < DPFLOW_ARRAY_SIZE(expiry_starts); i++)
		for (uint8_t s = HO; s <= CL; s++) {
			struct l4lb_conn_table *ct =
			    l4lb_conn_create(64, i & 1, &to);
			uint32_t t = expiry_starts[i], T = tmo[s], id, id2, est;
			struct l4lb_conn c, dup;
			uint64_t h;

			cr_assert_not_null(ct);
			conn_make(&rs, tag++, &c);
			h = l4lb_conn_hash(&c.key);
			id = l4lb_conn_insert(ct, &c, h, t, s);
			cr_assert_neq(id, NONE);
			dup = c;
			dup.backend++;
			cr_assert_eq(l4lb_conn_insert(ct, &dup, h, t + T, s),
				     NONE, "duplicate of a live key (t %#x)",
				     t);
			/* count does not refresh */
			cr_assert_eq(l4lb_conn_count(ct, t + T, &est), 1,
				     "state %u start %#x: dead at age %u", s, t,
				     T);
			cr_assert_eq(est, s == EST);
			cr_assert_eq(l4lb_conn_count(ct, t + T + 1, NULL), 0,
				     "state %u start %#x: live at age %u", s, t,
				     T + 1);
			/* an expired entry is not found and not touched */
			cr_assert_eq(l4lb_conn_lookup(ct, &c.key, h, t + T + 1,
						      EST, NULL),
				     NONE);
			cr_assert_eq(l4lb_conn_touch(ct, id, t + T + 1, EST),
				     L4LB_CONN_FREE);
			cr_assert_eq(l4lb_conn_count(ct, t + T, NULL), 1,
				     "a miss changed the entry");
			/* found at the boundary; the hit refreshes */
			cr_assert_eq(l4lb_conn_lookup(ct, &c.key, h, t + T,
						      L4LB_CONN_FREE, NULL),
				     id);
			cr_assert_eq(l4lb_conn_count(ct, t + 2 * T, NULL), 1);
			cr_assert_eq(l4lb_conn_count(ct, t + 2 * T + 1, NULL),
				     0);
			cr_assert_eq(
			    l4lb_conn_touch(ct, id, t + 2 * T, L4LB_CONN_FREE),
			    s);
			cr_assert_eq(l4lb_conn_count(ct, t + 3 * T, NULL), 1);
			cr_assert_eq(l4lb_conn_count(ct, t + 3 * T + 1, NULL),
				     0);
			/* the key is free again once expired */
			cr_assert_eq(l4lb_conn_insert(ct, &dup, h,
						      t + 3 * T + 1, s) == NONE,
				     false, "re-insert after expiry refused");
			id2 = l4lb_conn_lookup(ct, &c.key, h, t + 3 * T + 1,
					       L4LB_CONN_FREE, &dup);
			cr_assert_neq(id2, NONE);
			cr_assert_eq(dup.backend, c.backend + 1);
			cr_assert_eq(l4lb_conn_count(ct, t + 3 * T + 1, NULL),
				     1);
			l4lb_conn_destroy(ct);
		}
}

/* State moves change the timeout that applies. */
Test(l4lb_conn, expiry_follows_state)
{
	const struct l4lb_conn_timeouts to = {100, 1000, 50};
	uint64_t rs = base_seed() ^ 5;
	uint32_t tag = 0;

	for (unsigned i = 0; i < DPFLOW_ARRAY_SIZE(expiry_starts); i++) {
		struct l4lb_conn_table *ct = l4lb_conn_create(64, false, &to);
		uint32_t t = expiry_starts[i], id, est;
		struct l4lb_conn c;
		uint64_t h;

		conn_make(&rs, tag++, &c);
		h = l4lb_conn_hash(&c.key);
		id = l4lb_conn_insert(ct, &c, h, t, HO);
		cr_assert_eq(l4lb_conn_lookup(ct, &c.key, h, t + 10, EST, NULL),
			     id);
		cr_assert_eq(l4lb_conn_count(ct, t + 1010, &est), 1);
		cr_assert_eq(est, 1);
		cr_assert_eq(l4lb_conn_count(ct, t + 1011, NULL), 0);
		/* established -> half-open is allowed (a new SYN) */
		cr_assert_eq(l4lb_conn_touch(ct, id, t + 20, HO), HO);
		cr_assert_eq(l4lb_conn_count(ct, t + 120, NULL), 1);
		cr_assert_eq(l4lb_conn_count(ct, t + 121, NULL), 0);
		/* to closing, and never back */
		cr_assert_eq(l4lb_conn_lookup(ct, &c.key, h, t + 30, CL, NULL),
			     id);
		cr_assert_eq(l4lb_conn_touch(ct, id, t + 40, HO), CL);
		cr_assert_eq(l4lb_conn_lookup(ct, &c.key, h, t + 50, HO, NULL),
			     id);
		cr_assert_eq(l4lb_conn_touch(ct, id, t + 60, EST), CL);
		cr_assert_eq(l4lb_conn_lookup(ct, &c.key, h, t + 70, EST, NULL),
			     id);
		cr_assert_eq(l4lb_conn_touch(ct, id, t + 80, L4LB_CONN_FREE),
			     CL);
		cr_assert_eq(l4lb_conn_count(ct, t + 130, &est), 1);
		cr_assert_eq(est, 0);
		cr_assert_eq(l4lb_conn_count(ct, t + 131, NULL), 0);
		l4lb_conn_destroy(ct);
	}
}

/* NULL or 0 fields: 5000 / 300000 / 10000 ms. */
Test(l4lb_conn, expiry_default_timeouts)
{
	const struct l4lb_conn_timeouts zero = {0, 0, 0}, part = {7, 0, 3};
	const struct l4lb_conn_timeouts *cfg[3] = {NULL, &zero, &part};
	const uint32_t want[3][4] = {{0, 5000, 300000, 10000},
				     {0, 5000, 300000, 10000},
				     {0, 7, 300000, 3}};
	uint64_t rs = base_seed() ^ 7;
	uint32_t tag = 0;

	for (unsigned i = 0; i < 3; i++)
		for (uint8_t s = HO; s <= CL; s++) {
			struct l4lb_conn_table *ct =
			    l4lb_conn_create(0, false, cfg[i]);
			uint32_t t = 0x3ffff000u, T = want[i][s];
			struct l4lb_conn c;

			conn_make(&rs, tag++, &c);
			cr_assert_neq(l4lb_conn_insert(
					  ct, &c, l4lb_conn_hash(&c.key), t, s),
				      NONE);
			cr_assert_eq(l4lb_conn_count(ct, t + T, NULL), 1,
				     "cfg %u state %u", i, s);
			cr_assert_eq(l4lb_conn_count(ct, t + T + 1, NULL), 0,
				     "cfg %u state %u", i, s);
			l4lb_conn_destroy(ct);
		}
}

/*
 * An entry stamped a little ahead of a caller's now_ms is young, not
 * expired: with @shared, data threads read their clocks at different
 * times (lb_fwd.c: once per burst), so one thread's now_ms trails the
 * stamps another one writes. Fails with conn.c as it stands: the age
 * (now - stamp) mod 2^30 is then about 2^30, over any timeout, so the
 * lagging thread misses the flow, inserts a second entry of its key, and
 * a half-open flow takes the way of an established one. Enable once ages
 * "from the future" (within a skew margin of 2^30) count as 0.
 */
Test(l4lb_conn, stamp_ahead_of_now_is_young)
{
	struct l4lb_conn_table *ct = l4lb_conn_create(64, true, NULL);
	uint64_t rs = base_seed() ^ 11;
	struct l4lb_conn c, est[2 * WAYS];
	uint32_t id, tag = 2, bk, alt;
	uint64_t h;

	conn_make(&rs, 1, &c);
	h = l4lb_conn_hash(&c.key);
	id = l4lb_conn_insert(ct, &c, h, 1001, EST);
	cr_assert_neq(id, NONE);
	cr_assert_eq(
	    l4lb_conn_lookup(ct, &c.key, h, 1000, L4LB_CONN_FREE, NULL), id,
	    "entry stamped 1 ms ahead not found");
	cr_assert_eq(l4lb_conn_insert(ct, &c, h, 1000, EST), NONE,
		     "a second entry of one key");
	/* two buckets of 8 established flows stamped at 1001 refuse a
	 * half-open one at 1000 whose buckets they are (both other than
	 * the first flow's) */
	bk = (id / WAYS) ^ 2;
	alt = bk ^ 1;
	for (unsigned i = 0; i < 2 * WAYS; i++)
		cr_assert_neq(
		    l4lb_conn_insert(
			ct, &est[i],
			conn_in_buckets(ct, &rs, &tag, bk, alt, &est[i]), 1001,
			EST),
		    NONE);
	h = conn_in_buckets(ct, &rs, &tag, bk, alt, &c);
	cr_assert_eq(l4lb_conn_insert(ct, &c, h, 1000, HO), NONE,
		     "half-open flow replaced an established one");
	cr_assert_eq(l4lb_conn_count(ct, 1001, NULL), 1 + 2 * WAYS);
	l4lb_conn_destroy(ct);
}

/* ----------------------------------------------------------- 4. twins */

struct twins {
	struct l4lb_conn_table *ct;
	uint64_t rs;
	uint32_t tag, now;
};

/* Insert a new flow of buckets @b and @b ^ 1 (its alternate); the
 * clock moves 1 ms per insert. */
static uint32_t tw_add(struct twins *tw, uint32_t b, uint8_t state,
		       struct l4lb_conn *c, uint64_t *h)
{
	uint64_t hh = conn_in_buckets(tw->ct, &tw->rs, &tw->tag, b, b ^ 1, c);
	uint32_t id = l4lb_conn_insert(tw->ct, c, hh, ++tw->now, state);

	if (h)
		*h = hh;
	return id;
}

static bool tw_found(struct twins *tw, const struct l4lb_conn *c, uint32_t id)
{
	return l4lb_conn_lookup(tw->ct, &c->key, l4lb_conn_hash(&c->key),
				tw->now, L4LB_CONN_FREE, NULL) == id &&
	       id != NONE;
}

static void tw_init(struct twins *tw, uint64_t seed)
{
	tw->ct = l4lb_conn_create(64, false, NULL);
	cr_assert_not_null(tw->ct);
	tw->rs = seed;
	tw->tag = 0;
	tw->now = 5000;
}

/* Eviction of A (LRU) frees its twin B, for an established and for a
 * half-open newcomer, twin in other buckets or in the same one. */
Test(l4lb_conn, twin_freed_on_eviction)
{
	for (unsigned v = 0; v < 4; v++) {
		struct twins tw;
		struct l4lb_conn ca, cb, cx, fill[2 * WAYS];
		uint32_t a, b, x, fid[2 * WAYS], bb = v & 2 ? 1 : 2, n;
		uint8_t sa = v & 1 ? HO : EST, sx = v & 1 ? HO : EST;
		struct l4lb_conn_stats st;

		tw_init(&tw, base_seed() ^ (0x100 + v));
		a = tw_add(&tw, 1, sa, &ca, NULL);
		b = tw_add(&tw, bb, EST, &cb, NULL);
		cr_assert(a != NONE && b != NONE);
		l4lb_conn_link(tw.ct, a, b);
		cr_assert_eq(peer_of(tw.ct, a), b);
		cr_assert_eq(peer_of(tw.ct, b), a);
		/* fill buckets 1 and 0 */
		n = bb == 1 ? 2 * WAYS - 2 : 2 * WAYS - 1;
		for (uint32_t i = 0; i < n; i++) {
			fid[i] = tw_add(&tw, 1, EST, &fill[i], NULL);
			cr_assert_neq(fid[i], NONE);
		}
		x = tw_add(&tw, 1, sx, &cx, NULL);
		cr_assert_eq(x, a, "variant %u: the LRU entry not replaced", v);
		cr_assert(tw_found(&tw, &cx, x));
		cr_assert_not(tw_found(&tw, &ca, a));
		cr_assert_eq(l4lb_conn_lookup(tw.ct, &cb.key,
					      l4lb_conn_hash(&cb.key), tw.now,
					      L4LB_CONN_FREE, NULL),
			     NONE, "variant %u: twin survived", v);
		cr_assert_eq(l4lb_conn_touch(tw.ct, b, tw.now, EST),
			     L4LB_CONN_FREE);
		cr_assert_eq(peer_of(tw.ct, x), NONE);
		for (uint32_t i = 0; i < n; i++)
			cr_assert(tw_found(&tw, &fill[i], fid[i]));
		cr_assert_eq(l4lb_conn_count(tw.ct, tw.now, NULL), n + 1);
		l4lb_conn_stats_get(tw.ct, &st);
		cr_assert_eq(st.replaced, 1);
		if (bb == 1) { /* B's way is free now: no replacement */
			struct l4lb_conn cy;
			uint32_t y = tw_add(&tw, 1, EST, &cy, NULL);

			cr_assert_eq(y, b);
			l4lb_conn_stats_get(tw.ct, &st);
			cr_assert_eq(st.replaced, 1);
		}
		l4lb_conn_destroy(tw.ct);
	}
}

/*
 * NAT: a flow's reply entry R, inserted right after its half-open
 * forward entry F in the same buckets, never takes F's way. With F the
 * only half-open entry of both buckets, R fails (the caller tries
 * another SNAT port) and F stays; with another half-open entry H of the
 * same millisecond, scanned before F, R replaces H (l4lb_conn_insert()
 * would take F: the last of equally old ones).
 */
Test(l4lb_conn, reply_never_takes_its_forward_entry)
{
	for (unsigned v = 0; v < 2; v++) {
		struct twins tw;
		struct l4lb_conn cf, ch, cr, fill[2 * WAYS];
		uint32_t f, hid = NONE, r, n = 2 * WAYS - 1 - v;
		uint64_t hf, hh, hr;

		tw_init(&tw, base_seed() ^ (0x300 + v));
		for (uint32_t i = 0; i < n; i++)
			cr_assert_neq(tw_add(&tw, 1, EST, &fill[i], NULL),
				      NONE);
		tw.now++;
		if (v) {
			hh = conn_in_buckets(tw.ct, &tw.rs, &tw.tag, 1, 0, &ch);
			hid = l4lb_conn_insert(tw.ct, &ch, hh, tw.now, HO);
			cr_assert_neq(hid, NONE);
		}
		hf = conn_in_buckets(tw.ct, &tw.rs, &tw.tag, 1, 0, &cf);
		f = l4lb_conn_insert(tw.ct, &cf, hf, tw.now, HO);
		cr_assert_neq(f, NONE);
		hr = conn_in_buckets(tw.ct, &tw.rs, &tw.tag, 1, 0, &cr);
		r = l4lb_conn_insert_reply(tw.ct, &cr, hr, tw.now, HO, f);
		cr_assert(tw_found(&tw, &cf, f),
			  "variant %u: the forward entry was replaced", v);
		if (v) {
			cr_assert_eq(r, hid, "variant %u: took %u, not H %u", v,
				     r, hid);
			cr_assert(tw_found(&tw, &cr, r));
			cr_assert_not(tw_found(&tw, &ch, hid));
		} else {
			cr_assert_eq(r, NONE, "variant %u: took %u", v, r);
			cr_assert_eq(l4lb_conn_lookup(tw.ct, &cr.key, hr,
						      tw.now, L4LB_CONN_FREE,
						      NULL),
				     NONE);
		}
		for (uint32_t i = 0; i < n; i++)
			cr_assert_neq(
			    l4lb_conn_lookup(tw.ct, &fill[i].key,
					     l4lb_conn_hash(&fill[i].key),
					     tw.now, L4LB_CONN_FREE, NULL),
			    NONE);
		cr_assert_eq(l4lb_conn_count(tw.ct, tw.now, NULL), n + 1 + v);
		l4lb_conn_destroy(tw.ct);
	}
}

Test(l4lb_conn, twin_freed_with_entry)
{
	for (unsigned v = 0; v < 2; v++) {
		struct twins tw;
		struct l4lb_conn ca, cb, cc;
		uint32_t a, b, c;

		tw_init(&tw, base_seed() ^ (0x200 + v));
		a = tw_add(&tw, 3, EST, &ca, NULL);
		b = tw_add(&tw, 4, HO, &cb, NULL);
		c = tw_add(&tw, 4, EST, &cc, NULL);
		l4lb_conn_link(tw.ct, a, b);
		l4lb_conn_free(tw.ct, v ? b : a);
		cr_assert_not(tw_found(&tw, &ca, a));
		cr_assert_not(tw_found(&tw, &cb, b));
		cr_assert(tw_found(&tw, &cc, c));
		cr_assert_eq(l4lb_conn_count(tw.ct, tw.now, NULL), 1);
		l4lb_conn_destroy(tw.ct);
	}
}

/* A's twin B is freed through a relink and its way reused by D: freeing
 * or evicting A must leave D alone. */
Test(l4lb_conn, stale_twin_does_not_free_reused_way)
{
	for (unsigned v = 0; v < 2; v++) {
		struct twins tw;
		struct l4lb_conn ca, cb, cc, cd, cx, fill[2 * WAYS];
		uint32_t a, b, c, d, x, fid[2 * WAYS];

		tw_init(&tw, base_seed() ^ (0x300 + v));
		a = tw_add(&tw, 5, EST, &ca, NULL);
		b = tw_add(&tw, 6, EST, &cb, NULL);
		for (uint32_t i = 0; i < WAYS - 1; i++) /* bucket 6 full */
			fid[i] = tw_add(&tw, 6, EST, &fill[i], NULL);
		c = tw_add(&tw, 7, EST, &cc, NULL);
		l4lb_conn_link(tw.ct, a, b);
		l4lb_conn_link(tw.ct, b, c); /* B's twin is C now */
		l4lb_conn_free(tw.ct, c);    /* frees B, not A */
		cr_assert_not(tw_found(&tw, &cb, b));
		cr_assert_not(tw_found(&tw, &cc, c));
		cr_assert(tw_found(&tw, &ca, a));
		cr_assert_eq(peer_of(tw.ct, a), b);
		d = tw_add(&tw, 6, HO, &cd, NULL);
		cr_assert_eq(d, b, "D did not take B's way");
		cr_assert_eq(peer_of(tw.ct, d), NONE);
		if (v == 0) {
			l4lb_conn_free(tw.ct, a);
			cr_assert_not(tw_found(&tw, &ca, a));
		} else { /* evict A: buckets 5 and 4 full, A the LRU */
			for (uint32_t i = 0; i < 2 * WAYS - 1; i++)
				cr_assert_neq(tw_add(&tw, 5, EST, &cx, NULL),
					      NONE);
			x = tw_add(&tw, 5, EST, &cx, NULL);
			cr_assert_eq(x, a);
		}
		cr_assert(tw_found(&tw, &cd, d), "variant %u: D freed", v);
		for (uint32_t i = 0; i < WAYS - 1; i++)
			cr_assert(tw_found(&tw, &fill[i], fid[i]));
		l4lb_conn_destroy(tw.ct);
	}
}

/* ---------------------------------------------------- 5. shared mode */

#define SH_THREADS 4
#define SH_ENTRIES 1024u
#define SH_KEYS	   4096u
#define SH_ROUND   256u

struct sh_key {
	struct l4lb_conn c;
	uint64_t h;
};

static struct {
	struct l4lb_conn_table *ct;
	struct sh_key keys[SH_KEYS];
	uint32_t own[SH_THREADS][SH_KEYS]; /* key indexes by owner */
	uint32_t nown[SH_THREADS];
	pthread_barrier_t bar;
	uint32_t now; /* atomic */
	int done;     /* atomic */
	bool chaos;
	struct timespec t0;
	double budget_s;
	uint64_t seed;
	uint64_t ops[SH_THREADS];
	uint32_t bad_copies; /* atomic: lookups that copied another key */
} sh;

static double sh_elapsed(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - sh.t0.tv_sec) +
	       (double)(t.tv_nsec - sh.t0.tv_nsec) * 1e-9;
}

/*
 * Strict mode: thread t inserts and frees only keys of the buckets it
 * owns ((b / 2) % 4 == t, for both buckets of each of its keys), pairs
 * of them linked at once as the balancer does;
 * it looks up and touches anyone's. All threads use one now_ms per
 * round (rounds end at a barrier). Chaos mode: any thread does anything
 * to any key or id, with now_ms skewed by up to 2 ms.
 */
static void *sh_worker(void *arg)
{
	uint32_t t = (uint32_t)(uintptr_t)arg;
	uint64_t rs = sh.seed + t * 0x9e3779b9u;
	struct l4lb_conn_table *ct = sh.ct;
	uint32_t ids = 2 * l4lb_conn_capacity(ct);
	const uint32_t *own = sh.own[t];
	uint32_t nown = sh.nown[t] & ~1u;
	uint64_t n = 0;

	for (;;) {
		uint32_t now = __atomic_load_n(&sh.now, __ATOMIC_ACQUIRE);

		for (uint32_t i = 0; i < SH_ROUND; i++, n++) {
			uint32_t op = rng_below(&rs, 100);
			uint32_t p = rng_below(&rs, nown / 2) * 2;
			const struct sh_key *f = &sh.keys[own[p]];
			const struct sh_key *r = &sh.keys[own[p + 1]];
			const struct sh_key *any =
			    &sh.keys[rng_below(&rs, SH_KEYS)];
			struct l4lb_conn out;
			uint32_t id, id2;

			if (sh.chaos) {
				now =
				    __atomic_load_n(&sh.now, __ATOMIC_RELAXED) +
				    rng_below(&rs, 3);
				f = any;
				r = &sh.keys[rng_below(&rs, SH_KEYS)];
			}
			if (op < 30) {
				id = l4lb_conn_insert(ct, &f->c, f->h, now,
						      random_state(&rs));
				if (id == NONE || op < 10)
					continue;
				id2 = l4lb_conn_insert(ct, &r->c, r->h, now,
						       random_state(&rs));
				if (id2 != NONE && id2 != id)
					l4lb_conn_link(ct, id, id2);
			} else if (op < 60) {
				l4lb_conn_prefetch(ct, any->h, any->c.key.v6);
				l4lb_conn_prefetch_entry(ct, any->h,
							 any->c.key.v6);
				id = l4lb_conn_lookup(ct, &any->c.key, any->h,
						      now, random_req(&rs),
						      op & 1 ? &out : NULL);
				if (id != NONE && (op & 1) &&
				    memcmp(&out.key, &any->c.key,
					   sizeof(out.key)))
					__atomic_fetch_add(&sh.bad_copies, 1,
							   __ATOMIC_RELAXED);
			} else if (op < 70) {
				(void)l4lb_conn_touch(ct, rng_below(&rs, ids),
						      now, random_req(&rs));
			} else if (op < 85) {
				id = l4lb_conn_lookup(ct, &f->c.key, f->h, now,
						      L4LB_CONN_FREE, NULL);
				if (sh.chaos && op < 75)
					id = rng_below(&rs, ids);
				if (id != NONE)
					l4lb_conn_free(ct, id);
			} else if (op < 95) {
				id = l4lb_conn_lookup(ct, &f->c.key, f->h, now,
						      EST, NULL);
				if (id != NONE)
					l4lb_conn_set_backend(ct, id, t, 99);
			} else if (sh.chaos) {
				l4lb_conn_link(ct, rng_below(&rs, ids),
					       rng_below(&rs, ids));
			}
		}
		if (sh.chaos) {
			if (sh_elapsed() > sh.budget_s)
				break;
			if (t == 0)
				__atomic_fetch_add(&sh.now,
						   1 + rng_below(&rs, 4),
						   __ATOMIC_RELEASE);
			continue;
		}
		if (pthread_barrier_wait(&sh.bar) ==
		    PTHREAD_BARRIER_SERIAL_THREAD) {
			uint32_t adv =
			    rng_below(&rs, 16) ? 1 : rng_below(&rs, 60);

			__atomic_store_n(&sh.now, now + adv, __ATOMIC_RELEASE);
			if (sh_elapsed() > sh.budget_s)
				__atomic_store_n(&sh.done, 1, __ATOMIC_RELEASE);
		}
		pthread_barrier_wait(&sh.bar);
		if (__atomic_load_n(&sh.done, __ATOMIC_ACQUIRE))
			break;
	}
	sh.ops[t] = n;
	return NULL;
}

static void sh_run(bool chaos, double budget_s)
{
	pthread_t th[SH_THREADS];
	uint32_t cap = l4lb_conn_capacity(sh.ct);

	sh.chaos = chaos;
	sh.done = 0;
	sh.budget_s = budget_s;
	clock_gettime(CLOCK_MONOTONIC, &sh.t0);
	cr_assert_eq(pthread_barrier_init(&sh.bar, NULL, SH_THREADS), 0);
	for (uintptr_t t = 0; t < SH_THREADS; t++)
		cr_assert_eq(pthread_create(&th[t], NULL, sh_worker, (void *)t),
			     0);
	/* the control thread reads counters meanwhile */
	while (!__atomic_load_n(&sh.done, __ATOMIC_ACQUIRE) &&
	       sh_elapsed() < budget_s) {
		uint32_t est, live;
		struct l4lb_conn_stats s;

		live = l4lb_conn_count(
		    sh.ct, __atomic_load_n(&sh.now, __ATOMIC_ACQUIRE), &est);
		l4lb_conn_stats_get(sh.ct, &s);
		cr_assert_leq(live, 2 * cap); /* both families */
		cr_assert_leq(est, live);
		cr_assert_leq(s.replaced + s.expired, s.created);
	}
	for (unsigned t = 0; t < SH_THREADS; t++)
		pthread_join(th[t], NULL);
	pthread_barrier_destroy(&sh.bar);
}

/*
 * After the threads: the count agrees with the entries touch finds live,
 * every peer is an id or NONE, and (@strict) every live entry is found by
 * its own key (so no key has two live entries) and every link of a live
 * entry is symmetric or points at a free or expired way. (Chaos links
 * random ids, and its skewed clocks meet the stamp-ahead problem, so the
 * strict checks do not apply to it.)
 */
static void sh_check(bool strict)
{
	struct l4lb_conn_table *ct = sh.ct;
	uint32_t ids = 2 * l4lb_conn_capacity(ct), now = sh.now, live = 0;
	uint32_t est = 0, t_est, asym = 0;
	uint8_t *st = calloc(ids, 1);

	cr_assert_not_null(st);
	for (uint32_t id = 0; id < ids; id++)
		st[id] = l4lb_conn_touch(ct, id, now, L4LB_CONN_FREE);
	for (uint32_t id = 0; id < ids; id++) {
		struct l4lb_conn copy;
		const struct l4lb_conn *e = &copy;
		uint32_t got;

		l4lb_conn_read(ct, id, &copy);
		if (st[id] == L4LB_CONN_FREE)
			continue;
		live++;
		est += st[id] == EST;
		if (strict) {
			got = l4lb_conn_lookup(ct, &e->key,
					       l4lb_conn_hash(&e->key), now,
					       L4LB_CONN_FREE, NULL);
			cr_assert_eq(got, id,
				     "live entry %u not found by its key (got "
				     "%u)",
				     id, got);
		}
		if (e->peer == NONE)
			continue;
		cr_assert_lt(e->peer, ids, "entry %u: peer %u", id, e->peer);
		if (st[e->peer] != L4LB_CONN_FREE && peer_of(ct, e->peer) != id)
			asym++;
		if (strict)
			cr_assert_eq(asym, 0,
				     "entry %u -> %u, but %u -> %u (live)", id,
				     e->peer, e->peer, peer_of(ct, e->peer));
	}
	cr_assert_eq(l4lb_conn_count(ct, now, &t_est), live);
	cr_assert_eq(t_est, est);
	free(st);
}

Test(l4lb_conn, shared_threads)
{
	uint64_t rs = base_seed() ^ 0x5a5a;
	const struct l4lb_conn_timeouts to = {30, 300, 10};
	uint64_t total = 0;
	uint32_t tag = 0;

	g_seed = rs;
	sh.seed = rs;
	sh.ct = l4lb_conn_create(SH_ENTRIES, true, &to);
	cr_assert_not_null(sh.ct);
	memset(sh.nown, 0, sizeof(sh.nown));
	for (uint32_t i = 0; i < SH_KEYS; i++) {
		uint32_t t;
		uint8_t v6;

		/* keys whose two buckets have one owner: t = (bucket / 2) %
		 * 4 for both */
		do {
			conn_make(&rs, tag++, &sh.keys[i].c);
			sh.keys[i].h = l4lb_conn_hash(&sh.keys[i].c.key);
			v6 = sh.keys[i].c.key.v6;
			t = (bucket_of(sh.ct, sh.keys[i].h, v6) / 2) %
			    SH_THREADS;
		} while ((alt_of(sh.ct, sh.keys[i].h, v6) / 2) % SH_THREADS !=
			 t);
		sh.own[t][sh.nown[t]++] = i;
	}
	for (unsigned t = 0; t < SH_THREADS; t++)
		cr_assert_geq(sh.nown[t], 64);
	sh.now = 0x3fffff00u; /* the 2^30 stamp wrap comes during the run */
	sh.bad_copies = 0;
	sh_run(false, 0.7);
	for (unsigned t = 0; t < SH_THREADS; t++)
		total += sh.ops[t];
	cr_log_info("shared strict: %llu ops, now %#x",
		    (unsigned long long)total, sh.now);
	sh_check(true);
	sh_run(true, 0.3);
	sh_check(false);
	cr_assert_eq(sh.bad_copies, 0, "lookups copied another key's entry");
	l4lb_conn_destroy(sh.ct);
}

/* ------------------------------------------------ 6. argument checks */

Test(l4lb_conn, create_sizes)
{
	static const uint32_t req[] = {0,    1,	   63,	 64,   65,
				       100,  127,  128,	 129,  1000,
				       1024, 1025, 4095, 4096, 65537};
	struct l4lb_conn_table *ct;

	for (unsigned i = 0; i < DPFLOW_ARRAY_SIZE(req); i++) {
		uint32_t cap;

		ct = l4lb_conn_create(req[i], i & 1, NULL);
		cr_assert_not_null(ct, "create(%u)", req[i]);
		cap = l4lb_conn_capacity(ct);
		cr_assert_eq(cap & (cap - 1), 0, "create(%u): %u", req[i], cap);
		cr_assert_geq(cap, L4LB_CONN_MIN);
		cr_assert_geq(cap, req[i]);
		cr_assert(cap == L4LB_CONN_MIN || cap / 2 < req[i],
			  "create(%u): %u, not the least", req[i], cap);
		cr_assert_eq(l4lb_conn_count(ct, 0, NULL), 0);
		l4lb_conn_destroy(ct);
	}
	cr_assert_eq(l4lb_conn_capacity(ct = l4lb_conn_create(0, false, NULL)),
		     L4LB_CONN_MIN);
	l4lb_conn_destroy(ct);
	cr_assert_null(l4lb_conn_create(L4LB_CONN_MAX + 1, false, NULL));
	cr_assert_null(l4lb_conn_create(L4LB_CONN_MAX * 2, true, NULL));
	cr_assert_null(l4lb_conn_create(UINT32_MAX, false, NULL));
	l4lb_conn_destroy(NULL);
}
