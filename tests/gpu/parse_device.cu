/*
 * Build check: the parser's shared code (lib/parse/parse_impl.h) compiles as
 * CUDA device code for sm_90 and PTX. The GPU target (a later milestone)
 * runs this same code in its kernels; this file keeps it in the common
 * subset of C11 and CUDA C++ until then. Built when nvcc is present.
 */
#include "parse/parse_impl.h"

__global__ void dpflow_parse_check_kernel(const uint8_t *frames,
					  uint32_t stride, const uint32_t *len,
					  struct dpflow_pkt_meta *meta,
					  uint32_t n)
{
	uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		dpflow_parse_frame_impl(frames + (size_t)i * stride, len[i],
					&meta[i]);
}
