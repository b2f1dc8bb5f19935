// Throughput of tidal::reduce, the inner loop of every host AllReduce.
//
// bytes_per_second counts memory traffic: 2 reads + 1 write per element for
// reduce, 1 read + 1 write for the memcpy baseline of the same buffer size,
// so the two are directly comparable against the machine's bandwidth. Sizes
// are per buffer; 64 MiB is well past the last-level cache.
//
//   reduce_bench --benchmark_filter='float32|memcpy'
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/half.h"
#include "reduce/cpu/kernels.h"
#include "reduce/reduce.h"

namespace {

constexpr int64_t kMinBytes = 4 << 10;
constexpr int64_t kMaxBytes = 64 << 20;

// Buffers filled with ordinary values (no NaN, no subnormals), pages touched.
template <typename T>
struct Buffers {
  Buffers(size_t count, T one) : a(count, one), b(count, one), dst(count, one) {}
  std::vector<T> a, b, dst;
};

template <typename T>
void runReduce(benchmark::State& state, tidalDataType_t type, T one, bool scalarOnly) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  const size_t count = bytes / sizeof(T);
  Buffers<T> buffers(count, one);
  for (auto _ : state) {
    if (scalarOnly) {
      tidal::cpu::reduceScalar(buffers.dst.data(), buffers.a.data(), buffers.b.data(), count, type,
                               tidalSum, 0);
    } else {
      tidal::reduce(buffers.dst.data(), buffers.a.data(), buffers.b.data(), count, type, tidalSum);
    }
    benchmark::DoNotOptimize(buffers.dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(3 * count * sizeof(T)));
  state.SetLabel(scalarOnly ? "scalar" : tidal::reduceKernelName());
}

void BM_ReduceSumFloat32(benchmark::State& state) {
  runReduce<float>(state, tidalFloat32, 1.0f, false);
}
void BM_ReduceSumFloat16(benchmark::State& state) {
  runReduce<uint16_t>(state, tidalFloat16, tidal::floatToHalfBits(1.0f), false);
}
void BM_ReduceSumBfloat16(benchmark::State& state) {
  runReduce<uint16_t>(state, tidalBfloat16, tidal::floatToBf16Bits(1.0f), false);
}
void BM_ReduceSumFloat32Scalar(benchmark::State& state) {
  runReduce<float>(state, tidalFloat32, 1.0f, true);
}

void BM_Memcpy(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  std::vector<unsigned char> src(bytes, 1);
  std::vector<unsigned char> dst(bytes, 0);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(2 * bytes));
}

BENCHMARK(BM_ReduceSumFloat32)->RangeMultiplier(4)->Range(kMinBytes, kMaxBytes);
BENCHMARK(BM_ReduceSumFloat16)->RangeMultiplier(4)->Range(kMinBytes, kMaxBytes);
BENCHMARK(BM_ReduceSumBfloat16)->RangeMultiplier(4)->Range(kMinBytes, kMaxBytes);
BENCHMARK(BM_ReduceSumFloat32Scalar)->RangeMultiplier(4)->Range(kMinBytes, kMaxBytes);
BENCHMARK(BM_Memcpy)->RangeMultiplier(4)->Range(kMinBytes, kMaxBytes);

}  // namespace

BENCHMARK_MAIN();
