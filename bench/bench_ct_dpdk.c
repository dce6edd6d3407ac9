/*
 * The DPDK peer of `dpflow bench ct`: rte_hash, DPDK's cuckoo hash (hash
 * function rte_hash_crc, no extendable buckets, entries = the number of
 * flows), on the same 40-byte canonical connection keys as dpflow's table,
 * prebuilt by the caller. rte_hash_add_key_data() fills it (the create
 * figure), rte_hash_lookup_bulk_data() runs over the same packet stream
 * (the established figure). DPDK has no connection tracker: this is the
 * lookup one would be built on, without key ordering, state machine or
 * concurrent creation. Built only with libdpdk; EAL as bench_dpdk_init()
 * sets it up. Bench thread only.
 */
#include <stdio.h>
#include <stdlib.h>

#include <rte_errno.h>
#include <rte_hash.h>
#include <rte_hash_crc.h>
#include <rte_lcore.h>

#include "dpflow/dpflow.h"

#include "bench_dpdk.h"

struct bench_dpdk_ct {
	struct rte_hash *h;
	uint32_t key_len;
};

struct bench_dpdk_ct *bench_dpdk_ct_create(const uint8_t *keys, uint32_t n,
					   uint32_t key_len, unsigned trials,
					   double *insert_s)
{
	struct bench_dpdk_ct *c;

	*insert_s = 0;
	if (bench_dpdk_init())
		return NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->key_len = key_len;
	for (unsigned t = 0; t < (trials ? trials : 1); t++) {
		struct rte_hash_parameters p = {
		    .name = "bench_ct",
		    .entries = n,
		    .key_len = key_len,
		    .hash_func = rte_hash_crc,
		    .hash_func_init_val = 0,
		    .socket_id = (int)rte_socket_id(),
		    .extra_flag = 0,
		};
		uint64_t start, ticks;
		double s;

		if (c->h)
			rte_hash_free(c->h);
		c->h = rte_hash_create(&p);
		if (!c->h) {
			fprintf(stderr, "bench ct: rte_hash_create: %s\n",
				rte_strerror(rte_errno));
			free(c);
			return NULL;
		}
		start = dpflow_tsc();
		for (uint32_t i = 0; i < n; i++)
			if (rte_hash_add_key_data(c->h,
						  keys + (size_t)i * key_len,
						  (void *)(uintptr_t)i) < 0) {
				fprintf(stderr,
					"bench ct: rte_hash refused key %u\n",
					i);
				bench_dpdk_ct_destroy(c);
				return NULL;
			}
		ticks = dpflow_tsc() - start;
		s = (double)ticks / (double)dpflow_tsc_hz();
		if (*insert_s == 0 || s < *insert_s)
			*insert_s = s;
	}
	return c;
}

uint64_t bench_dpdk_ct_run(struct bench_dpdk_ct *c, const uint8_t *stream,
			   uint32_t n_stream, uint32_t burst, double seconds,
			   uint64_t *lookups, uint64_t *hits)
{
	uint64_t budget = (uint64_t)(seconds * (double)dpflow_tsc_hz());
	uint64_t start = dpflow_tsc(), now = start, n = 0, h = 0;
	const void *ptr[RTE_HASH_LOOKUP_BULK_MAX];
	void *data[RTE_HASH_LOOKUP_BULK_MAX];
	uint32_t pos = 0;

	while (now - start < budget) {
		for (unsigned r = 0; r < 16; r++) {
			uint64_t mask = 0;

			for (uint32_t j = 0; j < burst; j++)
				ptr[j] =
				    stream + (size_t)(pos + j) * c->key_len;
			rte_hash_lookup_bulk_data(c->h, ptr, burst, &mask,
						  data);
			h += (uint64_t)__builtin_popcountll(mask);
			pos += burst;
			if (pos + burst > n_stream)
				pos = 0;
		}
		n += 16 * (uint64_t)burst;
		now = dpflow_tsc();
	}
	*lookups = n;
	*hits = h;
	return now - start;
}

void bench_dpdk_ct_destroy(struct bench_dpdk_ct *c)
{
	if (!c)
		return;
	rte_hash_free(c->h);
	free(c);
}
