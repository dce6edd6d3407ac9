/*
 * The Prometheus endpoint: the exposition text carries the counters the
 * packets produced (checked against what was sent), label values are
 * escaped, and the HTTP server answers GET /metrics, 404 and 405, and
 * refuses bad addresses.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dpflow/config.h"
#include "dpflow/dpflow.h"
#include "dpflow/flow.h"
#include "dpflow/gen.h"
#include "dpflow/metrics.h"

static const char cfg_yaml[] =
    "ports:\n"
    "  - {name: in, uri: 'ring:in,size=1024'}\n"
    "  - {name: 'o\"ut', uri: 'ring:out,size=1024'}\n"
    "pipes:\n"
    "  - name: fw\n"
    "    type: basic\n"
    "    root: in\n"
    "    match: [outer.l4.dport]\n"
    "    monitor: {counter: true}\n"
    "    fwd: {port: 'o\"ut'}\n"
    "    miss: drop\n"
    "    entries:\n"
    "      - {match: {outer.l4.dport: 80}}\n"
    "      - {match: {outer.l4.dport: 443}}\n";

/* 7 packets to port 80, 3 to 443, 5 to 22 (missed, dropped). */
static struct dpflow_ctx *ctx_with_traffic(void)
{
	struct dpflow_error err = {0};
	struct dpflow_ctx *ctx =
	    dpflow_config_load_string(cfg_yaml, "m.yaml", NULL, &err);
	struct dpflow_pool *pool;
	struct dpflow_gen_spec sp;
	uint32_t idx[15];
	uint32_t k = 0;

	cr_assert_not_null(ctx, "%s", err.msg);
	pool = dpflow_ctx_pool(ctx);
	memset(&sp, 0, sizeof(sp));
	sp.has_eth = true;
	sp.outer.l3_type = DPFLOW_L3_IPV4;
	sp.outer.l4_type = DPFLOW_L4_TCP;
	sp.outer.ttl = 64;
	sp.outer.src[0] = 10;
	sp.outer.dst[0] = 10;
	sp.frame_len = 100;
	cr_assert_eq(dpflow_pool_alloc_bulk(pool, idx, 15), 0);
	for (unsigned i = 0; i < 15; i++) {
		sp.outer.dport = i < 7 ? 80 : i < 10 ? 443 : 22;
		dpflow_pool_meta(pool, idx[i])->data_len =
		    (uint16_t)dpflow_gen_build(
			&sp, dpflow_pkt_data(pool, idx[i]), 256);
		k++;
	}
	dpflow_ctx_thread_online(ctx);
	dpflow_ctx_process_burst(ctx, 0, idx, (uint16_t)k);
	dpflow_ctx_thread_offline(ctx);
	return ctx;
}

static void expect_line(const char *text, const char *line)
{
	char want[256];

	snprintf(want, sizeof(want), "\n%s\n", line);
	cr_expect(strstr(text, want), "missing line: %s", line);
}

Test(metrics, text_has_the_counters)
{
	struct dpflow_ctx *ctx = ctx_with_traffic();
	size_t len = 0;
	char *t = dpflow_metrics_render(ctx, NULL, &len);

	cr_assert_not_null(t);
	cr_expect_eq(strlen(t), len);
	expect_line(t, "dpflow_pipe_packets_total{pipe=\"fw\"} 15");
	expect_line(t, "dpflow_pipe_hits_total{pipe=\"fw\"} 10");
	expect_line(t, "dpflow_pipe_misses_total{pipe=\"fw\"} 5");
	expect_line(t, "dpflow_pipe_entries{pipe=\"fw\"} 2");
	expect_line(t, "dpflow_entry_packets_total{pipe=\"fw\",entry=\"0\"} 7");
	expect_line(t, "dpflow_entry_packets_total{pipe=\"fw\",entry=\"1\"} 3");
	expect_line(t, "dpflow_entry_bytes_total{pipe=\"fw\",entry=\"0\"} 700");
	expect_line(t, "dpflow_port_tx_packets_total{port=\"o\\\"ut\"} 10");
	expect_line(t, "dpflow_drops_total{reason=\"flow_miss_drop\"} 5");
	expect_line(t, "# TYPE dpflow_drops_total counter");
	cr_expect_null(strstr(t, "dpflow_worker_"),
		       "workers without a runtime");
	free(t);
	dpflow_ctx_destroy(ctx);
}

/* GET @path (method @method) from the server, serving it meanwhile. */
static char *http(struct dpflow_metrics *m, const char *method,
		  const char *path)
{
	struct sockaddr_in a = {0};
	char req[256], *buf = calloc(1, 1 << 20);
	size_t got = 0;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	cr_assert(fd >= 0 && buf);
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)dpflow_metrics_port(m));
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	snprintf(req, sizeof(req),
		 "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
		 method, path);
	cr_assert_eq(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	fcntl(fd, F_SETFL, O_NONBLOCK);
	for (unsigned i = 0; i < 5000; i++) {
		struct pollfd p = {fd, POLLIN, 0};
		ssize_t n;

		dpflow_metrics_serve(m);
		if (poll(&p, 1, 1) <= 0)
			continue;
		n = read(fd, buf + got, (1 << 20) - 1 - got);
		if (n == 0)
			break;
		if (n > 0)
			got += (size_t)n;
	}
	close(fd);
	return buf;
}

/* A ct pipe's connections and events: 3 flows of 2 packets each through
 * a source NAT whose pool holds 2 bindings. */
Test(metrics, ct_pipe_connections_and_events)
{
	static const char yaml[] =
	    "ports:\n"
	    "  - {name: in, uri: 'ring:in,size=1024'}\n"
	    "  - {name: out, uri: 'ring:out,size=1024'}\n"
	    "pipes:\n"
	    "  - name: nat\n"
	    "    type: ct\n"
	    "    root: in\n"
	    "    size: 64\n"
	    "    ct: {snat: {addrs: [198.51.100.1], ports: [5000, 5001]}}\n"
	    "    fwd: {port: out}\n"
	    "    miss: drop\n";
	struct dpflow_error err = {0};
	struct dpflow_ctx *ctx =
	    dpflow_config_load_string(yaml, "ct.yaml", NULL, &err);
	struct dpflow_pool *pool;
	struct dpflow_gen_spec sp;
	uint32_t idx[6];
	size_t len = 0;
	char *t;

	cr_assert_not_null(ctx, "%s", err.msg);
	pool = dpflow_ctx_pool(ctx);
	memset(&sp, 0, sizeof(sp));
	sp.has_eth = true;
	sp.outer.l3_type = DPFLOW_L3_IPV4;
	sp.outer.l4_type = DPFLOW_L4_UDP;
	sp.outer.ttl = 64;
	sp.outer.src[0] = 10;
	sp.outer.dst[0] = 192;
	sp.outer.dport = 53;
	sp.frame_len = 100;
	cr_assert_eq(dpflow_pool_alloc_bulk(pool, idx, 6), 0);
	for (unsigned i = 0; i < 6; i++) {
		sp.outer.sport = (uint16_t)(1000 + i % 3); /* 3 flows */
		dpflow_pool_meta(pool, idx[i])->data_len =
		    (uint16_t)dpflow_gen_build(
			&sp, dpflow_pkt_data(pool, idx[i]), 256);
	}
	dpflow_ctx_thread_online(ctx);
	dpflow_ctx_process_burst(ctx, 0, idx, 6);
	dpflow_ctx_thread_offline(ctx);
	t = dpflow_metrics_render(ctx, NULL, &len);
	cr_assert_not_null(t);
	expect_line(t, "# TYPE dpflow_ct_connections gauge");
	expect_line(t, "dpflow_ct_connections{pipe=\"nat\"} 2");
	expect_line(t,
		    "dpflow_ct_events_total{pipe=\"nat\",event=\"created\"} 2");
	/* the third flow's two packets each asked for a binding */
	expect_line(t, "dpflow_ct_events_total{pipe=\"nat\",event="
		       "\"nat_exhausted\"} 2");
	expect_line(t,
		    "dpflow_ct_events_total{pipe=\"nat\",event=\"refused\"} 2");
	expect_line(t, "dpflow_drops_total{reason=\"flow_miss_drop\"} 2");
	free(t);
	dpflow_ctx_destroy(ctx);
}

Test(metrics, http_endpoint)
{
	struct dpflow_ctx *ctx = ctx_with_traffic();
	struct dpflow_error err = {0};
	struct dpflow_metrics *m =
	    dpflow_metrics_open(ctx, NULL, "127.0.0.1:0", &err);
	char *r;

	cr_assert_not_null(m, "%s", err.msg);
	cr_assert_gt(dpflow_metrics_port(m), 0);
	r = http(m, "GET", "/metrics");
	cr_expect(!strncmp(r, "HTTP/1.1 200", 12), "reply: %.40s", r);
	cr_expect(strstr(r, "text/plain; version=0.0.4"));
	cr_expect(strstr(r, "\ndpflow_pipe_hits_total{pipe=\"fw\"} 10\n"));
	free(r);
	r = http(m, "GET", "/other");
	cr_expect(!strncmp(r, "HTTP/1.1 404", 12), "reply: %.40s", r);
	free(r);
	r = http(m, "POST", "/metrics");
	cr_expect(!strncmp(r, "HTTP/1.1 405", 12), "reply: %.40s", r);
	free(r);
	dpflow_metrics_close(m);
	dpflow_ctx_destroy(ctx);
}

Test(metrics, bad_addresses_refused)
{
	struct dpflow_ctx *ctx = ctx_with_traffic();
	static const char *const bad[] = {
	    "127.0.0.1", "300.1.1.1:80", "127.0.0.1:70000",
	    "[::1]",	 "::1:80",	 "127.0.0.1:",
	    "",
	};
	struct dpflow_error err = {0};
	struct dpflow_metrics *a;

	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&err, 0, sizeof(err));
		cr_expect_null(dpflow_metrics_open(ctx, NULL, bad[i], &err),
			       "'%s' accepted", bad[i]);
		cr_expect_str_eq(err.field, "addr", "'%s'", bad[i]);
	}
	/* a port in use */
	a = dpflow_metrics_open(ctx, NULL, "127.0.0.1:0", &err);
	cr_assert_not_null(a, "%s", err.msg);
	{
		char addr[32];

		snprintf(addr, sizeof(addr), "127.0.0.1:%u",
			 dpflow_metrics_port(a));
		cr_expect_null(dpflow_metrics_open(ctx, NULL, addr, &err));
		cr_expect(strstr(err.msg, "cannot listen"), "%s", err.msg);
	}
	dpflow_metrics_close(a);
	dpflow_ctx_destroy(ctx);
}
