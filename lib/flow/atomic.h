/*
 * dpflow's atomic wrappers: the only way data-path-written tables
 * (counters, meters, aging, connection tracking) change their slots
 * (DESIGN.md §1).
 *
 * One set of names, three implementations chosen at compile time:
 *  - C compilers: C11 <stdatomic.h> on the plain uint32_t / uint64_t words
 *    of a table image (cast to _Atomic; same size and alignment on every
 *    target dpflow supports, checked below);
 *  - nvcc, device pass (__CUDA_ARCH__): CUDA atomics (atomicAdd, atomicCAS,
 *    atomicExch) with volatile accesses and __threadfence() for ordering, at
 *    device (GPU) scope: a table image in device memory is shared by the
 *    kernels of one GPU, not with the CPU while they run;
 *  - nvcc, host pass: the GCC __atomic builtins (the host compiler is C++).
 *
 * Orderings: load/store/add/xchg without a suffix are relaxed; _acq loads
 * and _rel stores are acquire / release; CAS is acq_rel on success and
 * acquire on failure, and on failure writes the value it found to
 * *@expected. Any thread (or GPU thread) may call any of them; words must
 * be naturally aligned.
 */
#ifndef DPFLOW_FLOW_ATOMIC_H
#define DPFLOW_FLOW_ATOMIC_H

#include "dpflow/common.h"

#if !defined(__CUDACC__)
#include <stdatomic.h>
#include <stdbool.h>

DPFLOW_STATIC_ASSERT(sizeof(_Atomic uint32_t) == sizeof(uint32_t) &&
			 _Alignof(_Atomic uint32_t) == _Alignof(uint32_t),
		     "_Atomic uint32_t is a plain uint32_t");
DPFLOW_STATIC_ASSERT(sizeof(_Atomic uint64_t) == sizeof(uint64_t) &&
			 _Alignof(_Atomic uint64_t) == _Alignof(uint64_t),
		     "_Atomic uint64_t is a plain uint64_t");
DPFLOW_STATIC_ASSERT(ATOMIC_LLONG_LOCK_FREE == 2, "64-bit atomics lock-free");

#define DPFLOW_A32(p)  ((_Atomic uint32_t *)(p))
#define DPFLOW_A64(p)  ((_Atomic uint64_t *)(p))
#define DPFLOW_CA32(p) ((const _Atomic uint32_t *)(p))
#define DPFLOW_CA64(p) ((const _Atomic uint64_t *)(p))
#define DPFLOW_MO_RLX  memory_order_relaxed
#define DPFLOW_MO_ACQ  memory_order_acquire
#define DPFLOW_MO_REL  memory_order_release
#define DPFLOW_MO_AR   memory_order_acq_rel
#endif

/* Hint to the core (or the GPU scheduler) that this thread spins. */
DPF_HD static inline void dpflow_cpu_relax(void)
{
#if defined(__CUDA_ARCH__)
	__nanosleep(32);
#elif defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ volatile("yield" ::: "memory");
#endif
}

/* ---- 32-bit -------------------------------------------------------------- */

DPF_HD static inline uint32_t dpflow_atomic_load32(const uint32_t *p)
{
#if defined(__CUDA_ARCH__)
	return *(const volatile uint32_t *)p;
#elif defined(__CUDACC__)
	return __atomic_load_n(p, __ATOMIC_RELAXED);
#else
	return atomic_load_explicit(DPFLOW_CA32(p), DPFLOW_MO_RLX);
#endif
}

DPF_HD static inline uint32_t dpflow_atomic_load32_acq(const uint32_t *p)
{
#if defined(__CUDA_ARCH__)
	uint32_t v = *(const volatile uint32_t *)p;

	__threadfence();
	return v;
#elif defined(__CUDACC__)
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#else
	return atomic_load_explicit(DPFLOW_CA32(p), DPFLOW_MO_ACQ);
#endif
}

DPF_HD static inline void dpflow_atomic_store32(uint32_t *p, uint32_t v)
{
#if defined(__CUDA_ARCH__)
	*(volatile uint32_t *)p = v;
#elif defined(__CUDACC__)
	__atomic_store_n(p, v, __ATOMIC_RELAXED);
#else
	atomic_store_explicit(DPFLOW_A32(p), v, DPFLOW_MO_RLX);
#endif
}

DPF_HD static inline void dpflow_atomic_store32_rel(uint32_t *p, uint32_t v)
{
#if defined(__CUDA_ARCH__)
	__threadfence();
	*(volatile uint32_t *)p = v;
#elif defined(__CUDACC__)
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
#else
	atomic_store_explicit(DPFLOW_A32(p), v, DPFLOW_MO_REL);
#endif
}

/* Add @v; returns the value before. */
DPF_HD static inline uint32_t dpflow_atomic_add32(uint32_t *p, uint32_t v)
{
#if defined(__CUDA_ARCH__)
	return atomicAdd((unsigned int *)p, v);
#elif defined(__CUDACC__)
	return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
#else
	return atomic_fetch_add_explicit(DPFLOW_A32(p), v, DPFLOW_MO_RLX);
#endif
}

DPF_HD static inline bool dpflow_atomic_cas32(uint32_t *p, uint32_t *expected,
					      uint32_t desired)
{
#if defined(__CUDA_ARCH__)
	uint32_t old;

	__threadfence();
	old = atomicCAS((unsigned int *)p, *expected, desired);
	__threadfence();
	if (old == *expected)
		return true;
	*expected = old;
	return false;
#elif defined(__CUDACC__)
	return __atomic_compare_exchange_n(p, expected, desired, false,
					   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
#else
	return atomic_compare_exchange_strong_explicit(
	    DPFLOW_A32(p), expected, desired, DPFLOW_MO_AR, DPFLOW_MO_ACQ);
#endif
}

/* ---- 64-bit -------------------------------------------------------------- */

DPF_HD static inline uint64_t dpflow_atomic_load64(const uint64_t *p)
{
#if defined(__CUDA_ARCH__)
	return *(const volatile uint64_t *)p;
#elif defined(__CUDACC__)
	return __atomic_load_n(p, __ATOMIC_RELAXED);
#else
	return atomic_load_explicit(DPFLOW_CA64(p), DPFLOW_MO_RLX);
#endif
}

DPF_HD static inline uint64_t dpflow_atomic_load64_acq(const uint64_t *p)
{
#if defined(__CUDA_ARCH__)
	uint64_t v = *(const volatile uint64_t *)p;

	__threadfence();
	return v;
#elif defined(__CUDACC__)
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#else
	return atomic_load_explicit(DPFLOW_CA64(p), DPFLOW_MO_ACQ);
#endif
}

DPF_HD static inline void dpflow_atomic_store64(uint64_t *p, uint64_t v)
{
#if defined(__CUDA_ARCH__)
	*(volatile uint64_t *)p = v;
#elif defined(__CUDACC__)
	__atomic_store_n(p, v, __ATOMIC_RELAXED);
#else
	atomic_store_explicit(DPFLOW_A64(p), v, DPFLOW_MO_RLX);
#endif
}

DPF_HD static inline void dpflow_atomic_store64_rel(uint64_t *p, uint64_t v)
{
#if defined(__CUDA_ARCH__)
	__threadfence();
	*(volatile uint64_t *)p = v;
#elif defined(__CUDACC__)
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
#else
	atomic_store_explicit(DPFLOW_A64(p), v, DPFLOW_MO_REL);
#endif
}

/* Add @v; returns the value before. Subtract by adding (uint64_t)-n. */
DPF_HD static inline uint64_t dpflow_atomic_add64(uint64_t *p, uint64_t v)
{
#if defined(__CUDA_ARCH__)
	return atomicAdd((unsigned long long *)p, (unsigned long long)v);
#elif defined(__CUDACC__)
	return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
#else
	return atomic_fetch_add_explicit(DPFLOW_A64(p), v, DPFLOW_MO_RLX);
#endif
}

/* Swap in @v (acq_rel); returns the value before. */
DPF_HD static inline uint64_t dpflow_atomic_xchg64(uint64_t *p, uint64_t v)
{
#if defined(__CUDA_ARCH__)
	uint64_t old;

	__threadfence();
	old = atomicExch((unsigned long long *)p, (unsigned long long)v);
	__threadfence();
	return old;
#elif defined(__CUDACC__)
	return __atomic_exchange_n(p, v, __ATOMIC_ACQ_REL);
#else
	return atomic_exchange_explicit(DPFLOW_A64(p), v, DPFLOW_MO_AR);
#endif
}

DPF_HD static inline bool dpflow_atomic_cas64(uint64_t *p, uint64_t *expected,
					      uint64_t desired)
{
#if defined(__CUDA_ARCH__)
	uint64_t old;

	__threadfence();
	old = atomicCAS((unsigned long long *)p, (unsigned long long)*expected,
			(unsigned long long)desired);
	__threadfence();
	if (old == *expected)
		return true;
	*expected = old;
	return false;
#elif defined(__CUDACC__)
	return __atomic_compare_exchange_n(p, expected, desired, false,
					   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
#else
	return atomic_compare_exchange_strong_explicit(
	    DPFLOW_A64(p), expected, desired, DPFLOW_MO_AR, DPFLOW_MO_ACQ);
#endif
}

/* ---- fences -------------------------------------------------------------- */

DPF_HD static inline void dpflow_atomic_fence_acq(void)
{
#if defined(__CUDA_ARCH__)
	__threadfence();
#elif defined(__CUDACC__)
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
#else
	atomic_thread_fence(DPFLOW_MO_ACQ);
#endif
}

DPF_HD static inline void dpflow_atomic_fence_rel(void)
{
#if defined(__CUDA_ARCH__)
	__threadfence();
#elif defined(__CUDACC__)
	__atomic_thread_fence(__ATOMIC_RELEASE);
#else
	atomic_thread_fence(DPFLOW_MO_REL);
#endif
}

#endif /* DPFLOW_FLOW_ATOMIC_H */
