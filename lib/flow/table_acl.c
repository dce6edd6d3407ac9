/*
 * ACL table: rule lists, the image builder, image copies and checks, and
 * the CPU entry points of the lookup (table_acl.h is the contract,
 * table_acl_impl.h the image layout).
 *
 * Build (HyperSplit-style, multi-way): rules are ranked by (priority, id).
 * A node holds the rules whose bounding box meets its region (a box of
 * per-field ranges). Rules after the first one that covers the whole
 * region can never win there and are dropped. A node with at most
 * leaf_rules rules becomes a leaf. Otherwise, for every field, the region's
 * range is cut into up to 8 intervals at boundaries of the rules' ranges,
 * placed so that each interval gets an equal share of the rule-weighted
 * elementary segments; the field whose cut gives the fewest rules per
 * child (and the smallest largest child) wins, adjacent children with the
 * same rules are merged, and the children are built in turn. Identical
 * leaves are stored once.
 *
 * A tree's root may be a jump table instead (HiCuts-style equal cuts): the
 * top k bits of one field index 2^k child references, so that prefixes
 * such as address blocks are told apart in one step. The field and k
 * (4..12) are those that leave the fewest rules per slot while copying
 * the rules at most 1.5 times over; each run of slots holding the same
 * rules gets one subtree.
 *
 * Rule replication is bounded: a tree whose nodes and leaves outgrow its
 * budget (256 KiB + 1.5 KiB per rule, or tree_budget) is abandoned (early,
 * when the part built projects past 1.5 times the budget), and its rules
 * are split in two groups: the rules wide and narrow in the field whose
 * cuts replicated the most, each built as its own tree (up to max_trees,
 * largest group first). When no split is possible, the group is rebuilt
 * with leaves twice as large and a budget half as large again, which
 * always ends: a single leaf holding every rule is a valid (slow) tree.
 *
 * Threads: a rule list belongs to one control thread at a time; builds
 * allocate their own memory and share nothing; lookups are reentrant.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "flow/table_acl.h"

#define NAME_LEN      16
#define HUGE_PAGE     (2u << 20)
#define DEPTH_MAX     40
#define LEAF_DEFAULT  4
#define TREES_DEFAULT 8
/* a tree's budget: BUDGET_BASE + BUDGET_RULE bytes per rule, half as much
 * again after each doubling of its leaves */
#define BUDGET_BASE (256u << 10)
/* groups smaller than this are not split for a jump table */
#define SPLIT_MIN   256
#define BUDGET_RULE 1536u
/* words of a stored rule before its per-field arrays */
#define REC_HDR 4

/* Names for dpflow_error.field, which must have static lifetime. */
static const char *const field_names[DPFLOW_ACL_FIELDS_MAX] = {
    "field[0]",	 "field[1]",  "field[2]",  "field[3]",	"field[4]",
    "field[5]",	 "field[6]",  "field[7]",  "field[8]",	"field[9]",
    "field[10]", "field[11]", "field[12]", "field[13]", "field[14]",
    "field[15]", "field[16]", "field[17]", "field[18]", "field[19]",
    "field[20]", "field[21]", "field[22]", "field[23]", "field[24]",
    "field[25]", "field[26]", "field[27]", "field[28]", "field[29]",
    "field[30]", "field[31]",
};

/*
 * A rule list. Rules are stored normalised, `stride` words each:
 * [id, priority, value, masked, lo[nf], hi[nf], mask[nf]]: the field's
 * bounding range [lo, hi] and, for a value/mask match whose mask is not a
 * prefix, that mask (else all ones). An open-addressing table (linear
 * probing, backward-shift deletion) maps ids to positions.
 */
struct dpflow_acl_rules {
	struct dpflow_acl_layout layout;
	char names[DPFLOW_ACL_FIELDS_MAX][NAME_LEN];
	uint32_t wmax[DPFLOW_ACL_FIELDS_MAX];
	uint32_t nf;
	uint32_t stride;
	uint32_t cap;
	uint32_t n;
	uint32_t *rec;	  /* cap * stride words */
	uint32_t *slot;	  /* id table: position + 1, 0 = empty */
	uint32_t ht_mask; /* slots - 1 */
};

static inline uint32_t *rec_at(const struct dpflow_acl_rules *rl, uint32_t i)
{
	return rl->rec + (size_t)i * rl->stride;
}

static inline uint32_t id_hash(uint32_t id)
{
	uint64_t h = (uint64_t)id * 0x9e3779b97f4a7c15ull;
	return (uint32_t)(h >> 32);
}

/* Slot of @id in the id table, or of the empty slot where it would go. */
static uint32_t id_find(const struct dpflow_acl_rules *rl, uint32_t id)
{
	uint32_t s = id_hash(id) & rl->ht_mask;

	while (rl->slot[s] && rec_at(rl, rl->slot[s] - 1)[0] != id)
		s = (s + 1) & rl->ht_mask;
	return s;
}

/* Remove slot @s from the id table, shifting later entries back. */
static void id_erase(struct dpflow_acl_rules *rl, uint32_t s)
{
	uint32_t j = s;

	rl->slot[s] = 0;
	for (;;) {
		uint32_t home;

		j = (j + 1) & rl->ht_mask;
		if (!rl->slot[j])
			return;
		home = id_hash(rec_at(rl, rl->slot[j] - 1)[0]) & rl->ht_mask;
		/* move j to s if its home is not in (s, j] cyclically */
		if (((j - home) & rl->ht_mask) >= ((j - s) & rl->ht_mask)) {
			rl->slot[s] = rl->slot[j];
			rl->slot[j] = 0;
			s = j;
		}
	}
}

struct dpflow_acl_rules *
dpflow_acl_rules_create(const struct dpflow_acl_layout *layout,
			uint32_t max_rules, struct dpflow_error *err)
{
	struct dpflow_acl_rules *rl;
	uint32_t slots = 16;

	if (!layout) {
		dpflow_error_set(err, EINVAL, "layout", "layout is NULL");
		return NULL;
	}
	if (layout->n_fields < 1 || layout->n_fields > DPFLOW_ACL_FIELDS_MAX) {
		dpflow_error_set(err, EINVAL, "n_fields",
				 "n_fields %u: must be 1..%u", layout->n_fields,
				 DPFLOW_ACL_FIELDS_MAX);
		return NULL;
	}
	for (uint32_t f = 0; f < layout->n_fields; f++) {
		uint8_t w = layout->width[f];

		if (w != 8 && w != 16 && w != 32) {
			dpflow_error_set(
			    err, EINVAL, "width",
			    "field %u ('%s'): width %u: must be "
			    "8, 16 or 32 bits",
			    f, layout->name[f] ? layout->name[f] : "", w);
			return NULL;
		}
	}
	if (max_rules < 1 || max_rules > DPFLOW_ACL_RULES_MAX) {
		dpflow_error_set(err, EINVAL, "max_rules",
				 "max_rules %u: must be 1..%u", max_rules,
				 DPFLOW_ACL_RULES_MAX);
		return NULL;
	}
	rl = calloc(1, sizeof(*rl));
	if (!rl)
		goto nomem;
	rl->layout = *layout;
	rl->nf = layout->n_fields;
	rl->stride = REC_HDR + 3 * rl->nf;
	rl->cap = max_rules;
	for (uint32_t f = 0; f < rl->nf; f++) {
		uint8_t w = layout->width[f];

		rl->wmax[f] = w == 32 ? UINT32_MAX : (1u << w) - 1;
		if (layout->name[f])
			snprintf(rl->names[f], NAME_LEN, "%s", layout->name[f]);
		else
			snprintf(rl->names[f], NAME_LEN, "%u", f);
		rl->layout.name[f] = rl->names[f];
	}
	for (uint32_t f = rl->nf; f < DPFLOW_ACL_FIELDS_MAX; f++)
		rl->layout.name[f] = NULL;
	while (slots < 2 * (uint64_t)max_rules)
		slots *= 2;
	rl->ht_mask = slots - 1;
	rl->slot = calloc(slots, sizeof(*rl->slot));
	rl->rec = malloc((size_t)max_rules * rl->stride * sizeof(uint32_t));
	if (!rl->slot || !rl->rec) {
		dpflow_acl_rules_destroy(rl);
		goto nomem;
	}
	return rl;
nomem:
	dpflow_error_set(err, ENOMEM, NULL, "out of memory for %u rules",
			 max_rules);
	return NULL;
}

void dpflow_acl_rules_destroy(struct dpflow_acl_rules *rl)
{
	if (!rl)
		return;
	free(rl->slot);
	free(rl->rec);
	free(rl);
}

/*
 * Check @r against the layout and normalise it into @out (stride words).
 * Returns 0 or -EINVAL naming the field.
 */
static int rule_normalise(const struct dpflow_acl_rules *rl,
			  const struct dpflow_acl_rule *r, uint32_t *out,
			  struct dpflow_error *err)
{
	uint32_t nf = rl->nf, masked = 0;

	if (r->value == DPFLOW_TABLE_MISS)
		return dpflow_error_set(err, EINVAL, "value",
					"rule %u: value 0x%x is reserved for "
					"a miss",
					r->id, r->value);
	for (uint32_t f = 0; f < nf; f++) {
		const struct dpflow_acl_match *m = &r->field[f];
		uint32_t wmax = rl->wmax[f], lo, hi, mask = UINT32_MAX;

		if (m->type == DPFLOW_ACL_MATCH_RANGE) {
			if (m->hi > wmax || m->lo > m->hi)
				return dpflow_error_set(
				    err, EINVAL, field_names[f],
				    "rule %u, field '%s': range [%u, %u] is "
				    "empty or wider than %u bits",
				    r->id, rl->names[f], m->lo, m->hi,
				    rl->layout.width[f]);
			lo = m->lo;
			hi = m->hi;
		} else if (m->type == DPFLOW_ACL_MATCH_MASK) {
			uint32_t inv = wmax & ~m->mask;

			if (m->mask > wmax || m->value > wmax)
				return dpflow_error_set(
				    err, EINVAL, field_names[f],
				    "rule %u, field '%s': value 0x%x / mask "
				    "0x%x wider than %u bits",
				    r->id, rl->names[f], m->value, m->mask,
				    rl->layout.width[f]);
			if (m->value & ~m->mask)
				return dpflow_error_set(
				    err, EINVAL, field_names[f],
				    "rule %u, field '%s': value 0x%x has bits "
				    "outside mask 0x%x",
				    r->id, rl->names[f], m->value, m->mask);
			lo = m->value;
			hi = m->value | inv;
			/* a prefix mask is exactly the range [lo, hi] */
			if (inv & (inv + 1)) {
				mask = m->mask;
				masked = 1;
			}
		} else {
			return dpflow_error_set(err, EINVAL, field_names[f],
						"rule %u, field '%s': unknown "
						"match type %u",
						r->id, rl->names[f], m->type);
		}
		out[REC_HDR + f] = lo;
		out[REC_HDR + nf + f] = hi;
		out[REC_HDR + 2 * nf + f] = mask;
	}
	out[0] = r->id;
	out[1] = r->priority;
	out[2] = r->value;
	out[3] = masked;
	return 0;
}

int dpflow_acl_rules_add(struct dpflow_acl_rules *rl,
			 const struct dpflow_acl_rule *rule,
			 struct dpflow_error *err)
{
	return dpflow_acl_rules_add_bulk(rl, rule, 1, NULL, err);
}

int dpflow_acl_rules_add_bulk(struct dpflow_acl_rules *rl,
			      const struct dpflow_acl_rule *rules, uint32_t n,
			      uint32_t *failed, struct dpflow_error *err)
{
	uint32_t i;
	int rc;

	if (failed)
		*failed = 0;
	if (!rl)
		return dpflow_error_set(err, EINVAL, "rules",
					"rule list is NULL");
	if (!rules && n)
		return dpflow_error_set(err, EINVAL, "rule", "rule is NULL");
	if (n > rl->cap - rl->n) {
		if (failed)
			*failed = rl->cap - rl->n;
		return dpflow_error_set(err, ENOSPC, "max_rules",
					"rule list full: %u of %u rules, %u "
					"more asked",
					rl->n, rl->cap, n);
	}
	/* Stage the batch after the stored rules, entering ids as we go so
	 * that duplicates inside the batch are found; undo on failure. */
	for (i = 0; i < n; i++) {
		uint32_t pos = rl->n + i, s;

		rc = rule_normalise(rl, &rules[i], rec_at(rl, pos), err);
		if (rc)
			goto undo;
		s = id_find(rl, rules[i].id);
		if (rl->slot[s]) {
			rc = dpflow_error_set(err, EEXIST, "id",
					      "rule id %u already in the list",
					      rules[i].id);
			goto undo;
		}
		rl->slot[s] = pos + 1;
	}
	rl->n += n;
	return 0;
undo:
	if (failed)
		*failed = i;
	while (i--)
		id_erase(rl, id_find(rl, rules[i].id));
	return rc;
}

int dpflow_acl_rules_delete(struct dpflow_acl_rules *rl, uint32_t id,
			    struct dpflow_error *err)
{
	uint32_t s, pos, last;

	if (!rl)
		return dpflow_error_set(err, EINVAL, "rules",
					"rule list is NULL");
	s = id_find(rl, id);
	if (!rl->slot[s])
		return dpflow_error_set(err, ENOENT, "id", "no rule with id %u",
					id);
	pos = rl->slot[s] - 1;
	id_erase(rl, s);
	last = rl->n - 1;
	if (pos != last) {
		/* move the last rule into the hole */
		memcpy(rec_at(rl, pos), rec_at(rl, last),
		       rl->stride * sizeof(uint32_t));
		rl->slot[id_find(rl, rec_at(rl, pos)[0])] = pos + 1;
	}
	rl->n--;
	return 0;
}

void dpflow_acl_rules_clear(struct dpflow_acl_rules *rl)
{
	memset(rl->slot, 0, ((size_t)rl->ht_mask + 1) * sizeof(*rl->slot));
	rl->n = 0;
}

uint32_t dpflow_acl_rules_count(const struct dpflow_acl_rules *rl)
{
	return rl->n;
}

const struct dpflow_acl_layout *
dpflow_acl_rules_layout(const struct dpflow_acl_rules *rl)
{
	return &rl->layout;
}

/* ---- builder ------------------------------------------------------ */

/* Rules in rank order, field-major copies for the builder. */
struct ranked {
	uint32_t n;
	uint32_t nf;
	uint32_t *lo;	 /* [rank * nf + f] */
	uint32_t *hi;	 /* [rank * nf + f] */
	uint32_t *mask;	 /* [rank * nf + f] */
	uint32_t *value; /* [rank] */
	uint8_t *masked; /* [rank] */
	uint32_t *wmax;	 /* [f] */
};

/* A field's candidate split of a node. */
struct split {
	uint32_t field;
	uint32_t n_cuts;
	uint32_t cut[DPFLOW_ACL_THRESH]; /* first value of children 1.. */
	uint64_t sum;			 /* rules over all children */
	uint32_t max;			 /* rules in the largest child */
	double score;
};

struct leaf_slot {
	uint64_t hash;
	uint32_t line; /* first line + 1; 0 = empty */
	uint32_t n;    /* rules */
};

struct builder {
	const struct ranked *rk;
	uint32_t nf;
	uint32_t leaf_rules;
	uint64_t budget; /* bytes of nodes + leaves for this tree */
	uint64_t used;
	/* output, shared by all trees */
	struct dpflow_acl_node *nodes;
	uint32_t n_nodes, cap_nodes;
	uint32_t *leaves; /* whole 64-byte lines of words */
	uint64_t n_leaf_words, cap_leaf_words;
	uint32_t block_words[2]; /* plain, masked */
	uint32_t *jumps;	 /* jump tables */
	uint64_t n_jump_words, cap_jump_words;
	/* identical leaves, per tree attempt */
	struct leaf_slot *lt;
	uint64_t lt_mask, lt_used;
	/* scratch for split evaluation, sized for the whole rule set */
	uint32_t *a, *b, *sa, *sb, *tmp, *seg;
	uint32_t *wt;
	/* rule copies handed to the root's subtrees, and those done: a tree
	 * whose size projects past 1.5 times its budget is abandoned early */
	uint64_t root_copies, root_done;
	/* replication caused by cuts on each field, in this attempt */
	uint64_t excess[DPFLOW_ACL_FIELDS_MAX];
	int rc; /* 0, -ENOMEM or -E2BIG (over budget) */
};

/*
 * Sort @n words of @v (@tmp as big): insertion sort when short, else LSD
 * radix by 8-bit digits (11-bit ones when long), skipping digits that all
 * words share (the high bits of values inside a node's region).
 */
static void sort_u32(uint32_t *v, uint32_t *tmp, uint32_t n)
{
	unsigned bits = n < 4096 ? 8 : 11;
	uint32_t *src = v, *dst = tmp;

	if (n < 48) {
		for (uint32_t i = 1; i < n; i++) {
			uint32_t x = v[i], j = i;

			while (j && v[j - 1] > x) {
				v[j] = v[j - 1];
				j--;
			}
			v[j] = x;
		}
		return;
	}
	for (unsigned sh = 0; sh < 32; sh += bits) {
		uint32_t cnt[2048] = {0}, sum = 0, mask = (1u << bits) - 1;
		uint32_t *t;

		for (uint32_t i = 0; i < n; i++)
			cnt[(src[i] >> sh) & mask]++;
		if (cnt[(src[0] >> sh) & mask] == n)
			continue; /* one digit value: already in order */
		for (uint32_t k = 0; k <= mask; k++) {
			uint32_t c = cnt[k];

			cnt[k] = sum;
			sum += c;
		}
		for (uint32_t i = 0; i < n; i++)
			dst[cnt[(src[i] >> sh) & mask]++] = src[i];
		t = src;
		src = dst;
		dst = t;
	}
	if (src != v)
		memcpy(v, src, n * sizeof(*v));
}

/* Does rule @r match every key of the region [rlo, rhi]? */
static bool covers(const struct ranked *rk, uint32_t r, const uint32_t *rlo,
		   const uint32_t *rhi)
{
	const uint32_t *lo = rk->lo + (size_t)r * rk->nf;
	const uint32_t *hi = rk->hi + (size_t)r * rk->nf;

	for (uint32_t f = 0; f < rk->nf; f++)
		if (lo[f] > rlo[f] || hi[f] < rhi[f])
			return false;
	if (rk->masked[r]) {
		const uint32_t *m = rk->mask + (size_t)r * rk->nf;

		for (uint32_t f = 0; f < rk->nf; f++) {
			uint32_t d = rlo[f] ^ rhi[f], low;

			if (m[f] == UINT32_MAX)
				continue;
			/* the bits that vary over [rlo, rhi]: all below and
			 * at the highest bit where the ends differ */
			d |= d >> 1;
			d |= d >> 2;
			d |= d >> 4;
			d |= d >> 8;
			d |= d >> 16;
			low = d;
			if ((m[f] & low) || (rlo[f] & m[f]) != lo[f])
				return false;
		}
	}
	return true;
}

/*
 * Evaluate cutting field @f of the region for the rules @list: fills @sp
 * and returns true if the field can be cut at all.
 */
static bool eval_field(struct builder *b, const uint32_t *list, uint32_t n,
		       uint32_t f, uint32_t RL, uint32_t RH, struct split *sp)
{
	const struct ranked *rk = b->rk;
	uint32_t nf = rk->nf, m = 0, ia = 0, ib = 0, k = 0;
	uint32_t *a = b->a, *bb = b->b, *sa = b->sa, *sb = b->sb;
	uint32_t *seg = b->seg, *wt = b->wt;
	uint32_t cnt[DPFLOW_ACL_FANOUT + 1] = {0};
	uint64_t total = 0, cum = 0;

	for (uint32_t i = 0; i < n; i++) {
		uint32_t lo = rk->lo[(size_t)list[i] * nf + f];
		uint32_t hi = rk->hi[(size_t)list[i] * nf + f];

		a[i] = sa[i] = lo > RL ? lo : RL;
		bb[i] = sb[i] = hi < RH ? hi : RH;
	}
	sort_u32(sa, b->tmp, n);
	sort_u32(sb, b->tmp, n);
	/* segment starts: RL, every a > RL, every b + 1 with b < RH */
	seg[m++] = RL;
	while (ia < n || ib < n) {
		uint32_t x;

		if (ib >= n || (ia < n && sa[ia] <= sb[ib] + 1u))
			x = sa[ia++];
		else
			x = sb[ib++] + 1u;
		if (x > seg[m - 1] && x <= RH)
			seg[m++] = x;
	}
	if (m < 2)
		return false;
	/* weight of a segment: rules overlapping it */
	ia = ib = 0;
	for (uint32_t j = 0; j < m; j++) {
		while (ia < n && sa[ia] <= seg[j])
			ia++;
		while (ib < n && sb[ib] < seg[j])
			ib++;
		wt[j] = ia - ib;
		total += wt[j];
	}
	sp->field = f;
	if (m <= DPFLOW_ACL_FANOUT) {
		for (uint32_t j = 1; j < m; j++)
			sp->cut[k++] = seg[j];
	} else {
		uint32_t c = 1;

		for (uint32_t j = 0; j < m && c < DPFLOW_ACL_FANOUT; j++) {
			/* cut before segment j once the weight before it
			 * reaches c / FANOUT of the total */
			if (j > 0 && cum * DPFLOW_ACL_FANOUT >= total * c) {
				sp->cut[k++] = seg[j];
				while (c < DPFLOW_ACL_FANOUT &&
				       cum * DPFLOW_ACL_FANOUT >= total * c)
					c++;
			}
			cum += wt[j];
		}
	}
	sp->n_cuts = k;
	if (!k)
		return false;
	sp->sum = 0;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t ca = 0, cb = 0;

		while (ca < k && sp->cut[ca] <= a[i])
			ca++;
		cb = ca;
		while (cb < k && sp->cut[cb] <= bb[i])
			cb++;
		cnt[ca]++;
		cnt[cb + 1]--;
		sp->sum += cb - ca + 1;
	}
	sp->max = 0;
	for (uint32_t c = 0, run = 0; c <= k; c++) {
		run += cnt[c];
		if (run > sp->max)
			sp->max = run;
	}
	sp->score = (double)sp->sum / (double)(k + 1) + 0.5 * sp->max;
	return true;
}

static int grow(void **p, uint64_t *cap, uint64_t need, size_t elem)
{
	uint64_t c = *cap ? *cap : 1024;
	void *q;

	if (need <= *cap)
		return 0;
	while (c < need)
		c *= 2;
	q = realloc(*p, (size_t)(c * elem));
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = c;
	return 0;
}

static uint64_t hash_list(const uint32_t *list, uint32_t n)
{
	uint64_t h = 0xcbf29ce484222325ull ^ n;

	for (uint32_t i = 0; i < n; i++) {
		h ^= list[i];
		h *= 0x100000001b3ull;
		h ^= h >> 29;
	}
	return h;
}

/* Does the leaf at @line hold exactly the ranks @list? */
static bool leaf_equal(const struct builder *b, uint32_t line,
		       const uint32_t *list, uint32_t n)
{
	const uint32_t *blk =
	    b->leaves + (uint64_t)line * DPFLOW_ACL_LINE_WORDS;

	for (uint32_t i = 0; i < n; i += DPFLOW_ACL_BLK_RULES) {
		uint32_t head = blk[0];

		for (uint32_t j = 0; j < DPFLOW_ACL_BLK_RULES; j++) {
			uint32_t want =
			    i + j < n ? list[i + j] : DPFLOW_ACL_RANK_NONE;

			if ((blk[j] & DPFLOW_ACL_RANK_MASK) != want)
				return false;
		}
		blk += b->block_words[!!(head & DPFLOW_ACL_BLK_MASKED)];
	}
	return true;
}

/* Write one block of rules @list[0..n) (n <= 4) at @w; returns its words. */
static uint32_t write_block(const struct builder *b, uint32_t *w,
			    const uint32_t *list, uint32_t n, bool last)
{
	const struct ranked *rk = b->rk;
	uint32_t nf = rk->nf, masked = 0, words;
	uint32_t *mk, *lo, *span;

	for (uint32_t j = 0; j < n; j++)
		masked |= rk->masked[list[j]];
	words = b->block_words[masked];
	memset(w, 0, words * sizeof(*w));
	mk = w + 2 * DPFLOW_ACL_BLK_RULES;
	lo = masked ? mk + 4 * nf : mk;
	span = lo + 4 * nf;
	for (uint32_t j = 0; j < DPFLOW_ACL_BLK_RULES; j++) {
		w[j] = j < n ? list[j] : DPFLOW_ACL_RANK_NONE;
		w[DPFLOW_ACL_BLK_RULES + j] =
		    j < n ? rk->value[list[j]] : DPFLOW_TABLE_MISS;
	}
	w[0] |= (last ? DPFLOW_ACL_BLK_LAST : 0) |
		(masked ? DPFLOW_ACL_BLK_MASKED : 0);
	/* unused places stay 0: their rank never wins */
	for (uint32_t j = 0; j < n; j++) {
		for (uint32_t f = 0; f < nf; f++) {
			size_t at = (size_t)list[j] * nf + f;
			uint32_t m = rk->mask[at];

			lo[4 * f + j] = rk->lo[at];
			/* a non-prefix mask: lo is the value under it */
			span[4 * f + j] =
			    m == UINT32_MAX ? rk->hi[at] - rk->lo[at] : 0;
			if (masked)
				mk[4 * f + j] = m;
		}
	}
	return words;
}

/* Leaf for the rules @list (rank order); returns its child reference. */
static uint32_t emit_leaf(struct builder *b, const uint32_t *list, uint32_t n)
{
	uint64_t h, s, words = 0, off;

	if (!n)
		return DPFLOW_ACL_LEAF; /* the shared empty leaf at line 0 */
	h = hash_list(list, n);
	for (s = h & b->lt_mask; b->lt[s].line; s = (s + 1) & b->lt_mask)
		if (b->lt[s].hash == h && b->lt[s].n == n &&
		    leaf_equal(b, b->lt[s].line - 1, list, n))
			return DPFLOW_ACL_LEAF | (b->lt[s].line - 1);
	for (uint32_t i = 0; i < n; i += DPFLOW_ACL_BLK_RULES) {
		uint8_t masked = 0;

		for (uint32_t j = i; j < n && j < i + DPFLOW_ACL_BLK_RULES; j++)
			masked |= b->rk->masked[list[j]];
		words += b->block_words[masked];
	}
	off = b->n_leaf_words;
	if ((off + words) / DPFLOW_ACL_LINE_WORDS >= DPFLOW_ACL_LEAF) {
		b->rc = -E2BIG;
		return DPFLOW_ACL_LEAF;
	}
	if (grow((void **)&b->leaves, &b->cap_leaf_words, off + words,
		 sizeof(uint32_t))) {
		b->rc = -ENOMEM;
		return DPFLOW_ACL_LEAF;
	}
	b->used += words * sizeof(uint32_t);
	for (uint32_t i = 0, w = 0; i < n; i += DPFLOW_ACL_BLK_RULES) {
		uint32_t c =
		    n - i < DPFLOW_ACL_BLK_RULES ? n - i : DPFLOW_ACL_BLK_RULES;

		w += write_block(b, b->leaves + off + w, list + i, c,
				 i + c == n);
	}
	b->n_leaf_words = off + words;
	/* remember it (the table is kept at most half full) */
	if ((b->lt_used + 1) * 2 > b->lt_mask + 1) {
		uint64_t nm = (b->lt_mask + 1) * 2 - 1;
		struct leaf_slot *nt = calloc(nm + 1, sizeof(*nt));

		if (!nt) {
			b->rc = -ENOMEM;
			return DPFLOW_ACL_LEAF;
		}
		for (uint64_t j = 0; j <= b->lt_mask; j++) {
			uint64_t t;

			if (!b->lt[j].line)
				continue;
			for (t = b->lt[j].hash & nm; nt[t].line;
			     t = (t + 1) & nm)
				;
			nt[t] = b->lt[j];
		}
		free(b->lt);
		b->lt = nt;
		b->lt_mask = nm;
	}
	for (s = h & b->lt_mask; b->lt[s].line; s = (s + 1) & b->lt_mask)
		;
	b->lt[s].hash = h;
	b->lt[s].line = (uint32_t)(off / DPFLOW_ACL_LINE_WORDS) + 1;
	b->lt[s].n = n;
	b->lt_used++;
	return DPFLOW_ACL_LEAF | (uint32_t)(off / DPFLOW_ACL_LINE_WORDS);
}

/*
 * After a subtree of the root: abandon the tree (-E2BIG) if its bytes so
 * far project, by the share of the root's rule copies done, past 1.5 times
 * the budget. Saves building most of a tree that would not fit.
 */
static void root_progress(struct builder *b, uint64_t copies)
{
	b->root_done += copies;
	if (b->rc || b->root_done * 8 < b->root_copies)
		return;
	if ((double)b->used * (double)b->root_copies >
	    1.5 * (double)b->budget * (double)b->root_done)
		b->rc = -E2BIG;
}

/* Rules of @list whose range on @f meets [lo, hi], into @out. */
static uint32_t filter(const struct ranked *rk, const uint32_t *list,
		       uint32_t n, uint32_t f, uint32_t lo, uint32_t hi,
		       uint32_t *out)
{
	uint32_t m = 0, nf = rk->nf;

	for (uint32_t i = 0; i < n; i++) {
		size_t at = (size_t)list[i] * nf + f;

		if (rk->lo[at] <= hi && rk->hi[at] >= lo)
			out[m++] = list[i];
	}
	return m;
}

/*
 * Build the subtree for the rules @list (rank order, @n of them, all
 * meeting the region [rlo, rhi], which this call may change and restores).
 * Returns its child reference; on failure b->rc is set.
 */
static uint32_t build_node(struct builder *b, uint32_t *list, uint32_t n,
			   uint32_t *rlo, uint32_t *rhi, unsigned depth)
{
	const struct ranked *rk = b->rk;
	struct split best = {0}, sp;
	uint32_t *sub[DPFLOW_ACL_FANOUT];
	uint32_t nsub[DPFLOW_ACL_FANOUT], clo[DPFLOW_ACL_FANOUT];
	uint32_t chi[DPFLOW_ACL_FANOUT];
	uint32_t idx, nch, f, keep_lo, keep_hi;
	bool found = false;

	if (b->rc)
		return DPFLOW_ACL_LEAF;
	for (uint32_t i = 0; i < n; i++)
		if (covers(rk, list[i], rlo, rhi)) {
			n = i + 1;
			break;
		}
	if (n <= b->leaf_rules || depth >= DEPTH_MAX)
		return emit_leaf(b, list, n);
	for (f = 0; f < b->nf; f++) {
		if (rlo[f] == rhi[f] ||
		    !eval_field(b, list, n, f, rlo[f], rhi[f], &sp))
			continue;
		if (!found || sp.score < best.score) {
			best = sp;
			found = true;
		}
	}
	/* no cut separates anything: every child would hold every rule */
	if (!found || best.sum >= (uint64_t)n * (best.n_cuts + 1))
		return emit_leaf(b, list, n);
	f = best.field;
	b->excess[f] += best.sum - n;
	/* children's rules; merge neighbours that hold the same rules */
	nch = 0;
	for (uint32_t c = 0; c <= best.n_cuts; c++) {
		uint32_t lo = c ? best.cut[c - 1] : rlo[f];
		uint32_t hi = c < best.n_cuts ? best.cut[c] - 1 : rhi[f];
		uint32_t *l = malloc((size_t)n * sizeof(*l));
		uint32_t m;

		if (!l) {
			b->rc = -ENOMEM;
			break;
		}
		m = filter(rk, list, n, f, lo, hi, l);
		if (nch && nsub[nch - 1] == m &&
		    !memcmp(sub[nch - 1], l, (size_t)m * sizeof(*l))) {
			chi[nch - 1] = hi;
			free(l);
			continue;
		}
		sub[nch] = l;
		nsub[nch] = m;
		clo[nch] = lo;
		chi[nch] = hi;
		nch++;
	}
	if (b->rc || nch < 2) {
		/* merging undid the cut: the field never separated rules */
		uint32_t ref = b->rc ? DPFLOW_ACL_LEAF : emit_leaf(b, list, n);

		for (uint32_t c = 0; c < nch; c++)
			free(sub[c]);
		return ref;
	}
	if (b->n_nodes >= b->cap_nodes) {
		uint64_t cap = b->cap_nodes;

		if (b->n_nodes >= DPFLOW_ACL_LEAF - 1)
			b->rc = -E2BIG;
		else if (grow((void **)&b->nodes, &cap,
			      (uint64_t)b->n_nodes + 1, sizeof(*b->nodes)))
			b->rc = -ENOMEM;
		b->cap_nodes =
		    (uint32_t)(cap < DPFLOW_ACL_LEAF ? cap : DPFLOW_ACL_LEAF);
	}
	b->used += sizeof(struct dpflow_acl_node);
	if (!b->rc && b->used > b->budget)
		b->rc = -E2BIG;
	if (b->rc) {
		for (uint32_t c = 0; c < nch; c++)
			free(sub[c]);
		return DPFLOW_ACL_LEAF;
	}
	idx = b->n_nodes++;
	b->nodes[idx].field = f;
	for (uint32_t c = 0; c < DPFLOW_ACL_THRESH; c++)
		b->nodes[idx].thr[c] = c + 1 < nch ? clo[c + 1] : UINT32_MAX;
	keep_lo = rlo[f];
	keep_hi = rhi[f];
	if (depth == 0)
		for (uint32_t c = 0; c < nch; c++)
			b->root_copies += nsub[c];
	for (uint32_t c = 0; c < nch; c++) {
		uint32_t ref;

		rlo[f] = clo[c];
		rhi[f] = chi[c];
		ref = build_node(b, sub[c], nsub[c], rlo, rhi, depth + 1);
		if (depth == 0)
			root_progress(b, nsub[c]);
		free(sub[c]);
		/* b->nodes may have moved */
		b->nodes[idx].child[c] = ref;
	}
	rlo[f] = keep_lo;
	rhi[f] = keep_hi;
	for (uint32_t c = nch; c < DPFLOW_ACL_FANOUT; c++)
		b->nodes[idx].child[c] = b->nodes[idx].child[nch - 1];
	if (b->used > b->budget && !b->rc)
		b->rc = -E2BIG;
	return idx;
}

/* A rule's slots in a jump table, for sorting by first slot. */
struct slot_rule {
	uint32_t lo, hi; /* slots */
	uint32_t rank;
};

static int cmp_slot_lo(const void *x, const void *y)
{
	const struct slot_rule *a = (const struct slot_rule *)x;
	const struct slot_rule *b = (const struct slot_rule *)y;

	return a->lo < b->lo ? -1 : a->lo > b->lo;
}

static unsigned width_of(uint32_t wmax)
{
	unsigned w = 0;

	while (w < 32 && (wmax >> w))
		w++;
	return w;
}

/*
 * Cost of a jump table on the top @k bits of field @f for @n rules whose
 * slot ranges, sorted, are @los and @his: *@copies gets the rule copies
 * over the table's runs of equal slots (what the subtrees get), and the
 * return value the rules a uniformly random key's slot holds on average.
 */
static double jump_cost(const uint32_t *los, const uint32_t *his, uint32_t n,
			unsigned k, unsigned shift, uint64_t *copies)
{
	uint64_t slots = (uint64_t)1 << k, weighted = 0, active = 0, p = 0;
	uint32_t ia = 0, ib = 0;

	*copies = 0;
	while (p < slots) {
		uint64_t next = slots;

		while (ia < n && (uint64_t)(los[ia] >> shift) <= p) {
			active++;
			ia++;
		}
		while (ib < n && (uint64_t)(his[ib] >> shift) < p) {
			active--;
			ib++;
		}
		if (ia < n && (uint64_t)(los[ia] >> shift) < next)
			next = los[ia] >> shift;
		if (ib < n && (uint64_t)(his[ib] >> shift) + 1 < next)
			next = (uint64_t)(his[ib] >> shift) + 1;
		*copies += active;
		weighted += active * (next - p);
		p = next;
	}
	return (double)weighted / (double)slots;
}

/* Is rule @r's range on @f at least half the field? */
static bool wide_in(const struct ranked *rk, uint32_t r, uint32_t f)
{
	size_t at = (size_t)r * rk->nf + f;

	return rk->hi[at] - rk->lo[at] >= rk->wmax[f] / 2;
}

/* A jump table's plan: its field and bits, and what it costs. */
struct jump_plan {
	uint32_t field;
	unsigned bits;
	uint64_t copies; /* rule copies over the runs of slots */
	uint32_t n_wide; /* rules left out: wide in the field */
	double score;
};

/*
 * Plan a jump table at the root of a tree over @list: for each field, the
 * number of top bits that leaves the fewest rules per slot while copying
 * the rules at most JUMP_COPIES times over (a bit more must cut the rules
 * per slot by JUMP_GAIN: a table twice as large costs cache). With
 * @leave_wide, rules wide in the field are left out of the table (they go
 * to a tree of their own), at a cost of 1/64 per rule left out. Returns
 * false when no table beats an ordinary node (n / 8 rules per child).
 */
#define JUMP_COPIES 1.5
#define JUMP_GAIN   0.9
static bool plan_jump(struct builder *b, const uint32_t *list, uint32_t n,
		      bool leave_wide, struct jump_plan *plan)
{
	const struct ranked *rk = b->rk;
	bool found = false;

	plan->score = (double)n / 8;
	for (uint32_t f = 0; f < rk->nf; f++) {
		unsigned w = width_of(rk->wmax[f]);
		unsigned kmax =
		    w < DPFLOW_ACL_JUMP_BITS_MAX ? w : DPFLOW_ACL_JUMP_BITS_MAX;
		uint32_t m = 0, kept_bits = 0;
		double best = 0;

		for (uint32_t i = 0; i < n; i++) {
			if (leave_wide && wide_in(rk, list[i], f))
				continue;
			b->sa[m] = rk->lo[(size_t)list[i] * rk->nf + f];
			b->sb[m++] = rk->hi[(size_t)list[i] * rk->nf + f];
		}
		if (2 * m < n)
			continue; /* most rules are wide here */
		if (leave_wide && getenv("NOF") &&
		    f == (uint32_t)atoi(getenv("NOF")))
			continue;
		if (getenv("KMAX") && kmax > (unsigned)atoi(getenv("KMAX")))
			kmax = (unsigned)atoi(getenv("KMAX"));
		sort_u32(b->sa, b->tmp, m);
		sort_u32(b->sb, b->tmp, m);
		for (unsigned k = 4; k <= kmax; k++) {
			uint64_t copies;
			double per_slot =
			    jump_cost(b->sa, b->sb, m, k, w - k, &copies);
			double score = per_slot + (double)(n - m) / 64;

			if ((double)copies > JUMP_COPIES * m + 64)
				break; /* more bits only copy more */
			if (kept_bits && per_slot >= best * JUMP_GAIN)
				continue;
			best = per_slot;
			kept_bits = k;
			if (score < plan->score) {
				plan->score = score;
				plan->field = f;
				plan->bits = k;
				plan->copies = copies;
				plan->n_wide = n - m;
				found = true;
			}
		}
	}
	return found;
}

/*
 * A jump table on the top @k bits of field @f over @list, and a subtree
 * for each run of slots that hold the same rules, into @tr. On failure
 * b->rc is set.
 */
static void build_jump(struct builder *b, const uint32_t *list, uint32_t n,
		       uint32_t f, unsigned k, uint64_t copies, uint32_t *rlo,
		       uint32_t *rhi, struct dpflow_acl_tree *tr)
{
	const struct ranked *rk = b->rk;
	unsigned shift = width_of(rk->wmax[f]) - k;
	uint64_t slots = (uint64_t)1 << k, p = 0, base = b->n_jump_words;
	struct slot_rule *sr = malloc(((size_t)n + 1) * sizeof(*sr));
	uint32_t *active = malloc(((size_t)n + 1) * sizeof(*active));
	uint32_t *sub = malloc(((size_t)n + 1) * sizeof(*sub));
	uint32_t na = 0, next_in = 0;

	if (!sr || !active || !sub ||
	    grow((void **)&b->jumps, &b->cap_jump_words, base + slots,
		 sizeof(uint32_t))) {
		b->rc = -ENOMEM;
		goto out;
	}
	b->n_jump_words = base + slots;
	b->used += slots * sizeof(uint32_t);
	b->root_copies = copies;
	for (uint32_t i = 0; i < n; i++) {
		size_t at = (size_t)list[i] * rk->nf + f;

		sr[i].lo = rk->lo[at] >> shift;
		sr[i].hi = rk->hi[at] >> shift;
		sr[i].rank = list[i];
	}
	qsort(sr, n, sizeof(*sr), cmp_slot_lo);
	/* sweep the slots: @active holds the rules over slot p */
	while (p < slots && !b->rc) {
		uint64_t next = slots;
		uint32_t m = 0, ref;

		while (next_in < n && sr[next_in].lo <= p)
			active[na++] = next_in++;
		for (uint32_t j = 0; j < na; j++)
			if (sr[active[j]].hi >= p) {
				active[m++] = active[j];
				if ((uint64_t)sr[active[j]].hi + 1 < next)
					next = (uint64_t)sr[active[j]].hi + 1;
			}
		na = m;
		if (next_in < n && sr[next_in].lo < next)
			next = sr[next_in].lo;
		for (uint32_t j = 0; j < na; j++)
			sub[j] = sr[active[j]].rank;
		sort_u32(sub, b->tmp, na);
		rlo[f] = (uint32_t)(p << shift);
		rhi[f] = (uint32_t)((next << shift) - 1);
		ref = build_node(b, sub, na, rlo, rhi, 1);
		root_progress(b, na);
		for (uint64_t q = p; q < next; q++)
			b->jumps[base + q] = ref;
		p = next;
	}
	rlo[f] = 0;
	rhi[f] = rk->wmax[f];
	tr->jump = (uint32_t)base;
	tr->field = (uint8_t)f;
	tr->shift = (uint8_t)shift;
	tr->bits = (uint8_t)k;
	tr->root = DPFLOW_ACL_LEAF;
	if (b->used > b->budget && !b->rc)
		b->rc = -E2BIG;
out:
	free(sr);
	free(active);
	free(sub);
}

/*
 * Build one tree for @list with the builder's current limits into @tr.
 * Returns 0, -E2BIG when over budget (the builder's output is rolled
 * back), or -ENOMEM.
 */
static int build_tree(struct builder *b, uint32_t *list, uint32_t n,
		      struct dpflow_acl_tree *tr)
{
	uint32_t rlo[DPFLOW_ACL_FIELDS_MAX], rhi[DPFLOW_ACL_FIELDS_MAX];
	uint32_t n_nodes = b->n_nodes;
	uint64_t n_leaf_words = b->n_leaf_words;
	uint64_t n_jump_words = b->n_jump_words;
	struct jump_plan plan = {0};

	for (uint32_t i = 0; i < b->nf; i++) {
		rlo[i] = 0;
		rhi[i] = b->rk->wmax[i];
	}
	memset(b->excess, 0, sizeof(b->excess));
	memset(b->lt, 0, (b->lt_mask + 1) * sizeof(*b->lt));
	memset(tr, 0, sizeof(*tr));
	tr->min_rank = n ? list[0] : DPFLOW_ACL_RANK_NONE;
	b->lt_used = 0;
	b->used = 0;
	b->root_copies = b->root_done = 0;
	b->rc = 0;
	if (n > b->leaf_rules && plan_jump(b, list, n, false, &plan))
		build_jump(b, list, n, plan.field, plan.bits, plan.copies, rlo,
			   rhi, tr);
	else
		tr->root = build_node(b, list, n, rlo, rhi, 0);
	if (b->rc) {
		b->n_nodes = n_nodes;
		b->n_leaf_words = n_leaf_words;
		b->n_jump_words = n_jump_words;
	}
	return b->rc;
}

/* Rank order: priority, then id. */
static int cmp_rank(const void *x, const void *y)
{
	const uint32_t *a = *(const uint32_t *const *)x;
	const uint32_t *b = *(const uint32_t *const *)y;

	if (a[1] != b[1])
		return a[1] < b[1] ? -1 : 1;
	return a[0] < b[0] ? -1 : a[0] > b[0];
}

static void ranked_free(struct ranked *rk)
{
	free(rk->lo);
	free(rk->hi);
	free(rk->mask);
	free(rk->value);
	free(rk->masked);
}

static int ranked_init(struct ranked *rk, const struct dpflow_acl_rules *rl)
{
	uint32_t n = rl->n, nf = rl->nf;
	const uint32_t **order = malloc(((size_t)n + 1) * sizeof(*order));

	memset(rk, 0, sizeof(*rk));
	rk->n = n;
	rk->nf = nf;
	rk->wmax = (uint32_t *)rl->wmax;
	rk->lo = malloc(((size_t)n * nf + 1) * sizeof(uint32_t));
	rk->hi = malloc(((size_t)n * nf + 1) * sizeof(uint32_t));
	rk->mask = malloc(((size_t)n * nf + 1) * sizeof(uint32_t));
	rk->value = malloc(((size_t)n + 1) * sizeof(uint32_t));
	rk->masked = malloc((size_t)n + 1);
	if (!order || !rk->lo || !rk->hi || !rk->mask || !rk->value ||
	    !rk->masked) {
		free(order);
		ranked_free(rk);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < n; i++)
		order[i] = rec_at(rl, i);
	qsort(order, n, sizeof(*order), cmp_rank);
	for (uint32_t r = 0; r < n; r++) {
		const uint32_t *rec = order[r];

		memcpy(rk->lo + (size_t)r * nf, rec + REC_HDR, nf * 4);
		memcpy(rk->hi + (size_t)r * nf, rec + REC_HDR + nf, nf * 4);
		memcpy(rk->mask + (size_t)r * nf, rec + REC_HDR + 2 * nf,
		       nf * 4);
		rk->value[r] = rec[2];
		rk->masked[r] = (uint8_t)rec[3];
	}
	free(order);
	return 0;
}

/* A group of rules waiting for a tree. */
struct group {
	uint32_t *list; /* ranks, ascending */
	uint32_t n;
	uint32_t leaf_rules;
	unsigned retries; /* leaf size doublings so far */
	bool planned;	  /* came out of a split for a jump table */
};

/* floor(log2(size of rule @r's range on @f)), 0..32. */
static unsigned range_bits(const struct ranked *rk, uint32_t r, uint32_t f)
{
	uint64_t size = (uint64_t)rk->hi[(size_t)r * rk->nf + f] -
			rk->lo[(size_t)r * rk->nf + f] + 1;
	unsigned bits = 0;

	while (size >> (bits + 1))
		bits++;
	return bits;
}

/*
 * Where to split @g on field @f: rules with range_bits >= the returned
 * value are "wide". Wide means covering at least half of the field; when
 * that puts every rule on one side, wider than the group's median.
 * Returns 0 when the field cannot split the group.
 */
static unsigned wide_cut(const struct ranked *rk, const struct group *g,
			 uint32_t f)
{
	uint32_t hist[34] = {0}, below = 0;
	unsigned width = 0, cut;

	while (width < 32 && (rk->wmax[f] >> width))
		width++;
	for (uint32_t i = 0; i < g->n; i++)
		hist[range_bits(rk, g->list[i], f)]++;
	for (cut = 0; cut < width - 1; cut++)
		below += hist[cut];
	if (below && below < g->n)
		return cut;
	below = 0;
	for (cut = 0; cut <= width; cut++) {
		if (below * 2 >= g->n)
			break;
		below += hist[cut];
	}
	return below && below < g->n ? cut : 0;
}

/*
 * Split @g in two: the rules wide in a field, and the rest, trying fields
 * in order of the replication their cuts caused in the last attempt.
 * Returns 0 with @g narrowed and @out holding the wide rules, -ENOENT if
 * no field splits the group, -ENOMEM.
 */
static int split_group(const struct builder *b, struct group *g,
		       struct group *out)
{
	const struct ranked *rk = b->rk;
	bool tried[DPFLOW_ACL_FIELDS_MAX] = {false};

	for (uint32_t round = 0; round < rk->nf; round++) {
		uint32_t f = UINT32_MAX, nw = 0, nn = 0;
		unsigned cut;
		uint32_t *wl;

		for (uint32_t k = 0; k < rk->nf; k++)
			if (!tried[k] &&
			    (f == UINT32_MAX || b->excess[k] > b->excess[f]))
				f = k;
		tried[f] = true;
		if (!b->excess[f])
			break;
		cut = wide_cut(rk, g, f);
		if (!cut)
			continue;
		wl = malloc((size_t)g->n * sizeof(*wl));
		if (!wl)
			return -ENOMEM;
		for (uint32_t i = 0; i < g->n; i++) {
			uint32_t r = g->list[i];

			if (range_bits(rk, r, f) >= cut)
				wl[nw++] = r;
			else
				g->list[nn++] = r;
		}
		g->n = nn;
		out->list = wl;
		out->n = nw;
		out->leaf_rules = g->leaf_rules;
		out->retries = g->retries;
		out->planned = g->planned;
		return 0;
	}
	return -ENOENT;
}

/* Move the rules of @g wide in @f to @out; both are marked planned. */
static int split_wide(const struct builder *b, struct group *g, uint32_t f,
		      struct group *out)
{
	uint32_t nw = 0, nn = 0;
	uint32_t *wl = malloc((size_t)g->n * sizeof(*wl));

	if (!wl)
		return -ENOMEM;
	for (uint32_t i = 0; i < g->n; i++) {
		uint32_t r = g->list[i];

		if (wide_in(b->rk, r, f))
			wl[nw++] = r;
		else
			g->list[nn++] = r;
	}
	g->n = nn;
	g->planned = true;
	*out = *g;
	out->list = wl;
	out->n = nw;
	return 0;
}

static int cmp_tree(const void *x, const void *y)
{
	const struct dpflow_acl_tree *a = (const struct dpflow_acl_tree *)x;
	const struct dpflow_acl_tree *b = (const struct dpflow_acl_tree *)y;

	return a->min_rank < b->min_rank ? -1 : a->min_rank > b->min_rank;
}

static void builder_free(struct builder *b)
{
	free(b->nodes);
	free(b->leaves);
	free(b->jumps);
	free(b->lt);
	free(b->a);
	free(b->b);
	free(b->sa);
	free(b->sb);
	free(b->tmp);
	free(b->seg);
	free(b->wt);
}

static int builder_init(struct builder *b, const struct ranked *rk)
{
	size_t n = (size_t)rk->n + 1;

	memset(b, 0, sizeof(*b));
	b->rk = rk;
	b->nf = rk->nf;
	b->a = malloc(n * sizeof(uint32_t));
	b->b = malloc(n * sizeof(uint32_t));
	b->sa = malloc(n * sizeof(uint32_t));
	b->sb = malloc(n * sizeof(uint32_t));
	b->tmp = malloc(n * sizeof(uint32_t));
	b->seg = malloc(2 * n * sizeof(uint32_t));
	b->wt = malloc(2 * n * sizeof(uint32_t));
	b->lt_mask = 1023;
	b->lt = calloc(b->lt_mask + 1, sizeof(*b->lt));
	b->block_words[0] = dpflow_acl_block_words(rk->nf, 0);
	b->block_words[1] = dpflow_acl_block_words(rk->nf, 1);
	if (!b->a || !b->b || !b->sa || !b->sb || !b->tmp || !b->seg ||
	    !b->wt || !b->lt ||
	    grow((void **)&b->leaves, &b->cap_leaf_words, b->block_words[0],
		 sizeof(uint32_t)))
		return -ENOMEM;
	/* line 0: the empty leaf, one block of unused places */
	b->n_leaf_words = write_block(b, b->leaves, NULL, 0, true);
	return 0;
}

/* Allocate @size bytes (a multiple of 64), zeroed. */
static void *image_alloc(size_t size)
{
	void *p = NULL;

	if (size >= HUGE_PAGE) {
		size_t big = (size + HUGE_PAGE - 1) & ~(size_t)(HUGE_PAGE - 1);

		if (posix_memalign(&p, HUGE_PAGE, big))
			return NULL;
#ifdef MADV_HUGEPAGE
		madvise(p, big, MADV_HUGEPAGE);
#endif
	} else if (posix_memalign(&p, DPFLOW_CACHE_LINE, size)) {
		return NULL;
	}
	memset(p, 0, size);
	return p;
}

/* Lay the trees out as one image. */
static struct dpflow_acl_image *assemble(const struct builder *b,
					 const struct ranked *rk,
					 struct dpflow_acl_tree *trees,
					 uint32_t n_trees)
{
	struct dpflow_acl_image *img;
	uint64_t jumps_off = sizeof(*img);
	uint64_t nodes_off = (jumps_off + b->n_jump_words * 4 + 63) & ~63ull;
	uint64_t leaves_off = nodes_off + (uint64_t)b->n_nodes * 64;
	uint64_t size = leaves_off + b->n_leaf_words * 4;

	if (size > SIZE_MAX)
		return NULL;
	img = image_alloc((size_t)size);
	if (!img)
		return NULL;
	qsort(trees, n_trees, sizeof(*trees), cmp_tree);
	img->magic = DPFLOW_ACL_MAGIC;
	img->version = DPFLOW_ACL_VERSION;
	img->size = size;
	img->n_fields = rk->nf;
	img->n_rules = rk->n;
	img->n_trees = n_trees;
	img->n_nodes = b->n_nodes;
	img->jumps_off = jumps_off;
	img->n_jump_words = b->n_jump_words;
	img->nodes_off = nodes_off;
	img->leaves_off = leaves_off;
	img->n_leaf_lines = b->n_leaf_words / DPFLOW_ACL_LINE_WORDS;
	img->block_words = b->block_words[0];
	img->block_words_masked = b->block_words[1];
	memcpy(img->tree, trees, n_trees * sizeof(*trees));
	if (b->n_jump_words)
		memcpy((uint8_t *)img + jumps_off, b->jumps,
		       (size_t)b->n_jump_words * 4);
	if (b->n_nodes)
		memcpy((uint8_t *)img + nodes_off, b->nodes,
		       (size_t)b->n_nodes * 64);
	memcpy((uint8_t *)img + leaves_off, b->leaves,
	       (size_t)b->n_leaf_words * 4);
	return img;
}

struct dpflow_acl_image *
dpflow_acl_build(const struct dpflow_acl_rules *rl,
		 const struct dpflow_acl_build_params *p,
		 struct dpflow_error *err)
{
	struct dpflow_acl_image *img = NULL;
	struct dpflow_acl_tree trees[DPFLOW_ACL_TREES_MAX];
	struct group groups[DPFLOW_ACL_TREES_MAX];
	struct jump_plan jp = {0};
	uint32_t n_trees = 0, n_groups = 0, max_trees = TREES_DEFAULT;
	uint32_t leaf_rules = LEAF_DEFAULT;
	struct ranked rk;
	struct builder b;
	uint64_t budget = 0; /* 0: by group size */
	int rc;

	if (!rl) {
		dpflow_error_set(err, EINVAL, "rules", "rule list is NULL");
		return NULL;
	}
	if (p && p->max_trees > DPFLOW_ACL_TREES_MAX) {
		dpflow_error_set(err, EINVAL, "max_trees",
				 "max_trees %u: must be 1..%u", p->max_trees,
				 DPFLOW_ACL_TREES_MAX);
		return NULL;
	}
	if (p && p->max_trees)
		max_trees = p->max_trees;
	if (p && p->leaf_rules)
		leaf_rules = p->leaf_rules;
	if (p && p->tree_budget)
		budget = p->tree_budget;
	if (ranked_init(&rk, rl)) {
		dpflow_error_set(err, ENOMEM, NULL, "out of memory");
		return NULL;
	}
	rc = builder_init(&b, &rk);
	groups[0].list = malloc(((size_t)rk.n + 1) * sizeof(uint32_t));
	if (rc || !groups[0].list) {
		rc = -ENOMEM;
		free(groups[0].list);
		goto out;
	}
	for (uint32_t r = 0; r < rk.n; r++)
		groups[0].list[r] = r;
	groups[0].n = rk.n;
	groups[0].leaf_rules = leaf_rules;
	groups[0].retries = 0;
	groups[0].planned = false;
	n_groups = 1;
	while (n_groups) {
		struct group *g = &groups[n_groups - 1], tmp;

		/* the largest group first: it is the one worth splitting
		 * while trees are left */
		for (uint32_t i = 0; i + 1 < n_groups; i++)
			if (groups[i].n > g->n) {
				tmp = groups[i];
				groups[i] = *g;
				*g = tmp;
			}

		/* a jump table cannot take the rules wide in its field: they
		 * get a tree of their own, while trees are left */
		if (g->n >= SPLIT_MIN && !g->planned &&
		    n_trees + n_groups < max_trees &&
		    plan_jump(&b, g->list, g->n, true, &jp) && jp.n_wide) {
			rc = split_wide(&b, g, jp.field, &groups[n_groups]);
			if (rc)
				goto out;
			n_groups++;
			continue;
		}
		b.leaf_rules = g->leaf_rules;
		b.budget = budget ? budget
				  : BUDGET_BASE + (uint64_t)BUDGET_RULE * g->n;
		for (unsigned r = 0; r < g->retries; r++)
			b.budget += b.budget / 2;
		if (g->leaf_rules >= g->n)
			b.budget = UINT64_MAX; /* one leaf: always fits */
		rc = build_tree(&b, g->list, g->n, &trees[n_trees]);
		if (rc == 0) {
			n_trees++;
			free(g->list);
			n_groups--;
			continue;
		}
		if (rc != -E2BIG || g->leaf_rules >= g->n)
			goto out;
		if (n_trees + n_groups < max_trees) {
			rc = split_group(&b, g, &groups[n_groups]);
			if (rc == 0) {
				n_groups++;
				continue;
			}
			if (rc != -ENOENT)
				goto out;
		}
		/* bigger leaves: fewer nodes, less replication; as many
		 * doublings as the abandoned tree was over its budget (by
		 * the share of it built), up to 6 at once */
		{
			double over = 8;
			unsigned d = 1;

			if (b.root_done && b.root_copies)
				over = (double)b.used * (double)b.root_copies /
				       ((double)b.root_done * (double)b.budget);
			while (d < 6 && (double)(1u << d) < over)
				d++;
			g->leaf_rules = g->leaf_rules << d > g->n
					    ? g->n
					    : g->leaf_rules << d;
			g->retries++;
		}
	}
	img = assemble(&b, &rk, trees, n_trees);
	rc = img ? 0 : -ENOMEM;
out:
	while (n_groups)
		free(groups[--n_groups].list);
	builder_free(&b);
	ranked_free(&rk);
	if (rc == -E2BIG)
		dpflow_error_set(err, E2BIG, "rules",
				 "%u rules need an image over the 2^31 "
				 "node / leaf word limits",
				 rl->n);
	else if (rc)
		dpflow_error_set(err, ENOMEM, NULL,
				 "out of memory building %u rules", rl->n);
	return img;
}

void dpflow_acl_destroy(struct dpflow_acl_image *img)
{
	free(img);
}

size_t dpflow_acl_image_bytes(const struct dpflow_acl_image *img)
{
	return (size_t)img->size;
}

int dpflow_acl_image_copy(void *dst, size_t dst_size,
			  const struct dpflow_acl_image *src,
			  struct dpflow_error *err)
{
	if (!dst || ((uintptr_t)dst & (DPFLOW_CACHE_LINE - 1)))
		return dpflow_error_set(err, EINVAL, "dst",
					"destination %p is not 64-byte "
					"aligned",
					dst);
	if (dst_size < src->size)
		return dpflow_error_set(err, EINVAL, "dst_size",
					"destination holds %zu bytes, the "
					"image %zu",
					dst_size, (size_t)src->size);
	memcpy(dst, src, (size_t)src->size);
	return 0;
}

struct dpflow_acl_image *dpflow_acl_clone(const struct dpflow_acl_image *src,
					  struct dpflow_error *err)
{
	struct dpflow_acl_image *img = image_alloc((size_t)src->size);

	if (!img) {
		dpflow_error_set(err, ENOMEM, NULL,
				 "out of memory for a %zu-byte image",
				 (size_t)src->size);
		return NULL;
	}
	memcpy(img, src, (size_t)src->size);
	return img;
}

/*
 * Walk the leaf area line by line: every leaf is a run of blocks ending
 * with a BLK_LAST block, and the leaves tile the area. Calls @fn (if not
 * NULL) on each leaf. Returns 0, or -EINVAL at the first block that runs
 * past the area or has a bad head.
 */
static int leaves_walk(const struct dpflow_acl_image *img,
		       void (*fn)(void *arg, uint64_t line, uint32_t rules),
		       void *arg)
{
	const uint32_t *leaves = dpflow_acl_leaves(img);
	uint64_t line = 0, start = 0;
	uint32_t rules = 0;

	while (line < img->n_leaf_lines) {
		const uint32_t *blk = leaves + line * DPFLOW_ACL_LINE_WORDS;
		uint32_t head = blk[0];
		uint32_t words = head & DPFLOW_ACL_BLK_MASKED
				     ? img->block_words_masked
				     : img->block_words;

		if (line + words / DPFLOW_ACL_LINE_WORDS > img->n_leaf_lines)
			return -EINVAL;
		for (uint32_t j = 0; j < DPFLOW_ACL_BLK_RULES; j++)
			rules += (blk[j] & DPFLOW_ACL_RANK_MASK) !=
				 DPFLOW_ACL_RANK_NONE;
		line += words / DPFLOW_ACL_LINE_WORDS;
		if (head & DPFLOW_ACL_BLK_LAST) {
			if (fn)
				fn(arg, start, rules);
			start = line;
			rules = 0;
		}
	}
	return start == line ? 0 : -EINVAL;
}

static void mark_leaf(void *arg, uint64_t line, uint32_t rules)
{
	uint8_t *starts = (uint8_t *)arg;

	(void)rules;
	starts[line / 8] |= (uint8_t)(1u << (line % 8));
}

/* Is @ref a valid child of node @parent (UINT32_MAX for a root)? */
static bool ref_ok(const struct dpflow_acl_image *img, const uint8_t *starts,
		   uint32_t ref, uint32_t parent)
{
	uint64_t line = ref & ~DPFLOW_ACL_LEAF;

	if (!(ref & DPFLOW_ACL_LEAF))
		return ref < img->n_nodes &&
		       (parent == UINT32_MAX || ref > parent);
	return line < img->n_leaf_lines && (starts[line / 8] >> (line % 8) & 1);
}

int dpflow_acl_image_check(const void *mem, size_t size,
			   struct dpflow_error *err)
{
	const struct dpflow_acl_image *img =
	    (const struct dpflow_acl_image *)mem;
	const struct dpflow_acl_node *nodes;
	uint8_t *starts;
	int rc = 0;

	if (!mem || ((uintptr_t)mem & (DPFLOW_CACHE_LINE - 1)))
		return dpflow_error_set(err, EINVAL, "mem",
					"image %p is not 64-byte aligned", mem);
	if (size < sizeof(*img))
		return dpflow_error_set(err, EINVAL, "size",
					"%zu bytes: smaller than a header",
					size);
	if (img->magic != DPFLOW_ACL_MAGIC ||
	    img->version != DPFLOW_ACL_VERSION)
		return dpflow_error_set(err, EINVAL, "magic",
					"not an ACL image (magic 0x%x "
					"version %u)",
					img->magic, img->version);
	if (img->size > size || img->size % 64 || img->size < sizeof(*img))
		return dpflow_error_set(err, EINVAL, "size",
					"image size %llu, buffer %zu",
					(unsigned long long)img->size, size);
	if (img->n_fields < 1 || img->n_fields > DPFLOW_ACL_FIELDS_MAX ||
	    img->block_words != dpflow_acl_block_words(img->n_fields, 0) ||
	    img->block_words_masked != dpflow_acl_block_words(img->n_fields, 1))
		return dpflow_error_set(
		    err, EINVAL, "n_fields", "n_fields %u, block words %u / %u",
		    img->n_fields, img->block_words, img->block_words_masked);
	if (img->n_trees < 1 || img->n_trees > DPFLOW_ACL_TREES_MAX)
		return dpflow_error_set(err, EINVAL, "n_trees", "n_trees %u",
					img->n_trees);
	if (img->jumps_off < sizeof(*img) || img->jumps_off % 64 ||
	    img->n_jump_words > DPFLOW_ACL_LEAF ||
	    img->jumps_off + img->n_jump_words * 4 > img->nodes_off ||
	    img->nodes_off % 64 || img->n_nodes >= DPFLOW_ACL_LEAF ||
	    img->nodes_off + (uint64_t)img->n_nodes * 64 > img->leaves_off ||
	    img->leaves_off % 64 || img->n_leaf_lines < 1 ||
	    img->n_leaf_lines > DPFLOW_ACL_LEAF ||
	    img->leaves_off + img->n_leaf_lines * 64 > img->size)
		return dpflow_error_set(err, EINVAL, "nodes_off",
					"sections out of the image");
	starts = calloc(img->n_leaf_lines / 8 + 1, 1);
	if (!starts)
		return dpflow_error_set(err, ENOMEM, NULL, "out of memory");
	if (leaves_walk(img, mark_leaf, starts)) {
		rc = dpflow_error_set(err, EINVAL, "leaves",
				      "leaf blocks do not tile the leaf area");
		goto out;
	}
	for (uint32_t t = 0; t < img->n_trees; t++) {
		const struct dpflow_acl_tree *tr = &img->tree[t];
		const uint32_t *jt = dpflow_acl_jumps(img) + tr->jump;
		uint64_t slots = (uint64_t)1 << tr->bits;

		if (!tr->bits) {
			if (ref_ok(img, starts, tr->root, UINT32_MAX))
				continue;
			rc = dpflow_error_set(err, EINVAL, "tree",
					      "tree %u: bad root 0x%x", t,
					      tr->root);
			goto out;
		}
		if (tr->bits > DPFLOW_ACL_JUMP_BITS_MAX ||
		    tr->field >= img->n_fields || tr->shift > 31 ||
		    (uint64_t)tr->jump + slots > img->n_jump_words) {
			rc = dpflow_error_set(err, EINVAL, "tree",
					      "tree %u: bad jump table", t);
			goto out;
		}
		for (uint64_t q = 0; q < slots; q++)
			if (!ref_ok(img, starts, jt[q], UINT32_MAX)) {
				rc = dpflow_error_set(
				    err, EINVAL, "tree",
				    "tree %u: bad jump entry %llu (0x%x)", t,
				    (unsigned long long)q, jt[q]);
				goto out;
			}
	}
	nodes = dpflow_acl_nodes(img);
	for (uint32_t i = 0; i < img->n_nodes; i++) {
		const struct dpflow_acl_node *nd = nodes + i;

		if (nd->field >= img->n_fields) {
			rc =
			    dpflow_error_set(err, EINVAL, "node",
					     "node %u: field %u", i, nd->field);
			goto out;
		}
		for (uint32_t c = 0; c < DPFLOW_ACL_FANOUT; c++)
			if (!ref_ok(img, starts, nd->child[c], i)) {
				rc = dpflow_error_set(
				    err, EINVAL, "node",
				    "node %u: bad child %u (0x%x)", i, c,
				    nd->child[c]);
				goto out;
			}
	}
out:
	free(starts);
	return rc;
}

static void count_leaf(void *arg, uint64_t line, uint32_t rules)
{
	struct dpflow_acl_info *info = (struct dpflow_acl_info *)arg;

	(void)line;
	info->n_leaves++;
	info->leaf_entries += rules;
	if (rules > info->max_leaf)
		info->max_leaf = rules;
}

void dpflow_acl_info(const struct dpflow_acl_image *img,
		     struct dpflow_acl_info *info)
{
	const struct dpflow_acl_node *nodes = dpflow_acl_nodes(img);
	uint32_t *depth = calloc((size_t)img->n_nodes + 1, sizeof(*depth));

	memset(info, 0, sizeof(*info));
	info->n_fields = img->n_fields;
	info->n_rules = img->n_rules;
	info->n_trees = img->n_trees;
	info->n_nodes = img->n_nodes;
	info->size = (size_t)img->size;
	leaves_walk(img, count_leaf, info);
	if (!depth)
		return;
	/* children come after their parent, so one pass in order */
	for (uint32_t t = 0; t < img->n_trees; t++) {
		const struct dpflow_acl_tree *tr = &img->tree[t];
		const uint32_t *jt = dpflow_acl_jumps(img) + tr->jump;

		if (!tr->bits) {
			if (!(tr->root & DPFLOW_ACL_LEAF))
				depth[tr->root] = 1;
			continue;
		}
		info->n_jump_tables++;
		for (uint64_t q = 0; q < (uint64_t)1 << tr->bits; q++)
			if (!(jt[q] & DPFLOW_ACL_LEAF))
				depth[jt[q]] = 1;
	}
	for (uint32_t i = 0; i < img->n_nodes; i++) {
		if (depth[i] > info->max_depth)
			info->max_depth = depth[i];
		for (uint32_t c = 0; c < DPFLOW_ACL_FANOUT; c++) {
			uint32_t ch = nodes[i].child[c];

			if (!(ch & DPFLOW_ACL_LEAF))
				depth[ch] = depth[i] + 1;
		}
	}
	free(depth);
}

uint32_t dpflow_acl_lookup(const struct dpflow_acl_image *img,
			   const uint32_t *key)
{
	return dpflow_acl_lookup_impl(img, key);
}

uint32_t dpflow_acl_classify(const struct dpflow_acl_image *img,
			     const uint32_t *const *keys, uint32_t n,
			     uint32_t *values)
{
	return dpflow_acl_classify_impl(img, keys, n, values);
}
