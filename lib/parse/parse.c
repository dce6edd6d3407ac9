/*
 * The CPU instantiation of the parser (code in parse_impl.h).
 */
#include "dpflow/parse.h"

#include "parse/parse_impl.h"

unsigned dpflow_parse_frame(const uint8_t *frame, uint32_t len,
			    struct dpflow_pkt_meta *m)
{
	return dpflow_parse_frame_impl(frame, len, m);
}

/* Packets ahead whose slot (meta line 0) and then frame are prefetched. */
#define PREFETCH_META_AHEAD 8
#define PREFETCH_DATA_AHEAD 4

static inline unsigned parse_one(const struct dpflow_pool *pool, uint32_t idx)
{
	struct dpflow_pkt_meta *m = dpflow_pool_meta(pool, idx);
	const uint8_t *f = dpflow_pool_buf(pool, idx) + m->data_off;

	return dpflow_parse_frame_impl(f, m->data_len, m);
}

uint16_t dpflow_parse_burst(const struct dpflow_pool *pool, const uint32_t *idx,
			    uint16_t n)
{
	uint16_t ok = 0;
	uint16_t i = 0;

	for (; i < n && i < PREFETCH_META_AHEAD; i++)
		DPFLOW_PREFETCH(dpflow_pool_meta(pool, idx[i]));
	for (i = 0; i < n && i < PREFETCH_DATA_AHEAD; i++)
		DPFLOW_PREFETCH(dpflow_pkt_data(pool, idx[i]));

	for (i = 0; i < n; i++) {
		if (i + PREFETCH_META_AHEAD < n)
			DPFLOW_PREFETCH(dpflow_pool_meta(
			    pool, idx[i + PREFETCH_META_AHEAD]));
		if (i + PREFETCH_DATA_AHEAD < n) {
			uint32_t j = idx[i + PREFETCH_DATA_AHEAD];
			DPFLOW_PREFETCH(dpflow_pkt_data(pool, j));
			DPFLOW_PREFETCH(&dpflow_pool_meta(pool, j)->outer);
		}
		ok = (uint16_t)(ok + (parse_one(pool, idx[i]) == 0));
	}
	return ok;
}
