/*
 * `dpflow bench exact-1m|acl-10k --target gpu`: the pipe variant's pipe on
 * the GPU target, kernel only (packets resident in device memory), beside
 * the same pipe on the CPU target (one core) in the same run, and the
 * host<->device and device copy bandwidths measured in the same run.
 *
 * The pipe is built as the CPU pipe variant builds it (exact-1m: a BASIC
 * pipe on the outer 5-tuple, 1M entries, a counter per entry; acl-10k:
 * an ACL pipe of 10k prefix/range rules), with the same generators and
 * seed (acl-10k: bench_acl_gen.c). Two contexts: the CPU one is bench_common's
 * harness (hits and misses to a handler that keeps the packets); the GPU one
 * forwards hits to a port and drops misses (the GPU target has no handlers; the
 * kernel does the same work). Check before timing: one kernel run over the
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
#include "bench_acl_gen.h"
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

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* ---- exact-1m: bench_exact.c's keys ------------------------------------ */

static void exact_flow(struct bench_rng *rng, uint32_t i, struct bench_flow *f)
{
	uint32_t src = bench_scramble(i), dst = (uint32_t)bench_rng64(rng);

	put_be32(f->src, src);
	memcpy(f->dst, &dst, 4);
	f->sport = (uint16_t)(1024 + bench_rng_below(rng, 64512));
	f->dport = (uint16_t)(bench_rng_below(rng, 4) ? 443 : 53);
	f->proto = f->dport == 53 ? 17 : 6;
}

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
	/* the draws so far: the workload's entries and frames, then the
	 * resident packets' picks */
	struct bench_rng rng;
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
	struct bench_acl_gen *gen = NULL;
	struct bench_acl_rule *rules = NULL;
	uint64_t t0 = dpflow_tsc();
	int rc = -1;

	if (o->wl == WL_EXACT) {
		bench_pipe_cfg(&c, "exact", DPFLOW_PIPE_BASIC, o->entries,
			       bench_exact_fields,
			       DPFLOW_ARRAY_SIZE(bench_exact_fields));
		c.monitor.counter = true;
	} else {
		bench_pipe_cfg(&c, "acl", DPFLOW_PIPE_ACL, o->entries,
			       bench_acl_pipe_fields, BENCH_ACL_FIELDS);
	}
	if (bench_pipe_create(&st->bp, &c, o->packets) ||
	    gpu_side_create(&st->gs, &c))
		return -1;
	st->rng.state = o->seed;
	if (o->wl == WL_EXACT) {
		struct bench_flow *flows =
		    malloc((size_t)o->entries * sizeof(*flows));

		if (!flows)
			goto oom;
		for (uint32_t i = 0; i < o->entries; i++) {
			exact_flow(&st->rng, i, &flows[i]);
			bench_exact_entry(&flows[i], &e);
			if (add_both(st, i, &e))
				goto out_flows;
			if ((i + 1) % 65536 == 0 && commit_both(st))
				goto out_flows;
		}
		if (commit_both(st))
			goto out_flows;
		for (uint32_t i = 0; i < o->packets; i++) {
			uint64_t r = bench_rng64(&st->rng) >> 32;

			if (bench_pipe_set_pkt(
				&st->bp, i,
				&flows[(uint32_t)(r * o->entries >> 32)]))
				goto out_flows;
		}
		rc = 0;
	out_flows:
		free(flows);
	} else {
		gen = malloc(sizeof(*gen));
		rules = calloc(o->entries, sizeof(*rules));
		if (!gen || !rules) {
			free(gen);
			free(rules);
			goto oom;
		}
		/* bench_acl.c's rules, and its pipe variant's frames */
		bench_acl_gen_init(gen, o->seed);
		for (uint32_t i = 0; i < o->entries; i++)
			bench_acl_gen_rule(gen, &rules[i], i);
		for (uint32_t i = 0; i < o->entries; i++) {
			bench_acl_rule_entry(&rules[i], &e);
			if (add_both(st, i, &e))
				goto out_rules;
		}
		if (commit_both(st))
			goto out_rules;
		for (uint32_t i = 0; i < o->packets; i++) {
			uint32_t k[BENCH_ACL_FIELDS];

			bench_acl_gen_pkt_key(gen, rules, o->entries,
					      o->match_pct, k, &f);
			if (bench_pipe_set_pkt(&st->bp, i, &f))
				goto out_rules;
		}
		rc = 0;
	out_rules:
		st->rng = gen->rng;
		free(gen);
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
		uint32_t k = i < o->packets
				 ? (uint32_t)i
				 : bench_rng_below(&st->rng, o->packets);

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
	uint64_t hits, misses, sent, dropped, bad = 0, cpu_drops = 0;
	uint64_t drops[DPFLOW_DROP__COUNT];
	uint32_t n = o->packets - o->packets % st->bp.burst;

	bench_pipe_stats(&st->bp, &hits, &misses);
	/* frames the CPU's parser dropped never reached the pipe; the GPU
	 * counts them among its drops */
	dpflow_ctx_drops(st->bp.ctx, drops);
	for (unsigned d = 0; d < DPFLOW_DROP__COUNT; d++)
		cpu_drops += drops[d];
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
	printf("# check, %u packets: CPU %llu hits %llu misses %llu parse "
	       "drops; GPU %llu sent %llu dropped",
	       n, (unsigned long long)hits, (unsigned long long)misses,
	       (unsigned long long)cpu_drops, (unsigned long long)sent,
	       (unsigned long long)dropped);
	if (o->wl == WL_EXACT)
		printf("; per-entry packet counts differ on %llu of %u entries",
		       (unsigned long long)bad, o->entries);
	printf("\n");
	if (sent != hits || dropped != misses + cpu_drops || bad) {
		fprintf(stderr, "bench gpu: the GPU's answers differ from the "
				"CPU's\n");
		return -1;
	}
	if (cpu_drops) { /* the harness keeps reusing its slots */
		fprintf(stderr,
			"bench gpu: %llu of the frames are dropped by "
			"the parser: not timed\n",
			(unsigned long long)cpu_drops);
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
