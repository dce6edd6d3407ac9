/*
 * dpflow: the command-line front end. Dispatches to one subcommand.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/dpflow.h"

#include "cmds.h"

struct command {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
};

static const struct command commands[] = {
    {"run", cmd_run, "run the data plane a YAML config describes"},
    {"validate", cmd_validate,
     "check a config and print what it would run, opening no port"},
    {"trace", cmd_trace,
     "print the way one packet of a capture takes through the pipes"},
    {"inspect", cmd_inspect,
     "print how the parser sees each packet (JSON lines)"},
    {"gen", cmd_gen, "write test traffic to a pcap file"},
    {"bench", cmd_bench, "run an in-memory benchmark"},
    {"apps", cmd_apps, "list the apps built in (config sections, targets)"},
};

static void usage(FILE *out)
{
	fprintf(out, "usage: dpflow COMMAND [OPTIONS]\n\ncommands:\n");
	for (size_t i = 0; i < DPFLOW_ARRAY_SIZE(commands); i++)
		fprintf(out, "  %-10s %s\n", commands[i].name,
			commands[i].summary);
	fprintf(out, "  %-10s %s\n", "version", "print the version");
	fprintf(out, "\n'dpflow COMMAND --help' describes a command.\n"
		     "DPFLOW_LOG=err|warn|info|debug sets how much is logged "
		     "(default info).\n");
}

int main(int argc, char **argv)
{
	const char *level = getenv("DPFLOW_LOG");

	if (level) {
		enum dpflow_log_level l;

		if (dpflow_log_level_parse(level, &l)) {
			fprintf(stderr,
				"dpflow: DPFLOW_LOG='%s': expected err, warn, "
				"info or debug\n",
				level);
			return 2;
		}
		dpflow_log_set_level(l);
	}
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") ||
	    !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version")) {
		printf("dpflow %s\n", DPFLOW_VERSION);
		return 0;
	}
	for (size_t i = 0; i < DPFLOW_ARRAY_SIZE(commands); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "dpflow: unknown command '%s'\n\n", argv[1]);
	usage(stderr);
	return 2;
}
