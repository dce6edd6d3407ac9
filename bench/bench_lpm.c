/*
 * `dpflow bench lpm-512k`: the LPM tables alone, one core, in memory.
 *
 * IPv4: --prefixes random prefixes (default 524288) with BGP-like lengths
 * plus longer ones (1% /8../15, 2% /16, 12% /17../21, 8% /22, 9% /23,
 * 58% /24, 10% /25../32; uniform addresses, host bits clear, no
 * duplicates), value = prefix index. Two address sets of --addrs
 * addresses: uniformly random, and drawn from the prefixes (a random
 * prefix, random host bits). dpflow_lpm4_lookup_bulk() runs over each set
 * in bursts of --burst for --seconds per trial; the best of --trials is
 * reported (many short trials: on a shared machine the best ones are the
 * quiet moments). With DPDK, rte_lpm (DIR-24-8, rte_lpm_lookup_bulk) gets the
 * same prefixes and addresses in the same run, its trials interleaved
 * with ours, and both must give the same answer for every address.
 * IPv6 (--v6-prefixes, default 65536; 0 skips it): prefixes clustered as
 * in real tables (under 4096 random /32s of 2000::/3: 10% /32../44,
 * 50% /48, 25% /56, 12% /64, 3% /65../128), the same two address sets,
 * peer rte_lpm6 (rte_lpm6_lookup_bulk_func).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "dpflow/dpflow.h"
#include "flow/table_lpm.h" /* the inline lookups, as the engine runs them */

#include "bench.h"
#include "bench_common.h"
#ifdef DPFLOW_HAVE_DPDK
#include "bench_dpdk.h"
#endif

struct lpm_opts {
	uint32_t prefixes;
	uint32_t v6_prefixes;
	uint32_t addrs;
	uint32_t burst;
	double seconds;
	unsigned trials;
	uint64_t seed;
	bool peer;
	bool thp; /* our image in transparent huge pages (as _create does) */
	bool peer_thp;	  /* DPDK's memory advised for them too */
	int variants;	  /* BENCH_VARIANT_* */
	uint32_t packets; /* frames of the pipe variant */
};

/* Cycles per lookup of the table variant, per address set. */
static double table_cpp[2];

static uint64_t rng_state;

static uint64_t rng64(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint32_t rng32(void)
{
	return (uint32_t)(rng64() >> 32);
}

static uint32_t rng_below(uint32_t n)
{
	return (uint32_t)(((uint64_t)rng32() * n) >> 32);
}

static uint32_t mask4(unsigned len)
{
	return len ? 0xffffffffu << (32 - len) : 0;
}

/* Insert @key into an open-addressing set of 2^@bits slots (0 = empty). */
static bool set_add(uint64_t *set, unsigned bits, uint64_t key)
{
	uint64_t mask = (1ull << bits) - 1,
		 i = (key * 0x9e3779b97f4a7c15ull) >> (64 - bits);

	while (set[i]) {
		if (set[i] == key)
			return false;
		i = (i + 1) & mask;
	}
	set[i] = key;
	return true;
}

static double now_s(void)
{
	return (double)dpflow_tsc() / (double)dpflow_tsc_hz();
}

/* One timed pass over a key set; returns a checksum to keep it alive. */
typedef uint64_t (*pass_fn)(const void *table, const void *keys, uint32_t n,
			    uint32_t burst, uint32_t *out);

static uint64_t pass4(const void *table, const void *keys, uint32_t n,
		      uint32_t burst, uint32_t *out)
{
	const uint32_t *k = (const uint32_t *)keys;
	uint64_t hits = 0;

	for (uint32_t b = 0; b + burst <= n; b += burst)
		hits += dpflow_lpm4_lookup_bulk_impl(
		    (const struct dpflow_lpm4_image *)table, k + b, burst,
		    out + b);
	return hits;
}

static uint64_t pass6(const void *table, const void *keys, uint32_t n,
		      uint32_t burst, uint32_t *out)
{
	const uint8_t *k = (const uint8_t *)keys;
	uint64_t hits = 0;

	for (uint32_t b = 0; b + burst <= n; b += burst)
		hits += dpflow_lpm6_lookup_bulk_impl(
		    (const struct dpflow_lpm6_image *)table, k + 16 * (size_t)b,
		    burst, out + b);
	return hits;
}

#ifdef DPFLOW_HAVE_DPDK
static uint64_t pass4_dpdk(const void *table, const void *keys, uint32_t n,
			   uint32_t burst, uint32_t *out)
{
	bench_dpdk_lpm4_lookup((const struct bench_dpdk_lpm4 *)table,
			       (const uint32_t *)keys, n, burst, out);
	return out[0];
}

static uint64_t pass6_dpdk(const void *table, const void *keys, uint32_t n,
			   uint32_t burst, uint32_t *out)
{
	bench_dpdk_lpm6_lookup((const struct bench_dpdk_lpm6 *)table,
			       (const uint8_t *)keys, n, burst,
			       (int32_t *)(void *)out);
	return out[0];
}
#endif

/* One trial of @seconds: lookups done and TSC cycles taken. */
static void trial(pass_fn fn, const void *table, const void *keys, uint32_t n,
		  uint32_t burst, uint32_t *out, double seconds,
		  uint64_t *lookups, uint64_t *cycles, uint64_t *sink)
{
	uint64_t budget = (uint64_t)(seconds * (double)dpflow_tsc_hz());
	uint64_t start = dpflow_tsc(), now = start, done = 0;

	while (now - start < budget) {
		*sink += fn(table, keys, n, burst, out);
		done += n - n % burst;
		now = dpflow_tsc();
	}
	*lookups = done;
	*cycles = now - start;
}

/*
 * Run ours (and the peer, when given) over one key set, trials
 * interleaved, and report the best of each.
 */
static void measure(const struct lpm_opts *o, const char *variant, pass_fn ours,
		    const void *table, pass_fn peer_fn, const void *peer,
		    const char *peer_name, const void *keys, uint32_t *out)
{
	struct bench_result best;
	uint64_t sink = 0;
	double peer_best = 0;

	memset(&best, 0, sizeof(best));
	for (unsigned t = 0; t < o->trials; t++) {
		uint64_t n, cyc;

		trial(ours, table, keys, o->addrs, o->burst, out, o->seconds,
		      &n, &cyc, &sink);
		if (!best.pkts ||
		    (double)cyc / (double)n <
			(double)best.tsc_cycles / (double)best.pkts) {
			best.pkts = n;
			best.tsc_cycles = cyc;
		}
		if (peer) {
			double mpps;

			trial(peer_fn, peer, keys, o->addrs, o->burst, out,
			      o->seconds, &n, &cyc, &sink);
			mpps = (double)n /
			       ((double)cyc / (double)dpflow_tsc_hz()) / 1e6;
			if (mpps > peer_best)
				peer_best = mpps;
		}
	}
	if (!strcmp(variant, "ipv4-random"))
		table_cpp[0] = (double)best.tsc_cycles / (double)best.pkts;
	else if (!strcmp(variant, "ipv4-in-prefix"))
		table_cpp[1] = (double)best.tsc_cycles / (double)best.pkts;
	best.workload = "lpm-512k";
	best.variant = variant;
	best.seconds = (double)best.tsc_cycles / (double)dpflow_tsc_hz();
	best.bytes = 0;
	best.peer = peer ? peer_name : NULL;
	best.peer_mpps = peer_best;
	bench_report(&best);
	if (sink == 0x5a5a5a5a5a5a5a5aull)
		printf(" ");
}

/* Where --no-thp puts an image: plain pages, advised against THP. */
static void *plain_alloc(size_t size)
{
	void *p = aligned_alloc(DPFLOW_CACHE_LINE,
				(size + DPFLOW_CACHE_LINE - 1) &
				    ~(size_t)(DPFLOW_CACHE_LINE - 1));

#ifdef MADV_NOHUGEPAGE
	if (p && size >= (2u << 20)) {
		uintptr_t a = ((uintptr_t)p + 4095) & ~(uintptr_t)4095;

		(void)madvise((void *)a, size - (a - (uintptr_t)p),
			      MADV_NOHUGEPAGE);
	}
#endif
	return p;
}

/* ---- pipe level (IPv4) ----------------------------------------------------
 */

#ifdef DPFLOW_HAVE_DPDK
struct peer_pass {
	const struct bench_dpdk_lpm4 *h;
	struct bench_dpdk_pkts *p;
	uint32_t burst;
	uint64_t hits, sink;
};

static uint64_t peer_pipe_pass(void *arg)
{
	struct peer_pass *pp = (struct peer_pass *)arg;

	return bench_dpdk_lpm4_pipe(pp->h, pp->p, pp->burst, &pp->hits);
}

static uint64_t peer_parse_pass(void *arg)
{
	struct peer_pass *pp = (struct peer_pass *)arg;

	return bench_dpdk_pkts_parse(pp->p, pp->burst, &pp->sink);
}
#endif

/*
 * The LPM pipe through the flow engine: an LPM root pipe on
 * outer.ipv4.dst holding the @n prefixes (@pa/@pl, one batch), then for
 * each address set (@keys, as the table variant's) --packets 64-byte
 * frames to those addresses through dpflow_ctx_process_burst(); the peer
 * is rte_net_get_ptype + the destination + rte_lpm_lookup_bulk on @h
 * (NULL: none). @t answers for the check.
 */
static int run_pipe4(const struct lpm_opts *o, const uint32_t *pa,
		     const uint8_t *pl, uint32_t n,
		     const struct dpflow_lpm4_image *t, uint32_t *const keys[2],
		     const void *h)
{
	static const uint16_t fields[] = {DPFLOW_FIELD_OUTER_IPV4_DST};
	static const char *const variants[2] = {"pipe-ipv4-random",
						"pipe-ipv4-in-prefix"};
	uint32_t np = o->packets < o->addrs ? o->packets : o->addrs;
	uint32_t used = np - np % o->burst;
	uint32_t *res = malloc(np * sizeof(*res));
	const uint8_t **frames = calloc(np, sizeof(*frames));
	uint16_t *lens = calloc(np, sizeof(*lens));
	struct bench_pipe bp;
	struct dpflow_pipe_cfg c;
	struct dpflow_entry_cfg e;
	double t0;
	int rc = 1;
#ifdef DPFLOW_HAVE_DPDK
	struct peer_pass pp = {(const struct bench_dpdk_lpm4 *)h, NULL,
			       o->burst, 0, 0};
#else
	(void)h;
#endif

	memset(&bp, 0, sizeof(bp));
	if (!res || !frames || !lens) {
		fprintf(stderr, "bench lpm: out of memory\n");
		goto out;
	}
	bench_pipe_cfg(&c, "lpm", DPFLOW_PIPE_LPM, n, fields, 1);
	if (bench_pipe_create(&bp, &c, np))
		goto out;
	memset(&e, 0, sizeof(e));
	t0 = now_s();
	for (uint32_t i = 0; i < n; i++) {
		e.key[0] = (uint8_t)(pa[i] >> 24);
		e.key[1] = (uint8_t)(pa[i] >> 16);
		e.key[2] = (uint8_t)(pa[i] >> 8);
		e.key[3] = (uint8_t)pa[i];
		e.prefix_len = pl[i];
		if (bench_pipe_add(&bp, &e))
			goto out;
	}
	if (bench_pipe_commit(&bp))
		goto out;
	printf("# pipe: %u prefixes added in one batch in %.2f s\n", n,
	       now_s() - t0);
	bp.burst = o->burst;
	bench_pipe_online(&bp);
	for (unsigned s = 0; s < 2; s++) {
		struct bench_best best = {0}, pbest = {0}, sbest = {0},
				  psbest = {0};
		const char *pname = NULL;
		uint64_t hits0, misses0, hits, misses;
		uint32_t expect = 0;

		for (uint32_t i = 0; i < np; i++) {
			struct bench_flow f;
			uint32_t x = (uint32_t)rng64();

			f.src[0] = 10;
			f.src[1] = (uint8_t)(x >> 16);
			f.src[2] = (uint8_t)(x >> 8);
			f.src[3] = (uint8_t)x;
			f.dst[0] = (uint8_t)(keys[s][i] >> 24);
			f.dst[1] = (uint8_t)(keys[s][i] >> 16);
			f.dst[2] = (uint8_t)(keys[s][i] >> 8);
			f.dst[3] = (uint8_t)keys[s][i];
			f.sport = (uint16_t)(1024 + (x >> 24) * 200);
			f.dport = (x & 1) ? 53 : 443;
			f.proto = (x & 1) ? 17 : 6;
			if (bench_pipe_set_pkt(&bp, i, &f))
				goto out;
		}
		expect = (uint32_t)pass4(t, keys[s], used, o->burst, res);
		bench_pipe_stats(&bp, &hits0, &misses0);
		bench_pipe_pass(&bp);
		bench_pipe_stats(&bp, &hits, &misses);
		if (hits - hits0 != expect ||
		    misses - misses0 != used - expect) {
			fprintf(stderr,
				"bench lpm: pipe: %llu hits, the table says "
				"%u of %u\n",
				(unsigned long long)(hits - hits0), expect,
				used);
			goto out;
		}
#ifdef DPFLOW_HAVE_DPDK
		if (pp.h) {
			bench_pipe_frames(&bp, frames, lens);
			bench_dpdk_pkts_destroy(pp.p);
			pp.p = bench_dpdk_pkts_create(frames, lens, np);
			pp.hits = 0;
			if (pp.p && (peer_pipe_pass(&pp) != used ||
				     pp.hits != expect)) {
				fprintf(stderr,
					"bench lpm: peer pipe: %llu hits, "
					"expected %u\n",
					(unsigned long long)pp.hits, expect);
				goto out;
			}
			if (pp.p)
				pname = o->peer_thp ? "dpdk-ptype+rte_lpm(thp)"
						    : "dpdk-ptype+rte_lpm";
		}
		bench_pair_run(bench_pipe_pass, &bp,
			       pname ? peer_pipe_pass : NULL, &pp, o->trials,
			       o->seconds, &best, &pbest);
		bench_pair_run(bench_pipe_parse_pass, &bp,
			       pname ? peer_parse_pass : NULL, &pp, o->trials,
			       o->seconds / 2, &sbest, &psbest);
#else
		bench_pair_run(bench_pipe_pass, &bp, NULL, NULL, o->trials,
			       o->seconds, &best, &pbest);
		bench_pair_run(bench_pipe_parse_pass, &bp, NULL, NULL,
			       o->trials, o->seconds / 2, &sbest, &psbest);
#endif
		printf("# pipe: %u frames, %.1f%% hit a prefix\n", np,
		       100.0 * expect / used);
		bench_report_best("lpm-512k", variants[s], &best, pname, &pbest,
				  64);
		printf("# stages, cycles/pkt: dpflow pipe %.1f = parse %.1f",
		       bench_best_cpp(&best), bench_best_cpp(&sbest));
		if (table_cpp[s] > 0)
			printf(" + table %.1f (table variant) + rest %.1f",
			       table_cpp[s],
			       bench_best_cpp(&best) - bench_best_cpp(&sbest) -
				   table_cpp[s]);
		if (pname)
			printf("; peer %.1f = ptype+extract %.1f + rest %.1f",
			       bench_best_cpp(&pbest), bench_best_cpp(&psbest),
			       bench_best_cpp(&pbest) -
				   bench_best_cpp(&psbest));
		printf("\n");
	}
	rc = 0;
out:
#ifdef DPFLOW_HAVE_DPDK
	bench_dpdk_pkts_destroy(pp.p);
#endif
	bench_pipe_destroy(&bp);
	free(res);
	free(frames);
	free(lens);
	return rc;
}

/* ------------------------------------------------------------ IPv4 */

static unsigned pick_len4(void)
{
	uint32_t k = rng_below(100);

	if (k < 1)
		return 8 + rng_below(8);
	if (k < 3)
		return 16;
	if (k < 15)
		return 17 + rng_below(5);
	if (k < 23)
		return 22;
	if (k < 32)
		return 23;
	if (k < 90)
		return 24;
	return 25 + rng_below(8);
}

static int run_v4(const struct lpm_opts *o)
{
	struct dpflow_lpm4_params p = {o->prefixes, 0};
	struct dpflow_error err = {0};
	struct dpflow_lpm4_image *t = NULL;
	struct dpflow_lpm_info info;
	unsigned bits = 4;
	uint64_t *set;
	uint32_t *pa = malloc(o->prefixes * sizeof(*pa));
	uint32_t *pv = malloc(o->prefixes * sizeof(*pv));
	uint8_t *pl = malloc(o->prefixes);
	uint32_t *keys[2] = {malloc(o->addrs * sizeof(uint32_t)),
			     malloc(o->addrs * sizeof(uint32_t))};
	uint32_t *out = malloc(o->addrs * sizeof(uint32_t));
	uint32_t *ref = malloc(o->addrs * sizeof(uint32_t));
	static const char *const variants[2] = {"ipv4-random",
						"ipv4-in-prefix"};
	uint32_t groups = 0;
	double t0, build_s;
	int rc = 1;

	while ((1ull << bits) < 4ull * o->prefixes)
		bits++;
	set = calloc(1ull << bits, sizeof(*set));
	if (!set || !pa || !pv || !pl || !keys[0] || !keys[1] || !out || !ref) {
		fprintf(stderr, "bench lpm: out of memory\n");
		goto out;
	}
	/* distinct prefixes; count the /24s that hold longer ones (groups) */
	rng_state = o->seed;
	for (uint32_t i = 0; i < o->prefixes;) {
		unsigned l = pick_len4();
		uint32_t a = rng32() & mask4(l);

		if (!set_add(set, bits, (uint64_t)a << 6 | l | 1ull << 40))
			continue;
		if (l > 24)
			groups +=
			    set_add(set, bits, (uint64_t)(a >> 8) | 1ull << 41);
		pa[i] = a;
		pl[i] = (uint8_t)l;
		pv[i] = i;
		i++;
	}
	p.max_groups = groups + 64;
	if (o->thp) {
		t = dpflow_lpm4_create(&p, &err);
	} else {
		size_t size = dpflow_lpm4_image_size(&p);

		t = (struct dpflow_lpm4_image *)plain_alloc(size);
		if (t && dpflow_lpm4_image_init(t, size, &p, &err)) {
			free(t);
			t = NULL;
		}
	}
	if (!t) {
		fprintf(stderr, "bench lpm: %s\n", err.msg);
		goto out;
	}
	t0 = now_s();
	for (uint32_t i = 0; i < o->prefixes; i++) {
		if (dpflow_lpm4_add(t, pa[i], pl[i], pv[i], &err)) {
			fprintf(stderr, "bench lpm: add #%u: %s\n", i, err.msg);
			goto out;
		}
	}
	build_s = now_s() - t0;
	dpflow_lpm4_info(t, &info);
	printf("# ipv4: %u prefixes added in %.2f s (%.2f M adds/s); image "
	       "%.1f MiB, %u of %u groups\n",
	       o->prefixes, build_s, o->prefixes / build_s / 1e6,
	       (double)info.size / 1048576.0, info.n_groups, info.max_groups);
	for (uint32_t i = 0; i < o->addrs; i++) {
		uint32_t k = rng_below(o->prefixes);

		keys[0][i] = rng32();
		keys[1][i] = pa[k] | (rng32() & ~mask4(pl[k]));
	}
#ifdef DPFLOW_HAVE_DPDK
	if (o->peer) {
		double dpdk_build = 0;
		struct bench_dpdk_lpm4 *h = bench_dpdk_lpm4_create(
		    pa, pl, pv, o->prefixes, p.max_groups, o->peer_thp,
		    &dpdk_build);

		if (!h) {
			fprintf(stderr, "bench lpm: no DPDK peer\n");
		} else {
			printf("# ipv4: rte_lpm: %u prefixes added in %.2f s\n",
			       o->prefixes, dpdk_build);
			for (unsigned s = 0; s < 2; s++) {
				uint32_t bad = 0;

				pass4(t, keys[s], o->addrs, o->burst, ref);
				bench_dpdk_lpm4_lookup(h, keys[s], o->addrs,
						       o->burst, out);
				for (uint32_t i = 0;
				     i < o->addrs - o->addrs % o->burst; i++)
					bad += ref[i] !=
					       bench_dpdk_lpm4_value(out[i]);
				if (bad) {
					fprintf(stderr,
						"bench lpm: %u of %u answers "
						"differ from rte_lpm\n",
						bad, o->addrs);
					bench_dpdk_lpm4_destroy(h);
					goto out;
				}
				if (o->variants & BENCH_VARIANT_TABLE)
					measure(o, variants[s], pass4, t,
						pass4_dpdk, h,
						o->peer_thp
						    ? "dpdk-rte_lpm(thp)"
						    : "dpdk-rte_lpm",
						keys[s], out);
			}
			if ((o->variants & BENCH_VARIANT_PIPE) &&
			    run_pipe4(o, pa, pl, o->prefixes, t, keys, h)) {
				bench_dpdk_lpm4_destroy(h);
				goto out;
			}
			bench_dpdk_lpm4_destroy(h);
			rc = 0;
			goto out;
		}
	}
#endif
	for (unsigned s = 0; (o->variants & BENCH_VARIANT_TABLE) && s < 2; s++)
		measure(o, variants[s], pass4, t, NULL, NULL, NULL, keys[s],
			out);
	if ((o->variants & BENCH_VARIANT_PIPE) &&
	    run_pipe4(o, pa, pl, o->prefixes, t, keys, NULL))
		goto out;
	rc = 0;
out:
	if (o->thp)
		dpflow_lpm4_destroy(t);
	else
		free(t);
	free(set);
	free(pa);
	free(pv);
	free(pl);
	free(keys[0]);
	free(keys[1]);
	free(out);
	free(ref);
	return rc;
}

/* ------------------------------------------------------------ IPv6 */

static unsigned pick_len6(void)
{
	uint32_t k = rng_below(100);

	if (k < 10)
		return 32 + rng_below(13);
	if (k < 60)
		return 48;
	if (k < 85)
		return 56;
	if (k < 97)
		return 64;
	return 65 + rng_below(64);
}

static void mask6(uint8_t *a, unsigned len)
{
	for (unsigned i = 0; i < 16; i++) {
		unsigned bits = len > 8 * i ? len - 8 * i : 0;

		if (bits < 8)
			a[i] &= (uint8_t)(0xff00u >> bits);
	}
}

static int run_v6(const struct lpm_opts *o)
{
	uint32_t n = o->v6_prefixes, nb = 4096;
	struct dpflow_lpm6_params p = {.max_rules = n};
	struct dpflow_error err = {0};
	struct dpflow_lpm6_image *t = NULL;
	struct dpflow_lpm_info info;
	uint8_t *pa = malloc((size_t)n * 16), *pl = malloc(n);
	uint32_t *pv = malloc(n * sizeof(*pv));
	uint8_t *bases = malloc((size_t)nb * 4);
	uint8_t *keys[2] = {malloc((size_t)o->addrs * 16),
			    malloc((size_t)o->addrs * 16)};
	uint32_t *out = malloc(o->addrs * sizeof(uint32_t));
	uint32_t *ref = malloc(o->addrs * sizeof(uint32_t));
	static const char *const variants[2] = {"ipv6-random",
						"ipv6-in-prefix"};
	double t0, build_s;
	int rc = 1;

	if (!pa || !pl || !pv || !bases || !keys[0] || !keys[1] || !out ||
	    !ref) {
		fprintf(stderr, "bench lpm: out of memory\n");
		goto out;
	}
	/* groups: up to 6 per prefix below a shared /32, plus the /32s */
	p.max_groups = 6 * n + 4 * nb;
	if (p.max_groups > DPFLOW_LPM6_GROUPS_MAX)
		p.max_groups = DPFLOW_LPM6_GROUPS_MAX;
	if (o->thp) {
		t = dpflow_lpm6_create(&p, &err);
	} else {
		size_t size = dpflow_lpm6_image_size(&p);

		t = (struct dpflow_lpm6_image *)plain_alloc(size);
		if (t && dpflow_lpm6_image_init(t, size, &p, &err)) {
			free(t);
			t = NULL;
		}
	}
	if (!t) {
		fprintf(stderr, "bench lpm: %s\n", err.msg);
		goto out;
	}
	rng_state = o->seed ^ 0x6666;
	for (uint32_t i = 0; i < nb; i++) {
		uint32_t w = (0x2000u << 16 | (rng32() & 0x1fffffffu));

		bases[4 * i] = (uint8_t)(w >> 24);
		bases[4 * i + 1] = (uint8_t)(w >> 16);
		bases[4 * i + 2] = (uint8_t)(w >> 8);
		bases[4 * i + 3] = (uint8_t)w;
	}
	t0 = now_s();
	for (uint32_t i = 0; i < n;) {
		uint8_t *a = pa + 16 * (size_t)i;
		unsigned l = pick_len6();
		int r;

		for (unsigned j = 0; j < 16; j++)
			a[j] = (uint8_t)rng32();
		memcpy(a, bases + 4 * rng_below(nb), 4);
		mask6(a, l);
		r = dpflow_lpm6_add(t, a, l, i, &err);
		if (r == -EEXIST)
			continue;
		if (r) {
			fprintf(stderr, "bench lpm: ipv6 add #%u: %s\n", i,
				err.msg);
			goto out;
		}
		pl[i] = (uint8_t)l;
		pv[i] = i;
		i++;
	}
	build_s = now_s() - t0;
	dpflow_lpm6_info(t, &info);
	printf("# ipv6: %u prefixes added in %.2f s; image %.1f MiB, %u "
	       "groups in use\n",
	       n, build_s, (double)info.size / 1048576.0, info.n_groups);
	for (uint32_t i = 0; i < o->addrs; i++) {
		uint32_t k = rng_below(n);
		uint8_t *r0 = keys[0] + 16 * (size_t)i;
		uint8_t *r1 = keys[1] + 16 * (size_t)i;

		for (unsigned j = 0; j < 16; j++) {
			unsigned bits = pl[k] > 8 * j ? pl[k] - 8 * j : 0;
			uint8_t m =
			    bits >= 8 ? 0xff : (uint8_t)(0xff00u >> bits);

			r0[j] = (uint8_t)rng32();
			r1[j] = (uint8_t)((pa[16 * (size_t)k + j] & m) |
					  (rng32() & ~m));
		}
		/* random addresses in 2000::/3, where the prefixes are */
		r0[0] = (uint8_t)(0x20 | (r0[0] & 0x1f));
	}
#ifdef DPFLOW_HAVE_DPDK
	if (o->peer && n < (1u << 21)) {
		double dpdk_build = 0;
		struct bench_dpdk_lpm6 *h =
		    bench_dpdk_lpm6_create(pa, pl, pv, n, info.n_groups + 1024,
					   o->peer_thp, &dpdk_build);

		if (!h) {
			fprintf(stderr, "bench lpm: no DPDK lpm6 peer\n");
		} else {
			printf("# ipv6: rte_lpm6: %u prefixes added in %.2f "
			       "s\n",
			       n, dpdk_build);
			for (unsigned s = 0; s < 2; s++) {
				int32_t *o32 = (int32_t *)(void *)out;
				uint32_t bad = 0;

				pass6(t, keys[s], o->addrs, o->burst, ref);
				bench_dpdk_lpm6_lookup(h, keys[s], o->addrs,
						       o->burst, o32);
				for (uint32_t i = 0;
				     i < o->addrs - o->addrs % o->burst; i++)
					bad += ref[i] !=
					       (o32[i] < 0 ? UINT32_MAX
							   : (uint32_t)o32[i]);
				if (bad) {
					fprintf(stderr,
						"bench lpm: %u of %u answers "
						"differ from rte_lpm6\n",
						bad, o->addrs);
					bench_dpdk_lpm6_destroy(h);
					goto out;
				}
				measure(o, variants[s], pass6, t, pass6_dpdk, h,
					o->peer_thp ? "dpdk-rte_lpm6(thp)"
						    : "dpdk-rte_lpm6",
					keys[s], out);
			}
			bench_dpdk_lpm6_destroy(h);
			rc = 0;
			goto out;
		}
	}
#endif
	for (unsigned s = 0; s < 2; s++)
		measure(o, variants[s], pass6, t, NULL, NULL, NULL, keys[s],
			out);
	rc = 0;
out:
	if (o->thp)
		dpflow_lpm6_destroy(t);
	else
		free(t);
	free(pa);
	free(pl);
	free(pv);
	free(bases);
	free(keys[0]);
	free(keys[1]);
	free(out);
	free(ref);
	return rc;
}

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: dpflow bench lpm-512k [--prefixes N] [--v6-prefixes N]\n"
	    "                             [--addrs N] [--burst N] [--seconds "
	    "S]\n"
	    "                             [--trials N] [--seed N] [--no-peer] "
	    "[--no-thp]\n"
	    "                             [--peer-thp] [--variant V] "
	    "[--packets N]\n"
	    "\n"
	    "Longest-prefix-match lookups, one core, in memory, random "
	    "addresses and\n"
	    "addresses inside the prefixes. Two variants; each reports the "
	    "best of\n"
	    "the trials and, when built with DPDK, its peer on the same "
	    "prefixes\n"
	    "and addresses, trials interleaved, answers cross-checked:\n"
	    "  table  the LPM tables alone: IPv4 (DIR-24-8) and IPv6 "
	    "(16-8-8... trie)\n"
	    "         on packed addresses; peers rte_lpm_lookup_bulk, "
	    "rte_lpm6.\n"
	    "  pipe   the flow engine, IPv4: an LPM root pipe on "
	    "outer.ipv4.dst\n"
	    "         holding the same IPv4 prefixes (one batch of "
	    "entries),\n"
	    "         --packets 64-byte Eth/IPv4/TCP|UDP frames to the "
	    "addresses\n"
	    "         through dpflow_ctx_process_burst() in bursts of "
	    "--burst (<= 64),\n"
	    "         hits and misses to a handler that keeps them "
	    "(re-parsed every\n"
	    "         pass); peer rte_net_get_ptype + destination read +\n"
	    "         rte_lpm_lookup_bulk. A '# stages' line splits the "
	    "cycles.\n"
	    "  --prefixes N     IPv4 prefixes (default 524288)\n"
	    "  --v6-prefixes N  IPv6 prefixes (default 65536; 0: no IPv6)\n"
	    "  --addrs N        lookup addresses per set (default 1048576)\n"
	    "  --burst N        addresses per bulk lookup (default 64)\n"
	    "  --seconds S      length of one trial (default 0.2)\n"
	    "  --trials N       trials per set (default 15; many short trials\n"
	    "                   find the quiet moments of a shared machine)\n"
	    "  --seed N         random seed (default 1)\n"
	    "  --no-peer        skip the DPDK peers\n"
	    "  --no-thp         keep dpflow's images out of transparent huge\n"
	    "                   pages (as DPDK's are without --peer-thp)\n"
	    "  --peer-thp       advise transparent huge pages on DPDK's "
	    "memory\n"
	    "                   too (EAL runs with --no-huge here)\n"
	    "  --variant V      table, pipe or all (default all; pipe skips "
	    "IPv6)\n"
	    "  --packets N      frames of the pipe variant (default "
	    "65536)\n");
}

int bench_lpm(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"prefixes", required_argument, NULL, 'p'},
	    {"v6-prefixes", required_argument, NULL, '6'},
	    {"addrs", required_argument, NULL, 'a'},
	    {"burst", required_argument, NULL, 'b'},
	    {"seconds", required_argument, NULL, 's'},
	    {"trials", required_argument, NULL, 't'},
	    {"seed", required_argument, NULL, 'r'},
	    {"no-peer", no_argument, NULL, 'n'},
	    {"no-thp", no_argument, NULL, 'T'},
	    {"peer-thp", no_argument, NULL, 'P'},
	    {"variant", required_argument, NULL, 'V'},
	    {"packets", required_argument, NULL, 'k'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct lpm_opts o;
	char *end;
	int c, li = 0;

	o.prefixes = 524288;
	o.v6_prefixes = 65536;
	o.addrs = 1u << 20;
	o.burst = 64;
	o.seconds = 0.2;
	o.trials = 15;
	o.seed = 1;
	o.peer = true;
	o.thp = true;
	o.peer_thp = false;
	o.variants = BENCH_VARIANT_ALL;
	o.packets = 65536;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, &li)) != -1) {
		unsigned long long v;

		switch (c) {
		case 'h':
			usage(stdout);
			return 0;
		case 'n':
			o.peer = false;
			continue;
		case 'T':
			o.thp = false;
			continue;
		case 'P':
			o.peer_thp = true;
			continue;
		case 'V':
			o.variants = bench_variant_parse(optarg);
			if (o.variants < 0)
				goto bad;
			continue;
		case 's':
			o.seconds = strtod(optarg, &end);
			if (*end || !(o.seconds > 0 && o.seconds < 3600))
				goto bad;
			continue;
		case '?':
			usage(stderr);
			return 2;
		default:
			break;
		}
		v = strtoull(optarg, &end, 10);
		if (*end || (c != '6' && c != 'r' && v == 0) ||
		    (c != 'r' && v > (1u << 26)))
			goto bad;
		if (c == 'p')
			o.prefixes = (uint32_t)v;
		else if (c == '6')
			o.v6_prefixes = (uint32_t)v;
		else if (c == 'a')
			o.addrs = (uint32_t)v;
		else if (c == 'b')
			o.burst = (uint32_t)v;
		else if (c == 't')
			o.trials = (unsigned)v;
		else if (c == 'k')
			o.packets = (uint32_t)v;
		else
			o.seed = v;
	}
	if (o.burst > DPFLOW_BURST_MAX || o.burst > o.addrs) {
		fprintf(stderr,
			"bench lpm: --burst must be <= %u and <= --addrs\n",
			DPFLOW_BURST_MAX);
		return 2;
	}
	if ((o.variants & BENCH_VARIANT_PIPE) &&
	    (o.burst > 64 || o.burst > o.packets)) {
		fprintf(stderr, "bench lpm: the pipe variant needs --burst "
				"<= 64 and <= --packets\n");
		return 2;
	}
	if (o.prefixes > (1u << 24)) {
		fprintf(stderr,
			"bench lpm: --prefixes at most %u (rte_lpm "
			"next hops are 24 bits)\n",
			1u << 24);
		return 2;
	}
	bench_report_header();
	if (run_v4(&o))
		return 1;
	if (o.v6_prefixes && (o.variants & BENCH_VARIANT_TABLE) && run_v6(&o))
		return 1;
	return 0;
bad:
	fprintf(stderr, "bench lpm: bad value '%s' for --%s\n", optarg,
		opts[li].name);
	return 2;
}
