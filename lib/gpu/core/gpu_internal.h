/*
 * lib/gpu/core internals: the host-side objects behind gpu.h and the
 * helpers that turn CUDA errors into struct dpflow_error. CUDA host code
 * (included by the .cu files of this folder only).
 */
#ifndef DPFLOW_GPU_INTERNAL_H
#define DPFLOW_GPU_INTERNAL_H

#include <pthread.h>

#include <cuda_runtime.h>

#include "dpflow/gpu.h"
#include "dpflow/gpu_dev.cuh"

struct gpu_alloc {
	struct gpu_alloc *next;
	void *raw;  /* what CUDA returned */
	void *host; /* aligned CPU address (NULL for MEM_GPU) */
	void *dev;  /* aligned device address */
	enum dpflow_gpu_mem_type type;
};

struct gpu_reg {
	struct gpu_reg *next;
	const struct dpflow_pool *pool;
	void *dev_base;
};

struct dpflow_gpu {
	int dev;
	char name[256];
	pthread_mutex_t lock; /* allocs, regs */
	struct gpu_alloc *allocs;
	struct gpu_reg *regs;
};

struct dpflow_gpu_queue {
	struct dpflow_gpu *gpu;
	struct dpflow_pool *pool;
	struct dpflow_gpu_qdev *qdev;  /* device memory */
	struct dpflow_gpu_qdev shadow; /* host copy of qdev's constants */
	/* CPU_GPU memory, CPU addresses */
	struct dpflow_gpu_desc *rx, *tx;
	uint64_t *rx_prod; /* ZERO_COPY doorbell */
	uint64_t *tx_cons;
	uint32_t size, mask, hdr_split;
	enum dpflow_gpu_path path;
	/*
	 * DEVICE path: frames packed (64-byte aligned) into a byte ring in
	 * device memory, mirrored by a pinned staging ring on the host; one
	 * record per frame, given back in order once transmitted or dropped.
	 * Owned by the proxy thread while it runs.
	 */
	uint8_t *dev_ring; /* device memory, ring_bytes */
	uint8_t *stage;	   /* pinned host mirror */
	uint64_t ring_bytes;
	uint32_t copy_len;     /* bytes of a frame given to the GPU, at most */
	uint32_t copy_max;     /* copy_len rounded up: room per frame */
	uint32_t n_recs;       /* records (frames in flight), a power of two */
	uint64_t *rec_end;     /* per record: byte counter after it */
	uint8_t *rec_done;     /* per record: given back */
	uint64_t *db_stage;    /* pinned doorbell values, one per record */
	uint32_t *rec_of_slot; /* pool slot -> record */
	uint64_t bhead, btail; /* bytes taken / given back */
	uint64_t rhead, rtail; /* records taken / given back */
	cudaStream_t stream;   /* the proxy's copies (non-blocking) */
	bool proxied;
};

/* Map a CUDA error to an errno value. */
int dpflow_gpu_errno_(cudaError_t rc);
/*
 * Fill @err with "@what: CUDA's string (its name)" and return -errno.
 */
int dpflow_gpu_err_(struct dpflow_error *err, cudaError_t rc, const char *field,
		    const char *what);

#endif /* DPFLOW_GPU_INTERNAL_H */
