/*
 * Contexts, ports and pipes: creation, validation and the loop check of
 * the pipe graph (flow.h). Control threads only.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "dpflow/clock.h"
#include "dpflow/flow.h"
#include "dpflow/ring.h"

#include "flow/ct.h"
#include "flow/flow_actions.h"
#include "flow/flow_internal.h"
#include "flow/hash_impl.h"
#include "flow/meter.h"
#include "flow/pkt_edit.h"
#include "flow/table_lpm.h"

#define CTX_POOL_SLOTS_DEFAULT 8192

static const char *const pipe_type_names[] = {
    [DPFLOW_PIPE_BASIC] = "basic", [DPFLOW_PIPE_CONTROL] = "control",
    [DPFLOW_PIPE_ACL] = "acl",	   [DPFLOW_PIPE_LPM] = "lpm",
    [DPFLOW_PIPE_HASH] = "hash",   [DPFLOW_PIPE_CT] = "ct",
};

static const char *const action_names[] = {
    [DPFLOW_ACT_SET_FIELD] = "set",
    [DPFLOW_ACT_ADD_FIELD] = "add",
    [DPFLOW_ACT_COPY_FIELD] = "copy",
    [DPFLOW_ACT_SET_MAC_SRC] = "set_mac_src",
    [DPFLOW_ACT_SET_MAC_DST] = "set_mac_dst",
    [DPFLOW_ACT_DEC_TTL] = "dec_ttl",
    [DPFLOW_ACT_NAT_SRC_IP] = "nat_src_ip",
    [DPFLOW_ACT_NAT_DST_IP] = "nat_dst_ip",
    [DPFLOW_ACT_NAT_SRC_PORT] = "nat_src_port",
    [DPFLOW_ACT_NAT_DST_PORT] = "nat_dst_port",
    [DPFLOW_ACT_VLAN_PUSH] = "vlan_push",
    [DPFLOW_ACT_VLAN_POP] = "vlan_pop",
    [DPFLOW_ACT_ENCAP] = "encap",
    [DPFLOW_ACT_DECAP] = "decap",
    [DPFLOW_ACT_MIRROR] = "mirror",
};

const char *dpflow_pipe_type_name(unsigned type)
{
	return type < DPFLOW_ARRAY_SIZE(pipe_type_names) ? pipe_type_names[type]
							 : NULL;
}

const char *dpflow_action_name(unsigned kind)
{
	return kind < DPFLOW_ARRAY_SIZE(action_names) ? action_names[kind]
						      : NULL;
}

void flow_entry_ctr_sum(const struct dpflow_pipe *pipe, uint32_t entry,
			uint64_t *pkts, uint64_t *bytes)
{
	unsigned hi = __atomic_load_n(&pipe->ctx->workers_hi, __ATOMIC_ACQUIRE);
	uint64_t p = pipe->dp[entry].base_pkts, b = pipe->dp[entry].base_bytes;

	for (unsigned w = 0; w < FLOW_WORKERS_MAX; w++) {
		const struct entry_ctr *c =
		    &pipe->ctr[(size_t)w * pipe->cfg.size + entry];

		if (w >= hi && w != FLOW_WORKER_SHARED)
			continue;
		p += __atomic_load_n(&c->pkts, __ATOMIC_RELAXED);
		b += __atomic_load_n(&c->bytes, __ATOMIC_RELAXED);
	}
	*pkts = p;
	*bytes = b;
}

void flow_entry_ctr_zero(struct dpflow_pipe *pipe, uint32_t entry)
{
	unsigned hi = __atomic_load_n(&pipe->ctx->workers_hi, __ATOMIC_ACQUIRE);

	pipe->dp[entry].base_pkts = 0;
	pipe->dp[entry].base_bytes = 0;
	for (unsigned w = 0; w < FLOW_WORKERS_MAX; w++) {
		struct entry_ctr *c =
		    &pipe->ctr[(size_t)w * pipe->cfg.size + entry];

		if (w >= hi && w != FLOW_WORKER_SHARED)
			continue;
		if (c->pkts || c->bytes) { /* leave untouched pages alone */
			__atomic_store_n(&c->pkts, 0, __ATOMIC_RELAXED);
			__atomic_store_n(&c->bytes, 0, __ATOMIC_RELAXED);
		}
	}
}

/* RSS queues and shared monitor objects of a new context. */
static int ctx_extras_create(struct dpflow_ctx *ctx,
			     const struct dpflow_ctx_params *p,
			     struct dpflow_error *err)
{
	uint32_t qsize = p->rss_queue_size ? p->rss_queue_size : 4096;

	if (p->rss_queues > DPFLOW_RSS_QUEUES_MAX)
		return dpflow_error_set(err, EINVAL, "rss_queues",
					"%u RSS queues, at most %d",
					p->rss_queues, DPFLOW_RSS_QUEUES_MAX);
	for (unsigned q = 0; q < p->rss_queues; q++) {
		char name[32];

		snprintf(name, sizeof(name), "rss%u", q);
		ctx->rss[q] =
		    dpflow_ring_create(name, qsize, DPFLOW_RING_F_SC_DEQ, err);
		if (!ctx->rss[q])
			return -EINVAL;
		ctx->n_rss = q + 1;
	}
	if (p->shared_counters) {
		ctx->shared_counters =
		    dpflow_counters_create(p->shared_counters, err);
		if (!ctx->shared_counters)
			return -EINVAL;
		ctx->n_shared_counters = p->shared_counters;
	}
	if (p->shared_meters) {
		ctx->shared_meters =
		    dpflow_meters_create(p->shared_meters, err);
		if (!ctx->shared_meters)
			return -EINVAL;
		ctx->n_shared_meters = p->shared_meters;
	}
	return 0;
}

struct dpflow_ctx *dpflow_ctx_create(const struct dpflow_ctx_params *p,
				     struct dpflow_error *err)
{
	struct dpflow_pool_params pp = {.name = "ctx"};
	struct dpflow_ctx *ctx = calloc(1, sizeof(*ctx));

	if (!ctx) {
		dpflow_error_set(err, ENOMEM, NULL, "out of memory");
		return NULL;
	}
	pp.n_slots =
	    p && p->pool_slots ? p->pool_slots : CTX_POOL_SLOTS_DEFAULT;
	pp.data_room = p ? p->data_room : 0;
	ctx->pool = dpflow_pool_create(&pp, err);
	if (!ctx->pool) {
		free(ctx);
		return NULL;
	}
	dpflow_clock_init();
	ctx->check_only = p && p->check_only;
	if (p && ctx_extras_create(ctx, p, err)) {
		dpflow_ctx_destroy(ctx);
		return NULL;
	}
	return ctx;
}

/*
 * Zeroed memory for per-entry arrays: anonymous mappings (zero pages
 * until touched), advised for transparent huge pages when large, so a
 * million entries take few TLB entries and few page faults.
 */
static void *big_alloc(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	if (bytes >= (2u << 20))
		(void)madvise(p, bytes, MADV_HUGEPAGE);
	return p;
}

static void big_free(void *p, size_t bytes)
{
	if (p)
		munmap(p, bytes);
}

static void pipe_destroy(struct dpflow_pipe *pipe)
{
	if (!pipe)
		return;
	if (pipe->kind)
		pipe->kind->destroy(pipe);
	flow_actions_release(pipe);
	monitor_pipe_destroy(pipe);
	for (uint32_t i = 0; pipe->entries && i < pipe->cfg.size; i++)
		free(pipe->entries[i].encap);
	big_free(pipe->entries, pipe->entries_bytes);
	big_free(pipe->dp, pipe->dp_bytes);
	big_free(pipe->ctr, pipe->ctr_bytes);
	big_free(pipe->plan_entries, pipe->plan_entries_bytes);
	big_free(pipe->plan_encaps, pipe->plan_encaps_bytes);
	free(pipe->free_idx);
	free(pipe);
}

void dpflow_ctx_destroy(struct dpflow_ctx *ctx)
{
	if (!ctx)
		return;
	for (unsigned i = 0; i < ctx->n_pipes; i++)
		pipe_destroy(ctx->pipes[i]);
	for (unsigned i = 0; i < ctx->n_ports; i++)
		dpflow_port_close(ctx->ports[i].port);
	for (unsigned q = 0; q < ctx->n_rss; q++) {
		uint32_t idx[64];
		unsigned n;

		while ((n = dpflow_ring_dequeue_burst(ctx->rss[q], idx, 64)))
			dpflow_pool_free_bulk(ctx->pool, idx, n);
		dpflow_ring_destroy(ctx->rss[q]);
	}
	dpflow_counters_destroy(ctx->shared_counters);
	dpflow_meters_destroy(ctx->shared_meters);
	dpflow_pool_destroy(ctx->pool);
	free(ctx);
}

void dpflow_ctx_discard(struct dpflow_ctx *ctx)
{
	for (unsigned i = 0; ctx && i < ctx->n_ports; i++)
		dpflow_port_discard(ctx->ports[i].port);
}

struct dpflow_pool *dpflow_ctx_pool(struct dpflow_ctx *ctx)
{
	return ctx->pool;
}

int dpflow_ctx_port_find(const struct dpflow_ctx *ctx, const char *name)
{
	for (unsigned i = 0; name && i < ctx->n_ports; i++)
		if (!strcmp(ctx->ports[i].name, name))
			return (int)i;
	return -1;
}

/*
 * Does new port @port (@name) write a file another port reads or writes,
 * or read a file another port writes? Paths are compared resolved
 * (dpflow_port_path). True with @err naming both ports and the file.
 */
static bool port_files_collide(const struct dpflow_ctx *ctx, const char *name,
			       const struct dpflow_port *port,
			       struct dpflow_error *err)
{
	const char *rx = dpflow_port_path(port, false);
	const char *tx = dpflow_port_path(port, true);

	for (unsigned i = 0; i < ctx->n_ports; i++) {
		const struct dpflow_port *o = ctx->ports[i].port;
		const char *orx = dpflow_port_path(o, false);
		const char *otx = dpflow_port_path(o, true);
		const char *file = NULL, *what = NULL;

		if (tx && otx && !strcmp(tx, otx)) {
			file = tx;
			what = "also writes";
		} else if (tx && orx && !strcmp(tx, orx)) {
			file = tx;
			what = "reads";
		} else if (rx && otx && !strcmp(rx, otx)) {
			dpflow_error_set(err, EINVAL, "uri",
					 "port '%s' reads '%s', which port "
					 "'%s' writes",
					 name, rx, ctx->ports[i].name);
			return true;
		}
		if (file) {
			dpflow_error_set(err, EINVAL, "uri",
					 "port '%s' writes '%s', which port "
					 "'%s' %s",
					 name, file, ctx->ports[i].name, what);
			return true;
		}
	}
	return false;
}

int dpflow_ctx_port_add(struct dpflow_ctx *ctx, const char *name,
			const char *uri, struct dpflow_error *err)
{
	struct ctx_port *cp;

	if (!name || !*name || strlen(name) >= DPFLOW_NAME_MAX)
		return dpflow_error_set(err, EINVAL, "name",
					"port name '%s' is empty or longer "
					"than %d characters",
					name ? name : "", DPFLOW_NAME_MAX - 1);
	if (dpflow_ctx_port_find(ctx, name) >= 0)
		return dpflow_error_set(err, EEXIST, "name",
					"port '%s' already exists", name);
	if (ctx->n_ports == DPFLOW_PORTS_MAX)
		return dpflow_error_set(err, ENOSPC, "ports",
					"more than %d ports", DPFLOW_PORTS_MAX);
	cp = &ctx->ports[ctx->n_ports];
	cp->port = ctx->check_only ? dpflow_port_open_check(ctx->pool, uri, err)
				   : dpflow_port_open(ctx->pool, uri, err);
	if (!cp->port)
		return -(err ? err->code : EINVAL);
	if (port_files_collide(ctx, name, cp->port, err)) {
		dpflow_port_discard(cp->port);
		dpflow_port_close(cp->port);
		cp->port = NULL;
		return -EINVAL;
	}
	snprintf(cp->name, sizeof(cp->name), "%s", name);
	cp->root = NULL;
	return (int)ctx->n_ports++;
}

struct dpflow_port *dpflow_ctx_port(struct dpflow_ctx *ctx, unsigned id)
{
	return id < ctx->n_ports ? ctx->ports[id].port : NULL;
}

const char *dpflow_ctx_port_name(const struct dpflow_ctx *ctx, unsigned id)
{
	return id < ctx->n_ports ? ctx->ports[id].name : NULL;
}

unsigned dpflow_ctx_port_count(const struct dpflow_ctx *ctx)
{
	return ctx->n_ports;
}

int dpflow_ctx_handler_register(struct dpflow_ctx *ctx, const char *name,
				dpflow_handler_fn fn, void *arg,
				struct dpflow_error *err)
{
	struct ctx_handler *h;

	if (!name || !*name || strlen(name) >= DPFLOW_NAME_MAX || !fn)
		return dpflow_error_set(err, EINVAL, "handler",
					"a handler needs a name of 1..%d "
					"characters and a function",
					DPFLOW_NAME_MAX - 1);
	if (!dpflow_ctx_handler_find(ctx, name, NULL, NULL))
		return dpflow_error_set(err, EEXIST, "handler",
					"handler '%s' already exists", name);
	if (ctx->n_handlers == DPFLOW_HANDLERS_MAX)
		return dpflow_error_set(err, ENOSPC, "handler",
					"more than %d handlers",
					DPFLOW_HANDLERS_MAX);
	h = &ctx->handlers[ctx->n_handlers++];
	snprintf(h->name, sizeof(h->name), "%s", name);
	h->fn = fn;
	h->arg = arg;
	return 0;
}

int dpflow_ctx_handler_find(const struct dpflow_ctx *ctx, const char *name,
			    dpflow_handler_fn *fn, void **arg)
{
	for (unsigned i = 0; name && i < ctx->n_handlers; i++)
		if (!strcmp(ctx->handlers[i].name, name)) {
			if (fn)
				*fn = ctx->handlers[i].fn;
			if (arg)
				*arg = ctx->handlers[i].arg;
			return 0;
		}
	return -ENOENT;
}

uint16_t dpflow_ctx_rss_rx(struct dpflow_ctx *ctx, uint16_t queue,
			   uint32_t *idx, uint16_t max)
{
	if (queue >= ctx->n_rss)
		return 0;
	return (uint16_t)dpflow_ring_dequeue_burst(ctx->rss[queue], idx, max);
}

uint64_t dpflow_ctx_rss_count(const struct dpflow_ctx *ctx, uint16_t queue)
{
	return queue < ctx->n_rss
		   ? __atomic_load_n(&ctx->rss_count[queue], __ATOMIC_RELAXED)
		   : 0;
}

unsigned dpflow_ctx_rss_queues(const struct dpflow_ctx *ctx)
{
	return ctx->n_rss;
}

uint32_t dpflow_rss_hash(const struct dpflow_pool *pool, uint32_t idx,
			 bool inner)
{
	const struct dpflow_pkt_meta *m = dpflow_pool_meta(pool, idx);

	return dpflow_rss_hash_hdr(inner && m->tun_type ? &m->inner
							: &m->outer);
}

struct dpflow_pipe *dpflow_pipe_find(struct dpflow_ctx *ctx, const char *name)
{
	for (unsigned i = 0; name && i < ctx->n_pipes; i++)
		if (!strcmp(ctx->pipes[i]->name, name))
			return ctx->pipes[i];
	return NULL;
}

const char *dpflow_pipe_name(const struct dpflow_pipe *pipe)
{
	return pipe->name;
}

int flow_fwd_check(const struct dpflow_ctx *ctx, const struct dpflow_fwd *f,
		   bool per_entry_ok, const char *field,
		   struct dpflow_error *err)
{
	switch (f->kind) {
	case DPFLOW_FWD_DROP:
		return 0;
	case DPFLOW_FWD_PORT:
		if (f->port >= ctx->n_ports)
			return dpflow_error_set(
			    err, EINVAL, field,
			    "forwarding to port %u: no such "
			    "port",
			    f->port);
		return 0;
	case DPFLOW_FWD_PIPE:
		for (unsigned i = 0; i < ctx->n_pipes; i++)
			if (ctx->pipes[i] == f->pipe)
				return 0;
		return dpflow_error_set(err, EINVAL, field,
					"forwarding to an unknown pipe");
	case DPFLOW_FWD_HANDLER:
		if (!f->handler)
			return dpflow_error_set(err, EINVAL, field,
						"handler forwarding without a "
						"handler function");
		return 0;
	case DPFLOW_FWD_RSS:
		if (f->rss_n == 0 ||
		    (unsigned)f->rss_queue + f->rss_n > ctx->n_rss)
			return dpflow_error_set(err, EINVAL, field,
						"rss over queues %u..%u: the "
						"context has %u rss queues",
						f->rss_queue,
						f->rss_queue + f->rss_n - 1,
						ctx->n_rss);
		return 0;
	case DPFLOW_FWD_PER_ENTRY:
		if (per_entry_ok)
			return 0;
		return dpflow_error_set(err, EINVAL, field,
					"'per-entry' forwarding is only for a "
					"pipe's hit forwarding");
	default:
		return dpflow_error_set(err, ENOTSUP, field,
					"forwarding kind %u is not supported "
					"on the CPU target yet",
					f->kind);
	}
}

static bool is_address_field(unsigned f)
{
	return f == DPFLOW_FIELD_OUTER_IPV4_DST ||
	       f == DPFLOW_FIELD_OUTER_IPV4_SRC ||
	       f == DPFLOW_FIELD_INNER_IPV4_DST ||
	       f == DPFLOW_FIELD_INNER_IPV4_SRC ||
	       f == DPFLOW_FIELD_OUTER_IPV6_DST ||
	       f == DPFLOW_FIELD_OUTER_IPV6_SRC ||
	       f == DPFLOW_FIELD_INNER_IPV6_DST ||
	       f == DPFLOW_FIELD_INNER_IPV6_SRC;
}

/* LPM: the last per-entry field is the address; fields before it are
 * exact and, with the address, fit the 128-bit trie. */
static int check_lpm_match(struct dpflow_pipe *pipe, struct dpflow_error *err)
{
	const struct dpflow_match_tmpl *m = &pipe->cfg.match;
	int last = -1;

	for (unsigned i = 0; i < m->n; i++)
		if (m->f[i].per_entry)
			last = (int)i;
	if (last < 0 || !is_address_field(m->f[last].field))
		return dpflow_error_set(err, EINVAL, "match",
					"pipe '%s': the last per-entry field "
					"of an lpm pipe must be an IPv4 or "
					"IPv6 address",
					pipe->name);
	for (int i = 0; i < last; i++)
		if (m->f[i].per_entry && is_address_field(m->f[i].field))
			return dpflow_error_set(
			    err, EINVAL, "match",
			    "pipe '%s': one address field per lpm pipe ('%s' "
			    "and '%s')",
			    pipe->name, dpflow_field_name(m->f[i].field),
			    dpflow_field_name(m->f[last].field));
	pipe->lpm_bytes = (uint8_t)dpflow_field_bytes(m->f[last].field);
	if (pipe->key_len > DPFLOW_LPM6_KEY_MAX)
		return dpflow_error_set(err, EINVAL, "match",
					"pipe '%s': exact fields and the "
					"address take %u bytes; an lpm pipe's "
					"key holds at most %u (an IPv6 address "
					"and %u bytes of exact fields)",
					pipe->name, pipe->key_len,
					DPFLOW_LPM6_KEY_MAX,
					DPFLOW_LPM6_KEY_MAX - 16);
	return 0;
}

/* Per-entry key layout and template checks. */
static int check_match(struct dpflow_pipe *pipe, struct dpflow_error *err)
{
	const struct dpflow_match_tmpl *m = &pipe->cfg.match;
	unsigned off = 0, n_entry = 0;

	if (m->n > DPFLOW_MATCH_FIELDS_MAX)
		return dpflow_error_set(err, EINVAL, "match",
					"%u match fields, at most %d", m->n,
					DPFLOW_MATCH_FIELDS_MAX);
	for (unsigned i = 0; i < m->n; i++) {
		unsigned bytes = dpflow_field_bytes(m->f[i].field);

		if (!bytes)
			return dpflow_error_set(err, EINVAL, "match",
						"unknown match field %u",
						m->f[i].field);
		for (unsigned j = 0; j < i; j++)
			if (m->f[j].field == m->f[i].field)
				return dpflow_error_set(
				    err, EINVAL, "match",
				    "field '%s' appears twice",
				    dpflow_field_name(m->f[i].field));
		pipe->field_off[i] = (uint8_t)off;
		pipe->field_bytes[i] = (uint8_t)bytes;
		pipe->field_full_mask[i] = true;
		for (unsigned b = 0; b < bytes; b++)
			if (m->f[i].mask[b] != 0xff)
				pipe->field_full_mask[i] = false;
		pipe->n_const += !m->f[i].per_entry;
		if (m->f[i].per_entry) {
			off += bytes;
			n_entry++;
		}
	}
	if (off > DPFLOW_KEY_MAX)
		return dpflow_error_set(err, EINVAL, "match",
					"per-entry fields take %u bytes, at "
					"most %d",
					off, DPFLOW_KEY_MAX);
	pipe->key_len = (uint16_t)off;
	if (pipe->cfg.type == DPFLOW_PIPE_LPM)
		return check_lpm_match(pipe, err);
	if (pipe->cfg.type == DPFLOW_PIPE_CT) {
		if (n_entry)
			return dpflow_error_set(
			    err, EINVAL, "match",
			    "pipe '%s': a ct pipe tracks the 5-tuple; its "
			    "match template may only hold constant fields",
			    pipe->name);
		return 0;
	}
	/* BASIC without per-entry fields: a match-all pipe (one entry at
	 * most, with an empty key, which every packet that passes the
	 * constant fields takes) */
	if (n_entry == 0 && pipe->cfg.type != DPFLOW_PIPE_CONTROL &&
	    pipe->cfg.type != DPFLOW_PIPE_BASIC)
		return dpflow_error_set(err, EINVAL, "match",
					"a %s pipe needs at least one "
					"per-entry match field",
					dpflow_pipe_type_name(pipe->cfg.type));
	return 0;
}

static int check_actions(struct dpflow_ctx *ctx,
			 const struct dpflow_pipe_cfg *cfg,
			 struct dpflow_error *err)
{
	if (cfg->n_action_tmpls > DPFLOW_ACTION_TMPLS_MAX)
		return dpflow_error_set(
		    err, EINVAL, "actions", "%u action templates, at most %d",
		    cfg->n_action_tmpls, DPFLOW_ACTION_TMPLS_MAX);
	for (unsigned t = 0; t < cfg->n_action_tmpls; t++) {
		const struct dpflow_action_tmpl *at = &cfg->actions[t];

		if (at->n > DPFLOW_ACTIONS_MAX)
			return dpflow_error_set(err, EINVAL, "actions",
						"%u actions in template %u, at "
						"most %d",
						at->n, t, DPFLOW_ACTIONS_MAX);
		for (unsigned i = 0; i < at->n; i++) {
			const struct dpflow_action *a = &at->a[i];

			if (a->kind >= DPFLOW_ACT__COUNT)
				return dpflow_error_set(err, EINVAL, "actions",
							"unknown action %u",
							a->kind);
			if ((a->kind == DPFLOW_ACT_SET_FIELD ||
			     a->kind == DPFLOW_ACT_ADD_FIELD ||
			     a->kind == DPFLOW_ACT_COPY_FIELD) &&
			    !dpflow_field_bytes(a->field))
				return dpflow_error_set(
				    err, EINVAL, "actions",
				    "action '%s' on an "
				    "unknown field",
				    dpflow_action_name(a->kind));
			if (!flow_action_supported(a))
				return dpflow_error_set(
				    err, ENOTSUP, "actions",
				    "action '%s'%s is not supported on the "
				    "CPU target yet",
				    dpflow_action_name(a->kind),
				    a->kind <= DPFLOW_ACT_COPY_FIELD
					? " on this field"
					: "");
			if (a->kind == DPFLOW_ACT_MIRROR &&
			    a->port >= ctx->n_ports)
				return dpflow_error_set(err, EINVAL, "actions",
							"mirror to port %u: no "
							"such port",
							a->port);
		}
	}
	return 0;
}

/*
 * A ct pipe's DNAT table (dpflow_ct_cfg.dnat_pipe): a BASIC pipe matching
 * exactly the register the ct pipe names, with a nat_dst_ip action in a
 * template; not with inner or lookup_only.
 */
static int check_ct_dnat(const struct dpflow_pipe_cfg *cfg,
			 struct dpflow_error *err)
{
	const struct dpflow_ct_cfg *c = &cfg->ct;
	const struct dpflow_pipe_cfg *t = &c->dnat_pipe->cfg;
	const struct dpflow_match_field *f = &t->match.f[0];
	bool nat = false;
	unsigned ones = 0, zeros = 0;

	for (unsigned b = 0; b < 4; b++) {
		ones += f->mask[b] == 0xff;
		zeros += f->mask[b] == 0;
	}

	if (c->dnat_reg >= DPFLOW_META_REGS || c->inner || c->lookup_only)
		return dpflow_error_set(err, EINVAL, "ct.dnat",
					"pipe '%s': destination NAT needs a "
					"register meta.reg0..3, and neither "
					"inner nor lookup_only",
					cfg->name);
	for (unsigned i = 0; i < t->n_action_tmpls; i++)
		for (unsigned a = 0; a < t->actions[i].n; a++)
			nat |= t->actions[i].a[a].kind == DPFLOW_ACT_NAT_DST_IP;
	if (t->type != DPFLOW_PIPE_BASIC || t->match.n != 1 ||
	    f->field != DPFLOW_FIELD_META_REG0 + c->dnat_reg || !f->per_entry ||
	    (ones != 4 && zeros != 4) || !nat)
		return dpflow_error_set(
		    err, EINVAL, "ct.dnat.pipe",
		    "pipe '%s': its destinations' pipe '%s' must be a basic "
		    "pipe matching meta.reg%u alone, with a nat_dst_ip action",
		    cfg->name, t->name, c->dnat_reg);
	return 0;
}

/* CT pipes: one action template at most, applied to every tracked packet,
 * with constant values only; the register and the timeouts in range. */
static int check_ct(const struct dpflow_pipe_cfg *cfg, struct dpflow_error *err)
{
	const struct dpflow_ct_cfg *c = &cfg->ct;

	if (cfg->type != DPFLOW_PIPE_CT)
		return 0;
	if (cfg->n_action_tmpls > 1)
		return dpflow_error_set(
		    err, EINVAL, "actions",
		    "pipe '%s': a ct pipe has one action "
		    "template at most (no entries pick one)",
		    cfg->name);
	for (unsigned i = 0; cfg->n_action_tmpls && i < cfg->actions[0].n; i++)
		if (cfg->actions[0].a[i].per_entry)
			return dpflow_error_set(err, EINVAL, "actions",
						"pipe '%s': a ct pipe has no "
						"entries to give per-entry "
						"action values",
						cfg->name);
	if (c->user && c->user_reg >= DPFLOW_META_REGS)
		return dpflow_error_set(err, EINVAL, "ct.user_reg",
					"pipe '%s': register %u, must be 0..%d",
					cfg->name, c->user_reg,
					DPFLOW_META_REGS - 1);
	for (unsigned s = 0; s < DPFLOW_ARRAY_SIZE(c->timeout_ms); s++)
		if (c->timeout_ms[s] &&
		    (s == 0 || s >= DPFLOW_CT_STATE_COUNT ||
		     (c->timeout_ms[s] > DPFLOW_CT_TIMEOUT_MAX &&
		      c->timeout_ms[s] != DPFLOW_CT_TIMEOUT_NEVER)))
			return dpflow_error_set(err, EINVAL, "ct.timeouts",
						"pipe '%s': timeout %u ms for "
						"state %u out of range",
						cfg->name, c->timeout_ms[s], s);
	if (cfg->size > DPFLOW_CT_CAPACITY_MAX)
		return dpflow_error_set(err, EINVAL, "size",
					"pipe '%s': %u connections, at most %u",
					cfg->name, cfg->size,
					DPFLOW_CT_CAPACITY_MAX);
	if (c->evict && c->replace)
		return dpflow_error_set(err, EINVAL, "ct.replace",
					"pipe '%s': ct.replace and ct.evict "
					"exclude each other (replace reuses "
					"expired connections too)",
					cfg->name);
	if (c->save_regs & ~0xfu)
		return dpflow_error_set(err, EINVAL, "ct.save",
					"pipe '%s': registers are meta.reg0 "
					".. meta.reg3",
					cfg->name);
	if (c->dnat_pipe && check_ct_dnat(cfg, err))
		return -EINVAL;
	if (c->opens && (c->open_reg >= DPFLOW_META_REGS || c->lookup_only))
		return dpflow_error_set(err, EINVAL, "ct.opens",
					"pipe '%s': opens names meta.reg0..3, "
					"and not with lookup_only",
					cfg->name);
	if (!c->snat.n_addrs)
		return 0;
	if (c->snat.n_addrs > DPFLOW_CT_SNAT_ADDRS_MAX)
		return dpflow_error_set(err, EINVAL, "ct.snat.addrs",
					"pipe '%s': %u source NAT addresses, "
					"at most %u",
					cfg->name, c->snat.n_addrs,
					DPFLOW_CT_SNAT_ADDRS_MAX);
	if (c->inner)
		return dpflow_error_set(err, EINVAL, "ct.snat",
					"pipe '%s': source NAT translates the "
					"outer headers: not with ct.inner",
					cfg->name);
	if (c->lookup_only)
		return dpflow_error_set(err, EINVAL, "ct.snat",
					"pipe '%s': a lookup_only pipe opens "
					"no connections to bind",
					cfg->name);
	if ((c->snat.port_lo || c->snat.port_hi) &&
	    (!c->snat.port_lo || c->snat.port_lo > c->snat.port_hi))
		return dpflow_error_set(err, EINVAL, "ct.snat.ports",
					"pipe '%s': ports %u-%u: expected "
					"1 <= first <= last <= 65535",
					cfg->name, c->snat.port_lo,
					c->snat.port_hi);
	for (unsigned a = 0; a < c->snat.n_addrs; a++)
		if (c->snat.family[a] != 4 && c->snat.family[a] != 6)
			return dpflow_error_set(err, EINVAL, "ct.snat.addrs",
						"pipe '%s': address %u of "
						"family %u",
						cfg->name, a,
						c->snat.family[a]);
	return 0;
}

struct dpflow_pipe *dpflow_pipe_create(struct dpflow_ctx *ctx,
				       const struct dpflow_pipe_cfg *cfg,
				       struct dpflow_error *err)
{
	struct dpflow_pipe *pipe = NULL;

	if (!cfg->name || !*cfg->name || strlen(cfg->name) >= DPFLOW_NAME_MAX) {
		dpflow_error_set(err, EINVAL, "name",
				 "pipe name is empty or longer than %d "
				 "characters",
				 DPFLOW_NAME_MAX - 1);
		return NULL;
	}
	if (dpflow_pipe_find(ctx, cfg->name)) {
		dpflow_error_set(err, EEXIST, "name",
				 "pipe '%s' already exists", cfg->name);
		return NULL;
	}
	if (ctx->n_pipes == DPFLOW_PIPES_MAX) {
		dpflow_error_set(err, ENOSPC, "pipes", "more than %d pipes",
				 DPFLOW_PIPES_MAX);
		return NULL;
	}
	if (cfg->type >= DPFLOW_PIPE__COUNT || !table_kind_for(cfg->type)) {
		dpflow_error_set(err, ENOTSUP, "type",
				 "pipe '%s': type '%s' is not supported on the "
				 "CPU target yet",
				 cfg->name,
				 dpflow_pipe_type_name(cfg->type)
				     ? dpflow_pipe_type_name(cfg->type)
				     : "?");
		return NULL;
	}
	if (cfg->size == 0 || cfg->size > (1u << 26)) {
		dpflow_error_set(err, EINVAL, "size",
				 "pipe '%s': size %u, must be 1..%u", cfg->name,
				 cfg->size, 1u << 26);
		return NULL;
	}
	if (cfg->root && cfg->port >= ctx->n_ports) {
		dpflow_error_set(err, EINVAL, "port",
				 "root pipe '%s' on port %u: no such port",
				 cfg->name, cfg->port);
		return NULL;
	}
	if (cfg->root && ctx->ports[cfg->port].root) {
		dpflow_error_set(err, EEXIST, "root",
				 "port '%s' already has root pipe '%s'",
				 ctx->ports[cfg->port].name,
				 ctx->ports[cfg->port].root->name);
		return NULL;
	}
	/* forwarding targets exist already, so the graph stays acyclic; an
	 * entry's own forwarding is checked when it is added */
	if (flow_fwd_check(ctx, &cfg->fwd, cfg->type != DPFLOW_PIPE_CT, "fwd",
			   err) ||
	    flow_fwd_check(ctx, &cfg->miss_fwd, false, "miss_fwd", err) ||
	    (cfg->color_fwd.yellow_set &&
	     flow_fwd_check(ctx, &cfg->color_fwd.yellow, false,
			    "color_fwd.yellow", err)) ||
	    (cfg->color_fwd.red_set &&
	     flow_fwd_check(ctx, &cfg->color_fwd.red, false, "color_fwd.red",
			    err)) ||
	    check_actions(ctx, cfg, err) || check_ct(cfg, err))
		return NULL;

	pipe = calloc(1, sizeof(*pipe));
	if (!pipe)
		goto nomem;
	pipe->ctx = ctx;
	pipe->cfg = *cfg;
	pipe->cfg.name = pipe->name;
	snprintf(pipe->name, sizeof(pipe->name), "%s", cfg->name);
	pipe->id = (uint16_t)ctx->n_pipes;
	/* a template mask of all zeros means all ones (flow.h) */
	for (unsigned i = 0;
	     i < pipe->cfg.match.n && i < DPFLOW_MATCH_FIELDS_MAX; i++) {
		uint8_t *mask = pipe->cfg.match.f[i].mask;
		uint8_t any = 0;

		for (unsigned b = 0; b < sizeof(pipe->cfg.match.f[i].mask); b++)
			any |= mask[b];
		if (!any)
			memset(mask, 0xff, sizeof(pipe->cfg.match.f[i].mask));
	}
	if (check_match(pipe, err))
		goto fail;
	pipe->entries_bytes = (size_t)cfg->size * sizeof(*pipe->entries);
	pipe->dp_bytes = (size_t)cfg->size * sizeof(*pipe->dp);
	pipe->entries = big_alloc(pipe->entries_bytes);
	pipe->dp = big_alloc(pipe->dp_bytes);
	pipe->ctr_bytes =
	    (size_t)cfg->size * FLOW_WORKERS_MAX * sizeof(*pipe->ctr);
	pipe->ctr = big_alloc(pipe->ctr_bytes);
	pipe->free_idx = calloc(cfg->size, sizeof(*pipe->free_idx));
	if (!pipe->entries || !pipe->dp || !pipe->ctr || !pipe->free_idx)
		goto nomem;
	pipe->dp_used = cfg->monitor.meter.alg || cfg->monitor.shared_meter ||
			cfg->monitor.shared_counter;
	pipe->monitored =
	    pipe->dp_used || cfg->monitor.counter || cfg->monitor.aging_ms;
	for (uint32_t i = 0; i < cfg->size; i++)
		pipe->free_idx[i] = cfg->size - 1 - i;
	pipe->n_free = cfg->size;
	if (flow_actions_prepare(pipe, err) || monitor_pipe_create(pipe, err))
		goto fail;
	pipe->kind = table_kind_for(cfg->type);
	if (pipe->kind->create(pipe, err)) {
		pipe->kind = NULL;
		goto fail;
	}
	pipe->ct_entry.pipe = pipe;
	pipe->ct_entry.state = ENTRY_ACTIVE;
	if (dpflow_plan_pipe_build(ctx, pipe, &pipe->plan, err))
		goto fail;
	pipe->plan_entries_bytes =
	    (cfg->type == DPFLOW_PIPE_CT ? 1 : (size_t)cfg->size) *
	    sizeof(*pipe->plan_entries);
	pipe->plan_entries = big_alloc(pipe->plan_entries_bytes);
	if (!pipe->plan_entries)
		goto nomem;
	if (pipe->plan.has_entry_encap) {
		pipe->plan_encaps_bytes =
		    (size_t)cfg->size * sizeof(*pipe->plan_encaps);
		pipe->plan_encaps = big_alloc(pipe->plan_encaps_bytes);
		if (!pipe->plan_encaps)
			goto nomem;
	}
	ctx->pipes[ctx->n_pipes++] = pipe;
	if (cfg->root)
		ctx->ports[cfg->port].root = pipe;
	return pipe;
nomem:
	dpflow_error_set(err, ENOMEM, NULL, "out of memory");
fail:
	pipe_destroy(pipe);
	return NULL;
}

unsigned dpflow_pipe_entry_count(const struct dpflow_pipe *pipe)
{
	return pipe->n_active;
}

int dpflow_pipe_stats_get(const struct dpflow_pipe *pipe,
			  struct dpflow_pipe_stats *s)
{
	memset(s, 0, sizeof(*s));
	s->pkts = __atomic_load_n(&pipe->pkts, __ATOMIC_RELAXED);
	s->hits = __atomic_load_n(&pipe->hits, __ATOMIC_RELAXED);
	s->misses = __atomic_load_n(&pipe->misses, __ATOMIC_RELAXED);
	for (unsigned c = 0; c < 3; c++)
		s->color[c] =
		    __atomic_load_n(&pipe->color[c], __ATOMIC_RELAXED);
	if (pipe->cfg.type == DPFLOW_PIPE_CT) {
		struct dpflow_ct_stats cs;

		dpflow_ct_stats_get(pipe->images[0], &cs);
		s->ct_live = cs.live;
		s->ct_created = cs.stat[DPFLOW_CT_STAT_CREATED];
		s->ct_expired = cs.stat[DPFLOW_CT_STAT_EXPIRED];
		s->ct_replaced = cs.stat[DPFLOW_CT_STAT_REPLACED];
		s->ct_nat_exhausted = cs.stat[DPFLOW_CT_STAT_NAT_EXHAUSTED];
		s->ct_invalid =
		    __atomic_load_n(&pipe->ct_invalid, __ATOMIC_RELAXED);
		s->ct_refused =
		    __atomic_load_n(&pipe->ct_refused, __ATOMIC_RELAXED);
	}
	return 0;
}

void dpflow_ctx_drops(const struct dpflow_ctx *ctx, uint64_t *drops)
{
	for (unsigned d = 0; d < DPFLOW_DROP__COUNT; d++)
		drops[d] = __atomic_load_n(&ctx->drops[d], __ATOMIC_RELAXED);
}

unsigned dpflow_ctx_pipe_count(const struct dpflow_ctx *ctx)
{
	return ctx->n_pipes;
}

struct dpflow_pipe *dpflow_ctx_pipe(struct dpflow_ctx *ctx, unsigned i)
{
	return i < ctx->n_pipes ? ctx->pipes[i] : NULL;
}

uint32_t dpflow_pipe_size(const struct dpflow_pipe *pipe)
{
	return pipe->cfg.size;
}

const struct dpflow_entry *dpflow_pipe_entry(const struct dpflow_pipe *pipe,
					     uint32_t slot)
{
	if (slot >= pipe->cfg.size || pipe->entries[slot].state != ENTRY_ACTIVE)
		return NULL;
	return &pipe->entries[slot];
}

const struct dpflow_pipe_cfg *dpflow_pipe_cfg(const struct dpflow_pipe *pipe)
{
	return &pipe->cfg;
}

const struct dpflow_entry_cfg *dpflow_entry_cfg(const struct dpflow_entry *e)
{
	return &e->cfg;
}
