/*
 * Match fields: every packet or metadata field a pipe can match on, from
 * one X-macro list (id, name as written in configs, width in bits).
 *
 * A pipe's match template is a list of fields; its key is the concatenation
 * of the fields' values, each in network byte order, padded to whole bytes
 * (dpflow_field_bytes()). Values are read from the parsed metadata (meta.h)
 * and, for MAC addresses, from the frame. The extraction code is DPF_HD
 * (lib/flow/field_impl.h) so both targets build identical keys.
 * Any thread.
 */
#ifndef DPFLOW_FIELD_H
#define DPFLOW_FIELD_H

#include <stdint.h>

#include "dpflow/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* _(ID, "config.name", bits) for one header set; P is outer or inner. */
#define DPFLOW_FOREACH_HDR_FIELD(_, P, p)    \
	_(P##_ETH_SRC, #p ".eth.src", 48)    \
	_(P##_ETH_DST, #p ".eth.dst", 48)    \
	_(P##_ETH_TYPE, #p ".eth.type", 16)  \
	_(P##_VLAN0, #p ".vlan0", 12)        \
	_(P##_VLAN1, #p ".vlan1", 12)        \
	_(P##_L3_TYPE, #p ".l3.type", 8)     \
	_(P##_IPV4_SRC, #p ".ipv4.src", 32)  \
	_(P##_IPV4_DST, #p ".ipv4.dst", 32)  \
	_(P##_IPV6_SRC, #p ".ipv6.src", 128) \
	_(P##_IPV6_DST, #p ".ipv6.dst", 128) \
	_(P##_IP_PROTO, #p ".ip.proto", 8)   \
	_(P##_IP_DSCP, #p ".ip.dscp", 6)     \
	_(P##_IP_TTL, #p ".ip.ttl", 8)       \
	_(P##_IP_FRAG, #p ".ip.frag", 8)     \
	_(P##_L4_TYPE, #p ".l4.type", 8)     \
	_(P##_L4_SPORT, #p ".l4.sport", 16)  \
	_(P##_L4_DPORT, #p ".l4.dport", 16)  \
	_(P##_TCP_FLAGS, #p ".tcp.flags", 8) \
	_(P##_ICMP_TYPE, #p ".icmp.type", 8) \
	_(P##_ICMP_CODE, #p ".icmp.code", 8)

#define DPFLOW_FOREACH_FIELD(_)                   \
	_(META_PORT, "meta.port", 16)             \
	_(META_REG0, "meta.reg0", 32)             \
	_(META_REG1, "meta.reg1", 32)             \
	_(META_REG2, "meta.reg2", 32)             \
	_(META_REG3, "meta.reg3", 32)             \
	_(TUN_TYPE, "tunnel.type", 8)             \
	_(TUN_ID, "tunnel.id", 32)                \
	_(TUN_INVALID, "tunnel.invalid", 1)       \
	_(META_COLOR, "meta.color", 8)            \
	_(META_CT_STATE, "meta.ct_state", 8)      \
	_(META_CT_FLAGS, "meta.ct_flags", 8)      \
	DPFLOW_FOREACH_HDR_FIELD(_, OUTER, outer) \
	DPFLOW_FOREACH_HDR_FIELD(_, INNER, inner)

enum dpflow_field {
#define DPFLOW_FIELD_ENUM_(id, name, bits) DPFLOW_FIELD_##id,
	DPFLOW_FOREACH_FIELD(DPFLOW_FIELD_ENUM_)
#undef DPFLOW_FIELD_ENUM_
	    DPFLOW_FIELD__COUNT
};

/* Largest key a template may build, in bytes. */
#define DPFLOW_KEY_MAX 64

/* Config name ("outer.ipv4.src") of a field, NULL when out of range. */
const char *dpflow_field_name(unsigned field);
/* Width in bits, 0 when out of range. */
unsigned dpflow_field_bits(unsigned field);
/* Bytes the field takes in a key: (bits + 7) / 8. */
unsigned dpflow_field_bytes(unsigned field);
/* Look a field up by config name. Returns its id or -1. */
int dpflow_field_lookup(const char *name);

#ifdef __cplusplus
}
#endif

#endif /* DPFLOW_FIELD_H */
