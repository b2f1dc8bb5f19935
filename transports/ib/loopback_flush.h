// Makes the NIC's writes into GPU memory visible before a kernel reads them.
//
// A GPU may see the NIC's PCIe writes to its memory out of order with the
// completion the CPU polls. An RDMA READ issued after them, by the same NIC,
// from the same memory, is ordered behind them; when it completes, every
// earlier write has landed. So the flush is a 1-byte RDMA READ from the
// received buffer on a QP connected to itself (the data goes nowhere
// useful: a 1-byte host landing pad). Only receives into CUDA memory need
// it; host memory is coherent with the NIC's writes.
#pragma once

#include <memory>
#include <vector>

#include "transports/ib/ib_device.h"
#include "transports/ib/queue_pair.h"

namespace tidal::ib {

class LoopbackFlush {
 public:
  explicit LoopbackFlush(IbDevice& device);
  ~LoopbackFlush();
  LoopbackFlush(const LoopbackFlush&) = delete;
  LoopbackFlush& operator=(const LoopbackFlush&) = delete;

  // Reads one byte at `addr` through `mr` and waits (bounded by
  // TIDAL_TIMEOUT) for it. Throws SystemError / Timeout naming the device.
  void flush(const ibv_mr* mr, const void* addr);

 private:
  IbDevice& device_;
  ibv_cq* cq_ = nullptr;
  std::unique_ptr<QueuePair> qp_;
  std::vector<char> landing_;
  RegistrationCache::Entry* landingReg_ = nullptr;
};

}  // namespace tidal::ib
