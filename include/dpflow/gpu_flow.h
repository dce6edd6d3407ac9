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
 * Supported now: pipe types basic, control, acl, lpm (IPv4, IPv6, with
 * exact fields) and hash; every action except mirror; forwarding to a
 * port, a pipe, drop or per entry; per-entry counters and pipe hit/miss
 * counters. Refused at bind time (or by sync, for entries), with an error
 * naming what: ct pipes, meters, aging, shared counters, RSS and handler
 * forwarding, mirror.
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
 * ("... is not supported on the GPU target yet", naming the pipe and
 * what), ENOMEM or a CUDA error. The context must outlive the plan.
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

#ifdef __cplusplus
}
#endif

#endif /* DPFLOW_GPU_FLOW_H */
