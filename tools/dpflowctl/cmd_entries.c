/*
 * `dpflowctl entries list|add|rm|update` and `dpflowctl batch`: a pipe's
 * entries read, and changed in requests of at most BATCH entries, or
 * many pipes' changes as one batch (docs/control.md).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpflowctl.h"

/* Entries a request carries at most (requests stay far below the
 * server's size limit; each request is applied all or nothing). */
#define BATCH 10000u

static const char *const usage_entries =
    "usage: dpflowctl entries list PIPE [--json]\n"
    "       dpflowctl entries add PIPE ENTRY... | --file FILE\n"
    "       dpflowctl entries rm PIPE ENTRY... | --slot N... | --file FILE\n"
    "       dpflowctl entries update PIPE ENTRY... | --file FILE\n"
    "\n"
    "A pipe's entries: listed, added, removed, updated live.\n"
    "'dpflowctl entries list|add|rm|update --help' says more.\n";

static const char *const usage_list =
    "usage: dpflowctl entries list PIPE [--json]\n"
    "\n"
    "Every entry of PIPE, one a line: its slot and id, then the entry as\n"
    "a config writes it (match FIELD=VALUE, priority, action, values,\n"
    "fwd, ...) and, when the pipe counts, its packets and bytes.\n"
    "--json prints {\"pipe\": PIPE, \"entries\": [...]}, every page of\n"
    "the server's replies gathered into one document.\n";

static const char *const usage_add =
    "usage: dpflowctl entries add PIPE ENTRY... | --file FILE\n"
    "\n"
    "Add entries to PIPE.\n";

static const char *const usage_rm =
    "usage: dpflowctl entries rm PIPE ENTRY... | --slot N... | --file FILE\n"
    "\n"
    "Remove entries of PIPE, found by their match (and 'priority' when\n"
    "given; other keys are ignored) or by --slot, the slot `entries list`\n"
    "shows.\n";

static const char *const usage_update =
    "usage: dpflowctl entries update PIPE ENTRY... | --file FILE\n"
    "\n"
    "Find each entry of PIPE by its match and give it the rest of ENTRY\n"
    "(actions, values, forwarding); packets see the old entry or the new\n"
    "one, never neither, and the entry keeps its id and counter.\n";

/* What add, rm and update share. */
static const char *const usage_entry_syntax =
    "\n"
    "An ENTRY is YAML or JSON text of one entry as a config writes it\n"
    "(docs/config.md, Entries), e.g.\n"
    "  '{match: {outer.l4.dport: 80}, fwd: {port: out}}'\n"
    "FILE holds a list of entries (YAML or JSON; - reads standard input),\n"
    "or a mapping whose 'entries' key holds one.\n"
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
			if (json)
				json_array_append(all, e);
			else
				show_entry(e);
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

		print_json(o);
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
				json_str(reply, "error"),
				field ? " (field " : "", field ? field : "",
				field ? ")" : "");
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

int cmd_entries(int argc, char **argv)
{
	static const char *const subs[] = {"list", "add", "rm", "update"};
	const char *const texts[] = {usage_list, usage_add, usage_rm,
				     usage_update};
	const char *sub = argc > 1 ? argv[1] : NULL, *pipe, *file = NULL;
	char cmd[32];
	json_t *list;
	int rc, k = -1;

	for (int i = 0; sub && i < 4; i++)
		if (!strcmp(sub, subs[i]))
			k = i;
	if (any_help(argc, argv)) {
		if (k < 0 && sub && !is_help(sub))
			return usage_error("entries",
					   "unknown entries command '%s'", sub);
		return k < 0
			   ? help_text(usage_entries, NULL)
			   : help_text(texts[k], k ? usage_entry_syntax : NULL);
	}
	if (!sub)
		return usage_error(
		    "entries",
		    "which entries command: list, add, rm or update?");
	if (k < 0)
		return usage_error("entries",
				   "unknown entries command '%s': expected "
				   "list, add, rm or update",
				   sub);
	snprintf(cmd, sizeof(cmd), "entries %s", sub);
	if (argc < 3)
		return usage_error(cmd, "which pipe?");
	pipe = argv[2];
	if (k == 0) {
		bool json = false;

		for (int i = 3; i < argc; i++) {
			if (strcmp(argv[i], "--json"))
				return usage_error(cmd, "unknown argument '%s'",
						   argv[i]);
			json = true;
		}
		return entries_list(pipe, json);
	}
	if (argc > 3 && !strcmp(argv[3], "--file")) {
		if (argc != 5)
			return usage_error(
			    cmd, "--file takes one FILE and nothing else");
		file = argv[4];
	}
	if (k == 2 && argc > 3 && !strcmp(argv[3], "--slot")) {
		list = json_array();
		for (int i = 3; i < argc; i += 2) {
			char *end;
			unsigned long long s;

			if (strcmp(argv[i], "--slot") || i + 1 >= argc) {
				json_decref(list);
				return usage_error(cmd,
						   "expected --slot N ...");
			}
			errno = 0;
			s = strtoull(argv[i + 1], &end, 0);
			if (errno || *end || !*argv[i + 1] ||
			    argv[i + 1][0] == '-') {
				json_decref(list);
				return usage_error(cmd,
						   "--slot takes a number, not "
						   "'%s'",
						   argv[i + 1]);
			}
			json_array_append_new(
			    list, json_pack("{s:I}", "slot", (json_int_t)s));
		}
	} else {
		if (!file && argc <= 3)
			return usage_error(
			    cmd, "give ENTRY arguments or --file FILE");
		list = gather(file, argv + 3, argc - 3);
		if (!list)
			return EXIT_FAIL;
	}
	rc = send_batches(k == 1   ? "entries.add"
			  : k == 2 ? "entries.rm"
				   : "entries.update",
			  pipe, list);
	json_decref(list);
	return rc;
}

/* `batch FILE`: the ops of FILE in one entries.batch request. */
int cmd_batch(int argc, char **argv)
{
	char why[256];
	size_t len;
	char *text;
	json_t *ops, *reply;

	if (any_help(argc, argv))
		return help_text(usage_batch, NULL);
	if (argc != 2)
		return usage_error("batch", argc < 2 ? "which FILE?"
						     : "batch takes one FILE");
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
