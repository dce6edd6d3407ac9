/*
 * The control socket: JSON requests over a Unix stream socket, one request
 * object per line, one reply object per line (docs/control.md has the
 * schema). dpflowctl is its client.
 *
 * The socket file is created with mode 0600 and only root or the socket's
 * owner may talk (SO_PEERCRED is checked on accept). A request is handled
 * whole or not at all: a malformed, oversized or unknown request gets
 * {"ok":false,...} and changes nothing, and an entry batch goes through
 * dpflow_entries_process(), which applies all of it or none.
 *
 * Threads: every function here is for the context's control thread (the
 * thread that built the context; not an RCU reader). Serving never blocks
 * on a client: sockets are non-blocking, each connection has its own
 * buffers, and a request larger than DPFLOW_CTL_REQUEST_MAX is refused.
 * One request waits on purpose: `trace` holds the control thread until
 * the data threads' next burst is traced, at most its timeout_ms
 * (DPFLOW_CTL_TRACE_TIMEOUT_MAX).
 */
#ifndef DPFLOW_CTL_H
#define DPFLOW_CTL_H

#include <stddef.h>

#include "dpflow/error.h"
#include "dpflow/flow.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where `dpflow run --control` listens and dpflowctl connects by default. */
#define DPFLOW_CTL_SOCKET_DEFAULT "/run/dpflow/dpflow.sock"
/* Largest request line, newline included. */
#define DPFLOW_CTL_REQUEST_MAX (16u << 20)
/* Most entries one entries.add / entries.rm request may carry. */
#define DPFLOW_CTL_BATCH_MAX 100000u
/* Client connections served at once; more are refused. */
#define DPFLOW_CTL_CONNS_MAX 16
/* The longest a `trace` request may wait for packets (its timeout_ms). */
#define DPFLOW_CTL_TRACE_TIMEOUT_MAX 10000u

struct dpflow_ctl;
struct dpflow_rt;

struct dpflow_ctl_hooks { /* all optional */
	/* worker stats for a "workers" request; NULL: no workers */
	struct dpflow_rt *rt;
	/* called after an entry batch was applied (e.g. to publish it to a
	 * GPU); nonzero: the client gets @err as the reply (the batch stays
	 * applied) */
	int (*after_batch)(void *arg, struct dpflow_error *err);
	void *arg;
	/* an application's commands (such as "l4lb.services"): called with
	 * the request's cmd and its whole text (valid JSON, an object)
	 * when cmd is not one of dpflow's; returns the reply, a malloc'ed
	 * JSON object on one line ({"ok": ..., with the request's "id"
	 * copied}), or NULL when @cmd is not the application's either
	 * (the client then gets "unknown cmd") */
	char *(*request)(void *arg, const char *cmd, const char *req,
			 size_t len);
	void *request_arg;
};

/*
 * A control endpoint for @ctx listening on Unix socket @path (a stale
 * socket file there is replaced; a live one is an error, field "path";
 * missing parent directories are created, mode 0700). @path NULL:
 * no socket, for dpflow_ctl_handle() alone. @hooks may be NULL; it is
 * copied. Returns NULL + @err on error.
 */
struct dpflow_ctl *dpflow_ctl_open(struct dpflow_ctx *ctx, const char *path,
				   const struct dpflow_ctl_hooks *hooks,
				   struct dpflow_error *err);

/*
 * Check, before anything else starts, that a control socket can be served
 * at @path: the path fits a socket address, missing parent directories
 * are made (mode 0700), and nothing is there but a stale socket (one
 * that no server answers; dpflow_ctl_open() replaces it). A live socket
 * (another instance) or another kind of file is refused. 0, or a
 * negative errno with @err (field "path").
 */
int dpflow_ctl_check_path(const char *path, struct dpflow_error *err);

/* A descriptor that polls readable when serving has work (an epoll set
 * of the socket and its connections); -1 without a socket. */
int dpflow_ctl_fd(const struct dpflow_ctl *ctl);

/*
 * Accept connections, read requests, handle them and write replies, for
 * what is pending, waiting up to @timeout_ms (0: not at all; -1: until
 * something happens) for the first event. Returns the number of requests
 * answered, or -errno (-ENOTCONN without a socket).
 */
int dpflow_ctl_serve(struct dpflow_ctl *ctl, int timeout_ms);

/* Close every connection, remove the socket file, free. NULL ok. */
void dpflow_ctl_close(struct dpflow_ctl *ctl);

/*
 * Handle request @req (@len bytes, one JSON object; a trailing newline is
 * fine) and return the reply: a malloc'ed, NUL-terminated JSON object on
 * one line, without the newline; the caller frees it. NULL only when out
 * of memory.
 */
char *dpflow_ctl_handle(struct dpflow_ctl *ctl, const char *req, size_t len);

struct json_t; /* jansson's */
struct dpflow_trace;

/*
 * Packet trace @t (dpflow/trace.h) of @ctx as the JSON object the `trace`
 * request replies with and `dpflow trace --json` prints: {"port", "steps":
 * [{"pipe", "type", "match", ...}], "verdict"}, ports, pipes and drop
 * reasons by name (docs/trace.md). Returns a new reference (the caller
 * owns it), NULL when out of memory. It reads @ctx's names only: any
 * thread that may use @ctx.
 */
struct json_t *dpflow_ctl_trace_json(struct dpflow_ctx *ctx,
				     const struct dpflow_trace *t);

#ifdef __cplusplus
}
#endif

#endif /* DPFLOW_CTL_H */
