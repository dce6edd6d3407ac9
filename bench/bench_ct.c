/*
 * `dpflow bench ct` (not registered yet: see docs/tables/monitor.md): the
 * connection-tracking table alone, one core, in memory.
 *
 * --flows distinct IPv4 5-tuples (UDP by default, --tcp for TCP) are
 * tracked in a table made for that many connections. Two workloads:
 *  - create: the first packet of every flow, in bursts of --burst through
 *    dpflow_ct_process_burst() into an empty table (each one creates a
 *    connection: canonical key, hash, lookup miss, bucket lock, claim,
 *    publish); the best of --trials fills;
 *  - established: a stream of --stream packets of those flows, random
 *    flows in random directions, through dpflow_ct_process_burst() (key,
 *    lookup, state machine, a control-word write when the millisecond or
 *    the state changes; the clock advances 1 us a burst); each trial runs
 *    --seconds, the best of --trials is reported. Every packet must hit.
 * --values gives every new connection a value block (backend and four
 * registers) and copies the connection's value for every packet
 * (dpflow_ct_track_burst with init blocks and value copies); --nat also
 * binds each new connection's source from a port pool (one address,
 * ports 1024-65535) and its destination to one of 64 backends, and half
 * of the established stream are replies to the translated tuple (found
 * through the connection's reply key). The peer runs with neither.
 * When built with DPDK, the peer is rte_hash (bench_ct_dpdk.c: CRC32
 * hash, entries = flows) on the same 40-byte canonical keys, prebuilt:
 * rte_hash_add_key_data() for create, rte_hash_lookup_bulk_data() over the
 * same stream for established. DPDK has no connection tracker; this is the
 * lookup a DPDK application builds one on, without the key ordering, the
 * state machine or concurrent creation that dpflow's figure includes.
 */
#include <arpa/inet.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/dpflow.h"
#include "flow/ct.h"

#include "bench.h"
#ifdef DPFLOW_HAVE_DPDK
#include "bench_dpdk.h"
#endif

/* Until the workload is registered in bench.h. */
int bench_ct(int argc, char **argv);

struct ct_opts {
	uint32_t flows;
	uint32_t stream;
	uint32_t burst;
	double seconds;
	unsigned trials;
	bool tcp;
	bool peer;
	uint64_t seed;
	bool values; /* init blocks and value copies */
	bool nat;    /* and NAT bindings, half the stream replies */
};

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Flow @f's packet, forward or reversed. */
static void flow_pkt(uint32_t f, bool rev, bool tcp, uint8_t flags,
		     struct dpflow_ct_pkt *p)
{
	uint32_t a = htonl(0x0a000000u + f), b = htonl(0xc0a80000u + (f & 255));
	uint16_t sp = (uint16_t)(1024 + (f >> 8) % 60000), dp = 443;

	memset(p, 0, sizeof(*p));
	memcpy(rev ? p->dst : p->src, &a, 4);
	memcpy(rev ? p->src : p->dst, &b, 4);
	p->sport = rev ? dp : sp;
	p->dport = rev ? sp : dp;
	p->proto = tcp ? 6 : 17;
	p->family = 4;
	p->tcp_flags = flags;
}

/* Flow @f's init block (--values, --nat). */
static void flow_init(uint32_t f, bool nat, struct dpflow_ct_value *v)
{
	uint32_t be = htonl(0x0aff0001u + f % 64);

	memset(v, 0, sizeof(*v));
	v->flags = DPFLOW_CT_VAL_BACKEND | DPFLOW_CT_VAL_REG(0) |
		   DPFLOW_CT_VAL_REG(1) | DPFLOW_CT_VAL_REG(2) |
		   DPFLOW_CT_VAL_REG(3);
	v->backend = f % 64;
	for (unsigned i = 0; i < 4; i++)
		v->reg[i] = f * 4 + i;
	if (nat) {
		v->flags |= DPFLOW_CT_VAL_SNAT | DPFLOW_CT_VAL_POOL |
			    DPFLOW_CT_VAL_DNAT;
		v->pool = 0;
		memcpy(v->nat_dst, &be, 4);
		v->nat_dport = 8080;
	}
}

/* The backend's reply to binding @v. */
static void reply_pkt(const struct dpflow_ct_value *v, bool tcp,
		      struct dpflow_ct_pkt *p)
{
	memset(p, 0, sizeof(*p));
	memcpy(p->src, v->nat_dst, 16);
	memcpy(p->dst, v->nat_src, 16);
	p->sport = v->nat_dport;
	p->dport = v->nat_sport;
	p->proto = tcp ? 6 : 17;
	p->family = 4;
	p->tcp_flags = DPFLOW_TCP_ACK;
}

/*
 * Create every flow's connection; the TSC ticks it took. With @init,
 * each gets its init block and @vals (one per flow) its value.
 */
static uint64_t fill(struct dpflow_ct_image *ct,
		     const struct dpflow_ct_pkt *first, uint32_t n,
		     uint32_t burst, struct dpflow_ct_result *res,
		     const struct dpflow_ct_value *const *init,
		     struct dpflow_ct_value *vals, uint32_t *created)
{
	uint64_t start = dpflow_tsc(), ticks;
	uint32_t made = 0;

	for (uint32_t i = 0; i < n; i += burst) {
		uint16_t m = (uint16_t)(n - i < burst ? n - i : burst);

		if (init)
			dpflow_ct_track_burst(ct, first + i, m, 1000000000ull,
					      NULL, init + i, res, vals + i);
		else
			dpflow_ct_process_burst(ct, first + i, m, 1000000000ull,
						NULL, res);
		for (uint16_t j = 0; j < m; j++)
			made += res[j].flags == DPFLOW_CT_R_NEW;
	}
	ticks = dpflow_tsc() - start;
	*created = made;
	return ticks;
}

static int run(const struct ct_opts *o)
{
	struct dpflow_ct_params prm;
	struct dpflow_error err = {0};
	struct dpflow_ct_pkt *first = NULL, *stream = NULL;
	struct dpflow_ct_result res[DPFLOW_BURST_MAX];
	struct dpflow_ct_value svals[DPFLOW_BURST_MAX];
	struct dpflow_ct_value *inits = NULL, *vals = NULL;
	const struct dpflow_ct_value **ip = NULL;
	struct dpflow_ct_image *ct = NULL;
	struct bench_result cr = {0}, est = {0};
	uint8_t *keys = NULL, *skeys = NULL;
	uint32_t *sflow = NULL;
	uint64_t s = o->seed;
	bool values = o->values || o->nat;
	size_t size;
	int rc = 1;

	dpflow_ct_params_default(&prm, o->flows);
	prm.seed = o->seed;
	if (o->nat) {
		uint32_t a = htonl(0xc6120001u); /* 198.18.0.1 */

		prm.flags |= DPFLOW_CT_F_NAT;
		prm.n_pools = 1;
		prm.pools[0].family = 4;
		prm.pools[0].n_addrs = 1;
		memcpy(prm.pools[0].addr[0], &a, 4);
		prm.pools[0].port_lo = 1024;
		prm.pools[0].port_hi = 65535;
	}
	size = dpflow_ct_image_size_params(&prm);
	ct = dpflow_ct_create(&prm, &err);
	first = calloc(o->flows, sizeof(*first));
	stream = calloc(o->stream, sizeof(*stream));
	sflow = calloc(o->stream, sizeof(*sflow));
	keys = calloc(o->flows, sizeof(struct dpflow_ct_key));
	skeys = calloc(o->stream, sizeof(struct dpflow_ct_key));
	if (values) {
		inits = calloc(o->flows, sizeof(*inits));
		vals = calloc(o->flows, sizeof(*vals));
		ip = calloc(o->flows, sizeof(*ip));
	}
	if (!ct || !first || !stream || !sflow || !keys || !skeys ||
	    (values && (!inits || !vals || !ip))) {
		fprintf(stderr, "bench ct: out of memory %s\n", err.msg);
		goto out;
	}
	for (uint32_t f = 0; f < o->flows; f++) {
		flow_pkt(f, false, o->tcp, DPFLOW_TCP_SYN, &first[f]);
		dpflow_ct_key_make(&first[f], (struct dpflow_ct_key *)keys + f);
		if (values) {
			flow_init(f, o->nat, &inits[f]);
			ip[f] = &inits[f];
		}
	}
	for (uint32_t i = 0; i < o->stream; i++) {
		uint32_t f = (uint32_t)(rng_next(&s) % o->flows);

		sflow[i] = f;
		flow_pkt(f, rng_next(&s) & 1, o->tcp, DPFLOW_TCP_ACK,
			 &stream[i]);
		dpflow_ct_key_make(&stream[i],
				   (struct dpflow_ct_key *)skeys + i);
	}

	/* create: the best of the fills, each into an empty image */
	for (unsigned t = 0; t < o->trials; t++) {
		uint32_t made;
		uint64_t ticks;

		if (dpflow_ct_image_init(ct, size, &prm, &err)) {
			fprintf(stderr, "bench ct: %s\n", err.msg);
			goto out;
		}
		ticks =
		    fill(ct, first, o->flows, o->burst, res, ip, vals, &made);
		if (made != o->flows) {
			fprintf(stderr, "bench ct: %u of %u flows created\n",
				made, o->flows);
			goto out;
		}
		if (!cr.pkts || ticks < cr.tsc_cycles) {
			cr.pkts = o->flows;
			cr.tsc_cycles = ticks;
		}
	}

	/* --nat: the reverse half of the stream answers the bindings */
	for (uint32_t i = 0; o->nat && i < o->stream; i++)
		if (stream[i].sport == 443)
			reply_pkt(&vals[sflow[i]], o->tcp, &stream[i]);

	/* established: the stream over the full table */
	for (unsigned t = 0; t < o->trials; t++) {
		uint64_t budget =
		    (uint64_t)(o->seconds * (double)dpflow_tsc_hz());
		uint64_t start = dpflow_tsc(), now = start, pkts = 0, miss = 0;
		uint64_t clock_ns = 2000000000ull;
		uint32_t pos = 0;

		while (now - start < budget) {
			for (unsigned r = 0; r < 16; r++) {
				if (values)
					dpflow_ct_track_burst(
					    ct, stream + pos,
					    (uint16_t)o->burst, clock_ns, NULL,
					    NULL, res, svals);
				else
					dpflow_ct_process_burst(
					    ct, stream + pos,
					    (uint16_t)o->burst, clock_ns, NULL,
					    res);
				for (uint32_t j = 0; j < o->burst; j++)
					miss +=
					    res[j].conn == DPFLOW_TABLE_MISS;
				clock_ns += 1000;
				pos += o->burst;
				if (pos + o->burst > o->stream)
					pos = 0;
			}
			pkts += 16 * (uint64_t)o->burst;
			now = dpflow_tsc();
		}
		if (miss) {
			fprintf(stderr, "bench ct: %lu misses\n",
				(unsigned long)miss);
			goto out;
		}
		if (!est.pkts ||
		    (double)(now - start) / (double)pkts <
			(double)est.tsc_cycles / (double)est.pkts) {
			est.pkts = pkts;
			est.tsc_cycles = now - start;
		}
	}

#ifdef DPFLOW_HAVE_DPDK
	if (o->peer && o->burst <= 64 && !values) {
		double ins_s = 0, peer_best = 0;
		struct bench_dpdk_ct *e = bench_dpdk_ct_create(
		    keys, o->flows, sizeof(struct dpflow_ct_key), o->trials,
		    &ins_s);

		if (e && ins_s > 0) {
			cr.peer = "dpdk-rte_hash_add";
			cr.peer_mpps = (double)o->flows / ins_s / 1e6;
			for (unsigned t = 0; t < o->trials; t++) {
				uint64_t lookups = 0, hits = 0;
				uint64_t ticks = bench_dpdk_ct_run(
				    e, skeys, o->stream, o->burst, o->seconds,
				    &lookups, &hits);
				double mpps =
				    (double)lookups /
				    ((double)ticks / (double)dpflow_tsc_hz()) /
				    1e6;

				if (hits != lookups) {
					fprintf(stderr, "bench ct: rte_hash "
							"missed keys\n");
					break;
				}
				if (mpps > peer_best)
					peer_best = mpps;
			}
			if (peer_best > 0) {
				est.peer = "dpdk-rte_hash_lookup";
				est.peer_mpps = peer_best;
			}
		}
		bench_dpdk_ct_destroy(e);
	}
#endif
	cr.workload = est.workload = "ct";
	cr.variant = o->nat ? (o->tcp ? "create-tcp-nat" : "create-udp-nat")
		     : o->values
			 ? (o->tcp ? "create-tcp-values" : "create-udp-values")
		     : o->tcp ? "create-tcp"
			      : "create-udp";
	est.variant =
	    o->nat ? (o->tcp ? "established-tcp-nat" : "established-udp-nat")
	    : o->values
		? (o->tcp ? "established-tcp-values" : "established-udp-values")
	    : o->tcp ? "established-tcp"
		     : "established-udp";
	cr.seconds = (double)cr.tsc_cycles / (double)dpflow_tsc_hz();
	est.seconds = (double)est.tsc_cycles / (double)dpflow_tsc_hz();
	bench_report_header();
	bench_report(&cr);
	bench_report(&est);
	rc = 0;
out:
	free(ip);
	free(vals);
	free(inits);
	free(sflow);
	free(skeys);
	free(keys);
	free(stream);
	free(first);
	dpflow_ct_destroy(ct);
	return rc;
}

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: dpflow bench ct [--flows N] [--stream N] [--burst N]\n"
	    "                       [--seconds S] [--trials N] [--tcp]\n"
	    "                       [--seed N] [--no-peer] [--values] "
	    "[--nat]\n"
	    "\n"
	    "Connection tracking on this core: create --flows connections,\n"
	    "then track a stream of packets of them. Best of the trials.\n"
	    "  --flows N    connections (default 1000000)\n"
	    "  --stream N   packets in the established stream (default "
	    "1048576)\n"
	    "  --burst N    packets per dpflow_ct_process_burst call "
	    "(default 32;\n"
	    "               the peer needs <= 64)\n"
	    "  --seconds S  length of one established trial (default "
	    "0.5)\n"
	    "  --trials N   trials per workload (default 5)\n"
	    "  --tcp        TCP flows (SYN, then ACKs) instead of UDP\n"
	    "  --seed N     flow order and hash seed (default 1)\n"
	    "  --no-peer    skip the DPDK rte_hash peer\n"
	    "  --values     value blocks: set at create, copied for every\n"
	    "               packet (no peer)\n"
	    "  --nat        --values with a NAT binding per connection\n"
	    "               (pool and 64 backends); half the stream are\n"
	    "               replies to the bindings (no peer)\n");
}

int bench_ct(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"flows", required_argument, NULL, 'f'},
	    {"stream", required_argument, NULL, 'S'},
	    {"burst", required_argument, NULL, 'b'},
	    {"seconds", required_argument, NULL, 's'},
	    {"trials", required_argument, NULL, 't'},
	    {"seed", required_argument, NULL, 'r'},
	    {"tcp", no_argument, NULL, 'T'},
	    {"no-peer", no_argument, NULL, 'n'},
	    {"values", no_argument, NULL, 'V'},
	    {"nat", no_argument, NULL, 'N'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct ct_opts o = {1000000, 1u << 20, 32, 0.5,	  5,
			    false,   true,     1,  false, false};
	char *end;
	int c, li = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, &li)) != -1) {
		unsigned long v;

		if (c == 'h') {
			usage(stdout);
			return 0;
		}
		if (c == '?') {
			usage(stderr);
			return 2;
		}
		if (c == 'n' || c == 'T' || c == 'V' || c == 'N') {
			if (c == 'n')
				o.peer = false;
			else if (c == 'T')
				o.tcp = true;
			else if (c == 'V')
				o.values = true;
			else
				o.nat = true;
			continue;
		}
		if (c == 's') {
			o.seconds = strtod(optarg, &end);
			if (*end || !(o.seconds > 0 && o.seconds < 3600))
				goto bad;
			continue;
		}
		v = strtoul(optarg, &end, 10);
		if (*end || (v == 0 && c != 'r'))
			goto bad;
		if (c == 'f' && v <= DPFLOW_CT_CAPACITY_MAX)
			o.flows = (uint32_t)v;
		else if (c == 'S' && v <= (1u << 26))
			o.stream = (uint32_t)v;
		else if (c == 'b' && v <= DPFLOW_BURST_MAX)
			o.burst = (uint32_t)v;
		else if (c == 't' && v <= 1000)
			o.trials = (unsigned)v;
		else if (c == 'r')
			o.seed = v;
		else
			goto bad;
	}
	if (o.burst > o.stream) {
		fprintf(stderr, "bench ct: --burst must be <= --stream\n");
		return 2;
	}
	return run(&o) ? 1 : 0;
bad:
	fprintf(stderr, "bench ct: bad value '%s' for --%s\n", optarg,
		opts[li].name);
	return 2;
}
