/*
 * The l4lb workload's pipeline: the Maglev table, the config text, the
 * client flows and their frames (bench_l4lb_pipe.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/dpflow.h"

#include "bench_l4lb_pipe.h"

/* 64-bit FNV-1a of @s, then a splitmix finaliser with @salt. */
static uint64_t name_hash(const char *s, uint64_t salt)
{
	uint64_t h = 0xcbf29ce484222325ull ^ salt;

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
	h ^= h >> 30;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 27;
	h *= 0x94d049bb133111ebull;
	return h ^ (h >> 31);
}

static int is_prime(uint32_t m)
{
	if (m < 2)
		return 0;
	for (uint32_t d = 2; (uint64_t)d * d <= m; d++)
		if (m % d == 0)
			return 0;
	return 1;
}

int l4lb_maglev_fill(uint32_t m, uint32_t n, uint32_t *table)
{
	uint32_t *offset, *skip, *next, filled = 0;

	if (!is_prime(m) || n == 0 || n > m)
		return -1;
	offset = malloc(n * sizeof(*offset));
	skip = malloc(n * sizeof(*skip));
	next = calloc(n, sizeof(*next));
	if (!offset || !skip || !next) {
		free(offset);
		free(skip);
		free(next);
		return -1;
	}
	for (uint32_t b = 0; b < n; b++) {
		char name[32];

		snprintf(name, sizeof(name), "backend-%u", b);
		offset[b] = (uint32_t)(name_hash(name, 1) % m);
		skip[b] = (uint32_t)(name_hash(name, 2) % (m - 1)) + 1;
	}
	for (uint32_t i = 0; i < m; i++)
		table[i] = UINT32_MAX;
	/* round robin: each backend takes the next free slot of its
	 * permutation offset + j * skip (mod m) */
	while (filled < m)
		for (uint32_t b = 0; b < n && filled < m; b++) {
			uint32_t c;

			do {
				c = (uint32_t)((offset[b] +
						(uint64_t)next[b] * skip[b]) %
					       m);
				next[b]++;
			} while (table[c] != UINT32_MAX);
			table[c] = b;
			filled++;
		}
	free(offset);
	free(skip);
	free(next);
	return 0;
}

/* Append to a growing string; -1 when out of memory. */
struct sbuf {
	char *s;
	size_t len, cap;
};

static int sb_printf(struct sbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int sb_printf(struct sbuf *b, const char *fmt, ...)
{
	for (;;) {
		va_list ap;
		char *grown;
		int n;

		va_start(ap, fmt);
		n = vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
		if (n < 0)
			return -1;
		if ((size_t)n < b->cap - b->len) {
			b->len += (size_t)n;
			return 0;
		}
		b->cap = (b->cap + (size_t)n + 1) * 2;
		grown = realloc(b->s, b->cap);
		if (!grown)
			return -1;
		b->s = grown;
	}
}

static void ip4_str(uint32_t a, char *out)
{
	sprintf(out, "%u.%u.%u.%u", a >> 24, (a >> 16) & 255, (a >> 8) & 255,
		a & 255);
}

char *l4lb_yaml(const struct l4lb_params *p, const char *out_fwd)
{
	struct sbuf b = {malloc(4096), 0, 4096};
	uint32_t *table = NULL;
	uint32_t ct_size = 1024;
	char vip[16], be[16];
	int rc = 0;

	if (!b.s)
		goto oom;
	if (p->backends == 0 || p->backends > L4LB_PIPE_BACKENDS_MAX ||
	    p->flows == 0 || p->flows > (1u << 24)) {
		fprintf(stderr, "bench l4lb: 1..%u backends and 1..%u flows\n",
			L4LB_PIPE_BACKENDS_MAX, 1u << 24);
		free(b.s);
		return NULL;
	}
	table = malloc(p->maglev * sizeof(*table));
	if (!table)
		goto oom;
	if (l4lb_maglev_fill(p->maglev, p->backends, table)) {
		fprintf(stderr,
			"bench l4lb: a Maglev table of %u slots for %u "
			"backends: the size must be a prime, at least the "
			"backends\n",
			p->maglev, p->backends);
		free(table);
		free(b.s);
		return NULL;
	}
	/* room for every flow at half load; with NAT the table has three
	 * slots a connection (its key and its reply key): an eighth over */
	while (ct_size < 2 * p->flows)
		ct_size *= 2;
	if (p->full_nat)
		ct_size = p->flows + p->flows / 8 + 64;
	ip4_str(L4LB_VIP, vip);
	rc |=
	    sb_printf(&b,
		      "ports:\n"
		      "  - {name: in, uri: 'ring:l4lb_in,size=1024'}\n"
		      "  - {name: out, uri: 'ring:l4lb_out,size=1024'}\n"
		      "pipes:\n"
		      "  - name: vip\n"
		      "    type: basic\n"
		      "    root: in\n"
		      "    size: 16\n"
		      "    match: [outer.ipv4.dst, outer.ip.proto, "
		      "outer.l4.dport]\n"
		      "    fwd: {pipe: maglev}\n"
		      "    miss: drop\n"
		      "    entries:\n"
		      "      - {match: {outer.ipv4.dst: %s, outer.ip.proto: 6, "
		      "outer.l4.dport: %u}}\n"
		      "  - name: maglev\n"
		      "    type: hash\n"
		      "    size: %u\n"
		      "    match: [outer.ipv4.src, outer.ipv4.dst, "
		      "outer.ip.proto, outer.l4.sport, outer.l4.dport]\n"
		      "    actions:\n"
		      "      - [{set: {field: meta.reg0, value: per-entry}}]\n"
		      "    fwd: {pipe: conn}\n"
		      "    miss: drop\n"
		      "    entries:\n",
		      vip, L4LB_VIP_PORT, p->maglev);
	for (uint32_t i = 0; i < p->maglev && !rc; i++)
		rc |= sb_printf(&b, "      - {index: %u, values: [%u]}\n", i,
				table[i] + 1);
	if (p->full_nat) {
		char snat[16];

		ip4_str(L4LB_SNAT, snat);
		rc |= sb_printf(&b,
				"  - name: backends\n"
				"    type: basic\n"
				"    size: %u\n"
				"    match: [meta.reg0]\n"
				"    actions:\n"
				"      - [{nat_dst_ip: per-entry}, "
				"{nat_dst_port: %u}]\n"
				"    fwd: drop\n"
				"    entries:\n",
				p->backends * 2, L4LB_BACKEND_PORT);
		for (uint32_t k = 0; k < p->backends && !rc; k++) {
			ip4_str(L4LB_BACKEND_NET + k + 1, be);
			rc |= sb_printf(&b,
					"      - {match: {meta.reg0: %u}, "
					"values: [%s]}\n",
					k + 1, be);
		}
		rc |= sb_printf(
		    &b,
		    "  - name: conn\n"
		    "    type: ct\n"
		    "    size: %u\n"
		    "    ct:\n"
		    "      save: [meta.reg0]\n"
		    "      dnat: {pipe: backends, reg: meta.reg0}\n"
		    "      snat: {addrs: [%s], ports: [1024, 65535]}\n"
		    "      replace: true\n"
		    "    fwd: {pipe: dnat}\n"
		    "    miss: drop\n"
		    "  - name: dnat\n"
		    "    type: basic\n"
		    "    size: %u\n"
		    "    match: [meta.reg0]\n"
		    "    actions:\n"
		    "      - [{set_mac_dst: per-entry}]\n"
		    "    monitor: {counter: true}\n"
		    "    fwd: %s\n"
		    "    miss: drop\n"
		    "    entries:\n",
		    ct_size, snat, p->backends * 2, out_fwd);
		for (uint32_t k = 0; k < p->backends && !rc; k++)
			rc |= sb_printf(&b,
					"      - {match: {meta.reg0: %u}, "
					"values: ['02:00:00:01:%02x:%02x']}\n",
					k + 1, (k + 1) >> 8, (k + 1) & 255);
	} else {
		rc |= sb_printf(&b,
				"  - name: conn\n"
				"    type: ct\n"
				"    size: %u\n"
				"    ct: {user_reg: meta.reg0}\n"
				"    fwd: {pipe: dnat}\n"
				"    miss: drop\n"
				"  - name: dnat\n"
				"    type: basic\n"
				"    size: %u\n"
				"    match: [meta.reg0]\n"
				"    actions:\n"
				"      - [{nat_dst_ip: per-entry}]\n"
				"    monitor: {counter: true}\n"
				"    fwd: %s\n"
				"    miss: drop\n"
				"    entries:\n",
				ct_size, p->backends * 2, out_fwd);
		for (uint32_t k = 0; k < p->backends && !rc; k++) {
			ip4_str(L4LB_BACKEND_NET + k + 1, be);
			rc |= sb_printf(&b,
					"      - {match: {meta.reg0: %u}, "
					"values: [%s]}\n",
					k + 1, be);
		}
	}
	free(table);
	if (!rc)
		return b.s;
oom:
	fprintf(stderr, "bench l4lb: out of memory\n");
	free(b.s);
	return NULL;
}

/* A bijection on 24-bit words. */
static uint32_t scramble24(uint32_t x)
{
	x &= 0xffffff;
	x = (x * 0x9e3779u + 0x5bd1e9u) & 0xffffff;
	x ^= x >> 11;
	x = (x * 0x2c1b3du) & 0xffffff;
	x ^= x >> 13;
	return x;
}

void l4lb_flow(const struct l4lb_params *p, uint32_t i, struct bench_flow *f)
{
	uint32_t src = 0x0a000000u | scramble24(i ^ (uint32_t)p->seed);
	uint32_t dst = L4LB_VIP;
	uint32_t h = bench_scramble(i + (uint32_t)(p->seed >> 32) * 7919u);

	/* distinct sources: distinct flows */
	f->src[0] = (uint8_t)(src >> 24);
	f->src[1] = (uint8_t)(src >> 16);
	f->src[2] = (uint8_t)(src >> 8);
	f->src[3] = (uint8_t)src;
	f->dst[0] = (uint8_t)(dst >> 24);
	f->dst[1] = (uint8_t)(dst >> 16);
	f->dst[2] = (uint8_t)(dst >> 8);
	f->dst[3] = (uint8_t)dst;
	f->sport = (uint16_t)(1024 + h % 64512);
	f->dport = L4LB_VIP_PORT;
	f->proto = 6;
}

uint32_t l4lb_frame(const struct bench_flow *f, uint8_t *buf)
{
	static const uint8_t smac[6] = {0x02, 0, 0, 0, 0, 1},
			     dmac[6] = {0x02, 0, 0, 0, 0, 2};
	struct dpflow_gen_spec s;

	memset(&s, 0, sizeof(s));
	s.has_eth = true;
	memcpy(s.src_mac, smac, 6);
	memcpy(s.dst_mac, dmac, 6);
	s.outer.l3_type = DPFLOW_L3_IPV4;
	s.outer.l4_type = DPFLOW_L4_TCP;
	memcpy(s.outer.src, f->src, 4);
	memcpy(s.outer.dst, f->dst, 4);
	s.outer.sport = f->sport;
	s.outer.dport = f->dport;
	s.outer.ttl = 64;
	s.outer.tcp_flags = 0x10; /* ACK */
	memset(s.outer.ipv6_ext, 0xff, sizeof(s.outer.ipv6_ext));
	s.frame_len = 64;
	return dpflow_gen_build(&s, buf, 64);
}
