/*
 * Header helpers of the balancer's data path: Internet checksums (full
 * and incremental, RFC 1071 and RFC 1624) and big-endian loads and
 * stores. Everything is static inline and bounds are the caller's.
 */
#ifndef DPFLOW_L4LB_HDR_H
#define DPFLOW_L4LB_HDR_H

#include <stdint.h>
#include <string.h>

#define ETH_HLEN_     14u
#define IPV4_HLEN_    20u
#define IPV6_HLEN_    40u
#define UDP_HLEN_     8u
#define ETH_P_IPV4_   0x0800u
#define ETH_P_IPV6_   0x86ddu
#define IPPROTO_IPIP_ 4u
#define IPPROTO_IPV6_ 41u

static inline uint16_t ld16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline void st16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/* One's-complement sum of @len bytes (big-endian words) added to @sum. */
static inline uint32_t csum_add_bytes(uint32_t sum, const uint8_t *p,
				      unsigned len)
{
	while (len > 1) {
		sum += ld16(p);
		p += 2;
		len -= 2;
	}
	if (len)
		sum += (uint32_t)p[0] << 8;
	return sum;
}

/*
 * Incremental updates (RFC 1624: ~m + m') in the machine's byte order,
 * four bytes at a time into a 64-bit sum: a one's-complement sum does not
 * depend on byte order (RFC 1071 2(B)) as long as the checksum field is
 * read and written in the same order, and the 32-bit words fold into the
 * same 16-bit sum as their halves would.
 */

/* Add to @acc the change of @len bytes (a multiple of 4) from @old to
 * @new_. */
static inline uint64_t csum_delta(uint64_t acc, const uint8_t *old,
				  const uint8_t *new_, unsigned len)
{
	for (unsigned i = 0; i < len; i += 4) {
		uint32_t o, n;

		memcpy(&o, old + i, 4);
		memcpy(&n, new_ + i, 4);
		acc += (uint32_t)~o;
		acc += n;
	}
	return acc;
}

/*
 * @s folded to 16 bits with end-around carries. Adding a value to itself
 * rotated by half its width leaves in the high half the sum of the two
 * halves plus the low half's carry: a one's-complement add of the halves
 * in one add (equal to folding twice, 64 -> 32, then 32 -> 16: checked
 * against the plain fold in test_l4lb_hdr).
 */
static inline uint16_t csum_fold64(uint64_t s)
{
	uint32_t x = (uint32_t)((s + (s >> 32 | s << 32)) >> 32);

	return (uint16_t)((x + (x >> 16 | x << 16)) >> 16);
}

/* A 32-bit sum (csum_add_bytes()) folded to 16 bits. */
static inline uint16_t csum_fold(uint32_t sum)
{
	return csum_fold64(sum);
}

/* Apply delta @acc (csum_delta()) to the checksum field at @field
 * (RFC 1624 eqn. 3). */
static inline void csum_apply(uint8_t *field, uint64_t acc)
{
	uint16_t f;

	memcpy(&f, field, 2);
	f = (uint16_t)~csum_fold64((uint16_t)~f + acc);
	memcpy(field, &f, 2);
}

/* The IPv4 header checksum of @ihl bytes at @ip (field at 10 zeroed). */
static inline void ipv4_csum_set(uint8_t *ip, unsigned ihl)
{
	st16(ip + 10, 0);
	st16(ip + 10, (uint16_t)~csum_fold(csum_add_bytes(0, ip, ihl)));
}

#endif /* DPFLOW_L4LB_HDR_H */
