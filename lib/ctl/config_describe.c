/*
 * dpflow_config_describe() (config.h): what a loaded context would run,
 * as text for `dpflow validate`. Ports by name, kind and URI; pipes with
 * their match template, action templates, forwarding and entries in
 * config syntax, in ctl_format.c's forms (an entry line is what
 * `dpflowctl entries list` prints for it). Control thread only.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "dpflow/config.h"
#include "dpflow/port.h"

#include "ctl/ctl_internal.h"

/* @label, then @v (consumed) as compact JSON on one line. */
static int put_json(FILE *out, const char *label, json_t *v)
{
	char *s = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY |
					JSON_PRESERVE_ORDER)
		    : NULL;

	json_decref(v);
	if (!s)
		return -ENOMEM;
	fprintf(out, "%s%s\n", label, s);
	free(s);
	return 0;
}

static int describe_pipe(FILE *out, struct dpflow_ctx *ctx,
			 const struct dpflow_pipe *pipe)
{
	const struct dpflow_pipe_cfg *c = dpflow_pipe_cfg(pipe);
	unsigned n = dpflow_pipe_entry_count(pipe);
	json_t *tmpls = NULL;
	char label[32];
	int rc;

	fprintf(out, "  %s: type %s", c->name, dpflow_pipe_type_name(c->type));
	if (c->root)
		fprintf(out, ", root of port %s",
			dpflow_ctx_port_name(ctx, c->port));
	fprintf(out, ", %u entr%s (size %u)", n, n == 1 ? "y" : "ies",
		dpflow_pipe_size(pipe));
	if (c->maglev_slots) /* entries are members, listed as such */
		fprintf(out, ", maglev over %u slots", c->maglev_slots);
	fprintf(out, "\n");
	rc = put_json(out, "    match: ", ctl_match_json(&c->match));
	if (!rc && !(tmpls = ctl_actions_json(ctx, c)))
		rc = -ENOMEM;
	for (unsigned t = 0; !rc && t < c->n_action_tmpls; t++) {
		snprintf(label, sizeof(label), "    actions[%u]: ", t);
		rc =
		    put_json(out, label, json_incref(json_array_get(tmpls, t)));
	}
	json_decref(tmpls);
	if (!rc)
		rc = put_json(out, "    fwd: ", ctl_fwd_json(ctx, &c->fwd));
	if (!rc)
		rc = put_json(out,
			      "    miss: ", ctl_fwd_json(ctx, &c->miss_fwd));
	if (!rc && c->color_fwd.yellow_set)
		rc = put_json(out, "    yellow: ",
			      ctl_fwd_json(ctx, &c->color_fwd.yellow));
	if (!rc && c->color_fwd.red_set)
		rc = put_json(
		    out, "    red: ", ctl_fwd_json(ctx, &c->color_fwd.red));
	if (!rc && n)
		fprintf(out, "    entries:\n");
	for (uint32_t s = 0; !rc && n && s < dpflow_pipe_size(pipe); s++) {
		const struct dpflow_entry *e = dpflow_pipe_entry(pipe, s);

		if (e)
			rc = put_json(
			    out, "      - ",
			    ctl_entry_json(ctx, pipe, dpflow_entry_cfg(e)));
	}
	return rc;
}

int dpflow_config_describe(struct dpflow_ctx *ctx, FILE *out)
{
	int rc = 0;

	fprintf(out, "ports:\n");
	for (unsigned i = 0; i < dpflow_ctx_port_count(ctx); i++) {
		const struct dpflow_port *p = dpflow_ctx_port(ctx, i);

		fprintf(out, "  %s: %s %s\n", dpflow_ctx_port_name(ctx, i),
			dpflow_port_kind(p), dpflow_port_name(p));
	}
	fprintf(out, "pipes:\n");
	for (unsigned i = 0; !rc && i < dpflow_ctx_pipe_count(ctx); i++)
		rc = describe_pipe(out, ctx, dpflow_ctx_pipe(ctx, i));
	return rc;
}
