#include "transports/ib/ib_link.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace tidal::ib {

namespace {

const char* opcodeName(ibv_wc_opcode op) {
  switch (op) {
    case IBV_WC_RDMA_WRITE:
      return "RDMA write";
    case IBV_WC_RDMA_READ:
      return "RDMA read";
    case IBV_WC_RECV_RDMA_WITH_IMM:
      return "receive of a write with immediate";
    default:
      return "work request";
  }
}

}  // namespace

IbLink::IbLink(std::shared_ptr<IbDevice> device, std::string who, uint32_t nqps, Depths depths)
    : device_(std::move(device)), who_(std::move(who)), depths_(depths) {
  const VerbsApi& api = device_->api();
  channel_ = api.createCompChannel(device_->context());
  if (channel_ == nullptr) {
    fail(tidalSystemError, "{}: ibv_create_comp_channel failed: {}", who_, errnoText(errno));
  }
  ::fcntl(channel_->fd, F_SETFL, ::fcntl(channel_->fd, F_GETFL) | O_NONBLOCK);
  const uint32_t perQpOther = depths.sendOther + depths.recvOther;
  const int cqe = static_cast<int>(depths.send0 + depths.recv0 + (nqps - 1) * perQpOther + 16);
  cq_ = api.createCq(device_->context(), cqe, nullptr, channel_, 0);
  if (cq_ == nullptr) {
    api.destroyCompChannel(channel_);
    fail(tidalSystemError, "{}: ibv_create_cq ({} entries) failed: {}", who_, cqe,
         errnoText(errno));
  }
  try {
    for (uint32_t q = 0; q < nqps; ++q) {
      qps_.push_back(std::make_unique<QueuePair>(
          *device_, cq_, q == 0 ? depths.send0 : depths.sendOther,
          q == 0 ? depths.recv0 : depths.recvOther, q == 0 ? 256 : 0, who_));
      device_->watchQp(qps_.back()->get()->qp_num, who_);
    }
  } catch (...) {
    release();  // no destructor runs for a half-built link
    throw;
  }
  sendUsed_.assign(nqps, 0);
}

IbLink::~IbLink() { release(); }

void IbLink::release() {
  const VerbsApi& api = device_->api();
  for (auto& qp : qps_) device_->unwatchQp(qp->get()->qp_num);
  qps_.clear();
  for (auto* e : owned_) device_->cache().unpin(e);
  owned_.clear();
  drainEvents();
  if (cq_) api.destroyCq(cq_);
  if (channel_) api.destroyCompChannel(channel_);
  cq_ = nullptr;
  channel_ = nullptr;
}

std::vector<QpEndpoint> IbLink::endpoints() const {
  std::vector<QpEndpoint> out;
  for (const auto& qp : qps_) out.push_back(qp->endpoint());
  return out;
}

PortAddress IbLink::localAddress() const {
  PortAddress a;
  a.lid = device_->lid();
  a.gid = device_->gid().raw;
  a.gidIndex = static_cast<uint32_t>(device_->gid().index);
  a.mtu = device_->activeMtu();
  a.ethernet = device_->ethernet();
  return a;
}

void IbLink::connect(const std::vector<QpEndpoint>& remote, const PortAddress& peer,
                     ibv_mtu pathMtu, const QpOptions& options) {
  for (size_t q = 0; q < qps_.size(); ++q) {
    qps_[q]->connect(remote[q], peer, pathMtu, options, who_);
    const uint32_t n = q == 0 ? depths_.recv0 : depths_.recvOther;
    for (uint32_t i = 0; i < n; ++i) repostRecv(q);
  }
}

RegistrationCache::Entry* IbLink::pinOwned(void* p, size_t bytes) {
  owned_.push_back(device_->cache().pin(p, bytes));
  return owned_.back();
}

bool IbLink::sendsOutstanding() const {
  for (uint32_t used : sendUsed_) {
    if (used) return true;
  }
  return false;
}

void IbLink::postWrite(size_t qp, uint64_t wrId, const void* local, uint32_t lkey, size_t bytes,
                       uint64_t remoteAddr, uint32_t rkey, uint32_t imm, bool inlineData) {
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uintptr_t>(local);
  sge.length = static_cast<uint32_t>(bytes);
  sge.lkey = lkey;
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = wrId;
  wr.sg_list = bytes ? &sge : nullptr;
  wr.num_sge = bytes ? 1 : 0;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED | (inlineData ? IBV_SEND_INLINE : 0);
  wr.imm_data = htonl(imm);
  wr.wr.rdma.remote_addr = remoteAddr;
  wr.wr.rdma.rkey = rkey;
  if (const int rc = ibv_post_send(qps_[qp]->get(), &wr, &bad); rc != 0) {
    fail(tidalSystemError, "{}: ibv_post_send of {} bytes on QP {} failed: {}", who_, bytes, qp,
         errnoText(rc));
  }
  ++sendUsed_[qp];
}

void IbLink::repostRecv(size_t qp) {
  // Writes with immediate consume a receive entry but place their data where
  // the writer said: the entry needs no buffer.
  ibv_recv_wr wr{};
  ibv_recv_wr* bad = nullptr;
  wr.wr_id = makeWrId(WrKind::Recv, qp, 0);
  if (const int rc = ibv_post_recv(qps_[qp]->get(), &wr, &bad); rc != 0) {
    fail(tidalSystemError, "{}: ibv_post_recv on QP {} failed: {}", who_, qp, errnoText(rc));
  }
}

int IbLink::poll(ibv_wc* wc, int max) {
  const int n = ibv_poll_cq(cq_, max, wc);
  if (n < 0) fail(tidalSystemError, "{}: ibv_poll_cq failed", who_);
  return n;
}

std::string IbLink::completionError(const ibv_wc& wc) const {
  return fmt::format("{} on QP {} failed: {} (status {}, vendor error {:#x})",
                     opcodeName(wc.opcode), wrQp(wc.wr_id), device_->api().wcStatusStr(wc.status),
                     static_cast<int>(wc.status), wc.vendor_err);
}

bool IbLink::arm() {
  if (armed_) return false;
  if (const int rc = ibv_req_notify_cq(cq_, 0); rc != 0) {
    fail(tidalSystemError, "{}: ibv_req_notify_cq failed: {}", who_, errnoText(rc));
  }
  armed_ = true;
  return true;
}

void IbLink::consumeEvents() {
  if (armed_) drainEvents();
}

void IbLink::drainEvents() {
  if (channel_ == nullptr) return;
  ibv_cq* cq = nullptr;
  void* context = nullptr;
  unsigned events = 0;
  while (device_->api().getCqEvent(channel_, &cq, &context) == 0) ++events;
  if (events) {
    device_->api().ackCqEvents(cq_, events);
    armed_ = false;
  }
  wake_.drain();
}

void IbLink::addPollFds(std::vector<pollfd>& fds) const {
  fds.push_back({channel_->fd, POLLIN, 0});
  fds.push_back({device_->errorFd(), POLLIN, 0});
  fds.push_back({wake_.fd(), POLLIN, 0});
  // The peer never writes after set-up: readable means it is gone.
  if (socket_.valid()) fds.push_back({socket_.fd(), POLLIN, 0});
}

void IbLink::setSocket(Socket s) {
  socket_ = std::move(s);
  socket_.setNonBlocking();
}

void IbLink::checkHealth() const {
  if (aborted()) fail(tidalRemoteError, "{}: aborted", who_);
  if (device_->hasAsyncError()) fail(tidalSystemError, "{}: {}", who_, device_->asyncError());
}

bool IbLink::peerGone(std::string& why) {
  char byte;
  ssize_t n;
  do {
    n = ::recv(socket_.fd(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
  if (n > 0) {
    why = "the peer sent unexpected bytes on the set-up channel";
  } else {
    why = n == 0 ? "the peer closed its set-up channel" : errnoText(errno);
  }
  return true;
}

bool IbLink::peerGoneThrottled(std::string& why) {
  const auto now = Clock::now();
  if (now - lastPeerCheck_ < std::chrono::milliseconds(1)) return false;
  lastPeerCheck_ = now;
  return peerGone(why);
}

void IbLink::lost(const std::string& description, const std::string& why, uint64_t bytesMoved,
                  uint64_t posted, uint64_t completed) const {
  fail(tidalRemoteError,
       "{} lost ({}): {} after {} bytes with {} of {} transfers unfinished; the peer process "
       "exited, was killed or aborted",
       who_, description, why, bytesMoved, posted - completed, posted);
}

void IbLink::drainSends() {
  const auto until = Clock::now() + std::chrono::milliseconds(200);
  ibv_wc wc[16];
  while (!aborted() && sendsOutstanding() && Clock::now() < until) {
    const int n = poll(wc, 16);
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) return;
      if (wrKind(wc[i].wr_id) != WrKind::Recv) sendDone(wrQp(wc[i].wr_id));
    }
  }
}

void IbLink::abort() {
  aborted_ = true;
  wake_.signal();
  if (socket_.valid()) socket_.shutdownBoth();
}

}  // namespace tidal::ib
