/*
 * Hashes of the data path, shared by both targets (DPF_HD):
 *  - dpflow_hash32_impl: 32-bit MurmurHash3 (x86_32), the hash of HASH
 *    pipes (flow.h dpflow_hash32);
 *  - dpflow_toeplitz_impl: the Toeplitz hash of Microsoft's RSS
 *    specification, with the symmetric key (0x6d5a repeated) so that both
 *    directions of a flow hash alike (flow.h dpflow_rss_hash).
 */
#ifndef DPFLOW_HASH_IMPL_H
#define DPFLOW_HASH_IMPL_H

#include <stdint.h>
#include <string.h>

#include "dpflow/common.h"
#include "dpflow/meta.h"

DPF_HD static inline uint32_t dpflow_rotl32(uint32_t x, unsigned r)
{
	return (x << r) | (x >> (32 - r));
}

DPF_HD static inline uint32_t dpflow_hash32_impl(const uint8_t *p, unsigned len,
						 uint32_t seed)
{
	const uint32_t c1 = 0xcc9e2d51u, c2 = 0x1b873593u;
	uint32_t h = seed, k;
	unsigned i = 0;

	for (; i + 4 <= len; i += 4) {
		/* little-endian block, as the reference implementation */
		k = (uint32_t)p[i] | (uint32_t)p[i + 1] << 8 |
		    (uint32_t)p[i + 2] << 16 | (uint32_t)p[i + 3] << 24;
		k *= c1;
		k = dpflow_rotl32(k, 15);
		k *= c2;
		h ^= k;
		h = dpflow_rotl32(h, 13);
		h = h * 5 + 0xe6546b64u;
	}
	k = 0;
	switch (len & 3) {
	case 3:
		k ^= (uint32_t)p[i + 2] << 16;
		/* fall through */
	case 2:
		k ^= (uint32_t)p[i + 1] << 8;
		/* fall through */
	case 1:
		k ^= p[i];
		k *= c1;
		k = dpflow_rotl32(k, 15);
		k *= c2;
		h ^= k;
		break;
	default:
		break;
	}
	h ^= len;
	h ^= h >> 16;
	h *= 0x85ebca6bu;
	h ^= h >> 13;
	h *= 0xc2b2ae35u;
	h ^= h >> 16;
	return h;
}

/*
 * Toeplitz over @len bytes of @in with the symmetric key: the 32-bit
 * window of the key at bit i is, for a key of 0x6d5a repeated, the same
 * for i and i + 16, so it cycles through 16 values.
 */
DPF_HD static inline uint32_t dpflow_toeplitz_impl(const uint8_t *in,
						   unsigned len)
{
	uint32_t h = 0;

	for (unsigned i = 0; i < len; i++) {
		for (unsigned b = 0; b < 8; b++) {
			unsigned bit = i * 8 + b;
			unsigned r = bit & 15;
			/* key bits bit .. bit+31 of 0x6d5a6d5a...: a
			 * rotation (not for r == 0: a shift by 32 is
			 * undefined) */
			uint32_t win =
			    r ? 0x6d5a6d5au << r | 0x6d5a6d5au >> (32 - r)
			      : 0x6d5a6d5au;

			if (in[i] & (0x80u >> b))
				h ^= win;
		}
	}
	return h;
}

/* The RSS input of one header set: src, dst, then ports (TCP/UDP/SCTP). */
DPF_HD static inline uint32_t dpflow_rss_hash_hdr(const struct dpflow_hdr *h)
{
	uint8_t in[36];
	unsigned alen, n;

	if (h->l3_type == DPFLOW_L3_IPV4)
		alen = 4;
	else if (h->l3_type == DPFLOW_L3_IPV6)
		alen = 16;
	else
		return 0;
	memcpy(in, h->src, alen);
	memcpy(in + alen, h->dst, alen);
	n = 2 * alen;
	if (h->frag != DPFLOW_FRAG_LATER &&
	    (h->l4_type == DPFLOW_L4_TCP || h->l4_type == DPFLOW_L4_UDP ||
	     h->l4_type == DPFLOW_L4_SCTP)) {
		in[n++] = (uint8_t)(h->sport >> 8);
		in[n++] = (uint8_t)h->sport;
		in[n++] = (uint8_t)(h->dport >> 8);
		in[n++] = (uint8_t)h->dport;
	}
	return dpflow_toeplitz_impl(in, n);
}

#endif /* DPFLOW_HASH_IMPL_H */
