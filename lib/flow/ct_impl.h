/*
 * Connection tracking (CT pipes): the image layout and the data-path code
 * shared by the CPU and GPU targets.
 *
 * Owns: the byte layout of a CT image, its key and hash, the TCP and
 * UDP/ICMP state machines, lookup-or-create with atomic slot claiming,
 * per-connection value blocks, NAT bindings with their reply keys and
 * port pools, replacement under pressure. Everything here is DPF_HD and
 * written in the common subset of C11 and CUDA C++ (DESIGN.md §1); ct.c
 * builds images, ages and removes connections on the control thread, the
 * GPU target copies the same bytes to device memory and calls the same
 * functions.
 *
 * Who calls: any number of data threads (or GPU threads) at once, while
 * the control thread ages or removes connections. The data path writes
 * this table, so there is one live image (no RCU double buffer); every
 * change to a slot goes through atomic.h.
 *
 * Layout: one 64-byte-aligned block, no pointers inside.
 *   [header: struct dpflow_ct_image, 4 lines: constants, per-state
 *    timeouts, statistics, live-connection count]
 *   [pools: n_pools x struct dpflow_ct_pool, 3 lines each]
 *   [ctrl:  n_buckets x 8 x uint64_t, one line per bucket]
 *   [locks: n_buckets x uint32_t, rounded up to a line]
 *   [slots: n_buckets x 8 x struct dpflow_ct_slot, one line each]
 *   [values: n_buckets x 8 x 64-byte value blocks]
 * Connection i is slot i % 8 of bucket i / 8: its control word at ctrl[i],
 * its key, user word and twin in slots[i], its value block at values[i]
 * (written only when the creator gave one).
 *
 * Control word (64 bits; the only word whose changes decide anything):
 *   bits 0-1 status: FREE, BUSY (being written or freed), READY, DEAD
 *            (expired on the data path, waiting for the aging scan);
 *   bits 2-5 state (enum dpflow_ct_state); bit 6 the initiator is the
 *            "lo" side of the key; bit 7 a reply was seen; bit 8 the first
 *            FIN came from the reply side; bit 9 ALIAS: the slot holds a
 *            connection's reply key, not a connection (below);
 *   bits 10-13 generation (bumped each time the slot is reused, so a
 *            thread holding an old word cannot change a new connection);
 *   bits 14-31 signature (18 hash bits: compared before the key);
 *   bits 32-63 last valid packet, in milliseconds (now_ns / 1e6, mod 2^32).
 * State, flags and last-seen time change together by CAS, so a packet's
 * transition, a concurrent packet's and the aging scan's expiry are
 * serialised on one word.
 *
 * Key: both directions of a connection map to one canonical key: the two
 * (address, port) ends ordered (address bytes, then port), "lo" first,
 * then protocol and family (40 bytes, 5 words). IPv4 addresses take the
 * first 4 of 16 bytes, the rest zero.
 *
 * Buckets: two candidate buckets per key (b1 from the low hash bits, b2 =
 * b1 xor an odd mask from the high bits, so never b1), 8 slots each. A
 * lookup reads at most two control lines and the key of each slot whose
 * signature matches; it needs no lock.
 *
 * Values: each connection has a value block (struct dpflow_ct_value, 64
 * bytes, in the values array: NAT binding, backend, registers, flags
 * saying which are set), written by the packet that creates the
 * connection from the caller's init block, before the connection is
 * published, and never changed while the connection lives (a slot's
 * has_val word says whether the block was written: without an init block
 * it is empty and costs no line). Publication: the creator writes key, user
 * word, twin and value, then stores the control word READY with release; a
 * reader loads the control word (acquire), copies the block, and takes
 * the copy as the connection's when the control word still has the same
 * identity afterwards (its CAS or re-read succeeds: a seqlock whose writer
 * is the slot's one owner). No thread ever finds a connection without its
 * value: until READY it is not found, and a packet of the same flow that
 * arrives meanwhile waits on the bucket lock the creator holds (below),
 * then finds it.
 *
 * NAT: a connection whose value holds a NAT binding (a translated source
 * from a port pool or given, and/or a translated destination) is keyed a
 * second time, by its reply key: the canonical key of the translated
 * tuple, which reply packets (translated destination -> translated
 * source) carry. That key sits in a slot of its own in its own buckets,
 * an alias: control word READY | ALIAS | its signature | bit 6 "the
 * translated initiator is lo"; its slot's key is the reply key and its
 * twin is the connection's index (the connection's twin is the alias's).
 * A packet whose key matches an alias works on the aliased connection
 * (state, timer, value); its direction comes from the alias's bit 6, so a
 * translated reply is REPLY and a packet that is already translated the
 * initiator's way is ORIG. Aliases have no state or time of their own:
 * they go when their connection goes (whoever frees a connection frees its
 * alias first, then the connection's slot, so a reader that validated an
 * alias after reading its connection's word read that connection's word,
 * or BUSY). A connection is published READY before its alias, and the
 * creator holds the reply key's bucket lock until both are, so a reply
 * packet never opens a second connection meanwhile.
 * Port pools (struct dpflow_ct_pool, in the image, so each target's image
 * has its own): a binding takes candidates (address, port) from the
 * pool, starting at a point given by the flow's hash and stepping by a
 * stride prime to the pool's size, until one gives a reply key that no
 * live connection holds (as its key or its reply key); "tries"
 * candidates at most, then the packet is refused (NAT_EXHAUSTED). The
 * uniqueness check and the alias's insertion happen under the reply key's
 * bucket lock (taken with a bounded spin while holding the original key's:
 * a lock not taken moves on to the next candidate, so two creators never
 * wait on each other). A port returns to the pool when its alias is freed
 * (its reply key is free again); each pool counts its live bindings.
 *
 * Creating: a new key is created under a per-bucket spin lock on b1 (held
 * for a few dozen instructions; a thread that cannot take it within
 * busy_spins attempts gives up and counts a busy drop). Two threads that
 * see the same new flow serialise there, and the second finds the first's
 * connection: one connection per flow, whichever threads race. The slot is
 * claimed with a CAS FREE -> BUSY (threads creating other keys may compete
 * for it), filled, then published READY with a release store. The live
 * count is reserved first (max_conns).
 *
 * Room: when both buckets are full (or max_conns is reached, with EVICT or
 * REPLACE), a connection with a key in them is freed to make room: the
 * first expired one (DEAD, or READY past its timeout; counted EXPIRED),
 * else with DPFLOW_CT_F_REPLACE the least recently used one that the
 * policy lets go (counted REPLACED): a new half-open connection (SYN_SENT
 * and the UNREPLIED states) may replace a half-open or closing one
 * (SYN_SENT, SYN_RECV, FIN_WAIT .. CLOSE, UNREPLIED), never an
 * established one (ESTABLISHED and the REPLIED states); a new established
 * one (a TCP_LOOSE pickup) replaces the least recently used half-open or
 * closing one, else the least recently used established one. Ties (same
 * millisecond) go to the first in scan order (b1's slots, then b2's). A
 * connection freed so loses its alias too, and the slot freed is claimed
 * as a free one. With nothing to free the packet is refused (REFUSED;
 * drop FULL at max_conns, NO_SLOT when the buckets are full). Memory is
 * fixed at init: nothing grows.
 *
 * Expiry: a connection expires when no valid packet came for its state's
 * timeout (whole milliseconds: idle >= timeout). The aging scan (ct.c)
 * frees expired connections and reports them. A packet that finds its
 * connection expired before the scan did marks it DEAD (still reported by
 * the scan) and starts a new one, so a timeout never depends on when the
 * scan runs. Elapsed times are taken modulo 2^32 ms, so timeouts are at
 * most 2^31 - 1 ms (24.8 days) and the scan must visit each slot at least
 * that often.
 *
 * Two workers: RSS is symmetric Toeplitz, so both directions of a flow
 * normally reach one worker, but nothing here relies on it. Packets of one
 * connection on two threads serialise on its control word (CAS), creators
 * of one key on its b1 lock, claimers of one slot on its control word;
 * the value block is copied under the seqlock above. See
 * docs/design.md, "Connection tracking values".
 *
 * TCP: a simplified version of Linux nf_conntrack's TCP tracker
 * (nf_conntrack_proto_tcp.c, tcp_conntracks[]) without window tracking;
 * see dpflow_ct_next() and docs/tables/monitor.md for the table and where
 * it differs.
 */
#ifndef DPFLOW_CT_IMPL_H
#define DPFLOW_CT_IMPL_H

#include <string.h>

#include "dpflow/common.h"
#include "dpflow/meta.h"
#include "flow/atomic.h"
#include "flow/table.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "CT images assume a little-endian host"
#endif

#define DPFLOW_CT_MAGIC	  0x54435044u /* "DPCT" in memory */
#define DPFLOW_CT_VERSION 2
#define DPFLOW_CT_SLOTS	  8  /* slots per bucket */
#define DPFLOW_CT_RETRIES 16 /* lookups per packet before a busy drop */
/* Port pools per image, addresses per pool. */
#define DPFLOW_CT_POOLS_MAX	 8
#define DPFLOW_CT_POOL_ADDRS_MAX 8
/* Candidates a NAT binding tries by default (dpflow_ct_pool_cfg.tries). */
#define DPFLOW_CT_NAT_TRIES_DEFAULT 32
/* Attempts at a reply key's bucket lock before the next candidate. */
#define DPFLOW_CT_NAT_SPINS 256
/* dpflow_ct_value.pool: none (an explicit binding, or no SNAT). */
#define DPFLOW_CT_POOL_NONE 0xff

/* Connection states: TCP (after Linux nf_conntrack) and the rest. */
enum dpflow_ct_state {
	DPFLOW_CT_NONE = 0,
	DPFLOW_CT_SYN_SENT,
	DPFLOW_CT_SYN_RECV,
	DPFLOW_CT_ESTABLISHED,
	DPFLOW_CT_FIN_WAIT,
	DPFLOW_CT_CLOSE_WAIT,
	DPFLOW_CT_LAST_ACK,
	DPFLOW_CT_TIME_WAIT,
	DPFLOW_CT_CLOSE,
	DPFLOW_CT_UDP_UNREPLIED,
	DPFLOW_CT_UDP_REPLIED,
	DPFLOW_CT_ICMP_UNREPLIED, /* ICMP and ICMPv6 */
	DPFLOW_CT_ICMP_REPLIED,
	DPFLOW_CT_OTHER_UNREPLIED, /* any other IP protocol */
	DPFLOW_CT_OTHER_REPLIED,
	DPFLOW_CT_STATE_COUNT
};

/* Direction of a packet relative to the connection's initiator. */
enum dpflow_ct_dir {
	DPFLOW_CT_DIR_ORIG = 0,
	DPFLOW_CT_DIR_REPLY = 1,
};

/*
 * dpflow_ct_result.flags. NEW: this packet created the connection.
 * INVALID: the packet does not fit the state machine (state and timer
 * unchanged). IGNORED: tolerated, as a retransmission or a late handshake
 * packet (state and timer unchanged: Linux's "ignore"). REOPEN: a SYN
 * reopened a closed connection.
 */
#define DPFLOW_CT_R_NEW	    0x01
#define DPFLOW_CT_R_INVALID 0x02
#define DPFLOW_CT_R_IGNORED 0x04
#define DPFLOW_CT_R_REOPEN  0x08

/* Why a packet got no connection (dpflow_ct_result.drop). */
enum dpflow_ct_drop {
	DPFLOW_CT_DROP_NONE = 0,
	DPFLOW_CT_DROP_INVALID,	  /* cannot open a connection (TCP not SYN) */
	DPFLOW_CT_DROP_FULL,	  /* max_conns live connections */
	DPFLOW_CT_DROP_NO_SLOT,	  /* both candidate buckets full */
	DPFLOW_CT_DROP_BUSY,	  /* bucket lock not taken within busy_spins */
	DPFLOW_CT_DROP_NAT,	  /* no NAT binding with a free reply key */
	DPFLOW_CT_DROP_NO_TARGET, /* the init block forbids opening one */
};

/*
 * Table statistics (relaxed atomic counters in the image header):
 * connections created; expired (freed by the aging scan, or found expired
 * and freed to make room); replaced (live connections freed to make room,
 * REPLACE); removed by the control thread; new connections refused for
 * lack of room (max_conns, or both buckets full of connections the policy
 * keeps); new connections refused because no NAT candidate gave a free
 * reply key; packets refused because a bucket lock stayed busy; packets
 * flagged invalid. Every connection created ends expired, replaced or
 * removed, or is live: created = expired + replaced + removed + live.
 */
#define DPFLOW_CT_FOREACH_STAT(_)         \
	_(CREATED, "created")             \
	_(EXPIRED, "expired")             \
	_(REPLACED, "replaced")           \
	_(REMOVED, "removed")             \
	_(REFUSED, "refused")             \
	_(NAT_EXHAUSTED, "nat_exhausted") \
	_(DROP_BUSY, "drop_busy")         \
	_(INVALID, "invalid")

enum dpflow_ct_stat {
#define DPFLOW_CT_STAT_ENUM_(name, str) DPFLOW_CT_STAT_##name,
	DPFLOW_CT_FOREACH_STAT(DPFLOW_CT_STAT_ENUM_)
#undef DPFLOW_CT_STAT_ENUM_
	    DPFLOW_CT_STAT__COUNT
};

/*
 * dpflow_ct_image.flags. TCP_LOOSE: a TCP ACK may open a connection in
 * ESTABLISHED (Linux's nf_conntrack_tcp_loose=1). EVICT: at max_conns, a
 * new connection may free an expired one of its buckets. REPLACE: a new
 * connection that finds no room may free the least recently used
 * connection of its buckets that the policy lets go (see the header),
 * also at max_conns. NAT: connections may carry NAT bindings; the table
 * has slots for two keys a connection.
 */
#define DPFLOW_CT_F_TCP_LOOSE 0x1
#define DPFLOW_CT_F_EVICT     0x2
#define DPFLOW_CT_F_REPLACE   0x4
#define DPFLOW_CT_F_NAT	      0x8

/* What the data path is given about a packet. */
struct dpflow_ct_pkt {
	uint8_t src[16]; /* network order; IPv4: first 4 bytes */
	uint8_t dst[16];
	uint16_t sport; /* host order; 0 for ICMP (see pkt_from_hdr) */
	uint16_t dport;
	uint8_t proto;	   /* IP protocol */
	uint8_t family;	   /* 4 or 6 */
	uint8_t tcp_flags; /* TCP header flags byte (FIN 0x01 ...) */
	uint8_t reserved;
};

/* What the data path learns about it. */
struct dpflow_ct_result {
	uint32_t conn; /* connection index, DPFLOW_TABLE_MISS when none */
	uint32_t user; /* the connection's user value */
	uint8_t state; /* enum dpflow_ct_state after the packet */
	uint8_t dir;   /* enum dpflow_ct_dir of the packet */
	uint8_t flags; /* DPFLOW_CT_R_* */
	uint8_t drop;  /* enum dpflow_ct_drop when conn is MISS */
};

/*
 * dpflow_ct_value.flags: which parts of a value block are set. SNAT: the
 * translated source (nat_src, nat_sport); with POOL the tracker chose it
 * from pool `pool` (the init block asks for it so, and the tracker fills
 * nat_src and nat_sport), without POOL the init block gives it. DNAT: the
 * translated destination (nat_dst, nat_dport). BACKEND: backend. REG(i):
 * reg[i].
 */
#define DPFLOW_CT_VAL_SNAT    0x0001
#define DPFLOW_CT_VAL_DNAT    0x0002
#define DPFLOW_CT_VAL_POOL    0x0004
#define DPFLOW_CT_VAL_BACKEND 0x0008
#define DPFLOW_CT_VAL_REG(i)  (0x0010u << (i))
#define DPFLOW_CT_VAL_REGS    4
#define DPFLOW_CT_VAL_ALL     0x00ff
/* in an init block only (never stored): the packet may not open a
 * connection (refused with DPFLOW_CT_DROP_NO_TARGET); an existing one is
 * tracked as ever */
#define DPFLOW_CT_VAL_NO_OPEN 0x0100

/*
 * A connection's value block: 64 bytes, in the image's values array.
 * Addresses in network order (IPv4: the first 4 bytes, the rest zero),
 * ports in host order; for protocols without ports (ICMP, other) the
 * ports are 0 and a binding translates addresses only. Parts whose flag
 * is clear are zero.
 */
struct dpflow_ct_value {
	uint8_t nat_src[16]; /* translated source address (SNAT) */
	uint8_t nat_dst[16]; /* translated destination address (DNAT) */
	uint16_t nat_sport;  /* translated source port (SNAT) */
	uint16_t nat_dport;  /* translated destination port (DNAT) */
	uint32_t backend;    /* backend index */
	uint16_t flags;	     /* DPFLOW_CT_VAL_* */
	uint8_t pool;	     /* SNAT with POOL: the pool; else POOL_NONE */
	uint8_t reserved0;
	uint32_t reserved1;
	uint32_t reg[DPFLOW_CT_VAL_REGS]; /* user registers */
};
DPFLOW_STATIC_ASSERT(sizeof(struct dpflow_ct_value) == DPFLOW_CACHE_LINE,
		     "a CT value block is one line");

/*
 * A port pool in the image: addresses of one family and a port range
 * (inclusive) that NAT bindings take translated sources from. Three
 * lines; the last also holds the two counters the data path writes.
 */
struct dpflow_ct_pool {
	uint8_t addr[DPFLOW_CT_POOL_ADDRS_MAX][16];
	uint8_t family;	 /* 4 or 6 */
	uint8_t n_addrs; /* 1..DPFLOW_CT_POOL_ADDRS_MAX */
	uint16_t port_lo, port_hi;
	uint16_t tries;	 /* candidates a binding tries */
	uint32_t stride; /* candidate step, prime to n_addrs x ports */
	uint32_t reserved0;
	uint64_t bound;	    /* live bindings (atomic) */
	uint64_t exhausted; /* bindings refused (atomic) */
	uint64_t reserved1[4];
};
DPFLOW_STATIC_ASSERT(sizeof(struct dpflow_ct_pool) == 3 * DPFLOW_CACHE_LINE,
		     "a CT pool is three lines");

/* The image header: the first four lines of every CT image. */
struct dpflow_ct_image {
	/* line 0: constant after init */
	uint32_t magic;	    /* DPFLOW_CT_MAGIC */
	uint16_t version;   /* DPFLOW_CT_VERSION */
	uint16_t flags;	    /* DPFLOW_CT_F_* */
	uint32_t n_buckets; /* power of two >= 2 */
	uint32_t max_conns; /* live connections at most */
	uint64_t seed;	    /* hash seed */
	uint64_t ctrl_off;  /* byte offsets of the arrays */
	uint64_t locks_off;
	uint64_t slots_off;
	uint64_t size; /* bytes in the whole image */
	uint32_t busy_spins;
	uint16_t n_pools; /* pools, right after the header */
	uint16_t reserved0;
	/* line 1: per-state timeouts in ms, 0 = never (atomic 32-bit words:
	 * the control thread may change them while data threads read) */
	uint32_t timeout_ms[16];
	/* line 2: statistics, enum dpflow_ct_stat */
	uint64_t stats[8];
	/* line 3: live connections (READY, DEAD or being freed) */
	uint64_t n_live;
	/* a device copy's log of the control words the data path wrote
	 * (dpflow_ct_touch): byte offset of {count, index[touch_cap]}, or
	 * 0: no log (always on the CPU) */
	uint64_t touch_off;
	uint32_t touch_cap;
	uint8_t reserved1[44];
};
DPFLOW_STATIC_ASSERT(sizeof(struct dpflow_ct_image) == 4 * DPFLOW_CACHE_LINE,
		     "CT header is four lines");
DPFLOW_STATIC_ASSERT(DPFLOW_CT_STAT__COUNT <= 8, "stats fit their line");
DPFLOW_STATIC_ASSERT(DPFLOW_CT_STATE_COUNT <= 16, "states fit 4 bits");

/*
 * One slot: a connection, or a connection's reply key (an alias): the
 * line a lookup reads. The connection's value block is in the values
 * array at the same index (dpflow_ct_vals), read when the caller asks
 * for it: slot lines stay 64 bytes apart, so lookups keep the cache
 * sets and lines they had before values existed.
 */
struct dpflow_ct_slot {
	uint64_t key[5]; /* canonical key words */
	uint32_t user;	 /* user value (atomic) */
	/* a connection: its alias's slot, or DPFLOW_TABLE_MISS; an alias:
	 * its connection's slot */
	uint32_t twin;
	uint64_t created_ns; /* time of the creating packet */
	/* 1: the values array holds this connection's block; 0: the block is
	 * empty (zeros, pool NONE) and was not written (a connection made
	 * without an init block costs no second line) */
	uint64_t has_val;
};
DPFLOW_STATIC_ASSERT(sizeof(struct dpflow_ct_slot) == DPFLOW_CACHE_LINE,
		     "a CT slot is one line");

/* A value block as stored: words, copied with 64-bit atomic loads and
 * stores (struct dpflow_ct_value through memcpy). */
struct dpflow_ct_vslot {
	uint64_t w[8];
};

struct dpflow_ct_key {
	uint64_t w[5];
};

/* Control word fields. */
#define DPFLOW_CT_W_FREE	0ull
#define DPFLOW_CT_W_BUSY	1ull
#define DPFLOW_CT_W_READY	2ull
#define DPFLOW_CT_W_DEAD	3ull
#define DPFLOW_CT_W_STATUS	3ull
#define DPFLOW_CT_W_STATE_SHIFT 2
#define DPFLOW_CT_W_ORIG_LO	(1ull << 6)
#define DPFLOW_CT_W_REPLIED	(1ull << 7)
#define DPFLOW_CT_W_FIN_REPLY	(1ull << 8)
#define DPFLOW_CT_W_ALIAS	(1ull << 9)
#define DPFLOW_CT_W_GEN_SHIFT	10
#define DPFLOW_CT_W_GEN		(0xfull << DPFLOW_CT_W_GEN_SHIFT)
#define DPFLOW_CT_W_SIG_SHIFT	14
#define DPFLOW_CT_W_SIG		(0x3ffffull << DPFLOW_CT_W_SIG_SHIFT)
#define DPFLOW_CT_W_TIME_SHIFT	32
/* status, generation and signature: which connection a word belongs to */
#define DPFLOW_CT_W_IDENT \
	(DPFLOW_CT_W_STATUS | DPFLOW_CT_W_GEN | DPFLOW_CT_W_SIG)

#define DPFLOW_TCP_FIN 0x01
#define DPFLOW_TCP_SYN 0x02
#define DPFLOW_TCP_RST 0x04
#define DPFLOW_TCP_PSH 0x08
#define DPFLOW_TCP_ACK 0x10
#define DPFLOW_TCP_URG 0x20

/* TCP packet classes, as Linux's get_conntrack_index(); OTHER: not TCP. */
enum dpflow_ct_class {
	DPFLOW_CT_C_SYN,
	DPFLOW_CT_C_SYNACK,
	DPFLOW_CT_C_FIN,
	DPFLOW_CT_C_ACK,
	DPFLOW_CT_C_RST,
	DPFLOW_CT_C_NONE, /* no usable flag, or an invalid combination */
	DPFLOW_CT_C_OTHER,
};

/* Verdicts of dpflow_ct_next(). */
enum dpflow_ct_verdict {
	DPFLOW_CT_V_OK,	     /* apply the new state, refresh the timer */
	DPFLOW_CT_V_REOPEN,  /* as OK, and the connection starts over */
	DPFLOW_CT_V_IGNORE,  /* keep state and timer */
	DPFLOW_CT_V_INVALID, /* keep state and timer; flag the packet */
};

DPF_HD static inline unsigned dpflow_ct_w_state(uint64_t w)
{
	return (unsigned)(w >> DPFLOW_CT_W_STATE_SHIFT) & 0xf;
}

DPF_HD static inline uint32_t dpflow_ct_w_time(uint64_t w)
{
	return (uint32_t)(w >> DPFLOW_CT_W_TIME_SHIFT);
}

DPF_HD static inline uint64_t *dpflow_ct_ctrl(struct dpflow_ct_image *ct)
{
	return (uint64_t *)((uint8_t *)ct + ct->ctrl_off);
}

/*
 * Control word @i was written. A device copy with a touch log notes @i
 * there, for the GPU target's write-back of what a burst changed
 * (lib/gpu/flow/gpu_flow_state.cu); nothing happens on the CPU.
 */
DPF_HD static inline void dpflow_ct_touch(struct dpflow_ct_image *ct,
					  uint32_t i)
{
#ifdef __CUDA_ARCH__
	if (ct->touch_off) {
		uint32_t *log = (uint32_t *)((uint8_t *)ct + ct->touch_off);
		uint32_t k = dpflow_atomic_add32(&log[0], 1u);

		if (k < ct->touch_cap)
			log[1 + k] = i;
	}
#else
	(void)ct;
	(void)i;
#endif
}

/* Control word @i: a CAS (noted when it succeeds) and a release store. */
DPF_HD static inline bool dpflow_ct_ctrl_cas(struct dpflow_ct_image *ct,
					     uint32_t i, uint64_t *expected,
					     uint64_t desired)
{
	if (!dpflow_atomic_cas64(&dpflow_ct_ctrl(ct)[i], expected, desired))
		return false;
	dpflow_ct_touch(ct, i);
	return true;
}

DPF_HD static inline void dpflow_ct_ctrl_store(struct dpflow_ct_image *ct,
					       uint32_t i, uint64_t w)
{
	dpflow_atomic_store64_rel(&dpflow_ct_ctrl(ct)[i], w);
	dpflow_ct_touch(ct, i);
}

DPF_HD static inline uint32_t *dpflow_ct_locks(struct dpflow_ct_image *ct)
{
	return (uint32_t *)((uint8_t *)ct + ct->locks_off);
}

DPF_HD static inline struct dpflow_ct_slot *
dpflow_ct_slots(struct dpflow_ct_image *ct)
{
	return (struct dpflow_ct_slot *)((uint8_t *)ct + ct->slots_off);
}

/* The value blocks, one per slot, right after the slots. */
DPF_HD static inline struct dpflow_ct_vslot *
dpflow_ct_vals(struct dpflow_ct_image *ct)
{
	return (struct dpflow_ct_vslot *)((uint8_t *)ct + ct->slots_off +
					  (uint64_t)ct->n_buckets *
					      DPFLOW_CT_SLOTS *
					      sizeof(struct dpflow_ct_slot));
}

/* The image's port pools (n_pools of them, right after the header). */
DPF_HD static inline struct dpflow_ct_pool *
dpflow_ct_pools(struct dpflow_ct_image *ct)
{
	return (struct dpflow_ct_pool *)((uint8_t *)ct +
					 sizeof(struct dpflow_ct_image));
}

DPF_HD static inline void dpflow_ct_stat_add(struct dpflow_ct_image *ct,
					     unsigned stat)
{
	dpflow_atomic_add64(&ct->stats[stat], 1);
}

/*
 * Fill @p from a parsed header set @h (outer or inner) and the TCP flags
 * it carries. ICMP and ICMPv6 get ports 0 (meta keeps type and code there,
 * which differ between a request and its reply), so their connections are
 * keyed by addresses and protocol. Returns false when @h is not IPv4/IPv6
 * or is a non-first fragment (no L4 header: the caller decides).
 */
DPF_HD static inline bool dpflow_ct_pkt_from_hdr(const struct dpflow_hdr *h,
						 struct dpflow_ct_pkt *p)
{
	uint32_t alen;

	if (h->l3_type != DPFLOW_L3_IPV4 && h->l3_type != DPFLOW_L3_IPV6)
		return false;
	if (h->frag == DPFLOW_FRAG_LATER)
		return false;
	alen = h->l3_type == DPFLOW_L3_IPV6 ? 16 : 4;
	memset(p, 0, sizeof(*p));
	memcpy(p->src, h->src, alen);
	memcpy(p->dst, h->dst, alen);
	p->family = h->l3_type == DPFLOW_L3_IPV6 ? 6 : 4;
	p->proto = h->proto;
	if (h->l4_type == DPFLOW_L4_TCP || h->l4_type == DPFLOW_L4_UDP ||
	    h->l4_type == DPFLOW_L4_SCTP) {
		p->sport = h->sport;
		p->dport = h->dport;
	}
	if (h->l4_type == DPFLOW_L4_TCP)
		p->tcp_flags = h->tcp_flags;
	return true;
}

DPF_HD static inline uint64_t dpflow_ct_bswap64(uint64_t x)
{
#ifdef __CUDA_ARCH__
	x = (x & 0x00ff00ff00ff00ffull) << 8 | (x >> 8 & 0x00ff00ff00ff00ffull);
	x = (x & 0x0000ffff0000ffffull) << 16 |
	    (x >> 16 & 0x0000ffff0000ffffull);
	return x << 32 | x >> 32;
#else
	return __builtin_bswap64(x);
#endif
}

/*
 * Make the canonical key of @p in @k. Returns true when the packet's
 * source is the key's "lo" end (a packet whose two ends are equal counts
 * as from lo, so all its packets are in one direction). The ends compare
 * as big-endian numbers (address bytes, then port), without branches:
 * a packet's direction is random, a branch on it mispredicts.
 */
DPF_HD static inline bool dpflow_ct_key_make(const struct dpflow_ct_pkt *p,
					     struct dpflow_ct_key *k)
{
	uint64_t s0, s1, d0, d1, a0, a1, b0, b1, m;
	bool from_lo;
	uint64_t sp = p->sport, dp = p->dport;

	memcpy(&s0, p->src, 8);
	memcpy(&s1, p->src + 8, 8);
	memcpy(&d0, p->dst, 8);
	memcpy(&d1, p->dst + 8, 8);
	if (p->family != 6) { /* IPv4: the first 4 bytes (little-endian) */
		s0 &= 0xffffffffull;
		d0 &= 0xffffffffull;
		s1 = d1 = 0;
	}
	a0 = dpflow_ct_bswap64(s0);
	b0 = dpflow_ct_bswap64(d0);
	a1 = dpflow_ct_bswap64(s1);
	b1 = dpflow_ct_bswap64(d1);
	from_lo =
	    (a0 < b0) | ((a0 == b0) & ((a1 < b1) | ((a1 == b1) & (sp <= dp))));
	m = 0 - (uint64_t)from_lo; /* all ones when the source is lo */
	k->w[0] = d0 ^ ((s0 ^ d0) & m);
	k->w[1] = d1 ^ ((s1 ^ d1) & m);
	k->w[2] = s0 ^ ((s0 ^ d0) & m);
	k->w[3] = s1 ^ ((s1 ^ d1) & m);
	k->w[4] = (dp ^ ((sp ^ dp) & m)) | (sp ^ ((sp ^ dp) & m)) << 16 |
		  (uint64_t)p->proto << 32 | (uint64_t)p->family << 40;
	return from_lo;
}

/* 64-bit hash of a key: multiply-xorshift rounds, murmur3 finaliser. */
DPF_HD static inline uint64_t dpflow_ct_hash(const struct dpflow_ct_key *k,
					     uint64_t seed)
{
	uint64_t h = seed ^ 0x9e3779b97f4a7c15ull;
	unsigned i;

	for (i = 0; i < 5; i++) {
		h ^= k->w[i];
		h *= 0xd6e8feb86659fd93ull;
		h ^= h >> 32;
	}
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return h;
}

/* Where a key may live, from its hash. */
struct dpflow_ct_loc {
	uint32_t b1, b2;
	uint64_t sig; /* already shifted into control-word position */
};

DPF_HD static inline void dpflow_ct_locate(const struct dpflow_ct_image *ct,
					   uint64_t h, struct dpflow_ct_loc *l)
{
	uint32_t mask = ct->n_buckets - 1;

	l->b1 = (uint32_t)h & mask;
	l->b2 = (l->b1 ^ ((uint32_t)(h >> 32) | 1u)) & mask;
	l->sig = (h >> 46) << DPFLOW_CT_W_SIG_SHIFT;
}

/* Expired at @now_ms? (Timeout 0: never; idle time modulo 2^32 ms.) */
DPF_HD static inline bool dpflow_ct_expired(const struct dpflow_ct_image *ct,
					    uint64_t w, uint32_t now_ms)
{
	uint32_t to =
	    dpflow_atomic_load32(&ct->timeout_ms[dpflow_ct_w_state(w)]);
	uint32_t idle = now_ms - dpflow_ct_w_time(w);

	return to != 0 && idle >= to && idle < 0x80000000u;
}

DPF_HD static inline bool dpflow_ct_key_eq(const struct dpflow_ct_slot *s,
					   const struct dpflow_ct_key *k)
{
	unsigned i;

	for (i = 0; i < 5; i++)
		if (dpflow_atomic_load64(&s->key[i]) != k->w[i])
			return false;
	return true;
}

DPF_HD static inline unsigned dpflow_ct_ctz(uint32_t x)
{
#ifdef __CUDA_ARCH__
	return (unsigned)(__ffs((int)x) - 1);
#else
	return (unsigned)__builtin_ctz(x);
#endif
}

/*
 * Bit s set when slot s of the bucket at @base is READY with signature
 * @sig. Branch-free: slot states are random, a branch per slot would
 * mispredict half the time.
 */
DPF_HD static inline uint32_t dpflow_ct_match(const uint64_t *ctrl,
					      uint32_t base, uint64_t sig)
{
	const uint64_t mask = DPFLOW_CT_W_SIG | DPFLOW_CT_W_STATUS;
	uint32_t m = 0;
	unsigned s;

	for (s = 0; s < DPFLOW_CT_SLOTS; s++)
		m |= (uint32_t)((dpflow_atomic_load64(&ctrl[base + s]) &
				 mask) == (sig | DPFLOW_CT_W_READY))
		     << s;
	return m;
}

/* Where a key matched: the connection, and through which slot. */
struct dpflow_ct_hit {
	uint32_t conn; /* the connection's slot */
	uint32_t slot; /* the slot whose key matched: conn, or its alias */
	uint64_t w;    /* the connection's control word */
	bool orig_lo;  /* the matched key's initiator end is its lo end */
};

/*
 * The connection that alias @a (control word @wa, READY, key already
 * compared) stands for: fills @hit and returns true, or false when that
 * connection is not READY (being made or freed, or DEAD) or is expired
 * (marked DEAD with @kill). Reading the connection's word, then seeing
 * the alias unchanged, proves the word was the aliased connection's: its
 * slot is reused only after the alias is freed.
 */
DPF_HD static inline bool dpflow_ct_resolve(struct dpflow_ct_image *ct,
					    uint32_t a, uint64_t wa,
					    uint32_t now_ms, bool kill,
					    struct dpflow_ct_hit *hit)
{
	uint64_t *ctrl = dpflow_ct_ctrl(ct);
	uint32_t c = dpflow_atomic_load32(&dpflow_ct_slots(ct)[a].twin);
	uint64_t wc, ident;

	if (c >= ct->n_buckets * DPFLOW_CT_SLOTS)
		return false;
	wc = dpflow_atomic_load64_acq(&ctrl[c]);
	dpflow_atomic_fence_acq();
	if ((dpflow_atomic_load64(&ctrl[a]) & DPFLOW_CT_W_IDENT) !=
		(wa & DPFLOW_CT_W_IDENT) ||
	    (wc & (DPFLOW_CT_W_STATUS | DPFLOW_CT_W_ALIAS)) !=
		DPFLOW_CT_W_READY)
		return false;
	ident = wc & DPFLOW_CT_W_IDENT;
	while ((wc & DPFLOW_CT_W_IDENT) == ident &&
	       dpflow_ct_expired(ct, wc, now_ms)) {
		uint64_t dead = (wc & ~DPFLOW_CT_W_STATUS) | DPFLOW_CT_W_DEAD;

		if (!kill || dpflow_ct_ctrl_cas(ct, c, &wc, dead))
			break;
	}
	if ((wc & DPFLOW_CT_W_IDENT) != ident ||
	    dpflow_ct_expired(ct, wc, now_ms))
		return false;
	hit->conn = c;
	hit->slot = a;
	hit->w = wc;
	hit->orig_lo = (wa & DPFLOW_CT_W_ORIG_LO) != 0;
	return true;
}

/*
 * Find the live connection holding @k in its two buckets, as its key or
 * (with @aliases) as its reply key. Fills @hit: the connection's index and
 * control word (checked again after the key compare, so key and word
 * belong together). An expired connection is not found; with @kill it is
 * marked DEAD for the aging scan to report.
 */
DPF_HD static DPFLOW_ALWAYS_INLINE bool
dpflow_ct_find_hit(struct dpflow_ct_image *ct, const struct dpflow_ct_key *k,
		   const struct dpflow_ct_loc *l, uint32_t now_ms, bool kill,
		   bool aliases, struct dpflow_ct_hit *hit)
{
	uint64_t *ctrl = dpflow_ct_ctrl(ct);
	struct dpflow_ct_slot *slots = dpflow_ct_slots(ct);
	uint32_t b1 = l->b1 * DPFLOW_CT_SLOTS, b2 = l->b2 * DPFLOW_CT_SLOTS;
	/* both buckets' matches in one mask: one loop, usually one pass */
	uint32_t m = dpflow_ct_match(ctrl, b1, l->sig) |
		     dpflow_ct_match(ctrl, b2, l->sig) << DPFLOW_CT_SLOTS;

	while (m) {
		unsigned bit = dpflow_ct_ctz(m);
		uint32_t i = bit < DPFLOW_CT_SLOTS ? b1 + bit
						   : b2 + bit - DPFLOW_CT_SLOTS;
		uint64_t w = dpflow_atomic_load64(&ctrl[i]), w2;

		m &= m - 1;
		if ((w & DPFLOW_CT_W_STATUS) != DPFLOW_CT_W_READY ||
		    (w & DPFLOW_CT_W_SIG) != l->sig)
			continue;
		if (DPFLOW_UNLIKELY(w & DPFLOW_CT_W_ALIAS)) {
			if (!aliases)
				continue;
			dpflow_atomic_fence_acq();
			if (dpflow_ct_key_eq(&slots[i], k) &&
			    dpflow_ct_resolve(ct, i, w, now_ms, kill, hit))
				return true;
			continue;
		}
		dpflow_atomic_fence_acq();
		if (!dpflow_ct_key_eq(&slots[i], k))
			continue;
		dpflow_atomic_fence_acq();
		w2 = dpflow_atomic_load64(&ctrl[i]);
		while ((w2 & DPFLOW_CT_W_IDENT) == (w & DPFLOW_CT_W_IDENT) &&
		       dpflow_ct_expired(ct, w2, now_ms)) {
			uint64_t dead =
			    (w2 & ~DPFLOW_CT_W_STATUS) | DPFLOW_CT_W_DEAD;

			if (!kill || dpflow_ct_ctrl_cas(ct, i, &w2, dead))
				break;
		}
		if ((w2 & DPFLOW_CT_W_IDENT) != (w & DPFLOW_CT_W_IDENT) ||
		    dpflow_ct_expired(ct, w2, now_ms))
			continue;
		hit->conn = i;
		hit->slot = i;
		hit->w = w2;
		hit->orig_lo = (w2 & DPFLOW_CT_W_ORIG_LO) != 0;
		return true;
	}
	return false;
}

/*
 * Find the READY connection whose own key is @k (reply keys are not
 * looked at). Returns its index and, in *@wout, its control word, or
 * DPFLOW_TABLE_MISS. With @kill an expired connection is marked DEAD.
 */
DPF_HD static inline uint32_t dpflow_ct_find(struct dpflow_ct_image *ct,
					     const struct dpflow_ct_key *k,
					     const struct dpflow_ct_loc *l,
					     uint32_t now_ms, bool kill,
					     uint64_t *wout)
{
	struct dpflow_ct_hit hit;

	if (!dpflow_ct_find_hit(ct, k, l, now_ms, kill, false, &hit))
		return DPFLOW_TABLE_MISS;
	*wout = hit.w;
	return hit.conn;
}

/*
 * The from_lo to give dpflow_ct_update() for a packet whose key matched
 * as @hit says, @from_lo being the packet's side of that key: the side of
 * the connection's own key that has the same direction.
 */
DPF_HD static inline bool dpflow_ct_hit_lo(const struct dpflow_ct_hit *hit,
					   bool from_lo)
{
	return (from_lo == hit->orig_lo) ==
	       ((hit->w & DPFLOW_CT_W_ORIG_LO) != 0);
}

/* Copy connection @i's value block to @v (relaxed word loads; the caller
 * validates the control word afterwards). */
DPF_HD static inline void dpflow_ct_value_load(struct dpflow_ct_image *ct,
					       uint32_t i,
					       struct dpflow_ct_value *v)
{
	const struct dpflow_ct_vslot *src = &dpflow_ct_vals(ct)[i];
	uint64_t w[8];
	unsigned j;

	if (!dpflow_atomic_load64(&dpflow_ct_slots(ct)[i].has_val)) {
		memset(v, 0, sizeof(*v));
		v->pool = DPFLOW_CT_POOL_NONE;
		return;
	}
	for (j = 0; j < 8; j++)
		w[j] = dpflow_atomic_load64(&src->w[j]);
	memcpy(v, w, sizeof(w));
}

/*
 * The class of a TCP packet from its flags: Linux's flag validity table
 * (tcp_valid_flags[], PSH, ECE and CWR ignored) then get_conntrack_index():
 * RST, else SYN (with ACK: SYNACK), else FIN, else ACK. Valid combinations:
 * SYN, SYN|URG, SYN|ACK, RST, RST|ACK, FIN|ACK, FIN|ACK|URG, ACK, ACK|URG;
 * anything else is NONE (invalid).
 */
DPF_HD static inline unsigned dpflow_ct_tcp_class(uint8_t flags)
{
	/* bit i: combination i of (FIN, SYN, RST, ACK, URG) is valid */
	const uint32_t valid = 1u << 0x02 | 1u << 0x12 | 1u << 0x0a |
			       1u << 0x04 | 1u << 0x0c | 1u << 0x09 |
			       1u << 0x19 | 1u << 0x08 | 1u << 0x18;
	unsigned i = (unsigned)(flags & 0x07) | (unsigned)(flags >> 1 & 0x18);

	if (!(valid >> i & 1))
		return DPFLOW_CT_C_NONE;
	if (flags & DPFLOW_TCP_RST)
		return DPFLOW_CT_C_RST;
	if (flags & DPFLOW_TCP_SYN)
		return flags & DPFLOW_TCP_ACK ? DPFLOW_CT_C_SYNACK
					      : DPFLOW_CT_C_SYN;
	if (flags & DPFLOW_TCP_FIN)
		return DPFLOW_CT_C_FIN;
	return DPFLOW_CT_C_ACK;
}

/*
 * The state machine. From state @st, a packet of class @cls in direction
 * @dir (the first FIN came from the reply side when @fin_reply) leads to
 * the returned state with *@verdict; *@fin_out is the new fin_reply.
 *
 * TCP (Linux tcp_conntracks[] simplified; s = the side that sent the
 * first FIN, o = the other side):
 *   any state, RST           -> CLOSE
 *   SYN_SENT:  SYN orig -> SYN_SENT; SYN reply -> SYN_RECV (simultaneous
 *              open; Linux passes through SYN_SENT2); SYNACK reply ->
 *              SYN_RECV; ACK reply: ignore; else invalid
 *   SYN_RECV:  ACK orig -> ESTABLISHED; ACK reply -> SYN_RECV;
 *              SYNACK orig -> SYN_RECV; FIN -> FIN_WAIT
 *   ESTABLISHED: ACK -> ESTABLISHED; FIN -> FIN_WAIT
 *   FIN_WAIT:  ACK o -> CLOSE_WAIT; FIN o -> LAST_ACK; ACK/FIN s: stay
 *   CLOSE_WAIT: ACK: stay; FIN o -> LAST_ACK; FIN s: stay
 *   LAST_ACK:  ACK s -> TIME_WAIT (the last ACK answers o's FIN); else stay
 *   TIME_WAIT, CLOSE: ACK, FIN: stay; SYN orig -> SYN_SENT (reopen);
 *              SYNACK reply: ignore; else invalid
 *   SYN_RECV .. LAST_ACK: SYN orig and SYNACK reply are ignored
 *              (retransmissions), SYN reply and SYNACK orig invalid
 *              (except SYNACK orig in SYN_RECV, above)
 *   NONE (no valid flag combination): invalid in every state
 * UDP / ICMP / other: UNREPLIED -> REPLIED on the first reply packet.
 */
DPF_HD static inline unsigned dpflow_ct_next(unsigned st, unsigned cls,
					     unsigned dir, unsigned fin_reply,
					     unsigned *verdict,
					     unsigned *fin_out)
{
	bool same = dir == fin_reply; /* from the side that sent a FIN first */
	bool orig = dir == DPFLOW_CT_DIR_ORIG;

	*verdict = DPFLOW_CT_V_OK;
	*fin_out = fin_reply;
	if (cls == DPFLOW_CT_C_OTHER) {
		/* the state first: it rarely changes, the direction does */
		if ((st == DPFLOW_CT_UDP_UNREPLIED ||
		     st == DPFLOW_CT_ICMP_UNREPLIED ||
		     st == DPFLOW_CT_OTHER_UNREPLIED) &&
		    !orig)
			return st + 1;
		return st;
	}
	if (cls == DPFLOW_CT_C_RST)
		return DPFLOW_CT_CLOSE;
	if (cls == DPFLOW_CT_C_NONE) {
		*verdict = DPFLOW_CT_V_INVALID;
		return st;
	}
	switch (st) {
	case DPFLOW_CT_SYN_SENT:
		if (cls == DPFLOW_CT_C_SYN)
			return orig ? DPFLOW_CT_SYN_SENT : DPFLOW_CT_SYN_RECV;
		if (cls == DPFLOW_CT_C_SYNACK && !orig)
			return DPFLOW_CT_SYN_RECV;
		if (cls == DPFLOW_CT_C_ACK && !orig) {
			*verdict = DPFLOW_CT_V_IGNORE;
			return st;
		}
		*verdict = DPFLOW_CT_V_INVALID;
		return st;
	case DPFLOW_CT_SYN_RECV:
		if (cls == DPFLOW_CT_C_ACK)
			return orig ? DPFLOW_CT_ESTABLISHED
				    : DPFLOW_CT_SYN_RECV;
		if (cls == DPFLOW_CT_C_SYNACK && orig)
			return DPFLOW_CT_SYN_RECV;
		break;
	case DPFLOW_CT_ESTABLISHED:
		if (cls == DPFLOW_CT_C_ACK)
			return st;
		break;
	case DPFLOW_CT_FIN_WAIT:
		if (cls == DPFLOW_CT_C_ACK)
			return same ? st : (unsigned)DPFLOW_CT_CLOSE_WAIT;
		if (cls == DPFLOW_CT_C_FIN)
			return same ? st : (unsigned)DPFLOW_CT_LAST_ACK;
		break;
	case DPFLOW_CT_CLOSE_WAIT:
		if (cls == DPFLOW_CT_C_ACK)
			return st;
		if (cls == DPFLOW_CT_C_FIN)
			return same ? st : (unsigned)DPFLOW_CT_LAST_ACK;
		break;
	case DPFLOW_CT_LAST_ACK:
		if (cls == DPFLOW_CT_C_ACK)
			return same ? (unsigned)DPFLOW_CT_TIME_WAIT : st;
		if (cls == DPFLOW_CT_C_FIN)
			return st;
		break;
	case DPFLOW_CT_TIME_WAIT:
	case DPFLOW_CT_CLOSE:
		if (cls == DPFLOW_CT_C_ACK || cls == DPFLOW_CT_C_FIN)
			return st;
		if (cls == DPFLOW_CT_C_SYN && orig) {
			*verdict = DPFLOW_CT_V_REOPEN;
			*fin_out = 0;
			return DPFLOW_CT_SYN_SENT;
		}
		if (cls == DPFLOW_CT_C_SYNACK && !orig) {
			*verdict = DPFLOW_CT_V_IGNORE;
			return st;
		}
		*verdict = DPFLOW_CT_V_INVALID;
		return st;
	default: /* a TCP packet on a non-TCP state cannot happen */
		*verdict = DPFLOW_CT_V_INVALID;
		return st;
	}
	/* SYN_RECV .. LAST_ACK, the packets not handled above */
	if (cls == DPFLOW_CT_C_FIN) { /* SYN_RECV, ESTABLISHED */
		*fin_out = dir;
		return DPFLOW_CT_FIN_WAIT;
	}
	if ((cls == DPFLOW_CT_C_SYN && orig) ||
	    (cls == DPFLOW_CT_C_SYNACK && !orig))
		*verdict = DPFLOW_CT_V_IGNORE;
	else
		*verdict = DPFLOW_CT_V_INVALID;
	return st;
}

/*
 * The state a packet of class @cls opens a connection in, or DPFLOW_CT_NONE
 * when it cannot open one: a TCP SYN opens SYN_SENT; with TCP_LOOSE a TCP
 * ACK opens ESTABLISHED (pickup of a connection already running); UDP,
 * ICMP and other protocols open their UNREPLIED state.
 */
DPF_HD static inline unsigned
dpflow_ct_open_state(const struct dpflow_ct_image *ct, unsigned cls,
		     uint8_t proto)
{
	if (cls == DPFLOW_CT_C_SYN)
		return DPFLOW_CT_SYN_SENT;
	if (cls == DPFLOW_CT_C_ACK)
		return ct->flags & DPFLOW_CT_F_TCP_LOOSE ? DPFLOW_CT_ESTABLISHED
							 : DPFLOW_CT_NONE;
	if (cls != DPFLOW_CT_C_OTHER)
		return DPFLOW_CT_NONE;
	if (proto == 17)
		return DPFLOW_CT_UDP_UNREPLIED;
	if (proto == 1 || proto == 58)
		return DPFLOW_CT_ICMP_UNREPLIED;
	return DPFLOW_CT_OTHER_UNREPLIED;
}

/*
 * Apply a packet to connection @i whose control word was *@w. Returns
 * false when the connection went away meanwhile (expired, removed,
 * reused): the caller looks again.
 */
DPF_HD static inline bool dpflow_ct_update(struct dpflow_ct_image *ct,
					   uint32_t i, uint64_t w, bool from_lo,
					   unsigned cls, uint32_t now_ms,
					   struct dpflow_ct_result *r)
{
	uint64_t *cw = &dpflow_ct_ctrl(ct)[i];
	const uint32_t *user = &dpflow_ct_slots(ct)[i].user;
	uint64_t ident = w & DPFLOW_CT_W_IDENT;
	unsigned dir, st, nst, verdict, fin;

	for (;;) {
		uint64_t nw = w;
		uint32_t since;

		dir = ((w & DPFLOW_CT_W_ORIG_LO) != 0) == from_lo
			  ? DPFLOW_CT_DIR_ORIG
			  : DPFLOW_CT_DIR_REPLY;
		st = dpflow_ct_w_state(w);
		nst = dpflow_ct_next(st, cls, dir,
				     (w & DPFLOW_CT_W_FIN_REPLY) ? 1u : 0u,
				     &verdict, &fin);
		r->user = dpflow_atomic_load32(user);
		if (verdict == DPFLOW_CT_V_OK ||
		    verdict == DPFLOW_CT_V_REOPEN) {
			nw &= ~(0xfull << DPFLOW_CT_W_STATE_SHIFT);
			nw |= (uint64_t)nst << DPFLOW_CT_W_STATE_SHIFT;
			if (verdict == DPFLOW_CT_V_REOPEN)
				nw &= ~(DPFLOW_CT_W_REPLIED |
					DPFLOW_CT_W_FIN_REPLY);
			nw |= (uint64_t)(verdict == DPFLOW_CT_V_OK) * dir *
			      DPFLOW_CT_W_REPLIED;
			nw = fin ? nw | DPFLOW_CT_W_FIN_REPLY
				 : nw & ~DPFLOW_CT_W_FIN_REPLY;
			since = now_ms - dpflow_ct_w_time(w);
			if (since - 1u < 0x7fffffffu) /* now is later */
				nw = (nw & 0xffffffffull) |
				     (uint64_t)now_ms << DPFLOW_CT_W_TIME_SHIFT;
		} else {
			nst = st;
		}
		if (nw == w) {
			uint64_t w2;

			dpflow_atomic_fence_acq();
			w2 = dpflow_atomic_load64(cw);
			if (w2 == w)
				break;
			w = w2;
		} else if (dpflow_ct_ctrl_cas(ct, i, &w, nw)) {
			break;
		}
		if ((w & DPFLOW_CT_W_IDENT) != ident)
			return false;
	}
	r->conn = i;
	r->state = (uint8_t)nst;
	r->dir = (uint8_t)dir;
	r->flags = verdict == DPFLOW_CT_V_IGNORE    ? DPFLOW_CT_R_IGNORED
		   : verdict == DPFLOW_CT_V_INVALID ? DPFLOW_CT_R_INVALID
		   : verdict == DPFLOW_CT_V_REOPEN  ? DPFLOW_CT_R_REOPEN
						    : 0;
	r->drop = DPFLOW_CT_DROP_NONE;
	if (verdict == DPFLOW_CT_V_INVALID)
		dpflow_ct_stat_add(ct, DPFLOW_CT_STAT_INVALID);
	return true;
}

/* Take a bucket lock within @spins attempts. */
DPF_HD static inline bool dpflow_ct_lock(uint32_t *l, uint32_t spins)
{
	uint32_t i;

	for (i = 0;; i++) {
		uint32_t z = 0;

		if (dpflow_atomic_load32(l) == 0 &&
		    dpflow_atomic_cas32(l, &z, 1))
			return true;
		if (i >= spins)
			return false;
		dpflow_cpu_relax();
	}
}

/*
 * Claim a FREE slot (CAS to BUSY, same generation) in the emptier of the
 * two buckets, trying its free slots from a position that depends on the
 * key (so that threads creating different keys spread out). Returns its
 * index and the BUSY word, or MISS once both buckets are seen full.
 */
DPF_HD static inline uint32_t
dpflow_ct_claim_free(struct dpflow_ct_image *ct, const struct dpflow_ct_loc *l,
		     uint64_t *wout)
{
	uint64_t *ctrl = dpflow_ct_ctrl(ct);
	unsigned start = (unsigned)(l->sig >> DPFLOW_CT_W_SIG_SHIFT);
	unsigned passes, t, s;

	/* a pass fails only when other threads took every free slot seen:
	 * the buckets fill up within a few passes */
	for (passes = 0; passes < 8 * DPFLOW_CT_SLOTS; passes++) {
		unsigned n_free[2] = {0, 0};
		uint32_t base;

		for (t = 0; t < 2; t++) {
			base = (t ? l->b2 : l->b1) * DPFLOW_CT_SLOTS;
			for (s = 0; s < DPFLOW_CT_SLOTS; s++)
				n_free[t] +=
				    (dpflow_atomic_load64(&ctrl[base + s]) &
				     DPFLOW_CT_W_STATUS) == DPFLOW_CT_W_FREE;
		}
		if (!n_free[0] && !n_free[1])
			return DPFLOW_TABLE_MISS;
		base =
		    (n_free[1] > n_free[0] ? l->b2 : l->b1) * DPFLOW_CT_SLOTS;
		for (s = 0; s < DPFLOW_CT_SLOTS; s++) {
			uint32_t i = base + (start + s) % DPFLOW_CT_SLOTS;
			uint64_t w = dpflow_atomic_load64(&ctrl[i]);
			uint64_t busy =
			    (w & DPFLOW_CT_W_GEN) | DPFLOW_CT_W_BUSY;

			if ((w & DPFLOW_CT_W_STATUS) == DPFLOW_CT_W_FREE &&
			    dpflow_ct_ctrl_cas(ct, i, &w, busy)) {
				*wout = busy;
				return i;
			}
		}
	}
	return DPFLOW_TABLE_MISS;
}

/* Established for the replacement policy: ESTABLISHED and REPLIED. */
DPF_HD static inline bool dpflow_ct_state_established(unsigned st)
{
	return st == DPFLOW_CT_ESTABLISHED || st == DPFLOW_CT_UDP_REPLIED ||
	       st == DPFLOW_CT_ICMP_REPLIED || st == DPFLOW_CT_OTHER_REPLIED;
}

/*
 * What freeing connection @c (its control word now BUSY, owned by the
 * caller) takes with it: its alias (FREE with the next generation) and its
 * pool binding. Data path and control thread.
 */
DPF_HD static inline void dpflow_ct_unbind(struct dpflow_ct_image *ct,
					   uint32_t c)
{
	uint64_t *ctrl = dpflow_ct_ctrl(ct);
	struct dpflow_ct_slot *s = &dpflow_ct_slots(ct)[c];
	uint32_t a = dpflow_atomic_load32(&s->twin);
	struct dpflow_ct_value v;

	if (a == DPFLOW_TABLE_MISS || a >= ct->n_buckets * DPFLOW_CT_SLOTS)
		return;
	/* the alias is the connection's alone: a store, not a CAS (a
	 * creator still holding it BUSY fails its publishing CAS) */
	dpflow_ct_ctrl_store(
	    ct, a,
	    (dpflow_atomic_load64(&ctrl[a]) + (1ull << DPFLOW_CT_W_GEN_SHIFT)) &
		DPFLOW_CT_W_GEN);
	dpflow_ct_value_load(ct, c, &v);
	if ((v.flags & DPFLOW_CT_VAL_POOL) && v.pool < ct->n_pools)
		dpflow_atomic_add64(&dpflow_ct_pools(ct)[v.pool].bound,
				    (uint64_t)-1);
}

/*
 * Free connection @c whose control word was @w (READY or DEAD, not an
 * alias) to make room: CAS to BUSY, free its alias, FREE with the next
 * generation, count @stat. False when the word changed meanwhile (a packet
 * refreshed it, or it went away): the caller chooses again.
 */
DPF_HD static inline bool dpflow_ct_kill(struct dpflow_ct_image *ct, uint32_t c,
					 uint64_t w, unsigned stat)
{
	uint64_t busy = (w & DPFLOW_CT_W_GEN) | DPFLOW_CT_W_BUSY;

	if (!dpflow_ct_ctrl_cas(ct, c, &w, busy))
		return false;
	dpflow_ct_unbind(ct, c);
	dpflow_ct_ctrl_store(
	    ct, c, (w + (1ull << DPFLOW_CT_W_GEN_SHIFT)) & DPFLOW_CT_W_GEN);
	dpflow_atomic_add64(&ct->n_live, (uint64_t)-1);
	dpflow_ct_stat_add(ct, stat);
	return true;
}

/*
 * The connection to free to make room in @l's buckets for a new one
 * (established when @est): the first, in scan order (b1's slots, then
 * b2's), whose key or reply key is there and that is expired or DEAD;
 * else, with @live, the least recently used one the policy lets go (see
 * the header). Returns its index and word (*@wout), *@expired saying
 * which kind, or MISS.
 */
DPF_HD static inline uint32_t
dpflow_ct_pick_victim(struct dpflow_ct_image *ct, const struct dpflow_ct_loc *l,
		      uint32_t now_ms, bool live, bool est, uint64_t *wout,
		      bool *expired)
{
	uint64_t *ctrl = dpflow_ct_ctrl(ct);
	uint32_t best[2] = {DPFLOW_TABLE_MISS, DPFLOW_TABLE_MISS};
	uint32_t age[2] = {0, 0};
	uint64_t bw[2] = {0, 0};
	unsigned t, s;

	for (t = 0; t < 2; t++) {
		uint32_t base = (t ? l->b2 : l->b1) * DPFLOW_CT_SLOTS;

		for (s = 0; s < DPFLOW_CT_SLOTS; s++) {
			uint32_t i = base + s, c = i, a;
			uint64_t w = dpflow_atomic_load64(&ctrl[i]), wa = w;
			uint64_t st = w & DPFLOW_CT_W_STATUS;
			unsigned cls;

			if (st != DPFLOW_CT_W_READY && st != DPFLOW_CT_W_DEAD)
				continue;
			if (w & DPFLOW_CT_W_ALIAS) {
				/* its connection, read while the alias
				 * stays (as dpflow_ct_resolve) */
				c = dpflow_atomic_load32(
				    &dpflow_ct_slots(ct)[i].twin);
				if (c >= ct->n_buckets * DPFLOW_CT_SLOTS)
					continue;
				w = dpflow_atomic_load64_acq(&ctrl[c]);
				dpflow_atomic_fence_acq();
				if (dpflow_atomic_load64(&ctrl[i]) != wa)
					continue;
				st = w & DPFLOW_CT_W_STATUS;
				if ((st != DPFLOW_CT_W_READY &&
				     st != DPFLOW_CT_W_DEAD) ||
				    (w & DPFLOW_CT_W_ALIAS))
					continue;
			}
			if (st == DPFLOW_CT_W_DEAD ||
			    dpflow_ct_expired(ct, w, now_ms)) {
				*wout = w;
				*expired = true;
				return c;
			}
			if (!live)
				continue;
			a = now_ms - dpflow_ct_w_time(w);
			if (a >= 0x80000000u) /* a later clock: just seen */
				a = 0;
			cls = dpflow_ct_state_established(dpflow_ct_w_state(w))
				  ? 1u
				  : 0u;
			if (best[cls] == DPFLOW_TABLE_MISS || a > age[cls]) {
				best[cls] = c;
				age[cls] = a;
				bw[cls] = w;
			}
		}
	}
	*expired = false;
	t = best[0] != DPFLOW_TABLE_MISS ? 0u : 1u;
	if (t == 1 && !est)
		return DPFLOW_TABLE_MISS;
	*wout = bw[t];
	return best[t];
}

/*
 * Claim a slot in @l's buckets for a new key: for a connection (@conn)
 * reserve the live count first. A FREE slot, else make room (EVICT /
 * REPLACE / always when the buckets are full, see the header) and claim
 * the slot freed. Returns the slot, BUSY, and its word in *@wout, or MISS
 * with *@drop (FULL or NO_SLOT) and nothing reserved.
 */
DPF_HD static inline uint32_t dpflow_ct_claim(struct dpflow_ct_image *ct,
					      const struct dpflow_ct_loc *l,
					      uint32_t now_ms, bool conn,
					      bool est, uint64_t *wout,
					      unsigned *drop)
{
	bool reserved = !conn;
	bool any = (ct->flags & (DPFLOW_CT_F_EVICT | DPFLOW_CT_F_REPLACE)) != 0;
	bool live = (ct->flags & DPFLOW_CT_F_REPLACE) != 0;
	unsigned pass;

	for (pass = 0; pass < 4; pass++) {
		uint32_t i, v;
		uint64_t vw = 0;
		bool vexp = false;

		if (!reserved) {
			reserved =
			    dpflow_atomic_add64(&ct->n_live, 1) < ct->max_conns;
			if (!reserved)
				dpflow_atomic_add64(&ct->n_live, (uint64_t)-1);
		}
		if (reserved) {
			i = dpflow_ct_claim_free(ct, l, wout);
			if (i != DPFLOW_TABLE_MISS)
				return i;
		} else if (!any) {
			break;
		}
		v = dpflow_ct_pick_victim(ct, l, now_ms, live, est, &vw, &vexp);
		if (v == DPFLOW_TABLE_MISS)
			break;
		dpflow_ct_kill(ct, v, vw,
			       vexp ? DPFLOW_CT_STAT_EXPIRED
				    : DPFLOW_CT_STAT_REPLACED);
	}
	if (reserved && conn)
		dpflow_atomic_add64(&ct->n_live, (uint64_t)-1);
	*drop = reserved ? DPFLOW_CT_DROP_NO_SLOT : DPFLOW_CT_DROP_FULL;
	return DPFLOW_TABLE_MISS;
}

/* Store key @k in slot @i (its control word BUSY). */
DPF_HD static inline void dpflow_ct_key_store(struct dpflow_ct_slot *s,
					      const struct dpflow_ct_key *k)
{
	unsigned j;

	for (j = 0; j < 5; j++)
		dpflow_atomic_store64(&s->key[j], k->w[j]);
}

/* The tuple of key @k as its lo end (@lo) or hi end sent it. */
DPF_HD static inline void dpflow_ct_key_tuple(const struct dpflow_ct_key *k,
					      bool lo, struct dpflow_ct_pkt *p)
{
	uint16_t lo_port = (uint16_t)k->w[4],
		 hi_port = (uint16_t)(k->w[4] >> 16);

	memset(p, 0, sizeof(*p));
	memcpy(p->src, &k->w[lo ? 0 : 2], 16);
	memcpy(p->dst, &k->w[lo ? 2 : 0], 16);
	p->sport = lo ? lo_port : hi_port;
	p->dport = lo ? hi_port : lo_port;
	p->proto = (uint8_t)(k->w[4] >> 32);
	p->family = (uint8_t)(k->w[4] >> 40);
}

/*
 * Make @v what a connection of family @family (with ports when @ports)
 * stores: unknown flags dropped, POOL only with SNAT, the parts whose
 * flag is clear zero, IPv4 addresses in their first 4 bytes, no ports for
 * protocols without them.
 */
DPF_HD static inline void dpflow_ct_value_norm(struct dpflow_ct_value *v,
					       uint8_t family, bool ports)
{
	unsigned i;

	v->flags &= DPFLOW_CT_VAL_ALL;
	if (!(v->flags & DPFLOW_CT_VAL_SNAT))
		v->flags &= (uint16_t)~DPFLOW_CT_VAL_POOL;
	if (!(v->flags & DPFLOW_CT_VAL_POOL))
		v->pool = DPFLOW_CT_POOL_NONE;
	if (!(v->flags & DPFLOW_CT_VAL_SNAT) || family != 6)
		memset(v->nat_src + (v->flags & DPFLOW_CT_VAL_SNAT ? 4 : 0), 0,
		       v->flags & DPFLOW_CT_VAL_SNAT ? 12 : 16);
	if (!(v->flags & DPFLOW_CT_VAL_DNAT) || family != 6)
		memset(v->nat_dst + (v->flags & DPFLOW_CT_VAL_DNAT ? 4 : 0), 0,
		       v->flags & DPFLOW_CT_VAL_DNAT ? 12 : 16);
	if (!(v->flags & DPFLOW_CT_VAL_SNAT) || !ports)
		v->nat_sport = 0;
	if (!(v->flags & DPFLOW_CT_VAL_DNAT) || !ports)
		v->nat_dport = 0;
	if (!(v->flags & DPFLOW_CT_VAL_BACKEND))
		v->backend = 0;
	for (i = 0; i < DPFLOW_CT_VAL_REGS; i++)
		if (!(v->flags & DPFLOW_CT_VAL_REG(i)))
			v->reg[i] = 0;
	v->reserved0 = 0;
	v->reserved1 = 0;
}

DPF_HD static inline bool dpflow_ct_key_same(const struct dpflow_ct_key *a,
					     const struct dpflow_ct_key *b)
{
	return ((a->w[0] ^ b->w[0]) | (a->w[1] ^ b->w[1]) |
		(a->w[2] ^ b->w[2]) | (a->w[3] ^ b->w[3]) |
		(a->w[4] ^ b->w[4])) == 0;
}

/* What a NAT binding in the making holds. */
struct dpflow_ct_bind {
	struct dpflow_ct_key rk; /* the reply key */
	struct dpflow_ct_loc rl; /* its buckets */
	uint32_t alias;		 /* its slot (BUSY), or MISS: no alias */
	uint64_t wa;		 /* that slot's BUSY word */
	bool r_lo;	/* the translated initiator is the reply key's lo */
	uint32_t *lock; /* the reply key's bucket lock held, or NULL */
};

/*
 * Bind the NAT of a new connection with key @k (hash @h, buckets @l,
 * whose b1 lock the caller holds; the packet's side @from_lo is the
 * initiator's) as value @v asks, filling @v's translated source when it
 * comes from a pool, and @b. The reply key is checked free and its alias
 * slot claimed under its b1 lock, which stays held (b->lock) until the
 * connection is published. Returns false when no candidate works (NAT
 * exhausted, counted).
 */
DPF_HD static inline bool
dpflow_ct_nat_bind(struct dpflow_ct_image *ct, const struct dpflow_ct_key *k,
		   uint64_t h, const struct dpflow_ct_loc *l, bool from_lo,
		   bool est, uint32_t now_ms, struct dpflow_ct_value *v,
		   struct dpflow_ct_bind *b)
{
	struct dpflow_ct_pool *pool = NULL;
	struct dpflow_ct_pkt t;
	uint32_t total = 1, tries = 1, start = 0, stride = 1, n_ports = 1;
	uint32_t i;
	uint8_t proto = (uint8_t)(k->w[4] >> 32);
	bool ports = proto == 6 || proto == 17 || proto == 132;

	dpflow_ct_key_tuple(k, from_lo, &t);
	dpflow_ct_value_norm(v, t.family, ports);
	if (v->flags & DPFLOW_CT_VAL_POOL) {
		if (v->pool >= ct->n_pools)
			goto fail;
		pool = &dpflow_ct_pools(ct)[v->pool];
		if (pool->family != t.family)
			goto fail;
		n_ports =
		    ports ? (uint32_t)pool->port_hi - pool->port_lo + 1 : 1u;
		total = pool->n_addrs * n_ports;
		tries = pool->tries < total ? pool->tries : total;
		start = (uint32_t)(h >> 40) % total;
		stride = ports ? pool->stride % total : 1u;
		if (!stride)
			stride = 1;
	}
	if (v->flags & DPFLOW_CT_VAL_DNAT) {
		memcpy(t.dst, v->nat_dst, 16);
		t.dport = v->nat_dport;
	}
	for (i = 0; i < tries; i++) {
		struct dpflow_ct_hit hit;
		unsigned drop;
		uint64_t rh;

		if (pool) {
			uint32_t c = (uint32_t)(((uint64_t)start +
						 (uint64_t)i * stride) %
						total);

			memset(v->nat_src, 0, 16);
			memcpy(v->nat_src, pool->addr[c % pool->n_addrs],
			       t.family == 6 ? 16 : 4);
			v->nat_sport =
			    ports
				? (uint16_t)(pool->port_lo + c / pool->n_addrs)
				: 0;
		}
		if (v->flags & DPFLOW_CT_VAL_SNAT) {
			memcpy(t.src, v->nat_src, 16);
			t.sport = v->nat_sport;
		}
		b->r_lo = dpflow_ct_key_make(&t, &b->rk);
		b->alias = DPFLOW_TABLE_MISS;
		b->lock = NULL;
		if (dpflow_ct_key_same(&b->rk, k))
			return true; /* no translation: no second key */
		rh = dpflow_ct_hash(&b->rk, ct->seed);
		dpflow_ct_locate(ct, rh, &b->rl);
		if (b->rl.b1 != l->b1) {
			b->lock = &dpflow_ct_locks(ct)[b->rl.b1];
			if (!dpflow_ct_lock(b->lock, DPFLOW_CT_NAT_SPINS))
				continue;
		}
		if (!dpflow_ct_find_hit(ct, &b->rk, &b->rl, now_ms, true, true,
					&hit)) {
			b->alias = dpflow_ct_claim(ct, &b->rl, now_ms, false,
						   est, &b->wa, &drop);
			if (b->alias != DPFLOW_TABLE_MISS) {
				if (pool)
					dpflow_atomic_add64(&pool->bound, 1);
				return true;
			}
		}
		if (b->lock)
			dpflow_atomic_store32_rel(b->lock, 0);
	}
fail:
	if (pool)
		dpflow_atomic_add64(&pool->exhausted, 1);
	dpflow_ct_stat_add(ct, DPFLOW_CT_STAT_NAT_EXHAUSTED);
	return false;
}

/*
 * Create the connection of @k (hash @h; the caller holds b1's lock and
 * found no live one) with user word @user and value block @init (NULL:
 * none). Fills @r and, when not NULL, @val; when refused, r->conn stays
 * MISS and r->drop says why.
 */
DPF_HD static inline void
dpflow_ct_open_conn(struct dpflow_ct_image *ct, const struct dpflow_ct_key *k,
		    uint64_t h, const struct dpflow_ct_loc *l, bool from_lo,
		    unsigned open_state, uint64_t now_ns, uint32_t now_ms,
		    uint32_t user, const struct dpflow_ct_value *init,
		    struct dpflow_ct_result *r, struct dpflow_ct_value *val)
{
	struct dpflow_ct_slot *slot;
	struct dpflow_ct_value v;
	struct dpflow_ct_bind b;
	uint64_t w = 0, nw, vw[8];
	bool est = open_state == DPFLOW_CT_ESTABLISHED;
	unsigned drop = DPFLOW_CT_DROP_NONE, j;
	uint32_t i;

	b.alias = DPFLOW_TABLE_MISS;
	b.lock = NULL;
	if (init && (init->flags & DPFLOW_CT_VAL_NO_OPEN)) {
		r->drop = DPFLOW_CT_DROP_NO_TARGET;
		return;
	}
	if (init) {
		uint8_t proto = (uint8_t)(k->w[4] >> 32);

		v = *init;
		dpflow_ct_value_norm(&v, (uint8_t)(k->w[4] >> 40),
				     proto == 6 || proto == 17 || proto == 132);
		if ((v.flags & (DPFLOW_CT_VAL_SNAT | DPFLOW_CT_VAL_DNAT)) &&
		    !dpflow_ct_nat_bind(ct, k, h, l, from_lo, est, now_ms, &v,
					&b)) {
			r->drop = DPFLOW_CT_DROP_NAT;
			return;
		}
	}
	i = dpflow_ct_claim(ct, l, now_ms, true, est, &w, &drop);
	if (i == DPFLOW_TABLE_MISS) {
		if (b.alias != DPFLOW_TABLE_MISS) {
			/* nobody saw it: back to FREE as it was */
			dpflow_ct_ctrl_store(ct, b.alias,
					     b.wa & DPFLOW_CT_W_GEN);
			if (v.flags & DPFLOW_CT_VAL_POOL)
				dpflow_atomic_add64(
				    &dpflow_ct_pools(ct)[v.pool].bound,
				    (uint64_t)-1);
		}
		if (b.lock)
			dpflow_atomic_store32_rel(b.lock, 0);
		r->drop = (uint8_t)drop;
		dpflow_ct_stat_add(ct, DPFLOW_CT_STAT_REFUSED);
		return;
	}
	/* BUSY is visible before any byte of the new keys (seqlock order) */
	dpflow_atomic_fence_rel();
	if (b.alias != DPFLOW_TABLE_MISS) {
		slot = &dpflow_ct_slots(ct)[b.alias];
		dpflow_ct_key_store(slot, &b.rk);
		dpflow_atomic_store32(&slot->user, 0);
		dpflow_atomic_store32(&slot->twin, i);
		dpflow_atomic_store64(&slot->created_ns, now_ns);
	}
	slot = &dpflow_ct_slots(ct)[i];
	dpflow_ct_key_store(slot, k);
	dpflow_atomic_store32(&slot->user, user);
	dpflow_atomic_store32(&slot->twin, b.alias);
	dpflow_atomic_store64(&slot->created_ns, now_ns);
	dpflow_atomic_store64(&slot->has_val, init != NULL);
	if (init) {
		struct dpflow_ct_vslot *dst = &dpflow_ct_vals(ct)[i];

		memcpy(vw, &v, sizeof(vw));
		for (j = 0; j < 8; j++)
			dpflow_atomic_store64(&dst->w[j], vw[j]);
	}
	nw = (w & DPFLOW_CT_W_GEN) | DPFLOW_CT_W_READY | l->sig |
	     (uint64_t)open_state << DPFLOW_CT_W_STATE_SHIFT |
	     (from_lo ? DPFLOW_CT_W_ORIG_LO : 0) |
	     (uint64_t)now_ms << DPFLOW_CT_W_TIME_SHIFT;
	dpflow_ct_ctrl_store(ct, i, nw);
	if (b.alias != DPFLOW_TABLE_MISS) {
		uint64_t wa = b.wa;

		/* fails only when the connection was already freed, its
		 * alias with it */
		dpflow_ct_ctrl_cas(ct, b.alias, &wa,
				   (b.wa & DPFLOW_CT_W_GEN) |
				       DPFLOW_CT_W_READY | DPFLOW_CT_W_ALIAS |
				       b.rl.sig |
				       (b.r_lo ? DPFLOW_CT_W_ORIG_LO : 0));
	}
	if (b.lock)
		dpflow_atomic_store32_rel(b.lock, 0);
	dpflow_ct_stat_add(ct, DPFLOW_CT_STAT_CREATED);
	r->conn = i;
	r->user = user;
	r->state = (uint8_t)open_state;
	r->dir = DPFLOW_CT_DIR_ORIG;
	r->flags = DPFLOW_CT_R_NEW;
	if (val && init) {
		*val = v;
	} else if (val) {
		memset(val, 0, sizeof(*val));
		val->pool = DPFLOW_CT_POOL_NONE;
	}
}

/*
 * Track one packet whose canonical key @k (hash @h, source is the lo end
 * when @from_lo) was computed by the caller: find its connection (by its
 * key or its reply key) and apply the state machine, or open a new
 * connection with user word @user_new and value block @init (NULL: an
 * empty block) when the packet may open one. @now_ns is the caller's
 * clock (the same clock for every thread). Fills @r and, when @val is not
 * NULL, copies the connection's value block there (zeros when the packet
 * got no connection). Any thread, lock-free except while creating a
 * connection (see the header).
 */
DPF_HD static inline void dpflow_ct_track_key_impl(
    struct dpflow_ct_image *ct, const struct dpflow_ct_key *k, uint64_t h,
    bool from_lo, uint8_t proto, uint8_t tcp_flags, uint64_t now_ns,
    uint32_t user_new, const struct dpflow_ct_value *init,
    struct dpflow_ct_result *r, struct dpflow_ct_value *val)
{
	uint32_t now_ms = (uint32_t)(now_ns / 1000000u);
	unsigned cls = proto == 6 ? dpflow_ct_tcp_class(tcp_flags)
				  : (unsigned)DPFLOW_CT_C_OTHER;
	uint32_t *lock = NULL;
	struct dpflow_ct_loc l;
	unsigned tries, open_state = DPFLOW_CT_NONE;

	dpflow_ct_locate(ct, h, &l);
	r->conn = DPFLOW_TABLE_MISS;
	r->user = 0;
	r->state = DPFLOW_CT_NONE;
	r->dir = DPFLOW_CT_DIR_ORIG;
	r->flags = 0;
	r->drop = DPFLOW_CT_DROP_NONE;
	for (tries = 0; tries < DPFLOW_CT_RETRIES; tries++) {
		struct dpflow_ct_hit hit;

		if (dpflow_ct_find_hit(ct, k, &l, now_ms, true, true, &hit)) {
			if (val)
				dpflow_ct_value_load(ct, hit.conn, val);
			/* its success validates the copy */
			if (dpflow_ct_update(ct, hit.conn, hit.w,
					     dpflow_ct_hit_lo(&hit, from_lo),
					     cls, now_ms, r))
				break;
			continue;
		}
		if (!lock) {
			open_state = dpflow_ct_open_state(ct, cls, proto);
			if (open_state == DPFLOW_CT_NONE) {
				r->flags = DPFLOW_CT_R_INVALID;
				r->drop = DPFLOW_CT_DROP_INVALID;
				dpflow_ct_stat_add(ct, DPFLOW_CT_STAT_INVALID);
				break;
			}
			lock = &dpflow_ct_locks(ct)[l.b1];
			if (!dpflow_ct_lock(lock, ct->busy_spins)) {
				lock = NULL;
				break;
			}
			continue; /* look again, holding the lock */
		}
		dpflow_ct_open_conn(ct, k, h, &l, from_lo, open_state, now_ns,
				    now_ms, user_new, init, r, val);
		break;
	}
	if (lock)
		dpflow_atomic_store32_rel(lock, 0);
	if (tries == DPFLOW_CT_RETRIES ||
	    (r->conn == DPFLOW_TABLE_MISS && r->drop == DPFLOW_CT_DROP_NONE)) {
		r->conn = DPFLOW_TABLE_MISS;
		r->drop = DPFLOW_CT_DROP_BUSY;
		dpflow_ct_stat_add(ct, DPFLOW_CT_STAT_DROP_BUSY);
	}
	if (val && r->conn == DPFLOW_TABLE_MISS)
		memset(val, 0, sizeof(*val));
}

/* dpflow_ct_track_key_impl without a value block (the CT pipes' call). */
DPF_HD static inline void dpflow_ct_process_key_impl(
    struct dpflow_ct_image *ct, const struct dpflow_ct_key *k, uint64_t h,
    bool from_lo, uint8_t proto, uint8_t tcp_flags, uint64_t now_ns,
    uint32_t user_new, struct dpflow_ct_result *r)
{
	dpflow_ct_track_key_impl(ct, k, h, from_lo, proto, tcp_flags, now_ns,
				 user_new, NULL, r, NULL);
}

/* dpflow_ct_track_key_impl from the packet tuple. */
DPF_HD static inline void
dpflow_ct_track_impl(struct dpflow_ct_image *ct, const struct dpflow_ct_pkt *p,
		     uint64_t now_ns, uint32_t user_new,
		     const struct dpflow_ct_value *init,
		     struct dpflow_ct_result *r, struct dpflow_ct_value *val)
{
	struct dpflow_ct_key k;
	bool from_lo = dpflow_ct_key_make(p, &k);

	dpflow_ct_track_key_impl(ct, &k, dpflow_ct_hash(&k, ct->seed), from_lo,
				 p->proto, p->tcp_flags, now_ns, user_new, init,
				 r, val);
}

/* dpflow_ct_process_key_impl from the packet tuple. */
DPF_HD static inline void dpflow_ct_process_impl(struct dpflow_ct_image *ct,
						 const struct dpflow_ct_pkt *p,
						 uint64_t now_ns,
						 uint32_t user_new,
						 struct dpflow_ct_result *r)
{
	dpflow_ct_track_impl(ct, p, now_ns, user_new, NULL, r, NULL);
}

/*
 * Find @p's connection (by its key or its reply key) without changing
 * anything (no state transition, no creation; an expired connection is
 * not found). Fills @r: conn (or MISS), user, current state, the packet's
 * direction; and @val (may be NULL) with the connection's value block
 * (zeros on a miss). Any thread.
 */
DPF_HD static inline void dpflow_ct_lookup_val_impl(
    struct dpflow_ct_image *ct, const struct dpflow_ct_pkt *p, uint64_t now_ns,
    struct dpflow_ct_result *r, struct dpflow_ct_value *val)
{
	struct dpflow_ct_key k;
	struct dpflow_ct_loc l;
	struct dpflow_ct_hit hit;
	bool from_lo = dpflow_ct_key_make(p, &k);
	uint32_t now_ms = (uint32_t)(now_ns / 1000000u), i = 0;
	unsigned tries;

	dpflow_ct_locate(ct, dpflow_ct_hash(&k, ct->seed), &l);
	r->flags = 0;
	r->drop = DPFLOW_CT_DROP_NONE;
	for (tries = 0; tries < DPFLOW_CT_RETRIES; tries++) {
		if (!dpflow_ct_find_hit(ct, &k, &l, now_ms, false, true,
					&hit)) {
			i = DPFLOW_TABLE_MISS;
			break;
		}
		i = hit.conn;
		r->user = dpflow_atomic_load32(&dpflow_ct_slots(ct)[i].user);
		if (val)
			dpflow_ct_value_load(ct, i, val);
		dpflow_atomic_fence_acq();
		/* user word and value belong to the connection we found */
		if ((dpflow_atomic_load64(&dpflow_ct_ctrl(ct)[i]) &
		     DPFLOW_CT_W_IDENT) == (hit.w & DPFLOW_CT_W_IDENT))
			break;
		i = DPFLOW_TABLE_MISS;
	}
	r->conn = i;
	if (i == DPFLOW_TABLE_MISS) {
		r->user = 0;
		r->state = DPFLOW_CT_NONE;
		r->dir = DPFLOW_CT_DIR_ORIG;
		if (val)
			memset(val, 0, sizeof(*val));
		return;
	}
	r->state = (uint8_t)dpflow_ct_w_state(hit.w);
	r->dir =
	    hit.orig_lo == from_lo ? DPFLOW_CT_DIR_ORIG : DPFLOW_CT_DIR_REPLY;
}

/*
 * The tuple the initiator of connection @conn sent (before any
 * translation: the connection's own key) into @p. The key is read
 * between two loads of the control word, so it belongs to one live
 * connection. False when @conn holds no live connection (it went
 * meanwhile) or is a reply key's alias. Any thread.
 */
DPF_HD static inline bool dpflow_ct_orig_impl(struct dpflow_ct_image *ct,
					      uint32_t conn,
					      struct dpflow_ct_pkt *p)
{
	uint64_t *cw = &dpflow_ct_ctrl(ct)[conn];
	struct dpflow_ct_slot *slot = &dpflow_ct_slots(ct)[conn];
	struct dpflow_ct_key k;
	uint64_t w = dpflow_atomic_load64_acq(cw);
	unsigned j;

	if ((w & DPFLOW_CT_W_STATUS) != DPFLOW_CT_W_READY ||
	    (w & DPFLOW_CT_W_ALIAS))
		return false;
	for (j = 0; j < 5; j++)
		k.w[j] = dpflow_atomic_load64(&slot->key[j]);
	dpflow_atomic_fence_acq();
	if ((dpflow_atomic_load64(cw) & DPFLOW_CT_W_IDENT) !=
	    (w & DPFLOW_CT_W_IDENT))
		return false;
	dpflow_ct_key_tuple(&k, (w & DPFLOW_CT_W_ORIG_LO) != 0, p);
	return true;
}

/* dpflow_ct_reply_targets_impl(): the translation could not be read
 * (in dpflow_ct_value.reserved0 of the copy). */
#define DPFLOW_CT_VAL_LOST 0x80

/*
 * Right after the tracker said @r with the connection's value copy @v:
 * for a reply of a translated connection, put what the reply is
 * rewritten to in @v (nat_src, nat_sport: its new destination, the
 * initiator's source; nat_dst, nat_dport: its new source, the
 * initiator's destination), read from the connection's key now, before
 * a later packet may free the connection. When it already went (another
 * thread freed it), @v is marked DPFLOW_CT_VAL_LOST.
 */
DPF_HD static inline void
dpflow_ct_reply_targets_impl(struct dpflow_ct_image *ct,
			     const struct dpflow_ct_result *r,
			     struct dpflow_ct_value *v)
{
	struct dpflow_ct_pkt orig;

	if (r->conn == DPFLOW_TABLE_MISS || r->dir != DPFLOW_CT_DIR_REPLY ||
	    !(v->flags & (DPFLOW_CT_VAL_SNAT | DPFLOW_CT_VAL_DNAT)))
		return;
	if (!dpflow_ct_orig_impl(ct, r->conn, &orig)) {
		v->reserved0 = DPFLOW_CT_VAL_LOST;
		return;
	}
	memcpy(v->nat_src, orig.src, 16);
	v->nat_sport = orig.sport;
	memcpy(v->nat_dst, orig.dst, 16);
	v->nat_dport = orig.dport;
}

/* dpflow_ct_lookup_val_impl without the value block. */
DPF_HD static inline void dpflow_ct_lookup_impl(struct dpflow_ct_image *ct,
						const struct dpflow_ct_pkt *p,
						uint64_t now_ns,
						struct dpflow_ct_result *r)
{
	dpflow_ct_lookup_val_impl(ct, p, now_ns, r, NULL);
}

#endif /* DPFLOW_CT_IMPL_H */
