// The portable kernel family: element_ops.h in a loop. It is the fallback on
// CPUs without AVX2 and the family the SIMD kernels are tested against.
#include <cstring>

#include "reduce/cpu/element_ops.h"
#include "reduce/cpu/kernels.h"

namespace tidal::cpu {

void reduceScalar(void* dst, const void* a, const void* b, size_t count, tidalDataType_t type,
                  tidalRedOp_t op, int divisor) {
  visitType(type, [&](auto typeTag) {
    constexpr tidalDataType_t kType = decltype(typeTag)::value;
    using S = typename Element<kType>::Storage;
    auto* d = static_cast<S*>(dst);
    const auto* x = static_cast<const S*>(a);
    const auto* y = static_cast<const S*>(b);
    visitOp(op, [&](auto opTag) {
      constexpr tidalRedOp_t kOp = decltype(opTag)::value;
      if (divisor == 0) {
        reduceElements<kType, kOp, false>(d, x, y, count, divisor);
      } else {
        reduceElements<kType, kOp, true>(d, x, y, count, divisor);
      }
    });
  });
}

void divideScalar(void* dst, const void* src, size_t count, tidalDataType_t type, int divisor) {
  visitType(type, [&](auto typeTag) {
    constexpr tidalDataType_t kType = decltype(typeTag)::value;
    using S = typename Element<kType>::Storage;
    if (divisor == 0) {
      if (dst != src) std::memmove(dst, src, count * sizeof(S));
      return;
    }
    divideElements<kType>(static_cast<S*>(dst), static_cast<const S*>(src), count, divisor);
  });
}

}  // namespace tidal::cpu
