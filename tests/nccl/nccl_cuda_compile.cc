// nccl-tests-style code against nccl.h with cuda_runtime.h: device buffers,
// a cudaStream_t, NCCL_VERSION_CODE checks. Compiled and linked only (the
// nccl_cuda_compile test); on a GPU machine it runs.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 19, 0)
#error "nccl.h should state 2.30"
#endif

int main() {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
  if (cudaSetDevice(0) != cudaSuccess) {
    std::printf("no CUDA device: compiled and linked only\n");
    return 0;
  }
  ncclComm_t comm;
  cudaStream_t stream;
  float* buf = nullptr;
  cudaStreamCreate(&stream);
  cudaMalloc(&buf, 1024 * sizeof(float));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  if (ncclCommInitRankConfig(&comm, 1, id, 0, &config) != ncclSuccess) return 1;
  ncclGroupStart();
  ncclAllReduce(buf, buf, 1024, ncclFloat, ncclSum, comm, stream);
  ncclGroupEnd();
  cudaStreamSynchronize(stream);
  ncclResult_t async;
  ncclCommGetAsyncError(comm, &async);
  ncclCommDestroy(comm);
  cudaFree(buf);
  return async == ncclSuccess ? 0 : 1;
}
