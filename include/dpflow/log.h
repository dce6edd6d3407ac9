/*
 * Levelled, rate-limited logging.
 *
 * Control threads log freely. The data path does not log; where it must
 * (a port that fails), it uses DPFLOW_LOG_RL, which lets at most `burst`
 * messages through per interval per call site and counts the rest.
 * All functions are thread-safe; the sink is called with no lock held by
 * dpflow, so a sink must be thread-safe itself.
 */
#ifndef DPFLOW_LOG_H
#define DPFLOW_LOG_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum dpflow_log_level {
	DPFLOW_LOG_ERR = 0,
	DPFLOW_LOG_WARN,
	DPFLOW_LOG_INFO,
	DPFLOW_LOG_DEBUG,
};

/* Called with the formatted message (no trailing newline). */
typedef void (*dpflow_log_sink_fn)(enum dpflow_log_level level,
				   const char *module, const char *msg,
				   void *arg);

/* Messages above @level are discarded. Default DPFLOW_LOG_INFO. */
void dpflow_log_set_level(enum dpflow_log_level level);
enum dpflow_log_level dpflow_log_get_level(void);

/* Parse "err", "warn", "info", "debug". Returns 0 or -EINVAL. */
int dpflow_log_level_parse(const char *name, enum dpflow_log_level *level);

/* Route messages to @sink (NULL restores the default: stderr). */
void dpflow_log_set_sink(dpflow_log_sink_fn sink, void *arg);

void dpflow_log(enum dpflow_log_level level, const char *module,
		const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/*
 * Per-call-site rate limiter state. Zero-initialised is valid.
 * Fields are updated with relaxed atomics: limits are approximate under
 * concurrency but never race.
 */
struct dpflow_log_ratelimit {
	uint64_t window_start_ns;
	uint32_t emitted;
	uint32_t suppressed;
};

/*
 * True when a message may be emitted now: at most @burst per @interval_ns.
 * When a new window opens after suppressed messages, *@suppressed_out (if
 * not NULL) receives how many were suppressed in the previous window.
 */
bool dpflow_log_ratelimit_allow(struct dpflow_log_ratelimit *rl, uint32_t burst,
				uint64_t interval_ns, uint32_t *suppressed_out);

#define DPFLOW_LOG_ERR(mod, ...)  dpflow_log(DPFLOW_LOG_ERR, mod, __VA_ARGS__)
#define DPFLOW_LOG_WARN(mod, ...) dpflow_log(DPFLOW_LOG_WARN, mod, __VA_ARGS__)
#define DPFLOW_LOG_INFO(mod, ...) dpflow_log(DPFLOW_LOG_INFO, mod, __VA_ARGS__)
#define DPFLOW_LOG_DEBUG(mod, ...) \
	dpflow_log(DPFLOW_LOG_DEBUG, mod, __VA_ARGS__)

/* Rate-limited log: at most @burst messages per @interval_ms here. */
#define DPFLOW_LOG_RL(level, mod, burst, interval_ms, ...)                    \
	do {                                                                  \
		static struct dpflow_log_ratelimit dpflow_rl_;                \
		uint32_t dpflow_rl_sup_ = 0;                                  \
		if (dpflow_log_ratelimit_allow(                               \
			&dpflow_rl_, (burst),                                 \
			(uint64_t)(interval_ms)*1000000u, &dpflow_rl_sup_)) { \
			if (dpflow_rl_sup_)                                   \
				dpflow_log(level, mod,                        \
					   "%u messages suppressed",          \
					   dpflow_rl_sup_);                   \
			dpflow_log(level, mod, __VA_ARGS__);                  \
		}                                                             \
	} while (0)

#ifdef __cplusplus
}
#endif

#endif /* DPFLOW_LOG_H */
