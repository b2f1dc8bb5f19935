// ib's memory registrations: the shared cache (transports/registration_cache.h)
// over ibv_reg_mr in one protection domain.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <memory>
#include <string>

#include "core/memory_kind.h"
#include "transports/ib/verbs_api.h"
#include "transports/registration_cache.h"

namespace tidal::ib {

class GpuDirect;

using RegistrationCache = tidal::RegistrationCache<ibv_mr>;

// A cache whose misses call ibv_reg_mr in `pd` with local and remote write
// access (remote read only for a read-only mapping); `where` names the
// device in its errors, which name the range and the locked-memory limit.
std::unique_ptr<RegistrationCache> makeRegistrationCache(const VerbsApi& api, ibv_pd* pd,
                                                         std::string where);

// Explicit registration (Transport::registerMemory): host memory through the
// cache; CUDA memory through `gpu` (dma-buf or peer memory), registered
// exactly rather than by host pages. InvalidUsage for CUDA memory without
// GPUDirect.
RegistrationCache::Entry* pinMemory(RegistrationCache& cache, ibv_pd* pd, void* p, size_t bytes,
                                    MemoryKind kind, const GpuDirect* gpu,
                                    const std::string& where);

}  // namespace tidal::ib
