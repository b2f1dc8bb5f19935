// Run-time dispatch to the CPU kernel families (cpu/kernels.h).
#include "reduce/reduce.h"

#include "core/dtype.h"
#include "core/error.h"
#include "reduce/cpu/kernels.h"

namespace tidal {

namespace {

struct KernelFamily {
  const char* name;
  void (*reduce)(void*, const void*, const void*, size_t, tidalDataType_t, tidalRedOp_t, int);
  void (*divide)(void*, const void*, size_t, tidalDataType_t, int);
};

// Chosen once: the CPU does not change under us, and a function-local static
// keeps the choice out of global mutable state.
const KernelFamily& kernels() {
  static const KernelFamily chosen =
      cpu::avx2Supported() ? KernelFamily{"avx2", cpu::reduceAvx2, cpu::divideAvx2}
                           : KernelFamily{"scalar", cpu::reduceScalar, cpu::divideScalar};
  return chosen;
}

void checkType(const char* what, tidalDataType_t type) {
  if (!isValidType(type)) fail(tidalInvalidArgument, "{}: invalid data type {}", what, int(type));
}

}  // namespace

void reduce(void* dst, const void* a, const void* b, size_t count, tidalDataType_t type,
            tidalRedOp_t op, int divisor) {
  checkType("reduce", type);
  if (!isValidOp(op)) fail(tidalInvalidArgument, "reduce: invalid reduction op {}", int(op));
  if (count == 0) return;
  kernels().reduce(dst, a, b, count, type, op, divisor);
}

void divideBy(void* dst, const void* src, size_t count, tidalDataType_t type, int divisor) {
  checkType("divideBy", type);
  if (count == 0) return;
  kernels().divide(dst, src, count, type, divisor);
}

const char* reduceKernelName() { return kernels().name; }

}  // namespace tidal
