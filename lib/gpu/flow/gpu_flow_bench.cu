/*
 * Benchmark support of the GPU target's pipelines (gpu_flow.h, "benchmark
 * support"): packets resident in device memory, the plan's kernel run over
 * them many times and timed with CUDA events, no copies per run; and the
 * copy bandwidths to put the figures beside.
 */
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <cuda_runtime.h>

#include "gpu_flow_internal.h"

extern "C" {
#include "dpflow/gpu_flow.h"
}

struct dpflow_gpu_flow_bench {
	struct dpflow_gpu_flow *g;
	int dev;
	uint64_t n;
	uint32_t hdr_bytes;
	uint8_t *d_hdrs;
	uint16_t *d_lens;
	void *d_res, *d_path;
	void *h_res; /* pinned, for the check */
	size_t res_bytes, path_bytes;
	unsigned blocks, threads;
	cudaStream_t stream;
	cudaEvent_t ev[2];
};

static int bench_fail(struct dpflow_error *err, cudaError_t rc,
		      const char *what)
{
	dpflow_error_set(err, EIO, "gpu", "%s: %s", what,
			 cudaGetErrorString(rc));
	return -EIO;
}

#define BTRY(call, what)                                   \
	do {                                               \
		cudaError_t rc_ = (call);                  \
		if (rc_ != cudaSuccess)                    \
			return bench_fail(err, rc_, what); \
	} while (0)

void dpflow_gpu_flow_bench_destroy(struct dpflow_gpu_flow_bench *b)
{
	if (!b)
		return;
	cudaSetDevice(b->dev);
	if (b->stream)
		cudaStreamSynchronize(b->stream);
	cudaFree(b->d_hdrs);
	cudaFree(b->d_lens);
	cudaFree(b->d_res);
	cudaFree(b->d_path);
	cudaFreeHost(b->h_res);
	if (b->ev[0])
		cudaEventDestroy(b->ev[0]);
	if (b->ev[1])
		cudaEventDestroy(b->ev[1]);
	if (b->stream)
		cudaStreamDestroy(b->stream);
	free(b);
}

static int bench_alloc(struct dpflow_gpu_flow_bench *b, const uint8_t *hdrs,
		       const uint16_t *lens, struct dpflow_error *err)
{
	cudaDeviceProp prop;
	size_t n = b->n;

	BTRY(cudaSetDevice(b->dev), "selecting the GPU");
	BTRY(cudaGetDeviceProperties(&prop, b->dev), "device properties");
	BTRY(cudaStreamCreateWithFlags(&b->stream, cudaStreamNonBlocking),
	     "stream");
	BTRY(cudaEventCreate(&b->ev[0]), "event");
	BTRY(cudaEventCreate(&b->ev[1]), "event");
	BTRY(cudaMalloc(&b->d_hdrs, n * b->hdr_bytes), "device packets");
	BTRY(cudaMalloc(&b->d_lens, n * sizeof(uint16_t)), "device lengths");
	BTRY(cudaMalloc(&b->d_res, n * b->res_bytes), "device verdicts");
	BTRY(cudaMalloc(&b->d_path, n * b->path_bytes), "device paths");
	BTRY(cudaHostAlloc(&b->h_res, n * b->res_bytes, cudaHostAllocDefault),
	     "pinned verdicts");
	BTRY(cudaMemcpy(b->d_hdrs, hdrs, n * b->hdr_bytes,
			cudaMemcpyHostToDevice),
	     "copy of the packets");
	BTRY(cudaMemcpy(b->d_lens, lens, n * sizeof(uint16_t),
			cudaMemcpyHostToDevice),
	     "copy of the lengths");
	/* a grid that fills the GPU (grid-stride over the packets) */
	b->threads = GPU_BENCH_THREADS;
	b->blocks = (unsigned)prop.multiProcessorCount * 8;
	if ((uint64_t)b->blocks * b->threads > n)
		b->blocks = (unsigned)((n + b->threads - 1) / b->threads);
	return 0;
}

struct dpflow_gpu_flow_bench *
dpflow_gpu_flow_bench_create(struct dpflow_gpu_flow *g, const uint8_t *hdrs,
			     uint32_t hdr_bytes, const uint16_t *lens,
			     uint64_t n, struct dpflow_error *err)
{
	struct dpflow_gpu_flow_bench *b;

	if (!g || !hdrs || !lens || !n || !hdr_bytes) {
		dpflow_error_set(err, EINVAL, "packets", "no packets");
		return NULL;
	}
	for (uint64_t i = 0; i < n; i++)
		if (lens[i] > hdr_bytes) {
			dpflow_error_set(err, EINVAL, "packets",
					 "packet %llu: %u bytes, more than "
					 "%u",
					 (unsigned long long)i, lens[i],
					 hdr_bytes);
			return NULL;
		}
	b = (struct dpflow_gpu_flow_bench *)calloc(1, sizeof(*b));
	if (!b) {
		dpflow_error_set(err, ENOMEM, NULL, "out of memory");
		return NULL;
	}
	b->g = g;
	b->dev = gpu_flow_bench_dev(g);
	b->n = n;
	b->hdr_bytes = hdr_bytes;
	b->res_bytes = gpu_flow_bench_res_bytes();
	b->path_bytes = gpu_flow_bench_path_bytes(g);
	if (bench_alloc(b, hdrs, lens, err)) {
		dpflow_gpu_flow_bench_destroy(b);
		return NULL;
	}
	return b;
}

static int run_range(struct dpflow_gpu_flow_bench *b, uint16_t port,
		     uint64_t first, uint64_t n, struct dpflow_error *err)
{
	unsigned blocks = b->blocks;

	if ((uint64_t)blocks * b->threads > n)
		blocks = (unsigned)((n + b->threads - 1) / b->threads);
	return gpu_flow_bench_launch(
	    b->g, port, b->d_hdrs + first * b->hdr_bytes, b->hdr_bytes,
	    b->d_lens + first, n, (uint8_t *)b->d_res + first * b->res_bytes,
	    (uint8_t *)b->d_path + first * b->path_bytes, blocks, b->threads,
	    b->stream, err);
}

int dpflow_gpu_flow_bench_once(struct dpflow_gpu_flow_bench *b, uint16_t port,
			       uint64_t first, uint64_t n, uint64_t *sent,
			       uint64_t *dropped, struct dpflow_error *err)
{
	int rc;

	if (!b || first > b->n || n > b->n - first || !n)
		return dpflow_error_set(err, EINVAL, "packets",
					"range outside the packets");
	BTRY(cudaSetDevice(b->dev), "selecting the GPU");
	rc = run_range(b, port, first, n, err);
	if (rc)
		return rc;
	BTRY(cudaMemcpyAsync(
		 b->h_res, (uint8_t *)b->d_res + first * b->res_bytes,
		 n * b->res_bytes, cudaMemcpyDeviceToHost, b->stream),
	     "copy of the verdicts");
	BTRY(cudaStreamSynchronize(b->stream), "benchmark kernel");
	*sent = *dropped = 0;
	for (uint64_t i = 0; i < n; i++) {
		uint8_t s;
		uint16_t v;

		gpu_flow_bench_verdict(b->h_res, i, &s, &v);
		if (s)
			(*sent)++;
		else
			(*dropped)++;
	}
	return 0;
}

int dpflow_gpu_flow_bench_time(struct dpflow_gpu_flow_bench *b, uint16_t port,
			       unsigned warmup, unsigned runs,
			       struct dpflow_gpu_flow_bench_stats *st,
			       struct dpflow_error *err)
{
	float ms = 0, best = 0;
	int rc;

	if (!b || !st || !runs)
		return dpflow_error_set(err, EINVAL, "runs", "nothing to run");
	memset(st, 0, sizeof(*st));
	BTRY(cudaSetDevice(b->dev), "selecting the GPU");
	for (unsigned w = 0; w < warmup; w++) {
		rc = run_range(b, port, 0, b->n, err);
		if (rc)
			return rc;
	}
	BTRY(cudaStreamSynchronize(b->stream), "warm-up runs");
	/* each run timed alone, for the fastest, then all back to back */
	for (unsigned r = 0; r < (runs < 3 ? runs : 3); r++) {
		BTRY(cudaEventRecord(b->ev[0], b->stream), "event");
		rc = run_range(b, port, 0, b->n, err);
		if (rc)
			return rc;
		BTRY(cudaEventRecord(b->ev[1], b->stream), "event");
		BTRY(cudaEventSynchronize(b->ev[1]), "timed run");
		BTRY(cudaEventElapsedTime(&ms, b->ev[0], b->ev[1]), "timing");
		if (!best || ms < best)
			best = ms;
	}
	BTRY(cudaEventRecord(b->ev[0], b->stream), "event");
	for (unsigned r = 0; r < runs; r++) {
		rc = run_range(b, port, 0, b->n, err);
		if (rc)
			return rc;
	}
	BTRY(cudaEventRecord(b->ev[1], b->stream), "event");
	BTRY(cudaEventSynchronize(b->ev[1]), "timed runs");
	BTRY(cudaEventElapsedTime(&ms, b->ev[0], b->ev[1]), "timing");
	st->runs = runs;
	st->pkts = b->n * runs;
	st->seconds = ms / 1e3;
	st->pps = st->seconds > 0 ? (double)st->pkts / st->seconds : 0;
	st->hdr_bytes_per_s = st->pps * b->hdr_bytes;
	st->out_bytes_per_s = st->pps * (double)(b->res_bytes + b->path_bytes);
	st->min_run_s = best / 1e3;
	st->blocks = b->blocks;
	st->threads = b->threads;
	return 0;
}

/* ---- copy bandwidth ----------------------------------------------------- */

struct bw_bufs {
	void *h[2], *d[3];
	cudaStream_t s[2];
	cudaEvent_t ev[4];
};

static void bw_free(struct bw_bufs *w)
{
	for (int i = 0; i < 2; i++) {
		cudaFreeHost(w->h[i]);
		if (w->s[i])
			cudaStreamDestroy(w->s[i]);
	}
	for (int i = 0; i < 3; i++)
		cudaFree(w->d[i]);
	for (int i = 0; i < 4; i++)
		if (w->ev[i])
			cudaEventDestroy(w->ev[i]);
}

/* Best of 3 of one copy (or two at once on two streams) in seconds. */
static int bw_time(struct bw_bufs *w, void *dst0, const void *src0,
		   size_t bytes0, cudaMemcpyKind k0, void *dst1,
		   const void *src1, size_t bytes1, cudaMemcpyKind k1,
		   double *sec, struct dpflow_error *err)
{
	*sec = 0;
	for (int t = 0; t < 4; t++) { /* the first is a warm-up */
		float ms = 0;

		BTRY(cudaEventRecord(w->ev[0], w->s[0]), "event");
		BTRY(cudaStreamWaitEvent(w->s[1], w->ev[0], 0), "event");
		BTRY(cudaMemcpyAsync(dst0, src0, bytes0, k0, w->s[0]), "copy");
		if (dst1)
			BTRY(cudaMemcpyAsync(dst1, src1, bytes1, k1, w->s[1]),
			     "copy");
		BTRY(cudaEventRecord(w->ev[2], w->s[1]), "event");
		BTRY(cudaStreamWaitEvent(w->s[0], w->ev[2], 0), "event");
		BTRY(cudaEventRecord(w->ev[1], w->s[0]), "event");
		BTRY(cudaEventSynchronize(w->ev[1]), "copy");
		BTRY(cudaEventElapsedTime(&ms, w->ev[0], w->ev[1]), "timing");
		if (t && (!*sec || ms / 1e3 < *sec))
			*sec = ms / 1e3;
	}
	return 0;
}

static int bw_run(struct bw_bufs *w, int dev, size_t bytes, size_t d2d,
		  struct dpflow_gpu_copy_bw *bw, struct dpflow_error *err)
{
	double s;
	int rc;

	BTRY(cudaSetDevice(dev), "selecting the GPU");
	for (int i = 0; i < 2; i++) {
		BTRY(cudaStreamCreateWithFlags(&w->s[i], cudaStreamNonBlocking),
		     "stream");
		BTRY(cudaHostAlloc(&w->h[i], bytes, cudaHostAllocDefault),
		     "pinned buffer");
		memset(w->h[i], i + 1, bytes);
		BTRY(cudaMalloc(&w->d[i], bytes), "device buffer");
	}
	for (int i = 0; i < 4; i++)
		BTRY(cudaEventCreate(&w->ev[i]), "event");
	rc = bw_time(w, w->d[0], w->h[0], bytes, cudaMemcpyHostToDevice, NULL,
		     NULL, 0, cudaMemcpyHostToDevice, &s, err);
	if (rc)
		return rc;
	bw->h2d = bytes / s;
	rc = bw_time(w, w->h[1], w->d[1], bytes, cudaMemcpyDeviceToHost, NULL,
		     NULL, 0, cudaMemcpyDeviceToHost, &s, err);
	if (rc)
		return rc;
	bw->d2h = bytes / s;
	rc = bw_time(w, w->d[0], w->h[0], bytes, cudaMemcpyHostToDevice,
		     w->h[1], w->d[1], bytes, cudaMemcpyDeviceToHost, &s, err);
	if (rc)
		return rc;
	bw->both = 2.0 * bytes / s;
	cudaFree(w->d[0]);
	cudaFree(w->d[1]);
	w->d[0] = w->d[1] = NULL;
	BTRY(cudaMalloc(&w->d[0], d2d), "device buffer");
	BTRY(cudaMalloc(&w->d[1], d2d), "device buffer");
	BTRY(cudaMemset(w->d[0], 1, d2d), "device buffer");
	rc = bw_time(w, w->d[1], w->d[0], d2d, cudaMemcpyDeviceToDevice, NULL,
		     NULL, 0, cudaMemcpyDeviceToDevice, &s, err);
	if (rc)
		return rc;
	/* bytes copied (each read once and written once) */
	bw->d2d = d2d / s;
	return 0;
}

int dpflow_gpu_copy_bw_measure(int dev, size_t bytes, size_t d2d_bytes,
			       struct dpflow_gpu_copy_bw *bw,
			       struct dpflow_error *err)
{
	struct bw_bufs w;
	int rc;

	if (!bw || !bytes || !d2d_bytes)
		return dpflow_error_set(err, EINVAL, "bytes",
					"nothing to copy");
	memset(&w, 0, sizeof(w));
	memset(bw, 0, sizeof(*bw));
	rc = bw_run(&w, dev, bytes, d2d_bytes, bw, err);
	bw_free(&w);
	return rc;
}
