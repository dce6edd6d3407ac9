/*
 * `dpflow bench exact-1m`: the exact-match table alone, one core, in
 * memory.
 *
 * --keys distinct 16-byte IPv4 5-tuple keys (addresses, ports, protocol,
 * three zero bytes) go into a table of --capacity entries (default: the key
 * count), key i with value i; the insertion rate into the empty table is
 * the best of up to 3 fills. Lookups then run over a stream of --stream
 * keys copied from the key set (as a parser would lay them out), drawn
 * uniformly or from a Zipf distribution (--zipf-s, ranks scattered over
 * the keys), --burst keys per dpflow_exact_lookup_bulk() call, every
 * lookup a hit. Each trial runs --seconds; the best of --trials is
 * reported. When built with DPDK, rte_hash (rte_hash_crc, no extendable
 * buckets, entries = the key count) gets the same keys and the same key
 * pointers through rte_hash_lookup_bulk_data(), its trials interleaved
 * with dpflow's (bench_exact_dpdk.c).
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/dpflow.h"
#include "dpflow/table_exact.h"

#include "bench.h"
#include "bench_common.h"
#ifdef DPFLOW_HAVE_DPDK
#include "bench_dpdk.h"
#endif

#define KEY_LEN 16

enum { DIST_BOTH, DIST_UNIFORM, DIST_ZIPF };

struct exact_opts {
	uint32_t keys;
	uint32_t capacity; /* 0: the key count */
	uint32_t burst;
	uint32_t stream;
	double seconds;
	unsigned trials;
	int dist;
	double zipf_s;
	uint64_t seed;
	int variants;	   /* BENCH_VARIANT_* */
	uint32_t packets;  /* frames of the pipe variant */
	bool peer;	   /* run the DPDK peer when built with it */
	bool thp;	   /* dpflow's image in transparent huge pages */
	bool pipe_counter; /* the pipe's per-entry counters */
};

/* The peer's state, when there is one. */
struct peer {
	void *h; /* struct bench_dpdk_exact */
	const char *name;
	double insert_mpps; /* rte_hash_add_key_data, best fill */
};

/* Cycles per lookup of the table variant (uniform), for the stage line. */
static double table_cpp;

static uint64_t rng_state;

static uint64_t rng(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint32_t rng_below(uint32_t n)
{
	return (uint32_t)((rng() >> 32) * n >> 32);
}

/* Key i: src, dst, sport, dport (network order), proto, 3 zero bytes. */
static void make_keys(uint8_t *keys, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		uint8_t *k = keys + (size_t)i * KEY_LEN;
		uint32_t src = bench_scramble(i), dst = (uint32_t)rng();
		uint16_t sport = (uint16_t)(1024 + rng_below(64512));
		uint16_t dport = (uint16_t)(rng_below(4) ? 443 : 53);

		memset(k, 0, KEY_LEN);
		k[0] = (uint8_t)(src >> 24);
		k[1] = (uint8_t)(src >> 16);
		k[2] = (uint8_t)(src >> 8);
		k[3] = (uint8_t)src;
		memcpy(k + 4, &dst, 4);
		k[8] = (uint8_t)(sport >> 8);
		k[9] = (uint8_t)sport;
		k[10] = (uint8_t)(dport >> 8);
		k[11] = (uint8_t)dport;
		k[12] = dport == 53 ? 17 : 6;
	}
}

/* @n_stream key indices, uniform or Zipf(@s) over ranks scattered by a
 * random permutation. NULL when out of memory. */
static uint32_t *make_order(uint32_t n_keys, uint32_t n_stream, bool zipf,
			    double s)
{
	uint32_t *ord = malloc((size_t)n_stream * sizeof(*ord));
	uint32_t *perm = NULL;
	double *cdf = NULL;

	if (!ord)
		return NULL;
	if (!zipf) {
		for (uint32_t i = 0; i < n_stream; i++)
			ord[i] = rng_below(n_keys);
		return ord;
	}
	perm = malloc((size_t)n_keys * sizeof(*perm));
	cdf = malloc((size_t)n_keys * sizeof(*cdf));
	if (!perm || !cdf) {
		free(ord);
		ord = NULL;
		goto out;
	}
	for (uint32_t i = 0; i < n_keys; i++) {
		uint32_t j = rng_below(i + 1);

		perm[i] = perm[j];
		perm[j] = i;
		cdf[i] = (i ? cdf[i - 1] : 0) + 1.0 / pow(i + 1.0, s);
	}
	for (uint32_t i = 0; i < n_stream; i++) {
		double u = (double)(rng() >> 11) / 9007199254740992.0 *
			   cdf[n_keys - 1];
		uint32_t lo = 0, hi = n_keys - 1;

		while (lo < hi) {
			uint32_t mid = lo + (hi - lo) / 2;

			if (cdf[mid] <= u)
				lo = mid + 1;
			else
				hi = mid;
		}
		ord[i] = perm[lo];
	}
out:
	free(perm);
	free(cdf);
	return ord;
}

static uint64_t run_dpflow(const struct dpflow_exact_image *img,
			   const uint8_t *stream, uint32_t n_stream,
			   uint32_t burst, double seconds, uint64_t *lookups,
			   uint64_t *hits, uint64_t *sink)
{
	uint64_t budget = (uint64_t)(seconds * (double)dpflow_tsc_hz());
	uint64_t start = dpflow_tsc(), now = start, n = 0, h = 0, s = 0;
	const void *ptr[DPFLOW_BURST_MAX];
	uint32_t val[DPFLOW_BURST_MAX];
	uint32_t pos = 0;

	while (now - start < budget) {
		for (unsigned r = 0; r < 16; r++) {
			for (uint32_t j = 0; j < burst; j++)
				ptr[j] = stream + (size_t)(pos + j) * KEY_LEN;
			h += dpflow_exact_lookup_bulk(img, ptr, burst, val);
			for (uint32_t j = 0; j < burst; j++)
				s += val[j];
			pos += burst;
			if (pos + burst > n_stream)
				pos = 0;
		}
		n += 16 * (uint64_t)burst;
		now = dpflow_tsc();
	}
	*lookups = n;
	*hits = h;
	*sink += s;
	return now - start;
}

static void keep_best(struct bench_result *best, uint64_t n, uint64_t ticks)
{
	if (!best->pkts || (double)ticks / (double)n <
			       (double)best->tsc_cycles / (double)best->pkts) {
		best->pkts = n;
		best->tsc_cycles = ticks;
	}
}

/* One lookup workload (one distribution), dpflow and peer interleaved. */
static int run_lookups(const struct exact_opts *o,
		       const struct dpflow_exact_image *img,
		       const uint8_t *keys, bool zipf, struct peer *peer)
{
	uint32_t *ord = make_order(o->keys, o->stream, zipf, o->zipf_s);
	uint8_t *stream = malloc((size_t)o->stream * KEY_LEN);
	struct bench_result best = {0};
	double peer_best = 0;
	uint64_t sink = 0;
	char variant[32];
	int rc = 1;

	if (!ord || !stream) {
		fprintf(stderr, "bench exact: out of memory\n");
		goto out;
	}
	for (uint32_t i = 0; i < o->stream; i++)
		memcpy(stream + (size_t)i * KEY_LEN,
		       keys + (size_t)ord[i] * KEY_LEN, KEY_LEN);
	for (unsigned t = 0; t < o->trials; t++) {
		uint64_t n = 0, hits = 0, ticks;

		ticks = run_dpflow(img, stream, o->stream, o->burst, o->seconds,
				   &n, &hits, &sink);
		if (hits != n) {
			fprintf(stderr, "bench exact: %llu of %llu missed\n",
				(unsigned long long)(n - hits),
				(unsigned long long)n);
			goto out;
		}
		keep_best(&best, n, ticks);
#ifdef DPFLOW_HAVE_DPDK
		if (peer->h) {
			ticks = bench_dpdk_exact_run(
			    (struct bench_dpdk_exact *)peer->h, stream,
			    o->stream, o->burst, o->seconds, &n, &hits, &sink);
			if (hits != n)
				fprintf(stderr,
					"bench exact: rte_hash missed %llu of "
					"%llu\n",
					(unsigned long long)(n - hits),
					(unsigned long long)n);
			if ((double)n /
				((double)ticks / (double)dpflow_tsc_hz()) /
				1e6 >
			    peer_best)
				peer_best =
				    (double)n /
				    ((double)ticks / (double)dpflow_tsc_hz()) /
				    1e6;
		}
#endif
	}
	if (zipf)
		snprintf(variant, sizeof(variant), "zipf%.2g-b%u", o->zipf_s,
			 o->burst);
	else
		snprintf(variant, sizeof(variant), "uniform-b%u", o->burst);
	if (!zipf)
		table_cpp = (double)best.tsc_cycles / (double)best.pkts;
	best.workload = "exact-1m";
	best.variant = variant;
	best.seconds = (double)best.tsc_cycles / (double)dpflow_tsc_hz();
	if (peer->h) {
		best.peer = peer->name;
		best.peer_mpps = peer_best;
	}
	bench_report(&best);
	if (sink == 0x5a5a5a5a5a5a5a5aull) /* keep the results alive */
		printf(" ");
	rc = 0;
out:
	free(ord);
	free(stream);
	return rc;
}

/* An empty image, in huge pages or plain 4 KiB pages. */
static struct dpflow_exact_image *make_table(const struct exact_opts *o)
{
	struct dpflow_exact_params p = {
	    KEY_LEN, o->capacity ? o->capacity : o->keys, 0x5eed};
	struct dpflow_error err = {0};
	struct dpflow_exact_image *img;
	size_t size;
	void *mem;

	if (o->thp) {
		img = dpflow_exact_create(&p, &err);
		if (!img)
			fprintf(stderr, "bench exact: %s\n", err.msg);
		return img;
	}
	size = dpflow_exact_image_size(p.key_len, p.capacity);
	mem = size ? aligned_alloc(64, (size + 63) & ~(size_t)63) : NULL;
	if (!mem || dpflow_exact_image_init(mem, size, &p, &err)) {
		fprintf(stderr, "bench exact: cannot make the table: %s\n",
			mem ? err.msg : "out of memory");
		free(mem);
		return NULL;
	}
	return (struct dpflow_exact_image *)mem;
}

/* Fill the empty table (best of up to 3 fills); check every key. */
static int fill(const struct exact_opts *o, struct dpflow_exact_image *img,
		const uint8_t *keys, struct bench_result *ins)
{
	struct dpflow_error err = {0};

	for (unsigned t = 0; t < (o->trials < 3 ? o->trials : 3); t++) {
		uint64_t start, ticks;

		dpflow_exact_clear(img);
		start = dpflow_tsc();
		for (uint32_t i = 0; i < o->keys; i++)
			if (dpflow_exact_insert(img, keys + (size_t)i * KEY_LEN,
						i, &err)) {
				fprintf(stderr,
					"bench exact: insert %u of %u: %s\n", i,
					o->keys, err.msg);
				return 1;
			}
		ticks = dpflow_tsc() - start;
		keep_best(ins, o->keys, ticks);
	}
	for (uint32_t i = 0; i < o->keys; i++)
		if (dpflow_exact_lookup(img, keys + (size_t)i * KEY_LEN) != i) {
			fprintf(stderr, "bench exact: key %u not found\n", i);
			return 1;
		}
	return 0;
}

/* ---- pipe level --------------------------------------------------------- */

/* The BASIC pipe's per-entry fields (bench_exact_fields) are in the order
 * of the table's keys, so that an entry's key is the first 13 bytes of a
 * table key. */
#define PIPE_KEY_LEN 13

/*
 * A new context whose BASIC pipe gets every key through dpflow_entry_add()
 * and dpflow_entries_process(), @batch entries a batch; the TSC ticks the
 * adds and batches took in *@ticks.
 */
static int pipe_fill(const struct exact_opts *o, const uint8_t *keys,
		     uint32_t batch, struct bench_pipe *bp, uint64_t *ticks)
{
	struct dpflow_pipe_cfg c;
	struct dpflow_entry_cfg e;
	uint64_t start;

	bench_pipe_cfg(&c, "exact", DPFLOW_PIPE_BASIC,
		       o->capacity ? o->capacity : o->keys, bench_exact_fields,
		       DPFLOW_ARRAY_SIZE(bench_exact_fields));
	c.monitor.counter = o->pipe_counter;
	if (bench_pipe_create(bp, &c, o->packets))
		return -1;
	memset(&e, 0, sizeof(e));
	start = dpflow_tsc();
	for (uint32_t i = 0; i < o->keys; i++) {
		memcpy(e.key, keys + (size_t)i * KEY_LEN, PIPE_KEY_LEN);
		if (bench_pipe_add(bp, &e))
			return -1;
		if ((i + 1) % batch == 0 || i + 1 == o->keys)
			if (bench_pipe_commit(bp))
				return -1;
	}
	*ticks = dpflow_tsc() - start;
	if (dpflow_pipe_entry_count(bp->pipe) != o->keys) {
		fprintf(stderr, "bench exact: pipe holds %u of %u entries\n",
			dpflow_pipe_entry_count(bp->pipe), o->keys);
		return -1;
	}
	return 0;
}

#ifdef DPFLOW_HAVE_DPDK
struct peer_pass {
	struct bench_dpdk_exact *e;
	struct bench_dpdk_pkts *p;
	uint32_t burst;
	uint64_t hits, sink;
};

static uint64_t peer_pipe_pass(void *arg)
{
	struct peer_pass *pp = (struct peer_pass *)arg;

	return bench_dpdk_exact_pipe(pp->e, pp->p, pp->burst, &pp->hits);
}

static uint64_t peer_parse_pass(void *arg)
{
	struct peer_pass *pp = (struct peer_pass *)arg;

	return bench_dpdk_pkts_parse(pp->p, pp->burst, &pp->sink);
}
#endif

/*
 * The BASIC pipe through the flow engine: its insertion rate (batches of
 * 64k entries, then one batch of all), then --packets frames of flows
 * drawn uniformly from the keys, parsed and matched in bursts, beside
 * the same work written with DPDK.
 */
static int run_pipe(const struct exact_opts *o, const uint8_t *keys,
		    struct peer *peer)
{
	static const uint32_t batches[2] = {65536, 0};
	struct bench_pipe bp;
	struct bench_best best = {0}, pbest = {0}, sbest = {0}, psbest = {0};
	const char *pname = NULL;
	uint32_t *ord = NULL;
	const uint8_t **frames = NULL;
	uint16_t *lens = NULL;
	uint64_t hits = 0, misses = 0;
	char variant[32];
	int rc = 1;
#ifdef DPFLOW_HAVE_DPDK
	struct peer_pass pp = {NULL, NULL, o->burst, 0, 0};
#endif

	memset(&bp, 0, sizeof(bp));
	for (unsigned b = 0; b < 2; b++) {
		uint32_t batch = batches[b] ? batches[b] : o->keys;
		struct bench_best ins = {0};

		for (unsigned t = 0; t < (o->trials < 2 ? o->trials : 2); t++) {
			uint64_t ticks;

			bench_pipe_destroy(&bp);
			if (pipe_fill(o, keys, batch, &bp, &ticks))
				goto out;
			bench_best_keep(&ins, o->keys, ticks);
		}
		if (batch == o->keys)
			snprintf(variant, sizeof(variant), "pipe-insert-b%u",
				 batch);
		else
			snprintf(variant, sizeof(variant), "pipe-insert-b%uk",
				 batch >> 10);
		pbest.pkts = o->keys;
		pbest.ticks = peer->insert_mpps > 0
				  ? (uint64_t)((double)o->keys /
					       (peer->insert_mpps * 1e6) *
					       (double)dpflow_tsc_hz())
				  : 0;
		bench_report_best("exact-1m", variant, &ins,
				  peer->insert_mpps > 0 ? "dpdk-rte_hash_add"
							: NULL,
				  &pbest, 0);
	}
	memset(&pbest, 0, sizeof(pbest));

	/* packets of flows drawn uniformly from the entries */
	ord = make_order(o->keys, o->packets, false, 0);
	frames = calloc(o->packets, sizeof(*frames));
	lens = calloc(o->packets, sizeof(*lens));
	if (!ord || !frames || !lens) {
		fprintf(stderr, "bench exact: out of memory\n");
		goto out;
	}
	for (uint32_t i = 0; i < o->packets; i++) {
		const uint8_t *k = keys + (size_t)ord[i] * KEY_LEN;
		struct bench_flow f;

		memcpy(f.src, k, 4);
		memcpy(f.dst, k + 4, 4);
		f.sport = (uint16_t)(k[8] << 8 | k[9]);
		f.dport = (uint16_t)(k[10] << 8 | k[11]);
		f.proto = k[12];
		if (bench_pipe_set_pkt(&bp, i, &f))
			goto out;
	}
	bench_pipe_frames(&bp, frames, lens);
	bp.burst = o->burst;
	bench_pipe_online(&bp);
	/* answers first: every packet must hit */
	bench_pipe_pass(&bp);
	bench_pipe_stats(&bp, &hits, &misses);
	if (misses || hits != o->packets - o->packets % o->burst) {
		fprintf(stderr, "bench exact: pipe: %llu hits, %llu misses\n",
			(unsigned long long)hits, (unsigned long long)misses);
		goto out;
	}
#ifdef DPFLOW_HAVE_DPDK
	if (peer->h) {
		pp.e = (struct bench_dpdk_exact *)peer->h;
		pp.p = bench_dpdk_pkts_create(frames, lens, o->packets);
		if (pp.p) {
			uint64_t n = peer_pipe_pass(&pp);

			if (pp.hits != n ||
			    bench_dpdk_exact_counted(pp.e) != n) {
				fprintf(stderr,
					"bench exact: peer pipe: %llu hits of "
					"%llu\n",
					(unsigned long long)pp.hits,
					(unsigned long long)n);
				goto out;
			}
			pname = "dpdk-ptype+rte_hash";
		}
	}
	bench_pair_run(bench_pipe_pass, &bp, pname ? peer_pipe_pass : NULL, &pp,
		       o->trials, o->seconds, &best, &pbest);
	bench_pair_run(bench_pipe_parse_pass, &bp,
		       pname ? peer_parse_pass : NULL, &pp, o->trials,
		       o->seconds / 4, &sbest, &psbest);
#else
	bench_pair_run(bench_pipe_pass, &bp, NULL, NULL, o->trials, o->seconds,
		       &best, &pbest);
	bench_pair_run(bench_pipe_parse_pass, &bp, NULL, NULL, o->trials,
		       o->seconds / 4, &sbest, &psbest);
#endif
	snprintf(variant, sizeof(variant), "pipe-uniform-b%u", o->burst);
	bench_report_best("exact-1m", variant, &best, pname, &pbest, 64);
	printf("# stages, cycles/pkt: dpflow pipe %.1f = parse %.1f",
	       bench_best_cpp(&best), bench_best_cpp(&sbest));
	if (table_cpp > 0)
		printf(" + table %.1f (table variant) + rest %.1f", table_cpp,
		       bench_best_cpp(&best) - bench_best_cpp(&sbest) -
			   table_cpp);
	if (pname)
		printf("; peer %.1f = ptype+extract %.1f + rest %.1f",
		       bench_best_cpp(&pbest), bench_best_cpp(&psbest),
		       bench_best_cpp(&pbest) - bench_best_cpp(&psbest));
	printf("\n");
	rc = 0;
out:
#ifdef DPFLOW_HAVE_DPDK
	bench_dpdk_pkts_destroy(pp.p);
#endif
	bench_pipe_destroy(&bp);
	free(ord);
	free(frames);
	free(lens);
	return rc;
}

static int run(const struct exact_opts *o)
{
	uint8_t *keys = malloc((size_t)o->keys * KEY_LEN);
	struct dpflow_exact_image *img = NULL;
	struct bench_result ins = {0};
	struct dpflow_exact_info info;
	struct peer peer = {NULL, NULL, 0};
	int rc = 1;

	rng_state = o->seed;
	if (!keys) {
		fprintf(stderr, "bench exact: out of memory\n");
		return 1;
	}
	make_keys(keys, o->keys);
	img = make_table(o);
	if (!img || fill(o, img, keys, &ins))
		goto out;
	dpflow_exact_info(img, &info);
	printf("# dpflow exact: %u keys of %u bytes, %u slots (load %.3f), "
	       "image %.1f MiB%s\n",
	       info.n_entries, KEY_LEN, info.n_slots,
	       (double)info.n_entries / info.n_slots,
	       (double)info.size / (1 << 20),
	       o->thp ? " (THP advised)" : " (4 KiB pages)");
#ifdef DPFLOW_HAVE_DPDK
	if (o->peer && o->burst > 64)
		printf("# no peer: rte_hash looks up at most 64 keys a call\n");
	if (o->peer && o->burst <= 64) {
		double peer_s = 0;
		uint32_t failed = 0;
		struct bench_dpdk_exact *e = bench_dpdk_exact_create(
		    keys, o->keys, o->keys, KEY_LEN,
		    o->trials < 3 ? o->trials : 3, &peer_s, &failed);

		if (e && failed == 0 &&
		    bench_dpdk_exact_check(e, keys, o->keys) == 0) {
			peer.h = e;
			peer.name = "dpdk-rte_hash";
			ins.peer = "dpdk-rte_hash_add";
			ins.peer_mpps = (double)o->keys / peer_s / 1e6;
			peer.insert_mpps = ins.peer_mpps;
		} else if (e) {
			fprintf(stderr,
				"bench exact: rte_hash refused %u keys or "
				"lost some: no peer\n",
				failed);
			bench_dpdk_exact_destroy(e);
		}
	}
#endif
	bench_report_header();
	ins.workload = "exact-1m";
	ins.variant = "insert-empty";
	ins.seconds = (double)ins.tsc_cycles / (double)dpflow_tsc_hz();
	if (o->variants & BENCH_VARIANT_TABLE) {
		bench_report(&ins);
		if ((o->dist != DIST_ZIPF &&
		     run_lookups(o, img, keys, false, &peer)) ||
		    (o->dist != DIST_UNIFORM &&
		     run_lookups(o, img, keys, true, &peer)))
			goto out;
	}
	if ((o->variants & BENCH_VARIANT_PIPE) && run_pipe(o, keys, &peer))
		goto out;
	rc = 0;
out:
#ifdef DPFLOW_HAVE_DPDK
	bench_dpdk_exact_destroy((struct bench_dpdk_exact *)peer.h);
#endif
	if (o->thp)
		dpflow_exact_destroy(img);
	else
		free(img);
	free(keys);
	return rc;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: dpflow bench exact-1m [--keys N] [--capacity N] "
		"[--burst N]\n"
		"                             [--stream N] [--dist D] "
		"[--zipf-s S]\n"
		"                             [--seconds S] [--trials N] "
		"[--seed N]\n"
		"                             [--no-thp] [--no-peer] "
		"[--variant V]\n"
		"                             [--packets N]\n"
		"\n"
		"Two variants, one core, best of the trials, each beside its "
		"DPDK peer\n"
		"in the same run:\n"
		"  table  the exact-match table alone, 16-byte 5-tuple keys: "
		"fill rate into\n"
		"         an empty table, then bulk lookups (all hits); peer "
		"rte_hash\n"
		"         (rte_hash_add_key_data, "
		"rte_hash_lookup_bulk_data).\n"
		"  pipe   the flow engine: a BASIC root pipe on the outer "
		"5-tuple with a\n"
		"         counter per entry; insertion rate of the keys "
		"through\n"
		"         dpflow_entry_add + dpflow_entries_process (batches "
		"of 64k, then\n"
		"         one batch of all; peer rte_hash_add_key_data), then "
		"--packets\n"
		"         64-byte Eth/IPv4/TCP|UDP frames of uniformly drawn "
		"flows through\n"
		"         dpflow_ctx_process_burst() in bursts of --burst, "
		"hits and misses\n"
		"         to a handler that keeps them (re-parsed every "
		"pass); peer\n"
		"         rte_net_get_ptype + 5-tuple read + "
		"rte_hash_lookup_bulk_data +\n"
		"         a counter per entry. A '# stages' line splits the "
		"cycles.\n"
		"  --keys N      distinct keys (default 1000000)\n"
		"  --capacity N  table capacity (default: the key count)\n"
		"  --burst N     keys per bulk lookup, 1..256 (default 64; "
		"the peer needs <= 64)\n"
		"  --stream N    keys in the lookup stream (default 2097152)\n"
		"  --dist D      uniform, zipf or both (default both)\n"
		"  --zipf-s S    Zipf exponent (default 1.1)\n"
		"  --seconds S   length of one trial (default 0.5)\n"
		"  --trials N    trials per workload (default 5)\n"
		"  --seed N      key and stream generator seed (default 1)\n"
		"  --no-thp      keep dpflow's image in 4 KiB pages\n"
		"  --no-peer     skip the DPDK rte_hash peer\n"
		"  --variant V   table, pipe or all (default all)\n"
		"  --packets N   frames of the pipe variant (default 65536)\n"
		"  --no-counter  pipe variant without per-entry counters "
		"(diagnostic;\n"
		"                the peer still counts)\n");
}

int bench_exact(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"keys", required_argument, NULL, 'k'},
	    {"capacity", required_argument, NULL, 'c'},
	    {"burst", required_argument, NULL, 'b'},
	    {"stream", required_argument, NULL, 'S'},
	    {"dist", required_argument, NULL, 'd'},
	    {"zipf-s", required_argument, NULL, 'z'},
	    {"seconds", required_argument, NULL, 's'},
	    {"trials", required_argument, NULL, 't'},
	    {"seed", required_argument, NULL, 'r'},
	    {"no-thp", no_argument, NULL, 'H'},
	    {"no-peer", no_argument, NULL, 'n'},
	    {"variant", required_argument, NULL, 'V'},
	    {"packets", required_argument, NULL, 'P'},
	    {"no-counter", no_argument, NULL, 'C'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct exact_opts o = {
	    .keys = 1000000,
	    .capacity = 0,
	    .burst = 64,
	    .stream = 1u << 21,
	    .seconds = 0.5,
	    .trials = 5,
	    .dist = DIST_BOTH,
	    .zipf_s = 1.1,
	    .seed = 1,
	    .variants = BENCH_VARIANT_ALL,
	    .packets = 65536,
	    .peer = true,
	    .thp = true,
	    .pipe_counter = true,
	};
	char *end;
	int c, li = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, &li)) != -1) {
		unsigned long v;

		switch (c) {
		case 'h':
			usage(stdout);
			return 0;
		case 'n':
			o.peer = false;
			continue;
		case 'H':
			o.thp = false;
			continue;
		case 'C':
			o.pipe_counter = false;
			continue;
		case '?':
			usage(stderr);
			return 2;
		case 'V':
			o.variants = bench_variant_parse(optarg);
			if (o.variants < 0)
				goto bad;
			continue;
		case 'd':
			if (!strcmp(optarg, "both"))
				o.dist = DIST_BOTH;
			else if (!strcmp(optarg, "uniform"))
				o.dist = DIST_UNIFORM;
			else if (!strcmp(optarg, "zipf"))
				o.dist = DIST_ZIPF;
			else
				goto bad;
			continue;
		case 's':
		case 'z':
			if (c == 's') {
				o.seconds = strtod(optarg, &end);
				if (*end ||
				    !(o.seconds > 0 && o.seconds < 3600))
					goto bad;
			} else {
				o.zipf_s = strtod(optarg, &end);
				if (*end || !(o.zipf_s > 0 && o.zipf_s < 10))
					goto bad;
			}
			continue;
		default:
			break;
		}
		v = strtoul(optarg, &end, 10);
		if (*end || (v == 0 && c != 'c' && c != 'r') || v > (1u << 28))
			goto bad;
		if (c == 'k')
			o.keys = (uint32_t)v;
		else if (c == 'c')
			o.capacity = (uint32_t)v;
		else if (c == 'b')
			o.burst = (uint32_t)v;
		else if (c == 'S')
			o.stream = (uint32_t)v;
		else if (c == 'P')
			o.packets = (uint32_t)v;
		else if (c == 't')
			o.trials = (unsigned)v;
		else
			o.seed = v;
	}
	if ((o.variants & BENCH_VARIANT_PIPE) &&
	    (o.burst > 64 || o.burst > o.packets)) {
		fprintf(stderr, "bench exact: the pipe variant needs --burst "
				"<= 64 and <= --packets\n");
		return 2;
	}
	if (o.burst > DPFLOW_BURST_MAX || o.burst > o.stream) {
		fprintf(stderr,
			"bench exact: --burst must be <= %u and <= --stream\n",
			DPFLOW_BURST_MAX);
		return 2;
	}
	return run(&o);
bad:
	fprintf(stderr, "bench exact: bad value '%s' for --%s\n", optarg,
		opts[li].name);
	return 2;
}
