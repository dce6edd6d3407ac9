/*
 * Pipe graphs on the GPU (gpu_flow.h): the device plan, its sync after
 * entry batches, and the per-burst kernel (the per-packet pipeline it runs
 * is in gpu_flow_dev.cuh).
 *
 * The kernel runs one thread per packet on a staged copy of the burst's
 * slots (metadata, headroom, frame) and does what pipeline.c's
 * dpflow_ctx_process_burst() does for one packet, with the same shared
 * code: parse (parse_impl.h), key (field_impl.h), table lookups (the
 * *_impl.h one-key lookups, hash_impl.h), actions (flow_actions_impl.h),
 * forwarding. Each packet also records its path (pipe, entry, bytes per
 * pipe visited); the host replays the CPU's scheduling of pipes over the
 * paths, so that packets reach their ports in the CPU's order, and folds
 * the counts into the context's counters as the CPU would have.
 */
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cuda_runtime.h>

#include "gpu_flow_dev.cuh"

extern "C" {
#include "dpflow/gpu_flow.h"
#include "dpflow/port.h"
#include "flow/flow_internal.h"
#include "flow/table_acl.h"
}

/* Host side of one pipe of the plan. */
struct plan_pipe {
	void *d_image;
	size_t image_cap;
	struct gpu_entry *d_entries, *h_entries;
	struct dpflow_edit_encap *d_encaps, *h_encaps;
	unsigned long long *d_ctr;
	uint8_t *live;	 /* slot live at the last sync */
	uint64_t *carry; /* size x (pkts, bytes) carried by updates */
};

struct dpflow_gpu_flow {
	struct dpflow_ctx *ctx;
	int dev;
	uint64_t batches_synced; /* ctx->batches at the last sync */
	unsigned n_pipes;
	uint32_t path_max;
	uint32_t stride;
	cudaStream_t stream;
	struct gpu_pipe *h_pipes, *d_pipes;
	unsigned long long *d_stats; /* n_pipes x 3 */
	struct plan_pipe pp[DPFLOW_PIPES_MAX];
	/* per burst: staged slots, results, paths (pinned and device) */
	uint8_t *h_stage, *d_stage;
	struct gpu_result *h_res, *d_res;
	struct gpu_step *h_path, *d_path;
	/* replay scratch */
	uint16_t cur[DPFLOW_BURST_MAX];
	uint16_t list_n[DPFLOW_PIPES_MAX];
	uint16_t list[DPFLOW_PIPES_MAX][DPFLOW_BURST_MAX];
	uint16_t out_n[DPFLOW_PORTS_MAX];
	uint32_t out[DPFLOW_PORTS_MAX][DPFLOW_BURST_MAX];
	uint32_t drop_idx[DPFLOW_BURST_MAX];
};

/* ---- the kernels ------------------------------------------------------- */

__global__ void gpu_flow_kernel(const struct gpu_pipe *pipes, int root,
				uint16_t port, uint8_t *stage, uint32_t stride,
				uint32_t n, struct gpu_result *res,
				struct gpu_step *path, uint32_t path_max)
{
	uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
	struct dpflow_pkt_meta *m;

	if (i >= n)
		return;
	m = (struct dpflow_pkt_meta *)(stage + (size_t)i * stride);
	res[i] = gpu_flow_pkt(pipes, root, port, m, (uint8_t *)(m + 1),
			      path + (size_t)i * path_max, path_max);
}

/*
 * The benchmark's kernel (gpu_flow_bench.cu): packets of @hstride bytes
 * at @hdrs (frame at offset 0, @lens bytes), already in device memory;
 * the metadata lives in the thread (nothing goes back to a slot); the
 * verdicts and paths stay in device memory. Grid-stride over @n.
 */
__global__ void gpu_flow_bench_kernel(const struct gpu_pipe *pipes, int root,
				      uint16_t port, uint8_t *hdrs,
				      uint32_t hstride, const uint16_t *lens,
				      uint64_t n, struct gpu_result *res,
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

static int fwd_of(const struct dpflow_fwd *f, const char *pipe,
		  const char *field, struct gpu_fwd *out,
		  struct dpflow_error *err)
{
	out->target = 0;
	switch (f->kind) {
	case DPFLOW_FWD_DROP:
		out->kind = GFWD_DROP;
		return 0;
	case DPFLOW_FWD_PORT:
		out->kind = GFWD_PORT;
		out->target = f->port;
		return 0;
	case DPFLOW_FWD_PIPE:
		out->kind = GFWD_PIPE;
		out->target = f->pipe->id;
		return 0;
	case DPFLOW_FWD_PER_ENTRY:
		out->kind = GFWD_PER_ENTRY;
		return 0;
	case DPFLOW_FWD_RSS:
		return unsupported(err, field, pipe,
				   "forwarding to RSS queues");
	case DPFLOW_FWD_HANDLER:
		return unsupported(err, field, pipe,
				   "forwarding to a software handler");
	default:
		return unsupported(err, field, pipe, "this forwarding kind");
	}
}

/* What the GPU target cannot run in pipe @p's configuration. */
static int check_pipe(const struct dpflow_pipe *p, struct dpflow_error *err)
{
	const struct dpflow_pipe_cfg *c = &p->cfg;

	switch (c->type) {
	case DPFLOW_PIPE_BASIC:
	case DPFLOW_PIPE_CONTROL:
	case DPFLOW_PIPE_ACL:
	case DPFLOW_PIPE_LPM:
	case DPFLOW_PIPE_HASH:
		break;
	case DPFLOW_PIPE_CT:
		return unsupported(err, "type", p->name,
				   "type 'ct' (connection tracking)");
	default:
		return unsupported(err, "type", p->name, "this pipe type");
	}
	if (c->monitor.meter.alg || c->monitor.shared_meter)
		return unsupported(err, "monitor.meter", p->name, "a meter");
	if (c->monitor.aging_ms)
		return unsupported(err, "monitor.aging_ms", p->name, "aging");
	if (c->monitor.shared_counter)
		return unsupported(err, "monitor.shared_counter", p->name,
				   "a shared counter");
	if (c->color_fwd.yellow_set || c->color_fwd.red_set)
		return unsupported(err, "color_fwd", p->name,
				   "colour forwarding");
	for (unsigned t = 0; t < c->n_action_tmpls; t++)
		for (unsigned i = 0; i < c->actions[t].n; i++)
			if (c->actions[t].a[i].kind == DPFLOW_ACT_MIRROR)
				return unsupported(err, "actions", p->name,
						   "action 'mirror'");
	return 0;
}

/* The host copy of pipe @p's template part of the plan. */
static int pipe_plan(struct dpflow_pipe *p, struct gpu_pipe *gp,
		     struct dpflow_error *err)
{
	const struct dpflow_pipe_cfg *c = &p->cfg;
	unsigned k = 0;
	int rc;

	memset(gp, 0, sizeof(*gp));
	gp->type = c->type;
	gp->lpm_v6 = c->type == DPFLOW_PIPE_LPM && p->key_len > 4;
	gp->counter = c->monitor.counter;
	gp->n_action_tmpls = c->n_action_tmpls;
	gp->key_len = p->key_len;
	gp->n_fields = c->match.n;
	gp->n_const = p->n_const;
	gp->size = c->size;
	gp->hash_seed = c->hash_seed;
	rc = fwd_of(&c->fwd, p->name, "fwd", &gp->fwd, err);
	if (!rc)
		rc = fwd_of(&c->miss_fwd, p->name, "miss_fwd", &gp->miss, err);
	if (rc)
		return rc;
	for (unsigned i = 0; i < c->match.n; i++) {
		const struct dpflow_match_field *f = &c->match.f[i];
		unsigned bytes = p->field_bytes[i];

		gp->field[i] = f->field;
		gp->per_entry[i] = f->per_entry;
		gp->field_off[i] = p->field_off[i];
		gp->field_bytes[i] = p->field_bytes[i];
		gp->field_full[i] = p->field_full_mask[i];
		memcpy(gp->value[i], f->value, 16);
		memcpy(gp->mask[i], f->mask, 16);
		if (!f->per_entry || (c->type != DPFLOW_PIPE_ACL &&
				      c->type != DPFLOW_PIPE_CONTROL))
			continue;
		/* acl_create(): 4-, 2- and 1-byte words (3 bytes: 2 + 1) */
		for (unsigned off = p->field_off[i]; bytes;) {
			unsigned w = bytes >= 4 ? 4 : bytes == 3 ? 2 : bytes;

			if (k == DPFLOW_ACL_FIELDS_MAX)
				return dpflow_error_set(err, EINVAL, "match",
							"pipe '%s': too many "
							"acl fields",
							p->name);
			gp->acl_off[k] = (uint8_t)off;
			gp->acl_bytes[k] = (uint8_t)w;
			off += w;
			bytes -= w;
			k++;
		}
	}
	gp->acl_n = (uint8_t)k;
	for (unsigned t = 0; t < c->n_action_tmpls; t++) {
		gp->tmpl[t] = c->actions[t];
		for (unsigned i = 0; i < DPFLOW_ACTIONS_MAX; i++)
			if (p->encaps[t][i]) {
				gp->tmpl_encap_set[t][i] = 1;
				gp->tmpl_encap[t][i] = *p->encaps[t][i];
			}
	}
	return 0;
}

static bool pipe_has_entry_encap(const struct dpflow_pipe *p)
{
	for (unsigned t = 0; t < p->cfg.n_action_tmpls; t++)
		for (unsigned i = 0; i < p->cfg.actions[t].n; i++)
			if (p->cfg.actions[t].a[i].kind == DPFLOW_ACT_ENCAP &&
			    p->cfg.actions[t].a[i].per_entry)
				return true;
	return false;
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

/* The host entry array of pipe @i from the context's entries. */
static int entries_plan(struct dpflow_gpu_flow *g, unsigned i,
			struct dpflow_error *err)
{
	struct dpflow_pipe *p = g->ctx->pipes[i];
	struct plan_pipe *pp = &g->pp[i];

	memset(pp->h_entries, 0, (size_t)p->cfg.size * sizeof(*pp->h_entries));
	for (uint32_t k = 0; k < p->cfg.size; k++) {
		const struct dpflow_entry *e = &p->entries[k];
		struct gpu_entry *ge = &pp->h_entries[k];
		const struct dpflow_entry_cfg *c = &e->cfg;
		int rc;

		if (!entry_live(e))
			continue;
		if (c->meter.alg || c->shared_counter || c->aging_ms)
			return unsupported(err, "entries", p->name,
					   c->meter.alg ? "an entry's meter"
					   : c->shared_counter
					       ? "an entry's shared counter"
					       : "an entry's aging");
		ge->tmpl = c->action_tmpl;
		memcpy(ge->values, c->action_value, sizeof(ge->values));
		if (p->cfg.fwd.kind == DPFLOW_FWD_PER_ENTRY) {
			rc = fwd_of(&c->fwd, p->name, "entries.fwd", &ge->fwd,
				    err);
			if (rc)
				return rc;
		}
		if (e->encap && pp->h_encaps) {
			ge->has_encap = 1;
			pp->h_encaps[k] = *e->encap;
		}
	}
	return 0;
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
		rc = entries_plan(g, i, err);
		if (rc)
			return rc;
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
	cudaFree(g->d_pipes);
	cudaFree(g->d_stats);
	cudaFree(g->d_stage);
	cudaFree(g->d_res);
	cudaFree(g->d_path);
	cudaFreeHost(g->h_stage);
	cudaFreeHost(g->h_res);
	cudaFreeHost(g->h_path);
	free(g->h_pipes);
	if (g->stream)
		cudaStreamDestroy(g->stream);
	free(g);
}

static int plan_alloc(struct dpflow_gpu_flow *g, struct dpflow_error *err)
{
	size_t burst = DPFLOW_BURST_MAX;

	CUDA_TRY(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking),
		 "stream");
	CUDA_TRY(cudaMalloc(&g->d_pipes, g->n_pipes * sizeof(*g->d_pipes)),
		 "device pipes");
	CUDA_TRY(cudaMalloc(&g->d_stats, 3 * g->n_pipes * sizeof(*g->d_stats)),
		 "device pipe counters");
	CUDA_TRY(
	    cudaMemset(g->d_stats, 0, 3 * g->n_pipes * sizeof(*g->d_stats)),
	    "device pipe counters");
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
		size_t size = p->cfg.size;

		pp->h_entries =
		    (struct gpu_entry *)calloc(size, sizeof(*pp->h_entries));
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
	}
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
		if (pipe_plan(ctx->pipes[i], &g->h_pipes[i], err))
			goto fail;
	if (plan_alloc(g, err) || dpflow_gpu_flow_sync(g, err))
		goto fail;
	return g;
fail:
	dpflow_gpu_flow_unbind(g);
	return NULL;
}

/* ---- a burst ------------------------------------------------------------ */

/*
 * Hand the burst's packets on as pipeline.c would have: the pipes are
 * scheduled as its loop schedules them (every pipe with packets waiting,
 * in id order, until none has), each packet moving along the path the
 * kernel recorded, so that ports get packets in the CPU's order; the
 * counts go into the context's counters as the CPU's would.
 */
static void replay(struct dpflow_gpu_flow *g, uint16_t port, uint32_t *idx,
		   uint16_t n)
{
	struct dpflow_ctx *ctx = g->ctx;
	struct dpflow_pool *pool = ctx->pool;
	uint16_t n_drop = 0;
	bool more;

	(void)port;
	for (uint16_t i = 0; i < n; i++) {
		const struct gpu_result *r = &g->h_res[i];

		g->cur[i] = 0;
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
			struct dpflow_pipe *pipe = ctx->pipes[p];
			uint16_t in[DPFLOW_BURST_MAX], n_in = g->list_n[p];
			uint32_t hits = 0;

			if (!n_in)
				continue;
			more = true;
			memcpy(in, g->list[p], n_in * sizeof(in[0]));
			g->list_n[p] = 0;
			for (uint16_t j = 0; j < n_in; j++) {
				uint16_t i = in[j];
				const struct gpu_result *r = &g->h_res[i];
				const struct gpu_step *st =
				    &g->h_path[(size_t)i * g->path_max +
					       g->cur[i]];

				if (st->entry != TABLE_MISS) {
					hits++;
					if (pipe->cfg.monitor.counter) {
						struct entry_ctr *c =
						    &pipe->ctr
							 [(size_t)FLOW_WORKER_SHARED *
							      pipe->cfg.size +
							  st->entry];

						__atomic_fetch_add(
						    &c->pkts, 1,
						    __ATOMIC_RELAXED);
						__atomic_fetch_add(
						    &c->bytes, st->bytes,
						    __ATOMIC_RELAXED);
					}
				}
				if (++g->cur[i] < r->n_steps) {
					unsigned q = st[1].pipe;

					g->list[q][g->list_n[q]++] = i;
				} else if (r->sent) {
					g->out[r->value][g->out_n[r->value]++] =
					    idx[i];
				} else {
					__atomic_fetch_add(
					    &ctx->drops[r->value], 1,
					    __ATOMIC_RELAXED);
					g->drop_idx[n_drop++] = idx[i];
				}
			}
			__atomic_fetch_add(&pipe->pkts, n_in, __ATOMIC_RELAXED);
			__atomic_fetch_add(&pipe->hits, hits, __ATOMIC_RELAXED);
			__atomic_fetch_add(&pipe->misses, n_in - hits,
					   __ATOMIC_RELAXED);
		}
	} while (more);
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
	if (n_drop)
		dpflow_pool_free_bulk(pool, g->drop_idx, n_drop);
}

/* The GPU part of one burst of at most DPFLOW_BURST_MAX packets. */
static int run_burst(struct dpflow_gpu_flow *g, uint16_t port, uint32_t *idx,
		     uint16_t n, struct dpflow_error *err)
{
	struct dpflow_ctx *ctx = g->ctx;
	const struct dpflow_pool *pool = ctx->pool;
	const size_t meta = sizeof(struct dpflow_pkt_meta);
	int root = -1;
	unsigned threads = 128, blocks = (n + threads - 1) / threads;

	if (port < ctx->n_ports && ctx->ports[port].root)
		root = ctx->ports[port].root->id;
	for (uint16_t i = 0; i < n; i++) {
		const struct dpflow_pkt_meta *m =
		    dpflow_pool_meta(pool, idx[i]);

		memcpy(g->h_stage + (size_t)i * g->stride, m,
		       meta + m->data_off + m->data_len);
	}
	CUDA_TRY(cudaMemcpyAsync(g->d_stage, g->h_stage, (size_t)n * g->stride,
				 cudaMemcpyHostToDevice, g->stream),
		 "copy of a burst to the GPU");
	gpu_flow_kernel<<<blocks, threads, 0, g->stream>>>(
	    g->d_pipes, root, port, g->d_stage, g->stride, n, g->d_res,
	    g->d_path, g->path_max);
	CUDA_TRY(cudaGetLastError(), "pipeline kernel launch");
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
	CUDA_TRY(cudaStreamSynchronize(g->stream), "pipeline kernel");
	for (uint16_t i = 0; i < n; i++) {
		const struct dpflow_pkt_meta *m =
		    (const struct dpflow_pkt_meta *)(g->h_stage +
						     (size_t)i * g->stride);

		memcpy(dpflow_pool_meta(pool, idx[i]), m,
		       meta + m->data_off + m->data_len);
	}
	replay(g, port, idx, n);
	return 0;
}

int dpflow_gpu_flow_process(struct dpflow_gpu_flow *g, uint16_t port,
			    uint32_t *idx, uint16_t n, struct dpflow_error *err)
{
	struct dpflow_ctx *ctx = g->ctx;
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
	while (!rc && done < n) {
		uint16_t k =
		    (uint16_t)(n - done > DPFLOW_BURST_MAX ? DPFLOW_BURST_MAX
							   : n - done);

		rc = run_burst(g, port, idx + done, k, err);
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
	if (i < 0 || e->index >= e->pipe->cfg.size || !g->pp[i].live[e->index])
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

int gpu_flow_bench_launch(struct dpflow_gpu_flow *g, uint16_t port,
			  uint8_t *d_hdrs, uint32_t hstride,
			  const uint16_t *d_lens, uint64_t n, void *d_res,
			  void *d_path, unsigned blocks, unsigned threads,
			  cudaStream_t stream, struct dpflow_error *err)
{
	struct dpflow_ctx *ctx = g->ctx;
	int root = -1;

	if (__atomic_load_n(&ctx->batches, __ATOMIC_ACQUIRE) !=
	    g->batches_synced) {
		int rc = dpflow_gpu_flow_sync(g, err);

		if (rc)
			return rc;
	}
	if (port < ctx->n_ports && ctx->ports[port].root)
		root = ctx->ports[port].root->id;
	gpu_flow_bench_kernel<<<blocks, threads, 0, stream>>>(
	    g->d_pipes, root, port, d_hdrs, hstride, d_lens, n,
	    (struct gpu_result *)d_res, (struct gpu_step *)d_path, g->path_max);
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
	n_ctr = 2 * (size_t)e[0]->pipe->cfg.size;
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
		    e[k]->index >= e[0]->pipe->cfg.size) {
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
