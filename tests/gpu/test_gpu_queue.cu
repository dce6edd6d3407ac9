/*
 * Queue round trip: ring port -> proxy -> receive ring -> a persistent
 * kernel that flips every byte it is given -> transmit ring -> proxy ->
 * ring port, on both data paths, with and without header split, receiving
 * per block, per warp and per thread; then the same through a CUDA graph
 * launched per batch. Every packet's bytes are checked (flipped within the
 * split, untouched beyond), packets whose id is a multiple of 7 are
 * dropped by the kernel's verdict, and every slot is back in the pool.
 */
#include "gpu_test.h"

#define N_PKTS	   20000
#define POOL_SLOTS 8192

enum { MODE_BLOCK, MODE_WARP, MODE_THREAD };

/* Frames of id i are 60 + (i * 37) % 1400 bytes long. */
static __host__ __device__ uint32_t frame_len(uint32_t id)
{
	return 60 + (id * 37) % 1400;
}

/* The verdict: frames whose length is a multiple of 7 are dropped. */
static __host__ __device__ bool dropped(uint32_t len)
{
	return len % 7 == 0;
}

__device__ static void flip_and_send(struct dpflow_gpu_qdev *q,
				     struct dpflow_gpu_pkt *pkt, uint64_t pos)
{
	for (uint32_t j = 0; j < pkt->hdr_len; j++)
		pkt->data[j] ^= 0xff;
	dpflow_gpu_dev_tx_pkt(
	    q, pos, pkt, 0, dropped(pkt->len) ? DPFLOW_GPU_DESC_F_DROP : 0, 0);
}

__global__ void flip_kernel(struct dpflow_gpu_qdev *q,
			    struct dpflow_gpu_kctl *ctl, int mode)
{
	const uint64_t tmo = 100000; /* 100 us */

	if (mode == MODE_BLOCK) {
		/* the block leaves together: every thread takes part in the
		   batch calls' barriers */
		while (!__syncthreads_or(dpflow_gpu_dev_exit(ctl))) {
			uint64_t first, tfirst;
			uint32_t n =
			    dpflow_gpu_dev_rx_block(q, blockDim.x, tmo, &first);
			struct dpflow_gpu_pkt pkt;

			if (n == 0)
				continue;
			if (threadIdx.x < n)
				dpflow_gpu_dev_rx_pkt(q, first + threadIdx.x,
						      &pkt);
			uint32_t ok;

			while (!(ok = dpflow_gpu_dev_tx_reserve_block(
				     q, n, tmo, &tfirst)) &&
			       !__syncthreads_or(dpflow_gpu_dev_exit(ctl)))
				;
			if (ok && threadIdx.x < n)
				flip_and_send(q, &pkt, tfirst + threadIdx.x);
		}
	} else if (mode == MODE_WARP) {
		uint32_t lane = threadIdx.x & 31;

		while (!__any_sync(0xffffffffu, dpflow_gpu_dev_exit(ctl))) {
			uint64_t first, tfirst;
			uint32_t n = dpflow_gpu_dev_rx_warp(q, 32, tmo, &first);
			struct dpflow_gpu_pkt pkt;

			if (n == 0)
				continue;
			if (lane < n)
				dpflow_gpu_dev_rx_pkt(q, first + lane, &pkt);
			uint32_t ok;

			while (
			    !(ok = dpflow_gpu_dev_tx_reserve_warp(q, n, tmo,
								  &tfirst)) &&
			    !__any_sync(0xffffffffu, dpflow_gpu_dev_exit(ctl)))
				;
			if (ok && lane < n)
				flip_and_send(q, &pkt, tfirst + lane);
		}
	} else {
		while (!dpflow_gpu_dev_exit(ctl)) {
			uint64_t first, tfirst;
			struct dpflow_gpu_pkt pkt;

			if (dpflow_gpu_dev_rx_thread(q, 1, tmo, &first) == 0)
				continue;
			dpflow_gpu_dev_rx_pkt(q, first, &pkt);
			bool ok;

			while (!(ok = dpflow_gpu_dev_tx_reserve_thread(
				     q, 1, tmo, &tfirst)) &&
			       !dpflow_gpu_dev_exit(ctl))
				;
			if (ok)
				flip_and_send(q, &pkt, tfirst);
		}
	}
}

/* Graph mode: one block takes one batch (or nothing within 1 ms). */
__global__ void flip_once(struct dpflow_gpu_qdev *q)
{
	uint64_t first, tfirst;
	struct dpflow_gpu_pkt pkt;
	uint32_t n = dpflow_gpu_dev_rx_block(q, blockDim.x, 1000000, &first);

	if (n == 0)
		return;
	if (threadIdx.x < n)
		dpflow_gpu_dev_rx_pkt(q, first + threadIdx.x, &pkt);
	while (dpflow_gpu_dev_tx_reserve_block(q, n, 1000000, &tfirst) == 0)
		;
	if (threadIdx.x < n)
		flip_and_send(q, &pkt, tfirst + threadIdx.x);
}

struct cfg {
	const char *name;
	enum dpflow_gpu_path path;
	uint32_t split;
	int mode;
	bool graph;
	uint32_t n_pkts;
};

static void check_pkt(struct dpflow_pool *pool, uint32_t idx, uint32_t split,
		      int *bad)
{
	struct dpflow_pkt_meta *m = dpflow_pool_meta(pool, idx);
	const uint8_t *p = dpflow_pkt_data(pool, idx);
	uint32_t id = m->reg[0];
	uint32_t len = frame_len(id);
	uint32_t hdr = split && split < len ? split : len;

	if (m->data_len != len) {
		if ((*bad)++ < 5)
			fprintf(stderr, "  id %u: length %u, expected %u\n", id,
				m->data_len, len);
		return;
	}
	for (uint32_t j = 0; j < len; j++) {
		uint8_t want = frame_byte(id, j) ^ (j < hdr ? 0xff : 0);

		if (p[j] != want) {
			if ((*bad)++ < 5)
				fprintf(stderr,
					"  id %u byte %u: %02x, expected "
					"%02x\n",
					id, j, p[j], want);
			return;
		}
	}
}

static void run_cfg(struct dpflow_gpu *gpu, const struct cfg *c)
{
	struct dpflow_pool_params pp = {"gq", POOL_SLOTS, 0, 0, NULL};
	struct dpflow_gpu_queue_params qp = {};
	struct dpflow_gpu_proxy_params xp = {};
	struct dpflow_gpu_proxy_stats st;
	struct dpflow_error err;
	struct dpflow_pool *pool = dpflow_pool_create(&pp, &err);
	struct dpflow_port *in =
	    dpflow_port_open(pool, "ring:gin,size=4096", &err);
	struct dpflow_port *out =
	    dpflow_port_open(pool, "ring:gout,size=8192", &err);
	struct dpflow_gpu_kernel *k = NULL;
	struct dpflow_gpu_queue *q = NULL;
	struct dpflow_gpu_proxy *px = NULL;
	uint32_t sent = 0, got = 0, want, bad = 0, expect_drop = 0;
	uint64_t t0, elapsed;
	int ibad = 0, rc;

	printf("== %s\n", c->name);
	CHECK(pool && in && out, "%s", err.msg);
	if (!pool || !in || !out)
		goto out;
	qp.pool = pool;
	qp.size = 1024;
	qp.path = c->path;
	qp.hdr_split = c->split;
	q = dpflow_gpu_queue_create(gpu, &qp, &err);
	CHECK(q, "%s", err.msg);
	k = dpflow_gpu_kernel_create(gpu, c->name, &err);
	CHECK(k, "%s", err.msg);
	if (!q || !k)
		goto out;
	xp.queue = q;
	xp.rx_port = in;
	xp.tx_port = out;
	xp.watch = c->graph ? NULL : k;
	px = dpflow_gpu_proxy_start(&xp, &err);
	CHECK(px, "%s", err.msg);
	if (!px)
		goto out;
	if (c->graph) {
		struct dpflow_gpu_qdev *qd = dpflow_gpu_queue_dev(q);
		void *args[] = {&qd};

		rc = dpflow_gpu_kernel_graph(k, (const void *)flip_once, 1, 64,
					     0, args, &err);
	} else {
		struct dpflow_gpu_qdev *qd = dpflow_gpu_queue_dev(q);
		struct dpflow_gpu_kctl *ctl = dpflow_gpu_kernel_ctl(k);
		int mode = c->mode;
		void *args[] = {&qd, &ctl, &mode};

		rc = dpflow_gpu_kernel_launch(k, (const void *)flip_kernel, 4,
					      128, 0, args, &err);
	}
	CHECK_OK(rc, err);
	if (rc < 0)
		goto out;
	want = c->n_pkts;
	for (uint32_t id = 0; id < want; id++)
		expect_drop += dropped(frame_len(id));
	t0 = dpflow_clock_ns();
	while (got + expect_drop < want || sent < want) {
		uint32_t idx[64];
		unsigned n;

		while (sent < want) {
			uint32_t len = frame_len(sent);

			if (dpflow_pool_avail(pool) < 64)
				break;
			if (!feed_one(pool, in, sent, len))
				break;
			sent++;
			if (sent % 64 == 0)
				break;
		}
		n = dpflow_ring_dequeue_burst(dpflow_port_ring_tx(out), idx,
					      64);
		for (unsigned i = 0; i < n; i++) {
			check_pkt(pool, idx[i], c->split, &ibad);
			if (dropped(dpflow_pool_meta(pool, idx[i])->data_len))
				bad++;
		}
		dpflow_pool_free_bulk(pool, idx, n);
		got += n;
		if (c->graph) {
			rc =
			    dpflow_gpu_kernel_graph_run(k, 2000000000ull, &err);
			CHECK_OK(rc, err);
			if (rc < 0)
				break;
		}
		if (dpflow_gpu_proxy_error(px, &err) < 0) {
			CHECK(0, "proxy: %s", err.msg);
			break;
		}
		if (dpflow_clock_ns() - t0 > 10000000000ull) {
			CHECK(0, "timeout: %u of %u back", got,
			      want - expect_drop);
			break;
		}
	}
	elapsed = dpflow_clock_ns() - t0;
	rc = dpflow_gpu_kernel_stop(k, 2000000000ull, &err);
	CHECK_OK(rc, err);
	rc = dpflow_gpu_proxy_stop(px, &st, &err);
	px = NULL;
	CHECK_OK(rc, err);
	CHECK(got == want - expect_drop, "%u back, %u expected", got,
	      want - expect_drop);
	CHECK(ibad == 0, "%d packets with wrong bytes", ibad);
	CHECK(bad == 0, "%u packets that should have been dropped", bad);
	CHECK(st.tx_dropped == expect_drop, "%llu dropped, %u expected",
	      (unsigned long long)st.tx_dropped, expect_drop);
	CHECK(st.rx_pkts == want, "%llu received",
	      (unsigned long long)st.rx_pkts);
	printf("   %u packets in %.1f ms, %u back, %llu dropped, copies "
	       "h2d %llu d2h %llu\n",
	       want, elapsed / 1e6, got, (unsigned long long)st.tx_dropped,
	       (unsigned long long)st.copies_h2d,
	       (unsigned long long)st.copies_d2h);
out:
	dpflow_gpu_proxy_stop(px, NULL, NULL);
	dpflow_gpu_kernel_destroy(k);
	dpflow_gpu_queue_destroy(q);
	dpflow_port_close(in);
	dpflow_port_close(out);
	if (pool) {
		dpflow_gpu_pool_unregister(gpu, pool);
		CHECK(dpflow_pool_avail(pool) == POOL_SLOTS,
		      "%u of %u slots back in the pool",
		      dpflow_pool_avail(pool), POOL_SLOTS);
	}
	dpflow_pool_destroy(pool);
}

int main(void)
{
	struct dpflow_gpu *gpu = test_gpu_open();
	static const struct cfg cfgs[] = {
	    {"zero-copy, per block", DPFLOW_GPU_PATH_ZERO_COPY, 0, MODE_BLOCK,
	     false, N_PKTS},
	    {"zero-copy, header split 64, per warp", DPFLOW_GPU_PATH_ZERO_COPY,
	     64, MODE_WARP, false, N_PKTS},
	    {"zero-copy, per thread", DPFLOW_GPU_PATH_ZERO_COPY, 0, MODE_THREAD,
	     false, N_PKTS},
	    {"device-resident, per block", DPFLOW_GPU_PATH_DEVICE, 0,
	     MODE_BLOCK, false, N_PKTS},
	    {"device-resident, header split 100, per warp",
	     DPFLOW_GPU_PATH_DEVICE, 100, MODE_WARP, false, N_PKTS},
	    {"device-resident, per thread", DPFLOW_GPU_PATH_DEVICE, 0,
	     MODE_THREAD, false, N_PKTS},
	    {"zero-copy, CUDA graph per batch", DPFLOW_GPU_PATH_ZERO_COPY, 0,
	     MODE_BLOCK, true, 2000},
	};

	for (size_t i = 0; i < sizeof(cfgs) / sizeof(cfgs[0]); i++)
		run_cfg(gpu, &cfgs[i]);
	dpflow_gpu_close(gpu);
	return test_done("test_gpu_queue");
}
