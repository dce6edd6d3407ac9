/*
 * The AF_XDP port backend: a Linux network interface through XDP sockets
 * (libxdp's xsk API over libbpf).
 *
 *   afxdp:IFNAME[,queues=N][,start_queue=Q][,mode=auto|native|skb]
 *               [,copy=auto|on|off][,frames=N]
 *
 * Queue i of the port is an XDP socket bound to the interface's receive
 * queue start_queue + i, each with a UMEM of its own (`frames` frames of
 * 4 KiB, default 4096: half on the fill ring for receiving, half for
 * transmitting). libxdp attaches its default XDP program, which redirects
 * every frame of a bound queue to its socket; the program stays while any
 * socket of the interface is open.
 *
 * Modes. `mode` is how the XDP program attaches: `native` in the driver,
 * `skb` (generic XDP, any interface, slower), `auto` (native where the
 * driver has it, else skb). `copy`: `auto` lets the kernel use zero-copy
 * where the driver supports it and copy mode otherwise; `off` demands
 * zero-copy (the open fails without it); `on` forces copy mode. The mode
 * the kernel chose is logged at open (`dpflow_log`, module "afxdp").
 *
 * Data path. rx_burst peeks the receive ring, copies each frame into a
 * slot of the port's pool (a frame larger than the data room: rx_oversize;
 * no slot free: rx_nobuf; either way the frame goes back to the fill
 * ring), and refills the fill ring with the frames it read. tx_burst first
 * takes back the frames the kernel completed, copies each packet into a
 * free frame, submits the descriptors and wakes the kernel when it asks
 * (XDP_USE_NEED_WAKEUP); packets it has no frame or ring room for stay
 * with the caller. The copy into the pool keeps the pool the one place
 * packets live (docs/design.md: the pool is not the UMEM yet). Frames the
 * kernel dropped for want of fill-ring room or receive-ring room are read
 * from XDP_STATISTICS into rx_dropped.
 *
 * Check (dpflow_port_open_check) reads every key with open's code and
 * looks the interface up; it opens no socket and attaches no program, so
 * what only the kernel can refuse (mode, copy, queues) is left to open.
 *
 * Needs CAP_NET_ADMIN and CAP_BPF (root). Threads: one per queue for
 * rx_burst, one per queue for tx_burst.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/if_link.h>
#include <linux/if_xdp.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include <stdarg.h>
#include <xdp/libxdp.h>
#include <xdp/xsk.h>

#include "dpflow/clock.h"
#include "dpflow/log.h"
#include "dpflow/port.h"

#include "io/port_internal.h"

#define AFX_QUEUES_MAX	   64
#define AFX_FRAME_SIZE	   XSK_UMEM__DEFAULT_FRAME_SIZE /* 4096 */
#define AFX_FRAMES_DEFAULT 4096u
#define AFX_FRAMES_MIN	   64u
#define AFX_FRAMES_MAX	   (1u << 20)

#ifndef SOL_XDP
#define SOL_XDP 283
#endif

struct afx_queue {
	struct xsk_umem *umem;
	struct xsk_socket *xsk;
	void *area; /* frames x AFX_FRAME_SIZE */
	struct xsk_ring_prod fill, tx;
	struct xsk_ring_cons comp, rx;
	/* transmit frames not in the kernel's hands: a stack of addresses */
	uint64_t *tx_free;
	uint32_t n_tx_free;
	uint32_t tx_in_flight;
	struct port_queue_ctrs ctr;
};

struct port_afxdp {
	struct dpflow_port up;
	char ifname[IF_NAMESIZE];
	uint32_t start_queue;
	uint32_t frames; /* per queue */
	uint32_t libxdp_flags;
	uint16_t bind_flags;
	bool zerocopy_required;
	struct afx_queue q[AFX_QUEUES_MAX];
};

static struct port_afxdp *afx_port(struct dpflow_port *port)
{
	return (struct port_afxdp *)port;
}

/* ---- receive ------------------------------------------------------------ */

/* Put @n frames of @addrs back on the fill ring (it has room: every frame
 * of the receive half is either there or being read). */
static void afx_refill(struct afx_queue *q, const uint64_t *addrs, uint32_t n)
{
	uint32_t at;

	while (n && xsk_ring_prod__reserve(&q->fill, n, &at) != n)
		; /* cannot happen: the fill ring holds every receive frame */
	for (uint32_t i = 0; i < n; i++)
		*xsk_ring_prod__fill_addr(&q->fill, at + i) = addrs[i];
	xsk_ring_prod__submit(&q->fill, n);
}

static uint16_t afx_rx_burst(struct dpflow_port *port, uint16_t queue,
			     uint32_t *idx, uint16_t n)
{
	struct port_afxdp *p = afx_port(port);
	struct afx_queue *q = &p->q[queue];
	struct dpflow_pool *pool = port->pool;
	uint64_t bytes = 0, nobuf = 0, oversize = 0, now;
	uint64_t addrs[DPFLOW_BURST_MAX];
	uint32_t at, got;
	uint16_t k = 0;

	got = xsk_ring_cons__peek(&q->rx, n, &at);
	if (!got) {
		/* a driver in zero-copy mode may wait for a wakeup before it
		 * takes frames from the fill ring again */
		if (xsk_ring_prod__needs_wakeup(&q->fill))
			recvfrom(xsk_socket__fd(q->xsk), NULL, 0, MSG_DONTWAIT,
				 NULL, NULL);
		return 0;
	}
	now = dpflow_clock_ns();
	for (uint32_t i = 0; i < got; i++) {
		const struct xdp_desc *d =
		    xsk_ring_cons__rx_desc(&q->rx, at + i);
		uint64_t addr = xsk_umem__add_offset_to_addr(d->addr);
		struct dpflow_pkt_meta *m;

		addrs[i] = xsk_umem__extract_addr(d->addr);
		if (d->len > pool->data_room) {
			oversize++;
			continue;
		}
		if (!dpflow_pool_alloc_burst(pool, &idx[k], 1)) {
			nobuf++;
			continue;
		}
		m = dpflow_pool_meta(pool, idx[k]);
		memcpy(dpflow_pkt_data(pool, idx[k]),
		       xsk_umem__get_data(q->area, addr), d->len);
		m->data_len = (uint16_t)d->len;
		m->port = port->id;
		m->queue = queue;
		m->rx_ts_ns = now;
		bytes += d->len;
		k++;
	}
	xsk_ring_cons__release(&q->rx, got);
	afx_refill(q, addrs, got);
	if (k) {
		port_ctr_add(&q->ctr.rx_pkts, k);
		port_ctr_add(&q->ctr.rx_bytes, bytes);
	}
	if (nobuf)
		port_ctr_add(&q->ctr.rx_nobuf, nobuf);
	if (oversize)
		port_ctr_add(&q->ctr.rx_oversize, oversize);
	return k;
}

/* ---- transmit ----------------------------------------------------------- */

/* Frames the kernel has sent, back on the free stack. */
static void afx_reclaim(struct afx_queue *q)
{
	uint32_t at,
	    n = xsk_ring_cons__peek(&q->comp, DPFLOW_BURST_MAX * 4, &at);

	for (uint32_t i = 0; i < n; i++)
		q->tx_free[q->n_tx_free++] =
		    *xsk_ring_cons__comp_addr(&q->comp, at + i);
	if (n) {
		xsk_ring_cons__release(&q->comp, n);
		q->tx_in_flight -= n;
	}
}

static uint16_t afx_tx_burst(struct dpflow_port *port, uint16_t queue,
			     struct dpflow_pool *pool, const uint32_t *idx,
			     uint16_t n)
{
	struct port_afxdp *p = afx_port(port);
	struct afx_queue *q = &p->q[queue];
	uint64_t bytes = 0;
	uint32_t at, k;

	afx_reclaim(q);
	k = n < q->n_tx_free ? n : q->n_tx_free;
	if (k)
		k = xsk_ring_prod__reserve(&q->tx, k, &at);
	for (uint32_t i = 0; i < k; i++) {
		const struct dpflow_pkt_meta *m =
		    dpflow_pool_meta(pool, idx[i]);
		struct xdp_desc *d = xsk_ring_prod__tx_desc(&q->tx, at + i);
		uint64_t addr = q->tx_free[--q->n_tx_free];

		memcpy(xsk_umem__get_data(q->area, addr),
		       dpflow_pkt_data(pool, idx[i]), m->data_len);
		d->addr = addr;
		d->len = m->data_len;
		d->options = 0;
		bytes += m->data_len;
	}
	if (k) {
		xsk_ring_prod__submit(&q->tx, k);
		q->tx_in_flight += k;
		dpflow_pool_free_bulk(pool, idx, k);
		port_ctr_add(&q->ctr.tx_pkts, k);
		port_ctr_add(&q->ctr.tx_bytes, bytes);
	}
	/* a kick also when nothing was taken: the kernel may hold completions
	 * until it is woken */
	if ((k || q->tx_in_flight) && xsk_ring_prod__needs_wakeup(&q->tx) &&
	    sendto(xsk_socket__fd(q->xsk), NULL, 0, MSG_DONTWAIT, NULL, 0) <
		0 &&
	    errno != EAGAIN && errno != EBUSY && errno != ENOBUFS &&
	    errno != ENETDOWN)
		port_ctr_add(&q->ctr.tx_errors, 1);
	return (uint16_t)k;
}

/* ---- control ------------------------------------------------------------ */

static void afx_stats(const struct dpflow_port *port,
		      struct dpflow_port_stats *s)
{
	const struct port_afxdp *p = (const struct port_afxdp *)port;

	for (unsigned i = 0; i < port->n_rxq; i++) {
		const struct afx_queue *q = &p->q[i];
		struct xdp_statistics xs;
		socklen_t len = sizeof(xs);

		port_queue_ctrs_sum(&q->ctr, s);
		if (q->xsk && !getsockopt(xsk_socket__fd(q->xsk), SOL_XDP,
					  XDP_STATISTICS, &xs, &len)) {
			s->rx_dropped += xs.rx_dropped + xs.rx_ring_full +
					 xs.rx_fill_ring_empty_descs;
			s->tx_errors += xs.tx_invalid_descs;
		}
	}
}

static void afx_queue_close(struct port_afxdp *p, struct afx_queue *q)
{
	if (q->xsk)
		xsk_socket__delete(q->xsk);
	if (q->umem)
		xsk_umem__delete(q->umem);
	if (q->area)
		munmap(q->area, (size_t)p->frames * AFX_FRAME_SIZE);
	free(q->tx_free);
	memset(q, 0, sizeof(*q));
}

static void afx_close(struct dpflow_port *port)
{
	struct port_afxdp *p = afx_port(port);

	for (unsigned i = 0; i < AFX_QUEUES_MAX; i++)
		afx_queue_close(p, &p->q[i]);
}

static int afx_fail(struct dpflow_error *err, const struct port_args *args,
		    const char *field, const char *what, int code)
{
	if (code < 0)
		code = -code;
	if (!code)
		code = EINVAL;
	dpflow_error_set(err, code, field, "%s: %s: %s", args->uri, what,
			 strerror(code));
	return -code;
}

static int afx_queue_open(struct port_afxdp *p, unsigned i,
			  const struct port_args *args,
			  struct dpflow_error *err)
{
	struct afx_queue *q = &p->q[i];
	size_t size = (size_t)p->frames * AFX_FRAME_SIZE;
	uint32_t half = p->frames / 2, at;
	struct xsk_umem_config ucfg;
	struct xsk_socket_config scfg;
	struct xdp_options opts;
	socklen_t olen = sizeof(opts);
	char what[96];
	int rc;

	q->area = mmap(NULL, size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (q->area == MAP_FAILED) {
		q->area = NULL;
		return afx_fail(err, args, "frames", "UMEM memory", errno);
	}
	q->tx_free = calloc(half, sizeof(*q->tx_free));
	if (!q->tx_free)
		return afx_fail(err, args, "frames", "UMEM memory", ENOMEM);
	memset(&ucfg, 0, sizeof(ucfg));
	ucfg.fill_size = half;
	ucfg.comp_size = half;
	ucfg.frame_size = AFX_FRAME_SIZE;
	ucfg.frame_headroom = 0;
	rc = xsk_umem__create(&q->umem, q->area, size, &q->fill, &q->comp,
			      &ucfg);
	if (rc)
		return afx_fail(err, args, "frames", "registering the UMEM",
				rc);
	memset(&scfg, 0, sizeof(scfg));
	scfg.rx_size = half;
	scfg.tx_size = half;
	scfg.libxdp_flags = 0;
	scfg.xdp_flags = p->libxdp_flags;
	scfg.bind_flags = (uint16_t)(p->bind_flags | XDP_USE_NEED_WAKEUP);
	rc = xsk_socket__create(&q->xsk, p->ifname, p->start_queue + i, q->umem,
				&q->rx, &q->tx, &scfg);
	if (rc) {
		q->xsk = NULL;
		snprintf(what, sizeof(what),
			 "XDP socket on queue %u (mode, copy or queue not "
			 "supported by the interface?)",
			 p->start_queue + i);
		return afx_fail(err, args,
				p->zerocopy_required ? "copy" : "interface",
				what, rc);
	}
	/* the first half of the frames receives, the second transmits */
	if (xsk_ring_prod__reserve(&q->fill, half, &at) != half)
		return afx_fail(err, args, "frames", "filling the fill ring",
				ENOSPC);
	for (uint32_t f = 0; f < half; f++)
		*xsk_ring_prod__fill_addr(&q->fill, at + f) =
		    (uint64_t)f * AFX_FRAME_SIZE;
	xsk_ring_prod__submit(&q->fill, half);
	for (uint32_t f = 0; f < half; f++)
		q->tx_free[f] = (uint64_t)(half + f) * AFX_FRAME_SIZE;
	q->n_tx_free = half;
	if (!getsockopt(xsk_socket__fd(q->xsk), SOL_XDP, XDP_OPTIONS, &opts,
			&olen))
		DPFLOW_LOG_INFO(
		    "afxdp", "%s queue %u: %s", p->ifname, p->start_queue + i,
		    opts.flags & XDP_OPTIONS_ZEROCOPY ? "zero-copy"
						      : "copy mode");
	return 0;
}

/* An unsigned argument in [lo, hi]; 0 or -EINVAL with @err. */
static int afx_arg_u32(const struct port_args *args, const struct port_arg *a,
		       const char *field, uint32_t lo, uint32_t hi,
		       uint32_t *out, struct dpflow_error *err)
{
	uint64_t v;

	if (port_arg_u64(args, a, field, lo, hi, &v, err))
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

/* @a's value among @names (NULL-terminated): its index in *@out. */
static int afx_arg_enum(const struct port_args *args, const struct port_arg *a,
			const char *field, const char *const *names,
			unsigned *out, struct dpflow_error *err)
{
	if (port_arg_need_value(args, a, field, err))
		return -EINVAL;
	for (unsigned i = 0; names[i]; i++)
		if (!strcmp(a->val, names[i])) {
			*out = i;
			return 0;
		}
	return dpflow_error_set(err, EINVAL, field, "%s: %s=%s: expected %s",
				args->uri, a->key, a->val,
				!strcmp(field, "mode") ? "auto, native or skb"
						       : "auto, on or off");
}

/* libbpf's and libxdp's messages ("no bpffs, loading the program without
 * the dispatcher") into dpflow's log at debug level. */
static void __attribute__((format(printf, 2, 0)))
afx_log(const char *lib, const char *fmt, va_list ap)
{
	char line[256];
	size_t n;

	vsnprintf(line, sizeof(line), fmt, ap);
	n = strlen(line);
	if (n && line[n - 1] == '\n')
		line[n - 1] = 0;
	DPFLOW_LOG_DEBUG("afxdp", "%s: %s", lib, line);
}

static int __attribute__((format(printf, 2, 0)))
afx_libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	(void)level;
	afx_log("libbpf", fmt, ap);
	return 0;
}

static int __attribute__((format(printf, 2, 0)))
afx_libxdp_print(enum libxdp_print_level level, const char *fmt, va_list ap)
{
	(void)level;
	afx_log("libxdp", fmt, ap);
	return 0;
}

/* What an afxdp URI asks for (mode, copy: indices in modes[], copies[]). */
struct afx_conf {
	const char *ifname;
	uint32_t queues, start_queue, frames;
	unsigned mode, copy;
};

/*
 * The keys of @args into @c, for open and check alike: every key, the
 * frame count and the interface, which must exist.
 */
static int afx_args(const struct port_args *args, struct afx_conf *c,
		    struct dpflow_error *err)
{
	static const char *const modes[] = {"auto", "native", "skb", NULL};
	static const char *const copies[] = {"auto", "on", "off", NULL};
	bool seen[5] = {false};
	int rc = 0;

	memset(c, 0, sizeof(*c));
	c->queues = 1;
	c->frames = AFX_FRAMES_DEFAULT;
	for (unsigned i = 0; i < args->n; i++) {
		const struct port_arg *a = &args->a[i];

		if (!a->val && !c->ifname) {
			c->ifname = a->key;
			continue;
		}
		if (!strcmp(a->key, "queues"))
			rc = port_arg_once(args, a, "queues", &seen[0], err) ||
			     afx_arg_u32(args, a, "queues", 1, AFX_QUEUES_MAX,
					 &c->queues, err);
		else if (!strcmp(a->key, "start_queue"))
			rc = port_arg_once(args, a, "start_queue", &seen[1],
					   err) ||
			     afx_arg_u32(args, a, "start_queue", 0, 4095,
					 &c->start_queue, err);
		else if (!strcmp(a->key, "mode"))
			rc =
			    port_arg_once(args, a, "mode", &seen[2], err) ||
			    afx_arg_enum(args, a, "mode", modes, &c->mode, err);
		else if (!strcmp(a->key, "copy"))
			rc = port_arg_once(args, a, "copy", &seen[3], err) ||
			     afx_arg_enum(args, a, "copy", copies, &c->copy,
					  err);
		else if (!strcmp(a->key, "frames"))
			rc = port_arg_once(args, a, "frames", &seen[4], err) ||
			     afx_arg_u32(args, a, "frames", AFX_FRAMES_MIN,
					 AFX_FRAMES_MAX, &c->frames, err);
		else
			rc = port_arg_unknown(args, a, err);
		if (rc)
			return -EINVAL;
	}
	if (!c->ifname || !*c->ifname)
		return dpflow_error_set(err, EINVAL, "interface",
					"%s: needs an interface name "
					"(afxdp:IFNAME)",
					args->uri);
	if (strlen(c->ifname) >= IF_NAMESIZE || !if_nametoindex(c->ifname))
		return dpflow_error_set(err, ENODEV, "interface",
					"%s: no interface '%s'", args->uri,
					c->ifname);
	if (c->frames & (c->frames - 1))
		return dpflow_error_set(err, EINVAL, "frames",
					"%s: frames=%u: a power of two",
					args->uri, c->frames);
	return 0;
}

static int afx_open(struct dpflow_port *port, const struct port_args *args,
		    struct dpflow_error *err)
{
	struct port_afxdp *p = afx_port(port);
	struct afx_conf c;
	int rc;

	libbpf_set_print(afx_libbpf_print);
	libxdp_set_print(afx_libxdp_print);
	rc = afx_args(args, &c, err);
	if (rc)
		return rc;
	snprintf(p->ifname, sizeof(p->ifname), "%s", c.ifname);
	p->start_queue = c.start_queue;
	p->frames = c.frames;
	p->libxdp_flags = c.mode == 1	? XDP_FLAGS_DRV_MODE
			  : c.mode == 2 ? XDP_FLAGS_SKB_MODE
					: 0;
	p->bind_flags = c.copy == 1 ? XDP_COPY : c.copy == 2 ? XDP_ZEROCOPY : 0;
	p->zerocopy_required = c.copy == 2;
	port->n_rxq = (uint16_t)c.queues;
	port->n_txq = (uint16_t)c.queues;
	for (unsigned i = 0; i < c.queues; i++) {
		rc = afx_queue_open(p, i, args, err);
		if (rc) {
			afx_close(port);
			return rc;
		}
	}
	return 0;
}

/* Check: the keys and the interface; no socket, no XDP program. */
static int afx_check(const struct port_args *args, struct dpflow_pool *pool,
		     char *paths[2], struct dpflow_error *err)
{
	struct afx_conf c;

	(void)pool;
	(void)paths;
	return afx_args(args, &c, err);
}

const struct dpflow_port_ops dpflow_port_afxdp_ops = {
    .kind = "afxdp",
    .size = sizeof(struct port_afxdp),
    .open = afx_open,
    .check = afx_check,
    .rx_burst = afx_rx_burst,
    .tx_burst = afx_tx_burst,
    .stats = afx_stats,
    .close = afx_close,
};
