/*
 * The timing wheel of timed transmit (txtime.h).
 *
 * Layout. Nodes (time, packet index, next) live in three arrays of
 * `capacity` entries with a free list threaded through `next`. Each slot
 * is a singly linked list (head, tail) kept in time order; an occupancy
 * bitmap (one bit a slot) lets release skip empty slots a word at a time.
 * Packets taken "now" go on a FIFO list of their own (`ready`).
 *
 * Invariant: every node in the wheel has a tick in [cur, cur + slots), so
 * a slot holds packets of one tick only and the slot of tick k is
 * k & (slots - 1). The cursor `cur` moves only past empty slots.
 *
 * Filing in time order costs O(1) when packets come in time order within
 * a tick (appended at the tail) and a walk of the slot's list otherwise;
 * with a tick of about the packet spacing, a slot holds a few packets.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/common.h"
#include "dpflow/txtime.h"

#define NIL UINT32_MAX

#define SLOTS_DEFAULT	 8192u
#define SLOTS_MIN	 64u
#define SLOTS_MAX	 (1u << 24)
#define TICK_DEFAULT	 1000u
#define TICK_MAX	 1000000000ull
#define CAPACITY_DEFAULT 65536u
#define CAPACITY_MAX	 (1u << 31)

#define SUB_BITS DPFLOW_TXSCHED_HIST_SUB_BITS
#define SUB_N	 (1u << SUB_BITS)

struct slot {
	uint32_t head;
	uint32_t tail;
};

struct dpflow_txsched {
	/* hot: the owner's state */
	uint64_t cur;	   /* cursor: the oldest tick not yet passed */
	uint64_t last_now; /* largest now seen */
	uint64_t tick_ns;
	uint32_t mask; /* slots - 1 */
	uint32_t free_head;
	uint32_t ready_head, ready_tail;
	uint32_t n_wheel; /* nodes in slots (not ready) */
	uint32_t n_held;  /* nodes in slots and ready */
	uint32_t capacity;
	struct dpflow_pool *pool;
	struct slot *slot;
	uint64_t *occ; /* bit (k & mask): slot holds packets */
	uint64_t *time;
	uint32_t *pkt;
	uint32_t *next;
	/* counters: written by the owner, read by anyone */
	struct dpflow_txsched_stats st DPFLOW_CACHE_ALIGNED;
	uint64_t hist[DPFLOW_TXSCHED_HIST_BUCKETS];
};

/* ---- counters and histogram ------------------------------------------- */

static inline void ctr_add(uint64_t *c, uint64_t v)
{
	__atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + v,
			 __ATOMIC_RELAXED);
}

static inline uint64_t ctr_read(const uint64_t *c)
{
	return __atomic_load_n(c, __ATOMIC_RELAXED);
}

static inline unsigned hist_bucket(uint64_t v)
{
	unsigned e;

	if (v < SUB_N)
		return (unsigned)v;
	e = 63u - (unsigned)__builtin_clzll(v);
	return ((e - SUB_BITS + 1) << SUB_BITS) |
	       (unsigned)((v >> (e - SUB_BITS)) & (SUB_N - 1));
}

/* The largest value of bucket @b. */
static uint64_t hist_upper(unsigned b)
{
	unsigned e, shift;

	if (b < SUB_N)
		return b;
	e = (b >> SUB_BITS) + SUB_BITS - 1;
	shift = e - SUB_BITS;
	return (((uint64_t)(SUB_N | (b & (SUB_N - 1))) << shift) |
		((1ull << shift) - 1));
}

/* ---- node lists -------------------------------------------------------- */

static inline uint32_t node_get(struct dpflow_txsched *s)
{
	uint32_t n = s->free_head;

	s->free_head = s->next[n];
	return n;
}

static inline void node_put(struct dpflow_txsched *s, uint32_t n)
{
	s->next[n] = s->free_head;
	s->free_head = n;
}

static inline void occ_set(struct dpflow_txsched *s, uint32_t i)
{
	s->occ[i >> 6] |= 1ull << (i & 63);
}

static inline void occ_clear(struct dpflow_txsched *s, uint32_t i)
{
	s->occ[i >> 6] &= ~(1ull << (i & 63));
}

/* File node @n (time @t, tick @k) in its slot, in time order. */
static inline void slot_insert(struct dpflow_txsched *s, uint32_t n, uint64_t t,
			       uint64_t k)
{
	uint32_t i = (uint32_t)k & s->mask;
	struct slot *sl = &s->slot[i];
	uint32_t prev, at;

	s->next[n] = NIL;
	if (sl->head == NIL) {
		sl->head = sl->tail = n;
		occ_set(s, i);
		return;
	}
	if (DPFLOW_LIKELY(t >= s->time[sl->tail])) {
		s->next[sl->tail] = n;
		sl->tail = n;
		return;
	}
	/* earlier than the tail: after the last node with time <= t */
	prev = NIL;
	at = sl->head;
	while (s->time[at] <= t) {
		prev = at;
		at = s->next[at];
	}
	s->next[n] = at;
	if (prev == NIL)
		sl->head = n;
	else
		s->next[prev] = n;
}

/*
 * The first tick in [from, to] whose slot is occupied, or UINT64_MAX.
 * @to - @from < slots.
 */
static uint64_t next_occupied(const struct dpflow_txsched *s, uint64_t from,
			      uint64_t to)
{
	uint64_t k = from;

	while (k <= to) {
		uint32_t i = (uint32_t)k & s->mask;
		uint64_t w = s->occ[i >> 6] >> (i & 63);

		if (w) {
			k += (uint64_t)__builtin_ctzll(w);
			return k <= to ? k : UINT64_MAX;
		}
		k += 64 - (i & 63); /* to the next word (slots % 64 == 0) */
	}
	return UINT64_MAX;
}

/* ---- public ------------------------------------------------------------ */

struct dpflow_txsched *
dpflow_txsched_create(const struct dpflow_txsched_cfg *cfg,
		      struct dpflow_error *err)
{
	struct dpflow_txsched *s;
	uint64_t tick, slots, cap;

	if (!cfg || !cfg->pool) {
		dpflow_error_set(err, EINVAL, "pool",
				 "txsched: a packet pool is needed");
		return NULL;
	}
	slots = cfg->slots ? cfg->slots : SLOTS_DEFAULT;
	tick = cfg->tick_ns ? cfg->tick_ns : TICK_DEFAULT;
	cap = cfg->capacity ? cfg->capacity : CAPACITY_DEFAULT;
	if (slots < SLOTS_MIN || slots > SLOTS_MAX || (slots & (slots - 1))) {
		dpflow_error_set(err, EINVAL, "slots",
				 "txsched: slots %llu: a power of two from "
				 "%u to %u",
				 (unsigned long long)slots, SLOTS_MIN,
				 SLOTS_MAX);
		return NULL;
	}
	if (tick > TICK_MAX) {
		dpflow_error_set(err, EINVAL, "tick_ns",
				 "txsched: tick_ns %llu: 1 to %llu",
				 (unsigned long long)tick, TICK_MAX);
		return NULL;
	}
	if (cap > CAPACITY_MAX) {
		dpflow_error_set(err, EINVAL, "capacity",
				 "txsched: capacity %llu: 1 to %u",
				 (unsigned long long)cap, CAPACITY_MAX);
		return NULL;
	}
	s = aligned_alloc(DPFLOW_CACHE_LINE, sizeof(*s));
	if (!s)
		goto nomem;
	memset(s, 0, sizeof(*s));
	s->tick_ns = tick;
	s->mask = (uint32_t)slots - 1;
	s->capacity = (uint32_t)cap;
	s->pool = cfg->pool;
	s->cur = cfg->start_ns / tick;
	s->last_now = cfg->start_ns;
	s->ready_head = s->ready_tail = NIL;
	s->slot = malloc(slots * sizeof(*s->slot));
	s->occ = calloc(slots / 64, sizeof(*s->occ));
	s->time = malloc(cap * sizeof(*s->time));
	s->pkt = malloc(cap * sizeof(*s->pkt));
	s->next = malloc(cap * sizeof(*s->next));
	if (!s->slot || !s->occ || !s->time || !s->pkt || !s->next) {
		dpflow_txsched_destroy(s);
		goto nomem;
	}
	for (uint64_t i = 0; i < slots; i++)
		s->slot[i].head = s->slot[i].tail = NIL;
	for (uint32_t i = 0; i < s->capacity; i++)
		s->next[i] = i + 1 < s->capacity ? i + 1 : NIL;
	s->free_head = 0;
	return s;
nomem:
	dpflow_error_set(err, ENOMEM, "capacity",
			 "txsched: no memory for %llu slots and %llu packets",
			 (unsigned long long)slots, (unsigned long long)cap);
	return NULL;
}

void dpflow_txsched_destroy(struct dpflow_txsched *s)
{
	uint32_t buf[64];
	unsigned n;

	if (!s)
		return;
	if (s->slot && s->occ && s->next)
		while ((n = dpflow_txsched_drain(s, buf, 64)) > 0)
			dpflow_pool_free_bulk(s->pool, buf, n);
	free(s->slot);
	free(s->occ);
	free(s->time);
	free(s->pkt);
	free(s->next);
	free(s);
}

unsigned dpflow_txsched_enqueue(struct dpflow_txsched *s, const uint32_t *idx,
				unsigned n)
{
	const struct dpflow_pool *pool = s->pool;
	uint64_t horizon = s->cur + s->mask + 1; /* first tick too far */
	uint64_t immediate = 0, late = 0;
	unsigned i;

	for (i = 0; i < n; i++) {
		uint64_t t, k;
		uint32_t nd;

		if (i + 4 < n)
			DPFLOW_PREFETCH(dpflow_pool_meta(pool, idx[i + 4]));
		t = dpflow_pool_meta(pool, idx[i])->tx_time_ns;
		k = t / s->tick_ns;
		if (DPFLOW_UNLIKELY(k >= horizon)) {
			ctr_add(&s->st.too_far, 1);
			break;
		}
		if (DPFLOW_UNLIKELY(s->free_head == NIL)) {
			ctr_add(&s->st.full, 1);
			break;
		}
		nd = node_get(s);
		s->time[nd] = t;
		s->pkt[nd] = idx[i];
		if (DPFLOW_LIKELY(t && k >= s->cur)) {
			slot_insert(s, nd, t, k);
			s->n_wheel++;
		} else {
			/* "now": at the end of the ready list */
			s->next[nd] = NIL;
			if (s->ready_head == NIL)
				s->ready_head = nd;
			else
				s->next[s->ready_tail] = nd;
			s->ready_tail = nd;
			if (t)
				late++;
			else
				immediate++;
		}
	}
	s->n_held += i;
	if (i)
		ctr_add(&s->st.enqueued, i);
	if (immediate)
		ctr_add(&s->st.immediate, immediate);
	if (late)
		ctr_add(&s->st.late, late);
	__atomic_store_n(&s->st.pending, s->n_held, __ATOMIC_RELAXED);
	return i;
}

/* Move up to @max ready packets to @out; returns how many. */
static unsigned ready_take(struct dpflow_txsched *s, uint32_t *out,
			   unsigned max)
{
	unsigned k = 0;

	while (k < max && s->ready_head != NIL) {
		uint32_t nd = s->ready_head;

		s->ready_head = s->next[nd];
		out[k++] = s->pkt[nd];
		node_put(s, nd);
	}
	if (s->ready_head == NIL)
		s->ready_tail = NIL;
	return k;
}

/*
 * Release from the slot of tick @k the nodes with time <= @now (all when
 * @now is UINT64_MAX), up to @max; errors recorded when @record. Clears
 * the slot's bit once empty and sets *@emptied then. Returns how many.
 */
static unsigned slot_take(struct dpflow_txsched *s, uint64_t k, uint64_t now,
			  uint32_t *out, unsigned max, bool record,
			  bool *emptied)
{
	uint32_t i = (uint32_t)k & s->mask;
	struct slot *sl = &s->slot[i];
	uint64_t err_max = 0, err_sum = 0;
	unsigned m = 0;

	while (m < max && sl->head != NIL && s->time[sl->head] <= now) {
		uint32_t nd = sl->head;

		if (record) {
			uint64_t e = now - s->time[nd];
			uint64_t *h = &s->hist[hist_bucket(e)];

			ctr_add(h, 1);
			err_sum += e;
			if (e > err_max)
				err_max = e;
		}
		sl->head = s->next[nd];
		out[m++] = s->pkt[nd];
		node_put(s, nd);
	}
	*emptied = sl->head == NIL;
	if (*emptied) {
		sl->tail = NIL;
		occ_clear(s, i);
	}
	s->n_wheel -= m;
	if (record && m) {
		ctr_add(&s->st.timed, m);
		ctr_add(&s->st.err_sum_ns, err_sum);
		if (err_max > ctr_read(&s->st.err_max_ns))
			__atomic_store_n(&s->st.err_max_ns, err_max,
					 __ATOMIC_RELAXED);
	}
	return m;
}

unsigned dpflow_txsched_release(struct dpflow_txsched *s, uint64_t now,
				uint32_t *out_idx, unsigned max)
{
	uint64_t now_tick;
	unsigned k;

	if (now < s->last_now)
		now = s->last_now;
	s->last_now = now;
	now_tick = now / s->tick_ns;
	k = ready_take(s, out_idx, max);
	while (k < max) {
		uint64_t last, t;
		bool emptied;

		if (!s->n_wheel) {
			if (now_tick > s->cur)
				s->cur = now_tick;
			break;
		}
		/* the invariant bounds the search to one revolution */
		last =
		    now_tick - s->cur > s->mask ? s->cur + s->mask : now_tick;
		t = next_occupied(s, s->cur, last);
		if (t == UINT64_MAX) {
			s->cur = last;
			break;
		}
		s->cur = t;
		k += slot_take(s, t, now, out_idx + k, max - k, true, &emptied);
		if (!emptied)
			break; /* @max reached, or the rest is not due */
		if (t < now_tick)
			s->cur = t + 1;
	}
	if (k) {
		s->n_held -= k;
		ctr_add(&s->st.released, k);
		__atomic_store_n(&s->st.pending, s->n_held, __ATOMIC_RELAXED);
	}
	return k;
}

unsigned dpflow_txsched_drain(struct dpflow_txsched *s, uint32_t *out_idx,
			      unsigned max)
{
	unsigned k = ready_take(s, out_idx, max);
	uint64_t from = s->cur;

	/* the cursor stays: times behind it would otherwise count as due */
	while (k < max && s->n_wheel) {
		uint64_t t = next_occupied(s, from, s->cur + s->mask);
		bool emptied;

		k += slot_take(s, t, UINT64_MAX, out_idx + k, max - k, false,
			       &emptied);
		from = t + 1;
	}
	if (k) {
		s->n_held -= k;
		ctr_add(&s->st.released, k);
		__atomic_store_n(&s->st.pending, s->n_held, __ATOMIC_RELAXED);
	}
	return k;
}

uint64_t dpflow_txsched_horizon(const struct dpflow_txsched *s)
{
	return (s->cur + s->mask + 1) * s->tick_ns;
}

unsigned dpflow_txsched_pending(const struct dpflow_txsched *s)
{
	return s->n_held;
}

void dpflow_txsched_stats_get(const struct dpflow_txsched *s,
			      struct dpflow_txsched_stats *st)
{
	st->enqueued = ctr_read(&s->st.enqueued);
	st->released = ctr_read(&s->st.released);
	st->immediate = ctr_read(&s->st.immediate);
	st->late = ctr_read(&s->st.late);
	st->too_far = ctr_read(&s->st.too_far);
	st->full = ctr_read(&s->st.full);
	st->pending = ctr_read(&s->st.pending);
	st->timed = ctr_read(&s->st.timed);
	st->err_max_ns = ctr_read(&s->st.err_max_ns);
	st->err_sum_ns = ctr_read(&s->st.err_sum_ns);
}

uint64_t dpflow_txsched_error_pct(const struct dpflow_txsched *s, double pct)
{
	uint64_t total = 0, want, seen = 0;
	uint64_t max = ctr_read(&s->st.err_max_ns);

	for (unsigned b = 0; b < DPFLOW_TXSCHED_HIST_BUCKETS; b++)
		total += ctr_read(&s->hist[b]);
	if (!total)
		return 0;
	if (pct < 0)
		pct = 0;
	if (pct > 100)
		pct = 100;
	/* the smallest error with at least pct% of the samples <= it */
	want = (uint64_t)((double)total * pct / 100.0 + 0.999999);
	if (!want)
		want = 1;
	for (unsigned b = 0; b < DPFLOW_TXSCHED_HIST_BUCKETS; b++) {
		seen += ctr_read(&s->hist[b]);
		if (seen >= want) {
			uint64_t up = hist_upper(b);

			return up < max ? up : max;
		}
	}
	return max;
}
