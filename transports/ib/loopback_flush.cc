#include "transports/ib/loopback_flush.h"

#include <cerrno>
#include <thread>

#include "core/error.h"
#include "core/socket.h"

namespace tidal::ib {

LoopbackFlush::LoopbackFlush(IbDevice& device) : device_(device), landing_(64) {
  const VerbsApi& api = device.api();
  const std::string what = fmt::format("rank {}: ib flush QP on {}", device.rank(), device.name());
  cq_ = api.createCq(device.context(), 4, nullptr, nullptr, 0);
  if (cq_ == nullptr)
    fail(tidalSystemError, "{}: ibv_create_cq failed: {}", what, errnoText(errno));
  qp_ = std::make_unique<QueuePair>(device, cq_, 2, 1, 0, what);
  PortAddress self;
  self.lid = device.lid();
  self.gid = device.gid().raw;
  self.gidIndex = static_cast<uint32_t>(device.gid().index);
  self.mtu = device.activeMtu();
  self.ethernet = device.ethernet();
  qp_->connect(qp_->endpoint(), self, device.activeMtu(), QpOptions{}, what);
  landingReg_ = device.cache().pin(landing_.data(), landing_.size());
}

LoopbackFlush::~LoopbackFlush() {
  device_.cache().unpin(landingReg_);
  qp_.reset();
  if (cq_) device_.api().destroyCq(cq_);
}

void LoopbackFlush::flush(const ibv_mr* mr, const void* addr) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(landing_.data()), 1, landingReg_->mr->lkey};
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_READ;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(addr);
  wr.wr.rdma.rkey = mr->rkey;
  if (const int rc = ibv_post_send(qp_->get(), &wr, &bad); rc != 0) {
    fail(tidalSystemError, "rank {}: ib flush read on {} failed to post: {}", device_.rank(),
         device_.whereText(), errnoText(rc));
  }
  const Deadline deadline = deadlineFromNow();
  ibv_wc wc{};
  for (;;) {
    const int n = ibv_poll_cq(cq_, 1, &wc);
    if (n > 0) break;
    if (n < 0 || Clock::now() > deadline) {
      fail(tidalTimeout, "rank {}: ib flush read on {} did not complete within TIDAL_TIMEOUT={} s",
           device_.rank(), device_.whereText(), timeoutSeconds());
    }
    std::this_thread::yield();
  }
  if (wc.status != IBV_WC_SUCCESS) {
    fail(tidalSystemError, "rank {}: ib flush read on {} failed: {}", device_.rank(),
         device_.whereText(), device_.api().wcStatusStr(wc.status));
  }
}

}  // namespace tidal::ib
