/*
 * `dpflowctl trace`: trace packets of a running data plane (the control
 * socket's `trace` request) and print each as `dpflow trace` prints one
 * (tools/lib/trace_text.c), or the reply as it is with --json.
 */
#include <stdlib.h>
#include <string.h>

#include "dpflow/ctl.h"
#include "dpflow/trace.h"

#include "dpflowctl.h"
#include "trace_text.h"

static const char *const usage_trace =
    "usage: dpflowctl trace [--port NAME] [--count N] [--timeout MS] "
    "[--json]\n"
    "\n"
    "Trace the first N packets of the next burst the data plane's workers\n"
    "receive (on port NAME, or on any port), waiting at most MS\n"
    "milliseconds for them, and print each as `dpflow trace` prints a\n"
    "packet of a capture: each pipe with the entry hit (by id) or the\n"
    "miss (CT pipes: the connection and its state), the meter's colour,\n"
    "whether the entry's actions ran and where the pipe sent it; then the\n"
    "verdict. The server's control thread waits for the packets and\n"
    "serves nothing else meanwhile; a run without worker threads (the GPU\n"
    "target) refuses.\n"
    "\n"
    "  --port NAME   trace packets received on this port (default: any)\n"
    "  --count N     packets to trace, 1..8 (default 1; fewer when the\n"
    "                burst is smaller)\n"
    "  --timeout MS  wait at most MS ms, 1..10000 (default 1000; -t must\n"
    "                leave the reply that long)\n"
    "  --json        print the server's reply (docs/control.md, `trace`)\n"
    "\n"
    "Exit status: 0 traced, 1 no packet came in time or the request\n"
    "failed, 2 usage.\n";

/* @s as a whole number within @lo..@hi into *@out; false if it is not. */
static bool number(const char *s, long lo, long hi, long *out)
{
	char *end;

	*out = strtol(s, &end, 10);
	return *s && !*end && *out >= lo && *out <= hi;
}

int cmd_trace(int argc, char **argv)
{
	const char *port = NULL;
	long count = 1, timeout = 1000;
	bool json = false;
	json_t *req, *reply, *t;
	size_t n, i;

	if (any_help(argc, argv))
		return help_text(usage_trace, NULL);
	for (int k = 1; k < argc; k++) {
		const char *a = argv[k];

		if (!strcmp(a, "--json")) {
			json = true;
			continue;
		}
		if (strcmp(a, "--port") && strcmp(a, "--count") &&
		    strcmp(a, "--timeout"))
			return usage_error("trace", "unknown argument '%s'", a);
		if (++k == argc)
			return usage_error("trace", "%s takes a value", a);
		if (!strcmp(a, "--port"))
			port = argv[k];
		else if (!strcmp(a, "--count") &&
			 !number(argv[k], 1, DPFLOW_TRACE_PKTS_MAX, &count))
			return usage_error("trace",
					   "--count takes a number within "
					   "1..%d, not '%s'",
					   DPFLOW_TRACE_PKTS_MAX, argv[k]);
		else if (!strcmp(a, "--timeout") &&
			 !number(argv[k], 1, DPFLOW_CTL_TRACE_TIMEOUT_MAX,
				 &timeout))
			return usage_error("trace",
					   "--timeout takes milliseconds "
					   "within 1..%u, not '%s'",
					   DPFLOW_CTL_TRACE_TIMEOUT_MAX,
					   argv[k]);
	}
	req = json_pack("{s:s,s:i,s:i}", "cmd", "trace", "count", (int)count,
			"timeout_ms", (int)timeout);
	if (req && port)
		json_object_set_new(req, "port", json_string(port));
	reply = client_call(req);
	if (!reply)
		return EXIT_FAIL;
	t = json_object_get(reply, "traces");
	n = json_array_size(t);
	if (json) {
		print_json(reply);
	} else if (!n) {
		fprintf(stderr,
			"dpflowctl trace: no packet received %s%s%s within "
			"%ld ms\n",
			port ? "on port '" : "on any port", port ? port : "",
			port ? "'" : "", timeout);
	}
	for (i = 0; !json && i < n; i++) {
		json_t *one = json_array_get(t, i);

		printf("packet %zu of %zu: received on port '%s'\n", i + 1, n,
		       json_str(one, "port"));
		trace_text(stdout, one);
	}
	json_decref(reply);
	return n ? 0 : EXIT_FAIL;
}
