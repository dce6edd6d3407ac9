/*
 * Config loader features of the extended flow engine: the context section
 * (RSS queues, shared counters and meters), hash and ct pipes, monitors
 * (meters, shared counters, aging), colour forwarding, RSS and handler
 * forwarding, per-entry monitors and encapsulations, LPM with exact fields
 * and the meta.color / ct_state / ct_flags match fields. Each loads a
 * config and checks the structures the engine got (dpflow_pipe_cfg,
 * dpflow_entry_cfg); bad configs must fail with FILE:LINE: KEY: message
 * and leave nothing behind (run under ASan).
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <string.h>

#include "dpflow/config.h"
#include "dpflow/dpflow.h"
#include "dpflow/flow.h"
#include "flow/ct.h"

static uint64_t sink_pkts;

static void sink(void *arg, struct dpflow_pool *pool, const uint32_t *idx,
		 uint16_t n)
{
	*(uint64_t *)arg += n;
	dpflow_pool_free_bulk(pool, idx, n);
}

static const struct dpflow_handler_def handlers[] = {
    {"sink", sink, &sink_pkts},
};

static struct dpflow_ctx *load(const char *yaml, struct dpflow_error *err)
{
	struct dpflow_config_opts o = {.handlers = handlers, .n_handlers = 1};

	memset(err, 0, sizeof(*err));
	return dpflow_config_load_string(yaml, "test.yaml", &o, err);
}

static struct dpflow_ctx *load_ok(const char *yaml)
{
	struct dpflow_error err;
	struct dpflow_ctx *ctx = load(yaml, &err);

	cr_assert_not_null(ctx, "load failed: %s", err.msg);
	return ctx;
}

static const struct dpflow_pipe_cfg *pipe_cfg(struct dpflow_ctx *ctx,
					      const char *name)
{
	struct dpflow_pipe *p = dpflow_pipe_find(ctx, name);

	cr_assert_not_null(p, "no pipe %s", name);
	return dpflow_pipe_cfg(p);
}

/* The @n-th active entry of pipe @name in slot order. */
static const struct dpflow_entry_cfg *entry_cfg(struct dpflow_ctx *ctx,
						const char *name, unsigned n)
{
	struct dpflow_pipe *p = dpflow_pipe_find(ctx, name);

	cr_assert_not_null(p);
	for (uint32_t s = 0; s < dpflow_pipe_size(p); s++) {
		const struct dpflow_entry *e = dpflow_pipe_entry(p, s);

		if (e && n-- == 0)
			return dpflow_entry_cfg(e);
	}
	cr_assert_fail("pipe %s has too few entries", name);
	return NULL;
}

/* The entry whose hash_index is @slot. */
static const struct dpflow_entry_cfg *
hash_entry(struct dpflow_ctx *ctx, const char *name, uint32_t slot)
{
	struct dpflow_pipe *p = dpflow_pipe_find(ctx, name);

	for (uint32_t s = 0; p && s < dpflow_pipe_size(p); s++) {
		const struct dpflow_entry *e = dpflow_pipe_entry(p, s);

		if (e && dpflow_entry_cfg(e)->hash_index == slot)
			return dpflow_entry_cfg(e);
	}
	cr_assert_fail("no entry at hash slot %u", slot);
	return NULL;
}

#define PORTS "ports:\n  - {name: a, uri: 'ring:a'}\n"

/* ---- what loads -------------------------------------------------------- */

Test(config_features, context_section)
{
	struct dpflow_ctx *ctx =
	    load_ok("context:\n"
		    "  rss_queues: 4\n"
		    "  rss_queue_size: 256\n"
		    "  shared_counters: 3\n"
		    "  shared_meters:\n"
		    "    - {alg: srtcm, cir: 1000, cbs: 100, ebs: 50}\n"
		    "    - {alg: trtcm, cir: 1000, pir: 2000, cbs: 100, pbs: "
		    "200}\n" PORTS "pipes:\n"
		    "  - {name: p, type: basic, match: [outer.ip.proto],\n"
		    "     monitor: {shared_meter: 2, shared_counter: 3}}\n");

	cr_assert_eq(dpflow_ctx_rss_queues(ctx), 4);
	cr_assert_eq(dpflow_ctx_shared_counters(ctx), 3);
	cr_assert_eq(pipe_cfg(ctx, "p")->monitor.shared_meter, 2);
	cr_assert_eq(pipe_cfg(ctx, "p")->monitor.shared_counter, 3);
	dpflow_ctx_destroy(ctx);
}

Test(config_features, hash_pipe)
{
	struct dpflow_ctx *ctx =
	    load_ok(PORTS "pipes:\n"
			  "  - name: h\n"
			  "    type: hash\n"
			  "    size: 4\n"
			  "    hash_seed: 0x1234\n"
			  "    match: [outer.ipv4.src, outer.l4.sport]\n"
			  "    fwd: {port: a}\n"
			  "    entries:\n"
			  "      - {index: 0}\n"
			  "      - {index: 3}\n");
	const struct dpflow_pipe_cfg *c = pipe_cfg(ctx, "h");

	cr_assert_eq(c->type, DPFLOW_PIPE_HASH);
	cr_assert_eq(c->hash_seed, 0x1234);
	cr_assert_eq(c->size, 4);
	cr_assert_eq(dpflow_pipe_entry_count(dpflow_pipe_find(ctx, "h")), 2);
	cr_assert_eq(hash_entry(ctx, "h", 0)->hash_index, 0);
	cr_assert_eq(hash_entry(ctx, "h", 3)->hash_index, 3);
	dpflow_ctx_destroy(ctx);
}

Test(config_features, ct_pipe)
{
	struct dpflow_ctx *ctx = load_ok(
	    PORTS
	    "pipes:\n"
	    "  - name: ct\n"
	    "    type: ct\n"
	    "    root: a\n"
	    "    size: 1000\n"
	    "    ct:\n"
	    "      inner: true\n"
	    "      lookup_only: false\n"
	    "      tcp_strict: true\n"
	    "      evict: true\n"
	    "      user_reg: meta.reg2\n"
	    "      timeouts_ms: {established: 60000, udp_unreplied: 500,\n"
	    "                    other_replied: 7}\n"
	    "    fwd: {port: a}\n"
	    "    miss: drop\n");
	const struct dpflow_pipe_cfg *c = pipe_cfg(ctx, "ct");

	cr_assert_eq(c->type, DPFLOW_PIPE_CT);
	cr_assert_eq(c->match.n, 0);
	cr_assert(c->ct.inner && !c->ct.lookup_only && c->ct.tcp_strict &&
		  c->ct.evict);
	cr_assert(c->ct.user);
	cr_assert_eq(c->ct.user_reg, 2);
	cr_assert_eq(c->ct.timeout_ms[DPFLOW_CT_ESTABLISHED], 60000);
	cr_assert_eq(c->ct.timeout_ms[DPFLOW_CT_UDP_UNREPLIED], 500);
	cr_assert_eq(c->ct.timeout_ms[DPFLOW_CT_OTHER_REPLIED], 7);
	cr_assert_eq(c->ct.timeout_ms[DPFLOW_CT_SYN_SENT], 0);
	cr_assert_eq(c->fwd.kind, DPFLOW_FWD_PORT);
	dpflow_ctx_destroy(ctx);
}

Test(config_features, ct_pipe_defaults_and_constant_match)
{
	struct dpflow_ctx *ctx =
	    load_ok(PORTS "pipes:\n"
			  "  - name: ct\n"
			  "    type: ct\n"
			  "    match: [{field: outer.l3.type, value: 1}]\n"
			  "    fwd: drop\n");
	const struct dpflow_pipe_cfg *c = pipe_cfg(ctx, "ct");

	cr_assert_eq(c->match.n, 1);
	cr_assert(!c->match.f[0].per_entry);
	cr_assert(!c->ct.user && !c->ct.tcp_strict && !c->ct.inner);
	dpflow_ctx_destroy(ctx);
}

Test(config_features, monitor)
{
	struct dpflow_ctx *ctx = load_ok(
	    "context: {shared_counters: 2}\n" PORTS "pipes:\n"
	    "  - name: m\n"
	    "    type: basic\n"
	    "    match: [outer.ip.proto]\n"
	    "    monitor:\n"
	    "      counter: true\n"
	    "      shared_counter: 2\n"
	    "      meter: {alg: trtcm, cir: 1000, pir: 5000, cbs: 10, pbs: "
	    "20, color_aware: true}\n"
	    "      aging_ms: 250\n");
	const struct dpflow_monitor *m = &pipe_cfg(ctx, "m")->monitor;

	cr_assert(m->counter);
	cr_assert_eq(m->shared_counter, 2);
	cr_assert_eq(m->meter.alg, DPFLOW_METER_ALG_TRTCM);
	cr_assert_eq(m->meter.cir, 1000);
	cr_assert_eq(m->meter.pir, 5000);
	cr_assert_eq(m->meter.cbs, 10);
	cr_assert_eq(m->meter.pbs, 20);
	cr_assert_eq(m->meter.ebs, 0);
	cr_assert(m->meter.color_aware);
	cr_assert_eq(m->aging_ms, 250);
	cr_assert_eq(m->shared_meter, 0);
	dpflow_ctx_destroy(ctx);
}

Test(config_features, color_fwd)
{
	struct dpflow_ctx *ctx = load_ok(
	    PORTS "pipes:\n"
		  "  - name: m\n"
		  "    type: basic\n"
		  "    match: [outer.ip.proto]\n"
		  "    monitor: {meter: {alg: srtcm, cir: 1, cbs: 2, ebs: 3}}\n"
		  "    color_fwd: {yellow: {pipe: y}, red: {port: a}}\n"
		  "  - name: y\n"
		  "    type: basic\n"
		  "    match: [outer.ip.proto]\n"
		  "  - name: r\n"
		  "    type: basic\n"
		  "    match: [outer.ip.proto]\n"
		  "    monitor: {meter: {alg: srtcm, cir: 1, cbs: 2}}\n"
		  "    color_fwd: {red: drop}\n");
	const struct dpflow_pipe_cfg *c = pipe_cfg(ctx, "m");

	cr_assert_eq(c->monitor.meter.alg, DPFLOW_METER_ALG_SRTCM);
	cr_assert_eq(c->monitor.meter.ebs, 3);
	cr_assert(c->color_fwd.yellow_set && c->color_fwd.red_set);
	cr_assert_eq(c->color_fwd.yellow.kind, DPFLOW_FWD_PIPE);
	cr_assert_eq(c->color_fwd.yellow.pipe, dpflow_pipe_find(ctx, "y"));
	cr_assert_eq(c->color_fwd.red.kind, DPFLOW_FWD_PORT);
	c = pipe_cfg(ctx, "r");
	cr_assert(!c->color_fwd.yellow_set && c->color_fwd.red_set);
	cr_assert_eq(c->color_fwd.red.kind, DPFLOW_FWD_DROP);
	dpflow_ctx_destroy(ctx);
}

Test(config_features, rss_and_handler_fwd)
{
	struct dpflow_ctx *ctx = load_ok(
	    "context: {rss_queues: 4}\n" PORTS "pipes:\n"
	    "  - name: p\n"
	    "    type: basic\n"
	    "    match: [outer.ip.proto]\n"
	    "    fwd: {rss: {queues: 3, first: 1, inner: true}}\n"
	    "    miss: {handler: sink}\n"
	    "  - name: q\n"
	    "    type: basic\n"
	    "    match: [outer.ip.proto]\n"
	    "    fwd: per-entry\n"
	    "    entries:\n"
	    "      - {match: {outer.ip.proto: 6}, fwd: {rss: {queues: 4}}}\n"
	    "      - {match: {outer.ip.proto: 17}, fwd: {handler: sink}}\n");
	const struct dpflow_pipe_cfg *c = pipe_cfg(ctx, "p");
	const struct dpflow_entry_cfg *e0 = entry_cfg(ctx, "q", 0);
	const struct dpflow_entry_cfg *e1 = entry_cfg(ctx, "q", 1);

	cr_assert_eq(c->fwd.kind, DPFLOW_FWD_RSS);
	cr_assert_eq(c->fwd.rss_queue, 1);
	cr_assert_eq(c->fwd.rss_n, 3);
	cr_assert(c->fwd.rss_inner);
	cr_assert_eq(c->miss_fwd.kind, DPFLOW_FWD_HANDLER);
	cr_assert_eq(c->miss_fwd.handler, sink);
	cr_assert_eq(c->miss_fwd.handler_arg, &sink_pkts);
	if (e0->fwd.kind != DPFLOW_FWD_RSS) { /* slot order: swap */
		const struct dpflow_entry_cfg *t = e0;

		e0 = e1;
		e1 = t;
	}
	cr_assert_eq(e0->fwd.kind, DPFLOW_FWD_RSS);
	cr_assert_eq(e0->fwd.rss_queue, 0);
	cr_assert_eq(e0->fwd.rss_n, 4);
	cr_assert(!e0->fwd.rss_inner);
	cr_assert_eq(e1->fwd.kind, DPFLOW_FWD_HANDLER);
	cr_assert_eq(e1->fwd.handler, sink);
	dpflow_ctx_destroy(ctx);
}

Test(config_features, entry_monitor_overrides)
{
	struct dpflow_ctx *ctx = load_ok(
	    "context: {shared_counters: 2}\n" PORTS "pipes:\n"
	    "  - name: p\n"
	    "    type: basic\n"
	    "    match: [outer.ip.proto]\n"
	    "    monitor: {meter: {alg: srtcm, cir: 100, cbs: 10}, "
	    "aging_ms: 1000}\n"
	    "    entries:\n"
	    "      - match: {outer.ip.proto: 6}\n"
	    "        meter: {alg: trtcm, cir: 7, pir: 8, cbs: 9, pbs: 10}\n"
	    "        shared_counter: 1\n"
	    "        aging_ms: 20\n");
	const struct dpflow_entry_cfg *e = entry_cfg(ctx, "p", 0);

	cr_assert_eq(e->meter.alg, DPFLOW_METER_ALG_TRTCM);
	cr_assert_eq(e->meter.cir, 7);
	cr_assert_eq(e->meter.pir, 8);
	cr_assert_eq(e->meter.cbs, 9);
	cr_assert_eq(e->meter.pbs, 10);
	cr_assert_eq(e->shared_counter, 1);
	cr_assert_eq(e->aging_ms, 20);
	dpflow_ctx_destroy(ctx);
}

Test(config_features, per_entry_encap)
{
	struct dpflow_ctx *ctx = load_ok(
	    PORTS "pipes:\n"
		  "  - name: p\n"
		  "    type: basic\n"
		  "    match: [outer.ip.proto]\n"
		  "    actions:\n"
		  "      - [{set_mac_dst: per-entry}, {encap: per-entry}]\n"
		  "    fwd: {port: a}\n"
		  "    entries:\n"
		  "      - match: {outer.ip.proto: 17}\n"
		  "        values:\n"
		  "          - 02:00:00:00:00:09\n"
		  "          - {type: vxlan, src: 192.0.2.1, dst: 192.0.2.2,\n"
		  "             dst_mac: '02:00:00:00:00:07', vni: 42, ttl: "
		  "9}\n");
	const struct dpflow_action *a = &pipe_cfg(ctx, "p")->actions[0].a[1];
	const struct dpflow_entry_cfg *e = entry_cfg(ctx, "p", 0);
	uint8_t dst[16] = {0};

	cr_assert_eq(a->kind, DPFLOW_ACT_ENCAP);
	cr_assert(a->per_entry);
	cr_assert_eq(e->encap.tun_type, DPFLOW_TUN_VXLAN);
	cr_assert_eq(e->encap.id, 42);
	cr_assert_eq(e->encap.ttl, 9);
	cr_assert_eq(e->encap.ipv6, 0);
	cr_assert_eq(e->encap.dst_mac[5], 7);
	dst[10] = dst[11] = 0xff;
	inet_pton(AF_INET, "192.0.2.2", dst + 12);
	cr_assert_arr_eq(e->encap.dst, dst, 16);
	cr_assert_eq(e->action_value[0][5], 9);
	dpflow_ctx_destroy(ctx);
}

Test(config_features, lpm_with_exact_fields)
{
	struct dpflow_ctx *ctx = load_ok(
	    PORTS
	    "pipes:\n"
	    "  - name: vrf\n"
	    "    type: lpm\n"
	    "    match: [meta.reg0, outer.ipv4.dst]\n"
	    "    entries:\n"
	    "      - {match: {meta.reg0: 7, outer.ipv4.dst: "
	    "10.1.0.0/16}}\n"
	    "      - {match: {meta.reg0: 8, outer.ipv4.dst: 10.1.2.3}}\n");
	const struct dpflow_entry_cfg *a = entry_cfg(ctx, "vrf", 0);
	const struct dpflow_entry_cfg *b = entry_cfg(ctx, "vrf", 1);
	static const uint8_t key_a[8] = {0, 0, 0, 7, 10, 1, 0, 0};
	static const uint8_t key_b[8] = {0, 0, 0, 8, 10, 1, 2, 3};

	if (a->key[3] != 7) {
		const struct dpflow_entry_cfg *t = a;

		a = b;
		b = t;
	}
	cr_assert_arr_eq(a->key, key_a, 8);
	cr_assert_eq(a->prefix_len, 16);
	cr_assert_arr_eq(b->key, key_b, 8);
	cr_assert_eq(b->prefix_len, 32);
	dpflow_ctx_destroy(ctx);
}

Test(config_features, color_and_ct_match_fields)
{
	struct dpflow_ctx *ctx = load_ok(
	    PORTS "pipes:\n"
		  "  - name: p\n"
		  "    type: acl\n"
		  "    match: [meta.color, meta.ct_state, meta.ct_flags]\n"
		  "    entries:\n"
		  "      - {match: {meta.color: 2, meta.ct_state: 3,\n"
		  "                 meta.ct_flags: 0x02/0x02}, priority: 1}\n"
		  "      - {match: {meta.ct_state: 9-12}, priority: 2}\n"
		  "  - name: c\n"
		  "    type: basic\n"
		  "    match: [{field: meta.color, value: 1}, meta.ct_state]\n"
		  "    entries:\n"
		  "      - {match: {meta.ct_state: 1}}\n");
	const struct dpflow_entry_cfg *e = entry_cfg(ctx, "p", 0);
	const struct dpflow_pipe_cfg *c = pipe_cfg(ctx, "c");

	if (e->priority != 1)
		e = entry_cfg(ctx, "p", 1);
	cr_assert_eq(e->key[0], 2);
	cr_assert_eq(e->key[1], 3);
	cr_assert_eq(e->key[2], 2);
	cr_assert_eq(e->mask[2], 2);
	cr_assert_eq(c->match.f[0].field, DPFLOW_FIELD_META_COLOR);
	cr_assert_eq(c->match.f[0].value[0], 1);
	dpflow_ctx_destroy(ctx);
}

/* ---- what fails, and how ------------------------------------------------ */

struct bad_config {
	const char *what;
	const char *yaml;
	const char *msg[3]; /* pieces the message must contain */
};

static const struct bad_config bad_configs[] = {
    {"rss forwarding beyond the context's queues",
     "context: {rss_queues: 2}\n" PORTS "pipes:\n"
     "  - name: p\n"
     "    type: basic\n"
     "    match: [outer.ip.proto]\n"
     "    fwd: {rss: {queues: 2, first: 1}}\n",
     {"test.yaml:8: ", "pipes[0].fwd.rss.first: ",
      "rss queues 1..2: the context has 2 (context.rss_queues)"}},
    {"rss forwarding without rss queues",
     PORTS "pipes:\n"
	   "  - {name: p, type: basic, match: [outer.ip.proto],\n"
	   "     fwd: {rss: {queues: 1}}}\n",
     {"test.yaml:5: ", "pipes[0].fwd.rss: ", "the context has 0"}},
    {"unknown handler",
     PORTS "pipes:\n"
	   "  - name: p\n"
	   "    type: basic\n"
	   "    match: [outer.ip.proto]\n"
	   "    miss: {handler: nosuch}\n",
     {"test.yaml:7: ", "pipes[0].miss.handler: ", "no handler named 'nosuch'"}},
    {"trtcm with pir below cir",
     PORTS "pipes:\n"
	   "  - name: p\n"
	   "    type: basic\n"
	   "    match: [outer.ip.proto]\n"
	   "    monitor:\n"
	   "      meter: {alg: trtcm, cir: 200, pir: 100, cbs: 1, pbs: 1}\n",
     {"test.yaml:8: ", "pipes[0].monitor.meter.pir: ",
      "pir 100 is below cir 200"}},
    {"srtcm meter with a trtcm key",
     PORTS "pipes:\n"
	   "  - name: p\n"
	   "    type: basic\n"
	   "    match: [outer.ip.proto]\n"
	   "    monitor: {meter: {alg: srtcm, cir: 1, cbs: 1, pir: 2}}\n",
     {"test.yaml:7: ", "pipes[0].monitor.meter.pir: ",
      "srtcm meters take cir, cbs and ebs, not 'pir'"}},
    {"trtcm meter with an srtcm key",
     PORTS "pipes:\n"
	   "  - name: p\n"
	   "    type: basic\n"
	   "    match: [outer.ip.proto]\n"
	   "    monitor:\n"
	   "      meter: {alg: trtcm, cir: 1, pir: 2, cbs: 1, pbs: 1,\n"
	   "              ebs: 4}\n",
     {"test.yaml:9: ", "pipes[0].monitor.meter.ebs: ",
      "trtcm meters take cir, pir, cbs and pbs, not 'ebs'"}},
    {"meter with an unknown key",
     PORTS "pipes:\n"
	   "  - {name: p, type: basic, match: [outer.ip.proto],\n"
	   "     monitor: {meter: {alg: srtcm, cir: 1, cbs: 1, rate: 2}}}\n",
     {"test.yaml:5: ", "pipes[0].monitor.meter.rate: ", "unknown key 'rate'"}},
    {"meter with an unknown algorithm",
     PORTS "pipes:\n"
	   "  - {name: p, type: basic, match: [outer.ip.proto],\n"
	   "     monitor: {meter: {alg: fast, cir: 1, cbs: 1}}}\n",
     {"test.yaml:5: ", "pipes[0].monitor.meter.alg: ",
      "unknown meter algorithm 'fast' (srtcm or trtcm)"}},
    {"meter without cbs",
     PORTS "pipes:\n"
	   "  - {name: p, type: basic, match: [outer.ip.proto],\n"
	   "     monitor: {meter: {alg: srtcm, cir: 1}}}\n",
     {"test.yaml:5: ", "pipes[0].monitor.meter: ", "'cbs' (bytes) is missing"}},
    {"bad shared meter in the context",
     "context:\n"
     "  shared_meters:\n"
     "    - {alg: srtcm, cir: 1, cbs: 1}\n"
     "    - {alg: trtcm, cir: 9, pir: 1, cbs: 1, pbs: 1}\n" PORTS,
     {"test.yaml:4: ", "context.shared_meters[1].pir: ",
      "pir 1 is below cir 9"}},
    {"entries on a ct pipe",
     PORTS "pipes:\n"
	   "  - name: ct\n"
	   "    type: ct\n"
	   "    entries:\n"
	   "      - {match: {}}\n",
     {"test.yaml:7: ", "pipes[0].entries: ", "a ct pipe takes no entries"}},
    {"bad ct state name",
     PORTS "pipes:\n"
	   "  - name: ct\n"
	   "    type: ct\n"
	   "    ct:\n"
	   "      timeouts_ms:\n"
	   "        establishd: 1000\n",
     {"test.yaml:8: ", "pipes[0].ct.timeouts_ms.establishd: ",
      "unknown connection state 'establishd'"}},
    {"ct timeout beyond the maximum",
     PORTS "pipes:\n"
	   "  - {name: ct, type: ct, ct: {timeouts_ms: {close: 2147483648}}}\n",
     {"test.yaml:4: ", "pipes[0].ct.timeouts_ms.close: ",
      "'2147483648' is out of range (max 2147483647)"}},
    {"ct user register that is not a register",
     PORTS "pipes:\n"
	   "  - {name: ct, type: ct, ct: {user_reg: meta.port}}\n",
     {"test.yaml:4: ", "pipes[0].ct.user_reg: ",
      "'meta.port': expected meta.reg0 .. meta.reg3"}},
    {"ct settings on a basic pipe",
     PORTS "pipes:\n"
	   "  - {name: p, type: basic, match: [outer.ip.proto],\n"
	   "     ct: {inner: true}}\n",
     {"test.yaml:5: ", "pipes[0].ct: ", "'ct' is for ct pipes"}},
    {"counter on a ct pipe",
     PORTS "pipes:\n"
	   "  - {name: ct, type: ct, monitor: {counter: true}}\n",
     {"test.yaml:4: ", "pipes[0].monitor: ",
      "a ct pipe has no entries to count"}},
    {"ct pipe with a per-entry field",
     PORTS "pipes:\n"
	   "  - {name: ct, type: ct, match: [outer.ip.proto]}\n",
     {"test.yaml:4: ", "pipes[0]: ", "only hold constant fields"}},
    {"hash index out of range",
     PORTS "pipes:\n"
	   "  - name: h\n"
	   "    type: hash\n"
	   "    size: 4\n"
	   "    match: [outer.ipv4.src]\n"
	   "    entries:\n"
	   "      - {index: 4}\n",
     {"test.yaml:9: ", "pipes[0].entries[0].index: ",
      "index 4: pipe 'h' has slots 0..3"}},
    {"hash entry without an index",
     PORTS "pipes:\n"
	   "  - {name: h, type: hash, size: 4, match: [outer.ipv4.src],\n"
	   "     entries: [{priority: 1}]}\n",
     {"test.yaml:5: ", "pipes[0].entries[0]: ",
      "'index' (the slot, 0..3) is missing"}},
    {"hash entry with a match",
     PORTS "pipes:\n"
	   "  - {name: h, type: hash, size: 4, match: [outer.ipv4.src],\n"
	   "     entries: [{index: 1, match: {outer.ipv4.src: 1.2.3.4}}]}\n",
     {"test.yaml:5: ", "pipes[0].entries[0].match: ",
      "a hash pipe's entries take 'index'"}},
    {"two hash entries in one slot",
     PORTS "pipes:\n"
	   "  - name: h\n"
	   "    type: hash\n"
	   "    size: 4\n"
	   "    match: [outer.ipv4.src]\n"
	   "    entries:\n"
	   "      - {index: 1}\n"
	   "      - {index: 1}\n",
     {"test.yaml:10: ", "pipes[0].entries[1]: ",
      "slot 1 already has an entry"}},
    {"index on a basic pipe",
     PORTS "pipes:\n"
	   "  - {name: p, type: basic, match: [outer.ip.proto],\n"
	   "     entries: [{index: 1, match: {outer.ip.proto: 6}}]}\n",
     {"test.yaml:5: ", "pipes[0].entries[0].index: ",
      "'index' is for the entries of hash pipes"}},
    {"hash seed on a basic pipe",
     PORTS
     "pipes:\n"
     "  - {name: p, type: basic, match: [outer.ip.proto], hash_seed: 1}\n",
     {"test.yaml:4: ", "pipes[0].hash_seed: ", "'hash_seed' is for hash"}},
    {"shared counter the context lacks",
     "context: {shared_counters: 2}\n" PORTS "pipes:\n"
     "  - {name: p, type: basic, match: [outer.ip.proto],\n"
     "     monitor: {shared_counter: 3}}\n",
     {"test.yaml:6: ", "pipes[0].monitor.shared_counter: ",
      "shared counter 3: the context has 2"}},
    {"entry shared counter zero",
     "context: {shared_counters: 2}\n" PORTS "pipes:\n"
     "  - {name: p, type: basic, match: [outer.ip.proto],\n"
     "     entries: [{match: {outer.ip.proto: 6}, shared_counter: 0}]}\n",
     {"test.yaml:6: ", "pipes[0].entries[0].shared_counter: ",
      "shared counter 0: the context has 2"}},
    {"shared meter the context lacks",
     PORTS "pipes:\n"
	   "  - {name: p, type: basic, match: [outer.ip.proto],\n"
	   "     monitor: {shared_meter: 1}}\n",
     {"test.yaml:5: ", "pipes[0].monitor.shared_meter: ",
      "shared meter 1: the context has 0"}},
    {"meter and shared meter at once",
     "context: {shared_meters: [{alg: srtcm, cir: 1, cbs: 1}]}\n" PORTS
     "pipes:\n"
     "  - {name: p, type: basic, match: [outer.ip.proto],\n"
     "     monitor: {meter: {alg: srtcm, cir: 1, cbs: 1}, shared_meter: "
     "1}}\n",
     {"test.yaml:6: ", "pipes[0].monitor.shared_meter: ",
      "either 'meter' (one per entry) or 'shared_meter'"}},
    {"colour forwarding without a meter",
     PORTS "pipes:\n"
	   "  - {name: p, type: basic, match: [outer.ip.proto],\n"
	   "     color_fwd: {red: drop}}\n",
     {"test.yaml:5: ", "pipes[0].color_fwd: ",
      "colour forwarding needs a meter"}},
    {"colour forwarding to a missing pipe",
     PORTS "pipes:\n"
	   "  - {name: p, type: basic, match: [outer.ip.proto],\n"
	   "     monitor: {meter: {alg: srtcm, cir: 1, cbs: 1}},\n"
	   "     color_fwd: {yellow: {pipe: nope}}}\n",
     {"test.yaml:6: ", "pipes[0].color_fwd.yellow.pipe: ",
      "pipe 'nope' does not exist"}},
    {"entry meter without a pipe meter",
     PORTS "pipes:\n"
	   "  - name: p\n"
	   "    type: basic\n"
	   "    match: [outer.ip.proto]\n"
	   "    entries:\n"
	   "      - match: {outer.ip.proto: 6}\n"
	   "        meter: {alg: srtcm, cir: 1, cbs: 1}\n",
     {"test.yaml:9: ", "pipes[0].entries[0].meter: ",
      "pipe 'p' has no meter per entry (monitor.meter)"}},
    {"entry aging without pipe aging",
     PORTS "pipes:\n"
	   "  - {name: p, type: basic, match: [outer.ip.proto],\n"
	   "     entries: [{match: {outer.ip.proto: 6}, aging_ms: 5}]}\n",
     {"test.yaml:5: ", "pipes[0].entries[0].aging_ms: ",
      "pipe 'p' has no aging (monitor.aging_ms)"}},
    {"aging of zero",
     PORTS "pipes:\n"
	   "  - {name: p, type: basic, match: [outer.ip.proto],\n"
	   "     monitor: {aging_ms: 0}}\n",
     {"test.yaml:5: ", "pipes[0].monitor.aging_ms: ", "0 is below 1"}},
    {"rss queues beyond the maximum",
     "context: {rss_queues: 65}\n" PORTS,
     {"test.yaml:1: ", "context.rss_queues: ",
      "'65' is out of range (max 64)"}},
    {"rss queue size not a power of two",
     "context:\n  rss_queues: 1\n  rss_queue_size: 100\n" PORTS,
     {"test.yaml:3: ", "context.rss_queue_size: ",
      "100 is not a power of two"}},
    {"unknown context key",
     "context: {rss_queue: 1}\n" PORTS,
     {"test.yaml:1: ", "context.rss_queue: ", "unknown key 'rss_queue'"}},
    {"per-entry encap value that is not a mapping",
     PORTS "pipes:\n"
	   "  - name: p\n"
	   "    type: basic\n"
	   "    match: [outer.ip.proto]\n"
	   "    actions: [[{encap: per-entry}]]\n"
	   "    entries:\n"
	   "      - {match: {outer.ip.proto: 6}, values: [vxlan]}\n",
     {"test.yaml:9: ", "pipes[0].entries[0].values[0]: ",
      "expected a mapping"}},
    {"per-entry encap without its values",
     PORTS "pipes:\n"
	   "  - name: p\n"
	   "    type: basic\n"
	   "    match: [outer.ip.proto]\n"
	   "    actions: [[{encap: per-entry}]]\n"
	   "    entries:\n"
	   "      - {match: {outer.ip.proto: 6}}\n",
     {"test.yaml:9: ", "pipes[0].entries[0]: ",
      "action 0 ('encap') takes its value from the entry"}},
    {"per-entry encap with a bad type",
     PORTS "pipes:\n"
	   "  - name: p\n"
	   "    type: basic\n"
	   "    match: [outer.ip.proto]\n"
	   "    actions: [[{encap: per-entry}]]\n"
	   "    entries:\n"
	   "      - match: {outer.ip.proto: 6}\n"
	   "        values: [{type: mpls, src: 1.1.1.1, dst: 2.2.2.2}]\n",
     {"test.yaml:10: ", "pipes[0].entries[0].values[0].type: ",
      "'mpls': expected vxlan, geneve, gre or ipip"}},
    {"lpm exact field with a mask",
     PORTS "pipes:\n"
	   "  - name: v\n"
	   "    type: lpm\n"
	   "    match: [meta.reg0, outer.ipv4.dst]\n"
	   "    entries:\n"
	   "      - {match: {meta.reg0: 0x10/0xf0, outer.ipv4.dst: "
	   "10.0.0.0/8}}\n",
     {"test.yaml:8: ", "pipes[0].entries[0].match.meta.reg0: ",
      "the fields before an lpm pipe's address match exact values"}},
    {"lpm exact field missing",
     PORTS "pipes:\n"
	   "  - name: v\n"
	   "    type: lpm\n"
	   "    match: [meta.reg0, outer.ipv4.dst]\n"
	   "    entries:\n"
	   "      - {match: {outer.ipv4.dst: 10.0.0.0/8}}\n",
     {"test.yaml:8: ", "pipes[0].entries[0].match: ",
      "field 'meta.reg0' is missing"}},
    {"ct_state value out of range",
     PORTS "pipes:\n"
	   "  - {name: p, type: basic, match: [meta.ct_state],\n"
	   "     entries: [{match: {meta.ct_state: 300}}]}\n",
     {"test.yaml:5: ", "pipes[0].entries[0].match.meta.ct_state: ",
      "'300' is out of range (max 255)"}},
    {"color value not a number",
     PORTS "pipes:\n"
	   "  - {name: p, type: basic, match: [meta.color],\n"
	   "     entries: [{match: {meta.color: red}}]}\n",
     {"test.yaml:5: ", "pipes[0].entries[0].match.meta.color: ",
      "'red' is not a number"}},
};

Test(config_features, bad_configs)
{
	for (size_t i = 0; i < sizeof(bad_configs) / sizeof(bad_configs[0]);
	     i++) {
		const struct bad_config *b = &bad_configs[i];
		struct dpflow_error err;
		struct dpflow_ctx *ctx = load(b->yaml, &err);

		cr_expect_null(ctx, "%s: loaded", b->what);
		if (ctx) {
			dpflow_ctx_destroy(ctx);
			continue;
		}
		cr_expect_neq(err.code, 0, "%s: no error code", b->what);
		for (int k = 0; k < 3 && b->msg[k]; k++)
			cr_expect(strstr(err.msg, b->msg[k]) != NULL,
				  "%s: message '%s' lacks '%s'", b->what,
				  err.msg, b->msg[k]);
	}
}

Test(config_features, handler_registration_errors)
{
	static const struct dpflow_handler_def twice[] = {
	    {"h", sink, NULL},
	    {"h", sink, NULL},
	};
	struct dpflow_config_opts o = {.handlers = twice, .n_handlers = 2};
	struct dpflow_error err = {0};
	struct dpflow_ctx *ctx =
	    dpflow_config_load_string(PORTS, "test.yaml", &o, &err);

	cr_assert_null(ctx);
	cr_assert(strstr(err.msg, "test.yaml: handler 'h': ") != NULL, "%s",
		  err.msg);
	cr_assert(strstr(err.msg, "already exists") != NULL, "%s", err.msg);
}
