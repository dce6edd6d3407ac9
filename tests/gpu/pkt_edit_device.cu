/*
 * Build check: the packet edit actions (lib/flow/pkt_edit_impl.h) and the
 * public packet editing module under them (include/dpflow/pkt_edit.h:
 * checksums, NAT, outer headers) compile as CUDA device code for sm_90
 * and PTX. The GPU target runs this same code in
 * its kernels on the same action bytes (struct dpflow_edit_action, copied
 * to device memory); this file keeps the shared code in the common subset
 * of C11 and CUDA C++ until then. Built when nvcc is present; no GPU needed.
 */
#include "dpflow/pool.h"
#include "flow/pkt_edit_impl.h"

/* One thread per packet: action @a on slots @idx[0..n) of @pool. */
__global__ void dpflow_pkt_edit_check_kernel(struct dpflow_pool pool,
					     const uint32_t *idx, uint32_t n,
					     const struct dpflow_edit_action *a,
					     unsigned *verdict)
{
	uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		verdict[i] =
		    dpflow_edit_apply_impl(dpflow_pool_meta(&pool, idx[i]),
					   dpflow_pool_buf(&pool, idx[i]), a);
}

/*
 * One thread per frame: the public module's data-path functions, each
 * instantiated for the device (a static inline function no kernel calls
 * would not be).
 */
__global__ void dpflow_pkt_edit_public_kernel(uint8_t *frames, uint32_t stride,
					      uint32_t n,
					      const struct dpflow_edit_encap *t,
					      uint32_t *out)
{
	uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
	uint8_t *f = frames + (size_t)i * stride, *ip = f + 14, *l4 = ip + 20;
	struct dpflow_pkt_meta m;
	uint64_t d;

	if (i >= n)
		return;
	memset(&m, 0, sizeof(m));
	m.data_off = 128;
	m.data_len = 200;
	out[i] = (uint32_t)dpflow_csum_l4_complete(f, 200);
	dpflow_nat_ipv4(ip, l4, 6, f + 64, 80, f + 68, 8080);
	dpflow_nat_ipv6(ip, l4, 17, f + 64, 80, f + 80, 8080);
	dpflow_nat_ipv4_addr(ip, l4, 17, DPFLOW_EDIT_DST, f + 96);
	dpflow_nat_ipv6_addr(ip, l4, 58, DPFLOW_EDIT_SRC, f + 96);
	out[i] += (uint32_t)dpflow_nat_l4_port(l4, 6, DPFLOW_EDIT_SRC, 1234);
	dpflow_nat_icmp_id(l4, 77);
	d = dpflow_csum_delta_bytes(f, f + 1, 3, 1) +
	    dpflow_csum_delta(f, f + 2, 6);
	out[i] += dpflow_csum_update16(dpflow_csum_adjust(0x1234, d), 1, 2) +
		  dpflow_csum_update32(7, 8, 9);
	dpflow_ipv4_csum_set(ip, 20);
	dpflow_l4_csum_set(l4, 60, 17, dpflow_csum_pseudo(ip, 0, 17, 60));
	dpflow_csum_apply(l4 + 6, d, 1);
	if (dpflow_encap_valid(t) &&
	    dpflow_encap_room(&m, 14, 100, t->hdr_len, 1500) == 0)
		dpflow_encap_write(t, f, 100, 0x0800, i);
	dpflow_encap_ipv4_hdr(ip, dpflow_encap_ipv4_sum(ip), 0, 100, 4);
	dpflow_encap_ipv6_hdr(ip, 0, i & 0xfffff, 60, 41);
	dpflow_encap_udp_hdr(l4, dpflow_encap_udp_sport(i, 32768, 28231), 60);
	dpflow_encap_udp_csum(ip, 1, l4, 60);
	out[i] += dpflow_decap_l3(f, 0, 34, 0x0800);
}
