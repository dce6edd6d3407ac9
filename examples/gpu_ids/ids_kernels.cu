/*
 * dpflow-gpu-ids: the two persistent kernels.
 *
 * Receive kernel, one block per batch (IDS_THREADS threads, one packet
 * each): takes up to `batch` packets with dpflow_gpu_dev_rx_block, parses
 * them with dpflow's own parser (lib/parse/parse_impl.h, the code the CPU
 * target runs), drops everything that is not TCP at once, writes the TCP
 * packets into its next semaphore item and marks it READY. Items come back
 * DONE (or ERROR) from the analysis kernel in the order they were posted:
 * the receive block then forwards or drops each packet by its verdict and
 * sets the item FREE.
 *
 * Analysis kernel, block b serving receive block b's items in order: marks
 * an item HOLD while working on it, scans every packet's TCP payload for
 * the rules (one warp per packet: the payload copied into shared memory,
 * then each lane testing every 32nd start position), flags matches, inserts
 * each flagged flow into a device hash set and, for a flow not seen before,
 * builds one alert packet in a pool slot kept for alerts and posts it to the
 * transmit ring. Then DONE, or ERROR when an alert could not be sent.
 *
 * Shutdown: the host raises the receive kernel's exit flag; each receive
 * block takes back every item still out, then posts EXIT in its next item;
 * the analysis block sees it, sets the item FREE and returns. The analysis
 * kernel's own exit flag is a backstop for a receive kernel that died.
 *
 * Memory order: a block writes a payload with many threads, so each writer
 * fences (__threadfence) before the barrier after which thread 0 sets the
 * state (a release); the reader's thread 0 acquires the state, and every
 * reader fences after the barrier that passes it on, as rx_block does.
 */
#include <cuda/atomic>

#include "parse/parse_impl.h"

#include "ids.h"

#define FULL_MASK 0xffffffffu

#define RX_WAIT_NS   20000ull  /* one receive call waits this long */
#define ITEM_POLL_NS 100000ull /* one wait for an item's state */
#define TX_WAIT_NS                                                          \
	1000000000ull		   /* transmit room: the proxy drains the   \
				     ring all the time, so a second without \
				     room means it stopped */
#define EXIT_ITEM_NS  500000000ull /* at exit, per item still out */
#define ITEM_STOPPING (-2)	   /* analysis: own exit flag raised */

#define SEM_BIT(s) DPFLOW_GPU_SEM_BIT(DPFLOW_GPU_SEM_##s)

typedef cuda::atomic_ref<uint32_t, cuda::thread_scope_device> dev_u32;

/* Thread 0's running totals, published to CPU_GPU memory when changed. */
__device__ static void publish(struct ids_counters *dst,
			       const struct ids_counters *src)
{
	volatile uint64_t *d = (volatile uint64_t *)dst;
	const uint64_t *s = (const uint64_t *)src;

	for (unsigned i = 0; i < sizeof(*src) / 8; i++)
		d[i] = s[i];
}

/* ---- receive kernel ---------------------------------------------------- */

/*
 * Parse @pkt; for an (outer) TCP packet fill @k and the payload's place and
 * return true. Malformed packets, other protocols and tunnelled traffic
 * (the outer header is UDP or GRE) are not TCP here.
 */
__device__ static bool parse_tcp(const struct dpflow_gpu_pkt *pkt,
				 struct ids_pkt *out)
{
	struct dpflow_pkt_meta m;
	const struct dpflow_hdr *h = &m.outer;
	struct ids_flow_key *k = &out->key;
	uint32_t end;

	if (dpflow_parse_frame_impl(pkt->data, pkt->hdr_len, &m) !=
	    DPFLOW_DROP_NONE)
		return false;
	if (h->l4_type != DPFLOW_L4_TCP)
		return false;
	/* the IP datagram's end: Ethernet padding is not payload */
	end = (uint32_t)h->l3_off + h->l3_len;
	if (end > pkt->hdr_len)
		end = pkt->hdr_len;
	memcpy(k->src, h->src, sizeof(k->src));
	memcpy(k->dst, h->dst, sizeof(k->dst));
	k->sport = h->sport;
	k->dport = h->dport;
	k->ipver = h->l3_type == DPFLOW_L3_IPV4 ? 4 : 6;
	k->proto = DPFLOW_IPPROTO_TCP;
	k->pad[0] = k->pad[1] = 0;
	out->pkt = *pkt;
	out->pay_off = h->pay_off;
	out->pay_len = (uint16_t)(end > h->pay_off ? end - h->pay_off : 0);
	out->verdict = 0;
	return true;
}

/*
 * Whole block: take the @n packets at receive positions @first.. Non-TCP
 * ones go straight back with the drop flag; TCP ones fill @item's batch,
 * which is marked READY. Returns whether the item was posted (no TCP
 * packet: nothing to analyse, the item stays FREE).
 */
__device__ static bool take_batch(const struct ids_rx_args *a,
				  struct ids_counters *t, uint32_t item,
				  uint64_t first, uint32_t n)
{
	__shared__ uint32_t sh_tcp, sh_other;
	struct ids_batch *b =
	    (struct ids_batch *)dpflow_gpu_dev_sem_payload(a->sem, item);
	struct dpflow_gpu_pkt pkt;
	uint32_t i = threadIdx.x, rank = 0, n_tcp, n_other;
	bool mine = i < n, tcp = false;
	uint64_t tx_first;

	if (i == 0)
		sh_tcp = sh_other = 0;
	__syncthreads();
	if (mine) {
		struct ids_pkt p;

		dpflow_gpu_dev_rx_pkt(a->q, first + i, &pkt);
		tcp = parse_tcp(&pkt, &p);
		if (tcp)
			b->pkt[atomicAdd(&sh_tcp, 1u)] = p;
		else
			rank = atomicAdd(&sh_other, 1u);
	}
	__threadfence(); /* batch entries before thread 0's READY */
	__syncthreads();
	n_tcp = sh_tcp;
	n_other = sh_other;

	/* every packet received goes back through the transmit ring */
	if (n_other) {
		if (dpflow_gpu_dev_tx_reserve_block(a->q, n_other, TX_WAIT_NS,
						    &tx_first)) {
			if (mine && !tcp)
				dpflow_gpu_dev_tx_pkt(
				    a->q, tx_first + rank, &pkt, 0,
				    DPFLOW_GPU_DESC_F_DROP, 0);
		} else if (i == 0) {
			t->lost += n_other;
		}
	}
	if (i == 0) {
		t->rx += n;
		t->tcp += n_tcp;
		t->non_tcp += n_other;
		if (n_tcp) {
			b->n = n_tcp;
			dpflow_gpu_dev_sem_set(a->sem, item,
					       DPFLOW_GPU_SEM_READY);
			t->batches++;
		}
	}
	return n_tcp != 0;
}

/*
 * Whole block: forward or drop the @n packets of an analysed batch by
 * their verdicts (flagged ones are dropped unless monitoring).
 */
__device__ static void give_back(const struct ids_rx_args *a,
				 struct ids_counters *t,
				 const struct ids_batch *b, uint32_t n)
{
	uint32_t i = threadIdx.x;
	uint32_t verdict = i < n ? b->pkt[i].verdict : 0;
	bool drop = verdict != 0 && !a->monitor;
	uint32_t n_drop = (uint32_t)__syncthreads_count(drop);
	uint64_t first;

	if (!dpflow_gpu_dev_tx_reserve_block(a->q, n, TX_WAIT_NS, &first)) {
		if (i == 0)
			t->lost += n;
		return;
	}
	if (i < n)
		dpflow_gpu_dev_tx_pkt(a->q, first + i, &b->pkt[i].pkt, 0,
				      drop ? DPFLOW_GPU_DESC_F_DROP : 0,
				      verdict);
	if (i == 0) {
		t->forwarded += n - n_drop;
		t->dropped_flagged += n_drop;
	}
}

/*
 * Whole block: take back the analysed items from number @done on, in the
 * order they were posted, at most @max of them, waiting up to @wait_ns for
 * the first. Returns the new number of items taken back.
 */
__device__ static uint64_t complete_items(const struct ids_rx_args *a,
					  struct ids_counters *t, uint64_t done,
					  uint64_t posted, uint32_t max,
					  uint64_t wait_ns)
{
	__shared__ int sh_st;
	const uint32_t base = blockIdx.x * a->items;

	for (uint32_t k = 0; k < max && done < posted; k++) {
		uint32_t item = base + (uint32_t)(done % a->items);
		const struct ids_batch *b =
		    (const struct ids_batch *)dpflow_gpu_dev_sem_payload(a->sem,
									 item);
		int st;

		if (threadIdx.x == 0)
			sh_st = dpflow_gpu_dev_sem_wait(
			    a->sem, item, SEM_BIT(DONE) | SEM_BIT(ERROR),
			    k == 0 ? wait_ns : 0);
		__syncthreads();
		st = sh_st;
		__syncthreads(); /* sh_st is written again next round */
		if (st < 0)
			break;
		cuda::atomic_thread_fence(cuda::memory_order_acquire,
					  cuda::thread_scope_system);
		give_back(a, t, b, b->n);
		__syncthreads(); /* every verdict read before the reuse */
		if (threadIdx.x == 0) {
			t->error_items += st == DPFLOW_GPU_SEM_ERROR;
			dpflow_gpu_dev_sem_set(a->sem, item,
					       DPFLOW_GPU_SEM_FREE);
		}
		done++;
	}
	return done;
}

/*
 * The receive kernel. Block b owns semaphore items b*items .. b*items +
 * items - 1 and uses them as a ring: `posted` items were marked READY,
 * `done` of them came back; at most `items` are out at once.
 */
__global__ void __launch_bounds__(IDS_THREADS)
    ids_rx_kernel(struct ids_rx_args a)
{
	struct ids_counters t = {};
	struct ids_counters *ctr = &a.ctr[blockIdx.x];
	const uint32_t base = blockIdx.x * a.items;
	uint64_t posted = 0, done = 0;

	/* thread 0 reads the flag (host memory) for the whole block */
	while (
	    !__syncthreads_or(threadIdx.x == 0 && dpflow_gpu_dev_exit(a.ctl))) {
		uint64_t first, was = done;
		uint32_t n;

		done = complete_items(&a, &t, done, posted, a.items, 0);
		if (posted - done == a.items) {
			/* every item is out: wait for the oldest */
			done = complete_items(&a, &t, done, posted, 1,
					      ITEM_POLL_NS);
		} else {
			n = dpflow_gpu_dev_rx_block(a.q, a.batch, RX_WAIT_NS,
						    &first);
			if (n) {
				uint32_t item =
				    base + (uint32_t)(posted % a.items);

				posted +=
				    take_batch(&a, &t, item, first, n) ? 1 : 0;
				was = UINT64_MAX; /* counters changed */
			}
		}
		if (threadIdx.x == 0 && done != was)
			publish(ctr, &t);
	}

	/* The analysis kernel still runs: take back what is out. */
	while (done < posted) {
		uint64_t d =
		    complete_items(&a, &t, done, posted, a.items, EXIT_ITEM_NS);

		if (d == done)
			break; /* the analysis kernel is gone */
		done = d;
	}
	if (threadIdx.x == 0) {
		uint32_t item = base + (uint32_t)(posted % a.items);

		/* the analysis block waits on exactly this item next */
		if (done == posted &&
		    dpflow_gpu_dev_sem_wait(a.sem, item, SEM_BIT(FREE), 0) >= 0)
			dpflow_gpu_dev_sem_set(a.sem, item,
					       DPFLOW_GPU_SEM_EXIT);
		t.stuck_items = posted - done;
		publish(ctr, &t);
	}
}

/* ---- analysis kernel --------------------------------------------------- */

/* Per item, in shared memory: what the block's warps found. */
struct an_tally {
	uint32_t flagged, alerts, lost, error;
};

/*
 * Whole warp: does @sig (@sig_len bytes) occur in @pay (@len bytes, in
 * shared memory)? Lane l tests the start positions l, l + 32, ...: a naive
 * memmem per lane, the warp stopping at the first step where any lane hit.
 */
__device__ static bool warp_find(const uint8_t *pay, uint32_t len,
				 const uint8_t *sig, uint32_t sig_len,
				 uint32_t lane)
{
	uint32_t last;

	if (sig_len == 0 || sig_len > len)
		return false;
	last = len - sig_len;
	for (uint32_t at = 0; at <= last; at += 32) {
		uint32_t pos = at + lane;
		bool hit = pos <= last && pay[pos] == sig[0];

		for (uint32_t j = 1; hit && j < sig_len; j++)
			hit = pay[pos + j] == sig[j];
		if (__any_sync(FULL_MASK, hit))
			return true;
	}
	return false;
}

/* Whole warp: the lowest rule id found in the payload, or -1. */
__device__ static int warp_match(const struct ids_rules *r, const uint8_t *pay,
				 uint32_t len, uint32_t lane)
{
	for (uint32_t i = 0; i < r->n; i++)
		if (warp_find(pay, len, r->bytes[i], r->len[i], lane))
			return (int)i;
	return -1;
}

/* FNV-1a over the whole key (its padding is zero). */
__device__ static uint32_t flow_hash(const struct ids_flow_key *k)
{
	const uint8_t *p = (const uint8_t *)k;
	uint32_t h = 2166136261u;

	for (unsigned i = 0; i < sizeof(*k); i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

__device__ static bool flow_equal(const struct ids_flow_key *x,
				  const struct ids_flow_key *y)
{
	const uint8_t *a = (const uint8_t *)x, *b = (const uint8_t *)y;

	for (unsigned i = 0; i < sizeof(*x); i++)
		if (a[i] != b[i])
			return false;
	return true;
}

enum flow_insert_result { FLOW_NEW, FLOW_SEEN, FLOW_FULL };

/*
 * Add @k to the flagged-flow set, lock-free: an empty entry is claimed
 * with a CAS (EMPTY -> BUSY), its key written, then published FULL with a
 * release store; a thread meeting a BUSY entry waits for it to turn FULL
 * (its writer is a running thread a few stores from done). So exactly one
 * thread in the whole run gets FLOW_NEW for a flow.
 */
__device__ static enum flow_insert_result
flow_insert(const struct ids_an_args *a, const struct ids_flow_key *k,
	    uint32_t rule)
{
	uint32_t h = flow_hash(k);

	for (uint32_t i = 0; i <= a->flow_mask; i++) {
		struct ids_flow_entry *e = &a->flows[(h + i) & a->flow_mask];
		dev_u32 st(e->state);
		uint32_t s = st.load(cuda::memory_order_acquire);

		if (s == IDS_FLOW_EMPTY &&
		    st.compare_exchange_strong(s, IDS_FLOW_BUSY,
					       cuda::memory_order_acquire)) {
			e->key = *k;
			e->rule = rule;
			st.store(IDS_FLOW_FULL, cuda::memory_order_release);
			return FLOW_NEW;
		}
		while (s == IDS_FLOW_BUSY) {
			__nanosleep(32);
			s = st.load(cuda::memory_order_acquire);
		}
		if (flow_equal(&e->key, k))
			return FLOW_SEEN;
	}
	return FLOW_FULL;
}

__device__ static void put16(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

__device__ static void put32(uint8_t *p, uint32_t v)
{
	put16(p, v >> 16);
	put16(p + 2, v);
}

/* The alert frame (format in ids.h), built in registers, then copied. */
__device__ static void build_alert(uint8_t *frame, const struct ids_an_args *a,
				   const struct ids_flow_key *k, uint32_t rule,
				   uint32_t number, uint64_t ts_ns)
{
	uint8_t f[IDS_ALERT_FRAME_LEN];
	uint8_t *ip = f + 14, *udp = ip + 20, *pay = udp + 8;
	uint32_t sum = 0;

	memset(f, 0, sizeof(f));
	memcpy(f, a->dst_mac, 6);
	memcpy(f + 6, a->src_mac, 6);
	put16(f + 12, DPFLOW_ETHERTYPE_IPV4);
	ip[0] = 0x45;
	put16(ip + 2, IDS_ALERT_FRAME_LEN - 14);
	put16(ip + 4, number);
	put16(ip + 6, 0x4000); /* don't fragment */
	ip[8] = 64;
	ip[9] = DPFLOW_IPPROTO_UDP;
	memcpy(ip + 12, a->src_ip, 4);
	memcpy(ip + 16, a->dst_ip, 4);
	for (unsigned i = 0; i < 20; i += 2)
		sum += dpflow_rd16(ip + i);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	put16(ip + 10, ~sum & 0xffff);
	put16(udp, a->src_port);
	put16(udp + 2, a->dst_port);
	put16(udp + 4, 8 + IDS_ALERT_PAYLOAD_LEN);
	memcpy(pay, IDS_ALERT_MAGIC, 4);
	pay[4] = IDS_ALERT_VERSION;
	pay[5] = (uint8_t)rule;
	pay[6] = k->ipver;
	pay[7] = k->proto;
	put16(pay + 8, k->sport);
	put16(pay + 10, k->dport);
	put32(pay + 12, number);
	memcpy(pay + 16, k->src, 16);
	memcpy(pay + 32, k->dst, 16);
	put32(pay + 48, (uint32_t)(ts_ns >> 32));
	put32(pay + 52, (uint32_t)ts_ns);
	for (unsigned i = 0; i < sizeof(f); i++)
		frame[i] = f[i];
}

/*
 * One thread: send the alert for flow @k in the next alert slot. False
 * when no slot is left or the transmit ring stays full (the slot then
 * stays unsent, and the host frees it).
 */
__device__ static bool send_alert(const struct ids_an_args *a,
				  const struct ids_pkt *p, uint32_t rule)
{
	uint32_t n = atomicAdd(a->alert_next, 1u);
	struct dpflow_gpu_pkt out;
	uint64_t pos;
	uint32_t slot;

	if (n >= a->n_alert)
		return false;
	slot = a->alert_slot[n];
	out.data = dpflow_pkt_data(&a->pool, slot);
	out.len = out.hdr_len = IDS_ALERT_FRAME_LEN;
	out.ts_ns = p->pkt.ts_ns;
	out.slot = out.dslot = slot; /* zero-copy: the GPU addresses the
					pool slot itself */
	out.off =
	    (uint16_t)(out.data - (uint8_t *)dpflow_pool_meta(&a->pool, slot));
	out.flags = 0;
	build_alert(out.data, a, &p->key, rule, n, p->pkt.ts_ns);
	if (!dpflow_gpu_dev_tx_reserve_thread(a->q, 1, TX_WAIT_NS, &pos))
		return false;
	/*
	 * Marked sent before it is published (tx_pkt's release orders the
	 * two): the host counts alerts from these marks, so it never sees
	 * an alert transmitted but not yet counted.
	 */
	cuda::atomic_ref<uint32_t, cuda::thread_scope_system>(a->alert_sent[n])
	    .store(1, cuda::memory_order_relaxed);
	dpflow_gpu_dev_tx_pkt(a->q, pos, &out, 0, 0, IDS_ALERT_USER);
	return true;
}

/*
 * One thread: record @rule's verdict on @p; for a flagged packet of a flow
 * not seen before, send the alert.
 */
__device__ static void flag(const struct ids_an_args *a, struct ids_pkt *p,
			    int rule, struct an_tally *t)
{
	p->verdict = rule < 0 ? 0 : (uint32_t)rule + 1;
	if (rule < 0)
		return;
	atomicAdd(&t->flagged, 1u);
	switch (flow_insert(a, &p->key, (uint32_t)rule)) {
	case FLOW_SEEN:
		return;
	case FLOW_NEW:
		if (send_alert(a, p, (uint32_t)rule)) {
			atomicAdd(&t->alerts, 1u);
			return;
		}
		break;
	case FLOW_FULL:
		break;
	}
	atomicAdd(&t->lost, 1u);
	t->error = 1;
}

/*
 * Whole warp: analyse one packet; lane 0 records the verdict. The payload
 * is in host memory (zero-copy): the warp first copies it into @buf in
 * shared memory, each lane loading every 32nd byte (independent loads,
 * many in flight), so the scan then reads no PCIe at all.
 */
__device__ static void analyse_pkt(const struct ids_an_args *a,
				   struct ids_pkt *p, uint8_t *buf,
				   uint32_t lane, struct an_tally *t)
{
	const uint8_t *pay = p->pkt.data + p->pay_off;
	uint32_t len =
	    p->pay_len < IDS_PAYLOAD_MAX ? p->pay_len : IDS_PAYLOAD_MAX;
	int rule;

#pragma unroll 4
	for (uint32_t j = lane; j < len; j += 32)
		buf[j] = pay[j];
	__syncwarp();
	rule = warp_match(a->rules, buf, len, lane);
	if (lane == 0)
		flag(a, p, rule, t);
	__syncwarp(); /* buf is reused for the warp's next packet */
}

/* The analysis kernel; block b serves receive block b's items in order. */
__global__ void __launch_bounds__(IDS_THREADS)
    ids_an_kernel(struct ids_an_args a)
{
	__shared__ int sh_st;
	__shared__ struct an_tally sh_t;
	__shared__ uint8_t sh_pay[IDS_THREADS / 32][IDS_PAYLOAD_MAX];
	struct ids_counters t = {};
	struct ids_counters *ctr = &a.ctr[blockIdx.x];
	const uint32_t base = blockIdx.x * a.items;
	const uint32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32;
	const uint32_t n_warps = blockDim.x / 32;

	for (uint64_t seq = 0;;) {
		uint32_t item = base + (uint32_t)(seq % a.items);
		struct ids_batch *b =
		    (struct ids_batch *)dpflow_gpu_dev_sem_payload(a.sem, item);
		int st;

		if (threadIdx.x == 0) {
			st = dpflow_gpu_dev_sem_wait(
			    a.sem, item, SEM_BIT(READY) | SEM_BIT(EXIT),
			    ITEM_POLL_NS);
			if (st < 0 && dpflow_gpu_dev_exit(a.ctl))
				st = ITEM_STOPPING;
			else if (st == DPFLOW_GPU_SEM_READY)
				dpflow_gpu_dev_sem_set(a.sem, item,
						       DPFLOW_GPU_SEM_HOLD);
			sh_st = st;
			sh_t = an_tally{};
		}
		__syncthreads();
		st = sh_st;
		__syncthreads(); /* sh_st is written again next round */
		if (st == DPFLOW_GPU_SEM_EXIT || st == ITEM_STOPPING) {
			if (threadIdx.x == 0 && st == DPFLOW_GPU_SEM_EXIT)
				dpflow_gpu_dev_sem_set(a.sem, item,
						       DPFLOW_GPU_SEM_FREE);
			break;
		}
		if (st < 0)
			continue; /* nothing yet: the same item again */
		cuda::atomic_thread_fence(cuda::memory_order_acquire,
					  cuda::thread_scope_system);
		uint32_t n = b->n;

		for (uint32_t i = warp; i < n; i += n_warps)
			analyse_pkt(&a, &b->pkt[i], sh_pay[warp], lane, &sh_t);
		__threadfence(); /* verdicts before thread 0's DONE */
		__syncthreads();
		if (threadIdx.x == 0) {
			t.items++;
			t.analysed += n;
			t.flagged += sh_t.flagged;
			t.alerts += sh_t.alerts;
			t.alerts_lost += sh_t.lost;
			publish(ctr, &t);
			dpflow_gpu_dev_sem_set(a.sem, item,
					       sh_t.error
						   ? DPFLOW_GPU_SEM_ERROR
						   : DPFLOW_GPU_SEM_DONE);
		}
		seq++;
	}
	if (threadIdx.x == 0)
		publish(ctr, &t);
}

/* ---- host side --------------------------------------------------------- */

static int cuda_error(struct dpflow_error *err, cudaError_t rc,
		      const char *what)
{
	return dpflow_error_set(err, EIO, "cuda", "%s: %s (%s)", what,
				cudaGetErrorString(rc), cudaGetErrorName(rc));
}

/*
 * The two kernels wait on each other, so both must be resident at once.
 * With lazy module loading (CUDA's default since 12.2) the first launch of
 * a kernel may wait for the kernels already running: the second launch
 * would wait for the first kernel, which waits for the second. dpflow
 * asks for eager loading when it starts CUDA; loading both here as well
 * keeps the sample right when CUDA_MODULE_LOADING=LAZY is set by hand.
 */
int ids_kernels_load(struct dpflow_error *err)
{
	struct cudaFuncAttributes fa;
	cudaError_t rc;

	rc = cudaFuncGetAttributes(&fa, (const void *)ids_rx_kernel);
	if (rc == cudaSuccess)
		rc = cudaFuncGetAttributes(&fa, (const void *)ids_an_kernel);
	if (rc != cudaSuccess)
		return cuda_error(err, rc, "loading the kernels");
	return 0;
}

int ids_rx_launch(struct dpflow_gpu_kernel *k, unsigned blocks,
		  const struct ids_rx_args *args, struct dpflow_error *err)
{
	struct ids_rx_args a = *args;
	void *argv[] = {&a};

	return dpflow_gpu_kernel_launch(k, (const void *)ids_rx_kernel, blocks,
					IDS_THREADS, 0, argv, err);
}

int ids_an_launch(struct dpflow_gpu_kernel *k, unsigned blocks,
		  const struct ids_an_args *args, struct dpflow_error *err)
{
	struct ids_an_args a = *args;
	void *argv[] = {&a};

	return dpflow_gpu_kernel_launch(k, (const void *)ids_an_kernel, blocks,
					IDS_THREADS, 0, argv, err);
}
