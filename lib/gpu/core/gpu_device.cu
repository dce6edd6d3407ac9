/*
 * GPU devices (gpu.h): discovery, opening a device, CUDA errors as
 * struct dpflow_error.
 */
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>

#include "gpu/core/gpu_internal.h"

int dpflow_gpu_errno_(cudaError_t rc)
{
	switch (rc) {
	case cudaSuccess:
		return 0;
	case cudaErrorMemoryAllocation:
		return ENOMEM;
	case cudaErrorNoDevice:
	case cudaErrorInsufficientDriver:
	case cudaErrorInvalidDevice:
		return ENODEV;
	case cudaErrorInvalidValue:
	case cudaErrorInvalidConfiguration:
	case cudaErrorInvalidDeviceFunction:
		return EINVAL;
	case cudaErrorNotSupported:
		return ENOTSUP;
	default:
		return EIO;
	}
}

int dpflow_gpu_err_(struct dpflow_error *err, cudaError_t rc, const char *field,
		    const char *what)
{
	return dpflow_error_set(err, dpflow_gpu_errno_(rc), field,
				"%s: %s (%s)", what, cudaGetErrorString(rc),
				cudaGetErrorName(rc));
}

/*
 * Persistent kernels that wait on each other (semaphores, queues between
 * kernels) must all be resident at once. With CUDA's lazy module loading
 * (the default since CUDA 12), the first launch of a kernel loads its
 * module, which waits for the kernels already running: a consumer spinning
 * on a producer not yet loaded never sees it (both time out). Ask for eager
 * loading before the runtime starts, unless the user chose a mode; it is
 * read once, at the first CUDA call of the process.
 */
static void eager_module_loading(void)
{
	setenv("CUDA_MODULE_LOADING", "EAGER", 0);
}

extern "C" int dpflow_gpu_count(struct dpflow_error *err)
{
	int n = 0;
	cudaError_t rc;

	eager_module_loading();
	rc = cudaGetDeviceCount(&n);

	if (rc != cudaSuccess) {
		dpflow_error_set(err, ENODEV, "gpu", "no CUDA device: %s",
				 cudaGetErrorString(rc));
		return 0;
	}
	if (n == 0)
		dpflow_error_set(err, ENODEV, "gpu", "no CUDA device");
	return n;
}

extern "C" struct dpflow_gpu *dpflow_gpu_open(int dev, struct dpflow_error *err)
{
	struct cudaDeviceProp prop;
	struct dpflow_gpu *gpu;
	int n = dpflow_gpu_count(err);
	cudaError_t rc;

	if (n == 0)
		return NULL;
	if (dev < 0 || dev >= n) {
		dpflow_error_set(err, ENODEV, "dev",
				 "no CUDA device %d (%d present)", dev, n);
		return NULL;
	}
	rc = cudaSetDevice(dev);
	if (rc == cudaSuccess)
		rc = cudaFree(NULL); /* create the context now */
	if (rc == cudaSuccess)
		rc = cudaGetDeviceProperties(&prop, dev);
	if (rc != cudaSuccess) {
		dpflow_gpu_err_(err, rc, "dev", "cannot open the CUDA device");
		return NULL;
	}
	if (!prop.canMapHostMemory || !prop.unifiedAddressing) {
		dpflow_error_set(err, ENOTSUP, "dev",
				 "CUDA device %d (%s) cannot map host memory",
				 dev, prop.name);
		return NULL;
	}
	gpu = (struct dpflow_gpu *)calloc(1, sizeof(*gpu));
	if (!gpu) {
		dpflow_error_set(err, ENOMEM, "gpu", "out of memory");
		return NULL;
	}
	gpu->dev = dev;
	snprintf(gpu->name, sizeof(gpu->name), "%s", prop.name);
	pthread_mutex_init(&gpu->lock, NULL);
	return gpu;
}

extern "C" void dpflow_gpu_close(struct dpflow_gpu *gpu)
{
	if (!gpu)
		return;
	while (gpu->regs) {
		struct gpu_reg *r = gpu->regs;

		gpu->regs = r->next;
		cudaHostUnregister(r->pool->base);
		free(r);
	}
	while (gpu->allocs)
		dpflow_gpu_mem_free(gpu, gpu->allocs->host ? gpu->allocs->host
							   : gpu->allocs->dev);
	pthread_mutex_destroy(&gpu->lock);
	free(gpu);
}

extern "C" const char *dpflow_gpu_name(const struct dpflow_gpu *gpu)
{
	return gpu->name;
}

extern "C" int dpflow_gpu_device(const struct dpflow_gpu *gpu)
{
	return gpu->dev;
}

extern "C" int dpflow_gpu_bind_thread(struct dpflow_gpu *gpu,
				      struct dpflow_error *err)
{
	cudaError_t rc = cudaSetDevice(gpu->dev);

	if (rc != cudaSuccess)
		return dpflow_gpu_err_(err, rc, "gpu", "cudaSetDevice");
	return 0;
}
