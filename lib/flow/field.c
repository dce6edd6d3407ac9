/*
 * The match-field registry (field.h): names and widths from one X-macro.
 * Any thread.
 */
#include <string.h>

#include "dpflow/field.h"

#include "flow/field_impl.h"

static const char *const field_names[] = {
#define FIELD_NAME_(id, name, bits) [DPFLOW_FIELD_##id] = name,
    DPFLOW_FOREACH_FIELD(FIELD_NAME_)
#undef FIELD_NAME_
};

DPFLOW_STATIC_ASSERT(DPFLOW_ARRAY_SIZE(field_names) == DPFLOW_FIELD__COUNT,
		     "one name per field");

const char *dpflow_field_name(unsigned field)
{
	return field < DPFLOW_FIELD__COUNT ? field_names[field] : NULL;
}

unsigned dpflow_field_bits(unsigned field)
{
	return dpflow_field_width(field);
}

unsigned dpflow_field_bytes(unsigned field)
{
	return (dpflow_field_width(field) + 7) / 8;
}

int dpflow_field_lookup(const char *name)
{
	for (unsigned f = 0; name && f < DPFLOW_FIELD__COUNT; f++)
		if (!strcmp(field_names[f], name))
			return (int)f;
	return -1;
}
