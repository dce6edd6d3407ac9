/*
 * Packet edit actions: the CPU entry points and the control calls.
 *
 * Owns the actions that rewrite packets (MAC, ethertype, TTL, NAT, DSCP,
 * VLAN push/pop, encap/decap of VXLAN, GENEVE, GRE, IP-in-IP, generic
 * field set/add/copy, metadata registers). The checksums, NAT rewrites and
 * encapsulation headers they use are the public module dpflow/pkt_edit.h;
 * the actions and their parameter types live in pkt_edit_impl.h (DPF_HD,
 * shared with the GPU target); this header adds out-of-line CPU functions
 * that take a packet by pool slot, and the control call that validates
 * actions.
 *
 * Data path (any worker thread; a packet belongs to one thread at a time):
 * every dpflow_edit_<action>(pool, idx, ...) rewrites the frame of slot
 * @idx (at meta->data_off, meta->data_len bytes, parsed by
 * dpflow_parse_frame) and returns 0 or a DPFLOW_DROP_* reason, also stored
 * in meta->drop. A drop leaves the frame as it was; on success the
 * metadata describes the edited frame (see pkt_edit_impl.h for the exact
 * contract: which edits update offsets and which re-run the parser).
 * Nothing here allocates, locks or logs.
 *
 * Control path (any thread, typically the pipe layer's control thread):
 * dpflow_edit_encap_build() and dpflow_edit_action_check() return 0 or a
 * negative errno and fill @err naming the field. Actions and templates are
 * plain position-independent bytes: copy them with memcpy (into an action
 * image, or to the GPU).
 */
#ifndef DPFLOW_FLOW_PKT_EDIT_H
#define DPFLOW_FLOW_PKT_EDIT_H

#include <stdint.h>

#include "dpflow/error.h"
#include "dpflow/pool.h"
#include "flow/pkt_edit_impl.h"

/* ---- control ------------------------------------------------------------ */

/* dpflow_edit_encap_build() is public: dpflow/pkt_edit.h. */

/*
 * Check that action @a can run: op known, parameters in range (DSCP,
 * TPID, field layer and width, register index, encap template built by
 * dpflow_edit_encap_build, decap tunnel type). Returns 0 or -EINVAL with
 * @err naming the field. The data path re-checks what memory safety needs
 * and drops with EDIT_BAD_ACTION otherwise.
 */
int dpflow_edit_action_check(const struct dpflow_edit_action *a,
			     struct dpflow_error *err);

/* Name of an edit op ("set_mac", "encap", ...); NULL when out of range. */
const char *dpflow_edit_op_name(unsigned op);

/* ---- data path: one packet ---------------------------------------------- */

/* Run action @a on slot @idx. */
unsigned dpflow_edit_apply(const struct dpflow_pool *pool, uint32_t idx,
			   const struct dpflow_edit_action *a);

/*
 * Run action @a on the packets @idx[0..n). Returns how many were not
 * dropped; the others carry their reason in meta->drop.
 */
uint16_t dpflow_edit_apply_burst(const struct dpflow_pool *pool,
				 const uint32_t *idx, uint16_t n,
				 const struct dpflow_edit_action *a);

/* MAC rewrite; @src or @dst NULL keeps that address. */
unsigned dpflow_edit_set_mac(const struct dpflow_pool *pool, uint32_t idx,
			     const uint8_t *src, const uint8_t *dst);
/* Ethertype after the VLAN tags; re-parses (the verdict is the parser's). */
unsigned dpflow_edit_set_ethertype(const struct dpflow_pool *pool, uint32_t idx,
				   uint16_t ethertype);
/* TTL / hop limit - 1; TTL_EXPIRED when it was 0 or 1; EDIT_NOT_IP. */
unsigned dpflow_edit_dec_ttl(const struct dpflow_pool *pool, uint32_t idx);
/* NAT of an address (@dir DPFLOW_EDIT_SRC or _DST), network order;
 * EDIT_NOT_IPV4 / EDIT_NOT_IPV6 for the other version. */
unsigned dpflow_edit_set_ipv4(const struct dpflow_pool *pool, uint32_t idx,
			      unsigned dir, const uint8_t addr[4]);
unsigned dpflow_edit_set_ipv6(const struct dpflow_pool *pool, uint32_t idx,
			      unsigned dir, const uint8_t addr[16]);
/* NAT of a TCP/UDP port or ICMP echo identifier; EDIT_NO_L4_PORT. */
unsigned dpflow_edit_set_port(const struct dpflow_pool *pool, uint32_t idx,
			      unsigned dir, uint16_t port);
/* DSCP 0..63 (ECN kept); EDIT_NOT_IP. */
unsigned dpflow_edit_set_dscp(const struct dpflow_pool *pool, uint32_t idx,
			      uint8_t dscp);
/* Outermost VLAN tag push (EDIT_NO_HEADROOM, VLAN_TOO_MANY) and pop
 * (EDIT_NO_VLAN). */
unsigned dpflow_edit_vlan_push(const struct dpflow_pool *pool, uint32_t idx,
			       uint16_t tpid, uint16_t tci);
unsigned dpflow_edit_vlan_pop(const struct dpflow_pool *pool, uint32_t idx);
/* Encapsulation with a built template (EDIT_NO_HEADROOM, EDIT_NOT_IP,
 * EDIT_TOO_LONG, EDIT_BAD_ACTION) and decapsulation of the tunnel found by
 * the parser, @tun_type or 0 for any (EDIT_NO_TUNNEL). */
unsigned dpflow_edit_encap(const struct dpflow_pool *pool, uint32_t idx,
			   const struct dpflow_edit_encap *t);
unsigned dpflow_edit_decap(const struct dpflow_pool *pool, uint32_t idx,
			   unsigned tun_type);
/* Generic field writes with checksum fixes (EDIT_FIELD_RANGE,
 * EDIT_BAD_ACTION); @mask NULL means all ones. */
unsigned dpflow_edit_field_set(const struct dpflow_pool *pool, uint32_t idx,
			       const struct dpflow_edit_field *f,
			       const uint8_t *val, const uint8_t *mask);
unsigned dpflow_edit_field_add(const struct dpflow_pool *pool, uint32_t idx,
			       const struct dpflow_edit_field *f,
			       uint32_t delta);
unsigned dpflow_edit_field_copy(const struct dpflow_pool *pool, uint32_t idx,
				const struct dpflow_edit_field *dst,
				const struct dpflow_edit_field *src);

#endif /* DPFLOW_FLOW_PKT_EDIT_H */
