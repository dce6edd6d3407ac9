/*
 * Semaphores (gpu.h, device calls in gpu_dev.cuh): an array of states and
 * one of payloads in one allocation (device or CPU_GPU memory), and a
 * device handle in device memory. The CPU side uses acquire loads and
 * release stores, the device side the same at system scope.
 */
#include <cerrno>
#include <cstdlib>
#include <ctime>

#include "dpflow/clock.h"

#include "gpu/core/gpu_internal.h"

struct dpflow_gpu_sem {
	struct dpflow_gpu *gpu;
	enum dpflow_gpu_mem_type type;
	uint32_t n, payload_size;
	uint32_t *state;  /* CPU address (NULL for MEM_GPU) */
	uint8_t *payload; /* CPU address (NULL for MEM_GPU) */
	void *mem_dev;	  /* device address of the allocation */
	struct dpflow_gpu_sem_dev *dev;
};

extern "C" struct dpflow_gpu_sem *
dpflow_gpu_sem_create(struct dpflow_gpu *gpu, uint32_t n_items,
		      uint32_t payload_size, enum dpflow_gpu_mem_type type,
		      struct dpflow_error *err)
{
	struct dpflow_gpu_sem_dev sd;
	struct dpflow_gpu_sem *s;
	size_t states, size;
	cudaError_t rc;
	void *h, *d;

	if (n_items == 0 || n_items > (1u << 24)) {
		dpflow_error_set(err, EINVAL, "n_items",
				 "%u items: 1..2^24 expected", n_items);
		return NULL;
	}
	if (type != DPFLOW_GPU_MEM_GPU && type != DPFLOW_GPU_MEM_CPU_GPU) {
		dpflow_error_set(err, ENOTSUP, "type",
				 "semaphores live in GPU or CPU_GPU memory");
		return NULL;
	}
	s = (struct dpflow_gpu_sem *)calloc(1, sizeof(*s));
	if (!s) {
		dpflow_error_set(err, ENOMEM, "sem", "out of memory");
		return NULL;
	}
	s->gpu = gpu;
	s->type = type;
	s->n = n_items;
	s->payload_size = (payload_size + 7) & ~7u;
	states = ((size_t)n_items * 4 + 127) & ~(size_t)127;
	size = states + (size_t)n_items * s->payload_size;
	if (dpflow_gpu_mem_alloc(gpu, size, 128, type, &h, &d, err) < 0) {
		free(s);
		return NULL;
	}
	s->mem_dev = d;
	if (h) {
		s->state = (uint32_t *)h;
		s->payload = (uint8_t *)h + states;
	}
	sd.state = (uint32_t *)d;
	sd.payload = (uint8_t *)d + states;
	sd.n = n_items;
	sd.payload_size = s->payload_size;
	if (dpflow_gpu_mem_alloc(gpu, sizeof(sd), 0, DPFLOW_GPU_MEM_GPU, NULL,
				 &d, err) < 0) {
		dpflow_gpu_mem_free(gpu, s->mem_dev);
		free(s);
		return NULL;
	}
	s->dev = (struct dpflow_gpu_sem_dev *)d;
	rc = cudaMemcpy(s->dev, &sd, sizeof(sd), cudaMemcpyHostToDevice);
	if (rc != cudaSuccess) {
		dpflow_gpu_err_(err, rc, "sem", "cudaMemcpy of the handle");
		dpflow_gpu_sem_destroy(s);
		return NULL;
	}
	return s;
}

extern "C" void dpflow_gpu_sem_destroy(struct dpflow_gpu_sem *s)
{
	if (!s)
		return;
	dpflow_gpu_mem_free(s->gpu, s->dev);
	dpflow_gpu_mem_free(s->gpu, s->mem_dev);
	free(s);
}

extern "C" struct dpflow_gpu_sem_dev *
dpflow_gpu_sem_dev(struct dpflow_gpu_sem *s)
{
	return s->dev;
}

extern "C" int dpflow_gpu_sem_get(struct dpflow_gpu_sem *s, uint32_t item)
{
	if (!s->state)
		return -ENOTSUP;
	if (item >= s->n)
		return -EINVAL;
	return (int)__atomic_load_n(&s->state[item], __ATOMIC_ACQUIRE);
}

extern "C" int dpflow_gpu_sem_set(struct dpflow_gpu_sem *s, uint32_t item,
				  enum dpflow_gpu_sem_state state)
{
	if (!s->state)
		return -ENOTSUP;
	if (item >= s->n || (unsigned)state > DPFLOW_GPU_SEM_EXIT)
		return -EINVAL;
	__atomic_store_n(&s->state[item], (uint32_t)state, __ATOMIC_RELEASE);
	return 0;
}

extern "C" int dpflow_gpu_sem_wait(struct dpflow_gpu_sem *s, uint32_t item,
				   uint32_t states, uint64_t timeout_ns)
{
	uint64_t t0 = 0;
	unsigned spins = 0;

	for (;;) {
		int st = dpflow_gpu_sem_get(s, item);

		if (st < 0)
			return st;
		if (st < 32 && (states & (1u << st)))
			return st;
		if (t0 == 0)
			t0 = dpflow_clock_mono_ns();
		else if (dpflow_clock_mono_ns() - t0 >= timeout_ns)
			return -ETIMEDOUT;
		if (++spins > 1000) {
			struct timespec ts = {0, 1000};

			nanosleep(&ts, NULL);
		}
	}
}

extern "C" void *dpflow_gpu_sem_payload(struct dpflow_gpu_sem *s, uint32_t item)
{
	if (!s->payload || item >= s->n)
		return NULL;
	return s->payload + (size_t)item * s->payload_size;
}
