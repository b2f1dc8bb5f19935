// tidalMemAlloc / tidalMemFree (CUDA device memory) and tidalCommRegister /
// tidalCommDeregister (a checked registry per communicator, registrations.h).
#include <cstdint>

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
    *handle = comm->registrations.add({buff, size, cuda::classify(buff).kind});
  });
}

tidalResult_t tidalCommDeregister(const tidalComm_t comm, void* handle) {
  constexpr const char* fn = "tidalCommDeregister";
  return guarded(comm, [&] {
    checkComm(comm, fn);
    if (!handle) return;  // what tidalCommRegister returns for an empty buffer
    if (!comm->registrations.remove(handle)) {
      fail(tidalInvalidArgument, "{}: handle {} {}", where(comm, fn), handle,
           registrationLiveElsewhere(handle)
               ? "was registered on another communicator"
               : "is not a registration of this communicator (unknown, or already deregistered)");
    }
  });
}

}  // extern "C"
