/*
 * Persistent kernels and CUDA graphs (gpu.h): a stream and a control block
 * per handle, launches whose errors come back with CUDA's words, and
 * bounded waits for the end of the work. poll may be called from another
 * thread (the proxy watches a kernel) while the owner stops it: the
 * handle's state sits behind a mutex.
 */
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "dpflow/clock.h"

#include "gpu/core/gpu_internal.h"

struct dpflow_gpu_kernel {
	struct dpflow_gpu *gpu;
	char name[64];
	cudaStream_t stream;
	struct dpflow_gpu_kctl *ctl;	 /* CPU address */
	struct dpflow_gpu_kctl *ctl_dev; /* device address */
	cudaGraphExec_t graph;
	pthread_mutex_t lock;
	bool running;	   /* work launched and not seen finished */
	cudaError_t fault; /* first failure seen (sticky) */
	bool leaked;	   /* stop timed out: keep the memory */
};

static int report(struct dpflow_gpu_kernel *k, struct dpflow_error *err)
{
	char what[128];

	snprintf(what, sizeof(what), "kernel '%s' failed", k->name);
	return dpflow_gpu_err_(err, k->fault, "kernel", what);
}

extern "C" struct dpflow_gpu_kernel *
dpflow_gpu_kernel_create(struct dpflow_gpu *gpu, const char *name,
			 struct dpflow_error *err)
{
	struct dpflow_gpu_kernel *k;
	cudaError_t rc;
	void *h, *d;

	k = (struct dpflow_gpu_kernel *)calloc(1, sizeof(*k));
	if (!k) {
		dpflow_error_set(err, ENOMEM, "kernel", "out of memory");
		return NULL;
	}
	k->gpu = gpu;
	snprintf(k->name, sizeof(k->name), "%s", name ? name : "kernel");
	pthread_mutex_init(&k->lock, NULL);
	if (dpflow_gpu_mem_alloc(gpu, sizeof(*k->ctl), 0,
				 DPFLOW_GPU_MEM_CPU_GPU, &h, &d, err) < 0) {
		pthread_mutex_destroy(&k->lock);
		free(k);
		return NULL;
	}
	k->ctl = (struct dpflow_gpu_kctl *)h;
	k->ctl_dev = (struct dpflow_gpu_kctl *)d;
	rc = cudaStreamCreateWithFlags(&k->stream, cudaStreamNonBlocking);
	if (rc != cudaSuccess) {
		dpflow_gpu_err_(err, rc, "kernel", "cudaStreamCreate");
		dpflow_gpu_mem_free(gpu, k->ctl);
		pthread_mutex_destroy(&k->lock);
		free(k);
		return NULL;
	}
	return k;
}

extern "C" struct dpflow_gpu_kctl *
dpflow_gpu_kernel_ctl(struct dpflow_gpu_kernel *k)
{
	return k->ctl_dev;
}

extern "C" int dpflow_gpu_kernel_launch(struct dpflow_gpu_kernel *k,
					const void *func, unsigned grid,
					unsigned block, size_t smem,
					void **args, struct dpflow_error *err)
{
	cudaError_t rc;
	char what[128];

	pthread_mutex_lock(&k->lock);
	if (k->fault != cudaSuccess) {
		int ret = report(k, err);

		pthread_mutex_unlock(&k->lock);
		return ret;
	}
	__atomic_store_n(&k->ctl->exit, 0, __ATOMIC_RELEASE);
	rc = cudaSetDevice(k->gpu->dev);
	if (rc == cudaSuccess)
		rc = cudaLaunchKernel(func, dim3(grid), dim3(block), args, smem,
				      k->stream);
	if (rc == cudaSuccess)
		k->running = true;
	pthread_mutex_unlock(&k->lock);
	if (rc != cudaSuccess) {
		snprintf(what, sizeof(what),
			 "launch of kernel '%s' (%u x %u threads) failed",
			 k->name, grid, block);
		/* clear a non-sticky launch error so later calls see none */
		cudaGetLastError();
		return dpflow_gpu_err_(err, rc, "kernel", what);
	}
	return 0;
}

extern "C" int dpflow_gpu_kernel_graph(struct dpflow_gpu_kernel *k,
				       const void *func, unsigned grid,
				       unsigned block, size_t smem, void **args,
				       struct dpflow_error *err)
{
	cudaGraph_t g = NULL;
	cudaGraphExec_t ge = NULL;
	cudaError_t rc, rc2;

	rc = cudaSetDevice(k->gpu->dev);
	if (rc != cudaSuccess)
		return dpflow_gpu_err_(err, rc, "kernel", "cudaSetDevice");
	rc =
	    cudaStreamBeginCapture(k->stream, cudaStreamCaptureModeThreadLocal);
	if (rc != cudaSuccess)
		return dpflow_gpu_err_(err, rc, "kernel",
				       "cudaStreamBeginCapture");
	rc = cudaLaunchKernel(func, dim3(grid), dim3(block), args, smem,
			      k->stream);
	rc2 = cudaStreamEndCapture(k->stream, &g);
	if (rc == cudaSuccess)
		rc = rc2;
	if (rc == cudaSuccess)
		rc = cudaGraphInstantiate(&ge, g, 0);
	if (g)
		cudaGraphDestroy(g);
	if (rc != cudaSuccess) {
		cudaGetLastError();
		return dpflow_gpu_err_(err, rc, "kernel",
				       "capture of the kernel's graph");
	}
	pthread_mutex_lock(&k->lock);
	if (k->graph)
		cudaGraphExecDestroy(k->graph);
	k->graph = ge;
	pthread_mutex_unlock(&k->lock);
	return 0;
}

/* Under k->lock: 1 running, 0 done, -errno failed. */
static int poll_locked(struct dpflow_gpu_kernel *k, struct dpflow_error *err)
{
	cudaError_t rc;

	if (k->fault != cudaSuccess)
		return report(k, err);
	if (!k->running)
		return 0;
	rc = cudaStreamQuery(k->stream);
	if (rc == cudaErrorNotReady)
		return 1;
	k->running = false;
	if (rc != cudaSuccess) {
		k->fault = rc;
		return report(k, err);
	}
	return 0;
}

extern "C" int dpflow_gpu_kernel_poll(struct dpflow_gpu_kernel *k,
				      struct dpflow_error *err)
{
	int ret;

	pthread_mutex_lock(&k->lock);
	ret = poll_locked(k, err);
	pthread_mutex_unlock(&k->lock);
	return ret;
}

/* Poll until the work ends or @timeout_ns passes. */
static int wait_bounded(struct dpflow_gpu_kernel *k, uint64_t timeout_ns,
			struct dpflow_error *err)
{
	uint64_t t0 = dpflow_clock_mono_ns();
	struct timespec ts = {0, 20000};
	int ret;

	for (;;) {
		ret = dpflow_gpu_kernel_poll(k, err);
		if (ret <= 0)
			return ret;
		if (dpflow_clock_mono_ns() - t0 >= timeout_ns) {
			return dpflow_error_set(
			    err, ETIMEDOUT, "kernel",
			    "kernel '%s' still running after %llu ms", k->name,
			    (unsigned long long)(timeout_ns / 1000000));
		}
		nanosleep(&ts, NULL);
	}
}

extern "C" int dpflow_gpu_kernel_graph_run(struct dpflow_gpu_kernel *k,
					   uint64_t timeout_ns,
					   struct dpflow_error *err)
{
	cudaError_t rc;

	pthread_mutex_lock(&k->lock);
	if (!k->graph) {
		pthread_mutex_unlock(&k->lock);
		return dpflow_error_set(err, EINVAL, "kernel",
					"kernel '%s' has no graph", k->name);
	}
	if (k->fault != cudaSuccess) {
		int ret = report(k, err);

		pthread_mutex_unlock(&k->lock);
		return ret;
	}
	rc = cudaSetDevice(k->gpu->dev);
	if (rc == cudaSuccess)
		rc = cudaGraphLaunch(k->graph, k->stream);
	if (rc == cudaSuccess)
		k->running = true;
	pthread_mutex_unlock(&k->lock);
	if (rc != cudaSuccess)
		return dpflow_gpu_err_(err, rc, "kernel", "cudaGraphLaunch");
	return wait_bounded(k, timeout_ns, err);
}

extern "C" int dpflow_gpu_kernel_stop(struct dpflow_gpu_kernel *k,
				      uint64_t timeout_ns,
				      struct dpflow_error *err)
{
	int ret;

	__atomic_store_n(&k->ctl->exit, 1, __ATOMIC_RELEASE);
	ret = wait_bounded(k, timeout_ns, err);
	if (ret == -ETIMEDOUT)
		k->leaked = true;
	return ret;
}

extern "C" void dpflow_gpu_kernel_destroy(struct dpflow_gpu_kernel *k)
{
	if (!k)
		return;
	if (dpflow_gpu_kernel_stop(k, 1000000000ull, NULL) == -ETIMEDOUT ||
	    k->leaked) {
		/* the kernel may still read its control block: leave it */
		return;
	}
	if (k->graph)
		cudaGraphExecDestroy(k->graph);
	cudaStreamDestroy(k->stream);
	dpflow_gpu_mem_free(k->gpu, k->ctl);
	pthread_mutex_destroy(&k->lock);
	free(k);
}
