/*
 * Weighted Maglev consistent hashing (Eisenbud et al., NSDI 2016).
 *
 * A lookup table of @m slots (a prime) maps a flow hash to a backend:
 * backend = table[hash % m]. Each backend with a weight above zero walks
 * its own permutation of the slots (offset and skip from two hashes of
 * its name) and claims the next free slot of it when its turn comes.
 * Turns are weighted: in every round each backend earns its weight in
 * credit and claims one slot for each whole multiple of the largest
 * weight it holds, so that slot shares follow the weights. Backends with
 * weight 0 (draining) get no slots.
 *
 * The table depends only on the set of (name, weight) pairs: backends are
 * taken in name order, whatever order the caller lists them in, so two
 * instances with the same backends build the same table.
 */
#ifndef DPFLOW_L4LB_MAGLEV_H
#define DPFLOW_L4LB_MAGLEV_H

#include <stdbool.h>
#include <stdint.h>

#define L4LB_MAGLEV_SIZE_DEFAULT 65537u
#define L4LB_MAGLEV_SIZE_MAX	 16777213u /* a prime below 2^24 */
#define L4LB_MAGLEV_NAME_MAX	 64u
#define L4LB_MAGLEV_NONE	 UINT32_MAX /* slot value: no backend */

struct l4lb_maglev_backend {
	const char *name; /* stable identity, e.g. "10.0.0.1:80"; unique */
	uint32_t weight;  /* 0: no slots */
};

/* True when @m is prime (trial division; @m up to 2^32-1). */
bool l4lb_is_prime(uint32_t m);

/*
 * Fill @table (@m slots) from @n backends @b: each slot gets the index
 * into @b of its backend, or L4LB_MAGLEV_NONE in every slot when no
 * backend has a weight. Returns 0, or -EINVAL when @m is not a prime in
 * 3..L4LB_MAGLEV_SIZE_MAX, a name is NULL, empty, longer than
 * L4LB_MAGLEV_NAME_MAX or used twice, or the total weight exceeds 2^32-1;
 * -ENOMEM. Allocates temporary memory (about 16 bytes a backend and 4
 * bytes a slot); never touches the data path.
 */
int l4lb_maglev_build(const struct l4lb_maglev_backend *b, uint32_t n,
		      uint32_t m, uint32_t *table);

#endif /* DPFLOW_L4LB_MAGLEV_H */
