/*
 * Table kinds behind pipe types (flow_internal.h struct table_kind):
 * adapters from the pipe layer's batches to each table's image API.
 * Control threads for create/destroy/apply, data threads for lookup.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/maglev.h"

#include "flow/ct.h"
#include "flow/flow_internal.h"
#include "flow/hash_impl.h"
#include "flow/table_acl.h"
#include "flow/table_exact.h"
#include "flow/table_hash_impl.h"
#include "flow/table_lpm.h"

/* ---- BASIC: exact match -------------------------------------------------- */

static int exact_create(struct dpflow_pipe *pipe, struct dpflow_error *err)
{
	struct dpflow_exact_params p = {
	    .key_len = (uint32_t)((pipe->key_len + 3u) & ~3u),
	    .capacity = pipe->cfg.size,
	    .seed = 0x64706671u,
	};

	if (p.key_len < 4)
		p.key_len = 4;
	for (int i = 0; i < 2; i++) {
		pipe->images[i] = dpflow_exact_create(&p, err);
		if (!pipe->images[i]) {
			dpflow_exact_destroy(pipe->images[0]);
			pipe->images[0] = NULL;
			return -(err ? err->code : ENOMEM);
		}
	}
	pipe->image_size = dpflow_exact_image_bytes(pipe->images[0]);
	return 0;
}

static void exact_destroy(struct dpflow_pipe *pipe)
{
	for (int i = 0; i < 2; i++)
		dpflow_exact_destroy(pipe->images[i]);
}

/* An entry's key, padded to the table's 4-byte multiple. */
static void exact_key(const struct dpflow_pipe *pipe,
		      const struct dpflow_entry *e, uint8_t *key)
{
	memset(key, 0, DPFLOW_KEY_MAX);
	memcpy(key, e->cfg.key, pipe->key_len);
	/* per-entry template masks apply to entries as to packets */
	for (unsigned i = 0, off = 0; i < pipe->cfg.match.n; i++) {
		const struct dpflow_match_field *f = &pipe->cfg.match.f[i];
		unsigned bytes = dpflow_field_bytes(f->field);

		if (!f->per_entry)
			continue;
		for (unsigned b = 0; b < bytes; b++)
			key[off + b] &= f->mask[b];
		off += bytes;
	}
}

static int exact_apply(struct dpflow_pipe *pipe, unsigned which,
		       const struct table_op *ops, unsigned n, unsigned *failed,
		       struct dpflow_error *err)
{
	struct dpflow_exact_image *img = pipe->images[which];
	uint8_t key[DPFLOW_KEY_MAX];
	unsigned i;
	int rc = 0;

	for (i = 0; i < n; i++) {
		exact_key(pipe, ops[i].e, key);
		rc = ops[i].add
			 ? dpflow_exact_insert(img, key, ops[i].value, err)
			 : dpflow_exact_delete(img, key, NULL, err);
		if (rc)
			break;
	}
	if (!rc)
		return 0;
	*failed = i;
	if (rc == -EEXIST)
		dpflow_error_set(err, EEXIST, "match",
				 "pipe '%s': an entry with this match exists",
				 pipe->name);
	else if (rc == -ENOSPC)
		dpflow_error_set(err, ENOSPC, "size", "pipe '%s': table full",
				 pipe->name);
	while (i-- > 0) { /* undo, newest first */
		exact_key(pipe, ops[i].e, key);
		if (ops[i].add)
			dpflow_exact_delete(img, key, NULL, NULL);
		else
			dpflow_exact_insert(img, key, ops[i].value, NULL);
	}
	return rc;
}

static void exact_lookup(const struct dpflow_pipe *pipe, const void *image,
			 const uint8_t *keys, uint16_t n, uint32_t *values)
{
	const void *ptrs[DPFLOW_BURST_MAX];

	(void)pipe;
	for (uint16_t i = 0; i < n; i++)
		ptrs[i] = keys + (size_t)i * DPFLOW_KEY_MAX;
	dpflow_exact_lookup_bulk((const struct dpflow_exact_image *)image, ptrs,
				 n, values);
}

static const struct table_kind exact_kind = {
    .create = exact_create,
    .destroy = exact_destroy,
    .apply = exact_apply,
    .lookup = exact_lookup,
};

/* ---- LPM: longest prefix on one IPv4 or IPv6 address field ---------------
 *
 * The address is the last per-entry field; per-entry fields before it are
 * matched exactly. A lone IPv4 address uses the IPv4 table; otherwise the
 * key (exact fields, then the address) goes into the trie with the exact
 * fields as a fixed prefix: keys of up to 16 bytes padded with zeros to
 * 16, longer ones (up to DPFLOW_LPM6_KEY_MAX, checked in check_lpm_match)
 * in a trie of key_len bytes. Entries and packets are padded alike.
 */

static bool lpm_is_v6(const struct dpflow_pipe *pipe)
{
	return pipe->key_len > 4;
}

/* Bytes of the trie's keys. */
static unsigned lpm_key_bytes(const struct dpflow_pipe *pipe)
{
	return pipe->key_len > DPFLOW_LPM6_KEY_DEFAULT
		   ? pipe->key_len
		   : DPFLOW_LPM6_KEY_DEFAULT;
}

static int lpm_create(struct dpflow_pipe *pipe, struct dpflow_error *err)
{
	for (int i = 0; i < 2; i++) {
		if (lpm_is_v6(pipe)) {
			struct dpflow_lpm6_params p = {
			    .max_rules = pipe->cfg.size,
			    .key_bytes = lpm_key_bytes(pipe),
			};
			pipe->images[i] = dpflow_lpm6_create(&p, err);
		} else {
			struct dpflow_lpm4_params p = {.max_rules =
							   pipe->cfg.size};
			pipe->images[i] = dpflow_lpm4_create(&p, err);
		}
		if (!pipe->images[i])
			return -(err && err->code ? err->code : ENOMEM);
	}
	pipe->image_size = lpm_is_v6(pipe)
			       ? dpflow_lpm6_image_bytes(pipe->images[0])
			       : dpflow_lpm4_image_bytes(pipe->images[0]);
	return 0;
}

static void lpm_destroy(struct dpflow_pipe *pipe)
{
	for (int i = 0; i < 2; i++) {
		if (lpm_is_v6(pipe))
			dpflow_lpm6_destroy(pipe->images[i]);
		else
			dpflow_lpm4_destroy(pipe->images[i]);
	}
}

static uint32_t be32(const uint8_t *k)
{
	return (uint32_t)k[0] << 24 | (uint32_t)k[1] << 16 |
	       (uint32_t)k[2] << 8 | k[3];
}

static int lpm_one(struct dpflow_pipe *pipe, void *img, bool add,
		   const struct dpflow_entry *e, uint32_t value,
		   struct dpflow_error *err)
{
	uint8_t key[DPFLOW_KEY_MAX];

	/* the template masks, as packets' keys get them */
	exact_key(pipe, e, key);
	if (lpm_is_v6(pipe)) {
		/* exact fields are a fixed prefix of the trie key (the rest
		 * of its key_bytes is zero, as exact_key leaves it) */
		unsigned exact_bits = 8u * (pipe->key_len - pipe->lpm_bytes);
		uint8_t len = (uint8_t)(exact_bits + e->cfg.prefix_len);

		return add ? dpflow_lpm6_add(img, key, len, value, err)
			   : dpflow_lpm6_delete(img, key, len, NULL, err);
	}
	return add ? dpflow_lpm4_add(img, be32(key), e->cfg.prefix_len, value,
				     err)
		   : dpflow_lpm4_delete(img, be32(key), e->cfg.prefix_len, NULL,
					err);
}

static int lpm_apply(struct dpflow_pipe *pipe, unsigned which,
		     const struct table_op *ops, unsigned n, unsigned *failed,
		     struct dpflow_error *err)
{
	void *img = pipe->images[which];
	unsigned i;
	int rc = 0;

	for (i = 0; i < n; i++) {
		rc =
		    lpm_one(pipe, img, ops[i].add, ops[i].e, ops[i].value, err);
		if (rc)
			break;
	}
	if (!rc)
		return 0;
	*failed = i;
	if (rc == -EEXIST)
		dpflow_error_set(err, EEXIST, "match",
				 "pipe '%s': an entry with this prefix exists",
				 pipe->name);
	else if (rc == -ENOSPC)
		dpflow_error_set(err, ENOSPC, "size", "pipe '%s': table full",
				 pipe->name);
	while (i-- > 0)
		lpm_one(pipe, img, !ops[i].add, ops[i].e, ops[i].value, NULL);
	return rc;
}

static void lpm_lookup(const struct dpflow_pipe *pipe, const void *image,
		       const uint8_t *keys, uint16_t n, uint32_t *values)
{
	if (lpm_is_v6(pipe)) {
		uint8_t addrs[DPFLOW_BURST_MAX * DPFLOW_LPM6_KEY_MAX];
		unsigned kb = lpm_key_bytes(pipe);

		for (uint16_t i = 0; i < n; i++) {
			memcpy(addrs + (size_t)kb * i,
			       keys + (size_t)i * DPFLOW_KEY_MAX,
			       pipe->key_len);
			memset(addrs + (size_t)kb * i + pipe->key_len, 0,
			       kb - pipe->key_len);
		}
		dpflow_lpm6_lookup_bulk((const struct dpflow_lpm6_image *)image,
					addrs, n, values);
	} else {
		uint32_t addrs[DPFLOW_BURST_MAX];

		for (uint16_t i = 0; i < n; i++)
			addrs[i] = be32(keys + (size_t)i * DPFLOW_KEY_MAX);
		dpflow_lpm4_lookup_bulk((const struct dpflow_lpm4_image *)image,
					addrs, n, values);
	}
}

static const struct table_kind lpm_kind = {
    .create = lpm_create,
    .destroy = lpm_destroy,
    .apply = lpm_apply,
    .lookup = lpm_lookup,
};

/* ---- CONTROL and ACL: masks, ranges and priorities -------------------------
 *
 * Each per-entry field becomes one or more ACL fields of 8, 16 or 32 bits
 * (a MAC two, an IPv6 address four). The rule list is the control state;
 * an image is rebuilt from it on every batch, and after the flip the
 * other image is a copy of the new one (sync).
 */

struct acl_state {
	struct dpflow_acl_rules *rules;
	unsigned n_fields;
	/* per ACL field: byte offset in the pipe key, bytes, and which
	 * template field (for ranges) */
	uint8_t off[DPFLOW_ACL_FIELDS_MAX];
	uint8_t bytes[DPFLOW_ACL_FIELDS_MAX];
	uint8_t tmpl_field[DPFLOW_ACL_FIELDS_MAX];
};

static uint32_t be_n(const uint8_t *p, unsigned bytes)
{
	uint32_t v = 0;

	for (unsigned i = 0; i < bytes; i++)
		v = v << 8 | p[i];
	return v;
}

/* be_n() for the 1, 2 and 4-byte ACL fields, one load each. */
static inline uint32_t be_word(const uint8_t *p, unsigned bytes)
{
	uint32_t w;
	uint16_t h;

	switch (bytes) {
	case 4:
		memcpy(&w, p, 4);
		return __builtin_bswap32(w);
	case 2:
		memcpy(&h, p, 2);
		return __builtin_bswap16(h);
	case 1:
		return p[0];
	default:
		return be_n(p, bytes);
	}
}

static int acl_create(struct dpflow_pipe *pipe, struct dpflow_error *err)
{
	struct acl_state *st = calloc(1, sizeof(*st));
	struct dpflow_acl_layout layout;
	unsigned k = 0;

	if (!st)
		return dpflow_error_set(err, ENOMEM, NULL, "out of memory");
	memset(&layout, 0, sizeof(layout));
	for (unsigned f = 0; f < pipe->cfg.match.n; f++) {
		const struct dpflow_match_field *mf = &pipe->cfg.match.f[f];
		unsigned bytes = dpflow_field_bytes(mf->field);
		unsigned off = pipe->field_off[f];

		if (!mf->per_entry)
			continue;
		while (bytes) {
			unsigned w = bytes >= 4 ? 4 : bytes == 3 ? 2 : bytes;

			if (k == DPFLOW_ACL_FIELDS_MAX) {
				free(st);
				return dpflow_error_set(
				    err, EINVAL, "match",
				    "pipe '%s': per-entry fields too wide "
				    "for an acl pipe",
				    pipe->name);
			}
			st->off[k] = (uint8_t)off;
			st->bytes[k] = (uint8_t)w;
			st->tmpl_field[k] = (uint8_t)f;
			layout.width[k] = (uint8_t)(8 * w);
			layout.name[k] = dpflow_field_name(mf->field);
			off += w;
			bytes -= w;
			k++;
		}
	}
	layout.n_fields = k;
	st->n_fields = k;
	st->rules = dpflow_acl_rules_create(&layout, pipe->cfg.size, err);
	if (!st->rules) {
		free(st);
		return -(err && err->code ? err->code : ENOMEM);
	}
	pipe->kind_state = st;
	for (int i = 0; i < 2; i++) {
		pipe->images[i] = dpflow_acl_build(st->rules, NULL, err);
		if (!pipe->images[i])
			return -(err && err->code ? err->code : ENOMEM);
	}
	return 0;
}

static void acl_destroy(struct dpflow_pipe *pipe)
{
	struct acl_state *st = pipe->kind_state;

	for (int i = 0; i < 2; i++)
		dpflow_acl_destroy(pipe->images[i]);
	if (st)
		dpflow_acl_rules_destroy(st->rules);
	free(st);
}

static void acl_rule(const struct dpflow_pipe *pipe, const struct acl_state *st,
		     const struct dpflow_entry *e, struct dpflow_acl_rule *r)
{
	const struct dpflow_entry_cfg *c = &e->cfg;
	unsigned k_entry = 0, last = 0xff;

	memset(r, 0, sizeof(*r));
	r->id = e->index;
	r->value = e->index;
	r->priority = c->priority;
	for (unsigned k = 0; k < st->n_fields; k++) {
		struct dpflow_acl_match *m = &r->field[k];
		const uint8_t *tm = pipe->cfg.match.f[st->tmpl_field[k]].mask;
		unsigned within = 0;

		if (st->tmpl_field[k] != last) {
			/* per-entry field number, for range_set */
			if (last != 0xff)
				k_entry++;
			last = st->tmpl_field[k];
		}
		for (unsigned j = 0; j < k; j++)
			if (st->tmpl_field[j] == st->tmpl_field[k])
				within += st->bytes[j];
		if (c->range_set & (1u << k_entry)) {
			m->type = DPFLOW_ACL_MATCH_RANGE;
			m->lo = c->range_lo[k_entry];
			m->hi = c->range_hi[k_entry];
			continue;
		}
		m->type = DPFLOW_ACL_MATCH_MASK;
		m->mask = be_n(c->mask + st->off[k], st->bytes[k]) &
			  be_n(tm + within, st->bytes[k]);
		m->value = be_n(c->key + st->off[k], st->bytes[k]) & m->mask;
	}
}

static int acl_apply(struct dpflow_pipe *pipe, unsigned which,
		     const struct table_op *ops, unsigned n, unsigned *failed,
		     struct dpflow_error *err)
{
	struct acl_state *st = pipe->kind_state;
	struct dpflow_acl_rule r;
	struct dpflow_acl_image *img;
	unsigned i;
	int rc = 0;

	for (i = 0; i < n; i++) {
		acl_rule(pipe, st, ops[i].e, &r);
		rc = ops[i].add ? dpflow_acl_rules_add(st->rules, &r, err)
				: dpflow_acl_rules_delete(st->rules, r.id, err);
		if (rc)
			break;
	}
	if (!rc) {
		img = dpflow_acl_build(st->rules, NULL, err);
		if (img) {
			dpflow_acl_destroy(pipe->images[which]);
			pipe->images[which] = img;
			return 0;
		}
		rc = -(err && err->code ? err->code : ENOMEM);
		i = n ? n - 1 : 0;
		*failed = i;
		i = n;
	} else {
		*failed = i;
	}
	while (i-- > 0) { /* undo, newest first */
		acl_rule(pipe, st, ops[i].e, &r);
		if (ops[i].add)
			dpflow_acl_rules_delete(st->rules, r.id, NULL);
		else
			dpflow_acl_rules_add(st->rules, &r, NULL);
	}
	return rc;
}

static void acl_sync(struct dpflow_pipe *pipe, unsigned from, unsigned to)
{
	struct dpflow_acl_image *copy =
	    dpflow_acl_clone(pipe->images[from], NULL);

	if (copy) {
		dpflow_acl_destroy(pipe->images[to]);
		pipe->images[to] = copy;
	}
}

static void acl_lookup(const struct dpflow_pipe *pipe, const void *image,
		       const uint8_t *keys, uint16_t n, uint32_t *values)
{
	const struct acl_state *st = pipe->kind_state;
	uint32_t words[DPFLOW_BURST_MAX][DPFLOW_ACL_FIELDS_MAX];
	const uint32_t *ptrs[DPFLOW_BURST_MAX];

	for (uint16_t i = 0; i < n; i++) {
		const uint8_t *k = keys + (size_t)i * DPFLOW_KEY_MAX;

		for (unsigned f = 0; f < st->n_fields; f++)
			words[i][f] = be_word(k + st->off[f], st->bytes[f]);
		ptrs[i] = words[i];
	}
	dpflow_acl_classify((const struct dpflow_acl_image *)image, ptrs, n,
			    values);
}

static const struct table_kind acl_kind = {
    .create = acl_create,
    .destroy = acl_destroy,
    .apply = acl_apply,
    .sync = acl_sync,
    .lookup = acl_lookup,
};

/* ---- HASH: the entry at slot hash(key) % slots ----------------------------
 *
 * The image (table_hash_impl.h) is a slot count, then the slots: entry
 * indices, TABLE_MISS when free. Position-independent.
 *
 * A plain HASH pipe has cfg.size slots and each entry names its own
 * (hash_index): the image is changed in place and the batch replayed after
 * the flip.
 *
 * A Maglev pipe (cfg.maglev_slots) is a rebuild kind: its entries are
 * members (a name and a weight), and apply builds the whole slot array
 * from the member set the batch leaves (maglev.h) into the image readers
 * do not use, so a batch costs one build (milliseconds at 65537 slots)
 * however many members it adds, removes or reweights, and the flip publishes it
 * whole; sync copies it to the other image. The member set of the newest
 * image is the kind's state. hash_create() gives a Maglev pipe its own
 * kind (the table kind is chosen by pipe type, before the config is
 * looked at).
 */

static int hash_images(struct dpflow_pipe *pipe, uint32_t n_slots,
		       struct dpflow_error *err)
{
	size_t bytes = dpflow_hash_image_bytes(n_slots);

	for (int i = 0; i < 2; i++) {
		struct dpflow_hash_image *img = malloc(bytes);

		if (!img) {
			free(pipe->images[0]);
			pipe->images[0] = NULL;
			return dpflow_error_set(err, ENOMEM, NULL,
						"out of memory");
		}
		img->n_slots = n_slots;
		img->reserved = 0;
		memset(dpflow_hash_slots(img), 0xff,
		       (size_t)n_slots * sizeof(uint32_t));
		pipe->images[i] = img;
	}
	pipe->image_size = bytes;
	return 0;
}

static void hash_destroy(struct dpflow_pipe *pipe)
{
	for (int i = 0; i < 2; i++)
		free(pipe->images[i]);
}

static int maglev_create(struct dpflow_pipe *pipe, struct dpflow_error *err);

static int hash_create(struct dpflow_pipe *pipe, struct dpflow_error *err)
{
	if (pipe->cfg.maglev_slots)
		return maglev_create(pipe, err);
	return hash_images(pipe, pipe->cfg.size, err);
}

/* What a plain HASH pipe's entry may not carry. */
static int hash_entry_check(const struct dpflow_pipe *pipe,
			    const struct dpflow_entry_cfg *c,
			    struct dpflow_error *err)
{
	if (c->member[0])
		return dpflow_error_set(err, EINVAL, "member",
					"pipe '%s' is a plain hash pipe: "
					"'member' is for maglev pipes",
					pipe->name);
	if (c->weight)
		return dpflow_error_set(err, EINVAL, "weight",
					"pipe '%s' is a plain hash pipe: "
					"'weight' is for maglev pipes",
					pipe->name);
	return 0;
}

static int hash_apply(struct dpflow_pipe *pipe, unsigned which,
		      const struct table_op *ops, unsigned n, unsigned *failed,
		      struct dpflow_error *err)
{
	uint32_t *slots = dpflow_hash_slots(pipe->images[which]);
	unsigned i;
	int rc = 0;

	for (i = 0; i < n; i++) {
		uint32_t at = ops[i].e->cfg.hash_index;

		if (ops[i].add) {
			rc = hash_entry_check(pipe, &ops[i].e->cfg, err);
			if (rc)
				break;
			if (slots[at] != TABLE_MISS) {
				rc = dpflow_error_set(
				    err, EEXIST, "hash_index",
				    "pipe '%s': slot %u already has an entry",
				    pipe->name, at);
				break;
			}
		}
		slots[at] = ops[i].add ? ops[i].value : TABLE_MISS;
	}
	if (!rc)
		return 0;
	*failed = i;
	while (i-- > 0) /* undo, newest first */
		slots[ops[i].e->cfg.hash_index] =
		    ops[i].add ? TABLE_MISS : ops[i].value;
	return rc;
}

/* Both kinds: hash every key, then read the slots (prefetched). */
static void hash_lookup(const struct dpflow_pipe *pipe, const void *image,
			const uint8_t *keys, uint16_t n, uint32_t *values)
{
	const struct dpflow_hash_image *img =
	    (const struct dpflow_hash_image *)image;
	const uint32_t *slots = dpflow_hash_slots_const(img);

	for (uint16_t i = 0; i < n; i++) {
		values[i] = dpflow_hash_slot_impl(
		    img, keys + (size_t)i * DPFLOW_KEY_MAX, pipe->key_len,
		    pipe->cfg.hash_seed);
		DPFLOW_PREFETCH(&slots[values[i]]);
	}
	for (uint16_t i = 0; i < n; i++)
		values[i] = slots[values[i]];
}

static const struct table_kind hash_kind = {
    .create = hash_create,
    .destroy = hash_destroy,
    .apply = hash_apply,
    .lookup = hash_lookup,
};

/* A Maglev pipe's state: which entry indices are members of the newest
 * image (cfg.size flags). */
struct maglev_state {
	uint8_t *in;
};

static void maglev_destroy(struct dpflow_pipe *pipe)
{
	struct maglev_state *st = pipe->kind_state;

	hash_destroy(pipe);
	if (st)
		free(st->in);
	free(st);
	pipe->kind_state = NULL;
}

static void maglev_sync(struct dpflow_pipe *pipe, unsigned from, unsigned to)
{
	memcpy(pipe->images[to], pipe->images[from], pipe->image_size);
}

/* What a Maglev pipe's entry must be: a member with a name and a weight,
 * no slot. */
static int maglev_entry_check(const struct dpflow_pipe *pipe,
			      const struct dpflow_entry_cfg *c,
			      struct dpflow_error *err)
{
	if (c->hash_index)
		return dpflow_error_set(err, EINVAL, "hash_index",
					"pipe '%s' is a maglev pipe: its "
					"entries are members, they name no "
					"slot (hash_index %u)",
					pipe->name, c->hash_index);
	if (!c->member[0] || !memchr(c->member, 0, sizeof(c->member)))
		return dpflow_error_set(err, EINVAL, "member",
					"pipe '%s' is a maglev pipe: an entry "
					"needs a member name of 1 to %u bytes",
					pipe->name, DPFLOW_MAGLEV_NAME_MAX);
	if (c->weight > DPFLOW_MAGLEV_WEIGHT_MAX)
		return dpflow_error_set(
		    err, EINVAL, "weight", "member '%s': weight %u, at most %u",
		    c->member, c->weight, DPFLOW_MAGLEV_WEIGHT_MAX);
	return 0;
}

static int by_member(const void *a, const void *b)
{
	return strcmp((*(const struct dpflow_entry *const *)a)->cfg.member,
		      (*(const struct dpflow_entry *const *)b)->cfg.member);
}

/* The position in @ops of the add that brought entry @a or @b (the later
 * one), or @n when neither came with the batch. */
static unsigned op_adding(const struct table_op *ops, unsigned n,
			  const struct dpflow_entry *a,
			  const struct dpflow_entry *b)
{
	for (unsigned i = n; i-- > 0;)
		if (ops[i].add && (ops[i].e == a || ops[i].e == b))
			return i;
	return n;
}

/*
 * The members @ms (@n_ms entries) checked whole, once sorted by name: no
 * name twice, weights within 32 bits. 0, or the error with *@failed the
 * op at fault.
 */
static int maglev_set_check(const struct dpflow_pipe *pipe,
			    const struct dpflow_entry **ms, uint32_t n_ms,
			    const struct table_op *ops, unsigned n,
			    unsigned *failed, struct dpflow_error *err)
{
	uint64_t total = 0;

	qsort(ms, n_ms, sizeof(*ms), by_member);
	for (uint32_t j = 0; j < n_ms; j++) {
		total += ms[j]->cfg.weight;
		if (j && !strcmp(ms[j - 1]->cfg.member, ms[j]->cfg.member)) {
			*failed = op_adding(ops, n, ms[j - 1], ms[j]);
			return dpflow_error_set(err, EEXIST, "member",
						"pipe '%s': member '%s' is "
						"there already",
						pipe->name, ms[j]->cfg.member);
		}
	}
	if (total > UINT32_MAX) {
		/* the last add that brought a weight */
		for (unsigned i = n; i-- > 0;)
			if (ops[i].add && ops[i].e->cfg.weight) {
				*failed = i;
				break;
			}
		return dpflow_error_set(err, EINVAL, "weight",
					"pipe '%s': the members' weights add "
					"up to %llu, at most %u",
					pipe->name, (unsigned long long)total,
					UINT32_MAX);
	}
	return 0;
}

static int maglev_apply(struct dpflow_pipe *pipe, unsigned which,
			const struct table_op *ops, unsigned n,
			unsigned *failed, struct dpflow_error *err)
{
	struct maglev_state *st = pipe->kind_state;
	struct dpflow_hash_image *img = pipe->images[which];
	uint32_t *slots = dpflow_hash_slots(img), size = pipe->cfg.size;
	const struct dpflow_entry **ms = NULL;
	struct dpflow_maglev_member *mb = NULL;
	uint8_t *in = malloc(size);
	uint32_t n_ms = 0;
	int rc = 0;

	*failed = n ? n - 1 : 0; /* out of memory: the batch's last op */
	if (!in)
		goto nomem;
	memcpy(in, st->in, size);
	for (unsigned i = 0; i < n; i++) {
		if (ops[i].add) {
			rc = maglev_entry_check(pipe, &ops[i].e->cfg, err);
			if (rc) {
				*failed = i;
				goto out;
			}
		}
		in[ops[i].value] = ops[i].add;
	}
	for (uint32_t k = 0; k < size; k++)
		n_ms += in[k];
	ms = calloc(n_ms ? n_ms : 1, sizeof(*ms));
	mb = calloc(n_ms ? n_ms : 1, sizeof(*mb));
	if (!ms || !mb)
		goto nomem;
	for (uint32_t k = 0, j = 0; k < size; k++)
		if (in[k])
			ms[j++] = &pipe->entries[k];
	rc = maglev_set_check(pipe, ms, n_ms, ops, n, failed, err);
	if (rc)
		goto out;
	for (uint32_t j = 0; j < n_ms; j++) {
		mb[j].name = ms[j]->cfg.member;
		mb[j].weight = ms[j]->cfg.weight;
	}
	/* checked above: only memory can fail, and then @slots is as it
	 * was */
	rc = dpflow_maglev_build(mb, n_ms, img->n_slots, slots);
	if (rc)
		goto nomem;
	for (uint32_t s = 0; s < img->n_slots; s++)
		slots[s] = slots[s] == DPFLOW_MAGLEV_NONE ? TABLE_MISS
							  : ms[slots[s]]->index;
	free(st->in);
	st->in = in;
	in = NULL;
	goto out;
nomem:
	rc = dpflow_error_set(err, ENOMEM, NULL, "out of memory");
out:
	free(mb);
	free(ms);
	free(in);
	return rc;
}

static const struct table_kind maglev_kind = {
    .create = hash_create,
    .destroy = maglev_destroy,
    .apply = maglev_apply,
    .sync = maglev_sync,
    .lookup = hash_lookup,
};

static int maglev_create(struct dpflow_pipe *pipe, struct dpflow_error *err)
{
	uint32_t m = pipe->cfg.maglev_slots;
	struct maglev_state *st;
	int rc;

	if (m < 3 || m > DPFLOW_MAGLEV_SIZE_MAX || !dpflow_maglev_is_prime(m))
		return dpflow_error_set(err, EINVAL, "maglev_slots",
					"pipe '%s': %u Maglev slots: expected "
					"a prime in 3..%u",
					pipe->name, m, DPFLOW_MAGLEV_SIZE_MAX);
	st = calloc(1, sizeof(*st));
	if (st)
		st->in = calloc(pipe->cfg.size, 1);
	if (!st || !st->in) {
		free(st);
		return dpflow_error_set(err, ENOMEM, NULL, "out of memory");
	}
	rc = hash_images(pipe, m, err);
	if (rc) {
		free(st->in);
		free(st);
		return rc;
	}
	pipe->kind_state = st;
	pipe->kind = &maglev_kind; /* for the rest of the pipe's life */
	return 0;
}

uint32_t dpflow_hash32(const void *key, unsigned len, uint32_t seed)
{
	return dpflow_hash32_impl((const uint8_t *)key, len, seed);
}

/* ---- CT: connection tracking ----------------------------------------------
 *
 * The data path writes the table (connections are made by packets), so a
 * CT pipe has one live image, in both image slots; it takes no entries.
 * pipeline.c runs it (flow_ct_run); this kind only makes the image.
 */

static int ct_create(struct dpflow_pipe *pipe, struct dpflow_error *err)
{
	const struct dpflow_ct_cfg *c = &pipe->cfg.ct;
	struct dpflow_ct_params p;

	dpflow_ct_params_default(&p, pipe->cfg.size);
	p.flags = (c->tcp_strict ? 0 : DPFLOW_CT_F_TCP_LOOSE) |
		  (c->evict ? DPFLOW_CT_F_EVICT : 0) |
		  (c->replace ? DPFLOW_CT_F_REPLACE : 0) |
		  (c->snat.n_addrs || c->dnat_pipe ? DPFLOW_CT_F_NAT : 0);
	p.seed = 0x63745f70u;
	/* the source NAT's pools: IPv4 first, then IPv6 (as the plan's
	 * ct_pool says) */
	for (unsigned fam = 4; fam <= 6; fam += 2) {
		struct dpflow_ct_pool_cfg *pc = &p.pools[p.n_pools];

		for (unsigned a = 0; a < c->snat.n_addrs; a++) {
			if (c->snat.family[a] != fam)
				continue;
			if (pc->n_addrs == DPFLOW_CT_POOL_ADDRS_MAX)
				return dpflow_error_set(
				    err, EINVAL, "ct.snat.addrs",
				    "pipe '%s': at most %u IPv%u source NAT "
				    "addresses",
				    pipe->name, DPFLOW_CT_POOL_ADDRS_MAX, fam);
			memcpy(pc->addr[pc->n_addrs++], c->snat.addr[a], 16);
		}
		if (!pc->n_addrs)
			continue;
		pc->family = (uint8_t)fam;
		pc->port_lo = c->snat.port_lo ? c->snat.port_lo : 1024;
		pc->port_hi = c->snat.port_hi ? c->snat.port_hi : 65535;
		pc->tries = c->snat.tries;
		p.n_pools++;
	}
	for (unsigned s = 1; s < DPFLOW_CT_STATE_COUNT; s++)
		if (c->timeout_ms[s]) /* the image's 0 is never */
			p.timeout_ms[s] =
			    c->timeout_ms[s] == DPFLOW_CT_TIMEOUT_NEVER
				? 0
				: c->timeout_ms[s];
	pipe->images[0] = dpflow_ct_create(&p, err);
	if (!pipe->images[0])
		return -(err && err->code ? err->code : ENOMEM);
	pipe->images[1] = pipe->images[0];
	pipe->image_size = 0; /* never copied between slots */
	return 0;
}

static void ct_destroy(struct dpflow_pipe *pipe)
{
	dpflow_ct_destroy(pipe->images[0]);
	pipe->images[0] = pipe->images[1] = NULL;
}

static int ct_apply(struct dpflow_pipe *pipe, unsigned which,
		    const struct table_op *ops, unsigned n, unsigned *failed,
		    struct dpflow_error *err)
{
	(void)which;
	(void)ops;
	(void)n;
	*failed = 0;
	return dpflow_error_set(err, EINVAL, "pipe",
				"pipe '%s' is a ct pipe: packets make its "
				"connections, it takes no entries",
				pipe->name);
}

static void ct_sync(struct dpflow_pipe *pipe, unsigned from, unsigned to)
{
	(void)pipe;
	(void)from;
	(void)to;
}

static void ct_lookup(const struct dpflow_pipe *pipe, const void *image,
		      const uint8_t *keys, uint16_t n, uint32_t *values)
{
	(void)pipe;
	(void)image;
	(void)keys;
	for (uint16_t i = 0; i < n; i++)
		values[i] = TABLE_MISS;
}

static const struct table_kind ct_kind = {
    .create = ct_create,
    .destroy = ct_destroy,
    .apply = ct_apply,
    .sync = ct_sync,
    .lookup = ct_lookup,
};

const struct table_kind *table_kind_for(unsigned pipe_type)
{
	switch (pipe_type) {
	case DPFLOW_PIPE_BASIC:
		return &exact_kind;
	case DPFLOW_PIPE_LPM:
		return &lpm_kind;
	case DPFLOW_PIPE_CONTROL:
	case DPFLOW_PIPE_ACL:
		return &acl_kind;
	case DPFLOW_PIPE_HASH:
		return &hash_kind;
	case DPFLOW_PIPE_CT:
		return &ct_kind;
	default:
		return NULL;
	}
}
