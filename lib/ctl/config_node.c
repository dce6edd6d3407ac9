/*
 * Config nodes for apps (dpflow/config_node.h): the public face of the
 * loader's YAML helpers (yaml_doc.h), so that an app's errors read as the
 * loader's own. Each call copies the node into a struct ynode and back;
 * they run on the control path only.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <yaml.h>

#include "ctl/yaml_doc.h"
#include "dpflow/config_node.h"

_Static_assert(DPFLOW_CFG_PATH_MAX == YPATH_MAX,
	       "a config node's path is the loader's");

struct dpflow_cfg_doc {
	struct ydoc d;
	bool loaded; /* d.doc holds a document */
	char name[];
};

static void to_y(const struct dpflow_cfg_node *x, struct ynode *y)
{
	y->n = (yaml_node_t *)x->n;
	memcpy(y->path, x->path, sizeof(y->path));
}

static void from_y(struct dpflow_cfg_doc *doc, const struct ynode *y,
		   struct dpflow_cfg_node *x)
{
	x->doc = doc;
	x->n = y->n;
	memcpy(x->path, y->path, sizeof(x->path));
}

static struct dpflow_cfg_doc *doc_new(const char *name,
				      struct dpflow_error *err)
{
	size_t len = strlen(name) + 1;
	struct dpflow_cfg_doc *doc = calloc(1, sizeof(*doc) + len);

	if (!doc) {
		dpflow_error_set(err, ENOMEM, NULL, "out of memory");
		return NULL;
	}
	memcpy(doc->name, name, len);
	doc->d.file = doc->name;
	doc->d.err = err;
	return doc;
}

/* Parse what @parser reads into @doc; NULL (doc freed) + @err on error. */
static struct dpflow_cfg_doc *doc_parse(struct dpflow_cfg_doc *doc,
					yaml_parser_t *parser)
{
	if (!yaml_parser_load(parser, &doc->d.doc)) {
		dpflow_error_set(
		    doc->d.err, EINVAL, NULL, "%s:%lu: %s", doc->name,
		    (unsigned long)parser->problem_mark.line + 1,
		    parser->problem ? parser->problem : "invalid YAML");
		free(doc);
		return NULL;
	}
	doc->loaded = true;
	return doc;
}

struct dpflow_cfg_doc *dpflow_cfg_doc_load(const char *path,
					   struct dpflow_error *err)
{
	struct dpflow_cfg_doc *doc;
	yaml_parser_t parser;
	FILE *f = fopen(path, "rb");
	struct stat st;

	if (!f) {
		dpflow_error_set(err, errno, "config", "%s: %s", path,
				 strerror(errno));
		return NULL;
	}
	if (!fstat(fileno(f), &st) && S_ISDIR(st.st_mode)) {
		fclose(f);
		dpflow_error_set(err, EISDIR, "config",
				 "%s: is a directory, not a config file", path);
		return NULL;
	}
	doc = doc_new(path, err);
	if (doc) {
		yaml_parser_initialize(&parser);
		yaml_parser_set_input_file(&parser, f);
		doc = doc_parse(doc, &parser);
		yaml_parser_delete(&parser);
	}
	fclose(f);
	return doc;
}

struct dpflow_cfg_doc *dpflow_cfg_doc_parse(const char *text, size_t len,
					    const char *name,
					    struct dpflow_error *err)
{
	struct dpflow_cfg_doc *doc = doc_new(name, err);
	yaml_parser_t parser;

	if (!doc)
		return NULL;
	yaml_parser_initialize(&parser);
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	doc = doc_parse(doc, &parser);
	yaml_parser_delete(&parser);
	return doc;
}

void dpflow_cfg_doc_free(struct dpflow_cfg_doc *doc)
{
	if (!doc)
		return;
	if (doc->loaded)
		yaml_document_delete(&doc->d.doc);
	free(doc);
}

bool dpflow_cfg_doc_root(struct dpflow_cfg_doc *doc, const char *path,
			 struct dpflow_cfg_node *out)
{
	memset(out, 0, sizeof(*out));
	out->doc = doc;
	out->n = yaml_document_get_root_node(&doc->d.doc);
	snprintf(out->path, sizeof(out->path), "%s", path ? path : "");
	return out->n != NULL;
}

int dpflow_cfg_error(const struct dpflow_cfg_node *at, int code,
		     const char *fmt, ...)
{
	char msg[DPFLOW_ERROR_MSG_MAX];
	struct ynode y;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	to_y(at, &y);
	return yerr(&at->doc->d, &y, code, "%s", msg);
}

unsigned dpflow_cfg_line(const struct dpflow_cfg_node *x)
{
	const yaml_node_t *n = x->n;

	return n ? (unsigned)n->start_mark.line + 1 : 0;
}

bool dpflow_cfg_is_map(const struct dpflow_cfg_node *x)
{
	struct ynode y;

	to_y(x, &y);
	return y_is_map(&y);
}

bool dpflow_cfg_is_seq(const struct dpflow_cfg_node *x)
{
	struct ynode y;

	to_y(x, &y);
	return y_is_seq(&y);
}

bool dpflow_cfg_is_scalar(const struct dpflow_cfg_node *x)
{
	struct ynode y;

	to_y(x, &y);
	return y_is_scalar(&y);
}

bool dpflow_cfg_is_null(const struct dpflow_cfg_node *x)
{
	struct ynode y;

	to_y(x, &y);
	return y_is_null(&y);
}

const char *dpflow_cfg_str(const struct dpflow_cfg_node *x)
{
	struct ynode y;

	to_y(x, &y);
	return y_str(&y);
}

unsigned dpflow_cfg_len(const struct dpflow_cfg_node *x)
{
	struct ynode y;

	to_y(x, &y);
	return y_len(&y);
}

bool dpflow_cfg_get(const struct dpflow_cfg_node *map, const char *key,
		    struct dpflow_cfg_node *out)
{
	struct ynode y, v;

	to_y(map, &y);
	if (!y_get(&map->doc->d, &y, key, &v))
		return false;
	from_y(map->doc, &v, out);
	return true;
}

bool dpflow_cfg_item(const struct dpflow_cfg_node *seq, unsigned i,
		     struct dpflow_cfg_node *out)
{
	struct ynode y, v;

	to_y(seq, &y);
	if (!y_item(&seq->doc->d, &y, i, &v))
		return false;
	from_y(seq->doc, &v, out);
	return true;
}

bool dpflow_cfg_pair(const struct dpflow_cfg_node *map, unsigned i,
		     const char **key, struct dpflow_cfg_node *value)
{
	struct ynode y, v;

	to_y(map, &y);
	if (!y_pair(&map->doc->d, &y, i, key, &v))
		return false;
	from_y(map->doc, &v, value);
	return true;
}

int dpflow_cfg_check_keys(const struct dpflow_cfg_node *map,
			  const char *const *allowed)
{
	struct ynode y;

	to_y(map, &y);
	return y_check_keys(&map->doc->d, &y, allowed);
}

int dpflow_cfg_check(const struct dpflow_cfg_node *x)
{
	struct ynode y;

	to_y(x, &y);
	return y_check_doc(&x->doc->d, &y);
}

int dpflow_cfg_u64(const struct dpflow_cfg_node *x, uint64_t max, uint64_t *v)
{
	struct ynode y;

	to_y(x, &y);
	return y_u64(&x->doc->d, &y, max, v);
}

int dpflow_cfg_bool(const struct dpflow_cfg_node *x, bool *v)
{
	struct ynode y;

	to_y(x, &y);
	return y_bool(&x->doc->d, &y, v);
}

int dpflow_cfg_string(const struct dpflow_cfg_node *x, const char **v)
{
	struct ynode y;

	to_y(x, &y);
	return y_string(&x->doc->d, &y, v);
}

int dpflow_cfg_opt_u64(const struct dpflow_cfg_node *map, const char *key,
		       uint64_t max, uint64_t *v)
{
	struct dpflow_cfg_node x;

	if (!dpflow_cfg_get(map, key, &x))
		return 0;
	return dpflow_cfg_u64(&x, max, v);
}
