/*
 * Per-packet metadata and drop reasons.
 *
 * struct dpflow_pkt_meta sits at the start of every pool slot (pool.h) and
 * is three cache lines: buffer and pipeline state, then the outer headers,
 * then the inner headers of a tunnelled packet. The parser (parse.h) fills
 * the header lines; ports fill the buffer fields. Everything here is plain
 * data, laid out identically for the CPU and the GPU targets.
 *
 * Fields of a header set (struct dpflow_hdr) are defined only as far as its
 * types say: addresses when l3_type is IPv4/IPv6, ports when l4_type carries
 * them; `inner` only when meta->tun_type is not DPFLOW_TUN_NONE.
 * All multi-byte fields are in host byte order except addresses, which are
 * kept in network order as on the wire.
 */
#ifndef DPFLOW_META_H
#define DPFLOW_META_H

#include "dpflow/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Every reason a packet can be dropped, from every module, in one list:
 * the enum and its strings are generated from it. Names are stable: they
 * appear in counters, `dpflow inspect` and metrics.
 */
#define DPFLOW_FOREACH_DROP(_)                           \
	_(NONE, "none")                                  \
	_(ETH_TRUNC, "eth_truncated")                    \
	_(VLAN_TRUNC, "vlan_truncated")                  \
	_(VLAN_TOO_MANY, "vlan_too_many_tags")           \
	_(IPV4_TRUNC, "ipv4_truncated")                  \
	_(IPV4_BAD_VERSION, "ipv4_bad_version")          \
	_(IPV4_BAD_IHL, "ipv4_bad_ihl")                  \
	_(IPV4_BAD_TOTLEN, "ipv4_bad_total_length")      \
	_(IPV6_TRUNC, "ipv6_truncated")                  \
	_(IPV6_BAD_VERSION, "ipv6_bad_version")          \
	_(IPV6_BAD_PAYLEN, "ipv6_bad_payload_length")    \
	_(IPV6_EXT_TRUNC, "ipv6_ext_truncated")          \
	_(IPV6_EXT_TOO_MANY, "ipv6_ext_too_many")        \
	_(TCP_TRUNC, "tcp_truncated")                    \
	_(TCP_BAD_DOFF, "tcp_bad_data_offset")           \
	_(UDP_TRUNC, "udp_truncated")                    \
	_(UDP_BAD_LEN, "udp_bad_length")                 \
	_(ICMP_TRUNC, "icmp_truncated")                  \
	_(SCTP_TRUNC, "sctp_truncated")                  \
	_(GRE_TRUNC, "gre_truncated")                    \
	_(GRE_BAD_VERSION, "gre_bad_version")            \
	_(TUN_UNKNOWN_PAYLOAD, "tunnel_unknown_payload") \
	_(TTL_EXPIRED, "ttl_expired")                    \
	_(EDIT_NO_HEADROOM, "edit_no_headroom")          \
	_(EDIT_TOO_LONG, "edit_frame_too_long")          \
	_(EDIT_NOT_IP, "edit_not_ip")                    \
	_(EDIT_NOT_IPV4, "edit_not_ipv4")                \
	_(EDIT_NOT_IPV6, "edit_not_ipv6")                \
	_(EDIT_NO_PORT, "edit_no_l4_port")               \
	_(EDIT_NO_VLAN, "edit_no_vlan")                  \
	_(EDIT_NO_TUNNEL, "edit_no_tunnel")              \
	_(EDIT_FIELD_RANGE, "edit_field_out_of_range")   \
	_(EDIT_BAD_ACTION, "edit_bad_action")            \
	_(PORT_OVERSIZE, "port_oversize")                \
	_(PORT_UNSUPPORTED, "port_unsupported_frame")    \
	_(PORT_NO_BUFFER, "port_no_buffer")              \
	_(PORT_TX_FULL, "port_tx_full")                  \
	_(FLOW_NO_ROOT, "flow_no_root_pipe")             \
	_(FLOW_FWD_DROP, "flow_drop")                    \
	_(FLOW_MISS_DROP, "flow_miss_drop")              \
	_(FLOW_TOO_DEEP, "flow_pipe_depth")              \
	_(FLOW_METER_RED, "flow_meter_red")              \
	_(FLOW_RSS_FULL, "flow_rss_queue_full")          \
	_(FLOW_CT_NAT_LOST, "flow_ct_nat_lost")

enum dpflow_drop {
#define DPFLOW_DROP_ENUM_(name, str) DPFLOW_DROP_##name,
	DPFLOW_FOREACH_DROP(DPFLOW_DROP_ENUM_)
#undef DPFLOW_DROP_ENUM_
	    DPFLOW_DROP__COUNT
};

/* Stable name of a drop reason ("unknown" when out of range). */
const char *dpflow_drop_name(unsigned reason);

enum dpflow_l2_type {
	DPFLOW_L2_NONE = 0, /* no link header (inner IP of GRE, IP-in-IP) */
	DPFLOW_L2_ETH,
};

enum dpflow_l3_type {
	DPFLOW_L3_NONE = 0,
	DPFLOW_L3_IPV4,
	DPFLOW_L3_IPV6,
	DPFLOW_L3_OTHER, /* non-IP ethertype (ARP, LLDP...): see ethertype */
};

enum dpflow_l4_type {
	DPFLOW_L4_NONE = 0, /* no L4: later fragment, no next header (59),
			       non-IP */
	DPFLOW_L4_TCP,
	DPFLOW_L4_UDP,
	DPFLOW_L4_ICMP,
	DPFLOW_L4_ICMPV6,
	DPFLOW_L4_SCTP,
	DPFLOW_L4_OTHER, /* any other protocol, tunnels included: see proto */
};

enum dpflow_tun_type {
	DPFLOW_TUN_NONE = 0,
	DPFLOW_TUN_VXLAN,
	DPFLOW_TUN_GENEVE,
	DPFLOW_TUN_GRE,
	DPFLOW_TUN_IPIP, /* IPv4 or IPv6 in IPv4 or IPv6: inner.l3_type says */
};

enum dpflow_frag {
	DPFLOW_FRAG_NONE = 0,
	DPFLOW_FRAG_FIRST, /* offset 0, more fragments follow */
	DPFLOW_FRAG_LATER, /* offset > 0: no L4 header here */
};

/*
 * Names of layer and tunnel types ("ipv4", "tcp", "vxlan"...); NULL for
 * NONE and for values out of range.
 */
const char *dpflow_l3_name(unsigned type);
const char *dpflow_l4_name(unsigned type);
const char *dpflow_tun_name(unsigned type);

/* meta->flags */
#define DPFLOW_META_F_TUN_KEY	  0x01 /* GRE key present (tun_id holds it) */
#define DPFLOW_META_F_GRE_SEQ	  0x02 /* GRE sequence present (gre_seq) */
#define DPFLOW_META_F_GRE_CSUM	  0x04 /* GRE checksum present */
#define DPFLOW_META_F_GENEVE_OAM  0x08
#define DPFLOW_META_F_GENEVE_CRIT 0x10
/*
 * The outer UDP destination port named a tunnel (4789 VXLAN, 6081 GENEVE)
 * but the payload is not one the parser opens: too short, a flag or
 * version it refuses, options overrunning the datagram, an unknown GENEVE
 * protocol type, or an inner packet that fails its own checks. The packet
 * is plain UDP (tun_type NONE, no inner headers, no drop); only the outer
 * headers of an unfragmented packet are tried. Match field tunnel.invalid.
 */
#define DPFLOW_META_F_TUN_INVALID 0x20

/* meta.ct_flags, set by a CT pipe */
#define DPFLOW_META_CT_NEW     0x01 /* this packet opened the connection */
#define DPFLOW_META_CT_REPLY   0x02 /* it comes from the responder */
#define DPFLOW_META_CT_IGNORED 0x04 /* tolerated retransmission, no change */
#define DPFLOW_META_CT_REOPEN  0x08 /* a SYN reopened a closed connection */

/* ICMP/ICMPv6 keep type and code in sport and dport (as Open vSwitch). */
struct dpflow_hdr {
	uint8_t src[16]; /* IPv4: first 4 bytes; network order */
	uint8_t dst[16];
	uint16_t sport;	 /* TCP/UDP/SCTP port; ICMP type */
	uint16_t dport;	 /* TCP/UDP/SCTP port; ICMP code */
	uint16_t l2_off; /* offsets from the first byte of the frame */
	uint16_t l3_off;
	uint16_t l4_off;
	uint16_t pay_off; /* first byte after the L4 header */
	uint16_t l3_len;  /* IP datagram length as declared (header+payload) */
	uint16_t ethertype; /* after VLAN tags; 0 when l2_type is NONE */
	uint16_t vlan[2];   /* TCIs, outermost first */
	uint8_t n_vlan;
	uint8_t l2_type; /* enum dpflow_l2_type */
	uint8_t l3_type; /* enum dpflow_l3_type */
	uint8_t l4_type; /* enum dpflow_l4_type */
	uint8_t proto;	 /* IP protocol / last IPv6 next header */
	uint8_t frag;	 /* enum dpflow_frag */
	uint8_t ttl;	 /* IPv4 TTL / IPv6 hop limit */
	uint8_t tos;	 /* IPv4 TOS / IPv6 traffic class (DSCP << 2 | ECN) */
	uint8_t tcp_flags;
	uint8_t n_ext; /* IPv6 extension headers walked */
	uint8_t reserved[2];
};
DPFLOW_STATIC_ASSERT(sizeof(struct dpflow_hdr) == 64, "hdr is one line");

#define DPFLOW_META_REGS 4

struct dpflow_pkt_meta {
	/* line 0: buffer, tunnel and pipeline state */
	uint16_t data_off; /* first frame byte, from the slot's buffer start */
	uint16_t data_len; /* frame length */
	uint16_t port;
	uint16_t queue;
	uint32_t rss_hash;
	uint8_t drop;	      /* enum dpflow_drop */
	uint8_t tun_type;     /* enum dpflow_tun_type */
	uint8_t flags;	      /* DPFLOW_META_F_* */
	uint8_t color;	      /* meter colour (flow.h enum dpflow_color) */
	uint32_t tun_id;      /* VXLAN/GENEVE VNI, GRE key */
	uint16_t tun_off;     /* offset of the tunnel header in the frame */
	uint16_t tun_hdr_len; /* tunnel header bytes, options included */
	uint16_t tun_proto;   /* GENEVE/GRE protocol type */
	uint8_t ct_state;     /* connection state after a CT pipe (0: none) */
	uint8_t ct_flags;     /* DPFLOW_META_CT_* */
	uint32_t gre_seq;
	uint64_t rx_ts_ns;   /* receive timestamp, ns since the Unix epoch */
	uint64_t tx_time_ns; /* requested send time, 0 = now */
	uint32_t reg[DPFLOW_META_REGS]; /* pipeline registers */
	/* line 1 */
	struct dpflow_hdr outer;
	/* line 2 */
	struct dpflow_hdr inner;
};
DPFLOW_STATIC_ASSERT(sizeof(struct dpflow_pkt_meta) == 3 * DPFLOW_CACHE_LINE,
		     "meta is three cache lines");

#ifdef __cplusplus
}
#endif

#endif /* DPFLOW_META_H */
