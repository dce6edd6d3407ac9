/*
 * GPU packet queues (gpu.h, protocol in gpu_dev.cuh): two descriptor rings
 * in CPU_GPU memory, the device handle in device memory, and for the
 * DEVICE path the device byte ring, its pinned staging mirror and the
 * doorbell values the proxy copies after each burst.
 */
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "gpu/core/gpu_internal.h"

/* Allocation unit of the DEVICE path's byte rings. */
#define RING_ALLOC_UNIT (2u << 20)

#define QUEUE_SIZE_DEFAULT 1024
#define QUEUE_SIZE_MAX	   (1u << 20)

static uint32_t round64(uint32_t v)
{
	return (v + 63) & ~63u;
}

extern "C" struct dpflow_gpu_queue *
dpflow_gpu_queue_create(struct dpflow_gpu *gpu,
			const struct dpflow_gpu_queue_params *params,
			struct dpflow_error *err)
{
	struct dpflow_gpu_queue *q;
	struct dpflow_pool *pool = params ? params->pool : NULL;
	struct dpflow_gpu_qdev *sh;
	void *h, *d_rx, *d_tx, *d_idx;
	uint32_t size, frame_max;
	cudaError_t rc;

	if (!gpu || !pool) {
		dpflow_error_set(err, EINVAL, "pool",
				 "a queue needs a GPU and "
				 "a pool");
		return NULL;
	}
	size = params->size ? params->size : QUEUE_SIZE_DEFAULT;
	if (size < 2 || size > QUEUE_SIZE_MAX || (size & (size - 1))) {
		dpflow_error_set(err, EINVAL, "size",
				 "queue size %u is not a power of two in "
				 "2..%u",
				 size, QUEUE_SIZE_MAX);
		return NULL;
	}
	if (params->path != DPFLOW_GPU_PATH_ZERO_COPY &&
	    params->path != DPFLOW_GPU_PATH_DEVICE) {
		dpflow_error_set(err, EINVAL, "path", "unknown data path %d",
				 (int)params->path);
		return NULL;
	}
	q = (struct dpflow_gpu_queue *)calloc(1, sizeof(*q));
	if (!q) {
		dpflow_error_set(err, ENOMEM, "queue", "out of memory");
		return NULL;
	}
	q->gpu = gpu;
	q->pool = pool;
	q->size = size;
	q->mask = size - 1;
	q->hdr_split = params->hdr_split;
	q->path = params->path;
	sh = &q->shadow;

	if (dpflow_gpu_mem_alloc(gpu, (size_t)size * sizeof(*q->rx), 0,
				 DPFLOW_GPU_MEM_CPU_GPU, &h, &d_rx, err) < 0)
		goto fail;
	q->rx = (struct dpflow_gpu_desc *)h;
	if (dpflow_gpu_mem_alloc(gpu, (size_t)size * sizeof(*q->tx), 0,
				 DPFLOW_GPU_MEM_CPU_GPU, &h, &d_tx, err) < 0)
		goto fail;
	q->tx = (struct dpflow_gpu_desc *)h;
	/* rx_prod and tx_cons, a line apart */
	if (dpflow_gpu_mem_alloc(gpu, 256, 0, DPFLOW_GPU_MEM_CPU_GPU, &h,
				 &d_idx, err) < 0)
		goto fail;
	q->rx_prod = (uint64_t *)h;
	q->tx_cons = (uint64_t *)h + 16;
	for (uint32_t i = 0; i < size; i++)
		q->rx[i].seq = i;
	if (dpflow_gpu_mem_alloc(gpu, sizeof(*q->qdev), 128, DPFLOW_GPU_MEM_GPU,
				 NULL, &h, err) < 0)
		goto fail;
	q->qdev = (struct dpflow_gpu_qdev *)h;

	sh->rx = (struct dpflow_gpu_desc *)d_rx;
	sh->tx = (struct dpflow_gpu_desc *)d_tx;
	sh->tx_cons = (uint64_t *)d_idx + 16;
	sh->size = size;
	sh->mask = size - 1;
	sh->hdr_split = params->hdr_split;
	sh->path = (uint32_t)params->path;
	frame_max = (uint32_t)pool->headroom + pool->data_room;

	if (params->path == DPFLOW_GPU_PATH_ZERO_COPY) {
		struct dpflow_pool view;

		if (dpflow_gpu_pool_register(gpu, pool, err) < 0)
			goto fail;
		dpflow_gpu_pool_dev_view(gpu, pool, &view);
		sh->rx_prod = (uint64_t *)d_idx;
		sh->data = view.base;
		sh->stride = pool->stride;
	} else {
		uint32_t recs =
		    params->dev_slots ? params->dev_slots : 2 * size;
		uint64_t ring_alloc;

		if (recs & (recs - 1)) {
			dpflow_error_set(err, EINVAL, "dev_slots",
					 "dev_slots %u is not a power of two",
					 recs);
			goto fail;
		}
		q->copy_len = params->hdr_split && params->hdr_split < frame_max
				  ? params->hdr_split
				  : frame_max;
		q->copy_max = round64(q->copy_len);
		q->n_recs = recs;
		q->ring_bytes = (uint64_t)recs * q->copy_max;
		/*
		 * Both rings in allocations of whole 2 MiB units: on the
		 * H200, a burst's copy across a 4 KiB page of a 256 KiB
		 * ring (header split) was refused with "invalid argument"
		 * while the same bytes went in 64-byte copies; small
		 * allocations are carved out of shared units by CUDA, and a
		 * unit of their own avoids whatever range check that trips.
		 */
		ring_alloc = (q->ring_bytes + RING_ALLOC_UNIT - 1) &
			     ~(uint64_t)(RING_ALLOC_UNIT - 1);
		if (dpflow_gpu_mem_alloc(gpu, ring_alloc, 4096,
					 DPFLOW_GPU_MEM_GPU, NULL, &h, err) < 0)
			goto fail;
		q->dev_ring = (uint8_t *)h;
		if (dpflow_gpu_mem_alloc(gpu, ring_alloc, 4096,
					 DPFLOW_GPU_MEM_CPU_GPU, &h, NULL,
					 err) < 0)
			goto fail;
		q->stage = (uint8_t *)h;
		if (dpflow_gpu_mem_alloc(gpu, (size_t)recs * 8, 0,
					 DPFLOW_GPU_MEM_CPU_GPU, &h, NULL,
					 err) < 0)
			goto fail;
		q->db_stage = (uint64_t *)h;
		q->rec_end = (uint64_t *)calloc(recs, sizeof(uint64_t));
		q->rec_done = (uint8_t *)calloc(recs, 1);
		q->rec_of_slot =
		    (uint32_t *)calloc(pool->n_slots, sizeof(uint32_t));
		if (!q->rec_end || !q->rec_done || !q->rec_of_slot) {
			dpflow_error_set(err, ENOMEM, "queue", "out of memory");
			goto fail;
		}
		rc = cudaStreamCreateWithFlags(&q->stream,
					       cudaStreamNonBlocking);
		if (rc != cudaSuccess) {
			q->stream = NULL;
			dpflow_gpu_err_(err, rc, "queue", "cudaStreamCreate");
			goto fail;
		}
		sh->rx_prod = &q->qdev->rx_doorbell;
		sh->data = q->dev_ring;
		sh->stride = 64;
	}
	rc = cudaMemcpy(q->qdev, sh, sizeof(*sh), cudaMemcpyHostToDevice);
	if (rc != cudaSuccess) {
		dpflow_gpu_err_(err, rc, "queue", "cudaMemcpy of the handle");
		goto fail;
	}
	return q;
fail:
	dpflow_gpu_queue_destroy(q);
	return NULL;
}

extern "C" void dpflow_gpu_queue_destroy(struct dpflow_gpu_queue *q)
{
	if (!q)
		return;
	if (q->stream)
		cudaStreamDestroy(q->stream);
	dpflow_gpu_mem_free(q->gpu, q->qdev);
	dpflow_gpu_mem_free(q->gpu, q->rx);
	dpflow_gpu_mem_free(q->gpu, q->tx);
	dpflow_gpu_mem_free(q->gpu, q->rx_prod);
	dpflow_gpu_mem_free(q->gpu, q->dev_ring);
	dpflow_gpu_mem_free(q->gpu, q->stage);
	dpflow_gpu_mem_free(q->gpu, q->db_stage);
	free(q->rec_end);
	free(q->rec_done);
	free(q->rec_of_slot);
	free(q);
}

extern "C" struct dpflow_gpu_qdev *
dpflow_gpu_queue_dev(struct dpflow_gpu_queue *q)
{
	return q->qdev;
}
