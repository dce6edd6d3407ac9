/*
 * CT value blocks, NAT bindings with reply keys and port pools, and
 * replacement under pressure (lib/flow/ct.h, ct_impl.h).
 *
 * Hand-written cases first (values in both directions, a NAT binding
 * found by its reply, pool uniqueness and return, the replacement
 * policy, reply keys in the control calls, image copies, parameter
 * checks). Then 1M random operations against a naive reference model
 * written here: a plain list of connections keyed by their tuples, the
 * state table of test_ct.c, the documented rules for values, bindings,
 * room and expiry, checked after every operation (connection, state,
 * direction, flags, value, counters, pool counters, which slots a new
 * connection took). Last, two threads on one table: every packet of a
 * flow gets that flow's connection and an untorn value, one connection
 * and one binding per flow, unique keys, counters that add up.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow/ct.h"

#define MS    1000000ull
#define MISS  DPFLOW_TABLE_MISS
#define F_FIN DPFLOW_TCP_FIN
#define F_SYN DPFLOW_TCP_SYN
#define F_RST DPFLOW_TCP_RST
#define F_PSH DPFLOW_TCP_PSH
#define F_ACK DPFLOW_TCP_ACK
#define F_URG DPFLOW_TCP_URG
#define V_REG DPFLOW_CT_VAL_REG

/* ---- helpers ------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t rng_below(uint64_t *s, uint64_t n)
{
	return n ? rng_next(s) % n : 0;
}

static void ip4(uint8_t *a, uint32_t host)
{
	uint32_t n = htonl(host);

	memset(a, 0, 16);
	memcpy(a, &n, 4);
}

static struct dpflow_ct_pkt pkt4(uint32_t src, uint16_t sport, uint32_t dst,
				 uint16_t dport, uint8_t proto, uint8_t flags)
{
	struct dpflow_ct_pkt p;

	memset(&p, 0, sizeof(p));
	ip4(p.src, src);
	ip4(p.dst, dst);
	p.sport = sport;
	p.dport = dport;
	p.proto = proto;
	p.family = 4;
	p.tcp_flags = flags;
	return p;
}

static struct dpflow_ct_pkt rev(const struct dpflow_ct_pkt *p, uint8_t flags)
{
	struct dpflow_ct_pkt r = *p;

	memcpy(r.src, p->dst, 16);
	memcpy(r.dst, p->src, 16);
	r.sport = p->dport;
	r.dport = p->sport;
	r.tcp_flags = flags;
	return r;
}

static bool tup_eq(const struct dpflow_ct_pkt *a, const struct dpflow_ct_pkt *b)
{
	return !memcmp(a->src, b->src, 16) && !memcmp(a->dst, b->dst, 16) &&
	       a->sport == b->sport && a->dport == b->dport &&
	       a->proto == b->proto && a->family == b->family;
}

static struct dpflow_ct_image *make(struct dpflow_ct_params *p)
{
	struct dpflow_error err = {0};
	struct dpflow_ct_image *ct = dpflow_ct_create(p, &err);

	cr_assert_not_null(ct, "%s", err.msg);
	return ct;
}

static void stats(struct dpflow_ct_image *ct, struct dpflow_ct_stats *st)
{
	dpflow_ct_stats_get(ct, st);
}

static struct dpflow_ct_pool_stats pool_stats(struct dpflow_ct_image *ct,
					      unsigned pool)
{
	struct dpflow_ct_pool_stats s;

	cr_assert_eq(dpflow_ct_pool_stats_get(ct, pool, &s, NULL), 0);
	return s;
}

/* ---- values -------------------------------------------------------------- */

Test(ct_values, set_on_create_and_read_in_both_directions)
{
	struct dpflow_ct_params p;
	struct dpflow_ct_image *ct;
	struct dpflow_ct_value init, init2, v, want;
	struct dpflow_ct_result r;
	struct dpflow_ct_info info;
	struct dpflow_ct_pkt syn =
	    pkt4(0xc0000201, 40000, 0xcb007101, 443, 6, F_SYN);
	struct dpflow_ct_pkt back = rev(&syn, F_SYN | F_ACK);
	uint32_t conn;

	dpflow_ct_params_default(&p, 100);
	ct = make(&p);
	memset(&init, 0xa5, sizeof(init)); /* parts not flagged: dropped */
	init.flags = DPFLOW_CT_VAL_BACKEND | V_REG(0) | V_REG(2) | 0x8000;
	init.backend = 7;
	init.reg[0] = 0x11111111;
	init.reg[2] = 0x33;
	memset(&want, 0, sizeof(want));
	want.flags = DPFLOW_CT_VAL_BACKEND | V_REG(0) | V_REG(2);
	want.pool = DPFLOW_CT_POOL_NONE;
	want.backend = 7;
	want.reg[0] = 0x11111111;
	want.reg[2] = 0x33;

	dpflow_ct_track(ct, &syn, 1 * MS, 99, &init, &r, &v);
	cr_assert(r.flags == DPFLOW_CT_R_NEW && r.user == 99 &&
		  r.state == DPFLOW_CT_SYN_SENT);
	cr_assert_eq(memcmp(&v, &want, sizeof(v)), 0);
	conn = r.conn;
	/* later packets, either way, read it; their init is not used */
	memset(&init2, 0, sizeof(init2));
	init2.flags = V_REG(1);
	init2.reg[1] = 5;
	memset(&v, 0xee, sizeof(v));
	dpflow_ct_track(ct, &back, 2 * MS, 1, &init2, &r, &v);
	cr_assert(r.conn == conn && r.dir == DPFLOW_CT_DIR_REPLY &&
		  r.state == DPFLOW_CT_SYN_RECV && r.flags == 0 &&
		  r.user == 99);
	cr_assert_eq(memcmp(&v, &want, sizeof(v)), 0);
	syn.tcp_flags = F_ACK;
	memset(&v, 0xee, sizeof(v));
	dpflow_ct_track(ct, &syn, 3 * MS, 1, NULL, &r, &v);
	cr_assert(r.conn == conn && r.dir == DPFLOW_CT_DIR_ORIG &&
		  r.state == DPFLOW_CT_ESTABLISHED);
	cr_assert_eq(memcmp(&v, &want, sizeof(v)), 0);
	/* read-only lookups, both ways */
	memset(&v, 0xee, sizeof(v));
	dpflow_ct_lookup_val(ct, &back, 3 * MS, &r, &v);
	cr_assert(r.conn == conn && r.dir == DPFLOW_CT_DIR_REPLY);
	cr_assert_eq(memcmp(&v, &want, sizeof(v)), 0);
	/* the user word is its own: set_user leaves the block alone */
	cr_assert_eq(dpflow_ct_set_user(ct, conn, 1234, NULL), 0);
	dpflow_ct_process(ct, &syn, 4 * MS, 0, &r);
	cr_assert(r.conn == conn && r.user == 1234);
	cr_assert_eq(dpflow_ct_get(ct, conn, 4 * MS, &info, NULL), 0);
	cr_assert_eq(memcmp(&info.value, &want, sizeof(want)), 0);
	cr_assert_eq(info.reply_slot, MISS);
	syn.tcp_flags = 0;
	cr_assert(tup_eq(&info.orig, &syn));
	{
		struct dpflow_ct_pkt rr = rev(&syn, 0);

		cr_assert(tup_eq(&info.reply, &rr));
	}
	/* no connection: zeros */
	{
		struct dpflow_ct_pkt o = pkt4(1, 2, 3, 4, 17, 0);

		memset(&v, 0xee, sizeof(v));
		dpflow_ct_lookup_val(ct, &o, 4 * MS, &r, &v);
		cr_assert_eq(r.conn, MISS);
		memset(&want, 0, sizeof(want));
		cr_assert_eq(memcmp(&v, &want, sizeof(v)), 0);
		/* a packet that cannot open one: zeros too */
		o.proto = 6;
		o.tcp_flags = F_SYN | F_ACK;
		memset(&v, 0xee, sizeof(v));
		dpflow_ct_track(ct, &o, 4 * MS, 0, &init, &r, &v);
		cr_assert(r.conn == MISS && r.drop == DPFLOW_CT_DROP_INVALID);
		cr_assert_eq(memcmp(&v, &want, sizeof(v)), 0);
		/* created without an init block: empty, no pool */
		o.proto = 17;
		dpflow_ct_track(ct, &o, 4 * MS, 0, NULL, &r, &v);
		cr_assert_eq(r.flags, DPFLOW_CT_R_NEW);
		want.pool = DPFLOW_CT_POOL_NONE;
		cr_assert_eq(memcmp(&v, &want, sizeof(v)), 0);
	}
	dpflow_ct_destroy(ct);
}

Test(ct_values, ipv6_value_and_the_burst_call)
{
	struct dpflow_ct_params p;
	struct dpflow_ct_image *ct;
	struct dpflow_ct_pkt pk[40];
	struct dpflow_ct_value inits[40], vals[40];
	const struct dpflow_ct_value *ip[40];
	struct dpflow_ct_result res[40];
	uint32_t user[40];

	dpflow_ct_params_default(&p, 1000);
	ct = make(&p);
	for (int i = 0; i < 40; i++) {
		memset(&pk[i], 0, sizeof(pk[i]));
		pk[i].family = 6;
		pk[i].proto = 17;
		pk[i].src[0] = 0x20;
		pk[i].src[15] = (uint8_t)(i % 20);
		pk[i].dst[0] = 0x30;
		pk[i].dst[15] = 1;
		pk[i].sport = 1000;
		pk[i].dport = 53;
		if (i >= 20) /* the same 20 flows back */
			pk[i] = rev(&pk[i - 20], 0);
		memset(&inits[i], 0, sizeof(inits[i]));
		inits[i].flags = (uint16_t)(V_REG(3) | DPFLOW_CT_VAL_DNAT);
		inits[i].reg[3] = (uint32_t)i * 7;
		memset(inits[i].nat_dst, 0x40 + i, 16);
		inits[i].nat_dport = (uint16_t)(5000 + i);
		ip[i] = i % 5 ? &inits[i] : NULL;
		user[i] = (uint32_t)i;
	}
	/* DNAT keys a second time: the table needs its NAT room */
	dpflow_ct_destroy(ct);
	p.flags |= DPFLOW_CT_F_NAT;
	ct = make(&p);
	cr_assert_eq(dpflow_ct_track_burst(ct, pk, 40, MS, user, ip, res, vals),
		     40);
	for (int i = 0; i < 40; i++) {
		int f = i % 20;
		const struct dpflow_ct_value *want = ip[f];

		cr_assert_eq(res[i].conn, res[f].conn);
		cr_assert_eq(res[i].flags, i < 20 ? DPFLOW_CT_R_NEW : 0);
		cr_assert_eq(res[i].user, (uint32_t)f);
		if (!want) {
			cr_assert_eq(vals[i].flags, 0);
			continue;
		}
		cr_assert(vals[i].flags == want->flags &&
			      vals[i].reg[3] == want->reg[3] &&
			      !memcmp(vals[i].nat_dst, want->nat_dst, 16) &&
			      vals[i].nat_dport == want->nat_dport,
			  "packet %d", i);
	}
	/* the burst call without values equals the single calls */
	dpflow_ct_process_burst(ct, pk, 40, 2 * MS, NULL, res);
	for (int i = 0; i < 40; i++)
		cr_assert_eq(res[i].conn, res[i % 20].conn);
	dpflow_ct_destroy(ct);
}

/* ---- NAT ----------------------------------------------------------------- */

/* A NAT table: pool 0 is IPv4 @n_addrs x ports 4000.., pool 1 IPv6. */
static struct dpflow_ct_image *make_nat(uint32_t max_conns, uint32_t flags,
					unsigned n_addrs, unsigned n_ports)
{
	struct dpflow_ct_params p;

	dpflow_ct_params_default(&p, max_conns);
	p.flags = flags | DPFLOW_CT_F_NAT;
	p.n_pools = 2;
	p.pools[0].family = 4;
	p.pools[0].n_addrs = (uint8_t)n_addrs;
	for (unsigned a = 0; a < n_addrs; a++)
		ip4(p.pools[0].addr[a], 0xc6336401u + a); /* 198.51.100.1 */
	p.pools[0].port_lo = 4000;
	p.pools[0].port_hi = (uint16_t)(4000 + n_ports - 1);
	p.pools[1].family = 6;
	p.pools[1].n_addrs = 1;
	p.pools[1].addr[0][0] = 0xfd;
	p.pools[1].addr[0][15] = 1;
	p.pools[1].port_lo = 1;
	p.pools[1].port_hi = 65535;
	return make(&p);
}

/* SNAT from pool 0 and DNAT to @backend:8080. */
static struct dpflow_ct_value nat_init(uint32_t backend)
{
	struct dpflow_ct_value v;

	memset(&v, 0, sizeof(v));
	v.flags = DPFLOW_CT_VAL_SNAT | DPFLOW_CT_VAL_POOL | DPFLOW_CT_VAL_DNAT |
		  DPFLOW_CT_VAL_BACKEND;
	v.pool = 0;
	ip4(v.nat_dst, backend);
	v.nat_dport = 8080;
	v.backend = backend & 0xff;
	return v;
}

/* The packet a backend answers with: nat_dst:nat_dport -> nat_src:port */
static struct dpflow_ct_pkt reply_of(const struct dpflow_ct_value *v,
				     uint8_t proto, uint8_t flags)
{
	struct dpflow_ct_pkt p;

	memset(&p, 0, sizeof(p));
	memcpy(p.src, v->nat_dst, 16);
	memcpy(p.dst, v->nat_src, 16);
	p.sport = v->nat_dport;
	p.dport = v->nat_sport;
	p.proto = proto;
	p.family = 4;
	p.tcp_flags = flags;
	return p;
}

Test(ct_values, nat_binding_is_found_by_its_reply)
{
	struct dpflow_ct_image *ct = make_nat(100, DPFLOW_CT_F_TCP_LOOSE, 1, 4);
	struct dpflow_ct_value init = nat_init(0x0a000005), v, v2;
	struct dpflow_ct_pkt syn =
	    pkt4(0xc000020a, 1234, 0xcb007101, 80, 6, F_SYN);
	struct dpflow_ct_pkt rp, tr;
	struct dpflow_ct_result r;
	struct dpflow_ct_info info;
	struct dpflow_error err = {0};
	struct dpflow_ct_stats st;
	uint8_t a[16];
	uint32_t conn;

	dpflow_ct_track(ct, &syn, MS, 5, &init, &r, &v);
	cr_assert_eq(r.flags, DPFLOW_CT_R_NEW);
	conn = r.conn;
	ip4(a, 0xc6336401);
	cr_assert_eq(memcmp(v.nat_src, a, 16), 0);
	cr_assert(v.nat_sport >= 4000 && v.nat_sport <= 4003);
	ip4(a, 0x0a000005);
	cr_assert(!memcmp(v.nat_dst, a, 16) && v.nat_dport == 8080 &&
		  v.pool == 0 && v.backend == 5 &&
		  v.flags == (DPFLOW_CT_VAL_SNAT | DPFLOW_CT_VAL_POOL |
			      DPFLOW_CT_VAL_DNAT | DPFLOW_CT_VAL_BACKEND));
	/* the backend's SYN-ACK to the SNAT address and port */
	rp = reply_of(&v, 6, F_SYN | F_ACK);
	dpflow_ct_track(ct, &rp, 2 * MS, 0, &init, &r, &v2);
	cr_assert(r.conn == conn && r.dir == DPFLOW_CT_DIR_REPLY &&
		  r.state == DPFLOW_CT_SYN_RECV && r.user == 5 && r.flags == 0);
	cr_assert_eq(memcmp(&v, &v2, sizeof(v)), 0);
	syn.tcp_flags = F_ACK;
	dpflow_ct_track(ct, &syn, 3 * MS, 0, NULL, &r, NULL);
	cr_assert(r.conn == conn && r.state == DPFLOW_CT_ESTABLISHED);
	/* the translated packet the initiator's way is ORIG; the untranslated
	 * reverse still finds it (the canonical key has both ends) */
	tr = rev(&rp, F_ACK);
	dpflow_ct_lookup_val(ct, &tr, 3 * MS, &r, &v2);
	cr_assert(r.conn == conn && r.dir == DPFLOW_CT_DIR_ORIG &&
		  r.state == DPFLOW_CT_ESTABLISHED);
	cr_assert_eq(memcmp(&v, &v2, sizeof(v)), 0);
	tr = rev(&syn, F_ACK);
	dpflow_ct_lookup(ct, &tr, 3 * MS, &r);
	cr_assert(r.conn == conn && r.dir == DPFLOW_CT_DIR_REPLY);
	/* the control view */
	cr_assert_eq(dpflow_ct_get(ct, conn, 3 * MS, &info, NULL), 0);
	rp.tcp_flags = 0;
	cr_assert(tup_eq(&info.reply, &rp));
	cr_assert(info.reply_slot != MISS && info.reply_slot != conn);
	cr_assert_eq(memcmp(&info.value, &v, sizeof(v)), 0);
	cr_assert_eq(dpflow_ct_count(ct), 1);
	cr_assert_eq(dpflow_ct_get(ct, info.reply_slot, 3 * MS, &info, &err),
		     -ENOENT);
	cr_assert(strstr(err.msg, "reply key of connection"), "%s", err.msg);
	cr_assert_eq(dpflow_ct_remove(ct, info.reply_slot, &err), -ENOENT);
	cr_assert_eq(dpflow_ct_set_user(ct, info.reply_slot, 1, &err), -ENOENT);
	cr_assert_eq(pool_stats(ct, 0).bound, 1);
	/* gone with its connection, and the port back in the pool */
	cr_assert_eq(dpflow_ct_remove(ct, conn, NULL), 0);
	cr_assert_eq(pool_stats(ct, 0).bound, 0);
	rp.tcp_flags = F_ACK;
	dpflow_ct_lookup(ct, &rp, 3 * MS, &r);
	cr_assert_eq(r.conn, MISS);
	stats(ct, &st);
	cr_assert(st.live == 0 && st.stat[DPFLOW_CT_STAT_CREATED] == 1 &&
		  st.stat[DPFLOW_CT_STAT_REMOVED] == 1);
	cr_assert_eq(dpflow_ct_count(ct), 0);
	dpflow_ct_destroy(ct);
}

/* Flow @i of a set: client 192.0.2.x:(1000 + i) to 203.0.113.1:80. */
static struct dpflow_ct_pkt client(uint32_t i, uint8_t proto)
{
	return pkt4(0xc0000200u + i % 200, (uint16_t)(1000 + i), 0xcb007101,
		    proto == 1 ? 0 : 80, proto, proto == 6 ? F_SYN : 0);
}

Test(ct_values, pool_ports_are_unique_and_return)
{
	struct dpflow_ct_image *ct = make_nat(100, 0, 1, 4);
	struct dpflow_ct_value a = nat_init(0x0a000001),
			       b = nat_init(0x0a000002);
	struct dpflow_ct_value v[8], vx;
	struct dpflow_ct_result r[8], rx;
	struct dpflow_ct_stats st;
	struct dpflow_ct_pkt px;
	bool seen[4] = {false};
	uint32_t freed;

	/* four flows to backend a take the four ports */
	for (uint32_t i = 0; i < 4; i++) {
		struct dpflow_ct_pkt pk = client(i, 17);

		dpflow_ct_track(ct, &pk, MS, 0, &a, &r[i], &v[i]);
		cr_assert_eq(r[i].flags, DPFLOW_CT_R_NEW, "flow %u", i);
		cr_assert(!seen[v[i].nat_sport - 4000], "port %u twice",
			  v[i].nat_sport);
		seen[v[i].nat_sport - 4000] = true;
	}
	/* a fifth finds no free reply key */
	px = client(4, 17);
	dpflow_ct_track(ct, &px, MS, 0, &a, &rx, &vx);
	cr_assert(rx.conn == MISS && rx.drop == DPFLOW_CT_DROP_NAT);
	stats(ct, &st);
	cr_assert(st.stat[DPFLOW_CT_STAT_NAT_EXHAUSTED] == 1 &&
		  st.stat[DPFLOW_CT_STAT_CREATED] == 4 &&
		  st.stat[DPFLOW_CT_STAT_REFUSED] == 0 && st.live == 4);
	cr_assert(pool_stats(ct, 0).bound == 4 &&
		  pool_stats(ct, 0).exhausted == 1 &&
		  pool_stats(ct, 0).size == 4);
	/* to another backend the same ports make other reply keys */
	for (uint32_t i = 4; i < 8; i++) {
		struct dpflow_ct_pkt pk = client(i, 17);

		dpflow_ct_track(ct, &pk, MS, 0, &b, &r[i], &v[i]);
		cr_assert_eq(r[i].flags, DPFLOW_CT_R_NEW, "flow %u", i);
	}
	cr_assert_eq(pool_stats(ct, 0).bound, 8);
	/* each reply finds its own connection */
	for (uint32_t i = 0; i < 8; i++) {
		struct dpflow_ct_pkt rp = reply_of(&v[i], 17, 0);

		dpflow_ct_lookup(ct, &rp, MS, &rx);
		cr_assert(rx.conn == r[i].conn && rx.dir == DPFLOW_CT_DIR_REPLY,
			  "reply %u", i);
	}
	/* one of backend a's goes: flow 8 (to a) gets exactly its port */
	freed = v[2].nat_sport;
	cr_assert_eq(dpflow_ct_remove(ct, r[2].conn, NULL), 0);
	cr_assert_eq(pool_stats(ct, 0).bound, 7);
	px = client(8, 17);
	dpflow_ct_track(ct, &px, MS, 0, &a, &rx, &vx);
	cr_assert(rx.flags == DPFLOW_CT_R_NEW && vx.nat_sport == freed);
	/* expiry returns them too */
	cr_assert_eq(dpflow_ct_age(ct, 31000 * MS, NULL, 0, NULL, NULL), 8);
	cr_assert(pool_stats(ct, 0).bound == 0 && dpflow_ct_count(ct) == 0);
	for (uint32_t i = 10; i < 14; i++) {
		struct dpflow_ct_pkt pk = client(i, 17);

		dpflow_ct_track(ct, &pk, 32000 * MS, 0, &a, &rx, &vx);
		cr_assert_eq(rx.flags, DPFLOW_CT_R_NEW, "flow %u", i);
	}
	dpflow_ct_destroy(ct);
}

Test(ct_values, bindings_without_ports_and_explicit_ones)
{
	struct dpflow_ct_image *ct = make_nat(100, 0, 2, 4);
	struct dpflow_ct_value a = nat_init(0x0a000001), x, v;
	struct dpflow_ct_result r;
	struct dpflow_ct_stats st;
	uint8_t addr[2][16];

	/* ICMP: no ports, so a binding is an address: two of them */
	for (uint32_t i = 0; i < 2; i++) {
		struct dpflow_ct_pkt pk = client(i, 1);

		dpflow_ct_track(ct, &pk, MS, 0, &a, &r, &v);
		cr_assert_eq(r.flags, DPFLOW_CT_R_NEW);
		cr_assert(v.nat_sport == 0 && v.nat_dport == 0);
		memcpy(addr[i], v.nat_src, 16);
	}
	cr_assert_neq(memcmp(addr[0], addr[1], 16), 0);
	{
		struct dpflow_ct_pkt pk = client(2, 1);

		dpflow_ct_track(ct, &pk, MS, 0, &a, &r, &v);
		cr_assert_eq(r.drop, DPFLOW_CT_DROP_NAT);
	}
	/* an explicit SNAT binding: one try; a second flow on the same
	 * binding and backend would share its reply key */
	memset(&x, 0, sizeof(x));
	x.flags = DPFLOW_CT_VAL_SNAT | DPFLOW_CT_VAL_DNAT;
	x.pool = 3; /* ignored without POOL */
	ip4(x.nat_src, 0xc6336499);
	x.nat_sport = 7777;
	ip4(x.nat_dst, 0x0a000009);
	x.nat_dport = 53;
	for (uint32_t i = 0; i < 2; i++) {
		struct dpflow_ct_pkt pk = client(10 + i, 17);

		dpflow_ct_track(ct, &pk, MS, 0, &x, &r, &v);
		if (i == 0) {
			cr_assert(r.flags == DPFLOW_CT_R_NEW &&
				  v.pool == DPFLOW_CT_POOL_NONE &&
				  v.nat_sport == 7777);
		} else {
			cr_assert(r.conn == MISS &&
				  r.drop == DPFLOW_CT_DROP_NAT);
		}
	}
	/* a pool of the wrong family, or none at that index */
	{
		struct dpflow_ct_pkt pk = client(20, 17);
		struct dpflow_ct_value w = a;

		w.pool = 1; /* IPv6 */
		dpflow_ct_track(ct, &pk, MS, 0, &w, &r, &v);
		cr_assert_eq(r.drop, DPFLOW_CT_DROP_NAT);
		cr_assert_eq(pool_stats(ct, 1).exhausted, 1);
		w.pool = 7;
		dpflow_ct_track(ct, &pk, MS, 0, &w, &r, &v);
		cr_assert_eq(r.drop, DPFLOW_CT_DROP_NAT);
	}
	stats(ct, &st);
	cr_assert(st.stat[DPFLOW_CT_STAT_NAT_EXHAUSTED] == 4 &&
		  st.stat[DPFLOW_CT_STAT_CREATED] == 3);
	cr_assert(pool_stats(ct, 0).bound == 2 &&
		  pool_stats(ct, 0).exhausted == 1);
	dpflow_ct_destroy(ct);
}

/* ---- replacement --------------------------------------------------------- */

/*
 * @n flows whose two buckets are the same two (found by trying sources):
 * client 10.0.x.y:port to 203.0.113.9:53, flow i over protocol
 * @protos[i] (TCP flows get @tcp_flags[i]).
 */
static void same_buckets(struct dpflow_ct_image *ct, struct dpflow_ct_pkt *out,
			 unsigned n, const uint8_t *protos,
			 const uint8_t *tcp_flags)
{
	uint32_t b1 = MISS, b2 = MISS;
	unsigned got = 0;

	for (uint32_t i = 0; got < n; i++) {
		struct dpflow_ct_pkt pk = pkt4(
		    0x0a000000u + i, (uint16_t)(2000 + i % 7), 0xcb007109, 53,
		    protos[got], protos[got] == 6 ? tcp_flags[got] : 0);
		struct dpflow_ct_key k;
		struct dpflow_ct_loc l;

		cr_assert_lt(i, 10000000u);
		dpflow_ct_key_make(&pk, &k);
		dpflow_ct_locate(ct, dpflow_ct_hash(&k, ct->seed), &l);
		if (b1 == MISS) {
			b1 = l.b1;
			b2 = l.b2;
		}
		if ((l.b1 == b1 && l.b2 == b2) || (l.b1 == b2 && l.b2 == b1))
			out[got++] = pk;
	}
}

static struct dpflow_ct_image *make_flags(uint32_t max_conns, uint32_t flags)
{
	struct dpflow_ct_params p;

	dpflow_ct_params_default(&p, max_conns);
	p.flags = flags;
	return make(&p);
}

Test(ct_values, half_open_replaces_half_open_never_established)
{
	struct dpflow_ct_image *ct =
	    make_flags(1000, DPFLOW_CT_F_TCP_LOOSE | DPFLOW_CT_F_REPLACE);
	uint8_t protos[20];
	struct dpflow_ct_pkt f[20];
	struct dpflow_ct_result r;
	struct dpflow_ct_stats st;

	memset(protos, 17, sizeof(protos));
	same_buckets(ct, f, 20, protos, NULL);
	/* 16 flows fill the two buckets; 0..7 established (replied),
	 * 8..15 half-open; each one seen at its own millisecond */
	for (uint32_t i = 0; i < 16; i++) {
		dpflow_ct_process(ct, &f[i], (10 + i) * MS, i, &r);
		cr_assert_eq(r.flags, DPFLOW_CT_R_NEW, "flow %u", i);
		if (i < 8) {
			struct dpflow_ct_pkt b = rev(&f[i], 0);

			dpflow_ct_process(ct, &b, (10 + i) * MS, 0, &r);
			cr_assert_eq(r.state, DPFLOW_CT_UDP_REPLIED);
		}
	}
	/* flow 8 refreshed: 9 is now the least recently used half-open
	 * one (older established ones stay), and flow 16 takes its place */
	dpflow_ct_process(ct, &f[8], 40 * MS, 0, &r);
	dpflow_ct_process(ct, &f[16], 41 * MS, 16, &r);
	cr_assert_eq(r.flags, DPFLOW_CT_R_NEW);
	for (uint32_t i = 0; i < 17; i++) {
		dpflow_ct_lookup(ct, &f[i], 41 * MS, &r);
		cr_assert((r.conn == MISS) == (i == 9), "flow %u", i);
	}
	stats(ct, &st);
	cr_assert(st.stat[DPFLOW_CT_STAT_REPLACED] == 1 &&
		  st.stat[DPFLOW_CT_STAT_REFUSED] == 0 && st.live == 16);
	/* all established now: a half-open flow is refused, nobody goes */
	for (uint32_t i = 8; i < 17; i++) {
		struct dpflow_ct_pkt b = rev(&f[i], 0);

		if (i == 9)
			continue;
		dpflow_ct_process(ct, &b, 42 * MS, 0, &r);
		cr_assert_eq(r.state, DPFLOW_CT_UDP_REPLIED);
	}
	dpflow_ct_process(ct, &f[17], 43 * MS, 0, &r);
	cr_assert(r.conn == MISS && r.drop == DPFLOW_CT_DROP_NO_SLOT);
	stats(ct, &st);
	cr_assert(st.stat[DPFLOW_CT_STAT_REPLACED] == 1 &&
		  st.stat[DPFLOW_CT_STAT_REFUSED] == 1 && st.live == 16 &&
		  st.stat[DPFLOW_CT_STAT_CREATED] ==
		      st.live + st.stat[DPFLOW_CT_STAT_REPLACED]);
	for (uint32_t i = 0; i < 17; i++) {
		dpflow_ct_lookup(ct, &f[i], 43 * MS, &r);
		cr_assert((r.conn == MISS) == (i == 9), "flow %u", i);
	}
	dpflow_ct_destroy(ct);

	/* without REPLACE the same half-open flow 16 is refused */
	ct = make_flags(1000, DPFLOW_CT_F_TCP_LOOSE);
	for (uint32_t i = 0; i < 16; i++)
		dpflow_ct_process(ct, &f[i], (10 + i) * MS, i, &r);
	dpflow_ct_process(ct, &f[16], 41 * MS, 16, &r);
	cr_assert(r.conn == MISS && r.drop == DPFLOW_CT_DROP_NO_SLOT);
	stats(ct, &st);
	cr_assert(st.stat[DPFLOW_CT_STAT_REPLACED] == 0 &&
		  st.stat[DPFLOW_CT_STAT_REFUSED] == 1);
	dpflow_ct_destroy(ct);
}

Test(ct_values, established_replaces_half_open_first_then_the_oldest)
{
	struct dpflow_ct_image *ct =
	    make_flags(1000, DPFLOW_CT_F_TCP_LOOSE | DPFLOW_CT_F_REPLACE);
	uint8_t protos[20], flags[20];
	struct dpflow_ct_pkt f[20];
	struct dpflow_ct_result r;
	struct dpflow_ct_stats st;

	/* TCP: 0..7 picked up established (ACK), 8..15 half-open (SYN),
	 * 16..19 established pickups to come */
	memset(protos, 6, sizeof(protos));
	for (unsigned i = 0; i < 20; i++)
		flags[i] = i >= 8 && i < 16 ? F_SYN : F_ACK;
	same_buckets(ct, f, 20, protos, flags);
	for (uint32_t i = 0; i < 16; i++) {
		dpflow_ct_process(ct, &f[i], (10 + i) * MS, i, &r);
		cr_assert(r.flags == DPFLOW_CT_R_NEW &&
			      r.state == (i < 8 ? DPFLOW_CT_ESTABLISHED
						: DPFLOW_CT_SYN_SENT),
			  "flow %u", i);
	}
	/* a new established flow takes the least recently used half-open
	 * one (flow 8), though established ones are older */
	dpflow_ct_process(ct, &f[16], 50 * MS, 16, &r);
	cr_assert_eq(r.state, DPFLOW_CT_ESTABLISHED);
	dpflow_ct_lookup(ct, &f[8], 50 * MS, &r);
	cr_assert_eq(r.conn, MISS);
	/* the rest of the half-open ones finish their handshake */
	for (uint32_t i = 9; i < 16; i++) {
		struct dpflow_ct_pkt sa = rev(&f[i], F_SYN | F_ACK), ack = f[i];

		ack.tcp_flags = F_ACK;
		dpflow_ct_process(ct, &sa, 51 * MS, 0, &r);
		dpflow_ct_process(ct, &ack, 51 * MS, 0, &r);
		cr_assert_eq(r.state, DPFLOW_CT_ESTABLISHED, "flow %u", i);
	}
	/* all established: the next pickup replaces the oldest, flow 0 */
	dpflow_ct_process(ct, &f[17], 52 * MS, 17, &r);
	cr_assert_eq(r.flags, DPFLOW_CT_R_NEW);
	for (uint32_t i = 0; i < 18; i++) {
		dpflow_ct_lookup(ct, &f[i], 52 * MS, &r);
		cr_assert((r.conn == MISS) == (i == 0 || i == 8), "flow %u", i);
	}
	/* and a SYN is refused */
	f[18].tcp_flags = F_SYN;
	dpflow_ct_process(ct, &f[18], 53 * MS, 0, &r);
	cr_assert(r.conn == MISS && r.drop == DPFLOW_CT_DROP_NO_SLOT);
	stats(ct, &st);
	cr_assert(st.stat[DPFLOW_CT_STAT_REPLACED] == 2 &&
		  st.stat[DPFLOW_CT_STAT_REFUSED] == 1 &&
		  st.stat[DPFLOW_CT_STAT_EXPIRED] == 0);
	dpflow_ct_destroy(ct);
}

Test(ct_values, expired_connections_go_before_live_ones)
{
	struct dpflow_ct_params p;
	struct dpflow_ct_image *ct;
	uint8_t protos[18], flags[18];
	struct dpflow_ct_pkt f[18];
	struct dpflow_ct_result r;
	struct dpflow_ct_stats st;

	dpflow_ct_params_default(&p, 1000);
	p.flags = DPFLOW_CT_F_TCP_LOOSE | DPFLOW_CT_F_REPLACE;
	p.timeout_ms[DPFLOW_CT_UDP_REPLIED] = 5;
	ct = make(&p);
	/* 0..14 half-open TCP, 15 a replied UDP flow that expires; the
	 * newest one: LRU would pick flow 0 */
	for (unsigned i = 0; i < 18; i++) {
		protos[i] = i == 15 ? 17 : 6;
		flags[i] = F_SYN;
	}
	same_buckets(ct, f, 18, protos, flags);
	for (uint32_t i = 0; i < 16; i++) {
		dpflow_ct_process(ct, &f[i], (10 + i) * MS, i, &r);
		cr_assert_eq(r.flags, DPFLOW_CT_R_NEW);
	}
	{
		struct dpflow_ct_pkt b = rev(&f[15], 0);

		dpflow_ct_process(ct, &b, 25 * MS, 0, &r);
		cr_assert_eq(r.state, DPFLOW_CT_UDP_REPLIED);
	}
	dpflow_ct_process(ct, &f[16], 30 * MS, 16, &r);
	cr_assert_eq(r.flags, DPFLOW_CT_R_NEW);
	for (uint32_t i = 0; i < 17; i++) {
		dpflow_ct_lookup(ct, &f[i], 30 * MS, &r);
		cr_assert((r.conn == MISS) == (i == 15), "flow %u", i);
	}
	stats(ct, &st);
	cr_assert(st.stat[DPFLOW_CT_STAT_EXPIRED] == 1 &&
		  st.stat[DPFLOW_CT_STAT_REPLACED] == 0);
	/* then the least recently used half-open one: flow 0 */
	dpflow_ct_process(ct, &f[17], 31 * MS, 17, &r);
	cr_assert_eq(r.flags, DPFLOW_CT_R_NEW);
	dpflow_ct_lookup(ct, &f[0], 31 * MS, &r);
	cr_assert_eq(r.conn, MISS);
	stats(ct, &st);
	cr_assert(st.stat[DPFLOW_CT_STAT_EXPIRED] == 1 &&
		  st.stat[DPFLOW_CT_STAT_REPLACED] == 1);
	dpflow_ct_destroy(ct);
}

Test(ct_values, at_max_conns_replace_frees_a_connection_of_the_buckets)
{
	struct dpflow_ct_image *ct = make_flags(4, DPFLOW_CT_F_REPLACE);
	struct dpflow_ct_result r;
	struct dpflow_ct_stats st;
	uint32_t made = 0, refused = 0;

	/* 4 half-open UDP flows fill max_conns; later ones replace one of
	 * their buckets' (there are only 2 buckets) */
	for (uint32_t i = 0; i < 30; i++) {
		struct dpflow_ct_pkt u = pkt4(0x0a000000u + i, 1, 9, 2, 17, 0);

		dpflow_ct_process(ct, &u, (1 + i) * MS, i, &r);
		made += r.conn != MISS;
		refused += r.conn == MISS;
		stats(ct, &st);
		cr_assert_leq(st.live, 4);
	}
	stats(ct, &st);
	cr_assert(made == 30 && refused == 0 && st.live == 4 &&
		  st.stat[DPFLOW_CT_STAT_REPLACED] == 26);
	dpflow_ct_destroy(ct);
}

Test(ct_values, a_replaced_binding_takes_its_reply_key_along)
{
	struct dpflow_ct_image *ct =
	    make_nat(1000, DPFLOW_CT_F_TCP_LOOSE | DPFLOW_CT_F_REPLACE, 1, 4);
	uint8_t protos[17];
	struct dpflow_ct_pkt f[17];
	struct dpflow_ct_value init = nat_init(0x0a000001), v0, v;
	struct dpflow_ct_result r;
	struct dpflow_ct_stats st;

	memset(protos, 17, sizeof(protos));
	same_buckets(ct, f, 17, protos, NULL);
	/* flow 0 NATed (its reply key lives in other buckets), 1..15 not */
	dpflow_ct_track(ct, &f[0], 10 * MS, 0, &init, &r, &v0);
	cr_assert_eq(r.flags, DPFLOW_CT_R_NEW);
	for (uint32_t i = 1; i < 16; i++) {
		dpflow_ct_track(ct, &f[i], (10 + i) * MS, 0, NULL, &r, NULL);
		cr_assert_eq(r.flags, DPFLOW_CT_R_NEW);
	}
	cr_assert_eq(pool_stats(ct, 0).bound, 1);
	dpflow_ct_track(ct, &f[16], 40 * MS, 0, NULL, &r, NULL);
	cr_assert_eq(r.flags, DPFLOW_CT_R_NEW);
	/* flow 0 was the oldest: gone, its reply too, its port free */
	{
		struct dpflow_ct_pkt rp = reply_of(&v0, 17, 0);

		dpflow_ct_lookup(ct, &rp, 40 * MS, &r);
		cr_assert_eq(r.conn, MISS);
		dpflow_ct_lookup(ct, &f[0], 40 * MS, &r);
		cr_assert_eq(r.conn, MISS);
	}
	cr_assert_eq(pool_stats(ct, 0).bound, 0);
	stats(ct, &st);
	cr_assert(st.stat[DPFLOW_CT_STAT_REPLACED] == 1 && st.live == 16);
	/* its port is free again: four new flows to the same backend take
	 * the pool's four ports */
	{
		struct dpflow_ct_pkt o =
		    pkt4(0x0b000001, 1, 0xcb007109, 53, 17, 0);
		bool same = false;

		for (uint32_t i = 0; i < 4; i++) {
			o.sport = (uint16_t)(1 + i);
			dpflow_ct_track(ct, &o, 41 * MS, 0, &init, &r, &v);
			cr_assert_eq(r.flags, DPFLOW_CT_R_NEW, "flow %u", i);
			same |= v.nat_sport == v0.nat_sport;
		}
		cr_assert(same, "port %u never given again", v0.nat_sport);
		cr_assert_eq(pool_stats(ct, 0).bound, 4);
	}
	dpflow_ct_destroy(ct);
}

/* ---- images and parameters ----------------------------------------------- */

Test(ct_values, a_copy_keeps_bindings_and_reply_keys)
{
	struct dpflow_ct_image *ct = make_nat(100, 0, 1, 16);
	struct dpflow_ct_value init = nat_init(0x0a000001), v[10], w;
	struct dpflow_ct_result r[10], q;
	size_t bytes = dpflow_ct_image_bytes(ct);
	void *mem = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
	struct dpflow_ct_image *cp = (struct dpflow_ct_image *)mem;

	for (uint32_t i = 0; i < 10; i++) {
		struct dpflow_ct_pkt pk = client(i, 17);

		dpflow_ct_track(ct, &pk, MS, i, &init, &r[i], &v[i]);
	}
	cr_assert_eq(dpflow_ct_image_copy(mem, bytes, ct, NULL), 0);
	for (uint32_t i = 0; i < 10; i++) {
		struct dpflow_ct_pkt rp = reply_of(&v[i], 17, 0);

		dpflow_ct_track(cp, &rp, 2 * MS, 0, NULL, &q, &w);
		cr_assert(q.conn == r[i].conn && q.dir == DPFLOW_CT_DIR_REPLY &&
			  q.user == i && !memcmp(&w, &v[i], sizeof(w)));
	}
	/* each image has its own pool */
	{
		struct dpflow_ct_pkt pk = client(50, 17);

		dpflow_ct_track(cp, &pk, 2 * MS, 0, &init, &q, &w);
		cr_assert_eq(q.flags, DPFLOW_CT_R_NEW);
	}
	cr_assert(pool_stats(cp, 0).bound == 11 &&
		  pool_stats(ct, 0).bound == 10);
	free(mem);
	dpflow_ct_destroy(ct);
}

Test(ct_values, params_checks_and_sizes)
{
	struct dpflow_ct_params p;
	struct dpflow_error err = {0};
	struct dpflow_ct_pool_stats ps;
	struct dpflow_ct_image *ct;

	dpflow_ct_params_default(&p, 100);
	cr_assert_eq(dpflow_ct_image_size_params(&p),
		     dpflow_ct_image_size(100));
	cr_assert_eq(dpflow_ct_image_size_params(NULL), 0);
	p.flags |= DPFLOW_CT_F_NAT; /* 300 slots: 64 buckets, not 32 */
	cr_assert_eq(dpflow_ct_image_size_params(&p),
		     256 + 64 * 64 + 256 + 512 * 128);
	p.n_pools = 1;
	p.pools[0].family = 4;
	p.pools[0].n_addrs = 1;
	p.pools[0].port_lo = 1;
	p.pools[0].port_hi = 1;
	cr_assert_eq(dpflow_ct_image_size_params(&p),
		     256 + 192 + 64 * 64 + 256 + 512 * 128);
	ct = make(&p);
	cr_assert_eq(dpflow_ct_pool_stats_get(ct, 1, &ps, &err), -EINVAL);
	cr_assert_str_eq(err.field, "pool");
	dpflow_ct_destroy(ct);
	p.n_pools = DPFLOW_CT_POOLS_MAX + 1;
	cr_assert_null(dpflow_ct_create(&p, &err));
	cr_assert_str_eq(err.field, "n_pools");
	p.n_pools = 2;
	p.pools[1] = p.pools[0];
	p.pools[1].family = 5;
	cr_assert_null(dpflow_ct_create(&p, &err));
	cr_assert_str_eq(err.field, "pools");
	cr_assert(strstr(err.msg, "pools[1].family 5"), "%s", err.msg);
	p.pools[1].family = 6;
	p.pools[1].n_addrs = DPFLOW_CT_POOL_ADDRS_MAX + 1;
	cr_assert_null(dpflow_ct_create(&p, &err));
	cr_assert(strstr(err.msg, "pools[1].n_addrs"), "%s", err.msg);
	p.pools[1].n_addrs = 1;
	p.pools[1].port_lo = 9;
	p.pools[1].port_hi = 8;
	cr_assert_null(dpflow_ct_create(&p, &err));
	cr_assert(strstr(err.msg, "pools[1] ports 9-8"), "%s", err.msg);
	p.pools[1].port_lo = 0;
	p.pools[1].port_hi = 8;
	cr_assert_null(dpflow_ct_create(&p, &err));
	p.pools[1].port_lo = 1;
	p.flags = 0x100;
	cr_assert_null(dpflow_ct_create(&p, &err));
	cr_assert_str_eq(err.field, "flags");
	p.flags = DPFLOW_CT_F_NAT | DPFLOW_CT_F_REPLACE;
	ct = make(&p);
	cr_assert_eq(pool_stats(ct, 1).size, 8);
	cr_assert_eq(pool_stats(ct, 0).size, 1);
	dpflow_ct_destroy(ct);
}

/* ---- random operations against a naive reference model ------------------- */

/*
 * The model keeps the connections as a plain list: tuples as sent, the
 * state, the last valid time, the value, the slots the tracker gave it
 * (learnt from its results: the model checks that they were free and in
 * the documented bucket, and uses them to know which connections share
 * buckets: dpflow_ct_locate says which buckets a key may use). Keys are
 * compared as tuples (a connection answers to its tuple and the reverse,
 * and with a binding to the translated tuple and its reverse).
 */

/* The TCP table of test_ct.c, written from the documented machine. */
enum { SS = DPFLOW_CT_SYN_SENT, SR, ES, FW, CW, LA, TW, CL };
enum { xIV = 100, xIG, xRO };
static const uint8_t model_tcp[CL + 1][8] = {
    /*        SYN o SYN r  SA o  SA r  FIN a FIN b ACK a ACK b */
    [SS] = {SS, SR, xIV, SR, xIV, xIV, xIV, xIG},
    [SR] = {xIG, xIV, SR, xIG, FW, FW, ES, SR},
    [ES] = {xIG, xIV, xIV, xIG, FW, FW, ES, ES},
    [FW] = {xIG, xIV, xIV, xIG, FW, LA, FW, CW},
    [CW] = {xIG, xIV, xIV, xIG, CW, LA, CW, CW},
    [LA] = {xIG, xIV, xIV, xIG, LA, LA, TW, LA},
    [TW] = {xRO, xIV, xIV, xIG, TW, TW, TW, TW},
    [CL] = {xRO, xIV, xIV, xIG, CL, CL, CL, CL},
};

static bool model_flags_valid(uint8_t f)
{
	static const uint8_t ok[] = {
	    F_SYN,	   F_SYN | F_URG, F_SYN | F_ACK,	 F_RST,
	    F_RST | F_ACK, F_FIN | F_ACK, F_FIN | F_ACK | F_URG, F_ACK,
	    F_ACK | F_URG};

	f &= (uint8_t) ~(F_PSH | 0x40 | 0x80);
	for (size_t i = 0; i < sizeof(ok); i++)
		if (f == ok[i])
			return true;
	return false;
}

#define M_CONNS 256
#define M_SLOTS 512

struct mconn {
	bool used; /* in the table: holds slots, counts as live */
	bool dead; /* marked expired by a packet */
	bool alias;
	struct dpflow_ct_pkt orig, trans; /* tcp_flags 0 */
	uint32_t slot, aslot;
	uint8_t state;
	bool fin_by_init;
	uint64_t last_ms;
	uint32_t user;
	struct dpflow_ct_value val;
};

struct mpool {
	uint8_t family, n_addrs;
	uint8_t addr[DPFLOW_CT_POOL_ADDRS_MAX][16];
	uint16_t lo, hi, tries;
};

struct model {
	struct dpflow_ct_image *ct; /* for dpflow_ct_locate only */
	struct mconn c[M_CONNS];
	int owner[M_SLOTS]; /* connection holding the slot, or -1 */
	unsigned pend[M_SLOTS / DPFLOW_CT_SLOTS]; /* claimed, not written */
	uint32_t n_slots, max_conns, flags;
	uint32_t timeout[DPFLOW_CT_STATE_COUNT];
	unsigned n_pools;
	struct mpool pool[2];
	uint64_t stat[DPFLOW_CT_STAT__COUNT], live;
	uint64_t bound[2], exhausted[2];
};

static bool m_expired(const struct model *m, const struct mconn *c,
		      uint64_t now_ms)
{
	uint32_t to = m->timeout[c->state];

	return to && now_ms - c->last_ms >= to;
}

/* The direction @p has for @c when it is one of its keys: 0 orig, 1
 * reply; -1 not its key. */
static int m_dir(const struct mconn *c, const struct dpflow_ct_pkt *p)
{
	struct dpflow_ct_pkt r;

	if (tup_eq(p, &c->orig))
		return 0;
	r = rev(&c->orig, 0);
	if (tup_eq(p, &r))
		return 1;
	if (!c->alias)
		return -1;
	if (tup_eq(p, &c->trans))
		return 0;
	r = rev(&c->trans, 0);
	return tup_eq(p, &r) ? 1 : -1;
}

/* The live connection holding key @p, or -1; expired ones met are marked
 * dead with @kill. */
static int m_find(struct model *m, const struct dpflow_ct_pkt *p,
		  uint64_t now_ms, bool kill, int *dir)
{
	for (int i = 0; i < M_CONNS; i++) {
		struct mconn *c = &m->c[i];
		int d;

		if (!c->used || c->dead || (d = m_dir(c, p)) < 0)
			continue;
		if (m_expired(m, c, now_ms)) {
			if (kill)
				c->dead = true;
			continue;
		}
		*dir = d;
		return i;
	}
	return -1;
}

static void m_kill(struct model *m, int id, unsigned stat)
{
	struct mconn *c = &m->c[id];

	m->owner[c->slot] = -1;
	if (c->alias)
		m->owner[c->aslot] = -1;
	if ((c->val.flags & DPFLOW_CT_VAL_POOL) && c->alias)
		m->bound[c->val.pool]--;
	c->used = false;
	m->live--;
	m->stat[stat]++;
}

struct mloc {
	uint32_t b[2];
	uint64_t h;
};

static struct mloc m_loc(struct model *m, const struct dpflow_ct_pkt *p)
{
	struct dpflow_ct_key k;
	struct dpflow_ct_loc l;
	struct mloc o;

	dpflow_ct_key_make(p, &k);
	o.h = dpflow_ct_hash(&k, m->ct->seed);
	dpflow_ct_locate(m->ct, o.h, &l);
	o.b[0] = l.b1;
	o.b[1] = l.b2;
	return o;
}

static unsigned m_free(const struct model *m, uint32_t b)
{
	unsigned n = 0;

	for (unsigned s = 0; s < DPFLOW_CT_SLOTS; s++)
		n += m->owner[b * DPFLOW_CT_SLOTS + s] < 0;
	return n - m->pend[b];
}

static bool m_established(uint8_t st)
{
	return st == ES || st == DPFLOW_CT_UDP_REPLIED ||
	       st == DPFLOW_CT_ICMP_REPLIED || st == DPFLOW_CT_OTHER_REPLIED;
}

/* The connection to free in @l's buckets (documented order), or -1. */
static int m_victim(struct model *m, const struct mloc *l, uint64_t now_ms,
		    bool live, bool est, bool *expired)
{
	int best[2] = {-1, -1};
	uint64_t age[2] = {0, 0};

	for (unsigned t = 0; t < 2; t++)
		for (unsigned s = 0; s < DPFLOW_CT_SLOTS; s++) {
			int id = m->owner[l->b[t] * DPFLOW_CT_SLOTS + s];
			struct mconn *c;
			unsigned cls;

			if (id < 0)
				continue;
			c = &m->c[id];
			if (c->dead || m_expired(m, c, now_ms)) {
				*expired = true;
				return id;
			}
			if (!live)
				continue;
			cls = m_established(c->state);
			if (best[cls] < 0 || now_ms - c->last_ms > age[cls]) {
				best[cls] = id;
				age[cls] = now_ms - c->last_ms;
			}
		}
	*expired = false;
	if (best[0] >= 0)
		return best[0];
	return est ? best[1] : -1;
}

/* Room for a key in @l (a connection's when @conn): the bucket it goes
 * to (a slot there is now pending), or -1 and *@drop. */
static int m_claim(struct model *m, const struct mloc *l, uint64_t now_ms,
		   bool conn, bool est, unsigned *drop)
{
	bool reserved = !conn;
	bool any = m->flags & (DPFLOW_CT_F_EVICT | DPFLOW_CT_F_REPLACE);

	for (unsigned pass = 0; pass < 4; pass++) {
		unsigned f0, f1;
		bool vexp;
		int v;

		if (!reserved)
			reserved = m->live < m->max_conns;
		if (reserved) {
			f0 = m_free(m, l->b[0]);
			f1 = m_free(m, l->b[1]);
			if (f0 || f1) {
				uint32_t b = f1 > f0 ? l->b[1] : l->b[0];

				m->pend[b]++;
				return (int)b;
			}
		} else if (!any) {
			break;
		}
		v = m_victim(m, l, now_ms, m->flags & DPFLOW_CT_F_REPLACE, est,
			     &vexp);
		if (v < 0)
			break;
		m_kill(m, v,
		       vexp ? DPFLOW_CT_STAT_EXPIRED : DPFLOW_CT_STAT_REPLACED);
	}
	*drop = reserved ? DPFLOW_CT_DROP_NO_SLOT : DPFLOW_CT_DROP_FULL;
	return -1;
}

static bool has_ports(uint8_t proto)
{
	return proto == 6 || proto == 17 || proto == 132;
}

/* The value a connection keeps of init block @in (the documented rules). */
static struct dpflow_ct_value m_norm(const struct dpflow_ct_value *in,
				     const struct dpflow_ct_pkt *p)
{
	struct dpflow_ct_value v;
	unsigned alen = p->family == 6 ? 16 : 4;
	bool ports = has_ports(p->proto);

	memset(&v, 0, sizeof(v));
	v.pool = DPFLOW_CT_POOL_NONE;
	if (!in)
		return v;
	v.flags = in->flags & 0xff;
	if (!(v.flags & DPFLOW_CT_VAL_SNAT))
		v.flags &= (uint16_t)~DPFLOW_CT_VAL_POOL;
	if (v.flags & DPFLOW_CT_VAL_POOL)
		v.pool = in->pool;
	if (v.flags & DPFLOW_CT_VAL_SNAT) {
		memcpy(v.nat_src, in->nat_src, alen);
		v.nat_sport = ports ? in->nat_sport : 0;
	}
	if (v.flags & DPFLOW_CT_VAL_DNAT) {
		memcpy(v.nat_dst, in->nat_dst, alen);
		v.nat_dport = ports ? in->nat_dport : 0;
	}
	if (v.flags & DPFLOW_CT_VAL_BACKEND)
		v.backend = in->backend;
	for (unsigned i = 0; i < 4; i++)
		if (v.flags & V_REG(i))
			v.reg[i] = in->reg[i];
	return v;
}

static uint32_t m_gcd(uint32_t a, uint32_t b)
{
	return b ? m_gcd(b, a % b) : a;
}

/* Candidate @i of a binding from pool @pl for a flow of hash @h. */
static void m_candidate(const struct mpool *pl, uint64_t h, bool ports,
			uint32_t i, uint8_t *addr, uint16_t *port)
{
	uint32_t full = pl->n_addrs * (uint32_t)(pl->hi - pl->lo + 1);
	uint32_t total = ports ? full : pl->n_addrs, stride = 1, c;

	if (ports) {
		/* step: odd, near total x 0.618, prime to total */
		uint32_t s = (uint32_t)((uint64_t)full * 2654435769u >> 32) | 1;

		while (m_gcd(s, full) != 1)
			s += 2;
		stride = s % full ? s % full : 1;
	}
	c = (uint32_t)(((h >> 40) % total + (uint64_t)i * stride) % total);
	memset(addr, 0, 16);
	memcpy(addr, pl->addr[c % pl->n_addrs], pl->family == 6 ? 16 : 4);
	*port = ports ? (uint16_t)(pl->lo + c / pl->n_addrs) : 0;
}

/* What the model expects of a packet. */
struct mres {
	struct dpflow_ct_result r;
	struct dpflow_ct_value v;
	int id;	      /* the connection, or -1 */
	bool created; /* a new one: slots to learn */
	int pb, ab;   /* buckets of its slot and of its alias slot (-1) */
};

/* A new connection for @p (no live one holds its key). */
static void m_open(struct model *m, const struct dpflow_ct_pkt *p, uint8_t st,
		   uint32_t user, const struct dpflow_ct_value *init,
		   uint64_t now_ms, struct mres *o)
{
	struct dpflow_ct_value v = m_norm(init, p);
	struct dpflow_ct_pkt t = *p;
	struct mloc l = m_loc(m, p);
	bool est = st == ES, alias = false, ports = has_ports(p->proto);
	unsigned drop = 0;
	int ab = -1, pb, id;

	t.tcp_flags = 0;
	if (v.flags & (DPFLOW_CT_VAL_SNAT | DPFLOW_CT_VAL_DNAT)) {
		const struct mpool *pl = NULL;
		uint32_t tries = 1, total;
		bool ok = false;

		if (v.flags & DPFLOW_CT_VAL_POOL) {
			if (v.pool < m->n_pools) {
				pl = &m->pool[v.pool];
				total = pl->n_addrs *
					(ports ? (uint32_t)(pl->hi - pl->lo + 1)
					       : 1u);
				tries = pl->tries < total ? pl->tries : total;
				if (pl->family != p->family)
					tries = 0;
			} else {
				tries = 0;
			}
		}
		if (v.flags & DPFLOW_CT_VAL_DNAT) {
			memcpy(t.dst, v.nat_dst, 16);
			t.dport = v.nat_dport;
		}
		for (uint32_t i = 0; i < tries && !ok; i++) {
			struct dpflow_ct_pkt tr;
			struct mloc rl;
			int d;

			if (pl)
				m_candidate(pl, l.h, ports, i, v.nat_src,
					    &v.nat_sport);
			if (v.flags & DPFLOW_CT_VAL_SNAT) {
				memcpy(t.src, v.nat_src, 16);
				t.sport = v.nat_sport;
			}
			tr = rev(&t, 0);
			if (tup_eq(&t, p) || tup_eq(&tr, p)) {
				ok = true; /* no translation */
				break;
			}
			if (m_find(m, &t, now_ms, true, &d) >= 0)
				continue;
			rl = m_loc(m, &t);
			ab = m_claim(m, &rl, now_ms, false, est, &drop);
			if (ab >= 0)
				ok = alias = true;
		}
		if (!ok) {
			if (pl)
				m->exhausted[v.pool]++;
			m->stat[DPFLOW_CT_STAT_NAT_EXHAUSTED]++;
			o->r.drop = DPFLOW_CT_DROP_NAT;
			return;
		}
	}
	pb = m_claim(m, &l, now_ms, true, est, &drop);
	if (pb < 0) {
		if (ab >= 0)
			m->pend[ab]--;
		m->stat[DPFLOW_CT_STAT_REFUSED]++;
		o->r.drop = (uint8_t)drop;
		return;
	}
	for (id = 0; m->c[id].used; id++)
		cr_assert_lt(id + 1, M_CONNS);
	memset(&m->c[id], 0, sizeof(m->c[id]));
	m->c[id].used = true;
	m->c[id].orig = *p;
	m->c[id].orig.tcp_flags = 0;
	m->c[id].alias = alias;
	m->c[id].trans = t;
	m->c[id].state = st;
	m->c[id].last_ms = now_ms;
	m->c[id].user = user;
	m->c[id].val = v;
	if (alias && (v.flags & DPFLOW_CT_VAL_POOL))
		m->bound[v.pool]++;
	m->live++;
	m->stat[DPFLOW_CT_STAT_CREATED]++;
	o->id = id;
	o->created = true;
	o->pb = pb;
	o->ab = ab;
	o->v = v;
	o->r.state = st;
	o->r.user = user;
	o->r.flags = DPFLOW_CT_R_NEW;
}

/* Expected result of tracking @p (with @init and @user if it creates). */
static void m_packet(struct model *m, const struct dpflow_ct_pkt *p,
		     uint32_t user, const struct dpflow_ct_value *init,
		     bool loose, uint64_t now_ms, struct mres *o)
{
	struct mconn *c;
	int dir = 0, id;

	memset(o, 0, sizeof(*o));
	o->id = -1;
	o->pb = o->ab = -1;
	o->r.conn = MISS;
	id = m_find(m, p, now_ms, true, &dir);
	if (id < 0) {
		uint8_t st = 0;

		if (p->proto == 6) {
			uint8_t f =
			    p->tcp_flags & (uint8_t) ~(F_PSH | 0x40 | 0x80);

			if (model_flags_valid(p->tcp_flags) &&
			    (f == F_SYN || f == (F_SYN | F_URG)))
				st = SS;
			else if (model_flags_valid(p->tcp_flags) && loose &&
				 (f == F_ACK || f == (F_ACK | F_URG)))
				st = ES;
		} else {
			st = p->proto == 17 ? DPFLOW_CT_UDP_UNREPLIED
			     : p->proto == 1 || p->proto == 58
				 ? DPFLOW_CT_ICMP_UNREPLIED
				 : DPFLOW_CT_OTHER_UNREPLIED;
		}
		if (!st) {
			o->r.flags = DPFLOW_CT_R_INVALID;
			o->r.drop = DPFLOW_CT_DROP_INVALID;
			m->stat[DPFLOW_CT_STAT_INVALID]++;
			return;
		}
		m_open(m, p, st, user, init, now_ms, o);
		return;
	}
	c = &m->c[id];
	o->id = id;
	o->r.conn = c->slot;
	o->r.user = c->user;
	o->r.dir = (uint8_t)dir;
	o->v = c->val;
	if (p->proto != 6) {
		if (dir == 1 && (c->state == DPFLOW_CT_UDP_UNREPLIED ||
				 c->state == DPFLOW_CT_ICMP_UNREPLIED ||
				 c->state == DPFLOW_CT_OTHER_UNREPLIED))
			c->state++;
		c->last_ms = now_ms > c->last_ms ? now_ms : c->last_ms;
		o->r.state = c->state;
		return;
	}
	{
		bool from_init = dir == 0;
		uint8_t f = p->tcp_flags & (uint8_t) ~(F_PSH | 0x40 | 0x80);
		bool closing =
		    c->state == FW || c->state == CW || c->state == LA;
		bool side_a = closing ? from_init == c->fin_by_init : from_init;
		uint8_t next;
		int col;

		if (!model_flags_valid(p->tcp_flags)) {
			next = xIV;
		} else if (f & F_RST) {
			next = CL;
		} else {
			if (f & F_SYN)
				col = (f & F_ACK ? 2 : 0) + (from_init ? 0 : 1);
			else if (f & F_FIN)
				col = side_a ? 4 : 5;
			else
				col = side_a ? 6 : 7;
			next = model_tcp[c->state][col];
		}
		if (next == xIV) {
			o->r.flags = DPFLOW_CT_R_INVALID;
			m->stat[DPFLOW_CT_STAT_INVALID]++;
		} else if (next == xIG) {
			o->r.flags = DPFLOW_CT_R_IGNORED;
		} else {
			if (next == xRO) {
				o->r.flags = DPFLOW_CT_R_REOPEN;
				next = SS;
			} else if (next == FW && !closing) {
				c->fin_by_init = from_init;
			}
			c->state = next;
			c->last_ms = now_ms > c->last_ms ? now_ms : c->last_ms;
		}
		o->r.state = c->state;
	}
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static void collect_cb(const struct dpflow_ct_info *info, void *arg)
{
	uint32_t *v = (uint32_t *)arg;

	v[++v[0]] = info->conn;
}

/* Everything the tracker says equals the model: counters, pools. */
static void m_check_counters(struct model *m, struct dpflow_ct_image *ct,
			     int op)
{
	struct dpflow_ct_stats st;

	dpflow_ct_stats_get(ct, &st);
	for (unsigned i = 0; i < DPFLOW_CT_STAT__COUNT; i++)
		cr_assert_eq(st.stat[i], m->stat[i], "op %d: %s %lu, model %lu",
			     op, dpflow_ct_stat_name(i),
			     (unsigned long)st.stat[i],
			     (unsigned long)m->stat[i]);
	cr_assert_eq(st.live, m->live, "op %d", op);
	for (unsigned i = 0; i < m->n_pools; i++) {
		struct dpflow_ct_pool_stats ps = pool_stats(ct, i);

		cr_assert(
		    ps.bound == m->bound[i] && ps.exhausted == m->exhausted[i],
		    "op %d: pool %u bound %lu exhausted %lu, model %lu "
		    "%lu",
		    op, i, (unsigned long)ps.bound, (unsigned long)ps.exhausted,
		    (unsigned long)m->bound[i], (unsigned long)m->exhausted[i]);
	}
}

/* Every slot: the tracker's view equals the model's. */
static void m_sweep(struct model *m, struct dpflow_ct_image *ct, uint64_t now,
		    int op)
{
	for (uint32_t s = 0; s < m->n_slots; s++) {
		struct dpflow_ct_info info;
		int id = m->owner[s];
		int rc = dpflow_ct_get(ct, s, now, &info, NULL);

		if (id < 0 || m->c[id].slot != s) {
			cr_assert_eq(rc, -ENOENT, "op %d slot %u", op, s);
			continue;
		}
		cr_assert_eq(rc, 0, "op %d slot %u", op, s);
		cr_assert(tup_eq(&info.orig, &m->c[id].orig) &&
			      info.reply_slot ==
				  (m->c[id].alias ? m->c[id].aslot : MISS) &&
			      !memcmp(&info.value, &m->c[id].val,
				      sizeof(info.value)) &&
			      info.user == m->c[id].user,
			  "op %d slot %u", op, s);
	}
}

struct mflow {
	struct dpflow_ct_pkt fwd;
	int profile;
	struct dpflow_ct_pkt trans; /* the last binding seen */
	bool has_trans;
};

struct model_cfg {
	uint64_t seed;
	uint32_t max_conns, flags;
	int ops;
};

static void random_vs_model(const struct model_cfg *cfg)
{
	enum { N_FLOWS = 240 };
	static struct mflow flows[N_FLOWS];
	static struct model m;
	static uint32_t got[M_SLOTS + 1], want[M_SLOTS];
	static const uint8_t tcp_flags[] = {
	    F_SYN,	   F_SYN,	  F_SYN | F_ACK, F_SYN | F_ACK,
	    F_ACK,	   F_ACK,	  F_ACK,	 F_ACK | F_PSH,
	    F_FIN | F_ACK, F_FIN | F_ACK, F_RST,	 0,
	    F_SYN | F_FIN, F_ACK | F_URG, F_RST | F_ACK, F_FIN | F_ACK};
	struct dpflow_ct_params p;
	struct dpflow_ct_image *ct;
	uint64_t s = cfg->seed, now = 1000 * MS;
	bool loose = cfg->flags & DPFLOW_CT_F_TCP_LOOSE;
	int news = 0, nat_news = 0, alias_hits = 0, dropped_nat = 0, scans = 0;

	dpflow_ct_params_default(&p, cfg->max_conns);
	p.flags = cfg->flags;
	p.seed = cfg->seed * 77;
	p.busy_spins = 1u << 30;
	for (unsigned k = 1; k < DPFLOW_CT_STATE_COUNT; k++)
		p.timeout_ms[k] = k == ES && rng_below(&s, 2)
				      ? 0
				      : 20 + (uint32_t)rng_below(&s, 400);
	/* pool 0: IPv4 2 addresses x 3 ports; pool 1: IPv6 1 x 5 */
	p.n_pools = 2;
	p.pools[0].family = 4;
	p.pools[0].n_addrs = 2;
	ip4(p.pools[0].addr[0], 0xc6336401);
	ip4(p.pools[0].addr[1], 0xc6336402);
	p.pools[0].port_lo = 4000;
	p.pools[0].port_hi = 4002;
	p.pools[1].family = 6;
	p.pools[1].n_addrs = 1;
	p.pools[1].addr[0][0] = 0xfd;
	p.pools[1].addr[0][15] = 9;
	p.pools[1].port_lo = 100;
	p.pools[1].port_hi = 104;
	p.pools[1].tries = 4; /* one candidate never tried */
	ct = make(&p);
	memset(&m, 0, sizeof(m));
	m.ct = ct;
	m.n_slots = dpflow_ct_n_slots(ct);
	cr_assert_leq(m.n_slots, M_SLOTS);
	cr_assert_leq(cfg->max_conns, M_CONNS / 2);
	for (uint32_t i = 0; i < M_SLOTS; i++)
		m.owner[i] = -1;
	m.max_conns = cfg->max_conns;
	m.flags = cfg->flags;
	memcpy(m.timeout, p.timeout_ms, sizeof(m.timeout));
	m.n_pools = 2;
	for (unsigned i = 0; i < 2; i++) {
		m.pool[i].family = p.pools[i].family;
		m.pool[i].n_addrs = p.pools[i].n_addrs;
		memcpy(m.pool[i].addr, p.pools[i].addr, sizeof(m.pool[i].addr));
		m.pool[i].lo = p.pools[i].port_lo;
		m.pool[i].hi = p.pools[i].port_hi;
		m.pool[i].tries = p.pools[i].tries
				      ? p.pools[i].tries
				      : DPFLOW_CT_NAT_TRIES_DEFAULT;
	}
	/* flows: IPv4 and IPv6, TCP, UDP, ICMP, GRE; ends unique per flow
	 * and never in a pool or among the backends */
	for (int f = 0; f < N_FLOWS; f++) {
		struct dpflow_ct_pkt *q = &flows[f].fwd;
		static const uint8_t protos[] = {6, 6, 6, 17, 17, 17, 1, 47};

		memset(q, 0, sizeof(*q));
		q->family = f % 3 ? 4 : 6;
		q->proto = protos[rng_below(&s, sizeof(protos))];
		if (q->family == 6 && q->proto == 1)
			q->proto = 58;
		q->src[0] = 10;
		q->src[1] = (uint8_t)(f >> 8);
		q->src[2] = (uint8_t)f;
		q->dst[0] = 11;
		q->dst[1] = (uint8_t)(f >> 8);
		q->dst[2] = (uint8_t)f;
		q->dst[3] = (uint8_t)rng_next(&s);
		if (q->family == 6)
			q->dst[15] = (uint8_t)rng_next(&s);
		if (has_ports(q->proto)) {
			q->sport = (uint16_t)(1 + rng_below(&s, 60000));
			q->dport = (uint16_t)(1 + rng_below(&s, 60000));
		}
		/* 0 none, 1 pool SNAT, 2 pool SNAT + DNAT, 3 DNAT only,
		 * 4 an explicit SNAT (shared: they clash), 5 a pool of the
		 * other family */
		flows[f].profile = (int)rng_below(&s, 12);
		if (flows[f].profile > 5)
			flows[f].profile = flows[f].profile < 9 ? 2 : 0;
		flows[f].has_trans = false;
	}
	for (int op = 0; op < cfg->ops; op++) {
		int f = (int)rng_below(&s, N_FLOWS), kind, dir = 0;
		struct mflow *fl = &flows[f];
		struct dpflow_ct_pkt pk;
		struct dpflow_ct_value init, v;
		struct dpflow_ct_result r;
		struct mres o;
		uint32_t user = (uint32_t)rng_next(&s);
		uint64_t now_ms;
		bool lookup = rng_below(&s, 12) == 0;

		now += rng_below(&s, 200) == 0 ? rng_below(&s, 500 * MS)
					       : rng_below(&s, 2 * MS);
		now_ms = now / MS;
		/* the packet: either way of the flow, or of its binding */
		kind = (int)rng_below(&s, 10);
		if (kind < 3 || (kind >= 6 && !fl->has_trans))
			pk = fl->fwd;
		else if (kind < 6)
			pk = rev(&fl->fwd, 0);
		else if (kind < 9)
			pk = rev(&fl->trans, 0);
		else
			pk = fl->trans;
		pk.tcp_flags = pk.proto == 6
				   ? tcp_flags[rng_below(&s, sizeof(tcp_flags))]
				   : 0;
		/* the init block: random registers and backend, and the
		 * flow's NAT profile */
		memset(&init, 0, sizeof(init));
		init.flags = (uint16_t)(rng_next(&s) & 0xf8);
		init.backend = (uint32_t)rng_next(&s);
		for (unsigned i = 0; i < 4; i++)
			init.reg[i] = (uint32_t)rng_next(&s);
		init.pool = fl->fwd.family == 6;
		switch (fl->profile) {
		case 2:
			init.flags |= DPFLOW_CT_VAL_DNAT;
			memcpy(init.nat_dst, fl->fwd.dst, 16);
			init.nat_dst[0] = 12; /* a backend: 2 a family */
			init.nat_dst[1] = (uint8_t)(f & 1);
			init.nat_dst[2] = 0;
			init.nat_dst[3] = 1;
			init.nat_dport = 8080;
			/* fall through */
		case 1:
			init.flags |= DPFLOW_CT_VAL_SNAT | DPFLOW_CT_VAL_POOL;
			break;
		case 3:
			init.flags |= DPFLOW_CT_VAL_DNAT;
			memcpy(init.nat_dst, fl->fwd.dst, 16);
			init.nat_dst[0] = 13;
			init.nat_dport = (uint16_t)(fl->fwd.dport + 1);
			break;
		case 4:
			init.flags |= DPFLOW_CT_VAL_SNAT;
			memset(init.nat_src, 0x77, 16);
			init.nat_src[0] = 14;
			init.nat_sport = (uint16_t)(9000 + f % 3);
			break;
		case 5:
			init.flags |= DPFLOW_CT_VAL_SNAT | DPFLOW_CT_VAL_POOL;
			init.pool = fl->fwd.family == 4;
			break;
		default:
			break;
		}
		if (lookup) {
			/* read-only: the model's view, nothing marked */
			struct mconn *c;
			int id = m_find(&m, &pk, now_ms, false, &dir);

			dpflow_ct_lookup_val(ct, &pk, now, &r, &v);
			cr_assert_eq(r.conn, id < 0 ? MISS : m.c[id].slot,
				     "op %d", op);
			if (id >= 0) {
				c = &m.c[id];
				cr_assert(r.state == c->state &&
					      r.user == c->user &&
					      r.dir == dir &&
					      !memcmp(&v, &c->val, sizeof(v)),
					  "op %d", op);
			}
			continue;
		}
		m_packet(&m, &pk, user, &init, loose, now_ms, &o);
		memset(&v, 0xee, sizeof(v));
		dpflow_ct_track(ct, &pk, now, user, &init, &r, &v);
		if (o.created) {
			struct mconn *c = &m.c[o.id];
			struct dpflow_ct_info info;

			cr_assert_neq(r.conn, MISS, "op %d: drop %u", op,
				      r.drop);
			/* a free slot of the bucket the rule names */
			cr_assert(r.conn / DPFLOW_CT_SLOTS == (uint32_t)o.pb &&
				      m.owner[r.conn] < 0,
				  "op %d: slot %u, bucket %d", op, r.conn,
				  o.pb);
			m.pend[o.pb]--;
			c->slot = r.conn;
			m.owner[r.conn] = o.id;
			cr_assert_eq(
			    dpflow_ct_get(ct, r.conn, now, &info, NULL), 0);
			if (c->alias) {
				uint32_t a = info.reply_slot;

				cr_assert(a != MISS &&
					      a / DPFLOW_CT_SLOTS ==
						  (uint32_t)o.ab &&
					      m.owner[a] < 0,
					  "op %d: reply slot %u, bucket %d", op,
					  a, o.ab);
				m.pend[o.ab]--;
				c->aslot = a;
				m.owner[a] = o.id;
				fl->trans = c->trans;
				fl->has_trans = true;
				nat_news++;
			} else {
				cr_assert_eq(info.reply_slot, MISS, "op %d",
					     op);
			}
			o.r.conn = r.conn;
			news++;
		}
		alias_hits += o.id >= 0 && !o.created && m.c[o.id].alias &&
			      m_dir(&m.c[o.id], &pk) >= 0 &&
			      !tup_eq(&pk, &m.c[o.id].orig);
		dropped_nat += r.drop == DPFLOW_CT_DROP_NAT;
		cr_assert(r.conn == o.r.conn && r.state == o.r.state &&
			      r.flags == o.r.flags && r.user == o.r.user &&
			      r.drop == o.r.drop &&
			      (r.conn == MISS || r.dir == o.r.dir),
			  "op %d (flow %d profile %d, flags 0x%x): got conn %u "
			  "%s flags 0x%x dir %u drop %u, model conn %u %s "
			  "flags 0x%x dir %u drop %u",
			  op, f, fl->profile, pk.tcp_flags, r.conn,
			  dpflow_ct_state_name(r.state), r.flags, r.dir, r.drop,
			  o.r.conn, dpflow_ct_state_name(o.r.state), o.r.flags,
			  o.r.dir, o.r.drop);
		if (r.conn == MISS) {
			memset(&o.v, 0, sizeof(o.v));
		}
		cr_assert_eq(memcmp(&v, &o.v, sizeof(v)), 0, "op %d value", op);
		m_check_counters(&m, ct, op);
		/* a scan each 300 ms of traffic and now and then; a removal
		 * now and then */
		if (rng_below(&s, 300) == 0) {
			uint32_t nw = 0;

			for (int i = 0; i < M_CONNS; i++)
				if (m.c[i].used &&
				    (m.c[i].dead ||
				     m_expired(&m, &m.c[i], now_ms))) {
					want[nw++] = m.c[i].slot;
					m_kill(&m, i, DPFLOW_CT_STAT_EXPIRED);
				}
			qsort(want, nw, sizeof(*want), cmp_u32);
			got[0] = 0;
			cr_assert_eq(
			    dpflow_ct_age(ct, now, NULL, 0, collect_cb, got),
			    nw, "scan after op %d", op);
			qsort(got + 1, got[0], sizeof(*got), cmp_u32);
			cr_assert_eq(memcmp(got + 1, want, nw * sizeof(*want)),
				     0, "scan after op %d", op);
			scans++;
		}
		if (rng_below(&s, 500) == 0 && m.live) {
			int id;

			do
				id = (int)rng_below(&s, M_CONNS);
			while (!m.c[id].used);
			if (m.c[id].alias)
				cr_assert_eq(
				    dpflow_ct_remove(ct, m.c[id].aslot, NULL),
				    -ENOENT);
			cr_assert_eq(dpflow_ct_remove(ct, m.c[id].slot, NULL),
				     0);
			m_kill(&m, id, DPFLOW_CT_STAT_REMOVED);
		}
		if (op % 2048 == 0)
			m_sweep(&m, ct, now, op);
		m_check_counters(&m, ct, op);
	}
	m_sweep(&m, ct, now, cfg->ops);
	{
		uint32_t ready = 0; /* count: READY ones, not DEAD */

		for (int i = 0; i < M_CONNS; i++)
			ready += m.c[i].used && !m.c[i].dead;
		cr_assert_eq(dpflow_ct_count(ct), ready);
	}
	/* every path was taken */
	cr_assert(news > 1000 && nat_news > 200 && alias_hits > 1000 &&
		      dropped_nat > 50 && scans > 100 &&
		      m.stat[DPFLOW_CT_STAT_EXPIRED] > 100 &&
		      m.stat[DPFLOW_CT_STAT_REFUSED] > 10 &&
		      ((cfg->flags & DPFLOW_CT_F_REPLACE) ? 1 : 0) ==
			  (m.stat[DPFLOW_CT_STAT_REPLACED] > 10),
		  "new %d nat %d alias hits %d nat drops %d scans %d expired "
		  "%lu refused %lu replaced %lu",
		  news, nat_news, alias_hits, dropped_nat, scans,
		  (unsigned long)m.stat[DPFLOW_CT_STAT_EXPIRED],
		  (unsigned long)m.stat[DPFLOW_CT_STAT_REFUSED],
		  (unsigned long)m.stat[DPFLOW_CT_STAT_REPLACED]);
	dpflow_ct_destroy(ct);
}

Test(ct_values, random_operations_match_reference_model)
{
	static const struct model_cfg cfgs[] = {
	    {1, 40,
	     DPFLOW_CT_F_TCP_LOOSE | DPFLOW_CT_F_REPLACE | DPFLOW_CT_F_NAT,
	     250000},
	    {2, 40, DPFLOW_CT_F_TCP_LOOSE | DPFLOW_CT_F_EVICT | DPFLOW_CT_F_NAT,
	     250000},
	    {3, 24, DPFLOW_CT_F_TCP_LOOSE | DPFLOW_CT_F_REPLACE, 250000},
	    {4, 64, DPFLOW_CT_F_REPLACE | DPFLOW_CT_F_NAT, 250000},
	}; /* 1M operations */

	for (size_t i = 0; i < sizeof(cfgs) / sizeof(cfgs[0]); i++)
		random_vs_model(&cfgs[i]);
}

/* ---- two threads --------------------------------------------------------- */

/*
 * Flow f: client 10.x.y.1:(1024 + f % 50000) to VIP 203.0.113.(1 + f % 3)
 * port 80, UDP (TCP for f % 3 == 0, always with ACK: a loose pickup opens
 * it, and no ACK ends it). Its init block says who it is: backend f,
 * registers mix(f, i); even flows also SNAT from pool 0 and DNAT to
 * backend 10.9.0.(1 + f % 4):8080. A value read for a packet must be
 * whole and its flow's: registers torn between two connections, or the
 * value of another flow, show.
 */
#define T2_FLOWS 3000

static uint32_t mix(uint32_t f, unsigned i)
{
	uint64_t s = (uint64_t)f * 4 + i;

	return (uint32_t)rng_next(&s);
}

static struct dpflow_ct_pkt t2_pkt(uint32_t f)
{
	return pkt4(0x0a000001u + (f << 8), (uint16_t)(1024 + f % 50000),
		    0xcb007101u + f % 3, 80, f % 3 ? 17 : 6, F_ACK);
}

static struct dpflow_ct_value t2_init(uint32_t f)
{
	struct dpflow_ct_value v;

	memset(&v, 0, sizeof(v));
	v.flags =
	    DPFLOW_CT_VAL_BACKEND | V_REG(0) | V_REG(1) | V_REG(2) | V_REG(3);
	v.backend = f;
	for (unsigned i = 0; i < 4; i++)
		v.reg[i] = mix(f, i);
	if (f % 2 == 0) {
		v.flags |= DPFLOW_CT_VAL_SNAT | DPFLOW_CT_VAL_POOL |
			   DPFLOW_CT_VAL_DNAT;
		v.pool = 0;
		ip4(v.nat_dst, 0x0a090001u + f % 4);
		v.nat_dport = 8080;
	}
	return v;
}

/* The flow a value is (UINT32_MAX: not one of ours, or torn). */
static uint32_t t2_flow_of(const struct dpflow_ct_value *v)
{
	uint32_t f = v->backend;

	if (f >= T2_FLOWS)
		return UINT32_MAX;
	for (unsigned i = 0; i < 4; i++)
		if (v->reg[i] != mix(f, i))
			return UINT32_MAX;
	if ((v->flags & DPFLOW_CT_VAL_SNAT) != (f % 2 == 0 ? 1 : 0))
		return UINT32_MAX;
	return f;
}

struct t2_shared {
	struct dpflow_ct_image *ct;
	bool pressure;		 /* phase B: small table, expiry, aging */
	uint64_t clock_ns;	 /* phase B's clock (atomic) */
	uint32_t conn[T2_FLOWS]; /* phase A: the flow's connection */
	uint32_t bind[T2_FLOWS]; /* phase A: its binding (port | addr) */
	int done;		 /* workers finished (atomic) */
	uint32_t step[2];	 /* phase A: where each thread is (lock-step) */
};

struct t2_arg {
	struct t2_shared *sh;
	int id;
	uint64_t seed;
	uint32_t news, bad, alias_hits, misses;
	char why[160];
};

static void t2_fail(struct t2_arg *a, const char *why, uint32_t f)
{
	if (!a->bad++)
		snprintf(a->why, sizeof(a->why), "%s (flow %u)", why, f);
}

/* Check one packet's result (flow @f; @trans: sent to or from its
 * binding, @to_binding: a reply to it). */
static void t2_check(struct t2_arg *a, uint32_t f, bool trans, bool to_binding,
		     const struct dpflow_ct_pkt *pk,
		     const struct dpflow_ct_result *r,
		     const struct dpflow_ct_value *v)
{
	struct t2_shared *sh = a->sh;
	uint32_t g = t2_flow_of(v), bind;

	if (r->conn == MISS) {
		if (!sh->pressure)
			t2_fail(a, "no connection", f);
		a->misses++;
		return;
	}
	a->news += (r->flags & DPFLOW_CT_R_NEW) != 0;
	if (trans && sh->pressure && v->flags == 0) {
		/* under pressure a binding packet may outlive its
		 * connection and open one of its own (no init block: an
		 * empty value), which later ones find */
		return;
	}
	if (g == UINT32_MAX) {
		t2_fail(a, "torn or foreign value", f);
		return;
	}
	if (trans) {
		/* a stale binding may be another flow's now: the packet must
		 * be that connection's translated tuple, either way */
		struct dpflow_ct_pkt t;

		memset(&t, 0, sizeof(t));
		memcpy(t.src, v->nat_src, 16);
		memcpy(t.dst, v->nat_dst, 16);
		t.sport = v->nat_sport;
		t.dport = v->nat_dport;
		t.proto = pk->proto;
		t.family = 4;
		if (to_binding)
			t = rev(&t, 0);
		if (!(v->flags & DPFLOW_CT_VAL_SNAT) || !tup_eq(&t, pk) ||
		    r->dir !=
			(to_binding ? DPFLOW_CT_DIR_REPLY : DPFLOW_CT_DIR_ORIG))
			t2_fail(a, "binding packet on a wrong connection", f);
		a->alias_hits++;
		if (sh->pressure)
			return;
	} else if (g != f) {
		t2_fail(a, "another flow's connection", f);
		return;
	}
	if (sh->pressure)
		return;
	/* phase A: one connection and one binding a flow, whoever came
	 * first */
	{
		uint32_t none = MISS;

		if (!__atomic_compare_exchange_n(&sh->conn[g], &none, r->conn,
						 false, __ATOMIC_RELAXED,
						 __ATOMIC_RELAXED) &&
		    none != r->conn)
			t2_fail(a, "two connections", g);
	}
	bind = v->flags & DPFLOW_CT_VAL_SNAT
		   ? (uint32_t)v->nat_sport << 8 | v->nat_src[3]
		   : 0;
	{
		uint32_t none = MISS;

		if (!__atomic_compare_exchange_n(&sh->bind[g], &none, bind,
						 false, __ATOMIC_RELAXED,
						 __ATOMIC_RELAXED) &&
		    none != bind)
			t2_fail(a, "two bindings", g);
	}
}

static void *t2_worker(void *p)
{
	struct t2_arg *a = (struct t2_arg *)p;
	struct t2_shared *sh = a->sh;
	uint32_t rounds = sh->pressure ? 40 : 6;
	static uint32_t order_a[T2_FLOWS], order_b[T2_FLOWS];
	uint32_t *order = a->id ? order_a : order_b;
	struct dpflow_ct_value last[T2_FLOWS / 2];
	bool have[T2_FLOWS / 2];

	memset(have, 0, sizeof(have));
	for (uint32_t i = 0; i < T2_FLOWS; i++)
		order[i] = i;
	for (uint32_t round = 0; round < rounds; round++) {
		/* phase A: both threads in one order, in lock-step, so that
		 * they meet each flow at the same moment */
		uint64_t os = sh->pressure ? a->seed : round;

		for (uint32_t i = T2_FLOWS - 1; i > 0; i--) {
			uint32_t j = (uint32_t)rng_below(&os, i + 1), t;

			t = order[i];
			order[i] = order[j];
			order[j] = t;
		}
		if (sh->pressure)
			a->seed = os;
		for (uint32_t i = 0; i < T2_FLOWS; i++) {
			uint32_t f = order[i];
			struct dpflow_ct_value init = t2_init(f), v;
			struct dpflow_ct_pkt pk = t2_pkt(f);
			struct dpflow_ct_result r;
			unsigned kind = (unsigned)rng_below(&a->seed, 4);
			bool trans = false, to_binding = false;
			uint64_t now = 0;

			if (!sh->pressure) {
				uint32_t me = round * T2_FLOWS + i;

				__atomic_store_n(&sh->step[a->id], me,
						 __ATOMIC_RELEASE);
				for (unsigned spin = 0;
				     __atomic_load_n(&sh->step[!a->id],
						     __ATOMIC_ACQUIRE) < me;
				     spin++)
					if (spin > 1000)
						sched_yield();
			}
			if (sh->pressure)
				now = __atomic_add_fetch(
				    &sh->clock_ns,
				    1000 * (1 + rng_below(&a->seed, 20)),
				    __ATOMIC_RELAXED);
			if (kind == 1) {
				pk = rev(&pk, F_ACK);
			} else if (kind >= 2 && f % 2 == 0 && have[f / 2]) {
				/* the binding this thread saw last */
				const struct dpflow_ct_value *b = &last[f / 2];

				memset(&pk, 0, sizeof(pk));
				memcpy(pk.src, b->nat_src, 16);
				memcpy(pk.dst, b->nat_dst, 16);
				pk.sport = b->nat_sport;
				pk.dport = b->nat_dport;
				pk.proto = f % 3 ? 17 : 6;
				pk.family = 4;
				pk.tcp_flags = F_ACK;
				to_binding = kind == 2;
				if (to_binding)
					pk = rev(&pk, F_ACK);
				trans = true;
			}
			dpflow_ct_track(sh->ct, &pk, now, f,
					trans ? NULL : &init, &r, &v);
			t2_check(a, f, trans, to_binding, &pk, &r, &v);
			if (r.conn != MISS && !trans && f % 2 == 0) {
				last[f / 2] = v;
				have[f / 2] = true;
			}
		}
	}
	__atomic_add_fetch(&sh->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* The image after the threads: keys unique, reply keys and their
 * connections pointing at each other, pool counts right. */
static void t2_audit(struct dpflow_ct_image *ct, uint64_t now, bool values)
{
	uint32_t n = dpflow_ct_n_slots(ct), n_keys = 0, live = 0, bound = 0;
	const uint64_t *ctrl = dpflow_ct_ctrl(ct);
	const struct dpflow_ct_slot *slots = dpflow_ct_slots(ct);
	struct dpflow_ct_key *keys = calloc(n, sizeof(*keys));
	struct dpflow_ct_stats st;

	cr_assert_not_null(keys);
	for (uint32_t i = 0; i < n; i++) {
		uint64_t w = ctrl[i], st2 = w & DPFLOW_CT_W_STATUS;
		struct dpflow_ct_info info;

		cr_assert_neq(st2, DPFLOW_CT_W_BUSY, "slot %u busy", i);
		if (st2 == DPFLOW_CT_W_FREE)
			continue;
		if (w & DPFLOW_CT_W_ALIAS) {
			uint32_t c = slots[i].twin;

			cr_assert(c < n && !(ctrl[c] & DPFLOW_CT_W_ALIAS) &&
				      slots[c].twin == i,
				  "alias %u -> %u", i, c);
		} else {
			live++;
			cr_assert_eq(dpflow_ct_get(ct, i, now, &info, NULL), 0);
			/* a flow's value, or none (opened by a packet of a
			 * binding that had gone) */
			cr_assert(!values ||
				      t2_flow_of(&info.value) != UINT32_MAX ||
				      info.value.flags == 0,
				  "conn %u", i);
			if (slots[i].twin != MISS) {
				cr_assert(ctrl[slots[i].twin] &
					      DPFLOW_CT_W_ALIAS,
					  "conn %u", i);
				bound += (info.value.flags &
					  DPFLOW_CT_VAL_POOL) != 0;
			}
		}
		if (st2 == DPFLOW_CT_W_READY &&
		    !((w & DPFLOW_CT_W_ALIAS) &&
		      (ctrl[slots[i].twin] & DPFLOW_CT_W_STATUS) ==
			  DPFLOW_CT_W_DEAD))
			memcpy(&keys[n_keys++], slots[i].key, sizeof(keys[0]));
	}
	/* no key twice among the live connections and reply keys */
	for (uint32_t i = 0; i < n_keys; i++)
		for (uint32_t j = i + 1; j < n_keys; j++)
			cr_assert_neq(
			    memcmp(&keys[i], &keys[j], sizeof(keys[0])), 0,
			    "key twice");
	dpflow_ct_stats_get(ct, &st);
	cr_assert_eq(st.live, live);
	cr_assert_eq(pool_stats(ct, 0).bound, bound);
	cr_assert_eq(st.stat[DPFLOW_CT_STAT_CREATED],
		     st.stat[DPFLOW_CT_STAT_EXPIRED] +
			 st.stat[DPFLOW_CT_STAT_REPLACED] +
			 st.stat[DPFLOW_CT_STAT_REMOVED] + st.live);
	free(keys);
}

static void t2_run(bool pressure, struct t2_shared *sh, struct t2_arg *a)
{
	struct dpflow_ct_params p;
	pthread_t th[2];

	dpflow_ct_params_default(&p, pressure ? 400 : 2 * T2_FLOWS);
	p.flags = DPFLOW_CT_F_TCP_LOOSE | DPFLOW_CT_F_NAT |
		  (pressure ? DPFLOW_CT_F_REPLACE : 0);
	p.busy_spins = 1u << 30; /* a preempted lock holder: wait, no drop */
	p.n_pools = 1;
	p.pools[0].family = 4;
	p.pools[0].n_addrs = 2;
	ip4(p.pools[0].addr[0], 0xc6336401);
	ip4(p.pools[0].addr[1], 0xc6336402);
	p.pools[0].port_lo = 20000;
	p.pools[0].port_hi = pressure ? 20099 : 29999;
	for (unsigned k = 1; k < DPFLOW_CT_STATE_COUNT; k++)
		p.timeout_ms[k] = pressure ? 2 + k % 5 : 0;
	memset(sh, 0, sizeof(*sh));
	memset(sh->conn, 0xff, sizeof(sh->conn));
	memset(sh->bind, 0xff, sizeof(sh->bind));
	sh->ct = make(&p);
	sh->pressure = pressure;
	sh->clock_ns = 1000 * MS;
	for (int t = 0; t < 2; t++) {
		memset(&a[t], 0, sizeof(a[t]));
		a[t].sh = sh;
		a[t].id = t;
		a[t].seed = 1000 + (uint64_t)t;
		cr_assert_eq(pthread_create(&th[t], NULL, t2_worker, &a[t]), 0);
	}
	if (pressure) {
		/* the control thread ages and removes meanwhile */
		uint32_t cursor = 0, k = 0;

		while (__atomic_load_n(&sh->done, __ATOMIC_ACQUIRE) < 2) {
			uint64_t now =
			    __atomic_load_n(&sh->clock_ns, __ATOMIC_RELAXED);

			dpflow_ct_age(sh->ct, now, &cursor, 64, NULL, NULL);
			if (++k % 16 == 0)
				dpflow_ct_remove(sh->ct,
						 k % dpflow_ct_n_slots(sh->ct),
						 NULL);
		}
	}
	cr_assert_eq(pthread_join(th[0], NULL), 0);
	cr_assert_eq(pthread_join(th[1], NULL), 0);
	cr_assert(a[0].bad == 0 && a[1].bad == 0, "%s / %s", a[0].why,
		  a[1].why);
	t2_audit(sh->ct, sh->clock_ns, true);
}

Test(ct_values, two_threads_one_connection_and_value_per_flow)
{
	static struct t2_shared sh;
	struct t2_arg a[2];
	struct dpflow_ct_stats st;

	t2_run(false, &sh, a);
	dpflow_ct_stats_get(sh.ct, &st);
	/* nothing lost or made twice: one NEW and one connection a flow */
	cr_assert_eq(a[0].news + a[1].news, T2_FLOWS);
	cr_assert_eq(st.stat[DPFLOW_CT_STAT_CREATED], T2_FLOWS);
	cr_assert(st.live == T2_FLOWS && dpflow_ct_count(sh.ct) == T2_FLOWS);
	cr_assert_eq(pool_stats(sh.ct, 0).bound, T2_FLOWS / 2);
	cr_assert(st.stat[DPFLOW_CT_STAT_REFUSED] == 0 &&
		  st.stat[DPFLOW_CT_STAT_NAT_EXHAUSTED] == 0 &&
		  st.stat[DPFLOW_CT_STAT_DROP_BUSY] == 0);
	cr_assert_gt(a[0].alias_hits + a[1].alias_hits, T2_FLOWS);
	for (uint32_t f = 0; f < T2_FLOWS; f++)
		cr_assert_neq(sh.conn[f], MISS, "flow %u", f);
	dpflow_ct_destroy(sh.ct);
}

Test(ct_values, two_threads_under_pressure_with_aging)
{
	static struct t2_shared sh;
	struct t2_arg a[2];
	struct dpflow_ct_stats st;

	t2_run(true, &sh, a);
	dpflow_ct_stats_get(sh.ct, &st);
	cr_assert_eq(a[0].news + a[1].news, st.stat[DPFLOW_CT_STAT_CREATED]);
	cr_assert(st.stat[DPFLOW_CT_STAT_REPLACED] > 100 &&
		      st.stat[DPFLOW_CT_STAT_EXPIRED] > 100 &&
		      a[0].alias_hits + a[1].alias_hits > 1000,
		  "replaced %lu expired %lu alias hits %u",
		  (unsigned long)st.stat[DPFLOW_CT_STAT_REPLACED],
		  (unsigned long)st.stat[DPFLOW_CT_STAT_EXPIRED],
		  a[0].alias_hits + a[1].alias_hits);
	dpflow_ct_destroy(sh.ct);
}

/*
 * Two flows whose bindings start at the same candidate, created at the
 * same moment by two threads (lock-step): the reply key's bucket lock
 * must make one of them move on, or both would hold one reply key.
 */
#define RACE_PAIRS 48

struct race {
	struct dpflow_ct_image *ct;
	struct dpflow_ct_pkt pk[2][RACE_PAIRS];
	struct dpflow_ct_value v[2][RACE_PAIRS];
	struct dpflow_ct_result r[2][RACE_PAIRS];
	uint32_t step[2];
};

struct race_arg {
	struct race *rc;
	int id;
};

static void *race_worker(void *p)
{
	struct race_arg *ra = (struct race_arg *)p;
	struct race *rc = ra->rc;
	struct dpflow_ct_value init = nat_init(0x0a000001);

	for (uint32_t i = 0; i < RACE_PAIRS; i++) {
		__atomic_store_n(&rc->step[ra->id], i + 1, __ATOMIC_RELEASE);
		for (unsigned spin = 0;
		     __atomic_load_n(&rc->step[!ra->id], __ATOMIC_ACQUIRE) <
		     i + 1;
		     spin++)
			if (spin > 1000)
				sched_yield();
		dpflow_ct_track(rc->ct, &rc->pk[ra->id][i], MS, 0, &init,
				&rc->r[ra->id][i], &rc->v[ra->id][i]);
	}
	return NULL;
}

Test(ct_values, two_threads_race_for_one_reply_key)
{
	static struct race rc;
	struct dpflow_ct_params p;
	uint64_t s = 5;

	dpflow_ct_params_default(&p, 1000);
	p.flags = DPFLOW_CT_F_NAT;
	p.busy_spins = 1u << 30;
	p.n_pools = 1;
	p.pools[0].family = 4;
	p.pools[0].n_addrs = 1;
	ip4(p.pools[0].addr[0], 0xc6336401);
	p.pools[0].port_lo = 30000;
	p.pools[0].port_hi = 30000 + 2 * RACE_PAIRS - 1;
	p.pools[0].tries = 2 * RACE_PAIRS; /* all of it: every flow binds */
	for (int round = 0; round < 60; round++) {
		struct race_arg ra[2] = {{&rc, 0}, {&rc, 1}};
		pthread_t th[2];
		struct dpflow_ct_pkt cand[2 * RACE_PAIRS];
		bool taken[2 * RACE_PAIRS], have[2 * RACE_PAIRS];
		unsigned n = 0;

		memset(&rc, 0, sizeof(rc));
		memset(taken, 0, sizeof(taken));
		memset(have, 0, sizeof(have));
		rc.ct = make(&p);
		/* pairs of new flows with the same first candidate (the
		 * same start in the pool: (hash >> 40) % size), each pair
		 * its own start */
		while (n < RACE_PAIRS) {
			struct dpflow_ct_pkt pk = pkt4(
			    0x0a000000u + (uint32_t)rng_below(&s, 1u << 24),
			    (uint16_t)(1 + rng_below(&s, 60000)), 0xcb007101,
			    80, 17, 0);
			struct dpflow_ct_key k;
			uint32_t st;

			dpflow_ct_key_make(&pk, &k);
			st =
			    (uint32_t)((dpflow_ct_hash(&k, rc.ct->seed) >> 40) %
				       (2 * RACE_PAIRS));
			if (taken[st])
				continue;
			if (!have[st]) {
				cand[st] = pk;
				have[st] = true;
				continue;
			}
			rc.pk[0][n] = cand[st];
			rc.pk[1][n] = pk;
			taken[st] = true;
			n++;
		}
		for (int t = 0; t < 2; t++)
			cr_assert_eq(
			    pthread_create(&th[t], NULL, race_worker, &ra[t]),
			    0);
		for (int t = 0; t < 2; t++)
			cr_assert_eq(pthread_join(th[t], NULL), 0);
		/* every flow bound, every binding's reply finds its own
		 * flow's connection, no reply key twice */
		for (int t = 0; t < 2; t++)
			for (unsigned i = 0; i < RACE_PAIRS; i++) {
				struct dpflow_ct_pkt rp =
				    reply_of(&rc.v[t][i], 17, 0);
				struct dpflow_ct_result r;

				cr_assert_eq(rc.r[t][i].flags, DPFLOW_CT_R_NEW,
					     "round %d thread %d flow %u",
					     round, t, i);
				dpflow_ct_lookup(rc.ct, &rp, MS, &r);
				cr_assert_eq(r.conn, rc.r[t][i].conn,
					     "round %d: reply key shared",
					     round);
			}
		t2_audit(rc.ct, MS, false);
		cr_assert_eq(pool_stats(rc.ct, 0).bound, 2 * RACE_PAIRS);
		dpflow_ct_destroy(rc.ct);
	}
}
