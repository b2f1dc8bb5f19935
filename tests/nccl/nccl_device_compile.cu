// nccl_device.h as nccl-tests (>= 2.28) uses it: kernels that take a device
// communicator by value and use LSA barriers, window pointers, GIN puts and
// signals and the world barrier; host code that asks ncclCommQueryProperties
// before it creates a device communicator. Built with nvcc by
// check_device_compile.sh (the nccl_device_compile test), then run: the host
// checks need no GPU; with one, a kernel that reaches a device call must trap.
#include <cuda_runtime.h>
#include <nccl.h>
#include <nccl_device.h>

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <vector>

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 29, 0)
#error "nccl.h should state 2.30, so that code takes its device-API paths"
#endif

// The layouts programs built against NCCL's header hand to the library.
static_assert(offsetof(ncclCommProperties_t, rank) == 16, "ncclCommProperties_t layout");
static_assert(offsetof(ncclCommProperties_t, deviceApiSupport) == 32, "ncclCommProperties_t");
static_assert(offsetof(ncclDevCommRequirements_t, resourceRequirementsList) == 16,
              "ncclDevCommRequirements_t layout");
static_assert(NCCL_GIN_TYPE_NONE == 0 && NCCL_GIN_TYPE_PROXY == 2 && NCCL_GIN_TYPE_GDAKI == 3,
              "ncclGinType_t values");
static_assert(NCCL_GIN_CONNECTION_FULL == 1 && NCCL_WIN_COLL_SYMMETRIC == 1 &&
                  NCCL_CTA_POLICY_ZERO == 2 && NCCL_CTA_POLICY_EFFICIENCY == 1 &&
                  NCCL_CTA_POLICY_DEFAULT == 0,
              "flag values");
static_assert((ncclGinFenceLevel::Put | ncclGinFenceLevel::Get) != ncclGinFenceLevel::Relaxed,
              "fence levels combine");

// An LSA kernel: barrier, then every peer's window by load/store.
template <typename T>
__global__ void lsaKernel(ncclWindow_t sendwin, size_t sendoffset, ncclWindow_t recvwin,
                          size_t recvoffset, size_t count, ncclDevComm devComm) {
  ncclLsaBarrierSession<ncclCoopCta> bar{ncclCoopCta(), devComm, ncclTeamLsa(devComm),
                                         devComm.lsaBarrier, blockIdx.x};
  bar.sync(ncclCoopCta(), cuda::memory_order_acquire);
  for (size_t i = threadIdx.x; i < count; i += blockDim.x) {
    T sum = 0;
    for (int peer = 0; peer < devComm.lsaSize; ++peer)
      sum += static_cast<T*>(ncclGetLsaPointer(sendwin, sendoffset, peer))[i];
    static_cast<T*>(ncclGetLocalPointer(recvwin, recvoffset))[i] = sum;
  }
  bar.sync(ncclCoopCta(), cuda::memory_order_release);
}

// A multimem kernel with the tagged LSA barrier.
__global__ void multimemKernel(ncclWindow_t win, size_t offset, ncclDevComm devComm) {
  ncclLsaBarrierSession<ncclCoopCta> bar{ncclCoopCta(), devComm, ncclTeamTagLsa(), blockIdx.x,
                                         true};
  bar.arrive(ncclCoopCta(), cuda::memory_order_relaxed);
  bar.wait(ncclCoopCta(), cuda::memory_order_acquire);
  float* p = static_cast<float*>(ncclGetLsaMultimemPointer(win, offset, devComm));
  float* q = static_cast<float*>(ncclGetMultimemPointer(win, offset, devComm.lsaMultimem));
  if (threadIdx.x == 0) *p = *q;
}

// A GIN kernel: puts with a remote signal, waits, world barriers.
template <typename T>
__global__ void ginKernel(ncclWindow_t sendwin, size_t sendoffset, ncclWindow_t recvwin,
                          size_t recvoffset, size_t count, ncclDevComm devComm) {
  ncclGin gin{devComm, 0};
  const unsigned signal = blockIdx.x;
  const uint64_t before = gin.readSignal(signal);
  ncclBarrierSession<ncclCoopCta> bar{ncclCoopCta(), ncclTeamTagWorld(), gin, blockIdx.x};
  bar.sync(ncclCoopCta(), cuda::memory_order_acquire, ncclGinFenceLevel::Relaxed);
  const size_t bytes = count * sizeof(T);
  for (int r = threadIdx.x; r < devComm.nRanks; r += blockDim.x) {
    gin.put(ncclTeamWorld(devComm), r, recvwin, recvoffset + devComm.rank * bytes, sendwin,
            sendoffset + r * bytes, bytes, ncclGin_SignalInc{signal});
    gin.signal(ncclTeamRail(devComm), r, ncclGin_SignalAdd{signal, 1});
  }
  gin.waitSignal(ncclCoopCta(), signal, before + devComm.nRanks);
  gin.waitCounter(ncclCoopWarp(), 0, gin.readCounter(0));
  gin.resetSignal(signal);
  gin.resetCounter(0);
  gin.flush(ncclCoopCta());
  bar.sync(ncclCoopCta(), cuda::memory_order_release);
  ncclBarrierSession<ncclCoopCta> lsaBar{ncclCoopCta(), ncclTeamTagLsa(), devComm, blockIdx.x};
  lsaBar.sync(ncclCoopCta(), cuda::memory_order_acq_rel, ncclGinFenceLevel::None);
}

// Cooperative groups and team arithmetic, which work without communication.
__global__ void coopKernel(int* out) {
  ncclCoopCta cta;
  ncclCoopWarp warp;
  ncclCoopThread thread;
  const ncclTeam world{8, 5, 1};
  const ncclTeam rail = ncclTeamOuterFactor(world, 4);
  const ncclTeam lsa = ncclTeamInnerFactor(world, 4);
  cta.sync();
  warp.sync();
  thread.sync();
  if (cta.thread_rank() == 0) {
    out[0] = cta.size();
    out[1] = warp.num_threads();
    out[2] = rail.nRanks * 100 + rail.rank * 10 + rail.stride;
    out[3] = lsa.nRanks * 100 + lsa.rank * 10 + lsa.stride;
  }
}

// Stands in for a kernel reaching the device API: it must trap.
__global__ void trapKernel(ncclWindow_t win, int* out) {
  *out = static_cast<int*>(ncclGetLsaPointer(win, 0, 0)) != nullptr;
}

static int failures = 0;
#define CHECK(cond, ...)                                        \
  do {                                                          \
    if (!(cond)) {                                              \
      std::fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      std::fprintf(stderr, __VA_ARGS__);                        \
      std::fprintf(stderr, "\n");                               \
      ++failures;                                               \
    }                                                           \
  } while (0)

// nccl-tests' way: query, and only with device API support create one.
static bool wantDeviceComm(ncclComm_t comm, ncclDevCommRequirements* reqs) {
  ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
  if (ncclCommQueryProperties(comm, &props) != ncclSuccess) return false;
  if (props.nRanks != ncclTeamLsa(comm).nRanks) return false;
  if (props.ginType == NCCL_GIN_TYPE_NONE) return false;
  reqs->ginConnectionType = NCCL_GIN_CONNECTION_FULL;
  reqs->lsaMultimem = props.multimemSupport;
  return props.deviceApiSupport;
}

int main() {
  ncclUniqueId id;
  ncclComm_t comm;
  if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess) {
    std::fprintf(stderr, "FAIL: a 1-rank communicator: %s\n", ncclGetLastError(nullptr));
    return 1;
  }

  ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
  CHECK(ncclCommQueryProperties(comm, &props) == ncclSuccess, "ncclCommQueryProperties: %s",
        ncclGetLastError(comm));
  CHECK(props.rank == 0 && props.nRanks == 1 && !props.deviceApiSupport && !props.multimemSupport &&
            props.ginType == NCCL_GIN_TYPE_NONE,
        "properties: rank %d nRanks %d deviceApiSupport %d multimem %d gin %d", props.rank,
        props.nRanks, (int)props.deviceApiSupport, (int)props.multimemSupport, (int)props.ginType);
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  CHECK(!wantDeviceComm(comm, &reqs), "the properties ask for a device communicator");

  std::vector<ncclDevComm> devComms(2);
  reqs.lsaBarrierCount = 16;
  ncclResult_t r = ncclDevCommCreate(comm, &reqs, devComms.data());
  CHECK(r == ncclInvalidUsage && std::strstr(ncclGetLastError(comm), "ncclDevCommCreate") &&
            std::strstr(ncclGetLastError(comm), "no device API"),
        "ncclDevCommCreate: %d '%s'", (int)r, ncclGetLastError(comm));
  r = ncclDevCommDestroy(comm, devComms.data());
  CHECK(r == ncclInvalidUsage && std::strstr(ncclGetLastError(comm), "ncclDevCommDestroy"),
        "ncclDevCommDestroy: %d '%s'", (int)r, ncclGetLastError(comm));

  int nDevices = 0;
  if (cudaGetDeviceCount(&nDevices) != cudaSuccess || nDevices == 0) {
    std::printf("no CUDA device: kernels compiled, not run\n");
  } else {
    // The kernels are launched with a zero device communicator only where
    // they reach no communicating call: a 0-count LSA kernel still syncs its
    // barrier, so it is the trap kernel that checks the trap.
    int* out = nullptr;
    CHECK(cudaMalloc(&out, 4 * sizeof(int)) == cudaSuccess, "cudaMalloc");
    coopKernel<<<1, 64>>>(out);
    int host[4] = {};
    CHECK(cudaMemcpy(host, out, sizeof host, cudaMemcpyDeviceToHost) == cudaSuccess,
          "coopKernel: %s", cudaGetErrorString(cudaGetLastError()));
    CHECK(host[0] == 64 && host[1] == 32 && host[2] == 214 && host[3] == 411,
          "coopKernel: %d %d %d %d", host[0], host[1], host[2], host[3]);
    trapKernel<<<1, 1>>>(nullptr, out);
    const cudaError_t e = cudaDeviceSynchronize();
    CHECK(e != cudaSuccess, "a device call of nccl_device.h returned instead of trapping");
    std::printf("device call trapped: %s\n", cudaGetErrorString(e));
  }
  if (false) {  // compiled, never launched: nothing here can run on Tidal
    lsaKernel<float><<<1, 1>>>(nullptr, 0, nullptr, 0, 0, devComms[0]);
    multimemKernel<<<1, 1>>>(nullptr, 0, devComms[0]);
    ginKernel<double><<<1, 1>>>(nullptr, 0, nullptr, 0, 0, devComms[0]);
  }
  ncclCommDestroy(comm);
  std::printf(failures == 0 ? "PASS: nccl_device.h compiles as nccl-tests uses it\n" : "FAILED\n");
  return failures == 0 ? 0 : 1;
}
