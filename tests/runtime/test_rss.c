/*
 * The runtime's RSS hash: the Toeplitz function against the verification
 * vectors of Microsoft's RSS specification, the table-driven form against
 * the bit-serial one, and the symmetric hash against a reference written
 * here from its definition (canonical order, then Toeplitz), on random
 * keys and packets.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "dpflow/dpflow.h"
#include "dpflow/runtime.h"
#include "runtime/rss.h"

/* The key of the specification's verification suite. */
static const uint8_t ms_key[DPFLOW_RSS_KEY_LEN] = {
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67,
    0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb,
    0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30,
    0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
};

/* IPv4 rows: destination, source, ports; hash without and with ports. */
static const struct {
	uint8_t dst[4], src[4];
	uint16_t dport, sport;
	uint32_t ip, tcp;
} ms_v4[] = {
    {{161, 142, 100, 80},
     {66, 9, 149, 187},
     1766,
     2794,
     0x323e8fc2,
     0x51ccc178},
    {{65, 69, 140, 83}, {199, 92, 111, 2}, 4739, 14230, 0xd718262a, 0xc626b0ea},
    {{12, 22, 207, 184},
     {24, 19, 198, 95},
     38024,
     12898,
     0xd2d0a5de,
     0x5c2b394a},
    {{209, 142, 163, 6},
     {38, 27, 205, 30},
     2217,
     48228,
     0x82989176,
     0xafc7327f},
    {{202, 188, 127, 2},
     {153, 39, 163, 191},
     1303,
     44251,
     0x5d1809c5,
     0x10e828a2},
};

Test(rss, microsoft_vectors_ipv4)
{
	for (unsigned i = 0; i < sizeof(ms_v4) / sizeof(ms_v4[0]); i++) {
		uint8_t in[12];

		memcpy(in, ms_v4[i].src, 4);
		memcpy(in + 4, ms_v4[i].dst, 4);
		in[8] = (uint8_t)(ms_v4[i].sport >> 8);
		in[9] = (uint8_t)ms_v4[i].sport;
		in[10] = (uint8_t)(ms_v4[i].dport >> 8);
		in[11] = (uint8_t)ms_v4[i].dport;
		cr_expect_eq(dpflow_toeplitz(ms_key, in, 8), ms_v4[i].ip,
			     "row %u, addresses: %08x, expected %08x", i,
			     dpflow_toeplitz(ms_key, in, 8), ms_v4[i].ip);
		cr_expect_eq(dpflow_toeplitz(ms_key, in, 12), ms_v4[i].tcp,
			     "row %u, with ports: %08x, expected %08x", i,
			     dpflow_toeplitz(ms_key, in, 12), ms_v4[i].tcp);
	}
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next_rand(void)
{
	uint64_t z = (rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void fill_rand(uint8_t *p, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		p[i] = (uint8_t)next_rand();
}

/* A parsed-looking packet: random addresses (few distinct values, so
 * equal addresses happen), protocol and ports. */
static void rand_meta(struct dpflow_pkt_meta *m)
{
	static const uint8_t l4s[] = {DPFLOW_L4_TCP, DPFLOW_L4_UDP,
				      DPFLOW_L4_SCTP, DPFLOW_L4_ICMP,
				      DPFLOW_L4_NONE};
	unsigned alen;

	memset(m, 0, sizeof(*m));
	m->outer.l3_type = next_rand() & 1 ? DPFLOW_L3_IPV4 : DPFLOW_L3_IPV6;
	alen = m->outer.l3_type == DPFLOW_L3_IPV4 ? 4 : 16;
	fill_rand(m->outer.src, alen);
	if (next_rand() % 8 == 0)
		memcpy(m->outer.dst, m->outer.src, alen);
	else
		fill_rand(m->outer.dst, alen);
	m->outer.l4_type = l4s[next_rand() % 5];
	m->outer.sport = (uint16_t)next_rand();
	m->outer.dport =
	    next_rand() % 4 ? (uint16_t)next_rand() : m->outer.sport;
	if (next_rand() % 10 == 0)
		m->outer.frag = DPFLOW_FRAG_LATER;
}

/* The symmetric hash from its definition, independently of rss.c. */
static uint32_t ref_sym(const uint8_t *key, const struct dpflow_pkt_meta *m)
{
	const struct dpflow_hdr *h = &m->outer;
	unsigned alen = h->l3_type == DPFLOW_L3_IPV4 ? 4 : 16, n;
	bool ports =
	    h->frag != DPFLOW_FRAG_LATER &&
	    (h->l4_type == DPFLOW_L4_TCP || h->l4_type == DPFLOW_L4_UDP ||
	     h->l4_type == DPFLOW_L4_SCTP);
	/* the two endpoints as address bytes then port bytes */
	uint8_t a[18] = {0}, b[18] = {0}, in[36];
	const uint8_t *lo, *hi;

	memcpy(a, h->src, alen);
	memcpy(b, h->dst, alen);
	if (ports) {
		a[alen] = (uint8_t)(h->sport >> 8);
		a[alen + 1] = (uint8_t)h->sport;
		b[alen] = (uint8_t)(h->dport >> 8);
		b[alen + 1] = (uint8_t)h->dport;
	}
	if (memcmp(a, b, alen + 2) <= 0) {
		lo = a;
		hi = b;
	} else {
		lo = b;
		hi = a;
	}
	memcpy(in, lo, alen);
	memcpy(in + alen, hi, alen);
	n = 2 * alen;
	if (ports) {
		memcpy(in + n, lo + alen, 2);
		memcpy(in + n + 2, hi + alen, 2);
		n += 4;
	}
	/* Toeplitz bit by bit, from the definition: for each set input
	 * bit i, XOR in key bits i..i+31 */
	{
		uint32_t r = 0;

		for (unsigned i = 0; i < n * 8; i++) {
			uint32_t win = 0;

			if (!(in[i / 8] & (0x80u >> (i % 8))))
				continue;
			for (unsigned k = 0; k < 32; k++)
				win = win << 1 |
				      ((key[(i + k) / 8] >> (7 - (i + k) % 8)) &
				       1u);
			r ^= win;
		}
		return r;
	}
}

Test(rss, symmetric_and_table_match_reference)
{
	static struct rss_table t;
	uint8_t key[DPFLOW_RSS_KEY_LEN];

	for (unsigned round = 0; round < 20; round++) {
		fill_rand(key, sizeof(key));
		rss_table_build(&t, key);
		for (unsigned i = 0; i < 2000; i++) {
			struct dpflow_pkt_meta m, r;
			uint32_t want, h;

			rand_meta(&m);
			want = ref_sym(key, &m);
			h = dpflow_rss_toeplitz_sym(key, &m);
			cr_assert_eq(h, want,
				     "round %u pkt %u: %08x, want %08x", round,
				     i, h, want);
			cr_assert_eq(rss_hash_tabled(&t, &m), want,
				     "table: round %u pkt %u", round, i);
			/* the reply direction */
			r = m;
			memcpy(r.outer.src, m.outer.dst, 16);
			memcpy(r.outer.dst, m.outer.src, 16);
			r.outer.sport = m.outer.dport;
			r.outer.dport = m.outer.sport;
			cr_assert_eq(rss_hash_tabled(&t, &r), want,
				     "reply direction: round %u pkt %u", round,
				     i);
		}
	}
}

Test(rss, non_ip_hashes_to_zero)
{
	struct dpflow_pkt_meta m;

	memset(&m, 0, sizeof(m));
	m.outer.l3_type = DPFLOW_L3_NONE;
	cr_expect_eq(dpflow_rss_toeplitz_sym(ms_key, &m), 0);
}

Test(rss, key_spreads_flows)
{
	static struct rss_table t;
	unsigned per[4] = {0};

	rss_table_build(&t, ms_key);
	for (unsigned i = 0; i < 40000; i++) {
		struct dpflow_pkt_meta m;

		rand_meta(&m);
		m.outer.l3_type = DPFLOW_L3_IPV4;
		per[(rss_hash_tabled(&t, &m) & 127) % 4]++;
	}
	for (unsigned w = 0; w < 4; w++)
		cr_expect(per[w] > 9000 && per[w] < 11000,
			  "worker %u got %u of 40000", w, per[w]);
}
