/*
 * The balancer's configuration: the `apps: {l4lb: ...}` section of a
 * dpflow YAML config (docs/apps/l4lb.md), and its service and backend
 * mappings, which the control requests take too. Control thread only.
 */
#ifndef DPFLOW_L4LB_CONFIG_H
#define DPFLOW_L4LB_CONFIG_H

#include <stdbool.h>

#include "l4lb/l4lb.h"

struct ydoc;
struct ynode;

/*
 * The balancer that config file @path describes for @ctx (whose ports it
 * names), services committed. NULL with err->code 0 when the file has no
 * `apps.l4lb` section; NULL + @err ("FILE:LINE: KEY: what is wrong") on
 * error. @shared: several data threads will run it.
 */
struct l4lb *l4lb_config_load(struct dpflow_ctx *ctx, const char *path,
			      bool shared, struct dpflow_error *err);

/* One service mapping (without its backends) and one backend mapping. */
int l4lb_config_service(struct ydoc *d, const struct ynode *x,
			struct l4lb_service_cfg *s);
int l4lb_config_backend(struct ydoc *d, const struct ynode *x,
			struct l4lb_backend_cfg *b);

#endif /* DPFLOW_L4LB_CONFIG_H */
