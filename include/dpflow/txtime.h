/*
 * Timed transmit: a timing wheel that holds packets until their send time
 * (meta->tx_time_ns) and releases them then, recording how late each one
 * left. docs/txtime.md has the design and the port mappings.
 *
 * Times are nanoseconds on the caller's time base; the wheel never reads a
 * clock (it is given `now`), so tests drive it with made-up times. dpflow's
 * data path uses dpflow_clock_ns() (clock.h, the TSC), the base of
 * meta->tx_time_ns.
 *
 * The wheel has `slots` slots of `tick_ns` each: a horizon of slots *
 * tick_ns ahead of its cursor. A packet is filed in the slot of its tick,
 * kept in time order there, and released by the first
 * dpflow_txsched_release() whose `now` is at or past its time: never
 * before it, and as late as the caller's polling makes it (tick_ns sets the
 * bucket width, not the precision). Node storage for `capacity` packets is
 * allocated at creation; the data path allocates nothing.
 *
 * Threads: one owner, the worker that owns the transmit queue the wheel
 * feeds, makes every call except stats, which any thread may read
 * (counters are single-writer, read with relaxed atomics).
 */
#ifndef DPFLOW_TXTIME_H
#define DPFLOW_TXTIME_H

#include <stdint.h>

#include "dpflow/error.h"
#include "dpflow/pool.h"

#ifdef __cplusplus
extern "C" {
#endif

struct dpflow_txsched;

struct dpflow_txsched_cfg {
	struct dpflow_pool *pool; /* every packet comes from it; required */
	uint32_t slots;		  /* a power of two, 64..2^24; 0: 8192 */
	uint64_t tick_ns;	  /* 1..10^9; 0: 1000 (1 us) */
	uint32_t capacity;	  /* packets held at most, 1..2^31; 0: 65536 */
	uint64_t start_ns;	  /* the cursor's time at creation ("now") */
};

/*
 * Release errors are kept in a log-linear histogram: exact below
 * 2^DPFLOW_TXSCHED_HIST_SUB_BITS ns, then 2^SUB_BITS buckets per power of
 * two (a bucket is at most 1/32 of its value wide).
 */
#define DPFLOW_TXSCHED_HIST_SUB_BITS 5
#define DPFLOW_TXSCHED_HIST_BUCKETS              \
	((64 - DPFLOW_TXSCHED_HIST_SUB_BITS + 1) \
	 << DPFLOW_TXSCHED_HIST_SUB_BITS)

struct dpflow_txsched_stats {
	uint64_t enqueued;  /* packets taken (wheel or at once) */
	uint64_t released;  /* packets handed back by release/drain */
	uint64_t immediate; /* taken with tx_time_ns 0: released at once */
	uint64_t late;	    /* taken with a time behind the cursor: at once */
	uint64_t too_far;   /* refusals: beyond the horizon */
	uint64_t full;	    /* refusals: capacity reached */
	uint64_t pending;   /* held now */
	uint64_t timed;	    /* released through the wheel: in the histogram */
	uint64_t err_max_ns;
	uint64_t err_sum_ns;
};

/*
 * Make a wheel from @cfg (slots, tick and capacity as documented there).
 * NULL + @err (field "pool", "slots", "tick_ns", "capacity") on a bad
 * value or no memory. Control path.
 */
struct dpflow_txsched *
dpflow_txsched_create(const struct dpflow_txsched_cfg *cfg,
		      struct dpflow_error *err);

/* Free the wheel; packets still held are freed to the pool. NULL ok. */
void dpflow_txsched_destroy(struct dpflow_txsched *s);

/*
 * Take packets @idx[0..n) of the wheel's pool in order, each at its
 * meta->tx_time_ns: 0 or a time in a tick the cursor has passed means
 * "now" (released by the next release call, counted immediate or late);
 * otherwise it is filed in its slot. Stops at the first packet it cannot
 * take: its time is at or beyond dpflow_txsched_horizon() (too_far; it
 * fits once the cursor moves on) or the wheel holds `capacity` packets
 * (full). Returns how many were taken; their ownership passes to the
 * wheel, the caller keeps @idx[k..n). Owner thread.
 */
unsigned dpflow_txsched_enqueue(struct dpflow_txsched *s, const uint32_t *idx,
				unsigned n);

/*
 * Hand back up to @max packets due at @now into @out_idx: first those
 * taken as "now" (in the order taken), then the wheel's in time order
 * (ties in the order taken). Every packet whose time is <= @now is
 * released by the call, unless @max stops it first (the rest wait for the
 * next call); none whose time is later. Records @now - tx_time_ns of each
 * wheel packet. @now below an earlier call's counts as that one. Returns
 * the count; ownership passes to the caller. Owner thread.
 */
unsigned dpflow_txsched_release(struct dpflow_txsched *s, uint64_t now,
				uint32_t *out_idx, unsigned max);

/*
 * Hand back up to @max held packets regardless of time (in the order
 * release would give them), without recording errors: for shutdown.
 * Returns the count. Owner thread.
 */
unsigned dpflow_txsched_drain(struct dpflow_txsched *s, uint32_t *out_idx,
			      unsigned max);

/*
 * The first time enqueue refuses as too far now: the start of the
 * cursor's tick plus slots * tick_ns. Owner thread.
 */
uint64_t dpflow_txsched_horizon(const struct dpflow_txsched *s);

/* Packets held now. Owner thread. */
unsigned dpflow_txsched_pending(const struct dpflow_txsched *s);

/* Counters (a snapshot; any thread). */
void dpflow_txsched_stats_get(const struct dpflow_txsched *s,
			      struct dpflow_txsched_stats *st);

/*
 * The release error at percentile @pct (0..100) of the wheel packets
 * released so far, in ns: the upper bound of the histogram bucket that
 * holds it, capped at the largest error seen (so 100 gives the maximum).
 * 0 when none. Any thread (a snapshot).
 */
uint64_t dpflow_txsched_error_pct(const struct dpflow_txsched *s, double pct);

#ifdef __cplusplus
}
#endif

#endif /* DPFLOW_TXTIME_H */
