/*
 * The DPDK peers of `dpflow bench lpm-512k`: rte_lpm (DIR-24-8) and
 * rte_lpm6, built from the same prefixes and looked up on the same
 * addresses with rte_lpm_lookup_bulk() and rte_lpm6_lookup_bulk_func().
 * Built only when libdpdk is found; EAL as bench_dpdk_init() sets it up
 * (no huge pages: DPDK's tables then live in 4 KiB pages, unless thp asks
 * the kernel for transparent huge pages on DPDK's memory first).
 * Control path and bench thread only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_memory.h>
/* rte_lpm_lookup_bulk_func() sizes a local array by its argument */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wvla"
#include <rte_lpm.h>
#include <rte_lpm6.h>
#pragma GCC diagnostic pop

#include "dpflow/dpflow.h"

#include "bench_dpdk.h"
#include "bench_dpdk_pkts.h"

struct bench_dpdk_lpm4 {
	struct rte_lpm *lpm;
};

struct bench_dpdk_lpm6 {
	struct rte_lpm6 *lpm;
};

static int advise_list(const struct rte_memseg_list *msl, void *arg)
{
	(void)arg;
	if (msl->base_va && msl->len)
		(void)madvise(msl->base_va, msl->len, MADV_HUGEPAGE);
	return 0;
}

static double now_s(void)
{
	return (double)dpflow_tsc() / (double)dpflow_tsc_hz();
}

struct bench_dpdk_lpm4 *bench_dpdk_lpm4_create(const uint32_t *addr,
					       const uint8_t *len,
					       const uint32_t *value,
					       uint32_t n, uint32_t tbl8s,
					       int thp, double *build_s)
{
	struct rte_lpm_config cfg;
	struct bench_dpdk_lpm4 *h;
	double t0;

	if (bench_dpdk_init())
		return NULL;
	if (thp)
		rte_memseg_list_walk(advise_list, NULL);
	h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	memset(&cfg, 0, sizeof(cfg));
	cfg.max_rules = n;
	cfg.number_tbl8s = tbl8s;
	h->lpm = rte_lpm_create("bench_lpm4", (int)rte_socket_id(), &cfg);
	if (!h->lpm) {
		fprintf(stderr, "bench: rte_lpm_create: %s\n",
			rte_strerror(rte_errno));
		free(h);
		return NULL;
	}
	t0 = now_s();
	for (uint32_t i = 0; i < n; i++) {
		int rc = rte_lpm_add(h->lpm, addr[i], len[i], value[i]);

		if (rc) {
			fprintf(stderr, "bench: rte_lpm_add #%u: %s\n", i,
				rte_strerror(-rc));
			bench_dpdk_lpm4_destroy(h);
			return NULL;
		}
	}
	*build_s = now_s() - t0;
	return h;
}

void bench_dpdk_lpm4_lookup(const struct bench_dpdk_lpm4 *h,
			    const uint32_t *keys, uint32_t n, uint32_t burst,
			    uint32_t *out)
{
	for (uint32_t b = 0; b + burst <= n; b += burst)
		rte_lpm_lookup_bulk(h->lpm, keys + b, out + b, burst);
}

uint32_t bench_dpdk_lpm4_value(uint32_t raw)
{
	return raw & RTE_LPM_LOOKUP_SUCCESS ? raw & 0x00ffffffu : UINT32_MAX;
}

void bench_dpdk_lpm4_destroy(struct bench_dpdk_lpm4 *h)
{
	if (!h)
		return;
	rte_lpm_free(h->lpm);
	free(h);
}

struct bench_dpdk_lpm6 *bench_dpdk_lpm6_create(const uint8_t *addr,
					       const uint8_t *len,
					       const uint32_t *value,
					       uint32_t n, uint32_t tbl8s,
					       int thp, double *build_s)
{
	struct rte_lpm6_config cfg;
	struct bench_dpdk_lpm6 *h;
	double t0;

	if (bench_dpdk_init())
		return NULL;
	if (thp)
		rte_memseg_list_walk(advise_list, NULL);
	h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	memset(&cfg, 0, sizeof(cfg));
	cfg.max_rules = n;
	cfg.number_tbl8s = tbl8s;
	h->lpm = rte_lpm6_create("bench_lpm6", (int)rte_socket_id(), &cfg);
	if (!h->lpm) {
		fprintf(stderr, "bench: rte_lpm6_create: %s\n",
			rte_strerror(rte_errno));
		free(h);
		return NULL;
	}
	t0 = now_s();
	for (uint32_t i = 0; i < n; i++) {
		int rc = rte_lpm6_add(h->lpm, addr + 16 * (size_t)i, len[i],
				      value[i]);

		if (rc) {
			fprintf(stderr, "bench: rte_lpm6_add #%u: %s\n", i,
				rte_strerror(-rc));
			bench_dpdk_lpm6_destroy(h);
			return NULL;
		}
	}
	*build_s = now_s() - t0;
	return h;
}

void bench_dpdk_lpm6_lookup(const struct bench_dpdk_lpm6 *h,
			    const uint8_t *keys, uint32_t n, uint32_t burst,
			    int32_t *out)
{
	uint8_t(*ips)[RTE_LPM6_IPV6_ADDR_SIZE] =
	    (uint8_t(*)[RTE_LPM6_IPV6_ADDR_SIZE])(uintptr_t)keys;

	for (uint32_t b = 0; b + burst <= n; b += burst)
		rte_lpm6_lookup_bulk_func(h->lpm, ips + b, out + b, burst);
}

void bench_dpdk_lpm6_destroy(struct bench_dpdk_lpm6 *h)
{
	if (!h)
		return;
	rte_lpm6_free(h->lpm);
	free(h);
}

/*
 * The pipe-level peer: each packet's IPv4 destination (host order, as
 * rte_lpm wants it), then one rte_lpm_lookup_bulk() per burst.
 */
uint64_t bench_dpdk_lpm4_pipe(const struct bench_dpdk_lpm4 *h,
			      struct bench_dpdk_pkts *p, uint32_t burst,
			      uint64_t *hits)
{
	uint32_t ips[64], out[64];
	uint64_t n_hits = 0;
	uint32_t i;

	for (i = 0; i + burst <= p->n; i += burst) {
		for (uint32_t j = 0; j < burst; j++) {
			struct bench_dpdk_5tuple t;

			bench_dpdk_prefetch(p->m, i + j, p->n);
			bench_dpdk_5tuple(p->m[i + j], &t);
			ips[j] = rte_be_to_cpu_32(t.dst);
		}
		rte_lpm_lookup_bulk(h->lpm, ips, out, burst);
		for (uint32_t j = 0; j < burst; j++)
			n_hits += (out[j] & RTE_LPM_LOOKUP_SUCCESS) != 0;
	}
	*hits += n_hits;
	return i;
}
