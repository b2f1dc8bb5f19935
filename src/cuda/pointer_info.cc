// cuda_support.h's describe(), the same in every build (messages and their
// tests do not depend on whether CUDA was built).
#include <fmt/format.h>

#include "cuda/cuda_support.h"

namespace tidal::cuda {

std::string describe(const PointerInfo& info) {
  if (info.kind == MemoryKind::Host) return "host memory";
  if (info.managed) return "CUDA managed memory";
  return fmt::format("CUDA device memory on device {}", info.device);
}

}  // namespace tidal::cuda
