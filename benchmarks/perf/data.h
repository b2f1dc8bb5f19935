// Input patterns whose reductions are exact, and the checks against them.
//
// Every input element is a small integer (or a power of two) chosen from
// (rank, global element index, seed) so that any summation order, any tree and
// any chunking give the same bits: partial sums never leave the range a type
// holds exactly (bfloat16 has 8 significant bits, so sums stay <= 256; FP8
// E4M3 4 bits, sums <= 16; E5M2 3 bits, sums <= 8), and
// products are powers of two. The expected value of each output element is
// then recomputed here from the same formula, independently of the library,
// and compared bit for bit.
//
// avg follows the library's documented semantics: the exact sum divided once
// by nranks -- in float32 then rounded to nearest-even for half/bfloat16/fp8, in
// the type's own precision for float/double, truncating for integers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tidal/tidal.h"

namespace tidal::perf {

// What the values are shaped for. Collectives without an op (all-gather,
// broadcast) use kWide: the largest spread of values, any bit pattern welcome.
enum class PatternKind { kBoundedSum, kPowersOfTwo, kWide };

PatternKind patternFor(tidalRedOp_t op);

struct Pattern {
  tidalDataType_t type;
  tidalRedOp_t op;  // the reduction countWrongReduced applies
  PatternKind kind;
  int nranks;
  uint64_t seed;  // varied between validation passes so stale results show
};

// buf[k] = input(rank, firstIndex + k) for k in [0, count).
void fillInput(void* buf, size_t count, const Pattern& p, int rank, size_t firstIndex);

// Number of k in [0, count) where buf[k] != input(rank, firstIndex + k).
int64_t countWrongInput(const void* buf, size_t count, const Pattern& p, int rank,
                        size_t firstIndex);

// Number of k where buf[k] != op over all ranks r of input(r, firstIndex + k).
int64_t countWrongReduced(const void* buf, size_t count, const Pattern& p, size_t firstIndex);

// Output buffers are pre-filled with a byte pattern so that elements a
// collective should have written but did not, or should have left alone but
// wrote, are detected.
void fillSentinel(void* buf, size_t bytes);
// Number of elements of elemSize bytes that differ from the sentinel.
int64_t countWrongSentinel(const void* buf, size_t count, size_t elemSize);

}  // namespace tidal::perf
