/*
 * The ordered burst kernel (gpu_flow_feat.cuh): one block, one thread per
 * packet, running the pipe graph as pipeline.c schedules it.
 *
 * Scheduling. Each packet waits at one pipe (s_cur) with an arrival key
 * (s_seq): its position in the burst at the root, then run * 256 + its
 * position in the run that forwarded it. The block loops as the CPU does:
 * every pipe with packets waiting, in id order, until none has; the
 * packets waiting at a pipe, sorted by arrival key, are exactly the CPU's
 * list for that pipe run, in its order ("rank").
 *
 * Within a run, what does not interact runs in parallel, and what does is
 * put in rank order:
 *  - meters: the hits of a run are grouped by meter; the first packet of
 *    each group (by rank) walks the group in rank order on a copy of the
 *    meter in shared memory, then stores the buckets back;
 *  - CT: packets are grouped by canonical key. First pass: each group's
 *    first packet walks the group in rank order while its packets find
 *    their connection (lookup + state machine only touch that
 *    connection's control word); at the first that finds none, the rest
 *    of the group is left for the second pass. Second pass (creating
 *    connections): a group whose two buckets no other pending group
 *    touches, when the table cannot fill up meanwhile, walks its pending
 *    packets by itself; the others are walked by one thread, in rank
 *    order. A connection is only created in its key's two buckets, only
 *    an expired connection is taken over, and whether one is expired does
 *    not change within a burst (one time for all), so these passes give
 *    the CPU's results exactly (docs/gpu.md, "Flow features on the GPU").
 *  - CT packets that cannot be tracked take the miss forwarding before the
 *    tracked ones (run_ct_pipe()'s first loop): their positions in the
 *    next pipes' lists come first.
 *
 * At the end each thread copies the final contents of what it changed
 * into the write-back logs.
 */
#include "gpu_flow_feat.cuh"

#define NOWHERE 0xffu /* s_cur: no pipe (done) */
#define NO_KEY	0xffffffffu

/* A tracked packet of a CT pipe run, by rank. */
struct sched_ct {
	struct dpflow_ct_key k;
	uint64_t h;
	uint32_t b1, b2;
	uint32_t user;
	uint16_t lead; /* rank of its group's first packet */
	uint8_t proto, tcp_flags;
	uint8_t from_lo;
	uint8_t valid;	/* tracked */
	uint8_t pend;	/* left for the second pass */
	uint8_t gpend;	/* leader: some of its group is pending */
	uint8_t serial; /* leader: its group goes to the serial walk */
};

union sched_scratch {
	struct {
		struct sched_ct c[GPU_SCHED_THREADS];
		struct dpflow_ct_result r[GPU_SCHED_THREADS];
		uint8_t has_init[GPU_SCHED_THREADS];
	} ct;
	struct {
		struct dpflow_meter m[GPU_SCHED_THREADS];
		uint32_t key[GPU_SCHED_THREADS];
		uint16_t len[GPU_SCHED_THREADS];
		uint8_t color[GPU_SCHED_THREADS];
	} mt;
};

/* What a thread keeps about its packet. */
struct sched_pkt {
	struct dpflow_pkt_meta *m;
	uint8_t *buf;
	struct gpu_step *steps;
	struct gpu_result r;
};

/* Shared state of the block. */
struct sched_shared {
	uint8_t cur[GPU_SCHED_THREADS];
	uint32_t seq[GPU_SCHED_THREADS];
	uint32_t word; /* thread 0's broadcast */
	union sched_scratch u;
};

/* Hand the packet on after a run: the next pipe at position @out_rank of
 * run @run, or done. */
__device__ static void sched_next(struct sched_shared *s, unsigned t, int next,
				  uint32_t run, unsigned out_rank)
{
	s->cur[t] = next < 0 ? NOWHERE : (uint8_t)next;
	s->seq[t] = run * GPU_SCHED_THREADS + out_rank;
}

/* Start a visit of the packet: its step, or NULL (and the outcome set)
 * when the path is full (cannot happen: the graph is acyclic). */
__device__ static struct gpu_step *sched_step(const struct gpu_sched_args *a,
					      struct sched_pkt *k)
{
	if (k->r.n_steps == a->path_max) {
		k->r.to = GRES_DROP;
		k->r.value = DPFLOW_DROP_FLOW_TOO_DEEP;
		return NULL;
	}
	return &k->steps[k->r.n_steps++];
}

/* ---- meters -------------------------------------------------------------- */

/* The meter log entry of a metered hit. */
__device__ static void meter_log_note(const struct gpu_sched_args *a,
				      const struct gpu_pipe *pp, unsigned t,
				      const struct dpflow_plan_entry *e)
{
	struct gpu_meter_wb *wb =
	    &a->meter_log[(size_t)pp->meter_slot * GPU_SCHED_THREADS + t];

	wb->idx = e->meter - 1;
	wb->used = e->meter_shared ? GMETER_SHARED : GMETER_PIPE;
}

/*
 * The meters of a run of a metered pipe: every thread of the block calls
 * it (it synchronises). @mine: the packet is in the run; @mt: its meter
 * (NULL: none), @key its identity; returns its colour.
 */
__device__ static unsigned
sched_meter(struct sched_shared *s, const struct gpu_sched_args *a, bool mine,
	    struct dpflow_meter *mt, uint32_t key, unsigned rank, unsigned n_in,
	    const struct dpflow_pkt_meta *m)
{
	unsigned color = DPFLOW_COLOR_GREEN;
	bool lead = mt != NULL;

	if (mine) { /* every rank of the run: no stale keys */
		s->u.mt.key[rank] = mt ? key : NO_KEY;
		s->u.mt.len[rank] = m->data_len;
		s->u.mt.color[rank] = m->color;
	}
	__syncthreads();
	for (unsigned r2 = 0; lead && r2 < rank; r2++)
		if (s->u.mt.key[r2] == key)
			lead = false;
	if (lead) {
		/* the group's packets in rank order, on a copy in shared
		 * memory: only this thread uses this meter in this run */
		struct dpflow_meter *sm = &s->u.mt.m[rank];

		*sm = *mt;
		for (unsigned r2 = rank; r2 < n_in; r2++)
			if (s->u.mt.key[r2] == key)
				s->u.mt.color[r2] =
				    (uint8_t)dpflow_meter_color_impl(
					sm, a->burst.now_ns, s->u.mt.len[r2],
					s->u.mt.color[r2]);
		dpflow_atomic_store64(&mt->tokens, sm->tokens);
		dpflow_atomic_store64(&mt->last_ns, sm->last_ns);
	}
	__syncthreads();
	if (mt)
		color = s->u.mt.color[rank];
	return color;
}

/* A run of non-CT pipe @p over the @n_in packets waiting there. */
__device__ static void sched_pipe(struct sched_shared *s,
				  const struct gpu_sched_args *a, unsigned p,
				  bool mine, unsigned rank, unsigned n_in,
				  uint32_t run, struct sched_pkt *k)
{
	const struct gpu_pipe *pp = &a->pipes[p];
	const unsigned t = threadIdx.x;
	struct dpflow_meter *mt = NULL;
	struct gpu_step *st = NULL;
	uint32_t v = TABLE_MISS, key = NO_KEY;
	unsigned color = DPFLOW_COLOR_GREEN, step = 0;

	if (mine) {
		step = k->r.n_steps;
		st = sched_step(a, k);
		if (st)
			v = pipe_match(pp, p, k->buf, k->m, st);
		if (v != TABLE_MISS) {
			const struct dpflow_plan_entry *e = &pp->entries[v];

			mt = entry_meter(pp, e);
			if (mt) {
				key = (e->meter_shared ? 0x80000000u : 0) |
				      (e->meter - 1);
				meter_log_note(a, pp, t, e);
			}
		}
	}
	if (pp->metered) /* the same for every thread */
		color = sched_meter(s, a, mine, mt, key, rank, n_in, k->m);
	if (!mine)
		return;
	if (mt)
		meter_note(k->m, st, color);
	if (!st) {
		sched_next(s, t, -1, run, rank);
		return;
	}
	sched_next(s, t,
		   v == TABLE_MISS ? fwd_apply(&pp->miss, true, k->m, &k->r)
				   : hit_finish(pp, v, color, k->m, k->buf,
						&a->burst, t, step, &k->r),
		   run, rank);
}

/* ---- connection tracking ------------------------------------------------ */

__device__ static bool ct_key_same(const struct sched_ct *x,
				   const struct sched_ct *y)
{
	if (x->h != y->h)
		return false;
	for (unsigned i = 0; i < 5; i++)
		if (x->k.w[i] != y->k.w[i])
			return false;
	return true;
}

__device__ static bool ct_buckets_meet(const struct sched_ct *x,
				       const struct sched_ct *y)
{
	return x->b1 == y->b1 || x->b1 == y->b2 || x->b2 == y->b1 ||
	       x->b2 == y->b2;
}

/*
 * The first pass of one packet: the start of dpflow_ct_process_key_impl()
 * when its connection exists (find, then the state machine on it).
 * Returns false, with nothing of the packet's own done but marking its
 * expired connection DEAD (as the CPU's find does), when the full
 * tracker must run.
 */
__device__ __noinline__ static bool ct_track_found(struct dpflow_ct_image *ct,
						   const struct sched_ct *c,
						   uint64_t now_ns,
						   struct dpflow_ct_result *r)
{
	uint32_t now_ms = (uint32_t)(now_ns / 1000000u);
	unsigned cls = c->proto == 6 ? dpflow_ct_tcp_class(c->tcp_flags)
				     : (unsigned)DPFLOW_CT_C_OTHER;
	struct dpflow_ct_loc l;
	uint64_t w = 0;
	uint32_t i;

	dpflow_ct_locate(ct, c->h, &l);
	r->conn = DPFLOW_TABLE_MISS;
	r->user = 0;
	r->state = DPFLOW_CT_NONE;
	r->dir = DPFLOW_CT_DIR_ORIG;
	r->flags = 0;
	r->drop = DPFLOW_CT_DROP_NONE;
	i = dpflow_ct_find(ct, &c->k, &l, now_ms, true, &w);
	if (i == DPFLOW_TABLE_MISS)
		return false;
	return dpflow_ct_update(ct, i, w, c->from_lo, cls, now_ms, r);
}

/* The full tracker on the packet of rank @r2. */
__device__ __noinline__ static void ct_track(struct sched_shared *s,
					     struct dpflow_ct_image *ct,
					     unsigned r2, uint64_t now_ns)
{
	const struct sched_ct *c = &s->u.ct.c[r2];

	dpflow_ct_process_key_impl(ct, &c->k, c->h, c->from_lo != 0, c->proto,
				   c->tcp_flags, now_ns, c->user,
				   &s->u.ct.r[r2]);
}

/* First pass of the group led by rank @lead. */
__device__ static void ct_pass_found(struct sched_shared *s,
				     struct dpflow_ct_image *ct, unsigned lead,
				     unsigned n_in, uint64_t now_ns)
{
	bool pend = false;

	for (unsigned r2 = lead; r2 < n_in; r2++) {
		struct sched_ct *c = &s->u.ct.c[r2];

		if (!c->valid || c->lead != lead)
			continue;
		if (!pend)
			pend = !ct_track_found(ct, c, now_ns, &s->u.ct.r[r2]);
		c->pend = pend;
	}
	s->u.ct.c[lead].gpend = pend;
}

/* Second pass: the pending packets of the group led by @lead (or, with
 * @lead NO_KEY, of every serial group), in rank order. */
__device__ static void ct_pass_create(struct sched_shared *s,
				      struct dpflow_ct_image *ct, uint32_t lead,
				      unsigned n_in, uint64_t now_ns)
{
	for (unsigned r2 = 0; r2 < n_in; r2++) {
		const struct sched_ct *c = &s->u.ct.c[r2];

		if (!c->valid || !c->pend)
			continue;
		if (lead == NO_KEY ? !s->u.ct.c[c->lead].serial
				   : c->lead != lead)
			continue;
		ct_track(s, ct, r2, now_ns);
	}
}

/* Count of tracked (@tracked) or untracked packets of rank below @rank. */
__device__ static unsigned ct_before(const struct sched_shared *s,
				     unsigned rank, bool tracked)
{
	unsigned n = 0;

	for (unsigned r2 = 0; r2 < rank; r2++)
		n += (s->u.ct.c[r2].valid != 0) == tracked;
	return n;
}

/* The tracker over the run's tracked packets (every thread calls it). */
__device__ static void sched_ct_track(struct sched_shared *s,
				      const struct gpu_pipe *pp, bool tracked,
				      unsigned rank, unsigned n_in,
				      uint64_t now_ns)
{
	struct dpflow_ct_image *ct = pp->ct;
	struct sched_ct *c = &s->u.ct.c[rank];
	unsigned n_pend;

	if (tracked) {
		c->lead = (uint16_t)rank;
		for (unsigned r2 = 0; r2 < rank; r2++)
			if (s->u.ct.c[r2].valid &&
			    ct_key_same(&s->u.ct.c[r2], c)) {
				c->lead = (uint16_t)r2;
				break;
			}
	}
	__syncthreads();
	if (tracked && c->lead == rank)
		ct_pass_found(s, ct, rank, n_in, now_ns);
	__syncthreads(); /* the leaders wrote their groups' pend flags */
	n_pend = (unsigned)__syncthreads_count(tracked && c->pend);
	if (!n_pend)
		return;
	/* the table cannot fill up during the pass: every reservation of
	 * the live count succeeds in any order */
	if (threadIdx.x == 0)
		s->word =
		    dpflow_atomic_load64(&ct->n_live) + n_pend <= ct->max_conns;
	__syncthreads();
	if (tracked && c->lead == rank && c->gpend) {
		bool serial = !s->word;

		for (unsigned r2 = 0; !serial && r2 < n_in; r2++) {
			const struct sched_ct *o = &s->u.ct.c[r2];

			serial = r2 != rank && o->valid && o->lead == r2 &&
				 o->gpend && ct_buckets_meet(c, o);
		}
		c->serial = serial;
	}
	__syncthreads();
	if (tracked && c->lead == rank && c->gpend && !c->serial)
		ct_pass_create(s, ct, rank, n_in, now_ns);
	if (threadIdx.x == 0)
		ct_pass_create(s, ct, NO_KEY, n_in, now_ns);
	__syncthreads();
}

/*
 * The tracker over the run's tracked packets of a serial CT pipe (every
 * thread calls it): one thread walks them in rank order, as the CPU
 * target does, with their values.
 */
__device__ static void sched_ct_serial(struct sched_shared *s,
				       const struct gpu_sched_args *a,
				       const struct gpu_pipe *pp, unsigned n_in,
				       uint64_t now_ns)
{
	struct dpflow_ct_value *init = a->ct_vals, *val = a->ct_vals + n_in;

	__syncthreads(); /* every packet's key, init block and flags */
	if (threadIdx.x == 0)
		for (unsigned r2 = 0; r2 < n_in; r2++) {
			const struct sched_ct *c = &s->u.ct.c[r2];

			if (!c->valid)
				continue;
			dpflow_ct_track_key_impl(
			    pp->ct, &c->k, c->h, c->from_lo != 0, c->proto,
			    c->tcp_flags, now_ns, c->user,
			    s->u.ct.has_init[r2] ? &init[r2] : NULL,
			    &s->u.ct.r[r2], &val[r2]);
			dpflow_ct_reply_targets_impl(pp->ct, &s->u.ct.r[r2],
						     &val[r2]);
		}
	__syncthreads();
}

/* A run of CT pipe @p over the @n_in packets waiting there. */
__device__ static void sched_ct(struct sched_shared *s,
				const struct gpu_sched_args *a, unsigned p,
				bool mine, unsigned rank, unsigned n_in,
				uint32_t run, struct sched_pkt *k)
{
	const struct gpu_pipe *pp = &a->pipes[p];
	const unsigned t = threadIdx.x;
	struct sched_ct *c = &s->u.ct.c[rank];
	struct gpu_step *st = NULL;
	struct dpflow_ct_pkt cp;
	unsigned step = 0, n_untracked, out;
	bool tracked = false, hit = false;
	const bool serial = gpu_ct_serial(pp, pp->ct);
	const struct walk_ct_dnat_table dt = gpu_ct_dnat_table(a->pipes, pp);

	if (mine) {
		uint32_t user = 0;

		step = k->r.n_steps;
		st = sched_step(a, k);
		tracked = st && ct_begin(pp, p, k->buf, k->m, st, &cp, &user);
		c->valid = tracked;
		c->pend = c->gpend = c->serial = 0;
		if (tracked) {
			struct dpflow_ct_loc l;

			c->from_lo = dpflow_ct_key_make(&cp, &c->k);
			c->h = dpflow_ct_hash(&c->k, pp->ct->seed);
			dpflow_ct_locate(pp->ct, c->h, &l);
			c->b1 = l.b1;
			c->b2 = l.b2;
			c->proto = cp.proto;
			c->tcp_flags = cp.tcp_flags;
			c->user = user;
			s->u.ct.has_init[rank] =
			    walk_ct_init(pp, &dt, k->m, &cp,
					 &a->ct_vals[rank]) != NULL;
		}
	}
	n_untracked = (unsigned)__syncthreads_count(mine && !tracked);
	if (pp->ct_lookup_only) {
		if (tracked) /* reads only: any order */
			ct_track_any(pp, &cp, a->burst.now_ns, 0, NULL,
				     &s->u.ct.r[rank],
				     &a->ct_vals[n_in + rank]);
	} else if (serial) {
		sched_ct_serial(s, a, pp, n_in, a->burst.now_ns);
	} else {
		sched_ct_track(s, pp, tracked, rank, n_in, a->burst.now_ns);
	}
	if (!mine)
		return;
	if (!st) {
		sched_next(s, t, -1, run, rank);
		return;
	}
	out = tracked ? n_untracked + ct_before(s, rank, true)
		      : ct_before(s, rank, false);
	if (tracked) {
		const struct dpflow_ct_result *res = &s->u.ct.r[rank];

		hit = ct_end(pp, p, k->m, res, st);
		if (!ct_values_apply(pp, hit, k->m, k->buf, res,
				     &a->ct_vals[n_in + rank], &k->r)) {
			sched_next(s, t, -1, run, out);
			return;
		}
		if (!pp->ct_lookup_only && !serial) {
			struct gpu_ct_wb *wb = &a->ct_log[pp->ct_slot].pkt[t];

			wb->b1 = c->b1;
			wb->b2 = c->b2;
			wb->conn = res->flags & DPFLOW_CT_R_NEW
				       ? res->conn
				       : DPFLOW_TABLE_MISS;
		}
	}
	sched_next(s, t,
		   ct_finish(pp, hit, k->m, k->buf, &a->burst, t, step, &k->r),
		   run, out);
}

/* ---- the kernel ---------------------------------------------------------- */

/* A serial CT pipe's touched slots into its log: thread @t of @n. */
__device__ static void sched_log_touched(struct dpflow_ct_image *ct,
					 struct gpu_ct_log *log, unsigned t,
					 unsigned n)
{
	const uint32_t *idx = (const uint32_t *)((uint8_t *)ct + ct->touch_off);
	uint32_t total = idx[0];
	uint32_t slots = ct->n_buckets * DPFLOW_CT_SLOTS;

	if (t == 0) {
		log->n_touch = total;
		for (unsigned p = 0; p < ct->n_pools; p++)
			log->pools[p] = dpflow_ct_pools(ct)[p];
	}
	if (total > GPU_CT_TOUCH_MAX)
		return; /* overflowed: the host copies the image */
	for (uint32_t k = t; k < total; k += n) {
		struct gpu_ct_touch *e = &log->touch[k];
		uint32_t i = idx[1 + k];

		if (i >= slots) /* cannot happen */
			i = 0;
		e->i = i;
		e->ctrl = dpflow_atomic_load64(&dpflow_ct_ctrl(ct)[i]);
		e->slot = dpflow_ct_slots(ct)[i];
		e->val = dpflow_ct_vals(ct)[i];
	}
}

/* Copy what thread @t's packet changed into the logs (after the runs). */
__device__ static void sched_log(const struct gpu_sched_args *a, unsigned t)
{
	for (unsigned s = 0; s < a->n_ct; s++) {
		const struct gpu_pipe *pp = &a->pipes[a->ct_pipe[s]];
		struct dpflow_ct_image *ct = pp->ct;
		struct gpu_ct_wb *wb = &a->ct_log[s].pkt[t];
		const uint64_t *ctrl = dpflow_ct_ctrl(ct);

		if (t == 0) {
			for (unsigned w = 0; w < DPFLOW_CT_STAT__COUNT; w++)
				a->ct_log[s].stats[w] =
				    dpflow_atomic_load64(&ct->stats[w]);
			a->ct_log[s].n_live = dpflow_atomic_load64(&ct->n_live);
		}
		if (ct->touch_off)
			sched_log_touched(ct, &a->ct_log[s], t, a->n);
		if (wb->b1 == UINT32_MAX)
			continue;
		for (unsigned j = 0; j < DPFLOW_CT_SLOTS; j++) {
			wb->ctrl[0][j] = dpflow_atomic_load64(
			    &ctrl[(size_t)wb->b1 * DPFLOW_CT_SLOTS + j]);
			wb->ctrl[1][j] = dpflow_atomic_load64(
			    &ctrl[(size_t)wb->b2 * DPFLOW_CT_SLOTS + j]);
		}
		if (wb->conn != DPFLOW_TABLE_MISS)
			wb->slot = dpflow_ct_slots(ct)[wb->conn];
	}
	for (unsigned s = 0; s < a->n_metered; s++) {
		const struct gpu_pipe *pp = &a->pipes[a->meter_pipe[s]];
		struct gpu_meter_wb *wb =
		    &a->meter_log[(size_t)s * GPU_SCHED_THREADS + t];
		struct dpflow_meter *mt;

		if (!wb->used)
			continue;
		mt = dpflow_meter_at(
		    wb->used == GMETER_SHARED ? pp->shared_meters : pp->meters,
		    wb->idx);
		wb->tokens = dpflow_atomic_load64(&mt->tokens);
		wb->last_ns = dpflow_atomic_load64(&mt->last_ns);
	}
}

__global__ void __launch_bounds__(GPU_SCHED_THREADS)
    gpu_flow_sched_kernel(const struct gpu_sched_args a)
{
	__shared__ struct sched_shared s;
	const unsigned t = threadIdx.x;
	const bool active = t < a.n;
	struct sched_pkt k;
	uint32_t run = 1;

	memset(&k, 0, sizeof(k));
	if (t == 0 && a.clock)
		*(volatile unsigned long long *)a.clock = a.burst.now_ns;
	s.cur[t] = NOWHERE;
	if (t == 0)
		for (unsigned c = 0; c < a.n_ct; c++) {
			struct dpflow_ct_image *ct = a.pipes[a.ct_pipe[c]].ct;

			if (ct->touch_off) /* a serial pipe's log starts */
				*(uint32_t *)((uint8_t *)ct + ct->touch_off) =
				    0;
		}
	if (active) {
		for (unsigned c = 0; c < a.n_ct; c++)
			a.ct_log[c].pkt[t].b1 = UINT32_MAX;
		for (unsigned c = 0; c < a.n_metered; c++)
			a.meter_log[(size_t)c * GPU_SCHED_THREADS + t].used = 0;
		k.m =
		    (struct dpflow_pkt_meta *)(a.stage + (size_t)t * a.stride);
		k.buf = (uint8_t *)(k.m + 1);
		k.steps = a.path + (size_t)t * a.path_max;
		if (gpu_flow_pkt_start(a.root, a.port, k.m, k.buf, &k.r))
			s.cur[t] = (uint8_t)a.root;
		s.seq[t] = t; /* the root's list is the burst in order */
	}
	for (;;) {
		bool more = false;

		for (unsigned p = 0; p < a.n_pipes; p++) {
			bool mine = s.cur[t] == p;
			unsigned n_in = (unsigned)__syncthreads_count(mine);
			unsigned rank = 0;

			if (!n_in)
				continue;
			more = true;
			if (mine)
				for (unsigned u = 0; u < blockDim.x; u++)
					rank += s.cur[u] == p &&
						s.seq[u] < s.seq[t];
			__syncthreads();
			if (a.pipes[p].type == DPFLOW_PIPE_CT)
				sched_ct(&s, &a, p, mine, rank, n_in, run, &k);
			else
				sched_pipe(&s, &a, p, mine, rank, n_in, run,
					   &k);
			run++;
		}
		if (!more)
			break;
	}
	/* the last __syncthreads_count made every thread's writes visible */
	if (!active)
		return;
	if (k.r.to == GRES_DROP)
		k.m->drop = (uint8_t)k.r.value;
	a.res[t] = k.r;
	sched_log(&a, t);
}

cudaError_t gpu_flow_sched_launch(const struct gpu_sched_args *a,
				  cudaStream_t stream)
{
	gpu_flow_sched_kernel<<<1, GPU_SCHED_THREADS, 0, stream>>>(*a);
	return cudaGetLastError();
}
