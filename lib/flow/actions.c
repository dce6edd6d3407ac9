/*
 * Actions on the CPU data path (flow_actions.h): each action of an
 * entry's template runs in order through flow_actions_impl.h (the code the
 * GPU target runs too); the first one that fails drops the packet with its
 * reason. Mirror copies are made here. Data threads, except
 * flow_actions_prepare() (control thread, at pipe creation).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/pool.h"
#include "dpflow/port.h"

#include "flow/flow_actions.h"
#include "flow/flow_actions_impl.h"
#include "flow/walk_impl.h"
#include "flow/pkt_edit.h"

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
			    const struct dpflow_pipe *pipe, uint32_t entry,
			    uint32_t idx)
{
	const struct dpflow_pool *pool = ctx->pool;
	const struct dpflow_plan_entry *e = &pipe->plan_entries[entry];
	unsigned pos = 0, r;

	while ((r = walk_actions(
		    &pipe->plan, e,
		    pipe->plan_encaps ? &pipe->plan_encaps[entry] : NULL,
		    dpflow_pool_meta(pool, idx), dpflow_pool_buf(pool, idx),
		    &pos)) == FLOW_ACT_MIRROR) {
		mirror(ctx, idx, walk_mirror_port(&pipe->plan, e, pos));
		pos++;
	}
	return r;
}
