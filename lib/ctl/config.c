/*
 * The YAML config loader (config.h, documented in docs/config.md): ports,
 * then pipes (created so that every forwarding target exists first), then
 * every pipe's entries as one batch. All or nothing. Control thread only.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/config.h"

#include "ctl/field_value.h"
#include "ctl/yaml_doc.h"

struct loader {
	struct ydoc d;
	struct dpflow_ctx *ctx;
	struct dpflow_queue *q;
	/* where each queued entry came from, for batch errors */
	struct ynode *entry_at;
	unsigned n_entries;
	int batch_rc;
};

#define CHECK(x)                    \
	do {                        \
		int rc_ = (x);      \
		if (rc_)            \
			return rc_; \
	} while (0)

static int parse_port_ref(struct loader *L, const struct ynode *x,
			  uint16_t *port)
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

static int parse_fwd(struct loader *L, const struct ynode *x, bool per_entry_ok,
		     struct dpflow_fwd *f)
{
	static const char *const keys[] = {"port", "pipe", NULL};
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
			    "expected drop, per-entry, {port: NAME} or "
			    "{pipe: NAME}");
	CHECK(y_check_keys(&L->d, x, keys));
	if (y_get(&L->d, x, "port", &v)) {
		f->kind = DPFLOW_FWD_PORT;
		return parse_port_ref(L, &v, &f->port);
	}
	y_get(&L->d, x, "pipe", &v);
	f->kind = DPFLOW_FWD_PIPE;
	f->pipe = dpflow_pipe_find(L->ctx, y_str(&v) ? y_str(&v) : "");
	if (!f->pipe)
		return yerr(&L->d, &v, ENOENT, "no pipe named '%s'",
			    y_str(&v) ? y_str(&v) : "");
	return 0;
}

static int parse_field_name(struct loader *L, const struct ynode *x,
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

static int parse_value(struct loader *L, const struct ynode *x, unsigned field,
		       struct field_value *fv)
{
	char why[160];
	const char *s = y_str(x);

	if (!s || field_value_parse(field, s, fv, why, sizeof(why)))
		return yerr(&L->d, x, EINVAL, "%s",
			    s ? why : "expected a value");
	return 0;
}

static int parse_match(struct loader *L, const struct ynode *x,
		       struct dpflow_match_tmpl *m)
{
	static const char *const keys[] = {"field", "value", "mask", NULL};

	if (!y_is_seq(x) || y_len(x) == 0)
		return yerr(&L->d, x, EINVAL, "expected a list of fields");
	if (y_len(x) > DPFLOW_MATCH_FIELDS_MAX)
		return yerr(&L->d, x, EINVAL, "at most %d match fields",
			    DPFLOW_MATCH_FIELDS_MAX);
	m->n = (uint8_t)y_len(x);
	for (unsigned i = 0; i < m->n; i++) {
		struct dpflow_match_field *f = &m->f[i];
		struct ynode it, v;
		struct field_value fv;

		y_item(&L->d, x, i, &it);
		if (y_is_scalar(&it)) {
			CHECK(parse_field_name(L, &it, &f->field));
			f->per_entry = true;
			memset(f->mask, 0xff, sizeof(f->mask));
			continue;
		}
		CHECK(y_check_keys(&L->d, &it, keys));
		if (!y_get(&L->d, &it, "field", &v))
			return yerr(&L->d, &it, EINVAL, "'field' is missing");
		CHECK(parse_field_name(L, &v, &f->field));
		memset(f->mask, 0xff, sizeof(f->mask));
		f->per_entry = !y_get(&L->d, &it, "value", &v);
		if (!f->per_entry) {
			CHECK(parse_value(L, &v, f->field, &fv));
			if (fv.is_range)
				return yerr(&L->d, &v, EINVAL,
					    "a constant field takes a value "
					    "or value/mask, not a range");
			memcpy(f->value, fv.value, sizeof(f->value));
			memcpy(f->mask, fv.mask, sizeof(f->mask));
		}
		if (y_get(&L->d, &it, "mask", &v)) {
			CHECK(parse_value(L, &v, f->field, &fv));
			memcpy(f->mask, fv.value, sizeof(f->mask));
		}
	}
	return 0;
}

static int parse_ip16(struct loader *L, const struct ynode *x, uint8_t *out)
{
	const char *s = y_str(x);

	memset(out, 0, 16);
	if (s && inet_pton(AF_INET, s, out + 12) == 1) {
		/* IPv4-mapped: one 16-byte form for both versions */
		out[10] = out[11] = 0xff;
		return 0;
	}
	if (s && inet_pton(AF_INET6, s, out) == 1)
		return 0;
	return yerr(&L->d, x, EINVAL, "expected an IPv4 or IPv6 address");
}

static int parse_mac(struct loader *L, const struct ynode *x, uint8_t *out)
{
	struct field_value fv;

	CHECK(parse_value(L, x, DPFLOW_FIELD_OUTER_ETH_SRC, &fv));
	memcpy(out, fv.value, 6);
	return 0;
}

/* The value of an action, from the template or from an entry. */
static int parse_action_value(struct loader *L, const struct ynode *x,
			      struct dpflow_action *a, uint8_t *value)
{
	uint64_t v;

	switch (a->kind) {
	case DPFLOW_ACT_SET_MAC_SRC:
	case DPFLOW_ACT_SET_MAC_DST:
		return parse_mac(L, x, value);
	case DPFLOW_ACT_NAT_SRC_IP:
	case DPFLOW_ACT_NAT_DST_IP:
		return parse_ip16(L, x, value);
	case DPFLOW_ACT_NAT_SRC_PORT:
	case DPFLOW_ACT_NAT_DST_PORT:
		CHECK(y_u64(&L->d, x, 65535, &v));
		value[0] = (uint8_t)(v >> 8);
		value[1] = (uint8_t)v;
		return 0;
	case DPFLOW_ACT_SET_FIELD:
	case DPFLOW_ACT_ADD_FIELD: {
		struct field_value fv;

		CHECK(parse_value(L, x, a->field, &fv));
		if (fv.is_range || fv.has_mask || fv.prefix_len >= 0)
			return yerr(&L->d, x, EINVAL,
				    "an action takes a plain value");
		memcpy(value, fv.value, 16);
		return 0;
	}
	default:
		return yerr(&L->d, x, EINVAL, "this action takes no value");
	}
}

static int parse_encap(struct loader *L, const struct ynode *x,
		       struct dpflow_encap *e)
{
	static const char *const keys[] = {"type",    "src",	 "dst",
					   "src_mac", "dst_mac", "vni",
					   "key",     "ttl",	 NULL};
	struct ynode v;
	uint64_t n;
	const char *s;

	CHECK(y_check_keys(&L->d, x, keys));
	if (!y_get(&L->d, x, "type", &v) || !y_str(&v))
		return yerr(&L->d, x, EINVAL, "'type' is missing");
	s = y_str(&v);
	if (!strcmp(s, "vxlan"))
		e->tun_type = DPFLOW_TUN_VXLAN;
	else if (!strcmp(s, "geneve"))
		e->tun_type = DPFLOW_TUN_GENEVE;
	else if (!strcmp(s, "gre"))
		e->tun_type = DPFLOW_TUN_GRE;
	else if (!strcmp(s, "ipip"))
		e->tun_type = DPFLOW_TUN_IPIP;
	else
		return yerr(&L->d, &v, EINVAL,
			    "'%s': expected vxlan, geneve, gre or ipip", s);
	if (!y_get(&L->d, x, "src", &v))
		return yerr(&L->d, x, EINVAL, "'src' is missing");
	CHECK(parse_ip16(L, &v, e->src));
	e->ipv6 = strchr(y_str(&v), ':') != NULL;
	if (!y_get(&L->d, x, "dst", &v))
		return yerr(&L->d, x, EINVAL, "'dst' is missing");
	CHECK(parse_ip16(L, &v, e->dst));
	if ((strchr(y_str(&v), ':') != NULL) != e->ipv6)
		return yerr(&L->d, &v, EINVAL,
			    "src and dst must be of one IP version");
	if (y_get(&L->d, x, "src_mac", &v))
		CHECK(parse_mac(L, &v, e->src_mac));
	if (y_get(&L->d, x, "dst_mac", &v))
		CHECK(parse_mac(L, &v, e->dst_mac));
	e->ttl = 64;
	if (y_get(&L->d, x, "ttl", &v)) {
		CHECK(y_u64(&L->d, &v, 255, &n));
		e->ttl = (uint8_t)n;
	}
	if (y_get(&L->d, x, "vni", &v)) {
		CHECK(y_u64(&L->d, &v, 0xffffff, &n));
		e->id = (uint32_t)n;
	}
	if (y_get(&L->d, x, "key", &v)) {
		CHECK(y_u64(&L->d, &v, UINT32_MAX, &n));
		e->id = (uint32_t)n;
		e->gre_key = 1;
	}
	return 0;
}

static int parse_action(struct loader *L, const struct ynode *x,
			struct dpflow_action *a)
{
	struct ynode v;
	const char *name = NULL;
	unsigned kind;

	memset(a, 0, sizeof(*a));
	if (!y_is_map(x) || y_len(x) != 1 || !y_pair(&L->d, x, 0, &name, &v))
		return yerr(&L->d, x, EINVAL,
			    "an action is a mapping with one key, its name");
	for (kind = 0; kind < DPFLOW_ACT__COUNT; kind++)
		if (!strcmp(dpflow_action_name(kind), name))
			break;
	if (kind == DPFLOW_ACT__COUNT)
		return yerr(&L->d, &v, EINVAL, "unknown action '%s'", name);
	a->kind = (uint8_t)kind;
	switch (kind) {
	case DPFLOW_ACT_DEC_TTL:
	case DPFLOW_ACT_VLAN_POP:
	case DPFLOW_ACT_DECAP: {
		bool on;

		CHECK(y_bool(&L->d, &v, &on));
		if (!on)
			return yerr(&L->d, &v, EINVAL, "write %s: true", name);
		return 0;
	}
	case DPFLOW_ACT_MIRROR:
		return parse_port_ref(L, &v, &a->port);
	case DPFLOW_ACT_ENCAP:
		return parse_encap(L, &v, &a->encap);
	case DPFLOW_ACT_VLAN_PUSH: {
		static const char *const keys[] = {"tpid", "vid", "pcp", NULL};
		struct ynode p;
		uint64_t n = 0;

		CHECK(y_check_keys(&L->d, &v, keys));
		a->tpid = 0x8100;
		if (y_get(&L->d, &v, "tpid", &p)) {
			CHECK(y_u64(&L->d, &p, 0xffff, &n));
			if (n != 0x8100 && n != 0x88a8)
				return yerr(&L->d, &p, EINVAL,
					    "tpid must be 0x8100 or 0x88a8");
			a->tpid = (uint16_t)n;
		}
		if (!y_get(&L->d, &v, "vid", &p))
			return yerr(&L->d, &v, EINVAL, "'vid' is missing");
		CHECK(y_u64(&L->d, &p, 4095, &n));
		a->tci = (uint16_t)n;
		if (y_get(&L->d, &v, "pcp", &p)) {
			CHECK(y_u64(&L->d, &p, 7, &n));
			a->tci |= (uint16_t)(n << 13);
		}
		return 0;
	}
	case DPFLOW_ACT_COPY_FIELD: {
		static const char *const keys[] = {"field", "from", NULL};
		struct ynode p;

		CHECK(y_check_keys(&L->d, &v, keys));
		if (!y_get(&L->d, &v, "field", &p))
			return yerr(&L->d, &v, EINVAL, "'field' is missing");
		CHECK(parse_field_name(L, &p, &a->field));
		if (!y_get(&L->d, &v, "from", &p))
			return yerr(&L->d, &v, EINVAL, "'from' is missing");
		return parse_field_name(L, &p, &a->src_field);
	}
	case DPFLOW_ACT_SET_FIELD:
	case DPFLOW_ACT_ADD_FIELD: {
		static const char *const keys[] = {"field", "value", NULL};
		struct ynode p;

		CHECK(y_check_keys(&L->d, &v, keys));
		if (!y_get(&L->d, &v, "field", &p))
			return yerr(&L->d, &v, EINVAL, "'field' is missing");
		CHECK(parse_field_name(L, &p, &a->field));
		if (!y_get(&L->d, &v, "value", &p))
			return yerr(&L->d, &v, EINVAL, "'value' is missing");
		if (y_str(&p) && !strcmp(y_str(&p), "per-entry")) {
			a->per_entry = true;
			return 0;
		}
		return parse_action_value(L, &p, a, a->value);
	}
	default:
		if (y_str(&v) && !strcmp(y_str(&v), "per-entry")) {
			a->per_entry = true;
			return 0;
		}
		return parse_action_value(L, &v, a, a->value);
	}
}

static int parse_actions(struct loader *L, const struct ynode *x,
			 struct dpflow_pipe_cfg *cfg)
{
	if (!y_is_seq(x))
		return yerr(&L->d, x, EINVAL,
			    "expected a list of action templates (each a list "
			    "of actions)");
	if (y_len(x) > DPFLOW_ACTION_TMPLS_MAX)
		return yerr(&L->d, x, EINVAL, "at most %d action templates",
			    DPFLOW_ACTION_TMPLS_MAX);
	cfg->n_action_tmpls = (uint8_t)y_len(x);
	for (unsigned t = 0; t < cfg->n_action_tmpls; t++) {
		struct ynode tmpl, it;

		y_item(&L->d, x, t, &tmpl);
		if (!y_is_seq(&tmpl))
			return yerr(&L->d, &tmpl, EINVAL,
				    "an action template is a list of actions");
		if (y_len(&tmpl) > DPFLOW_ACTIONS_MAX)
			return yerr(&L->d, &tmpl, EINVAL,
				    "at most %d actions in a template",
				    DPFLOW_ACTIONS_MAX);
		cfg->actions[t].n = (uint8_t)y_len(&tmpl);
		for (unsigned i = 0; i < cfg->actions[t].n; i++) {
			y_item(&L->d, &tmpl, i, &it);
			CHECK(parse_action(L, &it, &cfg->actions[t].a[i]));
		}
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

static const char *const pipe_keys[] = {"name",	 "type",    "root",    "size",
					"match", "actions", "monitor", "fwd",
					"miss",	 "entries", NULL};

static int parse_pipe(struct loader *L, const struct ynode *x,
		      struct dpflow_pipe_cfg *cfg)
{
	struct ynode v;
	uint64_t n;

	memset(cfg, 0, sizeof(*cfg));
	CHECK(y_check_keys(&L->d, x, pipe_keys));
	if (!y_get(&L->d, x, "name", &v))
		return yerr(&L->d, x, EINVAL, "'name' is missing");
	CHECK(y_string(&L->d, &v, &cfg->name));
	if (!y_get(&L->d, x, "type", &v))
		return yerr(&L->d, x, EINVAL, "'type' is missing");
	CHECK(parse_type(L, &v, &cfg->type));
	if (y_get(&L->d, x, "root", &v)) {
		cfg->root = true;
		CHECK(parse_port_ref(L, &v, &cfg->port));
	}
	cfg->size = 1024;
	if (y_get(&L->d, x, "size", &v)) {
		CHECK(y_u64(&L->d, &v, 1u << 26, &n));
		cfg->size = (uint32_t)n;
	}
	if (!y_get(&L->d, x, "match", &v))
		return yerr(&L->d, x, EINVAL, "'match' is missing");
	CHECK(parse_match(L, &v, &cfg->match));
	if (y_get(&L->d, x, "actions", &v))
		CHECK(parse_actions(L, &v, cfg));
	if (y_get(&L->d, x, "monitor", &v)) {
		static const char *const keys[] = {"counter", NULL};
		struct ynode c;

		CHECK(y_check_keys(&L->d, &v, keys));
		if (y_get(&L->d, &v, "counter", &c))
			CHECK(y_bool(&L->d, &c, &cfg->monitor.counter));
	}
	if (y_get(&L->d, x, "fwd", &v))
		CHECK(parse_fwd(L, &v, true, &cfg->fwd));
	if (y_get(&L->d, x, "miss", &v))
		CHECK(parse_fwd(L, &v, false, &cfg->miss_fwd));
	return 0;
}

/* One entry of @pipe from @x. */
static int parse_entry(struct loader *L, struct dpflow_pipe *pipe,
		       const struct dpflow_pipe_cfg *cfg, const struct ynode *x,
		       struct dpflow_entry_cfg *e)
{
	static const char *const keys[] = {"match",  "priority", "action",
					   "values", "fwd",	 NULL};
	struct ynode v;
	uint64_t n;
	unsigned off = 0, k = 0;

	memset(e, 0, sizeof(*e));
	CHECK(y_check_keys(&L->d, x, keys));
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
	for (unsigned f = 0; f < cfg->match.n; f++) {
		const struct dpflow_match_field *mf = &cfg->match.f[f];
		unsigned bytes = dpflow_field_bytes(mf->field);
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
		CHECK(parse_value(L, &fv, mf->field, &val));
		if (cfg->type == DPFLOW_PIPE_BASIC &&
		    (val.is_range || val.has_mask ||
		     (val.prefix_len >= 0 && (unsigned)val.prefix_len !=
						 dpflow_field_bits(mf->field))))
			return yerr(&L->d, &fv, EINVAL,
				    "a basic pipe matches exact values: no "
				    "mask, prefix or range");
		if (cfg->type == DPFLOW_PIPE_LPM) {
			e->prefix_len =
			    (uint8_t)(val.prefix_len >= 0
					  ? val.prefix_len
					  : (int)dpflow_field_bits(mf->field));
		}
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
	if (y_get(&L->d, x, "priority", &v)) {
		CHECK(y_u64(&L->d, &v, UINT32_MAX, &n));
		e->priority = (uint32_t)n;
	}
	if (y_get(&L->d, x, "action", &v)) {
		CHECK(y_u64(&L->d, &v, DPFLOW_ACTION_TMPLS_MAX - 1, &n));
		if (n >= cfg->n_action_tmpls)
			return yerr(&L->d, &v, EINVAL,
				    "pipe '%s' has %u action templates",
				    cfg->name, cfg->n_action_tmpls);
		e->action_tmpl = (uint8_t)n;
	}
	if (cfg->n_action_tmpls) {
		struct dpflow_action_tmpl *t =
		    (struct dpflow_action_tmpl *)&cfg->actions[e->action_tmpl];
		bool have = y_get(&L->d, x, "values", &v);

		for (unsigned i = 0; i < t->n; i++) {
			struct ynode it;

			if (!t->a[i].per_entry)
				continue;
			if (!have || !y_item(&L->d, &v, i, &it))
				return yerr(&L->d, x, EINVAL,
					    "action %u ('%s') takes its value "
					    "from the entry: 'values' needs "
					    "item %u",
					    i, dpflow_action_name(t->a[i].kind),
					    i);
			CHECK(parse_action_value(L, &it, &t->a[i],
						 e->action_value[i]));
		}
	}
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
	(void)pipe;
	return 0;
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

static int load_entries(struct loader *L, const struct ynode *pipes)
{
	void **users;
	unsigned total = 0, u = 0;
	struct dpflow_error e = {0};

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
	if (!L->entry_at || !users) {
		free(users);
		return yerr(&L->d, NULL, ENOMEM, "out of memory");
	}
	for (unsigned i = 0; i < y_len(pipes); i++) {
		struct ynode p, ents, name;
		struct dpflow_pipe_cfg cfg;
		struct dpflow_pipe *pipe;

		y_item(&L->d, pipes, i, &p);
		if (!y_get(&L->d, &p, "entries", &ents))
			continue;
		y_get(&L->d, &p, "name", &name);
		pipe = dpflow_pipe_find(L->ctx, y_str(&name));
		if (!y_is_seq(&ents)) {
			free(users);
			return yerr(&L->d, &ents, EINVAL,
				    "expected a list of entries");
		}
		/* the pipe's config as parsed, for its templates */
		if (parse_pipe(L, &p, &cfg)) {
			free(users);
			return -(L->d.err ? L->d.err->code : EINVAL);
		}
		for (unsigned k = 0; k < y_len(&ents); k++, u++) {
			struct dpflow_entry_cfg ec;
			struct ynode it;
			int rc;

			y_item(&L->d, &ents, k, &it);
			L->entry_at[u] = it;
			rc = parse_entry(L, pipe, &cfg, &it, &ec);
			if (rc) {
				free(users);
				return rc;
			}
			users[2 * u] = L;
			users[2 * u + 1] = &L->entry_at[u];
			if (!dpflow_entry_add(L->q, pipe, &ec, &users[2 * u],
					      &e)) {
				free(users);
				return yerr(&L->d, &it, e.code, "%s", e.msg);
			}
		}
	}
	L->batch_rc = 0;
	dpflow_entries_process(L->q, entry_status, &e);
	free(users);
	return L->batch_rc;
}

/* Create the pipes in an order where forwarding targets come first. */
static int load_pipes(struct loader *L, const struct ynode *pipes)
{
	unsigned n = y_len(pipes), done = 0;
	bool *made;

	if (!y_is_seq(pipes))
		return yerr(&L->d, pipes, EINVAL, "expected a list of pipes");
	made = calloc(n ? n : 1, sizeof(*made));
	if (!made)
		return yerr(&L->d, NULL, ENOMEM, "out of memory");
	while (done < n) {
		unsigned before = done;

		for (unsigned i = 0; i < n; i++) {
			struct ynode p, f;
			struct dpflow_pipe_cfg cfg;
			struct dpflow_error e = {0};
			bool ready = true;
			const char *deps[2] = {"fwd", "miss"};

			if (made[i])
				continue;
			y_item(&L->d, pipes, i, &p);
			if (!y_is_map(&p)) {
				free(made);
				return yerr(&L->d, &p, EINVAL,
					    "a pipe is a mapping");
			}
			for (int d = 0; d < 2; d++) {
				struct ynode t;

				if (y_get(&L->d, &p, deps[d], &f) &&
				    y_get(&L->d, &f, "pipe", &t) && y_str(&t) &&
				    !dpflow_pipe_find(L->ctx, y_str(&t)))
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
				free(made);
				return -(L->d.err ? L->d.err->code : EINVAL);
			}
			made[i] = true;
			done++;
		}
		if (done == before) {
			/* some pipe waits for one that never comes */
			for (unsigned i = 0; i < n; i++) {
				struct ynode p;

				if (made[i])
					continue;
				y_item(&L->d, pipes, i, &p);
				free(made);
				return yerr(&L->d, &p, ELOOP,
					    "its forwarding names a pipe that "
					    "does not exist or makes a loop");
			}
		}
	}
	free(made);
	return 0;
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
			return yerr(&L->d, &uri, e.code ? e.code : EINVAL, "%s",
				    e.msg);
	}
	return 0;
}

static struct dpflow_ctx *load(yaml_parser_t *parser, const char *name,
			       const struct dpflow_config_opts *opts,
			       struct dpflow_error *err)
{
	static const char *const top_keys[] = {"ports", "pipes", NULL};
	struct dpflow_ctx_params cp = {0};
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
	if (y_check_keys(&L.d, &root, top_keys))
		goto fail;
	cp.pool_slots = opts ? opts->pool_slots : 0;
	L.ctx = dpflow_ctx_create(&cp, err);
	if (!L.ctx)
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

	if (!f) {
		dpflow_error_set(err, errno, "config", "%s: %s", path,
				 strerror(errno));
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
