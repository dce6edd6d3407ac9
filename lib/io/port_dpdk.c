/*
 * The DPDK port backend: an ethdev port (a PCI device or a virtual device)
 * through DPDK's poll-mode drivers. Built when libdpdk is found.
 *
 *   dpdk:DEV[,queues=N][,rxd=N][,txd=N][,mbufs=N][,eal=ARGS][,txtime=0|1]
 *
 * DEV is a PCI address (0000:03:00.0) or a vdev spec. dpflow's URI
 * separator is ',' and a vdev spec has commas of its own, so inside DEV
 * (and inside `eal`) ';' stands for ',': `net_pcap0;rx_pcap=a.pcap` is the
 * devargs `net_pcap0,rx_pcap=a.pcap`. The ethdev name is DEV up to its
 * first ';'. A device the EAL has not probed is probed at open
 * (rte_dev_probe) and removed again at close (rte_dev_remove), so a vdev
 * may be opened, closed and opened again.
 *
 * The EAL. One per process, started by the first dpdk port with the
 * arguments of its `eal` key (split at spaces, ';' for ','), or by default
 * `--no-telemetry --log-level=error --lcores=0@CPU` (CPU the one the
 * caller runs on) plus `--no-huge -m 512 --no-pci --no-shconf` for a vdev
 * or `--in-memory -a DEV` for a PCI device. rte_eal_init pins the calling
 * thread to its lcore: the thread's CPU affinity is restored afterwards,
 * as are getopt's globals. A later port giving an `eal` other than the one
 * in effect is refused (field "eal"); one giving none uses the running
 * EAL. A failed start cannot be retried: later dpdk ports get the same
 * error. The EAL is not cleaned up at exit.
 *
 * Queues. dpflow queue i is the ethdev's receive and transmit queue i,
 * with `rxd` and `txd` descriptors (default 1024, adjusted to the
 * device's limits). The port has one mbuf pool (`mbufs` mbufs, default
 * enough for every descriptor plus bursts in flight) whose data room fits
 * the dpflow pool's (at least 2 KiB). dpflow worker threads are not EAL
 * lcores, so the mbuf pool has no per-lcore cache.
 *
 * Data path. rx_burst takes dpflow slots first, receives at most that many
 * mbufs, copies each frame into a slot (the dpflow pool is the one place
 * packets live: mbufs as pool slots is future work, docs/ports.md) and
 * frees the mbufs; when the pool is short, packets stay in the device
 * (rx_nobuf counts the calls cut short). A frame larger than the data room
 * is dropped (rx_oversize). tx_burst copies packets into fresh mbufs and
 * hands them to rte_eth_tx_burst; the mbufs the device did not take are
 * freed and their packets stay with the caller. A packet larger than an
 * mbuf's data room is dropped and counted in tx_errors.
 *
 * End of input. net_pcap reading files (rx_pcap) is finite: its receive
 * returns nothing only at the end of its file (or with its mbuf pool
 * empty, which is checked), so a queue whose receive comes back empty is
 * done, and rx_done is true once every queue is. A net_pcap without
 * rx_pcap, rx_iface or iface has no input (rx_done true). Every other
 * device's input never ends.
 *
 * Timed transmit. `txtime=1` needs RTE_ETH_TX_OFFLOAD_SEND_ON_TIMESTAMP
 * (mlx5 on ConnectX-6 Dx and later); the port enables it, registers the
 * Tx timestamp dynamic field and flag, and sets them on each packet whose
 * meta->tx_time_ns (dpflow_clock_ns() time base) is not 0. The device
 * expects its own clock (rte_eth_read_clock): at open the port reads it
 * twice, 10 ms apart, each read bracketed by dpflow_clock_ns(), and
 * converts by that line (offset and rate). Approximate: the conversion is
 * not refreshed, so drift between the clocks accumulates over the port's
 * life.
 *
 * Threads: one per queue for rx_burst, one per queue for tx_burst, as
 * every port; open and close on the control thread.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_dev.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_mempool.h>

#include "dpflow/clock.h"
#include "dpflow/port.h"

#include "io/port_internal.h"

#define DPDK_QUEUES_MAX	   64
#define DPDK_DESC_DEFAULT  1024
#define DPDK_DESC_MAX	   32768
#define DPDK_MBUFS_MIN	   256
#define DPDK_MBUFS_MAX	   (1u << 24)
#define DPDK_MBUF_ROOM_MIN 2048
#define DPDK_EAL_ARGS_MAX  1024
#define DPDK_SPEC_MAX	   1024 /* a device spec */
#define DPDK_EAL_ARGV_MAX  64
#define DPDK_CLOCK_GAP_NS  10000000ull /* between the two clock reads */
#define DPDK_DEFAULT_EAL   "--no-telemetry --log-level=error"
/* a vdev: plain memory, no PCI scan, no files (--in-memory needs
 * hugepages: --no-huge implies legacy memory, which it refuses) */
#define DPDK_DEFAULT_EAL_VDEV "--no-huge -m 512 --no-pci --no-shconf"
#define DPDK_DEFAULT_EAL_PCI  "--in-memory"

struct dpdk_queue {
	bool rx_eof; /* a finite input's receive came back empty */
	struct port_queue_ctrs ctr;
};

struct port_dpdk {
	struct dpflow_port up;
	/* data path */
	uint16_t port_id;
	uint16_t mbuf_room; /* data room of an mbuf */
	struct rte_mempool *mp;
	bool txtime;
	int ts_off;	  /* Tx timestamp dynamic field */
	uint64_t ts_flag; /* and its flag */
	/* device clock = clk_dev0 + (dpflow_clock_ns() - clk_ns0) * clk_rate */
	uint64_t clk_ns0, clk_dev0;
	double clk_rate;
	/* control */
	bool finite;   /* net_pcap without a live input */
	bool no_input; /* net_pcap without any input */
	bool probed;   /* we probed the device: close removes it */
	bool started;
	struct rte_device *dev;
	struct dpdk_queue q[DPDK_QUEUES_MAX];
};

static inline struct port_dpdk *dpdk_port(struct dpflow_port *port)
{
	return (struct port_dpdk *)port;
}

/* ---- receive ------------------------------------------------------------ */

/* Finite input: an empty receive means the end, unless mbufs ran out. */
static void dpdk_rx_empty(struct port_dpdk *p, struct dpdk_queue *q)
{
	if (p->finite && rte_mempool_avail_count(p->mp) > 0)
		__atomic_store_n(&q->rx_eof, true, __ATOMIC_RELEASE);
}

static uint16_t dpdk_rx_burst(struct dpflow_port *port, uint16_t queue,
			      uint32_t *idx, uint16_t n)
{
	struct port_dpdk *p = dpdk_port(port);
	struct dpdk_queue *q = &p->q[queue];
	struct dpflow_pool *pool = port->pool;
	struct rte_mbuf *mb[DPFLOW_BURST_MAX];
	uint64_t bytes = 0, oversize = 0, now;
	uint16_t slots, got, k = 0;

	slots = (uint16_t)dpflow_pool_alloc_burst(pool, idx, n);
	got = slots ? rte_eth_rx_burst(p->port_id, queue, mb, slots) : 0;
	if (slots < n && got == slots)
		port_ctr_add(&q->ctr.rx_nobuf, 1);
	if (!got) {
		if (slots) {
			dpflow_pool_free_bulk(pool, idx, slots);
			dpdk_rx_empty(p, q);
		}
		return 0;
	}
	now = dpflow_clock_realtime_ns();
	for (uint16_t i = 0; i < got; i++) {
		uint32_t len = rte_pktmbuf_pkt_len(mb[i]);
		struct dpflow_pkt_meta *m;
		const void *src;
		uint8_t *dst;

		if (i + 1 < got)
			__builtin_prefetch(rte_pktmbuf_mtod(mb[i + 1], void *));
		if (DPFLOW_UNLIKELY(len > pool->data_room)) {
			oversize++;
			continue;
		}
		m = dpflow_pool_meta(pool, idx[k]);
		dst = dpflow_pkt_data(pool, idx[k]);
		/* a chained mbuf (net_pcap's long frames) is gathered */
		src = rte_pktmbuf_read(mb[i], 0, len, dst);
		if (src != dst)
			memcpy(dst, src, len);
		m->data_len = (uint16_t)len;
		m->port = port->id;
		m->queue = queue;
		m->rx_ts_ns = now;
		bytes += len;
		k++;
	}
	rte_pktmbuf_free_bulk(mb, got);
	if (k < slots)
		dpflow_pool_free_bulk(pool, idx + k, (unsigned)(slots - k));
	if (k) {
		port_ctr_add(&q->ctr.rx_pkts, k);
		port_ctr_add(&q->ctr.rx_bytes, bytes);
	}
	if (oversize)
		port_ctr_add(&q->ctr.rx_oversize, oversize);
	return k;
}

/* ---- transmit ----------------------------------------------------------- */

/* The device's clock at dpflow_clock_ns() time @t (txtime). */
static inline uint64_t dpdk_dev_time(const struct port_dpdk *p, uint64_t t)
{
	double d = (double)(int64_t)(t - p->clk_ns0) * p->clk_rate;

	return p->clk_dev0 + (uint64_t)(int64_t)d;
}

static uint16_t dpdk_tx_burst(struct dpflow_port *port, uint16_t queue,
			      struct dpflow_pool *pool, const uint32_t *idx,
			      uint16_t n)
{
	struct port_dpdk *p = dpdk_port(port);
	struct dpdk_queue *q = &p->q[queue];
	struct rte_mbuf *mb[DPFLOW_BURST_MAX];
	uint64_t bytes = 0;
	uint16_t k, sent;

	/* the packets up to the first one no mbuf can hold */
	for (k = 0; k < n; k++)
		if (DPFLOW_UNLIKELY(dpflow_pool_meta(pool, idx[k])->data_len >
				    p->mbuf_room))
			break;
	if (DPFLOW_UNLIKELY(!k)) {
		/* dropped and counted, so that it does not stop the queue */
		port_ctr_add(&q->ctr.tx_errors, 1);
		dpflow_pool_free_bulk(pool, idx, 1);
		return 1;
	}
	if (rte_pktmbuf_alloc_bulk(p->mp, mb, k))
		return 0;
	for (uint16_t i = 0; i < k; i++) {
		const struct dpflow_pkt_meta *m =
		    dpflow_pool_meta(pool, idx[i]);
		struct rte_mbuf *b = mb[i];

		if (i + 1 < k)
			__builtin_prefetch(dpflow_pkt_data(pool, idx[i + 1]));
		memcpy(rte_pktmbuf_mtod(b, void *),
		       dpflow_pkt_data(pool, idx[i]), m->data_len);
		b->data_len = m->data_len;
		b->pkt_len = m->data_len;
		if (p->txtime && m->tx_time_ns) {
			*RTE_MBUF_DYNFIELD(b, p->ts_off, uint64_t *) =
			    dpdk_dev_time(p, m->tx_time_ns);
			b->ol_flags |= p->ts_flag;
		}
		bytes += m->data_len;
	}
	sent = rte_eth_tx_burst(p->port_id, queue, mb, k);
	if (sent < k) {
		rte_pktmbuf_free_bulk(mb + sent, (unsigned)(k - sent));
		for (uint16_t i = sent; i < k; i++)
			bytes -= dpflow_pool_meta(pool, idx[i])->data_len;
	}
	if (sent) {
		port_ctr_add(&q->ctr.tx_pkts, sent);
		port_ctr_add(&q->ctr.tx_bytes, bytes);
		dpflow_pool_free_bulk(pool, idx, sent);
	}
	return sent;
}

/* ---- the EAL ------------------------------------------------------------ */

static struct {
	pthread_mutex_t lock;
	int state; /* 0: not started, 1: running, -1: failed */
	int code;  /* errno of the failure */
	char args[DPDK_EAL_ARGS_MAX];	  /* the arguments in effect */
	char argv_buf[DPDK_EAL_ARGS_MAX]; /* argv's strings (kept) */
	char *argv[DPDK_EAL_ARGV_MAX];
	bool in_use[RTE_MAX_ETHPORTS]; /* ethdev ports dpflow has open */
} eal = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Copy @src into @dst (@size bytes) with ';' turned into ','. */
static int semi_to_comma(char *dst, size_t size, const char *src)
{
	size_t i;

	for (i = 0; src[i]; i++) {
		if (i + 1 >= size)
			return -1;
		dst[i] = src[i] == ';' ? ',' : src[i];
	}
	dst[i] = '\0';
	return 0;
}

/* Does @name look like a PCI address (0000:03:00.0 or 03:00.0)? */
static bool is_pci_addr(const char *name)
{
	unsigned colons = 0, dots = 0;

	for (const char *c = name; *c; c++) {
		if (*c == ':')
			colons++;
		else if (*c == '.')
			dots++;
		else if (!isxdigit((unsigned char)*c))
			return false;
	}
	return (colons == 1 || colons == 2) && dots == 1;
}

/*
 * Start the EAL with @args (already ';'-translated, split at spaces).
 * Called with eal.lock held, once.
 */
static int eal_start(const char *args, const struct port_args *pa,
		     struct dpflow_error *err)
{
	int argc = 0, rc, s_optind = optind, s_opterr = opterr,
	    s_optopt = optopt;
	char *s_optarg = optarg, *tok, *save = NULL;
	cpu_set_t cpus;
	bool have_cpus;

	snprintf(eal.args, sizeof(eal.args), "%s", args);
	snprintf(eal.argv_buf, sizeof(eal.argv_buf), "%s", args);
	eal.argv[argc++] = (char *)"dpflow";
	for (tok = strtok_r(eal.argv_buf, " \t", &save); tok;
	     tok = strtok_r(NULL, " \t", &save)) {
		if (argc + 1 >= DPDK_EAL_ARGV_MAX) {
			eal.state = -1;
			eal.code = E2BIG;
			return dpflow_error_set(
			    err, E2BIG, "eal", "%s: more than %d EAL arguments",
			    pa->uri, DPDK_EAL_ARGV_MAX - 2);
		}
		eal.argv[argc++] = tok;
	}
	eal.argv[argc] = NULL;
	have_cpus =
	    !pthread_getaffinity_np(pthread_self(), sizeof(cpus), &cpus);
	rc = rte_eal_init(argc, eal.argv);
	/* the EAL pins this thread to its main lcore and runs getopt */
	if (have_cpus)
		pthread_setaffinity_np(pthread_self(), sizeof(cpus), &cpus);
	optind = s_optind;
	opterr = s_opterr;
	optopt = s_optopt;
	optarg = s_optarg;
	if (rc < 0) {
		eal.state = -1;
		eal.code = rte_errno > 0 ? rte_errno : EINVAL;
		return dpflow_error_set(err, eal.code, "eal",
					"%s: EAL initialisation failed "
					"(arguments '%s'): %s",
					pa->uri, eal.args,
					rte_strerror(eal.code));
	}
	eal.state = 1;
	return 0;
}

/*
 * Make sure the EAL runs: started with @eal_arg (the URI's `eal`, or NULL
 * for the defaults for @pci), or already running with the same arguments.
 */
static int eal_ensure(const char *eal_arg, const char *dev, bool pci,
		      const struct port_args *pa, struct dpflow_error *err)
{
	char want[DPDK_EAL_ARGS_MAX];
	int rc = 0, cpu;

	if (eal_arg) {
		if (semi_to_comma(want, sizeof(want), eal_arg))
			return dpflow_error_set(err, E2BIG, "eal",
						"%s: eal: longer than %d bytes",
						pa->uri, DPDK_EAL_ARGS_MAX - 1);
	} else {
		cpu = sched_getcpu();
		if (pci)
			snprintf(want, sizeof(want),
				 "%s %s --lcores=0@%d -a %s",
				 DPDK_DEFAULT_EAL_PCI, DPDK_DEFAULT_EAL,
				 cpu < 0 ? 0 : cpu, dev);
		else
			snprintf(want, sizeof(want), "%s %s --lcores=0@%d",
				 DPDK_DEFAULT_EAL_VDEV, DPDK_DEFAULT_EAL,
				 cpu < 0 ? 0 : cpu);
	}
	if (eal.state == 0)
		return eal_start(want, pa, err);
	if (eal.state < 0)
		rc =
		    dpflow_error_set(err, eal.code, "eal",
				     "%s: the EAL failed to start earlier in "
				     "this process (arguments '%s'): %s",
				     pa->uri, eal.args, rte_strerror(eal.code));
	else if (eal_arg && strcmp(want, eal.args))
		rc = dpflow_error_set(err, EINVAL, "eal",
				      "%s: eal='%s': the EAL already runs "
				      "with '%s' (one EAL per process, started "
				      "by the first dpdk port): give the same "
				      "eal or none",
				      pa->uri, eal_arg, eal.args);
	return rc;
}

/* ---- open and close ----------------------------------------------------- */

/* Is @key (with a value) in the devargs @spec ("name,k=v,k=v")? */
static bool spec_has(const char *spec, const char *key, const char *val)
{
	size_t kl = strlen(key);

	for (const char *c = strchr(spec, ','); c; c = strchr(c + 1, ',')) {
		if (strncmp(c + 1, key, kl) || c[1 + kl] != '=')
			continue;
		if (!val)
			return true;
		if (!strncmp(c + 2 + kl, val, strlen(val)))
			return true;
	}
	return false;
}

/* Stop, close and (when probed here) remove the device; free the pool. */
static void dpdk_release(struct port_dpdk *p, bool have_port)
{
	if (have_port) {
		if (p->started)
			rte_eth_dev_stop(p->port_id);
		rte_eth_dev_close(p->port_id);
		if (p->probed && p->dev)
			rte_dev_remove(p->dev);
		pthread_mutex_lock(&eal.lock);
		eal.in_use[p->port_id] = false;
		pthread_mutex_unlock(&eal.lock);
	}
	rte_mempool_free(p->mp);
	p->mp = NULL;
	p->started = false;
}

static void dpdk_close(struct dpflow_port *port)
{
	dpdk_release(dpdk_port(port), true);
}

/*
 * The ethdev port of device @name: the port of that name, or else the
 * first port of the device of that name (net_ring's nodeaction names its
 * port after the ring, not the vdev). A PCI address may lack its domain.
 */
static int port_of_device(const char *name, bool pci, uint16_t *pid)
{
	char full[RTE_DEV_NAME_MAX_LEN + 8];
	uint16_t id;

	if (!rte_eth_dev_get_port_by_name(name, pid))
		return 0;
	snprintf(full, sizeof(full), "%s%s", pci ? "0000:" : "", name);
	RTE_ETH_FOREACH_DEV(id)
	{
		struct rte_eth_dev_info info;

		if (rte_eth_dev_info_get(id, &info) || !info.device)
			continue;
		if (!strcmp(rte_dev_name(info.device), name) ||
		    !strcmp(rte_dev_name(info.device), full)) {
			*pid = id;
			return 0;
		}
	}
	return -ENODEV;
}

/*
 * Find the ethdev of device @name (the devargs @spec's first part),
 * probing @spec when the device has none yet. Marks it in use. eal.lock
 * held.
 */
static int dpdk_find(struct port_dpdk *p, const char *name, const char *spec,
		     bool pci, const struct port_args *args,
		     struct dpflow_error *err)
{
	struct rte_eth_dev_info info;
	uint16_t pid;
	int rc;

	if (port_of_device(name, pci, &pid)) {
		rc = rte_dev_probe(spec);
		if (rc < 0)
			return dpflow_error_set(
			    err, -rc, "device",
			    "%s: cannot probe device '%s': %s (want a PCI "
			    "address such as 0000:03:00.0, or a vdev such as "
			    "net_ring0 or net_pcap0;rx_pcap=in.pcap)",
			    args->uri, spec, rte_strerror(-rc));
		p->probed = true;
		if (port_of_device(name, pci, &pid)) {
			rte_eal_hotplug_remove(pci ? "pci" : "vdev", name);
			return dpflow_error_set(err, ENODEV, "device",
						"%s: device '%s' probed but it "
						"has no ethdev port",
						args->uri, spec);
		}
	}
	if (eal.in_use[pid])
		return dpflow_error_set(err, EBUSY, "device",
					"%s: device '%s' is already open as "
					"another dpflow port",
					args->uri, name);
	rc = rte_eth_dev_info_get(pid, &info);
	if (rc)
		return dpflow_error_set(err, -rc, "device",
					"%s: device '%s' information: %s",
					args->uri, name, rte_strerror(-rc));
	eal.in_use[pid] = true;
	p->port_id = pid;
	p->dev = info.device;
	return 0;
}

/* The ethdev configured, queues set up, started. */
static int dpdk_setup(struct port_dpdk *p, uint16_t queues, uint16_t rxd,
		      uint16_t txd, uint32_t mbufs, const char *name,
		      const struct port_args *args, struct dpflow_error *err)
{
	static unsigned pool_seq;
	struct rte_eth_conf conf;
	struct rte_eth_dev_info info;
	char mp_name[RTE_MEMPOOL_NAMESIZE];
	unsigned room = DPDK_MBUF_ROOM_MIN;
	int socket = rte_eth_dev_socket_id(p->port_id), rc;

	rc = rte_eth_dev_info_get(p->port_id, &info);
	if (rc)
		return dpflow_error_set(err, -rc, "device",
					"%s: device information: %s", args->uri,
					rte_strerror(-rc));
	if (queues > info.max_rx_queues || queues > info.max_tx_queues)
		return dpflow_error_set(err, EINVAL, "queues",
					"%s: queues=%u: device '%s' has %u "
					"receive and %u transmit queues",
					args->uri, queues, name,
					info.max_rx_queues, info.max_tx_queues);
	if (p->txtime &&
	    !(info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_SEND_ON_TIMESTAMP))
		return dpflow_error_set(err, ENOTSUP, "txtime",
					"%s: txtime=1: device '%s' (driver "
					"%s) lacks the send-on-timestamp "
					"offload",
					args->uri, name, info.driver_name);
	if (p->up.pool && p->up.pool->data_room > room)
		room = p->up.pool->data_room;
	if (room > UINT16_MAX - RTE_PKTMBUF_HEADROOM)
		room = UINT16_MAX - RTE_PKTMBUF_HEADROOM;
	p->mbuf_room = (uint16_t)room;
	if (socket < 0)
		socket = SOCKET_ID_ANY;
	pthread_mutex_lock(&eal.lock);
	snprintf(mp_name, sizeof(mp_name), "dpflow_mb%u", pool_seq++);
	pthread_mutex_unlock(&eal.lock);
	p->mp = rte_pktmbuf_pool_create(mp_name, mbufs, 0, 0,
					(uint16_t)(room + RTE_PKTMBUF_HEADROOM),
					socket);
	if (!p->mp)
		return dpflow_error_set(err, rte_errno, "mbufs",
					"%s: a pool of %u mbufs: %s (more "
					"EAL memory: eal=... -m MB)",
					args->uri, mbufs,
					rte_strerror(rte_errno));
	memset(&conf, 0, sizeof(conf));
	if (p->txtime)
		conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_SEND_ON_TIMESTAMP;
	rc = rte_eth_dev_configure(p->port_id, queues, queues, &conf);
	if (rc)
		return dpflow_error_set(err, -rc, "queues",
					"%s: configuring %u queues: %s",
					args->uri, queues, rte_strerror(-rc));
	rc = rte_eth_dev_adjust_nb_rx_tx_desc(p->port_id, &rxd, &txd);
	if (rc)
		return dpflow_error_set(err, -rc, "rxd",
					"%s: descriptor counts: %s", args->uri,
					rte_strerror(-rc));
	for (uint16_t i = 0; i < queues; i++) {
		rc = rte_eth_rx_queue_setup(p->port_id, i, rxd,
					    (unsigned)socket, NULL, p->mp);
		if (rc)
			return dpflow_error_set(err, -rc, "rxd",
						"%s: receive queue %u with %u "
						"descriptors: %s (mbufs=%u)",
						args->uri, i, rxd,
						rte_strerror(-rc), mbufs);
		rc = rte_eth_tx_queue_setup(p->port_id, i, txd,
					    (unsigned)socket, NULL);
		if (rc)
			return dpflow_error_set(err, -rc, "txd",
						"%s: transmit queue %u with %u "
						"descriptors: %s",
						args->uri, i, txd,
						rte_strerror(-rc));
	}
	rc = rte_eth_dev_start(p->port_id);
	if (rc)
		return dpflow_error_set(err, -rc, "device",
					"%s: starting device '%s': %s",
					args->uri, name, rte_strerror(-rc));
	p->started = true;
	/* a data plane sees every frame; devices without the mode are fine */
	(void)rte_eth_promiscuous_enable(p->port_id);
	return 0;
}

/* Tx timestamps: the dynamic field and flag, and the clock conversion. */
static int dpdk_txtime_setup(struct port_dpdk *p, const struct port_args *args,
			     struct dpflow_error *err)
{
	struct timespec gap = {0, (long)DPDK_CLOCK_GAP_NS};
	uint64_t ns[2], dev[2];
	int rc;

	if (rte_mbuf_dyn_tx_timestamp_register(&p->ts_off, &p->ts_flag))
		return dpflow_error_set(err, rte_errno, "txtime",
					"%s: txtime=1: registering the Tx "
					"timestamp field: %s",
					args->uri, rte_strerror(rte_errno));
	for (int i = 0; i < 2; i++) {
		uint64_t t0 = dpflow_clock_ns(), t1;

		rc = rte_eth_read_clock(p->port_id, &dev[i]);
		t1 = dpflow_clock_ns();
		if (rc)
			return dpflow_error_set(err, -rc, "txtime",
						"%s: txtime=1: reading the "
						"device clock: %s",
						args->uri, rte_strerror(-rc));
		ns[i] = t0 + (t1 - t0) / 2;
		if (!i)
			nanosleep(&gap, NULL);
	}
	p->clk_ns0 = ns[1];
	p->clk_dev0 = dev[1];
	p->clk_rate = ns[1] > ns[0]
			  ? (double)(dev[1] - dev[0]) / (double)(ns[1] - ns[0])
			  : 1.0;
	return 0;
}

/* What a dpdk URI asks for: the keys, the devargs and the ethdev name. */
struct dpdk_conf {
	uint64_t queues, rxd, txd, mbufs, txtime;
	const char *eal_arg;
	char spec[DPDK_SPEC_MAX]; /* the devargs, ';' turned to ',' */
	char name[RTE_ETH_NAME_MAX_LEN];
	bool pci;
};

/*
 * The keys of @args into @c, for open and check alike: every key, the
 * device spec, and the mbuf count (defaulted and capped).
 */
static int dpdk_args(const struct port_args *args, struct dpdk_conf *c,
		     struct dpflow_error *err)
{
	bool seen[6] = {false};
	char dev[DPDK_SPEC_MAX];
	int rc = 0;

	memset(c, 0, sizeof(*c));
	c->queues = 1;
	c->rxd = c->txd = DPDK_DESC_DEFAULT;
	dev[0] = '\0';
	for (unsigned i = 0; i < args->n; i++) {
		const struct port_arg *a = &args->a[i];

		if (!strcmp(a->key, "queues"))
			rc = port_arg_once(args, a, "queues", &seen[0], err) ||
			     port_arg_u64(args, a, "queues", 1, DPDK_QUEUES_MAX,
					  &c->queues, err);
		else if (!strcmp(a->key, "rxd"))
			rc = port_arg_once(args, a, "rxd", &seen[1], err) ||
			     port_arg_u64(args, a, "rxd", 1, DPDK_DESC_MAX,
					  &c->rxd, err);
		else if (!strcmp(a->key, "txd"))
			rc = port_arg_once(args, a, "txd", &seen[2], err) ||
			     port_arg_u64(args, a, "txd", 1, DPDK_DESC_MAX,
					  &c->txd, err);
		else if (!strcmp(a->key, "mbufs"))
			rc = port_arg_once(args, a, "mbufs", &seen[3], err) ||
			     port_arg_u64(args, a, "mbufs", DPDK_MBUFS_MIN,
					  DPDK_MBUFS_MAX, &c->mbufs, err);
		else if (!strcmp(a->key, "txtime"))
			rc = port_arg_once(args, a, "txtime", &seen[4], err) ||
			     port_arg_u64(args, a, "txtime", 0, 1, &c->txtime,
					  err);
		else if (!strcmp(a->key, "eal")) {
			rc = port_arg_once(args, a, "eal", &seen[5], err) ||
			     port_arg_need_value(args, a, "eal", err);
			c->eal_arg = a->val;
		} else if (i == 0) {
			/* the device: the generic layer split it at its
			 * first '=', which is put back */
			if (snprintf(dev, sizeof(dev), "%s%s%s", a->key,
				     a->val ? "=" : "",
				     a->val ? a->val : "") >= (int)sizeof(dev))
				rc = dpflow_error_set(err, EINVAL, "device",
						      "%s: device spec too "
						      "long",
						      args->uri);
		} else {
			rc = port_arg_unknown(args, a, err);
		}
		if (rc)
			return -EINVAL;
	}
	if (!dev[0])
		return dpflow_error_set(err, EINVAL, "device",
					"%s: a device is needed first "
					"(dpdk:0000:03:00.0, dpdk:net_ring0, "
					"dpdk:net_pcap0;rx_pcap=in.pcap)",
					args->uri);
	if (semi_to_comma(c->spec, sizeof(c->spec), dev))
		return dpflow_error_set(err, EINVAL, "device",
					"%s: device spec too long", args->uri);
	snprintf(c->name, sizeof(c->name), "%.*s", (int)strcspn(c->spec, ","),
		 c->spec);
	c->pci = is_pci_addr(c->name);
	if (!c->mbufs)
		c->mbufs =
		    c->queues * (c->rxd + c->txd + 2 * DPFLOW_BURST_MAX) + 1024;
	if (c->mbufs > DPDK_MBUFS_MAX)
		c->mbufs = DPDK_MBUFS_MAX;
	return 0;
}

static int dpdk_open(struct dpflow_port *port, const struct port_args *args,
		     struct dpflow_error *err)
{
	struct port_dpdk *p = dpdk_port(port);
	struct dpdk_conf c;
	bool have_port = false;
	int rc = dpdk_args(args, &c, err);

	if (rc)
		return rc;
	p->txtime = c.txtime != 0;
	port->tx_paced = p->txtime;
	if (!strncmp(c.name, "net_pcap", 8)) {
		p->finite = !spec_has(c.spec, "rx_iface", NULL) &&
			    !spec_has(c.spec, "rx_iface_in", NULL) &&
			    !spec_has(c.spec, "iface", NULL) &&
			    !spec_has(c.spec, "infinite_rx", "1");
		p->no_input = p->finite && !spec_has(c.spec, "rx_pcap", NULL);
	}

	pthread_mutex_lock(&eal.lock);
	rc = eal_ensure(c.eal_arg, c.name, c.pci, args, err);
	if (!rc) {
		rc = dpdk_find(p, c.name, c.spec, c.pci, args, err);
		have_port = !rc;
	}
	pthread_mutex_unlock(&eal.lock);
	if (rc)
		return rc < 0 ? rc : -EINVAL;
	port->n_rxq = port->n_txq = (uint16_t)c.queues;
	port->link_type = 1; /* Ethernet */
	rc = dpdk_setup(p, (uint16_t)c.queues, (uint16_t)c.rxd, (uint16_t)c.txd,
			(uint32_t)c.mbufs, c.name, args, err);
	if (!rc && p->txtime)
		rc = dpdk_txtime_setup(p, args, err);
	if (rc) {
		dpdk_release(p, have_port);
		return rc;
	}
	return 0;
}

/*
 * Check: the keys and the device spec only. Whether the device exists is
 * known only to a running EAL, and starting one takes hugepages, devices
 * and files: left to open.
 */
static int dpdk_check(const struct port_args *args, struct dpflow_pool *pool,
		      char *paths[2], struct dpflow_error *err)
{
	struct dpdk_conf c;

	(void)pool;
	(void)paths;
	return dpdk_args(args, &c, err);
}

static bool dpdk_rx_done(const struct dpflow_port *port)
{
	const struct port_dpdk *p = (const struct port_dpdk *)port;

	if (!p->finite)
		return false;
	if (p->no_input)
		return true;
	for (unsigned i = 0; i < port->n_rxq; i++)
		if (!__atomic_load_n(&p->q[i].rx_eof, __ATOMIC_ACQUIRE))
			return false;
	return true;
}

static void dpdk_stats(const struct dpflow_port *port,
		       struct dpflow_port_stats *s)
{
	const struct port_dpdk *p = (const struct port_dpdk *)port;
	struct rte_eth_stats es;

	for (unsigned i = 0; i < port->n_rxq; i++) {
		const struct dpdk_queue *q = &p->q[i];

		port_queue_ctrs_sum(&q->ctr, s);
	}
	if (!rte_eth_stats_get(p->port_id, &es)) {
		s->rx_dropped = es.imissed;
		s->rx_errors = es.ierrors + es.rx_nombuf;
		s->tx_errors += es.oerrors;
	}
}

const struct dpflow_port_ops dpflow_port_dpdk_ops = {
    .kind = "dpdk",
    .size = sizeof(struct port_dpdk),
    .open = dpdk_open,
    .check = dpdk_check,
    .rx_burst = dpdk_rx_burst,
    .tx_burst = dpdk_tx_burst,
    .rx_done = dpdk_rx_done,
    .stats = dpdk_stats,
    .close = dpdk_close,
};
