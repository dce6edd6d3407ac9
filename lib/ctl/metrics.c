/*
 * Prometheus metrics endpoint (dpflow/metrics.h): the exposition text from
 * the context's counters, served by libmicrohttpd driven from the control
 * thread (no server thread: MHD_run() in dpflow_metrics_serve()).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "dpflow/meta.h"
#include "dpflow/metrics.h"
#include "dpflow/port.h"

struct dpflow_metrics {
	struct dpflow_ctx *ctx;
	struct dpflow_rt *rt;
	void (*app_render)(void *arg, FILE *f);
	void *app_arg;
	struct MHD_Daemon *d;
	unsigned port;
};

void dpflow_metrics_put_label(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			fputc('\\', f);
		if (*s == '\n') {
			fputs("\\n", f);
			continue;
		}
		fputc(*s, f);
	}
}

void dpflow_metrics_put_help(FILE *f, const char *name, const char *type,
			     const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One metric family over the ports: @off is the stats field. */
static void ports_family(FILE *f, struct dpflow_ctx *ctx, const char *name,
			 const char *help, size_t off)
{
	dpflow_metrics_put_help(f, name, "counter", help);
	for (unsigned p = 0; p < dpflow_ctx_port_count(ctx); p++) {
		struct dpflow_port_stats s;

		memset(&s, 0, sizeof(s));
		dpflow_port_stats_get(dpflow_ctx_port(ctx, p), &s);
		fprintf(f, "%s{port=\"", name);
		dpflow_metrics_put_label(f, dpflow_ctx_port_name(ctx, p));
		fprintf(f, "\"} %llu\n",
			(unsigned long long)*(
			    const uint64_t *)((const char *)&s + off));
	}
}

static void render_ports(FILE *f, struct dpflow_ctx *ctx)
{
	static const struct {
		const char *name, *help;
		size_t off;
	} fam[] = {
	    {"dpflow_port_rx_packets_total", "Packets received.",
	     offsetof(struct dpflow_port_stats, rx_pkts)},
	    {"dpflow_port_rx_bytes_total", "Frame bytes received.",
	     offsetof(struct dpflow_port_stats, rx_bytes)},
	    {"dpflow_port_rx_dropped_total",
	     "Packets dropped before the port saw them (kernel ring full).",
	     offsetof(struct dpflow_port_stats, rx_dropped)},
	    {"dpflow_port_rx_nobuf_total",
	     "Packets not received for want of a packet buffer.",
	     offsetof(struct dpflow_port_stats, rx_nobuf)},
	    {"dpflow_port_rx_errors_total", "Receive errors.",
	     offsetof(struct dpflow_port_stats, rx_errors)},
	    {"dpflow_port_tx_packets_total", "Packets transmitted.",
	     offsetof(struct dpflow_port_stats, tx_pkts)},
	    {"dpflow_port_tx_bytes_total", "Frame bytes transmitted.",
	     offsetof(struct dpflow_port_stats, tx_bytes)},
	    {"dpflow_port_tx_errors_total",
	     "Packets the port failed to transmit.",
	     offsetof(struct dpflow_port_stats, tx_errors)},
	};

	for (unsigned i = 0; i < sizeof(fam) / sizeof(fam[0]); i++)
		ports_family(f, ctx, fam[i].name, fam[i].help, fam[i].off);
}

static void pipe_label(FILE *f, const char *name, struct dpflow_pipe *pipe)
{
	fprintf(f, "%s{pipe=\"", name);
	dpflow_metrics_put_label(f, dpflow_pipe_name(pipe));
	fputs("\"}", f);
}

static void render_pipes(FILE *f, struct dpflow_ctx *ctx)
{
	static const char *const names[] = {"dpflow_pipe_packets_total",
					    "dpflow_pipe_hits_total",
					    "dpflow_pipe_misses_total"};
	static const char *const helps[] = {"Packets looked up.",
					    "Lookups that hit an entry.",
					    "Lookups that missed."};
	unsigned n = dpflow_ctx_pipe_count(ctx);

	for (unsigned k = 0; k < 3; k++) {
		dpflow_metrics_put_help(f, names[k], "counter", helps[k]);
		for (unsigned i = 0; i < n; i++) {
			struct dpflow_pipe *pipe = dpflow_ctx_pipe(ctx, i);
			struct dpflow_pipe_stats s;
			uint64_t v;

			dpflow_pipe_stats_get(pipe, &s);
			v = k == 0 ? s.pkts : k == 1 ? s.hits : s.misses;
			pipe_label(f, names[k], pipe);
			fprintf(f, " %llu\n", (unsigned long long)v);
		}
	}
	dpflow_metrics_put_help(f, "dpflow_pipe_entries", "gauge",
				"Entries installed.");
	for (unsigned i = 0; i < n; i++) {
		struct dpflow_pipe *pipe = dpflow_ctx_pipe(ctx, i);

		pipe_label(f, "dpflow_pipe_entries", pipe);
		fprintf(f, " %u\n", dpflow_pipe_entry_count(pipe));
	}
}

/* Connection tracking of the ct pipes: live connections, and events. */
static void render_ct(FILE *f, struct dpflow_ctx *ctx)
{
	static const char *const events[] = {"created",	 "expired",
					     "replaced", "invalid",
					     "refused",	 "nat_exhausted"};
	unsigned n = dpflow_ctx_pipe_count(ctx);
	bool any = false;

	for (unsigned i = 0; i < n && !any; i++)
		any = dpflow_pipe_cfg(dpflow_ctx_pipe(ctx, i))->type ==
		      DPFLOW_PIPE_CT;
	if (!any)
		return;
	dpflow_metrics_put_help(f, "dpflow_ct_connections", "gauge",
				"Live connections of a ct pipe.");
	for (unsigned i = 0; i < n; i++) {
		struct dpflow_pipe *pipe = dpflow_ctx_pipe(ctx, i);
		struct dpflow_pipe_stats s;

		if (dpflow_pipe_cfg(pipe)->type != DPFLOW_PIPE_CT)
			continue;
		dpflow_pipe_stats_get(pipe, &s);
		pipe_label(f, "dpflow_ct_connections", pipe);
		fprintf(f, " %llu\n", (unsigned long long)s.ct_live);
	}
	dpflow_metrics_put_help(f, "dpflow_ct_events_total", "counter",
				"Connections created, expired, replaced; "
				"packets invalid, refused a connection; "
				"bindings refused for want of a free one.");
	for (unsigned i = 0; i < n; i++) {
		struct dpflow_pipe *pipe = dpflow_ctx_pipe(ctx, i);
		struct dpflow_pipe_stats s;
		uint64_t v[6];

		if (dpflow_pipe_cfg(pipe)->type != DPFLOW_PIPE_CT)
			continue;
		dpflow_pipe_stats_get(pipe, &s);
		v[0] = s.ct_created;
		v[1] = s.ct_expired;
		v[2] = s.ct_replaced;
		v[3] = s.ct_invalid;
		v[4] = s.ct_refused;
		v[5] = s.ct_nat_exhausted;

		for (unsigned k = 0; k < DPFLOW_ARRAY_SIZE(events); k++) {
			fputs("dpflow_ct_events_total{pipe=\"", f);
			dpflow_metrics_put_label(f, dpflow_pipe_name(pipe));
			fprintf(f, "\",event=\"%s\"} %llu\n", events[k],
				(unsigned long long)v[k]);
		}
	}
}

/* Per-entry counters of the pipes that count, labelled by the entry's id
 * (dpflow_entry_id(): an update keeps it, so the series goes on). */
static void render_entries(FILE *f, struct dpflow_ctx *ctx)
{
	for (unsigned k = 0; k < 2; k++) {
		const char *name = k ? "dpflow_entry_bytes_total"
				     : "dpflow_entry_packets_total";

		dpflow_metrics_put_help(
		    f, name, "counter",
		    k ? "Bytes that hit the entry (label entry: its id)."
		      : "Packets that hit the entry (label entry: its id).");
		for (unsigned i = 0; i < dpflow_ctx_pipe_count(ctx); i++) {
			struct dpflow_pipe *pipe = dpflow_ctx_pipe(ctx, i);

			if (!dpflow_pipe_cfg(pipe)->monitor.counter)
				continue;
			for (uint32_t e = 0; e < dpflow_pipe_size(pipe); e++) {
				const struct dpflow_entry *en =
				    dpflow_pipe_entry(pipe, e);
				struct dpflow_counter c;

				if (!en || dpflow_entry_counter(en, &c))
					continue;
				fprintf(f, "%s{pipe=\"", name);
				dpflow_metrics_put_label(
				    f, dpflow_pipe_name(pipe));
				fprintf(
				    f, "\",entry=\"%llu\"} %llu\n",
				    (unsigned long long)dpflow_entry_id(en),
				    (unsigned long long)(k ? c.bytes : c.pkts));
			}
		}
	}
}

static void render_drops(FILE *f, struct dpflow_ctx *ctx)
{
	uint64_t d[DPFLOW_DROP__COUNT];

	dpflow_ctx_drops(ctx, d);
	dpflow_metrics_put_help(f, "dpflow_drops_total", "counter",
				"Packets dropped, by reason.");
	for (unsigned r = 1; r < DPFLOW_DROP__COUNT; r++)
		fprintf(f, "dpflow_drops_total{reason=\"%s\"} %llu\n",
			dpflow_drop_name(r), (unsigned long long)d[r]);
}

static void render_workers(FILE *f, struct dpflow_rt *rt)
{
	static const char *const names[] = {
	    "dpflow_worker_rx_packets_total",
	    "dpflow_worker_packets_total",
	    "dpflow_worker_handoff_out_total",
	    "dpflow_worker_handoff_in_total",
	    "dpflow_worker_handoff_drops_total",
	    "dpflow_worker_handoff_waits_total",
	    "dpflow_worker_tx_timed_total",
	    "dpflow_worker_tx_timed_refused_total",
	    "dpflow_worker_busy_seconds_total"};
	static const char *const helps[] = {
	    "Packets received from the worker's queues.",
	    "Packets run through the pipes by the worker.",
	    "Packets handed to other workers by RSS.",
	    "Packets taken from other workers.",
	    "Packets dropped because a handoff ring was full.",
	    "Passes that left the receive queues alone (a handoff ring full).",
	    "Packets held by a timing wheel until their send time.",
	    "Timed packets dropped: their send time was beyond the horizon.",
	    "Time spent on bursts that had packets."};
	unsigned n = dpflow_rt_workers(rt);

	for (unsigned k = 0; k < 9; k++) {
		dpflow_metrics_put_help(f, names[k], "counter", helps[k]);
		for (unsigned w = 0; w < n; w++) {
			struct dpflow_worker_stats s;
			uint64_t v[9];

			if (dpflow_rt_worker_stats(rt, w, &s))
				continue;
			v[0] = s.rx_pkts;
			v[1] = s.pkts;
			v[2] = s.handoff_out;
			v[3] = s.handoff_in;
			v[4] = s.handoff_drops;
			v[5] = s.handoff_waits;
			v[6] = s.tx_timed;
			v[7] = s.tx_timed_refused;
			if (k == 8)
				fprintf(f, "%s{worker=\"%u\"} %.9f\n", names[k],
					w, (double)s.busy_ns / 1e9);
			else
				fprintf(f, "%s{worker=\"%u\"} %llu\n", names[k],
					w, (unsigned long long)v[k]);
		}
	}
}

char *dpflow_metrics_render(struct dpflow_ctx *ctx, struct dpflow_rt *rt,
			    size_t *len)
{
	char *text = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&text, &n);

	if (!f)
		return NULL;
	render_ports(f, ctx);
	render_pipes(f, ctx);
	render_ct(f, ctx);
	render_entries(f, ctx);
	render_drops(f, ctx);
	if (rt)
		render_workers(f, rt);
	if (fclose(f)) {
		free(text);
		return NULL;
	}
	if (len)
		*len = n;
	return text;
}

/* @body (freed) followed by the application's lines; NULL when out of
 * memory. */
static char *with_app(struct dpflow_metrics *m, char *body, size_t *len)
{
	char *text = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&text, &n);

	if (!f) {
		free(body);
		return NULL;
	}
	fwrite(body, 1, *len, f);
	free(body);
	m->app_render(m->app_arg, f);
	if (fclose(f)) {
		free(text);
		return NULL;
	}
	*len = n;
	return text;
}

void dpflow_metrics_app(struct dpflow_metrics *m,
			void (*render)(void *arg, FILE *f), void *arg)
{
	m->app_render = render;
	m->app_arg = arg;
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *c,
			      const char *url, const char *method,
			      const char *version, const char *upload,
			      size_t *upload_len, void **con_cls)
{
	struct dpflow_metrics *m = cls;
	struct MHD_Response *r;
	enum MHD_Result rc;
	unsigned status = MHD_HTTP_OK;
	char *body;
	size_t len = 0;

	(void)version;
	(void)upload;
	(void)con_cls;
	if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
		static const char msg[] = "only GET /metrics\n";

		status = MHD_HTTP_METHOD_NOT_ALLOWED;
		body = strdup(msg);
		len = sizeof(msg) - 1;
	} else if (*upload_len) {
		*upload_len = 0; /* a GET body: ignored */
		return MHD_YES;
	} else if (strcmp(url, "/metrics")) {
		static const char msg[] = "not found: try /metrics\n";

		status = MHD_HTTP_NOT_FOUND;
		body = strdup(msg);
		len = sizeof(msg) - 1;
	} else {
		body = dpflow_metrics_render(m->ctx, m->rt, &len);
		if (body && m->app_render)
			body = with_app(m, body, &len);
	}
	if (!body)
		return MHD_NO;
	r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type",
				status == MHD_HTTP_OK
				    ? "text/plain; version=0.0.4; charset=utf-8"
				    : "text/plain; charset=utf-8");
	rc = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return rc;
}

/*
 * "A.B.C.D:PORT" or "[V6]:PORT" into @ss; else -EINVAL with @err saying
 * which part is wrong (the form, the host, a port that is not a number or
 * is out of range).
 */
static int parse_addr(const char *addr, struct sockaddr_storage *ss,
		      socklen_t *sl, struct dpflow_error *err)
{
	bool v6 = addr[0] == '[';
	char host[64];
	const char *colon;
	char *end;
	unsigned long port;
	size_t hl;

	memset(ss, 0, sizeof(*ss));
	if (v6) {
		const char *close = strchr(addr, ']');

		colon = close && close[1] == ':' ? close + 1 : NULL;
		hl = close ? (size_t)(close - addr - 1) : 0;
		if (colon)
			memcpy(host, addr + 1, hl < sizeof(host) ? hl : 0);
	} else {
		colon = strrchr(addr, ':');
		hl = colon ? (size_t)(colon - addr) : 0;
		if (colon)
			memcpy(host, addr, hl < sizeof(host) ? hl : 0);
	}
	if (!colon || hl >= sizeof(host))
		return dpflow_error_set(err, EINVAL, "addr",
					"'%s': expected IPv4:PORT or "
					"[IPv6]:PORT",
					addr);
	host[hl] = 0;
	errno = 0;
	port = strtoul(colon + 1, &end, 10);
	if (!colon[1] || *end || colon[1] == '-' || colon[1] == '+')
		return dpflow_error_set(err, EINVAL, "addr",
					"'%s': port '%s' is not a number", addr,
					colon + 1);
	if (port > 65535 || errno == ERANGE)
		return dpflow_error_set(err, ERANGE, "addr",
					"'%s': port %s is out of range "
					"(0..65535)",
					addr, colon + 1);
	if (v6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

		if (inet_pton(AF_INET6, host, &s6->sin6_addr) != 1)
			return dpflow_error_set(err, EINVAL, "addr",
						"'%s': '%s' is not an IPv6 "
						"address",
						addr, host);
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)port);
		*sl = sizeof(*s6);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)ss;

		if (inet_pton(AF_INET, host, &s4->sin_addr) != 1)
			return dpflow_error_set(err, EINVAL, "addr",
						"'%s': '%s' is not an IPv4 "
						"address (IPv6: [ADDR]:PORT)",
						addr, host);
		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)port);
		*sl = sizeof(*s4);
	}
	return 0;
}

struct dpflow_metrics *dpflow_metrics_open(struct dpflow_ctx *ctx,
					   struct dpflow_rt *rt,
					   const char *addr,
					   struct dpflow_error *err)
{
	struct sockaddr_storage ss;
	socklen_t sl = 0;
	struct dpflow_metrics *m;
	const union MHD_DaemonInfo *info;
	unsigned flags = 0;

	if (!addr)
		addr = DPFLOW_METRICS_ADDR_DEFAULT;
	if (parse_addr(addr, &ss, &sl, err))
		return NULL;
	m = calloc(1, sizeof(*m));
	if (!m) {
		dpflow_error_set(err, ENOMEM, "addr", "out of memory");
		return NULL;
	}
	m->ctx = ctx;
	m->rt = rt;
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	m->d = MHD_start_daemon(
	    flags, ntohs(((struct sockaddr_in *)&ss)->sin_port), NULL, NULL,
	    answer, m, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned)16,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)5, MHD_OPTION_END);
	if (!m->d) {
		dpflow_error_set(err, EADDRINUSE, "addr",
				 "cannot listen on %s (in use, or not an "
				 "address of this machine)",
				 addr);
		free(m);
		return NULL;
	}
	info = MHD_get_daemon_info(m->d, MHD_DAEMON_INFO_BIND_PORT);
	m->port = info ? info->port : 0;
	return m;
}

int dpflow_metrics_serve(struct dpflow_metrics *m)
{
	return MHD_run(m->d) == MHD_YES ? 0 : -EIO;
}

unsigned dpflow_metrics_port(const struct dpflow_metrics *m)
{
	return m->port;
}

void dpflow_metrics_close(struct dpflow_metrics *m)
{
	if (!m)
		return;
	MHD_stop_daemon(m->d);
	free(m);
}
