/*
 * Error injection. A launch error (a block too large) comes back with
 * CUDA's words. A persistent kernel that faults on its first packet (a
 * store to an unmapped address) is reported: the proxy watching it stops
 * with the CUDA error, kernel_stop returns it, and the proxy, the queue
 * and the ports shut down within a bound.
 */
#include <cerrno>

#include "gpu_test.h"

#define SHUTDOWN_BOUND_NS 5000000000ull

__global__ void nothing(void)
{
}

__global__ void faulty(struct dpflow_gpu_qdev *q, struct dpflow_gpu_kctl *ctl)
{
	while (!dpflow_gpu_dev_exit(ctl)) {
		uint64_t first;

		if (dpflow_gpu_dev_rx_thread(q, 1, 100000, &first) == 0)
			continue;
		/* the injected fault */
		*(volatile uint32_t *)(uintptr_t)0x10 = 1;
	}
}

int main(void)
{
	struct dpflow_gpu *gpu = test_gpu_open();
	struct dpflow_pool_params pp = {"gf", 1024, 0, 0, NULL};
	struct dpflow_gpu_queue_params qp = {};
	struct dpflow_gpu_proxy_params xp = {};
	struct dpflow_error err, perr;
	struct dpflow_pool *pool;
	struct dpflow_port *in, *out;
	struct dpflow_gpu_kernel *k;
	struct dpflow_gpu_queue *q;
	struct dpflow_gpu_proxy *px;
	uint64_t t0, t_fault = 0, t_down;
	int rc;

	printf("== launch error\n");
	k = dpflow_gpu_kernel_create(gpu, "too_big", &err);
	CHECK(k, "%s", err.msg);
	rc = dpflow_gpu_kernel_launch(k, (const void *)nothing, 1, 4096, 0,
				      NULL, &err);
	printf("   launch of 4096 threads per block: %d: %s\n", rc, err.msg);
	CHECK(rc < 0 && strstr(err.msg, "cudaError"),
	      "launch error not reported");
	dpflow_gpu_kernel_destroy(k);

	printf("== kernel fault under traffic\n");
	pool = dpflow_pool_create(&pp, &err);
	in = dpflow_port_open(pool, "ring:fin", &err);
	out = dpflow_port_open(pool, "ring:fout", &err);
	qp.pool = pool;
	q = dpflow_gpu_queue_create(gpu, &qp, &err);
	k = dpflow_gpu_kernel_create(gpu, "faulty", &err);
	CHECK(pool && in && out && q && k, "%s", err.msg);
	if (!pool || !in || !out || !q || !k)
		return test_done("test_gpu_fault");
	xp.queue = q;
	xp.rx_port = in;
	xp.tx_port = out;
	xp.watch = k;
	px = dpflow_gpu_proxy_start(&xp, &err);
	CHECK(px, "%s", err.msg);
	{
		struct dpflow_gpu_qdev *qd = dpflow_gpu_queue_dev(q);
		struct dpflow_gpu_kctl *ctl = dpflow_gpu_kernel_ctl(k);
		void *args[] = {&qd, &ctl};

		rc = dpflow_gpu_kernel_launch(k, (const void *)faulty, 2, 32, 0,
					      args, &err);
		CHECK_OK(rc, err);
	}
	t0 = dpflow_clock_ns();
	for (uint32_t i = 0; i < 64; i++)
		feed_one(pool, in, i, 64);
	while (px && dpflow_clock_ns() - t0 < 10000000000ull) {
		if (dpflow_gpu_proxy_error(px, &perr) < 0) {
			t_fault = dpflow_clock_ns();
			break;
		}
	}
	CHECK(t_fault, "the proxy did not report the kernel's fault");
	if (t_fault)
		printf("   proxy stopped after %.1f ms: %s\n",
		       (t_fault - t0) / 1e6, perr.msg);
	rc = dpflow_gpu_kernel_stop(k, 2000000000ull, &err);
	printf("   kernel_stop: %d: %s\n", rc, err.msg);
	CHECK(rc < 0 && rc != -ETIMEDOUT && strstr(err.msg, "faulty") &&
		  strstr(err.msg, "cudaError"),
	      "fault not reported by kernel_stop");
	rc = dpflow_gpu_proxy_stop(px, NULL, &err);
	CHECK(rc < 0, "proxy_stop should return the fault");
	dpflow_gpu_kernel_destroy(k);
	dpflow_gpu_queue_destroy(q);
	dpflow_port_close(in);
	dpflow_port_close(out);
	dpflow_gpu_close(gpu);
	dpflow_pool_destroy(pool);
	t_down = dpflow_clock_ns();
	printf("   fault to shutdown done: %.1f ms\n",
	       (t_down - (t_fault ? t_fault : t0)) / 1e6);
	CHECK(t_down - t0 < SHUTDOWN_BOUND_NS + 10000000000ull &&
		  (!t_fault || t_down - t_fault < SHUTDOWN_BOUND_NS),
	      "shutdown took too long");
	return test_done("test_gpu_fault");
}
