/*
 * The parser's code, shared by the CPU and the GPU targets.
 *
 * Everything here is DPF_HD and written in the common subset of C11 and
 * CUDA C++ (see DESIGN.md §1): lib/parse/parse.c instantiates it for the
 * CPU, the GPU target includes it into its kernels. Nothing here allocates,
 * logs or reads past `end`: every header is checked against the bytes that
 * remain before it is read.
 *
 * Bounds: the outer headers are bounded by the frame; L4 headers by the IP
 * datagram (so Ethernet padding is ignored); the inner packet of a UDP
 * tunnel by the UDP datagram, of GRE and IP-in-IP by the outer datagram.
 * A layer's fields (and its *_type) are set only once its header passed
 * every check; on failure the reason is returned and later layers stay NONE.
 *
 * UDP tunnels are a guess from the destination port (4789, 6081): any
 * application may use those ports. A payload that is not a tunnel the
 * parser opens (header, flags, version, options, protocol type, or the
 * inner packet failing) leaves a valid UDP packet: tunnel fields reset,
 * DPFLOW_META_F_TUN_INVALID set, no drop. GRE and IP-in-IP are named by
 * the IP protocol field itself, so their failures stay drops.
 */
#ifndef DPFLOW_PARSE_IMPL_H
#define DPFLOW_PARSE_IMPL_H

#include <string.h>

#include "dpflow/meta.h"

#define DPFLOW_ETHERTYPE_IPV4 0x0800
#define DPFLOW_ETHERTYPE_IPV6 0x86dd
#define DPFLOW_ETHERTYPE_VLAN 0x8100
#define DPFLOW_ETHERTYPE_QINQ 0x88a8
#define DPFLOW_ETHERTYPE_TEB  0x6558 /* transparent Ethernet bridging */

#define DPFLOW_IPPROTO_HOPOPTS	0
#define DPFLOW_IPPROTO_ICMP	1
#define DPFLOW_IPPROTO_IPIP	4
#define DPFLOW_IPPROTO_TCP	6
#define DPFLOW_IPPROTO_UDP	17
#define DPFLOW_IPPROTO_IPV6	41
#define DPFLOW_IPPROTO_ROUTING	43
#define DPFLOW_IPPROTO_FRAGMENT 44
#define DPFLOW_IPPROTO_GRE	47
#define DPFLOW_IPPROTO_ICMPV6	58
#define DPFLOW_IPPROTO_NONXT	59
#define DPFLOW_IPPROTO_DSTOPTS	60
#define DPFLOW_IPPROTO_SCTP	132

#define DPFLOW_UDP_PORT_VXLAN  4789
#define DPFLOW_UDP_PORT_GENEVE 6081

#define DPFLOW_VXLAN_F_I 0x08 /* the VNI is valid (RFC 7348: MUST be set) */

#define DPFLOW_PARSE_MAX_VLAN	  2
#define DPFLOW_PARSE_MAX_IPV6_EXT 8

#define DPFLOW_GRE_F_CSUM	0x8000
#define DPFLOW_GRE_F_ROUTING	0x4000
#define DPFLOW_GRE_F_KEY	0x2000
#define DPFLOW_GRE_F_SEQ	0x1000
#define DPFLOW_GRE_VERSION_MASK 0x0007

/* Where a header set starts. */
enum dpflow_parse_start {
	DPFLOW_PARSE_ETH,
	DPFLOW_PARSE_IPV4,
	DPFLOW_PARSE_IPV6,
};

/* A tunnel found in the outer headers: where its inner packet lies. */
struct dpflow_parse_inner {
	uint32_t off;
	uint32_t end;
	uint8_t start; /* enum dpflow_parse_start */
	uint8_t found;
};

DPF_HD static inline uint16_t dpflow_rd16(const uint8_t *p)
{
	return (uint16_t)((uint16_t)p[0] << 8 | p[1]);
}

DPF_HD static inline uint32_t dpflow_rd32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

DPF_HD static inline void dpflow_parse_hdr_reset(struct dpflow_hdr *h,
						 uint32_t off)
{
	h->l2_off = h->l3_off = h->l4_off = h->pay_off = (uint16_t)off;
	h->sport = h->dport = 0;
	h->l3_len = 0;
	h->ethertype = 0;
	h->n_vlan = 0;
	h->l2_type = DPFLOW_L2_NONE;
	h->l3_type = DPFLOW_L3_NONE;
	h->l4_type = DPFLOW_L4_NONE;
	h->proto = 0;
	h->frag = DPFLOW_FRAG_NONE;
	h->ttl = 0;
	h->tos = 0;
	h->tcp_flags = 0;
	h->n_ext = 0;
}

/*
 * Ethernet and up to two VLAN tags at @*off. On success sets the L2 fields,
 * advances @*off to the L3 header and returns 0.
 */
DPF_HD static inline unsigned dpflow_parse_eth(const uint8_t *f, uint32_t *off,
					       uint32_t end,
					       struct dpflow_hdr *h)
{
	uint32_t o = *off;
	uint16_t et;
	uint8_t n_vlan = 0;

	if (DPFLOW_UNLIKELY(end - o < 14))
		return DPFLOW_DROP_ETH_TRUNC;
	et = dpflow_rd16(f + o + 12);
	o += 14;
	while (et == DPFLOW_ETHERTYPE_VLAN || et == DPFLOW_ETHERTYPE_QINQ) {
		if (DPFLOW_UNLIKELY(n_vlan == DPFLOW_PARSE_MAX_VLAN))
			return DPFLOW_DROP_VLAN_TOO_MANY;
		if (DPFLOW_UNLIKELY(end - o < 4))
			return DPFLOW_DROP_VLAN_TRUNC;
		h->vlan[n_vlan++] = dpflow_rd16(f + o);
		et = dpflow_rd16(f + o + 2);
		o += 4;
	}
	h->n_vlan = n_vlan;
	h->ethertype = et;
	h->l2_type = DPFLOW_L2_ETH;
	h->l3_off = (uint16_t)o;
	*off = o;
	return DPFLOW_DROP_NONE;
}

/* IPv4 at @*off; on success @*off is the L4 header and @*end the datagram's
 * end. */
DPF_HD static inline unsigned dpflow_parse_ipv4(const uint8_t *f, uint32_t *off,
						uint32_t *end,
						struct dpflow_hdr *h)
{
	const uint8_t *ip = f + *off;
	uint32_t room = *end - *off;
	uint32_t ihl, totlen;
	uint16_t frag;

	if (DPFLOW_UNLIKELY(room < 20))
		return DPFLOW_DROP_IPV4_TRUNC;
	if (DPFLOW_UNLIKELY((ip[0] >> 4) != 4))
		return DPFLOW_DROP_IPV4_BAD_VERSION;
	ihl = (uint32_t)(ip[0] & 0x0f) * 4;
	if (DPFLOW_UNLIKELY(ihl < 20 || ihl > room))
		return DPFLOW_DROP_IPV4_BAD_IHL;
	totlen = dpflow_rd16(ip + 2);
	if (DPFLOW_UNLIKELY(totlen < ihl || totlen > room))
		return DPFLOW_DROP_IPV4_BAD_TOTLEN;

	memcpy(h->src, ip + 12, 4);
	memset(h->src + 4, 0, 12);
	memcpy(h->dst, ip + 16, 4);
	memset(h->dst + 4, 0, 12);
	h->tos = ip[1];
	h->ttl = ip[8];
	h->proto = ip[9];
	h->l3_len = (uint16_t)totlen;
	frag = dpflow_rd16(ip + 6);
	if (DPFLOW_UNLIKELY(frag & 0x3fff))
		h->frag =
		    (frag & 0x1fff) ? DPFLOW_FRAG_LATER : DPFLOW_FRAG_FIRST;
	h->l3_type = DPFLOW_L3_IPV4;
	*end = *off + totlen;
	*off += ihl;
	return DPFLOW_DROP_NONE;
}

DPF_HD static inline int dpflow_ipv6_is_ext(uint8_t nh)
{
	return nh == DPFLOW_IPPROTO_HOPOPTS || nh == DPFLOW_IPPROTO_ROUTING ||
	       nh == DPFLOW_IPPROTO_FRAGMENT || nh == DPFLOW_IPPROTO_DSTOPTS;
}

/* IPv6 and its extension headers, as dpflow_parse_ipv4. */
DPF_HD static inline unsigned dpflow_parse_ipv6(const uint8_t *f, uint32_t *off,
						uint32_t *end,
						struct dpflow_hdr *h)
{
	const uint8_t *ip = f + *off;
	uint32_t room = *end - *off;
	uint32_t plen, o, e;
	uint8_t nh, n_ext = 0, frag = DPFLOW_FRAG_NONE;

	if (DPFLOW_UNLIKELY(room < 40))
		return DPFLOW_DROP_IPV6_TRUNC;
	if (DPFLOW_UNLIKELY((ip[0] >> 4) != 6))
		return DPFLOW_DROP_IPV6_BAD_VERSION;
	plen = dpflow_rd16(ip + 4);
	if (DPFLOW_UNLIKELY(plen > room - 40))
		return DPFLOW_DROP_IPV6_BAD_PAYLEN;

	o = *off + 40;
	e = o + plen;
	nh = ip[6];
	while (DPFLOW_UNLIKELY(dpflow_ipv6_is_ext(nh))) {
		const uint8_t *x = f + o;
		uint32_t xlen;

		if (n_ext == DPFLOW_PARSE_MAX_IPV6_EXT)
			return DPFLOW_DROP_IPV6_EXT_TOO_MANY;
		if (e - o < 8)
			return DPFLOW_DROP_IPV6_EXT_TRUNC;
		if (nh == DPFLOW_IPPROTO_FRAGMENT) {
			uint16_t fo = dpflow_rd16(x + 2);
			xlen = 8;
			if (fo & 0xfff8)
				frag = DPFLOW_FRAG_LATER;
			else if ((fo & 1) && frag == DPFLOW_FRAG_NONE)
				frag = DPFLOW_FRAG_FIRST;
		} else {
			xlen = ((uint32_t)x[1] + 1) * 8;
			if (xlen > e - o)
				return DPFLOW_DROP_IPV6_EXT_TRUNC;
		}
		nh = x[0];
		o += xlen;
		n_ext++;
		/* after a later fragment's header come data, not headers */
		if (frag == DPFLOW_FRAG_LATER)
			break;
	}

	memcpy(h->src, ip + 8, 16);
	memcpy(h->dst, ip + 24, 16);
	h->tos = (uint8_t)(dpflow_rd16(ip) >> 4);
	h->ttl = ip[7];
	h->proto = nh;
	h->n_ext = n_ext;
	h->frag = frag;
	h->l3_len = (uint16_t)(plen + 40);
	h->l3_type = DPFLOW_L3_IPV6;
	*end = e;
	*off = o;
	return DPFLOW_DROP_NONE;
}

/*
 * Where a GENEVE or GRE payload of protocol type @proto starts. Returns 1
 * and sets in->start, or 0 for a protocol dpflow does not open.
 */
DPF_HD static inline int dpflow_tun_payload_start(uint16_t proto,
						  struct dpflow_parse_inner *in)
{
	if (proto == DPFLOW_ETHERTYPE_TEB)
		in->start = DPFLOW_PARSE_ETH;
	else if (proto == DPFLOW_ETHERTYPE_IPV4)
		in->start = DPFLOW_PARSE_IPV4;
	else if (proto == DPFLOW_ETHERTYPE_IPV6)
		in->start = DPFLOW_PARSE_IPV6;
	else
		return 0;
	return 1;
}

/*
 * A UDP tunnel header at @off (after the outer UDP header), ending at @end.
 * Returns 1 and records the tunnel in @m and where the inner packet lies,
 * or 0, writing nothing in @m, when the payload is not a tunnel header
 * dpflow opens: VXLAN shorter than 8 bytes or without the I flag; GENEVE
 * shorter than 8 bytes, of a version other than 0, with options beyond the
 * datagram, or of a protocol type other than Ethernet, IPv4, IPv6.
 */
DPF_HD static inline int dpflow_parse_udp_tunnel(const uint8_t *f, uint32_t off,
						 uint32_t end, uint16_t dport,
						 struct dpflow_pkt_meta *m,
						 struct dpflow_parse_inner *in)
{
	const uint8_t *t = f + off;
	uint32_t room = end - off;

	if (room < 8)
		return 0;
	if (dport == DPFLOW_UDP_PORT_VXLAN) {
		if (!(t[0] & DPFLOW_VXLAN_F_I))
			return 0;
		m->tun_type = DPFLOW_TUN_VXLAN;
		m->tun_id = dpflow_rd32(t + 4) >> 8;
		m->tun_hdr_len = 8;
		m->tun_proto = DPFLOW_ETHERTYPE_TEB;
		in->start = DPFLOW_PARSE_ETH;
		in->off = off + 8;
	} else {
		uint32_t hlen;
		uint16_t proto;

		if (t[0] >> 6)
			return 0;
		hlen = 8 + (uint32_t)(t[0] & 0x3f) * 4;
		if (hlen > room)
			return 0;
		proto = dpflow_rd16(t + 2);
		if (!dpflow_tun_payload_start(proto, in))
			return 0;
		m->tun_type = DPFLOW_TUN_GENEVE;
		m->tun_id = dpflow_rd32(t + 4) >> 8;
		m->tun_hdr_len = (uint16_t)hlen;
		m->tun_proto = proto;
		if (t[1] & 0x80)
			m->flags |= DPFLOW_META_F_GENEVE_OAM;
		if (t[1] & 0x40)
			m->flags |= DPFLOW_META_F_GENEVE_CRIT;
		in->off = off + hlen;
	}
	m->tun_off = (uint16_t)off;
	in->end = end;
	in->found = 1;
	return 1;
}

/*
 * The UDP destination port named a tunnel that is not there: the packet
 * is plain UDP. Undoes what dpflow_parse_udp_tunnel() recorded (the inner
 * header line, defined only with a tunnel, is left as it is).
 */
DPF_HD static inline void dpflow_parse_tun_invalid(struct dpflow_pkt_meta *m)
{
	m->tun_type = DPFLOW_TUN_NONE;
	m->tun_id = 0;
	m->tun_off = 0;
	m->tun_hdr_len = 0;
	m->tun_proto = 0;
	m->flags = DPFLOW_META_F_TUN_INVALID;
}

DPF_HD static inline unsigned dpflow_parse_gre(const uint8_t *f, uint32_t off,
					       uint32_t end,
					       struct dpflow_pkt_meta *m,
					       struct dpflow_parse_inner *in)
{
	const uint8_t *g = f + off;
	uint32_t room = end - off, hlen = 4, o;
	uint16_t flags, proto;

	if (room < 4)
		return DPFLOW_DROP_GRE_TRUNC;
	flags = dpflow_rd16(g);
	if (flags & (DPFLOW_GRE_VERSION_MASK | DPFLOW_GRE_F_ROUTING))
		return DPFLOW_DROP_GRE_BAD_VERSION;
	hlen += (flags & DPFLOW_GRE_F_CSUM) ? 4 : 0;
	hlen += (flags & DPFLOW_GRE_F_KEY) ? 4 : 0;
	hlen += (flags & DPFLOW_GRE_F_SEQ) ? 4 : 0;
	if (hlen > room)
		return DPFLOW_DROP_GRE_TRUNC;
	proto = dpflow_rd16(g + 2);
	if (!dpflow_tun_payload_start(proto, in))
		return DPFLOW_DROP_TUN_UNKNOWN_PAYLOAD;

	o = 4;
	m->tun_id = 0;
	if (flags & DPFLOW_GRE_F_CSUM) {
		m->flags |= DPFLOW_META_F_GRE_CSUM;
		o += 4;
	}
	if (flags & DPFLOW_GRE_F_KEY) {
		m->flags |= DPFLOW_META_F_TUN_KEY;
		m->tun_id = dpflow_rd32(g + o);
		o += 4;
	}
	if (flags & DPFLOW_GRE_F_SEQ) {
		m->flags |= DPFLOW_META_F_GRE_SEQ;
		m->gre_seq = dpflow_rd32(g + o);
	}
	m->tun_type = DPFLOW_TUN_GRE;
	m->tun_off = (uint16_t)off;
	m->tun_hdr_len = (uint16_t)hlen;
	m->tun_proto = proto;
	in->off = off + hlen;
	in->end = end;
	in->found = 1;
	return DPFLOW_DROP_NONE;
}

/*
 * The L4 header at @off of a datagram ending at @end. @in is non-NULL for
 * the outer headers only: tunnels are recognised there, and only in
 * unfragmented packets.
 */
DPF_HD static inline unsigned dpflow_parse_l4(const uint8_t *f, uint32_t off,
					      uint32_t end,
					      struct dpflow_hdr *h,
					      struct dpflow_pkt_meta *m,
					      struct dpflow_parse_inner *in)
{
	const uint8_t *l4 = f + off;
	uint32_t room = end - off;

	h->l4_off = h->pay_off = (uint16_t)off;
	if (DPFLOW_UNLIKELY(h->frag == DPFLOW_FRAG_LATER))
		return DPFLOW_DROP_NONE;

	switch (h->proto) {
	case DPFLOW_IPPROTO_TCP: {
		uint32_t doff;

		if (DPFLOW_UNLIKELY(room < 20))
			return DPFLOW_DROP_TCP_TRUNC;
		doff = (uint32_t)(l4[12] >> 4) * 4;
		if (DPFLOW_UNLIKELY(doff < 20 || doff > room))
			return DPFLOW_DROP_TCP_BAD_DOFF;
		h->sport = dpflow_rd16(l4);
		h->dport = dpflow_rd16(l4 + 2);
		h->tcp_flags = l4[13];
		h->pay_off = (uint16_t)(off + doff);
		h->l4_type = DPFLOW_L4_TCP;
		return DPFLOW_DROP_NONE;
	}
	case DPFLOW_IPPROTO_UDP: {
		uint32_t ulen;

		if (DPFLOW_UNLIKELY(room < 8))
			return DPFLOW_DROP_UDP_TRUNC;
		ulen = dpflow_rd16(l4 + 4);
		if (DPFLOW_UNLIKELY(ulen < 8 || (h->frag == DPFLOW_FRAG_NONE &&
						 ulen > room)))
			return DPFLOW_DROP_UDP_BAD_LEN;
		h->sport = dpflow_rd16(l4);
		h->dport = dpflow_rd16(l4 + 2);
		h->pay_off = (uint16_t)(off + 8);
		h->l4_type = DPFLOW_L4_UDP;
		if (in && h->frag == DPFLOW_FRAG_NONE &&
		    (h->dport == DPFLOW_UDP_PORT_VXLAN ||
		     h->dport == DPFLOW_UDP_PORT_GENEVE) &&
		    !dpflow_parse_udp_tunnel(f, off + 8, off + ulen, h->dport,
					     m, in))
			dpflow_parse_tun_invalid(m);
		return DPFLOW_DROP_NONE;
	}
	case DPFLOW_IPPROTO_ICMP:
	case DPFLOW_IPPROTO_ICMPV6:
		if (DPFLOW_UNLIKELY(room < 8))
			return DPFLOW_DROP_ICMP_TRUNC;
		h->sport = l4[0];
		h->dport = l4[1];
		h->pay_off = (uint16_t)(off + 8);
		h->l4_type = h->proto == DPFLOW_IPPROTO_ICMP ? DPFLOW_L4_ICMP
							     : DPFLOW_L4_ICMPV6;
		return DPFLOW_DROP_NONE;
	case DPFLOW_IPPROTO_SCTP:
		if (DPFLOW_UNLIKELY(room < 12))
			return DPFLOW_DROP_SCTP_TRUNC;
		h->sport = dpflow_rd16(l4);
		h->dport = dpflow_rd16(l4 + 2);
		h->pay_off = (uint16_t)(off + 12);
		h->l4_type = DPFLOW_L4_SCTP;
		return DPFLOW_DROP_NONE;
	case DPFLOW_IPPROTO_GRE:
		h->l4_type = DPFLOW_L4_OTHER;
		if (in && h->frag == DPFLOW_FRAG_NONE)
			return dpflow_parse_gre(f, off, end, m, in);
		return DPFLOW_DROP_NONE;
	case DPFLOW_IPPROTO_NONXT:
		return DPFLOW_DROP_NONE; /* "no next header": no L4 */
	case DPFLOW_IPPROTO_IPIP:
	case DPFLOW_IPPROTO_IPV6:
		h->l4_type = DPFLOW_L4_OTHER;
		if (in && h->frag == DPFLOW_FRAG_NONE) {
			m->tun_type = DPFLOW_TUN_IPIP;
			m->tun_off = (uint16_t)off;
			m->tun_hdr_len = 0;
			m->tun_proto = h->proto == DPFLOW_IPPROTO_IPIP
					   ? DPFLOW_ETHERTYPE_IPV4
					   : DPFLOW_ETHERTYPE_IPV6;
			in->start = h->proto == DPFLOW_IPPROTO_IPIP
					? DPFLOW_PARSE_IPV4
					: DPFLOW_PARSE_IPV6;
			in->off = off;
			in->end = end;
			in->found = 1;
		}
		return DPFLOW_DROP_NONE;
	default:
		h->l4_type = DPFLOW_L4_OTHER;
		return DPFLOW_DROP_NONE;
	}
}

/* One header set from @off (link or IP header, per @start) to @end. */
DPF_HD static inline unsigned dpflow_parse_hdrs(const uint8_t *f, uint32_t off,
						uint32_t end, unsigned start,
						struct dpflow_hdr *h,
						struct dpflow_pkt_meta *m,
						struct dpflow_parse_inner *in)
{
	unsigned r;
	uint16_t et;

	dpflow_parse_hdr_reset(h, off);
	if (start == DPFLOW_PARSE_ETH) {
		r = dpflow_parse_eth(f, &off, end, h);
		if (DPFLOW_UNLIKELY(r))
			return r;
		et = h->ethertype;
	} else {
		et = start == DPFLOW_PARSE_IPV4 ? DPFLOW_ETHERTYPE_IPV4
						: DPFLOW_ETHERTYPE_IPV6;
	}

	if (DPFLOW_LIKELY(et == DPFLOW_ETHERTYPE_IPV4))
		r = dpflow_parse_ipv4(f, &off, &end, h);
	else if (et == DPFLOW_ETHERTYPE_IPV6)
		r = dpflow_parse_ipv6(f, &off, &end, h);
	else {
		h->l3_type = DPFLOW_L3_OTHER;
		h->l4_off = h->pay_off = (uint16_t)off;
		return DPFLOW_DROP_NONE;
	}
	if (DPFLOW_UNLIKELY(r))
		return r;
	return dpflow_parse_l4(f, off, end, h, m, in);
}

/* See dpflow_parse_frame() in parse.h. */
DPF_HD static inline unsigned dpflow_parse_frame_impl(const uint8_t *f,
						      uint32_t len,
						      struct dpflow_pkt_meta *m)
{
	struct dpflow_parse_inner in;
	unsigned r;

	/* m->inner is left alone (a cache line not written) unless a tunnel
	 * is found: it is defined only when tun_type is not NONE. */
	in.found = 0;
	m->tun_type = DPFLOW_TUN_NONE;
	m->flags = 0;
	m->tun_id = 0;

	r = dpflow_parse_hdrs(f, 0, len, DPFLOW_PARSE_ETH, &m->outer, m, &in);
	if (DPFLOW_UNLIKELY(in.found) && r == DPFLOW_DROP_NONE) {
		r = dpflow_parse_hdrs(f, in.off, in.end, in.start, &m->inner, m,
				      NULL);
		/* a UDP tunnel is a guess from the port: the outer packet
		 * stands without it */
		if (DPFLOW_UNLIKELY(r != DPFLOW_DROP_NONE) &&
		    (m->tun_type == DPFLOW_TUN_VXLAN ||
		     m->tun_type == DPFLOW_TUN_GENEVE)) {
			dpflow_parse_tun_invalid(m);
			r = DPFLOW_DROP_NONE;
		}
	}
	m->drop = (uint8_t)r;
	return r;
}

#endif /* DPFLOW_PARSE_IMPL_H */
