/*
 * The GPU target's binding of the plan and its per-packet bookkeeping,
 * shared by the kernels that run it: a burst's (gpu_flow.cu), the ordered
 * burst kernel (gpu_flow_sched.cu), the benchmark's, and the queue-fed
 * persistent kernel's. Internal to lib/gpu/flow; every function is a
 * static __device__ one, compiled into each kernel's unit.
 *
 * What happens to a packet is decided by the walk's steps
 * (flow/walk_impl.h), the code the CPU target runs on the same plan
 * bytes; this file wraps them with the GPU's bookkeeping: pipe_match()
 * (key, lookup, hit, pipe and entry counters), the meter of a hit,
 * pipe_actions() (mirror snapshots), fwd_apply() (the outcome recorded
 * for the host), ct_begin() / ct_end() around the tracker of ct_impl.h.
 * gpu_flow_pkt_at() walks a packet through the whole graph in one
 * thread: CT and meters then see the packets of a burst in whatever order
 * the threads reach them (as several CPU workers would); the ordered
 * kernel (gpu_flow_sched.cu) runs the same steps in the CPU target's
 * order instead.
 */
#ifndef DPFLOW_GPU_FLOW_DEV_CUH
#define DPFLOW_GPU_FLOW_DEV_CUH

#include <cuda_runtime.h>

#include "flow/meter_impl.h"
#include "flow/walk_impl.h"
#include "parse/parse_impl.h"

extern "C" {
#include "flow/flow_internal.h"
}

/* ---- the device plan ---------------------------------------------------- */

/*
 * A pipe on the device: its part of the plan (plan.h: the bytes the CPU
 * target walks, copied as they are) and what this target binds to it.
 */
struct gpu_pipe : dpflow_plan_pipe {
	/* device memory */
	const void *image;
	const struct dpflow_plan_entry *entries; /* CT pipes: one, all zero */
	const struct dpflow_edit_encap *entry_encaps; /* NULL: none */
	unsigned long long *ctr;		      /* size x (pkts, bytes) */
	unsigned long long *stats;		      /* pkts, hits, misses */
	struct dpflow_meters *meters;	     /* per-entry meters, or NULL */
	struct dpflow_meters *shared_meters; /* the context's, or NULL */
	struct dpflow_ct_image *ct;	     /* CT pipes: the connections */
	/* the time of the last burst, for kernels that get none
	 * (gpu_flow_pkt); the same word for every pipe */
	const unsigned long long *clock;
};

/* gpu_step.flags */
#define GSTEP_COLOR	   0x03 /* the meter's colour (with METERED) */
#define GSTEP_METERED	   0x04 /* the hit went through a meter */
#define GSTEP_CT_UNTRACKED 0x08 /* CT: not trackable, took the miss first */
#define GSTEP_CT_NOCONN	   0x10 /* CT: tracked, no connection (refused) */
#define GSTEP_CT_INVALID   0x20 /* CT: the state machine said invalid */

/* One pipe a packet went through. */
struct gpu_step {
	uint32_t entry; /* WALK_MISS on a miss; CT: the connection */
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
 * at @buf + m->data_off): its entry, or WALK_MISS. Records the visit in
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

	memset(key, 0, sizeof(key));
	walk_key_build(pp, frame, m, key);
	v = walk_hit(pp, walk_lookup_one(pp, pp->image, key), frame, m);
	st->entry = v;
	st->bytes = m->data_len;
	st->pipe = (uint8_t)p;
	st->flags = 0;
	stat_visit(pp, p);
	stat_outcome(pp, p, v != WALK_MISS);
	if (v != WALK_MISS && pp->counter) {
		atomicAdd(&pp->ctr[2 * (size_t)v], 1ull);
		atomicAdd(&pp->ctr[2 * (size_t)v + 1],
			  (unsigned long long)m->data_len);
	}
	return v;
}

/* The meter a hit of entry @e goes through, or NULL. */
__device__ static struct dpflow_meter *
entry_meter(const struct gpu_pipe *pp, const struct dpflow_plan_entry *e)
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
pipe_actions(const struct gpu_pipe *pp, const struct dpflow_plan_entry *e,
	     uint32_t v, struct dpflow_pkt_meta *m, uint8_t *buf,
	     const struct gpu_burst *b, uint32_t i, unsigned step,
	     struct gpu_result *r)
{
	unsigned pos = 0, rc;

	for (;;) {
		rc = walk_actions(
		    pp, e, pp->entry_encaps ? &pp->entry_encaps[v] : NULL, m,
		    buf, &pos);
		if (rc != FLOW_ACT_MIRROR)
			return rc;
		if (!b->mirror || r->n_mirrors >= b->mirror_max)
			return DPFLOW_DROP_EDIT_BAD_ACTION;
		mirror_snap(b, i, r->n_mirrors, m, buf,
			    walk_mirror_port(pp, e, pos), step);
		r->n_mirrors++;
		pos++;
	}
}

/*
 * Forward by @f (@miss: the miss forwarding, walk_fwd()): returns the next
 * pipe, or -1 with the outcome in @r.
 */
__device__ static int fwd_apply(const struct dpflow_plan_fwd *f, bool miss,
				struct dpflow_pkt_meta *m, struct gpu_result *r)
{
	uint16_t v;

	switch (walk_fwd(f, miss, m, &v)) {
	case WALK_TO_PIPE:
		return v;
	case WALK_TO_PORT:
		r->sent = 1;
		r->to = GRES_PORT;
		break;
	case WALK_TO_RSS:
		r->to = GRES_RSS;
		break;
	case WALK_TO_HANDLER:
		r->to = GRES_HANDLER;
		break;
	default:
		r->to = GRES_DROP;
		break;
	}
	r->value = v;
	return -1;
}

/*
 * CT pipe @p, before the tracker (walk_ct_begin()): records the visit.
 * Returns false when the packet cannot be tracked: it is refused and
 * takes the miss forwarding at once (run_ct_pipe()'s first loop).
 */
__device__ static bool ct_begin(const struct gpu_pipe *pp, unsigned p,
				const uint8_t *buf, struct dpflow_pkt_meta *m,
				struct gpu_step *st, struct dpflow_ct_pkt *cp,
				uint32_t *user_new)
{
	st->entry = WALK_MISS;
	st->bytes = m->data_len;
	st->pipe = (uint8_t)p;
	st->flags = 0;
	stat_visit(pp, p);
	if (!walk_ct_begin(pp, buf + m->data_off, m, cp, user_new)) {
		st->flags = GSTEP_CT_UNTRACKED;
		stat_outcome(pp, p, false);
		return false;
	}
	return true;
}

/*
 * CT pipe @p, after the tracker said @res (walk_ct_end()): records the
 * outcome. Returns true for a tracked packet (actions, then the hit
 * forwarding), false for one that takes the miss forwarding (no
 * connection, or invalid).
 */
__device__ static bool ct_end(const struct gpu_pipe *pp, unsigned p,
			      struct dpflow_pkt_meta *m,
			      const struct dpflow_ct_result *res,
			      struct gpu_step *st)
{
	switch (walk_ct_end(pp, m, res)) {
	case WALK_CT_NOCONN:
		st->flags = GSTEP_CT_NOCONN;
		stat_outcome(pp, p, false);
		return false;
	case WALK_CT_INVALID:
		st->flags = GSTEP_CT_INVALID;
		stat_outcome(pp, p, false);
		return false;
	default:
		st->entry = res->conn;
		stat_outcome(pp, p, true);
		return true;
	}
}

/* CT pipe @pp's DNAT table among @pipes (walk_ct_init()). */
__device__ static inline struct walk_ct_dnat_table
gpu_ct_dnat_table(const struct gpu_pipe *pipes, const struct gpu_pipe *pp)
{
	struct walk_ct_dnat_table dt = {NULL, NULL, NULL};

	if (pp->ct_dnat) {
		const struct gpu_pipe *t = &pipes[pp->ct_dnat_pipe];

		dt.pipe = t;
		dt.image = t->image;
		dt.entries = t->entries;
	}
	return dt;
}

/* The tracker of CT pipe @pp on one packet, in any order with the other
 * threads (ct_impl.h's concurrency). Out of line: one copy per kernel. */
__device__ __noinline__ static void
ct_track_any(const struct gpu_pipe *pp, const struct dpflow_ct_pkt *cp,
	     uint64_t now_ns, uint32_t user, const struct dpflow_ct_value *init,
	     struct dpflow_ct_result *cr, struct dpflow_ct_value *val)
{
	if (pp->ct_lookup_only)
		dpflow_ct_lookup_val_impl(pp->ct, cp, now_ns, cr, val);
	else
		dpflow_ct_track_impl(pp->ct, cp, now_ns, user, init, cr, val);
	if (val)
		dpflow_ct_reply_targets_impl(pp->ct, cr, val);
}

/*
 * A tracked packet (@hit from ct_end) of CT pipe @pp that keeps values:
 * its saved registers and the connection's NAT (walk_ct_values()).
 * Returns false when that drops the packet (@r says why).
 */
__device__ static bool ct_values_apply(const struct gpu_pipe *pp, bool hit,
				       struct dpflow_pkt_meta *m, uint8_t *buf,
				       const struct dpflow_ct_result *res,
				       const struct dpflow_ct_value *val,
				       struct gpu_result *r)
{
	unsigned reason;

	if (!hit || !pp->ct_values)
		return true;
	reason = walk_ct_values(pp, m, buf, res, val);
	if (!reason)
		return true;
	r->to = GRES_DROP;
	r->value = (uint16_t)reason;
	return false;
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
	const struct dpflow_plan_entry *e = &pp->entries[v];
	unsigned reason = pipe_actions(pp, e, v, m, buf, b, i, step, r);
	struct dpflow_plan_fwd f;
	uint16_t why = 0;

	if (reason) {
		r->to = GRES_DROP;
		r->value = (uint16_t)reason;
		return -1;
	}
	if (!walk_hit_fwd(pp, e, color, &f, &why)) {
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
	walk_pkt_start(m, port);
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
			struct dpflow_ct_value init, val;
			struct walk_ct_dnat_table dt =
			    gpu_ct_dnat_table(pipes, pp);
			uint32_t user = 0;
			bool hit = false;

			if (ct_begin(pp, (unsigned)p, buf, m, st, &cp, &user)) {
				ct_track_any(
				    pp, &cp, b->now_ns, user,
				    walk_ct_init(pp, &dt, m, &cp, &init), &cr,
				    pp->ct_values ? &val : NULL);
				hit = ct_end(pp, (unsigned)p, m, &cr, st);
			}
			if (!ct_values_apply(pp, hit, m, buf, &cr, &val, &r))
				break;
			p = ct_finish(pp, hit, m, buf, b, i, step, &r);
			continue;
		}
		{
			uint32_t v = pipe_match(pp, (unsigned)p, buf, m, st);
			unsigned color = DPFLOW_COLOR_GREEN;
			struct dpflow_meter *mt;

			if (v == WALK_MISS) {
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
