/*
 * Exact-match table: building and editing images (control path), and the
 * out-of-line lookups.
 *
 * Owns: image layout arithmetic, insertion with cuckoo displacement,
 * delete, update, clear, copy and allocation. Called by one control thread
 * per image, on an image that no reader is using (see table_exact.h); no
 * call here takes a lock or keeps state outside the image.
 *
 * Insertion is all or nothing without an undo log: it first searches
 * (breadth first, at most DPFLOW_EXACT_BFS_MAX buckets, reading tags only:
 * an entry's other bucket follows from its bucket and tag) for a chain of
 * entries that can each move to their other bucket and ends at a free
 * slot; only when a chain is found does it move the entries, last first,
 * and write the new key into the slot the first move freed. Every check
 * that can fail runs before the first byte is written.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "flow/table_exact.h"

#define HUGE_PAGE (2u << 20)

/* One node of the displacement search: the entry at slot @slot of the
 * parent node's bucket can move to @bucket. Roots have parent -1. */
struct bfs_node {
	uint32_t bucket;
	int32_t parent;
	uint32_t slot;
};

static uint64_t align64(uint64_t x)
{
	return (x + DPFLOW_CACHE_LINE - 1) & ~(uint64_t)(DPFLOW_CACHE_LINE - 1);
}

static int check_params(const struct dpflow_exact_params *p,
			struct dpflow_error *err)
{
	if (!p)
		return dpflow_error_set(err, EINVAL, "params",
					"exact table: params is NULL");
	if (p->key_len < DPFLOW_EXACT_KEY_MIN ||
	    p->key_len > DPFLOW_EXACT_KEY_MAX || p->key_len % 4)
		return dpflow_error_set(
		    err, EINVAL, "key_len",
		    "exact table: key_len %u is not a multiple of 4 in %u..%u",
		    p->key_len, DPFLOW_EXACT_KEY_MIN, DPFLOW_EXACT_KEY_MAX);
	if (p->capacity == 0 || p->capacity > DPFLOW_EXACT_CAPACITY_MAX)
		return dpflow_error_set(
		    err, EINVAL, "capacity",
		    "exact table: capacity %u is not in 1..%u", p->capacity,
		    DPFLOW_EXACT_CAPACITY_MAX);
	return 0;
}

/*
 * Buckets for @capacity entries at most 15/16 of the slots full, and at
 * least DPFLOW_EXACT_MIN_BUCKETS: a key's two buckets coincide for about
 * one key in n_buckets, which only tiny tables would feel.
 */
static uint32_t buckets_for(uint32_t capacity)
{
	uint64_t nb = ((uint64_t)capacity * 2 + 14) / 15;

	return nb < DPFLOW_EXACT_MIN_BUCKETS ? DPFLOW_EXACT_MIN_BUCKETS
					     : (uint32_t)nb;
}

static uint64_t entries_off_for(uint32_t n_buckets)
{
	return align64(sizeof(struct dpflow_exact_image) +
		       (uint64_t)n_buckets * DPFLOW_EXACT_SLOTS *
			   sizeof(uint16_t));
}

static uint64_t size_for(uint32_t key_len, uint32_t n_buckets)
{
	return align64(entries_off_for(n_buckets) + (uint64_t)n_buckets *
							DPFLOW_EXACT_SLOTS *
							(key_len + 4));
}

size_t dpflow_exact_image_size(uint32_t key_len, uint32_t capacity)
{
	struct dpflow_exact_params p = {key_len, capacity, 0};
	uint64_t size;

	if (check_params(&p, NULL))
		return 0;
	size = size_for(key_len, buckets_for(capacity));
	return size > SIZE_MAX ? 0 : (size_t)size;
}

int dpflow_exact_image_init(void *mem, size_t size,
			    const struct dpflow_exact_params *p,
			    struct dpflow_error *err)
{
	struct dpflow_exact_image *img = (struct dpflow_exact_image *)mem;
	size_t need;
	uint32_t nb;
	int rc = check_params(p, err);

	if (rc)
		return rc;
	need = dpflow_exact_image_size(p->key_len, p->capacity);
	if (!mem || (uintptr_t)mem % DPFLOW_CACHE_LINE)
		return dpflow_error_set(err, EINVAL, "mem",
					"exact table: memory %p is not "
					"64-byte aligned",
					mem);
	if (need == 0 || size < need)
		return dpflow_error_set(err, EINVAL, "size",
					"exact table: %zu bytes given, %zu "
					"needed",
					size, need);
	nb = buckets_for(p->capacity);
	memset(mem, 0, need);
	img->magic = DPFLOW_EXACT_MAGIC;
	img->version = DPFLOW_EXACT_VERSION;
	img->key_len = (uint16_t)p->key_len;
	img->entry_size = p->key_len + 4;
	img->n_buckets = nb;
	img->seed = p->seed;
	img->tags_off = sizeof(*img);
	img->entries_off = entries_off_for(nb);
	img->size = need;
	img->n_entries = 0;
	img->capacity = p->capacity;
	return 0;
}

int dpflow_exact_image_check(const void *mem, size_t size,
			     struct dpflow_error *err)
{
	const struct dpflow_exact_image *img =
	    (const struct dpflow_exact_image *)mem;

	if (!mem || (uintptr_t)mem % DPFLOW_CACHE_LINE)
		return dpflow_error_set(err, EINVAL, "mem",
					"exact image: %p is not 64-byte "
					"aligned",
					mem);
	if (size < sizeof(*img))
		return dpflow_error_set(err, EINVAL, "size",
					"exact image: %zu bytes is shorter "
					"than the header",
					size);
	if (img->magic != DPFLOW_EXACT_MAGIC ||
	    img->version != DPFLOW_EXACT_VERSION)
		return dpflow_error_set(err, EINVAL, "magic",
					"exact image: bad magic 0x%08x or "
					"version %u",
					img->magic, img->version);
	if (img->key_len < DPFLOW_EXACT_KEY_MIN ||
	    img->key_len > DPFLOW_EXACT_KEY_MAX || img->key_len % 4 ||
	    img->entry_size != (uint32_t)img->key_len + 4)
		return dpflow_error_set(err, EINVAL, "key_len",
					"exact image: key_len %u, entry_size "
					"%u",
					img->key_len, img->entry_size);
	if (img->n_buckets < DPFLOW_EXACT_MIN_BUCKETS ||
	    (uint64_t)img->n_buckets * DPFLOW_EXACT_SLOTS > UINT32_MAX ||
	    img->tags_off != sizeof(*img) ||
	    img->entries_off != entries_off_for(img->n_buckets) ||
	    img->size != size_for(img->key_len, img->n_buckets))
		return dpflow_error_set(err, EINVAL, "n_buckets",
					"exact image: %u buckets do not match "
					"the offsets and size %llu",
					img->n_buckets,
					(unsigned long long)img->size);
	if (img->size > size)
		return dpflow_error_set(err, EINVAL, "size",
					"exact image: %llu bytes, only %zu "
					"given",
					(unsigned long long)img->size, size);
	if (img->n_entries > img->n_buckets * DPFLOW_EXACT_SLOTS)
		return dpflow_error_set(err, EINVAL, "n_entries",
					"exact image: %u entries in %u slots",
					img->n_entries,
					img->n_buckets * DPFLOW_EXACT_SLOTS);
	return 0;
}

static void *image_alloc(size_t size)
{
	size_t align = size >= HUGE_PAGE ? HUGE_PAGE : DPFLOW_CACHE_LINE;
	size_t len = (size + align - 1) & ~(align - 1);
	void *mem = aligned_alloc(align, len);

	/* huge pages are an optimisation: without them the image still works */
	if (mem && align == HUGE_PAGE)
		(void)madvise(mem, len, MADV_HUGEPAGE);
	return mem;
}

struct dpflow_exact_image *
dpflow_exact_create(const struct dpflow_exact_params *p,
		    struct dpflow_error *err)
{
	size_t size;
	void *mem;

	if (check_params(p, err))
		return NULL;
	size = dpflow_exact_image_size(p->key_len, p->capacity);
	mem = image_alloc(size);
	if (!mem) {
		dpflow_error_set(err, ENOMEM, "capacity",
				 "exact table: cannot allocate %zu bytes for "
				 "%u entries",
				 size, p->capacity);
		return NULL;
	}
	if (dpflow_exact_image_init(mem, size, p, err)) {
		free(mem);
		return NULL;
	}
	return (struct dpflow_exact_image *)mem;
}

struct dpflow_exact_image *
dpflow_exact_clone(const struct dpflow_exact_image *src,
		   struct dpflow_error *err)
{
	void *mem;

	if (!src) {
		dpflow_error_set(err, EINVAL, "src",
				 "exact table: src is NULL");
		return NULL;
	}
	mem = image_alloc((size_t)src->size);
	if (!mem) {
		dpflow_error_set(err, ENOMEM, "size",
				 "exact table: cannot allocate %llu bytes",
				 (unsigned long long)src->size);
		return NULL;
	}
	memcpy(mem, src, (size_t)src->size);
	return (struct dpflow_exact_image *)mem;
}

void dpflow_exact_destroy(struct dpflow_exact_image *img)
{
	free(img);
}

size_t dpflow_exact_image_bytes(const struct dpflow_exact_image *img)
{
	return (size_t)img->size;
}

int dpflow_exact_image_copy(void *dst, size_t dst_size,
			    const struct dpflow_exact_image *src,
			    struct dpflow_error *err)
{
	if (!dst || (uintptr_t)dst % DPFLOW_CACHE_LINE)
		return dpflow_error_set(err, EINVAL, "dst",
					"exact table: copy target %p is not "
					"64-byte aligned",
					dst);
	if (dst_size < src->size)
		return dpflow_error_set(err, EINVAL, "dst_size",
					"exact table: copy needs %llu bytes, "
					"%zu given",
					(unsigned long long)src->size,
					dst_size);
	memcpy(dst, src, (size_t)src->size);
	return 0;
}

static uint8_t *entry_at(struct dpflow_exact_image *img, uint32_t b, unsigned s)
{
	return (uint8_t *)(uintptr_t)dpflow_exact_entry(img, b, s);
}

static uint8_t *tag_at(struct dpflow_exact_image *img, uint32_t b, unsigned s)
{
	return (uint8_t *)img + img->tags_off +
	       ((uint64_t)b * DPFLOW_EXACT_SLOTS + s) * sizeof(uint16_t);
}

/* First free slot of bucket @b, or -1. */
static int free_slot(const struct dpflow_exact_image *img, uint32_t b)
{
	uint32_t m = dpflow_exact_match8(img, b, 0);

	return m ? (int)dpflow_exact_ctz(m) : -1;
}

static struct dpflow_exact_sig sig_of_key(const struct dpflow_exact_image *img,
					  const void *key)
{
	return dpflow_exact_sig_of(
	    dpflow_exact_hash(key, img->key_len, img->seed), img->n_buckets);
}

/* Where @key is: 0 and (*@b, *@s), or -1. */
static int find(const struct dpflow_exact_image *img,
		struct dpflow_exact_sig sig, const void *key, uint32_t *b,
		unsigned *s)
{
	uint32_t m = dpflow_exact_match8(img, sig.b1, sig.tag) |
		     dpflow_exact_match8(img, sig.b2, sig.tag)
			 << DPFLOW_EXACT_SLOTS;

	while (m) {
		unsigned i = dpflow_exact_ctz(m);
		uint32_t bb = i < DPFLOW_EXACT_SLOTS ? sig.b1 : sig.b2;
		unsigned ss = i & (DPFLOW_EXACT_SLOTS - 1);

		if (dpflow_exact_key_eq(dpflow_exact_entry(img, bb, ss),
					(const uint8_t *)key, img->key_len)) {
			*b = bb;
			*s = ss;
			return 0;
		}
		m &= m - 1;
	}
	return -1;
}

static void slot_write(struct dpflow_exact_image *img, uint32_t b, unsigned s,
		       uint16_t tag, const void *key, uint32_t value)
{
	uint8_t *e = entry_at(img, b, s);

	memcpy(tag_at(img, b, s), &tag, sizeof(tag));
	memcpy(e, key, img->key_len);
	memcpy(e + img->key_len, &value, sizeof(value));
}

/* Copy slot (@fb, @fs) to (@tb, @ts). The source is left as it is: along
 * a displacement chain every source is refilled by the next move, the
 * last by the new key. */
static void slot_copy(struct dpflow_exact_image *img, uint32_t fb, unsigned fs,
		      uint32_t tb, unsigned ts)
{
	memcpy(tag_at(img, tb, ts), tag_at(img, fb, fs), sizeof(uint16_t));
	memcpy(entry_at(img, tb, ts), entry_at(img, fb, fs), img->entry_size);
}

/*
 * Whether bucket @b is node @i's or one of its ancestors'. Going back to
 * such a bucket only repeats moves the search already tried from the
 * ancestor (with a shorter chain), so those branches are pruned.
 */
static int on_path(const struct bfs_node *q, int32_t i, uint32_t b)
{
	for (; i >= 0; i = q[i].parent)
		if (q[i].bucket == b)
			return 1;
	return 0;
}

/*
 * Free a slot in bucket @sig.b1 or @sig.b2 by moving entries to their
 * other buckets. Returns 0 with the freed slot in (*@b, *@s), or -ENOSPC
 * with the image untouched.
 */
static int make_room(struct dpflow_exact_image *img,
		     struct dpflow_exact_sig sig, uint32_t *b, unsigned *s)
{
	struct bfs_node q[DPFLOW_EXACT_BFS_MAX];
	uint32_t n = 2, dst_b = 0;
	int32_t cur = -1;
	unsigned src_s = 0, dst_s = 0;

	q[0].bucket = sig.b1;
	q[0].parent = -1;
	q[0].slot = 0;
	q[1].bucket = sig.b2;
	q[1].parent = -1;
	q[1].slot = 0;
	for (uint32_t i = 0; i < n && cur < 0; i++) {
		for (unsigned k = 0; k < DPFLOW_EXACT_SLOTS; k++) {
			uint16_t tag;
			uint32_t alt;
			int f;

			memcpy(&tag, tag_at(img, q[i].bucket, k), sizeof(tag));
			alt =
			    dpflow_exact_alt(q[i].bucket, tag, img->n_buckets);

			if (on_path(q, (int32_t)i, alt))
				continue;
			f = free_slot(img, alt);
			if (f >= 0) {
				cur = (int32_t)i;
				src_s = k;
				dst_b = alt;
				dst_s = (unsigned)f;
				break;
			}
			if (n < DPFLOW_EXACT_BFS_MAX) {
				q[n].bucket = alt;
				q[n].parent = (int32_t)i;
				q[n].slot = k;
				n++;
			}
		}
	}
	if (cur < 0)
		return -ENOSPC;
	/* move the chain's entries, the one next to the free slot first */
	for (;;) {
		slot_copy(img, q[cur].bucket, src_s, dst_b, dst_s);
		dst_b = q[cur].bucket;
		dst_s = src_s;
		if (q[cur].parent < 0)
			break;
		src_s = q[cur].slot;
		cur = q[cur].parent;
	}
	*b = dst_b;
	*s = dst_s;
	return 0;
}

int dpflow_exact_insert(struct dpflow_exact_image *img, const void *key,
			uint32_t value, struct dpflow_error *err)
{
	struct dpflow_exact_sig sig;
	uint32_t b;
	unsigned s;
	int f;

	if (!key)
		return dpflow_error_set(err, EINVAL, "key",
					"exact table: key is NULL");
	if (value == DPFLOW_TABLE_MISS)
		return dpflow_error_set(err, EINVAL, "value",
					"exact table: value 0x%08x is the "
					"miss marker",
					value);
	sig = sig_of_key(img, key);
	if (find(img, sig, key, &b, &s) == 0)
		return dpflow_error_set(err, EEXIST, "key",
					"exact table: key already present "
					"(bucket %u slot %u)",
					b, s);
	if ((f = free_slot(img, sig.b1)) >= 0) {
		b = sig.b1;
		s = (unsigned)f;
	} else if ((f = free_slot(img, sig.b2)) >= 0) {
		b = sig.b2;
		s = (unsigned)f;
	} else if (make_room(img, sig, &b, &s)) {
		return dpflow_error_set(err, ENOSPC, "capacity",
					"exact table: full at %u of %u slots "
					"(capacity %u)",
					img->n_entries,
					img->n_buckets * DPFLOW_EXACT_SLOTS,
					img->capacity);
	}
	slot_write(img, b, s, sig.tag, key, value);
	img->n_entries++;
	return 0;
}

int dpflow_exact_delete(struct dpflow_exact_image *img, const void *key,
			uint32_t *old_value, struct dpflow_error *err)
{
	uint32_t b;
	unsigned s;

	if (!key)
		return dpflow_error_set(err, EINVAL, "key",
					"exact table: key is NULL");
	if (find(img, sig_of_key(img, key), key, &b, &s))
		return dpflow_error_set(err, ENOENT, "key",
					"exact table: key not present");
	if (old_value)
		*old_value =
		    dpflow_exact_ld32(entry_at(img, b, s) + img->key_len);
	memset(tag_at(img, b, s), 0, sizeof(uint16_t));
	memset(entry_at(img, b, s), 0, img->entry_size);
	img->n_entries--;
	return 0;
}

int dpflow_exact_update(struct dpflow_exact_image *img, const void *key,
			uint32_t value, struct dpflow_error *err)
{
	uint32_t b;
	unsigned s;

	if (!key)
		return dpflow_error_set(err, EINVAL, "key",
					"exact table: key is NULL");
	if (value == DPFLOW_TABLE_MISS)
		return dpflow_error_set(err, EINVAL, "value",
					"exact table: value 0x%08x is the "
					"miss marker",
					value);
	if (find(img, sig_of_key(img, key), key, &b, &s))
		return dpflow_error_set(err, ENOENT, "key",
					"exact table: key not present");
	memcpy(entry_at(img, b, s) + img->key_len, &value, sizeof(value));
	return 0;
}

uint32_t dpflow_exact_count(const struct dpflow_exact_image *img)
{
	return img->n_entries;
}

void dpflow_exact_clear(struct dpflow_exact_image *img)
{
	uint8_t *base = (uint8_t *)img;

	memset(base + img->tags_off, 0, (size_t)(img->size - img->tags_off));
	img->n_entries = 0;
}

void dpflow_exact_info(const struct dpflow_exact_image *img,
		       struct dpflow_exact_info *info)
{
	info->key_len = img->key_len;
	info->capacity = img->capacity;
	info->n_buckets = img->n_buckets;
	info->n_slots = img->n_buckets * DPFLOW_EXACT_SLOTS;
	info->n_entries = img->n_entries;
	info->size = (size_t)img->size;
}

uint32_t dpflow_exact_lookup(const struct dpflow_exact_image *img,
			     const void *key)
{
	return dpflow_exact_lookup_impl(img, key);
}

uint32_t dpflow_exact_lookup_bulk(const struct dpflow_exact_image *img,
				  const void *const *keys, uint32_t n,
				  uint32_t *values)
{
	return dpflow_exact_lookup_bulk_impl(img, keys, n, values);
}
