/*
 * libFuzzer target for the control requests: arbitrary bytes to
 * dpflow_ctl_handle() on a small context with a pipe of each kind that
 * takes entries. The control and config sources are compiled into this
 * program (tests/fuzz/meson.build) so that they carry coverage. Invariant
 * checked on every input: the reply is one line of JSON, an object whose
 * "ok" is a boolean, with an "error" string when it is false. The context
 * is rebuilt for every input, so that an input's outcome does not depend
 * on the ones before it.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/config.h"
#include "dpflow/ctl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *cfg_yaml =
    "context: {shared_counters: 2}\n"
    "ports:\n"
    "  - {name: in, uri: 'ring:in'}\n"
    "  - {name: out, uri: 'ring:out'}\n"
    "pipes:\n"
    "  - name: fw\n"
    "    type: basic\n"
    "    root: in\n"
    "    size: 16\n"
    "    match: [outer.l4.dport, outer.eth.src]\n"
    "    actions:\n"
    "      - [{set: {field: meta.reg0, value: per-entry}}]\n"
    "      - [{encap: per-entry}, {nat_dst_ip: per-entry}]\n"
    "    monitor: {counter: true, aging_ms: 1000,\n"
    "              meter: {alg: srtcm, cir: 1000, cbs: 100}}\n"
    "    fwd: per-entry\n"
    "    miss: {pipe: acl}\n"
    "    entries:\n"
    "      - {match: {outer.l4.dport: 22, outer.eth.src: "
    "'02:00:00:00:00:01'},\n"
    "         values: [1], fwd: drop}\n"
    "  - name: acl\n"
    "    type: acl\n"
    "    size: 16\n"
    "    match: [outer.ipv4.src, outer.l4.sport, outer.ip.proto]\n"
    "    monitor: {shared_counter: 1}\n"
    "    fwd: {port: out}\n"
    "  - name: rt\n"
    "    type: lpm\n"
    "    size: 16\n"
    "    match: [meta.reg0, outer.ipv6.dst]\n"
    "    fwd: {port: out}\n"
    "  - name: ecmp\n"
    "    type: hash\n"
    "    size: 4\n"
    "    match: [outer.ipv4.src]\n"
    "    fwd: per-entry\n"
    "  - name: ct\n"
    "    type: ct\n"
    "    size: 16\n"
    "    fwd: {port: out}\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dpflow_error err = {0};
	struct dpflow_ctx *ctx;
	struct dpflow_ctl *ctl;
	json_t *r, *ok;
	char *reply;

	ctx = dpflow_config_load_string(cfg_yaml, "fuzz.yaml", NULL, &err);
	if (!ctx)
		abort();
	ctl = dpflow_ctl_open(ctx, NULL, NULL, &err);
	if (!ctl)
		abort();
	reply = dpflow_ctl_handle(ctl, (const char *)data, size);
	if (!reply || strchr(reply, '\n'))
		abort();
	r = json_loads(reply, 0, NULL);
	ok = json_object_get(r, "ok");
	if (!r || !json_is_boolean(ok) ||
	    (json_is_false(ok) && !json_is_string(json_object_get(r, "error"))))
		abort();
	json_decref(r);
	free(reply);
	dpflow_ctl_close(ctl);
	dpflow_ctx_destroy(ctx);
	return 0;
}
