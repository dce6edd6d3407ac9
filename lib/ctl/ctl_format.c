/*
 * Pipes and entries written back in config syntax (docs/config.md), so
 * that what `entries.list` prints can be added again; the pipe graph as
 * text and as Graphviz dot; the canonical form of an entry's match used to
 * find it for removal. Control thread only.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/meta.h"
#include "dpflow/port.h"

#include "ctl/ctl_internal.h"
#include "ctl/field_value.h"

static uint64_t get_be(const uint8_t *b, unsigned bytes)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < bytes && i < 8; i++)
		v = v << 8 | b[i];
	return v;
}

/* Leading one bits of @m, or -1 when the mask is not a prefix. */
static int prefix_of(const uint8_t *m, unsigned bytes)
{
	unsigned len = 0, b = 0;

	while (b < bytes && m[b] == 0xff) {
		len += 8;
		b++;
	}
	if (b < bytes) {
		uint8_t x = m[b];

		while (x & 0x80) {
			len++;
			x = (uint8_t)(x << 1);
		}
		if (x)
			return -1;
		for (b++; b < bytes; b++)
			if (m[b])
				return -1;
	}
	return (int)len;
}

static void mac_str(const uint8_t *v, char *buf, size_t len)
{
	snprintf(buf, len, "%02x:%02x:%02x:%02x:%02x:%02x", v[0], v[1], v[2],
		 v[3], v[4], v[5]);
}

void ctl_value_str(unsigned field, const uint8_t *value, const uint8_t *mask,
		   char *buf, size_t len)
{
	unsigned bits = dpflow_field_bits(field);
	unsigned bytes = dpflow_field_bytes(field);
	uint64_t max = bits >= 64 ? UINT64_MAX : (1ull << bits) - 1;

	if (bits == 48) {
		mac_str(value, buf, len);
		return;
	}
	if ((field == DPFLOW_FIELD_OUTER_ETH_TYPE ||
	     field == DPFLOW_FIELD_INNER_ETH_TYPE) &&
	    (!mask || get_be(mask, bytes) == max)) {
		/* an ethertype reads as one: 0x0800 */
		snprintf(buf, len, "0x%04llx",
			 (unsigned long long)get_be(value, bytes));
		return;
	}
	if (dpflow_field_is_addr(field)) {
		char a[INET6_ADDRSTRLEN];
		int p = mask ? prefix_of(mask, bytes) : (int)bits;

		inet_ntop(bits == 32 ? AF_INET : AF_INET6, value, a, sizeof(a));
		if (p < 0 || p == (int)bits)
			snprintf(buf, len, "%s", a);
		else
			snprintf(buf, len, "%s/%d", a, p);
		return;
	}
	{
		uint64_t v = get_be(value, bytes) & max;
		uint64_t m = mask ? get_be(mask, bytes) & max : max;

		if (m == max)
			snprintf(buf, len, "%llu", (unsigned long long)v);
		else
			snprintf(buf, len, "0x%llx/0x%llx",
				 (unsigned long long)(v & m),
				 (unsigned long long)m);
	}
}

/* A number for plain decimal text, else the string. */
static json_t *value_json(const char *s)
{
	size_t n = strspn(s, "0123456789");

	if (n && !s[n] && n < 19)
		return json_integer((json_int_t)strtoll(s, NULL, 10));
	return json_string(s);
}

json_t *ctl_fwd_json(struct dpflow_ctx *ctx, const struct dpflow_fwd *f)
{
	const char *name;

	switch (f->kind) {
	case DPFLOW_FWD_PORT:
		name = dpflow_ctx_port_name(ctx, f->port);
		return json_pack("{s:s}", "port", name ? name : "?");
	case DPFLOW_FWD_PIPE:
		return json_pack("{s:s}", "pipe",
				 f->pipe ? dpflow_pipe_name(f->pipe) : "?");
	case DPFLOW_FWD_RSS:
		return json_pack("{s:{s:i,s:i,s:b}}", "rss", "queues",
				 (int)f->rss_n, "first", (int)f->rss_queue,
				 "inner", (int)f->rss_inner);
	case DPFLOW_FWD_HANDLER:
		return json_string("handler");
	case DPFLOW_FWD_PER_ENTRY:
		return json_string("per-entry");
	default:
		return json_string("drop");
	}
}

json_t *ctl_match_json(const struct dpflow_match_tmpl *m)
{
	json_t *a = json_array();

	for (unsigned i = 0; a && i < m->n; i++) {
		const struct dpflow_match_field *f = &m->f[i];
		unsigned bytes = dpflow_field_bytes(f->field);
		const char *name = dpflow_field_name(f->field);
		uint8_t ones[16];
		char v[96];
		json_t *o;

		memset(ones, 0xff, sizeof(ones));
		if (f->per_entry && !memcmp(f->mask, ones, bytes)) {
			json_array_append_new(a, json_string(name));
			continue;
		}
		o = json_pack("{s:s}", "field", name);
		if (!f->per_entry) {
			ctl_value_str(f->field, f->value, NULL, v, sizeof(v));
			json_object_set_new(o, "value", value_json(v));
		}
		if (memcmp(f->mask, ones, bytes)) {
			ctl_value_str(f->field, f->mask, NULL, v, sizeof(v));
			json_object_set_new(o, "mask", value_json(v));
		}
		json_array_append_new(a, o);
	}
	return a;
}

int ctl_port_where(json_t *o, const char *kind, const char *uri)
{
	const char *args = uri ? strchr(uri, ':') : NULL;
	bool pcap = kind && !strcmp(kind, "pcap");
	const char *first_key = !kind			    ? NULL
				: pcap			    ? "rx_file"
				: !strcmp(kind, "afpacket") ? "interface"
				: !strcmp(kind, "afxdp")    ? "interface"
				: !strcmp(kind, "dpdk")	    ? "device"
							    : NULL;

	if (!uri)
		return 0;
	if (json_object_set_new(o, "uri", json_string(uri)))
		return -ENOMEM;
	for (const char *a = args ? args + 1 : NULL; a && *a;) {
		const char *end = strchr(a, ',');
		size_t n = end ? (size_t)(end - a) : strlen(a);
		const char *eq = memchr(a, '=', n);
		const char *key = NULL;

		if (a == args + 1 && !eq)
			key = first_key;
		else if (pcap && eq && eq - a == 2 && !strncmp(a, "rx", 2))
			key = "rx_file";
		else if (pcap && eq && eq - a == 2 && !strncmp(a, "tx", 2))
			key = "tx_file";
		if (key) {
			const char *v = eq ? eq + 1 : a;
			json_t *s = json_stringn(v, n - (size_t)(v - a));

			if (!s || json_object_set_new(o, key, s))
				return -ENOMEM;
		}
		a = end ? end + 1 : NULL;
	}
	return 0;
}

static void ip16_str(const uint8_t *v, char *buf, size_t len)
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0,    0,
					   0, 0, 0, 0, 0xff, 0xff};

	if (!memcmp(v, mapped, sizeof(mapped)))
		inet_ntop(AF_INET, v + 12, buf, (socklen_t)len);
	else
		inet_ntop(AF_INET6, v, buf, (socklen_t)len);
}

static json_t *encap_json(const struct dpflow_encap *e)
{
	static const char *const types[] = {"none", "vxlan", "geneve", "gre",
					    "ipip"};
	char src[INET6_ADDRSTRLEN], dst[INET6_ADDRSTRLEN], sm[24], dm[24];
	json_t *o;

	ip16_str(e->src, src, sizeof(src));
	ip16_str(e->dst, dst, sizeof(dst));
	mac_str(e->src_mac, sm, sizeof(sm));
	mac_str(e->dst_mac, dm, sizeof(dm));
	o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:i}", "type",
		      e->tun_type < 5 ? types[e->tun_type] : "none", "src", src,
		      "dst", dst, "src_mac", sm, "dst_mac", dm, "ttl",
		      (int)e->ttl);
	if (e->tun_type == DPFLOW_TUN_GRE && e->gre_key)
		json_object_set_new(o, "key", json_integer(e->id));
	else if (e->tun_type == DPFLOW_TUN_VXLAN ||
		 e->tun_type == DPFLOW_TUN_GENEVE)
		json_object_set_new(o, "vni", json_integer(e->id));
	return o;
}

static json_t *action_value_json(const struct dpflow_action *a,
				 const uint8_t *v,
				 const struct dpflow_encap *encap)
{
	char buf[96];

	switch (a->kind) {
	case DPFLOW_ACT_SET_MAC_SRC:
	case DPFLOW_ACT_SET_MAC_DST:
		mac_str(v, buf, sizeof(buf));
		return json_string(buf);
	case DPFLOW_ACT_NAT_SRC_IP:
	case DPFLOW_ACT_NAT_DST_IP:
		ip16_str(v, buf, sizeof(buf));
		return json_string(buf);
	case DPFLOW_ACT_NAT_SRC_PORT:
	case DPFLOW_ACT_NAT_DST_PORT:
		return json_integer(v[0] << 8 | v[1]);
	case DPFLOW_ACT_SET_FIELD:
	case DPFLOW_ACT_ADD_FIELD:
		ctl_value_str(a->field, v, NULL, buf, sizeof(buf));
		return value_json(buf);
	case DPFLOW_ACT_ENCAP:
		return encap_json(encap);
	default:
		return json_null();
	}
}

/* Action @a of a template in config syntax: {NAME: VALUE}. */
static json_t *action_json(struct dpflow_ctx *ctx,
			   const struct dpflow_action *a)
{
	const char *name = dpflow_action_name(a->kind);
	const char *port;
	char tpid[8];
	json_t *v;

	switch (a->kind) {
	case DPFLOW_ACT_DEC_TTL:
	case DPFLOW_ACT_VLAN_POP:
	case DPFLOW_ACT_DECAP:
		v = json_true();
		break;
	case DPFLOW_ACT_MIRROR:
		port = dpflow_ctx_port_name(ctx, a->port);
		v = json_string(port ? port : "?");
		break;
	case DPFLOW_ACT_VLAN_PUSH:
		snprintf(tpid, sizeof(tpid), "0x%04x", a->tpid);
		v = json_pack("{s:i,s:i,s:s}", "vid", a->tci & 0xfff, "pcp",
			      a->tci >> 13, "tpid", tpid);
		break;
	case DPFLOW_ACT_COPY_FIELD:
		v = json_pack("{s:s,s:s}", "field", dpflow_field_name(a->field),
			      "from", dpflow_field_name(a->src_field));
		break;
	case DPFLOW_ACT_SET_FIELD:
	case DPFLOW_ACT_ADD_FIELD:
		v = json_pack(
		    "{s:s,s:o}", "field", dpflow_field_name(a->field), "value",
		    a->per_entry ? json_string("per-entry")
				 : action_value_json(a, a->value, &a->encap));
		break;
	default:
		v = a->per_entry ? json_string("per-entry")
				 : action_value_json(a, a->value, &a->encap);
	}
	return v ? json_pack("{s:o}", name ? name : "?", v) : NULL;
}

json_t *ctl_actions_json(struct dpflow_ctx *ctx,
			 const struct dpflow_pipe_cfg *cfg)
{
	json_t *all = json_array();

	for (unsigned t = 0; all && t < cfg->n_action_tmpls; t++) {
		json_t *tmpl = json_array();

		for (unsigned i = 0; tmpl && i < cfg->actions[t].n; i++)
			json_array_append_new(
			    tmpl, action_json(ctx, &cfg->actions[t].a[i]));
		json_array_append_new(all, tmpl);
	}
	return all;
}

static json_t *meter_json(const struct dpflow_meter_cfg *m)
{
	json_t *o;

	if (m->alg == DPFLOW_METER_ALG_TRTCM)
		o = json_pack("{s:s,s:I,s:I,s:i,s:i}", "alg", "trtcm", "cir",
			      (json_int_t)m->cir, "pir", (json_int_t)m->pir,
			      "cbs", (int)m->cbs, "pbs", (int)m->pbs);
	else
		o = json_pack("{s:s,s:I,s:i,s:i}", "alg", "srtcm", "cir",
			      (json_int_t)m->cir, "cbs", (int)m->cbs, "ebs",
			      (int)m->ebs);
	if (o && m->color_aware)
		json_object_set_new(o, "color_aware", json_true());
	return o;
}

/* The index of the last per-entry field of @m, or -1. */
static int last_per_entry(const struct dpflow_match_tmpl *m)
{
	int last = -1;

	for (unsigned f = 0; f < m->n; f++)
		if (m->f[f].per_entry)
			last = (int)f;
	return last;
}

static json_t *entry_match_json(const struct dpflow_pipe_cfg *cfg,
				const struct dpflow_entry_cfg *e)
{
	json_t *o = json_object();
	int last = last_per_entry(&cfg->match);
	unsigned off = 0, k = 0;

	for (unsigned f = 0; o && f < cfg->match.n; f++) {
		const struct dpflow_match_field *mf = &cfg->match.f[f];
		unsigned bytes = dpflow_field_bytes(mf->field);
		bool masked = cfg->type == DPFLOW_PIPE_CONTROL ||
			      cfg->type == DPFLOW_PIPE_ACL;
		char v[96];

		if (!mf->per_entry)
			continue;
		if (masked && (e->range_set & (1u << k))) {
			snprintf(v, sizeof(v), "%u-%u", e->range_lo[k],
				 e->range_hi[k]);
		} else if (masked) {
			uint8_t any = 0;

			for (unsigned b = 0; b < bytes; b++)
				any |= e->mask[off + b];
			if (!any) { /* a wildcard: left out */
				off += bytes;
				k++;
				continue;
			}
			ctl_value_str(mf->field, e->key + off, e->mask + off, v,
				      sizeof(v));
		} else if (cfg->type == DPFLOW_PIPE_LPM && (int)f == last &&
			   e->prefix_len != dpflow_field_bits(mf->field)) {
			char a[INET6_ADDRSTRLEN];

			inet_ntop(bytes == 4 ? AF_INET : AF_INET6, e->key + off,
				  a, sizeof(a));
			snprintf(v, sizeof(v), "%s/%u", a, e->prefix_len);
		} else {
			ctl_value_str(mf->field, e->key + off, NULL, v,
				      sizeof(v));
		}
		json_object_set_new(o, dpflow_field_name(mf->field),
				    value_json(v));
		off += bytes;
		k++;
	}
	return o;
}

json_t *ctl_entry_json(struct dpflow_ctx *ctx, const struct dpflow_pipe *pipe,
		       const struct dpflow_entry_cfg *e)
{
	const struct dpflow_pipe_cfg *cfg = dpflow_pipe_cfg(pipe);
	json_t *o = json_object();

	if (!o)
		return NULL;
	if (cfg->maglev_slots) {
		json_object_set_new(o, "member", json_string(e->member));
		json_object_set_new(o, "weight", json_integer(e->weight));
	} else if (cfg->type == DPFLOW_PIPE_HASH)
		json_object_set_new(o, "index", json_integer(e->hash_index));
	else
		json_object_set_new(o, "match", entry_match_json(cfg, e));
	if (cfg->type == DPFLOW_PIPE_CONTROL || cfg->type == DPFLOW_PIPE_ACL)
		json_object_set_new(o, "priority", json_integer(e->priority));
	if (cfg->n_action_tmpls > 1 || e->action_tmpl)
		json_object_set_new(o, "action", json_integer(e->action_tmpl));
	if (e->action_tmpl < cfg->n_action_tmpls) {
		const struct dpflow_action_tmpl *t =
		    &cfg->actions[e->action_tmpl];
		json_t *vals = json_array();
		unsigned used = 0;

		for (unsigned i = 0; vals && i < t->n; i++) {
			if (!t->a[i].per_entry) {
				json_array_append_new(vals, json_null());
				continue;
			}
			json_array_append_new(
			    vals, action_value_json(
				      &t->a[i], e->action_value[i], &e->encap));
			used = i + 1;
		}
		/* items after the last per-entry action say nothing */
		while (vals && json_array_size(vals) > used)
			json_array_remove(vals, json_array_size(vals) - 1);
		if (used)
			json_object_set_new(o, "values", vals);
		else
			json_decref(vals);
	}
	if (cfg->fwd.kind == DPFLOW_FWD_PER_ENTRY)
		json_object_set_new(o, "fwd", ctl_fwd_json(ctx, &e->fwd));
	if (e->meter.alg)
		json_object_set_new(o, "meter", meter_json(&e->meter));
	if (e->shared_counter)
		json_object_set_new(o, "shared_counter",
				    json_integer(e->shared_counter));
	if (e->aging_ms)
		json_object_set_new(o, "aging_ms", json_integer(e->aging_ms));
	return o;
}

static void put(uint8_t *out, unsigned *n, const void *p, unsigned len)
{
	if (*n + len <= CTL_CANON_MAX)
		memcpy(out + *n, p, len);
	*n += len;
}

unsigned ctl_entry_canon(const struct dpflow_pipe *pipe,
			 const struct dpflow_entry_cfg *e, uint8_t *out)
{
	const struct dpflow_pipe_cfg *cfg = dpflow_pipe_cfg(pipe);
	int last = last_per_entry(&cfg->match);
	unsigned n = 0, off = 0, k = 0;

	if (cfg->maglev_slots) { /* a member is its name */
		put(out, &n, e->member, (unsigned)strlen(e->member));
		return n;
	}
	if (cfg->type == DPFLOW_PIPE_HASH) {
		put(out, &n, &e->hash_index, sizeof(e->hash_index));
		return n;
	}
	for (unsigned f = 0; f < cfg->match.n; f++) {
		const struct dpflow_match_field *mf = &cfg->match.f[f];
		unsigned bytes = dpflow_field_bytes(mf->field);
		uint8_t m[16], v[16];

		if (!mf->per_entry)
			continue;
		if (off + bytes > DPFLOW_KEY_MAX)
			break;
		for (unsigned b = 0; b < bytes; b++)
			m[b] = mf->mask[b];
		if (cfg->type == DPFLOW_PIPE_CONTROL ||
		    cfg->type == DPFLOW_PIPE_ACL) {
			uint8_t tag = (e->range_set & (1u << k)) ? 1 : 0;

			put(out, &n, &tag, 1);
			if (tag) {
				put(out, &n, &e->range_lo[k], 4);
				put(out, &n, &e->range_hi[k], 4);
				off += bytes;
				k++;
				continue;
			}
			for (unsigned b = 0; b < bytes; b++)
				m[b] &= e->mask[off + b];
			put(out, &n, m, bytes);
		} else if (cfg->type == DPFLOW_PIPE_LPM && (int)f == last) {
			for (unsigned b = 0; b < bytes; b++) {
				unsigned bit = 8 * b;
				uint8_t pm = 0;

				if (e->prefix_len >= bit + 8)
					pm = 0xff;
				else if (e->prefix_len > bit)
					pm = (uint8_t)(0xff
						       << (8 - (e->prefix_len -
								bit)));
				m[b] &= pm;
			}
			put(out, &n, &e->prefix_len, 1);
		}
		for (unsigned b = 0; b < bytes; b++)
			v[b] = e->key[off + b] & m[b];
		put(out, &n, v, bytes);
		off += bytes;
		k++;
	}
	return n <= CTL_CANON_MAX ? n : CTL_CANON_MAX;
}

/* ---- the graph ----------------------------------------------------------
 */

/* @s inside a dot string. */
static void dot_esc(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		if (*s != '\n')
			fputc(*s, f);
	}
}

/* A node id: "KIND:NAME", quoted. */
static void dot_id(FILE *f, const char *kind, const char *s)
{
	fprintf(f, "\"%s:", kind);
	dot_esc(f, s);
	fputc('"', f);
}

/* Print forwarding @fw of a pipe: a text line or a dot edge. */
static void fwd_out(FILE *f, struct dpflow_ctx *ctx, const char *from,
		    const struct dpflow_fwd *fw, const char *label, bool dot)
{
	const char *port = fw->kind == DPFLOW_FWD_PORT
			       ? dpflow_ctx_port_name(ctx, fw->port)
			       : NULL;

	if (!dot) {
		fprintf(f, "    %-6s -> ", label);
		switch (fw->kind) {
		case DPFLOW_FWD_PORT:
			fprintf(f, "port %s\n", port ? port : "?");
			break;
		case DPFLOW_FWD_PIPE:
			fprintf(f, "pipe %s\n", dpflow_pipe_name(fw->pipe));
			break;
		case DPFLOW_FWD_RSS:
			fprintf(f, "rss queues %u..%u\n", fw->rss_queue,
				fw->rss_queue + fw->rss_n - 1);
			break;
		case DPFLOW_FWD_HANDLER:
			fprintf(f, "handler\n");
			break;
		default:
			fprintf(f, "drop\n");
		}
		return;
	}
	fputs("  ", f);
	dot_id(f, "pipe", from);
	fputs(" -> ", f);
	switch (fw->kind) {
	case DPFLOW_FWD_PORT:
		dot_id(f, "port", port ? port : "?");
		break;
	case DPFLOW_FWD_PIPE:
		dot_id(f, "pipe", dpflow_pipe_name(fw->pipe));
		break;
	case DPFLOW_FWD_RSS:
		fputs("\"rss\"", f);
		break;
	case DPFLOW_FWD_HANDLER:
		fputs("\"handler\"", f);
		break;
	default:
		fputs("\"drop\"", f);
	}
	fprintf(f, " [label=\"%s\"%s];\n", label,
		strcmp(label, "miss") ? "" : ", style=dashed");
}

/* Match template @m as a text line: "FIELD" for a per-entry field,
 * "FIELD=VALUE" for a constant one, "FIELD mask M" for a masked one. */
static void match_text(FILE *f, const struct dpflow_match_tmpl *m)
{
	uint8_t ones[16];

	memset(ones, 0xff, sizeof(ones));
	fputs("    match ", f);
	if (!m->n)
		fputs(" (none: every packet)", f);
	for (unsigned i = 0; i < m->n; i++) {
		const struct dpflow_match_field *mf = &m->f[i];
		bool masked =
		    memcmp(mf->mask, ones, dpflow_field_bytes(mf->field)) != 0;
		char v[96];

		fprintf(f, "%s%s", i ? ", " : " ",
			dpflow_field_name(mf->field));
		if (!mf->per_entry) {
			ctl_value_str(mf->field, mf->value,
				      masked ? mf->mask : NULL, v, sizeof(v));
			fprintf(f, "=%s", v);
		} else if (masked) {
			ctl_value_str(mf->field, mf->mask, NULL, v, sizeof(v));
			fprintf(f, " mask %s", v);
		}
	}
	fputc('\n', f);
}

/* An edge {"on": LABEL, "to": FWD} of @edges (dump as JSON). */
static void edge_json(json_t *edges, struct dpflow_ctx *ctx,
		      const struct dpflow_fwd *fw, const char *label)
{
	json_array_append_new(edges, json_pack("{s:s,s:o}", "on", label, "to",
					       ctl_fwd_json(ctx, fw)));
}

/* Distinct forwarding targets of a per-entry pipe's entries: printed, or
 * appended to @edges when it is not NULL. */
static void entry_targets(FILE *f, struct dpflow_ctx *ctx,
			  const struct dpflow_pipe *pipe, bool dot,
			  json_t *edges)
{
	struct dpflow_fwd seen[DPFLOW_PIPES_MAX + DPFLOW_PORTS_MAX];
	unsigned n_seen = 0;

	for (uint32_t s = 0; s < dpflow_pipe_size(pipe); s++) {
		const struct dpflow_entry *e = dpflow_pipe_entry(pipe, s);
		const struct dpflow_fwd *fw;
		bool dup = false;

		if (!e)
			continue;
		fw = &dpflow_entry_cfg(e)->fwd;
		for (unsigned i = 0; i < n_seen && !dup; i++)
			dup = seen[i].kind == fw->kind &&
			      seen[i].port == fw->port &&
			      seen[i].pipe == fw->pipe &&
			      seen[i].rss_queue == fw->rss_queue;
		if (dup)
			continue;
		if (n_seen == DPFLOW_ARRAY_SIZE(seen))
			break;
		seen[n_seen++] = *fw;
		if (edges)
			edge_json(edges, ctx, fw, "entry");
		else
			fwd_out(f, ctx, dpflow_pipe_name(pipe), fw, "entry",
				dot);
	}
}

char *ctl_dump(struct dpflow_ctx *ctx, bool dot)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	if (dot)
		fputs("digraph dpflow {\n  rankdir=LR;\n  node "
		      "[fontname=\"monospace\"];\n",
		      f);
	for (unsigned i = 0; i < dpflow_ctx_port_count(ctx); i++) {
		struct dpflow_port *p = dpflow_ctx_port(ctx, i);
		const char *name = dpflow_ctx_port_name(ctx, i);

		if (!p || !name)
			continue;
		if (dot) {
			fputs("  ", f);
			dot_id(f, "port", name);
			fputs(" [shape=box, label=\"port ", f);
			dot_esc(f, name);
			fprintf(f, "\\n%s\"];\n", dpflow_port_kind(p));
		} else {
			fprintf(f, "port %s (%s, id %u)\n", name,
				dpflow_port_kind(p), i);
		}
	}
	for (unsigned i = 0; i < dpflow_ctx_pipe_count(ctx); i++) {
		struct dpflow_pipe *pipe = dpflow_ctx_pipe(ctx, i);
		const struct dpflow_pipe_cfg *cfg = dpflow_pipe_cfg(pipe);
		const char *root =
		    cfg->root ? dpflow_ctx_port_name(ctx, cfg->port) : NULL;

		if (dot) {
			fputs("  ", f);
			dot_id(f, "pipe", cfg->name);
			fputs(" [shape=ellipse, label=\"", f);
			dot_esc(f, cfg->name);
			fprintf(f, "\\n%s %u/%u\"];\n",
				dpflow_pipe_type_name(cfg->type),
				dpflow_pipe_entry_count(pipe), cfg->size);
			if (root) {
				fputs("  ", f);
				dot_id(f, "port", root);
				fputs(" -> ", f);
				dot_id(f, "pipe", cfg->name);
				fputs(" [label=\"rx\"];\n", f);
			}
		} else {
			fprintf(f, "pipe %s (%s, %u/%u entries)%s%s\n",
				cfg->name, dpflow_pipe_type_name(cfg->type),
				dpflow_pipe_entry_count(pipe), cfg->size,
				root ? ", root of port " : "",
				root ? root : "");
			match_text(f, &cfg->match);
		}
		if (cfg->fwd.kind == DPFLOW_FWD_PER_ENTRY) {
			if (!dot)
				fputs("    hit    -> per entry:\n", f);
			entry_targets(f, ctx, pipe, dot, NULL);
		} else {
			fwd_out(f, ctx, cfg->name, &cfg->fwd, "hit", dot);
		}
		fwd_out(f, ctx, cfg->name, &cfg->miss_fwd, "miss", dot);
		if (cfg->color_fwd.yellow_set)
			fwd_out(f, ctx, cfg->name, &cfg->color_fwd.yellow,
				"yellow", dot);
		if (cfg->color_fwd.red_set)
			fwd_out(f, ctx, cfg->name, &cfg->color_fwd.red, "red",
				dot);
	}
	if (dot)
		fputs("}\n", f);
	if (fclose(f)) {
		free(buf);
		return NULL;
	}
	return buf;
}

json_t *ctl_dump_json(struct dpflow_ctx *ctx)
{
	json_t *ports = json_array(), *pipes = json_array();
	json_t *o = json_pack("{s:o,s:o}", "ports", ports, "pipes", pipes);

	for (unsigned i = 0; o && i < dpflow_ctx_port_count(ctx); i++) {
		struct dpflow_port *p = dpflow_ctx_port(ctx, i);
		const char *name = dpflow_ctx_port_name(ctx, i);

		if (p && name)
			json_array_append_new(
			    ports,
			    json_pack("{s:i,s:s,s:s}", "id", (int)i, "name",
				      name, "kind", dpflow_port_kind(p)));
	}
	for (unsigned i = 0; o && i < dpflow_ctx_pipe_count(ctx); i++) {
		struct dpflow_pipe *pipe = dpflow_ctx_pipe(ctx, i);
		const struct dpflow_pipe_cfg *cfg = dpflow_pipe_cfg(pipe);
		const char *root =
		    cfg->root ? dpflow_ctx_port_name(ctx, cfg->port) : NULL;
		json_t *edges = json_array();

		if (cfg->fwd.kind == DPFLOW_FWD_PER_ENTRY)
			entry_targets(NULL, ctx, pipe, false, edges);
		else
			edge_json(edges, ctx, &cfg->fwd, "hit");
		edge_json(edges, ctx, &cfg->miss_fwd, "miss");
		if (cfg->color_fwd.yellow_set)
			edge_json(edges, ctx, &cfg->color_fwd.yellow, "yellow");
		if (cfg->color_fwd.red_set)
			edge_json(edges, ctx, &cfg->color_fwd.red, "red");
		json_array_append_new(
		    pipes,
		    json_pack("{s:s,s:s,s:o,s:i,s:i,s:o,s:o}", "name",
			      cfg->name, "type",
			      dpflow_pipe_type_name(cfg->type), "root",
			      root ? json_string(root) : json_null(), "entries",
			      (int)dpflow_pipe_entry_count(pipe), "size",
			      (int)cfg->size, "match",
			      ctl_match_json(&cfg->match), "edges", edges));
	}
	return o;
}
