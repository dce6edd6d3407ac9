/*
 * Maglev pipes (a HASH pipe with maglev_slots, lib/flow/pipe_table.c)
 * through the C API, the config loader and control requests:
 *  - random batches of member adds, removals and reweights (updates),
 *    some of them refused, against a reference: the builder
 *    (dpflow_maglev_build, itself checked against the paper in
 *    test_maglev.c) run on the member set the test expects, and a
 *    MurmurHash3 written here. Every batch is followed by random packets
 *    through the whole pipeline: each must leave with the register its
 *    member's entry sets, or miss when no member has a weight; per-member
 *    counters must match;
 *  - a refused batch over two pipes leaves the Maglev pipe as it was;
 *  - the errors of the C API (slots, member, weight, hash_index) and of
 *    the config loader, each naming its field; nothing half-applied;
 *  - `dpflow validate`'s description, and entries.add / update / rm by
 *    member through dpflow_ctl_handle().
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/config.h"
#include "dpflow/ctl.h"
#include "dpflow/dpflow.h"
#include "dpflow/flow.h"
#include "dpflow/maglev.h"

/* ---- helpers ------------------------------------------------------------ */

static uint64_t rng_state;

static void rng_seed(uint64_t s)
{
	rng_state = s;
}

static uint32_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return (uint32_t)((z ^ (z >> 31)) >> 32);
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

/* MurmurHash3_x86_32, from Austin Appleby's reference (not dpflow's). */
static uint32_t ref_murmur3(const uint8_t *p, unsigned len, uint32_t seed)
{
	uint32_t h = seed, k;
	unsigned i;

	for (i = 0; i + 4 <= len; i += 4) {
		k = (uint32_t)p[i] | (uint32_t)p[i + 1] << 8 |
		    (uint32_t)p[i + 2] << 16 | (uint32_t)p[i + 3] << 24;
		k *= 0xcc9e2d51u;
		k = k << 15 | k >> 17;
		k *= 0x1b873593u;
		h ^= k;
		h = h << 13 | h >> 19;
		h = h * 5 + 0xe6546b64u;
	}
	k = 0;
	switch (len & 3) {
	case 3:
		k ^= (uint32_t)p[i + 2] << 16;
		/* fall through */
	case 2:
		k ^= (uint32_t)p[i + 1] << 8;
		/* fall through */
	case 1:
		k ^= p[i];
		k *= 0xcc9e2d51u;
		k = k << 15 | k >> 17;
		k *= 0x1b873593u;
		h ^= k;
	}
	h ^= len;
	h ^= h >> 16;
	h *= 0x85ebca6bu;
	h ^= h >> 13;
	h *= 0xc2b2ae35u;
	h ^= h >> 16;
	return h;
}

/* Ports: "in" 0, "hit" 1, "miss" 2. */
#define P_HIT  1
#define P_MISS 2

static struct dpflow_ctx *ctx_new(void)
{
	struct dpflow_ctx_params cp = {.pool_slots = 4096};
	struct dpflow_error err = {0};
	struct dpflow_ctx *ctx = dpflow_ctx_create(&cp, &err);

	cr_assert_not_null(ctx, "%s", err.msg);
	cr_assert_eq(dpflow_ctx_port_add(ctx, "in", "ring:in,size=1024", &err),
		     0, "%s", err.msg);
	cr_assert_eq(
	    dpflow_ctx_port_add(ctx, "hit", "ring:mhit,size=4096", &err), P_HIT,
	    "%s", err.msg);
	cr_assert_eq(
	    dpflow_ctx_port_add(ctx, "miss", "ring:mmiss,size=4096", &err),
	    P_MISS, "%s", err.msg);
	return ctx;
}

/*
 * The pipe under test: root of port "in", hashing outer.ipv4.src and
 * outer.l4.sport (6 key bytes), an entry's one action setting meta.reg0
 * to its value, hits to "hit" and misses to "miss"; @slots 0 makes it a
 * plain HASH pipe of @size slots.
 */
static struct dpflow_pipe_cfg lb_cfg(const char *name, uint32_t size,
				     uint32_t slots, uint32_t seed)
{
	struct dpflow_pipe_cfg c;

	memset(&c, 0, sizeof(c));
	c.name = name;
	c.type = DPFLOW_PIPE_HASH;
	c.size = size;
	c.root = true;
	c.port = 0;
	c.hash_seed = seed;
	c.maglev_slots = slots;
	c.match.n = 2;
	c.match.f[0].field = DPFLOW_FIELD_OUTER_IPV4_SRC;
	c.match.f[0].per_entry = true;
	memset(c.match.f[0].mask, 0xff, 16);
	c.match.f[1].field = DPFLOW_FIELD_OUTER_L4_SPORT;
	c.match.f[1].per_entry = true;
	memset(c.match.f[1].mask, 0xff, 16);
	c.n_action_tmpls = 1;
	c.actions[0].n = 1;
	c.actions[0].a[0].kind = DPFLOW_ACT_SET_FIELD;
	c.actions[0].a[0].field = DPFLOW_FIELD_META_REG0;
	c.actions[0].a[0].per_entry = true;
	c.monitor.counter = true;
	c.fwd.kind = DPFLOW_FWD_PORT;
	c.fwd.port = P_HIT;
	c.miss_fwd.kind = DPFLOW_FWD_PORT;
	c.miss_fwd.port = P_MISS;
	return c;
}

static struct dpflow_pipe *pipe_new(struct dpflow_ctx *ctx,
				    const struct dpflow_pipe_cfg *c)
{
	struct dpflow_error err = {0};
	struct dpflow_pipe *p = dpflow_pipe_create(ctx, c, &err);

	cr_assert_not_null(p, "pipe %s: %s", c->name, err.msg);
	return p;
}

/* A member entry: @name, @weight, its action writes @reg. */
static struct dpflow_entry_cfg member_cfg(const char *name, uint32_t weight,
					  uint32_t reg)
{
	struct dpflow_entry_cfg e;

	memset(&e, 0, sizeof(e));
	snprintf(e.member, sizeof(e.member), "%s", name);
	e.weight = weight;
	put32(e.action_value[0], reg);
	return e;
}

/* A 60-byte UDP/IPv4 frame from @src:@sport to 192.0.2.1:53; returns its
 * length. (The parser checks lengths, not checksums.) */
static unsigned frame(uint8_t *b, uint32_t src, uint16_t sport)
{
	memset(b, 0, 60);
	b[0] = b[6] = 2;
	b[5] = 2;
	b[11] = 1;
	put16(b + 12, 0x0800);
	b[14] = 0x45;
	put16(b + 16, 20 + 8 + 18); /* total length */
	b[22] = 64;		    /* TTL */
	b[23] = 17;		    /* UDP */
	put32(b + 26, src);
	put32(b + 30, 0xc0000201);
	put16(b + 34, sport);
	put16(b + 36, 53);
	put16(b + 38, 8 + 18);
	memset(b + 42, 0xab, 18);
	return 60;
}

/* ---- the reference ------------------------------------------------------- */

#define CANDIDATES 48

/* What the test expects the pipe to hold: candidate i is a member when
 * @in[i], with @weight[i], through entry @h[i]; its action writes i + 1.
 * @ctr[i]: packets its entries took since it was added (updates carry
 * them over). */
struct model {
	char name[CANDIDATES][24];
	bool in[CANDIDATES];
	uint32_t weight[CANDIDATES];
	struct dpflow_entry *h[CANDIDATES];
	uint64_t ctr[CANDIDATES];
	uint32_t m;	 /* slots */
	uint32_t seed;	 /* hash seed */
	uint32_t *table; /* candidate per slot, or UINT32_MAX */
};

/* The table the builder makes from the expected members. */
static void model_table(struct model *md)
{
	struct dpflow_maglev_member mb[CANDIDATES];
	uint32_t id[CANDIDATES], n = 0;

	for (uint32_t i = 0; i < CANDIDATES; i++) {
		if (!md->in[i])
			continue;
		mb[n].name = md->name[i];
		mb[n].weight = md->weight[i];
		id[n++] = i;
	}
	cr_assert_eq(dpflow_maglev_build(mb, n, md->m, md->table), 0);
	for (uint32_t s = 0; s < md->m; s++)
		if (md->table[s] != DPFLOW_MAGLEV_NONE)
			md->table[s] = id[md->table[s]];
}

/*
 * @n random packets through the pipeline: each must take the reference's
 * member (its register value, port "hit") or miss (port "miss") when its
 * slot has none. Counts hits in md->ctr.
 */
static void check_packets(struct dpflow_ctx *ctx, struct model *md, unsigned n,
			  const char *what)
{
	struct dpflow_pool *pool = dpflow_ctx_pool(ctx);
	static int32_t expect[4096]; /* by pool index: candidate or -1 */
	struct dpflow_ring *hit = dpflow_port_ring_tx(dpflow_ctx_port(ctx, 1));
	struct dpflow_ring *miss = dpflow_port_ring_tx(dpflow_ctx_port(ctx, 2));

	cr_assert_leq(pool->n_slots, 4096);
	dpflow_ctx_thread_online(ctx);
	for (unsigned done = 0; done < n; done += DPFLOW_BURST_MAX) {
		uint32_t idx[DPFLOW_BURST_MAX], out[DPFLOW_BURST_MAX];
		unsigned k, got = 0;

		cr_assert_eq(
		    dpflow_pool_alloc_bulk(pool, idx, DPFLOW_BURST_MAX), 0);
		for (unsigned i = 0; i < DPFLOW_BURST_MAX; i++) {
			uint32_t src =
			    rnd() % 3 ? rnd() : 0x0a000000u + rnd() % 50;
			uint16_t sport = (uint16_t)rnd();
			uint8_t key[6];
			uint32_t slot;

			dpflow_pool_meta(pool, idx[i])->data_len =
			    (uint16_t)frame(dpflow_pkt_data(pool, idx[i]), src,
					    sport);
			put32(key, src);
			put16(key + 4, sport);
			slot = ref_murmur3(key, 6, md->seed) % md->m;
			expect[idx[i]] = md->table[slot] == DPFLOW_MAGLEV_NONE
					     ? -1
					     : (int32_t)md->table[slot];
		}
		dpflow_ctx_process_burst(ctx, 0, idx, DPFLOW_BURST_MAX);
		k = dpflow_ring_dequeue_burst(hit, out, DPFLOW_BURST_MAX);
		for (unsigned i = 0; i < k; i++) {
			int32_t c = expect[out[i]];

			cr_assert_geq(
			    c, 0,
			    "%s: a packet hit, its slot has no member "
			    "in the reference",
			    what);
			cr_assert_eq(dpflow_pool_meta(pool, out[i])->reg[0],
				     (uint32_t)c + 1,
				     "%s: packet took member %u, the reference "
				     "says %s (%u)",
				     what,
				     dpflow_pool_meta(pool, out[i])->reg[0] - 1,
				     md->name[c], c);
			md->ctr[c]++;
		}
		dpflow_pool_free_bulk(pool, out, k);
		got += k;
		k = dpflow_ring_dequeue_burst(miss, out, DPFLOW_BURST_MAX);
		for (unsigned i = 0; i < k; i++)
			cr_assert_eq(expect[out[i]], -1,
				     "%s: a packet missed, the reference gives "
				     "it candidate %d",
				     what, expect[out[i]]);
		dpflow_pool_free_bulk(pool, out, k);
		got += k;
		cr_assert_eq(got, DPFLOW_BURST_MAX, "%s: packets lost", what);
		dpflow_ctx_quiescent(ctx);
	}
	dpflow_ctx_thread_offline(ctx);
}

static void check_counters(const struct model *md, const char *what)
{
	for (uint32_t i = 0; i < CANDIDATES; i++) {
		struct dpflow_counter c;

		if (!md->in[i])
			continue;
		cr_assert_eq(dpflow_entry_counter(md->h[i], &c), 0);
		cr_assert_eq(
		    c.pkts, md->ctr[i],
		    "%s: member %s counted %llu packets, expected %llu", what,
		    md->name[i], (unsigned long long)c.pkts,
		    (unsigned long long)md->ctr[i]);
	}
}

/* A candidate that is (@want_in) or is not a member, or -1. */
static int pick(const struct model *md, bool want_in)
{
	uint32_t start = rnd() % CANDIDATES;

	for (uint32_t k = 0; k < CANDIDATES; k++) {
		uint32_t i = (start + k) % CANDIDATES;

		if (md->in[i] == want_in)
			return (int)i;
	}
	return -1;
}

/*
 * @rounds batches of 1 to 8 random operations (adds with weights 0..4,
 * removals, reweights through dpflow_entry_update), one in eight spoilt
 * by a duplicate member and refused whole; after each, packets against
 * the reference.
 */
static void random_batches(uint32_t m, uint32_t seed, unsigned rounds,
			   unsigned pkts)
{
	struct dpflow_ctx *ctx = ctx_new();
	struct dpflow_pipe_cfg c = lb_cfg("lb", 64, m, seed);
	struct dpflow_pipe *pipe = pipe_new(ctx, &c);
	struct dpflow_error err = {0};
	struct dpflow_queue *q = dpflow_queue_create(ctx, &err);
	struct model *md = calloc(1, sizeof(*md));
	unsigned refused = 0, applied = 0, members_max = 0;

	cr_assert(md && q);
	md->m = m;
	md->seed = seed;
	md->table = calloc(m, sizeof(*md->table));
	cr_assert_not_null(md->table);
	for (uint32_t i = 0; i < CANDIDATES; i++)
		snprintf(md->name[i], sizeof(md->name[i]), "10.0.%u.%u:80",
			 i / 7, rnd() % 250);
	/* names made unique by their position */
	for (uint32_t i = 0; i < CANDIDATES; i++)
		snprintf(md->name[i] + strlen(md->name[i]),
			 sizeof(md->name[i]) - strlen(md->name[i]), "#%u", i);

	for (unsigned r = 0; r < rounds; r++) {
		struct model next = *md;
		bool touched[CANDIDATES] = {false};
		unsigned nops = 1 + rnd() % 8, members = 0;
		bool spoil = rnd() % 8 == 0;
		char what[64];
		int rc;

		for (unsigned o = 0; o < nops; o++) {
			unsigned kind = rnd() % 3;
			int i = pick(&next, kind != 0);
			struct dpflow_entry_cfg e;

			/* one operation a member a batch */
			if (i < 0 || touched[i])
				continue;
			touched[i] = true;
			if (kind == 0) { /* add */
				next.in[i] = true;
				next.weight[i] = rnd() % 5;
				next.ctr[i] = 0;
				e = member_cfg(next.name[i], next.weight[i],
					       (uint32_t)i + 1);
				next.h[i] =
				    dpflow_entry_add(q, pipe, &e, NULL, &err);
				cr_assert_not_null(next.h[i], "%s", err.msg);
			} else if (kind == 1) { /* remove */
				cr_assert_eq(
				    dpflow_entry_remove(q, next.h[i], NULL), 0);
				next.in[i] = false;
			} else { /* reweight */
				next.weight[i] = rnd() % 5;
				e = member_cfg(next.name[i], next.weight[i],
					       (uint32_t)i + 1);
				next.h[i] = dpflow_entry_update(q, next.h[i],
								&e, NULL, &err);
				cr_assert_not_null(next.h[i], "%s", err.msg);
			}
		}
		if (spoil) { /* a second entry for a member name */
			int i = pick(&next, true);
			struct dpflow_entry_cfg e;

			if (i < 0)
				i = 0;
			e = member_cfg(next.name[i], 1, 99);
			cr_assert_not_null(
			    dpflow_entry_add(q, pipe, &e, NULL, &err));
			if (!next.in[i]) { /* and its first */
				cr_assert_not_null(
				    dpflow_entry_add(q, pipe, &e, NULL, &err));
			}
		}
		memset(&err, 0, sizeof(err));
		rc = dpflow_entries_process(q, NULL, &err);
		if (spoil) {
			cr_assert_eq(rc, -EEXIST, "round %u: rc %d (%s)", r, rc,
				     err.msg);
			cr_assert_str_eq(err.field, "member");
			cr_assert(strstr(err.msg, "is there already"), "%s",
				  err.msg);
			refused++;
		} else {
			cr_assert_eq(rc, 0, "round %u: %s", r, err.msg);
			*md = next;
			applied++;
		}
		for (uint32_t i = 0; i < CANDIDATES; i++)
			members += md->in[i];
		members_max = members > members_max ? members : members_max;
		cr_assert_eq(dpflow_pipe_entry_count(pipe), members);
		model_table(md);
		snprintf(what, sizeof(what), "m=%u round %u (%u members)", m, r,
			 members);
		check_packets(ctx, md, pkts, what);
		check_counters(md, what);
	}
	cr_expect_gt(refused, 0);
	cr_expect_gt(applied, rounds / 2);
	cr_expect_gt(members_max, 10);
	dpflow_queue_destroy(q);
	free(md->table);
	free(md);
	dpflow_ctx_destroy(ctx);
}

Test(maglev_pipe, random_batches_65537)
{
	rng_seed(0x6d61676c01);
	random_batches(65537, 0x1234567u, 60, 1024);
}

/* Fewer slots than candidate members: some members get none. */
Test(maglev_pipe, random_batches_small_table)
{
	rng_seed(0x6d61676c02);
	random_batches(31, 0, 80, 512);
}

/* ---- all or nothing -------------------------------------------------------
 */

/* A batch over a Maglev pipe and a plain hash pipe that fails on the
 * second leaves the first as it was (its rebuild rolled back), and the
 * next batch builds on the old members. */
Test(maglev_pipe, refused_batch_rolls_back)
{
	struct dpflow_ctx *ctx = ctx_new();
	struct dpflow_pipe_cfg c = lb_cfg("lb", 16, 251, 7);
	struct dpflow_pipe_cfg h = lb_cfg("plain", 4, 0, 0);
	struct dpflow_pipe *lb, *plain;
	struct dpflow_error err = {0};
	struct dpflow_queue *q = dpflow_queue_create(ctx, &err);
	struct model *md = calloc(1, sizeof(*md));
	struct dpflow_entry_cfg e;

	cr_assert_not_null(md);
	h.root = false;
	lb = pipe_new(ctx, &c);
	plain = pipe_new(ctx, &h);
	md->m = 251;
	md->seed = 7;
	md->table = calloc(251, sizeof(*md->table));
	rng_seed(5);
	for (uint32_t i = 0; i < CANDIDATES; i++)
		snprintf(md->name[i], sizeof(md->name[i]), "be%u", i);
	for (uint32_t i = 0; i < 3; i++) {
		e = member_cfg(md->name[i], i + 1, i + 1);
		md->h[i] = dpflow_entry_add(q, lb, &e, NULL, &err);
		md->in[i] = true;
		md->weight[i] = i + 1;
	}
	cr_assert_eq(dpflow_entries_process(q, NULL, &err), 0, "%s", err.msg);
	model_table(md);
	check_packets(ctx, md, 1024, "three members");

	/* add a member and remove one, then collide in the plain pipe */
	e = member_cfg(md->name[3], 5, 4);
	cr_assert_not_null(dpflow_entry_add(q, lb, &e, NULL, &err));
	cr_assert_eq(dpflow_entry_remove(q, md->h[0], NULL), 0);
	memset(&e, 0, sizeof(e));
	e.hash_index = 2;
	cr_assert_not_null(dpflow_entry_add(q, plain, &e, NULL, &err));
	cr_assert_not_null(dpflow_entry_add(q, plain, &e, NULL, &err));
	cr_assert_eq(dpflow_entries_process(q, NULL, &err), -EEXIST);
	cr_assert_str_eq(err.field, "hash_index");
	cr_assert_eq(dpflow_pipe_entry_count(lb), 3);
	check_packets(ctx, md, 1024, "after the refused batch");

	/* the kind's member set is the old one: a removal still works */
	cr_assert_eq(dpflow_entry_remove(q, md->h[1], NULL), 0);
	cr_assert_eq(dpflow_entries_process(q, NULL, &err), 0, "%s", err.msg);
	md->in[1] = false;
	model_table(md);
	check_packets(ctx, md, 1024, "after removing be1");
	check_counters(md, "be0 and be2");

	dpflow_queue_destroy(q);
	free(md->table);
	free(md);
	dpflow_ctx_destroy(ctx);
}

/* No member with a weight: every packet misses; one weight fills every
 * slot. */
Test(maglev_pipe, drained_members_miss)
{
	struct dpflow_ctx *ctx = ctx_new();
	struct dpflow_pipe_cfg c = lb_cfg("lb", 8, 13, 0);
	struct dpflow_pipe *lb = pipe_new(ctx, &c);
	struct dpflow_error err = {0};
	struct dpflow_queue *q = dpflow_queue_create(ctx, &err);
	struct model *md = calloc(1, sizeof(*md));
	struct dpflow_entry_cfg e;
	struct dpflow_pipe_stats st;

	md->m = 13;
	md->table = calloc(13, sizeof(*md->table));
	rng_seed(9);
	for (uint32_t i = 0; i < 2; i++) {
		snprintf(md->name[i], sizeof(md->name[i]), "d%u", i);
		e = member_cfg(md->name[i], 0, i + 1);
		md->h[i] = dpflow_entry_add(q, lb, &e, NULL, &err);
		md->in[i] = true;
	}
	cr_assert_eq(dpflow_entries_process(q, NULL, &err), 0, "%s", err.msg);
	model_table(md);
	for (uint32_t s = 0; s < 13; s++)
		cr_assert_eq(md->table[s], DPFLOW_MAGLEV_NONE);
	check_packets(ctx, md, 256, "all drained");
	cr_assert_eq(dpflow_pipe_stats_get(lb, &st), 0);
	cr_assert_eq(st.hits, 0);
	cr_assert_eq(st.misses, 256);

	e = member_cfg(md->name[1], 1, 2);
	md->h[1] = dpflow_entry_update(q, md->h[1], &e, NULL, &err);
	cr_assert_not_null(md->h[1]);
	cr_assert_eq(dpflow_entries_process(q, NULL, &err), 0, "%s", err.msg);
	md->weight[1] = 1;
	model_table(md);
	for (uint32_t s = 0; s < 13; s++)
		cr_assert_eq(md->table[s], 1);
	check_packets(ctx, md, 256, "d1 weighted");
	cr_assert_eq(dpflow_pipe_stats_get(lb, &st), 0);
	cr_assert_eq(st.hits, 256);
	dpflow_queue_destroy(q);
	free(md->table);
	free(md);
	dpflow_ctx_destroy(ctx);
}

/* ---- errors of the C API -------------------------------------------------
 */

Test(maglev_pipe, bad_slots_refused)
{
	static const uint32_t bad[] = {
	    1, 4, 65535, 65536, DPFLOW_MAGLEV_SIZE_MAX + 2, 16777259u};
	struct dpflow_ctx *ctx = ctx_new();

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct dpflow_pipe_cfg c = lb_cfg("lb", 8, bad[i], 0);
		struct dpflow_error err = {0};

		cr_assert_null(dpflow_pipe_create(ctx, &c, &err),
			       "%u slots accepted", bad[i]);
		cr_assert_eq(err.code, EINVAL);
		cr_assert_str_eq(err.field, "maglev_slots");
		cr_assert(strstr(err.msg, "expected a prime"), "%s", err.msg);
	}
	cr_assert_eq(dpflow_ctx_pipe_count(ctx), 0);
	dpflow_ctx_destroy(ctx);
}

/* Queue @e for @pipe after a valid member; the batch must fail on @e with
 * @field and @msg, and leave the pipe's one member and its slots. */
static void expect_refused(struct dpflow_ctx *ctx, struct dpflow_pipe *pipe,
			   const struct dpflow_entry_cfg *e, const char *field,
			   const char *msg)
{
	struct dpflow_error err = {0};
	struct dpflow_queue *q = dpflow_queue_create(ctx, &err);
	struct dpflow_entry_cfg ok = member_cfg("ok-in-the-batch", 3, 50);
	const struct dpflow_pipe_cfg *c = dpflow_pipe_cfg(pipe);
	unsigned before = dpflow_pipe_entry_count(pipe);

	if (!c->maglev_slots) { /* a plain hash pipe's entry */
		memset(&ok, 0, sizeof(ok));
		ok.hash_index = 3;
	}
	cr_assert_not_null(dpflow_entry_add(q, pipe, &ok, NULL, &err));
	cr_assert_not_null(dpflow_entry_add(q, pipe, e, NULL, &err));
	cr_assert_lt(dpflow_entries_process(q, NULL, &err), 0, "accepted: %s",
		     msg);
	cr_assert_str_eq(err.field, field, "%s: field %s", msg, err.field);
	cr_assert(strstr(err.msg, msg), "'%s' lacks '%s'", err.msg, msg);
	cr_assert_eq(dpflow_pipe_entry_count(pipe), before);
	dpflow_queue_destroy(q);
}

Test(maglev_pipe, bad_entries_refused)
{
	struct dpflow_ctx *ctx = ctx_new();
	struct dpflow_pipe_cfg c = lb_cfg("lb", 8, 13, 0);
	struct dpflow_pipe_cfg p = lb_cfg("plain", 8, 0, 0);
	struct dpflow_pipe *lb, *plain;
	struct dpflow_error err = {0};
	struct dpflow_queue *q = dpflow_queue_create(ctx, &err);
	struct model *md = calloc(1, sizeof(*md));
	struct dpflow_entry_cfg e;

	p.root = false;
	lb = pipe_new(ctx, &c);
	plain = pipe_new(ctx, &p);
	md->m = 13;
	md->table = calloc(13, sizeof(*md->table));
	snprintf(md->name[0], sizeof(md->name[0]), "a");
	e = member_cfg("a", 2, 1);
	md->h[0] = dpflow_entry_add(q, lb, &e, NULL, &err);
	md->in[0] = true;
	md->weight[0] = 2;
	cr_assert_eq(dpflow_entries_process(q, NULL, &err), 0, "%s", err.msg);
	model_table(md);

	e = member_cfg("a", 1, 2);
	expect_refused(ctx, lb, &e, "member", "member 'a' is there already");
	e = member_cfg("", 1, 2);
	expect_refused(ctx, lb, &e, "member", "needs a member name");
	e = member_cfg("b", 1, 2);
	memset(e.member, 'x', sizeof(e.member)); /* no NUL */
	expect_refused(ctx, lb, &e, "member", "needs a member name");
	e = member_cfg("b", DPFLOW_MAGLEV_WEIGHT_MAX + 1, 2);
	expect_refused(ctx, lb, &e, "weight", "weight 1000001, at most");
	e = member_cfg("b", 1, 2);
	e.hash_index = 3;
	expect_refused(ctx, lb, &e, "hash_index", "they name no slot");
	e.hash_index = 300; /* beyond the pipe's size too */
	expect_refused(ctx, lb, &e, "hash_index", "they name no slot");
	/* and on a plain hash pipe */
	e = member_cfg("b", 0, 2);
	expect_refused(ctx, plain, &e, "member", "'member' is for maglev");
	e = member_cfg("", 2, 2);
	expect_refused(ctx, plain, &e, "weight", "'weight' is for maglev");

	/* nothing of it reached the data path */
	rng_seed(3);
	check_packets(ctx, md, 512, "after the refused batches");
	dpflow_queue_destroy(q);
	free(md->table);
	free(md);
	dpflow_ctx_destroy(ctx);
}

/* Weights add up past 32 bits: refused, the culprit named. */
Test(maglev_pipe, total_weight_refused)
{
	struct dpflow_ctx *ctx = ctx_new();
	struct dpflow_pipe_cfg c = lb_cfg("lb", 8192, 13, 0);
	struct dpflow_pipe *lb = pipe_new(ctx, &c);
	struct dpflow_error err = {0};
	struct dpflow_queue *q = dpflow_queue_create(ctx, &err);
	unsigned n = (unsigned)(UINT32_MAX / DPFLOW_MAGLEV_WEIGHT_MAX) + 1;

	for (unsigned i = 0; i < n; i++) {
		struct dpflow_entry_cfg e;
		char name[16];

		snprintf(name, sizeof(name), "m%u", i);
		e = member_cfg(name, DPFLOW_MAGLEV_WEIGHT_MAX, i);
		cr_assert_not_null(dpflow_entry_add(q, lb, &e, NULL, &err));
	}
	cr_assert_eq(dpflow_entries_process(q, NULL, &err), -EINVAL);
	cr_assert_str_eq(err.field, "weight");
	cr_assert(strstr(err.msg, "weights add up to 4295000000"), "%s",
		  err.msg);
	cr_assert_eq(dpflow_pipe_entry_count(lb), 0);
	dpflow_queue_destroy(q);
	dpflow_ctx_destroy(ctx);
}

/* ---- config loader, `dpflow validate`, control requests ------------------
 */

#define PORTS                                       \
	"ports:\n"                                  \
	"  - {name: in, uri: 'ring:cin,size=64'}\n" \
	"  - {name: out, uri: 'ring:cout,size=64'}\n"

static struct dpflow_ctx *load(const char *yaml, struct dpflow_error *err)
{
	memset(err, 0, sizeof(*err));
	return dpflow_config_load_string(yaml, "m.yaml", NULL, err);
}

static const char *const lb_yaml =
    PORTS "pipes:\n"
	  "  - name: lb\n"
	  "    type: hash\n"
	  "    root: in\n"
	  "    size: 16\n"
	  "    maglev: {slots: 251}\n"
	  "    hash_seed: 9\n"
	  "    match: [outer.ipv4.src, outer.l4.sport]\n"
	  "    actions:\n"
	  "      - [{set: {field: meta.reg0, value: per-entry}}]\n"
	  "    fwd: {port: out}\n"
	  "    entries:\n"
	  "      - {member: '10.0.0.1:80', values: [1]}\n"
	  "      - {member: '10.0.0.2:80', weight: 3, values: [2]}\n"
	  "      - {member: '10.0.0.3:80', weight: 0, values: [3]}\n";

Test(maglev_config, loads_members)
{
	struct dpflow_error err;
	struct dpflow_ctx *ctx = load(lb_yaml, &err);
	struct dpflow_pipe *p;
	uint32_t want[] = {1, 3, 0}, seen = 0;

	cr_assert_not_null(ctx, "%s", err.msg);
	p = dpflow_pipe_find(ctx, "lb");
	cr_assert_eq(dpflow_pipe_cfg(p)->maglev_slots, 251);
	cr_assert_eq(dpflow_pipe_entry_count(p), 3);
	for (uint32_t s = 0; s < dpflow_pipe_size(p); s++) {
		const struct dpflow_entry *e = dpflow_pipe_entry(p, s);
		const struct dpflow_entry_cfg *c;
		unsigned i;

		if (!e)
			continue;
		c = dpflow_entry_cfg(e);
		cr_assert_eq(sscanf(c->member, "10.0.0.%u:80", &i), 1);
		cr_assert_eq(c->weight, want[i - 1], "%s weight %u", c->member,
			     c->weight);
		cr_assert_eq(c->hash_index, 0);
		seen |= 1u << i;
	}
	cr_assert_eq(seen, 0xe);
	dpflow_ctx_destroy(ctx);

	/* `maglev: {}` takes the default size */
	{
		char *y = strdup(lb_yaml);
		char *at = strstr(y, "{slots: 251}");

		memcpy(at, "{}          ", 12);
		ctx = load(y, &err);
		cr_assert_not_null(ctx, "%s", err.msg);
		cr_assert_eq(
		    dpflow_pipe_cfg(dpflow_pipe_find(ctx, "lb"))->maglev_slots,
		    DPFLOW_MAGLEV_SIZE_DEFAULT);
		dpflow_ctx_destroy(ctx);
		free(y);
	}
}

/* @base with its first @from replaced by @to (malloc'ed). */
static char *subst(const char *base, const char *from, const char *to)
{
	const char *at = strstr(base, from);
	char *y = malloc(strlen(base) + strlen(to) + 1);

	cr_assert_not_null(at, "no '%s' in the config", from);
	cr_assert_not_null(y);
	sprintf(y, "%.*s%s%s", (int)(at - base), base, to, at + strlen(from));
	return y;
}

/* Replace the first @from of lb_yaml with @to and expect the load to fail
 * with a message holding @msg. */
static void expect_load_error(const char *from, const char *to, const char *msg)
{
	char *y = subst(lb_yaml, from, to);
	struct dpflow_error err;
	struct dpflow_ctx *ctx = load(y, &err);

	free(y);
	cr_assert_null(ctx, "loaded with %s", to);
	cr_assert(strstr(err.msg, msg), "'%s' lacks '%s'", err.msg, msg);
	cr_assert_eq(strncmp(err.msg, "m.yaml:", 7), 0, "%s", err.msg);
}

Test(maglev_config, errors_name_the_field)
{
	expect_load_error("{slots: 251}", "{slots: 250}",
			  "pipes[0].maglev.slots: 250 is not a prime");
	expect_load_error("{slots: 251}", "{slots: 1}",
			  "pipes[0].maglev.slots: 1 is not a prime");
	expect_load_error("{slots: 251}", "{slots: 16777259}",
			  "pipes[0].maglev.slots: '16777259' is out of range "
			  "(max 16777213)");
	expect_load_error("{slots: 251}", "{size: 251}",
			  "pipes[0].maglev.size: unknown key 'size'");
	{
		char *y = subst(lb_yaml, "    hash_seed: 9\n", "");
		char *z = subst(y, "type: hash", "type: basic");
		struct dpflow_error err;

		cr_assert_null(load(z, &err));
		cr_assert(strstr(err.msg, "m.yaml:9: pipes[0].maglev: "
					  "'maglev' is for hash pipes"),
			  "%s", err.msg);
		free(z);
		free(y);
	}
	expect_load_error("{member: '10.0.0.1:80', values: [1]}",
			  "{member: '', values: [1]}",
			  "pipes[0].entries[0].member: expected a non-empty "
			  "string");
	expect_load_error(
	    "{member: '10.0.0.1:80', values: [1]}",
	    "{member: "
	    "'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	    "aaaaaaaaaaa', values: [1]}",
	    "a member name has at most 64 bytes, not 65");
	expect_load_error("{member: '10.0.0.1:80', values: [1]}",
			  "{values: [1]}",
			  "pipes[0].entries[0]: 'member' (the member's stable "
			  "name) is missing");
	expect_load_error("{member: '10.0.0.1:80', values: [1]}",
			  "{member: x, index: 3, values: [1]}",
			  "pipes[0].entries[0].index: pipe 'lb' is a maglev "
			  "pipe: its entries are members ('member', "
			  "'weight'), they take no 'index'");
	expect_load_error("{member: '10.0.0.1:80', values: [1]}",
			  "{member: x, match: {outer.l4.sport: 1}}",
			  "they take no 'match'");
	expect_load_error("weight: 3,", "weight: 1000001,",
			  "pipes[0].entries[1].weight: '1000001' is out of "
			  "range (max 1000000)");
	expect_load_error("'10.0.0.2:80'", "'10.0.0.1:80'",
			  "pipes[0].entries[1]: pipe 'lb': member "
			  "'10.0.0.1:80' is there already");
	/* a plain hash pipe's entries */
	expect_load_error("    maglev: {slots: 251}\n", "",
			  "pipes[0].entries[0].member: 'member' is for the "
			  "entries of maglev pipes");
}

Test(maglev_config, plain_hash_refuses_weight)
{
	static const char *const y = PORTS "pipes:\n"
					   "  - name: h\n"
					   "    type: hash\n"
					   "    root: in\n"
					   "    size: 4\n"
					   "    match: [outer.l4.sport]\n"
					   "    fwd: {port: out}\n"
					   "    entries:\n"
					   "      - {index: 1, weight: 2}\n";
	struct dpflow_error err;

	cr_assert_null(load(y, &err));
	cr_assert(strstr(err.msg, "pipes[0].entries[0].weight: 'weight' is "
				  "for the entries of maglev pipes"),
		  "%s", err.msg);
}

/* What `dpflow validate` prints of a Maglev pipe. */
Test(maglev_config, describe)
{
	struct dpflow_error err;
	struct dpflow_ctx *ctx = load(lb_yaml, &err);
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	cr_assert_not_null(ctx, "%s", err.msg);
	cr_assert_not_null(f);
	cr_assert_eq(dpflow_config_describe(ctx, f), 0);
	fclose(f);
	cr_assert(strstr(text, "  lb: type hash, root of port in, 3 entries "
			       "(size 16), maglev over 251 slots\n"),
		  "%s", text);
	cr_assert(strstr(text, "      - {\"member\":\"10.0.0.2:80\","
			       "\"weight\":3,\"values\":[2]}\n"),
		  "%s", text);
	cr_assert(strstr(text, "      - {\"member\":\"10.0.0.3:80\","
			       "\"weight\":0,\"values\":[3]}\n"),
		  "%s", text);
	free(text);
	dpflow_ctx_destroy(ctx);
}

/* The reply to @req must contain @want. */
static void expect_reply(struct dpflow_ctl *ctl, const char *req,
			 const char *want)
{
	char *rep = dpflow_ctl_handle(ctl, req, strlen(req));

	cr_assert_not_null(rep);
	cr_assert(strstr(rep, want), "%s -> %s (wanted %s)", req, rep, want);
	free(rep);
}

/* The weight of member @name of pipe lb, or -1. */
static long weight_of(struct dpflow_ctx *ctx, const char *name)
{
	struct dpflow_pipe *p = dpflow_pipe_find(ctx, "lb");

	for (uint32_t s = 0; s < dpflow_pipe_size(p); s++) {
		const struct dpflow_entry *e = dpflow_pipe_entry(p, s);

		if (e && !strcmp(dpflow_entry_cfg(e)->member, name))
			return dpflow_entry_cfg(e)->weight;
	}
	return -1;
}

Test(maglev_config, control_requests_by_member)
{
	struct dpflow_error err;
	struct dpflow_ctx *ctx = load(lb_yaml, &err);
	struct dpflow_ctl *ctl;

	cr_assert_not_null(ctx, "%s", err.msg);
	ctl = dpflow_ctl_open(ctx, NULL, NULL, &err);
	cr_assert_not_null(ctl, "%s", err.msg);
	expect_reply(ctl,
		     "{\"cmd\":\"entries.add\",\"pipe\":\"lb\",\"entries\":"
		     "[{\"member\":\"10.0.0.4:80\",\"weight\":2,"
		     "\"values\":[4]}]}",
		     "\"ok\":true");
	cr_assert_eq(weight_of(ctx, "10.0.0.4:80"), 2);
	expect_reply(ctl,
		     "{\"cmd\":\"entries.add\",\"pipe\":\"lb\",\"entries\":"
		     "[{\"member\":\"10.0.0.4:80\",\"values\":[5]}]}",
		     "member '10.0.0.4:80' is there already");
	expect_reply(ctl,
		     "{\"cmd\":\"entries.add\",\"pipe\":\"lb\",\"entries\":"
		     "[{\"member\":\"10.0.0.5:80\",\"index\":2}]}",
		     "they take no 'index'");
	expect_reply(ctl,
		     "{\"cmd\":\"entries.update\",\"pipe\":\"lb\",\"entries\":"
		     "[{\"member\":\"10.0.0.3:80\",\"weight\":7,"
		     "\"values\":[3]}]}",
		     "\"ok\":true");
	cr_assert_eq(weight_of(ctx, "10.0.0.3:80"), 7);
	expect_reply(ctl,
		     "{\"cmd\":\"entries.rm\",\"pipe\":\"lb\",\"entries\":"
		     "[{\"member\":\"10.0.0.1:80\"}]}",
		     "\"ok\":true");
	cr_assert_eq(weight_of(ctx, "10.0.0.1:80"), -1);
	expect_reply(ctl, "{\"cmd\":\"entries.list\",\"pipe\":\"lb\"}",
		     "\"member\":\"10.0.0.3:80\",\"weight\":7");
	cr_assert_eq(dpflow_pipe_entry_count(dpflow_pipe_find(ctx, "lb")), 3);
	dpflow_ctl_close(ctl);
	dpflow_ctx_destroy(ctx);
}
