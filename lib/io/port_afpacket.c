/*
 * The AF_PACKET port backend: a Linux network interface through packet
 * sockets, a TPACKET_V3 receive ring per queue and batched transmit.
 *
 *   afpacket:IFNAME[,queues=N][,blocks=N][,block_size=BYTES][,fanout=ID]
 *                  [,qdisc_bypass][,txtime=0|1]
 *
 * Each queue is one packet socket bound to the interface, with a receive
 * ring of `blocks` blocks (default 64) of `block_size` bytes (default 256
 * KiB, a multiple of the page size) mapped into the process. With several
 * queues the sockets join one fanout group (PACKET_FANOUT_HASH, group id
 * `fanout`, default derived from the process id and the interface), so the
 * kernel spreads flows over them by its flow hash, which is the same for
 * both directions of a flow. The port sees only what arrives: packets it
 * (or anyone on the host) sends out of the interface are ignored
 * (PACKET_IGNORE_OUTGOING).
 *
 * rx_burst copies each frame from the ring into a slot of the port's pool
 * (the ring belongs to the kernel; a frame larger than the slot's data
 * room is dropped and counted in rx_oversize, one with no slot free is
 * dropped and counted in rx_nobuf) and hands a block back to the kernel
 * once every frame of it is read; the receive time is the kernel's
 * timestamp. A frame sent on this host with checksum offload arrives
 * without its TCP/UDP checksum (TP_STATUS_CSUMNOTREADY): the port computes
 * it (dpflow_csum_l4_complete), so that what it forwards is what the wire
 * would carry. tx_burst sends a burst with one sendmmsg() call
 * (MSG_DONTWAIT: what the socket does not take now stays with the caller);
 * `qdisc_bypass` skips the interface's queueing
 * discipline. Frames the kernel dropped because the ring was full are read from
 * PACKET_STATISTICS and reported in rx_dropped.
 *
 * `txtime=1` turns on timed transmit (docs/txtime.md): every socket gets
 * SO_TXTIME on CLOCK_TAI with SOF_TXTIME_REPORT_ERRORS, and a packet with
 * meta->tx_time_ns set (dpflow_clock_ns() time base) is sent with an
 * SCM_TXTIME message carrying that time on CLOCK_TAI. The offset between
 * the two clocks is sampled by the transmitting thread at most once a
 * millisecond. An ETF qdisc on the interface holds each packet until its
 * time; without one the kernel sends at once. Packets the qdisc refused
 * (time in the past, or none) come back on the socket's error queue: stats
 * reads them and counts them in tx_errors.
 *
 * Check (dpflow_port_open_check) reads every key with open's code and
 * looks the interface up; it opens no socket, so what only the kernel can
 * refuse (CAP_NET_RAW, txtime, the ring's memory) is left to open.
 *
 * Needs CAP_NET_RAW. Threads: one per queue for rx_burst, one per queue
 * for tx_burst, as every port.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <time.h> /* before linux/errqueue.h, which needs timespec */

#include <linux/errqueue.h>
#include <linux/if_packet.h>
#include <linux/net_tstamp.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>

#include "dpflow/clock.h"
#include "dpflow/pkt_edit.h"
#include "dpflow/port.h"

#include "io/port_internal.h"

#define AFP_QUEUES_MAX	     64
#define AFP_BLOCKS_DEFAULT   64
#define AFP_BLOCK_SIZE_DFLT  (256u << 10)
#define AFP_BLOCK_SIZE_MAX   (64u << 20)
#define AFP_RING_BYTES_MAX   (1ull << 31)
#define AFP_FRAME_SIZE	     2048 /* tp_frame_size: a V3 ring ignores it */
#define AFP_BLOCK_TIMEOUT_MS 1

#ifndef PACKET_IGNORE_OUTGOING
#define PACKET_IGNORE_OUTGOING 23
#endif
#ifndef SO_TXTIME
#define SO_TXTIME 61
#endif
#ifndef SCM_TXTIME
#define SCM_TXTIME SO_TXTIME
#endif
#define AFP_TAI_SYNC_NS 1000000ull /* resample the CLOCK_TAI offset */

struct afp_queue {
	int fd;
	uint8_t *ring; /* blocks x block_size, mapped */
	/* receive position: the block being read and the next frame in it */
	unsigned block;
	bool in_block; /* block is ours (TP_STATUS_USER) and being read */
	uint32_t left; /* frames of the block not yet read */
	struct tpacket3_hdr *next;
	struct port_queue_ctrs ctr;
	int64_t tai_off;       /* CLOCK_TAI - dpflow_clock_ns(), txtime */
	uint64_t tai_sync_tsc; /* when it was sampled (0: never) */
};

struct port_afpacket {
	struct dpflow_port up;
	char ifname[IF_NAMESIZE];
	int ifindex;
	unsigned blocks;
	uint32_t block_size;
	uint16_t fanout;
	bool qdisc_bypass;
	bool txtime; /* SO_TXTIME on every socket */
	/* kernel ring drops, read at stats (any thread) */
	uint64_t kernel_drops;
	/* packets the qdisc refused (txtime error queue), read at stats */
	uint64_t txtime_errors;
	struct afp_queue q[AFP_QUEUES_MAX];
};

static inline struct port_afpacket *afp_port(struct dpflow_port *port)
{
	return (struct port_afpacket *)port;
}

static inline struct tpacket_block_desc *
afp_block(struct afp_queue *q, const struct port_afpacket *p, unsigned b)
{
	return (struct tpacket_block_desc *)(q->ring +
					     (size_t)b * p->block_size);
}

/* ---- receive ---------------------------------------------------------- */

/* Hand the current block back and move to the next one. */
static void afp_block_done(struct port_afpacket *p, struct afp_queue *q)
{
	struct tpacket_block_desc *bd = afp_block(q, p, q->block);

	__atomic_store_n(&bd->hdr.bh1.block_status, TP_STATUS_KERNEL,
			 __ATOMIC_RELEASE);
	q->block = (q->block + 1) % p->blocks;
	q->in_block = false;
}

/*
 * The next frame of the ring, or NULL when the kernel holds the next
 * block. A block goes back to the kernel when the frame after its last
 * one is asked for (or at the end of rx_burst), so the caller may read
 * the frame returned until its next call.
 */
static struct tpacket3_hdr *afp_next_frame(struct port_afpacket *p,
					   struct afp_queue *q)
{
	for (;;) {
		struct tpacket3_hdr *h;

		if (!q->in_block) {
			struct tpacket_block_desc *bd =
			    afp_block(q, p, q->block);

			if (!(__atomic_load_n(&bd->hdr.bh1.block_status,
					      __ATOMIC_ACQUIRE) &
			      TP_STATUS_USER))
				return NULL;
			q->left = bd->hdr.bh1.num_pkts;
			q->next =
			    (struct tpacket3_hdr *)((uint8_t *)bd +
						    bd->hdr.bh1
							.offset_to_first_pkt);
			q->in_block = true;
		}
		if (!q->left) {
			afp_block_done(p, q);
			continue;
		}
		h = q->next;
		q->left--;
		q->next =
		    (struct tpacket3_hdr *)((uint8_t *)h + h->tp_next_offset);
		return h;
	}
}

static uint16_t afp_rx_burst(struct dpflow_port *port, uint16_t queue,
			     uint32_t *idx, uint16_t n)
{
	struct port_afpacket *p = afp_port(port);
	struct afp_queue *q = &p->q[queue];
	struct dpflow_pool *pool = port->pool;
	uint64_t bytes = 0, nobuf = 0, oversize = 0;
	uint16_t k = 0;

	while (k < n) {
		struct tpacket3_hdr *h = afp_next_frame(p, q);
		struct dpflow_pkt_meta *m;
		uint32_t len;
		bool tagged;

		if (!h)
			break;
		len = h->tp_snaplen;
		/* a VLAN tag the kernel took off (hardware or its own
		 * untagging) goes back in: the port hands on the frame as
		 * the wire carried it */
		tagged = (h->tp_status & TP_STATUS_VLAN_VALID) && len >= 12;
		if (len + (tagged ? 4 : 0) > pool->data_room) {
			oversize++;
			continue;
		}
		if (!dpflow_pool_alloc_burst(pool, &idx[k], 1)) {
			nobuf++;
			continue;
		}
		m = dpflow_pool_meta(pool, idx[k]);
		if (tagged) {
			uint8_t *d = dpflow_pkt_data(pool, idx[k]);
			const uint8_t *f = (uint8_t *)h + h->tp_mac;
			uint16_t tpid = h->tp_status & TP_STATUS_VLAN_TPID_VALID
					    ? h->hv1.tp_vlan_tpid
					    : ETH_P_8021Q;

			memcpy(d, f, 12);
			d[12] = (uint8_t)(tpid >> 8);
			d[13] = (uint8_t)tpid;
			d[14] = (uint8_t)(h->hv1.tp_vlan_tci >> 8);
			d[15] = (uint8_t)h->hv1.tp_vlan_tci;
			memcpy(d + 16, f + 12, len - 12);
			len += 4;
		} else {
			memcpy(dpflow_pkt_data(pool, idx[k]),
			       (uint8_t *)h + h->tp_mac, len);
		}
		if (h->tp_status & TP_STATUS_CSUMNOTREADY)
			dpflow_csum_l4_complete(dpflow_pkt_data(pool, idx[k]),
						len);
		m->data_len = (uint16_t)len;
		m->port = port->id;
		m->queue = queue;
		m->rx_ts_ns = (uint64_t)h->tp_sec * 1000000000ull + h->tp_nsec;
		bytes += len;
		k++;
	}
	/* the block's frames all read: give it back now, not at the next
	 * call */
	if (q->in_block && !q->left)
		afp_block_done(p, q);
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

/* ---- transmit ---------------------------------------------------------- */

/* One SCM_TXTIME control message. */
union afp_txtime_ctl {
	char buf[CMSG_SPACE(sizeof(uint64_t))];
	struct cmsghdr align;
};

/*
 * CLOCK_TAI - dpflow_clock_ns() for queue @q, resampled at most once every
 * AFP_TAI_SYNC_NS (the TSC and CLOCK_TAI drift apart by the clock
 * discipline's corrections). The TAI reading is bracketed by two TSC
 * readings and set against their middle.
 */
static int64_t afp_tai_offset(struct afp_queue *q)
{
	uint64_t now = dpflow_tsc();

	if (DPFLOW_UNLIKELY(!q->tai_sync_tsc ||
			    now - q->tai_sync_tsc >
				dpflow_ns_to_tsc(AFP_TAI_SYNC_NS))) {
		struct timespec ts;
		uint64_t t0 = dpflow_clock_ns(), t1;

		clock_gettime(CLOCK_TAI, &ts);
		t1 = dpflow_clock_ns();
		q->tai_off = (int64_t)((uint64_t)ts.tv_sec * 1000000000ull +
				       (uint64_t)ts.tv_nsec) -
			     (int64_t)(t0 + (t1 - t0) / 2);
		q->tai_sync_tsc = now;
	}
	return q->tai_off;
}

static uint16_t afp_tx_burst(struct dpflow_port *port, uint16_t queue,
			     struct dpflow_pool *pool, const uint32_t *idx,
			     uint16_t n)
{
	struct port_afpacket *p = afp_port(port);
	struct afp_queue *q = &p->q[queue];
	struct mmsghdr msg[DPFLOW_BURST_MAX];
	struct iovec iov[DPFLOW_BURST_MAX];
	union afp_txtime_ctl ctl[DPFLOW_BURST_MAX];
	uint64_t bytes = 0;
	int sent;

	memset(msg, 0, n * sizeof(*msg));
	for (uint16_t i = 0; i < n; i++) {
		const struct dpflow_pkt_meta *m =
		    dpflow_pool_meta(pool, idx[i]);

		iov[i].iov_base = dpflow_pkt_data(pool, idx[i]);
		iov[i].iov_len = m->data_len;
		msg[i].msg_hdr.msg_iov = &iov[i];
		msg[i].msg_hdr.msg_iovlen = 1;
		if (p->txtime && m->tx_time_ns) {
			struct cmsghdr *c = &ctl[i].align;
			uint64_t tai =
			    m->tx_time_ns + (uint64_t)afp_tai_offset(q);

			msg[i].msg_hdr.msg_control = ctl[i].buf;
			msg[i].msg_hdr.msg_controllen = sizeof(ctl[i].buf);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_TXTIME;
			c->cmsg_len = CMSG_LEN(sizeof(tai));
			memcpy(CMSG_DATA(c), &tai, sizeof(tai));
		}
	}
	sent = sendmmsg(q->fd, msg, n, MSG_DONTWAIT);
	if (sent < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS)
			return 0;
		/* the frame at fault (too long, link down): dropped, counted,
		 * so that one bad frame does not stop the queue */
		port_ctr_add(&q->ctr.tx_errors, 1);
		dpflow_pool_free_bulk(pool, idx, 1);
		return 1;
	}
	for (int i = 0; i < sent; i++)
		bytes += iov[i].iov_len;
	port_ctr_add(&q->ctr.tx_pkts, (uint64_t)sent);
	port_ctr_add(&q->ctr.tx_bytes, bytes);
	dpflow_pool_free_bulk(pool, idx, (unsigned)sent);
	return (uint16_t)sent;
}

/* ---- open and close ---------------------------------------------------- */

static int afp_fail(struct dpflow_error *err, const struct port_args *args,
		    const char *field, const char *what)
{
	int code = errno ? errno : EINVAL;

	dpflow_error_set(err, code, field, "%s: %s: %s", args->uri, what,
			 strerror(code));
	return -code;
}

static int afp_queue_open(struct port_afpacket *p, struct afp_queue *q,
			  const struct port_args *args,
			  struct dpflow_error *err)
{
	struct tpacket_req3 req;
	struct sockaddr_ll sll;
	int v = TPACKET_V3, one = 1;

	q->fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
	if (q->fd < 0)
		return afp_fail(err, args, "kind",
				"packet socket (needs CAP_NET_RAW)");
	if (setsockopt(q->fd, SOL_PACKET, PACKET_VERSION, &v, sizeof(v)))
		return afp_fail(err, args, "kind", "TPACKET_V3");
	/* only what arrives (kernels before 4.20 lack the option: there the
	 * port also sees what it sends) */
	(void)setsockopt(q->fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one,
			 sizeof(one));
	if (p->qdisc_bypass &&
	    setsockopt(q->fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one,
		       sizeof(one)))
		return afp_fail(err, args, "qdisc_bypass",
				"PACKET_QDISC_BYPASS");
	if (p->txtime) {
		struct sock_txtime st = {.clockid = CLOCK_TAI,
					 .flags = SOF_TXTIME_REPORT_ERRORS};

		if (setsockopt(q->fd, SOL_SOCKET, SO_TXTIME, &st, sizeof(st)))
			return afp_fail(err, args, "txtime",
					"txtime=1: SO_TXTIME on CLOCK_TAI "
					"(Linux 4.19+, CAP_NET_ADMIN)");
	}
	memset(&req, 0, sizeof(req));
	req.tp_block_size = p->block_size;
	req.tp_block_nr = p->blocks;
	req.tp_frame_size = AFP_FRAME_SIZE;
	req.tp_frame_nr =
	    (unsigned)((uint64_t)p->block_size * p->blocks / AFP_FRAME_SIZE);
	req.tp_retire_blk_tov = AFP_BLOCK_TIMEOUT_MS;
	if (setsockopt(q->fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof(req)))
		return afp_fail(err, args, "blocks", "receive ring");
	q->ring =
	    mmap(NULL, (size_t)p->block_size * p->blocks,
		 PROT_READ | PROT_WRITE, MAP_SHARED | MAP_LOCKED, q->fd, 0);
	if (q->ring == MAP_FAILED)
		q->ring = mmap(NULL, (size_t)p->block_size * p->blocks,
			       PROT_READ | PROT_WRITE, MAP_SHARED, q->fd, 0);
	if (q->ring == MAP_FAILED) {
		q->ring = NULL;
		return afp_fail(err, args, "blocks", "mapping the ring");
	}
	memset(&sll, 0, sizeof(sll));
	sll.sll_family = AF_PACKET;
	sll.sll_protocol = htons(ETH_P_ALL);
	sll.sll_ifindex = p->ifindex;
	if (bind(q->fd, (struct sockaddr *)&sll, sizeof(sll)))
		return afp_fail(err, args, "kind", "bind to the interface");
	if (p->up.n_rxq > 1) {
		int fo = p->fanout | PACKET_FANOUT_HASH << 16;

		if (setsockopt(q->fd, SOL_PACKET, PACKET_FANOUT, &fo,
			       sizeof(fo)))
			return afp_fail(err, args, "fanout",
					"joining the fanout group");
	}
	return 0;
}

static void afp_close(struct dpflow_port *port)
{
	struct port_afpacket *p = afp_port(port);

	for (unsigned i = 0; i < AFP_QUEUES_MAX; i++) {
		struct afp_queue *q = &p->q[i];

		if (q->ring)
			munmap(q->ring, (size_t)p->block_size * p->blocks);
		if (q->fd >= 0)
			close(q->fd);
		q->ring = NULL;
		q->fd = -1;
	}
}

/* What an afpacket URI asks for. */
struct afp_conf {
	const char *ifname;
	int ifindex;
	uint64_t queues, blocks, block_size, fanout, txtime;
	bool qdisc_bypass;
};

/*
 * The keys of @args into @c, for open and check alike: every key, the
 * ring's geometry and the interface, which must exist.
 */
static int afp_args(const struct port_args *args, struct afp_conf *c,
		    struct dpflow_error *err)
{
	bool seen[5] = {false};
	long page = sysconf(_SC_PAGESIZE);
	int rc;

	memset(c, 0, sizeof(*c));
	c->queues = 1;
	c->blocks = AFP_BLOCKS_DEFAULT;
	c->block_size = AFP_BLOCK_SIZE_DFLT;
	for (unsigned i = 0; i < args->n; i++) {
		const struct port_arg *a = &args->a[i];

		if (!a->val && !strcmp(a->key, "qdisc_bypass")) {
			c->qdisc_bypass = true;
			continue;
		}
		if (!a->val && !c->ifname) {
			c->ifname = a->key;
			continue;
		}
		if (!strcmp(a->key, "queues"))
			rc = port_arg_once(args, a, "queues", &seen[0], err) ||
			     port_arg_u64(args, a, "queues", 1, AFP_QUEUES_MAX,
					  &c->queues, err);
		else if (!strcmp(a->key, "blocks"))
			rc = port_arg_once(args, a, "blocks", &seen[1], err) ||
			     port_arg_u64(args, a, "blocks", 2, 65536,
					  &c->blocks, err);
		else if (!strcmp(a->key, "block_size"))
			rc = port_arg_once(args, a, "block_size", &seen[2],
					   err) ||
			     port_arg_u64(args, a, "block_size", 4096,
					  AFP_BLOCK_SIZE_MAX, &c->block_size,
					  err);
		else if (!strcmp(a->key, "fanout"))
			rc = port_arg_once(args, a, "fanout", &seen[3], err) ||
			     port_arg_u64(args, a, "fanout", 1, 65535,
					  &c->fanout, err);
		else if (!strcmp(a->key, "txtime"))
			rc = port_arg_once(args, a, "txtime", &seen[4], err) ||
			     port_arg_u64(args, a, "txtime", 0, 1, &c->txtime,
					  err);
		else
			rc = port_arg_unknown(args, a, err);
		if (rc)
			return -EINVAL;
	}
	if (!c->ifname || strlen(c->ifname) >= IF_NAMESIZE)
		return dpflow_error_set(err, EINVAL, "interface",
					"%s: an interface name is needed "
					"(afpacket:eth0)",
					args->uri);
	if (page > 0 && c->block_size % (uint64_t)page)
		return dpflow_error_set(
		    err, EINVAL, "block_size",
		    "%s: block_size %llu: a multiple of "
		    "the page size (%ld)",
		    args->uri, (unsigned long long)c->block_size, page);
	if (c->block_size * c->blocks > AFP_RING_BYTES_MAX)
		return dpflow_error_set(
		    err, EINVAL, "blocks",
		    "%s: a ring of %llu bytes: at most %llu", args->uri,
		    (unsigned long long)(c->block_size * c->blocks),
		    AFP_RING_BYTES_MAX);
	c->ifindex = (int)if_nametoindex(c->ifname);
	if (!c->ifindex)
		return dpflow_error_set(err, ENODEV, "interface",
					"%s: no interface '%s'", args->uri,
					c->ifname);
	return 0;
}

static int afp_open(struct dpflow_port *port, const struct port_args *args,
		    struct dpflow_error *err)
{
	struct port_afpacket *p = afp_port(port);
	struct afp_conf c;
	int rc;

	for (unsigned i = 0; i < AFP_QUEUES_MAX; i++)
		p->q[i].fd = -1;
	rc = afp_args(args, &c, err);
	if (rc)
		return rc;
	snprintf(p->ifname, sizeof(p->ifname), "%s", c.ifname);
	p->ifindex = c.ifindex;
	p->qdisc_bypass = c.qdisc_bypass;
	p->blocks = (unsigned)c.blocks;
	p->block_size = (uint32_t)c.block_size;
	p->txtime = c.txtime != 0;
	port->tx_paced = p->txtime;
	p->fanout =
	    c.fanout
		? (uint16_t)c.fanout
		: (uint16_t)((unsigned)getpid() * 31u + (unsigned)p->ifindex);
	port->n_rxq = port->n_txq = (uint16_t)c.queues;
	port->link_type = 1; /* Ethernet */
	for (unsigned i = 0; i < c.queues; i++) {
		errno = 0;
		rc = afp_queue_open(p, &p->q[i], args, err);
		if (rc) {
			afp_close(port);
			return rc;
		}
	}
	return 0;
}

/* Check: the keys and the interface; no socket is opened. */
static int afp_check(const struct port_args *args, struct dpflow_pool *pool,
		     char *paths[2], struct dpflow_error *err)
{
	struct afp_conf c;

	(void)pool;
	(void)paths;
	return afp_args(args, &c, err);
}

/*
 * Read the txtime reports off @fd's error queue (packets the qdisc
 * refused); returns how many.
 */
static uint64_t afp_txtime_reports(int fd)
{
	uint64_t n = 0;

	for (int i = 0; i < 1024; i++) {
		union {
			char buf[CMSG_SPACE(sizeof(struct sock_extended_err) +
					    64)];
			struct cmsghdr align;
		} ctl;
		char data[64];
		struct iovec iov = {data, sizeof(data)};
		struct msghdr mh = {.msg_iov = &iov,
				    .msg_iovlen = 1,
				    .msg_control = ctl.buf,
				    .msg_controllen = sizeof(ctl.buf)};

		if (recvmsg(fd, &mh, MSG_ERRQUEUE | MSG_DONTWAIT) < 0)
			break;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c;
		     c = CMSG_NXTHDR(&mh, c)) {
			struct sock_extended_err ee;

			if (c->cmsg_len < CMSG_LEN(sizeof(ee)))
				continue;
			memcpy(&ee, CMSG_DATA(c), sizeof(ee));
			if (ee.ee_origin == SO_EE_ORIGIN_TXTIME)
				n++;
		}
	}
	return n;
}

static void afp_stats(const struct dpflow_port *port,
		      struct dpflow_port_stats *s)
{
	struct port_afpacket *p = afp_port((struct dpflow_port *)port);
	uint64_t drops = 0, refused = 0;

	for (unsigned i = 0; i < port->n_rxq; i++) {
		const struct afp_queue *q = &p->q[i];
		struct tpacket_stats_v3 ks;
		socklen_t len = sizeof(ks);

		port_queue_ctrs_sum(&q->ctr, s);
		/* the kernel's counters reset when read: keep the sum */
		if (q->fd >= 0 && !getsockopt(q->fd, SOL_PACKET,
					      PACKET_STATISTICS, &ks, &len))
			drops += ks.tp_drops;
		if (p->txtime && q->fd >= 0)
			refused += afp_txtime_reports(q->fd);
	}
	s->rx_dropped =
	    __atomic_add_fetch(&p->kernel_drops, drops, __ATOMIC_RELAXED);
	s->tx_errors +=
	    __atomic_add_fetch(&p->txtime_errors, refused, __ATOMIC_RELAXED);
}

const struct dpflow_port_ops dpflow_port_afpacket_ops = {
    .kind = "afpacket",
    .size = sizeof(struct port_afpacket),
    .open = afp_open,
    .check = afp_check,
    .rx_burst = afp_rx_burst,
    .tx_burst = afp_tx_burst,
    .stats = afp_stats,
    .close = afp_close,
};
