/*
 * nccl_device.h for Tidal's NCCL drop-in (libnccl.so.2).
 *
 * NCCL 2.28 added a device API: kernels that communicate themselves through
 * a device communicator (ncclDevComm), teams, load/store-accessible (LSA)
 * windows, barriers and GPU-initiated networking (GIN). Tidal has no
 * device-initiated communication. This header exists so that code written
 * for NCCL >= 2.28 (nccl-tests among it) compiles and runs its host paths:
 *
 * - ncclCommQueryProperties reports deviceApiSupport = false, no multimem,
 *   no GIN; a program that asks before it creates a device communicator
 *   (as nccl-tests does) keeps to its host path.
 * - ncclDevCommCreate and ncclDevCommDestroy return ncclInvalidUsage, and
 *   ncclGetLastError names the call.
 * - The device-side types and calls below are declared so kernels compile;
 *   a device call that communicates traps (__trap) if ever reached, which it
 *   cannot be without a device communicator.
 *
 * Written for Tidal from the facts of NCCL 2.30's public device API (names,
 * struct fields and initialisers a program relies on); a subset, not NCCL's
 * header. The host part is plain C; the device part needs C++ and nvcc.
 * docs/nccl.md, "The device API".
 */
#ifndef NCCL_DEVICE_H_
#define NCCL_DEVICE_H_

#include <stddef.h>
#include <stdint.h>
#ifndef __cplusplus
#include <stdbool.h>
#endif

#include "nccl.h"

#if defined(__CUDACC__)
#include <cuda/atomic>
#define NCCL_DEVICE_TIDAL_HD __host__ __device__ __forceinline__
#define NCCL_DEVICE_TIDAL_D __device__ __forceinline__
#elif defined(__cplusplus)
#define NCCL_DEVICE_TIDAL_HD inline
#else
#define NCCL_DEVICE_TIDAL_HD static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Handles and ids of device-side resources. */
typedef uint32_t ncclDevResourceHandle;
typedef ncclDevResourceHandle ncclDevResourceHandle_t;
typedef uint32_t ncclGinSignal_t;
typedef uint32_t ncclGinCounter_t;

/* A team: nRanks ranks of the world, this rank's index among them, and the
 * stride between consecutive members' world ranks. */
typedef struct ncclTeam {
  int nRanks, rank, stride;
} ncclTeam_t;

typedef struct ncclMultimemHandle {
  void* mcBasePtr;
} ncclMultimemHandle_t;

typedef struct ncclLsaBarrierHandle {
  ncclDevResourceHandle_t bufHandle;
  int nBarriers;
} ncclLsaBarrierHandle_t;

typedef struct ncclGinBarrierHandle {
  ncclGinSignal_t signal0;
  ncclDevResourceHandle_t reserved;
} ncclGinBarrierHandle_t;

typedef enum {
  NCCL_GIN_CONNECTION_NONE = 0,
  NCCL_GIN_CONNECTION_FULL = 1,
  NCCL_GIN_CONNECTION_RAIL = 2
} ncclGinConnectionType_t;

/* NCCL's values (1 is unused). Tidal reports NCCL_GIN_TYPE_NONE. */
typedef enum {
  NCCL_GIN_TYPE_NONE = 0,
  NCCL_GIN_TYPE_PROXY = 2,
  NCCL_GIN_TYPE_GDAKI = 3,
  NCCL_GIN_TYPE_GPI = 4
} ncclGinType_t;

/* Extra buffers, GIN signals and counters a device communicator should carry
 * (linked lists hung off ncclDevCommRequirements). */
typedef struct ncclDevResourceRequirements {
  struct ncclDevResourceRequirements* next;
  size_t bufferSize, bufferAlign;
  ncclDevResourceHandle_t* outBufferHandle;
  int ginSignalCount;
  int ginCounterCount;
  ncclGinSignal_t* outGinSignalStart;
  ncclGinCounter_t* outGinCounterStart;
} ncclDevResourceRequirements_t;

typedef struct ncclTeamRequirements {
  struct ncclTeamRequirements* next;
  ncclTeam_t team;
  bool multimem;
  ncclMultimemHandle_t* outMultimemHandle;
} ncclTeamRequirements_t;

/* What ncclDevCommCreate is asked for. Field order and types are NCCL 2.30's;
 * initialise with NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER. */
typedef struct ncclDevCommRequirements {
  size_t size;
  unsigned int magic;
  unsigned int version;
  ncclDevResourceRequirements_t* resourceRequirementsList;
  ncclTeamRequirements_t* teamRequirementsList;
  bool lsaMultimem;
  int barrierCount;
  int lsaBarrierCount;
  int railGinBarrierCount;
  int lsaLLA2ABlockCount, lsaLLA2ASlotCount;
  bool ginForceEnable;
  int ginContextCount;
  int ginSignalCount;
  int ginCounterCount;
  ncclGinConnectionType_t ginConnectionType;
  bool ginExclusiveContexts;
  int ginQueueDepth;
  int ginTrafficClass;
  int worldGinBarrierCount;
  bool ginStrongSignalsRequired;
  bool ginVaSignalsRequired;
} ncclDevCommRequirements_t;

/* NCCL's defaults: everything off, four GIN contexts (a hint), strong and VA
 * signals allowed. */
#define NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER                                                     \
  {                                                                                                \
    sizeof(ncclDevCommRequirements_t), NCCL_API_MAGIC, NCCL_VERSION_CODE, NULL, NULL, false, 0, 0, \
        0, 0, 0, false, 4, 0, 0, NCCL_GIN_CONNECTION_NONE, false, 0, NCCL_CONFIG_UNDEF_INT, 0,     \
        true, true                                                                                 \
  }

/* What a communicator supports (ncclCommQueryProperties). Field order and
 * types are NCCL 2.30's; initialise with NCCL_COMM_PROPERTIES_INITIALIZER so
 * that size, magic and version are set. */
typedef struct ncclCommProperties {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int rank;
  int nRanks;
  int cudaDev;
  int nvmlDev;
  bool deviceApiSupport;
  bool multimemSupport;
  ncclGinType_t ginType;
  int nLsaTeams;
  bool hostRmaSupport;
  ncclGinType_t railedGinType;
} ncclCommProperties_t;

#define NCCL_COMM_PROPERTIES_INITIALIZER                                                       \
  {                                                                                            \
    sizeof(ncclCommProperties_t), NCCL_API_MAGIC, NCCL_VERSION_CODE, 0, 0, 0, 0, false, false, \
        NCCL_GIN_TYPE_NONE, 0, false, NCCL_GIN_TYPE_NONE                                       \
  }

/* A device communicator: what a kernel receives by value. ncclDevCommCreate
 * never makes one on Tidal, so the layout is Tidal's own (the fields kernels
 * read, by NCCL's names); a default-constructed one is all zeros. */
typedef struct ncclDevComm {
  unsigned int magic;
  unsigned int version;
  int rank, nRanks;
  int lsaRank, lsaSize;
  ncclWindow_t resourceWindow;
  ncclMultimemHandle_t lsaMultimem;
  ncclLsaBarrierHandle_t lsaBarrier;
  ncclGinBarrierHandle_t railGinBarrier;
  ncclGinBarrierHandle_t worldGinBarrier;
  int ginSignalCount;
  int ginCounterCount;
  uint32_t ginContextCount;
} ncclDevComm_t;

/* Host calls (libnccl.so.2). */

/* Fills the fields of *props that its size covers. Tidal: rank, nRanks and
 * cudaDev of comm; nvmlDev -1; deviceApiSupport, multimemSupport and
 * hostRmaSupport false; ginType and railedGinType NCCL_GIN_TYPE_NONE; every
 * rank is its own LSA team, so nLsaTeams is nRanks. */
ncclResult_t ncclCommQueryProperties(ncclComm_t comm, ncclCommProperties_t* props);
/* Tidal: always ncclInvalidUsage (ncclInvalidArgument for a NULL argument);
 * *outDevComm is left untouched. */
ncclResult_t ncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const* reqs,
                               ncclDevComm_t* outDevComm);
/* Tidal: always ncclInvalidUsage, as no device communicator exists. */
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const* devComm);
/* The teams of comm: world is every rank (stride 1); on Tidal the LSA team is
 * the rank alone ({1, 0, 1}) and the rail team (ranks with the same LSA index)
 * is the world. An invalid comm gives {0, 0, 0} and ncclGetLastError says why. */
ncclTeam_t ncclTeamWorld(ncclComm_t comm);
ncclTeam_t ncclTeamLsa(ncclComm_t comm);
ncclTeam_t ncclTeamRail(ncclComm_t comm);

/* Team arithmetic (no communication; host and device): the inner factor is
 * the innerSize-rank block of parent holding this rank, the outer factor the
 * ranks of parent at this rank's index in every block. */
NCCL_DEVICE_TIDAL_HD ncclTeam_t ncclTeamInnerFactor(ncclTeam_t parent, int innerSize) {
  ncclTeam_t t;
  t.nRanks = innerSize;
  t.rank = parent.rank % innerSize;
  t.stride = parent.stride;
  return t;
}
NCCL_DEVICE_TIDAL_HD ncclTeam_t ncclTeamOuterFactor(ncclTeam_t parent, int innerSize) {
  ncclTeam_t t;
  t.nRanks = parent.nRanks / innerSize;
  t.rank = parent.rank / innerSize;
  t.stride = parent.stride * innerSize;
  return t;
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#ifdef __cplusplus

/* Teams of a device communicator, computed from its fields. */
NCCL_DEVICE_TIDAL_HD ncclTeam ncclTeamWorld(ncclDevComm const& comm) {
  return ncclTeam{comm.nRanks, comm.rank, 1};
}
NCCL_DEVICE_TIDAL_HD ncclTeam ncclTeamLsa(ncclDevComm const& comm) {
  return ncclTeam{comm.lsaSize, comm.lsaRank, 1};
}
NCCL_DEVICE_TIDAL_HD ncclTeam ncclTeamRail(ncclDevComm const& comm) {
  return comm.lsaSize > 0 ? ncclTeamOuterFactor(ncclTeamWorld(comm), comm.lsaSize)
                          : ncclTeam{0, 0, 0};
}

/* Tags naming the built-in teams in barrier constructors. */
struct ncclTeamTagWorld {};
struct ncclTeamTagLsa {};
struct ncclTeamTagRail {};

/* What a GIN barrier waits for besides arrival; flags combine with |. */
enum class ncclGinFenceLevel : uint32_t { None = 0, Put = 1u << 0, Get = 1u << 1, Relaxed = 0 };
NCCL_DEVICE_TIDAL_HD constexpr ncclGinFenceLevel operator|(ncclGinFenceLevel a,
                                                           ncclGinFenceLevel b) {
  return static_cast<ncclGinFenceLevel>(static_cast<uint32_t>(a) | static_cast<uint32_t>(b));
}
NCCL_DEVICE_TIDAL_HD constexpr ncclGinFenceLevel operator&(ncclGinFenceLevel a,
                                                           ncclGinFenceLevel b) {
  return static_cast<ncclGinFenceLevel>(static_cast<uint32_t>(a) & static_cast<uint32_t>(b));
}

#if defined(__CUDACC__)

namespace nccl_device_tidal {
/* Every device call that would communicate ends here. Unreachable on Tidal:
 * without a device communicator no window or barrier can be valid. */
[[noreturn]] __device__ __forceinline__ void noDeviceApi() {
  __trap();
  __builtin_unreachable();
}
}  // namespace nccl_device_tidal

/* Cooperative groups of threads (CUDA's thread_rank/size/sync subset). */
struct ncclCoopCta {
  NCCL_DEVICE_TIDAL_D int thread_rank() const { return threadIdx.x; }
  NCCL_DEVICE_TIDAL_D int size() const { return blockDim.x; }
  NCCL_DEVICE_TIDAL_D int num_threads() const { return blockDim.x; }
  NCCL_DEVICE_TIDAL_D void sync() { __syncthreads(); }
};

template <int nThreadsPow2>
struct ncclCoopTile {
  static_assert(nThreadsPow2 > 0 && nThreadsPow2 <= 32 && (nThreadsPow2 & (nThreadsPow2 - 1)) == 0,
                "a tile is a power of two of at most 32 threads");
  NCCL_DEVICE_TIDAL_D int thread_rank() const { return (threadIdx.x % 32) % nThreadsPow2; }
  NCCL_DEVICE_TIDAL_D constexpr int size() const { return nThreadsPow2; }
  NCCL_DEVICE_TIDAL_D constexpr int num_threads() const { return nThreadsPow2; }
  NCCL_DEVICE_TIDAL_D uint32_t laneMask() const {
    return (~0u >> (32 - nThreadsPow2)) << ((threadIdx.x % 32) & ~(nThreadsPow2 - 1));
  }
  NCCL_DEVICE_TIDAL_D void sync() {
    if (nThreadsPow2 > 1) __syncwarp(laneMask());
  }
};
typedef ncclCoopTile<1> ncclCoopThread;
typedef ncclCoopTile<32> ncclCoopWarp;

/* Window pointers: local, of an LSA peer, of a world peer, multicast. */
NCCL_DEVICE_TIDAL_D void* ncclGetLocalPointer(ncclWindow_t, size_t) {
  nccl_device_tidal::noDeviceApi();
}
NCCL_DEVICE_TIDAL_D void* ncclGetLsaPointer(ncclWindow_t, size_t, int) {
  nccl_device_tidal::noDeviceApi();
}
NCCL_DEVICE_TIDAL_D void* ncclGetPeerPointer(ncclWindow_t, size_t, int) {
  nccl_device_tidal::noDeviceApi();
}
NCCL_DEVICE_TIDAL_D void* ncclGetMultimemPointer(ncclWindow_t, size_t, ncclMultimemHandle) {
  nccl_device_tidal::noDeviceApi();
}
NCCL_DEVICE_TIDAL_D void* ncclGetLsaMultimemPointer(ncclWindow_t, size_t, ncclDevComm const&) {
  nccl_device_tidal::noDeviceApi();
}

/* A barrier among the LSA team, one of lsaBarrierCount per communicator. */
template <typename Coop>
struct ncclLsaBarrierSession {
  NCCL_DEVICE_TIDAL_D ncclLsaBarrierSession(Coop, ncclDevComm const&, ncclTeam,
                                            ncclLsaBarrierHandle, uint32_t, bool = false,
                                            ncclMultimemHandle = {}) {}
  NCCL_DEVICE_TIDAL_D ncclLsaBarrierSession(Coop, ncclDevComm const&, ncclTeamTagLsa, uint32_t,
                                            bool = false) {}
  ncclLsaBarrierSession(ncclLsaBarrierSession const&) = delete;
  NCCL_DEVICE_TIDAL_D void arrive(Coop, cuda::memory_order) { nccl_device_tidal::noDeviceApi(); }
  NCCL_DEVICE_TIDAL_D void wait(Coop, cuda::memory_order) { nccl_device_tidal::noDeviceApi(); }
  NCCL_DEVICE_TIDAL_D void sync(Coop, cuda::memory_order) { nccl_device_tidal::noDeviceApi(); }
};

/* What a GIN put or signal does at the target (remote action) or here (local
 * action). */
struct ncclGin_None {};
struct ncclGin_SignalInc {
  ncclGinSignal_t signal;
};
struct ncclGin_SignalAdd {
  ncclGinSignal_t signal;
  uint64_t value;
};
struct ncclGin_CounterInc {
  ncclGinCounter_t counter;
};

/* GPU-initiated networking through one GIN context of a device communicator. */
struct ncclGin {
  ncclDevComm const* comm;
  int contextIndex;
  NCCL_DEVICE_TIDAL_D ncclGin(ncclDevComm const& c, int context)
      : comm(&c), contextIndex(context) {}

  template <typename RemoteAction = ncclGin_None, typename LocalAction = ncclGin_None,
            typename Coop = ncclCoopThread>
  NCCL_DEVICE_TIDAL_D void put(ncclTeam, int, ncclWindow_t, size_t, ncclWindow_t, size_t, size_t,
                               RemoteAction = ncclGin_None{}, LocalAction = ncclGin_None{},
                               Coop = ncclCoopThread{}) const {
    nccl_device_tidal::noDeviceApi();
  }
  template <typename RemoteAction, typename Coop = ncclCoopThread>
  NCCL_DEVICE_TIDAL_D void signal(ncclTeam, int, RemoteAction, Coop = ncclCoopThread{}) const {
    nccl_device_tidal::noDeviceApi();
  }
  template <typename Coop>
  NCCL_DEVICE_TIDAL_D void flush(Coop, cuda::memory_order = cuda::memory_order_acquire) const {
    nccl_device_tidal::noDeviceApi();
  }
  NCCL_DEVICE_TIDAL_D uint64_t readSignal(ncclGinSignal_t, int = 64,
                                          cuda::memory_order = cuda::memory_order_acquire) const {
    nccl_device_tidal::noDeviceApi();
  }
  template <typename Coop>
  NCCL_DEVICE_TIDAL_D void waitSignal(Coop, ncclGinSignal_t, uint64_t, int = 64,
                                      cuda::memory_order = cuda::memory_order_acquire) const {
    nccl_device_tidal::noDeviceApi();
  }
  NCCL_DEVICE_TIDAL_D void resetSignal(ncclGinSignal_t) const { nccl_device_tidal::noDeviceApi(); }
  NCCL_DEVICE_TIDAL_D uint64_t readCounter(ncclGinCounter_t, int = 56,
                                           cuda::memory_order = cuda::memory_order_acquire) const {
    nccl_device_tidal::noDeviceApi();
  }
  template <typename Coop>
  NCCL_DEVICE_TIDAL_D void waitCounter(Coop, ncclGinCounter_t, uint64_t, int = 56,
                                       cuda::memory_order = cuda::memory_order_acquire) const {
    nccl_device_tidal::noDeviceApi();
  }
  NCCL_DEVICE_TIDAL_D void resetCounter(ncclGinCounter_t) const {
    nccl_device_tidal::noDeviceApi();
  }
};

/* A barrier over the world (LSA barrier plus GIN between LSA teams) or the
 * LSA team. */
template <typename Coop>
struct ncclBarrierSession {
  NCCL_DEVICE_TIDAL_D ncclBarrierSession(Coop, ncclTeamTagWorld, ncclGin, uint32_t, bool = false) {}
  NCCL_DEVICE_TIDAL_D ncclBarrierSession(Coop, ncclTeamTagLsa, ncclDevComm const&, uint32_t,
                                         bool = false) {}
  NCCL_DEVICE_TIDAL_D ncclBarrierSession(Coop, ncclTeamTagRail, ncclGin, uint32_t) {}
  ncclBarrierSession(ncclBarrierSession const&) = delete;
  NCCL_DEVICE_TIDAL_D void sync(Coop, cuda::memory_order,
                                ncclGinFenceLevel = ncclGinFenceLevel::Put |
                                                    ncclGinFenceLevel::Get) {
    nccl_device_tidal::noDeviceApi();
  }
};

#endif /* __CUDACC__ */
#endif /* __cplusplus */

#endif /* NCCL_DEVICE_H_ */
