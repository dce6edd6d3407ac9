/*
 * Pipe graphs on the GPU (gpu_flow.h): the device plan, its sync after
 * entry batches, the per-burst kernels (the per-packet pipeline they run
 * is in gpu_flow_dev.cuh) and the host's replay of a burst.
 *
 * A kernel runs one thread per packet on a staged copy of the burst's
 * slots (metadata, headroom, frame) and does what pipeline.c's
 * dpflow_ctx_process_burst() does for one packet, with the same shared
 * code: parse (parse_impl.h), key (field_impl.h), table lookups (the
 * *_impl.h one-key lookups, hash_impl.h), meters (meter_impl.h),
 * connection tracking (ct_impl.h), actions (flow_actions_impl.h),
 * forwarding. Plans with CT pipes or meters run the ordered kernel
 * (gpu_flow_sched.cu: the CPU's order where packets interact), the others
 * the plain one (a thread walks its packet through the graph). Each packet
 * records its path (pipe, entry, bytes, colour or CT outcome per pipe
 * visited) and its mirror snapshots; the host replays the CPU's
 * scheduling of pipes over the paths, so that packets reach their ports,
 * RSS queues and handlers in the CPU's order, mirror copies go out where
 * the CPU sends them, and the counts (entry and pipe counters, shared
 * counters, colours, CT counts, aging) go into the context as the CPU
 * would have put them. CT tables and meters live on the device and are
 * written back into the host images after each burst
 * (gpu_flow_state.cu).
 */
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cuda_runtime.h>

#include "gpu_flow_feat.cuh"
#include "gpu_flow_internal.h"

extern "C" {
#include "dpflow/clock.h"
#include "dpflow/gpu_flow.h"
#include "dpflow/port.h"
#include "dpflow/ring.h"
#include "flow/flow_internal.h"
#include "flow/meter.h"
#include "flow/table_acl.h"
}

/* Mirror copies of one packet along its path, at most. */
#define GPU_MIRRORS_MAX 8
/* Handler lists of a burst before calls become immediate (pipeline.c's
 * HANDLER_LISTS: the replay hands packets over exactly as the CPU does). */
#define REPLAY_HANDLER_LISTS 4

/* Host side of one pipe of the plan. */
struct plan_pipe {
	void *d_image;
	size_t image_cap;
	struct dpflow_plan_entry *d_entries, *h_entries;
	struct dpflow_edit_encap *d_encaps, *h_encaps;
	unsigned long long *d_ctr;
	uint8_t *live;	 /* slot live at the last sync */
	uint64_t *carry; /* size x (pkts, bytes) carried by updates */
};

/* Packets of a burst for one handler, handed over after the ports. */
struct replay_handler {
	unsigned slot;
	uint16_t n;
	uint32_t idx[DPFLOW_BURST_MAX];
};

struct dpflow_gpu_flow {
	struct dpflow_ctx *ctx;
	int dev;
	uint64_t batches_synced; /* ctx->batches at the last sync */
	unsigned n_pipes;
	uint32_t path_max;
	uint32_t stride;
	uint32_t mirror_max; /* mirror snapshots per packet */
	cudaStream_t stream;
	struct gpu_pipe *h_pipes, *d_pipes;
	unsigned long long *d_stats; /* n_pipes x 3, then the clock word */
	struct gpu_state *st;	     /* CT tables and meters */
	struct plan_pipe pp[DPFLOW_PIPES_MAX];
	/* per burst: staged slots, results, paths, mirror snapshots and
	 * their records (pinned and device) */
	uint8_t *h_stage, *d_stage;
	struct gpu_result *h_res, *d_res;
	struct gpu_step *h_path, *d_path;
	uint8_t *h_mirror, *d_mirror;
	struct gpu_mirror *h_mrec, *d_mrec;
	/* replay scratch */
	uint16_t cur[DPFLOW_BURST_MAX];
	uint8_t next_mirror[DPFLOW_BURST_MAX];
	uint16_t list_n[DPFLOW_PIPES_MAX];
	uint16_t list[DPFLOW_PIPES_MAX][DPFLOW_BURST_MAX];
	uint16_t out_n[DPFLOW_PORTS_MAX];
	uint32_t out[DPFLOW_PORTS_MAX][DPFLOW_BURST_MAX];
	uint16_t rss_n[DPFLOW_RSS_QUEUES_MAX];
	uint32_t rss[DPFLOW_RSS_QUEUES_MAX][DPFLOW_BURST_MAX];
	unsigned n_hout;
	struct replay_handler hout[REPLAY_HANDLER_LISTS];
	uint32_t drop_idx[DPFLOW_BURST_MAX];
};

/* ---- the kernels ------------------------------------------------------- */

/* A burst of a plan without CT pipes or meters: a thread a packet. Also
 * sets the plan's clock word (for kernels without a burst context). */
__global__ void gpu_flow_kernel(const struct gpu_pipe *pipes, int root,
				uint16_t port, uint8_t *stage, uint32_t stride,
				uint32_t n, struct gpu_result *res,
				struct gpu_step *path, uint32_t path_max,
				const struct gpu_burst b,
				unsigned long long *clock)
{
	uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
	struct dpflow_pkt_meta *m;

	if (i == 0 && clock)
		*(volatile unsigned long long *)clock = b.now_ns;
	if (i >= n)
		return;
	m = (struct dpflow_pkt_meta *)(stage + (size_t)i * stride);
	res[i] = gpu_flow_pkt_at(pipes, root, port, m, (uint8_t *)(m + 1),
				 path + (size_t)i * path_max, path_max, &b, i);
}

/*
 * The benchmark's kernel (gpu_flow_bench.cu): packets of @hstride bytes
 * (at most GPU_BENCH_STRIDE_MAX, a multiple of 16) at @hdrs (frame at
 * offset 0, @lens bytes), already in device memory; the metadata lives in
 * the thread (nothing goes back to a slot); the verdicts and paths stay in
 * device memory. Grid-stride over @n, a block's packets at a time: the
 * block first copies its packets' bytes into shared memory with 16-byte
 * loads that neighbouring threads make to neighbouring addresses (one
 * transaction a line), then each thread parses and walks its packet there
 * (the byte-wise parser reading device memory directly would make every
 * load of a warp touch 32 lines).
 */
__global__ void __launch_bounds__(GPU_BENCH_THREADS, GPU_BENCH_MIN_BLOCKS)
    gpu_flow_bench_kernel(const struct gpu_pipe *pipes, int root, uint16_t port,
			  uint8_t *hdrs, uint32_t hstride, const uint16_t *lens,
			  uint64_t n, struct gpu_result *res,
			  struct gpu_step *path, uint32_t path_max)
{
	__shared__ uint4 win[GPU_BENCH_THREADS * GPU_BENCH_STRIDE_MAX / 16];
	uint32_t vecs = hstride / 16; /* 16-byte words a packet */
	uint64_t step = (uint64_t)gridDim.x * blockDim.x;

	for (uint64_t base = (uint64_t)blockIdx.x * blockDim.x; base < n;
	     base += step) {
		uint32_t cnt =
		    (uint32_t)(n - base < blockDim.x ? n - base : blockDim.x);
		const uint4 *src = (const uint4 *)(hdrs + base * hstride);
		uint64_t i = base + threadIdx.x;

		__syncthreads(); /* the last round's readers are done */
		for (uint32_t w = threadIdx.x; w < cnt * vecs; w += blockDim.x)
			win[w] = src[w];
		__syncthreads();
		if (threadIdx.x < cnt) {
			struct dpflow_pkt_meta m;

			memset(&m, 0, sizeof(m));
			m.data_len = lens[i];
			res[i] =
			    gpu_flow_pkt(pipes, root, port, &m,
					 (uint8_t *)(win + threadIdx.x * vecs),
					 path + i * path_max, path_max);
		}
	}
}

/* The benchmark kernel without the staging (the default; the staged one
 * with DPFLOW_GPU_BENCH_STAGED set): each thread parses its packet in
 * device memory. */
__global__ void gpu_flow_bench_direct_kernel(
    const struct gpu_pipe *pipes, int root, uint16_t port, uint8_t *hdrs,
    uint32_t hstride, const uint16_t *lens, uint64_t n, struct gpu_result *res,
    struct gpu_step *path, uint32_t path_max)
{
	uint64_t step = (uint64_t)gridDim.x * blockDim.x;

	for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
	     i < n; i += step) {
		struct dpflow_pkt_meta m;

		memset(&m, 0, sizeof(m));
		m.data_len = lens[i];
		res[i] = gpu_flow_pkt(pipes, root, port, &m, hdrs + i * hstride,
				      path + i * path_max, path_max);
	}
}

/* ---- errors ------------------------------------------------------------- */

static int cuda_fail(struct dpflow_error *err, cudaError_t rc, const char *what)
{
	dpflow_error_set(err, EIO, "gpu", "%s: %s", what,
			 cudaGetErrorString(rc));
	return -EIO;
}

#define CUDA_TRY(call, what)                              \
	do {                                              \
		cudaError_t rc_ = (call);                 \
		if (rc_ != cudaSuccess)                   \
			return cuda_fail(err, rc_, what); \
	} while (0)

static int unsupported(struct dpflow_error *err, const char *field,
		       const char *pipe, const char *what)
{
	return dpflow_error_set(err, ENOTSUP, field,
				"pipe '%s': %s is not supported on the GPU "
				"target yet",
				pipe, what);
}

/* ---- plan building ------------------------------------------------------ */

/* What the GPU target cannot run in pipe @p's configuration. */
static int check_pipe(const struct dpflow_pipe *p, struct dpflow_error *err)
{
	if (p->cfg.type >= DPFLOW_PIPE__COUNT)
		return unsupported(err, "type", p->name, "this pipe type");
	return 0;
}

/* Mirror copies pipe @p's actions make of a packet, at most. */
static unsigned pipe_mirrors(const struct dpflow_pipe *p)
{
	unsigned most = 0;

	for (unsigned t = 0; t < p->cfg.n_action_tmpls; t++) {
		unsigned n = 0;

		for (unsigned i = 0; i < p->cfg.actions[t].n; i++)
			n += p->cfg.actions[t].a[i].kind == DPFLOW_ACT_MIRROR;
		most = n > most ? n : most;
	}
	return most;
}

/* Entries the plan keeps for pipe @p: a CT pipe has one, all zero (what
 * its tracked packets run, as pipe->ct_entry on the CPU). */
static uint32_t plan_entries(const struct dpflow_pipe *p)
{
	return p->cfg.type == DPFLOW_PIPE_CT ? 1 : p->cfg.size;
}

/*
 * The host copy of pipe @p's device pipe: its part of the plan, as the CPU
 * target walks it (the GPU's slots of metered and CT pipes are filled by
 * gpu_flow_state.cu).
 */
static void pipe_plan(const struct dpflow_pipe *p, struct gpu_pipe *gp)
{
	memset(gp, 0, sizeof(*gp));
	static_cast<struct dpflow_plan_pipe &>(*gp) = p->plan;
	gp->meter_slot = 0;
	gp->ct_slot = 0;
}

static bool pipe_has_entry_encap(const struct dpflow_pipe *p)
{
	return p->plan_encaps != NULL;
}

static size_t image_bytes(const struct dpflow_pipe *p, const void *img)
{
	if (p->cfg.type == DPFLOW_PIPE_CONTROL ||
	    p->cfg.type == DPFLOW_PIPE_ACL)
		return dpflow_acl_image_bytes(
		    (const struct dpflow_acl_image *)img);
	return p->image_size;
}

static bool entry_live(const struct dpflow_entry *e)
{
	return e->state == ENTRY_ACTIVE || e->state == ENTRY_REMOVING;
}

/* The host entry array of pipe @i: the plan's, byte for byte. */
static void entries_plan(struct dpflow_gpu_flow *g, unsigned i)
{
	struct dpflow_pipe *p = g->ctx->pipes[i];
	struct plan_pipe *pp = &g->pp[i];

	memcpy(pp->h_entries, p->plan_entries,
	       plan_entries(p) * sizeof(*pp->h_entries));
	if (pp->h_encaps && p->plan_encaps)
		memcpy(pp->h_encaps, p->plan_encaps,
		       (size_t)p->cfg.size * sizeof(*pp->h_encaps));
	if (p->cfg.type == DPFLOW_PIPE_CT)
		return;
	/* slots no entry holds: zero, as the tables never name them */
	for (uint32_t k = 0; k < p->cfg.size; k++)
		if (!entry_live(&p->entries[k]))
			memset(&pp->h_entries[k], 0, sizeof(pp->h_entries[k]));
}

/*
 * Entries of pipe @i live since the last sync start their device counters
 * from zero plus what an update carried over (the context's count of the
 * entry replaced, which holds the GPU's too: see replay()).
 */
static int counters_restart(struct dpflow_gpu_flow *g, unsigned i,
			    struct dpflow_error *err)
{
	struct dpflow_pipe *p = g->ctx->pipes[i];
	struct plan_pipe *pp = &g->pp[i];
	size_t n_ctr = 2 * (size_t)p->cfg.size;
	unsigned long long *h =
	    (unsigned long long *)malloc(n_ctr * sizeof(*h));
	cudaError_t rc;

	if (!h)
		return dpflow_error_set(err, ENOMEM, NULL, "out of memory");
	rc = cudaStreamSynchronize(g->stream);
	if (rc == cudaSuccess)
		rc = cudaMemcpy(h, pp->d_ctr, n_ctr * sizeof(*h),
				cudaMemcpyDeviceToHost);
	for (uint32_t k = 0; rc == cudaSuccess && k < p->cfg.size; k++) {
		bool live = entry_live(&p->entries[k]);

		if (live && !pp->live[k]) {
			h[2 * k] = h[2 * k + 1] = 0;
			pp->carry[2 * k] = p->dp[k].base_pkts;
			pp->carry[2 * k + 1] = p->dp[k].base_bytes;
		}
		pp->live[k] = live;
	}
	if (rc == cudaSuccess)
		rc = cudaMemcpy(pp->d_ctr, h, n_ctr * sizeof(*h),
				cudaMemcpyHostToDevice);
	free(h);
	if (rc != cudaSuccess)
		return cuda_fail(err, rc, "restarting entry counters");
	return 0;
}

int dpflow_gpu_flow_sync(struct dpflow_gpu_flow *g, struct dpflow_error *err)
{
	struct dpflow_ctx *ctx = g->ctx;
	uint64_t batches = __atomic_load_n(&ctx->batches, __ATOMIC_ACQUIRE);
	unsigned gen = __atomic_load_n(&ctx->gen, __ATOMIC_ACQUIRE);

	for (unsigned i = 0; i < g->n_pipes; i++) {
		struct dpflow_pipe *p = ctx->pipes[i];
		struct plan_pipe *pp = &g->pp[i];
		const void *img = p->images[gen];
		size_t bytes = image_bytes(p, img);
		bool fresh = false;
		int rc;

		if (p->cfg.type == DPFLOW_PIPE_CT) {
			/* its one all-zero entry; its table is
			 * gpu_flow_state.cu's */
			entries_plan(g, i);
			CUDA_TRY(cudaMemcpyAsync(pp->d_entries, pp->h_entries,
						 sizeof(*pp->h_entries),
						 cudaMemcpyHostToDevice,
						 g->stream),
				 "copy of the entries");
			continue;
		}
		if (bytes > pp->image_cap) {
			void *d = NULL;

			CUDA_TRY(cudaMalloc(&d, bytes), "device table image");
			cudaFree(pp->d_image);
			pp->d_image = d;
			pp->image_cap = bytes;
			g->h_pipes[i].image = d;
		}
		CUDA_TRY(cudaMemcpyAsync(pp->d_image, img, bytes,
					 cudaMemcpyHostToDevice, g->stream),
			 "copy of a table image");
		entries_plan(g, i);
		CUDA_TRY(cudaMemcpyAsync(pp->d_entries, pp->h_entries,
					 (size_t)p->cfg.size *
					     sizeof(*pp->h_entries),
					 cudaMemcpyHostToDevice, g->stream),
			 "copy of the entries");
		if (pp->h_encaps)
			CUDA_TRY(cudaMemcpyAsync(pp->d_encaps, pp->h_encaps,
						 (size_t)p->cfg.size *
						     sizeof(*pp->h_encaps),
						 cudaMemcpyHostToDevice,
						 g->stream),
				 "copy of the entries' encapsulations");
		/* entries live since the last sync: counters from zero plus
		 * what an update carried (the context's count of the entry
		 * replaced, which includes the GPU's: see process) */
		for (uint32_t k = 0; k < p->cfg.size; k++)
			fresh |= entry_live(&p->entries[k]) && !pp->live[k];
		if (fresh) {
			rc = counters_restart(g, i, err);
			if (rc)
				return rc;
		} else {
			for (uint32_t k = 0; k < p->cfg.size; k++)
				pp->live[k] = entry_live(&p->entries[k]);
		}
	}
	CUDA_TRY(cudaMemcpyAsync(g->d_pipes, g->h_pipes,
				 g->n_pipes * sizeof(*g->h_pipes),
				 cudaMemcpyHostToDevice, g->stream),
		 "copy of the pipes");
	if (g->st) { /* the new entries' meters */
		int rc = gpu_state_push(g->st, true, g->stream, err);

		if (rc)
			return rc;
	}
	CUDA_TRY(cudaStreamSynchronize(g->stream), "sync");
	g->batches_synced = batches;
	return 0;
}

/* ---- bind / unbind ------------------------------------------------------ */

void dpflow_gpu_flow_unbind(struct dpflow_gpu_flow *g)
{
	if (!g)
		return;
	cudaSetDevice(g->dev);
	for (unsigned i = 0; i < DPFLOW_PIPES_MAX; i++) {
		struct plan_pipe *pp = &g->pp[i];

		cudaFree(pp->d_image);
		cudaFree(pp->d_entries);
		cudaFree(pp->d_encaps);
		cudaFree(pp->d_ctr);
		free(pp->h_entries);
		free(pp->h_encaps);
		free(pp->live);
		free(pp->carry);
	}
	gpu_state_destroy(g->st);
	cudaFree(g->d_pipes);
	cudaFree(g->d_stats);
	cudaFree(g->d_stage);
	cudaFree(g->d_res);
	cudaFree(g->d_path);
	cudaFree(g->d_mirror);
	cudaFree(g->d_mrec);
	cudaFreeHost(g->h_stage);
	cudaFreeHost(g->h_res);
	cudaFreeHost(g->h_path);
	cudaFreeHost(g->h_mirror);
	cudaFreeHost(g->h_mrec);
	free(g->h_pipes);
	if (g->stream)
		cudaStreamDestroy(g->stream);
	free(g);
}

/* Room for the mirror snapshots of a burst. */
static int mirror_alloc(struct dpflow_gpu_flow *g, struct dpflow_error *err)
{
	size_t n = (size_t)DPFLOW_BURST_MAX * g->mirror_max;

	if (!n)
		return 0;
	CUDA_TRY(cudaMalloc(&g->d_mirror, n * g->stride), "mirror snapshots");
	CUDA_TRY(cudaMalloc(&g->d_mrec, n * sizeof(*g->d_mrec)),
		 "mirror records");
	CUDA_TRY(
	    cudaHostAlloc(&g->h_mirror, n * g->stride, cudaHostAllocDefault),
	    "pinned mirror snapshots");
	CUDA_TRY(cudaHostAlloc(&g->h_mrec, n * sizeof(*g->h_mrec),
			       cudaHostAllocDefault),
		 "pinned mirror records");
	return 0;
}

static int plan_alloc(struct dpflow_gpu_flow *g, struct dpflow_error *err)
{
	size_t burst = DPFLOW_BURST_MAX;
	/* the pipe counters, then the clock word */
	size_t n_stats = 3 * (size_t)g->n_pipes + 1;

	CUDA_TRY(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking),
		 "stream");
	CUDA_TRY(cudaMalloc(&g->d_pipes, g->n_pipes * sizeof(*g->d_pipes)),
		 "device pipes");
	CUDA_TRY(cudaMalloc(&g->d_stats, n_stats * sizeof(*g->d_stats)),
		 "device pipe counters");
	CUDA_TRY(cudaMemset(g->d_stats, 0, n_stats * sizeof(*g->d_stats)),
		 "device pipe counters");
	if (mirror_alloc(g, err))
		return -(err ? err->code : EIO);
	CUDA_TRY(cudaMalloc(&g->d_stage, burst * g->stride), "device slots");
	CUDA_TRY(cudaMalloc(&g->d_res, burst * sizeof(*g->d_res)),
		 "device results");
	CUDA_TRY(
	    cudaMalloc(&g->d_path, burst * g->path_max * sizeof(*g->d_path)),
	    "device paths");
	CUDA_TRY(
	    cudaHostAlloc(&g->h_stage, burst * g->stride, cudaHostAllocDefault),
	    "pinned slots");
	CUDA_TRY(cudaHostAlloc(&g->h_res, burst * sizeof(*g->h_res),
			       cudaHostAllocDefault),
		 "pinned results");
	CUDA_TRY(cudaHostAlloc(&g->h_path,
			       burst * g->path_max * sizeof(*g->h_path),
			       cudaHostAllocDefault),
		 "pinned paths");
	for (unsigned i = 0; i < g->n_pipes; i++) {
		struct dpflow_pipe *p = g->ctx->pipes[i];
		struct plan_pipe *pp = &g->pp[i];
		size_t size = plan_entries(p);

		pp->h_entries = (struct dpflow_plan_entry *)calloc(
		    size, sizeof(*pp->h_entries));
		pp->live = (uint8_t *)calloc(size, 1);
		pp->carry = (uint64_t *)calloc(2 * size, sizeof(uint64_t));
		if (pipe_has_entry_encap(p))
			pp->h_encaps = (struct dpflow_edit_encap *)calloc(
			    size, sizeof(*pp->h_encaps));
		if (!pp->h_entries || !pp->live || !pp->carry ||
		    (pipe_has_entry_encap(p) && !pp->h_encaps))
			return dpflow_error_set(err, ENOMEM, NULL,
						"out of memory");
		CUDA_TRY(
		    cudaMalloc(&pp->d_entries, size * sizeof(*pp->d_entries)),
		    "device entries");
		if (pp->h_encaps)
			CUDA_TRY(cudaMalloc(&pp->d_encaps,
					    size * sizeof(*pp->d_encaps)),
				 "device encapsulations");
		CUDA_TRY(cudaMalloc(&pp->d_ctr, 2 * size * sizeof(*pp->d_ctr)),
			 "device entry counters");
		CUDA_TRY(
		    cudaMemset(pp->d_ctr, 0, 2 * size * sizeof(*pp->d_ctr)),
		    "device entry counters");
		g->h_pipes[i].entries = pp->d_entries;
		g->h_pipes[i].entry_encaps = pp->d_encaps;
		g->h_pipes[i].ctr = pp->d_ctr;
		g->h_pipes[i].stats = g->d_stats + 3 * i;
		g->h_pipes[i].clock = g->d_stats + 3 * (size_t)g->n_pipes;
	}
	return 0;
}

/* Mirror snapshots a packet needs along any path; refused above
 * GPU_MIRRORS_MAX, naming the pipe where the count passes it. */
static int mirrors_plan(struct dpflow_gpu_flow *g, struct dpflow_error *err)
{
	unsigned sum = 0;

	for (unsigned i = 0; i < g->n_pipes; i++) {
		const struct dpflow_pipe *p = g->ctx->pipes[i];

		sum += pipe_mirrors(p);
		if (sum > GPU_MIRRORS_MAX)
			return dpflow_error_set(
			    err, ENOTSUP, "actions",
			    "pipe '%s': more than %d 'mirror' copies of a "
			    "packet over the pipe graph are not supported "
			    "on the GPU target",
			    p->name, GPU_MIRRORS_MAX);
	}
	g->mirror_max = sum;
	return 0;
}

struct dpflow_gpu_flow *dpflow_gpu_flow_bind(struct dpflow_ctx *ctx,
					     int gpu_dev_index,
					     struct dpflow_error *err)
{
	struct dpflow_gpu_flow *g;
	int n_dev = 0;
	cudaError_t crc;

	if (!ctx) {
		dpflow_error_set(err, EINVAL, "ctx", "no context");
		return NULL;
	}
	crc = cudaGetDeviceCount(&n_dev);
	if (crc != cudaSuccess || n_dev == 0) {
		dpflow_error_set(err, ENODEV, "gpu", "no CUDA device: %s",
				 crc != cudaSuccess ? cudaGetErrorString(crc)
						    : "none found");
		return NULL;
	}
	if (gpu_dev_index < 0 || gpu_dev_index >= n_dev) {
		dpflow_error_set(err, ENODEV, "gpu",
				 "GPU %d: this machine has GPUs 0..%d",
				 gpu_dev_index, n_dev - 1);
		return NULL;
	}
	if (ctx->n_pipes == 0) {
		dpflow_error_set(err, EINVAL, "pipes",
				 "the context has no pipes to bind");
		return NULL;
	}
	for (unsigned i = 0; i < ctx->n_pipes; i++)
		if (check_pipe(ctx->pipes[i], err))
			return NULL;
	g = (struct dpflow_gpu_flow *)calloc(1, sizeof(*g));
	if (!g) {
		dpflow_error_set(err, ENOMEM, NULL, "out of memory");
		return NULL;
	}
	g->ctx = ctx;
	g->dev = gpu_dev_index;
	g->n_pipes = ctx->n_pipes;
	g->path_max = ctx->n_pipes; /* acyclic: each pipe once at most */
	g->stride = ctx->pool->stride;
	g->h_pipes = (struct gpu_pipe *)calloc(g->n_pipes, sizeof(*g->h_pipes));
	crc = cudaSetDevice(gpu_dev_index);
	if (crc != cudaSuccess) {
		cuda_fail(err, crc, "selecting the GPU");
		goto fail;
	}
	if (!g->h_pipes) {
		dpflow_error_set(err, ENOMEM, NULL, "out of memory");
		goto fail;
	}
	for (unsigned i = 0; i < g->n_pipes; i++)
		pipe_plan(ctx->pipes[i], &g->h_pipes[i]);
	if (mirrors_plan(g, err) || plan_alloc(g, err))
		goto fail;
	g->st = gpu_state_create(ctx, g->h_pipes, g->n_pipes, err);
	if (!g->st || dpflow_gpu_flow_sync(g, err))
		goto fail;
	return g;
fail:
	dpflow_gpu_flow_unbind(g);
	return NULL;
}

/* ---- a burst ------------------------------------------------------------ */

/* A mirror copy from snapshot @snap out of @port, as actions.c's mirror()
 * makes it (dropped silently, counted, without a slot or room). */
static void replay_mirror(struct dpflow_gpu_flow *g, const uint8_t *snap,
			  uint16_t port)
{
	struct dpflow_ctx *ctx = g->ctx;
	struct dpflow_pool *pool = ctx->pool;
	const struct dpflow_pkt_meta *sm = (const struct dpflow_pkt_meta *)snap;
	uint32_t copy;

	if (dpflow_pool_alloc_bulk(pool, &copy, 1)) {
		__atomic_fetch_add(&ctx->drops[DPFLOW_DROP_PORT_NO_BUFFER], 1,
				   __ATOMIC_RELAXED);
		return;
	}
	memcpy(dpflow_pool_meta(pool, copy), sm, sizeof(*sm));
	memcpy(dpflow_pkt_data(pool, copy), snap + sizeof(*sm) + sm->data_off,
	       sm->data_len);
	if (dpflow_port_tx_burst(ctx->ports[port].port, 0, pool, &copy, 1) !=
	    1) {
		__atomic_fetch_add(&ctx->drops[DPFLOW_DROP_PORT_TX_FULL], 1,
				   __ATOMIC_RELAXED);
		dpflow_pool_free_bulk(pool, &copy, 1);
	}
}

/* The mirror copies packet @i made at step @step of its path. */
static void replay_mirrors(struct dpflow_gpu_flow *g, uint16_t i, unsigned step)
{
	const struct gpu_result *r = &g->h_res[i];

	while (g->next_mirror[i] < r->n_mirrors) {
		size_t k = (size_t)i * g->mirror_max + g->next_mirror[i];

		if (g->h_mrec[k].step != step)
			break;
		replay_mirror(g, g->h_mirror + k * g->stride,
			      g->h_mrec[k].port);
		g->next_mirror[i]++;
	}
}

/* Packet @idx for handler slot @slot: pipeline.c's to_handler(). */
static void replay_to_handler(struct dpflow_gpu_flow *g, unsigned slot,
			      uint32_t idx)
{
	struct replay_handler *h = NULL;

	for (unsigned k = 0; k < g->n_hout; k++)
		if (g->hout[k].slot == slot)
			h = &g->hout[k];
	if (!h && g->n_hout < REPLAY_HANDLER_LISTS) {
		h = &g->hout[g->n_hout++];
		h->slot = slot;
		h->n = 0;
	}
	if (!h) {
		g->ctx->plan_handlers[slot].fn(g->ctx->plan_handlers[slot].arg,
					       g->ctx->pool, &idx, 1);
		return;
	}
	h->idx[h->n++] = idx;
}

/* Packet @i (slot @idx) reached the end of its path. */
static void replay_final(struct dpflow_gpu_flow *g, uint16_t i, uint32_t idx,
			 uint16_t *n_drop)
{
	const struct gpu_result *r = &g->h_res[i];

	switch (r->to) {
	case GRES_PORT:
		g->out[r->value][g->out_n[r->value]++] = idx;
		return;
	case GRES_RSS:
		g->rss[r->value][g->rss_n[r->value]++] = idx;
		return;
	case GRES_HANDLER:
		replay_to_handler(g, r->value, idx);
		return;
	default:
		__atomic_fetch_add(&g->ctx->drops[r->value], 1,
				   __ATOMIC_RELAXED);
		g->drop_idx[(*n_drop)++] = idx;
		return;
	}
}

/* What monitor_hit() does on the CPU for a hit that the kernel did not
 * count: the context's entry counter shard, aging, the shared counter,
 * the colour count. */
static void replay_hit(struct dpflow_gpu_flow *g, struct dpflow_pipe *pipe,
		       const struct gpu_step *st, uint64_t now)
{
	const struct entry_dp *dp = &pipe->dp[st->entry];

	if (pipe->cfg.monitor.counter) {
		struct entry_ctr *c =
		    &pipe->ctr[(size_t)FLOW_WORKER_SHARED * pipe->cfg.size +
			       st->entry];

		__atomic_fetch_add(&c->pkts, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&c->bytes, st->bytes, __ATOMIC_RELAXED);
	}
	if (pipe->aging)
		dpflow_aging_touch(pipe->aging, st->entry, now);
	if (dp->shared_counter)
		dpflow_counter_add(g->ctx->shared_counters,
				   dp->shared_counter - 1, st->bytes);
	if (st->flags & GSTEP_METERED)
		__atomic_fetch_add(&pipe->color[st->flags & GSTEP_COLOR], 1,
				   __ATOMIC_RELAXED);
}

struct replay_counts {
	uint32_t hits, invalid, refused;
};

/* Packet @i (slot @idx) at its current step, in pipe @pipe. */
static void replay_step(struct dpflow_gpu_flow *g, struct dpflow_pipe *pipe,
			uint16_t i, uint32_t idx, uint64_t now,
			struct replay_counts *c, uint16_t *n_drop)
{
	const struct gpu_result *r = &g->h_res[i];
	unsigned step = g->cur[i];
	const struct gpu_step *st = &g->h_path[(size_t)i * g->path_max + step];

	if (st->entry != TABLE_MISS) {
		c->hits++;
		if (pipe->cfg.type != DPFLOW_PIPE_CT)
			replay_hit(g, pipe, st, now);
	} else {
		c->invalid += (st->flags & GSTEP_CT_INVALID) != 0;
		c->refused +=
		    (st->flags & (GSTEP_CT_UNTRACKED | GSTEP_CT_NOCONN)) != 0;
	}
	replay_mirrors(g, i, step);
	if (++g->cur[i] < r->n_steps) {
		unsigned q = st[1].pipe;

		g->list[q][g->list_n[q]++] = i;
	} else {
		replay_final(g, i, idx, n_drop);
	}
}

/* One run of pipe @p over its waiting packets, in the CPU's order (a CT
 * pipe forwards the packets it cannot track first). */
static void replay_pipe(struct dpflow_gpu_flow *g, unsigned p, uint32_t *idx,
			uint64_t now, uint16_t *n_drop)
{
	struct dpflow_pipe *pipe = g->ctx->pipes[p];
	bool ct = pipe->cfg.type == DPFLOW_PIPE_CT;
	uint16_t in[DPFLOW_BURST_MAX], n_in = g->list_n[p];
	bool first[DPFLOW_BURST_MAX]; /* CT: untracked, forwarded first */
	struct replay_counts c = {0, 0, 0};

	memcpy(in, g->list[p], n_in * sizeof(in[0]));
	g->list_n[p] = 0;
	for (uint16_t j = 0; j < n_in; j++) {
		const struct gpu_step *st =
		    &g->h_path[(size_t)in[j] * g->path_max + g->cur[in[j]]];

		first[j] = ct && (st->flags & GSTEP_CT_UNTRACKED);
	}
	for (unsigned pass = 0; pass < (ct ? 2u : 1u); pass++)
		for (uint16_t j = 0; j < n_in; j++)
			if (!ct || first[j] == (pass == 0))
				replay_step(g, pipe, in[j], idx[in[j]], now, &c,
					    n_drop);
	__atomic_fetch_add(&pipe->pkts, n_in, __ATOMIC_RELAXED);
	__atomic_fetch_add(&pipe->hits, c.hits, __ATOMIC_RELAXED);
	__atomic_fetch_add(&pipe->misses, n_in - c.hits, __ATOMIC_RELAXED);
	if (ct) {
		__atomic_fetch_add(&pipe->ct_invalid, c.invalid,
				   __ATOMIC_RELAXED);
		__atomic_fetch_add(&pipe->ct_refused, c.refused,
				   __ATOMIC_RELAXED);
	}
}

/* The end of a burst as pipeline.c ends it: ports, handlers, RSS queues
 * (a full queue drops), then the drops freed. */
static void replay_flush(struct dpflow_gpu_flow *g, uint16_t n_drop)
{
	struct dpflow_ctx *ctx = g->ctx;
	struct dpflow_pool *pool = ctx->pool;

	for (unsigned p = 0; p < ctx->n_ports; p++) {
		uint16_t k = g->out_n[p], sent;

		if (!k)
			continue;
		sent = dpflow_port_tx_burst(ctx->ports[p].port, 0, pool,
					    g->out[p], k);
		if (sent < k) {
			__atomic_fetch_add(
			    &ctx->drops[DPFLOW_DROP_PORT_TX_FULL],
			    (uint64_t)(k - sent), __ATOMIC_RELAXED);
			dpflow_pool_free_bulk(pool, g->out[p] + sent,
					      (unsigned)(k - sent));
		}
		g->out_n[p] = 0;
	}
	for (unsigned k = 0; k < g->n_hout; k++) {
		struct replay_handler *h = &g->hout[k];

		g->ctx->plan_handlers[h->slot].fn(
		    g->ctx->plan_handlers[h->slot].arg, pool, h->idx, h->n);
	}
	g->n_hout = 0;
	for (unsigned q = 0; q < ctx->n_rss; q++) {
		unsigned sent;

		if (!g->rss_n[q])
			continue;
		sent = dpflow_ring_enqueue_burst(ctx->rss[q], g->rss[q],
						 g->rss_n[q]);
		__atomic_fetch_add(&ctx->rss_count[q], sent, __ATOMIC_RELAXED);
		for (unsigned i = sent; i < g->rss_n[q]; i++) {
			dpflow_pool_meta(pool, g->rss[q][i])->drop =
			    DPFLOW_DROP_FLOW_RSS_FULL;
			__atomic_fetch_add(
			    &ctx->drops[DPFLOW_DROP_FLOW_RSS_FULL], 1,
			    __ATOMIC_RELAXED);
			g->drop_idx[n_drop++] = g->rss[q][i];
		}
		g->rss_n[q] = 0;
	}
	if (n_drop)
		dpflow_pool_free_bulk(pool, g->drop_idx, n_drop);
}

/*
 * Hand the burst's packets on as pipeline.c would have: the pipes are
 * scheduled as its loop schedules them (every pipe with packets waiting,
 * in id order, until none has), each packet moving along the path the
 * kernel recorded, so that ports, RSS queues and handlers get packets in
 * the CPU's order and mirror copies go out when the CPU sends them; the
 * counts go into the context's counters as the CPU's would. @now: the
 * burst's time (aging).
 */
static void replay(struct dpflow_gpu_flow *g, uint32_t *idx, uint16_t n,
		   uint64_t now)
{
	struct dpflow_ctx *ctx = g->ctx;
	uint16_t n_drop = 0;
	bool more;

	for (uint16_t i = 0; i < n; i++) {
		const struct gpu_result *r = &g->h_res[i];

		g->cur[i] = 0;
		g->next_mirror[i] = 0;
		if (r->n_steps) {
			unsigned p = g->h_path[(size_t)i * g->path_max].pipe;

			g->list[p][g->list_n[p]++] = i;
			continue;
		}
		__atomic_fetch_add(&ctx->drops[r->value], 1, __ATOMIC_RELAXED);
		g->drop_idx[n_drop++] = idx[i];
	}
	do {
		more = false;
		for (unsigned p = 0; p < g->n_pipes; p++) {
			if (!g->list_n[p])
				continue;
			more = true;
			replay_pipe(g, p, idx, now, &n_drop);
		}
	} while (more);
	replay_flush(g, n_drop);
}

/* Queue the kernel of a burst of @n staged packets at time @now. */
static int launch_burst(struct dpflow_gpu_flow *g, uint16_t port, uint16_t n,
			uint64_t now, struct dpflow_error *err)
{
	struct dpflow_ctx *ctx = g->ctx;
	struct gpu_burst b;
	int root = -1;

	if (port < ctx->n_ports && ctx->ports[port].root)
		root = ctx->ports[port].root->id;
	b.now_ns = now;
	b.mirror = g->d_mirror;
	b.mrec = g->d_mrec;
	b.mirror_max = g->mirror_max;
	b.stride = g->stride;
	if (gpu_state_ordered(g->st)) {
		struct gpu_sched_args a;

		memset(&a, 0, sizeof(a));
		a.pipes = g->d_pipes;
		a.n_pipes = g->n_pipes;
		a.root = root;
		a.port = port;
		a.stride = g->stride;
		a.n = n;
		a.path_max = g->path_max;
		a.stage = g->d_stage;
		a.res = g->d_res;
		a.path = g->d_path;
		a.burst = b;
		a.clock = g->d_stats + 3 * (size_t)g->n_pipes;
		gpu_state_args(g->st, &a);
		CUDA_TRY(gpu_flow_sched_launch(&a, g->stream),
			 "ordered pipeline kernel launch");
		return gpu_state_pull(g->st, n, g->stream, err);
	}
	gpu_flow_kernel<<<(n + 127) / 128, 128, 0, g->stream>>>(
	    g->d_pipes, root, port, g->d_stage, g->stride, n, g->d_res,
	    g->d_path, g->path_max, b, g->d_stats + 3 * (size_t)g->n_pipes);
	CUDA_TRY(cudaGetLastError(), "pipeline kernel launch");
	return 0;
}

/* The GPU part of one burst of at most DPFLOW_BURST_MAX packets. */
static int run_burst(struct dpflow_gpu_flow *g, uint16_t port, uint32_t *idx,
		     uint16_t n, uint64_t now, struct dpflow_error *err)
{
	const struct dpflow_pool *pool = g->ctx->pool;
	const size_t meta = sizeof(struct dpflow_pkt_meta);
	size_t n_snap = (size_t)n * g->mirror_max;
	int rc;

	for (uint16_t i = 0; i < n; i++) {
		const struct dpflow_pkt_meta *m =
		    dpflow_pool_meta(pool, idx[i]);

		memcpy(g->h_stage + (size_t)i * g->stride, m,
		       meta + m->data_off + m->data_len);
	}
	CUDA_TRY(cudaMemcpyAsync(g->d_stage, g->h_stage, (size_t)n * g->stride,
				 cudaMemcpyHostToDevice, g->stream),
		 "copy of a burst to the GPU");
	rc = launch_burst(g, port, n, now, err);
	if (rc)
		return rc;
	CUDA_TRY(cudaMemcpyAsync(g->h_stage, g->d_stage, (size_t)n * g->stride,
				 cudaMemcpyDeviceToHost, g->stream),
		 "copy of a burst from the GPU");
	CUDA_TRY(cudaMemcpyAsync(g->h_res, g->d_res, n * sizeof(*g->h_res),
				 cudaMemcpyDeviceToHost, g->stream),
		 "copy of verdicts from the GPU");
	CUDA_TRY(cudaMemcpyAsync(g->h_path, g->d_path,
				 (size_t)n * g->path_max * sizeof(*g->h_path),
				 cudaMemcpyDeviceToHost, g->stream),
		 "copy of paths from the GPU");
	if (n_snap) {
		CUDA_TRY(cudaMemcpyAsync(g->h_mrec, g->d_mrec,
					 n_snap * sizeof(*g->h_mrec),
					 cudaMemcpyDeviceToHost, g->stream),
			 "copy of mirror records from the GPU");
		CUDA_TRY(cudaMemcpyAsync(g->h_mirror, g->d_mirror,
					 n_snap * g->stride,
					 cudaMemcpyDeviceToHost, g->stream),
			 "copy of mirror snapshots from the GPU");
	}
	CUDA_TRY(cudaStreamSynchronize(g->stream), "pipeline kernel");
	for (uint16_t i = 0; i < n; i++) {
		const struct dpflow_pkt_meta *m =
		    (const struct dpflow_pkt_meta *)(g->h_stage +
						     (size_t)i * g->stride);

		memcpy(dpflow_pool_meta(pool, idx[i]), m,
		       meta + m->data_off + m->data_len);
	}
	if (gpu_state_ordered(g->st))
		gpu_state_apply(g->st, n);
	replay(g, idx, n, now);
	return 0;
}

int dpflow_gpu_flow_process(struct dpflow_gpu_flow *g, uint16_t port,
			    uint32_t *idx, uint16_t n, struct dpflow_error *err)
{
	struct dpflow_ctx *ctx = g->ctx;
	/* the CPU target reads its clock once per burst */
	uint64_t now = dpflow_clock_ns();
	uint16_t done = 0;
	int rc = 0;

	if (__atomic_load_n(&ctx->batches, __ATOMIC_ACQUIRE) !=
	    g->batches_synced)
		rc = dpflow_gpu_flow_sync(g, err);
	if (!rc)
		rc = cudaSetDevice(g->dev) == cudaSuccess
			 ? 0
			 : cuda_fail(err, cudaGetLastError(),
				     "selecting the GPU");
	/* what the host changed: aged connections, shared meters */
	if (!rc)
		rc = gpu_state_push(g->st, false, g->stream, err);
	while (!rc && done < n) {
		uint16_t k =
		    (uint16_t)(n - done > DPFLOW_BURST_MAX ? DPFLOW_BURST_MAX
							   : n - done);

		rc = run_burst(g, port, idx + done, k, now, err);
		if (!rc)
			done = (uint16_t)(done + k);
	}
	if (rc) {
		__atomic_fetch_add(&ctx->drops[DPFLOW_DROP_PORT_NO_BUFFER],
				   (uint64_t)(n - done), __ATOMIC_RELAXED);
		dpflow_pool_free_bulk(ctx->pool, idx + done,
				      (unsigned)(n - done));
		return rc;
	}
	return n;
}

/* ---- counters ----------------------------------------------------------- */

static int pipe_index(const struct dpflow_gpu_flow *g,
		      const struct dpflow_pipe *pipe)
{
	for (unsigned i = 0; i < g->n_pipes; i++)
		if (g->ctx->pipes[i] == pipe)
			return (int)i;
	return -1;
}

int dpflow_gpu_flow_entry_counter(struct dpflow_gpu_flow *g,
				  const struct dpflow_entry *e,
				  struct dpflow_counter *c)
{
	unsigned long long v[2];
	int i;

	if (!g || !e || !c)
		return -EINVAL;
	i = pipe_index(g, e->pipe);
	if (i < 0 || e->index >= plan_entries(e->pipe) ||
	    !g->pp[i].live[e->index])
		return -EINVAL;
	if (cudaSetDevice(g->dev) != cudaSuccess ||
	    cudaMemcpy(v, g->pp[i].d_ctr + 2 * (size_t)e->index, sizeof(v),
		       cudaMemcpyDeviceToHost) != cudaSuccess)
		return -EIO;
	c->pkts = v[0] + g->pp[i].carry[2 * (size_t)e->index];
	c->bytes = v[1] + g->pp[i].carry[2 * (size_t)e->index + 1];
	return 0;
}

int dpflow_gpu_flow_pipe_stats(struct dpflow_gpu_flow *g,
			       const struct dpflow_pipe *pipe,
			       struct dpflow_pipe_stats *s)
{
	unsigned long long v[3];
	int i;

	if (!g || !pipe || !s)
		return -EINVAL;
	i = pipe_index(g, pipe);
	if (i < 0)
		return -EINVAL;
	if (cudaSetDevice(g->dev) != cudaSuccess ||
	    cudaMemcpy(v, g->d_stats + 3 * (size_t)i, sizeof(v),
		       cudaMemcpyDeviceToHost) != cudaSuccess)
		return -EIO;
	memset(s, 0, sizeof(*s));
	s->pkts = v[0];
	s->hits = v[1];
	s->misses = v[2];
	return 0;
}

/* ---- benchmark support (gpu_flow_internal.h) ---------------------------- */

size_t gpu_flow_bench_res_bytes(void)
{
	return sizeof(struct gpu_result);
}

size_t gpu_flow_bench_path_bytes(const struct dpflow_gpu_flow *g)
{
	return g->path_max * sizeof(struct gpu_step);
}

int gpu_flow_bench_dev(const struct dpflow_gpu_flow *g)
{
	return g->dev;
}

void gpu_flow_bench_verdict(const void *res, uint64_t i, uint8_t *sent,
			    uint16_t *value)
{
	const struct gpu_result *r = (const struct gpu_result *)res + i;

	*sent = r->sent;
	*value = r->value;
}

/* Whether a pipe of @g's plan has an action (which may edit packets). */
static bool bench_plan_edits(const struct dpflow_gpu_flow *g)
{
	for (unsigned i = 0; i < g->n_pipes; i++)
		for (unsigned t = 0; t < g->h_pipes[i].n_action_tmpls; t++)
			if (g->h_pipes[i].tmpl[t].n)
				return true;
	return false;
}

int gpu_flow_bench_launch(struct dpflow_gpu_flow *g, uint16_t port,
			  uint8_t *d_hdrs, uint32_t hstride,
			  const uint16_t *d_lens, uint64_t n, void *d_res,
			  void *d_path, unsigned blocks, unsigned threads,
			  cudaStream_t stream, struct dpflow_error *err)
{
	struct dpflow_ctx *ctx = g->ctx;
	int root = -1;

	if (hstride == 0 || hstride % 16 || hstride > GPU_BENCH_STRIDE_MAX ||
	    ((uintptr_t)d_hdrs & 15) || threads != GPU_BENCH_THREADS)
		return dpflow_error_set(err, EINVAL, "hstride",
					"benchmark packets of %u bytes at %p "
					"in blocks of %u threads: a multiple "
					"of 16 bytes up to %u, 16-byte "
					"aligned, %u threads expected",
					hstride, (void *)d_hdrs, threads,
					GPU_BENCH_STRIDE_MAX,
					GPU_BENCH_THREADS);
	if (__atomic_load_n(&ctx->batches, __ATOMIC_ACQUIRE) !=
	    g->batches_synced) {
		int rc = dpflow_gpu_flow_sync(g, err);

		if (rc)
			return rc;
	}
	if (port < ctx->n_ports && ctx->ports[port].root)
		root = ctx->ports[port].root->id;
	/* the direct kernel is the default: it measured 2.30 G packets/s
	 * against the staged one's 1.85 G on the H200 (2026-12-03); plans
	 * with actions run the staged one, which edits the shared-memory
	 * copy, so that every run sees the packets as they arrived */
	if (!getenv("DPFLOW_GPU_BENCH_STAGED") && !bench_plan_edits(g))
		gpu_flow_bench_direct_kernel<<<blocks, threads, 0, stream>>>(
		    g->d_pipes, root, port, d_hdrs, hstride, d_lens, n,
		    (struct gpu_result *)d_res, (struct gpu_step *)d_path,
		    g->path_max);
	else
		gpu_flow_bench_kernel<<<blocks, threads, 0, stream>>>(
		    g->d_pipes, root, port, d_hdrs, hstride, d_lens, n,
		    (struct gpu_result *)d_res, (struct gpu_step *)d_path,
		    g->path_max);
	CUDA_TRY(cudaGetLastError(), "benchmark kernel launch");
	return 0;
}

int dpflow_gpu_flow_bench_entry_pkts(struct dpflow_gpu_flow *g,
				     const struct dpflow_entry *const *e,
				     uint32_t n, uint64_t *pkts,
				     struct dpflow_error *err)
{
	unsigned long long *h = NULL;
	size_t n_ctr;
	int i;

	if (!g || !n)
		return 0;
	if (!e || !pkts || !e[0])
		return dpflow_error_set(err, EINVAL, "entries", "no entries");
	i = pipe_index(g, e[0]->pipe);
	if (i < 0)
		return dpflow_error_set(err, EINVAL, "entries",
					"not a pipe of the plan");
	n_ctr = 2 * (size_t)plan_entries(e[0]->pipe);
	h = (unsigned long long *)malloc(n_ctr * sizeof(*h));
	if (!h)
		return dpflow_error_set(err, ENOMEM, NULL, "out of memory");
	{
		cudaError_t rc = cudaSetDevice(g->dev);

		if (rc == cudaSuccess)
			rc = cudaStreamSynchronize(g->stream);
		if (rc == cudaSuccess)
			rc = cudaMemcpy(h, g->pp[i].d_ctr, n_ctr * sizeof(*h),
					cudaMemcpyDeviceToHost);
		if (rc != cudaSuccess) {
			free(h);
			return cuda_fail(err, rc, "copy of entry counters");
		}
	}
	for (uint32_t k = 0; k < n; k++) {
		if (!e[k] || e[k]->pipe != e[0]->pipe ||
		    e[k]->index >= plan_entries(e[0]->pipe)) {
			free(h);
			return dpflow_error_set(err, EINVAL, "entries",
						"entry %u is not of the pipe",
						k);
		}
		pkts[k] = h[2 * (size_t)e[k]->index] +
			  g->pp[i].carry[2 * (size_t)e[k]->index];
	}
	free(h);
	return 0;
}

/* ---- queue-fed kernel support (gpu_flow_internal.h) ---------------------
 *
 * The queue-fed persistent kernel (gpu_flow_queue.cu) runs while entry
 * batches are published, so a new version of the plan cannot be written
 * over the one the kernel reads. The versioned parts (table images, entry
 * arrays, encapsulations and the pipe array pointing at them) exist twice:
 * copy 0 is the plan's own buffers above, copy 1 is struct
 * gpu_flow_versions; the counters are shared by both. A build writes the
 * context's current generation into the copy the kernel no longer uses,
 * with copies only (no kernel launch, no cudaFree: either would wait for
 * the persistent kernel); buffers that grow are freed when the versions
 * are destroyed.
 */

#include "gpu_flow_internal.h"

struct gpu_flow_versions {
	struct gpu_pipe *d_pipes1, *h_pipes1;
	void *d_image1[DPFLOW_PIPES_MAX];
	size_t image_cap1[DPFLOW_PIPES_MAX];
	struct dpflow_plan_entry *d_entries1[DPFLOW_PIPES_MAX];
	struct dpflow_edit_encap *d_encaps1[DPFLOW_PIPES_MAX];
	unsigned long long *h_zero; /* pinned zeros: counter restarts */
	size_t zero_n;		    /* counters in h_zero */
	void **retired;		    /* device buffers to free at destroy */
	unsigned n_retired, cap_retired;
};

#define VERSIONS_ZERO_N 8192

/* What of pipe @i the queue-fed kernel cannot run, or NULL. */
static const char *qk_refused(const struct dpflow_gpu_flow *g, unsigned i)
{
	const struct gpu_pipe *gp = &g->h_pipes[i];
	const struct plan_pipe *pp = &g->pp[i];
	const struct dpflow_pipe *p = g->ctx->pipes[i];

	/* CT and meters read the burst's clock, which this kernel lacks */
	if (gp->type == DPFLOW_PIPE_CT)
		return "connection tracking";
	if (gp->metered)
		return "a meter";
	/* the host's replay counts these for a burst; here there is none */
	if (p->cfg.monitor.shared_counter)
		return "a shared counter";
	if (p->cfg.monitor.aging_ms)
		return "aging";
	if (gp->fwd.kind == PLAN_FWD_RSS || gp->miss.kind == PLAN_FWD_RSS ||
	    gp->yellow.kind == PLAN_FWD_RSS || gp->red.kind == PLAN_FWD_RSS)
		return "forwarding to RSS queues";
	if (gp->fwd.kind == PLAN_FWD_HANDLER ||
	    gp->miss.kind == PLAN_FWD_HANDLER ||
	    gp->yellow.kind == PLAN_FWD_HANDLER ||
	    gp->red.kind == PLAN_FWD_HANDLER)
		return "forwarding to a handler";
	for (unsigned t = 0; t < gp->n_action_tmpls; t++)
		for (unsigned a = 0; a < gp->tmpl[t].n; a++)
			if (gp->tmpl[t].a[a].kind == DPFLOW_ACT_MIRROR)
				return "action 'mirror'";
	for (uint32_t k = 0; k < p->cfg.size; k++) {
		const struct dpflow_entry *e = &p->entries[k];

		if (!entry_live(e))
			continue;
		if (e->cfg.shared_counter || e->cfg.aging_ms)
			return "an entry's shared counter or aging";
		if (gp->fwd.kind == PLAN_FWD_PER_ENTRY &&
		    (pp->h_entries[k].fwd.kind == PLAN_FWD_RSS ||
		     pp->h_entries[k].fwd.kind == PLAN_FWD_HANDLER))
			return "an entry forwarding to RSS queues or a handler";
	}
	return NULL;
}

void gpu_flow_qk_info(const struct dpflow_gpu_flow *g, uint16_t port,
		      struct gpu_flow_qk_info *info)
{
	const struct dpflow_ctx *ctx = g->ctx;

	memset(info, 0, sizeof(*info));
	info->dev = g->dev;
	info->root = -1;
	if (port < ctx->n_ports && ctx->ports[port].root)
		info->root = ctx->ports[port].root->id;
	info->path_max = g->path_max;
	for (unsigned i = 0; i < g->n_pipes; i++) {
		const struct gpu_pipe *gp = &g->h_pipes[i];
		const char *why = qk_refused(g, i);

		if (why && !info->refused[0])
			snprintf(info->refused, sizeof(info->refused),
				 "pipe '%s': %s", ctx->pipes[i]->name, why);
		for (unsigned t = 0; t < gp->n_action_tmpls; t++)
			for (unsigned a = 0; a < gp->tmpl[t].n; a++) {
				unsigned kind = gp->tmpl[t].a[a].kind;

				info->edits = true;
				if (kind == DPFLOW_ACT_ENCAP)
					info->encap = true;
				if (kind == DPFLOW_ACT_ENCAP ||
				    kind == DPFLOW_ACT_DECAP ||
				    kind == DPFLOW_ACT_VLAN_PUSH ||
				    kind == DPFLOW_ACT_VLAN_POP)
					info->moves = true;
			}
	}
}

bool gpu_flow_qk_stale(const struct dpflow_gpu_flow *g)
{
	return __atomic_load_n(&g->ctx->batches, __ATOMIC_ACQUIRE) !=
	       g->batches_synced;
}

static int versions_retire(struct gpu_flow_versions *v, void *p,
			   struct dpflow_error *err)
{
	if (!p)
		return 0;
	if (v->n_retired == v->cap_retired) {
		unsigned cap = v->cap_retired ? 2 * v->cap_retired : 16;
		void **r = (void **)realloc(v->retired, cap * sizeof(*r));

		if (!r)
			return dpflow_error_set(err, ENOMEM, NULL,
						"out of memory");
		v->retired = r;
		v->cap_retired = cap;
	}
	v->retired[v->n_retired++] = p;
	return 0;
}

void gpu_flow_versions_destroy(struct dpflow_gpu_flow *g,
			       struct gpu_flow_versions *v)
{
	if (!v)
		return;
	cudaSetDevice(g->dev);
	for (unsigned i = 0; i < DPFLOW_PIPES_MAX; i++) {
		cudaFree(v->d_image1[i]);
		cudaFree(v->d_entries1[i]);
		cudaFree(v->d_encaps1[i]);
	}
	for (unsigned i = 0; i < v->n_retired; i++)
		cudaFree(v->retired[i]);
	cudaFree(v->d_pipes1);
	cudaFreeHost(v->h_zero);
	free(v->h_pipes1);
	free(v->retired);
	free(v);
}

struct gpu_flow_versions *gpu_flow_versions_create(struct dpflow_gpu_flow *g,
						   struct dpflow_error *err)
{
	struct gpu_flow_versions *v =
	    (struct gpu_flow_versions *)calloc(1, sizeof(*v));
	cudaError_t rc;

	if (!v) {
		dpflow_error_set(err, ENOMEM, NULL, "out of memory");
		return NULL;
	}
	v->h_pipes1 =
	    (struct gpu_pipe *)calloc(g->n_pipes, sizeof(*v->h_pipes1));
	if (!v->h_pipes1) {
		dpflow_error_set(err, ENOMEM, NULL, "out of memory");
		goto fail;
	}
	rc = cudaSetDevice(g->dev);
	if (rc == cudaSuccess)
		rc =
		    cudaMalloc(&v->d_pipes1, g->n_pipes * sizeof(*v->d_pipes1));
	if (rc == cudaSuccess)
		rc = cudaHostAlloc(&v->h_zero,
				   VERSIONS_ZERO_N * sizeof(*v->h_zero),
				   cudaHostAllocDefault);
	for (unsigned i = 0; rc == cudaSuccess && i < g->n_pipes; i++) {
		const struct dpflow_pipe *p = g->ctx->pipes[i];
		size_t size = p->cfg.size;

		/* the images' room now: growing them later happens while
		 * the kernel runs (see gpu_flow_versions_build) */
		v->image_cap1[i] = image_bytes(p, p->images[g->ctx->gen]);
		rc = cudaMalloc(&v->d_image1[i], v->image_cap1[i]);
		if (rc == cudaSuccess)
			rc = cudaMalloc(&v->d_entries1[i],
					size * sizeof(*v->d_entries1[i]));
		if (rc == cudaSuccess && g->pp[i].h_encaps)
			rc = cudaMalloc(&v->d_encaps1[i],
					size * sizeof(*v->d_encaps1[i]));
	}
	if (rc != cudaSuccess) {
		cuda_fail(err, rc, "second copy of the plan");
		goto fail;
	}
	memset(v->h_zero, 0, VERSIONS_ZERO_N * sizeof(*v->h_zero));
	v->zero_n = VERSIONS_ZERO_N;
	return v;
fail:
	gpu_flow_versions_destroy(g, v);
	return NULL;
}

const void *gpu_flow_versions_plan(const struct dpflow_gpu_flow *g,
				   const struct gpu_flow_versions *v,
				   unsigned copy)
{
	return copy ? (const void *)v->d_pipes1 : (const void *)g->d_pipes;
}

/*
 * Counters of entries of pipe @i live since the last build start from
 * zero plus what an update carried (as counters_restart(), one copy of
 * zeros per run of such entries, so that the counters the kernel is
 * adding to are never written).
 */
static int versions_counters(struct dpflow_gpu_flow *g,
			     struct gpu_flow_versions *v, unsigned i,
			     struct dpflow_error *err)
{
	struct dpflow_pipe *p = g->ctx->pipes[i];
	struct plan_pipe *pp = &g->pp[i];
	uint32_t size = p->cfg.size, k = 0;

	while (k < size) {
		uint32_t start = k;

		while (k < size && k - start < v->zero_n / 2 &&
		       entry_live(&p->entries[k]) && !pp->live[k]) {
			pp->carry[2 * k] = p->dp[k].base_pkts;
			pp->carry[2 * k + 1] = p->dp[k].base_bytes;
			k++;
		}
		if (k == start) {
			k++;
			continue;
		}
		CUDA_TRY(cudaMemcpyAsync(
			     pp->d_ctr + 2 * (size_t)start, v->h_zero,
			     2 * (size_t)(k - start) * sizeof(*v->h_zero),
			     cudaMemcpyHostToDevice, g->stream),
			 "restart of entry counters");
	}
	for (k = 0; k < size; k++)
		pp->live[k] = entry_live(&p->entries[k]);
	return 0;
}

/* Debugging: what the device copies hold against the host's. */
static void versions_verify(struct dpflow_gpu_flow *g,
			    const struct gpu_pipe *h_pipes,
			    const struct gpu_pipe *d_pipes, unsigned gen)
{
	struct gpu_pipe *dp =
	    (struct gpu_pipe *)malloc(g->n_pipes * sizeof(*dp));

	if (!dp || cudaMemcpy(dp, d_pipes, g->n_pipes * sizeof(*dp),
			      cudaMemcpyDeviceToHost) != cudaSuccess) {
		fprintf(stderr, "versions: cannot read the pipes back\n");
		free(dp);
		return;
	}
	for (unsigned i = 0; i < g->n_pipes; i++) {
		struct dpflow_pipe *p = g->ctx->pipes[i];
		size_t bytes = image_bytes(p, p->images[gen]);
		size_t eb =
		    (size_t)p->cfg.size * sizeof(struct dpflow_plan_entry);
		uint8_t *img = (uint8_t *)malloc(bytes);
		uint8_t *ent = (uint8_t *)malloc(eb);
		int ir = -2, er = -2;

		if (img && cudaMemcpy(img, dp[i].image, bytes,
				      cudaMemcpyDeviceToHost) == cudaSuccess)
			ir = memcmp(img, p->images[gen], bytes) != 0;
		if (ent && cudaMemcpy(ent, dp[i].entries, eb,
				      cudaMemcpyDeviceToHost) == cudaSuccess)
			er = memcmp(ent, g->pp[i].h_entries, eb) != 0;
		fprintf(stderr,
			"versions: pipe %u (%s): struct %s, image %p %zu bytes "
			"%s, entries %p %s, live entries %u\n",
			i, p->name,
			memcmp(&dp[i], &h_pipes[i], sizeof(*dp)) ? "DIFFERS"
								 : "same",
			dp[i].image, bytes,
			ir == 0	  ? "same"
			: ir == 1 ? "DIFFERS"
				  : "unreadable",
			(const void *)dp[i].entries,
			er == 0	  ? "same"
			: er == 1 ? "DIFFERS"
				  : "unreadable",
			dpflow_pipe_entry_count(p));
		free(img);
		free(ent);
	}
	free(dp);
}

int gpu_flow_versions_build(struct dpflow_gpu_flow *g,
			    struct gpu_flow_versions *v, unsigned copy,
			    struct dpflow_error *err)
{
	struct dpflow_ctx *ctx = g->ctx;
	uint64_t batches = __atomic_load_n(&ctx->batches, __ATOMIC_ACQUIRE);
	unsigned gen = __atomic_load_n(&ctx->gen, __ATOMIC_ACQUIRE);
	struct gpu_pipe *h_pipes = copy ? v->h_pipes1 : g->h_pipes;

	CUDA_TRY(cudaSetDevice(g->dev), "selecting the GPU");
	for (unsigned i = 0; i < g->n_pipes; i++) {
		struct dpflow_pipe *p = ctx->pipes[i];
		struct plan_pipe *pp = &g->pp[i];
		const void *img = p->images[gen];
		size_t bytes = image_bytes(p, img);
		void **d_image = copy ? &v->d_image1[i] : &pp->d_image;
		size_t *cap = copy ? &v->image_cap1[i] : &pp->image_cap;
		struct dpflow_plan_entry *d_entries =
		    copy ? v->d_entries1[i] : pp->d_entries;
		struct dpflow_edit_encap *d_encaps =
		    copy ? v->d_encaps1[i] : pp->d_encaps;
		int rc;

		if (bytes > *cap) {
			void *d = NULL;

			/* stream-ordered: cudaMalloc may wait for the device,
			 * where the persistent kernel never ends */
			CUDA_TRY(cudaMallocAsync(&d, bytes, g->stream),
				 "device table image");
			if (versions_retire(v, *d_image, err)) {
				cudaFreeAsync(d, g->stream);
				return -ENOMEM;
			}
			*d_image = d;
			*cap = bytes;
		}
		CUDA_TRY(cudaMemcpyAsync(*d_image, img, bytes,
					 cudaMemcpyHostToDevice, g->stream),
			 "copy of a table image");
		entries_plan(g, i);
		if (qk_refused(g, i))
			return dpflow_error_set(
			    err, ENOTSUP, "entries",
			    "pipe '%s': %s is not supported "
			    "by the queue-fed kernel yet",
			    p->name, qk_refused(g, i));
		CUDA_TRY(cudaMemcpyAsync(d_entries, pp->h_entries,
					 (size_t)p->cfg.size *
					     sizeof(*pp->h_entries),
					 cudaMemcpyHostToDevice, g->stream),
			 "copy of the entries");
		if (pp->h_encaps)
			CUDA_TRY(cudaMemcpyAsync(d_encaps, pp->h_encaps,
						 (size_t)p->cfg.size *
						     sizeof(*pp->h_encaps),
						 cudaMemcpyHostToDevice,
						 g->stream),
				 "copy of the entries' encapsulations");
		if (copy)
			h_pipes[i] = g->h_pipes[i];
		h_pipes[i].image = *d_image;
		h_pipes[i].entries = d_entries;
		h_pipes[i].entry_encaps = d_encaps;
		rc = versions_counters(g, v, i, err);
		if (rc)
			return rc;
	}
	CUDA_TRY(cudaMemcpyAsync(copy ? v->d_pipes1 : g->d_pipes, h_pipes,
				 g->n_pipes * sizeof(*h_pipes),
				 cudaMemcpyHostToDevice, g->stream),
		 "copy of the pipes");
	CUDA_TRY(cudaStreamSynchronize(g->stream), "sync");
	g->batches_synced = batches;
	if (getenv("DPFLOW_GPU_DEBUG"))
		versions_verify(g, h_pipes, copy ? v->d_pipes1 : g->d_pipes,
				gen);
	return 0;
}
