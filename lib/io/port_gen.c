/*
 * The gen port backend: an in-memory traffic source built from a `dpflow
 * gen` profile (gen.h), for benchmarks, blasting traffic out of another
 * port, and demos.
 *
 *   gen:PROFILE[,queues=N][,loop][,rate=PPS][,templates=N][,KEY=VALUE...]
 *
 * PROFILE is a profile name (default, all, imix, vxlan); KEY=VALUE are its
 * keys as `dpflow gen` takes them (count, flows, size, mix, ipv6, vlan,
 * tunnel, seed, ...). At open the port builds min(count, templates)
 * packets (templates default 65536) once; receiving copies them, in turn,
 * into slots of the port's pool, until `count` packets have been delivered
 * (then rx_done), or for ever with `loop`. With N queues, queue q delivers
 * templates q, q + N, q + 2N, ... (its share of the flows) and its share of
 * the count. `rate` paces the whole port (shared out over the queues) by
 * the TSC: a queue delivers no more than its share of PPS times the time
 * since its first receive. The receive time is the current time.
 *
 * The port never transmits. Threads: one per queue, as every port.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/clock.h"
#include "dpflow/gen.h"
#include "dpflow/port.h"

#include "io/port_internal.h"

#define GEN_QUEUES_MAX	      64
#define GEN_TEMPLATES_DEFAULT 65536u
#define GEN_TEMPLATES_MAX     (1u << 22)
#define GEN_FRAME_MAX	      9216u

struct gen_queue {
	uint64_t share;	  /* packets to deliver (UINT64_MAX: loop) */
	uint64_t sent;	  /* delivered */
	uint32_t next;	  /* next template (q, q + N, ...) */
	uint64_t t0;	  /* TSC of the first receive (rate) */
	double per_tick;  /* packets a TSC tick (rate), 0: as fast as asked */
	uint64_t rx_pkts; /* counters: the receiving thread */
	uint64_t rx_bytes, rx_nobuf, rx_oversize;
	bool done;
} __attribute__((aligned(64)));

struct port_gen {
	struct dpflow_port up;
	uint8_t *frames; /* n_tmpl x GEN_FRAME_MAX */
	uint16_t *lens;
	uint32_t n_tmpl;
	struct gen_queue *q;
};

static struct port_gen *gen_port(struct dpflow_port *port)
{
	return (struct port_gen *)port;
}

static uint16_t gen_rx_burst(struct dpflow_port *port, uint16_t queue,
			     uint32_t *idx, uint16_t n)
{
	struct port_gen *p = gen_port(port);
	struct gen_queue *q = &p->q[queue];
	struct dpflow_pool *pool = port->pool;
	uint64_t left = q->share - q->sent, bytes = 0, nobuf, now_ns;
	uint16_t want, k = 0;

	if (!left) {
		__atomic_store_n(&q->done, true, __ATOMIC_RELEASE);
		return 0;
	}
	want = left < n ? (uint16_t)left : n;
	if (q->per_tick > 0) {
		uint64_t now = dpflow_tsc(), allowed;

		if (!q->t0)
			q->t0 = now;
		allowed = (uint64_t)((double)(now - q->t0) * q->per_tick) + 1;
		if (allowed <= q->sent)
			return 0;
		if (allowed - q->sent < want)
			want = (uint16_t)(allowed - q->sent);
	}
	k = (uint16_t)dpflow_pool_alloc_burst(pool, idx, want);
	nobuf = want - k;
	now_ns = k ? dpflow_clock_realtime_ns() : 0;
	for (uint16_t i = 0; i < k; i++) {
		struct dpflow_pkt_meta *m = dpflow_pool_meta(pool, idx[i]);
		uint32_t t = q->next;
		uint16_t len = p->lens[t];

		memcpy(dpflow_pkt_data(pool, idx[i]),
		       p->frames + (size_t)t * GEN_FRAME_MAX, len);
		m->data_len = len;
		m->port = port->id;
		m->queue = queue;
		m->rx_ts_ns = now_ns;
		bytes += len;
		q->next += port->n_rxq;
		if (q->next >= p->n_tmpl)
			q->next = queue % p->n_tmpl;
	}
	q->sent += k;
	if (k) {
		port_ctr_add(&q->rx_pkts, k);
		port_ctr_add(&q->rx_bytes, bytes);
	}
	if (nobuf)
		port_ctr_add(&q->rx_nobuf, nobuf);
	return k;
}

static bool gen_rx_done(const struct dpflow_port *port)
{
	const struct port_gen *p = (const struct port_gen *)port;

	for (unsigned i = 0; i < port->n_rxq; i++)
		if (!__atomic_load_n(&p->q[i].done, __ATOMIC_ACQUIRE))
			return false;
	return true;
}

static void gen_stats(const struct dpflow_port *port,
		      struct dpflow_port_stats *s)
{
	const struct port_gen *p = (const struct port_gen *)port;

	for (unsigned i = 0; i < port->n_rxq; i++) {
		s->rx_pkts += port_ctr_read(&p->q[i].rx_pkts);
		s->rx_bytes += port_ctr_read(&p->q[i].rx_bytes);
		s->rx_nobuf += port_ctr_read(&p->q[i].rx_nobuf);
	}
}

static void gen_close(struct dpflow_port *port)
{
	struct port_gen *p = gen_port(port);

	free(p->frames);
	free(p->lens);
	free(p->q);
	p->frames = NULL;
	p->lens = NULL;
	p->q = NULL;
}

/* Build the templates from @prof. */
static int gen_build(struct port_gen *p, const struct dpflow_gen_profile *prof,
		     uint64_t templates, const struct port_args *args,
		     struct dpflow_error *err)
{
	struct dpflow_gen *g = dpflow_gen_create(prof, err);
	uint32_t n =
	    (uint32_t)(prof->count < templates ? prof->count : templates);

	if (!g)
		return -EINVAL;
	p->frames = malloc((size_t)n * GEN_FRAME_MAX);
	p->lens = calloc(n, sizeof(*p->lens));
	if (!p->frames || !p->lens) {
		dpflow_gen_destroy(g);
		return dpflow_error_set(err, ENOMEM, "templates",
					"%s: no memory for %u templates",
					args->uri, n);
	}
	for (uint32_t i = 0; i < n; i++) {
		uint32_t len =
		    dpflow_gen_next(g, p->frames + (size_t)i * GEN_FRAME_MAX,
				    GEN_FRAME_MAX, NULL);

		if (!len || len > p->up.pool->data_room) {
			dpflow_gen_destroy(g);
			return dpflow_error_set(
			    err, EINVAL, "size",
			    "%s: packet %u of %u bytes does not fit the "
			    "pool's data room (%u)",
			    args->uri, i, len, p->up.pool->data_room);
		}
		p->lens[i] = (uint16_t)len;
	}
	dpflow_gen_destroy(g);
	p->n_tmpl = n;
	return 0;
}

/* What a gen URI asks for. */
struct gen_conf {
	struct dpflow_gen_profile prof;
	uint64_t queues, rate, templates;
	bool loop;
};

/*
 * The keys of @args into @c, for open and check alike: the profile and its
 * keys, the port's own keys; receiving needs @pool.
 */
static int gen_args(const struct port_args *args, struct dpflow_pool *pool,
		    struct gen_conf *c, struct dpflow_error *err)
{
	bool seen[4] = {false};
	const char *name = "default";
	unsigned first = 0;
	int rc;

	c->queues = 1;
	c->rate = 0;
	c->templates = GEN_TEMPLATES_DEFAULT;
	c->loop = false;
	if (!pool)
		return dpflow_error_set(err, EINVAL, "pool",
					"%s: a gen port needs a pool",
					args->uri);
	if (args->n && !args->a[0].val && strcmp(args->a[0].key, "loop")) {
		name = args->a[0].key;
		first = 1;
	}
	if (dpflow_gen_profile_init(&c->prof, name, err))
		return -EINVAL;
	for (unsigned i = first; i < args->n; i++) {
		const struct port_arg *a = &args->a[i];

		if (!strcmp(a->key, "loop") && !a->val)
			rc = port_arg_once(args, a, "loop", &seen[0], err);
		else if (!strcmp(a->key, "queues"))
			rc = port_arg_once(args, a, "queues", &seen[1], err) ||
			     port_arg_u64(args, a, "queues", 1, GEN_QUEUES_MAX,
					  &c->queues, err);
		else if (!strcmp(a->key, "rate"))
			rc = port_arg_once(args, a, "rate", &seen[2], err) ||
			     port_arg_u64(args, a, "rate", 1, 1ull << 40,
					  &c->rate, err);
		else if (!strcmp(a->key, "templates"))
			rc =
			    port_arg_once(args, a, "templates", &seen[3],
					  err) ||
			    port_arg_u64(args, a, "templates", 1,
					 GEN_TEMPLATES_MAX, &c->templates, err);
		else if (a->val)
			rc = dpflow_gen_profile_set(&c->prof, a->key, a->val,
						    err);
		else
			rc = port_arg_unknown(args, a, err);
		if (rc)
			return -EINVAL;
	}
	c->loop = seen[0];
	return 0;
}

static int gen_open(struct dpflow_port *port, const struct port_args *args,
		    struct dpflow_error *err)
{
	struct port_gen *p = gen_port(port);
	struct gen_conf c;
	uint64_t queues;
	int rc = gen_args(args, port->pool, &c, err);

	if (!rc)
		rc = gen_build(p, &c.prof, c.templates, args, err);
	if (rc) {
		gen_close(port);
		return rc;
	}
	queues = c.queues > p->n_tmpl ? p->n_tmpl : c.queues;
	p->q = aligned_alloc(64, queues * sizeof(*p->q));
	if (!p->q) {
		gen_close(port);
		return dpflow_error_set(err, ENOMEM, "queues", "%s: no memory",
					args->uri);
	}
	memset(p->q, 0, queues * sizeof(*p->q));
	for (unsigned i = 0; i < queues; i++) {
		struct gen_queue *q = &p->q[i];

		q->share = c.loop ? UINT64_MAX
				  : c.prof.count / queues +
					(i < c.prof.count % queues);
		q->next = i;
		if (c.rate)
			q->per_tick = (double)c.rate / (double)queues /
				      (double)dpflow_tsc_hz();
	}
	port->n_rxq = (uint16_t)queues;
	port->n_txq = 0;
	return 0;
}

/*
 * Check: the keys, and the templates built (in process memory, then freed)
 * so that a packet too large for @pool's data room is refused as open
 * refuses it.
 */
static int gen_check(const struct port_args *args, struct dpflow_pool *pool,
		     char *paths[2], struct dpflow_error *err)
{
	struct port_gen p;
	struct gen_conf c;
	int rc = gen_args(args, pool, &c, err);

	(void)paths;
	if (rc)
		return rc;
	memset(&p, 0, sizeof(p));
	p.up.pool = pool;
	rc = gen_build(&p, &c.prof, c.templates, args, err);
	gen_close(&p.up);
	return rc;
}

const struct dpflow_port_ops dpflow_port_gen_ops = {
    .kind = "gen",
    .size = sizeof(struct port_gen),
    .open = gen_open,
    .check = gen_check,
    .rx_burst = gen_rx_burst,
    .rx_done = gen_rx_done,
    .stats = gen_stats,
    .close = gen_close,
};
