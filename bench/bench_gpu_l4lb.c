/*
 * `dpflow bench l4lb --target gpu`: the l4lb pipeline (bench_l4lb_pipe.h)
 * on the GPU target, kernel only (packets resident in device memory),
 * beside the same config on the CPU target (one core and every core) in
 * the same run.
 *
 * Check before timing: the CPU's first pass is checked against the
 * reference (bench_l4lb.c), then one kernel run over the same frames must
 * send every packet and count the same packets on every backend's dnat
 * entry as the CPU did. The kernel edits each packet (DNAT), so the
 * benchmark runs the staged kernel (gpu_flow.cu): a block's packets are
 * copied into shared memory and edited there, and every run sees the
 * packets as they arrived. The first run creates the connections on the
 * GPU; the timed runs are the steady state, as on the CPU.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dpflow/dpflow.h"
#include "dpflow/gpu.h"
#include "dpflow/gpu_flow.h"

#include "bench.h"
#include "bench_acl_gen.h"
#include "bench_l4lb.h"

struct gl_opts {
	struct l4lb_params p;
	uint32_t packets;
	uint64_t resident;
	unsigned runs, warmup, trials, workers;
	double seconds;
	int gpu;
};

struct gl_state {
	struct l4lb_cpu c;
	struct dpflow_ctx *ctx; /* the GPU side's */
	struct dpflow_gpu_flow *g;
	struct dpflow_gpu_flow_bench *b;
	uint8_t *hdrs;
	uint16_t *lens;
};

static int gpu_side(const struct gl_opts *o, struct gl_state *s)
{
	struct dpflow_config_opts co = {.pool_slots = 1024, .data_room = 128};
	struct dpflow_error err = {0};
	char *yaml = l4lb_yaml(&o->p, "{port: out}");

	if (!yaml)
		return -1;
	s->ctx = dpflow_config_load_string(yaml, "l4lb-gpu", &co, &err);
	free(yaml);
	if (s->ctx)
		s->g = dpflow_gpu_flow_bind(s->ctx, o->gpu, &err);
	if (!s->g) {
		fprintf(stderr, "bench l4lb gpu: %s\n", err.msg);
		return -1;
	}
	return 0;
}

/* The resident packets: the --packets frames first, then random picks. */
static int resident(const struct gl_opts *o, struct gl_state *s)
{
	struct bench_rng rng = {o->p.seed ^ 0x5eed};
	struct dpflow_error err = {0};

	s->hdrs = malloc(o->resident * 64);
	s->lens = malloc(o->resident * sizeof(*s->lens));
	if (!s->hdrs || !s->lens) {
		fprintf(stderr, "bench l4lb gpu: out of memory\n");
		return -1;
	}
	for (uint64_t i = 0; i < o->resident; i++) {
		uint32_t k = i < o->packets ? (uint32_t)i
					    : bench_rng_below(&rng, o->packets);

		memcpy(s->hdrs + i * 64, s->c.frame[k], 64);
		s->lens[i] = s->c.len[k];
	}
	s->b = dpflow_gpu_flow_bench_create(s->g, s->hdrs, 64, s->lens,
					    o->resident, &err);
	if (!s->b) {
		fprintf(stderr, "bench l4lb gpu: %s\n", err.msg);
		return -1;
	}
	return 0;
}

/* One kernel run over the CPU's checked frames: the same answers. */
static int check(const struct gl_opts *o, struct gl_state *s)
{
	struct dpflow_pipe *cd = dpflow_pipe_find(s->c.ctx, "dnat");
	struct dpflow_pipe *gd = dpflow_pipe_find(s->ctx, "dnat");
	uint32_t nb = dpflow_pipe_size(gd), n = o->packets - o->packets % 64;
	const struct dpflow_entry **ge = calloc(nb, sizeof(*ge));
	uint64_t *gpu = calloc(nb, sizeof(*gpu)), sent, dropped, bad = 0;
	uint64_t total = 0;
	struct dpflow_error err = {0};
	int rc = -1;

	if (!ge || !gpu) {
		fprintf(stderr, "bench l4lb gpu: out of memory\n");
		goto out;
	}
	/* the same config on both sides: the same entry in each slot */
	for (uint32_t k = 0; k < nb; k++)
		ge[k] = dpflow_pipe_entry(gd, k);
	while (nb && !ge[nb - 1])
		nb--;
	for (uint32_t k = 0; k < nb; k++)
		if (!ge[k]) {
			fprintf(stderr, "bench l4lb gpu: dnat slot %u free\n",
				k);
			goto out;
		}
	if (dpflow_gpu_flow_bench_once(s->b, 0, 0, n, &sent, &dropped, &err) ||
	    dpflow_gpu_flow_bench_entry_pkts(
		s->g, (const struct dpflow_entry *const *)ge, nb, gpu, &err)) {
		fprintf(stderr, "bench l4lb gpu: check: %s\n", err.msg);
		goto out;
	}
	for (uint32_t k = 0; k < nb; k++) {
		struct dpflow_counter c;

		if (dpflow_entry_counter(dpflow_pipe_entry(cd, k), &c) ||
		    c.pkts != gpu[k])
			bad++;
		total += gpu[k];
	}
	printf("# check, %u packets: GPU %llu sent %llu dropped, %llu counted "
	       "by the dnat pipe; per-backend packet counts differ from the "
	       "CPU's on %llu of %u backends\n",
	       n, (unsigned long long)sent, (unsigned long long)dropped,
	       (unsigned long long)total, (unsigned long long)bad, nb);
	if (sent != n || dropped || bad || total != n) {
		fprintf(stderr, "bench l4lb gpu: the GPU's answers differ "
				"from the CPU's\n");
		goto out;
	}
	rc = 0;
out:
	free(ge);
	free(gpu);
	return rc;
}

static void report_cpu(const char *variant, unsigned workers, double pps,
		       double cpp)
{
	printf("%-8s %-18s %-24s %9.2f %11.2f %8.2f %9s\n", "l4lb", variant,
	       "dpflow", pps / 1e6, cpp, pps * 64 * 8 / 1e9, "-");
	printf("{\"workload\":\"l4lb\",\"variant\":\"%s\",\"target\":\"cpu\","
	       "\"workers\":%u,\"mpps\":%.3f,\"cycles_per_pkt\":%.2f}\n",
	       variant, workers, pps / 1e6, cpp);
}

static int run(const struct gl_opts *o)
{
	struct gl_state s;
	struct dpflow_gpu_flow_bench_stats gst;
	struct dpflow_error err = {0};
	struct bench_result r;
	double pps1, ppsn = 0, cpp1, cppn = 0;
	char variant[48], variant_n[32];
	int rc = 1;

	memset(&s, 0, sizeof(s));
	if (l4lb_cpu_create(&s.c, &o->p, o->packets) || l4lb_cpu_check(&s.c) ||
	    gpu_side(o, &s) || resident(o, &s) || check(o, &s))
		goto out;
	pps1 = l4lb_cpu_run(&s.c, 1, o->seconds, o->trials, &cpp1);
	if (o->workers > 1)
		ppsn = l4lb_cpu_run(&s.c, o->workers, o->seconds, o->trials,
				    &cppn);
	if (dpflow_gpu_flow_bench_time(s.b, 0, o->warmup, o->runs, &gst,
				       &err)) {
		fprintf(stderr, "bench l4lb gpu: %s\n", err.msg);
		goto out;
	}
	bench_report_header();
	report_cpu("pipe-cpu-1core", 1, pps1, cpp1);
	snprintf(variant_n, sizeof(variant_n), "pipe-cpu-%ucores", o->workers);
	if (o->workers > 1)
		report_cpu(variant_n, o->workers, ppsn, cppn);
	memset(&r, 0, sizeof(r));
	r.workload = "l4lb";
	snprintf(variant, sizeof(variant), "gpu-kernel-%lluM",
		 (unsigned long long)(o->resident >> 20));
	r.variant = variant;
	r.target = "gpu";
	r.pkts = gst.pkts;
	r.seconds = gst.seconds;
	r.tsc_cycles = (uint64_t)(gst.seconds * (double)dpflow_tsc_hz());
	r.bytes = gst.pkts * 64;
	r.peer = "dpflow-cpu-1core";
	r.peer_mpps = pps1 / 1e6;
	bench_report(&r);
	printf(
	    "# gpu kernel: %u runs over %llu resident 64-byte packets "
	    "(%u flows, %u backends, Maglev %u slots), grid %u x %u: "
	    "%.3f G packets/s (fastest run %.3f G); %.1fx the CPU target "
	    "on %u cores\n",
	    gst.runs, (unsigned long long)o->resident, o->p.flows,
	    o->p.backends, o->p.maglev, gst.blocks, gst.threads, gst.pps / 1e9,
	    gst.min_run_s > 0 ? (double)o->resident / gst.min_run_s / 1e9 : 0,
	    ppsn > 0 ? gst.pps / ppsn : gst.pps / pps1,
	    o->workers > 1 ? o->workers : 1);
	rc = 0;
out:
	dpflow_gpu_flow_bench_destroy(s.b);
	dpflow_gpu_flow_unbind(s.g);
	dpflow_ctx_destroy(s.ctx);
	l4lb_cpu_destroy(&s.c);
	free(s.hdrs);
	free(s.lens);
	return rc;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: dpflow bench l4lb --target gpu [--gpu N] [--flows N]\n"
		"         [--backends N] [--maglev M] [--packets N] "
		"[--resident N]\n"
		"         [--runs N] [--warmup N] [--workers N] [--trials N]\n"
		"         [--seconds S] [--seed N]\n\n"
		"The l4lb pipeline on the GPU target, kernel only: "
		"--resident 64-byte\npackets (default 16M) in device memory "
		"drawn from --packets frames\n(default --flows, 1048576), "
		"the kernel run --runs times (default 20)\nafter --warmup "
		"runs (default 3), timed with CUDA events; beside the\nsame "
		"config on the CPU target, one worker and --workers (default: "
		"every\ncore), best of --trials (default 3) of --seconds "
		"(default 1). Exit 77\nwithout a GPU.\n");
}

int bench_gpu_l4lb(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"gpu", required_argument, NULL, 'g'},
	    {"flows", required_argument, NULL, 'f'},
	    {"backends", required_argument, NULL, 'b'},
	    {"maglev", required_argument, NULL, 'm'},
	    {"packets", required_argument, NULL, 'P'},
	    {"resident", required_argument, NULL, 'R'},
	    {"runs", required_argument, NULL, 'n'},
	    {"warmup", required_argument, NULL, 'W'},
	    {"workers", required_argument, NULL, 'w'},
	    {"trials", required_argument, NULL, 't'},
	    {"seconds", required_argument, NULL, 's'},
	    {"seed", required_argument, NULL, 'r'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	struct gl_opts o = {
	    .p = {1u << 20, 64, L4LB_MAGLEV_DEFAULT, 1, 64, 0},
	    .resident = 16u << 20,
	    .runs = 20,
	    .warmup = 3,
	    .trials = 3,
	    .workers = cores > 0 ? (unsigned)cores : 1,
	    .seconds = 1,
	};
	struct dpflow_error err = {0};
	char *end;
	int c, li = 0, n_gpu;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, &li)) != -1) {
		unsigned long long v;

		if (c == 'h') {
			usage(stdout);
			return 0;
		}
		if (c == '?') {
			usage(stderr);
			return 2;
		}
		if (c == 's') {
			o.seconds = strtod(optarg, &end);
			if (*end || !(o.seconds > 0 && o.seconds < 3600))
				goto bad;
			continue;
		}
		v = strtoull(optarg, &end, 10);
		if (*end || (v == 0 && c != 'g' && c != 'r' && c != 'W') ||
		    v > (1ull << 28))
			goto bad;
		switch (c) {
		case 'g':
			o.gpu = (int)v;
			break;
		case 'f':
			o.p.flows = (uint32_t)v;
			break;
		case 'b':
			o.p.backends = (uint32_t)v;
			break;
		case 'm':
			o.p.maglev = (uint32_t)v;
			break;
		case 'P':
			o.packets = (uint32_t)v;
			break;
		case 'R':
			o.resident = v;
			break;
		case 'n':
			o.runs = (unsigned)v;
			break;
		case 'W':
			o.warmup = (unsigned)v;
			break;
		case 'w':
			o.workers = (unsigned)v;
			break;
		case 't':
			o.trials = (unsigned)v;
			break;
		default:
			o.p.seed = v;
			break;
		}
	}
	if (!o.packets)
		o.packets = o.p.flows;
	if (o.packets < 64u * o.workers || o.resident < o.packets) {
		fprintf(stderr, "bench l4lb gpu: need 64 packets a worker and "
				"--packets <= --resident\n");
		return 2;
	}
	n_gpu = dpflow_gpu_count(&err);
	if (n_gpu <= o.gpu) {
		printf("# dpflow bench l4lb --target gpu: no GPU %d (%s): "
		       "nothing measured (exit 77, skipped)\n",
		       o.gpu,
		       n_gpu <= 0 ? err.msg : "this machine has fewer GPUs");
		return 77;
	}
	return run(&o);
bad:
	fprintf(stderr, "bench l4lb gpu: bad value '%s' for --%s\n", optarg,
		opts[li].name);
	return 2;
}
