/*
 * `dpflow run CONFIG.yaml`: build the data plane a config describes, run
 * its ports until the inputs are exhausted (pcap), --duration passes or a
 * signal arrives, then print per-port, per-pipe and per-entry counters and
 * the drops by reason.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/config.h"
#include "dpflow/dpflow.h"
#include "dpflow/flow.h"

#include "cmds.h"

#define RUN_BURST 32

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static void print_counters(struct dpflow_ctx *ctx)
{
	uint64_t drops[DPFLOW_DROP__COUNT];

	printf("ports:\n");
	for (unsigned p = 0; p < dpflow_ctx_port_count(ctx); p++) {
		struct dpflow_port_stats s;

		dpflow_port_stats_get(dpflow_ctx_port(ctx, p), &s);
		printf("  %-12s rx %10lu pkts %12lu bytes   tx %10lu pkts "
		       "%12lu bytes\n",
		       dpflow_ctx_port_name(ctx, p), (unsigned long)s.rx_pkts,
		       (unsigned long)s.rx_bytes, (unsigned long)s.tx_pkts,
		       (unsigned long)s.tx_bytes);
	}
	printf("pipes:\n");
	for (unsigned i = 0; i < dpflow_ctx_pipe_count(ctx); i++) {
		struct dpflow_pipe *pipe = dpflow_ctx_pipe(ctx, i);
		const struct dpflow_pipe_cfg *cfg = dpflow_pipe_cfg(pipe);
		struct dpflow_pipe_stats s;

		dpflow_pipe_stats_get(pipe, &s);
		printf("  %-12s %-8s %10lu pkts %10lu hits %10lu misses   "
		       "%u entries\n",
		       dpflow_pipe_name(pipe), dpflow_pipe_type_name(cfg->type),
		       (unsigned long)s.pkts, (unsigned long)s.hits,
		       (unsigned long)s.misses, dpflow_pipe_entry_count(pipe));
		if (!cfg->monitor.counter)
			continue;
		for (uint32_t k = 0; k < dpflow_pipe_size(pipe); k++) {
			const struct dpflow_entry *e =
			    dpflow_pipe_entry(pipe, k);
			struct dpflow_counter c;

			if (!e)
				continue;
			dpflow_entry_counter(e, &c);
			printf("    entry %-6u %10lu pkts %12lu bytes\n", k,
			       (unsigned long)c.pkts, (unsigned long)c.bytes);
		}
	}
	dpflow_ctx_drops(ctx, drops);
	printf("drops:\n");
	for (unsigned d = 1; d < DPFLOW_DROP__COUNT; d++)
		if (drops[d])
			printf("  %-26s %10lu\n", dpflow_drop_name(d),
			       (unsigned long)drops[d]);
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: dpflow run CONFIG.yaml [--target cpu|gpu] "
		"[--duration S] [--pool N]\n"
		"\n"
		"Run the data plane described by CONFIG.yaml (docs/config.md)\n"
		"until its inputs are exhausted, S seconds pass, or SIGINT or\n"
		"SIGTERM arrives; then print the counters and exit 0.\n"
		"  --target T    cpu (default); gpu is not built yet\n"
		"  --duration S  stop after S seconds\n"
		"  --pool N      packet buffers (default 8192)\n");
}

int cmd_run(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"target", required_argument, NULL, 't'},
	    {"duration", required_argument, NULL, 'd'},
	    {"pool", required_argument, NULL, 'p'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct dpflow_config_opts copts = {0};
	struct dpflow_error err = {0};
	struct dpflow_ctx *ctx;
	double duration = 0;
	uint64_t deadline = 0;
	char *end;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			if (!strcmp(optarg, "gpu")) {
				fprintf(stderr,
					"dpflow run: --target gpu: the GPU "
					"target is not built yet\n");
				return 2;
			}
			if (strcmp(optarg, "cpu")) {
				fprintf(stderr,
					"dpflow run: --target '%s': expected "
					"cpu or gpu\n",
					optarg);
				return 2;
			}
			break;
		case 'd':
			duration = strtod(optarg, &end);
			if (*end || !(duration > 0)) {
				fprintf(stderr,
					"dpflow run: --duration '%s': expected "
					"seconds > 0\n",
					optarg);
				return 2;
			}
			break;
		case 'p': {
			unsigned long n = strtoul(optarg, &end, 10);

			if (*end || n < 64 || n > (1u << 24)) {
				fprintf(stderr,
					"dpflow run: --pool '%s': expected "
					"64..16777216\n",
					optarg);
				return 2;
			}
			copts.pool_slots = (uint32_t)n;
			break;
		}
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return 2;
	}
	ctx = dpflow_config_load(argv[optind], &copts, &err);
	if (!ctx) {
		fprintf(stderr, "dpflow run: %s\n", err.msg);
		return 1;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	if (duration > 0)
		deadline = dpflow_clock_ns() + (uint64_t)(duration * 1e9);

	dpflow_ctx_thread_online(ctx);
	while (!stop_requested) {
		bool all_done = true;

		for (unsigned p = 0; p < dpflow_ctx_port_count(ctx); p++) {
			struct dpflow_port *port = dpflow_ctx_port(ctx, p);
			uint32_t idx[RUN_BURST];
			uint16_t n;

			if (dpflow_port_rx_done(port))
				continue;
			all_done = false;
			n = dpflow_port_rx_burst(port, 0, idx, RUN_BURST);
			if (n)
				dpflow_ctx_process_burst(ctx, (uint16_t)p, idx,
							 n);
		}
		dpflow_ctx_quiescent(ctx);
		if (all_done || (deadline && dpflow_clock_ns() >= deadline))
			break;
	}
	dpflow_ctx_thread_offline(ctx);
	print_counters(ctx);
	dpflow_ctx_destroy(ctx);
	return 0;
}
