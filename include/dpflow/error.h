/*
 * Control-path errors.
 *
 * Constructors return a pointer or NULL and fill a struct dpflow_error;
 * other control calls return 0 or a negative errno and, when given one, fill
 * the error too. The message names the offending field and value. The data
 * path never uses this: it counts drops (see meta.h).
 * Any thread; an error object belongs to its caller.
 */
#ifndef DPFLOW_ERROR_H
#define DPFLOW_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

#define DPFLOW_ERROR_MSG_MAX 256

struct dpflow_error {
	int code;	   /* positive errno value, 0 when no error */
	const char *field; /* static string naming the field, or NULL */
	char msg[DPFLOW_ERROR_MSG_MAX];
};

/*
 * Record an error. @err may be NULL (the error is then only returned).
 * @code is a positive errno; @field a string with static lifetime or NULL.
 * Returns -code so callers can write `return dpflow_error_set(...)`.
 */
int dpflow_error_set(struct dpflow_error *err, int code, const char *field,
		     const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Reset @err to "no error". Accepts NULL. */
void dpflow_error_clear(struct dpflow_error *err);

#ifdef __cplusplus
}
#endif

#endif /* DPFLOW_ERROR_H */
