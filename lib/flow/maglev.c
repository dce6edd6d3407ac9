/*
 * Weighted Maglev table builder (control path). The contract, with the
 * name hashes and the order of claims, is in include/dpflow/maglev.h.
 *
 * Validation comes first and the table is written only once everything
 * has been checked and allocated, so a failed call leaves @table as it
 * was.
 *
 * Weighted turns. The header describes rounds: in round r = 1, 2, ...
 * each weighted member, in name order, adds its weight w to its credit
 * and claims one slot per whole wmax of credit (wmax: the largest weight).
 * After r rounds a member has therefore claimed floor(r * w / wmax)
 * slots, so its k-th claim (k = 1, 2, ...) falls in round
 * ceil(k * wmax / w), and within a round the claims go in name order,
 * a member claiming at most once a round (w <= wmax). Walking the rounds
 * one by one costs O(members) per round and there are about
 * m * wmax / total rounds: m * wmax / wavg member visits, cheap while
 * the weights are balanced (walk_rounds(), used when wmax is at most
 * WALK_SKEW_MAX times the average weight) and slow for skewed weights
 * (one heavy member among many light ones). There a binary heap keyed
 * by (round of next claim, name rank) yields the same claims in the
 * same order in O(m log n) (walk_heap()): the top is always the next
 * claim of the round loop. tests/unit/test_maglev.c holds both to a
 * naive reference.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/maglev.h"

/* Largest weight over the average up to which the rounds are walked one
 * by one (about WALK_SKEW_MAX member visits a slot) rather than through
 * the heap (a sift of log2(members) levels a slot). */
#define WALK_SKEW_MAX 4

/* Seeds of the two name hashes (offset and skip); fixed, so tables are
 * the same on every instance and every run. */
#define SEED_OFFSET 0x6d61676c65766f66ull /* "maglevof" */
#define SEED_SKIP   0x6d61676c65767370ull /* "maglevsp" */

/* Per weighted member state, in name order (the index is the rank). */
struct perm {
	uint64_t round;	 /* round of the next claim */
	uint64_t credit; /* credit held in that round, >= wmax */
	uint32_t src;	 /* index into the caller's array */
	uint32_t weight; /* > 0 */
	uint32_t pos;	 /* last slot claimed, or the offset */
	uint32_t skip;	 /* 1..m-1 */
};

/* 64-bit FNV-1a of @s, then a finaliser (splitmix64's) keyed by @seed so
 * that the two hashes of one name are independent. */
static uint64_t name_hash(const char *s, uint64_t seed)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ull;
	}
	h ^= seed;
	h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
	h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
	return h ^ (h >> 31);
}

static int by_name(const void *a, const void *b)
{
	const struct dpflow_maglev_member *x =
	    *(const struct dpflow_maglev_member *const *)a;
	const struct dpflow_maglev_member *y =
	    *(const struct dpflow_maglev_member *const *)b;

	return strcmp(x->name, y->name);
}

/* After a claim by @q: pay wmax and move on by as many rounds as it
 * takes to earn it again (ceil((wmax - credit) / w); one round for the
 * largest weight). The credit left is below w <= wmax: a member claims
 * at most once a round. All 32-bit but the sums: credit < wmax + w <
 * 2^33, round < m * 2^32. */
static void pay(struct perm *q, uint32_t wmax)
{
	uint32_t need, d;

	q->credit -= wmax;
	need = wmax - (uint32_t)q->credit;
	d = need <= q->weight ? 1 : (need - 1) / q->weight + 1;
	q->round += d;
	q->credit += (uint64_t)d * q->weight;
}

/* A heap node: a member's next claim, keyed by (round, rank); the key
 * is kept in the node so that sifting reads the heap array alone. */
struct node {
	uint64_t round;
	uint32_t rank;
};

static bool node_less(const struct node *a, const struct node *b)
{
	return a->round < b->round ||
	       (a->round == b->round && a->rank < b->rank);
}

/* Move @x down from position @i to its place (a hole walks down). */
static void sift_down(struct node *heap, uint32_t n, uint32_t i, struct node x)
{
	for (;;) {
		uint64_t c = 2 * (uint64_t)i + 1;

		if (c >= n)
			break;
		if (c + 1 < n && node_less(&heap[c + 1], &heap[c]))
			c++;
		if (!node_less(&heap[c], &x))
			break;
		heap[i] = heap[c];
		i = (uint32_t)c;
	}
	heap[i] = x;
}

bool dpflow_maglev_is_prime(uint32_t m)
{
	if (m < 2)
		return false;
	if (m % 2 == 0)
		return m == 2;
	for (uint64_t d = 3; d * d <= m; d += 2)
		if (m % d == 0)
			return false;
	return true;
}

/* Arguments that can be checked without sorting: m, pointers, names,
 * total weight. */
static int check_args(const struct dpflow_maglev_member *mb, uint32_t n,
		      uint32_t m, const uint32_t *table)
{
	uint64_t total = 0;

	if (!table || (n && !mb))
		return -EINVAL;
	if (m < 3 || m > DPFLOW_MAGLEV_SIZE_MAX || !dpflow_maglev_is_prime(m))
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++) {
		size_t len;

		if (!mb[i].name)
			return -EINVAL;
		len = strnlen(mb[i].name, DPFLOW_MAGLEV_NAME_MAX + 1);
		if (len == 0 || len > DPFLOW_MAGLEV_NAME_MAX)
			return -EINVAL;
		total += mb[i].weight;
		if (total > UINT32_MAX)
			return -EINVAL;
	}
	return 0;
}

/* Member @q claims the next free slot of its permutation. @used is a
 * bitmap of the @m slots: probing it rather than the table keeps the
 * walks in cache for large tables. */
static inline void claim(struct perm *q, uint64_t *used, uint32_t m,
			 uint32_t *table)
{
	uint32_t s = q->pos;

	/* A permutation visits every slot, so a free one turns up while
	 * any is left. */
	while (used[s / 64] >> (s % 64) & 1) {
		s += q->skip;
		if (s >= m)
			s -= m;
	}
	used[s / 64] |= 1ull << (s % 64);
	table[s] = q->src;
	q->pos = s;
}

/* The rounds one by one (balanced weights): each member, in rank order,
 * earns its weight and claims when its credit reaches wmax. */
static void walk_rounds(struct perm *p, uint32_t nw, uint32_t wmax,
			uint64_t *used, uint32_t m, uint32_t *table)
{
	uint32_t filled = 0;

	for (uint32_t i = 0; i < nw; i++)
		p[i].credit = 0;
	while (filled < m) {
		for (uint32_t i = 0; i < nw && filled < m; i++) {
			struct perm *q = &p[i];

			q->credit += q->weight;
			if (q->credit < wmax)
				continue;
			q->credit -= wmax;
			claim(q, used, m, table);
			filled++;
		}
	}
}

/* The same claims in the same order from a heap of next claims (skewed
 * weights). @heap: @nw nodes of scratch space. */
static void walk_heap(struct perm *p, uint32_t nw, uint32_t wmax,
		      struct node *heap, uint64_t *used, uint32_t m,
		      uint32_t *table)
{
	for (uint32_t i = 0; i < nw; i++) {
		/* The first claim: in round ceil(wmax / w). */
		p[i].round = (wmax - 1) / p[i].weight + 1;
		p[i].credit = p[i].round * p[i].weight;
		heap[i] = (struct node){p[i].round, i};
	}
	for (uint32_t i = nw / 2; i-- > 0;)
		sift_down(heap, nw, i, heap[i]);

	for (uint32_t filled = 0; filled < m; filled++) {
		struct perm *q = &p[heap[0].rank];

		claim(q, used, m, table);
		pay(q, wmax);
		sift_down(heap, nw, 0, (struct node){q->round, heap[0].rank});
	}
}

int dpflow_maglev_build(const struct dpflow_maglev_member *mb, uint32_t n,
			uint32_t m, uint32_t *table)
{
	const struct dpflow_maglev_member **sorted = NULL;
	struct perm *p = NULL;
	struct node *heap = NULL;
	uint64_t *used = NULL;
	uint32_t nw = 0, wmax = 0;
	uint64_t total = 0;
	int rc;

	rc = check_args(mb, n, m, table);
	if (rc)
		return rc;

	if (n) {
		sorted = calloc(n, sizeof(*sorted));
		if (!sorted)
			return -ENOMEM;
		for (uint32_t i = 0; i < n; i++)
			sorted[i] = &mb[i];
		qsort(sorted, n, sizeof(*sorted), by_name);
		for (uint32_t i = 1; i < n; i++) {
			if (strcmp(sorted[i - 1]->name, sorted[i]->name) == 0) {
				rc = -EINVAL;
				goto out;
			}
		}
	}
	for (uint32_t i = 0; i < n; i++) {
		if (sorted[i]->weight) {
			nw++;
			total += sorted[i]->weight;
			if (sorted[i]->weight > wmax)
				wmax = sorted[i]->weight;
		}
	}

	if (nw) {
		p = calloc(nw, sizeof(*p));
		heap = calloc(nw, sizeof(*heap)); /* walk_heap() only */
		used = calloc(m / 64 + 1, sizeof(*used));
		if (!p || !heap || !used) {
			rc = -ENOMEM;
			goto out;
		}
		for (uint32_t i = 0, j = 0; i < n; i++) {
			const struct dpflow_maglev_member *s = sorted[i];

			if (!s->weight)
				continue;
			p[j].src = (uint32_t)(s - mb);
			p[j].weight = s->weight;
			p[j].pos =
			    (uint32_t)(name_hash(s->name, SEED_OFFSET) % m);
			p[j].skip = (uint32_t)(name_hash(s->name, SEED_SKIP) %
					       (m - 1)) +
				    1;
			j++;
		}
	}

	for (uint32_t i = 0; i < m; i++)
		table[i] = DPFLOW_MAGLEV_NONE;
	if (nw && (uint64_t)wmax * nw <= WALK_SKEW_MAX * total)
		walk_rounds(p, nw, wmax, used, m, table);
	else if (nw)
		walk_heap(p, nw, wmax, heap, used, m, table);
	rc = 0;
out:
	free(used);
	free(heap);
	free(p);
	free(sorted);
	return rc;
}
