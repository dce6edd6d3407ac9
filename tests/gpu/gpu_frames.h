/*
 * Random frames for the GPU differential tests (test_gpu_flow.c,
 * test_gpu_pipeline.c): Ethernet with 0-2 VLAN tags, IPv4 or IPv6, TCP,
 * UDP, ICMP or none, sometimes tunnelled, sometimes malformed, drawn from
 * a splitmix64 stream. The including file defines GPU_FRAMES_SEED (its
 * default seed) before including; rng_state may be reseeded from main.
 */
#ifndef DPFLOW_TESTS_GPU_FRAMES_H
#define DPFLOW_TESTS_GPU_FRAMES_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "dpflow/dpflow.h"

static uint64_t rng_state = GPU_FRAMES_SEED;

static uint32_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return (uint32_t)(z ^ (z >> 31));
}

static const uint16_t port_pool[] = {53,   80,	 443,  1000, 1001,
				     1002, 1003, 4000, 7000, 8080};

static void rand_l3(struct dpflow_gen_l3 *l, bool v6)
{
	uint32_t r = rnd();

	memset(l, 0, sizeof(*l));
	l->l3_type = v6 ? DPFLOW_L3_IPV6 : DPFLOW_L3_IPV4;
	switch (r % 8) {
	case 0:
	case 1:
	case 2:
		l->l4_type = DPFLOW_L4_TCP;
		break;
	case 3:
	case 4:
	case 5:
		l->l4_type = DPFLOW_L4_UDP;
		break;
	case 6:
		l->l4_type = v6 ? DPFLOW_L4_ICMPV6 : DPFLOW_L4_ICMP;
		break;
	default:
		l->l4_type = rnd() % 2 ? DPFLOW_L4_SCTP : DPFLOW_L4_NONE;
		break;
	}
	if (v6) {
		l->src[0] = 0xfd;
		l->src[1] = (uint8_t)(rnd() % 3);
		l->src[15] = (uint8_t)rnd();
		l->dst[0] = 0xfd;
		l->dst[1] = (uint8_t)(rnd() % 3);
		l->dst[2] = (uint8_t)(rnd() % 2);
		l->dst[15] = (uint8_t)rnd();
	} else {
		l->src[0] = 10;
		l->src[1] = (uint8_t)(rnd() % 4);
		l->src[2] = (uint8_t)(rnd() % 4);
		l->src[3] = (uint8_t)rnd();
		l->dst[0] = rnd() % 4 ? 10 : 192;
		l->dst[1] = (uint8_t)(rnd() % 4);
		l->dst[2] = (uint8_t)(rnd() % 4);
		l->dst[3] = (uint8_t)rnd();
	}
	l->sport = rnd() % 2 ? port_pool[rnd() % 10] : (uint16_t)rnd();
	l->dport = rnd() % 4 ? port_pool[rnd() % 10] : (uint16_t)rnd();
	if (l->l4_type == DPFLOW_L4_ICMP || l->l4_type == DPFLOW_L4_ICMPV6) {
		l->sport = rnd() % 2 ? 8 : (uint16_t)(rnd() % 256);
		l->dport = 0;
		l->icmp_id = (uint16_t)rnd();
	}
	l->ttl = (uint8_t)(rnd() % 8 == 0 ? rnd() % 3 : 64);
	l->tos = (uint8_t)rnd();
	l->tcp_flags = (uint8_t)rnd();
	l->payload_len = (uint16_t)(rnd() % 4 ? rnd() % 200 : rnd() % 1400);
	if (!v6 && rnd() % 16 == 0)
		l->ipv4_opt_len = 4;
	if (rnd() % 32 == 0) {
		l->frag = (uint8_t)(1 + rnd() % 2);
		l->frag_off = (uint16_t)(1 + rnd() % 100);
	}
	l->ip_id = rnd();
	l->tcp_seq = rnd();
}

/* A random frame into @buf; returns its length (0: try again). */
static uint32_t rand_frame(uint8_t *buf, uint32_t cap)
{
	struct dpflow_gen_spec s;
	uint32_t len, r = rnd();

	memset(&s, 0, sizeof(s));
	s.has_eth = r % 32 != 0;
	for (int i = 0; i < 6; i++) {
		s.src_mac[i] = (uint8_t)rnd();
		s.dst_mac[i] = (uint8_t)rnd();
		s.inner_src_mac[i] = (uint8_t)rnd();
		s.inner_dst_mac[i] = (uint8_t)rnd();
	}
	s.src_mac[0] &= 0xfe;
	if (s.has_eth) {
		s.n_vlan = (uint8_t)(rnd() % 4 == 0 ? 1 + rnd() % 2 : 0);
		s.vlan[0] = (uint16_t)(rnd() % 8);
		s.vlan[1] = (uint16_t)(rnd() % 4096);
	}
	switch (rnd() % 10) {
	case 0:
		s.tun_type = DPFLOW_TUN_VXLAN;
		break;
	case 1:
		s.tun_type = DPFLOW_TUN_GENEVE;
		s.inner_eth = rnd() % 2;
		s.geneve_opt_len = (uint8_t)(rnd() % 2 ? 0 : 8);
		break;
	case 2:
		s.tun_type = DPFLOW_TUN_GRE;
		s.inner_eth = rnd() % 2;
		s.gre_key = rnd() % 2;
		s.gre_seq = rnd() % 4 == 0;
		break;
	case 3:
		s.tun_type = DPFLOW_TUN_IPIP;
		break;
	default:
		s.tun_type = DPFLOW_TUN_NONE;
		break;
	}
	s.tun_id = rnd() % 4;
	rand_l3(&s.outer, rnd() % 3 == 0);
	if (s.tun_type) {
		rand_l3(&s.inner, rnd() % 3 == 0);
		s.outer.frag = 0;
		s.outer.payload_len = 0;
	}
	if (rnd() % 8 == 0)
		s.frame_len = (uint16_t)(60 + rnd() % 40);
	len = dpflow_gen_build(&s, buf, cap);
	if (!len)
		return 0;
	/* malformed: truncated, or one byte corrupted */
	r = rnd() % 100;
	if (r < 4)
		len = rnd() % len;
	else if (r < 8)
		buf[rnd() % len] = (uint8_t)rnd();
	return len ? len : 1;
}

#endif /* DPFLOW_TESTS_GPU_FRAMES_H */
