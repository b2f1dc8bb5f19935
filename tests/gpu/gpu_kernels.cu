// The kernels of gpu_kernels.h: test helpers, not a test. The checks are in
// gpu_collective_worker.cc, which compares what these kernels leave behind.
#include "gpu_kernels.h"

namespace tidal::gputest {
namespace {

__device__ void spin(long long ns) {
  long long start = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  for (;;) {
    long long now = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start >= ns) return;
  }
}

__global__ void delayedCopy(unsigned char* dst, const unsigned char* src, size_t bytes,
                            long long spinNs) {
  if (threadIdx.x == 0) spin(spinNs);
  __syncthreads();
  for (size_t i = threadIdx.x; i < bytes; i += blockDim.x) dst[i] = src[i];
}

__global__ void sleepKernel(long long spinNs) { spin(spinNs); }

}  // namespace

void launchDelayedCopy(void* dst, const void* src, size_t bytes, long long spinNs,
                       cudaStream_t stream) {
  delayedCopy<<<1, 1024, 0, stream>>>(static_cast<unsigned char*>(dst),
                                      static_cast<const unsigned char*>(src), bytes, spinNs);
}

void launchSleep(long long spinNs, cudaStream_t stream) {
  sleepKernel<<<1, 1, 0, stream>>>(spinNs);
}

}  // namespace tidal::gputest
