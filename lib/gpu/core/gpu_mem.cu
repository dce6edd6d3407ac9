/*
 * GPU memory (gpu.h): device memory, pinned host memory mapped into the
 * device, and pools registered for the zero-copy path. Every allocation
 * is recorded on its struct dpflow_gpu so that free takes either address
 * and close releases what is left.
 */
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "gpu/core/gpu_internal.h"

static uintptr_t align_up(uintptr_t v, size_t a)
{
	return (v + a - 1) & ~(uintptr_t)(a - 1);
}

extern "C" int dpflow_gpu_mem_alloc(struct dpflow_gpu *gpu, size_t size,
				    size_t align, enum dpflow_gpu_mem_type type,
				    void **host_ptr, void **dev_ptr,
				    struct dpflow_error *err)
{
	struct gpu_alloc *a;
	size_t pad, natural;
	cudaError_t rc;
	void *raw = NULL;
	void *dev = NULL;

	if (host_ptr)
		*host_ptr = NULL;
	if (dev_ptr)
		*dev_ptr = NULL;
	if (!gpu || size == 0)
		return dpflow_error_set(err, EINVAL, "size",
					"allocation of 0 bytes or no GPU");
	if (align == 0)
		align = 256;
	if (align & (align - 1))
		return dpflow_error_set(err, EINVAL, "align",
					"alignment %zu is not a power of two",
					align);
	switch (type) {
	case DPFLOW_GPU_MEM_GPU:
		natural = 256;
		break;
	case DPFLOW_GPU_MEM_CPU_GPU:
		natural = 4096;
		break;
	case DPFLOW_GPU_MEM_GPU_CPU:
		return dpflow_error_set(
		    err, ENOTSUP, "type",
		    "GPU_CPU memory (device memory mapped for the CPU) needs "
		    "GDRCopy, which dpflow is not built with: use CPU_GPU "
		    "memory, or GPU memory and copies");
	default:
		return dpflow_error_set(err, EINVAL, "type",
					"unknown memory type %d", (int)type);
	}
	pad = align > natural ? align : 0;
	rc = cudaSetDevice(gpu->dev);
	if (rc != cudaSuccess)
		return dpflow_gpu_err_(err, rc, "gpu", "cudaSetDevice");
	if (type == DPFLOW_GPU_MEM_GPU) {
		rc = cudaMalloc(&raw, size + pad);
		if (rc == cudaSuccess)
			rc = cudaMemset(raw, 0, size + pad);
		dev = raw;
	} else {
		rc = cudaHostAlloc(&raw, size + pad,
				   cudaHostAllocMapped | cudaHostAllocPortable);
		if (rc == cudaSuccess)
			rc = cudaHostGetDevicePointer(&dev, raw, 0);
		if (rc == cudaSuccess)
			memset(raw, 0, size + pad);
	}
	if (rc != cudaSuccess) {
		if (raw && type == DPFLOW_GPU_MEM_GPU)
			cudaFree(raw);
		else if (raw)
			cudaFreeHost(raw);
		return dpflow_gpu_err_(err, rc, "size",
				       type == DPFLOW_GPU_MEM_GPU
					   ? "cudaMalloc"
					   : "cudaHostAlloc (mapped)");
	}
	a = (struct gpu_alloc *)calloc(1, sizeof(*a));
	if (!a) {
		if (type == DPFLOW_GPU_MEM_GPU)
			cudaFree(raw);
		else
			cudaFreeHost(raw);
		return dpflow_error_set(err, ENOMEM, "gpu", "out of memory");
	}
	a->raw = raw;
	a->type = type;
	a->dev = (void *)align_up((uintptr_t)dev, align);
	if (type != DPFLOW_GPU_MEM_GPU)
		a->host = (uint8_t *)raw + ((uint8_t *)a->dev - (uint8_t *)dev);
	pthread_mutex_lock(&gpu->lock);
	a->next = gpu->allocs;
	gpu->allocs = a;
	pthread_mutex_unlock(&gpu->lock);
	if (host_ptr)
		*host_ptr = a->host;
	if (dev_ptr)
		*dev_ptr = a->dev;
	return 0;
}

extern "C" void dpflow_gpu_mem_free(struct dpflow_gpu *gpu, void *ptr)
{
	struct gpu_alloc **pp, *a = NULL;

	if (!gpu || !ptr)
		return;
	pthread_mutex_lock(&gpu->lock);
	for (pp = &gpu->allocs; *pp; pp = &(*pp)->next) {
		if ((*pp)->host == ptr || (*pp)->dev == ptr) {
			a = *pp;
			*pp = a->next;
			break;
		}
	}
	pthread_mutex_unlock(&gpu->lock);
	if (!a)
		return;
	/* errors ignored: after a kernel fault the context is gone and the
	   memory goes with the process */
	if (a->type == DPFLOW_GPU_MEM_GPU)
		cudaFree(a->raw);
	else
		cudaFreeHost(a->raw);
	free(a);
}

static struct gpu_reg *find_reg(const struct dpflow_gpu *gpu,
				const struct dpflow_pool *pool)
{
	struct gpu_reg *r;

	for (r = gpu->regs; r; r = r->next)
		if (r->pool == pool)
			return r;
	return NULL;
}

extern "C" int dpflow_gpu_pool_register(struct dpflow_gpu *gpu,
					struct dpflow_pool *pool,
					struct dpflow_error *err)
{
	size_t size = dpflow_pool_region_size(pool);
	struct gpu_reg *r;
	cudaError_t rc;
	void *dev = NULL;

	pthread_mutex_lock(&gpu->lock);
	r = find_reg(gpu, pool);
	pthread_mutex_unlock(&gpu->lock);
	if (r)
		return 0;
	rc = cudaSetDevice(gpu->dev);
	if (rc == cudaSuccess)
		rc = cudaHostRegister(pool->base, size,
				      cudaHostRegisterMapped |
					  cudaHostRegisterPortable);
	if (rc != cudaSuccess)
		return dpflow_gpu_err_(err, rc, "pool",
				       "cudaHostRegister of the pool region");
	rc = cudaHostGetDevicePointer(&dev, pool->base, 0);
	if (rc != cudaSuccess) {
		cudaHostUnregister(pool->base);
		return dpflow_gpu_err_(err, rc, "pool",
				       "cudaHostGetDevicePointer of the pool");
	}
	r = (struct gpu_reg *)calloc(1, sizeof(*r));
	if (!r) {
		cudaHostUnregister(pool->base);
		return dpflow_error_set(err, ENOMEM, "gpu", "out of memory");
	}
	r->pool = pool;
	r->dev_base = dev;
	pthread_mutex_lock(&gpu->lock);
	r->next = gpu->regs;
	gpu->regs = r;
	pthread_mutex_unlock(&gpu->lock);
	return 0;
}

extern "C" void dpflow_gpu_pool_unregister(struct dpflow_gpu *gpu,
					   struct dpflow_pool *pool)
{
	struct gpu_reg **pp, *r = NULL;

	if (!gpu || !pool)
		return;
	pthread_mutex_lock(&gpu->lock);
	for (pp = &gpu->regs; *pp; pp = &(*pp)->next) {
		if ((*pp)->pool == pool) {
			r = *pp;
			*pp = r->next;
			break;
		}
	}
	pthread_mutex_unlock(&gpu->lock);
	if (!r)
		return;
	cudaHostUnregister(pool->base);
	free(r);
}

extern "C" int dpflow_gpu_pool_dev_view(const struct dpflow_gpu *gpu,
					const struct dpflow_pool *pool,
					struct dpflow_pool *view)
{
	struct gpu_reg *r;

	pthread_mutex_lock((pthread_mutex_t *)&gpu->lock);
	r = find_reg(gpu, pool);
	pthread_mutex_unlock((pthread_mutex_t *)&gpu->lock);
	if (!r)
		return -ENOENT;
	*view = *pool;
	view->base = (uint8_t *)r->dev_base;
	return 0;
}
