/*
 * Building the plan (plan.h) from pipes and entries: the control side's
 * configuration into the index-based bytes that both targets walk.
 * Control thread only.
 */
#include <errno.h>
#include <string.h>

#include "dpflow/error.h"

#include "flow/ct_impl.h"
#include "flow/flow_internal.h"
#include "flow/plan.h"

/* The context's slot of handler @f (function and argument), added if new;
 * -1 when every slot is taken. */
static int handler_slot(struct dpflow_ctx *ctx, const struct dpflow_fwd *f)
{
	for (unsigned i = 0; i < ctx->n_plan_handlers; i++)
		if (ctx->plan_handlers[i].fn == f->handler &&
		    ctx->plan_handlers[i].arg == f->handler_arg)
			return (int)i;
	if (ctx->n_plan_handlers == FLOW_PLAN_HANDLERS_MAX)
		return -1;
	ctx->plan_handlers[ctx->n_plan_handlers].fn = f->handler;
	ctx->plan_handlers[ctx->n_plan_handlers].arg = f->handler_arg;
	return (int)ctx->n_plan_handlers++;
}

int dpflow_plan_fwd_build(struct dpflow_ctx *ctx, const struct dpflow_fwd *f,
			  const char *pipe, const char *field,
			  struct dpflow_plan_fwd *out, struct dpflow_error *err)
{
	int slot;

	memset(out, 0, sizeof(*out));
	switch (f->kind) {
	case DPFLOW_FWD_DROP:
		out->kind = PLAN_FWD_DROP;
		return 0;
	case DPFLOW_FWD_PORT:
		out->kind = PLAN_FWD_PORT;
		out->target = f->port;
		return 0;
	case DPFLOW_FWD_PIPE:
		out->kind = PLAN_FWD_PIPE;
		out->target = f->pipe->id;
		return 0;
	case DPFLOW_FWD_PER_ENTRY:
		out->kind = PLAN_FWD_PER_ENTRY;
		return 0;
	case DPFLOW_FWD_RSS:
		out->kind = PLAN_FWD_RSS;
		out->target = f->rss_queue;
		out->rss_n = f->rss_n;
		out->rss_inner = f->rss_inner;
		return 0;
	case DPFLOW_FWD_HANDLER:
		slot = handler_slot(ctx, f);
		if (slot < 0)
			return dpflow_error_set(err, ENOSPC, field,
						"pipe '%s': more than %d "
						"distinct handlers",
						pipe, FLOW_PLAN_HANDLERS_MAX);
		out->kind = PLAN_FWD_HANDLER;
		out->target = (uint16_t)slot;
		return 0;
	default:
		return dpflow_error_set(err, EINVAL, field,
					"pipe '%s': unknown forwarding kind %u",
					pipe, (unsigned)f->kind);
	}
}

/* The ACL key words of @p's per-entry fields, as pipe_table.c's
 * acl_create() lays them out: 4-, 2- and 1-byte words (3 bytes: 2 + 1). */
static int acl_words(const struct dpflow_pipe *p, struct dpflow_plan_pipe *out,
		     struct dpflow_error *err)
{
	unsigned k = 0;

	for (unsigned i = 0; i < p->cfg.match.n; i++) {
		unsigned bytes = p->field_bytes[i];

		if (!p->cfg.match.f[i].per_entry)
			continue;
		for (unsigned off = p->field_off[i]; bytes;) {
			unsigned w = bytes >= 4 ? 4 : bytes == 3 ? 2 : bytes;

			if (k == DPFLOW_ACL_FIELDS_MAX)
				return dpflow_error_set(err, EINVAL, "match",
							"pipe '%s': too many "
							"acl fields",
							p->name);
			out->acl_off[k] = (uint8_t)off;
			out->acl_bytes[k] = (uint8_t)w;
			off += w;
			bytes -= w;
			k++;
		}
	}
	out->acl_n = (uint8_t)k;
	return 0;
}

int dpflow_plan_pipe_build(struct dpflow_ctx *ctx, const struct dpflow_pipe *p,
			   struct dpflow_plan_pipe *out,
			   struct dpflow_error *err)
{
	const struct dpflow_pipe_cfg *c = &p->cfg;
	int rc;

	memset(out, 0, sizeof(*out));
	out->type = (uint8_t)c->type;
	out->lpm_v6 = c->type == DPFLOW_PIPE_LPM && p->key_len > 4;
	out->counter = c->monitor.counter;
	out->n_action_tmpls = c->n_action_tmpls;
	out->key_len = p->key_len;
	out->n_fields = c->match.n;
	out->n_const = p->n_const;
	out->size = c->size;
	out->hash_seed = c->hash_seed;
	out->metered = c->monitor.meter.alg || c->monitor.shared_meter;
	out->ct_inner = c->ct.inner;
	out->ct_lookup_only = c->ct.lookup_only;
	out->ct_user = c->ct.user;
	out->ct_user_reg = c->ct.user_reg;
	out->ct_save_regs = c->ct.save_regs & 0xf;
	out->ct_pool[0] = out->ct_pool[1] = DPFLOW_CT_POOL_NONE;
	for (unsigned i = 0, n = 0; i < 2; i++)
		for (unsigned a = 0; a < c->ct.snat.n_addrs; a++)
			if (c->ct.snat.family[a] == (i ? 6 : 4)) {
				out->ct_pool[i] = (uint8_t)n++;
				break;
			}
	if (c->ct.dnat_pipe) {
		out->ct_dnat = 1;
		out->ct_dnat_pipe = (uint8_t)c->ct.dnat_pipe->id;
		out->ct_dnat_reg = c->ct.dnat_reg & 3;
	}
	if (c->ct.opens)
		out->ct_open = (uint8_t)(1 + (c->ct.open_reg & 3));
	out->ct_values = out->ct_save_regs || out->ct_dnat || out->ct_open ||
			 out->ct_pool[0] != DPFLOW_CT_POOL_NONE ||
			 out->ct_pool[1] != DPFLOW_CT_POOL_NONE;
	out->yellow_set = c->color_fwd.yellow_set;
	out->red_set = c->color_fwd.red_set;
	rc =
	    dpflow_plan_fwd_build(ctx, &c->fwd, p->name, "fwd", &out->fwd, err);
	if (!rc)
		rc = dpflow_plan_fwd_build(ctx, &c->miss_fwd, p->name,
					   "miss_fwd", &out->miss, err);
	if (!rc && out->yellow_set)
		rc = dpflow_plan_fwd_build(ctx, &c->color_fwd.yellow, p->name,
					   "color_fwd.yellow", &out->yellow,
					   err);
	if (!rc && out->red_set)
		rc = dpflow_plan_fwd_build(ctx, &c->color_fwd.red, p->name,
					   "color_fwd.red", &out->red, err);
	if (rc)
		return rc;
	for (unsigned i = 0; i < c->match.n; i++) {
		const struct dpflow_match_field *f = &c->match.f[i];

		out->field[i] = f->field;
		out->per_entry[i] = f->per_entry;
		out->field_off[i] = p->field_off[i];
		out->field_bytes[i] = p->field_bytes[i];
		out->field_full[i] = p->field_full_mask[i];
		memcpy(out->value[i], f->value, 16);
		memcpy(out->mask[i], f->mask, 16);
	}
	out->reads_entries = c->n_action_tmpls || out->metered ||
			     c->fwd.kind == DPFLOW_FWD_PER_ENTRY;
	if (c->type == DPFLOW_PIPE_ACL || c->type == DPFLOW_PIPE_CONTROL) {
		rc = acl_words(p, out, err);
		if (rc)
			return rc;
	}
	for (unsigned t = 0; t < c->n_action_tmpls; t++) {
		out->tmpl[t] = c->actions[t];
		for (unsigned i = 0; i < DPFLOW_ACTIONS_MAX; i++) {
			if (p->encaps[t][i]) {
				out->tmpl_encap_set[t][i] = 1;
				out->tmpl_encap[t][i] = *p->encaps[t][i];
			}
			if (i < c->actions[t].n &&
			    c->actions[t].a[i].kind == DPFLOW_ACT_ENCAP &&
			    c->actions[t].a[i].per_entry)
				out->has_entry_encap = 1;
		}
	}
	return 0;
}

int dpflow_plan_entry_build(struct dpflow_ctx *ctx,
			    const struct dpflow_entry *e,
			    struct dpflow_plan_entry *out,
			    struct dpflow_error *err)
{
	const struct dpflow_pipe *p = e->pipe;
	const struct dpflow_entry_cfg *c = &e->cfg;

	memset(out, 0, sizeof(*out));
	out->tmpl = c->action_tmpl;
	/* the monitor resolved when the entry is published */
	out->meter = p->dp[e->index].meter;
	out->meter_shared = p->dp[e->index].meter_shared;
	out->has_encap = e->encap != NULL;
	memcpy(out->values, c->action_value, sizeof(out->values));
	if (p->cfg.fwd.kind == DPFLOW_FWD_PER_ENTRY)
		return dpflow_plan_fwd_build(ctx, &c->fwd, p->name,
					     "entries.fwd", &out->fwd, err);
	return 0;
}
