/*
 * The L4 load balancer app on one core, in memory (bench_l4lb_app.c):
 * `dpflow bench l4lb` variants app-nat and app-ipip.
 */
#ifndef DPFLOW_BENCH_L4LB_APP_H
#define DPFLOW_BENCH_L4LB_APP_H

#include <stdint.h>

#include "bench_l4lb_pipe.h"

/*
 * Build the app for @p's flows and backends in @mode (enum l4lb_mode),
 * check the first two passes over @packets frames, then time the steady
 * state: best of @trials runs of @seconds. Fills *@pps and *@cpp (TSC
 * cycles a packet). 0, or -1 when setup or the check failed (message on
 * stderr). The app's counters go to stderr.
 */
int bench_l4lb_app(const struct l4lb_params *p, uint32_t packets, uint8_t mode,
		   double seconds, unsigned trials, double *pps, double *cpp);

#endif /* DPFLOW_BENCH_L4LB_APP_H */
