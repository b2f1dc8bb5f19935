#include "transports/ib/gpu_direct.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "core/error.h"

namespace tidal::ib {

// The few CUDA driver API entry points GPUDirect needs, declared here with
// the driver's ABI (cuda.h is not needed to build Tidal). Values are the
// documented enumerators of the driver API.
struct GpuDirect::CudaDriver {
  using CUresult = int;
  using CUdevice = int;
  using CUdeviceptr = unsigned long long;
  static constexpr int kDmaBufSupportedAttribute = 124;  // CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED
  static constexpr int kDmaBufFdHandle = 1;              // CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD

  CUresult (*init)(unsigned int flags) = nullptr;
  CUresult (*deviceGet)(CUdevice* device, int ordinal) = nullptr;
  CUresult (*deviceGetAttribute)(int* value, int attribute, CUdevice device) = nullptr;
  CUresult (*memGetHandleForAddressRange)(void* handle, CUdeviceptr ptr, size_t size, int type,
                                          unsigned long long flags) = nullptr;
  std::string problem;  // empty when loaded and initialised

  static const CudaDriver& get() {
    static const CudaDriver driver = load();
    return driver;
  }

 private:
  static CudaDriver load() {
    CudaDriver d;
    void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (lib == nullptr) {
      d.problem = "no CUDA driver (libcuda.so.1 not found)";
      return d;
    }
    d.init = reinterpret_cast<decltype(d.init)>(::dlsym(lib, "cuInit"));
    d.deviceGet = reinterpret_cast<decltype(d.deviceGet)>(::dlsym(lib, "cuDeviceGet"));
    d.deviceGetAttribute =
        reinterpret_cast<decltype(d.deviceGetAttribute)>(::dlsym(lib, "cuDeviceGetAttribute"));
    d.memGetHandleForAddressRange = reinterpret_cast<decltype(d.memGetHandleForAddressRange)>(
        ::dlsym(lib, "cuMemGetHandleForAddressRange"));
    if (!d.init || !d.deviceGet || !d.deviceGetAttribute) {
      d.problem = "libcuda.so.1 lacks cuInit/cuDeviceGet/cuDeviceGetAttribute";
    } else if (const CUresult r = d.init(0); r != 0) {
      d.problem = fmt::format("cuInit failed (CUresult {}): no usable GPU", r);
    }
    return d;
  }
};

namespace {

bool peerMemoryModuleLoaded(std::string& which) {
  for (const char* name : {"nvidia_peermem", "nv_peer_mem"}) {
    std::error_code ec;
    if (std::filesystem::exists(std::string("/sys/module/") + name, ec)) {
      which = name;
      return true;
    }
  }
  return false;
}

}  // namespace

const char* GpuDirect::modeName() const {
  switch (mode_) {
    case Mode::DmaBuf:
      return "dmabuf";
    case Mode::PeerMem:
      return "peermem";
    case Mode::Off:
      break;
  }
  return "off";
}

GpuDirect GpuDirect::detect(const VerbsApi& api, const std::string& setting, int rank,
                            const std::optional<GdrDistance>& distance) {
  if (setting != "auto" && setting != "0" && setting != "1") {
    fail(tidalInvalidArgument, "rank {}: TIDAL_GDR='{}' is not auto, 0 or 1", rank, setting);
  }
  if (setting == "0") return GpuDirect(api, Mode::Off, "TIDAL_GDR=0", nullptr);
  if (setting == "auto" && distance && !distance->allowed) {
    return GpuDirect(api, Mode::Off,
                     distance->reason + "; GPU buffers are staged through host memory", nullptr);
  }
  GpuDirect g = probe(api, setting, rank);
  if (distance && g.mode_ != Mode::Off) {
    g.reason_ +=
        distance->allowed ? "; " + distance->reason : "; TIDAL_GDR=1 overrides " + distance->reason;
  }
  return g;
}

GpuDirect GpuDirect::probe(const VerbsApi& api, const std::string& setting, int rank) {
  const CudaDriver& cuda = CudaDriver::get();
  std::string reason;
  if (!cuda.problem.empty()) {
    reason = cuda.problem;
  } else {
    int dmabuf = 0;
    CudaDriver::CUdevice dev = 0;
    const bool driverHasDmaBuf =
        cuda.memGetHandleForAddressRange != nullptr && cuda.deviceGet(&dev, 0) == 0 &&
        cuda.deviceGetAttribute(&dmabuf, CudaDriver::kDmaBufSupportedAttribute, dev) == 0 &&
        dmabuf != 0;
    std::string module;
    if (driverHasDmaBuf && api.regDmabufMr != nullptr) {
      return GpuDirect(api, Mode::DmaBuf,
                       "CUDA driver exports dma-buf and libibverbs has ibv_reg_dmabuf_mr", &cuda);
    }
    if (peerMemoryModuleLoaded(module)) {
      return GpuDirect(api, Mode::PeerMem, fmt::format("kernel module {} is loaded", module),
                       &cuda);
    }
    reason = driverHasDmaBuf ? "libibverbs has no ibv_reg_dmabuf_mr (rdma-core older than 34) "
                               "and neither nvidia_peermem nor nv_peer_mem is loaded"
                             : "the CUDA driver does not export dma-buf and neither "
                               "nvidia_peermem nor nv_peer_mem is loaded";
  }
  if (setting == "1") {
    fail(tidalInvalidArgument,
         "rank {}: TIDAL_GDR=1 but GPUDirect RDMA is not available: {}. Load nvidia_peermem, use "
         "a driver with dma-buf support, or set TIDAL_GDR=auto to stage through host memory",
         rank, reason);
  }
  return GpuDirect(api, Mode::Off, reason + "; GPU buffers are staged through host memory",
                   nullptr);
}

ibv_mr* GpuDirect::registerDeviceMemory(ibv_pd* pd, void* devicePtr, size_t bytes,
                                        int access) const {
  const auto ptr = reinterpret_cast<uintptr_t>(devicePtr);
  if (mode_ == Mode::PeerMem) {
    ibv_mr* mr = api_->regMr(pd, devicePtr, bytes, access);
    if (mr == nullptr) {
      fail(tidalSystemError, "ibv_reg_mr of {} bytes of GPU memory at {:#x} (peermem) failed: {}",
           bytes, ptr, errnoText(errno));
    }
    return mr;
  }
  if (mode_ != Mode::DmaBuf) {
    fail(tidalInvalidUsage, "GPU memory at {:#x} cannot be registered: GPUDirect RDMA is off ({})",
         ptr, reason_);
  }
  // The dma-buf covers whole pages; the MR starts at the buffer's offset in it.
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t base = ptr & ~(page - 1);
  const size_t span = ((ptr + bytes + page - 1) & ~(page - 1)) - base;
  int fd = -1;
  const int r = cuda_->memGetHandleForAddressRange(&fd, base, span, CudaDriver::kDmaBufFdHandle, 0);
  if (r != 0 || fd < 0) {
    fail(tidalSystemError,
         "cuMemGetHandleForAddressRange for {} bytes at {:#x} failed (CUresult {}): the driver "
         "cannot export this memory as a dma-buf",
         span, base, r);
  }
  ibv_mr* mr = api_->regDmabufMr(pd, ptr - base, bytes, ptr, fd, access);
  const int err = errno;
  ::close(fd);  // the MR holds its own reference to the dma-buf
  if (mr == nullptr) {
    fail(tidalSystemError, "ibv_reg_dmabuf_mr of {} bytes of GPU memory at {:#x} failed: {}", bytes,
         ptr, errnoText(err));
  }
  return mr;
}

}  // namespace tidal::ib
