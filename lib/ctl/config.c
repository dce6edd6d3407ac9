/*
 * The YAML config loader (config.h, documented in docs/config.md): ports,
 * then pipes (created so that every forwarding target exists first), then
 * every pipe's entries as one batch. All or nothing. Control thread only.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dpflow/maglev.h"

#include "ctl/config_internal.h"
#include "ctl/ctl_internal.h"
#include "ctl/field_value.h"

int cfg_parse_port_ref(struct loader *L, const struct ynode *x, uint16_t *port)
{
	const char *name;
	int id;

	CHECK(y_string(&L->d, x, &name));
	id = dpflow_ctx_port_find(L->ctx, name);
	if (id < 0)
		return yerr(&L->d, x, ENOENT, "no port named '%s'", name);
	*port = (uint16_t)id;
	return 0;
}

/* {rss: {queues: N, first: Q, inner: bool}} */
static int parse_rss(struct loader *L, const struct ynode *x,
		     struct dpflow_fwd *f)
{
	static const char *const keys[] = {"queues", "first", "inner", NULL};
	unsigned have = dpflow_ctx_rss_queues(L->ctx);
	struct ynode v;
	uint64_t n, first = 0;

	CHECK(y_check_keys(&L->d, x, keys));
	if (!y_get(&L->d, x, "queues", &v))
		return yerr(&L->d, x, EINVAL, "'queues' is missing");
	CHECK(y_u64(&L->d, &v, DPFLOW_RSS_QUEUES_MAX, &n));
	if (n == 0)
		return yerr(&L->d, &v, EINVAL, "at least one queue");
	if (y_get(&L->d, x, "first", &v))
		CHECK(y_u64(&L->d, &v, DPFLOW_RSS_QUEUES_MAX, &first));
	if (first + n > have)
		return yerr(
		    &L->d, y_get(&L->d, x, "first", &v) ? &v : x, EINVAL,
		    "rss queues %lu..%lu: the context has %u "
		    "(context.rss_queues)",
		    (unsigned long)first, (unsigned long)(first + n - 1), have);
	f->kind = DPFLOW_FWD_RSS;
	f->rss_queue = (uint16_t)first;
	f->rss_n = (uint16_t)n;
	if (y_get(&L->d, x, "inner", &v))
		CHECK(y_bool(&L->d, &v, &f->rss_inner));
	return 0;
}

static int parse_fwd(struct loader *L, const struct ynode *x, bool per_entry_ok,
		     struct dpflow_fwd *f)
{
	static const char *const keys[] = {"port", "pipe", "rss", "handler",
					   NULL};
	struct ynode v;
	const char *s = y_str(x);

	memset(f, 0, sizeof(*f));
	if (s && !strcmp(s, "drop")) {
		f->kind = DPFLOW_FWD_DROP;
		return 0;
	}
	if (s && !strcmp(s, "per-entry")) {
		if (!per_entry_ok)
			return yerr(&L->d, x, EINVAL,
				    "'per-entry' is only for a pipe's fwd");
		f->kind = DPFLOW_FWD_PER_ENTRY;
		return 0;
	}
	if (!y_is_map(x) || y_len(x) != 1)
		return yerr(&L->d, x, EINVAL,
			    "expected drop, per-entry, {port: NAME}, "
			    "{pipe: NAME}, {rss: {queues: N}} or "
			    "{handler: NAME}");
	CHECK(y_check_keys(&L->d, x, keys));
	if (y_get(&L->d, x, "port", &v)) {
		f->kind = DPFLOW_FWD_PORT;
		return cfg_parse_port_ref(L, &v, &f->port);
	}
	if (y_get(&L->d, x, "rss", &v))
		return parse_rss(L, &v, f);
	if (y_get(&L->d, x, "handler", &v)) {
		const char *name;

		CHECK(y_string(&L->d, &v, &name));
		if (dpflow_ctx_handler_find(L->ctx, name, &f->handler,
					    &f->handler_arg))
			return yerr(&L->d, &v, ENOENT,
				    "no handler named '%s' (the application "
				    "registers handlers; dpflow run has "
				    "'count')",
				    name);
		f->kind = DPFLOW_FWD_HANDLER;
		return 0;
	}
	y_get(&L->d, x, "pipe", &v);
	f->kind = DPFLOW_FWD_PIPE;
	f->pipe = dpflow_pipe_find(L->ctx, y_str(&v) ? y_str(&v) : "");
	if (!f->pipe)
		return yerr(&L->d, &v, ENOENT, "no pipe named '%s'",
			    y_str(&v) ? y_str(&v) : "");
	return 0;
}

/* color_fwd: {yellow: FWD, red: FWD} */
static int parse_color_fwd(struct loader *L, const struct ynode *x,
			   struct dpflow_color_fwd *c)
{
	static const char *const keys[] = {"yellow", "red", NULL};
	struct ynode v;

	CHECK(y_check_keys(&L->d, x, keys));
	if (y_get(&L->d, x, "yellow", &v)) {
		CHECK(parse_fwd(L, &v, false, &c->yellow));
		c->yellow_set = true;
	}
	if (y_get(&L->d, x, "red", &v)) {
		CHECK(parse_fwd(L, &v, false, &c->red));
		c->red_set = true;
	}
	return 0;
}

int cfg_parse_field_name(struct loader *L, const struct ynode *x,
			 uint16_t *field)
{
	const char *s;
	int f;

	CHECK(y_string(&L->d, x, &s));
	f = dpflow_field_lookup(s);
	if (f < 0)
		return yerr(&L->d, x, EINVAL,
			    "unknown field '%s' (see "
			    "docs/config.md)",
			    s);
	*field = (uint16_t)f;
	return 0;
}

int cfg_parse_value(struct loader *L, const struct ynode *x, unsigned field,
		    struct field_value *fv)
{
	char why[160];
	const char *s = y_str(x);

	if (!s || field_value_parse(field, s, fv, why, sizeof(why)))
		return yerr(&L->d, x, EINVAL, "%s",
			    s ? why : "expected a value");
	return 0;
}

/* Refuses a template mask of 0 (written as `mask: 0`, `V/0` or a /0
 * prefix) at @at: it looks at none of the field's bits, and the engine
 * would take it as all ones (flow.h). */
static int check_template_mask(struct loader *L, const struct ynode *at,
			       const struct dpflow_match_field *f)
{
	unsigned bytes = dpflow_field_bytes(f->field);

	for (unsigned b = 0; b < bytes && b < sizeof(f->mask); b++)
		if (f->mask[b])
			return 0;
	return yerr(&L->d, at, EINVAL,
		    "mask 0 matches nothing of %s: drop the field from the "
		    "template",
		    dpflow_field_name(f->field));
}

static int parse_match(struct loader *L, const struct ynode *x,
		       struct dpflow_match_tmpl *m)
{
	static const char *const keys[] = {"field", "value", "mask", NULL};

	if (!y_is_seq(x))
		return yerr(&L->d, x, EINVAL, "expected a list of fields");
	if (y_len(x) > DPFLOW_MATCH_FIELDS_MAX)
		return yerr(&L->d, x, EINVAL,
			    "%u match fields: a pipe has at most %d "
			    "(docs/config.md, Limits)",
			    y_len(x), DPFLOW_MATCH_FIELDS_MAX);
	m->n = (uint8_t)y_len(x);
	for (unsigned i = 0; i < m->n; i++) {
		struct dpflow_match_field *f = &m->f[i];
		struct ynode it, v;
		struct field_value fv;

		y_item(&L->d, x, i, &it);
		if (y_is_scalar(&it)) {
			CHECK(cfg_parse_field_name(L, &it, &f->field));
			f->per_entry = true;
			memset(f->mask, 0xff, sizeof(f->mask));
			continue;
		}
		CHECK(y_check_keys(&L->d, &it, keys));
		if (!y_get(&L->d, &it, "field", &v))
			return yerr(&L->d, &it, EINVAL, "'field' is missing");
		CHECK(cfg_parse_field_name(L, &v, &f->field));
		memset(f->mask, 0xff, sizeof(f->mask));
		f->per_entry = !y_get(&L->d, &it, "value", &v);
		if (!f->per_entry) {
			CHECK(cfg_parse_value(L, &v, f->field, &fv));
			if (fv.is_range)
				return yerr(&L->d, &v, EINVAL,
					    "a constant field takes a value "
					    "or value/mask, not a range");
			memcpy(f->value, fv.value, sizeof(f->value));
			memcpy(f->mask, fv.mask, sizeof(f->mask));
		}
		if (y_get(&L->d, &it, "mask", &v)) {
			CHECK(cfg_parse_value(L, &v, f->field, &fv));
			memcpy(f->mask, fv.value, sizeof(f->mask));
		}
		/* v is the mask, else the value, else the field: y_get()
		 * leaves it alone when a key is missing */
		CHECK(check_template_mask(L, &v, f));
	}
	return 0;
}

static int parse_type(struct loader *L, const struct ynode *x, uint8_t *type)
{
	const char *s;

	CHECK(y_string(&L->d, x, &s));
	for (unsigned t = 0; t < DPFLOW_PIPE__COUNT; t++)
		if (!strcmp(dpflow_pipe_type_name(t), s)) {
			*type = (uint8_t)t;
			return 0;
		}
	return yerr(&L->d, x, EINVAL,
		    "unknown pipe type '%s' (basic, control, acl, lpm, hash, "
		    "ct)",
		    s);
}

static const char *const pipe_keys[] = {
    "name",	 "type",    "root",	 "size",    "match",
    "actions",	 "monitor", "color_fwd", "fwd",	    "miss",
    "hash_seed", "maglev",  "ct",	 "entries", NULL};

static const char *const maglev_keys[] = {"slots", NULL};

/* A hash pipe's `maglev: {slots: M}`: a Maglev pipe of M slots (a prime;
 * 65537 by default). */
static int parse_maglev(struct loader *L, const struct ynode *x,
			struct dpflow_pipe_cfg *cfg)
{
	struct ynode v;
	uint64_t n = DPFLOW_MAGLEV_SIZE_DEFAULT;

	if (cfg->type != DPFLOW_PIPE_HASH)
		return yerr(&L->d, x, EINVAL,
			    "'maglev' is for hash pipes (type: hash)");
	CHECK(y_check_keys(&L->d, x, maglev_keys));
	if (y_get(&L->d, x, "slots", &v)) {
		CHECK(y_u64(&L->d, &v, DPFLOW_MAGLEV_SIZE_MAX, &n));
		if (n < 3 || !dpflow_maglev_is_prime((uint32_t)n))
			return yerr(&L->d, &v, EINVAL,
				    "%lu is not a prime of at least 3: "
				    "Maglev's permutations need a prime "
				    "number of slots (65537, 131071, "
				    "1000003...)",
				    (unsigned long)n);
	}
	cfg->maglev_slots = (uint32_t)n;
	return 0;
}

static int parse_pipe(struct loader *L, const struct ynode *x,
		      struct dpflow_pipe_cfg *cfg)
{
	struct ynode v;
	uint64_t n;
	bool is_ct;

	memset(cfg, 0, sizeof(*cfg));
	CHECK(y_check_keys(&L->d, x, pipe_keys));
	if (!y_get(&L->d, x, "name", &v))
		return yerr(&L->d, x, EINVAL, "'name' is missing");
	CHECK(y_string(&L->d, &v, &cfg->name));
	if (!y_get(&L->d, x, "type", &v))
		return yerr(&L->d, x, EINVAL, "'type' is missing");
	CHECK(parse_type(L, &v, &cfg->type));
	is_ct = cfg->type == DPFLOW_PIPE_CT;
	if (y_get(&L->d, x, "root", &v)) {
		cfg->root = true;
		CHECK(cfg_parse_port_ref(L, &v, &cfg->port));
	}
	cfg->size = 1024;
	if (y_get(&L->d, x, "size", &v)) {
		CHECK(y_u64(&L->d, &v, 1u << 26, &n));
		cfg->size = (uint32_t)n;
	}
	/* a ct pipe tracks the 5-tuple: its template, if any, holds
	 * constant fields only (the engine checks) */
	if (y_get(&L->d, x, "match", &v))
		CHECK(parse_match(L, &v, &cfg->match));
	else if (!is_ct)
		return yerr(&L->d, x, EINVAL, "'match' is missing");
	if (y_get(&L->d, x, "actions", &v))
		CHECK(cfg_parse_actions(L, &v, cfg));
	if (y_get(&L->d, x, "monitor", &v))
		CHECK(cfg_parse_monitor(L, &v, cfg));
	if (y_get(&L->d, x, "color_fwd", &v)) {
		if (!cfg->monitor.meter.alg && !cfg->monitor.shared_meter)
			return yerr(&L->d, &v, EINVAL,
				    "colour forwarding needs a meter "
				    "(monitor.meter or monitor.shared_meter)");
		CHECK(parse_color_fwd(L, &v, &cfg->color_fwd));
	}
	if (y_get(&L->d, x, "fwd", &v))
		CHECK(parse_fwd(L, &v, !is_ct, &cfg->fwd));
	if (y_get(&L->d, x, "miss", &v))
		CHECK(parse_fwd(L, &v, false, &cfg->miss_fwd));
	if (y_get(&L->d, x, "hash_seed", &v)) {
		if (cfg->type != DPFLOW_PIPE_HASH)
			return yerr(&L->d, &v, EINVAL,
				    "'hash_seed' is for hash pipes");
		CHECK(y_u64(&L->d, &v, UINT32_MAX, &n));
		cfg->hash_seed = (uint32_t)n;
	}
	if (y_get(&L->d, x, "maglev", &v))
		CHECK(parse_maglev(L, &v, cfg));
	if (y_get(&L->d, x, "ct", &v)) {
		if (!is_ct)
			return yerr(&L->d, &v, EINVAL, "'ct' is for ct pipes");
		CHECK(cfg_parse_ct(L, &v, &cfg->ct));
	}
	if (is_ct && y_get(&L->d, x, "entries", &v))
		return yerr(&L->d, &v, EINVAL,
			    "a ct pipe takes no entries: its packets make the "
			    "connections");
	return 0;
}

/* An entry's own monitor: meter, shared counter, aging timeout. */
static int parse_entry_monitor(struct loader *L,
			       const struct dpflow_pipe_cfg *cfg,
			       const struct ynode *x,
			       struct dpflow_entry_cfg *e)
{
	struct ynode v;

	if (y_get(&L->d, x, "meter", &v)) {
		if (!cfg->monitor.meter.alg)
			return yerr(&L->d, &v, EINVAL,
				    "pipe '%s' has no meter per entry "
				    "(monitor.meter) to override",
				    cfg->name);
		CHECK(cfg_parse_meter(L, &v, &e->meter));
	}
	if (y_get(&L->d, x, "shared_counter", &v))
		CHECK(cfg_parse_shared_counter(L, &v, &e->shared_counter));
	if (y_get(&L->d, x, "aging_ms", &v)) {
		if (!cfg->monitor.aging_ms)
			return yerr(&L->d, &v, EINVAL,
				    "pipe '%s' has no aging (monitor.aging_ms) "
				    "to override",
				    cfg->name);
		CHECK(cfg_parse_aging(L, &v, &e->aging_ms));
	}
	return 0;
}

/* The per-entry match values of an entry (every pipe type but hash). */
static int parse_entry_match(struct loader *L,
			     const struct dpflow_pipe_cfg *cfg,
			     const struct ynode *x, struct dpflow_entry_cfg *e)
{
	struct ynode v;
	unsigned off = 0, k = 0;
	int last = -1; /* LPM: the address is the last per-entry field */

	if (!y_get(&L->d, x, "match", &v) || !y_is_map(&v))
		return yerr(&L->d, x, EINVAL,
			    "'match' (a mapping field: value) is missing");
	/* every key must name a per-entry field of the template */
	for (unsigned i = 0; i < y_len(&v); i++) {
		const char *fname;
		struct ynode fv;
		bool ok = false;

		y_pair(&L->d, &v, i, &fname, &fv);
		for (unsigned f = 0; f < cfg->match.n && !ok; f++)
			ok = cfg->match.f[f].per_entry &&
			     !strcmp(dpflow_field_name(cfg->match.f[f].field),
				     fname);
		if (!ok)
			return yerr(&L->d, &fv, EINVAL,
				    "'%s' is not a per-entry field of pipe "
				    "'%s'",
				    fname, cfg->name);
	}
	for (unsigned f = 0; f < cfg->match.n; f++)
		if (cfg->match.f[f].per_entry)
			last = (int)f;
	for (unsigned f = 0; f < cfg->match.n; f++) {
		const struct dpflow_match_field *mf = &cfg->match.f[f];
		unsigned bytes = dpflow_field_bytes(mf->field);
		bool exact = cfg->type == DPFLOW_PIPE_BASIC ||
			     (cfg->type == DPFLOW_PIPE_LPM && (int)f != last);
		struct field_value val;
		struct ynode fv;

		if (!mf->per_entry)
			continue;
		if (!y_get(&L->d, &v, dpflow_field_name(mf->field), &fv)) {
			if (cfg->type == DPFLOW_PIPE_BASIC ||
			    cfg->type == DPFLOW_PIPE_LPM)
				return yerr(&L->d, &v, EINVAL,
					    "field '%s' is missing",
					    dpflow_field_name(mf->field));
			/* CONTROL/ACL: an absent field is a wildcard */
			off += bytes;
			k++;
			continue;
		}
		CHECK(cfg_parse_value(L, &fv, mf->field, &val));
		if (exact &&
		    (val.is_range || val.has_mask ||
		     (val.prefix_len >= 0 && (unsigned)val.prefix_len !=
						 dpflow_field_bits(mf->field))))
			return yerr(&L->d, &fv, EINVAL,
				    "%s: no mask, prefix or range",
				    cfg->type == DPFLOW_PIPE_BASIC
					? "a basic pipe matches exact values"
					: "the fields before an lpm pipe's "
					  "address match exact values");
		if (cfg->type == DPFLOW_PIPE_LPM && (int)f == last)
			e->prefix_len =
			    (uint8_t)(val.prefix_len >= 0
					  ? val.prefix_len
					  : (int)dpflow_field_bits(mf->field));
		if (val.is_range) {
			if (cfg->type != DPFLOW_PIPE_ACL)
				return yerr(&L->d, &fv, EINVAL,
					    "ranges are for acl pipes");
			e->range_set |= (uint16_t)(1u << k);
			e->range_lo[k] = val.lo;
			e->range_hi[k] = val.hi;
		}
		memcpy(e->key + off, val.value, bytes);
		memcpy(e->mask + off, val.mask, bytes);
		off += bytes;
		k++;
	}
	return 0;
}

/*
 * Per-entry action values, by position in the entry's template: item i
 * goes with action i; a constant action's item is null, and items past
 * the template's actions are refused.
 */
static int parse_entry_values(struct loader *L,
			      const struct dpflow_pipe_cfg *cfg,
			      const struct ynode *x, struct dpflow_entry_cfg *e)
{
	const struct dpflow_action_tmpl *t = &cfg->actions[e->action_tmpl];
	struct ynode v, it;
	bool have = y_get(&L->d, x, "values", &v), encap = false;

	if (have && !cfg->n_action_tmpls)
		return yerr(&L->d, &v, EINVAL,
			    "pipe '%s' has no action templates to take values",
			    cfg->name);
	if (have && !y_is_seq(&v))
		return yerr(&L->d, &v, EINVAL,
			    "expected a list of action values");
	if (have && y_len(&v) > t->n) {
		y_item(&L->d, &v, t->n, &it);
		return yerr(&L->d, &it, EINVAL,
			    "surplus item: action template %u has %u actions",
			    e->action_tmpl, t->n);
	}
	for (unsigned i = 0; i < t->n; i++) {
		if (!t->a[i].per_entry) {
			if (have && y_item(&L->d, &v, i, &it) &&
			    !y_is_null(&it))
				return yerr(&L->d, &it, EINVAL,
					    "action %u ('%s') takes no value "
					    "from the entry: write null",
					    i,
					    dpflow_action_name(t->a[i].kind));
			continue;
		}
		if (!have || !y_item(&L->d, &v, i, &it))
			return yerr(&L->d, x, EINVAL,
				    "action %u ('%s') takes its value from the "
				    "entry: 'values' needs item %u",
				    i, dpflow_action_name(t->a[i].kind), i);
		if (t->a[i].kind != DPFLOW_ACT_ENCAP) {
			CHECK(cfg_parse_action_value(L, &it, &t->a[i],
						     e->action_value[i]));
			continue;
		}
		/* the entry's outer headers: one per-entry encap each */
		if (encap)
			return yerr(&L->d, &it, EINVAL,
				    "one per-entry encap per action template");
		encap = true;
		CHECK(cfg_parse_encap(L, &it, &e->encap));
	}
	return 0;
}

static const char *const entry_keys[] = {
    "match", "index",	       "priority", "action", "values", "fwd",
    "meter", "shared_counter", "aging_ms", "member", "weight", NULL};

/* A Maglev pipe's entry is a member: its name, no slot and no match. */
static int parse_entry_member(struct loader *L,
			      const struct dpflow_pipe_cfg *cfg,
			      const struct ynode *x, struct dpflow_entry_cfg *e)
{
	static const char *const not_keys[] = {"match", "index"};
	struct ynode v;
	const char *s;

	for (unsigned k = 0; k < 2; k++)
		if (y_get(&L->d, x, not_keys[k], &v))
			return yerr(&L->d, &v, EINVAL,
				    "pipe '%s' is a maglev pipe: its entries "
				    "are members ('member', 'weight'), they "
				    "take no '%s'",
				    cfg->name, not_keys[k]);
	if (!y_get(&L->d, x, "member", &v))
		return yerr(&L->d, x, EINVAL,
			    "'member' (the member's stable name) is missing");
	CHECK(y_string(&L->d, &v, &s)); /* not empty */
	if (strlen(s) > DPFLOW_MAGLEV_NAME_MAX)
		return yerr(&L->d, &v, EINVAL,
			    "a member name has at most %u bytes, not %zu",
			    DPFLOW_MAGLEV_NAME_MAX, strlen(s));
	memcpy(e->member, s, strlen(s) + 1);
	return 0;
}

/* What names an entry in its pipe: the match (or a hash pipe's slot, a
 * maglev pipe's member) and the priority. */
static int parse_entry_key(struct loader *L, const struct dpflow_pipe_cfg *cfg,
			   const struct ynode *x, struct dpflow_entry_cfg *e)
{
	struct ynode v;
	uint64_t n;

	memset(e, 0, sizeof(*e));
	CHECK(y_check_keys(&L->d, x, entry_keys));
	if (!cfg->maglev_slots && y_get(&L->d, x, "member", &v))
		return yerr(&L->d, &v, EINVAL,
			    "'member' is for the entries of maglev pipes "
			    "(a hash pipe with 'maglev')");
	if (cfg->maglev_slots) {
		CHECK(parse_entry_member(L, cfg, x, e));
	} else if (cfg->type == DPFLOW_PIPE_HASH) {
		/* the packet's key picks the slot: an entry names its slot */
		if (y_get(&L->d, x, "match", &v))
			return yerr(&L->d, &v, EINVAL,
				    "a hash pipe's entries take 'index' (the "
				    "slot hash %% size), not 'match'");
		if (!y_get(&L->d, x, "index", &v))
			return yerr(&L->d, x, EINVAL,
				    "'index' (the slot, 0..%u) is missing",
				    cfg->size - 1);
		CHECK(y_u64(&L->d, &v, UINT32_MAX, &n));
		if (n >= cfg->size)
			return yerr(&L->d, &v, ERANGE,
				    "index %lu: pipe '%s' has slots 0..%u",
				    (unsigned long)n, cfg->name, cfg->size - 1);
		e->hash_index = (uint32_t)n;
	} else {
		if (y_get(&L->d, x, "index", &v))
			return yerr(&L->d, &v, EINVAL,
				    "'index' is for the entries of hash pipes");
		CHECK(parse_entry_match(L, cfg, x, e));
	}
	if (y_get(&L->d, x, "priority", &v)) {
		if (cfg->type != DPFLOW_PIPE_CONTROL &&
		    cfg->type != DPFLOW_PIPE_ACL)
			return yerr(&L->d, &v, EINVAL,
				    "%s %s pipe's entries have no priority "
				    "(control and acl pipes have)",
				    cfg->type == DPFLOW_PIPE_LPM ? "an" : "a",
				    dpflow_pipe_type_name(cfg->type));
		CHECK(y_u64(&L->d, &v, UINT32_MAX, &n));
		e->priority = (uint32_t)n;
	}
	return 0;
}

/* One entry of a pipe configured as @cfg, from @x. */
static int parse_entry(struct loader *L, const struct dpflow_pipe_cfg *cfg,
		       const struct ynode *x, struct dpflow_entry_cfg *e)
{
	struct ynode v;
	uint64_t n;

	CHECK(parse_entry_key(L, cfg, x, e));
	if (cfg->maglev_slots) {
		n = 1;
		if (y_get(&L->d, x, "weight", &v))
			CHECK(y_u64(&L->d, &v, DPFLOW_MAGLEV_WEIGHT_MAX, &n));
		e->weight = (uint32_t)n;
	} else if (y_get(&L->d, x, "weight", &v)) {
		return yerr(&L->d, &v, EINVAL,
			    "'weight' is for the entries of maglev pipes "
			    "(a hash pipe with 'maglev')");
	}
	if (y_get(&L->d, x, "action", &v)) {
		if (!cfg->n_action_tmpls)
			return yerr(&L->d, &v, EINVAL,
				    "pipe '%s' has no action templates",
				    cfg->name);
		CHECK(y_u64(&L->d, &v, UINT32_MAX, &n));
		if (n >= cfg->n_action_tmpls)
			return yerr(&L->d, &v, EINVAL,
				    "pipe '%s' has %u action templates "
				    "(0..%u)",
				    cfg->name, cfg->n_action_tmpls,
				    cfg->n_action_tmpls - 1u);
		e->action_tmpl = (uint8_t)n;
	}
	CHECK(parse_entry_values(L, cfg, x, e));
	if (y_get(&L->d, x, "fwd", &v)) {
		if (cfg->fwd.kind != DPFLOW_FWD_PER_ENTRY)
			return yerr(&L->d, &v, EINVAL,
				    "pipe '%s' does not forward per entry",
				    cfg->name);
		CHECK(parse_fwd(L, &v, false, &e->fwd));
	} else if (cfg->fwd.kind == DPFLOW_FWD_PER_ENTRY) {
		return yerr(&L->d, x, EINVAL,
			    "pipe '%s' forwards per entry: 'fwd' is missing",
			    cfg->name);
	}
	return parse_entry_monitor(L, cfg, x, e);
}

static void entry_status(struct dpflow_entry *e, int status,
			 const struct dpflow_error *err, void *user)
{
	struct loader *L = (struct loader *)((void **)user)[0];
	struct ynode *at = (struct ynode *)((void **)user)[1];

	(void)e;
	if (status == DPFLOW_ENTRY_ERROR && !L->batch_rc) {
		L->batch_rc = -(err && err->code ? err->code : EINVAL);
		yerr(&L->d, at, err && err->code ? err->code : EINVAL, "%s",
		     err ? err->msg : "invalid entry");
	}
}

static const struct dpflow_entry_cfg *queued_cfg(const void *arg, size_t i)
{
	return dpflow_entry_cfg(((struct dpflow_entry *const *)arg)[i]);
}

/*
 * Refuse an entry of @pipe identical to an earlier one of the file
 * (ctl_entry_clash()). @ents and @at: the pipe's @n queued entries and
 * their nodes.
 */
static int check_identical(struct loader *L, const struct dpflow_pipe *pipe,
			   struct dpflow_entry *const *ents,
			   const struct ynode *at, unsigned n)
{
	struct ctl_clash c;
	int rc = ctl_entry_clash(pipe, queued_cfg, ents, n, false, &c);

	if (rc < 0)
		return yerr(&L->d, NULL, ENOMEM, "out of memory");
	if (!rc)
		return 0;
	return yerr(&L->d, &at[c.item], EEXIST,
		    "an entry with this match%s exists: entries[%u] (line %lu)",
		    ctl_clash_prio(pipe) ? " and priority" : "", c.other,
		    (unsigned long)at[c.other].n->start_mark.line + 1);
}

static int load_entries(struct loader *L, const struct ynode *pipes)
{
	void **users;
	struct dpflow_entry **queued;
	unsigned total = 0, u = 0;
	struct dpflow_error e = {0};
	int rc = 0;

	for (unsigned i = 0; i < y_len(pipes); i++) {
		struct ynode p, ents;

		y_item(&L->d, pipes, i, &p);
		if (y_get(&L->d, &p, "entries", &ents))
			total += y_len(&ents);
	}
	if (!total)
		return 0;
	L->entry_at = calloc(total, sizeof(*L->entry_at));
	users = calloc(2 * (size_t)total, sizeof(void *));
	queued = calloc(total, sizeof(*queued));
	if (!L->entry_at || !users || !queued) {
		free(users);
		free(queued);
		return yerr(&L->d, NULL, ENOMEM, "out of memory");
	}
	for (unsigned i = 0; i < y_len(pipes) && !rc; i++) {
		struct ynode p, ents, name;
		struct dpflow_pipe_cfg cfg;
		struct dpflow_pipe *pipe;
		unsigned u0 = u;

		y_item(&L->d, pipes, i, &p);
		if (!y_get(&L->d, &p, "entries", &ents))
			continue;
		y_get(&L->d, &p, "name", &name);
		pipe = dpflow_pipe_find(L->ctx, y_str(&name));
		if (!y_is_seq(&ents)) {
			rc = yerr(&L->d, &ents, EINVAL,
				  "expected a list of entries");
			break;
		}
		/* the pipe's config as parsed, for its templates */
		if (parse_pipe(L, &p, &cfg)) {
			rc = -(L->d.err ? L->d.err->code : EINVAL);
			break;
		}
		for (unsigned k = 0; k < y_len(&ents) && !rc; k++, u++) {
			struct dpflow_entry_cfg ec;
			struct ynode it;

			y_item(&L->d, &ents, k, &it);
			L->entry_at[u] = it;
			rc = parse_entry(L, &cfg, &it, &ec);
			if (rc)
				break;
			users[2 * u] = L;
			users[2 * u + 1] = &L->entry_at[u];
			queued[u] = dpflow_entry_add(L->q, pipe, &ec,
						     &users[2 * u], &e);
			if (!queued[u])
				rc = yerr(&L->d, &it, e.code, "%s", e.msg);
		}
		if (!rc)
			rc = check_identical(L, pipe, queued + u0,
					     L->entry_at + u0, u - u0);
	}
	free(queued);
	if (rc) {
		free(users);
		return rc;
	}
	L->batch_rc = 0;
	dpflow_entries_process(L->q, entry_status, &e);
	free(users);
	return L->batch_rc;
}

/* Forwarding of a pipe that may name another: fwd, miss, colour fwd. */
#define PIPE_DEPS 5

/*
 * The pipe that forwarding @d (0..PIPE_DEPS-1) of pipe @p names (NULL:
 * none), its node in @at.
 */
static const char *dep_pipe(struct loader *L, const struct ynode *p, unsigned d,
			    struct ynode *at)
{
	static const char *const deps[PIPE_DEPS] = {"fwd", "miss", "yellow",
						    "red", "dnat"};
	struct ynode cf, f;

	if (d == 4) { /* a ct pipe's DNAT table: ct.dnat.pipe */
		if (!y_get(&L->d, p, "ct", &cf) || !y_is_map(&cf) ||
		    !y_get(&L->d, &cf, deps[d], &f) || !y_is_map(&f) ||
		    !y_get(&L->d, &f, "pipe", at))
			return NULL;
		return y_str(at);
	}
	if (d >= 2 && !y_get(&L->d, p, "color_fwd", &cf))
		return NULL;
	if (!y_get(&L->d, d < 2 ? p : &cf, deps[d], &f) ||
	    !y_get(&L->d, &f, "pipe", at))
		return NULL;
	return y_str(at);
}

/* The position of the pipe named @name in the list @pipes, else -1. */
static int pipe_pos(struct loader *L, const struct ynode *pipes,
		    const char *name)
{
	for (unsigned i = 0; i < y_len(pipes); i++) {
		struct ynode p, v;

		if (y_item(&L->d, pipes, i, &p) &&
		    y_get(&L->d, &p, "name", &v) && y_str(&v) &&
		    !strcmp(y_str(&v), name))
			return (int)i;
	}
	return -1;
}

/*
 * No pipe left (@made false) can be created: one names a pipe the config
 * lacks ("pipe 'x' does not exist"), or they wait for each other ("pipe
 * 'x' makes a loop (x -> y -> x)", at the forwarding that closes it).
 */
static int pipes_stuck(struct loader *L, const struct ynode *pipes,
		       const bool *made)
{
	unsigned n = y_len(pipes), len = 0, at = 0;
	unsigned *path = calloc(n + 1, sizeof(*path));
	struct ynode p, t, *via = calloc(n + 1, sizeof(*via));
	char chain[DPFLOW_ERROR_MSG_MAX / 2] = "";
	size_t c = 0;
	int rc;

	if (!path || !via) {
		free(path);
		free(via);
		return yerr(&L->d, NULL, ENOMEM, "out of memory");
	}
	for (unsigned i = 0; i < n; i++) {
		y_item(&L->d, pipes, i, &p);
		for (unsigned d = 0; !made[i] && d < PIPE_DEPS; d++) {
			const char *name = dep_pipe(L, &p, d, &t);

			if (name && pipe_pos(L, pipes, name) < 0) {
				free(path);
				free(via);
				return yerr(&L->d, &t, ENOENT,
					    "pipe '%s' does not exist", name);
			}
		}
	}
	/* every waiting pipe waits for another waiting one: walk until a
	 * pipe comes again */
	for (unsigned i = 0; i < n; i++)
		if (!made[i]) {
			path[len++] = i;
			break;
		}
	for (;;) {
		int next = -1;

		y_item(&L->d, pipes, path[len - 1], &p);
		for (unsigned d = 0; next < 0 && d < PIPE_DEPS; d++) {
			const char *name = dep_pipe(L, &p, d, &t);
			int k = name ? pipe_pos(L, pipes, name) : -1;

			if (k >= 0 && !made[k]) {
				next = k;
				via[len - 1] = t;
			}
		}
		if (next < 0) /* cannot be: it would have been created */
			next = (int)path[len - 1];
		for (at = 0; at < len && path[at] != (unsigned)next; at++)
			;
		path[len++] = (unsigned)next;
		if (at < len - 1 || len > n)
			break;
	}
	for (unsigned k = at; k < len && c < sizeof(chain); k++) {
		struct ynode name;

		y_item(&L->d, pipes, path[k], &p);
		y_get(&L->d, &p, "name", &name);
		c += (size_t)snprintf(chain + c, sizeof(chain) - c, "%s%s",
				      k > at ? " -> " : "", y_str(&name));
	}
	y_item(&L->d, pipes, path[at], &p);
	y_get(&L->d, &p, "name", &t);
	rc = yerr(&L->d, &via[at], ELOOP, "pipe '%s' makes a loop (%s)",
		  y_str(&t), chain);
	free(path);
	free(via);
	return rc;
}

/* Create the pipes in an order where forwarding targets come first. */
static int load_pipes(struct loader *L, const struct ynode *pipes)
{
	unsigned n = y_len(pipes), done = 0;
	bool *made;
	int rc = 0;

	if (!y_is_seq(pipes))
		return yerr(&L->d, pipes, EINVAL, "expected a list of pipes");
	made = calloc(n ? n : 1, sizeof(*made));
	if (!made)
		return yerr(&L->d, NULL, ENOMEM, "out of memory");
	while (done < n && !rc) {
		unsigned before = done;

		for (unsigned i = 0; i < n && !rc; i++) {
			struct ynode p, t;
			struct dpflow_pipe_cfg cfg;
			struct dpflow_error e = {0};
			bool ready = true;

			if (made[i])
				continue;
			y_item(&L->d, pipes, i, &p);
			if (!y_is_map(&p)) {
				rc = yerr(&L->d, &p, EINVAL,
					  "a pipe is a mapping");
				break;
			}
			for (unsigned d = 0; d < PIPE_DEPS; d++) {
				const char *name = dep_pipe(L, &p, d, &t);

				if (name && !dpflow_pipe_find(L->ctx, name))
					ready = false;
			}
			if (!ready)
				continue;
			if (parse_pipe(L, &p, &cfg) ||
			    !dpflow_pipe_create(L->ctx, &cfg, &e)) {
				if (e.code)
					yerr(&L->d, &p, e.code, "%s%s%s",
					     e.field ? e.field : "",
					     e.field ? ": " : "", e.msg);
				rc = -(L->d.err ? L->d.err->code : EINVAL);
				break;
			}
			made[i] = true;
			done++;
		}
		if (!rc && done == before)
			rc = pipes_stuck(L, pipes, made);
	}
	free(made);
	return rc;
}

static int load_ports(struct loader *L, const struct ynode *ports)
{
	static const char *const keys[] = {"name", "uri", NULL};

	if (!y_is_seq(ports))
		return yerr(&L->d, ports, EINVAL, "expected a list of ports");
	for (unsigned i = 0; i < y_len(ports); i++) {
		struct ynode p, name, uri;
		struct dpflow_error e = {0};

		y_item(&L->d, ports, i, &p);
		CHECK(y_check_keys(&L->d, &p, keys));
		if (!y_get(&L->d, &p, "name", &name) ||
		    !y_get(&L->d, &p, "uri", &uri))
			return yerr(&L->d, &p, EINVAL,
				    "a port needs 'name' and 'uri'");
		if (dpflow_ctx_port_add(L->ctx, y_str(&name), y_str(&uri), &e) <
		    0)
			return yerr(&L->d,
				    e.field && !strcmp(e.field, "name") ? &name
									: &uri,
				    e.code ? e.code : EINVAL, "%s", e.msg);
	}
	return 0;
}

/* Make the context: the `context` section's parameters, shared meters,
 * and the application's handlers. */
static int make_ctx(struct loader *L, const struct ynode *root,
		    const struct dpflow_config_opts *opts)
{
	struct dpflow_ctx_params cp = {0};
	struct dpflow_meter_cfg *meters = NULL;
	struct dpflow_error e = {0};
	struct ynode cx = {0};
	bool has_cx = y_get(&L->d, root, "context", &cx);
	int rc = 0;

	cp.pool_slots = opts ? opts->pool_slots : 0;
	cp.data_room = opts ? opts->data_room : 0;
	cp.check_only = opts && opts->check_only;
	if (has_cx)
		CHECK(cfg_parse_context(L, &cx, &cp, &meters));
	L->ctx = dpflow_ctx_create(&cp, &e);
	if (!L->ctx)
		rc = yerr(&L->d, has_cx ? &cx : NULL, e.code ? e.code : EINVAL,
			  "%s", e.msg);
	if (!rc && has_cx)
		rc = cfg_shared_meters_config(L, &cx, meters);
	free(meters);
	for (unsigned i = 0; !rc && opts && i < opts->n_handlers; i++) {
		const struct dpflow_handler_def *h = &opts->handlers[i];

		if (dpflow_ctx_handler_register(L->ctx, h->name, h->fn, h->arg,
						&e))
			rc = yerr(&L->d, NULL, e.code ? e.code : EINVAL,
				  "handler '%s': %s", h->name ? h->name : "",
				  e.msg);
	}
	return rc;
}

static struct dpflow_ctx *load(yaml_parser_t *parser, const char *name,
			       const struct dpflow_config_opts *opts,
			       struct dpflow_error *err)
{
	static const char *const top_keys[] = {"context", "ports", "pipes",
					       "apps", NULL};
	struct loader L;
	struct ynode root = {0}, v;
	int rc;

	memset(&L, 0, sizeof(L));
	L.d.file = name;
	L.d.err = err;
	if (!yaml_parser_load(parser, &L.d.doc)) {
		dpflow_error_set(err, EINVAL, NULL, "%s:%lu: %s", name,
				 (unsigned long)parser->problem_mark.line + 1,
				 parser->problem ? parser->problem
						 : "invalid YAML");
		return NULL;
	}
	root.n = yaml_document_get_root_node(&L.d.doc);
	if (!root.n) {
		yerr(&L.d, NULL, EINVAL, "empty configuration");
		goto fail;
	}
	if (y_check_doc(&L.d, &root) || y_check_keys(&L.d, &root, top_keys) ||
	    make_ctx(&L, &root, opts))
		goto fail;
	L.q = dpflow_queue_create(L.ctx, err);
	if (!L.q)
		goto fail;
	if (!y_get(&L.d, &root, "ports", &v)) {
		yerr(&L.d, &root, EINVAL, "'ports' is missing");
		goto fail;
	}
	rc = load_ports(&L, &v);
	if (!rc && y_get(&L.d, &root, "pipes", &v)) {
		rc = load_pipes(&L, &v);
		if (!rc)
			rc = load_entries(&L, &v);
	}
	if (rc)
		goto fail;
	dpflow_queue_destroy(L.q);
	free(L.entry_at);
	yaml_document_delete(&L.d.doc);
	return L.ctx;
fail:
	dpflow_queue_destroy(L.q);
	/* a config that fails to load leaves every existing file as it was */
	dpflow_ctx_discard(L.ctx);
	dpflow_ctx_destroy(L.ctx);
	free(L.entry_at);
	yaml_document_delete(&L.d.doc);
	return NULL;
}

struct dpflow_ctx *dpflow_config_load(const char *path,
				      const struct dpflow_config_opts *opts,
				      struct dpflow_error *err)
{
	yaml_parser_t parser;
	struct dpflow_ctx *ctx;
	FILE *f = fopen(path, "rb");
	struct stat st;

	if (!f) {
		dpflow_error_set(err, errno, "config", "%s: %s", path,
				 strerror(errno));
		return NULL;
	}
	/* fopen() opens a directory for reading; reading it fails later */
	if (!fstat(fileno(f), &st) && S_ISDIR(st.st_mode)) {
		fclose(f);
		dpflow_error_set(err, EISDIR, "config",
				 "%s: is a directory, not a config file", path);
		return NULL;
	}
	yaml_parser_initialize(&parser);
	yaml_parser_set_input_file(&parser, f);
	ctx = load(&parser, path, opts, err);
	yaml_parser_delete(&parser);
	fclose(f);
	return ctx;
}

struct dpflow_ctx *dpflow_config_load_string(const char *yaml, const char *name,
					     const struct dpflow_config_opts *o,
					     struct dpflow_error *err)
{
	yaml_parser_t parser;
	struct dpflow_ctx *ctx;

	yaml_parser_initialize(&parser);
	yaml_parser_set_input_string(&parser, (const unsigned char *)yaml,
				     strlen(yaml));
	ctx = load(&parser, name, o, err);
	yaml_parser_delete(&parser);
	return ctx;
}

/*
 * yerr() wrote "FILE:LINE: PATH: msg" with an empty FILE (or ": msg" when
 * no node was at fault): keep "PATH: msg", the line of a one-entry text
 * telling nothing.
 */
static void entry_error(struct dpflow_error *err, const struct dpflow_error *e,
			const char *path)
{
	const char *m = e->msg;

	if (!err)
		return;
	if (m[0] == ':' && m[1] >= '0' && m[1] <= '9') {
		m++;
		while (*m >= '0' && *m <= '9')
			m++;
		if (m[0] == ':' && m[1] == ' ')
			m += 2;
		dpflow_error_set(err, e->code ? e->code : EINVAL, NULL, "%s",
				 m);
	} else {
		if (m[0] == ':' && m[1] == ' ')
			m += 2;
		dpflow_error_set(err, e->code ? e->code : EINVAL, NULL,
				 "%s%s%s", path, *path ? ": " : "", m);
	}
}

int dpflow_config_parse_entry(struct dpflow_ctx *ctx,
			      const struct dpflow_pipe *pipe, const char *text,
			      size_t len, const char *path, unsigned flags,
			      struct dpflow_entry_cfg *e,
			      struct dpflow_error *err)
{
	const struct dpflow_pipe_cfg *cfg = dpflow_pipe_cfg(pipe);
	struct dpflow_error le = {0};
	yaml_parser_t parser;
	struct loader L;
	struct ynode root;
	int rc;

	path = path ? path : "";
	memset(e, 0, sizeof(*e));
	if (cfg->type == DPFLOW_PIPE_CT)
		return dpflow_error_set(err, EINVAL, NULL,
					"%s%spipe '%s' is a ct pipe: it takes "
					"no entries",
					path, *path ? ": " : "", cfg->name);
	memset(&L, 0, sizeof(L));
	memset(&root, 0, sizeof(root));
	L.ctx = ctx;
	L.d.file = "";
	L.d.err = &le;
	yaml_parser_initialize(&parser);
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	if (!yaml_parser_load(&parser, &L.d.doc)) {
		rc = dpflow_error_set(
		    err, EINVAL, NULL, "%s%snot valid YAML or JSON: %s", path,
		    *path ? ": " : "", parser.problem ? parser.problem : "?");
		yaml_parser_delete(&parser);
		return rc;
	}
	yaml_parser_delete(&parser);
	root.n = yaml_document_get_root_node(&L.d.doc);
	snprintf(root.path, sizeof(root.path), "%s", path);
	if (!y_is_map(&root))
		rc = yerr(&L.d, root.n ? &root : NULL, EINVAL,
			  "an entry is a mapping (match: ..., fwd: ...)");
	else
		rc = y_check_doc(&L.d, &root);
	if (!rc)
		rc = flags & DPFLOW_ENTRY_PARSE_KEY
			 ? parse_entry_key(&L, cfg, &root, e)
			 : parse_entry(&L, cfg, &root, e);
	yaml_document_delete(&L.d.doc);
	if (rc)
		entry_error(err, &le, path);
	return rc;
}
