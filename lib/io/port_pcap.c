/*
 * The pcap port backend: reads pcap and pcapng files through libpcap and
 * writes pcap files (Ethernet, nanosecond timestamps).
 *
 *   pcap:rx=FILE,tx=FILE   either key may be absent, not both
 *   pcap:FILE              the same as pcap:rx=FILE
 *
 * Receive: one queue. Records are read with nanosecond precision and
 * presented as Ethernet frames whatever the capture's link type: Linux
 * cooked captures (SLL, SLL2), raw IP and BSD/OpenBSD loopback frames get a
 * synthesised 14-byte Ethernet header (dst 0, src = the SLL address when it
 * is 6 bytes else 0, ethertype from the SLL protocol, the IP version or the
 * address family). A frame that cannot be presented so (unknown protocol,
 * pseudo-header cut short) is skipped and counted in rx_skipped; one that
 * does not fit the pool's data room is dropped and counted in rx_oversize;
 * one captured short of its wire length is delivered with the captured
 * bytes and counted in rx_truncated. When the pool runs dry the record just
 * read is kept for the next call (rx_nobuf counts the stall), never lost.
 *
 * Transmit: one queue; each packet becomes one record stamped tx_time_ns,
 * else rx_ts_ns, else the current time, and is freed to its pool. Output is
 * buffered by stdio (TX_BUF bytes) and flushed every TX_FLUSH_AT bytes, so
 * that a failed write is seen at a flush of ours: the packets since the
 * last good flush then move from tx_pkts to tx_errors, and nothing more is
 * written. Where the output goes (struct tx_way):
 *  - a temporary file beside the target (".NAME.XXXXXX", O_EXCL, the
 *    target's owner, group and mode when it exists), renamed onto the
 *    target when the port finishes; a symlink target is followed;
 *  - the target itself, written in place, where a rename could not keep
 *    the promise: the directory is not writable by us, it is sticky and
 *    the file is another user's, or the file has other hard links. The
 *    file is opened at open but truncated only at the first transmit or
 *    at finish (a run that sends nothing leaves a header), never earlier;
 *  - directly, for a target that exists and is not a regular file (a FIFO,
 *    a device, a socket) and for /dev/stdin, /dev/stdout, /dev/stderr,
 *    /dev/fd/N and /proc/PID/fd/N: opened and truncated at open.
 * Finish flushes, fsyncs and closes the file, then commits (renames the
 * temporary file; writes the header of an in-place target that got no
 * packet); a port that met an error or was discarded commits nothing, and
 * close removes its temporary file. A rename that fails keeps the
 * temporary file and names it. Close commits a port that never finished
 * (errors logged).
 *
 * Errors: a capture that cannot be read to its end (cut mid-record) ends
 * the input; the first such error and the first failed write are kept for
 * dpflow_port_finish(), with the file and the packet number, and not
 * logged.
 *
 * Check (dpflow_port_open_check): the keys through open's own code, the rx
 * file opened as a capture and closed (a FIFO, a tty or a descriptor path
 * only tested for read access: its header would be taken from the writer),
 * the tx target through open's own resolution (directory, rx file, way)
 * and then only tested for write access: nothing is created, truncated or
 * opened for writing.
 *
 * Threads: one receiving thread and one transmitting thread at a time; the
 * two sides share nothing but the port.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <pcap/pcap.h>

#include "dpflow/clock.h"
#include "dpflow/log.h"
#include "dpflow/port.h"

#include "io/port_internal.h"

#ifndef DLT_LINUX_SLL2
#define DLT_LINUX_SLL2 276
#endif

/* LINKTYPE_ values some libpcap builds report as they are in the file. */
#define LINKTYPE_RAW  101
#define LINKTYPE_LOOP 108

/* Largest record written: libpcap's own maximum snapshot length. */
#define TX_SNAPLEN 262144
/* The output's stdio buffer, and the fill at which tx_burst flushes it:
 * below TX_BUF by more than a record (16 + 65535 bytes), so stdio never
 * writes on its own and every write is one of our flushes. */
#define TX_BUF	    (256u << 10)
#define TX_FLUSH_AT (64u << 10)
/* The pcap file header and a record header. */
#define PCAP_FILE_HLEN 24
#define PCAP_REC_HLEN  16

#define ETH_HLEN  14
#define SLL_HLEN  16
#define SLL2_HLEN 20
#define LOOP_HLEN 4

#define ETHERTYPE_IPV4 0x0800
#define ETHERTYPE_IPV6 0x86dd
/* Below this an 802.3 type/length field is a length, not an ethertype. */
#define ETHERTYPE_MIN 0x0600

/* How received frames become Ethernet frames. */
enum link_kind {
	LINK_ETH,  /* as is */
	LINK_SLL,  /* Linux cooked v1: protocol at 14, address at 6 */
	LINK_SLL2, /* Linux cooked v2: protocol at 0, address at 12 */
	LINK_RAW,  /* IP, version in the first nibble */
	LINK_NULL, /* 4-byte address family, host byte order */
	LINK_LOOP, /* 4-byte address family, network byte order */
};

struct rx_ctrs {
	uint64_t pkts, bytes, nobuf, oversize, truncated, skipped, errors;
};

struct tx_ctrs {
	uint64_t pkts, bytes, errors;
};

/* How the output reaches its target (see the top of the file). */
enum tx_way {
	TX_DIRECT,  /* the path itself, opened and truncated at open */
	TX_TMP,	    /* a temporary file renamed onto the target */
	TX_INPLACE, /* the target, truncated at the first transmit */
};

struct port_pcap {
	struct dpflow_port up;
	/* receive side: used by the receiving thread */
	pcap_t *rx;
	const struct pcap_pkthdr *pend_hdr; /* record read but not delivered */
	const uint8_t *pend_data;	    /* valid until the next read */
	enum link_kind link;
	bool rx_eof;
	uint64_t rx_records; /* records read, delivered or not */
	int rx_err;	     /* the read error that ended the input, or 0 */
	struct rx_ctrs rxc;
	/* transmit side: used by the transmitting thread */
	pcap_t *tx_dead DPFLOW_CACHE_ALIGNED;
	pcap_dumper_t *tx; /* NULL: not started yet, or closed */
	int tx_err;	   /* the first failed write's errno, or 0 */
	uint64_t pend_pkts, pend_bytes; /* counted since the last flush */
	uint64_t pend_file;		/* file bytes since the last flush */
	struct tx_ctrs txc;
	/* cold: set at open, read at finish and close */
	char *rx_file;	  /* rx= as given */
	char *rx_real;	  /* its realpath, NULL for a device or FIFO */
	char *tx_file;	  /* tx= as given */
	char *tx_real;	  /* the target resolved, NULL: exempt (direct) */
	char *tx_tmp;	  /* the temporary file (TX_TMP) until committed */
	char *tx_buf;	  /* the output's stdio buffer */
	const char *why;  /* TX_INPLACE: why not through a temporary file */
	enum tx_way way;  /* set with tx_real */
	int tx_fd;	  /* TX_INPLACE: the target, not truncated yet */
	bool tx_started;  /* the output was opened for writing */
	bool tx_finished; /* finish with commit ran */
	bool tx_discard;  /* nothing is committed; close removes tx_tmp */
	char rx_msg[DPFLOW_ERROR_MSG_MAX]; /* libpcap's words for rx_err */
};

/* A received record, seen as an Ethernet frame. */
struct frame {
	const uint8_t *pay; /* bytes copied after the synthesised header */
	uint32_t pay_len;
	const uint8_t *src; /* source MAC for the header, NULL: zero */
	uint16_t ethertype; /* host order */
	bool synth;	    /* prepend a 14-byte Ethernet header */
};

static inline struct port_pcap *file_port(struct dpflow_port *port)
{
	return (struct port_pcap *)port;
}

static inline uint16_t rd16be(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline uint32_t rd32be(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

static int link_kind_of(int dlt)
{
	if (dlt == DLT_EN10MB)
		return LINK_ETH;
	if (dlt == DLT_LINUX_SLL)
		return LINK_SLL;
	if (dlt == DLT_LINUX_SLL2)
		return LINK_SLL2;
	if (dlt == DLT_NULL)
		return LINK_NULL;
	/* Before raw: OpenBSD's DLT_LOOP is 12, which is DLT_RAW elsewhere. */
	if (dlt == DLT_LOOP || dlt == LINKTYPE_LOOP)
		return LINK_LOOP;
	if (dlt == DLT_RAW || dlt == 12 || dlt == 14 || dlt == LINKTYPE_RAW ||
	    dlt == DLT_IPV4 || dlt == DLT_IPV6)
		return LINK_RAW;
	return -1;
}

/* Address families of the BSD loopback header (per BSD flavour). */
static uint16_t af_ethertype(uint32_t af)
{
	switch (af) {
	case 2: /* AF_INET everywhere */
		return ETHERTYPE_IPV4;
	case 24: /* AF_INET6: NetBSD, OpenBSD, BSD/OS */
	case 28: /* FreeBSD, DragonFly */
	case 30: /* Darwin */
		return ETHERTYPE_IPV6;
	default:
		return 0;
	}
}

static uint16_t ipver_ethertype(uint8_t first)
{
	switch (first >> 4) {
	case 4:
		return ETHERTYPE_IPV4;
	case 6:
		return ETHERTYPE_IPV6;
	default:
		return 0;
	}
}

/*
 * See the record @p (@len captured bytes) as an Ethernet frame. Returns
 * false when it cannot be: a pseudo-header cut short, or a protocol with
 * no ethertype.
 */
static bool frame_of(enum link_kind link, const uint8_t *p, uint32_t len,
		     struct frame *f)
{
	uint32_t af;

	f->pay = p;
	f->pay_len = len;
	f->src = NULL;
	f->ethertype = 0;
	f->synth = true;
	switch (link) {
	case LINK_ETH:
		f->synth = false;
		return true;
	case LINK_SLL:
		if (len < SLL_HLEN)
			return false;
		f->ethertype = rd16be(p + 14);
		if (rd16be(p + 4) == 6)
			f->src = p + 6;
		f->pay = p + SLL_HLEN;
		f->pay_len = len - SLL_HLEN;
		break;
	case LINK_SLL2:
		if (len < SLL2_HLEN)
			return false;
		f->ethertype = rd16be(p);
		if (p[11] == 6)
			f->src = p + 12;
		f->pay = p + SLL2_HLEN;
		f->pay_len = len - SLL2_HLEN;
		break;
	case LINK_RAW:
		if (len < 1)
			return false;
		f->ethertype = ipver_ethertype(p[0]);
		break;
	case LINK_NULL:
	case LINK_LOOP:
		if (len < LOOP_HLEN)
			return false;
		if (link == LINK_LOOP) {
			af = rd32be(p);
		} else {
			memcpy(&af, p, sizeof(af));
			/* Written on a host of the other byte order. */
			if (af > 0xffff)
				af = __builtin_bswap32(af);
		}
		f->ethertype = af_ethertype(af);
		f->pay = p + LOOP_HLEN;
		f->pay_len = len - LOOP_HLEN;
		break;
	}
	/* SLL's 802.2/802.3/CAN/netlink "protocols" are not ethertypes. */
	return f->ethertype >= ETHERTYPE_MIN;
}

/* Copy @f into slot @i and stamp it. */
static void frame_store(struct port_pcap *pp, uint32_t i, const struct frame *f,
			const struct pcap_pkthdr *h, uint16_t queue)
{
	struct dpflow_pool *pool = pp->up.pool;
	struct dpflow_pkt_meta *m = dpflow_pool_meta(pool, i);
	uint8_t *d;
	uint32_t len = f->pay_len;

	m->data_off = pool->headroom;
	d = dpflow_pool_buf(pool, i) + m->data_off;
	if (f->synth) {
		memset(d, 0, 6);
		if (f->src)
			memcpy(d + 6, f->src, 6);
		else
			memset(d + 6, 0, 6);
		d[12] = (uint8_t)(f->ethertype >> 8);
		d[13] = (uint8_t)f->ethertype;
		d += ETH_HLEN;
		len += ETH_HLEN;
	}
	memcpy(d, f->pay, f->pay_len);
	m->data_len = (uint16_t)len;
	m->port = pp->up.id;
	m->queue = queue;
	/* Opened with nanosecond precision: tv_usec holds nanoseconds. */
	m->rx_ts_ns =
	    (uint64_t)h->ts.tv_sec * 1000000000u + (uint64_t)h->ts.tv_usec;
}

/* Read the next record into pp->pend_*; false at the end of input. */
static bool read_next(struct port_pcap *pp, struct rx_ctrs *c)
{
	struct pcap_pkthdr *h;
	const u_char *data;
	int r = pcap_next_ex(pp->rx, &h, &data);

	if (DPFLOW_LIKELY(r == 1)) {
		pp->pend_hdr = h;
		pp->pend_data = data;
		pp->rx_records++;
		return true;
	}
	if (r == PCAP_ERROR) {
		/* kept for finish, which reports it: not logged here */
		c->errors++;
		pp->rx_err = EIO;
		snprintf(pp->rx_msg, sizeof(pp->rx_msg), "%s",
			 pcap_geterr(pp->rx));
	}
	/* PCAP_ERROR_BREAK: end of file (0 is for live captures only). */
	pp->rx_eof = true;
	return false;
}

/*
 * File reads are one record at a time inside libpcap, so there is nothing
 * to prefetch or unroll: the loop is scalar. Slots are taken for the whole
 * burst up front and the unused ones given back, one pool call each way.
 * At most @n records are skipped or dropped per call, so a long run of
 * them costs several calls (returning 0, rx_done still false), not one
 * unbounded one.
 */
static uint16_t file_rx_burst(struct dpflow_port *port, uint16_t queue,
			      uint32_t *idx, uint16_t n)
{
	struct port_pcap *pp = file_port(port);
	struct dpflow_pool *pool = port->pool;
	struct rx_ctrs c = {0};
	struct frame f;
	unsigned got;
	uint16_t k = 0;

	if (pp->rx_eof)
		return 0;
	got = dpflow_pool_alloc_burst(pool, idx, n);
	while (k < n && c.skipped + c.oversize < n) {
		if (!pp->pend_hdr && !read_next(pp, &c))
			break;
		const struct pcap_pkthdr *h = pp->pend_hdr;
		if (DPFLOW_UNLIKELY(
			!frame_of(pp->link, pp->pend_data, h->caplen, &f))) {
			c.skipped++;
			pp->pend_hdr = NULL;
			continue;
		}
		if (DPFLOW_UNLIKELY(f.pay_len + (f.synth ? ETH_HLEN : 0u) >
				    pool->data_room)) {
			c.oversize++;
			pp->pend_hdr = NULL;
			continue;
		}
		if (DPFLOW_UNLIKELY(k == got)) {
			/* Keep the record for the next call. */
			c.nobuf++;
			break;
		}
		frame_store(pp, idx[k], &f, h, queue);
		c.bytes += dpflow_pool_meta(pool, idx[k])->data_len;
		c.truncated += h->caplen < h->len;
		k++;
		pp->pend_hdr = NULL;
	}
	if (k < got)
		dpflow_pool_free_bulk(pool, idx + k, got - k);
	c.pkts = k;
	port_ctr_add(&pp->rxc.pkts, c.pkts);
	port_ctr_add(&pp->rxc.bytes, c.bytes);
	if (DPFLOW_UNLIKELY(c.nobuf | c.oversize | c.truncated | c.skipped |
			    c.errors)) {
		port_ctr_add(&pp->rxc.nobuf, c.nobuf);
		port_ctr_add(&pp->rxc.oversize, c.oversize);
		port_ctr_add(&pp->rxc.truncated, c.truncated);
		port_ctr_add(&pp->rxc.skipped, c.skipped);
		port_ctr_add(&pp->rxc.errors, c.errors);
	}
	return k;
}

/* Counters the transmitting thread (or finish) took back. */
static void ctr_sub(uint64_t *c, uint64_t v)
{
	__atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) - v,
			 __ATOMIC_RELAXED);
}

/*
 * A write failed (@code): keep the first error, and count the packets not
 * known to be in the file as errors, not as transmitted.
 */
static void tx_fail(struct port_pcap *pp, int code)
{
	if (!pp->tx_err)
		pp->tx_err = code;
	ctr_sub(&pp->txc.pkts, pp->pend_pkts);
	ctr_sub(&pp->txc.bytes, pp->pend_bytes);
	port_ctr_add(&pp->txc.errors, pp->pend_pkts);
	pp->pend_pkts = pp->pend_bytes = pp->pend_file = 0;
}

/* Write out the stdio buffer; a failure goes to tx_fail. */
static void tx_flush(struct port_pcap *pp)
{
	FILE *f = pcap_dump_file(pp->tx);

	errno = 0;
	if (fflush(f) || ferror(f))
		tx_fail(pp, errno ? errno : EIO);
	pp->pend_pkts = pp->pend_bytes = pp->pend_file = 0;
}

/*
 * Start writing on @fd (which this takes over): a stdio stream with our
 * buffer, and the pcap file header. 0 or -errno (@fd closed).
 */
static int tx_stream(struct port_pcap *pp, int fd)
{
	FILE *f = NULL;

	pp->tx_buf = malloc(TX_BUF);
	if (pp->tx_buf)
		f = fdopen(fd, "wb");
	if (!f) {
		close(fd);
		free(pp->tx_buf);
		pp->tx_buf = NULL;
		return -ENOMEM;
	}
	errno = 0;
	if (setvbuf(f, pp->tx_buf, _IOFBF, TX_BUF) ||
	    !(pp->tx = pcap_dump_fopen(pp->tx_dead, f))) {
		int code = errno ? errno : EIO;
		fclose(f);
		free(pp->tx_buf);
		pp->tx_buf = NULL;
		return -code;
	}
	pp->tx_started = true;
	pp->pend_file = PCAP_FILE_HLEN;
	return 0;
}

/*
 * An in-place target, opened at open and untouched so far: truncate it
 * and start writing. 0, or -errno (kept in tx_err).
 */
static int tx_start_inplace(struct port_pcap *pp)
{
	int fd = pp->tx_fd, rc;

	if (pp->way != TX_INPLACE || fd < 0)
		return -EBADF; /* finished or closed: a caller's mistake */
	pp->tx_fd = -1;
	if (ftruncate(fd, 0)) {
		rc = -errno;
		close(fd);
	} else {
		rc = tx_stream(pp, fd);
	}
	if (rc && !pp->tx_err)
		pp->tx_err = -rc;
	return rc;
}

static uint16_t file_tx_burst(struct dpflow_port *port, uint16_t queue,
			      struct dpflow_pool *pool, const uint32_t *idx,
			      uint16_t n)
{
	struct port_pcap *pp = file_port(port);
	uint32_t room = (uint32_t)pool->headroom + pool->data_room;
	uint64_t now = 0, bytes = 0, written = 0, bad = 0;
	struct pcap_pkthdr h;
	uint16_t k = n;

	(void)queue;
	/* after a failed write nothing more goes to the file, which would
	 * have a hole */
	if (DPFLOW_UNLIKELY(!pp->tx || pp->tx_err) &&
	    (pp->tx_err || tx_start_inplace(pp))) {
		bad = n;
		k = 0;
	}
	for (uint16_t i = 0; i < k; i++) {
		const struct dpflow_pkt_meta *m =
		    dpflow_pool_meta(pool, idx[i]);
		uint64_t ts = m->tx_time_ns ? m->tx_time_ns : m->rx_ts_ns;

		if (DPFLOW_UNLIKELY((uint32_t)m->data_off + m->data_len >
				    room)) {
			bad++;
			continue;
		}
		if (!ts) {
			if (!now)
				now = dpflow_clock_realtime_ns();
			ts = now;
		}
		h.ts.tv_sec = (time_t)(ts / 1000000000u);
		/* Nanosecond dump: the field carries nanoseconds. */
		h.ts.tv_usec = (suseconds_t)(ts % 1000000000u);
		h.caplen = m->data_len;
		h.len = m->data_len;
		pcap_dump((u_char *)pp->tx, &h,
			  dpflow_pool_buf(pool, idx[i]) + m->data_off);
		written++;
		bytes += m->data_len;
	}
	dpflow_pool_free_bulk(pool, idx, n);
	port_ctr_add(&pp->txc.pkts, written);
	port_ctr_add(&pp->txc.bytes, bytes);
	if (DPFLOW_UNLIKELY(bad))
		port_ctr_add(&pp->txc.errors, bad);
	pp->pend_pkts += written;
	pp->pend_bytes += bytes;
	pp->pend_file += bytes + written * PCAP_REC_HLEN;
	if (pp->pend_file >= TX_FLUSH_AT)
		tx_flush(pp);
	return n;
}

static bool file_rx_done(const struct dpflow_port *port)
{
	const struct port_pcap *pp = (const struct port_pcap *)port;

	return !pp->rx || pp->rx_eof;
}

static void file_stats(const struct dpflow_port *port,
		       struct dpflow_port_stats *s)
{
	const struct port_pcap *pp = (const struct port_pcap *)port;

	s->rx_pkts = port_ctr_read(&pp->rxc.pkts);
	s->rx_bytes = port_ctr_read(&pp->rxc.bytes);
	s->rx_nobuf = port_ctr_read(&pp->rxc.nobuf);
	s->rx_oversize = port_ctr_read(&pp->rxc.oversize);
	s->rx_truncated = port_ctr_read(&pp->rxc.truncated);
	s->rx_skipped = port_ctr_read(&pp->rxc.skipped);
	s->rx_errors = port_ctr_read(&pp->rxc.errors);
	s->tx_pkts = port_ctr_read(&pp->txc.pkts);
	s->tx_bytes = port_ctr_read(&pp->txc.bytes);
	s->tx_errors = port_ctr_read(&pp->txc.errors);
}

/*
 * The directory of @path: what precedes its last '/' ("/" for a file at
 * the root), "." when it has none. malloc'ed; NULL: no memory.
 */
static char *dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		return strdup(".");
	return strndup(path, slash == path ? 1 : (size_t)(slash - path));
}

/*
 * @path resolved: its realpath when it exists, else the realpath of its
 * directory joined with its base name. malloc'ed; NULL with errno set when
 * the directory cannot be resolved (or no memory).
 */
static char *resolve(const char *path)
{
	char *real = realpath(path, NULL), *dir, *rdir, *out = NULL;
	const char *slash;

	if (real || errno != ENOENT)
		return real;
	slash = strrchr(path, '/');
	dir = dir_of(path);
	if (!dir)
		return NULL;
	rdir = realpath(dir, NULL);
	free(dir);
	if (!rdir)
		return NULL;
	if (asprintf(&out, "%s/%s", strcmp(rdir, "/") ? rdir : "",
		     slash ? slash + 1 : path) < 0)
		out = NULL;
	free(rdir);
	return out;
}

/*
 * Does @path name a descriptor rather than a file (/dev/stdout,
 * /dev/fd/3, /proc/self/fd/1), so that it is always written directly and
 * read as a stream, whatever it stands for?
 */
static bool path_is_descriptor(const char *path)
{
	return !strcmp(path, "/dev/stdin") || !strcmp(path, "/dev/stdout") ||
	       !strcmp(path, "/dev/stderr") || !strncmp(path, "/dev/fd/", 8) ||
	       !fnmatch("/proc/*/fd/*", path, FNM_PATHNAME);
}

/* libpcap's message @msg without the "PATH: " it may start with. */
static const char *without_path(const char *msg, const char *path)
{
	size_t len = strlen(path);

	if (!strncmp(msg, path, len) && !strncmp(msg + len, ": ", 2))
		return msg + len + 2;
	return msg;
}

static int open_rx(struct port_pcap *pp, const char *path,
		   struct dpflow_error *err)
{
	char errbuf[PCAP_ERRBUF_SIZE] = "";
	struct stat st;
	int dlt, kind;

	if (!stat(path, &st) && S_ISDIR(st.st_mode))
		return dpflow_error_set(err, EISDIR, "rx",
					"cannot read '%s': it is a directory",
					path);
	pp->rx_file = strdup(path);
	if (!pp->rx_file)
		return dpflow_error_set(err, ENOMEM, "rx",
					"cannot read '%s': no memory", path);
	errno = 0;
	pp->rx = pcap_open_offline_with_tstamp_precision(
	    path, PCAP_TSTAMP_PRECISION_NANO, errbuf);
	if (!pp->rx)
		return dpflow_error_set(err, errno ? errno : EINVAL, "rx",
					"cannot read '%s': %s", path,
					without_path(errbuf, path));
	dlt = pcap_datalink(pp->rx);
	kind = link_kind_of(dlt);
	if (kind < 0) {
		const char *name = pcap_datalink_val_to_name(dlt);
		pcap_close(pp->rx);
		pp->rx = NULL;
		return dpflow_error_set(err, ENOTSUP, "rx",
					"'%s': link type %d (%s) not supported "
					"(Ethernet, SLL, SLL2, raw IP, "
					"loopback are)",
					path, dlt, name ? name : "unknown");
	}
	pp->link = (enum link_kind)kind;
	pp->up.link_type = dlt;
	/* Only regular files take part in the collision check. */
	if (!stat(path, &st) && S_ISREG(st.st_mode))
		pp->rx_real = realpath(path, NULL);
	return 0;
}

/* Fill @x (@n characters) with random letters and digits. */
static void tmp_suffix(char *x, unsigned n)
{
	static const char set[] = "abcdefghijklmnopqrstuvwxyz"
				  "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	uint8_t r[16];

	if (getrandom(r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
		uint64_t v[2] = {dpflow_clock_ns(), (uint64_t)getpid()};
		memcpy(r, v, sizeof(r));
	}
	for (unsigned i = 0; i < n; i++)
		x[i] = set[r[i % sizeof(r)] % (sizeof(set) - 1)];
}

/*
 * Give the temporary file @fd the owner, group and mode of the target
 * @st: as root the owner and group, else the group where we are in it
 * (EPERM is no error: the file is then ours); the mode always.
 */
static int keep_owner_mode(int fd, const struct stat *st)
{
	if ((st->st_uid != geteuid() || st->st_gid != getegid()) &&
	    fchown(fd, st->st_uid, st->st_gid) &&
	    (errno != EPERM ||
	     (fchown(fd, (uid_t)-1, st->st_gid) && errno != EPERM)))
		return -errno;
	/* after the chown, which clears set-id bits */
	if (fchmod(fd, st->st_mode & 07777))
		return -errno;
	return 0;
}

/*
 * Create the temporary file for target @real (owner, group and mode:
 * @st's when the target exists, else ours and 0666 under the umask)
 * beside it: ".BASE.XXXXXX", O_EXCL. Sets pp->tx_tmp; returns the
 * descriptor or -errno. Not mkstemp(): it creates mode 0600, and a new
 * capture gets 0666 under the umask as fopen would give it.
 */
static int make_tmp(struct port_pcap *pp, const char *real,
		    const struct stat *st)
{
	const char *slash = strrchr(real, '/');
	size_t dl = (size_t)(slash - real) + 1;
	size_t len = strlen(real) + 9;
	int fd = -EEXIST, rc;

	pp->tx_tmp = malloc(len);
	if (!pp->tx_tmp)
		return -ENOMEM;
	for (unsigned tries = 0; tries < 100 && fd == -EEXIST; tries++) {
		snprintf(pp->tx_tmp, len, "%.*s.%s.XXXXXX", (int)dl, real,
			 slash + 1);
		tmp_suffix(pp->tx_tmp + len - 7, 6);
		fd = open(pp->tx_tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
			  0666);
		if (fd < 0)
			fd = -errno;
	}
	if (fd >= 0 && st && (rc = keep_owner_mode(fd, st))) {
		close(fd);
		unlink(pp->tx_tmp);
		fd = rc;
	}
	if (fd < 0) {
		free(pp->tx_tmp);
		pp->tx_tmp = NULL;
	}
	return fd;
}

/*
 * Open the output as pp->way says: the path itself (truncated), a
 * temporary file for it, or (in place) the target without truncating it,
 * kept in pp->tx_fd until the first transmit. 0 or -errno.
 */
static int open_dump(struct port_pcap *pp, const char *path,
		     const struct stat *st)
{
	int fd, rc;

	switch (pp->way) {
	case TX_INPLACE:
		pp->tx_fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
		return pp->tx_fd < 0 ? -errno : 0;
	case TX_DIRECT:
		fd = open(path,
			  O_WRONLY | O_CREAT | O_TRUNC | O_NOCTTY | O_CLOEXEC,
			  0666);
		return fd < 0 ? -errno : tx_stream(pp, fd);
	case TX_TMP:
		break;
	}
	fd = make_tmp(pp, pp->tx_real, st);
	if (fd < 0)
		return fd;
	rc = tx_stream(pp, fd);
	if (rc) {
		unlink(pp->tx_tmp);
		free(pp->tx_tmp);
		pp->tx_tmp = NULL;
	}
	return rc;
}

/*
 * The regular file @st at @real exists: can it be replaced through a
 * temporary file with its identity kept? Sets pp->way (TX_INPLACE when
 * not, with the reason in pp->why). 0 or -ENOMEM.
 */
static int choose_way(struct port_pcap *pp, const char *real,
		      const struct stat *st)
{
	char *dir = dir_of(real);
	struct stat ds;
	uid_t me = geteuid();

	if (!dir)
		return -ENOMEM;
	pp->way = TX_INPLACE;
	if (st->st_nlink > 1)
		pp->why = "it has other hard links";
	else if (faccessat(AT_FDCWD, dir, W_OK | X_OK, AT_EACCESS))
		pp->why = "its directory is not writable";
	/* the kernel's rule for renaming over a file in a sticky directory
	 * (root: CAP_FOWNER) */
	else if (!stat(dir, &ds) && (ds.st_mode & S_ISVTX) &&
		 st->st_uid != me && ds.st_uid != me && me != 0)
		pp->why = "its directory is sticky and the file another "
			  "user's";
	else
		pp->way = TX_TMP;
	free(dir);
	return 0;
}

/*
 * Where tx=@path goes, for open and check alike: refuses a directory and
 * the rx file; sets pp->tx_file, pp->tx_real (NULL: exempt from the
 * collision check) and pp->way, and *@exists (then @st is filled).
 */
static int tx_target(struct port_pcap *pp, const struct port_args *args,
		     const char *path, struct stat *st, bool *exists,
		     struct dpflow_error *err)
{
	*exists = !stat(path, st);
	if (!*exists && errno != ENOENT)
		return dpflow_error_set(err, errno, "tx",
					"cannot write '%s': %s", path,
					strerror(errno));
	if (*exists && S_ISDIR(st->st_mode))
		return dpflow_error_set(err, EISDIR, "tx",
					"cannot write '%s': it is a directory",
					path);
	pp->tx_file = strdup(path);
	if (!pp->tx_file)
		return dpflow_error_set(err, ENOMEM, "tx",
					"cannot write '%s': no memory", path);
	pp->way = TX_DIRECT;
	if (!*exists || S_ISREG(st->st_mode)) {
		pp->tx_real = resolve(path);
		if (!pp->tx_real)
			return dpflow_error_set(err, errno ? errno : ENOMEM,
						"tx", "cannot write '%s': %s",
						path, strerror(errno));
	}
	if (pp->rx_real && pp->tx_real && !strcmp(pp->rx_real, pp->tx_real))
		return dpflow_error_set(err, EINVAL, "tx",
					"'%s': tx '%s' is the rx file '%s'",
					args->uri, path, pp->rx_file);
	if (pp->tx_real && !path_is_descriptor(path)) {
		pp->way = TX_TMP;
		if (*exists && choose_way(pp, pp->tx_real, st))
			return dpflow_error_set(err, ENOMEM, "tx",
						"cannot write '%s': no memory",
						path);
	}
	return 0;
}

static int open_tx(struct port_pcap *pp, const struct port_args *args,
		   const char *path, struct dpflow_error *err)
{
	struct stat st;
	bool exists;
	int rc = tx_target(pp, args, path, &st, &exists, err);

	if (rc)
		return rc;
	pp->tx_dead = pcap_open_dead_with_tstamp_precision(
	    DLT_EN10MB, TX_SNAPLEN, PCAP_TSTAMP_PRECISION_NANO);
	if (!pp->tx_dead)
		return dpflow_error_set(err, ENOMEM, "tx",
					"cannot write '%s': no memory", path);
	rc = open_dump(pp, path, exists ? &st : NULL);
	if (rc < 0) {
		dpflow_error_set(err, -rc, "tx", "cannot write '%s': %s", path,
				 strerror(-rc));
		pcap_close(pp->tx_dead);
		pp->tx_dead = NULL;
	}
	return rc;
}

/*
 * What open_tx would need, checked without writing: the target itself
 * when it is written in place or directly and exists, else a directory it
 * may create files in (the temporary file's, or the target's). 0 or
 * -errno with @err as open fills it.
 */
static int tx_writable(const struct port_pcap *pp, bool exists,
		       struct dpflow_error *err)
{
	char *dir = NULL;
	int rc = 0;

	if (exists && pp->way != TX_TMP) {
		if (faccessat(AT_FDCWD, pp->tx_file, W_OK, AT_EACCESS))
			rc = errno;
	} else if (!(dir = dir_of(pp->tx_real ? pp->tx_real : pp->tx_file))) {
		rc = ENOMEM;
	} else if (faccessat(AT_FDCWD, dir, W_OK | X_OK, AT_EACCESS)) {
		rc = errno;
	}
	free(dir);
	if (rc)
		return dpflow_error_set(err, rc, "tx", "cannot write '%s': %s",
					pp->tx_file, strerror(rc));
	return 0;
}

/* Free the names kept at open. */
static void free_names(struct port_pcap *pp)
{
	free(pp->rx_file);
	free(pp->rx_real);
	free(pp->tx_file);
	free(pp->tx_real);
	free(pp->tx_tmp);
}

/*
 * The keys of a pcap URI, for open and check alike: *@rx and *@tx get the
 * files (NULL: none), and receiving needs @pool.
 */
static int file_args(const struct port_args *args, struct dpflow_pool *pool,
		     const char **rx, const char **tx, struct dpflow_error *err)
{
	bool seen_rx = false, seen_tx = false;
	int rc;

	*rx = *tx = NULL;
	for (unsigned i = 0; i < args->n; i++) {
		const struct port_arg *a = &args->a[i];
		if (!strcmp(a->key, "rx")) {
			if ((rc = port_arg_need_value(args, a, "rx", err)) ||
			    (rc = port_arg_once(args, a, "rx", &seen_rx, err)))
				return rc;
			*rx = a->val;
		} else if (!strcmp(a->key, "tx")) {
			if ((rc = port_arg_need_value(args, a, "tx", err)) ||
			    (rc = port_arg_once(args, a, "tx", &seen_tx, err)))
				return rc;
			*tx = a->val;
		} else if (i == 0 && !a->val) {
			/* pcap:FILE */
			seen_rx = true;
			*rx = a->key;
		} else {
			return port_arg_unknown(args, a, err);
		}
	}
	if (!*rx && !*tx)
		return dpflow_error_set(err, EINVAL, "rx",
					"'%s': a pcap port needs rx=FILE, "
					"tx=FILE or both",
					args->uri);
	if (*rx && !pool)
		return dpflow_error_set(err, EINVAL, "pool",
					"'%s': receiving from '%s' needs a "
					"pool",
					args->uri, *rx);
	return 0;
}

static int file_open(struct dpflow_port *port, const struct port_args *args,
		     struct dpflow_error *err)
{
	struct port_pcap *pp = file_port(port);
	const char *rx, *tx;
	int rc = file_args(args, port->pool, &rx, &tx, err);

	pp->tx_fd = -1;
	if (rc)
		return rc;
	port->n_rxq = rx ? 1 : 0;
	port->n_txq = tx ? 1 : 0;
	if (rx && (rc = open_rx(pp, rx, err)) < 0)
		goto err;
	if (tx && (rc = open_tx(pp, args, tx, err)) < 0)
		goto err;
	return 0;

err:
	if (pp->rx)
		pcap_close(pp->rx);
	pp->rx = NULL;
	free_names(pp);
	return rc;
}

/* Is @path a terminal? Opened for reading only, without becoming ours. */
static bool is_tty(const char *path)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	bool tty = fd >= 0 && isatty(fd);

	if (fd >= 0)
		close(fd);
	return tty;
}

/*
 * Is rx=@path a stream (a FIFO, a terminal, a descriptor path such as
 * /dev/stdin), whose header a check must not read (it would take it from
 * the writer, or wait for one)? Then only its read permission is checked.
 * Other devices (/dev/null) are opened as captures, as run opens them.
 */
static int rx_stream(const char *path, bool *stream, struct dpflow_error *err)
{
	struct stat st;
	bool exists = !stat(path, &st);

	*stream = path_is_descriptor(path) ||
		  (exists && (S_ISFIFO(st.st_mode) ||
			      (S_ISCHR(st.st_mode) && is_tty(path))));
	if (*stream && access(path, R_OK))
		return dpflow_error_set(err, errno, "rx",
					"cannot read '%s': %s", path,
					strerror(errno));
	return 0;
}

/*
 * Check: the keys, the rx file read as a capture (its header) and closed
 * (a stream only for read permission), the tx target resolved and
 * writable the way open would write it; nothing is created or written.
 */
static int file_check(const struct port_args *args, struct dpflow_pool *pool,
		      char *paths[2], struct dpflow_error *err)
{
	struct port_pcap pp;
	const char *rx, *tx;
	struct stat st;
	bool exists, stream = false;
	int rc;

	memset(&pp, 0, sizeof(pp));
	rc = file_args(args, pool, &rx, &tx, err);
	if (!rc && rx)
		rc = rx_stream(rx, &stream, err);
	if (!rc && rx && !stream)
		rc = open_rx(&pp, rx, err);
	if (pp.rx)
		pcap_close(pp.rx);
	if (!rc && tx)
		rc = tx_target(&pp, args, tx, &st, &exists, err);
	if (!rc && tx)
		rc = tx_writable(&pp, exists, err);
	if (!rc) {
		paths[0] = pp.rx_real;
		paths[1] = pp.tx_real;
		pp.rx_real = pp.tx_real = NULL;
	}
	free_names(&pp);
	return rc;
}

/*
 * Flush, fsync (a file of ours: temporary or in place) and close the
 * output, keeping the first error. Nothing to do before it started or
 * once closed.
 */
static void tx_close(struct port_pcap *pp)
{
	FILE *f;

	if (!pp->tx)
		return;
	f = pcap_dump_file(pp->tx);
	tx_flush(pp);
	if (pp->way != TX_DIRECT && !pp->tx_err && fsync(fileno(f)))
		tx_fail(pp, errno);
	/* pcap_dump_close() is fclose() without its result */
	errno = 0;
	if (fclose(f) && !pp->tx_err)
		tx_fail(pp, errno ? errno : EIO);
	pp->tx = NULL;
	free(pp->tx_buf);
	pp->tx_buf = NULL;
}

/*
 * Commit the output: rename the temporary file onto the target (kept and
 * named when that fails), or give an in-place target that got no packet
 * its header. 0 or a negative errno with @err filled.
 */
static int tx_commit(struct port_pcap *pp, struct dpflow_error *err)
{
	int code;

	if (pp->way == TX_INPLACE && !pp->tx_started) {
		if (!tx_start_inplace(pp))
			tx_close(pp);
		if (!pp->tx_err)
			return 0;
		return dpflow_error_set(
		    err, pp->tx_err, "tx", "writing '%s' (in place: %s): %s",
		    pp->tx_file, pp->why, strerror(pp->tx_err));
	}
	if (pp->way != TX_TMP || !pp->tx_tmp)
		return 0;
	if (!rename(pp->tx_tmp, pp->tx_real)) {
		free(pp->tx_tmp);
		pp->tx_tmp = NULL;
		return 0;
	}
	code = errno;
	dpflow_error_set(err, code, "tx",
			 "writing '%s': cannot rename the output onto it: %s; "
			 "output kept in %s",
			 pp->tx_file, strerror(code), pp->tx_tmp);
	/* kept: close must not remove it */
	free(pp->tx_tmp);
	pp->tx_tmp = NULL;
	return -code;
}

/*
 * The end of a run: the output closed (flushed and synced), then the first
 * error either side met; with @commit and no error, the output committed.
 */
static int file_finish(struct dpflow_port *port, bool commit,
		       struct dpflow_error *err)
{
	struct port_pcap *pp = file_port(port);
	bool now = commit && pp->tx_dead && !pp->tx_finished;

	tx_close(pp);
	if (now)
		pp->tx_finished = true; /* committed or not, only once */
	if (pp->rx_err)
		return dpflow_error_set(
		    err, pp->rx_err, "rx", "reading '%s': packet %llu: %s",
		    pp->rx_file, (unsigned long long)pp->rx_records + 1,
		    pp->rx_msg);
	if (pp->tx_err)
		return dpflow_error_set(
		    err, pp->tx_err, "tx", "writing '%s'%s%s%s: %s",
		    pp->tx_file, pp->way == TX_INPLACE ? " (in place: " : "",
		    pp->way == TX_INPLACE ? pp->why : "",
		    pp->way == TX_INPLACE ? ")" : "", strerror(pp->tx_err));
	if (!now || pp->tx_discard)
		return 0;
	return tx_commit(pp, err);
}

static void file_discard(struct dpflow_port *port)
{
	struct port_pcap *pp = file_port(port);

	pp->tx_discard = true;
	if (pp->way == TX_INPLACE && pp->tx_started && !pp->tx_finished)
		DPFLOW_LOG_WARN("port",
				"%s: '%s' is written in place (%s): it keeps "
				"what was written before the discard",
				port->name, pp->tx_file, pp->why);
}

static const char *file_path(const struct dpflow_port *port, bool tx)
{
	const struct port_pcap *pp = (const struct port_pcap *)port;

	return tx ? pp->tx_real : pp->rx_real;
}

static void file_close(struct dpflow_port *port)
{
	struct port_pcap *pp = file_port(port);
	struct dpflow_error err;

	/* an owner that never finished: commit as close always did */
	if (pp->tx_dead && !pp->tx_finished && !pp->tx_discard &&
	    file_finish(port, true, &err))
		DPFLOW_LOG_ERR("port", "%s: %s", port->name, err.msg);
	tx_close(pp);
	if (pp->tx_fd >= 0)
		close(pp->tx_fd); /* in place, never started: untouched */
	if (pp->tx_tmp)
		unlink(pp->tx_tmp); /* not committed */
	if (pp->tx_dead)
		pcap_close(pp->tx_dead);
	if (pp->rx)
		pcap_close(pp->rx);
	free_names(pp);
}

const struct dpflow_port_ops dpflow_port_pcap_ops = {
    .kind = "pcap",
    .size = sizeof(struct port_pcap),
    .open = file_open,
    .check = file_check,
    .rx_burst = file_rx_burst,
    .tx_burst = file_tx_burst,
    .rx_done = file_rx_done,
    .stats = file_stats,
    .ring = NULL,
    .close = file_close,
    .path = file_path,
    .finish = file_finish,
    .discard = file_discard,
};
