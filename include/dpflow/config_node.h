/*
 * Config nodes: a read-only view of a YAML document (a config file, or a
 * request's JSON) for apps, with typed getters whose errors read exactly
 * as the config loader's: "FILE:LINE: PATH: what is wrong", PATH being
 * the key path of the node at fault (apps.l4lb.services[0].vip).
 *
 * An app gets its section of the config (apps.NAME) as a node in its
 * load op (app.h) and reads it with these calls; it never sees libyaml
 * or the loader's internals. A node is a small value (the document, the
 * YAML node and its path): copy it freely; it is valid while its
 * document lives. Getters that fail write the error into the document's
 * error (the one given when it was loaded) and return -errno.
 *
 * Threads: a document and its nodes belong to one thread at a time (the
 * control thread).
 */
#ifndef DPFLOW_CONFIG_NODE_H
#define DPFLOW_CONFIG_NODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dpflow/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Longest key path kept; a longer one ends in "...". */
#define DPFLOW_CFG_PATH_MAX 128

struct dpflow_cfg_doc;

/* A node of a document and the key path that led to it. */
struct dpflow_cfg_node {
	struct dpflow_cfg_doc *doc;
	const void *n; /* the YAML node: private */
	char path[DPFLOW_CFG_PATH_MAX];
};

/*
 * The YAML file @path, parsed. Errors about its nodes go to @err, which
 * must outlive the document. NULL + @err ("PATH: reason", or
 * "PATH:LINE: what libyaml says") when it cannot be read or parsed.
 */
struct dpflow_cfg_doc *dpflow_cfg_doc_load(const char *path,
					   struct dpflow_error *err);
/*
 * @len bytes of YAML (or JSON, its flow subset) at @text, parsed; @name
 * stands for the file name in messages ("request"). As above otherwise.
 */
struct dpflow_cfg_doc *dpflow_cfg_doc_parse(const char *text, size_t len,
					    const char *name,
					    struct dpflow_error *err);
/* Free @doc (NULL ok); its nodes die with it. */
void dpflow_cfg_doc_free(struct dpflow_cfg_doc *doc);
/*
 * The document's root node into @out, its key path @path (NULL: "", the
 * top). False for an empty document.
 */
bool dpflow_cfg_doc_root(struct dpflow_cfg_doc *doc, const char *path,
			 struct dpflow_cfg_node *out);

/*
 * Record an error about node @at in its document's error: "FILE:LINE:
 * PATH: message" (PATH "(top)" for the root). Returns -@code.
 */
int dpflow_cfg_error(const struct dpflow_cfg_node *at, int code,
		     const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The line of @x in its document (1 for the first). */
unsigned dpflow_cfg_line(const struct dpflow_cfg_node *x);

bool dpflow_cfg_is_map(const struct dpflow_cfg_node *x);
bool dpflow_cfg_is_seq(const struct dpflow_cfg_node *x);
bool dpflow_cfg_is_scalar(const struct dpflow_cfg_node *x);
/* A YAML null: a plain scalar null, Null, NULL, ~ or nothing. */
bool dpflow_cfg_is_null(const struct dpflow_cfg_node *x);
/* A scalar's text, or NULL for a mapping or a sequence. */
const char *dpflow_cfg_str(const struct dpflow_cfg_node *x);
/* Items of a sequence, pairs of a mapping, 0 for a scalar. */
unsigned dpflow_cfg_len(const struct dpflow_cfg_node *x);

/* Value of @key in mapping @map into @out (path MAP.KEY); false when
 * @map is no mapping or has no such key. */
bool dpflow_cfg_get(const struct dpflow_cfg_node *map, const char *key,
		    struct dpflow_cfg_node *out);
/* Item @i of sequence @seq into @out (path SEQ[i]); false past the end. */
bool dpflow_cfg_item(const struct dpflow_cfg_node *seq, unsigned i,
		     struct dpflow_cfg_node *out);
/* Pair @i of mapping @map: its key's text and its value (path MAP.KEY);
 * false past the end or for a key that is not plain text. */
bool dpflow_cfg_pair(const struct dpflow_cfg_node *map, unsigned i,
		     const char **key, struct dpflow_cfg_node *value);

/*
 * Checks, each an error at the node at fault: @map is a mapping whose
 * every key is one of @allowed (NULL-terminated): "expected a mapping",
 * "unknown key 'K'".
 */
int dpflow_cfg_check_keys(const struct dpflow_cfg_node *map,
			  const char *const *allowed);
/* No key given twice in one mapping and no nesting deeper than 64 levels
 * anywhere under @x ("duplicate key 'K' (first on line N)"). */
int dpflow_cfg_check(const struct dpflow_cfg_node *x);

/*
 * Typed scalars: a number 0..@max (decimal, 0x hex or 0 octal: "expected
 * a number", "'S' is not a number", "'S' is out of range (max M)"),
 * true/yes/on or false/no/off ("expected true or false"), a non-empty
 * string ("expected a non-empty string"). 0 or -errno.
 */
int dpflow_cfg_u64(const struct dpflow_cfg_node *x, uint64_t max, uint64_t *v);
int dpflow_cfg_bool(const struct dpflow_cfg_node *x, bool *v);
int dpflow_cfg_string(const struct dpflow_cfg_node *x, const char **v);
/* dpflow_cfg_u64() of @map's @key when it is there; *@v unchanged when
 * it is not. */
int dpflow_cfg_opt_u64(const struct dpflow_cfg_node *map, const char *key,
		       uint64_t max, uint64_t *v);

#ifdef __cplusplus
}
#endif

#endif /* DPFLOW_CONFIG_NODE_H */
