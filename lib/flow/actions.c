/*
 * Actions on the CPU data path (flow_actions.h), on top of the packet-edit
 * library (pkt_edit.h): each action of an entry's template runs in order;
 * the first one that fails drops the packet with its reason. Data threads,
 * except flow_actions_prepare() (control thread, at pipe creation).
 *
 * Addresses in action values are 16 bytes: IPv6 as is, IPv4 mapped
 * (::ffff:a.b.c.d), so one value type serves both versions.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/pool.h"
#include "dpflow/port.h"

#include "flow/field_impl.h"
#include "flow/flow_actions.h"
#include "flow/pkt_edit.h"

static const uint8_t v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

static uint32_t be_get(const uint8_t *v, unsigned bytes)
{
	uint32_t x = 0;

	for (unsigned i = 0; i < bytes && i < 4; i++)
		x = x << 8 | v[i];
	return x;
}

static bool is_reg(unsigned f)
{
	return f >= DPFLOW_FIELD_META_REG0 && f <= DPFLOW_FIELD_META_REG3;
}

/* Header fields that `set` can write (with checksums fixed). */
static bool settable(unsigned f)
{
	switch (f) {
	case DPFLOW_FIELD_OUTER_ETH_SRC:
	case DPFLOW_FIELD_OUTER_ETH_DST:
	case DPFLOW_FIELD_OUTER_ETH_TYPE:
	case DPFLOW_FIELD_OUTER_IPV4_SRC:
	case DPFLOW_FIELD_OUTER_IPV4_DST:
	case DPFLOW_FIELD_OUTER_IPV6_SRC:
	case DPFLOW_FIELD_OUTER_IPV6_DST:
	case DPFLOW_FIELD_OUTER_IP_DSCP:
	case DPFLOW_FIELD_OUTER_L4_SPORT:
	case DPFLOW_FIELD_OUTER_L4_DPORT:
		return true;
	default:
		return is_reg(f);
	}
}

bool flow_action_supported(const struct dpflow_action *a)
{
	switch (a->kind) {
	case DPFLOW_ACT_SET_FIELD:
		return settable(a->field);
	case DPFLOW_ACT_ADD_FIELD:
	case DPFLOW_ACT_COPY_FIELD:
		return is_reg(a->field);
	default:
		return a->kind < DPFLOW_ACT__COUNT;
	}
}

int flow_encap_build(const struct dpflow_encap *e,
		     struct dpflow_edit_encap **out, struct dpflow_error *err)
{
	struct dpflow_edit_encap_params p;
	struct dpflow_edit_encap *tmpl;
	int rc;

	memset(&p, 0, sizeof(p));
	p.type = e->tun_type;
	p.ip_version = e->ipv6 ? 6 : 4;
	p.inner_eth = e->tun_type != DPFLOW_TUN_IPIP;
	p.ttl = e->ttl;
	memcpy(p.eth_src, e->src_mac, 6);
	memcpy(p.eth_dst, e->dst_mac, 6);
	memcpy(p.src, e->ipv6 ? e->src : e->src + 12, e->ipv6 ? 16 : 4);
	memcpy(p.dst, e->ipv6 ? e->dst : e->dst + 12, e->ipv6 ? 16 : 4);
	p.vni = e->id;
	if (e->tun_type == DPFLOW_TUN_GRE && e->gre_key)
		p.flags |= DPFLOW_EDIT_ENCAP_F_GRE_KEY;
	tmpl = calloc(1, sizeof(*tmpl));
	if (!tmpl)
		return dpflow_error_set(err, ENOMEM, NULL, "out of memory");
	rc = dpflow_edit_encap_build(tmpl, &p, err);
	if (rc) {
		free(tmpl);
		return rc;
	}
	*out = tmpl;
	return 0;
}

int flow_actions_prepare(struct dpflow_pipe *pipe, struct dpflow_error *err)
{
	for (unsigned t = 0; t < pipe->cfg.n_action_tmpls; t++)
		for (unsigned i = 0; i < pipe->cfg.actions[t].n; i++) {
			const struct dpflow_action *a =
			    &pipe->cfg.actions[t].a[i];
			int rc;

			if (a->kind != DPFLOW_ACT_ENCAP || a->per_entry)
				continue;
			rc = flow_encap_build(&a->encap, &pipe->encaps[t][i],
					      err);
			if (rc)
				return rc;
		}
	return 0;
}

void flow_actions_release(struct dpflow_pipe *pipe)
{
	for (unsigned t = 0; t < DPFLOW_ACTION_TMPLS_MAX; t++)
		for (unsigned i = 0; i < DPFLOW_ACTIONS_MAX; i++)
			free(pipe->encaps[t][i]);
}

static unsigned set_addr(const struct dpflow_pool *pool, uint32_t idx,
			 unsigned dir, const uint8_t *v)
{
	if (!memcmp(v, v4_mapped, 12))
		return dpflow_edit_set_ipv4(pool, idx, dir, v + 12);
	return dpflow_edit_set_ipv6(pool, idx, dir, v);
}

static unsigned set_field(const struct dpflow_pool *pool, uint32_t idx,
			  struct dpflow_pkt_meta *m, unsigned f,
			  const uint8_t *v)
{
	switch (f) {
	case DPFLOW_FIELD_OUTER_ETH_SRC:
		return dpflow_edit_set_mac(pool, idx, v, NULL);
	case DPFLOW_FIELD_OUTER_ETH_DST:
		return dpflow_edit_set_mac(pool, idx, NULL, v);
	case DPFLOW_FIELD_OUTER_ETH_TYPE:
		return dpflow_edit_set_ethertype(pool, idx,
						 (uint16_t)be_get(v, 2));
	case DPFLOW_FIELD_OUTER_IPV4_SRC:
		return dpflow_edit_set_ipv4(pool, idx, DPFLOW_EDIT_SRC, v);
	case DPFLOW_FIELD_OUTER_IPV4_DST:
		return dpflow_edit_set_ipv4(pool, idx, DPFLOW_EDIT_DST, v);
	case DPFLOW_FIELD_OUTER_IPV6_SRC:
		return dpflow_edit_set_ipv6(pool, idx, DPFLOW_EDIT_SRC, v);
	case DPFLOW_FIELD_OUTER_IPV6_DST:
		return dpflow_edit_set_ipv6(pool, idx, DPFLOW_EDIT_DST, v);
	case DPFLOW_FIELD_OUTER_IP_DSCP:
		return dpflow_edit_set_dscp(pool, idx, v[0]);
	case DPFLOW_FIELD_OUTER_L4_SPORT:
		return dpflow_edit_set_port(pool, idx, DPFLOW_EDIT_SRC,
					    (uint16_t)be_get(v, 2));
	case DPFLOW_FIELD_OUTER_L4_DPORT:
		return dpflow_edit_set_port(pool, idx, DPFLOW_EDIT_DST,
					    (uint16_t)be_get(v, 2));
	default:
		m->reg[f - DPFLOW_FIELD_META_REG0] = be_get(v, 4);
		return 0;
	}
}

/* A copy of packet @idx sent out of @port (dropped silently if no slot). */
static void mirror(struct dpflow_ctx *ctx, uint32_t idx, uint16_t port)
{
	struct dpflow_pool *pool = ctx->pool;
	uint32_t copy;

	if (dpflow_pool_alloc_bulk(pool, &copy, 1)) {
		__atomic_fetch_add(&ctx->drops[DPFLOW_DROP_PORT_NO_BUFFER], 1,
				   __ATOMIC_RELAXED);
		return;
	}
	memcpy(dpflow_pool_meta(pool, copy), dpflow_pool_meta(pool, idx),
	       sizeof(struct dpflow_pkt_meta));
	memcpy(dpflow_pkt_data(pool, copy), dpflow_pkt_data(pool, idx),
	       dpflow_pool_meta(pool, idx)->data_len);
	if (dpflow_port_tx_burst(ctx->ports[port].port, 0, pool, &copy, 1) !=
	    1) {
		__atomic_fetch_add(&ctx->drops[DPFLOW_DROP_PORT_TX_FULL], 1,
				   __ATOMIC_RELAXED);
		dpflow_pool_free_bulk(pool, &copy, 1);
	}
}

unsigned flow_actions_apply(struct dpflow_ctx *ctx,
			    const struct dpflow_pipe *pipe,
			    const struct dpflow_entry *e, uint32_t idx)
{
	const struct dpflow_pool *pool = ctx->pool;
	struct dpflow_pkt_meta *m = dpflow_pool_meta(pool, idx);
	const struct dpflow_action_tmpl *t;
	unsigned tn;

	if (!pipe->cfg.n_action_tmpls)
		return 0;
	tn = e->cfg.action_tmpl;
	t = &pipe->cfg.actions[tn];
	for (unsigned i = 0; i < t->n; i++) {
		const struct dpflow_action *a = &t->a[i];
		const uint8_t *v =
		    a->per_entry ? e->cfg.action_value[i] : a->value;
		unsigned r = 0;
		uint8_t src[16];

		switch (a->kind) {
		case DPFLOW_ACT_SET_FIELD:
			r = set_field(pool, idx, m, a->field, v);
			break;
		case DPFLOW_ACT_ADD_FIELD:
			m->reg[a->field - DPFLOW_FIELD_META_REG0] +=
			    be_get(v, 4);
			break;
		case DPFLOW_ACT_COPY_FIELD:
			memset(src, 0, sizeof(src));
			dpflow_field_get(dpflow_pkt_data(pool, idx), m,
					 a->src_field, src);
			m->reg[a->field - DPFLOW_FIELD_META_REG0] =
			    be_get(src, dpflow_field_bytes(a->src_field));
			break;
		case DPFLOW_ACT_SET_MAC_SRC:
			r = dpflow_edit_set_mac(pool, idx, v, NULL);
			break;
		case DPFLOW_ACT_SET_MAC_DST:
			r = dpflow_edit_set_mac(pool, idx, NULL, v);
			break;
		case DPFLOW_ACT_DEC_TTL:
			r = dpflow_edit_dec_ttl(pool, idx);
			break;
		case DPFLOW_ACT_NAT_SRC_IP:
			r = set_addr(pool, idx, DPFLOW_EDIT_SRC, v);
			break;
		case DPFLOW_ACT_NAT_DST_IP:
			r = set_addr(pool, idx, DPFLOW_EDIT_DST, v);
			break;
		case DPFLOW_ACT_NAT_SRC_PORT:
			r = dpflow_edit_set_port(pool, idx, DPFLOW_EDIT_SRC,
						 (uint16_t)be_get(v, 2));
			break;
		case DPFLOW_ACT_NAT_DST_PORT:
			r = dpflow_edit_set_port(pool, idx, DPFLOW_EDIT_DST,
						 (uint16_t)be_get(v, 2));
			break;
		case DPFLOW_ACT_VLAN_PUSH:
			r = dpflow_edit_vlan_push(pool, idx, a->tpid, a->tci);
			break;
		case DPFLOW_ACT_VLAN_POP:
			r = dpflow_edit_vlan_pop(pool, idx);
			break;
		case DPFLOW_ACT_ENCAP:
			r = dpflow_edit_encap(
			    pool, idx,
			    a->per_entry ? e->encap : pipe->encaps[tn][i]);
			break;
		case DPFLOW_ACT_DECAP:
			r = dpflow_edit_decap(pool, idx, 0);
			break;
		case DPFLOW_ACT_MIRROR:
			mirror(ctx, idx, a->port);
			break;
		default:
			r = DPFLOW_DROP_EDIT_BAD_ACTION;
			break;
		}
		if (r)
			return r;
	}
	return 0;
}
