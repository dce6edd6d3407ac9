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

struct dpflow_ctx;
struct dpflow_pipe;
struct dpflow_queue;
struct dpflow_entry;

/* ---- context and ports ------------------------------------------------- */

struct dpflow_ctx_params {
	uint32_t pool_slots; /* 0: 8192 */
	uint16_t data_room;  /* 0: the pool default (2048) */
};

struct dpflow_ctx *dpflow_ctx_create(const struct dpflow_ctx_params *p,
				     struct dpflow_error *err);
/* Close ports, destroy pipes and entries, free the pool. NULL ok. */
void dpflow_ctx_destroy(struct dpflow_ctx *ctx);
struct dpflow_pool *dpflow_ctx_pool(struct dpflow_ctx *ctx);

/* Open a port (port.h URI) under @name. Returns its id (>= 0) or -errno. */
int dpflow_ctx_port_add(struct dpflow_ctx *ctx, const char *name,
			const char *uri, struct dpflow_error *err);
int dpflow_ctx_port_find(const struct dpflow_ctx *ctx, const char *name);
struct dpflow_port *dpflow_ctx_port(struct dpflow_ctx *ctx, unsigned id);
const char *dpflow_ctx_port_name(const struct dpflow_ctx *ctx, unsigned id);
unsigned dpflow_ctx_port_count(const struct dpflow_ctx *ctx);

/* ---- pipes -------------------------------------------------------------- */

enum dpflow_pipe_type {
	DPFLOW_PIPE_BASIC,   /* exact match */
	DPFLOW_PIPE_CONTROL, /* masked, priorities, small */
	DPFLOW_PIPE_ACL,     /* masked and ranges, priorities, large */
	DPFLOW_PIPE_LPM,     /* longest prefix on one address field */
	DPFLOW_PIPE_HASH,    /* entry = hash of fields modulo size */
	DPFLOW_PIPE_CT,	     /* connection tracking */
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

struct dpflow_pkt_handler_ctx;
/* A software handler: gets the packets and owns them. */
typedef void (*dpflow_handler_fn)(void *arg, struct dpflow_pool *pool,
				  const uint32_t *idx, uint16_t n);

struct dpflow_fwd {
	uint8_t kind; /* enum dpflow_fwd_kind */
	uint16_t port;
	struct dpflow_pipe *pipe;
	dpflow_handler_fn handler;
	void *handler_arg;
};

struct dpflow_monitor {
	bool counter; /* per-entry packet and byte counters */
};

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
};

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
	uint32_t priority;   /* CONTROL/ACL: lower wins */
	uint8_t action_tmpl; /* index into the pipe's action templates */
	/* per-entry action values, one per action of the template */
	uint8_t action_value[DPFLOW_ACTIONS_MAX][16];
	struct dpflow_fwd fwd; /* when the pipe's forwarding is PER_ENTRY */
};

struct dpflow_queue *dpflow_queue_create(struct dpflow_ctx *ctx,
					 struct dpflow_error *err);
void dpflow_queue_destroy(struct dpflow_queue *q);

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

struct dpflow_counter {
	uint64_t pkts;
	uint64_t bytes;
};

int dpflow_entry_counter(const struct dpflow_entry *e,
			 struct dpflow_counter *c);
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
};

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

#ifdef __cplusplus
}
#endif

#endif /* DPFLOW_FLOW_H */
