/*
 * Action templates and encapsulations of the config loader
 * (config_internal.h; the syntax is in docs/config.md, "Actions").
 * Control thread only.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "ctl/config_internal.h"
#include "ctl/field_value.h"

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

	CHECK(cfg_parse_value(L, x, DPFLOW_FIELD_OUTER_ETH_SRC, &fv));
	memcpy(out, fv.value, 6);
	return 0;
}

int cfg_parse_action_value(struct loader *L, const struct ynode *x,
			   const struct dpflow_action *a, uint8_t *value)
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

		CHECK(cfg_parse_value(L, x, a->field, &fv));
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

int cfg_parse_encap(struct loader *L, const struct ynode *x,
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
	/* each tunnel's own id: vxlan and geneve a VNI, gre a key */
	if (y_get(&L->d, x, "vni", &v)) {
		if (e->tun_type == DPFLOW_TUN_GRE)
			return yerr(&L->d, &v, EINVAL,
				    "'vni' is for vxlan and geneve tunnels: a "
				    "gre tunnel takes 'key'");
		if (e->tun_type == DPFLOW_TUN_IPIP)
			return yerr(&L->d, &v, EINVAL,
				    "an ipip tunnel has no VNI or key");
		CHECK(y_u64(&L->d, &v, 0xffffff, &n));
		e->id = (uint32_t)n;
	}
	if (y_get(&L->d, x, "key", &v)) {
		if (e->tun_type == DPFLOW_TUN_IPIP)
			return yerr(&L->d, &v, EINVAL,
				    "an ipip tunnel has no VNI or key");
		if (e->tun_type != DPFLOW_TUN_GRE)
			return yerr(&L->d, &v, EINVAL,
				    "'key' is for gre tunnels: a %s tunnel "
				    "takes 'vni'",
				    s);
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
		return cfg_parse_port_ref(L, &v, &a->port);
	case DPFLOW_ACT_ENCAP:
		/* per-entry: each entry's `values` item is the mapping */
		if (y_str(&v) && !strcmp(y_str(&v), "per-entry")) {
			a->per_entry = true;
			return 0;
		}
		return cfg_parse_encap(L, &v, &a->encap);
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
		CHECK(cfg_parse_field_name(L, &p, &a->field));
		if (!y_get(&L->d, &v, "from", &p))
			return yerr(&L->d, &v, EINVAL, "'from' is missing");
		return cfg_parse_field_name(L, &p, &a->src_field);
	}
	case DPFLOW_ACT_SET_FIELD:
	case DPFLOW_ACT_ADD_FIELD: {
		static const char *const keys[] = {"field", "value", NULL};
		struct ynode p;

		CHECK(y_check_keys(&L->d, &v, keys));
		if (!y_get(&L->d, &v, "field", &p))
			return yerr(&L->d, &v, EINVAL, "'field' is missing");
		CHECK(cfg_parse_field_name(L, &p, &a->field));
		if (!y_get(&L->d, &v, "value", &p))
			return yerr(&L->d, &v, EINVAL, "'value' is missing");
		if (y_str(&p) && !strcmp(y_str(&p), "per-entry")) {
			a->per_entry = true;
			return 0;
		}
		return cfg_parse_action_value(L, &p, a, a->value);
	}
	default:
		if (y_str(&v) && !strcmp(y_str(&v), "per-entry")) {
			a->per_entry = true;
			return 0;
		}
		return cfg_parse_action_value(L, &v, a, a->value);
	}
}

int cfg_parse_actions(struct loader *L, const struct ynode *x,
		      struct dpflow_pipe_cfg *cfg)
{
	if (!y_is_seq(x))
		return yerr(&L->d, x, EINVAL,
			    "expected a list of action templates (each a list "
			    "of actions)");
	if (y_len(x) > DPFLOW_ACTION_TMPLS_MAX)
		return yerr(&L->d, x, EINVAL,
			    "%u action templates: a pipe has at most %d "
			    "(docs/config.md, Limits)",
			    y_len(x), DPFLOW_ACTION_TMPLS_MAX);
	cfg->n_action_tmpls = (uint8_t)y_len(x);
	for (unsigned t = 0; t < cfg->n_action_tmpls; t++) {
		struct ynode tmpl, it;

		y_item(&L->d, x, t, &tmpl);
		if (!y_is_seq(&tmpl))
			return yerr(&L->d, &tmpl, EINVAL,
				    "an action template is a list of actions");
		if (y_len(&tmpl) > DPFLOW_ACTIONS_MAX)
			return yerr(&L->d, &tmpl, EINVAL,
				    "%u actions: a template has at most %d "
				    "(docs/config.md, Limits)",
				    y_len(&tmpl), DPFLOW_ACTIONS_MAX);
		cfg->actions[t].n = (uint8_t)y_len(&tmpl);
		for (unsigned i = 0; i < cfg->actions[t].n; i++) {
			y_item(&L->d, &tmpl, i, &it);
			CHECK(parse_action(L, &it, &cfg->actions[t].a[i]));
		}
	}
	return 0;
}
