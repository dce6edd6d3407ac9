/*
 * Packet edit actions: the CPU instantiation of pkt_edit_impl.h and the
 * control calls (template building for dpflow/pkt_edit.h, validation).
 *
 * The data-path functions are thin out-of-line wrappers that turn a pool
 * slot into (metadata, buffer) and call the shared code; any worker thread.
 * The control functions touch only the caller's structures; any thread.
 */
#include <errno.h>
#include <string.h>

#include "flow/pkt_edit.h"

/* ---- control ------------------------------------------------------------ */

static const char *const op_names[DPFLOW_EDIT__COUNT] = {
    "nop",	    "set_mac",	      "set_ethertype",	"dec_ttl",
    "set_ipv4_src", "set_ipv4_dst",   "set_ipv6_src",	"set_ipv6_dst",
    "set_l4_src",   "set_l4_dst",     "set_dscp",	"vlan_push",
    "vlan_pop",	    "encap",	      "decap",		"field_set",
    "field_add",    "field_copy",     "reg_set",	"reg_add",
    "reg_copy",	    "reg_from_field", "field_from_reg",
};

const char *dpflow_edit_op_name(unsigned op)
{
	return op < DPFLOW_EDIT__COUNT ? op_names[op] : NULL;
}

static int encap_fail(struct dpflow_edit_encap *t, struct dpflow_error *err,
		      const char *field, const char *what, unsigned value)
{
	memset(t, 0, sizeof(*t));
	return dpflow_error_set(err, EINVAL, field, "encap %s: %s (%u)", field,
				what, value);
}

int dpflow_edit_encap_build(struct dpflow_edit_encap *t,
			    const struct dpflow_edit_encap_params *p,
			    struct dpflow_error *err)
{
	uint8_t *o = t->hdr, *ip = t->hdr + 14, *l4;
	int v4 = p->ip_version == 4, udp;
	uint32_t tlen = 0; /* tunnel header after UDP / GRE base */
	uint8_t proto;

	memset(t, 0, sizeof(*t));
	if (p->type != DPFLOW_TUN_VXLAN && p->type != DPFLOW_TUN_GENEVE &&
	    p->type != DPFLOW_TUN_GRE && p->type != DPFLOW_TUN_IPIP)
		return encap_fail(t, err, "type", "not a tunnel type", p->type);
	if (p->ip_version != 4 && p->ip_version != 6)
		return encap_fail(t, err, "ip_version", "must be 4 or 6",
				  p->ip_version);
	if (p->inner_eth > 1 ||
	    (p->type == DPFLOW_TUN_VXLAN && !p->inner_eth) ||
	    (p->type == DPFLOW_TUN_IPIP && p->inner_eth))
		return encap_fail(t, err, "inner_eth",
				  "VXLAN carries Ethernet, IP-in-IP does not",
				  p->inner_eth);
	if (p->flags & ~DPFLOW_EDIT_ENCAP_F__ALL)
		return encap_fail(t, err, "flags", "unknown flag bits",
				  p->flags);
	if ((p->flags & DPFLOW_EDIT_ENCAP_F_GRE_KEY) &&
	    p->type != DPFLOW_TUN_GRE)
		return encap_fail(t, err, "flags", "GRE_KEY without GRE",
				  p->flags);
	if ((p->flags & DPFLOW_EDIT_ENCAP_F_GENEVE_CRIT) &&
	    p->type != DPFLOW_TUN_GENEVE)
		return encap_fail(t, err, "flags", "GENEVE_CRIT without GENEVE",
				  p->flags);
	if ((p->flags &
	     (DPFLOW_EDIT_ENCAP_F_DF | DPFLOW_EDIT_ENCAP_F_UDP_CSUM)) &&
	    !v4)
		return encap_fail(
		    t, err, "flags",
		    "DF and UDP_CSUM are for an IPv4 outer header", p->flags);
	if ((p->flags & DPFLOW_EDIT_ENCAP_F_FLOWLABEL_HASH) && v4)
		return encap_fail(t, err, "flags",
				  "FLOWLABEL_HASH needs an IPv6 outer header",
				  p->flags);
	if (p->opt_len && (p->type != DPFLOW_TUN_GENEVE || p->opt_len % 4 ||
			   p->opt_len > DPFLOW_EDIT_GENEVE_OPT_MAX))
		return encap_fail(t, err, "opt_len",
				  "GENEVE only, a multiple of 4, at most 64",
				  p->opt_len);
	if ((p->type == DPFLOW_TUN_VXLAN || p->type == DPFLOW_TUN_GENEVE) &&
	    p->vni > 0xffffff)
		return encap_fail(t, err, "vni", "more than 24 bits", p->vni);
	if (p->vni && p->type == DPFLOW_TUN_IPIP)
		return encap_fail(t, err, "vni", "IP-in-IP has no VNI or key",
				  p->vni);
	if (p->vni && p->type == DPFLOW_TUN_GRE &&
	    !(p->flags & DPFLOW_EDIT_ENCAP_F_GRE_KEY))
		return encap_fail(t, err, "vni",
				  "a GRE key needs DPFLOW_EDIT_ENCAP_F_GRE_KEY",
				  p->vni);
	if (p->flow_label > 0xfffff || (p->flow_label && v4))
		return encap_fail(t, err, "flow_label",
				  "20 bits, outer IPv6 only", p->flow_label);
	udp = p->type == DPFLOW_TUN_VXLAN || p->type == DPFLOW_TUN_GENEVE;
	if (!udp && (p->udp_dport || p->sport_min || p->sport_max))
		return encap_fail(t, err,
				  p->udp_dport ? "udp_dport" : "sport_min",
				  "no UDP header in this tunnel",
				  p->udp_dport ? p->udp_dport : p->sport_min);
	if ((p->sport_min || p->sport_max) && !p->sport_min)
		return encap_fail(t, err, "sport_min", "0 with a maximum set",
				  p->sport_min);
	if ((p->sport_min || p->sport_max) && p->sport_max < p->sport_min)
		return encap_fail(t, err, "sport_max", "below sport_min",
				  p->sport_max);

	/* Ethernet */
	memcpy(o, p->eth_dst, 6);
	memcpy(o + 6, p->eth_src, 6);
	dpflow_edit_wr16(o + 12,
			 v4 ? DPFLOW_ETHERTYPE_IPV4 : DPFLOW_ETHERTYPE_IPV6);

	/* IP: lengths, checksum and an IP-in-IP protocol per packet */
	if (p->type == DPFLOW_TUN_GRE)
		proto = DPFLOW_IPPROTO_GRE;
	else if (udp)
		proto = DPFLOW_IPPROTO_UDP;
	else
		proto = 0;
	if (v4) {
		ip[0] = 0x45;
		ip[1] = p->tos;
		if (p->flags & DPFLOW_EDIT_ENCAP_F_DF)
			ip[6] = 0x40;
		ip[8] = p->ttl ? p->ttl : 64;
		ip[9] = proto;
		memcpy(ip + 12, p->src, 4);
		memcpy(ip + 16, p->dst, 4);
		t->ip_sum = dpflow_encap_ipv4_sum(ip);
		t->l4_off = 34;
	} else {
		ip[0] = (uint8_t)(0x60 | p->tos >> 4);
		ip[1] = (uint8_t)((uint32_t)(p->tos & 0x0f) << 4 |
				  p->flow_label >> 16);
		dpflow_edit_wr16(ip + 2, p->flow_label);
		ip[6] = proto;
		ip[7] = p->ttl ? p->ttl : 64;
		memcpy(ip + 8, p->src, 16);
		memcpy(ip + 24, p->dst, 16);
		t->l4_off = 54;
	}
	l4 = o + t->l4_off;

	switch (p->type) {
	case DPFLOW_TUN_VXLAN:
		dpflow_edit_wr16(l4 + 2, p->udp_dport ? p->udp_dport
						      : DPFLOW_UDP_PORT_VXLAN);
		l4[8] = 0x08; /* I: the VNI is valid */
		dpflow_edit_wr32(l4 + 12, p->vni << 8);
		tlen = 8 + 8;
		break;
	case DPFLOW_TUN_GENEVE:
		dpflow_edit_wr16(l4 + 2, p->udp_dport ? p->udp_dport
						      : DPFLOW_UDP_PORT_GENEVE);
		l4[8] = (uint8_t)(p->opt_len / 4);
		if (p->flags & DPFLOW_EDIT_ENCAP_F_GENEVE_CRIT)
			l4[9] = 0x40;
		if (p->inner_eth)
			dpflow_edit_wr16(l4 + 10, DPFLOW_ETHERTYPE_TEB);
		dpflow_edit_wr32(l4 + 12, p->vni << 8);
		memcpy(l4 + 16, p->opts, p->opt_len);
		tlen = 8 + 8 + p->opt_len;
		break;
	case DPFLOW_TUN_GRE:
		if (p->flags & DPFLOW_EDIT_ENCAP_F_GRE_KEY) {
			dpflow_edit_wr16(l4, DPFLOW_GRE_F_KEY);
			dpflow_edit_wr32(l4 + 4, p->vni);
			tlen = 8;
		} else {
			tlen = 4;
		}
		if (p->inner_eth)
			dpflow_edit_wr16(l4 + 2, DPFLOW_ETHERTYPE_TEB);
		break;
	default: /* IP-in-IP: nothing after the IP header */
		break;
	}

	t->magic = DPFLOW_EDIT_ENCAP_MAGIC;
	t->type = p->type;
	t->ip_version = p->ip_version;
	t->inner_eth = p->inner_eth;
	t->flags = p->flags;
	t->hdr_len = (uint16_t)(t->l4_off + tlen);
	if (p->sport_min) {
		t->sport_min = p->sport_min;
		t->sport_span = (uint16_t)(p->sport_max - p->sport_min);
	} else {
		t->sport_min = DPFLOW_EDIT_SPORT_MIN;
		t->sport_span = DPFLOW_EDIT_SPORT_MAX - DPFLOW_EDIT_SPORT_MIN;
	}
	dpflow_error_clear(err);
	return 0;
}

static int check_field(const struct dpflow_edit_field *f, unsigned max_width,
		       struct dpflow_error *err, const char *name)
{
	if (f->layer >= DPFLOW_EDIT_LAYER__COUNT)
		return dpflow_error_set(err, EINVAL, "layer",
					"%s layer %u: unknown", name, f->layer);
	if (f->width == 0 || f->width > max_width)
		return dpflow_error_set(err, EINVAL, "width",
					"%s width %u: must be 1..%u", name,
					f->width, max_width);
	if ((uint32_t)f->off + f->width > 0xffff)
		return dpflow_error_set(err, EINVAL, "offset",
					"%s offset %u: beyond any frame", name,
					f->off);
	return 0;
}

static int check_reg(unsigned reg, struct dpflow_error *err, const char *name)
{
	if (reg >= DPFLOW_META_REGS)
		return dpflow_error_set(err, EINVAL, "reg",
					"%s register %u: there are %u", name,
					reg, DPFLOW_META_REGS);
	return 0;
}

int dpflow_edit_action_check(const struct dpflow_edit_action *a,
			     struct dpflow_error *err)
{
	const struct dpflow_edit_encap *t;
	int r = 0;

	dpflow_error_clear(err);
	switch (a->op) {
	case DPFLOW_EDIT_SET_MAC:
		if (!a->u.mac.set_src && !a->u.mac.set_dst)
			r = dpflow_error_set(
			    err, EINVAL, "mac",
			    "set_mac: neither src nor dst set");
		break;
	case DPFLOW_EDIT_SET_DSCP:
		if (a->u.dscp > 63)
			r = dpflow_error_set(err, EINVAL, "dscp",
					     "set_dscp: %u is not 0..63",
					     a->u.dscp);
		break;
	case DPFLOW_EDIT_VLAN_PUSH:
		if (a->u.vlan.tpid != DPFLOW_ETHERTYPE_VLAN &&
		    a->u.vlan.tpid != DPFLOW_ETHERTYPE_QINQ)
			r = dpflow_error_set(err, EINVAL, "tpid",
					     "vlan_push: TPID 0x%04x is not "
					     "0x8100 or 0x88a8",
					     a->u.vlan.tpid);
		break;
	case DPFLOW_EDIT_ENCAP:
		t = &a->u.encap;
		if (t->magic != DPFLOW_EDIT_ENCAP_MAGIC ||
		    t->hdr_len > DPFLOW_EDIT_ENCAP_HDR_MAX ||
		    t->l4_off > t->hdr_len || t->l4_off < 34)
			r = dpflow_error_set(err, EINVAL, "encap",
					     "encap: template not built by "
					     "dpflow_edit_encap_build");
		break;
	case DPFLOW_EDIT_DECAP:
		if (a->u.tun_type > DPFLOW_TUN_IPIP)
			r = dpflow_error_set(err, EINVAL, "tun_type",
					     "decap: tunnel type %u unknown",
					     a->u.tun_type);
		break;
	case DPFLOW_EDIT_FIELD_SET:
		r = check_field(&a->u.set.f, DPFLOW_EDIT_FIELD_MAX, err,
				"field_set");
		break;
	case DPFLOW_EDIT_FIELD_ADD:
		r = check_field(&a->u.add.f, 4, err, "field_add");
		break;
	case DPFLOW_EDIT_FIELD_COPY:
		r = check_field(&a->u.copy.dst, DPFLOW_EDIT_FIELD_MAX, err,
				"field_copy dst");
		if (!r)
			r = check_field(&a->u.copy.src, DPFLOW_EDIT_FIELD_MAX,
					err, "field_copy src");
		if (!r && a->u.copy.src.width != a->u.copy.dst.width)
			r = dpflow_error_set(err, EINVAL, "width",
					     "field_copy: widths %u and %u "
					     "differ",
					     a->u.copy.dst.width,
					     a->u.copy.src.width);
		break;
	case DPFLOW_EDIT_REG_SET:
	case DPFLOW_EDIT_REG_ADD:
		r = check_reg(a->u.reg.dst, err, op_names[a->op]);
		break;
	case DPFLOW_EDIT_REG_COPY:
		r = check_reg(a->u.reg.dst, err, "reg_copy dst");
		if (!r)
			r = check_reg(a->u.reg.src, err, "reg_copy src");
		break;
	case DPFLOW_EDIT_REG_FROM_FIELD:
	case DPFLOW_EDIT_FIELD_FROM_REG:
		r = check_reg(a->u.freg.reg, err, op_names[a->op]);
		if (!r)
			r = check_field(&a->u.freg.f, 4, err, op_names[a->op]);
		break;
	case DPFLOW_EDIT_NOP:
	case DPFLOW_EDIT_SET_ETHERTYPE:
	case DPFLOW_EDIT_DEC_TTL:
	case DPFLOW_EDIT_SET_IPV4_SRC:
	case DPFLOW_EDIT_SET_IPV4_DST:
	case DPFLOW_EDIT_SET_IPV6_SRC:
	case DPFLOW_EDIT_SET_IPV6_DST:
	case DPFLOW_EDIT_SET_L4_SRC:
	case DPFLOW_EDIT_SET_L4_DST:
	case DPFLOW_EDIT_VLAN_POP:
		break;
	default:
		r = dpflow_error_set(err, EINVAL, "op", "edit op %u unknown",
				     a->op);
		break;
	}
	return r;
}

/* ---- data path ---------------------------------------------------------- */

#define PKT(pool, idx) dpflow_pool_meta(pool, idx), dpflow_pool_buf(pool, idx)

/* Packets ahead whose metadata, then frame, are prefetched. */
#define PREFETCH_META_AHEAD 8
#define PREFETCH_DATA_AHEAD 4

unsigned dpflow_edit_apply(const struct dpflow_pool *pool, uint32_t idx,
			   const struct dpflow_edit_action *a)
{
	return dpflow_edit_apply_impl(PKT(pool, idx), a);
}

uint16_t dpflow_edit_apply_burst(const struct dpflow_pool *pool,
				 const uint32_t *idx, uint16_t n,
				 const struct dpflow_edit_action *a)
{
	uint16_t ok = 0, i;

	for (i = 0; i < n && i < PREFETCH_META_AHEAD; i++)
		DPFLOW_PREFETCH(dpflow_pool_meta(pool, idx[i]));
	for (i = 0; i < n; i++) {
		if (i + PREFETCH_META_AHEAD < n)
			DPFLOW_PREFETCH(dpflow_pool_meta(
			    pool, idx[i + PREFETCH_META_AHEAD]));
		if (i + PREFETCH_DATA_AHEAD < n)
			DPFLOW_PREFETCH(dpflow_pkt_data(
			    pool, idx[i + PREFETCH_DATA_AHEAD]));
		ok = (uint16_t)(ok + (dpflow_edit_apply_impl(PKT(pool, idx[i]),
							     a) == 0));
	}
	return ok;
}

unsigned dpflow_edit_set_mac(const struct dpflow_pool *pool, uint32_t idx,
			     const uint8_t *src, const uint8_t *dst)
{
	return dpflow_edit_set_mac_impl(PKT(pool, idx), src, dst);
}

unsigned dpflow_edit_set_ethertype(const struct dpflow_pool *pool, uint32_t idx,
				   uint16_t ethertype)
{
	return dpflow_edit_set_ethertype_impl(PKT(pool, idx), ethertype);
}

unsigned dpflow_edit_dec_ttl(const struct dpflow_pool *pool, uint32_t idx)
{
	return dpflow_edit_dec_ttl_impl(PKT(pool, idx));
}

unsigned dpflow_edit_set_ipv4(const struct dpflow_pool *pool, uint32_t idx,
			      unsigned dir, const uint8_t addr[4])
{
	return dpflow_edit_set_ipv4_impl(PKT(pool, idx), dir, addr);
}

unsigned dpflow_edit_set_ipv6(const struct dpflow_pool *pool, uint32_t idx,
			      unsigned dir, const uint8_t addr[16])
{
	return dpflow_edit_set_ipv6_impl(PKT(pool, idx), dir, addr);
}

unsigned dpflow_edit_set_port(const struct dpflow_pool *pool, uint32_t idx,
			      unsigned dir, uint16_t port)
{
	return dpflow_edit_set_port_impl(PKT(pool, idx), dir, port);
}

unsigned dpflow_edit_set_dscp(const struct dpflow_pool *pool, uint32_t idx,
			      uint8_t dscp)
{
	return dpflow_edit_set_dscp_impl(PKT(pool, idx), dscp);
}

unsigned dpflow_edit_vlan_push(const struct dpflow_pool *pool, uint32_t idx,
			       uint16_t tpid, uint16_t tci)
{
	return dpflow_edit_vlan_push_impl(PKT(pool, idx), tpid, tci);
}

unsigned dpflow_edit_vlan_pop(const struct dpflow_pool *pool, uint32_t idx)
{
	return dpflow_edit_vlan_pop_impl(PKT(pool, idx));
}

unsigned dpflow_edit_encap(const struct dpflow_pool *pool, uint32_t idx,
			   const struct dpflow_edit_encap *t)
{
	return dpflow_edit_encap_impl(PKT(pool, idx), t);
}

unsigned dpflow_edit_decap(const struct dpflow_pool *pool, uint32_t idx,
			   unsigned tun_type)
{
	return dpflow_edit_decap_impl(PKT(pool, idx), tun_type);
}

unsigned dpflow_edit_field_set(const struct dpflow_pool *pool, uint32_t idx,
			       const struct dpflow_edit_field *f,
			       const uint8_t *val, const uint8_t *mask)
{
	return dpflow_edit_field_set_impl(PKT(pool, idx), f, val, mask);
}

unsigned dpflow_edit_field_add(const struct dpflow_pool *pool, uint32_t idx,
			       const struct dpflow_edit_field *f,
			       uint32_t delta)
{
	return dpflow_edit_field_add_impl(PKT(pool, idx), f, delta);
}

unsigned dpflow_edit_field_copy(const struct dpflow_pool *pool, uint32_t idx,
				const struct dpflow_edit_field *dst,
				const struct dpflow_edit_field *src)
{
	return dpflow_edit_field_copy_impl(PKT(pool, idx), dst, src);
}
