/*
 * Differential test of the GPU target's pipelines (lib/gpu/flow) against
 * the CPU target: same answers for the same pipe graph and traffic.
 *
 * For each config (every pipe type, action, monitor and forwarding kind,
 * YAML through dpflow_config_load_string with ring: ports), two contexts
 * are loaded; packets are written into both pools identically and run in
 * random-size bursts, the CPU context through dpflow_ctx_process_burst(),
 * the GPU one through dpflow_gpu_flow_process(). Traffic: random packets
 * (mixed Ethernet/VLAN/QinQ, IPv4/IPv6, TCP/UDP/ICMP, VXLAN/GENEVE/GRE/
 * IP-in-IP, plus truncated and corrupted frames) and, for the stateful
 * configs, packets of a set of flows (many of one flow in a burst, both
 * directions, TCP flag sequences: handshake, data, FIN, RST, garbage).
 *
 * Time: the test owns the clock (dpflow_clock_ns is wrapped at link
 * time, -Wl,--wrap): both targets read the same time for a burst, and
 * it moves on by a random step between bursts (sometimes a jump of
 * hundreds of milliseconds), so that CT timeouts, meters and aging fire
 * and give the same answers on both sides.
 *
 * After every burst: each port got the same packets in the same order
 * with the same bytes and metadata (mirror copies included, at their
 * places), each RSS queue and each handler got the same packets in the
 * same order, and every dropped packet has the same reason. At the end of
 * each config (and after each batch or aging round): per-entry counters,
 * pipe statistics (device and context; colours and connection counts),
 * shared counters, RSS queue counts and drops by reason are equal. Aging
 * rounds compare what dpflow_pipe_age() reports on both sides and remove
 * (later re-add) the aged entries; the update test and the meter config
 * change entries between bursts.
 *
 * Exit 0 when every check held, 1 otherwise, 77 (skipped) without a GPU.
 * DPFLOW_GPU_FLOW_PKTS sets the packets per config (default 220000),
 * DPFLOW_GPU_FLOW_SEED the traffic's seed, DPFLOW_GPU_FLOW_CPU_ONLY=1
 * runs the CPU target on both sides (a check of the harness itself).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/clock.h"
#include "dpflow/config.h"
#include "dpflow/dpflow.h"
#include "dpflow/gen.h"
#include "dpflow/gpu.h"
#include "dpflow/gpu_flow.h"
#include "dpflow/ring.h"

#define N_OUT	   4
#define N_HANDLERS 6
#define NO_POS	   UINT32_MAX

static unsigned failures;
static uint64_t total_pkts, total_sent, total_dropped, total_queued;
static uint64_t total_copies;

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

/* ---- the clock ------------------------------------------------------------
 *
 * Linked with -Wl,--wrap=dpflow_clock_ns: every call of the library's
 * dpflow_clock_ns() (the CPU data path's burst time, the GPU target's,
 * entry publication) lands here. 0: the real clock.
 */
uint64_t __real_dpflow_clock_ns(void);
uint64_t __wrap_dpflow_clock_ns(void);

static uint64_t fake_now;

uint64_t __wrap_dpflow_clock_ns(void)
{
	return fake_now ? fake_now : __real_dpflow_clock_ns();
}

/* ---- random packets ------------------------------------------------------ */

#define GPU_FRAMES_SEED 0x5eedull
#include "gpu_frames.h"

/* ---- packets of flows ---------------------------------------------------
 *
 * A set of flows, each with its initiator's packet spec and a TCP stage;
 * a packet picks a flow (skewed: low numbers often, so a burst holds
 * several packets of one flow), a direction, and for TCP flags that
 * follow the handshake, data, FIN and RST, with some garbage. A flow is
 * replaced by a new one after a few dozen packets.
 */
#define N_FLOWS 128

struct flow {
	struct dpflow_gen_spec s; /* the initiator's direction */
	uint8_t tcp_stage;	  /* 0 new, 1 SYN, 2 SYN-ACK, 3 open, 4 FIN */
	uint16_t left;		  /* packets before it is replaced */
};

static struct flow flows[N_FLOWS];

static void rand_addr(uint8_t *a, bool v6)
{
	memset(a, 0, 16);
	if (v6) {
		a[0] = 0xfd;
		a[1] = (uint8_t)(rnd() % 3);
		a[14] = (uint8_t)rnd();
		a[15] = (uint8_t)rnd();
		return;
	}
	a[0] = rnd() % 8 ? 10 : 192;
	a[1] = (uint8_t)(rnd() % 4);
	a[2] = (uint8_t)(rnd() % 4);
	a[3] = (uint8_t)rnd();
}

static void flow_new(struct flow *f)
{
	struct dpflow_gen_l3 *l;
	bool v6 = rnd() % 5 == 0;
	uint32_t r = rnd() % 100;

	memset(f, 0, sizeof(*f));
	f->s.has_eth = true;
	for (int i = 0; i < 6; i++) {
		f->s.src_mac[i] = (uint8_t)rnd();
		f->s.dst_mac[i] = (uint8_t)rnd();
		f->s.inner_src_mac[i] = (uint8_t)rnd();
		f->s.inner_dst_mac[i] = (uint8_t)rnd();
	}
	f->s.src_mac[0] &= 0xfe;
	if (rnd() % 8 == 0) {
		f->s.tun_type = rnd() % 2 ? DPFLOW_TUN_VXLAN : DPFLOW_TUN_IPIP;
		f->s.tun_id = rnd() % 4;
		f->s.outer.l3_type = DPFLOW_L3_IPV4;
		f->s.outer.l4_type = DPFLOW_L4_UDP;
		rand_addr(f->s.outer.src, false);
		rand_addr(f->s.outer.dst, false);
		f->s.outer.ttl = 64;
		f->s.outer.sport = (uint16_t)rnd();
		f->s.outer.dport = 4789;
	}
	l = f->s.tun_type ? &f->s.inner : &f->s.outer;
	l->l3_type = v6 ? DPFLOW_L3_IPV6 : DPFLOW_L3_IPV4;
	l->l4_type = r < 50   ? DPFLOW_L4_TCP
		     : r < 75 ? DPFLOW_L4_UDP
		     : r < 87 ? (v6 ? DPFLOW_L4_ICMPV6 : DPFLOW_L4_ICMP)
		     : r < 94 ? DPFLOW_L4_SCTP
			      : DPFLOW_L4_NONE;
	rand_addr(l->src, v6);
	rand_addr(l->dst, v6);
	l->sport = (uint16_t)(1024 + rnd() % 64000);
	l->dport = rnd() % 4 ? port_pool[rnd() % 10] : (uint16_t)rnd();
	if (l->l4_type == DPFLOW_L4_ICMP || l->l4_type == DPFLOW_L4_ICMPV6) {
		l->sport = l->l4_type == DPFLOW_L4_ICMP ? 8 : 128; /* echo */
		l->dport = 0;
		l->icmp_id = (uint16_t)rnd();
	}
	l->ttl = (uint8_t)(rnd() % 16 == 0 ? 1 : 64);
	l->tos = (uint8_t)rnd();
	f->left = (uint16_t)(2 + rnd() % 60);
	f->tcp_stage = rnd() % 6 == 0 ? 3 : 0; /* some start mid-stream */
}

/* TCP flags of the flow's next packet, from the initiator (!@reply) or
 * the responder; moves the flow's stage on. */
static uint8_t tcp_next(struct flow *f, bool reply)
{
	uint32_t r = rnd() % 100;

	if (r < 3)
		return (uint8_t)rnd(); /* any combination, valid or not */
	if (r < 5) {
		f->tcp_stage = 0;
		return 0x14; /* RST|ACK */
	}
	switch (f->tcp_stage) {
	case 0:
		if (reply)
			return 0x12; /* a SYN-ACK before any SYN */
		f->tcp_stage = 1;
		return 0x02;
	case 1:
		if (!reply)
			return 0x02; /* retransmitted SYN */
		f->tcp_stage = 2;
		return 0x12;
	case 2:
		if (reply)
			return 0x12;
		f->tcp_stage = 3;
		return 0x10;
	case 3:
		if (r < 12) {
			f->tcp_stage = 4;
			return 0x11; /* FIN|ACK */
		}
		return r % 2 ? 0x18 : 0x10;
	default:
		if (r < 35)
			return 0x11;
		if (r < 45) {
			f->tcp_stage = 1; /* a new SYN reopens */
			return 0x02;
		}
		return 0x10;
	}
}

static void swap_ends(struct dpflow_gen_l3 *l)
{
	uint8_t a[16];
	uint16_t p = l->sport;

	memcpy(a, l->src, 16);
	memcpy(l->src, l->dst, 16);
	memcpy(l->dst, a, 16);
	l->sport = l->dport;
	l->dport = p;
}

/* A packet of a random flow into @buf; returns its length (0: none). */
static uint32_t flow_frame(uint8_t *buf, uint32_t cap)
{
	struct flow *f = &flows[rnd() % (rnd() % N_FLOWS + 1)];
	struct dpflow_gen_spec s;
	struct dpflow_gen_l3 *l;
	bool reply = rnd() % 5 < 2;

	if (!f->left--)
		flow_new(f);
	s = f->s;
	l = s.tun_type ? &s.inner : &s.outer;
	if (reply) {
		swap_ends(l);
		if (l->l4_type == DPFLOW_L4_ICMP ||
		    l->l4_type == DPFLOW_L4_ICMPV6) {
			l->sport = l->l4_type == DPFLOW_L4_ICMP ? 0 : 129;
			l->dport = 0;
		}
		if (s.tun_type)
			swap_ends(&s.outer);
	}
	if (l->l4_type == DPFLOW_L4_TCP)
		l->tcp_flags = tcp_next(f, reply);
	l->payload_len = (uint16_t)(rnd() % 4 ? rnd() % 300 : rnd() % 1200);
	l->ip_id = rnd();
	l->tcp_seq = rnd();
	return dpflow_gen_build(&s, buf, cap);
}

static void flows_init(void)
{
	for (unsigned i = 0; i < N_FLOWS; i++)
		flow_new(&flows[i]);
}

/* ---- configs ------------------------------------------------------------- */

#define PORTS                                        \
	"ports:\n"                                   \
	"  - {name: in, uri: 'ring:in,size=1024'}\n" \
	"  - {name: o0, uri: 'ring:o0,size=1024'}\n" \
	"  - {name: o1, uri: 'ring:o1,size=1024'}\n" \
	"  - {name: o2, uri: 'ring:o2,size=1024'}\n" \
	"  - {name: o3, uri: 'ring:o3,size=1024'}\n"

/* config.flags */
#define CF_FLOWS     0x1 /* traffic mostly of flows */
#define CF_AGE	     0x2 /* aging rounds (and removal, adding again) */
#define CF_METER_UPD 0x4 /* meters changed between bursts */

struct config {
	const char *name;
	const char *yaml;
	unsigned flags; /* CF_* */
};

static const struct config configs[] = {
    {"basic+actions",
     PORTS
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
     "      - {match: {meta.reg0: 0x1122334b}}\n",
     0},
    {"acl+control",
     PORTS
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
     "      - {match: {outer.l4.type: 1}, priority: 4, fwd: drop}\n",
     0},
    {"lpm+encap",
     PORTS
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
     "{port: o1}}\n",
     0},
    {"hash+tunnels",
     PORTS
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
     "      - {index: 5, values: ['02:00:00:00:0a:05'], fwd: {port: o0}}\n",
     0},
    {"ct+l4lb",
     PORTS
     "pipes:\n"
     "  - name: vip\n"
     "    type: acl\n"
     "    root: in\n"
     "    size: 64\n"
     "    match: [outer.ip.proto, outer.l4.dport]\n"
     "    monitor: {counter: true}\n"
     "    fwd: per-entry\n"
     "    miss: {pipe: conn}\n"
     "    entries:\n"
     "      - {match: {outer.ip.proto: 6, outer.l4.dport: 80}, priority: 1, "
     "fwd: {pipe: maglev}}\n"
     "      - {match: {outer.ip.proto: 6, outer.l4.dport: 443}, priority: 2, "
     "fwd: {pipe: maglev}}\n"
     "      - {match: {outer.ip.proto: 17, outer.l4.dport: 53}, priority: 3, "
     "fwd: {pipe: maglev}}\n"
     "      - {match: {outer.ip.proto: 6, outer.l4.dport: 0-1002}, priority: "
     "4, fwd: {pipe: maglev}}\n"
     "      - {match: {outer.ip.proto: 17, outer.l4.dport: 7000-9000}, "
     "priority: 5, fwd: drop}\n"
     "  - name: maglev\n"
     "    type: hash\n"
     "    size: 8\n"
     "    maglev: {slots: 13}\n"
     "    hash_seed: 77\n"
     "    match: [outer.ipv4.src, outer.ipv4.dst, outer.ip.proto, "
     "outer.l4.sport, outer.l4.dport]\n"
     "    actions:\n"
     "      - [{set: {field: meta.reg0, value: per-entry}}]\n"
     "    monitor: {counter: true}\n"
     "    fwd: {pipe: conn}\n"
     "    miss: {pipe: conn}\n"
     "    entries:\n"
     "      - {member: '10.0.0.1:80', values: [1]}\n"
     "      - {member: '10.0.0.2:80', weight: 2, values: [2]}\n"
     "      - {member: '10.0.0.3:80', values: [3]}\n"
     "      - {member: '10.0.0.4:80', values: [4]}\n"
     "      - {member: '10.0.0.5:80', weight: 0, values: [1]}\n"
     "  - name: conn\n"
     "    type: ct\n"
     "    size: 2048\n"
     "    ct:\n"
     "      user_reg: meta.reg0\n"
     "      timeouts_ms: {syn_sent: 40, syn_recv: 40, established: 300, "
     "fin_wait: 50, close_wait: 50, last_ack: 30, time_wait: 60, close: 20, "
     "udp_unreplied: 30, udp_replied: 90, icmp_unreplied: 30, icmp_replied: "
     "30, other_unreplied: 45, other_replied: 45}\n"
     "    actions:\n"
     "      - [{add: {field: meta.reg1, value: 1}}]\n"
     "    fwd: {pipe: dnat}\n"
     "    miss: {port: o3}\n"
     "  - name: dnat\n"
     "    type: acl\n"
     "    match: [meta.reg0, meta.ct_flags, meta.ct_state]\n"
     "    actions:\n"
     "      - [{nat_dst_ip: per-entry}, {set_mac_dst: per-entry}]\n"
     "      - [{nat_src_ip: per-entry}, {nat_src_port: 8080}]\n"
     "    monitor: {counter: true}\n"
     "    fwd: per-entry\n"
     "    miss: drop\n"
     "    entries:\n"
     "      - {match: {meta.ct_flags: 0x02/0x02}, priority: 1, action: 1, "
     "values: [10.99.0.1], fwd: {port: o2}}\n"
     "      - {match: {meta.reg0: 1}, priority: 10, values: [10.50.0.1, "
     "'02:00:00:00:0b:01'], fwd: {port: o0}}\n"
     "      - {match: {meta.reg0: 2}, priority: 10, values: [10.50.0.2, "
     "'02:00:00:00:0b:02'], fwd: {port: o1}}\n"
     "      - {match: {meta.reg0: 3, meta.ct_state: 3}, priority: 20, "
     "values: [10.50.0.3, '02:00:00:00:0b:03'], fwd: {port: o1}}\n"
     "      - {match: {meta.reg0: 4}, priority: 30, values: ['fd00::4', "
     "'02:00:00:00:0b:04'], fwd: {port: o0}}\n"
     "      - {match: {meta.ct_flags: 0x01/0x01}, priority: 40, values: "
     "[10.50.0.9, '02:00:00:00:0b:09'], fwd: {port: o3}}\n",
     CF_FLOWS | CF_AGE},
    /* connection values: saved registers, source NAT from pools whose
     * addresses are among the flows' own (so that other flows' packets
     * hit bindings), a table small enough for replacement and exhausted
     * pools */
    {"ct+values",
     PORTS
     "pipes:\n"
     "  - name: mark\n"
     "    type: acl\n"
     "    root: in\n"
     "    size: 16\n"
     "    match: [outer.ip.proto]\n"
     "    actions:\n"
     "      - [{set: {field: meta.reg1, value: per-entry}}, {copy: {field: "
     "meta.reg2, from: outer.l4.sport}}]\n"
     "    fwd: {pipe: nat}\n"
     "    miss: {pipe: nat}\n"
     "    entries:\n"
     "      - {match: {outer.ip.proto: 6}, priority: 1, values: [6, null]}\n"
     "      - {match: {outer.ip.proto: 17}, priority: 2, values: [17, "
     "null]}\n"
     "  - name: nat\n"
     "    type: ct\n"
     "    size: 160\n"
     "    ct:\n"
     "      save: [meta.reg1, meta.reg2]\n"
     "      replace: true\n"
     "      snat: {addrs: [10.0.0.7, 10.1.2.3, 'fd00::1:1'], ports: [1000, "
     "1031]}\n"
     "      timeouts_ms: {syn_sent: 40, syn_recv: 40, established: 300, "
     "fin_wait: 50, close_wait: 50, last_ack: 30, time_wait: 60, close: 20, "
     "udp_unreplied: 30, udp_replied: 90, icmp_unreplied: 30, icmp_replied: "
     "30, other_unreplied: 45, other_replied: 45}\n"
     "    fwd: {pipe: side}\n"
     "    miss: {port: o3}\n"
     "  - name: side\n"
     "    type: acl\n"
     "    match: [meta.reg1, meta.reg2, meta.ct_flags, meta.ct_state]\n"
     "    monitor: {counter: true}\n"
     "    fwd: per-entry\n"
     "    miss: {port: o2}\n"
     "    entries:\n"
     "      - {match: {meta.ct_flags: 0x02/0x02}, priority: 1, fwd: {port: "
     "o1}}\n"
     "      - {match: {meta.reg1: 6, meta.reg2: 0-32767}, priority: 2, fwd: "
     "{port: o0}}\n"
     "      - {match: {meta.reg1: 17, meta.ct_state: 9}, priority: 3, fwd: "
     "{port: o3}}\n",
     CF_FLOWS | CF_AGE},
    /* a load balancer's full NAT in pipes: VIP, Maglev (the backend in
     * reg0), a ct pipe that keeps the backend and takes its destination
     * from the backends' table and its source from a pool */
    {"ct+fullnat",
     PORTS
     "pipes:\n"
     "  - name: vip\n"
     "    type: acl\n"
     "    root: in\n"
     "    size: 16\n"
     "    match: [outer.ip.proto, outer.l4.dport]\n"
     "    fwd: per-entry\n"
     "    miss: {pipe: conn}\n"
     "    entries:\n"
     "      - {match: {outer.ip.proto: 6, outer.l4.dport: 0-40000}, "
     "priority: 1, fwd: {pipe: maglev}}\n"
     "      - {match: {outer.ip.proto: 17}, priority: 2, fwd: {pipe: "
     "maglev}}\n"
     "  - name: maglev\n"
     "    type: hash\n"
     "    size: 8\n"
     "    maglev: {slots: 13}\n"
     "    hash_seed: 7\n"
     "    match: [outer.ipv4.src, outer.ipv4.dst, outer.ip.proto, "
     "outer.l4.sport, outer.l4.dport]\n"
     "    actions:\n"
     "      - [{set: {field: meta.reg0, value: per-entry}}]\n"
     "    fwd: {pipe: conn}\n"
     "    miss: {pipe: conn}\n"
     "    entries:\n"
     "      - {member: 'b1', values: [1]}\n"
     "      - {member: 'b2', weight: 2, values: [2]}\n"
     "      - {member: 'b3', values: [3]}\n"
     "      - {member: 'b6', values: [6]}\n"
     "  - name: backends\n"
     "    type: basic\n"
     "    match: [meta.reg0]\n"
     "    actions:\n"
     "      - [{nat_dst_ip: per-entry}, {nat_dst_port: per-entry}]\n"
     "      - [{nat_dst_ip: per-entry}]\n"
     "    fwd: drop\n"
     "    entries:\n"
     "      - {match: {meta.reg0: 0}, values: ['fd00::1:9', 80]}\n"
     "      - {match: {meta.reg0: 1}, values: [10.0.0.9, 8080]}\n"
     "      - {match: {meta.reg0: 2}, action: 1, values: [10.1.2.3]}\n"
     "      - {match: {meta.reg0: 3}, values: [192.0.2.1, 53]}\n"
     "  - name: conn\n"
     "    type: ct\n"
     "    size: 256\n"
     "    ct:\n"
     "      save: [meta.reg0]\n"
     "      snat: {addrs: [10.0.0.7, 'fd00::1:1'], ports: [1000, 1063]}\n"
     "      dnat: {pipe: backends, reg: meta.reg0}\n"
     "      timeouts_ms: {syn_sent: 40, syn_recv: 40, established: 300, "
     "fin_wait: 50, close_wait: 50, last_ack: 30, time_wait: 60, close: 20, "
     "udp_unreplied: 30, udp_replied: 90, icmp_unreplied: 30, icmp_replied: "
     "30, other_unreplied: 45, other_replied: 45}\n"
     "    fwd: {pipe: side}\n"
     "    miss: {port: o3}\n"
     "  - name: side\n"
     "    type: acl\n"
     "    match: [meta.reg0, meta.ct_flags]\n"
     "    monitor: {counter: true}\n"
     "    fwd: per-entry\n"
     "    miss: {port: o2}\n"
     "    entries:\n"
     "      - {match: {meta.ct_flags: 0x02/0x02}, priority: 1, fwd: {port: "
     "o1}}\n"
     "      - {match: {meta.reg0: 1-2}, priority: 2, fwd: {port: o0}}\n",
     CF_FLOWS | CF_AGE},
    {"ct-edge",
     PORTS
     "pipes:\n"
     "  - name: strict\n"
     "    type: ct\n"
     "    root: in\n"
     "    size: 96\n"
     "    ct:\n"
     "      tcp_strict: true\n"
     "      evict: true\n"
     "      inner: true\n"
     "      timeouts_ms: {syn_sent: 15, syn_recv: 15, established: 60, "
     "fin_wait: 20, close_wait: 20, last_ack: 10, time_wait: 20, close: 8, "
     "udp_unreplied: 12, udp_replied: 30, icmp_unreplied: 10, icmp_replied: "
     "10, other_unreplied: 10, other_replied: 20}\n"
     "    fwd: {pipe: look}\n"
     "    miss: {pipe: tiny}\n"
     "  - name: tiny\n"
     "    type: ct\n"
     "    size: 6\n"
     "    match: [{field: outer.l3.type, value: 1}]\n"
     "    ct:\n"
     "      timeouts_ms: {udp_unreplied: 8, udp_replied: 8, icmp_unreplied: "
     "8, other_unreplied: 8, established: 25, syn_sent: 8}\n"
     "    fwd: {pipe: state}\n"
     "    miss: {port: o2}\n"
     "  - name: look\n"
     "    type: ct\n"
     "    size: 64\n"
     "    ct: {lookup_only: true}\n"
     "    fwd: {port: o0}\n"
     "    miss: {pipe: state}\n"
     "  - name: state\n"
     "    type: control\n"
     "    match: [meta.ct_state, meta.ct_flags]\n"
     "    monitor: {counter: true}\n"
     "    fwd: per-entry\n"
     "    miss: drop\n"
     "    entries:\n"
     "      - {match: {meta.ct_state: 1}, priority: 1, fwd: {port: o0}}\n"
     "      - {match: {meta.ct_flags: 0x01/0x01}, priority: 2, fwd: {port: "
     "o1}}\n"
     "      - {match: {meta.ct_flags: 0x02/0x02}, priority: 3, fwd: {port: "
     "o2}}\n"
     "      - {match: {meta.ct_state: 3}, priority: 4, fwd: {port: o3}}\n"
     "      - {match: {meta.ct_flags: 0x04/0x04}, priority: 5, fwd: drop}\n"
     "      - {match: {meta.ct_state: 10}, priority: 6, fwd: {port: o1}}\n",
     CF_FLOWS | CF_AGE},
    {"meters",
     "context:\n"
     "  shared_counters: 3\n"
     "  shared_meters:\n"
     "    - {alg: srtcm, cir: 100000, cbs: 3000, ebs: 3000}\n"
     "    - {alg: trtcm, cir: 60000000, pir: 150000000, cbs: 30000, pbs: "
     "60000, "
     "color_aware: true}\n" PORTS "pipes:\n"
     "  - name: police\n"
     "    type: basic\n"
     "    root: in\n"
     "    match: [outer.ip.proto, outer.l4.dport]\n"
     "    monitor:\n"
     "      counter: true\n"
     "      shared_counter: 1\n"
     "      meter: {alg: srtcm, cir: 2000000, cbs: 8000, ebs: 8000}\n"
     "    color_fwd: {yellow: {pipe: remark}, red: {pipe: second}}\n"
     "    fwd: {pipe: second}\n"
     "    miss: {pipe: agg}\n"
     "    entries:\n"
     "      - {match: {outer.ip.proto: 6, outer.l4.dport: 80}}\n"
     "      - {match: {outer.ip.proto: 6, outer.l4.dport: 443}, meter: {alg: "
     "trtcm, cir: 1000000, pir: 3000000, cbs: 4000, pbs: 8000}}\n"
     "      - {match: {outer.ip.proto: 17, outer.l4.dport: 53}, "
     "shared_counter: 2}\n"
     "      - {match: {outer.ip.proto: 17, outer.l4.dport: 1000}, meter: "
     "{alg: srtcm, cir: 0, cbs: 0, ebs: 3000}}\n"
     "      - {match: {outer.ip.proto: 6, outer.l4.dport: 1001}, meter: {alg: "
     "trtcm, cir: 1000000, pir: 1000000, cbs: 0, pbs: 4000, color_aware: "
     "true}}\n"
     "      - {match: {outer.ip.proto: 17, outer.l4.dport: 1002}, meter: "
     "{alg: srtcm, cir: 5000000, cbs: 20000, ebs: 0}}\n"
     "      - {match: {outer.ip.proto: 6, outer.l4.dport: 8080}}\n"
     "  - name: remark\n"
     "    type: basic\n"
     "    match: [outer.l3.type]\n"
     "    actions:\n"
     "      - [{set: {field: outer.ip.dscp, value: 10}}]\n"
     "    monitor: {counter: true, shared_meter: 1}\n"
     "    color_fwd: {red: drop}\n"
     "    fwd: {pipe: second}\n"
     "    miss: {pipe: second}\n"
     "    entries:\n"
     "      - {match: {outer.l3.type: 1}}\n"
     "      - {match: {outer.l3.type: 2}}\n"
     "  - name: second\n"
     "    type: acl\n"
     "    match: [meta.color, outer.ip.proto]\n"
     "    monitor: {counter: true, shared_meter: 2, shared_counter: 3}\n"
     "    color_fwd: {yellow: {port: o1}}\n"
     "    fwd: per-entry\n"
     "    miss: {port: o3}\n"
     "    entries:\n"
     "      - {match: {meta.color: 0}, priority: 1, fwd: {port: o0}}\n"
     "      - {match: {meta.color: 1}, priority: 2, fwd: {port: o2}}\n"
     "      - {match: {meta.color: 2, outer.ip.proto: 6}, priority: 3, fwd: "
     "{port: o3}}\n"
     "  - name: agg\n"
     "    type: hash\n"
     "    size: 5\n"
     "    match: [outer.ip.proto, outer.l4.sport]\n"
     "    monitor: {counter: true, shared_meter: 2}\n"
     "    color_fwd: {yellow: drop, red: {port: o2}}\n"
     "    fwd: per-entry\n"
     "    miss: {pipe: second}\n"
     "    entries:\n"
     "      - {index: 0, fwd: {port: o0}}\n"
     "      - {index: 1, fwd: {pipe: second}}\n"
     "      - {index: 2, fwd: {port: o1}}\n"
     "      - {index: 4, fwd: {pipe: remark}}\n",
     CF_FLOWS | CF_METER_UPD},
    {"aging",
     "context: {shared_counters: 2}\n" PORTS "pipes:\n"
     "  - name: ages\n"
     "    type: basic\n"
     "    root: in\n"
     "    size: 16\n"
     "    match: [outer.ip.proto, outer.l4.dport]\n"
     "    monitor: {counter: true, aging_ms: 20, shared_counter: 1}\n"
     "    fwd: per-entry\n"
     "    miss: {pipe: tail}\n"
     "    entries:\n"
     "      - {match: {outer.ip.proto: 6, outer.l4.dport: 80}, fwd: {port: "
     "o0}}\n"
     "      - {match: {outer.ip.proto: 6, outer.l4.dport: 443}, aging_ms: 4, "
     "fwd: {port: o1}}\n"
     "      - {match: {outer.ip.proto: 17, outer.l4.dport: 53}, aging_ms: 60, "
     "shared_counter: 2, fwd: {port: o2}}\n"
     "      - {match: {outer.ip.proto: 17, outer.l4.dport: 1000}, aging_ms: "
     "2, fwd: {pipe: tail}}\n"
     "      - {match: {outer.ip.proto: 6, outer.l4.dport: 7000}, fwd: drop}\n"
     "      - {match: {outer.ip.proto: 17, outer.l4.dport: 4000}, aging_ms: "
     "9, fwd: {port: o3}}\n"
     "  - name: tail\n"
     "    type: lpm\n"
     "    size: 16\n"
     "    match: [outer.ipv4.dst]\n"
     "    monitor: {aging_ms: 15, shared_counter: 2}\n"
     "    fwd: per-entry\n"
     "    miss: drop\n"
     "    entries:\n"
     "      - {match: {outer.ipv4.dst: 10.0.0.0/8}, fwd: {port: o0}}\n"
     "      - {match: {outer.ipv4.dst: 10.1.0.0/16}, aging_ms: 3, fwd: {port: "
     "o1}}\n"
     "      - {match: {outer.ipv4.dst: 10.2.3.0/24}, aging_ms: 40, fwd: "
     "{port: o2}}\n"
     "      - {match: {outer.ipv4.dst: 192.0.0.0/8}, fwd: {port: o3}}\n",
     CF_FLOWS | CF_AGE},
    {"rss+handlers",
     "context: {rss_queues: 4, rss_queue_size: 32}\n" PORTS "pipes:\n"
     "  - name: split\n"
     "    type: basic\n"
     "    root: in\n"
     "    match: [outer.ip.proto]\n"
     "    actions:\n"
     "      - [{mirror: o3}]\n"
     "      - [{set: {field: meta.reg0, value: 9}}, {mirror: o2}, {dec_ttl: "
     "true}, {mirror: o2}]\n"
     "      - [{vlan_push: {vid: 7}}]\n"
     "    monitor: {counter: true}\n"
     "    fwd: per-entry\n"
     "    miss: {handler: h5}\n"
     "    entries:\n"
     "      - {match: {outer.ip.proto: 6}, action: 0, fwd: {rss: {queues: "
     "4}}}\n"
     "      - {match: {outer.ip.proto: 17}, action: 1, fwd: {pipe: hd}}\n"
     "      - {match: {outer.ip.proto: 1}, action: 2, fwd: {rss: {queues: 2, "
     "first: 2}}}\n"
     "      - {match: {outer.ip.proto: 58}, fwd: {handler: h0}}\n"
     "      - {match: {outer.ip.proto: 132}, action: 1, fwd: {pipe: hd}}\n"
     "      - {match: {outer.ip.proto: 47}, fwd: {rss: {queues: 4, inner: "
     "true}}}\n"
     "      - {match: {outer.ip.proto: 4}, action: 2, fwd: {rss: {queues: 2, "
     "first: 2, inner: true}}}\n"
     "  - name: hd\n"
     "    type: hash\n"
     "    size: 7\n"
     "    match: [outer.l4.sport, outer.l4.dport]\n"
     "    actions:\n"
     "      - [{mirror: o1}]\n"
     "      - [{add: {field: meta.reg2, value: 3}}]\n"
     "    monitor: {counter: true}\n"
     "    fwd: per-entry\n"
     "    miss: {rss: {queues: 1, first: 3}}\n"
     "    entries:\n"
     "      - {index: 0, fwd: {handler: h0}}\n"
     "      - {index: 1, action: 1, fwd: {handler: h1}}\n"
     "      - {index: 2, fwd: {handler: h2}}\n"
     "      - {index: 3, action: 1, fwd: {handler: h3}}\n"
     "      - {index: 4, fwd: {handler: h4}}\n"
     "      - {index: 5, action: 1, fwd: {port: o0}}\n"
     "      - {index: 6, fwd: {rss: {queues: 3, first: 1}}}\n",
     CF_FLOWS},
};

/* ---- running both targets ------------------------------------------------ */

enum out_kind { OUT_DROP, OUT_PORT, OUT_RSS, OUT_HANDLER };

static const char *const kind_names[] = {"drop", "port", "rss queue",
					 "handler"};

struct side;

/* A handler of a side: notes the packets it gets, in order. */
struct side_handler {
	struct side *s;
	unsigned id;
};

#define COPIES_MAX (3 * DPFLOW_BURST_MAX)

struct side {
	struct dpflow_ctx *ctx;
	struct dpflow_gpu_flow *g; /* NULL: the CPU target */
	struct dpflow_queue *q;
	bool online; /* this thread is the context's data thread */
	uint32_t n_slots;
	/* input position of each slot in the burst being checked, NO_POS */
	uint32_t *pos_of;
	uint8_t kind[DPFLOW_BURST_MAX];	 /* enum out_kind */
	int16_t where[DPFLOW_BURST_MAX]; /* port, queue or handler */
	uint16_t rank[DPFLOW_BURST_MAX]; /* place there */
	uint8_t reason[DPFLOW_BURST_MAX];
	uint32_t slot[DPFLOW_BURST_MAX];
	/* RSS and handler packets, freed after the comparison */
	unsigned n_held, n_hseq;
	uint32_t held[DPFLOW_BURST_MAX];
	/* mirror copies by port, with their places in the port's output */
	unsigned n_copies[N_OUT + 1];
	uint32_t copy[N_OUT + 1][COPIES_MAX];
	uint16_t copy_rank[N_OUT + 1][COPIES_MAX];
	struct side_handler h[N_HANDLERS];
	/* entries that aged out and were removed, added again later */
	unsigned n_removed;
	struct {
		struct dpflow_pipe *pipe;
		struct dpflow_entry_cfg cfg;
	} removed[64];
};

static bool cpu_only; /* DPFLOW_GPU_FLOW_CPU_ONLY: check the harness */

static void on_handler(void *arg, struct dpflow_pool *pool, const uint32_t *idx,
		       uint16_t n)
{
	struct side_handler *h = arg;
	struct side *s = h->s;

	for (uint16_t k = 0; k < n; k++) {
		uint32_t i = idx[k] < s->n_slots ? s->pos_of[idx[k]] : NO_POS;

		if (i == NO_POS || s->n_held == DPFLOW_BURST_MAX) {
			CHECK(0, "handler h%u got slot %u, not of the burst",
			      h->id, idx[k]);
			dpflow_pool_free_bulk(pool, &idx[k], 1);
			continue;
		}
		s->kind[i] = OUT_HANDLER;
		s->where[i] = (int16_t)h->id;
		s->rank[i] = (uint16_t)s->n_hseq++;
		s->held[s->n_held++] = idx[k];
	}
}

static int side_open(struct side *s, const struct config *c, bool gpu)
{
	static const char *const names[N_HANDLERS] = {"h0", "h1", "h2",
						      "h3", "h4", "h5"};
	struct dpflow_handler_def defs[N_HANDLERS];
	struct dpflow_config_opts o = {.pool_slots = 8192};
	struct dpflow_error err = {0};

	memset(s, 0, sizeof(*s));
	for (unsigned k = 0; k < N_HANDLERS; k++) {
		s->h[k].s = s;
		s->h[k].id = k;
		defs[k].name = names[k];
		defs[k].fn = on_handler;
		defs[k].arg = &s->h[k];
	}
	o.handlers = defs;
	o.n_handlers = N_HANDLERS;
	s->ctx = dpflow_config_load_string(c->yaml, c->name, &o, &err);
	if (!s->ctx) {
		fprintf(stderr, "%s: %s\n", c->name, err.msg);
		return -1;
	}
	s->q = dpflow_queue_create(s->ctx, &err);
	s->n_slots = dpflow_ctx_pool(s->ctx)->n_slots;
	s->pos_of = malloc(s->n_slots * sizeof(uint32_t));
	if (!s->q || !s->pos_of)
		return -1;
	memset(s->pos_of, 0xff, s->n_slots * sizeof(uint32_t));
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

/* What port @p sent: the burst's packets (their places) and mirror
 * copies (slots not of the burst). */
static void side_port_out(struct side *s, unsigned p)
{
	struct dpflow_ring *r = dpflow_port_ring_tx(dpflow_ctx_port(s->ctx, p));
	uint32_t out[DPFLOW_BURST_MAX];
	unsigned k, rank = 0;

	while ((k = dpflow_ring_dequeue_burst(r, out, DPFLOW_BURST_MAX))) {
		for (unsigned j = 0; j < k; j++, rank++) {
			uint32_t i = s->pos_of[out[j]];

			if (i != NO_POS) {
				s->kind[i] = OUT_PORT;
				s->where[i] = (int16_t)p;
				s->rank[i] = (uint16_t)rank;
			} else if (s->n_copies[p] < COPIES_MAX) {
				s->copy_rank[p][s->n_copies[p]] =
				    (uint16_t)rank;
				s->copy[p][s->n_copies[p]++] = out[j];
			} else {
				CHECK(0, "more than %d copies on port %u",
				      COPIES_MAX, p);
				dpflow_pool_free_bulk(dpflow_ctx_pool(s->ctx),
						      &out[j], 1);
			}
		}
	}
}

/* What RSS queue @q got. */
static void side_rss_out(struct side *s, uint16_t q)
{
	uint32_t out[DPFLOW_BURST_MAX];
	uint16_t k, rank = 0;

	while ((k = dpflow_ctx_rss_rx(s->ctx, q, out, DPFLOW_BURST_MAX))) {
		for (uint16_t j = 0; j < k; j++, rank++) {
			uint32_t i = s->pos_of[out[j]];

			if (i == NO_POS || s->n_held == DPFLOW_BURST_MAX) {
				CHECK(0,
				      "rss queue %u: slot %u not of the "
				      "burst",
				      q, out[j]);
				dpflow_pool_free_bulk(dpflow_ctx_pool(s->ctx),
						      &out[j], 1);
				continue;
			}
			s->kind[i] = OUT_RSS;
			s->where[i] = (int16_t)q;
			s->rank[i] = rank;
			s->held[s->n_held++] = out[j];
		}
	}
}

/* Run the burst (frames @f, lengths @len) on one side; note where each
 * packet went (port, RSS queue or handler, and its place) or its drop
 * reason, and the mirror copies. */
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
	s->n_held = s->n_hseq = 0;
	memset(s->n_copies, 0, sizeof(s->n_copies));
	for (uint16_t i = 0; i < n; i++) {
		struct dpflow_pkt_meta *m = dpflow_pool_meta(pool, idx[i]);

		m->data_len = (uint16_t)len[i];
		memcpy(dpflow_pkt_data(pool, idx[i]), f[i], len[i]);
		s->pos_of[idx[i]] = i;
		s->slot[i] = idx[i];
		s->kind[i] = OUT_DROP;
		s->where[i] = -1;
		s->rank[i] = 0;
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
	for (unsigned p = 1; p <= N_OUT; p++)
		side_port_out(s, p);
	for (unsigned q = 0; q < dpflow_ctx_rss_queues(s->ctx); q++)
		side_rss_out(s, (uint16_t)q);
	return 0;
}

/* The metadata a later stage may read: the same on both sides. */
static bool meta_same(const struct dpflow_pkt_meta *x,
		      const struct dpflow_pkt_meta *y)
{
	return !memcmp(x->reg, y->reg, sizeof(x->reg)) &&
	       !memcmp(&x->outer, &y->outer, sizeof(x->outer)) &&
	       x->color == y->color && x->ct_state == y->ct_state &&
	       x->ct_flags == y->ct_flags && x->queue == y->queue &&
	       x->rss_hash == y->rss_hash && x->port == y->port;
}

static bool bytes_same(struct dpflow_pool *pa, uint32_t a,
		       struct dpflow_pool *pb, uint32_t b)
{
	const struct dpflow_pkt_meta *ma = dpflow_pool_meta(pa, a);
	const struct dpflow_pkt_meta *mb = dpflow_pool_meta(pb, b);

	return ma->data_len == mb->data_len &&
	       !memcmp(dpflow_pkt_data(pa, a), dpflow_pkt_data(pb, b),
		       ma->data_len);
}

/* The mirror copies of the burst, port by port: same places, same bytes. */
static void compare_copies(struct side *a, struct side *b)
{
	struct dpflow_pool *pa = dpflow_ctx_pool(a->ctx);
	struct dpflow_pool *pb = dpflow_ctx_pool(b->ctx);

	for (unsigned p = 1; p <= N_OUT; p++) {
		unsigned n = a->n_copies[p] < b->n_copies[p] ? a->n_copies[p]
							     : b->n_copies[p];

		CHECK(a->n_copies[p] == b->n_copies[p],
		      "after packet %llu: port %u: %u mirror copies on the "
		      "cpu, %u on the gpu",
		      (unsigned long long)total_pkts, p, a->n_copies[p],
		      b->n_copies[p]);
		for (unsigned k = 0; k < n; k++) {
			total_copies++;
			CHECK(a->copy_rank[p][k] == b->copy_rank[p][k] &&
				  bytes_same(pa, a->copy[p][k], pb,
					     b->copy[p][k]),
			      "after packet %llu: port %u: mirror copy %u: "
			      "place %u / %u or bytes differ",
			      (unsigned long long)total_pkts, p, k,
			      a->copy_rank[p][k], b->copy_rank[p][k]);
		}
		dpflow_pool_free_bulk(pa, a->copy[p], a->n_copies[p]);
		dpflow_pool_free_bulk(pb, b->copy[p], b->n_copies[p]);
	}
}

/* Compare the burst's outcome on both sides, then free what was sent,
 * queued or handed over. */
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
		CHECK(a->kind[i] == b->kind[i] && a->where[i] == b->where[i],
		      "packet %llu: %s %d on the cpu, %s %d on the gpu "
		      "(reason cpu %s gpu %s)",
		      (unsigned long long)total_pkts, kind_names[a->kind[i]],
		      a->where[i], kind_names[b->kind[i]], b->where[i],
		      dpflow_drop_name(a->reason[i]),
		      dpflow_drop_name(b->reason[i]));
		if (a->kind[i] != b->kind[i] || a->where[i] != b->where[i])
			continue;
		if (a->kind[i] == OUT_DROP) {
			total_dropped++;
			CHECK(a->reason[i] == b->reason[i],
			      "packet %llu: drop reason cpu %s gpu %s",
			      (unsigned long long)total_pkts,
			      dpflow_drop_name(a->reason[i]),
			      dpflow_drop_name(b->reason[i]));
			continue;
		}
		if (a->kind[i] == OUT_PORT)
			total_sent++;
		else
			total_queued++;
		CHECK(a->rank[i] == b->rank[i],
		      "packet %llu: %s %d: position %u on the cpu, %u on the "
		      "gpu",
		      (unsigned long long)total_pkts, kind_names[a->kind[i]],
		      a->where[i], a->rank[i], b->rank[i]);
		CHECK(bytes_same(pa, a->slot[i], pb, b->slot[i]),
		      "packet %llu: output bytes differ (len cpu %u gpu %u)",
		      (unsigned long long)total_pkts, ma->data_len,
		      mb->data_len);
		CHECK(meta_same(ma, mb),
		      "packet %llu: metadata differs (color %u/%u, ct_state "
		      "%u/%u, ct_flags 0x%x/0x%x, reg0 %u/%u)",
		      (unsigned long long)total_pkts, ma->color, mb->color,
		      ma->ct_state, mb->ct_state, ma->ct_flags, mb->ct_flags,
		      ma->reg[0], mb->reg[0]);
		if (a->kind[i] == OUT_PORT) {
			dpflow_pool_free_bulk(pa, &a->slot[i], 1);
			dpflow_pool_free_bulk(pb, &b->slot[i], 1);
		}
	}
	compare_copies(a, b);
	dpflow_pool_free_bulk(pa, a->held, a->n_held);
	dpflow_pool_free_bulk(pb, b->held, b->n_held);
	for (uint16_t i = 0; i < n; i++) {
		a->pos_of[a->slot[i]] = NO_POS;
		b->pos_of[b->slot[i]] = NO_POS;
	}
}

/* Pipe statistics of pipe @i on both sides (and the device's). */
static void compare_pipe(struct side *a, struct side *b, unsigned i,
			 const char *when)
{
	struct dpflow_pipe *pa = dpflow_ctx_pipe(a->ctx, i);
	struct dpflow_pipe *pb = dpflow_ctx_pipe(b->ctx, i);
	struct dpflow_pipe_stats sa, sb, sd;

	dpflow_pipe_stats_get(pa, &sa);
	dpflow_pipe_stats_get(pb, &sb);
	sd = sb;
	if (b->g)
		CHECK(!dpflow_gpu_flow_pipe_stats(b->g, pb, &sd), "pipe stats");
	CHECK(sa.pkts == sb.pkts && sa.hits == sb.hits &&
		  sa.misses == sb.misses && sa.pkts == sd.pkts &&
		  sa.hits == sd.hits && sa.misses == sd.misses,
	      "%s: pipe %s: cpu %llu/%llu/%llu, gpu ctx %llu/%llu/%llu, "
	      "device %llu/%llu/%llu",
	      when, dpflow_pipe_name(pa), (unsigned long long)sa.pkts,
	      (unsigned long long)sa.hits, (unsigned long long)sa.misses,
	      (unsigned long long)sb.pkts, (unsigned long long)sb.hits,
	      (unsigned long long)sb.misses, (unsigned long long)sd.pkts,
	      (unsigned long long)sd.hits, (unsigned long long)sd.misses);
	CHECK(!memcmp(sa.color, sb.color, sizeof(sa.color)),
	      "%s: pipe %s: colours cpu %llu/%llu/%llu gpu %llu/%llu/%llu",
	      when, dpflow_pipe_name(pa), (unsigned long long)sa.color[0],
	      (unsigned long long)sa.color[1], (unsigned long long)sa.color[2],
	      (unsigned long long)sb.color[0], (unsigned long long)sb.color[1],
	      (unsigned long long)sb.color[2]);
	CHECK(sa.ct_replaced == sb.ct_replaced &&
		  sa.ct_nat_exhausted == sb.ct_nat_exhausted,
	      "%s: pipe %s: connections replaced/nat_exhausted cpu %llu/%llu "
	      "gpu %llu/%llu",
	      when, dpflow_pipe_name(pa), (unsigned long long)sa.ct_replaced,
	      (unsigned long long)sa.ct_nat_exhausted,
	      (unsigned long long)sb.ct_replaced,
	      (unsigned long long)sb.ct_nat_exhausted);
	CHECK(sa.ct_live == sb.ct_live && sa.ct_created == sb.ct_created &&
		  sa.ct_expired == sb.ct_expired &&
		  sa.ct_invalid == sb.ct_invalid &&
		  sa.ct_refused == sb.ct_refused,
	      "%s: pipe %s: connections live/created/expired/invalid/refused "
	      "cpu %llu/%llu/%llu/%llu/%llu gpu %llu/%llu/%llu/%llu/%llu",
	      when, dpflow_pipe_name(pa), (unsigned long long)sa.ct_live,
	      (unsigned long long)sa.ct_created,
	      (unsigned long long)sa.ct_expired,
	      (unsigned long long)sa.ct_invalid,
	      (unsigned long long)sa.ct_refused, (unsigned long long)sb.ct_live,
	      (unsigned long long)sb.ct_created,
	      (unsigned long long)sb.ct_expired,
	      (unsigned long long)sb.ct_invalid,
	      (unsigned long long)sb.ct_refused);
}

/* Per-entry counters of pipe @i on both sides (and the device's). */
static void compare_entries(struct side *a, struct side *b, unsigned i,
			    const char *when)
{
	struct dpflow_pipe *pa = dpflow_ctx_pipe(a->ctx, i);
	struct dpflow_pipe *pb = dpflow_ctx_pipe(b->ctx, i);

	for (uint32_t k = 0; k < dpflow_pipe_size(pa); k++) {
		const struct dpflow_entry *ea = dpflow_pipe_entry(pa, k);
		const struct dpflow_entry *eb = dpflow_pipe_entry(pb, k);
		struct dpflow_counter ca, cb, cd;

		CHECK(!ea == !eb, "%s: pipe %s slot %u: entry on one side only",
		      when, dpflow_pipe_name(pa), k);
		if (!ea || !eb)
			continue;
		if (cpu_only) /* b's counts sit in a shard it does not sum:
				 no data thread of its own */
			continue;
		dpflow_entry_counter(ea, &ca);
		dpflow_entry_counter(eb, &cb);
		cd = cb;
		if (b->g)
			CHECK(!dpflow_gpu_flow_entry_counter(b->g, eb, &cd),
			      "entry counter");
		CHECK(ca.pkts == cb.pkts && ca.bytes == cb.bytes &&
			  ca.pkts == cd.pkts && ca.bytes == cd.bytes,
		      "%s: pipe %s entry %u: cpu %llu pkts %llu bytes, gpu "
		      "ctx %llu/%llu, device %llu/%llu",
		      when, dpflow_pipe_name(pa), k,
		      (unsigned long long)ca.pkts, (unsigned long long)ca.bytes,
		      (unsigned long long)cb.pkts, (unsigned long long)cb.bytes,
		      (unsigned long long)cd.pkts,
		      (unsigned long long)cd.bytes);
	}
}

/* Counters of every pipe and entry, shared counters, RSS queues and
 * drops, on both sides. */
static void compare_counters(struct side *a, struct side *b, const char *when)
{
	uint64_t da[DPFLOW_DROP__COUNT], db[DPFLOW_DROP__COUNT];

	for (unsigned i = 0; i < dpflow_ctx_pipe_count(a->ctx); i++) {
		compare_pipe(a, b, i, when);
		compare_entries(a, b, i, when);
	}
	for (uint32_t id = 1; id <= dpflow_ctx_shared_counters(a->ctx); id++) {
		struct dpflow_counter ca = {0, 0}, cb = {0, 0};

		dpflow_shared_counter_read(a->ctx, id, &ca);
		dpflow_shared_counter_read(b->ctx, id, &cb);
		CHECK(ca.pkts == cb.pkts && ca.bytes == cb.bytes,
		      "%s: shared counter %u: cpu %llu/%llu gpu %llu/%llu",
		      when, id, (unsigned long long)ca.pkts,
		      (unsigned long long)ca.bytes, (unsigned long long)cb.pkts,
		      (unsigned long long)cb.bytes);
	}
	for (unsigned q = 0; q < dpflow_ctx_rss_queues(a->ctx); q++)
		CHECK(dpflow_ctx_rss_count(a->ctx, (uint16_t)q) ==
			  dpflow_ctx_rss_count(b->ctx, (uint16_t)q),
		      "%s: rss queue %u: cpu %llu gpu %llu", when, q,
		      (unsigned long long)dpflow_ctx_rss_count(a->ctx,
							       (uint16_t)q),
		      (unsigned long long)dpflow_ctx_rss_count(b->ctx,
							       (uint16_t)q));
	dpflow_ctx_drops(a->ctx, da);
	dpflow_ctx_drops(b->ctx, db);
	for (unsigned d = 0; d < DPFLOW_DROP__COUNT; d++)
		CHECK(da[d] == db[d], "%s: drops %s: cpu %llu gpu %llu", when,
		      dpflow_drop_name(d), (unsigned long long)da[d],
		      (unsigned long long)db[d]);
}

static uint8_t frames[DPFLOW_BURST_MAX][2048];
static uint32_t lens[DPFLOW_BURST_MAX];

/* The clock between bursts: mostly a fraction of a millisecond, at times
 * a few, now and then hundreds (timeouts fire). */
static void clock_step(void)
{
	fake_now += rnd() % 8 == 0 ? rnd() % 3000000 : rnd() % 400000;
	if (rnd() % 256 == 0)
		fake_now += 50000000 + rnd() % 300000000;
}

/* One burst through both sides: random packets, and with @of_flows mostly
 * packets of flows. */
static int one_burst(struct side *a, struct side *b, bool of_flows)
{
	uint16_t n = (uint16_t)(rnd() % 4 == 0 ? 1 + rnd() % DPFLOW_BURST_MAX
					       : DPFLOW_BURST_MAX);

	clock_step();
	for (uint16_t i = 0; i < n; i++)
		do {
			lens[i] = of_flows && rnd() % 100 < 85
				      ? flow_frame(frames[i], 1600)
				      : rand_frame(frames[i], 1600);
		} while (!lens[i]);
	if (side_run(a, frames, lens, n) || side_run(b, frames, lens, n))
		return -1;
	compare_burst(a, b, n);
	return n;
}

/* Publish the queued entry operations of one side (the CPU side offline
 * meanwhile, as flow.h asks; the GPU plan synced). */
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

static int batch_both(struct side *a, struct side *b, const char *what)
{
	int ra = 0, rb = 0;

	if (batch(a, &ra) || batch(b, &rb))
		return -1;
	CHECK(ra == rb, "%s: batch cpu %d gpu %d", what, ra, rb);
	return 0;
}

/* ---- aging --------------------------------------------------------------- */

#define AGED_LOG 64

struct age_log {
	struct side *s;
	struct dpflow_pipe *pipe;
	unsigned n;
	uint8_t key[AGED_LOG][8];
	uint64_t last[AGED_LOG];
};

static uint64_t total_aged, total_expired;

/* An entry aged out: note it, and queue its removal (added back later). */
static void on_aged(struct dpflow_entry *e, uint64_t last_hit_ns, void *arg)
{
	struct age_log *l = arg;
	struct side *s = l->s;

	if (l->n < AGED_LOG) {
		memcpy(l->key[l->n], dpflow_entry_cfg(e)->key, 8);
		l->last[l->n] = last_hit_ns;
	}
	l->n++;
	if (s->n_removed == DPFLOW_ARRAY_SIZE(s->removed))
		return;
	s->removed[s->n_removed].pipe = l->pipe;
	s->removed[s->n_removed].cfg = *dpflow_entry_cfg(e);
	s->n_removed++;
	dpflow_entry_remove(s->q, e, NULL);
}

/*
 * Age every pipe with aging and every CT pipe on both sides at the same
 * time (@budget slots, 0: all): the same entries with the same last hits,
 * the same number of connections expired. Aged entries are removed.
 */
static void age_round(struct side *a, struct side *b, uint32_t budget,
		      const char *name)
{
	unsigned ra = a->n_removed, rb = b->n_removed;

	for (unsigned i = 0; i < dpflow_ctx_pipe_count(a->ctx); i++) {
		struct dpflow_pipe *pa = dpflow_ctx_pipe(a->ctx, i);
		struct dpflow_pipe *pb = dpflow_ctx_pipe(b->ctx, i);
		const struct dpflow_pipe_cfg *c = dpflow_pipe_cfg(pa);
		struct age_log la, lb;
		uint32_t na, nb;

		if (!c->monitor.aging_ms && c->type != DPFLOW_PIPE_CT)
			continue;
		memset(&la, 0, sizeof(la));
		memset(&lb, 0, sizeof(lb));
		la.s = a;
		la.pipe = pa;
		lb.s = b;
		lb.pipe = pb;
		na = dpflow_pipe_age(pa, fake_now, budget, on_aged, &la);
		nb = dpflow_pipe_age(pb, fake_now, budget, on_aged, &lb);
		CHECK(na == nb && la.n == lb.n,
		      "%s: pipe %s: aging reported %u (%u calls) on the cpu, "
		      "%u (%u) on the gpu",
		      name, dpflow_pipe_name(pa), na, la.n, nb, lb.n);
		for (unsigned k = 0; k < la.n && k < lb.n && k < AGED_LOG; k++)
			CHECK(!memcmp(la.key[k], lb.key[k], 8) &&
				  la.last[k] == lb.last[k],
			      "%s: pipe %s: aged entry %u differs (last hit "
			      "%llu / %llu)",
			      name, dpflow_pipe_name(pa), k,
			      (unsigned long long)la.last[k],
			      (unsigned long long)lb.last[k]);
		if (c->type == DPFLOW_PIPE_CT)
			total_expired += na;
		else
			total_aged += na;
		compare_pipe(a, b, i, name);
	}
	if (a->n_removed != ra || b->n_removed != rb)
		batch_both(a, b, "removal of aged entries");
}

/* Add the removed entries again, on both sides. */
static void readd_aged(struct side *a, struct side *b)
{
	struct side *sides[2] = {a, b};

	if (!a->n_removed && !b->n_removed)
		return;
	for (unsigned s = 0; s < 2; s++) {
		struct dpflow_error err = {0};

		for (unsigned k = 0; k < sides[s]->n_removed; k++)
			CHECK(dpflow_entry_add(
				  sides[s]->q, sides[s]->removed[k].pipe,
				  &sides[s]->removed[k].cfg, NULL, &err),
			      "add again: %s", err.msg);
		sides[s]->n_removed = 0;
	}
	batch_both(a, b, "aged entries added again");
}

/* ---- meters changed between bursts --------------------------------------- */

/* Give an entry of pipe "police" a new meter (an update), and at times
 * configure a shared meter anew: the same on both sides. */
static void meter_change(struct side *s, uint32_t r)
{
	struct dpflow_pipe *p = dpflow_pipe_find(s->ctx, "police");
	struct dpflow_error err = {0};
	const struct dpflow_entry *e = NULL;

	for (uint32_t k = 0; p && !e && k < dpflow_pipe_size(p); k++)
		e = dpflow_pipe_entry(p, (r + k) % dpflow_pipe_size(p));
	if (e) {
		struct dpflow_entry_cfg c = *dpflow_entry_cfg(e);

		memset(&c.meter, 0, sizeof(c.meter));
		c.meter.alg =
		    r & 1 ? DPFLOW_METER_ALG_SRTCM : DPFLOW_METER_ALG_TRTCM;
		c.meter.color_aware = (r >> 1) & 1;
		c.meter.cir = 500000 + (r >> 4) % 4000000;
		c.meter.pir = c.meter.cir * 2;
		c.meter.cbs = 500 + r % 3000;
		c.meter.ebs = c.meter.alg == DPFLOW_METER_ALG_SRTCM
				  ? 1000 + (r >> 8) % 3000
				  : 0;
		c.meter.pbs = c.meter.alg == DPFLOW_METER_ALG_TRTCM
				  ? 2000 + (r >> 8) % 3000
				  : 0;
		CHECK(dpflow_entry_update(s->q, (struct dpflow_entry *)e, &c,
					  NULL, &err),
		      "meter update: %s", err.msg);
	}
	if (r % 3 == 0) {
		struct dpflow_meter_cfg mc;

		memset(&mc, 0, sizeof(mc));
		mc.alg = DPFLOW_METER_ALG_SRTCM;
		mc.cir = 500000 + r % 3000000;
		mc.cbs = 2000 + r % 5000;
		mc.ebs = 3000;
		CHECK(!dpflow_shared_meter_config(s->ctx, 1 + (r >> 3) % 2, &mc,
						  &err),
		      "shared meter: %s", err.msg);
	}
}

/* ---- a config ------------------------------------------------------------ */

static void print_pipes(struct side *a)
{
	for (unsigned i = 0; i < dpflow_ctx_pipe_count(a->ctx); i++) {
		struct dpflow_pipe *p = dpflow_ctx_pipe(a->ctx, i);
		struct dpflow_pipe_stats st;

		dpflow_pipe_stats_get(p, &st);
		printf("  pipe %-10s %-8s %8llu pkts %8llu hits %8llu misses",
		       dpflow_pipe_name(p),
		       dpflow_pipe_type_name(dpflow_pipe_cfg(p)->type),
		       (unsigned long long)st.pkts, (unsigned long long)st.hits,
		       (unsigned long long)st.misses);
		if (st.color[0] + st.color[1] + st.color[2])
			printf("; colours %llu/%llu/%llu",
			       (unsigned long long)st.color[0],
			       (unsigned long long)st.color[1],
			       (unsigned long long)st.color[2]);
		if (dpflow_pipe_cfg(p)->type == DPFLOW_PIPE_CT)
			printf("; conns live %llu created %llu expired %llu "
			       "invalid %llu refused %llu",
			       (unsigned long long)st.ct_live,
			       (unsigned long long)st.ct_created,
			       (unsigned long long)st.ct_expired,
			       (unsigned long long)st.ct_invalid,
			       (unsigned long long)st.ct_refused);
		printf("\n");
	}
}

/* The drop reasons the config saw (the same on both sides). */
static void print_drops(struct side *a)
{
	uint64_t d[DPFLOW_DROP__COUNT];
	bool any = false;

	dpflow_ctx_drops(a->ctx, d);
	for (unsigned r = 0; r < DPFLOW_DROP__COUNT; r++) {
		if (!d[r])
			continue;
		printf("%s %s %llu",
		       any ? "," : "  drops:", dpflow_drop_name(r),
		       (unsigned long long)d[r]);
		any = true;
	}
	if (any)
		printf("\n");
}

static int run_config(const struct config *c, uint64_t pkts)
{
	struct side a = {0}, b = {0};
	uint64_t done = 0, q0 = total_queued, c0 = total_copies;
	uint64_t ag0 = total_aged, ex0 = total_expired;
	unsigned f0 = failures, bursts = 0;

	if (side_open(&a, c, false) || side_open(&b, c, true)) {
		side_close(&a);
		side_close(&b);
		return -1;
	}
	while (done < pkts) {
		int n = one_burst(&a, &b, c->flags & CF_FLOWS);

		if (n < 0)
			break;
		done += (uint64_t)n;
		bursts++;
		if ((c->flags & CF_AGE) && bursts % 8 == 0) {
			/* at times, a pause without traffic first */
			if (bursts % 32 == 8)
				fake_now += 5000000 + rnd() % 100000000;
			age_round(&a, &b, bursts % 16 ? 0 : 5, c->name);
		}
		if ((c->flags & CF_AGE) && bursts % 24 == 0)
			readd_aged(&a, &b);
		if ((c->flags & CF_METER_UPD) && bursts % 16 == 0) {
			uint32_t r = rnd();

			meter_change(&a, r);
			meter_change(&b, r);
			batch_both(&a, &b, "meter change");
		}
	}
	compare_counters(&a, &b, c->name);
	printf("%-14s %8llu packets: %s\n", c->name, (unsigned long long)done,
	       failures == f0 ? "same answers" : "DIFFERENT");
	if (total_queued != q0 || total_copies != c0)
		printf("  %llu to rss queues and handlers, %llu mirror "
		       "copies\n",
		       (unsigned long long)(total_queued - q0),
		       (unsigned long long)(total_copies - c0));
	if (total_aged != ag0 || total_expired != ex0)
		printf("  aging: %llu entries aged out, %llu connections "
		       "expired\n",
		       (unsigned long long)(total_aged - ag0),
		       (unsigned long long)(total_expired - ex0));
	print_pipes(&a);
	print_drops(&a);
	side_close(&a);
	side_close(&b);
	return 0;
}

/* ---- entries changed between bursts ---------------------------------------
 */

/* Apply the same change to both sides' pipe "l4" of configs[0]: update,
 * remove or add an entry. */
static void change_entries(struct side *s, uint32_t seed)
{
	struct dpflow_pipe *p = dpflow_pipe_find(s->ctx, "l4");
	struct dpflow_error err = {0};
	uint32_t r = seed;

	for (unsigned op = 0; p && op < 4; op++) {
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
		char when[48];
		int n;

		change_entries(&a, seed);
		change_entries(&b, seed);
		if (batch_both(&a, &b, "update"))
			break;
		batches++;
		for (int k = 0; k < 3; k++) {
			n = one_burst(&a, &b, false);
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

/* What the GPU target refuses at bind, named: more mirror copies of a
 * packet than it keeps room for. */
static void check_refusals(void)
{
	static const char *const yaml[] = {
	    PORTS "pipes:\n"
		  "  - {name: m2, type: basic, match: [outer.l4.dport], "
		  "actions: [[{mirror: o1}, {mirror: o1}, {mirror: o1}, "
		  "{mirror: o1}, {mirror: o1}]], fwd: {port: o0}}\n"
		  "  - {name: m1, type: basic, root: in, match: "
		  "[outer.l4.sport], actions: [[{mirror: o2}, {mirror: o2}, "
		  "{mirror: o2}, {mirror: o2}, {mirror: o2}]], fwd: {pipe: "
		  "m2}}\n",
	};
	static const char *const word[] = {"mirror"};

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

	setvbuf(stdout, NULL, _IOLBF, 0);
	cpu_only = getenv("DPFLOW_GPU_FLOW_CPU_ONLY") != NULL;
	if (seed)
		rng_state = strtoull(seed, NULL, 0);
	if (!cpu_only && dpflow_gpu_count(&err) == 0) {
		printf("skipped: %s\n", err.msg);
		return 77;
	}
	/* the test's clock must be the library's */
	fake_now = 12345;
	if (dpflow_clock_ns() != 12345) {
		printf("FAIL: not linked with -Wl,--wrap=dpflow_clock_ns: the "
		       "targets would read different times\n");
		return 1;
	}
	fake_now = __real_dpflow_clock_ns();
	flows_init();
	printf("seed 0x%llx, %llu packets per config\n",
	       (unsigned long long)rng_state, (unsigned long long)per);
	for (unsigned i = 0; i < DPFLOW_ARRAY_SIZE(configs); i++)
		if (run_config(&configs[i], per))
			CHECK(0, "config %s did not run", configs[i].name);
	run_updates(per);
	if (!cpu_only)
		check_refusals();
	printf("%llu packets: %llu sent, %llu queued or handed over, %llu "
	       "dropped, %llu mirror copies; %llu entries aged, %llu "
	       "connections expired; %u failed checks\n",
	       (unsigned long long)total_pkts, (unsigned long long)total_sent,
	       (unsigned long long)total_queued,
	       (unsigned long long)total_dropped,
	       (unsigned long long)total_copies, (unsigned long long)total_aged,
	       (unsigned long long)total_expired, failures);
	return failures ? 1 : 0;
}
