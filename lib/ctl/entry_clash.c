/*
 * Identical entries: two entries of one pipe with the same canonical
 * match (ctl_entry_canon()) and, in control and acl pipes, the same
 * priority. The config loader (a file's entries) and the control socket
 * (entries.add and the adds of entries.batch) refuse them with this one
 * check; each writes its own message. Control thread only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/ctl_internal.h"

uint32_t ctl_canon_hash(const uint8_t *c, unsigned len)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	for (unsigned i = 0; i < len; i++)
		h = (h ^ c[i]) * 16777619u;
	return h;
}

bool ctl_clash_prio(const struct dpflow_pipe *pipe)
{
	enum dpflow_pipe_type t = dpflow_pipe_cfg(pipe)->type;

	return t == DPFLOW_PIPE_CONTROL || t == DPFLOW_PIPE_ACL;
}

/* Open-addressing table of new entries by identity: slots hold an entry's
 * position, UINT32_MAX when free. */
struct clash_tab {
	const struct dpflow_pipe *pipe;
	ctl_clash_get_fn get;
	const void *arg;
	bool prio;
	size_t mask;
	uint32_t *slot;
};

static size_t tab_hash(const struct clash_tab *t, const uint8_t *c,
		       unsigned len, uint32_t prio)
{
	return (ctl_canon_hash(c, len) ^ (t->prio ? prio : 0)) & t->mask;
}

/*
 * The new entry identical to @e (canonical bytes @c, @len), from @h on,
 * or UINT32_MAX; @h ends at the first free slot.
 */
static uint32_t tab_find(const struct clash_tab *t,
			 const struct dpflow_entry_cfg *e, const uint8_t *c,
			 unsigned len, size_t *h)
{
	uint8_t b[CTL_CANON_MAX];

	for (; t->slot[*h] != UINT32_MAX; *h = (*h + 1) & t->mask) {
		const struct dpflow_entry_cfg *o = t->get(t->arg, t->slot[*h]);

		if ((!t->prio || o->priority == e->priority) &&
		    ctl_entry_canon(t->pipe, o, b) == len && !memcmp(c, b, len))
			return t->slot[*h];
	}
	return UINT32_MAX;
}

int ctl_entry_clash(const struct dpflow_pipe *pipe, ctl_clash_get_fn get,
		    const void *arg, size_t n, bool existing,
		    struct ctl_clash *out)
{
	struct clash_tab t = {
	    .pipe = pipe, .get = get, .arg = arg, .prio = ctl_clash_prio(pipe)};
	uint8_t c[CTL_CANON_MAX];
	size_t cap = 16;
	int found = 0;

	if (dpflow_pipe_cfg(pipe)->type == DPFLOW_PIPE_HASH || !n)
		return 0;
	while (cap < 2 * n)
		cap *= 2;
	t.mask = cap - 1;
	t.slot = malloc(cap * sizeof(*t.slot));
	if (!t.slot)
		return -ENOMEM;
	memset(t.slot, 0xff, cap * sizeof(*t.slot));
	for (size_t i = 0; i < n && !found; i++) {
		const struct dpflow_entry_cfg *e = get(arg, i);
		unsigned len = ctl_entry_canon(pipe, e, c);
		size_t h = tab_hash(&t, c, len, e->priority);
		uint32_t o = tab_find(&t, e, c, len, &h);

		if (o != UINT32_MAX) {
			*out = (struct ctl_clash){(uint32_t)i, o, 0};
			found = 1;
		}
		t.slot[h] = (uint32_t)i;
	}
	for (uint32_t s = 0; existing && !found && s < dpflow_pipe_size(pipe);
	     s++) {
		const struct dpflow_entry *pe = dpflow_pipe_entry(pipe, s);
		const struct dpflow_entry_cfg *e;
		unsigned len;
		size_t h;
		uint32_t o;

		if (!pe)
			continue;
		e = dpflow_entry_cfg(pe);
		len = ctl_entry_canon(pipe, e, c);
		h = tab_hash(&t, c, len, e->priority);
		o = tab_find(&t, e, c, len, &h);
		if (o != UINT32_MAX) {
			*out = (struct ctl_clash){o, CTL_CLASH_PIPE, s};
			found = 1;
		}
	}
	free(t.slot);
	return found;
}
