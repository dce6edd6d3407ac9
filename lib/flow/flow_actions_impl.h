/*
 * The flow engine's actions on one packet, shared by the CPU and the GPU
 * targets (DPF_HD, the common subset of C11 and CUDA C++).
 *
 * Owns what each action of an action template (flow.h struct
 * dpflow_action) does to a packet, on top of the packet edits of
 * pkt_edit_impl.h: actions.c calls it for the CPU data path, lib/gpu/flow
 * from its kernel, on the same template bytes copied to device memory.
 *
 * Inputs are plain memory: the packet's metadata @m and slot buffer @buf
 * (frame at buf + m->data_off, headroom before it), the template @t, the
 * entry's per-entry action values (@values, one 16-byte value per action,
 * used where the action is per-entry), the template's built encapsulations
 * (@tmpl_encap[i] for action i, NULL where none) and the entry's own
 * (@entry_encap, for a per-entry ENCAP).
 *
 * Addresses in action values are 16 bytes: IPv6 as is, IPv4 mapped
 * (::ffff:a.b.c.d), so one value type serves both versions.
 *
 * Mirroring needs a second packet buffer, which only the caller has: the
 * run stops before a MIRROR action with FLOW_ACT_MIRROR and *@pos at it;
 * the caller copies the packet and calls again from *@pos + 1.
 * Reentrant: a packet belongs to one thread at a time.
 */
#ifndef DPFLOW_FLOW_ACTIONS_IMPL_H
#define DPFLOW_FLOW_ACTIONS_IMPL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "dpflow/flow.h"
#include "flow/field_impl.h"
#include "flow/pkt_edit_impl.h"

/* Returned (above every drop reason) when the run stopped at a MIRROR. */
#define FLOW_ACT_MIRROR 0x100u

DPF_HD static inline uint32_t flow_act_be_get(const uint8_t *v, unsigned bytes)
{
	uint32_t x = 0;

	for (unsigned i = 0; i < bytes && i < 4; i++)
		x = x << 8 | v[i];
	return x;
}

DPF_HD static inline bool flow_act_is_reg(unsigned f)
{
	return f >= DPFLOW_FIELD_META_REG0 && f <= DPFLOW_FIELD_META_REG3;
}

/* Whether a 16-byte action address @v is IPv4, mapped as ::ffff:a.b.c.d
 * (no table in static memory: device code). */
DPF_HD static inline bool flow_act_addr_is_v4(const uint8_t *v)
{
	uint8_t zero = 0;

	for (unsigned i = 0; i < 10; i++)
		zero |= v[i];
	return !zero && v[10] == 0xff && v[11] == 0xff;
}

/* NAT of an address given as 16 bytes (IPv4 mapped or IPv6). */
DPF_HD static inline unsigned flow_act_set_addr(struct dpflow_pkt_meta *m,
						uint8_t *buf, unsigned dir,
						const uint8_t *v)
{
	if (flow_act_addr_is_v4(v))
		return dpflow_edit_set_ipv4_impl(m, buf, dir, v + 12);
	return dpflow_edit_set_ipv6_impl(m, buf, dir, v);
}

/* `set` on a header field (checksums fixed) or a register. */
DPF_HD static inline unsigned flow_act_set_field(struct dpflow_pkt_meta *m,
						 uint8_t *buf, unsigned f,
						 const uint8_t *v)
{
	switch (f) {
	case DPFLOW_FIELD_OUTER_ETH_SRC:
		return dpflow_edit_set_mac_impl(m, buf, v, NULL);
	case DPFLOW_FIELD_OUTER_ETH_DST:
		return dpflow_edit_set_mac_impl(m, buf, NULL, v);
	case DPFLOW_FIELD_OUTER_ETH_TYPE:
		return dpflow_edit_set_ethertype_impl(
		    m, buf, (uint16_t)flow_act_be_get(v, 2));
	case DPFLOW_FIELD_OUTER_IPV4_SRC:
		return dpflow_edit_set_ipv4_impl(m, buf, DPFLOW_EDIT_SRC, v);
	case DPFLOW_FIELD_OUTER_IPV4_DST:
		return dpflow_edit_set_ipv4_impl(m, buf, DPFLOW_EDIT_DST, v);
	case DPFLOW_FIELD_OUTER_IPV6_SRC:
		return dpflow_edit_set_ipv6_impl(m, buf, DPFLOW_EDIT_SRC, v);
	case DPFLOW_FIELD_OUTER_IPV6_DST:
		return dpflow_edit_set_ipv6_impl(m, buf, DPFLOW_EDIT_DST, v);
	case DPFLOW_FIELD_OUTER_IP_DSCP:
		return dpflow_edit_set_dscp_impl(m, buf, v[0]);
	case DPFLOW_FIELD_OUTER_L4_SPORT:
		return dpflow_edit_set_port_impl(
		    m, buf, DPFLOW_EDIT_SRC, (uint16_t)flow_act_be_get(v, 2));
	case DPFLOW_FIELD_OUTER_L4_DPORT:
		return dpflow_edit_set_port_impl(
		    m, buf, DPFLOW_EDIT_DST, (uint16_t)flow_act_be_get(v, 2));
	default:
		if (!flow_act_is_reg(f))
			return DPFLOW_DROP_EDIT_BAD_ACTION;
		m->reg[f - DPFLOW_FIELD_META_REG0] = flow_act_be_get(v, 4);
		return 0;
	}
}

/*
 * Run actions *@pos .. t->n - 1 of template @t on the packet, in order.
 * Returns 0 when all ran, the first failing action's drop reason (the
 * packet is then dropped by the caller), or FLOW_ACT_MIRROR with *@pos at
 * a MIRROR action (see the header comment).
 */
DPF_HD static inline unsigned flow_actions_run_impl(
    struct dpflow_pkt_meta *m, uint8_t *buf, const struct dpflow_action_tmpl *t,
    const uint8_t (*values)[16],
    const struct dpflow_edit_encap *const *tmpl_encap,
    const struct dpflow_edit_encap *entry_encap, unsigned *pos)
{
	for (unsigned i = *pos; i < t->n && i < DPFLOW_ACTIONS_MAX; i++) {
		const struct dpflow_action *a = &t->a[i];
		const uint8_t *v = a->per_entry ? values[i] : a->value;
		const struct dpflow_edit_encap *encap;
		unsigned r = 0;
		uint8_t src[16];

		switch (a->kind) {
		case DPFLOW_ACT_SET_FIELD:
			r = flow_act_set_field(m, buf, a->field, v);
			break;
		case DPFLOW_ACT_ADD_FIELD:
			if (!flow_act_is_reg(a->field))
				return DPFLOW_DROP_EDIT_BAD_ACTION;
			m->reg[a->field - DPFLOW_FIELD_META_REG0] +=
			    flow_act_be_get(v, 4);
			break;
		case DPFLOW_ACT_COPY_FIELD: {
			/* the field's low 32 bits: its last bytes */
			unsigned n = (dpflow_field_width(a->src_field) + 7) / 8;
			unsigned skip = n > 4 ? n - 4 : 0;

			if (!flow_act_is_reg(a->field))
				return DPFLOW_DROP_EDIT_BAD_ACTION;
			memset(src, 0, sizeof(src));
			dpflow_field_get(buf + m->data_off, m, a->src_field,
					 src);
			m->reg[a->field - DPFLOW_FIELD_META_REG0] =
			    flow_act_be_get(src + skip, n - skip);
			break;
		}
		case DPFLOW_ACT_SET_MAC_SRC:
			r = dpflow_edit_set_mac_impl(m, buf, v, NULL);
			break;
		case DPFLOW_ACT_SET_MAC_DST:
			r = dpflow_edit_set_mac_impl(m, buf, NULL, v);
			break;
		case DPFLOW_ACT_DEC_TTL:
			r = dpflow_edit_dec_ttl_impl(m, buf);
			break;
		case DPFLOW_ACT_NAT_SRC_IP:
			r = flow_act_set_addr(m, buf, DPFLOW_EDIT_SRC, v);
			break;
		case DPFLOW_ACT_NAT_DST_IP:
			r = flow_act_set_addr(m, buf, DPFLOW_EDIT_DST, v);
			break;
		case DPFLOW_ACT_NAT_SRC_PORT:
			r = dpflow_edit_set_port_impl(
			    m, buf, DPFLOW_EDIT_SRC,
			    (uint16_t)flow_act_be_get(v, 2));
			break;
		case DPFLOW_ACT_NAT_DST_PORT:
			r = dpflow_edit_set_port_impl(
			    m, buf, DPFLOW_EDIT_DST,
			    (uint16_t)flow_act_be_get(v, 2));
			break;
		case DPFLOW_ACT_VLAN_PUSH:
			r = dpflow_edit_vlan_push_impl(m, buf, a->tpid, a->tci);
			break;
		case DPFLOW_ACT_VLAN_POP:
			r = dpflow_edit_vlan_pop_impl(m, buf);
			break;
		case DPFLOW_ACT_ENCAP:
			encap = a->per_entry ? entry_encap : tmpl_encap[i];
			if (!encap)
				return DPFLOW_DROP_EDIT_BAD_ACTION;
			r = dpflow_edit_encap_impl(m, buf, encap);
			break;
		case DPFLOW_ACT_DECAP:
			r = dpflow_edit_decap_impl(m, buf, 0);
			break;
		case DPFLOW_ACT_MIRROR:
			*pos = i;
			return FLOW_ACT_MIRROR;
		default:
			r = DPFLOW_DROP_EDIT_BAD_ACTION;
			break;
		}
		if (r)
			return r;
	}
	return 0;
}

#endif /* DPFLOW_FLOW_ACTIONS_IMPL_H */
