/*
 * The gateway: its pipes (natgw.h draws them), its counters read from
 * those pipes, and what the app's ops print. Public headers only.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/config_node.h"
#include "dpflow/field.h"
#include "dpflow/flow.h"
#include "dpflow/meta.h"
#include "dpflow/metrics.h"

#include "natgw.h"

enum {
	P_INSIDE,  /* root of the inside port */
	P_OUTSIDE, /* root of the outside port */
	P_CONN,	   /* the ct pipe both share */
	P_FWD,	   /* where a tracked packet goes */
	P__COUNT,
};

static const char *const pipe_names[P__COUNT] = {
    [P_INSIDE] = "natgw_inside",
    [P_OUTSIDE] = "natgw_outside",
    [P_CONN] = "natgw_conn",
    [P_FWD] = "natgw_fwd",
};

struct natgw {
	struct dpflow_ctx *ctx;
	struct dpflow_pipe *pipe[P__COUNT];
	struct dpflow_entry *to_outside, *to_inside; /* natgw_fwd's entries */
	struct natgw_cfg cfg;
};

static const char *const drop_names[] = {
#define NATGW_DROP_NAME_(id, name, help) name,
    NATGW_FOREACH_DROP(NATGW_DROP_NAME_)
#undef NATGW_DROP_NAME_
};
/* The HELP of dpflow_natgw_dropped_total: each reason and what it means. */
static const char drop_help[] = "packets the gateway dropped, by reason:"
#define NATGW_DROP_HELP_(id, name, help) " " name ": " help ";"
    NATGW_FOREACH_DROP(NATGW_DROP_HELP_)
#undef NATGW_DROP_HELP_
	" (see tests/app/natgw/README.md)";
DPFLOW_STATIC_ASSERT(DPFLOW_ARRAY_SIZE(drop_names) == NATGW_DROP__COUNT,
		     "a name for every drop reason");

/* ---- the pipes ------------------------------------------------------- */

/* Append field @f to template @t: per-entry, or the constant @value (its
 * big-endian bytes); @mask NULL: all ones. */
static void tmpl_field(struct dpflow_match_tmpl *t, uint16_t f, bool per_entry,
		       const uint8_t *value, const uint8_t *mask)
{
	struct dpflow_match_field *m = &t->f[t->n++];
	unsigned bytes = dpflow_field_bytes(f);

	memset(m, 0, sizeof(*m));
	m->field = f;
	m->per_entry = per_entry;
	if (value)
		memcpy(m->value, value, bytes);
	if (mask)
		memcpy(m->mask, mask, bytes);
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* The pipe configuration of pipe @which. */
static void pipe_cfg(const struct natgw *gw, unsigned which,
		     struct dpflow_pipe_cfg *pc)
{
	const struct natgw_cfg *c = &gw->cfg;
	static const uint8_t reply[1] = {DPFLOW_META_CT_REPLY};
	uint8_t one[4];
	struct dpflow_action *a;

	put_be32(one, 1);
	memset(pc, 0, sizeof(*pc));
	pc->name = pipe_names[which];
	pc->miss_fwd.kind = DPFLOW_FWD_DROP;
	switch (which) {
	case P_INSIDE:
		/* the inside prefixes mark the packet: opened from inside */
		pc->type = DPFLOW_PIPE_LPM;
		pc->root = true;
		pc->port = c->inside_port;
		pc->size = c->n_prefixes;
		tmpl_field(&pc->match, DPFLOW_FIELD_OUTER_IPV4_SRC, true, NULL,
			   NULL);
		pc->n_action_tmpls = 1;
		pc->actions[0].n = 1;
		a = &pc->actions[0].a[0];
		a->kind = DPFLOW_ACT_SET_FIELD;
		a->field = DPFLOW_FIELD_META_REG0 + NATGW_MARK_REG;
		memcpy(a->value, one, 4);
		pc->fwd.kind = DPFLOW_FWD_PIPE;
		pc->fwd.pipe = gw->pipe[P_CONN];
		break;
	case P_OUTSIDE:
		/* only what may answer a binding: to a pool address */
		pc->type = DPFLOW_PIPE_BASIC;
		pc->root = true;
		pc->port = c->outside_port;
		pc->size = c->n_addrs;
		tmpl_field(&pc->match, DPFLOW_FIELD_OUTER_IPV4_DST, true, NULL,
			   NULL);
		pc->fwd.kind = DPFLOW_FWD_PIPE;
		pc->fwd.pipe = gw->pipe[P_CONN];
		break;
	case P_CONN:
		pc->type = DPFLOW_PIPE_CT;
		pc->size = c->connections;
		/* only a SYN opens a TCP connection: an inside mid-stream
		 * packet (its connection expired) must not open an
		 * established one (5 days) */
		pc->ct.tcp_strict = true;
		pc->ct.replace = true;
		pc->ct.save_regs = 1u << NATGW_MARK_REG;
		/* only the inside opens: a packet from outside is tracked
		 * against the connections there are, and one of none takes
		 * the miss (no_connection) with no slot or binding taken */
		pc->ct.opens = true;
		pc->ct.open_reg = NATGW_MARK_REG;
		pc->ct.snat.n_addrs = (uint8_t)c->n_addrs;
		for (unsigned i = 0; i < c->n_addrs; i++) {
			pc->ct.snat.family[i] = 4;
			memcpy(pc->ct.snat.addr[i], c->addr[i], 4);
		}
		pc->ct.snat.port_lo = c->port_lo;
		pc->ct.snat.port_hi = c->port_hi;
		pc->fwd.kind = DPFLOW_FWD_PIPE;
		pc->fwd.pipe = gw->pipe[P_FWD];
		break;
	case P_FWD:
		/* meta.reg1 == 1: the inside opened the connection; then by
		 * the port it came in on and whether it is a reply */
		pc->type = DPFLOW_PIPE_BASIC;
		pc->size = 2;
		tmpl_field(&pc->match, DPFLOW_FIELD_META_PORT, true, NULL,
			   NULL);
		tmpl_field(&pc->match, DPFLOW_FIELD_META_REG0 + NATGW_MARK_REG,
			   false, one, NULL);
		tmpl_field(&pc->match, DPFLOW_FIELD_META_CT_FLAGS, true, NULL,
			   reply);
		pc->monitor.counter = true;
		pc->fwd.kind = DPFLOW_FWD_PER_ENTRY;
		break;
	}
}

/* "pipe 'P': MESSAGE (FIELD)" at the section, from the engine's error. */
static int engine_error(const struct dpflow_cfg_node *section, const char *what,
			const struct dpflow_error *e)
{
	return dpflow_cfg_error(section, e->code ? e->code : EINVAL,
				"%s: %s%s%s%s", what, e->msg,
				e->field ? " (" : "", e->field ? e->field : "",
				e->field ? ")" : "");
}

/* The pipes' names are free and neither port has a root pipe yet. */
static int check_room(struct dpflow_ctx *ctx, const struct natgw_cfg *c,
		      const struct dpflow_cfg_node *section)
{
	static const char *const port_keys[2] = {"inside_port", "outside_port"};
	const uint16_t ports[2] = {c->inside_port, c->outside_port};
	struct dpflow_cfg_node x;

	for (unsigned p = 0; p < P__COUNT; p++)
		if (dpflow_pipe_find(ctx, pipe_names[p]))
			return dpflow_cfg_error(section, EEXIST,
						"a pipe named '%s' exists: "
						"the gateway names its pipes "
						"natgw_*",
						pipe_names[p]);
	for (unsigned i = 0; i < dpflow_ctx_pipe_count(ctx); i++) {
		struct dpflow_pipe *pipe = dpflow_ctx_pipe(ctx, i);
		const struct dpflow_pipe_cfg *pc = dpflow_pipe_cfg(pipe);

		for (unsigned k = 0; k < 2; k++)
			if (pc->root && pc->port == ports[k]) {
				dpflow_cfg_get(section, port_keys[k], &x);
				return dpflow_cfg_error(
				    &x, EBUSY,
				    "port '%s' has a root pipe already ('%s'); "
				    "the gateway's pipes take its packets",
				    dpflow_ctx_port_name(ctx, ports[k]),
				    dpflow_pipe_name(pipe));
			}
	}
	return 0;
}

/* natgw_inside's prefixes, natgw_outside's addresses and natgw_fwd's two
 * entries, as one batch. */
static int add_entries(struct natgw *gw, const struct dpflow_cfg_node *section)
{
	const struct natgw_cfg *c = &gw->cfg;
	struct dpflow_error e = {0};
	struct dpflow_entry_cfg ec;
	struct dpflow_queue *q = dpflow_queue_create(gw->ctx, &e);
	int rc = 0;

	if (!q)
		return engine_error(section, "entries", &e);
	for (unsigned i = 0; !rc && i < c->n_prefixes; i++) {
		memset(&ec, 0, sizeof(ec));
		memcpy(ec.key, c->prefix[i].addr, 4);
		ec.prefix_len = c->prefix[i].len;
		if (!dpflow_entry_add(q, gw->pipe[P_INSIDE], &ec, NULL, &e))
			rc = -ENOSPC;
	}
	for (unsigned i = 0; !rc && i < c->n_addrs; i++) {
		memset(&ec, 0, sizeof(ec));
		memcpy(ec.key, c->addr[i], 4);
		if (!dpflow_entry_add(q, gw->pipe[P_OUTSIDE], &ec, NULL, &e))
			rc = -ENOSPC;
	}
	/* key: meta.port (2 bytes), meta.ct_flags & REPLY (1 byte) */
	memset(&ec, 0, sizeof(ec));
	ec.key[1] = (uint8_t)c->inside_port;
	ec.key[0] = (uint8_t)(c->inside_port >> 8);
	ec.fwd.kind = DPFLOW_FWD_PORT;
	ec.fwd.port = c->outside_port;
	if (!rc) {
		gw->to_outside =
		    dpflow_entry_add(q, gw->pipe[P_FWD], &ec, NULL, &e);
		rc = gw->to_outside ? 0 : -ENOSPC;
	}
	ec.key[1] = (uint8_t)c->outside_port;
	ec.key[0] = (uint8_t)(c->outside_port >> 8);
	ec.key[2] = DPFLOW_META_CT_REPLY;
	ec.fwd.port = c->inside_port;
	if (!rc) {
		gw->to_inside =
		    dpflow_entry_add(q, gw->pipe[P_FWD], &ec, NULL, &e);
		rc = gw->to_inside ? 0 : -ENOSPC;
	}
	if (!rc)
		rc = dpflow_entries_process(q, NULL, &e);
	else
		dpflow_queue_discard(q);
	dpflow_queue_destroy(q);
	return rc ? engine_error(section, "entries", &e) : 0;
}

struct natgw *natgw_create(struct dpflow_ctx *ctx, const struct natgw_cfg *cfg,
			   const struct dpflow_cfg_node *section)
{
	/* downstream first: a pipe's forwarding names pipes that exist */
	static const unsigned order[P__COUNT] = {P_FWD, P_CONN, P_INSIDE,
						 P_OUTSIDE};
	struct natgw *gw;

	if (check_room(ctx, cfg, section))
		return NULL;
	gw = calloc(1, sizeof(*gw));
	if (!gw) {
		dpflow_cfg_error(section, ENOMEM, "out of memory");
		return NULL;
	}
	gw->ctx = ctx;
	gw->cfg = *cfg;
	for (unsigned i = 0; i < P__COUNT; i++) {
		struct dpflow_pipe_cfg pc;
		struct dpflow_error e = {0};
		char what[64];
		unsigned p = order[i];

		pipe_cfg(gw, p, &pc);
		gw->pipe[p] = dpflow_pipe_create(ctx, &pc, &e);
		if (!gw->pipe[p]) {
			snprintf(what, sizeof(what), "pipe '%s'",
				 pipe_names[p]);
			engine_error(section, what, &e);
			goto err;
		}
	}
	if (add_entries(gw, section))
		goto err;
	return gw;
err:
	free(gw);
	return NULL;
}

void natgw_destroy(struct natgw *gw)
{
	free(gw);
}

const struct natgw_cfg *natgw_cfg(const struct natgw *gw)
{
	return &gw->cfg;
}

/* ---- counters ---------------------------------------------------------- */

void natgw_stats_get(const struct natgw *gw, struct natgw_stats *s)
{
	static const unsigned miss_of[] = {
	    [NATGW_DROP_NOT_INSIDE] = P_INSIDE,
	    [NATGW_DROP_NOT_TO_POOL] = P_OUTSIDE,
	    [NATGW_DROP_NO_CONNECTION] = P_CONN,
	    [NATGW_DROP_NOT_FROM_INSIDE] = P_FWD,
	};
	struct dpflow_pipe_stats ps[P__COUNT];
	struct dpflow_counter out = {0, 0}, in = {0, 0};
	uint64_t known = 0, entered;

	memset(s, 0, sizeof(*s));
	/* downstream first: a packet is counted by the pipes it leaves
	 * before those it reaches, so that under traffic dropped never
	 * counts a packet that left */
	dpflow_entry_counter(gw->to_outside, &out);
	dpflow_entry_counter(gw->to_inside, &in);
	for (unsigned p = P__COUNT; p-- > 0;)
		dpflow_pipe_stats_get(gw->pipe[p], &ps[p]);
	s->conn_live = ps[P_CONN].ct_live;
	s->conn_created = ps[P_CONN].ct_created;
	s->conn_expired = ps[P_CONN].ct_expired;
	s->conn_replaced = ps[P_CONN].ct_replaced;
	s->nat_exhausted = ps[P_CONN].ct_nat_exhausted;
	s->pkts_out = out.pkts;
	s->pkts_in = in.pkts;
	entered = ps[P_INSIDE].pkts + ps[P_OUTSIDE].pkts;
	s->dropped =
	    entered > out.pkts + in.pkts ? entered - out.pkts - in.pkts : 0;
	for (unsigned d = 0; d < DPFLOW_ARRAY_SIZE(miss_of); d++) {
		s->drop[d] = ps[miss_of[d]].misses;
		known += s->drop[d];
	}
	s->drop[NATGW_DROP_OTHER] = s->dropped > known ? s->dropped - known : 0;
}

/* ---- what the ops print ------------------------------------------------ */

static void put_ipv4(FILE *out, const uint8_t a[4])
{
	fprintf(out, "%u.%u.%u.%u", a[0], a[1], a[2], a[3]);
}

void natgw_describe(const struct natgw *gw, FILE *out)
{
	const struct natgw_cfg *c = &gw->cfg;

	fprintf(out, "    inside port %s, outside port %s\n",
		dpflow_ctx_port_name(gw->ctx, c->inside_port),
		dpflow_ctx_port_name(gw->ctx, c->outside_port));
	fprintf(out, "    inside");
	for (unsigned i = 0; i < c->n_prefixes; i++) {
		fputs(i ? ", " : " ", out);
		put_ipv4(out, c->prefix[i].addr);
		fprintf(out, "/%u", c->prefix[i].len);
	}
	fprintf(out, "\n    pool");
	for (unsigned i = 0; i < c->n_addrs; i++) {
		fputs(i ? ", " : " ", out);
		put_ipv4(out, c->addr[i]);
	}
	fprintf(out, " ports %u-%u\n", c->port_lo, c->port_hi);
	fprintf(out, "    connections %" PRIu32 "\n", c->connections);
	fprintf(out,
		"    pipes %s (lpm, root of %s), %s (basic, root of %s), %s "
		"(ct), %s (basic)\n",
		pipe_names[P_INSIDE],
		dpflow_ctx_port_name(gw->ctx, c->inside_port),
		pipe_names[P_OUTSIDE],
		dpflow_ctx_port_name(gw->ctx, c->outside_port),
		pipe_names[P_CONN], pipe_names[P_FWD]);
}

void natgw_banner(const struct natgw *gw, FILE *out)
{
	const struct natgw_cfg *c = &gw->cfg;

	fprintf(out, "%s -> %s, %u pool address%s, ports %u-%u",
		dpflow_ctx_port_name(gw->ctx, c->inside_port),
		dpflow_ctx_port_name(gw->ctx, c->outside_port), c->n_addrs,
		c->n_addrs == 1 ? "" : "es", c->port_lo, c->port_hi);
}

void natgw_report(const struct natgw *gw, FILE *out)
{
	struct natgw_stats s;

	natgw_stats_get(gw, &s);
	fprintf(out,
		"natgw connections: live %" PRIu64 ", created %" PRIu64
		", expired %" PRIu64 ", replaced %" PRIu64
		", nat_exhausted %" PRIu64 "\n",
		s.conn_live, s.conn_created, s.conn_expired, s.conn_replaced,
		s.nat_exhausted);
	fprintf(out,
		"natgw packets: out %" PRIu64 ", in %" PRIu64
		", dropped %" PRIu64 " (",
		s.pkts_out, s.pkts_in, s.dropped);
	for (unsigned d = 0; d < NATGW_DROP__COUNT; d++)
		fprintf(out, "%s%s %" PRIu64, d ? ", " : "", drop_names[d],
			s.drop[d]);
	fprintf(out, ")\n");
}

void natgw_metrics(const struct natgw *gw, FILE *out)
{
	static const char *const events[] = {"created", "expired", "replaced",
					     "nat_exhausted"};
	struct natgw_stats s;
	uint64_t ev[DPFLOW_ARRAY_SIZE(events)];

	natgw_stats_get(gw, &s);
	ev[0] = s.conn_created;
	ev[1] = s.conn_expired;
	ev[2] = s.conn_replaced;
	ev[3] = s.nat_exhausted;
	dpflow_metrics_put_help(out, "dpflow_natgw_connections", "gauge",
				"connections the gateway tracks");
	fprintf(out, "dpflow_natgw_connections %" PRIu64 "\n", s.conn_live);
	dpflow_metrics_put_help(
	    out, "dpflow_natgw_connection_events_total", "counter",
	    "connections created, expired, replaced (room for a new one), "
	    "and new ones refused for want of a free binding (nat_exhausted, "
	    "each packet that asked)");
	for (unsigned i = 0; i < DPFLOW_ARRAY_SIZE(ev); i++)
		fprintf(out,
			"dpflow_natgw_connection_events_total{event=\"%s\"} "
			"%" PRIu64 "\n",
			events[i], ev[i]);
	dpflow_metrics_put_help(out, "dpflow_natgw_packets_total", "counter",
				"packets translated: dir out (inside to "
				"outside) or in (replies, translated back)");
	fprintf(out, "dpflow_natgw_packets_total{dir=\"out\"} %" PRIu64 "\n",
		s.pkts_out);
	fprintf(out, "dpflow_natgw_packets_total{dir=\"in\"} %" PRIu64 "\n",
		s.pkts_in);
	dpflow_metrics_put_help(out, "dpflow_natgw_dropped_total", "counter",
				drop_help);
	for (unsigned d = 0; d < NATGW_DROP__COUNT; d++)
		fprintf(out,
			"dpflow_natgw_dropped_total{reason=\"%s\"} %" PRIu64
			"\n",
			drop_names[d], s.drop[d]);
}

/* ---- control requests -------------------------------------------------- */

static json_t *stats_json(const struct natgw *gw)
{
	struct natgw_stats s;
	json_t *drops = json_object();

	natgw_stats_get(gw, &s);
	for (unsigned d = 0; d < NATGW_DROP__COUNT; d++)
		json_object_set_new(drops, drop_names[d],
				    json_integer((json_int_t)s.drop[d]));
	return json_pack(
	    "{s:b,s:{s:I,s:I,s:I,s:I,s:I},s:{s:I,s:I,s:I},s:o}", "ok", 1,
	    "connections", "live", (json_int_t)s.conn_live, "created",
	    (json_int_t)s.conn_created, "expired", (json_int_t)s.conn_expired,
	    "replaced", (json_int_t)s.conn_replaced, "nat_exhausted",
	    (json_int_t)s.nat_exhausted, "packets", "out",
	    (json_int_t)s.pkts_out, "in", (json_int_t)s.pkts_in, "dropped",
	    (json_int_t)s.dropped, "dropped_by", drops);
}

char *natgw_request(const struct natgw *gw, const char *cmd, const char *req,
		    size_t len)
{
	json_t *in = json_loadb(req, len, 0, NULL), *out, *id;
	char *text;

	if (!in)
		return NULL;
	if (!strcmp(cmd, "natgw.stats")) {
		out = stats_json(gw);
	} else {
		char msg[160];

		snprintf(msg, sizeof(msg), "unknown cmd '%.64s' (natgw.stats)",
			 cmd);
		out = json_pack("{s:b,s:s,s:s}", "ok", 0, "error", msg, "field",
				"cmd");
	}
	id = json_object_get(in, "id");
	if (out && id)
		json_object_set(out, "id", id);
	text = out ? json_dumps(out, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	json_decref(out);
	json_decref(in);
	return text;
}
