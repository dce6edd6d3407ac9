/*
 * The exact-match table's shared code (lib/flow/table_exact_impl.h) as
 * CUDA device code.
 *
 * Built by meson as a device check (sm_90 machine code plus PTX, warnings
 * as errors; no GPU needed): the GPU target copies exact-match images to
 * device memory and calls these same lookups from its kernels, and this
 * file keeps the header in the common subset of C11 and CUDA C++.
 *
 * Built with -DDPFLOW_EXACT_GPU_RUN and linked with lib/flow/table_exact.c
 * and lib/core/error.c, it is also a CPU/GPU differential run on a machine
 * with a GPU: the CPU builds an image, the bytes are copied to device
 * memory, and every hash, one-key lookup and bulk lookup computed on the
 * GPU must equal the CPU's (docs/tables/exact.md has the command).
 */
#include "flow/table_exact_impl.h"

/*
 * Thread i: the hash and one-key lookup of key i; every 64th thread also
 * the bulk lookup of the chunk of keys it starts.
 */
__global__ void dpflow_exact_check_kernel(const struct dpflow_exact_image *img,
					  const uint8_t *keys, uint32_t n,
					  uint32_t *values, uint64_t *hashes,
					  uint32_t *bulk_values)
{
	uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
	uint32_t key_len = img->key_len;

	if (i >= n)
		return;
	values[i] = dpflow_exact_lookup_impl(img, keys + (size_t)i * key_len);
	hashes[i] =
	    dpflow_exact_hash(keys + (size_t)i * key_len, key_len, img->seed);
	if (i % DPFLOW_EXACT_CHUNK == 0) {
		const void *ptrs[DPFLOW_EXACT_CHUNK];
		uint32_t m =
		    n - i < DPFLOW_EXACT_CHUNK ? n - i : DPFLOW_EXACT_CHUNK;

		for (uint32_t j = 0; j < m; j++)
			ptrs[j] = keys + (size_t)(i + j) * key_len;
		dpflow_exact_lookup_bulk_impl(img, ptrs, m, bulk_values + i);
	}
}

#ifdef DPFLOW_EXACT_GPU_RUN
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

extern "C" {
#include "flow/table_exact.h"
}

#define CUDA_OK(x)                                       \
	do {                                             \
		cudaError_t e_ = (x);                    \
		if (e_ != cudaSuccess) {                 \
			fprintf(stderr, "%s: %s\n", #x,  \
				cudaGetErrorString(e_)); \
			return 2;                        \
		}                                        \
	} while (0)

static uint64_t rng_state = 1;

static uint64_t rng(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* One key length: fill a table on the CPU, compare every answer. */
static int run_one(uint32_t key_len, uint32_t cap)
{
	struct dpflow_exact_params p = {key_len, cap, 0x1234 + key_len};
	struct dpflow_error err;
	struct dpflow_exact_image *img = dpflow_exact_create(&p, &err);
	uint32_t n = 2 * cap, bad = 0, hits = 0;
	uint8_t *keys = (uint8_t *)malloc((size_t)n * key_len);
	uint32_t *val = (uint32_t *)malloc(n * 4),
		 *gval = (uint32_t *)malloc(n * 4);
	uint32_t *gbulk = (uint32_t *)malloc(n * 4);
	uint64_t *ghash = (uint64_t *)malloc(n * 8);
	void *d_img;
	uint8_t *d_keys;
	uint32_t *d_val, *d_bulk;
	uint64_t *d_hash;

	if (!img || !keys || !val || !gval || !gbulk || !ghash)
		return 2;
	for (size_t j = 0; j < (size_t)n * key_len; j++)
		keys[j] = (uint8_t)rng();
	/* the first half goes in (some deleted again), the second stays out */
	for (uint32_t i = 0; i < cap; i++)
		if (dpflow_exact_insert(img, keys + (size_t)i * key_len, i,
					&err))
			return 2;
	for (uint32_t i = 0; i < cap; i += 5)
		dpflow_exact_delete(img, keys + (size_t)i * key_len, NULL,
				    NULL);
	for (uint32_t i = 0; i < n; i++)
		val[i] = dpflow_exact_lookup(img, keys + (size_t)i * key_len);

	CUDA_OK(cudaMalloc(&d_img, dpflow_exact_image_bytes(img)));
	CUDA_OK(cudaMalloc((void **)&d_keys, (size_t)n * key_len));
	CUDA_OK(cudaMalloc((void **)&d_val, n * 4));
	CUDA_OK(cudaMalloc((void **)&d_bulk, n * 4));
	CUDA_OK(cudaMalloc((void **)&d_hash, n * 8));
	CUDA_OK(cudaMemcpy(d_img, img, dpflow_exact_image_bytes(img),
			   cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(d_keys, keys, (size_t)n * key_len,
			   cudaMemcpyHostToDevice));
	dpflow_exact_check_kernel<<<(n + 255) / 256, 256>>>(
	    (const struct dpflow_exact_image *)d_img, d_keys, n, d_val, d_hash,
	    d_bulk);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaMemcpy(gval, d_val, n * 4, cudaMemcpyDeviceToHost));
	CUDA_OK(cudaMemcpy(gbulk, d_bulk, n * 4, cudaMemcpyDeviceToHost));
	CUDA_OK(cudaMemcpy(ghash, d_hash, n * 8, cudaMemcpyDeviceToHost));
	for (uint32_t i = 0; i < n; i++) {
		const uint8_t *k = keys + (size_t)i * key_len;
		uint32_t want = i < cap && i % 5 ? i : DPFLOW_TABLE_MISS;

		hits += val[i] != DPFLOW_TABLE_MISS;
		bad += val[i] != want || gval[i] != want || gbulk[i] != want ||
		       ghash[i] != dpflow_exact_hash(k, key_len, img->seed);
	}
	printf("key_len %2u: %u keys, %u hits, %u mismatches between CPU, "
	       "GPU one-key, GPU bulk and the expected answer\n",
	       key_len, n, hits, bad);
	cudaFree(d_img);
	cudaFree(d_keys);
	cudaFree(d_val);
	cudaFree(d_bulk);
	cudaFree(d_hash);
	free(keys);
	free(val);
	free(gval);
	free(gbulk);
	free(ghash);
	dpflow_exact_destroy(img);
	return bad ? 1 : 0;
}

int main(void)
{
	int rc = 0;

	for (uint32_t k = 4; k <= 64 && rc < 2; k += 4)
		rc |= run_one(k, k == 16 ? 1000000 : 50000);
	printf(rc >= 2 ? "NOT RUN\n" : rc ? "FAIL\n" : "PASS\n");
	return rc;
}
#endif
