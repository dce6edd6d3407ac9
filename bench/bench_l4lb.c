/*
 * `dpflow bench l4lb`: the l4lb pipeline (bench_l4lb_pipe.h) on the CPU
 * target, in memory: --flows client connections to one VIP, a Maglev
 * table of --maglev slots over --backends backends, 64-byte TCP frames.
 * Every connection is established by the first (checked) pass; the timed
 * passes are the steady state: parse, VIP match, Maglev, CT hit, DNAT with
 * checksum updates. Each burst's frames are first written back as they
 * arrived (64 bytes each), since DNAT rewrites them: that copy is part of
 * the figure. One worker, then --workers (default: every core) sharing the
 * one connection table. The app variants (bench_l4lb_app.c) run beside a
 * DPDK peer that does only the parse and the flow lookup; BENCH.md's
 * published reference for a whole balancer is Katran, 5.2 Mpps per core
 * on XDP.
 */
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dpflow/dpflow.h"

#include "bench.h"
#include "bench_l4lb.h"
#include "bench_l4lb_app.h"
#include "l4lb/l4lb.h"

/* The dnat pipe's forwarding: keep the packets where they are. */
static void keep_pkts(void *arg, struct dpflow_pool *pool, const uint32_t *idx,
		      uint16_t n)
{
	(void)arg;
	(void)pool;
	(void)idx;
	(void)n;
}

int l4lb_cpu_create(struct l4lb_cpu *c, const struct l4lb_params *p,
		    uint32_t n_pkts)
{
	static const struct dpflow_handler_def keep = {"keep", keep_pkts, NULL};
	struct dpflow_config_opts o = {
	    .pool_slots = n_pkts + 1024,
	    .data_room = 128,
	    .handlers = &keep,
	    .n_handlers = 1,
	};
	struct dpflow_error err = {0};
	char *yaml;

	memset(c, 0, sizeof(*c));
	c->p = *p;
	c->n_pkts = n_pkts;
	c->burst = p->burst;
	yaml = l4lb_yaml(p, "{handler: keep}");
	if (!yaml)
		return -1;
	c->ctx = dpflow_config_load_string(yaml, "l4lb", &o, &err);
	free(yaml);
	if (!c->ctx) {
		fprintf(stderr, "bench l4lb: %s\n", err.msg);
		return -1;
	}
	c->pool = dpflow_ctx_pool(c->ctx);
	c->idx = malloc((size_t)n_pkts * sizeof(*c->idx));
	c->frame = malloc((size_t)n_pkts * sizeof(*c->frame));
	c->len = malloc((size_t)n_pkts * sizeof(*c->len));
	if (!c->idx || !c->frame || !c->len ||
	    dpflow_pool_alloc_bulk(c->pool, c->idx, n_pkts)) {
		fprintf(stderr, "bench l4lb: out of memory\n");
		return -1;
	}
	for (uint32_t i = 0; i < n_pkts; i++) {
		struct bench_flow f;

		l4lb_flow(p, i % p->flows, &f);
		c->len[i] = (uint16_t)l4lb_frame(&f, c->frame[i]);
		if (!c->len[i]) {
			fprintf(stderr, "bench l4lb: cannot build a frame\n");
			return -1;
		}
	}
	return 0;
}

void l4lb_cpu_destroy(struct l4lb_cpu *c)
{
	if (c->pool && c->idx)
		dpflow_pool_free_bulk(c->pool, c->idx, c->n_pkts);
	dpflow_ctx_destroy(c->ctx);
	free(c->idx);
	free(c->frame);
	free(c->len);
	memset(c, 0, sizeof(*c));
}

uint64_t l4lb_cpu_pass(struct l4lb_cpu *c, uint32_t lo, uint32_t hi)
{
	uint32_t b = c->burst, i;

	for (i = lo; i + b <= hi; i += b) {
		for (uint32_t k = i; k < i + b; k++) {
			struct dpflow_pkt_meta *m =
			    dpflow_pool_meta(c->pool, c->idx[k]);

			memcpy(dpflow_pkt_data(c->pool, c->idx[k]), c->frame[k],
			       64);
			m->data_len = c->len[k];
		}
		dpflow_ctx_process_burst(c->ctx, 0, c->idx + i, (uint16_t)b);
		dpflow_ctx_quiescent(c->ctx);
	}
	return i - lo;
}

uint32_t l4lb_csum_add(uint32_t sum, const uint8_t *p, unsigned n)
{
	for (unsigned i = 0; i + 1 < n; i += 2)
		sum += (uint32_t)p[i] << 8 | p[i + 1];
	if (n & 1)
		sum += (uint32_t)p[n - 1] << 8;
	return sum;
}

uint16_t l4lb_csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}

/* What the reference says of frame @f (Ethernet/IPv4/TCP, no options)
 * after DNAT (and with @full_nat, SNAT to the pool's address and a port
 * of 1024 or more, DNAT to the backend's port): 0 when right, else a word
 * for the message. */
static const char *frame_wrong(const uint8_t *f, uint32_t want_dst,
			       bool full_nat)
{
	const uint8_t *ip = f + 14, *tcp = ip + 20;
	uint32_t dst =
	    (uint32_t)ip[16] << 24 | ip[17] << 16 | ip[18] << 8 | ip[19];
	uint32_t src =
	    (uint32_t)ip[12] << 24 | ip[13] << 16 | ip[14] << 8 | ip[15];
	unsigned tcp_len = (unsigned)(ip[2] << 8 | ip[3]) - 20;
	uint32_t sum;

	if (dst != want_dst)
		return "destination address";
	if (full_nat && src != L4LB_SNAT)
		return "source address";
	if (full_nat && (tcp[0] << 8 | tcp[1]) < 1024)
		return "source port";
	if (full_nat && (unsigned)(tcp[2] << 8 | tcp[3]) != L4LB_BACKEND_PORT)
		return "destination port";
	if (l4lb_csum_fold(l4lb_csum_add(0, ip, 20)) != 0xffff)
		return "IPv4 checksum";
	sum = l4lb_csum_add(0, ip + 12, 8); /* the pseudo header's addresses */
	sum += 6 + tcp_len;
	if (l4lb_csum_fold(l4lb_csum_add(sum, tcp, tcp_len)) != 0xffff)
		return "TCP checksum";
	return NULL;
}

int l4lb_cpu_check(struct l4lb_cpu *c)
{
	uint32_t m = c->p.maglev, *table = malloc(m * sizeof(*table));
	uint32_t n = c->n_pkts - c->n_pkts % c->burst;
	uint64_t counted = 0, bad = 0;
	struct dpflow_pipe *dnat = dpflow_pipe_find(c->ctx, "dnat");

	if (!table || l4lb_maglev_fill(m, c->p.backends, table)) {
		fprintf(stderr, "bench l4lb: check: no Maglev table\n");
		free(table);
		return -1;
	}
	dpflow_ctx_thread_online(c->ctx);
	l4lb_cpu_pass(c, 0, n);
	dpflow_ctx_thread_offline(c->ctx);
	for (uint32_t i = 0; i < n; i++) {
		const uint8_t *in = c->frame[i], *ip = in + 14;
		uint8_t key[13];
		const char *why;
		uint32_t b;

		/* the hash pipe's key: src, dst, proto, sport, dport */
		memcpy(key, ip + 12, 8);
		key[8] = ip[9];
		memcpy(key + 9, ip + 20, 4);
		b = table[dpflow_hash32(key, sizeof(key), 0) % m];
		why = frame_wrong(dpflow_pkt_data(c->pool, c->idx[i]),
				  L4LB_BACKEND_NET + b + 1, c->p.full_nat);
		if (why && bad++ < 5)
			fprintf(stderr,
				"bench l4lb: packet %u: wrong %s (backend "
				"%u expected)\n",
				i, why, b);
	}
	for (uint32_t k = 0; k < dpflow_pipe_size(dnat); k++) {
		struct dpflow_counter ctr;

		if (!dpflow_entry_counter(dpflow_pipe_entry(dnat, k), &ctr))
			counted += ctr.pkts;
	}
	free(table);
	printf("# check, %u packets: %llu as the reference says, %llu "
	       "counted by the dnat pipe\n",
	       n, (unsigned long long)(n - bad), (unsigned long long)counted);
	if (bad || counted != n) {
		fprintf(stderr, "bench l4lb: the pipeline's answers differ "
				"from the reference\n");
		return -1;
	}
	return 0;
}

/* ---- workers ------------------------------------------------------------- */

struct worker {
	struct l4lb_cpu *c;
	uint32_t lo, hi;
	const int *stop;
	pthread_barrier_t *go;
	uint64_t pkts, t0, t1;
	pthread_t th;
};

static void *work(void *arg)
{
	struct worker *w = arg;

	dpflow_ctx_thread_online(w->c->ctx);
	pthread_barrier_wait(w->go);
	w->t0 = dpflow_tsc();
	while (!__atomic_load_n(w->stop, __ATOMIC_RELAXED))
		w->pkts += l4lb_cpu_pass(w->c, w->lo, w->hi);
	w->t1 = dpflow_tsc();
	dpflow_ctx_thread_offline(w->c->ctx);
	return NULL;
}

/* One trial: packets per second of the whole; ticks a packet a worker. */
static double trial(struct l4lb_cpu *c, unsigned n, double seconds, double *cpp)
{
	struct worker *w = calloc(n, sizeof(*w));
	uint64_t pkts = 0, t0 = UINT64_MAX, t1 = 0, ticks = 0;
	uint32_t slice = c->n_pkts / n;
	pthread_barrier_t go;
	struct timespec ts;
	int stop = 0;

	if (!w)
		return 0;
	pthread_barrier_init(&go, NULL, n + 1);
	for (unsigned i = 0; i < n; i++) {
		w[i].c = c;
		w[i].lo = i * slice;
		w[i].hi = w[i].lo + slice;
		w[i].stop = &stop;
		w[i].go = &go;
		pthread_create(&w[i].th, NULL, work, &w[i]);
	}
	pthread_barrier_wait(&go);
	ts.tv_sec = (time_t)seconds;
	ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
	nanosleep(&ts, NULL);
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (unsigned i = 0; i < n; i++) {
		pthread_join(w[i].th, NULL);
		pkts += w[i].pkts;
		ticks += w[i].t1 - w[i].t0;
		t0 = w[i].t0 < t0 ? w[i].t0 : t0;
		t1 = w[i].t1 > t1 ? w[i].t1 : t1;
	}
	pthread_barrier_destroy(&go);
	free(w);
	*cpp = pkts ? (double)ticks / (double)pkts : 0;
	return t1 > t0 && pkts
		   ? (double)pkts * (double)dpflow_tsc_hz() / (double)(t1 - t0)
		   : 0;
}

double l4lb_cpu_run(struct l4lb_cpu *c, unsigned workers, double seconds,
		    unsigned trials, double *cpp)
{
	double best = 0, t_cpp = 0;

	*cpp = 0;
	for (unsigned t = 0; t < trials; t++) {
		double pps = trial(c, workers, seconds, &t_cpp);

		if (pps > best) {
			best = pps;
			*cpp = t_cpp;
		}
	}
	return best;
}

/* ---- the command -----------------------------------------------------------
 */

static void report(const char *variant, unsigned workers, double pps,
		   double cpp)
{
	printf("%-8s %-18s %-24s %9.2f %11.2f %8.2f %9s\n", "l4lb", variant,
	       "dpflow", pps / 1e6, cpp, pps * 64 * 8 / 1e9, "-");
	printf("{\"workload\":\"l4lb\",\"variant\":\"%s\",\"target\":\"cpu\","
	       "\"workers\":%u,\"mpps\":%.3f,\"cycles_per_pkt\":%.2f,"
	       "\"gbps\":%.3f,\"tsc_hz\":%lu,\"peer\":null,\"peer_mpps\":null,"
	       "\"ratio\":null}\n",
	       variant, workers, pps / 1e6, cpp, pps * 64 * 8 / 1e9,
	       (unsigned long)dpflow_tsc_hz());
}

static uint64_t pipe_pass(void *arg)
{
	struct l4lb_cpu *c = arg;

	return l4lb_cpu_pass(c, 0, c->n_pkts - c->n_pkts % c->burst);
}

/*
 * The pipe-nat variant: the app's full NAT as pipes (bench_l4lb_pipe.h,
 * full_nat), checked, then one core beside the DPDK peer, then 1 and
 * @workers workers.
 */
static int run_pipe_nat(const struct l4lb_params *pa, uint32_t packets,
			unsigned workers, double seconds, unsigned trials,
			bool with_peer)
{
	struct l4lb_params p = *pa;
	struct bench_best ob, pb;
	struct l4lb_cpu c;
	const char *peer;
	char variant[40];
	double pps, cpp;
	int rc = -1;

	p.full_nat = 1;
	if (l4lb_cpu_create(&c, &p, packets) || l4lb_cpu_check(&c))
		goto out;
	dpflow_ctx_thread_online(c.ctx);
	rc = bench_l4lb_paired(&c.p, c.frame, c.len, c.n_pkts, pipe_pass, &c,
			       seconds, trials, with_peer, &ob, &pb, &peer);
	dpflow_ctx_thread_offline(c.ctx);
	if (rc)
		goto out;
	bench_report_header();
	bench_report_best("l4lb", "pipe-nat-1core", &ob, peer, &pb, 64);
	pps = l4lb_cpu_run(&c, 1, seconds, trials, &cpp);
	report("pipe-nat-cpu-1core", 1, pps, cpp);
	if (workers > 1) {
		snprintf(variant, sizeof(variant), "pipe-nat-cpu-%ucores",
			 workers);
		pps = l4lb_cpu_run(&c, workers, seconds, trials, &cpp);
		report(variant, workers, pps, cpp);
	}
out:
	l4lb_cpu_destroy(&c);
	return rc;
}

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: dpflow bench l4lb [--variant "
	    "app|app-nat|app-ipip|pipe|pipe-nat|all]\n"
	    "         [--flows N] [--backends N]"
	    " [--maglev M] [--packets N] [--workers N]\n"
	    "         "
	    "[--seconds S] [--trials N] [--burst N] [--seed N] [--no-peer]\n\n"
	    "A load balancer on 64-byte TCP frames to one VIP, in memory:\n"
	    "--flows connections (default 1048576), --backends (default 64), "
	    "a Maglev\ntable of --maglev slots (a prime; default 65537), "
	    "--packets frames (default\n--flows; packet i is flow i mod "
	    "flows), --burst packets a burst (1..64;\ndefault: 64 for app, "
	    "as docs/apps/l4lb.md runs it, 32 for pipe, the\nruntime's). "
	    "The first passes are checked against a reference, then each\n"
	    "variant runs for --seconds (default 1), best of --trials "
	    "(default 3):\n"
	    "  app   the l4lb app (apps/l4lb) on one core, full NAT and "
	    "IP-in-IP, beside\n"
	    "        the DPDK peer (parse, rte_hash flow lookup, counter; "
	    "not with\n"
	    "        --no-peer or without DPDK); app-nat, app-ipip: one mode "
	    "only\n"
	    "  pipe  the same work as generic pipes (VIP match, Maglev HASH "
	    "pipe, CT,\n"
	    "        DNAT), one worker and --workers workers (default: "
	    "every core)\n"
	    "  pipe-nat  the app's full NAT as pipes: the ct pipe keeps the "
	    "backend and\n"
	    "        translates (DNAT from a backends table, SNAT from a "
	    "pool); beside\n"
	    "        the DPDK peer, then one worker and --workers workers\n"
	    "Use --target gpu (first option) for the GPU target.\n");
}

int bench_l4lb(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"flows", required_argument, NULL, 'f'},
	    {"backends", required_argument, NULL, 'b'},
	    {"maglev", required_argument, NULL, 'm'},
	    {"packets", required_argument, NULL, 'P'},
	    {"workers", required_argument, NULL, 'w'},
	    {"seconds", required_argument, NULL, 's'},
	    {"trials", required_argument, NULL, 't'},
	    {"seed", required_argument, NULL, 'r'},
	    {"variant", required_argument, NULL, 'V'},
	    {"burst", required_argument, NULL, 'B'},
	    {"no-peer", no_argument, NULL, 'n'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	/* burst 0: the variant's default */
	struct l4lb_params p = {1u << 20, 64, L4LB_MAGLEV_DEFAULT, 1, 0, 0}, pa;
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned workers = cores > 0 ? (unsigned)cores : 1, trials = 3;
	uint32_t packets = 0;
	double seconds = 1, pps, cpp;
	struct l4lb_cpu c;
	char variant[32];
	char *end;
	const char *which = "all";
	bool with_peer = true;
	int opt, li = 0, rc = 1;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", opts, &li)) != -1) {
		unsigned long long v;

		if (opt == 'h') {
			usage(stdout);
			return 0;
		}
		if (opt == '?') {
			usage(stderr);
			return 2;
		}
		if (opt == 'n') {
			with_peer = false;
			continue;
		}
		if (opt == 'V') {
			which = optarg;
			if (strcmp(which, "app") && strcmp(which, "app-nat") &&
			    strcmp(which, "app-ipip") &&
			    strcmp(which, "pipe") &&
			    strcmp(which, "pipe-nat") && strcmp(which, "all"))
				goto bad;
			continue;
		}
		if (opt == 's') {
			seconds = strtod(optarg, &end);
			if (*end || !(seconds > 0 && seconds < 3600))
				goto bad;
			continue;
		}
		v = strtoull(optarg, &end, 10);
		if (*end || (v == 0 && opt != 'r') || v > (1ull << 26))
			goto bad;
		if (opt == 'f')
			p.flows = (uint32_t)v;
		else if (opt == 'b')
			p.backends = (uint32_t)v;
		else if (opt == 'm')
			p.maglev = (uint32_t)v;
		else if (opt == 'P')
			packets = (uint32_t)v;
		else if (opt == 'w')
			workers = (unsigned)v;
		else if (opt == 'B' && v <= L4LB_BURST_MAX)
			p.burst = (uint32_t)v;
		else if (opt == 'B')
			goto bad;
		else if (opt == 't')
			trials = (unsigned)v;
		else
			p.seed = v;
	}
	if (!packets)
		packets = p.flows;
	if (packets < 64u * workers) {
		fprintf(stderr, "bench l4lb: at least 64 packets a worker\n");
		return 2;
	}
	memset(&c, 0, sizeof(c));
	/* the app as docs/apps/l4lb.md runs it: bursts of 64; the pipes
	 * as the runtime does by default */
	pa = p;
	if (!p.burst) {
		pa.burst = L4LB_APP_BURST;
		p.burst = L4LB_PIPE_BURST;
	}
	if (!strcmp(which, "pipe-nat") || !strcmp(which, "all")) {
		if (run_pipe_nat(&pa, packets, workers, seconds, trials,
				 with_peer))
			goto out;
		if (!strcmp(which, "pipe-nat")) {
			rc = 0;
			goto done;
		}
	}
	if (strcmp(which, "pipe")) {
		static const struct {
			uint8_t mode;
			const char *variant;
		} app[2] = {{L4LB_MODE_NAT, "app-nat-1core"},
			    {L4LB_MODE_IPIP, "app-ipip-1core"}};

		for (unsigned i = 0, shown = 0; i < 2; i++) {
			struct bench_best ob, pb;
			const char *peer;

			/* app-nat, app-ipip: that one only */
			if (strcmp(which, "app") && strcmp(which, "all") &&
			    strncmp(app[i].variant, which, strlen(which)))
				continue;
			if (bench_l4lb_app(&pa, packets, app[i].mode, seconds,
					   trials, with_peer, &ob, &pb, &peer))
				goto out;
			if (!shown++)
				bench_report_header();
			bench_report_best("l4lb", app[i].variant, &ob, peer,
					  &pb, 64);
		}
		if (strcmp(which, "all")) {
			rc = 0;
			goto done;
		}
	}
	if (l4lb_cpu_create(&c, &p, packets) || l4lb_cpu_check(&c))
		goto out;
	if (!strcmp(which, "pipe"))
		bench_report_header();
	pps = l4lb_cpu_run(&c, 1, seconds, trials, &cpp);
	report("pipe-cpu-1core", 1, pps, cpp);
	if (workers > 1) {
		snprintf(variant, sizeof(variant), "pipe-cpu-%ucores", workers);
		pps = l4lb_cpu_run(&c, workers, seconds, trials, &cpp);
		report(variant, workers, pps, cpp);
	}
	rc = 0;
done:
	printf("# %u flows, %u backends, Maglev %u slots, %u frames, bursts "
	       "of %u (app) and %u (pipe); the peer parses and looks the flow "
	       "up only (no rewrite, no state); published: Katran 5.2 Mpps "
	       "per core on XDP\n",
	       p.flows, p.backends, p.maglev, packets, pa.burst, p.burst);
out:
	l4lb_cpu_destroy(&c);
	return rc;
bad:
	fprintf(stderr, "bench l4lb: bad value '%s' for --%s\n", optarg,
		opts[li].name);
	return 2;
}
