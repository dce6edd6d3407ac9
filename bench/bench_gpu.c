/*
 * `dpflow bench exact-1m|acl-10k --target gpu`: the pipe variant's pipe on
 * the GPU target, kernel only (packets resident in device memory), beside
 * the same pipe on the CPU target (one core) in the same run, and the
 * host<->device and device copy bandwidths measured in the same run.
 *
 * The pipe is built as the CPU pipe variant builds it (exact-1m: a BASIC
 * pipe on the outer 5-tuple, 1M entries, a counter per entry; acl-10k:
 * an ACL pipe of 10k prefix/range rules), with the same generators and
 * seed. Two contexts: the CPU one is bench_common's harness (hits and
 * misses to a handler that keeps the packets); the GPU one forwards hits
 * to a port and drops misses (the GPU target has no handlers; the kernel
 * does the same work). Check before timing: one kernel run over the
 * --packets frames the CPU pass ran over gives the same sent/dropped
 * split as the CPU's hits/misses and, with counters, the same packet
 * count on every entry.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/dpflow.h"
#include "dpflow/gpu.h"
#include "dpflow/gpu_flow.h"

#include "bench.h"
#include "bench_common.h"

#define WL_EXACT 0
#define WL_ACL	 1

struct gpu_opts {
	int wl;
	uint32_t entries;  /* keys or rules */
	uint32_t packets;  /* distinct frames (the CPU pass, the check) */
	uint64_t resident; /* packets in device memory */
	unsigned runs, warmup, trials;
	double seconds;
	uint64_t seed;
	int gpu;
	uint32_t match_pct;
};

static uint64_t rng_state;

static uint64_t rng64(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint32_t rng_below(uint32_t n)
{
	return (uint32_t)(rng64() % n);
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* ---- exact-1m: bench_exact.c's keys ------------------------------------ */

static uint32_t scramble(uint32_t i)
{
	i ^= i >> 16;
	i *= 0x7feb352du;
	i ^= i >> 15;
	i *= 0x846ca68bu;
	i ^= i >> 16;
	return i;
}

static void exact_flow(uint32_t i, struct bench_flow *f)
{
	uint32_t src = scramble(i), dst = (uint32_t)rng64();

	put_be32(f->src, src);
	memcpy(f->dst, &dst, 4);
	f->sport = (uint16_t)(1024 + rng_below(64512));
	f->dport = (uint16_t)(rng_below(4) ? 443 : 53);
	f->proto = f->dport == 53 ? 17 : 6;
}

static void exact_entry(const struct bench_flow *f, struct dpflow_entry_cfg *e)
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

static const uint16_t exact_fields[] = {
    DPFLOW_FIELD_OUTER_IPV4_SRC, DPFLOW_FIELD_OUTER_IPV4_DST,
    DPFLOW_FIELD_OUTER_L4_SPORT, DPFLOW_FIELD_OUTER_L4_DPORT,
    DPFLOW_FIELD_OUTER_IP_PROTO};

/* ---- acl-10k: bench_acl.c's rules and packets --------------------------- */

#define SRC_NETS 256
#define DST_NETS 64

static uint32_t src_net[SRC_NETS], dst_net[DST_NETS];

static const uint16_t well_known[] = {
    20,	  21,	22,   23,   25,	  53,	67,   69,   80,	   110,
    119,  123,	137,  138,  139,  143,	161,  179,  389,   443,
    445,  465,	514,  587,  636,  993,	995,  1433, 1521,  1723,
    3306, 3389, 5060, 5432, 6379, 8080, 8443, 9000, 11211, 27017,
};

struct acl_rule {
	uint32_t src, dst;
	uint8_t src_len, dst_len, proto, proto_mask;
	uint16_t sport_lo, sport_hi, dport_lo, dport_hi;
};

static uint8_t prefix_len(const uint8_t pct[5])
{
	uint32_t p = rng_below(100), acc = 0;
	static const uint8_t lo[5] = {0, 8, 16, 24, 32},
			     span[5] = {1, 8, 8, 8, 1};

	for (int c = 0; c < 5; c++) {
		acc += pct[c];
		if (p < acc)
			return (uint8_t)(lo[c] + rng_below(span[c]));
	}
	return 32;
}

static uint32_t prefix_addr(uint32_t net, uint8_t len)
{
	uint32_t a = net | (uint32_t)(rng64() & 0xffff);

	return len ? a & ~(uint32_t)((1ull << (32 - len)) - 1) : 0;
}

static void make_rule(struct acl_rule *r)
{
	static const uint8_t src_pct[5] = {25, 10, 25, 20, 20};
	static const uint8_t dst_pct[5] = {10, 5, 20, 25, 40};
	uint32_t p = rng_below(100), x;

	memset(r, 0, sizeof(*r));
	do {
		r->src_len = prefix_len(src_pct);
		r->dst_len = prefix_len(dst_pct);
	} while (r->src_len < 8 && r->dst_len < 8);
	r->src = prefix_addr(src_net[rng_below(SRC_NETS)], r->src_len);
	r->dst = prefix_addr(dst_net[rng_below(DST_NETS)], r->dst_len);
	r->proto_mask = 0xff;
	r->proto = p < 45 ? 6 : p < 75 ? 17 : p < 80 ? 1 : 0;
	if (p >= 80)
		r->proto_mask = 0;
	p = rng_below(100);
	x = 1024 + rng_below(64512);
	r->sport_lo = 0;
	r->sport_hi = 65535;
	if (p >= 75 && p < 85) {
		r->sport_lo = 1024;
	} else if (p >= 85 && p < 95) {
		r->sport_lo = r->sport_hi = (uint16_t)x;
	} else if (p >= 95) {
		r->sport_lo = (uint16_t)x;
		r->sport_hi = (uint16_t)(x + rng_below(65536 - x));
	}
	p = rng_below(100);
	x = well_known[rng_below(DPFLOW_ARRAY_SIZE(well_known))];
	r->dport_lo = 0;
	r->dport_hi = 65535;
	if (p < 40) {
		r->dport_lo = r->dport_hi = (uint16_t)x;
	} else if (p < 55) {
		r->dport_lo = 1024;
	} else if (p < 70) {
		r->dport_lo = (uint16_t)x;
		r->dport_hi = (uint16_t)(x + 1 + rng_below(100));
	} else if (p < 75) {
		r->dport_hi = 1023;
	}
}

static uint32_t in_range(uint32_t lo, uint32_t hi)
{
	return lo + (uint32_t)(rng64() % ((uint64_t)hi - lo + 1));
}

static uint32_t in_prefix(uint32_t a, uint8_t len)
{
	uint32_t host = len ? (uint32_t)((1ull << (32 - len)) - 1) : UINT32_MAX;

	return (a & ~host) | ((uint32_t)rng64() & host);
}

/* A TCP or UDP flow, matching a random rule @match_pct percent of the time
 * (bench_acl.c's make_key, protocols other than TCP/UDP made TCP/UDP). */
static void acl_flow(const struct acl_rule *rules, uint32_t n,
		     uint32_t match_pct, struct bench_flow *f)
{
	static const uint8_t protos[] = {6, 6, 17, 17, 1, 47};
	uint32_t k[5];

	if (n && rng_below(100) < match_pct) {
		const struct acl_rule *r = &rules[rng_below(n)];

		k[0] = r->proto_mask ? r->proto : rng_below(256);
		k[1] = in_prefix(r->src, r->src_len);
		k[2] = in_prefix(r->dst, r->dst_len);
		k[3] = in_range(r->sport_lo, r->sport_hi);
		k[4] = in_range(r->dport_lo, r->dport_hi);
	} else {
		k[0] = protos[rng_below(DPFLOW_ARRAY_SIZE(protos))];
		k[1] = rng_below(2)
			   ? in_prefix(src_net[rng_below(SRC_NETS)], 16)
			   : (uint32_t)rng64();
		k[2] = rng_below(2)
			   ? in_prefix(dst_net[rng_below(DST_NETS)], 16)
			   : (uint32_t)rng64();
		k[3] = rng_below(65536);
		k[4] = rng_below(65536);
	}
	if (k[0] != 6 && k[0] != 17)
		k[0] = rng_below(2) ? 17 : 6;
	f->proto = (uint8_t)k[0];
	put_be32(f->src, k[1]);
	put_be32(f->dst, k[2]);
	f->sport = (uint16_t)k[3];
	f->dport = (uint16_t)k[4];
}

static void acl_entry(const struct acl_rule *r, uint32_t rank,
		      struct dpflow_entry_cfg *e)
{
	memset(e, 0, sizeof(*e));
	e->key[0] = r->proto;
	e->mask[0] = r->proto_mask;
	put_be32(e->key + 1, r->src);
	put_be32(e->mask + 1,
		 r->src_len ? ~(uint32_t)((1ull << (32 - r->src_len)) - 1) : 0);
	put_be32(e->key + 5, r->dst);
	put_be32(e->mask + 5,
		 r->dst_len ? ~(uint32_t)((1ull << (32 - r->dst_len)) - 1) : 0);
	e->range_set = 1u << 3 | 1u << 4;
	e->range_lo[3] = r->sport_lo;
	e->range_hi[3] = r->sport_hi;
	e->range_lo[4] = r->dport_lo;
	e->range_hi[4] = r->dport_hi;
	e->priority = rank;
}

static const uint16_t acl_fields[] = {
    DPFLOW_FIELD_OUTER_IP_PROTO, DPFLOW_FIELD_OUTER_IPV4_SRC,
    DPFLOW_FIELD_OUTER_IPV4_DST, DPFLOW_FIELD_OUTER_L4_SPORT,
    DPFLOW_FIELD_OUTER_L4_DPORT};

/* ---- the run ------------------------------------------------------------ */

/* The GPU side's context: the same pipe, hits to port 0, misses dropped. */
struct gpu_side {
	struct dpflow_ctx *ctx;
	struct dpflow_pipe *pipe;
	struct dpflow_queue *q;
};

static int gpu_side_create(struct gpu_side *s, const struct dpflow_pipe_cfg *c)
{
	struct dpflow_ctx_params cp = {.pool_slots = 1024, .data_room = 256};
	struct dpflow_error err = {0};
	struct dpflow_pipe_cfg pc = *c;
	int port;

	memset(s, 0, sizeof(*s));
	s->ctx = dpflow_ctx_create(&cp, &err);
	if (!s->ctx)
		goto fail;
	port = dpflow_ctx_port_add(s->ctx, "out", "ring:bench_gpu_out", &err);
	if (port < 0)
		goto fail;
	pc.root = true;
	pc.port = (uint16_t)port;
	pc.fwd.kind = DPFLOW_FWD_PORT;
	pc.fwd.port = (uint16_t)port;
	pc.miss_fwd.kind = DPFLOW_FWD_DROP;
	s->pipe = dpflow_pipe_create(s->ctx, &pc, &err);
	if (!s->pipe)
		goto fail;
	s->q = dpflow_queue_create(s->ctx, &err);
	if (!s->q)
		goto fail;
	return 0;
fail:
	fprintf(stderr, "bench gpu: GPU-side context: %s\n", err.msg);
	return -1;
}

static void gpu_side_destroy(struct gpu_side *s)
{
	if (s->q)
		dpflow_queue_destroy(s->q);
	dpflow_ctx_destroy(s->ctx);
	memset(s, 0, sizeof(*s));
}

struct run_state {
	struct bench_pipe bp;
	struct gpu_side gs;
	struct dpflow_entry **ce, **ge; /* entries: CPU side, GPU side */
	struct dpflow_gpu_flow *g;
	struct dpflow_gpu_flow_bench *b;
	uint8_t *hdrs;
	uint16_t *lens;
	uint64_t *cpu_pkts, *gpu_pkts;
};

static int add_both(struct run_state *st, uint32_t i,
		    const struct dpflow_entry_cfg *e)
{
	struct dpflow_error err = {0};

	st->ce[i] = dpflow_entry_add(st->bp.q, st->bp.pipe, e, NULL, &err);
	if (st->ce[i])
		st->ge[i] =
		    dpflow_entry_add(st->gs.q, st->gs.pipe, e, NULL, &err);
	if (st->ce[i] && st->ge[i])
		return 0;
	fprintf(stderr, "bench gpu: entry add: %s\n", err.msg);
	return -1;
}

static int commit_both(struct run_state *st)
{
	struct dpflow_error err = {0};

	if (!dpflow_entries_process(st->bp.q, NULL, &err) &&
	    !dpflow_entries_process(st->gs.q, NULL, &err))
		return 0;
	fprintf(stderr, "bench gpu: entries process: %s\n", err.msg);
	return -1;
}

static const char *wl_name(int wl)
{
	return wl == WL_EXACT ? "exact-1m" : "acl-10k";
}

/* The pipe on both sides, with the entries; the frames in the CPU pool. */
static int build(const struct gpu_opts *o, struct run_state *st)
{
	struct dpflow_pipe_cfg c;
	struct dpflow_entry_cfg e;
	struct bench_flow f;
	struct acl_rule *rules = NULL;
	uint64_t t0 = dpflow_tsc();
	int rc = -1;

	if (o->wl == WL_EXACT) {
		bench_pipe_cfg(&c, "exact", DPFLOW_PIPE_BASIC, o->entries,
			       exact_fields, DPFLOW_ARRAY_SIZE(exact_fields));
		c.monitor.counter = true;
	} else {
		bench_pipe_cfg(&c, "acl", DPFLOW_PIPE_ACL, o->entries,
			       acl_fields, DPFLOW_ARRAY_SIZE(acl_fields));
	}
	if (bench_pipe_create(&st->bp, &c, o->packets) ||
	    gpu_side_create(&st->gs, &c))
		return -1;
	rng_state = o->seed;
	if (o->wl == WL_EXACT) {
		struct bench_flow *flows =
		    malloc((size_t)o->entries * sizeof(*flows));

		if (!flows)
			goto oom;
		for (uint32_t i = 0; i < o->entries; i++) {
			exact_flow(i, &flows[i]);
			exact_entry(&flows[i], &e);
			if (add_both(st, i, &e))
				goto out_flows;
			if ((i + 1) % 65536 == 0 && commit_both(st))
				goto out_flows;
		}
		if (commit_both(st))
			goto out_flows;
		for (uint32_t i = 0; i < o->packets; i++)
			if (bench_pipe_set_pkt(
				&st->bp, i,
				&flows[(uint32_t)((rng64() >> 32) *
						      o->entries >>
						  32)]))
				goto out_flows;
		rc = 0;
	out_flows:
		free(flows);
	} else {
		rules = calloc(o->entries, sizeof(*rules));
		if (!rules)
			goto oom;
		for (int i = 0; i < SRC_NETS; i++)
			src_net[i] = (uint32_t)rng64() & 0xfff00000u;
		for (int i = 0; i < DST_NETS; i++)
			dst_net[i] = (uint32_t)rng64() & 0xffff0000u;
		for (uint32_t i = 0; i < o->entries; i++)
			make_rule(&rules[i]);
		for (uint32_t i = 0; i < o->entries; i++) {
			acl_entry(&rules[i], i, &e);
			if (add_both(st, i, &e))
				goto out_rules;
		}
		if (commit_both(st))
			goto out_rules;
		for (uint32_t i = 0; i < o->packets; i++) {
			acl_flow(rules, o->entries, o->match_pct, &f);
			if (bench_pipe_set_pkt(&st->bp, i, &f))
				goto out_rules;
		}
		rc = 0;
	out_rules:
		free(rules);
	}
	if (!rc)
		printf("# %s: %u entries on both sides and %u frames in %.1f "
		       "s\n",
		       wl_name(o->wl), o->entries, o->packets,
		       (double)(dpflow_tsc() - t0) / (double)dpflow_tsc_hz());
	return rc;
oom:
	fprintf(stderr, "bench gpu: out of memory\n");
	return -1;
}

/* The resident packets: the --packets frames first, then random picks. */
static int resident(const struct gpu_opts *o, struct run_state *st)
{
	const uint8_t **frames = calloc(o->packets, sizeof(*frames));
	uint16_t *fl = calloc(o->packets, sizeof(*fl));
	int rc = -1;

	st->hdrs = malloc(o->resident * 64);
	st->lens = malloc(o->resident * sizeof(*st->lens));
	if (!frames || !fl || !st->hdrs || !st->lens) {
		fprintf(stderr, "bench gpu: out of memory\n");
		goto out;
	}
	bench_pipe_frames(&st->bp, frames, fl);
	for (uint64_t i = 0; i < o->resident; i++) {
		uint32_t k =
		    i < o->packets ? (uint32_t)i : rng_below(o->packets);

		if (fl[k] > 64) {
			fprintf(stderr, "bench gpu: a %u-byte frame\n", fl[k]);
			goto out;
		}
		memset(st->hdrs + i * 64, 0, 64);
		memcpy(st->hdrs + i * 64, frames[k], fl[k]);
		st->lens[i] = fl[k];
	}
	rc = 0;
out:
	free(frames);
	free(fl);
	return rc;
}

/* The check: one kernel run over the frames of the CPU's first pass. */
static int check(const struct gpu_opts *o, struct run_state *st)
{
	struct dpflow_error err = {0};
	uint64_t hits, misses, sent, dropped, bad = 0;
	uint32_t n = o->packets - o->packets % st->bp.burst;

	bench_pipe_stats(&st->bp, &hits, &misses);
	if (o->wl == WL_EXACT) {
		if (dpflow_gpu_flow_bench_entry_pkts(
			st->g, (const struct dpflow_entry *const *)st->ge,
			o->entries, st->gpu_pkts, &err))
			goto fail;
	}
	if (dpflow_gpu_flow_bench_once(st->b, 0, 0, n, &sent, &dropped, &err))
		goto fail;
	if (o->wl == WL_EXACT) {
		if (dpflow_gpu_flow_bench_entry_pkts(
			st->g, (const struct dpflow_entry *const *)st->ge,
			o->entries, st->cpu_pkts, &err))
			goto fail;
		for (uint32_t i = 0; i < o->entries; i++) {
			struct dpflow_counter c;
			uint64_t gpu = st->cpu_pkts[i] - st->gpu_pkts[i];

			if (dpflow_entry_counter(st->ce[i], &c) ||
			    c.pkts != gpu)
				bad++;
		}
	}
	printf("# check, %u packets: CPU %llu hits %llu misses; GPU %llu "
	       "sent %llu dropped",
	       n, (unsigned long long)hits, (unsigned long long)misses,
	       (unsigned long long)sent, (unsigned long long)dropped);
	if (o->wl == WL_EXACT)
		printf("; per-entry packet counts differ on %llu of %u entries",
		       (unsigned long long)bad, o->entries);
	printf("\n");
	if (sent != hits || dropped != misses || bad) {
		fprintf(stderr, "bench gpu: the GPU's answers differ from the "
				"CPU's\n");
		return -1;
	}
	return 0;
fail:
	fprintf(stderr, "bench gpu: check: %s\n", err.msg);
	return -1;
}

static int run(const struct gpu_opts *o)
{
	struct run_state st;
	struct dpflow_error err = {0};
	struct bench_best best = {0};
	struct dpflow_gpu_flow_bench_stats gst;
	struct dpflow_gpu_copy_bw bw;
	struct bench_result r;
	char variant[48];
	int rc = 1;

	memset(&st, 0, sizeof(st));
	st.ce = calloc(o->entries, sizeof(*st.ce));
	st.ge = calloc(o->entries, sizeof(*st.ge));
	st.cpu_pkts = calloc(o->entries, sizeof(*st.cpu_pkts));
	st.gpu_pkts = calloc(o->entries, sizeof(*st.gpu_pkts));
	if (!st.ce || !st.ge || !st.cpu_pkts || !st.gpu_pkts) {
		fprintf(stderr, "bench gpu: out of memory\n");
		goto out;
	}
	if (build(o, &st))
		goto out;
	st.g = dpflow_gpu_flow_bind(st.gs.ctx, o->gpu, &err);
	if (!st.g) {
		fprintf(stderr, "bench gpu: bind: %s\n", err.msg);
		goto out;
	}
	if (resident(o, &st))
		goto out;
	st.b = dpflow_gpu_flow_bench_create(st.g, st.hdrs, 64, st.lens,
					    o->resident, &err);
	if (!st.b) {
		fprintf(stderr, "bench gpu: %s\n", err.msg);
		goto out;
	}
	/* the CPU target: answers first, then the timed trials */
	st.bp.burst = 64;
	bench_pipe_online(&st.bp);
	bench_pipe_pass(&st.bp);
	if (check(o, &st))
		goto out;
	bench_pair_run(bench_pipe_pass, &st.bp, NULL, NULL, o->trials,
		       o->seconds, &best, NULL);
	if (dpflow_gpu_flow_bench_time(st.b, 0, o->warmup, o->runs, &gst,
				       &err) ||
	    dpflow_gpu_copy_bw_measure(o->gpu, 256u << 20, 4ull << 30, &bw,
				       &err)) {
		fprintf(stderr, "bench gpu: %s\n", err.msg);
		goto out;
	}
	bench_report_header();
	snprintf(variant, sizeof(variant), "pipe-cpu-1core-%uk",
		 o->packets >> 10);
	bench_report_best(wl_name(o->wl), variant, &best, NULL, NULL, 64);
	memset(&r, 0, sizeof(r));
	r.workload = wl_name(o->wl);
	snprintf(variant, sizeof(variant), "gpu-kernel-%lluM",
		 (unsigned long long)(o->resident >> 20));
	r.variant = variant;
	r.target = "gpu";
	r.pkts = gst.pkts;
	r.seconds = gst.seconds;
	r.tsc_cycles = (uint64_t)(gst.seconds * (double)dpflow_tsc_hz());
	r.bytes = gst.pkts * 64;
	r.peer = "dpflow-cpu-1core";
	r.peer_mpps = bench_best_mpps(&best);
	bench_report(&r);
	printf("# gpu kernel: %u runs over %llu resident 64-byte packets, "
	       "grid %u x %u: %.3f G packets/s (fastest run %.3f G), "
	       "%.1f GB/s of packet bytes read, %.1f GB/s of verdicts and "
	       "paths written\n",
	       gst.runs, (unsigned long long)o->resident, gst.blocks,
	       gst.threads, gst.pps / 1e9,
	       gst.min_run_s > 0 ? (double)o->resident / gst.min_run_s / 1e9
				 : 0,
	       gst.hdr_bytes_per_s / 1e9, gst.out_bytes_per_s / 1e9);
	printf("# copies: host->device %.1f GB/s, device->host %.1f GB/s, "
	       "both at once %.1f GB/s (pinned, 256 MiB each way); device "
	       "to device %.0f GB/s copied (4 GiB; %.0f GB/s read + "
	       "written)\n",
	       bw.h2d / 1e9, bw.d2h / 1e9, bw.both / 1e9, bw.d2d / 1e9,
	       2 * bw.d2d / 1e9);
	printf("{\"workload\":\"%s\",\"target\":\"gpu\",\"copy_h2d_gbs\":%.2f,"
	       "\"copy_d2h_gbs\":%.2f,\"copy_both_gbs\":%.2f,"
	       "\"copy_d2d_gbs\":%.1f,\"kernel_hdr_gbs\":%.1f}\n",
	       wl_name(o->wl), bw.h2d / 1e9, bw.d2h / 1e9, bw.both / 1e9,
	       bw.d2d / 1e9, gst.hdr_bytes_per_s / 1e9);
	rc = 0;
out:
	dpflow_gpu_flow_bench_destroy(st.b);
	dpflow_gpu_flow_unbind(st.g);
	gpu_side_destroy(&st.gs);
	bench_pipe_destroy(&st.bp);
	free(st.ce);
	free(st.ge);
	free(st.cpu_pkts);
	free(st.gpu_pkts);
	free(st.hdrs);
	free(st.lens);
	return rc;
}

static void usage(FILE *out, const char *wl)
{
	fprintf(out,
		"usage: dpflow bench %s --target gpu [--gpu N] [--packets N]\n"
		"         [--resident N] [--runs N] [--warmup N] [--trials N]\n"
		"         [--seconds S] [--seed N]\n\n"
		"The pipe variant's pipe on the GPU target, kernel only: "
		"--resident\n64-byte packets (default 16M: 1 GiB) in device "
		"memory, the plan's kernel\nrun over all of them --runs times "
		"(default 20) after --warmup runs\n(default 3), timed with "
		"CUDA events, verdicts left in device memory;\nbeside the "
		"same pipe on the CPU target (one core, bursts of 64, best "
		"of\n--trials of --seconds) over the --packets distinct "
		"frames (default\n1048576) that the resident packets are "
		"drawn from, and the copy\nbandwidths of the same run. Exit 77 "
		"without a GPU.\n",
		wl);
}

int bench_gpu(const char *workload, int argc, char **argv)
{
	static const struct option opts[] = {
	    {"gpu", required_argument, NULL, 'g'},
	    {"packets", required_argument, NULL, 'P'},
	    {"resident", required_argument, NULL, 'R'},
	    {"runs", required_argument, NULL, 'n'},
	    {"warmup", required_argument, NULL, 'w'},
	    {"trials", required_argument, NULL, 't'},
	    {"seconds", required_argument, NULL, 's'},
	    {"seed", required_argument, NULL, 'r'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct gpu_opts o = {
	    .entries = 1000000,
	    .packets = 1u << 20,
	    .resident = 16u << 20,
	    .runs = 20,
	    .warmup = 3,
	    .trials = 5,
	    .seconds = 0.5,
	    .seed = 1,
	    .gpu = 0,
	    .match_pct = 50,
	};
	struct dpflow_error err = {0};
	char *end;
	int c, li = 0, n_gpu;

	if (!strcmp(workload, "exact-1m")) {
		o.wl = WL_EXACT;
	} else if (!strcmp(workload, "acl-10k")) {
		o.wl = WL_ACL;
		o.entries = 10000;
	} else {
		fprintf(stderr,
			"dpflow bench: --target gpu runs exact-1m and "
			"acl-10k, not '%s'\n",
			workload);
		return 2;
	}
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, &li)) != -1) {
		unsigned long long v;

		switch (c) {
		case 'h':
			usage(stdout, workload);
			return 0;
		case '?':
			usage(stderr, workload);
			return 2;
		case 's':
			o.seconds = strtod(optarg, &end);
			if (*end || !(o.seconds > 0 && o.seconds < 3600))
				goto bad;
			continue;
		default:
			break;
		}
		v = strtoull(optarg, &end, 10);
		if (*end || (v == 0 && c != 'g' && c != 'r' && c != 'w') ||
		    v > (1ull << 28))
			goto bad;
		if (c == 'g')
			o.gpu = (int)v;
		else if (c == 'P')
			o.packets = (uint32_t)v;
		else if (c == 'R')
			o.resident = v;
		else if (c == 'n')
			o.runs = (unsigned)v;
		else if (c == 'w')
			o.warmup = (unsigned)v;
		else if (c == 't')
			o.trials = (unsigned)v;
		else
			o.seed = v;
	}
	if (o.packets < 64 || o.resident < o.packets) {
		fprintf(stderr, "bench gpu: need 64 <= --packets <= "
				"--resident\n");
		return 2;
	}
	n_gpu = dpflow_gpu_count(&err);
	if (n_gpu <= o.gpu) {
		printf("# dpflow bench %s --target gpu: no GPU %d (%s): "
		       "nothing measured (exit 77, skipped)\n",
		       workload, o.gpu,
		       n_gpu <= 0 ? err.msg : "this machine has fewer GPUs");
		return 77;
	}
	return run(&o);
bad:
	fprintf(stderr, "bench gpu: bad value '%s' for --%s\n", optarg,
		opts[li].name);
	return 2;
}
