/*
 * The acl-10k rule set and its packets, shared by `dpflow bench acl-10k`
 * (bench_acl.c), its GPU target (bench_gpu.c) and the tests that replay
 * them (tests/unit/test_acl_gpu_path.c): one generator, so that the same
 * seed gives every user the same rules and the same packets.
 *
 * Rules are IPv4 5-tuple rules in the style of ClassBench ACL sets:
 * source and destination prefixes drawn from a few hundred networks
 * (lengths /0 to /32, at least one of the two /8 or longer), protocol
 * TCP, UDP, ICMP or any, source ports mostly any, destination ports exact,
 * ranges or any; a rule's rank (its priority) is its place in the list.
 * Keys fall inside a random rule match_pct percent of the time, the rest
 * are random (some of those match wide rules too).
 *
 * All randomness comes from one splitmix64 stream held in the generator:
 * what a user draws, and in which order, decides the rule set and the
 * packets. The sequence is: bench_acl_gen_init (the networks), the rules
 * in list order, then the keys or flows. Not thread safe: one generator
 * per thread.
 */
#ifndef DPFLOW_BENCH_ACL_GEN_H
#define DPFLOW_BENCH_ACL_GEN_H

#include <stdbool.h>
#include <stdint.h>

#include "dpflow/flow.h"

#include "bench_common.h" /* struct bench_flow */
#include "bench_dpdk.h"	  /* struct bench_acl_rule */

/* splitmix64: a 64-bit state that every draw advances. */
struct bench_rng {
	uint64_t state;
};

uint64_t bench_rng64(struct bench_rng *r);
/* Uniform-ish in [0, n), n > 0 (modulo bias, as the benches always had). */
uint32_t bench_rng_below(struct bench_rng *r, uint32_t n);

#define BENCH_ACL_SRC_NETS 256
#define BENCH_ACL_DST_NETS 64

/* Key words of a rule or a packet: proto, src, dst, sport, dport. */
#define BENCH_ACL_FIELDS 5

struct bench_acl_gen {
	struct bench_rng rng;
	uint32_t src_net[BENCH_ACL_SRC_NETS]; /* /12 networks */
	uint32_t dst_net[BENCH_ACL_DST_NETS]; /* /16 networks */
};

/* Seed @g with @seed and draw the networks rules and keys come from. */
void bench_acl_gen_init(struct bench_acl_gen *g, uint64_t seed);

/* The next rule, ranked @rank (also its value). */
void bench_acl_gen_rule(struct bench_acl_gen *g, struct bench_acl_rule *r,
			uint32_t rank);

/*
 * The next key: BENCH_ACL_FIELDS words in host order, inside a random rule
 * of @rules (@n of them) @match_pct percent of the time; any protocol.
 */
void bench_acl_gen_key(struct bench_acl_gen *g,
		       const struct bench_acl_rule *rules, uint32_t n,
		       uint32_t match_pct, uint32_t *k);

/*
 * The next packet's key as bench_acl_gen_key draws it, its protocol made
 * TCP or UDP (frames carry one or the other; another draw when it was
 * neither), and that key as a flow in @f (NULL: the key only). Every such
 * 64-byte frame reaches the pipe: UDP to a port the parser takes for a
 * tunnel (VXLAN 4789, GENEVE 6081) is made TCP, since the frame cannot
 * hold the inner packet and would be dropped by the parser.
 */
void bench_acl_gen_pkt_key(struct bench_acl_gen *g,
			   const struct bench_acl_rule *rules, uint32_t n,
			   uint32_t match_pct, uint32_t *k,
			   struct bench_flow *f);

/* A key of BENCH_ACL_FIELDS words as a flow (addresses big-endian). */
void bench_acl_key_flow(const uint32_t *k, struct bench_flow *f);

/*
 * Rule @r as an entry of an ACL pipe on the outer 5-tuple fields in
 * bench_acl_pipe_fields' order: proto and prefixes as value/mask, ports
 * as ranges, priority the rank.
 */
void bench_acl_rule_entry(const struct bench_acl_rule *r,
			  struct dpflow_entry_cfg *e);

/* The pipe's per-entry fields, in the order of the table's key words. */
extern const uint16_t bench_acl_pipe_fields[BENCH_ACL_FIELDS];

/* The mask of a /@len IPv4 prefix. */
uint32_t bench_acl_prefix_mask(uint8_t len);

/* Does rule @r match key @k? (Ranges inclusive, prefixes masked.) */
bool bench_acl_rule_matches(const struct bench_acl_rule *r, const uint32_t *k);

/*
 * The value of the first rule of @rules (@n, in rank order) matching @k,
 * or DPFLOW_TABLE_MISS; its index in *@at when @at is not NULL (@n on a
 * miss). The reference the classifiers are checked against.
 */
uint32_t bench_acl_linear_scan(const struct bench_acl_rule *rules, uint32_t n,
			       const uint32_t *k, uint32_t *at);

#endif /* DPFLOW_BENCH_ACL_GEN_H */
