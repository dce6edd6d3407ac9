/*
 * `dpflow bench l4lb`: the balancer's workloads (bench/bench_l4lb*.c,
 * bench/bench_gpu_l4lb.c), registered with the dpflow tool through the
 * app registry (dpflow/app.h). Compiled into the dpflow tool beside the
 * benchmark code, not into the app's library: other programs that link
 * the app have no benchmarks.
 */
#include <stddef.h>

#include "dpflow/app.h"

#include "bench.h"

static const struct dpflow_app_workload l4lb_workload = {
    .app = "l4lb",
    .name = "l4lb",
    .summary = "load balancer: VIP, Maglev, CT, DNAT; 1M flows, 64 backends",
    .run = bench_l4lb,
#ifdef DPFLOW_HAVE_GPU
    .run_gpu = bench_gpu_l4lb,
#else
    .run_gpu = NULL,
#endif
    .gpu = true,
};

DPFLOW_APP_WORKLOAD_REGISTER(l4lb_workload)
