/*
 * Semaphores between two kernels (device memory) and between a kernel and
 * the CPU (CPU_GPU memory), going through every state: FREE, READY, HOLD,
 * DONE, ERROR, EXIT, with a payload per item.
 */
#include "gpu_test.h"

#define K_ITEMS	 8
#define K_ROUNDS 2000
#define C_ITEMS	 4
#define C_ROUNDS 500
#define TMO	 2000000000ull /* 2 s, in the kernels */

#define B(s) DPFLOW_GPU_SEM_BIT(DPFLOW_GPU_SEM_##s)

struct payload {
	uint32_t round;
	uint32_t value;
};

/* results written by kernels, read by the host (CPU_GPU memory) */
struct results {
	uint32_t produced, consumed, bad, errors, holds, exit_seen, timeouts;
	uint32_t cpu_errors_seen;
};

__global__ void producer(struct dpflow_gpu_sem_dev *s, struct results *r)
{
	for (uint32_t i = 0; i < K_ROUNDS; i++) {
		uint32_t it = i % K_ITEMS;
		struct payload *p =
		    (struct payload *)dpflow_gpu_dev_sem_payload(s, it);

		if (dpflow_gpu_dev_sem_wait(s, it, B(FREE) | B(DONE), TMO) <
		    0) {
			r->timeouts++;
			return;
		}
		p->round = i;
		p->value = i * 3;
		dpflow_gpu_dev_sem_set(s, it,
				       i % 100 == 42 ? DPFLOW_GPU_SEM_ERROR
						     : DPFLOW_GPU_SEM_READY);
		r->produced++;
	}
	uint32_t it = K_ROUNDS % K_ITEMS;
	if (dpflow_gpu_dev_sem_wait(s, it, B(FREE) | B(DONE), TMO) < 0) {
		r->timeouts++;
		return;
	}
	dpflow_gpu_dev_sem_set(s, it, DPFLOW_GPU_SEM_EXIT);
}

__global__ void consumer(struct dpflow_gpu_sem_dev *s, struct results *r)
{
	for (uint32_t i = 0;; i++) {
		uint32_t it = i % K_ITEMS;
		int st = dpflow_gpu_dev_sem_wait(
		    s, it, B(READY) | B(ERROR) | B(EXIT), TMO);
		const struct payload *p =
		    (const struct payload *)dpflow_gpu_dev_sem_payload(s, it);

		if (st < 0) {
			r->timeouts++;
			return;
		}
		if (st == DPFLOW_GPU_SEM_EXIT) {
			r->exit_seen = 1;
			dpflow_gpu_dev_sem_set(s, it, DPFLOW_GPU_SEM_FREE);
			return;
		}
		/* HOLD while working on it: nobody may reuse the item */
		dpflow_gpu_dev_sem_set(s, it, DPFLOW_GPU_SEM_HOLD);
		if (dpflow_gpu_dev_sem_get(s, it) == DPFLOW_GPU_SEM_HOLD)
			r->holds++;
		if (st == DPFLOW_GPU_SEM_ERROR)
			r->errors++;
		if (p->round != i || p->value != i * 3)
			r->bad++;
		r->consumed++;
		dpflow_gpu_dev_sem_set(s, it, DPFLOW_GPU_SEM_DONE);
	}
}

/* Kernel side of the kernel-CPU exchange. */
__global__ void to_cpu(struct dpflow_gpu_sem_dev *s, struct results *r)
{
	for (uint32_t i = 0; i < C_ROUNDS; i++) {
		uint32_t it = i % C_ITEMS;
		int st = dpflow_gpu_dev_sem_wait(
		    s, it, B(FREE) | B(DONE) | B(ERROR), TMO);

		if (st < 0) {
			r->timeouts++;
			return;
		}
		if (st == DPFLOW_GPU_SEM_ERROR)
			r->cpu_errors_seen++;
		((struct payload *)dpflow_gpu_dev_sem_payload(s, it))->round =
		    i;
		dpflow_gpu_dev_sem_set(s, it,
				       i % 50 == 7 ? DPFLOW_GPU_SEM_HOLD
						   : DPFLOW_GPU_SEM_READY);
		r->produced++;
	}
	if (dpflow_gpu_dev_sem_wait(s, 0, B(EXIT), TMO) < 0) {
		r->timeouts++;
		return;
	}
	r->exit_seen = 1;
}

static void kernel_kernel(struct dpflow_gpu *gpu)
{
	struct dpflow_error err;
	struct dpflow_gpu_sem *s = dpflow_gpu_sem_create(
	    gpu, K_ITEMS, sizeof(struct payload), DPFLOW_GPU_MEM_GPU, &err);
	struct dpflow_gpu_kernel *kp =
	    dpflow_gpu_kernel_create(gpu, "producer", &err);
	struct dpflow_gpu_kernel *kc =
	    dpflow_gpu_kernel_create(gpu, "consumer", &err);
	struct results *r = NULL, *rd = NULL;
	int rc;

	printf("== kernel <-> kernel (device memory)\n");
	CHECK(s && kp && kc, "%s", err.msg);
	rc = dpflow_gpu_mem_alloc(gpu, sizeof(*r), 0, DPFLOW_GPU_MEM_CPU_GPU,
				  (void **)&r, (void **)&rd, &err);
	CHECK_OK(rc, err);
	if (!s || !kp || !kc || rc < 0)
		goto out;
	CHECK(dpflow_gpu_sem_get(s, 0) == -ENOTSUP,
	      "CPU access to a device-memory semaphore");
	{
		struct dpflow_gpu_sem_dev *sd = dpflow_gpu_sem_dev(s);
		void *args[] = {&sd, &rd};

		rc = dpflow_gpu_kernel_launch(kc, (const void *)consumer, 1, 1,
					      0, args, &err);
		CHECK_OK(rc, err);
		rc = dpflow_gpu_kernel_launch(kp, (const void *)producer, 1, 1,
					      0, args, &err);
		CHECK_OK(rc, err);
	}
	/* both end on their own; the stop only bounds the wait */
	rc = dpflow_gpu_kernel_stop(kp, 10000000000ull, &err);
	CHECK_OK(rc, err);
	rc = dpflow_gpu_kernel_stop(kc, 10000000000ull, &err);
	CHECK_OK(rc, err);
	printf("   produced %u consumed %u errors %u holds %u exit %u bad %u "
	       "timeouts %u\n",
	       r->produced, r->consumed, r->errors, r->holds, r->exit_seen,
	       r->bad, r->timeouts);
	CHECK(r->produced == K_ROUNDS && r->consumed == K_ROUNDS, "counts");
	CHECK(r->errors == K_ROUNDS / 100, "ERROR items: %u", r->errors);
	CHECK(r->holds == K_ROUNDS, "HOLD seen %u", r->holds);
	CHECK(r->exit_seen == 1 && r->bad == 0 && r->timeouts == 0, "end");
out:
	dpflow_gpu_kernel_destroy(kp);
	dpflow_gpu_kernel_destroy(kc);
	dpflow_gpu_sem_destroy(s);
	dpflow_gpu_mem_free(gpu, r);
}

static void kernel_cpu(struct dpflow_gpu *gpu)
{
	struct dpflow_error err;
	struct dpflow_gpu_sem *s = dpflow_gpu_sem_create(
	    gpu, C_ITEMS, sizeof(struct payload), DPFLOW_GPU_MEM_CPU_GPU, &err);
	struct dpflow_gpu_kernel *k =
	    dpflow_gpu_kernel_create(gpu, "to_cpu", &err);
	struct results *r = NULL, *rd = NULL;
	uint32_t holds = 0, errors_set = 0, expect_seen = 0, bad = 0;
	int rc;

	printf("== kernel <-> CPU (CPU_GPU memory)\n");
	CHECK(s && k, "%s", err.msg);
	rc = dpflow_gpu_mem_alloc(gpu, sizeof(*r), 0, DPFLOW_GPU_MEM_CPU_GPU,
				  (void **)&r, (void **)&rd, &err);
	CHECK_OK(rc, err);
	if (!s || !k || rc < 0)
		goto out;
	{
		struct dpflow_gpu_sem_dev *sd = dpflow_gpu_sem_dev(s);
		void *args[] = {&sd, &rd};

		rc = dpflow_gpu_kernel_launch(k, (const void *)to_cpu, 1, 1, 0,
					      args, &err);
		CHECK_OK(rc, err);
	}
	for (uint32_t i = 0; i < C_ROUNDS && rc >= 0; i++) {
		uint32_t it = i % C_ITEMS;
		int st = dpflow_gpu_sem_wait(s, it, B(READY) | B(HOLD),
					     2000000000ull);
		const struct payload *p =
		    (const struct payload *)dpflow_gpu_sem_payload(s, it);

		if (st < 0) {
			CHECK(0, "round %u: CPU wait: %d", i, st);
			break;
		}
		if (p->round != i)
			bad++;
		holds += st == DPFLOW_GPU_SEM_HOLD;
		if (i % 25 == 3) {
			dpflow_gpu_sem_set(s, it, DPFLOW_GPU_SEM_ERROR);
			errors_set++;
			expect_seen += i + C_ITEMS < C_ROUNDS;
		} else {
			dpflow_gpu_sem_set(s, it, DPFLOW_GPU_SEM_DONE);
		}
	}
	/* the kernel's last rounds are answered; item 0 tells it to exit */
	dpflow_gpu_sem_set(s, 0, DPFLOW_GPU_SEM_EXIT);
	rc = dpflow_gpu_kernel_stop(k, 5000000000ull, &err);
	CHECK_OK(rc, err);
	printf("   produced %u, CPU saw %u HOLD, set %u ERROR (kernel saw "
	       "%u), exit %u, bad %u, timeouts %u\n",
	       r->produced, holds, errors_set, r->cpu_errors_seen, r->exit_seen,
	       bad, r->timeouts);
	CHECK(r->produced == C_ROUNDS, "produced %u", r->produced);
	CHECK(holds == C_ROUNDS / 50, "HOLD %u", holds);
	CHECK(r->cpu_errors_seen == expect_seen, "ERROR seen %u, expected %u",
	      r->cpu_errors_seen, expect_seen);
	CHECK(r->exit_seen == 1 && bad == 0 && r->timeouts == 0, "end");
	CHECK(dpflow_gpu_sem_set(s, C_ITEMS, DPFLOW_GPU_SEM_FREE) == -EINVAL,
	      "item out of range");
out:
	dpflow_gpu_kernel_destroy(k);
	dpflow_gpu_sem_destroy(s);
	dpflow_gpu_mem_free(gpu, r);
}

int main(void)
{
	struct dpflow_gpu *gpu = test_gpu_open();

	kernel_kernel(gpu);
	kernel_cpu(gpu);
	dpflow_gpu_close(gpu);
	return test_done("test_gpu_sem");
}
