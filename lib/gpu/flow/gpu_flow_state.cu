/*
 * Device copies of the images the data path writes (gpu_flow_feat.cuh):
 * CT tables, per-entry meters and the shared meters.
 *
 * The host images stay the reference: the control API (ct.c, meter.c,
 * monitor.c) reads and writes them as for the CPU target. Around each
 * burst:
 *  - push: a CT image whose header (statistics, live count, timeouts)
 *    differs from what the last write-back left has been changed by the
 *    host (aging frees connections, counting EXPIRED): its header and
 *    control words go to the device (slot lines only change when a packet
 *    creates a connection, which the write-back carries). The shared
 *    meters image is compared whole with the last write-back (a
 *    dpflow_shared_meter_config() at any time). After an entry batch the
 *    pipes' meter images go over whole (new entries' meters are
 *    configured on the host when the batch is published).
 *  - pull and apply: the kernel's logs come back and their buckets,
 *    connection slots, meters and CT statistics are copied over the host
 *    images, which then equal the device copies.
 */
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "dpflow/log.h"
#include "gpu_flow_feat.cuh"

extern "C" {
#include "flow/ct.h"
#include "flow/meter.h"
}

struct state_ct {
	unsigned pipe;
	bool serial; /* gpu_ct_serial(): written back from its touch log */
	struct dpflow_ct_image *host, *dev;
	size_t bytes;
	struct dpflow_ct_image shadow; /* the header after the last apply */
};

struct state_meters {
	struct dpflow_meters *host, *dev; /* per-entry meters; NULL: none */
	size_t bytes;
};

struct gpu_state {
	struct dpflow_ctx *ctx;
	unsigned n_ct, n_metered;
	struct state_ct ct[DPFLOW_PIPES_MAX];
	uint8_t metered_pipe[DPFLOW_PIPES_MAX];
	struct state_meters pm[DPFLOW_PIPES_MAX]; /* by pipe id */
	struct dpflow_meters *shared_dev;
	uint8_t *shared_shadow;
	size_t shared_bytes;
	struct gpu_ct_log *d_ct_log, *h_ct_log;
	struct gpu_meter_wb *d_meter_log, *h_meter_log;
	struct dpflow_ct_value *d_ct_vals; /* gpu_sched_args.ct_vals */
};

static int state_fail(struct dpflow_error *err, cudaError_t rc,
		      const char *what)
{
	dpflow_error_set(err, EIO, "gpu", "%s: %s", what,
			 cudaGetErrorString(rc));
	return -EIO;
}

#define STATE_TRY(call, what)                              \
	do {                                               \
		cudaError_t rc_ = (call);                  \
		if (rc_ != cudaSuccess)                    \
			return state_fail(err, rc_, what); \
	} while (0)

void gpu_state_destroy(struct gpu_state *st)
{
	if (!st)
		return;
	for (unsigned i = 0; i < st->n_ct; i++)
		cudaFree(st->ct[i].dev);
	for (unsigned i = 0; i < DPFLOW_PIPES_MAX; i++)
		cudaFree(st->pm[i].dev);
	cudaFree(st->shared_dev);
	cudaFree(st->d_ct_log);
	cudaFree(st->d_ct_vals);
	cudaFree(st->d_meter_log);
	cudaFreeHost(st->h_ct_log);
	cudaFreeHost(st->h_meter_log);
	free(st->shared_shadow);
	free(st);
}

/* The device copy of CT pipe @p's image. */
static int state_ct_add(struct gpu_state *st, struct dpflow_pipe *p,
			struct gpu_pipe *gp, struct dpflow_error *err)
{
	struct state_ct *c = &st->ct[st->n_ct];

	size_t dev_bytes;

	c->pipe = p->id;
	c->host = (struct dpflow_ct_image *)p->images[0];
	c->bytes = dpflow_ct_image_bytes(c->host);
	c->serial = gpu_ct_serial(gp, c->host);
	dev_bytes = c->bytes;
	if (c->serial) {
		/* the touch log after the image; the host's header names it
		 * too (the host never writes through it), so that a push of
		 * the header keeps it */
		c->host->touch_off = (c->bytes + 63) & ~(size_t)63;
		c->host->touch_cap = GPU_CT_TOUCH_IDX;
		dev_bytes = c->host->touch_off +
			    (1 + (size_t)GPU_CT_TOUCH_IDX) * sizeof(uint32_t);
	}
	STATE_TRY(cudaMalloc(&c->dev, dev_bytes), "device CT table");
	st->n_ct++;
	STATE_TRY(cudaMemcpy(c->dev, c->host, c->bytes, cudaMemcpyHostToDevice),
		  "copy of a CT table");
	c->shadow = *c->host;
	gp->ct = c->dev;
	gp->ct_slot = (uint8_t)(st->n_ct - 1);
	return 0;
}

/* The device copy of pipe @p's per-entry meters, and its meter log. */
static int state_meters_add(struct gpu_state *st, struct dpflow_pipe *p,
			    struct gpu_pipe *gp, struct dpflow_error *err)
{
	struct state_meters *pm = &st->pm[p->id];

	if (p->meters) {
		pm->host = p->meters;
		pm->bytes = dpflow_meters_image_bytes(p->meters);
		STATE_TRY(cudaMalloc(&pm->dev, pm->bytes), "device meters");
		STATE_TRY(cudaMemcpy(pm->dev, pm->host, pm->bytes,
				     cudaMemcpyHostToDevice),
			  "copy of meters");
		gp->meters = pm->dev;
	}
	gp->metered = 1;
	gp->meter_slot = (uint8_t)st->n_metered;
	st->metered_pipe[st->n_metered++] = (uint8_t)p->id;
	return 0;
}

static int state_shared_add(struct gpu_state *st, struct dpflow_error *err)
{
	struct dpflow_ctx *ctx = st->ctx;

	if (!ctx->shared_meters)
		return 0;
	st->shared_bytes = dpflow_meters_image_bytes(ctx->shared_meters);
	st->shared_shadow = (uint8_t *)malloc(st->shared_bytes);
	if (!st->shared_shadow)
		return dpflow_error_set(err, ENOMEM, NULL, "out of memory");
	memcpy(st->shared_shadow, ctx->shared_meters, st->shared_bytes);
	STATE_TRY(cudaMalloc(&st->shared_dev, st->shared_bytes),
		  "device shared meters");
	STATE_TRY(cudaMemcpy(st->shared_dev, ctx->shared_meters,
			     st->shared_bytes, cudaMemcpyHostToDevice),
		  "copy of the shared meters");
	return 0;
}

static int state_logs_alloc(struct gpu_state *st, struct dpflow_error *err)
{
	size_t ct_bytes = st->n_ct * sizeof(struct gpu_ct_log);
	size_t mt_bytes = (size_t)st->n_metered * GPU_SCHED_THREADS *
			  sizeof(struct gpu_meter_wb);

	if (ct_bytes) {
		STATE_TRY(cudaMalloc(&st->d_ct_log, ct_bytes), "CT logs");
		STATE_TRY(cudaMalloc(&st->d_ct_vals,
				     2 * GPU_SCHED_THREADS *
					 sizeof(struct dpflow_ct_value)),
			  "CT value scratch");
		STATE_TRY(cudaHostAlloc(&st->h_ct_log, ct_bytes,
					cudaHostAllocDefault),
			  "pinned CT logs");
	}
	if (mt_bytes) {
		STATE_TRY(cudaMalloc(&st->d_meter_log, mt_bytes), "meter logs");
		STATE_TRY(cudaHostAlloc(&st->h_meter_log, mt_bytes,
					cudaHostAllocDefault),
			  "pinned meter logs");
	}
	return 0;
}

static int state_build(struct gpu_state *st, struct gpu_pipe *h_pipes,
		       unsigned n, struct dpflow_error *err)
{
	int rc = state_shared_add(st, err);

	for (unsigned i = 0; !rc && i < n; i++) {
		struct dpflow_pipe *p = st->ctx->pipes[i];
		const struct dpflow_monitor *mon = &p->cfg.monitor;

		h_pipes[i].shared_meters = st->shared_dev;
		if (p->cfg.type == DPFLOW_PIPE_CT)
			rc = state_ct_add(st, p, &h_pipes[i], err);
		else if (mon->meter.alg || mon->shared_meter)
			rc = state_meters_add(st, p, &h_pipes[i], err);
	}
	return rc ? rc : state_logs_alloc(st, err);
}

struct gpu_state *gpu_state_create(struct dpflow_ctx *ctx,
				   struct gpu_pipe *h_pipes, unsigned n,
				   struct dpflow_error *err)
{
	struct gpu_state *st =
	    (struct gpu_state *)calloc(1, sizeof(struct gpu_state));

	if (!st) {
		dpflow_error_set(err, ENOMEM, NULL, "out of memory");
		return NULL;
	}
	st->ctx = ctx;
	if (state_build(st, h_pipes, n, err)) {
		gpu_state_destroy(st);
		return NULL;
	}
	return st;
}

bool gpu_state_ordered(const struct gpu_state *st)
{
	return st->n_ct || st->n_metered;
}

int gpu_state_push(struct gpu_state *st, bool batch, cudaStream_t stream,
		   struct dpflow_error *err)
{
	struct dpflow_ctx *ctx = st->ctx;

	for (unsigned i = 0; i < st->n_ct; i++) {
		struct state_ct *c = &st->ct[i];

		if (!memcmp(&c->shadow, c->host, sizeof(c->shadow)))
			continue;
		/* header and control words: what aging changes */
		STATE_TRY(cudaMemcpyAsync(c->dev, c->host, c->host->locks_off,
					  cudaMemcpyHostToDevice, stream),
			  "copy of an aged CT table");
		c->shadow = *c->host;
	}
	if (st->shared_dev &&
	    memcmp(st->shared_shadow, ctx->shared_meters, st->shared_bytes)) {
		memcpy(st->shared_shadow, ctx->shared_meters, st->shared_bytes);
		STATE_TRY(cudaMemcpyAsync(st->shared_dev, st->shared_shadow,
					  st->shared_bytes,
					  cudaMemcpyHostToDevice, stream),
			  "copy of the shared meters");
	}
	for (unsigned i = 0; batch && i < DPFLOW_PIPES_MAX; i++)
		if (st->pm[i].dev)
			STATE_TRY(cudaMemcpyAsync(st->pm[i].dev, st->pm[i].host,
						  st->pm[i].bytes,
						  cudaMemcpyHostToDevice,
						  stream),
				  "copy of meters");
	return 0;
}

void gpu_state_args(const struct gpu_state *st, struct gpu_sched_args *a)
{
	a->ct_log = st->d_ct_log;
	a->ct_vals = st->d_ct_vals;
	a->meter_log = st->d_meter_log;
	a->n_ct = st->n_ct;
	a->n_metered = st->n_metered;
	for (unsigned i = 0; i < st->n_ct; i++)
		a->ct_pipe[i] = (uint8_t)st->ct[i].pipe;
	for (unsigned i = 0; i < st->n_metered; i++)
		a->meter_pipe[i] = st->metered_pipe[i];
}

int gpu_state_pull(struct gpu_state *st, uint32_t n, cudaStream_t stream,
		   struct dpflow_error *err)
{
	size_t ct_part = offsetof(struct gpu_ct_log, pkt) +
			 (size_t)n * sizeof(struct gpu_ct_wb);

	for (unsigned i = 0; i < st->n_ct; i++) {
		STATE_TRY(cudaMemcpyAsync(&st->h_ct_log[i], &st->d_ct_log[i],
					  ct_part, cudaMemcpyDeviceToHost,
					  stream),
			  "copy of a CT log");
		if (st->ct[i].serial)
			STATE_TRY(cudaMemcpyAsync(st->h_ct_log[i].touch,
						  st->d_ct_log[i].touch,
						  sizeof(st->h_ct_log[i].touch),
						  cudaMemcpyDeviceToHost,
						  stream),
				  "copy of a CT touch log");
	}
	for (unsigned i = 0; i < st->n_metered; i++) {
		size_t off = (size_t)i * GPU_SCHED_THREADS;

		STATE_TRY(cudaMemcpyAsync(st->h_meter_log + off,
					  st->d_meter_log + off,
					  n * sizeof(struct gpu_meter_wb),
					  cudaMemcpyDeviceToHost, stream),
			  "copy of a meter log");
	}
	return 0;
}

/*
 * A serial CT pipe's write-back: the touched slots, the pools; the whole
 * image when the log overflowed (a synchronous copy: rare).
 */
static void apply_ct_touched(struct state_ct *c, const struct gpu_ct_log *log)
{
	struct dpflow_ct_image *ct = c->host;

	if (log->n_touch > GPU_CT_TOUCH_MAX) {
		if (cudaMemcpy(ct, c->dev, c->bytes, cudaMemcpyDeviceToHost) !=
		    cudaSuccess)
			DPFLOW_LOG_ERR("gpu",
				       "CT pipe %u: copy of the table back "
				       "failed: the host's view is stale",
				       c->pipe);
		return;
	}
	for (uint32_t k = 0; k < log->n_touch; k++) {
		const struct gpu_ct_touch *e = &log->touch[k];

		dpflow_ct_ctrl(ct)[e->i] = e->ctrl;
		dpflow_ct_slots(ct)[e->i] = e->slot;
		dpflow_ct_vals(ct)[e->i] = e->val;
	}
	for (unsigned p = 0; p < ct->n_pools; p++)
		dpflow_ct_pools(ct)[p] = log->pools[p];
}

static void apply_ct(struct state_ct *c, const struct gpu_ct_log *log,
		     uint32_t n)
{
	struct dpflow_ct_image *ct = c->host;
	uint64_t *ctrl = dpflow_ct_ctrl(ct);

	if (c->serial)
		apply_ct_touched(c, log);
	for (uint32_t t = 0; t < n && !c->serial; t++) {
		const struct gpu_ct_wb *wb = &log->pkt[t];

		if (wb->b1 == UINT32_MAX)
			continue;
		memcpy(&ctrl[(size_t)wb->b1 * DPFLOW_CT_SLOTS], wb->ctrl[0],
		       sizeof(wb->ctrl[0]));
		memcpy(&ctrl[(size_t)wb->b2 * DPFLOW_CT_SLOTS], wb->ctrl[1],
		       sizeof(wb->ctrl[1]));
		if (wb->conn != DPFLOW_TABLE_MISS)
			dpflow_ct_slots(ct)[wb->conn] = wb->slot;
	}
	for (unsigned w = 0; w < DPFLOW_CT_STAT__COUNT; w++)
		dpflow_atomic_store64(&ct->stats[w], log->stats[w]);
	dpflow_atomic_store64(&ct->n_live, log->n_live);
	c->shadow = *ct;
}

void gpu_state_apply(struct gpu_state *st, uint32_t n)
{
	bool shared = false;

	for (unsigned i = 0; i < st->n_ct; i++)
		apply_ct(&st->ct[i], &st->h_ct_log[i], n);
	for (unsigned i = 0; i < st->n_metered; i++) {
		const struct gpu_meter_wb *log =
		    st->h_meter_log + (size_t)i * GPU_SCHED_THREADS;
		struct dpflow_pipe *p = st->ctx->pipes[st->metered_pipe[i]];

		for (uint32_t t = 0; t < n; t++) {
			struct dpflow_meter *mt;

			if (!log[t].used)
				continue;
			shared |= log[t].used == GMETER_SHARED;
			mt = dpflow_meter_at(log[t].used == GMETER_SHARED
						 ? st->ctx->shared_meters
						 : p->meters,
					     log[t].idx);
			dpflow_atomic_store64(&mt->tokens, log[t].tokens);
			dpflow_atomic_store64(&mt->last_ns, log[t].last_ns);
		}
	}
	if (shared)
		memcpy(st->shared_shadow, st->ctx->shared_meters,
		       st->shared_bytes);
}
