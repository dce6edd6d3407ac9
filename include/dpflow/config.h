/*
 * YAML configuration: ports, pipes and their entries (docs/config.md).
 *
 * dpflow_config_load() builds a whole context from a file, or nothing: on
 * any error the partly built context is destroyed and @err says
 * "FILE:LINE: KEY: what is wrong", KEY being the path of the offending key
 * (for example pipes[1].match[0].field). Control thread only.
 */
#ifndef DPFLOW_CONFIG_H
#define DPFLOW_CONFIG_H

#include <stdio.h>

#include "dpflow/error.h"
#include "dpflow/flow.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A software handler a config may forward to by name. */
struct dpflow_handler_def {
	const char *name;
	dpflow_handler_fn fn;
	void *arg;
};

struct dpflow_config_opts {
	uint32_t pool_slots; /* 0: the context default */
	uint16_t data_room;  /* packet bytes a slot; 0: the context default */
	/* handlers registered on the context before pipes are made */
	const struct dpflow_handler_def *handlers;
	unsigned n_handlers;
	/*
	 * Check only (`dpflow validate`): every port URI is checked and
	 * registered as a placeholder that opens nothing (no file created,
	 * truncated or read past its header, no socket, no interface
	 * touched; dpflow_port_open_check() in port.h), so pipes and entries
	 * load as they would for a run. The context cannot run packets.
	 */
	bool check_only;
};

struct dpflow_ctx *dpflow_config_load(const char *path,
				      const struct dpflow_config_opts *opts,
				      struct dpflow_error *err);

/* Same, from a string (@name stands for the file name in messages). */
struct dpflow_ctx *dpflow_config_load_string(const char *yaml, const char *name,
					     const struct dpflow_config_opts *o,
					     struct dpflow_error *err);

/*
 * dpflow_config_parse_entry() @flags: DPFLOW_ENTRY_PARSE_KEY reads only
 * what names the entry (match, index or member, and priority); the other
 * keys are checked by name and ignored.
 */
#define DPFLOW_ENTRY_PARSE_KEY 0x1

/*
 * Parse one entry of @pipe from @text (@len bytes): YAML or JSON of the
 * mapping a config's pipes[i].entries[j] holds, with the same checks and
 * messages as dpflow_config_load(). Fills @e. Returns 0, or -errno with
 * @err "PATH.KEY: what is wrong" (@path, such as "entries[2]", prefixes
 * every key path; NULL: none). Nothing is queued. Control thread only.
 */
int dpflow_config_parse_entry(struct dpflow_ctx *ctx,
			      const struct dpflow_pipe *pipe, const char *text,
			      size_t len, const char *path, unsigned flags,
			      struct dpflow_entry_cfg *e,
			      struct dpflow_error *err);

/*
 * Write what context @ctx would run to @out, in config syntax where there
 * is one: its ports (name, kind, URI), then each pipe (type, root port,
 * match template, action templates, monitor, forwarding and miss) with
 * its entries, one JSON line each as `dpflowctl entries list` prints
 * them. For `dpflow validate`. Returns 0, or -ENOMEM. Control thread only.
 */
int dpflow_config_describe(struct dpflow_ctx *ctx, FILE *out);

#ifdef __cplusplus
}
#endif

#endif /* DPFLOW_CONFIG_H */
