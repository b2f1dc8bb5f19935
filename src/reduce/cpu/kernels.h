// The CPU kernel families behind tidal::reduce (reduce.h), exposed so tests
// and benchmarks can run each one explicitly. Library code calls reduce.h.
//
// Every family computes exactly the same bits as the others for every type,
// op and divisor (element_ops.h defines them); only NaN payloads may differ
// when both inputs are NaN. Type and op must be valid (reduce.h checks).
#pragma once

#include <cstddef>

#include "tidal/tidal.h"

namespace tidal::cpu {

// Portable C++: runs on any CPU.
void reduceScalar(void* dst, const void* a, const void* b, size_t count, tidalDataType_t type,
                  tidalRedOp_t op, int divisor);
void divideScalar(void* dst, const void* src, size_t count, tidalDataType_t type, int divisor);

// True when the CPU has AVX2 and F16C (and the OS saves YMM state), so the
// AVX2 family may run. Always false on non-x86 builds.
bool avx2Supported();

// AVX2 + F16C. Call only when avx2Supported().
void reduceAvx2(void* dst, const void* a, const void* b, size_t count, tidalDataType_t type,
                tidalRedOp_t op, int divisor);
void divideAvx2(void* dst, const void* src, size_t count, tidalDataType_t type, int divisor);

}  // namespace tidal::cpu
