/*
 * The GPU target (../shared DESIGN.md §4): device memory, queues and
 * persistent kernels (lib/gpu/core), and pipe graphs run on the GPU
 * (lib/gpu/flow). Built when nvcc is found (DPFLOW_HAVE_GPU); every call
 * reports a missing or failing GPU as an error, never a crash.
 */
#ifndef DPFLOW_GPU_H
#define DPFLOW_GPU_H

#include "dpflow/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Number of usable CUDA devices (0 when there is none, the driver is
 * missing or the runtime fails); @err, when not NULL, says why on 0.
 */
int dpflow_gpu_count(struct dpflow_error *err);

#ifdef __cplusplus
}
#endif

#endif /* DPFLOW_GPU_H */
