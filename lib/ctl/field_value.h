/*
 * Parsing of match-field values from config text (field_value.c).
 */
#ifndef DPFLOW_CTL_FIELD_VALUE_H
#define DPFLOW_CTL_FIELD_VALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dpflow/field.h"

struct field_value {
	uint8_t value[16]; /* big-endian, the field's bytes */
	uint8_t mask[16];  /* all ones unless a mask or prefix was given */
	int prefix_len;	   /* addresses: the /len given, else -1 */
	bool has_mask;	   /* value/mask given */
	bool is_range;	   /* LO-HI given: lo, hi */
	uint32_t lo, hi;
};

/*
 * Parse @text as a value of @field. Returns 0, or -EINVAL with a reason in
 * @why.
 */
int field_value_parse(unsigned field, const char *text, struct field_value *fv,
		      char *why, size_t why_len);

/* IPv4 or IPv6 address fields. */
bool dpflow_field_is_addr(unsigned field);

#endif /* DPFLOW_CTL_FIELD_VALUE_H */
