/*
 * The DPDK peer of `dpflow bench acl-10k`: rte_acl with the usual IPv4
 * 5-tuple field definitions (proto as a bitmask, addresses as prefixes,
 * ports as ranges, as DPDK's l3fwd-acl and test-acl have them), one
 * category, on the same rules and keys as dpflow. Built only when libdpdk
 * is found. bench_acl.c times it in trials interleaved with dpflow's.
 *
 * rte_acl takes the highest priority; the rules' ranks (0 best) become
 * priorities RTE_ACL_MAX_PRIORITY - rank, so both classifiers must give the
 * same answer for every key, which bench_acl.c checks. Besides the method
 * rte_acl_create picks (AVX2 on x86, as EAL allows 256-bit SIMD by
 * default), the AVX-512 methods are offered with the SIMD width raised to
 * 512 bits, so that the peer's figure can be its fastest on this CPU.
 */
/* rte_vect_{get,set}_max_simd_bitwidth are experimental in DPDK 22.11 */
#define ALLOW_EXPERIMENTAL_API

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_acl.h>
#include <rte_byteorder.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_vect.h>

#include "dpflow/dpflow.h"

#include "bench_dpdk.h"
#include "bench_dpdk_pkts.h"

/* The classifier's input: an IPv4 5-tuple in network byte order. */
struct acl_ipv4_key {
	uint8_t proto;
	uint32_t src;
	uint32_t dst;
	uint16_t sport;
	uint16_t dport;
};

RTE_ACL_RULE_DEF(acl_ipv4_rule, 5);

static const struct rte_acl_field_def ipv4_defs[5] = {
    {.type = RTE_ACL_FIELD_TYPE_BITMASK,
     .size = sizeof(uint8_t),
     .field_index = 0,
     .input_index = 0,
     .offset = offsetof(struct acl_ipv4_key, proto)},
    {.type = RTE_ACL_FIELD_TYPE_MASK,
     .size = sizeof(uint32_t),
     .field_index = 1,
     .input_index = 1,
     .offset = offsetof(struct acl_ipv4_key, src)},
    {.type = RTE_ACL_FIELD_TYPE_MASK,
     .size = sizeof(uint32_t),
     .field_index = 2,
     .input_index = 2,
     .offset = offsetof(struct acl_ipv4_key, dst)},
    {.type = RTE_ACL_FIELD_TYPE_RANGE,
     .size = sizeof(uint16_t),
     .field_index = 3,
     .input_index = 3,
     .offset = offsetof(struct acl_ipv4_key, sport)},
    {.type = RTE_ACL_FIELD_TYPE_RANGE,
     .size = sizeof(uint16_t),
     .field_index = 4,
     .input_index = 3,
     .offset = offsetof(struct acl_ipv4_key, dport)},
};

#define METHODS_MAX 4

struct bench_dpdk_acl {
	struct rte_acl_ctx *ctx;
	struct acl_ipv4_key *in;
	const uint8_t **data;
	uint32_t n_keys;
	unsigned n_methods;
	enum rte_acl_classify_alg alg[METHODS_MAX];
	const char *name[METHODS_MAX];
};

void bench_dpdk_acl_destroy(struct bench_dpdk_acl *a)
{
	if (!a)
		return;
	rte_acl_free(a->ctx);
	free(a->in);
	free(a->data);
	free(a);
}

struct bench_dpdk_acl *bench_dpdk_acl_create(const struct bench_acl_rule *rules,
					     uint32_t n_rules,
					     const uint32_t *keys,
					     uint32_t n_keys, double *build_s)
{
	static const struct {
		enum rte_acl_classify_alg alg;
		const char *name;
	} simd512[] = {
	    {RTE_ACL_CLASSIFY_AVX512X16, "avx512x16"},
	    {RTE_ACL_CLASSIFY_AVX512X32, "avx512x32"},
	};
	struct rte_acl_param prm = {
	    .name = "bench_acl",
	    .socket_id = (int)rte_socket_id(),
	    .rule_size = RTE_ACL_RULE_SZ(5),
	    .max_rule_num = n_rules ? n_rules : 1,
	};
	struct rte_acl_config cfg = {
	    .num_categories = 1,
	    .num_fields = 5,
	    .max_size = 0,
	};
	struct bench_dpdk_acl *a;
	struct acl_ipv4_rule *ar;
	uint64_t t0;

	if (bench_dpdk_init())
		return NULL;
	memcpy(cfg.defs, ipv4_defs, sizeof(ipv4_defs));
	a = calloc(1, sizeof(*a));
	ar = calloc(n_rules ? n_rules : 1, sizeof(*ar));
	if (!a || !ar)
		goto fail;
	a->n_keys = n_keys;
	a->in = calloc(n_keys, sizeof(*a->in));
	a->data = calloc(n_keys, sizeof(*a->data));
	a->ctx = rte_acl_create(&prm);
	if (!a->in || !a->data || !a->ctx) {
		fprintf(stderr, "bench acl: rte_acl_create: %s\n",
			rte_strerror(rte_errno));
		goto fail;
	}
	for (uint32_t i = 0; i < n_rules; i++) {
		const struct bench_acl_rule *r = &rules[i];

		ar[i].data.category_mask = 1;
		ar[i].data.priority = (int32_t)(RTE_ACL_MAX_PRIORITY - r->rank);
		ar[i].data.userdata = r->value + 1; /* 0 means no match */
		ar[i].field[0].value.u8 = r->proto;
		ar[i].field[0].mask_range.u8 = r->proto_mask;
		ar[i].field[1].value.u32 = r->src;
		ar[i].field[1].mask_range.u32 = r->src_len;
		ar[i].field[2].value.u32 = r->dst;
		ar[i].field[2].mask_range.u32 = r->dst_len;
		ar[i].field[3].value.u16 = r->sport_lo;
		ar[i].field[3].mask_range.u16 = r->sport_hi;
		ar[i].field[4].value.u16 = r->dport_lo;
		ar[i].field[4].mask_range.u16 = r->dport_hi;
	}
	for (uint32_t i = 0; i < n_keys; i++) {
		const uint32_t *k = keys + (size_t)i * 5;

		a->in[i].proto = (uint8_t)k[0];
		a->in[i].src = rte_cpu_to_be_32(k[1]);
		a->in[i].dst = rte_cpu_to_be_32(k[2]);
		a->in[i].sport = rte_cpu_to_be_16((uint16_t)k[3]);
		a->in[i].dport = rte_cpu_to_be_16((uint16_t)k[4]);
		a->data[i] = (const uint8_t *)&a->in[i];
	}
	t0 = dpflow_tsc();
	if (rte_acl_add_rules(a->ctx, (const struct rte_acl_rule *)ar,
			      n_rules) ||
	    rte_acl_build(a->ctx, &cfg)) {
		fprintf(stderr, "bench acl: rte_acl build failed\n");
		goto fail;
	}
	*build_s = (double)(dpflow_tsc() - t0) / (double)dpflow_tsc_hz();
	free(ar);

	/* what rte_acl_create picks under EAL's default SIMD width (AVX2 on
	 * x86 CPUs that have it), then the wider methods */
	if (rte_acl_set_ctx_classify(a->ctx, RTE_ACL_CLASSIFY_AVX2) == 0) {
		a->alg[a->n_methods] = RTE_ACL_CLASSIFY_AVX2;
		a->name[a->n_methods++] = "avx2";
	} else {
		a->alg[a->n_methods] = RTE_ACL_CLASSIFY_DEFAULT;
		a->name[a->n_methods++] = "default";
	}
	if (rte_vect_get_max_simd_bitwidth() < RTE_VECT_SIMD_512)
		rte_vect_set_max_simd_bitwidth(RTE_VECT_SIMD_512);
	for (size_t m = 0; m < sizeof(simd512) / sizeof(simd512[0]); m++)
		if (rte_acl_set_ctx_classify(a->ctx, simd512[m].alg) == 0) {
			a->alg[a->n_methods] = simd512[m].alg;
			a->name[a->n_methods++] = simd512[m].name;
		}
	rte_acl_set_ctx_classify(a->ctx, a->alg[0]);
	return a;
fail:
	free(ar);
	bench_dpdk_acl_destroy(a);
	return NULL;
}

unsigned bench_dpdk_acl_methods(const struct bench_dpdk_acl *a,
				const char **names, unsigned max)
{
	for (unsigned m = 0; m < a->n_methods && m < max; m++)
		names[m] = a->name[m];
	return a->n_methods;
}

int bench_dpdk_acl_set_method(struct bench_dpdk_acl *a, unsigned m)
{
	if (m >= a->n_methods)
		return -1;
	return rte_acl_set_ctx_classify(a->ctx, a->alg[m]) ? -1 : 0;
}

void bench_dpdk_acl_classify(struct bench_dpdk_acl *a, uint32_t first,
			     uint32_t n, uint32_t *userdata)
{
	rte_acl_classify(a->ctx, a->data + first, userdata, n, 1);
}

void bench_dpdk_acl_answers(struct bench_dpdk_acl *a, uint32_t *results)
{
	rte_acl_classify(a->ctx, a->data, results, a->n_keys, 1);
	for (uint32_t i = 0; i < a->n_keys; i++)
		results[i] = results[i] ? results[i] - 1 : UINT32_MAX;
}

/*
 * The pipe-level peer: each packet's 5-tuple goes into the classifier's
 * input format (struct acl_ipv4_key, network order), then one
 * rte_acl_classify() per burst with the method last set.
 */
uint64_t bench_dpdk_acl_pipe(struct bench_dpdk_acl *a,
			     struct bench_dpdk_pkts *p, uint32_t burst,
			     uint64_t *hits)
{
	struct acl_ipv4_key in[64];
	const uint8_t *data[64];
	uint32_t res[64];
	uint64_t h = 0;
	uint32_t i;

	for (uint32_t j = 0; j < 64; j++)
		data[j] = (const uint8_t *)&in[j];
	for (i = 0; i + burst <= p->n; i += burst) {
		for (uint32_t j = 0; j < burst; j++) {
			struct bench_dpdk_5tuple t;

			bench_dpdk_prefetch(p->m, i + j, p->n);
			bench_dpdk_5tuple(p->m[i + j], &t);
			in[j].proto = t.proto;
			in[j].src = t.src;
			in[j].dst = t.dst;
			in[j].sport = t.sport;
			in[j].dport = t.dport;
		}
		rte_acl_classify(a->ctx, data, res, burst, 1);
		for (uint32_t j = 0; j < burst; j++)
			h += res[j] != 0;
	}
	*hits += h;
	return i;
}
