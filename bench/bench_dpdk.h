/*
 * DPDK peers of the benchmarks, compiled when libdpdk is present
 * (DPFLOW_HAVE_DPDK). EAL runs with --no-huge --no-pci --no-shconf on
 * lcore 0, once per process.
 */
#ifndef DPFLOW_BENCH_DPDK_H
#define DPFLOW_BENCH_DPDK_H

#include <stdint.h>

int bench_dpdk_init(void);

/*
 * rte_net_get_ptype() over @n frames, trials of @seconds; the best rate in
 * *@best_mpps. Returns 0, or -1 if DPDK could not be set up.
 */
int bench_dpdk_parse(const uint8_t *const *frames, const uint16_t *lens,
		     uint32_t n, double seconds, unsigned trials,
		     double *best_mpps);

#endif /* DPFLOW_BENCH_DPDK_H */
