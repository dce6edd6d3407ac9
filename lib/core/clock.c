/*
 * Time (clock.h): TSC calibration and tick/nanosecond conversion.
 *
 * dpflow_clock_init() measures the TSC against CLOCK_MONOTONIC_RAW over
 * about 20 ms, once (pthread_once). The conversion helpers call it lazily
 * if nobody did, so they are right even before an explicit init.
 *
 * A conversion multiplies by a factor held as mult / 2^shift, with mult a
 * 64-bit integer normalised to keep 63-64 significant bits; the product is
 * taken on 128 bits, so any 64-bit input converts without overflow, and a
 * result above 2^64 - 1 saturates.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include "dpflow/clock.h"
#include "dpflow/common.h"

#ifndef __SIZEOF_INT128__
#error "dpflow's clock needs a compiler with 128-bit integers"
#endif

#define NS_PER_SEC	1000000000ull
#define CALIBRATE_NS	20000000ull /* 20 ms */
#define CALIBRATE_TRIES 5

__extension__ typedef unsigned __int128 u128;

/* value * mult >> shift */
struct conv {
	uint64_t mult;
	unsigned shift;
};

static pthread_once_t clock_once = PTHREAD_ONCE_INIT;
static atomic_bool clock_ready;
static int clock_rc;
static uint64_t clock_hz;
static struct conv conv_to_ns;
static struct conv conv_to_tsc;

static uint64_t read_clock(clockid_t id)
{
	struct timespec ts;

	if (clock_gettime(id, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * NS_PER_SEC + (uint64_t)ts.tv_nsec;
}

uint64_t dpflow_clock_mono_ns(void)
{
	uint64_t ns = read_clock(CLOCK_MONOTONIC_RAW);

	return ns ? ns : read_clock(CLOCK_MONOTONIC);
}

uint64_t dpflow_clock_realtime_ns(void)
{
	return read_clock(CLOCK_REALTIME);
}

/*
 * The factor @num / @den as mult / 2^shift with as many significant bits
 * in mult as fit: binary long division, one quotient bit per step, so
 * nothing wider than 64 bits is needed. Requires 0 < num/den < 2^64.
 */
static struct conv conv_make(uint64_t num, uint64_t den)
{
	uint64_t q = num / den, r = num % den;
	struct conv c = {0, 0};

	while (!(q >> 63) && c.shift < 120) {
		q <<= 1;
		/* 2r >= den, written so that 2r cannot overflow */
		if (r >= den - r) {
			q |= 1;
			r -= den - r;
		} else {
			r <<= 1;
		}
		c.shift++;
	}
	c.mult = q;
	return c;
}

static inline uint64_t conv_apply(const struct conv *c, uint64_t v)
{
	u128 p = ((u128)v * c->mult) >> c->shift;

	return (p >> 64) ? UINT64_MAX : (uint64_t)p;
}

#if defined(__x86_64__) || defined(__i386__)
/*
 * Read the monotonic clock and the TSC at (nearly) the same instant: the
 * TSC is taken either side of the clock read, and the tightest of a few
 * tries is kept so that an interrupt in the middle does not skew it.
 */
static int sample(uint64_t *ns, uint64_t *tsc)
{
	uint64_t best = UINT64_MAX;

	for (int i = 0; i < CALIBRATE_TRIES; i++) {
		struct timespec ts;
		uint64_t t0 = dpflow_tsc();
		int rc = clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
		uint64_t t1 = dpflow_tsc();

		if (rc != 0)
			return -errno;
		if (t1 - t0 < best) {
			best = t1 - t0;
			*ns = (uint64_t)ts.tv_sec * NS_PER_SEC +
			      (uint64_t)ts.tv_nsec;
			*tsc = t0 + (t1 - t0) / 2;
		}
	}
	return 0;
}

static int calibrate(uint64_t *hz)
{
	struct timespec req = {0, (long)CALIBRATE_NS};
	uint64_t ns0 = 0, ns1 = 0, tsc0 = 0, tsc1 = 0;
	int rc;

	rc = sample(&ns0, &tsc0);
	if (rc)
		return rc;
	while (nanosleep(&req, &req) != 0 && errno == EINTR)
		;
	rc = sample(&ns1, &tsc1);
	if (rc)
		return rc;
	if (ns1 <= ns0 || tsc1 <= tsc0)
		return -EIO;
	*hz = (uint64_t)((u128)(tsc1 - tsc0) * NS_PER_SEC / (ns1 - ns0));
	return *hz ? 0 : -EIO;
}
#else
/* The "TSC" is CLOCK_MONOTONIC_RAW in nanoseconds (see clock.h). */
static int calibrate(uint64_t *hz)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC_RAW, &ts) != 0)
		return -errno;
	*hz = NS_PER_SEC;
	return 0;
}
#endif

static void clock_setup(void)
{
	uint64_t hz = 0;

	clock_rc = calibrate(&hz);
	/* Without a calibration, count ticks as nanoseconds. */
	if (clock_rc)
		hz = NS_PER_SEC;
	clock_hz = hz;
	conv_to_ns = conv_make(NS_PER_SEC, hz);
	conv_to_tsc = conv_make(hz, NS_PER_SEC);
	atomic_store_explicit(&clock_ready, true, memory_order_release);
}

int dpflow_clock_init(void)
{
	pthread_once(&clock_once, clock_setup);
	return clock_rc;
}

static inline void ensure_init(void)
{
	if (DPFLOW_UNLIKELY(
		!atomic_load_explicit(&clock_ready, memory_order_acquire)))
		dpflow_clock_init();
}

uint64_t dpflow_tsc_hz(void)
{
	ensure_init();
	return clock_hz;
}

uint64_t dpflow_tsc_to_ns(uint64_t ticks)
{
	ensure_init();
	return conv_apply(&conv_to_ns, ticks);
}

uint64_t dpflow_ns_to_tsc(uint64_t ns)
{
	ensure_init();
	return conv_apply(&conv_to_tsc, ns);
}

uint64_t dpflow_clock_ns(void)
{
	/* Calibrate first, or the first reading is 20 ms stale. */
	ensure_init();
	return conv_apply(&conv_to_ns, dpflow_tsc());
}
