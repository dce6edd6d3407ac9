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
 * buffered by stdio. It goes to a temporary file beside the target
 * (".NAME.XXXXXX", created with O_EXCL, the target's mode when it exists),
 * renamed onto the target at close; a discarded port, or one whose writes
 * failed, removes the temporary file and leaves the target as it was. A
 * target that is a symlink is followed (the file it names is replaced). A
 * target that exists and is not a regular file (a FIFO, /dev/null), or
 * lies under /dev or /proc (/dev/stdout), is written directly.
 *
 * Errors: a capture that cannot be read to its end (cut mid-record) ends
 * the input; the first such error and the first failed write are kept for
 * dpflow_port_finish(), with the file and the packet number.
 *
 * Check (dpflow_port_open_check): the keys through open's own code, the rx
 * file opened as a capture and closed (a FIFO or device only tested for
 * read access: its header would be taken from the writer), the tx target
 * through open's own resolution (directory, rx file) and then only tested for
 * write access: nothing is created, truncated or opened for writing.
 *
 * Threads: one receiving thread and one transmitting thread at a time; the
 * two sides share nothing but the port.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
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
	pcap_dumper_t *tx;
	int tx_err; /* the first failed write's errno, or 0 */
	struct tx_ctrs txc;
	/* cold: set at open, read at finish and close */
	char *rx_file;	 /* rx= as given */
	char *rx_real;	 /* its realpath, NULL for a device or FIFO */
	char *tx_file;	 /* tx= as given */
	char *tx_real;	 /* the target resolved, NULL: exempt (direct) */
	char *tx_tmp;	 /* the temporary file, NULL: written directly */
	bool tx_discard; /* close removes tx_tmp */
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
		c->errors++;
		pp->rx_err = EIO;
		snprintf(pp->rx_msg, sizeof(pp->rx_msg), "%s",
			 pcap_geterr(pp->rx));
		DPFLOW_LOG_RL(DPFLOW_LOG_ERR, "port", 1, 1000,
			      "%s: read failed at packet %llu, input ends "
			      "here: %s",
			      pp->up.name,
			      (unsigned long long)pp->rx_records + 1,
			      pp->rx_msg);
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

static uint16_t file_tx_burst(struct dpflow_port *port, uint16_t queue,
			      struct dpflow_pool *pool, const uint32_t *idx,
			      uint16_t n)
{
	struct port_pcap *pp = file_port(port);
	uint32_t room = (uint32_t)pool->headroom + pool->data_room;
	uint64_t now = 0, bytes = 0, written = 0, bad = 0;
	struct pcap_pkthdr h;

	(void)queue;
	for (uint16_t i = 0; i < n; i++) {
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
	if (DPFLOW_UNLIKELY(ferror(pcap_dump_file(pp->tx)))) {
		if (!pp->tx_err)
			pp->tx_err = errno ? errno : EIO;
		DPFLOW_LOG_RL(DPFLOW_LOG_ERR, "port", 1, 1000,
			      "%s: write failed: %s", port->name,
			      strerror(pp->tx_err));
		bad += written;
		written = 0;
		bytes = 0;
	}
	dpflow_pool_free_bulk(pool, idx, n);
	port_ctr_add(&pp->txc.pkts, written);
	port_ctr_add(&pp->txc.bytes, bytes);
	if (DPFLOW_UNLIKELY(bad))
		port_ctr_add(&pp->txc.errors, bad);
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
 * Does @path lie in /dev or /proc, where names stand for descriptors and
 * devices (/dev/stdout), so that replacing the file would be wrong?
 */
static bool in_dev_or_proc(const char *path)
{
	char *dir, *rdir;
	bool in;

	if (!strchr(path, '/'))
		return false;
	dir = dir_of(path);
	rdir = dir ? realpath(dir, NULL) : NULL;
	free(dir);
	if (!rdir)
		return false;
	in = !strncmp(rdir, "/dev", 4) && (!rdir[4] || rdir[4] == '/');
	in = in || (!strncmp(rdir, "/proc", 5) && (!rdir[5] || rdir[5] == '/'));
	free(rdir);
	return in;
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
					"cannot read '%s': %s", path, errbuf);
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
 * Create the temporary file for target @real (mode: @st's when the target
 * exists, else 0666 under the umask) beside it: ".BASE.XXXXXX", O_EXCL.
 * Sets pp->tx_tmp; returns the descriptor or -errno.
 */
static int make_tmp(struct port_pcap *pp, const char *real,
		    const struct stat *st)
{
	const char *slash = strrchr(real, '/');
	size_t dl = (size_t)(slash - real) + 1;
	size_t len = strlen(real) + 9;
	int fd = -EEXIST;

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
	if (fd >= 0 && st && fchmod(fd, st->st_mode & 07777)) {
		int code = errno;
		close(fd);
		unlink(pp->tx_tmp);
		fd = -code;
	}
	if (fd < 0) {
		free(pp->tx_tmp);
		pp->tx_tmp = NULL;
	}
	return fd;
}

/* Open the dump on @path itself, or on a temporary file for it. */
static int open_dump(struct port_pcap *pp, const char *path, bool direct,
		     const struct stat *st)
{
	FILE *f;
	int fd, code;

	errno = 0;
	if (direct) {
		pp->tx = pcap_dump_open(pp->tx_dead, path);
		return pp->tx ? 0 : -(errno ? errno : EIO);
	}
	fd = make_tmp(pp, pp->tx_real, st);
	if (fd < 0)
		return fd;
	f = fdopen(fd, "wb");
	if (f)
		pp->tx = pcap_dump_fopen(pp->tx_dead, f);
	if (pp->tx)
		return 0;
	code = errno ? errno : EIO;
	if (f)
		fclose(f);
	else
		close(fd);
	unlink(pp->tx_tmp);
	free(pp->tx_tmp);
	pp->tx_tmp = NULL;
	return -code;
}

/*
 * Where tx=@path goes, for open and check alike: refuses a directory and
 * the rx file; sets pp->tx_file and pp->tx_real (NULL: exempt from the
 * collision check), *@exists (then @st is filled) and *@direct (written
 * in place, not through a temporary file).
 */
static int tx_target(struct port_pcap *pp, const struct port_args *args,
		     const char *path, struct stat *st, bool *exists,
		     bool *direct, struct dpflow_error *err)
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
	*direct = (*exists && !S_ISREG(st->st_mode)) || in_dev_or_proc(path);
	pp->tx_file = strdup(path);
	if (!pp->tx_file)
		return dpflow_error_set(err, ENOMEM, "tx",
					"cannot write '%s': no memory", path);
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
	return 0;
}

static int open_tx(struct port_pcap *pp, const struct port_args *args,
		   const char *path, struct dpflow_error *err)
{
	struct stat st;
	bool exists, direct;
	int rc = tx_target(pp, args, path, &st, &exists, &direct, err);

	if (rc)
		return rc;
	pp->tx_dead = pcap_open_dead_with_tstamp_precision(
	    DLT_EN10MB, TX_SNAPLEN, PCAP_TSTAMP_PRECISION_NANO);
	if (!pp->tx_dead)
		return dpflow_error_set(err, ENOMEM, "tx",
					"cannot write '%s': no memory", path);
	rc = open_dump(pp, path, direct, exists ? &st : NULL);
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
 * when it is written in place and exists, else a directory it may create
 * files in (the temporary file's, or the target's). 0 or -errno with
 * @err as open fills it.
 */
static int tx_writable(const struct port_pcap *pp, bool exists, bool direct,
		       struct dpflow_error *err)
{
	char *dir = NULL;
	int rc = 0;

	if (direct && exists) {
		if (access(pp->tx_file, W_OK))
			rc = errno;
	} else if (!(dir = dir_of(pp->tx_real))) {
		rc = ENOMEM;
	} else if (access(dir, W_OK | X_OK)) {
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

/*
 * Is rx=@path a stream (a FIFO, a device such as /dev/stdin), whose header
 * a check must not read (it would take it from the writer, or wait for
 * one)? Then only its read permission is checked.
 */
static int rx_stream(const char *path, bool *stream, struct dpflow_error *err)
{
	struct stat st;

	*stream =
	    !stat(path, &st) && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
	if (*stream && access(path, R_OK))
		return dpflow_error_set(err, errno, "rx",
					"cannot read '%s': %s", path,
					strerror(errno));
	return 0;
}

/*
 * Check: the keys, the rx file read as a capture (its header) and closed
 * (a stream only for read permission), the tx target resolved and
 * writable; nothing is created or written.
 */
static int file_check(const struct port_args *args, struct dpflow_pool *pool,
		      char *paths[2], struct dpflow_error *err)
{
	struct port_pcap pp;
	const char *rx, *tx;
	struct stat st;
	bool exists, direct, stream = false;
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
		rc = tx_target(&pp, args, tx, &st, &exists, &direct, err);
	if (!rc && tx)
		rc = tx_writable(&pp, exists, direct, err);
	if (!rc) {
		paths[0] = pp.rx_real;
		paths[1] = pp.tx_real;
		pp.rx_real = pp.tx_real = NULL;
	}
	free_names(&pp);
	return rc;
}

/* Flush the output; keep the first error in tx_err. */
static void tx_flush(struct port_pcap *pp)
{
	errno = 0;
	if ((pcap_dump_flush(pp->tx) < 0 || ferror(pcap_dump_file(pp->tx))) &&
	    !pp->tx_err)
		pp->tx_err = errno ? errno : EIO;
}

static int file_finish(struct dpflow_port *port, struct dpflow_error *err)
{
	struct port_pcap *pp = file_port(port);

	if (pp->tx)
		tx_flush(pp);
	if (pp->rx_err)
		return dpflow_error_set(
		    err, pp->rx_err, "rx", "reading '%s': packet %llu: %s",
		    pp->rx_file, (unsigned long long)pp->rx_records + 1,
		    pp->rx_msg);
	if (pp->tx_err)
		return dpflow_error_set(err, pp->tx_err, "tx",
					"writing '%s': %s", pp->tx_file,
					strerror(pp->tx_err));
	return 0;
}

static void file_discard(struct dpflow_port *port)
{
	file_port(port)->tx_discard = true;
}

static const char *file_path(const struct dpflow_port *port, bool tx)
{
	const struct port_pcap *pp = (const struct port_pcap *)port;

	return tx ? pp->tx_real : pp->rx_real;
}

static void file_close(struct dpflow_port *port)
{
	struct port_pcap *pp = file_port(port);

	if (pp->tx) {
		tx_flush(pp);
		pcap_dump_close(pp->tx);
	}
	if (pp->tx_err && !pp->tx_discard)
		DPFLOW_LOG_ERR("port", "%s: writing '%s' failed: %s%s",
			       port->name, pp->tx_file, strerror(pp->tx_err),
			       pp->tx_tmp ? "; the file is left as it was"
					  : "");
	if (pp->tx_tmp && (pp->tx_discard || pp->tx_err)) {
		unlink(pp->tx_tmp);
	} else if (pp->tx_tmp && rename(pp->tx_tmp, pp->tx_real)) {
		DPFLOW_LOG_ERR("port", "%s: renaming '%s' to '%s': %s",
			       port->name, pp->tx_tmp, pp->tx_real,
			       strerror(errno));
		unlink(pp->tx_tmp);
	}
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
