/*
 * In-memory benchmarks run by `dpflow bench WORKLOAD`. Each workload
 * prints a table and one JSON line per result (see ../shared BENCH.md):
 * {"workload":..,"target":"cpu","workers":1,"mpps":..,"cycles_per_pkt":..,
 *  "gbps":..,"peer":..,"peer_mpps":..,"ratio":..}
 */
#ifndef DPFLOW_BENCH_H
#define DPFLOW_BENCH_H

#include <stdint.h>

struct bench_result {
	const char *workload;
	const char *variant;
	uint64_t pkts;
	double seconds;
	uint64_t tsc_cycles;
	uint64_t bytes;
	const char *peer;   /* NULL: no in-process peer */
	const char *target; /* "gpu"; NULL: "cpu" */
	double peer_mpps;
	unsigned workers; /* threads that ran the packets; 0: 1 */
};

/* `dpflow bench parse`: header parsing, plain and VXLAN 64-byte packets. */
int bench_parse(int argc, char **argv);
/* `dpflow bench exact-1m`: exact-match table, 1M 5-tuple keys. */
int bench_exact(int argc, char **argv);
/* `dpflow bench acl-10k`: ACL table, 10k prefix/range rules. */
int bench_acl(int argc, char **argv);
/* `dpflow bench ct`: connection tracking, established and new flows. */
int bench_ct(int argc, char **argv);
/* `dpflow bench l4lb`: VIP, Maglev, CT and DNAT, 1M flows. */
int bench_l4lb(int argc, char **argv);
/* `dpflow bench runtime`: the worker runtime on a ring port against the
 * engine driven directly, exact-1m's pipe. */
int bench_runtime(int argc, char **argv);
/* `dpflow bench lpm-512k`: LPM table, 512k IPv4 prefixes. */
int bench_lpm(int argc, char **argv);
/* `dpflow bench txtime`: timed-transmit release error and cost. */
int bench_txtime(int argc, char **argv);
/* `dpflow bench mem`: random line lookups, the memory system's ceiling */
int bench_mem(int argc, char **argv);
/* `dpflow bench maglev`: a Maglev pipe's rebuild per batch and lookups,
 * beside a plain hash pipe. */
int bench_maglev(int argc, char **argv);

/* `dpflow bench exact-1m|acl-10k --target gpu` (bench_gpu.c, built with
 * the GPU target): @argv without --target. */
int bench_gpu(const char *workload, int argc, char **argv);
/* `dpflow bench e2e --target gpu` (bench_gpu_e2e.c): @argv without
 * --target, the workload's name first. */
int bench_gpu_e2e(int argc, char **argv);

/* `dpflow bench l4lb --target gpu` (bench_gpu_l4lb.c): @argv without
 * --target, the workload's name first. */
int bench_gpu_l4lb(int argc, char **argv);

/* Print one result as a table row and a JSON line. */
void bench_report(const struct bench_result *r);
void bench_report_header(void);

#endif /* DPFLOW_BENCH_H */
