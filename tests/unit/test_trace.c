/*
 * Packet traces (dpflow/trace.h): a data thread's armed burst records, per
 * packet, each pipe, the entry hit or the miss, the actions and where the
 * packet went, as the config says it must; packets past the armed count,
 * and the next burst, record nothing; a control thread's request
 * (dpflow_ctx_trace_next) is taken by a data thread, filtered by port,
 * withdrawn when no packet comes, and refused while another is in flight.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "dpflow/config.h"
#include "dpflow/dpflow.h"
#include "dpflow/flow.h"
#include "dpflow/trace.h"

static const char *yaml =
    "ports:\n"
    "  - {name: in, uri: 'ring:in'}\n"
    "  - {name: other, uri: 'ring:other'}\n"
    "  - {name: web, uri: 'ring:web'}\n"
    "pipes:\n"
    "  - name: proto\n"
    "    type: basic\n"
    "    root: in\n"
    "    match: [outer.ip.proto]\n"
    "    fwd: per-entry\n"
    "    miss: drop\n"
    "    entries:\n"
    "      - {match: {outer.ip.proto: 17}, fwd: drop}\n"
    "      - {match: {outer.ip.proto: 6}, fwd: {pipe: tcp}}\n"
    "  - name: tcp\n"
    "    type: basic\n"
    "    match: [outer.l4.dport]\n"
    "    actions:\n"
    "      - [{set: {field: meta.reg0, value: per-entry}}]\n"
    "    fwd: {port: web}\n"
    "    miss: drop\n"
    "    entries:\n"
    "      - {match: {outer.l4.dport: 80}, values: [7]}\n";

static uint32_t make_pkt(struct dpflow_pool *pool, uint8_t l4, uint16_t dport)
{
	struct dpflow_gen_spec s;
	uint32_t idx, src = htonl(0x0a000001), dst = htonl(0x0a000002);

	cr_assert_eq(dpflow_pool_alloc_bulk(pool, &idx, 1), 0);
	memset(&s, 0, sizeof(s));
	s.has_eth = true;
	s.outer.l3_type = DPFLOW_L3_IPV4;
	s.outer.l4_type = l4;
	memcpy(s.outer.src, &src, 4);
	memcpy(s.outer.dst, &dst, 4);
	s.outer.sport = 1234;
	s.outer.dport = dport;
	s.outer.ttl = 64;
	memset(s.outer.ipv6_ext, 0xff, sizeof(s.outer.ipv6_ext));
	dpflow_pool_meta(pool, idx)->data_len =
	    (uint16_t)dpflow_gen_build(&s, dpflow_pkt_data(pool, idx), 2048);
	cr_assert_gt(dpflow_pool_meta(pool, idx)->data_len, 0);
	return idx;
}

static struct dpflow_ctx *load(void)
{
	struct dpflow_error err = {0};
	struct dpflow_ctx *ctx =
	    dpflow_config_load_string(yaml, "trace.yaml", NULL, &err);

	cr_assert_not_null(ctx, "%s", err.msg);
	return ctx;
}

static void drain(struct dpflow_ctx *ctx)
{
	struct dpflow_port *port =
	    dpflow_ctx_port(ctx, (unsigned)dpflow_ctx_port_find(ctx, "web"));
	uint32_t idx[256];
	unsigned n = dpflow_ring_dequeue_burst(dpflow_port_ring_tx(port), idx,
					       256);

	dpflow_pool_free_bulk(dpflow_ctx_pool(ctx), idx, n);
}

Test(trace, an_armed_burst_records_each_pipe_and_the_verdict)
{
	struct dpflow_ctx *ctx = load();
	struct dpflow_pool *pool = dpflow_ctx_pool(ctx);
	struct dpflow_trace t[4];
	uint32_t idx[5];
	int tcp = -1;

	for (unsigned i = 0; i < dpflow_ctx_pipe_count(ctx); i++)
		if (!strcmp(dpflow_pipe_name(dpflow_ctx_pipe(ctx, i)), "tcp"))
			tcp = (int)i;
	cr_assert_geq(tcp, 0);
	idx[0] = make_pkt(pool, DPFLOW_L4_TCP, 80);  /* proto hit, tcp hit */
	idx[1] = make_pkt(pool, DPFLOW_L4_TCP, 443); /* tcp miss */
	idx[2] = make_pkt(pool, DPFLOW_L4_UDP, 53);  /* proto hit, fwd drop */
	idx[3] = make_pkt(pool, DPFLOW_L4_ICMP, 0);  /* proto miss */
	idx[4] = make_pkt(pool, DPFLOW_L4_TCP, 80);  /* past the armed 4 */
	memset(t, 0xa5, sizeof(t));
	dpflow_ctx_thread_online(ctx);
	dpflow_ctx_thread_trace(ctx, t, 4);
	dpflow_ctx_process_burst(ctx, 0, idx, 5);

	cr_expect_eq(t[0].n_steps, 2);
	cr_expect_eq(t[0].step[0].match, DPFLOW_TRACE_HIT);
	cr_expect_eq(t[0].step[0].entry_id, 1, "the second entry's id");
	cr_expect_eq(t[0].step[0].to, DPFLOW_TRACE_TO_PIPE);
	cr_expect_eq(t[0].step[0].value, tcp);
	cr_expect_eq(t[0].step[0].actions, 0);
	cr_expect_eq(t[0].step[1].pipe, tcp);
	cr_expect_eq(t[0].step[1].match, DPFLOW_TRACE_HIT);
	cr_expect_eq(t[0].step[1].actions, 1);
	cr_expect_eq(t[0].to, DPFLOW_TRACE_TO_PORT);
	cr_expect_eq(t[0].value, dpflow_ctx_port_find(ctx, "web"));
	cr_expect_eq(t[0].idx, idx[0]);

	cr_expect_eq(t[1].n_steps, 2);
	cr_expect_eq(t[1].step[1].match, DPFLOW_TRACE_MISS);
	cr_expect_eq(t[1].to, DPFLOW_TRACE_TO_DROP);
	cr_expect_eq(t[1].value, DPFLOW_DROP_FLOW_MISS_DROP);

	cr_expect_eq(t[2].n_steps, 1);
	cr_expect_eq(t[2].step[0].entry_id, 0);
	cr_expect_eq(t[2].to, DPFLOW_TRACE_TO_DROP);
	cr_expect_eq(t[2].value, DPFLOW_DROP_FLOW_FWD_DROP);

	cr_expect_eq(t[3].n_steps, 1);
	cr_expect_eq(t[3].step[0].match, DPFLOW_TRACE_MISS);
	cr_expect_eq(t[3].value, DPFLOW_DROP_FLOW_MISS_DROP);

	/* tracing is off again: a second burst leaves the records alone */
	memset(t, 0x5a, sizeof(t));
	idx[0] = make_pkt(pool, DPFLOW_L4_TCP, 80);
	dpflow_ctx_process_burst(ctx, 0, idx, 1);
	cr_expect_eq(t[0].n_steps, 0x5a5a, "a burst not armed records");
	drain(ctx);
	dpflow_ctx_thread_offline(ctx);
	dpflow_ctx_destroy(ctx);
}

Test(trace, a_parser_drop_has_no_step)
{
	struct dpflow_ctx *ctx = load();
	struct dpflow_pool *pool = dpflow_ctx_pool(ctx);
	struct dpflow_trace t;
	uint32_t idx = make_pkt(pool, DPFLOW_L4_TCP, 80);

	dpflow_pool_meta(pool, idx)->data_len = 16; /* cut in the IP header */
	dpflow_ctx_thread_online(ctx);
	dpflow_ctx_thread_trace(ctx, &t, 1);
	dpflow_ctx_process_burst(ctx, 0, &idx, 1);
	cr_expect_eq(t.n_steps, 0);
	cr_expect_eq(t.to, DPFLOW_TRACE_TO_DROP);
	cr_expect_neq(t.value, 0, "a parser reason");
	dpflow_ctx_thread_offline(ctx);
	dpflow_ctx_destroy(ctx);
}

struct worker {
	struct dpflow_ctx *ctx;
	uint16_t port;
	volatile int stop;
};

/* A data thread: bursts of two TCP/80 packets on @port until stopped. */
static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct dpflow_pool *pool = dpflow_ctx_pool(w->ctx);

	dpflow_ctx_thread_online(w->ctx);
	while (!w->stop) {
		uint32_t idx[2];

		idx[0] = make_pkt(pool, DPFLOW_L4_TCP, 80);
		idx[1] = make_pkt(pool, DPFLOW_L4_UDP, 53);
		dpflow_ctx_process_burst(w->ctx, w->port, idx, 2);
		drain(w->ctx);
		dpflow_ctx_quiescent(w->ctx);
	}
	dpflow_ctx_thread_offline(w->ctx);
	return NULL;
}

Test(trace, a_control_request_is_taken_by_a_data_thread)
{
	struct dpflow_ctx *ctx = load();
	struct worker w = {ctx, 0, 0};
	struct dpflow_trace t[2];
	pthread_t th;
	int got;

	/* no data thread: withdrawn after the timeout, none traced */
	cr_expect_eq(dpflow_ctx_trace_next(ctx, -1, 1, 20, t), 0);
	cr_expect_eq(dpflow_ctx_trace_next(ctx, -1, 0, 20, t), -EINVAL);
	cr_expect_eq(dpflow_ctx_trace_next(ctx, -1, 9, 20, t), -EINVAL);
	cr_assert_eq(pthread_create(&th, NULL, worker_main, &w), 0);
	got = dpflow_ctx_trace_next(ctx, -1, 2, 5000, t);
	cr_expect_eq(got, 2);
	cr_expect_eq(t[0].to, DPFLOW_TRACE_TO_PORT);
	cr_expect_eq(t[0].n_steps, 2);
	cr_expect_eq(t[1].to, DPFLOW_TRACE_TO_DROP);
	cr_expect_eq(t[1].value, DPFLOW_DROP_FLOW_FWD_DROP);
	/* the worker is on port 0: a request for port 1 gets nothing */
	cr_expect_eq(dpflow_ctx_trace_next(ctx, 1, 1, 50, t), 0);
	/* and for port 0 again, one packet */
	cr_expect_eq(dpflow_ctx_trace_next(ctx, 0, 1, 5000, t), 1);
	cr_expect_eq(t[0].port, 0);
	w.stop = 1;
	pthread_join(th, NULL);
	dpflow_ctx_destroy(ctx);
}
