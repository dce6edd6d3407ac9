/*
 * The strict config loader: what it refuses and the exact message it gives
 * (FILE:LINE: KEY: message): duplicate YAML keys, surplus `values` items,
 * keys that mean nothing for a pipe type, identical entries, unknown port
 * kinds, duplicate port names, missing pipes apart from loops, numbers out
 * of range apart from text, directories, template masks of 0; what it accepts
 * because the docs say so (a ct timeout of 0 is never, each tunnel's own id
 * key); and the removal of an ACL entry by its match and priority.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dpflow/config.h"
#include "dpflow/ctl.h"
#include "dpflow/dpflow.h"
#include "dpflow/flow.h"

static struct dpflow_ctx *load(const char *yaml, struct dpflow_error *err)
{
	memset(err, 0, sizeof(*err));
	return dpflow_config_load_string(yaml, "t.yaml", NULL, err);
}

static struct dpflow_ctx *load_ok(const char *yaml)
{
	struct dpflow_error err;
	struct dpflow_ctx *ctx = load(yaml, &err);

	cr_assert_not_null(ctx, "load failed: %s", err.msg);
	return ctx;
}

#define PORTS "ports:\n  - {name: a, uri: 'ring:a'}\n"

/* A config that must fail, and its whole message. */
struct refused {
	const char *what;
	const char *yaml;
	const char *msg;
};

static void check_refused(const struct refused *r, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct dpflow_error err;
		struct dpflow_ctx *ctx = load(r[i].yaml, &err);

		cr_expect_null(ctx, "%s: loaded", r[i].what);
		if (ctx) {
			dpflow_ctx_destroy(ctx);
			continue;
		}
		cr_expect_neq(err.code, 0, "%s: no error code", r[i].what);
		cr_expect_str_eq(err.msg, r[i].msg, "%s: got '%s'", r[i].what,
				 err.msg);
	}
}

/* ---- 1. what means nothing is refused ----------------------------------- */

static const struct refused meaningless[] = {
    {"duplicate top-level key", PORTS "ports: []\n",
     "t.yaml:3: ports: duplicate key 'ports' (first on line 1)"},
    {"duplicate pipe key",
     PORTS "pipes:\n"
	   "  - name: p\n"
	   "    type: basic\n"
	   "    match: [outer.ip.proto]\n"
	   "    type: acl\n",
     "t.yaml:7: pipes[0].type: duplicate key 'type' (first on line 5)"},
    {"duplicate key in a flow mapping",
     PORTS
     "pipes:\n"
     "  - {name: p, type: basic, match: [outer.ip.proto],\n"
     "     entries: [{match: {outer.ip.proto: 6, outer.ip.proto: 17}}]}\n",
     "t.yaml:5: pipes[0].entries[0].match.outer.ip.proto: duplicate key "
     "'outer.ip.proto' (first on line 5)"},
    {"duplicate port key", "ports:\n  - {name: a, uri: 'ring:a', name: b}\n",
     "t.yaml:2: ports[0].name: duplicate key 'name' (first on line 2)"},
    {"surplus values item",
     PORTS "pipes:\n"
	   "  - name: p\n"
	   "    type: basic\n"
	   "    match: [outer.ip.proto]\n"
	   "    actions: [[{set_mac_src: per-entry}, {dec_ttl: true}]]\n"
	   "    entries:\n"
	   "      - {match: {outer.ip.proto: 6},\n"
	   "         values: ['02:00:00:00:00:01', null, 7]}\n",
     "t.yaml:10: pipes[0].entries[0].values[2]: surplus item: action "
     "template 0 has 2 actions"},
    {"values on a pipe without actions",
     PORTS "pipes:\n"
	   "  - {name: p, type: basic, match: [outer.ip.proto],\n"
	   "     entries: [{match: {outer.ip.proto: 6}, values: [1]}]}\n",
     "t.yaml:5: pipes[0].entries[0].values: pipe 'p' has no action "
     "templates to take values"},
    {"value for an action that takes none from the entry",
     PORTS "pipes:\n"
	   "  - name: p\n"
	   "    type: basic\n"
	   "    match: [outer.ip.proto]\n"
	   "    actions: [[{dec_ttl: true}, {set_mac_src: per-entry}]]\n"
	   "    entries:\n"
	   "      - {match: {outer.ip.proto: 6},\n"
	   "         values: [1, '02:00:00:00:00:01']}\n",
     "t.yaml:10: pipes[0].entries[0].values[0]: action 0 ('dec_ttl') takes "
     "no value from the entry: write null"},
    {"priority on a basic entry",
     PORTS "pipes:\n"
	   "  - {name: p, type: basic, match: [outer.ip.proto],\n"
	   "     entries: [{match: {outer.ip.proto: 6}, priority: 1}]}\n",
     "t.yaml:5: pipes[0].entries[0].priority: a basic pipe's entries have "
     "no priority (control and acl pipes have)"},
    {"priority on an lpm entry",
     PORTS "pipes:\n"
	   "  - name: r\n"
	   "    type: lpm\n"
	   "    match: [outer.ipv4.dst]\n"
	   "    entries:\n"
	   "      - {match: {outer.ipv4.dst: 10.0.0.0/8}, priority: 3}\n",
     "t.yaml:8: pipes[0].entries[0].priority: an lpm pipe's entries have "
     "no priority (control and acl pipes have)"},
    {"priority on a hash entry",
     PORTS "pipes:\n"
	   "  - {name: h, type: hash, size: 4, match: [outer.ipv4.src],\n"
	   "     entries: [{index: 1, priority: 1}]}\n",
     "t.yaml:5: pipes[0].entries[0].priority: a hash pipe's entries have "
     "no priority (control and acl pipes have)"},
    {"action on a pipe without templates",
     PORTS "pipes:\n"
	   "  - {name: p, type: basic, match: [outer.ip.proto],\n"
	   "     entries: [{match: {outer.ip.proto: 6}, action: 0}]}\n",
     "t.yaml:5: pipes[0].entries[0].action: pipe 'p' has no action "
     "templates"},
    {"identical basic entries",
     PORTS "pipes:\n"
	   "  - name: p\n"
	   "    type: basic\n"
	   "    match: [outer.ip.proto]\n"
	   "    entries:\n"
	   "      - {match: {outer.ip.proto: 6}}\n"
	   "      - {match: {outer.ip.proto: 6}}\n",
     "t.yaml:9: pipes[0].entries[1]: an entry with this match exists: "
     "entries[0] (line 8)"},
    {"identical acl entries",
     PORTS "pipes:\n"
	   "  - name: f\n"
	   "    type: acl\n"
	   "    match: [outer.ipv4.src, outer.l4.dport]\n"
	   "    entries:\n"
	   "      - {match: {outer.ipv4.src: 10.0.0.0/8}, priority: 5}\n"
	   "      - {match: {outer.l4.dport: 80}, priority: 5}\n"
	   "      - {match: {outer.ipv4.src: 10.0.0.0/8}, priority: 5}\n",
     "t.yaml:10: pipes[0].entries[2]: an entry with this match and "
     "priority exists: entries[0] (line 8)"},
    {"identical control entries, default priority",
     PORTS "pipes:\n"
	   "  - name: c\n"
	   "    type: control\n"
	   "    match: [outer.ip.proto]\n"
	   "    entries:\n"
	   "      - {match: {outer.ip.proto: 6}}\n"
	   "      - {match: {outer.ip.proto: 6}, priority: 0}\n",
     "t.yaml:9: pipes[0].entries[1]: an entry with this match and priority "
     "exists: entries[0] (line 8)"},
    {"identical lpm entries",
     PORTS "pipes:\n"
	   "  - name: r\n"
	   "    type: lpm\n"
	   "    match: [outer.ipv4.dst]\n"
	   "    entries:\n"
	   "      - {match: {outer.ipv4.dst: 10.0.0.0/8}}\n"
	   "      - {match: {outer.ipv4.dst: 10.0.0.0/8}}\n",
     "t.yaml:9: pipes[0].entries[1]: an entry with this match exists: "
     "entries[0] (line 8)"},
};

Test(config_strict, meaningless_keys_and_duplicates_are_refused)
{
	check_refused(meaningless, DPFLOW_ARRAY_SIZE(meaningless));
}

Test(config_strict, distinct_entries_still_load)
{
	struct dpflow_ctx *ctx = load_ok(
	    PORTS
	    "pipes:\n"
	    "  - name: f\n"
	    "    type: acl\n"
	    "    match: [outer.ipv4.src, outer.l4.dport]\n"
	    "    actions: [[{set_mac_src: per-entry}, {dec_ttl: true}]]\n"
	    "    entries:\n"
	    "      - {match: {outer.ipv4.src: 10.0.0.0/8}, priority: 5,\n"
	    "         values: ['02:00:00:00:00:01']}\n"
	    "      - {match: {outer.ipv4.src: 10.0.0.0/8}, priority: 6,\n"
	    "         values: ['02:00:00:00:00:01', null]}\n"
	    "      - {match: {outer.ipv4.src: 10.0.0.0/16}, priority: 5,\n"
	    "         values: ['02:00:00:00:00:01']}\n");

	cr_assert_eq(dpflow_pipe_entry_count(dpflow_pipe_find(ctx, "f")), 3);
	dpflow_ctx_destroy(ctx);
}

/* The reply to @req on @ctl, which must say ok or carry @error. */
static void ctl_expect(struct dpflow_ctl *ctl, const char *req,
		       const char *error)
{
	char *text = dpflow_ctl_handle(ctl, req, strlen(req));
	json_t *r = json_loads(text, 0, NULL);
	const char *e = json_string_value(json_object_get(r, "error"));

	cr_assert_not_null(r, "%s", text);
	if (error)
		cr_expect(e && strstr(e, error), "%s: %s", req, text);
	else
		cr_expect(json_is_true(json_object_get(r, "ok")), "%s: %s", req,
			  text);
	json_decref(r);
	free(text);
}

Test(config_strict, acl_entry_removed_by_match_and_priority)
{
	struct dpflow_ctx *ctx = load_ok(
	    PORTS
	    "pipes:\n"
	    "  - name: f\n"
	    "    type: acl\n"
	    "    match: [outer.ipv4.src, outer.l4.dport]\n"
	    "    fwd: {port: a}\n"
	    "    entries:\n"
	    "      - {match: {outer.ipv4.src: 10.0.0.0/8}, priority: 1}\n"
	    "      - {match: {outer.ipv4.src: 10.0.0.0/8}, priority: 2}\n"
	    "      - {match: {outer.l4.dport: 1000-2000}, priority: 1}\n"
	    "      - {match: {outer.l4.dport: 1000-2000}, priority: 7}\n");
	struct dpflow_error err = {0};
	struct dpflow_ctl *ctl = dpflow_ctl_open(ctx, NULL, NULL, &err);
	struct dpflow_pipe *f = dpflow_pipe_find(ctx, "f");

	cr_assert_not_null(ctl, "%s", err.msg);
	ctl_expect(ctl,
		   "{\"cmd\":\"entries.rm\",\"pipe\":\"f\",\"entries\":["
		   "{\"match\":{\"outer.ipv4.src\":\"10.0.0.0/8\"},"
		   "\"priority\":2}]}",
		   NULL);
	cr_expect_eq(dpflow_pipe_entry_count(f), 3);
	ctl_expect(ctl,
		   "{\"cmd\":\"entries.rm\",\"pipe\":\"f\",\"entries\":["
		   "{\"match\":{\"outer.l4.dport\":\"1000-2000\"},"
		   "\"priority\":1},"
		   "{\"match\":{\"outer.l4.dport\":\"1000-2000\"},"
		   "\"priority\":7}]}",
		   NULL);
	cr_expect_eq(dpflow_pipe_entry_count(f), 1);
	ctl_expect(ctl,
		   "{\"cmd\":\"entries.rm\",\"pipe\":\"f\",\"entries\":["
		   "{\"match\":{\"outer.ipv4.src\":\"10.0.0.0/8\"},"
		   "\"priority\":2}]}",
		   "pipe 'f' has no such entry");
	ctl_expect(ctl,
		   "{\"cmd\":\"entries.rm\",\"pipe\":\"f\",\"entries\":["
		   "{\"match\":{\"outer.ipv4.src\":\"10.0.0.0/8\"},"
		   "\"priority\":1}]}",
		   NULL);
	cr_expect_eq(dpflow_pipe_entry_count(f), 0);
	dpflow_ctl_close(ctl);
	dpflow_ctx_destroy(ctx);
}

/* An added entry repeating an ACL entry's match and priority would make
 * both unreachable by a removal that gives them. */
Test(config_strict, acl_add_keeps_match_and_priority_unique)
{
	struct dpflow_ctx *ctx = load_ok(
	    PORTS
	    "pipes:\n"
	    "  - name: f\n"
	    "    type: acl\n"
	    "    match: [outer.ipv4.src]\n"
	    "    fwd: {port: a}\n"
	    "    entries:\n"
	    "      - {match: {outer.ipv4.src: 10.0.0.0/8}, priority: 1}\n"
	    "      - {match: {outer.ipv4.src: 10.0.0.0/8}, priority: 2}\n");
	struct dpflow_error err = {0};
	struct dpflow_ctl *ctl = dpflow_ctl_open(ctx, NULL, NULL, &err);
	struct dpflow_pipe *f = dpflow_pipe_find(ctx, "f");

	cr_assert_not_null(ctl, "%s", err.msg);
	ctl_expect(ctl,
		   "{\"cmd\":\"entries.add\",\"pipe\":\"f\",\"entries\":["
		   "{\"match\":{\"outer.ipv4.src\":\"10.0.0.0/8\"},"
		   "\"priority\":\"2\"}]}",
		   "entries[0]: pipe 'f' has an entry with this match and "
		   "priority (slot 1)");
	ctl_expect(ctl,
		   "{\"cmd\":\"entries.add\",\"pipe\":\"f\",\"entries\":["
		   "{\"match\":{\"outer.ipv4.src\":\"10.0.0.0/8\"},"
		   "\"priority\":3},"
		   "{\"match\":{\"outer.ipv4.src\":\"10.0.0.0/8\"},"
		   "\"priority\":3}]}",
		   "entries[1]: the same match and priority as entries[0]");
	cr_expect_eq(dpflow_pipe_entry_count(f), 2);
	/* the pair stayed unique: removal by it works */
	ctl_expect(ctl,
		   "{\"cmd\":\"entries.rm\",\"pipe\":\"f\",\"entries\":["
		   "{\"match\":{\"outer.ipv4.src\":\"10.0.0.0/8\"},"
		   "\"priority\":2}]}",
		   NULL);
	cr_expect_eq(dpflow_pipe_entry_count(f), 1);
	/* a batch removes first: the same entry may come back in it */
	ctl_expect(ctl,
		   "{\"cmd\":\"entries.batch\",\"ops\":["
		   "{\"op\":\"rm\",\"pipe\":\"f\",\"entries\":["
		   "{\"match\":{\"outer.ipv4.src\":\"10.0.0.0/8\"},"
		   "\"priority\":1}]},"
		   "{\"op\":\"add\",\"pipe\":\"f\",\"entries\":["
		   "{\"match\":{\"outer.ipv4.src\":\"10.0.0.0/8\"},"
		   "\"priority\":1}]}]}",
		   NULL);
	cr_expect_eq(dpflow_pipe_entry_count(f), 1);
	dpflow_ctl_close(ctl);
	dpflow_ctx_destroy(ctx);
}

/* entries.add refuses what the config refuses: a basic or lpm entry
 * repeating a match (among the request's entries or the pipe's), named
 * before the batch is applied, with the slot it repeats. */
Test(config_strict, basic_and_lpm_add_refuse_a_repeated_match)
{
	struct dpflow_ctx *ctx =
	    load_ok(PORTS "pipes:\n"
			  "  - name: p\n"
			  "    type: basic\n"
			  "    match: [outer.ip.proto]\n"
			  "    fwd: {port: a}\n"
			  "    entries:\n"
			  "      - {match: {outer.ip.proto: 6}}\n"
			  "  - name: r\n"
			  "    type: lpm\n"
			  "    match: [outer.ipv4.dst]\n"
			  "    fwd: {port: a}\n"
			  "    entries:\n"
			  "      - {match: {outer.ipv4.dst: 10.0.0.0/8}}\n"
			  "      - {match: {outer.ipv4.dst: 10.0.0.0/16}}\n");
	struct dpflow_error err = {0};
	struct dpflow_ctl *ctl = dpflow_ctl_open(ctx, NULL, NULL, &err);
	static const char dup_req[] =
	    "{\"cmd\":\"entries.add\",\"pipe\":\"p\",\"entries\":["
	    "{\"match\":{\"outer.ip.proto\":6}}]}";
	char *text;
	json_t *r;

	cr_assert_not_null(ctl, "%s", err.msg);
	ctl_expect(ctl, dup_req,
		   "entries[0]: pipe 'p': an entry with this match exists "
		   "(slot 0)");
	text = dpflow_ctl_handle(ctl, dup_req, strlen(dup_req));
	r = json_loads(text, 0, NULL);
	cr_expect_str_eq(json_string_value(json_object_get(r, "field")),
			 "entries[0].match");
	json_decref(r);
	free(text);
	ctl_expect(ctl,
		   "{\"cmd\":\"entries.add\",\"pipe\":\"p\",\"entries\":["
		   "{\"match\":{\"outer.ip.proto\":17}},"
		   "{\"match\":{\"outer.ip.proto\":1}},"
		   "{\"match\":{\"outer.ip.proto\":\"0x11\"}}]}",
		   "entries[2]: the same match as entries[0]");
	ctl_expect(ctl,
		   "{\"cmd\":\"entries.add\",\"pipe\":\"r\",\"entries\":["
		   "{\"match\":{\"outer.ipv4.dst\":\"10.0.0.0/8\"}}]}",
		   "entries[0]: pipe 'r': an entry with this match exists "
		   "(slot ");
	ctl_expect(ctl,
		   "{\"cmd\":\"entries.batch\",\"ops\":[{\"op\":\"add\","
		   "\"pipe\":\"r\",\"entries\":["
		   "{\"match\":{\"outer.ipv4.dst\":\"10.1.0.0/16\"}},"
		   "{\"match\":{\"outer.ipv4.dst\":\"10.1.0.0/16\"}}]}]}",
		   "ops[0]: entries[1]: the same match as entries[0]");
	cr_expect_eq(dpflow_pipe_entry_count(dpflow_pipe_find(ctx, "p")), 1);
	cr_expect_eq(dpflow_pipe_entry_count(dpflow_pipe_find(ctx, "r")), 2);
	/* a different prefix length is another entry */
	ctl_expect(ctl,
		   "{\"cmd\":\"entries.add\",\"pipe\":\"r\",\"entries\":["
		   "{\"match\":{\"outer.ipv4.dst\":\"10.0.0.0/24\"}}]}",
		   NULL);
	dpflow_ctl_close(ctl);
	dpflow_ctx_destroy(ctx);
}

/* ---- 2. messages that say exactly what is wrong ------------------------- */

static const struct refused exact[] = {
    {"duplicate port name",
     "ports:\n  - {name: a, uri: 'ring:a'}\n  - {name: a, uri: 'ring:b'}\n",
     "t.yaml:3: ports[1].name: port 'a' already exists"},
    {"forwarding to a missing pipe",
     PORTS "pipes:\n"
	   "  - name: x\n"
	   "    type: basic\n"
	   "    match: [outer.ip.proto]\n"
	   "    fwd: {pipe: y}\n"
	   "  - {name: y, type: basic, match: [outer.ip.proto],\n"
	   "     miss: {pipe: nope}}\n",
     "t.yaml:9: pipes[1].miss.pipe: pipe 'nope' does not exist"},
    {"colour forwarding to a missing pipe",
     PORTS "pipes:\n"
	   "  - name: p\n"
	   "    type: basic\n"
	   "    match: [outer.ip.proto]\n"
	   "    monitor: {meter: {alg: srtcm, cir: 1, cbs: 1}}\n"
	   "    color_fwd: {yellow: {pipe: nope}}\n",
     "t.yaml:8: pipes[0].color_fwd.yellow.pipe: pipe 'nope' does not exist"},
    {"forwarding loop",
     PORTS
     "pipes:\n"
     "  - {name: w, type: basic, match: [outer.ip.proto], fwd: {pipe: x}}\n"
     "  - {name: x, type: basic, match: [outer.ip.proto], fwd: {pipe: y}}\n"
     "  - name: y\n"
     "    type: basic\n"
     "    match: [outer.ip.proto]\n"
     "    fwd: {port: a}\n"
     "    miss: {pipe: x}\n",
     "t.yaml:5: pipes[1].fwd.pipe: pipe 'x' makes a loop (x -> y -> x)"},
    {"pipe forwarding to itself",
     PORTS "pipes:\n"
	   "  - {name: s, type: basic, match: [outer.ip.proto], miss: {pipe: "
	   "s}}\n",
     "t.yaml:4: pipes[0].miss.pipe: pipe 's' makes a loop (s -> s)"},
    {"entry value out of range",
     PORTS "pipes:\n"
	   "  - {name: p, type: basic, match: [outer.l4.dport],\n"
	   "     entries: [{match: {outer.l4.dport: 70000}}]}\n",
     "t.yaml:5: pipes[0].entries[0].match.outer.l4.dport: '70000' is out of "
     "range (max 65535)"},
    {"entry value not a number",
     PORTS "pipes:\n"
	   "  - {name: p, type: basic, match: [outer.l4.dport],\n"
	   "     entries: [{match: {outer.l4.dport: http}}]}\n",
     "t.yaml:5: pipes[0].entries[0].match.outer.l4.dport: 'http' is not a "
     "number"},
    {"range bound out of range",
     PORTS "pipes:\n"
	   "  - {name: p, type: acl, match: [outer.l4.dport],\n"
	   "     entries: [{match: {outer.l4.dport: 1-70000}}]}\n",
     "t.yaml:5: pipes[0].entries[0].match.outer.l4.dport: '1-70000': "
     "'70000' is out of range (max 65535)"},
    {"mask out of range",
     PORTS "pipes:\n"
	   "  - {name: p, type: acl, match: [outer.ip.proto],\n"
	   "     entries: [{match: {outer.ip.proto: 6/0x1ff}}]}\n",
     "t.yaml:5: pipes[0].entries[0].match.outer.ip.proto: '6/0x1ff': mask "
     "'0x1ff' is out of range (max 255)"},
    {"size out of range",
     PORTS "pipes:\n"
	   "  - {name: p, type: basic, match: [outer.ip.proto], size: "
	   "99999999999999999999999}\n",
     "t.yaml:4: pipes[0].size: '99999999999999999999999' is out of range "
     "(max 67108864)"},
    {"size not a number",
     PORTS "pipes:\n"
	   "  - {name: p, type: basic, match: [outer.ip.proto], size: 1k}\n",
     "t.yaml:4: pipes[0].size: '1k' is not a number"},
    {"negative size",
     PORTS "pipes:\n"
	   "  - {name: p, type: basic, match: [outer.ip.proto], size: -1}\n",
     "t.yaml:4: pipes[0].size: '-1' is out of range (0..67108864)"},
};

Test(config_strict, messages_say_what_is_wrong)
{
	check_refused(exact, DPFLOW_ARRAY_SIZE(exact));
}

/* A template mask of 0 looks at none of the field's bits (docs/config.md,
 * Match templates): refused on every pipe type, whichever way it is
 * written, instead of being taken as all ones. */
static const struct refused zero_mask[] = {
    {"basic: per-entry field, mask: 0",
     PORTS "pipes:\n"
	   "  - {name: p, type: basic,\n"
	   "     match: [{field: outer.ip.proto, mask: 0}]}\n",
     "t.yaml:5: pipes[0].match[0].mask: mask 0 matches nothing of "
     "outer.ip.proto: drop the field from the template"},
    {"acl: constant field, value/0",
     PORTS
     "pipes:\n"
     "  - {name: p, type: acl,\n"
     "     match: [outer.l4.dport, {field: outer.ip.proto, value: 6/0}]}\n",
     "t.yaml:5: pipes[0].match[1].value: mask 0 matches nothing of "
     "outer.ip.proto: drop the field from the template"},
    {"control: mask: 0x0",
     PORTS "pipes:\n"
	   "  - {name: p, type: control,\n"
	   "     match: [{field: outer.l4.dport, mask: 0x0}]}\n",
     "t.yaml:5: pipes[0].match[0].mask: mask 0 matches nothing of "
     "outer.l4.dport: drop the field from the template"},
    {"hash: constant prefix /0",
     PORTS "pipes:\n"
	   "  - {name: p, type: hash, size: 4,\n"
	   "     match: [outer.l4.sport,\n"
	   "             {field: outer.ipv4.dst, value: 0.0.0.0/0}]}\n",
     "t.yaml:6: pipes[0].match[1].value: mask 0 matches nothing of "
     "outer.ipv4.dst: drop the field from the template"},
    {"hash: value with mask: 0",
     PORTS "pipes:\n"
	   "  - {name: p, type: hash, size: 4,\n"
	   "     match: [outer.l4.sport,\n"
	   "             {field: outer.ip.proto, value: 6, mask: 0}]}\n",
     "t.yaml:6: pipes[0].match[1].mask: mask 0 matches nothing of "
     "outer.ip.proto: drop the field from the template"},
};

Test(config_strict, template_mask_zero_is_refused)
{
	struct dpflow_ctx *ctx;

	check_refused(zero_mask, DPFLOW_ARRAY_SIZE(zero_mask));
	/* any other mask still loads */
	ctx = load_ok(PORTS
		      "pipes:\n"
		      "  - {name: p, type: control,\n"
		      "     match: [{field: outer.l4.dport, mask: 0x1}]}\n");
	dpflow_ctx_destroy(ctx);
}

/* Every backend built in; dpdk where libdpdk was found. */
Test(config_strict, unknown_port_kind_lists_every_kind)
{
	static const char want[] =
	    "t.yaml:2: ports[0].uri: unknown port kind 'pcapng' in "
	    "'pcapng:x.pcap' (known: pcap, ring, afpacket, afxdp, gen, null";
	struct dpflow_error err;
	struct dpflow_ctx *ctx =
	    load("ports:\n  - {name: a, uri: 'pcapng:x.pcap'}\n", &err);

	cr_assert_null(ctx);
	cr_assert(!strncmp(err.msg, want, sizeof(want) - 1), "%s", err.msg);
	cr_expect(!strcmp(err.msg + sizeof(want) - 1, ")") ||
		      !strcmp(err.msg + sizeof(want) - 1, ", dpdk)"),
		  "%s", err.msg);
}

Test(config_strict, config_path_is_a_directory)
{
	char dir[] = "/tmp/dpflow-strict-XXXXXX";
	struct dpflow_error err = {0};
	struct dpflow_ctx *ctx;
	char want[128];

	cr_assert_not_null(mkdtemp(dir));
	ctx = dpflow_config_load(dir, NULL, &err);
	rmdir(dir);
	cr_assert_null(ctx);
	snprintf(want, sizeof(want), "%s: is a directory, not a config file",
		 dir);
	cr_expect_str_eq(err.msg, want);
	cr_expect_eq(err.code, EISDIR);
}

/* ---- 3. the loader and the docs agree ----------------------------------- */

/* docs/config.md: a ct timeout of 0 is never. */
Test(config_strict, ct_timeout_zero_is_never)
{
	struct dpflow_ctx *ctx = load_ok(
	    PORTS
	    "pipes:\n"
	    "  - {name: ct, type: ct, ct: {timeouts_ms: {established: 0,\n"
	    "     udp_replied: 5}}}\n");
	const struct dpflow_pipe_cfg *c =
	    dpflow_pipe_cfg(dpflow_pipe_find(ctx, "ct"));

	cr_expect_eq(c->ct.timeout_ms[3], DPFLOW_CT_TIMEOUT_NEVER);
	cr_expect_eq(c->ct.timeout_ms[10], 5);
	cr_expect_eq(c->ct.timeout_ms[1], 0, "unset: the default");
	dpflow_ctx_destroy(ctx);
}

#define ENCAP_PIPE(tun)                                                  \
	PORTS "pipes:\n"                                                 \
	      "  - name: p\n"                                            \
	      "    type: basic\n"                                        \
	      "    match: [outer.ip.proto]\n"                            \
	      "    actions: [[{encap: {type: " tun ", src: 192.0.2.1,\n" \
	      "                        dst: 192.0.2.2,\n"

static const struct refused tunnel_keys[] = {
    {"vxlan with a key", ENCAP_PIPE("vxlan") "      vni: 5, key: 7}}]]\n",
     "t.yaml:9: pipes[0].actions[0][0].encap.key: 'key' is for gre tunnels: "
     "a vxlan tunnel takes 'vni'"},
    {"geneve with a key", ENCAP_PIPE("geneve") "      key: 7}}]]\n",
     "t.yaml:9: pipes[0].actions[0][0].encap.key: 'key' is for gre tunnels: "
     "a geneve tunnel takes 'vni'"},
    {"gre with a vni", ENCAP_PIPE("gre") "      vni: 7}}]]\n",
     "t.yaml:9: pipes[0].actions[0][0].encap.vni: 'vni' is for vxlan and "
     "geneve tunnels: a gre tunnel takes 'key'"},
    {"ipip with a key", ENCAP_PIPE("ipip") "      key: 7}}]]\n",
     "t.yaml:9: pipes[0].actions[0][0].encap.key: an ipip tunnel has no VNI "
     "or key"},
    {"too many action templates",
     PORTS "pipes:\n"
	   "  - {name: p, type: basic, match: [outer.ip.proto],\n"
	   "     actions: [[], [], [], [], [], [], [], [], []]}\n",
     "t.yaml:5: pipes[0].actions: 9 action templates: a pipe has at most 8 "
     "(docs/config.md, Limits)"},
    {"too many actions",
     PORTS
     "pipes:\n"
     "  - {name: p, type: basic, match: [outer.ip.proto],\n"
     "     actions: [[{dec_ttl: true}, {dec_ttl: true}, {dec_ttl: true},\n"
     "                {dec_ttl: true}, {dec_ttl: true}, {dec_ttl: true},\n"
     "                {dec_ttl: true}, {dec_ttl: true}, {dec_ttl: true}]]}\n",
     "t.yaml:5: pipes[0].actions[0]: 9 actions: a template has at most 8 "
     "(docs/config.md, Limits)"},
    {"too many match fields",
     PORTS
     "pipes:\n"
     "  - {name: p, type: basic, match: [meta.reg0, meta.reg1, meta.reg2,\n"
     "     meta.reg3, outer.ip.proto, outer.ip.ttl, outer.ip.dscp,\n"
     "     outer.l4.sport, outer.l4.dport, outer.tcp.flags, outer.vlan0,\n"
     "     outer.vlan1, outer.eth.type]}\n",
     "t.yaml:4: pipes[0].match: 13 match fields: a pipe has at most 12 "
     "(docs/config.md, Limits)"},
};

Test(config_strict, each_tunnel_takes_its_own_id_and_limits_are_named)
{
	check_refused(tunnel_keys, DPFLOW_ARRAY_SIZE(tunnel_keys));
}

Test(config_strict, tunnel_ids)
{
	struct dpflow_ctx *ctx = load_ok(
	    PORTS
	    "pipes:\n"
	    "  - name: p\n"
	    "    type: basic\n"
	    "    match: [outer.ip.proto]\n"
	    "    actions:\n"
	    "      - [{encap: {type: vxlan, src: 192.0.2.1, dst: 192.0.2.2,\n"
	    "                  vni: 100}}]\n"
	    "      - [{encap: {type: gre, src: 192.0.2.1, dst: 192.0.2.2,\n"
	    "                  key: 0x12345678}}]\n"
	    "      - [{encap: {type: gre, src: 192.0.2.1, dst: 192.0.2.2}}]\n"
	    "      - [{encap: {type: ipip, src: 192.0.2.1, dst: "
	    "192.0.2.2}}]\n");
	const struct dpflow_pipe_cfg *c =
	    dpflow_pipe_cfg(dpflow_pipe_find(ctx, "p"));

	cr_expect_eq(c->actions[0].a[0].encap.id, 100);
	cr_expect_eq(c->actions[0].a[0].encap.gre_key, 0);
	cr_expect_eq(c->actions[1].a[0].encap.id, 0x12345678);
	cr_expect_eq(c->actions[1].a[0].encap.gre_key, 1);
	cr_expect_eq(c->actions[2].a[0].encap.gre_key, 0);
	dpflow_ctx_destroy(ctx);
}
