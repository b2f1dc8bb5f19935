#include "engine/host_data_plane.h"

#include <cstring>

#include "core/dtype.h"
#include "reduce/reduce.h"

namespace tidal {

void PlaneReducer::combine(void* dst, const void* local, const void* incoming, size_t bytes) const {
  plane_->reduce(dst, local, incoming, bytes / typeSize(type_), type_, op_, divisor_);
}

void HostDataPlane::copy(void* dst, const void* src, size_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, bytes);
}

void HostDataPlane::reduce(void* dst, const void* a, const void* b, size_t count,
                           tidalDataType_t type, tidalRedOp_t op, int divisor) {
  tidal::reduce(dst, a, b, count, type, op, divisor);
}

void HostDataPlane::readBack(void* to, const void* where, size_t bytes) {
  std::memcpy(to, where, bytes);
}

}  // namespace tidal
