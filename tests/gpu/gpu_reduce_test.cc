// The CUDA reduction kernels on a real GPU against the CPU kernels, bit for
// bit: every type x op (avg as sum with a divisor), in place and out of
// place, aligned and misaligned pointers (the vector path, the element path,
// a head before the first 16-byte boundary), counts around the vector and
// unroll sizes, and operands in page-locked host memory (what the staged
// path reduces from). Where the CPU result is NaN the GPU's must be NaN; its
// payload is the canonical one (reduce_functors.h).
//
// Skips (exit 77, "skipped: no CUDA device") without a GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <tuple>
#include <vector>

#include "core/dtype.h"
#include "gpu_check.h"
#include "reduce/cpu/kernels.h"
#include "reduce/cuda/cuda_reduce.h"
#include "reduce/cuda/reduce_functors.h"

namespace tidal {
namespace {

using gputest::DeviceMemory;

const tidalDataType_t kTypes[] = {tidalInt8,    tidalUint8,    tidalInt32,      tidalUint32,
                                  tidalInt64,   tidalUint64,   tidalFloat16,    tidalFloat32,
                                  tidalFloat64, tidalBfloat16, tidalFloat8e4m3, tidalFloat8e5m2};
const tidalRedOp_t kOps[] = {tidalSum, tidalProd, tidalMax, tidalMin, tidalAvg};

int multiprocessors() {
  int device = 0, sms = 0;
  GPU_CHECK(cudaGetDevice(&device));
  GPU_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

bool isNan(tidalDataType_t type, const uint8_t* p) {
  switch (type) {
    case tidalFloat32: {
      float v;
      std::memcpy(&v, p, 4);
      return v != v;
    }
    case tidalFloat64: {
      double v;
      std::memcpy(&v, p, 8);
      return v != v;
    }
    case tidalFloat16:
    case tidalBfloat16: {
      uint16_t bits;
      std::memcpy(&bits, p, 2);
      const float v = type == tidalFloat16 ? gpu::Element<tidalFloat16>::load(bits)
                                           : gpu::Element<tidalBfloat16>::load(bits);
      return v != v;
    }
    case tidalFloat8e4m3:
      return (p[0] & 0x7f) == 0x7f;
    case tidalFloat8e5m2:
      return (p[0] & 0x7f) > 0x7c;
    default:
      return false;
  }
}

std::vector<uint8_t> randomBytes(size_t n, std::mt19937_64& rng, tidalDataType_t type) {
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  // Mostly moderate floats (random bits are mostly huge or NaN for 16-bit
  // types): scale the exponent down in 3 of 4 elements.
  const size_t ts = typeSize(type);
  if (type == tidalFloat16 || type == tidalBfloat16) {
    for (size_t i = 0; i + 2 <= n; i += 2) {
      if ((i / 2) % 4 != 0) v[i + 1] &= 0x3f;
    }
  } else if (type == tidalFloat32) {
    for (size_t i = 0; i + 4 <= n; i += 4) {
      if ((i / 4) % 4 != 0) v[i + 3] &= 0x3f;
    }
  }
  (void)ts;
  return v;
}

// Runs one case: places a and b at element offsets inside device (or pinned)
// buffers, reduces on the GPU, compares with the CPU.
void runCase(tidalDataType_t type, tidalRedOp_t op, int divisor, size_t count, size_t dstOffset,
             size_t aOffset, size_t bOffset, bool inPlace, bool pinnedInputs,
             std::mt19937_64& rng) {
  const size_t ts = typeSize(type);
  const size_t bytes = count * ts;
  const size_t room = bytes + 64 * ts;
  const auto a = randomBytes(bytes, rng, type);
  const auto b = randomBytes(bytes, rng, type);
  std::vector<uint8_t> want(bytes);
  cpu::reduceScalar(want.data(), a.data(), b.data(), count, type, op, divisor);

  DeviceMemory dstMem(room), aMem(room), bMem(room);
  void* pinned = nullptr;
  if (pinnedInputs) GPU_CHECK(cudaHostAlloc(&pinned, room, cudaHostAllocPortable));
  char* aPtr = (pinnedInputs ? static_cast<char*>(pinned) : aMem.data()) + aOffset * ts;
  char* bPtr = bMem.data() + bOffset * ts;
  char* dPtr = dstMem.data() + dstOffset * ts;
  if (inPlace) aPtr = dPtr;
  GPU_CHECK(cudaMemcpy(aPtr, a.data(), bytes, cudaMemcpyDefault));
  GPU_CHECK(cudaMemcpy(bPtr, b.data(), bytes, cudaMemcpyDefault));
  cudaStream_t stream = nullptr;
  GPU_CHECK(cudaStreamCreate(&stream));
  const int r =
      gpu::launchReduce(dPtr, aPtr, bPtr, count, type, op, divisor, multiprocessors(), stream);
  ASSERT_EQ(r, 0) << cudaGetErrorString(static_cast<cudaError_t>(r));
  GPU_CHECK(cudaStreamSynchronize(stream));
  GPU_CHECK(cudaStreamDestroy(stream));
  std::vector<uint8_t> got(bytes);
  GPU_CHECK(cudaMemcpy(got.data(), dPtr, bytes, cudaMemcpyDefault));
  if (pinned) cudaFreeHost(pinned);

  size_t wrong = 0, first = 0;
  for (size_t i = 0; i < count; ++i) {
    const uint8_t* w = &want[i * ts];
    const uint8_t* g = &got[i * ts];
    const bool same = isNan(type, w) ? isNan(type, g) : std::memcmp(w, g, ts) == 0;
    if (!same && wrong++ == 0) first = i;
  }
  EXPECT_EQ(wrong, 0u) << typeName(type) << " " << opName(op) << " divisor " << divisor << " count "
                       << count << " offsets " << dstOffset << "/" << aOffset << "/" << bOffset
                       << (inPlace ? " in-place" : "") << (pinnedInputs ? " pinned" : "")
                       << ": first wrong at " << first;
}

TEST(GpuReduce, EveryTypeAndOpMatchesTheCpu) {
  std::mt19937_64 rng(1);
  for (tidalDataType_t type : kTypes) {
    for (tidalRedOp_t op : kOps) {
      const int divisor = op == tidalAvg ? 4 : 0;
      for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1023}, size_t{65536 + 3},
                           (size_t{1} << 22) + 5}) {
        for (bool inPlace : {false, true}) {
          runCase(type, op, divisor, count, 0, 0, 0, inPlace, false, rng);
        }
      }
    }
  }
}

TEST(GpuReduce, MisalignedPointersTakeTheHeadOrElementPath) {
  std::mt19937_64 rng(2);
  for (tidalDataType_t type : kTypes) {
    for (auto [d, a, b] :
         {std::tuple{1, 1, 1}, std::tuple{3, 3, 3}, std::tuple{1, 2, 3}, std::tuple{0, 1, 0}}) {
      runCase(type, tidalSum, 0, 100003, static_cast<size_t>(d), static_cast<size_t>(a),
              static_cast<size_t>(b), false, false, rng);
      runCase(type, tidalMax, 0, 999, static_cast<size_t>(d), static_cast<size_t>(a),
              static_cast<size_t>(b), false, false, rng);
    }
  }
}

TEST(GpuReduce, DivisorsDivideLikeTheCpu) {
  std::mt19937_64 rng(3);
  for (tidalDataType_t type : kTypes) {
    for (int divisor : {1, 3, 8, -1, -7}) {
      runCase(type, tidalSum, divisor, 70001, 0, 0, 0, false, false, rng);
      runCase(type, tidalProd, divisor, 513, 0, 0, 0, true, false, rng);
    }
  }
}

TEST(GpuReduce, OperandsInPinnedHostMemory) {
  std::mt19937_64 rng(4);
  for (tidalDataType_t type : {tidalFloat32, tidalBfloat16, tidalInt8, tidalFloat64}) {
    runCase(type, tidalSum, 0, 300001, 0, 0, 0, false, true, rng);
  }
}

}  // namespace
}  // namespace tidal

int main(int argc, char** argv) {
  tidal::gputest::skipWithoutDevice();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
