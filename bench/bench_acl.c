/*
 * `dpflow bench acl-10k`: the ACL table alone, one core, keys in memory.
 *
 * --rules IPv4 5-tuple rules in the style of ClassBench ACL sets: source
 * and destination prefixes drawn from a few hundred networks (lengths from
 * /0 to /32), protocol TCP, UDP, ICMP or any, source ports mostly any,
 * destination ports exact, ranges or any; priorities in list order. --keys
 * keys: --match-pct of them drawn inside a random rule, the rest random
 * (some of those match wide rules too). Rules, keys and the pipe
 * variant's frames come from bench_acl_gen.c, which the GPU target's bench
 * and tests/unit/test_acl_gpu_path.c share: a seed means the same rule set
 * and packets in all of them. Bursts of --burst keys go through
 * dpflow_acl_classify() until --seconds have passed; the best of --trials
 * runs is reported. With DPDK, the same rules and keys go through
 * rte_acl_classify() in the same run (bench_acl_dpdk.c), each of its
 * classify methods in trials taking turns with dpflow's; the fastest method
 * is the peer's figure. Both answers are checked against each other and
 * against a linear scan on a sample, and both build times are printed.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/dpflow.h"
#include "dpflow/table_acl.h"

#include "bench.h"
#include "bench_acl_gen.h"
#include "bench_common.h"
#include "bench_dpdk.h"

struct acl_opts {
	uint32_t rules;
	uint32_t keys;
	uint32_t burst;
	uint32_t match_pct;
	uint64_t seed;
	double seconds;
	unsigned trials;
	bool peer;
	int variants;	  /* BENCH_VARIANT_* */
	uint32_t packets; /* frames of the pipe variant */
};

static struct dpflow_acl_rules *load_rules(const struct bench_acl_rule *br,
					   uint32_t n)
{
	static const struct dpflow_acl_layout layout = {
	    5, {8, 32, 32, 16, 16}, {"proto", "src", "dst", "sport", "dport"}};
	struct dpflow_error err = {0};
	struct dpflow_acl_rules *rl =
	    dpflow_acl_rules_create(&layout, n ? n : 1, &err);
	struct dpflow_acl_rule *r = calloc(n ? n : 1, sizeof(*r));

	if (!rl || !r)
		goto fail;
	for (uint32_t i = 0; i < n; i++) {
		const struct bench_acl_rule *b = &br[i];

		r[i].id = b->rank;
		r[i].priority = b->rank;
		r[i].value = b->value;
		r[i].field[0] = dpflow_acl_masked(b->proto, b->proto_mask);
		r[i].field[1] = dpflow_acl_prefix(b->src, b->src_len, 32);
		r[i].field[2] = dpflow_acl_prefix(b->dst, b->dst_len, 32);
		r[i].field[3] = dpflow_acl_range(b->sport_lo, b->sport_hi);
		r[i].field[4] = dpflow_acl_range(b->dport_lo, b->dport_hi);
	}
	if (dpflow_acl_rules_add_bulk(rl, r, n, NULL, &err))
		goto fail;
	free(r);
	return rl;
fail:
	fprintf(stderr, "bench acl: %s\n", err.msg[0] ? err.msg : "no memory");
	free(r);
	dpflow_acl_rules_destroy(rl);
	return NULL;
}

/* One implementation under test: classify keys [first, first + n). */
struct impl {
	const char *name;
	void (*classify)(void *ctx, uint32_t first, uint32_t n);
	void *ctx;
	int method;	       /* DPDK classify method, -1 for dpflow */
	uint64_t pkts, cycles; /* best trial */
};

struct dpflow_ctx_run {
	const struct dpflow_acl_image *img;
	const uint32_t **kp;
	uint32_t *res;
};

static void dpflow_run(void *ctx, uint32_t first, uint32_t n)
{
	struct dpflow_ctx_run *c = (struct dpflow_ctx_run *)ctx;

	dpflow_acl_classify(c->img, c->kp + first, n, c->res + first);
}

#ifdef DPFLOW_HAVE_DPDK
struct dpdk_ctx_run {
	struct bench_dpdk_acl *a;
	uint32_t *res;
};

static void dpdk_run(void *ctx, uint32_t first, uint32_t n)
{
	struct dpdk_ctx_run *c = (struct dpdk_ctx_run *)ctx;

	bench_dpdk_acl_classify(c->a, first, n, c->res + first);
}
#endif

/* One trial of @im: passes over all keys for @o->seconds. */
static void trial(struct impl *im, const struct acl_opts *o)
{
	uint64_t budget = (uint64_t)(o->seconds * (double)dpflow_tsc_hz());
	uint64_t start = dpflow_tsc(), now = start, pkts = 0;

	while (now - start < budget) {
		for (uint32_t i = 0; i + o->burst <= o->keys; i += o->burst)
			im->classify(im->ctx, i, o->burst);
		pkts += o->keys - o->keys % o->burst;
		now = dpflow_tsc();
	}
	if (!im->pkts || (double)(now - start) / (double)pkts <
			     (double)im->cycles / (double)im->pkts) {
		im->pkts = pkts;
		im->cycles = now - start;
	}
}

static double mpps_of(const struct impl *im)
{
	return (double)im->pkts /
	       ((double)im->cycles / (double)dpflow_tsc_hz()) / 1e6;
}

/* ---- pipe level --------------------------------------------------------- */

#ifdef DPFLOW_HAVE_DPDK
struct peer_pass {
	struct bench_dpdk_acl *a;
	struct bench_dpdk_pkts *p;
	uint32_t burst;
	uint64_t hits, sink;
};

static uint64_t peer_pipe_pass(void *arg)
{
	struct peer_pass *pp = (struct peer_pass *)arg;

	return bench_dpdk_acl_pipe(pp->a, pp->p, pp->burst, &pp->hits);
}

static uint64_t peer_parse_pass(void *arg)
{
	struct peer_pass *pp = (struct peer_pass *)arg;

	return bench_dpdk_pkts_parse(pp->p, pp->burst, &pp->sink);
}
#endif

/* Packets the context dropped before the pipe (the parser's reasons). */
static void report_drops(const struct bench_pipe *bp)
{
	uint64_t drops[DPFLOW_DROP__COUNT];

	dpflow_ctx_drops(bp->ctx, drops);
	for (unsigned r = 0; r < DPFLOW_DROP__COUNT; r++)
		if (drops[r])
			fprintf(stderr, "bench acl: pipe: %llu dropped: %s\n",
				(unsigned long long)drops[r],
				dpflow_drop_name(r));
}

/*
 * The ACL pipe through the flow engine: the same rules as entries of one
 * batch, --packets frames of keys drawn as the table variant draws them
 * (protocols other than TCP and UDP become one of those: frames are
 * TCP or UDP), in bursts through dpflow_ctx_process_burst(); the peer is
 * rte_net_get_ptype + the 5-tuple + rte_acl_classify, each of its methods
 * in turn, the fastest reported. @g draws the frames' keys on from where
 * the table variant's keys left it; @img answers for the check; @a is the
 * peer's classifier or NULL; @table_cpp the table variant's cycles.
 */
static int run_pipe(const struct acl_opts *o, struct bench_acl_gen *g,
		    const struct bench_acl_rule *br,
		    const struct dpflow_acl_image *img, void *a,
		    double table_cpp)
{
	struct bench_pipe bp;
	struct dpflow_pipe_cfg c;
	struct dpflow_entry_cfg e;
	struct bench_best best = {0}, sbest = {0}, psbest = {0};
	struct bench_best pbest[4];
	uint32_t n = o->packets, used = n - n % o->burst, expect;
	uint32_t *keys = calloc((size_t)n * 5, sizeof(*keys));
	const uint32_t **kp = calloc(n, sizeof(*kp));
	uint32_t *res = calloc(n, sizeof(*res));
	const uint8_t **frames = calloc(n, sizeof(*frames));
	uint16_t *lens = calloc(n, sizeof(*lens));
	const char *names[4] = {NULL, NULL, NULL, NULL};
	static char pname[48];
	unsigned nm = 0, pm = 0;
	uint64_t hits = 0, misses = 0, t0;
	char variant[32];
	int rc = 1;
#ifdef DPFLOW_HAVE_DPDK
	struct peer_pass pp = {(struct bench_dpdk_acl *)a, NULL, o->burst, 0,
			       0};
#else
	(void)a;
#endif

	memset(&bp, 0, sizeof(bp));
	memset(pbest, 0, sizeof(pbest));
	if (!keys || !kp || !res || !frames || !lens) {
		fprintf(stderr, "bench acl: out of memory\n");
		goto out;
	}
	bench_pipe_cfg(&c, "acl", DPFLOW_PIPE_ACL, o->rules,
		       bench_acl_pipe_fields, BENCH_ACL_FIELDS);
	if (bench_pipe_create(&bp, &c, n))
		goto out;
	t0 = dpflow_tsc();
	for (uint32_t i = 0; i < o->rules; i++) {
		bench_acl_rule_entry(&br[i], &e);
		if (bench_pipe_add(&bp, &e))
			goto out;
	}
	if (bench_pipe_commit(&bp))
		goto out;
	printf("# pipe: %u rules added in one batch in %.3f s\n", o->rules,
	       (double)(dpflow_tsc() - t0) / (double)dpflow_tsc_hz());
	for (uint32_t i = 0; i < n; i++) {
		uint32_t *k = keys + (size_t)i * 5;
		struct bench_flow f;

		bench_acl_gen_pkt_key(g, br, o->rules, o->match_pct, k, &f);
		kp[i] = k;
		if (bench_pipe_set_pkt(&bp, i, &f))
			goto out;
	}
	expect = dpflow_acl_classify(img, kp, used, res);
	bench_pipe_frames(&bp, frames, lens);
	bp.burst = o->burst;
	bench_pipe_online(&bp);
	bench_pipe_pass(&bp);
	bench_pipe_stats(&bp, &hits, &misses);
	if (hits != expect || hits + misses != used) {
		fprintf(stderr,
			"bench acl: pipe: %llu hits, %llu misses; the table "
			"says %u hits of %u\n",
			(unsigned long long)hits, (unsigned long long)misses,
			expect, used);
		report_drops(&bp);
		goto out;
	}
	printf("# pipe: %u frames, %.1f%% match a rule\n", n,
	       100.0 * expect / used);
#ifdef DPFLOW_HAVE_DPDK
	if (pp.a)
		pp.p = bench_dpdk_pkts_create(frames, lens, n);
	if (pp.p) {
		nm = bench_dpdk_acl_methods(pp.a, names, 4);
		for (unsigned m = 0; m < nm && m < 4; m++) {
			uint64_t got;

			bench_dpdk_acl_set_method(pp.a, m);
			pp.hits = 0;
			got = peer_pipe_pass(&pp);
			if (got != used || pp.hits != expect) {
				fprintf(stderr,
					"bench acl: peer pipe (%s): %llu hits "
					"of %llu, expected %u\n",
					names[m], (unsigned long long)pp.hits,
					(unsigned long long)got, expect);
				goto out;
			}
		}
	}
#endif
	for (unsigned t = 0; t < o->trials; t++) {
		bench_pair_run(bench_pipe_pass, &bp, NULL, NULL, 1, o->seconds,
			       &best, NULL);
#ifdef DPFLOW_HAVE_DPDK
		for (unsigned m = 0; m < nm && m < 4; m++) {
			bench_dpdk_acl_set_method(pp.a, m);
			bench_pair_run(peer_pipe_pass, &pp, NULL, NULL, 1,
				       o->seconds, &pbest[m], NULL);
		}
#endif
	}
	for (unsigned m = 0; m < nm && m < 4; m++) {
		printf("# pipe: dpdk ptype + rte_acl %-10s %8.2f Mpps  %8.2f "
		       "cycles/pkt  dpflow %.2fx\n",
		       names[m], bench_best_mpps(&pbest[m]),
		       bench_best_cpp(&pbest[m]),
		       bench_best_mpps(&best) / bench_best_mpps(&pbest[m]));
		if (bench_best_mpps(&pbest[m]) > bench_best_mpps(&pbest[pm]))
			pm = m;
	}
	if (nm)
		snprintf(pname, sizeof(pname), "dpdk-ptype+rte_acl-%s",
			 names[pm]);
	snprintf(variant, sizeof(variant), "pipe-%ur-b%u", o->rules, o->burst);
	bench_report_best("acl-10k", variant, &best, nm ? pname : NULL,
			  &pbest[pm], 64);
#ifdef DPFLOW_HAVE_DPDK
	bench_pair_run(bench_pipe_parse_pass, &bp, nm ? peer_parse_pass : NULL,
		       &pp, o->trials < 20 ? o->trials : 20, o->seconds, &sbest,
		       &psbest);
#else
	bench_pair_run(bench_pipe_parse_pass, &bp, NULL, NULL,
		       o->trials < 20 ? o->trials : 20, o->seconds, &sbest,
		       &psbest);
#endif
	printf("# stages, cycles/pkt: dpflow pipe %.1f = parse %.1f",
	       bench_best_cpp(&best), bench_best_cpp(&sbest));
	if (table_cpp > 0)
		printf(" + table %.1f (table variant) + rest %.1f", table_cpp,
		       bench_best_cpp(&best) - bench_best_cpp(&sbest) -
			   table_cpp);
	if (nm)
		printf("; peer %.1f = ptype+extract %.1f + rest %.1f",
		       bench_best_cpp(&pbest[pm]), bench_best_cpp(&psbest),
		       bench_best_cpp(&pbest[pm]) - bench_best_cpp(&psbest));
	printf("\n");
	rc = 0;
out:
#ifdef DPFLOW_HAVE_DPDK
	bench_dpdk_pkts_destroy(pp.p);
#endif
	bench_pipe_destroy(&bp);
	free(keys);
	free(kp);
	free(res);
	free(frames);
	free(lens);
	return rc;
}

static int run(const struct acl_opts *o)
{
	struct bench_acl_gen *g = malloc(sizeof(*g));
	struct bench_acl_rule *br =
	    calloc(o->rules ? o->rules : 1, sizeof(*br));
	uint32_t *keys = calloc((size_t)o->keys * 5, sizeof(*keys));
	const uint32_t **kp = calloc(o->keys, sizeof(*kp));
	uint32_t *res = calloc(o->keys, sizeof(*res));
	uint32_t *peer_res = calloc(o->keys, sizeof(*peer_res));
	struct dpflow_acl_rules *rl = NULL;
	struct dpflow_acl_image *img = NULL;
	struct bench_result best = {0};
	struct dpflow_acl_info info;
	struct dpflow_error err = {0};
	struct impl impls[1 + 4];
	struct dpflow_ctx_run dctx;
	unsigned n_impls = 0, peer = 0;
	uint32_t hits = 0, sample, bad = 0;
	uint64_t t0;
	double build_s;
	char variant[32];
	int rc = 1;
#ifdef DPFLOW_HAVE_DPDK
	struct bench_dpdk_acl *a = NULL;
	struct dpdk_ctx_run pctx;
	static char peer_name[48];
#endif

	if (!g || !br || !keys || !kp || !res || !peer_res) {
		fprintf(stderr, "bench acl: out of memory\n");
		goto out;
	}
	bench_acl_gen_init(g, o->seed);
	for (uint32_t i = 0; i < o->rules; i++)
		bench_acl_gen_rule(g, &br[i], i);
	for (uint32_t i = 0; i < o->keys; i++) {
		bench_acl_gen_key(g, br, o->rules, o->match_pct,
				  keys + (size_t)i * 5);
		kp[i] = keys + (size_t)i * 5;
	}

	t0 = dpflow_tsc();
	rl = load_rules(br, o->rules);
	if (rl)
		img = dpflow_acl_build(rl, NULL, &err);
	build_s = (double)(dpflow_tsc() - t0) / (double)dpflow_tsc_hz();
	if (!img) {
		fprintf(stderr, "bench acl: build: %s\n", err.msg);
		goto out;
	}
	dpflow_acl_info(img, &info);
	printf("# dpflow build: %u rules in %.3f s: %.2f MiB, %u trees, "
	       "%u nodes, %u leaves, %llu rule copies, depth %u, "
	       "largest leaf %u\n",
	       o->rules, build_s, (double)info.size / (1 << 20), info.n_trees,
	       info.n_nodes, info.n_leaves,
	       (unsigned long long)info.leaf_entries, info.max_depth,
	       info.max_leaf);

	/* answers first: the figures mean nothing if they are wrong */
	hits = dpflow_acl_classify(img, kp, o->keys, res);
	sample = o->keys < 2000 ? o->keys : 2000;
	for (uint32_t i = 0; i < sample; i++)
		bad +=
		    res[i] != bench_acl_linear_scan(br, o->rules, kp[i], NULL);
	if (bad) {
		fprintf(stderr,
			"bench acl: %u of %u answers differ from a linear "
			"scan\n",
			bad, sample);
		goto out;
	}
	printf("# %u keys, %.1f%% match a rule\n", o->keys,
	       100.0 * hits / o->keys);

	dctx.img = img;
	dctx.kp = kp;
	dctx.res = res;
	memset(impls, 0, sizeof(impls));
	impls[0].name = "dpflow";
	impls[0].classify = dpflow_run;
	impls[0].ctx = &dctx;
	impls[0].method = -1;
	n_impls = 1;
#ifdef DPFLOW_HAVE_DPDK
	if (o->peer)
		a = bench_dpdk_acl_create(br, o->rules, keys, o->keys,
					  &build_s);
	if (a) {
		const char *names[4];
		unsigned nm = bench_dpdk_acl_methods(a, names, 4);

		bench_dpdk_acl_answers(a, peer_res);
		for (uint32_t i = 0; i < o->keys; i++)
			bad += res[i] != peer_res[i];
		printf("# rte_acl build: %u rules in %.3f s; answers "
		       "differing from dpflow: %u of %u\n",
		       o->rules, build_s, bad, o->keys);
		if (bad)
			goto out;
		pctx.a = a;
		pctx.res = peer_res;
		for (unsigned m = 0; m < nm && m < 4; m++) {
			impls[n_impls].name = names[m];
			impls[n_impls].classify = dpdk_run;
			impls[n_impls].ctx = &pctx;
			impls[n_impls].method = (int)m;
			n_impls++;
		}
	}
#endif
	/* trials take turns, so that every implementation sees the same
	 * machine (others' load comes and goes) */
	for (unsigned t = 0;
	     (o->variants & BENCH_VARIANT_TABLE) && t < o->trials; t++)
		for (unsigned k = 0; k < n_impls; k++) {
#ifdef DPFLOW_HAVE_DPDK
			if (impls[k].method >= 0)
				bench_dpdk_acl_set_method(
				    a, (unsigned)impls[k].method);
#endif
			trial(&impls[k], o);
		}
	for (unsigned k = 1; (o->variants & BENCH_VARIANT_TABLE) && k < n_impls;
	     k++) {
		printf("# rte_acl %-10s %8.2f Mpps  %8.2f cycles/key  "
		       "dpflow %.2fx\n",
		       impls[k].name, mpps_of(&impls[k]),
		       (double)impls[k].cycles / (double)impls[k].pkts,
		       mpps_of(&impls[0]) / mpps_of(&impls[k]));
		if (!peer || mpps_of(&impls[k]) > mpps_of(&impls[peer]))
			peer = k;
	}
#ifdef DPFLOW_HAVE_DPDK
	if (peer) {
		snprintf(peer_name, sizeof(peer_name), "dpdk-rte_acl-%s",
			 impls[peer].name);
		best.peer = peer_name;
		best.peer_mpps = mpps_of(&impls[peer]);
	}
#endif
	snprintf(variant, sizeof(variant), "%ur-b%u", o->rules, o->burst);
	best.workload = "acl-10k";
	best.variant = variant;
	best.pkts = impls[0].pkts;
	best.tsc_cycles = impls[0].cycles;
	best.seconds = (double)best.tsc_cycles / (double)dpflow_tsc_hz();
	best.bytes = best.pkts * 64; /* as 64-byte frames */
	if (o->variants & BENCH_VARIANT_TABLE)
		bench_report(&best);
	if (o->variants & BENCH_VARIANT_PIPE) {
		void *pa = NULL;

#ifdef DPFLOW_HAVE_DPDK
		pa = a;
#endif
		if (run_pipe(o, g, br, img, pa,
			     best.pkts
				 ? (double)best.tsc_cycles / (double)best.pkts
				 : 0))
			goto out;
	}
	rc = 0;
out:
#ifdef DPFLOW_HAVE_DPDK
	bench_dpdk_acl_destroy(a);
#endif
	dpflow_acl_destroy(img);
	dpflow_acl_rules_destroy(rl);
	free(g);
	free(br);
	free(keys);
	free(kp);
	free(res);
	free(peer_res);
	return rc;
}

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: dpflow bench acl-10k [--rules N] [--keys N] [--burst N]\n"
	    "                            [--match-pct P] [--seed N]\n"
	    "                            [--seconds S] [--trials N] "
	    "[--no-peer]\n"
	    "                            [--variant V] [--packets N]\n"
	    "\n"
	    "ClassBench-style IPv4 5-tuple ACL rules (prefixes, protocol, "
	    "port\n"
	    "ranges), in memory, on this core. Two variants, each reporting "
	    "the best\n"
	    "of the trials beside DPDK's in the same run (rte_acl, fastest "
	    "method):\n"
	    "  table  the ACL table alone classifying packed keys; peer\n"
	    "         rte_acl_classify on the same keys.\n"
	    "  pipe   the flow engine: an ACL root pipe holding the same "
	    "rules (one\n"
	    "         batch of entries), --packets 64-byte Eth/IPv4/TCP|UDP "
	    "frames of\n"
	    "         keys drawn the same way through "
	    "dpflow_ctx_process_burst() in\n"
	    "         bursts of --burst (<= 64), hits and misses to a "
	    "handler that\n"
	    "         keeps them (re-parsed every pass); peer "
	    "rte_net_get_ptype +\n"
	    "         5-tuple read + rte_acl_classify. A '# stages' line "
	    "splits the\n"
	    "         cycles.\n"
	    "  --rules N      rules (default 10000)\n"
	    "  --keys N       keys, visited in bursts (default 65536)\n"
	    "  --burst N      keys per classify call, <= 256 (default 64)\n"
	    "  --match-pct P  keys drawn inside a rule (default 50)\n"
	    "  --seed N       rule and key generator seed (default 1)\n"
	    "  --seconds S    length of one trial (default 0.01)\n"
	    "  --trials N     trials, taking turns with the peer (default "
	    "100)\n"
	    "  --no-peer      skip the DPDK rte_acl peer\n"
	    "  --variant V    table, pipe or all (default all)\n"
	    "  --packets N    frames of the pipe variant (default 65536)\n");
}

int bench_acl(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"rules", required_argument, NULL, 'r'},
	    {"keys", required_argument, NULL, 'k'},
	    {"burst", required_argument, NULL, 'b'},
	    {"match-pct", required_argument, NULL, 'm'},
	    {"seed", required_argument, NULL, 'S'},
	    {"seconds", required_argument, NULL, 's'},
	    {"trials", required_argument, NULL, 't'},
	    {"no-peer", no_argument, NULL, 'n'},
	    {"variant", required_argument, NULL, 'V'},
	    {"packets", required_argument, NULL, 'P'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct acl_opts o = {
	    10000, 65536, 64, 50, 1, 0.01, 100, true, BENCH_VARIANT_ALL, 65536};
	char *end;
	int c, li = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, &li)) != -1) {
		unsigned long v;

		if (c == 'h') {
			usage(stdout);
			return 0;
		}
		if (c == 'n') {
			o.peer = false;
			continue;
		}
		if (c == '?') {
			usage(stderr);
			return 2;
		}
		if (c == 'V') {
			o.variants = bench_variant_parse(optarg);
			if (o.variants < 0)
				goto bad;
			continue;
		}
		if (c == 's') {
			o.seconds = strtod(optarg, &end);
			if (*end || !(o.seconds > 0 && o.seconds < 3600))
				goto bad;
			continue;
		}
		v = strtoul(optarg, &end, 10);
		if (*end || v > (1u << 24))
			goto bad;
		if (c == 'S') {
			o.seed = v;
			continue;
		}
		if (c == 'm') {
			if (v > 100)
				goto bad;
			o.match_pct = (uint32_t)v;
			continue;
		}
		if (v == 0)
			goto bad;
		if (c == 'r')
			o.rules = (uint32_t)v;
		else if (c == 'k')
			o.keys = (uint32_t)v;
		else if (c == 'b')
			o.burst = (uint32_t)v;
		else if (c == 'P')
			o.packets = (uint32_t)v;
		else
			o.trials = (unsigned)v;
	}
	if ((o.variants & BENCH_VARIANT_PIPE) &&
	    (o.burst > 64 || o.burst > o.packets)) {
		fprintf(stderr, "bench acl: the pipe variant needs --burst "
				"<= 64 and <= --packets\n");
		return 2;
	}
	if (o.burst > DPFLOW_BURST_MAX || o.burst > o.keys) {
		fprintf(stderr,
			"bench acl: --burst must be <= %u and <= --keys\n",
			DPFLOW_BURST_MAX);
		return 2;
	}
	bench_report_header();
	return run(&o);
bad:
	fprintf(stderr, "bench acl: bad value '%s' for --%s\n", optarg,
		opts[li].name);
	return 2;
}
