/*
 * Packet edit actions (lib/flow/pkt_edit.h).
 *
 * 1. Fixtures (tests/pkt/edit_fixtures.h, built by scapy): every action on
 *    IPv4/IPv6, tags, TCP/UDP/ICMP, tunnels, drops; output bytes compared
 *    exactly, every checksum recomputed by an independent walker here, the
 *    metadata compared with a fresh parse, and the slot outside the frame
 *    checked untouched.
 * 2. Random rewrites of random packets built here (fixed seed): verdicts
 *    predicted by the test, checksums recomputed in full, metadata
 *    compared with a fresh parse, drops leave the frame as it was.
 * 3. Random field writes at random layers and offsets of every fixture
 *    frame, avoiding only bytes that change the frame's structure.
 * 4. Random encap-then-decap round trips for every tunnel kind.
 * 5. RFC 1624 update vs full recomputation, 1M random cases.
 * 6. Control path: template building and action checks name the field.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/dpflow.h"
#include "dpflow/parse.h"
#include "dpflow/pool.h"
#include "flow/pkt_edit.h"

#include "../pkt/edit_fixtures.h"

#define HEADROOM    256
#define DATA_ROOM   2048
#define CANARY	    0x5a
#define MAX_ACTIONS 8

/* ---- helpers ------------------------------------------------------------ */

static struct dpflow_pool *pool_new(uint32_t n)
{
	struct dpflow_pool_params p;
	struct dpflow_error err;
	struct dpflow_pool *pool;

	memset(&p, 0, sizeof(p));
	p.name = "edit";
	p.n_slots = n;
	p.headroom = HEADROOM;
	p.data_room = DATA_ROOM;
	pool = dpflow_pool_create(&p, &err);
	cr_assert_not_null(pool, "pool: %s", err.msg);
	return pool;
}

static uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void hexdump(const char *what, const uint8_t *p, uint32_t n)
{
	fprintf(stderr, "%s (%u bytes):", what, n);
	for (uint32_t i = 0; i < n; i++)
		fprintf(stderr, "%s%02x", i % 16 ? " " : "\n  ", p[i]);
	fprintf(stderr, "\n");
}

/* xorshift64*: fixed seeds, same sequence on every run */
static uint64_t rnd_state;

static uint64_t rnd(void)
{
	rnd_state ^= rnd_state >> 12;
	rnd_state ^= rnd_state << 25;
	rnd_state ^= rnd_state >> 27;
	return rnd_state * 0x2545f4914f6cdd1dull;
}

static uint32_t below(uint32_t n)
{
	return (uint32_t)(rnd() % n);
}

/* ---- independent checksum walker ---------------------------------------- */

/*
 * Walks a frame the way the wire formats say (not dpflow's parser) and
 * recomputes every checksum in full, comparing exactly: IPv4 headers, TCP,
 * UDP (zero allowed over IPv4 only; a computed zero is 0xffff), ICMP,
 * ICMPv6, the GRE checksum; tunnels VXLAN, GENEVE, GRE, IP-in-IP are
 * opened at the first level. L4 checksums of fragments are not checked.
 * With @mask, marks the bytes that decide the frame's structure (types,
 * lengths, protocol, version, offsets) and every checksum field.
 */
struct walk {
	const uint8_t *f;
	uint32_t len;
	uint8_t *mask;
	int checked;
	char why[200];
};

static void mark(struct walk *w, uint32_t off, uint32_t n)
{
	for (uint32_t i = 0; w->mask && i < n && off + i < w->len; i++)
		w->mask[off + i] = 1;
}

static uint32_t naive_sum(const uint8_t *p, uint32_t n)
{
	uint32_t s = 0;

	for (uint32_t i = 0; i < n; i++)
		s += (i & 1) ? p[i] : (uint32_t)p[i] << 8;
	return s;
}

static uint16_t naive_csum(uint64_t s)
{
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

/* udp: 0 no UDP rules, 1 UDP over IPv4 (zero = none), 2 UDP over IPv6 */
static int check_csum(struct walk *w, const char *what, uint32_t field,
		      uint32_t start, uint32_t end, uint64_t pseudo, int udp)
{
	uint64_t s = pseudo;
	uint16_t got, want;

	if (end > w->len || field + 2 > end) {
		snprintf(w->why, sizeof(w->why), "%s: bounds", what);
		return -1;
	}
	for (uint32_t i = start; i < end; i++)
		if (i != field && i != field + 1)
			s += ((i - start) & 1) ? w->f[i]
					       : (uint32_t)w->f[i] << 8;
	want = naive_csum(s);
	got = rd16(w->f + field);
	if (udp && want == 0)
		want = 0xffff;
	if (udp == 1 && got == 0)
		return 0;
	if (got != want) {
		snprintf(w->why, sizeof(w->why),
			 "%s checksum at %u is 0x%04x, want 0x%04x", what,
			 field, got, want);
		return -1;
	}
	w->checked++;
	return 0;
}

static int walk_eth(struct walk *w, uint32_t off, uint32_t end, int depth);
static int walk_ip(struct walk *w, uint32_t off, uint32_t end, int v6,
		   int depth);

static int walk_inner(struct walk *w, uint16_t proto, uint32_t off,
		      uint32_t end, int depth)
{
	if (proto == 0x6558)
		return walk_eth(w, off, end, depth + 1);
	if (proto == 0x0800)
		return walk_ip(w, off, end, 0, depth + 1);
	if (proto == 0x86dd)
		return walk_ip(w, off, end, 1, depth + 1);
	return 0;
}

static int walk_l4(struct walk *w, uint32_t off, uint32_t end, uint8_t proto,
		   uint64_t pseudo, int v6, int check, int depth)
{
	const uint8_t *f = w->f;
	uint32_t l4len = end - off;

	switch (proto) {
	case 6:
		mark(w, off + 12, 1);
		mark(w, off + 16, 2);
		return check ? check_csum(w, "tcp", off + 16, off, end,
					  pseudo + l4len, 0)
			     : 0;
	case 17: {
		uint32_t ulen = rd16(f + off + 4), uend = off + ulen;
		uint16_t dport = rd16(f + off + 2);

		mark(w, off + 2, 6);
		if (!check)
			return 0;
		if (check_csum(w, "udp", off + 6, off, uend, pseudo + ulen,
			       v6 ? 2 : 1))
			return -1;
		/* a UDP tunnel as the parser opens one: VXLAN with the I
		 * flag, GENEVE version 0 with its options inside and an
		 * Ethernet or IP payload; anything else on those ports is
		 * a plain UDP payload (the bytes that decide are marked) */
		if (depth == 0 && dport == 4789 && uend - off >= 16) {
			mark(w, off + 8, 1);
			if (f[off + 8] & 0x08)
				return walk_eth(w, off + 16, uend, depth + 1);
		}
		if (depth == 0 && dport == 6081 && uend - off >= 16) {
			uint32_t g = off + 8, olen = (f[g] & 0x3f) * 4u;
			uint16_t pt = rd16(f + g + 2);

			mark(w, g, 1);
			mark(w, g + 2, 2);
			if (!(f[g] >> 6) && g + 8 + olen <= uend &&
			    (pt == 0x6558 || pt == 0x0800 || pt == 0x86dd))
				return walk_inner(w, pt, g + 8 + olen, uend,
						  depth);
		}
		return 0;
	}
	case 1:
		mark(w, off + 2, 2);
		return check ? check_csum(w, "icmp", off + 2, off, end, 0, 0)
			     : 0;
	case 58:
		mark(w, off + 2, 2);
		return check ? check_csum(w, "icmpv6", off + 2, off, end,
					  pseudo + l4len, 0)
			     : 0;
	case 47: {
		uint16_t fl = rd16(f + off);
		uint32_t hl = 4;

		if (depth || !check)
			return 0;
		mark(w, off, 4);
		if (fl & 0x8000) {
			mark(w, off + 4, 2);
			if (check_csum(w, "gre", off + 4, off, end, 0, 0))
				return -1;
			hl += 4;
		}
		hl += (fl & 0x2000) ? 4 : 0;
		hl += (fl & 0x1000) ? 4 : 0;
		return walk_inner(w, rd16(f + off + 2), off + hl, end, depth);
	}
	case 4:
	case 41:
		if (depth || !check)
			return 0;
		return walk_ip(w, off, end, proto == 41, depth + 1);
	default:
		return 0;
	}
}

static int walk_ip(struct walk *w, uint32_t off, uint32_t end, int v6,
		   int depth)
{
	const uint8_t *f = w->f;

	if (!v6) {
		uint32_t ihl, tot;
		uint16_t fr;

		if (end - off < 20)
			return snprintf(w->why, sizeof(w->why), "short ipv4"),
			       -1;
		ihl = (f[off] & 15) * 4u;
		tot = rd16(f + off + 2);
		fr = rd16(f + off + 6);
		mark(w, off, 1);
		mark(w, off + 2, 2);
		mark(w, off + 6, 2);
		mark(w, off + 9, 3);
		if (check_csum(w, "ipv4 header", off + 10, off, off + ihl, 0,
			       0))
			return -1;
		return walk_l4(w, off + ihl, off + tot, f[off + 9],
			       naive_sum(f + off + 12, 8) + f[off + 9], 0,
			       !(fr & 0x3fff), depth);
	} else {
		uint32_t o = off + 40, e;
		uint8_t nh;
		int frag = 0;

		if (end - off < 40)
			return snprintf(w->why, sizeof(w->why), "short ipv6"),
			       -1;
		mark(w, off, 1);
		mark(w, off + 4, 3);
		e = off + 40 + rd16(f + off + 4);
		nh = f[off + 6];
		while (nh == 0 || nh == 43 || nh == 60 || nh == 44) {
			mark(w, o, 2);
			if (nh == 44) {
				mark(w, o + 2, 2);
				frag |= (rd16(f + o + 2) & 0xfff9) != 0;
				nh = f[o];
				o += 8;
			} else {
				nh = f[o];
				o += (f[o + 1] + 1u) * 8;
			}
		}
		return walk_l4(w, o, e, nh, naive_sum(f + off + 8, 32) + nh, 1,
			       !frag, depth);
	}
}

static int walk_eth(struct walk *w, uint32_t off, uint32_t end, int depth)
{
	uint32_t o = off + 14;
	uint16_t et;

	if (end - off < 14)
		return 0;
	et = rd16(w->f + off + 12);
	mark(w, off + 12, 2);
	while ((et == 0x8100 || et == 0x88a8) && end - o >= 4) {
		mark(w, o + 2, 2);
		et = rd16(w->f + o + 2);
		o += 4;
	}
	if (et == 0x0800)
		return walk_ip(w, o, end, 0, depth);
	if (et == 0x86dd)
		return walk_ip(w, o, end, 1, depth);
	return 0;
}

/* Every checksum of @f right? Returns how many were checked, or -1. */
static int verify_frame(const uint8_t *f, uint32_t len, uint8_t *mask,
			char *why, size_t why_len)
{
	struct walk w;

	memset(&w, 0, sizeof(w));
	w.f = f;
	w.len = len;
	w.mask = mask;
	if (mask)
		memset(mask, 0, len);
	if (walk_eth(&w, 0, len, 0)) {
		snprintf(why, why_len, "%s", w.why);
		return -1;
	}
	return w.checked;
}

/* ---- metadata consistency ----------------------------------------------- */

static int ports(uint8_t l4)
{
	return l4 == DPFLOW_L4_TCP || l4 == DPFLOW_L4_UDP ||
	       l4 == DPFLOW_L4_SCTP || l4 == DPFLOW_L4_ICMP ||
	       l4 == DPFLOW_L4_ICMPV6;
}

static void expect_hdr_eq(const struct dpflow_hdr *a,
			  const struct dpflow_hdr *b, const char *who,
			  const char *set)
{
#define EQ(f)                                                                 \
	cr_expect_eq(a->f, b->f, "%s: %s." #f " %u, parse says %u", who, set, \
		     (unsigned)a->f, (unsigned)b->f)
	EQ(l2_type);
	EQ(l3_type);
	EQ(l4_type);
	EQ(l2_off);
	EQ(l3_off);
	EQ(l4_off);
	EQ(pay_off);
	EQ(l3_len);
	EQ(ethertype);
	EQ(n_vlan);
	EQ(proto);
	EQ(frag);
	EQ(ttl);
	EQ(tos);
	EQ(tcp_flags);
	EQ(n_ext);
	for (unsigned i = 0; i < b->n_vlan && i < 2; i++)
		EQ(vlan[i]);
	if (b->l3_type == DPFLOW_L3_IPV4 || b->l3_type == DPFLOW_L3_IPV6) {
		cr_expect_arr_eq(a->src, b->src, 16, "%s: %s.src", who, set);
		cr_expect_arr_eq(a->dst, b->dst, 16, "%s: %s.dst", who, set);
	}
	if (ports(b->l4_type)) {
		EQ(sport);
		EQ(dport);
	}
#undef EQ
}

/* The metadata of slot @m equals what the parser makes of its frame. */
static void expect_meta_consistent(const struct dpflow_pkt_meta *m,
				   const uint8_t *frame, const char *who)
{
	struct dpflow_pkt_meta p;

	memset(&p, 0, sizeof(p));
	dpflow_parse_frame(frame, m->data_len, &p);
	cr_expect_eq(m->tun_type, p.tun_type, "%s: tun_type %u, parse %u", who,
		     m->tun_type, p.tun_type);
	cr_expect_eq(m->flags, p.flags, "%s: flags", who);
	expect_hdr_eq(&m->outer, &p.outer, who, "outer");
	if (p.tun_type != DPFLOW_TUN_NONE) {
		cr_expect_eq(m->tun_id, p.tun_id, "%s: tun_id", who);
		cr_expect_eq(m->tun_off, p.tun_off, "%s: tun_off", who);
		cr_expect_eq(m->tun_hdr_len, p.tun_hdr_len, "%s: tun_hdr_len",
			     who);
		cr_expect_eq(m->tun_proto, p.tun_proto, "%s: tun_proto", who);
		expect_hdr_eq(&m->inner, &p.inner, who, "inner");
	}
}

/* ---- action text ("op k=v ... ; op ...") -------------------------------- */

static unsigned op_by_name(const char *s)
{
	for (unsigned op = 0; op < DPFLOW_EDIT__COUNT; op++)
		if (!strcmp(dpflow_edit_op_name(op), s))
			return op;
	cr_assert_fail("unknown op '%s'", s);
	return 0;
}

static void parse_mac(const char *s, uint8_t *mac)
{
	unsigned v[6];

	cr_assert_eq(sscanf(s, "%x:%x:%x:%x:%x:%x", &v[0], &v[1], &v[2], &v[3],
			    &v[4], &v[5]),
		     6, "mac '%s'", s);
	for (int i = 0; i < 6; i++)
		mac[i] = (uint8_t)v[i];
}

static void parse_addr(const char *s, uint8_t *out)
{
	memset(out, 0, 16);
	if (strchr(s, ':'))
		cr_assert_eq(inet_pton(AF_INET6, s, out), 1, "addr '%s'", s);
	else
		cr_assert_eq(inet_pton(AF_INET, s, out), 1, "addr '%s'", s);
}

static unsigned parse_hex(const char *s, uint8_t *out, unsigned max)
{
	unsigned n = 0, v;

	while (s[0] && s[1] && n < max) {
		cr_assert_eq(sscanf(s, "%2x", &v), 1, "hex '%s'", s);
		out[n++] = (uint8_t)v;
		s += 2;
	}
	return n;
}

static uint32_t num(const char *s)
{
	return (uint32_t)strtoul(s, NULL, 0);
}

static unsigned layer_by_name(const char *s)
{
	static const char *const names[] = {
	    "l2", "l3", "l4", "tun", "inner_l2", "inner_l3", "inner_l4"};

	for (unsigned i = 0; i < DPFLOW_ARRAY_SIZE(names); i++)
		if (!strcmp(names[i], s))
			return i;
	cr_assert_fail("unknown layer '%s'", s);
	return 0;
}

/* "l3:12:4" */
static void parse_field_spec(const char *s, struct dpflow_edit_field *f)
{
	char layer[16];
	unsigned off, width;

	cr_assert_eq(sscanf(s, "%15[a-z0-9_]:%u:%u", layer, &off, &width), 3,
		     "field '%s'", s);
	f->layer = (uint8_t)layer_by_name(layer);
	f->off = (uint16_t)off;
	f->width = (uint8_t)width;
}

static unsigned tun_by_name(const char *s)
{
	if (!strcmp(s, "vxlan"))
		return DPFLOW_TUN_VXLAN;
	if (!strcmp(s, "geneve"))
		return DPFLOW_TUN_GENEVE;
	if (!strcmp(s, "gre"))
		return DPFLOW_TUN_GRE;
	if (!strcmp(s, "ipip"))
		return DPFLOW_TUN_IPIP;
	cr_assert_fail("unknown tunnel '%s'", s);
	return 0;
}

/* One action from its words; encapsulation templates are built here. */
static void parse_action(char *text, struct dpflow_edit_action *a)
{
	struct dpflow_edit_encap_params ep;
	struct dpflow_edit_field *fld = NULL;
	struct dpflow_error err;
	char *save = NULL, *tok;

	memset(a, 0, sizeof(*a));
	memset(&ep, 0, sizeof(ep));
	tok = strtok_r(text, " ", &save);
	cr_assert_not_null(tok);
	a->op = (uint8_t)op_by_name(tok);
	switch (a->op) {
	case DPFLOW_EDIT_FIELD_SET:
		fld = &a->u.set.f;
		memset(a->u.set.mask, 0xff, sizeof(a->u.set.mask));
		break;
	case DPFLOW_EDIT_FIELD_ADD:
		fld = &a->u.add.f;
		break;
	case DPFLOW_EDIT_REG_FROM_FIELD:
	case DPFLOW_EDIT_FIELD_FROM_REG:
		fld = &a->u.freg.f;
		break;
	default:
		break;
	}
	while ((tok = strtok_r(NULL, " ", &save))) {
		char *v = strchr(tok, '=');

		if (v)
			*v++ = 0;
		if (a->op == DPFLOW_EDIT_ENCAP) {
			if (!v) {
				if (!strcmp(tok, "df"))
					ep.flags |= DPFLOW_EDIT_ENCAP_F_DF;
				else if (!strcmp(tok, "udp_csum"))
					ep.flags |=
					    DPFLOW_EDIT_ENCAP_F_UDP_CSUM;
				else if (!strcmp(tok, "key"))
					ep.flags |= DPFLOW_EDIT_ENCAP_F_GRE_KEY;
				else if (!strcmp(tok, "crit"))
					ep.flags |=
					    DPFLOW_EDIT_ENCAP_F_GENEVE_CRIT;
				else if (!strcmp(tok, "fl_hash"))
					ep.flags |=
					    DPFLOW_EDIT_ENCAP_F_FLOWLABEL_HASH;
				else
					cr_assert_fail("encap flag '%s'", tok);
			} else if (!strcmp(tok, "type"))
				ep.type = (uint8_t)tun_by_name(v);
			else if (!strcmp(tok, "ip"))
				ep.ip_version = (uint8_t)num(v);
			else if (!strcmp(tok, "inner_eth"))
				ep.inner_eth = (uint8_t)num(v);
			else if (!strcmp(tok, "ttl"))
				ep.ttl = (uint8_t)num(v);
			else if (!strcmp(tok, "tos"))
				ep.tos = (uint8_t)num(v);
			else if (!strcmp(tok, "eth_src"))
				parse_mac(v, ep.eth_src);
			else if (!strcmp(tok, "eth_dst"))
				parse_mac(v, ep.eth_dst);
			else if (!strcmp(tok, "src"))
				parse_addr(v, ep.src);
			else if (!strcmp(tok, "dst"))
				parse_addr(v, ep.dst);
			else if (!strcmp(tok, "vni"))
				ep.vni = num(v);
			else if (!strcmp(tok, "flow_label"))
				ep.flow_label = num(v);
			else if (!strcmp(tok, "dport"))
				ep.udp_dport = (uint16_t)num(v);
			else if (!strcmp(tok, "sport_min"))
				ep.sport_min = (uint16_t)num(v);
			else if (!strcmp(tok, "sport_max"))
				ep.sport_max = (uint16_t)num(v);
			else if (!strcmp(tok, "opts"))
				ep.opt_len = (uint8_t)parse_hex(
				    v, ep.opts, sizeof(ep.opts));
			else
				cr_assert_fail("encap key '%s'", tok);
			continue;
		}
		cr_assert_not_null(v, "'%s' needs a value", tok);
		if (!strcmp(tok, "src") && a->op == DPFLOW_EDIT_SET_MAC) {
			parse_mac(v, a->u.mac.src);
			a->u.mac.set_src = 1;
		} else if (!strcmp(tok, "dst") &&
			   a->op == DPFLOW_EDIT_SET_MAC) {
			parse_mac(v, a->u.mac.dst);
			a->u.mac.set_dst = 1;
		} else if (!strcmp(tok, "et"))
			a->u.ethertype = (uint16_t)num(v);
		else if (!strcmp(tok, "addr"))
			parse_addr(v, a->u.addr);
		else if (!strcmp(tok, "port"))
			a->u.port = (uint16_t)num(v);
		else if (!strcmp(tok, "dscp"))
			a->u.dscp = (uint8_t)num(v);
		else if (!strcmp(tok, "tpid"))
			a->u.vlan.tpid = (uint16_t)num(v);
		else if (!strcmp(tok, "tci"))
			a->u.vlan.tci = (uint16_t)num(v);
		else if (!strcmp(tok, "type"))
			a->u.tun_type = (uint8_t)tun_by_name(v);
		else if (!strcmp(tok, "layer"))
			fld->layer = (uint8_t)layer_by_name(v);
		else if (!strcmp(tok, "off"))
			fld->off = (uint16_t)num(v);
		else if (!strcmp(tok, "width"))
			fld->width = (uint8_t)num(v);
		else if (!strcmp(tok, "val") && a->op == DPFLOW_EDIT_FIELD_SET)
			parse_hex(v, a->u.set.val, sizeof(a->u.set.val));
		else if (!strcmp(tok, "mask"))
			parse_hex(v, a->u.set.mask, sizeof(a->u.set.mask));
		else if (!strcmp(tok, "delta"))
			a->u.add.delta = num(v);
		else if (!strcmp(tok, "dst") && a->op == DPFLOW_EDIT_FIELD_COPY)
			parse_field_spec(v, &a->u.copy.dst);
		else if (!strcmp(tok, "src") && a->op == DPFLOW_EDIT_FIELD_COPY)
			parse_field_spec(v, &a->u.copy.src);
		else if (!strcmp(tok, "r") && (a->op == DPFLOW_EDIT_REG_SET ||
					       a->op == DPFLOW_EDIT_REG_ADD))
			a->u.reg.dst = (uint8_t)num(v);
		else if (!strcmp(tok, "r"))
			a->u.freg.reg = (uint8_t)num(v);
		else if (!strcmp(tok, "val"))
			a->u.reg.val = num(v);
		else if (!strcmp(tok, "dst"))
			a->u.reg.dst = (uint8_t)num(v);
		else if (!strcmp(tok, "src"))
			a->u.reg.src = (uint8_t)num(v);
		else
			cr_assert_fail("key '%s' of %s", tok,
				       dpflow_edit_op_name(a->op));
	}
	if (a->op == DPFLOW_EDIT_ENCAP)
		cr_assert_eq(dpflow_edit_encap_build(&a->u.encap, &ep, &err), 0,
			     "encap build: %s", err.msg);
}

static unsigned parse_actions(const char *text, struct dpflow_edit_action *a)
{
	char copy[1024], *save = NULL, *part;
	unsigned n = 0;

	cr_assert_lt(strlen(text), sizeof(copy));
	strcpy(copy, text);
	for (part = strtok_r(copy, ";", &save); part;
	     part = strtok_r(NULL, ";", &save)) {
		cr_assert_lt(n, MAX_ACTIONS);
		parse_action(part, &a[n++]);
	}
	return n;
}

/* ---- 1. fixtures -------------------------------------------------------- */

/* Load @in at data_off = @headroom into slot @idx (canaries around) and
 * parse it. */
static struct dpflow_pkt_meta *load(struct dpflow_pool *pool, uint32_t idx,
				    const uint8_t *in, uint32_t len,
				    uint32_t headroom, uint32_t rss)
{
	struct dpflow_pkt_meta *m = dpflow_pool_meta(pool, idx);
	uint8_t *buf = dpflow_pool_buf(pool, idx);

	memset(buf, CANARY, HEADROOM + DATA_ROOM);
	memset(m, 0, sizeof(*m));
	memcpy(buf + headroom, in, len);
	m->data_off = (uint16_t)headroom;
	m->data_len = (uint16_t)len;
	m->rss_hash = rss;
	cr_assert_eq(dpflow_parse_frame(buf + headroom, len, m), 0,
		     "input does not parse");
	return m;
}

static int is_parser_reason(unsigned r)
{
	return r != 0 && r < DPFLOW_DROP_TTL_EXPIRED;
}

/*
 * Run fixture @fx in slot 1 of @pool; reports mismatches with cr_expect
 * (naming the fixture) and returns 0 on the first one, 1 when all held.
 */
static int run_fixture(struct dpflow_pool *pool, const struct edit_fixture *fx)
{
	struct dpflow_edit_action acts[MAX_ACTIONS];
	struct dpflow_pkt_meta *m;
	struct dpflow_error err;
	uint8_t *buf = dpflow_pool_buf(pool, 1);
	uint32_t lo, hi;
	unsigned n, verdict = 0;
	char why[200];
	int expect_bad = !strcmp(fx->verdict, "edit_bad_action");

	cr_assert_leq(fx->headroom, HEADROOM);
	m = load(pool, 1, fx->in, fx->in_len, fx->headroom, fx->rss_hash);
	lo = m->data_off;
	hi = m->data_off + m->data_len;
	n = parse_actions(fx->actions, acts);
	for (unsigned i = 0; i < n && !verdict; i++) {
		if (!expect_bad && dpflow_edit_action_check(&acts[i], &err)) {
			cr_expect_fail("%s: action %u: %s", fx->name, i,
				       err.msg);
			return 0;
		}
		verdict = dpflow_edit_apply(pool, 1, &acts[i]);
		if (m->data_off < lo)
			lo = m->data_off;
		if ((uint32_t)m->data_off + m->data_len > hi)
			hi = m->data_off + m->data_len;
	}

	if (strcmp(dpflow_drop_name(verdict), fx->verdict) ||
	    m->drop != verdict) {
		cr_expect_fail("%s: verdict %s (meta %s), want %s", fx->name,
			       dpflow_drop_name(verdict),
			       dpflow_drop_name(m->drop), fx->verdict);
		return 0;
	}
	if (m->data_len != fx->out_len ||
	    memcmp(buf + m->data_off, fx->out, fx->out_len)) {
		hexdump("got", buf + m->data_off, m->data_len);
		hexdump("want", fx->out, fx->out_len);
		cr_expect_fail("%s: output differs (%s)", fx->name,
			       fx->actions);
		return 0;
	}
	for (uint32_t i = 0; i < HEADROOM + DATA_ROOM; i++) {
		if ((i < lo || i >= hi) && buf[i] != CANARY) {
			cr_expect_fail("%s: slot byte %u outside the frame "
				       "written",
				       fx->name, i);
			return 0;
		}
	}
	if (fx->check_csum && verify_frame(buf + m->data_off, m->data_len, NULL,
					   why, sizeof(why)) < 0) {
		cr_expect_fail("%s: %s", fx->name, why);
		return 0;
	}
	if (!is_parser_reason(verdict))
		expect_meta_consistent(m, buf + m->data_off, fx->name);
	return 1;
}

/* Fixtures run in chunks: one process each (parameters are copied into
 * it by value, so chunk numbers, not pointers). */
#define FIXTURE_CHUNK 32
#define FIXTURE_CHUNKS \
	((DPFLOW_ARRAY_SIZE(edit_fixtures) + FIXTURE_CHUNK - 1) / FIXTURE_CHUNK)

static uint32_t fixture_chunk[FIXTURE_CHUNKS];

ParameterizedTestParameters(pkt_edit, fixtures)
{
	for (uint32_t i = 0; i < FIXTURE_CHUNKS; i++)
		fixture_chunk[i] = i;
	return cr_make_param_array(uint32_t, fixture_chunk, FIXTURE_CHUNKS);
}

ParameterizedTest(uint32_t *chunk, pkt_edit, fixtures)
{
	struct dpflow_pool *pool = pool_new(2);
	uint32_t first = *chunk * FIXTURE_CHUNK, ran = 0, ok = 0;

	for (uint32_t i = first;
	     i < first + FIXTURE_CHUNK && i < DPFLOW_ARRAY_SIZE(edit_fixtures);
	     i++) {
		ok += (uint32_t)run_fixture(pool, &edit_fixtures[i]);
		ran++;
	}
	cr_expect_eq(ok, ran, "fixtures %u..%u: %u of %u passed", first,
		     first + ran - 1, ok, ran);
	dpflow_pool_destroy(pool);
}

Test(pkt_edit, fixture_table_covers_every_action)
{
	unsigned seen[DPFLOW_EDIT__COUNT] = {0}, drops = 0, round_trips = 0;
	struct dpflow_edit_action acts[MAX_ACTIONS];

	for (unsigned i = 0; i < DPFLOW_ARRAY_SIZE(edit_fixtures); i++) {
		const struct edit_fixture *fx = &edit_fixtures[i];
		unsigned n = parse_actions(fx->actions, acts);

		for (unsigned k = 0; k < n; k++)
			seen[acts[k].op]++;
		drops += strcmp(fx->verdict, "none") != 0;
		round_trips += strstr(fx->name, "round trip") != NULL;
	}
	for (unsigned op = 1; op < DPFLOW_EDIT__COUNT; op++)
		cr_expect_gt(seen[op], 0, "no fixture for %s",
			     dpflow_edit_op_name(op));
	cr_expect_geq(drops, 20);
	cr_expect_geq(round_trips, 40);
}

/* ---- 2. random rewrites of random packets ------------------------------- */

struct rpkt {
	uint8_t f[256];
	uint32_t len;
	int v6, vlans, l4; /* l4: 0 TCP, 1 UDP, 2 UDP csum 0, 3 ICMP echo */
	uint32_t l3, l4off;
};

static void fill(uint8_t *p, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		p[i] = (uint8_t)rnd();
}

/* A random valid packet; checksums computed here in full. */
static void random_packet(struct rpkt *p, int v6, int vlans, int l4)
{
	uint8_t *f = p->f;
	uint32_t o = 12, pay = below(41), l4len, hl;
	uint64_t s;

	memset(p, 0, sizeof(*p));
	p->v6 = v6;
	p->vlans = vlans;
	p->l4 = l4;
	fill(f, 12);
	f[0] &= 0xfe;
	f[6] &= 0xfe;
	for (int i = 0; i < vlans; i++) {
		uint16_t tpid = (i == 0 && vlans == 2) ? 0x88a8 : 0x8100;

		f[o] = (uint8_t)(tpid >> 8);
		f[o + 1] = (uint8_t)tpid;
		fill(f + o + 2, 2);
		o += 4;
	}
	f[o] = v6 ? 0x86 : 0x08;
	f[o + 1] = v6 ? 0xdd : 0x00;
	o += 2;
	p->l3 = o;
	hl = v6 ? 40 : 20;
	l4len = (l4 == 0 ? 20 : 8) + pay;
	p->l4off = o + hl;
	fill(f + o, hl + l4len);
	if (v6) {
		f[o] = (uint8_t)(0x60 | (f[o] & 0x0f));
		f[o + 4] = (uint8_t)(l4len >> 8);
		f[o + 5] = (uint8_t)l4len;
		f[o + 6] = l4 == 0 ? 6 : l4 == 3 ? 58 : 17;
		f[o + 7] = (uint8_t)below(256);
	} else {
		f[o] = 0x45;
		f[o + 2] = (uint8_t)((hl + l4len) >> 8);
		f[o + 3] = (uint8_t)(hl + l4len);
		f[o + 6] &= 0x40; /* DF or not, no fragment */
		f[o + 7] = 0;
		f[o + 8] = (uint8_t)below(256);
		f[o + 9] = l4 == 0 ? 6 : l4 == 3 ? 1 : 17;
		f[o + 10] = f[o + 11] = 0;
		s = naive_sum(f + o, 20);
		s = naive_csum(s);
		f[o + 10] = (uint8_t)(s >> 8);
		f[o + 11] = (uint8_t)s;
	}
	o += hl;
	if (l4 == 0) {
		f[o + 12] = 0x50;
	} else if (l4 == 3) {
		f[o] = v6 ? (uint8_t)(128 + below(2)) : (uint8_t)(below(2) * 8);
		f[o + 1] = 0;
	} else {
		/* keep clear of the tunnel ports */
		if (rd16(f + o + 2) == 4789 || rd16(f + o + 2) == 6081)
			f[o + 2] ^= 0x80;
		f[o + 4] = (uint8_t)(l4len >> 8);
		f[o + 5] = (uint8_t)l4len;
	}
	p->len = o + l4len;
	/* L4 checksum */
	{
		uint32_t field = o + (l4 == 0 ? 16 : l4 == 3 ? 2 : 6);

		f[field] = f[field + 1] = 0;
		if (l4 == 2 && !v6)
			return; /* UDP over IPv4 without a checksum */
		s = naive_sum(f + o, l4len);
		if (!(l4 == 3 && !v6))
			s += v6 ? naive_sum(f + p->l3 + 8, 32) + l4len +
				      f[p->l3 + 6]
				: naive_sum(f + p->l3 + 12, 8) + l4len +
				      f[p->l3 + 9];
		s = naive_csum(s);
		if ((l4 == 1 || l4 == 2) && s == 0)
			s = 0xffff;
		f[field] = (uint8_t)(s >> 8);
		f[field + 1] = (uint8_t)s;
	}
}

/* A random field of the frame that avoids structural bytes (walker mask),
 * at a random layer; 0 when none was found. */
static int random_safe_field(const struct dpflow_pkt_meta *m,
			     const uint8_t *mask, unsigned max_width,
			     struct dpflow_edit_field *fd, uint32_t *frame_off)
{
	for (int tries = 0; tries < 20; tries++) {
		unsigned layer = below(DPFLOW_EDIT_LAYER__COUNT);
		uint32_t base = dpflow_edit_layer_off(m, layer), off, w;
		int ok = 1;

		if (base == DPFLOW_EDIT_NO_OFF || base >= m->data_len)
			continue;
		off = base + below(m->data_len - base);
		w = 1 + below(max_width);
		if (off + w > m->data_len)
			w = m->data_len - off;
		for (uint32_t k = 0; k < w; k++)
			ok &= !mask[off + k];
		if (!ok)
			continue;
		fd->layer = (uint8_t)layer;
		fd->off = (uint16_t)(off - base);
		fd->width = (uint8_t)w;
		*frame_off = off;
		return 1;
	}
	return 0;
}

Test(pkt_edit, random_rewrites_match_full_recomputation)
{
	struct dpflow_pool *pool = pool_new(2);
	uint8_t *buf = dpflow_pool_buf(pool, 0);
	uint8_t before[512], mask[512];
	unsigned counts[12] = {0}, drops = 0;
	char why[200];

	rnd_state = 0x9e3779b97f4a7c15ull;
	for (int it = 0; it < 40000; it++) {
		struct rpkt p;
		int v6 = (int)below(2), l4 = (int)below(v6 ? 3 : 4);
		struct dpflow_pkt_meta *m;

		if (v6 && l4 == 2)
			l4 = 1;
		random_packet(&p, v6, (int)below(3), l4);
		m = load(pool, 0, p.f, p.len, 128, 0);

		for (int step = 0; step < 4; step++) {
			struct dpflow_edit_action a;
			uint8_t *f = buf + m->data_off;
			uint32_t l3 = m->outer.l3_off, l4o = m->outer.l4_off;
			uint32_t off = 0, len0 = m->data_len,
				 doff0 = m->data_off;
			unsigned want = 0, kind = below(12), got;
			uint8_t expect[16];
			uint32_t expect_at = 0, expect_n = 0;
			int icmp = m->outer.l4_type == DPFLOW_L4_ICMP ||
				   m->outer.l4_type == DPFLOW_L4_ICMPV6;
			int is6 = m->outer.l3_type == DPFLOW_L3_IPV6;

			memcpy(before, f, m->data_len);
			verify_frame(f, m->data_len, mask, why, sizeof(why));
			memset(&a, 0, sizeof(a));
			switch (kind) {
			case 0:
				a.op = DPFLOW_EDIT_DEC_TTL;
				if (f[l3 + (is6 ? 7 : 8)] <= 1)
					want = DPFLOW_DROP_TTL_EXPIRED;
				expect_at = l3 + (is6 ? 7 : 8);
				expect[0] = (uint8_t)(f[expect_at] - 1);
				expect_n = 1;
				break;
			case 1:
			case 2: /* IPv4 address, sometimes on an IPv6 packet */
				a.op = below(2) ? DPFLOW_EDIT_SET_IPV4_DST
						: DPFLOW_EDIT_SET_IPV4_SRC;
				fill(a.u.addr, 4);
				if (is6)
					want = DPFLOW_DROP_EDIT_NOT_IPV4;
				expect_at =
				    l3 + (a.op == DPFLOW_EDIT_SET_IPV4_DST
					      ? 16
					      : 12);
				memcpy(expect, a.u.addr, 4);
				expect_n = 4;
				break;
			case 3:
				a.op = below(2) ? DPFLOW_EDIT_SET_IPV6_DST
						: DPFLOW_EDIT_SET_IPV6_SRC;
				fill(a.u.addr, 16);
				if (!is6)
					want = DPFLOW_DROP_EDIT_NOT_IPV6;
				expect_at =
				    l3 +
				    (a.op == DPFLOW_EDIT_SET_IPV6_DST ? 24 : 8);
				memcpy(expect, a.u.addr, 16);
				expect_n = 16;
				break;
			case 4:
				a.op = below(2) ? DPFLOW_EDIT_SET_L4_DST
						: DPFLOW_EDIT_SET_L4_SRC;
				a.u.port = (uint16_t)rnd();
				if (a.u.port == 4789 || a.u.port == 6081)
					a.u.port = 1;
				expect_at =
				    l4o + (icmp ? 4
					   : a.op == DPFLOW_EDIT_SET_L4_DST
					       ? 2
					       : 0);
				expect[0] = (uint8_t)(a.u.port >> 8);
				expect[1] = (uint8_t)a.u.port;
				expect_n = 2;
				/* a field write may have made it a non-echo */
				if (icmp && f[l4o] != 0 && f[l4o] != 8 &&
				    f[l4o] != 128 && f[l4o] != 129)
					want = DPFLOW_DROP_EDIT_NO_PORT;
				break;
			case 5:
				a.op = DPFLOW_EDIT_SET_DSCP;
				a.u.dscp = (uint8_t)below(64);
				break;
			case 6:
				a.op = DPFLOW_EDIT_SET_MAC;
				fill(a.u.mac.src, 12);
				a.u.mac.set_src = (uint8_t)below(2);
				a.u.mac.set_dst = (uint8_t)!a.u.mac.set_src;
				break;
			case 7:
				a.op = DPFLOW_EDIT_VLAN_PUSH;
				a.u.vlan.tpid = below(2) ? 0x8100 : 0x88a8;
				a.u.vlan.tci = (uint16_t)rnd();
				if (m->outer.n_vlan == 2)
					want = DPFLOW_DROP_VLAN_TOO_MANY;
				break;
			case 8:
				a.op = DPFLOW_EDIT_VLAN_POP;
				if (m->outer.n_vlan == 0)
					want = DPFLOW_DROP_EDIT_NO_VLAN;
				break;
			case 9:
			case 10:
				a.op = DPFLOW_EDIT_FIELD_SET;
				if (!random_safe_field(m, mask, 16, &a.u.set.f,
						       &off))
					continue;
				fill(a.u.set.val, 16);
				fill(a.u.set.mask, 16);
				expect_at = off;
				expect_n = a.u.set.f.width;
				for (uint32_t k = 0; k < expect_n; k++)
					expect[k] =
					    (uint8_t)((f[off + k] &
						       ~a.u.set.mask[k]) |
						      (a.u.set.val[k] &
						       a.u.set.mask[k]));
				break;
			default:
				a.op = DPFLOW_EDIT_FIELD_ADD;
				if (!random_safe_field(m, mask, 4, &a.u.add.f,
						       &off))
					continue;
				a.u.add.delta = (uint32_t)rnd();
				break;
			}
			counts[kind]++;
			got = dpflow_edit_apply(pool, 0, &a);
			cr_assert_eq(got, want,
				     "it %d step %d kind %u: verdict %s, want "
				     "%s",
				     it, step, kind, dpflow_drop_name(got),
				     dpflow_drop_name(want));
			f = buf + m->data_off;
			if (got) {
				drops++;
				cr_assert_eq(m->data_off, doff0);
				cr_assert_eq(m->data_len, len0);
				cr_assert_arr_eq(f, before, len0,
						 "drop changed the frame");
				break;
			}
			if (expect_n)
				cr_assert_arr_eq(
				    f + expect_at, expect, expect_n,
				    "it %d kind %u: field", it, kind);
			cr_assert_geq(verify_frame(f, m->data_len, NULL, why,
						   sizeof(why)),
				      1, "it %d step %d kind %u: %s", it, step,
				      kind, why);
			expect_meta_consistent(m, f, "random rewrite");
		}
	}
	for (unsigned k = 0; k < 12; k++)
		cr_expect_gt(counts[k], 1000, "kind %u ran %u times", k,
			     counts[k]);
	cr_expect_gt(drops, 1000);
	dpflow_pool_destroy(pool);
}

/* ---- 3. random field writes on every fixture frame ---------------------- */

Test(pkt_edit, random_field_writes_keep_every_checksum)
{
	struct dpflow_pool *pool = pool_new(1);
	uint8_t *buf = dpflow_pool_buf(pool, 0);
	uint8_t mask[2048];
	unsigned frames = 0, writes = 0, inner = 0;
	char why[200];

	rnd_state = 0x1234567887654321ull;
	for (unsigned i = 0; i < DPFLOW_ARRAY_SIZE(edit_fixtures); i++) {
		for (int side = 0; side < 2; side++) {
			const struct edit_fixture *fx = &edit_fixtures[i];
			const uint8_t *fr = side ? fx->out : fx->in;
			uint32_t len = side ? fx->out_len : fx->in_len;
			struct dpflow_pkt_meta pm, *m;

			memset(&pm, 0, sizeof(pm));
			if (dpflow_parse_frame(fr, len, &pm) ||
			    verify_frame(fr, len, mask, why, sizeof(why)) < 0)
				continue;
			frames++;
			m = load(pool, 0, fr, len, 128, 0);
			for (int k = 0; k < 60; k++) {
				struct dpflow_edit_field fd;
				uint8_t val[16], msk[16];
				uint32_t off;
				unsigned r;

				if (!random_safe_field(m, mask, 16, &fd, &off))
					continue;
				fill(val, 16);
				fill(msk, 16);
				if (below(2)) {
					r = dpflow_edit_field_set(
					    pool, 0, &fd, val,
					    below(2) ? msk : NULL);
				} else {
					if (fd.width > 4)
						fd.width = 4;
					r = dpflow_edit_field_add(
					    pool, 0, &fd, (uint32_t)rnd());
				}
				cr_assert_eq(r, 0, "%s: write %s verdict",
					     fx->name, dpflow_drop_name(r));
				writes++;
				inner += fd.layer >= DPFLOW_EDIT_LAYER_TUN;
				cr_assert_geq(
				    verify_frame(buf + m->data_off, m->data_len,
						 NULL, why, sizeof(why)),
				    0,
				    "%s: after a write at layer %u "
				    "off %u width %u: %s",
				    fx->name, fd.layer, fd.off, fd.width, why);
			}
			expect_meta_consistent(m, buf + m->data_off, fx->name);
		}
	}
	cr_expect_gt(frames, 400);
	cr_expect_gt(writes, 20000);
	cr_expect_gt(inner, 1000);
	dpflow_pool_destroy(pool);
}

/* ---- 4. encap then decap ------------------------------------------------ */

Test(pkt_edit, random_encap_decap_round_trips)
{
	static const uint8_t types[] = {DPFLOW_TUN_VXLAN, DPFLOW_TUN_GENEVE,
					DPFLOW_TUN_GRE, DPFLOW_TUN_IPIP};
	struct dpflow_pool *pool = pool_new(1);
	uint8_t *buf = dpflow_pool_buf(pool, 0);
	unsigned per_type[5] = {0};
	char why[200];

	rnd_state = 0xfeedfacecafebeefull;
	for (int it = 0; it < 20000; it++) {
		struct dpflow_edit_encap_params ep;
		struct dpflow_edit_action a, d;
		struct dpflow_error err;
		struct dpflow_pkt_meta *m;
		struct rpkt p;
		uint32_t ulen;
		unsigned r;

		memset(&ep, 0, sizeof(ep));
		ep.type = types[below(4)];
		ep.ip_version = below(2) ? 4 : 6;
		ep.inner_eth = ep.type == DPFLOW_TUN_VXLAN  ? 1
			       : ep.type == DPFLOW_TUN_IPIP ? 0
							    : (uint8_t)below(2);
		ep.ttl = (uint8_t)rnd();
		ep.tos = (uint8_t)rnd();
		if (ep.ip_version == 4)
			ep.flags |= (uint8_t)below(4); /* DF, UDP_CSUM */
		else if (below(2))
			ep.flags |= DPFLOW_EDIT_ENCAP_F_FLOWLABEL_HASH;
		else
			ep.flow_label = (uint32_t)rnd() & 0xfffff;
		if (ep.type == DPFLOW_TUN_GRE && below(2)) {
			ep.flags |= DPFLOW_EDIT_ENCAP_F_GRE_KEY;
			ep.vni = (uint32_t)rnd();
		}
		if (ep.type == DPFLOW_TUN_VXLAN ||
		    ep.type == DPFLOW_TUN_GENEVE) {
			ep.vni = (uint32_t)rnd() & 0xffffff;
			if (below(4) == 0) {
				ep.sport_min = (uint16_t)(1 + below(60000));
				ep.sport_max =
				    (uint16_t)(ep.sport_min + below(5000));
			}
		}
		if (ep.type == DPFLOW_TUN_GENEVE) {
			ep.opt_len = (uint8_t)(4 * below(17));
			fill(ep.opts, ep.opt_len);
			if (below(2))
				ep.flags |= DPFLOW_EDIT_ENCAP_F_GENEVE_CRIT;
		}
		fill(ep.src, 16);
		fill(ep.dst, 16);
		int v6 = (int)below(2), l4 = (int)below(v6 ? 3 : 4);
		if (v6 && l4 == 2)
			l4 = 1;
		random_packet(&p, v6, ep.inner_eth ? (int)below(3) : 0, l4);
		if (ep.inner_eth) {
			fill(ep.eth_src, 6);
			fill(ep.eth_dst, 6);
		} else { /* decap keeps the outer MACs: make them the inner's */
			memcpy(ep.eth_dst, p.f, 6);
			memcpy(ep.eth_src, p.f + 6, 6);
		}
		memset(&a, 0, sizeof(a));
		a.op = DPFLOW_EDIT_ENCAP;
		cr_assert_eq(dpflow_edit_encap_build(&a.u.encap, &ep, &err), 0,
			     "%s", err.msg);
		cr_assert_eq(dpflow_edit_action_check(&a, &err), 0);

		m = load(pool, 0, p.f, p.len, 200,
			 below(4) ? 0 : (uint32_t)rnd());
		r = dpflow_edit_apply(pool, 0, &a);
		cr_assert_eq(r, 0, "it %d encap: %s", it, dpflow_drop_name(r));
		cr_assert_eq(m->tun_type, ep.type, "it %d: parsed as tunnel %u",
			     it, m->tun_type);
		cr_assert_eq(m->outer.l3_type, ep.ip_version == 4
						   ? DPFLOW_L3_IPV4
						   : DPFLOW_L3_IPV6);
		if (ep.type != DPFLOW_TUN_IPIP &&
		    (ep.type != DPFLOW_TUN_GRE ||
		     (ep.flags & DPFLOW_EDIT_ENCAP_F_GRE_KEY)))
			cr_assert_eq(m->tun_id, ep.vni);
		if (m->outer.l4_type == DPFLOW_L4_UDP) {
			uint32_t lo = ep.sport_min ? ep.sport_min : 32768;
			uint32_t hi = ep.sport_min ? ep.sport_max : 60999;

			cr_assert(m->outer.sport >= lo &&
				      (m->outer.sport < hi ||
				       (lo == hi && m->outer.sport == lo)),
				  "sport %u outside %u..%u", m->outer.sport, lo,
				  hi);
			ulen = rd16(buf + m->data_off + m->outer.l4_off + 4);
			cr_assert_eq(m->outer.l4_off + ulen, m->data_len);
		}
		cr_assert_eq(m->outer.l3_off + m->outer.l3_len, m->data_len);
		cr_assert_eq(m->outer.ttl, ep.ttl ? ep.ttl : 64);
		cr_assert_geq(verify_frame(buf + m->data_off, m->data_len, NULL,
					   why, sizeof(why)),
			      1, "it %d: %s", it, why);
		expect_meta_consistent(m, buf + m->data_off, "encap");

		memset(&d, 0, sizeof(d));
		d.op = DPFLOW_EDIT_DECAP;
		d.u.tun_type = below(2) ? ep.type : 0;
		r = dpflow_edit_apply(pool, 0, &d);
		cr_assert_eq(r, 0, "it %d decap: %s", it, dpflow_drop_name(r));
		cr_assert_eq(m->data_len, p.len, "it %d: length after decap",
			     it);
		cr_assert_arr_eq(buf + m->data_off, p.f, p.len,
				 "it %d: decap did not give the packet back",
				 it);
		expect_meta_consistent(m, buf + m->data_off, "decap");
		per_type[ep.type]++;
	}
	for (unsigned t = DPFLOW_TUN_VXLAN; t <= DPFLOW_TUN_IPIP; t++)
		cr_expect_gt(per_type[t], 4000);
	dpflow_pool_destroy(pool);
}

/* ---- 5. RFC 1624 against full recomputation ----------------------------- */

Test(pkt_edit, incremental_checksum_equals_full_1m)
{
	uint8_t d[20];
	unsigned zero = 0;

	rnd_state = 42;
	for (int it = 0; it < 1000000; it++) {
		uint32_t n = 2 * (2 + below(9)), j = 2 * below(n / 2);
		uint16_t c0, c1, inc, old;

		/* one constant non-zero word, as every header covered has
		 * (version, protocol): all-zero data is the one case where
		 * +0 and -0 cannot be told apart incrementally */
		fill(d, n);
		d[(j + 2) % n] |= 0x40;
		c0 = naive_csum(naive_sum(d, n));
		old = rd16(d + j);
		if (it % 4 == 0) {
			/* make the new sum fold to 0xffff: checksum 0x0000 */
			uint64_t rest = naive_sum(d, n) - old;
			uint16_t w = naive_csum(rest);

			d[j] = (uint8_t)(w >> 8);
			d[j + 1] = (uint8_t)w;
		} else {
			d[j] = (uint8_t)rnd();
			d[j + 1] = (uint8_t)rnd();
		}
		c1 = naive_csum(naive_sum(d, n));
		inc = dpflow_csum_adjust(c0, (uint16_t)~old + rd16(d + j));
		zero += c1 == 0;
		cr_assert_eq(inc, c1,
			     "it %d: 0x%04x -> incremental 0x%04x, full 0x%04x",
			     it, c0, inc, c1);
	}
	cr_expect_gt(zero, 200000);
	/* a non-canonical 0xffff with no net change: a full recomputation
	 * of non-zero data gives 0x0000, never 0xffff */
	cr_expect_eq(dpflow_csum_adjust(0xffff, 0), 0x0000);
	cr_expect_eq(dpflow_csum_adjust(0xffff, 0xffff), 0x0000);
	cr_expect_eq(dpflow_csum_adjust(0x0000, 0), 0x0000);
}

/* ---- 6. control path, registers, burst ---------------------------------- */

static void valid_params(struct dpflow_edit_encap_params *p, unsigned type,
			 unsigned ver)
{
	memset(p, 0, sizeof(*p));
	p->type = (uint8_t)type;
	p->ip_version = (uint8_t)ver;
	p->inner_eth = type != DPFLOW_TUN_IPIP;
}

Test(pkt_edit, encap_build_rejects_and_names_the_field)
{
	struct dpflow_edit_encap_params p;
	struct dpflow_edit_encap t;
	struct dpflow_edit_action a;
	struct dpflow_error err;
	struct dpflow_pool *pool = pool_new(1);
	uint8_t frame[64] = {0};

#define EXPECT_BAD(field_name, stmt)                                           \
	do {                                                                   \
		valid_params(&p, DPFLOW_TUN_VXLAN, 4);                         \
		stmt;                                                          \
		memset(&err, 0, sizeof(err));                                  \
		cr_expect_eq(dpflow_edit_encap_build(&t, &p, &err), -EINVAL,   \
			     "%s accepted", #stmt);                            \
		cr_expect_eq(err.code, EINVAL);                                \
		cr_expect_str_eq(err.field ? err.field : "(null)", field_name, \
				 "%s: field %s (%s)", #stmt, err.field,        \
				 err.msg);                                     \
		cr_expect_eq(t.magic, 0, "%s: template left usable", #stmt);   \
	} while (0)

	EXPECT_BAD("type", p.type = 0);
	EXPECT_BAD("type", p.type = 9);
	EXPECT_BAD("ip_version", p.ip_version = 5);
	EXPECT_BAD("inner_eth", p.inner_eth = 0);
	EXPECT_BAD("inner_eth", (p.type = DPFLOW_TUN_IPIP, p.inner_eth = 1));
	EXPECT_BAD("inner_eth", (p.type = DPFLOW_TUN_GRE, p.inner_eth = 2));
	EXPECT_BAD("flags", p.flags = 0x80);
	EXPECT_BAD("flags", p.flags = DPFLOW_EDIT_ENCAP_F_GRE_KEY);
	EXPECT_BAD("flags", p.flags = DPFLOW_EDIT_ENCAP_F_GENEVE_CRIT);
	EXPECT_BAD("flags", p.flags = DPFLOW_EDIT_ENCAP_F_FLOWLABEL_HASH);
	EXPECT_BAD("flags",
		   (p.ip_version = 6, p.flags = DPFLOW_EDIT_ENCAP_F_DF));
	EXPECT_BAD("opt_len", p.opt_len = 4);
	EXPECT_BAD("opt_len", (p.type = DPFLOW_TUN_GENEVE, p.opt_len = 6));
	EXPECT_BAD("opt_len", (p.type = DPFLOW_TUN_GENEVE, p.opt_len = 68));
	EXPECT_BAD("vni", p.vni = 0x1000000);
	EXPECT_BAD("vni", (p.type = DPFLOW_TUN_GRE, p.vni = 5));
	EXPECT_BAD("vni",
		   (p.type = DPFLOW_TUN_IPIP, p.inner_eth = 0, p.vni = 5));
	EXPECT_BAD("flow_label", (p.ip_version = 6, p.flow_label = 0x100000));
	EXPECT_BAD("flow_label", p.flow_label = 1);
	EXPECT_BAD("udp_dport", (p.type = DPFLOW_TUN_GRE, p.udp_dport = 1));
	EXPECT_BAD("sport_min", p.sport_max = 100);
	EXPECT_BAD("sport_max", (p.sport_min = 100, p.sport_max = 99));
#undef EXPECT_BAD

	/* a zeroed (failed) template is refused by the data path */
	memset(&a, 0, sizeof(a));
	a.op = DPFLOW_EDIT_ENCAP;
	cr_expect_eq(dpflow_edit_action_check(&a, &err), -EINVAL);
	cr_expect_str_eq(err.field, "encap");
	frame[12] = 0x08;
	frame[13] = 0x06;
	load(pool, 0, frame, sizeof(frame), 128, 0);
	cr_expect_eq(dpflow_edit_apply(pool, 0, &a),
		     DPFLOW_DROP_EDIT_BAD_ACTION);
	cr_expect_eq(dpflow_pool_meta(pool, 0)->data_off, 128);

	/* every type and version builds, with the advertised lengths */
	for (unsigned ty = DPFLOW_TUN_VXLAN; ty <= DPFLOW_TUN_IPIP; ty++) {
		for (unsigned v = 4; v <= 6; v += 2) {
			valid_params(&p, ty, v);
			cr_expect_eq(dpflow_edit_encap_build(&t, &p, &err), 0,
				     "%u/%u: %s", ty, v, err.msg);
			cr_expect_eq(t.l4_off, v == 4 ? 34 : 54);
			cr_expect_eq(t.hdr_len,
				     t.l4_off + (ty == DPFLOW_TUN_GRE	 ? 4
						 : ty == DPFLOW_TUN_IPIP ? 0
									 : 16));
		}
	}
	valid_params(&p, DPFLOW_TUN_GENEVE, 6);
	p.opt_len = DPFLOW_EDIT_GENEVE_OPT_MAX;
	cr_expect_eq(dpflow_edit_encap_build(&t, &p, &err), 0);
	cr_expect_eq(t.hdr_len, DPFLOW_EDIT_ENCAP_HDR_MAX);
	dpflow_pool_destroy(pool);
}

Test(pkt_edit, action_check_names_the_field)
{
	struct dpflow_edit_action a;
	struct dpflow_error err;

#define EXPECT_CHECK(want_field, stmt)                                         \
	do {                                                                   \
		memset(&a, 0, sizeof(a));                                      \
		stmt;                                                          \
		memset(&err, 0, sizeof(err));                                  \
		if (want_field) {                                              \
			cr_expect_eq(dpflow_edit_action_check(&a, &err),       \
				     -EINVAL, "%s accepted", #stmt);           \
			cr_expect_str_eq(err.field ? err.field : "(null)",     \
					 (const char *)(want_field), "%s: %s", \
					 #stmt, err.msg);                      \
		} else {                                                       \
			cr_expect_eq(dpflow_edit_action_check(&a, &err), 0,    \
				     "%s: %s", #stmt, err.msg);                \
		}                                                              \
	} while (0)

	EXPECT_CHECK(NULL, a.op = DPFLOW_EDIT_NOP);
	EXPECT_CHECK("op", a.op = DPFLOW_EDIT__COUNT);
	EXPECT_CHECK("op", a.op = 200);
	EXPECT_CHECK("mac", a.op = DPFLOW_EDIT_SET_MAC);
	EXPECT_CHECK(NULL, (a.op = DPFLOW_EDIT_SET_MAC, a.u.mac.set_dst = 1));
	EXPECT_CHECK("dscp", (a.op = DPFLOW_EDIT_SET_DSCP, a.u.dscp = 64));
	EXPECT_CHECK(NULL, (a.op = DPFLOW_EDIT_SET_DSCP, a.u.dscp = 63));
	EXPECT_CHECK("tpid", (a.op = DPFLOW_EDIT_VLAN_PUSH, a.u.vlan.tpid = 1));
	EXPECT_CHECK(NULL,
		     (a.op = DPFLOW_EDIT_VLAN_PUSH, a.u.vlan.tpid = 0x88a8));
	EXPECT_CHECK("tun_type", (a.op = DPFLOW_EDIT_DECAP, a.u.tun_type = 5));
	EXPECT_CHECK(NULL, (a.op = DPFLOW_EDIT_DECAP, a.u.tun_type = 4));
	EXPECT_CHECK("width", a.op = DPFLOW_EDIT_FIELD_SET);
	EXPECT_CHECK("width",
		     (a.op = DPFLOW_EDIT_FIELD_SET, a.u.set.f.width = 17));
	EXPECT_CHECK("layer", (a.op = DPFLOW_EDIT_FIELD_SET,
			       a.u.set.f.width = 1, a.u.set.f.layer = 7));
	EXPECT_CHECK("offset", (a.op = DPFLOW_EDIT_FIELD_SET,
				a.u.set.f.width = 2, a.u.set.f.off = 0xffff));
	EXPECT_CHECK(NULL, (a.op = DPFLOW_EDIT_FIELD_SET, a.u.set.f.width = 16,
			    a.u.set.f.layer = DPFLOW_EDIT_LAYER_INNER_L4));
	EXPECT_CHECK("width",
		     (a.op = DPFLOW_EDIT_FIELD_ADD, a.u.add.f.width = 5));
	EXPECT_CHECK("width", (a.op = DPFLOW_EDIT_FIELD_COPY,
			       a.u.copy.dst.width = 2, a.u.copy.src.width = 4));
	EXPECT_CHECK(NULL, (a.op = DPFLOW_EDIT_FIELD_COPY,
			    a.u.copy.dst.width = 4, a.u.copy.src.width = 4));
	EXPECT_CHECK("reg", (a.op = DPFLOW_EDIT_REG_SET, a.u.reg.dst = 4));
	EXPECT_CHECK("reg", (a.op = DPFLOW_EDIT_REG_COPY, a.u.reg.src = 4));
	EXPECT_CHECK(NULL, (a.op = DPFLOW_EDIT_REG_COPY, a.u.reg.dst = 3,
			    a.u.reg.src = 3));
	EXPECT_CHECK("reg", (a.op = DPFLOW_EDIT_FIELD_FROM_REG,
			     a.u.freg.reg = 9, a.u.freg.f.width = 1));
	EXPECT_CHECK("width",
		     (a.op = DPFLOW_EDIT_REG_FROM_FIELD, a.u.freg.f.width = 8));
#undef EXPECT_CHECK
}

Test(pkt_edit, names_of_ops_and_drop_reasons)
{
	static const char *const reasons[] = {
	    "ttl_expired",	   "edit_no_headroom",
	    "edit_frame_too_long", "edit_not_ip",
	    "edit_not_ipv4",	   "edit_not_ipv6",
	    "edit_no_l4_port",	   "edit_no_vlan",
	    "edit_no_tunnel",	   "edit_field_out_of_range",
	    "edit_bad_action"};

	for (unsigned op = 0; op < DPFLOW_EDIT__COUNT; op++) {
		cr_assert_not_null(dpflow_edit_op_name(op), "op %u", op);
		for (unsigned o2 = 0; o2 < op; o2++)
			cr_expect_str_neq(dpflow_edit_op_name(op),
					  dpflow_edit_op_name(o2));
	}
	cr_expect_null(dpflow_edit_op_name(DPFLOW_EDIT__COUNT));
	for (unsigned i = 0; i < DPFLOW_ARRAY_SIZE(reasons); i++) {
		unsigned r;

		for (r = 0; r < DPFLOW_DROP__COUNT; r++)
			if (!strcmp(dpflow_drop_name(r), reasons[i]))
				break;
		cr_expect_lt(r, DPFLOW_DROP__COUNT, "no drop reason %s",
			     reasons[i]);
	}
	cr_expect_lt(DPFLOW_DROP__COUNT, 256, "meta->drop is 8 bits");
}

Test(pkt_edit, registers)
{
	struct dpflow_pkt_meta m;

	memset(&m, 0, sizeof(m));
	cr_expect_eq(
	    dpflow_edit_reg_impl(&m, DPFLOW_EDIT_REG_SET, 1, 0, 0xfffffffe), 0);
	cr_expect_eq(dpflow_edit_reg_impl(&m, DPFLOW_EDIT_REG_ADD, 1, 0, 3), 0);
	cr_expect_eq(m.reg[1], 1, "add wraps modulo 2^32");
	cr_expect_eq(dpflow_edit_reg_impl(&m, DPFLOW_EDIT_REG_COPY, 3, 1, 0),
		     0);
	cr_expect_eq(m.reg[3], 1);
	cr_expect_eq(m.reg[0], 0);
	cr_expect_eq(m.reg[2], 0);
	cr_expect_eq(dpflow_edit_reg_impl(&m, DPFLOW_EDIT_REG_SET, 4, 0, 1),
		     DPFLOW_DROP_EDIT_BAD_ACTION);
	cr_expect_eq(dpflow_edit_reg_impl(&m, DPFLOW_EDIT_REG_COPY, 0, 4, 1),
		     DPFLOW_DROP_EDIT_BAD_ACTION);
	cr_expect_eq(dpflow_edit_reg_impl(&m, DPFLOW_EDIT_DEC_TTL, 0, 0, 1),
		     DPFLOW_DROP_EDIT_BAD_ACTION);
	cr_expect_eq(m.drop, DPFLOW_DROP_EDIT_BAD_ACTION);
}

/* The same action bytes anywhere in memory: no pointer inside. */
Test(pkt_edit, action_is_position_independent_and_burst_counts)
{
	struct dpflow_pool *pool = pool_new(64);
	struct dpflow_edit_encap_params ep;
	struct dpflow_edit_action a, *moved;
	struct dpflow_error err;
	uint32_t idx[64];
	struct rpkt p;
	uint8_t *first;
	uint16_t ok;

	rnd_state = 7;
	memset(&ep, 0, sizeof(ep));
	ep.type = DPFLOW_TUN_GENEVE;
	ep.ip_version = 6;
	ep.inner_eth = 1;
	ep.opt_len = 8;
	memset(&a, 0, sizeof(a));
	a.op = DPFLOW_EDIT_ENCAP;
	cr_assert_eq(dpflow_edit_encap_build(&a.u.encap, &ep, &err), 0);
	moved = malloc(sizeof(a) * 3);
	cr_assert_not_null(moved);
	memcpy(moved + 2, &a, sizeof(a));
	memset(&a, 0xee, sizeof(a)); /* the original is gone */

	random_packet(&p, 0, 0, 0);
	for (uint32_t i = 0; i < 64; i++) {
		idx[i] = i;
		load(pool, i, p.f, p.len, i % 2 ? 128 : 40, 0);
	}
	ok = dpflow_edit_apply_burst(pool, idx, 64, moved + 2);
	cr_expect_eq(ok, 32, "half the packets lack the headroom");
	first = dpflow_pkt_data(pool, 1);
	for (uint32_t i = 0; i < 64; i++) {
		struct dpflow_pkt_meta *m = dpflow_pool_meta(pool, i);

		if (i % 2) {
			cr_expect_eq(m->drop, 0);
			cr_expect_eq(m->tun_type, DPFLOW_TUN_GENEVE);
			cr_expect_arr_eq(dpflow_pkt_data(pool, i), first,
					 m->data_len);
		} else {
			cr_expect_eq(m->drop, DPFLOW_DROP_EDIT_NO_HEADROOM);
			cr_expect_eq(m->data_off, 40);
			cr_expect_eq(m->data_len, p.len);
		}
	}
	free(moved);
	dpflow_pool_destroy(pool);
}
