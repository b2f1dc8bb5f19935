// DeviceBuffers in a build without CUDA: -W cuda is refused.
#include <stdexcept>

#include "device_buffers.h"

namespace tidal::perf {

std::unique_ptr<DeviceBuffers> DeviceBuffers::create(size_t, bool) {
  throw std::runtime_error("-W cuda: this build has no CUDA support (TIDAL_WITH_CUDA)");
}

}  // namespace tidal::perf
