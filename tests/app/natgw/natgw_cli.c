/*
 * `dpflowctl natgw stats [--json]`: the gateway's counters (the
 * natgw.stats request, README.md), registered with dpflowctl through the
 * app registry (dpflow/app.h). A library of its own that needs jansson
 * only, as a dpflowctl links it without the data plane.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "dpflow/app.h"

static const char *const usage_natgw =
    "usage: dpflowctl natgw COMMAND ...\n"
    "\n"
    "  stats [--json]                 connections, packets translated each\n"
    "                                 way, packets dropped by reason\n";

static json_int_t num(json_t *o, const char *a, const char *b)
{
	return json_integer_value(json_object_get(json_object_get(o, a), b));
}

/* The reply as three lines of text. */
static void show(json_t *r)
{
	json_t *by = json_object_get(r, "dropped_by"), *v;
	const char *reason;
	bool first = true;

	printf(
	    "connections: live %" JSON_INTEGER_FORMAT
	    ", created %" JSON_INTEGER_FORMAT ", expired %" JSON_INTEGER_FORMAT
	    ", replaced %" JSON_INTEGER_FORMAT
	    ", nat_exhausted %" JSON_INTEGER_FORMAT "\n",
	    num(r, "connections", "live"), num(r, "connections", "created"),
	    num(r, "connections", "expired"), num(r, "connections", "replaced"),
	    num(r, "connections", "nat_exhausted"));
	printf("packets: out %" JSON_INTEGER_FORMAT ", in %" JSON_INTEGER_FORMAT
	       ", dropped %" JSON_INTEGER_FORMAT "\n",
	       num(r, "packets", "out"), num(r, "packets", "in"),
	       num(r, "packets", "dropped"));
	printf("dropped:");
	json_object_foreach(by, reason, v)
	{
		printf("%s %s %" JSON_INTEGER_FORMAT, first ? "" : ",", reason,
		       json_integer_value(v));
		first = false;
	}
	printf("\n");
}

static int run_stats(const struct dpflow_app_client *cl, int argc, char **argv)
{
	bool json = argc == 2 && !strcmp(argv[1], "--json");
	json_t *reply;

	if (argc > 2 || (argc == 2 && !json))
		return cl->usage_error("natgw stats", "unknown argument '%s'",
				       argv[argc == 2 ? 1 : 2]);
	reply = cl->call(json_pack("{s:s}", "cmd", "natgw.stats"));
	if (!reply)
		return DPFLOW_APP_EXIT_FAIL;
	if (json)
		cl->print_json(reply);
	else
		show(reply);
	json_decref(reply);
	return 0;
}

static const struct dpflow_app_verb verbs[] = {
    {"stats",
     "usage: dpflowctl natgw stats [--json]\n"
     "\n"
     "The gateway's connections (live, created, expired, replaced, and\n"
     "new ones refused for want of a free binding), packets translated\n"
     "out and in, and packets dropped, in all and by reason. --json\n"
     "prints the server's natgw.stats reply.\n",
     run_stats},
};

static const struct dpflow_app_cli natgw_cli = {
    .app = "natgw",
    .summary = "the NAT gateway app's counters (natgw --help)",
    .usage = usage_natgw,
    .verbs = verbs,
    .n_verbs = 1,
};

DPFLOW_APP_CLI_REGISTER(natgw_cli)
