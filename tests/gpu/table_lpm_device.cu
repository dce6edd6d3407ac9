/*
 * Build check: the LPM tables' shared lookup code (lib/flow/table_lpm_impl.h)
 * compiles as CUDA device code for sm_90 and PTX. The GPU target (a later
 * milestone) copies IPv4 and IPv6 images byte for byte to device memory and
 * runs these same lookups on them; this file keeps the code in the common
 * subset of C11 and CUDA C++ until then. Built when nvcc is present.
 */
#include "flow/table_lpm_impl.h"

/* One thread per address: single lookups of @n IPv4 and IPv6 addresses. */
__global__ void dpflow_lpm_check_kernel(const struct dpflow_lpm4_image *t4,
					const uint32_t *addr4,
					const struct dpflow_lpm6_image *t6,
					const uint8_t *addr6, uint32_t *val4,
					uint32_t *val6, uint32_t n)
{
	uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n) {
		val4[i] = dpflow_lpm4_lookup_impl(t4, addr4[i]);
		val6[i] = dpflow_lpm6_lookup_impl(t6, addr6 + (size_t)16 * i);
	}
}

/* One thread per burst of @burst addresses: the bulk lookups. */
__global__ void dpflow_lpm_bulk_check_kernel(
    const struct dpflow_lpm4_image *t4, const uint32_t *addr4,
    const struct dpflow_lpm6_image *t6, const uint8_t *addr6, uint32_t *val4,
    uint32_t *val6, uint32_t *hits, uint32_t n, uint32_t burst)
{
	uint32_t b = (blockIdx.x * blockDim.x + threadIdx.x) * burst;

	if (b < n) {
		uint32_t m = n - b < burst ? n - b : burst;

		hits[b / burst] =
		    dpflow_lpm4_lookup_bulk_impl(t4, addr4 + b, m, val4 + b) +
		    dpflow_lpm6_lookup_bulk_impl(t6, addr6 + (size_t)16 * b, m,
						 val6 + b);
	}
}

#ifdef DPFLOW_LPM_GPU_RUN
/*
 * On a machine with a GPU, the same file builds a self-check: images made
 * by the control code (table_lpm.c, compiled as C), copied byte for byte
 * to device memory, must answer every lookup as the CPU does.
 *   gcc -O2 -std=gnu11 -Iinclude -Ilib -c lib/flow/table_lpm.c
 *   gcc -O2 -std=gnu11 -Iinclude -c lib/core/error.c
 *   nvcc -O2 -DDPFLOW_LPM_GPU_RUN -arch=sm_90 -Iinclude -Ilib \
 *        tests/gpu/table_lpm_device.cu table_lpm.o error.o && ./a.out
 */
#include <stdio.h>
#include <stdlib.h>

extern "C" {
#include "flow/table_lpm.h"
}

static uint64_t rng = 12345;

static uint32_t rnd(void)
{
	uint64_t z = (rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return (uint32_t)((z ^ (z >> 31)) >> 32);
}

#define CK(x)                                                              \
	do {                                                               \
		cudaError_t e_ = (x);                                      \
		if (e_ != cudaSuccess) {                                   \
			fprintf(stderr, "%s: %s\n", #x,                    \
				cudaGetErrorString(e_));                   \
			exit(1);                                           \
		}                                                          \
	} while (0)

template <typename T> static T *to_dev(const void *src, size_t bytes)
{
	void *d;

	CK(cudaMalloc(&d, bytes));
	CK(cudaMemcpy(d, src, bytes, cudaMemcpyHostToDevice));
	return (T *)d;
}

int main(void)
{
	const uint32_t n4 = 200000, n6 = 20000, n = 1u << 22, burst = 64;
	struct dpflow_lpm4_params p4 = {n4, n4 / 4};
	struct dpflow_lpm6_params p6 = {n6, 0};
	struct dpflow_lpm4_image *t4 = dpflow_lpm4_create(&p4, NULL);
	struct dpflow_lpm6_image *t6 = dpflow_lpm6_create(&p6, NULL);
	uint32_t *a4 = (uint32_t *)malloc(n * 4), *v4 = (uint32_t *)malloc(n * 4);
	uint8_t *a6 = (uint8_t *)malloc((size_t)n * 16);
	uint32_t *v6 = (uint32_t *)malloc(n * 4), *g4 = (uint32_t *)malloc(n * 4);
	uint32_t *g6 = (uint32_t *)malloc(n * 4), bad = 0, added = 0;
	cudaEvent_t e0, e1;
	float ms;

	if (!t4 || !t6 || !a4 || !v4 || !a6 || !v6 || !g4 || !g6)
		return 1;
	while (added < n4) {
		unsigned l = 8 + rnd() % 25;
		uint32_t a = rnd() & (0xffffffffu << (32 - l));

		added += dpflow_lpm4_add(t4, a, l, rnd() % 16 ? added : ~added,
					 NULL) == 0;
	}
	for (uint32_t i = 0; i < n6;) {
		uint8_t a[16] = {0x20, 0x01, (uint8_t)(rnd() % 4)};
		unsigned l = 20 + rnd() % 60;

		for (unsigned j = 3; j < 16; j++)
			a[j] = j * 8 < l ? (uint8_t)rnd() : 0;
		if (l % 8)
			a[l / 8] &= (uint8_t)(0xff00u >> (l % 8));
		i += dpflow_lpm6_add(t6, a, l, i, NULL) == 0;
	}
	for (uint32_t i = 0; i < n; i++) {
		a4[i] = rnd();
		a6[16 * i] = 0x20;
		a6[16 * i + 1] = 0x01;
		a6[16 * i + 2] = (uint8_t)(rnd() % 4);
		for (unsigned j = 3; j < 16; j++)
			a6[16 * i + j] = (uint8_t)rnd();
	}
	dpflow_lpm4_lookup_bulk(t4, a4, n, v4);
	dpflow_lpm6_lookup_bulk(t6, a6, n, v6);

	const struct dpflow_lpm4_image *d4 = to_dev<dpflow_lpm4_image>(
	    t4, dpflow_lpm4_image_bytes(t4));
	const struct dpflow_lpm6_image *d6 = to_dev<dpflow_lpm6_image>(
	    t6, dpflow_lpm6_image_bytes(t6));
	uint32_t *da4 = to_dev<uint32_t>(a4, n * 4);
	uint8_t *da6 = to_dev<uint8_t>(a6, (size_t)n * 16);
	uint32_t *dv4, *dv6, *dh;

	CK(cudaMalloc(&dv4, n * 4));
	CK(cudaMalloc(&dv6, n * 4));
	CK(cudaMalloc(&dh, n / burst * 4));
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	for (int rep = 0; rep < 2; rep++) {
		CK(cudaEventRecord(e0));
		dpflow_lpm_check_kernel<<<n / 256, 256>>>(d4, da4, d6, da6, dv4,
							  dv6, n);
		CK(cudaEventRecord(e1));
		CK(cudaEventSynchronize(e1));
	}
	CK(cudaEventElapsedTime(&ms, e0, e1));
	CK(cudaMemcpy(g4, dv4, n * 4, cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(g6, dv6, n * 4, cudaMemcpyDeviceToHost));
	for (uint32_t i = 0; i < n; i++)
		bad += (g4[i] != v4[i]) + (g6[i] != v6[i]);
	printf("single: %u IPv4 + %u IPv6 lookups, %u differ from the CPU; "
	       "%.1f M lookup pairs/s\n",
	       n, n, bad, n / (ms * 1e3));
	CK(cudaMemset(dv4, 0, n * 4));
	CK(cudaMemset(dv6, 0, n * 4));
	dpflow_lpm_bulk_check_kernel<<<n / burst / 128, 128>>>(
	    d4, da4, d6, da6, dv4, dv6, dh, n, burst);
	CK(cudaDeviceSynchronize());
	CK(cudaMemcpy(g4, dv4, n * 4, cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(g6, dv6, n * 4, cudaMemcpyDeviceToHost));
	for (uint32_t i = 0; i < n; i++)
		bad += (g4[i] != v4[i]) + (g6[i] != v6[i]);
	printf("bulk: %u differ in all; image bytes %zu + %zu\n", bad,
	       dpflow_lpm4_image_bytes(t4), dpflow_lpm6_image_bytes(t6));
	return bad != 0;
}
#endif /* DPFLOW_LPM_GPU_RUN */
