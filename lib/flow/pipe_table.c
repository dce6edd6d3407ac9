/*
 * Table kinds behind pipe types (flow_internal.h struct table_kind):
 * adapters from the pipe layer's batches to each table's image API.
 * Control threads for create/destroy/apply, data threads for lookup.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "flow/flow_internal.h"
#include "flow/table_exact.h"

/* ---- BASIC: exact match -------------------------------------------------- */

static int exact_create(struct dpflow_pipe *pipe, struct dpflow_error *err)
{
	struct dpflow_exact_params p = {
	    .key_len = (uint32_t)((pipe->key_len + 3u) & ~3u),
	    .capacity = pipe->cfg.size,
	    .seed = 0x64706671u,
	};

	if (p.key_len < 4)
		p.key_len = 4;
	for (int i = 0; i < 2; i++) {
		pipe->images[i] = dpflow_exact_create(&p, err);
		if (!pipe->images[i]) {
			dpflow_exact_destroy(pipe->images[0]);
			pipe->images[0] = NULL;
			return -(err ? err->code : ENOMEM);
		}
	}
	pipe->image_size = dpflow_exact_image_bytes(pipe->images[0]);
	return 0;
}

static void exact_destroy(struct dpflow_pipe *pipe)
{
	for (int i = 0; i < 2; i++)
		dpflow_exact_destroy(pipe->images[i]);
}

/* An entry's key, padded to the table's 4-byte multiple. */
static void exact_key(const struct dpflow_pipe *pipe,
		      const struct dpflow_entry *e, uint8_t *key)
{
	memset(key, 0, DPFLOW_KEY_MAX);
	memcpy(key, e->cfg.key, pipe->key_len);
	/* per-entry template masks apply to entries as to packets */
	for (unsigned i = 0, off = 0; i < pipe->cfg.match.n; i++) {
		const struct dpflow_match_field *f = &pipe->cfg.match.f[i];
		unsigned bytes = dpflow_field_bytes(f->field);

		if (!f->per_entry)
			continue;
		for (unsigned b = 0; b < bytes; b++)
			key[off + b] &= f->mask[b];
		off += bytes;
	}
}

static int exact_apply(struct dpflow_pipe *pipe, unsigned which,
		       const struct table_op *ops, unsigned n, unsigned *failed,
		       struct dpflow_error *err)
{
	struct dpflow_exact_image *img = pipe->images[which];
	uint8_t key[DPFLOW_KEY_MAX];
	unsigned i;
	int rc = 0;

	for (i = 0; i < n; i++) {
		exact_key(pipe, ops[i].e, key);
		rc = ops[i].add
			 ? dpflow_exact_insert(img, key, ops[i].value, err)
			 : dpflow_exact_delete(img, key, NULL, err);
		if (rc)
			break;
	}
	if (!rc)
		return 0;
	*failed = i;
	if (rc == -EEXIST)
		dpflow_error_set(err, EEXIST, "match",
				 "pipe '%s': an entry with this match exists",
				 pipe->name);
	else if (rc == -ENOSPC)
		dpflow_error_set(err, ENOSPC, "size", "pipe '%s': table full",
				 pipe->name);
	while (i-- > 0) { /* undo, newest first */
		exact_key(pipe, ops[i].e, key);
		if (ops[i].add)
			dpflow_exact_delete(img, key, NULL, NULL);
		else
			dpflow_exact_insert(img, key, ops[i].value, NULL);
	}
	return rc;
}

static void exact_lookup(const struct dpflow_pipe *pipe, const void *image,
			 const uint8_t *keys, uint16_t n, uint32_t *values)
{
	const void *ptrs[DPFLOW_BURST_MAX];

	(void)pipe;
	for (uint16_t i = 0; i < n; i++)
		ptrs[i] = keys + (size_t)i * DPFLOW_KEY_MAX;
	dpflow_exact_lookup_bulk((const struct dpflow_exact_image *)image, ptrs,
				 n, values);
}

static const struct table_kind exact_kind = {
    .create = exact_create,
    .destroy = exact_destroy,
    .apply = exact_apply,
    .lookup = exact_lookup,
};

const struct table_kind *table_kind_for(unsigned pipe_type)
{
	switch (pipe_type) {
	case DPFLOW_PIPE_BASIC:
		return &exact_kind;
	default:
		return NULL;
	}
}
