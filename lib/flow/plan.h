/*
 * The plan: what the per-packet pipe walk reads of a pipe graph, the same
 * bytes on both targets.
 *
 * A pipe's configuration (struct dpflow_pipe_cfg) is the control side's:
 * names, pointers to other pipes and handlers, options. The plan is its
 * data-path form, built once when the pipe is created and entry by entry
 * when entries are published: pipes, ports, RSS queues and handlers are
 * named by index, key layouts and constant fields are laid out, action
 * templates and their built encapsulations are copied in. Nothing in it
 * is a pointer, so the CPU walks it in place and the GPU target copies the
 * same bytes to device memory and walks them with the same code
 * (walk_impl.h). Table images, counters, meters and connection tables are
 * not part of it: each target binds its own (struct dpflow_pipe on the
 * CPU, struct gpu_pipe on the GPU).
 *
 * Built by plan.c (control thread); internal to lib/flow and lib/gpu/flow.
 */
#ifndef DPFLOW_FLOW_PLAN_H
#define DPFLOW_FLOW_PLAN_H

#include <stdint.h>

#include "dpflow/flow.h"
#include "flow/pkt_edit_impl.h"
#include "flow/table_acl_impl.h"

/* Forwarding kinds of the plan (enum dpflow_fwd_kind without pointers). */
enum dpflow_plan_fwd_kind {
	PLAN_FWD_DROP = 0,
	PLAN_FWD_PORT,	    /* port @target */
	PLAN_FWD_PIPE,	    /* pipe @target */
	PLAN_FWD_PER_ENTRY, /* the hit entry's forwarding */
	PLAN_FWD_RSS,	    /* software queues target .. target + rss_n - 1 */
	PLAN_FWD_HANDLER,   /* the context's handler slot @target */
};

struct dpflow_plan_fwd {
	uint8_t kind;	   /* enum dpflow_plan_fwd_kind */
	uint8_t rss_inner; /* RSS: hash the inner headers of a tunnel */
	uint16_t target;   /* port, pipe, first RSS queue, handler slot */
	uint16_t rss_n;	   /* RSS: queues */
};

/* What a hit reads of its entry. */
struct dpflow_plan_entry {
	uint8_t tmpl;	      /* action template */
	uint8_t has_encap;    /* the pipe's entry encap [entry] is its ENCAP */
	uint8_t meter_shared; /* @meter is a shared meter */
	uint8_t reserved;
	uint32_t meter; /* 0: none; else the meter's index + 1 */
	struct dpflow_plan_fwd fwd;
	uint8_t values[DPFLOW_ACTIONS_MAX][16];
};

struct dpflow_plan_pipe {
	uint8_t type; /* enum dpflow_pipe_type */
	uint8_t lpm_v6;
	uint8_t counter; /* per-entry counters */
	uint8_t n_action_tmpls;
	uint16_t key_len;
	uint8_t n_fields;
	uint8_t n_const;
	uint8_t acl_n;
	uint8_t metered;    /* hits may be metered (entries say by which) */
	uint8_t meter_slot; /* GPU: ordinal among the metered pipes */
	uint8_t ct_slot;    /* GPU: ordinal among the CT pipes */
	uint8_t ct_inner, ct_lookup_only, ct_user, ct_user_reg;
	uint8_t yellow_set, red_set;
	uint8_t has_entry_encap; /* some ENCAP action is per entry */
	/* a hit reads its entry's plan (actions, per-entry forwarding or a
	 * meter); else the entries' part of the plan is never written */
	uint8_t reads_entries;
	/* CT: registers kept in the connection (bit i: meta.reg<i>);
	 * whether a new connection gets a value block (saved registers or
	 * source NAT); the image's source NAT pool of IPv4 and of IPv6
	 * connections (DPFLOW_CT_POOL_NONE: not translated) */
	uint8_t ct_save_regs;
	uint8_t ct_values;
	uint8_t ct_pool[2];
	uint32_t size; /* entries */
	uint32_t hash_seed;
	struct dpflow_plan_fwd fwd, miss, yellow, red;
	/* the match template: field ids, which are per entry, their offset
	 * and bytes in the key, whether the mask keeps every bit; constant
	 * fields' values and every field's mask */
	uint16_t field[DPFLOW_MATCH_FIELDS_MAX];
	uint8_t per_entry[DPFLOW_MATCH_FIELDS_MAX];
	uint8_t field_off[DPFLOW_MATCH_FIELDS_MAX];
	uint8_t field_bytes[DPFLOW_MATCH_FIELDS_MAX];
	uint8_t field_full[DPFLOW_MATCH_FIELDS_MAX];
	uint8_t value[DPFLOW_MATCH_FIELDS_MAX][16];
	uint8_t mask[DPFLOW_MATCH_FIELDS_MAX][16];
	/* ACL: key words (offset and bytes in the pipe key), as
	 * pipe_table.c's acl_create() lays them out */
	uint8_t acl_off[DPFLOW_ACL_FIELDS_MAX];
	uint8_t acl_bytes[DPFLOW_ACL_FIELDS_MAX];
	struct dpflow_action_tmpl tmpl[DPFLOW_ACTION_TMPLS_MAX];
	uint8_t tmpl_encap_set[DPFLOW_ACTION_TMPLS_MAX][DPFLOW_ACTIONS_MAX];
	struct dpflow_edit_encap tmpl_encap[DPFLOW_ACTION_TMPLS_MAX]
					   [DPFLOW_ACTIONS_MAX];
	/* CT destination NAT: whether, the table pipe's index and the
	 * register whose value it is looked up by (dpflow_ct_cfg) */
	uint8_t ct_dnat;
	uint8_t ct_dnat_pipe;
	uint8_t ct_dnat_reg;
	/* CT: 0, any packet may open a connection; else 1 + the register
	 * that must not be zero */
	uint8_t ct_open;
	uint8_t reserved2[4];
};

struct dpflow_pipe;
struct dpflow_entry;
struct dpflow_ctx;
struct dpflow_error;

/*
 * Fill @out with pipe @p's part of the plan (its template, forwarding and
 * actions; the pipe's encapsulations built). Handlers are named by their
 * slot in the context's handler table (dpflow_plan_handler_slot). 0, or a
 * negative errno with @err set (more handlers than slots, an ACL key of
 * too many words).
 */
int dpflow_plan_pipe_build(struct dpflow_ctx *ctx, const struct dpflow_pipe *p,
			   struct dpflow_plan_pipe *out,
			   struct dpflow_error *err);

/*
 * Fill @out with entry @e's part of the plan (its template, values,
 * resolved monitor and forwarding). 0, or a negative errno with @err set.
 */
int dpflow_plan_entry_build(struct dpflow_ctx *ctx,
			    const struct dpflow_entry *e,
			    struct dpflow_plan_entry *out,
			    struct dpflow_error *err);

/* Forwarding @f as the plan names it (@field names it in errors). */
int dpflow_plan_fwd_build(struct dpflow_ctx *ctx, const struct dpflow_fwd *f,
			  const char *pipe, const char *field,
			  struct dpflow_plan_fwd *out,
			  struct dpflow_error *err);

#endif /* DPFLOW_FLOW_PLAN_H */
