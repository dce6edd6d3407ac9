/*
 * The config loader's pieces (config.c: the document, ports, pipes,
 * forwarding and entries; config_actions.c: action templates and
 * encapsulations; config_monitor.c: the context section, monitors, meters
 * and connection tracking). Each parser reads one YAML node into a
 * flow.h structure and reports "FILE:LINE: KEY: message" through yerr().
 * Control thread only.
 */
#ifndef DPFLOW_CTL_CONFIG_INTERNAL_H
#define DPFLOW_CTL_CONFIG_INTERNAL_H

#include <stdint.h>

#include "dpflow/config.h"
#include "dpflow/flow.h"

#include "ctl/yaml_doc.h"

struct loader {
	struct ydoc d;
	struct dpflow_ctx *ctx;
	struct dpflow_queue *q;
	/* where each queued entry came from, for batch errors */
	struct ynode *entry_at;
	unsigned n_entries;
	int batch_rc;
	/* context.shared_meters: how many (the context has no getter) */
	uint32_t n_shared_meters;
};

#define CHECK(x)                    \
	do {                        \
		int rc_ = (x);      \
		if (rc_)            \
			return rc_; \
	} while (0)

/* config.c */
int cfg_parse_port_ref(struct loader *L, const struct ynode *x, uint16_t *port);
int cfg_parse_field_name(struct loader *L, const struct ynode *x,
			 uint16_t *field);
struct field_value;
/* A value of match field @field (field_value.h syntax). */
int cfg_parse_value(struct loader *L, const struct ynode *x, unsigned field,
		    struct field_value *fv);

/* config_actions.c */
int cfg_parse_actions(struct loader *L, const struct ynode *x,
		      struct dpflow_pipe_cfg *cfg);
/* The value of a per-entry action @a, from an entry's `values` item. */
int cfg_parse_action_value(struct loader *L, const struct ynode *x,
			   const struct dpflow_action *a, uint8_t *value);
int cfg_parse_encap(struct loader *L, const struct ynode *x,
		    struct dpflow_encap *e);

/* config_monitor.c */
/*
 * The top-level `context` mapping, before the context exists: fills @cp
 * and returns the shared meters' configs in *@meters (malloc'd, @cp's
 * shared_meters of them; NULL when none).
 */
int cfg_parse_context(struct loader *L, const struct ynode *x,
		      struct dpflow_ctx_params *cp,
		      struct dpflow_meter_cfg **meters);
/* Configure the shared meters of the new context. */
int cfg_shared_meters_config(struct loader *L, const struct ynode *x,
			     const struct dpflow_meter_cfg *meters);
int cfg_parse_meter(struct loader *L, const struct ynode *x,
		    struct dpflow_meter_cfg *m);
/* A shared counter id, 1..the context's shared counters. */
int cfg_parse_shared_counter(struct loader *L, const struct ynode *x,
			     uint32_t *id);
int cfg_parse_aging(struct loader *L, const struct ynode *x, uint32_t *ms);
int cfg_parse_monitor(struct loader *L, const struct ynode *x,
		      struct dpflow_pipe_cfg *cfg);
int cfg_parse_ct(struct loader *L, const struct ynode *x,
		 struct dpflow_ct_cfg *ct);

#endif /* DPFLOW_CTL_CONFIG_INTERNAL_H */
