// Kernels the GPU tests put on the caller's stream around a collective.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace tidal::gputest {

// Spins for about `spinNs` nanoseconds, then copies `bytes` from src to dst
// (one block). A collective that read dst before this kernel finished would
// see the old contents: it is how the tests show that the collective waited
// for the work enqueued before it, and that later work waited for it.
void launchDelayedCopy(void* dst, const void* src, size_t bytes, long long spinNs,
                       cudaStream_t stream);

// Occupies the stream for about `spinNs` nanoseconds.
void launchSleep(long long spinNs, cudaStream_t stream);

}  // namespace tidal::gputest
