/*
 * The app registry (dpflow/app.h): three tables of pointers to the
 * apps' static descriptions (ops, client commands, workloads), each kept
 * sorted by name so that iteration does not depend on the link order in
 * which constructors ran. Filled before main() by constructors; read
 * afterwards. No allocation, no dependency: dpflowctl links this file
 * alone.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/app.h"

/* One table: entries sorted by their key. */
struct table {
	const void *item[DPFLOW_APPS_MAX];
	const char *key[DPFLOW_APPS_MAX];
	unsigned n;
};

static struct table apps, clis, workloads;

/* A name: 1..DPFLOW_APP_NAME_MAX-1 bytes of [a-z0-9_-], a letter first. */
static bool name_ok(const char *s)
{
	size_t n;

	if (!s || !(s[0] >= 'a' && s[0] <= 'z'))
		return false;
	n = strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_-");
	return !s[n] && n < DPFLOW_APP_NAME_MAX;
}

static int table_add(struct table *t, const char *key, const void *item)
{
	unsigned at = 0;

	while (at < t->n && strcmp(t->key[at], key) < 0)
		at++;
	if (at < t->n && !strcmp(t->key[at], key))
		return -EEXIST;
	if (t->n == DPFLOW_APPS_MAX)
		return -ENOSPC;
	memmove(&t->key[at + 1], &t->key[at], (t->n - at) * sizeof(t->key[0]));
	memmove(&t->item[at + 1], &t->item[at],
		(t->n - at) * sizeof(t->item[0]));
	t->key[at] = key;
	t->item[at] = item;
	t->n++;
	return 0;
}

static const void *table_find(const struct table *t, const char *key)
{
	for (unsigned i = 0; key && i < t->n; i++)
		if (!strcmp(t->key[i], key))
			return t->item[i];
	return NULL;
}

static const void *table_at(const struct table *t, unsigned i)
{
	return i < t->n ? t->item[i] : NULL;
}

int dpflow_app_register(const struct dpflow_app_ops *ops)
{
	const unsigned all = DPFLOW_APP_TARGET_CPU | DPFLOW_APP_TARGET_GPU;

	if (!ops || !name_ok(ops->name) || !ops->load || !ops->destroy ||
	    !ops->targets || (ops->targets & ~all))
		return -EINVAL;
	return table_add(&apps, ops->name, ops);
}

const struct dpflow_app_ops *dpflow_app_find(const char *name)
{
	return table_find(&apps, name);
}

unsigned dpflow_app_count(void)
{
	return apps.n;
}

const struct dpflow_app_ops *dpflow_app_at(unsigned i)
{
	return table_at(&apps, i);
}

int dpflow_app_cli_register(const struct dpflow_app_cli *cli)
{
	if (!cli || !name_ok(cli->app) || !cli->usage ||
	    (cli->n_verbs && !cli->verbs))
		return -EINVAL;
	for (unsigned i = 0; i < cli->n_verbs; i++)
		if (!cli->verbs[i].name || !cli->verbs[i].usage ||
		    !cli->verbs[i].run)
			return -EINVAL;
	return table_add(&clis, cli->app, cli);
}

const struct dpflow_app_cli *dpflow_app_cli_find(const char *app)
{
	return table_find(&clis, app);
}

unsigned dpflow_app_cli_count(void)
{
	return clis.n;
}

const struct dpflow_app_cli *dpflow_app_cli_at(unsigned i)
{
	return table_at(&clis, i);
}

int dpflow_app_workload_register(const struct dpflow_app_workload *w)
{
	if (!w || !name_ok(w->app) || !name_ok(w->name) || !w->run)
		return -EINVAL;
	return table_add(&workloads, w->name, w);
}

const struct dpflow_app_workload *dpflow_app_workload_find(const char *name)
{
	return table_find(&workloads, name);
}

unsigned dpflow_app_workload_count(void)
{
	return workloads.n;
}

const struct dpflow_app_workload *dpflow_app_workload_at(unsigned i)
{
	return table_at(&workloads, i);
}

void dpflow_app_register_failed(const char *what, const char *name, int rc)
{
	fprintf(stderr, "dpflow: %s '%s' not registered: %s\n", what,
		name ? name : "(null)",
		rc == -EEXIST	? "the name is registered already"
		: rc == -ENOSPC ? "too many (DPFLOW_APPS_MAX)"
				: "a bad name, or a required field missing");
	abort();
}
