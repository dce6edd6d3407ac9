/*
 * Flow engine tests: configs that load and configs that must fail with a
 * clear message (and build nothing), pipes run on packets through ring
 * ports, batch atomicity, and a writer churning entries while a worker
 * looks up (every burst must see one whole batch).
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/config.h"
#include "dpflow/dpflow.h"
#include "dpflow/flow.h"

static struct dpflow_ctx *load(const char *yaml, struct dpflow_error *err)
{
	memset(err, 0, sizeof(*err));
	return dpflow_config_load_string(yaml, "test.yaml", NULL, err);
}

/* A config that must fail, and a piece its message must contain. */
struct bad_config {
	const char *what;
	const char *yaml;
	const char *msg;
};

static const struct bad_config bad_configs[] = {
    {"invalid YAML", "ports: [\n  - name: a\n", "test.yaml:"},
    {"unknown top key", "ports: []\nfoo: 1\n", "unknown key 'foo'"},
    {"port without uri", "ports:\n  - name: a\n", "needs 'name' and 'uri'"},
    {"bad port uri", "ports:\n  - name: a\n    uri: nosuch:x\n",
     "test.yaml:3: ports[0].uri"},
    {"unknown field",
     "ports:\n  - {name: a, uri: 'ring:a'}\npipes:\n  - name: p\n    "
     "type: basic\n    match: [outer.nosuch]\n",
     "unknown field 'outer.nosuch'"},
    {"size not a number",
     "ports:\n  - {name: a, uri: 'ring:a'}\npipes:\n  - name: p\n    "
     "type: basic\n    size: lots\n    match: [outer.ip.proto]\n",
     "pipes[0].size: 'lots' is not a number"},
    {"unknown pipe type",
     "ports:\n  - {name: a, uri: 'ring:a'}\npipes:\n  - name: p\n    "
     "type: magic\n    match: [outer.ip.proto]\n",
     "unknown pipe type 'magic'"},
    {"forwarding loop",
     "ports:\n  - {name: a, uri: 'ring:a'}\npipes:\n"
     "  - {name: x, type: basic, match: [outer.ip.proto], fwd: {pipe: y}}\n"
     "  - {name: y, type: basic, match: [outer.ip.proto], fwd: {pipe: x}}\n",
     "makes a loop"},
    {"forwarding to a missing port",
     "ports:\n  - {name: a, uri: 'ring:a'}\npipes:\n"
     "  - {name: x, type: basic, match: [outer.ip.proto], fwd: {port: b}}\n",
     "no port named 'b'"},
    {"entry value out of range",
     "ports:\n  - {name: a, uri: 'ring:a'}\npipes:\n"
     "  - name: x\n    type: basic\n    match: [outer.ip.proto]\n"
     "    entries:\n      - match: {outer.ip.proto: 300}\n",
     "test.yaml:8: pipes[0].entries[0].match.outer.ip.proto: '300' is "
     "out of range (max 255)"},
    {"entry on a constant field",
     "ports:\n  - {name: a, uri: 'ring:a'}\npipes:\n"
     "  - name: x\n    type: basic\n    match: [outer.ip.proto]\n"
     "    entries:\n      - match: {outer.l4.dport: 80}\n",
     "'outer.l4.dport' is not a per-entry field"},
    {"duplicate entries",
     "ports:\n  - {name: a, uri: 'ring:a'}\npipes:\n"
     "  - name: x\n    type: basic\n    match: [outer.ip.proto]\n"
     "    entries:\n      - match: {outer.ip.proto: 6}\n"
     "      - match: {outer.ip.proto: 6}\n",
     "an entry with this match exists"},
    {"full table",
     "ports:\n  - {name: a, uri: 'ring:a'}\npipes:\n"
     "  - name: x\n    type: basic\n    size: 2\n    match: "
     "[outer.ip.proto]\n"
     "    entries:\n      - match: {outer.ip.proto: 6}\n"
     "      - match: {outer.ip.proto: 17}\n"
     "      - match: {outer.ip.proto: 1}\n",
     "is full"},
    {"prefix in a basic pipe",
     "ports:\n  - {name: a, uri: 'ring:a'}\npipes:\n"
     "  - name: x\n    type: basic\n    match: [outer.ipv4.dst]\n"
     "    entries:\n      - match: {outer.ipv4.dst: 10.0.0.0/8}\n",
     "a basic pipe matches exact values"},
    {"two roots on a port",
     "ports:\n  - {name: a, uri: 'ring:a'}\npipes:\n"
     "  - {name: x, type: basic, root: a, match: [outer.ip.proto]}\n"
     "  - {name: y, type: basic, root: a, match: [outer.ip.proto]}\n",
     "already has root pipe 'x'"},
};

Test(flow_config, bad_configs_fail_with_a_clear_message)
{
	for (size_t i = 0; i < DPFLOW_ARRAY_SIZE(bad_configs); i++) {
		struct dpflow_error err;
		struct dpflow_ctx *ctx = load(bad_configs[i].yaml, &err);

		cr_expect_null(ctx, "%s: loaded", bad_configs[i].what);
		cr_expect(strstr(err.msg, bad_configs[i].msg) != NULL,
			  "%s: message '%s' lacks '%s'", bad_configs[i].what,
			  err.msg, bad_configs[i].msg);
		cr_expect_neq(err.code, 0, "%s: error code",
			      bad_configs[i].what);
		dpflow_ctx_destroy(ctx);
	}
}

/* An Ethernet/IPv4 packet of protocol @l4 to @dport in @pool. */
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

/* Dequeue what port @name sent; return the count, dports in @dports. */
static unsigned drain(struct dpflow_ctx *ctx, const char *name,
		      uint16_t *dports, unsigned max)
{
	struct dpflow_port *port =
	    dpflow_ctx_port(ctx, (unsigned)dpflow_ctx_port_find(ctx, name));
	struct dpflow_ring *r = dpflow_port_ring_tx(port);
	uint32_t idx[256];
	unsigned n = dpflow_ring_dequeue_burst(r, idx, 256);

	for (unsigned i = 0; i < n; i++) {
		struct dpflow_pkt_meta *m =
		    dpflow_pool_meta(dpflow_ctx_pool(ctx), idx[i]);

		if (i < max)
			dports[i] = m->outer.dport;
	}
	dpflow_pool_free_bulk(dpflow_ctx_pool(ctx), idx, n);
	return n;
}

static const char *chain_yaml =
    "ports:\n"
    "  - {name: in, uri: 'ring:in'}\n"
    "  - {name: web, uri: 'ring:web'}\n"
    "  - {name: dns, uri: 'ring:dns'}\n"
    "pipes:\n"
    "  - name: proto\n"
    "    type: basic\n"
    "    root: in\n"
    "    match: [outer.ip.proto]\n"
    "    monitor: {counter: true}\n"
    "    fwd: per-entry\n"
    "    miss: drop\n"
    "    entries:\n"
    "      - {match: {outer.ip.proto: 6}, fwd: {pipe: tcp}}\n"
    "      - {match: {outer.ip.proto: 17}, fwd: {port: dns}}\n"
    "  - name: tcp\n"
    "    type: basic\n"
    "    match:\n"
    "      - outer.l4.dport\n"
    "      - {field: outer.ipv4.dst, value: 10.0.0.2}\n"
    "    actions:\n"
    "      - [{set: {field: meta.reg0, value: per-entry}}]\n"
    "    monitor: {counter: true}\n"
    "    fwd: {port: web}\n"
    "    miss: drop\n"
    "    entries:\n"
    "      - {match: {outer.l4.dport: 80}, values: [7]}\n"
    "      - {match: {outer.l4.dport: 443}, values: [9]}\n";

Test(flow_run, chained_pipes_forward_count_and_drop)
{
	struct dpflow_error err;
	struct dpflow_ctx *ctx = load(chain_yaml, &err);
	struct dpflow_pool *pool;
	uint32_t idx[6];
	uint16_t dports[8];
	uint64_t drops[DPFLOW_DROP__COUNT];
	struct dpflow_counter c;
	struct dpflow_pipe *tcp;

	cr_assert_not_null(ctx, "%s", err.msg);
	pool = dpflow_ctx_pool(ctx);
	idx[0] = make_pkt(pool, DPFLOW_L4_TCP, 80);
	idx[1] = make_pkt(pool, DPFLOW_L4_TCP, 443);
	idx[2] = make_pkt(pool, DPFLOW_L4_TCP, 22);  /* tcp miss: drop */
	idx[3] = make_pkt(pool, DPFLOW_L4_UDP, 53);  /* to dns */
	idx[4] = make_pkt(pool, DPFLOW_L4_SCTP, 80); /* proto miss */
	idx[5] = make_pkt(pool, DPFLOW_L4_TCP, 443);

	dpflow_ctx_thread_online(ctx);
	dpflow_ctx_process_burst(ctx, 0, idx, 6);
	dpflow_ctx_thread_offline(ctx);

	cr_expect_eq(drain(ctx, "web", dports, 8), 3);
	cr_expect_eq(dports[0], 80);
	cr_expect_eq(dports[1], 443);
	cr_expect_eq(dports[2], 443);
	cr_expect_eq(drain(ctx, "dns", dports, 8), 1);
	cr_expect_eq(dports[0], 53);
	dpflow_ctx_drops(ctx, drops);
	cr_expect_eq(drops[DPFLOW_DROP_FLOW_MISS_DROP], 2);
	tcp = dpflow_pipe_find(ctx, "tcp");
	cr_assert_not_null(tcp);
	cr_expect_eq(dpflow_pipe_entry_count(tcp), 2);
	for (uint32_t k = 0; k < dpflow_pipe_size(tcp); k++) {
		const struct dpflow_entry *e = dpflow_pipe_entry(tcp, k);

		if (!e)
			continue;
		const uint8_t *key = dpflow_entry_cfg(e)->key;

		dpflow_entry_counter(e, &c);
		cr_expect_eq(c.pkts, key[1] == 80 ? 1 : 2, "entry for port %u",
			     key[0] << 8 | key[1]);
	}
	cr_expect_eq(dpflow_pool_avail(pool), pool->n_slots,
		     "every packet returned to the pool");
	dpflow_ctx_destroy(ctx);
}

static const char *one_pipe_yaml = "ports:\n"
				   "  - {name: in, uri: 'ring:in,size=512'}\n"
				   "  - {name: out, uri: 'ring:out,size=512'}\n"
				   "pipes:\n"
				   "  - name: ports\n"
				   "    type: basic\n"
				   "    root: in\n"
				   "    size: 1024\n"
				   "    match: [outer.l4.dport]\n"
				   "    fwd: {port: out}\n"
				   "    miss: drop\n";

static struct dpflow_entry_cfg port_entry(uint16_t dport)
{
	struct dpflow_entry_cfg e;

	memset(&e, 0, sizeof(e));
	e.key[0] = (uint8_t)(dport >> 8);
	e.key[1] = (uint8_t)dport;
	return e;
}

struct status_log {
	int ok, error, aborted;
};

static void count_status(struct dpflow_entry *e, int status,
			 const struct dpflow_error *err, void *user)
{
	struct status_log *l = (struct status_log *)user;

	(void)e;
	(void)err;
	if (status == DPFLOW_ENTRY_OK)
		l->ok++;
	else if (status == DPFLOW_ENTRY_ERROR)
		l->error++;
	else
		l->aborted++;
}

Test(flow_entries, a_bad_entry_aborts_the_whole_batch)
{
	struct dpflow_error err;
	struct dpflow_ctx *ctx = load(one_pipe_yaml, &err);
	struct dpflow_pipe *pipe;
	struct dpflow_queue *q;
	struct status_log log = {0};
	struct dpflow_entry_cfg e;

	cr_assert_not_null(ctx, "%s", err.msg);
	pipe = dpflow_pipe_find(ctx, "ports");
	q = dpflow_queue_create(ctx, &err);
	for (uint16_t p = 1; p <= 10; p++) {
		e = port_entry(p);
		cr_assert_not_null(dpflow_entry_add(q, pipe, &e, &log, &err));
	}
	e = port_entry(5); /* duplicate of one in the same batch */
	cr_assert_not_null(dpflow_entry_add(q, pipe, &e, &log, &err));
	cr_expect_eq(dpflow_entries_process(q, count_status, &err), -EEXIST);
	cr_expect_eq(log.error, 1);
	cr_expect_eq(log.aborted, 10);
	cr_expect_eq(log.ok, 0);
	cr_expect_eq(dpflow_pipe_entry_count(pipe), 0, "nothing applied");

	/* the same batch without the duplicate goes in whole */
	memset(&log, 0, sizeof(log));
	for (uint16_t p = 1; p <= 10; p++) {
		e = port_entry(p);
		cr_assert_not_null(dpflow_entry_add(q, pipe, &e, &log, &err));
	}
	cr_expect_eq(dpflow_entries_process(q, count_status, &err), 0, "%s",
		     err.msg);
	cr_expect_eq(log.ok, 10);
	cr_expect_eq(dpflow_pipe_entry_count(pipe), 10);
	dpflow_queue_destroy(q);
	dpflow_ctx_destroy(ctx);
}

/* A batch dropped half-built (dpflow_queue_discard): nothing of it is
 * applied, the entries it meant to remove or update stay and can be
 * removed later, the slots its adds took are free again. */
Test(flow_entries, a_discarded_batch_changes_nothing)
{
	struct dpflow_error err;
	struct dpflow_ctx *ctx = load(one_pipe_yaml, &err);
	struct dpflow_pipe *pipe;
	struct dpflow_queue *q;
	struct dpflow_entry *ent[3];
	struct dpflow_entry_cfg e;

	cr_assert_not_null(ctx, "%s", err.msg);
	pipe = dpflow_pipe_find(ctx, "ports");
	q = dpflow_queue_create(ctx, &err);
	for (uint16_t p = 1; p <= 3; p++) {
		e = port_entry(p);
		ent[p - 1] = dpflow_entry_add(q, pipe, &e, NULL, &err);
		cr_assert_not_null(ent[p - 1]);
	}
	cr_assert_eq(dpflow_entries_process(q, NULL, &err), 0, "%s", err.msg);

	e = port_entry(7);
	cr_assert_not_null(dpflow_entry_add(q, pipe, &e, NULL, &err));
	cr_assert_eq(dpflow_entry_remove(q, ent[0], NULL), 0);
	e = port_entry(9);
	cr_assert_not_null(dpflow_entry_update(q, ent[1], &e, NULL, &err));
	dpflow_queue_discard(q);
	cr_expect_eq(dpflow_entries_process(q, NULL, &err), 0, "%s", err.msg);
	cr_expect_eq(dpflow_pipe_entry_count(pipe), 3, "%u entries",
		     dpflow_pipe_entry_count(pipe));
	for (uint16_t p = 1; p <= 3; p++)
		cr_expect_eq(dpflow_entry_cfg(ent[p - 1])->key[1], p,
			     "entry of port %u changed", p);

	/* the entries stayed active; port 7's add was not applied */
	cr_assert_eq(dpflow_entry_remove(q, ent[0], NULL), 0);
	e = port_entry(7);
	cr_assert_not_null(dpflow_entry_add(q, pipe, &e, NULL, &err));
	e = port_entry(9);
	cr_assert_not_null(dpflow_entry_update(q, ent[1], &e, NULL, &err));
	cr_expect_eq(dpflow_entries_process(q, NULL, &err), 0, "%s", err.msg);
	cr_expect_eq(dpflow_pipe_entry_count(pipe), 3);
	dpflow_queue_destroy(q);
	dpflow_ctx_destroy(ctx);
}

/*
 * A BASIC pipe without per-entry fields matches all packets that pass its
 * constant fields, through its one entry (empty key): with no entry every
 * packet misses; a second entry is a duplicate; once the entry is gone,
 * every packet misses again. A burst of mixed packets checks that each
 * packet's own constant fields still decide (the table is looked up once
 * a burst).
 */
static const char *match_all_yaml =
    "ports:\n"
    "  - {name: in, uri: 'ring:in,size=512'}\n"
    "  - {name: out, uri: 'ring:out,size=512'}\n"
    "pipes:\n"
    "  - name: tcp_only\n"
    "    type: basic\n"
    "    root: in\n"
    "    size: 4\n"
    "    match:\n"
    "      - {field: outer.ip.proto, value: 6}\n"
    "    monitor: {counter: true}\n"
    "    fwd: {port: out}\n"
    "    miss: drop\n";

static unsigned run_mixed(struct dpflow_ctx *ctx, uint16_t *dports)
{
	struct dpflow_pool *pool = dpflow_ctx_pool(ctx);
	uint32_t idx[40];

	/* TCP to 1..20 with UDP to 101..120 between them */
	for (unsigned i = 0; i < 40; i++)
		idx[i] = make_pkt(pool, i % 2 ? DPFLOW_L4_UDP : DPFLOW_L4_TCP,
				  (uint16_t)((i % 2 ? 101 : 1) + i / 2));
	dpflow_ctx_thread_online(ctx);
	dpflow_ctx_process_burst(ctx, 0, idx, 40);
	dpflow_ctx_thread_offline(ctx);
	return drain(ctx, "out", dports, 40);
}

Test(flow_run, basic_pipe_without_per_entry_fields_matches_all)
{
	struct dpflow_error err;
	struct dpflow_ctx *ctx = load(match_all_yaml, &err);
	struct dpflow_pipe *pipe;
	struct dpflow_queue *q;
	struct dpflow_entry *ent;
	struct dpflow_entry_cfg e;
	struct dpflow_counter c;
	uint64_t drops[DPFLOW_DROP__COUNT];
	uint16_t dports[40];

	cr_assert_not_null(ctx, "%s", err.msg);
	pipe = dpflow_pipe_find(ctx, "tcp_only");
	q = dpflow_queue_create(ctx, &err);
	cr_assert_not_null(q);
	cr_expect_eq(run_mixed(ctx, dports), 0, "no entry: all miss");

	memset(&e, 0, sizeof(e));
	ent = dpflow_entry_add(q, pipe, &e, NULL, &err);
	cr_assert_not_null(ent, "%s", err.msg);
	cr_assert_eq(dpflow_entries_process(q, NULL, &err), 0, "%s", err.msg);
	cr_assert_eq(run_mixed(ctx, dports), 20);
	for (unsigned i = 0; i < 20; i++)
		cr_expect_eq(dports[i], 1 + i, "TCP packet %u: dport %u", i,
			     dports[i]);
	dpflow_entry_counter(ent, &c);
	cr_expect_eq(c.pkts, 20);

	cr_assert_not_null(dpflow_entry_add(q, pipe, &e, NULL, &err));
	cr_expect_eq(dpflow_entries_process(q, NULL, &err), -EEXIST,
		     "a second entry: %s", err.msg);
	cr_expect_eq(dpflow_pipe_entry_count(pipe), 1);

	cr_assert_eq(dpflow_entry_remove(q, ent, NULL), 0);
	cr_assert_eq(dpflow_entries_process(q, NULL, &err), 0, "%s", err.msg);
	cr_expect_eq(run_mixed(ctx, dports), 0, "entry removed: all miss");
	dpflow_ctx_drops(ctx, drops);
	cr_expect_eq(drops[DPFLOW_DROP_FLOW_MISS_DROP], 40 + 20 + 40);
	dpflow_queue_destroy(q);
	dpflow_ctx_destroy(ctx);

	/* no fields at all, and the entry in the config: every packet */
	ctx = load("ports:\n"
		   "  - {name: in, uri: 'ring:in,size=512'}\n"
		   "  - {name: out, uri: 'ring:out,size=512'}\n"
		   "pipes:\n"
		   "  - name: all\n"
		   "    type: basic\n"
		   "    root: in\n"
		   "    match: []\n"
		   "    fwd: {port: out}\n"
		   "    miss: drop\n"
		   "    entries:\n"
		   "      - {match: {}}\n",
		   &err);
	cr_assert_not_null(ctx, "%s", err.msg);
	cr_expect_eq(run_mixed(ctx, dports), 40);
	for (unsigned i = 0; i < 40; i++) /* in order, as they came */
		cr_expect_eq(dports[i], (i % 2 ? 101 : 1) + i / 2,
			     "packet %u: dport %u", i, dports[i]);
	dpflow_ctx_destroy(ctx);
}

/* ---- a writer churns batches while a worker looks up ----------------------
 */

#define CHURN_KEYS    128
#define CHURN_BATCHES 1000

struct churn {
	struct dpflow_ctx *ctx;
	volatile int stop;
	volatile unsigned bursts;
	unsigned violations, states[3];
};

/* Set A is dports 1000.., set B 2000..; each batch swaps one for the other. */
static void *churn_worker(void *arg)
{
	struct churn *c = (struct churn *)arg;
	struct dpflow_pool *pool = dpflow_ctx_pool(c->ctx);
	uint16_t dports[2 * CHURN_KEYS];

	dpflow_ctx_thread_online(c->ctx);
	while (!c->stop) {
		uint32_t idx[2 * CHURN_KEYS];
		unsigned n, a = 0, b = 0;

		for (unsigned k = 0; k < CHURN_KEYS; k++) {
			idx[2 * k] =
			    make_pkt(pool, DPFLOW_L4_UDP, (uint16_t)(1000 + k));
			idx[2 * k + 1] =
			    make_pkt(pool, DPFLOW_L4_UDP, (uint16_t)(2000 + k));
		}
		dpflow_ctx_process_burst(c->ctx, 0, idx, 2 * CHURN_KEYS);
		n = drain(c->ctx, "out", dports, 2 * CHURN_KEYS);
		for (unsigned i = 0; i < n; i++) {
			a += dports[i] < 2000;
			b += dports[i] >= 2000;
		}
		/* one whole state: only A, only B, or (before the first
		 * batch) nothing */
		if (a == CHURN_KEYS && b == 0)
			c->states[1]++;
		else if (b == CHURN_KEYS && a == 0)
			c->states[2]++;
		else if (a == 0 && b == 0)
			c->states[0]++;
		else
			c->violations++;
		c->bursts++;
		dpflow_ctx_quiescent(c->ctx);
	}
	dpflow_ctx_thread_offline(c->ctx);
	return NULL;
}

Test(flow_entries, bursts_see_whole_batches_under_churn, .timeout = 120)
{
	struct dpflow_error err;
	struct churn c;
	struct dpflow_pipe *pipe;
	struct dpflow_queue *q;
	struct dpflow_entry *live[CHURN_KEYS];
	pthread_t worker;

	memset(&c, 0, sizeof(c));
	c.ctx = load(one_pipe_yaml, &err);
	cr_assert_not_null(c.ctx, "%s", err.msg);
	pipe = dpflow_pipe_find(c.ctx, "ports");
	q = dpflow_queue_create(c.ctx, &err);
	cr_assert_eq(pthread_create(&worker, NULL, churn_worker, &c), 0);
	while (c.bursts < 2)
		sched_yield();

	for (unsigned b = 0; b < CHURN_BATCHES; b++) {
		uint16_t base = (b % 2) ? 2000 : 1000;
		unsigned seen = c.bursts;

		for (unsigned k = 0; k < CHURN_KEYS; k++) {
			struct dpflow_entry_cfg e =
			    port_entry((uint16_t)(base + k));

			if (b)
				cr_assert_eq(
				    dpflow_entry_remove(q, live[k], NULL), 0);
			live[k] = dpflow_entry_add(q, pipe, &e, NULL, &err);
			cr_assert_not_null(live[k], "%s", err.msg);
		}
		cr_assert_eq(dpflow_entries_process(q, NULL, &err), 0, "%s",
			     err.msg);
		cr_assert_eq(dpflow_pipe_entry_count(pipe), CHURN_KEYS);
		/* let the worker run a burst or so between batches, so that
		 * batches land while bursts are in flight */
		while (c.bursts == seen && b % 8 == 0)
			sched_yield();
	}
	c.stop = 1;
	pthread_join(worker, NULL);
	cr_expect_eq(c.violations, 0, "%u of %u bursts saw half a batch",
		     c.violations, c.bursts);
	cr_expect_gt(c.bursts, 10);
	cr_expect_gt(c.states[1] + c.states[2], 0);
	dpflow_queue_destroy(q);
	dpflow_ctx_destroy(c.ctx);
}
