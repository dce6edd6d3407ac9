/*
 * Live entry changes under load, one test per table kind (BASIC, ACL,
 * CONTROL, LPM): a writer applies random batches (adds, removes, updates,
 * and replaces: a remove and an add of the same match in one batch) of
 * 1..4096 operations without pausing, while two data threads send bursts of
 * random keys, live and absent. Every entry sets outer.ipv4.src to its own
 * colour and forwards to one of four handlers, so a packet's outcome (miss, or
 * colour and route) shows which entry it hit.
 *
 * The writer keeps a naive reference: the outcome of every key after each
 * batch, as per-key histories pruned below the oldest state a worker may
 * still ask about. It bumps a version counter before and after
 * dpflow_entries_process() (odd: batch k + 1 in flight). A burst that read
 * versions vb before and va after may have seen states vb / 2 ..
 * (va + 1) / 2; its outcomes must all equal the reference of ONE of those
 * states. Bursts that spanned a batch are counted and must exist, so the
 * tests cannot pass vacuously.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dpflow/dpflow.h"
#include "dpflow/flow.h"

#define BURST	      DPFLOW_BURST_MAX
#define WORKERS	      2
#define ROUTES	      4
#define BATCH_MAX     4096
#define RUN_MIN_S     2.0 /* the writer runs at least this long */
#define RUN_MAX_S     6.0 /* and at most this long */
#define BURSTS_MIN    3000
#define BURSTS_ASSERT 1000
#define SPANNED_MIN   100

/* Frame offsets of the packets built here: Ethernet, IPv4 without
 * options, UDP (build_frames() checks them). */
#define OFF_IPV4_SRC 26
#define OFF_L4_SPORT 34
#define OFF_UDP_CSUM 40
#define FRAME_MAX    128

#define DST_A	 0x0a000002u /* 10.0.0.2 */
#define DST_B	 0x0a000003u
#define LPM_BASE 0x0a000000u /* 10.0.0.0/20 holds the LPM keys */
#define DPORT_LO 20000	     /* first dport of the BASIC and ACL keys */

enum kind { K_BASIC, K_ACL, K_CONTROL, K_LPM };

/* LPM rule slots: node (1 << d | p) is prefix p of length 20 + d inside
 * 10.0.0.0/20 (d = 0..12); two more slots are 10.0.0.0/16 and /12. */
#define LPM_DEPTH    12
#define LPM_NODES    (2u << LPM_DEPTH)
#define LPM_SLOT_16  LPM_NODES
#define LPM_SLOT_12  (LPM_NODES + 1)
#define LPM_SLOTS    (LPM_NODES + 2)
#define LPM_KEYS     (1u << LPM_DEPTH)
#define BASIC_KEYS   8192
#define ACL_DPORTS   2048 /* keys: (dport, dst A or B) */
#define ACL_RULES    2048
#define CTRL_DPORTS  512
#define CTRL_RULES   256
#define OUTCOME_MISS 0u

/* ---- the reference: per-key outcome histories ---------------------------- */

struct hist_rec {
	uint32_t state, outcome;
};

struct hist {
	uint32_t n, cap;
	struct hist_rec *r;
};

/* Outcome of @h in state @k: the newest record at or before @k (records
 * older than every state a worker may ask about are pruned). */
static uint32_t hist_at(const struct hist *h, uint32_t k)
{
	for (uint32_t j = h->n; j-- > 0;)
		if (h->r[j].state <= k)
			return h->r[j].outcome;
	return OUTCOME_MISS; /* state 0: the empty table */
}

static bool hist_push(struct hist *h, uint32_t state, uint32_t outcome,
		      uint32_t keep_from)
{
	uint32_t j = 0;

	/* drop records superseded at or before @keep_from */
	while (j + 1 < h->n && h->r[j + 1].state <= keep_from)
		j++;
	if (j) {
		memmove(h->r, h->r + j, (h->n - j) * sizeof(*h->r));
		h->n -= j;
	}
	if (h->n == h->cap) {
		uint32_t cap = h->cap ? 2 * h->cap : 4;
		struct hist_rec *r = realloc(h->r, cap * sizeof(*r));

		if (!r)
			return false;
		h->r = r;
		h->cap = cap;
	}
	h->r[h->n].state = state;
	h->r[h->n].outcome = outcome;
	h->n++;
	return true;
}

/* ---- the writer's entries ------------------------------------------------ */

struct rule {
	bool live;
	struct dpflow_entry *e;
	uint32_t outcome; /* colour << 2 | route */
	/* ACL and CONTROL */
	bool range;
	uint16_t dval, dmask, dlo, dhi;
	uint8_t dst_sel; /* 0: any, 1: DST_A, 2: DST_B */
	uint32_t priority;
};

struct worker {
	struct churn *c;
	unsigned id;
	uint64_t rng;
	pthread_t thread;
	uint32_t need; /* oldest state this worker may still check */
	unsigned bursts, spanned, violations;
	uint64_t pkts;
	char first[320];
};

struct churn {
	enum kind kind;
	struct dpflow_ctx *ctx;
	struct dpflow_pipe *pipe;
	struct dpflow_queue *q;
	uint64_t rng;
	/* rules, by slot: BASIC a key, LPM a prefix, ACL/CONTROL a rule */
	unsigned n_slots, n_live;
	struct rule *rules;
	unsigned *live_list, *live_pos; /* live slots, and where in it */
	unsigned *free_list, n_free;	/* ACL/CONTROL: unused slots */
	unsigned *freed, n_freed;	/* slots removed by this batch */
	unsigned n_returned;		/* entries it frees in the pipe */
	uint32_t *stamp, batch;		/* slot touched by this batch */
	unsigned pipe_free;		/* entries the pipe can still take */
	/* the reference: key -> outcome now, and its history */
	unsigned nq;
	uint32_t *cur, *next, *best;
	struct hist *h;
	pthread_mutex_t lock;
	/* 2k: state k is published; 2k + 1: batch k + 1 in flight */
	uint32_t version;
	int stop;
	unsigned batches, max_batch;
	uint64_t ops, replaces, updates;
	char writer_err[DPFLOW_ERROR_MSG_MAX + 64];
	uint8_t *frames; /* every key's frame, FRAME_MAX apart */
	uint16_t frame_len;
	struct worker w[WORKERS];
};

static uint64_t rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static unsigned rnd_below(uint64_t *s, unsigned n)
{
	return (unsigned)(rnd(s) % n);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void put_be(uint8_t *p, uint32_t v, unsigned bytes)
{
	for (unsigned i = 0; i < bytes; i++)
		p[i] = (uint8_t)(v >> (8 * (bytes - 1 - i)));
}

static uint32_t get_be(const uint8_t *p, unsigned bytes)
{
	uint32_t v = 0;

	for (unsigned i = 0; i < bytes; i++)
		v = v << 8 | p[i];
	return v;
}

/* ---- data threads ---------------------------------------------------------
 */

/* What the handlers saw of the current burst, per data thread. */
struct burst_rec {
	uint32_t out[BURST];
	bool seen[BURST];
	unsigned dup;
};

static __thread struct burst_rec *tl_rec;

/* Every packet ends here: @arg is 0 for a miss, else route + 1. The burst
 * position travels in the source port. */
static void on_pkt(void *arg, struct dpflow_pool *pool, const uint32_t *idx,
		   uint16_t n)
{
	uint32_t route = (uint32_t)(uintptr_t)arg;

	for (uint16_t i = 0; i < n; i++) {
		const uint8_t *f = dpflow_pkt_data(pool, idx[i]);
		uint32_t pos = get_be(f + OFF_L4_SPORT, 2);
		uint32_t colour = get_be(f + OFF_IPV4_SRC, 4);

		if (pos >= BURST || tl_rec->seen[pos]) {
			tl_rec->dup++;
			continue;
		}
		tl_rec->seen[pos] = true;
		tl_rec->out[pos] = route ? colour << 2 | (route - 1) : 0;
	}
	dpflow_pool_free_bulk(pool, idx, n);
}

/* The packet for key @q: its dport and destination. */
static void key_fields(const struct churn *c, unsigned q, uint16_t *dport,
		       uint32_t *dst)
{
	*dport = 53;
	*dst = DST_A;
	switch (c->kind) {
	case K_BASIC:
		*dport = (uint16_t)(DPORT_LO + q);
		break;
	case K_ACL:
	case K_CONTROL:
		*dport = (uint16_t)(DPORT_LO + q / 2);
		*dst = q % 2 ? DST_B : DST_A;
		break;
	case K_LPM:
		*dst = LPM_BASE + q;
		break;
	}
}

/* Build the frame of every key once (source port 0, UDP checksum 0: none,
 * so the burst position can be written into the source port). */
static void build_frames(struct churn *c)
{
	c->frames = calloc(c->nq, FRAME_MAX);
	c->frame_len = 0;
	cr_assert_not_null(c->frames);
	for (unsigned q = 0; q < c->nq; q++) {
		uint8_t *f = c->frames + (size_t)q * FRAME_MAX;
		struct dpflow_gen_spec s;
		uint32_t dst, len;
		uint16_t dport;

		key_fields(c, q, &dport, &dst);
		memset(&s, 0, sizeof(s));
		s.has_eth = true;
		s.outer.l3_type = DPFLOW_L3_IPV4;
		s.outer.l4_type = DPFLOW_L4_UDP;
		put_be(s.outer.src, 0x0a000001u, 4);
		put_be(s.outer.dst, dst, 4);
		s.outer.dport = dport;
		s.outer.ttl = 64;
		memset(s.outer.ipv6_ext, 0xff, sizeof(s.outer.ipv6_ext));
		len = dpflow_gen_build(&s, f, FRAME_MAX);
		cr_assert(len > 0 && (!c->frame_len || len == c->frame_len));
		c->frame_len = (uint16_t)len;
		/* the offsets the handler reads */
		cr_assert_eq(get_be(f + 12, 2), 0x0800);
		cr_assert_eq(f[14], 0x45);
		cr_assert_eq(f[23], 17);
		cr_assert_eq(get_be(f + OFF_IPV4_SRC, 4), 0x0a000001u);
		cr_assert_eq(get_be(f + OFF_L4_SPORT + 2, 2), dport);
		put_be(f + OFF_UDP_CSUM, 0, 2);
	}
}

static void make_pkt(const struct churn *c, struct dpflow_pool *pool,
		     uint32_t idx, unsigned q, uint16_t pos)
{
	uint8_t *f = dpflow_pkt_data(pool, idx);

	memcpy(f, c->frames + (size_t)q * FRAME_MAX, c->frame_len);
	put_be(f + OFF_L4_SPORT, pos, 2);
	dpflow_pool_meta(pool, idx)->data_len = c->frame_len;
}

/* Does one state in [lo, hi] explain every outcome of the burst? */
static bool burst_consistent(struct churn *c, struct worker *w,
			     const unsigned *keys, unsigned n, uint32_t lo,
			     uint32_t hi, uint32_t vb, uint32_t va)
{
	bool ok = false;

	pthread_mutex_lock(&c->lock);
	for (uint32_t k = lo; k <= hi && !ok; k++) {
		ok = true;
		for (unsigned i = 0; i < n && ok; i++)
			ok = hist_at(&c->h[keys[i]], k) == tl_rec->out[i];
	}
	if (!ok && !w->first[0])
		/* name a packet that the oldest state does not explain */
		for (unsigned i = 0; i < n; i++) {
			uint32_t a = hist_at(&c->h[keys[i]], lo);

			if (tl_rec->out[i] == a)
				continue;
			snprintf(w->first, sizeof(w->first),
				 "worker %u burst %u (versions %u..%u, "
				 "states %u..%u, %u packets): key %u at %u "
				 "got %#x, state %u says %#x, state %u "
				 "says %#x",
				 w->id, w->bursts, vb, va, lo, hi, n, keys[i],
				 i, tl_rec->out[i], lo, a, hi,
				 hist_at(&c->h[keys[i]], hi));
			break;
		}
	pthread_mutex_unlock(&c->lock);
	return ok;
}

static void *worker_main(void *arg)
{
	struct worker *w = (struct worker *)arg;
	struct churn *c = w->c;
	struct dpflow_pool *pool = dpflow_ctx_pool(c->ctx);
	struct burst_rec rec;
	unsigned keys[BURST];
	uint32_t idx[BURST];

	tl_rec = &rec;
	dpflow_ctx_thread_online(c->ctx);
	while (!__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE)) {
		unsigned n = rnd_below(&w->rng, 8) == 0
				 ? 1 + rnd_below(&w->rng, BURST)
				 : BURST - rnd_below(&w->rng, BURST / 4);
		uint32_t vb, va, lo, hi;

		if (dpflow_pool_alloc_bulk(pool, idx, n)) {
			dpflow_ctx_quiescent(c->ctx);
			continue;
		}
		for (unsigned i = 0; i < n; i++) {
			keys[i] = rnd_below(&w->rng, c->nq);
			make_pkt(c, pool, idx[i], keys[i], (uint16_t)i);
		}
		memset(&rec, 0, sizeof(rec));

		vb = __atomic_load_n(&c->version, __ATOMIC_ACQUIRE);
		__atomic_store_n(&w->need, vb / 2, __ATOMIC_SEQ_CST);
		dpflow_ctx_process_burst(c->ctx, 0, idx, (uint16_t)n);
		va = __atomic_load_n(&c->version, __ATOMIC_ACQUIRE);
		dpflow_ctx_quiescent(c->ctx);

		lo = vb / 2;
		hi = (va + 1) / 2;
		__atomic_store_n(&w->spanned, w->spanned + (va != vb),
				 __ATOMIC_RELAXED);
		w->pkts += n;
		for (unsigned i = 0; i < n; i++)
			if (!rec.seen[i]) {
				rec.dup++;
				rec.out[i] = UINT32_MAX;
			}
		if (rec.dup || !burst_consistent(c, w, keys, n, lo, hi, vb, va))
			w->violations++;
		if (rec.dup && !w->first[0])
			snprintf(w->first, sizeof(w->first),
				 "worker %u burst %u: %u packets lost or "
				 "seen twice",
				 w->id, w->bursts, rec.dup);
		__atomic_store_n(&w->bursts, w->bursts + 1, __ATOMIC_RELEASE);
	}
	dpflow_ctx_thread_offline(c->ctx);
	tl_rec = NULL;
	return NULL;
}

/* ---- the writer ---------------------------------------------------------- */

static void live_add(struct churn *c, unsigned slot)
{
	c->rules[slot].live = true;
	c->live_pos[slot] = c->n_live;
	c->live_list[c->n_live++] = slot;
}

static void live_del(struct churn *c, unsigned slot)
{
	unsigned pos = c->live_pos[slot], last = c->live_list[--c->n_live];

	c->live_list[pos] = last;
	c->live_pos[last] = pos;
	c->rules[slot].live = false;
}

/* LPM slot -> prefix. */
static uint32_t lpm_prefix(unsigned slot, uint8_t *len)
{
	unsigned d = 0;

	if (slot == LPM_SLOT_16 || slot == LPM_SLOT_12) {
		*len = slot == LPM_SLOT_16 ? 16 : 12;
		return LPM_BASE;
	}
	while ((slot >> (d + 1)) != 0)
		d++;
	*len = (uint8_t)(20 + d);
	return LPM_BASE | (slot - (1u << d)) << (LPM_DEPTH - d);
}

/* A new match for ACL/CONTROL slot @slot (masks, ranges, wildcards). */
static void acl_new_match(struct churn *c, struct rule *r, unsigned dports)
{
	uint16_t d = (uint16_t)(DPORT_LO + rnd_below(&c->rng, dports));
	unsigned how = rnd_below(&c->rng, 64);

	r->range = c->kind == K_ACL && how < 32;
	if (r->range) {
		unsigned lo = d > 16 ? d - rnd_below(&c->rng, 16) : d;
		unsigned hi = lo + rnd_below(&c->rng, 64);

		r->dlo = (uint16_t)lo;
		r->dhi = (uint16_t)(hi > 0xffff ? 0xffff : hi);
	} else if (how == 63) {
		r->dval = 0;
		r->dmask = 0; /* any dport */
	} else {
		/* any mask over the low 6 bits, prefix or not */
		r->dmask = (uint16_t)(0xffff & ~rnd_below(&c->rng, 64));
		r->dval = d & r->dmask;
	}
	r->dst_sel = (uint8_t)rnd_below(&c->rng, 3);
}

/* Fill @e for slot @slot with a new colour and route (and for ACL and
 * CONTROL a new priority). */
static void new_entry(struct churn *c, unsigned slot,
		      struct dpflow_entry_cfg *e)
{
	struct rule *r = &c->rules[slot];
	uint32_t colour = 1 + rnd_below(&c->rng, (1u << 24) - 1);
	uint32_t route = rnd_below(&c->rng, ROUTES);
	uint8_t len;

	memset(e, 0, sizeof(*e));
	r->outcome = colour << 2 | route;
	put_be(e->action_value[0], colour, 4);
	e->fwd.kind = DPFLOW_FWD_HANDLER;
	e->fwd.handler = on_pkt;
	e->fwd.handler_arg = (void *)(uintptr_t)(route + 1);
	switch (c->kind) {
	case K_BASIC:
		put_be(e->key, DPORT_LO + slot, 2);
		break;
	case K_LPM:
		put_be(e->key, lpm_prefix(slot, &len), 4);
		e->prefix_len = len;
		break;
	case K_ACL:
	case K_CONTROL:
		/* unique among live rules: the slot is in the low bits */
		r->priority = rnd_below(&c->rng, 1u << 12) << 16 | slot;
		e->priority = r->priority;
		if (r->range) {
			e->range_set = 1;
			e->range_lo[0] = r->dlo;
			e->range_hi[0] = r->dhi;
		} else {
			put_be(e->key, r->dval, 2);
			put_be(e->mask, r->dmask, 2);
		}
		if (r->dst_sel) {
			put_be(e->key + 2, r->dst_sel == 1 ? DST_A : DST_B, 4);
			put_be(e->mask + 2, 0xffffffffu, 4);
		}
		break;
	}
}

static bool queue_add(struct churn *c, unsigned slot)
{
	struct dpflow_entry_cfg e;
	struct dpflow_error err;

	new_entry(c, slot, &e);
	c->rules[slot].e = dpflow_entry_add(c->q, c->pipe, &e, NULL, &err);
	if (!c->rules[slot].e) {
		snprintf(c->writer_err, sizeof(c->writer_err), "entry_add: %s",
			 err.msg);
		return false;
	}
	c->pipe_free--;
	return true;
}

static bool queue_update(struct churn *c, unsigned slot)
{
	struct dpflow_entry_cfg e;
	struct dpflow_error err;
	struct dpflow_entry *ne;

	new_entry(c, slot, &e);
	ne = dpflow_entry_update(c->q, c->rules[slot].e, &e, NULL, &err);
	if (!ne) {
		snprintf(c->writer_err, sizeof(c->writer_err),
			 "entry_update: %s", err.msg);
		return false;
	}
	c->rules[slot].e = ne;
	c->pipe_free--;
	return true;
}

static bool queue_remove(struct churn *c, unsigned slot)
{
	if (dpflow_entry_remove(c->q, c->rules[slot].e, NULL)) {
		snprintf(c->writer_err, sizeof(c->writer_err),
			 "entry_remove of slot %u failed", slot);
		return false;
	}
	return true;
}

/* A slot for one operation: BASIC and LPM pick a key or prefix (live or
 * not), ACL and CONTROL a live rule or a free slot. */
static unsigned pick_slot(struct churn *c)
{
	if (c->kind == K_BASIC)
		return rnd_below(&c->rng, c->n_slots);
	if (c->kind == K_LPM) {
		unsigned d = rnd_below(&c->rng, LPM_DEPTH + 2);

		if (d > LPM_DEPTH)
			return rnd_below(&c->rng, 2) ? LPM_SLOT_16
						     : LPM_SLOT_12;
		return 1u << d | rnd_below(&c->rng, 1u << d);
	}
	if (c->n_free &&
	    (!c->n_live || rnd_below(&c->rng, c->n_slots) >= c->n_live))
		return c->free_list[--c->n_free];
	return c->n_live ? c->live_list[rnd_below(&c->rng, c->n_live)]
			 : UINT32_MAX;
}

/* Queue one random batch of @size operations and update the rules. */
static bool make_batch(struct churn *c, unsigned size)
{
	unsigned done = 0, tries = 0;
	bool acl = c->kind == K_ACL || c->kind == K_CONTROL;

	c->batch++;
	c->n_freed = 0;
	c->n_returned = 0;
	while (done < size && tries++ < 4 * size) {
		unsigned slot = pick_slot(c), how;
		struct rule *r;

		if (slot == UINT32_MAX)
			break;
		r = &c->rules[slot];
		if (c->stamp[slot] == c->batch)
			continue; /* one operation per key and rule */
		if (!r->live && !c->pipe_free) {
			if (acl)
				c->free_list[c->n_free++] = slot;
			break;
		}
		c->stamp[slot] = c->batch;
		how = r->live ? rnd_below(&c->rng, 6) : 6;
		if (how < 6 && how >= 3 && !c->pipe_free)
			how = 0; /* an update takes a free entry too */
		if (how == 6) {
			if (acl)
				acl_new_match(c, r,
					      c->kind == K_ACL ? ACL_DPORTS
							       : CTRL_DPORTS);
			if (!queue_add(c, slot))
				return false;
			live_add(c, slot);
		} else if (how < 3) {
			if (!queue_remove(c, slot))
				return false;
			live_del(c, slot);
			c->freed[c->n_freed++] = slot;
			c->n_returned++;
		} else if (how == 3) {
			/* a remove and an add of the same match */
			if (!queue_remove(c, slot) || !queue_add(c, slot))
				return false;
			c->replaces++;
			c->n_returned++;
		} else {
			/* an update: ACL and CONTROL rules move too */
			if (acl)
				acl_new_match(c, r,
					      c->kind == K_ACL ? ACL_DPORTS
							       : CTRL_DPORTS);
			if (!queue_update(c, slot))
				return false;
			c->updates++;
			c->n_returned++;
		}
		done++;
	}
	c->ops += done;
	if (done > c->max_batch)
		c->max_batch = done;
	return true;
}

/* The reference after the batch: every key's outcome, naively. */
static void resolve(struct churn *c)
{
	switch (c->kind) {
	case K_BASIC:
		for (unsigned q = 0; q < c->nq; q++)
			c->next[q] = c->rules[q].live ? c->rules[q].outcome
						      : OUTCOME_MISS;
		break;
	case K_LPM:
		for (unsigned q = 0; q < c->nq; q++) {
			static const unsigned shorter[] = {LPM_SLOT_16,
							   LPM_SLOT_12};
			uint32_t o = OUTCOME_MISS;
			bool found = false;

			for (unsigned d = LPM_DEPTH + 1; d-- > 0 && !found;) {
				unsigned s = 1u << d | q >> (LPM_DEPTH - d);

				if (c->rules[s].live) {
					o = c->rules[s].outcome;
					found = true;
				}
			}
			for (unsigned i = 0; i < 2 && !found; i++)
				if (c->rules[shorter[i]].live) {
					o = c->rules[shorter[i]].outcome;
					found = true;
				}
			c->next[q] = o;
		}
		break;
	case K_ACL:
	case K_CONTROL: {
		unsigned dports = c->nq / 2;

		for (unsigned q = 0; q < c->nq; q++) {
			c->next[q] = OUTCOME_MISS;
			c->best[q] = UINT32_MAX;
		}
		for (unsigned i = 0; i < c->n_live; i++) {
			const struct rule *r = &c->rules[c->live_list[i]];
			unsigned lo, hi;

			if (r->range) {
				lo = r->dlo;
				hi = r->dhi;
			} else if (!r->dmask) {
				lo = DPORT_LO;
				hi = DPORT_LO + dports - 1;
			} else {
				lo = r->dval & ~63u;
				hi = lo + 63;
			}
			if (lo < DPORT_LO)
				lo = DPORT_LO;
			if (hi > DPORT_LO + dports - 1)
				hi = DPORT_LO + dports - 1;
			for (unsigned d = lo; d <= hi; d++) {
				if (!r->range && (d & r->dmask) != r->dval)
					continue;
				for (unsigned s = 0; s < 2; s++) {
					unsigned q = (d - DPORT_LO) * 2 + s;

					if (r->dst_sel && r->dst_sel != s + 1)
						continue;
					if (r->priority < c->best[q]) {
						c->best[q] = r->priority;
						c->next[q] = r->outcome;
					}
				}
			}
		}
		break;
	}
	}
}

/* Record state @state's outcomes (before its batch is published). */
static bool publish_reference(struct churn *c, uint32_t state)
{
	uint32_t keep_from = UINT32_MAX;
	bool ok = true;

	for (unsigned i = 0; i < WORKERS; i++) {
		uint32_t need =
		    __atomic_load_n(&c->w[i].need, __ATOMIC_SEQ_CST);

		if (need < keep_from)
			keep_from = need;
	}
	pthread_mutex_lock(&c->lock);
	for (unsigned q = 0; q < c->nq && ok; q++)
		if (c->next[q] != c->cur[q]) {
			ok = hist_push(&c->h[q], state, c->next[q], keep_from);
			c->cur[q] = c->next[q];
		}
	pthread_mutex_unlock(&c->lock);
	if (!ok)
		snprintf(c->writer_err, sizeof(c->writer_err), "out of memory");
	return ok;
}

static unsigned bursts_done(struct churn *c)
{
	unsigned n = 0;

	for (unsigned i = 0; i < WORKERS; i++)
		n += __atomic_load_n(&c->w[i].bursts, __ATOMIC_ACQUIRE);
	return n;
}

static unsigned spanned_done(struct churn *c)
{
	unsigned n = 0;

	for (unsigned i = 0; i < WORKERS; i++)
		n += __atomic_load_n(&c->w[i].spanned, __ATOMIC_RELAXED);
	return n;
}

/* Batches until the run is long enough; no pause between batches. */
static void writer_run(struct churn *c)
{
	double t0 = now_s(), t;
	uint32_t state = 0;

	for (;;) {
		/* sizes 1..4096, spread over every power of two */
		unsigned size =
		    1 + rnd_below(&c->rng, 2u << rnd_below(&c->rng, 12));
		struct dpflow_error err;
		int rc;

		if (size > BATCH_MAX)
			size = BATCH_MAX;
		if (!make_batch(c, size))
			break;
		resolve(c);
		if (!publish_reference(c, state + 1))
			break;
		__atomic_store_n(&c->version, 2 * state + 1, __ATOMIC_SEQ_CST);
		memset(&err, 0, sizeof(err));
		rc = dpflow_entries_process(c->q, NULL, &err);
		state++;
		__atomic_store_n(&c->version, 2 * state, __ATOMIC_SEQ_CST);
		if (rc) {
			snprintf(c->writer_err, sizeof(c->writer_err),
				 "batch %u: entries_process: %d %s", state, rc,
				 err.msg);
			break;
		}
		/* entries removed by the batch are free again */
		c->pipe_free += c->n_returned;
		for (unsigned i = 0; i < c->n_freed; i++)
			if (c->kind == K_ACL || c->kind == K_CONTROL)
				c->free_list[c->n_free++] = c->freed[i];
		c->batches++;
		t = now_s() - t0;
		if (t >= RUN_MAX_S ||
		    (t >= RUN_MIN_S && bursts_done(c) >= BURSTS_MIN &&
		     spanned_done(c) >= SPANNED_MIN))
			break;
	}
}

/* ---- set-up and the checks common to every kind --------------------------
 */

static struct dpflow_pipe *make_pipe(struct churn *c, uint32_t size)
{
	struct dpflow_pipe_cfg p;
	struct dpflow_error err;
	struct dpflow_pipe *pipe;
	unsigned f = 0;

	memset(&p, 0, sizeof(p));
	p.name = "churn";
	p.root = true;
	p.port = 0;
	p.size = size;
	switch (c->kind) {
	case K_BASIC:
		p.type = DPFLOW_PIPE_BASIC;
		p.match.f[f++].field = DPFLOW_FIELD_OUTER_L4_DPORT;
		break;
	case K_ACL:
	case K_CONTROL:
		p.type =
		    c->kind == K_ACL ? DPFLOW_PIPE_ACL : DPFLOW_PIPE_CONTROL;
		p.match.f[f++].field = DPFLOW_FIELD_OUTER_L4_DPORT;
		p.match.f[f++].field = DPFLOW_FIELD_OUTER_IPV4_DST;
		break;
	case K_LPM:
		p.type = DPFLOW_PIPE_LPM;
		p.match.f[f++].field = DPFLOW_FIELD_OUTER_IPV4_DST;
		break;
	}
	p.match.n = (uint8_t)f;
	for (unsigned i = 0; i < f; i++) {
		p.match.f[i].per_entry = true;
		memset(p.match.f[i].mask, 0xff, sizeof(p.match.f[i].mask));
	}
	p.n_action_tmpls = 1;
	p.actions[0].n = 1;
	p.actions[0].a[0].kind = DPFLOW_ACT_SET_FIELD;
	p.actions[0].a[0].field = DPFLOW_FIELD_OUTER_IPV4_SRC;
	p.actions[0].a[0].per_entry = true;
	p.fwd.kind = DPFLOW_FWD_PER_ENTRY;
	p.miss_fwd.kind = DPFLOW_FWD_HANDLER;
	p.miss_fwd.handler = on_pkt;
	p.miss_fwd.handler_arg = NULL;
	memset(&err, 0, sizeof(err));
	pipe = dpflow_pipe_create(c->ctx, &p, &err);
	cr_assert_not_null(pipe, "%s", err.msg);
	return pipe;
}

static void churn_init(struct churn *c, enum kind kind, uint64_t seed)
{
	struct dpflow_ctx_params cp = {.pool_slots = 4096};
	struct dpflow_error err;
	uint32_t size = 0;

	memset(c, 0, sizeof(*c));
	c->kind = kind;
	c->rng = seed;
	switch (kind) {
	case K_BASIC:
		c->n_slots = c->nq = BASIC_KEYS;
		size = BASIC_KEYS + BATCH_MAX;
		break;
	case K_ACL:
		c->n_slots = ACL_RULES;
		c->nq = 2 * ACL_DPORTS;
		size = 2 * ACL_RULES;
		break;
	case K_CONTROL:
		c->n_slots = CTRL_RULES;
		c->nq = 2 * CTRL_DPORTS;
		size = 2 * CTRL_RULES;
		break;
	case K_LPM:
		c->n_slots = LPM_SLOTS;
		c->nq = LPM_KEYS;
		size = LPM_SLOTS + BATCH_MAX;
		break;
	}
	c->pipe_free = size;
	memset(&err, 0, sizeof(err));
	c->ctx = dpflow_ctx_create(&cp, &err);
	cr_assert_not_null(c->ctx, "%s", err.msg);
	cr_assert_eq(dpflow_ctx_port_add(c->ctx, "in", "ring:in", &err), 0,
		     "%s", err.msg);
	c->pipe = make_pipe(c, size);
	c->q = dpflow_queue_create(c->ctx, &err);
	cr_assert_not_null(c->q, "%s", err.msg);

	c->rules = calloc(c->n_slots, sizeof(*c->rules));
	c->live_list = calloc(c->n_slots, sizeof(unsigned));
	c->live_pos = calloc(c->n_slots, sizeof(unsigned));
	c->free_list = calloc(c->n_slots, sizeof(unsigned));
	c->freed = calloc(c->n_slots, sizeof(unsigned));
	c->stamp = calloc(c->n_slots, sizeof(uint32_t));
	c->cur = calloc(c->nq, sizeof(uint32_t));
	c->next = calloc(c->nq, sizeof(uint32_t));
	c->best = calloc(c->nq, sizeof(uint32_t));
	c->h = calloc(c->nq, sizeof(*c->h));
	cr_assert(c->rules && c->live_list && c->live_pos && c->free_list &&
		  c->freed && c->stamp && c->cur && c->next && c->best && c->h);
	if (kind == K_ACL || kind == K_CONTROL)
		for (unsigned s = c->n_slots; s-- > 0;)
			c->free_list[c->n_free++] = s;
	pthread_mutex_init(&c->lock, NULL);
	build_frames(c);
}

static void churn_fini(struct churn *c)
{
	for (unsigned q = 0; q < c->nq; q++)
		free(c->h[q].r);
	free(c->h);
	free(c->frames);
	free(c->best);
	free(c->next);
	free(c->cur);
	free(c->stamp);
	free(c->freed);
	free(c->free_list);
	free(c->live_pos);
	free(c->live_list);
	free(c->rules);
	pthread_mutex_destroy(&c->lock);
	dpflow_queue_destroy(c->q);
	dpflow_ctx_destroy(c->ctx);
}

/* With the writer stopped, every key answers as the reference says, and no
 * packet of the whole run was dropped. */
static void check_final(struct churn *c)
{
	struct dpflow_pool *pool = dpflow_ctx_pool(c->ctx);
	struct burst_rec rec;
	unsigned wrong = 0, first = 0;
	uint64_t drops[DPFLOW_DROP__COUNT];
	uint32_t idx[BURST];

	tl_rec = &rec;
	dpflow_ctx_thread_online(c->ctx);
	for (unsigned base = 0; base < c->nq; base += BURST) {
		unsigned n = c->nq - base < BURST ? c->nq - base : BURST;

		cr_assert_eq(dpflow_pool_alloc_bulk(pool, idx, n), 0);
		for (unsigned i = 0; i < n; i++)
			make_pkt(c, pool, idx[i], base + i, (uint16_t)i);
		memset(&rec, 0, sizeof(rec));
		dpflow_ctx_process_burst(c->ctx, 0, idx, (uint16_t)n);
		dpflow_ctx_quiescent(c->ctx);
		for (unsigned i = 0; i < n; i++)
			if (!rec.seen[i] || rec.out[i] != c->cur[base + i]) {
				if (!wrong++)
					first = base + i;
			}
	}
	dpflow_ctx_thread_offline(c->ctx);
	tl_rec = NULL;
	dpflow_ctx_drops(c->ctx, drops);
	for (unsigned d = 0; d < DPFLOW_DROP__COUNT; d++)
		cr_expect_eq(drops[d], 0, "%llu packets dropped: %s",
			     (unsigned long long)drops[d], dpflow_drop_name(d));
	cr_expect_eq(wrong, 0,
		     "%u keys differ from the reference after the run, first "
		     "key %u (reference %#x)",
		     wrong, first, c->cur[first]);
	cr_expect_eq(dpflow_pipe_entry_count(c->pipe), c->n_live);
	cr_expect_eq(dpflow_pool_avail(pool), 4096u,
		     "every packet returned to the pool");
}

static void run_churn(enum kind kind, uint64_t seed)
{
	static const char *names[] = {"basic", "acl", "control", "lpm"};
	struct churn *c = calloc(1, sizeof(*c));
	unsigned bursts = 0, spanned = 0, violations = 0;
	uint64_t pkts = 0;
	double t0 = now_s();

	cr_assert_not_null(c);
	churn_init(c, kind, seed);
	for (unsigned i = 0; i < WORKERS; i++) {
		c->w[i].c = c;
		c->w[i].id = i;
		c->w[i].rng = seed * 31 + i + 1;
		cr_assert_eq(pthread_create(&c->w[i].thread, NULL, worker_main,
					    &c->w[i]),
			     0);
	}
	writer_run(c);
	__atomic_store_n(&c->stop, 1, __ATOMIC_RELEASE);
	for (unsigned i = 0; i < WORKERS; i++) {
		pthread_join(c->w[i].thread, NULL);
		bursts += c->w[i].bursts;
		spanned += c->w[i].spanned;
		violations += c->w[i].violations;
		pkts += c->w[i].pkts;
	}
	cr_log_info(
	    "churn %s: %.1f s, %u batches (%llu ops, %llu replaces, "
	    "%llu updates, largest %u), %u bursts (%llu packets), %u spanned a "
	    "batch, %u live entries",
	    names[kind], now_s() - t0, c->batches, (unsigned long long)c->ops,
	    (unsigned long long)c->replaces, (unsigned long long)c->updates,
	    c->max_batch, bursts, (unsigned long long)pkts, spanned, c->n_live);
	cr_expect_eq(c->writer_err[0], '\0', "writer: %s", c->writer_err);
	cr_expect_eq(violations, 0,
		     "%u of %u bursts match no single state; first: %s",
		     violations, bursts,
		     c->w[0].first[0] ? c->w[0].first : c->w[1].first);
	cr_expect_geq(bursts, BURSTS_ASSERT, "only %u bursts", bursts);
	cr_expect_gt(spanned, 0, "no burst ran during a batch");
	cr_expect_gt(c->batches, 10);
	check_final(c);
	churn_fini(c);
	free(c);
}

Test(flow_churn, basic_bursts_see_one_state, .timeout = 60)
{
	run_churn(K_BASIC, 0x62617369);
}

Test(flow_churn, acl_bursts_see_one_state, .timeout = 60)
{
	run_churn(K_ACL, 0x61636c);
}

Test(flow_churn, control_bursts_see_one_state, .timeout = 60)
{
	run_churn(K_CONTROL, 0x63746c);
}

Test(flow_churn, lpm_bursts_see_one_state, .timeout = 60)
{
	run_churn(K_LPM, 0x6c706d);
}
