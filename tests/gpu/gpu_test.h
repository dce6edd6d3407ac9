/*
 * Helpers shared by the GPU test programs: skip (exit 77) without a GPU,
 * checks that print and count, ports on in-process rings.
 */
#ifndef DPFLOW_GPU_TEST_H
#define DPFLOW_GPU_TEST_H

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "dpflow/clock.h"
#include "dpflow/gpu.h"
#include "dpflow/gpu_dev.cuh"
#include "dpflow/pool.h"
#include "dpflow/port.h"
#include "dpflow/ring.h"

static int g_failed __attribute__((unused));

#define CHECK(cond, ...)                                              \
	do {                                                          \
		if (!(cond)) {                                        \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, \
				__LINE__, #cond);                     \
			fprintf(stderr, __VA_ARGS__);                 \
			fprintf(stderr, "\n");                        \
			g_failed++;                                   \
		}                                                     \
	} while (0)

#define CHECK_OK(rc, err) CHECK((rc) >= 0, "%s (rc %d)", (err).msg, (int)(rc))

/* Open device 0, or exit 77 (meson's skip) when there is none. */
static inline struct dpflow_gpu *test_gpu_open(void)
{
	struct dpflow_error err;
	struct dpflow_gpu *gpu;

	setvbuf(stdout, NULL, _IONBF, 0);
	if (dpflow_gpu_count(&err) == 0) {
		printf("SKIP: %s\n", err.msg);
		exit(77);
	}
	gpu = dpflow_gpu_open(0, &err);
	if (!gpu) {
		printf("SKIP: %s\n", err.msg);
		exit(77);
	}
	dpflow_clock_init();
	printf("GPU 0: %s\n", dpflow_gpu_name(gpu));
	return gpu;
}

static inline int test_done(const char *name)
{
	printf("%s: %s (%d failed checks)\n", name,
	       g_failed ? "FAILED" : "passed", g_failed);
	return g_failed ? 1 : 0;
}

/* A frame of @len bytes for packet @id: byte j = (id * 7 + j) & 0xff. */
static inline uint8_t frame_byte(uint32_t id, uint32_t j)
{
	return (uint8_t)(id * 7 + j);
}

/* Allocate, fill and feed one packet into ring port @in. */
static inline bool feed_one(struct dpflow_pool *pool, struct dpflow_port *in,
			    uint32_t id, uint32_t len)
{
	uint32_t idx;

	if (dpflow_pool_alloc_bulk(pool, &idx, 1) < 0)
		return false;
	struct dpflow_pkt_meta *m = dpflow_pool_meta(pool, idx);
	uint8_t *p = dpflow_pkt_data(pool, idx);

	m->data_len = (uint16_t)len;
	m->reg[0] = id;
	for (uint32_t j = 0; j < len; j++)
		p[j] = frame_byte(id, j);
	if (dpflow_ring_enqueue_burst(dpflow_port_ring_rx(in), &idx, 1) != 1) {
		dpflow_pool_free_bulk(pool, &idx, 1);
		return false;
	}
	return true;
}

#endif /* DPFLOW_GPU_TEST_H */
