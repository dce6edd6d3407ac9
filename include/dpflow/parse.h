/*
 * The header parser: one pass over a frame, bounds-checked at every header,
 * filling struct dpflow_pkt_meta (meta.h).
 *
 * Covers Ethernet; up to two VLAN tags (802.1Q 0x8100, 802.1ad 0x88a8);
 * IPv4 with options and fragments; IPv6 with hop-by-hop, routing, fragment
 * and destination-options headers; TCP, UDP, ICMP, ICMPv6, SCTP; the tunnels
 * VXLAN (UDP 4789), GENEVE (UDP 6081, with options), GRE (checksum, key,
 * sequence), IPv4/IPv6 in IPv4/IPv6; the inner packet is parsed the same
 * way (one level: a tunnel inside the inner packet is not opened).
 *
 * Malformed input sets meta->drop to a DPFLOW_DROP_* reason and is never
 * read out of bounds. VXLAN and GENEVE are guessed from the UDP port: a
 * payload that is not one (header or inner packet failing) leaves a valid
 * UDP packet with DPFLOW_META_F_TUN_INVALID, not a drop (docs/inspect.md).
 * The parse code itself (lib/parse/parse_impl.h) is DPF_HD: the GPU
 * target compiles the same code.
 * Reentrant; any thread.
 */
#ifndef DPFLOW_PARSE_H
#define DPFLOW_PARSE_H

#include <stdint.h>

#include "dpflow/meta.h"
#include "dpflow/pool.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Parse @len bytes at @frame into @m (the header lines and tunnel fields;
 * buffer fields are left alone). Returns the drop reason (0: none), also
 * stored in m->drop.
 */
unsigned dpflow_parse_frame(const uint8_t *frame, uint32_t len,
			    struct dpflow_pkt_meta *m);

/*
 * Parse the packets @idx[0..n) of @pool in place (frame at data_off,
 * data_len bytes). Returns the number that parsed with no drop reason;
 * the others carry theirs in meta->drop.
 */
uint16_t dpflow_parse_burst(const struct dpflow_pool *pool, const uint32_t *idx,
			    uint16_t n);

#ifdef __cplusplus
}
#endif

#endif /* DPFLOW_PARSE_H */
