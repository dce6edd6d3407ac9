/*
 * Helpers shared by the benchmarks (bench_common.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/dpflow.h"
#include "dpflow/gen.h"
#include "dpflow/parse.h"

#include "bench.h"
#include "bench_common.h"

int bench_variant_parse(const char *s)
{
	if (!strcmp(s, "table"))
		return BENCH_VARIANT_TABLE;
	if (!strcmp(s, "pipe"))
		return BENCH_VARIANT_PIPE;
	if (!strcmp(s, "all"))
		return BENCH_VARIANT_ALL;
	return -1;
}

void bench_best_keep(struct bench_best *b, uint64_t pkts, uint64_t ticks)
{
	if (!pkts)
		return;
	if (!b->pkts ||
	    (double)ticks / (double)pkts < (double)b->ticks / (double)b->pkts) {
		b->pkts = pkts;
		b->ticks = ticks;
	}
}

double bench_best_mpps(const struct bench_best *b)
{
	if (!b->ticks)
		return 0;
	return (double)b->pkts / ((double)b->ticks / (double)dpflow_tsc_hz()) /
	       1e6;
}

uint64_t bench_timed(bench_pass_fn fn, void *arg, double seconds,
		     uint64_t *pkts)
{
	uint64_t budget = (uint64_t)(seconds * (double)dpflow_tsc_hz());
	uint64_t start = dpflow_tsc(), now = start, n = 0;

	while (now - start < budget) {
		n += fn(arg);
		now = dpflow_tsc();
	}
	*pkts = n;
	return now - start;
}

void bench_pair_run(bench_pass_fn ours, void *ours_arg, bench_pass_fn peer,
		    void *peer_arg, unsigned trials, double seconds,
		    struct bench_best *ob, struct bench_best *pb)
{
	for (unsigned t = 0; t < trials; t++) {
		uint64_t n, ticks;

		ticks = bench_timed(ours, ours_arg, seconds, &n);
		bench_best_keep(ob, n, ticks);
		if (!peer)
			continue;
		ticks = bench_timed(peer, peer_arg, seconds, &n);
		bench_best_keep(pb, n, ticks);
	}
}

double bench_best_cpp(const struct bench_best *b)
{
	return b->pkts ? (double)b->ticks / (double)b->pkts : 0;
}

void bench_report_best(const char *workload, const char *variant,
		       const struct bench_best *ob, const char *peer,
		       const struct bench_best *pb, uint32_t pkt_bytes)
{
	struct bench_result r;

	memset(&r, 0, sizeof(r));
	r.workload = workload;
	r.variant = variant;
	r.pkts = ob->pkts;
	r.tsc_cycles = ob->ticks;
	r.seconds = (double)ob->ticks / (double)dpflow_tsc_hz();
	r.bytes = ob->pkts * pkt_bytes;
	if (peer && pb && pb->pkts) {
		r.peer = peer;
		r.peer_mpps = bench_best_mpps(pb);
	}
	bench_report(&r);
}

void bench_pipe_cfg(struct dpflow_pipe_cfg *c, const char *name, uint8_t type,
		    uint32_t size, const uint16_t *fields, unsigned n)
{
	memset(c, 0, sizeof(*c));
	c->name = name;
	c->type = type;
	c->size = size;
	c->match.n = (uint8_t)n;
	for (unsigned i = 0; i < n; i++) {
		c->match.f[i].field = fields[i];
		c->match.f[i].per_entry = true;
		/* the pipe applies template masks as given */
		memset(c->match.f[i].mask, 0xff, sizeof(c->match.f[i].mask));
	}
}

/* The pipe's forwarding: keep the packets where they are. */
static void keep_pkts(void *arg, struct dpflow_pool *pool, const uint32_t *idx,
		      uint16_t n)
{
	(void)arg;
	(void)pool;
	(void)idx;
	(void)n;
}

int bench_pipe_create(struct bench_pipe *bp, const struct dpflow_pipe_cfg *cfg,
		      uint32_t n_pkts)
{
	struct dpflow_ctx_params cp = {.pool_slots = n_pkts + 64,
				       .data_room = 256};
	struct dpflow_error err = {0};
	struct dpflow_pipe_cfg c = *cfg;
	int port;

	memset(bp, 0, sizeof(*bp));
	bp->burst = 64;
	bp->ctx = dpflow_ctx_create(&cp, &err);
	if (!bp->ctx)
		goto fail;
	bp->pool = dpflow_ctx_pool(bp->ctx);
	port = dpflow_ctx_port_add(bp->ctx, "in", "ring:bench_in", &err);
	if (port < 0)
		goto fail;
	bp->port = (uint16_t)port;
	c.root = true;
	c.port = bp->port;
	c.fwd.kind = DPFLOW_FWD_HANDLER;
	c.fwd.handler = keep_pkts;
	c.miss_fwd = c.fwd;
	bp->pipe = dpflow_pipe_create(bp->ctx, &c, &err);
	if (!bp->pipe)
		goto fail;
	bp->q = dpflow_queue_create(bp->ctx, &err);
	if (!bp->q)
		goto fail;
	if (n_pkts) {
		bp->idx = malloc((size_t)n_pkts * sizeof(*bp->idx));
		if (!bp->idx ||
		    dpflow_pool_alloc_bulk(bp->pool, bp->idx, n_pkts)) {
			snprintf(err.msg, sizeof(err.msg),
				 "no room for %u packets", n_pkts);
			goto fail;
		}
		bp->n_pkts = n_pkts;
	}
	return 0;
fail:
	fprintf(stderr, "bench: pipe '%s': %s\n", cfg->name, err.msg);
	bench_pipe_destroy(bp);
	return -1;
}

void bench_pipe_destroy(struct bench_pipe *bp)
{
	if (bp->online)
		dpflow_ctx_thread_offline(bp->ctx);
	if (bp->q)
		dpflow_queue_destroy(bp->q);
	dpflow_ctx_destroy(bp->ctx);
	free(bp->idx);
	memset(bp, 0, sizeof(*bp));
}

int bench_pipe_add(struct bench_pipe *bp, const struct dpflow_entry_cfg *c)
{
	struct dpflow_error err = {0};

	if (dpflow_entry_add(bp->q, bp->pipe, c, NULL, &err))
		return 0;
	fprintf(stderr, "bench: entry add: %s\n", err.msg);
	return -1;
}

int bench_pipe_commit(struct bench_pipe *bp)
{
	struct dpflow_error err = {0};

	if (!dpflow_entries_process(bp->q, NULL, &err))
		return 0;
	fprintf(stderr, "bench: entries process: %s\n", err.msg);
	return -1;
}

int bench_pipe_set_pkt(struct bench_pipe *bp, uint32_t i,
		       const struct bench_flow *f)
{
	static const uint8_t smac[6] = {0x02, 0, 0, 0, 0, 1},
			     dmac[6] = {0x02, 0, 0, 0, 0, 2};
	struct dpflow_gen_spec s;
	uint32_t len;

	memset(&s, 0, sizeof(s));
	s.has_eth = true;
	memcpy(s.src_mac, smac, 6);
	memcpy(s.dst_mac, dmac, 6);
	s.outer.l3_type = DPFLOW_L3_IPV4;
	s.outer.l4_type = f->proto == 17 ? DPFLOW_L4_UDP : DPFLOW_L4_TCP;
	memcpy(s.outer.src, f->src, 4);
	memcpy(s.outer.dst, f->dst, 4);
	s.outer.sport = f->sport;
	s.outer.dport = f->dport;
	s.outer.ttl = 64;
	memset(s.outer.ipv6_ext, 0xff, sizeof(s.outer.ipv6_ext));
	s.frame_len = 64;
	len = dpflow_gen_build(&s, dpflow_pkt_data(bp->pool, bp->idx[i]),
			       bp->pool->data_room);
	if (!len) {
		fprintf(stderr, "bench: cannot build packet %u\n", i);
		return -1;
	}
	dpflow_pool_meta(bp->pool, bp->idx[i])->data_len = (uint16_t)len;
	return 0;
}

void bench_pipe_frames(const struct bench_pipe *bp, const uint8_t **frames,
		       uint16_t *lens)
{
	for (uint32_t i = 0; i < bp->n_pkts; i++) {
		frames[i] = dpflow_pkt_data(bp->pool, bp->idx[i]);
		lens[i] = dpflow_pool_meta(bp->pool, bp->idx[i])->data_len;
	}
}

void bench_pipe_online(struct bench_pipe *bp)
{
	if (bp->online)
		return;
	dpflow_ctx_thread_online(bp->ctx);
	bp->online = true;
}

uint64_t bench_pipe_pass(void *arg)
{
	struct bench_pipe *bp = (struct bench_pipe *)arg;
	uint32_t b = bp->burst, i;

	for (i = 0; i + b <= bp->n_pkts; i += b) {
		dpflow_ctx_process_burst(bp->ctx, bp->port, bp->idx + i,
					 (uint16_t)b);
		dpflow_ctx_quiescent(bp->ctx);
	}
	return i;
}

uint64_t bench_pipe_parse_pass(void *arg)
{
	struct bench_pipe *bp = (struct bench_pipe *)arg;
	uint32_t b = bp->burst, i;

	for (i = 0; i + b <= bp->n_pkts; i += b)
		dpflow_parse_burst(bp->pool, bp->idx + i, (uint16_t)b);
	return i;
}

void bench_pipe_stats(const struct bench_pipe *bp, uint64_t *hits,
		      uint64_t *misses)
{
	struct dpflow_pipe_stats s;

	dpflow_pipe_stats_get(bp->pipe, &s);
	*hits = s.hits;
	*misses = s.misses;
}

uint32_t bench_scramble(uint32_t i)
{
	i ^= i >> 16;
	i *= 0x7feb352du;
	i ^= i >> 15;
	i *= 0x846ca68bu;
	i ^= i >> 16;
	return i;
}

const uint16_t bench_exact_fields[5] = {
    DPFLOW_FIELD_OUTER_IPV4_SRC, DPFLOW_FIELD_OUTER_IPV4_DST,
    DPFLOW_FIELD_OUTER_L4_SPORT, DPFLOW_FIELD_OUTER_L4_DPORT,
    DPFLOW_FIELD_OUTER_IP_PROTO};

void bench_exact_entry(const struct bench_flow *f, struct dpflow_entry_cfg *e)
{
	memset(e, 0, sizeof(*e));
	memcpy(e->key, f->src, 4);
	memcpy(e->key + 4, f->dst, 4);
	e->key[8] = (uint8_t)(f->sport >> 8);
	e->key[9] = (uint8_t)f->sport;
	e->key[10] = (uint8_t)(f->dport >> 8);
	e->key[11] = (uint8_t)f->dport;
	e->key[12] = f->proto;
}
