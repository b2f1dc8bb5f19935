// One templated kernel, instantiated per (type, op, divide or not): 12 x 4 x 2
// kernels for sm_80 and sm_90 (+ PTX). avg needs no kernel of its own: it is
// sum with a divisor.
//
// Layout of one launch: the elements before dst's first 16-byte boundary (the
// "head") and after the last whole vector (the "tail") are done one by one;
// the vectors in between are loaded and stored 16 bytes at a time, kUnroll of
// them per thread per round so that several loads are in flight per thread.
// The vector path needs a and b to share dst's misalignment; when they do not
// (an odd offset into a staging slot, say) everything goes element by element.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "reduce/cpu/element_ops.h"
#include "reduce/cuda/cuda_reduce.h"
#include "reduce/cuda/reduce_functors.h"

namespace tidal::gpu {
namespace {

constexpr int kVectorBytes = 16;
constexpr int kUnroll = 4;

template <typename Storage>
union Vector {
  uint4 raw;
  Storage element[kVectorBytes / sizeof(Storage)];
  uint32_t word[4];
};

template <tidalDataType_t kType, tidalRedOp_t kOp, bool kDivide>
__device__ __forceinline__ uint4 combineVector(uint4 a, uint4 b, int divisor) {
  using Storage = typename Element<kType>::Storage;
  Vector<Storage> x, y, r;
  x.raw = a;
  y.raw = b;
  if constexpr (!kDivide && kNativePair<kType, kOp>) {
    const PairFunctor<kType, kOp> pair;
#pragma unroll
    for (int k = 0; k < 4; ++k) r.word[k] = pair(x.word[k], y.word[k]);
  } else {
    const ElementFunctor<kType, kOp, kDivide> one;
#pragma unroll
    for (int k = 0; k < kVectorBytes / static_cast<int>(sizeof(Storage)); ++k) {
      r.element[k] = one(x.element[k], y.element[k], divisor);
    }
  }
  return r.raw;
}

// Elements [0, head) and [head + vectors * perVector, count) one by one;
// vectors of 16 bytes in between, starting at element `head`.
template <tidalDataType_t kType, tidalRedOp_t kOp, bool kDivide>
__global__ void __launch_bounds__(kThreadsPerBlock)
    reduceKernel(typename Element<kType>::Storage* dst, const typename Element<kType>::Storage* a,
                 const typename Element<kType>::Storage* b, size_t count, size_t head,
                 size_t vectors, int divisor) {
  using Storage = typename Element<kType>::Storage;
  constexpr size_t kPerVector = kVectorBytes / sizeof(Storage);
  const size_t thread = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t threads = static_cast<size_t>(gridDim.x) * blockDim.x;

  auto* dv = reinterpret_cast<uint4*>(dst + head);
  const auto* av = reinterpret_cast<const uint4*>(a + head);
  const auto* bv = reinterpret_cast<const uint4*>(b + head);
  // Rounds in which every thread has kUnroll whole vectors.
  const size_t perRound = threads * kUnroll;
  const size_t rounds = vectors / perRound;
  for (size_t round = 0; round < rounds; ++round) {
    const size_t base = round * perRound + thread;
    uint4 x[kUnroll], y[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      x[u] = av[base + u * threads];
      y[u] = bv[base + u * threads];
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      dv[base + u * threads] = combineVector<kType, kOp, kDivide>(x[u], y[u], divisor);
    }
  }
  for (size_t v = rounds * perRound + thread; v < vectors; v += threads) {
    dv[v] = combineVector<kType, kOp, kDivide>(av[v], bv[v], divisor);
  }

  // Head and tail: fewer than kPerVector elements each.
  const ElementFunctor<kType, kOp, kDivide> one;
  const size_t tailStart = head + vectors * kPerVector;
  const size_t loose = head + (count - tailStart);
  for (size_t k = thread; k < loose; k += threads) {
    const size_t i = k < head ? k : tailStart + (k - head);
    dst[i] = one(a[i], b[i], divisor);
  }
}

template <tidalDataType_t kType, tidalRedOp_t kOp, bool kDivide>
cudaError_t launchTyped(void* dst, const void* a, const void* b, size_t count, int divisor,
                        int multiprocessors, cudaStream_t stream) {
  using Storage = typename Element<kType>::Storage;
  constexpr size_t kPerVector = kVectorBytes / sizeof(Storage);
  const auto d = reinterpret_cast<uintptr_t>(dst);
  const auto x = reinterpret_cast<uintptr_t>(a);
  const auto y = reinterpret_cast<uintptr_t>(b);
  size_t head = count;  // no vectors: everything element by element
  size_t vectors = 0;
  const uintptr_t misalignment = d % kVectorBytes;
  if (x % kVectorBytes == misalignment && y % kVectorBytes == misalignment &&
      misalignment % sizeof(Storage) == 0) {
    head = std::min(count, ((kVectorBytes - misalignment) % kVectorBytes) / sizeof(Storage));
    vectors = (count - head) / kPerVector;
  }
  const size_t work = vectors > 0 ? (vectors + kUnroll - 1) / kUnroll : count;
  const size_t wanted = (work + kThreadsPerBlock - 1) / kThreadsPerBlock;
  const size_t cap = static_cast<size_t>(std::max(multiprocessors, 1)) * kBlocksPerMultiprocessor;
  const unsigned blocks = static_cast<unsigned>(std::max<size_t>(1, std::min(wanted, cap)));
  reduceKernel<kType, kOp, kDivide><<<blocks, kThreadsPerBlock, 0, stream>>>(
      static_cast<Storage*>(dst), static_cast<const Storage*>(a), static_cast<const Storage*>(b),
      count, head, vectors, divisor);
  return cudaGetLastError();
}

}  // namespace

int launchReduce(void* dst, const void* a, const void* b, size_t count, tidalDataType_t type,
                 tidalRedOp_t op, int divisor, int multiprocessors, void* stream) {
  if (count == 0) return cudaSuccess;
  const auto s = static_cast<cudaStream_t>(stream);
  // The CPU kernels' dispatch (host code): avg arrives as sum, the divisor divides.
  return static_cast<int>(cpu::visitType(type, [&](auto typeTag) {
    constexpr tidalDataType_t kType = decltype(typeTag)::value;
    return cpu::visitOp(op, [&](auto opTag) {
      constexpr tidalRedOp_t kOp = decltype(opTag)::value;
      return divisor == 0
                 ? launchTyped<kType, kOp, false>(dst, a, b, count, divisor, multiprocessors, s)
                 : launchTyped<kType, kOp, true>(dst, a, b, count, divisor, multiprocessors, s);
    });
  }));
}

}  // namespace tidal::gpu
