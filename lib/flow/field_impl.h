/*
 * Field extraction shared by the CPU and GPU targets: the value of one
 * match field (field.h) of a parsed packet, written big-endian into a key.
 *
 * Fields of a header set that the packet does not have (an IPv6 address of
 * an IPv4 packet, inner fields of an untunnelled one, ports of a later
 * fragment) read as zeros, so a key is always fully defined.
 */
#ifndef DPFLOW_FIELD_IMPL_H
#define DPFLOW_FIELD_IMPL_H

#include <string.h>

#include "dpflow/field.h"
#include "dpflow/meta.h"

DPF_HD static inline void dpflow_key_put16(uint8_t *k, uint32_t v)
{
	k[0] = (uint8_t)(v >> 8);
	k[1] = (uint8_t)v;
}

DPF_HD static inline void dpflow_key_put32(uint8_t *k, uint32_t v)
{
	k[0] = (uint8_t)(v >> 24);
	k[1] = (uint8_t)(v >> 16);
	k[2] = (uint8_t)(v >> 8);
	k[3] = (uint8_t)v;
}

/* Field @rel (0.. within one header set) of @h into @k. */
DPF_HD static inline void dpflow_hdr_field_get(const uint8_t *frame,
					       const struct dpflow_hdr *h,
					       unsigned rel, uint8_t *k)
{
	int ip4 = h->l3_type == DPFLOW_L3_IPV4;
	int ip6 = h->l3_type == DPFLOW_L3_IPV6;
	int ip = ip4 || ip6;
	int ports = h->l4_type == DPFLOW_L4_TCP ||
		    h->l4_type == DPFLOW_L4_UDP || h->l4_type == DPFLOW_L4_SCTP;
	int icmp =
	    h->l4_type == DPFLOW_L4_ICMP || h->l4_type == DPFLOW_L4_ICMPV6;
	int eth = h->l2_type == DPFLOW_L2_ETH;

	switch (rel) {
	case 0: /* eth.src */
		if (eth)
			memcpy(k, frame + h->l2_off + 6, 6);
		else
			memset(k, 0, 6);
		break;
	case 1: /* eth.dst */
		if (eth)
			memcpy(k, frame + h->l2_off, 6);
		else
			memset(k, 0, 6);
		break;
	case 2:
		dpflow_key_put16(k, eth ? h->ethertype : 0);
		break;
	case 3:
		dpflow_key_put16(k,
				 eth && h->n_vlan > 0 ? h->vlan[0] & 0xfff : 0);
		break;
	case 4:
		dpflow_key_put16(k,
				 eth && h->n_vlan > 1 ? h->vlan[1] & 0xfff : 0);
		break;
	case 5:
		k[0] = h->l3_type;
		break;
	case 6:
		if (ip4)
			memcpy(k, h->src, 4);
		else
			memset(k, 0, 4);
		break;
	case 7:
		if (ip4)
			memcpy(k, h->dst, 4);
		else
			memset(k, 0, 4);
		break;
	case 8:
		if (ip6)
			memcpy(k, h->src, 16);
		else
			memset(k, 0, 16);
		break;
	case 9:
		if (ip6)
			memcpy(k, h->dst, 16);
		else
			memset(k, 0, 16);
		break;
	case 10:
		k[0] = ip ? h->proto : 0;
		break;
	case 11:
		k[0] = ip ? (uint8_t)(h->tos >> 2) : 0;
		break;
	case 12:
		k[0] = ip ? h->ttl : 0;
		break;
	case 13:
		k[0] = ip ? h->frag : 0;
		break;
	case 14:
		k[0] = h->l4_type;
		break;
	case 15:
		dpflow_key_put16(k, ports ? h->sport : 0);
		break;
	case 16:
		dpflow_key_put16(k, ports ? h->dport : 0);
		break;
	case 17:
		k[0] = h->l4_type == DPFLOW_L4_TCP ? h->tcp_flags : 0;
		break;
	case 18:
		k[0] = icmp ? (uint8_t)h->sport : 0;
		break;
	case 19:
		k[0] = icmp ? (uint8_t)h->dport : 0;
		break;
	default:
		break;
	}
}

/* Width of field @f in bits (0 when out of range), usable on both targets. */
DPF_HD static inline unsigned dpflow_field_width(unsigned f)
{
	switch (f) {
#define DPFLOW_FIELD_WIDTH_(id, name, bits) \
	case DPFLOW_FIELD_##id:             \
		return bits;
		DPFLOW_FOREACH_FIELD(DPFLOW_FIELD_WIDTH_)
#undef DPFLOW_FIELD_WIDTH_
	default:
		return 0;
	}
}

/*
 * Write field @f of the packet (@frame with metadata @m) at @k; the field
 * takes dpflow_field_bytes(f) bytes.
 */
DPF_HD static inline void dpflow_field_get(const uint8_t *frame,
					   const struct dpflow_pkt_meta *m,
					   unsigned f, uint8_t *k)
{
	unsigned outer0 = DPFLOW_FIELD_OUTER_ETH_SRC;
	unsigned inner0 = DPFLOW_FIELD_INNER_ETH_SRC;

	if (f >= inner0) {
		if (m->tun_type != DPFLOW_TUN_NONE)
			dpflow_hdr_field_get(frame, &m->inner, f - inner0, k);
		else /* no inner packet: the field reads as zeros */
			memset(k, 0, (dpflow_field_width(f) + 7) / 8);
		return;
	}
	if (f >= outer0) {
		dpflow_hdr_field_get(frame, &m->outer, f - outer0, k);
		return;
	}
	switch (f) {
	case DPFLOW_FIELD_META_PORT:
		dpflow_key_put16(k, m->port);
		break;
	case DPFLOW_FIELD_META_REG0:
	case DPFLOW_FIELD_META_REG1:
	case DPFLOW_FIELD_META_REG2:
	case DPFLOW_FIELD_META_REG3:
		dpflow_key_put32(k, m->reg[f - DPFLOW_FIELD_META_REG0]);
		break;
	case DPFLOW_FIELD_TUN_TYPE:
		k[0] = m->tun_type;
		break;
	case DPFLOW_FIELD_TUN_ID:
		dpflow_key_put32(k, m->tun_type ? m->tun_id : 0);
		break;
	case DPFLOW_FIELD_TUN_INVALID:
		k[0] = (uint8_t)((m->flags & DPFLOW_META_F_TUN_INVALID) != 0);
		break;
	case DPFLOW_FIELD_META_COLOR:
		k[0] = m->color;
		break;
	case DPFLOW_FIELD_META_CT_STATE:
		k[0] = m->ct_state;
		break;
	case DPFLOW_FIELD_META_CT_FLAGS:
		k[0] = m->ct_flags;
		break;
	default:
		break;
	}
}

#endif /* DPFLOW_FIELD_IMPL_H */
