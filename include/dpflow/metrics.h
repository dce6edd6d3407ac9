/*
 * Prometheus metrics over HTTP (libmicrohttpd).
 *
 * GET /metrics answers the text exposition format (version 0.0.4) with the
 * counters of a context and, when given, of its runtime's workers:
 *
 *   dpflow_port_{rx,tx}_{packets,bytes}_total{port}   and the port's drop
 *   and error counters; dpflow_pipe_{packets,hits,misses}_total{pipe},
 *   dpflow_pipe_entries{pipe}; dpflow_entry_{packets,bytes}_total{pipe,
 *   entry} for pipes with counters (entry = slot); dpflow_drops_total{
 *   reason}; dpflow_worker_*{worker} (received, run, handoffs, busy time).
 *
 * Threads: the server has no thread of its own. The control thread calls
 * dpflow_metrics_serve() in its loop (it does not block), so the scrape
 * reads entries on the thread that changes them; the data-path counters
 * it reads are atomic words. The listening address is loopback unless the
 * caller gives another.
 */
#ifndef DPFLOW_METRICS_H
#define DPFLOW_METRICS_H

#include <stddef.h>
#include <stdio.h>

#include "dpflow/error.h"
#include "dpflow/flow.h"
#include "dpflow/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DPFLOW_METRICS_ADDR_DEFAULT "127.0.0.1:9464"

struct dpflow_metrics;

/*
 * Listen on @addr ("IPv4:PORT" or "[IPv6]:PORT"; port 0: any free port,
 * see dpflow_metrics_port()). @rt may be NULL. NULL + @err (field "addr")
 * on a bad address or a failed bind.
 */
struct dpflow_metrics *dpflow_metrics_open(struct dpflow_ctx *ctx,
					   struct dpflow_rt *rt,
					   const char *addr,
					   struct dpflow_error *err);

/* Answer what is pending, without blocking. Control thread. */
int dpflow_metrics_serve(struct dpflow_metrics *m);

/* The port it listens on. */
unsigned dpflow_metrics_port(const struct dpflow_metrics *m);

/* Stop listening and free. NULL ok. */
void dpflow_metrics_close(struct dpflow_metrics *m);

/*
 * An application's metrics: each scrape, after dpflow's own, calls
 * @render(@arg, f) on the control thread to append lines in the text
 * format (HELP, TYPE and samples). NULL @render: none.
 */
void dpflow_metrics_app(struct dpflow_metrics *m,
			void (*render)(void *arg, FILE *f), void *arg);

/*
 * For @render functions: "# HELP @name @help" and "# TYPE @name @type"
 * lines, and a label value with \, " and newline escaped as the text
 * format asks (\\, \" and \n).
 */
void dpflow_metrics_put_help(FILE *f, const char *name, const char *type,
			     const char *help);
void dpflow_metrics_put_label(FILE *f, const char *value);

/* The exposition text of @ctx (and @rt, may be NULL), malloc'ed and
 * NUL-terminated; NULL when out of memory. Control thread. */
char *dpflow_metrics_render(struct dpflow_ctx *ctx, struct dpflow_rt *rt,
			    size_t *len);

#ifdef __cplusplus
}
#endif

#endif /* DPFLOW_METRICS_H */
