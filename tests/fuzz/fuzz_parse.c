/*
 * libFuzzer target for the parser. The parse code is included here (it is
 * header-only DPF_HD code) so that it is compiled with coverage
 * instrumentation. Invariants checked on every input: the drop reason is a
 * known one, a packet that parsed cleanly has every offset inside the
 * frame, and unfragmented UDP to 4789/6081 that parsed cleanly is either
 * the tunnel or plain UDP with DPFLOW_META_F_TUN_INVALID, which nothing
 * else carries.
 */
#include <stdint.h>
#include <stdlib.h>

#include "dpflow/meta.h"
#include "parse/parse_impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_hdr(const struct dpflow_hdr *h, size_t size)
{
	if (h->l3_off > size || h->l4_off > size || h->pay_off > size ||
	    h->l4_off < h->l3_off || h->pay_off < h->l4_off ||
	    h->n_vlan > DPFLOW_PARSE_MAX_VLAN ||
	    h->n_ext > DPFLOW_PARSE_MAX_IPV6_EXT)
		abort();
}

/* The flag is set exactly when a tunnel port's payload is no tunnel. */
static void check_tun_invalid(const struct dpflow_pkt_meta *m)
{
	const struct dpflow_hdr *h = &m->outer;
	int port = h->l4_type == DPFLOW_L4_UDP && h->frag == DPFLOW_FRAG_NONE &&
		   (h->dport == DPFLOW_UDP_PORT_VXLAN ||
		    h->dport == DPFLOW_UDP_PORT_GENEVE);
	int udp_tun =
	    m->tun_type == DPFLOW_TUN_VXLAN || m->tun_type == DPFLOW_TUN_GENEVE;

	if (!(m->flags & DPFLOW_META_F_TUN_INVALID)) {
		if (port && !udp_tun)
			abort();
		return;
	}
	if (!port || m->tun_type != DPFLOW_TUN_NONE ||
	    m->flags != DPFLOW_META_F_TUN_INVALID || m->tun_id)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dpflow_pkt_meta m;
	unsigned r;

	if (size > UINT16_MAX)
		return 0;
	r = dpflow_parse_frame_impl(data, (uint32_t)size, &m);
	if (r >= DPFLOW_DROP__COUNT || r != m.drop)
		abort();
	if (r == DPFLOW_DROP_NONE) {
		check_hdr(&m.outer, size);
		check_tun_invalid(&m);
		if (m.tun_type != DPFLOW_TUN_NONE) {
			check_hdr(&m.inner, size);
			if (m.inner.l2_off < m.outer.l4_off)
				abort();
		}
	} else if (m.flags & DPFLOW_META_F_TUN_INVALID) {
		abort(); /* a dropped packet is no UDP packet */
	}
	return 0;
}
