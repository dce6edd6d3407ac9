/*
 * ACL table: rules over a key's fields, classified by decision trees.
 *
 * Rules match a key field by field, each field by value/mask (prefixes,
 * exact values, wildcards, any mask) or by an inclusive range [lo, hi].
 * A rule has a priority (lower number wins; between equal priorities the
 * lower rule id wins, so ids given in insertion order mean "first added
 * wins") and a uint32_t value, which classify returns for the best matching
 * rule, or DPFLOW_TABLE_MISS when none matches.
 *
 * Two objects:
 *  - a rule list (struct dpflow_acl_rules): the table's rules, with add,
 *    delete and validation (duplicate id, bad field). Control side only.
 *  - an image (struct dpflow_acl_image): the compiled classifier built from
 *    a rule list by dpflow_acl_build(): multi-way decision trees over field
 *    ranges with small leaf buckets (the layout and the inline lookup
 *    code that the pipe engine and the GPU target share are internal to
 *    the library). One position-independent 64-byte-aligned block:
 *    dpflow_acl_image_copy() is a memcpy, and the copy answers the same,
 *    in device memory too. Changing the rules means building a new image
 *    (as rte_acl does); docs/tables/acl.md has the build costs.
 *
 * Threads: a rule list is used by one control thread at a time. Building
 * reads the list and allocates a new image; it never touches other images.
 * Lookups may run on any number of threads at once on an image that is not
 * being freed (the pipe layer publishes images with RCU).
 *
 * Keys: an array of n_fields uint32_t words, one per field, in host byte
 * order (an 8- or 16-bit field in the low bits of its word, the rest
 * zero).
 *
 * Errors: calls that can fail return 0 or a negative errno and, when @err
 * is not NULL, fill it naming the field (dpflow/error.h); constructors
 * return NULL instead.
 *
 * Guarantees: every call that changes a rule list is all or nothing: on
 * failure (-EINVAL bad argument, -EEXIST duplicate id, -ENOENT unknown id,
 * -ENOSPC list full) the list is exactly as before, and @err names the
 * field. A build that fails (-ENOMEM) leaves no image. An image's answers
 * depend only on the rules, not on the order they were added or on the
 * build parameters: for every key, the value of the rule that a linear scan
 * in (priority, id) order finds first.
 */
#ifndef DPFLOW_TABLE_ACL_H
#define DPFLOW_TABLE_ACL_H

#include <stddef.h>
#include <stdint.h>

#include "dpflow/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * A lookup that found nothing: never a valid value. Every table header
 * defines it alike (a differing definition is diagnosed).
 */
#define DPFLOW_TABLE_MISS UINT32_MAX

/* Fields per key (a 5-tuple uses 5, an IPv6 5-tuple 11). */
#define DPFLOW_ACL_FIELDS_MAX 32
/* Decision trees per image. */
#define DPFLOW_ACL_TREES_MAX 8
/* Most rules a list can be created for. */
#define DPFLOW_ACL_RULES_MAX ((1u << 24) - 1) /* ranks fit in 24 bits */

/* The key's fields, fixed when a rule list is created. */
struct dpflow_acl_layout {
	uint32_t n_fields;			 /* 1..DPFLOW_ACL_FIELDS_MAX */
	uint8_t width[DPFLOW_ACL_FIELDS_MAX];	 /* bits: 8, 16 or 32 */
	const char *name[DPFLOW_ACL_FIELDS_MAX]; /* for messages; NULL ok;
						    copied (15 chars kept) */
};

enum dpflow_acl_match_type {
	DPFLOW_ACL_MATCH_MASK = 0,  /* (key & mask) == value */
	DPFLOW_ACL_MATCH_RANGE = 1, /* lo <= key <= hi */
};

/* How one field of a rule matches. */
struct dpflow_acl_match {
	uint32_t type;	/* enum dpflow_acl_match_type */
	uint32_t value; /* MASK: no bits outside @mask */
	uint32_t mask;	/* MASK: 0 is a wildcard, all ones an exact value */
	uint32_t lo;	/* RANGE: first value */
	uint32_t hi;	/* RANGE: last value, inclusive */
};

struct dpflow_acl_rule {
	uint32_t id;	   /* unique within the list */
	uint32_t priority; /* lower wins; ties: lower id wins */
	uint32_t value;	   /* what classify returns; not DPFLOW_TABLE_MISS */
	struct dpflow_acl_match field[DPFLOW_ACL_FIELDS_MAX]; /* n_fields */
};

/* Field matches, for filling rules. Any value (a wildcard): */
static inline struct dpflow_acl_match dpflow_acl_any(void)
{
	struct dpflow_acl_match m = {DPFLOW_ACL_MATCH_MASK, 0, 0, 0, 0};
	return m;
}

/* (key & @mask) == @value (@value with bits outside @mask is refused by
 * dpflow_acl_rules_add). */
static inline struct dpflow_acl_match dpflow_acl_masked(uint32_t value,
							uint32_t mask)
{
	struct dpflow_acl_match m = {DPFLOW_ACL_MATCH_MASK, value, mask, 0, 0};
	return m;
}

/* The top @len bits of a @width-bit field equal those of @value. */
static inline struct dpflow_acl_match
dpflow_acl_prefix(uint32_t value, unsigned len, unsigned width)
{
	uint32_t wmax = width >= 32 ? UINT32_MAX : (1u << width) - 1;
	uint32_t mask = len == 0 ? 0 : (wmax & ~((1u << (width - len)) - 1u));

	if (len >= width)
		mask = wmax;
	return dpflow_acl_masked(value & mask, mask);
}

/* @lo <= key <= @hi. */
static inline struct dpflow_acl_match dpflow_acl_range(uint32_t lo, uint32_t hi)
{
	struct dpflow_acl_match m = {DPFLOW_ACL_MATCH_RANGE, 0, 0, lo, hi};
	return m;
}

/* ---- rule list ----------------------------------------------------------- */

struct dpflow_acl_rules;

/*
 * A rule list for keys of @layout holding up to @max_rules rules
 * (1..DPFLOW_ACL_RULES_MAX). Returns NULL with @err: -EINVAL ("n_fields",
 * "width", "max_rules"), -ENOMEM.
 */
struct dpflow_acl_rules *
dpflow_acl_rules_create(const struct dpflow_acl_layout *layout,
			uint32_t max_rules, struct dpflow_error *err);

/* Free a rule list. Accepts NULL. */
void dpflow_acl_rules_destroy(struct dpflow_acl_rules *rl);

/*
 * Add @rule (copied). Returns 0; -EINVAL for a bad field (@err->field is
 * "field[i]" and the message names the layout's field, e.g. a value wider
 * than the field, bits outside the mask, lo > hi, an unknown type), a
 * value equal to DPFLOW_TABLE_MISS ("value") or NULL @rule ("rule");
 * -EEXIST if @rule->id is in the list ("id"); -ENOSPC if the list holds
 * max_rules ("max_rules").
 */
int dpflow_acl_rules_add(struct dpflow_acl_rules *rl,
			 const struct dpflow_acl_rule *rule,
			 struct dpflow_error *err);

/*
 * Add @n rules, all or none: every rule is checked (against the list and
 * against each other) before any is added. On failure *@failed (if not
 * NULL) is the index of the first bad rule and the errors are those of
 * dpflow_acl_rules_add.
 */
int dpflow_acl_rules_add_bulk(struct dpflow_acl_rules *rl,
			      const struct dpflow_acl_rule *rules, uint32_t n,
			      uint32_t *failed, struct dpflow_error *err);

/* Remove the rule with @id. Returns 0 or -ENOENT ("id"). */
int dpflow_acl_rules_delete(struct dpflow_acl_rules *rl, uint32_t id,
			    struct dpflow_error *err);

/* Remove every rule. */
void dpflow_acl_rules_clear(struct dpflow_acl_rules *rl);

/* Rules in @rl. */
uint32_t dpflow_acl_rules_count(const struct dpflow_acl_rules *rl);

/* The layout @rl was created with. */
const struct dpflow_acl_layout *
dpflow_acl_rules_layout(const struct dpflow_acl_rules *rl);

/* ---- images ------------------------------------------------------------- */

/* A compiled classifier: 64-byte aligned, position independent. */
struct dpflow_acl_image;

/* Build tuning; zero fields take the defaults. Answers never depend on it. */
struct dpflow_acl_build_params {
	uint32_t leaf_rules; /* rules per leaf before splitting (default 4) */
	uint32_t max_trees;  /* 1..DPFLOW_ACL_TREES_MAX (default 8) */
	/* bytes of jump table, nodes and leaves one tree may take before its
	 * rules are split over more trees (default 256 KiB + 1.5 KiB per
	 * rule of the tree) */
	uint64_t tree_budget;
};

/*
 * Compile @rl into a new image (64-byte aligned; 2 MiB aligned and advised
 * for transparent huge pages when at least that large). @p may be NULL.
 * An empty list gives an image that misses every key. Returns the image,
 * or NULL with @err: -EINVAL ("rules", "max_trees"), -ENOMEM, -E2BIG (the
 * image would exceed 4 GiB of leaves or 2^31 nodes).
 */
struct dpflow_acl_image *
dpflow_acl_build(const struct dpflow_acl_rules *rl,
		 const struct dpflow_acl_build_params *p,
		 struct dpflow_error *err);

/* Free an image from dpflow_acl_build or dpflow_acl_clone. Accepts NULL. */
void dpflow_acl_destroy(struct dpflow_acl_image *img);

/* Bytes in @img (what a copy must move). */
size_t dpflow_acl_image_bytes(const struct dpflow_acl_image *img);

/*
 * Copy @src into @dst (64-byte aligned, @dst_size bytes): a memcpy of
 * dpflow_acl_image_bytes(src). Returns 0 or -EINVAL ("dst", "dst_size").
 */
int dpflow_acl_image_copy(void *dst, size_t dst_size,
			  const struct dpflow_acl_image *src,
			  struct dpflow_error *err);

/* A new image, allocated as by dpflow_acl_build, equal to @src. */
struct dpflow_acl_image *dpflow_acl_clone(const struct dpflow_acl_image *src,
					  struct dpflow_error *err);

/*
 * Check that @size bytes at @mem hold a well-formed image: header,
 * sections, every tree's root or jump table, every node's field and
 * children (which must have higher indices than their node, so that no
 * walk can loop), and that the leaf blocks tile the leaf area. Returns 0,
 * -EINVAL naming the field, or -ENOMEM. O(image size).
 */
int dpflow_acl_image_check(const void *mem, size_t size,
			   struct dpflow_error *err);

/* Shape of an image (dpflow_acl_info). */
struct dpflow_acl_info {
	uint32_t n_fields;
	uint32_t n_rules;
	uint32_t n_trees;
	uint32_t n_nodes;
	uint32_t n_leaves;	/* stored leaves, the empty one included */
	uint64_t leaf_entries;	/* rule copies stored in leaves */
	uint32_t n_jump_tables; /* trees that start with a jump table */
	uint32_t max_depth;	/* nodes on the longest root-to-leaf path,
				   a jump table not counted */
	uint32_t max_leaf;	/* rules in the largest leaf */
	size_t size;		/* image bytes */
};

/* Fill @info from @img. */
void dpflow_acl_info(const struct dpflow_acl_image *img,
		     struct dpflow_acl_info *info);

/*
 * Data path (any thread; the image must not change during the call).
 * Out-of-line calls of the lookup code that the library's engine and the
 * GPU target inline; they give the same answers.
 */

/* The value of the best rule matching @key (n_fields words), or
 * DPFLOW_TABLE_MISS. */
uint32_t dpflow_acl_lookup(const struct dpflow_acl_image *img,
			   const uint32_t *key);

/*
 * Classify @n keys (keys[i] points at n_fields words; @n up to
 * DPFLOW_BURST_MAX by convention, any count works): values[i] gets the
 * best rule's value or DPFLOW_TABLE_MISS. Returns the number of hits.
 */
uint32_t dpflow_acl_classify(const struct dpflow_acl_image *img,
			     const uint32_t *const *keys, uint32_t n,
			     uint32_t *values);

#ifdef __cplusplus
}
#endif

#endif /* DPFLOW_TABLE_ACL_H */
