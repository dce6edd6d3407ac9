/*
 * Packet edit actions, shared by the CPU and the GPU targets.
 *
 * Owns the code of every action that rewrites a packet: MAC and ethertype
 * rewrite, TTL / hop-limit decrement, NAT of addresses and ports, DSCP,
 * VLAN push and pop, tunnel encapsulation (VXLAN, GENEVE, GRE, IP-in-IP)
 * and decapsulation, and the generic set / add / copy on header fields and
 * metadata registers. lib/flow/pkt_edit.c instantiates it for the CPU and
 * adds the control calls (pkt_edit.h); the GPU target includes this file
 * into its kernels.
 *
 * Everything here is DPF_HD, written in the common subset of C11 and CUDA
 * C++ (DESIGN.md §1): no allocation, no logging, no libc beyond
 * memcpy/memset, no tables in static memory. The checksums, the NAT
 * rewrites and the outer headers of an encapsulation are the public
 * module's (include/dpflow/pkt_edit.h): this file adds what needs the
 * parser's metadata (which header is where, re-parsing after a change). The
 * action parameters (struct dpflow_edit_action and the encapsulation template
 * in it) are plain bytes with no pointers: they can be copied with memcpy into
 * an action-data array and to device memory.
 *
 * Contract of every dpflow_edit_*_impl(m, buf, ...) function:
 *  - @m is a packet's metadata as filled by the parser (m->drop == 0), @buf
 *    the start of its slot buffer: the frame is at buf + m->data_off, and
 *    the m->data_off bytes before it are the headroom an edit may grow into.
 *  - Returns 0, or a drop reason (DPFLOW_DROP_*, also stored in m->drop).
 *    A drop leaves the frame, data_off and data_len exactly as they were,
 *    except where a re-parse after a successful rewrite rejects the result
 *    (set_ethertype, field writes): then the rewrite stays and the parser's
 *    reason is returned.
 *  - On success the metadata describes the edited frame: in-place rewrites
 *    update the fields they change (addresses, ports, TTL, TOS); VLAN push
 *    and pop shift the offsets; edits that change the frame's structure
 *    (encap, decap, ethertype, field writes in headers) re-run the parser.
 *  - Checksums are updated incrementally (RFC 1624 eqn. 3, through
 *    dpflow/pkt_edit.h), so the result equals a full recomputation,
 *    including the 0x0000 / 0xffff choice. A UDP checksum of zero means
 *    "none" and stays zero; a UDP checksum that becomes zero is sent as
 *    0xffff (RFC 768).
 *  - Only the outer (first) header set is rewritten by the named actions;
 *    the field actions can address the inner headers too.
 * Reentrant: a packet belongs to one thread at a time.
 */
#ifndef DPFLOW_PKT_EDIT_IMPL_H
#define DPFLOW_PKT_EDIT_IMPL_H

#include <string.h>

#include "dpflow/meta.h"
#include "dpflow/pkt_edit.h"
#include "parse/parse_impl.h"

/* Most bytes one field set or copy writes. */
#define DPFLOW_EDIT_FIELD_MAX 16

/* Where a field's offset counts from. */
enum dpflow_edit_layer {
	DPFLOW_EDIT_LAYER_L2 = 0, /* outer Ethernet header */
	DPFLOW_EDIT_LAYER_L3,	  /* outer IP (or other L3) header */
	DPFLOW_EDIT_LAYER_L4,	  /* outer L4 header */
	DPFLOW_EDIT_LAYER_TUN,	  /* tunnel header (IP-in-IP: the inner IP) */
	DPFLOW_EDIT_LAYER_INNER_L2,
	DPFLOW_EDIT_LAYER_INNER_L3,
	DPFLOW_EDIT_LAYER_INNER_L4,
	DPFLOW_EDIT_LAYER__COUNT,
};

/*
 * A header field: @width bytes at @off bytes from the start of @layer.
 * The field may reach past the layer's header (into the payload) but not
 * past the frame. Values are big-endian, as on the wire.
 */
struct dpflow_edit_field {
	uint16_t off;
	uint8_t layer; /* enum dpflow_edit_layer */
	uint8_t width; /* bytes: 1..16 for set and copy, 1..4 for add/regs */
};

/* One action; op names the member of u it uses. */
enum dpflow_edit_op {
	DPFLOW_EDIT_NOP = 0,
	DPFLOW_EDIT_SET_MAC,	   /* u.mac */
	DPFLOW_EDIT_SET_ETHERTYPE, /* u.ethertype (after the VLAN tags) */
	DPFLOW_EDIT_DEC_TTL,
	DPFLOW_EDIT_SET_IPV4_SRC, /* u.addr[0..4) */
	DPFLOW_EDIT_SET_IPV4_DST,
	DPFLOW_EDIT_SET_IPV6_SRC, /* u.addr */
	DPFLOW_EDIT_SET_IPV6_DST,
	DPFLOW_EDIT_SET_L4_SRC, /* u.port: TCP/UDP port, ICMP echo id */
	DPFLOW_EDIT_SET_L4_DST,
	DPFLOW_EDIT_SET_DSCP,  /* u.dscp */
	DPFLOW_EDIT_VLAN_PUSH, /* u.vlan */
	DPFLOW_EDIT_VLAN_POP,
	DPFLOW_EDIT_ENCAP,	    /* u.encap */
	DPFLOW_EDIT_DECAP,	    /* u.tun_type: the tunnel expected, 0 any */
	DPFLOW_EDIT_FIELD_SET,	    /* u.set */
	DPFLOW_EDIT_FIELD_ADD,	    /* u.add */
	DPFLOW_EDIT_FIELD_COPY,	    /* u.copy */
	DPFLOW_EDIT_REG_SET,	    /* u.reg: reg[dst] = val */
	DPFLOW_EDIT_REG_ADD,	    /* u.reg: reg[dst] += val */
	DPFLOW_EDIT_REG_COPY,	    /* u.reg: reg[dst] = reg[src] */
	DPFLOW_EDIT_REG_FROM_FIELD, /* u.freg: reg = field */
	DPFLOW_EDIT_FIELD_FROM_REG, /* u.freg: field = low bytes of reg */
	DPFLOW_EDIT__COUNT,
};

struct dpflow_edit_action {
	uint8_t op; /* enum dpflow_edit_op */
	uint8_t reserved[3];
	union {
		struct {
			uint8_t src[6];
			uint8_t dst[6];
			uint8_t set_src; /* rewrite src when non-zero */
			uint8_t set_dst;
		} mac;
		uint16_t ethertype;
		uint8_t addr[16];
		uint16_t port;
		uint8_t dscp; /* 0..63 */
		struct {
			uint16_t tpid; /* 0x8100 or 0x88a8 */
			uint16_t tci;
		} vlan;
		uint8_t tun_type;
		struct {
			struct dpflow_edit_field f;
			uint8_t val[DPFLOW_EDIT_FIELD_MAX];
			uint8_t mask[DPFLOW_EDIT_FIELD_MAX]; /* 1 bits set */
		} set;
		struct {
			struct dpflow_edit_field f;
			uint32_t delta; /* modulo 2^(8 * width) */
		} add;
		struct {
			struct dpflow_edit_field dst;
			struct dpflow_edit_field src; /* same width */
		} copy;
		struct {
			uint8_t dst;
			uint8_t src;
			uint32_t val;
		} reg;
		struct {
			struct dpflow_edit_field f;
			uint8_t reg;
		} freg;
		struct dpflow_edit_encap encap;
	} u;
};

/* ---- small helpers ------------------------------------------------------ */

/* No such layer or field in this packet (an offset no frame has). */
#define DPFLOW_EDIT_NO_OFF 0xffffffffu

DPF_HD static inline unsigned dpflow_edit_drop(struct dpflow_pkt_meta *m,
					       unsigned reason)
{
	m->drop = (uint8_t)reason;
	return reason;
}

/* Move the 12 MAC bytes from @src to @dst (the ranges may overlap). */
DPF_HD static inline void dpflow_edit_move_macs(uint8_t *dst,
						const uint8_t *src)
{
	uint8_t t[12];

	memcpy(t, src, 12);
	memcpy(dst, t, 12);
}

/* Re-run the parser on the (edited) frame: the metadata follows it. */
DPF_HD static inline unsigned dpflow_edit_reparse(struct dpflow_pkt_meta *m,
						  uint8_t *buf)
{
	return dpflow_parse_frame_impl(buf + m->data_off, m->data_len, m);
}

/* ---- checksums ------------------------------------------------------------
 */

/*
 * IP protocol number of the outer L4 header the parser found (TCP, UDP,
 * ICMP, ICMPv6), or 0 when there is none to rewrite (later fragments,
 * SCTP, other protocols): what the public NAT rewrites take.
 */
DPF_HD static inline uint8_t dpflow_edit_l4_proto(const struct dpflow_hdr *h)
{
	switch (h->l4_type) {
	case DPFLOW_L4_TCP:
		return DPFLOW_IPPROTO_TCP;
	case DPFLOW_L4_UDP:
		return DPFLOW_IPPROTO_UDP;
	case DPFLOW_L4_ICMP:
		return DPFLOW_IPPROTO_ICMP;
	case DPFLOW_L4_ICMPV6:
		return DPFLOW_IPPROTO_ICMPV6;
	default:
		return 0;
	}
}

/* ---- flow hash ---------------------------------------------------------- */

DPF_HD static inline uint32_t dpflow_edit_rotl32(uint32_t x, unsigned r)
{
	return (x << r) | (x >> (32 - r));
}

/* MurmurHash3 x86_32 of @len (a multiple of 4) bytes, words little-endian. */
DPF_HD static inline uint32_t dpflow_edit_murmur3(const uint8_t *k,
						  uint32_t len, uint32_t seed)
{
	uint32_t h = seed, i;

	for (i = 0; i + 4 <= len; i += 4) {
		uint32_t w = (uint32_t)k[i] | (uint32_t)k[i + 1] << 8 |
			     (uint32_t)k[i + 2] << 16 |
			     (uint32_t)k[i + 3] << 24;
		w *= 0xcc9e2d51u;
		w = dpflow_edit_rotl32(w, 15);
		w *= 0x1b873593u;
		h ^= w;
		h = dpflow_edit_rotl32(h, 13);
		h = h * 5 + 0xe6546b64u;
	}
	h ^= len;
	h ^= h >> 16;
	h *= 0x85ebca6bu;
	h ^= h >> 13;
	h *= 0xc2b2ae35u;
	h ^= h >> 16;
	return h;
}

/*
 * The flow hash an encapsulation derives its UDP source port (and IPv6
 * flow label) from: m->rss_hash when the port or RSS stage set one (as
 * Linux uses skb->hash), else MurmurHash3 (seed 0) of a 40-byte key:
 * IP: src[16] dst[16] (IPv4 zero-padded) sport dport (big-endian) proto
 * 0 0 0; non-IP: the 12 MAC bytes, the ethertype, zeros.
 */
DPF_HD static inline uint32_t
dpflow_edit_flow_hash(const struct dpflow_pkt_meta *m, const uint8_t *frame)
{
	const struct dpflow_hdr *h = &m->outer;
	uint8_t key[40];

	if (m->rss_hash)
		return m->rss_hash;
	memset(key, 0, sizeof(key));
	if (h->l3_type == DPFLOW_L3_IPV4 || h->l3_type == DPFLOW_L3_IPV6) {
		memcpy(key, h->src, 16);
		memcpy(key + 16, h->dst, 16);
		dpflow_edit_wr16(key + 32, h->sport);
		dpflow_edit_wr16(key + 34, h->dport);
		key[36] = h->proto;
	} else {
		memcpy(key, frame + h->l2_off, 12);
		dpflow_edit_wr16(key + 12, h->ethertype);
	}
	return dpflow_edit_murmur3(key, sizeof(key), 0);
}

/* ---- in-place rewrites -------------------------------------------------- */

DPF_HD static inline unsigned
dpflow_edit_set_mac_impl(struct dpflow_pkt_meta *m, uint8_t *buf,
			 const uint8_t *src, const uint8_t *dst)
{
	uint8_t *eth = buf + m->data_off + m->outer.l2_off;

	if (dst)
		memcpy(eth, dst, 6);
	if (src)
		memcpy(eth + 6, src, 6);
	return DPFLOW_DROP_NONE;
}

/* Rewrites the ethertype after the VLAN tags, then re-parses. */
DPF_HD static inline unsigned
dpflow_edit_set_ethertype_impl(struct dpflow_pkt_meta *m, uint8_t *buf,
			       uint16_t ethertype)
{
	dpflow_edit_wr16(buf + m->data_off + m->outer.l3_off - 2, ethertype);
	return dpflow_edit_reparse(m, buf);
}

/* TTL / hop limit minus one; a packet with TTL 0 or 1 is dropped. */
DPF_HD static inline unsigned
dpflow_edit_dec_ttl_impl(struct dpflow_pkt_meta *m, uint8_t *buf)
{
	struct dpflow_hdr *h = &m->outer;
	uint8_t *ip = buf + m->data_off + h->l3_off;

	if (DPFLOW_LIKELY(h->l3_type == DPFLOW_L3_IPV4)) {
		uint16_t old = dpflow_edit_rd16(ip + 8);

		if (DPFLOW_UNLIKELY(ip[8] <= 1))
			return dpflow_edit_drop(m, DPFLOW_DROP_TTL_EXPIRED);
		ip[8] = (uint8_t)(ip[8] - 1);
		dpflow_csum_apply(
		    ip + 10, dpflow_csum_delta16(old, dpflow_edit_rd16(ip + 8)),
		    0);
		h->ttl = ip[8];
		return DPFLOW_DROP_NONE;
	}
	if (h->l3_type == DPFLOW_L3_IPV6) {
		if (DPFLOW_UNLIKELY(ip[7] <= 1))
			return dpflow_edit_drop(m, DPFLOW_DROP_TTL_EXPIRED);
		ip[7] = (uint8_t)(ip[7] - 1);
		h->ttl = ip[7];
		return DPFLOW_DROP_NONE;
	}
	return dpflow_edit_drop(m, DPFLOW_DROP_EDIT_NOT_IP);
}

/*
 * NAT: IPv4 source (@dir SRC) or destination address, network order; the
 * IPv4 header checksum and the L4 checksum over the pseudo-header follow
 * (dpflow_nat_ipv4_addr).
 */
DPF_HD static inline unsigned
dpflow_edit_set_ipv4_impl(struct dpflow_pkt_meta *m, uint8_t *buf, unsigned dir,
			  const uint8_t *addr)
{
	struct dpflow_hdr *h = &m->outer;

	if (DPFLOW_UNLIKELY(h->l3_type != DPFLOW_L3_IPV4))
		return dpflow_edit_drop(m, DPFLOW_DROP_EDIT_NOT_IPV4);
	dpflow_nat_ipv4_addr(buf + m->data_off + h->l3_off,
			     buf + m->data_off + h->l4_off,
			     dpflow_edit_l4_proto(h), dir, addr);
	memcpy(dir ? h->dst : h->src, addr, 4);
	return DPFLOW_DROP_NONE;
}

/* NAT: IPv6 source or destination address (16 bytes). */
DPF_HD static inline unsigned
dpflow_edit_set_ipv6_impl(struct dpflow_pkt_meta *m, uint8_t *buf, unsigned dir,
			  const uint8_t *addr)
{
	struct dpflow_hdr *h = &m->outer;

	if (DPFLOW_UNLIKELY(h->l3_type != DPFLOW_L3_IPV6))
		return dpflow_edit_drop(m, DPFLOW_DROP_EDIT_NOT_IPV6);
	dpflow_nat_ipv6_addr(buf + m->data_off + h->l3_off,
			     buf + m->data_off + h->l4_off,
			     dpflow_edit_l4_proto(h), dir, addr);
	memcpy(dir ? h->dst : h->src, addr, 16);
	return DPFLOW_DROP_NONE;
}

DPF_HD static inline int dpflow_edit_is_tunnel_port(uint32_t port)
{
	return port == DPFLOW_UDP_PORT_VXLAN || port == DPFLOW_UDP_PORT_GENEVE;
}

/*
 * NAT: TCP/UDP source or destination port (host order), with the L4
 * checksum. For ICMP and ICMPv6 echo request/reply the identifier plays
 * the port in both directions (as Linux's NAT does). Changing a UDP
 * destination port from or to a tunnel port re-parses the frame.
 */
DPF_HD static inline unsigned
dpflow_edit_set_port_impl(struct dpflow_pkt_meta *m, uint8_t *buf, unsigned dir,
			  uint16_t port)
{
	struct dpflow_hdr *h = &m->outer;
	uint8_t *l4 = buf + m->data_off + h->l4_off;

	if (DPFLOW_LIKELY(h->l4_type == DPFLOW_L4_TCP ||
			  h->l4_type == DPFLOW_L4_UDP)) {
		int udp = h->l4_type == DPFLOW_L4_UDP;
		uint16_t was = dpflow_edit_rd16(l4 + (dir ? 2 : 0));

		dpflow_nat_l4_port(l4, dpflow_edit_l4_proto(h), dir, port);
		if (dir)
			h->dport = port;
		else
			h->sport = port;
		if (DPFLOW_UNLIKELY(udp && dir &&
				    (dpflow_edit_is_tunnel_port(was) ||
				     dpflow_edit_is_tunnel_port(port))))
			return dpflow_edit_reparse(m, buf);
		return DPFLOW_DROP_NONE;
	}
	if ((h->l4_type == DPFLOW_L4_ICMP &&
	     (h->sport == 8 || h->sport == 0)) ||
	    (h->l4_type == DPFLOW_L4_ICMPV6 &&
	     (h->sport == 128 || h->sport == 129))) {
		dpflow_nat_icmp_id(l4, port);
		return DPFLOW_DROP_NONE;
	}
	return dpflow_edit_drop(m, DPFLOW_DROP_EDIT_NO_PORT);
}

/* DSCP (the 6 high bits of the TOS / traffic class); ECN is kept. */
DPF_HD static inline unsigned
dpflow_edit_set_dscp_impl(struct dpflow_pkt_meta *m, uint8_t *buf, uint8_t dscp)
{
	struct dpflow_hdr *h = &m->outer;
	uint8_t *ip = buf + m->data_off + h->l3_off;
	uint8_t tc;

	if (h->l3_type == DPFLOW_L3_IPV4) {
		uint16_t old = dpflow_edit_rd16(ip);

		ip[1] = (uint8_t)((dscp & 0x3f) << 2 | (ip[1] & 3));
		dpflow_csum_apply(
		    ip + 10, dpflow_csum_delta16(old, dpflow_edit_rd16(ip)), 0);
		h->tos = ip[1];
		return DPFLOW_DROP_NONE;
	}
	if (h->l3_type == DPFLOW_L3_IPV6) {
		tc = (uint8_t)((ip[0] & 0x0f) << 4 | ip[1] >> 4);
		tc = (uint8_t)((dscp & 0x3f) << 2 | (tc & 3));
		ip[0] = (uint8_t)((ip[0] & 0xf0) | tc >> 4);
		ip[1] = (uint8_t)((tc & 0x0f) << 4 | (ip[1] & 0x0f));
		h->tos = tc;
		return DPFLOW_DROP_NONE;
	}
	return dpflow_edit_drop(m, DPFLOW_DROP_EDIT_NOT_IP);
}

/* ---- VLAN --------------------------------------------------------------- */

/* Offsets of every layer after the outer L2 header move by @d bytes. */
DPF_HD static inline void dpflow_edit_shift(struct dpflow_pkt_meta *m, int d)
{
	struct dpflow_hdr *h = &m->outer;

	h->l3_off = (uint16_t)(h->l3_off + d);
	h->l4_off = (uint16_t)(h->l4_off + d);
	h->pay_off = (uint16_t)(h->pay_off + d);
	if (m->tun_type != DPFLOW_TUN_NONE) {
		h = &m->inner;
		m->tun_off = (uint16_t)(m->tun_off + d);
		h->l2_off = (uint16_t)(h->l2_off + d);
		h->l3_off = (uint16_t)(h->l3_off + d);
		h->l4_off = (uint16_t)(h->l4_off + d);
		h->pay_off = (uint16_t)(h->pay_off + d);
	}
}

/*
 * Push an outermost tag (@tpid 0x8100 or 0x88a8, @tci) into the headroom:
 * the 12 MAC bytes move 4 bytes towards the headroom.
 */
DPF_HD static inline unsigned
dpflow_edit_vlan_push_impl(struct dpflow_pkt_meta *m, uint8_t *buf,
			   uint16_t tpid, uint16_t tci)
{
	struct dpflow_hdr *h = &m->outer;
	uint8_t *f = buf + m->data_off;

	if (DPFLOW_UNLIKELY(h->n_vlan >= DPFLOW_PARSE_MAX_VLAN))
		return dpflow_edit_drop(m, DPFLOW_DROP_VLAN_TOO_MANY);
	if (DPFLOW_UNLIKELY(m->data_off < 4))
		return dpflow_edit_drop(m, DPFLOW_DROP_EDIT_NO_HEADROOM);
	if (DPFLOW_UNLIKELY(m->data_len > 0xffff - 4))
		return dpflow_edit_drop(m, DPFLOW_DROP_EDIT_TOO_LONG);
	dpflow_edit_move_macs(f - 4, f);
	dpflow_edit_wr16(f + 8, tpid);
	dpflow_edit_wr16(f + 10, tci);
	m->data_off = (uint16_t)(m->data_off - 4);
	m->data_len = (uint16_t)(m->data_len + 4);
	h->vlan[1] = h->vlan[0];
	h->vlan[0] = tci;
	h->n_vlan++;
	dpflow_edit_shift(m, 4);
	return DPFLOW_DROP_NONE;
}

/* Pop the outermost tag. */
DPF_HD static inline unsigned
dpflow_edit_vlan_pop_impl(struct dpflow_pkt_meta *m, uint8_t *buf)
{
	struct dpflow_hdr *h = &m->outer;
	uint8_t *f = buf + m->data_off;

	if (DPFLOW_UNLIKELY(h->n_vlan == 0))
		return dpflow_edit_drop(m, DPFLOW_DROP_EDIT_NO_VLAN);
	dpflow_edit_move_macs(f + 4, f);
	m->data_off = (uint16_t)(m->data_off + 4);
	m->data_len = (uint16_t)(m->data_len - 4);
	h->vlan[0] = h->vlan[1];
	h->n_vlan--;
	dpflow_edit_shift(m, -4);
	return DPFLOW_DROP_NONE;
}

/* ---- tunnels ------------------------------------------------------------ */

/*
 * Prepend the outer headers of template @t. The inner packet is the whole
 * frame (t->inner_eth) or its IP datagram (Ethernet, VLAN tags and any
 * Ethernet padding removed). Outer lengths and the IPv4 header checksum are
 * set; the UDP checksum is 0 over IPv4 (unless DPFLOW_EDIT_ENCAP_F_UDP_CSUM)
 * and computed over IPv6; the UDP source port comes from the flow hash
 * (dpflow_edit_flow_hash) scaled into the template's range as Linux's
 * udp_flow_src_port(). Then the frame is re-parsed.
 */
DPF_HD static inline unsigned
dpflow_edit_encap_impl(struct dpflow_pkt_meta *m, uint8_t *buf,
		       const struct dpflow_edit_encap *t)
{
	const struct dpflow_hdr *h = &m->outer;
	uint8_t *f = buf + m->data_off;
	uint32_t in_off, in_len, hash;
	uint16_t inner_et;
	unsigned why;

	if (DPFLOW_UNLIKELY(!dpflow_encap_valid(t)))
		return dpflow_edit_drop(m, DPFLOW_DROP_EDIT_BAD_ACTION);
	if (t->inner_eth) {
		in_off = 0;
		in_len = m->data_len;
		inner_et = DPFLOW_ETHERTYPE_TEB;
	} else {
		if (h->l3_type == DPFLOW_L3_IPV4)
			inner_et = DPFLOW_ETHERTYPE_IPV4;
		else if (h->l3_type == DPFLOW_L3_IPV6)
			inner_et = DPFLOW_ETHERTYPE_IPV6;
		else
			return dpflow_edit_drop(m, DPFLOW_DROP_EDIT_NOT_IP);
		in_off = h->l3_off;
		in_len = h->l3_len;
	}
	hash = dpflow_edit_flow_hash(m, f);
	why = dpflow_encap_room(m, in_off, in_len, t->hdr_len, 0);
	if (DPFLOW_UNLIKELY(why))
		return dpflow_edit_drop(m, why);
	dpflow_encap_write(t, buf + m->data_off, in_len, inner_et, hash);
	return dpflow_edit_reparse(m, buf);
}

/*
 * Strip the outer headers up to the inner packet of the tunnel the parser
 * found (@tun_type: the one expected, or 0 for any). An inner packet
 * without Ethernet (GRE or GENEVE carrying IP, IP-in-IP) keeps the outer
 * MAC addresses, with the ethertype of its IP version; outer VLAN tags
 * and Ethernet padding go with the outer headers. Then re-parses.
 */
DPF_HD static inline unsigned dpflow_edit_decap_impl(struct dpflow_pkt_meta *m,
						     uint8_t *buf,
						     unsigned tun_type)
{
	const struct dpflow_hdr *h = &m->outer;
	uint8_t *f = buf + m->data_off;
	uint32_t in_off, in_end, start;

	if (DPFLOW_UNLIKELY(m->tun_type == DPFLOW_TUN_NONE ||
			    (tun_type && tun_type != m->tun_type)))
		return dpflow_edit_drop(m, DPFLOW_DROP_EDIT_NO_TUNNEL);
	in_off = m->inner.l2_off;
	if (m->tun_type == DPFLOW_TUN_VXLAN || m->tun_type == DPFLOW_TUN_GENEVE)
		in_end = h->l4_off + dpflow_rd16(f + h->l4_off + 4);
	else
		in_end = (uint32_t)h->l3_off + h->l3_len;
	if (m->inner.l2_type == DPFLOW_L2_ETH)
		start = in_off;
	else
		start = dpflow_decap_l3(f, h->l2_off, in_off, m->tun_proto);
	m->data_off = (uint16_t)(m->data_off + start);
	m->data_len = (uint16_t)(in_end - start);
	return dpflow_edit_reparse(m, buf);
}

/* ---- generic fields ----------------------------------------------------- */

/* Frame offset of @layer, or DPFLOW_EDIT_NO_OFF when the packet lacks it. */
DPF_HD static inline uint32_t
dpflow_edit_layer_off(const struct dpflow_pkt_meta *m, unsigned layer)
{
	const struct dpflow_hdr *o = &m->outer, *in = &m->inner;
	int tun = m->tun_type != DPFLOW_TUN_NONE;

	switch (layer) {
	case DPFLOW_EDIT_LAYER_L2:
		return o->l2_off;
	case DPFLOW_EDIT_LAYER_L3:
		return o->l3_type != DPFLOW_L3_NONE ? o->l3_off
						    : DPFLOW_EDIT_NO_OFF;
	case DPFLOW_EDIT_LAYER_L4:
		return o->l4_type != DPFLOW_L4_NONE ? o->l4_off
						    : DPFLOW_EDIT_NO_OFF;
	case DPFLOW_EDIT_LAYER_TUN:
		return tun ? m->tun_off : DPFLOW_EDIT_NO_OFF;
	case DPFLOW_EDIT_LAYER_INNER_L2:
		return tun && in->l2_type == DPFLOW_L2_ETH ? in->l2_off
							   : DPFLOW_EDIT_NO_OFF;
	case DPFLOW_EDIT_LAYER_INNER_L3:
		return tun && in->l3_type != DPFLOW_L3_NONE
			   ? in->l3_off
			   : DPFLOW_EDIT_NO_OFF;
	case DPFLOW_EDIT_LAYER_INNER_L4:
		return tun && in->l4_type != DPFLOW_L4_NONE
			   ? in->l4_off
			   : DPFLOW_EDIT_NO_OFF;
	default:
		return DPFLOW_EDIT_NO_OFF;
	}
}

/*
 * Frame offset of field @fd, checked: 0 < width <= @max_width (else
 * *@why = EDIT_BAD_ACTION), layer present and field inside the frame (else
 * EDIT_FIELD_RANGE). Returns DPFLOW_EDIT_NO_OFF on failure.
 */
DPF_HD static inline uint32_t
dpflow_edit_field_off(const struct dpflow_pkt_meta *m,
		      const struct dpflow_edit_field *fd, uint32_t max_width,
		      unsigned *why)
{
	uint32_t base, off;

	if (DPFLOW_UNLIKELY(fd->width == 0 || fd->width > max_width)) {
		*why = DPFLOW_DROP_EDIT_BAD_ACTION;
		return DPFLOW_EDIT_NO_OFF;
	}
	base = dpflow_edit_layer_off(m, fd->layer);
	off = base + fd->off;
	if (DPFLOW_UNLIKELY(base == DPFLOW_EDIT_NO_OFF ||
			    off + fd->width > m->data_len)) {
		*why = DPFLOW_DROP_EDIT_FIELD_RANGE;
		return DPFLOW_EDIT_NO_OFF;
	}
	return off;
}

/*
 * A checksum of the frame: the 16-bit field at @field covers the bytes
 * [start, end) counted from @start, and the pseudo-header addresses
 * [ps_start, ps_end) counted from ps_base (the IP header).
 */
struct dpflow_edit_csum_site {
	uint32_t field;
	uint32_t start;
	uint32_t end;
	uint32_t ps_start;
	uint32_t ps_end;
	uint32_t ps_base;
	uint32_t udp;
};

/* The checksums of one header set into @s; returns how many (0..2). */
DPF_HD static inline unsigned
dpflow_edit_csum_sites_hdr(const uint8_t *f, const struct dpflow_hdr *h,
			   int gre_csum, struct dpflow_edit_csum_site *s)
{
	uint32_t l3_end = (uint32_t)h->l3_off + h->l3_len;
	unsigned n = 0;
	int pseudo = 1;

	if (h->l3_type != DPFLOW_L3_IPV4 && h->l3_type != DPFLOW_L3_IPV6)
		return 0;
	s[0].udp = 0;
	s[0].start = h->l4_off;
	s[0].end = l3_end;
	switch (h->l4_type) {
	case DPFLOW_L4_TCP:
		s[0].field = h->l4_off + 16u;
		n = 1;
		break;
	case DPFLOW_L4_UDP: {
		uint32_t uend =
		    h->l4_off + (uint32_t)dpflow_rd16(f + h->l4_off + 4);

		s[0].field = h->l4_off + 6u;
		s[0].udp = 1;
		if (uend < l3_end)
			s[0].end = uend;
		n = 1;
		break;
	}
	case DPFLOW_L4_ICMP:
		pseudo = 0;
		s[0].field = h->l4_off + 2u;
		n = 1;
		break;
	case DPFLOW_L4_ICMPV6:
		s[0].field = h->l4_off + 2u;
		n = 1;
		break;
	default:
		if (gre_csum) {
			pseudo = 0;
			s[0].field = h->l4_off + 4u;
			n = 1;
		}
		break;
	}
	if (n) {
		s[0].ps_base = h->l3_off;
		s[0].ps_start = s[0].ps_end = 0;
		if (pseudo) {
			int v4 = h->l3_type == DPFLOW_L3_IPV4;

			s[0].ps_start = h->l3_off + (v4 ? 12u : 8u);
			s[0].ps_end = h->l3_off + (v4 ? 20u : 40u);
		}
	}
	if (h->l3_type == DPFLOW_L3_IPV4) {
		s[n].field = h->l3_off + 10u;
		s[n].start = h->l3_off;
		s[n].end = h->l4_off;
		s[n].ps_start = s[n].ps_end = s[n].ps_base = 0;
		s[n].udp = 0;
		n++;
	}
	return n;
}

/* Every checksum of the frame, inner ones first. */
DPF_HD static inline unsigned
dpflow_edit_csum_sites(const struct dpflow_pkt_meta *m, const uint8_t *f,
		       struct dpflow_edit_csum_site *s)
{
	unsigned n = 0;

	if (m->tun_type != DPFLOW_TUN_NONE)
		n = dpflow_edit_csum_sites_hdr(f, &m->inner, 0, s);
	return n + dpflow_edit_csum_sites_hdr(
		       f, &m->outer,
		       m->tun_type == DPFLOW_TUN_GRE &&
			   (m->flags & DPFLOW_META_F_GRE_CSUM),
		       s + n);
}

/* Bytes that changed, as the checksum walk sees them. */
struct dpflow_edit_change {
	uint32_t off;
	uint32_t len;
	uint8_t old[DPFLOW_EDIT_FIELD_MAX];
	uint8_t nw[DPFLOW_EDIT_FIELD_MAX];
};

/*
 * Add to *@delta the change @c makes to the bytes [@lo, @hi) of the frame,
 * whose words count from @base. Returns whether any byte was inside.
 */
DPF_HD static inline int
dpflow_edit_delta_in(const struct dpflow_edit_change *c, uint32_t lo,
		     uint32_t hi, uint32_t base, uint64_t *delta)
{
	uint32_t a = c->off > lo ? c->off : lo;
	uint32_t b = c->off + c->len < hi ? c->off + c->len : hi;

	if (a >= b)
		return 0;
	*delta += dpflow_csum_delta_bytes(
	    c->old + (a - c->off), c->nw + (a - c->off), b - a, (a - base) & 1);
	return 1;
}

/*
 * Write @len (<= DPFLOW_EDIT_FIELD_MAX) bytes @nw at frame offset @off and
 * fix every checksum that covers them: IPv4 header checksums, L4
 * checksums (pseudo-header addresses included), the GRE checksum; inner
 * checksums first, then the outer ones, which also see the inner checksum
 * fields change. A checksum whose own field the write overlaps is left as
 * written. Not fixed: pseudo-header length and protocol (a write that
 * changes IP lengths or protocol), SCTP's CRC32c.
 */
DPF_HD static inline void dpflow_edit_write(const struct dpflow_pkt_meta *m,
					    uint8_t *f, uint32_t off,
					    const uint8_t *nw, uint32_t len)
{
	struct dpflow_edit_csum_site s[4];
	struct dpflow_edit_change c[5];
	unsigned ns, nc = 1, i, j;

	ns = dpflow_edit_csum_sites(m, f, s);
	c[0].off = off;
	c[0].len = len;
	memcpy(c[0].old, f + off, len);
	memcpy(c[0].nw, nw, len);
	memcpy(f + off, nw, len);
	for (i = 0; i < ns; i++) {
		const struct dpflow_edit_csum_site *si = &s[i];
		uint64_t delta = 0;
		int hit = 0;
		uint16_t hc, n16;

		if (off < si->field + 2 && si->field < off + len)
			continue;
		for (j = 0; j < nc; j++) {
			hit |= dpflow_edit_delta_in(&c[j], si->start, si->end,
						    si->start, &delta);
			hit |= dpflow_edit_delta_in(&c[j], si->ps_start,
						    si->ps_end, si->ps_base,
						    &delta);
		}
		if (!hit)
			continue;
		hc = dpflow_edit_rd16(f + si->field);
		if (si->udp && hc == 0)
			continue; /* none, and it stays none */
		dpflow_csum_apply(f + si->field, delta, (int)si->udp);
		n16 = dpflow_edit_rd16(f + si->field);
		c[nc].off = si->field;
		c[nc].len = 2;
		dpflow_edit_wr16(c[nc].old, hc);
		dpflow_edit_wr16(c[nc].nw, n16);
		nc++;
	}
}

/*
 * After a field write at [off, off + len): re-parse when it touched a
 * header the parser reads (it may have changed what the metadata says).
 */
DPF_HD static inline unsigned
dpflow_edit_after_write(struct dpflow_pkt_meta *m, uint8_t *buf, uint32_t off)
{
	uint32_t hdr_end = m->tun_type != DPFLOW_TUN_NONE ? m->inner.pay_off
							  : m->outer.pay_off;

	if (off < hdr_end)
		return dpflow_edit_reparse(m, buf);
	return DPFLOW_DROP_NONE;
}

/*
 * Field = (field & ~mask) | (val & mask), @mask NULL for all ones; width
 * 1..16 bytes.
 */
DPF_HD static inline unsigned
dpflow_edit_field_set_impl(struct dpflow_pkt_meta *m, uint8_t *buf,
			   const struct dpflow_edit_field *fd,
			   const uint8_t *val, const uint8_t *mask)
{
	uint8_t *f = buf + m->data_off;
	uint8_t nw[DPFLOW_EDIT_FIELD_MAX];
	unsigned why = 0;
	uint32_t off =
	    dpflow_edit_field_off(m, fd, DPFLOW_EDIT_FIELD_MAX, &why);
	uint32_t k;

	if (DPFLOW_UNLIKELY(off == DPFLOW_EDIT_NO_OFF))
		return dpflow_edit_drop(m, why);
	for (k = 0; k < fd->width; k++)
		nw[k] = mask ? (uint8_t)((f[off + k] & ~mask[k]) |
					 (val[k] & mask[k]))
			     : val[k];
	dpflow_edit_write(m, f, off, nw, fd->width);
	return dpflow_edit_after_write(m, buf, off);
}

/* Big-endian field of width 1..4 bytes at @p. */
DPF_HD static inline uint32_t dpflow_edit_rd_be(const uint8_t *p, uint32_t w)
{
	uint32_t v = 0, k;

	for (k = 0; k < w; k++)
		v = v << 8 | p[k];
	return v;
}

DPF_HD static inline void dpflow_edit_wr_be(uint8_t *p, uint32_t w, uint32_t v)
{
	uint32_t k;

	for (k = w; k > 0; k--) {
		p[k - 1] = (uint8_t)v;
		v >>= 8;
	}
}

/* Field += @delta modulo 2^(8 * width); width 1..4 bytes. */
DPF_HD static inline unsigned
dpflow_edit_field_add_impl(struct dpflow_pkt_meta *m, uint8_t *buf,
			   const struct dpflow_edit_field *fd, uint32_t delta)
{
	uint8_t *f = buf + m->data_off;
	uint8_t nw[4];
	unsigned why = 0;
	uint32_t off = dpflow_edit_field_off(m, fd, 4, &why);

	if (DPFLOW_UNLIKELY(off == DPFLOW_EDIT_NO_OFF))
		return dpflow_edit_drop(m, why);
	dpflow_edit_wr_be(nw, fd->width,
			  dpflow_edit_rd_be(f + off, fd->width) + delta);
	dpflow_edit_write(m, f, off, nw, fd->width);
	return dpflow_edit_after_write(m, buf, off);
}

/* Field @dst = field @src (same width, 1..16 bytes, as read before). */
DPF_HD static inline unsigned
dpflow_edit_field_copy_impl(struct dpflow_pkt_meta *m, uint8_t *buf,
			    const struct dpflow_edit_field *dst,
			    const struct dpflow_edit_field *src)
{
	uint8_t *f = buf + m->data_off;
	uint8_t v[DPFLOW_EDIT_FIELD_MAX];
	unsigned why = 0;
	uint32_t so, doff;

	if (DPFLOW_UNLIKELY(dst->width != src->width))
		return dpflow_edit_drop(m, DPFLOW_DROP_EDIT_BAD_ACTION);
	so = dpflow_edit_field_off(m, src, DPFLOW_EDIT_FIELD_MAX, &why);
	if (DPFLOW_UNLIKELY(so == DPFLOW_EDIT_NO_OFF))
		return dpflow_edit_drop(m, why);
	doff = dpflow_edit_field_off(m, dst, DPFLOW_EDIT_FIELD_MAX, &why);
	if (DPFLOW_UNLIKELY(doff == DPFLOW_EDIT_NO_OFF))
		return dpflow_edit_drop(m, why);
	memcpy(v, f + so, src->width);
	dpflow_edit_write(m, f, doff, v, dst->width);
	return dpflow_edit_after_write(m, buf, doff);
}

/* ---- metadata registers ------------------------------------------------- */

DPF_HD static inline unsigned dpflow_edit_reg_impl(struct dpflow_pkt_meta *m,
						   unsigned op, unsigned dst,
						   unsigned src, uint32_t val)
{
	if (DPFLOW_UNLIKELY(
		dst >= DPFLOW_META_REGS ||
		(op == DPFLOW_EDIT_REG_COPY && src >= DPFLOW_META_REGS)))
		return dpflow_edit_drop(m, DPFLOW_DROP_EDIT_BAD_ACTION);
	if (op == DPFLOW_EDIT_REG_SET)
		m->reg[dst] = val;
	else if (op == DPFLOW_EDIT_REG_ADD)
		m->reg[dst] += val;
	else if (op == DPFLOW_EDIT_REG_COPY)
		m->reg[dst] = m->reg[src];
	else
		return dpflow_edit_drop(m, DPFLOW_DROP_EDIT_BAD_ACTION);
	return DPFLOW_DROP_NONE;
}

/* reg[@reg] = big-endian field of 1..4 bytes. */
DPF_HD static inline unsigned
dpflow_edit_reg_from_field_impl(struct dpflow_pkt_meta *m, uint8_t *buf,
				const struct dpflow_edit_field *fd,
				unsigned reg)
{
	unsigned why = 0;
	uint32_t off;

	if (DPFLOW_UNLIKELY(reg >= DPFLOW_META_REGS))
		return dpflow_edit_drop(m, DPFLOW_DROP_EDIT_BAD_ACTION);
	off = dpflow_edit_field_off(m, fd, 4, &why);
	if (DPFLOW_UNLIKELY(off == DPFLOW_EDIT_NO_OFF))
		return dpflow_edit_drop(m, why);
	m->reg[reg] = dpflow_edit_rd_be(buf + m->data_off + off, fd->width);
	return DPFLOW_DROP_NONE;
}

/* Field of 1..4 bytes = the low bytes of reg[@reg], big-endian. */
DPF_HD static inline unsigned
dpflow_edit_field_from_reg_impl(struct dpflow_pkt_meta *m, uint8_t *buf,
				const struct dpflow_edit_field *fd,
				unsigned reg)
{
	uint8_t nw[4];
	unsigned why = 0;
	uint32_t off;

	if (DPFLOW_UNLIKELY(reg >= DPFLOW_META_REGS))
		return dpflow_edit_drop(m, DPFLOW_DROP_EDIT_BAD_ACTION);
	off = dpflow_edit_field_off(m, fd, 4, &why);
	if (DPFLOW_UNLIKELY(off == DPFLOW_EDIT_NO_OFF))
		return dpflow_edit_drop(m, why);
	dpflow_edit_wr_be(nw, fd->width, m->reg[reg]);
	dpflow_edit_write(m, buf + m->data_off, off, nw, fd->width);
	return dpflow_edit_after_write(m, buf, off);
}

/* ---- one action --------------------------------------------------------- */

/* Run action @a on the packet (see the contract at the top). */
DPF_HD static inline unsigned
dpflow_edit_apply_impl(struct dpflow_pkt_meta *m, uint8_t *buf,
		       const struct dpflow_edit_action *a)
{
	switch (a->op) {
	case DPFLOW_EDIT_NOP:
		return DPFLOW_DROP_NONE;
	case DPFLOW_EDIT_SET_MAC:
		return dpflow_edit_set_mac_impl(
		    m, buf, a->u.mac.set_src ? a->u.mac.src : NULL,
		    a->u.mac.set_dst ? a->u.mac.dst : NULL);
	case DPFLOW_EDIT_SET_ETHERTYPE:
		return dpflow_edit_set_ethertype_impl(m, buf, a->u.ethertype);
	case DPFLOW_EDIT_DEC_TTL:
		return dpflow_edit_dec_ttl_impl(m, buf);
	case DPFLOW_EDIT_SET_IPV4_SRC:
	case DPFLOW_EDIT_SET_IPV4_DST:
		return dpflow_edit_set_ipv4_impl(
		    m, buf, a->op == DPFLOW_EDIT_SET_IPV4_DST, a->u.addr);
	case DPFLOW_EDIT_SET_IPV6_SRC:
	case DPFLOW_EDIT_SET_IPV6_DST:
		return dpflow_edit_set_ipv6_impl(
		    m, buf, a->op == DPFLOW_EDIT_SET_IPV6_DST, a->u.addr);
	case DPFLOW_EDIT_SET_L4_SRC:
	case DPFLOW_EDIT_SET_L4_DST:
		return dpflow_edit_set_port_impl(
		    m, buf, a->op == DPFLOW_EDIT_SET_L4_DST, a->u.port);
	case DPFLOW_EDIT_SET_DSCP:
		return dpflow_edit_set_dscp_impl(m, buf, a->u.dscp);
	case DPFLOW_EDIT_VLAN_PUSH:
		return dpflow_edit_vlan_push_impl(m, buf, a->u.vlan.tpid,
						  a->u.vlan.tci);
	case DPFLOW_EDIT_VLAN_POP:
		return dpflow_edit_vlan_pop_impl(m, buf);
	case DPFLOW_EDIT_ENCAP:
		return dpflow_edit_encap_impl(m, buf, &a->u.encap);
	case DPFLOW_EDIT_DECAP:
		return dpflow_edit_decap_impl(m, buf, a->u.tun_type);
	case DPFLOW_EDIT_FIELD_SET:
		return dpflow_edit_field_set_impl(m, buf, &a->u.set.f,
						  a->u.set.val, a->u.set.mask);
	case DPFLOW_EDIT_FIELD_ADD:
		return dpflow_edit_field_add_impl(m, buf, &a->u.add.f,
						  a->u.add.delta);
	case DPFLOW_EDIT_FIELD_COPY:
		return dpflow_edit_field_copy_impl(m, buf, &a->u.copy.dst,
						   &a->u.copy.src);
	case DPFLOW_EDIT_REG_SET:
	case DPFLOW_EDIT_REG_ADD:
	case DPFLOW_EDIT_REG_COPY:
		return dpflow_edit_reg_impl(m, a->op, a->u.reg.dst,
					    a->u.reg.src, a->u.reg.val);
	case DPFLOW_EDIT_REG_FROM_FIELD:
		return dpflow_edit_reg_from_field_impl(m, buf, &a->u.freg.f,
						       a->u.freg.reg);
	case DPFLOW_EDIT_FIELD_FROM_REG:
		return dpflow_edit_field_from_reg_impl(m, buf, &a->u.freg.f,
						       a->u.freg.reg);
	default:
		return dpflow_edit_drop(m, DPFLOW_DROP_EDIT_BAD_ACTION);
	}
}

#endif /* DPFLOW_PKT_EDIT_IMPL_H */
