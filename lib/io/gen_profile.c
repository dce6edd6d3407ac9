/*
 * Traffic profiles and the seeded generator behind dpflow_gen_next().
 *
 * A profile says how much of what: counts, flows, sizes, shares of
 * protocols, IPv6, VLAN tags, tunnels, fragments and options. At creation
 * the generator gives every flow its fixed attributes (protocol, IP
 * versions, tunnel, tags), each attribute dealt to an exact share of the
 * flows (largest remainder) in a seeded random order; per packet it draws a
 * flow uniformly, then fragments, options and the IMIX size. Everything
 * comes from one xoshiro256** stream seeded through splitmix64, so a
 * profile and a seed always give the same bytes. Malformed mode cycles
 * through a fixed list of single-defect variants (FOREACH_VARIANT) and two
 * random ones. docs/gen.md describes the profiles and variants.
 *
 * A generator belongs to one thread.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/gen.h"
#include "dpflow/pkt_edit.h"

#define COUNT_MAX   (UINT64_C(1) << 40)
#define FLOWS_MAX   (UINT32_C(1) << 22) /* keeps IPv4 sources distinct */
#define SIZE_MIN    14
#define SIZE_MAX_   9600 /* a jumbo frame */
#define IMIX_BLOCK  12	 /* 7 x 64, 4 x 576, 1 x 1500 */
#define VXLAN_PORT  4789
#define GENEVE_PORT 6081
#define EXT_END	    0xff

/* --- profiles ---------------------------------------------------------- */

static const struct dpflow_gen_profile base_profile = {
    .count = 1000,
    .flows = 16,
    .size = 64,
    .pct_tcp = 60,
    .pct_udp = 30,
    .pct_icmp = 10,
    .seed = 1,
    .pct_vlan = 100,
    .pct_qinq = 100,
};

int dpflow_gen_profile_init(struct dpflow_gen_profile *p, const char *name,
			    struct dpflow_error *err)
{
	if (!p)
		return dpflow_error_set(err, EINVAL, "profile", "no profile");
	if (!name)
		name = "default";
	*p = base_profile;
	if (!strcmp(name, "default"))
		return 0;
	if (!strcmp(name, "imix")) {
		p->size = 0;
		p->count = 1200;
		p->flows = 64;
		return 0;
	}
	if (!strcmp(name, "vxlan")) {
		p->size = 0;
		p->flows = 64;
		p->pct_vxlan = 100;
		return 0;
	}
	if (!strcmp(name, "all")) {
		/* Every header kind, flows enough for every pairing of outer
		 * and inner IP versions per tunnel (docs/gen.md). */
		p->count = 3000;
		p->flows = 512;
		p->size = 0;
		p->pct_tcp = 30;
		p->pct_udp = 30;
		p->pct_icmp = 20;
		p->pct_sctp = 20;
		p->pct_ipv6 = 50;
		p->vlan = 100;
		p->pct_vlan = 67;
		p->qinq = 200;
		p->pct_qinq = 50;
		p->pct_vxlan = 15;
		p->pct_geneve = 15;
		p->pct_gre = 15;
		p->pct_ipip = 15;
		p->pct_frag = 20;
		p->pct_ipv4_opt = 30;
		p->pct_ipv6_ext = 50;
		return 0;
	}
	return dpflow_error_set(err, EINVAL, "profile",
				"profile '%s': unknown (default, all, imix, "
				"vxlan)",
				name);
}

/* Decimal, or hex with 0x; no sign, no spaces, within [min, max]. */
static bool parse_u64(const char *v, uint64_t min, uint64_t max, uint64_t *out)
{
	int base = 10;
	char *end;

	if (!v || !*v || *v == '-' || *v == '+' || *v == ' ')
		return false;
	if (v[0] == '0' && (v[1] == 'x' || v[1] == 'X')) {
		base = 16;
		v += 2;
		if (!*v)
			return false;
	}
	errno = 0;
	unsigned long long x = strtoull(v, &end, base);
	if (errno || *end || x < min || x > max)
		return false;
	*out = x;
	return true;
}

static int bad_pct(struct dpflow_error *err, const char *key, const char *v)
{
	return dpflow_error_set(err, EINVAL, key,
				"%s '%s': not a percentage (0..100)", key, v);
}

static int set_pct(uint8_t *dst, const char *key, const char *v,
		   struct dpflow_error *err)
{
	uint64_t x;

	if (!parse_u64(v, 0, 100, &x))
		return bad_pct(err, key, v);
	*dst = (uint8_t)x;
	return 0;
}

/*
 * "name:PCT,name:PCT" over @names; a name left out gets 0. Fills @out only
 * when the whole list parses.
 */
static int set_pct_list(uint8_t *const *out, const char *const *names,
			unsigned n, const char *key, const char *v,
			struct dpflow_error *err)
{
	uint8_t val[8] = {0};
	bool seen[8] = {false};
	const char *s = v ? v : "";

	if (!*s)
		return dpflow_error_set(err, EINVAL, key, "%s '': empty", key);
	while (*s) {
		size_t tl = strcspn(s, ",");
		const char *colon = memchr(s, ':', tl);
		char num[8];
		uint64_t x;
		unsigned i;

		for (i = 0; i < n; i++)
			if (colon && strlen(names[i]) == (size_t)(colon - s) &&
			    !strncmp(names[i], s, (size_t)(colon - s)))
				break;
		if (!colon || i == n)
			return dpflow_error_set(
			    err, EINVAL, key,
			    "%s '%s': '%.*s' is not NAME:PCT with a known "
			    "NAME",
			    key, v, (int)tl, s);
		if (seen[i])
			return dpflow_error_set(err, EINVAL, key,
						"%s '%s': '%s' given twice",
						key, v, names[i]);
		size_t nl = tl - (size_t)(colon - s) - 1;
		if (nl >= sizeof(num))
			nl = sizeof(num) - 1;
		memcpy(num, colon + 1, nl);
		num[nl] = 0;
		if (!parse_u64(num, 0, 100, &x))
			return dpflow_error_set(
			    err, EINVAL, key,
			    "%s '%s': '%.*s' is not a percentage (0..100)", key,
			    v, (int)tl, s);
		seen[i] = true;
		val[i] = (uint8_t)x;
		s += tl;
		if (*s == ',' && !*++s)
			return dpflow_error_set(
			    err, EINVAL, key, "%s '%s': trailing ','", key, v);
	}
	for (unsigned i = 0; i < n; i++)
		*out[i] = val[i];
	return 0;
}

/* "ID" or "ID:PCT"; ID 0..4094 (0: untagged). */
static int set_vlan(uint16_t *id, uint8_t *pct, const char *key, const char *v,
		    struct dpflow_error *err)
{
	char buf[16];
	const char *colon = v ? strchr(v, ':') : NULL;
	size_t il = colon ? (size_t)(colon - v) : (v ? strlen(v) : 0);
	uint64_t x, y = 100;

	if (il >= sizeof(buf))
		il = sizeof(buf) - 1;
	if (v)
		memcpy(buf, v, il);
	buf[il] = 0;
	if (!parse_u64(buf, 0, 4094, &x) ||
	    (colon && !parse_u64(colon + 1, 0, 100, &y)))
		return dpflow_error_set(err, EINVAL, key,
					"%s '%s': not ID (0..4094) or "
					"ID:PCT (PCT 0..100)",
					key, v ? v : "");
	*id = (uint16_t)x;
	*pct = (uint8_t)y;
	return 0;
}

int dpflow_gen_profile_set(struct dpflow_gen_profile *p, const char *key,
			   const char *value, struct dpflow_error *err)
{
	static const char *const mix_names[] = {"tcp", "udp", "icmp", "sctp"};
	static const char *const tun_names[] = {"vxlan", "geneve", "gre",
						"ipip"};
	const char *v = value ? value : "";
	uint64_t x;

	if (!p || !key)
		return dpflow_error_set(err, EINVAL, "key", "no key");
	if (!strcmp(key, "count")) {
		if (!parse_u64(v, 1, COUNT_MAX, &x))
			return dpflow_error_set(err, EINVAL, "count",
						"count '%s': not a number of "
						"packets (1..%" PRIu64 ")",
						v, COUNT_MAX);
		p->count = x;
	} else if (!strcmp(key, "flows")) {
		if (!parse_u64(v, 1, FLOWS_MAX, &x))
			return dpflow_error_set(err, EINVAL, "flows",
						"flows '%s': not a flow count "
						"(1..%" PRIu32 ")",
						v, FLOWS_MAX);
		p->flows = (uint32_t)x;
	} else if (!strcmp(key, "size")) {
		if (!strcmp(v, "imix")) {
			p->size = 0;
		} else if (parse_u64(v, SIZE_MIN, SIZE_MAX_, &x)) {
			p->size = (uint16_t)x;
		} else {
			return dpflow_error_set(err, EINVAL, "size",
						"size '%s': not a frame length "
						"(%d..%d) or 'imix'",
						v, SIZE_MIN, SIZE_MAX_);
		}
	} else if (!strcmp(key, "mix")) {
		struct dpflow_gen_profile t = *p;
		uint8_t *const out[] = {&t.pct_tcp, &t.pct_udp, &t.pct_icmp,
					&t.pct_sctp};
		int rc = set_pct_list(out, mix_names, 4, "mix", v, err);
		if (rc)
			return rc;
		if (t.pct_tcp + t.pct_udp + t.pct_icmp + t.pct_sctp != 100)
			return dpflow_error_set(
			    err, EINVAL, "mix",
			    "mix '%s': shares sum to %d, "
			    "not 100",
			    v, t.pct_tcp + t.pct_udp + t.pct_icmp + t.pct_sctp);
		*p = t;
	} else if (!strcmp(key, "tunnel")) {
		struct dpflow_gen_profile t = *p;
		uint8_t *const out[] = {&t.pct_vxlan, &t.pct_geneve, &t.pct_gre,
					&t.pct_ipip};
		int rc = set_pct_list(out, tun_names, 4, "tunnel", v, err);
		if (rc)
			return rc;
		if (t.pct_vxlan + t.pct_geneve + t.pct_gre + t.pct_ipip > 100)
			return dpflow_error_set(err, EINVAL, "tunnel",
						"tunnel '%s': shares sum to "
						"%d, more than 100",
						v,
						t.pct_vxlan + t.pct_geneve +
						    t.pct_gre + t.pct_ipip);
		*p = t;
	} else if (!strcmp(key, "ipv6")) {
		return set_pct(&p->pct_ipv6, "ipv6", v, err);
	} else if (!strcmp(key, "frag")) {
		return set_pct(&p->pct_frag, "frag", v, err);
	} else if (!strcmp(key, "ipv4-opt")) {
		return set_pct(&p->pct_ipv4_opt, "ipv4-opt", v, err);
	} else if (!strcmp(key, "ipv6-ext")) {
		return set_pct(&p->pct_ipv6_ext, "ipv6-ext", v, err);
	} else if (!strcmp(key, "vlan")) {
		return set_vlan(&p->vlan, &p->pct_vlan, "vlan", v, err);
	} else if (!strcmp(key, "qinq")) {
		return set_vlan(&p->qinq, &p->pct_qinq, "qinq", v, err);
	} else if (!strcmp(key, "seed")) {
		if (!parse_u64(v, 0, UINT64_MAX, &x))
			return dpflow_error_set(err, EINVAL, "seed",
						"seed '%s': not a 64-bit "
						"number",
						v);
		p->seed = x;
	} else if (!strcmp(key, "malformed")) {
		if (strcmp(v, "0") && strcmp(v, "1"))
			return dpflow_error_set(err, EINVAL, "malformed",
						"malformed '%s': not 0 or 1",
						v);
		p->malformed = v[0] == '1';
	} else {
		return dpflow_error_set(
		    err, EINVAL, "key",
		    "key '%s' (value '%s'): unknown (count, "
		    "flows, size, mix, ipv6, vlan, qinq, "
		    "tunnel, frag, ipv4-opt, ipv6-ext, "
		    "seed, malformed)",
		    key, v);
	}
	return 0;
}

/* Checks a profile filled by hand or by keys: the cross-key rules too. */
static int profile_check(const struct dpflow_gen_profile *p,
			 struct dpflow_error *err)
{
	unsigned mix = 0u + p->pct_tcp + p->pct_udp + p->pct_icmp + p->pct_sctp;
	unsigned tun =
	    0u + p->pct_vxlan + p->pct_geneve + p->pct_gre + p->pct_ipip;

	if (p->count < 1 || p->count > COUNT_MAX)
		return dpflow_error_set(err, EINVAL, "count",
					"count %" PRIu64 ": not in 1..%" PRIu64,
					p->count, COUNT_MAX);
	if (p->flows < 1 || p->flows > FLOWS_MAX)
		return dpflow_error_set(err, EINVAL, "flows",
					"flows %" PRIu32 ": not in 1..%" PRIu32,
					p->flows, FLOWS_MAX);
	if (p->size && (p->size < SIZE_MIN || p->size > SIZE_MAX_))
		return dpflow_error_set(err, EINVAL, "size",
					"size %u: not in %d..%d (0: imix)",
					p->size, SIZE_MIN, SIZE_MAX_);
	if (mix != 100)
		return dpflow_error_set(err, EINVAL, "mix",
					"mix: shares sum to %u, not 100", mix);
	if (tun > 100)
		return dpflow_error_set(err, EINVAL, "tunnel",
					"tunnel: shares sum to %u, more than "
					"100",
					tun);
	const struct {
		const char *key;
		uint8_t pct;
	} pcts[] = {
	    {"ipv6", p->pct_ipv6},	   {"frag", p->pct_frag},
	    {"ipv4-opt", p->pct_ipv4_opt}, {"ipv6-ext", p->pct_ipv6_ext},
	    {"vlan", p->pct_vlan},	   {"qinq", p->pct_qinq}};
	for (size_t i = 0; i < sizeof(pcts) / sizeof(pcts[0]); i++)
		if (pcts[i].pct > 100)
			return dpflow_error_set(err, EINVAL, pcts[i].key,
						"%s: share %u is above 100",
						pcts[i].key, pcts[i].pct);
	if (p->vlan > 4094 || p->qinq > 4094)
		return dpflow_error_set(err, EINVAL,
					p->vlan > 4094 ? "vlan" : "qinq",
					"VLAN id %u: not in 0..4094",
					p->vlan > 4094 ? p->vlan : p->qinq);
	if (p->qinq && !p->vlan)
		return dpflow_error_set(err, EINVAL, "qinq",
					"qinq %u: needs an inner tag (vlan)",
					p->qinq);
	return 0;
}

/* --- the generator ----------------------------------------------------- */

/* A flow's fixed attributes; its addresses and ports come from its id. */
struct gen_flow {
	uint8_t l4;	    /* DPFLOW_L4_TCP/UDP/ICMP/SCTP (ICMP: v4 or v6) */
	uint8_t v6;	    /* the (inner) packet is IPv6 */
	uint8_t outer_v6;   /* tunnel endpoints are IPv6 */
	uint8_t tun;	    /* enum dpflow_tun_type */
	uint8_t n_vlan;	    /* 0, 1 (vlan) or 2 (qinq, vlan) */
	uint8_t inner_eth;  /* GENEVE/GRE carry Ethernet */
	uint8_t gre;	    /* bit 0 checksum, 1 key, 2 sequence */
	uint8_t geneve_opt; /* GENEVE option bytes */
};

struct dpflow_gen {
	struct dpflow_gen_profile p;
	uint64_t rng[4]; /* xoshiro256** */
	uint64_t i;	 /* packets built */
	uint64_t sized;	 /* packets sized (IMIX draws) */
	uint16_t imix[IMIX_BLOCK];
	struct gen_flow *flows;
};

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += UINT64_C(0x9e3779b97f4a7c15));
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static uint64_t rnd(struct dpflow_gen *g)
{
	uint64_t *s = g->rng;
	uint64_t r = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return r;
}

/* Uniform in [0, n), n > 0 (Lemire's multiply and reject). */
static uint32_t below(struct dpflow_gen *g, uint32_t n)
{
	uint64_t m = (rnd(g) >> 32) * n;

	if ((uint32_t)m < n) {
		uint32_t t = (0u - n) % n;
		while ((uint32_t)m < t)
			m = (rnd(g) >> 32) * n;
	}
	return (uint32_t)(m >> 32);
}

static bool chance(struct dpflow_gen *g, unsigned pct)
{
	return below(g, 100) < pct;
}

/*
 * Deal values 0..k-1 to @n flows, value j to n * w[j] / sum(w) of them
 * (largest remainder, ties to the lower j), in a random order.
 */
static void deal(struct dpflow_gen *g, uint8_t *vals, uint32_t n,
		 const uint32_t *w, unsigned k)
{
	uint64_t total = 0, rem[8];
	uint32_t cnt[8], done = 0, f = 0;

	for (unsigned j = 0; j < k; j++)
		total += w[j];
	for (unsigned j = 0; j < k; j++) {
		cnt[j] = (uint32_t)((uint64_t)n * w[j] / total);
		rem[j] = (uint64_t)n * w[j] % total;
		done += cnt[j];
	}
	while (done < n) {
		unsigned best = 0;
		for (unsigned j = 1; j < k; j++)
			if (rem[j] > rem[best])
				best = j;
		cnt[best]++;
		rem[best] = 0;
		done++;
	}
	for (unsigned j = 0; j < k; j++)
		for (uint32_t c = 0; c < cnt[j]; c++)
			vals[f++] = (uint8_t)j;
	for (uint32_t i = n - 1; i > 0; i--) {
		uint32_t r = below(g, i + 1);
		uint8_t t = vals[i];
		vals[i] = vals[r];
		vals[r] = t;
	}
}

static void make_flows(struct dpflow_gen *g, uint8_t *vals)
{
	const struct dpflow_gen_profile *p = &g->p;
	uint32_t n = p->flows;
	const uint32_t l4w[] = {p->pct_tcp, p->pct_udp, p->pct_icmp,
				p->pct_sctp};
	const uint8_t l4v[] = {DPFLOW_L4_TCP, DPFLOW_L4_UDP, DPFLOW_L4_ICMP,
			       DPFLOW_L4_SCTP};
	const uint32_t v6w[] = {100u - p->pct_ipv6, p->pct_ipv6};
	const uint32_t tunw[] = {
	    100u - p->pct_vxlan - p->pct_geneve - p->pct_gre - p->pct_ipip,
	    p->pct_vxlan, p->pct_geneve, p->pct_gre, p->pct_ipip};
	const uint32_t pv = p->vlan ? p->pct_vlan : 0;
	const uint32_t pq = p->qinq ? p->pct_qinq : 0;
	const uint32_t vlanw[] = {(100 - pv) * 100, pv * (100 - pq), pv * pq};
	const uint32_t half[] = {1, 1};
	const uint32_t quarter[] = {1, 1, 1, 1};
	const uint32_t eighth[] = {1, 1, 1, 1, 1, 1, 1, 1};
	static const uint8_t geneve_opt[] = {0, 4, 12, 24};
	uint32_t f;

	deal(g, vals, n, l4w, 4);
	for (f = 0; f < n; f++)
		g->flows[f].l4 = l4v[vals[f]];
	deal(g, vals, n, v6w, 2);
	for (f = 0; f < n; f++)
		g->flows[f].v6 = vals[f];
	deal(g, vals, n, v6w, 2);
	for (f = 0; f < n; f++)
		g->flows[f].outer_v6 = vals[f];
	deal(g, vals, n, tunw, 5); /* values are enum dpflow_tun_type */
	for (f = 0; f < n; f++)
		g->flows[f].tun = vals[f];
	deal(g, vals, n, vlanw, 3);
	for (f = 0; f < n; f++)
		g->flows[f].n_vlan = vals[f];
	deal(g, vals, n, half, 2);
	for (f = 0; f < n; f++)
		g->flows[f].inner_eth = vals[f];
	deal(g, vals, n, eighth, 8);
	for (f = 0; f < n; f++)
		g->flows[f].gre = vals[f];
	deal(g, vals, n, quarter, 4);
	for (f = 0; f < n; f++)
		g->flows[f].geneve_opt = geneve_opt[vals[f]];
}

struct dpflow_gen *dpflow_gen_create(const struct dpflow_gen_profile *p,
				     struct dpflow_error *err)
{
	struct dpflow_gen *g = NULL;
	uint8_t *vals = NULL;
	uint64_t x;

	if (!p) {
		dpflow_error_set(err, EINVAL, "profile", "no profile");
		return NULL;
	}
	if (profile_check(p, err))
		return NULL;
	g = calloc(1, sizeof(*g));
	if (!g)
		goto err_nomem;
	g->p = *p;
	g->flows = calloc(p->flows, sizeof(*g->flows));
	vals = malloc(p->flows);
	if (!g->flows || !vals)
		goto err_nomem;
	x = p->seed;
	for (int i = 0; i < 4; i++)
		g->rng[i] = splitmix64(&x);
	make_flows(g, vals);
	free(vals);
	return g;

err_nomem:
	free(vals);
	dpflow_gen_destroy(g);
	dpflow_error_set(err, ENOMEM, "flows",
			 "no memory for %" PRIu32 " flows", p->flows);
	return NULL;
}

void dpflow_gen_destroy(struct dpflow_gen *g)
{
	if (!g)
		return;
	free(g->flows);
	free(g);
}

/* --- packet specs ------------------------------------------------------ */

static uint32_t mix32(uint32_t x)
{
	x ^= x >> 16;
	x *= 0x7feb352du;
	x ^= x >> 15;
	x *= 0x846ca68bu;
	return x ^ (x >> 16);
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* 10.0.0.0/8 as a host-order word, or fd00:0:0:NET::HOST. */
static void addr(uint8_t *a, bool v6, uint32_t v4, uint16_t net6,
		 uint32_t host6)
{
	memset(a, 0, 16);
	if (!v6) {
		put_be32(a, v4);
		return;
	}
	a[0] = 0xfd;
	a[6] = (uint8_t)(net6 >> 8);
	a[7] = (uint8_t)net6;
	put_be32(a + 12, host6);
}

/* The flow's 5-tuple (docs/gen.md, "Flows"). */
static void flow_l3(struct dpflow_gen_l3 *l3, uint32_t f, bool v6, uint8_t l4)
{
	memset(l3->ipv6_ext, EXT_END, sizeof(l3->ipv6_ext));
	l3->l3_type = v6 ? DPFLOW_L3_IPV6 : DPFLOW_L3_IPV4;
	l3->l4_type = l4 == DPFLOW_L4_ICMP && v6 ? DPFLOW_L4_ICMPV6 : l4;
	addr(l3->src, v6, 0x0a000000u | ((f + 1) & 0x3fffff), 1, f + 1);
	addr(l3->dst, v6, 0x0a400000u | (1 + f % 254), 2, 1 + f % 254);
	l3->ttl = 64;
	l3->tos = (uint8_t)((f % 8) << 2);
	if (l4 == DPFLOW_L4_ICMP) {
		l3->sport = v6 ? 128 : 8; /* echo request, code 0 */
		l3->icmp_id = (uint16_t)f;
	} else {
		l3->sport = (uint16_t)(20000 + f % 28000);
		l3->dport = (uint16_t)(7000 + f % 1000);
	}
}

/* Tunnel endpoints and outer UDP source (a hash of the flow, as VTEPs). */
static void flow_outer(struct dpflow_gen_spec *s, uint32_t f, bool v6)
{
	struct dpflow_gen_l3 *o = &s->outer;

	memset(o->ipv6_ext, EXT_END, sizeof(o->ipv6_ext));
	o->l3_type = v6 ? DPFLOW_L3_IPV6 : DPFLOW_L3_IPV4;
	addr(o->src, v6, 0x0ac80000u | (1 + f % 16), 0xc8, 1 + f % 16);
	addr(o->dst, v6, 0x0ac80101u, 0xc9, 1);
	o->ttl = 64;
	if (s->tun_type == DPFLOW_TUN_VXLAN ||
	    s->tun_type == DPFLOW_TUN_GENEVE) {
		o->l4_type = DPFLOW_L4_UDP;
		o->sport = (uint16_t)(49152 + mix32(f) % 16384);
		o->dport =
		    s->tun_type == DPFLOW_TUN_VXLAN ? VXLAN_PORT : GENEVE_PORT;
	}
	s->tun_id = (1000 + f) & 0xffffff;
}

static void flow_macs(struct dpflow_gen_spec *s, uint32_t f)
{
	static const uint8_t dst[6] = {0x02, 0, 0, 0xff, 0, 0x01};
	static const uint8_t idst[6] = {0x02, 0x01, 0, 0xff, 0, 0x01};
	uint8_t src[6] = {
	    0x02, 0, 0, (uint8_t)(f >> 16), (uint8_t)(f >> 8), (uint8_t)f};

	s->has_eth = true;
	memcpy(s->dst_mac, dst, 6);
	memcpy(s->src_mac, src, 6);
	memcpy(s->inner_dst_mac, idst, 6);
	src[1] = 0x01;
	memcpy(s->inner_src_mac, src, 6);
}

/* Extension headers listed after the fragment header. */
static uint32_t ext_after_frag(const struct dpflow_gen_l3 *l3)
{
	uint32_t n = 0;
	bool after = false;

	for (unsigned i = 0; i < sizeof(l3->ipv6_ext); i++) {
		if (l3->ipv6_ext[i] == EXT_END)
			break;
		n += after;
		after |= l3->ipv6_ext[i] == 44;
	}
	return n;
}

/* Options or extension headers for one IP header, per the profile. */
static void ip_extras(struct dpflow_gen *g, struct dpflow_gen_l3 *l3)
{
	if (l3->l3_type == DPFLOW_L3_IPV4) {
		if (chance(g, g->p.pct_ipv4_opt))
			l3->ipv4_opt_len = (uint8_t)(4 * (1 + below(g, 10)));
		return;
	}
	/*
	 * RFC 8200 order: hop-by-hop, routing, fragment, destination. The
	 * list names exactly the headers on the wire: the fragment header
	 * of a fragment is listed, and a later fragment has nothing after
	 * it (the destination options travel in the first fragment).
	 */
	uint32_t m = chance(g, g->p.pct_ipv6_ext) ? 1 + below(g, 7) : 0;
	unsigned n = 0;
	if (m & 1)
		l3->ipv6_ext[n++] = 0;
	if (m & 2)
		l3->ipv6_ext[n++] = 43;
	if (l3->frag != DPFLOW_FRAG_NONE)
		l3->ipv6_ext[n++] = 44;
	if ((m & 4) && l3->frag != DPFLOW_FRAG_LATER)
		l3->ipv6_ext[n++] = 60;
}

static uint32_t l4_hdr_len(uint8_t l4)
{
	switch (l4) {
	case DPFLOW_L4_TCP:
		return 20;
	case DPFLOW_L4_SCTP:
		return 28;
	case DPFLOW_L4_NONE:
		return 0;
	default:
		return 8;
	}
}

static const uint8_t tcp_flag_sets[8] = {0x10, 0x10, 0x18, 0x18,
					 0x02, 0x12, 0x11, 0x04};

/*
 * Size the innermost payload so the frame is @want bytes. SCTP user data
 * is a multiple of 4 and at least 4; a first fragment's fragmentable part
 * is a multiple of 8; a later fragment carries at least 8 bytes. When that
 * leaves the datagram short, Ethernet padding makes up the difference.
 */
static void size_payload(struct dpflow_gen_spec *s, struct dpflow_gen_l3 *l3,
			 uint32_t hdrs, uint32_t want)
{
	uint32_t avail = want > hdrs ? want - hdrs : 0;
	uint32_t pay = avail;

	if (l3->frag == DPFLOW_FRAG_FIRST) {
		uint32_t f0 = l4_hdr_len(l3->l4_type) + 8u * ext_after_frag(l3);
		uint32_t down = (f0 + avail) & ~7u;
		pay = down >= f0 ? down - f0 : ((f0 + 7) & ~7u) - f0;
		if (l3->l4_type == DPFLOW_L4_SCTP && pay < 4)
			pay += 8;
	} else if (l3->frag == DPFLOW_FRAG_LATER) {
		if (pay < 8)
			pay = 8;
	} else if (l3->l4_type == DPFLOW_L4_SCTP) {
		pay &= ~3u;
		if (pay < 4)
			pay = 4;
	}
	l3->payload_len = (uint16_t)pay;
	s->frame_len = (uint16_t)want;
}

/* The next valid packet of flow @f into @buf; 0 if it does not fit. */
static uint32_t build_ok(struct dpflow_gen *g, uint32_t f, uint8_t *buf,
			 uint32_t cap, struct dpflow_gen_spec *s)
{
	const struct gen_flow *fl = &g->flows[f];
	struct dpflow_gen_l3 *l3 = fl->tun ? &s->inner : &s->outer;
	uint32_t want, hdrs;

	memset(s, 0, sizeof(*s));
	flow_macs(s, f);
	s->n_vlan = fl->n_vlan;
	if (fl->n_vlan == 1) {
		s->vlan[0] = g->p.vlan;
	} else if (fl->n_vlan == 2) {
		s->vlan[0] = g->p.qinq;
		s->vlan[1] = g->p.vlan;
	}
	s->tun_type = fl->tun;
	flow_l3(l3, f, fl->v6, fl->l4);
	l3->ip_id = (uint32_t)g->i;
	l3->icmp_seq = (uint16_t)g->i;
	if (l3->l4_type == DPFLOW_L4_TCP) {
		l3->tcp_flags = tcp_flag_sets[below(g, 8)];
		l3->tcp_seq = (uint32_t)rnd(g);
		if (l3->tcp_flags & 0x10)
			l3->tcp_ack = (uint32_t)rnd(g);
	} else if (l3->l4_type == DPFLOW_L4_SCTP) {
		l3->tcp_seq = (uint32_t)rnd(g); /* TSN */
	}
	if (chance(g, g->p.pct_frag)) {
		l3->frag =
		    chance(g, 50) ? DPFLOW_FRAG_FIRST : DPFLOW_FRAG_LATER;
		if (l3->frag == DPFLOW_FRAG_LATER)
			l3->frag_off = (uint16_t)(1 + below(g, 185));
	}
	ip_extras(g, l3);
	if (fl->tun) {
		flow_outer(s, f, fl->outer_v6);
		s->outer.ip_id = (uint32_t)g->i;
		ip_extras(g, &s->outer);
		s->inner_eth = fl->tun == DPFLOW_TUN_VXLAN ||
			       (fl->tun != DPFLOW_TUN_IPIP && fl->inner_eth);
		s->gre_csum = fl->gre & 1;
		s->gre_key = fl->gre & 2;
		s->gre_seq = fl->gre & 4;
		s->gre_seqno = (uint32_t)g->i;
		if (fl->tun == DPFLOW_TUN_GENEVE)
			s->geneve_opt_len = fl->geneve_opt;
	}

	if (g->p.size) {
		want = g->p.size;
	} else {
		if (g->sized % IMIX_BLOCK == 0) {
			for (unsigned k = 0; k < IMIX_BLOCK; k++)
				g->imix[k] = k < 7 ? 64 : k < 11 ? 576 : 1500;
			for (unsigned k = IMIX_BLOCK - 1; k > 0; k--) {
				uint32_t r = below(g, k + 1);
				uint16_t t = g->imix[k];
				g->imix[k] = g->imix[r];
				g->imix[r] = t;
			}
		}
		want = g->imix[g->sized % IMIX_BLOCK];
	}
	g->sized++;
	hdrs = dpflow_gen_build(s, buf, cap);
	if (!hdrs)
		return 0;
	size_payload(s, l3, hdrs, want);
	return dpflow_gen_build(s, buf, cap);
}

/* --- malformed variants ------------------------------------------------ */

/*
 * Each named variant is a valid packet with exactly one defect and the drop
 * reason the parser must give (docs/inspect.md); the random ones have
 * whatever defect chance made (-1: any verdict, but no crash). A VXLAN or
 * GENEVE defect leaves a valid UDP packet (no drop, tunnel.invalid).
 */
#define FOREACH_VARIANT(_)                                                    \
	_(ETH_TRUNC, "eth_truncated", DPFLOW_DROP_ETH_TRUNC)                  \
	_(VLAN_TRUNC, "vlan_truncated", DPFLOW_DROP_VLAN_TRUNC)               \
	_(VLAN_3TAGS, "vlan_three_tags", DPFLOW_DROP_VLAN_TOO_MANY)           \
	_(IPV4_TRUNC, "ipv4_truncated", DPFLOW_DROP_IPV4_TRUNC)               \
	_(IPV4_VER, "ipv4_version_5", DPFLOW_DROP_IPV4_BAD_VERSION)           \
	_(IPV4_IHL_SMALL, "ipv4_ihl_below_5", DPFLOW_DROP_IPV4_BAD_IHL)       \
	_(IPV4_IHL_BIG, "ipv4_ihl_beyond_frame", DPFLOW_DROP_IPV4_BAD_IHL)    \
	_(IPV4_TOT_SMALL, "ipv4_total_length_below_header",                   \
	  DPFLOW_DROP_IPV4_BAD_TOTLEN)                                        \
	_(IPV4_TOT_BIG, "ipv4_total_length_beyond_frame",                     \
	  DPFLOW_DROP_IPV4_BAD_TOTLEN)                                        \
	_(IPV6_TRUNC, "ipv6_truncated", DPFLOW_DROP_IPV6_TRUNC)               \
	_(IPV6_VER, "ipv6_version_7", DPFLOW_DROP_IPV6_BAD_VERSION)           \
	_(IPV6_PLEN, "ipv6_payload_length_beyond_frame",                      \
	  DPFLOW_DROP_IPV6_BAD_PAYLEN)                                        \
	_(IPV6_EXT_TRUNC, "ipv6_ext_truncated", DPFLOW_DROP_IPV6_EXT_TRUNC)   \
	_(IPV6_EXT_MANY, "ipv6_nine_ext_headers",                             \
	  DPFLOW_DROP_IPV6_EXT_TOO_MANY)                                      \
	_(TCP_TRUNC, "tcp_truncated", DPFLOW_DROP_TCP_TRUNC)                  \
	_(TCP_DOFF_SMALL, "tcp_doff_below_5", DPFLOW_DROP_TCP_BAD_DOFF)       \
	_(TCP_DOFF_BIG, "tcp_doff_beyond_datagram", DPFLOW_DROP_TCP_BAD_DOFF) \
	_(UDP_TRUNC, "udp_truncated", DPFLOW_DROP_UDP_TRUNC)                  \
	_(UDP_LEN_SMALL, "udp_length_below_8", DPFLOW_DROP_UDP_BAD_LEN)       \
	_(UDP_LEN_BIG, "udp_length_beyond_datagram", DPFLOW_DROP_UDP_BAD_LEN) \
	_(ICMP_TRUNC, "icmp_truncated", DPFLOW_DROP_ICMP_TRUNC)               \
	_(ICMP6_TRUNC, "icmpv6_truncated", DPFLOW_DROP_ICMP_TRUNC)            \
	_(SCTP_TRUNC, "sctp_truncated", DPFLOW_DROP_SCTP_TRUNC)               \
	_(VXLAN_TRUNC, "vxlan_truncated", DPFLOW_DROP_NONE)                   \
	_(GENEVE_TRUNC, "geneve_truncated", DPFLOW_DROP_NONE)                 \
	_(GENEVE_OPT_TRUNC, "geneve_options_truncated", DPFLOW_DROP_NONE)     \
	_(GENEVE_VER, "geneve_version_1", DPFLOW_DROP_NONE)                   \
	_(GENEVE_PROTO, "geneve_unknown_protocol", DPFLOW_DROP_NONE)          \
	_(GRE_TRUNC, "gre_truncated", DPFLOW_DROP_GRE_TRUNC)                  \
	_(GRE_OPT_TRUNC, "gre_options_truncated", DPFLOW_DROP_GRE_TRUNC)      \
	_(GRE_VER, "gre_version_1", DPFLOW_DROP_GRE_BAD_VERSION)              \
	_(GRE_PROTO, "gre_unknown_protocol", DPFLOW_DROP_TUN_UNKNOWN_PAYLOAD) \
	_(RANDOM_FLIP, "random_flip", -1)                                     \
	_(RANDOM_TRUNC, "random_truncate", -1)

enum variant {
#define VARIANT_ENUM_(id, name, drop) V_##id,
	FOREACH_VARIANT(VARIANT_ENUM_)
#undef VARIANT_ENUM_
	    V__COUNT
};

static const struct {
	const char *name;
	int drop;
} variants[] = {
#define VARIANT_ROW_(id, name, drop) {name, drop},
    FOREACH_VARIANT(VARIANT_ROW_)
#undef VARIANT_ROW_
};

#define ETH_LEN		       14
#define L4_V4		       (ETH_LEN + 20) /* frame offset after a plain IPv4 header */
#define L4_V6		       (ETH_LEN + 40)
#define EXPERIMENTAL_ETHERTYPE 0x88b5 /* IEEE 802 local experimental */

static uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void wr16(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/*
 * Checksums (dpflow/pkt_edit.h), so that a variant keeps every checksum
 * its defect does not touch valid. Recompute that of a 20-byte IPv4
 * header at @ip.
 */
static void fix_ipv4(uint8_t *ip)
{
	dpflow_ipv4_csum_set(ip, 20);
}

/*
 * Recompute the TCP/UDP/ICMP/ICMPv6 checksum of the L4 bytes [l4, end) of
 * the IP packet at @ip (no extension headers on the way), when the
 * checksum field is inside them.
 */
static void fix_l4(uint8_t *f, uint32_t ip, uint32_t l4, uint32_t end)
{
	bool v6 = (f[ip] >> 4) == 6;
	uint8_t proto = v6 ? f[ip + 6] : f[ip + 9];
	uint32_t len = end - l4;

	dpflow_l4_csum_set(f + l4, len, proto,
			   proto == 1 ? 0
				      : dpflow_csum_pseudo(f + ip, v6, proto, len));
}

/* Make the IP packet at @ip end at @end (cut frame, lengths, checksum). */
static uint32_t cut_ip(uint8_t *f, uint32_t ip, uint32_t end)
{
	if ((f[ip] >> 4) == 6) {
		wr16(f + ip + 4, end - ip - 40);
	} else {
		wr16(f + ip + 2, end - ip);
		fix_ipv4(f + ip);
	}
	return end;
}

/* A small valid packet of flow @f: IPv4 or IPv6, @l4, 16 payload bytes. */
static void plain_spec(struct dpflow_gen_spec *s, uint32_t f, bool v6,
		       uint8_t l4)
{
	memset(s, 0, sizeof(*s));
	flow_macs(s, f);
	flow_l3(&s->outer, f, v6, l4);
	s->outer.payload_len = 16;
}

/* A small valid IPv4 tunnel packet of flow @f carrying IPv4 UDP. */
static void tunnel_spec(struct dpflow_gen_spec *s, uint32_t f, uint8_t tun)
{
	memset(s, 0, sizeof(*s));
	flow_macs(s, f);
	s->tun_type = tun;
	flow_l3(&s->inner, f, false, DPFLOW_L4_UDP);
	s->inner.payload_len = 16;
	s->inner_eth = tun == DPFLOW_TUN_VXLAN;
	flow_outer(s, f, false);
}

/* Insert @n bytes at @at of the @len-byte frame; false if no room. */
static bool insert(uint8_t *f, uint32_t *len, uint32_t cap, uint32_t at,
		   const uint8_t *bytes, uint32_t n)
{
	if (*len + n > cap)
		return false;
	memmove(f + at + n, f + at, *len - at);
	memcpy(f + at, bytes, n);
	*len += n;
	return true;
}

/* After a change to the UDP tunnel packet @f (outer IPv4), fix UDP. */
static uint32_t cut_udp_tunnel(uint8_t *f, uint32_t end)
{
	wr16(f + L4_V4 + 4, end - L4_V4);
	cut_ip(f, ETH_LEN, end);
	fix_l4(f, ETH_LEN, L4_V4, end);
	return end;
}

static uint32_t build_variant(struct dpflow_gen *g, enum variant v, uint32_t f,
			      uint8_t *b, uint32_t cap,
			      struct dpflow_gen_spec *s)
{
	uint32_t len = 0;

	switch (v) {
	case V_ETH_TRUNC:
	case V_IPV4_TRUNC:
	case V_IPV4_VER:
	case V_IPV4_IHL_SMALL:
	case V_IPV4_TOT_SMALL:
	case V_IPV4_TOT_BIG:
	case V_UDP_TRUNC:
	case V_UDP_LEN_SMALL:
	case V_UDP_LEN_BIG:
		plain_spec(s, f, false, DPFLOW_L4_UDP);
		break;
	case V_IPV4_IHL_BIG:
		plain_spec(s, f, false, DPFLOW_L4_UDP);
		s->outer.payload_len = 4; /* 32-byte datagram < 60 */
		break;
	case V_VLAN_TRUNC:
		plain_spec(s, f, false, DPFLOW_L4_UDP);
		s->n_vlan = 1;
		s->vlan[0] = 100;
		break;
	case V_VLAN_3TAGS:
		plain_spec(s, f, false, DPFLOW_L4_UDP);
		s->n_vlan = 2;
		s->vlan[0] = 200;
		s->vlan[1] = 100;
		break;
	case V_IPV6_TRUNC:
	case V_IPV6_VER:
	case V_IPV6_PLEN:
	case V_IPV6_EXT_MANY:
		plain_spec(s, f, true, DPFLOW_L4_UDP);
		break;
	case V_IPV6_EXT_TRUNC:
		plain_spec(s, f, true, DPFLOW_L4_UDP);
		s->outer.ipv6_ext[0] = 60;
		break;
	case V_TCP_TRUNC:
	case V_TCP_DOFF_SMALL:
		plain_spec(s, f, false, DPFLOW_L4_TCP);
		s->outer.tcp_flags = 0x10;
		break;
	case V_TCP_DOFF_BIG:
		plain_spec(s, f, false, DPFLOW_L4_TCP);
		s->outer.tcp_flags = 0x10;
		s->outer.payload_len = 8; /* 28 bytes of TCP < 60 */
		break;
	case V_ICMP_TRUNC:
		plain_spec(s, f, false, DPFLOW_L4_ICMP);
		break;
	case V_ICMP6_TRUNC:
		plain_spec(s, f, true, DPFLOW_L4_ICMP);
		break;
	case V_SCTP_TRUNC:
		plain_spec(s, f, false, DPFLOW_L4_SCTP);
		break;
	case V_VXLAN_TRUNC:
		tunnel_spec(s, f, DPFLOW_TUN_VXLAN);
		break;
	case V_GENEVE_TRUNC:
	case V_GENEVE_VER:
	case V_GENEVE_PROTO:
		tunnel_spec(s, f, DPFLOW_TUN_GENEVE);
		break;
	case V_GENEVE_OPT_TRUNC:
		tunnel_spec(s, f, DPFLOW_TUN_GENEVE);
		s->geneve_opt_len = 8;
		break;
	case V_GRE_TRUNC:
	case V_GRE_VER:
	case V_GRE_PROTO:
		tunnel_spec(s, f, DPFLOW_TUN_GRE);
		break;
	case V_GRE_OPT_TRUNC:
		tunnel_spec(s, f, DPFLOW_TUN_GRE);
		s->gre_csum = s->gre_key = s->gre_seq = true;
		break;
	default: /* random variants: a packet of the profile */
		len = build_ok(g, f, b, cap, s);
		break;
	}
	if (!len)
		len = dpflow_gen_build(s, b, cap);
	if (!len)
		return 0;

	switch (v) {
	case V_ETH_TRUNC:
		return 12;
	case V_VLAN_TRUNC:
		return 16; /* tag protocol and TCI, no inner ethertype */
	case V_VLAN_3TAGS: {
		const uint8_t tag[4] = {0x81, 0x00, 0x01, 0x2c}; /* VID 300 */
		return insert(b, &len, cap, 12 + 8, tag, 4) ? len : 0;
	}
	case V_IPV4_TRUNC:
		return ETH_LEN + 12;
	case V_IPV4_VER:
		b[ETH_LEN] = 0x55;
		fix_ipv4(b + ETH_LEN);
		return len;
	case V_IPV4_IHL_SMALL:
		b[ETH_LEN] = 0x44;
		fix_ipv4(b + ETH_LEN);
		return len;
	case V_IPV4_IHL_BIG:
		b[ETH_LEN] = 0x4f;
		fix_ipv4(b + ETH_LEN);
		return len;
	case V_IPV4_TOT_SMALL:
		wr16(b + ETH_LEN + 2, 19);
		fix_ipv4(b + ETH_LEN);
		return len;
	case V_IPV4_TOT_BIG:
		wr16(b + ETH_LEN + 2, len - ETH_LEN + 1);
		fix_ipv4(b + ETH_LEN);
		return len;
	case V_IPV6_TRUNC:
		return ETH_LEN + 24;
	case V_IPV6_VER:
		b[ETH_LEN] = (uint8_t)(0x70 | (b[ETH_LEN] & 0x0f));
		return len;
	case V_IPV6_PLEN:
		wr16(b + ETH_LEN + 4, rd16(b + ETH_LEN + 4) + 1u);
		return len;
	case V_IPV6_EXT_TRUNC:
		return cut_ip(b, ETH_LEN, L4_V6 + 4);
	case V_IPV6_EXT_MANY: {
		/* Nine destination-options headers (PadN 4) before UDP; the
		 * UDP checksum does not cover them. */
		uint8_t ext[9 * 8] = {0};
		for (unsigned i = 0; i < 9; i++) {
			ext[i * 8] = i < 8 ? 60 : 17;
			ext[i * 8 + 2] = 1;
			ext[i * 8 + 3] = 4;
		}
		if (!insert(b, &len, cap, L4_V6, ext, sizeof(ext)))
			return 0;
		b[ETH_LEN + 6] = 60;
		return cut_ip(b, ETH_LEN, len);
	}
	case V_TCP_TRUNC:
		return cut_ip(b, ETH_LEN, L4_V4 + 10);
	case V_TCP_DOFF_SMALL:
	case V_TCP_DOFF_BIG:
		b[L4_V4 + 12] = v == V_TCP_DOFF_SMALL ? 0x40 : 0xf0;
		fix_l4(b, ETH_LEN, L4_V4, len);
		return len;
	case V_UDP_TRUNC:
		return cut_ip(b, ETH_LEN, L4_V4 + 4);
	case V_UDP_LEN_SMALL:
	case V_UDP_LEN_BIG:
		wr16(b + L4_V4 + 4, v == V_UDP_LEN_SMALL ? 7 : len - L4_V4 + 1);
		fix_l4(b, ETH_LEN, L4_V4, len);
		return len;
	case V_ICMP_TRUNC:
		return cut_ip(b, ETH_LEN, L4_V4 + 2);
	case V_ICMP6_TRUNC:
		return cut_ip(b, ETH_LEN, L4_V6 + 2);
	case V_SCTP_TRUNC:
		return cut_ip(b, ETH_LEN, L4_V4 + 8);
	case V_VXLAN_TRUNC:
	case V_GENEVE_TRUNC:
		return cut_udp_tunnel(b, L4_V4 + 8 + 4);
	case V_GENEVE_OPT_TRUNC:
		/* Base header and 4 of its 8 option bytes. */
		return cut_udp_tunnel(b, L4_V4 + 8 + 8 + 4);
	case V_GENEVE_VER:
		b[L4_V4 + 8] |= 0x40;
		return cut_udp_tunnel(b, len);
	case V_GENEVE_PROTO:
		wr16(b + L4_V4 + 8 + 2, EXPERIMENTAL_ETHERTYPE);
		return cut_udp_tunnel(b, len);
	case V_GRE_TRUNC:
		return cut_ip(b, ETH_LEN, L4_V4 + 2);
	case V_GRE_OPT_TRUNC:
		/* Flags, protocol, checksum; key and sequence cut off. */
		return cut_ip(b, ETH_LEN, L4_V4 + 8);
	case V_GRE_VER:
		b[L4_V4 + 1] |= 0x01;
		return len;
	case V_GRE_PROTO:
		wr16(b + L4_V4 + 2, EXPERIMENTAL_ETHERTYPE);
		return len;
	case V_RANDOM_FLIP: {
		uint32_t n = 1 + below(g, 4);
		for (uint32_t k = 0; k < n; k++)
			b[below(g, len)] ^= (uint8_t)(1 + below(g, 255));
		return len;
	}
	case V_RANDOM_TRUNC:
		return len > 1 ? 1 + below(g, len - 1) : len;
	default:
		return 0;
	}
}

uint32_t dpflow_gen_next(struct dpflow_gen *g, uint8_t *buf, uint32_t cap,
			 struct dpflow_gen_info *info)
{
	struct dpflow_gen_info tmp;
	uint64_t saved[4], sized;
	uint32_t f, len;

	if (!g || !buf || g->i >= g->p.count)
		return 0;
	if (!info)
		info = &tmp;
	memcpy(saved, g->rng, sizeof(saved));
	sized = g->sized;
	f = below(g, g->p.flows);
	info->flow = f;
	if (g->p.malformed) {
		enum variant v = (enum variant)(g->i % V__COUNT);
		info->variant = variants[v].name;
		info->expect_drop = variants[v].drop;
		len = build_variant(g, v, f, buf, cap, &info->spec);
	} else {
		info->variant = "ok";
		info->expect_drop = DPFLOW_DROP_NONE;
		len = build_ok(g, f, buf, cap, &info->spec);
	}
	if (!len) {
		/* Too small a buffer: the packet is not consumed. */
		memcpy(g->rng, saved, sizeof(saved));
		g->sized = sized;
		return 0;
	}
	g->i++;
	return len;
}
