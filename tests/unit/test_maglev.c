/*
 * Weighted Maglev tests (include/dpflow/maglev.h, lib/flow/maglev.c):
 * argument validation; tables equal, slot for slot, to a naive reference
 * written here from the paper (Eisenbud et al., NSDI 2016, Pseudocode 1:
 * explicit permutations, turns taken in rounds) and the header's name
 * hashes, for random member sets, weights and prime sizes; and properties
 * of tables built from random member sets drawn from fixed seeds: every
 * slot filled with a weighted member, equal weights giving equal shares
 * (within one slot), weighted shares following the weights (within 1% at
 * 65537 slots), small disruption when a member leaves (the paper's
 * bound), independence from the input order, from the name strings'
 * addresses, from draining (weight 0) members and from scaling all
 * weights by one factor.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/maglev.h"

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

static uint32_t rng_below(uint32_t n)
{
	return (uint32_t)(((rng64() >> 32) * n) >> 32);
}

/* @lo..@hi inclusive. */
static uint32_t rng_range(uint32_t lo, uint32_t hi)
{
	return lo + rng_below(hi - lo + 1);
}

#define NAME_LEN 32

/* A backend set; each name has its own allocation. */
struct set {
	struct dpflow_maglev_member *b;
	uint32_t n;
};

static char *xstrdup(const char *s)
{
	char *d = strdup(s);

	cr_assert_not_null(d);
	return d;
}

static void set_alloc(struct set *s, uint32_t n)
{
	s->n = n;
	s->b = calloc(n ? n : 1, sizeof(*s->b));
	cr_assert_not_null(s->b);
}

/* @n backends with unique random names "10.a.b.c:port", weight @w each. */
static void set_random(struct set *s, uint32_t n, uint32_t w)
{
	set_alloc(s, n);
	for (uint32_t i = 0; i < n; i++) {
		char name[NAME_LEN];
		bool dup;

		do {
			snprintf(name, sizeof(name), "10.%u.%u.%u:%u",
				 rng_below(256), rng_below(256), rng_below(256),
				 rng_range(1, 65535));
			dup = false;
			for (uint32_t j = 0; j < i && !dup; j++)
				dup = strcmp(s->b[j].name, name) == 0;
		} while (dup);
		s->b[i].name = xstrdup(name);
		s->b[i].weight = w;
	}
}

/* A deep copy of @src (fresh name strings) in a random order. */
static void set_shuffled_copy(struct set *dst, const struct set *src)
{
	set_alloc(dst, src->n);
	for (uint32_t i = 0; i < src->n; i++) {
		dst->b[i].name = xstrdup(src->b[i].name);
		dst->b[i].weight = src->b[i].weight;
	}
	for (uint32_t i = src->n; i > 1; i--) {
		uint32_t j = rng_below(i);
		struct dpflow_maglev_member t = dst->b[i - 1];

		dst->b[i - 1] = dst->b[j];
		dst->b[j] = t;
	}
}

static void set_free(struct set *s)
{
	for (uint32_t i = 0; i < s->n; i++)
		free((char *)s->b[i].name);
	free(s->b);
	s->b = NULL;
	s->n = 0;
}

static uint32_t *table_alloc(uint32_t m)
{
	uint32_t *t = malloc((size_t)m * sizeof(*t));

	cr_assert_not_null(t);
	return t;
}

/*
 * Build a table for @s and check what holds for every table: with some
 * weight, every slot names a backend of @s with a weight; with none,
 * every slot is NONE. Returns the table; @counts (n entries, optional)
 * gets each backend's slot count.
 */
static uint32_t *build_checked(const struct set *s, uint32_t m,
			       uint32_t *counts)
{
	uint32_t *t = table_alloc(m);
	bool any = false;
	int rc;

	for (uint32_t i = 0; i < s->n; i++)
		any |= s->b[i].weight > 0;
	if (counts)
		memset(counts, 0, s->n * sizeof(*counts));

	rc = dpflow_maglev_build(s->b, s->n, m, t);
	cr_assert_eq(rc, 0, "build n=%u m=%u: rc %d", s->n, m, rc);
	for (uint32_t i = 0; i < m; i++) {
		if (!any) {
			cr_assert_eq(t[i], DPFLOW_MAGLEV_NONE,
				     "no weights, slot %u = %u", i, t[i]);
			continue;
		}
		cr_assert_lt(t[i], s->n, "n=%u m=%u: slot %u = %u", s->n, m, i,
			     t[i]);
		cr_assert_gt(s->b[t[i]].weight, 0,
			     "slot %u names %s, which has weight 0", i,
			     s->b[t[i]].name);
		if (counts)
			counts[t[i]]++;
	}
	return t;
}

static uint32_t *counts_alloc(uint32_t n)
{
	uint32_t *c = calloc(n ? n : 1, sizeof(*c));

	cr_assert_not_null(c);
	return c;
}

/* Slots where tables @t1 (of @s1) and @t2 (of @s2) name different
 * backends. */
static uint32_t slots_differing(const struct set *s1, const uint32_t *t1,
				const struct set *s2, const uint32_t *t2,
				uint32_t m)
{
	uint32_t d = 0;

	for (uint32_t i = 0; i < m; i++)
		d += strcmp(s1->b[t1[i]].name, s2->b[t2[i]].name) != 0;
	return d;
}

/* Expect tables @t1 and @t2 to name the same backend in every slot. */
static void expect_same_backends(const struct set *s1, const uint32_t *t1,
				 const struct set *s2, const uint32_t *t2,
				 uint32_t m, const char *what)
{
	for (uint32_t i = 0; i < m; i++)
		cr_assert_str_eq(s1->b[t1[i]].name, s2->b[t2[i]].name,
				 "%s: slot %u of %u: %s vs %s", what, i, m,
				 s1->b[t1[i]].name, s2->b[t2[i]].name);
}

/* ------------------------------------------------------- primality */

Test(maglev, is_prime)
{
	static const struct {
		uint32_t m;
		bool prime;
	} cases[] = {
	    {0, false},
	    {1, false},
	    {2, true},
	    {3, true},
	    {4, false},
	    {9, false},
	    {25, false},
	    {65537, true},
	    {65535, false},
	    {1000003, true},
	    {DPFLOW_MAGLEV_SIZE_MAX, true},
	    {DPFLOW_MAGLEV_SIZE_MAX + 2, false},
	    {4294967291u, true},  /* largest 32-bit prime */
	    {4294967295u, false}, /* 3 * 5 * 17 * 257 * 65537 */
	    {4293001441u, false}, /* 65521^2: a prime squared */
	    {4294836225u, false}, /* 65535^2 */
	};
	enum { SIEVE = 20000 };
	static bool composite[SIEVE];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		cr_assert_eq(dpflow_maglev_is_prime(cases[i].m), cases[i].prime,
			     "is_prime(%u) should be %d", cases[i].m,
			     cases[i].prime);

	/* Against a sieve for every m below SIEVE. */
	composite[0] = composite[1] = true;
	for (uint32_t i = 2; i * i < SIEVE; i++)
		if (!composite[i])
			for (uint32_t j = i * i; j < SIEVE; j += i)
				composite[j] = true;
	for (uint32_t m = 0; m < SIEVE; m++)
		cr_assert_eq(dpflow_maglev_is_prime(m), !composite[m],
			     "is_prime(%u) disagrees with the sieve", m);
}

/* ------------------------------------------------- argument errors */

Test(maglev, bad_m)
{
	static const uint32_t bad[] = {
	    0,
	    1,
	    2,
	    4,
	    65535,
	    65536,
	    1000001,			/* 101 * 9901 */
	    16777259u,			/* prime, above the maximum */
	    DPFLOW_MAGLEV_SIZE_MAX + 2, /* 16777215, composite */
	    4294967291u,		/* prime, far above */
	};
	struct dpflow_maglev_member b[] = {{"10.0.0.1:80", 1},
					   {"10.0.0.2:80", 1}};
	uint32_t t[8];
	uint32_t *big;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(dpflow_maglev_build(b, 2, bad[i], t), -EINVAL,
			     "m=%u should be rejected", bad[i]);

	/* The smallest and the largest valid sizes. */
	cr_assert_eq(dpflow_maglev_build(b, 2, 3, t), 0);
	cr_assert_eq(dpflow_maglev_build(b, 2, 7, t), 0);
	big = table_alloc(DPFLOW_MAGLEV_SIZE_MAX);
	cr_assert_eq(dpflow_maglev_build(b, 2, DPFLOW_MAGLEV_SIZE_MAX, big), 0);
	free(big);
}

Test(maglev, bad_backends)
{
	char name64[DPFLOW_MAGLEV_NAME_MAX + 1],
	    name65[DPFLOW_MAGLEV_NAME_MAX + 2];
	char dup_a[] = "10.0.0.1:80", dup_b[] = "10.0.0.1:80";
	uint32_t t[7];

	memset(name64, 'a', DPFLOW_MAGLEV_NAME_MAX);
	name64[DPFLOW_MAGLEV_NAME_MAX] = '\0';
	memset(name65, 'b', DPFLOW_MAGLEV_NAME_MAX + 1);
	name65[DPFLOW_MAGLEV_NAME_MAX + 1] = '\0';

	{
		struct dpflow_maglev_member b[] = {{"10.0.0.1:80", 1},
						   {NULL, 1}};

		cr_assert_eq(dpflow_maglev_build(b, 2, 7, t), -EINVAL,
			     "NULL name");
		b[1].weight = 0;
		cr_assert_eq(dpflow_maglev_build(b, 2, 7, t), -EINVAL,
			     "NULL name with weight 0");
	}
	{
		struct dpflow_maglev_member b[] = {{"", 1}, {"10.0.0.1:80", 1}};

		cr_assert_eq(dpflow_maglev_build(b, 2, 7, t), -EINVAL,
			     "empty name");
	}
	{
		struct dpflow_maglev_member b[] = {{name64, 1}, {name65, 1}};

		cr_assert_eq(dpflow_maglev_build(b, 2, 7, t), -EINVAL,
			     "name of %zu bytes", strlen(name65));
		cr_assert_eq(dpflow_maglev_build(b, 1, 7, t), 0,
			     "name of %zu bytes (the maximum)", strlen(name64));
	}
	{
		/* Equal contents at different addresses. */
		struct dpflow_maglev_member b[] = {
		    {dup_a, 1}, {"10.0.0.2:80", 1}, {dup_b, 1}};

		cr_assert_eq(dpflow_maglev_build(b, 3, 7, t), -EINVAL,
			     "duplicate name");
		b[0].weight = b[2].weight = 0;
		cr_assert_eq(dpflow_maglev_build(b, 3, 7, t), -EINVAL,
			     "duplicate name, both weight 0");
	}
	{
		struct dpflow_maglev_member b[] = {{"10.0.0.1:80", UINT32_MAX},
						   {"10.0.0.2:80", 1}};

		cr_assert_eq(dpflow_maglev_build(b, 2, 7, t), -EINVAL,
			     "total weight 2^32");
		b[0].weight = UINT32_MAX - 1;
		cr_assert_eq(dpflow_maglev_build(b, 2, 7, t), 0,
			     "total weight 2^32-1");
		for (uint32_t i = 0; i < 7; i++)
			cr_assert_eq(t[i], 0,
				     "heavy backend should take all "
				     "7 slots; slot %u = %u",
				     i, t[i]);
	}
	{
		struct dpflow_maglev_member b[] = {{"10.0.0.1:80", 1}};

		cr_assert_eq(dpflow_maglev_build(NULL, 1, 7, t), -EINVAL,
			     "NULL backends, n=1");
		cr_assert_eq(dpflow_maglev_build(b, 1, 7, NULL), -EINVAL,
			     "NULL table");
	}
}

Test(maglev, no_weights)
{
	const uint32_t m = 65537;
	struct dpflow_maglev_member b[] = {
	    {"10.0.0.1:80", 0}, {"10.0.0.2:80", 0}, {"10.0.0.3:80", 0}};
	uint32_t *t = table_alloc(m);

	memset(t, 0x5a, m * sizeof(*t));
	cr_assert_eq(dpflow_maglev_build(b, 3, m, t), 0);
	for (uint32_t i = 0; i < m; i++)
		cr_assert_eq(t[i], DPFLOW_MAGLEV_NONE,
			     "all weights 0: slot %u = %u", i, t[i]);

	memset(t, 0x5a, m * sizeof(*t));
	cr_assert_eq(dpflow_maglev_build(NULL, 0, m, t), 0);
	for (uint32_t i = 0; i < m; i++)
		cr_assert_eq(t[i], DPFLOW_MAGLEV_NONE, "n=0: slot %u = %u", i,
			     t[i]);
	free(t);
}

/* More backends than slots, and a single backend. */
Test(maglev, tiny_tables)
{
	struct set s;
	uint32_t counts[50];
	uint32_t *t;
	uint32_t used = 0;

	rng_seed(7);
	set_random(&s, 50, 1);
	t = build_checked(&s, 3, counts);
	for (uint32_t i = 0; i < 50; i++) {
		cr_assert_leq(counts[i], 1, "%s has %u of 3 slots", s.b[i].name,
			      counts[i]);
		used += counts[i] > 0;
	}
	cr_assert_eq(used, 3);
	free(t);

	s.n = 1; /* the first backend alone */
	t = build_checked(&s, 65537, counts);
	cr_assert_eq(counts[0], 65537);
	free(t);
	s.n = 50;
	set_free(&s);
}

/* ----------------------------------------------------- balance */

/* Equal weights: each round every backend takes one slot, so counts are
 * floor(m/n) or ceil(m/n); the bound asked for is 1% + 1. */
Test(maglev, equal_weights_balance)
{
	const uint32_t m = 65537;

	rng_seed(0x5eed0001);
	for (int round = 0; round < 20; round++) {
		struct set s;
		uint32_t n = rng_range(2, 300);
		uint32_t *counts = counts_alloc(n);
		uint32_t *t;
		double ideal = (double)m / n;

		set_random(&s, n, rng_range(1, 1000));
		t = build_checked(&s, m, counts);
		for (uint32_t i = 0; i < n; i++)
			cr_assert_leq(
			    fabs(counts[i] - ideal), 0.01 * ideal + 1,
			    "set %d n=%u: %s has %u slots, ideal %.1f", round,
			    n, s.b[i].name, counts[i], ideal);
		free(t);
		free(counts);
		set_free(&s);
	}
}

/*
 * Weighted shares. A backend's expected count is m * w / total. Where
 * that is at least 100 slots, the count must be within 2% of it; smaller
 * shares are dominated by rounding (a backend gains whole slots, and the
 * last, partial round is cut off when the table fills), so they get an
 * absolute bound of 2 slots on top of the 2%.
 */
static void expect_weighted_shares(const struct set *s, const uint32_t *counts,
				   uint32_t m, const char *what)
{
	uint64_t total = 0;

	for (uint32_t i = 0; i < s->n; i++)
		total += s->b[i].weight;
	for (uint32_t i = 0; i < s->n; i++) {
		double expected = (double)m * s->b[i].weight / (double)total;
		double err = fabs(counts[i] - expected);

		if (expected >= 100)
			cr_assert_leq(err / expected, 0.02,
				      "%s: %s (weight %u of %llu) has %u "
				      "slots, expected %.1f",
				      what, s->b[i].name, s->b[i].weight,
				      (unsigned long long)total, counts[i],
				      expected);
		else
			cr_assert_leq(err, 2 + 0.02 * expected,
				      "%s: %s (weight %u of %llu) has %u "
				      "slots, expected %.2f",
				      what, s->b[i].name, s->b[i].weight,
				      (unsigned long long)total, counts[i],
				      expected);
	}
}

Test(maglev, weighted_shares)
{
	const uint32_t m = 65537;

	rng_seed(0x5eed0004);
	for (int round = 0; round < 20; round++) {
		struct set s;
		uint32_t n = rng_range(2, 64);
		uint32_t *counts = counts_alloc(n);
		uint32_t *t;
		char what[64];

		set_random(&s, n, 0);
		for (uint32_t i = 0; i < n; i++)
			s.b[i].weight = rng_range(1, 100);
		t = build_checked(&s, m, counts);
		snprintf(what, sizeof(what), "set %d n=%u", round, n);
		expect_weighted_shares(&s, counts, m, what);
		free(t);
		free(counts);
		set_free(&s);
	}
}

/* One heavy backend among many light ones: the case where walking the
 * rounds one by one would be slow. */
Test(maglev, skewed_weights, .timeout = 10)
{
	const uint32_t m = 65537, n = 1024;
	struct set s;
	uint32_t *counts = counts_alloc(n);
	uint32_t *t;

	rng_seed(0x5eed0008);
	set_random(&s, n, 0);
	for (uint32_t i = 0; i < n; i++)
		s.b[i].weight = rng_range(1, 3);
	s.b[rng_below(n)].weight = 1000000;
	t = build_checked(&s, m, counts);
	expect_weighted_shares(&s, counts, m, "skewed");
	free(t);
	set_free(&s);

	/* Two backends, weights at the extremes. */
	set_random(&s, 2, 0);
	s.b[0].weight = UINT32_MAX - 1000;
	s.b[1].weight = 1000;
	t = build_checked(&s, m, counts);
	expect_weighted_shares(&s, counts, m, "extreme");
	free(t);
	free(counts);
	set_free(&s);
}

Test(maglev, large_table)
{
	const uint32_t m = 1000003, n = 10;
	struct set s;
	uint32_t counts[10];
	uint64_t total = 0;
	uint32_t *t;

	rng_seed(0x5eed0007);
	set_random(&s, n, 0);
	for (uint32_t i = 0; i < n; i++) {
		s.b[i].weight = rng_range(1, 100);
		total += s.b[i].weight;
	}
	t = build_checked(&s, m, counts);
	for (uint32_t i = 0; i < n; i++) {
		double expected = (double)m * s.b[i].weight / (double)total;

		cr_assert_leq(fabs(counts[i] / expected - 1), 0.01,
			      "%s (weight %u of %llu) has %u slots, expected "
			      "%.1f",
			      s.b[i].name, s.b[i].weight,
			      (unsigned long long)total, counts[i], expected);
	}
	free(t);
	set_free(&s);
}

/* ------------------------------------------------------- disruption */

/* Removing one of n equal backends must move its ~1/n of the slots and
 * little else. */
Test(maglev, removal_disruption)
{
	const uint32_t m = 65537;

	rng_seed(0x5eed0003);
	for (int round = 0; round < 20; round++) {
		struct set s, r;
		uint32_t n = rng_range(2, 200);
		uint32_t gone = rng_below(n);
		uint32_t *t1, *t2, diff;
		double frac;

		set_random(&s, n, 1);
		set_alloc(&r, n - 1);
		for (uint32_t i = 0, j = 0; i < n; i++)
			if (i != gone)
				r.b[j++] = s.b[i];

		t1 = build_checked(&s, m, NULL);
		t2 = build_checked(&r, m, NULL);
		diff = slots_differing(&s, t1, &r, t2, m);
		frac = (double)diff / m;
		cr_assert_leq(frac, 1.0 / n + 0.01,
			      "set %d n=%u: removing %s changed %u slots "
			      "(%.4f), bound %.4f",
			      round, n, s.b[gone].name, diff, frac,
			      1.0 / n + 0.01);
		for (uint32_t i = 0; i < m; i++)
			if (t1[i] == gone)
				cr_assert_str_neq(r.b[t2[i]].name,
						  s.b[gone].name);
		free(t1);
		free(t2);
		free(r.b); /* names belong to s */
		set_free(&s);
	}
}

/* ------------------------------------------------------ independence */

/* Input order and string addresses do not matter. */
Test(maglev, order_independence)
{
	const uint32_t m = 65537;

	rng_seed(0x5eed0005);
	for (int round = 0; round < 10; round++) {
		struct set s, c;
		uint32_t n = rng_range(1, 300);
		uint32_t *t1, *t2;
		char what[64];

		set_random(&s, n, 0);
		for (uint32_t i = 0; i < n; i++)
			s.b[i].weight = rng_range(0, 50);
		set_shuffled_copy(&c, &s);
		t1 = build_checked(&s, m, NULL);
		t2 = build_checked(&c, m, NULL);
		snprintf(what, sizeof(what), "set %d n=%u shuffled", round, n);
		if (t1[0] != DPFLOW_MAGLEV_NONE)
			expect_same_backends(&s, t1, &c, t2, m, what);
		else
			cr_assert_eq(t2[0], DPFLOW_MAGLEV_NONE);
		free(t1);
		free(t2);
		set_free(&c);
		set_free(&s);
	}
}

/* A draining (weight 0) backend changes no slot, wherever it is listed
 * and whatever its name sorts next to. */
Test(maglev, zero_weight_changes_nothing)
{
	const uint32_t m = 65537;

	rng_seed(0x5eed0006);
	for (int round = 0; round < 10; round++) {
		struct set s, z;
		uint32_t n = rng_range(1, 200), extra = rng_range(1, 5);
		uint32_t *t1, *t2;
		char what[64];

		/* s: n weighted backends, then extra weight-0 ones. */
		set_random(&s, n + extra, 0);
		for (uint32_t i = 0; i < n; i++)
			s.b[i].weight = rng_range(1, 20);
		set_shuffled_copy(&z, &s);

		s.n = n; /* only the weighted ones */
		t1 = build_checked(&s, m, NULL);
		t2 = build_checked(&z, m, NULL);
		snprintf(what, sizeof(what), "set %d n=%u +%u drained", round,
			 n, extra);
		expect_same_backends(&s, t1, &z, t2, m, what);
		s.n = n + extra;
		free(t1);
		free(t2);
		set_free(&z);
		set_free(&s);
	}
}

/* Shares depend on the ratios of the weights only: all 1 and all 7 give
 * the same table, and so do random weights and three times them. */
Test(maglev, weight_scale_invariance)
{
	const uint32_t m = 65537;

	rng_seed(0x5eed0002);
	for (int round = 0; round < 10; round++) {
		struct set s;
		uint32_t n = rng_range(2, 300);
		uint32_t *t1, *t2;
		uint32_t *w = counts_alloc(n);
		char what[64];

		set_random(&s, n, 1);
		t1 = build_checked(&s, m, NULL);
		for (uint32_t i = 0; i < n; i++)
			s.b[i].weight = 7;
		t2 = build_checked(&s, m, NULL);
		snprintf(what, sizeof(what), "set %d n=%u all 1 vs all 7",
			 round, n);
		cr_assert_arr_eq(t1, t2, m * sizeof(*t1), "%s", what);
		free(t1);
		free(t2);

		for (uint32_t i = 0; i < n; i++)
			s.b[i].weight = w[i] = rng_range(1, 100);
		t1 = build_checked(&s, m, NULL);
		for (uint32_t i = 0; i < n; i++)
			s.b[i].weight = 3 * w[i];
		t2 = build_checked(&s, m, NULL);
		snprintf(what, sizeof(what), "set %d n=%u w vs 3w", round, n);
		cr_assert_arr_eq(t1, t2, m * sizeof(*t1), "%s", what);
		free(t1);
		free(t2);
		free(w);
		set_free(&s);
	}
}

/* ------------------------------------------------ naive reference */

/* The name hash as maglev.h describes it: 64-bit FNV-1a of the bytes,
 * XOR the seed, splitmix64's finaliser. */
static uint64_t ref_name_hash(const char *s, uint64_t seed)
{
	uint64_t x = 0xcbf29ce484222325ull;

	for (size_t i = 0; s[i]; i++) {
		x ^= (uint8_t)s[i];
		x *= 0x100000001b3ull;
	}
	x ^= seed;
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

static bool ref_is_prime(uint32_t m)
{
	if (m < 2)
		return false;
	for (uint64_t d = 2; d * d <= m; d++)
		if (m % d == 0)
			return false;
	return true;
}

/* The smallest prime >= @m. */
static uint32_t ref_prime_from(uint32_t m)
{
	while (!ref_is_prime(m))
		m++;
	return m;
}

/*
 * Maglev's table for @s over @m slots, written from the paper's
 * Pseudocode 1 with the header's weighted turns: permutation[i][j] =
 * (offset_i + j * skip_i) % m computed as written; rounds in which every
 * member, in name order, earns its weight and takes one turn per wmax of
 * credit; a turn walks the member's permutation to its next free slot;
 * the table is done when every slot is taken, mid-round or not. Slow
 * (O(rounds * n)) and obviously so.
 */
static void ref_build(const struct set *s, uint32_t m, uint32_t *table)
{
	uint32_t n = s->n, wmax = 0, filled = 0;
	uint32_t *order = calloc(n ? n : 1, sizeof(*order));
	uint64_t *offset = calloc(n ? n : 1, sizeof(*offset));
	uint64_t *skip = calloc(n ? n : 1, sizeof(*skip));
	uint64_t *next = calloc(n ? n : 1, sizeof(*next));
	uint64_t *credit = calloc(n ? n : 1, sizeof(*credit));

	cr_assert(order && offset && skip && next && credit);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t j = i;

		/* insertion sort of the indices by name */
		while (j > 0 &&
		       strcmp(s->b[order[j - 1]].name, s->b[i].name) > 0) {
			order[j] = order[j - 1];
			j--;
		}
		order[j] = i;
		offset[i] =
		    ref_name_hash(s->b[i].name, 0x6d61676c65766f66ull) % m;
		skip[i] = ref_name_hash(s->b[i].name, 0x6d61676c65767370ull) %
			      (m - 1) +
			  1;
		if (s->b[i].weight > wmax)
			wmax = s->b[i].weight;
	}
	for (uint32_t c = 0; c < m; c++)
		table[c] = DPFLOW_MAGLEV_NONE;
	while (wmax && filled < m) {
		for (uint32_t k = 0; k < n && filled < m; k++) {
			uint32_t i = order[k];

			credit[i] += s->b[i].weight;
			while (credit[i] >= wmax && filled < m) {
				uint32_t c;

				credit[i] -= wmax;
				do {
					c = (uint32_t)((offset[i] +
							next[i] * skip[i]) %
						       m);
					next[i]++;
				} while (table[c] != DPFLOW_MAGLEV_NONE);
				table[c] = i;
				filled++;
			}
		}
	}
	free(credit);
	free(next);
	free(skip);
	free(offset);
	free(order);
}

/* Random member sets, weights (some 0) and prime sizes: the builder's
 * table equals the reference's, slot for slot. */
Test(maglev, equals_naive_reference)
{
	rng_seed(0x5eed000a);
	for (int round = 0; round < 80; round++) {
		struct set s;
		uint32_t n = rng_range(0, 40), m, wtop;
		uint32_t *got, *want;

		/* mostly small tables (many rounds per slot), some at the
		 * default size, a few large ones with few members; balanced
		 * weights, and skewed ones (one heavy member: the builder
		 * takes its heap there, see lib/flow/maglev.c) */
		if (round % 10 == 9) {
			m = 1000003;
			n = rng_range(1, 6);
		} else if (round % 5 == 4) {
			m = 65537;
		} else {
			m = ref_prime_from(rng_range(3, 5000));
		}
		wtop = round % 4 == 0 ? 1 : rng_range(1, 12);
		if (round % 5 == 2)
			n = rng_range(10, 40);
		set_random(&s, n, 0);
		for (uint32_t i = 0; i < n; i++)
			s.b[i].weight = rng_range(0, wtop);
		if (round % 5 == 2)
			s.b[rng_below(n)].weight = rng_range(50, 200);
		got = table_alloc(m);
		want = table_alloc(m);
		cr_assert_eq(dpflow_maglev_build(s.b, n, m, got), 0);
		ref_build(&s, m, want);
		for (uint32_t c = 0; c < m; c++)
			cr_assert_eq(got[c], want[c],
				     "set %d (n=%u, m=%u, weights 0..%u): "
				     "slot %u is member %u, the reference "
				     "says %u",
				     round, n, m, wtop, c, got[c], want[c]);
		free(got);
		free(want);
		set_free(&s);
	}
}

/* Equal weights, many members: the paper's own round robin. */
Test(maglev, equals_naive_reference_round_robin)
{
	const uint32_t m = 65537;

	rng_seed(0x5eed000b);
	for (int round = 0; round < 4; round++) {
		struct set s;
		uint32_t n = rng_range(100, 600);
		uint32_t *got = table_alloc(m), *want = table_alloc(m);

		set_random(&s, n, 3);
		cr_assert_eq(dpflow_maglev_build(s.b, n, m, got), 0);
		ref_build(&s, m, want);
		cr_assert_arr_eq(got, want, m * sizeof(*got),
				 "set %d n=%u differs from the reference",
				 round, n);
		free(got);
		free(want);
		set_free(&s);
	}
}

/*
 * The paper sizes tables at M > 100 N so that shares are within 1% of
 * each other. Weighted: each member's slots are within 1% of m * w /
 * total, or within 3 slots where 1% is less than that (whole slots, and
 * a last round cut off when the table fills).
 */
Test(maglev, weighted_shares_within_1pct)
{
	const uint32_t m = 65537;

	rng_seed(0x5eed000c);
	for (int round = 0; round < 40; round++) {
		struct set s;
		uint32_t n = rng_range(2, 600);
		uint32_t *counts = counts_alloc(n), *t;
		uint64_t total = 0;

		set_random(&s, n, 0);
		for (uint32_t i = 0; i < n; i++) {
			s.b[i].weight = rng_range(1, 100);
			total += s.b[i].weight;
		}
		t = build_checked(&s, m, counts);
		for (uint32_t i = 0; i < n; i++) {
			double want = (double)m * s.b[i].weight / (double)total;
			double bound = 0.01 * want > 3 ? 0.01 * want : 3;

			cr_assert_leq(fabs(counts[i] - want), bound,
				      "set %d n=%u: %s (weight %u of %llu) "
				      "has %u slots, expected %.1f +- %.1f",
				      round, n, s.b[i].name, s.b[i].weight,
				      (unsigned long long)total, counts[i],
				      want, bound);
		}
		free(t);
		free(counts);
		set_free(&s);
	}
}

/*
 * Removing one of n members (n <= m / 100, the paper's sizing): every
 * slot it held moves (to a member still there), and of the slots it did
 * not hold at most 2% change hands, so at most 1/n + 2% of the table
 * moves. (Measured: up to about 1% for n in 2..800.)
 */
Test(maglev, removal_moves_little_else)
{
	const uint32_t m = 65537;

	rng_seed(0x5eed000d);
	for (int round = 0; round < 30; round++) {
		struct set s, r;
		uint32_t n = rng_range(2, m / 100);
		uint32_t gone = rng_below(n), held = 0, other_moved = 0;
		uint32_t *t1, *t2;

		set_random(&s, n, 0);
		for (uint32_t i = 0; i < n; i++)
			s.b[i].weight = rng_range(1, 4);
		set_alloc(&r, n - 1);
		for (uint32_t i = 0, j = 0; i < n; i++)
			if (i != gone)
				r.b[j++] = s.b[i];
		t1 = build_checked(&s, m, NULL);
		t2 = build_checked(&r, m, NULL);
		for (uint32_t c = 0; c < m; c++) {
			if (t1[c] == gone) {
				held++;
				continue;
			}
			other_moved +=
			    strcmp(s.b[t1[c]].name, r.b[t2[c]].name) != 0;
		}
		cr_assert_leq((double)other_moved / (m - held), 0.02,
			      "set %d n=%u: removing %s (%u slots) moved %u "
			      "of the other %u slots",
			      round, n, s.b[gone].name, held, other_moved,
			      m - held);
		free(t1);
		free(t2);
		free(r.b); /* names belong to s */
		set_free(&s);
	}
}
