/*
 * The queue-fed pipeline end to end (gpu_flow.h, "queue-fed persistent
 * pipeline"): ring port -> CPU proxy -> persistent pipeline kernel ->
 * CPU proxy -> ring port, against the CPU target on the same config.
 *
 * Differential part, per mode (zero-copy and device-resident paths, with
 * and without header split, per-warp and per-block receivers, a plan
 * whose actions move frame starts run in place): random frames (mixed
 * Ethernet/VLAN/QinQ, IPv4/IPv6, TCP/UDP/ICMP, tunnels, truncated and
 * corrupted ones, as test_gpu_flow.c makes them) go through both targets
 * in rounds. The CPU target takes them one at a time
 * (dpflow_ctx_process_burst of 1), so each of its ports gets packets in
 * arrival order; the GPU hands packets back at their arrival positions,
 * so the proxy's output ring must show them in arrival order too. Per
 * packet: the same port (from the kernel's verdict words) or the same
 * drop reason, the same output bytes; per mode: the same per-entry
 * counters and pipe statistics (device counters against the CPU
 * context's) and drops by reason, and every pool slot back.
 *
 * Header split: frames whose headers end beyond the split are left out
 * (the GPU cannot see them; gpu_flow.h says what it does with them), and
 * a frame longer than the split that the parser rejects must come back
 * dropped with the reason the parser gives the frame cut at the split.
 *
 * Update part: two pipes whose entries are all rewritten in every batch
 * to version v (pipe a writes v into the source MAC, pipe b into the
 * destination MAC and sends to port 1 + v % 4) while packets circulate;
 * every packet must show one version in both MACs, the port of that
 * version, and the generation of that version in its verdict word.
 *
 * Exit 0 when every check held, 1 otherwise, 77 (skipped) without a GPU.
 * DPFLOW_GPU_PIPELINE_PKTS sets the packets per mode (default 250000),
 * DPFLOW_GPU_PIPELINE_SEED the traffic's seed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/config.h"
#include "dpflow/dpflow.h"
#include "dpflow/gen.h"
#include "dpflow/gpu.h"
#include "dpflow/gpu_flow.h"
#include "dpflow/parse.h"
#include "dpflow/ring.h"

#define N_OUT	    4
#define ROUND	    4096 /* packets a round */
#define GPOOL_SLOTS 16384
#define WAIT_NS	    10000000000ull

static unsigned failures;
static uint64_t total_pkts, total_sent, total_dropped;

#define CHECK(cond, ...)                                                  \
	do {                                                              \
		if (!(cond)) {                                            \
			if (failures++ < 30) {                            \
				fprintf(stderr, "FAIL %s:%d: ", __FILE__, \
					__LINE__);                        \
				fprintf(stderr, __VA_ARGS__);             \
				fputc('\n', stderr);                      \
			}                                                 \
		}                                                         \
	} while (0)

/* ---- random packets (as test_gpu_flow.c) --------------------------------- */

#define GPU_FRAMES_SEED 0x5eed2ull
#include "gpu_frames.h"

/* Where the parsed headers of @f end (0 when the parser rejects it). */
static uint32_t hdr_end(const uint8_t *f, uint32_t len, unsigned *reason)
{
	struct dpflow_pkt_meta m;

	memset(&m, 0, sizeof(m));
	*reason = dpflow_parse_frame(f, len, &m);
	if (*reason)
		return 0;
	return m.tun_type != DPFLOW_TUN_NONE ? m.inner.pay_off
					     : m.outer.pay_off;
}

/* ---- configs --------------------------------------------------------------
 */

#define PORTS                                        \
	"ports:\n"                                   \
	"  - {name: in, uri: 'ring:in,size=1024'}\n" \
	"  - {name: o0, uri: 'ring:o0,size=1024'}\n" \
	"  - {name: o1, uri: 'ring:o1,size=1024'}\n" \
	"  - {name: o2, uri: 'ring:o2,size=1024'}\n" \
	"  - {name: o3, uri: 'ring:o3,size=1024'}\n"

/* Every kind of pipe and the actions that edit in place. */
static const char edits_yaml[] = PORTS
    "pipes:\n"
    "  - name: l4\n"
    "    type: basic\n"
    "    root: in\n"
    "    match: [outer.ip.proto, outer.l4.dport]\n"
    "    actions:\n"
    "      - [{set_mac_src: '02:00:00:00:00:01'}, {set_mac_dst: per-entry}, "
    "{dec_ttl: true}]\n"
    "      - [{nat_src_ip: per-entry}, {nat_dst_port: per-entry}, "
    "{nat_src_port: 5555}]\n"
    "      - [{set: {field: outer.ip.dscp, value: 46}}]\n"
    "      - [{set: {field: meta.reg0, value: per-entry}}, {add: {field: "
    "meta.reg0, value: 7}}, {copy: {field: meta.reg1, from: "
    "outer.l4.sport}}, {set: {field: outer.l4.sport, value: per-entry}}]\n"
    "    monitor: {counter: true}\n"
    "    fwd: per-entry\n"
    "    miss: {pipe: fw}\n"
    "    entries:\n"
    "      - {match: {outer.ip.proto: 6, outer.l4.dport: 80}, action: 0, "
    "values: [null, '02:00:00:00:0a:01'], fwd: {port: o0}}\n"
    "      - {match: {outer.ip.proto: 17, outer.l4.dport: 53}, action: 1, "
    "values: [10.1.1.1, 5353], fwd: {port: o1}}\n"
    "      - {match: {outer.ip.proto: 6, outer.l4.dport: 443}, action: 1, "
    "values: ['fd00::1', 8443], fwd: {port: o1}}\n"
    "      - {match: {outer.ip.proto: 17, outer.l4.dport: 1000}, action: 2, "
    "fwd: {port: o2}}\n"
    "      - {match: {outer.ip.proto: 17, outer.l4.dport: 1002}, action: 3, "
    "values: [0x11223344, null, null, 999], fwd: {pipe: ecmp}}\n"
    "      - {match: {outer.ip.proto: 6, outer.l4.dport: 7000}, action: 0, "
    "values: [null, '02:00:00:00:0a:02'], fwd: drop}\n"
    "  - name: fw\n"
    "    type: acl\n"
    "    size: 256\n"
    "    match: [outer.ipv4.src, outer.ipv4.dst, outer.ip.proto, "
    "outer.l4.sport, outer.l4.dport]\n"
    "    actions:\n"
    "      - [{nat_dst_ip: per-entry}]\n"
    "      - [{set: {field: outer.l4.dport, value: 8080}}, {set: {field: "
    "outer.ipv4.src, value: 10.7.7.7}}]\n"
    "      - [{set: {field: outer.ip.dscp, value: per-entry}}]\n"
    "    monitor: {counter: true}\n"
    "    fwd: per-entry\n"
    "    miss: {pipe: v4}\n"
    "    entries:\n"
    "      - {match: {outer.ipv4.src: 10.1.0.0/16, outer.ip.proto: 6}, "
    "priority: 10, action: 0, values: [10.200.0.1], fwd: {port: o0}}\n"
    "      - {match: {outer.ip.proto: 17, outer.l4.sport: 1024-65535}, "
    "priority: 20, action: 1, fwd: {port: o1}}\n"
    "      - {match: {outer.ipv4.dst: 10.2.0.0/15, outer.l4.dport: "
    "0-1000}, priority: 5, action: 2, values: [10], fwd: {pipe: ctl}}\n"
    "      - {match: {outer.l4.dport: 0x0400/0xfc00}, priority: 40, action: "
    "2, values: [63], fwd: {port: o3}}\n"
    "  - name: v4\n"
    "    type: lpm\n"
    "    match: [outer.ipv4.dst]\n"
    "    actions:\n"
    "      - [{dec_ttl: true}, {set_mac_src: '02:00:00:00:00:01'}, "
    "{set_mac_dst: per-entry}]\n"
    "    monitor: {counter: true}\n"
    "    fwd: per-entry\n"
    "    miss: {pipe: ctl}\n"
    "    entries:\n"
    "      - {match: {outer.ipv4.dst: 10.0.0.0/8}, values: [null, null, "
    "'02:00:00:00:0a:01'], fwd: {port: o0}}\n"
    "      - {match: {outer.ipv4.dst: 10.1.0.0/16}, values: [null, null, "
    "'02:00:00:00:0a:02'], fwd: {pipe: ecmp}}\n"
    "      - {match: {outer.ipv4.dst: 10.3.2.128/25}, values: [null, null, "
    "'02:00:00:00:0a:09'], fwd: drop}\n"
    "  - name: ctl\n"
    "    type: control\n"
    "    match: [outer.l3.type, outer.l4.type, tunnel.type]\n"
    "    monitor: {counter: true}\n"
    "    fwd: per-entry\n"
    "    miss: {pipe: ecmp}\n"
    "    entries:\n"
    "      - {match: {outer.l3.type: 2}, priority: 1, fwd: {port: o1}}\n"
    "      - {match: {tunnel.type: 1}, priority: 2, fwd: {port: o2}}\n"
    "      - {match: {outer.l4.type: 1}, priority: 4, fwd: drop}\n"
    "  - name: ecmp\n"
    "    type: hash\n"
    "    size: 7\n"
    "    hash_seed: 12345\n"
    "    match: [outer.ipv4.src, outer.ipv4.dst, outer.ip.proto, "
    "outer.l4.sport, outer.l4.dport]\n"
    "    actions:\n"
    "      - [{set_mac_dst: per-entry}]\n"
    "    monitor: {counter: true}\n"
    "    fwd: per-entry\n"
    "    miss: {port: o3}\n"
    "    entries:\n"
    "      - {index: 0, values: ['02:00:00:00:0a:00'], fwd: {port: o0}}\n"
    "      - {index: 1, values: ['02:00:00:00:0a:01'], fwd: {port: o1}}\n"
    "      - {index: 2, values: ['02:00:00:00:0a:02'], fwd: {port: o2}}\n"
    "      - {index: 4, values: ['02:00:00:00:0a:04'], fwd: drop}\n"
    "      - {index: 5, values: ['02:00:00:00:0a:05'], fwd: {port: o0}}\n";

/* Actions that move the frame's start: decap, VLAN push and pop, encap. */
static const char moves_yaml[] = PORTS
    "pipes:\n"
    "  - name: classify\n"
    "    type: basic\n"
    "    root: in\n"
    "    match: [tunnel.type]\n"
    "    actions:\n"
    "      - [{decap: true}]\n"
    "      - [{vlan_push: {vid: 100, pcp: 3}}]\n"
    "      - [{vlan_pop: true}]\n"
    "    monitor: {counter: true}\n"
    "    fwd: per-entry\n"
    "    miss: drop\n"
    "    entries:\n"
    "      - {match: {tunnel.type: 0}, action: 1, fwd: {pipe: v4}}\n"
    "      - {match: {tunnel.type: 1}, action: 0, fwd: {pipe: v4}}\n"
    "      - {match: {tunnel.type: 2}, action: 0, fwd: {port: o2}}\n"
    "      - {match: {tunnel.type: 3}, action: 2, fwd: {pipe: v4}}\n"
    "      - {match: {tunnel.type: 4}, action: 0, fwd: {pipe: v4}}\n"
    "  - name: v4\n"
    "    type: lpm\n"
    "    match: [outer.ipv4.dst]\n"
    "    actions:\n"
    "      - [{dec_ttl: true}, {set_mac_dst: per-entry}]\n"
    "      - [{encap: {type: vxlan, src: 192.0.2.1, dst: 192.0.2.2, "
    "src_mac: '02:00:00:00:01:01', dst_mac: '02:00:00:00:01:02', vni: "
    "4242}}]\n"
    "      - [{encap: per-entry}]\n"
    "    monitor: {counter: true}\n"
    "    fwd: per-entry\n"
    "    miss: {port: o3}\n"
    "    entries:\n"
    "      - {match: {outer.ipv4.dst: 10.0.0.0/8}, values: [null, "
    "'02:00:00:00:0a:01'], fwd: {port: o0}}\n"
    "      - {match: {outer.ipv4.dst: 10.1.0.0/16}, action: 1, fwd: {port: "
    "o1}}\n"
    "      - {match: {outer.ipv4.dst: 10.2.0.0/16}, action: 2, values: "
    "[{type: geneve, src: 'fd00::a', dst: 'fd00::b', vni: 7}], fwd: {port: "
    "o2}}\n"
    "      - {match: {outer.ipv4.dst: 10.2.3.0/24}, action: 2, values: "
    "[{type: gre, src: 192.0.2.9, dst: 192.0.2.10, key: 9}], fwd: {port: "
    "o3}}\n"
    "      - {match: {outer.ipv4.dst: 10.3.2.128/25}, values: [null, "
    "'02:00:00:00:0a:09'], fwd: drop}\n";

struct mode {
	const char *name;
	const char *yaml;
	enum dpflow_gpu_path path;
	uint32_t split;
	enum dpflow_gpu_flow_recv recv;
};

static const struct mode modes[] = {
    {"zero-copy, per warp", edits_yaml, DPFLOW_GPU_PATH_ZERO_COPY, 0,
     DPFLOW_GPU_FLOW_RECV_WARP},
    {"device-resident, per block", edits_yaml, DPFLOW_GPU_PATH_DEVICE, 0,
     DPFLOW_GPU_FLOW_RECV_BLOCK},
    {"zero-copy, header split 128, per warp", edits_yaml,
     DPFLOW_GPU_PATH_ZERO_COPY, 128, DPFLOW_GPU_FLOW_RECV_WARP},
    {"device-resident, header split 128, per block", edits_yaml,
     DPFLOW_GPU_PATH_DEVICE, 128, DPFLOW_GPU_FLOW_RECV_BLOCK},
    {"zero-copy, frame starts moved in place, per warp", moves_yaml,
     DPFLOW_GPU_PATH_ZERO_COPY, 0, DPFLOW_GPU_FLOW_RECV_WARP},
};

/* ---- the GPU side: proxy, queue and the queue-fed kernel ------------------
 */

struct gside {
	struct dpflow_gpu *gpu;
	struct dpflow_ctx *ctx; /* the config; its ports stay unused */
	struct dpflow_queue *eq;
	struct dpflow_gpu_flow *g;
	struct dpflow_pool *pool; /* the queue's packets */
	struct dpflow_port *in, *out;
	struct dpflow_gpu_queue *q;
	struct dpflow_gpu_proxy *px;
	struct dpflow_gpu_flow_run *run;
	uint32_t *verdicts, *d_verdicts;
};

static int gside_open(struct gside *s, struct dpflow_gpu *gpu, const char *yaml,
		      const char *name, enum dpflow_gpu_path path,
		      uint32_t split, enum dpflow_gpu_flow_recv recv)
{
	struct dpflow_pool_params pp = {"gpipe", GPOOL_SLOTS, 0, 0, NULL};
	struct dpflow_gpu_queue_params qp = {0};
	struct dpflow_gpu_proxy_params xp = {0};
	struct dpflow_gpu_flow_run_params rp = {0};
	struct dpflow_config_opts o = {.pool_slots = 1024};
	struct dpflow_error err = {0};
	void *h, *d;

	memset(s, 0, sizeof(*s));
	s->gpu = gpu;
	s->ctx = dpflow_config_load_string(yaml, name, &o, &err);
	if (!s->ctx)
		goto fail;
	s->eq = dpflow_queue_create(s->ctx, &err);
	if (!s->eq)
		goto fail;
	s->g = dpflow_gpu_flow_bind(s->ctx, dpflow_gpu_device(gpu), &err);
	if (!s->g)
		goto fail;
	s->pool = dpflow_pool_create(&pp, &err);
	if (!s->pool)
		goto fail;
	s->in = dpflow_port_open(s->pool, "ring:gin,size=8192", &err);
	s->out = dpflow_port_open(s->pool, "ring:gout,size=8192", &err);
	if (!s->in || !s->out)
		goto fail;
	if (dpflow_gpu_mem_alloc(gpu, GPOOL_SLOTS * sizeof(uint32_t), 0,
				 DPFLOW_GPU_MEM_CPU_GPU, &h, &d, &err) < 0)
		goto fail;
	s->verdicts = h;
	s->d_verdicts = d;
	qp.pool = s->pool;
	qp.size = 1024;
	qp.path = path;
	qp.hdr_split = split;
	s->q = dpflow_gpu_queue_create(gpu, &qp, &err);
	if (!s->q)
		goto fail;
	rp.gpu = gpu;
	rp.queues = &s->q;
	rp.n_queues = 1;
	rp.port = 0; /* "in" */
	rp.recv = recv;
	rp.receivers = recv == DPFLOW_GPU_FLOW_RECV_WARP ? 8 : 2;
	rp.verdicts = s->d_verdicts;
	s->run = dpflow_gpu_flow_run_start(s->g, &rp, &err);
	if (!s->run)
		goto fail;
	xp.queue = s->q;
	xp.rx_port = s->in;
	xp.tx_port = s->out;
	xp.burst = 64;
	xp.watch = dpflow_gpu_flow_run_kernel(s->run);
	s->px = dpflow_gpu_proxy_start(&xp, &err);
	if (!s->px)
		goto fail;
	return 0;
fail:
	CHECK(0, "%s: GPU side: %s", name, err.msg);
	return -1;
}

/* Stop in order (kernel, proxy) and free; every slot must be back. */
static void gside_close(struct gside *s, struct dpflow_gpu_flow_run_stats *st)
{
	struct dpflow_error err = {0};
	int rc;

	if (s->run) {
		rc = dpflow_gpu_flow_run_stop(s->run, 0, st, &err);
		CHECK(rc == 0, "run stop: %s (rc %d)", err.msg, rc);
	}
	/* the proxy watches the run's kernel: destroy the run after it */
	if (s->px) {
		struct dpflow_gpu_proxy_stats ps;

		rc = dpflow_gpu_proxy_stop(s->px, &ps, &err);
		CHECK(rc == 0, "proxy stop: %s (rc %d)", err.msg, rc);
		printf("   proxy: %llu received, %llu sent, %llu dropped, %llu "
		       "errors, %llu bursts cut short\n",
		       (unsigned long long)ps.rx_pkts,
		       (unsigned long long)ps.tx_pkts,
		       (unsigned long long)ps.tx_dropped,
		       (unsigned long long)ps.tx_errors,
		       (unsigned long long)ps.rx_ring_full);
	}
	dpflow_gpu_flow_run_destroy(s->run);
	dpflow_gpu_queue_destroy(s->q);
	dpflow_port_close(s->in);
	dpflow_port_close(s->out);
	if (s->pool) {
		dpflow_gpu_pool_unregister(s->gpu, s->pool);
		CHECK(dpflow_pool_avail(s->pool) == GPOOL_SLOTS,
		      "%u of %u slots back in the GPU side's pool",
		      dpflow_pool_avail(s->pool), GPOOL_SLOTS);
		dpflow_pool_destroy(s->pool);
	}
	dpflow_gpu_mem_free(s->gpu, s->verdicts);
	dpflow_gpu_flow_unbind(s->g);
	if (s->eq)
		dpflow_queue_destroy(s->eq);
	dpflow_ctx_destroy(s->ctx);
	memset(s, 0, sizeof(*s));
}

static uint64_t proxy_dropped(struct gside *s)
{
	struct dpflow_gpu_proxy_stats ps;

	dpflow_gpu_proxy_stats_get(s->px, &ps);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return ps.tx_dropped;
}

/* ---- the differential part ------------------------------------------------
 */

/* One round's packets and what became of them on each side. */
struct round {
	uint32_t n;
	uint8_t (*frame)[2048];
	uint32_t len[ROUND];
	uint8_t want_cut[ROUND]; /* split: the reason of the cut frame, or 0 */
	/* CPU side */
	uint32_t cslot[ROUND];
	int16_t cport[ROUND];
	uint8_t creason[ROUND];
	/* GPU side */
	uint32_t gslot[ROUND];
	uint8_t gback[ROUND];
};

static uint32_t *pos_cpu, *pos_gpu; /* slot -> position in the round */

/* Frames for a round; with @split, none whose headers end beyond it. */
static void round_frames(struct round *rd, uint32_t n, uint32_t split)
{
	rd->n = n;
	for (uint32_t i = 0; i < n; i++) {
		unsigned reason;

		rd->want_cut[i] = 0;
		for (;;) {
			uint32_t end;

			rd->len[i] = rand_frame(rd->frame[i], 1600);
			if (!rd->len[i])
				continue;
			if (!split || rd->len[i] <= split)
				break;
			end = hdr_end(rd->frame[i], rd->len[i], &reason);
			if (reason) { /* rejected: the GPU sees it cut */
				(void)hdr_end(rd->frame[i], split, &reason);
				if (!reason)
					continue; /* cut, it parses: skip */
				rd->want_cut[i] = (uint8_t)reason;
				break;
			}
			if (end <= split)
				break;
		}
	}
}

/* Take what the CPU target sent out of its ports so far. */
static void cpu_drain(struct dpflow_ctx *ctx, struct round *rd, int64_t *last)
{
	for (unsigned p = 1; p <= N_OUT; p++) {
		struct dpflow_ring *r =
		    dpflow_port_ring_tx(dpflow_ctx_port(ctx, p));
		uint32_t out[256];
		unsigned k;

		while ((k = dpflow_ring_dequeue_burst(r, out, 256))) {
			for (unsigned j = 0; j < k; j++) {
				uint32_t i = pos_cpu[out[j]];

				CHECK((int64_t)i > last[p],
				      "CPU port %u: packet %u after %lld", p, i,
				      (long long)last[p]);
				rd->cport[i] = (int16_t)p;
				last[p] = i;
			}
		}
	}
}

/* The CPU target, one packet at a time: arrival order on every port. */
static int cpu_round(struct dpflow_ctx *ctx, struct round *rd)
{
	struct dpflow_pool *pool = dpflow_ctx_pool(ctx);
	int64_t last[N_OUT + 1];

	for (unsigned p = 0; p <= N_OUT; p++)
		last[p] = -1;
	if (dpflow_pool_alloc_bulk(pool, rd->cslot, rd->n)) {
		CHECK(0, "CPU pool empty");
		return -1;
	}
	for (uint32_t i = 0; i < rd->n; i++) {
		uint32_t idx = rd->cslot[i];

		dpflow_pool_meta(pool, idx)->data_len = (uint16_t)rd->len[i];
		memcpy(dpflow_pkt_data(pool, idx), rd->frame[i], rd->len[i]);
		pos_cpu[idx] = i;
		rd->cport[i] = -1;
		dpflow_ctx_process_burst(ctx, 0, &idx, 1);
		rd->creason[i] = dpflow_pool_meta(pool, idx)->drop;
		dpflow_ctx_quiescent(ctx);
		if (i % 256 == 255) /* the port rings hold 1024 */
			cpu_drain(ctx, rd, last);
	}
	cpu_drain(ctx, rd, last);
	return 0;
}

/* Feed the round to the proxy's input ring and take what comes back, in
 * arrival order, until every packet is back or counted dropped. */
static int gpu_round(struct gside *s, struct round *rd)
{
	struct dpflow_ring *rin = dpflow_port_ring_rx(s->in);
	struct dpflow_ring *rout = dpflow_port_ring_tx(s->out);
	uint64_t drop0 = proxy_dropped(s), t0 = dpflow_clock_ns();
	uint32_t fed = 0, back = 0, last = 0;
	bool first = true;
	struct dpflow_error err = {0};

	if (dpflow_pool_alloc_bulk(s->pool, rd->gslot, rd->n)) {
		CHECK(0, "GPU side's pool empty");
		return -1;
	}
	for (uint32_t i = 0; i < rd->n; i++) {
		uint32_t idx = rd->gslot[i];
		struct dpflow_pkt_meta *m = dpflow_pool_meta(s->pool, idx);

		m->data_len = (uint16_t)rd->len[i];
		memcpy(dpflow_pkt_data(s->pool, idx), rd->frame[i], rd->len[i]);
		s->verdicts[idx] = 0xffffffffu;
		pos_gpu[idx] = i;
		rd->gback[i] = 0;
	}
	for (;;) {
		uint32_t out[256];
		unsigned k;

		if (fed < rd->n)
			fed += dpflow_ring_enqueue_burst(rin, rd->gslot + fed,
							 rd->n - fed);
		k = dpflow_ring_dequeue_burst(rout, out, 256);
		for (unsigned j = 0; j < k; j++) {
			uint32_t i = pos_gpu[out[j]];

			CHECK(first || i > last,
			      "GPU: packet %u came back after %u", i, last);
			rd->gback[i] = 1;
			last = i;
			first = false;
		}
		back += k;
		if (back + (proxy_dropped(s) - drop0) >= rd->n)
			break;
		if (dpflow_gpu_proxy_error(s->px, &err) < 0) {
			CHECK(0, "proxy: %s", err.msg);
			return -1;
		}
		if (dpflow_clock_ns() - t0 > WAIT_NS) {
			CHECK(0,
			      "round: %u of %u packets back, %llu dropped, "
			      "%u fed, after 10 s",
			      back, rd->n,
			      (unsigned long long)(proxy_dropped(s) - drop0),
			      fed);
			return -1;
		}
	}
	CHECK(back + (proxy_dropped(s) - drop0) == rd->n,
	      "round: %u back + %llu dropped of %u", back,
	      (unsigned long long)(proxy_dropped(s) - drop0), rd->n);
	return 0;
}

/* Per packet: port or drop reason, bytes; frees both sides' packets. */
static void compare_round(struct dpflow_ctx *ctx, struct gside *s,
			  struct round *rd, uint64_t *want_drops)
{
	struct dpflow_pool *cp = dpflow_ctx_pool(ctx);
	unsigned long long gen = dpflow_gpu_flow_run_gen(s->run);

	for (uint32_t i = 0; i < rd->n; i++) {
		uint32_t v = s->verdicts[rd->gslot[i]];
		bool gsent =
		    v != 0xffffffffu && (v & DPFLOW_GPU_FLOW_VERDICT_SENT);
		unsigned gval = DPFLOW_GPU_FLOW_VERDICT_VALUE(v);
		unsigned want =
		    rd->want_cut[i] ? rd->want_cut[i] : rd->creason[i];
		int cport = rd->want_cut[i] ? -1 : rd->cport[i];

		total_pkts++;
		CHECK(v != 0xffffffffu, "packet %u: no verdict", i);
		CHECK(v == 0xffffffffu ||
			  DPFLOW_GPU_FLOW_VERDICT_GEN(v) == (gen & 0x7fff),
		      "packet %u: generation %u in its verdict, the run is "
		      "at %llu",
		      i, DPFLOW_GPU_FLOW_VERDICT_GEN(v), gen);
		CHECK(gsent == rd->gback[i],
		      "packet %u: verdict %08x but %s the output ring", i, v,
		      rd->gback[i] ? "came back on" : "missing from");
		if (cport < 0) {
			total_dropped++;
			want_drops[want]++;
			CHECK(!gsent && gval == want,
			      "packet %u (%u bytes): cpu drops it (%s), gpu "
			      "%s %u",
			      i, rd->len[i], dpflow_drop_name(want),
			      gsent ? "sends it out of port"
				    : "drops it, reason",
			      gval);
			if (gsent)
				dpflow_pool_free_bulk(s->pool, &rd->gslot[i],
						      1);
			if (rd->cport[i] >= 0)
				dpflow_pool_free_bulk(cp, &rd->cslot[i], 1);
			continue;
		}
		total_sent++;
		CHECK(gsent && gval == (unsigned)cport,
		      "packet %u (%u bytes): cpu sends it out of port %d, gpu "
		      "%s %u",
		      i, rd->len[i], cport,
		      gsent ? "out of port" : "drops it, reason", gval);
		if (gsent) {
			const struct dpflow_pkt_meta *mc =
			    dpflow_pool_meta(cp, rd->cslot[i]);
			const struct dpflow_pkt_meta *mg =
			    dpflow_pool_meta(s->pool, rd->gslot[i]);

			CHECK(
			    mc->data_len == mg->data_len &&
				!memcmp(dpflow_pkt_data(cp, rd->cslot[i]),
					dpflow_pkt_data(s->pool, rd->gslot[i]),
					mc->data_len),
			    "packet %u: output bytes differ (len cpu %u gpu "
			    "%u)",
			    i, mc->data_len, mg->data_len);
			dpflow_pool_free_bulk(s->pool, &rd->gslot[i], 1);
		}
		dpflow_pool_free_bulk(cp, &rd->cslot[i], 1);
	}
}

/* Counters of every pipe and entry (device against the CPU context's) and
 * drops by reason (the run's against what each packet should have got). */
static void compare_counters(struct dpflow_ctx *ctx, struct gside *s,
			     const uint64_t *want_drops, const char *name)
{
	struct dpflow_gpu_flow_run_stats st;
	struct dpflow_error err = {0};

	for (unsigned i = 0; i < dpflow_ctx_pipe_count(ctx); i++) {
		struct dpflow_pipe *pa = dpflow_ctx_pipe(ctx, i);
		struct dpflow_pipe *pb = dpflow_ctx_pipe(s->ctx, i);
		struct dpflow_pipe_stats sa, sd;

		dpflow_pipe_stats_get(pa, &sa);
		CHECK(!dpflow_gpu_flow_pipe_stats(s->g, pb, &sd), "pipe stats");
		CHECK(sa.pkts == sd.pkts && sa.hits == sd.hits &&
			  sa.misses == sd.misses,
		      "%s: pipe %s: cpu %llu/%llu/%llu, gpu %llu/%llu/%llu",
		      name, dpflow_pipe_name(pa), (unsigned long long)sa.pkts,
		      (unsigned long long)sa.hits,
		      (unsigned long long)sa.misses,
		      (unsigned long long)sd.pkts, (unsigned long long)sd.hits,
		      (unsigned long long)sd.misses);
		printf("   pipe %-9s %9llu pkts %9llu hits %9llu misses\n",
		       dpflow_pipe_name(pa), (unsigned long long)sd.pkts,
		       (unsigned long long)sd.hits,
		       (unsigned long long)sd.misses);
		for (uint32_t k = 0; k < dpflow_pipe_size(pa); k++) {
			const struct dpflow_entry *ea =
			    dpflow_pipe_entry(pa, k);
			const struct dpflow_entry *eb =
			    dpflow_pipe_entry(pb, k);
			struct dpflow_counter ca, cd;

			if (!ea || !eb || !dpflow_pipe_cfg(pa)->monitor.counter)
				continue;
			dpflow_entry_counter(ea, &ca);
			CHECK(!dpflow_gpu_flow_entry_counter(s->g, eb, &cd),
			      "entry counter");
			CHECK(ca.pkts == cd.pkts && ca.bytes == cd.bytes,
			      "%s: pipe %s entry %u: cpu %llu pkts %llu "
			      "bytes, gpu %llu/%llu",
			      name, dpflow_pipe_name(pa), k,
			      (unsigned long long)ca.pkts,
			      (unsigned long long)ca.bytes,
			      (unsigned long long)cd.pkts,
			      (unsigned long long)cd.bytes);
		}
	}
	if (dpflow_gpu_flow_run_stats_get(s->run, &st, &err)) {
		CHECK(0, "run stats: %s", err.msg);
		return;
	}
	for (unsigned d = 0; d < DPFLOW_DROP__COUNT; d++)
		CHECK(st.drops[d] == want_drops[d],
		      "%s: drops %s: gpu %llu, expected %llu", name,
		      dpflow_drop_name(d), (unsigned long long)st.drops[d],
		      (unsigned long long)want_drops[d]);
	printf("   kernel: %llu batches (%.1f packets a batch), %llu sent, "
	       "%llu dropped, %llu staged, %llu in place, %llu cut at the "
	       "split, %llu lost; batch time p50 %.2f us p99 %.2f us max "
	       "%.2f us; %u receivers in %u blocks of %u threads, window "
	       "%u\n",
	       (unsigned long long)st.batches,
	       st.batches ? (double)st.pkts / (double)st.batches : 0,
	       (unsigned long long)st.sent, (unsigned long long)st.dropped,
	       (unsigned long long)st.staged, (unsigned long long)st.in_place,
	       (unsigned long long)st.split_cut, (unsigned long long)st.lost,
	       st.batch_ns_p50 / 1e3, st.batch_ns_p99 / 1e3,
	       st.batch_ns_max / 1e3, st.receivers, st.blocks, st.threads,
	       st.window);
	CHECK(st.lost == 0, "%llu packets lost by the kernel",
	      (unsigned long long)st.lost);
}

static void run_mode(struct dpflow_gpu *gpu, const struct mode *md,
		     uint64_t pkts, struct round *rd)
{
	struct dpflow_config_opts o = {.pool_slots = 2 * ROUND + 1024};
	struct dpflow_error err = {0};
	struct dpflow_ctx *ctx;
	struct gside s;
	uint64_t done = 0, *want_drops;
	unsigned f0 = failures;

	printf("== %s\n", md->name);
	want_drops = calloc(DPFLOW_DROP__COUNT, sizeof(*want_drops));
	ctx = dpflow_config_load_string(md->yaml, md->name, &o, &err);
	CHECK(ctx && want_drops, "%s: CPU side: %s", md->name, err.msg);
	if (!ctx || !want_drops) {
		free(want_drops);
		dpflow_ctx_destroy(ctx);
		return;
	}
	dpflow_ctx_thread_online(ctx);
	if (gside_open(&s, gpu, md->yaml, md->name, md->path, md->split,
		       md->recv) == 0) {
		while (done < pkts && failures - f0 < 20) {
			uint32_t n =
			    (uint32_t)(pkts - done < ROUND ? pkts - done
							   : ROUND);

			round_frames(rd, n, md->split);
			if (cpu_round(ctx, rd) || gpu_round(&s, rd))
				break;
			compare_round(ctx, &s, rd, want_drops);
			done += n;
		}
		compare_counters(ctx, &s, want_drops, md->name);
	}
	gside_close(&s, NULL);
	dpflow_ctx_thread_offline(ctx);
	dpflow_ctx_destroy(ctx);
	free(want_drops);
	printf("   %llu packets: %s\n", (unsigned long long)done,
	       failures == f0 ? "same answers" : "DIFFERENT");
}

/* ---- entries replaced under traffic ---------------------------------------
 */

#define UPD_ENTRIES  64
#define UPD_PKTS     2048
#define UPD_VERSIONS 200

static const char upd_yaml[] =
    PORTS "pipes:\n"
	  "  - name: a\n"
	  "    type: basic\n"
	  "    root: in\n"
	  "    size: 256\n"
	  "    match: [outer.l4.dport]\n"
	  "    actions: [[{set_mac_src: per-entry}]]\n"
	  "    fwd: {pipe: b}\n"
	  "    miss: drop\n"
	  "  - name: b\n"
	  "    type: basic\n"
	  "    size: 256\n"
	  "    match: [outer.l4.dport]\n"
	  "    actions: [[{set_mac_dst: per-entry}]]\n"
	  "    monitor: {counter: true}\n"
	  "    fwd: per-entry\n"
	  "    miss: drop\n";

/* Entry k of pipe @p (a: 0, b: 1) at version @v. */
static void upd_cfg(struct dpflow_entry_cfg *c, unsigned p, unsigned k,
		    uint32_t v)
{
	memset(c, 0, sizeof(*c));
	c->key[0] = (uint8_t)((1000 + k) >> 8);
	c->key[1] = (uint8_t)(1000 + k);
	c->action_value[0][0] = 0x02;
	c->action_value[0][3] = (uint8_t)(v >> 16);
	c->action_value[0][4] = (uint8_t)(v >> 8);
	c->action_value[0][5] = (uint8_t)v;
	if (p == 1) {
		c->fwd.kind = DPFLOW_FWD_PORT;
		c->fwd.port = (uint16_t)(1 + v % N_OUT);
	}
}

struct upd {
	struct gside s;
	struct dpflow_entry *e[2][UPD_ENTRIES];
	uint64_t gen_of[UPD_VERSIONS + 1];
	uint32_t v; /* published */
	uint64_t checked, mixed, seen_first, seen_last;
	uint32_t vmin_seen, vmax_seen;
};

/* Publish version @v in one batch: every entry of both pipes rewritten. */
static int upd_publish(struct upd *u, uint32_t v)
{
	struct dpflow_error err = {0};
	int rc;

	for (unsigned p = 0; p < 2; p++) {
		/* by name: the loader creates a pipe after those it
		 * forwards to, so b comes first in creation order */
		struct dpflow_pipe *pipe =
		    dpflow_pipe_find(u->s.ctx, p ? "b" : "a");

		if (!pipe) {
			CHECK(0, "update test: no pipe %s", p ? "b" : "a");
			return -1;
		}

		for (unsigned k = 0; k < UPD_ENTRIES; k++) {
			struct dpflow_entry_cfg c;

			upd_cfg(&c, p, k, v);
			u->e[p][k] =
			    v == 0 ? dpflow_entry_add(u->s.eq, pipe, &c, NULL,
						      &err)
				   : dpflow_entry_update(u->s.eq, u->e[p][k],
							 &c, NULL, &err);
			if (!u->e[p][k]) {
				CHECK(0, "version %u: entry %u: %s", v, k,
				      err.msg);
				return -1;
			}
		}
	}
	rc = dpflow_entries_process(u->s.eq, NULL, &err);
	if (!rc)
		rc = dpflow_gpu_flow_run_sync(u->s.run, 0, &err);
	CHECK(rc == 0, "version %u: %s (rc %d)", v, err.msg, rc);
	if (rc)
		return -1;
	u->gen_of[v] = dpflow_gpu_flow_run_gen(u->s.run);
	u->v = v;
	return 0;
}

/* Check the packets back on the output ring and send them round again. */
static void upd_pump(struct upd *u)
{
	struct dpflow_ring *rin = dpflow_port_ring_rx(u->s.in);
	struct dpflow_ring *rout = dpflow_port_ring_tx(u->s.out);
	uint32_t out[256];
	unsigned k = dpflow_ring_dequeue_burst(rout, out, 256);

	for (unsigned j = 0; j < k; j++) {
		const uint8_t *f = dpflow_pkt_data(u->s.pool, out[j]);
		uint32_t vd = (uint32_t)f[3] << 16 | f[4] << 8 | f[5];
		uint32_t vs = (uint32_t)f[9] << 16 | f[10] << 8 | f[11];
		uint32_t w = u->s.verdicts[out[j]];

		u->checked++;
		if (vs != vd || vs > u->v ||
		    DPFLOW_GPU_FLOW_VERDICT_VALUE(w) != 1 + vs % N_OUT ||
		    DPFLOW_GPU_FLOW_VERDICT_GEN(w) !=
			(u->gen_of[vs > u->v ? 0 : vs] & 0x7fff)) {
			u->mixed++;
			CHECK(0,
			      "a packet shows source version %u, destination "
			      "version %u, port %u, generation %u (version "
			      "%u published, generation %llu)",
			      vs, vd, DPFLOW_GPU_FLOW_VERDICT_VALUE(w),
			      DPFLOW_GPU_FLOW_VERDICT_GEN(w), u->v,
			      (unsigned long long)u->gen_of[u->v]);
			continue;
		}
		u->vmin_seen = vs < u->vmin_seen ? vs : u->vmin_seen;
		u->vmax_seen = vs > u->vmax_seen ? vs : u->vmax_seen;
	}
	CHECK(dpflow_ring_enqueue_burst(rin, out, k) == k, "input ring full");
}

/* Where the packets went: the kernel's and the proxy's counters. */
static void upd_status(struct upd *u, const char *when)
{
	struct dpflow_gpu_flow_run_stats rs;
	struct dpflow_gpu_proxy_stats ps;
	struct dpflow_error err = {0};

	memset(&ps, 0, sizeof(ps));
	if (u->s.px)
		dpflow_gpu_proxy_stats_get(u->s.px, &ps);
	if (dpflow_gpu_flow_run_stats_get(u->s.run, &rs, &err)) {
		printf("   %s: run stats: %s\n", when, err.msg);
		return;
	}
	printf("   %s: kernel: %llu packets, %llu sent, %llu dropped, "
	       "generation %llu; proxy: %llu received, %llu sent, %llu "
	       "dropped; %llu checked\n",
	       when, (unsigned long long)rs.pkts, (unsigned long long)rs.sent,
	       (unsigned long long)rs.dropped, (unsigned long long)rs.gen,
	       (unsigned long long)ps.rx_pkts, (unsigned long long)ps.tx_pkts,
	       (unsigned long long)ps.tx_dropped,
	       (unsigned long long)u->checked);
	for (unsigned r = 0; r < DPFLOW_DROP__COUNT; r++)
		if (rs.drops[r])
			printf("     dropped as %s: %llu\n",
			       dpflow_drop_name(r),
			       (unsigned long long)rs.drops[r]);
}

static void run_updates(struct dpflow_gpu *gpu)
{
	struct upd *u = calloc(1, sizeof(*u));
	uint32_t idx[UPD_PKTS];
	struct dpflow_gen_spec sp;
	uint64_t t0;
	unsigned f0 = failures;

	printf("== entries replaced under traffic (zero-copy, per warp)\n");
	if (!u || gside_open(&u->s, gpu, upd_yaml, "updates",
			     DPFLOW_GPU_PATH_ZERO_COPY, 0,
			     DPFLOW_GPU_FLOW_RECV_WARP)) {
		if (u)
			gside_close(&u->s, NULL);
		free(u);
		return;
	}
	u->vmin_seen = UINT32_MAX;
	if (getenv("DPFLOW_GPU_UPD_TWICE") && upd_publish(u, 0))
		goto out;
	if (upd_publish(u, 0) ||
	    dpflow_pool_alloc_bulk(u->s.pool, idx, UPD_PKTS)) {
		CHECK(0, "update test: setup");
		goto out;
	}
	memset(&sp, 0, sizeof(sp));
	sp.has_eth = true;
	sp.outer.l3_type = DPFLOW_L3_IPV4;
	sp.outer.l4_type = DPFLOW_L4_UDP;
	sp.outer.src[0] = 10;
	sp.outer.dst[0] = 10;
	sp.outer.ttl = 64;
	sp.frame_len = 64;
	for (uint32_t i = 0; i < UPD_PKTS; i++) {
		struct dpflow_pkt_meta *m = dpflow_pool_meta(u->s.pool, idx[i]);

		sp.outer.sport = (uint16_t)(2000 + i);
		sp.outer.dport = (uint16_t)(1000 + i % UPD_ENTRIES);
		m->data_len = (uint16_t)dpflow_gen_build(
		    &sp, dpflow_pkt_data(u->s.pool, idx[i]), 256);
	}
	CHECK(dpflow_ring_enqueue_burst(dpflow_port_ring_rx(u->s.in), idx,
					UPD_PKTS) == UPD_PKTS,
	      "input ring full");
	for (uint32_t v = 1; v <= UPD_VERSIONS && failures - f0 < 10; v++) {
		t0 = dpflow_clock_ns();
		while (dpflow_clock_ns() - t0 < 500000)
			upd_pump(u);
		if (v == 1 || (v == 2 && failures != f0))
			upd_status(u, v == 1 ? "version 0" : "version 1");
		if (upd_publish(u, v))
			break;
	}
	/* the last version's packets, then take them all back */
	t0 = dpflow_clock_ns();
	while (dpflow_clock_ns() - t0 < 5000000)
		upd_pump(u);
	upd_status(u, "the end");
out:
	CHECK(dpflow_gpu_flow_run_stop(u->s.run, 0, NULL, NULL) == 0,
	      "update test: run stop");
	{
		struct dpflow_ring *rout = dpflow_port_ring_tx(u->s.out);
		struct dpflow_ring *rin = dpflow_port_ring_rx(u->s.in);
		uint32_t out[256];
		unsigned k;

		/* the proxy owns what is in flight; stop it, then free */
		if (u->s.px) {
			dpflow_gpu_proxy_stop(u->s.px, NULL, NULL);
			u->s.px = NULL;
		}
		while ((k = dpflow_ring_dequeue_burst(rout, out, 256)))
			dpflow_pool_free_bulk(u->s.pool, out, k);
		while ((k = dpflow_ring_dequeue_burst(rin, out, 256)))
			dpflow_pool_free_bulk(u->s.pool, out, k);
	}
	printf("   %llu packets checked over %u versions (seen %u..%u), %llu "
	       "mixed: %s\n",
	       (unsigned long long)u->checked, u->v,
	       u->vmin_seen == UINT32_MAX ? 0 : u->vmin_seen, u->vmax_seen,
	       (unsigned long long)u->mixed,
	       failures == f0 ? "one version each" : "FAILED");
	CHECK(u->checked >= 100000 && u->vmax_seen == u->v,
	      "update test: %llu packets checked, last version seen %u of "
	      "%u",
	      (unsigned long long)u->checked, u->vmax_seen, u->v);
	gside_close(&u->s, NULL);
	free(u);
}

int main(void)
{
	struct dpflow_error err = {0};
	const char *env = getenv("DPFLOW_GPU_PIPELINE_PKTS");
	uint64_t per = env ? strtoull(env, NULL, 10) : 250000;
	const char *seed = getenv("DPFLOW_GPU_PIPELINE_SEED");
	struct dpflow_gpu *gpu;
	struct round *rd;

	setvbuf(stdout, NULL, _IONBF, 0);
	if (seed)
		rng_state = strtoull(seed, NULL, 0);
	if (dpflow_gpu_count(&err) == 0) {
		printf("skipped: %s\n", err.msg);
		return 77;
	}
	gpu = dpflow_gpu_open(0, &err);
	if (!gpu) {
		printf("skipped: %s\n", err.msg);
		return 77;
	}
	dpflow_clock_init();
	printf("GPU 0: %s\n", dpflow_gpu_name(gpu));
	rd = calloc(1, sizeof(*rd));
	pos_cpu = calloc(65536, sizeof(*pos_cpu));
	pos_gpu = calloc(GPOOL_SLOTS, sizeof(*pos_gpu));
	if (rd)
		rd->frame = malloc(ROUND * sizeof(*rd->frame));
	if (!rd || !rd->frame || !pos_cpu || !pos_gpu) {
		fprintf(stderr, "out of memory\n");
		return 1;
	}
	/* DPFLOW_GPU_PIPELINE_ONLY=updates: only the update test */
	for (unsigned i = 0; i < DPFLOW_ARRAY_SIZE(modes); i++)
		if (!getenv("DPFLOW_GPU_PIPELINE_ONLY"))
			run_mode(gpu, &modes[i], per, rd);
	run_updates(gpu);
	printf("%llu packets compared: %llu sent, %llu dropped; %u failed "
	       "checks\n",
	       (unsigned long long)total_pkts, (unsigned long long)total_sent,
	       (unsigned long long)total_dropped, failures);
	free(rd->frame);
	free(rd);
	free(pos_cpu);
	free(pos_gpu);
	dpflow_gpu_close(gpu);
	printf("test_gpu_pipeline: %s\n", failures ? "FAILED" : "passed");
	return failures ? 1 : 0;
}
