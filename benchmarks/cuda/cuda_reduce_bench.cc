// Bandwidth of the reduction kernels against a device-to-device copy.
//
//   cuda_reduce_bench [MiB per operand, default 256] [iterations, default 20]
//
// Bandwidth counts bytes read plus bytes written per second: a copy of B
// bytes moves 2B, a reduction dst = a op b moves 3B. The copy is
// cudaMemcpyAsync on the same stream, so both see the same memory system;
// the target is the reduction at 90% or more of the copy. Times come
// from CUDA events around `iterations` back-to-back launches, after a warm-up.
// Exits 77 ("skipped: no CUDA device") without a GPU.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/dtype.h"
#include "reduce/cuda/cuda_reduce.h"

namespace {

void check(cudaError_t r, const char* what) {
  if (r == cudaSuccess) return;
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(r));
  std::exit(1);
}

struct Timer {
  cudaEvent_t start = nullptr, stop = nullptr;
  Timer() {
    check(cudaEventCreate(&start), "cudaEventCreate");
    check(cudaEventCreate(&stop), "cudaEventCreate");
  }
  ~Timer() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  template <typename Launch>
  double seconds(cudaStream_t s, int iterations, Launch&& launch) {
    launch();  // warm-up
    check(cudaEventRecord(start, s), "cudaEventRecord");
    for (int i = 0; i < iterations; ++i) launch();
    check(cudaEventRecord(stop, s), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    return ms / 1e3 / iterations;
  }
};

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("skipped: no CUDA device\n");
    return 77;
  }
  const size_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 256;
  const int iterations = argc > 2 ? std::atoi(argv[2]) : 20;
  const size_t bytes = mib << 20;
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  void *a = nullptr, *b = nullptr, *d = nullptr;
  check(cudaMalloc(&a, bytes), "cudaMalloc");
  check(cudaMalloc(&b, bytes), "cudaMalloc");
  check(cudaMalloc(&d, bytes), "cudaMalloc");
  check(cudaMemset(a, 0x11, bytes), "cudaMemset");
  check(cudaMemset(b, 0x22, bytes), "cudaMemset");
  cudaStream_t s = nullptr;
  check(cudaStreamCreate(&s), "cudaStreamCreate");
  Timer timer;

  std::printf("# cuda_reduce_bench: %s (sm_%d%d, %d SMs), %zu MiB per operand, %d iterations\n",
              prop.name, prop.major, prop.minor, prop.multiProcessorCount, mib, iterations);
  std::printf("# %-22s %12s %10s\n", "operation", "GB/s", "% of copy");
  const double copySeconds = timer.seconds(s, iterations, [&] {
    check(cudaMemcpyAsync(d, a, bytes, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync");
  });
  const double copyBw = 2.0 * static_cast<double>(bytes) / copySeconds / 1e9;
  std::printf("  %-22s %12.1f %10.1f\n", "copy (device to device)", copyBw, 100.0);

  struct Variant {
    tidalDataType_t type;
    tidalRedOp_t op;
    int divisor;
  };
  const Variant variants[] = {{tidalFloat32, tidalSum, 0},  {tidalBfloat16, tidalSum, 0},
                              {tidalFloat16, tidalSum, 0},  {tidalFloat32, tidalAvg, 8},
                              {tidalBfloat16, tidalAvg, 8}, {tidalFloat32, tidalMax, 0},
                              {tidalInt32, tidalSum, 0},    {tidalFloat64, tidalSum, 0}};
  for (const Variant& v : variants) {
    const size_t count = bytes / tidal::typeSize(v.type);
    const double t = timer.seconds(s, iterations, [&] {
      const int r = tidal::gpu::launchReduce(d, a, b, count, v.type, v.op, v.divisor,
                                             prop.multiProcessorCount, s);
      check(static_cast<cudaError_t>(r), "launchReduce");
    });
    const double bw = 3.0 * static_cast<double>(bytes) / t / 1e9;
    const std::string name =
        std::string("reduce ") + tidal::typeName(v.type) + " " + tidal::opName(v.op);
    std::printf("  %-22s %12.1f %10.1f\n", name.c_str(), bw, 100.0 * bw / copyBw);
  }
  cudaFree(a);
  cudaFree(b);
  cudaFree(d);
  cudaStreamDestroy(s);
  return 0;
}
