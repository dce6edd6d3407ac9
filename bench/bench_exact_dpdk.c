/*
 * The DPDK peer of `dpflow bench exact-1m`: rte_hash, DPDK's cuckoo hash,
 * with the hash function rte_hash_crc (the CRC32 instruction), no
 * extendable buckets (RTE_HASH_EXTRA_FLAGS_EXT_TABLE off), entries = the
 * number of keys, each key's data the key's index. Filled with
 * rte_hash_add_key_data() and looked up with rte_hash_lookup_bulk_data() on
 * the same key pointers as dpflow's table, in the same process.
 * Built only when libdpdk is found; EAL as bench_dpdk_init() sets it up
 * (no huge pages: rte_hash then lives in 4 KiB pages; madvise() on EAL's
 * memory does not give it transparent huge pages either, checked in
 * /proc/PID/smaps).
 * Bench thread only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_hash.h>
#include <rte_hash_crc.h>
#include <rte_lcore.h>

#include "dpflow/dpflow.h"

#include "bench_dpdk.h"
#include "bench_dpdk_pkts.h"

/* A per-entry counter of the pipe-level peer. */
struct entry_counter {
	uint64_t pkts;
	uint64_t bytes;
};

struct bench_dpdk_exact {
	struct rte_hash *h;
	uint32_t key_len;
	uint32_t n;
	struct entry_counter *cnt; /* the pipe-level peer's, n of them */
};

struct bench_dpdk_exact *
bench_dpdk_exact_create(const uint8_t *keys, uint32_t n, uint32_t entries,
			uint32_t key_len, unsigned trials, double *insert_s,
			uint32_t *failed)
{
	struct bench_dpdk_exact *e;

	*insert_s = 0;
	*failed = 0;
	if (bench_dpdk_init())
		return NULL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->key_len = key_len;
	e->n = n;
	for (unsigned t = 0; t < (trials ? trials : 1); t++) {
		struct rte_hash_parameters p = {
		    .name = "bench_exact",
		    .entries = entries > n ? entries : n,
		    .key_len = key_len,
		    .hash_func = rte_hash_crc,
		    .hash_func_init_val = 0,
		    .socket_id = (int)rte_socket_id(),
		    .extra_flag = 0,
		};
		uint64_t start, ticks;
		uint32_t bad = 0;

		if (e->h)
			rte_hash_free(e->h);
		e->h = rte_hash_create(&p);
		if (!e->h) {
			fprintf(stderr, "bench: rte_hash_create: %s\n",
				rte_strerror(rte_errno));
			free(e);
			return NULL;
		}
		start = dpflow_tsc();
		for (uint32_t i = 0; i < n; i++)
			bad += rte_hash_add_key_data(e->h,
						     keys + (size_t)i * key_len,
						     (void *)(uintptr_t)i) != 0;
		ticks = dpflow_tsc() - start;
		if (!*insert_s ||
		    (double)ticks / (double)dpflow_tsc_hz() < *insert_s)
			*insert_s = (double)ticks / (double)dpflow_tsc_hz();
		*failed = bad;
	}
	return e;
}

uint64_t bench_dpdk_exact_run(struct bench_dpdk_exact *e, const uint8_t *stream,
			      uint32_t n_stream, uint32_t burst, double seconds,
			      uint64_t *lookups, uint64_t *hits, uint64_t *sink)
{
	uint64_t budget = (uint64_t)(seconds * (double)dpflow_tsc_hz());
	uint64_t start = dpflow_tsc(), now = start, n = 0, h = 0, s = 0;
	const void *ptr[RTE_HASH_LOOKUP_BULK_MAX];
	void *data[RTE_HASH_LOOKUP_BULK_MAX];
	uint32_t pos = 0;

	while (now - start < budget) {
		for (unsigned r = 0; r < 16; r++) {
			uint64_t mask = 0;

			for (uint32_t j = 0; j < burst; j++)
				ptr[j] =
				    stream + (size_t)(pos + j) * e->key_len;
			rte_hash_lookup_bulk_data(e->h, ptr, burst, &mask,
						  data);
			h += (uint64_t)__builtin_popcountll(mask);
			for (uint32_t j = 0; j < burst; j++)
				s += (uintptr_t)data[j];
			pos += burst;
			if (pos + burst > n_stream)
				pos = 0;
		}
		n += 16 * (uint64_t)burst;
		now = dpflow_tsc();
	}
	*lookups = n;
	*hits = h;
	*sink += s;
	return now - start;
}

int bench_dpdk_exact_check(struct bench_dpdk_exact *e, const uint8_t *keys,
			   uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		void *d = NULL;

		if (rte_hash_lookup_data(e->h, keys + (size_t)i * e->key_len,
					 &d) < 0 ||
		    (uintptr_t)d != i)
			return -1;
	}
	return 0;
}

void bench_dpdk_exact_destroy(struct bench_dpdk_exact *e)
{
	if (!e)
		return;
	rte_hash_free(e->h);
	free(e->cnt);
	free(e);
}

/*
 * The pipe-level peer: a burst is parsed and its keys laid out as dpflow's
 * table benchmark lays them out (source, destination, ports, protocol,
 * three zero bytes; 16 bytes), looked up in one call, and each hit counts
 * a packet and its bytes on its entry (plain increments: one thread owns
 * the counters, as DPDK applications keep per-lcore counters).
 */
uint64_t bench_dpdk_exact_pipe(struct bench_dpdk_exact *e,
			       struct bench_dpdk_pkts *p, uint32_t burst,
			       uint64_t *hits)
{
	uint8_t keys[RTE_HASH_LOOKUP_BULK_MAX][16];
	const void *ptr[RTE_HASH_LOOKUP_BULK_MAX];
	void *data[RTE_HASH_LOOKUP_BULK_MAX];
	uint64_t h = 0;
	uint32_t i;

	if (!e->cnt) {
		e->cnt = calloc(e->n, sizeof(*e->cnt));
		if (!e->cnt)
			return 0;
	}
	for (uint32_t j = 0; j < RTE_HASH_LOOKUP_BULK_MAX; j++)
		ptr[j] = keys[j];
	for (i = 0; i + burst <= p->n; i += burst) {
		struct rte_mbuf **m = p->m + i;
		uint64_t mask = 0;

		for (uint32_t j = 0; j < burst; j++) {
			struct bench_dpdk_5tuple t;
			uint8_t *k = keys[j];

			bench_dpdk_prefetch(p->m, i + j, p->n);
			bench_dpdk_5tuple(m[j], &t);
			memcpy(k, &t.src, 4);
			memcpy(k + 4, &t.dst, 4);
			memcpy(k + 8, &t.sport, 2);
			memcpy(k + 10, &t.dport, 2);
			k[12] = t.proto;
			k[13] = k[14] = k[15] = 0;
		}
		rte_hash_lookup_bulk_data(e->h, ptr, burst, &mask, data);
		h += (uint64_t)__builtin_popcountll(mask);
		for (uint32_t j = 0; j < burst; j++)
			if (mask & (1ull << j)) {
				struct entry_counter *c =
				    &e->cnt[(uintptr_t)data[j]];

				c->pkts++;
				c->bytes += m[j]->pkt_len;
			}
	}
	*hits += h;
	return i;
}

uint64_t bench_dpdk_exact_counted(const struct bench_dpdk_exact *e)
{
	uint64_t n = 0;

	for (uint32_t i = 0; e->cnt && i < e->n; i++)
		n += e->cnt[i].pkts;
	return n;
}
