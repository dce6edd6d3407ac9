/*
 * The l4lb workload on the CPU target (bench_l4lb.c), also the CPU side of
 * `dpflow bench l4lb --target gpu` (bench_gpu_l4lb.c).
 */
#ifndef DPFLOW_BENCH_L4LB_H
#define DPFLOW_BENCH_L4LB_H

#include <stdint.h>

#include "dpflow/config.h"
#include "dpflow/dpflow.h"

#include "bench_l4lb_pipe.h"

/*
 * The pipeline loaded from l4lb_yaml() with the dnat pipe forwarding to a
 * handler that keeps the packets in their slots, and @n_pkts frames: packet
 * i is flow i % flows. A pass first writes each burst's frames back as
 * they arrived (DNAT rewrote them), then runs the burst.
 */
struct l4lb_cpu {
	struct l4lb_params p;
	struct dpflow_ctx *ctx;
	struct dpflow_pool *pool;
	uint32_t n_pkts, burst;
	uint32_t *idx;
	uint8_t (*frame)[64]; /* as they arrive */
	uint16_t *len;
};

int l4lb_cpu_create(struct l4lb_cpu *c, const struct l4lb_params *p,
		    uint32_t n_pkts);
void l4lb_cpu_destroy(struct l4lb_cpu *c);

/* One pass over packets [@lo, @hi) (the calling thread is online). */
uint64_t l4lb_cpu_pass(struct l4lb_cpu *c, uint32_t lo, uint32_t hi);

/*
 * The first pass, checked against a reference computed here: each packet
 * leaves with the destination address of the backend that the Maglev
 * table's slot dpflow_hash32(5-tuple) % size names, valid IPv4 and TCP
 * checksums, and the dnat pipe counted every packet. 0 or -1 (stderr).
 */
int l4lb_cpu_check(struct l4lb_cpu *c);

/* The ones' complement sum of @n bytes (big-endian words) plus @sum, and
 * its fold to 16 bits: the benchmarks' own checksum checks. */
uint32_t l4lb_csum_add(uint32_t sum, const uint8_t *p, unsigned n);
uint16_t l4lb_csum_fold(uint32_t sum);

/*
 * @workers threads over equal slices of the packets for @seconds, best of
 * @trials: packets per second of the whole, and TSC cycles per packet of
 * one worker in *@cpp.
 */
double l4lb_cpu_run(struct l4lb_cpu *c, unsigned workers, double seconds,
		    unsigned trials, double *cpp);

#endif /* DPFLOW_BENCH_L4LB_H */
