/*
 * `dpflow inspect`: print how the parser sees each packet of a capture, one
 * JSON object per line. The format is documented in docs/inspect.md.
 */
#include <arpa/inet.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "dpflow/dpflow.h"

#include "cmds.h"

/*
 * One packet per receive call, so that a record the port drops (too large
 * for the data room, or a link-layer frame it cannot convert) is seen in
 * the port's counters at its place in the file and reported there. The
 * data room takes jumbo frames.
 */
#define INSPECT_POOL_SLOTS 8
#define INSPECT_DATA_ROOM  16384
#define LINE_MAX_BYTES	   2048

struct line {
	char buf[LINE_MAX_BYTES];
	size_t len;
	bool need_comma; /* a key was written in the current object */
};

static void put(struct line *l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void put(struct line *l, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (l->len >= sizeof(l->buf))
		return;
	va_start(ap, fmt);
	n = vsnprintf(l->buf + l->len, sizeof(l->buf) - l->len, fmt, ap);
	va_end(ap);
	if (n > 0)
		l->len += (size_t)n;
}

/* Start a key of the current object. */
static void put_key(struct line *l, const char *key)
{
	put(l, "%s\"%s\":", l->need_comma ? "," : "", key);
	l->need_comma = true;
}

static void put_str(struct line *l, const char *key, const char *v)
{
	put_key(l, key);
	if (v)
		put(l, "\"%s\"", v);
	else
		put(l, "null");
}

static void put_num(struct line *l, const char *key, bool present,
		    unsigned long v)
{
	put_key(l, key);
	if (present)
		put(l, "%lu", v);
	else
		put(l, "null");
}

static void put_bool(struct line *l, const char *key, bool present, bool v)
{
	put_key(l, key);
	put(l, "%s", !present ? "null" : v ? "true" : "false");
}

static const char *link_name(int dlt)
{
	switch (dlt) {
	case 1:
		return "eth";
	case 113:
		return "sll";
	case 276:
		return "sll2";
	case 12:
	case 14:
	case 101:
		return "raw";
	case 0:
		return "null";
	case 108:
		return "loop";
	default:
		return "unknown";
	}
}

/* The keys shared by the outer and the inner header sets. */
static void put_hdr(struct line *l, const struct dpflow_hdr *h)
{
	bool ip = h->l3_type == DPFLOW_L3_IPV4 || h->l3_type == DPFLOW_L3_IPV6;
	bool ports = h->l4_type == DPFLOW_L4_TCP ||
		     h->l4_type == DPFLOW_L4_UDP ||
		     h->l4_type == DPFLOW_L4_SCTP;
	bool icmp =
	    h->l4_type == DPFLOW_L4_ICMP || h->l4_type == DPFLOW_L4_ICMPV6;
	char src[INET6_ADDRSTRLEN] = "", dst[INET6_ADDRSTRLEN] = "";
	int af = h->l3_type == DPFLOW_L3_IPV4 ? AF_INET : AF_INET6;

	put_str(l, "l2", h->l2_type == DPFLOW_L2_ETH ? "eth" : NULL);
	put_key(l, "vlan");
	put(l, "[");
	for (unsigned v = 0; h->l2_type == DPFLOW_L2_ETH && v < h->n_vlan; v++)
		put(l, "%s%u", v ? "," : "", h->vlan[v] & 0x0fffu);
	put(l, "]");
	put_num(l, "ethertype", h->l2_type == DPFLOW_L2_ETH, h->ethertype);
	put_str(l, "l3", dpflow_l3_name(h->l3_type));
	if (ip) {
		inet_ntop(af, h->src, src, sizeof(src));
		inet_ntop(af, h->dst, dst, sizeof(dst));
	}
	put_str(l, "src", ip ? src : NULL);
	put_str(l, "dst", ip ? dst : NULL);
	put_num(l, "proto", ip, h->proto);
	put_num(l, "ttl", ip, h->ttl);
	put_num(l, "tos", ip, h->tos);
	put_bool(l, "frag", ip, h->frag != DPFLOW_FRAG_NONE);
	put_str(l, "frag_kind",
		!ip			       ? NULL
		: h->frag == DPFLOW_FRAG_FIRST ? "first"
		: h->frag == DPFLOW_FRAG_LATER ? "later"
					       : NULL);
	put_num(l, "ipv6_ext", h->l3_type == DPFLOW_L3_IPV6, h->n_ext);
	put_str(l, "l4", dpflow_l4_name(h->l4_type));
	put_num(l, "sport", ports, h->sport);
	put_num(l, "dport", ports, h->dport);
	put_num(l, "icmp_type", icmp, h->sport);
	put_num(l, "icmp_code", icmp, h->dport);
	put_num(l, "tcp_flags", h->l4_type == DPFLOW_L4_TCP, h->tcp_flags);
}

static void put_packet(struct line *l, uint64_t i, int dlt,
		       const struct dpflow_pkt_meta *m)
{
	bool tun = m->tun_type != DPFLOW_TUN_NONE;

	l->len = 0;
	l->need_comma = false;
	put(l, "{");
	put_num(l, "i", true, (unsigned long)i);
	/* a record the port dropped never reached a slot: no length */
	put_num(l, "len",
		m->drop != DPFLOW_DROP_PORT_OVERSIZE &&
		    m->drop != DPFLOW_DROP_PORT_UNSUPPORTED,
		m->data_len);
	put_str(l, "link", link_name(dlt));
	put_hdr(l, &m->outer);
	put_str(l, "tun", dpflow_tun_name(m->tun_type));
	put_num(l, "vni",
		m->tun_type == DPFLOW_TUN_VXLAN ||
		    m->tun_type == DPFLOW_TUN_GENEVE,
		m->tun_id);
	put_num(l, "key",
		m->tun_type == DPFLOW_TUN_GRE &&
		    (m->flags & DPFLOW_META_F_TUN_KEY),
		m->tun_id);
	put_bool(l, "tun_invalid", true, m->flags & DPFLOW_META_F_TUN_INVALID);
	put_key(l, "inner");
	if (tun) {
		put(l, "{");
		l->need_comma = false;
		put_hdr(l, &m->inner);
		put(l, "}");
	} else {
		put(l, "null");
	}
	put_str(l, "drop", m->drop ? dpflow_drop_name(m->drop) : NULL);
	put(l, "}\n");
}

/* Packet counts by layer type, tunnel and drop reason (--summary). */
struct summary {
	uint64_t pkts, bytes;
	uint64_t l3[4], l4[7], tun[5], inner_l4[7];
	uint64_t tun_invalid; /* UDP to a tunnel port, no tunnel in it */
	uint64_t drop[DPFLOW_DROP__COUNT];
};

static void summary_add(struct summary *s, const struct dpflow_pkt_meta *m)
{
	s->pkts++;
	s->bytes += m->data_len;
	s->drop[m->drop < DPFLOW_DROP__COUNT ? m->drop : 0]++;
	if (m->drop)
		return;
	s->l3[m->outer.l3_type & 3]++;
	s->l4[m->outer.l4_type < 7 ? m->outer.l4_type : 0]++;
	s->tun[m->tun_type < 5 ? m->tun_type : 0]++;
	s->tun_invalid += (m->flags & DPFLOW_META_F_TUN_INVALID) != 0;
	if (m->tun_type)
		s->inner_l4[m->inner.l4_type < 7 ? m->inner.l4_type : 0]++;
}

static void summary_row(const char *what, const char *name, uint64_t n,
			uint64_t total)
{
	if (n)
		printf("  %-8s %-26s %10lu  %5.1f%%\n", what, name,
		       (unsigned long)n, 100.0 * (double)n / (double)total);
}

static void summary_print(const struct summary *s)
{
	printf("%lu packets, %lu bytes\n", (unsigned long)s->pkts,
	       (unsigned long)s->bytes);
	if (!s->pkts)
		return;
	for (unsigned t = 1; t < 4; t++)
		summary_row("l3", dpflow_l3_name((uint8_t)t), s->l3[t],
			    s->pkts);
	for (unsigned t = 1; t < 7; t++)
		summary_row("l4", dpflow_l4_name((uint8_t)t), s->l4[t],
			    s->pkts);
	for (unsigned t = 1; t < 5; t++)
		summary_row("tunnel", dpflow_tun_name((uint8_t)t), s->tun[t],
			    s->pkts);
	summary_row("tunnel", "invalid (plain udp)", s->tun_invalid, s->pkts);
	for (unsigned t = 1; t < 7; t++)
		summary_row("inner l4", dpflow_l4_name((uint8_t)t),
			    s->inner_l4[t], s->pkts);
	for (unsigned d = 1; d < DPFLOW_DROP__COUNT; d++)
		summary_row("drop", dpflow_drop_name(d), s->drop[d], s->pkts);
}

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: dpflow inspect [--drops-only | --summary] pcap:FILE\n"
	    "\n"
	    "Parse every packet of a pcap or pcapng file and print one JSON\n"
	    "object per packet (format: docs/inspect.md). Exit 0 when the\n"
	    "file was read to its end; 1 when it cannot be opened or read\n"
	    "(a file cut mid-packet: the packets before it are printed,\n"
	    "then the error with the file and the packet number); 2 on a\n"
	    "usage error.\n"
	    "\n"
	    "  --drops-only   print only packets the parser drops\n"
	    "  --summary      print counts by layer, tunnel and drop reason\n"
	    "                 instead of one object per packet\n"
	    "  -h, --help     this text\n");
}

int cmd_inspect(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"drops-only", no_argument, NULL, 'd'},
	    {"summary", no_argument, NULL, 's'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct dpflow_pool_params pp = {.name = "inspect",
					.n_slots = INSPECT_POOL_SLOTS,
					.data_room = INSPECT_DATA_ROOM};
	struct dpflow_port_stats before = {0}, after;
	struct dpflow_error err = {0};
	struct dpflow_pool *pool = NULL;
	struct dpflow_port *port = NULL;
	uint32_t idx[1];
	char uri[4096];
	bool drops_only = false, summarise = false;
	struct summary sum = {0};
	uint64_t i = 0;
	struct line l;
	int c, rc = 1, dlt;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			drops_only = true;
			break;
		case 's':
			summarise = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return 2;
	}
	if (strncmp(argv[optind], "pcap:", 5) == 0)
		snprintf(uri, sizeof(uri), "%s", argv[optind]);
	else
		snprintf(uri, sizeof(uri), "pcap:rx=%s", argv[optind]);

	pool = dpflow_pool_create(&pp, &err);
	if (!pool)
		goto fail;
	port = dpflow_port_open(pool, uri, &err);
	if (!port)
		goto fail;
	dlt = dpflow_port_link_type(port);

	for (;;) {
		uint16_t n = dpflow_port_rx_burst(port, 0, idx, 1);
		struct dpflow_pkt_meta *m, port_drop;

		dpflow_port_stats_get(port, &after);
		if (n == 0 && (after.rx_oversize != before.rx_oversize ||
			       after.rx_skipped != before.rx_skipped)) {
			/* the port dropped this record before the parser */
			memset(&port_drop, 0, sizeof(port_drop));
			port_drop.drop = after.rx_oversize != before.rx_oversize
					     ? DPFLOW_DROP_PORT_OVERSIZE
					     : DPFLOW_DROP_PORT_UNSUPPORTED;
			m = &port_drop;
		} else if (n == 0) {
			if (dpflow_port_rx_done(port))
				break;
			continue;
		} else {
			dpflow_parse_burst(pool, idx, n);
			m = dpflow_pool_meta(pool, idx[0]);
		}
		before = after;
		if (summarise)
			summary_add(&sum, m);
		else if (!drops_only || m->drop) {
			put_packet(&l, i, dlt, m);
			fwrite(l.buf, 1, l.len, stdout);
		}
		i++;
		if (n)
			dpflow_pool_free_bulk(pool, idx, n);
	}
	if (summarise)
		summary_print(&sum);
	rc = fflush(stdout) == 0 ? 0 : 1;
	/* a capture cut short or unreadable: what was read is printed, the
	 * error names the file and the packet, and the exit status is 1 */
	if (!dpflow_port_finish(port, &err))
		goto out;
fail:
	rc = 1;
	fprintf(stderr, "dpflow inspect: %s\n", err.msg);
out:
	dpflow_port_close(port);
	dpflow_pool_destroy(pool);
	return rc;
}
