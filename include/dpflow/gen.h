/*
 * Test traffic: a packet builder and a seeded generator of profiles.
 *
 * dpflow_gen_build() writes one packet from a spec (every header dpflow
 * parses, checksums correct). A generator draws packets from a profile
 * (flow count, sizes, protocol mix, IPv4/IPv6, VLAN, tunnels, fragments)
 * with a fixed seed, so the same profile always gives the same bytes. In
 * malformed mode it writes truncated and corrupted variants and says, for
 * each, which drop reason the parser must give.
 * A generator is used by one thread; the builder is reentrant.
 */
#ifndef DPFLOW_GEN_H
#define DPFLOW_GEN_H

#include <stdbool.h>
#include <stdint.h>

#include "dpflow/error.h"
#include "dpflow/meta.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One IP packet (with optional L2), the unit of dpflow_gen_build(). */
struct dpflow_gen_l3 {
	uint8_t l3_type;	  /* DPFLOW_L3_IPV4 or DPFLOW_L3_IPV6 */
	uint8_t l4_type;	  /* DPFLOW_L4_TCP/UDP/ICMP/ICMPV6/SCTP/NONE */
	uint8_t src[16], dst[16]; /* network order; IPv4 in the first 4 */
	uint16_t sport, dport;	  /* ICMP: type, code */
	uint8_t ttl, tos, tcp_flags;
	uint8_t ipv4_opt_len; /* bytes of IPv4 options (multiple of 4, <=40) */
	uint8_t ipv6_ext[4];  /* IPv6 extension headers in order (0, 43, 44,
				 60), terminated by 0xff or the array end */
	uint8_t frag;	      /* enum dpflow_frag: build a fragment */
	uint16_t frag_off;    /* in 8-byte units, for DPFLOW_FRAG_LATER */
	uint16_t payload_len; /* L4 payload bytes (pattern filled) */
	/* Extension (gen.md): values of fields the builder would otherwise
	 * leave 0. */
	uint32_t ip_id; /* IPv4 identification (low 16 bits), IPv6
			   fragment identification */
	uint32_t tcp_seq, tcp_ack;
	uint16_t icmp_id, icmp_seq; /* echo identifier and sequence */
};

struct dpflow_gen_spec {
	bool has_eth; /* false: the packet starts at the IP header */
	uint8_t src_mac[6], dst_mac[6];
	uint8_t n_vlan; /* 0..2; vlan[0] outermost (0x88a8 when 2 tags) */
	uint16_t vlan[2];
	uint8_t tun_type; /* enum dpflow_tun_type: DPFLOW_TUN_NONE: no tunnel */
	uint32_t tun_id;  /* VNI / GRE key */
	bool gre_key, gre_seq, gre_csum;
	uint8_t geneve_opt_len; /* option bytes (multiple of 4) */
	bool inner_eth;		/* GENEVE/GRE: inner Ethernet (else inner IP) */
	struct dpflow_gen_l3 outer;
	struct dpflow_gen_l3 inner; /* when tun_type != NONE */
	/* Extension (gen.md): */
	uint8_t inner_src_mac[6], inner_dst_mac[6]; /* VXLAN, or inner_eth */
	uint32_t gre_seqno; /* GRE sequence number, when gre_seq */
	uint16_t frame_len; /* zero-pad the frame up to this length (Ethernet
			       padding after the datagram); 0: no padding */
};

/*
 * Write the packet described by @spec into @buf (@cap bytes). Returns its
 * length, or 0 if it does not fit in @cap or the spec is invalid.
 *
 * Rules (docs/gen.md has the full list): a tunnel's outer header types are
 * the builder's (UDP to 4789/6081 from outer.sport, GRE, IP protocol 4/41)
 * and outer.l4_type is ignored; VXLAN always carries inner Ethernet. An
 * IPv6 fragment (frag != NONE) gets a fragment header after the listed
 * extension headers unless 44 is listed. A first fragment's L4 length and
 * checksum cover the bytes it carries; a later fragment carries
 * payload_len pattern bytes and no L4 header (nor the extension headers
 * listed after 44). IPv4 ICMP and IPv6 ICMPv6 only.
 */
uint32_t dpflow_gen_build(const struct dpflow_gen_spec *spec, uint8_t *buf,
			  uint32_t cap);

struct dpflow_gen_profile {
	uint64_t count; /* packets, default 1000 */
	uint32_t flows; /* distinct flows, default 16 */
	uint16_t size;	/* frame bytes (no FCS); 0 = IMIX 64/576/1500 7:4:1 */
	uint8_t pct_tcp, pct_udp, pct_icmp, pct_sctp; /* sum to 100 */
	uint8_t pct_ipv6;
	uint16_t vlan; /* 802.1Q id, 0 = untagged */
	uint16_t qinq; /* 802.1ad outer id, 0 = none (needs vlan) */
	uint8_t pct_vxlan, pct_geneve, pct_gre, pct_ipip; /* sum <= 100 */
	uint8_t pct_frag;     /* share of packets built as fragments */
	uint8_t pct_ipv4_opt; /* share of IPv4 headers with options */
	uint8_t pct_ipv6_ext; /* share of IPv6 headers with ext headers */
	uint64_t seed;
	bool malformed;
	/* Extension (gen.md): */
	uint8_t pct_vlan; /* share of flows tagged when vlan is set (100) */
	uint8_t pct_qinq; /* share of tagged flows also given the outer
			     802.1ad tag when qinq is set (100) */
};

/*
 * Named profiles: "default" (TCP/UDP/ICMP IPv4, 64 B), "all" (every
 * protocol, tunnel and option dpflow parses), "imix", "vxlan".
 * Returns 0 or -EINVAL with @err naming the profile.
 */
int dpflow_gen_profile_init(struct dpflow_gen_profile *p, const char *name,
			    struct dpflow_error *err);

/*
 * Set one profile key from text, as `dpflow gen` options: count, flows,
 * size (N or "imix"), mix ("tcp:60,udp:30,icmp:10,sctp:0"), ipv6, vlan
 * and qinq ("ID" or "ID:PCT", PCT the share of flows tagged), tunnel
 * ("vxlan:25,geneve:25,gre:25,ipip:25"), frag, ipv4-opt, ipv6-ext, seed,
 * malformed ("0"/"1"). Returns 0 or -EINVAL with @err naming the key and
 * value. Checks that span keys (qinq needs vlan) are made by
 * dpflow_gen_create().
 */
int dpflow_gen_profile_set(struct dpflow_gen_profile *p, const char *key,
			   const char *value, struct dpflow_error *err);

struct dpflow_gen;

struct dpflow_gen *dpflow_gen_create(const struct dpflow_gen_profile *p,
				     struct dpflow_error *err);
void dpflow_gen_destroy(struct dpflow_gen *g);

/* What the generator meant a packet to be. */
struct dpflow_gen_info {
	uint32_t flow;	     /* flow number, 0..flows-1 */
	int expect_drop;     /* DPFLOW_DROP_* the parser must give; -1: any */
	const char *variant; /* malformed variant name, or "ok" */
	/* Extension (gen.md): the spec the packet was built from (for a
	 * malformed variant, the valid packet before its defect). */
	struct dpflow_gen_spec spec;
};

/*
 * Build the next packet into @buf (@cap bytes). Returns its length, 0 once
 * the profile's count is reached (or if @cap is too small). @info may be
 * NULL. Timestamps are the caller's: packet i is usually stamped i us.
 */
uint32_t dpflow_gen_next(struct dpflow_gen *g, uint8_t *buf, uint32_t cap,
			 struct dpflow_gen_info *info);

#ifdef __cplusplus
}
#endif

#endif /* DPFLOW_GEN_H */
