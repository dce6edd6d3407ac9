/*
 * `dpflow trace CONFIG --pcap FILE [--index N]`: load a config as `dpflow
 * validate` does (no port opened), take packet N of a capture, run it
 * through the pipes of the port it would arrive on with tracing on
 * (dpflow/trace.h), and print its way: each pipe, the entry hit or the
 * miss (CT: the connection and its state), the meter's colour, whether
 * the entry's actions ran, where the forwarding sent it, and the verdict,
 * with the frame as it would leave. The analogue of `ovs-appctl
 * ofproto/trace`. Nothing is sent: what the pipes transmit is caught by a
 * transmit hook. The trace is printed from its JSON form
 * (dpflow_ctl_trace_json(), tools/lib/trace_text.c), as `dpflowctl trace`
 * prints a live one. The format is in docs/trace.md.
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "dpflow/config.h"
#include "dpflow/ctl.h"
#include "dpflow/dpflow.h"
#include "dpflow/trace.h"

#include "cmds.h"
#include "trace_text.h"

#define TRACE_POOL_SLOTS 64
#define TRACE_DATA_ROOM	 16384
#define TRACE_OUT_MAX	 16 /* copies caught (mirrors included) */

struct caught {
	uint16_t port;
	uint16_t len;
	uint8_t *frame;
};

struct trace_run {
	unsigned n_out;
	struct caught out[TRACE_OUT_MAX];
};

/* The transmit hook: keep a copy of each frame sent, send nothing. */
static uint16_t catch_tx(void *arg, uint16_t port, struct dpflow_pool *pool,
			 uint32_t *idx, uint16_t n)
{
	struct trace_run *r = arg;

	for (uint16_t i = 0; i < n; i++) {
		const struct dpflow_pkt_meta *m =
		    dpflow_pool_meta(pool, idx[i]);
		struct caught *c;

		if (r->n_out == TRACE_OUT_MAX)
			break;
		c = &r->out[r->n_out];
		c->frame = malloc(m->data_len ? m->data_len : 1);
		if (!c->frame)
			break;
		memcpy(c->frame, dpflow_pkt_data(pool, idx[i]), m->data_len);
		c->port = port;
		c->len = m->data_len;
		r->n_out++;
	}
	dpflow_pool_free_bulk(pool, idx, n);
	return 0;
}

/* The `count` handler of a run: here it only frees. */
static void count_handler(void *arg, struct dpflow_pool *pool,
			  const uint32_t *idx, uint16_t n)
{
	(void)arg;
	dpflow_pool_free_bulk(pool, idx, n);
}

/* Read packet @index of @path into a slot of @pool; 0, 1 when the file
 * has no such packet or the port dropped it (*@why says which). */
static int read_packet(struct dpflow_pool *pool, const char *path,
		       unsigned long index, uint32_t *slot, const char **why,
		       struct dpflow_error *err)
{
	struct dpflow_port_stats before = {0}, after;
	struct dpflow_port *port;
	char uri[4096];
	unsigned long i = 0;
	int rc = 1;

	snprintf(uri, sizeof(uri), "pcap:rx=%s", path);
	port = dpflow_port_open(pool, uri, err);
	if (!port)
		return -1;
	*why = "the capture has fewer packets";
	for (;;) {
		uint16_t n = dpflow_port_rx_burst(port, 0, slot, 1);

		dpflow_port_stats_get(port, &after);
		if (n == 0 && (after.rx_oversize != before.rx_oversize ||
			       after.rx_skipped != before.rx_skipped)) {
			if (i++ == index) {
				*why = after.rx_oversize != before.rx_oversize
					   ? "the port drops it: port_oversize"
					   : "the port drops it: "
					     "port_unsupported";
				break;
			}
		} else if (n == 0) {
			if (dpflow_port_rx_done(port))
				break;
			continue;
		} else if (i++ == index) {
			rc = 0;
			break;
		} else {
			dpflow_pool_free_bulk(pool, slot, 1);
		}
		before = after;
	}
	if (rc && dpflow_port_finish(port, err) < 0)
		rc = -1;
	dpflow_port_close(port);
	return rc;
}

/* The port the packet arrives on: @name, or the first with a root pipe. */
static int root_port(struct dpflow_ctx *ctx, const char *name,
		     struct dpflow_error *err)
{
	unsigned n_pipes = dpflow_ctx_pipe_count(ctx);

	if (name) {
		int p = dpflow_ctx_port_find(ctx, name);

		if (p < 0)
			return dpflow_error_set(err, ENOENT, "port",
						"no port '%s' in the config",
						name);
		return p;
	}
	for (unsigned i = 0; i < n_pipes; i++) {
		const struct dpflow_pipe_cfg *c =
		    dpflow_pipe_cfg(dpflow_ctx_pipe(ctx, i));

		if (c->root)
			return c->port;
	}
	return dpflow_error_set(err, ENOENT, "pipes",
				"no pipe of the config is a port's root");
}

/* The frames caught, as the JSON "out" list: [{port, len, frame}]. */
static json_t *out_json(struct dpflow_ctx *ctx, const struct trace_run *r)
{
	json_t *a = json_array();

	for (unsigned i = 0; a && i < r->n_out; i++) {
		char *hex = malloc(2u * r->out[i].len + 1);
		json_t *o = NULL;

		for (unsigned b = 0; hex && b < r->out[i].len; b++)
			snprintf(hex + 2 * b, 3, "%02x", r->out[i].frame[b]);
		if (hex) {
			hex[2u * r->out[i].len] = 0;
			o = json_pack("{s:s,s:i,s:s}", "port",
				      dpflow_ctx_port_name(ctx, r->out[i].port),
				      "len", (int)r->out[i].len, "frame", hex);
		}
		free(hex);
		if (json_array_append_new(a, o)) {
			json_decref(a);
			a = NULL;
		}
	}
	return a;
}

/*
 * The trace as one JSON object (docs/trace.md): the packet's "index" and
 * "len", the trace as the control socket's `trace` request gives it
 * (dpflow_ctl_trace_json), and the frames out. NULL: out of memory.
 */
static json_t *trace_doc(struct dpflow_ctx *ctx, const struct dpflow_trace *t,
			 unsigned long index, unsigned len,
			 const struct trace_run *r)
{
	json_t *doc =
	    json_pack("{s:I,s:i}", "index", (json_int_t)index, "len", (int)len);
	json_t *trace = dpflow_ctl_trace_json(ctx, t);

	if (!doc || !trace || json_object_update(doc, trace) ||
	    json_object_set_new(doc, "out", out_json(ctx, r))) {
		json_decref(doc);
		doc = NULL;
	}
	json_decref(trace);
	return doc;
}

/* Print the trace as text or JSON; 0, or -1 when out of memory. */
static int print_trace(struct dpflow_ctx *ctx, const struct dpflow_trace *t,
		       unsigned long index, unsigned len,
		       const struct trace_run *r, bool json)
{
	json_t *doc = trace_doc(ctx, t, index, len, r);
	char *text;
	size_t i;
	json_t *o;

	if (!doc)
		return -1;
	if (json) {
		text = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
		if (text)
			printf("%s\n", text);
		free(text);
		json_decref(doc);
		return text ? 0 : -1;
	}
	printf("packet %lu: %u bytes, received on port '%s'\n", index, len,
	       dpflow_ctx_port_name(ctx, t->port));
	trace_text(stdout, doc);
	json_array_foreach(json_object_get(doc, "out"), i, o)
	{
		printf("out port '%s': %lld bytes\n  %s\n",
		       json_string_value(json_object_get(o, "port")),
		       json_integer_value(json_object_get(o, "len")),
		       json_string_value(json_object_get(o, "frame")));
	}
	json_decref(doc);
	return 0;
}

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: dpflow trace CONFIG.yaml --pcap FILE [--index N]\n"
	    "                    [--port NAME] [--json]\n"
	    "\n"
	    "Load CONFIG as `dpflow validate` does (no port opened), take\n"
	    "packet N (0-based, as `dpflow inspect` numbers them) of the\n"
	    "capture FILE, run it through the pipes of the port it arrives\n"
	    "on, and print its way: each pipe with the entry hit (by id, as\n"
	    "`dpflowctl entries list` shows it) or the miss (CT pipes: the\n"
	    "connection and its state), the meter's colour, whether the\n"
	    "entry's actions ran and where the pipe sent it; then the\n"
	    "verdict, and each frame as it would leave (hex). Nothing is\n"
	    "sent. Connection tracking and meters start empty: the packet\n"
	    "is traced as the first one of a fresh run.\n"
	    "\n"
	    "  --pcap FILE   the capture to take the packet from\n"
	    "  --index N     which packet (default 0)\n"
	    "  --port NAME   the port it arrives on (default: the first port\n"
	    "                that has a root pipe)\n"
	    "  --json        one JSON object (docs/trace.md)\n"
	    "  -h, --help    this text\n"
	    "\n"
	    "Exit status: 0 traced, 1 the config, the capture or the packet\n"
	    "could not be had, 2 usage.\n");
}

int cmd_trace(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"pcap", required_argument, NULL, 'p'},
	    {"index", required_argument, NULL, 'i'},
	    {"port", required_argument, NULL, 'o'},
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct dpflow_handler_def handlers[] = {
	    {"count", count_handler, NULL},
	};
	struct dpflow_config_opts copts = {0};
	struct dpflow_error err = {0};
	struct trace_run run = {0};
	struct dpflow_trace *t = NULL;
	struct dpflow_ctx *ctx = NULL;
	const char *pcap = NULL, *port_name = NULL, *why = NULL;
	unsigned long index = 0;
	bool json = false;
	uint32_t slot;
	unsigned len;
	int c, port, rc = 1;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			pcap = optarg;
			break;
		case 'i':
			if (opt_count("trace", "index", optarg, 0, 0xffffffffUL,
				      &index))
				return 2;
			break;
		case 'o':
			port_name = optarg;
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc - 1 || !pcap) {
		if (!pcap && optind == argc - 1)
			fprintf(stderr,
				"dpflow trace: --pcap FILE is needed\n");
		usage(stderr);
		return 2;
	}
	copts.handlers = handlers;
	copts.n_handlers = 1;
	copts.check_only = true;
	copts.pool_slots = TRACE_POOL_SLOTS;
	copts.data_room = TRACE_DATA_ROOM;
	ctx = dpflow_config_load(argv[optind], &copts, &err);
	if (!ctx)
		goto fail;
	port = root_port(ctx, port_name, &err);
	if (port < 0)
		goto fail;
	rc = read_packet(dpflow_ctx_pool(ctx), pcap, index, &slot, &why, &err);
	if (rc < 0) {
		rc = 1;
		goto fail;
	}
	if (rc) {
		fprintf(stderr, "dpflow trace: %s: no packet %lu: %s\n", pcap,
			index, why);
		goto out;
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		dpflow_error_set(&err, ENOMEM, NULL, "out of memory");
		rc = 1;
		goto fail;
	}
	len = dpflow_pool_meta(dpflow_ctx_pool(ctx), slot)->data_len;
	dpflow_ctx_thread_online(ctx);
	dpflow_ctx_thread_tx_hook(ctx, catch_tx, &run);
	dpflow_ctx_thread_trace(ctx, t, 1);
	dpflow_ctx_process_burst(ctx, (uint16_t)port, &slot, 1);
	dpflow_ctx_thread_offline(ctx);
	if (print_trace(ctx, t, index, len, &run, json)) {
		dpflow_error_set(&err, ENOMEM, NULL, "out of memory");
		goto fail;
	}
	rc = fflush(stdout) ? 1 : 0;
	goto out;
fail:
	rc = 1;
	fprintf(stderr, "dpflow trace: %s\n", err.msg);
out:
	for (unsigned i = 0; i < run.n_out; i++)
		free(run.out[i].frame);
	free(t);
	dpflow_ctx_destroy(ctx);
	return rc;
}
