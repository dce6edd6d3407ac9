/*
 * dpflowctl: talk to a running `dpflow run --control` over its control
 * socket (docs/control.md). Exit status 0 on success, 1 when the server
 * cannot be reached or refuses a request, 2 on a usage error. Help
 * (`help`, `--help` at every level) and `--version` need no server.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/app.h"
#include "dpflow/ctl.h"
#include "dpflow/dpflow.h"

#include "dpflowctl.h"

static const char *const usage_main =
    "usage: dpflowctl [-s SOCKET] [-t SECONDS] COMMAND [ARGS]\n"
    "       dpflowctl --version | help [COMMAND [SUBCOMMAND]]\n"
    "\n"
    "Talk to a running `dpflow run --control` (docs/control.md).\n"
    "\n"
    "  -s, --socket SOCKET   control socket (default " DPFLOW_CTL_SOCKET_DEFAULT
    ")\n"
    "  -t, --timeout SECONDS wait this long for each reply (default 30)\n"
    "  -h, --help            this text\n"
    "  -V, --version         the version\n"
    "\n"
    "commands:\n"
    "  ports [--json]                 ports: URI, interface or file, root\n"
    "                                 pipe, counters\n"
    "  pipes [--json]                 pipes: type, entries, match, actions,\n"
    "                                 forwarding\n"
    "  entries list|add|rm|update PIPE ...\n"
    "                                 a pipe's entries (entries --help)\n"
    "  batch FILE                     adds, removals and updates over\n"
    "                                 pipes as one batch (batch --help)\n"
    "  counters [--entries] [--json]  port, pipe, drop and shared counters\n"
    "  workers [--json]               per-worker counters\n"
    "  dump [--dot | --json]          the pipe graph as text, Graphviz dot\n"
    "                                 or JSON\n"
    "  top [--once|--count N] [--interval S]\n"
    "                                 rates per port, pipe and drop reason\n"
    "  trace [--port NAME] [--count N] [--timeout MS] [--json]\n"
    "                                 the way live packets take through the\n"
    "                                 pipes, as `dpflow trace` prints it\n"
    "  version                        the version\n"
    "  help [COMMAND [SUBCOMMAND]]    this text, or a command's\n";

/* after the apps (print_apps_help) */
static const char *const usage_main_end =
    "\n"
    "--json prints the server's reply as one JSON document; text output\n"
    "is for people. 'dpflowctl COMMAND --help' says more.\n";

static const char *const usage_ports =
    "usage: dpflowctl ports [--json]\n"
    "\n"
    "Each port: id, name, kind, root pipe, packets and bytes received\n"
    "and sent; under it the port's URI, the interface, device or files it\n"
    "uses, and its receive and transmit queues.\n"
    "--json prints the server's reply (docs/control.md, `ports`).\n";

static const char *const usage_pipes =
    "usage: dpflowctl pipes [--json]\n"
    "\n"
    "Each pipe: type, root port, entries in use and size, lookups, hits\n"
    "and misses; under it its match fields (FIELD per entry, FIELD=VALUE\n"
    "constant), its action templates, where hits, misses and meter\n"
    "colours go, and what it monitors.\n"
    "--json prints the server's reply (docs/control.md, `pipes`).\n";

static const char *const usage_counters =
    "usage: dpflowctl counters [--entries] [--json]\n"
    "\n"
    "Packets and bytes per port; lookups, hits, misses and entries per\n"
    "pipe; packets dropped per reason; shared counters. --entries adds\n"
    "the counter of each entry of the pipes that count, by entry id (an\n"
    "id stays with its entry through `entries update`).\n"
    "--json prints the server's reply (docs/control.md, `counters`).\n";

static const char *const usage_workers =
    "usage: dpflowctl workers [--json]\n"
    "\n"
    "Per worker thread: its CPU (- when not pinned), packets received and\n"
    "processed, packets handed to and from other workers, handoff drops;\n"
    "'no workers' when the data plane runs without worker threads.\n"
    "--json prints the server's reply (docs/control.md, `workers`).\n";

static const char *const usage_dump =
    "usage: dpflowctl dump [--dot | --json]\n"
    "\n"
    "The pipe graph: ports, pipes and where packets go, as text, as\n"
    "Graphviz dot with --dot (dpflowctl dump --dot | dot -Tsvg >\n"
    "graph.svg), or as the server's JSON reply with --json (`graph`:\n"
    "ports, and pipes with their edges {on, to}).\n";

static const char *const usage_version =
    "usage: dpflowctl version (or dpflowctl --version)\n"
    "\n"
    "Print dpflowctl's version.\n";

static const char *const usage_help =
    "usage: dpflowctl help [COMMAND [SUBCOMMAND]]\n"
    "\n"
    "Print the usage of dpflowctl, or of COMMAND (as COMMAND --help).\n";

bool is_help(const char *s)
{
	return !strcmp(s, "-h") || !strcmp(s, "--help");
}

bool any_help(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (is_help(argv[i]))
			return true;
	return false;
}

int help_text(const char *text, const char *more)
{
	fputs(text, stdout);
	if (more)
		fputs(more, stdout);
	return 0;
}

int usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "dpflowctl%s%s: ", cmd ? " " : "", cmd ? cmd : "");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "; try 'dpflowctl %s%s--help'\n", cmd ? cmd : "",
		cmd ? " " : "");
	return EXIT_USAGE;
}

void print_json(json_t *v)
{
	char *s =
	    json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);

	puts(s ? s : "null");
	free(s);
}

/* ports, pipes, counters, workers: a request, its reply as JSON or text. */
static int cmd_show(int argc, char **argv)
{
	static const struct {
		const char *name, *usage;
		void (*show)(json_t *reply);
		bool entries; /* takes --entries */
	} cmds[] = {
	    {"ports", usage_ports, show_ports, false},
	    {"pipes", usage_pipes, show_pipes, false},
	    {"counters", usage_counters, show_counters, true},
	    {"workers", usage_workers, show_workers, false},
	};
	bool json = false, entries = false;
	json_t *req, *reply;
	unsigned k = 0;

	while (strcmp(cmds[k].name, argv[0]))
		k++;
	if (any_help(argc, argv))
		return help_text(cmds[k].usage, NULL);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (cmds[k].entries && !strcmp(argv[i], "--entries"))
			entries = true;
		else
			return usage_error(argv[0], "unknown argument '%s'",
					   argv[i]);
	}
	req = json_pack("{s:s}", "cmd", argv[0]);
	if (entries)
		json_object_set_new(req, "entries", json_true());
	reply = client_call(req);
	if (!reply)
		return EXIT_FAIL;
	if (json)
		print_json(reply);
	else
		cmds[k].show(reply);
	json_decref(reply);
	return 0;
}

static int cmd_dump(int argc, char **argv)
{
	const char *format = "text";
	json_t *reply;

	if (any_help(argc, argv))
		return help_text(usage_dump, NULL);
	for (int i = 1; i < argc; i++) {
		const char *f = !strcmp(argv[i], "--dot")    ? "dot"
				: !strcmp(argv[i], "--json") ? "json"
							     : NULL;

		if (!f)
			return usage_error("dump", "unknown argument '%s'",
					   argv[i]);
		if (strcmp(format, "text") && strcmp(format, f))
			return usage_error("dump",
					   "--dot and --json exclude each "
					   "other");
		format = f;
	}
	reply = client_call(
	    json_pack("{s:s,s:s}", "cmd", "dump", "format", format));
	if (!reply)
		return EXIT_FAIL;
	if (!strcmp(format, "json")) {
		print_json(reply);
	} else {
		const char *text =
		    json_string_value(json_object_get(reply, "text"));

		fputs(text ? text : "", stdout);
	}
	json_decref(reply);
	return 0;
}

static int cmd_version(int argc, char **argv)
{
	if (any_help(argc, argv))
		return help_text(usage_version, NULL);
	if (argc > 1)
		return usage_error("version", "unknown argument '%s'", argv[1]);
	printf("dpflowctl %s\n", DPFLOW_VERSION);
	return 0;
}

/* `dpflowctl --help`: the commands, then the apps this dpflowctl has. */
static int main_help(void)
{
	fputs(usage_main, stdout);
	print_apps_help(stdout);
	fputs(usage_main_end, stdout);
	return 0;
}

static int cmd_help(int argc, char **argv);

static const struct command {
	const char *name;
	int (*fn)(int argc, char **argv);
} commands[] = {
    {"ports", cmd_show},      {"pipes", cmd_show},	{"counters", cmd_show},
    {"workers", cmd_show},    {"entries", cmd_entries}, {"batch", cmd_batch},
    {"dump", cmd_dump},	      {"top", cmd_top},		{"trace", cmd_trace},
    {"version", cmd_version}, {"help", cmd_help},
};

/* Run command @argv[0] (dpflowctl's own, else an app's) with its
 * arguments; an exit status. */
static int dispatch(int argc, char **argv)
{
	const struct dpflow_app_cli *app;

	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[0], commands[i].name))
			return commands[i].fn(argc, argv);
	app = dpflow_app_cli_find(argv[0]);
	if (app)
		return cmd_app(app, argc, argv);
	return usage_error(NULL, "unknown command '%s'", argv[0]);
}

/* `help [COMMAND [SUBCOMMAND]]`: as `COMMAND [SUBCOMMAND] --help`. */
static int cmd_help(int argc, char **argv)
{
	char *args[4];

	if (argc == 1)
		return main_help();
	if (argc > 3 || is_help(argv[1]) || !strcmp(argv[1], "help"))
		return argc > 3 ? usage_error("help", "too many arguments")
				: help_text(usage_help, NULL);
	args[0] = argv[1];
	args[1] = argc == 3 ? argv[2] : (char *)"--help";
	args[2] = (char *)"--help";
	args[3] = NULL;
	return dispatch(argc == 3 ? 3 : 2, args);
}

int main(int argc, char **argv)
{
	const char *sock = DPFLOW_CTL_SOCKET_DEFAULT;
	double timeout = 30;
	int i = 1;

	for (; i < argc && argv[i][0] == '-'; i++) {
		if (is_help(argv[i]))
			return main_help();
		if (!strcmp(argv[i], "-V") || !strcmp(argv[i], "--version")) {
			printf("dpflowctl %s\n", DPFLOW_VERSION);
			return 0;
		}
		if (!strcmp(argv[i], "-s") || !strcmp(argv[i], "--socket")) {
			if (i + 1 == argc)
				return usage_error(NULL, "%s takes a path",
						   argv[i]);
			sock = argv[++i];
		} else if (!strcmp(argv[i], "-t") ||
			   !strcmp(argv[i], "--timeout")) {
			char *end;

			if (i + 1 == argc)
				return usage_error(NULL, "%s takes seconds",
						   argv[i]);
			timeout = strtod(argv[++i], &end);
			if (*end || !(timeout > 0))
				return usage_error(NULL,
						   "--timeout takes seconds > "
						   "0, not '%s'",
						   argv[i]);
		} else {
			return usage_error(NULL, "unknown option '%s'",
					   argv[i]);
		}
	}
	if (i == argc)
		return usage_error(NULL, "which command?");
	/* the first request connects: help and usage errors need no server */
	client_init(sock, timeout);
	return dispatch(argc - i, argv + i);
}
