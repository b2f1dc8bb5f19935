// The CUDA reduction kernels (reduce_kernels.cu), launched on a stream.
//
// dst[i] = (a[i] op b[i]) [/ divisor] for i in [0, count), with exactly the
// semantics of reduce.h (reduce_functors.h says where the GPU's NaN payloads
// differ). dst may alias a or b exactly; pointers need only element alignment
// (16-byte aligned runs use 16-byte vector loads and stores, anything else
// element by element). a and b may live in device memory, in peer memory the
// device can reach, or in page-locked host memory: the kernel reads them.
//
// The grid is sized from the device's multiprocessor count, so a launch costs
// the same whatever count is, and every block loops over its share.
//
// This header has no CUDA types so that plain C++ code can include it; the
// stream is a cudaStream_t and the result a cudaError_t (0: success).
#pragma once

#include <cstddef>

#include "tidal/tidal.h"

namespace tidal::gpu {

// Blocks a launch uses at most per multiprocessor, and threads per block.
inline constexpr int kBlocksPerMultiprocessor = 4;
inline constexpr int kThreadsPerBlock = 512;

// Enqueues the reduction on `stream`. type and op must be valid (reduce.h's
// dispatcher checks); avg is treated as sum, the divisor does the division.
// Returns the launch's cudaError_t as an int.
int launchReduce(void* dst, const void* a, const void* b, size_t count, tidalDataType_t type,
                 tidalRedOp_t op, int divisor, int multiprocessors, void* stream);

}  // namespace tidal::gpu
