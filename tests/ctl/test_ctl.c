/*
 * Control requests without a socket: dpflow_ctl_handle() on a context
 * built from a small config. Every command's reply; malformed, unknown
 * and ill-typed requests refused without changing anything; entry batches
 * all or nothing; add, list and remove round trips; packets following an
 * entry added through the control path.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/config.h"
#include "dpflow/ctl.h"
#include "dpflow/dpflow.h"
#include "dpflow/flow.h"

static const char *cfg_yaml =
    "ports:\n"
    "  - {name: in, uri: 'ring:in'}\n"
    "  - {name: out, uri: 'ring:out'}\n"
    "  - {name: web, uri: 'ring:web'}\n"
    "pipes:\n"
    "  - name: fw\n"
    "    type: basic\n"
    "    root: in\n"
    "    size: 64\n"
    "    match: [outer.l4.dport]\n"
    "    monitor: {counter: true}\n"
    "    fwd: per-entry\n"
    "    miss: drop\n"
    "    entries:\n"
    "      - {match: {outer.l4.dport: 22}, fwd: drop}\n"
    "  - name: acl\n"
    "    type: acl\n"
    "    match: [outer.ipv4.src, outer.l4.sport, outer.ip.proto]\n"
    "    actions:\n"
    "      - [{set: {field: meta.reg0, value: per-entry}}]\n"
    "    fwd: {port: out}\n"
    "    miss: drop\n"
    "  - name: rt\n"
    "    type: lpm\n"
    "    match: [meta.reg0, outer.ipv4.dst]\n"
    "    fwd: {port: out}\n"
    "  - name: ecmp\n"
    "    type: hash\n"
    "    size: 4\n"
    "    match: [outer.ipv4.src]\n"
    "    fwd: {port: out}\n";

static struct dpflow_ctx *ctx;
static struct dpflow_ctl *ctl;
static int batches, fail_batches;

static int after_batch(void *arg, struct dpflow_error *err)
{
	(void)arg;
	batches++;
	if (fail_batches)
		return dpflow_error_set(err, EIO, "gpu", "publish failed");
	return 0;
}

static void setup(void)
{
	struct dpflow_error err = {0};
	struct dpflow_ctl_hooks hooks = {.after_batch = after_batch};

	ctx = dpflow_config_load_string(cfg_yaml, "test.yaml", NULL, &err);
	cr_assert_not_null(ctx, "%s", err.msg);
	ctl = dpflow_ctl_open(ctx, NULL, &hooks, &err);
	cr_assert_not_null(ctl, "%s", err.msg);
	batches = fail_batches = 0;
}

static void teardown(void)
{
	dpflow_ctl_close(ctl);
	dpflow_ctx_destroy(ctx);
}

TestSuite(ctl, .init = setup, .fini = teardown);

/* The reply to @req, parsed. */
static json_t *call(const char *req)
{
	char *text = dpflow_ctl_handle(ctl, req, strlen(req));
	json_error_t je;
	json_t *r;

	cr_assert_not_null(text);
	cr_assert_null(strchr(text, '\n'), "a reply is one line: %s", text);
	r = json_loads(text, 0, &je);
	cr_assert_not_null(r, "reply is not JSON: %s", text);
	free(text);
	return r;
}

/* The reply to @req, which must be ok. */
static json_t *ok(const char *req)
{
	json_t *r = call(req);
	const char *e = json_string_value(json_object_get(r, "error"));

	cr_assert(json_is_true(json_object_get(r, "ok")), "%s: %s", req,
		  e ? e : "?");
	return r;
}

static unsigned count(const char *pipe)
{
	return dpflow_pipe_entry_count(dpflow_pipe_find(ctx, pipe));
}

Test(ctl, ports_pipes_counters_workers)
{
	json_t *r = ok("{\"cmd\":\"ports\"}"), *a, *p;

	a = json_object_get(r, "ports");
	cr_assert_eq(json_array_size(a), 3);
	p = json_array_get(a, 0);
	cr_expect_str_eq(json_string_value(json_object_get(p, "name")), "in");
	cr_expect_str_eq(json_string_value(json_object_get(p, "kind")), "ring");
	cr_expect_str_eq(json_string_value(json_object_get(p, "root")), "fw");
	cr_expect(json_is_null(json_object_get(json_array_get(a, 1), "root")));
	cr_expect(json_is_object(json_object_get(p, "stats")));
	json_decref(r);

	r = ok("{\"cmd\":\"pipes\"}");
	a = json_object_get(r, "pipes");
	cr_assert_eq(json_array_size(a), 4);
	p = json_array_get(a, 0);
	cr_expect_str_eq(json_string_value(json_object_get(p, "name")), "fw");
	cr_expect_str_eq(json_string_value(json_object_get(p, "type")),
			 "basic");
	cr_expect_eq(json_integer_value(json_object_get(p, "entries")), 1);
	cr_expect_str_eq(json_string_value(json_object_get(p, "fwd")),
			 "per-entry");
	cr_expect_str_eq(json_string_value(json_object_get(p, "miss")), "drop");
	cr_expect_str_eq(
	    json_string_value(json_array_get(json_object_get(p, "match"), 0)),
	    "outer.l4.dport");
	p = json_array_get(a, 1);
	cr_expect_str_eq(json_string_value(json_object_get(
			     json_object_get(p, "fwd"), "port")),
			 "out");
	json_decref(r);

	r = ok("{\"cmd\":\"counters\",\"id\":42}");
	cr_expect_eq(json_integer_value(json_object_get(r, "id")), 42);
	cr_expect(json_integer_value(json_object_get(r, "time_ns")) > 0);
	cr_expect_eq(json_array_size(json_object_get(r, "ports")), 3);
	cr_expect_eq(json_array_size(json_object_get(r, "pipes")), 4);
	cr_expect(json_is_object(json_object_get(r, "drops")));
	json_decref(r);

	r = ok("{\"cmd\":\"workers\"}");
	cr_expect_eq(json_array_size(json_object_get(r, "workers")), 0,
		     "no runtime: no workers");
	json_decref(r);
}

Test(ctl, dump_text_and_dot)
{
	json_t *r = ok("{\"cmd\":\"dump\"}");
	const char *t = json_string_value(json_object_get(r, "text"));

	cr_assert_not_null(t);
	cr_expect(strstr(t, "port in (ring, id 0)"), "%s", t);
	cr_expect(strstr(t, "pipe fw (basic, 1/64 entries), root of port in"),
		  "%s", t);
	cr_expect(strstr(t, "miss   -> drop"), "%s", t);
	cr_expect(strstr(t, "pipe acl (acl"), "%s", t);
	json_decref(r);

	r = ok("{\"cmd\":\"dump\",\"format\":\"dot\"}");
	t = json_string_value(json_object_get(r, "text"));
	cr_assert_not_null(t);
	cr_expect_eq(strncmp(t, "digraph dpflow {", 16), 0, "%s", t);
	cr_expect(strstr(t, "\"port:in\" -> \"pipe:fw\""), "%s", t);
	cr_expect(strstr(t, "\"pipe:acl\" -> \"port:out\" [label=\"hit\"]"),
		  "%s", t);
	cr_expect(strstr(t, "\"pipe:fw\" -> \"drop\" [label=\"entry\"]"), "%s",
		  t);
	json_decref(r);
}

struct bad_req {
	const char *req;
	const char *msg;   /* in the error */
	const char *field; /* the reply's field, NULL: none */
};

static const struct bad_req bad_reqs[] = {
    {"{", "malformed JSON", NULL},
    {"", "malformed JSON", NULL},
    {"{\"cmd\":\"ports\"} x", "malformed JSON", NULL},
    {"{\"cmd\":\"ports\",\"cmd\":\"pipes\"}", "malformed JSON", NULL},
    {"[1,2]", "a request is a JSON object", NULL},
    {"\"ports\"", "a request is a JSON object", NULL},
    {"{}", "'cmd' is missing", "cmd"},
    {"{\"cmd\":5}", "'cmd' must be a string", "cmd"},
    {"{\"cmd\":\"reboot\"}", "unknown cmd 'reboot'", "cmd"},
    {"{\"cmd\":\"ports\",\"verbose\":true}", "unknown key 'verbose'",
     "verbose"},
    {"{\"cmd\":\"dump\",\"format\":\"svg\"}", "format 'svg'", "format"},
    {"{\"cmd\":\"dump\",\"format\":1}", "'format' must be a string", "format"},
    {"{\"cmd\":\"entries.list\"}", "'pipe' is missing", "pipe"},
    {"{\"cmd\":\"entries.list\",\"pipe\":7}", "'pipe' must be a string",
     "pipe"},
    {"{\"cmd\":\"entries.list\",\"pipe\":\"nosuch\"}", "no pipe named 'nosuch'",
     "pipe"},
    {"{\"cmd\":\"entries.list\",\"pipe\":\"fw\",\"limit\":-1}",
     "'limit' must be an integer", "limit"},
    {"{\"cmd\":\"entries.add\",\"pipe\":\"fw\"}", "'entries' is missing",
     "entries"},
    {"{\"cmd\":\"entries.add\",\"pipe\":\"fw\",\"entries\":{}}",
     "'entries' must be a list", "entries"},
    {"{\"cmd\":\"entries.add\",\"pipe\":\"fw\",\"entries\":[5]}",
     "entries[0]: an entry is a mapping", "entries[0]"},
    {"{\"cmd\":\"entries.add\",\"pipe\":\"fw\",\"entries\":"
     "[{\"match\":{\"outer.l4.dport\":70000},\"fwd\":\"drop\"}]}",
     "'70000' is out of range (max 65535)", "entries[0].match.outer.l4.dport"},
    {"{\"cmd\":\"entries.add\",\"pipe\":\"fw\",\"entries\":"
     "[{\"match\":{\"outer.l4.dport\":80}}]}",
     "forwards per entry: 'fwd' is missing", "entries[0]"},
    {"{\"cmd\":\"entries.add\",\"pipe\":\"fw\",\"entries\":"
     "[{\"match\":{\"outer.l4.dport\":80},\"fwd\":{\"port\":\"nope\"}}]}",
     "no port named 'nope'", "entries[0].fwd.port"},
    {"{\"cmd\":\"entries.add\",\"pipe\":\"fw\",\"entries\":"
     "[{\"match\":{\"outer.l4.dport\":22},\"fwd\":\"drop\"}]}",
     "an entry with this match exists", "entries[0].match"},
    {"{\"cmd\":\"entries.rm\",\"pipe\":\"fw\",\"entries\":"
     "[{\"match\":{\"outer.l4.dport\":9}}]}",
     "pipe 'fw' has no such entry", "entries[0].match"},
    {"{\"cmd\":\"entries.rm\",\"pipe\":\"fw\",\"entries\":[{\"slot\":64}]}",
     "expected a slot within 0..63", "entries[0].slot"},
    {"{\"cmd\":\"entries.rm\",\"pipe\":\"fw\",\"entries\":"
     "[{\"slot\":1,\"match\":{}}]}",
     "'slot' goes alone", "entries[0].slot"},
    {"{\"cmd\":\"entries.rm\",\"pipe\":\"fw\",\"entries\":"
     "[{\"match\":{\"outer.l4.dport\":22}},"
     "{\"match\":{\"outer.l4.dport\":22}}]}",
     "entries[1] names the entry entries[0] names", "entries[1]"},
    {"{\"cmd\":\"entries.add\",\"pipe\":\"ecmp\",\"entries\":"
     "[{\"index\":4}]}",
     "index 4: pipe 'ecmp' has slots 0..3", "entries[0].index"},
    /* trace: the keys are checked first; then, without worker threads
     * (no dpflow_ctl_hooks.rt here), nothing would take it */
    {"{\"cmd\":\"trace\",\"port\":\"nope\"}", "no port named 'nope'", "port"},
    {"{\"cmd\":\"trace\",\"count\":9}",
     "'count' must be an integer within 1..8", "count"},
    {"{\"cmd\":\"trace\",\"timeout_ms\":true}",
     "'timeout_ms' must be an integer within 1..10000", "timeout_ms"},
    {"{\"cmd\":\"trace\",\"port\":\"in\"}", "this run has no worker threads",
     "cmd"},
};

Test(ctl, bad_requests_change_nothing)
{
	for (size_t i = 0; i < DPFLOW_ARRAY_SIZE(bad_reqs); i++) {
		const struct bad_req *b = &bad_reqs[i];
		json_t *r = call(b->req);
		const char *e = json_string_value(json_object_get(r, "error"));
		const char *f = json_string_value(json_object_get(r, "field"));

		cr_expect(json_is_false(json_object_get(r, "ok")), "%s: ok",
			  b->req);
		cr_expect(e && strstr(e, b->msg), "%s: error '%s' lacks '%s'",
			  b->req, e ? e : "(none)", b->msg);
		if (b->field)
			cr_expect(f && !strcmp(f, b->field),
				  "%s: field '%s', expected '%s'", b->req,
				  f ? f : "(none)", b->field);
		else
			cr_expect_null(f, "%s: field '%s'", b->req, f);
		json_decref(r);
	}
	cr_expect_eq(count("fw"), 1);
	cr_expect_eq(count("acl"), 0);
	cr_expect_eq(batches, 0, "no batch was applied");
}

Test(ctl, oversized_request_is_refused)
{
	size_t n = DPFLOW_CTL_REQUEST_MAX + 1;
	char *req = malloc(n);
	char *text;
	json_t *r;

	cr_assert_not_null(req);
	memset(req, ' ', n);
	memcpy(req, "{\"cmd\":\"ports\"}", 15);
	text = dpflow_ctl_handle(ctl, req, n);
	r = json_loads(text, 0, NULL);
	cr_assert_not_null(r, "%s", text);
	cr_expect(json_is_false(json_object_get(r, "ok")));
	cr_expect(strstr(json_string_value(json_object_get(r, "error")),
			 "request too large"));
	json_decref(r);
	free(text);
	/* just under the limit is fine */
	text = dpflow_ctl_handle(ctl, req, n - 1);
	cr_expect(strstr(text, "\"ok\":true"), "%.200s", text);
	free(text);
	free(req);
}

Test(ctl, a_bad_entry_in_a_batch_adds_nothing)
{
	json_t *r;
	const char *e;

	/* the 3rd of 5 fails to parse */
	r = call(
	    "{\"cmd\":\"entries.add\",\"pipe\":\"fw\",\"entries\":["
	    "{\"match\":{\"outer.l4.dport\":80},\"fwd\":{\"port\":\"web\"}},"
	    "{\"match\":{\"outer.l4.dport\":81},\"fwd\":{\"port\":\"web\"}},"
	    "{\"match\":{\"outer.l4.dport\":\"http\"},\"fwd\":\"drop\"},"
	    "{\"match\":{\"outer.l4.dport\":83},\"fwd\":\"drop\"},"
	    "{\"match\":{\"outer.l4.dport\":84},\"fwd\":\"drop\"}]}");
	e = json_string_value(json_object_get(r, "error"));
	cr_expect(json_is_false(json_object_get(r, "ok")));
	cr_expect(e && strstr(e, "entries[2].match.outer.l4.dport: 'http'"),
		  "%s", e);
	cr_expect_str_eq(json_string_value(json_object_get(r, "field")),
			 "entries[2].match.outer.l4.dport");
	json_decref(r);
	cr_expect_eq(count("fw"), 1, "nothing added");

	/* the 4th of 5 parses but repeats the match of an entry already
	 * there: refused before anything is queued */
	r = call("{\"cmd\":\"entries.add\",\"pipe\":\"fw\",\"entries\":["
		 "{\"match\":{\"outer.l4.dport\":80},\"fwd\":\"drop\"},"
		 "{\"match\":{\"outer.l4.dport\":81},\"fwd\":\"drop\"},"
		 "{\"match\":{\"outer.l4.dport\":82},\"fwd\":\"drop\"},"
		 "{\"match\":{\"outer.l4.dport\":22},\"fwd\":\"drop\"},"
		 "{\"match\":{\"outer.l4.dport\":84},\"fwd\":\"drop\"}]}");
	e = json_string_value(json_object_get(r, "error"));
	cr_expect(json_is_false(json_object_get(r, "ok")));
	cr_expect(e && strstr(e, "entries[3]: ") &&
		      strstr(e, "an entry with this match exists"),
		  "%s", e);
	json_decref(r);
	cr_expect_eq(count("fw"), 1, "nothing added");

	/* more entries than the pipe has room for: refused whole */
	{
		char req[8192];
		int n = snprintf(req, sizeof(req),
				 "{\"cmd\":\"entries.add\",\"pipe\":\"fw\","
				 "\"entries\":[");

		for (int p = 1000; p < 1070; p++)
			n += snprintf(req + n, sizeof(req) - (size_t)n,
				      "%s{\"match\":{\"outer.l4.dport\":%d},"
				      "\"fwd\":\"drop\"}",
				      p > 1000 ? "," : "", p);
		snprintf(req + n, sizeof(req) - (size_t)n, "]}");
		r = call(req);
		cr_expect(json_is_false(json_object_get(r, "ok")));
		cr_expect(strstr(json_string_value(json_object_get(r, "error")),
				 "is full"),
			  "%s", json_string_value(json_object_get(r, "error")));
		json_decref(r);
	}
	cr_expect_eq(count("fw"), 1, "nothing added");
	cr_expect_eq(batches, 0);
	/* and the pipe still takes a good batch */
	json_decref(
	    ok("{\"cmd\":\"entries.add\",\"pipe\":\"fw\",\"entries\":["
	       "{\"match\":{\"outer.l4.dport\":80},\"fwd\":\"drop\"}]}"));
	cr_expect_eq(count("fw"), 2);
	cr_expect_eq(batches, 1);
}

Test(ctl, add_list_rm_round_trip)
{
	json_t *r, *list, *entries, *it;
	char *text, req[4096];
	size_t i;

	r = ok("{\"cmd\":\"entries.add\",\"pipe\":\"acl\",\"entries\":["
	       "{\"match\":{\"outer.ipv4.src\":\"10.0.0.0/8\","
	       "\"outer.l4.sport\":\"1024-65535\"},\"priority\":5,"
	       "\"values\":[7]},"
	       "{\"match\":{\"outer.ip.proto\":\"0x06/0x0f\"},\"priority\":1,"
	       "\"values\":[\"0x10\"]},"
	       "{\"match\":{},\"priority\":100,\"values\":[0]}]}");
	cr_expect_eq(json_integer_value(json_object_get(r, "added")), 3);
	json_decref(r);
	cr_expect_eq(count("acl"), 3);
	json_decref(ok("{\"cmd\":\"entries.add\",\"pipe\":\"rt\",\"entries\":["
		       "{\"match\":{\"meta.reg0\":1,\"outer.ipv4.dst\":"
		       "\"192.168.0.0/16\"}},"
		       "{\"match\":{\"meta.reg0\":1,\"outer.ipv4.dst\":"
		       "\"192.168.1.1\"}}]}"));
	json_decref(ok("{\"cmd\":\"entries.add\",\"pipe\":\"ecmp\",\"entries\":"
		       "[{\"index\":2}]}"));

	list = ok("{\"cmd\":\"entries.list\",\"pipe\":\"acl\"}");
	entries = json_object_get(list, "entries");
	cr_assert_eq(json_array_size(entries), 3);
	cr_expect_eq(json_integer_value(json_object_get(list, "count")), 3);
	cr_expect_null(json_object_get(list, "next"));
	text = json_dumps(entries, JSON_COMPACT | JSON_PRESERVE_ORDER);
	cr_expect(strstr(text, "{\"match\":{\"outer.ipv4.src\":\"10.0.0.0/8\","
			       "\"outer.l4.sport\":\"1024-65535\"},"
			       "\"priority\":5,\"values\":[7]}"),
		  "%s", text);
	cr_expect(strstr(text, "{\"match\":{\"outer.ip.proto\":\"0x6/0xf\"},"
			       "\"priority\":1,\"values\":[16]}"),
		  "%s", text);
	cr_expect(strstr(text, "{\"match\":{},\"priority\":100,"
			       "\"values\":[0]}"),
		  "%s", text);
	free(text);

	r = ok("{\"cmd\":\"entries.list\",\"pipe\":\"rt\"}");
	text = json_dumps(r, JSON_COMPACT | JSON_PRESERVE_ORDER);
	cr_expect(strstr(text, "{\"meta.reg0\":1,\"outer.ipv4.dst\":"
			       "\"192.168.0.0/16\"}"),
		  "%s", text);
	cr_expect(strstr(text, "{\"meta.reg0\":1,\"outer.ipv4.dst\":"
			       "\"192.168.1.1\"}"),
		  "%s", text);
	free(text);
	json_decref(r);
	r = ok("{\"cmd\":\"entries.list\",\"pipe\":\"ecmp\"}");
	it = json_array_get(json_object_get(r, "entries"), 0);
	cr_expect_eq(json_integer_value(json_object_get(
			 json_object_get(it, "entry"), "index")),
		     2);
	json_decref(r);

	/* what list printed names the entries for removal */
	{
		json_t *rm = json_pack("{s:s,s:s,s:[]}", "cmd", "entries.rm",
				       "pipe", "acl", "entries");

		json_array_foreach(entries, i, it)
		    json_array_append(json_object_get(rm, "entries"),
				      json_object_get(it, "entry"));
		text = json_dumps(rm, JSON_COMPACT);
		json_decref(rm);
		r = ok(text);
		cr_expect_eq(json_integer_value(json_object_get(r, "removed")),
			     3);
		json_decref(r);
		free(text);
	}
	cr_expect_eq(count("acl"), 0);
	json_decref(list);

	/* by match, for lpm and hash pipes; by slot */
	json_decref(ok("{\"cmd\":\"entries.rm\",\"pipe\":\"rt\",\"entries\":["
		       "{\"match\":{\"meta.reg0\":1,\"outer.ipv4.dst\":"
		       "\"192.168.0.0/16\"}}]}"));
	cr_expect_eq(count("rt"), 1);
	r = call("{\"cmd\":\"entries.rm\",\"pipe\":\"rt\",\"entries\":["
		 "{\"match\":{\"meta.reg0\":1,\"outer.ipv4.dst\":"
		 "\"192.168.1.1/24\"}}]}");
	cr_expect(json_is_false(json_object_get(r, "ok")),
		  "a prefix is not the address");
	json_decref(r);
	json_decref(ok("{\"cmd\":\"entries.rm\",\"pipe\":\"ecmp\",\"entries\":"
		       "[{\"index\":2}]}"));
	cr_expect_eq(count("ecmp"), 0);
	r = ok("{\"cmd\":\"entries.list\",\"pipe\":\"rt\"}");
	it = json_array_get(json_object_get(r, "entries"), 0);
	snprintf(req, sizeof(req),
		 "{\"cmd\":\"entries.rm\",\"pipe\":\"rt\",\"entries\":"
		 "[{\"slot\":%lld}]}",
		 (long long)json_integer_value(json_object_get(it, "slot")));
	json_decref(r);
	json_decref(ok(req));
	cr_expect_eq(count("rt"), 0);
	cr_expect_eq(batches, 7);
}

Test(ctl, list_pages_and_rm_with_priorities)
{
	json_t *r;
	json_int_t next;
	unsigned seen = 0;

	json_decref(ok("{\"cmd\":\"entries.add\",\"pipe\":\"acl\",\"entries\":["
		       "{\"match\":{\"outer.ip.proto\":6},\"priority\":1,"
		       "\"values\":[1]},"
		       "{\"match\":{\"outer.ip.proto\":6},\"priority\":2,"
		       "\"values\":[2]},"
		       "{\"match\":{\"outer.ip.proto\":17},\"priority\":3,"
		       "\"values\":[3]}]}"));
	r = ok("{\"cmd\":\"entries.list\",\"pipe\":\"acl\",\"limit\":2}");
	cr_expect_eq(json_array_size(json_object_get(r, "entries")), 2);
	next = json_integer_value(json_object_get(r, "next"));
	cr_expect(json_is_integer(json_object_get(r, "next")));
	json_decref(r);
	for (json_int_t from = 0; from >= 0;) {
		char req[128];

		snprintf(req, sizeof(req),
			 "{\"cmd\":\"entries.list\",\"pipe\":\"acl\","
			 "\"from\":%lld,\"limit\":1}",
			 (long long)from);
		r = ok(req);
		seen +=
		    (unsigned)json_array_size(json_object_get(r, "entries"));
		from = json_is_integer(json_object_get(r, "next"))
			   ? json_integer_value(json_object_get(r, "next"))
			   : -1;
		json_decref(r);
	}
	cr_expect_eq(seen, 3);
	cr_expect(next > 0);

	r = call("{\"cmd\":\"entries.rm\",\"pipe\":\"acl\",\"entries\":["
		 "{\"match\":{\"outer.ip.proto\":6}}]}");
	cr_expect(strstr(json_string_value(json_object_get(r, "error")),
			 "matches more than one entry"));
	json_decref(r);
	json_decref(ok("{\"cmd\":\"entries.rm\",\"pipe\":\"acl\",\"entries\":["
		       "{\"match\":{\"outer.ip.proto\":6},\"priority\":2,"
		       "\"values\":[99]}]}"));
	cr_expect_eq(count("acl"), 2);
}

Test(ctl, after_batch_error_is_reported)
{
	json_t *r;

	fail_batches = 1;
	r = call("{\"cmd\":\"entries.add\",\"pipe\":\"fw\",\"entries\":["
		 "{\"match\":{\"outer.l4.dport\":80},\"fwd\":\"drop\"}]}");
	cr_expect(json_is_false(json_object_get(r, "ok")));
	cr_expect(strstr(json_string_value(json_object_get(r, "error")),
			 "batch applied, then: publish failed"));
	cr_expect_str_eq(json_string_value(json_object_get(r, "field")), "gpu");
	json_decref(r);
	cr_expect_eq(batches, 1);
}

/* An Ethernet/IPv4 TCP packet to @dport in @pool. */
static uint32_t make_pkt(struct dpflow_pool *pool, uint16_t dport)
{
	struct dpflow_gen_spec s;
	uint32_t idx, src = htonl(0x0a000001), dst = htonl(0x0a000002);

	cr_assert_eq(dpflow_pool_alloc_bulk(pool, &idx, 1), 0);
	memset(&s, 0, sizeof(s));
	s.has_eth = true;
	s.outer.l3_type = DPFLOW_L3_IPV4;
	s.outer.l4_type = DPFLOW_L4_TCP;
	memcpy(s.outer.src, &src, 4);
	memcpy(s.outer.dst, &dst, 4);
	s.outer.sport = 1234;
	s.outer.dport = dport;
	s.outer.ttl = 64;
	memset(s.outer.ipv6_ext, 0xff, sizeof(s.outer.ipv6_ext));
	dpflow_pool_meta(pool, idx)->data_len =
	    (uint16_t)dpflow_gen_build(&s, dpflow_pkt_data(pool, idx), 2048);
	return idx;
}

/* Run @n packets to @dport in on port 'in'; how many left on 'web'. */
static unsigned send_to(uint16_t dport, unsigned n)
{
	struct dpflow_pool *pool = dpflow_ctx_pool(ctx);
	struct dpflow_port *web =
	    dpflow_ctx_port(ctx, (unsigned)dpflow_ctx_port_find(ctx, "web"));
	uint32_t idx[16];
	unsigned got;

	for (unsigned i = 0; i < n; i++)
		idx[i] = make_pkt(pool, dport);
	dpflow_ctx_thread_online(ctx);
	dpflow_ctx_process_burst(ctx, 0, idx, (uint16_t)n);
	dpflow_ctx_thread_offline(ctx);
	got = dpflow_ring_dequeue_burst(dpflow_port_ring_tx(web), idx, 16);
	dpflow_pool_free_bulk(pool, idx, got);
	return got;
}

static uint64_t pipe_counter(const char *name, const char *key)
{
	json_t *r = ok("{\"cmd\":\"counters\"}"), *p;
	uint64_t v = 0;
	size_t i;

	json_array_foreach(
	    json_object_get(r, "pipes"), i,
	    p) if (!strcmp(json_string_value(json_object_get(p, "name")), name))
	    v = (uint64_t)json_integer_value(json_object_get(p, key));
	json_decref(r);
	return v;
}

Test(ctl, packets_follow_an_entry_added_by_the_control_path)
{
	json_t *r, *e;
	uint64_t drops[DPFLOW_DROP__COUNT];
	size_t i_;

	cr_expect_eq(send_to(80, 3), 0, "no entry yet: miss, drop");
	dpflow_ctx_drops(ctx, drops);
	cr_expect_eq(drops[DPFLOW_DROP_FLOW_MISS_DROP], 3);

	json_decref(ok("{\"cmd\":\"entries.add\",\"pipe\":\"fw\",\"entries\":["
		       "{\"match\":{\"outer.l4.dport\":80},"
		       "\"fwd\":{\"port\":\"web\"}}]}"));
	cr_expect_eq(send_to(80, 4), 4, "the new entry sends them to web");
	cr_expect_eq(pipe_counter("fw", "hits"), 4);
	cr_expect_eq(pipe_counter("fw", "misses"), 3);

	r = ok("{\"cmd\":\"entries.list\",\"pipe\":\"fw\"}");
	json_array_foreach(json_object_get(r, "entries"), i_, e)
	{
		json_t *m =
		    json_object_get(json_object_get(e, "entry"), "match");

		if (json_integer_value(json_object_get(m, "outer.l4.dport")) !=
		    80)
			continue;
		cr_expect_eq(json_integer_value(json_object_get(
				 json_object_get(e, "counter"), "pkts")),
			     4);
		cr_expect_str_eq(
		    json_string_value(json_object_get(
			json_object_get(json_object_get(e, "entry"), "fwd"),
			"port")),
		    "web");
	}
	json_decref(r);

	r = ok("{\"cmd\":\"counters\"}");
	cr_expect_eq(json_integer_value(json_object_get(
			 json_object_get(r, "drops"), "flow_miss_drop")),
		     3);
	json_decref(r);

	json_decref(ok("{\"cmd\":\"entries.rm\",\"pipe\":\"fw\",\"entries\":["
		       "{\"match\":{\"outer.l4.dport\":80}}]}"));
	cr_expect_eq(send_to(80, 2), 0, "removed: miss again");
	dpflow_ctx_drops(ctx, drops);
	cr_expect_eq(drops[DPFLOW_DROP_FLOW_MISS_DROP], 5);
}

Test(ctl, update_changes_where_packets_go)
{
	json_t *r;

	json_decref(ok("{\"cmd\":\"entries.add\",\"pipe\":\"fw\",\"entries\":["
		       "{\"match\":{\"outer.l4.dport\":80},"
		       "\"fwd\":{\"port\":\"web\"}}]}"));
	cr_expect_eq(send_to(80, 2), 2);
	r = ok("{\"cmd\":\"entries.update\",\"pipe\":\"fw\",\"entries\":["
	       "{\"match\":{\"outer.l4.dport\":80},\"fwd\":\"drop\"}]}");
	cr_expect_eq(json_integer_value(json_object_get(r, "updated")), 1);
	json_decref(r);
	cr_expect_eq(count("fw"), 2, "an update replaces, it does not add");
	cr_expect_eq(send_to(80, 3), 0, "updated to drop");
	/* updating an entry that is not there changes nothing */
	r = call("{\"cmd\":\"entries.update\",\"pipe\":\"fw\",\"entries\":["
		 "{\"match\":{\"outer.l4.dport\":81},\"fwd\":\"drop\"}]}");
	cr_expect(json_is_false(json_object_get(r, "ok")));
	cr_expect_str_eq(json_string_value(json_object_get(r, "field")),
			 "entries[0].match");
	json_decref(r);
}

Test(ctl, batch_over_pipes_is_all_or_nothing)
{
	json_t *r;
	unsigned b0;

	/* op 2's second entry is bad: nothing of ops 0 and 1 is applied */
	b0 = (unsigned)batches;
	r = call(
	    "{\"cmd\":\"entries.batch\",\"ops\":["
	    "{\"op\":\"add\",\"pipe\":\"fw\",\"entries\":["
	    "{\"match\":{\"outer.l4.dport\":80},\"fwd\":{\"port\":\"web\"}}]},"
	    "{\"op\":\"rm\",\"pipe\":\"fw\",\"entries\":["
	    "{\"match\":{\"outer.l4.dport\":22}}]},"
	    "{\"op\":\"add\",\"pipe\":\"acl\",\"entries\":["
	    "{\"match\":{\"outer.l4.sport\":1},\"values\":[1]},"
	    "{\"match\":{\"outer.l4.bogus\":1},\"values\":[2]}]}]}");
	cr_expect(json_is_false(json_object_get(r, "ok")));
	cr_expect(strstr(json_string_value(json_object_get(r, "field")),
			 "ops[2].entries[1]"),
		  "field %s", json_string_value(json_object_get(r, "field")));
	json_decref(r);
	cr_expect_eq(count("fw"), 1, "fw unchanged");
	cr_expect_not_null(dpflow_pipe_entry(dpflow_pipe_find(ctx, "fw"), 0),
			   "the entry queued for removal is active again");
	cr_expect_eq(count("acl"), 0, "acl unchanged");
	cr_expect_eq((unsigned)batches, b0, "no batch applied");

	/* a duplicate found only when the batch is applied (two ops add one
	 * match; within an op it is refused before): the same */
	r = call("{\"cmd\":\"entries.batch\",\"ops\":["
		 "{\"op\":\"rm\",\"pipe\":\"fw\",\"entries\":["
		 "{\"match\":{\"outer.l4.dport\":22}}]},"
		 "{\"op\":\"add\",\"pipe\":\"acl\",\"entries\":["
		 "{\"match\":{\"outer.l4.sport\":1},\"values\":[1]}]},"
		 "{\"op\":\"add\",\"pipe\":\"fw\",\"entries\":["
		 "{\"match\":{\"outer.l4.dport\":80},\"fwd\":\"drop\"}]},"
		 "{\"op\":\"add\",\"pipe\":\"fw\",\"entries\":["
		 "{\"match\":{\"outer.l4.dport\":80},\"fwd\":\"drop\"}]}]}");
	cr_expect(json_is_false(json_object_get(r, "ok")));
	cr_expect(strstr(json_string_value(json_object_get(r, "error")),
			 "ops[3].entries[0]: pipe 'fw': an entry with this "
			 "match exists"),
		  "%s", json_string_value(json_object_get(r, "error")));
	json_decref(r);
	cr_expect_eq(count("fw"), 1, "fw unchanged");
	cr_expect_eq(count("acl"), 0, "acl unchanged");

	/* bad op kinds and keys */
	r = call("{\"cmd\":\"entries.batch\",\"ops\":[{\"op\":\"swap\","
		 "\"pipe\":\"fw\",\"entries\":[]}]}");
	cr_expect_str_eq(json_string_value(json_object_get(r, "field")),
			 "ops[0].op");
	json_decref(r);
	r = call("{\"cmd\":\"entries.batch\",\"ops\":[{\"op\":\"add\","
		 "\"pipe\":\"nope\",\"entries\":[]}]}");
	cr_expect_str_eq(json_string_value(json_object_get(r, "field")),
			 "ops[0].pipe");
	json_decref(r);
	r = call("{\"cmd\":\"entries.batch\",\"ops\":[]}");
	cr_expect_str_eq(json_string_value(json_object_get(r, "field")), "ops");
	json_decref(r);

	/* the good batch: both pipes change, one batch */
	r = ok(
	    "{\"cmd\":\"entries.batch\",\"ops\":["
	    "{\"op\":\"add\",\"pipe\":\"fw\",\"entries\":["
	    "{\"match\":{\"outer.l4.dport\":80},\"fwd\":{\"port\":\"web\"}}]},"
	    "{\"op\":\"rm\",\"pipe\":\"fw\",\"entries\":["
	    "{\"match\":{\"outer.l4.dport\":22}}]},"
	    "{\"op\":\"add\",\"pipe\":\"acl\",\"entries\":["
	    "{\"match\":{\"outer.l4.sport\":1},\"values\":[1]}]}]}");
	cr_expect_eq(json_integer_value(json_object_get(r, "ops")), 3);
	cr_expect_eq(json_integer_value(json_object_get(r, "entries")), 3);
	json_decref(r);
	cr_expect_eq((unsigned)batches, b0 + 1, "one batch");
	cr_expect_eq(count("fw"), 1);
	cr_expect_eq(count("acl"), 1);
	cr_expect_eq(send_to(80, 2), 2, "the added entry forwards");
}

/* The reply of @c to @req: its error, or NULL when ok (the caller frees
 * @r). */
static const char *reply_error(struct dpflow_ctl *c, const char *req,
			       json_t **r)
{
	char *text = dpflow_ctl_handle(c, req, strlen(req));

	cr_assert_not_null(text);
	*r = json_loads(text, 0, NULL);
	free(text);
	cr_assert_not_null(*r);
	return json_is_true(json_object_get(*r, "ok"))
		   ? NULL
		   : json_string_value(json_object_get(*r, "error"));
}

/* A JSON null in "values" is the YAML null a constant action's item must
 * be (dpflowctl sends one for null, ~, Null, NULL); the string "null" is
 * text and refused. */
Test(ctl, json_null_values_for_constant_actions)
{
	struct dpflow_error err = {0};
	struct dpflow_ctx *x = dpflow_config_load_string(
	    "ports:\n"
	    "  - {name: in, uri: 'ring:in'}\n"
	    "  - {name: out, uri: 'ring:out'}\n"
	    "pipes:\n"
	    "  - name: p\n"
	    "    type: control\n"
	    "    root: in\n"
	    "    match: [outer.l4.dport]\n"
	    "    actions:\n"
	    "      - [{dec_ttl: true}, {set_mac_dst: per-entry}]\n"
	    "    fwd: {port: out}\n",
	    "nulls.yaml", NULL, &err);
	struct dpflow_ctl *c;
	const char *e;
	json_t *r;

	cr_assert_not_null(x, "%s", err.msg);
	c = dpflow_ctl_open(x, NULL, NULL, &err);
	cr_assert_not_null(c, "%s", err.msg);
	e = reply_error(c,
			"{\"cmd\":\"entries.add\",\"pipe\":\"p\",\"entries\":["
			"{\"match\":{\"outer.l4.dport\":80},"
			"\"values\":[null,\"02:00:00:00:00:01\"]}]}",
			&r);
	cr_expect_null(e, "%s", e);
	json_decref(r);
	e = reply_error(
	    c,
	    "{\"cmd\":\"entries.batch\",\"ops\":[{\"op\":\"update\","
	    "\"pipe\":\"p\",\"entries\":["
	    "{\"match\":{\"outer.l4.dport\":80},"
	    "\"values\":[null,\"02:00:00:00:00:02\"]}]}]}",
	    &r);
	cr_expect_null(e, "%s", e);
	json_decref(r);
	e = reply_error(c,
			"{\"cmd\":\"entries.add\",\"pipe\":\"p\",\"entries\":["
			"{\"match\":{\"outer.l4.dport\":81},"
			"\"values\":[\"null\",\"02:00:00:00:00:01\"]}]}",
			&r);
	cr_expect(e && strstr(e, "entries[0].values[0]: action 0 ('dec_ttl') "
				 "takes no value from the entry: write null"),
		  "%s", e);
	json_decref(r);
	cr_expect_eq(dpflow_pipe_entry_count(dpflow_pipe_find(x, "p")), 1);
	dpflow_ctl_close(c);
	dpflow_ctx_destroy(x);
}
