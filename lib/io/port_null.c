/*
 * The null port backend: a sink, as DPDK's net_null. Transmitted packets
 * are counted and freed; nothing is ever received.
 *
 *   null:[NAME]
 *
 * For benchmarks (what a pipeline costs without a wire) and for outputs
 * nobody reads. Threads: tx_burst from one thread at a time, as every
 * port.
 */
#include <errno.h>
#include <string.h>

#include "dpflow/port.h"

#include "io/port_internal.h"

struct port_null {
	struct dpflow_port up;
	uint64_t tx_pkts DPFLOW_CACHE_ALIGNED;
	uint64_t tx_bytes;
};

static uint16_t null_tx_burst(struct dpflow_port *port, uint16_t queue,
			      struct dpflow_pool *pool, const uint32_t *idx,
			      uint16_t n)
{
	struct port_null *p = (struct port_null *)port;
	uint64_t bytes = 0;

	(void)queue;
	for (uint16_t i = 0; i < n; i++)
		bytes += dpflow_pool_meta(pool, idx[i])->data_len;
	dpflow_pool_free_bulk(pool, idx, n);
	port_ctr_add(&p->tx_pkts, n);
	port_ctr_add(&p->tx_bytes, bytes);
	return n;
}

static bool null_rx_done(const struct dpflow_port *port)
{
	(void)port;
	return true;
}

static void null_stats(const struct dpflow_port *port,
		       struct dpflow_port_stats *s)
{
	const struct port_null *p = (const struct port_null *)port;

	s->tx_pkts = port_ctr_read(&p->tx_pkts);
	s->tx_bytes = port_ctr_read(&p->tx_bytes);
}

/* The keys of @args, for open and check alike: at most a bare NAME. */
static int null_args(const struct port_args *args, struct dpflow_error *err)
{
	for (unsigned i = 0; i < args->n; i++)
		if (i || args->a[i].val)
			return port_arg_unknown(args, &args->a[i], err);
	return 0;
}

static int null_open(struct dpflow_port *port, const struct port_args *args,
		     struct dpflow_error *err)
{
	int rc = null_args(args, err);

	if (rc)
		return rc;
	port->n_rxq = 0;
	port->n_txq = 1;
	return 0;
}

/* Check: the keys (open acquires nothing more). */
static int null_check(const struct port_args *args, struct dpflow_pool *pool,
		      char *paths[2], struct dpflow_error *err)
{
	(void)pool;
	(void)paths;
	return null_args(args, err);
}

static void null_close(struct dpflow_port *port)
{
	(void)port;
}

const struct dpflow_port_ops dpflow_port_null_ops = {
    .kind = "null",
    .size = sizeof(struct port_null),
    .open = null_open,
    .check = null_check,
    .tx_burst = null_tx_burst,
    .rx_done = null_rx_done,
    .stats = null_stats,
    .close = null_close,
};
