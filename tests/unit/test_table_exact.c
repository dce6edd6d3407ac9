/*
 * Exact-match table tests (lib/flow/table_exact.[ch], table_exact_impl.h).
 *
 * The reference is written here and shares nothing with the table: a
 * universe of distinct keys sorted by memcmp, searched by binary search,
 * with a present flag and a value per key. Keys come from a fixed-seed
 * generator; key i starts with a bijective scramble of i (so the universe
 * is distinct by construction) and continues with random bytes. Misses are
 * keys outside the universe and "near misses", universe keys with one
 * byte changed. Every failed control call is checked to leave the image
 * bytes exactly as they were.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow/table_exact.h"

/* ---- helpers: generator, reference, image snapshots ---- */

static uint64_t rng_state;

static void rng_seed(uint64_t s)
{
	rng_state = s;
}

/* splitmix64 */
static uint64_t rng(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint32_t rng_below(uint32_t n)
{
	return (uint32_t)((rng() >> 32) * n >> 32);
}

/* A bijection of 32-bit integers, so distinct i give distinct words. */
static uint32_t scramble(uint32_t i)
{
	i ^= i >> 16;
	i *= 0x7feb352du;
	i ^= i >> 15;
	i *= 0x846ca68bu;
	i ^= i >> 16;
	return i;
}

/* Key @i of a key set: scramble(i), then random bytes. */
static void make_key(uint8_t *k, uint32_t key_len, uint32_t i)
{
	uint32_t w = scramble(i);

	memcpy(k, &w, 4);
	for (uint32_t j = 4; j < key_len; j++)
		k[j] = (uint8_t)rng();
}

struct ref {
	uint32_t key_len;
	uint32_t n;
	uint8_t *keys; /* n * key_len, sorted by memcmp */
	uint32_t *value;
	uint8_t *present;
	uint32_t count;
};

static uint32_t sort_key_len;

static int cmp_key(const void *a, const void *b)
{
	return memcmp(a, b, sort_key_len);
}

/* A universe of @n distinct keys (made from indices 0..n-1), none present. */
static void ref_init(struct ref *r, uint32_t key_len, uint32_t n)
{
	r->key_len = key_len;
	r->n = n;
	r->keys = malloc((size_t)n * key_len);
	r->value = calloc(n, sizeof(*r->value));
	r->present = calloc(n, 1);
	r->count = 0;
	cr_assert(r->keys && r->value && r->present);
	for (uint32_t i = 0; i < n; i++)
		make_key(r->keys + (size_t)i * key_len, key_len, i);
	sort_key_len = key_len;
	qsort(r->keys, n, key_len, cmp_key);
	for (uint32_t i = 1; i < n; i++)
		cr_assert_neq(memcmp(r->keys + (size_t)(i - 1) * key_len,
				     r->keys + (size_t)i * key_len, key_len),
			      0, "universe keys must be distinct");
}

static void ref_free(struct ref *r)
{
	free(r->keys);
	free(r->value);
	free(r->present);
}

static const uint8_t *ref_key(const struct ref *r, uint32_t i)
{
	return r->keys + (size_t)i * r->key_len;
}

/* Binary search: the universe index of @key, or -1. */
static int64_t ref_find(const struct ref *r, const void *key)
{
	uint32_t lo = 0, hi = r->n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		int c = memcmp(ref_key(r, mid), key, r->key_len);

		if (c == 0)
			return mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

static uint32_t ref_lookup(const struct ref *r, const void *key)
{
	int64_t i = ref_find(r, key);

	return i >= 0 && r->present[i] ? r->value[i] : DPFLOW_TABLE_MISS;
}

/*
 * A lookup probe into @out: a universe key (present or not), a near miss
 * (a universe key with one byte changed) or a key outside the universe.
 */
static void make_probe(const struct ref *r, uint8_t *out)
{
	uint32_t kind = rng_below(4);
	uint32_t i = rng_below(r->n);

	memcpy(out, ref_key(r, i), r->key_len);
	if (kind == 2) {
		uint32_t j = rng_below(r->key_len);

		out[j] = (uint8_t)(out[j] ^ (1 + rng_below(255)));
	} else if (kind == 3) {
		make_key(out, r->key_len, r->n + rng_below(1u << 30));
	}
}

static struct dpflow_exact_image *table_new(uint32_t key_len, uint32_t capacity,
					    uint64_t seed)
{
	struct dpflow_exact_params p = {key_len, capacity, seed};
	struct dpflow_error err = {0};
	struct dpflow_exact_image *t = dpflow_exact_create(&p, &err);

	cr_assert_not_null(t, "create(%u, %u): %s", key_len, capacity, err.msg);
	return t;
}

static uint32_t n_slots(const struct dpflow_exact_image *t)
{
	struct dpflow_exact_info info;

	dpflow_exact_info(t, &info);
	return info.n_slots;
}

static void *snapshot(const struct dpflow_exact_image *t)
{
	size_t n = dpflow_exact_image_bytes(t);
	void *s = malloc(n);

	cr_assert_not_null(s);
	memcpy(s, t, n);
	return s;
}

static void assert_same_bytes(const struct dpflow_exact_image *t,
			      const void *snap, const char *what)
{
	cr_assert_eq(memcmp(t, snap, dpflow_exact_image_bytes(t)), 0,
		     "%s changed the image", what);
}

/* Insert universe key @i with @value into both @t and @r. */
static int insert_both(struct dpflow_exact_image *t, struct ref *r, uint32_t i,
		       uint32_t value)
{
	int rc = dpflow_exact_insert(t, ref_key(r, i), value, NULL);

	if (rc == 0) {
		cr_assert(!r->present[i], "insert of a present key succeeded");
		r->present[i] = 1;
		r->value[i] = value;
		r->count++;
	}
	return rc;
}

/*
 * Every universe key and @n_probe random probes, one by one and in bulks of
 * random size (1..256), agree with the reference.
 */
static void check_all(const struct dpflow_exact_image *t, const struct ref *r,
		      uint32_t n_probe)
{
	enum { BULK = 256 };
	const void *ptr[BULK];
	uint32_t val[BULK];
	uint8_t *buf = malloc((size_t)BULK * r->key_len);
	uint32_t done = 0;

	cr_assert_not_null(buf);
	cr_assert_eq(dpflow_exact_count(t), r->count);
	for (uint32_t i = 0; i < r->n; i += BULK) {
		uint32_t n = r->n - i < BULK ? r->n - i : BULK, hits = 0;

		for (uint32_t j = 0; j < n; j++)
			ptr[j] = ref_key(r, i + j);
		hits = dpflow_exact_lookup_bulk(t, ptr, n, val);
		for (uint32_t j = 0; j < n; j++) {
			uint32_t want = ref_lookup(r, ptr[j]);

			cr_assert_eq(val[j], want, "bulk key %u: %u, want %u",
				     i + j, val[j], want);
			hits -= want != DPFLOW_TABLE_MISS;
		}
		cr_assert_eq(hits, 0, "bulk hit count");
	}
	while (done < n_probe) {
		uint32_t n = 1 + rng_below(BULK), hits;

		if (n > n_probe - done)
			n = n_probe - done;
		for (uint32_t j = 0; j < n; j++) {
			make_probe(r, buf + (size_t)j * r->key_len);
			ptr[j] = buf + (size_t)j * r->key_len;
		}
		hits = dpflow_exact_lookup_bulk(t, ptr, n, val);
		for (uint32_t j = 0; j < n; j++) {
			uint32_t want = ref_lookup(r, ptr[j]);

			cr_assert_eq(val[j], want, "bulk probe: %u, want %u",
				     val[j], want);
			/* the one-key lookup on every 4th probe */
			if (j % 4 == 0)
				cr_assert_eq(dpflow_exact_lookup(t, ptr[j]),
					     want, "one-key probe");
			hits -= want != DPFLOW_TABLE_MISS;
		}
		cr_assert_eq(hits, 0, "bulk probe hit count");
		done += n;
	}
	free(buf);
}

/* ---- parameters, layout, errors ---- */

Test(table_exact, bad_params_name_the_field)
{
	static const struct {
		uint32_t key_len, capacity;
		const char *field;
	} bad[] = {
	    {0, 100, "key_len"},
	    {2, 100, "key_len"},
	    {6, 100, "key_len"},
	    {68, 100, "key_len"},
	    {1024, 100, "key_len"},
	    {16, 0, "capacity"},
	    {16, (1u << 28) + 1, "capacity"},
	    {16, UINT32_MAX, "capacity"},
	};

	for (size_t i = 0; i < DPFLOW_ARRAY_SIZE(bad); i++) {
		struct dpflow_exact_params p = {bad[i].key_len, bad[i].capacity,
						0};
		struct dpflow_error err = {0};

		cr_assert_null(dpflow_exact_create(&p, &err));
		cr_assert_eq(err.code, EINVAL);
		cr_assert_str_eq(err.field, bad[i].field, "case %zu", i);
		cr_assert_eq(dpflow_exact_image_size(p.key_len, p.capacity), 0);
	}
	cr_assert_null(dpflow_exact_create(NULL, NULL));
	for (uint32_t k = 4; k <= 64; k += 4)
		cr_assert_gt(dpflow_exact_image_size(k, 1), 0, "key_len %u", k);
}

Test(table_exact, init_checks_memory_and_size)
{
	struct dpflow_exact_params p = {16, 1000, 7};
	size_t size = dpflow_exact_image_size(16, 1000);
	uint8_t *mem = aligned_alloc(64, size + 64);
	struct dpflow_error err = {0};

	cr_assert_not_null(mem);
	cr_assert_eq(dpflow_exact_image_init(mem + 8, size, &p, &err), -EINVAL);
	cr_assert_str_eq(err.field, "mem");
	cr_assert_eq(dpflow_exact_image_init(NULL, size, &p, &err), -EINVAL);
	cr_assert_str_eq(err.field, "mem");
	cr_assert_eq(dpflow_exact_image_init(mem, size - 1, &p, &err), -EINVAL);
	cr_assert_str_eq(err.field, "size");
	p.key_len = 5;
	cr_assert_eq(dpflow_exact_image_init(mem, size, &p, &err), -EINVAL);
	cr_assert_str_eq(err.field, "key_len");
	p.key_len = 16;
	cr_assert_eq(dpflow_exact_image_init(mem, size, &p, &err), 0);
	cr_assert_eq(dpflow_exact_image_check(mem, size, &err), 0, "%s",
		     err.msg);
	free(mem);
}

Test(table_exact, layout_and_info)
{
	static const uint32_t caps[] = {1, 7, 8, 15, 16, 1000, 65536, 1u << 20};

	for (size_t c = 0; c < DPFLOW_ARRAY_SIZE(caps); c++) {
		for (uint32_t k = 4; k <= 64; k += 12) {
			struct dpflow_exact_image *t;
			const struct dpflow_exact_image *h;
			struct dpflow_exact_info info;

			if (caps[c] > 65536 && k != 16)
				continue; /* one large image is enough */
			t = table_new(k, caps[c], 1);
			h = t;
			dpflow_exact_info(t, &info);
			cr_assert_eq(info.key_len, k);
			cr_assert_eq(info.capacity, caps[c]);
			cr_assert_eq(info.n_entries, 0);
			cr_assert_geq(info.n_buckets, 16);
			cr_assert_eq(info.n_slots, info.n_buckets * 8);
			/* at capacity at most 15/16 of the slots are full */
			cr_assert_geq((uint64_t)info.n_slots * 15,
				      (uint64_t)caps[c] * 16);
			cr_assert_eq(info.size,
				     dpflow_exact_image_size(k, caps[c]));
			cr_assert_eq(info.size % 64, 0);
			cr_assert_eq((uintptr_t)t % 64, 0);
			cr_assert_eq(h->magic, DPFLOW_EXACT_MAGIC);
			cr_assert_eq(h->tags_off, 64);
			cr_assert_eq(h->entries_off % 64, 0);
			cr_assert_geq(h->entries_off,
				      64 + (uint64_t)info.n_slots * 2);
			cr_assert_geq(info.size,
				      h->entries_off +
					  (uint64_t)info.n_slots * (k + 4));
			cr_assert_eq(
			    dpflow_exact_image_check(t, info.size, NULL), 0);
			dpflow_exact_destroy(t);
		}
	}
	dpflow_exact_destroy(NULL);
}

Test(table_exact, image_check_rejects_damage)
{
	struct dpflow_exact_image *t = table_new(16, 1000, 1);
	size_t size = dpflow_exact_image_bytes(t);
	struct dpflow_error err = {0};

	cr_assert_eq(dpflow_exact_image_check(t, size - 64, &err), -EINVAL);
	cr_assert_str_eq(err.field, "size");
	t->magic ^= 1;
	cr_assert_eq(dpflow_exact_image_check(t, size, &err), -EINVAL);
	cr_assert_str_eq(err.field, "magic");
	t->magic ^= 1;
	t->n_buckets++;
	cr_assert_eq(dpflow_exact_image_check(t, size, &err), -EINVAL);
	cr_assert_str_eq(err.field, "n_buckets");
	t->n_buckets--;
	t->key_len = 20;
	cr_assert_eq(dpflow_exact_image_check(t, size, &err), -EINVAL);
	cr_assert_str_eq(err.field, "key_len");
	t->key_len = 16;
	t->n_entries = UINT32_MAX;
	cr_assert_eq(dpflow_exact_image_check(t, size, &err), -EINVAL);
	cr_assert_str_eq(err.field, "n_entries");
	t->n_entries = 0;
	cr_assert_eq(dpflow_exact_image_check(t, size, &err), 0);
	dpflow_exact_destroy(t);
}

/* ---- the hash and the tag compare ---- */

/*
 * Pinned values: the GPU target must compute the same hashes, and images
 * copied between builds stay valid only while these do not change.
 */
Test(table_exact, hash_known_answers)
{
	uint8_t k[64];

	for (unsigned i = 0; i < sizeof(k); i++)
		k[i] = (uint8_t)(i * 7 + 1);
	cr_assert_eq(dpflow_exact_hash(k, 4, 0), 0x38c1d158c9d45417ull);
	cr_assert_eq(dpflow_exact_hash(k, 16, 0), 0x7bd8f4ffae1cbb33ull);
	cr_assert_eq(dpflow_exact_hash(k, 20, 0), 0x4d8ccc74bf5f3d85ull);
	cr_assert_eq(dpflow_exact_hash(k, 64, 0), 0xae165af7bb800cb6ull);
	cr_assert_eq(dpflow_exact_hash(k, 16, 12345), 0x61332237f61b1c6bull);
}

Test(table_exact, hash_depends_on_every_byte_and_seed)
{
	uint8_t k[64];

	rng_seed(11);
	for (uint32_t len = 4; len <= 64; len += 4) {
		for (uint32_t j = 0; j < len; j++) {
			uint64_t h;

			for (unsigned i = 0; i < sizeof(k); i++)
				k[i] = (uint8_t)rng();
			h = dpflow_exact_hash(k, len, 0);
			k[j] ^= (uint8_t)(1u << rng_below(8));
			cr_assert_neq(dpflow_exact_hash(k, len, 0), h,
				      "len %u byte %u", len, j);
			cr_assert_neq(dpflow_exact_hash(k, len, 1),
				      dpflow_exact_hash(k, len, 0));
		}
	}
}

/*
 * Buckets in range, the second a function of the first and the tag that
 * is its own inverse, the tag never 0, a key's two buckets the same for
 * about one key in n_buckets.
 */
Test(table_exact, sig_in_range_alt_involution_nonzero_tag)
{
	static const uint32_t nbs[] = {16,     17,	 1000,
				       139811, 1u << 20, 35791395};
	const uint32_t n = 200000;

	rng_seed(12);
	for (size_t c = 0; c < DPFLOW_ARRAY_SIZE(nbs); c++) {
		uint32_t same = 0;

		for (uint32_t i = 0; i < n; i++) {
			uint64_t h = rng();
			struct dpflow_exact_sig s;

			if (i < 4) /* tag bits 0, bucket bits at the edges */
				h = i == 0   ? 0
				    : i == 1 ? ~0ull
				    : i == 2 ? 0xffffffffffff0000ull
					     : 0x10000ull;
			s = dpflow_exact_sig_of(h, nbs[c]);
			cr_assert_lt(s.b1, nbs[c]);
			cr_assert_lt(s.b2, nbs[c]);
			cr_assert_eq(dpflow_exact_alt(s.b2, s.tag, nbs[c]),
				     s.b1);
			cr_assert_eq(dpflow_exact_alt(s.b1, s.tag, nbs[c]),
				     s.b2);
			cr_assert_neq(s.tag, 0);
			if ((uint16_t)h)
				cr_assert_eq(s.tag, (uint16_t)h);
			same += s.b1 == s.b2;
		}
		cr_assert_leq(same, 2 * n / nbs[c] + 20, "nb %u: %u of %u",
			      nbs[c], same, n);
	}
	/* every bucket of a small table is some key's second bucket */
	for (uint32_t b = 0; b < 1000; b++) {
		uint32_t hit = 0;

		for (uint32_t t = 1; t < 65536 && !hit; t++)
			hit = dpflow_exact_alt(b, (uint16_t)t, 1000) != b;
		cr_assert(hit);
	}
}

/* The SWAR lane compare against a plain per-lane loop. */
Test(table_exact, match4_is_exact)
{
	rng_seed(13);
	for (uint32_t i = 0; i < 1000000; i++) {
		uint64_t w = rng();
		uint16_t tag = (uint16_t)rng();
		uint32_t want = 0;

		/* plant the tag, its neighbours and zero in some lanes */
		for (unsigned l = 0; l < 4; l++) {
			uint32_t r = rng_below(8);
			uint16_t v = r == 0   ? tag
				     : r == 1 ? (uint16_t)(tag + 1)
				     : r == 2 ? (uint16_t)(tag - 1)
				     : r == 3 ? (uint16_t)(tag ^ 0x8000)
				     : r == 4 ? 0
					      : (uint16_t)(w >> (16 * l));

			w = (w & ~(0xffffull << (16 * l))) | (uint64_t)v
								 << (16 * l);
		}
		for (unsigned l = 0; l < 4; l++)
			if ((uint16_t)(w >> (16 * l)) == tag)
				want |= 1u << l;
		cr_assert_eq(dpflow_exact_match4(w, tag), want,
			     "w %016llx tag %04x", (unsigned long long)w, tag);
	}
}

/*
 * The bulk lookup's two-bucket tag compare (SSE2 on x86) gives the same
 * mask as the portable SWAR compare, on tag groups with planted matches.
 */
Test(table_exact, match_pair_equals_swar_reference)
{
	struct dpflow_exact_image *t = table_new(16, 60, 1);
	uint32_t nb = t->n_buckets;
	uint8_t *tags = (uint8_t *)t + t->tags_off;

	cr_assert_geq(nb, 8);
	rng_seed(22);
	for (uint32_t round = 0; round < 20000; round++) {
		uint16_t tag = (uint16_t)rng();
		uint32_t b1 = rng_below(nb), b2 = rng_below(nb);

		for (uint32_t j = 0; j < nb * 8; j++) {
			uint32_t r = rng_below(6);
			uint16_t v = r == 0   ? tag
				     : r == 1 ? 0
				     : r == 2 ? (uint16_t)(tag ^ 0x8000)
					      : (uint16_t)rng();

			memcpy(tags + 2 * j, &v, 2);
		}
		cr_assert_eq(dpflow_exact_match_pair(t, b1, b2, tag),
			     dpflow_exact_match8(t, b1, tag) |
				 dpflow_exact_match8(t, b2, tag) << 8,
			     "round %u", round);
	}
	dpflow_exact_destroy(t);
}

/* ---- control calls ---- */

Test(table_exact, insert_lookup_delete_basics)
{
	struct dpflow_exact_image *t = table_new(16, 100, 3);
	uint8_t a[16], b[16];
	struct dpflow_error err = {0};
	uint32_t old = 0;
	void *snap;

	memset(a, 0x11, sizeof(a));
	memset(b, 0x11, sizeof(b));
	b[15] = 0x12; /* differs from a in the last byte only */
	cr_assert_eq(dpflow_exact_lookup(t, a), DPFLOW_TABLE_MISS);
	cr_assert_eq(dpflow_exact_insert(t, a, 5, &err), 0);
	cr_assert_eq(dpflow_exact_lookup(t, a), 5);
	cr_assert_eq(dpflow_exact_lookup(t, b), DPFLOW_TABLE_MISS);
	cr_assert_eq(dpflow_exact_insert(t, b, 0, &err), 0);
	cr_assert_eq(dpflow_exact_lookup(t, b), 0);
	cr_assert_eq(dpflow_exact_count(t), 2);

	snap = snapshot(t);
	cr_assert_eq(dpflow_exact_insert(t, a, 9, &err), -EEXIST);
	cr_assert_str_eq(err.field, "key");
	cr_assert_eq(dpflow_exact_insert(t, NULL, 9, &err), -EINVAL);
	cr_assert_str_eq(err.field, "key");
	cr_assert_eq(dpflow_exact_insert(t, a, DPFLOW_TABLE_MISS, &err),
		     -EINVAL);
	cr_assert_str_eq(err.field, "value");
	cr_assert_eq(dpflow_exact_update(t, a, DPFLOW_TABLE_MISS, &err),
		     -EINVAL);
	cr_assert_str_eq(err.field, "value");
	a[0] ^= 0xff;
	cr_assert_eq(dpflow_exact_update(t, a, 3, &err), -ENOENT);
	cr_assert_str_eq(err.field, "key");
	cr_assert_eq(dpflow_exact_delete(t, a, &old, &err), -ENOENT);
	cr_assert_str_eq(err.field, "key");
	cr_assert_eq(dpflow_exact_delete(t, NULL, &old, NULL), -EINVAL);
	a[0] ^= 0xff;
	assert_same_bytes(t, snap, "failed calls");
	cr_assert_eq(dpflow_exact_lookup(t, a), 5, "value kept on -EEXIST");

	cr_assert_eq(dpflow_exact_update(t, a, 77, &err), 0);
	cr_assert_eq(dpflow_exact_lookup(t, a), 77);
	cr_assert_eq(dpflow_exact_delete(t, a, &old, &err), 0);
	cr_assert_eq(old, 77);
	cr_assert_eq(dpflow_exact_lookup(t, a), DPFLOW_TABLE_MISS);
	cr_assert_eq(dpflow_exact_lookup(t, b), 0);
	cr_assert_eq(dpflow_exact_count(t), 1);
	cr_assert_eq(dpflow_exact_delete(t, b, NULL, &err), 0);
	cr_assert_eq(dpflow_exact_count(t), 0);
	/* an empty table again: every tag and entry byte back to zero */
	dpflow_exact_clear((struct dpflow_exact_image *)snap);
	assert_same_bytes(t, snap, "deleting everything");
	free(snap);
	dpflow_exact_destroy(t);
}

/* In a sparse table an insert takes a free slot, so a delete undoes it. */
Test(table_exact, insert_then_delete_restores_bytes)
{
	struct dpflow_exact_image *t = table_new(16, 4096, 4);
	struct ref r;

	rng_seed(14);
	ref_init(&r, 16, 2000);
	for (uint32_t i = 0; i < 1000; i++)
		cr_assert_eq(insert_both(t, &r, i, i), 0);
	for (uint32_t i = 1000; i < 2000; i++) {
		void *snap = snapshot(t);

		cr_assert_eq(dpflow_exact_insert(t, ref_key(&r, i), i, NULL),
			     0);
		cr_assert_eq(dpflow_exact_delete(t, ref_key(&r, i), NULL, NULL),
			     0);
		assert_same_bytes(t, snap, "insert + delete");
		free(snap);
	}
	check_all(t, &r, 10000);
	ref_free(&r);
	dpflow_exact_destroy(t);
}

/*
 * The smallest table (16 buckets, 128 slots) filled until it refuses keys,
 * holding pairs of keys with one tag and one pair of buckets, so lookups
 * must compare whole keys; refused inserts leave the image untouched.
 */
Test(table_exact, small_table_full_and_tag_collisions)
{
	enum { POOL = 16384, PAIRS = 8 };
	struct dpflow_exact_image *t = table_new(16, 8, 5);
	uint8_t(*keys)[16] = malloc(POOL * 16);
	uint32_t *seen = calloc(1u << 20, sizeof(*seen));
	uint32_t *val = calloc(POOL, sizeof(*val));
	uint8_t *in = calloc(POOL, 1), *used = calloc(POOL, 1);
	void *snap = malloc(dpflow_exact_image_bytes(t));
	uint32_t twin[PAIRS][2], n = 0, refused = 0, first_refusal = 0;
	struct dpflow_error err = {0};

	cr_assert(keys && seen && val && in && used && snap);
	cr_assert_eq(n_slots(t), 128);
	rng_seed(15);
	for (uint32_t i = 0; i < POOL; i++) {
		struct dpflow_exact_sig sg;
		uint32_t k;

		make_key(keys[i], 16, i);
		sg = dpflow_exact_sig_of(dpflow_exact_hash(keys[i], 16, 5), 16);
		k = (uint32_t)sg.tag << 4 | sg.b1;
		if (n < PAIRS && seen[k] && !used[seen[k] - 1] &&
		    sg.b1 != sg.b2) {
			twin[n][0] = seen[k] - 1;
			twin[n][1] = i;
			used[twin[n][0]] = used[i] = 1;
			n++;
		}
		seen[k] = i + 1;
	}
	cr_assert_eq(n, PAIRS, "found %u same-tag, same-bucket pairs", n);
	/* both keys of each pair but the last, whose second stays out */
	for (uint32_t p = 0; p < PAIRS; p++)
		for (uint32_t w = 0; w < 2; w++) {
			uint32_t i = twin[p][w];

			if (p == PAIRS - 1 && w == 1)
				continue;
			cr_assert_eq(dpflow_exact_insert(t, keys[i], i, &err),
				     0, "%s", err.msg);
			in[i] = 1;
			val[i] = i;
		}
	/* then other keys until 20 are refused */
	for (uint32_t i = 0; i < POOL && refused < 20; i++) {
		int rc;

		if (used[i])
			continue;
		memcpy(snap, t, dpflow_exact_image_bytes(t));
		rc = dpflow_exact_insert(t, keys[i], 7 * i, &err);
		if (rc == -ENOSPC) {
			cr_assert_str_eq(err.field, "capacity");
			assert_same_bytes(t, snap, "insert into a full table");
			if (!refused)
				first_refusal = dpflow_exact_count(t);
			refused++;
			continue;
		}
		cr_assert_eq(rc, 0);
		in[i] = 1;
		val[i] = 7 * i;
	}
	cr_assert_eq(refused, 20);
	fprintf(stderr,
		"exact: 128-slot table: first refusal at %u, %u at "
		"the end\n",
		first_refusal, dpflow_exact_count(t));
	cr_assert_geq(first_refusal, 120);
	for (uint32_t i = 0; i < POOL; i++) {
		uint32_t want = in[i] ? val[i] : DPFLOW_TABLE_MISS, v;
		const void *p = keys[i];

		cr_assert_eq(dpflow_exact_lookup(t, keys[i]), want, "key %u",
			     i);
		cr_assert_eq(dpflow_exact_lookup_bulk(t, &p, 1, &v),
			     want != DPFLOW_TABLE_MISS);
		cr_assert_eq(v, want);
	}
	/* the absent twin takes the slot its present twin frees */
	{
		uint32_t a = twin[PAIRS - 1][0], b = twin[PAIRS - 1][1];

		cr_assert_eq(dpflow_exact_insert(t, keys[b], 1, &err), -ENOSPC);
		cr_assert_eq(dpflow_exact_delete(t, keys[a], NULL, &err), 0);
		cr_assert_eq(dpflow_exact_insert(t, keys[b], 1, &err), 0);
		cr_assert_eq(dpflow_exact_lookup(t, keys[b]), 1);
		cr_assert_eq(dpflow_exact_lookup(t, keys[a]),
			     DPFLOW_TABLE_MISS);
	}
	free(keys);
	free(seen);
	free(val);
	free(in);
	free(used);
	free(snap);
	dpflow_exact_destroy(t);
}

/*
 * Fill until inserts fail: report the load at the first -ENOSPC; every
 * failed insert leaves the image bytes identical; then delete a tenth and
 * insert them again; the reference agrees throughout.
 */
Test(table_exact, fill_until_full_then_delete_and_reinsert)
{
	const uint32_t cap = 30000;
	struct dpflow_exact_image *t = table_new(16, cap, 6);
	uint32_t slots = n_slots(t), first_fail = 0, fails = 0, i;
	size_t size = dpflow_exact_image_bytes(t);
	void *snap = malloc(size);
	struct ref r;

	rng_seed(16);
	ref_init(&r, 16, slots + 20000);
	for (i = 0; i < r.n && fails < 200; i++) {
		int rc;

		if (first_fail)
			memcpy(snap, t, size);
		rc = insert_both(t, &r, i, i * 3);
		if (rc == -ENOSPC) {
			if (!first_fail) {
				first_fail = r.count;
				/* the failed call before any snapshot:
				 * retry it with one */
				memcpy(snap, t, size);
				cr_assert_eq(insert_both(t, &r, i, i * 3),
					     -ENOSPC);
			}
			assert_same_bytes(t, snap, "-ENOSPC insert");
			fails++;
		} else {
			cr_assert_eq(rc, 0);
		}
	}
	free(snap);
	cr_assert_gt(first_fail, 0, "the table never filled");
	fprintf(stderr,
		"exact: %u slots (capacity %u): first -ENOSPC at %u entries "
		"(load %.4f), %u entries after 200 failures (load %.4f)\n",
		slots, cap, first_fail, (double)first_fail / slots, r.count,
		(double)r.count / slots);
	cr_assert_geq(first_fail, cap, "capacity %u not reached", cap);
	cr_assert_geq((double)first_fail / slots, 0.95);
	check_all(t, &r, 100000);

	/* delete a tenth of the present keys, then insert them again */
	{
		uint32_t *gone = malloc(r.count / 10 * sizeof(*gone)), n = 0;
		uint32_t again = 0;

		cr_assert_not_null(gone);
		for (uint32_t k = 0; k < r.n && n < r.count / 10; k++) {
			uint32_t j = rng_below(r.n), old = 0;

			if (!r.present[j])
				continue;
			cr_assert_eq(
			    dpflow_exact_delete(t, ref_key(&r, j), &old, NULL),
			    0);
			cr_assert_eq(old, r.value[j]);
			r.present[j] = 0;
			r.count--;
			gone[n++] = j;
		}
		check_all(t, &r, 20000);
		for (uint32_t k = 0; k < n; k++) {
			int rc = insert_both(t, &r, gone[k], gone[k] + 1);

			cr_assert(rc == 0 || rc == -ENOSPC);
			again += rc == 0;
		}
		fprintf(stderr, "exact: re-inserted %u of %u deleted keys\n",
			again, n);
		cr_assert_geq(again, n - n / 100);
		free(gone);
	}
	check_all(t, &r, 100000);
	/* after many displacements, deleting every key leaves all slots
	 * zero again: moves and deletes leave no stale bytes behind */
	{
		struct dpflow_exact_image *fresh = table_new(16, cap, 6);

		for (uint32_t k = 0; k < r.n; k++)
			if (r.present[k])
				cr_assert_eq(dpflow_exact_delete(
						 t, ref_key(&r, k), NULL, NULL),
					     0);
		cr_assert_eq(dpflow_exact_count(t), 0);
		cr_assert_eq(memcmp(t, fresh, size), 0);
		dpflow_exact_destroy(fresh);
	}
	ref_free(&r);
	dpflow_exact_destroy(t);
}

/*
 * The main model test: random inserts, deletes and updates on a universe
 * half again as large as the capacity, then 1M+ random lookups (hits, near
 * misses, absent keys) in bulks of random size and one by one.
 */
Test(table_exact, random_ops_and_1m_lookups_vs_reference)
{
	const uint32_t cap = 65536;
	struct dpflow_exact_image *t = table_new(16, cap, 7);
	size_t size = dpflow_exact_image_bytes(t);
	void *snap = malloc(size);
	struct ref r;
	uint32_t lookups = 0;

	rng_seed(17);
	ref_init(&r, 16, cap + cap / 2);
	for (unsigned round = 0; round < 8; round++) {
		for (uint32_t op = 0; op < 40000; op++) {
			uint32_t i = rng_below(r.n), kind = rng_below(10);
			uint32_t v = rng_below(DPFLOW_TABLE_MISS), old = 0;
			int rc;

			if (kind < 5) {
				int was = r.present[i];

				/* whole-image compare on every 64th op */
				if (was && op % 64 == 0)
					memcpy(snap, t, size);
				rc = insert_both(t, &r, i, v);
				if (was) {
					cr_assert_eq(rc, -EEXIST);
					cr_assert_eq(dpflow_exact_lookup(
							 t, ref_key(&r, i)),
						     r.value[i]);
					if (op % 64 == 0)
						assert_same_bytes(
						    t, snap, "-EEXIST insert");
				} else if (r.count < cap) {
					cr_assert_eq(rc, 0,
						     "insert at %u of capacity",
						     r.count);
				} else {
					cr_assert(rc == 0 || rc == -ENOSPC);
				}
			} else if (kind < 8) {
				rc = dpflow_exact_delete(t, ref_key(&r, i),
							 &old, NULL);
				cr_assert_eq(rc, r.present[i] ? 0 : -ENOENT);
				if (rc == 0) {
					cr_assert_eq(old, r.value[i]);
					r.present[i] = 0;
					r.count--;
				}
			} else {
				rc = dpflow_exact_update(t, ref_key(&r, i), v,
							 NULL);
				cr_assert_eq(rc, r.present[i] ? 0 : -ENOENT);
				if (rc == 0)
					r.value[i] = v;
			}
		}
		check_all(t, &r, 131072);
		lookups += r.n + 131072;
	}
	fprintf(stderr, "exact: %u lookups checked, %u entries at the end\n",
		lookups, r.count);
	cr_assert_geq(lookups, 1000000);
	free(snap);
	ref_free(&r);
	dpflow_exact_destroy(t);
}

/* Every key length, with keys that differ only in their last word. */
Test(table_exact, every_key_length)
{
	for (uint32_t k = 4; k <= 64; k += 4) {
		struct dpflow_exact_image *t = table_new(k, 3000, k);
		struct ref r;
		uint8_t a[64], b[64];

		rng_seed(100 + k);
		ref_init(&r, k, 4000);
		for (uint32_t n = 0; n < 3000; n++) {
			uint32_t i = rng_below(r.n);
			int was = r.present[i];

			cr_assert_eq(insert_both(t, &r, i, n),
				     was ? -EEXIST : 0);
		}
		for (uint32_t i = 0; i < r.n; i += 7) {
			uint32_t v = 0;

			if (!r.present[i])
				continue;
			cr_assert_eq(
			    dpflow_exact_delete(t, ref_key(&r, i), &v, NULL),
			    0);
			r.present[i] = 0;
			r.count--;
		}
		check_all(t, &r, 30000);
		/* last-word and first-byte neighbours */
		memset(a, 0x5a, sizeof(a));
		memcpy(b, a, sizeof(b));
		b[k - 1] ^= 1;
		cr_assert_eq(dpflow_exact_insert(t, a, 1, NULL), 0);
		cr_assert_eq(dpflow_exact_lookup(t, b), DPFLOW_TABLE_MISS);
		cr_assert_eq(dpflow_exact_insert(t, b, 2, NULL), 0);
		b[k - 1] ^= 1;
		b[0] ^= 0x80;
		cr_assert_eq(dpflow_exact_lookup(t, b), DPFLOW_TABLE_MISS);
		cr_assert_eq(dpflow_exact_insert(t, b, 3, NULL), 0);
		cr_assert_eq(dpflow_exact_lookup(t, a), 1);
		b[0] ^= 0x80;
		b[k - 1] ^= 1;
		cr_assert_eq(dpflow_exact_lookup(t, b), 2);
		b[k - 1] ^= 1;
		b[0] ^= 0x80;
		cr_assert_eq(dpflow_exact_lookup(t, b), 3);
		ref_free(&r);
		dpflow_exact_destroy(t);
	}
}

Test(table_exact, bulk_sizes_and_unaligned_keys)
{
	struct dpflow_exact_image *t = table_new(16, 10000, 8);
	static const uint32_t sizes[] = {0,   1,   2,	63,  64,  65,  127,
					 128, 200, 255, 256, 300, 1000};
	uint8_t *buf = malloc(1000 * 17 + 1);
	const void *ptr[1000];
	uint32_t val[1000];
	struct ref r;

	cr_assert_not_null(buf);
	rng_seed(18);
	ref_init(&r, 16, 12000);
	for (uint32_t i = 0; i < 12000; i += 2)
		cr_assert_eq(insert_both(t, &r, i, i), 0);
	for (size_t c = 0; c < DPFLOW_ARRAY_SIZE(sizes); c++) {
		uint32_t n = sizes[c], want_hits = 0;

		for (uint32_t j = 0; j < n; j++) {
			/* odd addresses: keys need no alignment */
			uint8_t *p = buf + 1 + (size_t)j * 17;

			make_probe(&r, p);
			ptr[j] = p;
			want_hits += ref_lookup(&r, p) != DPFLOW_TABLE_MISS;
		}
		cr_assert_eq(dpflow_exact_lookup_bulk(t, ptr, n, val),
			     want_hits, "n %u", n);
		for (uint32_t j = 0; j < n; j++)
			cr_assert_eq(val[j], ref_lookup(&r, ptr[j]));
	}
	free(buf);
	ref_free(&r);
	dpflow_exact_destroy(t);
}

/*
 * A copy in other memory answers as the original, after the original is
 * wiped and freed; changes to the copy do not reach the original.
 */
Test(table_exact, image_copy_answers_the_same)
{
	struct dpflow_exact_image *t = table_new(16, 20000, 9), *c2;
	size_t size = dpflow_exact_image_bytes(t);
	uint8_t *mem = aligned_alloc(64, size + 128);
	struct dpflow_exact_image *copy =
	    (struct dpflow_exact_image *)(mem + 64);
	struct dpflow_error err = {0};
	struct ref r;

	cr_assert_not_null(mem);
	rng_seed(19);
	ref_init(&r, 16, 24000);
	for (uint32_t i = 0; i < r.n; i++)
		if (rng_below(4))
			cr_assert_eq(
			    insert_both(t, &r, i, rng_below(DPFLOW_TABLE_MISS)),
			    0);
	for (uint32_t i = 0; i < r.n; i++)
		if (r.present[i] && rng_below(3) == 0) {
			cr_assert_eq(
			    dpflow_exact_delete(t, ref_key(&r, i), NULL, NULL),
			    0);
			r.present[i] = 0;
			r.count--;
		}

	cr_assert_eq(dpflow_exact_image_copy(mem + 1, size + 64, t, &err),
		     -EINVAL);
	cr_assert_str_eq(err.field, "dst");
	cr_assert_eq(dpflow_exact_image_copy(copy, size - 1, t, &err), -EINVAL);
	cr_assert_str_eq(err.field, "dst_size");
	cr_assert_eq(dpflow_exact_image_copy(copy, size + 64, t, &err), 0);
	c2 = dpflow_exact_clone(t, &err);
	cr_assert_not_null(c2);
	cr_assert_eq(memcmp(c2, t, size), 0);

	memset(t, 0xa5, size); /* the copies must not point into it */
	dpflow_exact_destroy(t);
	cr_assert_eq(dpflow_exact_image_check(copy, size, &err), 0, "%s",
		     err.msg);
	check_all(copy, &r, 50000);
	check_all(c2, &r, 10000);

	/* the copies are independent images */
	for (uint32_t i = 0; i < r.n; i++)
		if (r.present[i]) {
			cr_assert_eq(dpflow_exact_delete(copy, ref_key(&r, i),
							 NULL, NULL),
				     0);
			r.present[i] = 0;
			r.count--;
			break;
		}
	check_all(copy, &r, 1000);
	cr_assert_eq(dpflow_exact_count(c2), r.count + 1);
	dpflow_exact_destroy(c2);
	ref_free(&r);
	free(mem);
}

/*
 * The pipe layer replays each batch on its second image: the same calls,
 * failed ones included, give the same bytes. Clear gives a fresh image.
 */
Test(table_exact, replay_gives_identical_images)
{
	struct dpflow_exact_image *a = table_new(24, 5000, 10);
	struct dpflow_exact_image *b = table_new(24, 5000, 10);
	struct dpflow_exact_image *fresh = table_new(24, 5000, 10);
	size_t size = dpflow_exact_image_bytes(a);
	struct ref r;

	rng_seed(20);
	ref_init(&r, 24, 7000);
	for (uint32_t op = 0; op < 60000; op++) {
		uint32_t i = rng_below(r.n), v = rng_below(1000000);
		int ra, rb;

		switch (rng_below(3)) {
		case 0:
		case 1:
			ra = dpflow_exact_insert(a, ref_key(&r, i), v, NULL);
			rb = dpflow_exact_insert(b, ref_key(&r, i), v, NULL);
			break;
		default:
			ra = dpflow_exact_delete(a, ref_key(&r, i), NULL, NULL);
			rb = dpflow_exact_delete(b, ref_key(&r, i), NULL, NULL);
			break;
		}
		cr_assert_eq(ra, rb);
	}
	cr_assert_gt(dpflow_exact_count(a), 4000);
	cr_assert_eq(memcmp(a, b, size), 0);
	dpflow_exact_clear(a);
	cr_assert_eq(dpflow_exact_count(a), 0);
	cr_assert_eq(memcmp(a, fresh, size), 0);
	for (uint32_t i = 0; i < r.n; i++)
		cr_assert_eq(dpflow_exact_lookup(a, ref_key(&r, i)),
			     DPFLOW_TABLE_MISS);
	ref_free(&r);
	dpflow_exact_destroy(a);
	dpflow_exact_destroy(b);
	dpflow_exact_destroy(fresh);
}

/* The benchmark's scale: a 1M-capacity table filled past its capacity. */
Test(table_exact, one_million_capacity_fill)
{
	const uint32_t cap = 1u << 20;
	struct dpflow_exact_image *t = table_new(16, cap, 11);
	uint32_t slots = n_slots(t), first_fail = 0;
	struct ref r;

	rng_seed(21);
	ref_init(&r, 16, slots);
	for (uint32_t i = 0; i < r.n; i++) {
		int rc = insert_both(t, &r, i, i);

		if (rc == -ENOSPC) {
			first_fail = r.count;
			break;
		}
		cr_assert_eq(rc, 0);
	}
	fprintf(stderr,
		"exact: 1M capacity, %u slots: %u entries at the first "
		"failure or the end (load %.4f)\n",
		slots, r.count, (double)r.count / slots);
	cr_assert_geq(r.count, cap);
	cr_assert(first_fail == 0 || first_fail >= cap);
	check_all(t, &r, 0);
	ref_free(&r);
	dpflow_exact_destroy(t);
}
