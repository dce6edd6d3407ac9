/*
 * Small helpers over a libyaml document for the config loader: typed
 * access to mappings, sequences and scalars, and errors that carry the
 * file, the line and the key path. Control thread only.
 */
#ifndef DPFLOW_CTL_YAML_DOC_H
#define DPFLOW_CTL_YAML_DOC_H

#include <stdbool.h>
#include <stdint.h>
#include <yaml.h>

#include "dpflow/error.h"

#define YPATH_MAX 128

struct ydoc {
	yaml_document_t doc;
	const char *file;
	struct dpflow_error *err;
};

/* A node and the key path that led to it ("pipes[1].match"). */
struct ynode {
	yaml_node_t *n;
	char path[YPATH_MAX];
};

/* Record an error at @at ("FILE:LINE: PATH: msg"). Returns -code. */
int yerr(struct ydoc *d, const struct ynode *at, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

bool y_is_map(const struct ynode *x);
bool y_is_seq(const struct ynode *x);
bool y_is_scalar(const struct ynode *x);
const char *y_str(const struct ynode *x); /* scalar text or NULL */

/* Child @key of a mapping (false when absent). */
bool y_get(struct ydoc *d, const struct ynode *map, const char *key,
	   struct ynode *out);
/* Item @i of a sequence. */
bool y_item(struct ydoc *d, const struct ynode *seq, unsigned i,
	    struct ynode *out);
unsigned y_len(const struct ynode *x);
/* Key @i of a mapping (its text) and its value. */
bool y_pair(struct ydoc *d, const struct ynode *map, unsigned i,
	    const char **key, struct ynode *value);

/*
 * Refuse what libyaml accepts silently: a key given twice in one mapping
 * ("duplicate key 'K' (first on line N)", at the second) and nesting
 * deeper than YDEPTH_MAX, anywhere under @root. Each node is visited once
 * (aliases included). Returns 0 or the error of yerr().
 */
#define YDEPTH_MAX 64
int y_check_doc(struct ydoc *d, const struct ynode *root);

/* A YAML null: a plain scalar null, Null, NULL, ~ or nothing. */
bool y_is_null(const struct ynode *x);

/* Every key of @map must be one of @allowed (NULL-terminated). */
int y_check_keys(struct ydoc *d, const struct ynode *map,
		 const char *const *allowed);

/* Typed scalars; each reports a type error at the node. */
int y_u64(struct ydoc *d, const struct ynode *x, uint64_t max, uint64_t *v);
int y_bool(struct ydoc *d, const struct ynode *x, bool *v);
int y_string(struct ydoc *d, const struct ynode *x, const char **v);

#endif /* DPFLOW_CTL_YAML_DOC_H */
