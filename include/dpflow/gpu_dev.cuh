/*
 * The GPU target, device side: C-style CUDA calls for kernels that receive
 * packets from a dpflow GPU queue, transmit them, talk through semaphores
 * and poll their exit flag (the host side is gpu.h; docs/gpu.md maps each
 * call to its DOCA GPUNetIO counterpart).
 *
 * The queue protocol. A queue (struct dpflow_gpu_qdev, in device memory)
 * names two rings of struct dpflow_gpu_desc in CPU_GPU memory (pinned host
 * memory mapped into the device), each of `size` cells; positions are
 * 64-bit counters that never wrap, a cell is position & mask, and each
 * cell's `seq` word carries the hand-over:
 *
 *   receive ring (CPU produces, GPU consumes)
 *     CPU  at position p: waits for cell.seq == p (free for this lap),
 *          writes the descriptor, then publishes prod = p + 1 with a
 *          release store (ZERO_COPY: straight into host memory; DEVICE: a
 *          cudaMemcpyAsync of the value into device memory queued after
 *          the burst's data copy on the same stream, so that the doorbell
 *          lands only once the frames have).
 *     GPU  reads prod with an acquire load (system scope), claims
 *          [c, c + n) with a CAS on rx_claim (device memory: any number of
 *          blocks, warps or threads may receive), reads the descriptors,
 *          then frees each cell with a release store cell.seq = p + size.
 *   transmit ring (GPU produces, CPU consumes)
 *     GPU  claims [c, c + n) with a CAS on tx_claim, only while
 *          c + n - cons <= size (cons: the CPU's consumer index, read
 *          with an acquire load and cached in device memory), writes each
 *          descriptor, then release-stores cell.seq = p + 1.
 *     CPU  at position p: waits for cell.seq == p + 1 (acquire), takes the
 *          descriptor, and publishes cons (release) once per burst.
 * Packets' ownership travels with the descriptors: every packet received
 * must come back through the transmit ring, sent or with
 * DPFLOW_GPU_DESC_F_DROP (the proxy then frees its slot).
 *
 * Every wait here takes a timeout in nanoseconds (%globaltimer); 0 means
 * one try. Calls named _block must be made by every thread of the block,
 * _warp by every lane of a full warp; _thread by any thread alone. So a
 * loop around them must leave uniformly: test the exit flag with
 * __syncthreads_or(dpflow_gpu_dev_exit(ctl)) (block) or __any_sync (warp).
 */
#ifndef DPFLOW_GPU_DEV_CUH
#define DPFLOW_GPU_DEV_CUH

#include <stdint.h>

#include <cuda/atomic>

#include "dpflow/common.h"
#include "dpflow/gpu.h"

/* struct dpflow_gpu_desc.flags */
#define DPFLOW_GPU_DESC_F_DROP	0x1 /* transmit: free the packet, no send */
#define DPFLOW_GPU_DESC_F_SPLIT 0x2 /* receive: only hdr bytes on the GPU */

/* One packet descriptor (40 bytes). */
struct dpflow_gpu_desc {
	uint32_t seq;	  /* hand-over word (see above) */
	uint32_t slot;	  /* pool slot index */
	uint32_t dslot;	  /* slot the GPU addresses: == slot on ZERO_COPY,
			     a device-ring slot on DEVICE */
	uint16_t len;	  /* frame length (whole frame, split or not) */
	uint16_t off;	  /* first frame byte within the GPU's slot */
	uint64_t ts_ns;	  /* receive time, ns since the Unix epoch */
	uint64_t send_ns; /* transmit: send at (same clock); 0 = now */
	uint32_t flags;	  /* DPFLOW_GPU_DESC_F_* */
	uint32_t user;	  /* free for the application (a verdict...) */
};

DPFLOW_STATIC_ASSERT(sizeof(struct dpflow_gpu_desc) == 40,
		     "descriptor words are read and written as five u64");

/* Device handle of a queue: constants, then the GPU's own counters. */
struct dpflow_gpu_qdev {
	struct dpflow_gpu_desc *rx; /* CPU_GPU */
	struct dpflow_gpu_desc *tx; /* CPU_GPU */
	uint64_t *rx_prod;	    /* doorbell: host (ZERO_COPY) or device */
	uint64_t *tx_cons;	    /* CPU_GPU: the CPU's consumer index */
	uint8_t *data;		    /* device address of slot 0 */
	uint64_t stride;	    /* bytes between slots */
	uint32_t size;		    /* cells per ring, a power of two */
	uint32_t mask;
	uint32_t hdr_split; /* 0, or bytes given to the GPU */
	uint32_t path;	    /* enum dpflow_gpu_path */
	/* written by kernels only (device memory), one line each */
	unsigned long long rx_claim DPFLOW_ALIGNED(128);
	unsigned long long tx_claim DPFLOW_ALIGNED(128);
	unsigned long long tx_cons_cache;
	/* DEVICE path: the doorbell, written by the proxy's copy stream */
	uint64_t rx_doorbell DPFLOW_ALIGNED(128);
};

/* Device handle of a semaphore. */
struct dpflow_gpu_sem_dev {
	uint32_t *state;  /* n items; device or CPU_GPU memory */
	uint8_t *payload; /* n * payload_size bytes, same memory */
	uint32_t n;
	uint32_t payload_size;
};

/* A kernel's control block (CPU_GPU memory). */
struct dpflow_gpu_kctl {
	uint32_t exit; /* raised by dpflow_gpu_kernel_stop */
	uint32_t reserved[15];
};

/* A received packet as the GPU sees it. */
struct dpflow_gpu_pkt {
	uint8_t *data;	  /* device address of the first frame byte */
	uint32_t len;	  /* frame length */
	uint32_t hdr_len; /* bytes at data the GPU may touch (len or split) */
	uint64_t ts_ns;	  /* receive time */
	uint32_t slot;	  /* pool slot (keep it to transmit) */
	uint32_t dslot;
	uint16_t off;
	uint16_t flags;
};

#ifdef __CUDACC__

typedef cuda::atomic_ref<unsigned long long, cuda::thread_scope_system>
    dpflow_gpu_sys_u64_;
typedef cuda::atomic_ref<uint32_t, cuda::thread_scope_system>
    dpflow_gpu_sys_u32_;

/* Nanoseconds of the GPU's global timer (for timeouts). */
__device__ static inline uint64_t dpflow_gpu_dev_timer_ns(void)
{
	uint64_t t;

	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

/* True once dpflow_gpu_kernel_stop raised the kernel's exit flag. */
__device__ static inline bool dpflow_gpu_dev_exit(struct dpflow_gpu_kctl *ctl)
{
	return dpflow_gpu_sys_u32_(ctl->exit).load(
		   cuda::memory_order_relaxed) != 0;
}

/* ---- receive ---------------------------------------------------------- */

/*
 * Claim up to @max received packets for the calling thread alone, waiting
 * up to @timeout_ns for at least one. Returns how many (0 on timeout);
 * they are at positions *first .. *first + n - 1 (dpflow_gpu_dev_rx_pkt).
 */
__device__ static inline uint32_t
dpflow_gpu_dev_rx_thread(struct dpflow_gpu_qdev *q, uint32_t max,
			 uint64_t timeout_ns, uint64_t *first)
{
	uint64_t t0 = 0;

	if (max == 0)
		return 0;
	for (;;) {
		unsigned long long c =
		    cuda::atomic_ref<unsigned long long,
				     cuda::thread_scope_device>(q->rx_claim)
			.load(cuda::memory_order_relaxed);
		unsigned long long p =
		    dpflow_gpu_sys_u64_(*(unsigned long long *)q->rx_prod)
			.load(cuda::memory_order_acquire);

		if (p > c) {
			unsigned long long n = p - c < max ? p - c : max;

			if (atomicCAS(&q->rx_claim, c, c + n) == c) {
				*first = c;
				return (uint32_t)n;
			}
			continue;
		}
		if (timeout_ns == 0)
			return 0;
		if (t0 == 0)
			t0 = dpflow_gpu_dev_timer_ns();
		else if (dpflow_gpu_dev_timer_ns() - t0 >= timeout_ns)
			return 0;
		__nanosleep(64);
	}
}

/* As _thread, for a whole warp: every lane gets the same n and *first. */
__device__ static inline uint32_t
dpflow_gpu_dev_rx_warp(struct dpflow_gpu_qdev *q, uint32_t max,
		       uint64_t timeout_ns, uint64_t *first)
{
	uint32_t n = 0;
	uint64_t f = 0;

	if ((threadIdx.x & 31) == 0)
		n = dpflow_gpu_dev_rx_thread(q, max, timeout_ns, &f);
	n = __shfl_sync(0xffffffffu, n, 0);
	f = __shfl_sync(0xffffffffu, f, 0);
	/* lane 0's acquire, passed on to the lanes that read descriptors */
	__syncwarp();
	cuda::atomic_thread_fence(cuda::memory_order_acquire,
				  cuda::thread_scope_system);
	*first = f;
	return n;
}

/* As _thread, for a whole block: every thread gets the same n and *first. */
__device__ static inline uint32_t
dpflow_gpu_dev_rx_block(struct dpflow_gpu_qdev *q, uint32_t max,
			uint64_t timeout_ns, uint64_t *first)
{
	__shared__ uint32_t sh_n;
	__shared__ uint64_t sh_first;

	__syncthreads(); /* the previous call's readers are done */
	if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
		uint64_t f = 0;

		sh_n = dpflow_gpu_dev_rx_thread(q, max, timeout_ns, &f);
		sh_first = f;
	}
	__syncthreads();
	cuda::atomic_thread_fence(cuda::memory_order_acquire,
				  cuda::thread_scope_system);
	*first = sh_first;
	return sh_n;
}

/*
 * Read the packet at receive position @pos (claimed above) into @pkt and
 * free its descriptor cell. The packet itself stays the caller's until it
 * is handed to dpflow_gpu_dev_tx_pkt.
 */
__device__ static inline void dpflow_gpu_dev_rx_pkt(struct dpflow_gpu_qdev *q,
						    uint64_t pos,
						    struct dpflow_gpu_pkt *pkt)
{
	struct dpflow_gpu_desc *d = &q->rx[pos & q->mask];
	const volatile uint64_t *w = (const volatile uint64_t *)d;
	uint64_t w0 = w[0], w1 = w[1], w2 = w[2];
	uint32_t dslot = (uint32_t)w1;
	uint32_t len = (uint32_t)(w1 >> 32) & 0xffffu;
	uint32_t off = (uint32_t)(w1 >> 48);
	uint32_t flags = (uint32_t)w[4];

	pkt->slot = (uint32_t)(w0 >> 32);
	pkt->dslot = dslot;
	pkt->len = len;
	pkt->off = (uint16_t)off;
	pkt->flags = (uint16_t)flags;
	pkt->ts_ns = w2;
	pkt->hdr_len = q->hdr_split && q->hdr_split < len ? q->hdr_split : len;
	pkt->data = q->data + (uint64_t)dslot * q->stride + off;
	dpflow_gpu_sys_u32_(d->seq).store((uint32_t)(pos + q->size),
					  cuda::memory_order_release);
}

/* ---- transmit --------------------------------------------------------- */

/*
 * Reserve @n transmit positions for the calling thread, all or none,
 * waiting up to @timeout_ns for room. Returns @n (positions *first ..) or 0.
 */
__device__ static inline uint32_t
dpflow_gpu_dev_tx_reserve_thread(struct dpflow_gpu_qdev *q, uint32_t n,
				 uint64_t timeout_ns, uint64_t *first)
{
	uint64_t t0 = 0;

	if (n == 0 || n > q->size)
		return 0;
	for (;;) {
		unsigned long long c =
		    cuda::atomic_ref<unsigned long long,
				     cuda::thread_scope_device>(q->tx_claim)
			.load(cuda::memory_order_relaxed);
		unsigned long long cons =
		    cuda::atomic_ref<unsigned long long,
				     cuda::thread_scope_device>(
			q->tx_cons_cache)
			.load(cuda::memory_order_relaxed);

		if (c + n - cons > q->size) {
			cons = dpflow_gpu_sys_u64_(
				   *(unsigned long long *)q->tx_cons)
				   .load(cuda::memory_order_acquire);
			atomicMax(&q->tx_cons_cache, cons);
		}
		if (c + n - cons <= q->size) {
			if (atomicCAS(&q->tx_claim, c, c + n) == c) {
				*first = c;
				return n;
			}
			continue;
		}
		if (timeout_ns == 0)
			return 0;
		if (t0 == 0)
			t0 = dpflow_gpu_dev_timer_ns();
		else if (dpflow_gpu_dev_timer_ns() - t0 >= timeout_ns)
			return 0;
		__nanosleep(64);
	}
}

/* As _thread, for a whole warp (@n the same in every lane). */
__device__ static inline uint32_t
dpflow_gpu_dev_tx_reserve_warp(struct dpflow_gpu_qdev *q, uint32_t n,
			       uint64_t timeout_ns, uint64_t *first)
{
	uint32_t got = 0;
	uint64_t f = 0;

	if ((threadIdx.x & 31) == 0)
		got = dpflow_gpu_dev_tx_reserve_thread(q, n, timeout_ns, &f);
	got = __shfl_sync(0xffffffffu, got, 0);
	*first = __shfl_sync(0xffffffffu, f, 0);
	return got;
}

/* As _thread, for a whole block (@n the same in every thread). */
__device__ static inline uint32_t
dpflow_gpu_dev_tx_reserve_block(struct dpflow_gpu_qdev *q, uint32_t n,
				uint64_t timeout_ns, uint64_t *first)
{
	__shared__ uint32_t sh_got;
	__shared__ uint64_t sh_first;

	__syncthreads();
	if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
		uint64_t f = 0;

		sh_got = dpflow_gpu_dev_tx_reserve_thread(q, n, timeout_ns, &f);
		sh_first = f;
	}
	__syncthreads();
	*first = sh_first;
	return sh_got;
}

/*
 * Fill reserved transmit position @pos with @pkt (a packet received from
 * this queue, its length possibly changed, at most the slot's room), to be
 * sent at @send_ns (host clock, ns since the Unix epoch; 0 = now) with
 * @flags (DPFLOW_GPU_DESC_F_DROP to free it instead) and @user. Writes of
 * the frame made before this call are visible to the CPU when it takes
 * the descriptor.
 */
__device__ static inline void
dpflow_gpu_dev_tx_pkt(struct dpflow_gpu_qdev *q, uint64_t pos,
		      const struct dpflow_gpu_pkt *pkt, uint64_t send_ns,
		      uint32_t flags, uint32_t user)
{
	struct dpflow_gpu_desc *d = &q->tx[pos & q->mask];
	volatile uint64_t *w = (volatile uint64_t *)d;

	/* the seq word is left alone until the release below */
	((volatile uint32_t *)d)[1] = pkt->slot;
	w[1] = (uint64_t)pkt->dslot | (uint64_t)(pkt->len & 0xffffu) << 32 |
	       (uint64_t)pkt->off << 48;
	w[2] = pkt->ts_ns;
	w[3] = send_ns;
	w[4] = (uint64_t)flags | (uint64_t)user << 32;
	dpflow_gpu_sys_u32_(d->seq).store((uint32_t)(pos + 1),
					  cuda::memory_order_release);
}

/* ---- semaphores ------------------------------------------------------- */

__device__ static inline uint32_t
dpflow_gpu_dev_sem_get(const struct dpflow_gpu_sem_dev *s, uint32_t item)
{
	return dpflow_gpu_sys_u32_(s->state[item])
	    .load(cuda::memory_order_acquire);
}

/* Set @item's state; payload writes made before it are published. */
__device__ static inline void
dpflow_gpu_dev_sem_set(const struct dpflow_gpu_sem_dev *s, uint32_t item,
		       uint32_t state)
{
	dpflow_gpu_sys_u32_(s->state[item])
	    .store(state, cuda::memory_order_release);
}

/*
 * Wait until @item's state is in @states (DPFLOW_GPU_SEM_BIT mask) and
 * return it, or return -1 once @timeout_ns has passed.
 */
__device__ static inline int
dpflow_gpu_dev_sem_wait(const struct dpflow_gpu_sem_dev *s, uint32_t item,
			uint32_t states, uint64_t timeout_ns)
{
	uint64_t t0 = 0;

	for (;;) {
		uint32_t st = dpflow_gpu_dev_sem_get(s, item);

		if (st < 32 && (states & (1u << st)))
			return (int)st;
		if (timeout_ns == 0)
			return -1;
		if (t0 == 0)
			t0 = dpflow_gpu_dev_timer_ns();
		else if (dpflow_gpu_dev_timer_ns() - t0 >= timeout_ns)
			return -1;
		__nanosleep(64);
	}
}

__device__ static inline void *
dpflow_gpu_dev_sem_payload(const struct dpflow_gpu_sem_dev *s, uint32_t item)
{
	return s->payload + (uint64_t)item * s->payload_size;
}

#endif /* __CUDACC__ */

#endif /* DPFLOW_GPU_DEV_CUH */
