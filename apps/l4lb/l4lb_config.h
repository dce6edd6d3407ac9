/*
 * The balancer's configuration: the `apps: {l4lb: ...}` section of a
 * dpflow config (docs/apps/l4lb.md), and its service and backend
 * mappings, which the control requests take too. Read through config
 * nodes (dpflow/config_node.h). Control thread only.
 */
#ifndef DPFLOW_L4LB_CONFIG_H
#define DPFLOW_L4LB_CONFIG_H

#include <stdbool.h>

#include "dpflow/config_node.h"

#include "l4lb/l4lb.h"

/*
 * The balancer that section @x (apps.l4lb of a config) describes for
 * @ctx (whose ports it names), services committed. NULL + @err
 * ("FILE:LINE: apps.l4lb.KEY: what is wrong") on error. @shared: several
 * data threads will run it.
 */
struct l4lb *l4lb_config_load(struct dpflow_ctx *ctx,
			      const struct dpflow_cfg_node *x, bool shared,
			      struct dpflow_error *err);

/* One service mapping (without its backends) and one backend mapping:
 * 0, or -EINVAL with the error in @x's document. */
int l4lb_config_service(const struct dpflow_cfg_node *x,
			struct l4lb_service_cfg *s);
int l4lb_config_backend(const struct dpflow_cfg_node *x,
			struct l4lb_backend_cfg *b);

#endif /* DPFLOW_L4LB_CONFIG_H */
