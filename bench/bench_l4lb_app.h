/*
 * The L4 load balancer app on one core, in memory (bench_l4lb_app.c):
 * `dpflow bench l4lb` variants app-nat and app-ipip.
 */
#ifndef DPFLOW_BENCH_L4LB_APP_H
#define DPFLOW_BENCH_L4LB_APP_H

#include <stdbool.h>
#include <stdint.h>

#include "bench_common.h"

#include "bench_l4lb_pipe.h"

/*
 * Build the app for @p's flows and backends in @mode (enum l4lb_mode),
 * check the first two passes over @packets frames, then time the steady
 * state: @trials runs of @seconds, the best in *@ob; with @peer and DPDK,
 * the DPDK peer's runs (bench_l4lb_app.c) take turns with them, its best
 * in *@pb and its name in *@peer_name (else NULL). 0, or -1 when setup or
 * a check failed (message on stderr). The app's counters go to stderr.
 */
int bench_l4lb_app(const struct l4lb_params *p, uint32_t packets, uint8_t mode,
		   double seconds, unsigned trials, bool peer,
		   struct bench_best *ob, struct bench_best *pb,
		   const char **peer_name);

/*
 * Time @ours (one pass over the steady state, @ours_arg) for @trials runs
 * of @seconds, the best in *@ob, taking turns with the DPDK peer on @p's
 * flows and the @n_pkts frames @frame (@len bytes) when @peer and DPDK
 * are there (its best in *@pb, its name in *@peer_name, else NULL). 0, or
 * -1 when the peer could not be set up (message on stderr).
 */
int bench_l4lb_paired(const struct l4lb_params *p, uint8_t (*frame)[64],
		      const uint16_t *len, uint32_t n_pkts, bench_pass_fn ours,
		      void *ours_arg, double seconds, unsigned trials,
		      bool peer, struct bench_best *ob, struct bench_best *pb,
		      const char **peer_name);

#endif /* DPFLOW_BENCH_L4LB_APP_H */
