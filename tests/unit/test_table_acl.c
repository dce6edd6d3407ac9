/*
 * ACL table tests (lib/flow/table_acl.h): rule list validation and its
 * all-or-nothing updates, known cases (priorities, ties, range and mask
 * edges), and random rule sets checked against a naive reference written
 * here: a linear scan of the rules keeping the best (priority, id). Keys
 * are half built to match a chosen rule, half random. Every random test
 * uses a fixed seed and prints it on failure.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow/table_acl.h"

/* ---- deterministic random numbers ---------------------------------------- */

static uint64_t rng_state;

static void rng_seed(uint64_t s)
{
	rng_state = s * 0x9e3779b97f4a7c15ull + 1;
}

static uint64_t rng64(void)
{
	/* splitmix64 */
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint32_t rng32(void)
{
	return (uint32_t)(rng64() >> 32);
}

/* Uniform in [0, n) (n > 0). */
static uint32_t rng_below(uint64_t n)
{
	return (uint32_t)(rng64() % n);
}

/* Uniform in [lo, hi]. */
static uint32_t rng_in(uint32_t lo, uint32_t hi)
{
	return lo + (uint32_t)(rng64() % ((uint64_t)hi - lo + 1));
}

/* ---- the naive reference ------------------------------------------------- */

struct ref {
	const struct dpflow_acl_layout *layout;
	struct dpflow_acl_rule *rules;
	uint32_t n;
};

static bool ref_field_match(const struct dpflow_acl_match *m, uint32_t k)
{
	if (m->type == DPFLOW_ACL_MATCH_RANGE)
		return m->lo <= k && k <= m->hi;
	return (k & m->mask) == m->value;
}

/* Rank order: priority, then id. */
static int ref_cmp(const void *x, const void *y)
{
	const struct dpflow_acl_rule *a = (const struct dpflow_acl_rule *)x;
	const struct dpflow_acl_rule *b = (const struct dpflow_acl_rule *)y;

	if (a->priority != b->priority)
		return a->priority < b->priority ? -1 : 1;
	return a->id < b->id ? -1 : a->id > b->id;
}

/* Put the reference's rules in rank order (after adding or deleting). */
static void ref_sort(struct ref *r)
{
	qsort(r->rules, r->n, sizeof(*r->rules), ref_cmp);
}

/* Value of the first rule in rank order matching @key: a linear scan. */
static uint32_t ref_lookup(const struct ref *r, const uint32_t *key)
{
	for (uint32_t i = 0; i < r->n; i++) {
		const struct dpflow_acl_rule *ru = &r->rules[i];
		bool ok = true;

		for (uint32_t f = 0; ok && f < r->layout->n_fields; f++)
			ok = ref_field_match(&ru->field[f], key[f]);
		if (ok)
			return ru->value;
	}
	return DPFLOW_TABLE_MISS;
}

/* Remove rule @id from the reference. */
static void ref_delete(struct ref *r, uint32_t id)
{
	for (uint32_t i = 0; i < r->n; i++)
		if (r->rules[i].id == id) {
			memmove(&r->rules[i], &r->rules[i + 1],
				(r->n - i - 1) * sizeof(*r->rules));
			r->n--;
			return;
		}
	cr_assert_fail("reference has no rule %u", id);
}

/* ---- random rules and keys ----------------------------------------------- */

static uint32_t wmax_of(unsigned width)
{
	return width == 32 ? UINT32_MAX : (1u << width) - 1;
}

/* A few values per field that rules and keys share, so that rules
 * overlap. */
#define POOL 12
static uint32_t pool[DPFLOW_ACL_FIELDS_MAX][POOL];

static void pool_init(const struct dpflow_acl_layout *l)
{
	for (uint32_t f = 0; f < l->n_fields; f++) {
		uint32_t wm = wmax_of(l->width[f]);

		for (unsigned i = 0; i < POOL; i++)
			pool[f][i] = rng32() & wm;
		pool[f][0] = 0;
		pool[f][1] = wm;
	}
}

static uint32_t pick_value(uint32_t f, uint32_t wm)
{
	return rng_below(4) ? pool[f][rng_below(POOL)] : rng32() & wm;
}

/* One random field match of @width bits mixing every kind. */
static struct dpflow_acl_match random_match(uint32_t f, unsigned width)
{
	uint32_t wm = wmax_of(width), a, b;
	unsigned kind = rng_below(100), len;

	if (kind < 15)
		return dpflow_acl_any();
	if (kind < 22)
		return dpflow_acl_range(0, wm); /* full range */
	if (kind < 40)
		return dpflow_acl_masked(pick_value(f, wm), wm); /* exact */
	if (kind < 62) {
		len = rng_in(1, width);
		return dpflow_acl_prefix(pick_value(f, wm), len, width);
	}
	if (kind < 90) {
		a = pick_value(f, wm);
		switch (rng_below(6)) {
		case 0:
			return dpflow_acl_range(a, a); /* single value */
		case 1:
			return dpflow_acl_range(0, a); /* from 0 */
		case 2:
			return dpflow_acl_range(a, wm); /* to max */
		case 3:
			b = a + rng_below(64);
			return dpflow_acl_range(a, b < a || b > wm ? wm : b);
		default:
			b = pick_value(f, wm);
			return a <= b ? dpflow_acl_range(a, b)
				      : dpflow_acl_range(b, a);
		}
	}
	/* a mask that is not a prefix (most random masks) */
	b = rng32() & wm;
	return dpflow_acl_masked(pick_value(f, wm) & b, b);
}

static void random_rule(const struct dpflow_acl_layout *l,
			struct dpflow_acl_rule *r, uint32_t id, uint32_t n_prio)
{
	memset(r, 0, sizeof(*r));
	r->id = id;
	r->priority = rng_below(n_prio);
	r->value = rng32() % 1000000;
	for (uint32_t f = 0; f < l->n_fields; f++)
		r->field[f] = random_match(f, l->width[f]);
}

/* A key inside rule @r (edges of ranges more often than not). */
static void key_in_rule(const struct dpflow_acl_layout *l,
			const struct dpflow_acl_rule *r, uint32_t *key)
{
	for (uint32_t f = 0; f < l->n_fields; f++) {
		const struct dpflow_acl_match *m = &r->field[f];
		uint32_t wm = wmax_of(l->width[f]);

		if (m->type == DPFLOW_ACL_MATCH_RANGE) {
			unsigned e = rng_below(4);

			key[f] = e == 0	  ? m->lo
				 : e == 1 ? m->hi
					  : rng_in(m->lo, m->hi);
		} else {
			key[f] = m->value | (pick_value(f, wm) & ~m->mask & wm);
		}
	}
}

static void random_key(const struct dpflow_acl_layout *l, uint32_t *key)
{
	for (uint32_t f = 0; f < l->n_fields; f++) {
		uint32_t wm = wmax_of(l->width[f]);

		key[f] = pick_value(f, wm) ^ (rng_below(2) ? rng_below(3) : 0);
		key[f] &= wm;
	}
}

/*
 * A rule as firewall ACLs have them (proto, src, dst, sport, dport):
 * prefixes from a few networks, at least one address specific, proto
 * exact or any, ports any, exact or ranges.
 */
static void acl_like_rule(struct dpflow_acl_rule *r, uint32_t id,
			  uint32_t n_prio)
{
	static const uint8_t len_lo[4] = {0, 8, 16, 24},
			     len_n[4] = {1, 8, 8, 9};
	unsigned ls, ld, p;
	uint32_t x;

	memset(r, 0, sizeof(*r));
	r->id = id;
	r->priority = rng_below(n_prio);
	r->value = id;
	do {
		p = rng_below(100);
		ls = p < 20 ? 0 : p < 30 ? 1 : p < 60 ? 2 : 3;
		p = rng_below(100);
		ld = p < 10 ? 0 : p < 15 ? 1 : p < 45 ? 2 : 3;
	} while (ls == 0 && ld == 0);
	r->field[1] =
	    dpflow_acl_prefix(pool[1][rng_below(POOL)] ^ rng32() >> 12,
			      len_lo[ls] + rng_below(len_n[ls]), 32);
	r->field[2] =
	    dpflow_acl_prefix(pool[2][rng_below(POOL)] ^ rng32() >> 16,
			      len_lo[ld] + rng_below(len_n[ld]), 32);
	p = rng_below(10);
	r->field[0] = p < 4   ? dpflow_acl_masked(6, 0xff)
		      : p < 7 ? dpflow_acl_masked(17, 0xff)
			      : dpflow_acl_any();
	p = rng_below(10);
	x = rng_below(65536);
	r->field[3] = p < 7   ? dpflow_acl_any()
		      : p < 9 ? dpflow_acl_range(1024, 65535)
			      : dpflow_acl_range(x, x);
	p = rng_below(10);
	x = rng_below(1024);
	r->field[4] = p < 4   ? dpflow_acl_range(x, x)
		      : p < 6 ? dpflow_acl_range(x, x + rng_below(200))
		      : p < 7 ? dpflow_acl_range(1024, 65535)
			      : dpflow_acl_any();
}

/* ---- layouts ------------------------------------------------------------- */

/* proto, src, dst, sport, dport */
static const struct dpflow_acl_layout five_tuple = {
    5, {8, 32, 32, 16, 16}, {"proto", "src", "dst", "sport", "dport"}};

/* an IPv6 5-tuple plus a VLAN id: 4 words per address */
static const struct dpflow_acl_layout ipv6_tuple = {
    12,
    {8, 32, 32, 32, 32, 32, 32, 32, 32, 16, 16, 16},
    {"proto", "src0", "src1", "src2", "src3", "dst0", "dst1", "dst2", "dst3",
     "sport", "dport", "vlan"}};

/* narrow fields only: many collisions, ties and full coverage */
static const struct dpflow_acl_layout narrow = {3, {8, 8, 16}, {"a", "b", "c"}};

/* ---- helpers ------------------------------------------------------------- */

static struct dpflow_acl_rules *make_random(const struct dpflow_acl_layout *l,
					    struct ref *ref, uint32_t n,
					    uint32_t n_prio)
{
	struct dpflow_error err = {0};
	struct dpflow_acl_rules *rl = dpflow_acl_rules_create(l, n + 16, &err);
	uint32_t *ids = malloc((size_t)n * sizeof(*ids) + 4);

	cr_assert_not_null(rl, "%s", err.msg);
	cr_assert_not_null(ids);
	/* ids: a shuffled, sparse sequence, so ties are not insertion
	 * order */
	for (uint32_t i = 0; i < n; i++)
		ids[i] = i * 7 + 3;
	for (uint32_t i = n; i > 1; i--) {
		uint32_t j = rng_below(i), t = ids[i - 1];

		ids[i - 1] = ids[j];
		ids[j] = t;
	}
	ref->layout = l;
	ref->rules = calloc((size_t)n + 1, sizeof(*ref->rules));
	ref->n = n;
	cr_assert_not_null(ref->rules);
	pool_init(l);
	for (uint32_t i = 0; i < n; i++) {
		random_rule(l, &ref->rules[i], ids[i], n_prio);
		cr_assert_eq(dpflow_acl_rules_add(rl, &ref->rules[i], &err), 0,
			     "rule %u: %s", i, err.msg);
	}
	free(ids);
	ref_sort(ref);
	return rl;
}

/*
 * Compare @img with the reference on @n_keys keys, half inside a random
 * rule, through the bulk call in random burst sizes and the single-key
 * call. Returns the number of keys that hit.
 */
static uint32_t compare(const struct dpflow_acl_image *img,
			const struct ref *ref, uint32_t n_keys)
{
	const struct dpflow_acl_layout *l = ref->layout;
	uint32_t nf = l->n_fields, hits = 0;
	uint32_t *keys = malloc((size_t)DPFLOW_BURST_MAX * nf * 4);
	const uint32_t *ptr[DPFLOW_BURST_MAX];
	uint32_t got[DPFLOW_BURST_MAX];

	cr_assert_not_null(keys);
	for (uint32_t done = 0; done < n_keys;) {
		uint32_t n = rng_in(1, DPFLOW_BURST_MAX), h;

		if (n > n_keys - done)
			n = n_keys - done;
		for (uint32_t i = 0; i < n; i++) {
			uint32_t *k = keys + (size_t)i * nf;

			if (ref->n && rng_below(2))
				key_in_rule(l, &ref->rules[rng_below(ref->n)],
					    k);
			else
				random_key(l, k);
			ptr[i] = k;
		}
		h = dpflow_acl_classify(img, ptr, n, got);
		for (uint32_t i = 0; i < n; i++) {
			uint32_t want = ref_lookup(ref, ptr[i]);

			if (got[i] != want) {
				char buf[256];
				int o = 0;

				for (uint32_t f = 0; f < nf && o < 200; f++)
					o += snprintf(buf + o,
						      sizeof(buf) - (size_t)o,
						      " %x", ptr[i][f]);
				cr_assert_fail("key%s: got %u, want %u", buf,
					       got[i], want);
			}
			if (i % 8 == 0)
				cr_assert_eq(dpflow_acl_lookup(img, ptr[i]),
					     want);
			hits += want != DPFLOW_TABLE_MISS;
			h -= want != DPFLOW_TABLE_MISS;
		}
		cr_assert_eq(h, 0, "classify's hit count is off by %d", (int)h);
		done += n;
	}
	free(keys);
	return hits;
}

static struct dpflow_acl_image *
build_ok(const struct dpflow_acl_rules *rl,
	 const struct dpflow_acl_build_params *p)
{
	struct dpflow_error err = {0};
	struct dpflow_acl_image *img = dpflow_acl_build(rl, p, &err);

	cr_assert_not_null(img, "build: %s", err.msg);
	cr_assert_eq(
	    dpflow_acl_image_check(img, dpflow_acl_image_bytes(img), &err), 0,
	    "check: %s", err.msg);
	return img;
}

static void rule5(struct dpflow_acl_rule *r, uint32_t id, uint32_t prio,
		  uint32_t value)
{
	memset(r, 0, sizeof(*r));
	r->id = id;
	r->priority = prio;
	r->value = value;
	for (uint32_t f = 0; f < 5; f++)
		r->field[f] = dpflow_acl_any();
}

/* ---- validation ---------------------------------------------------------- */

Test(table_acl, layout_is_validated)
{
	struct dpflow_error err = {0};
	struct dpflow_acl_layout l = five_tuple;

	l.n_fields = 0;
	cr_expect_null(dpflow_acl_rules_create(&l, 10, &err));
	cr_expect_eq(err.code, EINVAL);
	cr_expect_str_eq(err.field, "n_fields");
	l.n_fields = DPFLOW_ACL_FIELDS_MAX + 1;
	cr_expect_null(dpflow_acl_rules_create(&l, 10, &err));
	cr_expect_str_eq(err.field, "n_fields");
	l = five_tuple;
	l.width[3] = 12;
	cr_expect_null(dpflow_acl_rules_create(&l, 10, &err));
	cr_expect_str_eq(err.field, "width");
	cr_expect(strstr(err.msg, "sport") != NULL, "%s", err.msg);
	cr_expect_null(dpflow_acl_rules_create(&five_tuple, 0, &err));
	cr_expect_str_eq(err.field, "max_rules");
	cr_expect_null(dpflow_acl_rules_create(NULL, 10, &err));
	cr_expect_eq(err.code, EINVAL);
}

/* Each bad rule is refused with EINVAL naming the field, list unchanged. */
Test(table_acl, bad_fields_are_refused)
{
	struct dpflow_error err = {0};
	struct dpflow_acl_rules *rl =
	    dpflow_acl_rules_create(&five_tuple, 16, &err);
	struct dpflow_acl_rule r;
	struct {
		uint32_t f;
		struct dpflow_acl_match m;
	} bad[] = {
	    {0, {DPFLOW_ACL_MATCH_MASK, 0x100, 0x1ff, 0, 0}}, /* > 8 bits */
	    {0, {DPFLOW_ACL_MATCH_MASK, 0x1, 0x1ff, 0, 0}},   /* mask > 8 */
	    {1, {DPFLOW_ACL_MATCH_MASK, 0x0a000001, 0xff000000, 0, 0}},
	    {3, {DPFLOW_ACL_MATCH_RANGE, 0, 0, 10, 9}},	   /* lo > hi */
	    {4, {DPFLOW_ACL_MATCH_RANGE, 0, 0, 0, 65536}}, /* > 16 bits */
	    {2, {7, 0, 0, 0, 0}},			   /* type */
	};

	cr_assert_not_null(rl);
	for (size_t i = 0; i < DPFLOW_ARRAY_SIZE(bad); i++) {
		char want[16];

		rule5(&r, 1, 1, 1);
		r.field[bad[i].f] = bad[i].m;
		cr_expect_eq(dpflow_acl_rules_add(rl, &r, &err), -EINVAL,
			     "case %zu", i);
		snprintf(want, sizeof(want), "field[%u]", bad[i].f);
		cr_expect_str_eq(err.field, want, "case %zu", i);
		cr_expect(strstr(err.msg, five_tuple.name[bad[i].f]) != NULL,
			  "case %zu: %s", i, err.msg);
		cr_expect_eq(dpflow_acl_rules_count(rl), 0);
	}
	rule5(&r, 1, 1, DPFLOW_TABLE_MISS);
	cr_expect_eq(dpflow_acl_rules_add(rl, &r, &err), -EINVAL);
	cr_expect_str_eq(err.field, "value");
	cr_expect_eq(dpflow_acl_rules_add(rl, NULL, &err), -EINVAL);
	/* the edges are fine */
	rule5(&r, 2, 1, 0);
	r.field[0] = dpflow_acl_masked(0xff, 0xff);
	r.field[1] = dpflow_acl_range(0, UINT32_MAX);
	r.field[3] = dpflow_acl_range(65535, 65535);
	r.field[4] = dpflow_acl_range(0, 0);
	cr_expect_eq(dpflow_acl_rules_add(rl, &r, &err), 0, "%s", err.msg);
	cr_expect_eq(dpflow_acl_rules_count(rl), 1);
	dpflow_acl_rules_destroy(rl);
}

Test(table_acl, duplicates_full_and_unknown_ids)
{
	struct dpflow_error err = {0};
	struct dpflow_acl_rules *rl =
	    dpflow_acl_rules_create(&five_tuple, 3, &err);
	struct dpflow_acl_rule r;

	cr_assert_not_null(rl);
	for (uint32_t id = 10; id < 13; id++) {
		rule5(&r, id, 0, id);
		cr_assert_eq(dpflow_acl_rules_add(rl, &r, &err), 0);
	}
	rule5(&r, 13, 0, 13);
	cr_expect_eq(dpflow_acl_rules_add(rl, &r, &err), -ENOSPC);
	cr_expect_str_eq(err.field, "max_rules");
	cr_expect_eq(dpflow_acl_rules_delete(rl, 11, &err), 0);
	rule5(&r, 10, 0, 99);
	cr_expect_eq(dpflow_acl_rules_add(rl, &r, &err), -EEXIST);
	cr_expect_str_eq(err.field, "id");
	cr_expect_eq(dpflow_acl_rules_count(rl), 2);
	cr_expect_eq(dpflow_acl_rules_delete(rl, 11, &err), -ENOENT);
	cr_expect_str_eq(err.field, "id");
	cr_expect_eq(dpflow_acl_rules_delete(rl, 12, &err), 0);
	cr_expect_eq(dpflow_acl_rules_delete(rl, 10, &err), 0);
	cr_expect_eq(dpflow_acl_rules_count(rl), 0);
	rule5(&r, 10, 0, 99);
	cr_expect_eq(dpflow_acl_rules_add(rl, &r, &err), 0);
	dpflow_acl_rules_destroy(rl);
}

/* A failing batch adds nothing, wherever in the batch it fails. */
Test(table_acl, bulk_add_is_all_or_nothing)
{
	struct dpflow_error err = {0};
	struct dpflow_acl_rules *rl =
	    dpflow_acl_rules_create(&five_tuple, 100, &err);
	struct dpflow_acl_rule batch[20];
	uint32_t failed = 99;
	uint32_t key[5] = {6, 1, 2, 3, 4};
	const uint32_t *kp = key;
	struct dpflow_acl_image *img;
	uint32_t v;

	cr_assert_not_null(rl);
	rule5(&batch[0], 1000, 5, 1000);
	cr_assert_eq(dpflow_acl_rules_add(rl, &batch[0], &err), 0);
	for (uint32_t i = 0; i < 20; i++)
		rule5(&batch[i], i, 1, 500 + i);
	batch[17].id = 4; /* duplicate inside the batch */
	cr_expect_eq(dpflow_acl_rules_add_bulk(rl, batch, 20, &failed, &err),
		     -EEXIST);
	cr_expect_eq(failed, 17);
	cr_expect_eq(dpflow_acl_rules_count(rl), 1);
	batch[17].id = 1000; /* duplicate of a stored rule */
	cr_expect_eq(dpflow_acl_rules_add_bulk(rl, batch, 20, &failed, &err),
		     -EEXIST);
	cr_expect_eq(failed, 17);
	batch[17].id = 17;
	batch[9].field[3] = dpflow_acl_range(5, 4);
	cr_expect_eq(dpflow_acl_rules_add_bulk(rl, batch, 20, &failed, &err),
		     -EINVAL);
	cr_expect_eq(failed, 9);
	cr_expect_str_eq(err.field, "field[3]");
	cr_expect_eq(dpflow_acl_rules_count(rl), 1);
	/* the ids of the failed batches were never entered */
	cr_expect_eq(dpflow_acl_rules_delete(rl, 0, &err), -ENOENT);
	img = build_ok(rl, NULL);
	cr_expect_eq(dpflow_acl_classify(img, &kp, 1, &v), 1);
	cr_expect_eq(v, 1000);
	dpflow_acl_destroy(img);
	batch[9].field[3] = dpflow_acl_any();
	cr_expect_eq(dpflow_acl_rules_add_bulk(rl, batch, 20, &failed, &err), 0,
		     "%s", err.msg);
	cr_expect_eq(dpflow_acl_rules_count(rl), 21);
	img = build_ok(rl, NULL);
	cr_expect_eq(dpflow_acl_lookup(img, key), 500); /* prio 1, id 0 */
	dpflow_acl_destroy(img);
	dpflow_acl_rules_destroy(rl);
}

/* ---- known cases --------------------------------------------------------- */

Test(table_acl, empty_table_misses)
{
	struct dpflow_acl_rules *rl =
	    dpflow_acl_rules_create(&five_tuple, 1, NULL);
	struct dpflow_acl_image *img;
	uint32_t key[5] = {0},
		 key2[5] = {255, UINT32_MAX, UINT32_MAX, 65535, 65535};
	const uint32_t *kp[2] = {key, key2};
	uint32_t v[2];

	cr_assert_not_null(rl);
	img = build_ok(rl, NULL);
	cr_expect_eq(dpflow_acl_classify(img, kp, 2, v), 0);
	cr_expect_eq(v[0], DPFLOW_TABLE_MISS);
	cr_expect_eq(v[1], DPFLOW_TABLE_MISS);
	cr_expect_eq(dpflow_acl_lookup(img, key), DPFLOW_TABLE_MISS);
	dpflow_acl_destroy(img);
	dpflow_acl_rules_destroy(rl);
}

/*
 * Lower priority numbers win; equal priorities go to the lower id, not to
 * the first added; range and mask edges match exactly.
 */
Test(table_acl, priorities_ties_and_edges)
{
	struct dpflow_error err = {0};
	struct dpflow_acl_rules *rl =
	    dpflow_acl_rules_create(&five_tuple, 64, &err);
	struct dpflow_acl_rule r;
	struct dpflow_acl_image *img;
	static const struct {
		uint32_t key[5];
		uint32_t want;
	} cases[] = {
	    /* dport 80 from 10.0.0.0/8: rules 7 (prio 10) and 3 (prio 10,
	     * lower id, added later) tie; 3 wins */
	    {{6, 0x0a010203, 0xc0a80001, 1234, 80}, 300},
	    /* dport 81: only rule 7 (range 80..81) */
	    {{6, 0x0a010203, 0xc0a80001, 1234, 81}, 700},
	    /* dport 79 misses the range 80..81: falls to the catch-all */
	    {{6, 0x0a010203, 0xc0a80001, 1234, 79}, 9000},
	    /* sport 0 and 65535 at the range edges of rule 20 */
	    {{17, 1, 2, 0, 53}, 2000},
	    {{17, 1, 2, 65535, 53}, 2000},
	    /* proto 255, dst all ones: rule 30 (exact edge values) */
	    {{255, 5, UINT32_MAX, 7, 7}, 3000},
	    {{254, 5, UINT32_MAX, 7, 7}, 9000},
	    /* non-prefix mask: src 17.*.*.68 */
	    {{1, 0x11223344, 0, 0, 0}, 4000},
	    {{1, 0x11abcd44, 0, 0, 0}, 4000},
	    {{1, 0x11223345, 0, 0, 0}, 9000},
	    {{1, 0x12223344, 0, 0, 0}, 9000},
	    /* the tie again, at the ends of 10/8 */
	    {{6, 0x0a000000, 0x01010101, 65535, 80}, 300},
	    {{6, 0x0bffffff, 0x01010101, 65535, 80}, 9000},
	};

	cr_assert_not_null(rl);
	rule5(&r, 7, 10, 700); /* 10/8 tcp dport 80..81 */
	r.field[0] = dpflow_acl_masked(6, 0xff);
	r.field[1] = dpflow_acl_prefix(0x0a000000, 8, 32);
	r.field[4] = dpflow_acl_range(80, 81);
	cr_assert_eq(dpflow_acl_rules_add(rl, &r, &err), 0, "%s", err.msg);
	rule5(&r, 3, 10, 300); /* same priority, dport 80 */
	r.field[1] = dpflow_acl_prefix(0x0a000000, 8, 32);
	r.field[4] = dpflow_acl_range(80, 80);
	cr_assert_eq(dpflow_acl_rules_add(rl, &r, &err), 0);
	rule5(&r, 20, 20, 2000); /* udp, full sport range, dport 53 */
	r.field[0] = dpflow_acl_masked(17, 0xff);
	r.field[3] = dpflow_acl_range(0, 65535);
	r.field[4] = dpflow_acl_masked(53, 0xffff);
	cr_assert_eq(dpflow_acl_rules_add(rl, &r, &err), 0);
	rule5(&r, 30, 20, 3000);
	r.field[0] = dpflow_acl_range(255, 255);
	r.field[2] = dpflow_acl_masked(UINT32_MAX, UINT32_MAX);
	cr_assert_eq(dpflow_acl_rules_add(rl, &r, &err), 0);
	rule5(&r, 40, 30, 4000);
	r.field[1] = dpflow_acl_masked(0x11000144, 0xff0000ff);
	cr_assert_eq(dpflow_acl_rules_add(rl, &r, &err), -EINVAL,
		     "bits outside the mask");
	r.field[1] = dpflow_acl_masked(0x11000044, 0xff0000ff);
	cr_assert_eq(dpflow_acl_rules_add(rl, &r, &err), 0, "%s", err.msg);
	rule5(&r, 1, 1000, 9000); /* catch-all, worst priority */
	cr_assert_eq(dpflow_acl_rules_add(rl, &r, &err), 0);

	img = build_ok(rl, NULL);
	for (size_t i = 0; i < DPFLOW_ARRAY_SIZE(cases); i++)
		cr_expect_eq(dpflow_acl_lookup(img, cases[i].key),
			     cases[i].want, "case %zu: got %u", i,
			     dpflow_acl_lookup(img, cases[i].key));
	/* leaves of one rule force splits: same answers */
	{
		struct dpflow_acl_build_params p = {1, 1, 0};
		struct dpflow_acl_image *img2 = build_ok(rl, &p);
		struct dpflow_acl_info info;

		dpflow_acl_info(img2, &info);
		cr_expect_gt(info.n_nodes, 0);
		for (size_t i = 0; i < DPFLOW_ARRAY_SIZE(cases); i++)
			cr_expect_eq(dpflow_acl_lookup(img2, cases[i].key),
				     cases[i].want, "split case %zu", i);
		dpflow_acl_destroy(img2);
	}
	dpflow_acl_destroy(img);
	dpflow_acl_rules_destroy(rl);
}

/* ---- random rule sets against the reference ------------------------------ */

struct rand_case {
	const struct dpflow_acl_layout *layout;
	uint32_t rules;
	uint32_t prios;
	uint32_t keys;
	struct dpflow_acl_build_params p;
};

static void run_random(const struct rand_case *c, uint64_t seed)
{
	struct ref ref;
	struct dpflow_acl_rules *rl;
	struct dpflow_acl_image *img;
	uint32_t hits;

	rng_seed(seed);
	rl = make_random(c->layout, &ref, c->rules, c->prios);
	img = build_ok(rl, &c->p);
	hits = compare(img, &ref, c->keys);
	/* about half the keys are built inside a rule */
	cr_expect_gt(hits, c->keys / 4, "seed %llu: only %u hits",
		     (unsigned long long)seed, hits);
	dpflow_acl_destroy(img);
	dpflow_acl_rules_destroy(rl);
	free(ref.rules);
}

/* 1.2M random lookups over many small and medium rule sets. */
Test(table_acl, random_vs_reference_1m)
{
	static const struct rand_case cases[] = {
	    {&five_tuple, 40, 4, 40000, {0, 0, 0}},
	    {&five_tuple, 200, 16, 80000, {0, 0, 0}},
	    {&five_tuple, 600, 1000, 80000, {0, 0, 0}},
	    {&narrow, 300, 3, 60000, {0, 0, 0}},
	    {&ipv6_tuple, 300, 10, 40000, {0, 0, 0}},
	};
	uint64_t total = 0;

	for (uint64_t seed = 1; total < 1200000; seed++) {
		const struct rand_case *c = &cases[seed % 5];

		run_random(c, seed);
		total += c->keys;
	}
}

/* Small leaves, few trees, tiny budgets: other shapes, same answers. */
Test(table_acl, random_build_shapes)
{
	static const struct rand_case cases[] = {
	    {&five_tuple, 500, 50, 20000, {1, 1, 0}},
	    {&five_tuple, 500, 50, 20000, {1, 8, 4096}},
	    {&five_tuple, 500, 50, 20000, {2, 2, 8192}},
	    {&five_tuple, 500, 50, 20000, {64, 1, 0}},
	    {&ipv6_tuple, 400, 5, 20000, {1, 8, 2048}},
	    {&narrow, 400, 2, 20000, {1, 3, 1024}},
	};

	for (uint64_t i = 0; i < DPFLOW_ARRAY_SIZE(cases); i++)
		run_random(&cases[i], 100 + i);
}

/* A small budget splits rules over several trees. */
Test(table_acl, small_budget_uses_several_trees)
{
	struct dpflow_acl_build_params p = {1, 8, 4096};
	struct dpflow_acl_info info;
	struct dpflow_acl_rules *rl;
	struct dpflow_acl_image *img;
	struct ref ref;

	rng_seed(7);
	rl = make_random(&five_tuple, &ref, 2000, 100);
	img = build_ok(rl, &p);
	dpflow_acl_info(img, &info);
	cr_expect_gt(info.n_trees, 1, "%u trees", info.n_trees);
	cr_expect_leq(info.n_trees, 8);
	compare(img, &ref, 20000);
	dpflow_acl_destroy(img);
	dpflow_acl_rules_destroy(rl);
	free(ref.rules);
}

/*
 * 64k firewall-like rules build (into jump-table trees) and answer like
 * the reference on a sample; so does the GPU's portable code.
 */
Test(table_acl, build_64k_rules)
{
	struct dpflow_error err = {0};
	struct dpflow_acl_info info;
	struct dpflow_acl_rules *rl;
	struct dpflow_acl_image *img;
	struct ref ref;
	uint32_t n = 65536, key[5];

	rng_seed(64);
	pool_init(&five_tuple);
	rl = dpflow_acl_rules_create(&five_tuple, n, &err);
	cr_assert_not_null(rl);
	ref.layout = &five_tuple;
	ref.n = n;
	ref.rules = calloc(n, sizeof(*ref.rules));
	cr_assert_not_null(ref.rules);
	for (uint32_t i = 0; i < n; i++) {
		acl_like_rule(&ref.rules[i], n - i, 4000);
		cr_assert_eq(dpflow_acl_rules_add(rl, &ref.rules[i], &err), 0,
			     "%s", err.msg);
	}
	cr_assert_eq(dpflow_acl_rules_count(rl), n);
	ref_sort(&ref);
	img = build_ok(rl, NULL);
	dpflow_acl_info(img, &info);
	cr_expect_eq(info.n_rules, n);
	cr_expect_gt(info.n_jump_tables, 0,
		     "trees %u nodes %u size %zu depth %u", info.n_trees,
		     info.n_nodes, info.size, info.max_depth);
	compare(img, &ref, 2000);
	for (uint32_t i = 0; i < 2000; i++) {
		key_in_rule(&five_tuple, &ref.rules[rng_below(n)], key);
		cr_assert_eq(dpflow_acl_lookup_portable_impl(img, key),
			     dpflow_acl_lookup(img, key));
	}
	dpflow_acl_destroy(img);
	dpflow_acl_rules_destroy(rl);
	free(ref.rules);
}

/*
 * The portable code (what the GPU runs) and the CPU's SIMD code give the
 * same answers, on every kind of rule set.
 */
Test(table_acl, portable_code_agrees)
{
	static const struct rand_case cases[] = {
	    {&five_tuple, 800, 30, 0, {0, 0, 0}},
	    {&ipv6_tuple, 400, 10, 0, {0, 0, 0}},
	    {&narrow, 300, 3, 0, {2, 3, 2048}},
	};

	for (uint64_t c = 0; c < DPFLOW_ARRAY_SIZE(cases); c++) {
		const struct dpflow_acl_layout *l = cases[c].layout;
		struct dpflow_acl_image *img;
		struct dpflow_acl_rules *rl;
		struct ref ref;
		uint32_t key[DPFLOW_ACL_FIELDS_MAX], got, want;

		rng_seed(300 + c);
		rl = make_random(l, &ref, cases[c].rules, cases[c].prios);
		img = build_ok(rl, &cases[c].p);
		for (uint32_t i = 0; i < 20000; i++) {
			if (rng_below(2))
				key_in_rule(l, &ref.rules[rng_below(ref.n)],
					    key);
			else
				random_key(l, key);
			want = ref_lookup(&ref, key);
			got = dpflow_acl_lookup_portable_impl(img, key);
			cr_assert_eq(got, want, "case %llu key %u",
				     (unsigned long long)c, i);
			cr_assert_eq(dpflow_acl_lookup(img, key), want);
		}
		dpflow_acl_destroy(img);
		dpflow_acl_rules_destroy(rl);
		free(ref.rules);
	}
}

/* Delete rules, rebuild: the image follows the list. */
Test(table_acl, rebuild_after_deletes)
{
	struct dpflow_error err = {0};
	struct dpflow_acl_rules *rl;
	struct dpflow_acl_image *img;
	struct ref ref;
	uint32_t key[5];

	rng_seed(11);
	rl = make_random(&five_tuple, &ref, 3000, 40);
	img = build_ok(rl, NULL);
	compare(img, &ref, 20000);
	dpflow_acl_destroy(img);
	for (int round = 0; round < 3; round++) {
		uint32_t del = ref.n / 2;

		for (uint32_t i = 0; i < del; i++) {
			uint32_t id = ref.rules[rng_below(ref.n)].id;

			cr_assert_eq(dpflow_acl_rules_delete(rl, id, &err), 0,
				     "%s", err.msg);
			ref_delete(&ref, id);
		}
		cr_assert_eq(dpflow_acl_rules_count(rl), ref.n);
		img = build_ok(rl, NULL);
		compare(img, &ref, 20000);
		dpflow_acl_destroy(img);
	}
	/* delete everything: all misses; then one rule again */
	while (ref.n) {
		uint32_t id = ref.rules[0].id;

		cr_assert_eq(dpflow_acl_rules_delete(rl, id, &err), 0);
		ref_delete(&ref, id);
	}
	img = build_ok(rl, NULL);
	random_key(&five_tuple, key);
	cr_expect_eq(dpflow_acl_lookup(img, key), DPFLOW_TABLE_MISS);
	compare(img, &ref, 2000);
	dpflow_acl_destroy(img);
	rule5(&ref.rules[0], 5, 5, 55);
	ref.n = 1;
	cr_assert_eq(dpflow_acl_rules_add(rl, &ref.rules[0], &err), 0);
	img = build_ok(rl, NULL);
	cr_expect_eq(dpflow_acl_lookup(img, key), 55);
	dpflow_acl_destroy(img);
	dpflow_acl_rules_clear(rl);
	cr_expect_eq(dpflow_acl_rules_count(rl), 0);
	cr_expect_eq(dpflow_acl_rules_add(rl, &ref.rules[0], &err), 0);
	dpflow_acl_rules_destroy(rl);
	free(ref.rules);
}

/*
 * The image is position independent: a copy elsewhere answers the same,
 * and the bytes depend on the rules only, not on their insertion order.
 */
Test(table_acl, copies_and_determinism)
{
	struct dpflow_error err = {0};
	struct dpflow_acl_rules *rl, *rl2;
	struct dpflow_acl_image *img, *img2, *clone;
	struct ref ref;
	void *buf;
	size_t size;

	rng_seed(5);
	rl = make_random(&five_tuple, &ref, 1500, 30);
	img = build_ok(rl, NULL);
	size = dpflow_acl_image_bytes(img);
	cr_expect_eq(size % 64, 0);
	buf = aligned_alloc(64, size + 64);
	cr_assert_not_null(buf);
	cr_expect_eq(dpflow_acl_image_copy(buf, size - 64, img, &err), -EINVAL);
	cr_expect_str_eq(err.field, "dst_size");
	cr_expect_eq(dpflow_acl_image_copy((uint8_t *)buf + 4, size, img, &err),
		     -EINVAL);
	cr_expect_str_eq(err.field, "dst");
	cr_assert_eq(dpflow_acl_image_copy(buf, size + 64, img, &err), 0);
	/* wipe the original: the copy must not refer to it */
	clone = dpflow_acl_clone(img, &err);
	cr_assert_not_null(clone);
	memset(img, 0xee, size);
	dpflow_acl_destroy(img);
	compare((const struct dpflow_acl_image *)buf, &ref, 10000);
	compare(clone, &ref, 10000);

	/* the same rules added in reverse order: the same bytes */
	rl2 = dpflow_acl_rules_create(&five_tuple, ref.n, &err);
	cr_assert_not_null(rl2);
	for (uint32_t i = ref.n; i-- > 0;)
		cr_assert_eq(dpflow_acl_rules_add(rl2, &ref.rules[i], &err), 0);
	img2 = build_ok(rl2, NULL);
	cr_expect_eq(dpflow_acl_image_bytes(img2), size);
	cr_expect_eq(memcmp(img2, buf, size), 0);

	/* a damaged copy is refused by the check */
	((struct dpflow_acl_image *)buf)->magic ^= 1;
	cr_expect_eq(dpflow_acl_image_check(buf, size, &err), -EINVAL);
	((struct dpflow_acl_image *)buf)->magic ^= 1;
	cr_expect_eq(dpflow_acl_image_check(buf, size, &err), 0);
	cr_expect_eq(dpflow_acl_image_check(buf, size - 64, &err), -EINVAL);
	if (((struct dpflow_acl_image *)buf)->n_nodes) {
		struct dpflow_acl_node *nd =
		    (struct dpflow_acl_node *)((uint8_t *)buf +
					       ((struct dpflow_acl_image *)buf)
						   ->nodes_off);
		uint32_t keep = nd->child[0];

		nd->child[0] = 0; /* a loop back to node 0 */
		cr_expect_eq(dpflow_acl_image_check(buf, size, &err), -EINVAL);
		cr_expect_str_eq(err.field, "node");
		nd->child[0] = keep;
		nd->field = 5;
		cr_expect_eq(dpflow_acl_image_check(buf, size, &err), -EINVAL);
	}
	free(buf);
	dpflow_acl_destroy(clone);
	dpflow_acl_destroy(img2);
	dpflow_acl_rules_destroy(rl);
	dpflow_acl_rules_destroy(rl2);
	free(ref.rules);
}
