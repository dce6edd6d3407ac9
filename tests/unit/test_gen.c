/*
 * Unit tests of the traffic generator (gen.h): the builder against
 * hand-checked bytes, every checksum against the test's own routines, and
 * the generator's determinism, profile parsing, counts, sizes, flows,
 * IMIX ratio, "all" coverage and malformed cycle.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/dpflow.h"

#define BUF 16384

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/* Compare a built frame with the expected bytes, naming the first diff. */
static void expect_bytes(const uint8_t *got, uint32_t len, const uint8_t *want,
			 size_t wlen)
{
	cr_assert_eq(len, wlen, "length %u, expected %zu", len, wlen);
	for (size_t i = 0; i < wlen; i++)
		cr_assert_eq(got[i], want[i],
			     "byte %zu: 0x%02x, expected 0x%02x", i, got[i],
			     want[i]);
}

static void set_addr4(uint8_t *a, uint8_t x, uint8_t y, uint8_t z, uint8_t w)
{
	a[0] = x;
	a[1] = y;
	a[2] = z;
	a[3] = w;
}

static const uint8_t mac_dst[6] = {0x00, 0x11, 0x22, 0x33, 0x44, 0x55};
static const uint8_t mac_src[6] = {0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb};

static void spec_eth(struct dpflow_gen_spec *s)
{
	memset(s, 0, sizeof(*s));
	s->has_eth = true;
	memcpy(s->dst_mac, mac_dst, 6);
	memcpy(s->src_mac, mac_src, 6);
	memset(s->outer.ipv6_ext, 0xff, sizeof(s->outer.ipv6_ext));
	memset(s->inner.ipv6_ext, 0xff, sizeof(s->inner.ipv6_ext));
}

/* --- the builder, byte for byte --------------------------------------- */

Test(gen_build, ipv4_tcp_textbook)
{
	/* 192.168.1.1:12345 -> 192.168.1.2:80 SYN, seq 1, window 65535. */
	static const uint8_t want[] = {
	    /* Ethernet */
	    0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa,
	    0xbb, 0x08, 0x00,
	    /* IPv4: len 40, id 0x1234, ttl 64, TCP, checksum 0xe548 */
	    0x45, 0x00, 0x00, 0x28, 0x12, 0x34, 0x00, 0x00, 0x40, 0x06, 0xe5,
	    0x48, 0xc0, 0xa8, 0x01, 0x01, 0xc0, 0xa8, 0x01, 0x02,
	    /* TCP: doff 5, SYN, checksum 0xfc04 */
	    0x30, 0x39, 0x00, 0x50, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
	    0x00, 0x50, 0x02, 0xff, 0xff, 0xfc, 0x04, 0x00, 0x00};
	struct dpflow_gen_spec s;
	uint8_t buf[BUF];

	spec_eth(&s);
	s.outer.l3_type = DPFLOW_L3_IPV4;
	s.outer.l4_type = DPFLOW_L4_TCP;
	set_addr4(s.outer.src, 192, 168, 1, 1);
	set_addr4(s.outer.dst, 192, 168, 1, 2);
	s.outer.sport = 12345;
	s.outer.dport = 80;
	s.outer.ttl = 64;
	s.outer.tcp_flags = 0x02;
	s.outer.tcp_seq = 1;
	s.outer.ip_id = 0x1234;
	expect_bytes(buf, dpflow_gen_build(&s, buf, sizeof(buf)), want,
		     sizeof(want));
}

Test(gen_build, ipv6_udp_vlan)
{
	static const uint8_t want[] = {
	    0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa,
	    0xbb,
	    /* 802.1Q VID 100, IPv6 */
	    0x81, 0x00, 0x00, 0x64, 0x86, 0xdd,
	    /* IPv6: payload 12, UDP, hop limit 64, fd00::1 -> fd00::2 */
	    0x60, 0x00, 0x00, 0x00, 0x00, 0x0c, 0x11, 0x40, 0xfd, 0x00, 0x00,
	    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	    0x00, 0x01, 0xfd, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02,
	    /* UDP 1000 -> 2000, len 12, checksum 0xf815, pattern */
	    0x03, 0xe8, 0x07, 0xd0, 0x00, 0x0c, 0xf8, 0x15, 0x00, 0x01, 0x02,
	    0x03};
	struct dpflow_gen_spec s;
	uint8_t buf[BUF];

	spec_eth(&s);
	s.n_vlan = 1;
	s.vlan[0] = 100;
	s.outer.l3_type = DPFLOW_L3_IPV6;
	s.outer.l4_type = DPFLOW_L4_UDP;
	s.outer.src[0] = s.outer.dst[0] = 0xfd;
	s.outer.src[15] = 1;
	s.outer.dst[15] = 2;
	s.outer.sport = 1000;
	s.outer.dport = 2000;
	s.outer.ttl = 64;
	s.outer.payload_len = 4;
	expect_bytes(buf, dpflow_gen_build(&s, buf, sizeof(buf)), want,
		     sizeof(want));
}

Test(gen_build, ipv4_options_timestamp_router_alert)
{
	static const uint8_t want[] = {
	    0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa,
	    0xbb, 0x08, 0x00,
	    /* IHL 8, len 40, checksum 0x86b6 */
	    0x48, 0x00, 0x00, 0x28, 0x00, 0x00, 0x00, 0x00, 0x40, 0x11, 0x86,
	    0xb6, 0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x00, 0x02,
	    /* timestamp (68, len 8, ptr 5, one slot), router alert */
	    0x44, 0x08, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x94, 0x04, 0x00,
	    0x00,
	    /* UDP 1 -> 2, len 8, checksum 0xebd8 */
	    0x00, 0x01, 0x00, 0x02, 0x00, 0x08, 0xeb, 0xd8};
	struct dpflow_gen_spec s;
	uint8_t buf[BUF];

	spec_eth(&s);
	s.outer.l3_type = DPFLOW_L3_IPV4;
	s.outer.l4_type = DPFLOW_L4_UDP;
	set_addr4(s.outer.src, 10, 0, 0, 1);
	set_addr4(s.outer.dst, 10, 0, 0, 2);
	s.outer.sport = 1;
	s.outer.dport = 2;
	s.outer.ttl = 64;
	s.outer.ipv4_opt_len = 12;
	expect_bytes(buf, dpflow_gen_build(&s, buf, sizeof(buf)), want,
		     sizeof(want));
}

/* CRC32c written apart from the builder's (reflected 0x82f63b78). */
static uint32_t test_crc32c(const uint8_t *p, size_t n)
{
	uint32_t table[256];

	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
		table[i] = c;
	}
	uint32_t crc = 0xffffffffu;
	for (size_t i = 0; i < n; i++)
		crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
	return ~crc;
}

/* CRC32c of an SCTP packet in place: field zeroed, compared LSB first. */
static bool sctp_crc_ok(const uint8_t *sctp, size_t n)
{
	uint8_t copy[BUF];
	uint32_t crc;

	memcpy(copy, sctp, n);
	memset(copy + 8, 0, 4);
	crc = test_crc32c(copy, n);
	return sctp[8] == (uint8_t)crc && sctp[9] == (uint8_t)(crc >> 8) &&
	       sctp[10] == (uint8_t)(crc >> 16) &&
	       sctp[11] == (uint8_t)(crc >> 24);
}

Test(gen_build, sctp_data_chunk_crc32c)
{
	static const uint8_t want[] = {
	    0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa,
	    0xbb, 0x08, 0x00,
	    /* IPv4 len 56, SCTP (132) */
	    0x45, 0x00, 0x00, 0x38, 0x00, 0x00, 0x00, 0x00, 0x40, 0x84, 0x66,
	    0x40, 0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x00, 0x02,
	    /* 5000 -> 6000, vtag, CRC32c 0xc5d64baf least byte first */
	    0x13, 0x88, 0x17, 0x70, 0x13, 0x88, 0x17, 0x70, 0xaf, 0x4b, 0xd6,
	    0xc5,
	    /* DATA, B|E, len 21, TSN 7, stream 0/0, PPID 0, 5 bytes, pad */
	    0x00, 0x03, 0x00, 0x15, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00,
	    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02, 0x03, 0x04, 0x00,
	    0x00, 0x00};
	static const uint8_t check[] = "123456789";
	struct dpflow_gen_spec s;
	uint8_t buf[BUF];

	cr_assert_eq(test_crc32c(check, 9), 0xe3069283u);
	spec_eth(&s);
	s.outer.l3_type = DPFLOW_L3_IPV4;
	s.outer.l4_type = DPFLOW_L4_SCTP;
	set_addr4(s.outer.src, 10, 0, 0, 1);
	set_addr4(s.outer.dst, 10, 0, 0, 2);
	s.outer.sport = 5000;
	s.outer.dport = 6000;
	s.outer.ttl = 64;
	s.outer.tcp_seq = 7;
	s.outer.payload_len = 5;
	uint32_t len = dpflow_gen_build(&s, buf, sizeof(buf));
	expect_bytes(buf, len, want, sizeof(want));
	cr_assert(sctp_crc_ok(buf + 34, len - 34));
}

Test(gen_build, gre_all_fields_icmp_no_ethernet)
{
	static const uint8_t want[] = {
	    /* outer IPv4 len 70, GRE (47) */
	    0x45, 0x00, 0x00, 0x46, 0x00, 0x00, 0x00, 0x00, 0x40, 0x2f, 0x66,
	    0x87, 0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x00, 0x02,
	    /* GRE C|K|S, IPv4, checksum 0x0390, key, sequence 9 */
	    0xb0, 0x00, 0x08, 0x00, 0x03, 0x90, 0x00, 0x00, 0x11, 0x22, 0x33,
	    0x44, 0x00, 0x00, 0x00, 0x09,
	    /* inner IPv4, ttl 63, ICMP */
	    0x45, 0x00, 0x00, 0x22, 0x00, 0x00, 0x00, 0x00, 0x3f, 0x01, 0x67,
	    0xd7, 0x0a, 0x01, 0x00, 0x01, 0x0a, 0x01, 0x00, 0x02,
	    /* echo request id 0x77 seq 3, checksum 0xf17c, 6 bytes */
	    0x08, 0x00, 0xf1, 0x7c, 0x00, 0x77, 0x00, 0x03, 0x00, 0x01, 0x02,
	    0x03, 0x04, 0x05};
	struct dpflow_gen_spec s;
	uint8_t buf[BUF];

	spec_eth(&s);
	s.has_eth = false;
	s.tun_type = DPFLOW_TUN_GRE;
	s.gre_csum = s.gre_key = s.gre_seq = true;
	s.tun_id = 0x11223344;
	s.gre_seqno = 9;
	s.outer.l3_type = DPFLOW_L3_IPV4;
	set_addr4(s.outer.src, 10, 0, 0, 1);
	set_addr4(s.outer.dst, 10, 0, 0, 2);
	s.outer.ttl = 64;
	s.inner.l3_type = DPFLOW_L3_IPV4;
	s.inner.l4_type = DPFLOW_L4_ICMP;
	set_addr4(s.inner.src, 10, 1, 0, 1);
	set_addr4(s.inner.dst, 10, 1, 0, 2);
	s.inner.ttl = 63;
	s.inner.sport = 8;
	s.inner.icmp_id = 0x77;
	s.inner.icmp_seq = 3;
	s.inner.payload_len = 6;
	expect_bytes(buf, dpflow_gen_build(&s, buf, sizeof(buf)), want,
		     sizeof(want));
}

Test(gen_build, rejects_bad_specs_and_small_buffers)
{
	struct dpflow_gen_spec s;
	uint8_t buf[BUF];
	uint32_t len;

	spec_eth(&s);
	s.outer.l3_type = DPFLOW_L3_IPV4;
	s.outer.l4_type = DPFLOW_L4_UDP;
	s.outer.payload_len = 100;
	len = dpflow_gen_build(&s, buf, sizeof(buf));
	cr_assert_eq(len, 14 + 20 + 8 + 100);
	for (uint32_t cap = 0; cap < len; cap++)
		cr_assert_eq(dpflow_gen_build(&s, buf, cap), 0, "cap %u", cap);

	s.outer.ipv4_opt_len = 6;
	cr_assert_eq(dpflow_gen_build(&s, buf, sizeof(buf)), 0);
	s.outer.ipv4_opt_len = 44;
	cr_assert_eq(dpflow_gen_build(&s, buf, sizeof(buf)), 0);
	s.outer.ipv4_opt_len = 0;
	s.n_vlan = 3;
	cr_assert_eq(dpflow_gen_build(&s, buf, sizeof(buf)), 0);
	s.n_vlan = 0;
	s.outer.l4_type = DPFLOW_L4_ICMPV6; /* on IPv4 */
	cr_assert_eq(dpflow_gen_build(&s, buf, sizeof(buf)), 0);
	s.outer.l4_type = DPFLOW_L4_UDP;
	s.outer.frag = DPFLOW_FRAG_LATER; /* offset 0 */
	cr_assert_eq(dpflow_gen_build(&s, buf, sizeof(buf)), 0);
	s.outer.frag = DPFLOW_FRAG_NONE;
	s.tun_type = DPFLOW_TUN_GENEVE;
	s.inner.l3_type = DPFLOW_L3_IPV4;
	s.geneve_opt_len = 6;
	cr_assert_eq(dpflow_gen_build(&s, buf, sizeof(buf)), 0);
	s.geneve_opt_len = 8;
	cr_assert_neq(dpflow_gen_build(&s, buf, sizeof(buf)), 0);
	cr_assert_eq(dpflow_gen_build(NULL, buf, sizeof(buf)), 0);
}

/* --- checksums, with the test's own walker ---------------------------- */

/* One's-complement sum, 32-bit accumulate, folded once at the end. */
static uint32_t ones(const uint8_t *p, size_t n, uint64_t acc)
{
	for (size_t i = 0; i < n; i += 2)
		acc += (uint64_t)p[i] << 8 | (i + 1 < n ? p[i + 1] : 0);
	while (acc >> 16)
		acc = (acc & 0xffff) + (acc >> 16);
	return (uint32_t)acc;
}

struct walk {
	unsigned ipv4, tcp, udp, icmp, icmp6, sctp, gre, bad;
	char why[128];
};

static void fail(struct walk *w, const char *what)
{
	if (!w->bad++)
		snprintf(w->why, sizeof(w->why), "%s", what);
}

static void walk_ip(struct walk *w, const uint8_t *p, size_t avail);

static void walk_eth(struct walk *w, const uint8_t *p, size_t len)
{
	size_t off = 12;

	while (off + 2 <= len &&
	       (get16(p + off) == 0x8100 || get16(p + off) == 0x88a8))
		off += 4;
	if (off + 2 > len)
		return fail(w, "ethernet");
	walk_ip(w, p + off + 2, len - off - 2);
}

/* Check the L4 checksum over [l4, l4 + n) with the pseudo-header. */
static bool l4_ok(const uint8_t *ip, bool v6, uint8_t proto, const uint8_t *l4,
		  size_t n)
{
	uint64_t acc = (uint64_t)proto + n;

	if (v6)
		acc = ones(ip + 8, 32, acc);
	else
		acc = ones(ip + 12, 8, acc);
	return ones(l4, n, acc) == 0xffff;
}

static void walk_ip(struct walk *w, const uint8_t *p, size_t avail)
{
	bool v6 = (p[0] >> 4) == 6;
	bool later = false;
	size_t tot, hl;
	uint8_t proto;

	if (!v6) {
		hl = (size_t)(p[0] & 15) * 4;
		tot = get16(p + 2);
		if (tot > avail || ones(p, hl, 0) != 0xffff)
			return fail(w, "ipv4 header");
		w->ipv4++;
		proto = p[9];
		later = (get16(p + 6) & 0x1fff) != 0;
	} else {
		tot = 40u + get16(p + 4);
		if (tot > avail)
			return fail(w, "ipv6 payload length");
		proto = p[6];
		hl = 40;
		while (proto == 0 || proto == 43 || proto == 44 ||
		       proto == 60) {
			const uint8_t *e = p + hl;
			if (proto == 44) {
				later = (get16(e + 2) >> 3) != 0;
				hl += 8;
			} else {
				hl += (size_t)(e[1] + 1) * 8;
			}
			proto = e[0];
			if (later)
				break;
		}
	}
	if (later)
		return;
	const uint8_t *l4 = p + hl;
	size_t n = tot - hl;
	switch (proto) {
	case 6:
		w->tcp++;
		if (!l4_ok(p, v6, 6, l4, n))
			fail(w, "tcp checksum");
		break;
	case 17:
		w->udp++;
		if (get16(l4 + 4) != n || !l4_ok(p, v6, 17, l4, n))
			return fail(w, "udp length or checksum");
		if (get16(l4 + 2) == 4789)
			walk_eth(w, l4 + 16, n - 16);
		if (get16(l4 + 2) == 6081) {
			size_t g = 8 + (size_t)(l4[8] & 0x3f) * 4;
			if (get16(l4 + 10) == 0x6558)
				walk_eth(w, l4 + 8 + g, n - 8 - g);
			else
				walk_ip(w, l4 + 8 + g, n - 8 - g);
		}
		break;
	case 1:
		w->icmp++;
		if (ones(l4, n, 0) != 0xffff)
			fail(w, "icmp checksum");
		break;
	case 58:
		w->icmp6++;
		if (!l4_ok(p, v6, 58, l4, n))
			fail(w, "icmpv6 checksum");
		break;
	case 132:
		w->sctp++;
		if (!sctp_crc_ok(l4, n))
			fail(w, "sctp crc32c");
		break;
	case 47: {
		uint16_t fl = get16(l4);
		size_t g = 4 + (fl & 0x8000 ? 4u : 0u) +
			   (fl & 0x2000 ? 4u : 0u) + (fl & 0x1000 ? 4u : 0u);
		w->gre++;
		if ((fl & 0x8000) && ones(l4, n, 0) != 0xffff)
			return fail(w, "gre checksum");
		if (get16(l4 + 2) == 0x6558)
			walk_eth(w, l4 + g, n - g);
		else
			walk_ip(w, l4 + g, n - g);
		break;
	}
	case 4:
	case 41:
		walk_ip(w, l4, n);
		break;
	default:
		break;
	}
}

static struct dpflow_gen *make(const char *name, const char *const *kv)
{
	struct dpflow_gen_profile p;
	struct dpflow_error err;
	struct dpflow_gen *g;

	cr_assert_eq(dpflow_gen_profile_init(&p, name, &err), 0, "%s", err.msg);
	for (; kv && kv[0]; kv += 2)
		cr_assert_eq(dpflow_gen_profile_set(&p, kv[0], kv[1], &err), 0,
			     "%s", err.msg);
	g = dpflow_gen_create(&p, &err);
	cr_assert_not_null(g, "%s", err.msg);
	return g;
}

Test(gen_checksums, every_header_of_the_all_profile)
{
	struct dpflow_gen *g = make("all", NULL);
	struct walk w;
	uint8_t buf[BUF];
	uint32_t len;
	unsigned n = 0;

	memset(&w, 0, sizeof(w));
	while ((len = dpflow_gen_next(g, buf, sizeof(buf), NULL))) {
		walk_eth(&w, buf, len);
		cr_assert_eq(w.bad, 0, "packet %u: %s", n, w.why);
		n++;
	}
	cr_assert_eq(n, 3000);
	cr_assert(w.ipv4 && w.tcp && w.udp && w.icmp && w.icmp6 && w.sctp &&
		  w.gre);
	dpflow_gen_destroy(g);
}

/* --- the generator ---------------------------------------------------- */

Test(gen_next, same_seed_same_bytes_other_seed_other_bytes)
{
	static const char *const s1[] = {"seed", "42", NULL};
	static const char *const s2[] = {"seed", "43", NULL};
	struct dpflow_gen *a = make("all", s1), *b = make("all", s1);
	struct dpflow_gen *c = make("all", s2);
	uint8_t ba[BUF], bb[BUF], bc[BUF];
	bool differ = false;

	for (int i = 0; i < 1000; i++) {
		uint32_t la = dpflow_gen_next(a, ba, sizeof(ba), NULL);
		uint32_t lb = dpflow_gen_next(b, bb, sizeof(bb), NULL);
		uint32_t lc = dpflow_gen_next(c, bc, sizeof(bc), NULL);
		cr_assert(la && la == lb && !memcmp(ba, bb, la), "packet %d",
			  i);
		differ |= la != lc || memcmp(ba, bc, la);
	}
	cr_assert(differ);
	dpflow_gen_destroy(a);
	dpflow_gen_destroy(b);
	dpflow_gen_destroy(c);
}

Test(gen_next, small_buffer_does_not_consume_a_packet)
{
	struct dpflow_gen *a = make("all", NULL), *b = make("all", NULL);
	uint8_t ba[BUF], bb[BUF];

	for (int i = 0; i < 50; i++) {
		cr_assert_eq(dpflow_gen_next(a, ba, 20, NULL), 0);
		uint32_t la = dpflow_gen_next(a, ba, sizeof(ba), NULL);
		uint32_t lb = dpflow_gen_next(b, bb, sizeof(bb), NULL);
		cr_assert(la && la == lb && !memcmp(ba, bb, la));
	}
	dpflow_gen_destroy(a);
	dpflow_gen_destroy(b);
}

Test(gen_next, count_then_zero)
{
	static const char *const kv[] = {"count", "37", NULL};
	struct dpflow_gen *g = make("default", kv);
	uint8_t buf[BUF];
	unsigned n = 0;

	while (dpflow_gen_next(g, buf, sizeof(buf), NULL))
		n++;
	cr_assert_eq(n, 37);
	cr_assert_eq(dpflow_gen_next(g, buf, sizeof(buf), NULL), 0);
	dpflow_gen_destroy(g);
}

static void sizes_exact(const char *size)
{
	const char *const kv[] = {
	    "size",	size,
	    "count",	"600",
	    "mix",	"tcp:25,udp:25,icmp:25,sctp:25",
	    "ipv6",	"50",
	    "vlan",	"7:50",
	    "qinq",	"8:50",
	    "tunnel",	"vxlan:20,geneve:20,gre:20,ipip:20",
	    "frag",	"30",
	    "ipv4-opt", "50",
	    "ipv6-ext", "50",
	    NULL};
	struct dpflow_gen *g = make("default", kv);
	struct dpflow_gen_info info;
	uint8_t buf[BUF];
	uint32_t len, want = (uint32_t)atoi(size);

	while ((len = dpflow_gen_next(g, buf, sizeof(buf), &info)))
		cr_assert_eq(len, want, "size %s: %u bytes", size, len);
	dpflow_gen_destroy(g);
}

Test(gen_next, sizes_exact_above_the_headers)
{
	sizes_exact("300");
	sizes_exact("301");
	sizes_exact("1000");
	sizes_exact("1500");
	sizes_exact("9000");
}

Test(gen_next, default_profile_is_64_bytes)
{
	struct dpflow_gen *g = make("default", NULL);
	uint8_t buf[BUF];
	uint32_t len;
	unsigned n = 0;

	while ((len = dpflow_gen_next(g, buf, sizeof(buf), NULL))) {
		cr_assert_eq(len, 64);
		n++;
	}
	cr_assert_eq(n, 1000);
	dpflow_gen_destroy(g);
}

Test(gen_next, below_the_headers_is_the_headers)
{
	static const char *const kv[] = {"size", "14", "mix", "udp:100", NULL};
	struct dpflow_gen *g = make("default", kv);
	uint8_t buf[BUF];

	cr_assert_eq(dpflow_gen_next(g, buf, sizeof(buf), NULL), 14 + 20 + 8);
	dpflow_gen_destroy(g);
}

Test(gen_next, imix_is_7_4_1_in_every_block_of_12)
{
	struct dpflow_gen *g = make("imix", NULL);
	uint8_t buf[BUF];
	unsigned block[3] = {0}, total[3] = {0}, n = 0;
	uint32_t len;

	while ((len = dpflow_gen_next(g, buf, sizeof(buf), NULL))) {
		unsigned k = len == 64 ? 0 : len == 576 ? 1 : 2;
		cr_assert(len == 64 || len == 576 || len == 1500, "%u", len);
		block[k]++;
		total[k]++;
		if (++n % 12 == 0) {
			cr_assert(block[0] == 7 && block[1] == 4 &&
				  block[2] == 1);
			memset(block, 0, sizeof(block));
		}
	}
	cr_assert_eq(n, 1200);
	cr_assert(total[0] == 700 && total[1] == 400 && total[2] == 100);
	dpflow_gen_destroy(g);
}

Test(gen_next, flows_are_distinct_5_tuples_drawn_uniformly)
{
	static const char *const kv[] = {
	    "flows", "40", "count", "8000",
	    "ipv6",  "50", "mix",   "tcp:40,udp:40,icmp:0,sctp:20",
	    NULL};
	struct dpflow_gen *g = make("default", kv);
	struct dpflow_gen_info info;
	struct dpflow_gen_l3 seen[40];
	unsigned hits[40] = {0};
	uint8_t buf[BUF];

	while (dpflow_gen_next(g, buf, sizeof(buf), &info)) {
		const struct dpflow_gen_l3 *l3 = &info.spec.outer;
		cr_assert_lt(info.flow, 40);
		if (hits[info.flow]++ == 0) {
			seen[info.flow] = *l3;
			continue;
		}
		const struct dpflow_gen_l3 *f = &seen[info.flow];
		cr_assert(f->l3_type == l3->l3_type &&
			  f->l4_type == l3->l4_type &&
			  !memcmp(f->src, l3->src, 16) &&
			  !memcmp(f->dst, l3->dst, 16) &&
			  f->sport == l3->sport && f->dport == l3->dport);
	}
	for (int a = 0; a < 40; a++) {
		/* 8000 draws over 40 flows: 200 each, far from 100 or 300 */
		cr_assert(hits[a] > 100 && hits[a] < 300, "flow %d: %u", a,
			  hits[a]);
		for (int b = 0; b < a; b++)
			cr_assert(seen[a].l4_type != seen[b].l4_type ||
				  memcmp(seen[a].src, seen[b].src, 16) ||
				  memcmp(seen[a].dst, seen[b].dst, 16) ||
				  seen[a].sport != seen[b].sport ||
				  seen[a].dport != seen[b].dport);
	}
	dpflow_gen_destroy(g);
}

/* Features of one packet, as labels; the "all" profile must show all. */
enum feat {
	F_TCP4,
	F_UDP4,
	F_ICMP4,
	F_SCTP4,
	F_TCP6,
	F_UDP6,
	F_ICMP6,
	F_SCTP6,
	F_VLAN0,
	F_VLAN1,
	F_VLAN2,
	F_OPT4,
	F_EXT0,
	F_EXT43,
	F_EXT44,
	F_EXT60,
	F_FIRST4,
	F_LATER4,
	F_FIRST6,
	F_LATER6,
	F_GENEVE_ETH,
	F_GENEVE_IP,
	F_GENEVE_OPT,
	F_GRE_ETH,
	F_GRE_IP,
	F_GRE_CSUM,
	F_GRE_KEY,
	F_GRE_SEQ,
	F_TUN, /* + tunnel type * 4 + outer v6 * 2 + inner v6 */
	F_COUNT = F_TUN + 5 * 4
};

static void mark_l3(bool *f, const struct dpflow_gen_l3 *l3)
{
	bool v6 = l3->l3_type == DPFLOW_L3_IPV6;
	int base = v6 ? F_TCP6 : F_TCP4;

	if (l3->frag == DPFLOW_FRAG_NONE) {
		switch (l3->l4_type) {
		case DPFLOW_L4_TCP:
			f[base] = true;
			break;
		case DPFLOW_L4_UDP:
			f[base + 1] = true;
			break;
		case DPFLOW_L4_ICMP:
		case DPFLOW_L4_ICMPV6:
			f[base + 2] = true;
			break;
		case DPFLOW_L4_SCTP:
			f[base + 3] = true;
			break;
		default:
			break;
		}
	} else if (l3->frag == DPFLOW_FRAG_FIRST) {
		f[v6 ? F_FIRST6 : F_FIRST4] = true;
	} else {
		f[v6 ? F_LATER6 : F_LATER4] = true;
	}
	if (!v6 && l3->ipv4_opt_len)
		f[F_OPT4] = true;
	for (int i = 0; v6 && i < 4 && l3->ipv6_ext[i] != 0xff; i++)
		f[l3->ipv6_ext[i] == 0	  ? F_EXT0
		  : l3->ipv6_ext[i] == 43 ? F_EXT43
		  : l3->ipv6_ext[i] == 44 ? F_EXT44
					  : F_EXT60] = true;
}

Test(gen_next, all_profile_covers_every_kind)
{
	struct dpflow_gen *g = make("all", NULL);
	struct dpflow_gen_info info;
	bool f[F_COUNT] = {false};
	uint8_t buf[BUF];

	while (dpflow_gen_next(g, buf, sizeof(buf), &info)) {
		const struct dpflow_gen_spec *s = &info.spec;
		f[F_VLAN0 + s->n_vlan] = true;
		mark_l3(f, &s->outer);
		if (s->tun_type == DPFLOW_TUN_NONE)
			continue;
		mark_l3(f, &s->inner);
		f[F_TUN + s->tun_type * 4 +
		  (s->outer.l3_type == DPFLOW_L3_IPV6) * 2 +
		  (s->inner.l3_type == DPFLOW_L3_IPV6)] = true;
		if (s->tun_type == DPFLOW_TUN_GENEVE) {
			f[s->inner_eth ? F_GENEVE_ETH : F_GENEVE_IP] = true;
			f[F_GENEVE_OPT] |= s->geneve_opt_len > 0;
		}
		if (s->tun_type == DPFLOW_TUN_GRE) {
			f[s->inner_eth ? F_GRE_ETH : F_GRE_IP] = true;
			f[F_GRE_CSUM] |= s->gre_csum;
			f[F_GRE_KEY] |= s->gre_key;
			f[F_GRE_SEQ] |= s->gre_seq;
		}
	}
	for (int i = 0; i < F_COUNT; i++) {
		if (i >= F_TUN && i < F_TUN + 4)
			continue; /* tunnel type 0 is no tunnel */
		cr_assert(f[i], "feature %d never generated", i);
	}
	dpflow_gen_destroy(g);
}

/* --- malformed mode --------------------------------------------------- */

static const struct {
	const char *variant;
	int drop;
} variants[] = {
    {"eth_truncated", DPFLOW_DROP_ETH_TRUNC},
    {"vlan_truncated", DPFLOW_DROP_VLAN_TRUNC},
    {"vlan_three_tags", DPFLOW_DROP_VLAN_TOO_MANY},
    {"ipv4_truncated", DPFLOW_DROP_IPV4_TRUNC},
    {"ipv4_version_5", DPFLOW_DROP_IPV4_BAD_VERSION},
    {"ipv4_ihl_below_5", DPFLOW_DROP_IPV4_BAD_IHL},
    {"ipv4_ihl_beyond_frame", DPFLOW_DROP_IPV4_BAD_IHL},
    {"ipv4_total_length_below_header", DPFLOW_DROP_IPV4_BAD_TOTLEN},
    {"ipv4_total_length_beyond_frame", DPFLOW_DROP_IPV4_BAD_TOTLEN},
    {"ipv6_truncated", DPFLOW_DROP_IPV6_TRUNC},
    {"ipv6_version_7", DPFLOW_DROP_IPV6_BAD_VERSION},
    {"ipv6_payload_length_beyond_frame", DPFLOW_DROP_IPV6_BAD_PAYLEN},
    {"ipv6_ext_truncated", DPFLOW_DROP_IPV6_EXT_TRUNC},
    {"ipv6_nine_ext_headers", DPFLOW_DROP_IPV6_EXT_TOO_MANY},
    {"tcp_truncated", DPFLOW_DROP_TCP_TRUNC},
    {"tcp_doff_below_5", DPFLOW_DROP_TCP_BAD_DOFF},
    {"tcp_doff_beyond_datagram", DPFLOW_DROP_TCP_BAD_DOFF},
    {"udp_truncated", DPFLOW_DROP_UDP_TRUNC},
    {"udp_length_below_8", DPFLOW_DROP_UDP_BAD_LEN},
    {"udp_length_beyond_datagram", DPFLOW_DROP_UDP_BAD_LEN},
    {"icmp_truncated", DPFLOW_DROP_ICMP_TRUNC},
    {"icmpv6_truncated", DPFLOW_DROP_ICMP_TRUNC},
    {"sctp_truncated", DPFLOW_DROP_SCTP_TRUNC},
    /* not a tunnel after all: plain UDP, no drop (docs/inspect.md) */
    {"vxlan_truncated", DPFLOW_DROP_NONE},
    {"geneve_truncated", DPFLOW_DROP_NONE},
    {"geneve_options_truncated", DPFLOW_DROP_NONE},
    {"geneve_version_1", DPFLOW_DROP_NONE},
    {"geneve_unknown_protocol", DPFLOW_DROP_NONE},
    {"gre_truncated", DPFLOW_DROP_GRE_TRUNC},
    {"gre_options_truncated", DPFLOW_DROP_GRE_TRUNC},
    {"gre_version_1", DPFLOW_DROP_GRE_BAD_VERSION},
    {"gre_unknown_protocol", DPFLOW_DROP_TUN_UNKNOWN_PAYLOAD},
    {"random_flip", -1},
    {"random_truncate", -1},
};
#define N_VARIANTS DPFLOW_ARRAY_SIZE(variants)

Test(gen_malformed, cycle_covers_every_variant_and_the_parser_agrees)
{
	static const char *const kv[] = {"malformed", "1", "count", "340",
					 NULL};
	struct dpflow_gen *g = make("all", kv);
	struct dpflow_gen_info info;
	struct dpflow_pkt_meta meta;
	unsigned seen[N_VARIANTS] = {0};
	uint8_t buf[BUF];
	uint32_t len;
	unsigned n = 0;

	while ((len = dpflow_gen_next(g, buf, sizeof(buf), &info))) {
		size_t v;
		for (v = 0; v < N_VARIANTS; v++)
			if (!strcmp(info.variant, variants[v].variant))
				break;
		cr_assert_lt(v, N_VARIANTS, "unknown variant %s", info.variant);
		cr_assert_eq(v, n % N_VARIANTS, "%s out of the cycle",
			     info.variant);
		cr_assert_eq(info.expect_drop, variants[v].drop, "%s",
			     info.variant);
		seen[v]++;
		memset(&meta, 0, sizeof(meta));
		unsigned drop = dpflow_parse_frame(buf, len, &meta);
		if (variants[v].drop >= 0)
			cr_assert_eq(drop, (unsigned)variants[v].drop,
				     "%s: parser says %s", info.variant,
				     dpflow_drop_name(drop));
		n++;
	}
	for (size_t v = 0; v < N_VARIANTS; v++)
		cr_assert_eq(seen[v], 10, "%s", variants[v].variant);
	dpflow_gen_destroy(g);
}

Test(gen_malformed, valid_packets_parse_cleanly)
{
	struct dpflow_gen *g = make("all", NULL);
	struct dpflow_gen_info info;
	struct dpflow_pkt_meta meta;
	uint8_t buf[BUF];
	uint32_t len;

	while ((len = dpflow_gen_next(g, buf, sizeof(buf), &info))) {
		memset(&meta, 0, sizeof(meta));
		cr_assert_eq(dpflow_parse_frame(buf, len, &meta), 0);
		cr_assert_eq(info.expect_drop, DPFLOW_DROP_NONE);
		cr_assert_str_eq(info.variant, "ok");
		cr_assert_eq(meta.tun_type, info.spec.tun_type);
	}
	dpflow_gen_destroy(g);
}

/* --- profiles ---------------------------------------------------------- */

Test(gen_profile, named_profiles)
{
	struct dpflow_gen_profile p;
	struct dpflow_error err;

	cr_assert_eq(dpflow_gen_profile_init(&p, "default", &err), 0);
	cr_assert(p.size == 64 && p.pct_tcp + p.pct_udp + p.pct_icmp == 100 &&
		  p.pct_ipv6 == 0);
	cr_assert_eq(dpflow_gen_profile_init(&p, "imix", &err), 0);
	cr_assert_eq(p.size, 0);
	cr_assert_eq(dpflow_gen_profile_init(&p, "vxlan", &err), 0);
	cr_assert_eq(p.pct_vxlan, 100);
	cr_assert_eq(dpflow_gen_profile_init(&p, "all", &err), 0);
	cr_assert(p.pct_sctp && p.pct_ipv6 && p.vlan && p.qinq && p.pct_frag);
	cr_assert_eq(dpflow_gen_profile_init(&p, "nope", &err), -EINVAL);
	cr_assert_str_eq(err.field, "profile");
	cr_assert(strstr(err.msg, "nope"));
}

Test(gen_profile, keys_parse)
{
	struct dpflow_gen_profile p;
	struct dpflow_error err;

	dpflow_gen_profile_init(&p, "default", &err);
	cr_assert_eq(dpflow_gen_profile_set(&p, "size", "imix", &err), 0);
	cr_assert_eq(p.size, 0);
	cr_assert_eq(dpflow_gen_profile_set(&p, "mix", "udp:70,sctp:30", &err),
		     0);
	cr_assert(p.pct_tcp == 0 && p.pct_udp == 70 && p.pct_icmp == 0 &&
		  p.pct_sctp == 30);
	cr_assert_eq(
	    dpflow_gen_profile_set(&p, "tunnel", "gre:10,ipip:5", &err), 0);
	cr_assert(p.pct_gre == 10 && p.pct_ipip == 5 && p.pct_vxlan == 0);
	cr_assert_eq(dpflow_gen_profile_set(&p, "vlan", "10:40", &err), 0);
	cr_assert(p.vlan == 10 && p.pct_vlan == 40);
	cr_assert_eq(dpflow_gen_profile_set(&p, "qinq", "20", &err), 0);
	cr_assert(p.qinq == 20 && p.pct_qinq == 100);
	cr_assert_eq(dpflow_gen_profile_set(&p, "seed", "0xff", &err), 0);
	cr_assert_eq(p.seed, 255);
	cr_assert_eq(dpflow_gen_profile_set(&p, "count", "5", &err), 0);
	cr_assert_eq(dpflow_gen_profile_set(&p, "malformed", "1", &err), 0);
	cr_assert(p.malformed && p.count == 5);
}

Test(gen_profile, bad_values_name_key_and_value)
{
	static const struct {
		const char *key, *value;
	} bad[] = {
	    {"count", "0"},	      {"count", "abc"},
	    {"count", "-1"},	      {"count", ""},
	    {"flows", "0"},	      {"flows", "5000000"},
	    {"size", "13"},	      {"size", "9601"},
	    {"size", "big"},	      {"mix", "tcp:50,udp:40"},
	    {"mix", "tcp:60,foo:40"}, {"mix", "tcp:60,tcp:40"},
	    {"mix", "tcp60"},	      {"mix", "tcp:101"},
	    {"mix", "tcp:100,"},      {"tunnel", "vxlan:60,gre:60"},
	    {"ipv6", "101"},	      {"frag", "x"},
	    {"ipv4-opt", "-3"},	      {"ipv6-ext", "1000"},
	    {"vlan", "4095"},	      {"vlan", "10:101"},
	    {"qinq", "a:1"},	      {"seed", "x1"},
	    {"malformed", "2"},	      {"colour", "blue"},
	};
	struct dpflow_gen_profile p, before;
	struct dpflow_error err;

	dpflow_gen_profile_init(&p, "default", &err);
	before = p;
	for (size_t i = 0; i < DPFLOW_ARRAY_SIZE(bad); i++) {
		dpflow_error_clear(&err);
		cr_assert_eq(
		    dpflow_gen_profile_set(&p, bad[i].key, bad[i].value, &err),
		    -EINVAL, "%s=%s accepted", bad[i].key, bad[i].value);
		cr_assert_eq(err.code, EINVAL);
		cr_assert_not_null(err.field);
		if (strcmp(bad[i].key, "colour"))
			cr_assert_str_eq(err.field, bad[i].key);
		cr_assert(strstr(err.msg, bad[i].key), "%s", err.msg);
		cr_assert(strstr(err.msg, bad[i].value), "%s", err.msg);
		cr_assert(!memcmp(&p, &before, sizeof(p)),
			  "%s=%s changed the profile", bad[i].key,
			  bad[i].value);
	}
}

Test(gen_profile, create_checks_across_keys)
{
	struct dpflow_gen_profile p;
	struct dpflow_error err;

	dpflow_gen_profile_init(&p, "default", &err);
	p.qinq = 5;
	cr_assert_null(dpflow_gen_create(&p, &err));
	cr_assert_str_eq(err.field, "qinq");
	dpflow_gen_profile_init(&p, "default", &err);
	p.pct_udp = 10;
	cr_assert_null(dpflow_gen_create(&p, &err));
	cr_assert_str_eq(err.field, "mix");
	dpflow_gen_profile_init(&p, "default", &err);
	p.flows = 0;
	cr_assert_null(dpflow_gen_create(&p, &err));
	cr_assert_str_eq(err.field, "flows");
	cr_assert_null(dpflow_gen_create(NULL, &err));
	dpflow_gen_destroy(NULL);
}
