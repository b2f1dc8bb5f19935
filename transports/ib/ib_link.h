// The verbs half of one ib connection, used by both directions: a
// completion queue with its completion channel, the RC queue pairs, the
// side-channel socket that watches the peer, and the waiting machinery.
//
// Sleeping without losing a completion: a CQ raises an event on its channel
// only for completions that arrive after it was armed (ibv_req_notify_cq).
// So a connection arms when it has found nothing to do and then polls the
// CQ once more before it lets the engine sleep; anything that arrived in
// between is handled right there. The channel fd is non-blocking and in
// the poll set; after a wakeup its events are read and acknowledged (the CQ
// cannot be destroyed with unacknowledged events).
#pragma once

#include <infiniband/verbs.h>
#include <poll.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "core/socket.h"
#include "transports/ib/event_fd.h"
#include "transports/ib/ib_device.h"
#include "transports/ib/queue_pair.h"

namespace tidal::ib {

// Work request ids: what a completion is about, on which QP, for which transfer.
enum class WrKind : uint8_t { Recv = 1, Data = 2, Eager = 3, Cts = 4, Credit = 5 };
inline uint64_t makeWrId(WrKind kind, size_t qp, uint64_t value) {
  return (uint64_t{static_cast<uint8_t>(kind)} << 56) | (uint64_t{qp & 0xff} << 48) |
         (value & ((uint64_t{1} << 48) - 1));
}
inline WrKind wrKind(uint64_t id) { return static_cast<WrKind>(id >> 56); }
inline size_t wrQp(uint64_t id) { return (id >> 48) & 0xff; }
inline uint64_t wrValue(uint64_t id) { return id & ((uint64_t{1} << 48) - 1); }

class IbLink {
 public:
  struct Depths {
    uint32_t send0, sendOther;  // send queue entries on QP 0 / the others
    uint32_t recv0, recvOther;  // receive entries kept posted
  };

  IbLink(std::shared_ptr<IbDevice> device, std::string who, uint32_t nqps, Depths depths);
  ~IbLink();
  IbLink(const IbLink&) = delete;
  IbLink& operator=(const IbLink&) = delete;

  IbDevice& device() const { return *device_; }
  const std::string& who() const { return who_; }
  size_t qpCount() const { return qps_.size(); }
  uint32_t maxInline() const { return qps_.front()->maxInline(); }
  std::vector<QpEndpoint> endpoints() const;
  PortAddress localAddress() const;

  // Connects every QP to its partner and posts the receive entries.
  void connect(const std::vector<QpEndpoint>& remote, const PortAddress& peer, ibv_mtu pathMtu,
               const QpOptions& options);

  // Registration of memory the connection owns (FIFO, rings), for its life.
  RegistrationCache::Entry* pinOwned(void* p, size_t bytes);

  // Send queue space: posts fail loudly rather than overrun the QP.
  bool sendSpace(size_t qp) const { return sendUsed_[qp] < sendDepth(qp); }
  void sendDone(size_t qp) { --sendUsed_[qp]; }
  bool sendsOutstanding() const;
  void postWrite(size_t qp, uint64_t wrId, const void* local, uint32_t lkey, size_t bytes,
                 uint64_t remoteAddr, uint32_t rkey, uint32_t imm, bool inlineData);
  void repostRecv(size_t qp);

  // Up to `max` completions; failed ones are returned too (callers name them).
  int poll(ibv_wc* wc, int max);
  // Hands up to kPollBudget completions to `handle`; true if there were any.
  // The budget bounds one progress() call however busy the CQ is.
  static constexpr int kPollBudget = 64;
  template <typename Handler>
  bool pollEach(Handler&& handle) {
    ibv_wc wc[16];
    int total = 0;
    while (total < kPollBudget) {
      const int n = poll(wc, 16);
      if (n == 0) break;
      for (int i = 0; i < n; ++i) handle(wc[i]);
      total += n;
    }
    return total > 0;
  }
  // Waits a moment (bounded) for our own writes still in flight, so a peer
  // that is still reading gets its last bytes before the QPs go.
  void drainSends();
  // "RDMA write on QP 1 failed: transport retry counter exceeded (vendor 0x81)".
  std::string completionError(const ibv_wc& wc) const;

  // Arms the CQ if it is not armed. True when it was just armed: the caller
  // must poll once more before sleeping.
  bool arm();
  // After a possible wakeup: reads and acknowledges the channel's events.
  void consumeEvents();
  void addPollFds(std::vector<pollfd>& fds) const;

  Socket& socket() { return socket_; }
  void setSocket(Socket s);
  // Throws RemoteError after abort, SystemError after a device async error.
  void checkHealth() const;
  // Peeks at the side channel; true (and `why`) when the peer is gone.
  bool peerGone(std::string& why);
  // The same, at most once a millisecond: for connections that wait.
  bool peerGoneThrottled(std::string& why);
  // The error for a peer that is gone, with what the connection had done.
  [[noreturn]] void lost(const std::string& description, const std::string& why,
                         uint64_t bytesMoved, uint64_t posted, uint64_t completed) const;
  void abort();
  bool aborted() const { return aborted_.load(std::memory_order_relaxed); }

 private:
  void drainEvents();
  // Destroys QPs, CQ and channel, unpins owned memory (idempotent).
  void release();
  uint32_t sendDepth(size_t qp) const { return qp == 0 ? depths_.send0 : depths_.sendOther; }

  std::shared_ptr<IbDevice> device_;
  std::string who_;
  Depths depths_;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  std::vector<std::unique_ptr<QueuePair>> qps_;
  std::vector<uint32_t> sendUsed_;
  std::vector<RegistrationCache::Entry*> owned_;
  bool armed_ = false;
  Clock::time_point lastPeerCheck_{};
  Socket socket_;
  EventFd wake_;
  std::atomic<bool> aborted_{false};
};

}  // namespace tidal::ib
