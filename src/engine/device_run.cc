#include "engine/device_run.h"

#include <sched.h>

#include <algorithm>
#include <thread>

#include "core/dtype.h"
#include "core/error.h"

namespace tidal {

namespace {
constexpr auto kSleepStep = std::chrono::microseconds(50);
}  // namespace

DeviceRunner::DeviceRunner(int rank, DeviceApi& device, EngineOptions options)
    : rank_(rank), device_(device), options_(options) {
  staging_ =
      device_.allocateDevice(options_.chunkBytes * static_cast<size_t>(options_.stagingSlots));
}

Connection& DeviceRunner::connection(const std::map<int, Connection*>& map, int peer,
                                     const char* direction, const char* what) const {
  auto it = map.find(peer);
  if (it == map.end()) {
    fail(tidalInternalError, "rank {}: {} on device buffers needs a {} connection with rank {}",
         rank_, what, direction, peer);
  }
  return *it->second;
}

void DeviceRunner::KernelReducer::combine(void* dst, const void* local, const void* incoming,
                                          size_t bytes) const {
  device_->reduce(dst, local, incoming, bytes / typeSize(type_), type_, op_, divisor_);
}

class DeviceRunner::Run {
 public:
  Run(DeviceRunner& runner, const coll::Schedule& s, const void* sendbuff, void* recvbuff,
      const char* what, const std::atomic<bool>& aborted)
      : r_(runner),
        s_(s),
        what_(what),
        aborted_(aborted),
        send_(static_cast<const char*>(sendbuff)),
        recv_(static_cast<char*>(recvbuff)) {
    sendSeq_.assign(s.sends.size(), 0);
    recvSeq_.assign(s.recvs.size(), 0);
    recvSlot_.assign(s.recvs.size(), -1);
    recvDone_.assign(s.recvs.size(), 0);
    r_.reducers_.resize(std::max(r_.reducers_.size(), s.recvs.size()));
    for (const auto& op : s.sends) note(&sendConnection(op.peer));
    for (const auto& op : s.recvs) note(&recvConnection(op.peer));
    freeSlots_ = r_.options_.stagingSlots;
  }

  void execute() {
    for (const auto& c : s_.prologue) r_.device_.copy(resolve(c.dst), resolve(c.src), c.bytes);
    auto lastMove = Clock::now();
    while (sendsDone_ < s_.sends.size() || recvsDone_ < s_.recvs.size()) {
      checkAborted();
      bool moved = postSends();
      moved |= postRecvs();
      for (Connection* c : connections_) moved |= c->progress();
      moved |= completeRecvs();
      moved |= completeSends();
      if (moved) {
        lastMove = Clock::now();
        continue;
      }
      waitALittle(lastMove, [&] { return waitingFor(); });
    }
    // Everything this run enqueued, the reductions of its last receives
    // included, must have finished before the caller's stream may go on.
    const uint64_t end = r_.device_.mark();
    lastMove = Clock::now();
    while (!r_.device_.reached(end)) {
      checkAborted();
      waitALittle(lastMove, [] { return std::string("the GPU to finish the engine stream"); });
    }
  }

 private:
  Connection& sendConnection(int peer) const {
    return r_.connection(r_.sendTo_, peer, "send", what_);
  }
  Connection& recvConnection(int peer) const {
    return r_.connection(r_.recvFrom_, peer, "receive", what_);
  }
  void note(Connection* c) {
    if (std::find(connections_.begin(), connections_.end(), c) == connections_.end())
      connections_.push_back(c);
  }

  void checkAborted() const {
    if (aborted_.load(std::memory_order_relaxed)) {
      fail(tidalRemoteError, "rank {}: {} aborted (tidalCommAbort or an earlier error)", r_.rank_,
           what_);
    }
  }

  char* resolve(const coll::BufferRef& ref) const {
    return coll::resolveBuffer(ref, send_, recv_, r_.scratch_.data());
  }

  char* slotAddress(int slot) const {
    return r_.staging_.data() + static_cast<size_t>(slot) * r_.options_.chunkBytes;
  }

  bool postSends() {
    bool any = false;
    while (nextSend_ < s_.sends.size()) {
      const auto& op = s_.sends[nextSend_];
      if (op.afterRecv >= 0 && !recvDone_[static_cast<size_t>(op.afterRecv)]) break;
      Connection& c = sendConnection(op.peer);
      sendSeq_[nextSend_] = c.posted();
      c.post(resolve(op.src), op.bytes);
      ++nextSend_;
      any = true;
    }
    return any;
  }

  // The host engine's rule (engine.h): only the caller's input, which no op
  // of the collective writes before this receive, may be combined on arrival.
  static bool reducesOnArrival(const coll::RecvOp& op, const Connection& c) {
    return op.afterSend < 0 && op.localInput.buffer == coll::Buffer::Send && c.canReduceOnArrival();
  }

  bool postRecvs() {
    bool any = false;
    while (nextRecvPost_ < s_.recvs.size()) {
      const auto& op = s_.recvs[nextRecvPost_];
      Connection& c = recvConnection(op.peer);
      if (op.reduce && reducesOnArrival(op, c)) {
        auto& reducer = r_.reducers_[nextRecvPost_];
        reducer = KernelReducer(&r_.device_, s_.type, s_.op, op.divisor);
        recvSeq_[nextRecvPost_] = c.posted();
        c.postReduce(resolve(op.dst), resolve(op.localInput), op.bytes, reducer);
      } else {
        void* target = resolve(op.dst);
        if (op.reduce) {
          if (op.bytes > r_.options_.chunkBytes) {
            fail(tidalInternalError,
                 "rank {}: {}: a reducing receive of {} bytes exceeds the {}-byte staging slot",
                 r_.rank_, what_, op.bytes, r_.options_.chunkBytes);
          }
          if (freeSlots_ == 0) break;  // no credit until a reduction is enqueued
          const int slot = nextSlot_;
          nextSlot_ = (nextSlot_ + 1) % r_.options_.stagingSlots;
          --freeSlots_;
          recvSlot_[nextRecvPost_] = slot;
          target = slotAddress(slot);
        }
        recvSeq_[nextRecvPost_] = c.posted();
        c.post(target, op.bytes);
      }
      ++nextRecvPost_;
      any = true;
    }
    return any;
  }

  bool sendComplete(size_t i) const {
    return i < nextSend_ && sendConnection(s_.sends[i].peer).completed() > sendSeq_[i];
  }

  bool completeRecvs() {
    bool any = false;
    while (recvsDone_ < nextRecvPost_) {
      const auto& op = s_.recvs[recvsDone_];
      if (recvConnection(op.peer).completed() <= recvSeq_[recvsDone_]) break;
      if (op.afterSend >= 0 && !sendComplete(static_cast<size_t>(op.afterSend))) break;
      if (const int slot = recvSlot_[recvsDone_]; slot >= 0) {
        r_.device_.reduce(resolve(op.dst), resolve(op.localInput), slotAddress(slot),
                          op.bytes / typeSize(s_.type), s_.type, s_.op, op.divisor);
        // The next write into this slot is enqueued later on the same stream.
        ++freeSlots_;
      }
      recvDone_[recvsDone_] = 1;
      ++recvsDone_;
      any = true;
    }
    return any;
  }

  bool completeSends() {
    bool any = false;
    while (sendsDone_ < nextSend_) {
      const auto& op = s_.sends[sendsDone_];
      if (sendConnection(op.peer).completed() <= sendSeq_[sendsDone_]) break;
      ++sendsDone_;
      any = true;
    }
    return any;
  }

  std::string waitingFor() const {
    if (recvsDone_ < s_.recvs.size()) {
      return fmt::format("data from rank {} (receive {} of {})", s_.recvs[recvsDone_].peer,
                         recvsDone_ + 1, s_.recvs.size());
    }
    return fmt::format("rank {} to take data (send {} of {})", s_.sends[sendsDone_].peer,
                       sendsDone_ + 1, s_.sends.size());
  }

  template <typename Describe>
  void waitALittle(Clock::time_point lastMove, Describe&& describe) const {
    const auto idle = Clock::now() - lastMove;
    if (idle > r_.options_.timeout) {
      fail(tidalTimeout,
           "rank {}: {} on device buffers made no progress for TIDAL_TIMEOUT={} s, waiting for {}",
           r_.rank_, what_, r_.options_.timeout.count(), describe());
    }
    if (idle < r_.options_.spin) {
      sched_yield();
    } else {
      std::this_thread::sleep_for(kSleepStep);
    }
  }

  DeviceRunner& r_;
  const coll::Schedule& s_;
  const char* what_;
  const std::atomic<bool>& aborted_;
  const char* send_;
  char* recv_;
  std::vector<Connection*> connections_;
  std::vector<uint64_t> sendSeq_, recvSeq_;
  std::vector<int> recvSlot_;
  std::vector<char> recvDone_;
  size_t nextSend_ = 0, sendsDone_ = 0;
  size_t nextRecvPost_ = 0, recvsDone_ = 0;
  int freeSlots_ = 0, nextSlot_ = 0;
};

void DeviceRunner::run(const coll::Schedule& schedule, const void* sendbuff, void* recvbuff,
                       const char* what, const std::atomic<bool>& aborted) {
  if (scratch_.size() < schedule.scratchBytes) {
    scratch_.reset();  // the GPU finished with it: every run ends on a reached marker
    scratch_ = device_.allocateDevice(schedule.scratchBytes);
  }
  Run(*this, schedule, sendbuff, recvbuff, what, aborted).execute();
}

}  // namespace tidal
