/*
 * Monitor pieces of the flow engine, shared by the CPU and GPU targets:
 * per-entry counters, srTCM / trTCM meters, and aging (last-hit) slots.
 *
 * Owns: the byte layout of the three image kinds and their data-path code.
 * Everything here is DPF_HD and written in the common subset of C11 and
 * CUDA C++ (DESIGN.md §1); meter.c builds and reads images on the control
 * thread, the GPU target copies the same bytes to device memory and calls
 * the same functions.
 *
 * Who calls: any number of data threads (or GPU threads) at once. These
 * tables are written by the data path, so there is one live image per
 * table (no RCU double buffer); slots change only through atomic.h.
 *
 * Layout of every image: one 64-byte-aligned block, no pointers inside:
 *   [header, 64 bytes: magic, version, count, slot offset, total size]
 *   [slots: n x slot_size, from slot_off]
 * Counter slots are 16 bytes, aging slots 16 bytes, meter slots 64 bytes
 * (one cache line each, so that meters used by different workers never
 * share a line).
 *
 * Meters (RFC 2697 srTCM, RFC 2698 trTCM). Token buckets are counted in
 * whole bytes, time in nanoseconds supplied by the caller. A bucket fed at
 * R bytes/s has received floor(t * R / 1e9) tokens in total by time t
 * (t in ns on the caller's clock): tokens arrive one by one at the instants
 * ceil(k * 1e9 / R), exactly as the RFCs' "incremented R times per second",
 * with no rounding drift however the packets are spaced. The credit between
 * two times is computed exactly in 64-bit integer arithmetic (see
 * dpflow_meter_cum) and saturates after the time that fills the buckets,
 * so rates up to 2^64-1 bytes/s and idle periods up to 2^64-1 ns never
 * overflow. Time that goes backwards (now_ns before the last update) adds
 * no tokens.
 *
 * Meter state is two 64-bit words: `tokens` (Tc in the high half, Te or Tp
 * in the low half) and `last_ns` (the time up to which tokens have been
 * credited). A packet first claims the interval (last_ns, now_ns] with a
 * CAS on last_ns, then applies that credit and its own debit with one CAS
 * loop on `tokens`. So with any number of threads every nanosecond's tokens
 * are credited exactly once and every packet's colour is decided on one
 * atomic snapshot of the buckets; the only difference from a serial order
 * is that a credit claimed by one thread may reach the buckets just after
 * another thread's packet (as if that packet had come a moment earlier).
 * One thread alone gets exactly the RFC sequence.
 */
#ifndef DPFLOW_METER_IMPL_H
#define DPFLOW_METER_IMPL_H

#include <string.h>

#include "dpflow/common.h"
#include "flow/atomic.h"
#include "flow/table.h"

#define DPFLOW_COUNTERS_MAGIC  0x544e4344u /* "DCNT" in memory */
#define DPFLOW_METERS_MAGIC    0x52544d44u /* "DMTR" */
#define DPFLOW_AGING_MAGIC     0x45474144u /* "DAGE" */
#define DPFLOW_MONITOR_VERSION 1

#define DPFLOW_NS_PER_S	 1000000000ull
#define DPFLOW_NS_PER_MS 1000000ull

/* Header of every monitor image (counters, meters, aging). */
struct dpflow_monitor_image {
	uint32_t magic;	    /* DPFLOW_{COUNTERS,METERS,AGING}_MAGIC */
	uint16_t version;   /* DPFLOW_MONITOR_VERSION */
	uint16_t slot_size; /* bytes per slot */
	uint32_t n;	    /* slots */
	uint32_t reserved0;
	uint64_t slot_off; /* byte offset of slot 0 (64) */
	uint64_t size;	   /* bytes in the whole image */
	uint8_t reserved[32];
};
DPFLOW_STATIC_ASSERT(sizeof(struct dpflow_monitor_image) == DPFLOW_CACHE_LINE,
		     "monitor image header is one cache line");

/* ---- counters ------------------------------------------------------------ */

struct dpflow_counter_slot {
	uint64_t pkts;
	uint64_t bytes;
};

/* The counters image: a header, then n counter slots. */
struct dpflow_counters {
	struct dpflow_monitor_image hdr;
};

DPF_HD static inline struct dpflow_counter_slot *
dpflow_counter_at(struct dpflow_counters *c, uint32_t idx)
{
	return (struct dpflow_counter_slot *)((uint8_t *)c + c->hdr.slot_off) +
	       idx;
}

/*
 * Count one packet of @bytes on counter @idx (< n), from any number of
 * threads at once (two relaxed atomic adds: a concurrent reader may see
 * the packet before its bytes).
 */
DPF_HD static inline void dpflow_counter_add_impl(struct dpflow_counters *c,
						  uint32_t idx, uint32_t bytes)
{
	struct dpflow_counter_slot *s = dpflow_counter_at(c, idx);

	dpflow_atomic_add64(&s->pkts, 1);
	dpflow_atomic_add64(&s->bytes, bytes);
}

/*
 * The same for a counter that only this thread writes (a per-worker
 * counters image): relaxed loads and stores, no locked instruction. Other
 * threads may read it at any time; a reset by another thread may be lost.
 */
DPF_HD static inline void dpflow_counter_add_st_impl(struct dpflow_counters *c,
						     uint32_t idx,
						     uint32_t bytes)
{
	struct dpflow_counter_slot *s = dpflow_counter_at(c, idx);

	dpflow_atomic_store64(&s->pkts, dpflow_atomic_load64(&s->pkts) + 1);
	dpflow_atomic_store64(&s->bytes,
			      dpflow_atomic_load64(&s->bytes) + bytes);
}

/* ---- meters -------------------------------------------------------------- */

enum dpflow_meter_alg {
	DPFLOW_METER_NONE = 0, /* not configured: every packet is GREEN */
	DPFLOW_METER_SRTCM,    /* RFC 2697: CIR, CBS, EBS */
	DPFLOW_METER_TRTCM,    /* RFC 2698: CIR, PIR, CBS, PBS */
};

enum dpflow_meter_color {
	DPFLOW_METER_GREEN = 0,
	DPFLOW_METER_YELLOW = 1,
	DPFLOW_METER_RED = 2,
};

/* One meter: one cache line. */
struct dpflow_meter {
	/* written by data threads (atomics) */
	uint64_t tokens;  /* Tc << 32 | Te (srTCM) or Tp (trTCM), bytes */
	uint64_t last_ns; /* tokens credited up to this time */
	/* read-only while the meter is in use */
	uint64_t cir;	    /* bytes per second */
	uint64_t pir;	    /* trTCM: bytes per second; srTCM: 0 */
	uint64_t fill_c_ns; /* srTCM: C and E full after this long at CIR;
			       trTCM: C full after this long */
	uint64_t fill_p_ns; /* trTCM: P full after this long at PIR */
	uint32_t cbs;	    /* bytes */
	uint32_t ebs_pbs;   /* srTCM: EBS; trTCM: PBS (bytes) */
	uint8_t alg;	    /* enum dpflow_meter_alg */
	uint8_t color_aware;
	uint8_t reserved[6];
};
DPFLOW_STATIC_ASSERT(sizeof(struct dpflow_meter) == DPFLOW_CACHE_LINE,
		     "a meter is one cache line");

/* The meters image: a header, then n meters. */
struct dpflow_meters {
	struct dpflow_monitor_image hdr;
};

DPF_HD static inline struct dpflow_meter *
dpflow_meter_at(struct dpflow_meters *m, uint32_t idx)
{
	return (struct dpflow_meter *)((uint8_t *)m + m->hdr.slot_off) + idx;
}

/*
 * Tokens a bucket fed at @rate bytes/s has received by time @t:
 * floor(t * rate / 1e9) modulo 2^64, exactly. With t = q*1e9 + r and
 * rate = a*1e9 + b the quotient is q*rate + r*a + floor(r*b / 1e9), where
 * r*b < 1e18 fits in 64 bits and the other terms wrap harmlessly: the
 * difference of two such values is exact whenever the true difference is
 * below 2^64.
 */
DPF_HD static inline uint64_t dpflow_meter_cum(uint64_t t, uint64_t rate)
{
	uint64_t q = t / DPFLOW_NS_PER_S, r = t % DPFLOW_NS_PER_S;
	uint64_t a = rate / DPFLOW_NS_PER_S, b = rate % DPFLOW_NS_PER_S;

	return q * rate + r * a + r * b / DPFLOW_NS_PER_S;
}

/*
 * Tokens credited over (@t0, @t1] at @rate, or UINT64_MAX when the
 * interval is at least @fill_ns long (enough to fill the bucket: the
 * caller caps at the bucket size anyway).
 */
DPF_HD static inline uint64_t
dpflow_meter_credit(uint64_t t0, uint64_t t1, uint64_t rate, uint64_t fill_ns)
{
	if (rate == 0 || t1 <= t0)
		return 0;
	if (t1 - t0 >= fill_ns)
		return UINT64_MAX;
	return dpflow_meter_cum(t1, rate) - dpflow_meter_cum(t0, rate);
}

/* @v + @add, capped at @cap (v <= cap). */
DPF_HD static inline uint32_t dpflow_meter_fill(uint32_t v, uint64_t add,
						uint32_t cap)
{
	return add >= (uint64_t)(cap - v) ? cap : (uint32_t)(v + add);
}

/*
 * The colour of a packet of @bytes at @now_ns (enum dpflow_meter_color),
 * updating the meter's buckets. @in_color is the packet's colour so far,
 * used by colour-aware meters (ignored by colour-blind ones). Any number
 * of threads may meter through one meter at once (see the header).
 */
DPF_HD static inline unsigned dpflow_meter_color_impl(struct dpflow_meter *m,
						      uint64_t now_ns,
						      uint32_t bytes,
						      unsigned in_color)
{
	uint64_t last, credit_c = 0, credit_p = 0, tok, ntok;
	uint32_t c, e, c0, e0;
	unsigned color,
	    in = m->color_aware ? in_color : (unsigned)DPFLOW_METER_GREEN;
	bool trtcm = m->alg == DPFLOW_METER_TRTCM;

	if (m->alg == DPFLOW_METER_NONE)
		return DPFLOW_METER_GREEN;
	last = dpflow_atomic_load64(&m->last_ns);
	while (now_ns > last) {
		if (dpflow_atomic_cas64(&m->last_ns, &last, now_ns)) {
			credit_c = dpflow_meter_credit(last, now_ns, m->cir,
						       m->fill_c_ns);
			if (trtcm)
				credit_p = dpflow_meter_credit(
				    last, now_ns, m->pir, m->fill_p_ns);
			break;
		}
	}
	tok = dpflow_atomic_load64(&m->tokens);
	for (;;) {
		c0 = c = (uint32_t)(tok >> 32);
		e0 = e = (uint32_t)tok;
		if (trtcm) {
			/* RFC 2698: C and P filled independently */
			c = dpflow_meter_fill(c, credit_c, m->cbs);
			e = dpflow_meter_fill(e, credit_p, m->ebs_pbs);
			if (in == DPFLOW_METER_RED || e < bytes) {
				color = DPFLOW_METER_RED;
			} else if (in == DPFLOW_METER_YELLOW || c < bytes) {
				color = DPFLOW_METER_YELLOW;
				e -= bytes;
			} else {
				color = DPFLOW_METER_GREEN;
				e -= bytes;
				c -= bytes;
			}
		} else {
			/* RFC 2697: C first, its overflow into E */
			if (credit_c > (uint64_t)(m->cbs - c)) {
				e = dpflow_meter_fill(
				    e, credit_c - (m->cbs - c), m->ebs_pbs);
				c = m->cbs;
			} else {
				c += (uint32_t)credit_c;
			}
			if (in == DPFLOW_METER_GREEN && c >= bytes) {
				color = DPFLOW_METER_GREEN;
				c -= bytes;
			} else if (in != DPFLOW_METER_RED && e >= bytes) {
				color = DPFLOW_METER_YELLOW;
				e -= bytes;
			} else {
				color = DPFLOW_METER_RED;
			}
		}
		if (c == c0 && e == e0)
			break; /* nothing to write (a red packet, no credit) */
		ntok = (uint64_t)c << 32 | e;
		if (dpflow_atomic_cas64(&m->tokens, &tok, ntok))
			break;
	}
	return color;
}

/* ---- aging --------------------------------------------------------------- */

/*
 * One aging slot: the last time an entry was hit, in whole milliseconds
 * (now_ns / 1e6), and its timeout. Data threads only refresh last_ms; the
 * control thread arms, disarms and scans.
 */
struct dpflow_aging_slot {
	uint64_t last_ms;
	uint32_t timeout_ms; /* 0: not armed */
	uint32_t reserved;
};

/* The aging image: a header, then n aging slots. */
struct dpflow_aging {
	struct dpflow_monitor_image hdr;
};

DPF_HD static inline struct dpflow_aging_slot *
dpflow_aging_at(struct dpflow_aging *a, uint32_t idx)
{
	return (struct dpflow_aging_slot *)((uint8_t *)a + a->hdr.slot_off) +
	       idx;
}

/*
 * Entry @idx was hit at @now_ns. Writes the slot only when the millisecond
 * moved forward, so a busy entry costs one write per millisecond, not one
 * per packet; last_ms never goes back. Any thread.
 */
DPF_HD static inline void dpflow_aging_touch_impl(struct dpflow_aging *a,
						  uint32_t idx, uint64_t now_ns)
{
	struct dpflow_aging_slot *s = dpflow_aging_at(a, idx);
	uint64_t ms = now_ns / DPFLOW_NS_PER_MS;
	uint64_t old = dpflow_atomic_load64(&s->last_ms);

	/* a CAS, so that a slower thread never moves the time back */
	while (ms > old && !dpflow_atomic_cas64(&s->last_ms, &old, ms))
		;
}

#endif /* DPFLOW_METER_IMPL_H */
