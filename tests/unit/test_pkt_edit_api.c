/*
 * The public packet editing module (include/dpflow/pkt_edit.h), against
 * references written here from the RFCs and against scapy:
 *
 * 1. Checksum arithmetic: dpflow_csum_fold() against the textbook fold on
 *    every value below 2^26, the edges and random 64-bit sums;
 *    dpflow_csum_add() against a naive RFC 1071 sum of byte pairs over
 *    random buffers of every length and split points.
 * 2. Incremental updates (RFC 1624): 16-bit, 32-bit, word-range and
 *    odd-aligned byte-range edits of random data equal a full
 *    recomputation, with a quarter of the cases forced to a new checksum
 *    of 0x0000, and the non-canonical 0xffff; UDP's zero rule; the
 *    host-order forms give the bytes the big-endian ones give.
 * 3. Pseudo-header sums against the pseudo-header laid out in bytes
 *    (RFC 793, RFC 8200 8.1); whole IPv4 / L4 checksums set from scratch;
 *    dpflow_csum_l4_complete() on random frames with VLAN tags, options,
 *    garbage in the field, and the frames it must leave alone.
 * 4. NAT: every rewrite on random IPv4/IPv6 TCP/UDP/ICMP packets keeps
 *    every checksum valid (naive sum), changes only the bytes it names,
 *    keeps a UDP checksum of 0 at 0 and sends a computed 0 as 0xffff;
 *    and 400 cases built by scapy (tests/unit/pkt_edit_scapy.py: the
 *    packet before and after, checksums computed by scapy) give the same
 *    bytes.
 * 5. Encapsulation pieces: outer IPv4/IPv6/UDP headers from a template,
 *    the room check, the L3 decapsulation.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/pkt_edit.h"

/* ---- references --------------------------------------------------------- */

static uint64_t rng_state;

static uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static uint32_t below(uint32_t n)
{
	return (uint32_t)(rnd() % n);
}

static void fill(uint8_t *p, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		p[i] = (uint8_t)rnd();
}

static uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void wr16(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/* The textbook fold: add the high 16 bits to the low ones until none. */
static uint16_t fold_ref(uint64_t s)
{
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)s;
}

/* RFC 1071: the sum of @len bytes as big-endian pairs, odd last byte
 * padded with a zero. */
static uint64_t sum_ref(const uint8_t *p, uint32_t len)
{
	uint64_t s = 0;

	for (uint32_t i = 0; i + 1 < len; i += 2)
		s += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (len & 1)
		s += (uint32_t)p[len - 1] << 8;
	return s;
}

/* The checksum of @len bytes after @init (a pseudo-header's sum). */
static uint16_t csum_ref(const uint8_t *p, uint32_t len, uint64_t init)
{
	return (uint16_t)~fold_ref(init + sum_ref(p, len));
}

/* The pseudo-header laid out in bytes and summed. */
static uint64_t pseudo_ref(const uint8_t *src, const uint8_t *dst, int v6,
			   uint8_t proto, uint32_t len)
{
	uint8_t ph[40];

	memset(ph, 0, sizeof(ph));
	if (v6) {
		memcpy(ph, src, 16);
		memcpy(ph + 16, dst, 16);
		ph[32] = (uint8_t)(len >> 24);
		ph[33] = (uint8_t)(len >> 16);
		ph[34] = (uint8_t)(len >> 8);
		ph[35] = (uint8_t)len;
		ph[39] = proto;
		return sum_ref(ph, 40);
	}
	memcpy(ph, src, 4);
	memcpy(ph + 4, dst, 4);
	ph[9] = proto;
	ph[10] = (uint8_t)(len >> 8);
	ph[11] = (uint8_t)len;
	return sum_ref(ph, 12);
}

/* Valid data with its checksum field included sums to 0xffff (the field
 * may hold 0x0000 or, for UDP, 0xffff: both are -0 and +0 of the same
 * sum). */
static int sums_to_ffff(const uint8_t *p, uint32_t len, uint64_t init)
{
	return fold_ref(init + sum_ref(p, len)) == 0xffff;
}

/* ---- 1. checksum arithmetic --------------------------------------------- */

Test(pkt_edit_api, fold_matches_the_plain_fold)
{
	static const uint64_t edges[] = {
	    0,
	    1,
	    0xffff,
	    0x10000,
	    0x1fffe,
	    0xffffffff,
	    0x100000000ull,
	    0x1fffffffeull,
	    0xfffffffe00000001ull,
	    0xffffffff00000000ull,
	    0xffffffffffffffffull,
	};

	for (uint64_t s = 0; s < (1ull << 26); s++)
		if (dpflow_csum_fold(s) != fold_ref(s))
			cr_assert_fail("%#llx: %#x, want %#x",
				       (unsigned long long)s,
				       dpflow_csum_fold(s), fold_ref(s));
	for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
		cr_expect_eq(dpflow_csum_fold(edges[i]), fold_ref(edges[i]),
			     "%#llx", (unsigned long long)edges[i]);
	rng_state = 0x2545f4914f6cdd1dull;
	for (int i = 0; i < 4000000; i++) {
		uint64_t r = rnd(), s = r >> (r & 63);

		if (dpflow_csum_fold(s) != fold_ref(s))
			cr_assert_fail("%#llx: %#x, want %#x",
				       (unsigned long long)s,
				       dpflow_csum_fold(s), fold_ref(s));
		cr_assert_eq(dpflow_csum_finish(s), (uint16_t)~fold_ref(s));
	}
}

Test(pkt_edit_api, add_equals_rfc1071_at_every_length_and_split)
{
	uint8_t buf[1600];

	rng_state = 1;
	for (int it = 0; it < 20000; it++) {
		uint32_t len = it < 64 ? (uint32_t)it : below(sizeof(buf) + 1);
		uint32_t cut = 2 * below(len / 2 + 1); /* an even split */
		uint64_t init = rnd() >> below(64);

		fill(buf, len);
		if (it % 7 == 0)
			memset(buf, 0xff, len); /* the carries' worst case */
		cr_assert_eq(dpflow_csum_fold(dpflow_csum_add(init, buf, len)),
			     fold_ref(init + sum_ref(buf, len)), "len %u", len);
		cr_assert_eq(
		    dpflow_csum_fold(dpflow_csum_add(
			dpflow_csum_add(0, buf, cut), buf + cut, len - cut)),
		    fold_ref(sum_ref(buf, len)), "len %u cut %u", len, cut);
		cr_assert_eq(dpflow_csum_finish(dpflow_csum_add(0, buf, len)),
			     csum_ref(buf, len, 0));
	}
}

/* ---- 2. incremental updates --------------------------------------------- */

/*
 * Random data of @n bytes (even) with one non-zero word (as every header
 * has: all-zero data is the one case where +0 and -0 cannot be told apart
 * incrementally), an edit of @w bytes at @at, half the time chosen so that
 * the new checksum is 0x0000. Checks each incremental form against the
 * full recomputation. Returns whether the new checksum was 0.
 */
static int one_edit(uint32_t n, uint32_t at, uint32_t w)
{
	uint8_t d[64], old[16], nw[16];
	uint16_t c0, c1;
	uint64_t delta;

	fill(d, n);
	d[(at + w + 1) % n & ~1u] |= 0x40;
	if ((at + w + 1) % n / 2 * 2 >= at && (at + w + 1) % n / 2 * 2 < at + w)
		d[0] |=
		    0x40; /* the marked word is being edited: mark another */
	c0 = csum_ref(d, n, 0);
	memcpy(old, d + at, w);
	fill(nw, w);
	memcpy(d + at, nw, w);
	if (below(2) && w >= 2) {
		/* choose the edit's first aligned word so that the new sum
		 * folds to 0xffff (checksum 0x0000) */
		uint32_t wa = (at + 1) & ~1u;
		uint64_t rest;

		if (wa + 2 <= at + w) {
			wr16(d + wa, 0);
			rest = sum_ref(d, n);
			wr16(d + wa, (uint16_t)~fold_ref(rest));
			memcpy(nw, d + at, w);
		}
	}
	c1 = csum_ref(d, n, 0);
	delta = dpflow_csum_delta_bytes(old, nw, w, at & 1);
	cr_assert_eq(dpflow_csum_adjust(c0, delta), c1,
		     "bytes [%u, +%u) of %u: 0x%04x -> 0x%04x, full 0x%04x", at,
		     w, n, c0, dpflow_csum_adjust(c0, delta), c1);
	if (!(at & 1) && !(w & 1)) {
		delta = dpflow_csum_delta(old, nw, w);
		cr_assert_eq(dpflow_csum_adjust(c0, delta), c1,
			     "words [%u, +%u)", at, w);
	}
	if (!(at & 1) && w == 2)
		cr_assert_eq(dpflow_csum_update16(c0, rd16(old), rd16(nw)), c1);
	if (!(at & 1) && w == 4)
		cr_assert_eq(dpflow_csum_update32(
				 c0, (uint32_t)rd16(old) << 16 | rd16(old + 2),
				 (uint32_t)rd16(nw) << 16 | rd16(nw + 2)),
			     c1);
	return c1 == 0;
}

Test(pkt_edit_api, incremental_updates_equal_full_recomputation)
{
	unsigned zero = 0, cases = 0;

	rng_state = 42;
	for (int it = 0; it < 600000; it++) {
		uint32_t n = 2 * (4 + below(29)); /* 8..64 bytes */
		uint32_t w = it % 3 == 0 ? 2 : it % 3 == 1 ? 4 : 1 + below(16);
		uint32_t at;

		if (w > n - 2)
			w = n - 2;
		at = below(n - w + 1);
		if (it % 3 != 2)
			at &= ~1u; /* word edits sit on word boundaries */
		zero += (unsigned)one_edit(n, at, w);
		cases++;
	}
	cr_expect_gt(zero, cases / 8, "only %u of %u edits gave 0x0000", zero,
		     cases);
	/* a non-canonical 0xffff with no net change: a full recomputation
	 * of non-zero data gives 0x0000, never 0xffff */
	cr_expect_eq(dpflow_csum_adjust(0xffff, 0), 0x0000);
	cr_expect_eq(dpflow_csum_adjust(0xffff, 0xffff), 0x0000);
	cr_expect_eq(dpflow_csum_adjust(0x0000, 0), 0x0000);
	cr_expect_eq(dpflow_csum_update16(0xffff, 0x1234, 0x1234), 0x0000);
}

Test(pkt_edit_api, apply_keeps_udp_zero_and_never_writes_udp_zero)
{
	uint8_t d[32], f[2];
	unsigned forced = 0;

	/* a UDP checksum of 0 means none: it stays 0 */
	wr16(f, 0);
	dpflow_csum_apply(f, dpflow_csum_delta16(0x1234, 0x5678), 1);
	cr_assert_eq(rd16(f), 0);
	/* not UDP: a field of 0 is a checksum like another */
	dpflow_csum_apply(f, dpflow_csum_delta16(0x1234, 0x5678), 0);
	cr_assert_eq(rd16(f), dpflow_csum_update16(0, 0x1234, 0x5678));

	rng_state = 7;
	for (int it = 0; it < 100000; it++) {
		uint16_t c0, old, nw, want;

		fill(d, sizeof(d));
		d[0] |= 0x40;
		c0 = csum_ref(d, sizeof(d), 0);
		if (c0 == 0)
			continue;
		old = rd16(d + 10);
		if (it % 2) {
			/* the new checksum computes to 0 */
			wr16(d + 10, 0);
			nw = (uint16_t)~fold_ref(sum_ref(d, sizeof(d)));
		} else {
			nw = (uint16_t)rnd();
		}
		wr16(d + 10, nw);
		want = csum_ref(d, sizeof(d), 0);
		wr16(f, c0);
		dpflow_csum_apply(f, dpflow_csum_delta16(old, nw), 1);
		cr_assert_eq(rd16(f), want ? want : 0xffff, "it %d", it);
		forced += want == 0;
		wr16(f, c0);
		dpflow_csum_apply(f, dpflow_csum_delta16(old, nw), 0);
		cr_assert_eq(rd16(f), want, "it %d", it);
	}
	cr_expect_gt(forced, 40000);
}

Test(pkt_edit_api, host_order_updates_give_the_same_bytes)
{
	uint8_t old[32], nw[32], a[2], b[2];

	rng_state = 5;
	for (int it = 0; it < 400000; it++) {
		uint32_t len = 4 * (1 + below(8));
		uint16_t hc = it % 16 == 0   ? 0xffff
			      : it % 16 == 1 ? 0
					     : (uint16_t)rnd();
		int udp = it & 1;

		fill(old, len);
		memcpy(nw, old, len);
		if (it % 8 != 2) /* sometimes no net change */
			fill(nw, len);
		wr16(a, hc);
		memcpy(b, a, 2);
		dpflow_csum_apply(a, dpflow_csum_delta(old, nw, len), udp);
		dpflow_csum_apply_ne(b, dpflow_csum_delta_ne(old, nw, len),
				     udp);
		cr_assert_arr_eq(a, b, 2,
				 "it %d: hc 0x%04x udp %d: 0x%04x, host order "
				 "0x%04x",
				 it, hc, udp, rd16(a), rd16(b));
	}
}

/* ---- 3. pseudo-headers and whole checksums ------------------------------ */

Test(pkt_edit_api, pseudo_headers_match_their_bytes)
{
	uint8_t ip[40];

	rng_state = 3;
	for (int it = 0; it < 100000; it++) {
		uint8_t proto = (uint8_t)rnd();
		uint32_t len4 = below(65536), len6 = (uint32_t)rnd();

		fill(ip, sizeof(ip));
		cr_assert_eq(dpflow_csum_fold(dpflow_csum_pseudo_ipv4(
				 ip, ip + 4, proto, len4)),
			     fold_ref(pseudo_ref(ip, ip + 4, 0, proto, len4)));
		cr_assert_eq(dpflow_csum_fold(dpflow_csum_pseudo_ipv6(
				 ip, ip + 16, proto, len6)),
			     fold_ref(pseudo_ref(ip, ip + 16, 1, proto, len6)));
		cr_assert_eq(
		    dpflow_csum_fold(dpflow_csum_pseudo(ip, 0, proto, len4)),
		    fold_ref(pseudo_ref(ip + 12, ip + 16, 0, proto, len4)));
		cr_assert_eq(
		    dpflow_csum_fold(dpflow_csum_pseudo(ip, 1, proto, len6)),
		    fold_ref(pseudo_ref(ip + 8, ip + 24, 1, proto, len6)));
	}
	cr_expect_eq(dpflow_l4_csum_off(6), 16);
	cr_expect_eq(dpflow_l4_csum_off(17), 6);
	cr_expect_eq(dpflow_l4_csum_off(1), 2);
	cr_expect_eq(dpflow_l4_csum_off(58), 2);
	cr_expect_eq(dpflow_l4_csum_off(132), 0);
	cr_expect_eq(dpflow_l4_pseudo_csum_off(1), 0);
	cr_expect_eq(dpflow_l4_pseudo_csum_off(58), 2);
}

/* A random IP packet at @ip: header (IPv4 with @opt option words, or
 * IPv6), L4 of @proto with @l4_len bytes, valid checksums (computed by
 * the references). Returns the IP header length. */
static uint32_t random_packet(uint8_t *ip, int v6, uint8_t proto,
			      uint32_t l4_len, uint32_t opt)
{
	uint32_t hl = v6 ? 40 : 20 + 4 * opt, off;
	uint8_t *l4 = ip + hl;

	fill(ip, hl + l4_len);
	if (v6) {
		ip[0] = (uint8_t)(0x60 | (ip[0] & 0x0f));
		wr16(ip + 4, l4_len);
		ip[6] = proto;
	} else {
		ip[0] = (uint8_t)(0x40 | (hl / 4));
		wr16(ip + 2, hl + l4_len);
		ip[9] = proto;
		wr16(ip + 10, 0);
		wr16(ip + 10, csum_ref(ip, hl, 0));
	}
	if (proto == 17)
		wr16(l4 + 4, l4_len);
	off = dpflow_l4_csum_off(proto);
	if (off) {
		uint64_t ps = proto == 1 ? 0
					 : pseudo_ref(ip + (v6 ? 8 : 12),
						      ip + (v6 ? 24 : 16), v6,
						      proto, l4_len);
		uint16_t c;

		wr16(l4 + off, 0);
		c = csum_ref(l4, l4_len, ps);
		if (proto == 17 && c == 0)
			c = 0xffff;
		wr16(l4 + off, c);
	}
	return hl;
}

/* Whether every checksum of the packet at @ip is valid (a UDP 0: none). */
static int packet_ok(const uint8_t *ip, int v6, uint8_t proto, uint32_t hl,
		     uint32_t l4_len)
{
	const uint8_t *l4 = ip + hl;
	uint32_t off = dpflow_l4_csum_off(proto);
	uint64_t ps;

	if (!v6 && !sums_to_ffff(ip, hl, 0))
		return 0;
	if (!off)
		return 1;
	if (proto == 17 && rd16(l4 + 6) == 0)
		return 1;
	if (proto != 17 && rd16(l4 + off) == 0xffff)
		return 0; /* never what a computation gives */
	ps = proto == 1 ? 0
			: pseudo_ref(ip + (v6 ? 8 : 12), ip + (v6 ? 24 : 16),
				     v6, proto, l4_len);
	return sums_to_ffff(l4, l4_len, ps);
}

/*
 * Make the valid TCP/UDP segment at @l4 one whose checksum computes to 0:
 * add its checksum to a covered word (TCP: the urgent pointer, UDP: the
 * first payload word), so that the sum becomes 0xffff. The field then
 * holds 0x0000 (TCP) or 0xffff (UDP, RFC 768).
 */
static void force_zero_csum(uint8_t *l4, uint8_t proto, int v6, uint32_t l4_len,
			    const uint8_t *ip)
{
	uint32_t co = dpflow_l4_csum_off(proto), wo = proto == 6 ? 18 : 8;
	uint32_t w = (uint32_t)rd16(l4 + wo) + rd16(l4 + co);

	w = (w & 0xffff) + (w >> 16);
	wr16(l4 + wo, w);
	wr16(l4 + co, proto == 17 ? 0xffff : 0);
	cr_assert(
	    sums_to_ffff(l4, l4_len,
			 pseudo_ref(ip + (v6 ? 8 : 12), ip + (v6 ? 24 : 16), v6,
				    proto, l4_len)));
}

Test(pkt_edit_api, ipv4_and_l4_checksums_from_scratch)
{
	static const uint8_t protos[] = {6, 17, 1, 58};
	uint8_t pkt[1600], ref[1600];

	rng_state = 11;
	for (int it = 0; it < 40000; it++) {
		int v6 = it & 1;
		uint8_t proto = protos[below(4)];
		uint32_t l4_len = 20 + below(1400), hl;
		uint64_t ps;

		if (proto == 1 && v6)
			proto = 58;
		if (proto == 58 && !v6)
			proto = 1;
		hl = random_packet(ref, v6, proto, l4_len, below(11));
		if (it % 4 == 0 && (proto == 6 || proto == 17))
			force_zero_csum(ref + hl, proto, v6, l4_len, ref);
		memcpy(pkt, ref, hl + l4_len);
		if (!v6)
			fill(pkt + 10, 2); /* garbage in the fields */
		fill(pkt + hl + dpflow_l4_csum_off(proto), 2);
		if (!v6)
			dpflow_ipv4_csum_set(pkt, hl);
		ps =
		    proto == 1 ? 0 : dpflow_csum_pseudo(pkt, v6, proto, l4_len);
		cr_assert_eq(dpflow_l4_csum_set(pkt + hl, l4_len, proto, ps),
			     0);
		cr_assert_arr_eq(pkt, ref, hl + l4_len, "it %d", it);
	}
	cr_assert_eq(dpflow_l4_csum_set(pkt, 100, 132, 0), -1);
	cr_assert_eq(dpflow_l4_csum_set(pkt, 17, 6, 0), -1);
}

/*
 * A random Ethernet frame: 0..2 VLAN tags, IPv4 (options) or IPv6, TCP
 * or UDP with a valid checksum in @ref; @f the same with garbage in the
 * checksum field. Returns the frame length; *@l4 the L4 offset.
 */
static uint32_t random_frame(uint8_t *f, uint8_t *ref, int v6, uint8_t proto,
			     unsigned tags, uint32_t *l4)
{
	uint32_t off = 12, l4_len = (proto == 6 ? 20 : 8) + below(300), hl;

	fill(f, 12);
	for (unsigned t = 0; t < tags; t++) {
		wr16(f + off, t == 0 && tags == 2 ? 0x88a8 : 0x8100);
		fill(f + off + 2, 2);
		off += 4;
	}
	wr16(f + off, v6 ? 0x86dd : 0x0800);
	off += 2;
	hl = random_packet(f + off, v6, proto, l4_len, below(3));
	if (!v6) {
		f[off + 6] &= 0x40; /* DF at most: not a fragment */
		f[off + 7] = 0;
		wr16(f + off + 10, 0);
		wr16(f + off + 10, csum_ref(f + off, hl, 0));
	}
	*l4 = off + hl;
	memcpy(ref, f, off + hl + l4_len);
	fill(f + *l4 + dpflow_l4_csum_off(proto), 2);
	return off + hl + l4_len;
}

Test(pkt_edit_api, l4_complete_as_a_nic_does)
{
	uint8_t f[600], ref[600], before[600];

	rng_state = 13;
	for (int it = 0; it < 30000; it++) {
		int v6 = it & 1;
		uint8_t proto = it & 2 ? 17 : 6;
		uint32_t l4,
		    len = random_frame(f, ref, v6, proto, below(3), &l4);
		uint32_t pad = below(20);

		fill(f + len, pad); /* Ethernet padding is not summed */
		cr_assert_eq(dpflow_csum_l4_complete(f, len + pad), 1, "it %d",
			     it);
		cr_assert_arr_eq(f, ref, len, "it %d", it);
	}
	/* left alone: fragments, other protocols, three tags, short frames,
	 * ARP */
	for (int it = 0; it < 3000; it++) {
		int v6 = it & 1, why = it % 5;
		uint32_t l4, len = random_frame(f, ref, v6, 6, below(3), &l4);

		switch (why) {
		case 0: { /* a later fragment (IPv4) or extension header */
			uint32_t o = 12;

			while (rd16(f + o) == 0x8100 || rd16(f + o) == 0x88a8)
				o += 4;
			o += 2;
			if (v6)
				f[o + 6] = 44; /* fragment header */
			else
				f[o + 7] = 1; /* offset 8 */
			break;
		}
		case 1: { /* another protocol */
			uint32_t o = 12;

			while (rd16(f + o) == 0x8100 || rd16(f + o) == 0x88a8)
				o += 4;
			o += 2;
			f[o + (v6 ? 6 : 9)] = 132;
			break;
		}
		case 2: /* cut short */
			len = l4 + 4;
			break;
		case 3: /* ARP */
			wr16(f + 12, 0x0806);
			break;
		default: /* three tags: beyond what the NIC parses */
			memmove(f + 16, f + 12, len - 12);
			wr16(f + 12, 0x8100);
			len += 4;
			wr16(f + 16, 0x8100);
			wr16(f + 20, 0x8100);
			break;
		}
		memcpy(before, f, len);
		cr_assert_eq(dpflow_csum_l4_complete(f, len), 0, "case %d",
			     why);
		cr_assert_arr_eq(f, before, len, "case %d", why);
	}
}

/* ---- 4. NAT ------------------------------------------------------------- */

/* Rewrite and check one random packet; @mode 0 full NAT, 1 single calls. */
static void nat_case(int v6, uint8_t proto, int mode, int zero_udp)
{
	uint8_t pkt[600], want[600], src[16], dst[16];
	uint32_t l4_len = (proto == 6 ? 20 : 8) + below(200),
		 alen = v6 ? 16 : 4;
	uint32_t hl = random_packet(pkt, v6, proto, l4_len, below(4));
	uint8_t *l4 = pkt + hl;
	uint16_t sport = (uint16_t)rnd(), dport = (uint16_t)rnd();
	uint32_t sa = v6 ? 8 : 12, da = v6 ? 24 : 16, co;

	if (zero_udp)
		wr16(l4 + 6, 0);
	fill(src, alen);
	fill(dst, alen);
	/* what the rewrite must make: the new fields, the checksums from
	 * scratch (the references); a UDP 0 stays 0 */
	memcpy(want, pkt, hl + l4_len);
	memcpy(want + sa, src, alen);
	memcpy(want + da, dst, alen);
	if (proto == 6 || proto == 17) {
		wr16(want + hl, sport);
		wr16(want + hl + 2, dport);
	}
	if (!v6) {
		wr16(want + 10, 0);
		wr16(want + 10, csum_ref(want, hl, 0));
	}
	co = dpflow_l4_pseudo_csum_off(proto);
	if (co && !(proto == 17 && zero_udp)) {
		uint16_t c;

		wr16(want + hl + co, 0);
		c = csum_ref(
		    want + hl, l4_len,
		    pseudo_ref(want + sa, want + da, v6, proto, l4_len));
		wr16(want + hl + co, proto == 17 && c == 0 ? 0xffff : c);
	}

	if (mode == 0 && v6)
		dpflow_nat_ipv6(pkt, l4, proto, src, sport, dst, dport);
	else if (mode == 0)
		dpflow_nat_ipv4(pkt, l4, proto, src, sport, dst, dport);
	else {
		if (v6) {
			dpflow_nat_ipv6_addr(pkt, l4, proto, DPFLOW_EDIT_DST,
					     dst);
			dpflow_nat_ipv6_addr(pkt, l4, proto, DPFLOW_EDIT_SRC,
					     src);
		} else {
			dpflow_nat_ipv4_addr(pkt, l4, proto, DPFLOW_EDIT_SRC,
					     src);
			dpflow_nat_ipv4_addr(pkt, l4, proto, DPFLOW_EDIT_DST,
					     dst);
		}
		cr_assert_eq(
		    dpflow_nat_l4_port(l4, proto, DPFLOW_EDIT_DST, dport),
		    proto == 6 || proto == 17 ? 0 : -1);
		dpflow_nat_l4_port(l4, proto, DPFLOW_EDIT_SRC, sport);
	}
	cr_assert_arr_eq(pkt, want, hl + l4_len,
			 "v6 %d proto %u mode %d zero_udp %d", v6, proto, mode,
			 zero_udp);
	cr_assert(packet_ok(pkt, v6, proto, hl, l4_len));
}

Test(pkt_edit_api, nat_rewrites_equal_full_recomputation)
{
	static const uint8_t protos[] = {6, 17, 58, 1};

	rng_state = 17;
	for (int it = 0; it < 200000; it++) {
		int v6 = it & 1, mode = (it >> 1) & 1;
		uint8_t proto = protos[below(4)];

		if (proto == 58 && !v6)
			proto = 1;
		if (proto == 1 && v6)
			proto = 58;
		nat_case(v6, proto, mode, proto == 17 && it % 5 == 0);
	}
}

Test(pkt_edit_api, nat_of_a_udp_packet_whose_checksum_becomes_zero)
{
	uint8_t pkt[64], src[16], dst[16];
	unsigned hit = 0;

	rng_state = 19;
	for (int it = 0; it < 20000; it++) {
		int v6 = it & 1;
		uint32_t hl = random_packet(pkt, v6, 17, 24, 0),
			 alen = v6 ? 16 : 4;
		uint8_t *l4 = pkt + hl, after[64];
		uint64_t rest;

		fill(src, alen);
		fill(dst, alen);
		/* a payload word chosen so that the new sum folds to 0xffff:
		 * rewrite a copy, then fix the word in the original */
		memcpy(after, pkt, hl + 24);
		memcpy(after + (v6 ? 8 : 12), src, alen);
		memcpy(after + (v6 ? 24 : 16), dst, alen);
		wr16(after + hl + 6, 0);
		wr16(after + hl + 8, 0);
		rest = sum_ref(after + hl, 24) +
		       pseudo_ref(after + (v6 ? 8 : 12), after + (v6 ? 24 : 16),
				  v6, 17, 24);
		wr16(l4 + 8, (uint16_t)~fold_ref(rest));
		wr16(l4 + 6, 0);
		{
			uint16_t c = csum_ref(l4, 24,
					      pseudo_ref(pkt + (v6 ? 8 : 12),
							 pkt + (v6 ? 24 : 16),
							 v6, 17, 24));

			wr16(l4 + 6, c ? c : 0xffff);
		}
		if (v6)
			dpflow_nat_ipv6(pkt, l4, 17, src, rd16(l4), dst,
					rd16(l4 + 2));
		else
			dpflow_nat_ipv4(pkt, l4, 17, src, rd16(l4), dst,
					rd16(l4 + 2));
		/* the computed checksum is 0: UDP sends 0xffff */
		cr_assert_eq(rd16(l4 + 6), 0xffff, "it %d", it);
		cr_assert(packet_ok(pkt, v6, 17, hl, 24));
		hit++;
	}
	cr_expect_eq(hit, 20000);
}

Test(pkt_edit_api, icmp_echo_id)
{
	uint8_t pkt[200];

	rng_state = 23;
	for (int it = 0; it < 20000; it++) {
		int v6 = it & 1;
		uint8_t proto = v6 ? 58 : 1;
		uint32_t hl = random_packet(pkt, v6, proto, 8 + below(100), 0);
		uint32_t l4_len = v6 ? rd16(pkt + 4) : rd16(pkt + 2) - hl;
		uint16_t id = (uint16_t)rnd();

		dpflow_nat_icmp_id(pkt + hl, id);
		cr_assert_eq(rd16(pkt + hl + 4), id);
		cr_assert(packet_ok(pkt, v6, proto, hl, l4_len), "it %d", it);
	}
}

static uint32_t unhex(const char *s, uint8_t *out, uint32_t cap)
{
	uint32_t n = 0;

	while (s[0] && s[1] && n < cap) {
		unsigned v;

		cr_assert_eq(sscanf(s, "%2x", &v), 1);
		out[n++] = (uint8_t)v;
		s += 2;
	}
	return n;
}

Test(pkt_edit_api, nat_matches_scapy)
{
	static char line[8192];
	char in_hex[2048], src_hex[64], dst_hex[64], out_hex[2048];
	uint8_t in[1024], out[1024], src[16], dst[16];
	unsigned n = 0, modes[3] = {0, 0, 0};
	/* the script sits beside this file: DPFLOW_TEST_DATA less "/data" */
	const char *data = DPFLOW_TEST_DATA;
	int dir_len = (int)strlen(data) - 5;
	char cmd[4096];
	FILE *p;

	cr_assert(dir_len > 0 && !strcmp(data + dir_len, "/data"));
	snprintf(cmd, sizeof(cmd),
		 "/usr/bin/python3 %.*s/pkt_edit_scapy.py 400", dir_len, data);
	p = popen(cmd, "r");
	cr_assert_not_null(p);
	while (fgets(line, sizeof(line), p)) {
		int mode, v6, proto;
		unsigned sport, dport;
		uint32_t len, olen, hl;
		uint8_t *l4;

		cr_assert_eq(sscanf(line,
				    "%d %d %d %2047s %63s %u %63s %u %2047s",
				    &mode, &v6, &proto, in_hex, src_hex, &sport,
				    dst_hex, &dport, out_hex),
			     9, "line %u: %s", n, line);
		len = unhex(in_hex, in, sizeof(in));
		olen = unhex(out_hex, out, sizeof(out));
		unhex(src_hex, src, sizeof(src));
		unhex(dst_hex, dst, sizeof(dst));
		cr_assert_eq(len, olen);
		hl = v6 ? 40 : (in[0] & 15u) * 4;
		l4 = in + hl;
		if (mode == 0 && v6)
			dpflow_nat_ipv6(in, l4, (uint8_t)proto, src,
					(uint16_t)sport, dst, (uint16_t)dport);
		else if (mode == 0)
			dpflow_nat_ipv4(in, l4, (uint8_t)proto, src,
					(uint16_t)sport, dst, (uint16_t)dport);
		else {
			unsigned dir =
			    mode == 1 ? DPFLOW_EDIT_SRC : DPFLOW_EDIT_DST;

			if (v6)
				dpflow_nat_ipv6_addr(in, l4, (uint8_t)proto,
						     dir,
						     mode == 1 ? src : dst);
			else
				dpflow_nat_ipv4_addr(in, l4, (uint8_t)proto,
						     dir,
						     mode == 1 ? src : dst);
			cr_assert_eq(dpflow_nat_l4_port(
					 l4, (uint8_t)proto, dir,
					 (uint16_t)(mode == 1 ? sport : dport)),
				     0);
		}
		cr_assert_arr_eq(in, out, len, "case %u (mode %d, IPv%d, %s)",
				 n, mode, v6 ? 6 : 4,
				 proto == 6 ? "TCP" : "UDP");
		modes[mode]++;
		n++;
	}
	cr_assert_eq(pclose(p), 0, "pkt_edit_scapy.py failed");
	cr_assert_eq(n, 400);
	cr_assert(modes[0] && modes[1] && modes[2]);
}

/* ---- 5. encapsulation pieces -------------------------------------------- */

Test(pkt_edit_api, outer_headers_from_templates)
{
	uint8_t t[20], ip[20], ip6[48], udp[300];

	rng_state = 29;
	for (int it = 0; it < 50000; it++) {
		uint8_t tos = (uint8_t)rnd(), proto = (uint8_t)rnd();
		uint16_t tot = (uint16_t)(20 + below(65516));
		uint32_t sum;

		fill(t, 20);
		t[0] = 0x45;
		sum = dpflow_encap_ipv4_sum(t); /* whatever the fields held */
		memcpy(ip, t, 20);
		dpflow_encap_ipv4_hdr(ip, sum, tos, tot, proto);
		cr_assert_eq(ip[1], tos);
		cr_assert_eq(rd16(ip + 2), tot);
		cr_assert_eq(ip[9], proto);
		cr_assert(sums_to_ffff(ip, 20, 0), "it %d", it);
		cr_assert_arr_eq(ip + 4, t + 4, 5);
		cr_assert_arr_eq(ip + 12, t + 12, 8);
	}
	for (int it = 0; it < 10000; it++) {
		uint8_t tc = (uint8_t)rnd(), nh = (uint8_t)rnd();
		uint32_t fl = (uint32_t)rnd() & 0xfffff;
		uint16_t plen = (uint16_t)rnd();

		fill(ip6, 40);
		dpflow_encap_ipv6_hdr(ip6, tc, fl, plen, nh);
		cr_assert_eq(ip6[0] >> 4, 6);
		cr_assert_eq((ip6[0] & 0x0f) << 4 | ip6[1] >> 4, tc);
		cr_assert_eq((uint32_t)(ip6[1] & 0x0f) << 16 | rd16(ip6 + 2),
			     fl);
		cr_assert_eq(rd16(ip6 + 4), plen);
		cr_assert_eq(ip6[6], nh);
	}
	for (int it = 0; it < 10000; it++) {
		int v6 = it & 1;
		uint32_t len = 8 + below(290);
		uint16_t sport = (uint16_t)rnd();
		uint64_t ps;

		fill(ip6, 40);
		fill(udp, len);
		dpflow_encap_udp_hdr(udp, sport, (uint16_t)len);
		dpflow_encap_udp_csum(ip6, v6, udp, len);
		cr_assert_eq(rd16(udp), sport);
		cr_assert_eq(rd16(udp + 4), len);
		cr_assert_neq(rd16(udp + 6), 0);
		ps = pseudo_ref(ip6 + (v6 ? 8 : 12), ip6 + (v6 ? 24 : 16), v6,
				17, len);
		cr_assert(sums_to_ffff(udp, len, ps), "it %d", it);
	}
	/* the source port range, as Linux's udp_flow_src_port() */
	for (int it = 0; it < 100000; it++) {
		uint32_t h = (uint32_t)rnd();
		uint16_t p = dpflow_encap_udp_sport(h, 32768, 60999 - 32768);

		cr_assert(p >= 32768 && p < 60999);
	}
}

Test(pkt_edit_api, encap_room_and_decap)
{
	struct dpflow_pkt_meta m;
	uint8_t f[200];

	memset(&m, 0, sizeof(m));
	m.data_off = 64;
	m.data_len = 100;
	/* IP at 14 of the frame: 64 + 14 bytes before it */
	cr_assert_eq(dpflow_encap_room(&m, 14, 86, 79, 0),
		     DPFLOW_DROP_EDIT_NO_HEADROOM);
	cr_assert_eq(dpflow_encap_room(&m, 14, 86, 34, 100),
		     DPFLOW_DROP_EDIT_TOO_LONG); /* 20 + 86 > 100 */
	cr_assert_eq(dpflow_encap_room(&m, 14, 0xffff - 33, 34, 0),
		     DPFLOW_DROP_EDIT_TOO_LONG);
	cr_assert_eq(m.data_off, 64);
	cr_assert_eq(m.data_len, 100);
	cr_assert_eq(dpflow_encap_room(&m, 14, 86, 34, 106), DPFLOW_DROP_NONE);
	cr_assert_eq(m.data_off, 64 + 14 - 34);
	cr_assert_eq(m.data_len, 34 + 86);
	m.data_off = 64;
	cr_assert_eq(dpflow_encap_room(&m, 14, 86, 78, 0), DPFLOW_DROP_NONE);
	cr_assert_eq(m.data_off, 0);

	/* IP-in-IP decapsulation: outer MACs in front of the inner IP */
	for (uint32_t i = 0; i < sizeof(f); i++)
		f[i] = (uint8_t)i;
	cr_assert_eq(dpflow_decap_l3(f, 4, 4 + 14 + 20, 0x86dd), 4 + 20);
	for (uint32_t i = 0; i < 12; i++)
		cr_assert_eq(f[24 + i], 4 + i);
	cr_assert_eq(rd16(f + 36), 0x86dd);
	cr_assert_eq(f[38], 38);
	/* the ranges overlap when the outer header is short */
	for (uint32_t i = 0; i < sizeof(f); i++)
		f[i] = (uint8_t)i;
	cr_assert_eq(dpflow_decap_l3(f, 0, 20, 0x0800), 6);
	for (uint32_t i = 0; i < 12; i++)
		cr_assert_eq(f[6 + i], i);
	cr_assert_eq(rd16(f + 18), 0x0800);
}
