/*
 * The GPU target's stateful flow features (internal to lib/gpu/flow):
 * connection tracking and meters, whose answers depend on the order in
 * which packets reach them.
 *
 * - gpu_flow_sched.cu: the ordered burst kernel. One block runs a burst
 *   the way pipeline.c's dpflow_ctx_process_burst() schedules it (every
 *   pipe with packets waiting, in id order, each over its packets in
 *   arrival order), so that each CT table and each meter sees the packets
 *   in the CPU target's order while packets that do not interact run in
 *   parallel.
 * - gpu_flow_state.cu: the device copies of the CT images and meter
 *   images. The host images stay the reference that the control API
 *   reads and writes (dpflow_pipe_age, dpflow_pipe_stats_get,
 *   dpflow_shared_meter_config): the kernel logs what it changed and the
 *   host writes it back after each burst; what the host changed (aging,
 *   meter configuration) is pushed before the next one.
 *
 * One thread (the plan's) calls all of it.
 */
#ifndef DPFLOW_GPU_FLOW_FEAT_CUH
#define DPFLOW_GPU_FLOW_FEAT_CUH

#include <cuda_runtime.h>

#include "gpu_flow_dev.cuh"

/* ---- write-back logs ------------------------------------------------------
 *
 * A tracked packet changes only the two candidate buckets of its key (the
 * control words of their 16 slots) and, when it creates a connection,
 * that connection's slot line; the table's statistics and live count are
 * in the header. The kernel notes, per packet and CT pipe, the buckets
 * and the connection made, and at its end copies their final contents:
 * the host copies them over its image, which then equals the device's.
 */
struct gpu_ct_wb {
	uint32_t b1, b2; /* buckets; b1 UINT32_MAX: not tracked here */
	uint32_t conn;	 /* a connection the packet made, or MISS */
	uint32_t reserved;
	uint64_t ctrl[2][DPFLOW_CT_SLOTS];
	struct dpflow_ct_slot slot;
};

/*
 * CT pipes whose new connections may touch more than their own two
 * buckets (values with NAT bindings keyed by their reply key, replace,
 * which frees a victim and its alias wherever they are) are walked by one
 * thread in the CPU's order, and their device copy logs every control
 * word the burst wrote (ct_impl.h dpflow_ct_touch(): index array of
 * GPU_CT_TOUCH_IDX entries after the image). The log carries each such
 * slot's final control word, slot line and value block.
 */
#define GPU_CT_TOUCH_IDX 2048
#define GPU_CT_TOUCH_MAX 512

struct gpu_ct_touch {
	uint32_t i; /* slot */
	uint32_t reserved;
	uint64_t ctrl;
	struct dpflow_ct_slot slot;
	struct dpflow_ct_vslot val;
};

/* One CT pipe's log of a burst. */
struct gpu_ct_log {
	uint64_t stats[8]; /* header line 2 (enum dpflow_ct_stat) */
	uint64_t n_live;   /* header line 3 */
	/* touched slots (serial pipes); above GPU_CT_TOUCH_MAX the log
	 * overflowed and the host copies the whole image back */
	uint32_t n_touch;
	uint32_t reserved0;
	uint64_t reserved[6];
	struct dpflow_ct_pool pools[DPFLOW_CT_POOLS_MAX];
	struct gpu_ct_wb pkt[DPFLOW_BURST_MAX];
	struct gpu_ct_touch touch[GPU_CT_TOUCH_MAX];
};

/* Whether CT pipe @pp (its device image set) runs serially. */
__host__ __device__ static inline bool
gpu_ct_serial(const struct gpu_pipe *pp, const struct dpflow_ct_image *ct)
{
	return pp->ct_values || (ct->flags & DPFLOW_CT_F_REPLACE);
}

/* A meter a packet went through (per metered pipe and packet): the
 * buckets after the burst. */
struct gpu_meter_wb {
	uint32_t idx;
	uint8_t used; /* 0: none; GMETER_PIPE or GMETER_SHARED */
	uint8_t reserved[3];
	uint64_t tokens;
	uint64_t last_ns;
};

#define GMETER_PIPE   1
#define GMETER_SHARED 2

/* ---- the ordered kernel (gpu_flow_sched.cu) ----------------------------- */

/* Threads of the ordered kernel's one block: a packet each. */
#define GPU_SCHED_THREADS DPFLOW_BURST_MAX

struct gpu_sched_args {
	const struct gpu_pipe *pipes;
	unsigned n_pipes;
	int root; /* -1: none */
	uint16_t port;
	uint32_t stride;
	uint32_t n; /* packets, at most GPU_SCHED_THREADS */
	uint32_t path_max;
	uint8_t *stage; /* slots: metadata, then the buffer */
	struct gpu_result *res;
	struct gpu_step *path;
	struct gpu_burst burst;
	unsigned long long *clock;	/* the plan's time word, set to now */
	struct gpu_ct_log *ct_log;	/* n_ct logs */
	struct gpu_meter_wb *meter_log; /* n_metered x GPU_SCHED_THREADS */
	/* CT pipes with values, during a run: the init blocks of its
	 * packets by rank, then their connections' values (2 x
	 * GPU_SCHED_THREADS) */
	struct dpflow_ct_value *ct_vals;
	unsigned n_ct, n_metered;
	uint8_t ct_pipe[DPFLOW_PIPES_MAX];    /* the pipe of each CT log */
	uint8_t meter_pipe[DPFLOW_PIPES_MAX]; /* the pipe of each meter log */
};

/* Queue the ordered kernel on @stream. */
cudaError_t gpu_flow_sched_launch(const struct gpu_sched_args *a,
				  cudaStream_t stream);

/* ---- device copies of CT and meter images (gpu_flow_state.cu) ------------ */

struct gpu_state;

/*
 * Device copies of the CT images, per-entry meter images and shared meter
 * image of @ctx's pipes, and the write-back logs: sets the pipes' ct,
 * meters, shared_meters, metered, meter_slot and ct_slot in @h_pipes (the
 * host copy of the plan, @n pipes). NULL with @err on failure.
 */
struct gpu_state *gpu_state_create(struct dpflow_ctx *ctx,
				   struct gpu_pipe *h_pipes, unsigned n,
				   struct dpflow_error *err);
void gpu_state_destroy(struct gpu_state *st);

/* Whether a burst needs the ordered kernel (CT pipes or meters). */
bool gpu_state_ordered(const struct gpu_state *st);

/*
 * Before a burst: copy to the device what the host changed since the last
 * burst (CT aging and removals, shared meter configuration); with @batch
 * (an entry batch was published) also the pipes' meter images (the new
 * entries' meters). 0 or a negative errno with @err.
 */
int gpu_state_push(struct gpu_state *st, bool batch, cudaStream_t stream,
		   struct dpflow_error *err);

/* The logs and their pipes, for the ordered kernel. */
void gpu_state_args(const struct gpu_state *st, struct gpu_sched_args *a);

/* Queue on @stream the copies of the logs of a burst of @n packets. */
int gpu_state_pull(struct gpu_state *st, uint32_t n, cudaStream_t stream,
		   struct dpflow_error *err);

/* After the stream finished: write the logs back into the host images. */
void gpu_state_apply(struct gpu_state *st, uint32_t n);

#endif /* DPFLOW_GPU_FLOW_FEAT_CUH */
