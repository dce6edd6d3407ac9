/*
 * Connection tracking (lib/flow/ct.h).
 *
 * The TCP state machine is checked against tables of packet sequences with
 * the expected state and verdict after each packet, written by hand from
 * the documented table; random traffic is checked against a naive
 * reference model written here (a list of connections, a literal state
 * table, linear search); expiry, full-table policies, the control calls
 * and concurrent creation by two threads have their own cases.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
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

static struct dpflow_ct_pkt pkt4(uint32_t src, uint16_t sport, uint32_t dst,
				 uint16_t dport, uint8_t proto, uint8_t flags)
{
	struct dpflow_ct_pkt p;
	uint32_t s = htonl(src), d = htonl(dst);

	memset(&p, 0, sizeof(p));
	memcpy(p.src, &s, 4);
	memcpy(p.dst, &d, 4);
	p.sport = sport;
	p.dport = dport;
	p.proto = proto;
	p.family = 4;
	p.tcp_flags = flags;
	return p;
}

static struct dpflow_ct_pkt reversed(const struct dpflow_ct_pkt *p,
				     uint8_t flags)
{
	struct dpflow_ct_pkt r = *p;

	memcpy(r.src, p->dst, 16);
	memcpy(r.dst, p->src, 16);
	r.sport = p->dport;
	r.dport = p->sport;
	r.tcp_flags = flags;
	return r;
}

static struct dpflow_ct_image *make_ct(uint32_t max_conns, uint32_t flags,
				       uint32_t timeout_ms)
{
	struct dpflow_ct_params p;
	struct dpflow_error err = {0};
	struct dpflow_ct_image *ct;

	dpflow_ct_params_default(&p, max_conns);
	p.flags = flags;
	p.seed = 0x1234;
	if (timeout_ms)
		for (unsigned s = 1; s < DPFLOW_CT_STATE_COUNT; s++)
			p.timeout_ms[s] = timeout_ms;
	ct = dpflow_ct_create(&p, &err);
	cr_assert_not_null(ct, "%s", err.msg);
	return ct;
}

/* ---- image --------------------------------------------------------------- */

Test(ct, init_checks_arguments)
{
	struct dpflow_ct_params p;
	struct dpflow_error err = {0};
	size_t size;
	void *mem;

	cr_assert_eq(dpflow_ct_image_size(0), 0);
	cr_assert_eq(dpflow_ct_image_size(DPFLOW_CT_CAPACITY_MAX + 1), 0);
	/* 100 connections: 150 slots -> 32 buckets of 8; a control word,
	 * a slot line and a value block a slot */
	size = dpflow_ct_image_size(100);
	cr_assert_eq(size, 256 + 32 * 64 + 128 + 256 * 128);
	dpflow_ct_params_default(&p, 100);
	mem = aligned_alloc(64, size);
	cr_assert_eq(dpflow_ct_image_init(mem, size, NULL, &err), -EINVAL);
	cr_assert_str_eq(err.field, "params");
	p.max_conns = 0;
	cr_assert_eq(dpflow_ct_image_init(mem, size, &p, &err), -EINVAL);
	cr_assert_str_eq(err.field, "max_conns");
	p.max_conns = 100;
	p.flags = 0x80;
	cr_assert_eq(dpflow_ct_image_init(mem, size, &p, &err), -EINVAL);
	cr_assert_str_eq(err.field, "flags");
	p.flags = 0;
	p.timeout_ms[DPFLOW_CT_CLOSE] = 0x80000000u;
	cr_assert_eq(dpflow_ct_image_init(mem, size, &p, &err), -EINVAL);
	cr_assert_str_eq(err.field, "timeout_ms");
	p.timeout_ms[DPFLOW_CT_CLOSE] = 10;
	cr_assert_eq(dpflow_ct_image_init((uint8_t *)mem + 32, size, &p, &err),
		     -EINVAL);
	cr_assert_str_eq(err.field, "mem");
	cr_assert_eq(dpflow_ct_image_init(mem, size - 1, &p, &err), -EINVAL);
	cr_assert_str_eq(err.field, "size");
	cr_assert_eq(dpflow_ct_image_init(mem, size, &p, &err), 0);
	cr_assert_eq(dpflow_ct_n_slots((struct dpflow_ct_image *)mem), 256);
	cr_assert_eq(dpflow_ct_image_bytes((struct dpflow_ct_image *)mem),
		     size);
	cr_assert_null(dpflow_ct_create(NULL, &err));
	p.max_conns = 0;
	cr_assert_null(dpflow_ct_create(&p, &err));
	cr_assert_str_eq(err.field, "max_conns");
	cr_assert_eq(
	    dpflow_ct_set_timeout((struct dpflow_ct_image *)mem, 0, 5, &err),
	    -EINVAL);
	cr_assert_str_eq(err.field, "state");
	cr_assert_eq(dpflow_ct_set_timeout((struct dpflow_ct_image *)mem,
					   DPFLOW_CT_STATE_COUNT, 5, &err),
		     -EINVAL);
	cr_assert_eq(dpflow_ct_set_timeout((struct dpflow_ct_image *)mem,
					   DPFLOW_CT_CLOSE, 0x80000000u, &err),
		     -EINVAL);
	cr_assert_str_eq(err.field, "timeout_ms");
	cr_assert_str_eq(dpflow_ct_state_name(DPFLOW_CT_ESTABLISHED),
			 "established");
	cr_assert_str_eq(dpflow_ct_state_name(99), "unknown");
	cr_assert_str_eq(dpflow_ct_stat_name(DPFLOW_CT_STAT_REFUSED),
			 "refused");
	cr_assert_str_eq(dpflow_ct_stat_name(DPFLOW_CT_STAT__COUNT), "unknown");
	dpflow_ct_destroy(NULL);
	free(mem);
}

/* ---- TCP state machine: sequences ---------------------------------------- */

enum { O, R }; /* packet sent by the initiator (O) or the responder (R) */

struct step {
	int from;	/* O or R; -1 ends a sequence */
	uint8_t flags;	/* TCP flags */
	uint8_t state;	/* expected state after the packet */
	uint8_t rflags; /* expected result flags */
};

struct seq {
	const char *name;
	struct step s[16];
};

#define SS     DPFLOW_CT_SYN_SENT
#define SR     DPFLOW_CT_SYN_RECV
#define ES     DPFLOW_CT_ESTABLISHED
#define FW     DPFLOW_CT_FIN_WAIT
#define CW     DPFLOW_CT_CLOSE_WAIT
#define LA     DPFLOW_CT_LAST_ACK
#define TW     DPFLOW_CT_TIME_WAIT
#define CL     DPFLOW_CT_CLOSE
#define NEW    DPFLOW_CT_R_NEW
#define INV    DPFLOW_CT_R_INVALID
#define IGN    DPFLOW_CT_R_IGNORED
#define REO    DPFLOW_CT_R_REOPEN
#define SYNACK (F_SYN | F_ACK)
#define FINACK (F_FIN | F_ACK)
#define DATA   (F_ACK | F_PSH)

static const struct seq tcp_seqs[] = {
    {"handshake, data, close from the initiator",
     {{O, F_SYN, SS, NEW},
      {R, SYNACK, SR, 0},
      {O, F_ACK, ES, 0},
      {O, DATA, ES, 0},
      {R, DATA, ES, 0},
      {O, FINACK, FW, 0},
      {O, F_ACK, FW, 0}, /* the FIN sender acks data: still FIN_WAIT */
      {R, F_ACK, CW, 0},
      {R, DATA, CW, 0}, /* half-closed: the other side still sends */
      {O, F_ACK, CW, 0},
      {R, FINACK, LA, 0},
      {R, FINACK, LA, 0}, /* retransmitted second FIN */
      {O, F_ACK, TW, 0},
      {O, F_ACK, TW, 0},
      {-1, 0, 0, 0}}},
    {"close from the responder",
     {{O, F_SYN, SS, NEW},
      {R, SYNACK, SR, 0},
      {O, F_ACK, ES, 0},
      {R, FINACK, FW, 0},
      {R, FINACK, FW, 0}, /* retransmitted FIN */
      {O, F_ACK, CW, 0},
      {O, DATA, CW, 0},
      {O, FINACK, LA, 0},
      {O, F_ACK, LA, 0}, /* not the last ACK: from the second closer */
      {R, F_ACK, TW, 0},
      {-1, 0, 0, 0}}},
    {"FIN answered by FIN+ACK",
     {{O, F_SYN, SS, NEW},
      {R, SYNACK, SR, 0},
      {O, F_ACK, ES, 0},
      {O, FINACK, FW, 0},
      {R, FINACK, LA, 0},
      {O, F_ACK, TW, 0},
      {-1, 0, 0, 0}}},
    {"simultaneous close",
     {{O, F_SYN, SS, NEW},
      {R, SYNACK, SR, 0},
      {O, F_ACK, ES, 0},
      {R, FINACK, FW, 0},
      {O, FINACK, LA, 0},
      {O, F_ACK, LA, 0},
      {R, F_ACK, TW, 0},
      {-1, 0, 0, 0}}},
    {"FIN during the handshake",
     {{O, F_SYN, SS, NEW},
      {R, SYNACK, SR, 0},
      {R, FINACK, FW, 0},
      {O, F_ACK, CW, 0},
      {-1, 0, 0, 0}}},
    {"reset by the responder",
     {{O, F_SYN, SS, NEW},
      {R, SYNACK, SR, 0},
      {O, F_ACK, ES, 0},
      {R, F_RST, CL, 0},
      {O, F_ACK, CL, 0},
      {R, F_RST | F_ACK, CL, 0},
      {-1, 0, 0, 0}}},
    {"connection refused",
     {{O, F_SYN, SS, NEW}, {R, F_RST | F_ACK, CL, 0}, {-1, 0, 0, 0}}},
    {"reset by the initiator while closing",
     {{O, F_SYN, SS, NEW},
      {R, SYNACK, SR, 0},
      {O, F_ACK, ES, 0},
      {O, FINACK, FW, 0},
      {O, F_RST, CL, 0},
      {-1, 0, 0, 0}}},
    {"simultaneous open",
     {{O, F_SYN, SS, NEW},
      {R, F_SYN, SR, 0},
      {O, SYNACK, SR, 0},
      {R, SYNACK, SR, IGN},
      {O, F_ACK, ES, 0},
      {R, F_ACK, ES, 0},
      {-1, 0, 0, 0}}},
    {"retransmitted SYN and SYN-ACK",
     {{O, F_SYN, SS, NEW},
      {O, F_SYN, SS, 0},
      {O, F_SYN, SS, 0},
      {R, SYNACK, SR, 0},
      {O, F_SYN, SR, IGN},
      {R, SYNACK, SR, IGN},
      {R, F_ACK, SR, 0},
      {O, F_ACK, ES, 0},
      {O, F_SYN, ES, IGN},
      {R, SYNACK, ES, IGN},
      {-1, 0, 0, 0}}},
    {"packets that do not fit",
     {{O, F_SYN, SS, NEW},
      {O, F_ACK, SS, INV},	   /* ACK from the initiator before SYN-ACK */
      {R, F_ACK, SS, IGN},	   /* bare ACK from the responder */
      {O, SYNACK, SS, INV},	   /* SYN-ACK from the initiator */
      {O, FINACK, SS, INV},	   /* FIN before the handshake */
      {O, F_FIN, SS, INV},	   /* FIN without ACK: invalid flags */
      {O, F_SYN | F_FIN, SS, INV}, /* SYN+FIN */
      {O, F_SYN | F_RST, SS, INV}, /* SYN+RST */
      {O, 0, SS, INV},		   /* no flags */
      {O, F_PSH | F_URG, SS, INV},
      {R, SYNACK, SR, 0},
      {O, F_ACK | F_URG, ES, 0},
      {R, F_SYN, ES, INV}, /* SYN from the responder */
      {O, SYNACK, ES, INV},
      {-1, 0, 0, 0}}},
    {"reopen after TIME_WAIT and CLOSE",
     {{O, F_SYN, SS, NEW},
      {R, SYNACK, SR, 0},
      {O, F_ACK, ES, 0},
      {O, FINACK, FW, 0},
      {R, FINACK, LA, 0},
      {O, F_ACK, TW, 0},
      {R, F_SYN, TW, INV}, /* only the initiator reopens */
      {R, SYNACK, TW, IGN},
      {O, SYNACK, TW, INV},
      {O, F_SYN, SS, REO},
      {R, SYNACK, SR, 0},
      {O, F_ACK, ES, 0},
      {R, F_RST, CL, 0},
      {O, F_SYN | F_URG, SS, REO},
      {-1, 0, 0, 0}}},
    {"SYN with URG opens",
     {{O, F_SYN | F_URG, SS, NEW}, {R, SYNACK, SR, 0}, {-1, 0, 0, 0}}},
    {"mid-stream pickup (loose)",
     {{O, DATA, ES, NEW},
      {R, DATA, ES, 0},
      {R, FINACK, FW, 0},
      {O, FINACK, LA, 0},
      {R, F_ACK, TW, 0},
      {-1, 0, 0, 0}}},
};

/* Run each sequence on a fresh flow; check state, flags, direction and
 * that every packet lands on the same connection. */
static void run_seqs(const struct seq *seqs, size_t n, bool ipv6)
{
	struct dpflow_ct_image *ct = make_ct(64, DPFLOW_CT_F_TCP_LOOSE, 0);
	uint64_t now = 1000 * MS;

	for (size_t q = 0; q < n; q++) {
		struct dpflow_ct_pkt fwd = pkt4(0x0a000001u + (uint32_t)q,
						40000, 0xc0a80001u, 80, 6, 0);
		uint32_t conn = MISS;

		if (ipv6) {
			/* fc00::q -> fc00::1 */
			memset(fwd.src, 0, 16);
			memset(fwd.dst, 0, 16);
			fwd.src[0] = fwd.dst[0] = 0xfc;
			fwd.src[15] = (uint8_t)(q + 2);
			fwd.dst[15] = 1;
			fwd.family = 6;
		}
		for (const struct step *st = seqs[q].s; st->from >= 0; st++) {
			struct dpflow_ct_pkt p =
			    st->from == O ? fwd : reversed(&fwd, 0);
			struct dpflow_ct_result r;
			int k = (int)(st - seqs[q].s);

			p.tcp_flags = st->flags;
			now += MS;
			dpflow_ct_process(ct, &p, now, 7000 + (uint32_t)q, &r);
			cr_assert_neq(r.conn, MISS,
				      "%s, packet %d: no connection",
				      seqs[q].name, k);
			if (conn == MISS)
				conn = r.conn;
			cr_assert_eq(r.conn, conn,
				     "%s, packet %d: another "
				     "connection",
				     seqs[q].name, k);
			cr_assert_eq(r.state, st->state,
				     "%s, packet %d: state %s, expected %s",
				     seqs[q].name, k,
				     dpflow_ct_state_name(r.state),
				     dpflow_ct_state_name(st->state));
			cr_assert_eq(r.flags, st->rflags,
				     "%s, packet %d: flags 0x%x, expected 0x%x",
				     seqs[q].name, k, r.flags, st->rflags);
			cr_assert_eq(r.dir,
				     st->from == O ? DPFLOW_CT_DIR_ORIG
						   : DPFLOW_CT_DIR_REPLY,
				     "%s, packet %d: direction", seqs[q].name,
				     k);
			cr_assert_eq(r.user, 7000 + (uint32_t)q);
			cr_assert_eq(r.drop, DPFLOW_CT_DROP_NONE);
		}
	}
	dpflow_ct_destroy(ct);
}

Test(ct, tcp_state_machine_sequences_ipv4)
{
	run_seqs(tcp_seqs, DPFLOW_ARRAY_SIZE(tcp_seqs), false);
}

Test(ct, tcp_state_machine_sequences_ipv6)
{
	run_seqs(tcp_seqs, DPFLOW_ARRAY_SIZE(tcp_seqs), true);
}

Test(ct, tcp_packets_that_cannot_open_a_connection)
{
	static const uint8_t flags[] = {
	    SYNACK, FINACK, F_RST, F_RST | F_ACK, 0, F_FIN, F_SYN | F_FIN};
	struct dpflow_ct_image *loose = make_ct(64, DPFLOW_CT_F_TCP_LOOSE, 0);
	struct dpflow_ct_image *strict = make_ct(64, 0, 0);
	struct dpflow_ct_stats st;
	struct dpflow_ct_result r;

	for (size_t i = 0; i < sizeof(flags); i++) {
		struct dpflow_ct_pkt p =
		    pkt4(1, 1000 + (uint16_t)i, 2, 80, 6, flags[i]);

		dpflow_ct_process(loose, &p, MS, 1, &r);
		cr_assert(r.conn == MISS && r.flags == DPFLOW_CT_R_INVALID &&
			      r.drop == DPFLOW_CT_DROP_INVALID,
			  "flags 0x%x", flags[i]);
	}
	/* without TCP_LOOSE an ACK does not open either */
	{
		struct dpflow_ct_pkt p = pkt4(1, 999, 2, 80, 6, F_ACK);

		dpflow_ct_process(strict, &p, MS, 1, &r);
		cr_assert(r.conn == MISS && r.drop == DPFLOW_CT_DROP_INVALID);
		p.tcp_flags = F_SYN;
		dpflow_ct_process(strict, &p, MS, 1, &r);
		cr_assert(r.conn != MISS && r.flags == DPFLOW_CT_R_NEW);
	}
	dpflow_ct_stats_get(loose, &st);
	cr_assert_eq(st.stat[DPFLOW_CT_STAT_INVALID], sizeof(flags));
	cr_assert_eq(st.stat[DPFLOW_CT_STAT_CREATED], 0);
	cr_assert_eq(dpflow_ct_count(loose), 0);
	dpflow_ct_destroy(loose);
	dpflow_ct_destroy(strict);
}

Test(ct, udp_icmp_and_other_protocols_unreplied_then_replied)
{
	static const struct {
		uint8_t proto;
		uint8_t unreplied, replied;
	} cases[] = {
	    {17, DPFLOW_CT_UDP_UNREPLIED, DPFLOW_CT_UDP_REPLIED},
	    {1, DPFLOW_CT_ICMP_UNREPLIED, DPFLOW_CT_ICMP_REPLIED},
	    {58, DPFLOW_CT_ICMP_UNREPLIED, DPFLOW_CT_ICMP_REPLIED},
	    {132, DPFLOW_CT_OTHER_UNREPLIED, DPFLOW_CT_OTHER_REPLIED},
	    {47, DPFLOW_CT_OTHER_UNREPLIED, DPFLOW_CT_OTHER_REPLIED},
	};
	struct dpflow_ct_image *ct = make_ct(64, 0, 0);

	for (size_t i = 0; i < DPFLOW_ARRAY_SIZE(cases); i++) {
		uint16_t port = cases[i].proto == 17 ? 53 : 0;
		struct dpflow_ct_pkt p =
		    pkt4(0x0a000001u, port ? 5353 : 0, 0x0a000002u, port,
			 cases[i].proto, 0);
		struct dpflow_ct_pkt q = reversed(&p, 0);
		struct dpflow_ct_result r;
		struct dpflow_ct_info info;
		uint32_t conn;

		dpflow_ct_process(ct, &p, 10 * MS, 42, &r);
		cr_assert(r.flags == DPFLOW_CT_R_NEW &&
			  r.state == cases[i].unreplied);
		conn = r.conn;
		dpflow_ct_process(ct, &p, 11 * MS, 0, &r);
		cr_assert(r.conn == conn && r.flags == 0 &&
			  r.state == cases[i].unreplied &&
			  r.dir == DPFLOW_CT_DIR_ORIG);
		cr_assert_eq(dpflow_ct_get(ct, conn, 11 * MS, &info, NULL), 0);
		cr_assert(!info.replied);
		dpflow_ct_process(ct, &q, 12 * MS, 0, &r);
		cr_assert(r.conn == conn && r.state == cases[i].replied &&
			  r.dir == DPFLOW_CT_DIR_REPLY && r.user == 42);
		dpflow_ct_process(ct, &p, 13 * MS, 0, &r);
		cr_assert(r.state == cases[i].replied);
		cr_assert_eq(dpflow_ct_get(ct, conn, 13 * MS, &info, NULL), 0);
		cr_assert(info.replied && info.state == cases[i].replied);
		cr_assert_eq(info.last_seen_ns, 13 * MS);
		cr_assert_eq(info.created_ns, 10 * MS);
		cr_assert_eq(info.orig.proto, cases[i].proto);
		cr_assert_eq(memcmp(info.orig.src, p.src, 16), 0);
	}
	/* one connection per protocol: ICMP and ICMPv6 are distinct protos */
	cr_assert_eq(dpflow_ct_count(ct), DPFLOW_ARRAY_SIZE(cases));
	dpflow_ct_destroy(ct);
}

/* ---- keys: both directions ------------------------------------------------
 */

Test(ct, both_directions_find_the_same_connection)
{
	struct dpflow_ct_image *ct = make_ct(4000, 0, 0);
	uint64_t s = 77;

	for (int i = 0; i < 3000; i++) {
		struct dpflow_ct_pkt p;
		struct dpflow_ct_pkt q;
		struct dpflow_ct_result r1, r2, r3;

		memset(&p, 0, sizeof(p));
		p.family = i % 2 ? 6 : 4;
		for (int b = 0; b < 16; b++) {
			p.src[b] = (uint8_t)rng_next(&s);
			p.dst[b] = (uint8_t)rng_next(&s);
		}
		if (i % 5 == 0) /* same addresses, ports decide the order */
			memcpy(p.dst, p.src, 16);
		p.sport = (uint16_t)rng_next(&s);
		p.dport = (uint16_t)rng_next(&s);
		p.proto = i % 3 ? 17 : 6;
		p.tcp_flags = F_SYN;
		q = reversed(&p, F_SYN);
		/* the direction decides, not the order of the ends */
		dpflow_ct_process(ct, i % 4 ? &p : &q, 5 * MS, (uint32_t)i,
				  &r1);
		cr_assert_eq(r1.flags, DPFLOW_CT_R_NEW, "flow %d", i);
		dpflow_ct_lookup(ct, &q, 5 * MS, &r2);
		dpflow_ct_lookup(ct, &p, 5 * MS, &r3);
		cr_assert(r2.conn == r1.conn && r3.conn == r1.conn, "flow %d",
			  i);
		cr_assert_eq(r2.dir,
			     i % 4 ? DPFLOW_CT_DIR_REPLY : DPFLOW_CT_DIR_ORIG);
		cr_assert_eq(r3.dir,
			     i % 4 ? DPFLOW_CT_DIR_ORIG : DPFLOW_CT_DIR_REPLY);
		cr_assert(r2.user == (uint32_t)i && r3.user == (uint32_t)i);
	}
	cr_assert_eq(dpflow_ct_count(ct), 3000);
	dpflow_ct_destroy(ct);
}

Test(ct, keys_keep_families_protocols_and_ports_apart)
{
	struct dpflow_ct_image *ct = make_ct(64, 0, 0);
	struct dpflow_ct_pkt a =
	    pkt4(0x01020304u, 1000, 0x05060708u, 2000, 17, 0);
	struct dpflow_ct_pkt v[6];
	struct dpflow_ct_result r;
	uint32_t seen[6];

	v[0] = a;
	v[1] = a; /* the same bytes as IPv6 */
	v[1].family = 6;
	v[2] = a; /* TCP */
	v[2].proto = 6;
	v[2].tcp_flags = F_SYN;
	v[3] = a; /* ports swapped, addresses not: another connection */
	v[3].sport = 2000;
	v[3].dport = 1000;
	v[4] = a; /* garbage after the IPv4 address is ignored */
	v[4].src[7] = 0xee;
	v[5] = a; /* both ends equal: all its packets are one direction */
	memcpy(v[5].dst, v[5].src, 16);
	v[5].dport = v[5].sport;
	for (int i = 0; i < 6; i++) {
		dpflow_ct_process(ct, &v[i], MS, (uint32_t)i, &r);
		seen[i] = r.conn;
		cr_assert_eq(r.flags, i == 4 ? 0 : DPFLOW_CT_R_NEW, "case %d",
			     i);
	}
	cr_assert_eq(seen[4], seen[0]);
	for (int i = 0; i < 6; i++)
		for (int j = 0; j < i; j++)
			if (!(i == 4 && j == 0))
				cr_assert_neq(seen[i], seen[j]);
	/* the self-connection's "reply" is its own packet: stays ORIG */
	dpflow_ct_process(ct, &v[5], 2 * MS, 0, &r);
	cr_assert(r.dir == DPFLOW_CT_DIR_ORIG &&
		  r.state == DPFLOW_CT_UDP_UNREPLIED);
	cr_assert_eq(dpflow_ct_count(ct), 5);
	dpflow_ct_destroy(ct);
}

Test(ct, packet_from_parsed_header)
{
	struct dpflow_hdr h;
	struct dpflow_ct_pkt p;

	memset(&h, 0, sizeof(h));
	h.l3_type = DPFLOW_L3_IPV4;
	h.l4_type = DPFLOW_L4_TCP;
	h.proto = 6;
	h.src[0] = 10;
	h.dst[0] = 11;
	h.src[5] = 0x55; /* beyond IPv4: not copied */
	h.sport = 1234;
	h.dport = 80;
	h.tcp_flags = F_SYN;
	cr_assert(dpflow_ct_pkt_from_hdr(&h, &p));
	cr_assert(p.family == 4 && p.proto == 6 && p.src[0] == 10 &&
		  p.src[5] == 0 && p.dst[0] == 11 && p.sport == 1234 &&
		  p.dport == 80 && p.tcp_flags == F_SYN);
	h.l4_type = DPFLOW_L4_ICMP; /* type/code do not go into the key */
	h.proto = 1;
	h.sport = 8;
	cr_assert(dpflow_ct_pkt_from_hdr(&h, &p));
	cr_assert(p.sport == 0 && p.dport == 0 && p.tcp_flags == 0);
	h.l3_type = DPFLOW_L3_IPV6;
	h.l4_type = DPFLOW_L4_UDP;
	h.proto = 17;
	cr_assert(dpflow_ct_pkt_from_hdr(&h, &p));
	cr_assert(p.family == 6 && p.src[5] == 0x55 && p.sport == 8);
	h.frag = DPFLOW_FRAG_LATER;
	cr_assert(!dpflow_ct_pkt_from_hdr(&h, &p));
	h.frag = DPFLOW_FRAG_NONE;
	h.l3_type = DPFLOW_L3_OTHER;
	cr_assert(!dpflow_ct_pkt_from_hdr(&h, &p));
}

/* ---- expiry -------------------------------------------------------------- */

struct report {
	uint32_t n;
	struct dpflow_ct_info info[256];
};

static void report_cb(const struct dpflow_ct_info *info, void *arg)
{
	struct report *rep = (struct report *)arg;

	cr_assert_lt(rep->n, 256);
	rep->info[rep->n++] = *info;
}

/* Packets (from O or R) that bring a fresh TCP flow to each state. */
static const struct {
	uint8_t state;
	struct step s[8];
} to_state[] = {
    {SS, {{O, F_SYN, 0, 0}, {-1, 0, 0, 0}}},
    {SR, {{O, F_SYN, 0, 0}, {R, SYNACK, 0, 0}, {-1, 0, 0, 0}}},
    {ES,
     {{O, F_SYN, 0, 0}, {R, SYNACK, 0, 0}, {O, F_ACK, 0, 0}, {-1, 0, 0, 0}}},
    {FW, {{O, DATA, 0, 0}, {O, FINACK, 0, 0}, {-1, 0, 0, 0}}},
    {CW, {{O, DATA, 0, 0}, {O, FINACK, 0, 0}, {R, F_ACK, 0, 0}, {-1, 0, 0, 0}}},
    {LA,
     {{O, DATA, 0, 0}, {O, FINACK, 0, 0}, {R, FINACK, 0, 0}, {-1, 0, 0, 0}}},
    {TW,
     {{O, DATA, 0, 0},
      {O, FINACK, 0, 0},
      {R, FINACK, 0, 0},
      {O, F_ACK, 0, 0},
      {-1, 0, 0, 0}}},
    {CL, {{O, F_SYN, 0, 0}, {R, F_RST, 0, 0}, {-1, 0, 0, 0}}},
};

Test(ct, timeouts_expire_exactly_by_state)
{
	struct dpflow_ct_params p;
	struct dpflow_ct_image *ct;
	struct report rep = {0};
	uint32_t conn[DPFLOW_CT_STATE_COUNT];
	uint64_t t0 = 3000000 * MS; /* 50 minutes on some clock */
	uint32_t expected_live = 0;

	dpflow_ct_params_default(&p, 256);
	/* a different timeout per state: state s lives s * 100 + 7 ms */
	for (unsigned s = 1; s < DPFLOW_CT_STATE_COUNT; s++)
		p.timeout_ms[s] = s * 100 + 7;
	ct = dpflow_ct_create(&p, NULL);
	for (size_t i = 0; i < DPFLOW_ARRAY_SIZE(to_state); i++) {
		struct dpflow_ct_pkt f =
		    pkt4(0x0a000000u + (uint32_t)i, 999, 0x0b000000u, 80, 6, 0);
		struct dpflow_ct_result r = {0};

		/* all packets of the flow in the same millisecond, t0 */
		for (const struct step *st = to_state[i].s; st->from >= 0;
		     st++) {
			struct dpflow_ct_pkt q =
			    st->from == O ? f : reversed(&f, 0);

			q.tcp_flags = st->flags;
			dpflow_ct_process(ct, &q, t0 + 123456, (uint32_t)i, &r);
		}
		cr_assert_eq(r.state, to_state[i].state);
		conn[r.state] = r.conn;
		expected_live++;
	}
	for (uint8_t proto = 1; proto <= 17; proto += 16) { /* ICMP, UDP */
		struct dpflow_ct_pkt u =
		    pkt4(0x0c000001u, 7, 0x0c000002u, 9, proto, 0);
		struct dpflow_ct_pkt v =
		    pkt4(0x0c000001u, 8, 0x0c000003u, 9, proto, 0);
		struct dpflow_ct_pkt vr = reversed(&v, 0);
		struct dpflow_ct_result r;

		dpflow_ct_process(ct, &u, t0, 100, &r);
		conn[r.state] = r.conn;
		dpflow_ct_process(ct, &v, t0, 101, &r);
		dpflow_ct_process(ct, &vr, t0 + 999999, 101, &r);
		conn[r.state] = r.conn;
		expected_live += 2;
	}
	{
		struct dpflow_ct_pkt o =
		    pkt4(0x0d000001u, 0, 0x0d000002u, 0, 47, 0);
		struct dpflow_ct_pkt orr = reversed(&o, 0);
		struct dpflow_ct_pkt o2 =
		    pkt4(0x0d000001u, 0, 0x0d000003u, 0, 47, 0);
		struct dpflow_ct_result r;

		dpflow_ct_process(ct, &o, t0, 102, &r);
		dpflow_ct_process(ct, &orr, t0, 102, &r);
		conn[r.state] = r.conn;
		dpflow_ct_process(ct, &o2, t0, 103, &r);
		conn[r.state] = r.conn;
		expected_live += 2;
	}
	cr_assert_eq(dpflow_ct_count(ct), DPFLOW_CT_STATE_COUNT - 1);

	/* state s goes at t0 + (s * 100 + 7) ms, not one millisecond
	 * before, whatever the nanoseconds */
	for (unsigned s = 1; s < DPFLOW_CT_STATE_COUNT; s++) {
		uint64_t due = t0 + (s * 100 + 7) * MS;

		cr_assert_eq(
		    dpflow_ct_age(ct, due - 1, NULL, 0, report_cb, &rep), 0,
		    "state %s before its timeout", dpflow_ct_state_name(s));
		cr_assert_eq(dpflow_ct_age(ct, due, NULL, 0, report_cb, &rep),
			     1, "state %s at its timeout",
			     dpflow_ct_state_name(s));
		cr_assert_eq(rep.info[rep.n - 1].state, s);
		cr_assert_eq(rep.info[rep.n - 1].conn, conn[s]);
		cr_assert_eq(rep.info[rep.n - 1].last_seen_ns, t0);
		expected_live--;
		cr_assert_eq(dpflow_ct_count(ct), expected_live);
	}
	cr_assert_eq(rep.n, DPFLOW_CT_STATE_COUNT - 1);
	{
		struct dpflow_ct_stats st;

		dpflow_ct_stats_get(ct, &st);
		cr_assert_eq(st.live, 0);
		cr_assert_eq(st.stat[DPFLOW_CT_STAT_EXPIRED],
			     DPFLOW_CT_STATE_COUNT - 1);
	}
	dpflow_ct_destroy(ct);
}

Test(ct, only_valid_packets_refresh_and_timeouts_can_change)
{
	struct dpflow_ct_image *ct = make_ct(64, 0, 1000);
	struct dpflow_ct_pkt f = pkt4(1, 1111, 2, 22, 6, F_SYN);
	struct dpflow_ct_pkt g = pkt4(1, 1112, 2, 22, 17, 0);
	struct dpflow_ct_result r;
	struct report rep = {0};
	uint64_t t = 5000 * MS;

	dpflow_ct_process(ct, &f, t, 1, &r);
	f = reversed(&f, SYNACK);
	dpflow_ct_process(ct, &f, t, 1, &r);
	f = reversed(&f, F_ACK);
	dpflow_ct_process(ct, &f, t, 1, &r); /* ESTABLISHED at t */
	dpflow_ct_process(ct, &g, t, 2, &r);
	/* at t + 600: an invalid and an ignored packet do not refresh */
	f.tcp_flags = SYNACK;
	dpflow_ct_process(ct, &f, t + 600 * MS, 0, &r);
	cr_assert_eq(r.flags, DPFLOW_CT_R_INVALID);
	f.tcp_flags = F_SYN;
	dpflow_ct_process(ct, &f, t + 600 * MS, 0, &r);
	cr_assert_eq(r.flags, DPFLOW_CT_R_IGNORED);
	/* a valid UDP packet does */
	dpflow_ct_process(ct, &g, t + 600 * MS, 0, &r);
	cr_assert_eq(dpflow_ct_age(ct, t + 1000 * MS, NULL, 0, report_cb, &rep),
		     1);
	cr_assert_eq(rep.info[0].state, DPFLOW_CT_ESTABLISHED);
	cr_assert_eq(rep.info[0].user, 1);
	cr_assert_eq(rep.info[0].orig.sport, 1111);
	cr_assert_eq(rep.info[0].orig.dport, 22);
	/* timeout 0: never */
	cr_assert_eq(
	    dpflow_ct_set_timeout(ct, DPFLOW_CT_UDP_UNREPLIED, 0, NULL), 0);
	cr_assert_eq(dpflow_ct_age(ct, t + 100000000 * MS, NULL, 0, NULL, NULL),
		     0);
	/* a shorter timeout applies at once */
	cr_assert_eq(
	    dpflow_ct_set_timeout(ct, DPFLOW_CT_UDP_UNREPLIED, 50, NULL), 0);
	cr_assert_eq(dpflow_ct_age(ct, t + 649 * MS, NULL, 0, NULL, NULL), 0);
	cr_assert_eq(dpflow_ct_age(ct, t + 650 * MS, NULL, 0, NULL, NULL), 1);
	dpflow_ct_destroy(ct);
}

Test(ct, expired_connection_is_replaced_before_the_scan)
{
	struct dpflow_ct_image *ct = make_ct(64, 0, 100);
	struct dpflow_ct_pkt u = pkt4(1, 53, 2, 5353, 17, 0);
	struct dpflow_ct_result r1, r2, r3;
	struct dpflow_ct_info info;
	struct report rep = {0};
	struct dpflow_ct_stats st;

	dpflow_ct_process(ct, &u, 10 * MS, 111, &r1);
	dpflow_ct_process(ct, &u, 109 * MS, 0, &r2);
	cr_assert(r2.conn == r1.conn && r2.flags == 0);
	/* 100 ms after the last packet: expired, even unscanned */
	dpflow_ct_lookup(ct, &u, 209 * MS, &r3);
	cr_assert_eq(r3.conn, MISS);
	dpflow_ct_lookup(ct, &u, 208 * MS + 999999, &r3);
	cr_assert_eq(r3.conn, r1.conn);
	dpflow_ct_process(ct, &u, 209 * MS, 222, &r3);
	cr_assert(r3.flags == DPFLOW_CT_R_NEW && r3.user == 222 &&
		  r3.conn != r1.conn);
	/* the old one waits, DEAD, for the scan that reports it */
	cr_assert_eq(dpflow_ct_get(ct, r1.conn, 209 * MS, &info, NULL), 0);
	cr_assert(info.dead && info.user == 111);
	cr_assert_eq(dpflow_ct_count(ct), 1);
	dpflow_ct_stats_get(ct, &st);
	cr_assert_eq(st.live, 2);
	cr_assert_eq(dpflow_ct_age(ct, 209 * MS, NULL, 0, report_cb, &rep), 1);
	cr_assert(rep.info[0].conn == r1.conn && rep.info[0].user == 111 &&
		  rep.info[0].last_seen_ns == 109 * MS);
	dpflow_ct_stats_get(ct, &st);
	cr_assert_eq(st.live, 1);
	dpflow_ct_destroy(ct);
}

/* A flow that expires again and again before any scan leaves DEAD
 * connections in its buckets; once they are full, the next one takes over
 * a DEAD slot (counted as expired) rather than refusing the flow. */
Test(ct, dead_connections_give_way_when_buckets_fill)
{
	struct dpflow_ct_image *ct = make_ct(1000, 0, 1);
	struct dpflow_ct_pkt u = pkt4(1, 2, 3, 4, 17, 0);
	struct dpflow_ct_stats st;
	struct dpflow_ct_result r;
	struct report rep = {0};

	for (uint32_t i = 0; i < 40; i++) {
		dpflow_ct_process(ct, &u, (uint64_t)i * 2 * MS, i, &r);
		cr_assert(r.flags == DPFLOW_CT_R_NEW && r.user == i,
			  "packet %u", i);
	}
	dpflow_ct_stats_get(ct, &st);
	/* 16 slots in the flow's two buckets: 15 DEAD and the live one */
	cr_assert_eq(st.stat[DPFLOW_CT_STAT_EXPIRED], 40 - 16);
	cr_assert_eq(st.stat[DPFLOW_CT_STAT_REFUSED], 0);
	cr_assert_eq(st.live, 16);
	cr_assert_eq(dpflow_ct_count(ct), 1);
	cr_assert_eq(dpflow_ct_age(ct, 100 * MS, NULL, 0, report_cb, &rep), 16);
	dpflow_ct_destroy(ct);
}

Test(ct, aging_cursor_scans_a_slice_at_a_time)
{
	struct dpflow_ct_image *ct = make_ct(100, 0, 10);
	uint32_t n = dpflow_ct_n_slots(ct), cursor = 5, total = 0;
	struct dpflow_ct_result r;

	for (uint32_t i = 0; i < 100; i++) {
		struct dpflow_ct_pkt u = pkt4(i, 1, 1000, 2, 17, 0);

		dpflow_ct_process(ct, &u, 0, i, &r);
		cr_assert_eq(r.flags, DPFLOW_CT_R_NEW);
	}
	for (uint32_t k = 0; k * 16 < n; k++) {
		uint32_t before = cursor;

		total += dpflow_ct_age(ct, 10 * MS, &cursor, 16, NULL, NULL);
		cr_assert_eq(cursor, (before + 16) % n);
	}
	cr_assert_eq(total, 100);
	cr_assert_eq(dpflow_ct_count(ct), 0);
	dpflow_ct_destroy(ct);
}

/* ---- full table ---------------------------------------------------------- */

Test(ct, full_table_refuses_and_counts)
{
	struct dpflow_ct_image *ct = make_ct(100, 0, 0);
	struct dpflow_ct_stats st;
	struct dpflow_ct_result r;
	uint32_t created = 0, refused = 0, first = MISS;
	struct dpflow_error err = {0};

	for (uint32_t i = 0; i < 150; i++) {
		struct dpflow_ct_pkt u = pkt4(0x0a000000u + i, 1, 9, 2, 17, 0);

		dpflow_ct_process(ct, &u, MS, i, &r);
		if (r.conn == MISS) {
			cr_assert_eq(r.drop, DPFLOW_CT_DROP_FULL, "flow %u", i);
			refused++;
		} else {
			cr_assert_eq(r.flags, DPFLOW_CT_R_NEW);
			if (first == MISS)
				first = r.conn;
			created++;
		}
	}
	cr_assert_eq(created, 100);
	cr_assert_eq(refused, 50);
	dpflow_ct_stats_get(ct, &st);
	cr_assert_eq(st.stat[DPFLOW_CT_STAT_REFUSED], 50);
	cr_assert_eq(st.stat[DPFLOW_CT_STAT_CREATED], 100);
	cr_assert_eq(st.live, 100);
	/* known connections go on */
	{
		struct dpflow_ct_pkt u = pkt4(0x0a000000u, 1, 9, 2, 17, 0);
		struct dpflow_ct_pkt back = reversed(&u, 0);

		dpflow_ct_process(ct, &back, 2 * MS, 0, &r);
		cr_assert(r.conn == first && r.state == DPFLOW_CT_UDP_REPLIED);
	}
	/* one removed: one more fits */
	cr_assert_eq(dpflow_ct_remove(ct, first, &err), 0);
	cr_assert_eq(dpflow_ct_remove(ct, first, &err), -ENOENT);
	cr_assert_str_eq(err.field, "conn");
	{
		struct dpflow_ct_pkt u = pkt4(0x0b000000u, 1, 9, 2, 17, 0);

		dpflow_ct_process(ct, &u, 3 * MS, 0, &r);
		cr_assert_eq(r.flags, DPFLOW_CT_R_NEW);
		u.sport = 2;
		dpflow_ct_process(ct, &u, 3 * MS, 0, &r);
		cr_assert_eq(r.drop, DPFLOW_CT_DROP_FULL);
	}
	dpflow_ct_stats_get(ct, &st);
	cr_assert_eq(st.stat[DPFLOW_CT_STAT_REFUSED], 51);
	cr_assert_eq(st.stat[DPFLOW_CT_STAT_REMOVED], 1);
	cr_assert_eq(dpflow_ct_count(ct), 100);
	dpflow_ct_destroy(ct);
}

Test(ct, full_table_evicts_expired_connections)
{
	struct dpflow_ct_params p;
	struct dpflow_ct_image *ct;
	struct dpflow_ct_stats st;
	struct dpflow_ct_result r;
	uint32_t accepted = 0, refused = 0;

	dpflow_ct_params_default(&p, 100);
	p.flags = DPFLOW_CT_F_EVICT;
	p.timeout_ms[DPFLOW_CT_UDP_UNREPLIED] = 1000; /* UDP: 1 s */
	ct = dpflow_ct_create(&p, NULL);
	/* 50 UDP and 50 TCP connections at 0 */
	for (uint32_t i = 0; i < 100; i++) {
		struct dpflow_ct_pkt f =
		    pkt4(0x0a000000u + i, 1, 9, 2, i % 2 ? 6 : 17, F_SYN);

		dpflow_ct_process(ct, &f, 0, i, &r);
		cr_assert_eq(r.flags, DPFLOW_CT_R_NEW);
	}
	/* before the UDP ones expire, nothing can be evicted */
	{
		struct dpflow_ct_pkt f = pkt4(0x0c000000u, 1, 9, 2, 17, 0);

		dpflow_ct_process(ct, &f, 999 * MS, 0, &r);
		cr_assert_eq(r.drop, DPFLOW_CT_DROP_FULL);
	}
	/* after: new flows take over expired UDP slots of their buckets */
	for (uint32_t i = 0; i < 100; i++) {
		struct dpflow_ct_pkt f = pkt4(0x0b000000u + i, 1, 9, 2, 17, 0);

		dpflow_ct_process(ct, &f, 1000 * MS, 1000 + i, &r);
		if (r.conn != MISS)
			accepted++;
		else
			refused++;
	}
	dpflow_ct_stats_get(ct, &st);
	cr_assert_gt(accepted, 10);
	cr_assert_leq(accepted, 50);
	cr_assert_eq(st.stat[DPFLOW_CT_STAT_EXPIRED], accepted);
	cr_assert_eq(st.stat[DPFLOW_CT_STAT_REFUSED], 1 + refused);
	cr_assert_eq(st.live, 100);
	/* every TCP connection survived */
	for (uint32_t i = 1; i < 100; i += 2) {
		struct dpflow_ct_pkt f = pkt4(0x0a000000u + i, 1, 9, 2, 6, 0);

		dpflow_ct_lookup(ct, &f, 1000 * MS, &r);
		cr_assert(r.conn != MISS && r.user == i);
	}
	dpflow_ct_destroy(ct);
}

/* ---- control calls ------------------------------------------------------- */

Test(ct, get_set_user_remove_flush_and_copy)
{
	struct dpflow_ct_image *ct = make_ct(300, 0, 0);
	struct dpflow_ct_image *copy;
	struct dpflow_error err = {0};
	struct dpflow_ct_info info;
	struct dpflow_ct_result r, rc;
	struct report rep = {0};
	uint32_t conn;
	struct dpflow_ct_pkt f =
	    pkt4(0x0a000001u, 4444, 0x0a000002u, 443, 6, F_SYN);

	dpflow_ct_process(ct, &f, 7 * MS + 5, 5, &r);
	conn = r.conn;
	cr_assert_eq(dpflow_ct_get(ct, conn, 8 * MS, &info, &err), 0);
	cr_assert(info.conn == conn && info.user == 5 &&
		  info.state == DPFLOW_CT_SYN_SENT && !info.replied &&
		  !info.dead && info.created_ns == 7 * MS + 5 &&
		  info.last_seen_ns == 7 * MS);
	cr_assert(info.orig.sport == 4444 && info.orig.dport == 443 &&
		  info.orig.family == 4 && info.orig.proto == 6 &&
		  memcmp(info.orig.src, f.src, 16) == 0 &&
		  memcmp(info.orig.dst, f.dst, 16) == 0);
	cr_assert_eq(dpflow_ct_set_user(ct, conn, 99, &err), 0);
	dpflow_ct_lookup(ct, &f, 8 * MS, &r);
	cr_assert_eq(r.user, 99);
	cr_assert_eq(dpflow_ct_get(ct, dpflow_ct_n_slots(ct), 0, &info, &err),
		     -EINVAL);
	cr_assert_str_eq(err.field, "conn");
	cr_assert_eq(dpflow_ct_get(ct, conn ^ 1, 0, &info, &err), -ENOENT);
	cr_assert_eq(dpflow_ct_set_user(ct, conn ^ 1, 1, &err), -ENOENT);
	cr_assert_eq(dpflow_ct_remove(ct, dpflow_ct_n_slots(ct), &err),
		     -EINVAL);

	/* a copy tracks the same connections, independently */
	for (uint32_t i = 0; i < 200; i++) {
		struct dpflow_ct_pkt u = pkt4(i, 1, 5000, 2, 17, 0);

		dpflow_ct_process(ct, &u, 9 * MS, i, &r);
	}
	copy = (struct dpflow_ct_image *)aligned_alloc(
	    64, dpflow_ct_image_bytes(ct));
	cr_assert_eq(dpflow_ct_image_copy(copy, 100, ct, &err), -EINVAL);
	cr_assert_str_eq(err.field, "dst_size");
	cr_assert_eq(
	    dpflow_ct_image_copy(copy, dpflow_ct_image_bytes(ct), ct, &err), 0);
	for (uint32_t i = 0; i < 250; i++) {
		struct dpflow_ct_pkt u = pkt4(5000, 2, i, 1, 17, 0);

		dpflow_ct_process(ct, &u, 10 * MS, 7, &r);
		dpflow_ct_process(copy, &u, 10 * MS, 7, &rc);
		cr_assert(memcmp(&r, &rc, sizeof(r)) == 0, "flow %u", i);
		cr_assert_eq(r.flags, i < 200 ? 0 : DPFLOW_CT_R_NEW);
	}
	cr_assert_eq(memcmp(ct, copy, dpflow_ct_image_bytes(ct)), 0);

	cr_assert_eq(dpflow_ct_flush(ct, 11 * MS, report_cb, &rep), 251);
	cr_assert_eq(rep.n, 251);
	cr_assert_eq(dpflow_ct_count(ct), 0);
	cr_assert_eq(dpflow_ct_count(copy), 251);
	dpflow_ct_lookup(ct, &f, 11 * MS, &r);
	cr_assert_eq(r.conn, MISS);
	free(copy);
	dpflow_ct_destroy(ct);
}

Test(ct, burst_gives_the_same_results_as_single_packets)
{
	struct dpflow_ct_image *a = make_ct(2000, DPFLOW_CT_F_TCP_LOOSE, 0);
	struct dpflow_ct_image *b = make_ct(2000, DPFLOW_CT_F_TCP_LOOSE, 0);
	static const uint8_t fl[] = {F_SYN, SYNACK, F_ACK, FINACK, F_RST, 0};
	struct dpflow_ct_pkt pk[200];
	struct dpflow_ct_result ra[200], rb[200];
	uint32_t user[200];
	uint64_t s = 99;

	for (int round = 0; round < 30; round++) {
		for (int i = 0; i < 200; i++) {
			uint32_t flow = (uint32_t)rng_below(&s, 700);

			pk[i] = pkt4(flow, 10, 77, 20, flow % 3 ? 6 : 17,
				     fl[rng_below(&s, sizeof(fl))]);
			if (rng_below(&s, 2))
				pk[i] = reversed(&pk[i], pk[i].tcp_flags);
			user[i] = (uint32_t)rng_next(&s);
		}
		cr_assert_eq(dpflow_ct_process_burst(
				 a, pk, 200, (uint64_t)round * MS, user, ra),
			     200);
		for (int i = 0; i < 200; i++)
			dpflow_ct_process(b, &pk[i], (uint64_t)round * MS,
					  user[i], &rb[i]);
		cr_assert(memcmp(ra, rb, sizeof(ra)) == 0, "round %d", round);
	}
	cr_assert_eq(memcmp(a, b, dpflow_ct_image_bytes(a)), 0);
	dpflow_ct_process_burst(a, pk, 5, 0, NULL, ra);
	dpflow_ct_destroy(a);
	dpflow_ct_destroy(b);
}

/* ---- random traffic against a naive reference model ---------------------- */

/*
 * The model's TCP table, written from the documented state machine.
 * Columns: SYN from initiator / responder, SYN-ACK initiator / responder,
 * FIN a / b, ACK a / b where a / b are initiator / responder in the
 * handshake states and ESTABLISHED, TIME_WAIT and CLOSE, and "the side that
 * sent the first FIN" / "the other side" in FIN_WAIT, CLOSE_WAIT and
 * LAST_ACK. RST always leads to CLOSE; invalid flag combinations are
 * invalid everywhere.
 */
enum { xIV = 100, xIG, xRO };
static const uint8_t model_tcp[DPFLOW_CT_CLOSE + 1][8] = {
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

/* Linux's valid TCP flag combinations (PSH, ECE, CWR ignored). */
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

struct mflow {
	struct dpflow_ct_pkt fwd; /* the flow's packets one way */
};

struct mconn {
	int flow;
	bool init_fwd; /* the initiator sent the flow's forward packets */
	uint8_t state;
	bool fin_by_init;
	bool fin_seen;
	uint64_t last_ms;
	uint32_t user;
	uint32_t idx;
	bool dead; /* expired; waiting for the scan */
};

struct model {
	struct mconn c[4096];
	int n;
	uint32_t timeout_ms[DPFLOW_CT_STATE_COUNT];
	bool loose;
};

static bool model_expired(const struct model *m, const struct mconn *c,
			  uint64_t now_ms)
{
	uint32_t to = m->timeout_ms[c->state];

	return to && now_ms - c->last_ms >= to;
}

/* Expected result of a packet of @flow (forward when @fwd). */
static void model_packet(struct model *m, int flow, bool fwd, uint8_t proto,
			 uint8_t flags, uint64_t now_ms, uint32_t user,
			 struct dpflow_ct_result *r, struct mconn **created)
{
	struct mconn *c = NULL;

	*created = NULL;
	memset(r, 0, sizeof(*r));
	r->conn = MISS;
	for (int i = 0; i < m->n; i++) {
		if (m->c[i].flow != flow || m->c[i].dead)
			continue;
		if (model_expired(m, &m->c[i], now_ms))
			m->c[i].dead = true;
		else
			c = &m->c[i];
	}
	if (!c) {
		uint8_t st = 0;

		if (proto == 6) {
			uint8_t f = flags & (uint8_t) ~(F_PSH | 0x40 | 0x80);

			if (model_flags_valid(flags) &&
			    (f == F_SYN || f == (F_SYN | F_URG)))
				st = SS;
			else if (model_flags_valid(flags) && m->loose &&
				 (f == F_ACK || f == (F_ACK | F_URG)))
				st = ES;
		} else {
			st = proto == 17  ? DPFLOW_CT_UDP_UNREPLIED
			     : proto == 1 ? DPFLOW_CT_ICMP_UNREPLIED
					  : DPFLOW_CT_OTHER_UNREPLIED;
		}
		if (!st) {
			r->flags = DPFLOW_CT_R_INVALID;
			r->drop = DPFLOW_CT_DROP_INVALID;
			return;
		}
		cr_assert_lt(m->n, 4096);
		c = &m->c[m->n++];
		memset(c, 0, sizeof(*c));
		c->flow = flow;
		c->init_fwd = fwd;
		c->state = st;
		c->last_ms = now_ms;
		c->user = user;
		*created = c;
		r->state = st;
		r->user = user;
		r->flags = DPFLOW_CT_R_NEW;
		return;
	}
	r->user = c->user;
	r->dir = fwd == c->init_fwd ? DPFLOW_CT_DIR_ORIG : DPFLOW_CT_DIR_REPLY;
	r->conn = c->idx;
	if (proto != 6) {
		if (r->dir == DPFLOW_CT_DIR_REPLY &&
		    (c->state == DPFLOW_CT_UDP_UNREPLIED ||
		     c->state == DPFLOW_CT_ICMP_UNREPLIED ||
		     c->state == DPFLOW_CT_OTHER_UNREPLIED))
			c->state++;
		c->last_ms = now_ms > c->last_ms ? now_ms : c->last_ms;
		r->state = c->state;
		return;
	}
	{
		bool from_init = r->dir == DPFLOW_CT_DIR_ORIG;
		uint8_t f = flags & (uint8_t) ~(F_PSH | 0x40 | 0x80);
		int col;
		uint8_t next;
		bool closing =
		    c->state == FW || c->state == CW || c->state == LA;
		bool side_a = closing ? from_init == c->fin_by_init : from_init;

		if (!model_flags_valid(flags)) {
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
			r->flags = DPFLOW_CT_R_INVALID;
		} else if (next == xIG) {
			r->flags = DPFLOW_CT_R_IGNORED;
		} else {
			if (next == xRO) {
				r->flags = DPFLOW_CT_R_REOPEN;
				next = SS;
				c->fin_seen = false;
			} else if (next == FW && !closing) {
				c->fin_seen = true;
				c->fin_by_init = from_init;
			}
			c->state = next;
			c->last_ms = now_ms > c->last_ms ? now_ms : c->last_ms;
		}
		r->state = c->state;
	}
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* The scan: every dead or expired model connection, removed. */
static uint32_t model_age(struct model *m, uint64_t now_ms, uint32_t *idx)
{
	uint32_t n = 0;
	int j = 0;

	for (int i = 0; i < m->n; i++) {
		if (m->c[i].dead || model_expired(m, &m->c[i], now_ms))
			idx[n++] = m->c[i].idx;
		else
			m->c[j++] = m->c[i];
	}
	m->n = j;
	qsort(idx, n, sizeof(*idx), cmp_u32);
	return n;
}

static void collect_cb(const struct dpflow_ct_info *info, void *arg)
{
	uint32_t *v = (uint32_t *)arg;

	v[++v[0]] = info->conn;
}

static void random_vs_model(uint64_t seed, bool loose, int n_pkts)
{
	enum { N_FLOWS = 300 };
	static struct mflow flows[N_FLOWS];
	static struct model m;
	static uint32_t got[4097], want[4096];
	static const uint8_t tcp_flags[] = {
	    F_SYN,  F_SYN,	   SYNACK,	  SYNACK,	 F_ACK,
	    F_ACK,  DATA,	   DATA,	  DATA,		 FINACK,
	    FINACK, F_RST,	   F_RST | F_ACK, F_FIN,	 0,
	    F_PSH,  F_SYN | F_FIN, F_ACK | F_URG, F_SYN | F_URG, F_ACK | 0x40};
	struct dpflow_ct_params p;
	struct dpflow_ct_image *ct;
	uint64_t s = seed, now = 1000 * MS, last_scan = now;
	struct dpflow_ct_stats st;
	int news = 0, invalids = 0, ignored = 0, expired = 0, reopens = 0;

	dpflow_ct_params_default(&p, 2000);
	p.flags = loose ? DPFLOW_CT_F_TCP_LOOSE : 0;
	p.seed = seed;
	memset(&m, 0, sizeof(m));
	m.loose = loose;
	for (unsigned k = 1; k < DPFLOW_CT_STATE_COUNT; k++) {
		/* 0.2 .. 3 s, and one state that never expires */
		p.timeout_ms[k] = k == DPFLOW_CT_ESTABLISHED
				      ? 0
				      : 200 + (uint32_t)rng_below(&s, 2800);
		m.timeout_ms[k] = p.timeout_ms[k];
	}
	ct = dpflow_ct_create(&p, NULL);
	/* flows: IPv4 and IPv6, TCP, UDP, ICMP, GRE; no two the same or
	 * each other's reverse (endpoint values are unique per flow) */
	for (int f = 0; f < N_FLOWS; f++) {
		struct dpflow_ct_pkt *q = &flows[f].fwd;
		static const uint8_t protos[] = {6, 6, 6, 17, 17, 1, 47};

		memset(q, 0, sizeof(*q));
		q->family = f % 3 ? 4 : 6;
		q->proto = protos[rng_below(&s, sizeof(protos))];
		q->src[0] = (uint8_t)(f >> 8);
		q->src[1] = (uint8_t)f;
		q->src[2] = (uint8_t)rng_next(&s);
		q->dst[0] = (uint8_t)(f >> 8);
		q->dst[1] = (uint8_t)f;
		/* never both ends equal (a self-connection has one
		 * direction) */
		q->dst[2] = (uint8_t)(q->src[2] + 1 + rng_below(&s, 254));
		if (q->family == 6)
			q->dst[15] = (uint8_t)rng_next(&s);
		if (q->proto == 6 || q->proto == 17) {
			q->sport = (uint16_t)rng_next(&s);
			q->dport =
			    (uint16_t)(q->sport + 1 + rng_below(&s, 1000));
		}
	}
	for (int i = 0; i < n_pkts; i++) {
		int f = (int)rng_below(&s, N_FLOWS);
		bool fwd = rng_below(&s, 2) == 0;
		const struct dpflow_ct_pkt *q = &flows[f].fwd;
		struct dpflow_ct_pkt pk = fwd ? *q : reversed(q, 0);
		struct dpflow_ct_result r, want_r;
		struct mconn *created;
		uint32_t user = (uint32_t)rng_next(&s);
		uint64_t now_ms;

		now += rng_below(&s, 100) == 0 ? rng_below(&s, 4000 * MS)
					       : rng_below(&s, 3 * MS);
		now_ms = now / MS;
		pk.tcp_flags = q->proto == 6
				   ? tcp_flags[rng_below(&s, sizeof(tcp_flags))]
				   : 0;
		if (rng_below(&s, 10) == 0) {
			/* a read-only lookup: the model's view, unchanged */
			struct mconn *c = NULL;

			for (int k = 0; k < m.n; k++)
				if (m.c[k].flow == f && !m.c[k].dead &&
				    !model_expired(&m, &m.c[k], now_ms))
					c = &m.c[k];
			dpflow_ct_lookup(ct, &pk, now, &r);
			cr_assert_eq(r.conn, c ? c->idx : MISS, "packet %d", i);
			if (c)
				cr_assert(
				    r.state == c->state && r.user == c->user &&
					r.dir == (fwd == c->init_fwd
						      ? DPFLOW_CT_DIR_ORIG
						      : DPFLOW_CT_DIR_REPLY),
				    "packet %d", i);
			continue;
		}
		model_packet(&m, f, fwd, q->proto, pk.tcp_flags, now_ms, user,
			     &want_r, &created);
		dpflow_ct_process(ct, &pk, now, user, &r);
		if (created) {
			cr_assert_neq(r.conn, MISS,
				      "packet %d: drop %u flags 0x%x state %s",
				      i, r.drop, r.flags,
				      dpflow_ct_state_name(want_r.state));
			created->idx = r.conn;
			want_r.conn = r.conn;
			news++;
		}
		cr_assert(r.conn == want_r.conn && r.state == want_r.state &&
			      r.flags == want_r.flags &&
			      r.user == want_r.user && r.drop == want_r.drop &&
			      (r.conn == MISS || r.dir == want_r.dir),
			  "packet %d (flow %d %s, flags 0x%x): got conn %u %s "
			  "flags 0x%x dir %u drop %u, model conn %u %s flags "
			  "0x%x dir %u drop %u",
			  i, f, fwd ? "fwd" : "back", pk.tcp_flags, r.conn,
			  dpflow_ct_state_name(r.state), r.flags, r.dir, r.drop,
			  want_r.conn, dpflow_ct_state_name(want_r.state),
			  want_r.flags, want_r.dir, want_r.drop);
		invalids += (r.flags & DPFLOW_CT_R_INVALID) != 0;
		ignored += (r.flags & DPFLOW_CT_R_IGNORED) != 0;
		reopens += (r.flags & DPFLOW_CT_R_REOPEN) != 0;
		/* a scan each second of traffic, and now and then */
		if (now - last_scan >= 1000 * MS || rng_below(&s, 500) == 0) {
			uint32_t nw = model_age(&m, now_ms, want);

			last_scan = now;

			got[0] = 0;
			cr_assert_eq(
			    dpflow_ct_age(ct, now, NULL, 0, collect_cb, got),
			    nw, "scan after packet %d", i);
			qsort(got + 1, got[0], sizeof(*got), cmp_u32);
			cr_assert(memcmp(got + 1, want, nw * sizeof(*want)) ==
				      0,
				  "scan after packet %d", i);
			expired += (int)nw;
		}
	}
	/* nothing was taken over unreported: the scans kept up */
	dpflow_ct_stats_get(ct, &st);
	cr_assert_eq(st.stat[DPFLOW_CT_STAT_EXPIRED], (uint64_t)expired);
	/* the traffic exercised every path */
	cr_assert(news > 500 && invalids > 500 && ignored > 100 &&
		      expired > 200 && (!loose || reopens > 5),
		  "new %d invalid %d ignored %d expired %d reopen %d", news,
		  invalids, ignored, expired, reopens);
	dpflow_ct_destroy(ct);
}

Test(ct, random_traffic_matches_reference_model)
{
	random_vs_model(1, true, 700000); /* 1.05M packets in all */
	random_vs_model(2, false, 350000);
}

/* ---- concurrency --------------------------------------------------------- */

#define MT_FLOWS 3000 /* per third: thread A has 0..2, thread B 1..3 */

struct mt_arg {
	struct dpflow_ct_image *ct;
	int id;
	uint8_t proto;
	pthread_barrier_t *bar;
	uint32_t *step; /* step[i]: flows thread i has done (lock-step) */
	uint32_t conn[4 * MT_FLOWS];
	uint32_t news;
	uint32_t misses;
};

static struct dpflow_ct_pkt mt_pkt(uint32_t flow, uint8_t proto, bool rev)
{
	struct dpflow_ct_pkt p =
	    pkt4(0x0a000000u + flow, (uint16_t)flow, 0xc0000000u, 443, proto,
		 proto == 6 ? F_SYN : 0);

	return rev ? reversed(&p, p.tcp_flags) : p;
}

static void *mt_worker(void *v)
{
	struct mt_arg *a = (struct mt_arg *)v;
	/* both threads start on the shared third, in the same order */
	uint32_t lo = MT_FLOWS, hi = 2 * MT_FLOWS;
	uint32_t own = a->id ? 2 * MT_FLOWS : 0;

	pthread_barrier_wait(a->bar);
	/* the shared third, the own third, the shared third again */
	for (int pass = 0; pass < 3; pass++) {
		for (uint32_t f = lo; f < hi; f++) {
			struct dpflow_ct_result r;
			/* UDP: thread B sends the reverse direction */
			struct dpflow_ct_pkt p =
			    mt_pkt(f, a->proto, a->proto == 17 && a->id);

			if (pass == 0) {
				/* lock-step on the shared flows: both threads
				 * meet each new flow at the same moment */
				uint32_t me = f - lo;

				__atomic_store_n(&a->step[a->id], me,
						 __ATOMIC_RELEASE);
				for (unsigned spin = 0;
				     __atomic_load_n(&a->step[!a->id],
						     __ATOMIC_ACQUIRE) < me;
				     spin++)
					if (spin > 1000)
						sched_yield();
			}
			dpflow_ct_process(a->ct, &p, MS, f, &r);
			if (r.conn == MISS) {
				a->misses++;
				continue;
			}
			if (pass < 2)
				a->conn[f] = r.conn;
			else if (a->conn[f] != r.conn)
				a->misses++;
			a->news += r.flags == DPFLOW_CT_R_NEW;
		}
		lo = pass == 0 ? own : MT_FLOWS;
		hi = pass == 0 ? own + MT_FLOWS : 2 * MT_FLOWS;
	}
	return NULL;
}

Test(ct, two_threads_create_exactly_one_connection_per_flow)
{
	for (int round = 0; round < 40; round++) {
		struct dpflow_ct_params p;
		struct dpflow_ct_image *ct;
		pthread_barrier_t bar;
		uint32_t step[2] = {0, 0};
		struct mt_arg *a = calloc(2, sizeof(*a));
		pthread_t t[2];
		struct dpflow_ct_stats st;
		uint8_t proto = round % 3 == 2 ? 6 : 17;

		dpflow_ct_params_default(&p, 3 * MT_FLOWS);
		p.seed = (uint64_t)round;
		p.busy_spins = UINT32_MAX; /* no busy drops on a loaded box */
		ct = dpflow_ct_create(&p, NULL);
		pthread_barrier_init(&bar, NULL, 2);
		for (int i = 0; i < 2; i++) {
			a[i].ct = ct;
			a[i].id = i;
			a[i].proto = proto;
			a[i].bar = &bar;
			a[i].step = step;
			pthread_create(&t[i], NULL, mt_worker, &a[i]);
		}
		for (int i = 0; i < 2; i++)
			pthread_join(t[i], NULL);
		cr_assert_eq(a[0].misses + a[1].misses, 0, "round %d", round);
		/* exactly one NEW per flow, one connection per flow */
		cr_assert_eq(a[0].news + a[1].news, 3 * MT_FLOWS, "round %d",
			     round);
		for (uint32_t f = MT_FLOWS; f < 2 * MT_FLOWS; f++)
			cr_assert_eq(a[0].conn[f], a[1].conn[f],
				     "round %d flow %u", round, f);
		cr_assert_eq(dpflow_ct_count(ct), 3 * MT_FLOWS);
		dpflow_ct_stats_get(ct, &st);
		cr_assert_eq(st.live, 3 * MT_FLOWS);
		cr_assert_eq(st.stat[DPFLOW_CT_STAT_CREATED], 3 * MT_FLOWS);
		for (uint32_t f = 0; f < 3 * MT_FLOWS; f++) {
			struct dpflow_ct_pkt q = mt_pkt(f, proto, true);
			struct dpflow_ct_result r;

			dpflow_ct_lookup(ct, &q, MS, &r);
			cr_assert(r.conn != MISS && r.user == f,
				  "round %d flow %u", round, f);
			/* UDP flows of the shared third were answered */
			if (proto == 17 && f >= MT_FLOWS && f < 2 * MT_FLOWS)
				cr_assert_eq(r.state, DPFLOW_CT_UDP_REPLIED);
		}
		pthread_barrier_destroy(&bar);
		free(a);
		dpflow_ct_destroy(ct);
	}
}

struct churn_arg {
	struct dpflow_ct_image *ct;
	volatile int *stop;
	uint64_t pkts;
	uint64_t bad;
};

static void *churn_worker(void *v)
{
	struct churn_arg *a = (struct churn_arg *)v;
	uint64_t s = 1;

	while (!*a->stop) {
		uint32_t f = (uint32_t)rng_below(&s, 500);
		struct dpflow_ct_pkt p = pkt4(f, 1, 2, 3, 17, 0);
		struct dpflow_ct_result r;

		/* time 0 .. 2 ms, timeouts 1 ms: constant expiry */
		dpflow_ct_process(a->ct, &p, rng_below(&s, 2 * MS), f, &r);
		if (r.conn == MISS || r.user != f)
			a->bad++;
		a->pkts++;
	}
	return NULL;
}

/* The control thread ages and removes while a worker creates and
 * refreshes: every packet gets its own flow's connection. */
Test(ct, aging_while_a_worker_runs)
{
	struct dpflow_ct_image *ct = make_ct(5000, 0, 1);
	volatile int stop = 0;
	struct churn_arg a = {ct, &stop, 0, 0};
	pthread_t t;
	struct dpflow_ct_stats st;
	uint64_t expired = 0;

	pthread_create(&t, NULL, churn_worker, &a);
	for (int i = 0; i < 3000; i++) {
		expired += dpflow_ct_age(ct, 3 * MS, NULL, 0, NULL, NULL);
		dpflow_ct_remove(ct, (uint32_t)i % dpflow_ct_n_slots(ct), NULL);
	}
	stop = 1;
	pthread_join(t, NULL);
	expired += dpflow_ct_flush(ct, 0, NULL, NULL);
	dpflow_ct_stats_get(ct, &st);
	cr_assert_eq(a.bad, 0);
	cr_assert_gt(a.pkts, 0);
	cr_assert_eq(st.live, 0);
	cr_assert_eq(st.stat[DPFLOW_CT_STAT_CREATED],
		     st.stat[DPFLOW_CT_STAT_EXPIRED] +
			 st.stat[DPFLOW_CT_STAT_REMOVED]);
	cr_assert_gt(expired, 0);
	dpflow_ct_destroy(ct);
}
