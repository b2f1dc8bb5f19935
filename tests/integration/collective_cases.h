// The correctness suite's cases, layouts and expected results, shared by every
// suite that runs them: collective_worker.cc (host buffers, every transport),
// tests/gpu/gpu_collective_worker.cc (a real GPU) and
// tests/unit/device_collectives_test.cc (the GPU test double). Values for
// which every reduction is exact (expected_values.h), compared bit for bit.
#pragma once

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "expected_values.h"

namespace tidal::test {

enum class Coll { AllReduce, AllGather, ReduceScatter, Broadcast, Reduce };

inline const char* collName(Coll c) {
  static const char* names[] = {"AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce"};
  return names[static_cast<int>(c)];
}

struct Case {
  Coll coll;
  tidalDataType_t type;
  tidalRedOp_t op;
  size_t count;  // per-rank count for AllGather/ReduceScatter, total otherwise
  bool inPlace;
  int root;
};

inline std::string describe(const Case& c, int nranks) {
  static const char* types[] = {"int8", "uint8", "int32",  "uint32",   "int64",  "uint64",
                                "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2"};
  static_assert(sizeof(types) / sizeof(types[0]) == tidalNumTypes);
  static const char* ops[] = {"sum", "prod", "max", "min", "avg"};
  return std::string(collName(c.coll)) + " " + types[c.type] + " " + ops[c.op] + " count " +
         std::to_string(c.count) + (c.inPlace ? " in-place" : " out-of-place") + " root " +
         std::to_string(c.root) + " nranks " + std::to_string(nranks);
}

// Element counts of one rank's buffers, and where in-place buffers sit inside
// one allocation of `inPlaceElements` (the documented in-place layouts).
struct CaseLayout {
  size_t sendCount;
  size_t recvCount;
  size_t inPlaceElements;
  size_t inPlaceSendOffset;  // elements
  size_t inPlaceRecvOffset;
};

inline CaseLayout layoutOf(const Case& c, int rank, int n) {
  const bool segmented = c.coll == Coll::AllGather || c.coll == Coll::ReduceScatter;
  const size_t total = segmented ? c.count * static_cast<size_t>(n) : c.count;
  CaseLayout l{c.coll == Coll::AllGather ? c.count : total,
               c.coll == Coll::ReduceScatter ? c.count : total, total, 0, 0};
  const size_t mine = static_cast<size_t>(rank) * c.count;
  if (c.coll == Coll::AllGather) l.inPlaceSendOffset = mine;
  if (c.coll == Coll::ReduceScatter) l.inPlaceRecvOffset = mine;
  return l;
}

// This rank's input, sendCount elements.
inline void fillInput(const Case& c, int rank, int n, void* out) {
  const tidalRedOp_t op =
      (c.coll == Coll::AllGather || c.coll == Coll::Broadcast) ? tidalSum : c.op;
  const size_t base = c.coll == Coll::AllGather ? static_cast<size_t>(rank) * c.count : 0;
  const size_t count = layoutOf(c, rank, n).sendCount;
  for (size_t i = 0; i < count; ++i)
    storeValue(out, i, c.type, inputValue(rank, base + i, op, c.type));
}

// Wrong elements among this rank's recvCount outputs (0 for a non-root of
// Reduce, whose output is undefined); *first gets the first wrong index.
inline size_t countWrongOutput(const Case& c, int rank, int n, const void* got, size_t* first) {
  if (c.coll == Coll::Reduce && rank != c.root) return 0;
  const size_t ts = sizeOf(c.type);
  const size_t count = layoutOf(c, rank, n).recvCount;
  const auto* bytes = static_cast<const char*>(got);
  std::vector<char> want(ts);
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    switch (c.coll) {
      case Coll::AllReduce:
      case Coll::Reduce:
        storeExpected(want.data(), i, c.type, c.op, n);
        break;
      case Coll::ReduceScatter:
        storeExpected(want.data(), static_cast<size_t>(rank) * c.count + i, c.type, c.op, n);
        break;
      case Coll::AllGather:
        storeValue(want.data(), 0, c.type,
                   inputValue(static_cast<int>(i / c.count), i, tidalSum, c.type));
        break;
      case Coll::Broadcast:
        storeValue(want.data(), 0, c.type, inputValue(c.root, i, tidalSum, c.type));
        break;
    }
    if (std::memcmp(bytes + i * ts, want.data(), ts) != 0 && wrong++ == 0 && first) *first = i;
  }
  return wrong;
}

// The suite: every collective x type x op x small count, in place and out of
// place, then (unless bigCount is 0) multi-chunk cases of `bigCount` elements.
inline std::vector<Case> standardCases(int n, size_t bigCount) {
  std::vector<Case> cases;
  int k = 0;
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1023}}) {
    for (int t = 0; t < tidalNumTypes; ++t) {
      const auto type = static_cast<tidalDataType_t>(t);
      for (bool inPlace : {false, true}) {
        for (int o = 0; o < tidalNumOps; ++o) {
          const auto op = static_cast<tidalRedOp_t>(o);
          cases.push_back({Coll::AllReduce, type, op, count, inPlace, 0});
          cases.push_back({Coll::ReduceScatter, type, op, count, inPlace, 0});
          cases.push_back({Coll::Reduce, type, op, count, inPlace, (k++) % n});
        }
        cases.push_back({Coll::AllGather, type, tidalSum, count, inPlace, 0});
        cases.push_back({Coll::Broadcast, type, tidalSum, count, inPlace, (k++) % n});
      }
    }
  }
  if (bigCount == 0) return cases;
  for (bool inPlace : {false, true}) {
    for (int t = 0; t < tidalNumTypes; ++t) {
      cases.push_back(
          {Coll::AllReduce, static_cast<tidalDataType_t>(t), tidalSum, bigCount, inPlace, 0});
    }
    for (int o = 0; o < tidalNumOps; ++o) {
      cases.push_back(
          {Coll::AllReduce, tidalFloat32, static_cast<tidalRedOp_t>(o), bigCount, inPlace, 0});
    }
    for (auto type : {tidalFloat32, tidalBfloat16, tidalInt8}) {
      const size_t perRank = bigCount / static_cast<size_t>(n) + 1;
      cases.push_back({Coll::ReduceScatter, type, tidalSum, perRank, inPlace, 0});
      cases.push_back({Coll::AllGather, type, tidalSum, perRank, inPlace, 0});
      cases.push_back({Coll::Broadcast, type, tidalSum, bigCount, inPlace, n - 1});
      cases.push_back({Coll::Reduce, type, tidalAvg, bigCount, inPlace, n / 2});
    }
  }
  return cases;
}

}  // namespace tidal::test
