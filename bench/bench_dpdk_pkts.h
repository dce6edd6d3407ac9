/*
 * DPDK-side view of the frames of the pipe-level peers (bench_dpdk.h's
 * struct bench_dpdk_pkts) and the parse-and-extract step they share:
 * rte_net_get_ptype(), then the IPv4 5-tuple read at the header offsets it
 * returns. Included by the bench_*_dpdk.c files only (DPDK's flags stay
 * out of dpflow's code). Bench thread only.
 */
#ifndef DPFLOW_BENCH_DPDK_PKTS_H
#define DPFLOW_BENCH_DPDK_PKTS_H

#include <stdint.h>
#include <string.h>

#include <rte_byteorder.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_net.h>
#include <rte_prefetch.h>

#include "bench_dpdk.h"

struct bench_dpdk_pkts {
	struct rte_mempool *mp;
	struct rte_mbuf **m;
	uint32_t n;
};

/* Packets prefetched ahead of the parse. */
#define BENCH_DPDK_PREFETCH 4

/* An IPv4 5-tuple as read from a packet: network byte order. */
struct bench_dpdk_5tuple {
	uint32_t src, dst;
	uint16_t sport, dport;
	uint8_t proto;
};

static inline void bench_dpdk_prefetch(struct rte_mbuf *const *m, uint32_t i,
				       uint32_t end)
{
	if (i + BENCH_DPDK_PREFETCH < end)
		rte_prefetch0(
		    rte_pktmbuf_mtod(m[i + BENCH_DPDK_PREFETCH], const void *));
}

/*
 * Parse @m and read its IPv4 5-tuple into @t. Returns 0, or -1 for a
 * packet that is not IPv4 (@t zeroed).
 */
static inline int bench_dpdk_5tuple(struct rte_mbuf *m,
				    struct bench_dpdk_5tuple *t)
{
	struct rte_net_hdr_lens hl;
	uint32_t pt = rte_net_get_ptype(m, &hl, RTE_PTYPE_ALL_MASK);
	const uint8_t *p = rte_pktmbuf_mtod(m, const uint8_t *);
	const struct rte_ipv4_hdr *ip;

	if (!RTE_ETH_IS_IPV4_HDR(pt)) {
		memset(t, 0, sizeof(*t));
		return -1;
	}
	ip = (const struct rte_ipv4_hdr *)(p + hl.l2_len);
	t->src = ip->src_addr;
	t->dst = ip->dst_addr;
	t->proto = ip->next_proto_id;
	if ((pt & RTE_PTYPE_L4_MASK) == RTE_PTYPE_L4_TCP ||
	    (pt & RTE_PTYPE_L4_MASK) == RTE_PTYPE_L4_UDP) {
		const uint16_t *ports =
		    (const uint16_t *)(p + hl.l2_len + hl.l3_len);

		t->sport = ports[0];
		t->dport = ports[1];
	} else {
		t->sport = t->dport = 0;
	}
	return 0;
}

#endif /* DPFLOW_BENCH_DPDK_PKTS_H */
