/*
 * `dpflow apps`: the apps this dpflow was built with (the app registry,
 * dpflow/app.h): one line each with its name, its config section, the
 * targets it runs on, its `dpflow bench` workloads and a summary. The
 * bash completion reads the first column.
 */
#include <stdio.h>
#include <string.h>

#include "dpflow/app.h"

#include "cmds.h"

static void usage(FILE *out)
{
	fprintf(out,
		"usage: dpflow apps\n"
		"\n"
		"List the apps built into this dpflow, one a line after a\n"
		"header: APP (its name, also the prefix of its control\n"
		"requests APP.VERB and its dpflowctl command), CONFIG (the\n"
		"config section that runs it), TARGETS (cpu, gpu), WORKLOADS\n"
		"(its `dpflow bench` workloads, - for none) and SUMMARY.\n"
		"\n"
		"  -h, --help    this text\n");
}

/* The workloads of app @name, comma-separated, into @out ("-": none). */
static void workloads_of(const char *name, char *out, size_t len)
{
	size_t n = 0;

	out[0] = 0;
	for (unsigned i = 0; i < dpflow_app_workload_count(); i++) {
		const struct dpflow_app_workload *w = dpflow_app_workload_at(i);

		if (strcmp(w->app, name) || n >= len)
			continue;
		n += (size_t)snprintf(out + n, len - n, "%s%s", n ? "," : "",
				      w->name);
	}
	if (!out[0])
		snprintf(out, len, "-");
}

int cmd_apps(int argc, char **argv)
{
	if (argc > 1 &&
	    (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		usage(stdout);
		return 0;
	}
	if (argc > 1) {
		fprintf(stderr, "dpflow apps: unknown argument '%s'\n",
			argv[1]);
		usage(stderr);
		return 2;
	}
	printf("%-12s %-18s %-8s %-12s %s\n", "APP", "CONFIG", "TARGETS",
	       "WORKLOADS", "SUMMARY");
	for (unsigned i = 0; i < dpflow_app_count(); i++) {
		const struct dpflow_app_ops *a = dpflow_app_at(i);
		char section[DPFLOW_APP_NAME_MAX + 8], w[128];

		snprintf(section, sizeof(section), "apps.%s", a->name);
		workloads_of(a->name, w, sizeof(w));
		printf("%-12s %-18s %-8s %-12s %s\n", a->name, section,
		       a->targets == DPFLOW_APP_TARGET_CPU   ? "cpu"
		       : a->targets == DPFLOW_APP_TARGET_GPU ? "gpu"
							     : "cpu,gpu",
		       w, a->summary ? a->summary : "");
	}
	return 0;
}
