// tidalMemAlloc / tidalMemFree (CUDA device memory), tidalCommRegister /
// tidalCommDeregister and tidalCommWindowRegister / tidalCommWindowDeregister
// (a checked registry per communicator, registrations.h; windows are
// registered and deregistered by every rank together, one_sided.h).
#include <cstdint>
#include <memory>
#include <vector>

#include "comm/api_guard.h"
#include "comm/registrations.h"

using namespace tidal;

extern "C" {

tidalResult_t tidalMemAlloc(void** ptr, size_t size) {
  constexpr const char* fn = "tidalMemAlloc";
  return guarded(nullptr, [&] {
    if (!ptr) fail(tidalInvalidArgument, "{}: ptr is NULL", fn);
    *ptr = nullptr;
    if (size == 0) fail(tidalInvalidArgument, "{}: size is 0", fn);
    if (!cuda::usable()) {
      fail(tidalInvalidUsage, "{}: {} bytes of device memory requested, but {}", fn, size,
           cuda::unavailableReason());
    }
    *ptr = cuda::allocateDeviceMemory(size);
  });
}

tidalResult_t tidalMemFree(void* ptr) {
  constexpr const char* fn = "tidalMemFree";
  return guarded(nullptr, [&] {
    if (ptr == nullptr) return;  // as free(NULL) and cudaFree(NULL)
    if (!cuda::usable()) {
      fail(tidalInvalidUsage, "{}: ptr {} cannot be device memory: {}", fn, ptr,
           cuda::unavailableReason());
    }
    if (cuda::classify(ptr).kind != MemoryKind::Cuda) {
      fail(tidalInvalidArgument, "{}: ptr {} is not CUDA device memory (not from tidalMemAlloc)",
           fn, ptr);
    }
    cuda::freeDeviceMemory(ptr);
  });
}

tidalResult_t tidalCommRegister(const tidalComm_t comm, void* buff, size_t size, void** handle) {
  constexpr const char* fn = "tidalCommRegister";
  return guarded(comm, [&] {
    checkComm(comm, fn);
    if (!handle) fail(tidalInvalidArgument, "{}: handle is NULL", where(comm, fn));
    *handle = nullptr;
    if (!buff) {
      fail(tidalInvalidArgument, "{}: buff is NULL (size {})", where(comm, fn), size);
    }
    // Nothing to register: NCCL's "skipped" answer, a NULL handle that
    // tidalCommDeregister accepts.
    if (size == 0) return;
    const uintptr_t start = reinterpret_cast<uintptr_t>(buff);
    if (size > UINTPTR_MAX - start) {
      fail(tidalInvalidArgument, "{}: buff {} + size {} overflows the address space",
           where(comm, fn), buff, size);
    }
    Registration r;
    r.pointer = buff;
    r.bytes = size;
    r.kind = cuda::classify(buff).kind;
    *handle = comm->registrations.add(r);
  });
}

}  // extern "C"

namespace {

// Removes handle (a window or a buffer registration) from comm's registry, or
// fails naming it and why it is not one of comm's.
void deregister(tidalComm_t comm, const char* fn, void* handle, bool window) {
  if (comm->registrations.remove(handle, window)) return;
  const char* what = window ? "win" : "handle";
  if (const auto r = comm->registrations.find(handle); r && r->window != window) {
    fail(tidalInvalidArgument, "{}: {} {} {}", where(comm, fn), what, handle,
         window ? "is a buffer registration (tidalCommRegister), not a window: "
                  "deregister it with tidalCommDeregister"
                : "is a window (tidalCommWindowRegister): deregister it with "
                  "tidalCommWindowDeregister");
  }
  fail(tidalInvalidArgument, "{}: {} {} {}", where(comm, fn), what, handle,
       registrationLiveElsewhere(handle)
           ? "was registered on another communicator"
           : "is not a registration of this communicator (unknown, or already deregistered)");
}

}  // namespace

extern "C" {

tidalResult_t tidalCommDeregister(const tidalComm_t comm, void* handle) {
  constexpr const char* fn = "tidalCommDeregister";
  return guarded(comm, [&] {
    checkComm(comm, fn);
    if (!handle) return;  // what tidalCommRegister returns for an empty buffer
    deregister(comm, fn, handle, false);
  });
}

tidalResult_t tidalCommWindowRegister(tidalComm_t comm, void* buff, size_t size, tidalWindow_t* win,
                                      int winFlags) {
  constexpr const char* fn = "tidalCommWindowRegister";
  return guarded(comm, [&] {
    checkComm(comm, fn);
    if (!win) fail(tidalInvalidArgument, "{}: win is NULL", where(comm, fn));
    *win = nullptr;
    if (!buff) fail(tidalInvalidArgument, "{}: buff is NULL (size {})", where(comm, fn), size);
    if (size == 0) fail(tidalInvalidArgument, "{}: size is 0 (buff {})", where(comm, fn), buff);
    constexpr int known = TIDAL_WIN_COLL_SYMMETRIC | TIDAL_WIN_STRICT_ORDERING;
    if ((winFlags & ~known) != 0) {
      fail(tidalInvalidArgument,
           "{}: winFlags {:#x} has bits outside TIDAL_WIN_COLL_SYMMETRIC | "
           "TIDAL_WIN_STRICT_ORDERING",
           where(comm, fn), static_cast<unsigned>(winFlags));
    }
    const uintptr_t start = reinterpret_cast<uintptr_t>(buff);
    if (size > UINTPTR_MAX - start) {
      fail(tidalInvalidArgument, "{}: buff {} + size {} overflows the address space",
           where(comm, fn), buff, size);
    }
    Registration r;
    r.pointer = buff;
    r.bytes = size;
    r.kind = cuda::classify(buff).kind;
    r.window = true;
    // Collective: every rank's part, for tidalPutSignal (one_sided.h).
    r.spans = std::make_shared<const std::vector<WindowSpan>>(
        comm->impl->registerWindow(buff, size, r.kind == MemoryKind::Cuda, winFlags, &r.number));
    *win = static_cast<tidalWindow_t>(comm->registrations.add(r));
  });
}

tidalResult_t tidalCommWindowDeregister(tidalComm_t comm, tidalWindow_t win) {
  constexpr const char* fn = "tidalCommWindowDeregister";
  return guarded(comm, [&] {
    checkComm(comm, fn);
    if (!win) return;  // as NCCL: nothing to deregister
    // Collective once the handle is known to be this communicator's window:
    // no peer puts into it after this returns.
    if (const auto r = comm->registrations.find(win); r && r->window) {
      comm->impl->deregisterWindow(r->number);
    }
    deregister(comm, fn, win, true);
  });
}

}  // extern "C"
