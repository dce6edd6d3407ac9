/*
 * `dpflow bench mem`: what random lookups in a large table cost the
 * memory system, the ceiling under the table-bound workloads (l4lb, ct,
 * exact-1m with 1M flows). In a region of --mb MiB (transparent huge
 * pages unless --no-huge), lookups come in bursts of --burst: every
 * lookup's lines are prefetched for the whole burst, then read, as the
 * data paths do. Patterns, each a lookup of one or two 64-byte lines:
 *
 *   line             one random line
 *   line+same-page   a random line and a second one of its 4 KiB page,
 *                    both prefetched at once
 *   line>same-page   the second line of the same page prefetched only
 *                    when the first has arrived (its address depends on
 *                    it: a bucket, then the entry it points at)
 *   line+page        two random lines in two random pages, at once
 *   line>page        the second random page after the first line
 *
 * Reported: ns and TSC cycles a lookup (best of --trials), and a lookup's
 * cost over the one-line pattern's.
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "dpflow/clock.h"
#include "dpflow/common.h"

#include "bench.h"
#include "bench_common.h"

#define MEM_BURST_MAX	 256
#define LINES_A_PAGE	 (4096u / 64u)
#define BURSTS_A_PASS	 256u
#define SECOND_LINE_STEP 4u /* lines between a page's first and second */

enum mem_pattern {
	P_LINE,
	P_SAME_PAGE,
	P_SAME_PAGE_DEP,
	P_TWO_PAGES,
	P_TWO_PAGES_DEP,
	P__COUNT,
};

static const char *const pattern_name[P__COUNT] = {
    "line", "line+same-page", "line>same-page", "line+page", "line>page",
};

struct mem_opts {
	uint64_t mb;
	uint32_t burst;
	bool huge;
	double seconds;
	unsigned trials;
};

struct mem_run {
	const uint8_t *region;
	uint64_t line_mask; /* lines - 1 (a power of two) */
	uint32_t burst;
	enum mem_pattern pattern;
	uint64_t rng;
	uint64_t sink;
};

static uint64_t next_rand(struct mem_run *r)
{
	uint64_t x = r->rng;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	r->rng = x;
	return x;
}

/* The line @step lines after @line, wrapping within its page. */
static uint64_t same_page(uint64_t line, uint64_t step)
{
	return (line & ~(uint64_t)(LINES_A_PAGE - 1)) |
	       ((line + step) & (LINES_A_PAGE - 1));
}

static const uint8_t *line_at(const struct mem_run *r, uint64_t line)
{
	return r->region + line * 64u;
}

/* One burst: every lookup's lines prefetched, then read. */
static void burst_run(struct mem_run *r)
{
	uint64_t first[MEM_BURST_MAX], second[MEM_BURST_MAX], sum = 0;
	const uint32_t n = r->burst;
	bool two = r->pattern != P_LINE;
	bool dep =
	    r->pattern == P_SAME_PAGE_DEP || r->pattern == P_TWO_PAGES_DEP;
	bool far = r->pattern == P_TWO_PAGES || r->pattern == P_TWO_PAGES_DEP;

	for (uint32_t i = 0; i < n; i++) {
		first[i] = next_rand(r) & r->line_mask;
		second[i] = far ? next_rand(r) & r->line_mask
				: same_page(first[i], SECOND_LINE_STEP);
		__builtin_prefetch(line_at(r, first[i]));
		if (two && !dep)
			__builtin_prefetch(line_at(r, second[i]));
	}
	if (dep) /* the second address waits for the first line's byte
		    (zero in this region, but any value stays in bounds) */
		for (uint32_t i = 0; i < n; i++) {
			uint64_t v = *line_at(r, first[i]);

			second[i] = far ? (second[i] + v) & r->line_mask
					: same_page(second[i], v);
			__builtin_prefetch(line_at(r, second[i]));
		}
	for (uint32_t i = 0; i < n; i++) {
		sum += *line_at(r, first[i]);
		if (two)
			sum += *line_at(r, second[i]);
	}
	r->sink += sum;
}

static uint64_t mem_pass(void *arg)
{
	struct mem_run *r = arg;

	for (unsigned b = 0; b < BURSTS_A_PASS; b++)
		burst_run(r);
	return (uint64_t)BURSTS_A_PASS * r->burst;
}

static void usage(FILE *f)
{
	fputs("usage: dpflow bench mem [OPTIONS]\n"
	      "\n"
	      "Random lookups of one or two cache lines in a large region, in "
	      "bursts\nprefetched ahead: what a table lookup costs the memory "
	      "system.\n"
	      "\n"
	      "  --mb N         region size in MiB, a power of two up to "
	      "65536 (default\n                 512)\n"
	      "  --burst N      lookups a burst, 1..256 (default 32)\n"
	      "  --no-huge      4 KiB pages (default: transparent huge "
	      "pages)\n"
	      "  --seconds S    per trial (default 1)\n"
	      "  --trials N     trials a pattern, the best kept (default 3)\n"
	      "  -h, --help     this text\n"
	      "\n"
	      "Exit status: 0; 1 when the region cannot be mapped; 2 usage.\n",
	      f);
}

static int parse_opts(int argc, char **argv, struct mem_opts *o)
{
	static const struct option lo[] = {
	    {"mb", required_argument, NULL, 'm'},
	    {"burst", required_argument, NULL, 'b'},
	    {"seconds", required_argument, NULL, 'S'},
	    {"trials", required_argument, NULL, 'T'},
	    {"no-huge", no_argument, NULL, 'H'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int c, li = 0;

	*o = (struct mem_opts){
	    .mb = 512, .burst = 32, .huge = true, .seconds = 1, .trials = 3};
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", lo, &li)) != -1) {
		char *end = NULL;

		errno = 0;
		switch (c) {
		case 'm':
			o->mb = strtoull(optarg, &end, 0);
			if (!o->mb || (o->mb & (o->mb - 1)) || o->mb > 65536 ||
			    o->mb > SIZE_MAX >> 20)
				end = NULL;
			break;
		case 'b':
			o->burst = (uint32_t)strtoul(optarg, &end, 0);
			if (!o->burst || o->burst > MEM_BURST_MAX)
				end = NULL;
			break;
		case 'S':
			o->seconds = strtod(optarg, &end);
			if (!(o->seconds > 0 && o->seconds <= 60))
				end = NULL;
			break;
		case 'T':
			o->trials = (unsigned)strtoul(optarg, &end, 0);
			if (!o->trials || o->trials > 100)
				end = NULL;
			break;
		case 'H':
			o->huge = false;
			continue;
		case 'h':
			usage(stdout);
			return 1;
		default:
			usage(stderr);
			return -1;
		}
		if (!end || *end || errno) {
			fprintf(stderr, "bench mem: bad value '%s' for --%s\n",
				optarg, lo[li].name);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "bench mem: unexpected '%s'\n", argv[optind]);
		return -1;
	}
	return 0;
}

int bench_mem(int argc, char **argv)
{
	struct mem_opts o;
	struct mem_run r;
	double tsc_hz = (double)dpflow_tsc_hz(), line_ns = 0;
	size_t len;
	void *p;
	int rc = parse_opts(argc, argv, &o);

	if (rc)
		return rc > 0 ? 0 : 2;
	len = (size_t)o.mb << 20;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		 -1, 0);
	if (p == MAP_FAILED) {
		fprintf(stderr, "bench mem: cannot map %lu MiB: %s\n",
			(unsigned long)o.mb, strerror(errno));
		return 1;
	}
#if defined(MADV_HUGEPAGE) && defined(MADV_NOHUGEPAGE)
	(void)madvise(p, len, o.huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
#endif
	memset(p, 0, len); /* every page backed before timing */
	printf("%-8s %-18s %10s %14s %9s\n", "workload", "pattern", "ns/lookup",
	       "cycles/lookup", "extra_ns");
	for (unsigned pat = 0; pat < P__COUNT; pat++) {
		struct bench_best best = {0};
		double ns;

		r = (struct mem_run){.region = p,
				     .line_mask = len / 64u - 1,
				     .burst = o.burst,
				     .pattern = (enum mem_pattern)pat,
				     .rng = 0x9e3779b97f4a7c15ull + pat};
		for (unsigned t = 0; t < o.trials; t++) {
			uint64_t n,
			    ticks = bench_timed(mem_pass, &r, o.seconds, &n);

			bench_best_keep(&best, n, ticks);
		}
		ns = bench_best_cpp(&best) / tsc_hz * 1e9;
		if (pat == P_LINE)
			line_ns = ns;
		printf("%-8s %-18s %10.2f %14.2f %9.2f\n", "mem",
		       pattern_name[pat], ns, bench_best_cpp(&best),
		       ns - line_ns);
		printf("{\"workload\":\"mem\",\"pattern\":\"%s\",\"mb\":%lu,"
		       "\"huge\":%s,\"burst\":%u,\"ns_per_lookup\":%.3f,"
		       "\"cycles_per_lookup\":%.2f,\"tsc_hz\":%.0f}\n",
		       pattern_name[pat], (unsigned long)o.mb,
		       o.huge ? "true" : "false", o.burst, ns,
		       bench_best_cpp(&best), tsc_hz);
		fflush(stdout);
	}
	printf("# %lu MiB region, %s, bursts of %u; sink %lu\n",
	       (unsigned long)o.mb,
	       o.huge ? "transparent huge pages (madvise)" : "4 KiB pages",
	       o.burst, (unsigned long)(r.sink & 1));
	munmap(p, len);
	return 0;
}
