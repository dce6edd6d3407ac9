/*
 * The l4lb workload's pipeline (BENCH.md): parse, a VIP match, Maglev
 * (a HASH pipe whose slots hold backend numbers), connection tracking that
 * keeps a flow's backend, and DNAT to the backend with the checksums
 * fixed. Written as a config, so that the CPU and GPU targets load the
 * same text; only the last pipe's forwarding differs.
 *
 *   vip (basic: ipv4.dst, proto, dport) -> maglev (hash, M slots: reg0 =
 *   backend + 1) -> conn (ct, user_reg reg0: an established flow gets the
 *   backend its first packet chose) -> dnat (basic on reg0: nat_dst_ip,
 *   counter) -> OUT_FWD
 *
 * With full_nat (the app's NAT mode in pipes): conn keeps reg0 in the
 * connection (save), takes its destination from the backends table
 * (basic on reg0, not visited: nat_dst_ip, nat_dst_port 8080) and its
 * source from a pool (198.51.100.1, ports 1024-65535), and translates
 * the packets itself; dnat then only sets the backend's MAC and counts.
 */
#ifndef DPFLOW_BENCH_L4LB_PIPE_H
#define DPFLOW_BENCH_L4LB_PIPE_H

#include <stdint.h>

#include "bench_common.h"

#define L4LB_MAGLEV_DEFAULT    65537u
#define L4LB_PIPE_BACKENDS_MAX 1024u
#define L4LB_VIP	       0xc000020au /* 192.0.2.10 */
#define L4LB_VIP_PORT	       80u
#define L4LB_BACKEND_NET       0x0a320000u /* 10.50.0.0/16: backend b is .b+1 */

struct l4lb_params {
	uint32_t flows;	   /* client flows (connections) */
	uint32_t backends; /* 1..L4LB_PIPE_BACKENDS_MAX */
	uint32_t maglev;   /* Maglev table size: a prime */
	uint64_t seed;
	uint32_t burst; /* packets a burst, 1..L4LB_BURST_MAX */
	/* the pipes do the app's full NAT through the ct pipe's values
	 * (DNAT from a backends table, SNAT from a pool), else DNAT only */
	uint8_t full_nat;
};

#define L4LB_SNAT	  0xc6336401u /* 198.51.100.1 */
#define L4LB_BACKEND_PORT 8080u

#define L4LB_BURST_MAX	64u
#define L4LB_APP_BURST	64u /* the app variants' default */
#define L4LB_PIPE_BURST 32u /* the pipe variant's: the runtime's */

/*
 * The Maglev lookup table (Eisenbud et al., NSDI 2016): @m slots (a
 * prime), each set to a backend in 0..@n-1 from the backends' preference
 * permutations, so that every backend holds floor(m/n) or ceil(m/n) slots.
 * Backend b's offset and skip come from hashes of its name "backend-b".
 * 0, or -1 for bad sizes.
 */
int l4lb_maglev_fill(uint32_t m, uint32_t n, uint32_t *table);

/*
 * The config, malloc'd (the caller frees it): two ring ports, in and out,
 * and the four pipes with their entries; the dnat pipe forwards to
 * @out_fwd (a flow-style YAML forwarding, e.g. "{port: out}"). NULL when
 * out of memory or @p is invalid (message on stderr).
 */
char *l4lb_yaml(const struct l4lb_params *p, const char *out_fwd);

/* Client flow @i: a TCP connection from 10.0.0.0/8 to the VIP. */
void l4lb_flow(const struct l4lb_params *p, uint32_t i, struct bench_flow *f);

/*
 * Frame of flow @f: 64-byte Ethernet/IPv4/TCP with the ACK flag (a packet
 * of an established connection) into @buf (>= 64 bytes). Its length.
 */
uint32_t l4lb_frame(const struct bench_flow *f, uint8_t *buf);

#endif /* DPFLOW_BENCH_L4LB_PIPE_H */
