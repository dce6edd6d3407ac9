/*
 * Option values the dpflow subcommands share the parsing of.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>

#include "cmds.h"

int opt_count(const char *cmd, const char *name, const char *text,
	      unsigned long lo, unsigned long hi, unsigned long *out)
{
	char *end;

	*out = strtoul(text, &end, 10);
	if (!isdigit((unsigned char)*text) || *end || *out < lo || *out > hi) {
		fprintf(stderr, "dpflow %s: --%s '%s': expected %lu..%lu\n",
			cmd, name, text, lo, hi);
		return -1;
	}
	return 0;
}
