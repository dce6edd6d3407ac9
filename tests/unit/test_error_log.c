/*
 * Error and log tests: dpflow_error_set formatting, truncation and NULL
 * handling; drop reason names; log level parsing and filtering through a
 * custom sink; the default stderr format; the rate limiter, alone, through
 * DPFLOW_LOG_RL, and from two threads.
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "dpflow/error.h"
#include "dpflow/log.h"
#include "dpflow/meta.h"

static void sleep_ms(long ms)
{
	struct timespec req = {ms / 1000, (ms % 1000) * 1000000};

	while (nanosleep(&req, &req) != 0)
		;
}

/* ---- errors ---- */

Test(error, set_formats_and_returns_negative)
{
	struct dpflow_error err = {0};
	int rc = dpflow_error_set(&err, EINVAL, "size",
				  "ring size %u is not a power of two", 100u);

	cr_assert_eq(rc, -EINVAL);
	cr_assert_eq(err.code, EINVAL);
	cr_assert_str_eq(err.field, "size");
	cr_assert_str_eq(err.msg, "ring size 100 is not a power of two");
}

Test(error, negative_code_normalised)
{
	struct dpflow_error err = {0};

	cr_assert_eq(dpflow_error_set(&err, -ENOMEM, NULL, "no memory"),
		     -ENOMEM);
	cr_assert_eq(err.code, ENOMEM);
	cr_assert_null(err.field);
}

Test(error, long_message_truncated)
{
	struct dpflow_error err;
	char big[1000];

	memset(&err, 'z', sizeof(err));
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	cr_assert_eq(dpflow_error_set(&err, E2BIG, "name", "%s!", big), -E2BIG);
	cr_assert_eq(strlen(err.msg), DPFLOW_ERROR_MSG_MAX - 1);
	cr_assert_eq(err.msg[DPFLOW_ERROR_MSG_MAX - 2], 'a');
	cr_assert_eq(err.msg[0], 'a');
}

Test(error, null_handling)
{
	struct dpflow_error err;

	cr_assert_eq(dpflow_error_set(NULL, EBUSY, "x", "busy %d", 1), -EBUSY);
	dpflow_error_clear(NULL);

	dpflow_error_set(&err, EIO, "port", "read failed");
	dpflow_error_clear(&err);
	cr_assert_eq(err.code, 0);
	cr_assert_null(err.field);
	cr_assert_str_eq(err.msg, "");
}

Test(error, overwrite_replaces_previous)
{
	struct dpflow_error err = {0};

	dpflow_error_set(&err, EIO, "a", "first message, rather long");
	dpflow_error_set(&err, EPERM, "b", "second");
	cr_assert_eq(err.code, EPERM);
	cr_assert_str_eq(err.field, "b");
	cr_assert_str_eq(err.msg, "second");
}

Test(drop, names_from_xmacro)
{
	cr_assert_str_eq(dpflow_drop_name(DPFLOW_DROP_NONE), "none");
	cr_assert_str_eq(dpflow_drop_name(DPFLOW_DROP_IPV4_BAD_IHL),
			 "ipv4_bad_ihl");
	cr_assert_str_eq(dpflow_drop_name(DPFLOW_DROP_PORT_TX_FULL),
			 "port_tx_full");
	cr_assert_str_eq(dpflow_drop_name(DPFLOW_DROP__COUNT), "unknown");
	cr_assert_str_eq(dpflow_drop_name(~0u), "unknown");
	for (unsigned i = 0; i < DPFLOW_DROP__COUNT; i++) {
		cr_assert_not_null(dpflow_drop_name(i));
		cr_assert_str_neq(dpflow_drop_name(i), "unknown", "%u", i);
		for (unsigned j = 0; j < i; j++)
			cr_assert_str_neq(dpflow_drop_name(i),
					  dpflow_drop_name(j));
	}
}

/* ---- logging ---- */

struct capture {
	unsigned n;
	enum dpflow_log_level level[32];
	char module[32][32];
	char msg[32][2048];
};

static struct capture cap;

static void capture_sink(enum dpflow_log_level level, const char *module,
			 const char *msg, void *arg)
{
	struct capture *c = arg;

	if (c->n < 32) {
		c->level[c->n] = level;
		snprintf(c->module[c->n], sizeof(c->module[0]), "%s", module);
		snprintf(c->msg[c->n], sizeof(c->msg[0]), "%s", msg);
	}
	c->n++;
}

static void capture_on(void)
{
	memset(&cap, 0, sizeof(cap));
	dpflow_log_set_sink(capture_sink, &cap);
}

Test(log, level_parse)
{
	static const struct {
		const char *name;
		enum dpflow_log_level level;
	} ok[] = {
	    {"err", DPFLOW_LOG_ERR},	 {"warn", DPFLOW_LOG_WARN},
	    {"info", DPFLOW_LOG_INFO},	 {"debug", DPFLOW_LOG_DEBUG},
	    {"DEBUG", DPFLOW_LOG_DEBUG},
	};
	enum dpflow_log_level level = DPFLOW_LOG_INFO;

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		cr_assert_eq(dpflow_log_level_parse(ok[i].name, &level), 0,
			     "%s", ok[i].name);
		cr_assert_eq(level, ok[i].level, "%s", ok[i].name);
	}
	level = DPFLOW_LOG_WARN;
	cr_assert_eq(dpflow_log_level_parse("verbose", &level), -EINVAL);
	cr_assert_eq(dpflow_log_level_parse("", &level), -EINVAL);
	cr_assert_eq(dpflow_log_level_parse("inf", &level), -EINVAL);
	cr_assert_eq(dpflow_log_level_parse(NULL, &level), -EINVAL);
	cr_assert_eq(dpflow_log_level_parse("err", NULL), -EINVAL);
	cr_assert_eq(level, DPFLOW_LOG_WARN, "failed parse changed level");
}

Test(log, default_level_is_info)
{
	cr_assert_eq(dpflow_log_get_level(), DPFLOW_LOG_INFO);
	capture_on();
	DPFLOW_LOG_INFO("t", "shown");
	DPFLOW_LOG_DEBUG("t", "hidden");
	cr_assert_eq(cap.n, 1);
	cr_assert_str_eq(cap.msg[0], "shown");
}

Test(log, sink_receives_level_module_message)
{
	capture_on();
	dpflow_log(DPFLOW_LOG_WARN, "ring", "size %u of %s", 42u, "r0");
	cr_assert_eq(cap.n, 1);
	cr_assert_eq(cap.level[0], DPFLOW_LOG_WARN);
	cr_assert_str_eq(cap.module[0], "ring");
	cr_assert_str_eq(cap.msg[0], "size 42 of r0");
	dpflow_log(DPFLOW_LOG_ERR, NULL, "no module");
	cr_assert_eq(cap.n, 2);
	cr_assert_str_eq(cap.module[1], "dpflow");
}

Test(log, level_filter)
{
	capture_on();
	dpflow_log_set_level(DPFLOW_LOG_WARN);
	cr_assert_eq(dpflow_log_get_level(), DPFLOW_LOG_WARN);
	DPFLOW_LOG_ERR("m", "e");
	DPFLOW_LOG_WARN("m", "w");
	DPFLOW_LOG_INFO("m", "i");
	DPFLOW_LOG_DEBUG("m", "d");
	cr_assert_eq(cap.n, 2);
	cr_assert_str_eq(cap.msg[0], "e");
	cr_assert_str_eq(cap.msg[1], "w");

	dpflow_log_set_level(DPFLOW_LOG_DEBUG);
	DPFLOW_LOG_DEBUG("m", "d");
	cr_assert_eq(cap.n, 3);
	cr_assert_eq(cap.level[2], DPFLOW_LOG_DEBUG);

	dpflow_log_set_level(DPFLOW_LOG_ERR);
	DPFLOW_LOG_WARN("m", "w");
	cr_assert_eq(cap.n, 3);
	/* A level beyond DEBUG is never emitted. */
	dpflow_log_set_level(DPFLOW_LOG_DEBUG);
	dpflow_log((enum dpflow_log_level)7, "m", "bogus");
	cr_assert_eq(cap.n, 3);
}

Test(log, long_message_truncated)
{
	char big[4096];

	memset(big, 'q', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	capture_on();
	DPFLOW_LOG_ERR("m", "%s", big);
	cr_assert_eq(cap.n, 1);
	cr_assert_gt(strlen(cap.msg[0]), 100);
	cr_assert_lt(strlen(cap.msg[0]), sizeof(big) - 1);
	cr_assert_eq(cap.msg[0][0], 'q');
}

Test(log, null_sink_restores_stderr, .init = cr_redirect_stderr)
{
	capture_on();
	DPFLOW_LOG_INFO("m", "to sink");
	dpflow_log_set_sink(NULL, &cap);
	DPFLOW_LOG_INFO("m", "to stderr");
	cr_assert_eq(cap.n, 1);
	fflush(stderr);
	cr_assert_stderr_eq_str("dpflow[info] m: to stderr\n");
}

Test(log, default_sink_format, .init = cr_redirect_stderr)
{
	dpflow_log_set_level(DPFLOW_LOG_DEBUG);
	DPFLOW_LOG_ERR("pool", "no room for %d", 7);
	DPFLOW_LOG_WARN("port", "link down");
	DPFLOW_LOG_DEBUG("ring", "x");
	fflush(stderr);
	cr_assert_stderr_eq_str("dpflow[err] pool: no room for 7\n"
				"dpflow[warn] port: link down\n"
				"dpflow[debug] ring: x\n");
}

/* ---- rate limiter ---- */

#define RL_INTERVAL_NS 200000000ull /* 200 ms: room for a slow sanitizer */

Test(ratelimit, burst_then_suppress_then_report)
{
	struct dpflow_log_ratelimit rl = {0};
	uint32_t sup = 99;

	for (int i = 0; i < 3; i++) {
		cr_assert(
		    dpflow_log_ratelimit_allow(&rl, 3, RL_INTERVAL_NS, &sup),
		    "message %d of the burst refused", i);
		cr_assert_eq(sup, 0);
	}
	for (int i = 0; i < 5; i++)
		cr_assert_not(
		    dpflow_log_ratelimit_allow(&rl, 3, RL_INTERVAL_NS, &sup),
		    "message %d past the burst allowed", i);
	sleep_ms(RL_INTERVAL_NS / 1000000 + 20);
	cr_assert(dpflow_log_ratelimit_allow(&rl, 3, RL_INTERVAL_NS, &sup));
	cr_assert_eq(sup, 5, "reported %u suppressed", sup);
	/* Reported once: the next message in the window reports nothing. */
	cr_assert(dpflow_log_ratelimit_allow(&rl, 3, RL_INTERVAL_NS, &sup));
	cr_assert_eq(sup, 0);
	/* NULL out-pointer is fine. */
	cr_assert(dpflow_log_ratelimit_allow(&rl, 3, RL_INTERVAL_NS, NULL));
	cr_assert_not(dpflow_log_ratelimit_allow(&rl, 3, RL_INTERVAL_NS, NULL));
}

Test(ratelimit, burst_zero_never_allows)
{
	struct dpflow_log_ratelimit rl = {0};

	for (int i = 0; i < 10; i++)
		cr_assert_not(dpflow_log_ratelimit_allow(&rl, 0, 1000, NULL));
}

static void emit_rl(int i)
{
	DPFLOW_LOG_RL(DPFLOW_LOG_WARN, "rl", 2, RL_INTERVAL_NS / 1000000,
		      "event %d", i);
}

Test(ratelimit, macro_reports_suppressed_count)
{
	capture_on();
	for (int i = 0; i < 10; i++)
		emit_rl(i);
	cr_assert_eq(cap.n, 2);
	cr_assert_str_eq(cap.msg[0], "event 0");
	cr_assert_str_eq(cap.msg[1], "event 1");
	sleep_ms(RL_INTERVAL_NS / 1000000 + 20);
	emit_rl(10);
	cr_assert_eq(cap.n, 4);
	cr_assert_str_eq(cap.msg[2], "8 messages suppressed");
	cr_assert_eq(cap.level[2], DPFLOW_LOG_WARN);
	cr_assert_str_eq(cap.msg[3], "event 10");
}

#define RL_THREAD_CALLS 20000
#define RL_BURST	50

struct rl_thread {
	struct dpflow_log_ratelimit *rl;
	unsigned allowed;
};

static void *rl_worker(void *arg)
{
	struct rl_thread *t = arg;

	for (int i = 0; i < RL_THREAD_CALLS; i++)
		t->allowed += dpflow_log_ratelimit_allow(
		    t->rl, RL_BURST, 3600ull * 1000000000u, NULL);
	return NULL;
}

/* One long window shared by two threads: burst allowed, the rest counted. */
Test(ratelimit, two_threads_one_window)
{
	struct dpflow_log_ratelimit rl = {0};
	struct rl_thread t[2] = {{&rl, 0}, {&rl, 0}};
	pthread_t th[2];
	unsigned allowed;

	for (int i = 0; i < 2; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, rl_worker, &t[i]), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	allowed = t[0].allowed + t[1].allowed;
	/* Within the first window the limit is exact. */
	cr_assert_eq(allowed, RL_BURST);
	cr_assert_eq(allowed + rl.suppressed, 2 * RL_THREAD_CALLS,
		     "allowed %u + suppressed %u", allowed, rl.suppressed);
}
