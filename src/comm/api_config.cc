// The NCCL 2.30 init and lifecycle calls: tidalCommInitRankConfig (blocking
// and non-blocking init, commName), tidalCommInitRankScalable,
// tidalCommFinalize, tidalCommCuDevice. Argument checks and error texts follow
// api.cc (argument, value, rank).
#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "bootstrap/bootstrap.h"
#include "comm/api_guard.h"

using namespace tidal;

namespace {

// The oldest layout accepted: NCCL 2.14's, the first with a config, ends with netName.
constexpr size_t kMinConfigSize = offsetof(tidalConfig_t, netName) + sizeof(const char*);
constexpr size_t kMaxNameBytes = 256;

void checkInitArgs(const char* fn, tidalComm_t* comm, int nranks, int rank) {
  if (!comm) fail(tidalInvalidArgument, "{}: comm is NULL (rank {})", fn, rank);
  *comm = nullptr;
  if (nranks < 1) {
    fail(tidalInvalidArgument, "{}: nranks {} must be at least 1 (rank {})", fn, nranks, rank);
  }
  if (rank < 0 || rank >= nranks) {
    fail(tidalInvalidArgument, "{}: rank {} is out of range for {} ranks", fn, rank, nranks);
  }
}

// Creates the handle; blocking: the communicator too, here. Non-blocking: a
// thread creates it and the handle's PendingInit reports when it is done.
// Returns true when the init goes on in the background.
bool initComm(tidalComm_t* comm, int nranks, const UniqueId& id, int rank,
              const InitOptions& options) {
  auto handle = std::make_unique<tidalComm>();
  handle->name = options.name;
  if (!options.name.empty()) handle->prefix = fmt::format("comm '{}' ", options.name);
  if (options.blocking) {
    std::optional<log::ScopedPrefix> logPrefix;
    if (!handle->name.empty()) logPrefix.emplace(handle->prefix);
    try {
      handle->impl = Communicator::create(id, rank, nranks);
    } catch (const Error& e) {
      throw Error(e.code(), withName(handle.get(), e.what()));
    }
    *comm = handle.release();
    return false;
  }
  handle->pending = std::make_unique<PendingInit>();
  PendingInit* p = handle->pending.get();
  const std::string prefix = handle->name.empty() ? std::string() : handle->prefix;
  tidalComm* raw = handle.get();
  p->thread = std::thread([p, raw, prefix, id, rank, nranks] {
    log::ScopedPrefix logPrefix(prefix);
    std::unique_ptr<Communicator> made;
    tidalResult_t result = tidalSuccess;
    std::string error;
    try {
      made = Communicator::create(id, rank, nranks);
    } catch (const Error& e) {
      result = e.code();
      error = withName(raw, e.what());
    } catch (const std::bad_alloc&) {
      result = tidalSystemError;
      error = withName(raw, "out of host memory");
    } catch (const std::exception& e) {
      result = tidalInternalError;
      error = withName(raw, std::string("internal error: ") + e.what());
    }
    if (result != tidalSuccess) TIDAL_WARN(Init, "{}", error);
    std::scoped_lock lock(p->mutex);
    p->made = std::move(made);
    p->result = result;
    p->error = std::move(error);
    p->done = true;
    p->cv.notify_all();
  });
  *comm = handle.release();
  return true;
}

}  // namespace

namespace tidal {

InitOptions readConfig(const tidalConfig_t* config, const char* fn, int rank) {
  InitOptions o;
  if (config == nullptr) return o;
  if (config->magic != TIDAL_API_MAGIC) {
    fail(tidalInvalidArgument,
         "{}: config->magic {:#x} is not TIDAL_API_MAGIC ({:#x}): initialise the config with "
         "TIDAL_CONFIG_INITIALIZER (rank {})",
         fn, config->magic, TIDAL_API_MAGIC, rank);
  }
  if (config->size < kMinConfigSize || config->size > sizeof(tidalConfig_t)) {
    fail(tidalInvalidArgument,
         "{}: config->size {} is outside {}..{} (sizeof(tidalConfig_t)): initialise the config "
         "with TIDAL_CONFIG_INITIALIZER (rank {})",
         fn, config->size, kMinConfigSize, sizeof(tidalConfig_t), rank);
  }
  if (config->version < static_cast<unsigned>(TIDAL_VERSION(2, 14, 0)) ||
      config->version > static_cast<unsigned>(TIDAL_VERSION_CODE)) {
    fail(tidalInvalidArgument,
         "{}: config->version {} is outside {}..{} (NCCL 2.14 to this header's {}) (rank {})", fn,
         config->version, TIDAL_VERSION(2, 14, 0), TIDAL_VERSION_CODE, TIDAL_VERSION_CODE, rank);
  }
  // A config from an older header is shorter: the fields it lacks keep their defaults.
  tidalConfig_t c = TIDAL_CONFIG_INITIALIZER;
  std::memcpy(&c, config, config->size);
  if (c.blocking != TIDAL_CONFIG_UNDEF_INT && c.blocking != 0 && c.blocking != 1) {
    fail(tidalInvalidArgument,
         "{}: config->blocking {} must be 0, 1 or TIDAL_CONFIG_UNDEF_INT (rank {})", fn, c.blocking,
         rank);
  }
  o.blocking = c.blocking != 0;
  if (config->size >= offsetof(tidalConfig_t, commName) + sizeof(const char*) &&
      c.commName != nullptr) {
    const size_t length = strnlen(c.commName, kMaxNameBytes);
    if (length == kMaxNameBytes) {
      fail(tidalInvalidArgument, "{}: config->commName is longer than {} bytes (rank {})", fn,
           kMaxNameBytes - 1, rank);
    }
    o.name.assign(c.commName, length);
  }
  return o;
}

tidalResult_t initCommunicator(const char* fn, tidalComm_t* comm, int nranks, int rank,
                               const tidalUniqueId& commId, tidalConfig_t* config) {
  bool inBackground = false;
  const tidalResult_t r = guarded(nullptr, [&] {
    checkInitArgs(fn, comm, nranks, rank);
    const InitOptions options = readConfig(config, fn, rank);
    inBackground = initComm(comm, nranks, decodeUniqueId(commId), rank, options);
  });
  return r == tidalSuccess && inBackground ? tidalInProgress : r;
}

}  // namespace tidal

extern "C" {

tidalResult_t tidalCommInitRankConfig(tidalComm_t* comm, int nranks, tidalUniqueId commId, int rank,
                                      tidalConfig_t* config) {
  return initCommunicator("tidalCommInitRankConfig", comm, nranks, rank, commId, config);
}

tidalResult_t tidalCommInitRankScalable(tidalComm_t* newcomm, int nranks, int myrank, int nId,
                                        tidalUniqueId* commIds, tidalConfig_t* config) {
  constexpr const char* fn = "tidalCommInitRankScalable";
  if (nId < 1 || nId > nranks || commIds == nullptr) {
    return guarded(nullptr, [&] {
      if (newcomm) *newcomm = nullptr;
      if (nId < 1 || nId > std::max(nranks, 1)) {
        fail(tidalInvalidArgument,
             "{}: nId {} is outside 1..{} (one id per rank at most) (rank {})", fn, nId,
             std::max(nranks, 1), myrank);
      }
      fail(tidalInvalidArgument, "{}: commIds is NULL ({} id(s) expected) (rank {})", fn, nId,
           myrank);
    });
  }
  // Every id is accepted; the rendezvous goes through the first alone.
  return initCommunicator(fn, newcomm, nranks, myrank, commIds[0], config);
}

tidalResult_t tidalCommFinalize(tidalComm_t comm) {
  constexpr const char* fn = "tidalCommFinalize";
  return guarded(comm, [&] {
    Communicator& c = checkComm(comm, fn);
    if (comm->finalized.load()) {
      fail(tidalInvalidUsage, "{}: the communicator is already finalized", where(comm, fn));
    }
    // A host barrier first waits for the stream-ordered work queued before it,
    // then for every rank: afterwards nothing is in flight anywhere.
    c.barrier(CallMemory{});
    comm->finalized.store(true);
  });
}

tidalResult_t tidalCommCuDevice(const tidalComm_t comm, int* device) {
  constexpr const char* fn = "tidalCommCuDevice";
  return guarded(comm, [&] {
    Communicator& c = checkComm(comm, fn);
    if (!device) fail(tidalInvalidArgument, "{}: device is NULL", where(comm, fn));
    *device = c.cudaDevice();
  });
}

}  // extern "C"
