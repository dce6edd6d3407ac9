/*
 * Weighted Maglev table builder (control path). The contract is in
 * maglev.h.
 *
 * Validation comes first and the table is written only once everything
 * has been checked and allocated, so a failed call leaves @table as it
 * was.
 *
 * Weighted turns. The header describes rounds: in round r = 1, 2, ...
 * each weighted backend, in name order, adds its weight w to its credit
 * and claims one slot per whole wmax of credit (wmax: the largest weight).
 * After r rounds a backend has therefore claimed floor(r * w / wmax)
 * slots, so its k-th claim (k = 1, 2, ...) falls in round
 * ceil(k * wmax / w), and within a round the claims go in name order,
 * each backend's claims of that round back to back. Walking the rounds
 * one by one costs O(backends) per round and there are about
 * m * wmax / total rounds, which is slow for skewed weights (one heavy
 * backend among many light ones). Here a binary heap keyed by
 * (round of next claim, name rank) yields the same claims in the same
 * order in O(m log n): the top is always the next claim of the round
 * loop, and a backend that claims again in the same round keeps the top,
 * since every backend of lower rank in that round has already been taken.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "l4lb/maglev.h"

/* Seeds of the two name hashes (offset and skip); fixed, so tables are
 * the same on every instance and every run. */
#define SEED_OFFSET 0x6d61676c65766f66ull /* "maglevof" */
#define SEED_SKIP   0x6d61676c65767370ull /* "maglevsp" */

/* Per weighted backend state, in name order (the index is the rank). */
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
	const struct l4lb_maglev_backend *x =
	    *(const struct l4lb_maglev_backend *const *)a;
	const struct l4lb_maglev_backend *y =
	    *(const struct l4lb_maglev_backend *const *)b;

	return strcmp(x->name, y->name);
}

/* After a claim by @q: pay wmax, and when the credit left is below
 * wmax, move on by as many rounds as it takes to earn enough again
 * (ceil((wmax - credit) / w); one round for the largest weight). All
 * 32-bit but the sums: credit < wmax + w < 2^33, round < m * 2^32. */
static void pay(struct perm *q, uint32_t wmax)
{
	uint32_t need, d;

	q->credit -= wmax;
	if (q->credit >= wmax)
		return;
	need = wmax - (uint32_t)q->credit;
	d = need <= q->weight ? 1 : (need - 1) / q->weight + 1;
	q->round += d;
	q->credit += (uint64_t)d * q->weight;
}

static bool heap_less(const struct perm *p, uint32_t a, uint32_t b)
{
	return p[a].round < p[b].round || (p[a].round == p[b].round && a < b);
}

static void sift_down(const struct perm *p, uint32_t *heap, uint32_t n,
		      uint32_t i)
{
	for (;;) {
		uint64_t l = 2 * (uint64_t)i + 1, r = l + 1;
		uint32_t min = i, t;

		if (l < n && heap_less(p, heap[l], heap[min]))
			min = (uint32_t)l;
		if (r < n && heap_less(p, heap[r], heap[min]))
			min = (uint32_t)r;
		if (min == i)
			return;
		t = heap[i];
		heap[i] = heap[min];
		heap[min] = t;
		i = min;
	}
}

bool l4lb_is_prime(uint32_t m)
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
static int check_args(const struct l4lb_maglev_backend *b, uint32_t n,
		      uint32_t m, const uint32_t *table)
{
	uint64_t total = 0;

	if (!table || (n && !b))
		return -EINVAL;
	if (m < 3 || m > L4LB_MAGLEV_SIZE_MAX || !l4lb_is_prime(m))
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++) {
		size_t len;

		if (!b[i].name)
			return -EINVAL;
		len = strnlen(b[i].name, L4LB_MAGLEV_NAME_MAX + 1);
		if (len == 0 || len > L4LB_MAGLEV_NAME_MAX)
			return -EINVAL;
		total += b[i].weight;
		if (total > UINT32_MAX)
			return -EINVAL;
	}
	return 0;
}

/* Claim the @m slots of @table for the weighted backends @p (@nw of
 * them, largest weight @wmax). @heap (@nw entries) and @used (a bitmap of
 * @m bits, all clear) are scratch space. Probing the bitmap rather than
 * the table keeps the walks in cache for large tables. */
static void populate(struct perm *p, uint32_t nw, uint32_t wmax, uint32_t *heap,
		     uint64_t *used, uint32_t m, uint32_t *table)
{
	for (uint32_t i = 0; i < nw; i++) {
		/* The first claim: in round ceil(wmax / w). */
		p[i].round = (wmax - 1) / p[i].weight + 1;
		p[i].credit = p[i].round * p[i].weight;
		heap[i] = i;
	}
	for (uint32_t i = nw / 2; i-- > 0;)
		sift_down(p, heap, nw, i);

	for (uint32_t filled = 0; filled < m; filled++) {
		struct perm *q = &p[heap[0]];
		uint32_t s = q->pos;

		/* A permutation visits every slot, so a free one turns up
		 * while any is left. */
		while (used[s / 64] >> (s % 64) & 1) {
			s += q->skip;
			if (s >= m)
				s -= m;
		}
		used[s / 64] |= 1ull << (s % 64);
		table[s] = q->src;
		q->pos = s;
		pay(q, wmax);
		sift_down(p, heap, nw, 0);
	}
}

int l4lb_maglev_build(const struct l4lb_maglev_backend *b, uint32_t n,
		      uint32_t m, uint32_t *table)
{
	const struct l4lb_maglev_backend **sorted = NULL;
	struct perm *p = NULL;
	uint32_t *heap = NULL;
	uint64_t *used = NULL;
	uint32_t nw = 0, wmax = 0;
	int rc;

	rc = check_args(b, n, m, table);
	if (rc)
		return rc;

	if (n) {
		sorted = calloc(n, sizeof(*sorted));
		if (!sorted)
			return -ENOMEM;
		for (uint32_t i = 0; i < n; i++)
			sorted[i] = &b[i];
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
			if (sorted[i]->weight > wmax)
				wmax = sorted[i]->weight;
		}
	}

	if (nw) {
		p = calloc(nw, sizeof(*p));
		heap = calloc(nw, sizeof(*heap));
		used = calloc(m / 64 + 1, sizeof(*used));
		if (!p || !heap || !used) {
			rc = -ENOMEM;
			goto out;
		}
		for (uint32_t i = 0, j = 0; i < n; i++) {
			const struct l4lb_maglev_backend *s = sorted[i];

			if (!s->weight)
				continue;
			p[j].src = (uint32_t)(s - b);
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
		table[i] = L4LB_MAGLEV_NONE;
	if (nw)
		populate(p, nw, wmax, heap, used, m, table);
	rc = 0;
out:
	free(used);
	free(heap);
	free(p);
	free(sorted);
	return rc;
}
