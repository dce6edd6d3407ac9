/*
 * The per-packet pipe walk, once, for both targets (DPF_HD: the common
 * subset of C11 and CUDA C++).
 *
 * A packet's visit of a pipe is made of these steps over the plan
 * (plan.h): start (the pipeline state of a received packet), the key and
 * the constant fields of the match template, the lookup of one key (the
 * GPU's; the CPU looks a burst's keys up in bulk through the table kind),
 * the entry's actions, the forwarding of a hit (per entry, by colour),
 * the forwarding's outcome (a next pipe, a port, an RSS queue, a handler
 * or a drop reason), and around the connection tracker of a CT pipe the
 * packet it tracks and the metadata it writes. The CPU pipeline
 * (pipeline.c) and the GPU kernels (lib/gpu/flow) call these and nothing
 * else to decide what happens to a packet; what they add is their own
 * scheduling (bursts of a pipe on the CPU, a thread a packet on the GPU)
 * and their own bookkeeping (counters, meters, mirror copies).
 */
#ifndef DPFLOW_FLOW_WALK_IMPL_H
#define DPFLOW_FLOW_WALK_IMPL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "dpflow/meta.h"
#include "flow/ct_impl.h"
#include "flow/field_impl.h"
#include "flow/flow_actions_impl.h"
#include "flow/hash_impl.h"
#include "flow/plan.h"
#include "flow/table_acl_impl.h"
#include "flow/table_exact_impl.h"
#include "flow/table_hash_impl.h"
#include "flow/table_lpm_impl.h"

#define WALK_MISS UINT32_MAX

/* Where a forwarding sends a packet (walk_fwd()). */
enum walk_to {
	WALK_TO_DROP = 0, /* dropped: the value is the reason */
	WALK_TO_PORT,	  /* out of port value */
	WALK_TO_PIPE,	  /* into pipe value */
	WALK_TO_RSS,	  /* onto software queue value */
	WALK_TO_HANDLER,  /* to the context's handler slot value */
};

/* A received packet's pipeline state starts clean. */
DPF_HD static inline void walk_pkt_start(struct dpflow_pkt_meta *m,
					 uint16_t port)
{
	m->port = port;
	m->queue = 0;
	m->rss_hash = 0;
	m->color = DPFLOW_COLOR_GREEN;
	m->ct_state = 0;
	m->ct_flags = 0;
	for (unsigned k = 0; k < DPFLOW_META_REGS; k++)
		m->reg[k] = 0;
}

/* Does the packet carry the template's constant field values? */
DPF_HD static inline bool walk_const_match(const struct dpflow_plan_pipe *p,
					   const uint8_t *frame,
					   const struct dpflow_pkt_meta *m)
{
	if (!p->n_const)
		return true;
	for (unsigned i = 0; i < p->n_fields; i++) {
		uint8_t v[16];

		if (p->per_entry[i])
			continue;
		dpflow_field_get(frame, m, p->field[i], v);
		for (unsigned b = 0; b < p->field_bytes[i]; b++)
			if ((v[b] ^ p->value[i][b]) & p->mask[i][b])
				return false;
	}
	return true;
}

/*
 * The per-entry key of the packet into @key (template masks applied).
 * Bytes past the fields are left as they are: tables read keys in whole
 * words, so the caller clears them (walk_key_clear()).
 */
DPF_HD static inline void walk_key_build(const struct dpflow_plan_pipe *p,
					 const uint8_t *frame,
					 const struct dpflow_pkt_meta *m,
					 uint8_t *key)
{
	for (unsigned i = 0; i < p->n_fields; i++) {
		uint8_t *k = key + p->field_off[i];

		if (!p->per_entry[i])
			continue;
		dpflow_field_get(frame, m, p->field[i], k);
		if (p->field_full[i])
			continue;
		for (unsigned b = 0; b < p->field_bytes[i]; b++)
			k[b] &= p->mask[i][b];
	}
}

/* Bytes of a key buffer the tables read: the key rounded up to words. */
DPF_HD static inline unsigned walk_key_span(const struct dpflow_plan_pipe *p)
{
	return (p->key_len + 7u) & ~7u;
}

DPF_HD static inline uint32_t walk_be_n(const uint8_t *k, unsigned bytes)
{
	uint32_t v = 0;

	for (unsigned i = 0; i < bytes; i++)
		v = v << 8 | k[i];
	return v;
}

/*
 * The entry the table image @image of pipe @p gives @key, or WALK_MISS:
 * one key (the GPU's lookup; the CPU's table kinds look up bursts with
 * the same *_impl.h code).
 */
DPF_HD static inline uint32_t walk_lookup_one(const struct dpflow_plan_pipe *p,
					      const void *image,
					      const uint8_t *key)
{
	switch (p->type) {
	case DPFLOW_PIPE_BASIC:
		return dpflow_exact_lookup_impl(
		    (const struct dpflow_exact_image *)image, key);
	case DPFLOW_PIPE_LPM:
		if (p->lpm_v6) /* the key is zero-padded to 16 bytes */
			return dpflow_lpm6_lookup_impl(
			    (const struct dpflow_lpm6_image *)image, key);
		return dpflow_lpm4_lookup_impl(
		    (const struct dpflow_lpm4_image *)image, walk_be_n(key, 4));
	case DPFLOW_PIPE_CONTROL:
	case DPFLOW_PIPE_ACL: {
		uint32_t words[DPFLOW_ACL_FIELDS_MAX];

		for (unsigned f = 0; f < p->acl_n; f++)
			words[f] =
			    walk_be_n(key + p->acl_off[f], p->acl_bytes[f]);
		return dpflow_acl_lookup_impl(
		    (const struct dpflow_acl_image *)image, words);
	}
	case DPFLOW_PIPE_HASH: /* plain or Maglev: the image has the count */
		return dpflow_hash_lookup_impl(
		    (const struct dpflow_hash_image *)image, key, p->key_len,
		    p->hash_seed);
	default:
		return WALK_MISS;
	}
}

/*
 * A lookup's answer @v for a packet: the entry, or WALK_MISS when the
 * table missed, the answer is out of range, or the packet's constant
 * fields differ.
 */
DPF_HD static inline uint32_t walk_hit(const struct dpflow_plan_pipe *p,
				       uint32_t v, const uint8_t *frame,
				       const struct dpflow_pkt_meta *m)
{
	if (v == WALK_MISS || v >= p->size || !walk_const_match(p, frame, m))
		return WALK_MISS;
	return v;
}

/*
 * Run entry @e's action template of pipe @p on the packet (metadata @m,
 * slot buffer @buf), from action *@pos; @entry_encap is the entry's own
 * encapsulation (a per-entry ENCAP) or NULL. Returns 0, a drop reason, or
 * FLOW_ACT_MIRROR with *@pos at a MIRROR action: the caller copies the
 * packet out of the action's port and calls again from *@pos + 1.
 */
DPF_HD static inline unsigned
walk_actions(const struct dpflow_plan_pipe *p,
	     const struct dpflow_plan_entry *e,
	     const struct dpflow_edit_encap *entry_encap,
	     struct dpflow_pkt_meta *m, uint8_t *buf, unsigned *pos)
{
	const struct dpflow_edit_encap *te[DPFLOW_ACTIONS_MAX];
	unsigned tn = e->tmpl;

	if (!p->n_action_tmpls)
		return 0;
	if (tn >= p->n_action_tmpls)
		return DPFLOW_DROP_EDIT_BAD_ACTION;
	for (unsigned a = 0; a < DPFLOW_ACTIONS_MAX; a++)
		te[a] = p->tmpl_encap_set[tn][a] ? &p->tmpl_encap[tn][a] : NULL;
	return flow_actions_run_impl(m, buf, &p->tmpl[tn],
				     (const uint8_t(*)[16])e->values, te,
				     e->has_encap ? entry_encap : NULL, pos);
}

/* The port of the MIRROR action at @pos of entry @e's template. */
DPF_HD static inline uint16_t
walk_mirror_port(const struct dpflow_plan_pipe *p,
		 const struct dpflow_plan_entry *e, unsigned pos)
{
	return p->tmpl[e->tmpl].a[pos].port;
}

/*
 * The forwarding of a hit of entry @e with colour @color: *@f, or false
 * with *@reason when the packet is dropped as red.
 */
DPF_HD static inline bool walk_hit_fwd(const struct dpflow_plan_pipe *p,
				       const struct dpflow_plan_entry *e,
				       unsigned color,
				       struct dpflow_plan_fwd *f,
				       uint16_t *reason)
{
	*f = p->fwd.kind == PLAN_FWD_PER_ENTRY ? e->fwd : p->fwd;
	if (color == DPFLOW_COLOR_GREEN)
		return true;
	if (color == DPFLOW_COLOR_YELLOW) {
		if (p->yellow_set)
			*f = p->yellow;
		return true;
	}
	if (!p->red_set || p->red.kind == PLAN_FWD_DROP) {
		*reason = DPFLOW_DROP_FLOW_METER_RED;
		return false;
	}
	*f = p->red;
	return true;
}

/*
 * Where forwarding @f (@miss: a pipe's miss forwarding) sends the packet:
 * returns enum walk_to with *@value the port, pipe, queue, handler slot or
 * drop reason. RSS sets meta.rss_hash and meta.queue: a NIC's 128-entry
 * redirection table filled round robin, the hash's low 7 bits pick the
 * entry.
 */
DPF_HD static inline unsigned walk_fwd(const struct dpflow_plan_fwd *f,
				       bool miss, struct dpflow_pkt_meta *m,
				       uint16_t *value)
{
	switch (f->kind) {
	case PLAN_FWD_PORT:
		*value = f->target;
		return WALK_TO_PORT;
	case PLAN_FWD_PIPE:
		*value = f->target;
		return WALK_TO_PIPE;
	case PLAN_FWD_RSS: {
		const struct dpflow_hdr *h =
		    f->rss_inner && m->tun_type ? &m->inner : &m->outer;

		m->rss_hash = dpflow_rss_hash_hdr(h);
		m->queue =
		    (uint16_t)(f->target +
			       (m->rss_hash & 127) % (f->rss_n ? f->rss_n : 1));
		*value = m->queue;
		return WALK_TO_RSS;
	}
	case PLAN_FWD_HANDLER:
		*value = f->target;
		return WALK_TO_HANDLER;
	default:
		*value = (uint16_t)(miss ? DPFLOW_DROP_FLOW_MISS_DROP
					 : DPFLOW_DROP_FLOW_FWD_DROP);
		return WALK_TO_DROP;
	}
}

/*
 * CT pipe @p, before its tracker: clears meta.ct_state and ct_flags and
 * fills the tracked packet @cp and the user value a new connection takes
 * (*@user_new). False when the packet cannot be tracked (constant fields
 * differ, not IP, a later fragment): it takes the miss forwarding.
 */
DPF_HD static inline bool walk_ct_begin(const struct dpflow_plan_pipe *p,
					const uint8_t *frame,
					struct dpflow_pkt_meta *m,
					struct dpflow_ct_pkt *cp,
					uint32_t *user_new)
{
	const struct dpflow_hdr *h =
	    p->ct_inner && m->tun_type ? &m->inner : &m->outer;

	m->ct_state = 0;
	m->ct_flags = 0;
	if (!walk_const_match(p, frame, m) || !dpflow_ct_pkt_from_hdr(h, cp))
		return false;
	*user_new = p->ct_user ? m->reg[p->ct_user_reg & 3] : 0;
	return true;
}

/*
 * The destination a new connection of family @family takes from the DNAT
 * table pipe @t (its image @image and plan entries @entries): the entry
 * the value @reg hits, its nat_dst_ip and nat_dst_port values, into
 * @init. False when there is none (no entry, no nat_dst_ip action, or an
 * address of the other family).
 */
DPF_HD static inline bool walk_ct_dnat(const struct dpflow_plan_pipe *t,
				       const void *image,
				       const struct dpflow_plan_entry *entries,
				       uint32_t reg, unsigned family,
				       struct dpflow_ct_value *init)
{
	const struct dpflow_action_tmpl *tm;
	const struct dpflow_plan_entry *e;
	uint8_t key[DPFLOW_KEY_MAX]; /* the table reads whole words */
	uint32_t v;
	bool addr = false;

	memset(key, 0, sizeof(key));
	key[0] = (uint8_t)(reg >> 24);
	key[1] = (uint8_t)(reg >> 16);
	key[2] = (uint8_t)(reg >> 8);
	key[3] = (uint8_t)reg;
	v = dpflow_exact_lookup_impl((const struct dpflow_exact_image *)image,
				     key);

	if (v == WALK_MISS || v >= t->size)
		return false;
	e = &entries[v];
	if (e->tmpl >= t->n_action_tmpls)
		return false;
	tm = &t->tmpl[e->tmpl];
	for (unsigned i = 0; i < tm->n && i < DPFLOW_ACTIONS_MAX; i++) {
		const struct dpflow_action *a = &tm->a[i];
		const uint8_t *val = a->per_entry ? e->values[i] : a->value;
		bool mapped;

		if (a->kind == DPFLOW_ACT_NAT_DST_PORT) {
			init->nat_dport = (uint16_t)(val[0] << 8 | val[1]);
			continue;
		}
		if (a->kind != DPFLOW_ACT_NAT_DST_IP)
			continue;
		mapped = flow_act_addr_is_v4(val);
		if (mapped != (family == 4))
			return false;
		memset(init->nat_dst, 0, 16);
		memcpy(init->nat_dst, mapped ? val + 12 : val, mapped ? 4 : 16);
		addr = true;
	}
	if (addr)
		init->flags |= DPFLOW_CT_VAL_DNAT;
	return addr;
}

/* The DNAT table of a CT pipe, as a target binds it (walk_ct_init()). */
struct walk_ct_dnat_table {
	const struct dpflow_plan_pipe *pipe; /* NULL: the pipe has none */
	const void *image;
	const struct dpflow_plan_entry *entries;
};

/*
 * CT pipe @p, before its tracker: the value block a connection the packet
 * opens takes (its saved registers; source NAT from the pool of its
 * family; destination NAT from @dt by its register), in @init. Returns
 * @init, or NULL when the pipe keeps no values (the tracker then writes
 * none). A packet without a DNAT target gets DPFLOW_CT_VAL_NO_OPEN.
 */
DPF_HD static inline const struct dpflow_ct_value *
walk_ct_init(const struct dpflow_plan_pipe *p,
	     const struct walk_ct_dnat_table *dt,
	     const struct dpflow_pkt_meta *m, const struct dpflow_ct_pkt *cp,
	     struct dpflow_ct_value *init)
{
	unsigned pool;

	if (!p->ct_values)
		return NULL;
	memset(init, 0, sizeof(*init));
	init->pool = DPFLOW_CT_POOL_NONE;
	for (unsigned r = 0; r < DPFLOW_CT_VAL_REGS; r++)
		if (p->ct_save_regs & (1u << r)) {
			init->flags |= (uint16_t)DPFLOW_CT_VAL_REG(r);
			init->reg[r] = m->reg[r];
		}
	pool = p->ct_pool[cp->family == 6];
	if (pool != DPFLOW_CT_POOL_NONE) {
		init->flags |= DPFLOW_CT_VAL_SNAT | DPFLOW_CT_VAL_POOL;
		init->pool = (uint8_t)pool;
	}
	if (p->ct_open && !m->reg[(p->ct_open - 1) & 3])
		init->flags |= DPFLOW_CT_VAL_NO_OPEN;
	init->nat_dport = cp->dport; /* no nat_dst_port action: kept */
	if (p->ct_dnat &&
	    (!dt->pipe ||
	     !walk_ct_dnat(dt->pipe, dt->image, dt->entries,
			   m->reg[p->ct_dnat_reg & 3], cp->family, init)))
		init->flags |= DPFLOW_CT_VAL_NO_OPEN;
	return init;
}

/* Rewrite the address (@family's bytes of @addr) and, for a protocol with
 * ports, the port at end @end (DPFLOW_EDIT_SRC or _DST) of the packet. */
DPF_HD static inline unsigned
walk_ct_rewrite(struct dpflow_pkt_meta *m, uint8_t *buf, unsigned end,
		unsigned family, const uint8_t *addr, uint16_t port, bool ports)
{
	unsigned r = family == 6 ? dpflow_edit_set_ipv6_impl(m, buf, end, addr)
				 : dpflow_edit_set_ipv4_impl(m, buf, end, addr);

	if (!r && ports)
		r = dpflow_edit_set_port_impl(m, buf, end, port);
	return r;
}

/*
 * CT pipe @p, a tracked packet of connection @r whose value block is @v
 * (dpflow_ct_reply_targets_impl() done): its saved registers back into the
 * metadata, and the connection's NAT applied. A packet from the initiator takes
 * the translated source (and destination); a reply the other way: its
 * destination becomes the initiator's source, its source the initiator's
 * destination. Returns 0 or a drop reason.
 */
DPF_HD static inline unsigned walk_ct_values(const struct dpflow_plan_pipe *p,
					     struct dpflow_pkt_meta *m,
					     uint8_t *buf,
					     const struct dpflow_ct_result *r,
					     const struct dpflow_ct_value *v)
{
	unsigned fam = m->outer.l3_type == DPFLOW_L3_IPV6 ? 6 : 4, rc = 0;
	bool ports = m->outer.l4_type == DPFLOW_L4_TCP ||
		     m->outer.l4_type == DPFLOW_L4_UDP ||
		     m->outer.l4_type == DPFLOW_L4_SCTP;
	bool reply = r->dir == DPFLOW_CT_DIR_REPLY;

	for (unsigned i = 0; i < DPFLOW_CT_VAL_REGS; i++)
		if ((p->ct_save_regs & (1u << i)) &&
		    (v->flags & DPFLOW_CT_VAL_REG(i)))
			m->reg[i] = v->reg[i];
	if (!(v->flags & (DPFLOW_CT_VAL_SNAT | DPFLOW_CT_VAL_DNAT)))
		return 0;
	if (v->reserved0 == DPFLOW_CT_VAL_LOST)
		return DPFLOW_DROP_FLOW_CT_NAT_LOST;
	if (v->flags & DPFLOW_CT_VAL_SNAT)
		rc = walk_ct_rewrite(m, buf,
				     reply ? DPFLOW_EDIT_DST : DPFLOW_EDIT_SRC,
				     fam, v->nat_src, v->nat_sport, ports);
	if (!rc && (v->flags & DPFLOW_CT_VAL_DNAT))
		rc = walk_ct_rewrite(m, buf,
				     reply ? DPFLOW_EDIT_SRC : DPFLOW_EDIT_DST,
				     fam, v->nat_dst, v->nat_dport, ports);
	return rc;
}

/* What a CT pipe's tracker said of a packet (walk_ct_end()). */
enum walk_ct_outcome {
	WALK_CT_TRACKED = 0, /* actions, then the pipe's forwarding */
	WALK_CT_NOCONN,	     /* no connection (refused): miss forwarding */
	WALK_CT_INVALID,     /* the state machine said invalid: miss */
};

/*
 * CT pipe @p, after its tracker said @r: meta.ct_state, ct_flags and the
 * user register. Returns enum walk_ct_outcome.
 */
DPF_HD static inline unsigned walk_ct_end(const struct dpflow_plan_pipe *p,
					  struct dpflow_pkt_meta *m,
					  const struct dpflow_ct_result *r)
{
	if (r->conn == DPFLOW_TABLE_MISS) {
		m->ct_state = 0;
		return WALK_CT_NOCONN;
	}
	m->ct_state = r->state;
	if (r->flags & DPFLOW_CT_R_INVALID)
		return WALK_CT_INVALID;
	m->ct_flags =
	    (uint8_t)((r->flags & DPFLOW_CT_R_NEW ? DPFLOW_META_CT_NEW : 0) |
		      (r->dir == DPFLOW_CT_DIR_REPLY ? DPFLOW_META_CT_REPLY
						     : 0) |
		      (r->flags & DPFLOW_CT_R_IGNORED ? DPFLOW_META_CT_IGNORED
						      : 0) |
		      (r->flags & DPFLOW_CT_R_REOPEN ? DPFLOW_META_CT_REOPEN
						     : 0));
	if (p->ct_user)
		m->reg[p->ct_user_reg & 3] = r->user;
	return WALK_CT_TRACKED;
}

#endif /* DPFLOW_FLOW_WALK_IMPL_H */
