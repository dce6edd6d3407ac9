/*
 * `dpflow bench l4lb` (variants app-nat, app-ipip): the L4 load balancer
 * app (apps/l4lb) on one core, in memory. One service, --backends
 * backends of weight 1, a Maglev table of --maglev slots, --flows client
 * flows of 64-byte TCP ACK frames to the VIP (bench_l4lb_pipe.h's
 * flows). Each burst is taken from the pool and its frames written as
 * they arrive (what a port's receive does), run through the app's root
 * pipe and handler, sent to an in-memory ring port, and the ring is
 * drained and its packets freed: all of it is in the figure.
 *
 * The first pass creates every connection and is checked without the
 * app's code: each output frame must carry a valid IPv4 header checksum
 * and TCP (NAT) checksum, a backend address of the configured set, the
 * SNAT address and a port >= 1024 (NAT) or an outer IPv4 header to the
 * backend around the unchanged frame (IP-in-IP); each flow must keep its
 * backend on a second pass; every backend must get flows. The timed passes
 * are the steady state (connection hits).
 *
 * The peer (with DPDK, unless --no-peer): the least any balancer does per
 * packet, written with DPDK on the same frames in mbufs (bench_dpdk.h's
 * exact pipe): rte_net_get_ptype(), the 5-tuple read, one
 * rte_hash_lookup_bulk_data() in a table of the same --flows flows, a
 * per-flow packet and byte counter. No rewrite, no state, no buffers
 * taken or given back. Its trials alternate with the app's.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/clock.h"
#include "dpflow/dpflow.h"

#include "bench.h"
#include "bench_common.h"
#ifdef DPFLOW_HAVE_DPDK
#include "bench_dpdk.h"
#endif
#include "bench_l4lb.h"
#include "bench_l4lb_app.h"
#include "l4lb/l4lb.h"

struct app_bench {
	struct l4lb_params p;
	uint8_t mode;
	struct dpflow_ctx *ctx;
	struct dpflow_pool *pool;
	struct dpflow_port *out;
	struct l4lb *lb;
	uint32_t n_pkts;
	uint8_t (*frame)[64];
	uint16_t *len;
};

static const uint8_t vip[4] = {192, 0, 2, 10};
static const uint8_t snat[4] = {198, 51, 100, 1};

static uint32_t backend_addr(uint32_t b)
{
	return L4LB_BACKEND_NET + b + 1;
}

static int setup(struct app_bench *a)
{
	struct dpflow_ctx_params cp = {.pool_slots = 8192, .data_room = 256};
	struct l4lb_cfg cfg = {0};
	struct l4lb_service_cfg s = {0};
	struct dpflow_error err = {0};
	int svc;

	a->ctx = dpflow_ctx_create(&cp, &err);
	if (!a->ctx || dpflow_ctx_port_add(a->ctx, "in", "null:", &err) < 0 ||
	    dpflow_ctx_port_add(a->ctx, "out",
				"ring:l4lb_app_out,size=4096,loop", &err) < 0)
		goto fail;
	a->pool = dpflow_ctx_pool(a->ctx);
	a->out = dpflow_ctx_port(a->ctx, 1);
	cfg.client_port = 0;
	cfg.backend_port = 1;
	cfg.maglev_size = a->p.maglev;
	/* NAT keeps two entries a flow: the table half full, where few
	 * flows find both their buckets full */
	cfg.conn_entries = a->p.flows * (a->mode == L4LB_MODE_NAT ? 4u : 2u);
	a->lb = l4lb_create(a->ctx, &cfg, &err);
	if (!a->lb)
		goto fail;
	snprintf(s.name, sizeof(s.name), "bench");
	memcpy(s.vip.b, vip, 4);
	s.proto = 6;
	s.port = L4LB_VIP_PORT;
	s.mode = a->mode;
	memcpy(s.snat.b, snat, 4);
	memcpy(s.encap_src.b, snat, 4);
	svc = l4lb_service_add(a->lb, &s, &err);
	if (svc < 0)
		goto fail;
	for (uint32_t b = 0; b < a->p.backends; b++) {
		struct l4lb_backend_cfg bc = {.port = 8080, .weight = 1};
		uint32_t addr = htonl(backend_addr(b));

		memcpy(bc.addr.b, &addr, 4);
		if (l4lb_backend_add(a->lb, svc, &bc, &err) < 0)
			goto fail;
	}
	if (l4lb_commit(a->lb, &err))
		goto fail;
	a->frame = malloc((size_t)a->n_pkts * sizeof(*a->frame));
	a->len = malloc((size_t)a->n_pkts * sizeof(*a->len));
	if (!a->frame || !a->len)
		goto oom;
	for (uint32_t i = 0; i < a->n_pkts; i++) {
		struct bench_flow f;

		l4lb_flow(&a->p, i % a->p.flows, &f);
		a->len[i] = (uint16_t)l4lb_frame(&f, a->frame[i]);
	}
	return 0;
oom:
	dpflow_error_set(&err, ENOMEM, NULL, "out of memory");
fail:
	fprintf(stderr, "bench l4lb app: %s\n", err.msg);
	return -1;
}

static void teardown(struct app_bench *a)
{
	l4lb_destroy(a->lb);
	dpflow_ctx_destroy(a->ctx);
	free(a->frame);
	free(a->len);
}

/*
 * Frames @lo..@hi-1 through the app, a burst at a time; each burst's
 * output is received from the ring and handed to @seen (or freed).
 * Returns the frames run.
 */
typedef int (*seen_fn)(struct app_bench *a, uint32_t first, const uint32_t *idx,
		       uint16_t n);

static uint64_t pass(struct app_bench *a, uint32_t lo, uint32_t hi,
		     seen_fn seen, int *bad)
{
	const uint32_t burst = a->p.burst;
	uint32_t idx[L4LB_BURST_MAX], i;

	for (i = lo; i + burst <= hi; i += burst) {
		uint16_t got;

		if (dpflow_pool_alloc_bulk(a->pool, idx, burst))
			break;
		for (uint32_t k = 0; k < burst; k++) {
			struct dpflow_pkt_meta *m =
			    dpflow_pool_meta(a->pool, idx[k]);

			memcpy(dpflow_pkt_data(a->pool, idx[k]),
			       a->frame[i + k], 64);
			m->data_len = a->len[i + k];
		}
		dpflow_ctx_process_burst(a->ctx, 0, idx, (uint16_t)burst);
		dpflow_ctx_quiescent(a->ctx);
		got = dpflow_port_rx_burst(a->out, 0, idx, (uint16_t)burst);
		if (seen && (got != burst || seen(a, i, idx, got)))
			(*bad)++;
		dpflow_pool_free_bulk(a->pool, idx, got);
	}
	return i - lo;
}

/* backend of each flow from the first pass; UINT32_MAX: none yet */
static uint32_t *flow_backend;
static uint32_t *backend_flows;

/* Check one output frame of flow @flow: its backend, or -1. */
static int64_t check_frame(struct app_bench *a, uint32_t frame_i,
			   const uint8_t *f, uint16_t len)
{
	const uint8_t *ip = f + 14, *in = a->frame[frame_i];
	uint32_t dst;

	if (l4lb_csum_fold(l4lb_csum_add(0, ip, 20)) != 0xffff)
		return -1;
	dst = (uint32_t)ip[16] << 24 | ip[17] << 16 | ip[18] << 8 | ip[19];
	if (dst < backend_addr(0) || dst > backend_addr(a->p.backends - 1))
		return -1;
	if (a->mode == L4LB_MODE_NAT) {
		const uint8_t *tcp = ip + 20;
		unsigned tlen = (unsigned)(ip[2] << 8 | ip[3]) - 20;
		uint32_t sum = l4lb_csum_add(0, ip + 12, 8) + 6 + tlen;

		if (l4lb_csum_fold(l4lb_csum_add(sum, tcp, tlen)) != 0xffff ||
		    memcmp(ip + 12, snat, 4) || (tcp[0] << 8 | tcp[1]) < 1024 ||
		    (tcp[2] << 8 | tcp[3]) != 8080 ||
		    memcmp(tcp + 4, in + 14 + 20 + 4, 12)) /* seq .. window */
			return -1;
	} else {
		/* outer IPv4 (proto 4) around the frame's IP packet */
		if (ip[9] != 4 || memcmp(ip + 12, snat, 4) ||
		    len != 14 + 20 + (in[16] << 8 | in[17]) ||
		    memcmp(ip + 20, in + 14, len - 34u))
			return -1;
	}
	return dst - backend_addr(0);
}

static int seen_first(struct app_bench *a, uint32_t first, const uint32_t *idx,
		      uint16_t n)
{
	for (uint16_t k = 0; k < n; k++) {
		const struct dpflow_pkt_meta *m =
		    dpflow_pool_meta(a->pool, idx[k]);
		int64_t b =
		    check_frame(a, first + k, dpflow_pkt_data(a->pool, idx[k]),
				m->data_len);
		uint32_t flow = (first + k) % a->p.flows;

		if (b < 0) {
			static int told;

			if (!told++) {
				const uint8_t *f =
				    dpflow_pkt_data(a->pool, idx[k]);

				fprintf(stderr,
					"bench l4lb app: frame %u "
					"wrong:",
					first + k);
				for (unsigned j = 0; j < m->data_len; j++)
					fprintf(stderr, " %02x", f[j]);
				fprintf(stderr, "\n");
			}
			return -1;
		}
		if (flow_backend[flow] == UINT32_MAX) {
			flow_backend[flow] = (uint32_t)b;
			backend_flows[b]++;
		} else if (flow_backend[flow] != (uint32_t)b) {
			return -1;
		}
	}
	return 0;
}

static int check(struct app_bench *a)
{
	uint32_t n = a->n_pkts - a->n_pkts % a->p.burst, idle = 0;
	int bad = 0;

	flow_backend = malloc((size_t)a->p.flows * sizeof(*flow_backend));
	backend_flows = calloc(a->p.backends, sizeof(*backend_flows));
	if (!flow_backend || !backend_flows)
		return -1;
	memset(flow_backend, 0xff, (size_t)a->p.flows * sizeof(*flow_backend));
	dpflow_ctx_thread_online(a->ctx);
	pass(a, 0, n, seen_first, &bad);
	pass(a, 0, n, seen_first, &bad); /* flows keep their backend */
	dpflow_ctx_thread_offline(a->ctx);
	for (uint32_t b = 0; b < a->p.backends; b++)
		idle += backend_flows[b] == 0;
	printf("# check, %u frames twice: %d bursts wrong; %u of %u backends "
	       "got no flow\n",
	       n, bad, idle, a->p.backends);
	free(flow_backend);
	free(backend_flows);
	return bad || idle ? -1 : 0;
}

static uint64_t app_pass(void *arg)
{
	struct app_bench *a = arg;

	return pass(a, 0, a->n_pkts - a->n_pkts % a->p.burst, NULL, NULL);
}

#ifdef DPFLOW_HAVE_DPDK
struct peer {
	struct bench_dpdk_exact *e;
	struct bench_dpdk_pkts *p;
	uint32_t burst;
	uint64_t hits;
};

static uint64_t peer_pass(void *arg)
{
	struct peer *pp = arg;

	return bench_dpdk_exact_pipe(pp->e, pp->p, pp->burst, &pp->hits);
}

/* The DPDK peer on @p's flows and the @n_pkts frames @frame (@len bytes);
 * 0, or -1 (message on stderr). */
static int peer_setup(const struct l4lb_params *p, uint8_t (*frame)[64],
		      const uint16_t *len, uint32_t n_pkts, struct peer *pp)
{
	uint32_t nf = p->flows, failed = 0;
	uint8_t *keys = calloc(nf, 16);
	const uint8_t **frames = calloc(n_pkts, sizeof(*frames));
	double fill_s;
	uint64_t n;
	int rc = -1;

	if (!keys || !frames)
		goto out;
	/* bench_dpdk_exact_pipe()'s key: addresses, ports (network order),
	 * protocol, three zero bytes */
	for (uint32_t i = 0; i < nf; i++) {
		struct bench_flow f;
		uint8_t *k = keys + (size_t)i * 16;

		l4lb_flow(p, i, &f);
		memcpy(k, f.src, 4);
		memcpy(k + 4, f.dst, 4);
		k[8] = (uint8_t)(f.sport >> 8);
		k[9] = (uint8_t)f.sport;
		k[10] = (uint8_t)(f.dport >> 8);
		k[11] = (uint8_t)f.dport;
		k[12] = f.proto;
	}
	/* as much room as the app's table has for IP-in-IP (a quarter full) */
	pp->e =
	    bench_dpdk_exact_create(keys, nf, nf * 4, 16, 1, &fill_s, &failed);
	if (!pp->e || failed || bench_dpdk_exact_check(pp->e, keys, nf)) {
		fprintf(stderr, "bench l4lb: peer: rte_hash refused %u keys\n",
			failed);
		goto out;
	}
	for (uint32_t i = 0; i < n_pkts; i++)
		frames[i] = frame[i];
	pp->p = bench_dpdk_pkts_create(frames, len, n_pkts);
	if (!pp->p)
		goto out;
	/* every packet finds its flow */
	n = peer_pass(pp);
	if (n != n_pkts - n_pkts % p->burst || pp->hits != n ||
	    bench_dpdk_exact_counted(pp->e) != n) {
		fprintf(stderr, "bench l4lb: peer: %llu hits of %llu\n",
			(unsigned long long)pp->hits, (unsigned long long)n);
		goto out;
	}
	rc = 0;
out:
	free(keys);
	free(frames);
	return rc;
}

static void peer_teardown(struct peer *pp)
{
	bench_dpdk_pkts_destroy(pp->p);
	bench_dpdk_exact_destroy(pp->e);
}
#endif

int bench_l4lb_paired(const struct l4lb_params *p, uint8_t (*frame)[64],
		      const uint16_t *len, uint32_t n_pkts, bench_pass_fn ours,
		      void *ours_arg, double seconds, unsigned trials,
		      bool with_peer, struct bench_best *ob,
		      struct bench_best *pb, const char **peer_name)
{
	bench_pass_fn peer_fn = NULL;
	void *peer_arg = NULL;
	int rc = -1;
#ifdef DPFLOW_HAVE_DPDK
	struct peer pp = {NULL, NULL, p->burst, 0};
#endif

	memset(ob, 0, sizeof(*ob));
	memset(pb, 0, sizeof(*pb));
	*peer_name = NULL;
#ifdef DPFLOW_HAVE_DPDK
	if (with_peer) {
		if (peer_setup(p, frame, len, n_pkts, &pp))
			goto out;
		peer_fn = peer_pass;
		peer_arg = &pp;
		*peer_name = "dpdk-ptype+rte_hash";
	}
#else
	(void)frame;
	(void)len;
	(void)n_pkts;
	(void)with_peer;
#endif
	bench_pair_run(ours, ours_arg, peer_fn, peer_arg, trials, seconds, ob,
		       pb);
	rc = 0;
#ifdef DPFLOW_HAVE_DPDK
out:
	peer_teardown(&pp);
#endif
	return rc;
}

int bench_l4lb_app(const struct l4lb_params *p, uint32_t packets, uint8_t mode,
		   double seconds, unsigned trials, bool with_peer,
		   struct bench_best *ob, struct bench_best *pb,
		   const char **peer_name)
{
	struct app_bench a;
	int rc = -1;

	memset(&a, 0, sizeof(a));
	memset(ob, 0, sizeof(*ob));
	memset(pb, 0, sizeof(*pb));
	*peer_name = NULL;
	a.p = *p;
	a.mode = mode;
	a.n_pkts = packets;
	if (setup(&a) || check(&a))
		goto out;
	dpflow_ctx_thread_online(a.ctx);
	rc = bench_l4lb_paired(&a.p, a.frame, a.len, a.n_pkts, app_pass, &a,
			       seconds, trials, with_peer, ob, pb, peer_name);
	dpflow_ctx_thread_offline(a.ctx);
out:
	if (a.lb)
		l4lb_print(a.lb, stderr);
	teardown(&a);
	return rc;
}
