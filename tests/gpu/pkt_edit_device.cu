/*
 * Build check: the packet edit actions (lib/flow/pkt_edit_impl.h) compile as
 * CUDA device code for sm_90 and PTX. The GPU target runs this same code in
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
