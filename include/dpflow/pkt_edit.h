/*
 * Packet editing: Internet checksums, NAT rewrites and encapsulation
 * headers, on the bytes of a frame.
 *
 * What it owns: the one implementation of the Internet checksum (RFC 1071)
 * in dpflow, with its incremental update (RFC 1624) and the pseudo-header
 * sums of TCP, UDP and ICMPv6; the rewrites of addresses and ports with
 * their checksum fixups (NAT); the outer headers of the encapsulations the
 * flow engine knows (VXLAN, GENEVE, GRE, IP-in-IP) and the pieces an
 * application needs to build its own (an outer IPv4 or IPv6 header from a
 * template, an outer UDP header). The flow engine's actions
 * (lib/flow/pkt_edit_impl.h), the AF_PACKET port, the traffic generator and
 * the apps all call these; none carries a checksum of its own.
 *
 * Who may call: any thread, and CUDA device code. Every data-path function
 * is `static inline` and DPF_HD, written in the common subset of C11 and
 * CUDA C++; only dpflow_edit_encap_build() (a control call that validates
 * and builds a template) lives in the library. Nothing here allocates,
 * locks or logs, and nothing checks bounds: each function names the bytes
 * it reads and writes, and they are the caller's to have.
 *
 * Conventions:
 *  - A checksum "sum" is a uint64_t accumulator of big-endian 16-bit words
 *    (a 32-bit big-endian word counts as its two halves: 2^16 = 1 modulo
 *    0xffff). Sums add with +, and integers (a protocol number, a length)
 *    add to them as the word they would be. dpflow_csum_fold() reduces a
 *    sum to 16 bits, dpflow_csum_finish() gives the checksum field (its
 *    one's complement). A sum may take 2^32 words before it overflows.
 *  - An incremental update (RFC 1624 eqn. 3) is a "delta", the sum of
 *    ~old + new over the words that changed, applied with
 *    dpflow_csum_adjust(). Its result is the one a full recomputation
 *    gives, 0x0000 included (never 0xffff, which only all-zero data sums
 *    to; every header checksummed here has a non-zero word). The _ne
 *    forms sum in the host's byte order, for the hottest rewrites (NAT):
 *    the same bytes, no byte swaps; their deltas go only to
 *    dpflow_csum_apply_ne().
 *  - UDP's zero rule (RFC 768): a UDP checksum of 0 means "none", and
 *    stays 0 across every rewrite here, over IPv4 and IPv6 alike (as
 *    Linux's NAT does); a UDP checksum that computes to 0 is sent as
 *    0xffff.
 *  - Addresses are byte arrays in network order; ports, lengths, protocol
 *    numbers and ethertypes are host-order integers.
 */
#ifndef DPFLOW_PKT_EDIT_H
#define DPFLOW_PKT_EDIT_H

#include <stdint.h>
#include <string.h>

#include "dpflow/common.h"
#include "dpflow/error.h"
#include "dpflow/meta.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- big-endian loads and stores ---------------------------------------- */

/* The big-endian 16-bit word at @p (any alignment). */
DPF_HD static inline uint16_t dpflow_edit_rd16(const uint8_t *p)
{
	return (uint16_t)((uint16_t)p[0] << 8 | p[1]);
}

/* The big-endian 32-bit word at @p (any alignment). */
DPF_HD static inline uint32_t dpflow_edit_rd32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

/*
 * Store the low 16 bits of @v at @p, big-endian. On a little-endian host
 * one swapped 16-bit store: compilers do not always merge the two byte
 * stores (a checksum computed in a register then took two).
 */
DPF_HD static inline void dpflow_edit_wr16(uint8_t *p, uint32_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	uint16_t x = (uint16_t)((v & 0xff) << 8 | (v >> 8 & 0xff));

	memcpy(p, &x, 2);
#else
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
#endif
}

/* Store @v at @p, big-endian. */
DPF_HD static inline void dpflow_edit_wr32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* ---- Internet checksum (RFC 1071) --------------------------------------- */

/*
 * Add @len bytes at @p to the sum @acc, as big-endian 16-bit words counted
 * from @p (a last odd byte is the high half of a word): @p must sit at an
 * even offset from the start of what the checksum covers. Returns the sum.
 */
DPF_HD static inline uint64_t dpflow_csum_add(uint64_t acc, const uint8_t *p,
					      uint32_t len)
{
	uint32_t i = 0;

	for (; i + 4 <= len; i += 4)
		acc += dpflow_edit_rd32(p + i);
	if (i + 2 <= len) {
		acc += dpflow_edit_rd16(p + i);
		i += 2;
	}
	if (i < len)
		acc += (uint32_t)p[i] << 8;
	return acc;
}

/*
 * Fold the sum @acc to 16 bits with end-around carries: the one's-
 * complement sum of its words, 0 only when @acc is 0 (a non-zero multiple
 * of 0xffff folds to 0xffff). Adding a value to itself rotated by half its
 * width leaves in the high half the one's-complement sum of the two
 * halves: two adds and two rotates instead of a loop.
 */
DPF_HD static inline uint16_t dpflow_csum_fold(uint64_t acc)
{
	uint32_t x = (uint32_t)((acc + (acc >> 32 | acc << 32)) >> 32);

	return (uint16_t)((x + (x >> 16 | x << 16)) >> 16);
}

/* The checksum field for the sum @acc: ~fold(acc). */
DPF_HD static inline uint16_t dpflow_csum_finish(uint64_t acc)
{
	return (uint16_t)~dpflow_csum_fold(acc);
}

/* ---- incremental updates (RFC 1624) ------------------------------------- */

/*
 * The checksum @hc after the bytes it covers changed by @delta (a sum of
 * ~old + new over the changed words): RFC 1624 eqn. 3,
 * HC' = ~(~HC + delta). A non-canonical 0xffff with no net change becomes
 * 0x0000, what a full recomputation of non-zero data gives.
 */
DPF_HD static inline uint16_t dpflow_csum_adjust(uint16_t hc, uint64_t delta)
{
	uint16_t s = dpflow_csum_fold((uint64_t)(uint16_t)~hc + delta);

	if (s == 0)
		s = 0xffff;
	return (uint16_t)~s;
}

/* The delta of one 16-bit word changing from @old to @nw. */
DPF_HD static inline uint64_t dpflow_csum_delta16(uint16_t old, uint16_t nw)
{
	return (uint64_t)(uint16_t)~old + nw;
}

/* The delta of one 32-bit word (two 16-bit words) from @old to @nw. */
DPF_HD static inline uint64_t dpflow_csum_delta32(uint32_t old, uint32_t nw)
{
	return (uint64_t)(uint32_t)~old + nw;
}

/*
 * The delta of @len bytes (a multiple of 2) changing from @old to @nw,
 * where the bytes start at an even offset of what the checksum covers.
 * @old and @nw may be the frame itself and a new value: read both before
 * writing.
 */
DPF_HD static inline uint64_t dpflow_csum_delta(const uint8_t *old,
						const uint8_t *nw, uint32_t len)
{
	uint64_t d = 0;
	uint32_t i = 0;

	for (; i + 4 <= len; i += 4)
		d += dpflow_csum_delta32(dpflow_edit_rd32(old + i),
					 dpflow_edit_rd32(nw + i));
	if (i + 2 <= len)
		d += dpflow_csum_delta16(dpflow_edit_rd16(old + i),
					 dpflow_edit_rd16(nw + i));
	return d;
}

/*
 * The delta of any byte range: @len bytes from @old to @nw, the first of
 * which sits at an odd offset of what the checksum covers when @odd is
 * non-zero (it is then the low half of its word).
 */
DPF_HD static inline uint64_t dpflow_csum_delta_bytes(const uint8_t *old,
						      const uint8_t *nw,
						      uint32_t len,
						      unsigned odd)
{
	uint64_t d = 0;
	uint32_t k;

	for (k = 0; k < len; k++) {
		unsigned sh = ((odd + k) & 1) ? 0 : 8;

		/* ~old + new of the byte's share of its word */
		d += 0xffffu - ((uint32_t)old[k] << sh) +
		     ((uint32_t)nw[k] << sh);
	}
	return d;
}

/* The checksum @hc after one 16-bit word changed from @old to @nw. */
DPF_HD static inline uint16_t dpflow_csum_update16(uint16_t hc, uint16_t old,
						   uint16_t nw)
{
	return dpflow_csum_adjust(hc, dpflow_csum_delta16(old, nw));
}

/* The checksum @hc after one 32-bit word changed from @old to @nw. */
DPF_HD static inline uint16_t dpflow_csum_update32(uint16_t hc, uint32_t old,
						   uint32_t nw)
{
	return dpflow_csum_adjust(hc, dpflow_csum_delta32(old, nw));
}

/*
 * Apply @delta to the big-endian checksum field at @field. @udp: UDP's
 * zero rule (a zero field stays zero; a result of zero is written 0xffff).
 */
DPF_HD static inline void dpflow_csum_apply(uint8_t *field, uint64_t delta,
					    int udp)
{
	uint16_t hc = dpflow_edit_rd16(field), n;

	if (udp && hc == 0)
		return;
	n = dpflow_csum_adjust(hc, delta);
	if (udp && n == 0)
		n = 0xffff;
	dpflow_edit_wr16(field, n);
}

/* ---- pseudo-headers and whole checksums ---------------------------------- */

/*
 * The sum of an IPv4 pseudo-header (RFC 793, RFC 768): addresses @src and
 * @dst (4 bytes each), protocol @proto, L4 length @len (header and
 * payload).
 */
DPF_HD static inline uint64_t dpflow_csum_pseudo_ipv4(const uint8_t *src,
						      const uint8_t *dst,
						      uint8_t proto,
						      uint32_t len)
{
	return (uint64_t)dpflow_edit_rd32(src) + dpflow_edit_rd32(dst) + proto +
	       len;
}

/*
 * The sum of an IPv6 pseudo-header (RFC 8200 8.1): addresses @src and
 * @dst (16 bytes each), next header @proto, upper-layer length @len.
 */
DPF_HD static inline uint64_t dpflow_csum_pseudo_ipv6(const uint8_t *src,
						      const uint8_t *dst,
						      uint8_t proto,
						      uint32_t len)
{
	return dpflow_csum_add(dpflow_csum_add((uint64_t)proto + len, src, 16),
			       dst, 16);
}

/*
 * The pseudo-header sum for the IP header at @ip (IPv6 when @v6): its
 * addresses, @proto and @len. With IPv6 extension headers, @ip's
 * destination is the final one only when there is no routing header.
 */
DPF_HD static inline uint64_t dpflow_csum_pseudo(const uint8_t *ip, int v6,
						 uint8_t proto, uint32_t len)
{
	if (v6)
		return dpflow_csum_pseudo_ipv6(ip + 8, ip + 24, proto, len);
	return dpflow_csum_pseudo_ipv4(ip + 12, ip + 16, proto, len);
}

/*
 * Offset of the Internet checksum in the L4 header of IP protocol @proto:
 * TCP 16, UDP 6, ICMP and ICMPv6 2; 0 for any other (SCTP's is a CRC).
 */
DPF_HD static inline uint32_t dpflow_l4_csum_off(uint8_t proto)
{
	switch (proto) {
	case 6: /* TCP */
		return 16;
	case 17: /* UDP */
		return 6;
	case 1:	 /* ICMP */
	case 58: /* ICMPv6 */
		return 2;
	default:
		return 0;
	}
}

/*
 * Offset of the L4 checksum that covers the IP pseudo-header (TCP, UDP,
 * ICMPv6), or 0 (ICMP, and protocols without an Internet checksum): the
 * checksum an address rewrite must fix.
 */
DPF_HD static inline uint32_t dpflow_l4_pseudo_csum_off(uint8_t proto)
{
	return proto == 1 ? 0 : dpflow_l4_csum_off(proto);
}

/*
 * Set the header checksum of the IPv4 header at @ip, @hlen bytes (20 plus
 * options), from scratch.
 */
DPF_HD static inline void dpflow_ipv4_csum_set(uint8_t *ip, uint32_t hlen)
{
	dpflow_edit_wr16(ip + 10, 0);
	dpflow_edit_wr16(ip + 10,
			 dpflow_csum_finish(dpflow_csum_add(0, ip, hlen)));
}

/*
 * Set the checksum of the L4 message at @l4, @len bytes (header and
 * payload) of IP protocol @proto (TCP, UDP, ICMP, ICMPv6), from scratch:
 * @pseudo is the pseudo-header sum (dpflow_csum_pseudo*(); 0 for ICMP,
 * whose checksum covers the message only). A UDP result of 0 is written
 * 0xffff. Returns 0, or -1 (nothing written) when @proto has no Internet
 * checksum or @len does not reach the field.
 */
DPF_HD static inline int dpflow_l4_csum_set(uint8_t *l4, uint32_t len,
					    uint8_t proto, uint64_t pseudo)
{
	uint32_t off = dpflow_l4_csum_off(proto);
	uint16_t c;

	if (off == 0 || len < off + 2)
		return -1;
	dpflow_edit_wr16(l4 + off, 0);
	c = dpflow_csum_finish(dpflow_csum_add(pseudo, l4, len));
	if (proto == 17 && c == 0)
		c = 0xffff;
	dpflow_edit_wr16(l4 + off, c);
	return 0;
}

/*
 * Complete the TCP or UDP checksum of the @len-byte Ethernet frame @f as a
 * NIC does for a packet sent with checksum offload (Linux's
 * CHECKSUM_PARTIAL, which AF_PACKET reports as TP_STATUS_CSUMNOTREADY: the
 * field holds the pseudo-header sum, or anything). Handles Ethernet with
 * up to two VLAN tags (0x8100, 0x88a8), unfragmented IPv4 (options
 * allowed) or IPv6 (no extension headers), TCP or UDP; the L4 length is
 * the one the IP header declares. Returns 1 when it wrote the checksum, 0
 * when it left the frame as it was (another protocol, a fragment, a frame
 * cut short).
 */
DPF_HD static inline int dpflow_csum_l4_complete(uint8_t *f, uint32_t len)
{
	uint32_t off = 12, l4, l4_len;
	uint64_t pseudo;
	uint16_t type;
	uint8_t proto;
	int tags;

	for (tags = 0;; tags++) {
		if (off + 2 > len)
			return 0;
		type = dpflow_edit_rd16(f + off);
		if ((type != 0x8100 && type != 0x88a8) || tags == 2)
			break;
		off += 4;
	}
	off += 2;
	if (type == 0x0800) {
		uint32_t ihl, tot;

		if (off + 20 > len)
			return 0;
		ihl = (f[off] & 15u) * 4;
		tot = dpflow_edit_rd16(f + off + 2);
		if (ihl < 20 || tot < ihl || off + tot > len ||
		    (f[off + 6] & 0x3f) || f[off + 7])
			return 0; /* a fragment, or cut short */
		proto = f[off + 9];
		l4 = off + ihl;
		l4_len = tot - ihl;
		pseudo = dpflow_csum_pseudo(f + off, 0, proto, l4_len);
	} else if (type == 0x86dd) {
		if (off + 40 > len)
			return 0;
		proto = f[off + 6];
		l4 = off + 40;
		l4_len = dpflow_edit_rd16(f + off + 4);
		if (l4 + l4_len > len)
			return 0;
		pseudo = dpflow_csum_pseudo(f + off, 1, proto, l4_len);
	} else {
		return 0;
	}
	if ((proto != 6 || l4_len < 20) && (proto != 17 || l4_len < 8))
		return 0;
	return dpflow_l4_csum_set(f + l4, l4_len, proto, pseudo) == 0;
}

/* ---- host-order updates ------------------------------------------------- */

/*
 * The same updates with the words read in the host's byte order, for the
 * hottest rewrites (the NAT functions below use them): a one's-complement
 * sum does not depend on byte order (RFC 1071 2(B)), so a delta summed in
 * host order and applied to the field read and written in host order
 * gives the bytes the big-endian functions give, with no byte swaps. A
 * host-order delta goes only to dpflow_csum_apply_ne(), never to the
 * big-endian functions (and the other way round).
 */

/* The host-order delta of @len bytes (a multiple of 4, at an even offset
 * of what the checksum covers) changing from @old to @nw. */
DPF_HD static inline uint64_t
dpflow_csum_delta_ne(const uint8_t *old, const uint8_t *nw, uint32_t len)
{
	uint64_t d = 0;
	uint32_t i, o, n;

	for (i = 0; i + 4 <= len; i += 4) {
		memcpy(&o, old + i, 4);
		memcpy(&n, nw + i, 4);
		d += (uint32_t)~o;
		d += n;
	}
	return d;
}

/* dpflow_csum_apply() for a host-order delta @delta: the same result. */
DPF_HD static inline void dpflow_csum_apply_ne(uint8_t *field, uint64_t delta,
					       int udp)
{
	uint16_t hc, s;

	memcpy(&hc, field, 2);
	if (udp && hc == 0)
		return;
	/* dpflow_csum_adjust(): 0 and 0xffff read the same either way */
	s = dpflow_csum_fold((uint64_t)(uint16_t)~hc + delta);
	if (s == 0)
		s = 0xffff;
	s = (uint16_t)~s;
	if (udp && s == 0)
		s = 0xffff;
	memcpy(field, &s, 2);
}

/* ---- NAT ----------------------------------------------------------------- */

/* Which address or port a rewrite changes. */
enum dpflow_edit_dir {
	DPFLOW_EDIT_SRC = 0,
	DPFLOW_EDIT_DST = 1,
};

/*
 * NAT of one address of the IPv4 header at @ip (@dir: source or
 * destination) to @addr (4 bytes): the header checksum follows, and so
 * does the L4 checksum that covers the pseudo-header (TCP, UDP with the
 * zero rule, not ICMP) at @l4, the L4 header of IP protocol @proto. @l4
 * NULL (or @proto 0): no L4 header in this packet (a later fragment).
 */
DPF_HD static inline void dpflow_nat_ipv4_addr(uint8_t *ip, uint8_t *l4,
					       uint8_t proto, unsigned dir,
					       const uint8_t *addr)
{
	uint8_t *a = ip + (dir ? 16 : 12);
	uint64_t d = dpflow_csum_delta_ne(a, addr, 4);
	uint32_t co = l4 ? dpflow_l4_pseudo_csum_off(proto) : 0;

	memcpy(a, addr, 4);
	dpflow_csum_apply_ne(ip + 10, d, 0);
	if (co)
		dpflow_csum_apply_ne(l4 + co, d, proto == 17);
}

/*
 * NAT of one address of the IPv6 header at @ip to @addr (16 bytes): the L4
 * checksum that covers the pseudo-header (TCP, UDP, ICMPv6) at @l4 (NULL:
 * none) follows, as in dpflow_nat_ipv4_addr().
 */
DPF_HD static inline void dpflow_nat_ipv6_addr(uint8_t *ip, uint8_t *l4,
					       uint8_t proto, unsigned dir,
					       const uint8_t *addr)
{
	uint8_t *a = ip + (dir ? 24 : 8);
	uint64_t d = dpflow_csum_delta_ne(a, addr, 16);
	uint32_t co = l4 ? dpflow_l4_pseudo_csum_off(proto) : 0;

	memcpy(a, addr, 16);
	if (co)
		dpflow_csum_apply_ne(l4 + co, d, proto == 17);
}

/*
 * NAT of the source or destination port (@dir) of the TCP or UDP header
 * at @l4 (@proto 6 or 17) to @port, with its checksum (UDP: zero rule).
 * Returns 0, or -1 (nothing written) for another protocol.
 */
DPF_HD static inline int dpflow_nat_l4_port(uint8_t *l4, uint8_t proto,
					    unsigned dir, uint16_t port)
{
	uint8_t *p = l4 + (dir ? 2 : 0);
	uint64_t d;

	if (proto != 6 && proto != 17)
		return -1;
	d = dpflow_csum_delta16(dpflow_edit_rd16(p), port);
	dpflow_edit_wr16(p, port);
	dpflow_csum_apply(l4 + dpflow_l4_csum_off(proto), d, proto == 17);
	return 0;
}

/*
 * NAT of the identifier of the ICMP or ICMPv6 echo message at @l4 (the
 * "port" of an echo, as Linux's NAT treats it) to @id, with the checksum.
 * The caller checks the type (echo request or reply).
 */
DPF_HD static inline void dpflow_nat_icmp_id(uint8_t *l4, uint16_t id)
{
	uint64_t d = dpflow_csum_delta16(dpflow_edit_rd16(l4 + 4), id);

	dpflow_edit_wr16(l4 + 4, id);
	dpflow_csum_apply(l4 + 2, d, 0);
}

/*
 * The L4 part of a full NAT: the ports of a TCP/UDP header at @l4 to
 * @sport and @dport, and the L4 checksum that covers the pseudo-header
 * updated with the host-order delta @d of the addresses plus that of the
 * ports. @l4 NULL: nothing.
 */
DPF_HD static inline void dpflow_nat_ports_ne(uint8_t *l4, uint8_t proto,
					      uint16_t sport, uint16_t dport,
					      uint64_t d)
{
	uint8_t ports[4];
	uint32_t co;

	if (DPFLOW_LIKELY(l4 && (proto == 6 || proto == 17))) {
		dpflow_edit_wr16(ports, sport);
		dpflow_edit_wr16(ports + 2, dport);
		d += dpflow_csum_delta_ne(l4, ports, 4);
		memcpy(l4, ports, 4);
		dpflow_csum_apply_ne(l4 + (proto == 6 ? 16 : 6), d,
				     proto == 17);
		return;
	}
	co = l4 ? dpflow_l4_pseudo_csum_off(proto) : 0;
	if (co) /* ICMPv6 */
		dpflow_csum_apply_ne(l4 + co, d, 0);
}

/*
 * Full NAT of an IPv4 packet, what a load balancer does to each: source to
 * @src:@sport, destination to @dst:@dport (addresses 4 bytes), the header
 * checksum and the L4 checksum updated with one delta. @l4 is the L4
 * header of protocol @proto; the ports are rewritten for TCP and UDP only
 * (for another protocol the addresses are, with the checksum that covers
 * them); @l4 NULL (or @proto 0): no L4 header. Equal to the single
 * rewrites one after the other.
 */
DPF_HD static inline void dpflow_nat_ipv4(uint8_t *ip, uint8_t *l4,
					  uint8_t proto, const uint8_t *src,
					  uint16_t sport, const uint8_t *dst,
					  uint16_t dport)
{
	uint64_t d = dpflow_csum_delta_ne(ip + 12, src, 4) +
		     dpflow_csum_delta_ne(ip + 16, dst, 4);

	memcpy(ip + 12, src, 4);
	memcpy(ip + 16, dst, 4);
	dpflow_csum_apply_ne(ip + 10, d, 0);
	dpflow_nat_ports_ne(l4, proto, sport, dport, d);
}

/* Full NAT of an IPv6 packet (addresses 16 bytes): as dpflow_nat_ipv4(). */
DPF_HD static inline void dpflow_nat_ipv6(uint8_t *ip, uint8_t *l4,
					  uint8_t proto, const uint8_t *src,
					  uint16_t sport, const uint8_t *dst,
					  uint16_t dport)
{
	uint64_t d = dpflow_csum_delta_ne(ip + 8, src, 16) +
		     dpflow_csum_delta_ne(ip + 24, dst, 16);

	memcpy(ip + 8, src, 16);
	memcpy(ip + 24, dst, 16);
	dpflow_nat_ports_ne(l4, proto, sport, dport, d);
}

/* ---- encapsulation: outer headers -----------------------------------------
 */

/*
 * Make room for @hlen bytes of outer headers (Ethernet first) in front of
 * byte @in_off of the frame that @m describes, the inner packet being the
 * @in_len bytes from there (what lies before @in_off, and after the inner
 * packet, is dropped: e.g. the Ethernet header and VLAN tags of an IP
 * packet going into IP-in-IP, Ethernet padding). On success m->data_off
 * and m->data_len describe the new frame, whose first @hlen bytes are the
 * caller's to write, and 0 is returned. Otherwise the metadata is left as
 * it was and the reason returned: DPFLOW_DROP_EDIT_NO_HEADROOM (fewer than
 * @hlen bytes before byte @in_off in the slot),
 * DPFLOW_DROP_EDIT_TOO_LONG (the frame would pass 65535 bytes, or the
 * outer IP packet, @hlen - 14 + @in_len bytes, would pass @mtu; @mtu 0:
 * no limit).
 */
DPF_HD static inline unsigned dpflow_encap_room(struct dpflow_pkt_meta *m,
						uint32_t in_off,
						uint32_t in_len, uint32_t hlen,
						uint32_t mtu)
{
	if (DPFLOW_UNLIKELY(m->data_off + in_off < hlen))
		return DPFLOW_DROP_EDIT_NO_HEADROOM;
	if (DPFLOW_UNLIKELY((mtu && hlen - 14 + in_len > mtu) ||
			    hlen + in_len > 0xffff))
		return DPFLOW_DROP_EDIT_TOO_LONG;
	m->data_off = (uint16_t)(m->data_off + in_off - hlen);
	m->data_len = (uint16_t)(hlen + in_len);
	return DPFLOW_DROP_NONE;
}

/*
 * Copy @hlen bytes of outer headers from the template @hdr to @o. The
 * usual sizes (Ethernet with IPv4 or IPv6, with or without UDP) are
 * copies of a constant length, which compile to a few moves.
 */
DPF_HD static inline void dpflow_encap_copy(uint8_t *o, const uint8_t *hdr,
					    uint32_t hlen)
{
	switch (hlen) {
	case 14 + 20:
		memcpy(o, hdr, 14 + 20);
		break;
	case 14 + 20 + 8:
		memcpy(o, hdr, 14 + 20 + 8);
		break;
	case 14 + 40:
		memcpy(o, hdr, 14 + 40);
		break;
	case 14 + 40 + 8:
		memcpy(o, hdr, 14 + 40 + 8);
		break;
	default:
		memcpy(o, hdr, hlen);
		break;
	}
}

/*
 * The sum of a 20-byte outer IPv4 header template at @ip without the
 * fields dpflow_encap_ipv4_hdr() writes per packet (TOS, total length,
 * protocol) and the checksum: computed once, when the template is built.
 */
DPF_HD static inline uint32_t dpflow_encap_ipv4_sum(const uint8_t *ip)
{
	uint64_t s = dpflow_csum_add(0, ip, 20);

	s -= (uint64_t)ip[1] + dpflow_edit_rd16(ip + 2) + ip[9] +
	     dpflow_edit_rd16(ip + 10);
	return dpflow_csum_fold(s);
}

/*
 * Finish the outer IPv4 header at @ip copied from a template whose sum
 * @sum is dpflow_encap_ipv4_sum(): TOS @tos, total length @tot_len,
 * protocol @proto (4 IP-in-IP, 41 IPv6-in-IP, 17 UDP, 47 GRE) and the
 * header checksum.
 */
DPF_HD static inline void dpflow_encap_ipv4_hdr(uint8_t *ip, uint32_t sum,
						uint8_t tos, uint16_t tot_len,
						uint8_t proto)
{
	ip[1] = tos;
	dpflow_edit_wr16(ip + 2, tot_len);
	ip[9] = proto;
	dpflow_edit_wr16(
	    ip + 10, dpflow_csum_finish((uint64_t)sum + tos + tot_len + proto));
}

/*
 * Finish the outer IPv6 header at @ip copied from a template: traffic
 * class @tclass, flow label @flow_label (20 bits), payload length
 * @payload_len, next header @next (4, 41, 17, 47).
 */
DPF_HD static inline void dpflow_encap_ipv6_hdr(uint8_t *ip, uint8_t tclass,
						uint32_t flow_label,
						uint16_t payload_len,
						uint8_t next)
{
	ip[0] = (uint8_t)(0x60 | tclass >> 4);
	ip[1] = (uint8_t)((uint32_t)(tclass & 0x0f) << 4 |
			  (flow_label >> 16 & 0x0f));
	dpflow_edit_wr16(ip + 2, flow_label);
	dpflow_edit_wr16(ip + 4, payload_len);
	ip[6] = next;
}

/*
 * A UDP source port for a tunnel packet from the flow hash @hash, in
 * [@min, @min + @span), spread as Linux's udp_flow_src_port() does.
 */
DPF_HD static inline uint16_t
dpflow_encap_udp_sport(uint32_t hash, uint16_t min, uint16_t span)
{
	uint32_t x = hash ^ (hash << 16);

	return (uint16_t)(min + (uint32_t)(((uint64_t)x * span) >> 32));
}

/*
 * Finish the outer UDP header at @udp (destination port from the
 * template): source port @sport, length @len (header and payload). The
 * checksum is left as the template has it (0: none, as IPv4 tunnels send);
 * dpflow_encap_udp_csum() computes it.
 */
DPF_HD static inline void dpflow_encap_udp_hdr(uint8_t *udp, uint16_t sport,
					       uint16_t len)
{
	dpflow_edit_wr16(udp, sport);
	dpflow_edit_wr16(udp + 4, len);
}

/*
 * Compute the checksum of the outer UDP datagram at @udp, @len bytes,
 * behind the IP header @ip (IPv6 when @v6: mandatory there, RFC 8200 8.1),
 * over its whole payload.
 */
DPF_HD static inline void dpflow_encap_udp_csum(const uint8_t *ip, int v6,
						uint8_t *udp, uint32_t len)
{
	dpflow_l4_csum_set(udp, len, 17, dpflow_csum_pseudo(ip, v6, 17, len));
}

/* ---- encapsulation templates of the flow engine -------------------------- */

/* Most GENEVE option bytes an encapsulation template carries. */
#define DPFLOW_EDIT_GENEVE_OPT_MAX 64
/* Largest outer header: Ethernet, IPv6, UDP, GENEVE with options. */
#define DPFLOW_EDIT_ENCAP_HDR_MAX (14 + 40 + 8 + 8 + DPFLOW_EDIT_GENEVE_OPT_MAX)
/* Default UDP source port range of an encapsulation, Linux's default
 * ip_local_port_range (32768 60999). */
#define DPFLOW_EDIT_SPORT_MIN 32768
#define DPFLOW_EDIT_SPORT_MAX 60999
/* Marks a template built by dpflow_edit_encap_build(). */
#define DPFLOW_EDIT_ENCAP_MAGIC 0x64656e63u

/* Encapsulation flags (struct dpflow_edit_encap_params.flags). */
#define DPFLOW_EDIT_ENCAP_F_DF		   0x01 /* outer IPv4: don't fragment */
#define DPFLOW_EDIT_ENCAP_F_UDP_CSUM	   0x02 /* outer IPv4: UDP checksum */
#define DPFLOW_EDIT_ENCAP_F_GRE_KEY	   0x04 /* GRE: key field (= vni) */
#define DPFLOW_EDIT_ENCAP_F_GENEVE_CRIT	   0x08 /* GENEVE: C bit */
#define DPFLOW_EDIT_ENCAP_F_FLOWLABEL_HASH 0x10 /* outer IPv6 flow label */
#define DPFLOW_EDIT_ENCAP_F__ALL	   0x1f

/*
 * What an encapsulation prepends. Validated and turned into a template by
 * dpflow_edit_encap_build(); the data path only reads the template.
 */
struct dpflow_edit_encap_params {
	uint8_t type;	    /* DPFLOW_TUN_VXLAN, _GENEVE, _GRE or _IPIP */
	uint8_t ip_version; /* outer IP: 4 or 6 */
	uint8_t inner_eth;  /* the inner packet keeps its Ethernet header:
			       VXLAN 1, IP-in-IP 0, GENEVE/GRE either */
	uint8_t ttl;	    /* outer TTL / hop limit; 0 selects 64 */
	uint8_t tos;	    /* outer TOS / traffic class */
	uint8_t flags;	    /* DPFLOW_EDIT_ENCAP_F_* */
	uint8_t opt_len;    /* GENEVE option bytes (multiple of 4) */
	uint8_t eth_dst[6];
	uint8_t eth_src[6];
	uint8_t src[16]; /* outer addresses, network order; IPv4: 4 bytes */
	uint8_t dst[16];
	uint32_t vni;	     /* VXLAN/GENEVE VNI (24 bits), GRE key */
	uint32_t flow_label; /* outer IPv6 flow label (20 bits) */
	uint16_t udp_dport;  /* 0 selects 4789 (VXLAN) or 6081 (GENEVE) */
	uint16_t sport_min;  /* UDP source port range; 0 and 0 select */
	uint16_t sport_max;  /* DPFLOW_EDIT_SPORT_MIN..MAX */
	uint8_t opts[DPFLOW_EDIT_GENEVE_OPT_MAX]; /* GENEVE options, as sent */
};

/*
 * A built encapsulation: the outer headers as they will be sent, with the
 * per-packet fields (lengths, checksums, UDP source port, protocol of an
 * IP payload, hashed flow label) patched in by dpflow_encap_write(). Plain
 * bytes with no pointers: copy it with memcpy (into an action image, to
 * device memory).
 */
struct dpflow_edit_encap {
	uint32_t magic; /* DPFLOW_EDIT_ENCAP_MAGIC */
	uint8_t type;	/* enum dpflow_tun_type */
	uint8_t ip_version;
	uint8_t inner_eth;
	uint8_t flags;
	uint16_t hdr_len;    /* bytes of hdr */
	uint16_t l4_off;     /* outer UDP / GRE header in hdr (IPIP: hdr_len) */
	uint16_t sport_min;  /* UDP source port = sport_min + hash scaled to */
	uint16_t sport_span; /* sport_span */
	uint32_t ip_sum;     /* IPv4: dpflow_encap_ipv4_sum() of the header */
	uint8_t hdr[DPFLOW_EDIT_ENCAP_HDR_MAX + 2];
};

/*
 * Validate @p and build the template @t (overwritten; on error zeroed, so
 * that the data path rejects it). Control path, any thread. Returns 0 or
 * -EINVAL with @err naming the field ("type", "ip_version", "inner_eth",
 * "flags", "opt_len", "vni", "flow_label", "sport_min", "sport_max",
 * "udp_dport").
 */
int dpflow_edit_encap_build(struct dpflow_edit_encap *t,
			    const struct dpflow_edit_encap_params *p,
			    struct dpflow_error *err);

/*
 * Whether @t looks like a template dpflow_edit_encap_build() made (magic,
 * lengths in range): what the data path checks before trusting its
 * lengths.
 */
DPF_HD static inline int dpflow_encap_valid(const struct dpflow_edit_encap *t)
{
	return t->magic == DPFLOW_EDIT_ENCAP_MAGIC &&
	       t->hdr_len <= DPFLOW_EDIT_ENCAP_HDR_MAX &&
	       t->l4_off <= t->hdr_len && t->l4_off >= 14 + 20;
}

/*
 * Write the outer headers of template @t (dpflow_encap_valid()) at @o, the
 * t->hdr_len bytes right before an inner packet of @in_len bytes whose
 * protocol is @inner_et (0x6558 for an Ethernet frame, 0x0800 IPv4,
 * 0x86dd IPv6): outer lengths, the IPv4 header checksum, the protocol of
 * an IP-in-IP, GENEVE or GRE payload, the UDP source port from the flow
 * hash @hash (dpflow_encap_udp_sport() into the template's range) and the
 * hashed IPv6 flow label (DPFLOW_EDIT_ENCAP_F_FLOWLABEL_HASH). The UDP
 * checksum is 0 over IPv4 (unless DPFLOW_EDIT_ENCAP_F_UDP_CSUM) and
 * computed over IPv6, which reads the inner packet.
 */
DPF_HD static inline void dpflow_encap_write(const struct dpflow_edit_encap *t,
					     uint8_t *o, uint32_t in_len,
					     uint16_t inner_et, uint32_t hash)
{
	uint32_t len = t->hdr_len + in_len;
	uint8_t *ip = o + 14, *l4 = o + t->l4_off;
	uint8_t proto = inner_et == 0x0800 ? 4 : 41; /* IP-in-IP, IPv6 */

	dpflow_encap_copy(o, t->hdr, t->hdr_len);
	if (t->type != DPFLOW_TUN_IPIP)
		proto = t->ip_version == 4 ? ip[9] : ip[6];
	if (t->ip_version == 4) {
		dpflow_encap_ipv4_hdr(ip, t->ip_sum, ip[1],
				      (uint16_t)(len - 14), proto);
	} else {
		uint8_t tc = (uint8_t)((ip[0] & 0x0f) << 4 | ip[1] >> 4);
		uint32_t fl =
		    (uint32_t)(ip[1] & 0x0f) << 16 | dpflow_edit_rd16(ip + 2);

		if (t->flags & DPFLOW_EDIT_ENCAP_F_FLOWLABEL_HASH)
			fl = (hash << 16 | hash >> 16) & 0xfffff;
		dpflow_encap_ipv6_hdr(ip, tc, fl, (uint16_t)(len - 54), proto);
	}
	if (t->type == DPFLOW_TUN_VXLAN || t->type == DPFLOW_TUN_GENEVE) {
		uint32_t ulen = len - t->l4_off;

		dpflow_encap_udp_hdr(
		    l4,
		    dpflow_encap_udp_sport(hash, t->sport_min, t->sport_span),
		    (uint16_t)ulen);
		if (t->type == DPFLOW_TUN_GENEVE && !t->inner_eth)
			dpflow_edit_wr16(l4 + 10, inner_et);
		if (t->ip_version == 6 ||
		    (t->flags & DPFLOW_EDIT_ENCAP_F_UDP_CSUM))
			dpflow_encap_udp_csum(ip, t->ip_version == 6, l4, ulen);
	} else if (t->type == DPFLOW_TUN_GRE && !t->inner_eth) {
		dpflow_edit_wr16(l4 + 2, inner_et);
	}
}

/*
 * Decapsulation of an inner IP packet that has no Ethernet header of its
 * own (IP-in-IP, GRE or GENEVE carrying IP): the 12 MAC bytes of the outer
 * Ethernet header at @l2_off move to just before the inner IP header at
 * @in_l3_off (>= @l2_off + 14), followed by @ethertype (0x0800 or
 * 0x86dd). Returns the offset of the new frame's first byte
 * (@in_l3_off - 14); the bytes before it are the caller's to drop.
 */
DPF_HD static inline uint32_t dpflow_decap_l3(uint8_t *f, uint32_t l2_off,
					      uint32_t in_l3_off,
					      uint16_t ethertype)
{
	uint32_t start = in_l3_off - 14;
	uint8_t t[12];

	memcpy(t, f + l2_off, 12); /* the ranges may overlap */
	memcpy(f + start, t, 12);
	dpflow_edit_wr16(f + start + 12, ethertype);
	return start;
}

#ifdef __cplusplus
}
#endif

#endif /* DPFLOW_PKT_EDIT_H */
