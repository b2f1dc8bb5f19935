// What every C entry point shares: the handle behind tidalComm_t, the
// conversion of exceptions into a result code plus last-error text, and the
// argument checks whose messages name the argument, its value and the rank.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "comm/call_memory.h"
#include "comm/communicator.h"
#include "comm/group.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/log.h"
#include "cuda/cuda_support.h"
#include "tidal/tidal.h"

struct tidalComm {
  std::unique_ptr<tidal::Communicator> impl;
};

namespace tidal {

inline thread_local std::string threadLastError;

// Runs `body`, converting exceptions into a result code and last-error text
// (on the communicator when there is one, else on the calling thread).
template <typename Body>
tidalResult_t guarded(tidalComm_t comm, Body&& body) {
  // Counted until the last touch of the communicator below, so that
  // tidalCommAbort on another thread frees it only after this call is out.
  std::optional<Communicator::CallScope> scope;
  if (comm && comm->impl) scope.emplace(*comm->impl);
  tidalResult_t result = tidalSuccess;
  std::string text;
  try {
    body();
    return tidalSuccess;
  } catch (const Error& e) {
    result = e.code();
    text = e.what();
  } catch (const std::bad_alloc&) {
    result = tidalSystemError;
    text = "out of host memory";
  } catch (const std::exception& e) {
    result = tidalInternalError;
    text = std::string("internal error: ") + e.what();
  }
  TIDAL_WARN(Init, "{}", text);
  threadLastError = text;
  if (comm && comm->impl) comm->impl->setLastError(text);
  return result;
}

// As guarded, for calls that a group may record: a failure inside a group
// also fails the group (tidalGroupEnd reports it and runs nothing).
template <typename Body>
tidalResult_t groupGuarded(tidalComm_t comm, Body&& body) {
  return guarded(comm, [&] {
    try {
      body();
    } catch (const Error& e) {
      if (group::active()) group::noteFailure(e.code(), e.what());
      throw;
    }
  });
}

// "rank 3: " once the communicator is known, so every message says where.
inline std::string where(tidalComm_t comm, const char* fn) {
  if (comm && comm->impl) return fmt::format("rank {}: {}", comm->impl->rank(), fn);
  return fn;
}

inline Communicator& checkComm(tidalComm_t comm, const char* fn) {
  if (comm == nullptr || !comm->impl) fail(tidalInvalidArgument, "{}: comm is NULL", fn);
  return *comm->impl;
}

inline void checkType(tidalComm_t comm, const char* fn, tidalDataType_t type) {
  if (!isValidType(type)) {
    fail(tidalInvalidArgument, "{}: datatype {} is not a tidalDataType_t (valid: 0..{})",
         where(comm, fn), static_cast<int>(type), tidalNumTypes - 1);
  }
}

inline void checkOp(tidalComm_t comm, const char* fn, tidalRedOp_t op) {
  if (!isValidOp(op)) {
    fail(tidalInvalidArgument, "{}: op {} is not a tidalRedOp_t (valid: 0..{})", where(comm, fn),
         static_cast<int>(op), tidalNumOps - 1);
  }
}

// count * elements-per-count * type size must fit in the address space.
inline size_t checkBytes(tidalComm_t comm, const char* fn, const char* argName, size_t count,
                         size_t multiplier, tidalDataType_t type) {
  const size_t ts = typeSize(type);
  const size_t limit = static_cast<size_t>(PTRDIFF_MAX);
  if (count != 0 && (multiplier > limit / count || count * multiplier > limit / ts)) {
    fail(tidalInvalidArgument, "{}: {} {} x {} rank(s) x {} bytes ({}) overflows the address space",
         where(comm, fn), argName, count, multiplier, ts, typeName(type));
  }
  return count * multiplier * ts;
}

inline void checkBuffer(tidalComm_t comm, const char* fn, const char* argName, const void* p,
                        size_t bytes) {
  if (p == nullptr && bytes > 0) {
    fail(tidalInvalidArgument, "{}: {} is NULL ({} bytes expected)", where(comm, fn), argName,
         bytes);
  }
}

inline void checkRoot(tidalComm_t comm, const char* fn, int root) {
  const int n = comm->impl->nranks();
  if (root < 0 || root >= n) {
    fail(tidalInvalidArgument, "{}: root {} is out of range for {} ranks (valid: 0..{})",
         where(comm, fn), root, n, n - 1);
  }
}

// Where the call's buffers live (host or CUDA device memory) and the stream
// it is ordered on; refuses mixed buffers and streams without CUDA
// (call_memory.h). Buffers of zero bytes are not looked at.
inline CallMemory checkMemory(tidalComm_t comm, const char* fn, void* stream,
                              std::initializer_list<BufferArg> buffers) {
  if (!cuda::usable()) {
    if (stream != nullptr) {
      fail(tidalInvalidUsage, "{}: stream {} given, but {}; pass NULL for host buffers",
           where(comm, fn), stream, cuda::unavailableReason());
    }
    return {};
  }
  cuda::PointerInfo infos[4];
  size_t i = 0;
  for (const BufferArg& b : buffers) {
    if (b.bytes > 0 && i < std::size(infos)) infos[i] = cuda::classify(b.pointer);
    ++i;
  }
  return decideCallMemory(where(comm, fn), {buffers.begin(), buffers.size()},
                          {infos, buffers.size()}, stream, comm->impl->cudaDevice());
}

// Buffers that overlap without being the documented in-place layout would be
// read after they are overwritten: refuse rather than corrupt silently.
inline void checkOverlap(tidalComm_t comm, const char* fn, const void* a, size_t aBytes,
                         const void* b, size_t bBytes, bool inPlace) {
  if (inPlace || aBytes == 0 || bBytes == 0) return;
  const auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
  if (pa < pb + bBytes && pb < pa + aBytes) {
    fail(tidalInvalidArgument,
         "{}: sendbuff {} ({} bytes) and recvbuff {} ({} bytes) overlap but are not in place",
         where(comm, fn), a, aBytes, b, bBytes);
  }
}

}  // namespace tidal
