/*
 * The balancer's control requests, metrics and health checks, for the
 * control thread of the run (docs/apps/l4lb.md): the app's request,
 * metrics and tick ops (lb_app.c), usable directly as a
 * dpflow_ctl_hooks.request and a dpflow_metrics_app() render.
 */
#ifndef DPFLOW_L4LB_CTL_H
#define DPFLOW_L4LB_CTL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "l4lb/l4lb.h"

/* The balancer's control requests are named "l4lb.<command>". */
#define L4LB_CTL_PREFIX "l4lb."

/*
 * The control socket's application hook (dpflow_ctl_hooks.request):
 * @arg is the balancer. Serves the "l4lb.*" commands, and answers any
 * other name under L4LB_CTL_PREFIX with an error listing them; NULL for
 * names outside it.
 */
char *l4lb_ctl_request(void *arg, const char *cmd, const char *req, size_t len);

/*
 * The balancer's Prometheus metrics (dpflow_metrics_app()'s render; @arg
 * is the balancer): per service and direction packets and bytes, new and
 * untracked flows; per backend packets, bytes, new flows, health, weight
 * and Maglev slots; the connection table's capacity and events; drops by
 * reason. Control thread.
 */
void l4lb_metrics_render(void *arg, FILE *f);

/*
 * Health checks: start the checks that are due, finish those that
 * completed or timed out, and take backends down after `fall` failures
 * in a row or back up after `rise` successes (a commit when one
 * changed). Call often (every millisecond or so) from the control
 * thread with dpflow_clock_mono_ns() time; it never blocks.
 */
void l4lb_health_tick(struct l4lb *lb, uint64_t now_ns);

#endif /* DPFLOW_L4LB_CTL_H */
