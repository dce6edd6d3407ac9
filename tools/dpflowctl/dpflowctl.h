/*
 * dpflowctl's pieces: main.c (the commands), client.c (the connection to
 * the control socket: one request line out, one reply line back),
 * yaml_json.c (entries written in YAML or JSON, read into JSON for a
 * request).
 */
#ifndef DPFLOWCTL_H
#define DPFLOWCTL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

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

/* main.c: the whole of file @path ("-": standard input), not
 * NUL-terminated, its size in *@len; NULL with a message on stderr. */
char *read_file(const char *path, size_t *len);

/* cmd_l4lb.c: `dpflowctl l4lb ...` (@argv[0] is "l4lb"); an exit status */
int cmd_l4lb(int argc, char **argv);

#endif /* DPFLOWCTL_H */
