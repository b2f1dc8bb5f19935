// The reduction core: dst[i] = a[i] OP b[i] for every supported type and op.
//
// This header is the only entry point; it dispatches on (type, op, memory
// kind) to the CPU SIMD kernels in cpu/ (and, once CUDA lands, to cuda/).
// No transport code here.
//
// Semantics (the tests hold the library to them):
//  - Integers wrap around on overflow (two's complement), never UB.
//  - float16 and bfloat16 are computed in float32 and rounded once to nearest-even.
//  - min/max: if either input is NaN the result is NaN.
//  - avg: callers reduce with tidalSum (or tidalAvg, which reduce() treats
//    exactly like tidalSum) and pass divisor = nranks on the final step, which
//    computes (a + b) / divisor. divisor == 0 means "no division", whatever the
//    op; a non-zero divisor divides the result of any op. Floats divide in
//    their own precision (float16/bfloat16 in float32, then one rounding), by
//    a true division, never a reciprocal multiply. Integers truncate toward
//    zero (C++ semantics; INT_MIN / -1 wraps). Divisors are meant to be > 0;
//    for unsigned types a negative divisor is taken modulo 2^64.
//  - dst may alias a or b exactly (in-place); partial overlap is not allowed.
//    Pointers need only element alignment; any count (including 0) is fine.
//  - An invalid type or op throws tidal::Error(tidalInvalidArgument).
//  - The SIMD and scalar kernels give identical bits for every input (only
//    the payload of a NaN may differ when both inputs are NaN).
#pragma once

#include <cstddef>

#include "tidal/tidal.h"

namespace tidal {

void reduce(void* dst, const void* a, const void* b, size_t count, tidalDataType_t type,
            tidalRedOp_t op, int divisor = 0);

// dst[i] = src[i] / divisor (integers truncate), with the same rounding as
// reduce(). Used for avg on a single rank and by chain algorithms whose final
// step is a plain copy. divisor == 0 copies. dst may equal src.
void divideBy(void* dst, const void* src, size_t count, tidalDataType_t type, int divisor);

// Name of the kernel family chosen at run time ("avx2" or "scalar"), for logs.
const char* reduceKernelName();

}  // namespace tidal
