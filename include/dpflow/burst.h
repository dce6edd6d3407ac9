/*
 * A burst: up to DPFLOW_BURST_MAX packet indices and their count.
 * Stages take (obj, idx[], n) and return the count handled; a struct
 * dpflow_burst is the usual owner of such an array on a worker's stack.
 */
#ifndef DPFLOW_BURST_H
#define DPFLOW_BURST_H

#include <stdint.h>

#include "dpflow/common.h"

#ifdef __cplusplus
extern "C" {
#endif

struct dpflow_burst {
	uint32_t n;
	uint32_t idx[DPFLOW_BURST_MAX];
};

static inline void dpflow_burst_reset(struct dpflow_burst *b)
{
	b->n = 0;
}

/* Append one index; returns 0, or -1 when the burst is full. */
static inline int dpflow_burst_push(struct dpflow_burst *b, uint32_t idx)
{
	if (b->n >= DPFLOW_BURST_MAX)
		return -1;
	b->idx[b->n++] = idx;
	return 0;
}

#ifdef __cplusplus
}
#endif

#endif /* DPFLOW_BURST_H */
