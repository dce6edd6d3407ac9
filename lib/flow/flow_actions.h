/*
 * Actions of the flow engine's CPU data path (actions.c): run an entry's
 * action template on one packet.
 */
#ifndef DPFLOW_FLOW_ACTIONS_H
#define DPFLOW_FLOW_ACTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "flow/flow_internal.h"

/*
 * Apply the actions of entry @entry of @pipe (its plan: walk_actions()) to
 * packet @idx, making its mirror copies. Returns 0, or the drop reason
 * when an action could not be applied (the packet is then dropped by the
 * caller).
 */
unsigned flow_actions_apply(struct dpflow_ctx *ctx,
			    const struct dpflow_pipe *pipe, uint32_t entry,
			    uint32_t idx);

/* Whether the CPU target implements action @a (checked at pipe creation). */
bool flow_action_supported(const struct dpflow_action *a);

/* Build what the pipe's actions need (encapsulation templates); undone by
 * flow_actions_release(). Control thread. */
int flow_actions_prepare(struct dpflow_pipe *pipe, struct dpflow_error *err);
void flow_actions_release(struct dpflow_pipe *pipe);

/* Build the edit template of encapsulation @e into *@out (malloc'd). */
int flow_encap_build(const struct dpflow_encap *e,
		     struct dpflow_edit_encap **out, struct dpflow_error *err);

#endif /* DPFLOW_FLOW_ACTIONS_H */
