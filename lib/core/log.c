/*
 * Logging (log.h): a level filter, a replaceable sink, and the per-call-site
 * rate limiter.
 *
 * The level is an atomic. The sink and its argument change together, so
 * they sit behind a mutex that is held only to copy the pair, never while
 * the sink runs.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <strings.h>

#include "dpflow/clock.h"
#include "dpflow/common.h"
#include "dpflow/log.h"

/* Longer messages are truncated. */
#define LOG_MSG_MAX 1024

static const char *const level_names[] = {
    [DPFLOW_LOG_ERR] = "err",
    [DPFLOW_LOG_WARN] = "warn",
    [DPFLOW_LOG_INFO] = "info",
    [DPFLOW_LOG_DEBUG] = "debug",
};

static atomic_int log_level = DPFLOW_LOG_INFO;
static pthread_mutex_t sink_lock = PTHREAD_MUTEX_INITIALIZER;
static dpflow_log_sink_fn sink_fn; /* NULL: stderr */
static void *sink_arg;

static void stderr_sink(enum dpflow_log_level level, const char *module,
			const char *msg, void *arg)
{
	(void)arg;
	/* One call, so stdio's stream lock keeps the line whole. */
	fprintf(stderr, "dpflow[%s] %s: %s\n", level_names[level], module, msg);
}

void dpflow_log_set_level(enum dpflow_log_level level)
{
	if ((unsigned)level > DPFLOW_LOG_DEBUG)
		level = DPFLOW_LOG_DEBUG;
	atomic_store_explicit(&log_level, (int)level, memory_order_relaxed);
}

enum dpflow_log_level dpflow_log_get_level(void)
{
	return (enum dpflow_log_level)atomic_load_explicit(
	    &log_level, memory_order_relaxed);
}

int dpflow_log_level_parse(const char *name, enum dpflow_log_level *level)
{
	if (!name || !level)
		return -EINVAL;
	for (unsigned i = 0; i < DPFLOW_ARRAY_SIZE(level_names); i++) {
		if (strcasecmp(name, level_names[i]) == 0) {
			*level = (enum dpflow_log_level)i;
			return 0;
		}
	}
	return -EINVAL;
}

void dpflow_log_set_sink(dpflow_log_sink_fn sink, void *arg)
{
	pthread_mutex_lock(&sink_lock);
	sink_fn = sink;
	sink_arg = sink ? arg : NULL;
	pthread_mutex_unlock(&sink_lock);
}

void dpflow_log(enum dpflow_log_level level, const char *module,
		const char *fmt, ...)
{
	char msg[LOG_MSG_MAX];
	dpflow_log_sink_fn fn;
	void *arg;
	va_list ap;

	/* Out-of-range levels compare above DEBUG and are dropped. */
	if ((unsigned)level >
	    (unsigned)atomic_load_explicit(&log_level, memory_order_relaxed))
		return;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);

	pthread_mutex_lock(&sink_lock);
	fn = sink_fn;
	arg = sink_arg;
	pthread_mutex_unlock(&sink_lock);

	if (!module)
		module = "dpflow";
	(fn ? fn : stderr_sink)(level, module, msg, arg);
}

/*
 * A window opens at the first call after @interval_ns has passed since the
 * last one opened (window_start_ns == 0: none yet). The thread whose CAS
 * opens it collects the suppressed count and resets the emitted count.
 * Within a window, `emitted` only grows up to @burst (a CAS loop, so it
 * cannot wrap); every call beyond counts as suppressed.
 */
bool dpflow_log_ratelimit_allow(struct dpflow_log_ratelimit *rl, uint32_t burst,
				uint64_t interval_ns, uint32_t *suppressed_out)
{
	uint64_t now = dpflow_clock_mono_ns();
	uint64_t start =
	    __atomic_load_n(&rl->window_start_ns, __ATOMIC_RELAXED);
	uint32_t emitted, sup = 0;

	if (suppressed_out)
		*suppressed_out = 0;

	if (start == 0 || now - start >= interval_ns) {
		if (__atomic_compare_exchange_n(&rl->window_start_ns, &start,
						now, false, __ATOMIC_RELAXED,
						__ATOMIC_RELAXED) &&
		    start != 0) {
			/*
			 * The first window needs no reset (zeroed state), so
			 * it is exact; a later one may let through a few
			 * more than @burst if others count before the reset.
			 */
			sup = __atomic_exchange_n(&rl->suppressed, 0,
						  __ATOMIC_RELAXED);
			__atomic_store_n(&rl->emitted, 0, __ATOMIC_RELAXED);
		}
		/* Otherwise another thread opened it: count against it. */
	}

	emitted = __atomic_load_n(&rl->emitted, __ATOMIC_RELAXED);
	do {
		if (emitted >= burst) {
			/* Not emitted: keep the collected count for later. */
			__atomic_fetch_add(&rl->suppressed, sup + 1,
					   __ATOMIC_RELAXED);
			return false;
		}
	} while (!__atomic_compare_exchange_n(
	    &rl->emitted, &emitted, emitted + 1, true, __ATOMIC_RELAXED,
	    __ATOMIC_RELAXED));
	if (suppressed_out)
		*suppressed_out = sup;
	return true;
}
