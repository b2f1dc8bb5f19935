#include "comm/call_memory.h"

#include "core/error.h"

namespace tidal {

CallMemory decideCallMemory(const std::string& where, std::span<const BufferArg> buffers,
                            std::span<const cuda::PointerInfo> infos, void* stream,
                            int commDevice) {
  const BufferArg* firstHost = nullptr;
  const BufferArg* firstDevice = nullptr;
  const cuda::PointerInfo* deviceInfo = nullptr;
  const cuda::PointerInfo* hostInfo = nullptr;
  for (size_t i = 0; i < buffers.size() && i < infos.size(); ++i) {
    if (buffers[i].bytes == 0) continue;
    if (infos[i].kind == MemoryKind::Host) {
      if (!firstHost) {
        firstHost = &buffers[i];
        hostInfo = &infos[i];
      }
      continue;
    }
    if (!firstDevice) {
      firstDevice = &buffers[i];
      deviceInfo = &infos[i];
    }
    if (!infos[i].managed && commDevice >= 0 && infos[i].device != commDevice) {
      fail(tidalInvalidArgument,
           "{}: {} {} is CUDA device memory on device {}, but this communicator uses device {} "
           "(call cudaSetDevice({}) before creating the communicator)",
           where, buffers[i].name, buffers[i].pointer, infos[i].device, commDevice,
           infos[i].device);
    }
  }
  if (firstHost && firstDevice) {
    fail(tidalInvalidArgument,
         "{}: {} {} is {} but {} {} is {}: pass every buffer in host memory or every buffer in "
         "CUDA device memory",
         where, firstHost->name, firstHost->pointer, cuda::describe(*hostInfo), firstDevice->name,
         firstDevice->pointer, cuda::describe(*deviceInfo));
  }
  if (firstDevice) return {MemoryKind::Cuda, stream};
  if (firstHost && stream != nullptr) {
    fail(tidalInvalidUsage,
         "{}: stream {} given with {} {} in host memory; collectives on host buffers block and "
         "take stream NULL",
         where, stream, firstHost->name, firstHost->pointer);
  }
  return stream != nullptr ? CallMemory{MemoryKind::Cuda, stream} : CallMemory{};
}

}  // namespace tidal
