/*
 * Subcommands of the `dpflow` tool. Each takes the arguments after its
 * name (argv[0] is the subcommand) and returns the process exit status.
 */
#ifndef DPFLOW_TOOL_CMDS_H
#define DPFLOW_TOOL_CMDS_H

#include <stdio.h>

int cmd_inspect(int argc, char **argv);
int cmd_gen(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_validate(int argc, char **argv);
int cmd_trace(int argc, char **argv);
int cmd_apps(int argc, char **argv);

/*
 * `dpflow validate CONFIG` and `dpflow run --check CONFIG`: load @path
 * (with the 'count' handler, and apps as a run with @workers workers
 * would) without opening any port, print what would run to @out, errors
 * to stderr. Returns the exit status: 0 valid, 1 not.
 */
int validate_config(const char *path, unsigned workers, FILE *out);

/*
 * The decimal value of option --@name of `dpflow @cmd` in @lo..@hi into
 * @out; else a message on stderr and -1.
 */
int opt_count(const char *cmd, const char *name, const char *text,
	      unsigned long lo, unsigned long hi, unsigned long *out);

#endif /* DPFLOW_TOOL_CMDS_H */
