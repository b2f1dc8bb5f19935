// GPUDirect RDMA: letting the NIC read and write GPU memory directly.
//
// Three ways, tried in this order when TIDAL_GDR is auto or 1:
//   dmabuf   the CUDA driver exports the GPU pages as a dma-buf
//            (cuMemGetHandleForAddressRange, CUDA 11.7+ with the open kernel
//            modules, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED) and verbs
//            registers the fd (ibv_reg_dmabuf_mr, rdma-core 34+, kernel 5.12+);
//   peermem  the nvidia_peermem (or older nv_peer_mem) kernel module is
//            loaded, so ibv_reg_mr accepts a device pointer directly;
//   off      GPU buffers must be staged through pinned host memory by the
//            caller (supports(MemoryKind::Cuda) is false).
// TIDAL_GDR=0 forces off; TIDAL_GDR=1 makes "off" an error that says why.
// With auto, the topology has the first word: when the rank's GPU and the NIC
// are farther apart than TIDAL_NET_GDR_LEVEL (GdrDistance, from
// topology/nic_choice.h), GDR stays off even where it would work, because
// through the CPU's root complex staging is often faster. TIDAL_GDR=1
// overrides the distance (and says so in the reason).
//
// The CUDA driver is dlopened (libcuda.so.1) like libibverbs, so nothing
// here needs the CUDA toolkit to build, and a machine without a GPU simply
// detects "off". Before a kernel may read data the NIC wrote into GPU memory,
// the receive path issues a flush (LoopbackFlush: a 1-byte RDMA READ on a
// QP connected to itself), which orders the NIC's earlier PCIe writes.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <optional>
#include <string>

#include "transports/ib/verbs_api.h"

namespace tidal::ib {

// The topology's verdict for the rank's GPU and this NIC.
struct GdrDistance {
  bool allowed = true;
  std::string reason;  // "GPU 0000:18:00.0 - mlx5_0:1: PHB is beyond TIDAL_NET_GDR_LEVEL=PXB"
};

class GpuDirect {
 public:
  enum class Mode { Off, DmaBuf, PeerMem };

  // Detects what this process can use; `setting` is TIDAL_GDR (auto, 0, 1),
  // `distance` the topology's verdict (nullopt: none, e.g. no GPU in it).
  // Throws InvalidArgument for a bad setting, or for 1 when nothing works.
  static GpuDirect detect(const VerbsApi& api, const std::string& setting, int rank,
                          const std::optional<GdrDistance>& distance = std::nullopt);

  Mode mode() const { return mode_; }
  // "off", "dmabuf", "peermem": the word in the per-peer INFO line.
  const char* modeName() const;
  // Why this mode (for INFO, and for the error with TIDAL_GDR=1).
  const std::string& reason() const { return reason_; }

  // Registers `bytes` of device memory at `devicePtr`. Throws SystemError
  // naming the path (dmabuf / peermem) and the driver's error.
  ibv_mr* registerDeviceMemory(ibv_pd* pd, void* devicePtr, size_t bytes, int access) const;

 private:
  struct CudaDriver;
  // What the driver and verbs allow, whatever the distance.
  static GpuDirect probe(const VerbsApi& api, const std::string& setting, int rank);
  GpuDirect(const VerbsApi& api, Mode mode, std::string reason, const CudaDriver* cuda)
      : api_(&api), mode_(mode), reason_(std::move(reason)), cuda_(cuda) {}

  const VerbsApi* api_;
  Mode mode_;
  std::string reason_;
  const CudaDriver* cuda_;  // loaded once per process, never unloaded
};

}  // namespace tidal::ib
