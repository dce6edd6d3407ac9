/*
 * Drop reason names, generated from DPFLOW_FOREACH_DROP (meta.h) so the
 * enum and its strings cannot drift apart. Any thread.
 */
#include "dpflow/meta.h"

#define DROP_NAME_(name, str) [DPFLOW_DROP_##name] = str,
static const char *const drop_names[] = {DPFLOW_FOREACH_DROP(DROP_NAME_)};
#undef DROP_NAME_

DPFLOW_STATIC_ASSERT(DPFLOW_ARRAY_SIZE(drop_names) == DPFLOW_DROP__COUNT,
		     "one name per drop reason");

const char *dpflow_drop_name(unsigned reason)
{
	if (reason >= DPFLOW_ARRAY_SIZE(drop_names))
		return "unknown";
	return drop_names[reason];
}
