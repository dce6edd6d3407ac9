/*
 * Build check: the monitor pieces' shared code (lib/flow/meter_impl.h:
 * counters, meters, aging; lib/flow/ct_impl.h: connection tracking) and
 * dpflow's atomic wrappers (lib/flow/atomic.h) compile as CUDA device code
 * for sm_90 and PTX. The GPU target (a later milestone) runs this same code
 * in its kernels on images copied byte for byte from the CPU. Built when
 * nvcc is present.
 */
#include "flow/ct_impl.h"
#include "flow/meter_impl.h"

/* One thread per packet: count, meter, touch aging, track the connection. */
__global__ void dpflow_monitor_check_kernel(
    struct dpflow_counters *cnt, struct dpflow_meters *mtr,
    struct dpflow_aging *age, struct dpflow_ct_image *ct,
    const struct dpflow_ct_pkt *pkts, const uint32_t *len, uint64_t now_ns,
    uint8_t *color, struct dpflow_ct_result *res, uint32_t n)
{
	uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= n)
		return;
	dpflow_counter_add_impl(cnt, i % cnt->hdr.n, len[i]);
	dpflow_counter_add_st_impl(cnt, 0, len[i]);
	color[i] = (uint8_t)dpflow_meter_color_impl(
	    dpflow_meter_at(mtr, i % mtr->hdr.n), now_ns, len[i],
	    DPFLOW_METER_GREEN);
	dpflow_aging_touch_impl(age, i % age->hdr.n, now_ns);
	dpflow_ct_process_impl(ct, &pkts[i], now_ns, i, &res[i]);
	if (res[i].conn == DPFLOW_TABLE_MISS)
		dpflow_ct_lookup_impl(ct, &pkts[i], now_ns, &res[i]);
}
