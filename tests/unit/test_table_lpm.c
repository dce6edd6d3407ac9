/*
 * LPM table tests (lib/flow/table_lpm.*): IPv4 and IPv6 images against a
 * naive reference written here (a linear scan of the live rules for the
 * longest one that covers the address), on random rule sets from fixed
 * seeds: /0 and full-length host routes, nested chains, siblings sharing a
 * value, overlapping deletes, values of 2^31 and more (IPv4 keeps them in
 * groups), group exhaustion and churn. Also: parameter and prefix
 * validation, failed calls leaving the image byte-identical, copies and
 * replays, bulk against single lookups, and the image invariants
 * (dpflow_lpm4_verify / dpflow_lpm6_verify) along the way.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow/table_lpm.h"

/* ------------------------------------------------------------ helpers */

static uint64_t rng_state;

static void rng_seed(uint64_t s)
{
	rng_state = s;
}

static uint64_t rng64(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint32_t rng32(void)
{
	return (uint32_t)(rng64() >> 32);
}

static uint32_t rng_below(uint32_t n)
{
	return (uint32_t)(((uint64_t)rng32() * n) >> 32);
}

static uint32_t m4(unsigned len)
{
	return len ? 0xffffffffu << (32 - len) : 0;
}

static uint32_t ip4(unsigned a, unsigned b, unsigned c, unsigned d)
{
	return (uint32_t)a << 24 | b << 16 | c << 8 | d;
}

/* ---------------------------------------------- IPv4 naive reference */

struct rule4 {
	uint32_t addr;
	unsigned len;
	uint32_t value;
};

struct ref4 {
	struct rule4 *r;
	uint32_t n, cap;
};

static void ref4_init(struct ref4 *ref, uint32_t cap)
{
	ref->r = calloc(cap, sizeof(*ref->r));
	cr_assert_not_null(ref->r);
	ref->n = 0;
	ref->cap = cap;
}

static int ref4_index(const struct ref4 *ref, uint32_t addr, unsigned len)
{
	for (uint32_t i = 0; i < ref->n; i++)
		if (ref->r[i].addr == addr && ref->r[i].len == len)
			return (int)i;
	return -1;
}

static void ref4_add(struct ref4 *ref, uint32_t addr, unsigned len,
		     uint32_t value)
{
	cr_assert_lt(ref->n, ref->cap);
	ref->r[ref->n].addr = addr;
	ref->r[ref->n].len = len;
	ref->r[ref->n].value = value;
	ref->n++;
}

static void ref4_del(struct ref4 *ref, uint32_t i)
{
	ref->r[i] = ref->r[--ref->n];
}

/* Linear scan: the longest live rule covering @a. */
static uint32_t ref4_lookup(const struct ref4 *ref, uint32_t a)
{
	uint32_t v = DPFLOW_TABLE_MISS;
	int best = -1;

	for (uint32_t i = 0; i < ref->n; i++) {
		const struct rule4 *r = &ref->r[i];

		if ((int)r->len > best && ((a ^ r->addr) & m4(r->len)) == 0) {
			best = (int)r->len;
			v = r->value;
		}
	}
	return v;
}

static struct dpflow_lpm4_image *new4(uint32_t max_rules, uint32_t max_groups)
{
	struct dpflow_lpm4_params p = {max_rules, max_groups};
	struct dpflow_error err = {0};
	struct dpflow_lpm4_image *t = dpflow_lpm4_create(&p, &err);

	cr_assert_not_null(t, "lpm4_create: %s", err.msg);
	return t;
}

static void verify4(const struct dpflow_lpm4_image *t)
{
	struct dpflow_error err = {0};

	cr_assert_eq(dpflow_lpm4_verify(t, &err), 0, "lpm4 verify: %s",
		     err.msg);
}

/*
 * A lookup address: random, inside a rule (random host bits), or at a
 * rule's first or last address or just outside it.
 */
static uint32_t addr4_pick(const struct ref4 *ref)
{
	uint32_t k = rng_below(10);
	const struct rule4 *r;

	if (ref->n == 0 || k < 4)
		return rng32();
	r = &ref->r[rng_below(ref->n)];
	if (k < 8)
		return r->addr | (rng32() & ~m4(r->len));
	switch (k - 8 + 2 * rng_below(2)) {
	case 0:
		return r->addr;
	case 1:
		return r->addr | ~m4(r->len);
	case 2:
		return r->addr - 1;
	default:
		return (r->addr | ~m4(r->len)) + 1;
	}
}

/* Compare @n lookups (single and bulk) with the reference. */
static void check4(const struct dpflow_lpm4_image *t, const struct ref4 *ref,
		   uint32_t n)
{
	uint32_t addrs[64], got[64];
	uint32_t bad = 0;

	for (uint32_t done = 0; done < n; done += 64) {
		uint32_t m = n - done < 64 ? n - done : 64, hits, ref_hits = 0;

		for (uint32_t i = 0; i < m; i++)
			addrs[i] = addr4_pick(ref);
		hits = dpflow_lpm4_lookup_bulk(t, addrs, m, got);
		for (uint32_t i = 0; i < m; i++) {
			uint32_t want = ref4_lookup(ref, addrs[i]);

			ref_hits += want != DPFLOW_TABLE_MISS;
			if (got[i] != want ||
			    dpflow_lpm4_lookup(t, addrs[i]) != want) {
				if (!bad)
					cr_log_error(
					    "%08x: got %#x/%#x, want "
					    "%#x",
					    addrs[i], got[i],
					    dpflow_lpm4_lookup(t, addrs[i]),
					    want);
				bad++;
			}
		}
		cr_assert_eq(hits, ref_hits);
	}
	cr_assert_eq(bad, 0, "%u of %u lookups differ from the reference", bad,
		     n);
}

/* A random prefix: lengths 0..32 biased to /8../32, often nested. */
static void prefix4_pick(const struct ref4 *ref, uint32_t *addr, unsigned *len)
{
	uint32_t k = rng_below(100), a;
	unsigned l;

	if (k < 2)
		l = rng_below(8); /* /0../7 */
	else if (k < 30)
		l = 8 + rng_below(9); /* /8../16 */
	else if (k < 80)
		l = 17 + rng_below(8); /* /17../24 */
	else
		l = 25 + rng_below(8); /* /25../32 */
	if (ref->n && rng_below(2)) {
		/* nest under (or next to) an existing rule */
		const struct rule4 *r = &ref->r[rng_below(ref->n)];

		a = r->addr ^ (rng_below(4) == 0 ? 1u << rng_below(32) : 0);
		a |= rng32() & ~m4(r->len);
	} else if (rng_below(2)) {
		a = ip4(10, 0, 0, 0) | (rng32() & 0x0003ffffu); /* dense */
	} else {
		a = rng32();
	}
	*addr = a & m4(l);
	*len = l;
}

/* ------------------------------------------------------ IPv4 tests */

Test(lpm4, params_and_init)
{
	struct dpflow_lpm4_params p = {0, 0};
	struct dpflow_error err = {0};
	size_t size;
	void *mem;

	cr_assert_null(dpflow_lpm4_create(&p, &err));
	cr_assert_eq(err.code, EINVAL);
	cr_assert_str_eq(err.field, "max_rules");
	p.max_rules = DPFLOW_LPM_RULES_MAX + 1;
	cr_assert_eq(dpflow_lpm4_image_size(&p), 0);
	p.max_rules = 100;
	p.max_groups = DPFLOW_LPM4_GROUPS_MAX + 1;
	cr_assert_null(dpflow_lpm4_create(&p, &err));
	cr_assert_str_eq(err.field, "max_groups");
	p.max_groups = 0;
	size = dpflow_lpm4_image_size(&p);
	cr_assert_gt(size, 0);
	cr_assert_eq(size % 64, 0);
	mem = aligned_alloc(64, size + 64);
	cr_assert_not_null(mem);
	cr_assert_eq(dpflow_lpm4_image_init((char *)mem + 8, size, &p, &err),
		     -EINVAL);
	cr_assert_str_eq(err.field, "mem");
	cr_assert_eq(dpflow_lpm4_image_init(mem, size - 64, &p, &err), -EINVAL);
	cr_assert_str_eq(err.field, "size");
	cr_assert_eq(dpflow_lpm4_image_init(mem, size + 64, &p, &err), 0);
	cr_assert_eq(dpflow_lpm4_image_check(mem, size, &err), 0, "%s",
		     err.msg);
	cr_assert_eq(dpflow_lpm4_image_check(mem, size - 64, &err), -EINVAL);
	cr_assert_eq(dpflow_lpm6_image_check(mem, size, &err), -EINVAL);
	cr_assert_str_eq(err.field, "magic");
	cr_assert_eq(dpflow_lpm4_image_bytes(mem), size);
	cr_assert_eq(dpflow_lpm4_count(mem), 0);
	cr_assert_eq(((struct dpflow_lpm4_image *)mem)->max_groups,
		     dpflow_lpm4_groups_for(100));
	cr_assert_eq(dpflow_lpm4_groups_for(100), 100 / 4 + 256);
	for (uint32_t i = 0; i < 1000; i++)
		cr_assert_eq(dpflow_lpm4_lookup(mem, rng32()),
			     DPFLOW_TABLE_MISS);
	verify4(mem);
	((struct dpflow_lpm4_image *)mem)->rules_off += 64;
	cr_assert_eq(dpflow_lpm4_image_check(mem, size, &err), -EINVAL);
	cr_assert_str_eq(err.field, "offsets");
	free(mem);
}

Test(lpm4, prefix_validation)
{
	struct dpflow_lpm4_image *t = new4(16, 0);
	struct dpflow_error err = {0};
	uint32_t v = 0;

	cr_assert_eq(dpflow_lpm4_add(t, ip4(10, 0, 0, 0), 33, 1, &err),
		     -EINVAL);
	cr_assert_str_eq(err.field, "len");
	cr_assert_eq(dpflow_lpm4_add(t, ip4(10, 1, 2, 3), 24, 1, &err),
		     -EINVAL);
	cr_assert_str_eq(err.field, "addr");
	cr_assert_eq(dpflow_lpm4_add(t, ip4(0, 0, 0, 1), 0, 1, &err), -EINVAL);
	cr_assert_eq(
	    dpflow_lpm4_add(t, ip4(10, 0, 0, 0), 8, DPFLOW_TABLE_MISS, &err),
	    -EINVAL);
	cr_assert_str_eq(err.field, "value");
	cr_assert_eq(dpflow_lpm4_add(t, ip4(10, 0, 0, 0), 8, 7, &err), 0);
	cr_assert_eq(dpflow_lpm4_add(t, ip4(10, 0, 0, 0), 8, 8, &err), -EEXIST);
	cr_assert_str_eq(err.field, "addr");
	cr_assert_eq(dpflow_lpm4_delete(t, ip4(10, 0, 0, 0), 9, NULL, &err),
		     -ENOENT);
	cr_assert_eq(dpflow_lpm4_delete(t, ip4(10, 0, 0, 1), 8, NULL, &err),
		     -EINVAL);
	cr_assert_eq(dpflow_lpm4_update(t, ip4(11, 0, 0, 0), 8, 3, &err),
		     -ENOENT);
	cr_assert_eq(
	    dpflow_lpm4_update(t, ip4(10, 0, 0, 0), 8, DPFLOW_TABLE_MISS, &err),
	    -EINVAL);
	cr_assert_eq(dpflow_lpm4_find(t, ip4(10, 0, 0, 0), 8, &v), 0);
	cr_assert_eq(v, 7);
	cr_assert_eq(dpflow_lpm4_find(t, ip4(10, 0, 0, 0), 16, &v), -ENOENT);
	cr_assert_eq(dpflow_lpm4_count(t), 1);
	verify4(t);
	dpflow_lpm4_destroy(t);
}

Test(lpm4, edges_and_nesting)
{
	struct dpflow_lpm4_image *t = new4(64, 0);
	uint32_t old = 0;

	/* nested chain across the /16 and /24 boundaries */
	cr_assert_eq(dpflow_lpm4_add(t, 0, 0, 100, NULL), 0);
	cr_assert_eq(dpflow_lpm4_add(t, ip4(10, 0, 0, 0), 8, 108, NULL), 0);
	cr_assert_eq(dpflow_lpm4_add(t, ip4(10, 1, 0, 0), 16, 116, NULL), 0);
	cr_assert_eq(dpflow_lpm4_add(t, ip4(10, 1, 0, 0), 17, 117, NULL), 0);
	cr_assert_eq(dpflow_lpm4_add(t, ip4(10, 1, 2, 0), 24, 124, NULL), 0);
	cr_assert_eq(dpflow_lpm4_add(t, ip4(10, 1, 2, 3), 32, 132, NULL), 0);
	cr_assert_eq(dpflow_lpm4_add(t, 0, 32, 1, NULL), 0);
	cr_assert_eq(dpflow_lpm4_add(t, 0xffffffffu, 32, 2, NULL), 0);
	verify4(t);
	cr_assert_eq(dpflow_lpm4_lookup(t, ip4(10, 1, 2, 3)), 132);
	cr_assert_eq(dpflow_lpm4_lookup(t, ip4(10, 1, 2, 4)), 124);
	cr_assert_eq(dpflow_lpm4_lookup(t, ip4(10, 1, 2, 2)), 124);
	cr_assert_eq(dpflow_lpm4_lookup(t, ip4(10, 1, 3, 0)), 117);
	cr_assert_eq(dpflow_lpm4_lookup(t, ip4(10, 1, 127, 255)), 117);
	cr_assert_eq(dpflow_lpm4_lookup(t, ip4(10, 1, 128, 0)), 116);
	cr_assert_eq(dpflow_lpm4_lookup(t, ip4(10, 2, 0, 0)), 108);
	cr_assert_eq(dpflow_lpm4_lookup(t, ip4(11, 0, 0, 0)), 100);
	cr_assert_eq(dpflow_lpm4_lookup(t, 0), 1);
	cr_assert_eq(dpflow_lpm4_lookup(t, 1), 100);
	cr_assert_eq(dpflow_lpm4_lookup(t, 0xffffffffu), 2);
	cr_assert_eq(dpflow_lpm4_lookup(t, 0xfffffffeu), 100);

	/* deletes restore the next-shorter covering prefix */
	cr_assert_eq(dpflow_lpm4_delete(t, ip4(10, 1, 0, 0), 17, &old, NULL),
		     0);
	cr_assert_eq(old, 117);
	cr_assert_eq(dpflow_lpm4_lookup(t, ip4(10, 1, 3, 0)), 116);
	cr_assert_eq(dpflow_lpm4_lookup(t, ip4(10, 1, 2, 9)), 124);
	cr_assert_eq(dpflow_lpm4_delete(t, ip4(10, 1, 0, 0), 16, NULL, NULL),
		     0);
	cr_assert_eq(dpflow_lpm4_lookup(t, ip4(10, 1, 3, 0)), 108);
	cr_assert_eq(dpflow_lpm4_update(t, ip4(10, 0, 0, 0), 8, 208, NULL), 0);
	cr_assert_eq(dpflow_lpm4_lookup(t, ip4(10, 1, 3, 0)), 208);
	cr_assert_eq(dpflow_lpm4_lookup(t, ip4(10, 1, 2, 3)), 132);
	cr_assert_eq(dpflow_lpm4_delete(t, 0, 0, NULL, NULL), 0);
	cr_assert_eq(dpflow_lpm4_lookup(t, ip4(11, 0, 0, 0)),
		     DPFLOW_TABLE_MISS);
	cr_assert_eq(dpflow_lpm4_lookup(t, ip4(10, 200, 0, 0)), 208);
	cr_assert_eq(dpflow_lpm4_lookup(t, 0), 1);
	verify4(t);

	/* siblings sharing a value stay separate rules */
	cr_assert_eq(dpflow_lpm4_add(t, ip4(20, 0, 0, 0), 24, 5, NULL), 0);
	cr_assert_eq(dpflow_lpm4_add(t, ip4(20, 0, 1, 0), 24, 5, NULL), 0);
	cr_assert_eq(dpflow_lpm4_add(t, ip4(20, 0, 0, 128), 25, 5, NULL), 0);
	cr_assert_eq(dpflow_lpm4_lookup(t, ip4(20, 0, 1, 7)), 5);
	cr_assert_eq(dpflow_lpm4_delete(t, ip4(20, 0, 0, 0), 24, NULL, NULL),
		     0);
	cr_assert_eq(dpflow_lpm4_lookup(t, ip4(20, 0, 0, 7)),
		     DPFLOW_TABLE_MISS);
	cr_assert_eq(dpflow_lpm4_lookup(t, ip4(20, 0, 0, 200)), 5);
	cr_assert_eq(dpflow_lpm4_lookup(t, ip4(20, 0, 1, 7)), 5);
	/* two halves of a /24 with one value: still two rules, one group */
	cr_assert_eq(dpflow_lpm4_add(t, ip4(30, 0, 0, 0), 25, 7, NULL), 0);
	cr_assert_eq(dpflow_lpm4_add(t, ip4(30, 0, 0, 128), 25, 7, NULL), 0);
	verify4(t);
	cr_assert_eq(dpflow_lpm4_delete(t, ip4(30, 0, 0, 0), 25, NULL, NULL),
		     0);
	cr_assert_eq(dpflow_lpm4_lookup(t, ip4(30, 0, 0, 1)),
		     DPFLOW_TABLE_MISS);
	cr_assert_eq(dpflow_lpm4_lookup(t, ip4(30, 0, 0, 129)), 7);
	verify4(t);
	dpflow_lpm4_destroy(t);
}

/*
 * Random rule sets against the linear-scan reference: phases of adds and
 * overlapping deletes (including /0 and /32), 1M+ lookups in all, half of
 * them inside or at the edges of known prefixes. Values repeat on purpose
 * (neighbours with the same value must stay apart).
 */
Test(lpm4, random_vs_reference)
{
	static const uint64_t seeds[] = {1, 42, 20251202};
	uint32_t total = 0;

	for (unsigned s = 0; s < DPFLOW_ARRAY_SIZE(seeds); s++) {
		struct dpflow_lpm4_image *t = new4(600, 0);
		struct ref4 ref;

		rng_seed(seeds[s]);
		ref4_init(&ref, 600);
		for (unsigned phase = 0; phase < 8; phase++) {
			unsigned adds = 80 + rng_below(120);
			unsigned dels = phase & 1 ? ref.n / 2 : ref.n / 5;

			for (unsigned i = 0; i < adds && ref.n < 600; i++) {
				uint32_t a, v = rng_below(3) ? rng32() >> 1
							     : rng_below(4);
				unsigned l;
				int rc;

				prefix4_pick(&ref, &a, &l);
				if (phase == 2 && i == 0) {
					a = 0;
					l = 0;
				}
				rc = dpflow_lpm4_add(t, a, l, v, NULL);
				if (ref4_index(&ref, a, l) >= 0) {
					cr_assert_eq(rc, -EEXIST);
					continue;
				}
				cr_assert_eq(rc, 0, "add %08x/%u: %d", a, l,
					     rc);
				ref4_add(&ref, a, l, v);
			}
			if (phase == 3)
				verify4(t);
			check4(t, &ref, 30000);
			total += 30000;
			for (unsigned i = 0; i < dels && ref.n; i++) {
				uint32_t k = rng_below(ref.n), old = 0;

				cr_assert_eq(dpflow_lpm4_delete(
						 t, ref.r[k].addr, ref.r[k].len,
						 &old, NULL),
					     0);
				cr_assert_eq(old, ref.r[k].value);
				ref4_del(&ref, k);
			}
			cr_assert_eq(dpflow_lpm4_count(t), ref.n);
			if (phase == 7)
				verify4(t);
			check4(t, &ref, 20000);
			total += 20000;
		}
		free(ref.r);
		dpflow_lpm4_destroy(t);
	}
	cr_assert_geq(total, 1000000);
}

Test(lpm4, delete_all_misses)
{
	struct dpflow_lpm4_image *t = new4(3000, 0), *fresh = new4(3000, 0);
	const uint32_t *tbl24 = dpflow_lpm4_tbl24_c(t);
	struct dpflow_lpm_info info;
	struct ref4 ref;
	uint32_t left = 0;

	rng_seed(7);
	ref4_init(&ref, 3000);
	while (ref.n < 3000) {
		uint32_t a;
		unsigned l;

		prefix4_pick(&ref, &a, &l);
		if (dpflow_lpm4_add(t, a, l, ref.n, NULL) == 0)
			ref4_add(&ref, a, l, ref.n);
	}
	dpflow_lpm4_info(t, &info);
	cr_assert_gt(info.n_groups, 100);
	check4(t, &ref, 20000);
	while (ref.n) {
		uint32_t k = rng_below(ref.n);

		cr_assert_eq(dpflow_lpm4_delete(t, ref.r[k].addr, ref.r[k].len,
						NULL, NULL),
			     0);
		ref4_del(&ref, k);
	}
	verify4(t);
	for (uint32_t i = 0; i < 100000; i++)
		cr_assert_eq(dpflow_lpm4_lookup(t, rng32()), DPFLOW_TABLE_MISS);
	for (uint32_t s = 0; s < DPFLOW_LPM4_TBL24_SIZE; s++)
		left += tbl24[s] != 0; /* MISS, complemented */
	cr_assert_eq(left, 0, "%u /24 entries not empty", left);
	dpflow_lpm4_info(t, &info);
	cr_assert_eq(info.n_rules, 0);
	cr_assert_eq(info.n_groups, 0);
	/* clear gives back a fresh image, byte for byte */
	dpflow_lpm4_clear(t);
	cr_assert_eq(memcmp(t, fresh, dpflow_lpm4_image_bytes(t)), 0);
	free(ref.r);
	dpflow_lpm4_destroy(t);
	dpflow_lpm4_destroy(fresh);
}

/* Every failing call leaves every byte of the image as it was. */
Test(lpm4, failed_calls_leave_image_identical)
{
	struct dpflow_lpm4_image *t = new4(40, 3), *before;
	struct dpflow_error err = {0};
	size_t size = dpflow_lpm4_image_bytes(t);
	unsigned n = 0;

	/* 3 groups: three /25s in three /24s take them all */
	for (uint32_t i = 0; i < 3; i++, n++)
		cr_assert_eq(dpflow_lpm4_add(t, ip4(10, 0, (uint8_t)i, 128), 25,
					     i, &err),
			     0, "%s", err.msg);
	before = dpflow_lpm4_clone(t, NULL);
	cr_assert_not_null(before);
	cr_assert_eq(dpflow_lpm4_add(t, ip4(10, 0, 3, 0), 26, 9, &err),
		     -ENOSPC);
	cr_assert_str_eq(err.field, "max_groups");
	/* a /16 with a value over 2^31 needs a group per /24 */
	cr_assert_eq(
	    dpflow_lpm4_add(t, ip4(11, 0, 0, 0), 16, 0x80000000u, &err),
	    -ENOSPC);
	cr_assert_eq(memcmp(t, before, size), 0);
	/* the same /24 again needs no new group */
	cr_assert_eq(dpflow_lpm4_add(t, ip4(10, 0, 2, 0), 26, 9, &err), 0);
	n++;
	/* short prefixes need none either: fill the rule table */
	for (uint32_t i = 0; n < 40; i++, n++)
		cr_assert_eq(
		    dpflow_lpm4_add(t, ip4(20 + i, 0, 0, 0), 8, i, &err), 0,
		    "%s", err.msg);
	verify4(t);
	dpflow_lpm4_destroy(before);
	before = dpflow_lpm4_clone(t, NULL);
	cr_assert_eq(dpflow_lpm4_add(t, ip4(99, 0, 0, 0), 8, 1, &err), -ENOSPC);
	cr_assert_str_eq(err.field, "max_rules");
	cr_assert_eq(dpflow_lpm4_add(t, ip4(20, 0, 0, 0), 8, 1, &err), -EEXIST);
	cr_assert_eq(dpflow_lpm4_add(t, ip4(20, 0, 0, 1), 8, 1, &err), -EINVAL);
	cr_assert_eq(dpflow_lpm4_add(t, 0, 40, 1, &err), -EINVAL);
	cr_assert_eq(dpflow_lpm4_delete(t, ip4(98, 0, 0, 0), 8, NULL, &err),
		     -ENOENT);
	cr_assert_eq(dpflow_lpm4_update(t, ip4(98, 0, 0, 0), 8, 1, &err),
		     -ENOENT);
	/* an update to a big value on a /8 needs 65536 groups */
	cr_assert_eq(
	    dpflow_lpm4_update(t, ip4(20, 0, 0, 0), 8, 0xfffffffeu, &err),
	    -ENOSPC);
	cr_assert_str_eq(err.field, "max_groups");
	cr_assert_eq(memcmp(t, before, size), 0);
	/* a delete frees space and the same add then succeeds */
	cr_assert_eq(dpflow_lpm4_delete(t, ip4(20, 0, 0, 0), 8, NULL, &err), 0);
	cr_assert_eq(dpflow_lpm4_add(t, ip4(99, 0, 0, 0), 8, 1, &err), 0);
	verify4(t);
	dpflow_lpm4_destroy(before);
	dpflow_lpm4_destroy(t);
}

/*
 * Values of 2^31 and more cannot sit in tbl24: the /24s they cover get
 * groups, which go away again when the value does; a delete that hands
 * /24s to such a value needs groups and fails cleanly without them.
 */
Test(lpm4, big_values_use_groups)
{
	struct dpflow_lpm4_image *t = new4(64, 20), *before;
	struct dpflow_lpm_info info;
	struct dpflow_error err = {0};
	size_t size = dpflow_lpm4_image_bytes(t);

	cr_assert_eq(
	    dpflow_lpm4_add(t, ip4(10, 1, 0, 0), 20, 0xfffffffeu, &err), 0,
	    "%s", err.msg);
	dpflow_lpm4_info(t, &info);
	cr_assert_eq(info.n_groups, 16);
	cr_assert_eq(dpflow_lpm4_lookup(t, ip4(10, 1, 15, 255)), 0xfffffffeu);
	cr_assert_eq(dpflow_lpm4_lookup(t, ip4(10, 1, 16, 0)),
		     DPFLOW_TABLE_MISS);
	/* a small value over it takes back two /24s */
	cr_assert_eq(dpflow_lpm4_add(t, ip4(10, 1, 2, 0), 23, 5, &err), 0);
	dpflow_lpm4_info(t, &info);
	cr_assert_eq(info.n_groups, 14);
	cr_assert_eq(dpflow_lpm4_lookup(t, ip4(10, 1, 3, 9)), 5);
	cr_assert_eq(
	    dpflow_lpm4_add(t, ip4(10, 1, 3, 7), 32, 0x80000000u, &err), 0);
	dpflow_lpm4_info(t, &info);
	cr_assert_eq(info.n_groups, 15);
	cr_assert_eq(dpflow_lpm4_lookup(t, ip4(10, 1, 3, 7)), 0x80000000u);
	cr_assert_eq(dpflow_lpm4_lookup(t, ip4(10, 1, 3, 8)), 5);
	verify4(t);
	/* fill the groups, then deleting the /23 needs 1 more than free */
	for (uint32_t i = 0; i < 5; i++)
		cr_assert_eq(
		    dpflow_lpm4_add(t, ip4(30, 0, (uint8_t)i, 0), 25, i, &err),
		    0, "%s", err.msg);
	before = dpflow_lpm4_clone(t, NULL);
	cr_assert_eq(dpflow_lpm4_delete(t, ip4(10, 1, 2, 0), 23, NULL, &err),
		     -ENOSPC);
	cr_assert_str_eq(err.field, "max_groups");
	cr_assert_eq(memcmp(t, before, size), 0);
	cr_assert_eq(dpflow_lpm4_delete(t, ip4(30, 0, 0, 0), 25, NULL, &err),
		     0);
	cr_assert_eq(dpflow_lpm4_delete(t, ip4(10, 1, 2, 0), 23, NULL, &err), 0,
		     "%s", err.msg);
	cr_assert_eq(dpflow_lpm4_lookup(t, ip4(10, 1, 2, 1)), 0xfffffffeu);
	cr_assert_eq(dpflow_lpm4_lookup(t, ip4(10, 1, 3, 7)), 0x80000000u);
	/* updating the /20 to a small value folds its groups */
	cr_assert_eq(dpflow_lpm4_update(t, ip4(10, 1, 0, 0), 20, 77, &err), 0);
	dpflow_lpm4_info(t, &info);
	cr_assert_eq(info.n_groups, 5); /* 10.1.3.0/24, 30.0.1..4.0/24 */
	cr_assert_eq(dpflow_lpm4_lookup(t, ip4(10, 1, 2, 1)), 77);
	verify4(t);
	dpflow_lpm4_destroy(before);
	dpflow_lpm4_destroy(t);
}

/* Few groups under churn: groups come and go, answers stay right. */
Test(lpm4, group_churn)
{
	struct dpflow_lpm4_image *t = new4(2000, 300);
	struct dpflow_lpm_info info;
	struct ref4 ref;
	unsigned nospc = 0;

	rng_seed(99);
	ref4_init(&ref, 2000);
	for (unsigned round = 0; round < 6000; round++) {
		if (ref.n < 300 || rng_below(100) < 60) {
			uint32_t a = ip4(10, 0, 0, 0) | (rng32() & 0x000fffffu);
			unsigned l = 12 + rng_below(21);
			uint32_t v = rng_below(8) ? round : 0x80000000u | round;
			int rc;

			a &= m4(l);
			rc = dpflow_lpm4_add(t, a, l, v, NULL);
			if (rc == -ENOSPC) {
				nospc++;
				continue;
			}
			if (rc == -EEXIST)
				continue;
			cr_assert_eq(rc, 0);
			ref4_add(&ref, a, l, v);
		} else {
			uint32_t k = rng_below(ref.n);
			int rc = dpflow_lpm4_delete(t, ref.r[k].addr,
						    ref.r[k].len, NULL, NULL);

			if (rc == -ENOSPC) {
				nospc++;
				continue;
			}
			cr_assert_eq(rc, 0);
			ref4_del(&ref, k);
		}
		if (round % 1500 == 1499) {
			verify4(t);
			check4(t, &ref, 20000);
		}
	}
	dpflow_lpm4_info(t, &info);
	cr_assert_gt(nospc, 0);
	cr_assert_leq(info.n_groups, 300);
	free(ref.r);
	dpflow_lpm4_destroy(t);
}

/* Copies answer the same; changes to a copy stay in it; replays agree. */
Test(lpm4, copy_clone_replay)
{
	struct dpflow_lpm4_image *a = new4(2000, 0), *b = new4(2000, 0), *c;
	struct dpflow_error err = {0};
	size_t size = dpflow_lpm4_image_bytes(a);
	void *raw = aligned_alloc(64, size);
	struct ref4 ref;

	cr_assert_not_null(raw);
	rng_seed(5);
	ref4_init(&ref, 2000);
	while (ref.n < 1500) {
		uint32_t x;
		unsigned l;

		prefix4_pick(&ref, &x, &l);
		if (dpflow_lpm4_add(a, x, l, ref.n, NULL) == 0) {
			cr_assert_eq(dpflow_lpm4_add(b, x, l, ref.n, NULL), 0);
			ref4_add(&ref, x, l, ref.n);
		}
	}
	for (uint32_t i = 0; i < 500; i++) {
		cr_assert_eq(dpflow_lpm4_delete(a, ref.r[i].addr, ref.r[i].len,
						NULL, NULL),
			     0);
		cr_assert_eq(dpflow_lpm4_delete(b, ref.r[i].addr, ref.r[i].len,
						NULL, NULL),
			     0);
	}
	/* replaying the same calls gives the same bytes */
	cr_assert_eq(memcmp(a, b, size), 0);
	cr_assert_eq(dpflow_lpm4_image_copy(raw, size - 1, a, &err), -EINVAL);
	cr_assert_str_eq(err.field, "dst_size");
	cr_assert_eq(dpflow_lpm4_image_copy((char *)raw + 4, size, a, &err),
		     -EINVAL);
	cr_assert_str_eq(err.field, "dst");
	cr_assert_eq(dpflow_lpm4_image_copy(raw, size, a, &err), 0);
	c = dpflow_lpm4_clone(a, &err);
	cr_assert_not_null(c);
	cr_assert_eq(dpflow_lpm4_image_check(raw, size, &err), 0);
	for (uint32_t i = 0; i < 100000; i++) {
		uint32_t x = addr4_pick(&ref), want = dpflow_lpm4_lookup(a, x);

		cr_assert_eq(dpflow_lpm4_lookup(raw, x), want);
		cr_assert_eq(dpflow_lpm4_lookup(c, x), want);
	}
	/* changing the copy leaves the original alone */
	if (dpflow_lpm4_add(c, 0, 0, 77, NULL) == -EEXIST)
		cr_assert_eq(dpflow_lpm4_update(c, 0, 0, 77, NULL), 0);
	cr_assert_eq(memcmp(a, raw, size), 0);
	cr_assert_neq(memcmp(a, c, size), 0);
	verify4(c);
	free(raw);
	free(ref.r);
	dpflow_lpm4_destroy(a);
	dpflow_lpm4_destroy(b);
	dpflow_lpm4_destroy(c);
}

/* Bulk lookups of every small size match single lookups and count hits. */
Test(lpm4, bulk_matches_single)
{
	static const uint32_t sizes[] = {0,  1,	 2,  31,  32, 33,
					 63, 64, 65, 100, 256};
	struct dpflow_lpm4_image *t = new4(5000, 0);
	uint32_t addrs[256], vals[256];
	struct ref4 ref;

	rng_seed(11);
	ref4_init(&ref, 5000);
	while (ref.n < 5000) {
		uint32_t a;
		unsigned l;

		prefix4_pick(&ref, &a, &l);
		if (dpflow_lpm4_add(t, a, l, ref.n, NULL) == 0)
			ref4_add(&ref, a, l, ref.n);
	}
	for (unsigned s = 0; s < DPFLOW_ARRAY_SIZE(sizes); s++) {
		for (unsigned rep = 0; rep < 50; rep++) {
			uint32_t hits = 0;

			for (uint32_t i = 0; i < sizes[s]; i++)
				addrs[i] = addr4_pick(&ref);
			vals[sizes[s] < 256 ? sizes[s] : 255] = 0x5a5a5a5a;
			cr_assert_eq(
			    dpflow_lpm4_lookup_bulk_impl(t, addrs, sizes[s],
							 vals),
			    dpflow_lpm4_lookup_bulk(t, addrs, sizes[s], vals));
			for (uint32_t i = 0; i < sizes[s]; i++) {
				cr_assert_eq(vals[i],
					     dpflow_lpm4_lookup(t, addrs[i]));
				hits += vals[i] != DPFLOW_TABLE_MISS;
			}
			if (sizes[s] < 256)
				cr_assert_eq(vals[sizes[s]], 0x5a5a5a5a,
					     "bulk wrote past n");
			cr_assert_eq(
			    dpflow_lpm4_lookup_bulk(t, addrs, sizes[s], vals),
			    hits);
		}
	}
	free(ref.r);
	dpflow_lpm4_destroy(t);
}

/*
 * A larger realistic set (mostly /24, some /8../32) against a per-length
 * reference: for each length, a sorted array searched with bsearch.
 */
static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

Test(lpm4, large_realistic_set)
{
	const uint32_t n = 60000;
	struct dpflow_lpm4_image *t = new4(n, 0);
	uint64_t *bylen[33];
	uint32_t cnt[33] = {0};
	uint32_t *pa = malloc(n * sizeof(*pa)), bad = 0;
	uint8_t *pl = malloc(n);
	uint32_t added = 0;

	cr_assert(pa && pl);
	rng_seed(2024);
	for (unsigned l = 0; l <= 32; l++) {
		bylen[l] = malloc(n * sizeof(uint64_t));
		cr_assert_not_null(bylen[l]);
	}
	while (added < n) {
		uint32_t k = rng_below(100), a;
		unsigned l = k < 1    ? 8 + rng_below(8)
			     : k < 10 ? 16 + rng_below(6)
			     : k < 30 ? 22 + rng_below(2)
			     : k < 90 ? 24
				      : 25 + rng_below(8);

		a = rng32() & m4(l);
		if (dpflow_lpm4_add(t, a, l, added, NULL) != 0)
			continue;
		bylen[l][cnt[l]++] = (uint64_t)a << 32 | added;
		pa[added] = a;
		pl[added] = (uint8_t)l;
		added++;
	}
	verify4(t);
	for (unsigned l = 0; l <= 32; l++)
		qsort(bylen[l], cnt[l], sizeof(uint64_t), cmp_u64);
	for (uint32_t i = 0; i < 300000; i++) {
		uint32_t x = rng_below(2)
				 ? rng32()
				 : pa[i % n] | (rng32() & ~m4(pl[i % n]));
		uint32_t want = DPFLOW_TABLE_MISS;

		for (int l = 32; l >= 0; l--) {
			uint64_t lo = (uint64_t)(x & m4((unsigned)l)) << 32;
			uint32_t a = 0, b = cnt[l];

			while (a < b) { /* first element >= lo */
				uint32_t mid = (a + b) / 2;

				if (bylen[l][mid] < lo)
					a = mid + 1;
				else
					b = mid;
			}
			if (a < cnt[l] && (bylen[l][a] >> 32) == (lo >> 32)) {
				want = (uint32_t)bylen[l][a];
				break;
			}
		}
		bad += dpflow_lpm4_lookup(t, x) != want;
	}
	cr_assert_eq(bad, 0, "%u lookups differ", bad);
	for (unsigned l = 0; l <= 32; l++)
		free(bylen[l]);
	free(pa);
	free(pl);
	dpflow_lpm4_destroy(t);
}

/* ---------------------------------------------- IPv6 naive reference */

struct rule6 {
	uint8_t addr[16];
	unsigned len;
	uint32_t value;
};

struct ref6 {
	struct rule6 *r;
	uint32_t n, cap;
};

static void mask6(uint8_t *a, unsigned len)
{
	for (unsigned i = 0; i < 16; i++) {
		unsigned bits = len > 8 * i ? len - 8 * i : 0;

		if (bits < 8)
			a[i] &= (uint8_t)(0xff00u >> bits);
	}
}

static bool covers6(const struct rule6 *r, const uint8_t *a)
{
	unsigned full = r->len / 8, rest = r->len % 8;

	if (memcmp(r->addr, a, full))
		return false;
	return rest == 0 ||
	       ((r->addr[full] ^ a[full]) & (uint8_t)(0xff00u >> rest)) == 0;
}

static uint32_t ref6_lookup(const struct ref6 *ref, const uint8_t *a)
{
	uint32_t v = DPFLOW_TABLE_MISS;
	int best = -1;

	for (uint32_t i = 0; i < ref->n; i++) {
		const struct rule6 *r = &ref->r[i];

		if ((int)r->len > best && covers6(r, a)) {
			best = (int)r->len;
			v = r->value;
		}
	}
	return v;
}

static int ref6_index(const struct ref6 *ref, const uint8_t *a, unsigned len)
{
	for (uint32_t i = 0; i < ref->n; i++)
		if (ref->r[i].len == len && !memcmp(ref->r[i].addr, a, 16))
			return (int)i;
	return -1;
}

static void ref6_init(struct ref6 *ref, uint32_t cap)
{
	ref->r = calloc(cap, sizeof(*ref->r));
	cr_assert_not_null(ref->r);
	ref->n = 0;
	ref->cap = cap;
}

static void ref6_add(struct ref6 *ref, const uint8_t *a, unsigned len,
		     uint32_t v)
{
	cr_assert_lt(ref->n, ref->cap);
	memcpy(ref->r[ref->n].addr, a, 16);
	ref->r[ref->n].len = len;
	ref->r[ref->n].value = v;
	ref->n++;
}

static void rand_bytes(uint8_t *a, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		a[i] = (uint8_t)rng32();
}

static struct dpflow_lpm6_image *new6(uint32_t max_rules, uint32_t groups)
{
	struct dpflow_lpm6_params p = {.max_rules = max_rules,
				       .max_groups = groups};
	struct dpflow_error err = {0};
	struct dpflow_lpm6_image *t = dpflow_lpm6_create(&p, &err);

	cr_assert_not_null(t, "lpm6_create: %s", err.msg);
	return t;
}

static void verify6(const struct dpflow_lpm6_image *t)
{
	struct dpflow_error err = {0};

	cr_assert_eq(dpflow_lpm6_verify(t, &err), 0, "lpm6 verify: %s",
		     err.msg);
}

/* Bases that the random prefixes cluster under (as real tables do). */
static const uint8_t base6[4][4] = {
    {0x20, 0x01, 0x0d, 0xb8},
    {0x20, 0x01, 0x0d, 0xb9},
    {0x2a, 0x00, 0x14, 0x50},
    {0xfe, 0x80, 0x00, 0x00},
};

static void prefix6_pick(const struct ref6 *ref, uint8_t *a, unsigned *len)
{
	uint32_t k = rng_below(100);
	unsigned l;

	if (k < 3)
		l = rng_below(16);
	else if (k < 30)
		l = 16 + rng_below(33); /* /16../48 */
	else if (k < 85)
		l = 48 + rng_below(17); /* /48../64 */
	else
		l = 65 + rng_below(64); /* /65../128 */
	rand_bytes(a, 16);
	if (ref->n && rng_below(2)) {
		const struct rule6 *r = &ref->r[rng_below(ref->n)];
		uint8_t keep[16];

		/* nested under an existing rule: its bits, then random */
		memcpy(keep, r->addr, 16);
		for (unsigned i = 0; i < 16; i++) {
			unsigned bits = r->len > 8 * i ? r->len - 8 * i : 0;
			uint8_t m =
			    bits >= 8 ? 0xff : (uint8_t)(0xff00u >> bits);

			a[i] = (uint8_t)((keep[i] & m) | (a[i] & ~m));
		}
		if (rng_below(4) == 0) /* or a sibling of it */
			a[rng_below(16)] ^= (uint8_t)(1u << rng_below(8));
	} else if (rng_below(4)) {
		memcpy(a, base6[rng_below(4)], 4);
	}
	mask6(a, l);
	*len = l;
}

static void addr6_pick(const struct ref6 *ref, uint8_t *a)
{
	uint32_t k = rng_below(10);
	const struct rule6 *r;

	rand_bytes(a, 16);
	if (ref->n == 0 || k < 3) {
		if (k == 0)
			memcpy(a, base6[rng_below(4)], 4);
		return;
	}
	r = &ref->r[rng_below(ref->n)];
	for (unsigned i = 0; i < 16; i++) {
		unsigned bits = r->len > 8 * i ? r->len - 8 * i : 0;
		uint8_t m = bits >= 8 ? 0xff : (uint8_t)(0xff00u >> bits);

		if (k == 9) /* the rule's first address */
			a[i] = 0;
		a[i] = (uint8_t)((r->addr[i] & m) | (a[i] & ~m));
	}
}

static void check6(const struct dpflow_lpm6_image *t, const struct ref6 *ref,
		   uint32_t n)
{
	uint8_t addrs[64 * 16];
	uint32_t got[64], bad = 0;

	for (uint32_t done = 0; done < n; done += 64) {
		uint32_t m = n - done < 64 ? n - done : 64, hits, ref_hits = 0;

		for (uint32_t i = 0; i < m; i++)
			addr6_pick(ref, addrs + 16 * i);
		hits = dpflow_lpm6_lookup_bulk(t, addrs, m, got);
		for (uint32_t i = 0; i < m; i++) {
			uint32_t want = ref6_lookup(ref, addrs + 16 * i);

			ref_hits += want != DPFLOW_TABLE_MISS;
			if (got[i] != want ||
			    dpflow_lpm6_lookup(t, addrs + 16 * i) != want) {
				if (!bad)
					cr_log_error("lookup %u: got %#x, want "
						     "%#x",
						     i, got[i], want);
				bad++;
			}
		}
		cr_assert_eq(hits, ref_hits);
	}
	cr_assert_eq(bad, 0, "%u of %u lookups differ from the reference", bad,
		     n);
}

/* ------------------------------------------------------ IPv6 tests */

Test(lpm6, params_and_init)
{
	struct dpflow_lpm6_params p = {.max_rules = 0};
	struct dpflow_error err = {0};
	struct dpflow_lpm6_image *t;
	struct dpflow_lpm_info info;
	uint8_t a[16];

	cr_assert_null(dpflow_lpm6_create(&p, &err));
	cr_assert_str_eq(err.field, "max_rules");
	p.max_rules = 10;
	p.max_groups = DPFLOW_LPM6_GROUPS_MAX + 1;
	cr_assert_null(dpflow_lpm6_create(&p, &err));
	cr_assert_str_eq(err.field, "max_groups");
	p.max_groups = 0;
	t = dpflow_lpm6_create(&p, &err);
	cr_assert_not_null(t);
	dpflow_lpm6_info(t, &info);
	cr_assert_eq(info.max_groups, 4 * 10 + 64);
	cr_assert_eq(dpflow_lpm6_image_check(t, info.size, &err), 0);
	cr_assert_eq(dpflow_lpm4_image_check(t, info.size, &err), -EINVAL);
	for (unsigned i = 0; i < 1000; i++) {
		rand_bytes(a, 16);
		cr_assert_eq(dpflow_lpm6_lookup(t, a), DPFLOW_TABLE_MISS);
	}
	verify6(t);
	dpflow_lpm6_destroy(t);
}

Test(lpm6, prefix_validation)
{
	struct dpflow_lpm6_image *t = new6(16, 0);
	struct dpflow_error err = {0};
	uint8_t a[16] = {0x20, 0x01, 0x0d, 0xb8};
	uint32_t v;

	cr_assert_eq(dpflow_lpm6_add(t, a, 129, 1, &err), -EINVAL);
	cr_assert_str_eq(err.field, "len");
	cr_assert_eq(dpflow_lpm6_add(t, a, 16, 1, &err), -EINVAL);
	cr_assert_str_eq(err.field, "addr");
	cr_assert_eq(dpflow_lpm6_add(t, NULL, 16, 1, &err), -EINVAL);
	cr_assert_eq(dpflow_lpm6_add(t, a, 32, DPFLOW_TABLE_MISS, &err),
		     -EINVAL);
	cr_assert_str_eq(err.field, "value");
	cr_assert_eq(dpflow_lpm6_add(t, a, 32, 3, &err), 0);
	cr_assert_eq(dpflow_lpm6_add(t, a, 32, 4, &err), -EEXIST);
	cr_assert_eq(dpflow_lpm6_delete(t, a, 48, NULL, &err), -ENOENT);
	cr_assert_eq(dpflow_lpm6_update(t, a, 48, 1, &err), -ENOENT);
	cr_assert_eq(dpflow_lpm6_find(t, a, 32, &v), 0);
	cr_assert_eq(v, 3);
	a[15] = 1;
	cr_assert_eq(dpflow_lpm6_add(t, a, 127, 1, &err), -EINVAL);
	cr_assert_eq(dpflow_lpm6_add(t, a, 128, 9, &err), 0);
	cr_assert_eq(dpflow_lpm6_lookup(t, a), 9);
	verify6(t);
	dpflow_lpm6_destroy(t);
}

Test(lpm6, edges_and_nesting)
{
	static const unsigned lens[] = {0,  1,	15, 16,	 17,  24,  25, 32,
					47, 48, 64, 100, 120, 121, 127};
	struct dpflow_lpm6_image *t = new6(64, 200);
	uint8_t host[16], p[16], x[16];
	struct dpflow_lpm_info info;
	uint32_t old = 0;

	/* one chain of nested prefixes of a host route */
	memcpy(host,
	       (const uint8_t[16]){0x20, 0x01, 0x0d, 0xb8, 0x12, 0x34, 0x56,
				   0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x11, 0x22,
				   0x33, 0x44},
	       16);
	for (unsigned i = 0; i < DPFLOW_ARRAY_SIZE(lens); i++) {
		memcpy(p, host, 16);
		mask6(p, lens[i]);
		cr_assert_eq(
		    dpflow_lpm6_add(t, p, lens[i], 1000 + lens[i], NULL), 0);
	}
	cr_assert_eq(dpflow_lpm6_add(t, host, 128, 1128, NULL), 0);
	verify6(t);
	cr_assert_eq(dpflow_lpm6_lookup(t, host), 1128);
	/* flip bit b: the longest prefix no longer covering it is < b + 1 */
	for (unsigned b = 0; b < 128; b++) {
		uint32_t want = 1000;

		memcpy(x, host, 16);
		x[b / 8] ^= (uint8_t)(0x80u >> (b % 8));
		for (unsigned i = 0; i < DPFLOW_ARRAY_SIZE(lens); i++)
			if (lens[i] <= b)
				want = 1000 + lens[i];
		cr_assert_eq(dpflow_lpm6_lookup(t, x), want, "bit %u", b);
	}
	/* deleting restores the next-shorter prefix */
	memcpy(p, host, 16);
	mask6(p, 48);
	cr_assert_eq(dpflow_lpm6_delete(t, p, 48, &old, NULL), 0);
	cr_assert_eq(old, 1048);
	memcpy(x, host, 16);
	x[7] ^= 1; /* bit 63 differs: /48 used to match */
	cr_assert_eq(dpflow_lpm6_lookup(t, x), 1047);
	cr_assert_eq(dpflow_lpm6_delete(t, host, 128, NULL, NULL), 0);
	cr_assert_eq(dpflow_lpm6_lookup(t, host), 1127);
	memset(p, 0, 16);
	cr_assert_eq(dpflow_lpm6_delete(t, p, 0, NULL, NULL), 0);
	memset(x, 0xff, 16);
	cr_assert_eq(dpflow_lpm6_lookup(t, x), DPFLOW_TABLE_MISS);
	cr_assert_eq(
	    dpflow_lpm6_update(t, (const uint8_t[16]){0x00}, 1, 7, NULL), 0);
	cr_assert_eq(dpflow_lpm6_lookup(t, (const uint8_t[16]){0x30}), 7);
	/* two halves of a /24 with one value stay two rules */
	cr_assert_eq(
	    dpflow_lpm6_add(t, (const uint8_t[16]){0x40, 0, 0, 0}, 25, 9, NULL),
	    0);
	cr_assert_eq(dpflow_lpm6_add(t, (const uint8_t[16]){0x40, 0, 0, 0x80},
				     25, 9, NULL),
		     0);
	verify6(t);
	cr_assert_eq(dpflow_lpm6_delete(t, (const uint8_t[16]){0x40, 0, 0, 0},
					25, NULL, NULL),
		     0);
	cr_assert_eq(dpflow_lpm6_lookup(t, (const uint8_t[16]){0x40, 0, 0, 1}),
		     7);
	cr_assert_eq(
	    dpflow_lpm6_lookup(t, (const uint8_t[16]){0x40, 0, 0, 0x81}), 9);
	cr_assert_eq(dpflow_lpm6_delete(t,
					(const uint8_t[16]){0x40, 0, 0, 0x80},
					25, NULL, NULL),
		     0);
	verify6(t);
	/* delete the rest: no group stays */
	for (unsigned i = 0; i < DPFLOW_ARRAY_SIZE(lens); i++) {
		if (lens[i] == 0 || lens[i] == 48)
			continue;
		memcpy(p, host, 16);
		mask6(p, lens[i]);
		cr_assert_eq(dpflow_lpm6_delete(t, p, lens[i], NULL, NULL), 0);
	}
	dpflow_lpm6_info(t, &info);
	cr_assert_eq(info.n_groups, 0);
	cr_assert_eq(info.n_rules, 0);
	verify6(t);
	dpflow_lpm6_destroy(t);
}

Test(lpm6, random_vs_reference)
{
	static const uint64_t seeds[] = {3, 77, 4242};
	uint32_t total = 0;

	for (unsigned s = 0; s < DPFLOW_ARRAY_SIZE(seeds); s++) {
		struct dpflow_lpm6_image *t = new6(500, 0);
		struct ref6 ref;

		rng_seed(seeds[s]);
		ref6_init(&ref, 500);
		for (unsigned phase = 0; phase < 6; phase++) {
			unsigned adds = 60 + rng_below(120);
			unsigned dels = phase & 1 ? ref.n / 2 : ref.n / 5;

			for (unsigned i = 0; i < adds && ref.n < 500; i++) {
				uint8_t a[16];
				uint32_t v =
				    rng_below(3) ? rng32() >> 1 : rng_below(4);
				unsigned l;
				int rc;

				prefix6_pick(&ref, a, &l);
				if (phase == 1 && i == 0) {
					memset(a, 0, 16);
					l = 0;
				}
				rc = dpflow_lpm6_add(t, a, l, v, NULL);
				if (ref6_index(&ref, a, l) >= 0) {
					cr_assert_eq(rc, -EEXIST);
					continue;
				}
				cr_assert_eq(rc, 0, "add /%u: %d", l, rc);
				ref6_add(&ref, a, l, v);
			}
			verify6(t);
			check6(t, &ref, 40000);
			total += 40000;
			for (unsigned i = 0; i < dels && ref.n; i++) {
				uint32_t k = rng_below(ref.n), old = 0;

				cr_assert_eq(dpflow_lpm6_delete(
						 t, ref.r[k].addr, ref.r[k].len,
						 &old, NULL),
					     0);
				cr_assert_eq(old, ref.r[k].value);
				ref.r[k] = ref.r[--ref.n];
			}
			verify6(t);
			check6(t, &ref, 30000);
			total += 30000;
		}
		free(ref.r);
		dpflow_lpm6_destroy(t);
	}
	cr_assert_geq(total, 1000000);
}

Test(lpm6, delete_all_misses)
{
	struct dpflow_lpm6_image *t = new6(2000, 0), *fresh = new6(2000, 0);
	struct dpflow_lpm_info info;
	struct ref6 ref;
	uint8_t a[16];

	rng_seed(8);
	ref6_init(&ref, 2000);
	while (ref.n < 2000) {
		unsigned l;

		prefix6_pick(&ref, a, &l);
		if (dpflow_lpm6_add(t, a, l, ref.n, NULL) == 0)
			ref6_add(&ref, a, l, ref.n);
	}
	dpflow_lpm6_info(t, &info);
	cr_assert_gt(info.n_groups, 100);
	check6(t, &ref, 20000);
	while (ref.n) {
		uint32_t k = rng_below(ref.n);

		cr_assert_eq(dpflow_lpm6_delete(t, ref.r[k].addr, ref.r[k].len,
						NULL, NULL),
			     0);
		ref.r[k] = ref.r[--ref.n];
	}
	verify6(t);
	dpflow_lpm6_info(t, &info);
	cr_assert_eq(info.n_groups, 0);
	cr_assert_eq(info.n_rules, 0);
	for (uint32_t i = 0; i < DPFLOW_LPM6_TBL_SIZE; i++)
		cr_assert(dpflow_lpm6_tbl_c(t)[i].v == DPFLOW_TABLE_MISS &&
			      dpflow_lpm6_tbl_c(t)[i].info == 0,
			  "entry %u not empty", i);
	for (uint32_t i = 0; i < 100000; i++) {
		rand_bytes(a, 16);
		cr_assert_eq(dpflow_lpm6_lookup(t, a), DPFLOW_TABLE_MISS);
	}
	dpflow_lpm6_clear(t);
	cr_assert_eq(memcmp(t, fresh, dpflow_lpm6_image_bytes(t)), 0);
	free(ref.r);
	dpflow_lpm6_destroy(t);
	dpflow_lpm6_destroy(fresh);
}

Test(lpm6, failed_calls_leave_image_identical)
{
	struct dpflow_lpm6_image *t = new6(20, 12), *before;
	struct dpflow_error err = {0};
	size_t size = dpflow_lpm6_image_bytes(t);
	uint8_t a[16] = {0x20, 0x01, 0x0d, 0xb8};
	unsigned n = 0;

	/* a /128 needs 14 groups: more than there are */
	memset(a + 4, 0x55, 12);
	before = dpflow_lpm6_clone(t, NULL);
	cr_assert_eq(dpflow_lpm6_add(t, a, 128, 1, &err), -ENOSPC);
	cr_assert_str_eq(err.field, "max_groups");
	cr_assert_eq(memcmp(t, before, size), 0);
	dpflow_lpm6_destroy(before);
	/* /64s under one /32: 4 groups for the first, 2 more for each */
	for (unsigned i = 0; i < 10; i++) {
		int rc;

		memset(a + 4, 0, 12);
		a[5] = (uint8_t)i;
		before = dpflow_lpm6_clone(t, NULL);
		rc = dpflow_lpm6_add(t, a, 64, i, &err);
		if (rc) {
			cr_assert_eq(rc, -ENOSPC);
			cr_assert_eq(memcmp(t, before, size), 0);
		} else {
			n++;
		}
		dpflow_lpm6_destroy(before);
	}
	/* the first takes 6 groups (levels 1..6), each next one 2 more */
	cr_assert_eq(n, 4);
	verify6(t);
	/* fill the rule table with short prefixes, then fail every way */
	for (unsigned i = 0; n < 20; i++, n++) {
		uint8_t s[16] = {(uint8_t)(0x30 + i)};

		cr_assert_eq(dpflow_lpm6_add(t, s, 8, i, &err), 0, "%s",
			     err.msg);
	}
	before = dpflow_lpm6_clone(t, NULL);
	{
		uint8_t s[16] = {0xf0};

		cr_assert_eq(dpflow_lpm6_add(t, s, 8, 1, &err), -ENOSPC);
		cr_assert_str_eq(err.field, "max_rules");
		s[0] = 0x30;
		cr_assert_eq(dpflow_lpm6_add(t, s, 8, 1, &err), -EEXIST);
		s[1] = 1;
		cr_assert_eq(dpflow_lpm6_add(t, s, 8, 1, &err), -EINVAL);
		cr_assert_eq(dpflow_lpm6_delete(t, s, 16, NULL, &err), -ENOENT);
	}
	cr_assert_eq(memcmp(t, before, size), 0);
	dpflow_lpm6_destroy(before);
	dpflow_lpm6_destroy(t);
}

Test(lpm6, copy_clone_replay_bulk)
{
	static const uint32_t sizes[] = {0, 1, 31, 32, 33, 64, 100, 256};
	struct dpflow_lpm6_image *a = new6(1500, 0), *b = new6(1500, 0), *c;
	struct dpflow_error err = {0};
	size_t size = dpflow_lpm6_image_bytes(a);
	void *raw = aligned_alloc(64, size);
	uint8_t addrs[256 * 16];
	uint32_t vals[256];
	struct ref6 ref;

	cr_assert_not_null(raw);
	rng_seed(6);
	ref6_init(&ref, 1500);
	while (ref.n < 1200) {
		uint8_t x[16];
		unsigned l;

		prefix6_pick(&ref, x, &l);
		if (dpflow_lpm6_add(a, x, l, ref.n, NULL) == 0) {
			cr_assert_eq(dpflow_lpm6_add(b, x, l, ref.n, NULL), 0);
			ref6_add(&ref, x, l, ref.n);
		}
	}
	for (uint32_t i = 0; i < 400; i++) {
		cr_assert_eq(dpflow_lpm6_delete(a, ref.r[i].addr, ref.r[i].len,
						NULL, NULL),
			     0);
		cr_assert_eq(dpflow_lpm6_delete(b, ref.r[i].addr, ref.r[i].len,
						NULL, NULL),
			     0);
	}
	cr_assert_eq(memcmp(a, b, size), 0);
	cr_assert_eq(dpflow_lpm6_image_copy(raw, size - 64, a, &err), -EINVAL);
	cr_assert_str_eq(err.field, "dst_size");
	cr_assert_eq(dpflow_lpm6_image_copy(raw, size, a, &err), 0);
	c = dpflow_lpm6_clone(a, &err);
	cr_assert_not_null(c);
	for (unsigned s = 0; s < DPFLOW_ARRAY_SIZE(sizes); s++) {
		for (unsigned rep = 0; rep < 40; rep++) {
			uint32_t hits = 0;

			for (uint32_t i = 0; i < sizes[s]; i++)
				addr6_pick(&ref, addrs + 16 * i);
			for (uint32_t i = 0; i < sizes[s]; i++)
				hits += dpflow_lpm6_lookup(a, addrs + 16 * i) !=
					DPFLOW_TABLE_MISS;
			cr_assert_eq(
			    dpflow_lpm6_lookup_bulk(raw, addrs, sizes[s], vals),
			    hits);
			for (uint32_t i = 0; i < sizes[s]; i++) {
				uint32_t want =
				    dpflow_lpm6_lookup(a, addrs + 16 * i);

				cr_assert_eq(vals[i], want);
				cr_assert_eq(
				    dpflow_lpm6_lookup(c, addrs + 16 * i),
				    want);
			}
		}
	}
	{
		uint8_t z[16] = {0};

		if (dpflow_lpm6_add(c, z, 0, 5, NULL) == -EEXIST)
			cr_assert_eq(dpflow_lpm6_update(c, z, 0, 5, NULL), 0);
	}
	cr_assert_eq(memcmp(a, raw, size), 0);
	cr_assert_neq(memcmp(a, c, size), 0);
	verify6(c);
	free(raw);
	free(ref.r);
	dpflow_lpm6_destroy(a);
	dpflow_lpm6_destroy(b);
	dpflow_lpm6_destroy(c);
}

/* ------------------------------ Wide trie keys (key_bytes 20 and 24) */

/*
 * Keys of exact fields followed by an IPv6 address, as LPM pipes with a
 * VRF id or registers before the address make them: the first kb - 16
 * bytes are 32-bit "VRF" words from a small set, so that many rules share
 * them, then an address clustered as in prefix6_pick. The reference is the
 * same naive scan, over key_bytes bytes, with its rules kept sorted
 * longest first so that a hit ends the scan.
 */
struct rulek {
	uint8_t key[DPFLOW_LPM6_KEY_MAX];
	unsigned len;
	uint32_t value;
};

struct refk {
	struct rulek *r;
	uint32_t n, cap;
	unsigned kb;
};

static const uint32_t vrfs[] = {0, 1, 2, 0x80000000u, 0xffffffffu};

static void maskk(uint8_t *a, unsigned kb, unsigned len)
{
	for (unsigned i = 0; i < kb; i++) {
		unsigned bits = len > 8 * i ? len - 8 * i : 0;

		if (bits < 8)
			a[i] &= (uint8_t)(0xff00u >> bits);
	}
}

static bool coversk(const struct rulek *r, const uint8_t *a)
{
	unsigned full = r->len / 8, rest = r->len % 8;

	if (memcmp(r->key, a, full))
		return false;
	return rest == 0 ||
	       ((r->key[full] ^ a[full]) & (uint8_t)(0xff00u >> rest)) == 0;
}

static int cmp_rulek(const void *x, const void *y)
{
	const struct rulek *a = x, *b = y;

	return (int)b->len - (int)a->len;
}

static void refk_sort(struct refk *ref)
{
	qsort(ref->r, ref->n, sizeof(*ref->r), cmp_rulek);
}

/* Longest first (refk_sort): the first rule that covers @a wins. */
static uint32_t refk_lookup(const struct refk *ref, const uint8_t *a)
{
	for (uint32_t i = 0; i < ref->n; i++)
		if (coversk(&ref->r[i], a))
			return ref->r[i].value;
	return DPFLOW_TABLE_MISS;
}

static int refk_index(const struct refk *ref, const uint8_t *a, unsigned len)
{
	for (uint32_t i = 0; i < ref->n; i++)
		if (ref->r[i].len == len && !memcmp(ref->r[i].key, a, ref->kb))
			return (int)i;
	return -1;
}

static void refk_add(struct refk *ref, const uint8_t *a, unsigned len,
		     uint32_t v)
{
	cr_assert_lt(ref->n, ref->cap);
	memset(ref->r[ref->n].key, 0, sizeof(ref->r[ref->n].key));
	memcpy(ref->r[ref->n].key, a, ref->kb);
	ref->r[ref->n].len = len;
	ref->r[ref->n].value = v;
	ref->n++;
}

static struct dpflow_lpm6_image *newk(uint32_t max_rules, unsigned kb)
{
	struct dpflow_lpm6_params p = {.max_rules = max_rules, .key_bytes = kb};
	struct dpflow_error err = {0};
	struct dpflow_lpm6_image *t = dpflow_lpm6_create(&p, &err);

	cr_assert_not_null(t, "lpm6_create (key_bytes %u): %s", kb, err.msg);
	return t;
}

/* Random exact words from vrfs[] (or random), then an address. */
static void keyk_fill(uint8_t *a, unsigned kb)
{
	uint8_t r[DPFLOW_LPM6_KEY_MAX];
	unsigned exact = kb - 16;

	rand_bytes(r, sizeof(r));
	memcpy(a, r, kb);
	for (unsigned w = 0; w < exact / 4; w++) {
		uint32_t v = rng_below(8) ? vrfs[rng_below(5)] : rng32();

		a[4 * w] = (uint8_t)(v >> 24);
		a[4 * w + 1] = (uint8_t)(v >> 16);
		a[4 * w + 2] = (uint8_t)(v >> 8);
		a[4 * w + 3] = (uint8_t)v;
	}
	if (rng_below(4))
		memcpy(a + exact, base6[rng_below(4)], 4);
}

static void prefixk_pick(const struct refk *ref, uint8_t *a, unsigned *len)
{
	unsigned kb = ref->kb, ebits = 8 * (kb - 16), l;
	uint32_t k = rng_below(100);

	if (k < 4)
		l = rng_below(8 * kb + 1); /* anywhere, exact part included */
	else if (k < 8)
		l = ebits; /* a VRF's default route */
	else if (k < 12)
		l = 8 * kb; /* host route */
	else if (k < 40)
		l = ebits + 16 + rng_below(33); /* /16../48 in the VRF */
	else if (k < 85)
		l = ebits + 48 + rng_below(17); /* /48../64 */
	else
		l = ebits + 65 + rng_below(64); /* /65../128 */
	keyk_fill(a, kb);
	if (ref->n && rng_below(2)) {
		const struct rulek *r = &ref->r[rng_below(ref->n)];

		/* nested under an existing rule: its bits, then random */
		for (unsigned i = 0; i < kb; i++) {
			unsigned bits = r->len > 8 * i ? r->len - 8 * i : 0;
			uint8_t m =
			    bits >= 8 ? 0xff : (uint8_t)(0xff00u >> bits);

			a[i] = (uint8_t)((r->key[i] & m) | (a[i] & ~m));
		}
		if (rng_below(4) == 0) /* or a sibling of it */
			a[rng_below(kb)] ^= (uint8_t)(1u << rng_below(8));
	}
	maskk(a, kb, l);
	*len = l;
}

/*
 * Lookup keys: 30% random (VRFs from the set), the rest inside a rule:
 * random below its prefix, its first or last key, or the key just past
 * its first bit outside (flipping the prefix's last bit).
 */
static void keyk_pick(const struct refk *ref, uint8_t *a)
{
	uint32_t k = rng_below(10);
	const struct rulek *r;

	keyk_fill(a, ref->kb);
	if (ref->n == 0 || k < 3)
		return;
	r = &ref->r[rng_below(ref->n)];
	for (unsigned i = 0; i < ref->kb; i++) {
		unsigned bits = r->len > 8 * i ? r->len - 8 * i : 0;
		uint8_t m = bits >= 8 ? 0xff : (uint8_t)(0xff00u >> bits);

		if (k == 8) /* the rule's first key */
			a[i] = 0;
		else if (k == 9) /* its last key */
			a[i] = 0xff;
		a[i] = (uint8_t)((r->key[i] & m) | (a[i] & ~m));
	}
	if (k == 7 && r->len) /* just outside: the last prefix bit flipped */
		a[(r->len - 1) / 8] ^= (uint8_t)(0x80u >> ((r->len - 1) % 8));
}

/* @n lookups, bulk (in bursts of 1..64) and single, against @ref. */
static void checkk(const struct dpflow_lpm6_image *t, const struct refk *ref,
		   uint32_t n)
{
	uint8_t keys[64 * DPFLOW_LPM6_KEY_MAX];
	uint32_t got[64], bad = 0, kb = ref->kb;

	for (uint32_t done = 0; done < n;) {
		uint32_t m = rng_below(4) ? 64 : 1 + rng_below(64), hits,
			 ref_hits = 0;

		if (m > n - done)
			m = n - done;
		for (uint32_t i = 0; i < m; i++)
			keyk_pick(ref, keys + kb * i);
		hits = dpflow_lpm6_lookup_bulk(t, keys, m, got);
		for (uint32_t i = 0; i < m; i++) {
			uint32_t want = refk_lookup(ref, keys + kb * i);

			ref_hits += want != DPFLOW_TABLE_MISS;
			if (got[i] != want ||
			    dpflow_lpm6_lookup(t, keys + kb * i) != want) {
				if (!bad)
					cr_log_error("key_bytes %u lookup %u: "
						     "got %#x, want %#x",
						     kb, i, got[i], want);
				bad++;
			}
		}
		cr_assert_eq(hits, ref_hits);
		done += m;
	}
	cr_assert_eq(bad, 0, "%u of %u lookups differ from the reference", bad,
		     n);
}

/*
 * Random rule sets of keys of @kb bytes: phases of adds and overlapping
 * deletes, the /0 and full-length edges, checked against the reference.
 * Returns the lookups made.
 */
static uint32_t wide_random(unsigned kb, uint64_t seed, unsigned max_rules)
{
	struct dpflow_lpm6_image *t = newk(max_rules, kb);
	uint32_t total = 0;
	struct refk ref;

	rng_seed(seed);
	ref.r = calloc(max_rules, sizeof(*ref.r));
	cr_assert_not_null(ref.r);
	ref.n = 0;
	ref.cap = max_rules;
	ref.kb = kb;
	for (unsigned phase = 0; phase < 6; phase++) {
		unsigned adds = max_rules / 4 + rng_below(max_rules / 2);
		unsigned dels = phase & 1 ? ref.n / 2 : ref.n / 5;

		for (unsigned i = 0; i < adds && ref.n < max_rules; i++) {
			uint8_t a[DPFLOW_LPM6_KEY_MAX];
			uint32_t v = rng_below(3) ? rng32() >> 1 : rng_below(4);
			unsigned l;
			int rc;

			prefixk_pick(&ref, a, &l);
			if (i == 0 && phase == 1) { /* /0 */
				memset(a, 0, kb);
				l = 0;
			} else if (i == 0 && phase == 2) { /* all ones, /full */
				memset(a, 0xff, kb);
				l = 8 * kb;
			}
			rc = dpflow_lpm6_add(t, a, l, v, NULL);
			if (refk_index(&ref, a, l) >= 0) {
				cr_assert_eq(rc, -EEXIST);
				continue;
			}
			cr_assert_eq(rc, 0, "add /%u: %d", l, rc);
			refk_add(&ref, a, l, v);
		}
		refk_sort(&ref);
		verify6(t);
		checkk(t, &ref, 50000);
		total += 50000;
		for (unsigned i = 0; i < dels && ref.n; i++) {
			uint32_t k = rng_below(ref.n), old = 0;

			cr_assert_eq(dpflow_lpm6_delete(t, ref.r[k].key,
							ref.r[k].len, &old,
							NULL),
				     0);
			cr_assert_eq(old, ref.r[k].value);
			ref.r[k] = ref.r[--ref.n];
		}
		refk_sort(&ref);
		verify6(t);
		checkk(t, &ref, 40000);
		total += 40000;
	}
	/* delete all: every lookup misses, no group stays */
	while (ref.n) {
		cr_assert_eq(dpflow_lpm6_delete(t, ref.r[ref.n - 1].key,
						ref.r[ref.n - 1].len, NULL,
						NULL),
			     0);
		ref.n--;
	}
	checkk(t, &ref, 2000);
	total += 2000;
	cr_assert_eq(dpflow_lpm6_count(t), 0);
	verify6(t);
	{
		struct dpflow_lpm_info info;

		dpflow_lpm6_info(t, &info);
		cr_assert_eq(info.n_groups, 0);
	}
	free(ref.r);
	dpflow_lpm6_destroy(t);
	return total;
}

Test(lpm6_wide, random_vs_reference_20)
{
	uint32_t total = wide_random(20, 20, 300) + wide_random(20, 2020, 300) +
			 wide_random(20, 7, 60);

	cr_assert_geq(total, 500000);
}

Test(lpm6_wide, random_vs_reference_24)
{
	uint32_t total = wide_random(24, 24, 300) + wide_random(24, 2424, 300) +
			 wide_random(24, 9, 60);

	cr_assert_geq(total, 500000);
}

/* Parameters, prefix validation and the edges of 18-, 20- and 24-byte keys
 * (a VLAN, a VRF register, two registers before an IPv6 address). */
Test(lpm6_wide, params_and_edges)
{
	static const unsigned kbs[] = {18, 20, 24};
	struct dpflow_lpm6_params p = {.max_rules = 64, .key_bytes = 15};
	struct dpflow_error err = {0};
	struct dpflow_lpm6_image *t;
	struct dpflow_lpm_info info;

	cr_assert_null(dpflow_lpm6_create(&p, &err));
	cr_assert_str_eq(err.field, "key_bytes");
	p.key_bytes = DPFLOW_LPM6_KEY_MAX + 1;
	cr_assert_null(dpflow_lpm6_create(&p, &err));
	cr_assert_str_eq(err.field, "key_bytes");
	cr_assert_eq(dpflow_lpm6_image_size(&p), 0);
	p.key_bytes = 0; /* the default: 16 */
	t = dpflow_lpm6_create(&p, &err);
	cr_assert_not_null(t);
	cr_assert_eq(t->key_bytes, 16);
	cr_assert_eq(dpflow_lpm6_add(t, (const uint8_t[16]){0}, 129, 1, &err),
		     -EINVAL);
	cr_assert_str_eq(err.field, "len");
	dpflow_lpm6_destroy(t);

	for (unsigned s = 0; s < DPFLOW_ARRAY_SIZE(kbs); s++) {
		unsigned kb = kbs[s], full = 8 * kb;
		uint8_t host[DPFLOW_LPM6_KEY_MAX], k[DPFLOW_LPM6_KEY_MAX];
		uint8_t keys[3 * DPFLOW_LPM6_KEY_MAX];
		uint32_t vals[3], v = 0;
		struct dpflow_lpm6_image *c;
		size_t size;
		void *raw;

		t = newk(full + 4, kb);
		dpflow_lpm6_info(t, &info);
		cr_assert_eq(dpflow_lpm6_image_check(t, info.size, &err), 0);
		cr_assert_eq(t->key_bytes, kb);
		memset(k, 0, sizeof(k));
		cr_assert_eq(dpflow_lpm6_add(t, k, full + 1, 1, &err), -EINVAL);
		cr_assert_str_eq(err.field, "len");
		k[kb - 1] = 1;
		cr_assert_eq(dpflow_lpm6_add(t, k, full - 1, 1, &err), -EINVAL);
		cr_assert_str_eq(err.field, "addr");
		cr_assert_eq(dpflow_lpm6_add(t, k, full, 77, &err), 0);
		cr_assert_eq(dpflow_lpm6_lookup(t, k), 77);
		k[kb - 1] = 0;
		cr_assert_eq(dpflow_lpm6_lookup(t, k), DPFLOW_TABLE_MISS);
		cr_assert_eq(dpflow_lpm6_add(t, k, 0, 5, &err), 0);
		cr_assert_eq(dpflow_lpm6_lookup(t, k), 5);
		cr_assert_eq(dpflow_lpm6_add(t, k, 0, 6, &err), -EEXIST);
		k[kb - 1] = 1;
		cr_assert_eq(dpflow_lpm6_delete(t, k, full, &v, &err), 0);
		cr_assert_eq(v, 77);
		cr_assert_eq(dpflow_lpm6_delete(t, k, full, &v, &err), -ENOENT);
		cr_assert_eq(dpflow_lpm6_lookup(t, k), 5);
		verify6(t);

		/* every length on one host key's chain: flip bit b, the
		 * longest prefix left covering it is /b (values 1000 + L) */
		rng_seed(kb);
		rand_bytes(host, sizeof(host));
		for (unsigned l = 1; l <= full; l++) {
			memcpy(k, host, kb);
			maskk(k, kb, l);
			cr_assert_eq(dpflow_lpm6_add(t, k, l, 1000 + l, NULL),
				     0, "/%u", l);
		}
		verify6(t);
		cr_assert_eq(dpflow_lpm6_lookup(t, host), 1000 + full);
		for (unsigned b = 0; b < full; b++) {
			memcpy(k, host, kb);
			k[b / 8] ^= (uint8_t)(0x80u >> (b % 8));
			cr_assert_eq(dpflow_lpm6_lookup(t, k), b ? 1000 + b : 5,
				     "bit %u", b);
		}
		/* bulk lookups read keys kb bytes apart */
		memcpy(keys, host, kb);
		memcpy(keys + kb, host, kb);
		keys[kb + kb - 1] ^= 1;
		memset(keys + 2 * kb, 0, kb);
		keys[2 * kb] = (uint8_t)~host[0];
		cr_assert_eq(dpflow_lpm6_lookup_bulk(t, keys, 3, vals), 3);
		cr_assert_eq(vals[0], 1000 + full);
		cr_assert_eq(vals[1], 1000 + full - 1);
		cr_assert_eq(vals[2], 5);
		/* copies answer the same; a delete restores the next one */
		size = dpflow_lpm6_image_bytes(t);
		raw = aligned_alloc(64, size);
		cr_assert_not_null(raw);
		cr_assert_eq(dpflow_lpm6_image_copy(raw, size, t, &err), 0);
		c = dpflow_lpm6_clone(t, &err);
		cr_assert_not_null(c);
		memcpy(k, host, kb);
		maskk(k, kb, full - 40);
		cr_assert_eq(dpflow_lpm6_delete(c, k, full - 40, NULL, NULL),
			     0);
		memcpy(k, host, kb);
		k[(full - 30) / 8] ^= (uint8_t)(0x80u >> ((full - 30) % 8));
		cr_assert_eq(dpflow_lpm6_lookup(raw, k), 1000 + full - 30);
		k[(full - 40) / 8] ^= (uint8_t)(0x80u >> ((full - 40) % 8));
		cr_assert_eq(dpflow_lpm6_lookup(raw, k), 1000 + full - 40);
		cr_assert_eq(dpflow_lpm6_lookup(c, k), 1000 + full - 41);
		verify6(c);
		cr_assert_eq(dpflow_lpm6_update(c, host, full, 9, NULL), 0);
		cr_assert_eq(dpflow_lpm6_lookup(c, host), 9);
		cr_assert_eq(dpflow_lpm6_find(c, host, full, &v), 0);
		cr_assert_eq(v, 9);
		cr_assert_eq(memcmp(t, raw, size), 0);
		/* clear equals a fresh image byte for byte */
		dpflow_lpm6_clear(c);
		{
			struct dpflow_lpm6_image *f = newk(full + 4, kb);

			cr_assert_eq(memcmp(c, f, size), 0);
			dpflow_lpm6_destroy(f);
		}
		/* delete the chain: no group stays */
		for (unsigned l = 1; l <= full; l++) {
			memcpy(k, host, kb);
			maskk(k, kb, l);
			cr_assert_eq(dpflow_lpm6_delete(t, k, l, NULL, NULL),
				     0);
		}
		dpflow_lpm6_info(t, &info);
		cr_assert_eq(info.n_groups, 0);
		cr_assert_eq(info.n_rules, 1);
		verify6(t);
		free(raw);
		dpflow_lpm6_destroy(c);
		dpflow_lpm6_destroy(t);
	}
}
