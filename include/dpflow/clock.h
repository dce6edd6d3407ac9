/*
 * Time: a TSC read in a few cycles, calibrated once against
 * CLOCK_MONOTONIC_RAW so that TSC ticks convert to nanoseconds.
 *
 * dpflow_clock_init() runs the calibration (about 20 ms) and is idempotent
 * and thread-safe; every other call may be made from any thread after it.
 * On CPUs without an invariant TSC (non-x86), the "TSC" is the monotonic
 * clock in nanoseconds and the frequency is 1 GHz.
 */
#ifndef DPFLOW_CLOCK_H
#define DPFLOW_CLOCK_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Calibrate. Returns 0, or a negative errno if no clock could be read. */
int dpflow_clock_init(void);

/* Raw timestamp counter. */
static inline uint64_t dpflow_tsc(void)
{
#if defined(__x86_64__) || defined(__i386__)
	uint32_t lo, hi;
	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return ((uint64_t)hi << 32) | lo;
#else
	extern uint64_t dpflow_clock_mono_ns(void);
	return dpflow_clock_mono_ns();
#endif
}

/* Counter ticks per second (after dpflow_clock_init). */
uint64_t dpflow_tsc_hz(void);

/* Conversions between ticks and nanoseconds. */
uint64_t dpflow_tsc_to_ns(uint64_t ticks);
uint64_t dpflow_ns_to_tsc(uint64_t ns);

/* Nanoseconds on the TSC time base (monotonic, arbitrary epoch). */
uint64_t dpflow_clock_ns(void);

/* CLOCK_MONOTONIC_RAW in nanoseconds (a system call; control path). */
uint64_t dpflow_clock_mono_ns(void);

/* CLOCK_REALTIME in nanoseconds since the Unix epoch (for timestamps). */
uint64_t dpflow_clock_realtime_ns(void);

#ifdef __cplusplus
}
#endif

#endif /* DPFLOW_CLOCK_H */
