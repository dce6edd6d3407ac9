/*
 * `dpflow bench maglev`: a Maglev pipe (a HASH pipe with maglev slots,
 * docs/config.md) beside a plain HASH pipe, one core, in memory.
 *
 * Rebuild: for each --members N (64 and 1000 by default) over --slots M
 * (65537), the time dpflow_entries_process() takes for a batch that
 * fills the empty pipe (N adds), reweights one member (one update), or
 * replaces one (a removal and an add): each is one build of the whole
 * slot array into the image readers do not use, the flip, and the copy
 * to the other image. The builder alone (dpflow_maglev_build) is timed
 * too. The peer is the same table kept in a plain HASH pipe of M slots
 * by entry operations, as before the engine had Maglev (`dpflow bench
 * l4lb` still fills its table so): M adds for the fill, and for the
 * replacement the removal of every slot whose member changed, then their
 * adds (two batches: a full plain pipe has no free entry for an update,
 * so it cannot change those slots atomically). Best and median of
 * --trials.
 *
 * Lookup: --packets 64-byte TCP frames of distinct 5-tuples through each
 * pipe (parse, key of the 5-tuple, MurmurHash3, slot, forwarding to a
 * handler), bursts of 64, trials taken in turns; the Maglev pipe holds N
 * members, the plain one M entries (one a slot), so both answer every
 * packet with an entry.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/clock.h"
#include "dpflow/dpflow.h"
#include "dpflow/flow.h"
#include "dpflow/maglev.h"

#include "bench.h"
#include "bench_common.h"

#define MEMBER_SETS_MAX 8

struct maglev_opts {
	uint32_t members[MEMBER_SETS_MAX];
	unsigned n_sets;
	uint32_t slots;
	uint32_t packets;
	double seconds;
	unsigned trials;
};

static void usage(FILE *f)
{
	fputs("usage: dpflow bench maglev [OPTIONS]\n"
	      "\n"
	      "A Maglev pipe beside a plain hash pipe: the time a batch that "
	      "fills,\nreweights or replaces members takes (one rebuild of "
	      "the slot array,\npublished by one flip) against the same "
	      "table kept by entry operations,\nand the lookup rate of both "
	      "pipes.\n"
	      "\n"
	      "  --members N[,N...]  member counts (default 64,1000)\n"
	      "  --slots M           Maglev slots, a prime (default 65537)\n"
	      "  --packets N         frames of the lookup runs (default "
	      "65536)\n"
	      "  --seconds S         length of a lookup trial (default 0.5)\n"
	      "  --trials N          trials of each (default 5)\n"
	      "  -h, --help          print this and exit\n"
	      "\n"
	      "Exit status: 0; 1 when a pipe or batch fails; 2 usage.\n",
	      f);
}

static int parse_members(const char *s, struct maglev_opts *o)
{
	o->n_sets = 0;
	while (*s) {
		char *end;
		unsigned long v;

		errno = 0;
		v = strtoul(s, &end, 0);
		if (errno || end == s || !v || v > 100000 ||
		    o->n_sets == MEMBER_SETS_MAX || (*end && *end != ','))
			return -1;
		o->members[o->n_sets++] = (uint32_t)v;
		s = *end ? end + 1 : end;
	}
	return o->n_sets ? 0 : -1;
}

static int parse_opts(int argc, char **argv, struct maglev_opts *o)
{
	static const struct option lo[] = {
	    {"members", required_argument, NULL, 'n'},
	    {"slots", required_argument, NULL, 'm'},
	    {"packets", required_argument, NULL, 'p'},
	    {"seconds", required_argument, NULL, 'S'},
	    {"trials", required_argument, NULL, 'T'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int c, li = 0;

	*o = (struct maglev_opts){.members = {64, 1000},
				  .n_sets = 2,
				  .slots = DPFLOW_MAGLEV_SIZE_DEFAULT,
				  .packets = 65536,
				  .seconds = 0.5,
				  .trials = 5};
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", lo, &li)) != -1) {
		char *end = NULL;

		errno = 0;
		switch (c) {
		case 'n':
			end = parse_members(optarg, o)
				  ? NULL
				  : optarg + strlen(optarg);
			break;
		case 'm':
			o->slots = (uint32_t)strtoul(optarg, &end, 0);
			if (o->slots < 3 || o->slots > DPFLOW_MAGLEV_SIZE_MAX ||
			    !dpflow_maglev_is_prime(o->slots))
				end = NULL;
			break;
		case 'p':
			o->packets = (uint32_t)strtoul(optarg, &end, 0);
			if (o->packets < 64 || o->packets > (1u << 22))
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
		case 'h':
			usage(stdout);
			return 1;
		default:
			usage(stderr);
			return -1;
		}
		if (!end || *end || errno) {
			fprintf(stderr,
				"bench maglev: bad value '%s' for --%s\n",
				optarg, lo[li].name);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "bench maglev: unexpected '%s'\n",
			argv[optind]);
		return -1;
	}
	return 0;
}

/* The handler both pipes forward to: the packets stay in their slots. */
static void keep(void *arg, struct dpflow_pool *pool, const uint32_t *idx,
		 uint16_t n)
{
	(void)arg;
	(void)pool;
	(void)idx;
	(void)n;
}

struct run {
	const struct maglev_opts *o;
	struct dpflow_ctx *ctx;
	struct dpflow_pipe *lb, *plain;
	struct dpflow_queue *q;
	uint32_t n;			  /* members now */
	struct dpflow_entry **members;	  /* the Maglev pipe's, n */
	char (*names)[24];		  /* theirs */
	uint32_t *weights;		  /* theirs */
	struct dpflow_entry **slot_entry; /* the plain pipe's, by slot */
	uint32_t *t_old, *t_new;	  /* builder tables, slots each */
	uint32_t next_name;
};

static double us_of(uint64_t ticks)
{
	return (double)ticks * 1e6 / (double)dpflow_tsc_hz();
}

static int commit(struct run *r, const char *what)
{
	struct dpflow_error err = {0};

	if (dpflow_entries_process(r->q, NULL, &err)) {
		fprintf(stderr, "bench maglev: %s: %s\n", what, err.msg);
		return -1;
	}
	return 0;
}

/* Time the batch queued on r->q: its TSC ticks, or 0 on failure. */
static uint64_t timed_commit(struct run *r, const char *what)
{
	uint64_t t0 = dpflow_tsc(), t1;

	if (commit(r, what))
		return 0;
	t1 = dpflow_tsc();
	return t1 > t0 ? t1 - t0 : 1;
}

static struct dpflow_entry_cfg member_cfg(const char *name, uint32_t weight)
{
	struct dpflow_entry_cfg e;

	memset(&e, 0, sizeof(e));
	snprintf(e.member, sizeof(e.member), "%s", name);
	e.weight = weight;
	return e;
}

static int queue_member(struct run *r, uint32_t i)
{
	struct dpflow_entry_cfg e = member_cfg(r->names[i], r->weights[i]);
	struct dpflow_error err = {0};

	r->members[i] = dpflow_entry_add(r->q, r->lb, &e, NULL, &err);
	if (!r->members[i])
		fprintf(stderr, "bench maglev: %s\n", err.msg);
	return r->members[i] ? 0 : -1;
}

static void new_name(struct run *r, uint32_t i)
{
	uint32_t k = r->next_name++;

	snprintf(r->names[i], sizeof(r->names[i]), "10.%u.%u.%u:80",
		 (k >> 16) & 255, (k >> 8) & 255, k & 255);
	r->weights[i] = 1 + k % 4;
}

/* The builder's table of the members now into @t. */
static int build_now(struct run *r, uint32_t *t)
{
	struct dpflow_maglev_member *mb = calloc(r->n, sizeof(*mb));
	int rc;

	if (!mb)
		return -1;
	for (uint32_t i = 0; i < r->n; i++)
		mb[i] =
		    (struct dpflow_maglev_member){r->names[i], r->weights[i]};
	rc = dpflow_maglev_build(mb, r->n, r->o->slots, t);
	free(mb);
	return rc;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

struct timing {
	const char *op;
	uint64_t ours[100], peer[100]; /* ticks a trial; peer 0: none */
	const char *peer_name;
};

static void timing_report(const char *variant, struct timing *t,
			  unsigned trials)
{
	qsort(t->ours, trials, sizeof(t->ours[0]), cmp_u64);
	qsort(t->peer, trials, sizeof(t->peer[0]), cmp_u64);
	printf("%-8s %-14s %-22s %10.1f %10.1f", "maglev", variant, t->op,
	       us_of(t->ours[0]), us_of(t->ours[trials / 2]));
	if (t->peer_name)
		printf("  %10.1f %10.1f  %s\n", us_of(t->peer[0]),
		       us_of(t->peer[trials / 2]), t->peer_name);
	else
		printf("  %10s %10s  -\n", "-", "-");
	printf("{\"workload\":\"maglev\",\"variant\":\"%s\",\"op\":\"%s\","
	       "\"us_best\":%.2f,\"us_median\":%.2f,\"tsc_hz\":%lu,",
	       variant, t->op, us_of(t->ours[0]), us_of(t->ours[trials / 2]),
	       (unsigned long)dpflow_tsc_hz());
	if (t->peer_name)
		printf("\"peer\":\"%s\",\"peer_us_best\":%.2f,"
		       "\"peer_us_median\":%.2f}\n",
		       t->peer_name, us_of(t->peer[0]),
		       us_of(t->peer[trials / 2]));
	else
		printf("\"peer\":null}\n");
	fflush(stdout);
}

/* Empty the Maglev pipe (untimed). */
static int drain(struct run *r)
{
	for (uint32_t i = 0; i < r->n; i++)
		if (dpflow_entry_remove(r->q, r->members[i], NULL))
			return -1;
	return r->n ? commit(r, "drain") : 0;
}

/* The plain pipe: every slot's entry removed (untimed, when filled), then
 * M adds, timed. */
static uint64_t plain_fill(struct run *r)
{
	uint32_t m = r->o->slots;
	struct dpflow_error err = {0};

	if (r->slot_entry[0]) {
		for (uint32_t s = 0; s < m; s++)
			dpflow_entry_remove(r->q, r->slot_entry[s], NULL);
		if (commit(r, "plain drain"))
			return 0;
	}
	for (uint32_t s = 0; s < m; s++) {
		struct dpflow_entry_cfg e;

		memset(&e, 0, sizeof(e));
		e.hash_index = s;
		r->slot_entry[s] =
		    dpflow_entry_add(r->q, r->plain, &e, NULL, &err);
		if (!r->slot_entry[s]) {
			fprintf(stderr, "bench maglev: %s\n", err.msg);
			return 0;
		}
	}
	return timed_commit(r, "plain fill");
}

/* The plain pipe's way to the change from r->t_old to r->t_new: remove
 * the slots that differ, then add them (two batches, both timed). */
static uint64_t plain_change(struct run *r)
{
	uint32_t m = r->o->slots, k = 0;
	struct dpflow_error err = {0};
	uint64_t t;

	for (uint32_t s = 0; s < m; s++)
		if (r->t_old[s] != r->t_new[s]) {
			dpflow_entry_remove(r->q, r->slot_entry[s], NULL);
			k++;
		}
	if (!k)
		return 1;
	t = timed_commit(r, "plain change (removals)");
	if (!t)
		return 0;
	for (uint32_t s = 0; s < m; s++) {
		struct dpflow_entry_cfg e;

		if (r->t_old[s] == r->t_new[s])
			continue;
		memset(&e, 0, sizeof(e));
		e.hash_index = s;
		r->slot_entry[s] =
		    dpflow_entry_add(r->q, r->plain, &e, NULL, &err);
		if (!r->slot_entry[s])
			return 0;
	}
	return t + timed_commit(r, "plain change (adds)");
}

/* The rebuild timings for @n members. */
static int rebuild_runs(struct run *r, uint32_t n)
{
	const struct maglev_opts *o = r->o;
	struct timing fill = {.op = "fill", .peer_name = "hash pipe, M adds"};
	struct timing rew = {.op = "reweight 1"};
	struct timing repl = {.op = "replace 1",
			      .peer_name = "hash pipe, changed slots"};
	struct timing build = {.op = "builder alone"};
	char variant[32];

	snprintf(variant, sizeof(variant), "rebuild-%u", n);
	for (unsigned t = 0; t < o->trials; t++) {
		uint32_t j = t % n;

		if (drain(r))
			return -1;
		r->n = n;
		for (uint32_t i = 0; i < n; i++)
			if (queue_member(r, i))
				return -1;
		fill.ours[t] = timed_commit(r, "fill");
		fill.peer[t] = plain_fill(r);

		r->weights[j] = r->weights[j] % 4 + 1;
		{
			struct dpflow_entry_cfg e =
			    member_cfg(r->names[j], r->weights[j]);
			struct dpflow_error err = {0};

			r->members[j] = dpflow_entry_update(r->q, r->members[j],
							    &e, NULL, &err);
			if (!r->members[j]) {
				fprintf(stderr, "bench maglev: %s\n", err.msg);
				return -1;
			}
		}
		rew.ours[t] = timed_commit(r, "reweight");

		/* the plain pipe's slots follow the members now */
		if (build_now(r, r->t_old))
			return -1;
		if (dpflow_entry_remove(r->q, r->members[j], NULL))
			return -1;
		new_name(r, j);
		if (queue_member(r, j))
			return -1;
		repl.ours[t] = timed_commit(r, "replace");
		if (build_now(r, r->t_new))
			return -1;
		repl.peer[t] = plain_change(r);
		{
			uint64_t t0 = dpflow_tsc();

			if (build_now(r, r->t_new))
				return -1;
			build.ours[t] = dpflow_tsc() - t0;
		}
		if (!fill.ours[t] || !fill.peer[t] || !rew.ours[t] ||
		    !repl.ours[t] || !repl.peer[t])
			return -1;
	}
	timing_report(variant, &fill, o->trials);
	timing_report(variant, &rew, o->trials);
	timing_report(variant, &repl, o->trials);
	timing_report(variant, &build, o->trials);
	return 0;
}

static void pipe_cfg_of(struct dpflow_pipe_cfg *c, const char *name,
			uint32_t size, uint32_t slots, uint16_t port)
{
	bench_pipe_cfg(c, name, DPFLOW_PIPE_HASH, size, bench_exact_fields, 5);
	c->maglev_slots = slots;
	c->root = true;
	c->port = port;
	c->fwd.kind = DPFLOW_FWD_HANDLER;
	c->fwd.handler = keep;
	c->miss_fwd = c->fwd;
}

int bench_maglev(int argc, char **argv)
{
	struct maglev_opts o;
	struct dpflow_ctx_params cp = {.data_room = 256};
	struct dpflow_error err = {0};
	struct dpflow_pipe_cfg c;
	struct bench_pipe a, b;
	struct run r;
	uint32_t nmax = 0, *idx = NULL;
	int rc = parse_opts(argc, argv, &o), pa, pb;

	if (rc)
		return rc > 0 ? 0 : 2;
	for (unsigned i = 0; i < o.n_sets; i++)
		nmax = o.members[i] > nmax ? o.members[i] : nmax;
	memset(&r, 0, sizeof(r));
	r.o = &o;
	rc = 1;
	cp.pool_slots = o.packets + 64;
	r.ctx = dpflow_ctx_create(&cp, &err);
	if (!r.ctx)
		goto fail;
	pa = dpflow_ctx_port_add(r.ctx, "a", "ring:maglev_a", &err);
	pb = pa < 0 ? pa
		    : dpflow_ctx_port_add(r.ctx, "b", "ring:maglev_b", &err);
	if (pb < 0)
		goto fail;
	pipe_cfg_of(&c, "maglev", nmax + 1, o.slots, (uint16_t)pa);
	r.lb = dpflow_pipe_create(r.ctx, &c, &err);
	pipe_cfg_of(&c, "plain", o.slots, 0, (uint16_t)pb);
	r.plain = r.lb ? dpflow_pipe_create(r.ctx, &c, &err) : NULL;
	r.q = r.plain ? dpflow_queue_create(r.ctx, &err) : NULL;
	if (!r.q)
		goto fail;
	r.members = calloc(nmax, sizeof(*r.members));
	r.names = calloc(nmax, sizeof(*r.names));
	r.weights = calloc(nmax, sizeof(*r.weights));
	r.slot_entry = calloc(o.slots, sizeof(*r.slot_entry));
	r.t_old = calloc(o.slots, sizeof(*r.t_old));
	r.t_new = calloc(o.slots, sizeof(*r.t_new));
	idx = calloc(o.packets, sizeof(*idx));
	if (!r.members || !r.names || !r.weights || !r.slot_entry || !r.t_old ||
	    !r.t_new || !idx) {
		snprintf(err.msg, sizeof(err.msg), "out of memory");
		goto fail;
	}
	for (uint32_t i = 0; i < nmax; i++)
		new_name(&r, i);

	printf("%-8s %-14s %-22s %10s %10s  %10s %10s  %s\n", "workload",
	       "variant", "batch", "us_best", "us_median", "peer_best",
	       "peer_median", "peer");
	for (unsigned i = 0; i < o.n_sets; i++)
		if (rebuild_runs(&r, o.members[i]))
			goto fail_quiet;

	/* lookups: the members of the last set, the plain pipe full */
	if (dpflow_pool_alloc_bulk(dpflow_ctx_pool(r.ctx), idx, o.packets)) {
		snprintf(err.msg, sizeof(err.msg), "no room for the packets");
		goto fail;
	}
	memset(&a, 0, sizeof(a));
	a.ctx = r.ctx;
	a.pool = dpflow_ctx_pool(r.ctx);
	a.pipe = r.lb;
	a.port = (uint16_t)pa;
	a.n_pkts = o.packets;
	a.burst = 64;
	a.idx = idx;
	b = a;
	b.pipe = r.plain;
	b.port = (uint16_t)pb;
	for (uint32_t i = 0; i < o.packets; i++) {
		struct bench_flow f;
		uint32_t s = bench_scramble(i), d = bench_scramble(~i);

		memcpy(f.src, &s, 4);
		memcpy(f.dst, &d, 4);
		f.sport = (uint16_t)(1024 + i % 60000);
		f.dport = (uint16_t)(80 + (i >> 16));
		f.proto = 6;
		if (bench_pipe_set_pkt(&a, i, &f))
			goto fail_quiet;
	}
	{
		struct bench_best ob = {0}, pbest = {0};
		uint64_t hits, misses;
		char variant[32];

		dpflow_ctx_thread_online(r.ctx);
		bench_pair_run(bench_pipe_pass, &a, bench_pipe_pass, &b,
			       o.trials, o.seconds, &ob, &pbest);
		dpflow_ctx_thread_offline(r.ctx);
		bench_pipe_stats(&a, &hits, &misses);
		if (misses) {
			fprintf(stderr, "bench maglev: %lu misses\n",
				(unsigned long)misses);
			goto fail_quiet;
		}
		printf("\n");
		bench_report_header();
		snprintf(variant, sizeof(variant), "lookup-%u", o.slots);
		bench_report_best("maglev", variant, &ob, "hash pipe", &pbest,
				  64);
	}
	rc = 0;
	goto out;
fail:
	fprintf(stderr, "bench maglev: %s\n", err.msg);
fail_quiet:
	rc = 1;
out:
	dpflow_queue_destroy(r.q);
	dpflow_ctx_destroy(r.ctx);
	free(idx);
	free(r.t_new);
	free(r.t_old);
	free(r.slot_entry);
	free(r.weights);
	free(r.names);
	free(r.members);
	return rc;
}
