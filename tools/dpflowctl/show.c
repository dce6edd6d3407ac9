/*
 * dpflowctl's text output: the server's replies (docs/control.md) as
 * tables and readable lines. Values the server writes in config syntax
 * (match fields, actions, forwarding, entries) are written out as words
 * and KEY=VALUE pairs, never as JSON.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "dpflowctl.h"

unsigned long long json_num(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_integer(v) ? (unsigned long long)json_integer_value(v)
				  : 0;
}

const char *json_str(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s ? s : "-";
}

void text_value(FILE *f, json_t *v)
{
	const char *key, *sep = "";
	json_t *item;
	size_t i;

	switch (json_typeof(v)) {
	case JSON_STRING:
		fputs(json_string_value(v), f);
		break;
	case JSON_INTEGER:
		fprintf(f, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		break;
	case JSON_REAL:
		fprintf(f, "%g", json_real_value(v));
		break;
	case JSON_TRUE:
		fputs("true", f);
		break;
	case JSON_FALSE:
		fputs("false", f);
		break;
	case JSON_ARRAY:
		fputc('[', f);
		json_array_foreach(v, i, item)
		{
			fputs(i ? ", " : "", f);
			text_value(f, item);
		}
		fputc(']', f);
		break;
	case JSON_OBJECT:
		json_object_foreach(v, key, item)
		{
			bool nested = json_is_object(item);

			fprintf(f, "%s%s", sep, key);
			sep = " ";
			if (json_is_true(item)) /* a flag: its name says it */
				continue;
			fprintf(f, "=%s", nested ? "(" : "");
			text_value(f, item);
			fputs(nested ? ")" : "", f);
		}
		break;
	default:
		fputc('-', f);
	}
}

void text_fwd(FILE *f, json_t *v)
{
	json_t *rss = json_object_get(v, "rss");

	if (json_is_string(json_object_get(v, "port"))) {
		fprintf(f, "port %s", json_str(v, "port"));
	} else if (json_is_string(json_object_get(v, "pipe"))) {
		fprintf(f, "pipe %s", json_str(v, "pipe"));
	} else if (rss) {
		unsigned long long q = json_num(rss, "first"),
				   n = json_num(rss, "queues");

		fprintf(f, "rss queues %llu..%llu%s", q, q + (n ? n - 1 : 0),
			json_is_true(json_object_get(rss, "inner"))
			    ? " (inner headers)"
			    : "");
	} else {
		text_value(f, v);
	}
}

/* A pipe's `match` list: FIELD (per entry), FIELD=VALUE (constant),
 * FIELD mask M (per entry under a mask). */
static void text_match_tmpl(FILE *f, json_t *m)
{
	json_t *item;
	size_t i;

	if (!json_array_size(m))
		fputs("(none: every packet)", f);
	json_array_foreach(m, i, item)
	{
		json_t *value = json_object_get(item, "value");
		json_t *mask = json_object_get(item, "mask");

		fputs(i ? ", " : "", f);
		if (json_is_string(item)) {
			fputs(json_string_value(item), f);
			continue;
		}
		fputs(json_str(item, "field"), f);
		if (value) {
			fputc('=', f);
			text_value(f, value);
			if (mask)
				fputc('/', f);
		} else if (mask) {
			fputs(" mask ", f);
		}
		if (mask)
			text_value(f, mask);
	}
}

/* One action {NAME: VALUE} of a template. */
static void text_action(FILE *f, json_t *a)
{
	const char *name;
	json_t *v;

	json_object_foreach(a, name, v)
	{
		json_t *field = json_object_get(v, "field");

		if (json_is_true(v)) {
			fputs(name, f);
		} else if (json_is_string(field) && !strcmp(name, "copy")) {
			fprintf(f, "copy %s=%s", json_string_value(field),
				json_str(v, "from"));
		} else if (json_is_string(field)) {
			fprintf(f, "%s %s%s", name, json_string_value(field),
				strcmp(name, "add") ? "=" : "+=");
			text_value(f, json_object_get(v, "value"));
		} else {
			fprintf(f, "%s ", name);
			text_value(f, v);
		}
	}
}

void show_ports(json_t *r)
{
	size_t i;
	json_t *p;

	printf("%-3s %-16s %-9s %-16s %12s %12s %12s %12s\n", "ID", "NAME",
	       "KIND", "ROOT", "RX_PKTS", "RX_BYTES", "TX_PKTS", "TX_BYTES");
	json_array_foreach(json_object_get(r, "ports"), i, p)
	{
		static const char *const where[] = {"interface", "device",
						    "rx_file", "tx_file"};
		json_t *s = json_object_get(p, "stats");

		printf("%-3llu %-16s %-9s %-16s %12llu %12llu %12llu %12llu\n",
		       json_num(p, "id"), json_str(p, "name"),
		       json_str(p, "kind"), json_str(p, "root"),
		       json_num(s, "rx_pkts"), json_num(s, "rx_bytes"),
		       json_num(s, "tx_pkts"), json_num(s, "tx_bytes"));
		printf("    uri %s", json_str(p, "uri"));
		for (size_t k = 0; k < sizeof(where) / sizeof(where[0]); k++)
			if (json_is_string(json_object_get(p, where[k])))
				printf(", %s %s",
				       !strcmp(where[k], "rx_file") ? "rx file"
				       : !strcmp(where[k], "tx_file")
					   ? "tx file"
					   : where[k],
				       json_str(p, where[k]));
		printf(", queues rx %llu tx %llu\n", json_num(p, "rx_queues"),
		       json_num(p, "tx_queues"));
	}
}

void show_pipes(json_t *r)
{
	size_t i;
	json_t *p;

	json_array_foreach(json_object_get(r, "pipes"), i, p)
	{
		static const char *const fwds[] = {"fwd", "miss", "yellow",
						   "red"};
		json_t *s = json_object_get(p, "stats");
		json_t *acts = json_object_get(p, "actions"), *t;
		bool root = json_is_string(json_object_get(p, "root"));
		size_t k;

		printf("%s (%s%s%s) %llu/%llu entries, %llu lookups, %llu "
		       "hits, %llu misses\n",
		       json_str(p, "name"), json_str(p, "type"),
		       root ? ", root of port " : "",
		       root ? json_str(p, "root") : "", json_num(p, "entries"),
		       json_num(p, "size"), json_num(s, "pkts"),
		       json_num(s, "hits"), json_num(s, "misses"));
		fputs("    match   ", stdout);
		text_match_tmpl(stdout, json_object_get(p, "match"));
		putchar('\n');
		if (!json_array_size(acts))
			puts("    actions none");
		json_array_foreach(acts, k, t)
		{
			json_t *a;
			size_t j;

			if (json_array_size(acts) > 1)
				printf("    actions[%zu] ", k);
			else
				fputs("    actions ", stdout);
			if (!json_array_size(t))
				fputs("none", stdout);
			json_array_foreach(t, j, a)
			{
				fputs(j ? ", " : "", stdout);
				text_action(stdout, a);
			}
			putchar('\n');
		}
		for (k = 0; k < sizeof(fwds) / sizeof(fwds[0]); k++) {
			json_t *fw = json_object_get(p, fwds[k]);

			if (!fw)
				continue;
			printf("    %-7s ",
			       !strcmp(fwds[k], "fwd") ? "hit" : fwds[k]);
			text_fwd(stdout, fw);
			putchar('\n');
		}
		if (json_object_size(json_object_get(p, "monitor"))) {
			fputs("    monitor ", stdout);
			text_value(stdout, json_object_get(p, "monitor"));
			putchar('\n');
		}
	}
}

void show_counters(json_t *r)
{
	const char *reason;
	size_t i;
	json_t *p;

	printf("%-16s %14s %14s %14s %14s\n", "PORT", "RX_PKTS", "RX_BYTES",
	       "TX_PKTS", "TX_BYTES");
	json_array_foreach(json_object_get(r, "ports"), i, p)
	    printf("%-16s %14llu %14llu %14llu %14llu\n", json_str(p, "name"),
		   json_num(p, "rx_pkts"), json_num(p, "rx_bytes"),
		   json_num(p, "tx_pkts"), json_num(p, "tx_bytes"));
	printf("\n%-16s %14s %14s %14s %10s\n", "PIPE", "LOOKUPS", "HITS",
	       "MISSES", "ENTRIES");
	json_array_foreach(json_object_get(r, "pipes"), i, p)
	{
		json_t *e;
		size_t j;

		printf("%-16s %14llu %14llu %14llu %10llu\n",
		       json_str(p, "name"), json_num(p, "pkts"),
		       json_num(p, "hits"), json_num(p, "misses"),
		       json_num(p, "entries"));
		json_array_foreach(json_object_get(p, "entry_counters"), j, e)
		    printf("  entry id %-8llu slot %-8llu %10llu pkts %14llu "
			   "bytes\n",
			   json_num(e, "id"), json_num(e, "slot"),
			   json_num(e, "pkts"), json_num(e, "bytes"));
	}
	printf("\n%-32s %14s\n", "DROP REASON", "PACKETS");
	json_object_foreach(json_object_get(r, "drops"), reason, p)
	    printf("%-32s %14lld\n", reason, (long long)json_integer_value(p));
	if (json_array_size(json_object_get(r, "shared_counters"))) {
		printf("\n%-16s %14s %14s\n", "SHARED COUNTER", "PKTS",
		       "BYTES");
		json_array_foreach(json_object_get(r, "shared_counters"), i, p)
		    printf("%-16llu %14llu %14llu\n", json_num(p, "id"),
			   json_num(p, "pkts"), json_num(p, "bytes"));
	}
}

void show_workers(json_t *r)
{
	size_t i;
	json_t *w;

	if (!json_array_size(json_object_get(r, "workers"))) {
		puts("no workers");
		return;
	}
	printf("%-6s %-4s %14s %14s %12s %12s %12s\n", "WORKER", "CPU",
	       "RX_PKTS", "PKTS", "HANDOFF_IN", "HANDOFF_OUT", "HO_DROPS");
	json_array_foreach(json_object_get(r, "workers"), i, w)
	{
		json_int_t cpu = json_integer_value(json_object_get(w, "cpu"));
		char cpus[24];

		snprintf(cpus, sizeof(cpus), "%lld", (long long)cpu);
		printf("%-6llu %-4s %14llu %14llu %12llu %12llu %12llu\n",
		       json_num(w, "id"), cpu < 0 ? "-" : cpus,
		       json_num(w, "rx_pkts"), json_num(w, "pkts"),
		       json_num(w, "handoff_in"), json_num(w, "handoff_out"),
		       json_num(w, "handoff_drops"));
	}
}

void show_entry(json_t *item)
{
	json_t *e = json_object_get(item, "entry");
	json_t *counter = json_object_get(item, "counter");
	const char *key;
	json_t *v;

	printf("slot %-6llu", json_num(item, "slot"));
	if (json_is_integer(json_object_get(item, "id")))
		printf(" id %-6llu", json_num(item, "id"));
	json_object_foreach(e, key, v)
	{
		const char *k2;
		json_t *v2;
		size_t i;

		printf("  %s ", key);
		if (!strcmp(key, "fwd")) {
			text_fwd(stdout, v);
		} else if (!strcmp(key, "match")) {
			const char *sep = "";

			if (!json_object_size(v))
				fputs("(all)", stdout);
			json_object_foreach(v, k2, v2)
			{
				printf("%s%s=", sep, k2);
				text_value(stdout, v2);
				sep = ", ";
			}
		} else if (json_is_array(v)) {
			json_array_foreach(v, i, v2)
			{
				fputs(i ? ", " : "", stdout);
				if (json_is_object(v2))
					fputc('(', stdout);
				text_value(stdout, v2);
				if (json_is_object(v2))
					fputc(')', stdout);
			}
		} else {
			text_value(stdout, v);
		}
	}
	if (counter)
		printf("  pkts %llu bytes %llu", json_num(counter, "pkts"),
		       json_num(counter, "bytes"));
	putchar('\n');
}
