/*
 * Weighted Maglev consistent hashing (Eisenbud et al., "Maglev: A Fast
 * and Reliable Software Network Load Balancer", NSDI 2016, section 3.4).
 *
 * A lookup table of @m slots (a prime) maps a flow hash to a member:
 * member = table[hash % m]. Each member with a weight above zero walks its
 * own permutation of the slots and claims the next free slot of it when
 * its turn comes:
 *
 *   offset = H(name, 0x6d61676c65766f66) % m        ("maglevof")
 *   skip   = H(name, 0x6d61676c65767370) % (m - 1) + 1   ("maglevsp")
 *   permutation[j] = (offset + j * skip) % m
 *
 * where H(s, seed) is the 64-bit FNV-1a of the name's bytes, XORed with
 * seed, then splitmix64's finaliser (x ^= x >> 30; x *= 0xbf58476d1ce4e5b9;
 * x ^= x >> 27; x *= 0x94d049bb133111eb; x ^= x >> 31).
 *
 * Turns are weighted: in round r = 1, 2, ... every member, in name order
 * (strcmp), adds its weight to its credit and claims one slot for each
 * whole multiple of the largest weight it holds (paying that much each
 * time), until every slot is claimed. So after r rounds a member holds
 * floor(r * w / wmax) slots and shares follow the weights; with equal
 * weights this is the paper's round robin. Members with weight 0
 * (draining) get no slots and change nothing.
 *
 * The table depends only on the set of (name, weight) pairs, never on the
 * order the caller lists them in, so two instances with the same members
 * build the same table, and the description above is enough to
 * reproduce it in any language.
 *
 * Control path only (allocates); any thread; no shared state.
 */
#ifndef DPFLOW_MAGLEV_H
#define DPFLOW_MAGLEV_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DPFLOW_MAGLEV_SIZE_DEFAULT 65537u
#define DPFLOW_MAGLEV_SIZE_MAX	   16777213u  /* a prime below 2^24 */
#define DPFLOW_MAGLEV_NAME_MAX	   64u	      /* bytes of a name, no NUL */
#define DPFLOW_MAGLEV_WEIGHT_MAX   1000000u   /* a Maglev pipe's member */
#define DPFLOW_MAGLEV_NONE	   UINT32_MAX /* slot value: no member */

struct dpflow_maglev_member {
	const char *name; /* stable identity, e.g. "10.0.0.1:80"; unique */
	uint32_t weight;  /* 0: no slots */
};

/* True when @m is prime (trial division; @m up to 2^32-1). */
bool dpflow_maglev_is_prime(uint32_t m);

/*
 * Fill @table (@m slots) from @n members @mb: each slot gets the index
 * into @mb of its member, or DPFLOW_MAGLEV_NONE in every slot when no
 * member has a weight. Returns 0, or -EINVAL when @m is not a prime in
 * 3..DPFLOW_MAGLEV_SIZE_MAX, a name is NULL, empty, longer than
 * DPFLOW_MAGLEV_NAME_MAX or used twice, or the total weight exceeds
 * 2^32-1; -ENOMEM. On failure @table is untouched. Allocates temporary
 * memory (about 48 bytes a member and one bit a slot). Cost: about
 * m ln m probes of a bitmap (the permutations' walks), plus a heap step
 * of log2(n) a slot when the weights are skewed (the largest above 4
 * times the average); a few milliseconds for 65537 slots.
 */
int dpflow_maglev_build(const struct dpflow_maglev_member *mb, uint32_t n,
			uint32_t m, uint32_t *table);

#ifdef __cplusplus
}
#endif

#endif /* DPFLOW_MAGLEV_H */
