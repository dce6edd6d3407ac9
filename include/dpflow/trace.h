/*
 * Packet traces: the way a packet took through the pipes, pipe by pipe,
 * as the walk decided it (the analogue of `ovs-appctl ofproto/trace` and
 * VPP's packet trace).
 *
 * A data thread arms tracing for its next burst with
 * dpflow_ctx_thread_trace(); the burst's first packets then record, at
 * each pipe they visit, the table's answer (the entry hit, or the miss),
 * the connection tracker's (CT pipes), the meter's colour, the result of
 * the entry's actions and where the forwarding sent them; the trace ends
 * with the packet's verdict. Tracing costs nothing while it is off: the
 * walk tests one flag per burst. Both targets fill the same records.
 */
#ifndef DPFLOW_TRACE_H
#define DPFLOW_TRACE_H

#include <stdint.h>

#include "dpflow/common.h"
#include "dpflow/flow.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Packets of one burst that can be traced at once. */
#define DPFLOW_TRACE_PKTS_MAX 8

/* Where a step's forwarding (or the packet's verdict) sent it. */
enum dpflow_trace_to {
	DPFLOW_TRACE_TO_DROP = 0, /* dropped: value is enum dpflow_drop */
	DPFLOW_TRACE_TO_PORT,	  /* sent out of port value */
	DPFLOW_TRACE_TO_PIPE,	  /* into pipe value (by id) */
	DPFLOW_TRACE_TO_RSS,	  /* onto software RSS queue value */
	DPFLOW_TRACE_TO_HANDLER,  /* to a software handler */
};

/* What the table (or the tracker) said at a step. */
enum dpflow_trace_match {
	DPFLOW_TRACE_MISS = 0,	     /* no entry (or constant fields differ) */
	DPFLOW_TRACE_HIT,	     /* entry @entry */
	DPFLOW_TRACE_CT_TRACKED,     /* CT: connection @entry */
	DPFLOW_TRACE_CT_UNTRACKABLE, /* CT: not IP, a later fragment, or
					constant fields differ */
	DPFLOW_TRACE_CT_NOCONN,	     /* CT: no connection could be had */
	DPFLOW_TRACE_CT_INVALID,     /* CT: the state machine said invalid */
};

/* One pipe a packet visited. */
struct dpflow_trace_step {
	uint16_t pipe;	   /* pipe id (dpflow_ctx_pipe()) */
	uint8_t match;	   /* enum dpflow_trace_match */
	uint8_t color;	   /* enum dpflow_color after the pipe's meter */
	uint32_t entry;	   /* entry index hit, or the connection (CT) */
	uint64_t entry_id; /* dpflow_entry_id() of the entry hit, else 0 */
	uint8_t ct_state;  /* CT: meta.ct_state after the tracker */
	uint8_t ct_flags;  /* CT: meta.ct_flags */
	uint8_t actions;   /* 1: the entry's action template ran */
	uint8_t to;	   /* enum dpflow_trace_to */
	uint16_t value;	   /* port, pipe, queue, or drop reason */
	uint8_t ct_drop; /* CT no-connection: why (dpflow_trace_ct_drop_name) */
	uint8_t reserved;
};

/* A packet's trace. */
struct dpflow_trace {
	uint32_t idx;	  /* the packet's slot */
	uint16_t port;	  /* received on */
	uint16_t n_steps; /* pipes visited */
	uint8_t to;	  /* verdict: enum dpflow_trace_to of the last step,
			     or DROP before any pipe (parse, no root) */
	uint8_t reserved;
	uint16_t value;
	struct dpflow_trace_step step[DPFLOW_PIPES_MAX];
};

/*
 * Trace the first @n packets (at most DPFLOW_TRACE_PKTS_MAX) of the next
 * burst this thread processes (dpflow_ctx_process_burst*): traces[i] is
 * filled for the burst's packet i. One burst only: tracing is off again
 * after it. @n 0 disarms.
 */
void dpflow_ctx_thread_trace(struct dpflow_ctx *ctx,
			     struct dpflow_trace *traces, unsigned n);

/*
 * Control thread: trace the next @n packets (1..DPFLOW_TRACE_PKTS_MAX) a
 * data thread receives, on port @port or on any port (@port -1), waiting
 * at most @timeout_ms for them: the first burst that comes is traced
 * (its first @n packets, fewer if the burst is smaller) into @out.
 * Returns how many packets were traced (0: none came in time), or
 * -EBUSY when another trace request is in flight, -EINVAL for @n out of
 * range. Data threads test one word per burst for a request.
 */
int dpflow_ctx_trace_next(struct dpflow_ctx *ctx, int port, unsigned n,
			  unsigned timeout_ms, struct dpflow_trace *out);

/* The name of enum dpflow_trace_to / dpflow_trace_match values. */
const char *dpflow_trace_to_name(unsigned to);
const char *dpflow_trace_match_name(unsigned match);
/* The name of a connection state (step.ct_state: "established"...) and
 * of the tracker's reason for no connection (step.ct_drop: "full"...). */
const char *dpflow_trace_ct_state_name(unsigned state);
const char *dpflow_trace_ct_drop_name(unsigned drop);

#ifdef __cplusplus
}
#endif

#endif /* DPFLOW_TRACE_H */
