/*
 * Precise send: a persistent kernel gives each packet a send time (its
 * receive time plus 300 us); the proxy releases
 * each at its time, TSC-paced. Checks: every packet is timed, none leaves
 * early (its dequeue time from the output ring is not before its send
 * time), and prints the release error p50/p99/max.
 */
#include <ctime>

#include "gpu_test.h"

#define N_PKTS	 4000
#define DELAY_NS 300000ull

__global__ void stamp(struct dpflow_gpu_qdev *q, struct dpflow_gpu_kctl *ctl)
{
	/* the block leaves together (the batch calls hold barriers) */
	while (!__syncthreads_or(dpflow_gpu_dev_exit(ctl))) {
		uint64_t first, tfirst;
		struct dpflow_gpu_pkt pkt;
		uint32_t n =
		    dpflow_gpu_dev_rx_block(q, blockDim.x, 100000, &first);
		uint32_t ok;

		if (n == 0)
			continue;
		if (threadIdx.x < n)
			dpflow_gpu_dev_rx_pkt(q, first + threadIdx.x, &pkt);
		while (!(ok = dpflow_gpu_dev_tx_reserve_block(q, n, 100000,
							      &tfirst)) &&
		       !__syncthreads_or(dpflow_gpu_dev_exit(ctl)))
			;
		if (ok && threadIdx.x < n)
			dpflow_gpu_dev_tx_pkt(q, tfirst + threadIdx.x, &pkt,
					      pkt.ts_ns + DELAY_NS, 0, 0);
	}
}

int main(void)
{
	struct dpflow_gpu *gpu = test_gpu_open();
	struct dpflow_pool_params pp = {"gs", 4096, 0, 0, NULL};
	struct dpflow_gpu_queue_params qp = {};
	struct dpflow_gpu_proxy_params xp = {};
	struct dpflow_gpu_proxy_stats st = {};
	struct dpflow_error err;
	struct dpflow_pool *pool = dpflow_pool_create(&pp, &err);
	struct dpflow_port *in = dpflow_port_open(pool, "ring:sin", &err);
	struct dpflow_port *out = dpflow_port_open(pool, "ring:sout", &err);
	struct dpflow_gpu_queue *q;
	struct dpflow_gpu_kernel *k;
	struct dpflow_gpu_proxy *px;
	uint32_t sent = 0, got = 0, early = 0;
	int64_t worst_early = 0;
	uint64_t t0;
	int rc;

	qp.pool = pool;
	q = dpflow_gpu_queue_create(gpu, &qp, &err);
	k = dpflow_gpu_kernel_create(gpu, "stamp", &err);
	CHECK(pool && in && out && q && k, "%s", err.msg);
	if (!pool || !in || !out || !q || !k)
		return test_done("test_gpu_send");
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

		rc = dpflow_gpu_kernel_launch(k, (const void *)stamp, 1, 64, 0,
					      args, &err);
		CHECK_OK(rc, err);
	}
	t0 = dpflow_clock_ns();
	while (px && got < N_PKTS && dpflow_clock_ns() - t0 < 20000000000ull) {
		uint32_t idx[64];
		unsigned n;

		/* 8 packets every ~20 us */
		if (sent < N_PKTS && dpflow_clock_ns() - t0 > sent * 2500ull)
			for (int i = 0; i < 8 && sent < N_PKTS; i++)
				sent += feed_one(pool, in, sent, 128);
		n = dpflow_ring_dequeue_burst(dpflow_port_ring_tx(out), idx,
					      64);
		if (n) {
			int64_t now = (int64_t)dpflow_clock_realtime_ns();

			for (unsigned i = 0; i < n; i++) {
				int64_t d = now - (int64_t)dpflow_pool_meta(
						      pool, idx[i])
						      ->tx_time_ns;
				/* clock reads differ by a few us at most */
				if (d < -5000) {
					early++;
					worst_early =
					    d < worst_early ? d : worst_early;
				}
			}
			dpflow_pool_free_bulk(pool, idx, n);
			got += n;
		}
		if (dpflow_gpu_proxy_error(px, &err) < 0) {
			CHECK(0, "proxy: %s", err.msg);
			break;
		}
	}
	rc = dpflow_gpu_kernel_stop(k, 2000000000ull, &err);
	CHECK_OK(rc, err);
	rc = dpflow_gpu_proxy_stop(px, &st, &err);
	CHECK_OK(rc, err);
	printf("precise send: %u packets, %llu timed; release error p50 %.1f "
	       "us, p99 %.1f us, max %.1f us; %u dequeued early (worst %.1f "
	       "us)\n",
	       got, (unsigned long long)st.timed, st.send_err_p50_ns / 1e3,
	       st.send_err_p99_ns / 1e3, st.send_err_max_ns / 1e3, early,
	       worst_early / 1e3);
	CHECK(got == N_PKTS, "%u of %u back", got, N_PKTS);
	CHECK(st.timed == N_PKTS, "%llu timed", (unsigned long long)st.timed);
	CHECK(early == 0, "%u packets left before their time", early);
	dpflow_gpu_kernel_destroy(k);
	dpflow_gpu_queue_destroy(q);
	dpflow_port_close(in);
	dpflow_port_close(out);
	dpflow_gpu_pool_unregister(gpu, pool);
	dpflow_pool_destroy(pool);
	dpflow_gpu_close(gpu);
	return test_done("test_gpu_send");
}
