/*
 * The packet builder behind dpflow_gen_build(): writes one frame from a
 * struct dpflow_gen_spec, headers outermost first, then fills lengths and
 * checksums innermost first (inner L4, inner IP, tunnel, outer IP).
 *
 * Reentrant: all state lives in the caller's buffer and the stack.
 */
#include <string.h>

#include "dpflow/gen.h"
#include "dpflow/pkt_edit.h"

#define ETH_P_IPV4   0x0800
#define ETH_P_IPV6   0x86dd
#define ETH_P_8021Q  0x8100
#define ETH_P_8021AD 0x88a8
#define ETH_P_TEB    0x6558 /* transparent Ethernet bridging */

#define IPPROTO_HOPOPTS_    0
#define IPPROTO_IPIP_	    4
#define IPPROTO_TCP_	    6
#define IPPROTO_UDP_	    17
#define IPPROTO_IPV6_	    41
#define IPPROTO_ROUTING_    43
#define IPPROTO_FRAGMENT_   44
#define IPPROTO_GRE_	    47
#define IPPROTO_ICMP_	    1
#define IPPROTO_ICMPV6_	    58
#define IPPROTO_NONE_	    59
#define IPPROTO_DSTOPTS_    60
#define IPPROTO_SCTP_	    132
#define IPPROTO_EXPERIMENT_ 253 /* RFC 3692: IPv4 packets with no L4 */

#define VXLAN_PORT  4789
#define GENEVE_PORT 6081

#define GRE_F_CSUM 0x8000
#define GRE_F_KEY  0x2000
#define GRE_F_SEQ  0x1000

#define IPV6_EXT_MAX 4 /* DPFLOW_ARRAY_SIZE(dpflow_gen_l3.ipv6_ext) */

/* Output cursor: every write is bounds-checked; a failed one sticks. */
struct wbuf {
	uint8_t *buf;
	uint32_t cap;
	uint32_t len;
	bool fail;
};

/* Reserve @n zeroed bytes; NULL (and w->fail) when they do not fit. */
static uint8_t *take(struct wbuf *w, uint32_t n)
{
	if (w->fail || n > w->cap - w->len) {
		w->fail = true;
		return NULL;
	}
	uint8_t *p = w->buf + w->len;
	memset(p, 0, n);
	w->len += n;
	return p;
}

static void wr16(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void wr32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* Sum of the TCP/UDP/ICMPv6 pseudo-header (RFC 793, RFC 8200 8.1). */
static uint64_t pseudo_sum(const struct dpflow_gen_l3 *l3, uint8_t proto,
			   uint32_t l4_len)
{
	if (l3->l3_type == DPFLOW_L3_IPV4)
		return dpflow_csum_pseudo_ipv4(l3->src, l3->dst, proto, l4_len);
	return dpflow_csum_pseudo_ipv6(l3->src, l3->dst, proto, l4_len);
}

/*
 * CRC32c (Castagnoli, reflected 0x82f63b78), bitwise: the builder is not
 * on a fast path and a table would only add static data.
 */
static uint32_t crc32c(const uint8_t *p, uint32_t n)
{
	uint32_t crc = 0xffffffffu;

	for (uint32_t i = 0; i < n; i++) {
		crc ^= p[i];
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1u)));
	}
	return ~crc;
}

/* The payload pattern: byte i of every payload. */
static void fill_pattern(uint8_t *p, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		p[i] = (uint8_t)i;
}

static void put_payload(struct wbuf *w, uint32_t n)
{
	uint8_t *p = take(w, n);

	if (p)
		fill_pattern(p, n);
}

static uint8_t l4_proto(const struct dpflow_gen_l3 *l3)
{
	switch (l3->l4_type) {
	case DPFLOW_L4_TCP:
		return IPPROTO_TCP_;
	case DPFLOW_L4_UDP:
		return IPPROTO_UDP_;
	case DPFLOW_L4_ICMP:
		return IPPROTO_ICMP_;
	case DPFLOW_L4_ICMPV6:
		return IPPROTO_ICMPV6_;
	case DPFLOW_L4_SCTP:
		return IPPROTO_SCTP_;
	default:
		return l3->l3_type == DPFLOW_L3_IPV6 ? IPPROTO_NONE_
						     : IPPROTO_EXPERIMENT_;
	}
}

static bool l3_valid(const struct dpflow_gen_l3 *l3)
{
	bool v6 = l3->l3_type == DPFLOW_L3_IPV6;

	if (l3->l3_type != DPFLOW_L3_IPV4 && !v6)
		return false;
	switch (l3->l4_type) {
	case DPFLOW_L4_NONE:
	case DPFLOW_L4_TCP:
	case DPFLOW_L4_UDP:
	case DPFLOW_L4_SCTP:
		break;
	case DPFLOW_L4_ICMP:
		if (v6)
			return false;
		break;
	case DPFLOW_L4_ICMPV6:
		if (!v6)
			return false;
		break;
	default:
		return false;
	}
	if (l3->ipv4_opt_len % 4 || l3->ipv4_opt_len > 40)
		return false;
	if (l3->frag > DPFLOW_FRAG_LATER)
		return false;
	if (l3->frag == DPFLOW_FRAG_LATER &&
	    (l3->frag_off == 0 || l3->frag_off > 0x1fff))
		return false;
	if (v6) {
		for (int i = 0; i < IPV6_EXT_MAX && l3->ipv6_ext[i] != 0xff;
		     i++) {
			uint8_t e = l3->ipv6_ext[i];
			if (e != IPPROTO_HOPOPTS_ && e != IPPROTO_ROUTING_ &&
			    e != IPPROTO_FRAGMENT_ && e != IPPROTO_DSTOPTS_)
				return false;
		}
	}
	return true;
}

static bool spec_valid(const struct dpflow_gen_spec *s)
{
	if (s->n_vlan > 2 || (s->n_vlan && !s->has_eth))
		return false;
	if (!l3_valid(&s->outer))
		return false;
	if (s->tun_type == DPFLOW_TUN_NONE)
		return true;
	if (s->tun_type > DPFLOW_TUN_IPIP || !l3_valid(&s->inner))
		return false;
	if (s->tun_type == DPFLOW_TUN_IPIP && s->inner_eth)
		return false;
	if (s->tun_type == DPFLOW_TUN_GENEVE &&
	    (s->geneve_opt_len % 4 || s->geneve_opt_len > 252))
		return false;
	if ((s->tun_type == DPFLOW_TUN_VXLAN ||
	     s->tun_type == DPFLOW_TUN_GENEVE) &&
	    s->tun_id > 0xffffff)
		return false;
	return true;
}

static void put_eth(struct wbuf *w, const uint8_t *dst, const uint8_t *src,
		    const uint16_t *vlan, unsigned n_vlan, uint16_t ethertype)
{
	uint8_t *p = take(w, 14 + 4 * n_vlan);

	if (!p)
		return;
	memcpy(p, dst, 6);
	memcpy(p + 6, src, 6);
	p += 12;
	for (unsigned i = 0; i < n_vlan; i++, p += 4) {
		wr16(p, n_vlan == 2 && i == 0 ? ETH_P_8021AD : ETH_P_8021Q);
		wr16(p + 2, vlan[i]);
	}
	wr16(p, ethertype);
}

/*
 * IPv4 options of @n bytes (a multiple of 4, <= 40), all well formed with
 * empty slots (RFC 791, RFC 2113): 4 bytes are a router alert; 8 or more a
 * NOP and a record route filling the rest, preceded from 12 bytes on by a
 * timestamp option (one slot), which leaves 4 bytes for a router alert at
 * 12.
 */
static void put_ipv4_options(uint8_t *p, unsigned n)
{
	if (n >= 12) {
		p[0] = 68; /* timestamp, timestamps only, one empty slot */
		p[1] = 8;
		p[2] = 5;
		p += 8;
		n -= 8;
	}
	if (n == 4) {
		p[0] = 0x94; /* router alert (copied), value 0 */
		p[1] = 4;
	} else if (n >= 8) {
		p[0] = 1; /* NOP aligns the route slots */
		p[1] = 7; /* record route: 3 + 4k bytes */
		p[2] = (uint8_t)(n - 1);
		p[3] = 4;
	}
}

/* Where an IP header was written, for the length and checksum pass. */
struct ip_pos {
	uint32_t ip;   /* first byte of the IP header */
	uint32_t l4;   /* first byte after the IP header and extensions */
	uint32_t hlen; /* IPv4 header length */
};

static unsigned ipv6_ext_count(const struct dpflow_gen_l3 *l3, bool *has_frag)
{
	unsigned n = 0;

	*has_frag = false;
	while (n < IPV6_EXT_MAX && l3->ipv6_ext[n] != 0xff) {
		if (l3->ipv6_ext[n] == IPPROTO_FRAGMENT_)
			*has_frag = true;
		n++;
	}
	return n;
}

/* One IPv6 extension header of type @type; @nh is its next header. */
static void put_ipv6_ext(struct wbuf *w, const struct dpflow_gen_l3 *l3,
			 uint8_t type, uint8_t nh)
{
	uint8_t *p;

	switch (type) {
	case IPPROTO_HOPOPTS_:
		p = take(w, 8);
		if (!p)
			return;
		p[2] = 5; /* router alert (RFC 2711), value 0: MLD */
		p[3] = 2;
		p[6] = 1; /* PadN, no data: pads to 8 */
		break;
	case IPPROTO_ROUTING_:
		/* Type 0 with one address and segments left 0: already at
		 * its destination, so the pseudo-header keeps l3->dst. */
		p = take(w, 24);
		if (!p)
			return;
		p[1] = 2;
		memcpy(p + 8, l3->dst, 16);
		break;
	case IPPROTO_FRAGMENT_: {
		uint32_t off = l3->frag == DPFLOW_FRAG_LATER ? l3->frag_off : 0;
		p = take(w, 8);
		if (!p)
			return;
		wr16(p + 2,
		     off << 3 | (l3->frag == DPFLOW_FRAG_FIRST ? 1u : 0u));
		wr32(p + 4, l3->ip_id);
		break;
	}
	default: /* destination options: PadN of 4 bytes */
		p = take(w, 8);
		if (!p)
			return;
		p[2] = 1;
		p[3] = 4;
		break;
	}
	p[0] = nh;
}

/*
 * Write the IP header of @l3 carrying @proto. A later fragment stops after
 * the fragment header (what follows it belongs to the first fragment).
 */
static void put_ip(struct wbuf *w, const struct dpflow_gen_l3 *l3,
		   uint8_t proto, struct ip_pos *pos)
{
	uint8_t *p;

	pos->ip = w->len;
	if (l3->l3_type == DPFLOW_L3_IPV4) {
		uint32_t frag = 0;
		pos->hlen = 20u + l3->ipv4_opt_len;
		p = take(w, pos->hlen);
		if (!p)
			return;
		p[0] = (uint8_t)(0x40 | pos->hlen / 4);
		p[1] = l3->tos;
		wr16(p + 4, l3->ip_id & 0xffff);
		if (l3->frag == DPFLOW_FRAG_FIRST)
			frag = 0x2000; /* MF */
		else if (l3->frag == DPFLOW_FRAG_LATER)
			frag = l3->frag_off; /* the last fragment: MF clear */
		wr16(p + 6, frag);
		p[8] = l3->ttl;
		p[9] = proto;
		memcpy(p + 12, l3->src, 4);
		memcpy(p + 16, l3->dst, 4);
		put_ipv4_options(p + 20, l3->ipv4_opt_len);
		pos->l4 = w->len;
		return;
	}

	uint8_t ext[IPV6_EXT_MAX + 1];
	bool has_frag;
	unsigned n = ipv6_ext_count(l3, &has_frag);
	memcpy(ext, l3->ipv6_ext, n);
	if (l3->frag != DPFLOW_FRAG_NONE && !has_frag)
		ext[n++] = IPPROTO_FRAGMENT_;

	pos->hlen = 40;
	p = take(w, 40);
	if (!p)
		return;
	wr32(p, 6u << 28 | (uint32_t)l3->tos << 20);
	p[6] = n ? ext[0] : proto;
	p[7] = l3->ttl;
	memcpy(p + 8, l3->src, 16);
	memcpy(p + 24, l3->dst, 16);
	for (unsigned i = 0; i < n; i++) {
		put_ipv6_ext(w, l3, ext[i], i + 1 < n ? ext[i + 1] : proto);
		if (ext[i] == IPPROTO_FRAGMENT_ &&
		    l3->frag == DPFLOW_FRAG_LATER)
			break;
	}
	pos->l4 = w->len;
}

/* Fill the IP lengths (and IPv4 checksum) once the datagram ends at @end. */
static void finish_ip(struct wbuf *w, const struct dpflow_gen_l3 *l3,
		      const struct ip_pos *pos)
{
	uint8_t *p = w->buf + pos->ip;
	uint32_t len = w->len - pos->ip;

	if (l3->l3_type == DPFLOW_L3_IPV4) {
		wr16(p + 2, len);
		dpflow_ipv4_csum_set(p, pos->hlen);
	} else {
		wr16(p + 4, len - 40);
	}
}

/* L4 header of @l3 plus its payload; checksum done by finish_l4(). */
static void put_l4(struct wbuf *w, const struct dpflow_gen_l3 *l3)
{
	uint8_t *p;

	switch (l3->l4_type) {
	case DPFLOW_L4_TCP:
		p = take(w, 20);
		if (!p)
			return;
		wr16(p, l3->sport);
		wr16(p + 2, l3->dport);
		wr32(p + 4, l3->tcp_seq);
		wr32(p + 8, l3->tcp_ack);
		p[12] = 5 << 4;
		p[13] = l3->tcp_flags;
		wr16(p + 14, 65535);
		break;
	case DPFLOW_L4_UDP:
		p = take(w, 8);
		if (!p)
			return;
		wr16(p, l3->sport);
		wr16(p + 2, l3->dport);
		break;
	case DPFLOW_L4_ICMP:
	case DPFLOW_L4_ICMPV6:
		p = take(w, 8);
		if (!p)
			return;
		p[0] = (uint8_t)l3->sport;
		p[1] = (uint8_t)l3->dport;
		wr16(p + 4, l3->icmp_id);
		wr16(p + 6, l3->icmp_seq);
		break;
	case DPFLOW_L4_SCTP: {
		/* Common header, then one DATA chunk (B and E set) whose user
		 * data is padded to 4 bytes (RFC 9260 3.2, 3.3.1). */
		uint32_t pad = (4u - l3->payload_len % 4u) % 4u;
		p = take(w, 28);
		if (!p)
			return;
		wr16(p, l3->sport);
		wr16(p + 2, l3->dport);
		wr32(p + 4, (uint32_t)l3->sport << 16 | l3->dport); /* vtag */
		p[12] = 0;					    /* DATA */
		p[13] = 0x03; /* beginning and end of a user message */
		wr16(p + 14, 16u + l3->payload_len);
		wr32(p + 16, l3->tcp_seq);  /* TSN */
		wr16(p + 22, l3->icmp_seq); /* stream sequence */
		put_payload(w, l3->payload_len);
		take(w, pad);
		return;
	}
	default:
		break;
	}
	put_payload(w, l3->payload_len);
}

static void finish_l4(struct wbuf *w, const struct dpflow_gen_l3 *l3,
		      uint32_t l4)
{
	uint8_t *p = w->buf + l4;
	uint32_t len = w->len - l4;

	/* a UDP checksum of 0 is sent as 0xffff: 0 means "no checksum" */
	switch (l3->l4_type) {
	case DPFLOW_L4_TCP:
		dpflow_l4_csum_set(p, len, IPPROTO_TCP_,
				   pseudo_sum(l3, IPPROTO_TCP_, len));
		break;
	case DPFLOW_L4_UDP:
		wr16(p + 4, len);
		dpflow_l4_csum_set(p, len, IPPROTO_UDP_,
				   pseudo_sum(l3, IPPROTO_UDP_, len));
		break;
	case DPFLOW_L4_ICMP:
		dpflow_l4_csum_set(p, len, IPPROTO_ICMP_, 0);
		break;
	case DPFLOW_L4_ICMPV6:
		dpflow_l4_csum_set(p, len, IPPROTO_ICMPV6_,
				   pseudo_sum(l3, IPPROTO_ICMPV6_, len));
		break;
	case DPFLOW_L4_SCTP: {
		/* CRC32c goes on the wire least significant byte first. */
		uint32_t crc = crc32c(p, len);
		p[8] = (uint8_t)crc;
		p[9] = (uint8_t)(crc >> 8);
		p[10] = (uint8_t)(crc >> 16);
		p[11] = (uint8_t)(crc >> 24);
		break;
	}
	default:
		break;
	}
}

/* A whole IP packet without tunnel: header, L4 (or raw data), finish. */
static void put_ip_packet(struct wbuf *w, const struct dpflow_gen_l3 *l3)
{
	struct ip_pos pos;

	put_ip(w, l3, l4_proto(l3), &pos);
	if (w->fail)
		return;
	if (l3->frag == DPFLOW_FRAG_LATER) {
		put_payload(w, l3->payload_len);
	} else {
		put_l4(w, l3);
		if (w->fail)
			return;
		finish_l4(w, l3, pos.l4);
	}
	if (!w->fail)
		finish_ip(w, l3, &pos);
}

static uint16_t ip_ethertype(const struct dpflow_gen_l3 *l3)
{
	return l3->l3_type == DPFLOW_L3_IPV6 ? ETH_P_IPV6 : ETH_P_IPV4;
}

/* The tunnelled frame: inner Ethernet when asked, then the inner packet. */
static void put_inner(struct wbuf *w, const struct dpflow_gen_spec *s, bool eth)
{
	if (eth)
		put_eth(w, s->inner_dst_mac, s->inner_src_mac, NULL, 0,
			ip_ethertype(&s->inner));
	put_ip_packet(w, &s->inner);
}

/*
 * GENEVE options of @n bytes as TLVs (RFC 8926 3.5): class 0x0101 (an
 * unassigned class, as tests use), types 1, 2, ... without the critical
 * bit, each with 4 bytes of data, the last one shorter when @n asks.
 */
static void put_geneve_options(uint8_t *p, unsigned n)
{
	uint8_t type = 1;

	while (n >= 4) {
		unsigned data = n >= 8 ? 4 : 0;
		wr16(p, 0x0101);
		p[2] = type++;
		p[3] = (uint8_t)(data / 4);
		fill_pattern(p + 4, data);
		p += 4 + data;
		n -= 4 + data;
	}
}

/* UDP tunnel (VXLAN, GENEVE) after the outer IP header. */
static void put_udp_tunnel(struct wbuf *w, const struct dpflow_gen_spec *s)
{
	uint32_t udp = w->len;
	uint8_t *p = take(w, 8);
	bool eth = true;

	if (!p)
		return;
	wr16(p, s->outer.sport);
	if (s->tun_type == DPFLOW_TUN_VXLAN) {
		wr16(p + 2, VXLAN_PORT);
		p = take(w, 8);
		if (!p)
			return;
		p[0] = 0x08; /* I: the VNI is valid */
		wr32(p + 4, s->tun_id << 8);
	} else {
		uint16_t proto =
		    s->inner_eth ? ETH_P_TEB : ip_ethertype(&s->inner);
		wr16(p + 2, GENEVE_PORT);
		eth = s->inner_eth;
		p = take(w, 8u + s->geneve_opt_len);
		if (!p)
			return;
		p[0] = (uint8_t)(s->geneve_opt_len / 4); /* version 0 */
		wr16(p + 2, proto);
		wr32(p + 4, s->tun_id << 8);
		put_geneve_options(p + 8, s->geneve_opt_len);
	}
	put_inner(w, s, eth);
	if (w->fail)
		return;
	/* UDP checksum over the whole encapsulated frame, as a stack with
	 * tunnel checksums on computes it (RFC 7348 5, RFC 8926 3.3). */
	p = w->buf + udp;
	uint32_t len = w->len - udp;
	wr16(p + 4, len);
	dpflow_l4_csum_set(p, len, IPPROTO_UDP_,
			   pseudo_sum(&s->outer, IPPROTO_UDP_, len));
}

/* GRE (RFC 2784, RFC 2890) after the outer IP header. */
static void put_gre(struct wbuf *w, const struct dpflow_gen_spec *s)
{
	uint32_t gre = w->len;
	uint32_t flags = (s->gre_csum ? GRE_F_CSUM : 0u) |
			 (s->gre_key ? GRE_F_KEY : 0u) |
			 (s->gre_seq ? GRE_F_SEQ : 0u);
	uint32_t hlen = 4u + (s->gre_csum ? 4u : 0u) + (s->gre_key ? 4u : 0u) +
			(s->gre_seq ? 4u : 0u);
	uint8_t *p = take(w, hlen);
	uint8_t *o;

	if (!p)
		return;
	wr16(p, flags);
	wr16(p + 2, s->inner_eth ? ETH_P_TEB : ip_ethertype(&s->inner));
	o = p + 4 + (s->gre_csum ? 4 : 0);
	if (s->gre_key) {
		wr32(o, s->tun_id);
		o += 4;
	}
	if (s->gre_seq)
		wr32(o, s->gre_seqno);
	put_inner(w, s, s->inner_eth);
	if (w->fail || !s->gre_csum)
		return;
	p = w->buf + gre;
	wr16(p + 4, dpflow_csum_finish(dpflow_csum_add(0, p, w->len - gre)));
}

uint32_t dpflow_gen_build(const struct dpflow_gen_spec *spec, uint8_t *buf,
			  uint32_t cap)
{
	struct wbuf w = {.buf = buf, .cap = cap, .len = 0, .fail = false};
	const struct dpflow_gen_l3 *outer;
	struct ip_pos pos;
	uint8_t proto;

	if (!spec || !buf || !spec_valid(spec))
		return 0;
	outer = &spec->outer;
	if (spec->has_eth)
		put_eth(&w, spec->dst_mac, spec->src_mac, spec->vlan,
			spec->n_vlan, ip_ethertype(outer));

	switch (spec->tun_type) {
	case DPFLOW_TUN_VXLAN:
	case DPFLOW_TUN_GENEVE:
		proto = IPPROTO_UDP_;
		break;
	case DPFLOW_TUN_GRE:
		proto = IPPROTO_GRE_;
		break;
	case DPFLOW_TUN_IPIP:
		proto = spec->inner.l3_type == DPFLOW_L3_IPV6 ? IPPROTO_IPV6_
							      : IPPROTO_IPIP_;
		break;
	default:
		put_ip_packet(&w, outer);
		goto pad;
	}

	put_ip(&w, outer, proto, &pos);
	if (outer->frag == DPFLOW_FRAG_LATER) {
		put_payload(&w, outer->payload_len);
	} else if (spec->tun_type == DPFLOW_TUN_GRE) {
		put_gre(&w, spec);
	} else if (spec->tun_type == DPFLOW_TUN_IPIP) {
		put_ip_packet(&w, &spec->inner);
	} else {
		put_udp_tunnel(&w, spec);
	}
	if (!w.fail)
		finish_ip(&w, outer, &pos);
pad:
	if (!w.fail && spec->frame_len > w.len)
		take(&w, spec->frame_len - w.len);
	return w.fail ? 0 : w.len;
}
