/*
 * The ACL table's shared lookup code (lib/flow/table_acl_impl.h) as CUDA
 * device code.
 *
 * Built by meson as a device check (sm_90 machine code plus PTX, warnings
 * as errors; no GPU needed): the GPU target copies ACL images byte for byte
 * to device memory and classifies with these same functions, and this file
 * keeps the header in the common subset of C11 and CUDA C++.
 *
 * Built with -DDPFLOW_ACL_GPU_RUN and linked with lib/flow/table_acl.c and
 * lib/core/error.c, it is also a CPU/GPU differential run on a machine with
 * a GPU: the CPU builds images from several rule sets, the bytes are copied
 * to device memory, and every one-key and bulk answer computed on the GPU
 * (portable code) must equal the CPU's (SIMD code). docs/tables/acl.md has
 * the command.
 */
#include "flow/table_acl_impl.h"

/*
 * Thread i: the one-key lookup of key i; every DPFLOW_ACL_CHUNK-th thread
 * also the bulk classification of the chunk of keys it starts.
 */
__global__ void dpflow_acl_check_kernel(const struct dpflow_acl_image *img,
					const uint32_t *keys, uint32_t n,
					uint32_t *values, uint32_t *bulk_values)
{
	uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
	uint32_t nf = img->n_fields;

	if (i >= n)
		return;
	values[i] = dpflow_acl_lookup_impl(img, keys + (size_t)i * nf);
	if (i % DPFLOW_ACL_CHUNK == 0) {
		const uint32_t *ptrs[DPFLOW_ACL_CHUNK];
		uint32_t m =
		    n - i < DPFLOW_ACL_CHUNK ? n - i : DPFLOW_ACL_CHUNK;

		for (uint32_t j = 0; j < m; j++)
			ptrs[j] = keys + (size_t)(i + j) * nf;
		dpflow_acl_classify_impl(img, ptrs, m, bulk_values + i);
	}
}

#ifdef DPFLOW_ACL_GPU_RUN
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "flow/table_acl.h"
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

static uint32_t wmax_of(unsigned w)
{
	return w == 32 ? 0xffffffffu : (1u << w) - 1;
}

/* A few values per field, shared by rules and keys so that they meet. */
static uint32_t pool[DPFLOW_ACL_FIELDS_MAX][8];

/* One field match: a prefix of a pool value, an exact value, a range, any,
 * or (with @masks) a mask that is no prefix. */
static struct dpflow_acl_match field_match(uint32_t f, unsigned w, bool masks)
{
	uint32_t wm = wmax_of(w), v = pool[f][rng() % 8], a, b;
	unsigned k = (unsigned)(rng() % 100);

	if (k < 20)
		return dpflow_acl_any();
	if (k < 45)
		return dpflow_acl_prefix(v, 1 + (unsigned)(rng() % w), w);
	if (k < 65)
		return dpflow_acl_masked(v, wm);
	if (k < 90 || !masks) {
		a = v;
		b = (uint32_t)rng() & wm;
		return a <= b ? dpflow_acl_range(a, b) : dpflow_acl_range(b, a);
	}
	b = (uint32_t)rng() & wm;
	return dpflow_acl_masked(v & b, b);
}

/* Keys: half inside a random rule, half from the pools. */
static void make_key(const struct dpflow_acl_layout *l,
		     const struct dpflow_acl_rule *rules, uint32_t n_rules,
		     uint32_t *k)
{
	const struct dpflow_acl_rule *r = &rules[rng() % n_rules];
	bool inside = rng() % 2;

	for (uint32_t f = 0; f < l->n_fields; f++) {
		const struct dpflow_acl_match *m = &r->field[f];
		uint32_t wm = wmax_of(l->width[f]);

		if (!inside)
			k[f] =
			    (pool[f][rng() % 8] + (uint32_t)(rng() % 3)) & wm;
		else if (m->type == DPFLOW_ACL_MATCH_RANGE)
			k[f] =
			    m->lo +
			    (uint32_t)(rng() % ((uint64_t)m->hi - m->lo + 1));
		else
			k[f] = m->value | ((uint32_t)rng() & ~m->mask & wm);
	}
}

/* One rule set: build on the CPU, compare every answer with the GPU's. */
static int run_one(const char *name, const struct dpflow_acl_layout *l,
		   uint32_t n_rules, bool masks, uint32_t n_keys)
{
	struct dpflow_error err;
	struct dpflow_acl_rules *rl = dpflow_acl_rules_create(l, n_rules, &err);
	struct dpflow_acl_rule *rules =
	    (struct dpflow_acl_rule *)calloc(n_rules, sizeof(*rules));
	uint32_t nf = l->n_fields, bad = 0, hits = 0;
	uint32_t *keys = (uint32_t *)malloc((size_t)n_keys * nf * 4);
	const uint32_t **ptrs =
	    (const uint32_t **)malloc((size_t)n_keys * sizeof(*ptrs));
	uint32_t *val = (uint32_t *)malloc(n_keys * 4);
	uint32_t *gval = (uint32_t *)malloc(n_keys * 4);
	uint32_t *gbulk = (uint32_t *)malloc(n_keys * 4);
	struct dpflow_acl_image *img;
	struct dpflow_acl_info info;
	void *d_img;
	uint32_t *d_keys, *d_val, *d_bulk;

	if (!rl || !rules || !keys || !ptrs || !val || !gval || !gbulk)
		return 2;
	for (uint32_t f = 0; f < nf; f++)
		for (int i = 0; i < 8; i++)
			pool[f][i] = (uint32_t)rng() & wmax_of(l->width[f]);
	for (uint32_t i = 0; i < n_rules; i++) {
		rules[i].id = i;
		rules[i].priority = (uint32_t)(rng() % 64);
		rules[i].value = i;
		for (uint32_t f = 0; f < nf; f++)
			rules[i].field[f] = field_match(f, l->width[f], masks);
	}
	if (dpflow_acl_rules_add_bulk(rl, rules, n_rules, NULL, &err)) {
		fprintf(stderr, "%s: %s\n", name, err.msg);
		return 2;
	}
	img = dpflow_acl_build(rl, NULL, &err);
	if (!img) {
		fprintf(stderr, "%s: %s\n", name, err.msg);
		return 2;
	}
	dpflow_acl_info(img, &info);
	for (uint32_t i = 0; i < n_keys; i++) {
		make_key(l, rules, n_rules, keys + (size_t)i * nf);
		ptrs[i] = keys + (size_t)i * nf;
	}
	dpflow_acl_classify(img, ptrs, n_keys, val);

	CUDA_OK(cudaMalloc(&d_img, dpflow_acl_image_bytes(img)));
	CUDA_OK(cudaMalloc((void **)&d_keys, (size_t)n_keys * nf * 4));
	CUDA_OK(cudaMalloc((void **)&d_val, n_keys * 4));
	CUDA_OK(cudaMalloc((void **)&d_bulk, n_keys * 4));
	CUDA_OK(cudaMemcpy(d_img, img, dpflow_acl_image_bytes(img),
			   cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(d_keys, keys, (size_t)n_keys * nf * 4,
			   cudaMemcpyHostToDevice));
	dpflow_acl_check_kernel<<<(n_keys + 255) / 256, 256>>>(
	    (const struct dpflow_acl_image *)d_img, d_keys, n_keys, d_val,
	    d_bulk);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaMemcpy(gval, d_val, n_keys * 4, cudaMemcpyDeviceToHost));
	CUDA_OK(cudaMemcpy(gbulk, d_bulk, n_keys * 4, cudaMemcpyDeviceToHost));
	for (uint32_t i = 0; i < n_keys; i++) {
		hits += val[i] != DPFLOW_TABLE_MISS;
		bad += gval[i] != val[i] || gbulk[i] != val[i];
	}
	printf("%-10s %6u rules, %u trees, %u jump tables, %7.2f MiB: %u "
	       "keys, %u hits, %u mismatches between CPU, GPU one-key and "
	       "GPU bulk\n",
	       name, n_rules, info.n_trees, info.n_jump_tables,
	       (double)info.size / (1 << 20), n_keys, hits, bad);
	cudaFree(d_img);
	cudaFree(d_keys);
	cudaFree(d_val);
	cudaFree(d_bulk);
	free(rules);
	free(keys);
	free(ptrs);
	free(val);
	free(gval);
	free(gbulk);
	dpflow_acl_destroy(img);
	dpflow_acl_rules_destroy(rl);
	return bad ? 1 : 0;
}

int main(void)
{
	static const struct dpflow_acl_layout five = {
	    5, {8, 32, 32, 16, 16}, {"proto", "src", "dst", "sport", "dport"}};
	static const struct dpflow_acl_layout v6 = {
	    11, {8, 32, 32, 32, 32, 32, 32, 32, 32, 16, 16}, {NULL}};
	static const struct dpflow_acl_layout narrow = {3, {8, 8, 16}, {NULL}};
	int rc = 0;

	rc |= run_one("5-tuple", &five, 20000, false, 1 << 20);
	rc |= run_one("masked", &five, 3000, true, 1 << 20);
	rc |= run_one("ipv6", &v6, 2000, true, 1 << 19);
	rc |= run_one("narrow", &narrow, 500, true, 1 << 19);
	printf(rc ? "FAIL\n" : "PASS\n");
	return rc;
}
#endif
