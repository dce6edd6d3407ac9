/*
 * Stable entry ids: an update keeps the entry's id and its counter goes
 * on; a removed entry's id is not given to the next entry added; the
 * control socket's entries.list and counters replies, the Prometheus
 * labels and the library all name entries by that id, not by slot.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "dpflow/config.h"
#include "dpflow/ctl.h"
#include "dpflow/dpflow.h"
#include "dpflow/flow.h"
#include "dpflow/gen.h"
#include "dpflow/metrics.h"

static const char cfg_yaml[] =
    "ports:\n"
    "  - {name: in, uri: 'ring:in,size=1024'}\n"
    "  - {name: out, uri: 'ring:out,size=1024'}\n"
    "pipes:\n"
    "  - name: fw\n"
    "    type: basic\n"
    "    root: in\n"
    "    match: [outer.l4.dport]\n"
    "    actions: [[{set_mac_dst: per-entry}]]\n"
    "    monitor: {counter: true}\n"
    "    fwd: {port: out}\n"
    "    miss: drop\n"
    "    entries:\n"
    "      - {match: {outer.l4.dport: 80}, values: ['02:00:00:00:00:01']}\n"
    "      - {match: {outer.l4.dport: 443}, values: ['02:00:00:00:00:02']}\n";

/* Run @n packets of 100 bytes to TCP port @dport through the pipeline. */
static void send_pkts(struct dpflow_ctx *ctx, uint16_t dport, unsigned n)
{
	struct dpflow_pool *pool = dpflow_ctx_pool(ctx);
	struct dpflow_gen_spec sp;
	uint32_t idx[32];

	cr_assert_leq(n, 32u);
	memset(&sp, 0, sizeof(sp));
	sp.has_eth = true;
	sp.outer.l3_type = DPFLOW_L3_IPV4;
	sp.outer.l4_type = DPFLOW_L4_TCP;
	sp.outer.ttl = 64;
	sp.outer.src[0] = 10;
	sp.outer.dst[0] = 10;
	sp.outer.dport = dport;
	sp.frame_len = 100;
	cr_assert_eq(dpflow_pool_alloc_bulk(pool, idx, n), 0);
	for (unsigned i = 0; i < n; i++)
		dpflow_pool_meta(pool, idx[i])->data_len =
		    (uint16_t)dpflow_gen_build(
			&sp, dpflow_pkt_data(pool, idx[i]), 256);
	dpflow_ctx_thread_online(ctx);
	dpflow_ctx_process_burst(ctx, 0, idx, (uint16_t)n);
	dpflow_ctx_thread_offline(ctx);
}

/* Send @req; assert an ok reply and return it parsed. */
static json_t *ok(struct dpflow_ctl *ctl, const char *req)
{
	char *text = dpflow_ctl_handle(ctl, req, strlen(req));
	json_t *r;

	cr_assert_not_null(text);
	r = json_loads(text, 0, NULL);
	cr_assert_not_null(r, "%s", text);
	cr_assert(json_is_true(json_object_get(r, "ok")), "%s -> %s", req,
		  text);
	free(text);
	return r;
}

static json_int_t num(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);

	cr_assert(json_is_integer(v), "no integer '%s'", key);
	return json_integer_value(v);
}

/* The entries.list item of fw whose id is @id, or NULL. */
static json_t *listed(json_t *list, json_int_t id)
{
	size_t i;
	json_t *it;

	json_array_foreach(json_object_get(list, "entries"), i, it)
	{
		if (num(it, "id") == id)
			return it;
	}
	return NULL;
}

static void expect_line(const char *text, const char *line)
{
	char want[256];

	snprintf(want, sizeof(want), "\n%s\n", line);
	cr_expect(strstr(text, want), "missing line: %s\n%s", line, text);
}

Test(entry_id, update_keeps_id_and_counter_remove_burns_id)
{
	struct dpflow_error err = {0};
	struct dpflow_ctx *ctx =
	    dpflow_config_load_string(cfg_yaml, "id.yaml", NULL, &err);
	struct dpflow_ctl *ctl;
	json_t *r, *it, *pipe0, *ec;
	char *m;
	size_t len;
	json_int_t slot_before;

	cr_assert_not_null(ctx, "%s", err.msg);
	ctl = dpflow_ctl_open(ctx, NULL, NULL, &err);
	cr_assert_not_null(ctl, "%s", err.msg);
	send_pkts(ctx, 80, 7);
	send_pkts(ctx, 443, 3);

	/* loaded entries: ids 0 and 1 */
	r = ok(ctl, "{\"cmd\":\"entries.list\",\"pipe\":\"fw\"}");
	it = listed(r, 0);
	cr_assert_not_null(it, "no entry with id 0");
	cr_expect_eq(num(json_object_get(it, "counter"), "pkts"), 7);
	slot_before = num(it, "slot");
	cr_expect_not_null(listed(r, 1), "no entry with id 1");
	json_decref(r);

	/* an update takes another slot and keeps the id and the counts */
	json_decref(ok(ctl, "{\"cmd\":\"entries.update\",\"pipe\":\"fw\","
			    "\"entries\":[{\"match\":{\"outer.l4.dport\":80},"
			    "\"values\":[\"02:00:00:00:00:09\"]}]}"));
	send_pkts(ctx, 80, 2);
	r = ok(ctl, "{\"cmd\":\"entries.list\",\"pipe\":\"fw\"}");
	cr_expect_eq(num(r, "count"), 2);
	it = listed(r, 0);
	cr_assert_not_null(it, "the updated entry lost id 0");
	cr_expect_neq(num(it, "slot"), slot_before,
		      "the update should take a new slot (slot %lld)",
		      (long long)slot_before);
	cr_expect_eq(num(json_object_get(it, "counter"), "pkts"), 9,
		     "the counter goes on over an update");
	cr_expect_eq(num(json_object_get(it, "counter"), "bytes"), 900);
	json_decref(r);

	/* counters with entries: keyed by id too */
	r = ok(ctl, "{\"cmd\":\"counters\",\"entries\":true}");
	pipe0 = json_array_get(json_object_get(r, "pipes"), 0);
	ec = json_object_get(pipe0, "entry_counters");
	cr_assert_eq(json_array_size(ec), 2);
	for (size_t i = 0; i < 2; i++) {
		json_t *c = json_array_get(ec, i);

		cr_expect_eq(num(c, "pkts"), num(c, "id") == 0 ? 9 : 3,
			     "entry id %lld", (long long)num(c, "id"));
	}
	json_decref(r);
	r = ok(ctl, "{\"cmd\":\"counters\"}");
	pipe0 = json_array_get(json_object_get(r, "pipes"), 0);
	cr_expect_null(json_object_get(pipe0, "entry_counters"),
		       "entry counters only when asked for");
	json_decref(r);

	/* metrics: label entry = id */
	m = dpflow_metrics_render(ctx, NULL, &len);
	cr_assert_not_null(m);
	expect_line(m, "dpflow_entry_packets_total{pipe=\"fw\",entry=\"0\"} 9");
	expect_line(m, "dpflow_entry_bytes_total{pipe=\"fw\",entry=\"0\"} 900");
	expect_line(m, "dpflow_entry_packets_total{pipe=\"fw\",entry=\"1\"} 3");
	free(m);

	/* a removed entry's id (and slot) are not the next entry's id */
	json_decref(ok(ctl, "{\"cmd\":\"entries.rm\",\"pipe\":\"fw\","
			    "\"entries\":[{\"match\":{\"outer.l4.dport\":443}}"
			    "]}"));
	json_decref(ok(ctl, "{\"cmd\":\"entries.add\",\"pipe\":\"fw\","
			    "\"entries\":[{\"match\":{\"outer.l4.dport\":22},"
			    "\"values\":[\"02:00:00:00:00:03\"]}]}"));
	send_pkts(ctx, 22, 1);
	r = ok(ctl, "{\"cmd\":\"entries.list\",\"pipe\":\"fw\"}");
	cr_expect_null(listed(r, 1), "id 1 was reused");
	it = listed(r, 2); /* an update takes no new id */
	cr_assert_not_null(it, "the added entry should get id 2");
	cr_expect_eq(num(json_object_get(it, "counter"), "pkts"), 1,
		     "a new entry counts from zero");
	json_decref(r);
	m = dpflow_metrics_render(ctx, NULL, &len);
	expect_line(m, "dpflow_entry_packets_total{pipe=\"fw\",entry=\"2\"} 1");
	cr_expect_null(strstr(m, "entry=\"1\""), "id 1 still in the metrics");
	free(m);

	r = ok(ctl, "{\"cmd\":\"counters\",\"entries\":false}");
	json_decref(r);
	{
		const char *bad = "{\"cmd\":\"counters\",\"entries\":1}";
		char *t = dpflow_ctl_handle(ctl, bad, strlen(bad));

		cr_expect(strstr(t, "'entries' must be true or false"), "%s",
			  t);
		free(t);
	}
	dpflow_ctl_close(ctl);
	dpflow_ctx_destroy(ctx);
}

/* The library: ids through dpflow_entry_id(); an update that is dropped
 * leaves the entry's id, a dropped add does not hand its id out again. */
Test(entry_id, library_ids)
{
	struct dpflow_error err = {0};
	struct dpflow_ctx *ctx =
	    dpflow_config_load_string(cfg_yaml, "id.yaml", NULL, &err);
	struct dpflow_pipe *fw;
	struct dpflow_queue *q;
	struct dpflow_entry_cfg c;
	struct dpflow_entry *a, *b, *u;
	const struct dpflow_entry *e0;

	cr_assert_not_null(ctx, "%s", err.msg);
	fw = dpflow_pipe_find(ctx, "fw");
	e0 = dpflow_pipe_entry(fw, 0);
	cr_assert_not_null(e0);
	cr_expect_eq(dpflow_entry_id(e0), 0);
	cr_expect_eq(dpflow_entry_id(dpflow_pipe_entry(fw, 1)), 1);
	q = dpflow_queue_create(ctx, &err);
	cr_assert_not_null(q);
	memset(&c, 0, sizeof(c));
	c.key[1] = 22;
	a = dpflow_entry_add(q, fw, &c, NULL, &err);
	cr_assert_not_null(a, "%s", err.msg);
	cr_expect_eq(dpflow_entry_id(a), 2);
	dpflow_queue_discard(q);
	b = dpflow_entry_add(q, fw, &c, NULL, &err);
	cr_assert_not_null(b, "%s", err.msg);
	cr_expect_eq(dpflow_entry_id(b), 3, "a discarded add's id is burnt");
	cr_assert_eq(dpflow_entries_process(q, NULL, &err), 0, "%s", err.msg);
	u = dpflow_entry_update(q, b, &c, NULL, &err);
	cr_assert_not_null(u, "%s", err.msg);
	cr_expect_eq(dpflow_entry_id(u), 3);
	cr_assert_eq(dpflow_entries_process(q, NULL, &err), 0, "%s", err.msg);
	cr_expect_eq(dpflow_entry_id(u), 3, "an update keeps the id");
	dpflow_queue_destroy(q);
	dpflow_ctx_destroy(ctx);
}
