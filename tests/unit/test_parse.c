/*
 * Parser unit tests: known packets field by field, every truncation of
 * valid packets, the generator's malformed variants, random bytes, and the
 * burst entry point. Frames are copied into heap buffers of their exact
 * length so that AddressSanitizer catches any read past the end.
 * (The field-by-field comparison with tshark lives in tests/tshark/.)
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/dpflow.h"

/* Parse @len bytes of @bytes from an exact-size heap copy. */
static unsigned parse_exact(const uint8_t *bytes, uint32_t len,
			    struct dpflow_pkt_meta *m)
{
	uint8_t *copy = malloc(len ? len : 1);
	unsigned r;

	cr_assert_not_null(copy);
	memcpy(copy, bytes, len);
	memset(m, 0xa5, sizeof(*m));
	r = dpflow_parse_frame(copy, len, m);
	free(copy);
	return r;
}

static uint32_t ip4(const char *s)
{
	struct in_addr a;
	cr_assert_eq(inet_pton(AF_INET, s, &a), 1);
	return a.s_addr;
}

/* Ethernet / IPv4 (TTL 64) / TCP 1234 -> 80 SYN, no payload: 54 bytes. */
static const uint8_t tcp4_syn[] = {
    0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa,
    0xbb, 0x08, 0x00, 0x45, 0x10, 0x00, 0x28, 0x00, 0x01, 0x00, 0x00,
    0x40, 0x06, 0x00, 0x00, 0xc0, 0xa8, 0x01, 0x01, 0x0a, 0x00, 0x00,
    0x02, 0x04, 0xd2, 0x00, 0x50, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x50, 0x02, 0x20, 0x00, 0x00, 0x00, 0x00, 0x00,
};

Test(parse, ipv4_tcp_known_bytes)
{
	struct dpflow_pkt_meta m;
	uint32_t a;

	cr_assert_eq(parse_exact(tcp4_syn, sizeof(tcp4_syn), &m), 0);
	cr_expect_eq(m.drop, 0);
	cr_expect_eq(m.tun_type, DPFLOW_TUN_NONE);
	cr_expect_eq(m.outer.l2_type, DPFLOW_L2_ETH);
	cr_expect_eq(m.outer.ethertype, 0x0800);
	cr_expect_eq(m.outer.n_vlan, 0);
	cr_expect_eq(m.outer.l3_type, DPFLOW_L3_IPV4);
	cr_expect_eq(m.outer.l3_off, 14);
	cr_expect_eq(m.outer.l4_off, 34);
	cr_expect_eq(m.outer.pay_off, 54);
	cr_expect_eq(m.outer.l3_len, 40);
	cr_expect_eq(m.outer.proto, 6);
	cr_expect_eq(m.outer.ttl, 64);
	cr_expect_eq(m.outer.tos, 0x10);
	cr_expect_eq(m.outer.frag, DPFLOW_FRAG_NONE);
	memcpy(&a, m.outer.src, 4);
	cr_expect_eq(a, ip4("192.168.1.1"));
	memcpy(&a, m.outer.dst, 4);
	cr_expect_eq(a, ip4("10.0.0.2"));
	for (int k = 4; k < 16; k++)
		cr_expect_eq(m.outer.src[k], 0, "IPv4 address tail zeroed");
	cr_expect_eq(m.outer.l4_type, DPFLOW_L4_TCP);
	cr_expect_eq(m.outer.sport, 1234);
	cr_expect_eq(m.outer.dport, 80);
	cr_expect_eq(m.outer.tcp_flags, 0x02);
}

Test(parse, ethernet_padding_is_ignored)
{
	uint8_t padded[64] = {0};
	struct dpflow_pkt_meta m;

	memcpy(padded, tcp4_syn, sizeof(tcp4_syn));
	cr_assert_eq(parse_exact(padded, sizeof(padded), &m), 0);
	cr_expect_eq(m.outer.l3_len, 40);
	cr_expect_eq(m.outer.l4_type, DPFLOW_L4_TCP);
}

Test(parse, non_ip_ethertype_is_l3_other)
{
	uint8_t arp[42] = {0};
	struct dpflow_pkt_meta m;

	arp[12] = 0x08;
	arp[13] = 0x06;
	cr_assert_eq(parse_exact(arp, sizeof(arp), &m), 0);
	cr_expect_eq(m.outer.l3_type, DPFLOW_L3_OTHER);
	cr_expect_eq(m.outer.ethertype, 0x0806);
	cr_expect_eq(m.outer.l4_type, DPFLOW_L4_NONE);
}

/* Header corruptions of tcp4_syn and the reason each must give. */
struct corruption {
	const char *what;
	uint32_t at;
	uint8_t value;
	uint32_t len; /* 0: whole packet */
	unsigned expect;
};

Test(parse, named_drop_reasons)
{
	static const struct corruption cases[] = {
	    {"13-byte frame", 0, 0x00, 13, DPFLOW_DROP_ETH_TRUNC},
	    {"IP version 5", 14, 0x55, 0, DPFLOW_DROP_IPV4_BAD_VERSION},
	    {"IHL 4", 14, 0x44, 0, DPFLOW_DROP_IPV4_BAD_IHL},
	    {"IHL 15 beyond frame", 14, 0x4f, 0, DPFLOW_DROP_IPV4_BAD_IHL},
	    {"total length 19", 17, 19, 0, DPFLOW_DROP_IPV4_BAD_TOTLEN},
	    {"total length 41", 17, 41, 0, DPFLOW_DROP_IPV4_BAD_TOTLEN},
	    {"IPv4 header cut", 0, 0x08, 33, DPFLOW_DROP_IPV4_TRUNC},
	    {"TCP doff 4", 46, 0x40, 0, DPFLOW_DROP_TCP_BAD_DOFF},
	    {"TCP doff 6 beyond datagram", 46, 0x60, 0,
	     DPFLOW_DROP_TCP_BAD_DOFF},
	    {"TCP header cut (total length 39)", 17, 39, 53,
	     DPFLOW_DROP_TCP_TRUNC},
	};

	for (size_t c = 0; c < DPFLOW_ARRAY_SIZE(cases); c++) {
		uint8_t p[sizeof(tcp4_syn)];
		struct dpflow_pkt_meta m;
		uint32_t len = cases[c].len ? cases[c].len : sizeof(p);

		memcpy(p, tcp4_syn, sizeof(p));
		p[cases[c].at] = cases[c].value;
		cr_expect_eq(parse_exact(p, len, &m), cases[c].expect,
			     "%s: got %s, want %s", cases[c].what,
			     dpflow_drop_name(m.drop),
			     dpflow_drop_name(cases[c].expect));
		cr_expect_eq(m.drop, cases[c].expect, "%s: meta->drop",
			     cases[c].what);
	}
}

/* A spec for every shape the parser knows, built by dpflow_gen_build(). */
static void base_l3(struct dpflow_gen_l3 *l, uint8_t l3, uint8_t l4, uint32_t n)
{
	memset(l, 0, sizeof(*l));
	l->l3_type = l3;
	l->l4_type = l4;
	if (l3 == DPFLOW_L3_IPV4) {
		uint32_t s = htonl(0x0a000001 + n), d = htonl(0x0a800001 + n);
		memcpy(l->src, &s, 4);
		memcpy(l->dst, &d, 4);
	} else {
		l->src[0] = l->dst[0] = 0xfd;
		l->src[15] = (uint8_t)n;
		l->dst[15] = (uint8_t)(n + 1);
		l->dst[14] = 1;
	}
	l->sport = (uint16_t)(40000 + n);
	l->dport =
	    (uint16_t)(l4 == DPFLOW_L4_ICMP || l4 == DPFLOW_L4_ICMPV6 ? 0
								      : 443);
	if (l4 == DPFLOW_L4_ICMP || l4 == DPFLOW_L4_ICMPV6)
		l->sport = l4 == DPFLOW_L4_ICMP ? 8 : 128;
	l->ttl = (uint8_t)(64 - n);
	l->tos = (uint8_t)(n << 2);
	l->tcp_flags = 0x18;
	l->payload_len = (uint16_t)(10 + n);
	memset(l->ipv6_ext, 0xff, sizeof(l->ipv6_ext));
}

#define N_SPECS 14

static void make_spec(unsigned k, struct dpflow_gen_spec *s)
{
	static const uint8_t l4s[] = {DPFLOW_L4_TCP, DPFLOW_L4_UDP,
				      DPFLOW_L4_SCTP};
	uint8_t ov = (k & 1) ? DPFLOW_L3_IPV6 : DPFLOW_L3_IPV4;
	uint8_t iv = (k & 2) ? DPFLOW_L3_IPV6 : DPFLOW_L3_IPV4;

	memset(s, 0, sizeof(*s));
	s->has_eth = true;
	for (int b = 0; b < 6; b++) {
		s->src_mac[b] = (uint8_t)(0x02 + b);
		s->dst_mac[b] = (uint8_t)(0x12 + b);
	}
	base_l3(&s->outer, ov, l4s[k % 3], k);
	switch (k) {
	case 0:
		break;
	case 1:
		s->n_vlan = 1;
		s->vlan[0] = 100;
		break;
	case 2:
		s->n_vlan = 2;
		s->vlan[0] = 200;
		s->vlan[1] = 300;
		s->outer.ipv4_opt_len = 8;
		break;
	case 3:
		s->outer.ipv6_ext[0] = 0;
		s->outer.ipv6_ext[1] = 43;
		s->outer.ipv6_ext[2] = 60;
		break;
	case 4:
		base_l3(&s->outer, ov,
			ov == DPFLOW_L3_IPV4 ? DPFLOW_L4_ICMP
					     : DPFLOW_L4_ICMPV6,
			k);
		break;
	case 5:
	case 6:
		s->tun_type = DPFLOW_TUN_VXLAN;
		s->tun_id = 0x123456;
		s->inner_eth = true;
		break;
	case 7:
	case 8:
		s->tun_type = DPFLOW_TUN_GENEVE;
		s->tun_id = 0xabcdef;
		s->geneve_opt_len = (uint8_t)(k == 7 ? 8 : 0);
		s->inner_eth = k == 7;
		break;
	case 9:
	case 10:
		s->tun_type = DPFLOW_TUN_GRE;
		s->tun_id = 0xdeadbeef;
		s->gre_key = true;
		s->gre_seq = k == 9;
		s->gre_csum = k == 10;
		s->inner_eth = k == 9;
		break;
	case 11:
	case 12:
		s->tun_type = DPFLOW_TUN_IPIP;
		break;
	case 13:
		s->outer.frag = DPFLOW_FRAG_FIRST;
		break;
	}
	if (s->tun_type != DPFLOW_TUN_NONE) {
		if (s->tun_type == DPFLOW_TUN_VXLAN ||
		    s->tun_type == DPFLOW_TUN_GENEVE) {
			s->outer.l4_type = DPFLOW_L4_UDP;
			s->outer.dport =
			    s->tun_type == DPFLOW_TUN_VXLAN ? 4789 : 6081;
		} else
			s->outer.l4_type = DPFLOW_L4_NONE;
		base_l3(&s->inner, iv, l4s[(k + 1) % 3], k + 7);
	}
}

static void check_l3(const struct dpflow_hdr *h, const struct dpflow_gen_l3 *l,
		     unsigned k, const char *which)
{
	size_t alen = l->l3_type == DPFLOW_L3_IPV4 ? 4 : 16;

	cr_expect_eq(h->l3_type, l->l3_type, "spec %u %s l3", k, which);
	cr_expect_eq(memcmp(h->src, l->src, alen), 0, "spec %u %s src", k,
		     which);
	cr_expect_eq(memcmp(h->dst, l->dst, alen), 0, "spec %u %s dst", k,
		     which);
	cr_expect_eq(h->ttl, l->ttl, "spec %u %s ttl", k, which);
	cr_expect_eq(h->tos, l->tos, "spec %u %s tos", k, which);
	if (l->l4_type != DPFLOW_L4_NONE) {
		cr_expect_eq(h->l4_type, l->l4_type, "spec %u %s l4", k, which);
		cr_expect_eq(h->sport, l->sport, "spec %u %s sport", k, which);
		cr_expect_eq(h->dport, l->dport, "spec %u %s dport", k, which);
	}
}

Test(parse, generated_shapes_field_by_field)
{
	uint8_t buf[2048];

	for (unsigned k = 0; k < N_SPECS; k++) {
		struct dpflow_gen_spec s;
		struct dpflow_pkt_meta m;
		uint32_t len;

		make_spec(k, &s);
		len = dpflow_gen_build(&s, buf, sizeof(buf));
		cr_assert_gt(len, 0, "spec %u builds", k);
		cr_assert_eq(parse_exact(buf, len, &m), 0, "spec %u: %s", k,
			     dpflow_drop_name(m.drop));
		cr_expect_eq(m.outer.n_vlan, s.n_vlan, "spec %u vlans", k);
		for (unsigned v = 0; v < s.n_vlan; v++)
			cr_expect_eq(m.outer.vlan[v] & 0xfff, s.vlan[v],
				     "spec %u vlan %u", k, v);
		check_l3(&m.outer, &s.outer, k, "outer");
		cr_expect_eq(m.tun_type, s.tun_type, "spec %u tunnel", k);
		if (k == 3)
			cr_expect_eq(m.outer.n_ext, 3, "spec 3 ext headers");
		if (k == 13)
			cr_expect_eq(m.outer.frag, DPFLOW_FRAG_FIRST);
		if (s.tun_type == DPFLOW_TUN_NONE)
			continue;
		if (s.tun_type != DPFLOW_TUN_IPIP)
			cr_expect_eq(m.tun_id, s.tun_id, "spec %u tun id", k);
		if (s.tun_type == DPFLOW_TUN_GRE) {
			cr_expect(m.flags & DPFLOW_META_F_TUN_KEY);
			cr_expect_eq(!!(m.flags & DPFLOW_META_F_GRE_SEQ),
				     s.gre_seq);
			cr_expect_eq(!!(m.flags & DPFLOW_META_F_GRE_CSUM),
				     s.gre_csum);
		}
		if (s.tun_type == DPFLOW_TUN_GENEVE)
			cr_expect_eq(m.tun_hdr_len, 8 + s.geneve_opt_len);
		cr_expect_eq(m.inner.l2_type,
			     (s.tun_type == DPFLOW_TUN_VXLAN || s.inner_eth)
				 ? DPFLOW_L2_ETH
				 : DPFLOW_L2_NONE,
			     "spec %u inner l2", k);
		check_l3(&m.inner, &s.inner, k, "inner");
	}
}

/* The reason a valid packet cut to @cut bytes must give. */
static unsigned expected_cut_reason(const struct dpflow_pkt_meta *full,
				    uint32_t cut, const uint8_t *frame)
{
	const struct dpflow_hdr *h = &full->outer;
	uint32_t l3 = h->l3_off;

	if (cut < 14)
		return DPFLOW_DROP_ETH_TRUNC;
	if (cut < l3)
		return DPFLOW_DROP_VLAN_TRUNC;
	if (h->l3_type == DPFLOW_L3_IPV4) {
		if (cut - l3 < 20)
			return DPFLOW_DROP_IPV4_TRUNC;
		if (cut - l3 < (uint32_t)(frame[l3] & 0xf) * 4)
			return DPFLOW_DROP_IPV4_BAD_IHL;
		return DPFLOW_DROP_IPV4_BAD_TOTLEN;
	}
	if (cut - l3 < 40)
		return DPFLOW_DROP_IPV6_TRUNC;
	return DPFLOW_DROP_IPV6_BAD_PAYLEN;
}

Test(parse, every_truncation_is_dropped_with_the_right_reason)
{
	uint8_t buf[2048];

	for (unsigned k = 0; k < N_SPECS; k++) {
		struct dpflow_gen_spec s;
		struct dpflow_pkt_meta full, m;
		uint32_t len;

		make_spec(k, &s);
		len = dpflow_gen_build(&s, buf, sizeof(buf));
		cr_assert_gt(len, 0);
		cr_assert_eq(parse_exact(buf, len, &full), 0);
		for (uint32_t cut = 0; cut < len; cut++) {
			unsigned want = expected_cut_reason(&full, cut, buf);
			unsigned got = parse_exact(buf, cut, &m);

			cr_expect_eq(
			    got, want, "spec %u cut %u: got %s want %s", k, cut,
			    dpflow_drop_name(got), dpflow_drop_name(want));
		}
	}
}

Test(parse, generator_malformed_variants_give_their_reason)
{
	struct dpflow_gen_profile p;
	struct dpflow_error err = {0};
	struct dpflow_gen *g;
	struct dpflow_gen_info info;
	uint8_t buf[2048];
	uint32_t len, checked = 0, n = 0;

	cr_assert_eq(dpflow_gen_profile_init(&p, "all", &err), 0, "%s",
		     err.msg);
	p.malformed = true;
	p.count = 2000;
	g = dpflow_gen_create(&p, &err);
	cr_assert_not_null(g, "%s", err.msg);
	while ((len = dpflow_gen_next(g, buf, sizeof(buf), &info)) > 0) {
		struct dpflow_pkt_meta m;
		unsigned got = parse_exact(buf, len, &m);

		n++;
		if (info.expect_drop < 0)
			continue;
		checked++;
		cr_expect_eq(got, (unsigned)info.expect_drop,
			     "packet %u variant %s: got %s want %s", n - 1,
			     info.variant, dpflow_drop_name(got),
			     dpflow_drop_name((unsigned)info.expect_drop));
		/* a broken VXLAN/GENEVE header leaves plain UDP */
		if (!strncmp(info.variant, "vxlan_", 6) ||
		    !strncmp(info.variant, "geneve_", 7))
			cr_expect(m.flags == DPFLOW_META_F_TUN_INVALID &&
				      m.tun_type == DPFLOW_TUN_NONE &&
				      m.outer.l4_type == DPFLOW_L4_UDP,
				  "packet %u variant %s: flags 0x%x tunnel %u",
				  n - 1, info.variant, m.flags, m.tun_type);
	}
	dpflow_gen_destroy(g);
	cr_expect_eq(n, 2000);
	cr_expect_gt(checked, 100, "most variants carry an expected reason");
}

/* xorshift64*: the test's own generator, independent of dpflow's. */
static uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dull;
}

Test(parse, random_bytes_and_mutations_stay_in_bounds)
{
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	uint8_t buf[2048];
	unsigned drops = 0, total = 0;

	for (unsigned k = 0; k < N_SPECS; k++) {
		struct dpflow_gen_spec s;
		uint32_t len;

		make_spec(k, &s);
		len = dpflow_gen_build(&s, buf, sizeof(buf));
		for (int it = 0; it < 3000; it++) {
			uint8_t p[2048];
			struct dpflow_pkt_meta m;
			uint32_t cut = (uint32_t)(rnd(&seed) % (len + 1));

			memcpy(p, buf, len);
			for (int f = 0; f < 3; f++)
				p[rnd(&seed) % len] ^= (uint8_t)rnd(&seed);
			drops += parse_exact(p, cut, &m) != 0;
			total++;
			cr_assert_lt(m.drop, DPFLOW_DROP__COUNT);
			if (!m.drop) {
				cr_assert_leq(m.outer.pay_off, cut);
				if (m.tun_type)
					cr_assert_leq(m.inner.pay_off, cut);
			}
		}
	}
	cr_expect_gt(drops, total / 4, "mutations are mostly caught");
}

/* The defined fields of two header sets are equal. */
static bool same_hdr(const struct dpflow_hdr *a, const struct dpflow_hdr *b)
{
	if (a->l2_type != b->l2_type || a->l3_type != b->l3_type ||
	    a->l4_type != b->l4_type || a->n_vlan != b->n_vlan ||
	    a->l3_off != b->l3_off || a->l4_off != b->l4_off ||
	    a->pay_off != b->pay_off || a->proto != b->proto ||
	    a->sport != b->sport || a->dport != b->dport ||
	    a->frag != b->frag || a->ttl != b->ttl)
		return false;
	for (unsigned v = 0; v < a->n_vlan; v++)
		if (a->vlan[v] != b->vlan[v])
			return false;
	if (a->l3_type == DPFLOW_L3_IPV4 || a->l3_type == DPFLOW_L3_IPV6)
		return !memcmp(a->src, b->src, 16) &&
		       !memcmp(a->dst, b->dst, 16);
	return true;
}

Test(parse, burst_matches_single_frames)
{
	struct dpflow_pool_params pp = {.name = "t", .n_slots = 64};
	struct dpflow_error err = {0};
	struct dpflow_pool *pool = dpflow_pool_create(&pp, &err);
	uint32_t idx[2 * N_SPECS];
	unsigned want_ok = 0;

	cr_assert_not_null(pool, "%s", err.msg);
	cr_assert_eq(dpflow_pool_alloc_bulk(pool, idx, 2 * N_SPECS), 0);
	for (unsigned k = 0; k < 2 * N_SPECS; k++) {
		struct dpflow_gen_spec s;
		struct dpflow_pkt_meta *m = dpflow_pool_meta(pool, idx[k]);
		uint32_t len;

		make_spec(k % N_SPECS, &s);
		len = dpflow_gen_build(&s, dpflow_pkt_data(pool, idx[k]), 2048);
		/* every second packet loses its last byte: a drop */
		m->data_len = (uint16_t)(k >= N_SPECS ? len - 1 : len);
		want_ok += k < N_SPECS;
	}
	cr_expect_eq(dpflow_parse_burst(pool, idx, 2 * N_SPECS), want_ok);
	for (unsigned k = 0; k < 2 * N_SPECS; k++) {
		struct dpflow_pkt_meta *m = dpflow_pool_meta(pool, idx[k]);
		struct dpflow_pkt_meta one;

		cr_expect_eq(parse_exact(dpflow_pkt_data(pool, idx[k]),
					 m->data_len, &one),
			     m->drop);
		cr_expect(same_hdr(&one.outer, &m->outer), "packet %u outer",
			  k);
		cr_expect_eq(k >= N_SPECS, m->drop != 0);
	}
	dpflow_pool_free_bulk(pool, idx, 2 * N_SPECS);
	dpflow_pool_destroy(pool);
}

Test(parse, drop_names_are_unique_and_stable)
{
	cr_expect_str_eq(dpflow_drop_name(DPFLOW_DROP_NONE), "none");
	cr_expect_str_eq(dpflow_drop_name(DPFLOW_DROP_IPV4_BAD_IHL),
			 "ipv4_bad_ihl");
	cr_expect_str_eq(dpflow_drop_name(DPFLOW_DROP__COUNT + 5), "unknown");
	for (unsigned a = 0; a < DPFLOW_DROP__COUNT; a++)
		for (unsigned b = a + 1; b < DPFLOW_DROP__COUNT; b++)
			cr_expect_str_neq(dpflow_drop_name(a),
					  dpflow_drop_name(b));
}

/* --- UDP to a tunnel port whose payload is no such tunnel (issue 23) ---- */

/*
 * Ethernet / IPv4 (or IPv6) / UDP @sport -> @dport / @pay into @f; the IP
 * and UDP lengths cover exactly the payload, then @pad zero bytes of
 * Ethernet padding follow. Returns the frame length.
 */
static uint32_t udp_frame(uint8_t *f, bool v6, uint16_t sport, uint16_t dport,
			  const uint8_t *pay, uint32_t n, uint32_t pad)
{
	uint32_t l3 = 14, l4 = v6 ? 54 : 34, ulen = 8 + n;

	memset(f, 0, l4 + ulen + pad);
	memcpy(f, "\x02\x00\x00\x00\x00\x0b\x02\x00\x00\x00\x00\x0a", 12);
	if (v6) {
		f[12] = 0x86, f[13] = 0xdd;
		f[l3] = 0x60;
		f[l3 + 4] = (uint8_t)(ulen >> 8), f[l3 + 5] = (uint8_t)ulen;
		f[l3 + 6] = 17, f[l3 + 7] = 64;
		f[l3 + 8] = 0x20, f[l3 + 9] = 0x01, f[l3 + 23] = 0x0a;
		f[l3 + 24] = 0x20, f[l3 + 25] = 0x01, f[l3 + 39] = 0x0b;
	} else {
		f[12] = 0x08, f[13] = 0x00;
		f[l3] = 0x45;
		f[l3 + 2] = (uint8_t)((20 + ulen) >> 8);
		f[l3 + 3] = (uint8_t)(20 + ulen);
		f[l3 + 8] = 64, f[l3 + 9] = 17;
		memcpy(f + l3 + 12, "\xc0\x00\x02\x01\xc6\x33\x64\x02", 8);
	}
	f[l4] = (uint8_t)(sport >> 8), f[l4 + 1] = (uint8_t)sport;
	f[l4 + 2] = (uint8_t)(dport >> 8), f[l4 + 3] = (uint8_t)dport;
	f[l4 + 4] = (uint8_t)(ulen >> 8), f[l4 + 5] = (uint8_t)ulen;
	memcpy(f + l4 + 8, pay, n);
	return l4 + ulen + pad;
}

/* An inner Ethernet / IPv4 / UDP 1 -> 2 frame with 4 payload bytes. */
static uint32_t inner_frame(uint8_t *f)
{
	static const uint8_t inner[] = {
	    0x02, 0x00, 0x00, 0x00, 0x01, 0x0d, 0x02, 0x00, 0x00, 0x00,
	    0x01, 0x0c, 0x08, 0x00, 0x45, 0x00, 0x00, 0x20, 0x00, 0x00,
	    0x00, 0x00, 0x40, 0x11, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x01,
	    0x0a, 0x00, 0x00, 0x02, 0x00, 0x01, 0x00, 0x02, 0x00, 0x0c,
	    0x00, 0x00, 'd',  'a',  't',  'a'};

	memcpy(f, inner, sizeof(inner));
	return sizeof(inner);
}

#define TUN_CASE_MAX 128

struct tun_case {
	const char *what;
	bool v6;
	uint16_t dport;
	uint8_t pay[TUN_CASE_MAX];
	uint32_t n;
	uint32_t udp_len; /* 0: 8 + n; else the UDP length written instead */
	uint32_t pad;
};

/* VXLAN header (flags, VNI) and GENEVE base header into @p. */
static uint32_t vxlan_hdr(uint8_t *p, uint8_t flags, uint32_t vni)
{
	memset(p, 0, 8);
	p[0] = flags;
	p[4] = (uint8_t)(vni >> 16), p[5] = (uint8_t)(vni >> 8);
	p[6] = (uint8_t)vni;
	return 8;
}

static uint32_t geneve_hdr(uint8_t *p, uint8_t ver, uint8_t optlen_words,
			   uint8_t oc, uint16_t proto, uint32_t vni)
{
	memset(p, 0, 8);
	p[0] = (uint8_t)(ver << 6 | optlen_words);
	p[1] = oc;
	p[2] = (uint8_t)(proto >> 8), p[3] = (uint8_t)proto;
	p[4] = (uint8_t)(vni >> 16), p[5] = (uint8_t)(vni >> 8);
	p[6] = (uint8_t)vni;
	return 8;
}

/* The cases: each payload fails the tunnel its port names. */
static unsigned tun_invalid_cases(struct tun_case *c)
{
	unsigned k = 0;
	uint32_t o;

	memset(c, 0, sizeof(*c) * 24);
	/* VXLAN, 4789 */
	c[k].what = "vxlan: empty payload", c[k].dport = 4789, k++;
	c[k].what = "vxlan: 5 bytes 'hello' (no vxlan at all)";
	c[k].dport = 4789, c[k].n = 5;
	memcpy(c[k++].pay, "hello", 5);
	c[k].what = "vxlan: header 7 of 8 bytes", c[k].dport = 4789;
	c[k].n = vxlan_hdr(c[k].pay, 0x08, 1) - 1, k++;
	c[k].what = "vxlan: UDP length ends 4 bytes into the header, frame "
		    "padded";
	c[k].dport = 4789, c[k].n = vxlan_hdr(c[k].pay, 0x08, 1);
	c[k].udp_len = 12, c[k].pad = 30, k++;
	c[k].what = "vxlan: I flag clear, valid inner frame";
	c[k].dport = 4789, o = vxlan_hdr(c[k].pay, 0x00, 7);
	c[k].n = o + inner_frame(c[k].pay + o), k++;
	c[k].what = "vxlan over ipv6: G flag, I clear, valid inner frame";
	c[k].v6 = true, c[k].dport = 4789, o = vxlan_hdr(c[k].pay, 0x80, 7);
	c[k].pay[1] = 0x40;
	c[k].n = o + inner_frame(c[k].pay + o), k++;
	c[k].what = "vxlan: inner ethernet 10 bytes";
	c[k].dport = 4789, o = vxlan_hdr(c[k].pay, 0x08, 1);
	memset(c[k].pay + o, 2, 10), c[k].n = o + 10, k++;
	c[k].what = "vxlan: inner ipv4 ihl 3";
	c[k].dport = 4789, o = vxlan_hdr(c[k].pay, 0x08, 1);
	c[k].n = o + inner_frame(c[k].pay + o);
	c[k].pay[o + 14] = 0x43, k++;
	c[k].what = "vxlan: inner ipv4 total length beyond the UDP datagram";
	c[k].dport = 4789, o = vxlan_hdr(c[k].pay, 0x08, 1);
	c[k].n = o + inner_frame(c[k].pay + o);
	c[k].pay[o + 17] = 0x40, k++;
	c[k].what = "vxlan over ipv6: inner udp truncated";
	c[k].v6 = true, c[k].dport = 4789, o = vxlan_hdr(c[k].pay, 0x08, 1);
	c[k].n = o + inner_frame(c[k].pay + o);
	c[k].pay[o + 17] = 20 + 4, c[k].n = o + 14 + 24, k++;
	c[k].what = "vxlan: inner three vlan tags";
	c[k].dport = 4789, o = vxlan_hdr(c[k].pay, 0x08, 1);
	memcpy(c[k].pay + o,
	       "\x02\x00\x00\x00\x01\x0d\x02\x00\x00\x00\x01\x0c"
	       "\x81\x00\x00\x01\x81\x00\x00\x02\x81\x00\x00\x03"
	       "\x08\x00",
	       26);
	c[k].n = o + 26 + 20, k++;
	/* GENEVE, 6081 */
	c[k].what = "geneve: header 7 of 8 bytes", c[k].dport = 6081;
	c[k].n = geneve_hdr(c[k].pay, 0, 0, 0, 0x6558, 1) - 1, k++;
	c[k].what = "geneve: 18 bytes of text";
	c[k].dport = 6081, c[k].n = 18;
	memcpy(c[k++].pay, "GET / HTTP/1.0\r\n\r\n", 18);
	for (uint8_t ver = 1; ver <= 3; ver++) {
		c[k].what = ver == 1   ? "geneve: version 1, valid inner frame"
			    : ver == 2 ? "geneve: version 2, valid inner frame"
				       : "geneve: version 3, valid inner frame";
		c[k].dport = 6081;
		o = geneve_hdr(c[k].pay, ver, 0, 0, 0x6558, 2);
		c[k].n = o + inner_frame(c[k].pay + o), k++;
	}
	c[k].what = "geneve: options 4 of 8 bytes";
	c[k].dport = 6081, o = geneve_hdr(c[k].pay, 0, 2, 0, 0x6558, 1);
	memcpy(c[k].pay + o, "\x00\x01\x01\x00", 4), c[k].n = o + 4, k++;
	c[k].what = "geneve over ipv6: 252 option bytes announced, none";
	c[k].v6 = true, c[k].dport = 6081;
	c[k].n = geneve_hdr(c[k].pay, 0, 63, 0, 0x0800, 1), k++;
	c[k].what = "geneve: protocol 0x0806 (arp), not opened";
	c[k].dport = 6081, o = geneve_hdr(c[k].pay, 0, 0, 0, 0x0806, 3);
	memset(c[k].pay + o, 0, 28), c[k].n = o + 28, k++;
	c[k].what = "geneve: O and C flags, inner ethernet 0 bytes";
	c[k].dport = 6081;
	c[k].n = geneve_hdr(c[k].pay, 0, 0, 0xc0, 0x6558, 4), k++;
	c[k].what = "geneve: 0x86dd, inner ipv6 20 of 40 bytes";
	c[k].dport = 6081, o = geneve_hdr(c[k].pay, 0, 0, 0, 0x86dd, 5);
	c[k].pay[o] = 0x60, c[k].n = o + 20, k++;
	c[k].what = "geneve: 0x0800 carrying an ipv6 header (bad version)";
	c[k].dport = 6081, o = geneve_hdr(c[k].pay, 0, 0, 0, 0x0800, 5);
	c[k].pay[o] = 0x60, c[k].n = o + 40, k++;
	return k;
}

/* Failures of the outer headers stay drops, tunnel port or not. */
static void outer_udp_failures_stay_drops(void)
{
	uint8_t f[256];
	struct dpflow_pkt_meta m;
	uint32_t len;

	/* UDP length one past the datagram */
	len = udp_frame(f, false, 40000, 4789, (const uint8_t *)"hello", 5, 0);
	f[34 + 5] = 14;
	cr_expect_eq(parse_exact(f, len, &m), DPFLOW_DROP_UDP_BAD_LEN);
	cr_expect_eq(m.flags, 0);
	/* UDP length 7 */
	f[34 + 5] = 7;
	cr_expect_eq(parse_exact(f, len, &m), DPFLOW_DROP_UDP_BAD_LEN);
	/* 4 bytes of UDP header */
	len = udp_frame(f, true, 40000, 6081, (const uint8_t *)"", 0, 0);
	f[14 + 5] = 4;
	cr_expect_eq(parse_exact(f, len - 4, &m), DPFLOW_DROP_UDP_TRUNC);
	cr_expect_eq(m.flags, 0);
	/* IPv4 total length beyond the frame */
	len = udp_frame(f, false, 40000, 4789, (const uint8_t *)"hello", 5, 0);
	cr_expect_eq(parse_exact(f, len - 1, &m), DPFLOW_DROP_IPV4_BAD_TOTLEN);
	cr_expect_eq(m.flags, 0);
}

Test(parse, tunnel_port_payload_that_is_no_tunnel_is_plain_udp)
{
	struct tun_case cs[24];
	unsigned n = tun_invalid_cases(cs);

	cr_assert_leq(n, DPFLOW_ARRAY_SIZE(cs));
	outer_udp_failures_stay_drops();
	for (unsigned i = 0; i < n; i++) {
		const struct tun_case *c = &cs[i];
		uint8_t f[256];
		struct dpflow_pkt_meta m;
		uint32_t len =
		    udp_frame(f, c->v6, 40000, c->dport, c->pay, c->n, c->pad);
		uint32_t l4 = c->v6 ? 54 : 34;
		unsigned r;

		if (c->udp_len) {
			f[l4 + 4] = (uint8_t)(c->udp_len >> 8);
			f[l4 + 5] = (uint8_t)c->udp_len;
		}
		r = parse_exact(f, len, &m);
		cr_expect_eq(r, DPFLOW_DROP_NONE, "%s: dropped as %s", c->what,
			     dpflow_drop_name(r));
		cr_expect_eq(m.drop, DPFLOW_DROP_NONE, "%s: meta drop",
			     c->what);
		cr_expect_eq(m.tun_type, DPFLOW_TUN_NONE, "%s: tunnel %u",
			     c->what, m.tun_type);
		cr_expect_eq(m.flags, DPFLOW_META_F_TUN_INVALID,
			     "%s: flags 0x%x", c->what, m.flags);
		cr_expect_eq(m.tun_id, 0, "%s: tun_id", c->what);
		cr_expect_eq(m.outer.l3_type,
			     c->v6 ? DPFLOW_L3_IPV6 : DPFLOW_L3_IPV4, "%s: l3",
			     c->what);
		cr_expect_eq(m.outer.l4_type, DPFLOW_L4_UDP, "%s: l4", c->what);
		cr_expect_eq(m.outer.sport, 40000, "%s: sport", c->what);
		cr_expect_eq(m.outer.dport, c->dport, "%s: dport", c->what);
		cr_expect_eq(m.outer.l4_off, l4, "%s: l4_off", c->what);
		cr_expect_eq(m.outer.pay_off, l4 + 8, "%s: pay_off", c->what);
		if (c->udp_len)
			continue;
		/* the same payload to port 53, and from the tunnel port to
		 * port 53: plain UDP, no flag */
		len = udp_frame(f, c->v6, 40000, 53, c->pay, c->n, c->pad);
		cr_expect_eq(parse_exact(f, len, &m), 0, "%s", c->what);
		cr_expect_eq(m.flags, 0, "%s to port 53: flags 0x%x", c->what,
			     m.flags);
		len = udp_frame(f, c->v6, c->dport, 53, c->pay, c->n, c->pad);
		cr_expect_eq(parse_exact(f, len, &m), 0, "%s", c->what);
		cr_expect_eq(m.flags, 0, "%s from the tunnel port: flags 0x%x",
			     c->what, m.flags);
	}
}

/*
 * Valid VXLAN (the I flag decides, other flag bits are ignored) and GENEVE
 * are tunnels without the flag; a tunnel port inside the inner packet is
 * not tried.
 */
Test(parse, vxlan_needs_the_i_flag_and_valid_tunnels_have_no_flag)
{
	uint8_t pay[96], f[256];
	struct dpflow_pkt_meta m;
	uint32_t o, len;

	o = vxlan_hdr(pay, 0x08, 0x123456);
	o += inner_frame(pay + o);
	len = udp_frame(f, false, 40000, 4789, pay, o, 0);
	cr_assert_eq(parse_exact(f, len, &m), 0);
	cr_expect_eq(m.tun_type, DPFLOW_TUN_VXLAN);
	cr_expect_eq(m.tun_id, 0x123456);
	cr_expect_eq(m.flags, 0);
	cr_expect_eq(m.inner.l4_type, DPFLOW_L4_UDP);

	/* VXLAN-GBP flags (G and I) are still VXLAN */
	pay[0] = 0x88;
	len = udp_frame(f, true, 40000, 4789, pay, o, 0);
	cr_assert_eq(parse_exact(f, len, &m), 0);
	cr_expect_eq(m.tun_type, DPFLOW_TUN_VXLAN);
	cr_expect_eq(m.flags, 0);
	/* every other bit of the flags, but not I: plain UDP (RFC 7348:
	 * the I flag MUST be set) */
	pay[0] = 0xf7;
	len = udp_frame(f, false, 40000, 4789, pay, o, 0);
	cr_assert_eq(parse_exact(f, len, &m), 0);
	cr_expect_eq(m.tun_type, DPFLOW_TUN_NONE);
	cr_expect_eq(m.flags, DPFLOW_META_F_TUN_INVALID);

	o = geneve_hdr(pay, 0, 0, 0xc0, 0x6558, 9);
	o += inner_frame(pay + o);
	len = udp_frame(f, false, 40000, 6081, pay, o, 0);
	cr_assert_eq(parse_exact(f, len, &m), 0);
	cr_expect_eq(m.tun_type, DPFLOW_TUN_GENEVE);
	cr_expect_eq(m.flags,
		     DPFLOW_META_F_GENEVE_OAM | DPFLOW_META_F_GENEVE_CRIT);

	/* a tunnel port in the inner packet is not tried: no flag */
	o = vxlan_hdr(pay, 0x08, 1);
	o += inner_frame(pay + o);
	pay[8 + 36] = 0x12, pay[8 + 37] = 0xb5; /* inner dport 4789 */
	len = udp_frame(f, false, 40000, 4789, pay, o, 0);
	cr_assert_eq(parse_exact(f, len, &m), 0);
	cr_expect_eq(m.tun_type, DPFLOW_TUN_VXLAN);
	cr_expect_eq(m.inner.dport, 4789);
	cr_expect_eq(m.flags, 0);
}

/*
 * Every valid VXLAN and GENEVE packet of the generated shapes, its UDP
 * datagram cut short at every length (IP and UDP lengths rewritten to
 * match, so the outer packet stays valid): the whole one is the tunnel,
 * every shorter one plain UDP with the flag, never a drop.
 */
Test(parse, every_cut_of_a_tunnel_payload_is_plain_udp)
{
	uint8_t buf[2048];
	unsigned cuts = 0;

	for (unsigned k = 0; k < N_SPECS; k++) {
		struct dpflow_gen_spec s;
		struct dpflow_pkt_meta full, m;
		uint32_t len, l3, l4;

		make_spec(k, &s);
		if (s.tun_type != DPFLOW_TUN_VXLAN &&
		    s.tun_type != DPFLOW_TUN_GENEVE)
			continue;
		len = dpflow_gen_build(&s, buf, sizeof(buf));
		cr_assert_eq(parse_exact(buf, len, &full), 0);
		cr_assert_eq(full.tun_type, s.tun_type);
		l3 = full.outer.l3_off;
		l4 = full.outer.l4_off;
		for (uint32_t end = l4 + 8; end < len; end++) {
			uint8_t p[2048];
			uint32_t ulen = end - l4, iplen = end - l3;

			memcpy(p, buf, end);
			p[l4 + 4] = (uint8_t)(ulen >> 8);
			p[l4 + 5] = (uint8_t)ulen;
			if (full.outer.l3_type == DPFLOW_L3_IPV4) {
				p[l3 + 2] = (uint8_t)(iplen >> 8);
				p[l3 + 3] = (uint8_t)iplen;
			} else {
				p[l3 + 4] = (uint8_t)((iplen - 40) >> 8);
				p[l3 + 5] = (uint8_t)(iplen - 40);
			}
			cr_expect_eq(parse_exact(p, end, &m), 0,
				     "spec %u datagram cut at %u: %s", k, end,
				     dpflow_drop_name(m.drop));
			cr_expect_eq(m.tun_type, DPFLOW_TUN_NONE,
				     "spec %u cut at %u", k, end);
			cr_expect_eq(m.flags, DPFLOW_META_F_TUN_INVALID,
				     "spec %u cut at %u: flags 0x%x", k, end,
				     m.flags);
			cr_expect_eq(m.outer.l4_type, DPFLOW_L4_UDP);
			cr_expect_eq(m.outer.dport, full.outer.dport);
			cuts++;
		}
	}
	cr_expect_gt(cuts, 200);
}
