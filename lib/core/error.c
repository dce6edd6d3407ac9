/*
 * Control-path errors (error.h): format a message into the caller's
 * struct dpflow_error and hand back the negative errno.
 * Any thread; no shared state.
 */
#include <stdarg.h>
#include <stdio.h>

#include "dpflow/error.h"

int dpflow_error_set(struct dpflow_error *err, int code, const char *field,
		     const char *fmt, ...)
{
	va_list ap;

	/* Accept -EINVAL as well as EINVAL: callers often hold a return. */
	if (code < 0)
		code = -code;
	if (!err)
		return -code;

	err->code = code;
	err->field = field;
	err->msg[0] = '\0';
	if (fmt) {
		va_start(ap, fmt);
		/* vsnprintf truncates and always terminates. */
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
	}
	return -code;
}

void dpflow_error_clear(struct dpflow_error *err)
{
	if (!err)
		return;
	err->code = 0;
	err->field = NULL;
	err->msg[0] = '\0';
}
