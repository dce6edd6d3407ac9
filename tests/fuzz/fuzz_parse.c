/*
 * libFuzzer target for the parser. The parse code is included here (it is
 * header-only DPF_HD code) so that it is compiled with coverage
 * instrumentation. Invariants checked on every input: the drop reason is a
 * known one, and a packet that parsed cleanly has every offset inside the
 * frame.
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
		if (m.tun_type != DPFLOW_TUN_NONE) {
			check_hdr(&m.inner, size);
			if (m.inner.l2_off < m.outer.l4_off)
				abort();
		}
	}
	return 0;
}
