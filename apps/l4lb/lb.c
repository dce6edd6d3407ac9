/*
 * The balancer's control side (l4lb.h): services and backends edited in
 * a private copy of the view, Maglev tables rebuilt for the services that
 * changed, and the new view published by pointer swap after a grace
 * period.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/clock.h"

#include "dpflow/maglev.h"

#include "l4lb/lb_internal.h"

static const uint8_t zero_mac[6];

static struct lb_view *view_alloc(void)
{
	struct lb_view *v = aligned_alloc(DPFLOW_CACHE_LINE, sizeof(*v));

	if (!v)
		return NULL;
	memset(v, 0, sizeof(*v));
	memset(v->svc_hash, 0xff, sizeof(v->svc_hash));
	memset(v->snat_hash, 0xff, sizeof(v->snat_hash));
	return v;
}

/* Free @old's Maglev tables that @keep does not use, then @old. */
static void view_free(struct lb_view *old, const struct lb_view *keep)
{
	if (!old)
		return;
	for (unsigned s = 0; s < L4LB_SERVICES_MAX; s++)
		if (old->svc[s].maglev &&
		    (!keep || keep->svc[s].maglev != old->svc[s].maglev))
			free(old->svc[s].maglev);
	free(old);
}

/* The view to edit: a copy of the published one, made on first use. */
static struct lb_view *edit(struct l4lb *lb, struct dpflow_error *err)
{
	if (lb->next)
		return lb->next;
	lb->next = view_alloc();
	if (!lb->next) {
		dpflow_error_set(err, ENOMEM, NULL, "out of memory");
		return NULL;
	}
	memcpy(lb->next, lb->view, sizeof(*lb->next));
	return lb->next;
}

static const struct lb_view *cur(const struct l4lb *lb)
{
	return lb->next ? lb->next : lb->view;
}

/*
 * The root pipe of input port @port (@i: 0 client, 1 backend): a
 * match-all BASIC pipe (no per-entry fields) whose one entry hands every
 * packet to the handler. The handler's service lookup already tells the
 * balancer's packets (to a VIP, to a SNAT address, ICMP errors about a
 * flow) from the rest, which it drops and counts; a root matching the
 * addresses would look each packet up twice (about 20 cycles a packet).
 */
static int root_pipe(struct l4lb *lb, unsigned i, uint16_t port,
		     struct dpflow_error *err)
{
	struct dpflow_pipe_cfg pc;
	struct dpflow_entry_cfg e;
	struct dpflow_queue *q;
	char name[DPFLOW_NAME_MAX];
	int rc;

	memset(&pc, 0, sizeof(pc));
	snprintf(name, sizeof(name), "l4lb_in%u", i);
	pc.name = name;
	pc.type = DPFLOW_PIPE_BASIC;
	pc.root = true;
	pc.port = port;
	pc.size = 1;
	pc.fwd.kind = DPFLOW_FWD_HANDLER;
	pc.fwd.handler = l4lb_handle;
	pc.fwd.handler_arg = lb;
	pc.miss_fwd.kind = DPFLOW_FWD_DROP;
	lb->root[i] = dpflow_pipe_create(lb->ctx, &pc, err);
	if (!lb->root[i])
		return -EINVAL;
	q = dpflow_queue_create(lb->ctx, err);
	if (!q)
		return -ENOMEM;
	memset(&e, 0, sizeof(e));
	rc = dpflow_entry_add(q, lb->root[i], &e, NULL, err)
		 ? dpflow_entries_process(q, NULL, err)
		 : -ENOSPC;
	dpflow_queue_destroy(q);
	return rc;
}

struct l4lb *l4lb_create(struct dpflow_ctx *ctx, const struct l4lb_cfg *cfg,
			 struct dpflow_error *err)
{
	struct l4lb *lb;
	unsigned ports = dpflow_ctx_port_count(ctx);

	if (cfg->client_port >= ports || cfg->backend_port >= ports) {
		dpflow_error_set(err, EINVAL, "port", "no such port");
		return NULL;
	}
	if (cfg->maglev_size && !dpflow_maglev_is_prime(cfg->maglev_size)) {
		dpflow_error_set(err, EINVAL, "maglev_size",
				 "%" PRIu32 " is not a prime",
				 cfg->maglev_size);
		return NULL;
	}
	lb = calloc(1, sizeof(*lb));
	if (!lb) {
		dpflow_error_set(err, ENOMEM, NULL, "out of memory");
		return NULL;
	}
	lb->ctx = ctx;
	lb->cfg = *cfg;
	if (!lb->cfg.maglev_size)
		lb->cfg.maglev_size = DPFLOW_MAGLEV_SIZE_DEFAULT;
	if (!lb->cfg.conn_entries)
		lb->cfg.conn_entries = L4LB_CONN_TABLE_DEFAULT;
	lb->view = view_alloc();
	lb->shards = aligned_alloc(DPFLOW_CACHE_LINE,
				   DPFLOW_THREAD_SHARDS * sizeof(*lb->shards));
	lb->conns =
	    l4lb_conn_create(lb->cfg.conn_entries, cfg->shared, &cfg->timeouts);
	if (!lb->view || !lb->shards || !lb->conns) {
		dpflow_error_set(err, ENOMEM, "conn_table",
				 "out of memory for %" PRIu32 " connections",
				 lb->cfg.conn_entries);
		goto fail;
	}
	memset(lb->shards, 0, DPFLOW_THREAD_SHARDS * sizeof(*lb->shards));
	if (root_pipe(lb, 0, cfg->client_port, err))
		goto fail;
	if (cfg->backend_port != cfg->client_port &&
	    root_pipe(lb, 1, cfg->backend_port, err))
		goto fail;
	return lb;
fail:
	l4lb_destroy(lb);
	return NULL;
}

void l4lb_destroy(struct l4lb *lb)
{
	if (!lb)
		return;
	lb_health_free(lb);
	view_free(lb->next, lb->view);
	view_free(lb->view, NULL);
	l4lb_conn_destroy(lb->conns);
	free(lb->shards);
	free(lb);
}

static bool addr_eq(const struct l4lb_addr *a, const struct l4lb_addr *b)
{
	return a->v6 == b->v6 && !memcmp(a->b, b->b, a->v6 ? 16 : 4);
}

static bool addr_set(const struct l4lb_addr *a)
{
	static const uint8_t zero[16];

	return memcmp(a->b, zero, 16) != 0;
}

/*
 * Ids given to a new service or backend are free in the edited view and
 * in the published one: data threads count into a shard slot by id only
 * while the id is used in a view they read, and the commit that
 * published its removal waited for them to leave the older views, so no
 * data thread writes the counters of an id that can be given out, and
 * they can be zeroed for the new owner (which starts at zero, not at
 * what the id's last owner counted).
 */
static void service_counters_zero(struct l4lb *lb, unsigned id)
{
	for (unsigned t = 0; t < DPFLOW_THREAD_SHARDS; t++) {
		struct l4lb_service_stats *x = &lb->shards[t].svc[id];

		__atomic_store_n(&x->fwd.pkts, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&x->fwd.bytes, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&x->reply.pkts, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&x->reply.bytes, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&x->icmp.pkts, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&x->icmp.bytes, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&x->new_flows, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&x->untracked, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&x->rescheduled, 0, __ATOMIC_RELAXED);
	}
}

static void backend_counters_zero(struct l4lb *lb, unsigned id)
{
	for (unsigned t = 0; t < DPFLOW_THREAD_SHARDS; t++) {
		struct lb_shard *sh = &lb->shards[t];

		__atomic_store_n(&sh->be_fwd[id].pkts, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&sh->be_fwd[id].bytes, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&sh->be_new[id], 0, __ATOMIC_RELAXED);
	}
}

int l4lb_service_find(const struct l4lb *lb, const char *name)
{
	const struct lb_view *v = cur(lb);

	for (unsigned s = 0; s < L4LB_SERVICES_MAX; s++)
		if (v->svc[s].used && !strcmp(v->svc[s].cfg.name, name))
			return (int)s;
	return -ENOENT;
}

int l4lb_service_add(struct l4lb *lb, const struct l4lb_service_cfg *s,
		     struct dpflow_error *err)
{
	struct lb_view *v;
	unsigned id;

	if (!s->name[0] || strlen(s->name) >= L4LB_NAME_MAX)
		return dpflow_error_set(err, EINVAL, "name",
					"a service needs a name");
	if (l4lb_service_find(lb, s->name) >= 0)
		return dpflow_error_set(err, EEXIST, "name",
					"service %s exists", s->name);
	if (s->proto != 6 && s->proto != 17)
		return dpflow_error_set(err, EINVAL, "proto",
					"proto must be tcp or udp");
	if (s->mode > L4LB_MODE_GUE)
		return dpflow_error_set(err, EINVAL, "mode", "bad mode");
	if (s->mode == L4LB_MODE_NAT &&
	    (!addr_set(&s->snat) || s->snat.v6 != s->vip.v6))
		return dpflow_error_set(err, EINVAL, "snat",
					"a nat service needs a SNAT address "
					"of the VIP's family");
	if (s->mode != L4LB_MODE_NAT && !addr_set(&s->encap_src))
		return dpflow_error_set(err, EINVAL, "encap_src",
					"a dsr service needs encap_src");
	for (unsigned i = 0; i < L4LB_SERVICES_MAX; i++) {
		const struct l4lb_service_cfg *o = &cur(lb)->svc[i].cfg;

		if (!cur(lb)->svc[i].used)
			continue;
		if (addr_eq(&o->vip, &s->vip) && o->proto == s->proto &&
		    o->port == s->port)
			return dpflow_error_set(err, EEXIST, "vip",
						"service %s has the same VIP, "
						"proto and port",
						o->name);
		if (o->mode == L4LB_MODE_NAT && addr_eq(&o->snat, &s->vip))
			return dpflow_error_set(err, EINVAL, "vip",
						"the VIP is the SNAT address "
						"of %s",
						o->name);
		if (s->mode == L4LB_MODE_NAT && addr_eq(&o->vip, &s->snat))
			return dpflow_error_set(err, EINVAL, "snat",
						"the SNAT address is the VIP "
						"of %s",
						o->name);
	}
	v = edit(lb, err);
	if (!v)
		return -ENOMEM;
	for (id = 0; id < L4LB_SERVICES_MAX &&
		     (v->svc[id].used || lb->view->svc[id].used);
	     id++)
		;
	if (id == L4LB_SERVICES_MAX)
		return dpflow_error_set(err, ENOSPC, "services",
					"at most %u services",
					L4LB_SERVICES_MAX);
	service_counters_zero(lb, id);
	memset(&v->svc[id], 0, sizeof(v->svc[id]));
	v->svc[id].used = true;
	v->svc[id].cfg = *s;
	if (!v->svc[id].cfg.gue_port)
		v->svc[id].cfg.gue_port = L4LB_GUE_PORT_DEFAULT;
	lb->svc_dirty[id] = true;
	return (int)id;
}

int l4lb_service_remove(struct l4lb *lb, const char *name,
			struct dpflow_error *err)
{
	int id = l4lb_service_find(lb, name);
	struct lb_view *v;

	if (id < 0)
		return dpflow_error_set(err, ENOENT, "name", "no service %s",
					name);
	v = edit(lb, err);
	if (!v)
		return -ENOMEM;
	for (unsigned b = 0; b < L4LB_BACKENDS_MAX; b++)
		if (v->be[b].used && v->be[b].service == id)
			v->be[b].used = false;
	v->svc[id].used = false;
	lb->svc_dirty[id] = true;
	return 0;
}

int l4lb_backend_find(const struct l4lb *lb, int svc,
		      const struct l4lb_addr *addr, uint16_t port)
{
	const struct lb_view *v = cur(lb);

	for (unsigned b = 0; b < L4LB_BACKENDS_MAX; b++)
		if (v->be[b].used && v->be[b].service == svc &&
		    addr_eq(&v->be[b].cfg.addr, addr) &&
		    v->be[b].cfg.port == port)
			return (int)b;
	return -ENOENT;
}

int l4lb_backend_add(struct l4lb *lb, int svc, const struct l4lb_backend_cfg *b,
		     struct dpflow_error *err)
{
	struct lb_view *v;
	unsigned id;

	if (svc < 0 || svc >= (int)L4LB_SERVICES_MAX || !cur(lb)->svc[svc].used)
		return dpflow_error_set(err, ENOENT, "service",
					"no such service");
	if (!addr_set(&b->addr))
		return dpflow_error_set(err, EINVAL, "addr",
					"a backend needs an address");
	if (cur(lb)->svc[svc].cfg.mode == L4LB_MODE_NAT &&
	    b->addr.v6 != cur(lb)->svc[svc].cfg.vip.v6)
		return dpflow_error_set(err, EINVAL, "addr",
					"a nat backend has the VIP's family");
	if (cur(lb)->svc[svc].cfg.mode != L4LB_MODE_NAT &&
	    b->addr.v6 != cur(lb)->svc[svc].cfg.encap_src.v6)
		return dpflow_error_set(err, EINVAL, "addr",
					"a dsr backend has the family of the "
					"service's encap_src");
	if (l4lb_backend_find(lb, svc, &b->addr, b->port) >= 0)
		return dpflow_error_set(err, EEXIST, "addr",
					"the backend exists");
	v = edit(lb, err);
	if (!v)
		return -ENOMEM;
	for (id = 0; id < L4LB_BACKENDS_MAX &&
		     (v->be[id].used || lb->view->be[id].used);
	     id++)
		;
	if (id == L4LB_BACKENDS_MAX)
		return dpflow_error_set(err, ENOSPC, "backends",
					"at most %u backends",
					L4LB_BACKENDS_MAX);
	backend_counters_zero(lb, id);
	memset(&v->be[id], 0, sizeof(v->be[id]));
	v->be[id].used = true;
	v->be[id].up = true;
	v->be[id].gen = ++lb->backend_gen;
	lb_health_reset(lb, id);
	v->be[id].service = (uint16_t)svc;
	v->be[id].cfg = *b;
	memcpy(v->be[id].dst_mac,
	       memcmp(b->mac, zero_mac, 6) ? b->mac : lb->cfg.backend_gw_mac,
	       6);
	lb->svc_dirty[svc] = true;
	return (int)id;
}

/* The edited view's backend @id: 0 and *@out, or -errno (+ @err). */
static int backend_edit(struct l4lb *lb, uint32_t id, struct lb_backend **out,
			struct dpflow_error *err)
{
	struct lb_view *v;

	if (id >= L4LB_BACKENDS_MAX || !cur(lb)->be[id].used)
		return dpflow_error_set(err, ENOENT, "backend",
					"no backend %" PRIu32, id);
	v = edit(lb, err);
	if (!v)
		return -ENOMEM;
	lb->svc_dirty[v->be[id].service] = true;
	*out = &v->be[id];
	return 0;
}

int l4lb_backend_remove(struct l4lb *lb, uint32_t id, struct dpflow_error *err)
{
	struct lb_backend *b = NULL;
	int rc = backend_edit(lb, id, &b, err);

	if (!rc)
		b->used = false;
	return rc;
}

int l4lb_backend_set_weight(struct l4lb *lb, uint32_t id, uint32_t weight,
			    struct dpflow_error *err)
{
	struct lb_backend *b = NULL;
	int rc = backend_edit(lb, id, &b, err);

	if (!rc)
		b->cfg.weight = weight;
	return rc;
}

int l4lb_backend_set_up(struct l4lb *lb, uint32_t id, bool up,
			struct dpflow_error *err)
{
	struct lb_backend *b = NULL;
	int rc = backend_edit(lb, id, &b, err);

	if (!rc)
		b->up = up;
	return rc;
}

/* Maglev name of a backend: "addr:port" (stable across instances and
 * versions, so never the bracketed text of lb_endpoint_str(): it would
 * move the flows of IPv6 backends). */
static void backend_name(const struct lb_backend *b, char *out, size_t len)
{
	char a[INET6_ADDRSTRLEN];

	lb_addr_str(&b->cfg.addr, a);
	snprintf(out, len, "%s:%u", a, b->cfg.port);
}

void lb_addr_str(const struct l4lb_addr *a, char *out)
{
	inet_ntop(a->v6 ? AF_INET6 : AF_INET, a->b, out, INET6_ADDRSTRLEN);
}

void lb_endpoint_str(const struct l4lb_addr *a, uint16_t port,
		     char out[LB_ENDPOINT_LEN])
{
	char s[INET6_ADDRSTRLEN];

	lb_addr_str(a, s);
	snprintf(out, LB_ENDPOINT_LEN, a->v6 ? "[%s]:%u" : "%s:%u", s, port);
}

/* Rebuild service @s's Maglev table in @v (a new allocation). */
static int maglev_rebuild(struct l4lb *lb, struct lb_view *v, unsigned s,
			  struct dpflow_error *err)
{
	struct dpflow_maglev_member *mb = NULL;
	char(*names)[DPFLOW_MAGLEV_NAME_MAX] = NULL;
	uint32_t *ids = NULL, *table = NULL, n = 0, m = lb->cfg.maglev_size;
	int rc = -ENOMEM;

	v->svc[s].maglev = NULL; /* the old table belongs to the old view */
	v->svc[s].m = 0;
	if (!v->svc[s].used)
		return 0;
	mb = calloc(L4LB_BACKENDS_MAX, sizeof(*mb));
	names = calloc(L4LB_BACKENDS_MAX, sizeof(*names));
	ids = calloc(L4LB_BACKENDS_MAX, sizeof(*ids));
	if (!mb || !names || !ids)
		goto out;
	for (unsigned b = 0; b < L4LB_BACKENDS_MAX; b++) {
		const struct lb_backend *be = &v->be[b];

		if (!be->used || be->service != s || !be->up || !be->cfg.weight)
			continue;
		backend_name(be, names[n], sizeof(names[n]));
		mb[n].name = names[n];
		mb[n].weight = be->cfg.weight;
		ids[n++] = b;
	}
	if (!n) {
		rc = 0;
		goto out;
	}
	table = malloc((size_t)m * sizeof(*table));
	if (!table)
		goto out;
	rc = dpflow_maglev_build(mb, n, m, table);
	if (rc) {
		dpflow_error_set(err, -rc, "backends",
				 "Maglev table of %s: error %d",
				 v->svc[s].cfg.name, rc);
		free(table);
		goto out;
	}
	for (uint32_t i = 0; i < m; i++)
		table[i] = ids[table[i]];
	v->svc[s].maglev = table;
	v->svc[s].m = m;
out:
	if (rc == -ENOMEM)
		dpflow_error_set(err, -rc, NULL, "out of memory");
	free(mb);
	free(names);
	free(ids);
	return rc;
}

static void hashes_rebuild(struct lb_view *v)
{
	memset(v->svc_hash, 0xff, sizeof(v->svc_hash));
	memset(v->snat_hash, 0xff, sizeof(v->snat_hash));
	for (unsigned s = 0; s < L4LB_SERVICES_MAX; s++) {
		const struct l4lb_service_cfg *c = &v->svc[s].cfg;
		uint32_t h;

		if (!v->svc[s].used)
			continue;
		h = lb_svc_hash(c->vip.b, c->vip.v6, c->proto, c->port);
		while (v->svc_hash[h % SVC_HASH_SIZE] != SVC_NONE)
			h++;
		v->svc_hash[h % SVC_HASH_SIZE] = (uint16_t)s;
		if (c->mode != L4LB_MODE_NAT ||
		    lb_snat_lookup(v, c->snat.b, c->snat.v6) != SVC_NONE)
			continue;
		h = lb_svc_hash(c->snat.b, c->snat.v6, 0, 0);
		while (v->snat_hash[h % SVC_HASH_SIZE] != SVC_NONE)
			h++;
		v->snat_hash[h % SVC_HASH_SIZE] = (uint16_t)s;
	}
}

int l4lb_commit(struct l4lb *lb, struct dpflow_error *err)
{
	struct lb_view *v = lb->next, *old;
	int rc;

	if (!v)
		return 0;
	for (unsigned s = 0; s < L4LB_SERVICES_MAX; s++) {
		if (!lb->svc_dirty[s])
			continue;
		rc = maglev_rebuild(lb, v, s, err);
		if (rc)
			goto undo;
	}
	hashes_rebuild(v);
	for (unsigned b = 0; b < L4LB_BACKENDS_MAX; b++) {
		struct lb_backend *be = &v->be[b];

		be->live =
		    be->used && be->up ? LB_LIVE(be->service, be->gen) : 0;
		if (be->used && v->svc[be->service].cfg.mode != L4LB_MODE_NAT)
			lb_encap_template(be, &v->svc[be->service].cfg,
					  lb->cfg.backend_mac);
	}
	old = lb->view;
	__atomic_store_n(&lb->view, v, __ATOMIC_RELEASE);
	lb->next = NULL;
	memset(lb->svc_dirty, 0, sizeof(lb->svc_dirty));
	dpflow_ctx_synchronize(lb->ctx);
	view_free(old, v);
	return 0;
undo:
	/* the edited view is dropped; the published one stays */
	for (unsigned s = 0; s < L4LB_SERVICES_MAX; s++)
		if (lb->svc_dirty[s] && v->svc[s].maglev &&
		    v->svc[s].maglev != lb->view->svc[s].maglev)
			free(v->svc[s].maglev);
	free(v);
	lb->next = NULL;
	memset(lb->svc_dirty, 0, sizeof(lb->svc_dirty));
	return rc;
}

void l4lb_abort(struct l4lb *lb)
{
	/* Maglev tables are only made by a commit: the edited view still
	 * shares the published one's */
	free(lb->next);
	lb->next = NULL;
	memset(lb->svc_dirty, 0, sizeof(lb->svc_dirty));
}

int l4lb_pick(const struct l4lb *lb, int svc, const struct l4lb_conn_key *k)
{
	const struct lb_view *v = lb->view;
	uint64_t h = l4lb_conn_hash(k);

	if (svc < 0 || svc >= (int)L4LB_SERVICES_MAX || !v->svc[svc].maglev)
		return -ENOENT;
	return (int)v->svc[svc].maglev[(uint32_t)(h >> 32) % v->svc[svc].m];
}

static void counter_sum(struct l4lb_counter *to, const struct l4lb_counter *c)
{
	to->pkts += __atomic_load_n(&c->pkts, __ATOMIC_RELAXED);
	to->bytes += __atomic_load_n(&c->bytes, __ATOMIC_RELAXED);
}

int l4lb_service_stats(const struct l4lb *lb, int svc,
		       struct l4lb_service_stats *s)
{
	memset(s, 0, sizeof(*s));
	if (svc < 0 || svc >= (int)L4LB_SERVICES_MAX)
		return -ENOENT;
	for (unsigned t = 0; t < DPFLOW_THREAD_SHARDS; t++) {
		const struct l4lb_service_stats *x = &lb->shards[t].svc[svc];

		counter_sum(&s->fwd, &x->fwd);
		counter_sum(&s->reply, &x->reply);
		counter_sum(&s->icmp, &x->icmp);
		s->new_flows +=
		    __atomic_load_n(&x->new_flows, __ATOMIC_RELAXED);
		s->untracked +=
		    __atomic_load_n(&x->untracked, __ATOMIC_RELAXED);
		s->rescheduled +=
		    __atomic_load_n(&x->rescheduled, __ATOMIC_RELAXED);
	}
	return 0;
}

int l4lb_backend_info(const struct l4lb *lb, uint32_t id,
		      struct l4lb_backend_info *info)
{
	const struct lb_view *v = cur(lb);
	const struct lb_service *s;

	memset(info, 0, sizeof(*info));
	if (id >= L4LB_BACKENDS_MAX || !v->be[id].used)
		return -ENOENT;
	info->id = id;
	info->service = v->be[id].service;
	info->cfg = v->be[id].cfg;
	info->up = v->be[id].up;
	s = &lb->view->svc[info->service];
	for (uint32_t i = 0; s->maglev && i < s->m; i++)
		info->slots += s->maglev[i] == id;
	for (unsigned t = 0; t < DPFLOW_THREAD_SHARDS; t++) {
		counter_sum(&info->fwd, &lb->shards[t].be_fwd[id]);
		info->new_flows += __atomic_load_n(&lb->shards[t].be_new[id],
						   __ATOMIC_RELAXED);
	}
	return 0;
}

const struct l4lb_service_cfg *l4lb_service_cfg(const struct l4lb *lb, int svc)
{
	const struct lb_view *v = cur(lb);

	if (svc < 0 || svc >= (int)L4LB_SERVICES_MAX || !v->svc[svc].used)
		return NULL;
	return &v->svc[svc].cfg;
}

void l4lb_drops(const struct l4lb *lb, uint64_t drops[L4LB_DROP__COUNT])
{
	memset(drops, 0, L4LB_DROP__COUNT * sizeof(*drops));
	for (unsigned t = 0; t < DPFLOW_THREAD_SHARDS; t++)
		for (unsigned d = 0; d < L4LB_DROP__COUNT; d++)
			drops[d] += __atomic_load_n(&lb->shards[t].drops[d],
						    __ATOMIC_RELAXED);
}

struct l4lb_conn_table *l4lb_conns(struct l4lb *lb)
{
	return lb->conns;
}

const char *l4lb_mode_name(unsigned m)
{
	return m == L4LB_MODE_NAT    ? "nat"
	       : m == L4LB_MODE_IPIP ? "ipip"
				     : "gue";
}

/* @a with @port as lb_endpoint_str() writes it; port 0 (every port of a
 * VIP, a backend that keeps the client's port): the address alone. */
static void describe_endpoint(const struct l4lb_addr *a, uint16_t port,
			      char out[LB_ENDPOINT_LEN])
{
	if (port)
		lb_endpoint_str(a, port, out);
	else
		lb_addr_str(a, out);
}

void l4lb_describe(const struct l4lb *lb, FILE *out)
{
	fprintf(out, "apps:\n  l4lb:\n");
	lb_describe_services(lb, out);
}

void lb_describe_services(const struct l4lb *lb, FILE *out)
{
	for (unsigned s = 0; s < L4LB_SERVICES_MAX; s++) {
		const struct l4lb_service_cfg *c = l4lb_service_cfg(lb, (int)s);
		char ep[LB_ENDPOINT_LEN];

		if (!c)
			continue;
		describe_endpoint(&c->vip, c->port, ep);
		fprintf(out, "    service %s: %s %s%s, mode %s", c->name,
			c->proto == 6 ? "tcp" : "udp", ep,
			c->port ? "" : " (every port)",
			l4lb_mode_name(c->mode));
		lb_addr_str(c->mode == L4LB_MODE_NAT ? &c->snat : &c->encap_src,
			    ep);
		fprintf(out, ", %s %s\n",
			c->mode == L4LB_MODE_NAT ? "snat" : "encap_src", ep);
		for (uint32_t b = 0; b < L4LB_BACKENDS_MAX; b++) {
			struct l4lb_backend_info bi;

			if (l4lb_backend_info(lb, b, &bi) || bi.service != s)
				continue;
			describe_endpoint(&bi.cfg.addr, bi.cfg.port, ep);
			fprintf(out, "      backend %s weight %u\n", ep,
				(unsigned)bi.cfg.weight);
		}
	}
}

void l4lb_print(const struct l4lb *lb, FILE *f)
{
	uint64_t drops[L4LB_DROP__COUNT];
	struct l4lb_conn_stats cs;

	for (unsigned s = 0; s < L4LB_SERVICES_MAX; s++) {
		const struct l4lb_service_cfg *c = l4lb_service_cfg(lb, (int)s);
		struct l4lb_service_stats st;
		char a[LB_ENDPOINT_LEN];

		if (!c)
			continue;
		l4lb_service_stats(lb, (int)s, &st);
		lb_endpoint_str(&c->vip, c->port, a);
		fprintf(f,
			"l4lb service %s %s %s %s: fwd %" PRIu64
			" pkts %" PRIu64 " bytes, reply %" PRIu64
			" pkts, icmp %" PRIu64 ", new flows %" PRIu64
			", untracked %" PRIu64 ", rescheduled %" PRIu64 "\n",
			c->name, c->proto == 6 ? "tcp" : "udp", a,
			l4lb_mode_name(c->mode), st.fwd.pkts, st.fwd.bytes,
			st.reply.pkts, st.icmp.pkts, st.new_flows, st.untracked,
			st.rescheduled);
		for (uint32_t b = 0; b < L4LB_BACKENDS_MAX; b++) {
			struct l4lb_backend_info bi;

			if (l4lb_backend_info(lb, b, &bi) || bi.service != s)
				continue;
			lb_endpoint_str(&bi.cfg.addr, bi.cfg.port, a);
			fprintf(f,
				"  backend %s weight %" PRIu32
				" %s slots %" PRIu32 ": fwd %" PRIu64
				" pkts, new flows %" PRIu64 "\n",
				a, bi.cfg.weight, bi.up ? "up" : "down",
				bi.slots, bi.fwd.pkts, bi.new_flows);
		}
	}
	l4lb_conn_stats_get(lb->conns, &cs);
	fprintf(f,
		"l4lb connections: created %" PRIu64 ", replaced %" PRIu64
		", refused %" PRIu64 ", expired %" PRIu64 "\n",
		cs.created, cs.replaced, cs.refused, cs.expired);
	l4lb_drops(lb, drops);
	for (unsigned d = 0; d < L4LB_DROP__COUNT; d++)
		if (drops[d])
			fprintf(f, "l4lb drop %s: %" PRIu64 "\n",
				l4lb_drop_name(d), drops[d]);
}
