/*
 * dpflowctl's pieces: main.c (options, help, the show commands, dump),
 * cmd_entries.c (entries and batch), cmd_top.c, cmd_trace.c, cmd_app.c
 * (the apps' commands, found in the app registry), show.c (text output
 * of replies), client.c (the connection to the control socket: one
 * request line out, one reply line back), yaml_json.c (entries written
 * in YAML or JSON, read into JSON for a request). A trace's text comes
 * from tools/lib/trace_text.c, shared with `dpflow trace`.
 */
#ifndef DPFLOWCTL_H
#define DPFLOWCTL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Exit statuses: a failed request or no server, and a usage error. */
#define EXIT_FAIL  1
#define EXIT_USAGE 2

/* client.c */
/* Where to connect, and how long to wait for each reply. The first
 * request connects; it exits with a message when it cannot. */
void client_init(const char *path, double timeout_s);
/*
 * Send request @req (its reference is taken) and return the reply, whose
 * "ok" was true. A reply with "ok": false is printed ("dpflowctl: MESSAGE
 * (field KEY)") and returns NULL; so does a lost connection.
 */
json_t *client_call(json_t *req);
/* As client_call(), but an error reply is returned as it is. */
json_t *client_call_raw(json_t *req);

/*
 * yaml_json.c: parse @len bytes of YAML or JSON into JSON (scalars become
 * strings, which the server reads back as the config's scalars). NULL and
 * a message in @why on error.
 */
json_t *yaml_to_json(const char *text, size_t len, const char *name, char *why,
		     size_t why_len);

/* main.c */
/* Is @s -h or --help? */
bool is_help(const char *s);
/* Is any of @argv[1..@argc) -h or --help? */
bool any_help(int argc, char **argv);
/* Print help @text (and @more when not NULL) on stdout; returns 0. */
int help_text(const char *text, const char *more);
/*
 * A usage error: one line on stderr, "dpflowctl CMD: WHY; try 'dpflowctl
 * CMD --help'" (@cmd NULL: the top level); returns EXIT_USAGE.
 */
int usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Print @v as one line of compact JSON on stdout. */
void print_json(json_t *v);

/* show.c: text output of replies on stdout (docs/control.md) */
/* Member @key of object @o: an integer (0 when absent or not one), a
 * string ("-" when absent or not one). */
unsigned long long json_num(json_t *o, const char *key);
const char *json_str(json_t *o, const char *key);
/* @v as text: strings as they are, objects as KEY=VALUE pairs, lists
 * in [...], null as -; never JSON. */
void text_value(FILE *f, json_t *v);
/* Forwarding in config syntax as text: "port P", "pipe P", "drop", ... */
void text_fwd(FILE *f, json_t *v);
/* The replies of `ports`, `pipes`, `counters`, `workers`. */
void show_ports(json_t *reply);
void show_pipes(json_t *reply);
void show_counters(json_t *reply);
void show_workers(json_t *reply);
/* One item {slot, id, entry, counter} of an `entries.list` reply. */
void show_entry(json_t *item);

/* cmd_entries.c: the whole of file @path ("-": standard input), not
 * NUL-terminated, its size in *@len; NULL with a message on stderr. */
char *read_file(const char *path, size_t *len);

/* The commands: @argv[0] is the command's name; an exit status. */
int cmd_entries(int argc, char **argv); /* cmd_entries.c */
int cmd_batch(int argc, char **argv);	/* cmd_entries.c */
int cmd_top(int argc, char **argv);	/* cmd_top.c */
int cmd_trace(int argc, char **argv);	/* cmd_trace.c */

/* cmd_app.c: `dpflowctl APP ...` for app @cli (@argv[0] is APP). */
struct dpflow_app_cli;
int cmd_app(const struct dpflow_app_cli *cli, int argc, char **argv);
/* The apps' lines of `dpflowctl --help` (nothing without apps). */
void print_apps_help(FILE *out);

#endif /* DPFLOWCTL_H */
