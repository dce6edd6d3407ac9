/*
 * `dpflow trace CONFIG --pcap FILE [--index N]`: load a config as `dpflow
 * validate` does (no port opened), take packet N of a capture, run it
 * through the pipes of the port it would arrive on with tracing on
 * (dpflow/trace.h), and print its way: each pipe, the entry hit or the
 * miss (CT: the connection and its state), the meter's colour, whether
 * the entry's actions ran, where the forwarding sent it, and the verdict,
 * with the frame as it would leave. The analogue of `ovs-appctl
 * ofproto/trace`. Nothing is sent: what the pipes transmit is caught by a
 * transmit hook. The format is in docs/trace.md.
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/config.h"
#include "dpflow/dpflow.h"
#include "dpflow/trace.h"

#include "cmds.h"

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

static const char *color_name(unsigned c)
{
	return c == DPFLOW_COLOR_RED	  ? "red"
	       : c == DPFLOW_COLOR_YELLOW ? "yellow"
					  : "green";
}

/* Where @to / @value points, in words, into @buf. */
static const char *target_text(struct dpflow_ctx *ctx, unsigned to,
			       uint16_t value, char *buf, size_t len)
{
	switch (to) {
	case DPFLOW_TRACE_TO_PORT:
		snprintf(buf, len, "port '%s'",
			 dpflow_ctx_port_name(ctx, value));
		break;
	case DPFLOW_TRACE_TO_PIPE:
		snprintf(buf, len, "pipe '%s'",
			 dpflow_pipe_name(dpflow_ctx_pipe(ctx, value)));
		break;
	case DPFLOW_TRACE_TO_RSS:
		snprintf(buf, len, "rss queue %u", value);
		break;
	case DPFLOW_TRACE_TO_HANDLER:
		snprintf(buf, len, "a software handler");
		break;
	default:
		snprintf(buf, len, "drop (%s)", dpflow_drop_name(value));
		break;
	}
	return buf;
}

static void print_text(struct dpflow_ctx *ctx, const struct dpflow_trace *t,
		       unsigned long index, unsigned len,
		       const struct trace_run *r)
{
	char where[128];

	printf("packet %lu: %u bytes, received on port '%s'\n", index, len,
	       dpflow_ctx_port_name(ctx, t->port));
	for (unsigned i = 0; i < t->n_steps; i++) {
		const struct dpflow_trace_step *st = &t->step[i];
		struct dpflow_pipe *p = dpflow_ctx_pipe(ctx, st->pipe);

		printf("  pipe '%s' (%s): %s", dpflow_pipe_name(p),
		       dpflow_pipe_type_name(dpflow_pipe_cfg(p)->type),
		       dpflow_trace_match_name(st->match));
		if (st->match == DPFLOW_TRACE_HIT)
			printf(" entry %lu", (unsigned long)st->entry_id);
		if (st->match == DPFLOW_TRACE_CT_TRACKED ||
		    st->match == DPFLOW_TRACE_CT_INVALID)
			printf(" connection %u, %s%s%s", st->entry,
			       dpflow_trace_ct_state_name(st->ct_state),
			       st->ct_flags & DPFLOW_META_CT_NEW ? ", new" : "",
			       st->ct_flags & DPFLOW_META_CT_REPLY ? ", reply"
								   : "");
		if (st->match == DPFLOW_TRACE_CT_NOCONN)
			printf(" (%s)", dpflow_trace_ct_drop_name(st->ct_drop));
		if (st->color != DPFLOW_COLOR_GREEN)
			printf(", %s", color_name(st->color));
		if (st->actions)
			printf(", actions");
		printf(" -> %s\n", target_text(ctx, st->to, st->value, where,
					       sizeof(where)));
	}
	printf("verdict: %s\n",
	       target_text(ctx, t->to, t->value, where, sizeof(where)));
	for (unsigned i = 0; i < r->n_out; i++) {
		printf("out port '%s': %u bytes\n  ",
		       dpflow_ctx_port_name(ctx, r->out[i].port),
		       r->out[i].len);
		for (unsigned b = 0; b < r->out[i].len; b++)
			printf("%02x", r->out[i].frame[b]);
		printf("\n");
	}
}

static void print_target_json(struct dpflow_ctx *ctx, unsigned to,
			      uint16_t value)
{
	printf("\"to\":\"%s\"", dpflow_trace_to_name(to));
	switch (to) {
	case DPFLOW_TRACE_TO_PORT:
		printf(",\"port\":\"%s\"", dpflow_ctx_port_name(ctx, value));
		break;
	case DPFLOW_TRACE_TO_PIPE:
		printf(",\"next\":\"%s\"",
		       dpflow_pipe_name(dpflow_ctx_pipe(ctx, value)));
		break;
	case DPFLOW_TRACE_TO_RSS:
		printf(",\"queue\":%u", value);
		break;
	case DPFLOW_TRACE_TO_DROP:
		printf(",\"reason\":\"%s\"", dpflow_drop_name(value));
		break;
	default:
		break;
	}
}

static void print_json(struct dpflow_ctx *ctx, const struct dpflow_trace *t,
		       unsigned long index, unsigned len,
		       const struct trace_run *r)
{
	printf("{\"index\":%lu,\"len\":%u,\"port\":\"%s\",\"steps\":[", index,
	       len, dpflow_ctx_port_name(ctx, t->port));
	for (unsigned i = 0; i < t->n_steps; i++) {
		const struct dpflow_trace_step *st = &t->step[i];
		struct dpflow_pipe *p = dpflow_ctx_pipe(ctx, st->pipe);

		printf("%s{\"pipe\":\"%s\",\"type\":\"%s\",\"match\":\"%s\"",
		       i ? "," : "", dpflow_pipe_name(p),
		       dpflow_pipe_type_name(dpflow_pipe_cfg(p)->type),
		       dpflow_trace_match_name(st->match));
		if (st->match == DPFLOW_TRACE_HIT)
			printf(",\"entry\":%lu", (unsigned long)st->entry_id);
		if (st->match == DPFLOW_TRACE_CT_TRACKED ||
		    st->match == DPFLOW_TRACE_CT_INVALID)
			printf(",\"connection\":%u,\"ct_state\":\"%s\","
			       "\"ct_flags\":%u",
			       st->entry,
			       dpflow_trace_ct_state_name(st->ct_state),
			       st->ct_flags);
		if (st->match == DPFLOW_TRACE_CT_NOCONN)
			printf(",\"ct_drop\":\"%s\"",
			       dpflow_trace_ct_drop_name(st->ct_drop));
		printf(",\"color\":\"%s\",\"actions\":%s,",
		       color_name(st->color), st->actions ? "true" : "false");
		print_target_json(ctx, st->to, st->value);
		printf("}");
	}
	printf("],\"verdict\":{");
	print_target_json(ctx, t->to, t->value);
	printf("},\"out\":[");
	for (unsigned i = 0; i < r->n_out; i++) {
		printf("%s{\"port\":\"%s\",\"len\":%u,\"frame\":\"",
		       i ? "," : "", dpflow_ctx_port_name(ctx, r->out[i].port),
		       r->out[i].len);
		for (unsigned b = 0; b < r->out[i].len; b++)
			printf("%02x", r->out[i].frame[b]);
		printf("\"}");
	}
	printf("]}\n");
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
	if (json)
		print_json(ctx, t, index, len, &run);
	else
		print_text(ctx, t, index, len, &run);
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
