/*
 * What gpu_flow.cu lends the benchmark (gpu_flow_bench.cu): the plan's
 * benchmark kernel and the sizes of its outputs. Internal to lib/gpu/flow.
 */
#ifndef DPFLOW_GPU_FLOW_INTERNAL_H
#define DPFLOW_GPU_FLOW_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime.h>

#include "dpflow/gpu_flow.h"

/* Bytes of one packet's verdict, and of one packet's path. */
size_t gpu_flow_bench_res_bytes(void);
size_t gpu_flow_bench_path_bytes(const struct dpflow_gpu_flow *g);
/* The plan's CUDA device. */
int gpu_flow_bench_dev(const struct dpflow_gpu_flow *g);
/* Verdict @i of the host copy @res of the verdicts. */
void gpu_flow_bench_verdict(const void *res, uint64_t i, uint8_t *sent,
			    uint16_t *value);
/*
 * Queue on @stream the benchmark kernel over @n packets of @hstride bytes
 * at @d_hdrs (frames at offset 0, lengths @d_lens), received on @port;
 * verdicts to @d_res, paths to @d_path (device memory). Syncs the plan
 * first when a batch was published. 0 or a negative errno with @err.
 */
int gpu_flow_bench_launch(struct dpflow_gpu_flow *g, uint16_t port,
			  uint8_t *d_hdrs, uint32_t hstride,
			  const uint16_t *d_lens, uint64_t n, void *d_res,
			  void *d_path, unsigned blocks, unsigned threads,
			  cudaStream_t stream, struct dpflow_error *err);

#endif /* DPFLOW_GPU_FLOW_INTERNAL_H */
