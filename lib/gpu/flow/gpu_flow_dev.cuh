/*
 * The GPU target's device plan and the per-packet pipeline, shared by the
 * kernels that run it: a burst's (gpu_flow.cu), the benchmark's, and the
 * queue-fed persistent kernel's. Internal to lib/gpu/flow; every function
 * is a static __device__ one, compiled into each kernel's unit.
 */
#ifndef DPFLOW_GPU_FLOW_DEV_CUH
#define DPFLOW_GPU_FLOW_DEV_CUH

#include <cuda_runtime.h>

#include "flow/field_impl.h"
#include "flow/flow_actions_impl.h"
#include "flow/hash_impl.h"
#include "flow/table_acl_impl.h"
#include "flow/table_exact_impl.h"
#include "flow/table_lpm_impl.h"
#include "parse/parse_impl.h"

extern "C" {
#include "flow/flow_internal.h"
}

/* ---- the device plan ---------------------------------------------------- */

enum gpu_fwd_kind {
	GFWD_DROP = 0,
	GFWD_PORT,
	GFWD_PIPE,
	GFWD_PER_ENTRY,
};

struct gpu_fwd {
	uint8_t kind;	 /* enum gpu_fwd_kind */
	uint16_t target; /* port or pipe id */
};

/* What a hit reads of its entry. */
struct gpu_entry {
	uint8_t tmpl;
	uint8_t has_encap; /* entry_encaps[slot] holds its ENCAP */
	struct gpu_fwd fwd;
	uint8_t values[DPFLOW_ACTIONS_MAX][16];
};

struct gpu_pipe {
	uint8_t type;
	uint8_t lpm_v6;
	uint8_t counter; /* per-entry counters */
	uint8_t n_action_tmpls;
	uint16_t key_len;
	uint8_t n_fields;
	uint8_t n_const;
	uint8_t acl_n;
	uint32_t size;
	uint32_t hash_seed;
	struct gpu_fwd fwd, miss;
	uint16_t field[DPFLOW_MATCH_FIELDS_MAX];
	uint8_t per_entry[DPFLOW_MATCH_FIELDS_MAX];
	uint8_t field_off[DPFLOW_MATCH_FIELDS_MAX];
	uint8_t field_bytes[DPFLOW_MATCH_FIELDS_MAX];
	uint8_t field_full[DPFLOW_MATCH_FIELDS_MAX];
	uint8_t value[DPFLOW_MATCH_FIELDS_MAX][16];
	uint8_t mask[DPFLOW_MATCH_FIELDS_MAX][16];
	/* ACL: key words (offset and bytes in the pipe key), as
	 * pipe_table.c's acl_create() lays them out */
	uint8_t acl_off[DPFLOW_ACL_FIELDS_MAX];
	uint8_t acl_bytes[DPFLOW_ACL_FIELDS_MAX];
	/* device memory */
	const void *image;
	const struct gpu_entry *entries;
	const struct dpflow_edit_encap *entry_encaps; /* NULL: none */
	unsigned long long *ctr;		      /* size x (pkts, bytes) */
	unsigned long long *stats;		      /* pkts, hits, misses */
	struct dpflow_action_tmpl tmpl[DPFLOW_ACTION_TMPLS_MAX];
	uint8_t tmpl_encap_set[DPFLOW_ACTION_TMPLS_MAX][DPFLOW_ACTIONS_MAX];
	struct dpflow_edit_encap tmpl_encap[DPFLOW_ACTION_TMPLS_MAX]
					   [DPFLOW_ACTIONS_MAX];
};

/* One pipe a packet went through. */
struct gpu_step {
	uint32_t entry; /* TABLE_MISS on a miss */
	uint16_t bytes; /* data_len when it was counted */
	uint8_t pipe;
	uint8_t reserved;
};

/* A packet's outcome: sent out of @value, or dropped for reason @value. */
struct gpu_result {
	uint8_t sent;
	uint8_t n_steps;
	uint16_t value;
};

/* ---- the per-packet pipeline ----------------------------------------------
 */

__device__ static bool const_match(const struct gpu_pipe *p,
				   const uint8_t *frame,
				   const struct dpflow_pkt_meta *m)
{
	if (!p->n_const)
		return true;
	for (unsigned i = 0; i < p->n_fields; i++) {
		uint8_t v[16];

		if (p->per_entry[i])
			continue;
		dpflow_field_get(frame, m, p->field[i], v);
		for (unsigned b = 0; b < p->field_bytes[i]; b++)
			if ((v[b] ^ p->value[i][b]) & p->mask[i][b])
				return false;
	}
	return true;
}

__device__ static void build_key(const struct gpu_pipe *p, const uint8_t *frame,
				 const struct dpflow_pkt_meta *m, uint8_t *key)
{
	for (unsigned i = 0; i < p->n_fields; i++) {
		uint8_t *k = key + p->field_off[i];

		if (!p->per_entry[i])
			continue;
		dpflow_field_get(frame, m, p->field[i], k);
		if (p->field_full[i])
			continue;
		for (unsigned b = 0; b < p->field_bytes[i]; b++)
			k[b] &= p->mask[i][b];
	}
}

__device__ static uint32_t be_n(const uint8_t *k, unsigned bytes)
{
	uint32_t v = 0;

	for (unsigned i = 0; i < bytes; i++)
		v = v << 8 | k[i];
	return v;
}

/* The entry index the pipe's table gives @key, or TABLE_MISS. */
__device__ static uint32_t lookup(const struct gpu_pipe *p, const uint8_t *key)
{
	switch (p->type) {
	case DPFLOW_PIPE_BASIC:
		return dpflow_exact_lookup_impl(
		    (const struct dpflow_exact_image *)p->image, key);
	case DPFLOW_PIPE_LPM:
		if (p->lpm_v6) /* the key is zero-padded to 16 bytes */
			return dpflow_lpm6_lookup_impl(
			    (const struct dpflow_lpm6_image *)p->image, key);
		return dpflow_lpm4_lookup_impl(
		    (const struct dpflow_lpm4_image *)p->image, be_n(key, 4));
	case DPFLOW_PIPE_CONTROL:
	case DPFLOW_PIPE_ACL: {
		uint32_t words[DPFLOW_ACL_FIELDS_MAX];

		for (unsigned f = 0; f < p->acl_n; f++)
			words[f] = be_n(key + p->acl_off[f], p->acl_bytes[f]);
		return dpflow_acl_lookup_impl(
		    (const struct dpflow_acl_image *)p->image, words);
	}
	case DPFLOW_PIPE_HASH: {
		uint32_t h = dpflow_hash32_impl(key, p->key_len, p->hash_seed);

		return ((const uint32_t *)p->image)[h % p->size];
	}
	default:
		return TABLE_MISS;
	}
}

/*
 * Add 1 to the counter @a of the pipe (@label: the pipe and which
 * counter) once per group of threads of the warp that add to the same one:
 * the pipe counters are few addresses hit by every packet, and one atomic
 * a warp instead of one a thread keeps them off the critical path. The
 * sums are the same.
 */
__device__ static void stat_add(unsigned long long *a, unsigned label)
{
	unsigned mask = __activemask();
	unsigned peers = __match_any_sync(mask, label);
	unsigned lane = threadIdx.x & 31;

	if (lane == (unsigned)(__ffs(peers) - 1))
		atomicAdd(a, (unsigned long long)__popc(peers));
}

/*
 * One packet through the graph from pipe @root, received on @port: the
 * frame at @buf + m->data_off, its metadata @m (data_off and data_len
 * set); parses, walks, records the path in @steps. Both kernels (a burst's
 * and the benchmark's) run it.
 */
__device__ static struct gpu_result
gpu_flow_pkt(const struct gpu_pipe *pipes, int root, uint16_t port,
	     struct dpflow_pkt_meta *m, uint8_t *buf, struct gpu_step *steps,
	     uint32_t path_max)
{
	struct gpu_result r = {0, 0, 0};
	int p = root;

	dpflow_parse_frame_impl(buf + m->data_off, m->data_len, m);
	/* pipeline state starts clean for every packet */
	m->port = port;
	m->queue = 0;
	m->rss_hash = 0;
	m->color = DPFLOW_COLOR_GREEN;
	m->ct_state = 0;
	m->ct_flags = 0;
	for (unsigned k = 0; k < DPFLOW_META_REGS; k++)
		m->reg[k] = 0;
	if (m->drop) {
		r.value = m->drop;
		return r;
	}
	if (p < 0) {
		r.value = DPFLOW_DROP_FLOW_NO_ROOT;
		m->drop = DPFLOW_DROP_FLOW_NO_ROOT;
		return r;
	}
	for (;;) {
		const struct gpu_pipe *pp = &pipes[p];
		const uint8_t *frame = buf + m->data_off;
		uint8_t key[DPFLOW_KEY_MAX];
		struct gpu_fwd f;
		uint32_t v;
		bool miss;

		if (r.n_steps == path_max) { /* cannot happen: acyclic */
			r.value = DPFLOW_DROP_FLOW_TOO_DEEP;
			break;
		}
		memset(key, 0, sizeof(key));
		build_key(pp, frame, m, key);
		v = lookup(pp, key);
		miss = v == TABLE_MISS || v >= pp->size ||
		       !const_match(pp, frame, m);
		steps[r.n_steps].entry = miss ? TABLE_MISS : v;
		steps[r.n_steps].bytes = m->data_len;
		steps[r.n_steps].pipe = (uint8_t)p;
		r.n_steps++;
		stat_add(&pp->stats[0], 4u * (unsigned)p);
		stat_add(&pp->stats[miss ? 2 : 1], 4u * (unsigned)p + 1 + miss);
		if (miss) {
			f = pp->miss;
		} else {
			const struct gpu_entry *e = &pp->entries[v];

			if (pp->counter) {
				atomicAdd(&pp->ctr[2 * (size_t)v], 1ull);
				atomicAdd(&pp->ctr[2 * (size_t)v + 1],
					  (unsigned long long)m->data_len);
			}
			if (pp->n_action_tmpls) {
				const struct dpflow_edit_encap
				    *te[DPFLOW_ACTIONS_MAX];
				unsigned tn = e->tmpl, pos = 0, rc;

				if (tn >= pp->n_action_tmpls) {
					r.value = DPFLOW_DROP_EDIT_BAD_ACTION;
					break;
				}
				for (unsigned a = 0; a < DPFLOW_ACTIONS_MAX;
				     a++)
					te[a] = pp->tmpl_encap_set[tn][a]
						    ? &pp->tmpl_encap[tn][a]
						    : NULL;
				rc = flow_actions_run_impl(
				    m, buf, &pp->tmpl[tn],
				    (const uint8_t(*)[16])e->values, te,
				    e->has_encap ? &pp->entry_encaps[v] : NULL,
				    &pos);
				if (rc) { /* mirror is refused at bind */
					r.value =
					    (uint16_t)(rc == FLOW_ACT_MIRROR
							   ? DPFLOW_DROP_EDIT_BAD_ACTION
							   : rc);
					break;
				}
			}
			f = pp->fwd.kind == GFWD_PER_ENTRY ? e->fwd : pp->fwd;
		}
		if (f.kind == GFWD_PORT) {
			r.sent = 1;
			r.value = f.target;
			break;
		}
		if (f.kind == GFWD_PIPE) {
			p = f.target;
			continue;
		}
		r.value = miss ? DPFLOW_DROP_FLOW_MISS_DROP
			       : DPFLOW_DROP_FLOW_FWD_DROP;
		break;
	}
	if (!r.sent)
		m->drop = (uint8_t)r.value;
	return r;
}

#endif /* DPFLOW_GPU_FLOW_DEV_CUH */
