/*
 * The L4 load balancer app (apps/l4lb) driven in memory, end to end:
 * control requests through the control endpoint's application hook
 * (dpflow_ctl_handle with l4lb_ctl_request), frames built here (Ethernet,
 * IPv4, TCP or ICMP with correct checksums) run through the context's
 * root pipes and the app's handler, and what the app transmits read back
 * from the two in-memory ports ("ring:...,loop": clients 0, backends 1)
 * and checked field by field.
 *
 *   ctl      malformed, unknown and failing requests change nothing (a
 *            service.add whose second backend fails leaves no half-added
 *            service); add/rm/set show in l4lb.services (weights, up,
 *            Maglev slots); the request's id is echoed
 *   nat      replies translated back to VIP -> client; replies from an
 *            address or to a port not bound dropped
 *   drain    weight 0 keeps a backend's tracked flows and gives it no new
 *            ones; removing a backend reschedules its flows only (NAT
 *            and IP-in-IP)
 *   health   TCP checks against a listener here and a closed port, down
 *            after `fall` failures and up after `rise` successes; HTTP
 *            checks against a tiny responder (500: down, 200: up)
 *   flood    a 100k SYN flood on a 4096-entry table: established flows
 *            keep their backend and are never scheduled again, the table
 *            keeps its size, the flood replaces half-open entries only,
 *            and (IP-in-IP) every SYN is still forwarded
 *   icmp     an ICMP frag needed about a DSR flow goes to its backend
 *            (drained or not); one about no flow is dropped
 *   regressions  bugs these tests found, each kept as a test (see each)
 *
 * Each flow's frames carry its tag in the TCP sequence number, which the
 * app never rewrites, so that each output frame is matched to its flow.
 * A thread is online (an RCU reader) only around bursts: l4lb_commit()
 * waits for a grace period, so control requests are made offline.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "dpflow/clock.h"
#include "dpflow/ctl.h"
#include "dpflow/dpflow.h"

#include "l4lb/l4lb.h"
#include "l4lb/l4lb_ctl.h"

/* ------------------------------------------------------------ helpers */

#define BURST	  64u
#define FRAME_MAX 256u

static const uint8_t LB_MAC[6] = {0x02, 0, 0, 0, 0, 0x01};
static const uint8_t CLIENT_MAC[6] = {0x02, 0, 0, 0, 0, 0x10};
static const uint8_t BE_GW_MAC[6] = {0x02, 0, 0, 0, 0, 0x20};

#define VIP	0xc000020au /* 192.0.2.10 */
#define VPORT	80u
#define SNAT	0xc6336401u /* 198.51.100.1 */
#define ENCAP	0xc6336402u /* 198.51.100.2 */
#define BE_NET	0x0a000000u /* 10.0.0.x */
#define BE_PORT 8080u

static uint16_t ld16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t ld32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

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

static uint32_t csum_add(uint32_t sum, const uint8_t *p, unsigned n)
{
	for (unsigned i = 0; i + 1 < n; i += 2)
		sum += (uint32_t)p[i] << 8 | p[i + 1];
	if (n & 1)
		sum += (uint32_t)p[n - 1] << 8;
	return sum;
}

static uint16_t csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}

/* The TCP/UDP checksum over an IPv4 pseudo header: 0xffff when valid. */
static uint16_t l4_sum4(const uint8_t *ip, const uint8_t *l4, unsigned len,
			uint8_t proto)
{
	uint32_t s = csum_add(0, ip + 12, 8) + proto + len;

	return csum_fold(csum_add(s, l4, len));
}

static void ipv4_hdr(uint8_t *ip, uint32_t src, uint32_t dst, uint8_t proto,
		     unsigned payload)
{
	memset(ip, 0, 20);
	ip[0] = 0x45;
	st16(ip + 2, (uint16_t)(20 + payload));
	st16(ip + 4, 0x1234);
	st16(ip + 6, 0x4000);
	ip[8] = 64;
	ip[9] = proto;
	st32(ip + 12, src);
	st32(ip + 16, dst);
	st16(ip + 10, (uint16_t)~csum_fold(csum_add(0, ip, 20)));
}

#define TCP_FIN 0x01
#define TCP_SYN 0x02
#define TCP_ACK 0x10

/* An Ethernet/IPv4/TCP frame src:sport -> dst:dport, @seq (the tag). */
static unsigned tcp4_frame(uint8_t *f, uint32_t src, uint16_t sport,
			   uint32_t dst, uint16_t dport, uint8_t flags,
			   uint32_t seq)
{
	uint8_t *ip = f + 14, *tcp = ip + 20;

	memcpy(f, LB_MAC, 6);
	memcpy(f + 6, CLIENT_MAC, 6);
	st16(f + 12, 0x0800);
	ipv4_hdr(ip, src, dst, 6, 20);
	memset(tcp, 0, 20);
	st16(tcp, sport);
	st16(tcp + 2, dport);
	st32(tcp + 4, seq);
	st32(tcp + 8, flags & TCP_ACK ? 0x01020304u : 0);
	tcp[12] = 5 << 4;
	tcp[13] = flags;
	st16(tcp + 14, 65535);
	st16(tcp + 16, (uint16_t)~l4_sum4(ip, tcp, 20, 6));
	return 54;
}

/* One frame the app sent, parsed. */
struct outp {
	uint32_t dst;	/* outer IPv4 destination: the backend */
	uint32_t src;	/* outer IPv4 source */
	uint8_t proto;	/* outer protocol: 6 NAT, 4 IP-in-IP, 1 ICMP */
	uint8_t inner;	/* IP-in-IP: the inner protocol */
	uint16_t sport; /* TCP (inner when encapsulated) */
	uint16_t dport;
	uint32_t seq;	 /* TCP: the flow's tag */
	uint16_t len;	 /* frame length */
	uint8_t dmac[6]; /* Ethernet destination */
	bool csum_ok;	 /* IPv4 header (outer and inner) and TCP sums */
	uint8_t port;	 /* sent on: 0 toward the clients, 1 the backends */
	uint8_t ip[80];	 /* the first bytes of the (outer) IP packet */
};

static void parse_out(const uint8_t *f, unsigned len, struct outp *o)
{
	const uint8_t *ip = f + 14, *l4;
	unsigned ihl, tot;

	memset(o, 0, sizeof(*o));
	o->len = (uint16_t)len;
	if (len < 34 || ld16(f + 12) != 0x0800)
		return;
	memcpy(o->dmac, f, 6);
	memcpy(o->ip, ip, len - 14 < sizeof(o->ip) ? len - 14 : sizeof(o->ip));
	ihl = (ip[0] & 0xfu) * 4u;
	tot = ld16(ip + 2);
	o->src = ld32(ip + 12);
	o->dst = ld32(ip + 16);
	o->proto = ip[9];
	o->csum_ok =
	    csum_fold(csum_add(0, ip, ihl)) == 0xffff && 14 + tot <= len;
	l4 = ip + ihl;
	if (o->proto == 4) { /* IP-in-IP: the client's packet inside */
		const uint8_t *in = l4;
		unsigned iihl = (in[0] & 0xfu) * 4u;

		o->inner = in[9];
		o->csum_ok =
		    o->csum_ok && csum_fold(csum_add(0, in, iihl)) == 0xffff;
		if (in[9] == 6) {
			const uint8_t *tcp = in + iihl;

			o->csum_ok =
			    o->csum_ok &&
			    l4_sum4(in, tcp, ld16(in + 2) - iihl, 6) == 0xffff;
			o->sport = ld16(tcp);
			o->dport = ld16(tcp + 2);
			o->seq = ld32(tcp + 4);
		}
	} else if (o->proto == 6) {
		o->csum_ok =
		    o->csum_ok && l4_sum4(ip, l4, tot - ihl, 6) == 0xffff;
		o->sport = ld16(l4);
		o->dport = ld16(l4 + 2);
		o->seq = ld32(l4 + 4);
	}
}

/* A balancer on an in-memory context: client port 0 ("null:"), backend
 * port 1 (a looped ring that the test reads). */
struct fx {
	struct dpflow_ctx *ctx;
	struct dpflow_pool *pool;
	struct l4lb *lb;
	struct dpflow_ctl *ctl;
	bool online;
	uint16_t in_port; /* where pushed frames arrive (0: clients) */
	uint32_t pend[BURST];
	unsigned n_pend;
	bool keep; /* keep parsed outputs in outs[] (else count them) */
	struct outp *outs;
	unsigned n_outs, cap_outs;
	uint64_t n_sent; /* frames the app transmitted */
};

static void fx_init(struct fx *f, uint32_t conn_entries, uint32_t maglev)
{
	struct dpflow_ctx_params cp = {.pool_slots = 8192, .data_room = 512};
	struct dpflow_ctl_hooks hooks;
	struct l4lb_cfg cfg;
	struct dpflow_error err = {0};
	char uri[64];

	memset(f, 0, sizeof(*f));
	f->keep = true;
	f->ctx = dpflow_ctx_create(&cp, &err);
	cr_assert(f->ctx, "context: %s", err.msg);
	snprintf(uri, sizeof(uri), "ring:l4lb_test_c%d,size=4096,loop",
		 (int)getpid());
	cr_assert_eq(dpflow_ctx_port_add(f->ctx, "clients", uri, &err), 0,
		     "port clients: %s", err.msg);
	snprintf(uri, sizeof(uri), "ring:l4lb_test_b%d,size=4096,loop",
		 (int)getpid());
	cr_assert_eq(dpflow_ctx_port_add(f->ctx, "backends", uri, &err), 1,
		     "port backends: %s", err.msg);
	f->pool = dpflow_ctx_pool(f->ctx);
	memset(&cfg, 0, sizeof(cfg));
	cfg.client_port = 0;
	cfg.backend_port = 1;
	memcpy(cfg.client_mac, LB_MAC, 6);
	memcpy(cfg.backend_mac, LB_MAC, 6);
	memcpy(cfg.client_gw_mac, CLIENT_MAC, 6);
	memcpy(cfg.backend_gw_mac, BE_GW_MAC, 6);
	cfg.conn_entries = conn_entries;
	cfg.maglev_size = maglev;
	f->lb = l4lb_create(f->ctx, &cfg, &err);
	cr_assert(f->lb, "l4lb_create: %s", err.msg);
	memset(&hooks, 0, sizeof(hooks));
	hooks.request = l4lb_ctl_request;
	hooks.request_arg = f->lb;
	f->ctl = dpflow_ctl_open(f->ctx, NULL, &hooks, &err);
	cr_assert(f->ctl, "dpflow_ctl_open: %s", err.msg);
}

static void fx_online(struct fx *f)
{
	if (!f->online)
		dpflow_ctx_thread_online(f->ctx);
	f->online = true;
}

static void fx_offline(struct fx *f)
{
	if (f->online)
		dpflow_ctx_thread_offline(f->ctx);
	f->online = false;
}

static void fx_fini(struct fx *f)
{
	fx_offline(f);
	dpflow_ctl_close(f->ctl);
	l4lb_destroy(f->lb);
	dpflow_ctx_destroy(f->ctx);
	free(f->outs);
}

/* Collect what the app sent on port @port. */
static void collect(struct fx *f, uint16_t port)
{
	struct dpflow_port *p = dpflow_ctx_port(f->ctx, port);
	uint32_t idx[BURST];
	uint16_t got;

	while ((got = dpflow_port_rx_burst(p, 0, idx, BURST)) > 0) {
		for (uint16_t k = 0; k < got; k++) {
			const struct dpflow_pkt_meta *m =
			    dpflow_pool_meta(f->pool, idx[k]);
			struct outp *o;

			f->n_sent++;
			if (!f->keep)
				continue;
			if (f->n_outs == f->cap_outs) {
				f->cap_outs =
				    f->cap_outs ? 2 * f->cap_outs : 1024;
				f->outs = realloc(
				    f->outs, f->cap_outs * sizeof(*f->outs));
				cr_assert(f->outs);
			}
			o = &f->outs[f->n_outs++];
			parse_out(dpflow_pkt_data(f->pool, idx[k]), m->data_len,
				  o);
			o->port = (uint8_t)port;
		}
		dpflow_pool_free_bulk(f->pool, idx, got);
	}
}

/* Run the pending frames through the app and collect what it sent. */
static void flush(struct fx *f)
{
	if (!f->n_pend)
		return;
	fx_online(f);
	dpflow_ctx_process_burst(f->ctx, f->in_port, f->pend,
				 (uint16_t)f->n_pend);
	dpflow_ctx_quiescent(f->ctx);
	f->n_pend = 0;
	collect(f, 0);
	collect(f, 1);
}

/* Queue frame @frame for the app (a burst runs when BURST are queued). */
static void push(struct fx *f, const uint8_t *frame, unsigned len)
{
	uint32_t i;
	struct dpflow_pkt_meta *m;

	cr_assert_eq(dpflow_pool_alloc_bulk(f->pool, &i, 1), 0, "pool empty");
	m = dpflow_pool_meta(f->pool, i);
	memcpy(dpflow_pkt_data(f->pool, i), frame, len);
	m->data_len = (uint16_t)len;
	f->pend[f->n_pend++] = i;
	if (f->n_pend == BURST)
		flush(f);
}

static void outs_reset(struct fx *f)
{
	f->n_outs = 0;
}

/* A control request (printf format); the parsed reply (json_decref it). */
__attribute__((format(printf, 2, 3))) static json_t *req(struct fx *f,
							 const char *fmt, ...)
{
	char buf[4096];
	va_list ap;
	char *reply;
	json_t *j;
	json_error_t je;
	bool was = f->online;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	cr_assert(n > 0 && n < (int)sizeof(buf));
	fx_offline(f); /* a commit waits for a grace period */
	reply = dpflow_ctl_handle(f->ctl, buf, (size_t)n);
	if (was)
		fx_online(f);
	cr_assert(reply, "no reply to %s", buf);
	j = json_loads(reply, 0, &je);
	cr_assert(j, "reply to %s is not JSON: %s", buf, reply);
	free(reply);
	return j;
}

static bool j_ok(const json_t *j)
{
	return json_is_true(json_object_get(j, "ok"));
}

static const char *j_err(const json_t *j)
{
	const char *e = json_string_value(json_object_get(j, "error"));

	return e ? e : "";
}

/* A request that must succeed. */
#define REQ_OK(f, ...)                                                \
	do {                                                          \
		json_t *r_ = req(f, __VA_ARGS__);                     \
		cr_assert(j_ok(r_), "request failed: %s", j_err(r_)); \
		json_decref(r_);                                      \
	} while (0)

/* The "services" list of an l4lb.services reply (a new reference). */
static json_t *services(struct fx *f)
{
	json_t *r = req(f, "{\"cmd\":\"l4lb.services\"}"), *s;

	cr_assert(j_ok(r), "l4lb.services: %s", j_err(r));
	s = json_incref(json_object_get(r, "services"));
	cr_assert(json_is_array(s));
	json_decref(r);
	return s;
}

/* Service @name of list @svcs (borrowed), or NULL. */
static json_t *svc_of(json_t *svcs, const char *name)
{
	size_t i;
	json_t *s;

	json_array_foreach(svcs, i, s)
	{
		if (!strcmp(json_string_value(json_object_get(s, "name")),
			    name))
			return s;
	}
	return NULL;
}

/* Backend @addr:@port of service object @s (borrowed), or NULL. */
static json_t *be_of(json_t *s, const char *addr, int port)
{
	size_t i;
	json_t *b;

	json_array_foreach(json_object_get(s, "backends"), i, b)
	{
		if (!strcmp(json_string_value(json_object_get(b, "addr")),
			    addr) &&
		    json_integer_value(json_object_get(b, "port")) == port)
			return b;
	}
	return NULL;
}

static json_int_t j_int(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);

	cr_assert(json_is_integer(v), "no integer '%s'", key);
	return json_integer_value(v);
}

/* ------------------------------------------------------------ ctl */

#define WEB_SVC                                                     \
	"{\"name\":\"web\",\"vip\":\"192.0.2.10\",\"port\":80,"     \
	"\"mode\":\"nat\",\"snat\":\"198.51.100.1\",\"backends\":[" \
	"{\"addr\":\"10.0.0.1\",\"port\":8080},"                    \
	"{\"addr\":\"10.0.0.2\",\"port\":8080},"                    \
	"{\"addr\":\"10.0.0.3\",\"port\":8080,\"weight\":2,"        \
	"\"mac\":\"02:00:00:00:00:33\"}]}"

/* A request that must fail, echo its id and leave l4lb.services as
 * @before; @msg: a part of the error message. */
__attribute__((format(printf, 4, 5))) static void
req_fails(struct fx *f, json_t *before, const char *msg, const char *fmt, ...)
{
	char buf[2048];
	va_list ap;
	json_t *r, *after;
	char *b, *a;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	r = req(f, "%s", buf);
	cr_assert(json_is_false(json_object_get(r, "ok")),
		  "%s: expected ok false", buf);
	cr_assert(strstr(j_err(r), msg), "%s: error '%s' lacks '%s'", buf,
		  j_err(r), msg);
	cr_assert_eq(json_integer_value(json_object_get(r, "id")), 77,
		     "%s: id not echoed", buf);
	json_decref(r);
	after = services(f);
	b = json_dumps(before, JSON_COMPACT | JSON_SORT_KEYS);
	a = json_dumps(after, JSON_COMPACT | JSON_SORT_KEYS);
	cr_assert(json_equal(before, after),
		  "%s changed the services:\nbefore %s\nafter  %s", buf, b, a);
	free(a);
	free(b);
	json_decref(after);
}

Test(l4lb_app, ctl_requests)
{
	struct fx f;
	json_t *r, *before, *web, *b;
	json_int_t sum = 0;
	const uint32_t m = 1009;

	fx_init(&f, 4096, m);

	/* a service with its backends; the id is echoed */
	r = req(&f, "{\"cmd\":\"l4lb.service.add\",\"id\":\"a1\","
		    "\"service\":" WEB_SVC "}");
	cr_assert(j_ok(r), "service.add: %s", j_err(r));
	cr_assert_str_eq(json_string_value(json_object_get(r, "id")), "a1");
	json_decref(r);
	r = req(&f, "{\"cmd\":\"l4lb.services\",\"id\":[1,2]}");
	cr_assert(j_ok(r));
	b = json_pack("[ii]", 1, 2);
	cr_assert(json_equal(json_object_get(r, "id"), b));
	json_decref(b);
	cr_assert_eq(j_int(json_object_get(r, "conns"), "capacity"), 4096);
	json_decref(r);

	before = services(&f);
	cr_assert_eq(json_array_size(before), 1);
	web = svc_of(before, "web");
	cr_assert(web);
	cr_assert_str_eq(json_string_value(json_object_get(web, "vip")),
			 "192.0.2.10");
	cr_assert_str_eq(json_string_value(json_object_get(web, "mode")),
			 "nat");
	cr_assert_str_eq(json_string_value(json_object_get(web, "proto")),
			 "tcp");
	cr_assert_eq(j_int(web, "port"), 80);
	cr_assert_eq(json_array_size(json_object_get(web, "backends")), 3);
	for (int i = 1; i <= 3; i++) {
		char a[16];

		snprintf(a, sizeof(a), "10.0.0.%d", i);
		b = be_of(web, a, 8080);
		cr_assert(b, "backend %s missing", a);
		cr_assert_eq(j_int(b, "weight"), i == 3 ? 2 : 1);
		cr_assert(json_is_true(json_object_get(b, "up")));
		sum += j_int(b, "slots");
	}
	cr_assert_eq(sum, m, "the backends hold %lld of %u slots",
		     (long long)sum, m);
	/* weight 2 holds about twice the slots of weight 1 */
	cr_assert_gt(j_int(be_of(web, "10.0.0.3", 8080), "slots"),
		     j_int(be_of(web, "10.0.0.1", 8080), "slots") * 3 / 2);

	/* failures: each one leaves the services as they were */
	req_fails(&f, before, "unknown key 'bogus'",
		  "{\"cmd\":\"l4lb.backend.add\",\"id\":77,\"service\":\"web\","
		  "\"backend\":{\"addr\":\"10.0.0.9\"},\"bogus\":1}");
	req_fails(&f, before, "wieght",
		  "{\"cmd\":\"l4lb.backend.add\",\"id\":77,\"service\":\"web\","
		  "\"backend\":{\"addr\":\"10.0.0.9\",\"wieght\":2}}");
	req_fails(&f, before, "unknown key 'backend'",
		  "{\"cmd\":\"l4lb.service.rm\",\"id\":77,\"name\":\"web\","
		  "\"backend\":{}}");
	req_fails(&f, before, "'service' (a name) is missing",
		  "{\"cmd\":\"l4lb.backend.add\",\"id\":77,"
		  "\"backend\":{\"addr\":\"10.0.0.9\"}}");
	req_fails(
	    &f, before, "no service 'nope'",
	    "{\"cmd\":\"l4lb.backend.add\",\"id\":77,\"service\":\"nope\","
	    "\"backend\":{\"addr\":\"10.0.0.9\"}}");
	req_fails(&f, before, "'service' is an object",
		  "{\"cmd\":\"l4lb.service.add\",\"id\":77,\"service\":\"x\"}");
	req_fails(&f, before, "not an IPv4 or IPv6 address",
		  "{\"cmd\":\"l4lb.backend.add\",\"id\":77,\"service\":\"web\","
		  "\"backend\":{\"addr\":\"10.0.0.300\"}}");
	req_fails(&f, before, "'addr' is not an address",
		  "{\"cmd\":\"l4lb.backend.set\",\"id\":77,\"service\":\"web\","
		  "\"addr\":\"not-an-address\",\"port\":8080,\"weight\":1}");
	req_fails(&f, before, "'addr' is not an address",
		  "{\"cmd\":\"l4lb.backend.rm\",\"id\":77,\"service\":\"web\","
		  "\"port\":8080}");
	req_fails(&f, before, "no backend 10.0.0.9:8080",
		  "{\"cmd\":\"l4lb.backend.rm\",\"id\":77,\"service\":\"web\","
		  "\"addr\":\"10.0.0.9\",\"port\":8080}");
	/* the port is part of a backend's identity */
	req_fails(&f, before, "no backend 10.0.0.1:0",
		  "{\"cmd\":\"l4lb.backend.set\",\"id\":77,\"service\":\"web\","
		  "\"addr\":\"10.0.0.1\",\"weight\":0}");
	req_fails(&f, before, "'weight' is 0..1000000",
		  "{\"cmd\":\"l4lb.backend.set\",\"id\":77,\"service\":\"web\","
		  "\"addr\":\"10.0.0.1\",\"port\":8080,\"weight\":-1}");
	req_fails(&f, before, "'weight' is 0..1000000",
		  "{\"cmd\":\"l4lb.backend.set\",\"id\":77,\"service\":\"web\","
		  "\"addr\":\"10.0.0.1\",\"port\":8080,\"weight\":1000001}");
	req_fails(&f, before, "'weight' is 0..1000000",
		  "{\"cmd\":\"l4lb.backend.set\",\"id\":77,\"service\":\"web\","
		  "\"addr\":\"10.0.0.1\",\"port\":8080,\"weight\":\"2\"}");
	req_fails(&f, before, "the backend exists",
		  "{\"cmd\":\"l4lb.backend.add\",\"id\":77,\"service\":\"web\","
		  "\"backend\":{\"addr\":\"10.0.0.1\",\"port\":8080}}");
	req_fails(&f, before, "a nat backend has the VIP's family",
		  "{\"cmd\":\"l4lb.backend.add\",\"id\":77,\"service\":\"web\","
		  "\"backend\":{\"addr\":\"2001:db8::1\"}}");
	/* a DSR service whose second backend has the wrong family: no
	 * half-added service */
	req_fails(&f, before, "a dsr backend has the family",
		  "{\"cmd\":\"l4lb.service.add\",\"id\":77,\"service\":{"
		  "\"name\":\"dsr\",\"vip\":\"192.0.2.20\",\"port\":80,"
		  "\"mode\":\"ipip\",\"encap_src\":\"198.51.100.2\","
		  "\"backends\":[{\"addr\":\"10.0.1.1\"},"
		  "{\"addr\":\"2001:db8::1\"}]}}");
	/* ... or a bad third backend of a NAT service */
	req_fails(&f, before, "is not an IPv4 or IPv6 address",
		  "{\"cmd\":\"l4lb.service.add\",\"id\":77,\"service\":{"
		  "\"name\":\"web2\",\"vip\":\"192.0.2.21\",\"port\":80,"
		  "\"mode\":\"nat\",\"snat\":\"198.51.100.9\",\"backends\":["
		  "{\"addr\":\"10.0.2.1\"},{\"addr\":\"10.0.2.2\"},"
		  "{\"addr\":\"10.0.2.x\"}]}}");
	req_fails(&f, before, "the backend exists",
		  "{\"cmd\":\"l4lb.service.add\",\"id\":77,\"service\":{"
		  "\"name\":\"web2\",\"vip\":\"192.0.2.21\",\"port\":80,"
		  "\"mode\":\"nat\",\"snat\":\"198.51.100.9\",\"backends\":["
		  "{\"addr\":\"10.0.2.1\"},{\"addr\":\"10.0.2.1\"}]}}");
	req_fails(&f, before, "a list of backends",
		  "{\"cmd\":\"l4lb.service.add\",\"id\":77,\"service\":{"
		  "\"name\":\"web2\",\"vip\":\"192.0.2.21\",\"mode\":\"nat\","
		  "\"snat\":\"198.51.100.9\",\"backends\":{}}}");
	req_fails(&f, before, "a dsr service needs encap_src",
		  "{\"cmd\":\"l4lb.service.add\",\"id\":77,\"service\":{"
		  "\"name\":\"dsr\",\"vip\":\"192.0.2.20\",\"mode\":\"gue\"}}");
	req_fails(&f, before, "health",
		  "{\"cmd\":\"l4lb.service.add\",\"id\":77,\"service\":{"
		  "\"name\":\"dsr\",\"vip\":\"192.0.2.20\",\"mode\":\"ipip\","
		  "\"encap_src\":\"198.51.100.2\",\"health\":{\"type\":"
		  "\"icmp\"}}}");
	/* duplicate name, same VIP/proto/port, unknown service */
	req_fails(&f, before, "service web exists",
		  "{\"cmd\":\"l4lb.service.add\",\"id\":77,\"service\":{"
		  "\"name\":\"web\",\"vip\":\"192.0.2.99\",\"mode\":\"ipip\","
		  "\"encap_src\":\"198.51.100.2\"}}");
	req_fails(&f, before, "same VIP, proto and port",
		  "{\"cmd\":\"l4lb.service.add\",\"id\":77,\"service\":{"
		  "\"name\":\"web3\",\"vip\":\"192.0.2.10\",\"port\":80,"
		  "\"mode\":\"ipip\",\"encap_src\":\"198.51.100.2\"}}");
	req_fails(&f, before, "the SNAT address is the VIP of web",
		  "{\"cmd\":\"l4lb.service.add\",\"id\":77,\"service\":{"
		  "\"name\":\"web3\",\"vip\":\"192.0.2.11\",\"mode\":\"nat\","
		  "\"snat\":\"192.0.2.10\"}}");
	req_fails(&f, before, "no service nope",
		  "{\"cmd\":\"l4lb.service.rm\",\"id\":77,\"name\":\"nope\"}");
	req_fails(&f, before, "'name' is missing",
		  "{\"cmd\":\"l4lb.service.rm\",\"id\":77}");
	/* not one of the app's commands: the app names its commands */
	req_fails(&f, before,
		  "unknown cmd 'l4lb.nope' (l4lb.services, l4lb.service.add, "
		  "l4lb.service.rm, l4lb.backend.add, l4lb.backend.rm, "
		  "l4lb.backend.set)",
		  "{\"cmd\":\"l4lb.nope\",\"id\":77}");
	json_decref(before);

	/* changes: add (weight 3), drain, remove */
	r = req(&f, "{\"cmd\":\"l4lb.backend.add\",\"id\":5,\"service\":"
		    "\"web\",\"backend\":{\"addr\":\"10.0.0.4\",\"port\":8080,"
		    "\"weight\":3}}");
	cr_assert(j_ok(r), "backend.add: %s", j_err(r));
	cr_assert_eq(json_integer_value(json_object_get(r, "id")), 5);
	json_decref(r);
	r = req(&f,
		"{\"cmd\":\"l4lb.backend.set\",\"id\":6,\"service\":"
		"\"web\",\"addr\":\"10.0.0.2\",\"port\":8080,\"weight\":0}");
	cr_assert(j_ok(r), "backend.set: %s", j_err(r));
	cr_assert_eq(json_integer_value(json_object_get(r, "id")), 6);
	json_decref(r);
	before = services(&f);
	web = svc_of(before, "web");
	cr_assert_eq(json_array_size(json_object_get(web, "backends")), 4);
	b = be_of(web, "10.0.0.2", 8080);
	cr_assert_eq(j_int(b, "weight"), 0);
	cr_assert_eq(j_int(b, "slots"), 0, "a drained backend holds slots");
	cr_assert(json_is_true(json_object_get(b, "up")));
	cr_assert_eq(j_int(be_of(web, "10.0.0.4", 8080), "weight"), 3);
	sum = j_int(be_of(web, "10.0.0.1", 8080), "slots") +
	      j_int(be_of(web, "10.0.0.3", 8080), "slots") +
	      j_int(be_of(web, "10.0.0.4", 8080), "slots");
	cr_assert_eq(sum, m, "weighted backends hold %lld of %u slots",
		     (long long)sum, m);
	/* shares 1:2:3 of 1009 slots */
	cr_assert_gt(j_int(be_of(web, "10.0.0.4", 8080), "slots"), 400);
	cr_assert_lt(j_int(be_of(web, "10.0.0.1", 8080), "slots"), 250);
	json_decref(before);

	REQ_OK(&f, "{\"cmd\":\"l4lb.backend.rm\",\"service\":\"web\","
		   "\"addr\":\"10.0.0.1\",\"port\":8080}");
	before = services(&f);
	web = svc_of(before, "web");
	cr_assert_eq(json_array_size(json_object_get(web, "backends")), 3);
	cr_assert_null(be_of(web, "10.0.0.1", 8080));
	cr_assert_eq(j_int(be_of(web, "10.0.0.2", 8080), "slots"), 0);
	cr_assert_eq(j_int(be_of(web, "10.0.0.3", 8080), "slots") +
			 j_int(be_of(web, "10.0.0.4", 8080), "slots"),
		     m);
	json_decref(before);

	/* undrain; a second service; remove the first */
	REQ_OK(&f, "{\"cmd\":\"l4lb.backend.set\",\"service\":\"web\","
		   "\"addr\":\"10.0.0.2\",\"port\":8080,\"weight\":1}");
	REQ_OK(&f, "{\"cmd\":\"l4lb.service.add\",\"service\":{"
		   "\"name\":\"dsr6\",\"vip\":\"2001:db8::10\",\"proto\":"
		   "\"udp\",\"mode\":\"gue\",\"encap_src\":\"2001:db8:1::1\","
		   "\"gue_port\":6081,\"backends\":[{\"addr\":"
		   "\"2001:db8:2::1\"},{\"addr\":\"2001:db8:2::2\","
		   "\"weight\":0}]}}");
	before = services(&f);
	cr_assert_eq(json_array_size(before), 2);
	web = svc_of(before, "web");
	cr_assert_gt(j_int(be_of(web, "10.0.0.2", 8080), "slots"), 0);
	web = svc_of(before, "dsr6");
	cr_assert(web);
	cr_assert_str_eq(json_string_value(json_object_get(web, "vip")),
			 "2001:db8::10");
	cr_assert_str_eq(json_string_value(json_object_get(web, "proto")),
			 "udp");
	cr_assert_str_eq(json_string_value(json_object_get(web, "mode")),
			 "gue");
	cr_assert_eq(j_int(be_of(web, "2001:db8:2::1", 0), "slots"), m);
	cr_assert_eq(j_int(be_of(web, "2001:db8:2::2", 0), "slots"), 0);
	json_decref(before);
	r = req(&f, "{\"cmd\":\"l4lb.service.rm\",\"id\":true,\"name\":"
		    "\"web\"}");
	cr_assert(j_ok(r), "service.rm: %s", j_err(r));
	cr_assert(json_is_true(json_object_get(r, "id")));
	json_decref(r);
	before = services(&f);
	cr_assert_eq(json_array_size(before), 1);
	cr_assert_null(svc_of(before, "web"));
	json_decref(before);
	/* the name is free again */
	REQ_OK(&f, "{\"cmd\":\"l4lb.service.add\",\"service\":" WEB_SVC "}");
	before = services(&f);
	cr_assert_eq(json_array_size(before), 2);
	cr_assert_eq(
	    json_array_size(json_object_get(svc_of(before, "web"), "backends")),
	    3);
	json_decref(before);
	fx_fini(&f);
}

/* ------------------------------------------------------------ drain */

#define FLOWS 300u

static uint32_t client_addr(uint32_t flow)
{
	return 0x0a010000u + flow; /* 10.1.x.y */
}

static uint16_t client_port(uint32_t flow)
{
	return (uint16_t)(20000u + flow);
}

/* Send one TCP frame of each flow @lo..@hi-1 with @flags; on return,
 * be[flow] is the backend its frame went to (0: none) and, NAT,
 * sp[flow] its SNAT port. Checks every output frame. */
static void send_flows(struct fx *f, uint8_t mode, uint32_t lo, uint32_t hi,
		       uint8_t flags, uint32_t *be, uint16_t *sp)
{
	uint8_t fr[FRAME_MAX];

	outs_reset(f);
	for (uint32_t i = lo; i < hi; i++)
		push(f, fr,
		     tcp4_frame(fr, client_addr(i), client_port(i), VIP, VPORT,
				flags, i));
	flush(f);
	for (uint32_t i = lo; i < hi; i++)
		be[i] = 0;
	for (unsigned k = 0; k < f->n_outs; k++) {
		const struct outp *o = &f->outs[k];
		uint32_t i = o->seq;

		cr_assert_eq(o->port, 1, "output frame %u toward the clients",
			     k);
		cr_assert(o->csum_ok, "output frame %u: bad checksum", k);
		cr_assert(i >= lo && i < hi, "output of unknown flow %u", i);
		cr_assert_eq(be[i], 0, "flow %u sent twice", i);
		cr_assert(o->dst > BE_NET && o->dst < BE_NET + 16,
			  "flow %u to %08x", i, o->dst);
		cr_assert(!memcmp(o->dmac, BE_GW_MAC, 6));
		if (mode == L4LB_MODE_NAT) {
			cr_assert_eq(o->proto, 6);
			cr_assert_eq(o->src, SNAT);
			cr_assert_geq(o->sport, L4LB_SNAT_PORT_LO);
			cr_assert_eq(o->dport, BE_PORT);
			sp[i] = o->sport;
		} else {
			cr_assert_eq(o->proto, 4);
			cr_assert_eq(o->inner, 6);
			cr_assert_eq(o->src, ENCAP);
			cr_assert_eq(o->sport, client_port(i));
			cr_assert_eq(o->dport, VPORT);
			/* inner packet unchanged: the client's */
			cr_assert_eq(ld32(o->ip + 20 + 12), client_addr(i));
			cr_assert_eq(ld32(o->ip + 20 + 16), VIP);
		}
		be[i] = o->dst;
	}
	cr_assert_eq(f->n_outs, hi - lo, "%u of %u frames forwarded", f->n_outs,
		     hi - lo);
}

static void add_web(struct fx *f, uint8_t mode, unsigned backends)
{
	char bl[512];
	size_t n = 0;

	for (unsigned b = 1; b <= backends; b++)
		n += (size_t)snprintf(bl + n, sizeof(bl) - n,
				      "%s{\"addr\":\"10.0.0.%u\",\"port\":%u}",
				      b > 1 ? "," : "", b, BE_PORT);
	if (mode == L4LB_MODE_NAT)
		REQ_OK(f,
		       "{\"cmd\":\"l4lb.service.add\",\"service\":{\"name\":"
		       "\"web\",\"vip\":\"192.0.2.10\",\"port\":80,\"mode\":"
		       "\"nat\",\"snat\":\"198.51.100.1\",\"backends\":[%s]}}",
		       bl);
	else
		REQ_OK(f,
		       "{\"cmd\":\"l4lb.service.add\",\"service\":{\"name\":"
		       "\"web\",\"vip\":\"192.0.2.10\",\"port\":80,\"mode\":"
		       "\"ipip\",\"encap_src\":\"198.51.100.2\",\"backends\":"
		       "[%s]}}",
		       bl);
}

/* Switch the port pushed frames arrive on (flushing first). */
static void in_port(struct fx *f, uint16_t port)
{
	if (f->in_port != port)
		flush(f);
	f->in_port = port;
}

/*
 * NAT: a reply (@flags) of each flow @lo..@hi-1 from its backend be[i]
 * to the SNAT address and port sp[i]. Returns how many came out toward
 * the clients; each must be the flow's, translated back (VIP:80 ->
 * client), to the client gateway's MAC, checksums valid.
 */
static unsigned send_replies(struct fx *f, uint32_t lo, uint32_t hi,
			     uint8_t flags, const uint32_t *be,
			     const uint16_t *sp)
{
	uint8_t fr[FRAME_MAX];

	outs_reset(f);
	in_port(f, 1);
	for (uint32_t i = lo; i < hi; i++)
		push(f, fr,
		     tcp4_frame(fr, be[i], BE_PORT, SNAT, sp[i], flags, i));
	flush(f);
	in_port(f, 0);
	for (unsigned k = 0; k < f->n_outs; k++) {
		const struct outp *o = &f->outs[k];
		uint32_t i = o->seq;

		cr_assert_eq(o->port, 0, "a reply went toward the backends");
		cr_assert(o->csum_ok, "reply %u: bad checksum", i);
		cr_assert(i >= lo && i < hi, "reply of unknown flow %u", i);
		cr_assert_eq(o->proto, 6);
		cr_assert_eq(o->src, VIP);
		cr_assert_eq(o->sport, VPORT);
		cr_assert_eq(o->dst, client_addr(i));
		cr_assert_eq(o->dport, client_port(i));
		cr_assert(!memcmp(o->dmac, CLIENT_MAC, 6));
	}
	return f->n_outs;
}

/* Counter @key ("new_flows", "rescheduled"...) of service web. */
static json_int_t svc_count(struct fx *f, const char *key)
{
	json_t *s = services(f);
	json_int_t n = j_int(svc_of(s, "web"), key);

	json_decref(s);
	return n;
}

static json_int_t svc_new_flows(struct fx *f)
{
	return svc_count(f, "new_flows");
}

static uint64_t drop_count(struct fx *f, unsigned d)
{
	uint64_t drops[L4LB_DROP__COUNT];

	l4lb_drops(f->lb, drops);
	return drops[d];
}

/* The value of the metric line starting with @prefix in @text. */
static long long metric(const char *text, const char *prefix)
{
	const char *p = text;
	size_t n = strlen(prefix);

	for (; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, prefix, n) && p[n] == ' ')
			return atoll(p + n + 1);
	cr_assert_fail("no metric line %s", prefix);
	return -1;
}

/* The Prometheus lines say what the counters say. */
static void metrics_match(struct fx *f)
{
	struct l4lb_service_stats st;
	uint64_t drops[L4LB_DROP__COUNT];
	char *text = NULL, name[160];
	size_t len = 0;
	FILE *m = open_memstream(&text, &len);
	int svc = l4lb_service_find(f->lb, "web");

	cr_assert(m);
	l4lb_metrics_render(f->lb, m);
	cr_assert_eq(fclose(m), 0);
	l4lb_service_stats(f->lb, svc, &st);
	cr_assert_eq(metric(text, "dpflow_l4lb_service_packets_total{service="
				  "\"web\",dir=\"fwd\"}"),
		     (long long)st.fwd.pkts);
	cr_assert_eq(metric(text, "dpflow_l4lb_service_packets_total{service="
				  "\"web\",dir=\"reply\"}"),
		     (long long)st.reply.pkts);
	cr_assert_eq(metric(text, "dpflow_l4lb_service_new_flows_total{"
				  "service=\"web\"}"),
		     (long long)st.new_flows);
	cr_assert_eq(metric(text, "dpflow_l4lb_service_rescheduled_total{"
				  "service=\"web\"}"),
		     (long long)st.rescheduled);
	for (uint32_t b = 0; b < L4LB_BACKENDS_MAX; b++) {
		struct l4lb_backend_info bi;
		char a[INET6_ADDRSTRLEN];

		if (l4lb_backend_info(f->lb, b, &bi))
			continue;
		inet_ntop(AF_INET, bi.cfg.addr.b, a, sizeof(a));
		snprintf(name, sizeof(name),
			 "dpflow_l4lb_backend_packets_total{service=\"web\","
			 "backend=\"%s:%u\"}",
			 a, bi.cfg.port);
		cr_assert_eq(metric(text, name), (long long)bi.fwd.pkts, "%s",
			     name);
		snprintf(name, sizeof(name),
			 "dpflow_l4lb_backend_up{service=\"web\",backend=\"%s:"
			 "%u\"}",
			 a, bi.cfg.port);
		cr_assert_eq(metric(text, name), bi.up ? 1 : 0, "%s", name);
	}
	l4lb_drops(f->lb, drops);
	cr_assert_eq(metric(text, "dpflow_l4lb_drops_total{reason=\"reply_"
				  "without_connection\"}"),
		     (long long)drops[L4LB_DROP_REPLY_NO_CONN]);
	cr_assert_gt(drops[L4LB_DROP_REPLY_NO_CONN], 0);
	free(text);
}

Test(l4lb_app, nat_replies)
{
	static uint32_t be0[FLOWS], be[FLOWS], wrong[FLOWS];
	static uint16_t sp0[FLOWS], sp[FLOWS];
	struct fx f;
	json_t *svcs;

	fx_init(&f, 65536, 0);
	add_web(&f, L4LB_MODE_NAT, 3);
	send_flows(&f, L4LB_MODE_NAT, 0, FLOWS, TCP_SYN, be0, sp0);
	cr_assert_eq(send_replies(&f, 0, FLOWS, TCP_SYN | TCP_ACK, be0, sp0),
		     FLOWS);
	send_flows(&f, L4LB_MODE_NAT, 0, FLOWS, TCP_ACK, be, sp);
	for (uint32_t i = 0; i < FLOWS; i++) {
		cr_assert_eq(be[i], be0[i]);
		cr_assert_eq(sp[i], sp0[i]);
		/* not a backend of the service */
		wrong[i] = BE_NET + 7;
		/* below the SNAT port range: never bound */
		sp[i] = (uint16_t)(1 + i);
	}
	cr_assert_eq(send_replies(&f, 0, FLOWS, TCP_ACK, be0, sp0), FLOWS);
	/* from another address, or to a SNAT port not bound: dropped */
	cr_assert_eq(send_replies(&f, 0, FLOWS, TCP_ACK, wrong, sp0), 0);
	cr_assert_eq(send_replies(&f, 0, FLOWS, TCP_ACK, be0, sp), 0);
	cr_assert_eq(drop_count(&f, L4LB_DROP_REPLY_NO_CONN), 2 * FLOWS);
	svcs = services(&f);
	cr_assert_eq(
	    j_int(json_object_get(svc_of(svcs, "web"), "reply"), "pkts"),
	    2 * FLOWS);
	json_decref(svcs);
	metrics_match(&f);
	fx_fini(&f);
}

/*
 * A whole handshake of one NAT flow in one burst (the data path looks a
 * burst's flows up before it handles any packet): SYN, ACK, ACK, ACK all
 * go to one backend with one SNAT port, one flow is made, and both its
 * entries end established (so that a SYN flood cannot replace them);
 * the backend's reply goes back to the client. Then the SYN and the ACK
 * of another flow in bursts of their own: the same.
 */
Test(l4lb_app, handshake_in_one_burst)
{
	static const uint8_t flags[4] = {TCP_SYN, TCP_ACK, TCP_ACK,
					 TCP_ACK | 0x08 /* PSH */};
	uint8_t fr[FRAME_MAX];
	uint32_t be[8], est = 0, live;
	uint16_t sp[8];
	struct fx f;

	fx_init(&f, 65536, 0);
	add_web(&f, L4LB_MODE_NAT, 3);
	outs_reset(&f);
	for (unsigned k = 0; k < 4; k++)
		push(&f, fr,
		     tcp4_frame(fr, client_addr(7), client_port(7), VIP, VPORT,
				flags[k], 7));
	flush(&f);
	cr_assert_eq(f.n_outs, 4, "%u of 4 frames forwarded", f.n_outs);
	be[7] = f.outs[0].dst;
	sp[7] = f.outs[0].sport;
	for (unsigned k = 0; k < 4; k++) {
		cr_assert(f.outs[k].csum_ok);
		cr_assert_eq(f.outs[k].dst, be[7],
			     "frame %u to another backend", k);
		cr_assert_eq(f.outs[k].sport, sp[7],
			     "frame %u with another SNAT port", k);
	}
	cr_assert_eq(svc_new_flows(&f), 1);
	live = l4lb_conn_count(l4lb_conns(f.lb),
			       (uint32_t)(dpflow_clock_ns() / 1000000u), &est);
	cr_assert_eq(live, 2, "%u entries (forward and reply expected)", live);
	cr_assert_eq(est, 2, "%u of 2 entries established", est);
	cr_assert_eq(send_replies(&f, 7, 8, TCP_ACK, be, sp), 1);
	/* the SYN and the ACK in bursts of their own: the same */
	send_flows(&f, L4LB_MODE_NAT, 5, 6, TCP_SYN, be, sp);
	send_flows(&f, L4LB_MODE_NAT, 5, 6, TCP_ACK, be, sp);
	live = l4lb_conn_count(l4lb_conns(f.lb),
			       (uint32_t)(dpflow_clock_ns() / 1000000u), &est);
	cr_assert_eq(live, 4, "%u entries of two flows", live);
	cr_assert_eq(est, 4, "%u of 4 entries established", est);
	fx_fini(&f);
}

/*
 * One burst of packets to alternating destinations: VIP:80 (the service),
 * VIP:81 (only the port differs: no service), 192.0.2.99:81 (only the
 * address differs), the SNAT address:81 from the client side (a reply
 * without connection). The handler remembers a burst's last destination
 * and what it was; each packet must still be classified by its own.
 */
Test(l4lb_app, mixed_destinations_in_one_burst)
{
	static const struct {
		uint32_t dst;
		uint16_t port;
	} to[4] = {{VIP, VPORT},
		   {VIP, VPORT + 1},
		   {0xc0000263u, VPORT + 1}, /* 192.0.2.99 */
		   {SNAT, VPORT + 1}};
	uint8_t fr[FRAME_MAX];
	struct fx f;
	unsigned fwd = 0;

	fx_init(&f, 65536, 0);
	add_web(&f, L4LB_MODE_NAT, 3);
	outs_reset(&f);
	for (uint32_t i = 0; i < 60; i++) {
		unsigned k = i % 4;

		push(&f, fr,
		     tcp4_frame(fr, client_addr(i), client_port(i), to[k].dst,
				to[k].port, TCP_SYN, i));
		fwd += k == 0;
	}
	flush(&f);
	cr_assert_eq(f.n_outs, fwd, "%u frames forwarded, %u expected",
		     f.n_outs, fwd);
	for (unsigned k = 0; k < f.n_outs; k++) {
		cr_assert_eq(f.outs[k].seq % 4, 0, "frame of packet %u sent",
			     f.outs[k].seq);
		cr_assert_eq(f.outs[k].dport, BE_PORT);
		cr_assert(f.outs[k].csum_ok);
	}
	cr_assert_eq(drop_count(&f, L4LB_DROP_NO_SERVICE), 2 * fwd);
	cr_assert_eq(drop_count(&f, L4LB_DROP_REPLY_NO_CONN), fwd);
	fx_fini(&f);
}

static void drain_and_remove(uint8_t mode)
{
	const uint32_t A = BE_NET + 2, B = BE_NET + 1; /* drained, removed */
	static uint32_t be0[2 * FLOWS], be[2 * FLOWS];
	static uint16_t sp0[2 * FLOWS], sp[2 * FLOWS];
	unsigned per[16] = {0}, moved = 0;
	struct fx f;
	json_t *svcs, *web;

	fx_init(&f, 65536, 0);
	add_web(&f, mode, 3);

	/* 300 flows: SYN, then ACK; every backend gets some */
	send_flows(&f, mode, 0, FLOWS, TCP_SYN, be0, sp0);
	for (uint32_t i = 0; i < FLOWS; i++)
		per[be0[i] - BE_NET]++;
	for (unsigned b = 1; b <= 3; b++)
		cr_assert_gt(per[b], 50, "backend %u got %u of 300 flows", b,
			     per[b]);
	send_flows(&f, mode, 0, FLOWS, TCP_ACK, be, sp);
	for (uint32_t i = 0; i < FLOWS; i++) {
		cr_assert_eq(be[i], be0[i], "flow %u moved before any change",
			     i);
		if (mode == L4LB_MODE_NAT)
			cr_assert_eq(sp[i], sp0[i], "flow %u: SNAT port", i);
	}

	/* drain 10.0.0.2 */
	REQ_OK(&f, "{\"cmd\":\"l4lb.backend.set\",\"service\":\"web\","
		   "\"addr\":\"10.0.0.2\",\"port\":8080,\"weight\":0}");
	svcs = services(&f);
	web = svc_of(svcs, "web");
	cr_assert_eq(j_int(be_of(web, "10.0.0.2", 8080), "slots"), 0);
	cr_assert_eq(j_int(be_of(web, "10.0.0.2", 8080), "new_flows"), per[2]);
	json_decref(svcs);
	send_flows(&f, mode, 0, FLOWS, TCP_ACK, be, sp);
	for (uint32_t i = 0; i < FLOWS; i++) {
		cr_assert_eq(be[i], be0[i],
			     "flow %u left its backend %08x for %08x when "
			     "10.0.0.2 was drained",
			     i, be0[i], be[i]);
		if (mode == L4LB_MODE_NAT)
			cr_assert_eq(sp[i], sp0[i], "flow %u: SNAT port", i);
	}
	/* 300 new flows: none to the drained backend */
	send_flows(&f, mode, FLOWS, 2 * FLOWS, TCP_SYN, be0, sp0);
	for (uint32_t i = FLOWS; i < 2 * FLOWS; i++)
		cr_assert_neq(be0[i], A, "new flow %u to the drained backend",
			      i);
	send_flows(&f, mode, FLOWS, 2 * FLOWS, TCP_ACK, be, sp);
	for (uint32_t i = FLOWS; i < 2 * FLOWS; i++)
		cr_assert_eq(be[i], be0[i]);
	svcs = services(&f);
	web = svc_of(svcs, "web");
	cr_assert_eq(j_int(be_of(web, "10.0.0.2", 8080), "new_flows"), per[2],
		     "the drained backend got new flows");
	/* 3 frames of each of its flows so far */
	cr_assert_eq(
	    j_int(json_object_get(be_of(web, "10.0.0.2", 8080), "fwd"), "pkts"),
	    3 * per[2]);
	cr_assert_eq(j_int(web, "new_flows"), 2 * FLOWS);
	cr_assert_eq(j_int(web, "rescheduled"), 0,
		     "draining rescheduled flows");
	json_decref(svcs);

	/* remove 10.0.0.1: its flows move (to 10.0.0.3, the only backend
	 * with a weight), all others stay */
	REQ_OK(&f, "{\"cmd\":\"l4lb.backend.rm\",\"service\":\"web\","
		   "\"addr\":\"10.0.0.1\",\"port\":8080}");
	send_flows(&f, mode, 0, 2 * FLOWS, TCP_ACK, be, sp);
	for (uint32_t i = 0; i < 2 * FLOWS; i++) {
		if (be0[i] == B) {
			cr_assert_eq(be[i], BE_NET + 3,
				     "flow %u of the removed backend went to "
				     "%08x",
				     i, be[i]);
			moved++;
		} else {
			cr_assert_eq(be[i], be0[i],
				     "flow %u left %08x for %08x when another "
				     "backend was removed",
				     i, be0[i], be[i]);
			if (mode == L4LB_MODE_NAT)
				cr_assert_eq(sp[i], sp0[i],
					     "flow %u: SNAT port", i);
		}
	}
	cr_assert_gt(moved, 0);
	/* rescheduled flows stay where they went */
	memcpy(be0, be, sizeof(be));
	memcpy(sp0, sp, sizeof(sp));
	send_flows(&f, mode, 0, 2 * FLOWS, TCP_ACK, be, sp);
	for (uint32_t i = 0; i < 2 * FLOWS; i++) {
		cr_assert_eq(be[i], be0[i], "flow %u moved again", i);
		if (mode == L4LB_MODE_NAT)
			cr_assert_eq(sp[i], sp0[i], "flow %u: SNAT port", i);
	}
	svcs = services(&f);
	web = svc_of(svcs, "web");
	cr_assert_eq(j_int(web, "new_flows"), 2 * FLOWS + moved,
		     "a flow was rescheduled that should not have been");
	cr_assert_eq(j_int(web, "rescheduled"), moved,
		     "rescheduled %lld, %u flows moved",
		     (long long)j_int(web, "rescheduled"), moved);
	json_decref(svcs);
	fx_fini(&f);
}

Test(l4lb_app, drain_keeps_flows_nat)
{
	drain_and_remove(L4LB_MODE_NAT);
}

Test(l4lb_app, drain_keeps_flows_ipip)
{
	drain_and_remove(L4LB_MODE_IPIP);
}

/* ------------------------------------------------------------ health */

static int listen_on(uint16_t port)
{
	struct sockaddr_in a;
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);

	cr_assert_geq(fd, 0);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons(port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0,
		     "bind 127.0.0.1:%u: %s", port, strerror(errno));
	cr_assert_eq(listen(fd, 64), 0);
	return fd;
}

static uint16_t port_of(int fd)
{
	struct sockaddr_in a;
	socklen_t l = sizeof(a);

	cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &l), 0);
	return ntohs(a.sin_port);
}

/* A port nothing listens on (bound, then closed). */
static uint16_t closed_port(void)
{
	int fd = listen_on(0);
	uint16_t p = port_of(fd);

	close(fd);
	return p;
}

static void accept_all(int lfd)
{
	int c;

	if (lfd < 0)
		return;
	while ((c = accept(lfd, NULL, NULL)) >= 0)
		close(c);
}

/* Is backend 127.0.0.1:@port of service "hc" up? */
static bool is_up(struct fx *f, uint16_t port)
{
	json_t *s = services(f), *b;
	bool up;

	b = be_of(svc_of(s, "hc"), "127.0.0.1", port);
	cr_assert(b, "no backend 127.0.0.1:%u", port);
	up = json_is_true(json_object_get(b, "up"));
	json_decref(s);
	return up;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {0, (long)ms * 1000000L};

	nanosleep(&ts, NULL);
}

struct http_srv {
	int lfd;
	int status; /* 200 or 500 */
	unsigned served;
	char last[128]; /* the last request's first line */
	struct {
		int fd;
		unsigned got;
		char buf[512];
	} c[16];
};

/* Accept, read requests, answer "HTTP/1.0 @status" and close. */
static void http_serve(struct http_srv *h)
{
	int fd;

	while ((fd = accept(h->lfd, NULL, NULL)) >= 0) {
		unsigned i;

		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
		for (i = 0; i < 16 && h->c[i].fd >= 0; i++)
			;
		if (i == 16) {
			close(fd);
			continue;
		}
		h->c[i].fd = fd;
		h->c[i].got = 0;
	}
	for (unsigned i = 0; i < 16; i++) {
		ssize_t r;
		char resp[128];
		int n;

		if (h->c[i].fd < 0)
			continue;
		r = recv(h->c[i].fd, h->c[i].buf + h->c[i].got,
			 sizeof(h->c[i].buf) - 1 - h->c[i].got, 0);
		if (r > 0)
			h->c[i].got += (unsigned)r;
		h->c[i].buf[h->c[i].got] = 0;
		if (!strstr(h->c[i].buf, "\r\n\r\n")) {
			if (r == 0 || (r < 0 && errno != EAGAIN)) {
				close(h->c[i].fd);
				h->c[i].fd = -1;
			}
			continue;
		}
		snprintf(h->last, sizeof(h->last), "%.*s",
			 (int)strcspn(h->c[i].buf, "\r\n"), h->c[i].buf);
		n = snprintf(resp, sizeof(resp),
			     "HTTP/1.0 %d %s\r\nContent-Length: 0\r\n\r\n",
			     h->status,
			     h->status == 200 ? "OK" : "Internal Server Error");
		(void)!send(h->c[i].fd, resp, (size_t)n, MSG_NOSIGNAL);
		close(h->c[i].fd);
		h->c[i].fd = -1;
		h->served++;
	}
}

#define HC_INTERVAL_MS 20u
#define HC_FALL	       3u
#define HC_RISE	       2u
#define HC_WAIT_NS     2000000000ull

/*
 * Tick the health checks until backend @port is @up (at most
 * HC_WAIT_NS), serving @lfd (TCP: accept and close) or @h (HTTP) in
 * between; backend @other_port (when not 0) must stay @other_up all
 * along. Returns the ns it took.
 */
static uint64_t wait_for(struct fx *f, uint16_t port, bool up, int lfd,
			 struct http_srv *h, uint16_t other_port, bool other_up)
{
	uint64_t t0 = dpflow_clock_mono_ns(), now = t0;

	for (;;) {
		now = dpflow_clock_mono_ns();
		l4lb_health_tick(f->lb, now);
		accept_all(lfd);
		if (h)
			http_serve(h);
		if (other_port)
			cr_assert_eq(is_up(f, other_port), other_up,
				     "backend :%u flipped", other_port);
		if (is_up(f, port) == up)
			return dpflow_clock_mono_ns() - t0;
		cr_assert_lt(now - t0, HC_WAIT_NS,
			     "backend :%u not %s after 2 s", port,
			     up ? "up" : "down");
		sleep_ms(1);
	}
}

/* Tick for @ms, serving, with backend @port @up all along. */
static void hold(struct fx *f, unsigned ms, uint16_t port, bool up, int lfd,
		 struct http_srv *h)
{
	uint64_t t0 = dpflow_clock_mono_ns();

	while (dpflow_clock_mono_ns() - t0 < (uint64_t)ms * 1000000u) {
		l4lb_health_tick(f->lb, dpflow_clock_mono_ns());
		accept_all(lfd);
		if (h)
			http_serve(h);
		cr_assert_eq(is_up(f, port), up, "backend :%u flipped", port);
		sleep_ms(1);
	}
}

Test(l4lb_app, health_tcp)
{
	const uint64_t iv = HC_INTERVAL_MS * 1000000ull;
	struct fx f;
	int lfd = listen_on(0);
	uint16_t lport = port_of(lfd), dead = closed_port();
	uint64_t t;

	fx_init(&f, 4096, 251);
	REQ_OK(&f,
	       "{\"cmd\":\"l4lb.service.add\",\"service\":{\"name\":\"hc\","
	       "\"vip\":\"192.0.2.30\",\"port\":80,\"mode\":\"nat\",\"snat\":"
	       "\"198.51.100.30\",\"health\":{\"type\":\"tcp\","
	       "\"interval_ms\":%u,\"timeout_ms\":300,\"fall\":%u,"
	       "\"rise\":%u},\"backends\":[{\"addr\":\"127.0.0.1\","
	       "\"port\":%u},{\"addr\":\"127.0.0.1\",\"port\":%u}]}}",
	       HC_INTERVAL_MS, HC_FALL, HC_RISE, lport, dead);
	cr_assert(is_up(&f, lport) && is_up(&f, dead), "backends start up");

	/* the closed port goes down after `fall` checks; the listener's
	 * backend stays up */
	t = wait_for(&f, dead, false, lfd, NULL, lport, true);
	cr_assert_geq(t, (HC_FALL - 1) * iv,
		      "down after %llu ns: fewer than %u checks",
		      (unsigned long long)t, HC_FALL);
	hold(&f, 5 * HC_INTERVAL_MS, lport, true, lfd, NULL);
	cr_assert(!is_up(&f, dead));
	{ /* down: no Maglev slots; up: all of them */
		json_t *s = services(&f), *hc = svc_of(s, "hc");

		cr_assert_eq(j_int(be_of(hc, "127.0.0.1", dead), "slots"), 0);
		cr_assert_eq(j_int(be_of(hc, "127.0.0.1", lport), "slots"),
			     251);
		json_decref(s);
	}

	/* the listener closes: down */
	close(lfd);
	t = wait_for(&f, lport, false, -1, NULL, dead, false);
	cr_assert_geq(t, (HC_FALL - 1) * iv);

	/* it listens again on the same port: up after `rise` checks */
	lfd = listen_on(lport);
	t = wait_for(&f, lport, true, lfd, NULL, dead, false);
	cr_assert_geq(t, (HC_RISE - 1) * iv,
		      "up after %llu ns: fewer than %u checks",
		      (unsigned long long)t, HC_RISE);
	hold(&f, 3 * HC_INTERVAL_MS, lport, true, lfd, NULL);
	close(lfd);
	fx_fini(&f);
}

Test(l4lb_app, health_http)
{
	const uint64_t iv = HC_INTERVAL_MS * 1000000ull;
	struct http_srv h;
	struct fx f;
	uint16_t port;
	uint64_t t;

	memset(&h, 0, sizeof(h));
	for (unsigned i = 0; i < 16; i++)
		h.c[i].fd = -1;
	h.lfd = listen_on(0);
	h.status = 200;
	port = port_of(h.lfd);
	fx_init(&f, 4096, 251);
	REQ_OK(&f,
	       "{\"cmd\":\"l4lb.service.add\",\"service\":{\"name\":\"hc\","
	       "\"vip\":\"192.0.2.31\",\"mode\":\"ipip\",\"encap_src\":"
	       "\"198.51.100.31\",\"health\":{\"type\":\"http\",\"path\":"
	       "\"/healthz\",\"interval_ms\":%u,\"timeout_ms\":300,"
	       "\"fall\":%u,\"rise\":%u},\"backends\":[{\"addr\":"
	       "\"127.0.0.1\",\"port\":%u}]}}",
	       HC_INTERVAL_MS, HC_FALL, HC_RISE, port);

	/* 200: up, checked with GET /healthz */
	hold(&f, 6 * HC_INTERVAL_MS, port, true, -1, &h);
	cr_assert_geq(h.served, 2, "%u checks served", h.served);
	cr_assert_str_eq(h.last, "GET /healthz HTTP/1.0");

	/* 500: down after `fall` checks */
	h.status = 500;
	t = wait_for(&f, port, false, -1, &h, 0, false);
	cr_assert_geq(t, (HC_FALL - 1) * iv);
	hold(&f, 3 * HC_INTERVAL_MS, port, false, -1, &h);

	/* 200 again: up after `rise` checks */
	h.status = 200;
	t = wait_for(&f, port, true, -1, &h, 0, false);
	cr_assert_geq(t, (HC_RISE - 1) * iv);
	hold(&f, 3 * HC_INTERVAL_MS, port, true, -1, &h);
	close(h.lfd);
	for (unsigned i = 0; i < 16; i++)
		if (h.c[i].fd >= 0)
			close(h.c[i].fd);
	fx_fini(&f);
}

/* ------------------------------------------------------------ flood */

#define EST_FLOWS  100u
#define FLOOD_SYNS 100000u
#define FLOOD_TAG  0x80000000u

static uint64_t rng64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/*
 * 100 established flows, then 100k SYNs from random sources to the VIP
 * on a 4096-entry table with, every 1000 SYNs, an ACK of each
 * established flow. Returns the flood SYNs forwarded.
 */
static uint64_t syn_flood(uint8_t mode, bool replies)
{
	static uint32_t be0[EST_FLOWS], be[EST_FLOWS];
	static uint16_t sp0[EST_FLOWS], sp[EST_FLOWS];
	struct l4lb_conn_stats cs;
	struct l4lb_conn_table *ct;
	uint8_t fr[FRAME_MAX];
	uint64_t seed = 0x5eed0000u + mode, flood_fwd = 0;
	uint32_t cap, live, est, now_ms;
	struct fx f;
	json_t *svcs, *web;

	fx_init(&f, 4096, 0);
	add_web(&f, mode, 3);
	ct = l4lb_conns(f.lb);
	cap = l4lb_conn_capacity(ct);
	cr_assert_eq(cap, 4096);

	send_flows(&f, mode, 0, EST_FLOWS, TCP_SYN, be0, sp0);
	if (replies)
		cr_assert_eq(
		    send_replies(&f, 0, EST_FLOWS, TCP_SYN | TCP_ACK, be0, sp0),
		    EST_FLOWS);
	send_flows(&f, mode, 0, EST_FLOWS, TCP_ACK, be, sp);
	for (uint32_t i = 0; i < EST_FLOWS; i++)
		cr_assert_eq(be[i], be0[i]);
	if (replies)
		cr_assert_eq(send_replies(&f, 0, EST_FLOWS, TCP_ACK, be0, sp0),
			     EST_FLOWS);

	for (uint32_t n = 0; n < FLOOD_SYNS; n++) {
		uint64_t r = rng64(&seed);

		/* sources in 100.64.0.0/10, random ports */
		push(&f, fr,
		     tcp4_frame(fr, 0x64400000u | ((uint32_t)r & 0x3fffffu),
				(uint16_t)(1024 + (r >> 32) % 64000), VIP,
				VPORT, TCP_SYN, FLOOD_TAG | n));
		if ((n + 1) % 1000)
			continue;
		flush(&f);
		for (unsigned k = 0; k < f.n_outs; k++)
			flood_fwd += (f.outs[k].seq & FLOOD_TAG) != 0;
		outs_reset(&f);
		/* the established flows meanwhile: same backend (and,
		 * NAT, same SNAT port) */
		send_flows(&f, mode, 0, EST_FLOWS, TCP_ACK, be, sp);
		for (uint32_t i = 0; i < EST_FLOWS; i++) {
			cr_assert_eq(be[i], be0[i],
				     "after %u SYNs flow %u went to %08x "
				     "instead of %08x",
				     n + 1, i, be[i], be0[i]);
			if (mode == L4LB_MODE_NAT)
				cr_assert_eq(sp[i], sp0[i],
					     "after %u SYNs flow %u has SNAT "
					     "port %u instead of %u",
					     n + 1, i, sp[i], sp0[i]);
		}
		outs_reset(&f);
	}
	fx_offline(&f);

	/* memory bounded: the table kept its size */
	now_ms = (uint32_t)(dpflow_clock_ns() / 1000000u);
	cr_assert_eq(l4lb_conn_capacity(ct), cap);
	live = l4lb_conn_count(ct, now_ms, &est);
	cr_assert_leq(live, cap);
	cr_assert_geq(est, EST_FLOWS * (replies ? 2u : 1u),
		      "%u established entries left", est);
	l4lb_conn_stats_get(ct, &cs);
	cr_assert_gt(cs.refused + cs.replaced, 0);
	cr_log_info(
	    "flood %s: forwarded %llu of %u SYNs; conns live %u "
	    "(established %u) of %u, created %llu, replaced %llu, "
	    "refused %llu, expired %llu",
	    mode == L4LB_MODE_NAT ? "nat" : "ipip",
	    (unsigned long long)flood_fwd, FLOOD_SYNS, live, est, cap,
	    (unsigned long long)cs.created, (unsigned long long)cs.replaced,
	    (unsigned long long)cs.refused, (unsigned long long)cs.expired);

	/* every flood SYN was a new flow; the established ones were never
	 * scheduled again (new_flows would count them) */
	svcs = services(&f);
	web = svc_of(svcs, "web");
	cr_assert_eq(j_int(web, "new_flows"), EST_FLOWS + FLOOD_SYNS,
		     "new flows %lld: established flows were rescheduled",
		     (long long)j_int(web, "new_flows"));
	json_decref(svcs);
	fx_fini(&f);
	return flood_fwd;
}

Test(l4lb_app, syn_flood_ipip)
{
	uint64_t fwd = syn_flood(L4LB_MODE_IPIP, false);

	/* DSR: a flow not tracked is forwarded by Maglev */
	cr_assert_eq(fwd, FLOOD_SYNS, "%llu of %u SYNs forwarded",
		     (unsigned long long)fwd, FLOOD_SYNS);
}

/* NAT flows whose backend has answered since the client's ACK (both
 * entries established) */
Test(l4lb_app, syn_flood_nat)
{
	syn_flood(L4LB_MODE_NAT, true);
}

/* ------------------------------------------------------------ icmp */

/* An ICMP frag needed from router @rtr to the VIP about the packet
 * VIP:80 -> client @flow (what a DSR backend sent), quoting its IP
 * header and 8 bytes of TCP. */
static unsigned icmp_frag_needed(uint8_t *f, uint32_t rtr, uint32_t flow)
{
	uint8_t *ip = f + 14, *icmp = ip + 20, *q = icmp + 8, *qt = q + 20;

	memcpy(f, LB_MAC, 6);
	memcpy(f + 6, CLIENT_MAC, 6);
	st16(f + 12, 0x0800);
	ipv4_hdr(ip, rtr, VIP, 1, 8 + 28);
	/* the quoted packet: a 1500-byte reply of the backend */
	ipv4_hdr(q, VIP, client_addr(flow), 6, 1480);
	memset(qt, 0, 8);
	st16(qt, VPORT);
	st16(qt + 2, client_port(flow));
	st32(qt + 4, 0xabcd0000u + flow);
	memset(icmp, 0, 8);
	icmp[0] = 3;
	icmp[1] = 4;
	st16(icmp + 6, 1400);
	st16(icmp + 2, (uint16_t)~csum_fold(csum_add(0, icmp, 36)));
	return 14 + 20 + 36;
}

Test(l4lb_app, icmp_to_flow_backend)
{
	static uint32_t be0[FLOWS], be[FLOWS];
	static uint16_t sp[FLOWS];
	uint8_t fr[FRAME_MAX], sent[FLOWS][FRAME_MAX];
	unsigned per[16] = {0};
	uint64_t drops[L4LB_DROP__COUNT];
	struct fx f;
	json_t *svcs;

	fx_init(&f, 65536, 0);
	add_web(&f, L4LB_MODE_IPIP, 3);
	send_flows(&f, L4LB_MODE_IPIP, 0, 100, TCP_SYN, be0, sp);
	send_flows(&f, L4LB_MODE_IPIP, 0, 100, TCP_ACK, be, sp);
	for (uint32_t i = 0; i < 100; i++)
		per[be0[i] - BE_NET]++;
	cr_assert(per[1] && per[2] && per[3]);

	/* drain 10.0.0.2: errors about its flows still go to it */
	REQ_OK(&f, "{\"cmd\":\"l4lb.backend.set\",\"service\":\"web\","
		   "\"addr\":\"10.0.0.2\",\"port\":8080,\"weight\":0}");
	outs_reset(&f);
	for (uint32_t i = 0; i < 100; i++) {
		unsigned n = icmp_frag_needed(sent[i], 0xcb007101u, i);

		push(&f, sent[i], n);
	}
	/* and about flows never seen: dropped */
	for (uint32_t i = 200; i < 210; i++)
		push(&f, fr, icmp_frag_needed(fr, 0xcb007101u, i));
	flush(&f);
	cr_assert_eq(f.n_outs, 100, "%u ICMP errors forwarded", f.n_outs);
	for (unsigned k = 0; k < f.n_outs; k++) {
		const struct outp *o = &f.outs[k];
		/* quoted client port -> flow */
		uint32_t i = ld16(o->ip + 20 + 20 + 8 + 20 + 2) - 20000u;

		cr_assert(o->csum_ok);
		cr_assert_eq(o->proto, 4);
		cr_assert_eq(o->inner, 1);
		cr_assert_eq(o->src, ENCAP);
		cr_assert(i < 100);
		cr_assert_eq(o->dst, be0[i],
			     "ICMP about flow %u to %08x, its backend is %08x",
			     i, o->dst, be0[i]);
		/* the whole ICMP packet, unchanged, inside */
		cr_assert_eq(o->len, 14 + 20 + 20 + 36);
		cr_assert_arr_eq(o->ip + 20, sent[i] + 14, 56);
	}
	l4lb_drops(f.lb, drops);
	cr_assert_eq(drops[L4LB_DROP_ICMP_NO_CONN], 10);
	svcs = services(&f);
	cr_assert_eq(
	    j_int(json_object_get(svc_of(svcs, "web"), "icmp"), "pkts"), 100);
	json_decref(svcs);
	fx_fini(&f);
}

/* ------------------------------------------------ regressions */

/*
 * Bugs found while writing the tests above, fixed in the app; each test
 * failed before its fix. The comments describe the bug as it was.
 */

/*
 * NAT: after the client's ACK the flow's forward entry is established
 * but its reply entry stays half-open until the backend sends again (a
 * client packet never refreshes it). A SYN flood replaces that half-open
 * entry (LRU), which frees its twin, the established forward entry; the
 * flow's next packet is scheduled anew by Maglev, so after a backend
 * change (here one added) a part of the established flows move.
 */
Test(l4lb_app, nat_flood_keeps_established)
{
	static uint32_t be0[EST_FLOWS], be[EST_FLOWS];
	static uint16_t sp0[EST_FLOWS], sp[EST_FLOWS];
	uint8_t fr[FRAME_MAX];
	uint64_t seed = 0x5eed1234u;
	unsigned moved = 0;
	struct fx f;

	fx_init(&f, 4096, 0);
	add_web(&f, L4LB_MODE_NAT, 3);
	send_flows(&f, L4LB_MODE_NAT, 0, EST_FLOWS, TCP_SYN, be0, sp0);
	cr_assert_eq(
	    send_replies(&f, 0, EST_FLOWS, TCP_SYN | TCP_ACK, be0, sp0),
	    EST_FLOWS);
	send_flows(&f, L4LB_MODE_NAT, 0, EST_FLOWS, TCP_ACK, be, sp);
	f.keep = false;
	for (uint32_t n = 0; n < 20000; n++) {
		uint64_t r = rng64(&seed);

		push(&f, fr,
		     tcp4_frame(fr, 0x64400000u | ((uint32_t)r & 0x3fffffu),
				(uint16_t)(1024 + (r >> 32) % 64000), VIP,
				VPORT, TCP_SYN, FLOOD_TAG | n));
	}
	flush(&f);
	f.keep = true;
	REQ_OK(&f, "{\"cmd\":\"l4lb.backend.add\",\"service\":\"web\","
		   "\"backend\":{\"addr\":\"10.0.0.4\",\"port\":8080}}");
	send_flows(&f, L4LB_MODE_NAT, 0, EST_FLOWS, TCP_ACK, be, sp);
	for (uint32_t i = 0; i < EST_FLOWS; i++)
		moved += be[i] != be0[i] || sp[i] != sp0[i];
	cr_assert_eq(moved, 0,
		     "%u of %u established NAT flows moved (new flows %lld, "
		     "expected %u)",
		     moved, EST_FLOWS, (long long)svc_new_flows(&f),
		     EST_FLOWS + 20000);
	fx_fini(&f);
}

#define PRESS_EST  20u
#define PRESS_SYNS 30u

/*
 * NAT under table pressure (conn_table 64: 8 buckets of 8 ways a
 * family), 20 established flows, then SYNs of 30 new flows. A SYN's
 * reply entry is inserted after its forward entry, in buckets that may
 * be the same; when they held no free way, the reply entry replaced the
 * least recently used half-open entry, the flow's own forward entry,
 * and the binding gave up without trying the other candidate ports: 2
 * SYNs were dropped as snat_ports_exhausted. Each SYN must be forwarded
 * or, when its buckets hold only established flows, dropped as
 * conn_table_full; the established flows keep their backend and port.
 */
Test(l4lb_app, nat_table_pressure_binds_ports)
{
	static uint32_t be0[PRESS_EST], be[PRESS_EST];
	static uint16_t sp0[PRESS_EST], sp[PRESS_EST];
	uint8_t fr[FRAME_MAX];
	uint64_t full;
	struct fx f;

	fx_init(&f, 64, 0);
	add_web(&f, L4LB_MODE_NAT, 3);
	send_flows(&f, L4LB_MODE_NAT, 0, PRESS_EST, TCP_SYN, be0, sp0);
	cr_assert_eq(
	    send_replies(&f, 0, PRESS_EST, TCP_SYN | TCP_ACK, be0, sp0),
	    PRESS_EST);
	send_flows(&f, L4LB_MODE_NAT, 0, PRESS_EST, TCP_ACK, be, sp);
	outs_reset(&f);
	for (uint32_t i = PRESS_EST; i < PRESS_EST + PRESS_SYNS; i++)
		push(&f, fr,
		     tcp4_frame(fr, client_addr(i), client_port(i), VIP, VPORT,
				TCP_SYN, i));
	flush(&f);
	full = drop_count(&f, L4LB_DROP_CONN_FULL);
	cr_assert_eq(
	    drop_count(&f, L4LB_DROP_SNAT_EXHAUSTED), 0,
	    "%llu SYNs dropped as snat_ports_exhausted",
	    (unsigned long long)drop_count(&f, L4LB_DROP_SNAT_EXHAUSTED));
	cr_assert_eq(f.n_outs + full, PRESS_SYNS,
		     "%u SYNs forwarded, %llu conn_table_full, of %u", f.n_outs,
		     (unsigned long long)full, PRESS_SYNS);
	for (unsigned k = 0; k < f.n_outs; k++) {
		cr_assert(f.outs[k].seq >= PRESS_EST &&
			  f.outs[k].seq < PRESS_EST + PRESS_SYNS);
		cr_assert(f.outs[k].csum_ok);
		cr_assert_eq(f.outs[k].src, SNAT);
		cr_assert_geq(f.outs[k].sport, L4LB_SNAT_PORT_LO);
	}
	send_flows(&f, L4LB_MODE_NAT, 0, PRESS_EST, TCP_ACK, be, sp);
	for (uint32_t i = 0; i < PRESS_EST; i++)
		cr_assert(be[i] == be0[i] && sp[i] == sp0[i],
			  "established flow %u moved", i);
	fx_fini(&f);
}

/*
 * Backend ids are reused: a backend removed and another added in the
 * next request gets the removed one's id. Flows of the removed backend
 * that sent nothing in between still point at that id, so they are not
 * rescheduled: they go to the new backend with their old SNAT binding,
 * whose reply entry names the removed backend's address, and the new
 * backend's replies are dropped (reply_without_connection) for as long
 * as the client keeps the flow alive.
 */
Test(l4lb_app, backend_id_reuse_reschedules)
{
	static uint32_t be0[FLOWS], be[FLOWS];
	static uint16_t sp0[FLOWS], sp[FLOWS];
	unsigned old = 0, back;
	json_int_t moved;
	struct fx f;

	fx_init(&f, 65536, 0);
	add_web(&f, L4LB_MODE_NAT, 3);
	send_flows(&f, L4LB_MODE_NAT, 0, FLOWS, TCP_SYN, be0, sp0);
	send_replies(&f, 0, FLOWS, TCP_SYN | TCP_ACK, be0, sp0);
	send_flows(&f, L4LB_MODE_NAT, 0, FLOWS, TCP_ACK, be, sp);
	send_replies(&f, 0, FLOWS, TCP_ACK, be0, sp0);
	for (uint32_t i = 0; i < FLOWS; i++)
		old += be0[i] == BE_NET + 1;
	REQ_OK(&f, "{\"cmd\":\"l4lb.backend.rm\",\"service\":\"web\","
		   "\"addr\":\"10.0.0.1\",\"port\":8080}");
	REQ_OK(&f, "{\"cmd\":\"l4lb.backend.add\",\"service\":\"web\","
		   "\"backend\":{\"addr\":\"10.0.0.9\",\"port\":8080}}");
	/* every flow's next packet, then its backend's reply */
	send_flows(&f, L4LB_MODE_NAT, 0, FLOWS, TCP_ACK, be, sp);
	back = send_replies(&f, 0, FLOWS, TCP_ACK, be, sp);
	cr_assert_eq(back, FLOWS,
		     "%u of %u replies translated (%u flows were on the "
		     "removed backend; new flows %lld, expected %u)",
		     back, FLOWS, old, (long long)svc_new_flows(&f),
		     FLOWS + old);
	moved = svc_count(&f, "rescheduled");
	cr_assert_eq(moved, old,
		     "rescheduled %lld, %u flows were on the removed backend",
		     (long long)moved, old);
	fx_fini(&f);
}

/*
 * A NAT service's SNAT address may not be another service's VIP (its
 * replies would be taken for the other service's traffic): refused when
 * the NAT service comes second, accepted when the VIP does.
 */
Test(l4lb_app, vip_on_snat_address_refused)
{
	struct fx f;
	json_t *r;

	fx_init(&f, 4096, 251);
	add_web(&f, L4LB_MODE_NAT, 1);
	r = req(&f, "{\"cmd\":\"l4lb.service.add\",\"service\":{\"name\":"
		    "\"other\",\"vip\":\"198.51.100.1\",\"mode\":\"ipip\","
		    "\"encap_src\":\"198.51.100.2\",\"backends\":[{\"addr\":"
		    "\"10.0.5.1\"}]}}");
	cr_assert(!j_ok(r), "a VIP on service web's SNAT address was accepted");
	json_decref(r);
	fx_fini(&f);
}

/*
 * Health state is kept per backend id and reset only when a tick sees
 * the id unused: a backend removed and another added before the next
 * tick inherits the removed one's failure count (and its check in
 * flight), so a new backend that fails goes down after one check
 * instead of `fall`.
 */
Test(l4lb_app, health_state_reset_on_id_reuse)
{
	const uint64_t iv = HC_INTERVAL_MS * 1000000ull;
	uint16_t dead1 = closed_port(), dead2 = closed_port();
	struct fx f;
	uint64_t t;

	fx_init(&f, 4096, 251);
	REQ_OK(&f,
	       "{\"cmd\":\"l4lb.service.add\",\"service\":{\"name\":\"hc\","
	       "\"vip\":\"192.0.2.30\",\"port\":80,\"mode\":\"nat\",\"snat\":"
	       "\"198.51.100.30\",\"health\":{\"type\":\"tcp\","
	       "\"interval_ms\":%u,\"timeout_ms\":300,\"fall\":%u,"
	       "\"rise\":%u},\"backends\":[{\"addr\":\"127.0.0.1\","
	       "\"port\":%u}]}}",
	       HC_INTERVAL_MS, HC_FALL, HC_RISE, dead1);
	wait_for(&f, dead1, false, -1, NULL, 0, false);
	/* more failures in a row */
	hold(&f, 3 * HC_INTERVAL_MS, dead1, false, -1, NULL);
	REQ_OK(&f,
	       "{\"cmd\":\"l4lb.backend.rm\",\"service\":\"hc\","
	       "\"addr\":\"127.0.0.1\",\"port\":%u}",
	       dead1);
	REQ_OK(&f,
	       "{\"cmd\":\"l4lb.backend.add\",\"service\":\"hc\","
	       "\"backend\":{\"addr\":\"127.0.0.1\",\"port\":%u}}",
	       dead2);
	cr_assert(is_up(&f, dead2));
	t = wait_for(&f, dead2, false, -1, NULL, 0, false);
	cr_assert_geq(t, (HC_FALL - 1) * iv,
		      "a new backend went down after %llu ns: fewer than %u "
		      "checks",
		      (unsigned long long)t, HC_FALL);
	fx_fini(&f);
}

/* What @print (l4lb_print, l4lb_describe) writes of @f's balancer,
 * malloc'ed. */
static char *printed(struct fx *f, void (*print)(const struct l4lb *, FILE *))
{
	char *text = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&text, &len);

	cr_assert(m);
	print(f->lb, m);
	cr_assert_eq(fclose(m), 0);
	return text;
}

/* Line(s) of l4lb_print() (dpflow run's exit report), malloc'ed. */
static char *exit_report(struct fx *f)
{
	return printed(f, l4lb_print);
}

/*
 * A backend that takes a removed backend's id starts at zero counters,
 * in the same service or another, and so does a service that takes a
 * removed service's id (they used to inherit what the id's last owner
 * had counted: l4lb.services, the exit report and the metrics showed a
 * new backend with the old one's packets).
 */
Test(l4lb_app, reused_ids_start_at_zero_counters)
{
	static uint32_t be[FLOWS];
	static uint16_t sp[FLOWS];
	json_t *s, *b;
	json_int_t id1, id2;
	char *rep;
	struct fx f;

	fx_init(&f, 65536, 0);
	add_web(&f, L4LB_MODE_NAT, 3);
	send_flows(&f, L4LB_MODE_NAT, 0, FLOWS, TCP_SYN, be, sp);
	s = services(&f);
	b = be_of(svc_of(s, "web"), "10.0.0.1", BE_PORT);
	cr_assert_gt(j_int(json_object_get(b, "fwd"), "pkts"), 0);
	id1 = j_int(b, "id");
	b = be_of(svc_of(s, "web"), "10.0.0.2", BE_PORT);
	cr_assert_gt(j_int(json_object_get(b, "fwd"), "pkts"), 0);
	id2 = j_int(b, "id");
	json_decref(s);

	/* the same service */
	REQ_OK(&f, "{\"cmd\":\"l4lb.backend.rm\",\"service\":\"web\","
		   "\"addr\":\"10.0.0.1\",\"port\":8080}");
	REQ_OK(&f, "{\"cmd\":\"l4lb.backend.add\",\"service\":\"web\","
		   "\"backend\":{\"addr\":\"10.0.0.9\",\"port\":8080,"
		   "\"weight\":0}}");
	/* another service */
	REQ_OK(&f, "{\"cmd\":\"l4lb.backend.rm\",\"service\":\"web\","
		   "\"addr\":\"10.0.0.2\",\"port\":8080}");
	REQ_OK(&f, "{\"cmd\":\"l4lb.service.add\",\"service\":{\"name\":"
		   "\"other\",\"vip\":\"192.0.2.20\",\"port\":80,\"mode\":"
		   "\"nat\",\"snat\":\"198.51.100.20\",\"backends\":[{\"addr\":"
		   "\"10.0.0.8\",\"port\":8080}]}}");
	s = services(&f);
	b = be_of(svc_of(s, "web"), "10.0.0.9", BE_PORT);
	cr_assert(b);
	cr_assert_eq(j_int(b, "id"), id1, "the id is reused (test premise)");
	cr_expect_eq(j_int(json_object_get(b, "fwd"), "pkts"), 0,
		     "a new backend on a reused id has the old one's packets");
	cr_expect_eq(j_int(json_object_get(b, "fwd"), "bytes"), 0);
	cr_expect_eq(j_int(b, "new_flows"), 0);
	b = be_of(svc_of(s, "other"), "10.0.0.8", BE_PORT);
	cr_assert(b);
	cr_assert_eq(j_int(b, "id"), id2, "the id is reused (test premise)");
	cr_expect_eq(j_int(json_object_get(b, "fwd"), "pkts"), 0,
		     "a backend of another service on a reused id has the "
		     "old one's packets");
	cr_expect_eq(j_int(b, "new_flows"), 0);
	json_decref(s);
	rep = exit_report(&f);
	cr_expect(strstr(rep, "  backend 10.0.0.9:8080 weight 0 up slots 0: "
			      "fwd 0 pkts, new flows 0\n"),
		  "%s", rep);
	cr_expect(strstr(rep, "  backend 10.0.0.8:8080 weight 1 up slots "),
		  "%s", rep);
	cr_expect(strstr(rep, ": fwd 0 pkts, new flows 0\n"), "%s", rep);
	free(rep);

	/* a service on a removed service's id */
	REQ_OK(&f, "{\"cmd\":\"l4lb.service.rm\",\"name\":\"web\"}");
	REQ_OK(&f, "{\"cmd\":\"l4lb.service.add\",\"service\":{\"name\":"
		   "\"web2\",\"vip\":\"192.0.2.10\",\"port\":80,\"mode\":"
		   "\"nat\",\"snat\":\"198.51.100.1\",\"backends\":[{\"addr\":"
		   "\"10.0.0.1\",\"port\":8080}]}}");
	cr_assert_eq(l4lb_service_find(f.lb, "web2"), 0,
		     "the service id is reused (test premise)");
	s = services(&f);
	cr_expect_eq(j_int(json_object_get(svc_of(s, "web2"), "fwd"), "pkts"),
		     0,
		     "a new service on a reused id has the old one's "
		     "packets");
	cr_expect_eq(j_int(svc_of(s, "web2"), "new_flows"), 0);
	json_decref(s);
	fx_fini(&f);
}

static char hc_log[512];

static void log_keep(enum dpflow_log_level level, const char *module,
		     const char *msg, void *arg)
{
	(void)level;
	(void)arg;
	if (!strcmp(module, "l4lb"))
		snprintf(hc_log, sizeof(hc_log), "%s", msg);
}

/*
 * IPv6 endpoints print as [ADDR]:PORT everywhere: the exit report (VIP
 * and backends), dpflow validate's listing, the "endpoint" members of
 * l4lb.services (which dpflowctl prints), the metrics labels, error
 * replies and the health checks' log lines.
 */
Test(l4lb_app, ipv6_endpoints_bracketed)
{
	uint16_t dead = closed_port();
	char *rep, *text = NULL;
	size_t len = 0;
	FILE *m;
	json_t *r;
	struct fx f;
	uint64_t t0;

	fx_init(&f, 4096, 251);
	REQ_OK(&f,
	       "{\"cmd\":\"l4lb.service.add\",\"service\":{\"name\":\"v6\","
	       "\"vip\":\"2001:db8::10\",\"port\":80,\"mode\":\"nat\","
	       "\"snat\":\"2001:db8::1\",\"health\":{\"type\":\"tcp\","
	       "\"interval_ms\":%u,\"timeout_ms\":300,\"fall\":1,\"rise\":1},"
	       "\"backends\":[{\"addr\":\"::1\",\"port\":%u}]}}",
	       HC_INTERVAL_MS, dead);
	rep = exit_report(&f);
	cr_expect(strstr(rep, "l4lb service v6 tcp [2001:db8::10]:80 nat:"),
		  "%s", rep);
	{
		char want[64];

		snprintf(want, sizeof(want), "  backend [::1]:%u weight 1 ",
			 dead);
		cr_expect(strstr(rep, want), "no '%s' in\n%s", want, rep);
	}
	free(rep);
	rep = printed(&f, l4lb_describe); /* dpflow validate's listing */
	{
		char want[160];

		snprintf(want, sizeof(want),
			 "apps:\n  l4lb:\n    service v6: tcp "
			 "[2001:db8::10]:80, mode nat, snat 2001:db8::1\n"
			 "      backend [::1]:%u weight 1\n",
			 dead);
		cr_expect_str_eq(rep, want);
	}
	free(rep);
	{
		json_t *svcs = services(&f), *v6 = svc_of(svcs, "v6");
		char want[64];

		cr_assert(v6);
		cr_expect_str_eq(
		    json_string_value(json_object_get(v6, "endpoint")),
		    "[2001:db8::10]:80");
		snprintf(want, sizeof(want), "[::1]:%u", dead);
		cr_expect_str_eq(json_string_value(json_object_get(
				     be_of(v6, "::1", dead), "endpoint")),
				 want);
		json_decref(svcs);
	}

	m = open_memstream(&text, &len);
	cr_assert(m);
	l4lb_metrics_render(f.lb, m);
	cr_assert_eq(fclose(m), 0);
	{
		char want[96];

		snprintf(want, sizeof(want),
			 "dpflow_l4lb_backend_up{service=\"v6\",backend=\"[::1]"
			 ":%u\"} 1\n",
			 dead);
		cr_expect(strstr(text, want), "no '%s' in\n%s", want, text);
	}
	free(text);

	r = req(&f, "{\"cmd\":\"l4lb.backend.rm\",\"service\":\"v6\","
		    "\"addr\":\"2001:db8::99\",\"port\":8080}");
	cr_expect(strstr(j_err(r), "no backend [2001:db8::99]:8080 in that "
				   "service"),
		  "error: %s", j_err(r));
	json_decref(r);

	/* the closed port fails its check (refused, or no IPv6 loopback):
	 * the log line names the backend */
	hc_log[0] = 0;
	dpflow_log_set_sink(log_keep, NULL);
	t0 = dpflow_clock_mono_ns();
	while (!hc_log[0] && dpflow_clock_mono_ns() - t0 < HC_WAIT_NS) {
		l4lb_health_tick(f.lb, dpflow_clock_mono_ns());
		sleep_ms(1);
	}
	dpflow_log_set_sink(NULL, NULL);
	{
		char want[96];

		snprintf(want, sizeof(want),
			 "service v6: backend [::1]:%u down", dead);
		cr_expect_str_eq(hc_log, want);
	}
	fx_fini(&f);
}
