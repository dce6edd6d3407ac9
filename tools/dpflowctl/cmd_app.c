/*
 * `dpflowctl APP VERB ...`: the client commands that apps register
 * (dpflow/app.h, struct dpflow_app_cli). dpflowctl finds the app and its
 * verb, answers --help at every level, and lends the verb its client
 * (requests, JSON output, files, usage errors); the verb checks its
 * arguments and formats the reply.
 */
#include <string.h>

#include "dpflow/app.h"

#include "dpflowctl.h"

static const struct dpflow_app_client client = {
    .call = client_call,
    .print_json = print_json,
    .read_file = read_file,
    .yaml_to_json = yaml_to_json,
    .usage_error = usage_error,
};

int cmd_app(const struct dpflow_app_cli *cli, int argc, char **argv)
{
	const char *app = cli->app, *name = argc > 1 ? argv[1] : NULL;
	const struct dpflow_app_verb *v = NULL;

	for (unsigned i = 0; name && i < cli->n_verbs && !v; i++)
		if (!strcmp(name, cli->verbs[i].name))
			v = &cli->verbs[i];
	if (any_help(argc, argv)) {
		if (!v && !is_help(name))
			return usage_error(app, "unknown %s command '%s'", app,
					   name);
		return help_text(v ? v->usage : cli->usage, NULL);
	}
	if (!name)
		return usage_error(app, "which %s command?", app);
	if (!v)
		return usage_error(app, "unknown %s command '%s'", app, name);
	return v->run(&client, argc - 1, argv + 1);
}

void print_apps_help(FILE *out)
{
	unsigned n = dpflow_app_cli_count();

	if (!n)
		return;
	fprintf(out, "\napps (their own commands; 'dpflowctl APP --help'):\n");
	for (unsigned i = 0; i < n; i++) {
		const struct dpflow_app_cli *cli = dpflow_app_cli_at(i);
		const char *s = cli->summary ? cli->summary : "";
		char synopsis[DPFLOW_APP_NAME_MAX + 16];

		snprintf(synopsis, sizeof(synopsis), "%s COMMAND ...",
			 cli->app);
		fprintf(out, "  %-30s ", synopsis);
		for (; *s; s++) {
			fputc(*s, out);
			if (*s == '\n' && s[1])
				fprintf(out, "%33s", "");
		}
		fputc('\n', out);
	}
}
