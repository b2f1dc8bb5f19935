// Where a collective's buffers live, decided once per call from what
// cudaPointerGetAttributes says about each buffer (cuda_support.h), before
// anything runs. A pure function of its inputs, so that every refusal is
// unit-tested on machines without a GPU.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "core/memory_kind.h"
#include "cuda/cuda_support.h"

namespace tidal {

// One buffer argument of a call, as the caller passed it.
struct BufferArg {
  const char* name;  // "sendbuff"
  const void* pointer;
  size_t bytes;  // 0: the call does not touch it (not classified)
};

struct CallMemory {
  MemoryKind kind = MemoryKind::Host;
  void* stream = nullptr;  // with kind Cuda: the cudaStream_t (nullptr: legacy default stream)
};

// Decides the call's memory kind from infos[i], the classification of
// buffers[i] (ignored where buffers[i].bytes == 0). `where` prefixes
// messages ("rank 3: tidalAllReduce"); commDevice is the communicator's CUDA
// device (-1: none). Throws:
//  - InvalidArgument when host and device buffers are mixed, naming both
//    buffers, their addresses and where each lives;
//  - InvalidArgument when a device buffer is on another device than the
//    communicator's (managed memory is accepted on any device);
//  - InvalidUsage when a stream comes with host buffers (host-buffer calls
//    block and take NULL).
// Device buffers with stream NULL are ordered on the legacy default stream.
// A call whose buffers are all empty follows the stream: ordered on it when
// one is given, a host call otherwise.
CallMemory decideCallMemory(const std::string& where, std::span<const BufferArg> buffers,
                            std::span<const cuda::PointerInfo> infos, void* stream, int commDevice);

}  // namespace tidal
