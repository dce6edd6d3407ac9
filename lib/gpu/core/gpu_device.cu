/*
 * GPU discovery (gpu.h): how many CUDA devices this process can use.
 */
#include <cerrno>

#include <cuda_runtime.h>

#include "dpflow/gpu.h"

extern "C" int dpflow_gpu_count(struct dpflow_error *err)
{
	int n = 0;
	cudaError_t rc = cudaGetDeviceCount(&n);

	if (rc != cudaSuccess) {
		dpflow_error_set(err, ENODEV, "gpu", "no CUDA device: %s",
				 cudaGetErrorString(rc));
		return 0;
	}
	if (n == 0)
		dpflow_error_set(err, ENODEV, "gpu", "no CUDA device");
	return n;
}
