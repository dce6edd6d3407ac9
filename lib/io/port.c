/*
 * Ports, the generic layer: parses the URI, validates every public call's
 * arguments, assigns port ids and dispatches to the backend's ops table
 * (port_internal.h). Backends are found by kind in one table below.
 * dpflow_port_open_check() goes the same way to the backend's check op
 * and returns a placeholder port: no backend knowledge lives here.
 *
 * Open and close run on control threads (ids are handed out under a lock);
 * the data-path calls add only argument checks to the backend's work.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/port.h"

#include "io/port_internal.h"

static const struct dpflow_port_ops *const backends[] = {
    &dpflow_port_pcap_ops,  &dpflow_port_ring_ops, &dpflow_port_afpacket_ops,
    &dpflow_port_afxdp_ops, &dpflow_port_gen_ops,  &dpflow_port_null_ops,
#ifdef DPFLOW_HAVE_DPDK
    &dpflow_port_dpdk_ops,
#endif
};

/* Port ids: the lowest free one, so ids follow the order of opening. */
static pthread_mutex_t id_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t id_used[DPFLOW_PORT_MAX / 64];
DPFLOW_STATIC_ASSERT(DPFLOW_PORT_MAX % 64 == 0 && DPFLOW_PORT_MAX <= 65536,
		     "port ids fill whole bitmap words and a uint16_t");

static int id_take(void)
{
	int id = -1;

	pthread_mutex_lock(&id_lock);
	for (unsigned w = 0; w < DPFLOW_ARRAY_SIZE(id_used) && id < 0; w++) {
		if (id_used[w] == UINT64_MAX)
			continue;
		unsigned b = (unsigned)__builtin_ctzll(~id_used[w]);
		id_used[w] |= UINT64_C(1) << b;
		id = (int)(w * 64 + b);
	}
	pthread_mutex_unlock(&id_lock);
	return id;
}

static void id_put(uint16_t id)
{
	pthread_mutex_lock(&id_lock);
	id_used[id / 64] &= ~(UINT64_C(1) << (id % 64));
	pthread_mutex_unlock(&id_lock);
}

int port_arg_unknown(const struct port_args *args, const struct port_arg *a,
		     struct dpflow_error *err)
{
	if (a->val)
		return dpflow_error_set(err, EINVAL, "key",
					"unknown key '%s' (value '%s') in '%s'",
					a->key, a->val, args->uri);
	return dpflow_error_set(err, EINVAL, "key", "unknown key '%s' in '%s'",
				a->key, args->uri);
}

int port_arg_need_value(const struct port_args *args, const struct port_arg *a,
			const char *field, struct dpflow_error *err)
{
	if (a->val && a->val[0])
		return 0;
	return dpflow_error_set(err, EINVAL, field,
				"missing value: '%s' needs '%s=VALUE' in '%s'",
				a->key, a->key, args->uri);
}

int port_arg_u64(const struct port_args *args, const struct port_arg *a,
		 const char *field, uint64_t lo, uint64_t hi, uint64_t *out,
		 struct dpflow_error *err)
{
	char *end;
	unsigned long long v;

	if (port_arg_need_value(args, a, field, err))
		return -EINVAL;
	errno = 0;
	v = strtoull(a->val, &end, 0);
	if (errno || *end || a->val[0] == '-' || v < lo || v > hi)
		return dpflow_error_set(
		    err, EINVAL, field, "%s: %s=%s: a number from %llu to %llu",
		    args->uri, a->key, a->val, (unsigned long long)lo,
		    (unsigned long long)hi);
	*out = v;
	return 0;
}

int port_arg_once(const struct port_args *args, const struct port_arg *a,
		  const char *field, bool *seen, struct dpflow_error *err)
{
	if (!*seen) {
		*seen = true;
		return 0;
	}
	return dpflow_error_set(err, EINVAL, field,
				"'%s' given twice (again as '%s') in '%s'",
				field, a->val ? a->val : a->key, args->uri);
}

/*
 * Split @buf ("kind:tok,tok,...", modified in place) into the kind and its
 * arguments. No ':' means a kind with no arguments.
 */
static int parse_uri(char *buf, const char **kind, struct port_args *args,
		     struct dpflow_error *err)
{
	char *rest = strchr(buf, ':');

	*kind = buf;
	args->n = 0;
	if (rest)
		*rest++ = '\0';
	if (!buf[0])
		return dpflow_error_set(err, EINVAL, "kind",
					"missing port kind in '%s' (want "
					"'kind:args', e.g. 'pcap:in.pcap')",
					args->uri);
	if (!rest || !rest[0])
		return 0;
	for (;;) {
		char *comma = strchr(rest, ',');
		if (comma)
			*comma = '\0';
		if (!rest[0])
			return dpflow_error_set(err, EINVAL, "uri",
						"empty argument in '%s'",
						args->uri);
		if (args->n == PORT_ARGS_MAX)
			return dpflow_error_set(err, E2BIG, "uri",
						"more than %d arguments in "
						"'%s'",
						PORT_ARGS_MAX, args->uri);
		struct port_arg *a = &args->a[args->n++];
		char *eq = strchr(rest, '=');
		a->key = rest;
		a->val = NULL;
		if (eq) {
			*eq = '\0';
			a->val = eq + 1;
		}
		if (!comma)
			return 0;
		rest = comma + 1;
	}
}

/*
 * Parse @uri into @args (its strings live in *@buf, which the caller frees,
 * on error too) and find its backend. Returns the backend's index in
 * backends[], or a negative errno with @err filled.
 */
static int find_backend(const char *uri, char **buf, struct port_args *args,
			struct dpflow_error *err)
{
	char known[128] = "";
	const char *kind;
	int rc;

	*buf = NULL;
	if (!uri)
		return dpflow_error_set(err, EINVAL, "uri", "no URI given");
	*buf = strdup(uri);
	if (!*buf)
		return dpflow_error_set(err, ENOMEM, "uri",
					"no memory for '%s'", uri);
	args->uri = uri;
	rc = parse_uri(*buf, &kind, args, err);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < DPFLOW_ARRAY_SIZE(backends); i++)
		if (!strcmp(backends[i]->kind, kind))
			return (int)i;
#ifndef DPFLOW_HAVE_DPDK
	if (!strcmp(kind, "dpdk"))
		return dpflow_error_set(err, ENOTSUP, "kind",
					"'%s': this dpflow was built without "
					"DPDK (libdpdk-dev)",
					uri);
#endif
	/* every backend built in, from the table */
	for (size_t i = 0, n = 0;
	     i < DPFLOW_ARRAY_SIZE(backends) && n < sizeof(known); i++)
		n += (size_t)snprintf(known + n, sizeof(known) - n, "%s%s",
				      i ? ", " : "", backends[i]->kind);
	return dpflow_error_set(err, EINVAL, "kind",
				"unknown port kind '%s' in '%s' (known: %s)",
				kind, uri, known);
}

/*
 * A port of @ops (@size bytes, zeroed but for the common fields: a copy
 * of @uri as its name, an id, @pool, n_rxq = n_txq = 1, link_type = -1).
 * NULL with @err filled.
 */
static struct dpflow_port *port_new(const struct dpflow_port_ops *ops,
				    size_t size, struct dpflow_pool *pool,
				    const char *uri, struct dpflow_error *err)
{
	struct dpflow_port *port;
	int id;

	/* Backends may align members to a cache line: honour it. */
	size =
	    (size + DPFLOW_CACHE_LINE - 1) & ~(size_t)(DPFLOW_CACHE_LINE - 1);
	port = aligned_alloc(DPFLOW_CACHE_LINE, size);
	if (port)
		memset(port, 0, size);
	if (!port || !(port->name = strdup(uri))) {
		dpflow_error_set(err, ENOMEM, "uri", "no memory for '%s'", uri);
		goto err_port;
	}
	id = id_take();
	if (id < 0) {
		dpflow_error_set(err, ENOSPC, "uri",
				 "more than %d ports open, cannot open '%s'",
				 DPFLOW_PORT_MAX, uri);
		goto err_port;
	}
	port->ops = ops;
	port->pool = pool;
	port->id = (uint16_t)id;
	port->n_rxq = 1;
	port->n_txq = 1;
	port->link_type = -1;
	return port;

err_port:
	if (port)
		free(port->name);
	free(port);
	return NULL;
}

/* Free what port_new() allocated. */
static void port_free(struct dpflow_port *port)
{
	id_put(port->id);
	free(port->name);
	free(port);
}

struct dpflow_port *dpflow_port_open(struct dpflow_pool *pool, const char *uri,
				     struct dpflow_error *err)
{
	struct dpflow_port *port = NULL;
	struct port_args args;
	char *buf;
	int b;

	dpflow_error_clear(err);
	b = find_backend(uri, &buf, &args, err);
	if (b >= 0)
		port = port_new(backends[b], backends[b]->size, pool, uri, err);
	if (port && port->ops->open(port, &args, err) < 0) {
		port_free(port);
		port = NULL;
	}
	free(buf);
	return port;
}

void dpflow_port_close(struct dpflow_port *port)
{
	if (!port)
		return;
	port->ops->close(port);
	port_free(port);
}

/* ---- checking without opening (dpflow_port_open_check) ---------------- */

/* A placeholder: the kind and URI of a port that was only checked, and
 * the files it would read and write (resolved), for the context's check
 * that no two ports write one file. */
struct port_placeholder {
	struct dpflow_port up;
	char *path[2]; /* rx, tx; NULL: none */
};

static void placeholder_stats(const struct dpflow_port *port,
			      struct dpflow_port_stats *stats)
{
	(void)port;
	(void)stats;
}

static const char *placeholder_path(const struct dpflow_port *port, bool tx)
{
	return ((const struct port_placeholder *)port)->path[tx];
}

static void placeholder_close(struct dpflow_port *port)
{
	struct port_placeholder *ph = (struct port_placeholder *)port;

	free(ph->path[0]);
	free(ph->path[1]);
}

/* A placeholder's ops, one a backend: its kind, no data path. */
static struct dpflow_port_ops placeholder_ops[DPFLOW_ARRAY_SIZE(backends)];
static pthread_once_t placeholder_once = PTHREAD_ONCE_INIT;

static void placeholder_init(void)
{
	for (size_t i = 0; i < DPFLOW_ARRAY_SIZE(backends); i++) {
		placeholder_ops[i].kind = backends[i]->kind;
		placeholder_ops[i].size = sizeof(struct port_placeholder);
		placeholder_ops[i].stats = placeholder_stats;
		placeholder_ops[i].path = placeholder_path;
		placeholder_ops[i].close = placeholder_close;
	}
}

struct dpflow_port *dpflow_port_open_check(struct dpflow_pool *pool,
					   const char *uri,
					   struct dpflow_error *err)
{
	struct port_placeholder *ph = NULL;
	struct dpflow_port *port = NULL;
	char *paths[2] = {NULL, NULL};
	struct port_args args;
	char *buf;
	int b;

	dpflow_error_clear(err);
	b = find_backend(uri, &buf, &args, err);
	if (b >= 0 && !backends[b]->check)
		b = dpflow_error_set(err, ENOTSUP, "kind",
				     "'%s': a %s port cannot be checked "
				     "without opening it",
				     uri, backends[b]->kind);
	if (b >= 0 && backends[b]->check(&args, pool, paths, err) < 0)
		b = -1;
	free(buf);
	if (b >= 0) {
		pthread_once(&placeholder_once, placeholder_init);
		port =
		    port_new(&placeholder_ops[b], sizeof(*ph), pool, uri, err);
	}
	if (!port) {
		free(paths[0]);
		free(paths[1]);
		return NULL;
	}
	/* no data path: no queues */
	port->n_rxq = 0;
	port->n_txq = 0;
	ph = (struct port_placeholder *)port;
	ph->path[0] = paths[0];
	ph->path[1] = paths[1];
	return port;
}

uint16_t dpflow_port_rx_burst(struct dpflow_port *port, uint16_t queue,
			      uint32_t *idx, uint16_t n)
{
	if (DPFLOW_UNLIKELY(!port || !idx || !n || queue >= port->n_rxq ||
			    !port->pool || !port->ops->rx_burst))
		return 0;
	if (DPFLOW_UNLIKELY(n > DPFLOW_BURST_MAX))
		n = DPFLOW_BURST_MAX;
	return port->ops->rx_burst(port, queue, idx, n);
}

uint16_t dpflow_port_tx_burst(struct dpflow_port *port, uint16_t queue,
			      struct dpflow_pool *pool, const uint32_t *idx,
			      uint16_t n)
{
	if (DPFLOW_UNLIKELY(!port || !pool || !idx || !n ||
			    queue >= port->n_txq || !port->ops->tx_burst))
		return 0;
	if (DPFLOW_UNLIKELY(n > DPFLOW_BURST_MAX))
		n = DPFLOW_BURST_MAX;
	return port->ops->tx_burst(port, queue, pool, idx, n);
}

bool dpflow_port_rx_done(const struct dpflow_port *port)
{
	if (!port)
		return true;
	return port->ops->rx_done && port->ops->rx_done(port);
}

int dpflow_port_stats_get(const struct dpflow_port *port,
			  struct dpflow_port_stats *stats)
{
	if (!port || !stats)
		return -EINVAL;
	memset(stats, 0, sizeof(*stats));
	port->ops->stats(port, stats);
	return 0;
}

const char *dpflow_port_name(const struct dpflow_port *port)
{
	return port ? port->name : NULL;
}

bool dpflow_port_tx_paced(const struct dpflow_port *port)
{
	return port && port->tx_paced;
}

const char *dpflow_port_kind(const struct dpflow_port *port)
{
	return port ? port->ops->kind : NULL;
}

uint16_t dpflow_port_id(const struct dpflow_port *port)
{
	return port ? port->id : UINT16_MAX;
}

uint16_t dpflow_port_rx_queues(const struct dpflow_port *port)
{
	return port && port->pool && port->ops->rx_burst ? port->n_rxq : 0;
}

uint16_t dpflow_port_tx_queues(const struct dpflow_port *port)
{
	return port && port->ops->tx_burst ? port->n_txq : 0;
}

int dpflow_port_link_type(const struct dpflow_port *port)
{
	return port ? port->link_type : -1;
}

struct dpflow_ring *dpflow_port_ring_rx(struct dpflow_port *port)
{
	if (!port || !port->ops->ring)
		return NULL;
	return port->ops->ring(port, false);
}

struct dpflow_ring *dpflow_port_ring_tx(struct dpflow_port *port)
{
	if (!port || !port->ops->ring)
		return NULL;
	return port->ops->ring(port, true);
}

int dpflow_port_sync(struct dpflow_port *port, struct dpflow_error *err)
{
	dpflow_error_clear(err);
	if (!port || !port->ops->finish)
		return 0;
	return port->ops->finish(port, false, err);
}

int dpflow_port_finish(struct dpflow_port *port, struct dpflow_error *err)
{
	dpflow_error_clear(err);
	if (!port || !port->ops->finish)
		return 0;
	return port->ops->finish(port, true, err);
}

void dpflow_port_discard(struct dpflow_port *port)
{
	if (port && port->ops->discard)
		port->ops->discard(port);
}

const char *dpflow_port_path(const struct dpflow_port *port, bool tx)
{
	if (!port || !port->ops->path)
		return NULL;
	return port->ops->path(port, tx);
}
