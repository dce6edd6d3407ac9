/*
 * The balancer's checksum helpers (apps/l4lb/lb_hdr.h) against plain
 * references: csum_fold64() against a fold of 16-bit halves repeated
 * until nothing carries, on every value below 2^26, the edges and random
 * 64-bit sums; incremental updates (csum_delta() + csum_apply()) of
 * IPv4 and TCP checksums against checksums computed from scratch over
 * the rewritten bytes (RFC 1071), on random headers and rewrites.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "l4lb/lb_hdr.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint64_t rng64(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* The textbook fold: add the high 16 bits to the low ones until none. */
static uint16_t fold_ref(uint64_t s)
{
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)s;
}

/* The one's-complement checksum of @len bytes (big-endian words). */
static uint16_t csum_ref(const uint8_t *p, unsigned len, uint64_t sum)
{
	for (unsigned i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (len & 1)
		sum += (uint32_t)p[len - 1] << 8;
	return (uint16_t)~fold_ref(sum);
}

Test(l4lb_hdr, fold64_matches_the_plain_fold)
{
	static const uint64_t edges[] = {
	    0,
	    1,
	    0xffff,
	    0x10000,
	    0x1fffe,
	    0xffffffff,
	    0x100000000ull,
	    0x1fffffffeull,
	    0xfffffffe00000001ull,
	    0xffffffffffffffffull,
	};

	for (uint64_t s = 0; s < (1ull << 26); s++)
		if (csum_fold64(s) != fold_ref(s))
			cr_assert_fail("%#llx: %#x, want %#x",
				       (unsigned long long)s, csum_fold64(s),
				       fold_ref(s));
	for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
		cr_expect_eq(csum_fold64(edges[i]), fold_ref(edges[i]), "%#llx",
			     (unsigned long long)edges[i]);
	for (int i = 0; i < 10000000; i++) {
		uint64_t r = rng64(), s = r >> (r & 63);

		if (csum_fold64(s) != fold_ref(s))
			cr_assert_fail("%#llx: %#x, want %#x",
				       (unsigned long long)s, csum_fold64(s),
				       fold_ref(s));
	}
}

/* A random IPv4 header and TCP segment with correct checksums. */
static void random_packet(uint8_t *ip, uint8_t *tcp, unsigned tcp_len)
{
	uint8_t pseudo[12];

	for (unsigned i = 0; i < 20; i++)
		ip[i] = (uint8_t)rng64();
	for (unsigned i = 0; i < tcp_len; i++)
		tcp[i] = (uint8_t)rng64();
	ip[0] = 0x45;
	st16(ip + 2, (uint16_t)(20 + tcp_len));
	ip[9] = 6;
	st16(ip + 10, 0);
	st16(ip + 10, csum_ref(ip, 20, 0));
	memcpy(pseudo, ip + 12, 8);
	pseudo[8] = 0;
	pseudo[9] = 6;
	st16(pseudo + 10, (uint16_t)tcp_len);
	st16(tcp + 16, 0);
	st16(tcp + 16,
	     csum_ref(tcp, tcp_len, ~csum_ref(pseudo, 12, 0) & 0xffff));
}

Test(l4lb_hdr, incremental_updates_match_full_checksums)
{
	for (int n = 0; n < 200000; n++) {
		uint8_t ip[20], tcp[64], pseudo[12], addr[8], ports[4];
		unsigned tcp_len = 20 + (unsigned)(rng64() % 44);
		uint64_t acc = 0;

		random_packet(ip, tcp, tcp_len);
		for (unsigned i = 0; i < 8; i++)
			addr[i] = (uint8_t)rng64();
		for (unsigned i = 0; i < 4; i++)
			ports[i] = (uint8_t)rng64();
		/* what the NAT rewrite does: addresses, then ports */
		acc = csum_delta(acc, ip + 12, addr, 8);
		csum_apply(ip + 10, acc);
		memcpy(ip + 12, addr, 8);
		acc = csum_delta(acc, tcp, ports, 4);
		memcpy(tcp, ports, 4);
		csum_apply(tcp + 16, acc);

		cr_assert_eq(csum_ref(ip, 20, 0) & 0xffff, 0,
			     "IPv4 header sum after the rewrite (case %d)", n);
		memcpy(pseudo, ip + 12, 8);
		pseudo[8] = 0;
		pseudo[9] = 6;
		st16(pseudo + 10, (uint16_t)tcp_len);
		cr_assert_eq(
		    csum_ref(tcp, tcp_len, ~csum_ref(pseudo, 12, 0) & 0xffff),
		    0, "TCP sum after the rewrite (case %d)", n);
	}
}
