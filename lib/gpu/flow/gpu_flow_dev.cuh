/*
 * The GPU target's device plan and the per-packet pipeline, shared by the
 * kernels that run it: a burst's (gpu_flow.cu), the ordered burst kernel
 * (gpu_flow_sched.cu), the benchmark's, and the queue-fed persistent
 * kernel's. Internal to lib/gpu/flow; every function is a static
 * __device__ one, compiled into each kernel's unit.
 *
 * A pipe visit is made of small steps that both kinds of kernel call:
 * pipe_match() (key, lookup, constant fields, counters), the meter of a
 * hit, pipe_actions() (the entry's action template, mirror copies),
 * hit_fwd() (colour forwarding) and fwd_apply() (port, pipe, RSS queue,
 * handler or drop); CT pipes use ct_begin() / ct_end() around the
 * tracker of ct_impl.h. gpu_flow_pkt_at() walks a packet through the whole
 * graph in one thread: CT and meters then see the packets of a burst in
 * whatever order the threads reach them (as several CPU workers would);
 * the ordered kernel (gpu_flow_sched.cu) runs the same steps in the CPU
 * target's order instead.
 */
#ifndef DPFLOW_GPU_FLOW_DEV_CUH
#define DPFLOW_GPU_FLOW_DEV_CUH

#include <cuda_runtime.h>

#include "flow/ct_impl.h"
#include "flow/field_impl.h"
#include "flow/flow_actions_impl.h"
#include "flow/hash_impl.h"
#include "flow/meter_impl.h"
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
	GFWD_RSS,     /* software queues target .. target + rss_n - 1 */
	GFWD_HANDLER, /* the plan's handler slot @target (host side) */
};

struct gpu_fwd {
	uint8_t kind;	   /* enum gpu_fwd_kind */
	uint8_t rss_inner; /* RSS: hash the inner headers of a tunnel */
	uint16_t target;   /* port, pipe id, first RSS queue, handler slot */
	uint16_t rss_n;	   /* RSS: queues */
};

/* What a hit reads of its entry. */
struct gpu_entry {
	uint8_t tmpl;
	uint8_t has_encap;    /* entry_encaps[slot] holds its ENCAP */
	uint8_t meter_shared; /* @meter is a shared meter */
	uint8_t reserved;
	uint32_t meter; /* 0: none; else the meter's index + 1 */
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
	uint8_t metered;    /* hits are metered (entries say by which) */
	uint8_t meter_slot; /* ordinal among the metered pipes */
	uint8_t ct_slot;    /* CT pipes: ordinal among the CT pipes */
	uint8_t ct_inner, ct_lookup_only, ct_user, ct_user_reg;
	uint8_t yellow_set, red_set;
	uint32_t size;
	uint32_t hash_seed;
	struct gpu_fwd fwd, miss, yellow, red;
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
	const struct gpu_entry *entries; /* CT pipes: one, all zero */
	const struct dpflow_edit_encap *entry_encaps; /* NULL: none */
	unsigned long long *ctr;		      /* size x (pkts, bytes) */
	unsigned long long *stats;		      /* pkts, hits, misses */
	struct dpflow_meters *meters;	     /* per-entry meters, or NULL */
	struct dpflow_meters *shared_meters; /* the context's, or NULL */
	struct dpflow_ct_image *ct;	     /* CT pipes: the connections */
	/* the time of the last burst, for kernels that get none
	 * (gpu_flow_pkt); the same word for every pipe */
	const unsigned long long *clock;
	struct dpflow_action_tmpl tmpl[DPFLOW_ACTION_TMPLS_MAX];
	uint8_t tmpl_encap_set[DPFLOW_ACTION_TMPLS_MAX][DPFLOW_ACTIONS_MAX];
	struct dpflow_edit_encap tmpl_encap[DPFLOW_ACTION_TMPLS_MAX]
					   [DPFLOW_ACTIONS_MAX];
};

/* gpu_step.flags */
#define GSTEP_COLOR	   0x03 /* the meter's colour (with METERED) */
#define GSTEP_METERED	   0x04 /* the hit went through a meter */
#define GSTEP_CT_UNTRACKED 0x08 /* CT: not trackable, took the miss first */
#define GSTEP_CT_NOCONN	   0x10 /* CT: tracked, no connection (refused) */
#define GSTEP_CT_INVALID   0x20 /* CT: the state machine said invalid */

/* One pipe a packet went through. */
struct gpu_step {
	uint32_t entry; /* TABLE_MISS on a miss; CT: the connection */
	uint16_t bytes; /* data_len when it was counted */
	uint8_t pipe;
	uint8_t flags; /* GSTEP_* */
};

/* gpu_result.to */
enum gpu_result_to {
	GRES_DROP = 0, /* dropped: value is the reason */
	GRES_PORT,     /* sent out of port value */
	GRES_RSS,      /* put on software queue value */
	GRES_HANDLER,  /* handed to the plan's handler slot value */
};

/* A packet's outcome: sent out of @value, or dropped for reason @value;
 * @to says which (RSS and handler packets are neither). */
struct gpu_result {
	uint8_t sent; /* to == GRES_PORT */
	uint8_t n_steps;
	uint16_t value;
	uint8_t to;	   /* enum gpu_result_to */
	uint8_t n_mirrors; /* mirror copies made (snapshots 0..n-1) */
	uint16_t reserved;
};

/* A mirror copy: where it goes and at which step of the path it was made.
 * Its snapshot (metadata, then the buffer up to the frame's end) is the
 * slot of the same number. */
struct gpu_mirror {
	uint16_t port;
	uint8_t step;
	uint8_t reserved;
};

/* What a burst gives every packet besides its own bytes. */
struct gpu_burst {
	uint64_t now_ns; /* the burst's time, the CPU target's now */
	/* mirror copies: packet i's k-th snapshot at (i * mirror_max + k)
	 * * stride, its record at mrec[i * mirror_max + k]; NULL: a
	 * mirror action drops the packet (EDIT_BAD_ACTION) */
	uint8_t *mirror;
	struct gpu_mirror *mrec;
	uint32_t mirror_max;
	uint32_t stride;
};

/* ---- one pipe ---------------------------------------------------------- */

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

/* Pipe @p's hit (@hit) or miss counter, and its packet counter. */
__device__ static void stat_visit(const struct gpu_pipe *pp, unsigned p)
{
	stat_add(&pp->stats[0], 4u * p);
}

__device__ static void stat_outcome(const struct gpu_pipe *pp, unsigned p,
				    bool hit)
{
	stat_add(&pp->stats[hit ? 1 : 2], 4u * p + (hit ? 1u : 2u));
}

/*
 * Key, lookup and constant fields of pipe @p (@pp) for the packet (frame
 * at @buf + m->data_off): its entry, or TABLE_MISS. Records the visit in
 * @st and counts it (pipe statistics, the entry's counter), as run_pipe()
 * and monitor_hit() do on the CPU.
 */
__device__ __noinline__ static uint32_t
pipe_match(const struct gpu_pipe *pp, unsigned p, const uint8_t *buf,
	   const struct dpflow_pkt_meta *m, struct gpu_step *st)
{
	const uint8_t *frame = buf + m->data_off;
	uint8_t key[DPFLOW_KEY_MAX];
	uint32_t v;
	bool miss;

	memset(key, 0, sizeof(key));
	build_key(pp, frame, m, key);
	v = lookup(pp, key);
	miss = v == TABLE_MISS || v >= pp->size || !const_match(pp, frame, m);
	st->entry = miss ? TABLE_MISS : v;
	st->bytes = m->data_len;
	st->pipe = (uint8_t)p;
	st->flags = 0;
	stat_visit(pp, p);
	stat_outcome(pp, p, !miss);
	if (!miss && pp->counter) {
		atomicAdd(&pp->ctr[2 * (size_t)v], 1ull);
		atomicAdd(&pp->ctr[2 * (size_t)v + 1],
			  (unsigned long long)m->data_len);
	}
	return miss ? TABLE_MISS : v;
}

/* The meter a hit of entry @e goes through, or NULL. */
__device__ static struct dpflow_meter *entry_meter(const struct gpu_pipe *pp,
						   const struct gpu_entry *e)
{
	struct dpflow_meters *img;

	if (!pp->metered || !e->meter)
		return NULL;
	img = e->meter_shared ? pp->shared_meters : pp->meters;
	return img ? dpflow_meter_at(img, e->meter - 1) : NULL;
}

/* Record the meter's colour @color on the packet and its step. */
__device__ static void meter_note(struct dpflow_pkt_meta *m,
				  struct gpu_step *st, unsigned color)
{
	m->color = (uint8_t)color;
	st->flags =
	    (uint8_t)(st->flags | GSTEP_METERED | (color & GSTEP_COLOR));
}

/* Snapshot @k of packet @i for a mirror copy out of @port at step @step. */
__device__ static void mirror_snap(const struct gpu_burst *b, uint32_t i,
				   unsigned k, const struct dpflow_pkt_meta *m,
				   const uint8_t *buf, uint16_t port,
				   unsigned step)
{
	size_t n = (size_t)i * b->mirror_max + k;
	uint8_t *dst = b->mirror + n * b->stride;
	size_t bytes = (size_t)m->data_off + m->data_len;

	memcpy(dst, m, sizeof(*m));
	if (bytes > b->stride - sizeof(*m)) /* cannot happen: a pool slot */
		bytes = b->stride - sizeof(*m);
	memcpy(dst + sizeof(*m), buf, bytes);
	b->mrec[n].port = port;
	b->mrec[n].step = (uint8_t)step;
	b->mrec[n].reserved = 0;
}

/*
 * The action template of entry @e (index @v) of @pp on the packet. Returns
 * 0 or the drop reason. A MIRROR action takes a snapshot for the host to
 * send (r->n_mirrors counts them); without snapshot room (b->mirror NULL)
 * it drops the packet as EDIT_BAD_ACTION.
 */
__device__ __noinline__ static unsigned
pipe_actions(const struct gpu_pipe *pp, const struct gpu_entry *e, uint32_t v,
	     struct dpflow_pkt_meta *m, uint8_t *buf, const struct gpu_burst *b,
	     uint32_t i, unsigned step, struct gpu_result *r)
{
	const struct dpflow_edit_encap *te[DPFLOW_ACTIONS_MAX];
	unsigned tn = e->tmpl, pos = 0, rc;

	if (!pp->n_action_tmpls)
		return 0;
	if (tn >= pp->n_action_tmpls)
		return DPFLOW_DROP_EDIT_BAD_ACTION;
	for (unsigned a = 0; a < DPFLOW_ACTIONS_MAX; a++)
		te[a] =
		    pp->tmpl_encap_set[tn][a] ? &pp->tmpl_encap[tn][a] : NULL;
	for (;;) {
		rc = flow_actions_run_impl(
		    m, buf, &pp->tmpl[tn], (const uint8_t(*)[16])e->values, te,
		    e->has_encap ? &pp->entry_encaps[v] : NULL, &pos);
		if (rc != FLOW_ACT_MIRROR)
			return rc;
		if (!b->mirror || r->n_mirrors >= b->mirror_max)
			return DPFLOW_DROP_EDIT_BAD_ACTION;
		mirror_snap(b, i, r->n_mirrors, m, buf,
			    pp->tmpl[tn].a[pos].port, step);
		r->n_mirrors++;
		pos++;
	}
}

/*
 * Where hit entry @e sends a packet of colour @color: *@f, or false with
 * *@reason when it is dropped as red (run_pipe() and color_fwd() on the
 * CPU).
 */
__device__ static bool hit_fwd(const struct gpu_pipe *pp,
			       const struct gpu_entry *e, unsigned color,
			       struct gpu_fwd *f, uint16_t *reason)
{
	*f = pp->fwd.kind == GFWD_PER_ENTRY ? e->fwd : pp->fwd;
	if (color == DPFLOW_COLOR_GREEN)
		return true;
	if (color == DPFLOW_COLOR_YELLOW) {
		if (pp->yellow_set)
			*f = pp->yellow;
		return true;
	}
	if (!pp->red_set || pp->red.kind == GFWD_DROP) {
		*reason = DPFLOW_DROP_FLOW_METER_RED;
		return false;
	}
	*f = pp->red;
	return true;
}

/*
 * Forward by @f (@miss: the miss forwarding): returns the next pipe, or -1
 * with the outcome in @r. RSS sets meta.rss_hash and meta.queue as the CPU
 * target's forward() does.
 */
__device__ static int fwd_apply(const struct gpu_fwd *f, bool miss,
				struct dpflow_pkt_meta *m, struct gpu_result *r)
{
	switch (f->kind) {
	case GFWD_PORT:
		r->sent = 1;
		r->to = GRES_PORT;
		r->value = f->target;
		return -1;
	case GFWD_PIPE:
		return f->target;
	case GFWD_RSS: {
		const struct dpflow_hdr *h =
		    f->rss_inner && m->tun_type ? &m->inner : &m->outer;

		m->rss_hash = dpflow_rss_hash_hdr(h);
		/* a 128-entry redirection table filled round robin */
		m->queue =
		    (uint16_t)(f->target +
			       (m->rss_hash & 127) % (f->rss_n ? f->rss_n : 1));
		r->to = GRES_RSS;
		r->value = m->queue;
		return -1;
	}
	case GFWD_HANDLER:
		r->to = GRES_HANDLER;
		r->value = f->target;
		return -1;
	default:
		r->to = GRES_DROP;
		r->value = miss ? DPFLOW_DROP_FLOW_MISS_DROP
				: DPFLOW_DROP_FLOW_FWD_DROP;
		return -1;
	}
}

/*
 * CT pipe @p, before the tracker: clears meta.ct_state / ct_flags, records
 * the visit, and fills @cp and *@user_new. Returns false when the packet
 * cannot be tracked (constant fields differ, not IP, a later fragment): it
 * is refused and takes the miss forwarding at once (run_ct_pipe()'s first
 * loop).
 */
__device__ static bool ct_begin(const struct gpu_pipe *pp, unsigned p,
				const uint8_t *buf, struct dpflow_pkt_meta *m,
				struct gpu_step *st, struct dpflow_ct_pkt *cp,
				uint32_t *user_new)
{
	const struct dpflow_hdr *h =
	    pp->ct_inner && m->tun_type ? &m->inner : &m->outer;

	m->ct_state = 0;
	m->ct_flags = 0;
	st->entry = TABLE_MISS;
	st->bytes = m->data_len;
	st->pipe = (uint8_t)p;
	st->flags = 0;
	stat_visit(pp, p);
	if (!const_match(pp, buf + m->data_off, m) ||
	    !dpflow_ct_pkt_from_hdr(h, cp)) {
		st->flags = GSTEP_CT_UNTRACKED;
		stat_outcome(pp, p, false);
		return false;
	}
	*user_new = pp->ct_user ? m->reg[pp->ct_user_reg & 3] : 0;
	return true;
}

/*
 * CT pipe @p, after the tracker said @res: meta.ct_state, ct_flags and the
 * user register as run_ct_pipe() writes them. Returns true for a tracked
 * packet (actions, then the hit forwarding), false for one that takes the
 * miss forwarding (no connection, or invalid).
 */
__device__ static bool ct_end(const struct gpu_pipe *pp, unsigned p,
			      struct dpflow_pkt_meta *m,
			      const struct dpflow_ct_result *res,
			      struct gpu_step *st)
{
	if (res->conn == DPFLOW_TABLE_MISS ||
	    (res->flags & DPFLOW_CT_R_INVALID)) {
		bool none = res->conn == DPFLOW_TABLE_MISS;

		st->flags = none ? GSTEP_CT_NOCONN : GSTEP_CT_INVALID;
		m->ct_state = none ? 0 : res->state;
		stat_outcome(pp, p, false);
		return false;
	}
	st->entry = res->conn;
	m->ct_state = res->state;
	m->ct_flags =
	    (uint8_t)((res->flags & DPFLOW_CT_R_NEW ? DPFLOW_META_CT_NEW : 0) |
		      (res->dir == DPFLOW_CT_DIR_REPLY ? DPFLOW_META_CT_REPLY
						       : 0) |
		      (res->flags & DPFLOW_CT_R_IGNORED ? DPFLOW_META_CT_IGNORED
							: 0) |
		      (res->flags & DPFLOW_CT_R_REOPEN ? DPFLOW_META_CT_REOPEN
						       : 0));
	if (pp->ct_user)
		m->reg[pp->ct_user_reg & 3] = res->user;
	stat_outcome(pp, p, true);
	return true;
}

/* The tracker of CT pipe @pp on one packet, in any order with the other
 * threads (ct_impl.h's concurrency). Out of line: one copy per kernel. */
__device__ __noinline__ static void ct_track_any(const struct gpu_pipe *pp,
						 const struct dpflow_ct_pkt *cp,
						 uint64_t now_ns, uint32_t user,
						 struct dpflow_ct_result *cr)
{
	if (pp->ct_lookup_only)
		dpflow_ct_lookup_impl(pp->ct, cp, now_ns, cr);
	else
		dpflow_ct_process_impl(pp->ct, cp, now_ns, user, cr);
}

/*
 * After a CT pipe's tracker (@hit from ct_end): the pipe's actions (one
 * template, constant values: its single all-zero entry) and forwarding.
 * Returns the next pipe or -1 with the outcome in @r.
 */
__device__ static int ct_finish(const struct gpu_pipe *pp, bool hit,
				struct dpflow_pkt_meta *m, uint8_t *buf,
				const struct gpu_burst *b, uint32_t i,
				unsigned step, struct gpu_result *r)
{
	unsigned reason;

	if (!hit)
		return fwd_apply(&pp->miss, true, m, r);
	reason = pipe_actions(pp, &pp->entries[0], 0, m, buf, b, i, step, r);
	if (reason) {
		r->to = GRES_DROP;
		r->value = (uint16_t)reason;
		return -1;
	}
	return fwd_apply(&pp->fwd, false, m, r);
}

/*
 * A hit of entry @v of @pp, after its meter said @color: actions, then the
 * hit (or colour) forwarding. Returns the next pipe or -1 with the outcome
 * in @r.
 */
__device__ static int hit_finish(const struct gpu_pipe *pp, uint32_t v,
				 unsigned color, struct dpflow_pkt_meta *m,
				 uint8_t *buf, const struct gpu_burst *b,
				 uint32_t i, unsigned step,
				 struct gpu_result *r)
{
	const struct gpu_entry *e = &pp->entries[v];
	unsigned reason = pipe_actions(pp, e, v, m, buf, b, i, step, r);
	struct gpu_fwd f;
	uint16_t why = 0;

	if (reason) {
		r->to = GRES_DROP;
		r->value = (uint16_t)reason;
		return -1;
	}
	if (!hit_fwd(pp, e, color, &f, &why)) {
		r->to = GRES_DROP;
		r->value = why;
		return -1;
	}
	return fwd_apply(&f, false, m, r);
}

/* ---- one packet through the graph -------------------------------------- */

/*
 * Parse the packet and start its pipeline state clean (as
 * dpflow_ctx_process_burst() does). Returns false when it is dropped
 * before any pipe (parse error, no root: @r says why).
 */
__device__ __noinline__ static bool
gpu_flow_pkt_start(int root, uint16_t port, struct dpflow_pkt_meta *m,
		   uint8_t *buf, struct gpu_result *r)
{
	dpflow_parse_frame_impl(buf + m->data_off, m->data_len, m);
	m->port = port;
	m->queue = 0;
	m->rss_hash = 0;
	m->color = DPFLOW_COLOR_GREEN;
	m->ct_state = 0;
	m->ct_flags = 0;
	for (unsigned k = 0; k < DPFLOW_META_REGS; k++)
		m->reg[k] = 0;
	memset(r, 0, sizeof(*r));
	r->to = GRES_DROP;
	if (m->drop) {
		r->value = m->drop;
		return false;
	}
	if (root < 0) {
		r->value = DPFLOW_DROP_FLOW_NO_ROOT;
		m->drop = DPFLOW_DROP_FLOW_NO_ROOT;
		return false;
	}
	return true;
}

/*
 * One packet through the graph from pipe @root, received on @port: the
 * frame at @buf + m->data_off, its metadata @m (data_off and data_len
 * set); parses, walks, records the path in @steps. Packet @i of a burst
 * whose time and mirror room are @b. CT pipes and meters are used
 * concurrently by the kernel's threads (ct_impl.h and meter_impl.h allow
 * it): exact equality with the CPU target needs the ordered kernel.
 */
__device__ static struct gpu_result
gpu_flow_pkt_at(const struct gpu_pipe *pipes, int root, uint16_t port,
		struct dpflow_pkt_meta *m, uint8_t *buf, struct gpu_step *steps,
		uint32_t path_max, const struct gpu_burst *b, uint32_t i)
{
	struct gpu_result r;
	int p = root;

	if (!gpu_flow_pkt_start(root, port, m, buf, &r))
		return r;
	while (p >= 0) {
		const struct gpu_pipe *pp = &pipes[p];
		struct gpu_step *st = &steps[r.n_steps];
		unsigned step = r.n_steps;

		if (r.n_steps == path_max) { /* cannot happen: acyclic */
			r.to = GRES_DROP;
			r.value = DPFLOW_DROP_FLOW_TOO_DEEP;
			break;
		}
		r.n_steps++;
		if (pp->type == DPFLOW_PIPE_CT) {
			struct dpflow_ct_pkt cp;
			struct dpflow_ct_result cr;
			uint32_t user = 0;
			bool hit = false;

			if (ct_begin(pp, (unsigned)p, buf, m, st, &cp, &user)) {
				ct_track_any(pp, &cp, b->now_ns, user, &cr);
				hit = ct_end(pp, (unsigned)p, m, &cr, st);
			}
			p = ct_finish(pp, hit, m, buf, b, i, step, &r);
			continue;
		}
		{
			uint32_t v = pipe_match(pp, (unsigned)p, buf, m, st);
			unsigned color = DPFLOW_COLOR_GREEN;
			struct dpflow_meter *mt;

			if (v == TABLE_MISS) {
				p = fwd_apply(&pp->miss, true, m, &r);
				continue;
			}
			mt = entry_meter(pp, &pp->entries[v]);
			if (mt) {
				color = dpflow_meter_color_impl(
				    mt, b->now_ns, m->data_len, m->color);
				meter_note(m, st, color);
			}
			p = hit_finish(pp, v, color, m, buf, b, i, step, &r);
		}
	}
	if (r.to == GRES_DROP)
		m->drop = (uint8_t)r.value;
	return r;
}

/*
 * gpu_flow_pkt_at() for kernels that have no burst context (the
 * benchmark's, the queue-fed one): the time is the plan's clock word (the
 * last burst's, see gpu_pipe.clock) and mirror actions drop the packet.
 */
__device__ static struct gpu_result
gpu_flow_pkt(const struct gpu_pipe *pipes, int root, uint16_t port,
	     struct dpflow_pkt_meta *m, uint8_t *buf, struct gpu_step *steps,
	     uint32_t path_max)
{
	struct gpu_burst b;

	memset(&b, 0, sizeof(b));
	if (pipes[0].clock)
		b.now_ns = *(const volatile unsigned long long *)pipes[0].clock;
	return gpu_flow_pkt_at(pipes, root, port, m, buf, steps, path_max, &b,
			       0);
}

#endif /* DPFLOW_GPU_FLOW_DEV_CUH */
