/*
 * `dpflow bench parse`: the parser alone, one core, packets in memory.
 *
 * Two packet sets, each of --packets frames in a pool: Ethernet/IPv4/TCP
 * 64-byte frames over --flows flows, and the same frames inside VXLAN
 * (Ethernet/IPv4/UDP/VXLAN outer, 114 bytes). Bursts of --burst packets go
 * through dpflow_parse_burst() until --seconds have passed; the best of
 * --trials runs is reported (TSC cycles per packet, Mpps). When dpflow is
 * built with DPDK, the same frames go through rte_net_get_ptype() in the
 * same run as the peer (bench_parse_dpdk.c).
 */
#include <arpa/inet.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/dpflow.h"

#include "bench.h"
#ifdef DPFLOW_HAVE_DPDK
#include "bench_dpdk.h"
#endif

struct parse_opts {
	uint32_t packets;
	uint32_t flows;
	uint32_t burst;
	double seconds;
	unsigned trials;
	bool peer; /* run the DPDK peer when built with it */
};

static void fill_spec(struct dpflow_gen_spec *s, uint32_t flow, bool vxlan)
{
	struct dpflow_gen_l3 *l = vxlan ? &s->inner : &s->outer;
	uint32_t src = htonl(0x0a000000u | flow), dst = htonl(0xc0a80001u);

	memset(s, 0, sizeof(*s));
	s->has_eth = true;
	s->inner_eth = true;
	memset(s->dst_mac, 0x02, 6);
	memset(s->src_mac, 0x04, 6);
	l->l3_type = DPFLOW_L3_IPV4;
	l->l4_type = DPFLOW_L4_TCP;
	memcpy(l->src, &src, 4);
	memcpy(l->dst, &dst, 4);
	l->sport = (uint16_t)(1024 + flow % 60000);
	l->dport = 80;
	l->ttl = 64;
	l->tcp_flags = 0x10;
	l->payload_len = 10; /* 14 + 20 + 20 + 10 = 64 bytes */
	memset(l->ipv6_ext, 0xff, sizeof(l->ipv6_ext));
	if (vxlan) {
		uint32_t osrc = htonl(0xac100001u), odst = htonl(0xac100002u);

		s->tun_type = DPFLOW_TUN_VXLAN;
		s->tun_id = 100 + flow % 16;
		s->outer.l3_type = DPFLOW_L3_IPV4;
		s->outer.l4_type = DPFLOW_L4_UDP;
		memcpy(s->outer.src, &osrc, 4);
		memcpy(s->outer.dst, &odst, 4);
		s->outer.sport = (uint16_t)(49152 + flow % 16384);
		s->outer.dport = 4789;
		s->outer.ttl = 64;
		memset(s->outer.ipv6_ext, 0xff, sizeof(s->outer.ipv6_ext));
	}
}

static int run_set(const struct parse_opts *o, bool vxlan)
{
	struct dpflow_pool_params pp = {.name = "bench", .n_slots = o->packets};
	struct dpflow_error err = {0};
	struct dpflow_pool *pool = dpflow_pool_create(&pp, &err);
	struct bench_result best = {0};
	uint32_t *idx = NULL;
	uint64_t bytes = 0;
	int rc = 1;

	if (!pool) {
		fprintf(stderr, "bench parse: %s\n", err.msg);
		return 1;
	}
	idx = calloc(o->packets, sizeof(*idx));
	if (!idx || dpflow_pool_alloc_bulk(pool, idx, o->packets)) {
		fprintf(stderr, "bench parse: out of memory\n");
		goto out;
	}
	for (uint32_t i = 0; i < o->packets; i++) {
		struct dpflow_gen_spec s;
		struct dpflow_pkt_meta *m = dpflow_pool_meta(pool, idx[i]);
		uint32_t len;

		fill_spec(&s, i % o->flows, vxlan);
		len = dpflow_gen_build(&s, dpflow_pkt_data(pool, idx[i]),
				       pool->data_room);
		if (!len) {
			fprintf(stderr, "bench parse: cannot build packet\n");
			goto out;
		}
		m->data_len = (uint16_t)len;
		bytes += len;
	}
	/* every packet must parse cleanly, or the figure means nothing */
	if (dpflow_parse_burst(
		pool, idx, (uint16_t)(o->packets < 256 ? o->packets : 256)) !=
	    (o->packets < 256 ? o->packets : 256)) {
		fprintf(stderr, "bench parse: test packets do not parse\n");
		goto out;
	}

	for (unsigned t = 0; t < o->trials; t++) {
		uint64_t budget =
		    (uint64_t)(o->seconds * (double)dpflow_tsc_hz());
		uint64_t start = dpflow_tsc(), now = start, pkts = 0;
		uint64_t ok = 0;

		while (now - start < budget) {
			for (uint32_t b = 0; b + o->burst <= o->packets;
			     b += o->burst)
				ok += dpflow_parse_burst(pool, idx + b,
							 (uint16_t)o->burst);
			pkts += o->packets - o->packets % o->burst;
			now = dpflow_tsc();
		}
		if (ok != pkts) {
			fprintf(stderr, "bench parse: %lu of %lu dropped\n",
				(unsigned long)(pkts - ok),
				(unsigned long)pkts);
			goto out;
		}
		if (!best.pkts ||
		    (double)(now - start) / (double)pkts <
			(double)best.tsc_cycles / (double)best.pkts) {
			best.pkts = pkts;
			best.tsc_cycles = now - start;
		}
	}
#ifdef DPFLOW_HAVE_DPDK
	if (o->peer) {
		const uint8_t **frames = calloc(o->packets, sizeof(*frames));
		uint16_t *lens = calloc(o->packets, sizeof(*lens));

		for (uint32_t i = 0; frames && lens && i < o->packets; i++) {
			frames[i] = dpflow_pkt_data(pool, idx[i]);
			lens[i] = dpflow_pool_meta(pool, idx[i])->data_len;
		}
		if (frames && lens &&
		    bench_dpdk_parse(frames, lens, o->packets, o->seconds,
				     o->trials, &best.peer_mpps) == 0)
			best.peer = "dpdk-rte_net_get_ptype";
		free(frames);
		free(lens);
	}
#endif
	best.workload = "parse";
	best.variant = vxlan ? "vxlan-64B" : "eth-ipv4-tcp-64B";
	best.seconds = (double)best.tsc_cycles / (double)dpflow_tsc_hz();
	best.bytes = best.pkts * (bytes / o->packets);
	bench_report(&best);
	rc = 0;
out:
	if (idx && rc == 0)
		dpflow_pool_free_bulk(pool, idx, o->packets);
	free(idx);
	dpflow_pool_destroy(pool);
	return rc;
}

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: dpflow bench parse [--packets N] [--flows N] [--burst N]\n"
	    "                          [--seconds S] [--trials N]\n"
	    "\n"
	    "Parse 64-byte Ethernet/IPv4/TCP frames and the same frames in\n"
	    "VXLAN, in memory, on this core. Reports the best of the trials.\n"
	    "  --packets N  frames per set, in one pool (default 4096)\n"
	    "  --flows N    distinct flows (default 1024)\n"
	    "  --burst N    packets per dpflow_parse_burst call (default 32)\n"
	    "  --seconds S  length of one trial (default 0.5)\n"
	    "  --trials N   trials per set (default 5)\n"
	    "  --no-peer    skip the DPDK rte_net_get_ptype() peer\n");
}

int bench_parse(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"packets", required_argument, NULL, 'p'},
	    {"flows", required_argument, NULL, 'f'},
	    {"burst", required_argument, NULL, 'b'},
	    {"seconds", required_argument, NULL, 's'},
	    {"trials", required_argument, NULL, 't'},
	    {"no-peer", no_argument, NULL, 'n'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct parse_opts o = {4096, 1024, 32, 0.5, 5, true};
	char *end;
	int c, li = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, &li)) != -1) {
		unsigned long v = 0;

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
		if (c == 's') {
			o.seconds = strtod(optarg, &end);
			if (*end || !(o.seconds > 0 && o.seconds < 3600))
				goto bad;
			continue;
		}
		v = strtoul(optarg, &end, 10);
		if (*end || v == 0 || v > (1u << 24))
			goto bad;
		if (c == 'p')
			o.packets = (uint32_t)v;
		else if (c == 'f')
			o.flows = (uint32_t)v;
		else if (c == 'b')
			o.burst = (uint32_t)v;
		else
			o.trials = (unsigned)v;
	}
	if (o.burst > DPFLOW_BURST_MAX || o.burst > o.packets) {
		fprintf(stderr,
			"bench parse: --burst must be <= %u and <= "
			"--packets\n",
			DPFLOW_BURST_MAX);
		return 2;
	}
	bench_report_header();
	if (run_set(&o, false) || run_set(&o, true))
		return 1;
	return 0;
bad:
	fprintf(stderr, "bench parse: bad value '%s' for --%s\n", optarg,
		opts[li].name);
	return 2;
}
