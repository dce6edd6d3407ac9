/*
 * `dpflow bench WORKLOAD`: run an in-memory benchmark (code in bench/):
 * dpflow's own workloads, then those apps register (dpflow/app.h, struct
 * dpflow_app_workload; a built-in name wins).
 */
#include <stdio.h>
#include <string.h>

#include "dpflow/app.h"
#include "dpflow/dpflow.h"

#include "bench.h"
#include "cmds.h"

struct workload {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
};

static const struct workload workloads[] = {
    {"parse", bench_parse, "header parser, plain and VXLAN 64-byte frames"},
    {"exact-1m", bench_exact,
     "exact-match table and BASIC pipe, 1M 5-tuple keys"},
    {"acl-10k", bench_acl, "ACL table and pipe, 10k 5-tuple rules"},
    {"ct", bench_ct, "connection tracking, 1M flows, against rte_hash"},
    {"runtime", bench_runtime,
     "worker runtime on a looping ring port against the engine, same pipe"},
    {"lpm-512k", bench_lpm,
     "LPM tables (512k IPv4, 64k IPv6 prefixes) and IPv4 pipe"},
    {"txtime", bench_txtime,
     "timed transmit: release error of the timing wheel, and its cost"},
    {"mem", bench_mem,
     "random table lookups of one or two lines: the memory ceiling"},
    {"maglev", bench_maglev,
     "Maglev pipe: a batch's rebuild and lookups, beside a hash pipe"},
};

void bench_report_header(void)
{
	printf("%-8s %-18s %-24s %9s %11s %8s %9s\n", "workload", "variant",
	       "implementation", "Mpps", "cycles/pkt", "Gbps", "ratio");
}

void bench_report(const struct bench_result *r)
{
	double mpps = (double)r->pkts / r->seconds / 1e6;
	double cpp = (double)r->tsc_cycles / (double)r->pkts;
	double gbps = (double)r->bytes * 8 / r->seconds / 1e9;
	double ratio = r->peer ? mpps / r->peer_mpps : 0;
	double tsc_hz = (double)dpflow_tsc_hz();

	printf("%-8s %-18s %-24s %9.2f %11.2f %8.2f", r->workload, r->variant,
	       "dpflow", mpps, cpp, gbps);
	if (r->peer)
		printf(" %8.2fx\n%-8s %-18s %-24s %9.2f %11.2f %8.2f %9s\n",
		       ratio, "", "", r->peer, r->peer_mpps,
		       tsc_hz / (r->peer_mpps * 1e6),
		       gbps * r->peer_mpps / mpps, "1.00x");
	else
		printf(" %9s\n", "-");
	printf("{\"workload\":\"%s\",\"variant\":\"%s\",\"target\":\"%s\","
	       "\"workers\":%u,\"mpps\":%.3f,\"cycles_per_pkt\":%.2f,"
	       "\"gbps\":%.3f,\"tsc_hz\":%lu,",
	       r->workload, r->variant, r->target ? r->target : "cpu",
	       r->workers ? r->workers : 1, mpps, cpp, gbps,
	       (unsigned long)dpflow_tsc_hz());
	if (r->peer)
		printf("\"peer\":\"%s\",\"peer_mpps\":%.3f,\"ratio\":%.3f}\n",
		       r->peer, r->peer_mpps, ratio);
	else
		printf("\"peer\":null,\"peer_mpps\":null,\"ratio\":null}\n");
	fflush(stdout);
}

/* "exact-1m, acl-10k and W": the workloads that take --target gpu. */
static void gpu_workloads(FILE *out)
{
	static const char *const own[] = {"exact-1m", "acl-10k"};
	const char *names[DPFLOW_ARRAY_SIZE(own) + DPFLOW_APPS_MAX];
	unsigned n = 0;

	for (size_t i = 0; i < DPFLOW_ARRAY_SIZE(own); i++)
		names[n++] = own[i];
	for (unsigned i = 0; i < dpflow_app_workload_count(); i++)
		if (dpflow_app_workload_at(i)->gpu)
			names[n++] = dpflow_app_workload_at(i)->name;
	for (unsigned i = 0; i < n; i++)
		fprintf(out, "%s%s",
			i == 0	    ? ""
			: i + 1 < n ? ", "
				    : " and ",
			names[i]);
}

static void usage(FILE *out)
{
	fprintf(out, "usage: dpflow bench WORKLOAD [OPTIONS]\n\nworkloads:\n");
	for (size_t i = 0; i < DPFLOW_ARRAY_SIZE(workloads); i++)
		fprintf(out, "  %-10s %s\n", workloads[i].name,
			workloads[i].summary);
	for (unsigned i = 0; i < dpflow_app_workload_count(); i++) {
		const struct dpflow_app_workload *w = dpflow_app_workload_at(i);

		fprintf(out, "  %-10s %s (app %s)\n", w->name,
			w->summary ? w->summary : "", w->app);
	}
	fprintf(out, "\nexact-1m, acl-10k and lpm-512k run two variants "
		     "(--variant table|pipe|all):\nthe table alone on packed "
		     "keys, and the pipe through the flow engine on\n64-byte "
		     "frames; each beside its DPDK peer in the same run.\n"
		     "'dpflow bench WORKLOAD --help' lists its options.\n\n");
	gpu_workloads(out);
	fprintf(out,
		" take --target gpu (first option): the pipe on the GPU\n"
		"target, kernel only, beside the CPU target in the same run; "
		"exit 77 when\nthere is no GPU or dpflow was built without "
		"the GPU target.\n"
		"e2e --target gpu: the exact-1m pipeline end to end "
		"through the CPU\nproxy and the queue-fed kernel, beside "
		"the CPU target (--help lists\nits options).\n");
}

#ifdef DPFLOW_HAVE_GPU
/* `dpflow bench WORKLOAD --target gpu`: @argv without --target, the
 * workload's name first. */
static int run_gpu(int argc, char **argv)
{
	const struct dpflow_app_workload *w;

	if (!strcmp(argv[0], "e2e"))
		return bench_gpu_e2e(argc, argv);
	w = dpflow_app_workload_find(argv[0]);
	if (!w)
		return bench_gpu(argv[0], argc, argv);
	if (!w->run_gpu) {
		fprintf(stderr,
			"dpflow bench: %s has no --target gpu variant\n",
			argv[0]);
		return 2;
	}
	return w->run_gpu(argc, argv);
}
#endif

int cmd_bench(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(stdout);
		return 0;
	}
	if (dpflow_clock_init()) {
		fprintf(stderr, "dpflow bench: cannot calibrate the clock\n");
		return 1;
	}
	if (argc >= 4 && !strcmp(argv[2], "--target") &&
	    strcmp(argv[3], "cpu")) {
		if (strcmp(argv[3], "gpu")) {
			fprintf(stderr,
				"dpflow bench: unknown target '%s' "
				"(cpu or gpu)\n",
				argv[3]);
			return 2;
		}
		/* argv[2..3] dropped: the workload's name then its options */
		argv[3] = argv[1];
#ifdef DPFLOW_HAVE_GPU
		return run_gpu(argc - 3, argv + 3);
#else
		printf("# dpflow bench %s --target gpu: this dpflow was built "
		       "without the GPU target (no nvcc): nothing measured "
		       "(exit 77, skipped)\n",
		       argv[1]);
		return 77;
#endif
	}
	if (argc >= 4 && !strcmp(argv[2], "--target")) {
		argv[3] = argv[1]; /* --target cpu: the workload as it is */
		argc -= 2;
		argv += 2;
	}
	for (size_t i = 0; i < DPFLOW_ARRAY_SIZE(workloads); i++)
		if (!strcmp(argv[1], workloads[i].name))
			return workloads[i].fn(argc - 1, argv + 1);
	if (dpflow_app_workload_find(argv[1]))
		return dpflow_app_workload_find(argv[1])->run(argc - 1,
							      argv + 1);
	fprintf(stderr, "dpflow bench: unknown workload '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
