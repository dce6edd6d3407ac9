/*
 * Pipe graphs on the GPU (../shared DESIGN.md §4, "Pipelines on the GPU").
 *
 * dpflow_gpu_flow_bind() builds a device plan of a context's pipes: per
 * pipe its type, match template, forwarding and action templates, the
 * table image of the current generation copied byte for byte to device
 * memory (images are position-independent), a compact per-entry array
 * (action template, action values, forwarding, encapsulation), device
 * counters per entry and per pipe. dpflow_gpu_flow_process() then runs a
 * burst through it: the slots are copied to device memory, one kernel
 * (one thread per packet) parses, walks the graph from the port's root
 * pipe with the CPU target's own parse, key, lookup and action code
 * (the *_impl.h headers), and the results come back; the host transmits
 * and counts exactly as the CPU target (pipeline.c), in the same order.
 *
 * Same answers: output bytes, verdicts, drop reasons, per-entry counters
 * and pipe statistics equal the CPU target's (tests/gpu/test_gpu_flow.c).
 * The context's own counters (dpflow_entry_counter, dpflow_pipe_stats_get,
 * dpflow_ctx_drops) count the GPU's packets too, so the CPU-side readers
 * work unchanged; the device counters are read with
 * dpflow_gpu_flow_entry_counter() and dpflow_gpu_flow_pipe_stats().
 *
 * Supported: every pipe type (basic, control, acl, lpm, hash, ct), every
 * action (mirror included), every monitor (per-entry and shared counters,
 * per-entry and shared meters with colour forwarding, aging) and every
 * forwarding kind (port, pipe, drop, per entry, RSS, handler). Plans with
 * CT pipes or meters run an ordered kernel that keeps the CPU's packet
 * order per connection and per meter (docs/gpu.md). Refused at bind time,
 * naming the pipe: a graph whose paths can make more than 8 mirror copies
 * of one packet, more than 64 distinct handlers in one plan.
 *
 * Entry batches: dpflow_gpu_flow_process() syncs by itself before a
 * burst when a batch was published since the last sync (the context
 * counts batches): it copies the images of the generation now current and
 * the entry arrays (the version flip between kernel runs).
 * dpflow_gpu_flow_sync() does the same on demand.
 *
 * Threads: one thread uses a plan (the one that would run the CPU data
 * path); it must not run dpflow_ctx_process_burst() on the same context
 * at the same time. Every CUDA failure becomes an error with the CUDA
 * error string; nothing here aborts.
 */
#ifndef DPFLOW_GPU_FLOW_H
#define DPFLOW_GPU_FLOW_H

#include <stdint.h>

#include "dpflow/error.h"
#include "dpflow/flow.h"

#ifdef __cplusplus
extern "C" {
#endif

struct dpflow_gpu_flow;

/*
 * Build the device plan of @ctx's pipes on CUDA device @gpu_dev_index.
 * Returns the plan, or NULL with @err: ENODEV (no such GPU), ENOTSUP
 * (naming the pipe and what: the limits above), ENOMEM or a CUDA error. The context must outlive the plan.
 */
struct dpflow_gpu_flow *dpflow_gpu_flow_bind(struct dpflow_ctx *ctx,
					     int gpu_dev_index,
					     struct dpflow_error *err);
/* Free the plan's device and pinned memory. NULL ok. */
void dpflow_gpu_flow_unbind(struct dpflow_gpu_flow *g);

/*
 * Copy the images of the context's current generation and the entry
 * arrays to the device; entries new since the last sync start their
 * device counters from zero (plus what an update carried over). Returns 0
 * or a negative errno with @err (ENOTSUP for an entry the GPU target
 * cannot run, naming it; CUDA errors).
 */
int dpflow_gpu_flow_sync(struct dpflow_gpu_flow *g, struct dpflow_error *err);

/*
 * Run packets @idx[0..n) received on port @port through the pipe graph on
 * the GPU, as dpflow_ctx_process_burst() does on the CPU: the packets are
 * transmitted or dropped (and freed), and counted. Returns @n, or a
 * negative errno with @err when the GPU failed (the packets are then
 * freed and counted as PORT_NO_BUFFER drops).
 */
int dpflow_gpu_flow_process(struct dpflow_gpu_flow *g, uint16_t port,
			    uint32_t *idx, uint16_t n,
			    struct dpflow_error *err);

/* Device counters of entry @e (with what an update carried over): 0, or
 * -EINVAL (not a live entry of the plan's context), -EIO (CUDA). */
int dpflow_gpu_flow_entry_counter(struct dpflow_gpu_flow *g,
				  const struct dpflow_entry *e,
				  struct dpflow_counter *c);
/* Device counters of @pipe (pkts, hits, misses; the rest 0): 0, -EINVAL
 * or -EIO. */
int dpflow_gpu_flow_pipe_stats(struct dpflow_gpu_flow *g,
			       const struct dpflow_pipe *pipe,
			       struct dpflow_pipe_stats *s);

/* ---- benchmark support ---------------------------------------------------
 *
 * For `dpflow bench WORKLOAD --target gpu` (bench/bench_gpu.c): the plan's
 * kernel alone over packets already in device memory, timed with CUDA
 * events; verdicts and paths stay in device memory (one copy back on
 * demand, for the check). Not for the data path.
 */
struct dpflow_gpu_flow_bench;

/*
 * Copy @n packets of @hdr_bytes each (frames at offset 0, packed at
 * @hdrs; lengths @lens, at most @hdr_bytes) to device memory for plan @g,
 * with room for their verdicts and paths. NULL with @err on failure.
 */
struct dpflow_gpu_flow_bench *
dpflow_gpu_flow_bench_create(struct dpflow_gpu_flow *g, const uint8_t *hdrs,
			     uint32_t hdr_bytes, const uint16_t *lens,
			     uint64_t n, struct dpflow_error *err);
void dpflow_gpu_flow_bench_destroy(struct dpflow_gpu_flow_bench *b);

/*
 * One kernel run over packets [@first, @first + @n) received on @port,
 * waited for; then the sent packets in *@sent and the dropped ones in
 * *@dropped (verdicts copied back). For the check against the CPU target.
 */
int dpflow_gpu_flow_bench_once(struct dpflow_gpu_flow_bench *b, uint16_t port,
			       uint64_t first, uint64_t n, uint64_t *sent,
			       uint64_t *dropped, struct dpflow_error *err);

struct dpflow_gpu_flow_bench_stats {
	uint64_t pkts;		  /* packets the timed runs handled */
	unsigned runs;		  /* timed kernel runs over all packets */
	double seconds;		  /* CUDA-event time of the timed runs */
	double pps;		  /* packets per second */
	double hdr_bytes_per_s;	  /* packet bytes read per second */
	double out_bytes_per_s;	  /* verdict + path bytes written per s */
	double min_run_s;	  /* the fastest single run */
	unsigned blocks, threads; /* the launch shape */
};

/*
 * @warmup untimed runs, then @runs timed runs, each over all packets. 0 or
 * a negative errno with @err.
 */
int dpflow_gpu_flow_bench_time(struct dpflow_gpu_flow_bench *b, uint16_t port,
			       unsigned warmup, unsigned runs,
			       struct dpflow_gpu_flow_bench_stats *st,
			       struct dpflow_error *err);

/* Device packet counters of entries @e[0..n) (all of one pipe of @g's
 * context), in *@pkts. 0 or a negative errno with @err. */
int dpflow_gpu_flow_bench_entry_pkts(struct dpflow_gpu_flow *g,
				     const struct dpflow_entry *const *e,
				     uint32_t n, uint64_t *pkts,
				     struct dpflow_error *err);

/* Copy bandwidths of GPU @dev in bytes/s: pinned host->device and
 * device->host of @bytes each, both at once (two streams), and device to
 * device of @d2d_bytes. 0 or a negative errno with @err. */
struct dpflow_gpu_copy_bw {
	double h2d, d2h, both, d2d;
};
int dpflow_gpu_copy_bw_measure(int dev, size_t bytes, size_t d2d_bytes,
			       struct dpflow_gpu_copy_bw *bw,
			       struct dpflow_error *err);

/* ---- queue-fed persistent pipeline ---------------------------------------
 *
 * The data path of the GPU target: a persistent kernel takes batches from
 * one or more GPU queues (gpu.h; a CPU proxy feeds each from a port), runs
 * every packet through the plan's pipe graph on the GPU (the same
 * gpu_flow_pkt() as dpflow_gpu_flow_process(), counting on the device
 * counters), and hands each packet back on its queue's transmit ring with
 * its verdict: sent (the descriptor's user word names the port) or
 * DPFLOW_GPU_DESC_F_DROP (the user word names the drop reason).
 *
 * Receiving is per warp (up to 32 packets a batch) or per block (up to
 * its threads); a queue may have several receivers. Each packet goes back
 * at the transmit position equal to its receive position, so a queue's
 * packets leave in the order they came (no reordering within a flow, nor
 * across flows); the queues must be used by this kernel alone.
 *
 * What the GPU reads of a packet: the first `window` bytes are copied
 * into shared memory with 16-byte loads (the frame itself stays where the
 * queue put it: pinned host memory on the zero-copy path, the device ring
 * on the device-resident one) and the pipeline runs on that copy; edited
 * bytes are written back. The parser is given the packet's real length
 * (so IP and UDP length checks hold) and its headers must lie within the
 * bytes the GPU holds: a whole frame longer than the window whose headers
 * go beyond it is processed in place instead; with header split (the
 * queue's hdr_split), a packet longer than the split whose parse does not
 * end within it (headers beyond it, or a malformed frame) is processed as
 * the frame cut at the split, which the parser drops as the CPU target
 * would drop that truncated frame. Plans whose actions move a
 * frame's start (VLAN push or pop, encap, decap) run in place on the
 * zero-copy path only, without header split (refused otherwise, ENOTSUP).
 * Refused as well, naming the pipe: what needs a burst's clock or the
 * host's replay of a burst (ct pipes, meters, shared counters, aging),
 * forwarding to RSS queues or handlers, and mirror actions.
 *
 * Entry batches: dpflow_gpu_flow_run_sync() writes the context's new
 * generation into the copy of the plan no receiver uses (a second copy of
 * the images, entry arrays and pipe array; counters are shared), then
 * flips the generation the kernel reads. Each receiver reads the
 * generation once per batch and acknowledges it, so every packet of a
 * batch sees one version, and the host reuses a copy only once every
 * receiver has left it. The verdict words carry the generation's low bits.
 *
 * Threads: one control thread calls these functions (the one publishing
 * entry batches); while a run is active, do not call
 * dpflow_gpu_flow_sync() or dpflow_gpu_flow_process() on its plan.
 * Counters: dpflow_gpu_flow_entry_counter() and dpflow_gpu_flow_pipe_stats()
 * read the device counters at any time; the context's own counters do not
 * see the GPU's packets in this mode, and an updated entry's device count
 * starts from the context's count of the entry it replaced.
 */
#define DPFLOW_GPU_FLOW_RUN_QUEUES_MAX 64

struct dpflow_gpu;
struct dpflow_gpu_queue;
struct dpflow_gpu_kernel;

enum dpflow_gpu_flow_recv {
	DPFLOW_GPU_FLOW_RECV_WARP = 0, /* a warp takes up to 32 packets */
	DPFLOW_GPU_FLOW_RECV_BLOCK,    /* a block takes up to its threads */
};

struct dpflow_gpu_flow_run_params {
	struct dpflow_gpu *gpu; /* the plan's device, opened */
	struct dpflow_gpu_queue *const *queues;
	unsigned n_queues; /* 1..DPFLOW_GPU_FLOW_RUN_QUEUES_MAX */
	uint16_t port;	   /* the context's port the packets arrive on */
	enum dpflow_gpu_flow_recv recv;
	unsigned receivers;	  /* per queue (warps or blocks); 0 = 4 */
	unsigned warps_per_block; /* 1..8; 0 = 4 */
	uint32_t window;	  /* bytes staged per packet (a multiple of
				     16, at most 1024); 0 = 128; raised to
				     cover the queues' header split */
	uint64_t poll_ns;	  /* longest wait for a batch before the
				     receiver checks its exit flag and
				     generation; 0 = 20 us */
	/*
	 * Optional: the device address of CPU_GPU memory of one word per slot
	 * of the queues' pool, where each packet's verdict word (below) is
	 * written before it is handed back. For tests and tools.
	 */
	uint32_t *verdicts;
};

/* A verdict word (also the transmit descriptor's user word). */
#define DPFLOW_GPU_FLOW_VERDICT_SENT 0x80000000u
/* the port when sent, else the drop reason (enum dpflow_drop) */
#define DPFLOW_GPU_FLOW_VERDICT_VALUE(v) ((v)&0xffffu)
/* low 15 bits of the plan generation the packet saw */
#define DPFLOW_GPU_FLOW_VERDICT_GEN(v) (((v) >> 16) & 0x7fffu)

struct dpflow_gpu_flow_run_stats {
	uint64_t batches; /* batches handled (per warp) */
	uint64_t pkts;	  /* packets handed back */
	uint64_t sent;
	uint64_t dropped;
	uint64_t staged;    /* run on their staged copy */
	uint64_t in_place;  /* run in place (see above) */
	uint64_t split_cut; /* headers beyond the split: cut there */
	uint64_t lost;	    /* claimed but never handed back: the transmit
			       ring had no room when the run stopped */
	uint64_t gen;	    /* the generation in use */
	uint64_t drops[DPFLOW_DROP__COUNT]; /* by reason */
	/* GPU time of a batch, from its claim to its transmit descriptors'
	 * release (%globaltimer), in 250 ns buckets: p50, p99, max */
	uint64_t batch_ns_p50, batch_ns_p99, batch_ns_max;
	uint64_t busy_ns; /* the batches' GPU time, summed over receivers */
	unsigned receivers, blocks, threads, window;
};

struct dpflow_gpu_flow_run;

/*
 * Launch the queue-fed kernel for plan @g on @params->queues (each fed by
 * its own proxy, started before or after) and wait until every receiver
 * runs. The plan is synced first when a batch is pending. NULL with @err:
 * EINVAL (parameters; a grid that cannot be resident at once), ENOTSUP
 * (a path or split the plan's actions cannot use, named), CUDA errors.
 */
struct dpflow_gpu_flow_run *
dpflow_gpu_flow_run_start(struct dpflow_gpu_flow *g,
			  const struct dpflow_gpu_flow_run_params *params,
			  struct dpflow_error *err);

/*
 * Publish the entry batches processed since the last sync to the running
 * kernel (the version flip above); returns once every receiver uses the
 * new generation. 0 when there was nothing to publish or it is done;
 * -ETIMEDOUT when receivers did not move within @timeout_ns (0 = 1 s),
 * the kernel's error, or CUDA errors, with @err.
 */
int dpflow_gpu_flow_run_sync(struct dpflow_gpu_flow_run *r, uint64_t timeout_ns,
			     struct dpflow_error *err);

/* The generation the kernel uses now (verdict words carry its low bits). */
uint64_t dpflow_gpu_flow_run_gen(const struct dpflow_gpu_flow_run *r);

/* The kernel handle, for dpflow_gpu_proxy_params.watch. */
struct dpflow_gpu_kernel *
dpflow_gpu_flow_run_kernel(struct dpflow_gpu_flow_run *r);

/* Counters now (approximate while the kernel runs). 0 or -errno. */
int dpflow_gpu_flow_run_stats_get(struct dpflow_gpu_flow_run *r,
				  struct dpflow_gpu_flow_run_stats *st,
				  struct dpflow_error *err);

/*
 * Raise the exit flag and wait up to @timeout_ns (0 = 2 s) for the kernel,
 * fill @st (may be NULL) and leave the plan's own copy holding the current
 * generation (dpflow_gpu_flow_process() may follow). Stop the run before
 * the proxies of its queues (packets it holds go back through them), and
 * destroy it after them (they may watch its kernel). Returns 0, the
 * kernel's error, or -ETIMEDOUT (the kernel ignored its flag: stop may be
 * called again). Once stopped, returns what the first stop returned.
 */
int dpflow_gpu_flow_run_stop(struct dpflow_gpu_flow_run *r, uint64_t timeout_ns,
			     struct dpflow_gpu_flow_run_stats *st,
			     struct dpflow_error *err);

/* Stop (as above, 2 s bound) if not stopped, and free the run; a kernel
 * that ignores its flag keeps the run's memory until the process ends.
 * NULL ok. */
void dpflow_gpu_flow_run_destroy(struct dpflow_gpu_flow_run *r);

#ifdef __cplusplus
}
#endif

#endif /* DPFLOW_GPU_FLOW_H */
