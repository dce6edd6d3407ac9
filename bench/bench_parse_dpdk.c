/*
 * The DPDK peer of `dpflow bench parse`: rte_net_get_ptype(), DPDK's
 * software packet-type parser, on the same frames copied into mbufs.
 * Built only when libdpdk is found. It does less than dpflow's parser (it
 * reports layer types and header lengths, not addresses, ports or VLAN ids,
 * and it does not open UDP tunnels such as VXLAN), so the ratio is
 * conservative for dpflow.
 */
#define _GNU_SOURCE /* pthread_{get,set}affinity_np */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_net.h>

#include "dpflow/dpflow.h"

#include "bench_dpdk.h"
#include "bench_dpdk_pkts.h"

int bench_dpdk_init(void)
{
	static int done, status;
	char *args[] = {
	    "dpflow-bench",   "--no-huge",   "--no-pci", "--no-shconf",
	    "--no-telemetry", "-l",	     "0",	 "-m",
	    "1024",	      "--log-level", "*:error"};

	cpu_set_t cpus;
	int have_cpus;

	if (done)
		return status;
	done = 1;
	/* EAL pins its main thread to lcore 0: give the caller's CPUs back
	 * (`taskset -c N dpflow bench ...` runs both sides on CPU N) */
	have_cpus =
	    !pthread_getaffinity_np(pthread_self(), sizeof(cpus), &cpus);
	status = rte_eal_init((int)DPFLOW_ARRAY_SIZE(args), args) < 0 ? -1 : 0;
	if (have_cpus)
		(void)pthread_setaffinity_np(pthread_self(), sizeof(cpus),
					     &cpus);
	if (status)
		fprintf(stderr, "bench: DPDK EAL init failed: %s\n",
			rte_strerror(rte_errno));
	return status;
}

int bench_dpdk_parse(const uint8_t *const *frames, const uint16_t *lens,
		     uint32_t n, double seconds, unsigned trials,
		     double *best_mpps)
{
	struct rte_mempool *mp;
	struct rte_mbuf **m;
	uint32_t sink = 0;

	*best_mpps = 0;
	if (bench_dpdk_init())
		return -1;
	mp = rte_pktmbuf_pool_create("bench_parse", n + 64, 0, 0,
				     RTE_MBUF_DEFAULT_BUF_SIZE,
				     (int)rte_socket_id());
	m = calloc(n, sizeof(*m));
	if (!mp || !m || rte_pktmbuf_alloc_bulk(mp, m, n)) {
		fprintf(stderr, "bench: DPDK mbuf pool: %s\n",
			rte_strerror(rte_errno));
		free(m);
		rte_mempool_free(mp);
		return -1;
	}
	for (uint32_t i = 0; i < n; i++) {
		char *d = rte_pktmbuf_append(m[i], lens[i]);
		memcpy(d, frames[i], lens[i]);
	}
	for (unsigned t = 0; t < trials; t++) {
		uint64_t budget = (uint64_t)(seconds * (double)dpflow_tsc_hz());
		uint64_t start = dpflow_tsc(), now = start, pkts = 0;

		while (now - start < budget) {
			for (uint32_t i = 0; i < n; i++) {
				struct rte_net_hdr_lens hl;
				if (i + 4 < n)
					rte_prefetch0(
					    rte_pktmbuf_mtod(m[i + 4], void *));
				sink += rte_net_get_ptype(m[i], &hl,
							  RTE_PTYPE_ALL_MASK);
				sink += hl.l4_len;
			}
			pkts += n;
			now = dpflow_tsc();
		}
		double mpps =
		    (double)pkts /
		    ((double)(now - start) / (double)dpflow_tsc_hz()) / 1e6;
		if (mpps > *best_mpps)
			*best_mpps = mpps;
	}
	/* keep the parse results alive */
	if (sink == 0x5a5a5a5a)
		printf(" ");
	rte_pktmbuf_free_bulk(m, n);
	free(m);
	rte_mempool_free(mp);
	return 0;
}

struct bench_dpdk_pkts *bench_dpdk_pkts_create(const uint8_t *const *frames,
					       const uint16_t *lens, uint32_t n)
{
	struct bench_dpdk_pkts *p;

	if (bench_dpdk_init())
		return NULL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->n = n;
	/* 256 bytes of data room, as dpflow's slots in this benchmark */
	p->mp = rte_pktmbuf_pool_create("bench_pkts", n + 64, 0, 0,
					RTE_PKTMBUF_HEADROOM + 256,
					(int)rte_socket_id());
	p->m = calloc(n, sizeof(*p->m));
	if (!p->mp || !p->m || rte_pktmbuf_alloc_bulk(p->mp, p->m, n)) {
		fprintf(stderr, "bench: DPDK mbuf pool: %s\n",
			rte_strerror(rte_errno));
		bench_dpdk_pkts_destroy(p);
		return NULL;
	}
	for (uint32_t i = 0; i < n; i++) {
		char *d = rte_pktmbuf_append(p->m[i], lens[i]);

		memcpy(d, frames[i], lens[i]);
	}
	return p;
}

void bench_dpdk_pkts_destroy(struct bench_dpdk_pkts *p)
{
	if (!p)
		return;
	if (p->m && p->m[0])
		rte_pktmbuf_free_bulk(p->m, p->n);
	free(p->m);
	rte_mempool_free(p->mp);
	free(p);
}

uint64_t bench_dpdk_pkts_parse(struct bench_dpdk_pkts *p, uint32_t burst,
			       uint64_t *sink)
{
	struct bench_dpdk_5tuple t[64];
	uint64_t s = 0;
	uint32_t i;

	for (i = 0; i + burst <= p->n; i += burst) {
		for (uint32_t j = 0; j < burst; j++) {
			bench_dpdk_prefetch(p->m, i + j, p->n);
			bench_dpdk_5tuple(p->m[i + j], &t[j]);
		}
		for (uint32_t j = 0; j < burst; j++)
			s += t[j].dst ^ t[j].sport;
	}
	*sink += s;
	return i;
}
