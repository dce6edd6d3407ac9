/*
 * Packet traces over the control socket: the `trace` request (a live
 * run's counterpart of `dpflow trace`), and the JSON form of a trace
 * (dpflow_ctl_trace_json) that both it and `dpflow trace --json` print,
 * so that the two read alike (docs/trace.md, docs/control.md).
 *
 * The request asks the data threads, through dpflow_ctx_trace_next(),
 * to trace the first packets of the next burst one of them receives, and
 * waits for them on the control thread: serving (other clients, aging,
 * the RSS queues, metrics) pauses for that long, at most the request's
 * timeout_ms (DPFLOW_CTL_TRACE_TIMEOUT_MAX, 10 s). A run without worker
 * threads (dpflow_ctl_hooks.rt NULL: the GPU target, where the control
 * thread receives too) is refused, since nothing else would ever take
 * the request. Control thread only.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/meta.h"
#include "dpflow/trace.h"

#include "ctl/ctl_internal.h"

/* timeout_ms by default */
#define TRACE_TIMEOUT_DEFAULT 1000u

static const char *pipe_name(struct dpflow_ctx *ctx, unsigned id)
{
	struct dpflow_pipe *p = dpflow_ctx_pipe(ctx, id);

	return p ? dpflow_pipe_name(p) : NULL;
}

static const char *pipe_type(struct dpflow_ctx *ctx, unsigned id)
{
	struct dpflow_pipe *p = dpflow_ctx_pipe(ctx, id);

	return p ? dpflow_pipe_type_name(dpflow_pipe_cfg(p)->type) : NULL;
}

static const char *color_name(unsigned c)
{
	return c == DPFLOW_COLOR_RED	  ? "red"
	       : c == DPFLOW_COLOR_YELLOW ? "yellow"
					  : "green";
}

/* Set member @key of @o (a name NULL: "?"); nonzero when out of memory. */
static int put_str(json_t *o, const char *key, const char *s)
{
	return json_object_set_new(o, key, json_string(s ? s : "?"));
}

static int put_int(json_t *o, const char *key, json_int_t v)
{
	return json_object_set_new(o, key, json_integer(v));
}

/* Add "to" and the target of @to / @value to @o: "port", "next" (a pipe),
 * "queue" or "reason" (a drop); a handler has no name in the trace. */
static int put_target(struct dpflow_ctx *ctx, json_t *o, unsigned to,
		      uint16_t value)
{
	if (put_str(o, "to", dpflow_trace_to_name(to)))
		return -1;
	switch (to) {
	case DPFLOW_TRACE_TO_PORT:
		return put_str(o, "port", dpflow_ctx_port_name(ctx, value));
	case DPFLOW_TRACE_TO_PIPE:
		return put_str(o, "next", pipe_name(ctx, value));
	case DPFLOW_TRACE_TO_RSS:
		return put_int(o, "queue", value);
	case DPFLOW_TRACE_TO_DROP:
		return put_str(o, "reason", dpflow_drop_name(value));
	default:
		return 0;
	}
}

static json_t *step_json(struct dpflow_ctx *ctx,
			 const struct dpflow_trace_step *st)
{
	json_t *o = json_object();
	bool conn = st->match == DPFLOW_TRACE_CT_TRACKED ||
		    st->match == DPFLOW_TRACE_CT_INVALID;
	bool bad = !o || put_str(o, "pipe", pipe_name(ctx, st->pipe)) ||
		   put_str(o, "type", pipe_type(ctx, st->pipe)) ||
		   put_str(o, "match", dpflow_trace_match_name(st->match));

	if (!bad && st->match == DPFLOW_TRACE_HIT)
		bad = put_int(o, "entry", (json_int_t)st->entry_id) ||
		      put_int(o, "slot", st->entry);
	if (!bad && conn)
		bad = put_int(o, "connection", st->entry) ||
		      put_str(o, "ct_state",
			      dpflow_trace_ct_state_name(st->ct_state)) ||
		      put_int(o, "ct_flags", st->ct_flags);
	if (!bad && st->match == DPFLOW_TRACE_CT_NOCONN)
		bad = put_str(o, "ct_drop",
			      dpflow_trace_ct_drop_name(st->ct_drop));
	if (!bad)
		bad = put_str(o, "color", color_name(st->color)) ||
		      json_object_set_new(o, "actions",
					  json_boolean(st->actions)) ||
		      put_target(ctx, o, st->to, st->value);
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *dpflow_ctl_trace_json(struct dpflow_ctx *ctx,
			      const struct dpflow_trace *t)
{
	json_t *o = json_object();
	json_t *steps = json_array();
	json_t *verdict = json_object();
	unsigned n =
	    t->n_steps < DPFLOW_PIPES_MAX ? t->n_steps : DPFLOW_PIPES_MAX;
	bool bad = !o || !steps || !verdict;

	for (unsigned i = 0; !bad && i < n; i++)
		bad = json_array_append_new(steps, step_json(ctx, &t->step[i]));
	bad = bad || put_target(ctx, verdict, t->to, t->value) ||
	      put_str(o, "port", dpflow_ctx_port_name(ctx, t->port)) ||
	      json_object_set(o, "steps", steps) ||
	      json_object_set(o, "verdict", verdict);
	json_decref(steps);
	json_decref(verdict);
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* Integer member @key of @in within @lo..@hi, else @def. */
static int get_range(json_t *in, const char *key, unsigned lo, unsigned hi,
		     unsigned def, unsigned *out, struct dpflow_error *err)
{
	json_t *v = json_object_get(in, key);

	*out = def;
	if (!v)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < (json_int_t)lo ||
	    json_integer_value(v) > (json_int_t)hi)
		return dpflow_error_set(err, EINVAL, key,
					"'%s' must be an integer within %u..%u",
					key, lo, hi);
	*out = (unsigned)json_integer_value(v);
	return 0;
}

/* Member "port" of @in: a port's id, or -1 (any port) when absent. */
static int get_port(struct dpflow_ctx *ctx, json_t *in, int *port,
		    struct dpflow_error *err)
{
	json_t *v = json_object_get(in, "port");

	*port = -1;
	if (!v)
		return 0;
	if (!json_is_string(v))
		return dpflow_error_set(err, EINVAL, "port",
					"'port' must be a string");
	*port = dpflow_ctx_port_find(ctx, json_string_value(v));
	if (*port < 0)
		return dpflow_error_set(err, ENOENT, "port",
					"no port named '%s'",
					json_string_value(v));
	return 0;
}

int ctl_trace(struct dpflow_ctl *ctl, json_t *in, json_t *out,
	      struct dpflow_error *err)
{
	struct dpflow_trace *t = NULL;
	json_t *list = NULL;
	unsigned count, timeout_ms;
	int port, got, rc;
	bool bad;

	rc = get_port(ctl->ctx, in, &port, err);
	if (!rc)
		rc = get_range(in, "count", 1, DPFLOW_TRACE_PKTS_MAX, 1, &count,
			       err);
	if (!rc)
		rc =
		    get_range(in, "timeout_ms", 1, DPFLOW_CTL_TRACE_TIMEOUT_MAX,
			      TRACE_TIMEOUT_DEFAULT, &timeout_ms, err);
	if (rc)
		return rc;
	if (!ctl->hooks.rt)
		return dpflow_error_set(err, ENOTSUP, "cmd",
					"trace: this run has no worker threads "
					"(a live trace needs the CPU target's "
					"workers)");
	/* a trace is over 1 KiB: on the heap, not the control stack */
	t = calloc(count, sizeof(*t));
	list = json_array();
	if (!t || !list) {
		rc = dpflow_error_set(err, ENOMEM, NULL, "out of memory");
		goto out;
	}
	got = dpflow_ctx_trace_next(ctl->ctx, port, count, timeout_ms, t);
	if (got < 0) {
		rc = dpflow_error_set(err, -got, "cmd", "trace: %s",
				      got == -EBUSY ? "another trace request "
						      "is in flight; try again"
						    : strerror(-got));
		goto out;
	}
	bad = false;
	for (int i = 0; !bad && i < got; i++)
		bad = json_array_append_new(
		    list, dpflow_ctl_trace_json(ctl->ctx, &t[i]));
	bad = bad || json_object_set(out, "traces", list) ||
	      json_object_set_new(out, "timeout", json_boolean(!got));
	if (bad)
		rc = dpflow_error_set(err, ENOMEM, NULL, "out of memory");
out:
	json_decref(list);
	free(t);
	return rc;
}
