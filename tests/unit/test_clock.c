/*
 * Clock tests: calibration against clock_gettime, conversions (round trip,
 * large values, saturation), lazy and concurrent init, monotonicity.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "dpflow/clock.h"

static uint64_t mono_raw(void)
{
	struct timespec ts;

	cr_assert_eq(clock_gettime(CLOCK_MONOTONIC_RAW, &ts), 0);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(long ns)
{
	struct timespec req = {ns / 1000000000, ns % 1000000000};

	while (nanosleep(&req, &req) != 0)
		;
}

Test(clock, init_idempotent_and_sane)
{
	uint64_t hz;

	cr_assert_eq(dpflow_clock_init(), 0);
	hz = dpflow_tsc_hz();
	/* Any CPU we run on counts between 100 MHz and 10 GHz. */
	cr_assert_geq(hz, 100000000u, "hz %lu", (unsigned long)hz);
	cr_assert_leq(hz, 10000000000u, "hz %lu", (unsigned long)hz);
	cr_assert_eq(dpflow_clock_init(), 0);
	cr_assert_eq(dpflow_tsc_hz(), hz, "a second init recalibrated");
}

/* Conversions work before (and trigger) the calibration. */
Test(clock, lazy_init)
{
	uint64_t ns = dpflow_tsc_to_ns(1000000);

	cr_assert_gt(ns, 0);
	cr_assert_gt(dpflow_tsc_hz(), 0);
	cr_assert_eq(dpflow_tsc_to_ns(1000000), ns);
}

Test(clock, tsc_agrees_with_clock_gettime)
{
	uint64_t t0, t1, c0, c1, elapsed, measured;
	double err;

	cr_assert_eq(dpflow_clock_init(), 0);
	t0 = mono_raw();
	c0 = dpflow_tsc();
	sleep_ns(50000000);
	c1 = dpflow_tsc();
	t1 = mono_raw();
	elapsed = t1 - t0;
	measured = dpflow_tsc_to_ns(c1 - c0);
	err = fabs((double)measured - (double)elapsed) / (double)elapsed;
	cr_assert_lt(err, 0.01, "tsc says %lu ns, clock says %lu ns",
		     (unsigned long)measured, (unsigned long)elapsed);
}

Test(clock, clock_ns_tracks_monotonic)
{
	uint64_t a = dpflow_clock_ns(), m0 = dpflow_clock_mono_ns();
	uint64_t b, m1;

	sleep_ns(20000000);
	b = dpflow_clock_ns();
	m1 = dpflow_clock_mono_ns();
	cr_assert_gt(b, a);
	cr_assert_lt(fabs((double)(b - a) - (double)(m1 - m0)),
		     0.01 * (double)(m1 - m0) + 100000.0);
	/* Never goes backwards over many reads. */
	for (int i = 0; i < 100000; i++) {
		uint64_t c = dpflow_clock_ns();

		cr_assert_geq(c, b);
		b = c;
	}
}

Test(clock, one_second_of_ticks)
{
	uint64_t hz = dpflow_tsc_hz();

	/* hz ticks are 1e9 ns, give or take rounding. */
	cr_assert_leq(llabs((long long)dpflow_tsc_to_ns(hz) - 1000000000LL), 1);
	cr_assert_leq(
	    llabs((long long)dpflow_ns_to_tsc(1000000000u) - (long long)hz), 1);
	cr_assert_eq(dpflow_tsc_to_ns(0), 0);
	cr_assert_eq(dpflow_ns_to_tsc(0), 0);
}

Test(clock, round_trip)
{
	static const uint64_t values[] = {
	    1,
	    999,
	    123456789,
	    1000000000ull,
	    86400ull * 1000000000ull,	    /* a day */
	    365ull * 86400 * 1000000000ull, /* a year */
	    1ull << 62,
	};

	/*
	 * Each conversion rounds down, so the intermediate loses up to one
	 * of its units: up to ticks_per_ns ticks (or ns_per_tick ns) on the
	 * way back, plus one for the second rounding.
	 */
	const double ticks_per_ns = (double)dpflow_tsc_hz() / 1e9;
	const double ns_per_tick = 1.0 / ticks_per_ns;

	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		uint64_t v = values[i];
		uint64_t back = dpflow_tsc_to_ns(dpflow_ns_to_tsc(v));
		double tol = (double)v * 1e-12 + ns_per_tick + 1.0;

		cr_assert_leq(fabs((double)back - (double)v), tol,
			      "ns %llu -> %llu", (unsigned long long)v,
			      (unsigned long long)back);
		back = dpflow_ns_to_tsc(dpflow_tsc_to_ns(v));
		tol = (double)v * 1e-12 + ticks_per_ns + 1.0;
		cr_assert_leq(fabs((double)back - (double)v), tol,
			      "ticks %llu -> %llu", (unsigned long long)v,
			      (unsigned long long)back);
	}
}

/* Large inputs convert exactly as long double arithmetic says: no overflow. */
Test(clock, large_values_do_not_overflow)
{
	long double hz = (long double)dpflow_tsc_hz();
	uint64_t ticks = UINT64_MAX / 2 + 12345;
	long double want = (long double)ticks * 1e9L / hz;
	uint64_t got = dpflow_tsc_to_ns(ticks);

	cr_assert_lt(fabsl((long double)got - want) / want, 1e-12L,
		     "%llu ticks -> %llu ns, want %Lf",
		     (unsigned long long)ticks, (unsigned long long)got, want);

	/* A year of ticks: well past where ticks * 1e9 overflows 64 bits. */
	ticks = dpflow_tsc_hz() * 365ull * 86400;
	got = dpflow_tsc_to_ns(ticks);
	cr_assert_lt(fabs((double)got - 365.0 * 86400 * 1e9) / 3.1536e16, 1e-9);
}

/* A result beyond 64 bits saturates instead of wrapping. */
Test(clock, saturates)
{
	uint64_t hz = dpflow_tsc_hz();

	/* The direction that grows overflows; the other one does not. */
	if (hz > 1000000000u) {
		cr_assert_eq(dpflow_ns_to_tsc(UINT64_MAX), UINT64_MAX);
		cr_assert_lt(dpflow_tsc_to_ns(UINT64_MAX), UINT64_MAX);
	} else {
		cr_assert_eq(dpflow_tsc_to_ns(UINT64_MAX), UINT64_MAX);
		cr_assert_lt(dpflow_ns_to_tsc(UINT64_MAX), UINT64_MAX);
	}
}

static void *init_thread(void *arg)
{
	uint64_t *hz = arg;

	if (dpflow_clock_init() == 0)
		*hz = dpflow_tsc_hz();
	return NULL;
}

Test(clock, concurrent_init)
{
	pthread_t th[4];
	uint64_t hz[4] = {0};

	for (int i = 0; i < 4; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, init_thread, &hz[i]),
			     0);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	cr_assert_neq(hz[0], 0);
	for (int i = 1; i < 4; i++)
		cr_assert_eq(hz[i], hz[0], "thread %d saw %lu, thread 0 %lu", i,
			     (unsigned long)hz[i], (unsigned long)hz[0]);
}

Test(clock, realtime_is_wall_clock)
{
	uint64_t now = dpflow_clock_realtime_ns();
	uint64_t y2020 = 1577836800ull * 1000000000ull;
	struct timespec ts;

	cr_assert_gt(now, y2020);
	cr_assert_eq(clock_gettime(CLOCK_REALTIME, &ts), 0);
	cr_assert_lt(llabs((long long)((uint64_t)ts.tv_sec * 1000000000u +
				       (uint64_t)ts.tv_nsec - now)),
		     1000000000LL);
}
