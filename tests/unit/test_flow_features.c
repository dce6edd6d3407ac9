/*
 * Flow engine features beyond exact/ACL/LPM tables, through the C API
 * (flow.h), each against an independent reference written here:
 *  - dpflow_hash32 against published MurmurHash3_x86_32 vectors;
 *  - dpflow_rss_hash against a plain bitwise Toeplitz (checked itself on
 *    Microsoft's published RSS vectors), symmetry;
 *  - HASH pipes against a naive slot table, LPM pipes with exact fields
 *    (VRF) before an IPv4 or an IPv6 address against a linear scan;
 *  - CT pipes (TCP handshake, strict mode, lookup-only, user register,
 *    full table, UDP, non-IP, aging), meters (RFC 2697/2698 counted by
 *    hand), shared counters and meters, aging, RSS queues, software
 *    handlers, entry updates (also under a running worker), per-entry
 *    encapsulation (outer bytes computed here), and bad configurations.
 *
 * Packets are built byte by byte here (Ethernet, optional 802.1Q, IPv4 or
 * IPv6, TCP or UDP), sent with dpflow_ctx_process_burst() and read back
 * from `ring:` ports.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dpflow/dpflow.h"
#include "dpflow/flow.h"

/* ---- test helpers: random numbers, packets, contexts ----------------------
 */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static void rng_seed(uint64_t s)
{
	rng_state = s ? s : 0x9e3779b97f4a7c15ull;
}

static uint32_t rnd(void)
{
	/* xorshift64* */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (uint32_t)((rng_state * 0x2545f4914f6cdd1dull) >> 32);
}

static void put16(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint32_t get16(const uint8_t *p)
{
	return (uint32_t)p[0] << 8 | p[1];
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

/* What a test packet is. */
struct pspec {
	bool v6;
	bool arp;      /* an ARP request instead of IP */
	uint8_t proto; /* 6 TCP, 17 UDP, anything else: no L4 header */
	uint8_t src[16], dst[16];
	uint16_t sport, dport;
	uint8_t tcp_flags;
	uint16_t vlan; /* 802.1Q VLAN id; 0: untagged */
	uint16_t len;  /* frame bytes (payload pads up to it); 0: minimum */
};

/* RFC 1071 one's complement sum, folded. */
static uint16_t ones_sum(const uint8_t *p, unsigned n)
{
	uint32_t s = 0;

	for (unsigned i = 0; i + 1 < n; i += 2)
		s += get16(p + i);
	if (n & 1)
		s += (uint32_t)p[n - 1] << 8;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)s;
}

/* Write the frame of @s at @b; returns its length. */
static unsigned build_frame(uint8_t *b, const struct pspec *s)
{
	static const uint8_t dmac[6] = {0x02, 0, 0, 0, 0, 0x02};
	static const uint8_t smac[6] = {0x02, 0, 0, 0, 0, 0x01};
	unsigned o = 12, l3, ipl, l4l, total, pay;

	memcpy(b, dmac, 6);
	memcpy(b + 6, smac, 6);
	if (s->vlan) {
		put16(b + o, 0x8100);
		put16(b + o + 2, s->vlan);
		o += 4;
	}
	if (s->arp) {
		put16(b + o, 0x0806);
		o += 2;
		memset(b + o, 0, 28);
		put16(b + o, 1);	  /* Ethernet */
		put16(b + o + 2, 0x0800); /* IPv4 */
		b[o + 4] = 6;
		b[o + 5] = 4;
		put16(b + o + 6, 1); /* request */
		o += 28;
		total = s->len > o ? s->len : o;
		memset(b + o, 0, total - o);
		return total;
	}
	put16(b + o, s->v6 ? 0x86dd : 0x0800);
	o += 2;
	l3 = o;
	ipl = s->v6 ? 40 : 20;
	l4l = s->proto == 6 ? 20 : s->proto == 17 ? 8 : 0;
	total = l3 + ipl + l4l;
	if (s->len > total)
		total = s->len;
	pay = total - l3 - ipl - l4l;
	if (s->v6) {
		put32(b + l3, 0x60000000u);
		put16(b + l3 + 4, l4l + pay);
		b[l3 + 6] = s->proto;
		b[l3 + 7] = 64;
		memcpy(b + l3 + 8, s->src, 16);
		memcpy(b + l3 + 24, s->dst, 16);
	} else {
		b[l3] = 0x45;
		b[l3 + 1] = 0;
		put16(b + l3 + 2, ipl + l4l + pay);
		put16(b + l3 + 4, 0x1234);
		put16(b + l3 + 6, 0x4000); /* DF */
		b[l3 + 8] = 64;
		b[l3 + 9] = s->proto;
		put16(b + l3 + 10, 0);
		memcpy(b + l3 + 12, s->src, 4);
		memcpy(b + l3 + 16, s->dst, 4);
		put16(b + l3 + 10, (uint16_t)~ones_sum(b + l3, 20));
	}
	o = l3 + ipl;
	if (s->proto == 6) {
		put16(b + o, s->sport);
		put16(b + o + 2, s->dport);
		put32(b + o + 4, 1000);
		put32(b + o + 8, s->tcp_flags & 0x10 ? 2000 : 0);
		b[o + 12] = 0x50;
		b[o + 13] = s->tcp_flags;
		put16(b + o + 14, 0xffff);
		put32(b + o + 16, 0);
	} else if (s->proto == 17) {
		put16(b + o, s->sport);
		put16(b + o + 2, s->dport);
		put16(b + o + 4, 8 + pay);
		put16(b + o + 6, 0);
	}
	o += l4l;
	for (unsigned i = 0; i < pay; i++)
		b[o + i] = (uint8_t)(0xa0 + i);
	return total;
}

static uint32_t mk(struct dpflow_pool *pool, const struct pspec *s)
{
	uint32_t idx;

	cr_assert_eq(dpflow_pool_alloc_bulk(pool, &idx, 1), 0, "pool empty");
	dpflow_pool_meta(pool, idx)->data_len =
	    (uint16_t)build_frame(dpflow_pkt_data(pool, idx), s);
	return idx;
}

static void v4(uint8_t *a, uint32_t addr)
{
	memset(a, 0, 16);
	put32(a, addr);
}

/* An IPv4 packet from @src:@sport to @dst:@dport. */
static struct pspec p4(uint8_t proto, uint32_t src, uint16_t sport,
		       uint32_t dst, uint16_t dport)
{
	struct pspec s;

	memset(&s, 0, sizeof(s));
	s.proto = proto;
	v4(s.src, src);
	v4(s.dst, dst);
	s.sport = sport;
	s.dport = dport;
	return s;
}

/* Port ids: "in" is 0, output i is OUT(i). */
#define OUT(i) ((uint16_t)((i) + 1))

static struct dpflow_ctx *ctx_new(const struct dpflow_ctx_params *p,
				  unsigned n_out)
{
	struct dpflow_error err = {0};
	struct dpflow_ctx *ctx = dpflow_ctx_create(p, &err);

	cr_assert_not_null(ctx, "ctx: %s", err.msg);
	cr_assert_eq(dpflow_ctx_port_add(ctx, "in", "ring:in,size=1024", &err),
		     0, "%s", err.msg);
	for (unsigned i = 0; i < n_out; i++) {
		char name[16], uri[48];

		snprintf(name, sizeof(name), "p%u", i);
		snprintf(uri, sizeof(uri), "ring:p%u,size=4096", i);
		cr_assert_eq(dpflow_ctx_port_add(ctx, name, uri, &err),
			     (int)OUT(i), "%s", err.msg);
	}
	return ctx;
}

/* Run @n packets through the pipeline as a data thread would. */
static void send_burst(struct dpflow_ctx *ctx, uint32_t *idx, unsigned n)
{
	dpflow_ctx_thread_online(ctx);
	while (n) {
		uint16_t k =
		    (uint16_t)(n > DPFLOW_BURST_MAX ? DPFLOW_BURST_MAX : n);

		dpflow_ctx_process_burst(ctx, 0, idx, k);
		idx += k;
		n -= k;
	}
	dpflow_ctx_thread_offline(ctx);
}

static void send1(struct dpflow_ctx *ctx, const struct pspec *s)
{
	uint32_t idx = mk(dpflow_ctx_pool(ctx), s);

	send_burst(ctx, &idx, 1);
}

/* Take up to @max packets port @port sent (the caller frees them). */
static unsigned take(struct dpflow_ctx *ctx, uint16_t port, uint32_t *idx,
		     unsigned max)
{
	struct dpflow_ring *r = dpflow_port_ring_tx(dpflow_ctx_port(ctx, port));

	return dpflow_ring_dequeue_burst(r, idx, max);
}

/* Packets port @port sent, freed. */
static unsigned count_out(struct dpflow_ctx *ctx, uint16_t port)
{
	uint32_t idx[256];
	unsigned n, total = 0;

	while ((n = take(ctx, port, idx, 256)) > 0) {
		dpflow_pool_free_bulk(dpflow_ctx_pool(ctx), idx, n);
		total += n;
	}
	return total;
}

static uint64_t drops_of(struct dpflow_ctx *ctx, unsigned reason)
{
	uint64_t d[DPFLOW_DROP__COUNT];

	dpflow_ctx_drops(ctx, d);
	return d[reason];
}

/* Every slot back in the pool, none twice. */
static void expect_pool_whole(struct dpflow_ctx *ctx)
{
	struct dpflow_pool *pool = dpflow_ctx_pool(ctx);

	cr_expect_eq(dpflow_pool_check(pool), 0, "pool free ring corrupt");
	cr_expect_eq(dpflow_pool_avail(pool), pool->n_slots,
		     "%u of %u slots back in the pool", dpflow_pool_avail(pool),
		     pool->n_slots);
}

/* Template builders. */
static void match_add(struct dpflow_pipe_cfg *c, uint16_t field, bool per_entry,
		      uint32_t value)
{
	struct dpflow_match_field *f = &c->match.f[c->match.n++];
	unsigned bytes = dpflow_field_bytes(field);

	f->field = field;
	f->per_entry = per_entry;
	memset(f->mask, 0xff, sizeof(f->mask));
	for (unsigned b = 0; b < bytes && b < 4; b++)
		f->value[bytes - 1 - b] = (uint8_t)(value >> (8 * b));
}

static struct dpflow_action act_set_reg(unsigned reg, bool per_entry,
					uint32_t value)
{
	struct dpflow_action a;

	memset(&a, 0, sizeof(a));
	a.kind = DPFLOW_ACT_SET_FIELD;
	a.field = (uint16_t)(DPFLOW_FIELD_META_REG0 + reg);
	a.per_entry = per_entry;
	put32(a.value, value);
	return a;
}

static struct dpflow_fwd fwd_port(uint16_t port)
{
	struct dpflow_fwd f;

	memset(&f, 0, sizeof(f));
	f.kind = DPFLOW_FWD_PORT;
	f.port = port;
	return f;
}

static struct dpflow_fwd fwd_pipe(struct dpflow_pipe *p)
{
	struct dpflow_fwd f;

	memset(&f, 0, sizeof(f));
	f.kind = DPFLOW_FWD_PIPE;
	f.pipe = p;
	return f;
}

static struct dpflow_pipe_cfg pipe_cfg(const char *name, uint8_t type,
				       uint32_t size)
{
	struct dpflow_pipe_cfg c;

	memset(&c, 0, sizeof(c));
	c.name = name;
	c.type = type;
	c.size = size;
	return c;
}

static struct dpflow_pipe *pipe_new(struct dpflow_ctx *ctx,
				    const struct dpflow_pipe_cfg *c)
{
	struct dpflow_error err = {0};
	struct dpflow_pipe *p = dpflow_pipe_create(ctx, c, &err);

	cr_assert_not_null(p, "pipe '%s': %s (field %s)", c->name, err.msg,
			   err.field ? err.field : "-");
	return p;
}

static struct dpflow_entry_cfg entry_cfg(void)
{
	struct dpflow_entry_cfg e;

	memset(&e, 0, sizeof(e));
	return e;
}

/* Add one entry and publish it. */
static struct dpflow_entry *entry_new(struct dpflow_ctx *ctx,
				      struct dpflow_pipe *p,
				      const struct dpflow_entry_cfg *e)
{
	struct dpflow_error err = {0};
	struct dpflow_queue *q = dpflow_queue_create(ctx, &err);
	struct dpflow_entry *h = dpflow_entry_add(q, p, e, NULL, &err);
	int rc;

	cr_assert_not_null(h, "%s", err.msg);
	rc = dpflow_entries_process(q, NULL, &err);
	cr_assert_eq(rc, 0, "entry: %s (field %s)", err.msg,
		     err.field ? err.field : "-");
	dpflow_queue_destroy(q);
	return h;
}

/* A BASIC pipe on outer.l4.dport with a counter, forwarding per entry,
 * missing to @miss. */
static struct dpflow_pipe *dport_pipe(struct dpflow_ctx *ctx, const char *name,
				      bool root, struct dpflow_fwd miss)
{
	struct dpflow_pipe_cfg c = pipe_cfg(name, DPFLOW_PIPE_BASIC, 64);

	c.root = root;
	match_add(&c, DPFLOW_FIELD_OUTER_L4_DPORT, true, 0);
	c.monitor.counter = true;
	c.fwd.kind = DPFLOW_FWD_PER_ENTRY;
	c.miss_fwd = miss;
	return pipe_new(ctx, &c);
}

static struct dpflow_entry_cfg dport_entry(uint16_t dport, struct dpflow_fwd f)
{
	struct dpflow_entry_cfg e = entry_cfg();

	put16(e.key, dport);
	e.fwd = f;
	return e;
}

/* ---- 1. dpflow_hash32: MurmurHash3_x86_32
 * ------------------------------------
 */

/* Austin Appleby's MurmurHash3_x86_32, as in SMHasher, written out again. */
static uint32_t ref_murmur3(const uint8_t *data, size_t len, uint32_t seed)
{
	const size_t nblocks = len / 4;
	uint32_t h1 = seed, k1;
	const uint32_t c1 = 0xcc9e2d51, c2 = 0x1b873593;
	const uint8_t *tail = data + nblocks * 4;

	for (size_t i = 0; i < nblocks; i++) {
		k1 = (uint32_t)data[4 * i] | (uint32_t)data[4 * i + 1] << 8 |
		     (uint32_t)data[4 * i + 2] << 16 |
		     (uint32_t)data[4 * i + 3] << 24;
		k1 *= c1;
		k1 = (k1 << 15) | (k1 >> 17);
		k1 *= c2;
		h1 ^= k1;
		h1 = (h1 << 13) | (h1 >> 19);
		h1 = h1 * 5 + 0xe6546b64;
	}
	k1 = 0;
	switch (len & 3) {
	case 3:
		k1 ^= (uint32_t)tail[2] << 16;
		/* fall through */
	case 2:
		k1 ^= (uint32_t)tail[1] << 8;
		/* fall through */
	case 1:
		k1 ^= tail[0];
		k1 *= c1;
		k1 = (k1 << 15) | (k1 >> 17);
		k1 *= c2;
		h1 ^= k1;
		break;
	default:
		break;
	}
	h1 ^= (uint32_t)len;
	h1 ^= h1 >> 16;
	h1 *= 0x85ebca6b;
	h1 ^= h1 >> 13;
	h1 *= 0xc2b2ae35;
	h1 ^= h1 >> 16;
	return h1;
}

struct murmur_vec {
	const char *data;
	unsigned len;
	uint32_t seed, hash;
};

/* Published vectors (SMHasher's verification values as commonly quoted,
 * and Python mmh3's documented outputs). */
static const struct murmur_vec murmur_vecs[] = {
    {"", 0, 0, 0},
    {"", 0, 1, 0x514e28b7},
    {"", 0, 0xffffffff, 0x81f16f39},
    {"\xff\xff\xff\xff", 4, 0, 0x76293b50},
    {"\x21\x43\x65\x87", 4, 0, 0xf55b516b},
    {"\x21\x43\x65\x87", 4, 0x5082edee, 0x2362f9de},
    {"\x21\x43\x65", 3, 0, 0x7e4a8634},
    {"\x21\x43", 2, 0, 0xa0f7b07a},
    {"\x21", 1, 0, 0x72661cf4},
    {"\0\0\0\0", 4, 0, 0x2362f9de},
    {"\0\0\0", 3, 0, 0x85f0b427},
    {"\0\0", 2, 0, 0x30f4c306},
    {"\0", 1, 0, 0x514e28b7},
    {"aaaa", 4, 0x9747b28c, 0x5a97808a},
    {"aaa", 3, 0x9747b28c, 0x283e0130},
    {"aa", 2, 0x9747b28c, 0x5d211726},
    {"a", 1, 0x9747b28c, 0x7fa09ea6},
    {"abcd", 4, 0x9747b28c, 0xf0478627},
    {"abc", 3, 0x9747b28c, 0xc84a62dd},
    {"ab", 2, 0x9747b28c, 0x74875592},
    {"Hello, world!", 13, 0x9747b28c, 0x24884cba},
    {"The quick brown fox jumps over the lazy dog", 43, 0x9747b28c, 0x2fa826cd},
    {"hello", 5, 0, 0x248bfa47},
    {"The quick brown fox jumps over the lazy dog", 43, 0, 0x2e4ff723},
};

Test(flow_hash, murmur3_matches_published_vectors)
{
	for (size_t i = 0; i < DPFLOW_ARRAY_SIZE(murmur_vecs); i++) {
		const struct murmur_vec *v = &murmur_vecs[i];

		cr_expect_eq(
		    ref_murmur3((const uint8_t *)v->data, v->len, v->seed),
		    v->hash, "reference, vector %zu", i);
		cr_expect_eq(
		    dpflow_hash32(v->data, v->len, v->seed), v->hash,
		    "dpflow_hash32(vector %zu: len %u seed %#x) = %#x, "
		    "expected %#x",
		    i, v->len, v->seed, dpflow_hash32(v->data, v->len, v->seed),
		    v->hash);
	}
	/* and on random keys of every length up to the key maximum */
	rng_seed(1);
	for (unsigned i = 0; i < 2000; i++) {
		uint8_t k[DPFLOW_KEY_MAX];
		unsigned len = rnd() % (DPFLOW_KEY_MAX + 1);
		uint32_t seed = rnd();

		for (unsigned b = 0; b < len; b++)
			k[b] = (uint8_t)rnd();
		cr_assert_eq(dpflow_hash32(k, len, seed),
			     ref_murmur3(k, len, seed), "len %u", len);
	}
}

/* ---- 2. dpflow_rss_hash: Toeplitz
 * --------------------------------------------
 */

/* Toeplitz as in Microsoft's RSS specification, bit by bit over @key. */
static uint32_t ref_toeplitz(const uint8_t *key, const uint8_t *in,
			     unsigned len)
{
	uint32_t r = 0, v = get32(key);

	for (unsigned i = 0; i < len; i++)
		for (int b = 7; b >= 0; b--) {
			if (in[i] & (1u << b))
				r ^= v;
			v <<= 1;
			if (key[i + 4] & (1u << b))
				v |= 1;
		}
	return r;
}

static const uint8_t ms_key[40] = {
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67,
    0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb,
    0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30,
    0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa};

static uint8_t sym_key[40];

/* The RSS input: src, dst, then ports when the packet carries them. */
static uint32_t ref_rss(const uint8_t *key, const struct pspec *s)
{
	uint8_t in[36];
	unsigned alen = s->v6 ? 16 : 4, n;

	memcpy(in, s->src, alen);
	memcpy(in + alen, s->dst, alen);
	n = 2 * alen;
	if (s->proto == 6 || s->proto == 17) {
		put16(in + n, s->sport);
		put16(in + n + 2, s->dport);
		n += 4;
	}
	return ref_toeplitz(key, in, n);
}

static void init_sym_key(void)
{
	for (unsigned i = 0; i < 40; i += 2) {
		sym_key[i] = 0x6d;
		sym_key[i + 1] = 0x5a;
	}
}

static struct pspec random_flow(void)
{
	struct pspec s;

	memset(&s, 0, sizeof(s));
	s.v6 = rnd() % 2;
	s.proto = (uint8_t)(rnd() % 5 == 0 ? 50 : rnd() % 2 ? 6 : 17);
	for (unsigned b = 0; b < 16; b++) {
		s.src[b] = (uint8_t)rnd();
		s.dst[b] = (uint8_t)rnd();
	}
	if (!s.v6) {
		memset(s.src + 4, 0, 12);
		memset(s.dst + 4, 0, 12);
	}
	/* ports below the UDP tunnel ports (4789, 6081) both ways */
	s.sport = (uint16_t)(1 + rnd() % 4000);
	s.dport = (uint16_t)(1 + rnd() % 4000);
	s.tcp_flags = 0x10;
	return s;
}

static struct pspec reversed(const struct pspec *s)
{
	struct pspec r = *s;

	memcpy(r.src, s->dst, 16);
	memcpy(r.dst, s->src, 16);
	r.sport = s->dport;
	r.dport = s->sport;
	return r;
}

Test(flow_rss, toeplitz_matches_reference_and_is_symmetric)
{
	/* the reference on Microsoft's published vectors (its usual key) */
	/* 66.9.149.187:2794 -> 161.142.100.80:1766 */
	struct pspec ms = p4(6, 0x420995bb, 2794, 0xa18e6450, 1766);
	struct dpflow_ctx *ctx = ctx_new(NULL, 0);
	struct dpflow_pool *pool = dpflow_ctx_pool(ctx);

	cr_assert_eq(ref_rss(ms_key, &ms), 0x51ccc178);
	ms.proto = 50;
	cr_assert_eq(ref_rss(ms_key, &ms), 0x323e8fc2);
	ms = p4(6, 0xc75c6f02, 14230, 0x41458c53, 4739); /* 199.92.111.2 */
	cr_assert_eq(ref_rss(ms_key, &ms), 0xc626b0ea);
	ms.proto = 50;
	cr_assert_eq(ref_rss(ms_key, &ms), 0xd718262a);

	init_sym_key();
	rng_seed(2);
	for (unsigned i = 0; i < 3000; i++) {
		struct pspec s = random_flow(), r = reversed(&s);
		uint32_t idx[2] = {mk(pool, &s), mk(pool, &r)};
		uint32_t want = ref_rss(sym_key, &s);

		dpflow_parse_burst(pool, idx, 2);
		cr_assert_eq(dpflow_pool_meta(pool, idx[0])->drop, 0);
		cr_assert_eq(dpflow_rss_hash(pool, idx[0], false), want,
			     "packet %u (v6 %d proto %u): %#x, reference %#x",
			     i, s.v6, s.proto,
			     dpflow_rss_hash(pool, idx[0], false), want);
		cr_assert_eq(ref_rss(sym_key, &r), want,
			     "the key is symmetric");
		cr_assert_eq(dpflow_rss_hash(pool, idx[1], false), want,
			     "reverse direction of packet %u", i);
		/* no tunnel: inner selects the outer headers */
		cr_assert_eq(dpflow_rss_hash(pool, idx[0], true), want);
		dpflow_pool_free_bulk(pool, idx, 2);
	}
	dpflow_ctx_destroy(ctx);
}

/* ---- 3. HASH pipes against a naive slot table ------------------------------
 */

#define HASH_SIZE    1009u /* prime: the modulo is not a mask */
#define HASH_LOOKUPS (1u << 20)

Test(flow_hash, hash_pipe_matches_naive_slots_1m, .timeout = 120)
{
	struct dpflow_ctx_params cp = {.pool_slots = 4096};
	struct dpflow_ctx *ctx = ctx_new(&cp, 2);
	struct dpflow_pool *pool = dpflow_ctx_pool(ctx);
	struct dpflow_pipe_cfg c = pipe_cfg("h", DPFLOW_PIPE_HASH, HASH_SIZE);
	struct dpflow_pipe *pipe;
	struct dpflow_queue *q;
	struct dpflow_error err = {0};
	static int32_t slot_val[HASH_SIZE]; /* -1: empty */
	static uint64_t slot_hits[HASH_SIZE];
	static struct dpflow_entry *slot_entry[HASH_SIZE];
	int32_t *expect = calloc(pool->n_slots, sizeof(*expect));
	uint8_t tmpl[2][128];
	unsigned tmpl_len[2];
	uint64_t hits = 0, misses = 0;
	struct dpflow_pipe_stats st;
	uint32_t seed;

	cr_assert_not_null(expect);
	rng_seed(3);
	seed = rnd();
	/* key: ipv4.src, l4.sport under mask 0xfff0, ip.proto (7 bytes: the
	 * hash's tail path); IPv4 only (a constant field) */
	c.root = true;
	c.hash_seed = seed;
	match_add(&c, DPFLOW_FIELD_OUTER_ETH_TYPE, false, 0x0800);
	match_add(&c, DPFLOW_FIELD_OUTER_IPV4_SRC, true, 0);
	match_add(&c, DPFLOW_FIELD_OUTER_L4_SPORT, true, 0);
	c.match.f[2].mask[1] = 0xf0;
	match_add(&c, DPFLOW_FIELD_OUTER_IP_PROTO, true, 0);
	c.n_action_tmpls = 1;
	c.actions[0].n = 1;
	c.actions[0].a[0] = act_set_reg(0, true, 0);
	c.monitor.counter = true;
	c.fwd = fwd_port(OUT(0));
	c.miss_fwd = fwd_port(OUT(1));
	pipe = pipe_new(ctx, &c);

	q = dpflow_queue_create(ctx, &err);
	for (uint32_t s = 0; s < HASH_SIZE; s++) {
		struct dpflow_entry_cfg e = entry_cfg();

		slot_val[s] = -1;
		if (rnd() % 10 < 3)
			continue; /* 30% of the slots stay empty */
		slot_val[s] = (int32_t)(rnd() & 0x7fffffff);
		e.hash_index = s;
		/* the entry's key plays no part in a HASH pipe */
		put32(e.key, rnd());
		put32(e.action_value[0], (uint32_t)slot_val[s]);
		slot_entry[s] = dpflow_entry_add(q, pipe, &e, NULL, &err);
		cr_assert_not_null(slot_entry[s], "%s", err.msg);
	}
	cr_assert_eq(dpflow_entries_process(q, NULL, &err), 0, "%s", err.msg);
	dpflow_queue_destroy(q);

	{
		struct pspec t = p4(6, 0, 0, 0xc0000201, 80);

		t.tcp_flags = 0x10;
		tmpl_len[0] = build_frame(tmpl[0], &t);
		t = p4(17, 0, 0, 0xc0000201, 53);
		tmpl_len[1] = build_frame(tmpl[1], &t);
	}
	/*
	 * 2^20 packets through the whole pipeline (parse, key, hash, slot,
	 * action, forwarding): each packet's verdict is its output port and
	 * the register the slot's entry wrote. Sources come from a small set
	 * half of the time so that slots are hit repeatedly.
	 */
	dpflow_ctx_thread_online(ctx);
	for (unsigned done = 0; done < HASH_LOOKUPS;) {
		uint32_t idx[DPFLOW_BURST_MAX], out[DPFLOW_BURST_MAX];
		unsigned n = DPFLOW_BURST_MAX, k;

		cr_assert_eq(dpflow_pool_alloc_bulk(pool, idx, n), 0);
		for (unsigned i = 0; i < n; i++) {
			unsigned t = rnd() % 2;
			uint8_t *f = dpflow_pkt_data(pool, idx[i]);
			uint32_t src = rnd() % 2 ? rnd() : rnd() % 64;
			uint16_t sport = (uint16_t)rnd();
			uint8_t key[7];
			uint32_t slot;
			bool v6 = rnd() % 32 == 0;

			if (v6) { /* fails the constant field: a miss */
				struct pspec s = random_flow();

				s.v6 = true;
				dpflow_pool_meta(pool, idx[i])->data_len =
				    (uint16_t)build_frame(f, &s);
				expect[idx[i]] = -1;
				continue;
			}
			memcpy(f, tmpl[t], tmpl_len[t]);
			put32(f + 26, src);
			put16(f + 34, sport);
			dpflow_pool_meta(pool, idx[i])->data_len =
			    (uint16_t)tmpl_len[t];
			put32(key, src);
			put16(key + 4, sport & 0xfff0);
			key[6] = t ? 17 : 6;
			slot = ref_murmur3(key, 7, seed) % HASH_SIZE;
			expect[idx[i]] =
			    slot_val[slot] < 0 ? -1 : (int32_t)slot;
		}
		dpflow_ctx_process_burst(ctx, 0, idx, (uint16_t)n);
		k = take(ctx, OUT(0), out, DPFLOW_BURST_MAX);
		for (unsigned i = 0; i < k; i++) {
			int32_t s = expect[out[i]];

			cr_assert_geq(s, 0,
				      "packet sent as a hit, reference "
				      "says its slot is empty");
			cr_assert_eq(dpflow_pool_meta(pool, out[i])->reg[0],
				     (uint32_t)slot_val[s],
				     "packet took the wrong slot (wanted %d)",
				     s);
			slot_hits[s]++;
		}
		hits += k;
		dpflow_pool_free_bulk(pool, out, k);
		k = take(ctx, OUT(1), out, DPFLOW_BURST_MAX);
		for (unsigned i = 0; i < k; i++)
			cr_assert_eq(expect[out[i]], -1,
				     "packet missed, reference slot %d",
				     expect[out[i]]);
		misses += k;
		dpflow_pool_free_bulk(pool, out, k);
		cr_assert_eq(hits + misses, done + n, "packets lost");
		done += n;
		dpflow_ctx_quiescent(ctx);
	}
	dpflow_ctx_thread_offline(ctx);

	cr_expect_eq(dpflow_pipe_stats_get(pipe, &st), 0);
	cr_expect_eq(st.pkts, HASH_LOOKUPS);
	cr_expect_eq(st.hits, hits);
	cr_expect_eq(st.misses, misses);
	cr_expect_gt(hits, HASH_LOOKUPS / 2);
	cr_expect_gt(misses, HASH_LOOKUPS / 8);
	for (uint32_t s = 0; s < HASH_SIZE; s++) {
		struct dpflow_counter ctr;

		if (slot_val[s] < 0)
			continue;
		dpflow_entry_counter(slot_entry[s], &ctr);
		cr_expect_eq(ctr.pkts, slot_hits[s], "slot %u counter", s);
	}
	expect_pool_whole(ctx);
	free(expect);
	dpflow_ctx_destroy(ctx);
}

/* Removing an entry empties its slot; a slot taken twice in one batch is
 * refused and the batch changes nothing. */
Test(flow_hash, slots_are_freed_and_collisions_refused)
{
	struct dpflow_ctx *ctx = ctx_new(NULL, 2);
	struct dpflow_pipe_cfg c = pipe_cfg("h", DPFLOW_PIPE_HASH, 4);
	struct dpflow_pipe *pipe;
	struct dpflow_error err = {0};
	struct dpflow_queue *q = dpflow_queue_create(ctx, &err);
	struct dpflow_entry_cfg e = entry_cfg();
	struct dpflow_entry *h;
	struct pspec s = p4(17, 0x0a000001, 1000, 0x0a000002, 53);
	uint8_t key[2];
	uint32_t slot;

	c.root = true;
	match_add(&c, DPFLOW_FIELD_OUTER_L4_SPORT, true, 0);
	c.fwd = fwd_port(OUT(0));
	c.miss_fwd = fwd_port(OUT(1));
	pipe = pipe_new(ctx, &c);
	put16(key, 1000);
	slot = ref_murmur3(key, 2, 0) % 4;

	e.hash_index = slot;
	h = dpflow_entry_add(q, pipe, &e, NULL, &err);
	cr_assert_not_null(h);
	cr_assert_not_null(dpflow_entry_add(q, pipe, &e, NULL, &err));
	cr_expect_eq(dpflow_entries_process(q, NULL, &err), -EEXIST);
	cr_expect_str_eq(err.field, "hash_index");
	cr_expect_eq(dpflow_pipe_entry_count(pipe), 0);
	send1(ctx, &s);
	cr_expect_eq(count_out(ctx, OUT(1)), 1, "nothing was applied");

	h = entry_new(ctx, pipe, &e);
	send1(ctx, &s);
	cr_expect_eq(count_out(ctx, OUT(0)), 1);
	cr_assert_eq(dpflow_entry_remove(q, h, NULL), 0);
	cr_assert_eq(dpflow_entries_process(q, NULL, &err), 0, "%s", err.msg);
	send1(ctx, &s);
	cr_expect_eq(count_out(ctx, OUT(1)), 1, "slot emptied by the removal");
	/* and it can be taken again */
	entry_new(ctx, pipe, &e);
	send1(ctx, &s);
	cr_expect_eq(count_out(ctx, OUT(0)), 1);
	dpflow_queue_destroy(q);
	expect_pool_whole(ctx);
	dpflow_ctx_destroy(ctx);
}

/* flow.h: "template mask; all zero means all ones". */
Test(flow_hash, zero_template_mask_means_all_ones)
{
	struct dpflow_ctx *ctx = ctx_new(NULL, 2);
	struct dpflow_pipe_cfg c = pipe_cfg("b", DPFLOW_PIPE_BASIC, 4);
	struct dpflow_pipe *pipe;
	struct dpflow_entry_cfg e = entry_cfg();
	struct pspec s = p4(17, 0x0a000001, 1000, 0x0a000002, 53);

	c.root = true;
	c.match.n = 1;
	c.match.f[0].field = DPFLOW_FIELD_OUTER_L4_DPORT;
	c.match.f[0].per_entry = true; /* mask left all zero */
	c.fwd = fwd_port(OUT(0));
	c.miss_fwd = fwd_port(OUT(1));
	pipe = pipe_new(ctx, &c);
	put16(e.key, 53);
	entry_new(ctx, pipe, &e);
	send1(ctx, &s);
	s.dport = 54;
	send1(ctx, &s);
	{
		unsigned hit = count_out(ctx, OUT(0)),
			 miss = count_out(ctx, OUT(1));

		cr_expect(hit == 1 && miss == 1,
			  "dport 53 must hit and 54 miss: %u hits, %u misses "
			  "(a zero mask masked the key away)",
			  hit, miss);
	}
	dpflow_ctx_destroy(ctx);
}

/* ---- 4. LPM with exact fields before the address (VRF) ---------------------
 */

#define VRF_ROUTES 160

struct route {
	uint32_t vrf; /* exact part: reg0 value or VLAN id */
	uint32_t addr;
	uint8_t len;
	uint32_t value;
};

static uint32_t prefix_mask(unsigned len)
{
	return len ? 0xffffffffu << (32 - len) : 0;
}

/* Longest prefix of @dst among the routes of @vrf: the route, or NULL. */
static const struct route *ref_lpm(const struct route *r, unsigned n,
				   uint32_t vrf, uint32_t dst)
{
	const struct route *best = NULL;

	for (unsigned i = 0; i < n; i++)
		if (r[i].vrf == vrf &&
		    (dst & prefix_mask(r[i].len)) == r[i].addr &&
		    (!best || r[i].len > best->len))
			best = &r[i];
	return best;
}

static bool route_exists(const struct route *r, unsigned n, uint32_t vrf,
			 uint32_t addr, unsigned len)
{
	for (unsigned i = 0; i < n; i++)
		if (r[i].vrf == vrf && r[i].addr == addr && r[i].len == len)
			return true;
	return false;
}

/* Random routes for @n_vrf VRFs, some shared between VRFs (ties), /0 and
 * /32 among them. Returns the count. */
static unsigned make_routes(struct route *r, const uint32_t *vrfs,
			    unsigned n_vrf)
{
	unsigned n = 0;

	for (unsigned v = 0; v < n_vrf; v++)
		for (unsigned i = 0; i < VRF_ROUTES; i++) {
			unsigned len = i == 0 && v != 1 ? 0
				       : i < 10		? 32
				       : rnd() % 4 == 0 ? rnd() % 33
							: 8 + rnd() % 17;
			uint32_t addr =
			    (i % 3 ? 0x0a000000u | (rnd() >> 8) : rnd()) &
			    prefix_mask(len);

			if (route_exists(r, n, vrfs[v], addr, len))
				continue;
			r[n] = (struct route){vrfs[v], addr, (uint8_t)len,
					      0x1000u + n};
			n++;
		}
	/* the same prefixes in another VRF, other values */
	for (unsigned i = 0, m = n; i < m && i < 40; i++) {
		uint32_t other = vrfs[(i % (n_vrf - 1)) + 1];

		if (r[i].vrf == other ||
		    route_exists(r, n, other, r[i].addr, r[i].len))
			continue;
		r[n] = r[i];
		r[n].vrf = other;
		r[n].value = 0x1000u + n;
		n++;
	}
	return n;
}

static uint32_t lookup_dst(const struct route *r, unsigned n)
{
	const struct route *x = &r[rnd() % n];

	switch (rnd() % 4) {
	case 0:
		return rnd();
	case 1:
		return x->addr; /* the prefix's first address */
	case 2:
		return x->addr | ~prefix_mask(x->len); /* its last */
	default:
		return x->addr | (rnd() & ~prefix_mask(x->len));
	}
}

/* reg0 set by an earlier pipe (VLAN -> VRF id), then LPM on [reg0, dst]. */
Test(flow_lpm, vrf_in_a_register_matches_linear_scan)
{
	static const uint16_t vlans[] = {10, 20, 30, 40};
	static const uint32_t vrfs[] = {1, 0xdeadbeef, 2, 0x80000000};
	static struct route routes[4 * VRF_ROUTES + 64];
	struct dpflow_ctx *ctx = ctx_new(NULL, 2);
	struct dpflow_pool *pool = dpflow_ctx_pool(ctx);
	struct dpflow_pipe_cfg c = pipe_cfg("rt", DPFLOW_PIPE_LPM, 1024);
	struct dpflow_pipe *rt, *vrf;
	struct dpflow_error err = {0};
	struct dpflow_queue *q = dpflow_queue_create(ctx, &err);
	unsigned n, n_hit = 0, n_miss = 0;

	rng_seed(4);
	/* VRF 0x80000000 gets no routes at all */
	n = make_routes(routes, vrfs, 3);
	match_add(&c, DPFLOW_FIELD_META_REG0, true, 0);
	match_add(&c, DPFLOW_FIELD_OUTER_IPV4_DST, true, 0);
	c.n_action_tmpls = 1;
	c.actions[0].n = 1;
	c.actions[0].a[0] = act_set_reg(1, true, 0);
	c.fwd = fwd_port(OUT(0));
	c.miss_fwd = fwd_port(OUT(1));
	rt = pipe_new(ctx, &c);

	c = pipe_cfg("vrf", DPFLOW_PIPE_BASIC, 16);
	c.root = true;
	match_add(&c, DPFLOW_FIELD_OUTER_VLAN0, true, 0);
	c.n_action_tmpls = 1;
	c.actions[0].n = 1;
	c.actions[0].a[0] = act_set_reg(0, true, 0);
	c.fwd = fwd_pipe(rt);
	c.miss_fwd = fwd_port(OUT(1));
	vrf = pipe_new(ctx, &c);
	for (unsigned v = 0; v < 4; v++) {
		struct dpflow_entry_cfg e = entry_cfg();

		put16(e.key, vlans[v]);
		put32(e.action_value[0], vrfs[v]);
		cr_assert_not_null(dpflow_entry_add(q, vrf, &e, NULL, &err));
	}
	for (unsigned i = 0; i < n; i++) {
		struct dpflow_entry_cfg e = entry_cfg();

		put32(e.key, routes[i].vrf);
		put32(e.key + 4, routes[i].addr);
		e.prefix_len = routes[i].len;
		put32(e.action_value[0], routes[i].value);
		cr_assert_not_null(dpflow_entry_add(q, rt, &e, NULL, &err));
	}
	cr_assert_eq(dpflow_entries_process(q, NULL, &err), 0, "%s (field %s)",
		     err.msg, err.field ? err.field : "-");
	cr_assert_eq(dpflow_pipe_entry_count(rt), n);

	for (unsigned round = 0; round < 80; round++) {
		uint32_t idx[256], out[256], want[256];
		unsigned k;

		for (unsigned i = 0; i < 256; i++) {
			unsigned v = rnd() % 5; /* 4: VLAN 50, no VRF */
			struct pspec s =
			    p4(17, 0x0b000001, 999, lookup_dst(routes, n), 53);
			const struct route *r;

			s.vlan = v < 4 ? vlans[v] : 50;
			idx[i] = mk(pool, &s);
			r = v < 4 ? ref_lpm(routes, n, vrfs[v], get32(s.dst))
				  : NULL;
			want[i] = r ? r->value : 0;
		}
		send_burst(ctx, idx, 256);
		k = take(ctx, OUT(0), out, 256);
		for (unsigned i = 0; i < k; i++) {
			unsigned at = 0;
			const struct dpflow_pkt_meta *m =
			    dpflow_pool_meta(pool, out[i]);

			while (idx[at] != out[i])
				at++;
			cr_assert_neq(
			    want[at], 0,
			    "vlan %u dst %#x hit route %#x, reference "
			    "misses",
			    m->outer.vlan[0] & 0xfff, get32(m->outer.dst),
			    m->reg[1]);
			cr_assert_eq(m->reg[1], want[at],
				     "vlan %u dst %#x: route %#x, reference "
				     "%#x",
				     m->outer.vlan[0] & 0xfff,
				     get32(m->outer.dst), m->reg[1], want[at]);
		}
		n_hit += k;
		dpflow_pool_free_bulk(pool, out, k);
		k = take(ctx, OUT(1), out, 256);
		for (unsigned i = 0; i < k; i++) {
			unsigned at = 0;
			const struct dpflow_pkt_meta *m =
			    dpflow_pool_meta(pool, out[i]);

			while (idx[at] != out[i])
				at++;
			cr_assert_eq(want[at], 0,
				     "vlan %u dst %#x missed, reference route "
				     "%#x",
				     m->outer.vlan[0] & 0xfff,
				     get32(m->outer.dst), want[at]);
		}
		n_miss += k;
		dpflow_pool_free_bulk(pool, out, k);
		cr_assert_eq(n_hit + n_miss, (round + 1) * 256);
	}
	cr_expect_gt(n_hit, 1000);
	cr_expect_gt(n_miss, 1000);
	dpflow_queue_destroy(q);
	expect_pool_whole(ctx);
	dpflow_ctx_destroy(ctx);
}

/* LPM on [outer.vlan0, outer.ipv4.dst] directly; then routes removed. */
Test(flow_lpm, vrf_from_vlan_matches_linear_scan_and_removal)
{
	static const uint32_t vlans[] = {100, 4095, 1};
	static struct route routes[3 * VRF_ROUTES + 64];
	static struct dpflow_entry *handle[3 * VRF_ROUTES + 64];
	struct dpflow_ctx *ctx = ctx_new(NULL, 2);
	struct dpflow_pool *pool = dpflow_ctx_pool(ctx);
	struct dpflow_pipe_cfg c = pipe_cfg("rt", DPFLOW_PIPE_LPM, 1024);
	struct dpflow_pipe *rt;
	struct dpflow_error err = {0};
	struct dpflow_queue *q = dpflow_queue_create(ctx, &err);
	unsigned n;

	rng_seed(5);
	n = make_routes(routes, vlans, 3);
	c.root = true;
	match_add(&c, DPFLOW_FIELD_OUTER_VLAN0, true, 0);
	match_add(&c, DPFLOW_FIELD_OUTER_IPV4_DST, true, 0);
	c.n_action_tmpls = 1;
	c.actions[0].n = 1;
	c.actions[0].a[0] = act_set_reg(1, true, 0);
	c.fwd = fwd_port(OUT(0));
	c.miss_fwd = fwd_port(OUT(1));
	rt = pipe_new(ctx, &c);
	for (unsigned i = 0; i < n; i++) {
		struct dpflow_entry_cfg e = entry_cfg();

		put16(e.key, routes[i].vrf);
		put32(e.key + 2, routes[i].addr);
		e.prefix_len = routes[i].len;
		put32(e.action_value[0], routes[i].value);
		handle[i] = dpflow_entry_add(q, rt, &e, NULL, &err);
		cr_assert_not_null(handle[i]);
	}
	cr_assert_eq(dpflow_entries_process(q, NULL, &err), 0, "%s (field %s)",
		     err.msg, err.field ? err.field : "-");

	for (unsigned phase = 0; phase < 2; phase++) {
		if (phase == 1) {
			/* remove every other route, /0s included */
			for (unsigned i = 0; i < n; i += 2) {
				cr_assert_eq(
				    dpflow_entry_remove(q, handle[i], NULL), 0);
				routes[i].vrf = 0xffffffff;
			}
			cr_assert_eq(dpflow_entries_process(q, NULL, &err), 0,
				     "%s", err.msg);
		}
		for (unsigned round = 0; round < 24; round++) {
			uint32_t idx[256], out[256], want[256];
			unsigned k, got = 0;

			for (unsigned i = 0; i < 256; i++) {
				unsigned v = rnd() % 4; /* 3: VLAN 7 */
				struct pspec s = p4(6, 0x0b000001, 999,
						    lookup_dst(routes, n), 80);
				const struct route *r;

				s.tcp_flags = 0x10;
				s.vlan = (uint16_t)(v < 3 ? vlans[v] : 7);
				idx[i] = mk(pool, &s);
				r = ref_lpm(routes, n, s.vlan, get32(s.dst));
				want[i] = r ? r->value : 0;
			}
			send_burst(ctx, idx, 256);
			for (unsigned port = 0; port < 2; port++) {
				k = take(ctx, OUT(port), out, 256);
				for (unsigned i = 0; i < k; i++) {
					unsigned at = 0;
					const struct dpflow_pkt_meta *m =
					    dpflow_pool_meta(pool, out[i]);

					while (idx[at] != out[i])
						at++;
					cr_assert_eq(
					    port ? 0 : m->reg[1], want[at],
					    "phase %u vlan %u dst %#x: %s "
					    "%#x, reference %#x",
					    phase, m->outer.vlan[0] & 0xfff,
					    get32(m->outer.dst),
					    port ? "miss" : "route", m->reg[1],
					    want[at]);
				}
				got += k;
				dpflow_pool_free_bulk(pool, out, k);
			}
			cr_assert_eq(got, 256);
		}
	}
	dpflow_queue_destroy(q);
	expect_pool_whole(ctx);
	dpflow_ctx_destroy(ctx);
}

/*
 * IPv6 with a VRF: reg0 set by an earlier pipe (VLAN -> VRF id), then LPM
 * on [reg0, outer.ipv6.dst], a 20-byte trie key; then routes removed.
 */
struct route6 {
	uint32_t vrf;
	uint8_t addr[16];
	uint8_t len;
	uint32_t value;
};

static bool covers_v6(const uint8_t *p, unsigned len, const uint8_t *a)
{
	unsigned full = len / 8, rest = len % 8;

	if (memcmp(p, a, full))
		return false;
	return rest == 0 || ((p[full] ^ a[full]) & (0xff00u >> rest)) == 0;
}

static void mask_v6(uint8_t *a, unsigned len)
{
	for (unsigned i = 0; i < 16; i++) {
		unsigned bits = len > 8 * i ? len - 8 * i : 0;

		if (bits < 8)
			a[i] &= (uint8_t)(0xff00u >> bits);
	}
}

static const struct route6 *ref_lpm6(const struct route6 *r, unsigned n,
				     uint32_t vrf, const uint8_t *dst)
{
	const struct route6 *best = NULL;

	for (unsigned i = 0; i < n; i++)
		if (r[i].vrf == vrf && covers_v6(r[i].addr, r[i].len, dst) &&
		    (!best || r[i].len > best->len))
			best = &r[i];
	return best;
}

static bool route6_exists(const struct route6 *r, unsigned n, uint32_t vrf,
			  const uint8_t *addr, unsigned len)
{
	for (unsigned i = 0; i < n; i++)
		if (r[i].vrf == vrf && r[i].len == len &&
		    !memcmp(r[i].addr, addr, 16))
			return true;
	return false;
}

static void rand16(uint8_t *a)
{
	for (unsigned i = 0; i < 16; i += 4)
		put32(a + i, rnd());
}

/* Random IPv6 routes for @n_vrf VRFs, clustered under 2001:db8::/32, some
 * shared between VRFs (ties), /0 and /128 among them. Returns the count. */
static unsigned make_routes6(struct route6 *r, const uint32_t *vrfs,
			     unsigned n_vrf)
{
	unsigned n = 0;

	for (unsigned v = 0; v < n_vrf; v++)
		for (unsigned i = 0; i < VRF_ROUTES; i++) {
			unsigned len = i == 0 && v != 1 ? 0
				       : i < 10		? 128
				       : rnd() % 4 == 0 ? rnd() % 129
							: 32 + rnd() % 33;
			uint8_t addr[16];

			rand16(addr);
			if (i % 3)
				put32(addr, 0x20010db8u);
			mask_v6(addr, len);
			if (route6_exists(r, n, vrfs[v], addr, len))
				continue;
			r[n].vrf = vrfs[v];
			memcpy(r[n].addr, addr, 16);
			r[n].len = (uint8_t)len;
			r[n].value = 0x1000u + n;
			n++;
		}
	/* the same prefixes in another VRF, other values */
	for (unsigned i = 0, m = n; i < m && i < 40; i++) {
		uint32_t other = vrfs[(i % (n_vrf - 1)) + 1];

		if (r[i].vrf == other ||
		    route6_exists(r, n, other, r[i].addr, r[i].len))
			continue;
		r[n] = r[i];
		r[n].vrf = other;
		r[n].value = 0x1000u + n;
		n++;
	}
	return n;
}

/* A destination: random, or a route's first, last or some address. */
static void lookup_dst6(const struct route6 *r, unsigned n, uint8_t *a)
{
	const struct route6 *x = &r[rnd() % n];
	unsigned k = rnd() % 4;

	rand16(a);
	if (k == 0) {
		if (rnd() % 2)
			put32(a, 0x20010db8u);
		return;
	}
	for (unsigned i = 0; i < 16; i++) {
		unsigned bits = x->len > 8 * i ? x->len - 8 * i : 0;
		uint8_t m = bits >= 8 ? 0xff : (uint8_t)(0xff00u >> bits);

		if (k == 1)
			a[i] = 0;
		else if (k == 2)
			a[i] = 0xff;
		a[i] = (uint8_t)((x->addr[i] & m) | (a[i] & ~m));
	}
}

Test(flow_lpm, ipv6_vrf_in_a_register_matches_linear_scan)
{
	static const uint16_t vlans[] = {10, 20, 30, 40};
	static const uint32_t vrfs[] = {1, 0xdeadbeef, 2, 0x80000000};
	static struct route6 routes[4 * VRF_ROUTES + 64];
	static struct dpflow_entry *handle[4 * VRF_ROUTES + 64];
	struct dpflow_ctx *ctx = ctx_new(NULL, 2);
	struct dpflow_pool *pool = dpflow_ctx_pool(ctx);
	struct dpflow_pipe_cfg c = pipe_cfg("rt6", DPFLOW_PIPE_LPM, 1024);
	struct dpflow_pipe *rt, *vrf;
	struct dpflow_error err = {0};
	struct dpflow_queue *q = dpflow_queue_create(ctx, &err);
	unsigned n, n_hit = 0, n_miss = 0;

	rng_seed(6);
	/* VRF 0x80000000 gets no routes at all */
	n = make_routes6(routes, vrfs, 3);
	match_add(&c, DPFLOW_FIELD_META_REG0, true, 0);
	match_add(&c, DPFLOW_FIELD_OUTER_IPV6_DST, true, 0);
	c.n_action_tmpls = 1;
	c.actions[0].n = 1;
	c.actions[0].a[0] = act_set_reg(1, true, 0);
	c.fwd = fwd_port(OUT(0));
	c.miss_fwd = fwd_port(OUT(1));
	rt = pipe_new(ctx, &c);

	c = pipe_cfg("vrf", DPFLOW_PIPE_BASIC, 16);
	c.root = true;
	match_add(&c, DPFLOW_FIELD_OUTER_VLAN0, true, 0);
	c.n_action_tmpls = 1;
	c.actions[0].n = 1;
	c.actions[0].a[0] = act_set_reg(0, true, 0);
	c.fwd = fwd_pipe(rt);
	c.miss_fwd = fwd_port(OUT(1));
	vrf = pipe_new(ctx, &c);
	for (unsigned v = 0; v < 4; v++) {
		struct dpflow_entry_cfg e = entry_cfg();

		put16(e.key, vlans[v]);
		put32(e.action_value[0], vrfs[v]);
		cr_assert_not_null(dpflow_entry_add(q, vrf, &e, NULL, &err));
	}
	for (unsigned i = 0; i < n; i++) {
		struct dpflow_entry_cfg e = entry_cfg();

		put32(e.key, routes[i].vrf);
		memcpy(e.key + 4, routes[i].addr, 16);
		e.prefix_len = routes[i].len;
		put32(e.action_value[0], routes[i].value);
		handle[i] = dpflow_entry_add(q, rt, &e, NULL, &err);
		cr_assert_not_null(handle[i]);
	}
	cr_assert_eq(dpflow_entries_process(q, NULL, &err), 0, "%s (field %s)",
		     err.msg, err.field ? err.field : "-");
	cr_assert_eq(dpflow_pipe_entry_count(rt), n);

	for (unsigned phase = 0; phase < 2; phase++) {
		if (phase == 1) {
			/* remove every other route, /0s included */
			for (unsigned i = 0; i < n; i += 2) {
				cr_assert_eq(
				    dpflow_entry_remove(q, handle[i], NULL), 0);
				routes[i].vrf = 0xffffffff;
			}
			cr_assert_eq(dpflow_entries_process(q, NULL, &err), 0,
				     "%s", err.msg);
		}
		for (unsigned round = 0; round < 40; round++) {
			uint32_t idx[256], out[256], want[256];
			unsigned k;

			for (unsigned i = 0; i < 256; i++) {
				unsigned v = rnd() % 5; /* 4: VLAN 50, no VRF */
				struct pspec s = p4(17, 0, 999, 0, 53);
				const struct route6 *r;

				s.v6 = true;
				rand16(s.src);
				lookup_dst6(routes, n, s.dst);
				s.vlan = v < 4 ? vlans[v] : 50;
				idx[i] = mk(pool, &s);
				r = v < 4 ? ref_lpm6(routes, n, vrfs[v], s.dst)
					  : NULL;
				want[i] = r ? r->value : 0;
			}
			send_burst(ctx, idx, 256);
			k = take(ctx, OUT(0), out, 256);
			for (unsigned i = 0; i < k; i++) {
				unsigned at = 0;
				const struct dpflow_pkt_meta *m =
				    dpflow_pool_meta(pool, out[i]);

				while (idx[at] != out[i])
					at++;
				cr_assert_eq(m->reg[1], want[at],
					     "phase %u vlan %u: route %#x, "
					     "reference %#x",
					     phase, m->outer.vlan[0] & 0xfff,
					     m->reg[1], want[at]);
			}
			n_hit += k;
			dpflow_pool_free_bulk(pool, out, k);
			k = take(ctx, OUT(1), out, 256);
			for (unsigned i = 0; i < k; i++) {
				unsigned at = 0;

				while (idx[at] != out[i])
					at++;
				cr_assert_eq(want[at], 0,
					     "phase %u: missed, reference "
					     "route %#x",
					     phase, want[at]);
			}
			n_miss += k;
			dpflow_pool_free_bulk(pool, out, k);
			cr_assert_eq(n_hit + n_miss,
				     (phase * 40 + round + 1) * 256);
		}
	}
	cr_expect_gt(n_hit, 1000);
	cr_expect_gt(n_miss, 1000);
	dpflow_queue_destroy(q);
	expect_pool_whole(ctx);
	dpflow_ctx_destroy(ctx);
}

/* ---- 5. CT pipes ----------------------------------------------------------
 */

/* ct_state values (ct_impl.h; meta.ct_state carries them). */
enum {
	ST_SYN_SENT = 1,
	ST_SYN_RECV = 2,
	ST_ESTABLISHED = 3,
	ST_UDP_UNREPLIED = 9,
	ST_UDP_REPLIED = 10,
};

#define TCP_SYN 0x02
#define TCP_ACK 0x10

struct ct_fx {
	struct dpflow_ctx *ctx;
	struct dpflow_pipe *ct, *obs;
};

/*
 * A CT pipe (root) forwarding to "obs", a BASIC pipe on [meta.ct_state,
 * meta.ct_flags] that sends each combination to its own port (entries
 * added by obs_route); obs misses go to port 6, CT misses to port 7.
 * With @tag, a first pipe sets reg3 from the TCP flags (SYN 111, SYN-ACK
 * 222, ACK 333) before the CT pipe.
 */
static struct ct_fx ct_setup(const struct dpflow_ct_cfg *ct, uint32_t size,
			     bool tag)
{
	struct ct_fx f;
	struct dpflow_pipe_cfg c = pipe_cfg("obs", DPFLOW_PIPE_BASIC, 16);

	f.ctx = ctx_new(NULL, 8);
	match_add(&c, DPFLOW_FIELD_META_CT_STATE, true, 0);
	match_add(&c, DPFLOW_FIELD_META_CT_FLAGS, true, 0);
	c.fwd.kind = DPFLOW_FWD_PER_ENTRY;
	c.miss_fwd = fwd_port(OUT(6));
	f.obs = pipe_new(f.ctx, &c);

	c = pipe_cfg("ct", DPFLOW_PIPE_CT, size);
	c.root = !tag;
	c.ct = *ct;
	c.fwd = fwd_pipe(f.obs);
	c.miss_fwd = fwd_port(OUT(7));
	f.ct = pipe_new(f.ctx, &c);
	if (tag) {
		static const uint8_t flags[3] = {TCP_SYN, TCP_SYN | TCP_ACK,
						 TCP_ACK};
		struct dpflow_pipe *t;

		c = pipe_cfg("tag", DPFLOW_PIPE_BASIC, 8);
		c.root = true;
		match_add(&c, DPFLOW_FIELD_OUTER_TCP_FLAGS, true, 0);
		c.n_action_tmpls = 1;
		c.actions[0].n = 1;
		c.actions[0].a[0] = act_set_reg(3, true, 0);
		c.fwd = fwd_pipe(f.ct);
		c.miss_fwd = fwd_pipe(f.ct);
		t = pipe_new(f.ctx, &c);
		for (unsigned i = 0; i < 3; i++) {
			struct dpflow_entry_cfg e = entry_cfg();

			e.key[0] = flags[i];
			put32(e.action_value[0], 111 * (i + 1));
			entry_new(f.ctx, t, &e);
		}
	}
	return f;
}

static void obs_route(struct ct_fx *f, uint8_t state, uint8_t flags,
		      uint16_t port)
{
	struct dpflow_entry_cfg e = entry_cfg();

	e.key[0] = state;
	e.key[1] = flags;
	e.fwd = fwd_port(port);
	entry_new(f->ctx, f->obs, &e);
}

/* Send @s; expect it on port @port alone; return its reg3. */
static uint32_t ct_send(struct ct_fx *f, const struct pspec *s, uint16_t port,
			const char *what)
{
	struct dpflow_pool *pool = dpflow_ctx_pool(f->ctx);
	uint32_t got = UINT32_MAX, reg3 = 0;

	send1(f->ctx, s);
	for (uint16_t p = 1; p <= 8; p++) {
		uint32_t idx[4];
		unsigned n = take(f->ctx, p, idx, 4);

		for (unsigned i = 0; i < n; i++) {
			const struct dpflow_pkt_meta *m =
			    dpflow_pool_meta(pool, idx[i]);

			cr_expect_eq(p, port,
				     "%s: out of port %u (ct_state %u "
				     "ct_flags %#x), expected port %u",
				     what, p, m->ct_state, m->ct_flags, port);
			got = p;
			reg3 = m->reg[3];
		}
		dpflow_pool_free_bulk(pool, idx, n);
	}
	cr_expect_neq(got, UINT32_MAX, "%s: no packet came out", what);
	return reg3;
}

Test(flow_ct, tcp_handshake_states_and_flags)
{
	struct dpflow_ct_cfg cc = {.tcp_strict = true};
	struct ct_fx f = ct_setup(&cc, 64, false);
	struct pspec syn = p4(6, 0x0a000001, 40000, 0x0a000002, 80), synack,
		     ack, data_back;
	struct dpflow_pipe_stats st;
	uint64_t drops_before;

	obs_route(&f, ST_SYN_SENT, DPFLOW_META_CT_NEW, OUT(0));
	obs_route(&f, ST_SYN_RECV, DPFLOW_META_CT_REPLY, OUT(1));
	obs_route(&f, ST_ESTABLISHED, 0, OUT(2));
	obs_route(&f, ST_ESTABLISHED, DPFLOW_META_CT_REPLY, OUT(3));
	syn.tcp_flags = TCP_SYN;
	synack = reversed(&syn);
	synack.tcp_flags = TCP_SYN | TCP_ACK;
	ack = syn;
	ack.tcp_flags = TCP_ACK;
	data_back = reversed(&syn);
	data_back.tcp_flags = TCP_ACK;

	ct_send(&f, &syn, OUT(0), "SYN");
	ct_send(&f, &synack, OUT(1), "SYN-ACK");
	ct_send(&f, &ack, OUT(2), "ACK");
	ct_send(&f, &data_back, OUT(3), "reply data");
	ct_send(&f, &ack, OUT(2), "more data");

	/* strict: a bare ACK of an unknown connection opens nothing */
	drops_before = drops_of(f.ctx, DPFLOW_DROP_FLOW_MISS_DROP);
	ack.sport = 40001;
	ct_send(&f, &ack, OUT(7), "bare ACK, strict");
	cr_expect_eq(drops_of(f.ctx, DPFLOW_DROP_FLOW_MISS_DROP), drops_before);

	dpflow_pipe_stats_get(f.ct, &st);
	cr_expect_eq(st.pkts, 6);
	cr_expect_eq(st.hits, 5);
	cr_expect_eq(st.misses, 1);
	cr_expect_eq(st.ct_created, 1);
	cr_expect_eq(st.ct_live, 1);
	cr_expect_eq(st.ct_refused + st.ct_invalid, 1);
	expect_pool_whole(f.ctx);
	dpflow_ctx_destroy(f.ctx);
}

Test(flow_ct, loose_mode_opens_mid_stream)
{
	struct dpflow_ct_cfg cc = {.tcp_strict = false};
	struct ct_fx f = ct_setup(&cc, 64, false);
	struct pspec ack = p4(6, 0x0a000001, 40000, 0x0a000002, 80);
	struct dpflow_pipe_stats st;

	obs_route(&f, ST_ESTABLISHED, DPFLOW_META_CT_NEW, OUT(0));
	obs_route(&f, ST_ESTABLISHED, 0, OUT(1));
	ack.tcp_flags = TCP_ACK;
	ct_send(&f, &ack, OUT(0), "mid-stream ACK opens ESTABLISHED");
	ct_send(&f, &ack, OUT(1), "second ACK");
	dpflow_pipe_stats_get(f.ct, &st);
	cr_expect_eq(st.ct_created, 1);
	dpflow_ctx_destroy(f.ctx);
}

Test(flow_ct, lookup_only_never_creates)
{
	struct dpflow_ct_cfg cc = {.lookup_only = true};
	struct ct_fx f = ct_setup(&cc, 64, false);
	struct pspec syn = p4(6, 0x0a000001, 40000, 0x0a000002, 80);
	struct pspec udp = p4(17, 0x0a000001, 5000, 0x0a000002, 53);
	struct dpflow_pipe_stats st;

	syn.tcp_flags = TCP_SYN;
	ct_send(&f, &syn, OUT(7), "SYN, lookup-only");
	ct_send(&f, &syn, OUT(7), "SYN again, lookup-only");
	ct_send(&f, &udp, OUT(7), "UDP, lookup-only");
	dpflow_pipe_stats_get(f.ct, &st);
	cr_expect_eq(st.ct_created, 0);
	cr_expect_eq(st.ct_live, 0);
	cr_expect_eq(st.misses, 3);
	dpflow_ctx_destroy(f.ctx);
}

Test(flow_ct, user_register_is_stored_and_returned)
{
	struct dpflow_ct_cfg cc = {
	    .tcp_strict = true, .user = true, .user_reg = 3};
	struct ct_fx f = ct_setup(&cc, 64, true);
	struct pspec syn = p4(6, 0x0a000001, 40000, 0x0a000002, 80), synack,
		     ack;

	obs_route(&f, ST_SYN_SENT, DPFLOW_META_CT_NEW, OUT(0));
	obs_route(&f, ST_SYN_RECV, DPFLOW_META_CT_REPLY, OUT(1));
	obs_route(&f, ST_ESTABLISHED, 0, OUT(2));
	syn.tcp_flags = TCP_SYN;
	synack = reversed(&syn);
	synack.tcp_flags = TCP_SYN | TCP_ACK;
	ack = syn;
	ack.tcp_flags = TCP_ACK;
	/* the tag pipe writes 111 / 222 / 333; the connection keeps 111 */
	cr_expect_eq(ct_send(&f, &syn, OUT(0), "SYN"), 111);
	cr_expect_eq(ct_send(&f, &synack, OUT(1), "SYN-ACK"), 111);
	cr_expect_eq(ct_send(&f, &ack, OUT(2), "ACK"), 111);
	/* another connection stores its own */
	syn.sport = 40002;
	cr_expect_eq(ct_send(&f, &syn, OUT(0), "second SYN"), 111);
	synack = reversed(&syn);
	synack.tcp_flags = TCP_SYN | TCP_ACK;
	cr_expect_eq(ct_send(&f, &synack, OUT(1), "second SYN-ACK"), 111);
	dpflow_ctx_destroy(f.ctx);
}

Test(flow_ct, user_register_of_a_mid_stream_connection)
{
	/* loose: the ACK (tag 333) creates it, so 333 is stored */
	struct dpflow_ct_cfg cc = {.user = true, .user_reg = 3};
	struct ct_fx f = ct_setup(&cc, 64, true);
	struct pspec ack = p4(6, 0x0a000001, 40000, 0x0a000002, 80), syn;

	obs_route(&f, ST_ESTABLISHED, DPFLOW_META_CT_NEW, OUT(0));
	obs_route(&f, ST_ESTABLISHED, 0, OUT(1));
	obs_route(&f, ST_ESTABLISHED, DPFLOW_META_CT_IGNORED, OUT(2));
	obs_route(&f, ST_ESTABLISHED, DPFLOW_META_CT_REPLY, OUT(3));
	ack.tcp_flags = TCP_ACK;
	cr_expect_eq(ct_send(&f, &ack, OUT(0), "ACK"), 333);
	cr_expect_eq(ct_send(&f, &ack, OUT(1), "ACK again"), 333);
	syn = reversed(&ack);
	syn.tcp_flags = TCP_ACK;
	cr_expect_eq(ct_send(&f, &syn, OUT(3), "reply"), 333);
	dpflow_ctx_destroy(f.ctx);
}

Test(flow_ct, udp_unreplied_replied_full_table_and_non_ip)
{
	struct dpflow_ct_cfg cc = {0};
	struct ct_fx f = ct_setup(&cc, 4, false);
	struct pspec u = p4(17, 0x0a000001, 5000, 0x0a000002, 53), back;
	struct pspec arp;
	struct dpflow_pipe_stats st;

	obs_route(&f, ST_UDP_UNREPLIED, DPFLOW_META_CT_NEW, OUT(0));
	obs_route(&f, ST_UDP_REPLIED, DPFLOW_META_CT_REPLY, OUT(1));
	obs_route(&f, ST_UDP_REPLIED, 0, OUT(2));
	obs_route(&f, ST_UDP_UNREPLIED, 0, OUT(3));
	back = reversed(&u);
	ct_send(&f, &u, OUT(0), "first UDP");
	ct_send(&f, &u, OUT(3), "second UDP, no reply yet");
	ct_send(&f, &back, OUT(1), "reply");
	ct_send(&f, &u, OUT(2), "after the reply");

	/* 3 more fill the table of 4; the fifth connection is refused */
	for (uint16_t i = 1; i <= 3; i++) {
		u.sport = (uint16_t)(5000 + i);
		ct_send(&f, &u, OUT(0), "filling the table");
	}
	u.sport = 5100;
	ct_send(&f, &u, OUT(7), "table full");
	u.sport = 5001;
	ct_send(&f, &u, OUT(3), "existing connection, full table");

	memset(&arp, 0, sizeof(arp));
	arp.arp = true;
	ct_send(&f, &arp, OUT(7), "ARP");
	{
		struct pspec v6 = random_flow();

		v6.v6 = true;
		v6.proto = 17;
		ct_send(&f, &v6, OUT(7), "IPv6 UDP, table full");
	}

	dpflow_pipe_stats_get(f.ct, &st);
	cr_expect_eq(st.pkts, 11);
	cr_expect_eq(st.hits, 8);
	cr_expect_eq(st.misses, 3);
	cr_expect_eq(st.ct_created, 4);
	cr_expect_eq(st.ct_live, 4);
	cr_expect_eq(st.ct_refused, 3, "full twice and one non-IP: %lu",
		     (unsigned long)st.ct_refused);
	expect_pool_whole(f.ctx);
	dpflow_ctx_destroy(f.ctx);
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000,
			      .tv_nsec = (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

Test(flow_ct, connections_age_out)
{
	struct dpflow_ct_cfg cc = {0};
	struct ct_fx f;
	struct pspec u = p4(17, 0x0a000001, 5000, 0x0a000002, 53), syn, ack;
	struct dpflow_pipe_stats st;

	cc.timeout_ms[ST_UDP_UNREPLIED] = 40;
	cc.timeout_ms[ST_SYN_SENT] = 40;
	f = ct_setup(&cc, 16, false);
	obs_route(&f, ST_UDP_UNREPLIED, DPFLOW_META_CT_NEW, OUT(0));
	obs_route(&f, ST_SYN_SENT, DPFLOW_META_CT_NEW, OUT(0));
	obs_route(&f, ST_ESTABLISHED, DPFLOW_META_CT_NEW, OUT(1));
	syn = p4(6, 0x0a000001, 40000, 0x0a000002, 80);
	syn.tcp_flags = TCP_SYN;
	ack = syn;
	ack.sport = 40001;
	ack.tcp_flags = TCP_ACK;
	ct_send(&f, &u, OUT(0), "udp");
	u.sport = 5001;
	ct_send(&f, &u, OUT(0), "udp 2");
	ct_send(&f, &syn, OUT(0), "syn");
	ct_send(&f, &ack, OUT(1), "established (default timeout)");
	cr_expect_eq(dpflow_pipe_age(f.ct, dpflow_clock_ns(), 0, NULL, NULL), 0,
		     "nothing idle yet");
	sleep_ms(120);
	cr_expect_eq(dpflow_pipe_age(f.ct, dpflow_clock_ns(), 0, NULL, NULL),
		     3);
	cr_expect_eq(dpflow_pipe_age(f.ct, dpflow_clock_ns(), 0, NULL, NULL), 0,
		     "each connection expires once");
	dpflow_pipe_stats_get(f.ct, &st);
	cr_expect_eq(st.ct_expired, 3);
	cr_expect_eq(st.ct_live, 1);
	/* the expired flow starts over as new */
	ct_send(&f, &syn, OUT(0), "syn after expiry");
	dpflow_ctx_destroy(f.ctx);
}

/* ---- 6. meters ------------------------------------------------------------
 */

/* RFC 2697 colour-blind, rates 0 (no refill): colours of @n packets. */
static void ref_srtcm(uint32_t cbs, uint32_t ebs, const uint32_t *len,
		      unsigned n, uint8_t *color)
{
	uint64_t tc = cbs, te = ebs;

	for (unsigned i = 0; i < n; i++) {
		if (tc >= len[i]) {
			color[i] = DPFLOW_COLOR_GREEN;
			tc -= len[i];
		} else if (te >= len[i]) {
			color[i] = DPFLOW_COLOR_YELLOW;
			te -= len[i];
		} else {
			color[i] = DPFLOW_COLOR_RED;
		}
	}
}

/* RFC 2698 colour-blind, rates 0. */
static void ref_trtcm(uint32_t cbs, uint32_t pbs, const uint32_t *len,
		      unsigned n, uint8_t *color)
{
	uint64_t tc = cbs, tp = pbs;

	for (unsigned i = 0; i < n; i++) {
		if (tp < len[i]) {
			color[i] = DPFLOW_COLOR_RED;
		} else if (tc < len[i]) {
			color[i] = DPFLOW_COLOR_YELLOW;
			tp -= len[i];
		} else {
			color[i] = DPFLOW_COLOR_GREEN;
			tp -= len[i];
			tc -= len[i];
		}
	}
}

static struct pspec sized(uint16_t dport, uint16_t len)
{
	struct pspec s = p4(17, 0x0a000001, 1000, 0x0a000002, dport);

	s.len = len;
	return s;
}

static uint32_t lens100[20] = {100, 100, 100, 100, 100, 100, 100,
			       100, 100, 100, 100, 100, 100, 100,
			       100, 100, 100, 100, 100, 100};

Test(flow_meter, srtcm_colours_and_red_drop)
{
	struct dpflow_ctx *ctx = ctx_new(NULL, 1);
	struct dpflow_pool *pool = dpflow_ctx_pool(ctx);
	struct dpflow_pipe_cfg c = pipe_cfg("m", DPFLOW_PIPE_BASIC, 8);
	struct dpflow_pipe *pipe;
	struct dpflow_entry_cfg e = entry_cfg();
	uint8_t want[20];
	uint32_t idx[20], out[32];
	unsigned k, n_want = 0;
	struct dpflow_pipe_stats st;
	unsigned cnt[3] = {0};

	ref_srtcm(1000, 500, lens100, 20, want);
	for (unsigned i = 0; i < 20; i++)
		cnt[want[i]]++;
	cr_assert_eq(cnt[0], 10, "reference: 10 green");
	cr_assert_eq(cnt[1], 5, "reference: 5 yellow");
	cr_assert_eq(cnt[2], 5, "reference: 5 red");

	c.root = true;
	match_add(&c, DPFLOW_FIELD_OUTER_L4_DPORT, true, 0);
	c.monitor.meter = (struct dpflow_meter_cfg){
	    .alg = DPFLOW_METER_ALG_SRTCM, .cbs = 1000, .ebs = 500};
	c.fwd = fwd_port(OUT(0));
	pipe = pipe_new(ctx, &c);
	put16(e.key, 53);
	entry_new(ctx, pipe, &e);
	for (unsigned i = 0; i < 20; i++) {
		struct pspec s = sized(53, 100);

		idx[i] = mk(pool, &s);
		cr_assert_eq(dpflow_pool_meta(pool, idx[i])->data_len, 100);
	}
	send_burst(ctx, idx, 20);
	k = take(ctx, OUT(0), out, 32);
	for (unsigned i = 0; i < 20; i++)
		if (want[i] != DPFLOW_COLOR_RED) {
			cr_assert_lt(n_want, k);
			cr_expect_eq(out[n_want], idx[i]);
			cr_expect_eq(dpflow_pool_meta(pool, out[n_want])->color,
				     want[i], "packet %u colour", i);
			n_want++;
		}
	cr_expect_eq(k, n_want,
		     "green and yellow go out (yellow takes the "
		     "hit forwarding)");
	dpflow_pool_free_bulk(pool, out, k);
	cr_expect_eq(drops_of(ctx, DPFLOW_DROP_FLOW_METER_RED), 5);
	dpflow_pipe_stats_get(pipe, &st);
	cr_expect_eq(st.color[0], 10);
	cr_expect_eq(st.color[1], 5);
	cr_expect_eq(st.color[2], 5);
	expect_pool_whole(ctx);
	dpflow_ctx_destroy(ctx);
}

/* trTCM with colour forwarding; meta.color read by a later pipe. */
Test(flow_meter, trtcm_colour_forwarding_and_meta_color)
{
	struct dpflow_ctx *ctx = ctx_new(NULL, 6);
	struct dpflow_pool *pool = dpflow_ctx_pool(ctx);
	struct dpflow_pipe_cfg c = pipe_cfg("col", DPFLOW_PIPE_BASIC, 8);
	struct dpflow_pipe *col, *m1, *m2;
	struct dpflow_entry_cfg e;
	uint8_t want[20];
	uint32_t idx[20];
	unsigned cnt[3] = {0};

	ref_trtcm(1000, 1500, lens100, 20, want);
	for (unsigned i = 0; i < 20; i++)
		cnt[want[i]]++;
	cr_assert_eq(cnt[0], 10);
	cr_assert_eq(cnt[1], 5);
	cr_assert_eq(cnt[2], 5);

	/* col: meta.color -> ports 3, 4, 5 */
	match_add(&c, DPFLOW_FIELD_META_COLOR, true, 0);
	c.fwd.kind = DPFLOW_FWD_PER_ENTRY;
	col = pipe_new(ctx, &c);
	for (uint8_t k = 0; k < 3; k++) {
		e = entry_cfg();
		e.key[0] = k;
		e.fwd = fwd_port(OUT(3 + k));
		entry_new(ctx, col, &e);
	}
	/* m2 (dport 2): all colours on to col; yellow by the hit forwarding */
	c = pipe_cfg("m2", DPFLOW_PIPE_BASIC, 8);
	match_add(&c, DPFLOW_FIELD_OUTER_L4_DPORT, true, 0);
	c.monitor.meter = (struct dpflow_meter_cfg){
	    .alg = DPFLOW_METER_ALG_TRTCM, .cbs = 1000, .pbs = 1500};
	c.fwd = fwd_pipe(col);
	c.color_fwd.red_set = true;
	c.color_fwd.red = fwd_pipe(col);
	m2 = pipe_new(ctx, &c);
	/* m1 (root; dport 1): yellow -> port 1, red -> port 2 */
	c = pipe_cfg("m1", DPFLOW_PIPE_BASIC, 8);
	c.root = true;
	match_add(&c, DPFLOW_FIELD_OUTER_L4_DPORT, true, 0);
	c.monitor.meter = (struct dpflow_meter_cfg){
	    .alg = DPFLOW_METER_ALG_TRTCM, .cbs = 1000, .pbs = 1500};
	c.fwd = fwd_port(OUT(0));
	c.miss_fwd = fwd_pipe(m2);
	c.color_fwd.yellow_set = true;
	c.color_fwd.yellow = fwd_port(OUT(1));
	c.color_fwd.red_set = true;
	c.color_fwd.red = fwd_port(OUT(2));
	m1 = pipe_new(ctx, &c);
	e = entry_cfg();
	put16(e.key, 1);
	entry_new(ctx, m1, &e);
	e = entry_cfg();
	put16(e.key, 2);
	entry_new(ctx, m2, &e);

	for (unsigned i = 0; i < 20; i++) {
		struct pspec s = sized(1, 100);

		idx[i] = mk(pool, &s);
	}
	send_burst(ctx, idx, 20);
	for (unsigned p = 0; p < 3; p++) {
		uint32_t out[32];
		unsigned k = take(ctx, OUT(p), out, 32);

		cr_expect_eq(k, cnt[p], "colour %u: %u packets on port %u", p,
			     k, p);
		for (unsigned i = 0; i < k; i++)
			cr_expect_eq(dpflow_pool_meta(pool, out[i])->color, p);
		dpflow_pool_free_bulk(pool, out, k);
	}
	cr_expect_eq(drops_of(ctx, DPFLOW_DROP_FLOW_METER_RED), 0);

	for (unsigned i = 0; i < 20; i++) {
		struct pspec s = sized(2, 100);

		idx[i] = mk(pool, &s);
	}
	send_burst(ctx, idx, 20);
	for (unsigned p = 0; p < 3; p++)
		cr_expect_eq(count_out(ctx, OUT(3 + p)), cnt[p],
			     "meta.color %u matched by the next pipe", p);
	expect_pool_whole(ctx);
	dpflow_ctx_destroy(ctx);
}

/* Two entries on one shared meter drain one bucket; an entry's own meter
 * overrides the pipe's template. */
Test(flow_meter, shared_meter_and_per_entry_override)
{
	struct dpflow_ctx_params cp = {.shared_meters = 2};
	struct dpflow_ctx *ctx = ctx_new(&cp, 2);
	struct dpflow_pool *pool = dpflow_ctx_pool(ctx);
	struct dpflow_pipe_cfg c;
	struct dpflow_meter_cfg mc = {.alg = DPFLOW_METER_ALG_SRTCM,
				      .cbs = 1000};
	struct dpflow_error err = {0};
	struct dpflow_pipe *sm, *pm;
	struct dpflow_entry_cfg e;
	struct dpflow_pipe_stats st;
	uint32_t idx[40];

	cr_assert_eq(dpflow_shared_meter_config(ctx, 1, &mc, &err), 0, "%s",
		     err.msg);
	mc.cbs = 100000; /* meter 2: plenty, never used */
	cr_assert_eq(dpflow_shared_meter_config(ctx, 2, &mc, &err), 0);

	/* pm: per-entry meters (template: 10 green, 5 yellow) */
	c = pipe_cfg("pm", DPFLOW_PIPE_BASIC, 8);
	match_add(&c, DPFLOW_FIELD_OUTER_L4_DPORT, true, 0);
	c.monitor.meter = (struct dpflow_meter_cfg){
	    .alg = DPFLOW_METER_ALG_SRTCM, .cbs = 1000, .ebs = 500};
	c.fwd = fwd_port(OUT(1));
	pm = pipe_new(ctx, &c);
	/* sm (root): shared meter 1; other dports on to pm */
	c = pipe_cfg("sm", DPFLOW_PIPE_BASIC, 8);
	c.root = true;
	match_add(&c, DPFLOW_FIELD_OUTER_L4_DPORT, true, 0);
	c.monitor.shared_meter = 1;
	c.fwd = fwd_port(OUT(0));
	c.miss_fwd = fwd_pipe(pm);
	sm = pipe_new(ctx, &c);
	for (uint16_t d = 1; d <= 2; d++) {
		e = entry_cfg();
		put16(e.key, d);
		entry_new(ctx, sm, &e);
	}
	e = entry_cfg();
	put16(e.key, 3); /* the template */
	entry_new(ctx, pm, &e);
	e = entry_cfg();
	put16(e.key, 4); /* its own: 300 committed, nothing excess */
	e.meter = (struct dpflow_meter_cfg){.alg = DPFLOW_METER_ALG_SRTCM,
					    .cbs = 300};
	entry_new(ctx, pm, &e);

	/* 12 packets alternating dports 1 and 2: 10 green, then red */
	for (unsigned i = 0; i < 12; i++) {
		struct pspec s = sized((uint16_t)(1 + i % 2), 100);

		idx[i] = mk(pool, &s);
	}
	send_burst(ctx, idx, 12);
	cr_expect_eq(count_out(ctx, OUT(0)), 10,
		     "both entries drain shared meter 1");
	cr_expect_eq(drops_of(ctx, DPFLOW_DROP_FLOW_METER_RED), 2);
	dpflow_pipe_stats_get(sm, &st);
	cr_expect_eq(st.color[0], 10);
	cr_expect_eq(st.color[2], 2);

	/* 20 to dport 3 and 20 to dport 4, interleaved */
	for (unsigned i = 0; i < 40; i++) {
		struct pspec s = sized((uint16_t)(3 + i % 2), 100);

		idx[i] = mk(pool, &s);
	}
	send_burst(ctx, idx, 40);
	{
		uint32_t out[64];
		unsigned k = take(ctx, OUT(1), out, 64), per[2][3] = {{0}};

		for (unsigned i = 0; i < k; i++) {
			const struct dpflow_pkt_meta *m =
			    dpflow_pool_meta(pool, out[i]);

			per[m->outer.dport - 3][m->color]++;
		}
		dpflow_pool_free_bulk(pool, out, k);
		cr_expect_eq(per[0][0], 10, "template entry: 10 green");
		cr_expect_eq(per[0][1], 5, "template entry: 5 yellow");
		cr_expect_eq(per[1][0], 3, "own meter: 3 green, got %u",
			     per[1][0]);
		cr_expect_eq(per[1][1], 0, "own meter: no yellow");
		cr_expect_eq(k, 18);
	}
	cr_expect_eq(drops_of(ctx, DPFLOW_DROP_FLOW_METER_RED), 2 + 5 + 17);
	expect_pool_whole(ctx);
	dpflow_ctx_destroy(ctx);
}

/* ---- 7. shared counters ---------------------------------------------------
 */

Test(flow_monitor, shared_counter_across_two_pipes)
{
	struct dpflow_ctx_params cp = {.shared_counters = 3};
	struct dpflow_ctx *ctx = ctx_new(&cp, 2);
	struct dpflow_pool *pool = dpflow_ctx_pool(ctx);
	struct dpflow_pipe_cfg c = pipe_cfg("b", DPFLOW_PIPE_BASIC, 8);
	struct dpflow_pipe *a, *b;
	struct dpflow_entry_cfg e;
	struct dpflow_counter ctr;
	struct dpflow_error err = {0};
	uint32_t idx[9];
	unsigned n = 0;
	uint64_t bytes = 0;

	/* b: on sport; the entry for 7 counts into counter 2 */
	match_add(&c, DPFLOW_FIELD_OUTER_L4_SPORT, true, 0);
	c.fwd = fwd_port(OUT(0));
	c.miss_fwd = fwd_port(OUT(1));
	b = pipe_new(ctx, &c);
	e = entry_cfg();
	put16(e.key, 7);
	e.shared_counter = 2;
	entry_new(ctx, b, &e);
	/* a (root): every entry counts into counter 2 (the pipe's) */
	c = pipe_cfg("a", DPFLOW_PIPE_BASIC, 8);
	c.root = true;
	match_add(&c, DPFLOW_FIELD_OUTER_L4_DPORT, true, 0);
	c.monitor.shared_counter = 2;
	c.fwd.kind = DPFLOW_FWD_PER_ENTRY;
	c.miss_fwd = fwd_port(OUT(1));
	a = pipe_new(ctx, &c);
	entry_new(ctx, a, (e = dport_entry(1, fwd_port(OUT(0))), &e));
	entry_new(ctx, a, (e = dport_entry(2, fwd_pipe(b)), &e));

	for (unsigned i = 0; i < 3; i++) { /* a only */
		struct pspec s = sized(1, (uint16_t)(100 + i));

		idx[n++] = mk(pool, &s);
		bytes += 100 + i;
	}
	for (unsigned i = 0; i < 4; i++) { /* a and b */
		struct pspec s = sized(2, (uint16_t)(200 + i));

		s.sport = 7;
		idx[n++] = mk(pool, &s);
		bytes += 2 * (200 + i);
	}
	for (unsigned i = 0; i < 2; i++) { /* a, then b misses */
		struct pspec s = sized(2, 300);

		s.sport = 8;
		idx[n++] = mk(pool, &s);
		bytes += 300;
	}
	send_burst(ctx, idx, n);
	cr_expect_eq(count_out(ctx, OUT(0)), 7);
	cr_expect_eq(count_out(ctx, OUT(1)), 2);
	cr_assert_eq(dpflow_shared_counter_read(ctx, 2, &ctr), 0);
	cr_expect_eq(ctr.pkts, 3 + 4 + 4 + 2);
	cr_expect_eq(ctr.bytes, bytes);
	cr_assert_eq(dpflow_shared_counter_read(ctx, 1, &ctr), 0);
	cr_expect_eq(ctr.pkts, 0);
	cr_assert_eq(dpflow_shared_counter_read(ctx, 3, &ctr), 0);
	cr_expect_eq(ctr.pkts, 0);
	cr_expect_eq(dpflow_shared_counter_read(ctx, 0, &ctr), -EINVAL);
	cr_expect_eq(dpflow_shared_counter_read(ctx, 4, &ctr), -EINVAL);
	cr_expect_eq(dpflow_ctx_shared_counters(ctx), 3);

	/* an entry naming counter 4 is refused, the pipe unchanged */
	{
		struct dpflow_queue *q = dpflow_queue_create(ctx, &err);

		e = dport_entry(9, fwd_port(OUT(0)));
		e.shared_counter = 4;
		cr_assert_not_null(dpflow_entry_add(q, a, &e, NULL, &err));
		cr_expect_eq(dpflow_entries_process(q, NULL, &err), -EINVAL);
		cr_expect_str_eq(err.field, "shared_counter");
		cr_expect_eq(dpflow_pipe_entry_count(a), 2);
		dpflow_queue_destroy(q);
	}
	expect_pool_whole(ctx);
	dpflow_ctx_destroy(ctx);
}

/* ---- 8. aging --------------------------------------------------------------
 */

struct aged_log {
	unsigned n;
	struct dpflow_entry *e[16];
	uint64_t last[16];
	struct dpflow_queue *remove_q; /* remove them when set */
};

static void on_aged(struct dpflow_entry *e, uint64_t last_hit_ns, void *arg)
{
	struct aged_log *l = (struct aged_log *)arg;

	if (l->n < 16) {
		l->e[l->n] = e;
		l->last[l->n] = last_hit_ns;
	}
	l->n++;
	if (l->remove_q)
		cr_expect_eq(dpflow_entry_remove(l->remove_q, e, NULL), 0);
}

#define AGING_MS 80

Test(flow_monitor, aging_reports_idle_entries_once)
{
	struct dpflow_ctx *ctx = ctx_new(NULL, 2);
	struct dpflow_pipe_cfg c = pipe_cfg("ag", DPFLOW_PIPE_BASIC, 16);
	struct dpflow_pipe *pipe;
	struct dpflow_entry *h[5];
	struct dpflow_error err = {0};
	struct dpflow_queue *q = dpflow_queue_create(ctx, &err);
	struct aged_log log;
	uint64_t t_hit;

	c.root = true;
	match_add(&c, DPFLOW_FIELD_OUTER_L4_DPORT, true, 0);
	c.monitor.aging_ms = AGING_MS;
	c.fwd = fwd_port(OUT(0));
	c.miss_fwd = fwd_port(OUT(1));
	pipe = pipe_new(ctx, &c);
	for (uint16_t d = 1; d <= 4; d++) {
		struct dpflow_entry_cfg e = entry_cfg();

		put16(e.key, d);
		if (d == 4)
			e.aging_ms = 600000; /* its own, long timeout */
		h[d] = dpflow_entry_add(q, pipe, &e, NULL, &err);
		cr_assert_not_null(h[d]);
	}
	cr_assert_eq(dpflow_entries_process(q, NULL, &err), 0, "%s", err.msg);

	memset(&log, 0, sizeof(log));
	cr_expect_eq(dpflow_pipe_age(pipe, dpflow_clock_ns(), 0, on_aged, &log),
		     0, "nothing idle yet");
	sleep_ms(2 * AGING_MS);
	/* 1 and 2 are hit now; 3 has been idle 2 timeouts; 4 has its own */
	t_hit = dpflow_clock_ns();
	for (uint16_t d = 1; d <= 2; d++) {
		struct pspec s = sized(d, 64);

		send1(ctx, &s);
	}
	cr_expect_eq(count_out(ctx, OUT(0)), 2);
	log.remove_q = q;
	cr_expect_eq(dpflow_pipe_age(pipe, dpflow_clock_ns(), 0, on_aged, &log),
		     1);
	cr_assert_eq(log.n, 1);
	cr_expect_eq(log.e[0], h[3], "entry for dport 3 aged");
	cr_assert_eq(dpflow_entries_process(q, NULL, &err), 0, "%s", err.msg);
	cr_expect_eq(dpflow_pipe_entry_count(pipe), 3,
		     "the callback removed it");
	{
		struct pspec s = sized(3, 64);

		send1(ctx, &s);
		cr_expect_eq(count_out(ctx, OUT(1)), 1, "dport 3 now misses");
	}
	cr_expect_eq(dpflow_pipe_age(pipe, dpflow_clock_ns(), 0, on_aged, &log),
		     0, "reported once");

	/* later 1 and 2 age too (reported, left in the pipe); 4 does not */
	sleep_ms(2 * AGING_MS);
	memset(&log, 0, sizeof(log));
	cr_expect_eq(dpflow_pipe_age(pipe, dpflow_clock_ns(), 0, on_aged, &log),
		     2);
	cr_assert_eq(log.n, 2);
	cr_expect((log.e[0] == h[1] && log.e[1] == h[2]) ||
		      (log.e[0] == h[2] && log.e[1] == h[1]),
		  "entries 1 and 2 aged");
	for (unsigned i = 0; i < 2; i++) {
		/* the last hit is reported in whole milliseconds */
		cr_expect_leq(log.last[i], t_hit + 50 * 1000000ull);
		cr_expect_geq(log.last[i] + 1000000ull, t_hit);
	}
	sleep_ms(2 * AGING_MS);
	cr_expect_eq(dpflow_pipe_age(pipe, dpflow_clock_ns(), 0, on_aged, &log),
		     0, "reported entries are not reported again");
	cr_expect_eq(dpflow_pipe_entry_count(pipe), 3);
	dpflow_queue_destroy(q);
	expect_pool_whole(ctx);
	dpflow_ctx_destroy(ctx);
}

/* A budget scans a slice of the slots per call, wrapping. */
Test(flow_monitor, aging_with_budget_scans_in_slices)
{
	struct dpflow_ctx *ctx = ctx_new(NULL, 2);
	struct dpflow_pipe_cfg c = pipe_cfg("ag", DPFLOW_PIPE_BASIC, 32);
	struct dpflow_pipe *pipe;
	struct dpflow_error err = {0};
	struct dpflow_queue *q = dpflow_queue_create(ctx, &err);
	uint32_t total = 0;
	uint64_t now;

	c.root = true;
	match_add(&c, DPFLOW_FIELD_OUTER_L4_DPORT, true, 0);
	c.monitor.aging_ms = 20;
	c.fwd = fwd_port(OUT(0));
	pipe = pipe_new(ctx, &c);
	for (uint16_t d = 1; d <= 20; d++) {
		struct dpflow_entry_cfg e = entry_cfg();

		put16(e.key, d);
		cr_assert_not_null(dpflow_entry_add(q, pipe, &e, NULL, &err));
	}
	cr_assert_eq(dpflow_entries_process(q, NULL, &err), 0);
	sleep_ms(60);
	now = dpflow_clock_ns();
	for (unsigned i = 0; i < 8; i++) /* 8 slices of 4 slots: all 32 */
		total += dpflow_pipe_age(pipe, now, 4, NULL, NULL);
	cr_expect_eq(total, 20);
	cr_expect_eq(dpflow_pipe_age(pipe, now, 0, NULL, NULL), 0);
	dpflow_queue_destroy(q);
	dpflow_ctx_destroy(ctx);
}

/* ---- 9. RSS forwarding ------------------------------------------------------
 */

/* flow.h: queue rss_queue + (hash & 127) % rss_n (a 128-entry redirection
 * table filled round robin). */
static uint16_t rss_queue_of(uint32_t h, uint16_t first, uint16_t n)
{
	return (uint16_t)(first + (h & 127) % n);
}

/* IPv4 over queues 1..4, IPv6 over 5..7 (3 queues: 128 % 3 != 0, so the
 * table is not a plain modulo). */
Test(flow_rss, packets_land_on_their_toeplitz_queue)
{
	struct dpflow_ctx_params cp = {.rss_queues = 9};
	struct dpflow_ctx *ctx = ctx_new(&cp, 1);
	struct dpflow_pool *pool = dpflow_ctx_pool(ctx);
	struct dpflow_pipe_cfg c = pipe_cfg("r", DPFLOW_PIPE_BASIC, 8);
	struct dpflow_pipe *pipe;
	struct dpflow_entry_cfg e = entry_cfg();
	static uint32_t want_q[8192];
	unsigned per_q[9] = {0}, not_mod = 0;
	uint32_t idx[256];

	cr_assert_eq(dpflow_ctx_rss_queues(ctx), 9);
	c.root = true;
	match_add(&c, DPFLOW_FIELD_OUTER_L3_TYPE, true, 0);
	c.fwd.kind = DPFLOW_FWD_PER_ENTRY;
	c.miss_fwd = fwd_port(OUT(0));
	pipe = pipe_new(ctx, &c);
	e.key[0] = DPFLOW_L3_IPV4;
	e.fwd.kind = DPFLOW_FWD_RSS;
	e.fwd.rss_queue = 1;
	e.fwd.rss_n = 4;
	entry_new(ctx, pipe, &e);
	e.key[0] = DPFLOW_L3_IPV6;
	e.fwd.rss_queue = 5;
	e.fwd.rss_n = 3;
	entry_new(ctx, pipe, &e);

	init_sym_key();
	rng_seed(9);
	for (unsigned round = 0; round < 8; round++) {
		for (unsigned i = 0; i < 256; i += 2) {
			struct pspec s = random_flow(), r = reversed(&s);
			uint32_t h = ref_rss(sym_key, &s);
			uint16_t q = s.v6 ? rss_queue_of(h, 5, 3)
					  : rss_queue_of(h, 1, 4);

			not_mod += s.v6 && q != 5 + h % 3;
			idx[i] = mk(pool, &s);
			idx[i + 1] = mk(pool, &r);
			want_q[idx[i]] = want_q[idx[i + 1]] = q;
			per_q[q] += 2;
		}
		send_burst(ctx, idx, 256);
		for (uint16_t qi = 0; qi < 9; qi++) {
			uint32_t out[512];
			unsigned k = dpflow_ctx_rss_rx(ctx, qi, out, 512);

			for (unsigned i = 0; i < k; i++) {
				const struct dpflow_pkt_meta *m =
				    dpflow_pool_meta(pool, out[i]);
				bool v6 = m->outer.l3_type == DPFLOW_L3_IPV6;

				cr_assert_eq(qi, want_q[out[i]],
					     "packet on queue %u, Toeplitz "
					     "says %u",
					     qi, want_q[out[i]]);
				cr_expect_eq(m->queue, qi);
				cr_expect_eq(
				    v6 ? rss_queue_of(m->rss_hash, 5, 3)
				       : rss_queue_of(m->rss_hash, 1, 4),
				    qi, "meta.rss_hash");
			}
			dpflow_pool_free_bulk(pool, out, k);
		}
	}
	for (uint16_t qi = 0; qi < 9; qi++)
		cr_expect_eq(dpflow_ctx_rss_count(ctx, qi), per_q[qi],
			     "queue %u count", qi);
	cr_expect_eq(per_q[0] + per_q[8], 0);
	cr_expect_gt(not_mod, 0, "some hashes tell the table from a modulo");
	cr_expect_eq(dpflow_ctx_rss_count(ctx, 99), 0);
	cr_expect_eq(dpflow_ctx_rss_rx(ctx, 99, idx, 4), 0);
	cr_expect_eq(count_out(ctx, OUT(0)), 0);
	expect_pool_whole(ctx);
	dpflow_ctx_destroy(ctx);
}

Test(flow_rss, full_queue_drops_with_its_reason)
{
	struct dpflow_ctx_params cp = {.rss_queues = 1, .rss_queue_size = 64};
	struct dpflow_ctx *ctx = ctx_new(&cp, 1);
	struct dpflow_pool *pool = dpflow_ctx_pool(ctx);
	struct dpflow_pipe_cfg c = pipe_cfg("r", DPFLOW_PIPE_BASIC, 8);
	struct dpflow_pipe *pipe;
	struct dpflow_entry_cfg e = entry_cfg();
	uint32_t idx[100], out[128];
	unsigned k;
	uint64_t enq;

	c.root = true;
	match_add(&c, DPFLOW_FIELD_OUTER_IP_PROTO, true, 0);
	c.fwd.kind = DPFLOW_FWD_RSS;
	c.fwd.rss_n = 1;
	pipe = pipe_new(ctx, &c);
	e.key[0] = 17;
	entry_new(ctx, pipe, &e);
	rng_seed(10);
	for (unsigned i = 0; i < 100; i++) {
		struct pspec s = random_flow();

		s.proto = 17;
		idx[i] = mk(pool, &s);
	}
	send_burst(ctx, idx, 100);
	enq = dpflow_ctx_rss_count(ctx, 0);
	cr_expect(enq == 63 || enq == 64, "a 64-slot queue took %lu",
		  (unsigned long)enq);
	cr_expect_eq(drops_of(ctx, DPFLOW_DROP_FLOW_RSS_FULL), 100 - enq);
	k = dpflow_ctx_rss_rx(ctx, 0, out, 128);
	cr_expect_eq(k, enq);
	dpflow_pool_free_bulk(pool, out, k);
	expect_pool_whole(ctx);
	dpflow_ctx_destroy(ctx);
}

/* ---- 10. software handlers
 * --------------------------------------------------- */

struct handler_log {
	unsigned calls, pkts;
	uint16_t dports[64];
};

static void record_and_free(void *arg, struct dpflow_pool *pool,
			    const uint32_t *idx, uint16_t n)
{
	struct handler_log *l = (struct handler_log *)arg;

	l->calls++;
	for (uint16_t i = 0; i < n; i++) {
		if (l->pkts < 64)
			l->dports[l->pkts] =
			    dpflow_pool_meta(pool, idx[i])->outer.dport;
		l->pkts++;
	}
	dpflow_pool_free_bulk(pool, idx, n);
}

static void noop_handler(void *arg, struct dpflow_pool *pool,
			 const uint32_t *idx, uint16_t n)
{
	(void)arg;
	dpflow_pool_free_bulk(pool, idx, n);
}

Test(flow_handler, handler_gets_and_owns_its_packets)
{
	struct dpflow_ctx *ctx = ctx_new(NULL, 1);
	struct dpflow_pool *pool = dpflow_ctx_pool(ctx);
	struct dpflow_pipe *pipe;
	struct dpflow_error err = {0};
	struct handler_log log;
	dpflow_handler_fn fn = NULL;
	void *arg = NULL;
	struct dpflow_fwd hf;
	struct dpflow_entry_cfg e;
	uint32_t idx[30];
	unsigned n_h = 0;

	memset(&log, 0, sizeof(log));
	cr_assert_eq(dpflow_ctx_handler_register(ctx, "slow", record_and_free,
						 &log, &err),
		     0, "%s", err.msg);
	cr_assert_eq(dpflow_ctx_handler_find(ctx, "slow", &fn, &arg), 0);
	cr_expect_eq(fn, record_and_free);
	cr_expect_eq(arg, &log);
	memset(&hf, 0, sizeof(hf));
	hf.kind = DPFLOW_FWD_HANDLER;
	hf.handler = fn;
	hf.handler_arg = arg;
	pipe = dport_pipe(ctx, "d", true, hf); /* misses go to the handler */
	entry_new(ctx, pipe, (e = dport_entry(5, hf), &e));
	entry_new(ctx, pipe, (e = dport_entry(6, fwd_port(OUT(0))), &e));
	rng_seed(11);
	for (unsigned i = 0; i < 30; i++) {
		uint16_t d = (uint16_t)(5 + rnd() % 3); /* 7 misses */
		struct pspec s = sized(d, 80);

		idx[i] = mk(pool, &s);
	}
	{
		uint16_t want[30];

		for (unsigned i = 0; i < 30; i++) {
			uint8_t *f = dpflow_pkt_data(pool, idx[i]);
			uint16_t d = (uint16_t)get16(f + 36);

			if (d != 6)
				want[n_h++] = d;
		}
		send_burst(ctx, idx, 30);
		cr_expect_eq(log.pkts, n_h, "handler got %u, expected %u",
			     log.pkts, n_h);
		for (unsigned i = 0; i < n_h && i < log.pkts; i++)
			cr_expect_eq(log.dports[i], want[i],
				     "handler packet %u", i);
	}
	cr_expect_eq(count_out(ctx, OUT(0)), 30 - n_h);
	cr_expect_eq(drops_of(ctx, DPFLOW_DROP_FLOW_MISS_DROP), 0);
	/* the handler freed them; the engine did not free them again */
	expect_pool_whole(ctx);
	dpflow_ctx_destroy(ctx);
}

Test(flow_handler, registry_errors)
{
	struct dpflow_ctx *ctx = ctx_new(NULL, 0);
	struct dpflow_error err = {0};
	char name[DPFLOW_NAME_MAX + 8];
	dpflow_handler_fn fn;
	void *arg;

	cr_assert_eq(
	    dpflow_ctx_handler_register(ctx, "h0", noop_handler, NULL, &err),
	    0);
	memset(&err, 0, sizeof(err));
	cr_expect_eq(
	    dpflow_ctx_handler_register(ctx, "h0", noop_handler, NULL, &err),
	    -EEXIST);
	cr_expect(strstr(err.msg, "h0") != NULL, "'%s' names it", err.msg);
	cr_expect_eq(
	    dpflow_ctx_handler_register(ctx, "", noop_handler, NULL, &err),
	    -EINVAL);
	cr_expect_eq(dpflow_ctx_handler_register(ctx, "x", NULL, NULL, &err),
		     -EINVAL);
	memset(name, 'n', sizeof(name));
	name[DPFLOW_NAME_MAX] = 0;
	cr_expect_eq(
	    dpflow_ctx_handler_register(ctx, name, noop_handler, NULL, &err),
	    -EINVAL, "a name of DPFLOW_NAME_MAX characters");
	for (unsigned i = 1; i < DPFLOW_HANDLERS_MAX; i++) {
		snprintf(name, sizeof(name), "h%u", i);
		cr_assert_eq(dpflow_ctx_handler_register(
				 ctx, name, noop_handler, NULL, &err),
			     0, "%s", err.msg);
	}
	cr_expect_eq(dpflow_ctx_handler_register(ctx, "one-more", noop_handler,
						 NULL, &err),
		     -ENOSPC);
	cr_expect_eq(dpflow_ctx_handler_find(ctx, "one-more", &fn, &arg),
		     -ENOENT);
	cr_expect_eq(dpflow_ctx_handler_find(ctx, "h15", &fn, &arg), 0);
	dpflow_ctx_destroy(ctx);
}

/* ---- 11. entry updates ------------------------------------------------------
 */

Test(flow_update, new_actions_take_effect_and_counters_carry)
{
	struct dpflow_ctx *ctx = ctx_new(NULL, 3);
	struct dpflow_pool *pool = dpflow_ctx_pool(ctx);
	struct dpflow_pipe_cfg c = pipe_cfg("u", DPFLOW_PIPE_BASIC, 8);
	struct dpflow_pipe *pipe;
	struct dpflow_error err = {0};
	struct dpflow_queue *q = dpflow_queue_create(ctx, &err);
	struct dpflow_entry *h, *h2, *other;
	struct dpflow_entry_cfg e;
	struct dpflow_counter ctr;
	uint32_t idx[5];

	c.root = true;
	match_add(&c, DPFLOW_FIELD_OUTER_L4_DPORT, true, 0);
	c.n_action_tmpls = 2;
	c.actions[0].n = 1;
	c.actions[0].a[0] = act_set_reg(2, true, 0);
	c.actions[1].n = 1;
	c.actions[1].a[0] = act_set_reg(2, false, 0xabcd);
	c.monitor.counter = true;
	c.fwd.kind = DPFLOW_FWD_PER_ENTRY;
	c.miss_fwd = fwd_port(OUT(2));
	pipe = pipe_new(ctx, &c);
	e = dport_entry(80, fwd_port(OUT(0)));
	put32(e.action_value[0], 7);
	h = entry_new(ctx, pipe, &e);
	other =
	    entry_new(ctx, pipe, (e = dport_entry(81, fwd_port(OUT(0))), &e));

	for (unsigned i = 0; i < 3; i++) {
		struct pspec s = sized(80, 100);

		idx[i] = mk(pool, &s);
	}
	send_burst(ctx, idx, 3);
	{
		uint32_t out[8];
		unsigned k = take(ctx, OUT(0), out, 8);

		cr_expect_eq(k, 3);
		for (unsigned i = 0; i < k; i++)
			cr_expect_eq(dpflow_pool_meta(pool, out[i])->reg[2], 7);
		dpflow_pool_free_bulk(pool, out, k);
	}

	/* to port 1, the other template */
	e = dport_entry(80, fwd_port(OUT(1)));
	e.action_tmpl = 1;
	h2 = dpflow_entry_update(q, h, &e, NULL, &err);
	cr_assert_not_null(h2, "%s", err.msg);
	cr_assert_eq(dpflow_entries_process(q, NULL, &err), 0, "%s", err.msg);
	cr_expect_eq(dpflow_pipe_entry_count(pipe), 2);
	for (unsigned i = 0; i < 2; i++) {
		struct pspec s = sized(80, 100);

		idx[i] = mk(pool, &s);
	}
	send_burst(ctx, idx, 2);
	{
		uint32_t out[8];
		unsigned k = take(ctx, OUT(1), out, 8);

		cr_expect_eq(k, 2, "the new forwarding");
		for (unsigned i = 0; i < k; i++)
			cr_expect_eq(dpflow_pool_meta(pool, out[i])->reg[2],
				     0xabcd, "the new action");
		dpflow_pool_free_bulk(pool, out, k);
	}
	cr_expect_eq(count_out(ctx, OUT(0)), 0);
	dpflow_entry_counter(h2, &ctr);
	cr_expect_eq(ctr.pkts, 5, "counters carried over: %lu",
		     (unsigned long)ctr.pkts);
	cr_expect_eq(ctr.bytes, 500);

	/* the old handle is gone */
	cr_expect_null(dpflow_entry_update(q, h, &e, NULL, &err));

	/* an update in a batch with an invalid entry changes nothing */
	e = dport_entry(80, fwd_port(OUT(2)));
	cr_assert_not_null(dpflow_entry_update(q, h2, &e, NULL, &err));
	e = dport_entry(81, fwd_port(OUT(0))); /* duplicate of "other" */
	cr_assert_not_null(dpflow_entry_add(q, pipe, &e, NULL, &err));
	cr_expect_eq(dpflow_entries_process(q, NULL, &err), -EEXIST);
	cr_expect_eq(dpflow_pipe_entry_count(pipe), 2);
	idx[0] = mk(pool, (struct pspec[]){sized(80, 100)});
	idx[1] = mk(pool, (struct pspec[]){sized(81, 100)});
	send_burst(ctx, idx, 2);
	cr_expect_eq(count_out(ctx, OUT(1)), 1, "old entry still active");
	cr_expect_eq(count_out(ctx, OUT(0)), 1, "other entry intact");
	cr_expect_eq(count_out(ctx, OUT(2)), 0);
	dpflow_entry_counter(h2, &ctr);
	cr_expect_eq(ctr.pkts, 6);

	/* an invalid update alone (action template out of range) */
	e = dport_entry(80, fwd_port(OUT(2)));
	e.action_tmpl = 5;
	cr_assert_not_null(dpflow_entry_update(q, h2, &e, NULL, &err));
	cr_expect_eq(dpflow_entries_process(q, NULL, &err), -EINVAL);
	cr_expect_str_eq(err.field, "action");
	send1(ctx, (struct pspec[]){sized(80, 100)});
	cr_expect_eq(count_out(ctx, OUT(1)), 1, "old entry still works");

	/* the handle survives a failed batch: a good update goes in */
	e = dport_entry(80, fwd_port(OUT(2)));
	cr_assert_not_null(dpflow_entry_update(q, h2, &e, NULL, &err), "%s",
			   err.msg);
	cr_expect_eq(dpflow_entries_process(q, NULL, &err), 0, "%s", err.msg);
	send1(ctx, (struct pspec[]){sized(80, 100)});
	cr_expect_eq(count_out(ctx, OUT(2)), 1);
	(void)other;
	dpflow_queue_destroy(q);
	expect_pool_whole(ctx);
	dpflow_ctx_destroy(ctx);
}

/* An update may change the match too: the old key stops, the new starts. */
Test(flow_update, update_changes_the_match)
{
	struct dpflow_ctx *ctx = ctx_new(NULL, 2);
	struct dpflow_pipe *pipe = dport_pipe(ctx, "u", true, fwd_port(OUT(1)));
	struct dpflow_error err = {0};
	struct dpflow_queue *q = dpflow_queue_create(ctx, &err);
	struct dpflow_entry_cfg e = dport_entry(80, fwd_port(OUT(0)));
	struct dpflow_entry *h = entry_new(ctx, pipe, &e);

	e = dport_entry(8080, fwd_port(OUT(0)));
	cr_assert_not_null(dpflow_entry_update(q, h, &e, NULL, &err));
	cr_assert_eq(dpflow_entries_process(q, NULL, &err), 0, "%s", err.msg);
	send1(ctx, (struct pspec[]){sized(80, 64)});
	send1(ctx, (struct pspec[]){sized(8080, 64)});
	cr_expect_eq(count_out(ctx, OUT(1)), 1, "dport 80 misses");
	cr_expect_eq(count_out(ctx, OUT(0)), 1, "dport 8080 hits");
	dpflow_queue_destroy(q);
	dpflow_ctx_destroy(ctx);
}

#define UPD_BURST 32

struct upd_worker {
	struct dpflow_ctx *ctx;
	volatile int stop;
	volatile unsigned bursts;
	unsigned bad, on[2];
	uint64_t sent;
};

static void *update_worker(void *arg)
{
	struct upd_worker *w = (struct upd_worker *)arg;
	struct dpflow_pool *pool = dpflow_ctx_pool(w->ctx);
	struct pspec s = sized(80, 64);

	dpflow_ctx_thread_online(w->ctx);
	while (!w->stop) {
		uint32_t idx[UPD_BURST], out[UPD_BURST];
		unsigned got = 0;

		for (unsigned i = 0; i < UPD_BURST; i++)
			idx[i] = mk(pool, &s);
		dpflow_ctx_process_burst(w->ctx, 0, idx, UPD_BURST);
		w->sent += UPD_BURST;
		for (unsigned p = 0; p < 2; p++) {
			unsigned k = take(w->ctx, OUT(p), out, UPD_BURST);

			w->on[p] += k;
			got += k;
			dpflow_pool_free_bulk(pool, out, k);
		}
		if (got != UPD_BURST)
			w->bad++;
		w->bursts++;
		dpflow_ctx_quiescent(w->ctx);
	}
	dpflow_ctx_thread_offline(w->ctx);
	return NULL;
}

Test(flow_update, updates_under_traffic_never_miss, .timeout = 60)
{
	struct upd_worker w;
	struct dpflow_pipe *pipe;
	struct dpflow_error err = {0};
	struct dpflow_queue *q;
	struct dpflow_entry *h;
	struct dpflow_entry_cfg e;
	struct dpflow_counter ctr;
	pthread_t t;

	memset(&w, 0, sizeof(w));
	w.ctx = ctx_new(NULL, 3);
	pipe = dport_pipe(w.ctx, "u", true, fwd_port(OUT(2)));
	q = dpflow_queue_create(w.ctx, &err);
	e = dport_entry(80, fwd_port(OUT(0)));
	h = entry_new(w.ctx, pipe, &e);
	cr_assert_eq(pthread_create(&t, NULL, update_worker, &w), 0);
	while (w.bursts < 2)
		sched_yield();
	for (unsigned i = 0; i < 300; i++) {
		unsigned seen = w.bursts;

		e = dport_entry(80, fwd_port(OUT((i + 1) % 2)));
		h = dpflow_entry_update(q, h, &e, NULL, &err);
		cr_assert_not_null(h, "%s", err.msg);
		cr_assert_eq(dpflow_entries_process(q, NULL, &err), 0, "%s",
			     err.msg);
		while (i % 4 == 0 && w.bursts == seen)
			sched_yield();
	}
	w.stop = 1;
	pthread_join(t, NULL);
	cr_expect_eq(w.bad, 0, "%u of %u bursts lost packets", w.bad, w.bursts);
	cr_expect_eq(drops_of(w.ctx, DPFLOW_DROP_FLOW_MISS_DROP), 0);
	cr_expect_eq(count_out(w.ctx, OUT(2)), 0, "no packet missed");
	cr_expect_gt(w.on[0], 0);
	cr_expect_gt(w.on[1], 0);
	dpflow_entry_counter(h, &ctr);
	cr_expect_eq(ctr.pkts, w.sent,
		     "the counter carried through 300 updates: %lu of %lu",
		     (unsigned long)ctr.pkts, (unsigned long)w.sent);
	cr_expect_eq(dpflow_pipe_entry_count(pipe), 1);
	dpflow_queue_destroy(q);
	expect_pool_whole(w.ctx);
	dpflow_ctx_destroy(w.ctx);
}

/* ---- 12. per-entry encapsulation -------------------------------------------
 */

struct vx {
	uint32_t src, dst, vni;
	uint8_t dmac[6];
};

static void check_vxlan(const uint8_t *f, unsigned len, const struct vx *v,
			const uint8_t *inner, unsigned inner_len)
{
	static const uint8_t smac[6] = {0x02, 0xee, 0, 0, 0, 1};
	const uint8_t *ip = f + 14, *udp = ip + 20, *vxh = udp + 8;

	cr_assert_eq(len, 14 + 20 + 8 + 8 + inner_len, "frame length %u", len);
	cr_expect_eq(memcmp(f, v->dmac, 6), 0, "outer eth dst");
	cr_expect_eq(memcmp(f + 6, smac, 6), 0, "outer eth src");
	cr_expect_eq(get16(f + 12), 0x0800);
	cr_expect_eq(ip[0], 0x45);
	cr_expect_eq(get16(ip + 2), 20 + 8 + 8 + inner_len, "ip total length");
	cr_expect_eq(get16(ip + 6) & 0x1fff, 0, "not a fragment");
	cr_expect_eq(ip[8], 64, "ttl");
	cr_expect_eq(ip[9], 17, "udp");
	cr_expect_eq(ones_sum(ip, 20), 0xffff, "outer IPv4 checksum %#x",
		     get16(ip + 10));
	cr_expect_eq(get32(ip + 12), v->src);
	cr_expect_eq(get32(ip + 16), v->dst);
	cr_expect_eq(get16(udp + 2), 4789, "VXLAN port");
	cr_expect_eq(get16(udp + 4), 8 + 8 + inner_len, "udp length");
	cr_expect_neq(get16(udp), 0, "udp source port from the flow hash");
	cr_expect_eq(vxh[0], 0x08, "VXLAN I flag");
	cr_expect_eq(get32(vxh) & 0xffffff, 0);
	cr_expect_eq(get32(vxh + 4) >> 8, v->vni, "VNI");
	cr_expect_eq(vxh[7], 0);
	cr_expect_eq(memcmp(vxh + 8, inner, inner_len), 0, "inner frame");
}

Test(flow_encap, per_entry_vxlan_outer_headers)
{
	static const struct vx vx[2] = {
	    {0xc0000201, 0xc6336409, 0x123456, {0x02, 0xdd, 0, 0, 0, 1}},
	    {0xc0000201, 0xcb007107, 77, {0x02, 0xdd, 0, 0, 0, 2}},
	};
	struct dpflow_ctx *ctx = ctx_new(NULL, 2);
	struct dpflow_pool *pool = dpflow_ctx_pool(ctx);
	struct dpflow_pipe_cfg c = pipe_cfg("enc", DPFLOW_PIPE_BASIC, 8);
	struct dpflow_pipe *pipe;
	uint8_t inner[2][256];
	unsigned inner_len[2];
	uint32_t idx[2];

	c.root = true;
	match_add(&c, DPFLOW_FIELD_OUTER_L4_DPORT, true, 0);
	c.n_action_tmpls = 1;
	c.actions[0].n = 1;
	c.actions[0].a[0].kind = DPFLOW_ACT_ENCAP;
	c.actions[0].a[0].per_entry = true;
	c.fwd = fwd_port(OUT(0));
	c.miss_fwd = fwd_port(OUT(1));
	pipe = pipe_new(ctx, &c);
	for (unsigned i = 0; i < 2; i++) {
		struct dpflow_entry_cfg e = entry_cfg();
		static const uint8_t smac[6] = {0x02, 0xee, 0, 0, 0, 1};

		put16(e.key, (uint16_t)(1 + i));
		e.encap.tun_type = DPFLOW_TUN_VXLAN;
		memcpy(e.encap.src_mac, smac, 6);
		memcpy(e.encap.dst_mac, vx[i].dmac, 6);
		/* IPv4 addresses IPv4-mapped, as action values */
		e.encap.src[10] = e.encap.src[11] = 0xff;
		e.encap.dst[10] = e.encap.dst[11] = 0xff;
		put32(e.encap.src + 12, vx[i].src);
		put32(e.encap.dst + 12, vx[i].dst);
		e.encap.ttl = 64;
		e.encap.id = vx[i].vni;
		entry_new(ctx, pipe, &e);
	}
	for (unsigned i = 0; i < 2; i++) {
		struct pspec s = sized((uint16_t)(1 + i), (uint16_t)(90 + i));

		inner_len[i] = build_frame(inner[i], &s);
		idx[i] = mk(pool, &s);
	}
	send_burst(ctx, idx, 2);
	{
		uint32_t out[4];
		unsigned k = take(ctx, OUT(0), out, 4);

		cr_assert_eq(k, 2);
		for (unsigned i = 0; i < 2; i++) {
			const struct dpflow_pkt_meta *m =
			    dpflow_pool_meta(pool, out[i]);
			unsigned which = out[i] == idx[0] ? 0 : 1;

			check_vxlan(dpflow_pkt_data(pool, out[i]), m->data_len,
				    &vx[which], inner[which], inner_len[which]);
		}
		dpflow_pool_free_bulk(pool, out, k);
	}
	expect_pool_whole(ctx);
	dpflow_ctx_destroy(ctx);
}

/* ---- 13. bad input: clear errors, nothing changed ---------------------------
 */

static void expect_pipe_refused(struct dpflow_ctx *ctx,
				const struct dpflow_pipe_cfg *c,
				const char *field, const char *what)
{
	struct dpflow_error err;
	unsigned before = dpflow_ctx_pipe_count(ctx);

	memset(&err, 0, sizeof(err));
	cr_expect_null(dpflow_pipe_create(ctx, c, &err), "%s: created", what);
	cr_expect_neq(err.code, 0, "%s: no error code", what);
	cr_expect(err.field && !strcmp(err.field, field),
		  "%s: field '%s', expected '%s' (%s)", what,
		  err.field ? err.field : "(null)", field, err.msg);
	cr_expect_gt(strlen(err.msg), 10, "%s: message", what);
	cr_expect_eq(dpflow_ctx_pipe_count(ctx), before, "%s: pipe added",
		     what);
	cr_expect_null(dpflow_pipe_find(ctx, c->name), "%s", what);
}

static void expect_entry_refused(struct dpflow_ctx *ctx,
				 struct dpflow_pipe *pipe,
				 const struct dpflow_entry_cfg *e,
				 const char *field, const char *what)
{
	struct dpflow_error err;
	struct dpflow_queue *q = dpflow_queue_create(ctx, &err);
	unsigned before = dpflow_pipe_entry_count(pipe);

	memset(&err, 0, sizeof(err));
	cr_assert_not_null(dpflow_entry_add(q, pipe, e, NULL, &err));
	cr_expect_lt(dpflow_entries_process(q, NULL, &err), 0, "%s: applied",
		     what);
	cr_expect(err.field && !strcmp(err.field, field),
		  "%s: field '%s', expected '%s' (%s)", what,
		  err.field ? err.field : "(null)", field, err.msg);
	cr_expect_eq(dpflow_pipe_entry_count(pipe), before, "%s", what);
	dpflow_queue_destroy(q);
}

Test(flow_config, bad_feature_configs_fail_clearly)
{
	struct dpflow_ctx_params cp = {
	    .rss_queues = 4, .shared_counters = 2, .shared_meters = 2};
	struct dpflow_ctx *ctx = ctx_new(&cp, 1);
	struct dpflow_pipe_cfg c, base = pipe_cfg("bad", DPFLOW_PIPE_BASIC, 8);
	struct dpflow_pipe *ok, *hash, *ct, *lpm;
	struct dpflow_entry_cfg e;
	struct dpflow_meter_cfg mc;
	struct dpflow_error err = {0};

	base.root = false;
	match_add(&base, DPFLOW_FIELD_OUTER_L4_DPORT, true, 0);
	base.fwd = fwd_port(OUT(0));

	c = base;
	c.fwd.kind = DPFLOW_FWD_RSS;
	c.fwd.rss_queue = 2;
	c.fwd.rss_n = 4;
	expect_pipe_refused(ctx, &c, "fwd", "rss queues beyond the context");
	c.fwd.rss_queue = 0;
	c.fwd.rss_n = 0;
	expect_pipe_refused(ctx, &c, "fwd", "rss over no queue");
	c = base;
	c.miss_fwd.kind = DPFLOW_FWD_RSS;
	c.miss_fwd.rss_queue = 4;
	c.miss_fwd.rss_n = 1;
	expect_pipe_refused(ctx, &c, "miss_fwd", "rss miss beyond the context");

	c = base;
	c.color_fwd.red_set = true;
	c.color_fwd.red = fwd_port(OUT(0));
	expect_pipe_refused(ctx, &c, "color_fwd",
			    "colour forwarding, no meter");
	c.monitor.meter.alg = DPFLOW_METER_ALG_SRTCM;
	c.color_fwd.red = fwd_port(9);
	expect_pipe_refused(ctx, &c, "color_fwd.red", "red to a missing port");

	c = base;
	c.monitor.meter = (struct dpflow_meter_cfg){
	    .alg = DPFLOW_METER_ALG_TRTCM, .cir = 2000, .pir = 1000};
	expect_pipe_refused(ctx, &c, "meter", "trtcm pir < cir");
	c.monitor.meter.alg = 7;
	expect_pipe_refused(ctx, &c, "meter", "unknown meter algorithm");
	c = base;
	c.monitor.meter.alg = DPFLOW_METER_ALG_SRTCM;
	c.monitor.shared_meter = 1;
	expect_pipe_refused(ctx, &c, "meter", "own and shared meter");
	c = base;
	c.monitor.shared_meter = 3;
	expect_pipe_refused(ctx, &c, "shared_meter", "unknown shared meter");
	c = base;
	c.monitor.shared_counter = 3;
	expect_pipe_refused(ctx, &c, "shared_counter",
			    "unknown shared counter");

	/* CT pipes */
	c = pipe_cfg("badct", DPFLOW_PIPE_CT, 8);
	c.fwd = fwd_port(OUT(0));
	match_add(&c, DPFLOW_FIELD_OUTER_IP_PROTO, true, 0);
	expect_pipe_refused(ctx, &c, "match", "ct match with per-entry field");
	c.match.n = 0;
	c.ct.user = true;
	c.ct.user_reg = 4;
	expect_pipe_refused(ctx, &c, "ct.user_reg", "ct user register 4");
	c.ct.user = false;
	c.ct.timeout_ms[0] = 5;
	expect_pipe_refused(ctx, &c, "ct.timeouts", "ct timeout of state 0");
	c.ct.timeout_ms[0] = 0;
	c.monitor.aging_ms = 10;
	expect_pipe_refused(ctx, &c, "monitor", "ct pipe with aging");
	c.monitor.aging_ms = 0;
	c.fwd.kind = DPFLOW_FWD_PER_ENTRY;
	expect_pipe_refused(ctx, &c, "fwd", "ct pipe forwarding per entry");

	/* LPM */
	c = pipe_cfg("badlpm", DPFLOW_PIPE_LPM, 8);
	c.fwd = fwd_port(OUT(0));
	/* exact fields + IPv6: keys up to 24 bytes (two registers) */
	match_add(&c, DPFLOW_FIELD_META_REG0, true, 0);
	match_add(&c, DPFLOW_FIELD_META_REG1, true, 0);
	match_add(&c, DPFLOW_FIELD_OUTER_IPV6_DST, true, 0);
	c.name = "lpm24";
	pipe_new(ctx, &c);
	c.name = "badlpm";
	c.match.n = 0;
	match_add(&c, DPFLOW_FIELD_META_REG0, true, 0);
	match_add(&c, DPFLOW_FIELD_META_REG1, true, 0);
	match_add(&c, DPFLOW_FIELD_META_REG2, true, 0);
	match_add(&c, DPFLOW_FIELD_OUTER_IPV6_DST, true, 0);
	expect_pipe_refused(ctx, &c, "match", "lpm key of 28 bytes");
	{
		struct dpflow_error lerr;

		memset(&lerr, 0, sizeof(lerr));
		cr_expect_null(dpflow_pipe_create(ctx, &c, &lerr));
		cr_expect(strstr(lerr.msg, "28 bytes") &&
			      strstr(lerr.msg, "at most 24"),
			  "lpm key of 28 bytes: message '%s'", lerr.msg);
	}
	c.match.n = 0;
	match_add(&c, DPFLOW_FIELD_OUTER_IPV4_DST, true, 0);
	match_add(&c, DPFLOW_FIELD_OUTER_VLAN0, true, 0);
	expect_pipe_refused(ctx, &c, "match", "lpm address not last");

	/* entries */
	ok = pipe_new(ctx, &base);
	e = entry_cfg();
	put16(e.key, 1);
	e.shared_counter = 3;
	expect_entry_refused(ctx, ok, &e, "shared_counter",
			     "entry with unknown shared counter");
	e.shared_counter = 0;
	e.meter.alg = DPFLOW_METER_ALG_SRTCM;
	expect_entry_refused(ctx, ok, &e, "meter",
			     "entry meter, pipe has none");
	e.meter.alg = 0;
	e.aging_ms = 10;
	expect_entry_refused(ctx, ok, &e, "aging",
			     "entry aging, pipe has none");

	c = pipe_cfg("hh", DPFLOW_PIPE_HASH, 8);
	match_add(&c, DPFLOW_FIELD_OUTER_L4_DPORT, true, 0);
	c.fwd = fwd_port(OUT(0));
	c.monitor.meter.alg = DPFLOW_METER_ALG_SRTCM;
	hash = pipe_new(ctx, &c);
	e = entry_cfg();
	e.hash_index = 8;
	expect_entry_refused(ctx, hash, &e, "hash_index", "hash_index >= size");
	e.hash_index = 7;
	e.meter = (struct dpflow_meter_cfg){
	    .alg = DPFLOW_METER_ALG_TRTCM, .cir = 5, .pir = 4};
	expect_entry_refused(ctx, hash, &e, "meter", "entry trtcm pir < cir");

	c = pipe_cfg("cc", DPFLOW_PIPE_CT, 8);
	c.fwd = fwd_port(OUT(0));
	ct = pipe_new(ctx, &c);
	e = entry_cfg();
	expect_entry_refused(ctx, ct, &e, "pipe", "entry on a ct pipe");

	c = pipe_cfg("ll", DPFLOW_PIPE_LPM, 8);
	match_add(&c, DPFLOW_FIELD_OUTER_IPV4_DST, true, 0);
	c.fwd = fwd_port(OUT(0));
	lpm = pipe_new(ctx, &c);
	e = entry_cfg();
	e.prefix_len = 33;
	expect_entry_refused(ctx, lpm, &e, "prefix", "prefix /33");

	/* shared meters */
	mc = (struct dpflow_meter_cfg){.alg = DPFLOW_METER_ALG_SRTCM,
				       .cbs = 100};
	cr_expect_eq(dpflow_shared_meter_config(ctx, 0, &mc, &err), -EINVAL);
	cr_expect_str_eq(err.field, "shared_meter");
	cr_expect_eq(dpflow_shared_meter_config(ctx, 3, &mc, &err), -EINVAL);
	cr_expect_str_eq(err.field, "shared_meter");
	mc = (struct dpflow_meter_cfg){
	    .alg = DPFLOW_METER_ALG_TRTCM, .cir = 10, .pir = 5};
	cr_expect_eq(dpflow_shared_meter_config(ctx, 1, &mc, &err), -EINVAL);
	cr_expect_str_eq(err.field, "meter");

	/* contexts */
	{
		struct dpflow_ctx_params bad = {.rss_queues = 65};

		memset(&err, 0, sizeof(err));
		cr_expect_null(dpflow_ctx_create(&bad, &err));
		cr_expect_str_eq(err.field, "rss_queues");
	}
	dpflow_ctx_destroy(ctx);
}

/* A shared counter on a CT pipe is accepted; it must then count. */
Test(flow_config, ct_pipe_shared_counter_counts_or_is_refused)
{
	struct dpflow_ctx_params cp = {.shared_counters = 1};
	struct dpflow_ctx *ctx = ctx_new(&cp, 2);
	struct dpflow_pipe_cfg c = pipe_cfg("ct", DPFLOW_PIPE_CT, 8);
	struct dpflow_error err = {0};
	struct dpflow_pipe *ct;
	struct dpflow_counter ctr;
	struct pspec u = p4(17, 0x0a000001, 5000, 0x0a000002, 53);

	c.root = true;
	c.fwd = fwd_port(OUT(0));
	c.miss_fwd = fwd_port(OUT(1));
	c.monitor.shared_counter = 1;
	ct = dpflow_pipe_create(ctx, &c, &err);
	if (!ct) { /* refusing it is fine too */
		cr_expect_str_eq(err.field, "monitor");
		dpflow_ctx_destroy(ctx);
		return;
	}
	send1(ctx, &u);
	cr_expect_eq(count_out(ctx, OUT(0)), 1);
	dpflow_shared_counter_read(ctx, 1, &ctr);
	cr_expect_eq(ctr.pkts, 1,
		     "ct pipe accepted monitor.shared_counter "
		     "but did not count");
	dpflow_ctx_destroy(ctx);
}

/* ---- more edges ------------------------------------------------------------
 */

/* An entry queued for an update when the aging scan runs, in a batch that
 * then fails, keeps aging. */
Test(flow_monitor, aging_survives_a_failed_update_batch)
{
	struct dpflow_ctx *ctx = ctx_new(NULL, 2);
	struct dpflow_pipe_cfg c = pipe_cfg("ag", DPFLOW_PIPE_BASIC, 8);
	struct dpflow_pipe *pipe;
	struct dpflow_error err = {0};
	struct dpflow_queue *q = dpflow_queue_create(ctx, &err);
	struct dpflow_entry *h, *other;
	struct dpflow_entry_cfg e;
	struct aged_log log;

	c.root = true;
	match_add(&c, DPFLOW_FIELD_OUTER_L4_DPORT, true, 0);
	c.monitor.aging_ms = 30;
	c.fwd = fwd_port(OUT(0));
	pipe = pipe_new(ctx, &c);
	e = entry_cfg();
	put16(e.key, 1);
	h = entry_new(ctx, pipe, &e);
	e = entry_cfg();
	put16(e.key, 2);
	e.aging_ms = 600000;
	other = entry_new(ctx, pipe, &e);
	sleep_ms(80);

	/* queue an update of h, scan, then fail the batch (duplicate key) */
	e = entry_cfg();
	put16(e.key, 1);
	cr_assert_not_null(dpflow_entry_update(q, h, &e, NULL, &err));
	memset(&log, 0, sizeof(log));
	cr_expect_eq(dpflow_pipe_age(pipe, dpflow_clock_ns(), 0, on_aged, &log),
		     0, "an entry being updated is not reported");
	e = entry_cfg();
	put16(e.key, 2);
	cr_assert_not_null(dpflow_entry_add(q, pipe, &e, NULL, &err));
	cr_expect_eq(dpflow_entries_process(q, NULL, &err), -EEXIST);
	/* h is active again and idle: the next scan must report it */
	cr_expect_eq(dpflow_pipe_age(pipe, dpflow_clock_ns(), 0, on_aged, &log),
		     1, "the entry lost its aging with the failed batch");
	cr_expect_eq(log.n, 1);
	cr_expect_eq(log.e[0], h);
	(void)other;
	dpflow_queue_destroy(q);
	dpflow_ctx_destroy(ctx);
}

/* An updated entry ages from its update; the old one is never reported. */
Test(flow_monitor, aging_follows_the_updated_entry)
{
	struct dpflow_ctx *ctx = ctx_new(NULL, 2);
	struct dpflow_pipe_cfg c = pipe_cfg("ag", DPFLOW_PIPE_BASIC, 8);
	struct dpflow_pipe *pipe;
	struct dpflow_error err = {0};
	struct dpflow_queue *q = dpflow_queue_create(ctx, &err);
	struct dpflow_entry *h, *h2;
	struct dpflow_entry_cfg e = entry_cfg();
	struct aged_log log;

	c.root = true;
	match_add(&c, DPFLOW_FIELD_OUTER_L4_DPORT, true, 0);
	c.monitor.aging_ms = 60;
	c.fwd = fwd_port(OUT(0));
	pipe = pipe_new(ctx, &c);
	put16(e.key, 1);
	h = entry_new(ctx, pipe, &e);
	sleep_ms(100);
	e.aging_ms = 600000; /* the new entry: a long timeout */
	h2 = dpflow_entry_update(q, h, &e, NULL, &err);
	cr_assert_not_null(h2);
	cr_assert_eq(dpflow_entries_process(q, NULL, &err), 0, "%s", err.msg);
	memset(&log, 0, sizeof(log));
	cr_expect_eq(dpflow_pipe_age(pipe, dpflow_clock_ns(), 0, on_aged, &log),
		     0, "neither the old nor the new entry ages");
	dpflow_queue_destroy(q);
	dpflow_ctx_destroy(ctx);
}

/* evict: a full table takes over an expired connection. */
Test(flow_ct, evict_reuses_expired_connections)
{
	for (int evict = 0; evict < 2; evict++) {
		struct dpflow_ct_cfg cc = {.evict = evict != 0};
		struct ct_fx f;
		struct pspec u = p4(17, 0x0a000001, 5000, 0x0a000002, 53);
		struct dpflow_pipe_stats st;

		cc.timeout_ms[ST_UDP_UNREPLIED] = 30;
		f = ct_setup(&cc, 2, false);
		obs_route(&f, ST_UDP_UNREPLIED, DPFLOW_META_CT_NEW, OUT(0));
		ct_send(&f, &u, OUT(0), "first");
		u.sport = 5001;
		ct_send(&f, &u, OUT(0), "second");
		sleep_ms(80);
		u.sport = 5002;
		ct_send(&f, &u, evict ? OUT(0) : OUT(7),
			evict ? "third, evicting" : "third, full");
		dpflow_pipe_stats_get(f.ct, &st);
		cr_expect_eq(st.ct_created, evict ? 3 : 2, "evict %d", evict);
		dpflow_ctx_destroy(f.ctx);
	}
}

/* The CT pipe's action template runs on every tracked packet only. */
Test(flow_ct, action_template_runs_on_tracked_packets)
{
	struct dpflow_ctx *ctx = ctx_new(NULL, 2);
	struct dpflow_pool *pool = dpflow_ctx_pool(ctx);
	struct dpflow_pipe_cfg c = pipe_cfg("ct", DPFLOW_PIPE_CT, 16);
	struct pspec u = p4(17, 0x0a000001, 5000, 0x0a000002, 53), arp;
	uint32_t idx[4];

	c.root = true;
	c.n_action_tmpls = 1;
	c.actions[0].n = 1;
	c.actions[0].a[0] = act_set_reg(2, false, 0x5151);
	c.fwd = fwd_port(OUT(0));
	c.miss_fwd = fwd_port(OUT(1));
	pipe_new(ctx, &c);
	send1(ctx, &u);
	memset(&arp, 0, sizeof(arp));
	arp.arp = true;
	send1(ctx, &arp);
	cr_assert_eq(take(ctx, OUT(0), idx, 4), 1);
	cr_expect_eq(dpflow_pool_meta(pool, idx[0])->reg[2], 0x5151);
	cr_expect_eq(dpflow_pool_meta(pool, idx[0])->ct_state,
		     ST_UDP_UNREPLIED);
	dpflow_pool_free_bulk(pool, idx, 1);
	cr_assert_eq(take(ctx, OUT(1), idx, 4), 1);
	cr_expect_eq(dpflow_pool_meta(pool, idx[0])->reg[2], 0);
	dpflow_pool_free_bulk(pool, idx, 1);
	dpflow_ctx_destroy(ctx);
}

/* RFC 2697 colour-aware, rates 0. */
static uint8_t ref_srtcm_aware(uint64_t *tc, uint64_t *te, uint32_t len,
			       uint8_t in)
{
	if (in == DPFLOW_COLOR_GREEN && *tc >= len) {
		*tc -= len;
		return DPFLOW_COLOR_GREEN;
	}
	if (in != DPFLOW_COLOR_RED && *te >= len) {
		*te -= len;
		return DPFLOW_COLOR_YELLOW;
	}
	return DPFLOW_COLOR_RED;
}

/* A colour-blind meter, then a colour-aware one that sees its colours. */
Test(flow_meter, colour_aware_meter_after_a_blind_one)
{
	struct dpflow_ctx *ctx = ctx_new(NULL, 1);
	struct dpflow_pool *pool = dpflow_ctx_pool(ctx);
	struct dpflow_pipe_cfg c = pipe_cfg("aware", DPFLOW_PIPE_BASIC, 8);
	struct dpflow_pipe *aware, *blind;
	struct dpflow_entry_cfg e = entry_cfg();
	uint8_t first[20], want[20];
	uint64_t tc = 300, te = 600;
	uint32_t idx[20], out[32];
	unsigned k;

	/* blind: cbs 500, ebs 1000: 5 green, 10 yellow, 5 red */
	ref_srtcm(500, 1000, lens100, 20, first);
	for (unsigned i = 0; i < 20; i++)
		want[i] = ref_srtcm_aware(&tc, &te, 100, first[i]);

	match_add(&c, DPFLOW_FIELD_OUTER_L4_DPORT, true, 0);
	c.monitor.meter =
	    (struct dpflow_meter_cfg){.alg = DPFLOW_METER_ALG_SRTCM,
				      .color_aware = true,
				      .cbs = 300,
				      .ebs = 600};
	c.fwd = fwd_port(OUT(0));
	c.color_fwd.red_set = true;
	c.color_fwd.red = fwd_port(OUT(0));
	aware = pipe_new(ctx, &c);
	c = pipe_cfg("blind", DPFLOW_PIPE_BASIC, 8);
	c.root = true;
	match_add(&c, DPFLOW_FIELD_OUTER_L4_DPORT, true, 0);
	c.monitor.meter = (struct dpflow_meter_cfg){
	    .alg = DPFLOW_METER_ALG_SRTCM, .cbs = 500, .ebs = 1000};
	c.fwd = fwd_pipe(aware);
	c.color_fwd.red_set = true;
	c.color_fwd.red = fwd_pipe(aware);
	blind = pipe_new(ctx, &c);
	put16(e.key, 9);
	entry_new(ctx, blind, &e);
	entry_new(ctx, aware, &e);
	for (unsigned i = 0; i < 20; i++)
		idx[i] = mk(pool, (struct pspec[]){sized(9, 100)});
	send_burst(ctx, idx, 20);
	k = take(ctx, OUT(0), out, 32);
	cr_assert_eq(k, 20);
	for (unsigned i = 0; i < 20; i++) {
		cr_expect_eq(out[i], idx[i]);
		cr_expect_eq(dpflow_pool_meta(pool, out[i])->color, want[i],
			     "packet %u: in %u, out %u, RFC 2697 aware %u", i,
			     first[i], dpflow_pool_meta(pool, out[i])->color,
			     want[i]);
	}
	dpflow_pool_free_bulk(pool, out, k);
	dpflow_ctx_destroy(ctx);
}

/* An update that moves an entry onto a taken slot changes nothing. */
Test(flow_hash, update_onto_a_taken_slot_is_refused)
{
	struct dpflow_ctx *ctx = ctx_new(NULL, 2);
	struct dpflow_pipe_cfg c = pipe_cfg("h", DPFLOW_PIPE_HASH, 8);
	struct dpflow_pipe *pipe;
	struct dpflow_error err = {0};
	struct dpflow_queue *q = dpflow_queue_create(ctx, &err);
	struct dpflow_entry_cfg e = entry_cfg();
	struct dpflow_entry *a;
	uint8_t key[2];
	uint32_t slot_a, slot_b = 0;
	uint16_t sport_b = 0;

	c.root = true;
	match_add(&c, DPFLOW_FIELD_OUTER_L4_SPORT, true, 0);
	c.fwd.kind = DPFLOW_FWD_PER_ENTRY;
	c.miss_fwd = fwd_port(OUT(1));
	pipe = pipe_new(ctx, &c);
	put16(key, 1000);
	slot_a = ref_murmur3(key, 2, 0) % 8;
	for (uint16_t sp = 1001; sp < 2000; sp++) {
		put16(key, sp);
		slot_b = ref_murmur3(key, 2, 0) % 8;
		if (slot_b != slot_a) {
			sport_b = sp;
			break;
		}
	}
	e.hash_index = slot_a;
	e.fwd = fwd_port(OUT(0));
	a = entry_new(ctx, pipe, &e);
	e.hash_index = slot_b;
	entry_new(ctx, pipe, &e);
	e.hash_index = slot_b; /* a onto b's slot */
	cr_assert_not_null(dpflow_entry_update(q, a, &e, NULL, &err));
	cr_expect_eq(dpflow_entries_process(q, NULL, &err), -EEXIST);
	cr_expect_str_eq(err.field, "hash_index");
	cr_expect_eq(dpflow_pipe_entry_count(pipe), 2);
	send1(ctx, (struct pspec[]){p4(17, 1, 1000, 2, 53)});
	send1(ctx, (struct pspec[]){p4(17, 1, sport_b, 2, 53)});
	cr_expect_eq(count_out(ctx, OUT(0)), 2, "both slots still taken");
	cr_expect_eq(count_out(ctx, OUT(1)), 0);
	dpflow_queue_destroy(q);
	expect_pool_whole(ctx);
	dpflow_ctx_destroy(ctx);
}

Test(flow_config, rss_queue_size_must_be_a_power_of_two)
{
	struct dpflow_ctx_params cp = {.rss_queues = 2, .rss_queue_size = 100};
	struct dpflow_error err = {0};

	cr_expect_null(dpflow_ctx_create(&cp, &err));
	cr_expect_neq(err.code, 0);
	cr_expect(strstr(err.msg, "100") != NULL, "'%s' names the size",
		  err.msg);
}

/* IPv6 outer headers of a per-entry encapsulation, UDP checksum included. */
Test(flow_encap, per_entry_vxlan_over_ipv6)
{
	struct dpflow_ctx *ctx = ctx_new(NULL, 2);
	struct dpflow_pool *pool = dpflow_ctx_pool(ctx);
	struct dpflow_pipe_cfg c = pipe_cfg("enc6", DPFLOW_PIPE_BASIC, 8);
	struct dpflow_pipe *pipe;
	struct dpflow_entry_cfg e = entry_cfg();
	struct pspec s = sized(7, 120);
	uint8_t inner[256], src[16], dst[16];
	unsigned inner_len = build_frame(inner, &s);
	uint32_t idx, out[2];

	for (unsigned b = 0; b < 16; b++) {
		src[b] = (uint8_t)(0x20 + b);
		dst[b] = (uint8_t)(0xf0 - b);
	}
	c.root = true;
	match_add(&c, DPFLOW_FIELD_OUTER_L4_DPORT, true, 0);
	c.n_action_tmpls = 1;
	c.actions[0].n = 1;
	c.actions[0].a[0].kind = DPFLOW_ACT_ENCAP;
	c.actions[0].a[0].per_entry = true;
	c.fwd = fwd_port(OUT(0));
	pipe = pipe_new(ctx, &c);
	put16(e.key, 7);
	e.encap.tun_type = DPFLOW_TUN_VXLAN;
	e.encap.ipv6 = 1;
	memcpy(e.encap.src, src, 16);
	memcpy(e.encap.dst, dst, 16);
	e.encap.dst_mac[0] = 0x02;
	e.encap.ttl = 17;
	e.encap.id = 0xabcdef;
	entry_new(ctx, pipe, &e);
	idx = mk(pool, &s);
	send_burst(ctx, &idx, 1);
	cr_assert_eq(take(ctx, OUT(0), out, 2), 1);
	{
		const uint8_t *f = dpflow_pkt_data(pool, out[0]);
		const uint8_t *ip = f + 14, *udp = ip + 40, *vxh = udp + 8;
		unsigned ulen = 8 + 8 + inner_len;
		uint8_t pseudo[40];
		uint32_t sum;

		cr_assert_eq(dpflow_pool_meta(pool, out[0])->data_len,
			     14 + 40 + ulen);
		cr_expect_eq(get16(f + 12), 0x86dd);
		cr_expect_eq(ip[0] >> 4, 6);
		cr_expect_eq(get16(ip + 4), ulen, "payload length");
		cr_expect_eq(ip[6], 17);
		cr_expect_eq(ip[7], 17, "hop limit");
		cr_expect_eq(memcmp(ip + 8, src, 16), 0);
		cr_expect_eq(memcmp(ip + 24, dst, 16), 0);
		cr_expect_eq(get16(udp + 2), 4789);
		cr_expect_eq(get16(udp + 4), ulen);
		cr_expect_eq(get32(vxh + 4) >> 8, 0xabcdefu);
		cr_expect_eq(memcmp(vxh + 8, inner, inner_len), 0);
		/* RFC 8200 §8.1: pseudo-header, then the UDP datagram */
		memcpy(pseudo, ip + 8, 32);
		put32(pseudo + 32, ulen);
		put32(pseudo + 36, 17);
		sum = (uint32_t)ones_sum(pseudo, 40) + ones_sum(udp, ulen);
		sum = (sum & 0xffff) + (sum >> 16);
		cr_expect_neq(get16(udp + 6), 0, "IPv6 UDP needs a checksum");
		cr_expect_eq(sum, 0xffff, "UDP checksum %#x wrong",
			     get16(udp + 6));
	}
	dpflow_pool_free_bulk(pool, out, 1);
	dpflow_ctx_destroy(ctx);
}

/* A VXLAN packet: outer 10.9.0.1:@osport -> 10.9.0.2:4789, inner @in. */
static uint32_t mk_vxlan(struct dpflow_pool *pool, const struct pspec *in,
			 uint16_t osport, bool outer_reversed)
{
	struct dpflow_gen_spec s;
	uint32_t idx;

	memset(&s, 0, sizeof(s));
	s.has_eth = true;
	s.tun_type = DPFLOW_TUN_VXLAN;
	s.tun_id = 42;
	s.outer.l3_type = DPFLOW_L3_IPV4;
	s.outer.l4_type = DPFLOW_L4_UDP;
	v4(s.outer.src, outer_reversed ? 0x0a090002 : 0x0a090001);
	v4(s.outer.dst, outer_reversed ? 0x0a090001 : 0x0a090002);
	s.outer.sport = osport;
	s.outer.ttl = 64;
	memset(s.outer.ipv6_ext, 0xff, sizeof(s.outer.ipv6_ext));
	s.inner.l3_type = in->v6 ? DPFLOW_L3_IPV6 : DPFLOW_L3_IPV4;
	s.inner.l4_type = in->proto == 6 ? DPFLOW_L4_TCP : DPFLOW_L4_UDP;
	memcpy(s.inner.src, in->src, 16);
	memcpy(s.inner.dst, in->dst, 16);
	s.inner.sport = in->sport;
	s.inner.dport = in->dport;
	s.inner.tcp_flags = in->tcp_flags;
	s.inner.ttl = 64;
	memset(s.inner.ipv6_ext, 0xff, sizeof(s.inner.ipv6_ext));
	cr_assert_eq(dpflow_pool_alloc_bulk(pool, &idx, 1), 0);
	dpflow_pool_meta(pool, idx)->data_len =
	    (uint16_t)dpflow_gen_build(&s, dpflow_pkt_data(pool, idx), 2048);
	cr_assert_gt(dpflow_pool_meta(pool, idx)->data_len, 0);
	return idx;
}

Test(flow_rss, inner_headers_of_a_tunnel)
{
	struct dpflow_ctx_params cp = {.rss_queues = 16};
	struct dpflow_ctx *ctx = ctx_new(&cp, 1);
	struct dpflow_pool *pool = dpflow_ctx_pool(ctx);
	struct dpflow_pipe_cfg c = pipe_cfg("r", DPFLOW_PIPE_BASIC, 8);
	struct dpflow_pipe *pipe;
	struct dpflow_entry_cfg e = entry_cfg();

	c.root = true;
	match_add(&c, DPFLOW_FIELD_TUN_ID, true, 0);
	c.fwd.kind = DPFLOW_FWD_PER_ENTRY;
	pipe = pipe_new(ctx, &c);
	put32(e.key, 42);
	e.fwd.kind = DPFLOW_FWD_RSS;
	e.fwd.rss_n = 16;
	e.fwd.rss_inner = true;
	entry_new(ctx, pipe, &e);
	init_sym_key();
	rng_seed(12);
	for (unsigned i = 0; i < 200; i++) {
		struct pspec in = random_flow(), outer;
		uint32_t idx, h, got[2];
		uint16_t osport = (uint16_t)(1 + rnd() % 4000);

		if (in.proto == 50)
			in.proto = 17;
		idx = mk_vxlan(pool, &in, osport, false);
		dpflow_parse_burst(pool, &idx, 1);
		cr_assert_eq(dpflow_pool_meta(pool, idx)->tun_type,
			     DPFLOW_TUN_VXLAN);
		h = ref_rss(sym_key, &in);
		cr_assert_eq(dpflow_rss_hash(pool, idx, true), h, "inner");
		outer = p4(17, 0x0a090001, osport, 0x0a090002, 4789);
		cr_assert_eq(dpflow_rss_hash(pool, idx, false),
			     ref_rss(sym_key, &outer), "outer");
		send_burst(ctx, &idx, 1);
		cr_assert_eq(
		    dpflow_ctx_rss_rx(ctx, rss_queue_of(h, 0, 16), got, 2), 1,
		    "on the inner flow's queue %u", rss_queue_of(h, 0, 16));
		dpflow_pool_free_bulk(pool, got, 1);
	}
	expect_pool_whole(ctx);
	dpflow_ctx_destroy(ctx);
}

/* ct.inner: the connection of the inner 5-tuple, whatever the outer. */
Test(flow_ct, inner_connection_of_tunnelled_packets)
{
	struct dpflow_ct_cfg cc = {.inner = true, .tcp_strict = true};
	struct ct_fx f = ct_setup(&cc, 64, false);
	struct dpflow_pool *pool = dpflow_ctx_pool(f.ctx);
	struct pspec syn = p4(6, 0xc0a80001, 33000, 0xc0a80002, 443), synack;
	uint32_t idx, out[2];

	obs_route(&f, ST_SYN_SENT, DPFLOW_META_CT_NEW, OUT(0));
	obs_route(&f, ST_SYN_RECV, DPFLOW_META_CT_REPLY, OUT(1));
	syn.tcp_flags = TCP_SYN;
	synack = reversed(&syn);
	synack.tcp_flags = TCP_SYN | TCP_ACK;
	idx = mk_vxlan(pool, &syn, 1111, false);
	send_burst(f.ctx, &idx, 1);
	cr_expect_eq(take(f.ctx, OUT(0), out, 2), 1, "inner SYN");
	dpflow_pool_free_bulk(pool, out, 1);
	/* the reply through another outer path and source port */
	idx = mk_vxlan(pool, &synack, 2222, true);
	send_burst(f.ctx, &idx, 1);
	cr_expect_eq(take(f.ctx, OUT(1), out, 2), 1, "inner SYN-ACK");
	dpflow_pool_free_bulk(pool, out, 1);
	dpflow_ctx_destroy(f.ctx);
}

/* Updates under traffic on HASH and LPM (VRF) pipes: never a miss. */

struct upd_any {
	struct dpflow_ctx *ctx;
	volatile int stop;
	volatile unsigned bursts;
	unsigned bad;
	uint64_t sent;
	struct pspec s;
};

static void *update_worker_any(void *arg)
{
	struct upd_any *w = (struct upd_any *)arg;
	struct dpflow_pool *pool = dpflow_ctx_pool(w->ctx);

	dpflow_ctx_thread_online(w->ctx);
	while (!w->stop) {
		uint32_t idx[UPD_BURST], out[UPD_BURST];
		unsigned got = 0;

		for (unsigned i = 0; i < UPD_BURST; i++)
			idx[i] = mk(pool, &w->s);
		dpflow_ctx_process_burst(w->ctx, 0, idx, UPD_BURST);
		w->sent += UPD_BURST;
		for (unsigned p = 0; p < 2; p++) {
			unsigned k = take(w->ctx, OUT(p), out, UPD_BURST);

			got += k;
			dpflow_pool_free_bulk(pool, out, k);
		}
		w->bad += got != UPD_BURST;
		w->bursts++;
		dpflow_ctx_quiescent(w->ctx);
	}
	dpflow_ctx_thread_offline(w->ctx);
	return NULL;
}

Test(flow_update, hash_and_lpm_updates_under_traffic, .timeout = 60)
{
	for (int kind = 0; kind < 2; kind++) {
		struct upd_any w;
		struct dpflow_pipe_cfg c =
		    pipe_cfg("u", kind ? DPFLOW_PIPE_LPM : DPFLOW_PIPE_HASH, 8);
		struct dpflow_pipe *pipe;
		struct dpflow_error err = {0};
		struct dpflow_queue *q;
		struct dpflow_entry *h;
		struct dpflow_entry_cfg e = entry_cfg();
		struct dpflow_counter ctr;
		uint8_t key[2];
		pthread_t t;

		memset(&w, 0, sizeof(w));
		w.ctx = ctx_new(NULL, 3);
		w.s = p4(17, 0x0a000001, 1000, 0x0a010203, 53);
		w.s.vlan = 12;
		c.root = true;
		if (kind) {
			match_add(&c, DPFLOW_FIELD_OUTER_VLAN0, true, 0);
			match_add(&c, DPFLOW_FIELD_OUTER_IPV4_DST, true, 0);
			put16(e.key, 12);
			put32(e.key + 2, 0x0a000000);
			e.prefix_len = 8;
		} else {
			match_add(&c, DPFLOW_FIELD_OUTER_L4_SPORT, true, 0);
			put16(key, 1000);
			e.hash_index = ref_murmur3(key, 2, 0) % 8;
		}
		c.monitor.counter = true;
		c.fwd.kind = DPFLOW_FWD_PER_ENTRY;
		c.miss_fwd = fwd_port(OUT(2));
		pipe = pipe_new(w.ctx, &c);
		e.fwd = fwd_port(OUT(0));
		h = entry_new(w.ctx, pipe, &e);
		q = dpflow_queue_create(w.ctx, &err);
		cr_assert_eq(pthread_create(&t, NULL, update_worker_any, &w),
			     0);
		while (w.bursts < 2)
			sched_yield();
		for (unsigned i = 0; i < 150; i++) {
			unsigned seen = w.bursts;

			e.fwd = fwd_port(OUT((i + 1) % 2));
			h = dpflow_entry_update(q, h, &e, NULL, &err);
			cr_assert_not_null(h, "%s", err.msg);
			cr_assert_eq(dpflow_entries_process(q, NULL, &err), 0,
				     "%s", err.msg);
			while (i % 4 == 0 && w.bursts == seen)
				sched_yield();
		}
		w.stop = 1;
		pthread_join(t, NULL);
		cr_expect_eq(w.bad, 0, "%s: %u of %u bursts lost packets",
			     kind ? "lpm" : "hash", w.bad, w.bursts);
		cr_expect_eq(count_out(w.ctx, OUT(2)), 0, "no packet missed");
		dpflow_entry_counter(h, &ctr);
		cr_expect_eq(ctr.pkts, w.sent);
		dpflow_queue_destroy(q);
		expect_pool_whole(w.ctx);
		dpflow_ctx_destroy(w.ctx);
	}
}

/* Template masks apply to an LPM pipe's exact fields as to a BASIC
 * pipe's: entry 0x123 under mask 0x0ff0 matches VLAN 0x125. */
Test(flow_lpm, template_mask_on_exact_fields)
{
	struct dpflow_ctx *ctx = ctx_new(NULL, 2);
	struct dpflow_pipe_cfg c = pipe_cfg("rt", DPFLOW_PIPE_LPM, 8);
	struct dpflow_pipe *pipe;
	struct dpflow_entry_cfg e = entry_cfg();
	struct pspec s = p4(17, 1, 1000, 0x0a010203, 53);

	c.root = true;
	match_add(&c, DPFLOW_FIELD_OUTER_VLAN0, true, 0);
	c.match.f[0].mask[0] = 0x0f;
	c.match.f[0].mask[1] = 0xf0;
	match_add(&c, DPFLOW_FIELD_OUTER_IPV4_DST, true, 0);
	c.fwd = fwd_port(OUT(0));
	c.miss_fwd = fwd_port(OUT(1));
	pipe = pipe_new(ctx, &c);
	put16(e.key, 0x123);
	put32(e.key + 2, 0x0a000000);
	e.prefix_len = 8;
	entry_new(ctx, pipe, &e);
	s.vlan = 0x125;
	send1(ctx, &s);
	s.vlan = 0x133;
	send1(ctx, &s);
	cr_expect_eq(count_out(ctx, OUT(0)), 1, "VLAN 0x125 & 0xff0 == 0x120");
	cr_expect_eq(count_out(ctx, OUT(1)), 1, "VLAN 0x133 misses");
	dpflow_ctx_destroy(ctx);
}
