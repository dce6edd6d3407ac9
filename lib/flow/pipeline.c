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

#include "dpflow/flow.h"
#include "dpflow/parse.h"

#include "flow/field_impl.h"
#include "flow/flow_actions.h"
#include "flow/flow_internal.h"

struct burst_list {
	uint16_t n;
	uint32_t idx[DPFLOW_BURST_MAX];
};

struct scratch {
	struct burst_list pipe_in[DPFLOW_PIPES_MAX];
	struct burst_list port_out[DPFLOW_PORTS_MAX];
	struct burst_list drop;
	uint8_t keys[DPFLOW_BURST_MAX][DPFLOW_KEY_MAX];
	uint32_t values[DPFLOW_BURST_MAX];
};

/* Each data thread's scratch: made when it goes online, freed offline. */
static __thread struct scratch *thread_scratch;

static struct scratch *scratch_of(struct dpflow_ctx *ctx)
{
	(void)ctx;
	if (!thread_scratch)
		thread_scratch = calloc(1, sizeof(*thread_scratch));
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

	for (unsigned i = 0; i < t->n; i++) {
		const struct dpflow_match_field *f = &t->f[i];
		unsigned bytes;
		uint8_t v[16];

		if (f->per_entry)
			continue;
		bytes = dpflow_field_bytes(f->field);
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
		unsigned bytes;

		if (!f->per_entry)
			continue;
		bytes = dpflow_field_bytes(f->field);
		dpflow_field_get(frame, m, f->field, k);
		for (unsigned b = 0; b < bytes; b++)
			k[b] &= f->mask[b];
	}
}

static void forward(struct dpflow_ctx *ctx, struct scratch *s,
		    const struct dpflow_fwd *f, uint32_t idx, bool miss)
{
	switch (f->kind) {
	case DPFLOW_FWD_PORT:
		s->port_out[f->port].idx[s->port_out[f->port].n++] = idx;
		break;
	case DPFLOW_FWD_PIPE:
		s->pipe_in[f->pipe->id].idx[s->pipe_in[f->pipe->id].n++] = idx;
		break;
	case DPFLOW_FWD_HANDLER:
		f->handler(f->handler_arg, ctx->pool, &idx, 1);
		break;
	default:
		drop_pkt(ctx, s, idx,
			 miss ? DPFLOW_DROP_FLOW_MISS_DROP
			      : DPFLOW_DROP_FLOW_FWD_DROP);
		break;
	}
}

static void run_pipe(struct dpflow_ctx *ctx, struct scratch *s,
		     struct dpflow_pipe *pipe, unsigned gen)
{
	struct burst_list in = s->pipe_in[pipe->id];
	const void *image = pipe->images[gen];
	uint32_t hit = 0;

	s->pipe_in[pipe->id].n = 0;
	for (uint16_t i = 0; i < in.n; i++) {
		struct dpflow_pkt_meta *m =
		    dpflow_pool_meta(ctx->pool, in.idx[i]);
		const uint8_t *frame = dpflow_pkt_data(ctx->pool, in.idx[i]);

		if (i + 4 < in.n)
			DPFLOW_PREFETCH(
			    dpflow_pool_meta(ctx->pool, in.idx[i + 4]));
		/* tables read keys in whole words: clear the padding too */
		memset(s->keys[i], 0, (pipe->key_len + 7u) & ~7u);
		build_key(pipe, frame, m, s->keys[i]);
	}
	pipe->kind->lookup(pipe, image, &s->keys[0][0], in.n, s->values);

	for (uint16_t i = 0; i < in.n; i++) {
		uint32_t idx = in.idx[i];
		struct dpflow_pkt_meta *m = dpflow_pool_meta(ctx->pool, idx);
		const struct dpflow_entry *e;
		const struct dpflow_fwd *f;
		unsigned reason;

		if (s->values[i] == TABLE_MISS ||
		    !const_fields_match(pipe, dpflow_pkt_data(ctx->pool, idx),
					m)) {
			forward(ctx, s, &pipe->cfg.miss_fwd, idx, true);
			continue;
		}
		hit++;
		e = &pipe->entries[s->values[i]];
		if (pipe->cfg.monitor.counter) {
			__atomic_fetch_add((uint64_t *)&e->pkts, 1,
					   __ATOMIC_RELAXED);
			__atomic_fetch_add((uint64_t *)&e->bytes, m->data_len,
					   __ATOMIC_RELAXED);
		}
		reason = flow_actions_apply(ctx, pipe, e, idx);
		if (reason) {
			drop_pkt(ctx, s, idx, reason);
			continue;
		}
		f = pipe->cfg.fwd.kind == DPFLOW_FWD_PER_ENTRY ? &e->cfg.fwd
							       : &pipe->cfg.fwd;
		forward(ctx, s, f, idx, false);
	}
	__atomic_fetch_add(&pipe->pkts, in.n, __ATOMIC_RELAXED);
	__atomic_fetch_add(&pipe->hits, hit, __ATOMIC_RELAXED);
	__atomic_fetch_add(&pipe->misses, in.n - hit, __ATOMIC_RELAXED);
}

uint16_t dpflow_ctx_process_burst(struct dpflow_ctx *ctx, uint16_t port,
				  uint32_t *idx, uint16_t n)
{
	struct scratch *s = scratch_of(ctx);
	struct dpflow_pipe *root;
	unsigned gen;
	bool more;

	if (!s) {
		dpflow_pool_free_bulk(ctx->pool, idx, n);
		__atomic_fetch_add(&ctx->drops[DPFLOW_DROP_PORT_NO_BUFFER], n,
				   __ATOMIC_RELAXED);
		return n;
	}
	gen = __atomic_load_n(&ctx->gen, __ATOMIC_ACQUIRE);
	root = port < ctx->n_ports ? ctx->ports[port].root : NULL;
	dpflow_parse_burst(ctx->pool, idx, n);
	for (uint16_t i = 0; i < n; i++) {
		struct dpflow_pkt_meta *m = dpflow_pool_meta(ctx->pool, idx[i]);

		m->port = port;
		if (m->drop)
			drop_pkt(ctx, s, idx[i], m->drop);
		else if (!root)
			drop_pkt(ctx, s, idx[i], DPFLOW_DROP_FLOW_NO_ROOT);
		else
			s->pipe_in[root->id].idx[s->pipe_in[root->id].n++] =
			    idx[i];
	}
	/* the graph is acyclic and packets only move forward: run any pipe
	 * with packets waiting until none has */
	do {
		more = false;
		for (unsigned p = 0; p < ctx->n_pipes; p++)
			if (s->pipe_in[p].n) {
				run_pipe(ctx, s, ctx->pipes[p], gen);
				more = true;
			}
	} while (more);

	for (unsigned p = 0; p < ctx->n_ports; p++) {
		struct burst_list *o = &s->port_out[p];
		uint16_t sent;

		if (!o->n)
			continue;
		sent = dpflow_port_tx_burst(ctx->ports[p].port, 0, ctx->pool,
					    o->idx, o->n);
		if (sent < o->n) {
			__atomic_fetch_add(
			    &ctx->drops[DPFLOW_DROP_PORT_TX_FULL],
			    (uint64_t)(o->n - sent), __ATOMIC_RELAXED);
			dpflow_pool_free_bulk(ctx->pool, o->idx + sent,
					      (unsigned)(o->n - sent));
		}
		o->n = 0;
	}
	if (s->drop.n) {
		dpflow_pool_free_bulk(ctx->pool, s->drop.idx, s->drop.n);
		s->drop.n = 0;
	}
	return n;
}

void dpflow_ctx_thread_online(struct dpflow_ctx *ctx)
{
	scratch_of(ctx);
	rcu_register_thread();
}

void dpflow_ctx_thread_offline(struct dpflow_ctx *ctx)
{
	(void)ctx;
	rcu_unregister_thread();
	free(thread_scratch);
	thread_scratch = NULL;
}

void dpflow_ctx_quiescent(struct dpflow_ctx *ctx)
{
	(void)ctx;
	rcu_quiescent_state();
}
