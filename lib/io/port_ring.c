/*
 * The ring port backend: a port whose wire is a pair of in-process rings of
 * packet indices, for tests and for gluing stages together.
 *
 *   ring:NAME[,size=N][,loop]
 *
 * The port owns a receive ring and a transmit ring (single producer, single
 * consumer, N entries each, a power of two, default 1024). Whoever feeds the
 * port enqueues indices of packets of the port's pool into
 * dpflow_port_ring_rx() (those packets pass to the port); rx_burst dequeues
 * them and stamps port, queue, and rx_ts_ns when it is still 0. tx_burst
 * enqueues into dpflow_port_ring_tx() as many as fit, and whoever dequeues
 * them owns them. With `loop` there is one ring: transmitted packets are
 * received again (they must then belong to the port's pool; others are
 * refused and counted in tx_errors).
 *
 * The input never ends: rx_done is always false. Packets left in the rings
 * at close are freed to the port's pool (receive ring, and the transmit ring
 * when it is the loop) or dropped without a free (transmit ring: the pool
 * they came from is not known).
 *
 * Threads: one producer and one consumer per ring, as the rings are SPSC.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/clock.h"
#include "dpflow/port.h"
#include "dpflow/ring.h"

#include "io/port_internal.h"

#define RING_SIZE_DEFAULT 1024
#define RING_SIZE_MAX	  (1u << 30)

/* Stamp this many packets ahead of the one being written. */
#define PREFETCH_AHEAD 4

struct port_ring {
	struct dpflow_port up;
	struct dpflow_ring *rx;
	struct dpflow_ring *tx; /* == rx with loop */
	bool loop;
	uint64_t rx_pkts, rx_bytes;
	/* transmit side: the transmitting thread */
	uint64_t tx_pkts DPFLOW_CACHE_ALIGNED;
	uint64_t tx_bytes, tx_errors;
};

static inline struct port_ring *ring_port(struct dpflow_port *port)
{
	return (struct port_ring *)port;
}

static uint16_t ring_rx_burst(struct dpflow_port *port, uint16_t queue,
			      uint32_t *idx, uint16_t n)
{
	struct port_ring *pr = ring_port(port);
	struct dpflow_pool *pool = port->pool;
	uint64_t now = 0, bytes = 0;
	uint16_t k, i;

	k = (uint16_t)dpflow_ring_dequeue_burst(pr->rx, idx, n);
	if (!k)
		return 0;
	for (i = 0; i < k; i++) {
		struct dpflow_pkt_meta *m;

		if (i + PREFETCH_AHEAD < k)
			DPFLOW_PREFETCH(
			    dpflow_pool_meta(pool, idx[i + PREFETCH_AHEAD]));
		m = dpflow_pool_meta(pool, idx[i]);
		m->port = port->id;
		m->queue = queue;
		if (!m->rx_ts_ns) {
			if (!now)
				now = dpflow_clock_realtime_ns();
			m->rx_ts_ns = now;
		}
		bytes += m->data_len;
	}
	port_ctr_add(&pr->rx_pkts, k);
	port_ctr_add(&pr->rx_bytes, bytes);
	return k;
}

static uint16_t ring_tx_burst(struct dpflow_port *port, uint16_t queue,
			      struct dpflow_pool *pool, const uint32_t *idx,
			      uint16_t n)
{
	struct port_ring *pr = ring_port(port);
	uint64_t bytes = 0;
	uint16_t k;

	(void)queue;
	if (DPFLOW_UNLIKELY(pr->loop && pool != port->pool)) {
		port_ctr_add(&pr->tx_errors, n);
		return 0;
	}
	/* Read the lengths first: once enqueued the packets are not ours. */
	for (uint16_t i = 0; i < n; i++)
		bytes += dpflow_pool_meta(pool, idx[i])->data_len;
	k = (uint16_t)dpflow_ring_enqueue_burst(pr->tx, idx, n);
	if (k < n)
		for (uint16_t i = k; i < n; i++)
			bytes -= dpflow_pool_meta(pool, idx[i])->data_len;
	port_ctr_add(&pr->tx_pkts, k);
	port_ctr_add(&pr->tx_bytes, bytes);
	return k;
}

static void ring_stats(const struct dpflow_port *port,
		       struct dpflow_port_stats *s)
{
	const struct port_ring *pr = (const struct port_ring *)port;

	s->rx_pkts = port_ctr_read(&pr->rx_pkts);
	s->rx_bytes = port_ctr_read(&pr->rx_bytes);
	s->tx_pkts = port_ctr_read(&pr->tx_pkts);
	s->tx_bytes = port_ctr_read(&pr->tx_bytes);
	s->tx_errors = port_ctr_read(&pr->tx_errors);
}

static struct dpflow_ring *ring_ring(struct dpflow_port *port, bool tx)
{
	struct port_ring *pr = ring_port(port);

	return tx ? pr->tx : pr->rx;
}

static int parse_size(const struct port_args *args, const struct port_arg *a,
		      uint32_t *size, struct dpflow_error *err)
{
	unsigned long v;
	char *end;
	int rc = port_arg_need_value(args, a, "size", err);

	if (rc)
		return rc;
	errno = 0;
	v = strtoul(a->val, &end, 10);
	if (errno || *end || a->val[0] == '-' || v < 2 || v > RING_SIZE_MAX ||
	    (v & (v - 1)))
		return dpflow_error_set(err, EINVAL, "size",
					"bad size '%s' in '%s': want a power "
					"of two from 2 to %u",
					a->val, args->uri, RING_SIZE_MAX);
	*size = (uint32_t)v;
	return 0;
}

/*
 * The keys of @args, for open and check alike: the ring's *@name, *@size
 * and *@loop.
 */
static int ring_args(const struct port_args *args, const char **name,
		     uint32_t *size, bool *loop, struct dpflow_error *err)
{
	bool seen_size = false;
	int rc;

	*size = RING_SIZE_DEFAULT;
	*loop = false;
	if (!args->n || args->a[0].val)
		return dpflow_error_set(err, EINVAL, "name",
					"'%s': a ring port needs a name first "
					"(ring:NAME[,size=N][,loop])",
					args->uri);
	*name = args->a[0].key;
	for (unsigned i = 1; i < args->n; i++) {
		const struct port_arg *a = &args->a[i];
		if (!strcmp(a->key, "size")) {
			if ((rc = parse_size(args, a, size, err)) ||
			    (rc = port_arg_once(args, a, "size", &seen_size,
						err)))
				return rc;
		} else if (!strcmp(a->key, "loop")) {
			if (a->val)
				return dpflow_error_set(
				    err, EINVAL, "loop",
				    "'loop' takes no value (got '%s') in "
				    "'%s'",
				    a->val, args->uri);
			if ((rc = port_arg_once(args, a, "loop", loop, err)))
				return rc;
		} else {
			return port_arg_unknown(args, a, err);
		}
	}
	return 0;
}

static int ring_open(struct dpflow_port *port, const struct port_args *args,
		     struct dpflow_error *err)
{
	struct port_ring *pr = ring_port(port);
	char rname[DPFLOW_RING_NAME_MAX];
	uint32_t size;
	const char *name;
	int rc = ring_args(args, &name, &size, &pr->loop, err);

	if (rc)
		return rc;
	snprintf(rname, sizeof(rname), "%s.rx", name);
	pr->rx = dpflow_ring_create(rname, size, DPFLOW_RING_F_SPSC, err);
	if (!pr->rx)
		return -(err && err->code ? err->code : ENOMEM);
	if (pr->loop) {
		pr->tx = pr->rx;
		return 0;
	}
	snprintf(rname, sizeof(rname), "%s.tx", name);
	pr->tx = dpflow_ring_create(rname, size, DPFLOW_RING_F_SPSC, err);
	if (!pr->tx) {
		rc = -(err && err->code ? err->code : ENOMEM);
		goto err_rx;
	}
	return 0;

err_rx:
	dpflow_ring_destroy(pr->rx);
	pr->rx = NULL;
	return rc;
}

/* Check: the keys; the rings (process memory only) are not made. */
static int ring_check(const struct port_args *args, struct dpflow_pool *pool,
		      char *paths[2], struct dpflow_error *err)
{
	const char *name;
	uint32_t size;
	bool loop;

	(void)pool;
	(void)paths;
	return ring_args(args, &name, &size, &loop, err);
}

/* Free what is left in @r to @pool. */
static void drain(struct dpflow_ring *r, struct dpflow_pool *pool)
{
	uint32_t idx[DPFLOW_BURST_MAX];
	unsigned k;

	while ((k = dpflow_ring_dequeue_burst(r, idx, DPFLOW_BURST_MAX)))
		dpflow_pool_free_bulk(pool, idx, k);
}

static void ring_close(struct dpflow_port *port)
{
	struct port_ring *pr = ring_port(port);

	if (port->pool)
		drain(pr->rx, port->pool);
	if (pr->tx != pr->rx)
		dpflow_ring_destroy(pr->tx);
	dpflow_ring_destroy(pr->rx);
}

const struct dpflow_port_ops dpflow_port_ring_ops = {
    .kind = "ring",
    .size = sizeof(struct port_ring),
    .open = ring_open,
    .check = ring_check,
    .rx_burst = ring_rx_burst,
    .tx_burst = ring_tx_burst,
    .rx_done = NULL,
    .stats = ring_stats,
    .ring = ring_ring,
    .close = ring_close,
};
