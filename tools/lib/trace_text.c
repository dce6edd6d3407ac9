/*
 * A packet trace's JSON form to text (trace_text.h); the format is in
 * docs/trace.md.
 */
#include <string.h>

#include "dpflow/meta.h"

#include "trace_text.h"

/* Member @key of @o as a string; "?" when absent or not one. */
static const char *str(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s ? s : "?";
}

/* Member @key of @o as a number; 0 when absent or not one. */
static long long num(json_t *o, const char *key)
{
	return json_integer_value(json_object_get(o, key));
}

/* Where "to" of @o sent the packet: "port 'out'", "drop (flow_miss)"... */
static void target(FILE *f, json_t *o)
{
	const char *to = str(o, "to");

	if (!strcmp(to, "port"))
		fprintf(f, "port '%s'", str(o, "port"));
	else if (!strcmp(to, "pipe"))
		fprintf(f, "pipe '%s'", str(o, "next"));
	else if (!strcmp(to, "rss"))
		fprintf(f, "rss queue %lld", num(o, "queue"));
	else if (!strcmp(to, "handler"))
		fprintf(f, "a software handler");
	else
		fprintf(f, "drop (%s)", str(o, "reason"));
}

static void step(FILE *f, json_t *st)
{
	const char *match = str(st, "match");
	const char *color = str(st, "color");

	fprintf(f, "  pipe '%s' (%s): %s", str(st, "pipe"), str(st, "type"),
		match);
	if (json_object_get(st, "entry"))
		fprintf(f, " entry %lld", num(st, "entry"));
	if (json_object_get(st, "connection"))
		fprintf(f, " connection %lld, %s%s%s", num(st, "connection"),
			str(st, "ct_state"),
			num(st, "ct_flags") & DPFLOW_META_CT_NEW ? ", new" : "",
			num(st, "ct_flags") & DPFLOW_META_CT_REPLY ? ", reply"
								   : "");
	if (json_object_get(st, "ct_drop"))
		fprintf(f, " (%s)", str(st, "ct_drop"));
	if (strcmp(color, "green"))
		fprintf(f, ", %s", color);
	if (json_is_true(json_object_get(st, "actions")))
		fprintf(f, ", actions");
	fprintf(f, " -> ");
	target(f, st);
	fprintf(f, "\n");
}

void trace_text(FILE *f, json_t *trace)
{
	size_t i;
	json_t *st;

	json_array_foreach(json_object_get(trace, "steps"), i, st)
	{
		step(f, st);
	}
	fprintf(f, "verdict: ");
	target(f, json_object_get(trace, "verdict"));
	fprintf(f, "\n");
}
