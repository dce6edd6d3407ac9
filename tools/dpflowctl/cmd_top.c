/*
 * `dpflowctl top`: rates per port, pipe, drop reason and worker, from the
 * `counters` and `workers` replies sampled every interval.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dpflowctl.h"

static const char *const usage_top =
    "usage: dpflowctl top [--once | --count N] [--interval SECONDS]\n"
    "\n"
    "Every interval (1 s by default), the rates since the last refresh:\n"
    "packets and bits per second received and sent per port, lookups,\n"
    "hits and misses per second per pipe, drops per second per reason,\n"
    "packets per second per worker. Plain text; the screen is cleared\n"
    "between refreshes when the output is a terminal. --count N stops\n"
    "after N refreshes, --once after one.\n";

static json_t *request(const char *cmd)
{
	return json_pack("{s:s}", "cmd", cmd);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Counter @key of the item named @name in @list of @prev. */
static uint64_t prev_num(json_t *prev, const char *list, const char *name,
			 const char *key)
{
	size_t i;
	json_t *o;

	json_array_foreach(json_object_get(prev, list), i, o)
	{
		const char *n = json_string_value(json_object_get(o, "name"));

		if (n && !strcmp(n, name))
			return json_num(o, key);
	}
	return 0;
}

static double rate(uint64_t now, uint64_t before, double dt)
{
	return now >= before && dt > 0 ? (double)(now - before) / dt : 0;
}

static void top_screen(json_t *cur, json_t *prev, json_t *wcur, json_t *wprev,
		       double dt, bool clear)
{
	const char *reason;
	size_t i;
	json_t *o;

	if (clear)
		fputs("\033[H\033[2J", stdout);
	printf("dpflow top: rates over %.2f s\n\n", dt);
	printf("%-16s %12s %12s %12s %12s\n", "PORT", "RX_PPS", "RX_MBPS",
	       "TX_PPS", "TX_MBPS");
	json_array_foreach(json_object_get(cur, "ports"), i, o)
	{
		const char *n = json_str(o, "name");

		printf("%-16s %12.0f %12.2f %12.0f %12.2f\n", n,
		       rate(json_num(o, "rx_pkts"),
			    prev_num(prev, "ports", n, "rx_pkts"), dt),
		       8e-6 * rate(json_num(o, "rx_bytes"),
				   prev_num(prev, "ports", n, "rx_bytes"), dt),
		       rate(json_num(o, "tx_pkts"),
			    prev_num(prev, "ports", n, "tx_pkts"), dt),
		       8e-6 * rate(json_num(o, "tx_bytes"),
				   prev_num(prev, "ports", n, "tx_bytes"), dt));
	}
	printf("\n%-16s %12s %12s %12s %10s\n", "PIPE", "LOOKUPS/S", "HITS/S",
	       "MISSES/S", "ENTRIES");
	json_array_foreach(json_object_get(cur, "pipes"), i, o)
	{
		const char *n = json_str(o, "name");

		printf("%-16s %12.0f %12.0f %12.0f %10llu\n", n,
		       rate(json_num(o, "pkts"),
			    prev_num(prev, "pipes", n, "pkts"), dt),
		       rate(json_num(o, "hits"),
			    prev_num(prev, "pipes", n, "hits"), dt),
		       rate(json_num(o, "misses"),
			    prev_num(prev, "pipes", n, "misses"), dt),
		       (unsigned long long)json_num(o, "entries"));
	}
	printf("\n%-32s %12s %14s\n", "DROP REASON", "DROPS/S", "TOTAL");
	json_object_foreach(json_object_get(cur, "drops"), reason, o)
	{
		uint64_t total = (uint64_t)json_integer_value(o);

		printf("%-32s %12.0f %14llu\n", reason,
		       rate(total,
			    json_num(json_object_get(prev, "drops"), reason),
			    dt),
		       (unsigned long long)total);
	}
	if (json_array_size(json_object_get(wcur, "workers"))) {
		printf("\n%-6s %12s %8s\n", "WORKER", "PKTS/S", "BUSY%");
		json_array_foreach(json_object_get(wcur, "workers"), i, o)
		{
			json_t *p = json_array_get(
			    json_object_get(wprev, "workers"), i);

			printf(
			    "%-6zu %12.0f %8.1f\n", i,
			    rate(json_num(o, "pkts"), json_num(p, "pkts"), dt),
			    100.0 *
				rate(json_num(o, "busy_ns"),
				     json_num(p, "busy_ns"), dt) /
				1e9);
		}
	}
	fflush(stdout);
}

int cmd_top(int argc, char **argv)
{
	long count = -1;
	double interval = 1.0;
	json_t *prev, *wprev;
	double t_prev;

	if (any_help(argc, argv))
		return help_text(usage_top, NULL);
	for (int i = 1; i < argc; i++) {
		char *end = NULL;

		if (!strcmp(argv[i], "--once")) {
			count = 1;
		} else if (!strcmp(argv[i], "--count") && i + 1 < argc) {
			count = strtol(argv[++i], &end, 10);
			if (*end || count < 1)
				return usage_error("top",
						   "--count takes a "
						   "number >= 1, not "
						   "'%s'",
						   argv[i]);
		} else if (!strcmp(argv[i], "--interval") && i + 1 < argc) {
			interval = strtod(argv[++i], &end);
			if (*end || !(interval >= 0.01 && interval <= 3600))
				return usage_error("top",
						   "--interval takes seconds, "
						   "0.01..3600, not '%s'",
						   argv[i]);
		} else {
			return usage_error("top", "unknown argument '%s'",
					   argv[i]);
		}
	}
	prev = client_call(request("counters"));
	wprev = client_call(request("workers"));
	t_prev = now_s();
	if (!prev || !wprev) {
		json_decref(prev);
		json_decref(wprev);
		return EXIT_FAIL;
	}
	for (long n = 0; count < 0 || n < count; n++) {
		struct timespec ts = {
		    .tv_sec = (time_t)interval,
		    .tv_nsec =
			(long)((interval - (double)(time_t)interval) * 1e9)};
		json_t *cur, *wcur;
		double t;

		while (nanosleep(&ts, &ts) && errno == EINTR)
			;
		cur = client_call(request("counters"));
		wcur = cur ? client_call(request("workers")) : NULL;
		t = now_s();
		if (!cur || !wcur) {
			json_decref(cur);
			json_decref(prev);
			json_decref(wprev);
			return EXIT_FAIL;
		}
		top_screen(cur, prev, wcur, wprev, t - t_prev,
			   isatty(STDOUT_FILENO) && count != 1);
		json_decref(prev);
		json_decref(wprev);
		prev = cur;
		wprev = wcur;
		t_prev = t;
	}
	json_decref(prev);
	json_decref(wprev);
	return 0;
}
