/*
 * Ports: where packets come from and go to.
 *
 * A port is opened from a URI naming its backend:
 *   pcap:rx=in.pcap,tx=out.pcap   read pcap/pcapng, write pcap (ns stamps)
 *   pcap:in.pcap                  the same as pcap:rx=in.pcap
 *   ring:NAME[,size=N][,loop]     in-process rings, for tests and glue
 *   afpacket:IFNAME[,queues=N]    a Linux interface (TPACKET_V3 rings)
 *   afxdp:IFNAME[,queues=N]       a Linux interface (AF_XDP sockets)
 *   gen:PROFILE[,loop][,rate=PPS] in-memory traffic (a gen profile)
 *   null:                         a sink: counts and frees what it sends
 * Backends sit behind an ops table (lib/io/port_internal.h); this generic
 * layer validates arguments and dispatches. docs/ports.md has the details.
 *
 * Received packets are allocated from the pool given at open; ownership
 * passes to the caller. tx_burst takes ownership of the packets it accepts
 * (it frees them to their pool once written) and returns how many; the
 * caller keeps the rest. A port's queue is used by one thread at a time.
 */
#ifndef DPFLOW_PORT_H
#define DPFLOW_PORT_H

#include <stdbool.h>
#include <stdint.h>

#include "dpflow/error.h"
#include "dpflow/pool.h"
#include "dpflow/ring.h"

#ifdef __cplusplus
extern "C" {
#endif

struct dpflow_port;

/* Most ports open at once; ids are below this. */
#define DPFLOW_PORT_MAX 1024

struct dpflow_port_stats {
	uint64_t rx_pkts;
	uint64_t rx_bytes;    /* frame bytes delivered (data_len summed) */
	uint64_t rx_nobuf;    /* pool empty: packet left unread or dropped */
	uint64_t rx_oversize; /* larger than the data room: dropped */
	uint64_t rx_dropped;  /* dropped before the port saw them (the
				 kernel's ring was full) */
	uint64_t tx_pkts;
	uint64_t tx_bytes;
	uint64_t tx_errors; /* backend refused or failed to write */
	/* added by the pcap backend; 0 for ports that never see them */
	uint64_t rx_truncated; /* captured short of the wire length: delivered
				  with the captured bytes */
	uint64_t rx_skipped;   /* link-layer protocol not convertible to
				  Ethernet, or pseudo-header cut short */
	uint64_t rx_errors;    /* input unreadable (file cut mid-record):
				  input ends there */
};

/*
 * Open the port described by @uri, receiving into @pool (may be NULL for a
 * transmit-only port). NULL + @err (naming the URI key at fault) on error:
 * field "kind" (unknown backend), "key" (unknown key), the key itself
 * (missing or bad value, unopenable file), "pool" (receiving needs one).
 * The port id is the lowest one free (0, 1, ... in order of opening).
 * Control path.
 */
struct dpflow_port *dpflow_port_open(struct dpflow_pool *pool, const char *uri,
				     struct dpflow_error *err);

/*
 * Check @uri as dpflow_port_open() would, opening nothing: the kind is
 * known and every key is read by the backend's own parser (open's
 * messages); pcap: the rx file readable as a capture, the tx path writable
 * (nothing created or truncated); afpacket, afxdp: the interface exists;
 * gen: its packets fit the pool; null, ring, dpdk: the keys only (the
 * backend's check op, docs/ports.md). A kind whose backend has no check op
 * is refused (ENOTSUP, field "kind"). Returns a placeholder port of the same
 * kind and name that never receives or transmits (its counters stay 0;
 * close it with dpflow_port_close()), or NULL + @err with open's message.
 * Control path.
 */
struct dpflow_port *dpflow_port_open_check(struct dpflow_pool *pool,
					   const char *uri,
					   struct dpflow_error *err);

/*
 * Release the port. NULL ok. Output that dpflow_port_finish() did not
 * commit is removed (a pcap port's temporary file), so the target stays
 * as it was; an owner that called neither dpflow_port_finish() nor
 * dpflow_port_discard() gets its output committed here, with errors only
 * logged: call dpflow_port_finish() to see them.
 */
void dpflow_port_close(struct dpflow_port *port);

/*
 * The end of a run, first step (no data-path call in flight): flush, sync
 * and close pending output (a pcap port: its temporary file, or a target
 * written in place) and report the first error the port met, on either
 * side: a capture unreadable or cut short (the message names the file and
 * the packet, counted from 1), a failed write (the file and the reason).
 * Commits nothing. An owner of several ports calls this on each, then
 * dpflow_port_finish() on each when none failed, else
 * dpflow_port_discard(), so that no output is committed for a failed run.
 * 0, or a negative errno with @err filled (field "rx" or "tx"). NULL ok.
 */
int dpflow_port_sync(struct dpflow_port *port, struct dpflow_error *err);

/*
 * The end of a run (no data-path call in flight): dpflow_port_sync(),
 * then, where the port met no error and was not discarded, commit its
 * output: a pcap port renames its temporary file onto the target (the
 * target's owner, group and mode kept) or gives an in-place target that
 * got no packet its file header. Errors (the port's, or the commit's: a
 * rename that fails keeps the temporary file and names it) are returned,
 * never logged: the backends keep them for this call. 0, or a negative
 * errno with @err filled (field "rx" or "tx"). Commits once; NULL ok (0).
 */
int dpflow_port_finish(struct dpflow_port *port, struct dpflow_error *err);

/*
 * Discard what the port would leave behind: a pcap port commits nothing
 * and removes its temporary output, leaving an existing target byte for
 * byte as it was; a target written in place (docs/ports.md) is untouched
 * only when nothing was written to it yet (a warning is logged
 * otherwise). For an owner whose run failed or never started. NULL ok.
 */
void dpflow_port_discard(struct dpflow_port *port);

/*
 * The file the port reads (@tx false) or writes, resolved through ./, ..
 * and symlinks; NULL when it has none (not a file backend) or the file is
 * a device or FIFO. Valid while the port is open.
 */
const char *dpflow_port_path(const struct dpflow_port *port, bool tx);

/*
 * Receive up to @n (<= DPFLOW_BURST_MAX; larger is clamped) packets into
 * @idx. Each packet's meta has data_off/data_len, port, queue and rx_ts_ns
 * set; the headers are not parsed. Returns 0 when nothing is available now
 * (or the port has no pool or no such queue); see dpflow_port_rx_done() for
 * end of input.
 */
uint16_t dpflow_port_rx_burst(struct dpflow_port *port, uint16_t queue,
			      uint32_t *idx, uint16_t n);

/*
 * Transmit up to @n packets of @pool. Returns how many were accepted (their
 * ownership passes to the port). Timestamps written: tx_time_ns when set,
 * else rx_ts_ns when set, else the current time.
 */
uint16_t dpflow_port_tx_burst(struct dpflow_port *port, uint16_t queue,
			      struct dpflow_pool *pool, const uint32_t *idx,
			      uint16_t n);

/*
 * True once a finite input (a pcap file) is exhausted, or the port has no
 * input; a ring port never is.
 */
bool dpflow_port_rx_done(const struct dpflow_port *port);

int dpflow_port_stats_get(const struct dpflow_port *port,
			  struct dpflow_port_stats *stats);

const char *dpflow_port_name(const struct dpflow_port *port);
/*
 * Does the port release packets at their meta->tx_time_ns itself
 * (afpacket or dpdk with txtime=1)? Otherwise the runtime's timing wheel
 * holds timed packets until their time (docs/txtime.md).
 */
bool dpflow_port_tx_paced(const struct dpflow_port *port);

/* Backend name ("pcap", "ring"). */
const char *dpflow_port_kind(const struct dpflow_port *port);
/* Port id stamped into meta->port (order of opening, from 0). */
uint16_t dpflow_port_id(const struct dpflow_port *port);
/* Receive and transmit queues (0: the port never receives/sends). */
uint16_t dpflow_port_rx_queues(const struct dpflow_port *port);
uint16_t dpflow_port_tx_queues(const struct dpflow_port *port);

/*
 * The receive link type as libpcap reports it (pcap_datalink): 1 Ethernet,
 * 113 SLL, 276 SLL2, 12 (or 14) raw IP (a file's LINKTYPE_RAW 101 reads
 * as 12 on Linux), 228/229 raw IPv4/IPv6, 0 BSD loopback, 108 OpenBSD
 * loopback; frames of the other link types are presented as Ethernet.
 * -1 for non-pcap ports and transmit-only pcap ports.
 */
int dpflow_port_link_type(const struct dpflow_port *port);

/*
 * The rings behind a ring port (NULL for other kinds). With `loop` both
 * calls return the same ring: what is transmitted is received.
 */
struct dpflow_ring *dpflow_port_ring_rx(struct dpflow_port *port);
struct dpflow_ring *dpflow_port_ring_tx(struct dpflow_port *port);

#ifdef __cplusplus
}
#endif

#endif /* DPFLOW_PORT_H */
