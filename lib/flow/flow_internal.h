/*
 * The flow engine's private structures (flow.h is the contract).
 *
 * Tables are double-buffered per pipe: images[0] and images[1]. The
 * context's generation `gen` says which image of every pipe readers use; a
 * batch of entry operations is applied to the other images, then `gen` is
 * flipped once (one atomic store: every pipe switches together), and after
 * an RCU grace period the same operations are replayed on the images that
 * readers just left. Table kinds implement struct table_kind (pipe_table.c).
 *
 * Entries live in a per-pipe array indexed by the value the table returns;
 * an index is reused only after a grace period, so a data thread may read
 * an entry's actions while its removal is being published.
 */
#ifndef DPFLOW_FLOW_INTERNAL_H
#define DPFLOW_FLOW_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "dpflow/flow.h"
#include "dpflow/meta.h"
#include "dpflow/trace.h"
#include "flow/plan.h"

#define TABLE_MISS UINT32_MAX

struct dpflow_pipe;
struct dpflow_edit_encap;
struct dpflow_counters;
struct dpflow_meters;
struct dpflow_aging;
struct dpflow_ring;

/* One operation of a batch, as a table kind sees it. */
struct table_op {
	bool add;	/* else remove */
	uint32_t value; /* entry index */
	const struct dpflow_entry *e;
};

/*
 * A table kind. Images are opaque blocks; incremental kinds (apply) change
 * an image in place, rebuild kinds (build) make a new image from the
 * pipe's whole entry set.
 */
struct table_kind {
	/* Make both images for @pipe (cfg.size entries, key_len bytes). */
	int (*create)(struct dpflow_pipe *pipe, struct dpflow_error *err);
	void (*destroy)(struct dpflow_pipe *pipe);
	/*
	 * Apply @n ops to pipe->images[@which], all or nothing: on failure
	 * the image is as before, *@failed is the failing op's position and
	 * @err names its problem (-ENOSPC, -EEXIST...). A rebuild kind may
	 * replace the image (and pipe->image_size) with a new one.
	 */
	int (*apply)(struct dpflow_pipe *pipe, unsigned which,
		     const struct table_op *ops, unsigned n, unsigned *failed,
		     struct dpflow_error *err);
	/* Rebuild kinds: make image @to equal image @from after a flip
	 * (incremental kinds leave this NULL and get the batch replayed). */
	void (*sync)(struct dpflow_pipe *pipe, unsigned from, unsigned to);
	/* Look up @n keys of pipe->key_len bytes at @keys (stride
	 * DPFLOW_KEY_MAX); write entry indices or TABLE_MISS. */
	void (*lookup)(const struct dpflow_pipe *pipe, const void *image,
		       const uint8_t *keys, uint16_t n, uint32_t *values);
};

struct dpflow_entry {
	struct dpflow_pipe *pipe;
	uint32_t index;
	/* stable id (dpflow_entry_id()): the pipe's next_entry_id when
	 * added, kept by an update */
	uint64_t id;
	uint8_t state; /* ENTRY_FREE / ENTRY_PENDING / ENTRY_ACTIVE */
	struct dpflow_entry_cfg cfg;
	/* the outer headers of a per-entry ENCAP, built from cfg.encap */
	struct dpflow_edit_encap *encap;
	/* an update's old entry: its counters, carried into this one */
	struct dpflow_entry *replaces;
};

/*
 * What every hit of an entry touches, packed apart from the entry (whose
 * config is half a kilobyte) so that a burst's hits cost one prefetched
 * line each: counters (relaxed atomics, data threads), and the monitor
 * resolved when the entry is published: meter (0: none; i + 1: the pipe's
 * meter i, or with @meter_shared the context's shared meter i), shared
 * counter (0: none, else its id).
 */
struct entry_dp {
	uint64_t base_pkts; /* counts carried over by an update (control) */
	uint64_t base_bytes;
	uint32_t meter;
	uint32_t shared_counter;
	uint8_t meter_shared;
	uint8_t reserved[7];
};

/*
 * Per-entry counters are sharded by data thread: thread w adds to
 * ctr[w * size + entry] with plain adds (one writer a shard), readers sum
 * the shards. Ids 0..FLOW_WORKERS_MAX-2 are a thread's own; threads beyond
 * share the last shard with atomic adds. The shards are one anonymous
 * mapping: the pages of unused shards are never touched.
 */
#define FLOW_WORKERS_MAX   64
#define FLOW_WORKER_SHARED (FLOW_WORKERS_MAX - 1)

struct entry_ctr {
	uint64_t pkts;
	uint64_t bytes;
};

enum { ENTRY_FREE, ENTRY_PENDING, ENTRY_ACTIVE, ENTRY_REMOVING };

struct dpflow_pipe {
	struct dpflow_ctx *ctx;
	struct dpflow_pipe_cfg cfg;
	char name[DPFLOW_NAME_MAX];
	uint16_t id;
	uint16_t key_len; /* bytes of the per-entry key */
	uint8_t field_off[DPFLOW_MATCH_FIELDS_MAX]; /* in the key */
	uint8_t lpm_bytes; /* LPM: bytes of the address (the last field) */
	/* per template field: key bytes, and whether its mask keeps every
	 * bit (no masking needed); constant fields in the template */
	uint8_t field_bytes[DPFLOW_MATCH_FIELDS_MAX];
	bool field_full_mask[DPFLOW_MATCH_FIELDS_MAX];
	uint8_t n_const;
	const struct table_kind *kind;
	void *images[2];
	size_t image_size;
	void *kind_state; /* the kind's control-side state */
	/* built encapsulation templates of ENCAP actions */
	struct dpflow_edit_encap
	    *encaps[DPFLOW_ACTION_TMPLS_MAX][DPFLOW_ACTIONS_MAX];
	struct dpflow_entry *entries; /* cfg.size */
	struct entry_dp *dp;	      /* cfg.size, by entry index */
	struct entry_ctr *ctr;	      /* FLOW_WORKERS_MAX shards of cfg.size */
	size_t entries_bytes, dp_bytes, ctr_bytes;
	/* hits read dp[] (a meter or shared counter in use); hits go
	 * through the monitor (dp_used, counters or aging) */
	bool dp_used;
	bool monitored;
	uint32_t *free_idx; /* stack of free entry indices */
	uint32_t n_free;
	uint32_t n_active;
	uint64_t next_entry_id; /* the id of the next entry added */
	/* monitor: per-entry meters (cfg.size) and aging slots, live
	 * images written by the data path (NULL when the pipe has none) */
	struct dpflow_meters *meters;
	struct dpflow_aging *aging;
	uint32_t aging_cursor;
	/* data path counters (relaxed atomics) */
	uint64_t pkts, hits, misses;
	uint64_t color[3];
	uint64_t ct_invalid, ct_refused;
	/* CT pipes: the entry whose action template tracked packets run */
	struct dpflow_entry ct_entry;
	/* the plan (plan.h) the walk reads: the pipe's part, built at
	 * creation; its entries' (one for a CT pipe: all zero), by entry
	 * index, written before the batch that adds them is published; the
	 * entries' own encapsulations (pipes with a per-entry ENCAP) */
	struct dpflow_plan_pipe plan;
	struct dpflow_plan_entry *plan_entries;
	struct dpflow_edit_encap *plan_encaps;
	size_t plan_entries_bytes, plan_encaps_bytes;
};

/* dpflow_ctx.trace_req */
enum { CTX_TRACE_IDLE = 0, CTX_TRACE_ASKED, CTX_TRACE_TAKEN, CTX_TRACE_DONE };

/* Handlers the plan names by slot (PLAN_FWD_HANDLER's target). */
#define FLOW_PLAN_HANDLERS_MAX 64

struct ctx_handler {
	char name[DPFLOW_NAME_MAX];
	dpflow_handler_fn fn;
	void *arg;
};

/* Transmit queues of a port with a lock each (queue q uses q % this). */
#define CTX_TXQ_LOCKS 64

struct ctx_port {
	char name[DPFLOW_NAME_MAX];
	struct dpflow_port *port;
	struct dpflow_pipe *root;
	/* one lock per transmit queue, 64 bytes apart (padding, not an
	 * alignment: the context comes from calloc) */
	struct {
		uint32_t v;
		uint8_t pad[60];
	} tx_lock[CTX_TXQ_LOCKS];
};

struct dpflow_ctx {
	struct dpflow_pool *pool;
	unsigned gen;	  /* which image readers use (RCU-published) */
	uint64_t batches; /* entry batches published so far (a version
			     that other targets compare to re-sync) */
	unsigned n_ports;
	struct ctx_port ports[DPFLOW_PORTS_MAX];
	unsigned n_pipes;
	struct dpflow_pipe *pipes[DPFLOW_PIPES_MAX];
	uint64_t drops[DPFLOW_DROP__COUNT];
	/* data threads' counter shards: bit w set while id w is taken;
	 * workers_hi: one more than the highest id ever taken */
	uint64_t worker_ids;
	unsigned workers_hi;
	unsigned n_handlers;
	struct ctx_handler handlers[DPFLOW_HANDLERS_MAX];
	/* every handler forwarding names, by plan slot (never reused) */
	unsigned n_plan_handlers;
	struct {
		dpflow_handler_fn fn;
		void *arg;
	} plan_handlers[FLOW_PLAN_HANDLERS_MAX];
	/* RSS software queues (multi-producer, single-consumer rings) */
	unsigned n_rss;
	struct dpflow_ring *rss[DPFLOW_RSS_QUEUES_MAX];
	uint64_t rss_count[DPFLOW_RSS_QUEUES_MAX];
	/* shared monitor objects, index id - 1 */
	uint32_t n_shared_counters, n_shared_meters;
	struct dpflow_counters *shared_counters;
	struct dpflow_meters *shared_meters;
	bool check_only; /* ports are placeholders (dpflow_ctx_params) */
	/* a control thread's trace request (dpflow_ctx_trace_next): state
	 * CTX_TRACE_*, the port asked (-1: any) and packets; the data thread
	 * that takes it fills trace_buf and says how many in trace_got */
	unsigned trace_req;
	int trace_port;
	unsigned trace_n, trace_got;
	struct dpflow_trace trace_buf[DPFLOW_TRACE_PKTS_MAX];
};

/* Table kinds (pipe_table.c). */
const struct table_kind *table_kind_for(unsigned pipe_type);

/* Check forwarding @f (a port, pipe, handler or queues that exist);
 * @field names it in errors. pipe.c. */
int flow_fwd_check(const struct dpflow_ctx *ctx, const struct dpflow_fwd *f,
		   bool per_entry_ok, const char *field,
		   struct dpflow_error *err);

/* Monitor (monitor.c): make a pipe's meters and aging images at creation,
 * free them; resolve and arm an entry's monitor before it is published. */
int monitor_pipe_create(struct dpflow_pipe *pipe, struct dpflow_error *err);
void monitor_pipe_destroy(struct dpflow_pipe *pipe);
int monitor_entry_check(const struct dpflow_entry *e, struct dpflow_error *err);
void monitor_entry_publish(struct dpflow_entry *e, uint64_t now_ns);
void monitor_entry_retire(struct dpflow_entry *e);
int monitor_meter_params(const struct dpflow_meter_cfg *c, void *params,
			 struct dpflow_error *err);

/* Sum of an entry's counter shards (pipe.c); zero them (control thread,
 * slot not in use). */
void flow_entry_ctr_sum(const struct dpflow_pipe *pipe, uint32_t entry,
			uint64_t *pkts, uint64_t *bytes);
void flow_entry_ctr_zero(struct dpflow_pipe *pipe, uint32_t entry);

#endif /* DPFLOW_FLOW_INTERNAL_H */
