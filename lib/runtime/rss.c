/*
 * The runtime's RSS hash: Toeplitz (Microsoft's RSS specification) under a
 * 40-byte key, over a packet's outer addresses and ports taken in a
 * canonical order, so that it is symmetric for any key.
 *
 * The canonical order: the (address, port) pair that compares lower comes
 * first, as source; both directions of a flow then feed the hash the same
 * bytes. This keeps the whole key random, where the other known way to a
 * symmetric Toeplitz hash (a key of one 16-bit pattern repeated) leaves 16
 * bits of it.
 *
 * dpflow_toeplitz() is the bit-serial definition; rss_table_build() and
 * rss_hash_tabled() are the fast form the workers use: for each input byte
 * position, the XOR of the key windows its set bits select, looked up per
 * byte value (36 x 256 words).
 */
#include <stdbool.h>
#include <string.h>

#include "dpflow/runtime.h"
#include "runtime/rss.h"

/* Key bits @bit .. @bit + 31 as a word (bits past the key read as 0). */
static uint32_t key_window(const uint8_t *key, unsigned bit)
{
	uint32_t w = 0;

	for (unsigned k = 0; k < 32; k++) {
		unsigned b = bit + k;
		unsigned v = b / 8 < DPFLOW_RSS_KEY_LEN
				 ? (key[b / 8] >> (7 - b % 8)) & 1u
				 : 0;

		w = w << 1 | v;
	}
	return w;
}

uint32_t dpflow_toeplitz(const uint8_t key[DPFLOW_RSS_KEY_LEN],
			 const uint8_t *in, unsigned len)
{
	uint32_t h = 0;

	if (len > RSS_INPUT_MAX)
		len = RSS_INPUT_MAX;
	for (unsigned i = 0; i < len; i++)
		for (unsigned b = 0; b < 8; b++)
			if (in[i] & (0x80u >> b))
				h ^= key_window(key, i * 8 + b);
	return h;
}

void rss_table_build(struct rss_table *t, const uint8_t *key)
{
	for (unsigned i = 0; i < RSS_INPUT_MAX; i++) {
		uint32_t win[8];

		for (unsigned b = 0; b < 8; b++)
			win[b] = key_window(key, i * 8 + b);
		for (unsigned v = 0; v < 256; v++) {
			uint32_t h = 0;

			for (unsigned b = 0; b < 8; b++)
				if (v & (0x80u >> b))
					h ^= win[b];
			t->w[i][v] = h;
		}
	}
}

/*
 * The canonical RSS input of @m's outer headers into @in: returns its
 * length (0: not IP, nothing to hash).
 */
static unsigned rss_input(const struct dpflow_pkt_meta *m, uint8_t *in)
{
	const struct dpflow_hdr *h = &m->outer;
	unsigned alen, n;
	bool ports;
	uint16_t sp = 0, dp = 0;
	int c;

	if (h->l3_type == DPFLOW_L3_IPV4)
		alen = 4;
	else if (h->l3_type == DPFLOW_L3_IPV6)
		alen = 16;
	else
		return 0;
	ports = h->frag != DPFLOW_FRAG_LATER &&
		(h->l4_type == DPFLOW_L4_TCP || h->l4_type == DPFLOW_L4_UDP ||
		 h->l4_type == DPFLOW_L4_SCTP);
	if (ports) {
		sp = h->sport;
		dp = h->dport;
	}
	c = memcmp(h->src, h->dst, alen);
	if (c > 0 || (c == 0 && sp > dp)) {
		uint16_t t = sp;

		memcpy(in, h->dst, alen);
		memcpy(in + alen, h->src, alen);
		sp = dp;
		dp = t;
	} else {
		memcpy(in, h->src, alen);
		memcpy(in + alen, h->dst, alen);
	}
	n = 2 * alen;
	if (ports) {
		in[n++] = (uint8_t)(sp >> 8);
		in[n++] = (uint8_t)sp;
		in[n++] = (uint8_t)(dp >> 8);
		in[n++] = (uint8_t)dp;
	}
	return n;
}

uint32_t rss_hash_tabled(const struct rss_table *t,
			 const struct dpflow_pkt_meta *m)
{
	uint8_t in[RSS_INPUT_MAX];
	unsigned n = rss_input(m, in);
	uint32_t h = 0;

	for (unsigned i = 0; i < n; i++)
		h ^= t->w[i][in[i]];
	return h;
}

uint32_t dpflow_rss_toeplitz_sym(const uint8_t key[DPFLOW_RSS_KEY_LEN],
				 const struct dpflow_pkt_meta *m)
{
	uint8_t in[RSS_INPUT_MAX];
	unsigned n = rss_input(m, in);

	return n ? dpflow_toeplitz(key, in, n) : 0;
}
