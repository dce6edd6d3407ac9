/*
 * The control endpoint's pieces: ctl_server.c (the socket, connections,
 * framing), ctl_request.c (requests to replies), ctl_format.c (pipes,
 * entries and the graph written back as config syntax, text and dot),
 * ctl_trace.c (the `trace` request and a trace as JSON).
 * Control thread only.
 */
#ifndef DPFLOW_CTL_CTL_INTERNAL_H
#define DPFLOW_CTL_CTL_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "dpflow/ctl.h"
#include "dpflow/error.h"
#include "dpflow/flow.h"

struct ctl_conn;

struct dpflow_ctl {
	struct dpflow_ctx *ctx;
	struct dpflow_ctl_hooks hooks;
	struct dpflow_queue *q; /* this endpoint's entry queue */
	/* the socket (ctl_server.c); lfd and epfd -1 without one */
	char *path;
	int lfd, epfd;
	dev_t dev; /* the socket file's identity, to remove only ours */
	ino_t ino;
	struct ctl_conn *conns[DPFLOW_CTL_CONNS_MAX];
};

/* ctl_format.c */

/* A field's value under @mask (NULL: all ones) in config syntax. */
void ctl_value_str(unsigned field, const uint8_t *value, const uint8_t *mask,
		   char *buf, size_t len);
/* Config syntax as JSON: "drop", {"port": NAME}, {"pipe": NAME}, ... */
json_t *ctl_fwd_json(struct dpflow_ctx *ctx, const struct dpflow_fwd *f);
/* A pipe's match template, as its config's `match` list. */
json_t *ctl_match_json(const struct dpflow_match_tmpl *m);
/* Entry @e of @pipe as its config's entries[j] mapping. */
json_t *ctl_entry_json(struct dpflow_ctx *ctx, const struct dpflow_pipe *pipe,
		       const struct dpflow_entry_cfg *e);
/* A pipe's action templates, as its config's `actions` list. */
json_t *ctl_actions_json(struct dpflow_ctx *ctx,
			 const struct dpflow_pipe_cfg *cfg);
/*
 * Set "uri" of port object @o to @uri and, from the URI of a port of
 * @kind, "rx_file"/"tx_file" (pcap), "interface" (afpacket, afxdp) or
 * "device" (dpdk). 0 or -ENOMEM.
 */
int ctl_port_where(json_t *o, const char *kind, const char *uri);
/* The pipe graph: ports, pipes, forwarding, as text or Graphviz dot;
 * malloc'ed, NULL when out of memory. */
char *ctl_dump(struct dpflow_ctx *ctx, bool dot);
/* The pipe graph as JSON: {"ports": [{id, name, kind}], "pipes": [{name,
 * type, root, entries, size, match, edges: [{on, to}]}]}; NULL when out
 * of memory. */
json_t *ctl_dump_json(struct dpflow_ctx *ctx);

/* Bytes ctl_entry_canon() writes at most. */
#define CTL_CANON_MAX 256
/*
 * What identifies entry @e in @pipe (its match as the table sees it: key
 * under the masks, prefix, ranges; a hash pipe's slot; a maglev pipe's
 * member name), priority left out.
 * Two entries with equal bytes match the same packets. Returns the length.
 */
unsigned ctl_entry_canon(const struct dpflow_pipe *pipe,
			 const struct dpflow_entry_cfg *e, uint8_t *out);

/* entry_clash.c */

/* The hash (FNV-1a) of @len bytes @c of ctl_entry_canon(). */
uint32_t ctl_canon_hash(const uint8_t *c, unsigned len);
/* Whether an entry's priority is part of its identity in @pipe (control
 * and acl pipes). */
bool ctl_clash_prio(const struct dpflow_pipe *pipe);

/* Entry @i of the caller's list of new entries. */
typedef const struct dpflow_entry_cfg *(*ctl_clash_get_fn)(const void *arg,
							   size_t i);

/* ctl_clash.other of a new entry identical to an entry the pipe holds. */
#define CTL_CLASH_PIPE UINT32_MAX

/* Two identical entries: new entry @item repeats new entry @other (an
 * earlier one) or, when @other is CTL_CLASH_PIPE, the pipe's entry in
 * @slot. */
struct ctl_clash {
	uint32_t item;
	uint32_t other;
	uint32_t slot;
};

/*
 * Find new entries of @pipe identical to another: the same match
 * (ctl_entry_canon()) and, where ctl_clash_prio(), the same priority. A
 * basic or lpm table cannot hold two entries with one match; a control or
 * acl table can, but a removal by match and priority could then name
 * neither. New entry i (< @n) is @get(@arg, i); they are checked among
 * themselves and, with @existing, against the entries @pipe holds (one
 * pass over its slots: O(size + n)). Hash pipes never clash here (the
 * engine refuses a taken slot). Returns 1 with the first clash in @out, 0
 * when there is none, -ENOMEM.
 */
int ctl_entry_clash(const struct dpflow_pipe *pipe, ctl_clash_get_fn get,
		    const void *arg, size_t n, bool existing,
		    struct ctl_clash *out);

/* ctl_trace.c */

/*
 * The `trace` request @in (its keys already checked against "port",
 * "count", "timeout_ms") for @ctl: waits, on this thread, up to
 * timeout_ms for the data threads' next burst and adds "traces" (a list
 * of dpflow_ctl_trace_json() objects) and "timeout" (true when no packet
 * came in time) to reply @out. 0, or a negative errno with @err's field
 * and message (an unknown port, a value out of range, no worker threads,
 * -EBUSY: another trace in flight).
 */
int ctl_trace(struct dpflow_ctl *ctl, json_t *in, json_t *out,
	      struct dpflow_error *err);

#endif /* DPFLOW_CTL_CTL_INTERNAL_H */
