/*
 * dpflow common definitions: compiler glue shared by every module.
 *
 * Code that runs on both targets (parser, table lookups, actions) is written
 * in the common subset of C11 and CUDA C++ and marked DPF_HD, which becomes
 * __host__ __device__ under nvcc and nothing under a C compiler.
 * Safe to include from any thread and from device code.
 */
#ifndef DPFLOW_COMMON_H
#define DPFLOW_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define DPF_HD __host__ __device__
#else
#define DPF_HD
#endif

/*
 * Inlined whatever the compiler's cost model says. Also what keeps a
 * helper that only reads and prefetches: GCC counts a prefetch as no side
 * effect, finds such a helper pure, and deletes its calls (they return
 * nothing) before it would inline them (docs/design.md).
 */
#ifdef __CUDACC__
#define DPFLOW_ALWAYS_INLINE __forceinline__
#else
#define DPFLOW_ALWAYS_INLINE inline __attribute__((always_inline))
#endif

#ifdef __cplusplus
#define DPFLOW_RESTRICT			__restrict__
#define DPFLOW_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define DPFLOW_RESTRICT			restrict
#define DPFLOW_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

/* Bytes in one cache line on every CPU dpflow targets. */
#define DPFLOW_CACHE_LINE 64

/* Largest burst any stage takes or returns. */
#define DPFLOW_BURST_MAX 256

#define DPFLOW_LIKELY(x)     __builtin_expect(!!(x), 1)
#define DPFLOW_UNLIKELY(x)   __builtin_expect(!!(x), 0)
#define DPFLOW_ALIGNED(n)    __attribute__((aligned(n)))
#define DPFLOW_CACHE_ALIGNED DPFLOW_ALIGNED(DPFLOW_CACHE_LINE)
#define DPFLOW_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#ifdef __CUDA_ARCH__
#define DPFLOW_PREFETCH(p) ((void)(p))
#else
#define DPFLOW_PREFETCH(p) __builtin_prefetch((p), 0, 3)
#endif

#endif /* DPFLOW_COMMON_H */
