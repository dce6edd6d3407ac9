/*
 * The natgw app (tests/app/natgw) driven in memory, end to end, as `dpflow
 * run` drives an app: dpflow_config_load() and dpflow_apps_load() on a
 * config file with `apps: {natgw: ...}` (the app found through the
 * registry), frames built here (Ethernet, IPv4, TCP or UDP, checksums
 * computed from scratch by this file) run through the context's root pipes
 * with dpflow_ctx_process_burst(), and what leaves read back from the two
 * in-memory ports (ring:lan, ring:wan) and compared byte for byte with a
 * frame built here from the translated fields.
 *
 *   tables   packet sequences, each step {description, port in, frame,
 *            port out or none, expected frame}: a TCP round trip, a UDP
 *            one (and its connection expired by aging), what the gateway
 *            drops, the pool running out, an outside probe that takes
 *            no binding (only the inside opens); a full table replacing
 *   config   bad sections refused with "natgw.yaml:LINE: apps.natgw.KEY:
 *            message"; a pipe the engine refuses reported at the section
 *   ops      the exit report, the Prometheus families, the natgw.stats
 *            reply and `dpflowctl natgw stats` (its verb run with a client
 *            that hands requests to the apps) agree with the packets;
 *            describe and banner of a `dpflow validate` load
 *
 * The source port a connection is bound to is the ct pipe's choice (a
 * hash of the flow picks the first candidate): a step's expected frame
 * may say BOUND for it, then the port the gateway chose is checked to be
 * in the pool, remembered, and expected of every later step of the flow.
 * With a pool of one port the binding is known and written out.
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dpflow/app.h"
#include "dpflow/clock.h"
#include "dpflow/config.h"
#include "dpflow/flow.h"
#include "dpflow/pool.h"
#include "dpflow/port.h"
#include "dpflow/ring.h"

/* ------------------------------------------------------------ frames */

#define IP(a, b, c, d) \
	((uint32_t)(a) << 24 | (uint32_t)(b) << 16 | (uint32_t)(c) << 8 | (d))

#define TCP 6
#define UDP 17
#define SYN 0x02
#define ACK 0x10
#define FIN 0x01

/* Expected-frame placeholders: the connection's binding. */
#define BOUND_ADDR 0xffffffffu
#define BOUND_PORT 0xffffu

#define FRAME_MAX 512u

struct pkt {
	uint32_t src, dst;
	uint16_t sport, dport;
	uint8_t proto;
	uint8_t flags;	  /* TCP */
	uint16_t payload; /* bytes after the L4 header */
};

static void st16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void st32(uint8_t *p, uint32_t v)
{
	st16(p, (uint16_t)(v >> 16));
	st16(p + 2, (uint16_t)v);
}

static uint16_t ld16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t ld32(const uint8_t *p)
{
	return (uint32_t)ld16(p) << 16 | ld16(p + 2);
}

/* RFC 1071: the ones' complement sum of @n bytes added to @sum. */
static uint32_t sum16(uint32_t sum, const uint8_t *p, unsigned n)
{
	for (unsigned i = 0; i + 1 < n; i += 2)
		sum += (uint32_t)p[i] << 8 | p[i + 1];
	if (n & 1)
		sum += (uint32_t)p[n - 1] << 8;
	return sum;
}

static uint16_t fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/*
 * Ethernet 02:..:02 <- 02:..:01, IPv4 (DF, TTL 64, id 0x1234), TCP (seq
 * 1000, ack 2000 when ACK, window 65535) or UDP, and @p->payload bytes
 * 0, 1, 2, ...; every checksum computed over the finished headers.
 * Returns the frame's length.
 */
static unsigned build(const struct pkt *p, uint8_t *f)
{
	uint8_t *ip = f + 14, *l4 = ip + 20;
	unsigned l4_hdr = p->proto == TCP ? 20 : 8;
	unsigned l4_len = l4_hdr + p->payload;
	uint32_t pseudo;

	memset(f, 0, 14 + 20 + l4_len);
	memcpy(f, "\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01", 12);
	st16(f + 12, 0x0800);
	ip[0] = 0x45;
	st16(ip + 2, (uint16_t)(20 + l4_len));
	st16(ip + 4, 0x1234);
	st16(ip + 6, 0x4000);
	ip[8] = 64;
	ip[9] = p->proto;
	st32(ip + 12, p->src);
	st32(ip + 16, p->dst);
	st16(ip + 10, fold(sum16(0, ip, 20)));
	st16(l4, p->sport);
	st16(l4 + 2, p->dport);
	if (p->proto == TCP) {
		st32(l4 + 4, 1000);
		st32(l4 + 8, p->flags & ACK ? 2000 : 0);
		l4[12] = 0x50;
		l4[13] = p->flags;
		st16(l4 + 14, 0xffff);
	} else {
		st16(l4 + 4, (uint16_t)l4_len);
	}
	for (unsigned i = 0; i < p->payload; i++)
		l4[l4_hdr + i] = (uint8_t)i;
	pseudo = sum16(0, ip + 12, 8) + p->proto + l4_len;
	st16(l4 + (p->proto == TCP ? 16 : 6), fold(sum16(pseudo, l4, l4_len)));
	return 14 + 20 + l4_len;
}

/* ----------------------------------------------------- the gateway */

#define LAN 0
#define WAN 1

static const char ports_yaml[] = "ports:\n"
				 "  - {name: lan, uri: 'ring:lan,size=1024'}\n"
				 "  - {name: wan, uri: 'ring:wan,size=1024'}\n";

struct gw {
	char dir[64], path[96];
	struct dpflow_ctx *ctx;
	struct dpflow_apps *apps;
	/* the binding of the flow a table follows */
	uint32_t bound_addr;
	uint16_t bound_port;
};

/* Write @yaml as DIR/natgw.yaml. */
static void write_cfg(struct gw *g, const char *yaml)
{
	FILE *f;

	strcpy(g->dir, "/tmp/natgw-test-XXXXXX");
	cr_assert_not_null(mkdtemp(g->dir));
	snprintf(g->path, sizeof(g->path), "%s/natgw.yaml", g->dir);
	f = fopen(g->path, "w");
	cr_assert_not_null(f);
	fputs(yaml, f);
	fclose(f);
}

/* Load config @yaml and its apps as `dpflow run` does (@check_only: as
 * `dpflow validate` does): 0, or -1 with the message in @err (nothing
 * left open). */
static int gw_load_ex(struct gw *g, const char *yaml, bool check_only,
		      struct dpflow_error *err)
{
	const struct dpflow_app_opts opts = {1, DPFLOW_APP_TARGET_CPU,
					     check_only};
	struct dpflow_config_opts co = {0};

	co.check_only = check_only;
	memset(g, 0, sizeof(*g));
	write_cfg(g, yaml);
	g->ctx = dpflow_config_load(g->path, &co, err);
	if (g->ctx)
		g->apps = dpflow_apps_load(g->ctx, g->path, &opts, err);
	unlink(g->path);
	rmdir(g->dir);
	if (g->apps)
		return 0;
	dpflow_ctx_destroy(g->ctx);
	g->ctx = NULL;
	return -1;
}

static int gw_load(struct gw *g, const char *yaml, struct dpflow_error *err)
{
	return gw_load_ex(g, yaml, false, err);
}

/* A gateway: inside 10.0.0.0/8 lan, outside wan, the pool as given,
 * room for @conns connections. */
static void gw_open_n(struct gw *g, const char *addrs, const char *ports,
		      unsigned conns)
{
	struct dpflow_error err = {0};
	char yaml[1024];

	snprintf(yaml, sizeof(yaml),
		 "%sapps:\n"
		 "  natgw:\n"
		 "    inside_port: lan\n"
		 "    outside_port: wan\n"
		 "    inside: [10.0.0.0/8]\n"
		 "    addrs: %s\n"
		 "    ports: %s\n"
		 "    connections: %u\n",
		 ports_yaml, addrs, ports, conns);
	cr_assert_eq(gw_load(g, yaml, &err), 0, "%s", err.msg);
}

static void gw_open(struct gw *g, const char *addrs, const char *ports)
{
	gw_open_n(g, addrs, ports, 1024);
}

static void gw_close(struct gw *g)
{
	dpflow_apps_destroy(g->apps);
	dpflow_ctx_destroy(g->ctx);
}

/* Packets the gateway sent on @port since the last call, copied into
 * @out (up to @max) and freed. */
static unsigned drain(struct gw *g, unsigned port, uint8_t (*out)[FRAME_MAX],
		      unsigned *len, unsigned max)
{
	struct dpflow_ring *r =
	    dpflow_port_ring_tx(dpflow_ctx_port(g->ctx, port));
	struct dpflow_pool *pool = dpflow_ctx_pool(g->ctx);
	uint32_t idx[64];
	unsigned n = dpflow_ring_dequeue_burst(r, idx, 64), k = 0;

	for (unsigned i = 0; i < n; i++) {
		const struct dpflow_pkt_meta *m =
		    dpflow_pool_meta(pool, idx[i]);

		if (k < max && m->data_len <= FRAME_MAX) {
			memcpy(out[k], dpflow_pkt_data(pool, idx[i]),
			       m->data_len);
			len[k++] = m->data_len;
		}
	}
	dpflow_pool_free_bulk(pool, idx, n);
	return n;
}

/* Run one frame in on @port. */
static void inject(struct gw *g, unsigned port, const struct pkt *p)
{
	struct dpflow_pool *pool = dpflow_ctx_pool(g->ctx);
	uint32_t idx;

	cr_assert_eq(dpflow_pool_alloc_bulk(pool, &idx, 1), 0);
	dpflow_pool_meta(pool, idx)->data_len =
	    (uint16_t)build(p, dpflow_pkt_data(pool, idx));
	dpflow_ctx_thread_online(g->ctx);
	dpflow_ctx_process_burst(g->ctx, (uint16_t)port, &idx, 1);
	dpflow_ctx_thread_offline(g->ctx);
}

#define NONE (-1)

struct step {
	const char *desc;
	int in;
	struct pkt p;
	int out; /* LAN, WAN or NONE */
	struct pkt want;
};

/* Run @steps in order; each must send exactly its expected frame on its
 * port and nothing on the other. */
static void run_steps(struct gw *g, const struct step *steps, unsigned n,
		      uint16_t port_lo, uint16_t port_hi)
{
	for (unsigned s = 0; s < n; s++) {
		const struct step *st = &steps[s];
		uint8_t got[4][FRAME_MAX], want[FRAME_MAX];
		unsigned len[4], n_out[2], wlen;
		struct pkt w = st->want;

		inject(g, (unsigned)st->in, &st->p);
		n_out[LAN] = drain(g, LAN, got, len, 4);
		n_out[WAN] = drain(g, WAN, got, len, 4);
		if (st->out == NONE) {
			cr_expect_eq(n_out[LAN] + n_out[WAN], 0,
				     "%s: %u frames on lan, %u on wan, "
				     "expected none",
				     st->desc, n_out[LAN], n_out[WAN]);
			continue;
		}
		cr_assert_eq(n_out[st->out], 1, "%s: %u frames on %s", st->desc,
			     n_out[st->out], st->out == LAN ? "lan" : "wan");
		cr_assert_eq(n_out[!st->out], 0, "%s: %u frames on %s",
			     st->desc, n_out[!st->out],
			     st->out == LAN ? "wan" : "lan");
		/* the binding, learnt from the first frame that shows it */
		if ((w.src == BOUND_ADDR || w.sport == BOUND_PORT) &&
		    !g->bound_port) {
			g->bound_addr = ld32(got[0] + 14 + 12);
			g->bound_port = ld16(got[0] + 34);
			cr_assert(g->bound_port >= port_lo &&
				      g->bound_port <= port_hi,
				  "%s: bound to port %u, outside %u-%u",
				  st->desc, g->bound_port, port_lo, port_hi);
		}
		if (w.src == BOUND_ADDR)
			w.src = g->bound_addr;
		if (w.sport == BOUND_PORT)
			w.sport = g->bound_port;
		wlen = build(&w, want);
		cr_expect_eq(len[0], wlen, "%s: %u bytes, expected %u",
			     st->desc, len[0], wlen);
		for (unsigned i = 0; i < wlen && i < len[0]; i++)
			if (got[0][i] != want[i]) {
				cr_expect_fail("%s: byte %u is 0x%02x, "
					       "expected 0x%02x",
					       st->desc, i, got[0][i], want[i]);
				break;
			}
	}
}

/* The exit report as a string. */
static char *report(struct gw *g)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	dpflow_apps_report(g->apps, f);
	fclose(f);
	return buf;
}

static const uint32_t IN_HOST = IP(10, 0, 0, 5);
static const uint32_t REMOTE = IP(203, 0, 113, 7);
static const uint32_t POOL1 = IP(198, 51, 100, 1);

/* --------------------------------------------------------- tables */

Test(natgw, tcp_round_trip)
{
	const struct step steps[] = {
	    {"inside SYN leaves from the pool",
	     LAN,
	     {IN_HOST, REMOTE, 33000, 80, TCP, SYN, 0},
	     WAN,
	     {BOUND_ADDR, REMOTE, BOUND_PORT, 80, TCP, SYN, 0}},
	    {"remote's SYN-ACK comes back to the inside host",
	     WAN,
	     {REMOTE, BOUND_ADDR, 80, BOUND_PORT, TCP, SYN | ACK, 0},
	     LAN,
	     {REMOTE, IN_HOST, 80, 33000, TCP, SYN | ACK, 0}},
	    {"inside ACK with data keeps its binding",
	     LAN,
	     {IN_HOST, REMOTE, 33000, 80, TCP, ACK, 101},
	     WAN,
	     {BOUND_ADDR, REMOTE, BOUND_PORT, 80, TCP, ACK, 101}},
	    {"remote's data translated back",
	     WAN,
	     {REMOTE, BOUND_ADDR, 80, BOUND_PORT, TCP, ACK, 300},
	     LAN,
	     {REMOTE, IN_HOST, 80, 33000, TCP, ACK, 300}},
	    {"inside FIN",
	     LAN,
	     {IN_HOST, REMOTE, 33000, 80, TCP, FIN | ACK, 0},
	     WAN,
	     {BOUND_ADDR, REMOTE, BOUND_PORT, 80, TCP, FIN | ACK, 0}},
	};
	struct gw g;
	struct step s[DPFLOW_ARRAY_SIZE(steps)];
	char *r;

	gw_open(&g, "[198.51.100.1, 198.51.100.2]", "[40000, 40099]");
	/* the first step learns the binding; the replies are sent to it */
	run_steps(&g, steps, 1, 40000, 40099);
	cr_assert(g.bound_addr == POOL1 || g.bound_addr == POOL1 + 1,
		  "bound to %#x, not a pool address", g.bound_addr);
	memcpy(s, steps, sizeof(s));
	for (unsigned i = 0; i < DPFLOW_ARRAY_SIZE(s); i++) {
		if (s[i].p.dst == BOUND_ADDR)
			s[i].p.dst = g.bound_addr;
		if (s[i].p.dport == BOUND_PORT)
			s[i].p.dport = g.bound_port;
	}
	run_steps(&g, s + 1, DPFLOW_ARRAY_SIZE(s) - 1, 40000, 40099);
	r = report(&g);
	cr_expect_str_eq(r, "natgw connections: live 1, created 1, expired 0, "
			    "replaced 0, nat_exhausted 0\n"
			    "natgw packets: out 3, in 2, dropped 0 "
			    "(not_inside 0, not_to_pool 0, no_connection 0, "
			    "not_from_inside 0, other 0)\n");
	free(r);
	gw_close(&g);
}

Test(natgw, udp_round_trip)
{
	/* one pool port: the binding is known */
	const struct step steps[] = {
	    {"a DNS query leaves from 198.51.100.1:5300",
	     LAN,
	     {IP(10, 1, 2, 3), IP(192, 0, 2, 53), 5353, 53, UDP, 0, 33},
	     WAN,
	     {POOL1, IP(192, 0, 2, 53), 5300, 53, UDP, 0, 33}},
	    {"its answer reaches 10.1.2.3:5353",
	     WAN,
	     {IP(192, 0, 2, 53), POOL1, 53, 5300, UDP, 0, 77},
	     LAN,
	     {IP(192, 0, 2, 53), IP(10, 1, 2, 3), 53, 5353, UDP, 0, 77}},
	    {"an answer from another server is no reply: dropped",
	     WAN,
	     {IP(192, 0, 2, 54), POOL1, 53, 5300, UDP, 0, 77},
	     NONE,
	     {0}},
	};
	const struct step late = {
	    "the answer an hour later: dropped",
	    WAN,
	    {IP(192, 0, 2, 53), POOL1, 53, 5300, UDP, 0, 77},
	    NONE,
	    {0}};
	struct gw g;
	char *r;

	gw_open(&g, "[198.51.100.1]", "[5300, 5300]");
	run_steps(&g, steps, DPFLOW_ARRAY_SIZE(steps), 5300, 5300);
	r = report(&g);
	/* the stray answer belongs to no connection and, from outside,
	 * opens none */
	cr_expect_str_eq(r, "natgw connections: live 1, created 1, expired 0, "
			    "replaced 0, nat_exhausted 0\n"
			    "natgw packets: out 1, in 1, dropped 1 "
			    "(not_inside 0, not_to_pool 0, no_connection 1, "
			    "not_from_inside 0, other 0)\n");
	free(r);
	/* an hour later (as `dpflow run` ages every ct pipe) the connection
	 * is gone, and the answer finds none (and opens none) */
	dpflow_pipe_age(dpflow_pipe_find(g.ctx, "natgw_conn"),
			dpflow_clock_ns() + 3600000000000ull, 0, NULL, NULL);
	run_steps(&g, &late, 1, 5300, 5300);
	r = report(&g);
	cr_expect_str_eq(r, "natgw connections: live 0, created 1, expired 1, "
			    "replaced 0, nat_exhausted 0\n"
			    "natgw packets: out 1, in 1, dropped 2 "
			    "(not_inside 0, not_to_pool 0, no_connection 2, "
			    "not_from_inside 0, other 0)\n");
	free(r);
	gw_close(&g);
}

/* A full table: a new connection replaces the least recently used one. */
Test(natgw, full_table_replaces)
{
	struct gw g;
	char *r;

	gw_open_n(&g, "[198.51.100.1]", "[6000, 6099]", 1);
	for (unsigned i = 0; i < 3; i++) {
		const struct pkt p = {
		    IP(10, 0, 1, i), REMOTE, 1000, 80, TCP, SYN, 0};
		uint8_t got[4][FRAME_MAX];
		unsigned len[4];

		inject(&g, LAN, &p);
		cr_expect_eq(drain(&g, WAN, got, len, 4), 1, "SYN %u", i);
	}
	r = report(&g);
	cr_expect_str_eq(r, "natgw connections: live 1, created 3, expired 0, "
			    "replaced 2, nat_exhausted 0\n"
			    "natgw packets: out 3, in 0, dropped 0 "
			    "(not_inside 0, not_to_pool 0, no_connection 0, "
			    "not_from_inside 0, other 0)\n");
	free(r);
	gw_close(&g);
}

/* An inside address reached through the gateway (a host sent there by
 * its default route): its answers come back in on the inside port. */
static const uint32_t HAIRPIN = IP(10, 9, 9, 9);

/* The connection drop_steps' wrong-way packets belong to, with a pool of
 * the one binding 198.51.100.1:7000. */
static const struct step hairpin_open = {
    "inside host to an inside address, through the gateway",
    LAN,
    {IN_HOST, HAIRPIN, 2000, 80, UDP, 0, 5},
    WAN,
    {POOL1, HAIRPIN, 7000, 80, UDP, 0, 5}};

/* What the gateway drops, hairpin_open done, each under its reason, each
 * reason a different number of times (so that counters mixed up show):
 * not_inside 1, not_to_pool 2, not_from_inside 3, no_connection 5. */
static const struct step drop_steps[] = {
    {"inside source in no inside prefix: not_inside",
     LAN,
     {IP(192, 168, 1, 1), REMOTE, 1000, 80, TCP, SYN, 0},
     NONE,
     {0}},
    {"outside, to no pool address: not_to_pool",
     WAN,
     {REMOTE, IP(198, 51, 100, 9), 80, 40000, TCP, SYN | ACK, 0},
     NONE,
     {0}},
    {"outside, straight to an inside host: not_to_pool",
     WAN,
     {REMOTE, IN_HOST, 80, 33000, TCP, SYN, 0},
     NONE,
     {0}},
    {"the inside address's answer, in on the inside port: "
     "not_from_inside",
     LAN,
     {HAIRPIN, POOL1, 80, 7000, UDP, 0, 6},
     NONE,
     {0}},
    {"and again: not_from_inside",
     LAN,
     {HAIRPIN, POOL1, 80, 7000, UDP, 0, 7},
     NONE,
     {0}},
    {"and again: not_from_inside",
     LAN,
     {HAIRPIN, POOL1, 80, 7000, UDP, 0, 8},
     NONE,
     {0}},
    {"outside ACK to the pool, no connection: no_connection",
     WAN,
     {REMOTE, POOL1, 80, 40000, TCP, ACK, 10},
     NONE,
     {0}},
    {"outside FIN to the pool, no connection: no_connection",
     WAN,
     {REMOTE, POOL1, 80, 40001, TCP, FIN | ACK, 0},
     NONE,
     {0}},
    {"outside SYN-ACK to the pool, no connection: no_connection",
     WAN,
     {IP(203, 0, 113, 9), POOL1, 80, 40002, TCP, SYN | ACK, 0},
     NONE,
     {0}},
    {"outside-initiated SYN to the pool, opens none: no_connection",
     WAN,
     {IP(203, 0, 113, 66), POOL1, 4444, 40000, TCP, SYN, 0},
     NONE,
     {0}},
    {"outside-initiated UDP to the pool, opens none: no_connection",
     WAN,
     {IP(203, 0, 113, 66), POOL1, 53, 40000, UDP, 0, 20},
     NONE,
     {0}},
};

Test(natgw, drops)
{
	struct gw g;
	char *r;

	gw_open(&g, "[198.51.100.1]", "[7000, 7000]");
	run_steps(&g, &hairpin_open, 1, 7000, 7000);
	run_steps(&g, drop_steps, DPFLOW_ARRAY_SIZE(drop_steps), 7000, 7000);
	r = report(&g);
	/* the outside-initiated packets opened nothing: the one connection
	 * is hairpin_open's */
	cr_expect_str_eq(r, "natgw connections: live 1, created 1, expired 0, "
			    "replaced 0, nat_exhausted 0\n"
			    "natgw packets: out 1, in 0, dropped 11 "
			    "(not_inside 1, not_to_pool 2, no_connection 5, "
			    "not_from_inside 3, other 0)\n");
	free(r);
	gw_close(&g);
}

/* Only the inside opens connections: outside packets to the pool's one
 * binding open none and take nothing (no_connection), so an inside flow
 * to their sender afterwards still gets the binding, and the packet
 * dropped as a probe is then an answer. (Were a probe to open a
 * connection, that connection's key would be the reply tuple the inside
 * flow needs, and the flow would be refused: nat_exhausted.) */
Test(natgw, outside_probe_takes_no_binding)
{
	const uint32_t R = IP(203, 0, 113, 66);
	const struct step steps[] = {
	    {"R's SYN to the one binding: no connection, opens none",
	     WAN,
	     {R, POOL1, 4444, 5000, TCP, SYN, 0},
	     NONE,
	     {0}},
	    {"R's UDP to the one binding: no connection, opens none",
	     WAN,
	     {R, POOL1, 4444, 5000, UDP, 0, 8},
	     NONE,
	     {0}},
	    {"an inside SYN to R:4444 still gets the binding",
	     LAN,
	     {IN_HOST, R, 1000, 4444, TCP, SYN, 0},
	     WAN,
	     {POOL1, R, 5000, 4444, TCP, SYN, 0}},
	    {"R's SYN-ACK from that port reaches the inside host",
	     WAN,
	     {R, POOL1, 4444, 5000, TCP, SYN | ACK, 0},
	     LAN,
	     {R, IN_HOST, 4444, 1000, TCP, SYN | ACK, 0}},
	    {"an inside UDP flow to R:4444 gets the binding too",
	     LAN,
	     {IN_HOST, R, 1000, 4444, UDP, 0, 8},
	     WAN,
	     {POOL1, R, 5000, 4444, UDP, 0, 8}},
	    {"R's UDP packet, dropped as a probe, now an answer",
	     WAN,
	     {R, POOL1, 4444, 5000, UDP, 0, 8},
	     LAN,
	     {R, IN_HOST, 4444, 1000, UDP, 0, 8}},
	};
	struct gw g;
	char *r;

	gw_open(&g, "[198.51.100.1]", "[5000, 5000]");
	run_steps(&g, steps, DPFLOW_ARRAY_SIZE(steps), 5000, 5000);
	r = report(&g);
	cr_expect_str_eq(r, "natgw connections: live 2, created 2, expired 0, "
			    "replaced 0, nat_exhausted 0\n"
			    "natgw packets: out 2, in 2, dropped 2 "
			    "(not_inside 0, not_to_pool 0, no_connection 2, "
			    "not_from_inside 0, other 0)\n");
	free(r);
	gw_close(&g);
}

/* A pool of one binding: a second flow to the same destination is
 * refused and counted each time it asks; a flow to another destination
 * shares the binding, and replies find their own connection. */
Test(natgw, pool_exhausted)
{
	const uint32_t A = IP(10, 0, 0, 1), B = IP(10, 0, 0, 2);
	const uint32_t R1 = REMOTE, R2 = IP(203, 0, 113, 8);
	const struct step steps[] = {
	    {"A takes the one binding",
	     LAN,
	     {A, R1, 1000, 80, TCP, SYN, 0},
	     WAN,
	     {POOL1, R1, 5000, 80, TCP, SYN, 0}},
	    {"B to the same destination: no free binding",
	     LAN,
	     {B, R1, 1000, 80, TCP, SYN, 0},
	     NONE,
	     {0}},
	    {"B's retransmission: refused again",
	     LAN,
	     {B, R1, 1000, 80, TCP, SYN, 0},
	     NONE,
	     {0}},
	    {"B to another destination shares the binding",
	     LAN,
	     {B, R2, 1000, 80, TCP, SYN, 0},
	     WAN,
	     {POOL1, R2, 5000, 80, TCP, SYN, 0}},
	    {"R2's reply goes to B",
	     WAN,
	     {R2, POOL1, 80, 5000, TCP, SYN | ACK, 0},
	     LAN,
	     {R2, B, 80, 1000, TCP, SYN | ACK, 0}},
	    {"R1's reply goes to A",
	     WAN,
	     {R1, POOL1, 80, 5000, TCP, SYN | ACK, 0},
	     LAN,
	     {R1, A, 80, 1000, TCP, SYN | ACK, 0}},
	};
	struct gw g;
	char *r;

	gw_open(&g, "[198.51.100.1]", "[5000, 5000]");
	run_steps(&g, steps, DPFLOW_ARRAY_SIZE(steps), 5000, 5000);
	r = report(&g);
	cr_expect_str_eq(r, "natgw connections: live 2, created 2, expired 0, "
			    "replaced 0, nat_exhausted 2\n"
			    "natgw packets: out 2, in 2, dropped 2 "
			    "(not_inside 0, not_to_pool 0, no_connection 2, "
			    "not_from_inside 0, other 0)\n");
	free(r);
	gw_close(&g);
}

/* --------------------------------------------------------- config */

struct bad_cfg {
	const char *desc;
	const char *yaml; /* after ports_yaml (3 lines): line 4 on */
	const char *msg;
};

static const struct bad_cfg bad_cfgs[] = {
    {"unknown key",
     "apps:\n"
     "  natgw:\n"
     "    inside_port: lan\n"
     "    outside_port: wan\n"
     "    inside: [10.0.0.0/8]\n"
     "    addrs: [198.51.100.1]\n"
     "    pool: [1, 2]\n",
     "natgw.yaml:10: apps.natgw.pool: unknown key 'pool'"},
    {"no inside_port",
     "apps:\n"
     "  natgw:\n"
     "    outside_port: wan\n"
     "    inside: [10.0.0.0/8]\n"
     "    addrs: [198.51.100.1]\n",
     "natgw.yaml:6: apps.natgw: 'inside_port' is missing"},
    {"a port nobody opened",
     "apps:\n"
     "  natgw:\n"
     "    inside_port: lan\n"
     "    outside_port: dmz\n"
     "    inside: [10.0.0.0/8]\n"
     "    addrs: [198.51.100.1]\n",
     "natgw.yaml:7: apps.natgw.outside_port: no port named 'dmz'"},
    {"one port for both sides",
     "apps:\n"
     "  natgw:\n"
     "    inside_port: lan\n"
     "    outside_port: lan\n"
     "    inside: [10.0.0.0/8]\n"
     "    addrs: [198.51.100.1]\n",
     "natgw.yaml:7: apps.natgw.outside_port: 'lan' is the inside port "
     "too: the gateway needs two ports"},
    {"inside not a list",
     "apps:\n"
     "  natgw:\n"
     "    inside_port: lan\n"
     "    outside_port: wan\n"
     "    inside: 10.0.0.0/8\n"
     "    addrs: [198.51.100.1]\n",
     "natgw.yaml:8: apps.natgw.inside: expected a list of 1 to 1024 items"},
    {"a prefix with host bits",
     "apps:\n"
     "  natgw:\n"
     "    inside_port: lan\n"
     "    outside_port: wan\n"
     "    inside: [10.0.0.0/8,\n"
     "             172.16.0.1/12]\n"
     "    addrs: [198.51.100.1]\n",
     "natgw.yaml:9: apps.natgw.inside[1]: '172.16.0.1/12' has bits set "
     "past /12"},
    {"not a prefix",
     "apps:\n"
     "  natgw:\n"
     "    inside_port: lan\n"
     "    outside_port: wan\n"
     "    inside: [10.0.0.0/33]\n"
     "    addrs: [198.51.100.1]\n",
     "natgw.yaml:8: apps.natgw.inside[0]: '10.0.0.0/33' is not an IPv4 "
     "prefix (A.B.C.D/N)"},
    {"IPv6",
     "apps:\n"
     "  natgw:\n"
     "    inside_port: lan\n"
     "    outside_port: wan\n"
     "    inside: [10.0.0.0/8]\n"
     "    addrs: ['2001:db8::1']\n",
     "natgw.yaml:9: apps.natgw.addrs[0]: '2001:db8::1': natgw translates "
     "IPv4 only"},
    {"an address twice",
     "apps:\n"
     "  natgw:\n"
     "    inside_port: lan\n"
     "    outside_port: wan\n"
     "    inside: [10.0.0.0/8]\n"
     "    addrs:\n"
     "      - 198.51.100.1\n"
     "      - 198.51.100.1\n",
     "natgw.yaml:11: apps.natgw.addrs[1]: '198.51.100.1' is given twice"},
    {"no addrs",
     "apps:\n"
     "  natgw:\n"
     "    inside_port: lan\n"
     "    outside_port: wan\n"
     "    inside: [10.0.0.0/8]\n",
     "natgw.yaml:6: apps.natgw: 'addrs' is missing"},
    {"ports reversed",
     "apps:\n"
     "  natgw:\n"
     "    inside_port: lan\n"
     "    outside_port: wan\n"
     "    inside: [10.0.0.0/8]\n"
     "    addrs: [198.51.100.1]\n"
     "    ports: [2000, 1000]\n",
     "natgw.yaml:10: apps.natgw.ports: first port 2000 is after last "
     "port 1000"},
    {"a port past 65535",
     "apps:\n"
     "  natgw:\n"
     "    inside_port: lan\n"
     "    outside_port: wan\n"
     "    inside: [10.0.0.0/8]\n"
     "    addrs: [198.51.100.1]\n"
     "    ports: [1024, 70000]\n",
     "natgw.yaml:10: apps.natgw.ports[1]: '70000' is out of range (max "
     "65535)"},
    {"no connections",
     "apps:\n"
     "  natgw:\n"
     "    inside_port: lan\n"
     "    outside_port: wan\n"
     "    inside: [10.0.0.0/8]\n"
     "    addrs: [198.51.100.1]\n"
     "    connections: 0\n",
     "natgw.yaml:10: apps.natgw.connections: at least 1 connection"},
    {"a port that has a root pipe",
     "pipes:\n"
     "  - {name: fw, type: basic, root: wan, match: [], miss: drop}\n"
     "apps:\n"
     "  natgw:\n"
     "    inside_port: lan\n"
     "    outside_port: wan\n"
     "    inside: [10.0.0.0/8]\n"
     "    addrs: [198.51.100.1]\n",
     "natgw.yaml:9: apps.natgw.outside_port: port 'wan' has a root pipe "
     "already ('fw'); the gateway's pipes take its packets"},
    {"a pipe name the gateway uses",
     "pipes:\n"
     "  - {name: natgw_conn, type: ct, miss: drop}\n"
     "apps:\n"
     "  natgw:\n"
     "    inside_port: lan\n"
     "    outside_port: wan\n"
     "    inside: [10.0.0.0/8]\n"
     "    addrs: [198.51.100.1]\n",
     "natgw.yaml:8: apps.natgw: a pipe named 'natgw_conn' exists: the "
     "gateway names its pipes natgw_*"},
};

Test(natgw, bad_config_refused)
{
	for (unsigned i = 0; i < DPFLOW_ARRAY_SIZE(bad_cfgs); i++) {
		struct dpflow_error err = {0};
		char yaml[1024], *msg;
		struct gw g;

		snprintf(yaml, sizeof(yaml), "%s%s", ports_yaml,
			 bad_cfgs[i].yaml);
		cr_expect_neq(gw_load(&g, yaml, &err), 0, "%s: loaded",
			      bad_cfgs[i].desc);
		/* the file's directory is a temporary one: compare from
		 * its base name on */
		msg = strstr(err.msg, "natgw.yaml:");
		cr_expect(msg && !strcmp(msg, bad_cfgs[i].msg),
			  "%s:\n  got      %s\n  expected %s", bad_cfgs[i].desc,
			  err.msg, bad_cfgs[i].msg);
	}
}

/* A pipe the engine refuses (the context's 64 pipes taken once natgw_fwd
 * and natgw_conn are made): the engine's message, at the section. The
 * two pipes made stay on the context until it is destroyed (the flow API
 * removes no pipe). */
Test(natgw, engine_refusal_reported)
{
	struct dpflow_error err = {0};
	char *yaml = malloc(16384), *msg;
	size_t n = 0;
	struct gw g;

	cr_assert_not_null(yaml);
	n += (size_t)snprintf(yaml + n, 16384 - n, "%spipes:\n", ports_yaml);
	for (unsigned i = 0; i < DPFLOW_PIPES_MAX - 2; i++)
		n += (size_t)snprintf(yaml + n, 16384 - n,
				      "  - {name: p%u, type: basic, match: "
				      "[], miss: drop}\n",
				      i);
	snprintf(yaml + n, 16384 - n,
		 "apps:\n"
		 "  natgw:\n"
		 "    inside_port: lan\n"
		 "    outside_port: wan\n"
		 "    inside: [10.0.0.0/8]\n"
		 "    addrs: [198.51.100.1]\n");
	cr_assert_neq(gw_load(&g, yaml, &err), 0, "loaded");
	msg = strstr(err.msg, "natgw.yaml:");
	cr_expect(msg && !strcmp(msg, "natgw.yaml:69: apps.natgw: pipe "
				      "'natgw_inside': more than 64 "
				      "pipes (pipes)"),
		  "got %s", err.msg);
	free(yaml);
}

/* ------------------------------------------------------------ ops */

static struct dpflow_apps *cli_apps;

/* dpflowctl's client, in process: the request goes to the apps' request
 * hook as the control socket would hand it. */
static json_t *cli_call(json_t *req)
{
	char *text = json_dumps(req, JSON_COMPACT);
	const char *cmd = json_string_value(json_object_get(req, "cmd"));
	char *reply = dpflow_apps_request(cli_apps, cmd, text, strlen(text));
	json_t *r = reply ? json_loads(reply, 0, NULL) : NULL;

	free(text);
	free(reply);
	json_decref(req);
	if (r && !json_is_true(json_object_get(r, "ok"))) {
		json_decref(r);
		return NULL;
	}
	return r;
}

static void cli_print_json(json_t *v)
{
	json_dumpf(v, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);
	putchar('\n');
}

static int cli_usage_error(const char *cmd, const char *fmt, ...)
{
	(void)cmd;
	(void)fmt;
	return DPFLOW_APP_EXIT_USAGE;
}

/* Traffic whose every drop reason differs: 3 packets out, 2 in, 11
 * dropped (1 not_inside, 2 not_to_pool, 5 no_connection, 3
 * not_from_inside); 2 connections, the outside having opened none. */
static void mixed_traffic(struct gw *g)
{
	const struct step steps[] = {
	    {"out 1",
	     LAN,
	     {IN_HOST, REMOTE, 1000, 80, UDP, 0, 0},
	     WAN,
	     {POOL1, REMOTE, 7000, 80, UDP, 0, 0}},
	    {"in 1",
	     WAN,
	     {REMOTE, POOL1, 80, 7000, UDP, 0, 0},
	     LAN,
	     {REMOTE, IN_HOST, 80, 1000, UDP, 0, 0}},
	    {"out 2",
	     LAN,
	     {IN_HOST, REMOTE, 1000, 80, UDP, 0, 9},
	     WAN,
	     {POOL1, REMOTE, 7000, 80, UDP, 0, 9}},
	    {"in 2",
	     WAN,
	     {REMOTE, POOL1, 80, 7000, UDP, 0, 9},
	     LAN,
	     {REMOTE, IN_HOST, 80, 1000, UDP, 0, 9}},
	};

	gw_open(g, "[198.51.100.1]", "[7000, 7000]");
	run_steps(g, steps, DPFLOW_ARRAY_SIZE(steps), 7000, 7000);
	/* out 3, the second connection */
	run_steps(g, &hairpin_open, 1, 7000, 7000);
	run_steps(g, drop_steps, DPFLOW_ARRAY_SIZE(drop_steps), 7000, 7000);
}

Test(natgw, report_metrics_and_stats_agree)
{
	static const char *const lines[] = {
	    "# TYPE dpflow_natgw_connections gauge",
	    "dpflow_natgw_connections 2",
	    "# TYPE dpflow_natgw_connection_events_total counter",
	    "dpflow_natgw_connection_events_total{event=\"created\"} 2",
	    "dpflow_natgw_connection_events_total{event=\"expired\"} 0",
	    "dpflow_natgw_connection_events_total{event=\"replaced\"} 0",
	    "dpflow_natgw_connection_events_total{event=\"nat_exhausted\"} 0",
	    "# TYPE dpflow_natgw_packets_total counter",
	    "dpflow_natgw_packets_total{dir=\"out\"} 3",
	    "dpflow_natgw_packets_total{dir=\"in\"} 2",
	    "# TYPE dpflow_natgw_dropped_total counter",
	    "dpflow_natgw_dropped_total{reason=\"not_inside\"} 1",
	    "dpflow_natgw_dropped_total{reason=\"not_to_pool\"} 2",
	    "dpflow_natgw_dropped_total{reason=\"no_connection\"} 5",
	    "dpflow_natgw_dropped_total{reason=\"not_from_inside\"} 3",
	    "dpflow_natgw_dropped_total{reason=\"other\"} 0",
	};
	struct gw g;
	char *r, *m = NULL, *reply, want[96];
	size_t len = 0;
	FILE *f;
	static const char req[] = "{\"cmd\":\"natgw.stats\",\"id\":7}";

	mixed_traffic(&g);
	r = report(&g);
	cr_expect_str_eq(r, "natgw connections: live 2, created 2, expired 0, "
			    "replaced 0, nat_exhausted 0\n"
			    "natgw packets: out 3, in 2, dropped 11 "
			    "(not_inside 1, not_to_pool 2, no_connection 5, "
			    "not_from_inside 3, other 0)\n");
	free(r);

	f = open_memstream(&m, &len);
	dpflow_apps_metrics(g.apps, f);
	fclose(f);
	for (unsigned i = 0; i < DPFLOW_ARRAY_SIZE(lines); i++) {
		snprintf(want, sizeof(want), "%s\n", lines[i]);
		cr_expect(strstr(m, want), "metrics: no line '%s' in\n%s",
			  lines[i], m);
	}
	cr_expect(strstr(m, "# HELP dpflow_natgw_dropped_total packets the "
			    "gateway dropped, by reason: not_inside: from the "
			    "inside port, its source in no inside prefix; "
			    "not_to_pool: "),
		  "metrics: the drop reasons' HELP in\n%s", m);
	free(m);

	reply = dpflow_apps_request(g.apps, "natgw.stats", req, strlen(req));
	cr_assert_not_null(reply);
	cr_expect_str_eq(reply, "{\"ok\":true,\"connections\":{\"live\":2,"
				"\"created\":2,\"expired\":0,\"replaced\":0,"
				"\"nat_exhausted\":0},\"packets\":{\"out\":3,"
				"\"in\":2,\"dropped\":11},\"dropped_by\":{"
				"\"not_inside\":1,\"not_to_pool\":2,"
				"\"no_connection\":5,\"not_from_inside\":3,"
				"\"other\":0},\"id\":7}");
	free(reply);
	reply = dpflow_apps_request(g.apps, "natgw.flush", req, strlen(req));
	cr_assert_not_null(reply);
	cr_expect_str_eq(reply, "{\"ok\":false,\"error\":\"unknown cmd "
				"'natgw.flush' (natgw.stats)\",\"field\":"
				"\"cmd\",\"id\":7}");
	free(reply);
	gw_close(&g);
}

Test(natgw, dpflowctl_stats, .init = cr_redirect_stdout)
{
	const struct dpflow_app_cli *cli = dpflow_app_cli_find("natgw");
	struct dpflow_app_client cl = {0};
	char *argv_text[] = {"stats", NULL},
	     *argv_json[] = {"stats", "--json", NULL};
	char *argv_bad[] = {"stats", "-x", NULL};
	struct gw g;

	cr_assert_not_null(cli, "no dpflowctl commands registered for natgw");
	cr_assert_eq(cli->n_verbs, 1);
	cl.call = cli_call;
	cl.print_json = cli_print_json;
	cl.usage_error = cli_usage_error;
	mixed_traffic(&g);
	cli_apps = g.apps;
	cr_expect_eq(cli->verbs[0].run(&cl, 1, argv_text), 0);
	cr_expect_eq(cli->verbs[0].run(&cl, 2, argv_json), 0);
	cr_expect_eq(cli->verbs[0].run(&cl, 2, argv_bad),
		     DPFLOW_APP_EXIT_USAGE);
	fflush(stdout);
	cr_expect_stdout_eq_str(
	    "connections: live 2, created 2, expired 0, replaced 0, "
	    "nat_exhausted 0\n"
	    "packets: out 3, in 2, dropped 11\n"
	    "dropped: not_inside 1, not_to_pool 2, no_connection 5, "
	    "not_from_inside 3, other 0\n"
	    "{\"ok\":true,\"connections\":{\"live\":2,\"created\":2,"
	    "\"expired\":0,\"replaced\":0,\"nat_exhausted\":0},"
	    "\"packets\":{\"out\":3,\"in\":2,\"dropped\":11},\"dropped_by\":"
	    "{\"not_inside\":1,\"not_to_pool\":2,\"no_connection\":5,"
	    "\"not_from_inside\":3,\"other\":0}}\n");
	gw_close(&g);
}

/* As `dpflow validate` loads it (placeholder ports), then describes it. */
Test(natgw, describe_and_banner)
{
	struct dpflow_error err = {0};
	struct gw g;
	char *buf = NULL, yaml[1024];
	size_t len = 0;
	FILE *f;

	snprintf(yaml, sizeof(yaml),
		 "%sapps:\n"
		 "  natgw:\n"
		 "    inside_port: lan\n"
		 "    outside_port: wan\n"
		 "    inside: [10.0.0.0/8]\n"
		 "    addrs: [198.51.100.1, 198.51.100.2]\n",
		 ports_yaml);
	cr_assert_eq(gw_load_ex(&g, yaml, true, &err), 0, "%s", err.msg);
	f = open_memstream(&buf, &len);
	dpflow_apps_describe(g.apps, f);
	dpflow_apps_banner(g.apps, f);
	fclose(f);
	cr_expect_str_eq(
	    buf, "apps:\n"
		 "  natgw:\n"
		 "    inside port lan, outside port wan\n"
		 "    inside 10.0.0.0/8\n"
		 "    pool 198.51.100.1, 198.51.100.2 ports 1024-65535\n"
		 "    connections 65536\n"
		 "    pipes natgw_inside (lpm, root of lan), "
		 "natgw_outside (basic, root of wan), natgw_conn (ct), "
		 "natgw_fwd (basic)\n"
		 "  app    natgw        lan -> wan, 2 pool addresses, "
		 "ports 1024-65535\n");
	free(buf);
	gw_close(&g);
}
