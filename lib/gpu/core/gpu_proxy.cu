/*
 * The CPU proxy (gpu.h): one thread per queue that feeds the receive ring
 * from a port and drains the transmit ring into a port, releasing each
 * packet at its send time (TSC-paced) and recording how late it went.
 *
 * Per iteration: receive (descriptors written, then the doorbell: a
 * release store, or on the DEVICE path one cudaMemcpyAsync of the burst's
 * frames and one of the doorbell value, in that order on the copy stream);
 * take every ready transmit descriptor (DEVICE path: copy the frames back,
 * one copy per run of adjacent frames, with a bounded wait); release what
 * is due. Nothing here blocks without a bound: port calls never wait,
 * copies are waited for at most COPY_TIMEOUT_NS, and the stop flag is
 * checked on every iteration.
 */
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "dpflow/clock.h"

#include "gpu/core/gpu_internal.h"

#define COPY_TIMEOUT_NS 1000000000ull
#define WATCH_PERIOD_NS 1000000ull
#define SPIN_AHEAD_NS	20000ull
#define SAMPLES_MAX	(1u << 20)

struct pending {
	uint32_t slot;
	uint32_t pad;
	uint64_t due_ns; /* dpflow_clock_ns() time base; 0 = now */
};

struct dpflow_gpu_proxy {
	struct dpflow_gpu_proxy_params p;
	struct dpflow_gpu_queue *q;
	struct dpflow_pool *pool;
	pthread_t thread;
	bool started;
	uint16_t burst;
	uint64_t rx_pos, tx_pos; /* next receive / transmit position */
	int64_t rt_offset;	 /* realtime ns - dpflow_clock_ns() */
	struct pending *pend;	 /* FIFO of packets waiting for their time */
	uint32_t pend_mask;
	uint64_t pend_head, pend_tail;
	uint32_t *samples; /* release errors, ns (saturated) */
	uint64_t n_samples;
	struct dpflow_gpu_proxy_stats st;
	/* shared with the controlling thread */
	int stop DPFLOW_CACHE_ALIGNED;
	int error;
	struct dpflow_error err;
	pthread_mutex_t err_lock;
};

static void fail(struct dpflow_gpu_proxy *px, const struct dpflow_error *e)
{
	pthread_mutex_lock(&px->err_lock);
	if (!px->error) {
		px->err = *e;
		__atomic_store_n(&px->error, -(e->code ? e->code : EIO),
				 __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&px->err_lock);
}

static int cuda_fail(struct dpflow_gpu_proxy *px, cudaError_t rc,
		     const char *what)
{
	struct dpflow_error e;

	dpflow_gpu_err_(&e, rc, "proxy", what);
	fail(px, &e);
	return -1;
}

static void count(uint64_t *c, uint64_t n)
{
	__atomic_store_n(c, *c + n, __ATOMIC_RELAXED);
}

/* Wait for the copy stream, at most COPY_TIMEOUT_NS. */
static int copy_wait(struct dpflow_gpu_proxy *px)
{
	uint64_t t0 = dpflow_clock_ns();

	for (;;) {
		cudaError_t rc = cudaStreamQuery(px->q->stream);

		if (rc == cudaSuccess)
			return 0;
		if (rc != cudaErrorNotReady)
			return cuda_fail(px, rc, "copy of a burst");
		if (dpflow_clock_ns() - t0 > COPY_TIMEOUT_NS) {
			struct dpflow_error e;

			dpflow_error_set(&e, ETIMEDOUT, "proxy",
					 "a copy to or from the GPU took over "
					 "1 s");
			fail(px, &e);
			return -1;
		}
	}
}

/* ---- receive ---------------------------------------------------------- */

/* Cells free for the CPU from rx_pos on, at most @n. */
static uint32_t rx_room(struct dpflow_gpu_proxy *px, uint32_t n)
{
	struct dpflow_gpu_queue *q = px->q;
	uint32_t i;

	for (i = 0; i < n; i++) {
		uint64_t p = px->rx_pos + i;

		if (__atomic_load_n(&q->rx[p & q->mask].seq,
				    __ATOMIC_ACQUIRE) != (uint32_t)p)
			break;
	}
	return i;
}

/* DEVICE path: frames that fit contiguously in the byte ring now. */
static uint32_t dev_room(struct dpflow_gpu_queue *q, uint32_t n)
{
	uint64_t free_b = q->ring_bytes - (q->bhead - q->btail);
	uint64_t to_end = q->ring_bytes - q->bhead % q->ring_bytes;
	uint64_t recs = q->n_recs - (q->rhead - q->rtail);

	if (to_end < q->copy_max && free_b >= to_end && recs > 1) {
		/* pad to the wrap with a record already given back */
		uint32_t r = (uint32_t)(q->rhead & (q->n_recs - 1));

		q->bhead += to_end;
		q->rec_end[r] = q->bhead;
		q->rec_done[r] = 1;
		q->rhead++;
		free_b -= to_end;
		to_end = q->ring_bytes;
		recs--;
	}
	free_b = std::min(free_b, to_end);
	return (uint32_t)std::min<uint64_t>(
	    {(uint64_t)n, free_b / q->copy_max, recs});
}

static int do_rx(struct dpflow_gpu_proxy *px)
{
	struct dpflow_gpu_queue *q = px->q;
	struct dpflow_pool *pool = px->pool;
	uint32_t idx[DPFLOW_BURST_MAX];
	uint32_t n = rx_room(px, px->burst);
	uint64_t b0 = q->bhead;
	uint16_t got;
	cudaError_t rc;

	if (n && q->path == DPFLOW_GPU_PATH_DEVICE) {
		n = dev_room(q, n);
		b0 = q->bhead;
	}
	if (n == 0) {
		count(&px->st.rx_ring_full, 1);
		return 0;
	}
	got = dpflow_port_rx_burst(px->p.rx_port, px->p.rx_queue, idx,
				   (uint16_t)n);
	if (got == 0)
		return 0;
	for (uint16_t i = 0; i < got; i++) {
		uint64_t pos = px->rx_pos + i;
		struct dpflow_gpu_desc *d = &q->rx[pos & q->mask];
		struct dpflow_pkt_meta *m = dpflow_pool_meta(pool, idx[i]);
		uint32_t len = m->data_len;

		d->slot = idx[i];
		d->len = (uint16_t)len;
		d->ts_ns = m->rx_ts_ns;
		d->send_ns = 0;
		d->user = 0;
		d->flags = q->hdr_split && len > q->hdr_split
			       ? DPFLOW_GPU_DESC_F_SPLIT
			       : 0;
		if (q->path == DPFLOW_GPU_PATH_ZERO_COPY) {
			d->dslot = idx[i];
			d->off = (uint16_t)(sizeof(*m) + m->data_off);
		} else {
			uint32_t c = std::min(len, q->copy_len);
			uint64_t at = q->bhead % q->ring_bytes;
			uint32_t r = (uint32_t)(q->rhead & (q->n_recs - 1));

			memcpy(q->stage + at, dpflow_pkt_data(pool, idx[i]), c);
			d->dslot = (uint32_t)(at / 64);
			d->off = 0;
			q->bhead += (c + 63) & ~63u;
			q->rec_end[r] = q->bhead;
			q->rec_done[r] = 0;
			q->rec_of_slot[idx[i]] = r;
			q->rhead++;
		}
	}
	px->rx_pos += got;
	if (q->path == DPFLOW_GPU_PATH_ZERO_COPY) {
		__atomic_store_n(q->rx_prod, px->rx_pos, __ATOMIC_RELEASE);
	} else {
		uint64_t at = b0 % q->ring_bytes;
		uint32_t r = (uint32_t)((q->rhead - 1) & (q->n_recs - 1));

		q->db_stage[r] = px->rx_pos;
		int which = 0;

		rc = cudaMemcpyAsync(q->dev_ring + at, q->stage + at,
				     q->bhead - b0, cudaMemcpyHostToDevice,
				     q->stream);
		if (rc == cudaSuccess) {
			which = 1;
			rc = cudaMemcpyAsync(&q->qdev->rx_doorbell,
					     &q->db_stage[r], 8,
					     cudaMemcpyHostToDevice, q->stream);
		}
		if (rc != cudaSuccess) {
			char what[192];

			snprintf(what, sizeof(what),
				 "cudaMemcpyAsync of a burst's %s (%llu bytes "
				 "at %llu of %llu; record %u of %u; dev %p "
				 "stage %p)",
				 which ? "doorbell" : "frames",
				 (unsigned long long)(q->bhead - b0),
				 (unsigned long long)at,
				 (unsigned long long)q->ring_bytes, r,
				 q->n_recs, (void *)q->dev_ring,
				 (void *)q->stage);
			return cuda_fail(px, rc, what);
		}
		count(&px->st.copies_h2d, 1);
	}
	count(&px->st.rx_pkts, got);
	return got;
}

/* ---- transmit --------------------------------------------------------- */

/* DEVICE path: a frame's record is given back; free bytes in order. */
static void dev_release(struct dpflow_gpu_queue *q, uint32_t slot)
{
	q->rec_done[q->rec_of_slot[slot]] = 1;
	while (q->rtail != q->rhead) {
		uint32_t r = (uint32_t)(q->rtail & (q->n_recs - 1));

		if (!q->rec_done[r])
			break;
		q->btail = q->rec_end[r];
		q->rtail++;
	}
}

static void free_slot(struct dpflow_gpu_proxy *px, uint32_t slot)
{
	if (px->q->path == DPFLOW_GPU_PATH_DEVICE)
		dev_release(px->q, slot);
	dpflow_pool_free_bulk(px->pool, &slot, 1);
}

/* DEVICE path: the frame's bytes in the ring lie inside it (a descriptor
 * the kernel wrote is not trusted). */
static bool in_ring(const struct dpflow_gpu_queue *q,
		    const struct dpflow_gpu_desc *d)
{
	return (uint64_t)d->dslot * 64 +
		   std::min<uint32_t>(d->len, q->copy_len) <=
	       q->ring_bytes;
}

/*
 * DEVICE path: copy the frames of @d[0..n) back from the device ring into
 * the staging mirror, one copy per run of adjacent frames, then into
 * their pool slots. -1 on a CUDA error.
 */
static int copy_back(struct dpflow_gpu_proxy *px, struct dpflow_gpu_desc *d,
		     uint32_t n)
{
	struct dpflow_gpu_queue *q = px->q;
	uint64_t run_a = 0, run_b = 0;
	bool in_run = false;
	cudaError_t rc;

	for (uint32_t i = 0; i <= n; i++) {
		uint64_t a = 0, b = 0;

		if (i < n) {
			if ((d[i].flags & DPFLOW_GPU_DESC_F_DROP) ||
			    !in_ring(q, &d[i]))
				continue;
			a = (uint64_t)d[i].dslot * 64;
			b = a + std::min<uint32_t>(d[i].len, q->copy_len);
			if (in_run && a >= run_a && a <= run_b + 4096) {
				run_b = std::max(run_b, b);
				continue;
			}
		}
		if (in_run) {
			rc = cudaMemcpyAsync(q->stage + run_a,
					     q->dev_ring + run_a, run_b - run_a,
					     cudaMemcpyDeviceToHost, q->stream);
			if (rc != cudaSuccess) {
				char what[128];

				snprintf(what, sizeof(what),
					 "cudaMemcpyAsync back (%llu bytes at "
					 "%llu of %llu)",
					 (unsigned long long)(run_b - run_a),
					 (unsigned long long)run_a,
					 (unsigned long long)q->ring_bytes);
				return cuda_fail(px, rc, what);
			}
			count(&px->st.copies_d2h, 1);
		}
		in_run = i < n;
		run_a = a;
		run_b = b;
	}
	if (copy_wait(px) < 0)
		return -1;
	for (uint32_t i = 0; i < n; i++) {
		if ((d[i].flags & DPFLOW_GPU_DESC_F_DROP) ||
		    d[i].slot >= px->pool->n_slots || !in_ring(q, &d[i]))
			continue;
		memcpy(dpflow_pkt_data(px->pool, d[i].slot),
		       q->stage + (uint64_t)d[i].dslot * 64,
		       std::min<uint32_t>(d[i].len, q->copy_len));
	}
	return 0;
}

/* Take ready transmit descriptors into the pending FIFO. */
static int do_tx(struct dpflow_gpu_proxy *px)
{
	struct dpflow_gpu_queue *q = px->q;
	struct dpflow_gpu_desc d[DPFLOW_BURST_MAX];
	uint64_t room = px->pend_mask + 1 - (px->pend_head - px->pend_tail);
	uint32_t n = 0;

	while (n < px->burst && n < room) {
		uint64_t p = px->tx_pos + n;
		struct dpflow_gpu_desc *c = &q->tx[p & q->mask];

		if (__atomic_load_n(&c->seq, __ATOMIC_ACQUIRE) !=
		    (uint32_t)(p + 1))
			break;
		d[n++] = *c;
	}
	if (n == 0)
		return 0;
	px->tx_pos += n;
	__atomic_store_n(q->tx_cons, px->tx_pos, __ATOMIC_RELEASE);
	if (q->path == DPFLOW_GPU_PATH_DEVICE && copy_back(px, d, n) < 0)
		return -1;
	for (uint32_t i = 0; i < n; i++) {
		struct dpflow_pkt_meta *m;
		uint32_t room_b;

		if (d[i].slot >= px->pool->n_slots) {
			count(&px->st.tx_errors, 1);
			continue;
		}
		m = dpflow_pool_meta(px->pool, d[i].slot);
		room_b = (uint32_t)px->pool->headroom + px->pool->data_room -
			 m->data_off;
		if ((d[i].flags & DPFLOW_GPU_DESC_F_DROP) || !px->p.tx_port ||
		    d[i].len > room_b) {
			if (d[i].len > room_b)
				count(&px->st.tx_errors, 1);
			else
				count(&px->st.tx_dropped, 1);
			free_slot(px, d[i].slot);
			continue;
		}
		if (q->path == DPFLOW_GPU_PATH_DEVICE)
			dev_release(q, d[i].slot);
		m->data_len = d[i].len;
		m->tx_time_ns = d[i].send_ns;
		struct pending *e = &px->pend[px->pend_head & px->pend_mask];
		e->slot = d[i].slot;
		e->due_ns =
		    d[i].send_ns
			? (uint64_t)((int64_t)d[i].send_ns - px->rt_offset)
			: 0;
		px->pend_head++;
	}
	return (int)n;
}

/* Send what is due; @flush: everything, now. */
static int do_release(struct dpflow_gpu_proxy *px, bool flush)
{
	uint32_t idx[DPFLOW_BURST_MAX];
	uint64_t due[DPFLOW_BURST_MAX];
	uint64_t now = dpflow_clock_ns();
	uint32_t n = 0;
	uint16_t sent;

	while (n < px->burst && px->pend_tail + n != px->pend_head) {
		struct pending *e =
		    &px->pend[(px->pend_tail + n) & px->pend_mask];

		if (!flush && e->due_ns > now) {
			if (n > 0 || e->due_ns - now > SPIN_AHEAD_NS)
				break;
			while ((now = dpflow_clock_ns()) < e->due_ns)
				;
		}
		idx[n] = e->slot;
		due[n] = e->due_ns;
		n++;
	}
	if (n == 0)
		return 0;
	now = dpflow_clock_ns();
	sent = dpflow_port_tx_burst(px->p.tx_port, px->p.tx_queue, px->pool,
				    idx, (uint16_t)n);
	for (uint16_t i = 0; i < sent; i++) {
		if (!due[i])
			continue;
		uint64_t late = now > due[i] ? now - due[i] : 0;

		if (px->n_samples < SAMPLES_MAX)
			px->samples[px->n_samples] =
			    (uint32_t)std::min<uint64_t>(late, UINT32_MAX);
		px->n_samples++;
		px->st.send_err_max_ns = std::max(px->st.send_err_max_ns, late);
		count(&px->st.timed, 1);
	}
	px->pend_tail += sent;
	count(&px->st.tx_pkts, sent);
	if (flush && sent < n) {
		/* the port refuses: the rest are freed at stop */
		dpflow_pool_free_bulk(px->pool, idx + sent, n - sent);
		count(&px->st.tx_errors, n - sent);
		px->pend_tail += n - sent;
	}
	return sent;
}

/* ---- the thread ------------------------------------------------------- */

static void *proxy_main(void *arg)
{
	struct dpflow_gpu_proxy *px = (struct dpflow_gpu_proxy *)arg;
	uint64_t next_watch = 0;
	struct dpflow_error e;

	if (dpflow_gpu_bind_thread(px->q->gpu, &e) < 0) {
		fail(px, &e);
		return NULL;
	}
	while (!__atomic_load_n(&px->stop, __ATOMIC_ACQUIRE)) {
		int did = 0, r;

		if (px->p.rx_port) {
			r = do_rx(px);
			if (r < 0)
				break;
			did += r;
		}
		r = do_tx(px);
		if (r < 0)
			break;
		did += r;
		if (px->p.tx_port)
			did += do_release(px, false);
		if (px->p.watch) {
			uint64_t now = dpflow_clock_ns();

			if (now >= next_watch) {
				next_watch = now + WATCH_PERIOD_NS;
				if (dpflow_gpu_kernel_poll(px->p.watch, &e) <
				    0) {
					fail(px, &e);
					break;
				}
			}
		}
		if (!did)
			__builtin_ia32_pause();
	}
	return NULL;
}

extern "C" struct dpflow_gpu_proxy *
dpflow_gpu_proxy_start(const struct dpflow_gpu_proxy_params *params,
		       struct dpflow_error *err)
{
	struct dpflow_gpu_proxy *px;
	struct dpflow_gpu_queue *q = params ? params->queue : NULL;
	uint64_t best = UINT64_MAX;

	if (!q) {
		dpflow_error_set(err, EINVAL, "queue", "no queue");
		return NULL;
	}
	if (q->proxied) {
		dpflow_error_set(err, EBUSY, "queue",
				 "the queue already has a proxy");
		return NULL;
	}
	if (params->burst > DPFLOW_BURST_MAX) {
		dpflow_error_set(err, EINVAL, "burst", "burst %u > %u",
				 params->burst, DPFLOW_BURST_MAX);
		return NULL;
	}
	dpflow_clock_init();
	px = (struct dpflow_gpu_proxy *)calloc(1, sizeof(*px));
	if (!px) {
		dpflow_error_set(err, ENOMEM, "proxy", "out of memory");
		return NULL;
	}
	px->p = *params;
	px->q = q;
	px->pool = q->pool;
	px->burst = params->burst ? params->burst : 32;
	px->pend_mask = 2 * q->size - 1;
	px->pend = (struct pending *)calloc(2 * q->size, sizeof(*px->pend));
	px->samples = (uint32_t *)calloc(SAMPLES_MAX, sizeof(uint32_t));
	pthread_mutex_init(&px->err_lock, NULL);
	if (!px->pend || !px->samples) {
		dpflow_error_set(err, ENOMEM, "proxy", "out of memory");
		goto fail;
	}
	/* realtime - TSC time, from the closest of a few paired reads */
	for (int i = 0; i < 8; i++) {
		uint64_t a = dpflow_clock_ns();
		uint64_t rt = dpflow_clock_realtime_ns();
		uint64_t b = dpflow_clock_ns();

		if (b - a < best) {
			best = b - a;
			px->rt_offset =
			    (int64_t)rt - (int64_t)(a + (b - a) / 2);
		}
	}
	/* continue where a previous proxy of this queue stopped */
	px->rx_pos = __atomic_load_n(q->rx_prod, __ATOMIC_ACQUIRE);
	if (q->path == DPFLOW_GPU_PATH_DEVICE)
		px->rx_pos = q->db_stage[(q->rhead - 1) & (q->n_recs - 1)] *
			     (q->rhead != 0);
	px->tx_pos = __atomic_load_n(q->tx_cons, __ATOMIC_ACQUIRE);
	if (pthread_create(&px->thread, NULL, proxy_main, px) != 0) {
		dpflow_error_set(err, EAGAIN, "proxy",
				 "cannot start the proxy thread");
		goto fail;
	}
	px->started = true;
	q->proxied = true;
	return px;
fail:
	pthread_mutex_destroy(&px->err_lock);
	free(px->pend);
	free(px->samples);
	free(px);
	return NULL;
}

extern "C" int dpflow_gpu_proxy_error(struct dpflow_gpu_proxy *px,
				      struct dpflow_error *err)
{
	int ret = __atomic_load_n(&px->error, __ATOMIC_ACQUIRE);

	if (ret && err) {
		pthread_mutex_lock(&px->err_lock);
		*err = px->err;
		pthread_mutex_unlock(&px->err_lock);
	}
	return ret;
}

extern "C" void dpflow_gpu_proxy_stats_get(struct dpflow_gpu_proxy *px,
					   struct dpflow_gpu_proxy_stats *st)
{
	uint64_t *dst = (uint64_t *)st;
	const uint64_t *src = (const uint64_t *)&px->st;

	for (size_t i = 0; i < sizeof(*st) / 8; i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}

/* Percentile @pct of the release errors (sorts the samples). */
static uint64_t percentile(struct dpflow_gpu_proxy *px, unsigned pct)
{
	uint64_t n = std::min<uint64_t>(px->n_samples, SAMPLES_MAX);

	if (n == 0)
		return 0;
	return px->samples[std::min<uint64_t>(n - 1, n * pct / 100)];
}

/* After the thread: free receive descriptors the GPU never took. */
static void flush_rx(struct dpflow_gpu_proxy *px)
{
	struct dpflow_gpu_queue *q = px->q;
	uint64_t from = px->rx_pos > q->size ? px->rx_pos - q->size : 0;

	for (uint64_t p = from; p < px->rx_pos; p++) {
		struct dpflow_gpu_desc *d = &q->rx[p & q->mask];

		if (__atomic_load_n(&d->seq, __ATOMIC_ACQUIRE) == (uint32_t)p) {
			free_slot(px, d->slot);
			/* mark it taken so a later proxy does not reuse it */
			__atomic_store_n(&d->seq, (uint32_t)(p + q->size),
					 __ATOMIC_RELEASE);
		}
	}
}

extern "C" int dpflow_gpu_proxy_stop(struct dpflow_gpu_proxy *px,
				     struct dpflow_gpu_proxy_stats *stats,
				     struct dpflow_error *err)
{
	int ret;

	if (!px)
		return 0;
	__atomic_store_n(&px->stop, 1, __ATOMIC_RELEASE);
	if (px->started)
		pthread_join(px->thread, NULL);
	dpflow_gpu_bind_thread(px->q->gpu, NULL);
	/* what the GPU finished goes out now; a CUDA failure leaves it */
	if (!px->error) {
		while (do_tx(px) > 0)
			;
	}
	while (px->pend_tail != px->pend_head) {
		if (!px->p.tx_port) {
			free_slot(px,
				  px->pend[px->pend_tail & px->pend_mask].slot);
			px->pend_tail++;
			continue;
		}
		do_release(px, true);
	}
	flush_rx(px);
	std::sort(px->samples,
		  px->samples + std::min<uint64_t>(px->n_samples, SAMPLES_MAX));
	px->st.send_err_p50_ns = percentile(px, 50);
	px->st.send_err_p99_ns = percentile(px, 99);
	if (stats)
		*stats = px->st;
	ret = dpflow_gpu_proxy_error(px, err);
	px->q->proxied = false;
	pthread_mutex_destroy(&px->err_lock);
	free(px->pend);
	free(px->samples);
	free(px);
	return ret;
}
