/*
 * Connection tracking table (CT pipes): control API. The layout, the state
 * machines and the data-path code are in ct_impl.h.
 *
 * A fixed-capacity table of bidirectional connections keyed by 5-tuple
 * (IPv4 and IPv6; both directions find the same connection), with the TCP
 * state machine of a simplified Linux nf_conntrack (no window tracking),
 * UNREPLIED / REPLIED states for UDP, ICMP and other protocols, per-state
 * timeouts, a 32-bit user word and a 64-byte value block per connection
 * (NAT binding, backend, registers: set by the packet that creates the
 * connection, read by every later packet of both directions), NAT
 * bindings keyed a second time by their reply key and chosen from port
 * pools so that the reply key is unique, replacement of the least
 * recently used connection under pressure that never lets a half-open
 * connection push out an established one, last-seen times and an aging
 * scan. Data threads create connections themselves (lookup-or-create),
 * concurrently, without allocating: memory is fixed at init.
 *
 * The image is position-independent (offsets only): it may be copied byte
 * for byte (dpflow_ct_image_copy) to other memory, device memory included,
 * and the copy tracks the same connections, with its own port pools.
 * Copy it while no data thread writes it, or the copy may hold a
 * half-made connection.
 *
 * Threads:
 *  - data path: dpflow_ct_process, _process_burst, _track, _track_burst,
 *    _lookup, _lookup_val and the _impl functions, from any number of
 *    threads at once (two workers may see the two directions of one
 *    connection: see ct_impl.h, "Two workers");
 *  - control thread (one at a time): create/destroy, set_timeout, age,
 *    remove, flush, get, set_user, count, stats, pool_stats, while data
 *    threads run.
 *
 * Guarantees: at most one live connection per key (its own key or its
 * reply key) whatever the threads race; a connection's value block is
 * never seen half written or without the connection; a connection is
 * expired only when its state's timeout has passed since its last valid
 * packet, and each expiry is reported once (by dpflow_ct_age) unless the
 * connection was freed to make room or removed. Control calls validate
 * before writing: on error (-EINVAL, -ENOENT naming the field) the image
 * is unchanged.
 *
 * What a CT pipe does per packet (the pipe walk's calls):
 *  1. dpflow_ct_pkt_from_hdr(outer or inner headers) -> struct
 *     dpflow_ct_pkt (false: not trackable, the miss path);
 *  2. for a packet that may create a connection, an init block: the
 *     value a new connection gets (registers, backend from earlier pipes;
 *     SNAT with DPFLOW_CT_VAL_POOL and a pool index to have the tracker
 *     choose the translated source; DNAT with the translated
 *     destination), or NULL. It is read only when the packet creates;
 *  3. dpflow_ct_track_impl (DPF_HD, both targets) or dpflow_ct_track /
 *     _track_burst (CPU) with the packet, the clock, the user word, the
 *     init block, and a struct dpflow_ct_value to receive the
 *     connection's value (the walk's per-packet scratch; NULL when no
 *     later action reads it): lookup-only pipes call
 *     dpflow_ct_lookup_val_impl instead;
 *  4. result: conn MISS -> drop reason in res.drop (the miss path);
 *     else res.state, res.dir (REPLY for a translated reply), res.flags
 *     (NEW, INVALID, ...), and the value copy, from which `from: ct`
 *     actions take their NAT addresses and ports: an ORIG packet is
 *     rewritten to (nat_src, nat_sport) -> (nat_dst, nat_dport) for the
 *     parts set, a REPLY packet the other way (source := the original
 *     destination, destination := the original source: the original tuple
 *     is the flow's own, so the walk keeps it from the ORIG packet's
 *     headers, or reads it with dpflow_ct_get on the control path).
 */
#ifndef DPFLOW_CT_H
#define DPFLOW_CT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dpflow/error.h"
#include "flow/ct_impl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest max_conns accepted. */
#define DPFLOW_CT_CAPACITY_MAX (1u << 26)
/* Largest timeout (ms): elapsed times are compared modulo 2^32 ms. */
#define DPFLOW_CT_TIMEOUT_MAX 0x7fffffffu
/* Lock attempts before creating a connection gives up (busy drop). */
#define DPFLOW_CT_BUSY_SPINS_DEFAULT (1u << 16)

/*
 * A port pool: NAT bindings that ask for pool i (DPFLOW_CT_VAL_POOL,
 * dpflow_ct_value.pool = i) take their translated source from here.
 */
struct dpflow_ct_pool_cfg {
	uint8_t family;	 /* 4 or 6: the connections it may bind */
	uint8_t n_addrs; /* 1..DPFLOW_CT_POOL_ADDRS_MAX */
	/* network order; IPv4: the first 4 bytes */
	uint8_t addr[DPFLOW_CT_POOL_ADDRS_MAX][16];
	uint16_t port_lo, port_hi; /* 1 <= port_lo <= port_hi */
	/* candidates a binding tries (0: DPFLOW_CT_NAT_TRIES_DEFAULT); at
	 * most the pool's n_addrs x ports */
	uint16_t tries;
};

struct dpflow_ct_params {
	uint32_t max_conns;  /* 1..DPFLOW_CT_CAPACITY_MAX live connections */
	uint32_t flags;	     /* DPFLOW_CT_F_* */
	uint64_t seed;	     /* hash seed */
	uint32_t busy_spins; /* 0: DPFLOW_CT_BUSY_SPINS_DEFAULT */
	/* per-state timeouts in ms (0: never), indexed by enum
	 * dpflow_ct_state; [DPFLOW_CT_NONE] is ignored */
	uint32_t timeout_ms[DPFLOW_CT_STATE_COUNT];
	uint32_t n_pools; /* 0..DPFLOW_CT_POOLS_MAX */
	struct dpflow_ct_pool_cfg pools[DPFLOW_CT_POOLS_MAX];
};

/* A connection as the control thread sees it. */
struct dpflow_ct_info {
	uint32_t conn; /* index */
	uint32_t user; /* user value */
	uint8_t state; /* enum dpflow_ct_state */
	bool replied;  /* a valid packet came from the reply side */
	bool dead;     /* expired on the data path, not yet scanned */
	/* the tuple as the initiator sent it (tcp_flags 0) */
	struct dpflow_ct_pkt orig;
	/* the tuple replies carry (tcp_flags 0): orig reversed, or with a
	 * NAT binding the translated tuple reversed */
	struct dpflow_ct_pkt reply;
	/* the slot of the reply key (a NAT binding's), or
	 * DPFLOW_TABLE_MISS */
	uint32_t reply_slot;
	struct dpflow_ct_value value; /* the value block */
	/* start of the millisecond of the last valid packet, on the data
	 * path's clock */
	uint64_t last_seen_ns;
	uint64_t created_ns; /* time of the packet that created it */
};

struct dpflow_ct_stats {
	uint64_t live; /* live connections (READY or DEAD) */
	uint64_t stat[DPFLOW_CT_STAT__COUNT]; /* enum dpflow_ct_stat */
};

/* A port pool's counters. */
struct dpflow_ct_pool_stats {
	uint64_t bound;	    /* live bindings from the pool */
	uint64_t exhausted; /* bindings it could not give */
	uint32_t size;	    /* addresses x ports */
};

/*
 * Called for each connection that the aging scan expires (or flush
 * removes), after its slot was freed.
 */
typedef void (*dpflow_ct_cb)(const struct dpflow_ct_info *info, void *arg);

/*
 * Fill @p for @max_conns connections: flags TCP_LOOSE, seed 0, default
 * spins, Linux's default timeouts (SYN_SENT 120 s, SYN_RECV 60 s,
 * ESTABLISHED 5 days, FIN_WAIT 120 s, CLOSE_WAIT 60 s, LAST_ACK 30 s,
 * TIME_WAIT 120 s, CLOSE 10 s; UDP 30 s unreplied, 120 s replied; ICMP
 * 30 s; other protocols 600 s), no pools.
 */
void dpflow_ct_params_default(struct dpflow_ct_params *p, uint32_t max_conns);

/*
 * Bytes of an image for @max_conns without pools or DPFLOW_CT_F_NAT
 * (slots: buckets of 8, a power of two of them, at least 3/2 * max_conns;
 * 136 bytes a slot: control word, slot line, value block), or 0 if out
 * of range.
 */
size_t dpflow_ct_image_size(uint32_t max_conns);

/*
 * Bytes of an image for @p: with DPFLOW_CT_F_NAT the slots are at least
 * 3 * max_conns (two keys a connection), and each pool takes 192 bytes.
 * 0 if max_conns or n_pools is out of range.
 */
size_t dpflow_ct_image_size_params(const struct dpflow_ct_params *p);

/*
 * Make an empty image in caller memory @mem (64-byte aligned, @size >=
 * dpflow_ct_image_size_params(p)). Returns 0 or -EINVAL naming "params",
 * "max_conns", "flags", "timeout_ms", "n_pools", "pools" (the message
 * names the pool and its field), "mem" or "size".
 */
int dpflow_ct_image_init(void *mem, size_t size,
			 const struct dpflow_ct_params *p,
			 struct dpflow_error *err);

/*
 * Allocate and init (NULL + @err on -EINVAL or -ENOMEM). Images of 2 MiB
 * or more are 2 MiB aligned and advised for transparent huge pages.
 */
struct dpflow_ct_image *dpflow_ct_create(const struct dpflow_ct_params *p,
					 struct dpflow_error *err);
/* Free an image from dpflow_ct_create. Accepts NULL. */
void dpflow_ct_destroy(struct dpflow_ct_image *ct);

/* Bytes in @ct (what a copy must move). */
size_t dpflow_ct_image_bytes(const struct dpflow_ct_image *ct);

/* memcpy @src to @dst (64-byte aligned, @dst_size bytes): 0 or -EINVAL. */
int dpflow_ct_image_copy(void *dst, size_t dst_size,
			 const struct dpflow_ct_image *src,
			 struct dpflow_error *err);

/* Slots in @ct: connection indices are below this. */
uint32_t dpflow_ct_n_slots(const struct dpflow_ct_image *ct);

/*
 * Set the timeout of @state to @ms (0: never). Takes effect for every
 * connection in that state, at its next check. Returns 0 or -EINVAL
 * ("state", "timeout_ms").
 */
int dpflow_ct_set_timeout(struct dpflow_ct_image *ct, unsigned state,
			  uint32_t ms, struct dpflow_error *err);

/* ---- data path ----------------------------------------------------------- */

/* Out-of-line dpflow_ct_process_impl. */
void dpflow_ct_process(struct dpflow_ct_image *ct,
		       const struct dpflow_ct_pkt *pkt, uint64_t now_ns,
		       uint32_t user_new, struct dpflow_ct_result *res);

/*
 * Track @n packets at @now_ns: keys and hashes first, candidate buckets
 * prefetched, then each packet in order as dpflow_ct_process with user
 * value @user_new[i] (NULL: 0) for connections it creates. Returns @n.
 */
uint16_t dpflow_ct_process_burst(struct dpflow_ct_image *ct,
				 const struct dpflow_ct_pkt *pkts, uint16_t n,
				 uint64_t now_ns, const uint32_t *user_new,
				 struct dpflow_ct_result *res);

/* Out-of-line dpflow_ct_lookup_impl (read-only). */
void dpflow_ct_lookup(struct dpflow_ct_image *ct,
		      const struct dpflow_ct_pkt *pkt, uint64_t now_ns,
		      struct dpflow_ct_result *res);

/*
 * Out-of-line dpflow_ct_track_impl: track @pkt as dpflow_ct_process, a
 * connection it creates getting user word @user_new and value block
 * @init (NULL: empty; a NAT binding asked there is chosen now, and the
 * packet is refused with DPFLOW_CT_DROP_NAT when none is free). When
 * @val is not NULL it receives the connection's value block (zeros when
 * the packet got no connection).
 */
void dpflow_ct_track(struct dpflow_ct_image *ct,
		     const struct dpflow_ct_pkt *pkt, uint64_t now_ns,
		     uint32_t user_new, const struct dpflow_ct_value *init,
		     struct dpflow_ct_result *res, struct dpflow_ct_value *val);

/*
 * dpflow_ct_process_burst with value blocks: @init[i] (@init NULL, or an
 * element NULL: none) for connections packet i creates, @vals[i] (@vals
 * NULL: not copied) receives packet i's connection's value. Returns @n.
 */
uint16_t dpflow_ct_track_burst(struct dpflow_ct_image *ct,
			       const struct dpflow_ct_pkt *pkts, uint16_t n,
			       uint64_t now_ns, const uint32_t *user_new,
			       const struct dpflow_ct_value *const *init,
			       struct dpflow_ct_result *res,
			       struct dpflow_ct_value *vals);

/*
 * dpflow_ct_track_burst (@vals required) where each reply of a translated
 * connection gets its rewrite targets in its copy at once
 * (dpflow_ct_reply_targets_impl: before a later packet of the burst may
 * free the connection). The CT pipes' call.
 */
uint16_t dpflow_ct_track_burst_replies(
    struct dpflow_ct_image *ct, const struct dpflow_ct_pkt *pkts, uint16_t n,
    uint64_t now_ns, const uint32_t *user_new,
    const struct dpflow_ct_value *const *init, struct dpflow_ct_result *res,
    struct dpflow_ct_value *vals);

/* Out-of-line dpflow_ct_lookup_val_impl (read-only; @val may be NULL). */
void dpflow_ct_lookup_val(struct dpflow_ct_image *ct,
			  const struct dpflow_ct_pkt *pkt, uint64_t now_ns,
			  struct dpflow_ct_result *res,
			  struct dpflow_ct_value *val);

/* ---- control thread ------------------------------------------------------ */

/*
 * Expire connections at @now_ns: each READY connection idle for at least
 * its state's timeout, and each one the data path marked DEAD, is freed,
 * counted (EXPIRED) and reported to @cb (may be NULL). With @cursor NULL
 * the whole table is scanned; otherwise @budget slots from *@cursor
 * (wrapping), and *@cursor moves past them. Returns the number expired.
 */
uint32_t dpflow_ct_age(struct dpflow_ct_image *ct, uint64_t now_ns,
		       uint32_t *cursor, uint32_t budget, dpflow_ct_cb cb,
		       void *arg);

/*
 * Remove connection @conn (live or DEAD) with its reply key. Returns 0,
 * -EINVAL ("conn" out of range) or -ENOENT ("conn": no connection there,
 * or only a connection's reply key).
 */
int dpflow_ct_remove(struct dpflow_ct_image *ct, uint32_t conn,
		     struct dpflow_error *err);

/*
 * Remove every connection, reporting each to @cb (may be NULL; last-seen
 * times relative to @now_ns). Returns how many.
 */
uint32_t dpflow_ct_flush(struct dpflow_ct_image *ct, uint64_t now_ns,
			 dpflow_ct_cb cb, void *arg);

/*
 * Describe connection @conn (tuples, state, value block...), with
 * last_seen_ns reconstructed from @now_ns (the data path's clock).
 * Returns 0, -EINVAL or -ENOENT ("conn"; a reply key's slot is not a
 * connection).
 */
int dpflow_ct_get(struct dpflow_ct_image *ct, uint32_t conn, uint64_t now_ns,
		  struct dpflow_ct_info *info, struct dpflow_error *err);

/*
 * Set the user value of live connection @conn (an atomic store: data
 * threads see the old or the new value). If the connection expires at the
 * same moment, the value may land on its successor in the slot. Returns 0,
 * -EINVAL or -ENOENT ("conn").
 */
int dpflow_ct_set_user(struct dpflow_ct_image *ct, uint32_t conn, uint32_t user,
		       struct dpflow_error *err);

/* Connections READY now (a scan of the control words; reply keys are
 * not connections). */
uint32_t dpflow_ct_count(struct dpflow_ct_image *ct);

/* Statistics and the live count. */
void dpflow_ct_stats_get(struct dpflow_ct_image *ct, struct dpflow_ct_stats *s);

/*
 * Counters of port pool @pool. Returns 0 or -EINVAL ("pool" out of
 * range).
 */
int dpflow_ct_pool_stats_get(struct dpflow_ct_image *ct, unsigned pool,
			     struct dpflow_ct_pool_stats *s,
			     struct dpflow_error *err);

/* "established", "udp_unreplied"...; "unknown" when out of range. */
const char *dpflow_ct_state_name(unsigned state);
/* Name of an enum dpflow_ct_stat ("created"...); "unknown" if out of range. */
const char *dpflow_ct_stat_name(unsigned stat);

#ifdef __cplusplus
}
#endif

#endif /* DPFLOW_CT_H */
