/*
 * The monitor of pipes and entries (flow.h struct dpflow_monitor): meters
 * with colours, shared counters and meters of the context, and aging.
 * Images come from meter.h; this file decides which entry uses which slot.
 * Control threads, except where said.
 *
 * An entry's meter and aging slot are its index in the pipe: they are
 * configured before the batch that adds the entry is published (no data
 * thread uses the slot yet: an index is reused only after a grace period).
 */
#include <errno.h>
#include <string.h>

#include "dpflow/clock.h"
#include "dpflow/flow.h"

#include "flow/ct.h"
#include "flow/flow_internal.h"
#include "flow/meter.h"

int monitor_meter_params(const struct dpflow_meter_cfg *c, void *params,
			 struct dpflow_error *err)
{
	struct dpflow_meter_params *p = params;

	if (c->alg > DPFLOW_METER_ALG_TRTCM)
		return dpflow_error_set(err, EINVAL, "meter",
					"unknown meter algorithm %u", c->alg);
	if (c->alg == DPFLOW_METER_ALG_TRTCM && c->pir < c->cir)
		return dpflow_error_set(err, EINVAL, "meter",
					"trtcm meter: pir %lu is below cir "
					"%lu (RFC 2698 needs pir >= cir)",
					(unsigned long)c->pir,
					(unsigned long)c->cir);
	memset(p, 0, sizeof(*p));
	p->alg = c->alg == DPFLOW_METER_ALG_SRTCM   ? DPFLOW_METER_SRTCM
		 : c->alg == DPFLOW_METER_ALG_TRTCM ? DPFLOW_METER_TRTCM
						    : DPFLOW_METER_NONE;
	p->color_aware = c->color_aware;
	p->cir = c->cir;
	p->pir = c->pir;
	p->cbs = c->cbs;
	p->ebs = c->ebs;
	p->pbs = c->pbs;
	return 0;
}

int monitor_pipe_create(struct dpflow_pipe *pipe, struct dpflow_error *err)
{
	const struct dpflow_monitor *mon = &pipe->cfg.monitor;
	const struct dpflow_ctx *ctx = pipe->ctx;
	struct dpflow_meter_params p;

	if (pipe->cfg.type == DPFLOW_PIPE_CT &&
	    (mon->meter.alg || mon->aging_ms || mon->counter ||
	     mon->shared_counter || mon->shared_meter))
		return dpflow_error_set(err, EINVAL, "monitor",
					"pipe '%s': a ct pipe has no entries "
					"to meter, count or age (connections "
					"age by their state's timeout)",
					pipe->name);
	if (monitor_meter_params(&mon->meter, &p, err))
		return -EINVAL;
	if (mon->shared_counter > ctx->n_shared_counters)
		return dpflow_error_set(err, EINVAL, "shared_counter",
					"pipe '%s': shared counter %u, the "
					"context has %u",
					pipe->name, mon->shared_counter,
					ctx->n_shared_counters);
	if (mon->shared_meter > ctx->n_shared_meters)
		return dpflow_error_set(err, EINVAL, "shared_meter",
					"pipe '%s': shared meter %u, the "
					"context has %u",
					pipe->name, mon->shared_meter,
					ctx->n_shared_meters);
	if (mon->shared_meter && mon->meter.alg)
		return dpflow_error_set(err, EINVAL, "meter",
					"pipe '%s': a meter per entry and a "
					"shared meter at once",
					pipe->name);
	if ((pipe->cfg.color_fwd.yellow_set || pipe->cfg.color_fwd.red_set) &&
	    !mon->meter.alg && !mon->shared_meter)
		return dpflow_error_set(err, EINVAL, "color_fwd",
					"pipe '%s': colour forwarding without "
					"a meter",
					pipe->name);
	if (mon->meter.alg) {
		pipe->meters = dpflow_meters_create(pipe->cfg.size, err);
		if (!pipe->meters)
			return -ENOMEM;
	}
	if (mon->aging_ms) {
		pipe->aging = dpflow_aging_create(pipe->cfg.size, err);
		if (!pipe->aging)
			return -ENOMEM;
	}
	return 0;
}

void monitor_pipe_destroy(struct dpflow_pipe *pipe)
{
	dpflow_meters_destroy(pipe->meters);
	dpflow_aging_destroy(pipe->aging);
	pipe->meters = NULL;
	pipe->aging = NULL;
}

int monitor_entry_check(const struct dpflow_entry *e, struct dpflow_error *err)
{
	const struct dpflow_pipe *pipe = e->pipe;
	const struct dpflow_entry_cfg *c = &e->cfg;
	struct dpflow_meter_params p;

	if (c->meter.alg && !pipe->meters)
		return dpflow_error_set(err, EINVAL, "meter",
					"pipe '%s' has no meter per entry "
					"(monitor.meter) for the entry's "
					"meter",
					pipe->name);
	if (monitor_meter_params(&c->meter, &p, err))
		return -EINVAL;
	if (c->shared_counter > pipe->ctx->n_shared_counters)
		return dpflow_error_set(err, EINVAL, "shared_counter",
					"shared counter %u, the context has "
					"%u",
					c->shared_counter,
					pipe->ctx->n_shared_counters);
	if (c->aging_ms && !pipe->aging)
		return dpflow_error_set(err, EINVAL, "aging",
					"pipe '%s' has no aging "
					"(monitor.aging_ms) for the entry's "
					"timeout",
					pipe->name);
	return 0;
}

void monitor_entry_publish(struct dpflow_entry *e, uint64_t now_ns)
{
	struct dpflow_pipe *pipe = e->pipe;
	const struct dpflow_monitor *mon = &pipe->cfg.monitor;
	struct entry_dp *dp = &pipe->dp[e->index];
	struct dpflow_meter_params p;

	dp->meter = 0;
	dp->meter_shared = 0;
	if (pipe->meters) {
		monitor_meter_params(
		    e->cfg.meter.alg ? &e->cfg.meter : &mon->meter, &p, NULL);
		dpflow_meter_config(pipe->meters, e->index, &p, now_ns, NULL);
		dp->meter = e->index + 1;
	} else if (mon->shared_meter) {
		dp->meter = mon->shared_meter;
		dp->meter_shared = 1;
	}
	dp->shared_counter =
	    e->cfg.shared_counter ? e->cfg.shared_counter : mon->shared_counter;
	if (dp->shared_counter) {
		pipe->dp_used = true;
		pipe->monitored = true;
	}
	if (pipe->aging)
		dpflow_aging_arm(pipe->aging, e->index,
				 e->cfg.aging_ms ? e->cfg.aging_ms
						 : mon->aging_ms,
				 now_ns, NULL);
}

void monitor_entry_retire(struct dpflow_entry *e)
{
	if (e->pipe->aging)
		dpflow_aging_disarm(e->pipe->aging, e->index, NULL);
}

struct age_walk {
	struct dpflow_pipe *pipe;
	dpflow_aged_cb cb;
	void *arg;
	uint32_t n;
};

static void aged_one(uint32_t idx, uint64_t last_hit_ns, void *arg)
{
	struct age_walk *w = arg;
	struct dpflow_entry *e = &w->pipe->entries[idx];

	if (e->state == ENTRY_REMOVING) {
		/* queued for removal (or update): not reported, but the scan
		 * disarmed its slot, so arm it again as it was; should the
		 * batch fail, the entry still ages (a removal disarms it) */
		dpflow_aging_arm(w->pipe->aging, idx,
				 e->cfg.aging_ms
				     ? e->cfg.aging_ms
				     : w->pipe->cfg.monitor.aging_ms,
				 last_hit_ns, NULL);
		return;
	}
	if (e->state != ENTRY_ACTIVE)
		return;
	w->n++;
	if (w->cb)
		w->cb(e, last_hit_ns, w->arg);
}

uint32_t dpflow_pipe_age(struct dpflow_pipe *pipe, uint64_t now_ns,
			 uint32_t budget, dpflow_aged_cb cb, void *arg)
{
	struct age_walk w = {.pipe = pipe, .cb = cb, .arg = arg};

	if (pipe->cfg.type == DPFLOW_PIPE_CT)
		return dpflow_ct_age(pipe->images[0], now_ns,
				     budget ? &pipe->aging_cursor : NULL,
				     budget, NULL, NULL);
	if (!pipe->aging)
		return 0;
	dpflow_aging_scan(pipe->aging, now_ns,
			  budget ? &pipe->aging_cursor : NULL, budget, aged_one,
			  &w);
	return w.n;
}

int dpflow_shared_meter_config(struct dpflow_ctx *ctx, uint32_t id,
			       const struct dpflow_meter_cfg *cfg,
			       struct dpflow_error *err)
{
	struct dpflow_meter_params p;

	if (id == 0 || id > ctx->n_shared_meters)
		return dpflow_error_set(err, EINVAL, "shared_meter",
					"shared meter %u, the context has %u",
					id, ctx->n_shared_meters);
	if (monitor_meter_params(cfg, &p, err))
		return -EINVAL;
	return dpflow_meter_config(ctx->shared_meters, id - 1, &p,
				   dpflow_clock_ns(), err);
}

int dpflow_shared_counter_read(const struct dpflow_ctx *ctx, uint32_t id,
			       struct dpflow_counter *c)
{
	if (id == 0 || id > ctx->n_shared_counters)
		return -EINVAL;
	return dpflow_counters_read(ctx->shared_counters, id - 1, &c->pkts,
				    &c->bytes, NULL);
}

uint32_t dpflow_ctx_shared_counters(const struct dpflow_ctx *ctx)
{
	return ctx->n_shared_counters;
}
