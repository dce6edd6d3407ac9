/*
 * The queue-fed persistent pipeline (gpu_flow.h, "queue-fed persistent
 * pipeline"): a persistent kernel whose receivers (warps or blocks) take
 * batches from GPU queues, run each packet through the plan
 * (gpu_flow_pkt() of gpu_flow_dev.cuh) and hand it back with its verdict,
 * and the host side that launches it and flips plan versions under it.
 *
 * A batch, per warp (a block's batch is cut into warp slices):
 *  1. the receive descriptors are read with coalesced 8-byte loads (a
 *     warp reads its 32 descriptors as one run of words, then shuffles
 *     them to their lanes) and their cells freed at once, so that the
 *     proxy refills the ring while the batch runs;
 *  2. the warp copies the first `window` bytes of each frame into its
 *     lane's slice of shared memory in 16-byte chunks, consecutive lanes
 *     taking consecutive chunks (over PCIe on the zero-copy path: whole
 *     sectors instead of the parser's many narrow reads), and each lane
 *     runs the pipeline on its copy, or in place when the copy does not
 *     hold the headers (see gpu_flow.h);
 *  3. edited bytes go back to the frame, the verdict word to the
 *     optional verdict array, and the transmit descriptors are written at
 *     the positions equal to the receive positions: words 1-4 with
 *     coalesced stores, then one system-scope release fence, then each
 *     descriptor's first word (hand-over word and slot) in one store.
 *
 * Shared memory per block: 32 lanes x window bytes per warp, then a pad
 * as long as the longest frame. The parser is given the real frame
 * length, so on a copy holding fewer bytes it may read past its slice
 * (a frame whose headers lie beyond the copy); the pad keeps every such
 * read inside the block's shared memory, and those packets are detected
 * (the parsed headers end beyond the copy) and run again in place or cut.
 *
 * Versions: the kernel reads the generation (device memory, written by a
 * host copy queued after the plan's copies) once per batch, uses plan
 * copy gen & 1 for the whole batch, and release-stores the generation it
 * uses into its acknowledgement word (CPU_GPU memory) whenever it
 * changes; the host writes a copy only when every acknowledgement has
 * left it.
 */
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cuda/atomic>
#include <cuda_runtime.h>

#include "gpu_flow_dev.cuh"
#include "gpu_flow_internal.h"

#include "dpflow/clock.h"
#include "dpflow/gpu.h"
#include "dpflow/gpu_dev.cuh"
#include "dpflow/gpu_flow.h"
/* the queues' host side (pool, path, split): same library */
#include "gpu/core/gpu_internal.h"

#define QK_WINDOW_DEFAULT    128u
#define QK_WINDOW_MAX	     1024u
#define QK_POLL_NS_DEFAULT   20000ull
#define QK_RECEIVERS_DEFAULT 4u
#define QK_WPB_DEFAULT	     4u
#define QK_WPB_MAX	     8u
#define QK_LAT_BUCKET_NS     250u
#define QK_LAT_BUCKETS	     256u
/* after the exit flag, a batch waits this long for transmit room */
#define QK_TX_GIVEUP_NS 100000000ull
#define QK_START_NS	2000000000ull
#define QK_SYNC_NS	1000000000ull
#define QK_STOP_NS	2000000000ull
/* the first generation: plan copy 0, the plan's own */
#define QK_GEN_FIRST 2ull

#define FULL_MASK 0xffffffffu

enum { QK_STAGED = 0, QK_IN_PLACE, QK_SPLIT_CUT };

struct qk_queue {
	struct dpflow_gpu_qdev *q;
	long long tx_off; /* transmit position - receive position */
};

/* One receiver's counters, written by its lane 0 alone. */
struct qk_rstat {
	unsigned long long batches, pkts, sent, staged, in_place, split_cut,
	    lost, busy_ns;
};

/* Counters every receiver adds to. */
struct qk_shared {
	unsigned long long drops[DPFLOW_DROP__COUNT];
	unsigned long long lat[QK_LAT_BUCKETS];
};

/* The kernel's argument (device memory). */
struct qk_dev {
	const struct gpu_pipe *plan[2]; /* by generation & 1 */
	struct qk_rstat *rstat;		/* per receiver */
	struct qk_shared *shared;
	unsigned long long *acks; /* CPU_GPU: per receiver, the generation */
	uint32_t *verdicts;	  /* CPU_GPU, per pool slot; NULL: none */
	uint64_t poll_ns;
	int root;
	uint32_t path_max;
	uint32_t window; /* 0: every packet in place */
	uint32_t n_queues;
	uint32_t block_mode;
	uint32_t edits;
	uint16_t port;
	struct qk_queue qs[DPFLOW_GPU_FLOW_RUN_QUEUES_MAX];
	/* written by the host's copies while the kernel runs */
	unsigned long long gen DPFLOW_ALIGNED(128);
};

/* What became of one packet. */
struct qk_out {
	struct gpu_result r;
	uint32_t len, off; /* for the transmit descriptor */
	unsigned how;	   /* QK_STAGED, ... */
};

/* ---- the kernel --------------------------------------------------------- */

/*
 * Copy @n bytes: 16-byte moves when both ends are aligned (eight loads in
 * flight before their stores: over PCIe the loads' latency is what
 * counts), then the tail in 8, 4 and 1-byte moves.
 */
__device__ static void qk_copy(uint8_t *dst, const uint8_t *src, uint32_t n)
{
	uint32_t i = 0;

	if (!(((uintptr_t)dst | (uintptr_t)src) & 15)) {
		const uint4 *s = (const uint4 *)src;
		uint4 *t = (uint4 *)dst;
		uint32_t nv = n / 16;

		for (uint32_t c = 0; c < nv; c += 8) {
			uint4 v[8];

#pragma unroll
			for (uint32_t k = 0; k < 8; k++)
				if (c + k < nv)
					v[k] = s[c + k];
#pragma unroll
			for (uint32_t k = 0; k < 8; k++)
				if (c + k < nv)
					t[c + k] = v[k];
		}
		i = nv * 16;
		if (n - i >= 8) {
			*(uint64_t *)(dst + i) = *(const uint64_t *)(src + i);
			i += 8;
		}
		if (n - i >= 4) {
			*(uint32_t *)(dst + i) = *(const uint32_t *)(src + i);
			i += 4;
		}
	}
	for (; i < n; i++)
		dst[i] = src[i];
}

/*
 * Stage the warp's frames: lane i copies @bytes from its @src to its @dst
 * (lanes without a packet pass 0). Sources are read in whole 16-byte
 * chunks (a frame's slot or device-ring record, and a lane's window, end
 * on a 16-byte boundary past the frame, so the few bytes after it are
 * readable). When every frame has as many chunks, the warp copies the
 * batch's chunks in order, consecutive lanes taking consecutive chunks, so
 * that each sector crosses PCIe once (a lane copying its own frame reads
 * 16 bytes of 32 different sectors per load); eight loads are in flight
 * before their stores.
 */
__device__ static void qk_stage(uint8_t *dst, const uint8_t *src,
				uint32_t bytes, uint32_t n, unsigned lane)
{
	uint32_t chunks = (bytes + 15) / 16;
	uint32_t c0 = __shfl_sync(FULL_MASK, chunks, 0);
	bool aligned = !(((uintptr_t)src | (uintptr_t)dst) & 15);

	if (!__all_sync(FULL_MASK, lane >= n || (chunks == c0 && aligned))) {
		if (aligned)
			qk_copy(dst, src, chunks * 16);
		else
			qk_copy(dst, src, bytes);
		return;
	}
	for (uint32_t base = 0; base < n * c0; base += 8 * 32) {
		uint4 v[8];

#pragma unroll
		for (uint32_t k = 0; k < 8; k++) {
			uint32_t c = base + 32 * k + lane;
			uint32_t p = min(c / c0, 31u);
			const uint4 *s = (const uint4 *)__shfl_sync(
			    FULL_MASK, (unsigned long long)(uintptr_t)src, p);

			if (c < n * c0)
				v[k] = s[c % c0];
		}
#pragma unroll
		for (uint32_t k = 0; k < 8; k++) {
			uint32_t c = base + 32 * k + lane;
			uint32_t p = min(c / c0, 31u);
			uint4 *t = (uint4 *)__shfl_sync(
			    FULL_MASK, (unsigned long long)(uintptr_t)dst, p);

			if (c < n * c0)
				t[c % c0] = v[k];
		}
	}
}

/*
 * The five words of receive descriptors first..first+n-1, lane i getting
 * descriptor i's: the warp loads the 5n words in order (consecutive lanes,
 * consecutive words: whole sectors over PCIe), then each lane gathers its
 * five from the lanes that loaded them.
 */
__device__ static void qk_rx_descs(const struct dpflow_gpu_qdev *q,
				   uint64_t first, uint32_t n, unsigned lane,
				   uint64_t w[5])
{
	uint64_t v[5];

#pragma unroll
	for (uint32_t k = 0; k < 5; k++) {
		uint32_t f = lane + 32 * k;

		v[k] = 0;
		if (f < 5 * n) {
			const volatile uint64_t *c =
			    (const volatile uint64_t *)&q
				->rx[(first + f / 5) & q->mask];

			v[k] = c[f % 5];
		}
	}
#pragma unroll
	for (uint32_t j = 0; j < 5; j++) {
		uint32_t f = 5 * lane + j, src = f & 31, kk = f >> 5;
		uint64_t x = 0;

#pragma unroll
		for (uint32_t k = 0; k < 5; k++) {
			uint64_t t = __shfl_sync(FULL_MASK, v[k], src);

			if (kk == k)
				x = t;
		}
		w[j] = x;
	}
}

/*
 * Wait (one thread) until transmit positions up to @end are free: the
 * CPU's consumer index, cached in device memory as the transmit calls of
 * gpu_dev.cuh cache it. False when the exit flag is up and no room came
 * within QK_TX_GIVEUP_NS.
 */
__device__ static bool qk_tx_room(struct dpflow_gpu_qdev *q, uint64_t end,
				  struct dpflow_gpu_kctl *ctl)
{
	unsigned long long cons =
	    cuda::atomic_ref<unsigned long long, cuda::thread_scope_device>(
		q->tx_cons_cache)
		.load(cuda::memory_order_relaxed);
	uint64_t t0 = 0;

	while (end - cons > q->size) {
		cons = dpflow_gpu_sys_u64_(*(unsigned long long *)q->tx_cons)
			   .load(cuda::memory_order_acquire);
		atomicMax(&q->tx_cons_cache, cons);
		if (end - cons <= q->size)
			break;
		if (dpflow_gpu_dev_exit(ctl)) {
			if (t0 == 0)
				t0 = dpflow_gpu_dev_timer_ns();
			else if (dpflow_gpu_dev_timer_ns() - t0 >
				 QK_TX_GIVEUP_NS)
				return false;
		}
		__nanosleep(128);
	}
	return true;
}

/*
 * Hand the warp's n packets back at transmit positions tpos..: lane i's
 * descriptor words @w1..@w4 and @slot. Words 1-4 of every descriptor are
 * stored first (coalesced: consecutive lanes, consecutive words), then
 * the warp syncs and fences (system scope, release: the frames, verdicts
 * and words written by any lane are visible before), then each lane
 * stores its descriptor's first word: the hand-over word and the slot.
 */
__device__ static bool qk_tx(struct dpflow_gpu_qdev *q, uint64_t tpos,
			     uint32_t n, unsigned lane, uint32_t slot,
			     const uint64_t w[5], struct dpflow_gpu_kctl *ctl)
{
	bool ok = false;

	if (lane == 0)
		ok = qk_tx_room(q, tpos + n, ctl);
	if (!__shfl_sync(FULL_MASK, ok, 0))
		return false;
#pragma unroll
	for (uint32_t k = 0; k < 4; k++) {
		uint32_t f = lane + 32 * k, i = f >> 2, j = 1 + (f & 3);
		uint64_t a1 = __shfl_sync(FULL_MASK, w[1], i);
		uint64_t a2 = __shfl_sync(FULL_MASK, w[2], i);
		uint64_t a3 = __shfl_sync(FULL_MASK, w[3], i);
		uint64_t a4 = __shfl_sync(FULL_MASK, w[4], i);

		if (i < n) {
			volatile uint64_t *c =
			    (volatile uint64_t *)&q->tx[(tpos + i) & q->mask];

			c[j] = j == 1 ? a1 : j == 2 ? a2 : j == 3 ? a3 : a4;
		}
	}
	__syncwarp();
	cuda::atomic_thread_fence(cuda::memory_order_release,
				  cuda::thread_scope_system);
	if (lane < n)
		dpflow_gpu_sys_u64_(
		    *(unsigned long long *)&q->tx[(tpos + lane) & q->mask])
		    .store((uint64_t)(uint32_t)(tpos + lane + 1) |
			       (uint64_t)slot << 32,
			   cuda::memory_order_relaxed);
	return true;
}

/*
 * One packet through the plan: frame at @data (@len bytes, @vis of them
 * given to the GPU, its first byte at @off in the GPU's slot), its first
 * @sn bytes staged at @stage.
 */
__device__ static struct qk_out
qk_pkt(const struct qk_dev *d, const struct gpu_pipe *plan,
       const struct dpflow_gpu_qdev *q, uint8_t *data, uint32_t len,
       uint32_t off, uint32_t vis, uint8_t *stage, uint32_t sn)
{
	const uint32_t meta_bytes = sizeof(struct dpflow_pkt_meta);
	struct dpflow_pkt_meta m;
	struct gpu_step steps[DPFLOW_PIPES_MAX];
	struct qk_out o;
	uint32_t plen = len;
	uint16_t data_off = 0;
	uint8_t *buf = stage;

	o.len = len;
	o.off = off;
	o.how = QK_STAGED;
	memset(&m, 0, sizeof(m));
	if (!sn) {
		o.how = QK_IN_PLACE;
	} else if (sn < len) {
		/* do the parsed headers lie within the copy? (a successful
		 * parse reads nothing beyond where its headers end; a tunnel
		 * port's payload that did not parse as the tunnel may have
		 * been judged on bytes past the copy: where the whole frame
		 * is visible, it is parsed again in place) */
		uint32_t end;

		dpflow_parse_frame_impl(stage, len, &m);
		end = m.tun_type != DPFLOW_TUN_NONE ? m.inner.pay_off
						    : m.outer.pay_off;
		if (m.drop || end > sn) {
			if (vis <= sn) {
				plen = vis; /* header split: cut there */
				o.how = QK_SPLIT_CUT;
			} else {
				o.how = QK_IN_PLACE;
			}
		} else if ((m.flags & DPFLOW_META_F_TUN_INVALID) && vis > sn) {
			o.how = QK_IN_PLACE;
		}
	}
	if (o.how == QK_IN_PLACE) {
		buf = data;
		if (q->path == DPFLOW_GPU_PATH_ZERO_COPY) {
			/* the slot's buffer: headroom to grow into */
			data_off = (uint16_t)(off - meta_bytes);
			buf = data - data_off;
		}
	}
	m.data_off = data_off;
	m.data_len = (uint16_t)plen;
	o.r = gpu_flow_pkt(plan, d->root, d->port, &m, buf, steps, d->path_max);
	if (o.how == QK_IN_PLACE) {
		if (m.data_off != data_off &&
		    q->path == DPFLOW_GPU_PATH_ZERO_COPY) {
			/* the frame's start moved: tell the slot's metadata */
			*(volatile uint16_t *)(buf - meta_bytes) = m.data_off;
			o.off = off + m.data_off - data_off;
		}
		o.len = m.data_len;
	} else if (o.r.sent && d->edits) {
		qk_copy(data, stage, sn);
	}
	return o;
}

/* One warp's batch: packets at receive positions first..first+n-1. */
__device__ static void qk_batch(const struct qk_dev *d,
				const struct qk_queue *qq, unsigned rid,
				unsigned long long gen, uint64_t first,
				uint32_t n, unsigned lane, uint8_t *stage,
				struct dpflow_gpu_kctl *ctl)
{
	struct dpflow_gpu_qdev *q = qq->q;
	const bool have = lane < n;
	const uint64_t t0 = dpflow_gpu_dev_timer_ns();
	uint64_t w[5];
	struct qk_out o;
	uint32_t slot, dslot, len, off, vis, sn, user = 0;
	uint8_t *data;
	bool ok;

	qk_rx_descs(q, first, n, lane, w);
	__syncwarp(); /* every lane's loads are done: free the cells */
	if (have)
		dpflow_gpu_sys_u32_(q->rx[(first + lane) & q->mask].seq)
		    .store((uint32_t)(first + lane + q->size),
			   cuda::memory_order_release);
	slot = (uint32_t)(w[0] >> 32);
	dslot = (uint32_t)w[1];
	len = (uint32_t)(w[1] >> 32) & 0xffffu;
	off = (uint32_t)(w[1] >> 48);
	data = q->data + (uint64_t)dslot * q->stride + off;
	vis = q->hdr_split && q->hdr_split < len ? q->hdr_split : len;
	sn = have && stage ? min(vis, d->window) : 0;
	if (stage)
		qk_stage(stage, data, sn, n, lane);
	memset(&o, 0, sizeof(o));
	if (have) {
		o = qk_pkt(d, d->plan[gen & 1], q, data, len, off, vis, stage,
			   sn);
		/* RSS queues and handlers are refused by the start and the
		 * syncs; should one slip through, the packet is dropped */
		if (!o.r.sent &&
		    (o.r.to != GRES_DROP || o.r.value >= DPFLOW_DROP__COUNT))
			o.r.value = DPFLOW_DROP_FLOW_FWD_DROP;
		user = (o.r.sent ? DPFLOW_GPU_FLOW_VERDICT_SENT : 0) |
		       (uint32_t)(gen & 0x7fff) << 16 | o.r.value;
		if (d->verdicts)
			((volatile uint32_t *)d->verdicts)[slot] = user;
		if (!o.r.sent)
			stat_add(&d->shared->drops[o.r.value], o.r.value);
		w[1] = (uint64_t)dslot | (uint64_t)(o.len & 0xffffu) << 32 |
		       (uint64_t)(o.off & 0xffffu) << 48;
		w[3] = 0; /* send now */
		w[4] = (uint64_t)user << 32 |
		       (o.r.sent ? 0u : (uint32_t)DPFLOW_GPU_DESC_F_DROP);
	}
	ok = qk_tx(q, first + qq->tx_off, n, lane, slot, w, ctl);
	{
		unsigned sent = __ballot_sync(FULL_MASK, have && o.r.sent);
		unsigned staged =
		    __ballot_sync(FULL_MASK, have && o.how == QK_STAGED);
		unsigned in_place =
		    __ballot_sync(FULL_MASK, have && o.how == QK_IN_PLACE);
		unsigned cut =
		    __ballot_sync(FULL_MASK, have && o.how == QK_SPLIT_CUT);

		if (lane == 0) {
			struct qk_rstat *s = &d->rstat[rid];
			uint64_t ns = dpflow_gpu_dev_timer_ns() - t0;
			uint64_t b = ns / QK_LAT_BUCKET_NS;

			if (ok) {
				atomicMax(&q->tx_claim,
					  (unsigned long long)(first + n +
							       qq->tx_off));
				s->pkts += n;
			} else {
				s->lost += n;
			}
			s->batches++;
			s->busy_ns += ns;
			s->sent += __popc(sent);
			s->staged += __popc(staged);
			s->in_place += __popc(in_place);
			s->split_cut += __popc(cut);
			atomicAdd(&d->shared->lat[b < QK_LAT_BUCKETS
						      ? b
						      : QK_LAT_BUCKETS - 1],
				  1ull);
		}
	}
}

/*
 * Lane 0 (warp mode) or thread 0 (block mode): the generation for the
 * next batch, acknowledged when it changed.
 */
__device__ static unsigned long long
qk_gen(const struct qk_dev *d, unsigned long long *acked, unsigned rid)
{
	unsigned long long g =
	    dpflow_gpu_sys_u64_(*(unsigned long long *)&d->gen)
		.load(cuda::memory_order_acquire);

	if (g != *acked) {
		/* release: this receiver's reads of the older copy are done */
		dpflow_gpu_sys_u64_(d->acks[rid])
		    .store(g, cuda::memory_order_release);
		*acked = g;
	}
	return g;
}

__global__ void __launch_bounds__(QK_WPB_MAX * 32)
    qk_kernel(const struct qk_dev *d, struct dpflow_gpu_kctl *ctl)
{
	extern __shared__ __align__(16) uint8_t qk_smem[];
	__shared__ unsigned long long sh_gen;
	const unsigned lane = threadIdx.x & 31, wib = threadIdx.x >> 5;
	const bool block_mode = d->block_mode;
	const unsigned rid =
	    block_mode ? blockIdx.x : blockIdx.x * (blockDim.x >> 5) + wib;
	const struct qk_queue *qq = &d->qs[rid % d->n_queues];
	uint8_t *stage =
	    d->window ? qk_smem + (size_t)threadIdx.x * d->window : NULL;
	unsigned long long acked = 0, seen = 0;
	uint32_t got = 0, it = 0;

	for (;;) {
		unsigned long long gen = 0;
		uint64_t first = 0;
		uint32_t n;
		/* the exit flag is in host memory (a PCIe read): test it when
		 * idle and every 64th batch, not before every batch */
		bool test = got == 0 || (++it & 63) == 0;

		if (block_mode) {
			if (test && __syncthreads_or(dpflow_gpu_dev_exit(ctl)))
				break;
			got = n = dpflow_gpu_dev_rx_block(qq->q, blockDim.x,
							  d->poll_ns, &first);
			if (threadIdx.x == 0)
				sh_gen = qk_gen(d, &acked, rid);
			__syncthreads();
			gen = sh_gen;
			/* this warp's slice of the block's batch */
			first += wib * 32;
			n = n > wib * 32 ? min(n - wib * 32, 32u) : 0;
		} else {
			if (test &&
			    __any_sync(FULL_MASK, dpflow_gpu_dev_exit(ctl)))
				break;
			got = n = dpflow_gpu_dev_rx_warp(qq->q, 32, d->poll_ns,
							 &first);
			if (lane == 0)
				gen = qk_gen(d, &acked, rid);
			gen = __shfl_sync(FULL_MASK, gen, 0);
		}
		if (gen != seen) {
			/* a new copy: nothing of it cached from earlier use */
			cuda::atomic_thread_fence(cuda::memory_order_acquire,
						  cuda::thread_scope_system);
			seen = gen;
		}
		if (n)
			qk_batch(d, qq, rid, gen, first, n, lane, stage, ctl);
	}
}

/* ---- the host side ------------------------------------------------------ */

struct dpflow_gpu_flow_run {
	struct dpflow_gpu_flow *g;
	struct dpflow_gpu *gpu;
	struct gpu_flow_versions *v;
	struct dpflow_gpu_kernel *k;
	struct qk_dev *d_dev; /* device memory */
	struct qk_rstat *d_rstat;
	struct qk_shared *d_shared;
	unsigned long long *acks; /* CPU address; device: d_acks */
	unsigned long long *d_acks;
	unsigned long long gen;
	unsigned n_recv, blocks, threads, window;
	size_t smem;
	cudaStream_t stream;
	bool stopped;
	int stop_rc;
};

static int run_cuda_fail(struct dpflow_error *err, cudaError_t rc,
			 const char *what)
{
	dpflow_error_set(err, EIO, "gpu", "%s: %s (%s)", what,
			 cudaGetErrorString(rc), cudaGetErrorName(rc));
	return -EIO;
}

#define RUN_TRY(call, what)                                   \
	do {                                                  \
		cudaError_t rc_ = (call);                     \
		if (rc_ != cudaSuccess)                       \
			return run_cuda_fail(err, rc_, what); \
	} while (0)

/*
 * Wait until every receiver acknowledged generation @target or later.
 * 0, -ETIMEDOUT, or the kernel's failure (or -EIO if it ended).
 */
static int wait_acks(struct dpflow_gpu_flow_run *r, unsigned long long target,
		     uint64_t timeout_ns, struct dpflow_error *err)
{
	uint64_t t0 = dpflow_clock_ns(), next_poll = t0;

	for (;;) {
		uint64_t now;
		unsigned lag = 0;
		int rc;

		for (unsigned i = 0; i < r->n_recv; i++)
			lag += __atomic_load_n(&r->acks[i], __ATOMIC_ACQUIRE) <
			       target;
		if (!lag)
			return 0;
		now = dpflow_clock_ns();
		if (now >= next_poll) {
			next_poll = now + 1000000;
			rc = dpflow_gpu_kernel_poll(r->k, err);
			if (rc < 0)
				return rc;
			if (rc == 0)
				return dpflow_error_set(
				    err, EIO, "kernel",
				    "the pipeline kernel ended on its own");
		}
		if (now - t0 > timeout_ns)
			return dpflow_error_set(
			    err, ETIMEDOUT, "kernel",
			    "%u of %u receivers still before generation %llu "
			    "after %llu ms",
			    lag, r->n_recv, target,
			    (unsigned long long)(timeout_ns / 1000000));
		__builtin_ia32_pause();
	}
}

/* Check the parameters against the plan and the queues; fill @h. */
static int run_check(struct dpflow_gpu_flow *g,
		     const struct dpflow_gpu_flow_run_params *p,
		     struct qk_dev *h, uint32_t *room_max,
		     struct dpflow_error *err)
{
	struct gpu_flow_qk_info info;
	uint32_t split_max = 0, win;
	bool in_place;

	if (!g || !p || !p->gpu || !p->queues)
		return dpflow_error_set(err, EINVAL, "params",
					"a run needs a plan, a GPU and "
					"queues");
	if (p->n_queues == 0 || p->n_queues > DPFLOW_GPU_FLOW_RUN_QUEUES_MAX)
		return dpflow_error_set(err, EINVAL, "n_queues",
					"%u queues: 1..%u", p->n_queues,
					DPFLOW_GPU_FLOW_RUN_QUEUES_MAX);
	if (p->warps_per_block > QK_WPB_MAX)
		return dpflow_error_set(err, EINVAL, "warps_per_block",
					"%u warps a block: at most %u",
					p->warps_per_block, QK_WPB_MAX);
	if (p->recv != DPFLOW_GPU_FLOW_RECV_WARP &&
	    p->recv != DPFLOW_GPU_FLOW_RECV_BLOCK)
		return dpflow_error_set(err, EINVAL, "recv",
					"unknown receive mode %d",
					(int)p->recv);
	gpu_flow_qk_info(g, p->port, &info);
	if (dpflow_gpu_device(p->gpu) != info.dev)
		return dpflow_error_set(err, EINVAL, "gpu",
					"the queues are on GPU %d, the plan "
					"on GPU %d",
					dpflow_gpu_device(p->gpu), info.dev);
	if (info.refused[0])
		return dpflow_error_set(err, ENOTSUP, "plan",
					"%s is not supported by the queue-fed "
					"kernel yet",
					info.refused);
	in_place = info.moves || info.encap;
	*room_max = 0;
	for (unsigned i = 0; i < p->n_queues; i++) {
		const struct dpflow_gpu_queue *q = p->queues[i];

		if (!q)
			return dpflow_error_set(err, EINVAL, "queues",
						"queue %u is NULL", i);
		if (q->gpu != p->gpu)
			return dpflow_error_set(err, EINVAL, "queues",
						"queue %u is of another GPU "
						"handle",
						i);
		if (in_place && q->path == DPFLOW_GPU_PATH_DEVICE)
			return dpflow_error_set(
			    err, ENOTSUP, "queues",
			    "queue %u is device-resident: the plan's actions "
			    "move frame starts or encapsulate (VLAN push or "
			    "pop, encap, decap), which the queue-fed kernel "
			    "runs on the zero-copy path only",
			    i);
		if (in_place && q->hdr_split)
			return dpflow_error_set(
			    err, ENOTSUP, "queues",
			    "queue %u splits headers (%u bytes): the plan's "
			    "actions move frame starts or encapsulate (VLAN "
			    "push or pop, encap, decap), which need whole "
			    "frames",
			    i, q->hdr_split);
		split_max = std::max(split_max, q->hdr_split);
		*room_max = std::max(*room_max, (uint32_t)q->pool->headroom +
						    q->pool->data_room);
	}
	win = p->window ? p->window : QK_WINDOW_DEFAULT;
	win = std::max(win, split_max);
	win = (win + 15) & ~15u;
	if (win > QK_WINDOW_MAX)
		return dpflow_error_set(err, EINVAL, "window",
					"a window of %u bytes (or a header "
					"split that large): at most %u",
					win, QK_WINDOW_MAX);
	memset(h, 0, sizeof(*h));
	h->poll_ns = p->poll_ns ? p->poll_ns : QK_POLL_NS_DEFAULT;
	h->root = info.root;
	h->path_max = info.path_max;
	h->window = in_place ? 0 : win;
	h->n_queues = p->n_queues;
	h->block_mode = p->recv == DPFLOW_GPU_FLOW_RECV_BLOCK;
	h->edits = info.edits;
	h->port = p->port;
	h->verdicts = p->verdicts;
	h->gen = QK_GEN_FIRST;
	return 0;
}

/* The grid: receivers, blocks, threads and shared memory; checked to fit
 * on the GPU all at once (a persistent kernel's blocks never finish). */
static int run_shape(struct dpflow_gpu_flow_run *r,
		     const struct dpflow_gpu_flow_run_params *p,
		     const struct qk_dev *h, uint32_t room_max,
		     struct dpflow_error *err)
{
	unsigned per_q = p->receivers ? p->receivers : QK_RECEIVERS_DEFAULT;
	unsigned wpb = p->warps_per_block ? p->warps_per_block : QK_WPB_DEFAULT;
	cudaDeviceProp prop;
	int per_sm = 0;

	if (h->block_mode) {
		r->blocks = per_q * p->n_queues;
		r->n_recv = r->blocks;
	} else {
		r->blocks = (per_q * p->n_queues + wpb - 1) / wpb;
		r->n_recv = r->blocks * wpb;
	}
	r->threads = wpb * 32;
	r->window = h->window;
	r->smem = h->window ? (size_t)r->threads * h->window +
				  ((room_max + 15) & ~15u) + 16
			    : 0;
	RUN_TRY(cudaGetDeviceProperties(&prop, dpflow_gpu_device(p->gpu)),
		"device properties");
	if (r->smem > prop.sharedMemPerBlockOptin)
		return dpflow_error_set(err, EINVAL, "window",
					"%zu bytes of shared memory a block "
					"(window %u, frames up to %u "
					"bytes): the GPU has %zu",
					r->smem, h->window, room_max,
					(size_t)prop.sharedMemPerBlockOptin);
	if (r->smem > 48 * 1024)
		RUN_TRY(cudaFuncSetAttribute(
			    qk_kernel,
			    cudaFuncAttributeMaxDynamicSharedMemorySize,
			    (int)r->smem),
			"shared memory of the pipeline kernel");
	RUN_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
		    &per_sm, qk_kernel, (int)r->threads, r->smem),
		"occupancy of the pipeline kernel");
	if ((long long)r->blocks > (long long)per_sm * prop.multiProcessorCount)
		return dpflow_error_set(
		    err, EINVAL, "receivers",
		    "%u blocks of %u threads (%zu bytes of shared memory "
		    "each) do not fit on %s at once: at most %d",
		    r->blocks, r->threads, r->smem, prop.name,
		    per_sm * prop.multiProcessorCount);
	return 0;
}

/* Device memory and the tx offsets of the queues; the kernel's argument. */
static int run_alloc(struct dpflow_gpu_flow_run *r,
		     const struct dpflow_gpu_flow_run_params *p,
		     struct qk_dev *h, struct dpflow_error *err)
{
	void *hp, *dp;

	RUN_TRY(cudaSetDevice(dpflow_gpu_device(p->gpu)), "selecting the GPU");
	RUN_TRY(cudaStreamCreateWithFlags(&r->stream, cudaStreamNonBlocking),
		"stream");
	if (dpflow_gpu_mem_alloc(r->gpu, sizeof(*r->d_dev), 128,
				 DPFLOW_GPU_MEM_GPU, NULL, &dp, err) < 0)
		return -ENOMEM;
	r->d_dev = (struct qk_dev *)dp;
	if (dpflow_gpu_mem_alloc(r->gpu, r->n_recv * sizeof(*r->d_rstat), 0,
				 DPFLOW_GPU_MEM_GPU, NULL, &dp, err) < 0)
		return -ENOMEM;
	r->d_rstat = (struct qk_rstat *)dp;
	if (dpflow_gpu_mem_alloc(r->gpu, sizeof(*r->d_shared), 0,
				 DPFLOW_GPU_MEM_GPU, NULL, &dp, err) < 0)
		return -ENOMEM;
	r->d_shared = (struct qk_shared *)dp;
	if (dpflow_gpu_mem_alloc(r->gpu, r->n_recv * sizeof(*r->acks), 0,
				 DPFLOW_GPU_MEM_CPU_GPU, &hp, &dp, err) < 0)
		return -ENOMEM;
	r->acks = (unsigned long long *)hp;
	r->d_acks = (unsigned long long *)dp;
	r->v = gpu_flow_versions_create(r->g, err);
	if (!r->v)
		return -ENOMEM;
	h->plan[0] =
	    (const struct gpu_pipe *)gpu_flow_versions_plan(r->g, r->v, 0);
	h->plan[1] =
	    (const struct gpu_pipe *)gpu_flow_versions_plan(r->g, r->v, 1);
	h->rstat = r->d_rstat;
	h->shared = r->d_shared;
	h->acks = r->d_acks;
	/* a queue's packets go back at their receive positions, plus the
	 * difference its claim counters already had */
	for (unsigned i = 0; i < p->n_queues; i++) {
		struct dpflow_gpu_qdev qd;

		RUN_TRY(cudaMemcpy(&qd, dpflow_gpu_queue_dev(p->queues[i]),
				   sizeof(qd), cudaMemcpyDeviceToHost),
			"reading a queue's counters");
		h->qs[i].q = dpflow_gpu_queue_dev(p->queues[i]);
		h->qs[i].tx_off = (long long)(qd.tx_claim - qd.rx_claim);
	}
	RUN_TRY(cudaMemcpy(r->d_dev, h, sizeof(*h), cudaMemcpyHostToDevice),
		"copy of the kernel's argument");
	return 0;
}

static void run_free(struct dpflow_gpu_flow_run *r)
{
	if (!r)
		return;
	dpflow_gpu_kernel_destroy(r->k);
	gpu_flow_versions_destroy(r->g, r->v);
	dpflow_gpu_mem_free(r->gpu, r->d_dev);
	dpflow_gpu_mem_free(r->gpu, r->d_rstat);
	dpflow_gpu_mem_free(r->gpu, r->d_shared);
	dpflow_gpu_mem_free(r->gpu, r->acks);
	if (r->stream)
		cudaStreamDestroy(r->stream);
	free(r);
}

struct dpflow_gpu_flow_run *
dpflow_gpu_flow_run_start(struct dpflow_gpu_flow *g,
			  const struct dpflow_gpu_flow_run_params *p,
			  struct dpflow_error *err)
{
	struct dpflow_gpu_flow_run *r;
	struct qk_dev *h;
	uint32_t room_max = 0;
	int rc;

	h = (struct qk_dev *)calloc(1, sizeof(*h));
	r = (struct dpflow_gpu_flow_run *)calloc(1, sizeof(*r));
	if (!h || !r) {
		free(h);
		free(r);
		dpflow_error_set(err, ENOMEM, NULL, "out of memory");
		return NULL;
	}
	dpflow_clock_init();
	/* nothing runs yet: the plan may be synced in place */
	rc = g && gpu_flow_qk_stale(g) ? dpflow_gpu_flow_sync(g, err) : 0;
	if (!rc)
		rc = run_check(g, p, h, &room_max, err);
	if (rc) {
		free(h);
		free(r);
		return NULL;
	}
	r->g = g;
	r->gpu = p->gpu;
	r->gen = QK_GEN_FIRST;
	rc = run_shape(r, p, h, room_max, err);
	if (!rc)
		rc = run_alloc(r, p, h, err);
	if (!rc) {
		r->k = dpflow_gpu_kernel_create(p->gpu, "gpu_flow_queue", err);
		rc = r->k ? 0 : -EIO;
	}
	if (!rc) {
		struct dpflow_gpu_kctl *ctl = dpflow_gpu_kernel_ctl(r->k);
		void *args[] = {&r->d_dev, &ctl};

		rc = dpflow_gpu_kernel_launch(r->k, (const void *)qk_kernel,
					      r->blocks, r->threads, r->smem,
					      args, err);
	}
	if (!rc) {
		rc = wait_acks(r, QK_GEN_FIRST, QK_START_NS, err);
		/* launched: free only what a stopped kernel no longer reads */
		if (rc && dpflow_gpu_kernel_stop(r->k, QK_STOP_NS, NULL) ==
			      -ETIMEDOUT) {
			free(h);
			return NULL;
		}
	}
	free(h);
	if (rc) {
		run_free(r);
		return NULL;
	}
	return r;
}

int dpflow_gpu_flow_run_sync(struct dpflow_gpu_flow_run *r, uint64_t timeout_ns,
			     struct dpflow_error *err)
{
	unsigned long long next;
	int rc;

	if (!r)
		return dpflow_error_set(err, EINVAL, "run", "no run");
	if (!gpu_flow_qk_stale(r->g))
		return 0;
	if (!timeout_ns)
		timeout_ns = QK_SYNC_NS;
	/* every receiver on the current generation: the other copy is free */
	rc = wait_acks(r, r->gen, timeout_ns, err);
	if (!rc)
		rc = gpu_flow_versions_build(r->g, r->v, (r->gen + 1) & 1, err);
	if (rc)
		return rc;
	next = r->gen + 1;
	RUN_TRY(cudaMemcpyAsync(&r->d_dev->gen, &next, sizeof(next),
				cudaMemcpyHostToDevice, r->stream),
		"publishing a generation");
	RUN_TRY(cudaStreamSynchronize(r->stream), "publishing a generation");
	r->gen = next;
	return wait_acks(r, next, timeout_ns, err);
}

uint64_t dpflow_gpu_flow_run_gen(const struct dpflow_gpu_flow_run *r)
{
	return r ? r->gen : 0;
}

struct dpflow_gpu_kernel *
dpflow_gpu_flow_run_kernel(struct dpflow_gpu_flow_run *r)
{
	return r ? r->k : NULL;
}

/* The bucket where the cumulated count passes @pct percent, in ns. */
static uint64_t lat_pct(const unsigned long long *lat, uint64_t total,
			unsigned pct)
{
	uint64_t want = (total * pct + 99) / 100, acc = 0;

	for (unsigned b = 0; b < QK_LAT_BUCKETS; b++) {
		acc += lat[b];
		if (acc >= want && acc)
			return (uint64_t)(b + 1) * QK_LAT_BUCKET_NS;
	}
	return 0;
}

int dpflow_gpu_flow_run_stats_get(struct dpflow_gpu_flow_run *r,
				  struct dpflow_gpu_flow_run_stats *st,
				  struct dpflow_error *err)
{
	struct qk_rstat *rs;
	struct qk_shared sh;
	uint64_t total = 0;
	cudaError_t rc;

	if (!r || !st)
		return dpflow_error_set(err, EINVAL, "run", "no run");
	memset(st, 0, sizeof(*st));
	rs = (struct qk_rstat *)calloc(r->n_recv, sizeof(*rs));
	if (!rs)
		return dpflow_error_set(err, ENOMEM, NULL, "out of memory");
	rc = cudaSetDevice(dpflow_gpu_device(r->gpu));
	if (rc == cudaSuccess)
		rc = cudaMemcpyAsync(rs, r->d_rstat, r->n_recv * sizeof(*rs),
				     cudaMemcpyDeviceToHost, r->stream);
	if (rc == cudaSuccess)
		rc = cudaMemcpyAsync(&sh, r->d_shared, sizeof(sh),
				     cudaMemcpyDeviceToHost, r->stream);
	if (rc == cudaSuccess)
		rc = cudaStreamSynchronize(r->stream);
	if (rc != cudaSuccess) {
		free(rs);
		return run_cuda_fail(err, rc, "reading the run's counters");
	}
	for (unsigned i = 0; i < r->n_recv; i++) {
		st->batches += rs[i].batches;
		st->pkts += rs[i].pkts;
		st->sent += rs[i].sent;
		st->staged += rs[i].staged;
		st->in_place += rs[i].in_place;
		st->split_cut += rs[i].split_cut;
		st->lost += rs[i].lost;
		st->busy_ns += rs[i].busy_ns;
	}
	free(rs);
	st->dropped = st->pkts - std::min(st->pkts, st->sent);
	for (unsigned d = 0; d < DPFLOW_DROP__COUNT; d++)
		st->drops[d] = sh.drops[d];
	for (unsigned b = 0; b < QK_LAT_BUCKETS; b++) {
		total += sh.lat[b];
		if (sh.lat[b])
			st->batch_ns_max = (uint64_t)(b + 1) * QK_LAT_BUCKET_NS;
	}
	st->batch_ns_p50 = lat_pct(sh.lat, total, 50);
	st->batch_ns_p99 = lat_pct(sh.lat, total, 99);
	st->gen = r->gen;
	st->receivers = r->n_recv;
	st->blocks = r->blocks;
	st->threads = r->threads;
	st->window = r->window;
	return 0;
}

int dpflow_gpu_flow_run_stop(struct dpflow_gpu_flow_run *r, uint64_t timeout_ns,
			     struct dpflow_gpu_flow_run_stats *st,
			     struct dpflow_error *err)
{
	struct dpflow_error e2;
	int rc;

	if (!r)
		return 0;
	if (r->stopped)
		return r->stop_rc;
	rc = dpflow_gpu_kernel_stop(r->k, timeout_ns ? timeout_ns : QK_STOP_NS,
				    err);
	if (rc == -ETIMEDOUT)
		return rc; /* still running: a later stop may try again */
	r->stopped = true;
	if (st && dpflow_gpu_flow_run_stats_get(r, st, rc ? &e2 : err) && !rc)
		rc = -EIO;
	/* the plan's own copy must hold the current generation again */
	if (!rc && ((r->gen & 1) || gpu_flow_qk_stale(r->g)))
		rc = gpu_flow_versions_build(r->g, r->v, 0, err);
	r->stop_rc = rc;
	return rc;
}

void dpflow_gpu_flow_run_destroy(struct dpflow_gpu_flow_run *r)
{
	if (!r)
		return;
	if (!r->stopped && dpflow_gpu_flow_run_stop(r, 0, NULL, NULL) &&
	    !r->stopped)
		return; /* the kernel ignores its flag: keep its memory */
	run_free(r);
}
