/*
 * `dpflow gen`: write test traffic from a profile to a pcap file through
 * the port API, and optionally a manifest (one JSON object per packet)
 * saying what each packet was built to be. Same options, same bytes:
 * packet i is stamped at a fixed epoch + i microseconds. docs/gen.md.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/dpflow.h"

#include "cmds.h"

#define GEN_EPOCH_NS UINT64_C(1704067200000000000) /* 2024-01-01 UTC */
#define GEN_BURST    32
#define GEN_HDR_ROOM 512 /* headers beyond --size a frame may need */

static void usage(FILE *out)
{
	fputs("usage: dpflow gen [PROFILE] [OPTIONS] -o FILE.pcap\n"
	      "\n"
	      "Write test traffic to a pcap file. PROFILE is default, all,\n"
	      "imix or vxlan (default: default); options override it.\n"
	      "\n"
	      "  -o, --output FILE     pcap file to write (required)\n"
	      "  --count N             packets (1..2^40)\n"
	      "  --flows N             distinct flows (1..4194304)\n"
	      "  --size N|imix         frame bytes without FCS (14..9600), or\n"
	      "                        IMIX 64/576/1500 at 7:4:1\n"
	      "  --mix tcp:P,udp:P,icmp:P,sctp:P\n"
	      "                        protocol shares of flows (sum 100)\n"
	      "  --ipv6 PCT            share of IPv6 flows (and tunnel ends)\n"
	      "  --vlan ID[:PCT]       802.1Q tag on PCT% of flows (100)\n"
	      "  --qinq ID[:PCT]       802.1ad outer tag on PCT% of tagged\n"
	      "                        flows (needs --vlan)\n"
	      "  --tunnel vxlan:P,geneve:P,gre:P,ipip:P\n"
	      "                        tunnelled share of flows (sum <= 100)\n"
	      "  --frag PCT            share of packets built as fragments\n"
	      "  --ipv4-opt PCT        share of IPv4 headers with options\n"
	      "  --ipv6-ext PCT        share of IPv6 headers with extension\n"
	      "                        headers\n"
	      "  --seed N              PRNG seed (decimal or 0x hex)\n"
	      "  --malformed           write the malformed variants instead\n"
	      "  --manifest FILE       write one JSON object per packet\n"
	      "  -h, --help            this text\n"
	      "\n"
	      "Exit status: 0 written, 1 write error, 2 usage error.\n",
	      out);
}

/* --- manifest ---------------------------------------------------------- */

static void json_str(FILE *f, const char *key, const char *v)
{
	if (v)
		fprintf(f, ",\"%s\":\"%s\"", key, v);
	else
		fprintf(f, ",\"%s\":null", key);
}

static void json_num(FILE *f, const char *key, bool present, uint64_t v)
{
	if (present)
		fprintf(f, ",\"%s\":%" PRIu64, key, v);
	else
		fprintf(f, ",\"%s\":null", key);
}

static void json_mac(FILE *f, const char *key, const uint8_t *m)
{
	fprintf(f, ",\"%s\":\"%02x:%02x:%02x:%02x:%02x:%02x\"", key, m[0], m[1],
		m[2], m[3], m[4], m[5]);
}

static void json_addr(FILE *f, const char *key, const struct dpflow_gen_l3 *l3,
		      const uint8_t *a)
{
	char s[INET6_ADDRSTRLEN];
	bool v6 = l3->l3_type == DPFLOW_L3_IPV6;

	inet_ntop(v6 ? AF_INET6 : AF_INET, a, s, sizeof(s));
	json_str(f, key, s);
}

/* IP protocol number the builder puts in the last header of @l3. */
static unsigned ip_proto(const struct dpflow_gen_spec *s,
			 const struct dpflow_gen_l3 *l3, bool outer)
{
	if (outer && s->tun_type != DPFLOW_TUN_NONE) {
		switch (s->tun_type) {
		case DPFLOW_TUN_GRE:
			return 47;
		case DPFLOW_TUN_IPIP:
			return s->inner.l3_type == DPFLOW_L3_IPV6 ? 41 : 4;
		default:
			return 17;
		}
	}
	switch (l3->l4_type) {
	case DPFLOW_L4_TCP:
		return 6;
	case DPFLOW_L4_UDP:
		return 17;
	case DPFLOW_L4_ICMP:
		return 1;
	case DPFLOW_L4_ICMPV6:
		return 58;
	case DPFLOW_L4_SCTP:
		return 132;
	default:
		return l3->l3_type == DPFLOW_L3_IPV6 ? 59 : 253;
	}
}

/* The IPv6 extension headers on the wire, as the builder writes them. */
static void json_ext(FILE *f, const struct dpflow_gen_l3 *l3)
{
	unsigned n = 0;
	bool frag = false;

	fprintf(f, ",\"ipv6_ext_hdrs\":");
	if (l3->l3_type != DPFLOW_L3_IPV6) {
		fprintf(f, "null");
		return;
	}
	fputc('[', f);
	for (unsigned i = 0; i < DPFLOW_ARRAY_SIZE(l3->ipv6_ext); i++) {
		uint8_t e = l3->ipv6_ext[i];
		if (e == 0xff)
			break;
		fprintf(f, "%s%u", n++ ? "," : "", e);
		if (e == 44) {
			frag = true;
			if (l3->frag == DPFLOW_FRAG_LATER)
				break;
		}
	}
	if (l3->frag != DPFLOW_FRAG_NONE && !frag)
		fprintf(f, "%s44", n ? "," : "");
	fputc(']', f);
}

/*
 * The layer keys of one IP packet, named as `dpflow inspect` names them,
 * plus what only the builder knows (options, payload, fragment offset).
 */
static void json_l3(FILE *f, const struct dpflow_gen_spec *s,
		    const struct dpflow_gen_l3 *l3, bool outer)
{
	bool later = l3->frag == DPFLOW_FRAG_LATER;
	bool tunnelled = outer && s->tun_type != DPFLOW_TUN_NONE;
	uint8_t l4 = l3->l4_type;
	bool icmp, ports;

	if (tunnelled)
		l4 = s->tun_type == DPFLOW_TUN_VXLAN ||
			     s->tun_type == DPFLOW_TUN_GENEVE
			 ? DPFLOW_L4_UDP
			 : DPFLOW_L4_OTHER;
	if (later)
		l4 = DPFLOW_L4_NONE;
	icmp = l4 == DPFLOW_L4_ICMP || l4 == DPFLOW_L4_ICMPV6;
	ports =
	    l4 == DPFLOW_L4_TCP || l4 == DPFLOW_L4_UDP || l4 == DPFLOW_L4_SCTP;

	json_str(f, "l3", dpflow_l3_name(l3->l3_type));
	json_addr(f, "src", l3, l3->src);
	json_addr(f, "dst", l3, l3->dst);
	json_num(f, "proto", true, ip_proto(s, l3, outer));
	json_num(f, "ttl", true, l3->ttl);
	json_num(f, "tos", true, l3->tos);
	json_num(f, "ip_id", true,
		 l3->l3_type == DPFLOW_L3_IPV4 ? (l3->ip_id & 0xffff)
					       : l3->ip_id);
	json_num(f, "ipv4_opt_len", l3->l3_type == DPFLOW_L3_IPV4,
		 l3->ipv4_opt_len);
	json_ext(f, l3);
	fprintf(f, ",\"frag\":%s", l3->frag ? "true" : "false");
	json_str(f, "frag_kind",
		 l3->frag == DPFLOW_FRAG_FIRST ? "first"
		 : later		       ? "later"
					       : NULL);
	json_num(f, "frag_off", true, later ? l3->frag_off : 0);
	json_str(f, "l4", dpflow_l4_name(l4));
	json_num(f, "sport", ports, l3->sport);
	json_num(f, "dport", ports, l3->dport);
	json_num(f, "icmp_type", icmp, l3->sport);
	json_num(f, "icmp_code", icmp, l3->dport);
	json_num(f, "tcp_flags", l4 == DPFLOW_L4_TCP, l3->tcp_flags);
	json_num(f, "payload_len", !tunnelled || later, l3->payload_len);
}

static void manifest_line(FILE *f, uint64_t i, uint32_t len,
			  const struct dpflow_gen_info *info)
{
	const struct dpflow_gen_spec *s = &info->spec;
	uint8_t tun =
	    s->outer.frag == DPFLOW_FRAG_LATER ? DPFLOW_TUN_NONE : s->tun_type;
	bool udp_tun = tun == DPFLOW_TUN_VXLAN || tun == DPFLOW_TUN_GENEVE;
	bool inner_eth =
	    tun == DPFLOW_TUN_VXLAN || (tun != DPFLOW_TUN_NONE && s->inner_eth);

	fprintf(f, "{\"i\":%" PRIu64 ",\"len\":%" PRIu32 ",\"flow\":%" PRIu32,
		i, len, info->flow);
	json_str(f, "variant", info->variant);
	json_str(f, "expect_drop",
		 info->expect_drop < 0 ? "any"
		 : info->expect_drop == 0
		     ? NULL
		     : dpflow_drop_name((unsigned)info->expect_drop));
	json_str(f, "l2", s->has_eth ? "eth" : NULL);
	if (s->has_eth) {
		json_mac(f, "src_mac", s->src_mac);
		json_mac(f, "dst_mac", s->dst_mac);
	}
	fprintf(f, ",\"vlan\":[");
	for (unsigned k = 0; k < s->n_vlan; k++)
		fprintf(f, "%s%u", k ? "," : "", s->vlan[k]);
	fputc(']', f);
	json_num(f, "frame_len", s->frame_len != 0, s->frame_len);
	json_l3(f, s, &s->outer, true);
	json_str(f, "tun", dpflow_tun_name(tun));
	json_num(f, "vni", udp_tun, s->tun_id);
	json_num(f, "key", tun == DPFLOW_TUN_GRE && s->gre_key, s->tun_id);
	json_num(f, "tun_proto",
		 tun == DPFLOW_TUN_GENEVE || tun == DPFLOW_TUN_GRE,
		 inner_eth			      ? 0x6558
		 : s->inner.l3_type == DPFLOW_L3_IPV6 ? 0x86dd
						      : 0x0800);
	if (tun == DPFLOW_TUN_GRE)
		fprintf(f, ",\"gre_csum\":%s", s->gre_csum ? "true" : "false");
	else
		fprintf(f, ",\"gre_csum\":null");
	json_num(f, "gre_seq", tun == DPFLOW_TUN_GRE && s->gre_seq,
		 s->gre_seqno);
	json_num(f, "geneve_opt_len", tun == DPFLOW_TUN_GENEVE,
		 s->geneve_opt_len);
	if (tun == DPFLOW_TUN_NONE) {
		fprintf(f, ",\"inner\":null}\n");
		return;
	}
	fprintf(f, ",\"inner\":{\"l2\":%s", inner_eth ? "\"eth\"" : "null");
	if (inner_eth) {
		json_mac(f, "src_mac", s->inner_src_mac);
		json_mac(f, "dst_mac", s->inner_dst_mac);
	}
	json_l3(f, s, &s->inner, false);
	fprintf(f, "}}\n");
}

/* --- options ----------------------------------------------------------- */

/* Options that map one to one onto profile keys. */
static const char *const profile_keys[] = {
    "count", "flows",  "size", "mix",	   "ipv6",     "vlan",
    "qinq",  "tunnel", "frag", "ipv4-opt", "ipv6-ext", "seed",
};

struct gen_opts {
	const char *profile;
	const char *output;
	const char *manifest;
	bool malformed;
	/* profile key options, applied in command-line order */
	const char *keys[64];
	const char *values[64];
	unsigned n;
};

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt,
							     ...)
{
	va_list ap;

	fprintf(stderr, "dpflow gen: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n(dpflow gen --help lists the options)\n");
	return 2;
}

/* Returns 0, 2 (usage error, reported) or -1 (help printed). */
static int parse_opts(int argc, char **argv, struct gen_opts *o)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *val = NULL;
		char name[32];
		const char *eq;
		size_t nl;

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return -1;
		}
		if (a[0] != '-' || !a[1]) {
			if (o->profile)
				return usage_error("unexpected argument '%s' "
						   "(profile '%s' already "
						   "given)",
						   a, o->profile);
			o->profile = a;
			continue;
		}
		if (!strcmp(a, "--malformed")) {
			o->malformed = true;
			continue;
		}
		if (!strcmp(a, "-o")) {
			strcpy(name, "output");
		} else if (!strncmp(a, "--", 2)) {
			eq = strchr(a, '=');
			nl = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
			if (nl >= sizeof(name))
				return usage_error("unknown option '%s'", a);
			memcpy(name, a + 2, nl);
			name[nl] = 0;
			if (eq)
				val = eq + 1;
		} else {
			return usage_error("unknown option '%s'", a);
		}

		const char *key = NULL;
		for (size_t k = 0; k < DPFLOW_ARRAY_SIZE(profile_keys); k++)
			if (!strcmp(name, profile_keys[k]))
				key = profile_keys[k];
		if (!key && strcmp(name, "output") && strcmp(name, "manifest"))
			return usage_error("unknown option '%s'", a);
		if (!val) {
			if (i + 1 >= argc)
				return usage_error("option '%s' needs a value",
						   a);
			val = argv[++i];
		}
		if (!strcmp(name, "output")) {
			o->output = val;
		} else if (!strcmp(name, "manifest")) {
			o->manifest = val;
		} else {
			if (o->n == DPFLOW_ARRAY_SIZE(o->keys))
				return usage_error("too many options");
			o->keys[o->n] = key;
			o->values[o->n++] = val;
		}
	}
	if (!o->output)
		return usage_error("no output file: add -o FILE.pcap");
	if (!*o->output || strchr(o->output, ','))
		return usage_error("-o '%s': %s", o->output,
				   "not a usable file name (empty, or has "
				   "a ',', which port URIs reserve)");
	return 0;
}

/* --- writing ----------------------------------------------------------- */

struct gen_run {
	struct dpflow_gen *gen;
	struct dpflow_pool *pool;
	struct dpflow_port *port;
	FILE *manifest;
	uint64_t count;
	uint64_t written;
};

/* Generate and transmit every packet; 0 or 1 (reported). */
static int write_all(struct gen_run *r, const char *output)
{
	struct dpflow_gen_info info;
	uint32_t idx[GEN_BURST];

	while (r->written < r->count) {
		unsigned n = dpflow_pool_alloc_burst(r->pool, idx, GEN_BURST);
		uint16_t m = 0, sent;

		if (!n) {
			fprintf(stderr, "dpflow gen: packet pool empty\n");
			return 1;
		}
		while (m < n && r->written + m < r->count) {
			struct dpflow_pkt_meta *meta =
			    dpflow_pool_meta(r->pool, idx[m]);
			uint8_t *data = dpflow_pkt_data(r->pool, idx[m]);
			uint32_t len = dpflow_gen_next(
			    r->gen, data, dpflow_pkt_tailroom(r->pool, idx[m]),
			    &info);
			if (!len) {
				fprintf(stderr,
					"dpflow gen: packet %" PRIu64
					" does not fit a pool slot\n",
					r->written + m);
				dpflow_pool_free_bulk(r->pool, idx, n);
				return 1;
			}
			meta->data_len = (uint16_t)len;
			meta->tx_time_ns =
			    GEN_EPOCH_NS + (r->written + m) * 1000;
			if (r->manifest)
				manifest_line(r->manifest, r->written + m, len,
					      &info);
			m++;
		}
		if (m < n)
			dpflow_pool_free_bulk(r->pool, idx + m, n - m);
		sent = dpflow_port_tx_burst(r->port, 0, r->pool, idx, m);
		r->written += sent;
		if (sent < m) {
			dpflow_pool_free_bulk(r->pool, idx + sent,
					      (unsigned)(m - sent));
			fprintf(stderr,
				"dpflow gen: %s: writing packet %" PRIu64
				" failed\n",
				output, r->written);
			return 1;
		}
	}
	return 0;
}

int cmd_gen(int argc, char **argv)
{
	struct gen_opts o;
	struct dpflow_gen_profile prof;
	struct dpflow_error err;
	struct dpflow_port_stats st;
	struct gen_run r;
	char uri[4096];
	int rc;

	memset(&o, 0, sizeof(o));
	memset(&r, 0, sizeof(r));
	rc = parse_opts(argc, argv, &o);
	if (rc)
		return rc < 0 ? 0 : rc;

	dpflow_error_clear(&err);
	if (dpflow_gen_profile_init(&prof, o.profile, &err))
		return usage_error("%s", err.msg);
	for (unsigned k = 0; k < o.n; k++)
		if (dpflow_gen_profile_set(&prof, o.keys[k], o.values[k], &err))
			return usage_error("--%s", err.msg);
	prof.malformed = o.malformed;
	r.gen = dpflow_gen_create(&prof, &err);
	if (!r.gen)
		return usage_error("%s", err.msg);
	r.count = prof.count;

	rc = 1;
	uint32_t room = (uint32_t)prof.size + GEN_HDR_ROOM;
	struct dpflow_pool_params pp = {
	    .name = "gen",
	    .n_slots = 2 * GEN_BURST,
	    .data_room = (uint16_t)(room < DPFLOW_POOL_DATA_ROOM_DEFAULT
					? DPFLOW_POOL_DATA_ROOM_DEFAULT
					: room),
	};
	r.pool = dpflow_pool_create(&pp, &err);
	if (!r.pool) {
		fprintf(stderr, "dpflow gen: packet pool: %s\n", err.msg);
		goto out;
	}
	if ((size_t)snprintf(uri, sizeof(uri), "pcap:tx=%s", o.output) >=
	    sizeof(uri)) {
		fprintf(stderr, "dpflow gen: -o '%s': name too long\n",
			o.output);
		goto out;
	}
	r.port = dpflow_port_open(r.pool, uri, &err);
	if (!r.port) {
		fprintf(stderr, "dpflow gen: -o: %s\n", err.msg);
		goto out;
	}
	if (o.manifest) {
		r.manifest = fopen(o.manifest, "w");
		if (!r.manifest) {
			fprintf(stderr, "dpflow gen: --manifest '%s': %s\n",
				o.manifest, strerror(errno));
			goto out;
		}
	}
	if (write_all(&r, o.output))
		goto out;
	if (dpflow_port_stats_get(r.port, &st) == 0 && st.tx_errors) {
		fprintf(stderr, "dpflow gen: %s: %" PRIu64 " write errors\n",
			o.output, st.tx_errors);
		goto out;
	}
	if (r.manifest) {
		FILE *m = r.manifest;
		r.manifest = NULL;
		if (ferror(m) | fclose(m)) {
			fprintf(stderr,
				"dpflow gen: --manifest '%s': write "
				"failed\n",
				o.manifest);
			goto out;
		}
	}
	/* the capture is renamed into place only now, all written */
	if (dpflow_port_finish(r.port, &err)) {
		fprintf(stderr, "dpflow gen: -o: %s\n", err.msg);
		goto out;
	}
	rc = 0;
	printf("dpflow gen: %" PRIu64 " packets to %s\n", r.written, o.output);
out:
	if (r.manifest)
		fclose(r.manifest);
	if (rc)
		dpflow_port_discard(r.port); /* an existing file stays */
	dpflow_port_close(r.port);
	dpflow_pool_destroy(r.pool);
	dpflow_gen_destroy(r.gen);
	return rc;
}
