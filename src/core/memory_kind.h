// Where a buffer lives. Transports report which kinds they can move; the
// reduction core dispatches on it. Until CUDA support lands every pointer is
// Host; the CUDA issue adds detection through cudaPointerGetAttributes.
#pragma once

namespace tidal {

enum class MemoryKind { Host, Cuda };

inline const char* memoryKindName(MemoryKind kind) {
  return kind == MemoryKind::Host ? "host" : "cuda";
}

}  // namespace tidal
