#include "transports/ib/registration_cache.h"

#include <cerrno>

#include "core/error.h"
#include "transports/ib/gpu_direct.h"

namespace tidal::ib {

namespace {

constexpr int kRemoteAccess =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

}  // namespace

std::unique_ptr<RegistrationCache> makeRegistrationCache(const VerbsApi& api, ibv_pd* pd,
                                                         std::string where) {
  RegistrationCache::Backend backend;
  backend.tryRegister = [&api, pd](uintptr_t start, uintptr_t end, bool writable, int& err) {
    const int access = writable ? kRemoteAccess : IBV_ACCESS_REMOTE_READ;
    ibv_mr* mr = api.regMr(pd, reinterpret_cast<void*>(start), end - start, access);
    if (mr == nullptr) err = errno;
    return mr;
  };
  backend.deregister = [&api](ibv_mr* mr) { api.deregMr(mr); };
  backend.failed = [where = std::move(where)](uintptr_t start, uintptr_t end, int err) {
    fail(tidalSystemError,
         "{}: ibv_reg_mr of {} bytes at {:#x} failed: {}; the locked-memory limit (ulimit -l) "
         "is {}: raise it (e.g. LimitMEMLOCK=infinity, or 'ulimit -l unlimited')",
         where, end - start, start, errnoText(err), memlockText());
  };
  return std::make_unique<RegistrationCache>(std::move(backend));
}

RegistrationCache::Entry* pinMemory(RegistrationCache& cache, ibv_pd* pd, void* p, size_t bytes,
                                    MemoryKind kind, const GpuDirect* gpu,
                                    const std::string& where) {
  if (kind != MemoryKind::Cuda) return cache.pin(p, bytes);
  const auto addr = reinterpret_cast<uintptr_t>(p);
  if (gpu == nullptr) {
    fail(tidalInvalidUsage, "{}: CUDA memory at {:#x} cannot be registered: {}", where, addr,
         "GPUDirect RDMA is off (TIDAL_GDR)");
  }
  ibv_mr* mr = gpu->registerDeviceMemory(pd, p, bytes, kRemoteAccess);
  return cache.adopt(addr, addr + bytes, mr, kind);
}

}  // namespace tidal::ib
