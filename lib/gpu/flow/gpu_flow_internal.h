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

/* The benchmark kernel's blocks: threads, the blocks an SM must hold (a
 * register budget for the compiler), and the largest packet stride it
 * stages in shared memory. */
#define GPU_BENCH_THREADS    256
#define GPU_BENCH_MIN_BLOCKS 3
#define GPU_BENCH_STRIDE_MAX 128

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

/* ---- queue-fed kernel support (gpu_flow.cu's last section) ---------------
 *
 * What gpu_flow_queue.cu needs of a plan: facts about its pipes, and a
 * second copy of its versioned parts for the version flip.
 */
struct gpu_flow_qk_info {
	int dev;	   /* the plan's CUDA device */
	int root;	   /* the port's root pipe, -1: none */
	uint32_t path_max; /* steps of a packet's path, at most */
	bool edits;	   /* some action rewrites packets */
	bool moves;	   /* some action moves the frame's start (VLAN push
			      or pop, encap, decap) */
	bool encap;	   /* some action encapsulates (its UDP checksum may
			      read the whole frame) */
	/* what the queue-fed kernel cannot run ("pipe 'x': a meter"), or "" */
	char refused[96];
};
void gpu_flow_qk_info(const struct dpflow_gpu_flow *g, uint16_t port,
		      struct gpu_flow_qk_info *info);
/* True when an entry batch was published since the last sync or build. */
bool gpu_flow_qk_stale(const struct dpflow_gpu_flow *g);

/*
 * Copy 1 of the plan's images, entry arrays and pipe array (copy 0 is the
 * plan's own); counters are shared. Create and destroy while no kernel
 * uses copy 1 (destroy frees device memory: it waits for every kernel).
 */
struct gpu_flow_versions;
struct gpu_flow_versions *gpu_flow_versions_create(struct dpflow_gpu_flow *g,
						   struct dpflow_error *err);
void gpu_flow_versions_destroy(struct dpflow_gpu_flow *g,
			       struct gpu_flow_versions *v);
/* Device address of copy @copy's pipe array (struct gpu_pipe[n_pipes]). */
const void *gpu_flow_versions_plan(const struct dpflow_gpu_flow *g,
				   const struct gpu_flow_versions *v,
				   unsigned copy);
/*
 * Write the context's current generation into copy @copy (which no
 * kernel may be reading), restart the counters of entries new since the
 * last build, and wait for the copies. Copies only: safe while a
 * persistent kernel reads the other copy. 0 or a negative errno with @err.
 */
int gpu_flow_versions_build(struct dpflow_gpu_flow *g,
			    struct gpu_flow_versions *v, unsigned copy,
			    struct dpflow_error *err);

#endif /* DPFLOW_GPU_FLOW_INTERNAL_H */
