/*
 * The port provider interface: what a port backend implements.
 *
 * The generic layer (port.c) parses the URI "kind:key=val,key=val" into a
 * list of arguments, finds the backend by kind, allocates the backend's port
 * structure (ops->size bytes, zeroed, with struct dpflow_port first), fills
 * the common fields and calls ops->open. Every public call validates its
 * arguments (NULL port, queue out of range, n clamped to DPFLOW_BURST_MAX)
 * before it dispatches, so backends see only well-formed calls.
 *
 * Threads: rx_burst on a queue is called by one thread at a time, tx_burst
 * on a queue likewise (possibly another thread); stats may be called from
 * any thread concurrently with both, so backends update their counters with
 * the single-writer helpers below. open and close run on a control thread
 * with no data-path call in flight.
 *
 * The generic code includes this header only; it never includes a backend's
 * header (a backend has none: it exports its ops table and nothing else).
 */
#ifndef DPFLOW_IO_PORT_INTERNAL_H
#define DPFLOW_IO_PORT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "dpflow/error.h"
#include "dpflow/pool.h"
#include "dpflow/port.h"
#include "dpflow/ring.h"

/* Most key=value arguments in one URI. */
#define PORT_ARGS_MAX 16

/*
 * One URI argument. "key=val" gives both; a bare token ("loop", "in.pcap")
 * gives key = the token and val = NULL. "key=" gives val = "" (backends
 * report it as a missing value). Strings live as long as the open call.
 */
struct port_arg {
	const char *key;
	const char *val;
};

struct port_args {
	const char *uri; /* the whole URI, for messages */
	unsigned n;
	struct port_arg a[PORT_ARGS_MAX];
};

/*
 * The common part of every port; a backend's port structure starts with
 * it (struct port_pcap { struct dpflow_port up; ... }). The backend reads
 * these fields and sets n_rxq, n_txq and link_type in open; the generic
 * layer owns the rest.
 */
struct dpflow_port {
	const struct dpflow_port_ops *ops;
	struct dpflow_pool *pool; /* receive pool; NULL for transmit-only */
	uint16_t id;		  /* stamped into meta->port */
	uint16_t n_rxq;		  /* receive queues (0: none) */
	uint16_t n_txq;		  /* transmit queues (0: none) */
	int link_type;		  /* pcap DLT of received frames, or -1 */
	bool tx_paced;		  /* the backend honours meta->tx_time_ns
				     itself (SO_TXTIME, a NIC's clock) */
	char *name;		  /* the URI, copied */
};

struct dpflow_port_ops {
	const char *kind; /* URI scheme: "pcap", "ring" */
	size_t size;	  /* bytes of the backend's port structure */

	/*
	 * Construct @port (zeroed, common fields set, n_rxq = n_txq = 1,
	 * link_type = -1) from @args. Every key must be checked: an unknown
	 * key, a missing value or a bad one is an error. Returns 0, or a
	 * negative errno with @err naming the key at fault and its value; on
	 * error the backend has released whatever it acquired (close is not
	 * called).
	 */
	int (*open)(struct dpflow_port *port, const struct port_args *args,
		    struct dpflow_error *err);

	/*
	 * Check @args as open would, opening nothing (dpflow_port_open_check,
	 * `dpflow validate`): every key with open's own parsing code and
	 * messages, then what can be checked without side effects (a file
	 * readable, a path writable, an interface present). Never creates,
	 * truncates or opens for writing a file, a socket or a device, and
	 * holds nothing when it returns. @pool is what open would get (may be
	 * NULL). On success @paths[0] and @paths[1] get the files the port
	 * would read and write, resolved as the path op gives them (malloc'ed,
	 * the caller frees them; left NULL when there are none). Returns 0, or
	 * a negative errno with @err as open fills it; @paths are then left
	 * NULL. NULL op: the backend cannot be checked, and the generic layer
	 * refuses the URI. Control thread.
	 */
	int (*check)(const struct port_args *args, struct dpflow_pool *pool,
		     char *paths[2], struct dpflow_error *err);

	/*
	 * Receive up to @n (1..DPFLOW_BURST_MAX) packets from @queue
	 * (< n_rxq) into @idx, allocated from port->pool (never NULL here),
	 * with data_off, data_len, port, queue and rx_ts_ns set. Ownership of
	 * the returned packets passes to the caller. Returns 0..@n; never
	 * blocks. May be NULL when the backend never receives.
	 */
	uint16_t (*rx_burst)(struct dpflow_port *port, uint16_t queue,
			     uint32_t *idx, uint16_t n);

	/*
	 * Transmit up to @n (1..DPFLOW_BURST_MAX) packets of @pool on @queue
	 * (< n_txq). The backend takes ownership of the first k packets it
	 * returns as accepted (it frees them to @pool, or passes them on);
	 * the caller keeps @idx[k..n). Never blocks. May be NULL when the
	 * backend never transmits.
	 */
	uint16_t (*tx_burst)(struct dpflow_port *port, uint16_t queue,
			     struct dpflow_pool *pool, const uint32_t *idx,
			     uint16_t n);

	/* True once the input is finite and exhausted. NULL: never. */
	bool (*rx_done)(const struct dpflow_port *port);

	/*
	 * Fill @stats (zeroed by the caller). Any thread, concurrently with
	 * the data path: counters are read with relaxed atomic loads.
	 */
	void (*stats)(const struct dpflow_port *port,
		      struct dpflow_port_stats *stats);

	/*
	 * The rings of a ring port (@tx false: receive ring). NULL: the
	 * backend has none.
	 */
	struct dpflow_ring *(*ring)(struct dpflow_port *port, bool tx);

	/*
	 * Release everything open acquired; the generic layer then frees
	 * @port. Packets still held by the backend are freed to their pool.
	 * Output not committed by finish is removed, except where the owner
	 * never called finish nor discard: then close commits it (errors
	 * logged).
	 */
	void (*close)(struct dpflow_port *port);

	/*
	 * The file the port reads (@tx false) or writes, resolved (symlinks
	 * and ./ followed: the realpath of the file, or of its directory and
	 * the base name when it does not exist yet), for the context's check
	 * that no two ports write, or write and read, one file. NULL: no such
	 * file, or one exempt from the check (a device, a FIFO). The op may
	 * be NULL: the backend has no files. Control thread.
	 */
	const char *(*path)(const struct dpflow_port *port, bool tx);

	/*
	 * The end of a run, with no data-path call in flight: flush, sync
	 * and close pending output and report the first error either side
	 * met (input unreadable or cut short, a failed write), without
	 * logging it. With @commit, a port that met no error and was not
	 * discarded then commits its output (a pcap port renames its
	 * temporary file onto the target); that happens once, and its
	 * failure is reported too. Returns 0 or a negative errno with @err
	 * naming the file and, for input, the packet (from 1). NULL op: the
	 * backend cannot fail so and has nothing to commit.
	 */
	int (*finish)(struct dpflow_port *port, bool commit,
		      struct dpflow_error *err);

	/*
	 * From now on close leaves nothing behind: output written so far is
	 * dropped and a file the port would replace stays as it was. NULL op:
	 * the backend leaves nothing to discard. Control thread.
	 */
	void (*discard)(struct dpflow_port *port);
};

/*
 * Argument helpers for backends' open (defined in port.c). Each returns 0,
 * or -EINVAL with @err filled; @field must be a static string.
 */
/* @a is a key the backend does not know: the error names it (field "key"). */
int port_arg_unknown(const struct port_args *args, const struct port_arg *a,
		     struct dpflow_error *err);
/* @a ("key=val") must carry a non-empty value. */
int port_arg_need_value(const struct port_args *args, const struct port_arg *a,
			const char *field, struct dpflow_error *err);
/* @a's value, a number (decimal, 0x hex or 0 octal) in [@lo, @hi]. */
int port_arg_u64(const struct port_args *args, const struct port_arg *a,
		 const char *field, uint64_t lo, uint64_t hi, uint64_t *out,
		 struct dpflow_error *err);
/* @a must be the first of @field: *@seen is set, a second one fails. */
int port_arg_once(const struct port_args *args, const struct port_arg *a,
		  const char *field, bool *seen, struct dpflow_error *err);

extern const struct dpflow_port_ops dpflow_port_pcap_ops;
extern const struct dpflow_port_ops dpflow_port_ring_ops;
extern const struct dpflow_port_ops dpflow_port_afpacket_ops;
extern const struct dpflow_port_ops dpflow_port_afxdp_ops;
extern const struct dpflow_port_ops dpflow_port_gen_ops;
extern const struct dpflow_port_ops dpflow_port_null_ops;
#ifdef DPFLOW_HAVE_DPDK
extern const struct dpflow_port_ops dpflow_port_dpdk_ops;
#endif

/*
 * Counters written by one thread and read by any: a relaxed load and store
 * (no read-modify-write, which one writer does not need).
 */
static inline void port_ctr_add(uint64_t *c, uint64_t v)
{
	__atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + v,
			 __ATOMIC_RELAXED);
}

static inline uint64_t port_ctr_read(const uint64_t *c)
{
	return __atomic_load_n(c, __ATOMIC_RELAXED);
}

/* A queue's counters: the receiving thread's, then (a line apart) the
 * transmitting thread's. */
struct port_queue_ctrs {
	uint64_t rx_pkts, rx_bytes, rx_nobuf, rx_oversize;
	uint64_t tx_pkts DPFLOW_CACHE_ALIGNED;
	uint64_t tx_bytes, tx_errors;
};

/* Add queue counters @c to @s. */
static inline void port_queue_ctrs_sum(const struct port_queue_ctrs *c,
				       struct dpflow_port_stats *s)
{
	s->rx_pkts += port_ctr_read(&c->rx_pkts);
	s->rx_bytes += port_ctr_read(&c->rx_bytes);
	s->rx_nobuf += port_ctr_read(&c->rx_nobuf);
	s->rx_oversize += port_ctr_read(&c->rx_oversize);
	s->tx_pkts += port_ctr_read(&c->tx_pkts);
	s->tx_bytes += port_ctr_read(&c->tx_bytes);
	s->tx_errors += port_ctr_read(&c->tx_errors);
}

#endif /* DPFLOW_IO_PORT_INTERNAL_H */
