/*
 * The CPU data path of the flow engine: a burst goes through the parser,
 * then pipe by pipe: keys built for every packet of the pipe's burst, one
 * bulk lookup, actions per packet, and forwarding that sorts the packets
 * into the next pipes' bursts, the ports' transmit bursts and the drops.
 *
 * The table generation is read once per burst (an RCU read: the caller is
 * an online QSBR reader and reports quiescence between bursts), so a burst
 * sees every pipe before or after a batch of entry changes, never a mix.
 * Scratch space lives in the context: one data thread per context (the
 * runtime milestone gives each worker its own).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <urcu-qsbr.h>

#include "dpflow/clock.h"
#include "dpflow/flow.h"
#include "dpflow/parse.h"
#include "dpflow/ring.h"
#include "dpflow/trace.h"

#include "flow/ct.h"
#include "flow/flow_actions.h"
#include "flow/flow_internal.h"
#include "flow/meter.h"
#include "flow/walk_impl.h"

struct burst_list {
	uint16_t n;
	uint32_t idx[DPFLOW_BURST_MAX];
};

#define HANDLER_LISTS 4

struct scratch {
	struct burst_list pipe_in[DPFLOW_PIPES_MAX];
	struct burst_list port_out[DPFLOW_PORTS_MAX];
	struct burst_list rss_out[DPFLOW_RSS_QUEUES_MAX];
	/* packets for software handlers, one list per handler, handed over
	 * once per burst */
	unsigned n_handler_out;
	struct handler_out {
		uint16_t slot; /* the context's plan handler slot */
		struct burst_list b;
	} handler_out[HANDLER_LISTS];
	struct burst_list drop;
	uint8_t keys[DPFLOW_BURST_MAX][DPFLOW_KEY_MAX];
	uint32_t values[DPFLOW_BURST_MAX];
	struct dpflow_ct_pkt ct_pkts[DPFLOW_BURST_MAX];
	struct dpflow_ct_result ct_res[DPFLOW_BURST_MAX];
	uint32_t ct_user[DPFLOW_BURST_MAX];
	/* CT pipes that keep values: the value a new connection takes, and
	 * each packet's connection's value */
	struct dpflow_ct_value ct_init[DPFLOW_BURST_MAX];
	struct dpflow_ct_value ct_vals[DPFLOW_BURST_MAX];
	uint64_t now_ns; /* read once per burst */
	unsigned worker; /* counter shard (flow_internal.h) */
	uint16_t txq;	 /* transmit queue (dpflow_ctx_thread_tx_queue) */
	dpflow_tx_hook_fn tx_hook; /* dpflow_ctx_thread_tx_hook */
	void *tx_hook_arg;
	/* tracing (dpflow_ctx_thread_trace): armed for the next burst; the
	 * burst's traces (NULL while off) and their packets */
	struct dpflow_trace *trace_arm;
	unsigned trace_arm_n;
	struct dpflow_trace *trace;
	unsigned trace_n;
	uint32_t trace_idx[DPFLOW_TRACE_PKTS_MAX];
};

/* Each data thread's scratch: made when it goes online, freed offline. */
static __thread struct scratch *thread_scratch;

static struct scratch *scratch_of(struct dpflow_ctx *ctx)
{
	(void)ctx;
	if (!thread_scratch) {
		thread_scratch = calloc(1, sizeof(*thread_scratch));
		/* not online yet: the shared counter shard until it is */
		if (thread_scratch)
			thread_scratch->worker = FLOW_WORKER_SHARED;
	}
	return thread_scratch;
}

/* ---- traces (dpflow/trace.h): only while s->trace is set --------------- */

DPFLOW_STATIC_ASSERT((int)WALK_TO_DROP == DPFLOW_TRACE_TO_DROP &&
			 (int)WALK_TO_PORT == DPFLOW_TRACE_TO_PORT &&
			 (int)WALK_TO_PIPE == DPFLOW_TRACE_TO_PIPE &&
			 (int)WALK_TO_RSS == DPFLOW_TRACE_TO_RSS &&
			 (int)WALK_TO_HANDLER == DPFLOW_TRACE_TO_HANDLER,
		     "the walk's outcomes are the trace's");

/* Packet @idx's trace in this burst, or NULL when it is not traced. */
static struct dpflow_trace *trace_of(struct scratch *s, uint32_t idx)
{
	for (unsigned i = 0; i < s->trace_n; i++)
		if (s->trace_idx[i] == idx)
			return &s->trace[i];
	return NULL;
}

/* A traced packet enters pipe @pipe, which says @match (@entry). */
static void trace_enter(struct scratch *s, uint32_t idx,
			const struct dpflow_pipe *pipe, unsigned match,
			uint32_t entry, const struct dpflow_pkt_meta *m)
{
	struct dpflow_trace *t = trace_of(s, idx);
	struct dpflow_trace_step *st;

	if (!t || t->n_steps == DPFLOW_PIPES_MAX)
		return;
	st = &t->step[t->n_steps++];
	memset(st, 0, sizeof(*st));
	st->pipe = pipe->id;
	st->match = (uint8_t)match;
	st->entry = entry;
	if (match == DPFLOW_TRACE_HIT)
		st->entry_id = pipe->entries[entry].id;
	st->ct_state = m->ct_state;
	st->ct_flags = m->ct_flags;
	st->color = m->color;
}

/* A traced packet enters CT pipe @pipe, whose tracker said @r. */
static void trace_enter_ct(struct scratch *s, uint32_t idx,
			   const struct dpflow_pipe *pipe, unsigned outcome,
			   const struct dpflow_ct_result *r,
			   const struct dpflow_pkt_meta *m)
{
	struct dpflow_trace *t = trace_of(s, idx);

	trace_enter(s, idx, pipe,
		    outcome == WALK_CT_NOCONN	 ? DPFLOW_TRACE_CT_NOCONN
		    : outcome == WALK_CT_INVALID ? DPFLOW_TRACE_CT_INVALID
						 : DPFLOW_TRACE_CT_TRACKED,
		    r->conn, m);
	if (t && t->n_steps && outcome == WALK_CT_NOCONN)
		t->step[t->n_steps - 1].ct_drop = r->drop;
}

/* The traced packet's colour at its current pipe, and whether the
 * entry's actions ran (@ran). */
static void trace_hit(struct scratch *s, uint32_t idx, unsigned color, bool ran)
{
	struct dpflow_trace *t = trace_of(s, idx);

	if (!t || !t->n_steps)
		return;
	t->step[t->n_steps - 1].color = (uint8_t)color;
	t->step[t->n_steps - 1].actions = ran;
}

/* A control thread asked for a trace (dpflow_ctx_trace_next): take the
 * request if this burst's port is the one asked, and arm this burst. */
static void trace_take(struct dpflow_ctx *ctx, struct scratch *s, uint16_t port)
{
	unsigned st = CTX_TRACE_ASKED;

	if (ctx->trace_port >= 0 && ctx->trace_port != port)
		return;
	if (!__atomic_compare_exchange_n(&ctx->trace_req, &st, CTX_TRACE_TAKEN,
					 false, __ATOMIC_ACQUIRE,
					 __ATOMIC_RELAXED))
		return;
	s->trace_arm = ctx->trace_buf;
	s->trace_arm_n = ctx->trace_n;
}

/* Start this burst's traces, if armed: its first packets. */
static void trace_start(struct scratch *s, const uint32_t *idx, uint16_t n,
			uint16_t port)
{
	s->trace = s->trace_arm;
	s->trace_n = s->trace_arm_n < n ? s->trace_arm_n : n;
	s->trace_arm = NULL;
	s->trace_arm_n = 0;
	for (unsigned i = 0; i < s->trace_n; i++) {
		memset(&s->trace[i], 0, sizeof(s->trace[i]));
		s->trace[i].idx = idx[i];
		s->trace[i].port = port;
		s->trace_idx[i] = idx[i];
	}
}

/* Where the traced packet went from its current pipe (or before any). */
static void trace_out(struct scratch *s, uint32_t idx, unsigned to,
		      uint16_t value)
{
	struct dpflow_trace *t = trace_of(s, idx);

	if (!t)
		return;
	if (t->n_steps) {
		t->step[t->n_steps - 1].to = (uint8_t)to;
		t->step[t->n_steps - 1].value = value;
	}
	t->to = (uint8_t)to;
	t->value = value;
}

static void drop_pkt(struct dpflow_ctx *ctx, struct scratch *s, uint32_t idx,
		     unsigned reason)
{
	if (DPFLOW_UNLIKELY(s->trace))
		trace_out(s, idx, DPFLOW_TRACE_TO_DROP, (uint16_t)reason);
	dpflow_pool_meta(ctx->pool, idx)->drop = (uint8_t)reason;
	__atomic_fetch_add(&ctx->drops[reason], 1, __ATOMIC_RELAXED);
	s->drop.idx[s->drop.n++] = idx;
}

/* The burst's list for handler slot @slot, or NULL when every list is
 * taken. */
static struct handler_out *handler_list(struct scratch *s, uint16_t slot)
{
	struct handler_out *h = NULL;

	for (unsigned i = 0; i < s->n_handler_out; i++)
		if (s->handler_out[i].slot == slot)
			h = &s->handler_out[i];
	if (!h && s->n_handler_out < HANDLER_LISTS) {
		h = &s->handler_out[s->n_handler_out++];
		h->slot = slot;
		h->b.n = 0;
	}
	return h;
}

/*
 * Send packet @idx where forwarding @f (@miss: a miss forwarding) says
 * (walk_fwd()): onto the burst's list of a port, a pipe, an RSS queue or a
 * handler, or to the drops. A handler whose list cannot be had (more
 * handlers in this burst than lists) is called now.
 */
static void forward(struct dpflow_ctx *ctx, struct scratch *s,
		    const struct dpflow_plan_fwd *f, uint32_t idx, bool miss)
{
	struct burst_list *b;
	struct handler_out *h;
	uint16_t v;
	unsigned to = walk_fwd(f, miss, dpflow_pool_meta(ctx->pool, idx), &v);

	if (DPFLOW_UNLIKELY(s->trace) && to != WALK_TO_DROP)
		trace_out(s, idx, to, v);
	switch (to) {
	case WALK_TO_PORT:
		b = &s->port_out[v];
		break;
	case WALK_TO_PIPE:
		b = &s->pipe_in[v];
		break;
	case WALK_TO_RSS:
		b = &s->rss_out[v];
		break;
	case WALK_TO_HANDLER:
		h = handler_list(s, v);
		if (!h) {
			ctx->plan_handlers[v].fn(ctx->plan_handlers[v].arg,
						 ctx->pool, &idx, 1);
			return;
		}
		b = &h->b;
		break;
	default:
		drop_pkt(ctx, s, idx, v);
		return;
	}
	b->idx[b->n++] = idx;
}

/* Shared counter, aging and meter of a hit. Returns the packet's colour
 * (GREEN without a meter). */
static unsigned monitor_hit(struct dpflow_ctx *ctx, struct scratch *s,
			    struct dpflow_pipe *pipe, uint32_t entry,
			    struct entry_dp *dp, struct dpflow_pkt_meta *m)
{
	unsigned color;

	if (pipe->cfg.monitor.counter) {
		struct entry_ctr *c =
		    &pipe->ctr[(size_t)s->worker * pipe->cfg.size + entry];

		if (DPFLOW_LIKELY(s->worker != FLOW_WORKER_SHARED)) {
			/* this thread's shard: plain adds (readers see
			 * whole 64-bit words) */
			__atomic_store_n(
			    &c->pkts,
			    __atomic_load_n(&c->pkts, __ATOMIC_RELAXED) + 1,
			    __ATOMIC_RELAXED);
			__atomic_store_n(
			    &c->bytes,
			    __atomic_load_n(&c->bytes, __ATOMIC_RELAXED) +
				m->data_len,
			    __ATOMIC_RELAXED);
		} else {
			__atomic_fetch_add(&c->pkts, 1, __ATOMIC_RELAXED);
			__atomic_fetch_add(&c->bytes, m->data_len,
					   __ATOMIC_RELAXED);
		}
	}
	if (pipe->aging)
		dpflow_aging_touch(pipe->aging, entry, s->now_ns);
	if (!pipe->dp_used)
		return DPFLOW_COLOR_GREEN;
	if (dp->shared_counter)
		dpflow_counter_add(ctx->shared_counters, dp->shared_counter - 1,
				   m->data_len);
	if (!dp->meter)
		return DPFLOW_COLOR_GREEN;
	color = dpflow_meter_color(
	    dp->meter_shared ? ctx->shared_meters : pipe->meters, dp->meter - 1,
	    s->now_ns, m->data_len, m->color);
	m->color = (uint8_t)color;
	__atomic_fetch_add(&pipe->color[color], 1, __ATOMIC_RELAXED);
	return color;
}

/*
 * Forward @n packets that all take @f, as a block: a port's, a pipe's or
 * a handler's list grows by one copy. False (nothing done) for the other
 * kinds, which go packet by packet.
 */
static bool forward_all(struct scratch *s, const struct dpflow_plan_fwd *f,
			const uint32_t *idx, uint16_t n)
{
	struct handler_out *h;
	struct burst_list *b;

	/* the kinds whose outcome is their target (walk_fwd()) */
	switch (f->kind) {
	case PLAN_FWD_PORT:
		b = &s->port_out[f->target];
		break;
	case PLAN_FWD_PIPE:
		b = &s->pipe_in[f->target];
		break;
	case PLAN_FWD_HANDLER:
		h = handler_list(s, f->target);
		if (!h)
			return false;
		b = &h->b;
		break;
	default:
		return false;
	}
	/* a burst has at most DPFLOW_BURST_MAX packets in all */
	memcpy(b->idx + b->n, idx, (size_t)n * sizeof(*idx));
	b->n = (uint16_t)(b->n + n);
	return true;
}

/*
 * A CT pipe: track each packet's connection (creating it unless
 * lookup-only), write meta.ct_state / ct_flags and the user register
 * (walk_ct_begin() / walk_ct_end()), run the action template, forward;
 * packets that get no connection or break the state machine take the
 * miss forwarding.
 */
static void run_ct_pipe(struct dpflow_ctx *ctx, struct scratch *s,
			struct dpflow_pipe *pipe, unsigned gen)
{
	const struct dpflow_plan_pipe *p = &pipe->plan;
	struct burst_list in = s->pipe_in[pipe->id];
	struct dpflow_ct_image *ct = pipe->images[0];
	struct walk_ct_dnat_table dt = {NULL, NULL, NULL};
	uint16_t n = 0;
	uint32_t hit = 0, invalid = 0, refused = 0;
	uint32_t tracked[DPFLOW_BURST_MAX];

	s->pipe_in[pipe->id].n = 0;
	if (p->ct_dnat) {
		const struct dpflow_pipe *t = ctx->pipes[p->ct_dnat_pipe];

		dt.pipe = &t->plan;
		dt.image = t->images[gen];
		dt.entries = t->plan_entries;
	}
	for (uint16_t i = 0; i < in.n; i++) {
		uint32_t idx = in.idx[i];

		if (!walk_ct_begin(p, dpflow_pkt_data(ctx->pool, idx),
				   dpflow_pool_meta(ctx->pool, idx),
				   &s->ct_pkts[n], &s->ct_user[n])) {
			refused++;
			if (DPFLOW_UNLIKELY(s->trace))
				trace_enter(s, idx, pipe,
					    DPFLOW_TRACE_CT_UNTRACKABLE, 0,
					    dpflow_pool_meta(ctx->pool, idx));
			forward(ctx, s, &p->miss, idx, true);
			continue;
		}
		tracked[n++] = idx;
	}
	/* the burst's packets in order, their buckets prefetched first;
	 * a reply's translation is read as soon as it is tracked, before a
	 * later packet of the burst may free its connection */
	if (p->ct_lookup_only) {
		for (uint16_t i = 0; i < n; i++) {
			dpflow_ct_lookup_val(
			    ct, &s->ct_pkts[i], s->now_ns, &s->ct_res[i],
			    p->ct_values ? &s->ct_vals[i] : NULL);
			if (p->ct_values)
				dpflow_ct_reply_targets_impl(ct, &s->ct_res[i],
							     &s->ct_vals[i]);
		}
	} else if (p->ct_values) {
		const struct dpflow_ct_value *init[DPFLOW_BURST_MAX];

		for (uint16_t i = 0; i < n; i++)
			init[i] = walk_ct_init(
			    p, &dt, dpflow_pool_meta(ctx->pool, tracked[i]),
			    &s->ct_pkts[i], &s->ct_init[i]);
		dpflow_ct_track_burst_replies(ct, s->ct_pkts, n, s->now_ns,
					      s->ct_user, init, s->ct_res,
					      s->ct_vals);
	} else if (n) {
		dpflow_ct_process_burst(ct, s->ct_pkts, n, s->now_ns,
					s->ct_user, s->ct_res);
	}
	for (uint16_t i = 0; i < n; i++) {
		uint32_t idx = tracked[i];
		struct dpflow_pkt_meta *m = dpflow_pool_meta(ctx->pool, idx);
		unsigned reason, outcome = walk_ct_end(p, m, &s->ct_res[i]);

		if (DPFLOW_UNLIKELY(s->trace))
			trace_enter_ct(s, idx, pipe, outcome, &s->ct_res[i], m);
		switch (outcome) {
		case WALK_CT_NOCONN:
			refused++;
			forward(ctx, s, &p->miss, idx, true);
			continue;
		case WALK_CT_INVALID:
			invalid++;
			forward(ctx, s, &p->miss, idx, true);
			continue;
		default:
			break;
		}
		hit++;
		if (p->ct_values) {
			reason = walk_ct_values(p, m,
						dpflow_pool_buf(ctx->pool, idx),
						&s->ct_res[i], &s->ct_vals[i]);
			if (reason) {
				drop_pkt(ctx, s, idx, reason);
				continue;
			}
		}
		/* its one all-zero entry's actions */
		if (DPFLOW_UNLIKELY(s->trace))
			trace_hit(s, idx, m->color, p->n_action_tmpls);
		reason = flow_actions_apply(ctx, pipe, 0, idx);
		if (reason) {
			drop_pkt(ctx, s, idx, reason);
			continue;
		}
		forward(ctx, s, &p->fwd, idx, false);
	}
	__atomic_fetch_add(&pipe->pkts, in.n, __ATOMIC_RELAXED);
	__atomic_fetch_add(&pipe->hits, hit, __ATOMIC_RELAXED);
	__atomic_fetch_add(&pipe->misses, in.n - hit, __ATOMIC_RELAXED);
	__atomic_fetch_add(&pipe->ct_invalid, invalid, __ATOMIC_RELAXED);
	__atomic_fetch_add(&pipe->ct_refused, refused, __ATOMIC_RELAXED);
}

static bool all_hit(const uint32_t *values, uint16_t n)
{
	uint32_t miss = 0;

	for (uint16_t i = 0; i < n; i++)
		miss |= values[i] == TABLE_MISS;
	return !miss;
}

/*
 * A pipe other than CT: every packet's key (walk_key_build()), one bulk
 * lookup through the table kind, then per packet the hit (walk_hit()),
 * the monitor, the entry's actions and the forwarding (walk_hit_fwd(),
 * walk_fwd()).
 */
static void run_pipe(struct dpflow_ctx *ctx, struct scratch *s,
		     struct dpflow_pipe *pipe, unsigned gen)
{
	const struct dpflow_plan_pipe *p = &pipe->plan;
	const void *image = pipe->images[gen];
	bool per_entry_fwd = p->fwd.kind == PLAN_FWD_PER_ENTRY;
	bool need_entry = p->n_action_tmpls || per_entry_fwd;
	uint32_t idxs[DPFLOW_BURST_MAX];
	uint16_t n = s->pipe_in[pipe->id].n;
	uint32_t hit = 0;

	memcpy(idxs, s->pipe_in[pipe->id].idx, n * sizeof(idxs[0]));
	s->pipe_in[pipe->id].n = 0;
	if (p->key_len == 0) {
		/* no per-entry fields (a match-all pipe): every packet has
		 * the same empty key, which tables read as zero words */
		memset(s->keys[0], 0, 8);
		if (n)
			pipe->kind->lookup(pipe, image, &s->keys[0][0], 1,
					   s->values);
		for (uint16_t i = 1; i < n; i++)
			s->values[i] = s->values[0];
	} else {
		for (uint16_t i = 0; i < n; i++) {
			struct dpflow_pkt_meta *m =
			    dpflow_pool_meta(ctx->pool, idxs[i]);
			const uint8_t *frame =
			    dpflow_pkt_data(ctx->pool, idxs[i]);

			if (i + 4 < n)
				DPFLOW_PREFETCH(
				    dpflow_pool_meta(ctx->pool, idxs[i + 4]));
			memset(s->keys[i], 0, walk_key_span(p));
			walk_key_build(p, frame, m, s->keys[i]);
		}
		pipe->kind->lookup(pipe, image, &s->keys[0][0], n, s->values);
	}
	/* a plain pipe (no constant fields, monitor or actions; one
	 * forwarding) whose packets all hit, as a match-all root's do:
	 * forwarded as one block */
	if (!p->n_const && !pipe->monitored && !p->n_action_tmpls &&
	    !per_entry_fwd && n && !s->trace && all_hit(s->values, n) &&
	    forward_all(s, &p->fwd, idxs, n)) {
		hit = n;
		goto counted;
	}
	/* start loading what the hits will read: their counter shard, their
	 * data-path state and, with actions or per-entry forwarding, the
	 * entry's plan (written out here: GCC drops a call to a function
	 * that only prefetches, taking it for a pure one) */
	for (uint16_t i = 0; i < n; i++) {
		const struct dpflow_plan_entry *e;
		uint32_t v = s->values[i];

		if (v == TABLE_MISS || v >= p->size)
			continue;
		if (p->counter)
			__builtin_prefetch(
			    &pipe->ctr[(size_t)s->worker * pipe->cfg.size + v],
			    1, 3);
		if (pipe->dp_used)
			DPFLOW_PREFETCH(&pipe->dp[v]);
		if (!need_entry)
			continue;
		e = &pipe->plan_entries[v];
		DPFLOW_PREFETCH(e);
		DPFLOW_PREFETCH((const uint8_t *)e + 64);
		DPFLOW_PREFETCH((const uint8_t *)e + 128);
	}

	for (uint16_t i = 0; i < n; i++) {
		uint32_t idx = idxs[i];
		struct dpflow_pkt_meta *m = dpflow_pool_meta(ctx->pool, idx);
		uint32_t v = walk_hit(p, s->values[i],
				      dpflow_pkt_data(ctx->pool, idx), m);
		const struct dpflow_plan_entry *e;
		struct dpflow_plan_fwd f;
		unsigned reason, color = DPFLOW_COLOR_GREEN;
		uint16_t why;

		if (v == WALK_MISS) {
			if (DPFLOW_UNLIKELY(s->trace))
				trace_enter(s, idx, pipe, DPFLOW_TRACE_MISS, 0,
					    m);
			forward(ctx, s, &p->miss, idx, true);
			continue;
		}
		hit++;
		e = &pipe->plan_entries[v];
		if (DPFLOW_UNLIKELY(s->trace))
			trace_enter(s, idx, pipe, DPFLOW_TRACE_HIT, v, m);
		if (pipe->monitored)
			color = monitor_hit(ctx, s, pipe, v, &pipe->dp[v], m);
		if (DPFLOW_UNLIKELY(s->trace))
			trace_hit(s, idx, color, p->n_action_tmpls);
		if (p->n_action_tmpls) {
			reason = flow_actions_apply(ctx, pipe, v, idx);
			if (reason) {
				drop_pkt(ctx, s, idx, reason);
				continue;
			}
		}
		if (!walk_hit_fwd(p, e, color, &f, &why)) {
			drop_pkt(ctx, s, idx, why);
			continue;
		}
		forward(ctx, s, &f, idx, false);
	}
counted:
	__atomic_fetch_add(&pipe->pkts, n, __ATOMIC_RELAXED);
	__atomic_fetch_add(&pipe->hits, hit, __ATOMIC_RELAXED);
	__atomic_fetch_add(&pipe->misses, n - hit, __ATOMIC_RELAXED);
}

/*
 * Hand @o to port @p on this thread's transmit queue (modulo the port's
 * queues). Several threads may map to one queue: each queue has a spin
 * lock, uncontended when every worker has a queue of its own.
 */
static uint16_t port_send(struct dpflow_ctx *ctx, struct scratch *s, unsigned p,
			  const struct burst_list *o)
{
	struct ctx_port *cp = &ctx->ports[p];
	uint16_t nq = dpflow_port_tx_queues(cp->port);
	uint16_t q = nq > 1 ? (uint16_t)(s->txq % nq) : 0;
	uint32_t *lock = &cp->tx_lock[q % CTX_TXQ_LOCKS].v;
	uint16_t sent;

	while (__atomic_exchange_n(lock, 1, __ATOMIC_ACQUIRE))
		while (__atomic_load_n(lock, __ATOMIC_RELAXED))
			__builtin_ia32_pause();
	sent = dpflow_port_tx_burst(cp->port, q, ctx->pool, o->idx, o->n);
	__atomic_store_n(lock, 0, __ATOMIC_RELEASE);
	return sent;
}

void dpflow_ctx_thread_tx_hook(struct dpflow_ctx *ctx, dpflow_tx_hook_fn fn,
			       void *arg)
{
	struct scratch *s = scratch_of(ctx);

	if (s) {
		s->tx_hook = fn;
		s->tx_hook_arg = arg;
	}
}

uint16_t dpflow_ctx_port_send(struct dpflow_ctx *ctx, uint16_t port,
			      uint32_t *idx, uint16_t n)
{
	struct scratch *s = scratch_of(ctx);
	struct burst_list *o;
	uint16_t sent = 0;

	if (!s || port >= ctx->n_ports || !n) {
		if (n)
			dpflow_pool_free_bulk(ctx->pool, idx, n);
		return 0;
	}
	o = &s->port_out[port];
	for (uint16_t at = 0, k; at < n; at = (uint16_t)(at + k)) {
		uint16_t got;

		k = (uint16_t)(n - at > DPFLOW_BURST_MAX ? DPFLOW_BURST_MAX
							 : n - at);
		memcpy(o->idx, idx + at, (size_t)k * sizeof(*idx));
		o->n = k;
		got = port_send(ctx, s, port, o);
		if (got < k) {
			__atomic_fetch_add(
			    &ctx->drops[DPFLOW_DROP_PORT_TX_FULL],
			    (uint64_t)(k - got), __ATOMIC_RELAXED);
			dpflow_pool_free_bulk(ctx->pool, o->idx + got,
					      (unsigned)(k - got));
		}
		sent = (uint16_t)(sent + got);
	}
	o->n = 0;
	return sent;
}

void dpflow_ctx_thread_tx_queue(struct dpflow_ctx *ctx, uint16_t queue)
{
	struct scratch *s = scratch_of(ctx);

	if (s)
		s->txq = queue;
}

uint16_t dpflow_ctx_process_burst(struct dpflow_ctx *ctx, uint16_t port,
				  uint32_t *idx, uint16_t n)
{
	return dpflow_ctx_process_burst_ex(ctx, port, idx, n, 0);
}

uint16_t dpflow_ctx_process_burst_ex(struct dpflow_ctx *ctx, uint16_t port,
				     uint32_t *idx, uint16_t n, unsigned flags)
{
	struct scratch *s = scratch_of(ctx);
	struct dpflow_pipe *root;
	struct burst_list *in; /* the root pipe's input */
	uint16_t n_in;
	unsigned gen;
	bool more;

	if (!s) {
		dpflow_pool_free_bulk(ctx->pool, idx, n);
		__atomic_fetch_add(&ctx->drops[DPFLOW_DROP_PORT_NO_BUFFER], n,
				   __ATOMIC_RELAXED);
		return n;
	}
	gen = __atomic_load_n(&ctx->gen, __ATOMIC_ACQUIRE);
	s->now_ns = dpflow_clock_ns();
	if (DPFLOW_UNLIKELY(
		__atomic_load_n(&ctx->trace_req, __ATOMIC_RELAXED) ==
		CTX_TRACE_ASKED))
		trace_take(ctx, s, port);
	if (DPFLOW_UNLIKELY(s->trace_arm_n))
		trace_start(s, idx, n, port);
	root = port < ctx->n_ports ? ctx->ports[port].root : NULL;
	if (!(flags & DPFLOW_PROCESS_PARSED))
		dpflow_parse_burst(ctx->pool, idx, n);
	in = root ? &s->pipe_in[root->id] : NULL;
	n_in = in ? in->n : 0;
	for (uint16_t i = 0; i < n; i++) {
		struct dpflow_pkt_meta *m = dpflow_pool_meta(ctx->pool, idx[i]);

		walk_pkt_start(m, port);
		if (m->drop)
			drop_pkt(ctx, s, idx[i], m->drop);
		else if (!in)
			drop_pkt(ctx, s, idx[i], DPFLOW_DROP_FLOW_NO_ROOT);
		else
			in->idx[n_in++] = idx[i];
	}
	if (in)
		in->n = n_in;
	/* the graph is acyclic and packets only move forward: run any pipe
	 * with packets waiting until none has */
	do {
		more = false;
		for (unsigned p = 0; p < ctx->n_pipes; p++)
			if (s->pipe_in[p].n) {
				if (ctx->pipes[p]->cfg.type == DPFLOW_PIPE_CT)
					run_ct_pipe(ctx, s, ctx->pipes[p], gen);
				else
					run_pipe(ctx, s, ctx->pipes[p], gen);
				more = true;
			}
	} while (more);

	for (unsigned p = 0; p < ctx->n_ports; p++) {
		struct burst_list *o = &s->port_out[p];
		uint16_t sent;

		if (!o->n)
			continue;
		if (s->tx_hook) {
			o->n = s->tx_hook(s->tx_hook_arg, (uint16_t)p,
					  ctx->pool, o->idx, o->n);
			if (!o->n)
				continue;
		}
		sent = port_send(ctx, s, p, o);
		if (sent < o->n) {
			__atomic_fetch_add(
			    &ctx->drops[DPFLOW_DROP_PORT_TX_FULL],
			    (uint64_t)(o->n - sent), __ATOMIC_RELAXED);
			dpflow_pool_free_bulk(ctx->pool, o->idx + sent,
					      (unsigned)(o->n - sent));
		}
		o->n = 0;
	}
	for (unsigned i = 0; i < s->n_handler_out; i++) {
		struct handler_out *h = &s->handler_out[i];

		ctx->plan_handlers[h->slot].fn(ctx->plan_handlers[h->slot].arg,
					       ctx->pool, h->b.idx, h->b.n);
	}
	s->n_handler_out = 0;
	for (unsigned q = 0; q < ctx->n_rss; q++) {
		struct burst_list *o = &s->rss_out[q];
		unsigned sent;

		if (!o->n)
			continue;
		sent = dpflow_ring_enqueue_burst(ctx->rss[q], o->idx, o->n);
		__atomic_fetch_add(&ctx->rss_count[q], sent, __ATOMIC_RELAXED);
		for (unsigned i = sent; i < o->n; i++)
			drop_pkt(ctx, s, o->idx[i], DPFLOW_DROP_FLOW_RSS_FULL);
		o->n = 0;
	}
	if (s->drop.n) {
		dpflow_pool_free_bulk(ctx->pool, s->drop.idx, s->drop.n);
		s->drop.n = 0;
	}
	if (DPFLOW_UNLIKELY(s->trace == ctx->trace_buf)) {
		/* a control thread's request: hand the traces over */
		ctx->trace_got = s->trace_n;
		__atomic_store_n(&ctx->trace_req, CTX_TRACE_DONE,
				 __ATOMIC_RELEASE);
	}
	s->trace = NULL;
	s->trace_n = 0;
	return n;
}

int dpflow_ctx_trace_next(struct dpflow_ctx *ctx, int port, unsigned n,
			  unsigned timeout_ms, struct dpflow_trace *out)
{
	unsigned st = CTX_TRACE_IDLE;
	uint64_t end = dpflow_clock_mono_ns() + (uint64_t)timeout_ms * 1000000;
	int got = 0;

	if (!n || n > DPFLOW_TRACE_PKTS_MAX || !out)
		return -EINVAL;
	if (__atomic_load_n(&ctx->trace_req, __ATOMIC_ACQUIRE) !=
	    CTX_TRACE_IDLE)
		return -EBUSY;
	ctx->trace_port = port;
	ctx->trace_n = n;
	ctx->trace_got = 0;
	if (!__atomic_compare_exchange_n(&ctx->trace_req, &st, CTX_TRACE_ASKED,
					 false, __ATOMIC_RELEASE,
					 __ATOMIC_RELAXED))
		return -EBUSY;
	for (;;) {
		st = __atomic_load_n(&ctx->trace_req, __ATOMIC_ACQUIRE);
		if (st == CTX_TRACE_DONE)
			break;
		/* not taken in time: withdraw it (a data thread that took
		 * it meanwhile finishes its burst: wait for that) */
		if (st == CTX_TRACE_ASKED && dpflow_clock_mono_ns() >= end &&
		    __atomic_compare_exchange_n(
			&ctx->trace_req, &st, CTX_TRACE_IDLE, false,
			__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			return 0;
		usleep(1000);
	}
	got = (int)ctx->trace_got;
	memcpy(out, ctx->trace_buf, (size_t)got * sizeof(*out));
	__atomic_store_n(&ctx->trace_req, CTX_TRACE_IDLE, __ATOMIC_RELEASE);
	return got;
}

void dpflow_ctx_thread_trace(struct dpflow_ctx *ctx,
			     struct dpflow_trace *traces, unsigned n)
{
	struct scratch *s = scratch_of(ctx);

	if (!s)
		return;
	s->trace_arm = n ? traces : NULL;
	s->trace_arm_n = traces && n < DPFLOW_TRACE_PKTS_MAX
			     ? n
			     : (traces ? DPFLOW_TRACE_PKTS_MAX : 0);
}

const char *dpflow_trace_to_name(unsigned to)
{
	static const char *const names[] = {"drop", "port", "pipe", "rss",
					    "handler"};

	return to < sizeof(names) / sizeof(names[0]) ? names[to] : "?";
}

const char *dpflow_trace_ct_state_name(unsigned state)
{
	const char *n = dpflow_ct_state_name(state);

	return n ? n : "?";
}

const char *dpflow_trace_ct_drop_name(unsigned drop)
{
	/* enum dpflow_ct_drop */
	static const char *const names[] = {
	    "none", "invalid", "full", "no_slot", "busy", "nat", "no_target"};

	return drop < sizeof(names) / sizeof(names[0]) ? names[drop] : "?";
}

const char *dpflow_trace_match_name(unsigned match)
{
	static const char *const names[] = {"miss",	     "hit",
					    "tracked",	     "untrackable",
					    "no-connection", "invalid"};

	return match < sizeof(names) / sizeof(names[0]) ? names[match] : "?";
}

/* Take the lowest free counter shard id, or the shared one. */
static unsigned worker_id_take(struct dpflow_ctx *ctx)
{
	uint64_t ids = __atomic_load_n(&ctx->worker_ids, __ATOMIC_RELAXED);

	for (;;) {
		uint64_t free_ids = ~ids & ((1ull << FLOW_WORKER_SHARED) - 1);
		unsigned w, hi;

		if (!free_ids)
			return FLOW_WORKER_SHARED;
		w = (unsigned)__builtin_ctzll(free_ids);
		if (!__atomic_compare_exchange_n(
			&ctx->worker_ids, &ids, ids | 1ull << w, false,
			__ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			continue;
		hi = __atomic_load_n(&ctx->workers_hi, __ATOMIC_RELAXED);
		while (hi < w + 1 && !__atomic_compare_exchange_n(
					 &ctx->workers_hi, &hi, w + 1, false,
					 __ATOMIC_RELEASE, __ATOMIC_RELAXED))
			;
		return w;
	}
}

void dpflow_ctx_thread_online(struct dpflow_ctx *ctx)
{
	struct scratch *s = scratch_of(ctx);

	if (s)
		s->worker = worker_id_take(ctx);
	rcu_register_thread();
}

void dpflow_ctx_thread_offline(struct dpflow_ctx *ctx)
{
	rcu_unregister_thread();
	if (thread_scratch && thread_scratch->worker != FLOW_WORKER_SHARED)
		__atomic_fetch_and(&ctx->worker_ids,
				   ~(1ull << thread_scratch->worker),
				   __ATOMIC_RELEASE);
	free(thread_scratch);
	thread_scratch = NULL;
}

void dpflow_ctx_quiescent(struct dpflow_ctx *ctx)
{
	(void)ctx;
	rcu_quiescent_state();
}

void dpflow_ctx_synchronize(struct dpflow_ctx *ctx)
{
	(void)ctx;
	synchronize_rcu();
}

DPFLOW_STATIC_ASSERT(DPFLOW_THREAD_SHARDS == FLOW_WORKERS_MAX,
		     "the public shard count is the engine's");

unsigned dpflow_ctx_thread_shard(struct dpflow_ctx *ctx)
{
	struct scratch *s = scratch_of(ctx);

	return s ? s->worker : FLOW_WORKER_SHARED;
}
