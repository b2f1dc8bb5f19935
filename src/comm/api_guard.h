// What every C entry point shares: the handle behind tidalComm_t, the
// exception -> result code conversion (guarded), and the argument checks whose
// messages name the argument, its value and the rank. Used by api.cc and the
// api_*.cc files that add the NCCL 2.30 calls.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "comm/call_memory.h"
#include "comm/communicator.h"
#include "comm/group.h"
#include "comm/premul_sum.h"
#include "comm/registrations.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/log.h"
#include "cuda/cuda_support.h"
#include "tidal/tidal.h"

namespace tidal {

// A non-blocking init (tidalConfig_t::blocking = 0) running on its own thread.
struct PendingInit {
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  tidalResult_t result = tidalSuccess;
  std::string error;
  std::unique_ptr<Communicator> made;  // moved into the handle once seen done
  std::thread thread;
};

}  // namespace tidal

struct tidalComm {
  std::unique_ptr<tidal::Communicator> impl;
  // tidalConfig_t::commName, "" when none; "comm 'NAME' " before log lines and errors.
  std::string name;
  std::string prefix;
  // Set by tidalCommFinalize: later calls other than queries and destroy fail.
  std::atomic<bool> finalized{false};
  // Non-null for a non-blocking init; written before the handle is returned, then read-only.
  std::unique_ptr<tidal::PendingInit> pending;
  tidal::RedOpTable redOps;
  tidal::Registrations registrations;

  ~tidalComm() {
    if (pending && pending->thread.joinable()) pending->thread.join();
  }
};

namespace tidal {

inline thread_local std::string threadLastError;

// Moves a finished non-blocking init's communicator into the handle. With
// `wait` it first waits for the init to finish (bounded: init's waits are
// bounded by TIDAL_TIMEOUT). Returns false while the init is still running.
inline bool settle(tidalComm_t comm, bool wait) {
  if (comm == nullptr || !comm->pending) return true;
  PendingInit& p = *comm->pending;
  std::unique_lock lock(p.mutex);
  if (!p.done && !wait) return false;
  p.cv.wait(lock, [&] { return p.done; });
  if (p.made) comm->impl = std::move(p.made);
  if (p.thread.joinable()) p.thread.join();
  return true;
}

// For tidalCommGetAsyncError: true while a non-blocking init runs (*status =
// tidalInProgress) or after it failed (*status = its error).
inline bool asyncInitStatus(tidalComm_t comm, tidalResult_t* status) {
  if (comm == nullptr || !comm->pending) return false;
  if (!settle(comm, false)) {
    *status = tidalInProgress;
    return true;
  }
  if (comm->impl) return false;
  *status = comm->pending->result;
  return true;
}

// For tidalCommDestroy / tidalCommAbort: frees a handle whose (non-blocking)
// init failed, which has no communicator to tear down. True when it did.
inline bool deleteIfNoCommunicator(tidalComm_t comm) {
  if (comm == nullptr) return false;
  settle(comm, true);
  if (comm->impl) return false;
  if (!comm->pending) return false;  // not a handle of ours: let checkComm say so
  delete comm;
  return true;
}

// "comm 'NAME' " before an error text of a named communicator.
inline std::string withName(tidalComm_t comm, const std::string& text) {
  if (comm == nullptr || comm->name.empty()) return text;
  return comm->prefix + (text.rfind("rank ", 0) == 0 ? "" : ": ") + text;
}

// What a tidalConfig_t asks of a new communicator (api_config.cc).
struct InitOptions {
  bool blocking = true;
  std::string name;  // commName, "" when none
};
// Checks and reads *config (NULL: defaults); errors name `fn`, the field and `rank`.
InitOptions readConfig(const tidalConfig_t* config, const char* fn, int rank);

// tidalCommInitRank and its config variants (api_config.cc): checks the
// arguments (messages name `fn`), reads config (NULL: defaults) and creates
// the communicator; tidalInProgress when it completes in the background.
tidalResult_t initCommunicator(const char* fn, tidalComm_t* comm, int nranks, int rank,
                               const tidalUniqueId& commId, tidalConfig_t* config);

// Runs `body`, converting exceptions into a result code and last-error text
// (on the communicator when there is one, else on the calling thread).
template <typename Body>
tidalResult_t guarded(tidalComm_t comm, Body&& body) {
  settle(comm, true);
  // Counted until the last touch of the communicator below, so that
  // tidalCommAbort on another thread frees it only after this call is out.
  std::optional<Communicator::CallScope> scope;
  if (comm && comm->impl) scope.emplace(*comm->impl);
  std::optional<log::ScopedPrefix> logPrefix;
  if (comm && !comm->name.empty()) logPrefix.emplace(comm->prefix);
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
  text = withName(comm, text);
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

// Calls still valid after tidalCommFinalize: teardown, queries, releasing what
// was created on the communicator.
inline bool allowedAfterFinalize(const char* fn) {
  for (const char* ok : {"tidalCommDestroy", "tidalCommAbort", "tidalCommCount",
                         "tidalCommUserRank", "tidalCommCuDevice", "tidalCommGetAsyncError",
                         "tidalCommDeregister", "tidalRedOpDestroy", "tidalCommFinalize"}) {
    if (std::strcmp(fn, ok) == 0) return true;
  }
  return false;
}

inline Communicator& checkComm(tidalComm_t comm, const char* fn) {
  if (comm == nullptr) fail(tidalInvalidArgument, "{}: comm is NULL", fn);
  if (!comm->impl) {
    if (comm->pending) {
      fail(comm->pending->result, "{}: the communicator's initialisation failed: {}", fn,
           comm->pending->error);
    }
    fail(tidalInvalidArgument, "{}: comm is NULL", fn);
  }
  if (comm->finalized.load(std::memory_order_relaxed) && !allowedAfterFinalize(fn)) {
    fail(tidalInvalidUsage,
         "{}: the communicator was finalized (tidalCommFinalize); only tidalCommDestroy, "
         "tidalCommAbort and queries may follow",
         where(comm, fn));
  }
  return *comm->impl;
}

// By reference, so that an out-of-range value is never loaded (enumBits).
inline void checkType(tidalComm_t comm, const char* fn, const tidalDataType_t& type) {
  if (const int bits = enumBits(type); !isValidType(bits)) {
    fail(tidalInvalidArgument, "{}: datatype {} is not a tidalDataType_t (valid: 0..{})",
         where(comm, fn), bits, tidalNumTypes - 1);
  }
}

inline void checkOp(tidalComm_t comm, const char* fn, const tidalRedOp_t& op) {
  if (const int bits = enumBits(op); !isValidOp(bits)) {
    fail(tidalInvalidArgument, "{}: op {} is not a tidalRedOp_t (valid: 0..{})", where(comm, fn),
         bits, tidalNumOps - 1);
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
