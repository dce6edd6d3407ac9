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
#include <stdlib.h>
#include <string.h>
#include <urcu-qsbr.h>

#include "dpflow/clock.h"
#include "dpflow/flow.h"
#include "dpflow/parse.h"
#include "dpflow/ring.h"

#include "flow/ct.h"
#include "flow/field_impl.h"
#include "flow/flow_actions.h"
#include "flow/flow_internal.h"
#include "flow/hash_impl.h"
#include "flow/meter.h"

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
		dpflow_handler_fn fn;
		void *arg;
		struct burst_list b;
	} handler_out[HANDLER_LISTS];
	struct burst_list drop;
	uint8_t keys[DPFLOW_BURST_MAX][DPFLOW_KEY_MAX];
	uint32_t values[DPFLOW_BURST_MAX];
	struct dpflow_ct_pkt ct_pkts[DPFLOW_BURST_MAX];
	struct dpflow_ct_result ct_res[DPFLOW_BURST_MAX];
	uint32_t ct_user[DPFLOW_BURST_MAX];
	uint64_t now_ns; /* read once per burst */
	unsigned worker; /* counter shard (flow_internal.h) */
	uint16_t txq;	 /* transmit queue (dpflow_ctx_thread_tx_queue) */
	dpflow_tx_hook_fn tx_hook; /* dpflow_ctx_thread_tx_hook */
	void *tx_hook_arg;
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

static void drop_pkt(struct dpflow_ctx *ctx, struct scratch *s, uint32_t idx,
		     unsigned reason)
{
	dpflow_pool_meta(ctx->pool, idx)->drop = (uint8_t)reason;
	__atomic_fetch_add(&ctx->drops[reason], 1, __ATOMIC_RELAXED);
	s->drop.idx[s->drop.n++] = idx;
}

/* Constant fields of the template: does the packet carry those values? */
static bool const_fields_match(const struct dpflow_pipe *pipe,
			       const uint8_t *frame,
			       const struct dpflow_pkt_meta *m)
{
	const struct dpflow_match_tmpl *t = &pipe->cfg.match;

	if (!pipe->n_const)
		return true;
	for (unsigned i = 0; i < t->n; i++) {
		const struct dpflow_match_field *f = &t->f[i];
		unsigned bytes;
		uint8_t v[16];

		if (f->per_entry)
			continue;
		bytes = pipe->field_bytes[i];
		dpflow_field_get(frame, m, f->field, v);
		for (unsigned b = 0; b < bytes; b++)
			if ((v[b] ^ f->value[b]) & f->mask[b])
				return false;
	}
	return true;
}

/* Build the per-entry key of one packet (template masks applied). */
static void build_key(const struct dpflow_pipe *pipe, const uint8_t *frame,
		      const struct dpflow_pkt_meta *m, uint8_t *key)
{
	const struct dpflow_match_tmpl *t = &pipe->cfg.match;

	for (unsigned i = 0; i < t->n; i++) {
		const struct dpflow_match_field *f = &t->f[i];
		uint8_t *k = key + pipe->field_off[i];

		if (!f->per_entry)
			continue;
		dpflow_field_get(frame, m, f->field, k);
		if (pipe->field_full_mask[i])
			continue;
		for (unsigned b = 0; b < pipe->field_bytes[i]; b++)
			k[b] &= f->mask[b];
	}
}

/* The burst's list for handler @f, or NULL when every list is taken. */
static struct handler_out *handler_list(struct scratch *s,
					const struct dpflow_fwd *f)
{
	struct handler_out *h = NULL;

	for (unsigned i = 0; i < s->n_handler_out; i++)
		if (s->handler_out[i].fn == f->handler &&
		    s->handler_out[i].arg == f->handler_arg)
			h = &s->handler_out[i];
	if (!h && s->n_handler_out < HANDLER_LISTS) {
		h = &s->handler_out[s->n_handler_out++];
		h->fn = f->handler;
		h->arg = f->handler_arg;
		h->b.n = 0;
	}
	return h;
}

/*
 * The burst's list that forwarding @f appends to: a port's, a pipe's or
 * a handler's. NULL for the other kinds, and for a handler when the
 * burst's handler lists are all taken.
 */
static struct burst_list *fwd_list(struct scratch *s,
				   const struct dpflow_fwd *f)
{
	struct handler_out *h;

	switch (f->kind) {
	case DPFLOW_FWD_PORT:
		return &s->port_out[f->port];
	case DPFLOW_FWD_PIPE:
		return &s->pipe_in[f->pipe->id];
	case DPFLOW_FWD_HANDLER:
		h = handler_list(s, f);
		return h ? &h->b : NULL;
	default:
		return NULL;
	}
}

static void forward(struct dpflow_ctx *ctx, struct scratch *s,
		    const struct dpflow_fwd *f, uint32_t idx, bool miss)
{
	struct burst_list *b = fwd_list(s, f);

	if (b) {
		b->idx[b->n++] = idx;
		return;
	}
	switch (f->kind) {
	case DPFLOW_FWD_HANDLER:
		/* more handlers in this burst than lists: call it now */
		f->handler(f->handler_arg, ctx->pool, &idx, 1);
		break;
	case DPFLOW_FWD_RSS: {
		struct dpflow_pkt_meta *m = dpflow_pool_meta(ctx->pool, idx);
		uint16_t q;

		m->rss_hash = dpflow_rss_hash_hdr(
		    f->rss_inner && m->tun_type ? &m->inner : &m->outer);
		/* as a NIC's 128-entry redirection table filled round
		 * robin: the hash's low 7 bits pick the entry */
		q = (uint16_t)(f->rss_queue + (m->rss_hash & 127) % f->rss_n);
		m->queue = q;
		s->rss_out[q].idx[s->rss_out[q].n++] = idx;
		break;
	}
	default:
		drop_pkt(ctx, s, idx,
			 miss ? DPFLOW_DROP_FLOW_MISS_DROP
			      : DPFLOW_DROP_FLOW_FWD_DROP);
		break;
	}
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

/* Forwarding of a yellow or red packet; NULL: drop it (red default). */
static const struct dpflow_fwd *color_fwd(const struct dpflow_pipe *pipe,
					  const struct dpflow_fwd *hit,
					  unsigned color)
{
	const struct dpflow_color_fwd *c = &pipe->cfg.color_fwd;

	if (color == DPFLOW_COLOR_YELLOW)
		return c->yellow_set ? &c->yellow : hit;
	return c->red_set ? &c->red : NULL;
}

/*
 * Forward @n packets that all take @f, as a block: a port's, a pipe's or
 * a handler's list grows by one copy. False (nothing done) for the other
 * kinds, which go packet by packet.
 */
static bool forward_all(struct scratch *s, const struct dpflow_fwd *f,
			const uint32_t *idx, uint16_t n)
{
	struct burst_list *b = fwd_list(s, f);

	if (!b)
		return false;
	/* a burst has at most DPFLOW_BURST_MAX packets in all */
	memcpy(b->idx + b->n, idx, (size_t)n * sizeof(*idx));
	b->n = (uint16_t)(b->n + n);
	return true;
}

/*
 * A CT pipe: track each packet's connection (creating it unless
 * lookup-only), write meta.ct_state / ct_flags and the user register,
 * run the action template, forward; packets that get no connection or
 * break the state machine take the miss forwarding.
 */
static void run_ct_pipe(struct dpflow_ctx *ctx, struct scratch *s,
			struct dpflow_pipe *pipe)
{
	struct burst_list in = s->pipe_in[pipe->id];
	struct dpflow_ct_image *ct = pipe->images[0];
	const struct dpflow_ct_cfg *cc = &pipe->cfg.ct;
	uint16_t n = 0;
	uint32_t hit = 0, invalid = 0, refused = 0;
	uint32_t tracked[DPFLOW_BURST_MAX];

	s->pipe_in[pipe->id].n = 0;
	for (uint16_t i = 0; i < in.n; i++) {
		uint32_t idx = in.idx[i];
		struct dpflow_pkt_meta *m = dpflow_pool_meta(ctx->pool, idx);
		const struct dpflow_hdr *h =
		    cc->inner && m->tun_type ? &m->inner : &m->outer;

		m->ct_state = 0;
		m->ct_flags = 0;
		if (!const_fields_match(pipe, dpflow_pkt_data(ctx->pool, idx),
					m) ||
		    !dpflow_ct_pkt_from_hdr(h, &s->ct_pkts[n])) {
			refused++;
			forward(ctx, s, &pipe->cfg.miss_fwd, idx, true);
			continue;
		}
		s->ct_user[n] = cc->user ? m->reg[cc->user_reg] : 0;
		tracked[n++] = idx;
	}
	for (uint16_t i = 0; i < n; i++) {
		if (cc->lookup_only)
			dpflow_ct_lookup(ct, &s->ct_pkts[i], s->now_ns,
					 &s->ct_res[i]);
		else
			dpflow_ct_process(ct, &s->ct_pkts[i], s->now_ns,
					  s->ct_user[i], &s->ct_res[i]);
	}
	for (uint16_t i = 0; i < n; i++) {
		const struct dpflow_ct_result *r = &s->ct_res[i];
		uint32_t idx = tracked[i];
		struct dpflow_pkt_meta *m = dpflow_pool_meta(ctx->pool, idx);
		unsigned reason;

		if (r->conn == DPFLOW_TABLE_MISS ||
		    (r->flags & DPFLOW_CT_R_INVALID)) {
			if (r->conn == DPFLOW_TABLE_MISS)
				refused++;
			else
				invalid++;
			m->ct_state =
			    r->conn == DPFLOW_TABLE_MISS ? 0 : r->state;
			forward(ctx, s, &pipe->cfg.miss_fwd, idx, true);
			continue;
		}
		hit++;
		m->ct_state = r->state;
		m->ct_flags =
		    (uint8_t)((r->flags & DPFLOW_CT_R_NEW ? DPFLOW_META_CT_NEW
							  : 0) |
			      (r->dir == DPFLOW_CT_DIR_REPLY
				   ? DPFLOW_META_CT_REPLY
				   : 0) |
			      (r->flags & DPFLOW_CT_R_IGNORED
				   ? DPFLOW_META_CT_IGNORED
				   : 0) |
			      (r->flags & DPFLOW_CT_R_REOPEN
				   ? DPFLOW_META_CT_REOPEN
				   : 0));
		if (cc->user)
			m->reg[cc->user_reg] = r->user;
		reason = flow_actions_apply(ctx, pipe, &pipe->ct_entry, idx);
		if (reason) {
			drop_pkt(ctx, s, idx, reason);
			continue;
		}
		forward(ctx, s, &pipe->cfg.fwd, idx, false);
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

static void run_pipe(struct dpflow_ctx *ctx, struct scratch *s,
		     struct dpflow_pipe *pipe, unsigned gen)
{
	const void *image = pipe->images[gen];
	bool per_entry_fwd = pipe->cfg.fwd.kind == DPFLOW_FWD_PER_ENTRY;
	bool need_entry = pipe->cfg.n_action_tmpls || per_entry_fwd;
	uint32_t idxs[DPFLOW_BURST_MAX];
	uint16_t n = s->pipe_in[pipe->id].n;
	uint32_t hit = 0;

	memcpy(idxs, s->pipe_in[pipe->id].idx, n * sizeof(idxs[0]));
	s->pipe_in[pipe->id].n = 0;
	if (pipe->key_len == 0) {
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
			/* tables read keys in whole words: clear the padding
			 * too */
			memset(s->keys[i], 0, (pipe->key_len + 7u) & ~7u);
			build_key(pipe, frame, m, s->keys[i]);
		}
		pipe->kind->lookup(pipe, image, &s->keys[0][0], n, s->values);
	}
	/* a plain pipe (no constant fields, monitor or actions; one
	 * forwarding) whose packets all hit, as a match-all root's do:
	 * forwarded as one block */
	if (!pipe->n_const && !pipe->monitored && !pipe->cfg.n_action_tmpls &&
	    !per_entry_fwd && n && all_hit(s->values, n) &&
	    forward_all(s, &pipe->cfg.fwd, idxs, n)) {
		hit = n;
		goto counted;
	}
	/* start loading what the hits will read: their counter shard, their
	 * data-path state and, with actions or per-entry forwarding, the
	 * entry's values (written out here: GCC drops a call to a function
	 * that only prefetches, taking it for a pure one) */
	for (uint16_t i = 0; i < n; i++) {
		const struct dpflow_entry *e;
		uint32_t v = s->values[i];

		if (v == TABLE_MISS)
			continue;
		if (pipe->cfg.monitor.counter)
			__builtin_prefetch(
			    &pipe->ctr[(size_t)s->worker * pipe->cfg.size + v],
			    1, 3);
		if (pipe->dp_used)
			DPFLOW_PREFETCH(&pipe->dp[v]);
		if (!need_entry)
			continue;
		e = &pipe->entries[v];
		DPFLOW_PREFETCH(&e->cfg.action_tmpl);
		DPFLOW_PREFETCH(&e->cfg.action_value[0]);
		DPFLOW_PREFETCH(&e->cfg.fwd);
	}

	for (uint16_t i = 0; i < n; i++) {
		uint32_t idx = idxs[i], v = s->values[i];
		struct dpflow_pkt_meta *m = dpflow_pool_meta(ctx->pool, idx);
		const struct dpflow_entry *e;
		const struct dpflow_fwd *f;
		unsigned reason, color = DPFLOW_COLOR_GREEN;

		if (v == TABLE_MISS ||
		    !const_fields_match(pipe, dpflow_pkt_data(ctx->pool, idx),
					m)) {
			forward(ctx, s, &pipe->cfg.miss_fwd, idx, true);
			continue;
		}
		hit++;
		e = &pipe->entries[v];
		if (pipe->monitored)
			color = monitor_hit(ctx, s, pipe, v, &pipe->dp[v], m);
		if (pipe->cfg.n_action_tmpls) {
			reason = flow_actions_apply(ctx, pipe, e, idx);
			if (reason) {
				drop_pkt(ctx, s, idx, reason);
				continue;
			}
		}
		f = per_entry_fwd ? &e->cfg.fwd : &pipe->cfg.fwd;
		if (color != DPFLOW_COLOR_GREEN) {
			f = color_fwd(pipe, f, color);
			if (!f || (color == DPFLOW_COLOR_RED &&
				   f->kind == DPFLOW_FWD_DROP)) {
				drop_pkt(ctx, s, idx,
					 DPFLOW_DROP_FLOW_METER_RED);
				continue;
			}
		}
		forward(ctx, s, f, idx, false);
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
	root = port < ctx->n_ports ? ctx->ports[port].root : NULL;
	if (!(flags & DPFLOW_PROCESS_PARSED))
		dpflow_parse_burst(ctx->pool, idx, n);
	in = root ? &s->pipe_in[root->id] : NULL;
	n_in = in ? in->n : 0;
	for (uint16_t i = 0; i < n; i++) {
		struct dpflow_pkt_meta *m = dpflow_pool_meta(ctx->pool, idx[i]);

		/* pipeline state starts clean for every packet */
		m->port = port;
		m->queue = 0;
		m->rss_hash = 0;
		m->color = DPFLOW_COLOR_GREEN;
		m->ct_state = 0;
		m->ct_flags = 0;
		memset(m->reg, 0, sizeof(m->reg));
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
					run_ct_pipe(ctx, s, ctx->pipes[p]);
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

		h->fn(h->arg, ctx->pool, h->b.idx, h->b.n);
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
	return n;
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
