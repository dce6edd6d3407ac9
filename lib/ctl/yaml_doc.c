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

#define CHECK_Y(x)                  \
	do {                        \
		int rc_ = (x);      \
		if (rc_)            \
			return rc_; \
	} while (0)

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

bool y_is_null(const struct ynode *x)
{
	const char *s = y_str(x);

	return s && x->n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
	       (!*s || !strcmp(s, "~") || !strcmp(s, "null") ||
		!strcmp(s, "Null") || !strcmp(s, "NULL"));
}

/* A mapping's key for sorting: its text and its position. */
struct ykey {
	const char *text;
	unsigned pos;
};

static int ykey_cmp(const void *a, const void *b)
{
	const struct ykey *x = a, *y = b;
	int c = strcmp(x->text, y->text);

	return c ? c : (x->pos > y->pos) - (x->pos < y->pos);
}

/*
 * The first key of @map (by position) that an earlier key repeats: its
 * position in *@second and the earlier one's in *@first. Sorting keeps a
 * large mapping O(n log n). Returns 1 when found, 0 when not, -ENOMEM.
 */
static int find_dup_key(struct ydoc *d, const struct ynode *map,
			unsigned *first, unsigned *second)
{
	unsigned n = y_len(map), found = 0;
	struct ykey *k = calloc(n ? n : 1, sizeof(*k));

	if (!k)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		yaml_node_pair_t *p = map->n->data.mapping.pairs.start + i;
		yaml_node_t *kn = yaml_document_get_node(&d->doc, p->key);

		k[i].text = kn && kn->type == YAML_SCALAR_NODE
				? (const char *)kn->data.scalar.value
				: NULL;
		k[i].pos = i;
		if (!k[i].text) {
			free(k);
			return 0; /* the loader refuses such keys itself */
		}
	}
	qsort(k, n, sizeof(*k), ykey_cmp);
	for (unsigned i = 1; i < n; i++)
		if (!strcmp(k[i].text, k[i - 1].text) &&
		    (!found || k[i].pos < *second) &&
		    (i < 2 || strcmp(k[i].text, k[i - 2].text))) {
			*first = k[i - 1].pos;
			*second = k[i].pos;
			found = 1;
		}
	free(k);
	return (int)found;
}

static int check_node(struct ydoc *d, const struct ynode *x, unsigned depth,
		      unsigned char *seen)
{
	size_t id = (size_t)(x->n - d->doc.nodes.start);
	unsigned first, second;
	int rc;

	if (seen[id])
		return 0;
	seen[id] = 1;
	if (depth > YDEPTH_MAX)
		return yerr(d, x, EINVAL, "nested deeper than %d levels",
			    YDEPTH_MAX);
	if (y_is_seq(x)) {
		for (unsigned i = 0; i < y_len(x); i++) {
			struct ynode it;

			if (y_item(d, x, i, &it))
				CHECK_Y(check_node(d, &it, depth + 1, seen));
		}
		return 0;
	}
	if (!y_is_map(x))
		return 0;
	rc = find_dup_key(d, x, &first, &second);
	if (rc < 0)
		return yerr(d, x, ENOMEM, "out of memory");
	if (rc) {
		yaml_node_pair_t *p = x->n->data.mapping.pairs.start;
		struct ynode at;
		const char *key;

		y_pair(d, x, second, &key, &at);
		/* the line of the key, which may differ from its value's */
		at.n = yaml_document_get_node(&d->doc, p[second].key);
		return yerr(
		    d, &at, EINVAL, "duplicate key '%s' (first on line %lu)",
		    key,
		    (unsigned long)yaml_document_get_node(&d->doc, p[first].key)
			    ->start_mark.line +
			1);
	}
	for (unsigned i = 0; i < y_len(x); i++) {
		struct ynode v;
		const char *key;

		if (y_pair(d, x, i, &key, &v))
			CHECK_Y(check_node(d, &v, depth + 1, seen));
	}
	return 0;
}

int y_check_doc(struct ydoc *d, const struct ynode *root)
{
	size_t n = (size_t)(d->doc.nodes.top - d->doc.nodes.start);
	unsigned char *seen = calloc(n ? n : 1, 1);
	int rc;

	if (!seen)
		return yerr(d, NULL, ENOMEM, "out of memory");
	rc = check_node(d, root, 0, seen);
	free(seen);
	return rc;
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

	if (!s || !*s)
		return yerr(d, x, EINVAL, "expected a number");
	errno = 0;
	*v = strtoull(*s == '-' ? s + 1 : s, &end, 0);
	if (*end || end == s || (s[0] == '-' && !s[1]))
		return yerr(d, x, EINVAL, "'%s' is not a number", s);
	if (errno || *v > max || (*s == '-' && *v))
		return yerr(d, x, ERANGE,
			    "'%s' is out of range (%s%" PRIu64 ")", s,
			    *s == '-' ? "0.." : "max ", max);
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
