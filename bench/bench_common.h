/*
 * Helpers shared by the benchmarks: the timed-trial loop and best-of
 * bookkeeping, and the pipe-level harness of `dpflow bench exact-1m`,
 * `acl-10k` and `lpm-512k` (a flow-engine context with one root pipe,
 * 64-byte frames in pool slots pushed through dpflow_ctx_process_burst()).
 * Bench thread only.
 */
#ifndef DPFLOW_BENCH_COMMON_H
#define DPFLOW_BENCH_COMMON_H

#include <stdbool.h>
#include <stdint.h>

#include "dpflow/flow.h"

/* Which variants of a workload run (--variant). */
enum {
	BENCH_VARIANT_TABLE = 1, /* the table alone, on packed keys */
	BENCH_VARIANT_PIPE = 2,	 /* parse + pipe through the flow engine */
	BENCH_VARIANT_ALL = 3,
};

/* Parse a --variant value ("table", "pipe" or "all"): the mask or -1. */
int bench_variant_parse(const char *s);

/* The fastest trial so far: packets and TSC ticks. */
struct bench_best {
	uint64_t pkts;
	uint64_t ticks;
};

void bench_best_keep(struct bench_best *b, uint64_t pkts, uint64_t ticks);
double bench_best_mpps(const struct bench_best *b);

/* One pass of a workload: returns the packets it handled. */
typedef uint64_t (*bench_pass_fn)(void *arg);

/*
 * Call @fn(@arg) until @seconds have passed; the TSC ticks taken, and the
 * packets the passes handled in *@pkts.
 */
uint64_t bench_timed(bench_pass_fn fn, void *arg, double seconds,
		     uint64_t *pkts);

/*
 * @trials trials of @seconds each of @ours and, when not NULL, @peer,
 * taking turns (others' load on a shared machine comes and goes); the
 * best trial of each in *@ob and *@pb.
 */
void bench_pair_run(bench_pass_fn ours, void *ours_arg, bench_pass_fn peer,
		    void *peer_arg, unsigned trials, double seconds,
		    struct bench_best *ob, struct bench_best *pb);

/*
 * bench_report() of one pair of bests; @peer NULL (or a peer without a
 * trial) for none; @pkt_bytes for the Gbps column.
 */
void bench_report_best(const char *workload, const char *variant,
		       const struct bench_best *ob, const char *peer,
		       const struct bench_best *pb, uint32_t pkt_bytes);

/* Cycles per packet of a best trial. */
double bench_best_cpp(const struct bench_best *b);

/* A pipe config of @type named @name: @n per-entry fields (masks all
 * ones), @size entries. */
void bench_pipe_cfg(struct dpflow_pipe_cfg *c, const char *name, uint8_t type,
		    uint32_t size, const uint16_t *fields, unsigned n);

/* One flow of a frame: addresses in network byte order, ports in host. */
struct bench_flow {
	uint8_t src[4], dst[4];
	uint16_t sport, dport;
	uint8_t proto; /* 6 (TCP) or 17 (UDP) */
};

/* A bijection on 32-bit words: flow i's source address (distinct flows,
 * distinct sources), as the exact-1m benches draw them. */
uint32_t bench_scramble(uint32_t i);
/* The exact-1m pipe's fields (outer 5-tuple) and flow @f's entry key on
 * them (addresses, then ports and protocol, big-endian). */
extern const uint16_t bench_exact_fields[5];
void bench_exact_entry(const struct bench_flow *f, struct dpflow_entry_cfg *e);

/*
 * A context with one port (a ring, never read) whose root pipe forwards
 * hits and misses to a handler that does nothing: the handler owns the
 * packets, so they stay in their slots and every pass re-parses them.
 */
struct bench_pipe {
	struct dpflow_ctx *ctx;
	struct dpflow_pool *pool;
	struct dpflow_pipe *pipe;
	struct dpflow_queue *q;
	uint16_t port;
	uint32_t n_pkts;
	uint32_t burst;
	uint32_t *idx; /* the packets' slots */
	bool online;
};

/*
 * Make the context and the pipe from @cfg (name, type, size, match and
 * monitor; root, port and forwarding are set here), with room for
 * @n_pkts packets. Returns 0, or -1 with a message on stderr.
 */
int bench_pipe_create(struct bench_pipe *bp, const struct dpflow_pipe_cfg *cfg,
		      uint32_t n_pkts);
/* Offline if online, then free everything. Zeroed @bp ok. */
void bench_pipe_destroy(struct bench_pipe *bp);
/* Queue one entry; 0 or -1 with a message. */
int bench_pipe_add(struct bench_pipe *bp, const struct dpflow_entry_cfg *c);
/* dpflow_entries_process(): 0 or -1 with a message. */
int bench_pipe_commit(struct bench_pipe *bp);
/* Write packet @i (< n_pkts) as a 64-byte Ethernet/IPv4 frame of @f. */
int bench_pipe_set_pkt(struct bench_pipe *bp, uint32_t i,
		       const struct bench_flow *f);
/* The frames, for a peer to copy: @frames and @lens of n_pkts each. */
void bench_pipe_frames(const struct bench_pipe *bp, const uint8_t **frames,
		       uint16_t *lens);
/* Register the bench thread as a data thread (once). */
void bench_pipe_online(struct bench_pipe *bp);

/*
 * bench_pass_fn passes over every packet in bursts of bp->burst:
 * dpflow_ctx_process_burst() with dpflow_ctx_quiescent() between bursts,
 * or dpflow_parse_burst() alone (the parse stage's share).
 */
uint64_t bench_pipe_pass(void *bp);
uint64_t bench_pipe_parse_pass(void *bp);

/* Hits and misses of the pipe so far. */
void bench_pipe_stats(const struct bench_pipe *bp, uint64_t *hits,
		      uint64_t *misses);

#endif /* DPFLOW_BENCH_COMMON_H */
