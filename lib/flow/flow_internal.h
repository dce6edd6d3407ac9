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

#define TABLE_MISS UINT32_MAX

struct dpflow_pipe;
struct dpflow_edit_encap;

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
	uint8_t state; /* ENTRY_FREE / ENTRY_PENDING / ENTRY_ACTIVE */
	struct dpflow_entry_cfg cfg;
	/* data path: written by data threads with relaxed atomics */
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
	const struct table_kind *kind;
	void *images[2];
	size_t image_size;
	void *kind_state; /* the kind's control-side state */
	/* built encapsulation templates of ENCAP actions */
	struct dpflow_edit_encap
	    *encaps[DPFLOW_ACTION_TMPLS_MAX][DPFLOW_ACTIONS_MAX];
	struct dpflow_entry *entries; /* cfg.size */
	uint32_t *free_idx;	      /* stack of free entry indices */
	uint32_t n_free;
	uint32_t n_active;
	/* data path counters (relaxed atomics) */
	uint64_t pkts, hits, misses;
};

struct ctx_port {
	char name[DPFLOW_NAME_MAX];
	struct dpflow_port *port;
	struct dpflow_pipe *root;
};

struct dpflow_ctx {
	struct dpflow_pool *pool;
	unsigned gen; /* which image readers use (RCU-published) */
	unsigned n_ports;
	struct ctx_port ports[DPFLOW_PORTS_MAX];
	unsigned n_pipes;
	struct dpflow_pipe *pipes[DPFLOW_PIPES_MAX];
	uint64_t drops[DPFLOW_DROP__COUNT];
};

/* Table kinds (pipe_table.c). */
const struct table_kind *table_kind_for(unsigned pipe_type);

/* Batch helpers (entry.c) used by pipe.c on destroy. */
void pipe_entries_free(struct dpflow_pipe *pipe);

#endif /* DPFLOW_FLOW_INTERNAL_H */
