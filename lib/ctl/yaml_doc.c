/*
 * Helpers over a libyaml document (yaml_doc.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/yaml_doc.h"

/* @out = @parent "." @key (or "[i]"); an overlong path ends in "...". */
static void path_set(char *out, const char *parent, const char *key, long index)
{
	int n;

	if (index >= 0)
		n = snprintf(out, YPATH_MAX, "%s[%ld]", parent, index);
	else
		n = snprintf(out, YPATH_MAX, "%s%s%s", parent,
			     parent[0] ? "." : "", key);
	if (n < 0 || n >= YPATH_MAX)
		memcpy(out + YPATH_MAX - 4, "...", 4);
}

int yerr(struct ydoc *d, const struct ynode *at, int code, const char *fmt, ...)
{
	char msg[DPFLOW_ERROR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (at && at->n)
		return dpflow_error_set(
		    d->err, code, NULL, "%s:%lu: %s: %s", d->file,
		    (unsigned long)at->n->start_mark.line + 1,
		    at->path[0] ? at->path : "(top)", msg);
	return dpflow_error_set(d->err, code, NULL, "%s: %s", d->file, msg);
}

bool y_is_map(const struct ynode *x)
{
	return x->n && x->n->type == YAML_MAPPING_NODE;
}

bool y_is_seq(const struct ynode *x)
{
	return x->n && x->n->type == YAML_SEQUENCE_NODE;
}

bool y_is_scalar(const struct ynode *x)
{
	return x->n && x->n->type == YAML_SCALAR_NODE;
}

const char *y_str(const struct ynode *x)
{
	return y_is_scalar(x) ? (const char *)x->n->data.scalar.value : NULL;
}

bool y_get(struct ydoc *d, const struct ynode *map, const char *key,
	   struct ynode *out)
{
	yaml_node_pair_t *p;

	if (!y_is_map(map))
		return false;
	for (p = map->n->data.mapping.pairs.start;
	     p < map->n->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yaml_document_get_node(&d->doc, p->key);

		if (k && k->type == YAML_SCALAR_NODE &&
		    !strcmp((const char *)k->data.scalar.value, key)) {
			out->n = yaml_document_get_node(&d->doc, p->value);
			path_set(out->path, map->path, key, -1);
			return out->n != NULL;
		}
	}
	return false;
}

bool y_item(struct ydoc *d, const struct ynode *seq, unsigned i,
	    struct ynode *out)
{
	if (!y_is_seq(seq) || i >= y_len(seq))
		return false;
	out->n = yaml_document_get_node(&d->doc,
					seq->n->data.sequence.items.start[i]);
	path_set(out->path, seq->path, NULL, i);
	return out->n != NULL;
}

unsigned y_len(const struct ynode *x)
{
	if (y_is_seq(x))
		return (unsigned)(x->n->data.sequence.items.top -
				  x->n->data.sequence.items.start);
	if (y_is_map(x))
		return (unsigned)(x->n->data.mapping.pairs.top -
				  x->n->data.mapping.pairs.start);
	return 0;
}

bool y_pair(struct ydoc *d, const struct ynode *map, unsigned i,
	    const char **key, struct ynode *value)
{
	yaml_node_pair_t *p;
	yaml_node_t *k;

	if (!y_is_map(map) || i >= y_len(map))
		return false;
	p = map->n->data.mapping.pairs.start + i;
	k = yaml_document_get_node(&d->doc, p->key);
	if (!k || k->type != YAML_SCALAR_NODE)
		return false;
	*key = (const char *)k->data.scalar.value;
	value->n = yaml_document_get_node(&d->doc, p->value);
	path_set(value->path, map->path, *key, -1);
	return value->n != NULL;
}

int y_check_keys(struct ydoc *d, const struct ynode *map,
		 const char *const *allowed)
{
	if (!y_is_map(map))
		return yerr(d, map, EINVAL, "expected a mapping");
	for (unsigned i = 0; i < y_len(map); i++) {
		struct ynode v;
		const char *key = NULL;
		bool ok = false;

		if (!y_pair(d, map, i, &key, &v))
			return yerr(d, map, EINVAL, "keys must be plain text");
		for (unsigned a = 0; allowed[a] && !ok; a++)
			ok = !strcmp(allowed[a], key);
		if (!ok)
			return yerr(d, &v, EINVAL, "unknown key '%s'", key);
	}
	return 0;
}

int y_u64(struct ydoc *d, const struct ynode *x, uint64_t max, uint64_t *v)
{
	const char *s = y_str(x);
	char *end;

	if (!s || !*s || *s == '-')
		return yerr(d, x, EINVAL, "expected a number");
	errno = 0;
	*v = strtoull(s, &end, 0);
	if (errno || *end)
		return yerr(d, x, EINVAL, "'%s' is not a number", s);
	if (*v > max)
		return yerr(d, x, ERANGE, "%s is larger than %" PRIu64, s, max);
	return 0;
}

int y_bool(struct ydoc *d, const struct ynode *x, bool *v)
{
	const char *s = y_str(x);

	if (s && (!strcmp(s, "true") || !strcmp(s, "yes") || !strcmp(s, "on")))
		*v = true;
	else if (s &&
		 (!strcmp(s, "false") || !strcmp(s, "no") || !strcmp(s, "off")))
		*v = false;
	else
		return yerr(d, x, EINVAL, "expected true or false");
	return 0;
}

int y_string(struct ydoc *d, const struct ynode *x, const char **v)
{
	*v = y_str(x);
	if (!*v || !**v)
		return yerr(d, x, EINVAL, "expected a non-empty string");
	return 0;
}
