/*
 * The runtime's table-driven Toeplitz hash (rss.c); internal to
 * lib/runtime. The public, bit-serial forms are in dpflow/runtime.h.
 */
#ifndef DPFLOW_RUNTIME_RSS_H
#define DPFLOW_RUNTIME_RSS_H

#include <stdint.h>

#include "dpflow/meta.h"

/* IPv6 addresses and ports: the longest RSS input. */
#define RSS_INPUT_MAX 36

struct rss_table {
	uint32_t w[RSS_INPUT_MAX][256];
};

/* The table of @key (DPFLOW_RSS_KEY_LEN bytes). */
void rss_table_build(struct rss_table *t, const uint8_t *key);

/* dpflow_rss_toeplitz_sym() through the table. */
uint32_t rss_hash_tabled(const struct rss_table *t,
			 const struct dpflow_pkt_meta *m);

#endif /* DPFLOW_RUNTIME_RSS_H */
