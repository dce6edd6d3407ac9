/*
 * dpflowctl: talk to a running `dpflow run --control` over its control
 * socket (docs/control.md). Exit status 0 on success, 1 when the server
 * cannot be reached or refuses a request, 2 on a usage error.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dpflow/ctl.h"

#include "dpflowctl.h"

/* Entries a request carries at most (requests stay far below the
 * server's size limit; each request is applied all or nothing). */
#define BATCH 10000u

static const char *const usage_main =
    "usage: dpflowctl [-s SOCKET] [-t SECONDS] COMMAND [ARGS]\n"
    "\n"
    "Talk to a running `dpflow run --control` (docs/control.md).\n"
    "\n"
    "  -s, --socket SOCKET   control socket (default " DPFLOW_CTL_SOCKET_DEFAULT
    ")\n"
    "  -t, --timeout SECONDS wait this long for each reply (default 30)\n"
    "\n"
    "commands:\n"
    "  ports [--json]                 ports, their root pipes and counters\n"
    "  pipes [--json]                 pipes: type, entries, forwarding\n"
    "  entries list|add|rm|update PIPE ...\n"
    "                                 a pipe's entries (entries --help)\n"
    "  batch FILE                     adds, removals and updates over\n"
    "                                 pipes as one batch (batch --help)\n"
    "  counters [--json]              port, pipe, drop and shared counters\n"
    "  workers [--json]               per-worker counters\n"
    "  dump [--dot]                   the pipe graph as text or Graphviz "
    "dot\n"
    "  top [--once|--count N] [--interval S]\n"
    "                                 rates per port, pipe and drop reason\n"
    "  l4lb ...                       the L4 load balancer app's services\n"
    "                                 and backends (l4lb --help)\n"
    "\n"
    "COMMAND --help says more.\n";

static const char *const usage_entries =
    "usage: dpflowctl entries list PIPE [--json]\n"
    "       dpflowctl entries add PIPE ENTRY... | --file FILE\n"
    "       dpflowctl entries rm PIPE ENTRY... | --slot N... | --file FILE\n"
    "       dpflowctl entries update PIPE ENTRY... | --file FILE\n"
    "\n"
    "An ENTRY is YAML or JSON text of one entry as a config writes it\n"
    "(docs/config.md, Entries), e.g.\n"
    "  '{match: {outer.l4.dport: 80}, fwd: {port: out}}'\n"
    "FILE holds a list of entries (YAML or JSON), or a mapping whose\n"
    "'entries' key holds one. `entries rm` finds entries by their match\n"
    "(and 'priority' when given; other keys are ignored) or by --slot, the\n"
    "slot `entries list` shows. `entries update` finds each entry by its\n"
    "match and gives it the rest of ENTRY (actions, values, forwarding);\n"
    "packets see the old entry or the new one, never neither.\n"
    "\n"
    "Entries go to the server in requests of at most 10000; each request\n"
    "is applied all or nothing, so a file of more entries that fails\n"
    "part-way leaves the earlier requests applied (dpflowctl says how\n"
    "many).\n";

static const char *const usage_batch =
    "usage: dpflowctl batch FILE\n"
    "\n"
    "FILE (YAML or JSON, - for standard input) holds a list of ops:\n"
    "  - {op: add, pipe: P, entries: [ENTRY, ...]}\n"
    "  - {op: rm, pipe: P, entries: [{match: ...} or {slot: N}, ...]}\n"
    "  - {op: update, pipe: P, entries: [ENTRY, ...]}\n"
    "All of them are applied as one batch, in one request (at most 100000\n"
    "entries): a packet sees every op of it or none, and an error in any\n"
    "op changes nothing.\n";

static const char *const usage_top =
    "usage: dpflowctl top [--once | --count N] [--interval SECONDS]\n"
    "\n"
    "Every interval (1 s by default), the rates since the last refresh:\n"
    "packets and bits per second received and sent per port, lookups,\n"
    "hits and misses per second per pipe, drops per second per reason,\n"
    "packets per second per worker. Plain text; the screen is cleared\n"
    "between refreshes when the output is a terminal. --count N stops\n"
    "after N refreshes, --once after one.\n";

static int usage(const char *text, const char *why)
{
	if (why)
		fprintf(stderr, "dpflowctl: %s\n\n", why);
	fputs(text, why ? stderr : stdout);
	return why ? EXIT_USAGE : 0;
}

static bool is_help(const char *s)
{
	return !strcmp(s, "-h") || !strcmp(s, "--help");
}

static json_t *request(const char *cmd)
{
	return json_pack("{s:s}", "cmd", cmd);
}

static uint64_t num(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_integer(v) ? (uint64_t)json_integer_value(v) : 0;
}

static const char *str(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s ? s : "-";
}

/* @v compactly as JSON (for forwarding and entries). */
static void print_json(FILE *f, json_t *v)
{
	char *s =
	    json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);

	fputs(s ? s : "?", f);
	free(s);
}

/* Parse the optional --json of a command with no other arguments. */
static int json_flag(int argc, char **argv, const char *usage_text, bool *json)
{
	*json = false;
	for (int i = 1; i < argc; i++) {
		if (is_help(argv[i]))
			return usage(usage_text, NULL), -1;
		if (strcmp(argv[i], "--json"))
			return usage(usage_text, "unknown argument"), -2;
		*json = true;
	}
	return 0;
}

static int simple(const char *cmd, int argc, char **argv,
		  const char *usage_text, void (*show)(json_t *))
{
	bool json;
	int rc = json_flag(argc, argv, usage_text, &json);
	json_t *reply;

	if (rc)
		return rc == -1 ? 0 : EXIT_USAGE;
	reply = client_call(request(cmd));
	if (!reply)
		return EXIT_FAIL;
	if (json) {
		print_json(stdout, reply);
		putchar('\n');
	} else {
		show(reply);
	}
	json_decref(reply);
	return 0;
}

/* ---- ports, pipes, counters, workers, dump -------------------------------
 */

static void show_ports(json_t *r)
{
	size_t i;
	json_t *p;

	printf("%-3s %-16s %-9s %-16s %12s %12s %12s %12s\n", "ID", "NAME",
	       "KIND", "ROOT", "RX_PKTS", "RX_BYTES", "TX_PKTS", "TX_BYTES");
	json_array_foreach(json_object_get(r, "ports"), i, p)
	{
		json_t *s = json_object_get(p, "stats");

		printf("%-3llu %-16s %-9s %-16s %12llu %12llu %12llu %12llu\n",
		       (unsigned long long)num(p, "id"), str(p, "name"),
		       str(p, "kind"), str(p, "root"),
		       (unsigned long long)num(s, "rx_pkts"),
		       (unsigned long long)num(s, "rx_bytes"),
		       (unsigned long long)num(s, "tx_pkts"),
		       (unsigned long long)num(s, "tx_bytes"));
	}
}

static void show_pipes(json_t *r)
{
	size_t i;
	json_t *p;

	json_array_foreach(json_object_get(r, "pipes"), i, p)
	{
		json_t *s = json_object_get(p, "stats");

		printf("%s (%s%s%s) %llu/%llu entries, %llu lookups, %llu "
		       "hits, %llu misses\n",
		       str(p, "name"), str(p, "type"),
		       json_is_string(json_object_get(p, "root"))
			   ? ", root of port "
			   : "",
		       json_is_string(json_object_get(p, "root"))
			   ? str(p, "root")
			   : "",
		       (unsigned long long)num(p, "entries"),
		       (unsigned long long)num(p, "size"),
		       (unsigned long long)num(s, "pkts"),
		       (unsigned long long)num(s, "hits"),
		       (unsigned long long)num(s, "misses"));
		fputs("    match ", stdout);
		print_json(stdout, json_object_get(p, "match"));
		fputs("  fwd ", stdout);
		print_json(stdout, json_object_get(p, "fwd"));
		fputs("  miss ", stdout);
		print_json(stdout, json_object_get(p, "miss"));
		putchar('\n');
	}
}

static void show_counters(json_t *r)
{
	const char *reason;
	size_t i;
	json_t *p;

	printf("%-16s %14s %14s %14s %14s\n", "PORT", "RX_PKTS", "RX_BYTES",
	       "TX_PKTS", "TX_BYTES");
	json_array_foreach(json_object_get(r, "ports"), i, p)
	    printf("%-16s %14llu %14llu %14llu %14llu\n", str(p, "name"),
		   (unsigned long long)num(p, "rx_pkts"),
		   (unsigned long long)num(p, "rx_bytes"),
		   (unsigned long long)num(p, "tx_pkts"),
		   (unsigned long long)num(p, "tx_bytes"));
	printf("\n%-16s %14s %14s %14s %10s\n", "PIPE", "LOOKUPS", "HITS",
	       "MISSES", "ENTRIES");
	json_array_foreach(json_object_get(r, "pipes"), i, p)
	    printf("%-16s %14llu %14llu %14llu %10llu\n", str(p, "name"),
		   (unsigned long long)num(p, "pkts"),
		   (unsigned long long)num(p, "hits"),
		   (unsigned long long)num(p, "misses"),
		   (unsigned long long)num(p, "entries"));
	printf("\n%-32s %14s\n", "DROP REASON", "PACKETS");
	json_object_foreach(json_object_get(r, "drops"), reason, p)
	    printf("%-32s %14llu\n", reason,
		   (unsigned long long)json_integer_value(p));
	if (json_array_size(json_object_get(r, "shared_counters"))) {
		printf("\n%-16s %14s %14s\n", "SHARED COUNTER", "PKTS",
		       "BYTES");
		json_array_foreach(json_object_get(r, "shared_counters"), i, p)
		    printf("%-16llu %14llu %14llu\n",
			   (unsigned long long)num(p, "id"),
			   (unsigned long long)num(p, "pkts"),
			   (unsigned long long)num(p, "bytes"));
	}
}

static void show_workers(json_t *r)
{
	size_t i;
	json_t *w;

	if (!json_array_size(json_object_get(r, "workers"))) {
		puts("no workers");
		return;
	}
	printf("%-6s %-4s %14s %14s %12s %12s %12s\n", "WORKER", "CPU",
	       "RX_PKTS", "PKTS", "HANDOFF_IN", "HANDOFF_OUT", "HO_DROPS");
	json_array_foreach(json_object_get(r, "workers"), i, w)
	{
		json_t *cpu = json_object_get(w, "cpu");

		printf("%-6llu %-4lld %14llu %14llu %12llu %12llu %12llu\n",
		       (unsigned long long)num(w, "id"),
		       (long long)json_integer_value(cpu),
		       (unsigned long long)num(w, "rx_pkts"),
		       (unsigned long long)num(w, "pkts"),
		       (unsigned long long)num(w, "handoff_in"),
		       (unsigned long long)num(w, "handoff_out"),
		       (unsigned long long)num(w, "handoff_drops"));
	}
}

static int cmd_dump(int argc, char **argv)
{
	static const char *const u =
	    "usage: dpflowctl dump [--dot]\n\nThe pipe graph: ports, pipes "
	    "and where packets go, as text, or as\nGraphviz dot with --dot "
	    "(dpflowctl dump --dot | dot -Tsvg > graph.svg).\n";
	bool dot = false;
	json_t *reply;

	for (int i = 1; i < argc; i++) {
		if (is_help(argv[i]))
			return usage(u, NULL);
		if (strcmp(argv[i], "--dot"))
			return usage(u, "unknown argument");
		dot = true;
	}
	reply = client_call(json_pack("{s:s,s:s}", "cmd", "dump", "format",
				      dot ? "dot" : "text"));
	if (!reply)
		return EXIT_FAIL;
	fputs(str(reply, "text"), stdout);
	json_decref(reply);
	return 0;
}

/* ---- entries ------------------------------------------------------------
 */

static int entries_list(const char *pipe, bool json)
{
	json_t *all = json_array();
	json_int_t from = 0;

	for (;;) {
		json_t *reply = client_call(
		    json_pack("{s:s,s:s,s:I,s:i}", "cmd", "entries.list",
			      "pipe", pipe, "from", from, "limit", 10000));
		json_t *next, *e;
		size_t i;

		if (!reply) {
			json_decref(all);
			return EXIT_FAIL;
		}
		json_array_foreach(json_object_get(reply, "entries"), i, e)
		{
			json_array_append(all, e);
			if (json)
				continue;
			printf("slot %-6llu ",
			       (unsigned long long)num(e, "slot"));
			print_json(stdout, json_object_get(e, "entry"));
			if (json_object_get(e, "counter"))
				printf(
				    "  pkts %llu bytes %llu",
				    (unsigned long long)num(
					json_object_get(e, "counter"), "pkts"),
				    (unsigned long long)num(
					json_object_get(e, "counter"),
					"bytes"));
			putchar('\n');
		}
		next = json_object_get(reply, "next");
		from = json_is_integer(next) ? json_integer_value(next) : -1;
		json_decref(reply);
		if (from < 0)
			break;
	}
	if (json) {
		json_t *o =
		    json_pack("{s:s,s:o}", "pipe", pipe, "entries", all);

		print_json(stdout, o);
		putchar('\n');
		json_decref(o);
	} else {
		json_decref(all);
	}
	return 0;
}

char *read_file(const char *path, size_t *len)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
	char *data = NULL;
	size_t cap = 0;

	*len = 0;
	if (!f) {
		fprintf(stderr, "dpflowctl: %s: %s\n", path, strerror(errno));
		return NULL;
	}
	for (;;) {
		size_t r;

		if (cap - *len < 65536) {
			char *d = realloc(data, cap ? cap * 2 : 1 << 16);

			if (!d) {
				free(data);
				data = NULL;
				break;
			}
			data = d;
			cap = cap ? cap * 2 : 1 << 16;
		}
		r = fread(data + *len, 1, cap - *len, f);
		*len += r;
		if (r == 0)
			break;
	}
	if (f != stdin)
		fclose(f);
	return data;
}

/* The entries of FILE, or of the ENTRY arguments, as a JSON list. */
static json_t *gather(const char *file, char **args, int n_args)
{
	char why[256];
	json_t *list;

	if (file) {
		size_t len;
		char *text = read_file(file, &len);

		if (!text)
			return NULL;
		list = yaml_to_json(text, len, file, why, sizeof(why));
		free(text);
		if (list && json_is_object(list) &&
		    json_is_array(json_object_get(list, "entries"))) {
			json_t *inner =
			    json_incref(json_object_get(list, "entries"));

			json_decref(list);
			list = inner;
		}
		if (list && !json_is_array(list)) {
			json_decref(list);
			snprintf(why, sizeof(why),
				 "%s: expected a list of entries", file);
			list = NULL;
		}
		if (!list)
			fprintf(stderr, "dpflowctl: %s\n", why);
		return list;
	}
	list = json_array();
	for (int i = 0; list && i < n_args; i++) {
		char name[32];
		json_t *e;

		snprintf(name, sizeof(name), "ENTRY %d", i + 1);
		e = yaml_to_json(args[i], strlen(args[i]), name, why,
				 sizeof(why));
		if (!e) {
			fprintf(stderr, "dpflowctl: %s\n", why);
			json_decref(list);
			return NULL;
		}
		json_array_append_new(list, e);
	}
	return list;
}

/* Send @list in requests of at most BATCH entries. */
static int send_batches(const char *cmd, const char *pipe, json_t *list)
{
	size_t n = json_array_size(list), done = 0;
	const char *verb = !strcmp(cmd, "entries.add")	? "added"
			   : !strcmp(cmd, "entries.rm") ? "removed"
							: "updated";

	while (done < n || n == 0) {
		size_t k = n - done < BATCH ? n - done : BATCH;
		json_t *part = json_array(), *reply;

		for (size_t i = 0; i < k; i++)
			json_array_append(part, json_array_get(list, done + i));
		reply =
		    client_call_raw(json_pack("{s:s,s:s,s:o}", "cmd", cmd,
					      "pipe", pipe, "entries", part));
		if (!reply)
			return EXIT_FAIL;
		if (!json_is_true(json_object_get(reply, "ok"))) {
			const char *field =
			    json_string_value(json_object_get(reply, "field"));

			fprintf(stderr, "dpflowctl: %s%s%s%s\n",
				str(reply, "error"), field ? " (field " : "",
				field ? field : "", field ? ")" : "");
			if (done)
				fprintf(stderr,
					"dpflowctl: entries[N] counts from "
					"entry %zu; the %zu entries before it "
					"were %s\n",
					done, done, verb);
			json_decref(reply);
			return EXIT_FAIL;
		}
		json_decref(reply);
		done += k;
		if (n == 0)
			break;
	}
	printf("%s %zu entr%s %s pipe %s\n", verb, n, n == 1 ? "y" : "ies",
	       !strcmp(verb, "added")	  ? "to"
	       : !strcmp(verb, "removed") ? "from"
					  : "of",
	       pipe);
	return 0;
}

static int cmd_entries(int argc, char **argv)
{
	const char *sub, *pipe, *file = NULL;
	json_t *list;
	bool json = false;
	int rc, first = 3;

	if (argc < 2 || is_help(argv[1]))
		return usage(usage_entries,
			     argc < 2 ? "which: list, add, rm or update?"
				      : NULL);
	sub = argv[1];
	if (strcmp(sub, "list") && strcmp(sub, "add") && strcmp(sub, "rm") &&
	    strcmp(sub, "update"))
		return usage(usage_entries, "expected list, add, rm or update");
	for (int i = 2; i < argc; i++)
		if (is_help(argv[i]))
			return usage(usage_entries, NULL);
	if (argc < 3)
		return usage(usage_entries, "which pipe?");
	pipe = argv[2];
	if (!strcmp(sub, "list")) {
		for (int i = 3; i < argc; i++) {
			if (strcmp(argv[i], "--json"))
				return usage(usage_entries, "unknown argument");
			json = true;
		}
		return entries_list(pipe, json);
	}
	if (argc > 3 && !strcmp(argv[3], "--file")) {
		if (argc != 5)
			return usage(usage_entries,
				     "--file takes one FILE and nothing else");
		file = argv[4];
	}
	if (!strcmp(sub, "rm") && argc > 3 && !strcmp(argv[3], "--slot")) {
		list = json_array();
		for (int i = 3; i < argc; i += 2) {
			char *end;
			unsigned long long s;

			if (strcmp(argv[i], "--slot") || i + 1 >= argc) {
				json_decref(list);
				return usage(usage_entries,
					     "expected --slot N ...");
			}
			errno = 0;
			s = strtoull(argv[i + 1], &end, 0);
			if (errno || *end || !*argv[i + 1] ||
			    argv[i + 1][0] == '-') {
				json_decref(list);
				return usage(usage_entries,
					     "--slot takes a number");
			}
			json_array_append_new(
			    list, json_pack("{s:I}", "slot", (json_int_t)s));
		}
	} else {
		if (!file && argc <= first)
			return usage(usage_entries,
				     "give ENTRY arguments or --file FILE");
		list = gather(file, argv + first, argc - first);
		if (!list)
			return EXIT_FAIL;
	}
	rc = send_batches(!strcmp(sub, "add")  ? "entries.add"
			  : !strcmp(sub, "rm") ? "entries.rm"
					       : "entries.update",
			  pipe, list);
	json_decref(list);
	return rc;
}

/* `batch FILE`: the ops of FILE in one entries.batch request. */
static int cmd_batch(int argc, char **argv)
{
	char why[256];
	size_t len;
	char *text;
	json_t *ops, *reply;

	if (argc != 2 || is_help(argv[1]))
		return usage(usage_batch,
			     argc == 2 ? NULL : "batch takes one FILE");
	text = read_file(argv[1], &len);
	if (!text)
		return EXIT_FAIL;
	ops = yaml_to_json(text, len, argv[1], why, sizeof(why));
	free(text);
	if (!ops || !json_is_array(ops)) {
		fprintf(stderr, "dpflowctl: %s\n",
			ops ? "expected a list of ops" : why);
		json_decref(ops);
		return EXIT_FAIL;
	}
	reply = client_call(
	    json_pack("{s:s,s:o}", "cmd", "entries.batch", "ops", ops));
	if (!reply)
		return EXIT_FAIL;
	printf(
	    "applied %lld ops, %lld entries, as one batch\n",
	    (long long)json_integer_value(json_object_get(reply, "ops")),
	    (long long)json_integer_value(json_object_get(reply, "entries")));
	json_decref(reply);
	return 0;
}

/* ---- top ----------------------------------------------------------------
 */

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
			return num(o, key);
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
		const char *n = str(o, "name");

		printf("%-16s %12.0f %12.2f %12.0f %12.2f\n", n,
		       rate(num(o, "rx_pkts"),
			    prev_num(prev, "ports", n, "rx_pkts"), dt),
		       8e-6 * rate(num(o, "rx_bytes"),
				   prev_num(prev, "ports", n, "rx_bytes"), dt),
		       rate(num(o, "tx_pkts"),
			    prev_num(prev, "ports", n, "tx_pkts"), dt),
		       8e-6 * rate(num(o, "tx_bytes"),
				   prev_num(prev, "ports", n, "tx_bytes"), dt));
	}
	printf("\n%-16s %12s %12s %12s %10s\n", "PIPE", "LOOKUPS/S", "HITS/S",
	       "MISSES/S", "ENTRIES");
	json_array_foreach(json_object_get(cur, "pipes"), i, o)
	{
		const char *n = str(o, "name");

		printf("%-16s %12.0f %12.0f %12.0f %10llu\n", n,
		       rate(num(o, "pkts"), prev_num(prev, "pipes", n, "pkts"),
			    dt),
		       rate(num(o, "hits"), prev_num(prev, "pipes", n, "hits"),
			    dt),
		       rate(num(o, "misses"),
			    prev_num(prev, "pipes", n, "misses"), dt),
		       (unsigned long long)num(o, "entries"));
	}
	printf("\n%-32s %12s %14s\n", "DROP REASON", "DROPS/S", "TOTAL");
	json_object_foreach(json_object_get(cur, "drops"), reason, o)
	{
		uint64_t total = (uint64_t)json_integer_value(o);

		printf("%-32s %12.0f %14llu\n", reason,
		       rate(total, num(json_object_get(prev, "drops"), reason),
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
			    rate(num(o, "pkts"), num(p, "pkts"), dt),
			    100.0 *
				rate(num(o, "busy_ns"), num(p, "busy_ns"), dt) /
				1e9);
		}
	}
	fflush(stdout);
}

static int cmd_top(int argc, char **argv)
{
	long count = -1;
	double interval = 1.0;
	json_t *prev, *wprev;
	double t_prev;

	for (int i = 1; i < argc; i++) {
		char *end = NULL;

		if (is_help(argv[i]))
			return usage(usage_top, NULL);
		if (!strcmp(argv[i], "--once")) {
			count = 1;
		} else if (!strcmp(argv[i], "--count") && i + 1 < argc) {
			count = strtol(argv[++i], &end, 10);
			if (*end || count < 1)
				return usage(usage_top,
					     "--count takes a number >= 1");
		} else if (!strcmp(argv[i], "--interval") && i + 1 < argc) {
			interval = strtod(argv[++i], &end);
			if (*end || !(interval >= 0.01 && interval <= 3600))
				return usage(usage_top, "--interval takes "
							"seconds, 0.01..3600");
		} else {
			return usage(usage_top, "unknown argument");
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

/* ---- main ---------------------------------------------------------------
 */

int main(int argc, char **argv)
{
	const char *sock = DPFLOW_CTL_SOCKET_DEFAULT;
	double timeout = 30;
	const char *cmd;
	int i = 1;

	for (; i < argc && argv[i][0] == '-'; i++) {
		if (is_help(argv[i]))
			return usage(usage_main, NULL);
		if ((!strcmp(argv[i], "-s") || !strcmp(argv[i], "--socket")) &&
		    i + 1 < argc) {
			sock = argv[++i];
		} else if ((!strcmp(argv[i], "-t") ||
			    !strcmp(argv[i], "--timeout")) &&
			   i + 1 < argc) {
			char *end;

			timeout = strtod(argv[++i], &end);
			if (*end || !(timeout > 0))
				return usage(usage_main,
					     "--timeout takes seconds > 0");
		} else {
			return usage(usage_main, "unknown option");
		}
	}
	if (i == argc)
		return usage(usage_main, "which command?");
	cmd = argv[i];
	argc -= i;
	argv += i;
	/* the first request connects: help and usage errors need no server */
	client_init(sock, timeout);
	if (!strcmp(cmd, "ports") || !strcmp(cmd, "pipes") ||
	    !strcmp(cmd, "counters") || !strcmp(cmd, "workers")) {
		static const char *const u =
		    "usage: dpflowctl ports|pipes|counters|workers [--json]\n"
		    "\n--json prints the server's reply as it is "
		    "(docs/control.md).\n";
		bool json;
		int rc = json_flag(argc, argv, u, &json);

		if (rc)
			return rc == -1 ? 0 : EXIT_USAGE;
		return simple(cmd, argc, argv, u,
			      !strcmp(cmd, "ports")	 ? show_ports
			      : !strcmp(cmd, "pipes")	 ? show_pipes
			      : !strcmp(cmd, "counters") ? show_counters
							 : show_workers);
	}
	if (!strcmp(cmd, "l4lb"))
		return cmd_l4lb(argc, argv);
	if (strcmp(cmd, "entries") && strcmp(cmd, "dump") &&
	    strcmp(cmd, "top") && strcmp(cmd, "batch")) {
		fprintf(stderr, "dpflowctl: unknown command '%s'\n\n", cmd);
		fputs(usage_main, stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(cmd, "entries"))
		return cmd_entries(argc, argv);
	if (!strcmp(cmd, "dump"))
		return cmd_dump(argc, argv);
	if (!strcmp(cmd, "batch"))
		return cmd_batch(argc, argv);
	return cmd_top(argc, argv);
}
