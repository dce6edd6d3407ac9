/*
 * Actions on the CPU data path (flow_actions.h). Data threads.
 */
#include <string.h>

#include "dpflow/pool.h"

#include "flow/field_impl.h"
#include "flow/flow_actions.h"

static uint32_t be_get(const uint8_t *v, unsigned bytes)
{
	uint32_t x = 0;

	for (unsigned i = 0; i < bytes && i < 4; i++)
		x = x << 8 | v[i];
	return x;
}

bool flow_action_supported(const struct dpflow_action *a)
{
	switch (a->kind) {
	case DPFLOW_ACT_SET_FIELD:
	case DPFLOW_ACT_ADD_FIELD:
	case DPFLOW_ACT_COPY_FIELD:
		return a->field >= DPFLOW_FIELD_META_REG0 &&
		       a->field <= DPFLOW_FIELD_META_REG3;
	default:
		return false;
	}
}

unsigned flow_actions_apply(struct dpflow_ctx *ctx,
			    const struct dpflow_pipe *pipe,
			    const struct dpflow_entry *e, uint32_t idx)
{
	const struct dpflow_action_tmpl *t;
	struct dpflow_pkt_meta *m = dpflow_pool_meta(ctx->pool, idx);

	if (!pipe->cfg.n_action_tmpls)
		return 0;
	t = &pipe->cfg.actions[e->cfg.action_tmpl];
	for (unsigned i = 0; i < t->n; i++) {
		const struct dpflow_action *a = &t->a[i];
		const uint8_t *v =
		    a->per_entry ? e->cfg.action_value[i] : a->value;
		unsigned reg = a->field - DPFLOW_FIELD_META_REG0;
		uint8_t src[16];

		switch (a->kind) {
		case DPFLOW_ACT_SET_FIELD:
			m->reg[reg] = be_get(v, 4);
			break;
		case DPFLOW_ACT_ADD_FIELD:
			m->reg[reg] += be_get(v, 4);
			break;
		case DPFLOW_ACT_COPY_FIELD:
			memset(src, 0, sizeof(src));
			dpflow_field_get(dpflow_pkt_data(ctx->pool, idx), m,
					 a->src_field, src);
			m->reg[reg] =
			    be_get(src, dpflow_field_bytes(a->src_field));
			break;
		default:
			break;
		}
	}
	return 0;
}
