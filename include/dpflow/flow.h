/*
 * The flow engine: DOCA-Flow-shaped pipes of match-action tables.
 *
 * A context owns a packet pool, ports and pipes. A pipe matches fields of a
 * packet (a match template: which fields, per-entry or constant, with
 * masks), looks the key up in its table (BASIC: exact; CONTROL and ACL:
 * masked and ranges with priorities; LPM: longest prefix), applies the
 * matching entry's actions, counts, and forwards: to a port, to another
 * pipe, to drop, or wherever the entry says. A miss takes the pipe's miss
 * forwarding. Each port has one root pipe; the pipe graph is checked for
 * loops when a pipe is created.
 *
 * Entries are queued on a dpflow_queue (one per control thread) and applied
 * by dpflow_entries_process() as one batch: all of it or none of it, with a
 * status callback per entry. Tables are double-buffered and published with
 * RCU (liburcu QSBR): a burst in flight sees a pipe's table entirely before
 * or entirely after a batch.
 *
 * Threads: pipes and queues are created and used by control threads; data
 * threads call dpflow_ctx_process_burst() between dpflow_ctx_quiescent()
 * reports (dpflow_ctx_run() does both).
 */
#ifndef DPFLOW_FLOW_H
#define DPFLOW_FLOW_H

#include <stdbool.h>
#include <stdint.h>

#include "dpflow/error.h"
#include "dpflow/field.h"
#include "dpflow/maglev.h"
#include "dpflow/pool.h"
#include "dpflow/port.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DPFLOW_NAME_MAX		32
#define DPFLOW_MATCH_FIELDS_MAX 12
#define DPFLOW_ACTIONS_MAX	8
#define DPFLOW_ACTION_TMPLS_MAX 8
#define DPFLOW_PORTS_MAX	16
#define DPFLOW_PIPES_MAX	64
#define DPFLOW_HANDLERS_MAX	16
#define DPFLOW_RSS_QUEUES_MAX	64

struct dpflow_ctx;
struct dpflow_pipe;
struct dpflow_queue;
struct dpflow_entry;

/* ---- context and ports ------------------------------------------------- */

struct dpflow_ctx_params {
	uint32_t pool_slots;	  /* 0: 8192 */
	uint16_t data_room;	  /* 0: the pool default (2048) */
	uint16_t rss_queues;	  /* software receive queues for RSS: 0..64 */
	uint32_t rss_queue_size;  /* packets per queue, power of 2; 0: 4096 */
	uint32_t shared_counters; /* shared counters, ids 1..N */
	uint32_t shared_meters;	  /* shared meters, ids 1..N */
	/* check only: ports are placeholders that open nothing
	 * (dpflow_port_open_check), for `dpflow validate` */
	bool check_only;
};

struct dpflow_ctx *dpflow_ctx_create(const struct dpflow_ctx_params *p,
				     struct dpflow_error *err);
/* Close ports, destroy pipes and entries, free the pool. NULL ok. */
void dpflow_ctx_destroy(struct dpflow_ctx *ctx);
/*
 * Discard the outputs of every port (dpflow_port_discard): for an owner
 * whose run failed or never started; dpflow_ctx_destroy() then leaves
 * every existing file as it was. NULL ok.
 */
void dpflow_ctx_discard(struct dpflow_ctx *ctx);
struct dpflow_pool *dpflow_ctx_pool(struct dpflow_ctx *ctx);

/*
 * Open a port (port.h URI) under @name. Returns its id (>= 0) or -errno.
 * A port that would write a file another port reads or writes, or read
 * one another writes (paths resolved: dpflow_port_path), is refused
 * (field "uri", both ports named).
 */
int dpflow_ctx_port_add(struct dpflow_ctx *ctx, const char *name,
			const char *uri, struct dpflow_error *err);
int dpflow_ctx_port_find(const struct dpflow_ctx *ctx, const char *name);
struct dpflow_port *dpflow_ctx_port(struct dpflow_ctx *ctx, unsigned id);
const char *dpflow_ctx_port_name(const struct dpflow_ctx *ctx, unsigned id);
unsigned dpflow_ctx_port_count(const struct dpflow_ctx *ctx);

/* ---- software handlers, RSS queues, shared monitors -----------------------
 */

/* A software handler: gets @n packets and owns them (frees or keeps them). */
typedef void (*dpflow_handler_fn)(void *arg, struct dpflow_pool *pool,
				  const uint32_t *idx, uint16_t n);

/*
 * Register handler @fn under @name, so that configs can forward to it by
 * name (`fwd: {handler: NAME}`). Returns 0, -EEXIST or -ENOSPC (at most
 * DPFLOW_HANDLERS_MAX).
 */
int dpflow_ctx_handler_register(struct dpflow_ctx *ctx, const char *name,
				dpflow_handler_fn fn, void *arg,
				struct dpflow_error *err);
/* Look a handler up by name: 0 and *@fn, *@arg set, or -ENOENT. */
int dpflow_ctx_handler_find(const struct dpflow_ctx *ctx, const char *name,
			    dpflow_handler_fn *fn, void **arg);

/*
 * Receive up to @max packets that RSS forwarding put on software queue
 * @queue (0..rss_queues-1). The caller owns them. Any thread, one reader
 * per queue. Returns how many.
 */
uint16_t dpflow_ctx_rss_rx(struct dpflow_ctx *ctx, uint16_t queue,
			   uint32_t *idx, uint16_t max);
/* Packets RSS forwarding has put on @queue since the start. */
uint64_t dpflow_ctx_rss_count(const struct dpflow_ctx *ctx, uint16_t queue);
unsigned dpflow_ctx_rss_queues(const struct dpflow_ctx *ctx);

/*
 * The symmetric Toeplitz hash RSS forwarding uses (the 40-byte key of
 * 0x6d5a repeated, so both directions of a flow hash alike) over the
 * source and destination addresses then ports, as in Microsoft's RSS
 * specification: IPv4 12 bytes, IPv6 36 bytes, ports only for TCP, UDP and
 * SCTP. @inner selects the inner headers of a tunnel.
 */
uint32_t dpflow_rss_hash(const struct dpflow_pool *pool, uint32_t idx,
			 bool inner);

enum dpflow_meter_alg_kind {
	DPFLOW_METER_ALG_NONE = 0, /* no meter: every packet green */
	DPFLOW_METER_ALG_SRTCM,	   /* RFC 2697: cir, cbs, ebs */
	DPFLOW_METER_ALG_TRTCM,	   /* RFC 2698: cir, pir, cbs, pbs */
};

/* Meter colours, also the values of the meta.color match field. */
enum dpflow_color {
	DPFLOW_COLOR_GREEN = 0,
	DPFLOW_COLOR_YELLOW = 1,
	DPFLOW_COLOR_RED = 2,
};

struct dpflow_meter_cfg {
	uint8_t alg;	  /* enum dpflow_meter_alg_kind */
	bool color_aware; /* else colour-blind (the packet's meta.color is
			     its colour so far) */
	uint64_t cir;	  /* committed rate, bytes per second */
	uint64_t pir;	  /* trTCM: peak rate, bytes/s, >= cir */
	uint32_t cbs;	  /* committed burst, bytes */
	uint32_t ebs;	  /* srTCM: excess burst, bytes */
	uint32_t pbs;	  /* trTCM: peak burst, bytes */
};

/* Configure shared meter @id (1..shared_meters), buckets full. */
int dpflow_shared_meter_config(struct dpflow_ctx *ctx, uint32_t id,
			       const struct dpflow_meter_cfg *cfg,
			       struct dpflow_error *err);

struct dpflow_counter {
	uint64_t pkts;
	uint64_t bytes;
};

/* Read shared counter @id (1..shared_counters): 0 or -EINVAL. */
int dpflow_shared_counter_read(const struct dpflow_ctx *ctx, uint32_t id,
			       struct dpflow_counter *c);
uint32_t dpflow_ctx_shared_counters(const struct dpflow_ctx *ctx);

/* ---- pipes -------------------------------------------------------------- */

enum dpflow_pipe_type {
	DPFLOW_PIPE_BASIC,   /* exact match (no per-entry fields: match-all,
				one entry with an empty key) */
	DPFLOW_PIPE_CONTROL, /* masked, priorities, small */
	DPFLOW_PIPE_ACL,     /* masked and ranges, priorities, large */
	DPFLOW_PIPE_LPM,     /* longest prefix on one address field */
	DPFLOW_PIPE_HASH,    /* entry = hash of fields modulo size */
	DPFLOW_PIPE_CT,	     /* connection tracking, no entries */
	DPFLOW_PIPE__COUNT,
};

const char *dpflow_pipe_type_name(unsigned type);

/* One field of a match template. */
struct dpflow_match_field {
	uint16_t field;	   /* enum dpflow_field */
	bool per_entry;	   /* the entry gives the value; else @value is fixed */
	uint8_t value[16]; /* constant value (big-endian, field bytes) */
	uint8_t mask[16];  /* template mask; all zero means all ones */
};

struct dpflow_match_tmpl {
	uint8_t n;
	struct dpflow_match_field f[DPFLOW_MATCH_FIELDS_MAX];
};

enum dpflow_action_kind {
	DPFLOW_ACT_SET_FIELD,  /* field = value */
	DPFLOW_ACT_ADD_FIELD,  /* field += value (modulo width) */
	DPFLOW_ACT_COPY_FIELD, /* field = src_field */
	DPFLOW_ACT_SET_MAC_SRC,
	DPFLOW_ACT_SET_MAC_DST,
	DPFLOW_ACT_DEC_TTL,
	DPFLOW_ACT_NAT_SRC_IP, /* with checksum updates */
	DPFLOW_ACT_NAT_DST_IP,
	DPFLOW_ACT_NAT_SRC_PORT,
	DPFLOW_ACT_NAT_DST_PORT,
	DPFLOW_ACT_VLAN_PUSH,
	DPFLOW_ACT_VLAN_POP,
	DPFLOW_ACT_ENCAP,
	DPFLOW_ACT_DECAP,
	DPFLOW_ACT_MIRROR, /* a copy to port @port */
	DPFLOW_ACT__COUNT,
};

const char *dpflow_action_name(unsigned kind);

/* Tunnel header template for DPFLOW_ACT_ENCAP. */
struct dpflow_encap {
	uint8_t tun_type; /* enum dpflow_tun_type */
	uint8_t ipv6;	  /* outer IPv6 */
	uint8_t src_mac[6], dst_mac[6];
	uint8_t src[16], dst[16]; /* outer addresses, network order */
	uint8_t ttl;
	uint32_t id; /* VNI / GRE key */
	uint8_t gre_key;
};

struct dpflow_action {
	uint8_t kind;	    /* enum dpflow_action_kind */
	bool per_entry;	    /* the entry supplies the value */
	uint16_t field;	    /* SET/ADD/COPY_FIELD target */
	uint16_t src_field; /* COPY_FIELD source */
	uint16_t port;	    /* MIRROR */
	uint8_t value[16];  /* big-endian field bytes / MAC / address / port */
	uint16_t tpid;	    /* VLAN_PUSH: 0x8100 or 0x88a8 */
	uint16_t tci;	    /* VLAN_PUSH */
	struct dpflow_encap encap;
};

struct dpflow_action_tmpl {
	uint8_t n;
	struct dpflow_action a[DPFLOW_ACTIONS_MAX];
};

enum dpflow_fwd_kind {
	DPFLOW_FWD_DROP = 0,
	DPFLOW_FWD_PORT,
	DPFLOW_FWD_PIPE,
	DPFLOW_FWD_RSS,
	DPFLOW_FWD_HANDLER,
	DPFLOW_FWD_PER_ENTRY, /* pipe forwarding only: each entry says */
};

struct dpflow_fwd {
	uint8_t kind; /* enum dpflow_fwd_kind */
	uint16_t port;
	struct dpflow_pipe *pipe;
	dpflow_handler_fn handler;
	void *handler_arg;
	/* RSS: software queues rss_queue .. rss_queue + rss_n - 1: queue
	 * rss_queue + (hash & 127) % rss_n, hash = dpflow_rss_hash() (a
	 * 128-entry redirection table filled round robin, as NICs do;
	 * meta.rss_hash and meta.queue are set) */
	uint16_t rss_queue;
	uint16_t rss_n;
	bool rss_inner; /* hash the inner headers of tunnelled packets */
};

/*
 * What a pipe measures on a hit. Entries may override the meter, the
 * shared counter and the aging timeout (struct dpflow_entry_cfg).
 */
struct dpflow_monitor {
	bool counter;		       /* per-entry packet and byte counters */
	uint32_t shared_counter;       /* also count into this shared counter
					  (1..shared_counters), 0: none */
	struct dpflow_meter_cfg meter; /* a meter per entry, from this
					  template unless the entry gives
					  its own */
	uint32_t shared_meter;	       /* meter with shared meter @id instead */
	uint32_t aging_ms; /* entries not hit for this long are reported by
			      dpflow_pipe_age(); 0: no aging */
};

/*
 * Colour-based forwarding: after a meter, yellow packets take @yellow
 * when @yellow_set (else the hit forwarding) and red packets @red when
 * @red_set (else they are dropped; either way a red drop counts as
 * FLOW_METER_RED). meta.color
 * carries the colour to later pipes either way.
 */
struct dpflow_color_fwd {
	bool yellow_set, red_set;
	struct dpflow_fwd yellow;
	struct dpflow_fwd red;
};

/* Addresses of a ct pipe's source NAT (per family: at most 8 of each). */
#define DPFLOW_CT_SNAT_ADDRS_MAX 16

/* Connection tracking pipes (type CT). */
struct dpflow_ct_cfg {
	bool inner;	  /* track the inner 5-tuple of tunnelled packets */
	bool lookup_only; /* never create connections */
	bool tcp_strict;  /* only a SYN opens a TCP connection (default:
			     a mid-stream packet opens it ESTABLISHED) */
	bool evict;	  /* when full, reuse expired connections */
	bool user;	  /* a new connection stores register @user_reg
			     and every tracked packet gets the
			     connection's value back in it */
	uint8_t user_reg; /* 0..3 */
	uint32_t timeout_ms[16]; /* per state (meta.ct_state values); 0:
				    the default (Linux's);
				    DPFLOW_CT_TIMEOUT_NEVER: never */
	/* when a connection finds no room, replace the least recently
	 * used one of its buckets, never an established one for a
	 * half-open one (not with @evict, which only reuses expired ones) */
	bool replace;
	/* bit i: meta.reg<i> is kept in the connection's value: set by the
	 * packet that opens it, given back to every tracked packet of both
	 * directions */
	uint8_t save_regs;
	/* source NAT: a new connection takes a source address and port from
	 * these addresses (IPv4 and/or IPv6; a connection of a family with
	 * no address is not translated) and ports, unique among the live
	 * connections; tracked packets of both directions are translated */
	struct dpflow_ct_snat_cfg {
		uint8_t n_addrs;			  /* 0: no source NAT */
		uint8_t family[DPFLOW_CT_SNAT_ADDRS_MAX]; /* 4 or 6 */
		uint8_t addr[DPFLOW_CT_SNAT_ADDRS_MAX][16]; /* IPv4: 4 bytes */
		uint16_t port_lo, port_hi; /* 1..65535; 0, 0: 1024..65535 */
		uint16_t tries; /* candidates a new connection tries (0: 32) */
	} snat;
	/* destination NAT: a new connection takes its translated destination
	 * (address, and port for TCP and UDP) from the entry of @dnat_pipe
	 * that the value of meta.reg<dnat_reg> hits: the values of that
	 * entry's nat_dst_ip and nat_dst_port actions. @dnat_pipe is a
	 * BASIC pipe matching that register alone (a table: packets need
	 * not visit it). A packet whose register hits no entry, or an entry
	 * of the other address family, opens no connection (its existing
	 * one is tracked as ever). NULL: no destination NAT. */
	struct dpflow_pipe *dnat_pipe;
	uint8_t dnat_reg;
	/* @opens: only a packet whose meta.reg<open_reg> is not zero may
	 * open a connection; the others are tracked against existing ones
	 * only (a gateway's outside) */
	bool opens;
	uint8_t open_reg;
};

/* dpflow_ct_cfg.timeout_ms: the state's connections never expire. */
#define DPFLOW_CT_TIMEOUT_NEVER UINT32_MAX

struct dpflow_pipe_cfg {
	const char *name;
	uint8_t type;  /* enum dpflow_pipe_type */
	bool root;     /* the root pipe of @port */
	uint16_t port; /* for a root pipe */
	uint32_t size; /* most entries */
	struct dpflow_match_tmpl match;
	uint8_t n_action_tmpls;
	struct dpflow_action_tmpl actions[DPFLOW_ACTION_TMPLS_MAX];
	struct dpflow_monitor monitor;
	struct dpflow_fwd fwd;
	struct dpflow_fwd miss_fwd;
	struct dpflow_color_fwd color_fwd;
	struct dpflow_ct_cfg ct; /* CT pipes */
	uint32_t hash_seed;	 /* HASH pipes: seed of dpflow_hash32() */
	/* HASH pipes: 0, each entry takes the slot it names (hash_index);
	 * else a Maglev pipe (maglev.h) of this many slots, a prime in
	 * 3..DPFLOW_MAGLEV_SIZE_MAX: entries are members (member, weight)
	 * and the slots are rebuilt from all of them on every batch */
	uint32_t maglev_slots;
};

/*
 * The hash of HASH pipes: 32-bit MurmurHash3 (x86_32) of the pipe's key
 * (its per-entry fields in template order, masked) with @seed. A packet
 * takes the entry at slot dpflow_hash32(key) % size (a Maglev pipe:
 * % maglev_slots).
 */
uint32_t dpflow_hash32(const void *key, unsigned len, uint32_t seed);

struct dpflow_pipe *dpflow_pipe_create(struct dpflow_ctx *ctx,
				       const struct dpflow_pipe_cfg *cfg,
				       struct dpflow_error *err);
struct dpflow_pipe *dpflow_pipe_find(struct dpflow_ctx *ctx, const char *name);
const char *dpflow_pipe_name(const struct dpflow_pipe *pipe);

/* ---- entries ------------------------------------------------------------ */

struct dpflow_entry_cfg {
	/* per-entry match values (and masks for CONTROL/ACL), in template
	 * order, each field's bytes big-endian; concatenated */
	uint8_t key[DPFLOW_KEY_MAX];
	uint8_t mask[DPFLOW_KEY_MAX];
	/* ACL: an inclusive range per per-entry field, replacing value/mask
	 * when range_set bit i is set (fields of at most 32 bits) */
	uint32_t range_lo[DPFLOW_MATCH_FIELDS_MAX];
	uint32_t range_hi[DPFLOW_MATCH_FIELDS_MAX];
	uint16_t range_set;
	uint8_t prefix_len;  /* LPM: prefix length of the address field */
	uint32_t hash_index; /* HASH: the slot this entry takes */
	/* HASH with maglev_slots: the member's stable name (1 to
	 * DPFLOW_MAGLEV_NAME_MAX bytes, unique in the pipe; its slots
	 * depend on it) and weight (0: draining, no slots; at most
	 * DPFLOW_MAGLEV_WEIGHT_MAX) */
	char member[DPFLOW_MAGLEV_NAME_MAX + 1];
	uint32_t weight;
	uint32_t priority;   /* CONTROL/ACL: lower wins */
	uint8_t action_tmpl; /* index into the pipe's action templates */
	/* per-entry action values, one per action of the template */
	uint8_t action_value[DPFLOW_ACTIONS_MAX][16];
	/* the outer headers of the template's per-entry ENCAP action */
	struct dpflow_encap encap;
	struct dpflow_fwd fwd; /* when the pipe's forwarding is PER_ENTRY */
	/* monitor overrides (0 / alg NONE: the pipe's monitor) */
	struct dpflow_meter_cfg meter;
	uint32_t shared_counter;
	uint32_t aging_ms;
};

struct dpflow_queue *dpflow_queue_create(struct dpflow_ctx *ctx,
					 struct dpflow_error *err);
void dpflow_queue_destroy(struct dpflow_queue *q);
/*
 * Drop every operation queued since the last dpflow_entries_process():
 * none of them is applied, the handles their calls returned are no
 * longer valid, and entries queued for removal or update stay as they
 * are. No status callback runs. For a caller that fails half-way through
 * building a batch.
 */
void dpflow_queue_discard(struct dpflow_queue *q);

/*
 * Queue an entry for the pipe. Nothing changes until
 * dpflow_entries_process(). @user is passed to the status callback.
 * Returns the entry (its handle for update/remove) or NULL + @err when the
 * queue is full.
 */
struct dpflow_entry *dpflow_entry_add(struct dpflow_queue *q,
				      struct dpflow_pipe *pipe,
				      const struct dpflow_entry_cfg *cfg,
				      void *user, struct dpflow_error *err);
int dpflow_entry_remove(struct dpflow_queue *q, struct dpflow_entry *e,
			void *user);
/*
 * Replace entry @e with @cfg (match, actions, forwarding and monitor may
 * all change) in the next batch. Packets see the old entry or the new one,
 * never neither. Returns the new entry's handle (the old one is released
 * when the batch is applied, its counters carried over) or NULL + @err.
 */
struct dpflow_entry *dpflow_entry_update(struct dpflow_queue *q,
					 struct dpflow_entry *e,
					 const struct dpflow_entry_cfg *cfg,
					 void *user, struct dpflow_error *err);

enum dpflow_entry_status {
	DPFLOW_ENTRY_OK = 0,
	DPFLOW_ENTRY_ERROR,   /* this entry was invalid */
	DPFLOW_ENTRY_ABORTED, /* valid, but another entry of the batch failed */
};

typedef void (*dpflow_entry_cb)(struct dpflow_entry *e, int status,
				const struct dpflow_error *err, void *user);

/*
 * Apply every queued operation as one batch: validated first, then
 * published atomically. If any entry is invalid, nothing is applied: that
 * entry's callback gets DPFLOW_ENTRY_ERROR with the error naming the field,
 * the others DPFLOW_ENTRY_ABORTED. Returns 0 or the first error (-errno).
 */
int dpflow_entries_process(struct dpflow_queue *q, dpflow_entry_cb cb,
			   struct dpflow_error *err);

int dpflow_entry_counter(const struct dpflow_entry *e,
			 struct dpflow_counter *c);
/*
 * The entry's id: stable for the entry's life, unlike its slot. Ids of a
 * pipe count up from 0 in the order entries are queued; an update's new
 * entry keeps the id (and the counter) of the entry it replaces; an id is
 * never given to another entry of the pipe while the context lives.
 */
uint64_t dpflow_entry_id(const struct dpflow_entry *e);
unsigned dpflow_pipe_entry_count(const struct dpflow_pipe *pipe);

/* Pipes of a context in creation order, and entries of a pipe by slot
 * (NULL for a free slot; slots run 0..size-1). */
unsigned dpflow_ctx_pipe_count(const struct dpflow_ctx *ctx);
struct dpflow_pipe *dpflow_ctx_pipe(struct dpflow_ctx *ctx, unsigned i);
uint32_t dpflow_pipe_size(const struct dpflow_pipe *pipe);
const struct dpflow_entry *dpflow_pipe_entry(const struct dpflow_pipe *pipe,
					     uint32_t slot);
const struct dpflow_pipe_cfg *dpflow_pipe_cfg(const struct dpflow_pipe *pipe);
const struct dpflow_entry_cfg *dpflow_entry_cfg(const struct dpflow_entry *e);

/* ---- data path ------------------------------------------------------------
 */

struct dpflow_pipe_stats {
	uint64_t pkts; /* packets looked up */
	uint64_t hits;
	uint64_t misses;
	uint64_t color[3]; /* metered packets by colour */
	/* CT pipes: live connections; created, expired, replaced (made
	 * room for a new one, ct.replace); packets that broke the state
	 * machine, that got no connection, and new connections refused for
	 * want of a free source NAT binding (counted in refused too) */
	uint64_t ct_live, ct_created, ct_expired, ct_invalid, ct_refused;
	uint64_t ct_replaced, ct_nat_exhausted;
};

/*
 * Called by dpflow_pipe_age() for each entry that aged out (it stays in
 * the pipe until removed: the usual reply is dpflow_entry_remove()).
 */
typedef void (*dpflow_aged_cb)(struct dpflow_entry *e, uint64_t last_hit_ns,
			       void *arg);

/*
 * Aging, from a control thread: report each entry of @pipe with aging that
 * had no hit for its timeout at @now_ns (dpflow_clock_ns() time), once;
 * for a CT pipe, free expired connections. @budget slots are scanned from
 * where the previous call stopped (0: all). Returns how many aged out.
 */
uint32_t dpflow_pipe_age(struct dpflow_pipe *pipe, uint64_t now_ns,
			 uint32_t budget, dpflow_aged_cb cb, void *arg);

int dpflow_pipe_stats_get(const struct dpflow_pipe *pipe,
			  struct dpflow_pipe_stats *s);

/*
 * Run the packets @idx (received on port @port) through the port's root
 * pipe and on: parse, match, actions, forwarding. Packets sent are handed
 * to their output ports, dropped ones freed and counted by reason. Returns
 * @n. Called by a data thread registered with dpflow_ctx_thread_online().
 */
uint16_t dpflow_ctx_process_burst(struct dpflow_ctx *ctx, uint16_t port,
				  uint32_t *idx, uint16_t n);

/* dpflow_ctx_process_burst() flags */
#define DPFLOW_PROCESS_PARSED                      \
	0x1 /* the packets' meta is already filled \
	       by dpflow_parse_burst() */

/* dpflow_ctx_process_burst() with @flags (DPFLOW_PROCESS_*). */
uint16_t dpflow_ctx_process_burst_ex(struct dpflow_ctx *ctx, uint16_t port,
				     uint32_t *idx, uint16_t n, unsigned flags);

/*
 * The transmit queue this data thread sends on (taken modulo each port's
 * transmit queues; default 0). Threads that share a queue are serialised
 * on it.
 */
void dpflow_ctx_thread_tx_queue(struct dpflow_ctx *ctx, uint16_t queue);

/*
 * A data thread's hook on what the pipes send to a port: @fn(@arg, port,
 * pool, idx, n) may take packets of @idx (their ownership passes to it)
 * and returns how many are left, moved to the front of @idx; those are
 * transmitted. The runtime holds timed packets in its wheels this way.
 * NULL: none.
 */
typedef uint16_t (*dpflow_tx_hook_fn)(void *arg, uint16_t port,
				      struct dpflow_pool *pool, uint32_t *idx,
				      uint16_t n);
void dpflow_ctx_thread_tx_hook(struct dpflow_ctx *ctx, dpflow_tx_hook_fn fn,
			       void *arg);

/*
 * Transmit @n packets of the context's pool on port @port from a data
 * thread (its transmit queue, as the pipes do): what the port does not
 * take is freed and counted as port_tx_full. Returns how many were sent.
 */
uint16_t dpflow_ctx_port_send(struct dpflow_ctx *ctx, uint16_t port,
			      uint32_t *idx, uint16_t n);

/* Drop counters of the context, indexed by enum dpflow_drop. */
void dpflow_ctx_drops(const struct dpflow_ctx *ctx, uint64_t *drops);

/*
 * A data thread calls dpflow_ctx_thread_online() before its first burst
 * (RCU registration, liburcu QSBR, and its scratch space),
 * dpflow_ctx_quiescent() between bursts, and dpflow_ctx_thread_offline()
 * when done (frees the scratch space).
 */
void dpflow_ctx_thread_online(struct dpflow_ctx *ctx);
void dpflow_ctx_thread_offline(struct dpflow_ctx *ctx);
void dpflow_ctx_quiescent(struct dpflow_ctx *ctx);

/*
 * Wait for a grace period: every data thread online has reported a
 * quiescent state since the call began, so what an application
 * unpublished before the call (a pointer swapped out) is no longer
 * used. Control thread only (never a data thread: it would wait for
 * itself).
 */
void dpflow_ctx_synchronize(struct dpflow_ctx *ctx);

/* Counter shards of data threads: dpflow_ctx_thread_shard() values. */
#define DPFLOW_THREAD_SHARDS 64
/*
 * The calling data thread's counter shard, 0..DPFLOW_THREAD_SHARDS-1:
 * distinct for each thread online (up to 63 of them); threads beyond
 * that, and threads not online, share shard DPFLOW_THREAD_SHARDS-1 (its
 * counters then need atomic updates). For applications that keep
 * per-thread counters beside the engine's.
 */
unsigned dpflow_ctx_thread_shard(struct dpflow_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif /* DPFLOW_FLOW_H */
