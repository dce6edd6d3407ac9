/*
 * Differential test of the GPU target's pipelines (lib/gpu/flow) against
 * the CPU target: same answers for the same pipe graph and traffic.
 *
 * For each config (every supported pipe type and action, YAML through
 * dpflow_config_load_string with ring: ports), two contexts are loaded;
 * random packets (mixed Ethernet/VLAN/QinQ, IPv4/IPv6, TCP/UDP/ICMP,
 * VXLAN/GENEVE/GRE/IP-in-IP, plus truncated and corrupted frames) are
 * written into both pools identically and run in random-size bursts, the
 * CPU context through dpflow_ctx_process_burst(), the GPU one through
 * dpflow_gpu_flow_process(). After every burst: each port got the same
 * packets in the same order with the same bytes, and every dropped packet
 * has the same reason. At the end of each config: per-entry counters and
 * pipe statistics (device and context) and drops by reason are equal.
 * The update test changes entries (update, remove, add) between bursts and
 * checks the same after each batch.
 *
 * Exit 0 when every check held, 1 otherwise, 77 (skipped) without a GPU.
 * DPFLOW_GPU_FLOW_PKTS sets the packets per config (default 220000),
 * DPFLOW_GPU_FLOW_SEED the traffic's seed.
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
#include "dpflow/ring.h"

#define N_OUT 4

static unsigned failures;
static uint64_t total_pkts, total_sent, total_dropped;

#define CHECK(cond, ...)                                                  \
	do {                                                              \
		if (!(cond)) {                                            \
			if (failures++ < 20) {                            \
				fprintf(stderr, "FAIL %s:%d: ", __FILE__, \
					__LINE__);                        \
				fprintf(stderr, __VA_ARGS__);             \
				fputc('\n', stderr);                      \
			}                                                 \
		}                                                         \
	} while (0)

/* ---- random packets ------------------------------------------------------ */

static uint64_t rng_state = 0x5eed;

static uint32_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return (uint32_t)(z ^ (z >> 31));
}

static const uint16_t port_pool[] = {53,   80,	 443,  1000, 1001,
				     1002, 1003, 4000, 7000, 8080};

static void rand_l3(struct dpflow_gen_l3 *l, bool v6)
{
	uint32_t r = rnd();

	memset(l, 0, sizeof(*l));
	l->l3_type = v6 ? DPFLOW_L3_IPV6 : DPFLOW_L3_IPV4;
	switch (r % 8) {
	case 0:
	case 1:
	case 2:
		l->l4_type = DPFLOW_L4_TCP;
		break;
	case 3:
	case 4:
	case 5:
		l->l4_type = DPFLOW_L4_UDP;
		break;
	case 6:
		l->l4_type = v6 ? DPFLOW_L4_ICMPV6 : DPFLOW_L4_ICMP;
		break;
	default:
		l->l4_type = rnd() % 2 ? DPFLOW_L4_SCTP : DPFLOW_L4_NONE;
		break;
	}
	if (v6) {
		l->src[0] = 0xfd;
		l->src[1] = (uint8_t)(rnd() % 3);
		l->src[15] = (uint8_t)rnd();
		l->dst[0] = 0xfd;
		l->dst[1] = (uint8_t)(rnd() % 3);
		l->dst[2] = (uint8_t)(rnd() % 2);
		l->dst[15] = (uint8_t)rnd();
	} else {
		l->src[0] = 10;
		l->src[1] = (uint8_t)(rnd() % 4);
		l->src[2] = (uint8_t)(rnd() % 4);
		l->src[3] = (uint8_t)rnd();
		l->dst[0] = rnd() % 4 ? 10 : 192;
		l->dst[1] = (uint8_t)(rnd() % 4);
		l->dst[2] = (uint8_t)(rnd() % 4);
		l->dst[3] = (uint8_t)rnd();
	}
	l->sport = rnd() % 2 ? port_pool[rnd() % 10] : (uint16_t)rnd();
	l->dport = rnd() % 4 ? port_pool[rnd() % 10] : (uint16_t)rnd();
	if (l->l4_type == DPFLOW_L4_ICMP || l->l4_type == DPFLOW_L4_ICMPV6) {
		l->sport = rnd() % 2 ? 8 : (uint16_t)(rnd() % 256);
		l->dport = 0;
		l->icmp_id = (uint16_t)rnd();
	}
	l->ttl = (uint8_t)(rnd() % 8 == 0 ? rnd() % 3 : 64);
	l->tos = (uint8_t)rnd();
	l->tcp_flags = (uint8_t)rnd();
	l->payload_len = (uint16_t)(rnd() % 4 ? rnd() % 200 : rnd() % 1400);
	if (!v6 && rnd() % 16 == 0)
		l->ipv4_opt_len = 4;
	if (rnd() % 32 == 0) {
		l->frag = (uint8_t)(1 + rnd() % 2);
		l->frag_off = (uint16_t)(1 + rnd() % 100);
	}
	l->ip_id = rnd();
	l->tcp_seq = rnd();
}

/* A random frame into @buf; returns its length (0: try again). */
static uint32_t rand_frame(uint8_t *buf, uint32_t cap)
{
	struct dpflow_gen_spec s;
	uint32_t len, r = rnd();

	memset(&s, 0, sizeof(s));
	s.has_eth = r % 32 != 0;
	for (int i = 0; i < 6; i++) {
		s.src_mac[i] = (uint8_t)rnd();
		s.dst_mac[i] = (uint8_t)rnd();
		s.inner_src_mac[i] = (uint8_t)rnd();
		s.inner_dst_mac[i] = (uint8_t)rnd();
	}
	s.src_mac[0] &= 0xfe;
	if (s.has_eth) {
		s.n_vlan = (uint8_t)(rnd() % 4 == 0 ? 1 + rnd() % 2 : 0);
		s.vlan[0] = (uint16_t)(rnd() % 8);
		s.vlan[1] = (uint16_t)(rnd() % 4096);
	}
	switch (rnd() % 10) {
	case 0:
		s.tun_type = DPFLOW_TUN_VXLAN;
		break;
	case 1:
		s.tun_type = DPFLOW_TUN_GENEVE;
		s.inner_eth = rnd() % 2;
		s.geneve_opt_len = (uint8_t)(rnd() % 2 ? 0 : 8);
		break;
	case 2:
		s.tun_type = DPFLOW_TUN_GRE;
		s.inner_eth = rnd() % 2;
		s.gre_key = rnd() % 2;
		s.gre_seq = rnd() % 4 == 0;
		break;
	case 3:
		s.tun_type = DPFLOW_TUN_IPIP;
		break;
	default:
		s.tun_type = DPFLOW_TUN_NONE;
		break;
	}
	s.tun_id = rnd() % 4;
	rand_l3(&s.outer, rnd() % 3 == 0);
	if (s.tun_type) {
		rand_l3(&s.inner, rnd() % 3 == 0);
		s.outer.frag = 0;
		s.outer.payload_len = 0;
	}
	if (rnd() % 8 == 0)
		s.frame_len = (uint16_t)(60 + rnd() % 40);
	len = dpflow_gen_build(&s, buf, cap);
	if (!len)
		return 0;
	/* malformed: truncated, or one byte corrupted */
	r = rnd() % 100;
	if (r < 4)
		len = rnd() % len;
	else if (r < 8)
		buf[rnd() % len] = (uint8_t)rnd();
	return len ? len : 1;
}

/* ---- configs ------------------------------------------------------------- */

#define PORTS                                        \
	"ports:\n"                                   \
	"  - {name: in, uri: 'ring:in,size=1024'}\n" \
	"  - {name: o0, uri: 'ring:o0,size=1024'}\n" \
	"  - {name: o1, uri: 'ring:o1,size=1024'}\n" \
	"  - {name: o2, uri: 'ring:o2,size=1024'}\n" \
	"  - {name: o3, uri: 'ring:o3,size=1024'}\n"

struct config {
	const char *name;
	const char *yaml;
};

static const struct config configs[] = {
    {"basic+actions", PORTS
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
     "      - [{vlan_push: {vid: 100, pcp: 3}}, {set: {field: outer.ip.dscp, "
     "value: 46}}]\n"
     "      - [{vlan_pop: true}, {nat_dst_ip: 'fd00::99'}]\n"
     "      - [{set: {field: meta.reg0, value: per-entry}}, {add: {field: "
     "meta.reg0, value: 7}}, {copy: {field: meta.reg1, from: "
     "outer.l4.sport}}, {set: {field: outer.l4.sport, value: per-entry}}]\n"
     "      - [{set: {field: outer.eth.src, value: '02:aa:00:00:00:01'}}, "
     "{set: {field: outer.eth.dst, value: per-entry}}, {set: {field: "
     "outer.ipv4.dst, value: 10.9.9.9}}, {set: {field: outer.ipv6.src, "
     "value: 'fd00::5'}}]\n"
     "      - [{set: {field: outer.eth.type, value: 0x86dd}}]\n"
     "    monitor: {counter: true}\n"
     "    fwd: per-entry\n"
     "    miss: {pipe: regs}\n"
     "    entries:\n"
     "      - {match: {outer.ip.proto: 6, outer.l4.dport: 80}, action: 0, "
     "values: [null, '02:00:00:00:0a:01'], fwd: {port: o0}}\n"
     "      - {match: {outer.ip.proto: 17, outer.l4.dport: 53}, action: 1, "
     "values: [10.1.1.1, 5353], fwd: {port: o1}}\n"
     "      - {match: {outer.ip.proto: 6, outer.l4.dport: 443}, action: 1, "
     "values: ['fd00::1', 8443], fwd: {port: o1}}\n"
     "      - {match: {outer.ip.proto: 17, outer.l4.dport: 1000}, action: 2, "
     "fwd: {port: o2}}\n"
     "      - {match: {outer.ip.proto: 6, outer.l4.dport: 1001}, action: 3, "
     "fwd: {port: o2}}\n"
     "      - {match: {outer.ip.proto: 17, outer.l4.dport: 1002}, action: 4, "
     "values: [0x11223344, null, null, 999], fwd: {pipe: regs}}\n"
     "      - {match: {outer.ip.proto: 6, outer.l4.dport: 1003}, action: 5, "
     "values: [null, '02:bb:00:00:00:02'], fwd: {port: o3}}\n"
     "      - {match: {outer.ip.proto: 17, outer.l4.dport: 4000}, action: 6, "
     "fwd: {port: o3}}\n"
     "      - {match: {outer.ip.proto: 6, outer.l4.dport: 7000}, action: 0, "
     "values: [null, '02:00:00:00:0a:02'], fwd: drop}\n"
     "  - name: regs\n"
     "    type: basic\n"
     "    match: [meta.reg0, {field: outer.l3.type, value: 1}]\n"
     "    monitor: {counter: true}\n"
     "    fwd: {port: o3}\n"
     "    miss: {port: o0}\n"
     "    entries:\n"
     "      - {match: {meta.reg0: 0x1122334b}}\n"},
    {"acl+control", PORTS
     "pipes:\n"
     "  - name: fw\n"
     "    type: acl\n"
     "    root: in\n"
     "    size: 256\n"
     "    match: [outer.ipv4.src, outer.ipv4.dst, outer.ip.proto, "
     "outer.l4.sport, outer.l4.dport]\n"
     "    actions:\n"
     "      - [{nat_dst_ip: per-entry}]\n"
     "      - [{set: {field: outer.l4.dport, value: 8080}}, {set: {field: "
     "outer.ipv4.src, value: 10.7.7.7}}]\n"
     "      - [{set: {field: outer.ip.dscp, value: per-entry}}]\n"
     "      - [{set: {field: meta.reg3, value: 1}}]\n"
     "    monitor: {counter: true}\n"
     "    fwd: per-entry\n"
     "    miss: {pipe: ctl}\n"
     "    entries:\n"
     "      - {match: {outer.ipv4.src: 10.0.0.0/16}, priority: 1, action: 3, "
     "fwd: drop}\n"
     "      - {match: {outer.ipv4.src: 10.1.0.0/16, outer.ip.proto: 6}, "
     "priority: 10, action: 0, values: [10.200.0.1], fwd: {port: o0}}\n"
     "      - {match: {outer.ip.proto: 17, outer.l4.sport: 1024-65535}, "
     "priority: 20, action: 1, fwd: {port: o1}}\n"
     "      - {match: {outer.ipv4.dst: 10.2.0.0/15, outer.l4.dport: "
     "0-1000}, priority: 5, action: 2, values: [10], fwd: {port: o2}}\n"
     "      - {match: {outer.ip.proto: 1}, priority: 30, action: 3, fwd: "
     "{pipe: ctl}}\n"
     "      - {match: {outer.l4.dport: 0x0400/0xfc00}, priority: 40, action: "
     "2, values: [63], fwd: {port: o3}}\n"
     "  - name: ctl\n"
     "    type: control\n"
     "    match: [outer.l3.type, outer.l4.type, tunnel.type]\n"
     "    monitor: {counter: true}\n"
     "    fwd: per-entry\n"
     "    miss: drop\n"
     "    entries:\n"
     "      - {match: {outer.l3.type: 2}, priority: 1, fwd: {port: o1}}\n"
     "      - {match: {tunnel.type: 1}, priority: 2, fwd: {port: o2}}\n"
     "      - {match: {outer.l4.type: 3}, priority: 3, fwd: {port: o3}}\n"
     "      - {match: {outer.l4.type: 1}, priority: 4, fwd: drop}\n"},
    {"lpm+encap", PORTS
     "pipes:\n"
     "  - name: v4\n"
     "    type: lpm\n"
     "    root: in\n"
     "    match: [outer.ipv4.dst]\n"
     "    actions:\n"
     "      - [{dec_ttl: true}, {set_mac_src: '02:00:00:00:00:01'}, "
     "{set_mac_dst: per-entry}]\n"
     "      - [{encap: {type: vxlan, src: 192.0.2.1, dst: 192.0.2.2, "
     "src_mac: '02:00:00:00:01:01', dst_mac: '02:00:00:00:01:02', vni: "
     "4242}}]\n"
     "      - [{encap: per-entry}]\n"
     "    monitor: {counter: true}\n"
     "    fwd: per-entry\n"
     "    miss: {pipe: v6}\n"
     "    entries:\n"
     "      - {match: {outer.ipv4.dst: 10.0.0.0/8}, values: [null, null, "
     "'02:00:00:00:0a:01'], fwd: {port: o0}}\n"
     "      - {match: {outer.ipv4.dst: 10.1.0.0/16}, action: 1, fwd: {port: "
     "o1}}\n"
     "      - {match: {outer.ipv4.dst: 10.2.0.0/16}, action: 2, values: "
     "[{type: geneve, src: 'fd00::a', dst: 'fd00::b', vni: 7}], fwd: {port: "
     "o2}}\n"
     "      - {match: {outer.ipv4.dst: 10.2.3.0/24}, action: 2, values: "
     "[{type: gre, src: 192.0.2.9, dst: 192.0.2.10, key: 9}], fwd: {port: "
     "o3}}\n"
     "      - {match: {outer.ipv4.dst: 10.3.1.0/24}, action: 2, values: "
     "[{type: ipip, src: 192.0.2.11, dst: 192.0.2.12}], fwd: {pipe: vrf}}\n"
     "      - {match: {outer.ipv4.dst: 10.3.2.128/25}, values: [null, null, "
     "'02:00:00:00:0a:09'], fwd: drop}\n"
     "  - name: v6\n"
     "    type: lpm\n"
     "    match: [outer.ipv6.dst]\n"
     "    actions:\n"
     "      - [{dec_ttl: true}]\n"
     "      - [{decap: true}]\n"
     "    monitor: {counter: true}\n"
     "    fwd: per-entry\n"
     "    miss: {pipe: vrf}\n"
     "    entries:\n"
     "      - {match: {outer.ipv6.dst: 'fd00::/16'}, fwd: {port: o0}}\n"
     "      - {match: {outer.ipv6.dst: 'fd00:1::/32'}, action: 1, fwd: "
     "{port: o1}}\n"
     "      - {match: {outer.ipv6.dst: 'fd00:2:1::/48'}, fwd: {port: o2}}\n"
     "  - name: vrf\n"
     "    type: lpm\n"
     "    match: [outer.vlan0, outer.ipv4.src]\n"
     "    monitor: {counter: true}\n"
     "    fwd: per-entry\n"
     "    miss: drop\n"
     "    entries:\n"
     "      - {match: {outer.vlan0: 0, outer.ipv4.src: 10.0.0.0/8}, fwd: "
     "{port: o3}}\n"
     "      - {match: {outer.vlan0: 1, outer.ipv4.src: 10.1.0.0/16}, fwd: "
     "{port: o2}}\n"
     "      - {match: {outer.vlan0: 2, outer.ipv4.src: 0.0.0.0/0}, fwd: "
     "{port: o1}}\n"},
    {"hash+tunnels", PORTS
     "pipes:\n"
     "  - name: classify\n"
     "    type: basic\n"
     "    root: in\n"
     "    match: [tunnel.type]\n"
     "    actions:\n"
     "      - [{decap: true}]\n"
     "      - [{add: {field: meta.reg2, value: 1}}]\n"
     "    monitor: {counter: true}\n"
     "    fwd: per-entry\n"
     "    miss: drop\n"
     "    entries:\n"
     "      - {match: {tunnel.type: 0}, action: 1, fwd: {pipe: ecmp}}\n"
     "      - {match: {tunnel.type: 1}, fwd: {pipe: ecmp}}\n"
     "      - {match: {tunnel.type: 2}, fwd: {pipe: inner}}\n"
     "      - {match: {tunnel.type: 3}, fwd: {pipe: ecmp}}\n"
     "      - {match: {tunnel.type: 4}, action: 1, fwd: {pipe: inner}}\n"
     "  - name: inner\n"
     "    type: acl\n"
     "    match: [tunnel.id, inner.ip.proto, inner.l4.dport, "
     "inner.ipv6.src]\n"
     "    monitor: {counter: true}\n"
     "    fwd: per-entry\n"
     "    miss: {pipe: ecmp}\n"
     "    entries:\n"
     "      - {match: {inner.ip.proto: 6}, priority: 1, fwd: {port: o0}}\n"
     "      - {match: {tunnel.id: 1, inner.l4.dport: 0-1000}, priority: 2, "
     "fwd: {port: o1}}\n"
     "      - {match: {inner.ipv6.src: 'fd00:1::/32'}, priority: 3, fwd: "
     "drop}\n"
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
     "      - {index: 5, values: ['02:00:00:00:0a:05'], fwd: {port: o0}}\n"},
};

/* ---- running both targets ------------------------------------------------ */

struct side {
	struct dpflow_ctx *ctx;
	struct dpflow_gpu_flow *g; /* NULL: the CPU target */
	struct dpflow_queue *q;
	bool online; /* this thread is the context's data thread */
	/* input position of each slot in the burst being checked */
	uint32_t *pos_of;
	int16_t out_port[DPFLOW_BURST_MAX];
	uint16_t out_rank[DPFLOW_BURST_MAX];
	uint8_t reason[DPFLOW_BURST_MAX];
	uint32_t slot[DPFLOW_BURST_MAX];
};

static bool cpu_only; /* DPFLOW_GPU_FLOW_CPU_ONLY: check the harness */

static int side_open(struct side *s, const struct config *c, bool gpu)
{
	struct dpflow_config_opts o = {.pool_slots = 8192};
	struct dpflow_error err = {0};

	memset(s, 0, sizeof(*s));
	s->ctx = dpflow_config_load_string(c->yaml, c->name, &o, &err);
	if (!s->ctx) {
		fprintf(stderr, "%s: %s\n", c->name, err.msg);
		return -1;
	}
	s->q = dpflow_queue_create(s->ctx, &err);
	s->pos_of = calloc(dpflow_ctx_pool(s->ctx)->n_slots, sizeof(uint32_t));
	if (!s->q || !s->pos_of)
		return -1;
	if (gpu && !cpu_only) {
		s->g = dpflow_gpu_flow_bind(s->ctx, 0, &err);
		if (!s->g) {
			fprintf(stderr, "%s: bind: %s\n", c->name, err.msg);
			return -1;
		}
	} else if (!gpu) { /* CPU-only check: one registration a thread */
		dpflow_ctx_thread_online(s->ctx);
		s->online = true;
	}
	return 0;
}

static void side_close(struct side *s)
{
	if (!s->ctx)
		return;
	dpflow_gpu_flow_unbind(s->g);
	if (s->online)
		dpflow_ctx_thread_offline(s->ctx);
	dpflow_queue_destroy(s->q);
	dpflow_ctx_destroy(s->ctx);
	free(s->pos_of);
	memset(s, 0, sizeof(*s));
}

/* Run the burst (frames @f, lengths @len) on one side; note each packet's
 * port and rank there, or its drop reason. */
static int side_run(struct side *s, uint8_t (*f)[2048], const uint32_t *len,
		    uint16_t n)
{
	struct dpflow_pool *pool = dpflow_ctx_pool(s->ctx);
	struct dpflow_error err = {0};
	uint32_t idx[DPFLOW_BURST_MAX];

	if (dpflow_pool_alloc_bulk(pool, idx, n)) {
		CHECK(0, "pool empty");
		return -1;
	}
	for (uint16_t i = 0; i < n; i++) {
		struct dpflow_pkt_meta *m = dpflow_pool_meta(pool, idx[i]);

		m->data_len = (uint16_t)len[i];
		memcpy(dpflow_pkt_data(pool, idx[i]), f[i], len[i]);
		s->pos_of[idx[i]] = i;
		s->slot[i] = idx[i];
		s->out_port[i] = -1;
	}
	if (s->g) {
		int rc = dpflow_gpu_flow_process(s->g, 0, idx, n, &err);

		if (rc < 0) {
			CHECK(0, "gpu process: %s", err.msg);
			return -1;
		}
	} else {
		dpflow_ctx_process_burst(s->ctx, 0, idx, n);
	}
	for (uint16_t i = 0; i < n; i++)
		s->reason[i] = dpflow_pool_meta(pool, s->slot[i])->drop;
	for (unsigned p = 1; p <= N_OUT; p++) {
		struct dpflow_ring *r =
		    dpflow_port_ring_tx(dpflow_ctx_port(s->ctx, p));
		uint32_t out[DPFLOW_BURST_MAX * 2];
		unsigned k = dpflow_ring_dequeue_burst(r, out, 2 * n);

		for (unsigned j = 0; j < k; j++) {
			uint32_t i = s->pos_of[out[j]];

			s->out_port[i] = (int16_t)p;
			s->out_rank[i] = (uint16_t)j;
		}
	}
	return 0;
}

/* Compare the burst's outcome on both sides, then free the sent packets. */
static void compare_burst(struct side *a, struct side *b, uint16_t n)
{
	struct dpflow_pool *pa = dpflow_ctx_pool(a->ctx);
	struct dpflow_pool *pb = dpflow_ctx_pool(b->ctx);

	for (uint16_t i = 0; i < n; i++) {
		const struct dpflow_pkt_meta *ma =
		    dpflow_pool_meta(pa, a->slot[i]);
		const struct dpflow_pkt_meta *mb =
		    dpflow_pool_meta(pb, b->slot[i]);

		total_pkts++;
		CHECK(a->out_port[i] == b->out_port[i],
		      "packet %llu: port cpu %d gpu %d (reason cpu %u gpu %u)",
		      (unsigned long long)total_pkts, a->out_port[i],
		      b->out_port[i], a->reason[i], b->reason[i]);
		if (a->out_port[i] != b->out_port[i])
			continue;
		if (a->out_port[i] < 0) {
			total_dropped++;
			CHECK(a->reason[i] == b->reason[i],
			      "packet %llu: drop reason cpu %s gpu %s",
			      (unsigned long long)total_pkts,
			      dpflow_drop_name(a->reason[i]),
			      dpflow_drop_name(b->reason[i]));
			continue;
		}
		total_sent++;
		CHECK(a->out_rank[i] == b->out_rank[i],
		      "packet %llu: position %u on the cpu, %u on the gpu",
		      (unsigned long long)total_pkts, a->out_rank[i],
		      b->out_rank[i]);
		CHECK(
		    ma->data_len == mb->data_len &&
			!memcmp(dpflow_pkt_data(pa, a->slot[i]),
				dpflow_pkt_data(pb, b->slot[i]), ma->data_len),
		    "packet %llu: output bytes differ (len cpu %u gpu %u)",
		    (unsigned long long)total_pkts, ma->data_len, mb->data_len);
		CHECK(!memcmp(ma->reg, mb->reg, sizeof(ma->reg)) &&
			  !memcmp(&ma->outer, &mb->outer, sizeof(ma->outer)),
		      "packet %llu: metadata differs",
		      (unsigned long long)total_pkts);
		dpflow_pool_free_bulk(pa, &a->slot[i], 1);
		dpflow_pool_free_bulk(pb, &b->slot[i], 1);
	}
}

/* Counters of every pipe and entry, and drops, on both sides. */
static void compare_counters(struct side *a, struct side *b, const char *when)
{
	uint64_t da[DPFLOW_DROP__COUNT], db[DPFLOW_DROP__COUNT];

	for (unsigned i = 0; i < dpflow_ctx_pipe_count(a->ctx); i++) {
		struct dpflow_pipe *pa = dpflow_ctx_pipe(a->ctx, i);
		struct dpflow_pipe *pb = dpflow_ctx_pipe(b->ctx, i);
		struct dpflow_pipe_stats sa, sb, sd;

		dpflow_pipe_stats_get(pa, &sa);
		dpflow_pipe_stats_get(pb, &sb);
		sd = sb;
		if (b->g)
			CHECK(!dpflow_gpu_flow_pipe_stats(b->g, pb, &sd),
			      "pipe stats");
		CHECK(
		    sa.pkts == sb.pkts && sa.hits == sb.hits &&
			sa.misses == sb.misses && sa.pkts == sd.pkts &&
			sa.hits == sd.hits && sa.misses == sd.misses,
		    "%s: pipe %s: cpu %llu/%llu/%llu, gpu ctx "
		    "%llu/%llu/%llu, device %llu/%llu/%llu",
		    when, dpflow_pipe_name(pa), (unsigned long long)sa.pkts,
		    (unsigned long long)sa.hits, (unsigned long long)sa.misses,
		    (unsigned long long)sb.pkts, (unsigned long long)sb.hits,
		    (unsigned long long)sb.misses, (unsigned long long)sd.pkts,
		    (unsigned long long)sd.hits, (unsigned long long)sd.misses);
		for (uint32_t k = 0; k < dpflow_pipe_size(pa); k++) {
			const struct dpflow_entry *ea =
			    dpflow_pipe_entry(pa, k);
			const struct dpflow_entry *eb =
			    dpflow_pipe_entry(pb, k);
			struct dpflow_counter ca, cb, cd;

			CHECK(!ea == !eb,
			      "%s: pipe %s slot %u: entry on one "
			      "side only",
			      when, dpflow_pipe_name(pa), k);
			if (!ea || !eb)
				continue;
			if (cpu_only) /* b's counts sit in a shard it does
					 not sum: no data thread of its own */
				continue;
			dpflow_entry_counter(ea, &ca);
			dpflow_entry_counter(eb, &cb);
			cd = cb;
			if (b->g)
				CHECK(!dpflow_gpu_flow_entry_counter(b->g, eb,
								     &cd),
				      "entry counter");
			CHECK(ca.pkts == cb.pkts && ca.bytes == cb.bytes &&
				  ca.pkts == cd.pkts && ca.bytes == cd.bytes,
			      "%s: pipe %s entry %u: cpu %llu pkts %llu "
			      "bytes, gpu ctx %llu/%llu, device %llu/%llu",
			      when, dpflow_pipe_name(pa), k,
			      (unsigned long long)ca.pkts,
			      (unsigned long long)ca.bytes,
			      (unsigned long long)cb.pkts,
			      (unsigned long long)cb.bytes,
			      (unsigned long long)cd.pkts,
			      (unsigned long long)cd.bytes);
		}
	}
	dpflow_ctx_drops(a->ctx, da);
	dpflow_ctx_drops(b->ctx, db);
	for (unsigned d = 0; d < DPFLOW_DROP__COUNT; d++)
		CHECK(da[d] == db[d], "%s: drops %s: cpu %llu gpu %llu", when,
		      dpflow_drop_name(d), (unsigned long long)da[d],
		      (unsigned long long)db[d]);
}

static uint8_t frames[DPFLOW_BURST_MAX][2048];
static uint32_t lens[DPFLOW_BURST_MAX];

/* One random burst through both sides. */
static int one_burst(struct side *a, struct side *b)
{
	uint16_t n = (uint16_t)(rnd() % 4 == 0 ? 1 + rnd() % DPFLOW_BURST_MAX
					       : DPFLOW_BURST_MAX);

	for (uint16_t i = 0; i < n; i++)
		while (!(lens[i] = rand_frame(frames[i], 1600)))
			;
	if (side_run(a, frames, lens, n) || side_run(b, frames, lens, n))
		return -1;
	compare_burst(a, b, n);
	return n;
}

static int run_config(const struct config *c, uint64_t pkts)
{
	struct side a = {0}, b = {0};
	uint64_t done = 0;
	unsigned f0 = failures;

	if (side_open(&a, c, false) || side_open(&b, c, true)) {
		side_close(&a);
		side_close(&b);
		return -1;
	}
	while (done < pkts) {
		int n = one_burst(&a, &b);

		if (n < 0)
			break;
		done += (uint64_t)n;
	}
	compare_counters(&a, &b, c->name);
	printf("%-14s %8llu packets: %s\n", c->name, (unsigned long long)done,
	       failures == f0 ? "same answers" : "DIFFERENT");
	for (unsigned i = 0; i < dpflow_ctx_pipe_count(a.ctx); i++) {
		struct dpflow_pipe *p = dpflow_ctx_pipe(a.ctx, i);
		struct dpflow_pipe_stats st;

		dpflow_pipe_stats_get(p, &st);
		printf("  pipe %-10s %-8s %8llu pkts %8llu hits %8llu misses\n",
		       dpflow_pipe_name(p),
		       dpflow_pipe_type_name(dpflow_pipe_cfg(p)->type),
		       (unsigned long long)st.pkts, (unsigned long long)st.hits,
		       (unsigned long long)st.misses);
	}
	side_close(&a);
	side_close(&b);
	return 0;
}

/* ---- entries changed between bursts ---------------------------------------
 */

/* Apply the same change to both sides' pipe 0 ("l4" of configs[0]):
 * update, remove or add an entry. */
static void change_entries(struct side *s, uint32_t seed)
{
	struct dpflow_pipe *p = dpflow_ctx_pipe(s->ctx, 0);
	struct dpflow_error err = {0};
	uint32_t r = seed;

	for (unsigned op = 0; op < 4; op++) {
		uint32_t slot = (r >> 3) % dpflow_pipe_size(p);
		const struct dpflow_entry *e = dpflow_pipe_entry(p, slot);
		struct dpflow_entry_cfg c;

		r = r * 1103515245u + 12345u;
		if (e && r % 3 == 0) {
			dpflow_entry_remove(s->q, (struct dpflow_entry *)e,
					    NULL);
			continue;
		}
		if (e) {
			c = *dpflow_entry_cfg(e);
			c.fwd.kind = DPFLOW_FWD_PORT;
			c.fwd.port = (uint16_t)(1 + r % N_OUT);
			c.action_value[1][5] ^= (uint8_t)r;
			CHECK(dpflow_entry_update(s->q,
						  (struct dpflow_entry *)e, &c,
						  NULL, &err),
			      "update: %s", err.msg);
			continue;
		}
		memset(&c, 0, sizeof(c));
		c.key[0] = r % 2 ? 6 : 17;
		c.key[1] = (uint8_t)(port_pool[r % 10] >> 8);
		c.key[2] = (uint8_t)port_pool[r % 10];
		c.action_tmpl = (uint8_t)(r % 3);
		c.action_value[0][10] = 0xff;
		c.action_value[0][11] = 0xff;
		c.action_value[0][12] = 10;
		c.action_value[0][15] = (uint8_t)r;
		c.action_value[1][0] = 2;
		c.action_value[1][5] = (uint8_t)r;
		c.fwd.kind = DPFLOW_FWD_PORT;
		c.fwd.port = (uint16_t)(1 + (r >> 8) % N_OUT);
		/* a duplicate match fails the batch on both sides alike */
		if (!dpflow_entry_add(s->q, p, &c, NULL, &err))
			CHECK(0, "add: %s", err.msg);
	}
}

static int batch(struct side *s, int *rc_out)
{
	struct dpflow_error err = {0};
	int rc;

	if (s->online)
		dpflow_ctx_thread_offline(s->ctx);
	rc = dpflow_entries_process(s->q, NULL, &err);
	if (s->online)
		dpflow_ctx_thread_online(s->ctx);
	*rc_out = rc;
	if (s->g && dpflow_gpu_flow_sync(s->g, &err)) {
		CHECK(0, "sync: %s", err.msg);
		return -1;
	}
	return 0;
}

static void run_updates(uint64_t pkts)
{
	struct side a = {0}, b = {0};
	uint64_t done = 0;
	unsigned batches = 0, f0 = failures;

	if (side_open(&a, &configs[0], false) ||
	    side_open(&b, &configs[0], true)) {
		side_close(&a);
		side_close(&b);
		CHECK(0, "update test: open");
		return;
	}
	while (done < pkts) {
		uint32_t seed = rnd();
		int ra, rb, n;
		char when[48];

		change_entries(&a, seed);
		change_entries(&b, seed);
		if (batch(&a, &ra) || batch(&b, &rb))
			break;
		CHECK(ra == rb, "batch %u: cpu %d gpu %d", batches, ra, rb);
		batches++;
		for (int k = 0; k < 3; k++) {
			n = one_burst(&a, &b);
			if (n < 0)
				break;
			done += (uint64_t)n;
		}
		snprintf(when, sizeof(when), "after batch %u", batches);
		compare_counters(&a, &b, when);
	}
	printf("%-14s %8llu packets, %u batches: %s\n", "updates",
	       (unsigned long long)done, batches,
	       failures == f0 ? "same answers" : "DIFFERENT");
	side_close(&a);
	side_close(&b);
}

/* What the GPU target refuses at bind, named. */
static void check_refusals(void)
{
	static const char *const yaml[] = {
	    PORTS "pipes:\n  - {name: t, type: ct, root: in, fwd: {port: "
		  "o0}}\n",
	    PORTS "pipes:\n  - {name: m, type: basic, root: in, match: "
		  "[outer.l4.dport], actions: [[{mirror: o1}]], fwd: {port: "
		  "o0}}\n",
	    PORTS "pipes:\n  - {name: a, type: basic, root: in, match: "
		  "[outer.l4.dport], monitor: {aging_ms: 100}, fwd: {port: "
		  "o0}}\n",
	};
	static const char *const word[] = {"ct", "mirror", "aging"};

	for (unsigned i = 0; i < DPFLOW_ARRAY_SIZE(yaml); i++) {
		struct dpflow_error err = {0};
		struct dpflow_ctx *ctx =
		    dpflow_config_load_string(yaml[i], "refused", NULL, &err);
		struct dpflow_gpu_flow *g;

		CHECK(ctx, "refusal config %u: %s", i, err.msg);
		if (!ctx)
			continue;
		g = dpflow_gpu_flow_bind(ctx, 0, &err);
		CHECK(!g && err.code == ENOTSUP && strstr(err.msg, word[i]) &&
			  strstr(err.msg, "not supported on the GPU target"),
		      "bind of a '%s' config: %s", word[i],
		      g ? "accepted" : err.msg);
		if (!g)
			printf("refused as expected: %s\n", err.msg);
		dpflow_gpu_flow_unbind(g);
		dpflow_ctx_destroy(ctx);
	}
}

int main(void)
{
	struct dpflow_error err = {0};
	const char *env = getenv("DPFLOW_GPU_FLOW_PKTS");
	uint64_t per = env ? strtoull(env, NULL, 10) : 220000;
	const char *seed = getenv("DPFLOW_GPU_FLOW_SEED");

	cpu_only = getenv("DPFLOW_GPU_FLOW_CPU_ONLY") != NULL;
	if (seed)
		rng_state = strtoull(seed, NULL, 0);
	if (!cpu_only && dpflow_gpu_count(&err) == 0) {
		printf("skipped: %s\n", err.msg);
		return 77;
	}
	for (unsigned i = 0; i < DPFLOW_ARRAY_SIZE(configs); i++)
		if (run_config(&configs[i], per))
			CHECK(0, "config %s did not run", configs[i].name);
	run_updates(per);
	if (!cpu_only)
		check_refusals();
	printf("%llu packets: %llu sent, %llu dropped; %u failed checks\n",
	       (unsigned long long)total_pkts, (unsigned long long)total_sent,
	       (unsigned long long)total_dropped, failures);
	return failures ? 1 : 0;
}
