/*
 * Longest-prefix-match tables: building and changing images (control
 * path). Layouts and the lookup code are in table_lpm_impl.h; the API and
 * its guarantees in table_lpm.h; the design in docs/tables/lpm.md.
 *
 * One control thread changes an image that no reader uses at the time, so
 * nothing here synchronises with lookups. Every change validates first
 * (arguments, presence, space) and only then writes, so a failed call
 * leaves every byte as it was.
 *
 * Both kinds keep, beside each entry, the depth (prefix length + 1) of
 * the rule it holds, and a hash of the rules themselves. A change is a
 * per-entry rule applied to the entries the prefix covers (add /L: where
 * depth < L+1, take the new rule; delete: where depth == L+1, take the
 * next-shorter covering rule, found in the hash; update: where depth ==
 * L+1, take the new value), after checking the groups it needs. Groups
 * that hold one rule only, covering all of the group, are folded back
 * into their parent entry, so the shape depends only on the rule set.
 *
 * IPv4: DIR-24-8. tbl24 entries carry values below 2^31 (the top bit
 * marks a group), so a /24 under a rule with a larger value gets a group
 * of its own; that is also the only case where a delete or an update
 * needs a group.
 *
 * IPv6: a multibit trie (16, 8, 8, ... bits) with 8-byte entries
 * {value, depth} or {group, EXT}; deletes never need a group. Keys are
 * key_bytes long (16 for an IPv6 address, up to 24 with exact fields in
 * front); the control code holds them as six big-endian words, zero past
 * key_bytes, whatever the length.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "flow/table_lpm.h"

#define NO_GROUP  UINT32_MAX
#define HUGE_PAGE (2u << 20)

static size_t align64(size_t x)
{
	return (x + 63) & ~(size_t)63;
}

/* Hash slots for @max_rules rules: a power of two, at most half full. */
static uint32_t rule_slots_for(uint32_t max_rules)
{
	uint32_t s = 64;

	while (s < 2 * (uint64_t)max_rules)
		s <<= 1;
	return s;
}

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 31;
	x *= 0x9e3779b97f4a7c15ull;
	x ^= x >> 29;
	x *= 0xbf58476d1ce4e5b9ull;
	return x ^ (x >> 32);
}

/* Bytes an image of @size takes in its own mapping. */
static size_t map_bytes(size_t size)
{
	return (size + HUGE_PAGE - 1) & ~(size_t)(HUGE_PAGE - 1);
}

/*
 * Memory for an image: its own anonymous mapping, 2 MiB aligned and
 * advised for transparent huge pages, zero-filled (pages never written,
 * such as the tbl24 of a small IPv4 table, are never backed by memory).
 */
static void *image_alloc(size_t size)
{
	size_t bytes = map_bytes(size);
	uint8_t *p =
	    (uint8_t *)mmap(NULL, bytes + HUGE_PAGE, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint8_t *a;

	if (p == (uint8_t *)MAP_FAILED)
		return NULL;
	a = (uint8_t *)(((uintptr_t)p + HUGE_PAGE - 1) &
			~(uintptr_t)(HUGE_PAGE - 1));
	if (a > p)
		munmap(p, (size_t)(a - p));
	if (a + bytes < p + bytes + HUGE_PAGE)
		munmap(a + bytes,
		       (size_t)(p + bytes + HUGE_PAGE - (a + bytes)));
#ifdef MADV_HUGEPAGE
	(void)madvise(a, bytes, MADV_HUGEPAGE);
#endif
	return a;
}

static void image_free(void *mem, size_t size)
{
	if (mem)
		munmap(mem, map_bytes(size));
}

static int check_mem(void *mem, size_t size, size_t need,
		     struct dpflow_error *err)
{
	if (!mem || ((uintptr_t)mem & (DPFLOW_CACHE_LINE - 1)))
		return dpflow_error_set(err, EINVAL, "mem",
					"image memory %p is not 64-byte "
					"aligned",
					mem);
	if (size < need)
		return dpflow_error_set(err, EINVAL, "size",
					"%zu bytes given, the image needs %zu",
					size, need);
	return 0;
}

static int image_copy(void *dst, size_t dst_size, const void *src,
		      uint64_t size, struct dpflow_error *err)
{
	if (!dst || ((uintptr_t)dst & (DPFLOW_CACHE_LINE - 1)))
		return dpflow_error_set(err, EINVAL, "dst",
					"destination %p is not 64-byte "
					"aligned",
					dst);
	if (dst_size < size)
		return dpflow_error_set(err, EINVAL, "dst_size",
					"%zu bytes given, the image has %llu",
					dst_size, (unsigned long long)size);
	memcpy(dst, src, size);
	return 0;
}

/* ---------------------------------------------------------------- IPv4 */

/*
 * One change to a set of entries, as both kinds apply it. OP_INSERT:
 * entries whose depth is below `dep` take (v, dep). OP_REPLACE: entries
 * whose depth is `dep` take (v, new_dep). Depths are prefix length + 1,
 * 0 for no rule.
 */
enum { OP_INSERT, OP_REPLACE };

struct lpm_op {
	unsigned kind;
	uint8_t dep, new_dep;
	uint32_t v;
};

static bool op_hits(const struct lpm_op *op, uint32_t dep)
{
	return op->kind == OP_INSERT ? dep < op->dep : dep == op->dep;
}

static uint8_t op_dep(const struct lpm_op *op)
{
	return op->kind == OP_INSERT ? op->dep : op->new_dep;
}

struct lpm4_layout {
	size_t tbl24_off, tbl8_off, dep24_off, dep8_off, rules_off, size;
	uint32_t max_groups, rule_slots;
};

uint32_t dpflow_lpm4_groups_for(uint32_t max_rules)
{
	uint64_t g = (uint64_t)max_rules / 4 + 256;

	return g > DPFLOW_LPM4_GROUPS_MAX ? DPFLOW_LPM4_GROUPS_MAX
					  : (uint32_t)g;
}

static int lpm4_layout(const struct dpflow_lpm4_params *p,
		       struct lpm4_layout *l, struct dpflow_error *err)
{
	size_t off;

	memset(l, 0, sizeof(*l));
	if (!p)
		return dpflow_error_set(err, EINVAL, "params",
					"no parameters given");
	if (p->max_rules < 1 || p->max_rules > DPFLOW_LPM_RULES_MAX)
		return dpflow_error_set(err, EINVAL, "max_rules",
					"max_rules %u out of range 1..%u",
					p->max_rules, DPFLOW_LPM_RULES_MAX);
	if (p->max_groups > DPFLOW_LPM4_GROUPS_MAX)
		return dpflow_error_set(err, EINVAL, "max_groups",
					"max_groups %u over %u", p->max_groups,
					DPFLOW_LPM4_GROUPS_MAX);
	l->max_groups = p->max_groups ? p->max_groups
				      : dpflow_lpm4_groups_for(p->max_rules);
	l->rule_slots = rule_slots_for(p->max_rules);
	off = align64(sizeof(struct dpflow_lpm4_image));
	l->tbl24_off = off;
	off = align64(off + (size_t)DPFLOW_LPM4_TBL24_SIZE * sizeof(uint32_t));
	l->tbl8_off = off;
	off = align64(off + (size_t)l->max_groups * DPFLOW_LPM4_GRP_SIZE *
				sizeof(uint32_t));
	l->dep24_off = off;
	off = align64(off + DPFLOW_LPM4_TBL24_SIZE);
	l->dep8_off = off;
	off = align64(off + (size_t)l->max_groups * DPFLOW_LPM4_GRP_SIZE);
	l->rules_off = off;
	l->size = align64(off + (size_t)l->rule_slots *
				    sizeof(struct dpflow_lpm4_rule));
	return 0;
}

size_t dpflow_lpm4_image_size(const struct dpflow_lpm4_params *p)
{
	struct lpm4_layout l;

	return lpm4_layout(p, &l, NULL) ? 0 : l.size;
}

static uint32_t *tbl24(struct dpflow_lpm4_image *t)
{
	return (uint32_t *)(void *)((uint8_t *)t + t->tbl24_off);
}

/* tbl24 entry @s (stored complemented: see table_lpm_impl.h). */
static uint32_t slot_get(struct dpflow_lpm4_image *t, uint32_t s)
{
	return ~tbl24(t)[s];
}

static void slot_set(struct dpflow_lpm4_image *t, uint32_t s, uint32_t e)
{
	tbl24(t)[s] = ~e;
}

static uint32_t *tbl8(struct dpflow_lpm4_image *t, uint32_t g)
{
	return (uint32_t *)(void *)((uint8_t *)t + t->tbl8_off) +
	       (size_t)g * DPFLOW_LPM4_GRP_SIZE;
}

static uint8_t *dep24(struct dpflow_lpm4_image *t)
{
	return (uint8_t *)t + t->dep24_off;
}

static uint8_t *dep8(struct dpflow_lpm4_image *t, uint32_t g)
{
	return (uint8_t *)t + t->dep8_off + (size_t)g * DPFLOW_LPM4_GRP_SIZE;
}

static struct dpflow_lpm4_rule *rules4(struct dpflow_lpm4_image *t)
{
	return (struct dpflow_lpm4_rule *)(void *)((uint8_t *)t + t->rules_off);
}

static const struct dpflow_lpm4_rule *
rules4_c(const struct dpflow_lpm4_image *t)
{
	const uint8_t *b = (const uint8_t *)t;

	return (const struct dpflow_lpm4_rule *)(const void *)(b +
							       t->rules_off);
}

static uint32_t mask4(unsigned len)
{
	return len ? 0xffffffffu << (32 - len) : 0;
}

/* Can @v sit in tbl24 itself (not needing a group)? */
static bool inline_value(uint32_t v)
{
	return v < DPFLOW_LPM4_EXT || v == DPFLOW_TABLE_MISS;
}

/* @zeroed: @mem is known to hold zeros (a fresh mapping). */
static int lpm4_init(void *mem, size_t size, const struct dpflow_lpm4_params *p,
		     bool zeroed, struct dpflow_error *err)
{
	struct dpflow_lpm4_image *t = (struct dpflow_lpm4_image *)mem;
	struct lpm4_layout l;
	int rc = lpm4_layout(p, &l, err);

	if (rc || (rc = check_mem(mem, size, l.size, err)))
		return rc;
	/* all zero is the empty table: tbl24 holds complemented entries */
	if (!zeroed)
		memset(mem, 0, l.size);
	t->magic = DPFLOW_LPM4_MAGIC;
	t->version = DPFLOW_LPM_VERSION;
	t->size = l.size;
	t->tbl24_off = l.tbl24_off;
	t->tbl8_off = l.tbl8_off;
	t->dep24_off = l.dep24_off;
	t->dep8_off = l.dep8_off;
	t->rules_off = l.rules_off;
	t->max_groups = l.max_groups;
	t->grp_free = NO_GROUP;
	t->max_rules = p->max_rules;
	t->rule_slots = l.rule_slots;
	return 0;
}

int dpflow_lpm4_image_init(void *mem, size_t size,
			   const struct dpflow_lpm4_params *p,
			   struct dpflow_error *err)
{
	return lpm4_init(mem, size, p, false, err);
}

int dpflow_lpm4_image_check(const void *mem, size_t size,
			    struct dpflow_error *err)
{
	const struct dpflow_lpm4_image *t =
	    (const struct dpflow_lpm4_image *)mem;
	struct dpflow_lpm4_params p;
	struct lpm4_layout l;

	if (!mem || ((uintptr_t)mem & (DPFLOW_CACHE_LINE - 1)))
		return dpflow_error_set(err, EINVAL, "mem",
					"image memory is not 64-byte aligned");
	if (size < sizeof(*t))
		return dpflow_error_set(err, EINVAL, "size",
					"%zu bytes hold no image header", size);
	if (t->magic != DPFLOW_LPM4_MAGIC || t->version != DPFLOW_LPM_VERSION)
		return dpflow_error_set(err, EINVAL, "magic",
					"not an IPv4 LPM image (magic %#x, "
					"version %u)",
					t->magic, t->version);
	p.max_rules = t->max_rules;
	p.max_groups = t->max_groups;
	if (lpm4_layout(&p, &l, err))
		return -EINVAL;
	if (t->size != l.size || t->size > size)
		return dpflow_error_set(err, EINVAL, "size",
					"image size %llu, expected %zu within "
					"%zu bytes",
					(unsigned long long)t->size, l.size,
					size);
	if (t->tbl24_off != l.tbl24_off || t->tbl8_off != l.tbl8_off ||
	    t->dep24_off != l.dep24_off || t->dep8_off != l.dep8_off ||
	    t->rules_off != l.rules_off || t->rule_slots != l.rule_slots)
		return dpflow_error_set(err, EINVAL, "offsets",
					"section offsets do not match the "
					"parameters");
	if (t->n_rules > t->max_rules || t->grp_unused > t->max_groups ||
	    t->n_groups > t->grp_unused ||
	    (t->grp_free != NO_GROUP && t->grp_free >= t->grp_unused))
		return dpflow_error_set(err, EINVAL, "counts",
					"counts out of range (rules %u/%u, "
					"groups %u/%u/%u)",
					t->n_rules, t->max_rules, t->n_groups,
					t->grp_unused, t->max_groups);
	return 0;
}

/* --- IPv4 rule hash (linear probing, backward-shift deletion) --- */

static uint32_t hash4(uint32_t addr, unsigned len)
{
	return (uint32_t)mix64((uint64_t)addr << 8 | len);
}

static const struct dpflow_lpm4_rule *
rule4_find(const struct dpflow_lpm4_image *t, uint32_t addr, unsigned len)
{
	const struct dpflow_lpm4_rule *r = rules4_c(t);
	uint32_t mask = t->rule_slots - 1, i = hash4(addr, len) & mask;

	while (r[i].tag) {
		if (r[i].tag == len + 1 && r[i].addr == addr)
			return &r[i];
		i = (i + 1) & mask;
	}
	return NULL;
}

static void rule4_insert(struct dpflow_lpm4_image *t, uint32_t addr,
			 unsigned len, uint32_t value)
{
	struct dpflow_lpm4_rule *r = rules4(t);
	uint32_t mask = t->rule_slots - 1, i = hash4(addr, len) & mask;

	while (r[i].tag)
		i = (i + 1) & mask;
	r[i].addr = addr;
	r[i].value = value;
	r[i].tag = len + 1;
	t->n_rules++;
}

static void rule4_remove(struct dpflow_lpm4_image *t, uint32_t i)
{
	struct dpflow_lpm4_rule *r = rules4(t);
	uint32_t mask = t->rule_slots - 1, j = i;

	for (;;) {
		uint32_t home;

		j = (j + 1) & mask;
		if (!r[j].tag)
			break;
		home = hash4(r[j].addr, r[j].tag - 1) & mask;
		/* r[j] may fill the hole at i unless home lies in (i, j] */
		if (((j - home) & mask) >= ((j - i) & mask)) {
			r[i] = r[j];
			i = j;
		}
	}
	memset(&r[i], 0, sizeof(r[i]));
	t->n_rules--;
}

/* The longest rule shorter than @len covering @addr: value and depth. */
static void parent4(const struct dpflow_lpm4_image *t, uint32_t addr,
		    unsigned len, uint32_t *v, uint8_t *dep)
{
	for (unsigned l = len; l-- > 0;) {
		const struct dpflow_lpm4_rule *r =
		    rule4_find(t, addr & mask4(l), l);

		if (r) {
			*v = r->value;
			*dep = (uint8_t)(l + 1);
			return;
		}
	}
	*v = DPFLOW_TABLE_MISS;
	*dep = 0;
}

/* --- IPv4 groups --- */

static uint32_t grp4_alloc(struct dpflow_lpm4_image *t)
{
	uint32_t g = t->grp_free;

	if (g != NO_GROUP)
		t->grp_free = tbl8(t, g)[0];
	else
		g = t->grp_unused++;
	t->n_groups++;
	return g;
}

static void grp4_release(struct dpflow_lpm4_image *t, uint32_t g)
{
	memset(tbl8(t, g), 0, DPFLOW_LPM4_GRP_SIZE * sizeof(uint32_t));
	memset(dep8(t, g), 0, DPFLOW_LPM4_GRP_SIZE);
	tbl8(t, g)[0] = t->grp_free;
	t->grp_free = g;
	t->n_groups--;
}

/*
 * Can the group @g be folded into its tbl24 entry? Only when one rule (or
 * none) covers all of it, and its value can sit in tbl24.
 */
static bool grp4_foldable(struct dpflow_lpm4_image *t, uint32_t g)
{
	const uint32_t *v = tbl8(t, g);
	const uint8_t *d = dep8(t, g);

	if (d[0] > 25 || !inline_value(v[0]))
		return false;
	for (unsigned i = 1; i < DPFLOW_LPM4_GRP_SIZE; i++)
		if (v[i] != v[0] || d[i] != d[0])
			return false;
	return true;
}

/*
 * Groups that applying @op to entries [lo, hi] of /24 slot @s would take:
 * an inline slot the op changes needs one when the change covers part of
 * it or leaves a value that cannot sit in tbl24.
 */
static uint32_t slot_need(struct dpflow_lpm4_image *t, uint32_t s,
			  const struct lpm_op *op, uint32_t lo, uint32_t hi)
{
	if (dpflow_lpm4_is_ext(slot_get(t, s)) || !op_hits(op, dep24(t)[s]))
		return 0;
	return lo != 0 || hi != 255 || !inline_value(op->v);
}

/* Apply @op to entries [lo, hi] of /24 slot @s (groups checked). */
static void slot_apply(struct dpflow_lpm4_image *t, uint32_t s,
		       const struct lpm_op *op, uint32_t lo, uint32_t hi)
{
	uint32_t e = slot_get(t, s), g, *v;
	uint8_t *d;

	if (!dpflow_lpm4_is_ext(e)) {
		uint8_t *sd = &dep24(t)[s];

		if (!op_hits(op, *sd))
			return;
		if (lo == 0 && hi == 255 && inline_value(op->v)) {
			slot_set(t, s, op->v);
			*sd = op_dep(op);
			return;
		}
		g = grp4_alloc(t);
		v = tbl8(t, g);
		d = dep8(t, g);
		for (unsigned i = 0; i < DPFLOW_LPM4_GRP_SIZE; i++) {
			v[i] = e;
			d[i] = *sd;
		}
		e = DPFLOW_LPM4_EXT | g;
		slot_set(t, s, e);
		*sd = 0;
	}
	g = e & ~DPFLOW_LPM4_EXT;
	v = tbl8(t, g);
	d = dep8(t, g);
	for (uint32_t i = lo; i <= hi; i++) {
		if (op_hits(op, d[i])) {
			v[i] = op->v;
			d[i] = op_dep(op);
		}
	}
	if (grp4_foldable(t, g)) {
		slot_set(t, s, v[0]);
		dep24(t)[s] = d[0];
		grp4_release(t, g);
	}
}

/* The /24 slots of /@len at @addr, and the entries of each it covers. */
struct span4 {
	uint32_t s0, count, lo, hi;
};

static struct span4 span4_of(uint32_t addr, unsigned len)
{
	struct span4 sp;

	sp.s0 = addr >> 8;
	if (len > 24) {
		sp.count = 1;
		sp.lo = addr & 0xffu;
		sp.hi = sp.lo + (1u << (32 - len)) - 1;
	} else {
		sp.count = 1u << (24 - len);
		sp.lo = 0;
		sp.hi = 255;
	}
	return sp;
}

/* Groups @op needs over @sp; stops counting past @limit. */
static uint32_t span_need(struct dpflow_lpm4_image *t, const struct span4 *sp,
			  const struct lpm_op *op, uint32_t limit)
{
	uint32_t need = 0;

	/* whole inline slots taking a value that fits need nothing */
	if (sp->lo == 0 && sp->hi == 255 && inline_value(op->v))
		return 0;
	for (uint32_t s = sp->s0; s < sp->s0 + sp->count && need <= limit; s++)
		need += slot_need(t, s, op, sp->lo, sp->hi);
	return need;
}

/* Check the groups @op needs over /@len at @addr, then apply it. */
static int apply4(struct dpflow_lpm4_image *t, uint32_t addr, unsigned len,
		  const struct lpm_op *op, struct dpflow_error *err)
{
	struct span4 sp = span4_of(addr, len);
	uint32_t avail = t->max_groups - t->n_groups;
	uint32_t need = span_need(t, &sp, op, avail);

	if (need > avail)
		return dpflow_error_set(
		    err, ENOSPC, "max_groups",
		    "%u.%u.%u.%u/%u needs %s%u groups, %u of %u free",
		    addr >> 24, (addr >> 16) & 0xff, (addr >> 8) & 0xff,
		    addr & 0xff, len, need > avail ? "over " : "", need, avail,
		    t->max_groups);
	for (uint32_t s = sp.s0; s < sp.s0 + sp.count; s++)
		slot_apply(t, s, op, sp.lo, sp.hi);
	return 0;
}

static int check_prefix4(uint32_t addr, unsigned len, struct dpflow_error *err)
{
	if (len > 32)
		return dpflow_error_set(err, EINVAL, "len",
					"prefix length %u over 32", len);
	if (addr & ~mask4(len))
		return dpflow_error_set(err, EINVAL, "addr",
					"%u.%u.%u.%u/%u has bits set past the "
					"prefix length",
					addr >> 24, (addr >> 16) & 0xff,
					(addr >> 8) & 0xff, addr & 0xff, len);
	return 0;
}

int dpflow_lpm4_add(struct dpflow_lpm4_image *t, uint32_t addr, unsigned len,
		    uint32_t value, struct dpflow_error *err)
{
	struct lpm_op op;
	int rc = check_prefix4(addr, len, err);

	if (rc)
		return rc;
	if (value == DPFLOW_TABLE_MISS)
		return dpflow_error_set(err, EINVAL, "value",
					"value %#x is DPFLOW_TABLE_MISS",
					value);
	if (rule4_find(t, addr, len))
		return dpflow_error_set(err, EEXIST, "addr",
					"%u.%u.%u.%u/%u is already present",
					addr >> 24, (addr >> 16) & 0xff,
					(addr >> 8) & 0xff, addr & 0xff, len);
	if (t->n_rules >= t->max_rules)
		return dpflow_error_set(err, ENOSPC, "max_rules",
					"table holds max_rules %u prefixes",
					t->max_rules);
	op.kind = OP_INSERT;
	op.dep = (uint8_t)(len + 1);
	op.new_dep = op.dep;
	op.v = value;
	if ((rc = apply4(t, addr, len, &op, err)))
		return rc;
	rule4_insert(t, addr, len, value);
	return 0;
}

static int present4(const struct dpflow_lpm4_image *t, uint32_t addr,
		    unsigned len, const struct dpflow_lpm4_rule **r,
		    struct dpflow_error *err)
{
	int rc = check_prefix4(addr, len, err);

	if (rc)
		return rc;
	*r = rule4_find(t, addr, len);
	if (!*r)
		return dpflow_error_set(err, ENOENT, "addr",
					"%u.%u.%u.%u/%u is not present",
					addr >> 24, (addr >> 16) & 0xff,
					(addr >> 8) & 0xff, addr & 0xff, len);
	return 0;
}

int dpflow_lpm4_delete(struct dpflow_lpm4_image *t, uint32_t addr, unsigned len,
		       uint32_t *old_value, struct dpflow_error *err)
{
	const struct dpflow_lpm4_rule *r;
	struct lpm_op op;
	uint32_t old;
	int rc = present4(t, addr, len, &r, err);

	if (rc)
		return rc;
	old = r->value;
	op.kind = OP_REPLACE;
	op.dep = (uint8_t)(len + 1);
	parent4(t, addr, len, &op.v, &op.new_dep);
	if ((rc = apply4(t, addr, len, &op, err)))
		return rc;
	rule4_remove(t, (uint32_t)(r - rules4_c(t)));
	if (old_value)
		*old_value = old;
	return 0;
}

int dpflow_lpm4_update(struct dpflow_lpm4_image *t, uint32_t addr, unsigned len,
		       uint32_t value, struct dpflow_error *err)
{
	const struct dpflow_lpm4_rule *r;
	struct lpm_op op;
	int rc = check_prefix4(addr, len, err);

	if (rc)
		return rc;
	if (value == DPFLOW_TABLE_MISS)
		return dpflow_error_set(err, EINVAL, "value",
					"value %#x is DPFLOW_TABLE_MISS",
					value);
	if ((rc = present4(t, addr, len, &r, err)))
		return rc;
	op.kind = OP_REPLACE;
	op.dep = (uint8_t)(len + 1);
	op.new_dep = op.dep;
	op.v = value;
	if ((rc = apply4(t, addr, len, &op, err)))
		return rc;
	rules4(t)[r - rules4_c(t)].value = value;
	return 0;
}

int dpflow_lpm4_find(const struct dpflow_lpm4_image *t, uint32_t addr,
		     unsigned len, uint32_t *value)
{
	const struct dpflow_lpm4_rule *r;
	int rc = present4(t, addr, len, &r, NULL);

	if (!rc && value)
		*value = r->value;
	return rc;
}

uint32_t dpflow_lpm4_count(const struct dpflow_lpm4_image *t)
{
	return t->n_rules;
}

void dpflow_lpm4_clear(struct dpflow_lpm4_image *t)
{
	struct dpflow_lpm4_params p;

	p.max_rules = t->max_rules;
	p.max_groups = t->max_groups;
	(void)dpflow_lpm4_image_init(t, t->size, &p, NULL);
}

void dpflow_lpm4_info(const struct dpflow_lpm4_image *t,
		      struct dpflow_lpm_info *info)
{
	memset(info, 0, sizeof(*info));
	info->max_rules = t->max_rules;
	info->n_rules = t->n_rules;
	info->max_groups = t->max_groups;
	info->n_groups = t->n_groups;
	info->size = t->size;
}

size_t dpflow_lpm4_image_bytes(const struct dpflow_lpm4_image *t)
{
	return t->size;
}

struct dpflow_lpm4_image *dpflow_lpm4_create(const struct dpflow_lpm4_params *p,
					     struct dpflow_error *err)
{
	size_t size = dpflow_lpm4_image_size(p);
	void *mem;

	if (!size) {
		struct lpm4_layout l;

		lpm4_layout(p, &l, err);
		return NULL;
	}
	mem = image_alloc(size);
	if (!mem) {
		dpflow_error_set(err, ENOMEM, "max_rules",
				 "cannot allocate %zu bytes", size);
		return NULL;
	}
	if (lpm4_init(mem, size, p, true, err)) {
		image_free(mem, size);
		return NULL;
	}
	return (struct dpflow_lpm4_image *)mem;
}

struct dpflow_lpm4_image *dpflow_lpm4_clone(const struct dpflow_lpm4_image *src,
					    struct dpflow_error *err)
{
	void *mem = image_alloc(src->size);

	if (!mem) {
		dpflow_error_set(err, ENOMEM, "size",
				 "cannot allocate %llu bytes",
				 (unsigned long long)src->size);
		return NULL;
	}
	memcpy(mem, src, src->size);
	return (struct dpflow_lpm4_image *)mem;
}

void dpflow_lpm4_destroy(struct dpflow_lpm4_image *t)
{
	if (t)
		image_free(t, t->size);
}

int dpflow_lpm4_image_copy(void *dst, size_t dst_size,
			   const struct dpflow_lpm4_image *src,
			   struct dpflow_error *err)
{
	return image_copy(dst, dst_size, src, src->size, err);
}

/* --- IPv4 verification (tests, debugging) --- */

/* Does a rule /@dep-1 at @addr (masked) exist with value @v? */
static bool rule4_backs(const struct dpflow_lpm4_image *t, uint32_t addr,
			uint8_t dep, uint32_t v)
{
	const struct dpflow_lpm4_rule *r;

	if (dep == 0)
		return v == DPFLOW_TABLE_MISS;
	if (dep > 33)
		return false;
	r = rule4_find(t, addr & mask4(dep - 1u), dep - 1u);
	return r && r->value == v;
}

int dpflow_lpm4_verify(const struct dpflow_lpm4_image *t,
		       struct dpflow_error *err)
{
	struct dpflow_lpm4_image *w = (struct dpflow_lpm4_image *)(uintptr_t)t;
	const struct dpflow_lpm4_rule *r = rules4_c(t);
	uint32_t groups = 0, free_n = 0, rules = 0;
	uint8_t *seen;
	int rc = dpflow_lpm4_image_check(t, t->size, err);

	if (rc)
		return rc;
	seen = (uint8_t *)calloc((size_t)t->grp_unused + 1, 1);
	if (!seen)
		return dpflow_error_set(err, ENOMEM, "groups",
					"no memory to verify");
	for (uint32_t s = 0; s < DPFLOW_LPM4_TBL24_SIZE && !rc; s++) {
		uint32_t e = slot_get(w, s), g;

		if (!dpflow_lpm4_is_ext(e)) {
			if (dep24(w)[s] > 25 ||
			    !rule4_backs(t, s << 8, dep24(w)[s], e))
				rc = dpflow_error_set(
				    err, EINVAL, "tbl24",
				    "slot %#x: value %#x depth %u has no rule",
				    s, e, dep24(w)[s]);
			continue;
		}
		g = e & ~DPFLOW_LPM4_EXT;
		if (g >= t->grp_unused || seen[g] || dep24(w)[s]) {
			rc = dpflow_error_set(
			    err, EINVAL, "tbl24",
			    "slot %#x: bad or shared group %u", s, g);
			break;
		}
		seen[g] = 1;
		groups++;
		if (grp4_foldable(w, g))
			rc = dpflow_error_set(err, EINVAL, "tbl8",
					      "group %u (slot %#x) could be "
					      "folded",
					      g, s);
		for (uint32_t i = 0; i < DPFLOW_LPM4_GRP_SIZE && !rc; i++)
			if (!rule4_backs(t, s << 8 | i, dep8(w, g)[i],
					 tbl8(w, g)[i]))
				rc = dpflow_error_set(
				    err, EINVAL, "tbl8",
				    "%u.%u.%u.%u: value %#x depth %u has no "
				    "rule",
				    s >> 16, (s >> 8) & 0xff, s & 0xff, i,
				    tbl8(w, g)[i], dep8(w, g)[i]);
	}
	for (uint32_t g = t->grp_free; !rc && g != NO_GROUP;) {
		if (g >= t->grp_unused || seen[g]) {
			rc = dpflow_error_set(err, EINVAL, "groups",
					      "free list broken at %u", g);
		} else {
			seen[g] = 1;
			free_n++;
			g = tbl8(w, g)[0];
		}
	}
	free(seen);
	if (rc)
		return rc;
	for (uint32_t i = 0; i < t->rule_slots; i++)
		rules += r[i].tag != 0;
	if (groups != t->n_groups || free_n + groups != t->grp_unused ||
	    rules != t->n_rules)
		return dpflow_error_set(err, EINVAL, "counts",
					"groups %u/%u (+%u free of %u) rules "
					"%u/%u",
					groups, t->n_groups, free_n,
					t->grp_unused, rules, t->n_rules);
	return 0;
}

uint32_t dpflow_lpm4_lookup(const struct dpflow_lpm4_image *t, uint32_t addr)
{
	return dpflow_lpm4_lookup_impl(t, addr);
}

uint32_t dpflow_lpm4_lookup_bulk(const struct dpflow_lpm4_image *t,
				 const uint32_t *addrs, uint32_t n,
				 uint32_t *values)
{
	return dpflow_lpm4_lookup_bulk_impl(t, addrs, n, values);
}

/* ---------------------------------------------------------------- IPv6 */

struct lpm6_layout {
	size_t tbl_off, grp_off, rules_off, size;
	uint32_t max_groups, rule_slots, key_bytes;
};

static int lpm6_layout(const struct dpflow_lpm6_params *p,
		       struct lpm6_layout *l, struct dpflow_error *err)
{
	size_t off;
	uint64_t g;

	memset(l, 0, sizeof(*l));
	if (!p)
		return dpflow_error_set(err, EINVAL, "params",
					"no parameters given");
	if (p->max_rules < 1 || p->max_rules > DPFLOW_LPM_RULES_MAX)
		return dpflow_error_set(err, EINVAL, "max_rules",
					"max_rules %u out of range 1..%u",
					p->max_rules, DPFLOW_LPM_RULES_MAX);
	if (p->max_groups > DPFLOW_LPM6_GROUPS_MAX)
		return dpflow_error_set(err, EINVAL, "max_groups",
					"max_groups %u over %u", p->max_groups,
					DPFLOW_LPM6_GROUPS_MAX);
	l->key_bytes = p->key_bytes ? p->key_bytes : DPFLOW_LPM6_KEY_DEFAULT;
	if (l->key_bytes < DPFLOW_LPM6_KEY_DEFAULT ||
	    l->key_bytes > DPFLOW_LPM6_KEY_MAX)
		return dpflow_error_set(err, EINVAL, "key_bytes",
					"key_bytes %u out of range %u..%u",
					p->key_bytes, DPFLOW_LPM6_KEY_DEFAULT,
					DPFLOW_LPM6_KEY_MAX);
	/* enough for /48s of the address that share nothing, each behind
	 * its own exact bytes (key_bytes - 16 more levels) */
	g = p->max_groups
		? p->max_groups
		: (uint64_t)(4 + l->key_bytes - DPFLOW_LPM6_KEY_DEFAULT) *
			  p->max_rules +
		      64;
	l->max_groups =
	    g > DPFLOW_LPM6_GROUPS_MAX ? DPFLOW_LPM6_GROUPS_MAX : (uint32_t)g;
	l->rule_slots = rule_slots_for(p->max_rules);
	off = align64(sizeof(struct dpflow_lpm6_image));
	l->tbl_off = off;
	off = align64(off +
		      DPFLOW_LPM6_TBL_SIZE * sizeof(struct dpflow_lpm6_ent));
	l->grp_off = off;
	off = align64(off + (size_t)l->max_groups * DPFLOW_LPM6_GRP_SIZE *
				sizeof(struct dpflow_lpm6_ent));
	l->rules_off = off;
	l->size = align64(off + (size_t)l->rule_slots *
				    sizeof(struct dpflow_lpm6_rule));
	return 0;
}

size_t dpflow_lpm6_image_size(const struct dpflow_lpm6_params *p)
{
	struct lpm6_layout l;

	return lpm6_layout(p, &l, NULL) ? 0 : l.size;
}

static struct dpflow_lpm6_ent *tbl6(struct dpflow_lpm6_image *t)
{
	return (struct dpflow_lpm6_ent *)(void *)((uint8_t *)t + t->tbl_off);
}

static struct dpflow_lpm6_ent *grp6(struct dpflow_lpm6_image *t, uint32_t g)
{
	return (struct dpflow_lpm6_ent *)(void *)((uint8_t *)t + t->grp_off) +
	       (size_t)g * DPFLOW_LPM6_GRP_SIZE;
}

static const struct dpflow_lpm6_rule *
rules6_c(const struct dpflow_lpm6_image *t)
{
	const uint8_t *b = (const uint8_t *)t;

	return (const struct dpflow_lpm6_rule *)(const void *)(b +
							       t->rules_off);
}

static struct dpflow_lpm6_rule *rules6(struct dpflow_lpm6_image *t)
{
	return (struct dpflow_lpm6_rule *)(void *)((uint8_t *)t + t->rules_off);
}

/* @zeroed: @mem is known to hold zeros (a fresh mapping). */
static int lpm6_init(void *mem, size_t size, const struct dpflow_lpm6_params *p,
		     bool zeroed, struct dpflow_error *err)
{
	struct dpflow_lpm6_image *t = (struct dpflow_lpm6_image *)mem;
	struct dpflow_lpm6_ent *tbl;
	struct lpm6_layout l;
	int rc = lpm6_layout(p, &l, err);

	if (rc || (rc = check_mem(mem, size, l.size, err)))
		return rc;
	if (!zeroed)
		memset(mem, 0, l.size);
	t->magic = DPFLOW_LPM6_MAGIC;
	t->version = DPFLOW_LPM_VERSION;
	t->size = l.size;
	t->tbl_off = l.tbl_off;
	t->grp_off = l.grp_off;
	t->key_bytes = l.key_bytes;
	t->rules_off = l.rules_off;
	t->max_groups = l.max_groups;
	t->grp_free = NO_GROUP;
	t->max_rules = p->max_rules;
	t->rule_slots = l.rule_slots;
	tbl = tbl6(t);
	for (uint32_t i = 0; i < DPFLOW_LPM6_TBL_SIZE; i++)
		tbl[i].v = DPFLOW_TABLE_MISS;
	return 0;
}

int dpflow_lpm6_image_init(void *mem, size_t size,
			   const struct dpflow_lpm6_params *p,
			   struct dpflow_error *err)
{
	return lpm6_init(mem, size, p, false, err);
}

int dpflow_lpm6_image_check(const void *mem, size_t size,
			    struct dpflow_error *err)
{
	const struct dpflow_lpm6_image *t =
	    (const struct dpflow_lpm6_image *)mem;
	struct dpflow_lpm6_params p;
	struct lpm6_layout l;

	if (!mem || ((uintptr_t)mem & (DPFLOW_CACHE_LINE - 1)))
		return dpflow_error_set(err, EINVAL, "mem",
					"image memory is not 64-byte aligned");
	if (size < sizeof(*t))
		return dpflow_error_set(err, EINVAL, "size",
					"%zu bytes hold no image header", size);
	if (t->magic != DPFLOW_LPM6_MAGIC || t->version != DPFLOW_LPM_VERSION)
		return dpflow_error_set(err, EINVAL, "magic",
					"not an IPv6 LPM image (magic %#x, "
					"version %u)",
					t->magic, t->version);
	p.max_rules = t->max_rules;
	p.max_groups = t->max_groups;
	p.key_bytes = t->key_bytes;
	if (!t->key_bytes)
		return dpflow_error_set(err, EINVAL, "key_bytes",
					"key_bytes 0 in an image");
	if (lpm6_layout(&p, &l, err))
		return -EINVAL;
	if (t->size != l.size || t->size > size)
		return dpflow_error_set(err, EINVAL, "size",
					"image size %llu, expected %zu within "
					"%zu bytes",
					(unsigned long long)t->size, l.size,
					size);
	if (t->tbl_off != l.tbl_off || t->grp_off != l.grp_off ||
	    t->rules_off != l.rules_off || t->rule_slots != l.rule_slots)
		return dpflow_error_set(err, EINVAL, "offsets",
					"section offsets do not match the "
					"parameters");
	if (t->n_rules > t->max_rules || t->grp_unused > t->max_groups ||
	    t->n_groups > t->grp_unused ||
	    (t->grp_free != NO_GROUP && t->grp_free >= t->grp_unused))
		return dpflow_error_set(err, EINVAL, "counts",
					"counts out of range (rules %u/%u, "
					"groups %u/%u/%u)",
					t->n_rules, t->max_rules, t->n_groups,
					t->grp_unused, t->max_groups);
	return 0;
}

/* --- Trie keys as six host-order words (zero past key_bytes) --- */

#define KEY_WORDS (DPFLOW_LPM6_KEY_MAX / 4)

struct a6 {
	uint32_t w[KEY_WORDS];
};

/* The @kb bytes at @addr. */
static struct a6 a6_load(const uint8_t *addr, unsigned kb)
{
	uint8_t buf[DPFLOW_LPM6_KEY_MAX] = {0};
	struct a6 a;

	memcpy(buf, addr, kb);
	for (unsigned i = 0; i < KEY_WORDS; i++)
		a.w[i] = dpflow_lpm6_w(buf, i);
	return a;
}

static struct a6 a6_mask(struct a6 a, unsigned len)
{
	for (unsigned i = 0; i < KEY_WORDS; i++) {
		unsigned bits = len > 32 * i ? len - 32 * i : 0;

		a.w[i] &= bits >= 32 ? 0xffffffffu : mask4(bits);
	}
	return a;
}

static bool a6_eq(const uint32_t *x, const uint32_t *y)
{
	return x[0] == y[0] && x[1] == y[1] && x[2] == y[2] && x[3] == y[3] &&
	       x[4] == y[4] && x[5] == y[5];
}

/* @a as words in hex ("20010db8:00000000:..."), key_bytes of @t. */
struct key_text {
	char s[KEY_WORDS * 9];
};

static struct key_text a6_text(const struct dpflow_lpm6_image *t,
			       const struct a6 *a)
{
	static const char hex[] = "0123456789abcdef";
	struct key_text kt;
	unsigned words = (t->key_bytes + 3) / 4, o = 0;

	for (unsigned i = 0; i < words; i++) {
		if (i)
			kt.s[o++] = ':';
		for (unsigned n = 8; n-- > 0;)
			kt.s[o++] = hex[(a->w[i] >> (4 * n)) & 0xfu];
	}
	kt.s[o] = '\0';
	return kt;
}

/* Byte @i (0..key_bytes - 1) of @a. */
static uint32_t a6_byte(const struct a6 *a, unsigned i)
{
	return (a->w[i / 4] >> (24 - 8 * (i % 4))) & 0xffu;
}

static uint32_t hash6(const struct a6 *a, unsigned len)
{
	uint64_t h = mix64(((uint64_t)a->w[0] << 32 | a->w[1]) ^ len);

	h = mix64(h ^ ((uint64_t)a->w[2] << 32 | a->w[3]));
	return (uint32_t)mix64(h ^ ((uint64_t)a->w[4] << 32 | a->w[5]));
}

static const struct dpflow_lpm6_rule *
rule6_find(const struct dpflow_lpm6_image *t, const struct a6 *a, unsigned len)
{
	const struct dpflow_lpm6_rule *r = rules6_c(t);
	uint32_t mask = t->rule_slots - 1, i = hash6(a, len) & mask;

	while (r[i].tag) {
		if (r[i].tag == len + 1 && a6_eq(r[i].w, a->w))
			return &r[i];
		i = (i + 1) & mask;
	}
	return NULL;
}

static void rule6_insert(struct dpflow_lpm6_image *t, const struct a6 *a,
			 unsigned len, uint32_t value)
{
	struct dpflow_lpm6_rule *r = rules6(t);
	uint32_t mask = t->rule_slots - 1, i = hash6(a, len) & mask;

	while (r[i].tag)
		i = (i + 1) & mask;
	memcpy(r[i].w, a->w, sizeof(r[i].w));
	r[i].value = value;
	r[i].tag = len + 1;
	t->n_rules++;
}

static void rule6_remove(struct dpflow_lpm6_image *t, uint32_t i)
{
	struct dpflow_lpm6_rule *r = rules6(t);
	uint32_t mask = t->rule_slots - 1, j = i;

	for (;;) {
		struct a6 a;
		uint32_t home;

		j = (j + 1) & mask;
		if (!r[j].tag)
			break;
		memcpy(a.w, r[j].w, sizeof(a.w));
		home = hash6(&a, r[j].tag - 1) & mask;
		if (((j - home) & mask) >= ((j - i) & mask)) {
			r[i] = r[j];
			i = j;
		}
	}
	memset(&r[i], 0, sizeof(r[i]));
	t->n_rules--;
}

static void parent6(const struct dpflow_lpm6_image *t, const struct a6 *a,
		    unsigned len, uint32_t *v, uint8_t *dep)
{
	for (unsigned l = len; l-- > 0;) {
		struct a6 m = a6_mask(*a, l);
		const struct dpflow_lpm6_rule *r = rule6_find(t, &m, l);

		if (r) {
			*v = r->value;
			*dep = (uint8_t)(l + 1);
			return;
		}
	}
	*v = DPFLOW_TABLE_MISS;
	*dep = 0;
}

/* --- IPv6 trie --- */

/* Level 0 is tbl (bits 0..15); level k >= 1 a group on byte k + 1. */
static unsigned level_start(unsigned k)
{
	return k ? 16 + 8 * (k - 1) : 0;
}

/* The level whose entries a /@len prefix fills. */
static unsigned level_of(unsigned len)
{
	return len <= 16 ? 0 : (len - 16 + 7) / 8;
}

static uint32_t level_index(const struct a6 *a, unsigned k)
{
	return k ? a6_byte(a, k + 1) : a->w[0] >> 16;
}

static uint32_t grp_alloc(struct dpflow_lpm6_image *t)
{
	uint32_t g = t->grp_free;

	if (g != NO_GROUP)
		t->grp_free = grp6(t, g)[0].v;
	else
		g = t->grp_unused++;
	t->n_groups++;
	return g;
}

static void grp_release(struct dpflow_lpm6_image *t, uint32_t g)
{
	struct dpflow_lpm6_ent *e = grp6(t, g);

	memset(e, 0, DPFLOW_LPM6_GRP_SIZE * sizeof(*e));
	e[0].v = t->grp_free;
	t->grp_free = g;
	t->n_groups--;
}

/* Can the group at level @k (holding @e) fold into one parent entry? */
static bool grp_foldable(const struct dpflow_lpm6_ent *e, unsigned k)
{
	uint32_t dep = e[0].info;

	if (dep & DPFLOW_LPM6_EXT)
		return false;
	/* one rule must cover the whole group: none, or len <= start */
	if (dep && dep - 1 > level_start(k))
		return false;
	for (unsigned i = 1; i < DPFLOW_LPM6_GRP_SIZE; i++)
		if (e[i].v != e[0].v || e[i].info != dep)
			return false;
	return true;
}

/* Fold the group that @e (at level @k - 1) points to, if it can be. */
static bool try_fold(struct dpflow_lpm6_image *t, struct dpflow_lpm6_ent *e,
		     unsigned k)
{
	uint32_t g = e->v;
	const struct dpflow_lpm6_ent *ge = grp6(t, g);

	if (!grp_foldable(ge, k))
		return false;
	*e = ge[0];
	grp_release(t, g);
	return true;
}

/* Apply @op to entry @e at level @k and everything below it. */
static void ent_apply(struct dpflow_lpm6_image *t, struct dpflow_lpm6_ent *e,
		      unsigned k, const struct lpm_op *op)
{
	if (e->info & DPFLOW_LPM6_EXT) {
		struct dpflow_lpm6_ent *ge = grp6(t, e->v);

		for (unsigned i = 0; i < DPFLOW_LPM6_GRP_SIZE; i++)
			ent_apply(t, &ge[i], k + 1, op);
		try_fold(t, e, k + 1);
		return;
	}
	if (op_hits(op, e->info)) {
		e->v = op->v;
		e->info = op_dep(op);
	}
}

static int check_prefix6(const struct dpflow_lpm6_image *t, const uint8_t *addr,
			 unsigned len, struct a6 *a, struct dpflow_error *err)
{
	struct a6 m;

	if (!addr)
		return dpflow_error_set(err, EINVAL, "addr", "no address");
	if (len > 8 * t->key_bytes)
		return dpflow_error_set(err, EINVAL, "len",
					"prefix length %u over %u", len,
					8 * t->key_bytes);
	*a = a6_load(addr, t->key_bytes);
	m = a6_mask(*a, len);
	if (!a6_eq(m.w, a->w))
		return dpflow_error_set(err, EINVAL, "addr",
					"%s/%u has bits set past the prefix "
					"length",
					a6_text(t, a).s, len);
	return 0;
}

/*
 * Apply @op to the entries of /@len at @a. With @grow, missing groups on
 * the path are made (the caller checked there are enough); without, a
 * path that ends early means the prefix owns no entry and nothing changes.
 */
static void apply6(struct dpflow_lpm6_image *t, const struct a6 *a,
		   unsigned len, const struct lpm_op *op, bool grow)
{
	struct dpflow_lpm6_ent *path[DPFLOW_LPM6_KEY_MAX];
	struct dpflow_lpm6_ent *e = tbl6(t) + level_index(a, 0), *base;
	unsigned kl = level_of(len), bits, first, span;

	for (unsigned k = 0; k < kl; k++) {
		path[k] = e;
		if (!(e->info & DPFLOW_LPM6_EXT)) {
			struct dpflow_lpm6_ent copy = *e;
			uint32_t g;

			if (!grow)
				return;
			g = grp_alloc(t);
			for (unsigned i = 0; i < DPFLOW_LPM6_GRP_SIZE; i++)
				grp6(t, g)[i] = copy;
			e->v = g;
			e->info = DPFLOW_LPM6_EXT;
		}
		e = grp6(t, e->v) + level_index(a, k + 1);
	}
	base = kl ? grp6(t, path[kl - 1]->v) : tbl6(t);
	bits = kl ? 8 : 16;
	first = level_index(a, kl);
	span = 1u << (bits - (len - level_start(kl)));
	for (unsigned i = 0; i < span; i++)
		ent_apply(t, &base[first + i], kl, op);
	for (unsigned k = kl; k-- > 0;)
		if (!try_fold(t, path[k], k + 1))
			break;
}

int dpflow_lpm6_add(struct dpflow_lpm6_image *t, const uint8_t *addr,
		    unsigned len, uint32_t value, struct dpflow_error *err)
{
	const struct dpflow_lpm6_ent *e;
	struct lpm_op op;
	struct a6 a;
	unsigned kl, need = 0;
	int rc = check_prefix6(t, addr, len, &a, err);

	if (rc)
		return rc;
	if (value == DPFLOW_TABLE_MISS)
		return dpflow_error_set(err, EINVAL, "value",
					"value %#x is DPFLOW_TABLE_MISS",
					value);
	if (rule6_find(t, &a, len))
		return dpflow_error_set(err, EEXIST, "addr",
					"%s/%u is already present",
					a6_text(t, &a).s, len);
	if (t->n_rules >= t->max_rules)
		return dpflow_error_set(err, ENOSPC, "max_rules",
					"table holds max_rules %u prefixes",
					t->max_rules);
	kl = level_of(len);
	e = tbl6(t) + level_index(&a, 0);
	for (unsigned k = 0; k < kl; k++) {
		if (!(e->info & DPFLOW_LPM6_EXT)) {
			need = kl - k;
			break;
		}
		e = grp6(t, e->v) + level_index(&a, k + 1);
	}
	if (need > t->max_groups - t->n_groups)
		return dpflow_error_set(err, ENOSPC, "max_groups",
					"/%u needs %u groups, %u of %u free",
					len, need, t->max_groups - t->n_groups,
					t->max_groups);
	op.kind = OP_INSERT;
	op.dep = (uint8_t)(len + 1);
	op.new_dep = op.dep;
	op.v = value;
	apply6(t, &a, len, &op, true);
	rule6_insert(t, &a, len, value);
	return 0;
}

static int present6(const struct dpflow_lpm6_image *t, const uint8_t *addr,
		    unsigned len, struct a6 *a,
		    const struct dpflow_lpm6_rule **r, struct dpflow_error *err)
{
	int rc = check_prefix6(t, addr, len, a, err);

	if (rc)
		return rc;
	*r = rule6_find(t, a, len);
	if (!*r)
		return dpflow_error_set(err, ENOENT, "addr",
					"%s/%u is not present", a6_text(t, a).s,
					len);
	return 0;
}

int dpflow_lpm6_delete(struct dpflow_lpm6_image *t, const uint8_t *addr,
		       unsigned len, uint32_t *old_value,
		       struct dpflow_error *err)
{
	const struct dpflow_lpm6_rule *r;
	struct lpm_op op;
	struct a6 a;
	int rc = present6(t, addr, len, &a, &r, err);

	if (rc)
		return rc;
	if (old_value)
		*old_value = r->value;
	rule6_remove(t, (uint32_t)(r - rules6_c(t)));
	op.kind = OP_REPLACE;
	op.dep = (uint8_t)(len + 1);
	parent6(t, &a, len, &op.v, &op.new_dep);
	apply6(t, &a, len, &op, false);
	return 0;
}

int dpflow_lpm6_update(struct dpflow_lpm6_image *t, const uint8_t *addr,
		       unsigned len, uint32_t value, struct dpflow_error *err)
{
	const struct dpflow_lpm6_rule *r;
	struct lpm_op op;
	struct a6 a;
	int rc = check_prefix6(t, addr, len, &a, err);

	if (rc)
		return rc;
	if (value == DPFLOW_TABLE_MISS)
		return dpflow_error_set(err, EINVAL, "value",
					"value %#x is DPFLOW_TABLE_MISS",
					value);
	if ((rc = present6(t, addr, len, &a, &r, err)))
		return rc;
	rules6(t)[r - rules6_c(t)].value = value;
	op.kind = OP_REPLACE;
	op.dep = (uint8_t)(len + 1);
	op.new_dep = op.dep;
	op.v = value;
	apply6(t, &a, len, &op, false);
	return 0;
}

int dpflow_lpm6_find(const struct dpflow_lpm6_image *t, const uint8_t *addr,
		     unsigned len, uint32_t *value)
{
	const struct dpflow_lpm6_rule *r;
	struct a6 a;
	int rc = present6(t, addr, len, &a, &r, NULL);

	if (!rc && value)
		*value = r->value;
	return rc;
}

uint32_t dpflow_lpm6_count(const struct dpflow_lpm6_image *t)
{
	return t->n_rules;
}

void dpflow_lpm6_clear(struct dpflow_lpm6_image *t)
{
	struct dpflow_lpm6_params p;

	p.max_rules = t->max_rules;
	p.max_groups = t->max_groups;
	p.key_bytes = t->key_bytes;
	(void)dpflow_lpm6_image_init(t, t->size, &p, NULL);
}

void dpflow_lpm6_info(const struct dpflow_lpm6_image *t,
		      struct dpflow_lpm_info *info)
{
	memset(info, 0, sizeof(*info));
	info->max_rules = t->max_rules;
	info->n_rules = t->n_rules;
	info->max_groups = t->max_groups;
	info->n_groups = t->n_groups;
	info->size = t->size;
}

size_t dpflow_lpm6_image_bytes(const struct dpflow_lpm6_image *t)
{
	return t->size;
}

struct dpflow_lpm6_image *dpflow_lpm6_create(const struct dpflow_lpm6_params *p,
					     struct dpflow_error *err)
{
	size_t size = dpflow_lpm6_image_size(p);
	void *mem;

	if (!size) {
		struct lpm6_layout l;

		lpm6_layout(p, &l, err);
		return NULL;
	}
	mem = image_alloc(size);
	if (!mem) {
		dpflow_error_set(err, ENOMEM, "max_groups",
				 "cannot allocate %zu bytes", size);
		return NULL;
	}
	if (lpm6_init(mem, size, p, true, err)) {
		image_free(mem, size);
		return NULL;
	}
	return (struct dpflow_lpm6_image *)mem;
}

struct dpflow_lpm6_image *dpflow_lpm6_clone(const struct dpflow_lpm6_image *src,
					    struct dpflow_error *err)
{
	void *mem = image_alloc(src->size);

	if (!mem) {
		dpflow_error_set(err, ENOMEM, "size",
				 "cannot allocate %llu bytes",
				 (unsigned long long)src->size);
		return NULL;
	}
	memcpy(mem, src, src->size);
	return (struct dpflow_lpm6_image *)mem;
}

void dpflow_lpm6_destroy(struct dpflow_lpm6_image *t)
{
	if (t)
		image_free(t, t->size);
}

int dpflow_lpm6_image_copy(void *dst, size_t dst_size,
			   const struct dpflow_lpm6_image *src,
			   struct dpflow_error *err)
{
	return image_copy(dst, dst_size, src, src->size, err);
}

/* --- IPv6 verification --- */

struct verify6 {
	const struct dpflow_lpm6_image *t;
	uint8_t *seen; /* per group */
	uint32_t groups;
	struct dpflow_error *err;
};

static int verify6_ent(struct verify6 *vs, const struct dpflow_lpm6_ent *e,
		       unsigned k, struct a6 a)
{
	const struct dpflow_lpm6_image *t = vs->t;
	unsigned end = 16 + 8 * k;

	if (e->info & DPFLOW_LPM6_EXT) {
		const struct dpflow_lpm6_ent *ge;

		/* level k + 1 reads byte k + 2, the last is key_bytes - 1 */
		if (k + 2 >= t->key_bytes || e->info != DPFLOW_LPM6_EXT ||
		    e->v >= t->grp_unused || vs->seen[e->v])
			return dpflow_error_set(vs->err, EINVAL, "groups",
						"bad or shared group %u at "
						"level %u",
						e->v, k);
		vs->seen[e->v] = 1;
		vs->groups++;
		ge = dpflow_lpm6_grp_c(t) + (size_t)e->v * DPFLOW_LPM6_GRP_SIZE;
		if (grp_foldable(ge, k + 1))
			return dpflow_error_set(vs->err, EINVAL, "groups",
						"group %u could be folded",
						e->v);
		for (unsigned i = 0; i < DPFLOW_LPM6_GRP_SIZE; i++) {
			struct a6 b = a;
			int rc;

			b.w[(k + 2) / 4] |= i << (24 - 8 * ((k + 2) % 4));
			if ((rc = verify6_ent(vs, &ge[i], k + 1, b)))
				return rc;
		}
		return 0;
	}
	if (e->info > 8 * t->key_bytes + 1 || e->info > end + 1 ||
	    (e->info == 0) != (e->v == DPFLOW_TABLE_MISS))
		return dpflow_error_set(vs->err, EINVAL, "entries",
					"entry at level %u: value %#x depth %u",
					k, e->v, e->info);
	if (e->info) {
		struct a6 m = a6_mask(a, e->info - 1);
		const struct dpflow_lpm6_rule *r =
		    rule6_find(t, &m, e->info - 1);

		if (!r || r->value != e->v)
			return dpflow_error_set(vs->err, EINVAL, "entries",
						"entry at level %u: no rule "
						"/%u with value %#x",
						k, e->info - 1, e->v);
	}
	return 0;
}

int dpflow_lpm6_verify(const struct dpflow_lpm6_image *t,
		       struct dpflow_error *err)
{
	struct verify6 vs;
	uint32_t rules = 0, free_n = 0;
	int rc = dpflow_lpm6_image_check(t, t->size, err);

	if (rc)
		return rc;
	vs.t = t;
	vs.err = err;
	vs.groups = 0;
	vs.seen = (uint8_t *)calloc(t->grp_unused + 1, 1);
	if (!vs.seen)
		return dpflow_error_set(err, ENOMEM, "groups",
					"no memory to verify");
	for (uint32_t i = 0; i < DPFLOW_LPM6_TBL_SIZE && !rc; i++) {
		struct a6 a;

		memset(&a, 0, sizeof(a));
		a.w[0] = i << 16;
		rc = verify6_ent(&vs, dpflow_lpm6_tbl_c(t) + i, 0, a);
	}
	for (uint32_t g = t->grp_free; !rc && g != NO_GROUP;) {
		if (g >= t->grp_unused || vs.seen[g] || free_n > t->grp_unused)
			rc = dpflow_error_set(err, EINVAL, "groups",
					      "free list broken at %u", g);
		else {
			vs.seen[g] = 1;
			free_n++;
			g = (dpflow_lpm6_grp_c(t) +
			     (size_t)g * DPFLOW_LPM6_GRP_SIZE)[0]
				.v;
		}
	}
	free(vs.seen);
	if (rc)
		return rc;
	for (uint32_t i = 0; i < t->rule_slots; i++)
		rules += rules6_c(t)[i].tag != 0;
	if (vs.groups != t->n_groups || free_n + vs.groups != t->grp_unused ||
	    rules != t->n_rules)
		return dpflow_error_set(err, EINVAL, "counts",
					"groups %u/%u (+%u free of %u) rules "
					"%u/%u",
					vs.groups, t->n_groups, free_n,
					t->grp_unused, rules, t->n_rules);
	return 0;
}

uint32_t dpflow_lpm6_lookup(const struct dpflow_lpm6_image *t,
			    const uint8_t *addr)
{
	return dpflow_lpm6_lookup_impl(t, addr);
}

uint32_t dpflow_lpm6_lookup_bulk(const struct dpflow_lpm6_image *t,
				 const uint8_t *addrs, uint32_t n,
				 uint32_t *values)
{
	return dpflow_lpm6_lookup_bulk_impl(t, addrs, n, values);
}
