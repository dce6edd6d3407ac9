/*
 * Control requests to replies (docs/control.md): a request is one JSON
 * object {"cmd": NAME, ...}; the reply {"ok": true, ...} or {"ok": false,
 * "error": MESSAGE, "field": KEY}. Every request is checked whole before
 * anything changes: unknown keys, types, the pipe, every entry of a batch;
 * the batch then goes through dpflow_entries_process() (all or nothing).
 * Entries are parsed by the config loader (dpflow_config_parse_entry()),
 * so they read as a config's entries do. Control thread only.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/clock.h"
#include "dpflow/config.h"
#include "dpflow/meta.h"
#include "dpflow/port.h"
#include "dpflow/runtime.h"

#include "ctl/ctl_internal.h"

/* entries.list: entries per reply by default and at most */
#define LIST_DEFAULT 1000u
#define LIST_MAX     100000u

struct req {
	struct dpflow_ctl *ctl;
	json_t *in;
	json_t *out;	 /* the reply being built */
	char *app_reply; /* the hooks' reply to an application command */
	char msg[DPFLOW_ERROR_MSG_MAX + 64];
	char field[160];
};

static int fail(struct req *r, int code, const char *field, const char *fmt,
		...) __attribute__((format(printf, 4, 5)));

/* Record the error of the request: message and offending key. */
static int fail(struct req *r, int code, const char *field, const char *fmt,
		...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->msg, sizeof(r->msg), fmt, ap);
	va_end(ap);
	snprintf(r->field, sizeof(r->field), "%s", field ? field : "");
	return -(code ? code : EINVAL);
}

static int nomem(struct req *r)
{
	return fail(r, ENOMEM, NULL, "out of memory");
}

/* ---- request fields ------------------------------------------------------
 */

static int get_string(struct req *r, const char *key, bool required,
		      const char **s)
{
	json_t *v = json_object_get(r->in, key);

	if (!v) {
		if (required)
			return fail(r, EINVAL, key, "'%s' is missing", key);
		return 0;
	}
	if (!json_is_string(v))
		return fail(r, EINVAL, key, "'%s' must be a string", key);
	*s = json_string_value(v);
	return 0;
}

static int get_uint(struct req *r, const char *key, uint64_t max, uint64_t *out)
{
	json_t *v = json_object_get(r->in, key);

	if (!v)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    (uint64_t)json_integer_value(v) > max)
		return fail(r, EINVAL, key,
			    "'%s' must be an integer within 0..%llu", key,
			    (unsigned long long)max);
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

static int get_pipe(struct req *r, struct dpflow_pipe **pipe)
{
	const char *name = NULL;
	int rc = get_string(r, "pipe", true, &name);

	if (rc)
		return rc;
	*pipe = dpflow_pipe_find(r->ctl->ctx, name);
	if (!*pipe)
		return fail(r, ENOENT, "pipe", "no pipe named '%s'", name);
	return 0;
}

/* The "entries" list of a batch request: an array of 1.. items. */
static int get_entries(struct req *r, json_t **list)
{
	*list = json_object_get(r->in, "entries");
	if (!*list)
		return fail(r, EINVAL, "entries", "'entries' is missing");
	if (!json_is_array(*list))
		return fail(r, EINVAL, "entries",
			    "'entries' must be a list of entries");
	if (json_array_size(*list) > DPFLOW_CTL_BATCH_MAX)
		return fail(r, E2BIG, "entries",
			    "%zu entries: at most %u a request",
			    json_array_size(*list), DPFLOW_CTL_BATCH_MAX);
	return 0;
}

/* Set reply member @key; false when out of memory. */
static bool set(struct req *r, const char *key, json_t *v)
{
	return v && !json_object_set_new(r->out, key, v);
}

static json_t *u64(uint64_t v)
{
	return json_integer((json_int_t)v);
}

/* ---- ports, pipes, counters, workers, dump --------------------------------
 */

static const char *root_of(struct dpflow_ctx *ctx, unsigned port)
{
	for (unsigned i = 0; i < dpflow_ctx_pipe_count(ctx); i++) {
		const struct dpflow_pipe_cfg *c =
		    dpflow_pipe_cfg(dpflow_ctx_pipe(ctx, i));

		if (c->root && c->port == port)
			return c->name;
	}
	return NULL;
}

static json_t *port_stats_json(const struct dpflow_port_stats *s)
{
	return json_pack(
	    "{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "rx_pkts",
	    u64(s->rx_pkts), "rx_bytes", u64(s->rx_bytes), "rx_nobuf",
	    u64(s->rx_nobuf), "rx_oversize", u64(s->rx_oversize), "rx_dropped",
	    u64(s->rx_dropped), "rx_truncated", u64(s->rx_truncated),
	    "rx_skipped", u64(s->rx_skipped), "rx_errors", u64(s->rx_errors),
	    "tx_pkts", u64(s->tx_pkts), "tx_bytes", u64(s->tx_bytes),
	    "tx_errors", u64(s->tx_errors));
}

static int cmd_ports(struct req *r)
{
	struct dpflow_ctx *ctx = r->ctl->ctx;
	json_t *a = json_array();

	if (!set(r, "ports", a))
		return nomem(r);
	for (unsigned i = 0; i < dpflow_ctx_port_count(ctx); i++) {
		struct dpflow_port *p = dpflow_ctx_port(ctx, i);
		struct dpflow_port_stats st;
		const char *root = root_of(ctx, i);
		json_t *o;

		if (!p)
			continue;
		memset(&st, 0, sizeof(st));
		dpflow_port_stats_get(p, &st);
		o = json_pack("{s:i,s:s,s:s,s:i,s:i,s:o,s:o}", "id", (int)i,
			      "name", dpflow_ctx_port_name(ctx, i), "kind",
			      dpflow_port_kind(p), "rx_queues",
			      (int)dpflow_port_rx_queues(p), "tx_queues",
			      (int)dpflow_port_tx_queues(p), "root",
			      root ? json_string(root) : json_null(), "stats",
			      port_stats_json(&st));
		if (o && ctl_port_where(o, dpflow_port_kind(p),
					dpflow_port_name(p))) {
			json_decref(o);
			o = NULL;
		}
		if (!o || json_array_append_new(a, o))
			return nomem(r);
	}
	return 0;
}

static json_t *pipe_stats_json(const struct dpflow_pipe *pipe)
{
	const struct dpflow_pipe_cfg *cfg = dpflow_pipe_cfg(pipe);
	struct dpflow_pipe_stats s;
	json_t *o;

	dpflow_pipe_stats_get(pipe, &s);
	o = json_pack("{s:o,s:o,s:o,s:i}", "pkts", u64(s.pkts), "hits",
		      u64(s.hits), "misses", u64(s.misses), "entries",
		      (int)dpflow_pipe_entry_count(pipe));
	if (o && (cfg->monitor.meter.alg || cfg->monitor.shared_meter))
		json_object_set_new(o, "color",
				    json_pack("[o,o,o]", u64(s.color[0]),
					      u64(s.color[1]),
					      u64(s.color[2])));
	if (o && cfg->type == DPFLOW_PIPE_CT)
		json_object_set_new(
		    o, "ct",
		    json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "live",
			      u64(s.ct_live), "created", u64(s.ct_created),
			      "expired", u64(s.ct_expired), "invalid",
			      u64(s.ct_invalid), "refused", u64(s.ct_refused),
			      "replaced", u64(s.ct_replaced), "nat_exhausted",
			      u64(s.ct_nat_exhausted)));
	return o;
}

static json_t *monitor_json(const struct dpflow_monitor *m)
{
	json_t *o = json_object();

	if (!o)
		return NULL;
	if (m->counter)
		json_object_set_new(o, "counter", json_true());
	if (m->shared_counter)
		json_object_set_new(o, "shared_counter",
				    json_integer(m->shared_counter));
	if (m->meter.alg)
		json_object_set_new(o, "meter", json_true());
	if (m->shared_meter)
		json_object_set_new(o, "shared_meter",
				    json_integer(m->shared_meter));
	if (m->aging_ms)
		json_object_set_new(o, "aging_ms", json_integer(m->aging_ms));
	return o;
}

static int cmd_pipes(struct req *r)
{
	struct dpflow_ctx *ctx = r->ctl->ctx;
	json_t *a = json_array();

	if (!set(r, "pipes", a))
		return nomem(r);
	for (unsigned i = 0; i < dpflow_ctx_pipe_count(ctx); i++) {
		const struct dpflow_pipe *pipe = dpflow_ctx_pipe(ctx, i);
		const struct dpflow_pipe_cfg *c = dpflow_pipe_cfg(pipe);
		const char *root =
		    c->root ? dpflow_ctx_port_name(ctx, c->port) : NULL;
		json_t *o = json_pack(
		    "{s:s,s:s,s:o,s:i,s:i,s:o,s:i,s:o,s:o,s:o,s:o}", "name",
		    c->name, "type", dpflow_pipe_type_name(c->type), "root",
		    root ? json_string(root) : json_null(), "size",
		    (int)c->size, "entries", (int)dpflow_pipe_entry_count(pipe),
		    "match", ctl_match_json(&c->match), "action_templates",
		    (int)c->n_action_tmpls, "monitor",
		    monitor_json(&c->monitor), "fwd",
		    ctl_fwd_json(ctx, &c->fwd), "miss",
		    ctl_fwd_json(ctx, &c->miss_fwd), "stats",
		    pipe_stats_json(pipe));

		if (o &&
		    (json_object_set_new(o, "actions",
					 ctl_actions_json(ctx, c)) ||
		     (c->color_fwd.yellow_set &&
		      json_object_set_new(
			  o, "yellow",
			  ctl_fwd_json(ctx, &c->color_fwd.yellow))) ||
		     (c->color_fwd.red_set &&
		      json_object_set_new(
			  o, "red", ctl_fwd_json(ctx, &c->color_fwd.red))))) {
			json_decref(o);
			o = NULL;
		}
		if (!o || json_array_append_new(a, o))
			return nomem(r);
	}
	return 0;
}

/* The per-entry counters of a pipe that counts: [{id, slot, pkts, bytes}]
 * in slot order; keyed by id, which an update keeps. */
static json_t *entry_counters_json(const struct dpflow_pipe *pipe)
{
	json_t *a = json_array();

	for (uint32_t s = 0; a && s < dpflow_pipe_size(pipe); s++) {
		const struct dpflow_entry *e = dpflow_pipe_entry(pipe, s);
		struct dpflow_counter c = {0};

		if (!e)
			continue;
		dpflow_entry_counter(e, &c);
		if (json_array_append_new(
			a, json_pack("{s:o,s:i,s:o,s:o}", "id",
				     u64(dpflow_entry_id(e)), "slot", (int)s,
				     "pkts", u64(c.pkts), "bytes",
				     u64(c.bytes)))) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

static int cmd_counters(struct req *r)
{
	struct dpflow_ctx *ctx = r->ctl->ctx;
	uint64_t drops[DPFLOW_DROP__COUNT];
	json_t *with_entries = json_object_get(r->in, "entries");
	json_t *ports, *pipes, *dr, *shared;

	if (with_entries && !json_is_boolean(with_entries))
		return fail(r, EINVAL, "entries",
			    "'entries' must be true or false");
	ports = json_array();
	pipes = json_array();
	dr = json_object();
	shared = json_array();
	if (!set(r, "time_ns", u64(dpflow_clock_ns())) ||
	    !set(r, "ports", ports) || !set(r, "pipes", pipes) ||
	    !set(r, "drops", dr) || !set(r, "shared_counters", shared))
		return nomem(r);
	for (unsigned i = 0; i < dpflow_ctx_port_count(ctx); i++) {
		struct dpflow_port *p = dpflow_ctx_port(ctx, i);
		struct dpflow_port_stats st;
		json_t *o;

		if (!p)
			continue;
		memset(&st, 0, sizeof(st));
		dpflow_port_stats_get(p, &st);
		o = port_stats_json(&st);
		if (!o ||
		    json_object_set_new(
			o, "name", json_string(dpflow_ctx_port_name(ctx, i))) ||
		    json_array_append_new(ports, o))
			return nomem(r);
	}
	for (unsigned i = 0; i < dpflow_ctx_pipe_count(ctx); i++) {
		const struct dpflow_pipe *pipe = dpflow_ctx_pipe(ctx, i);
		json_t *o = pipe_stats_json(pipe);

		if (!o ||
		    json_object_set_new(o, "name",
					json_string(dpflow_pipe_name(pipe))) ||
		    json_array_append_new(pipes, o))
			return nomem(r);
		if (json_is_true(with_entries) &&
		    dpflow_pipe_cfg(pipe)->monitor.counter &&
		    json_object_set_new(o, "entry_counters",
					entry_counters_json(pipe)))
			return nomem(r);
	}
	dpflow_ctx_drops(ctx, drops);
	for (unsigned d = 1; d < DPFLOW_DROP__COUNT; d++)
		if (drops[d] &&
		    json_object_set_new(dr, dpflow_drop_name(d), u64(drops[d])))
			return nomem(r);
	for (uint32_t id = 1; id <= dpflow_ctx_shared_counters(ctx); id++) {
		struct dpflow_counter c = {0};

		dpflow_shared_counter_read(ctx, id, &c);
		if (json_array_append_new(
			shared,
			json_pack("{s:i,s:o,s:o}", "id", (int)id, "pkts",
				  u64(c.pkts), "bytes", u64(c.bytes))))
			return nomem(r);
	}
	return 0;
}

static int cmd_workers(struct req *r)
{
	struct dpflow_rt *rt = r->ctl->hooks.rt;
	json_t *a = json_array();
	unsigned n = rt ? dpflow_rt_workers(rt) : 0;

	if (!set(r, "workers", a))
		return nomem(r);
	for (unsigned w = 0; w < n; w++) {
		struct dpflow_worker_stats s;
		json_t *o;

		memset(&s, 0, sizeof(s));
		if (dpflow_rt_worker_stats(rt, w, &s))
			continue;
		o = json_pack("{s:i,s:i,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "id",
			      (int)w, "cpu", s.cpu, "rx_pkts", u64(s.rx_pkts),
			      "rx_bursts", u64(s.rx_bursts), "pkts",
			      u64(s.pkts), "handoff_out", u64(s.handoff_out),
			      "handoff_in", u64(s.handoff_in), "handoff_drops",
			      u64(s.handoff_drops), "idle_polls",
			      u64(s.idle_polls), "busy_ns", u64(s.busy_ns));
		if (o && (json_object_set_new(o, "handoff_waits",
					      u64(s.handoff_waits)) ||
			  json_object_set_new(o, "tx_timed", u64(s.tx_timed)) ||
			  json_object_set_new(o, "tx_timed_refused",
					      u64(s.tx_timed_refused)))) {
			json_decref(o);
			o = NULL;
		}
		if (!o || json_array_append_new(a, o))
			return nomem(r);
	}
	return 0;
}

static int cmd_dump(struct req *r)
{
	const char *format = "text";
	char *text;
	int rc = get_string(r, "format", false, &format);

	if (rc)
		return rc;
	if (strcmp(format, "text") && strcmp(format, "dot") &&
	    strcmp(format, "json"))
		return fail(r, EINVAL, "format",
			    "format '%s': expected text, dot or json", format);
	if (!strcmp(format, "json"))
		return set(r, "format", json_string(format)) &&
			       set(r, "graph", ctl_dump_json(r->ctl->ctx))
			   ? 0
			   : nomem(r);
	text = ctl_dump(r->ctl->ctx, !strcmp(format, "dot"));
	if (!text)
		return nomem(r);
	rc = set(r, "format", json_string(format)) &&
		     set(r, "text", json_string(text))
		 ? 0
		 : nomem(r);
	free(text);
	return rc;
}

/* ---- entries ------------------------------------------------------------
 */

static int cmd_entries_list(struct req *r)
{
	struct dpflow_pipe *pipe;
	uint64_t from = 0, limit = LIST_DEFAULT;
	bool counters;
	json_t *a;
	uint32_t s, size;
	int rc;

	if ((rc = get_pipe(r, &pipe)) ||
	    (rc = get_uint(r, "from", UINT32_MAX, &from)) ||
	    (rc = get_uint(r, "limit", LIST_MAX, &limit)))
		return rc;
	size = dpflow_pipe_size(pipe);
	counters = dpflow_pipe_cfg(pipe)->monitor.counter;
	a = json_array();
	if (!set(r, "pipe", json_string(dpflow_pipe_name(pipe))) ||
	    !set(r, "count", json_integer(dpflow_pipe_entry_count(pipe))) ||
	    !set(r, "entries", a))
		return nomem(r);
	for (s = (uint32_t)from; s < size; s++) {
		const struct dpflow_entry *e = dpflow_pipe_entry(pipe, s);
		json_t *o;

		if (!e)
			continue;
		if (json_array_size(a) == limit)
			break;
		o = json_pack(
		    "{s:o,s:i,s:o}", "id", u64(dpflow_entry_id(e)), "slot",
		    (int)s, "entry",
		    ctl_entry_json(r->ctl->ctx, pipe, dpflow_entry_cfg(e)));
		if (o && counters) {
			struct dpflow_counter c = {0};

			dpflow_entry_counter(e, &c);
			json_object_set_new(o, "counter",
					    json_pack("{s:o,s:o}", "pkts",
						      u64(c.pkts), "bytes",
						      u64(c.bytes)));
		}
		if (!o || json_array_append_new(a, o))
			return nomem(r);
	}
	if (s < size && !set(r, "next", json_integer(s)))
		return nomem(r);
	return 0;
}

/* The status of each queued entry of a batch, for its error. */
struct batch {
	bool failed;
	unsigned bad; /* the item at fault */
	struct dpflow_error err;
	/* entries.batch: op and item of each queued item; NULL: one op */
	const unsigned *op_of, *item_of;
};

struct batch_user {
	struct batch *b;
	unsigned item;
};

static void batch_status(struct dpflow_entry *e, int status,
			 const struct dpflow_error *err, void *user)
{
	struct batch_user *u = (struct batch_user *)user;

	(void)e;
	if (status == DPFLOW_ENTRY_ERROR && !u->b->failed) {
		u->b->failed = true;
		u->b->bad = u->item;
		if (err)
			u->b->err = *err;
	}
}

/* Drop what was queued (entries added to the queue take slots). */
static void queue_reset(struct dpflow_ctl *ctl)
{
	dpflow_queue_discard(ctl->q);
}

/* Apply the queued batch; on error say which item failed. */
static int batch_apply(struct req *r, struct batch_user *users)
{
	struct dpflow_ctl *ctl = r->ctl;
	struct batch *b = users[0].b;
	struct dpflow_error err = {0};
	int rc = dpflow_entries_process(ctl->q, batch_status, &err);

	if (rc) {
		char field[64];

		if (!b->failed)
			return fail(r, -rc, "entries", "batch refused: %s",
				    err.msg);
		if (b->op_of) {
			unsigned op = b->op_of[b->bad], it = b->item_of[b->bad];

			snprintf(field, sizeof(field),
				 "ops[%u].entries[%u]%s%s", op, it,
				 b->err.field ? "." : "",
				 b->err.field ? b->err.field : "");
			return fail(r, -rc, field, "ops[%u].entries[%u]: %s",
				    op, it, b->err.msg);
		}
		snprintf(field, sizeof(field), "entries[%u]%s%s", b->bad,
			 b->err.field ? "." : "",
			 b->err.field ? b->err.field : "");
		return fail(r, -rc, field, "entries[%u]: %s", b->bad,
			    b->err.msg);
	}
	if (ctl->hooks.after_batch) {
		memset(&err, 0, sizeof(err));
		rc = ctl->hooks.after_batch(ctl->hooks.arg, &err);
		if (rc)
			return fail(r, err.code ? err.code : EIO, err.field,
				    "batch applied, then: %s",
				    err.msg[0] ? err.msg
					       : "after_batch failed");
	}
	return 0;
}

/* An entry's text for the config parser: the item as JSON. */
static int parse_item(struct req *r, struct dpflow_pipe *pipe, json_t *item,
		      unsigned i, unsigned flags, struct dpflow_entry_cfg *e)
{
	struct dpflow_error err = {0};
	char path[32], *text, *colon;
	int rc;

	snprintf(path, sizeof(path), "entries[%u]", i);
	text = json_dumps(item, JSON_ENCODE_ANY);
	if (!text)
		return nomem(r);
	rc = dpflow_config_parse_entry(r->ctl->ctx, pipe, text, strlen(text),
				       path, flags, e, &err);
	free(text);
	if (!rc)
		return 0;
	/* "PATH.KEY: message": the field is the key path */
	fail(r, err.code, NULL, "%s", err.msg);
	colon = strstr(r->msg, ": ");
	snprintf(r->field, sizeof(r->field), "%.*s",
		 colon ? (int)(colon - r->msg) : (int)strlen(path),
		 colon ? r->msg : path);
	return -(err.code ? err.code : EINVAL);
}

static const struct dpflow_entry_cfg *cfg_at(const void *arg, size_t i)
{
	return &((const struct dpflow_entry_cfg *)arg)[i];
}

/*
 * Refuse new entries @cfgs (@n) of @pipe identical to another
 * (ctl_entry_clash()): among themselves and, with @existing (entries.add,
 * not a batch, whose removals come first), to the pipe's entries.
 */
static int add_clash(struct req *r, struct dpflow_pipe *pipe,
		     const struct dpflow_entry_cfg *cfgs, size_t n,
		     bool existing)
{
	bool prio = ctl_clash_prio(pipe);
	struct ctl_clash c;
	char field[40];
	int rc = ctl_entry_clash(pipe, cfg_at, cfgs, n, existing, &c);

	if (rc < 0)
		return nomem(r);
	if (!rc)
		return 0;
	/* where priority is no part of it, the match alone is at fault */
	snprintf(field, sizeof(field), "entries[%u]%s", c.item,
		 prio ? "" : ".match");
	if (c.other != CTL_CLASH_PIPE)
		return fail(r, EEXIST, field,
			    "entries[%u]: the same match%s as entries[%u]",
			    c.item, prio ? " and priority" : "", c.other);
	if (prio)
		return fail(r, EEXIST, field,
			    "entries[%u]: pipe '%s' has an entry with this "
			    "match and priority (slot %u)",
			    c.item, dpflow_pipe_name(pipe), c.slot);
	return fail(r, EEXIST, field,
		    "entries[%u]: pipe '%s': an entry with this match exists "
		    "(slot %u)",
		    c.item, dpflow_pipe_name(pipe), c.slot);
}

/*
 * Parse the entries of @list for @pipe, then queue their adds; users[i]
 * (their status) are set by the caller. 0, or the error with the queue
 * emptied.
 */
static int queue_add(struct req *r, struct dpflow_pipe *pipe, json_t *list,
		     struct batch_user *users, bool existing)
{
	struct dpflow_ctl *ctl = r->ctl;
	size_t n = json_array_size(list);
	struct dpflow_entry_cfg *cfgs = calloc(n ? n : 1, sizeof(*cfgs));
	int rc = 0;

	if (!cfgs)
		return nomem(r);
	/* every entry parsed before one is queued */
	for (unsigned i = 0; i < n && !rc; i++)
		rc = parse_item(r, pipe, json_array_get(list, i), i, 0,
				&cfgs[i]);
	if (!rc)
		rc = add_clash(r, pipe, cfgs, n, existing);
	for (unsigned i = 0; i < n && !rc; i++) {
		struct dpflow_error err = {0};
		char field[32];

		if (!dpflow_entry_add(ctl->q, pipe, &cfgs[i], &users[i],
				      &err)) {
			snprintf(field, sizeof(field), "entries[%u]", i);
			rc = fail(r, err.code, field, "entries[%u]: %s", i,
				  err.msg);
		}
	}
	if (rc)
		queue_reset(ctl);
	free(cfgs);
	return rc;
}

static int cmd_entries_add(struct req *r)
{
	struct dpflow_pipe *pipe;
	struct batch_user *users = NULL;
	struct batch b;
	json_t *list;
	size_t n;
	int rc;

	if ((rc = get_pipe(r, &pipe)) || (rc = get_entries(r, &list)))
		return rc;
	n = json_array_size(list);
	memset(&b, 0, sizeof(b));
	users = calloc(n ? n : 1, sizeof(*users));
	if (!users)
		return nomem(r);
	for (unsigned i = 0; i < n; i++) {
		users[i].b = &b;
		users[i].item = i;
	}
	rc = queue_add(r, pipe, list, users, true);
	if (!rc && n)
		rc = batch_apply(r, users);
	if (!rc &&
	    (!set(r, "added", json_integer((json_int_t)n)) ||
	     !set(r, "count", json_integer(dpflow_pipe_entry_count(pipe)))))
		rc = nomem(r);
	free(users);
	return rc;
}

/* An item of entries.rm resolved: the entry it names. */
struct rm_item {
	const struct dpflow_entry *e;
	uint8_t canon[CTL_CANON_MAX];
	unsigned len;
	bool by_match;
	bool prio_given;
	uint32_t prio;
};

static int cmp_entry_ptr(const void *a, const void *b)
{
	const struct dpflow_entry *x = *(const struct dpflow_entry *const *)a;
	const struct dpflow_entry *y = *(const struct dpflow_entry *const *)b;

	return x < y ? -1 : x > y;
}

/*
 * Find the entries the match items name: one pass over the pipe's slots,
 * each entry looked up among the items by its canonical match (a hash
 * table of items), so that n items cost O(size + n), not O(size * n).
 */
static int rm_find(struct req *r, struct dpflow_pipe *pipe, struct rm_item *it,
		   size_t n)
{
	size_t cap = 16, mask;
	uint32_t *tab;
	uint8_t canon[CTL_CANON_MAX];
	int rc = 0;

	while (cap < 2 * n)
		cap *= 2;
	mask = cap - 1;
	tab = malloc(cap * sizeof(*tab));
	if (!tab)
		return nomem(r);
	memset(tab, 0xff, cap * sizeof(*tab));
	for (size_t i = 0; i < n; i++) {
		size_t h;

		if (!it[i].by_match)
			continue;
		for (h = ctl_canon_hash(it[i].canon, it[i].len) & mask;
		     tab[h] != UINT32_MAX; h = (h + 1) & mask)
			;
		tab[h] = (uint32_t)i;
	}
	for (uint32_t s = 0; s < dpflow_pipe_size(pipe) && !rc; s++) {
		const struct dpflow_entry *e = dpflow_pipe_entry(pipe, s);
		const struct dpflow_entry_cfg *ec;
		unsigned len;

		if (!e)
			continue;
		ec = dpflow_entry_cfg(e);
		len = ctl_entry_canon(pipe, ec, canon);
		for (size_t h = ctl_canon_hash(canon, len) & mask;
		     tab[h] != UINT32_MAX; h = (h + 1) & mask) {
			struct rm_item *x = &it[tab[h]];
			char field[32];

			if (x->len != len || memcmp(x->canon, canon, len) ||
			    (x->prio_given && x->prio != ec->priority))
				continue;
			if (x->e) {
				snprintf(field, sizeof(field), "entries[%u]",
					 tab[h]);
				rc = x->prio_given
					 ? fail(r, EINVAL, field,
						"entries[%u] matches more "
						"than one entry of priority "
						"%u: remove by 'slot'",
						tab[h], x->prio)
					 : fail(r, EINVAL, field,
						"entries[%u] matches more "
						"than one entry: give its "
						"'priority' or remove by "
						"'slot'",
						tab[h]);
				break;
			}
			x->e = e;
		}
	}
	free(tab);
	for (size_t i = 0; i < n && !rc; i++)
		if (it[i].by_match && !it[i].e) {
			char field[40];

			snprintf(field, sizeof(field), "entries[%zu].match", i);
			rc = fail(r, ENOENT, field,
				  "entries[%zu]: pipe '%s' has no such entry",
				  i, dpflow_pipe_name(pipe));
		}
	return rc;
}

/*
 * A slot number as a request gives it: a JSON integer, or a string of
 * decimal digits (dpflowctl sends YAML scalars as strings); -1 when it
 * is neither.
 */
static long long slot_number(const json_t *v)
{
	const char *s = json_string_value(v);
	long long n = 0;

	if (json_is_integer(v))
		return json_integer_value(v) < 0 ? -1 : json_integer_value(v);
	if (!s || !*s || strlen(s) > 10)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		n = n * 10 + (*s - '0');
	}
	return n;
}

/* Item @i of entries.rm: {"slot": N} or an entry's match. */
static int rm_parse(struct req *r, struct dpflow_pipe *pipe, json_t *item,
		    unsigned i, struct rm_item *x)
{
	json_t *slot =
	    json_is_object(item) ? json_object_get(item, "slot") : NULL;
	struct dpflow_entry_cfg e;
	char field[40];
	int rc;

	if (slot) {
		long long n = slot_number(slot);

		snprintf(field, sizeof(field), "entries[%u].slot", i);
		if (json_object_size(item) != 1)
			return fail(r, EINVAL, field,
				    "entries[%u]: 'slot' goes alone", i);
		if (n < 0 || n >= dpflow_pipe_size(pipe))
			return fail(r, EINVAL, field,
				    "entries[%u].slot: expected a slot within "
				    "0..%u",
				    i, dpflow_pipe_size(pipe) - 1);
		x->e = dpflow_pipe_entry(pipe, (uint32_t)n);
		if (!x->e)
			return fail(r, ENOENT, field,
				    "entries[%u]: slot %lld of pipe '%s' is "
				    "free",
				    i, n, dpflow_pipe_name(pipe));
		return 0;
	}
	rc = parse_item(r, pipe, item, i, DPFLOW_ENTRY_PARSE_KEY, &e);
	if (rc)
		return rc;
	x->by_match = true;
	x->prio_given = json_object_get(item, "priority") != NULL;
	x->prio = e.priority;
	x->len = ctl_entry_canon(pipe, &e, x->canon);
	return 0;
}

/*
 * Resolve the items of @list (by slot or match) to entries of @pipe into
 * @it: each names one entry, no entry twice. @full: the items are whole
 * entries (entries.update), else keys.
 */
static int resolve_items(struct req *r, struct dpflow_pipe *pipe, json_t *list,
			 struct rm_item *it, struct dpflow_entry_cfg *cfgs)
{
	size_t n = json_array_size(list);
	const struct dpflow_entry **sorted = calloc(n ? n : 1, sizeof(*sorted));
	int rc = 0;

	if (!sorted)
		return nomem(r);
	for (unsigned i = 0; i < n && !rc; i++) {
		json_t *item = json_array_get(list, i);

		if (!cfgs) {
			rc = rm_parse(r, pipe, item, i, &it[i]);
			continue;
		}
		rc = parse_item(r, pipe, item, i, 0, &cfgs[i]);
		if (rc)
			break;
		it[i].by_match = true;
		it[i].prio_given = json_object_get(item, "priority") != NULL;
		it[i].prio = cfgs[i].priority;
		it[i].len = ctl_entry_canon(pipe, &cfgs[i], it[i].canon);
	}
	if (!rc)
		rc = rm_find(r, pipe, it, n);
	/* an entry named twice would be removed twice */
	for (size_t i = 0; i < n && !rc; i++)
		sorted[i] = it[i].e;
	if (!rc)
		qsort(sorted, n, sizeof(*sorted), cmp_entry_ptr);
	for (size_t i = 1; i < n && !rc; i++) {
		if (sorted[i] != sorted[i - 1])
			continue;
		for (size_t k = 0, first = n; k < n; k++) {
			char field[32];

			if (it[k].e != sorted[i])
				continue;
			if (first == n) {
				first = k;
				continue;
			}
			snprintf(field, sizeof(field), "entries[%zu]", k);
			rc = fail(r, EINVAL, field,
				  "entries[%zu] names the entry entries[%zu] "
				  "names",
				  k, first);
			break;
		}
	}
	free(sorted);
	return rc;
}

/* Queue the removal (@cfgs NULL) or update (to @cfgs) of the entries the
 * items of @list name. */
static int queue_rm_update(struct req *r, struct dpflow_pipe *pipe,
			   json_t *list, struct batch_user *users, bool update)
{
	struct dpflow_ctl *ctl = r->ctl;
	size_t n = json_array_size(list);
	struct rm_item *it = calloc(n ? n : 1, sizeof(*it));
	struct dpflow_entry_cfg *cfgs =
	    update ? calloc(n ? n : 1, sizeof(*cfgs)) : NULL;
	int rc;

	if (!it || (update && !cfgs)) {
		free(it);
		free(cfgs);
		return nomem(r);
	}
	rc = resolve_items(r, pipe, list, it, cfgs);
	for (unsigned i = 0; i < n && !rc; i++) {
		struct dpflow_entry *e = (struct dpflow_entry *)it[i].e;
		struct dpflow_error err = {0};
		char field[32];

		/* the handle is the pipe's own; changing it is what it is
		 * for */
		if (!update) {
			if (dpflow_entry_remove(ctl->q, e, &users[i]))
				rc = nomem(r); /* the queue cannot grow */
			continue;
		}
		if (!dpflow_entry_update(ctl->q, e, &cfgs[i], &users[i],
					 &err)) {
			snprintf(field, sizeof(field), "entries[%u]", i);
			rc = fail(r, err.code, field, "entries[%u]: %s", i,
				  err.msg);
		}
	}
	if (rc)
		queue_reset(ctl);
	free(cfgs);
	free(it);
	return rc;
}

static int cmd_entries_rm_update(struct req *r, bool update)
{
	struct dpflow_pipe *pipe;
	struct batch_user *users = NULL;
	struct batch b;
	json_t *list;
	size_t n;
	int rc;

	if ((rc = get_pipe(r, &pipe)) || (rc = get_entries(r, &list)))
		return rc;
	n = json_array_size(list);
	memset(&b, 0, sizeof(b));
	users = calloc(n ? n : 1, sizeof(*users));
	if (!users)
		return nomem(r);
	for (unsigned i = 0; i < n; i++) {
		users[i].b = &b;
		users[i].item = i;
	}
	rc = queue_rm_update(r, pipe, list, users, update);
	if (!rc && n)
		rc = batch_apply(r, users);
	if (!rc &&
	    (!set(r, update ? "updated" : "removed",
		  json_integer((json_int_t)n)) ||
	     !set(r, "count", json_integer(dpflow_pipe_entry_count(pipe)))))
		rc = nomem(r);
	free(users);
	return rc;
}

static int cmd_entries_rm(struct req *r)
{
	return cmd_entries_rm_update(r, false);
}

static int cmd_entries_update(struct req *r)
{
	return cmd_entries_rm_update(r, true);
}

/* One op of entries.batch: its keys, kind and pipe. */
static int batch_op(struct req *r, json_t *op, unsigned k, int *kind,
		    struct dpflow_pipe **pipe, json_t **list)
{
	static const char *const kinds[] = {"add", "rm", "update"};
	const char *key, *name;
	json_t *v, *saved = r->in;
	int rc;

	(void)k;
	if (!json_is_object(op))
		return fail(r, EINVAL, NULL, "an op is an object");
	json_object_foreach(op, key, v)
	{
		if (strcmp(key, "op") && strcmp(key, "pipe") &&
		    strcmp(key, "entries"))
			return fail(r, EINVAL, key,
				    "unknown key '%s' (op, pipe, entries)",
				    key);
	}
	v = json_object_get(op, "op");
	name = json_is_string(v) ? json_string_value(v) : "";
	*kind = -1;
	for (int i = 0; i < 3; i++)
		if (!strcmp(name, kinds[i]))
			*kind = i;
	if (*kind < 0)
		return fail(r, EINVAL, "op", "'op': add, rm or update");
	/* the op's own keys read as a request's */
	r->in = op;
	rc = get_pipe(r, pipe);
	if (!rc)
		rc = get_entries(r, list);
	r->in = saved;
	return rc;
}

/* "ops[K]." before the field and message of an error of op @k. */
static int in_op(struct req *r, unsigned k, int rc)
{
	char f[sizeof(r->field)], m[sizeof(r->msg)];

	if (!rc)
		return 0;
	snprintf(f, sizeof(f), "ops[%u]%s%.140s", k, r->field[0] ? "." : "",
		 r->field);
	snprintf(m, sizeof(m), "ops[%u]: %.300s", k, r->msg);
	memcpy(r->field, f, sizeof(f));
	memcpy(r->msg, m, sizeof(m));
	return rc;
}

/*
 * entries.batch: adds, removals and updates over several pipes, applied
 * as one batch (a packet sees every op of it or none).
 */
static int cmd_entries_batch(struct req *r)
{
	json_t *ops = json_object_get(r->in, "ops");
	struct batch_user *users = NULL;
	unsigned *op_of = NULL, *item_of = NULL;
	size_t total = 0, n_ops, at = 0;
	struct batch b;
	int rc = 0;

	if (!json_is_array(ops) || !json_array_size(ops))
		return fail(r, EINVAL, "ops",
			    "'ops' must be a non-empty list of {op, pipe, "
			    "entries}");
	n_ops = json_array_size(ops);
	for (unsigned k = 0; k < n_ops; k++) {
		struct dpflow_pipe *pipe;
		json_t *list;
		int kind;

		if ((rc = batch_op(r, json_array_get(ops, k), k, &kind, &pipe,
				   &list)))
			return in_op(r, k, rc);
		total += json_array_size(list);
	}
	if (total > DPFLOW_CTL_BATCH_MAX)
		return fail(r, E2BIG, "ops",
			    "%zu entries over the ops: at most %u a request",
			    total, DPFLOW_CTL_BATCH_MAX);
	memset(&b, 0, sizeof(b));
	users = calloc(total ? total : 1, sizeof(*users));
	op_of = calloc(total ? total : 1, sizeof(*op_of));
	item_of = calloc(total ? total : 1, sizeof(*item_of));
	if (!users || !op_of || !item_of) {
		rc = nomem(r);
		goto out;
	}
	b.op_of = op_of;
	b.item_of = item_of;
	for (unsigned k = 0; k < n_ops && !rc; k++) {
		struct dpflow_pipe *pipe;
		json_t *list;
		int kind;
		size_t n;

		batch_op(r, json_array_get(ops, k), k, &kind, &pipe, &list);
		n = json_array_size(list);
		for (size_t i = 0; i < n; i++) {
			users[at + i].b = &b;
			users[at + i].item = (unsigned)(at + i);
			op_of[at + i] = k;
			item_of[at + i] = (unsigned)i;
		}
		rc = kind == 0 ? queue_add(r, pipe, list, users + at, false)
			       : queue_rm_update(r, pipe, list, users + at,
						 kind == 2);
		rc = in_op(r, k, rc);
		at += n;
	}
	if (!rc && total)
		rc = batch_apply(r, users);
	if (!rc && (!set(r, "ops", json_integer((json_int_t)n_ops)) ||
		    !set(r, "entries", json_integer((json_int_t)total))))
		rc = nomem(r);
out:
	free(users);
	free(op_of);
	free(item_of);
	return rc;
}

/* ---- trace --------------------------------------------------------------
 */

/* ctl_trace.c does the work; its error becomes the request's. */
static int cmd_trace(struct req *r)
{
	struct dpflow_error err = {0};
	int rc = ctl_trace(r->ctl, r->in, r->out, &err);

	return rc ? fail(r, -rc, err.field, "%s", err.msg) : 0;
}

/* ---- dispatch -----------------------------------------------------------
 */

static const char *const no_keys[] = {NULL};
static const char *const counters_keys[] = {"entries", NULL};
static const char *const dump_keys[] = {"format", NULL};
static const char *const list_keys[] = {"pipe", "from", "limit", NULL};
static const char *const batch_keys[] = {"pipe", "entries", NULL};
static const char *const ops_keys[] = {"ops", NULL};
static const char *const trace_keys[] = {"port", "count", "timeout_ms", NULL};

static const struct cmd {
	const char *name;
	int (*fn)(struct req *r);
	const char *const *keys; /* allowed besides cmd and id */
} cmds[] = {
    {"ports", cmd_ports, no_keys},
    {"pipes", cmd_pipes, no_keys},
    {"counters", cmd_counters, counters_keys},
    {"workers", cmd_workers, no_keys},
    {"dump", cmd_dump, dump_keys},
    {"entries.list", cmd_entries_list, list_keys},
    {"entries.add", cmd_entries_add, batch_keys},
    {"entries.rm", cmd_entries_rm, batch_keys},
    {"entries.update", cmd_entries_update, batch_keys},
    {"entries.batch", cmd_entries_batch, ops_keys},
    {"trace", cmd_trace, trace_keys},
};

/*
 * A request "APP.VERB" that no built-in command and no application hook
 * (dpflow_ctl_hooks.request) answered belongs to an application this run
 * lacks: apps are configured as apps.APP, so say that rather than that
 * the command is unknown. 0 when @name is no such request ("entries.nope"
 * is an unknown built-in command).
 */
static int no_app(struct req *r, const char *name)
{
	const char *dot = strchr(name, '.');
	int len = dot ? (int)(dot - name) : 0;

	if (!len)
		return 0;
	for (unsigned i = 0; i < DPFLOW_ARRAY_SIZE(cmds); i++)
		if (!strncmp(cmds[i].name, name, (size_t)len + 1))
			return 0;
	return fail(r, ENOENT, "cmd",
		    "no %.*s app in this run (apps.%.*s in the config)", len,
		    name, len, name);
}

static int check_keys(struct req *r, const struct cmd *c)
{
	const char *key;
	json_t *v;

	json_object_foreach(r->in, key, v)
	{
		bool ok = !strcmp(key, "cmd") || !strcmp(key, "id");

		for (unsigned i = 0; c->keys[i] && !ok; i++)
			ok = !strcmp(c->keys[i], key);
		if (!ok)
			return fail(r, EINVAL, key, "%s: unknown key '%s'",
				    c->name, key);
	}
	return 0;
}

static int dispatch(struct req *r, const char *req, size_t len)
{
	json_error_t je;
	const char *name = NULL;
	const struct cmd *c = NULL;
	json_t *id;
	int rc;

	if (len > DPFLOW_CTL_REQUEST_MAX)
		return fail(r, E2BIG, NULL,
			    "request too large (%zu bytes, at "
			    "most %u)",
			    len, DPFLOW_CTL_REQUEST_MAX);
	r->in =
	    json_loadb(req, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
	if (!r->in)
		return fail(r, EINVAL, NULL, "malformed JSON: %s (column %d)",
			    je.text, je.column);
	if (!json_is_object(r->in))
		return fail(r, EINVAL, NULL, "a request is a JSON object");
	id = json_object_get(r->in, "id");
	if (id && !set(r, "id", json_incref(id)))
		return nomem(r);
	if ((rc = get_string(r, "cmd", true, &name)))
		return rc;
	for (unsigned i = 0; i < DPFLOW_ARRAY_SIZE(cmds) && !c; i++)
		if (!strcmp(cmds[i].name, name))
			c = &cmds[i];
	if (!c && r->ctl->hooks.request) {
		r->app_reply = r->ctl->hooks.request(r->ctl->hooks.request_arg,
						     name, req, len);
		if (r->app_reply)
			return 0;
	}
	if (!c && (rc = no_app(r, name)))
		return rc;
	if (!c)
		return fail(
		    r, EINVAL, "cmd",
		    "unknown cmd '%s' (ports, pipes, counters, workers, "
		    "dump, entries.list, entries.add, entries.rm, "
		    "entries.update, entries.batch, trace)",
		    name);
	if ((rc = check_keys(r, c)))
		return rc;
	if (!r->ctl->q) {
		r->ctl->q = dpflow_queue_create(r->ctl->ctx, NULL);
		if (!r->ctl->q)
			return nomem(r);
	}
	return c->fn(r);
}

/* A JSON string of @s; bytes that are not valid UTF-8 (a message cut
 * short in a character, say) become '?'. */
static json_t *text_json(const char *s)
{
	json_t *v = json_string(s);
	char *copy;

	if (v || !s)
		return v;
	copy = strdup(s);
	if (!copy)
		return NULL;
	for (char *p = copy; *p; p++)
		if ((unsigned char)*p >= 0x80)
			*p = '?';
	v = json_string(copy);
	free(copy);
	return v;
}

char *dpflow_ctl_handle(struct dpflow_ctl *ctl, const char *req, size_t len)
{
	struct req r;
	char *text;
	int rc;

	memset(&r, 0, sizeof(r));
	r.ctl = ctl;
	r.out = json_pack("{s:b}", "ok", 1);
	if (!r.out)
		return NULL;
	rc = dispatch(&r, req, len);
	if (!rc && r.app_reply) {
		json_decref(r.out);
		json_decref(r.in);
		return r.app_reply;
	}
	if (rc) {
		/* an error reply keeps only the request's id */
		json_t *id = json_incref(json_object_get(r.out, "id"));

		json_object_clear(r.out);
		json_object_set_new(r.out, "ok", json_false());
		if (id)
			json_object_set_new(r.out, "id", id);
		json_object_set_new(r.out, "error", text_json(r.msg));
		if (r.field[0])
			json_object_set_new(r.out, "field", text_json(r.field));
	}
	text = json_dumps(r.out, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(r.out);
	json_decref(r.in);
	return text;
}
