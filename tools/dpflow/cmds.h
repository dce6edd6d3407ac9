/*
 * Subcommands of the `dpflow` tool. Each takes the arguments after its
 * name (argv[0] is the subcommand) and returns the process exit status.
 */
#ifndef DPFLOW_TOOL_CMDS_H
#define DPFLOW_TOOL_CMDS_H

int cmd_inspect(int argc, char **argv);
int cmd_gen(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_run(int argc, char **argv);

#endif /* DPFLOW_TOOL_CMDS_H */
