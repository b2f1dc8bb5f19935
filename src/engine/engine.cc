#include "engine/engine.h"

#include <poll.h>
#include <sched.h>

#include <cstring>
#include <set>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/log.h"
#include "reduce/reduce.h"

namespace tidal {

Engine::Engine(int rank, EngineOptions options) : rank_(rank), options_(options) {
  staging_.reserve(options_.chunkBytes * static_cast<size_t>(options_.stagingSlots));
}

Connection& Engine::sendConnection(int peer, const char* what) const {
  auto it = sendTo_.find(peer);
  if (it == sendTo_.end()) {
    fail(tidalInternalError, "rank {}: {} needs a send connection to rank {} it does not have",
         rank_, what, peer);
  }
  return *it->second;
}

Connection& Engine::recvConnection(int peer, const char* what) const {
  auto it = recvFrom_.find(peer);
  if (it == recvFrom_.end()) {
    fail(tidalInternalError, "rank {}: {} needs a receive connection from rank {} it does not have",
         rank_, what, peer);
  }
  return *it->second;
}

// The state of one schedule's execution.
class Engine::Run {
 public:
  Run(Engine& engine, const coll::Schedule& s, const void* sendbuff, void* recvbuff,
      const char* what)
      : e_(engine),
        s_(s),
        what_(what),
        send_(static_cast<const char*>(sendbuff)),
        recv_(static_cast<char*>(recvbuff)),
        sendSeq_(s.sends.size()),
        recvSeq_(s.recvs.size()),
        recvSlot_(s.recvs.size(), -1),
        recvDone_(s.recvs.size(), 0) {
    for (const auto& op : s.sends) sendConns_.insert(&e_.sendConnection(op.peer, what));
    for (const auto& op : s.recvs) recvConns_.insert(&e_.recvConnection(op.peer, what));
    freeSlots_ = e_.options_.stagingSlots;
  }

  void execute() {
    for (const auto& c : s_.prologue) std::memcpy(resolve(c.dst), resolve(c.src), c.bytes);
    auto lastMove = Clock::now();
    while (sendsDone_ < s_.sends.size() || recvsDone_ < s_.recvs.size()) {
      if (e_.aborted_) {
        fail(tidalRemoteError, "rank {}: {} aborted (tidalCommAbort or an earlier error)", e_.rank_,
             what_);
      }
      postSends();
      postRecvs();
      bool moved = false;
      for (Connection* c : sendConns_) moved |= c->progress();
      for (Connection* c : recvConns_) moved |= c->progress();
      moved |= completeRecvs();
      completeSends();
      if (moved) {
        lastMove = Clock::now();
        continue;
      }
      waitForActivity(lastMove);
    }
  }

 private:
  char* resolve(const coll::BufferRef& ref) const {
    switch (ref.buffer) {
      case coll::Buffer::Send:
        return const_cast<char*>(send_) + ref.offset;
      case coll::Buffer::Recv:
        return recv_ + ref.offset;
      case coll::Buffer::Scratch:
        return e_.scratch_.data() + ref.offset;
    }
    return nullptr;
  }

  char* slotAddress(int slot) const {
    return e_.staging_.data() + static_cast<size_t>(slot) * e_.options_.chunkBytes;
  }

  void postSends() {
    while (nextSend_ < s_.sends.size()) {
      const auto& op = s_.sends[nextSend_];
      if (op.afterRecv >= 0 && !recvDone_[static_cast<size_t>(op.afterRecv)]) return;
      Connection& c = e_.sendConnection(op.peer, what_);
      sendSeq_[nextSend_] = c.posted();
      c.post(resolve(op.src), op.bytes);
      ++nextSend_;
    }
  }

  void postRecvs() {
    while (nextRecvPost_ < s_.recvs.size()) {
      const auto& op = s_.recvs[nextRecvPost_];
      Connection& c = e_.recvConnection(op.peer, what_);
      void* target;
      if (op.reduce) {
        if (freeSlots_ == 0) return;  // no credit: wait for a reduction to free one
        const int slot = nextSlot_;
        nextSlot_ = (nextSlot_ + 1) % e_.options_.stagingSlots;
        --freeSlots_;
        recvSlot_[nextRecvPost_] = slot;
        target = slotAddress(slot);
      } else {
        target = resolve(op.dst);
      }
      recvSeq_[nextRecvPost_] = c.posted();
      c.post(target, op.bytes);
      ++nextRecvPost_;
    }
  }

  bool completeRecvs() {
    bool any = false;
    while (recvsDone_ < nextRecvPost_) {
      const auto& op = s_.recvs[recvsDone_];
      if (e_.recvConnection(op.peer, what_).completed() <= recvSeq_[recvsDone_]) break;
      if (op.afterSend >= 0 && !sendComplete(static_cast<size_t>(op.afterSend))) break;
      if (op.reduce) {
        reduce(resolve(op.dst), resolve(op.localInput), slotAddress(recvSlot_[recvsDone_]),
               op.bytes / typeSize(s_.type), s_.type, s_.op, op.divisor);
        ++freeSlots_;  // slots are used and freed in FIFO order
      }
      recvDone_[recvsDone_] = 1;
      ++recvsDone_;
      any = true;
    }
    return any;
  }

  bool sendComplete(size_t i) const {
    return i < nextSend_ && e_.sendConnection(s_.sends[i].peer, what_).completed() > sendSeq_[i];
  }

  void completeSends() {
    while (sendsDone_ < nextSend_) {
      const auto& op = s_.sends[sendsDone_];
      if (e_.sendConnection(op.peer, what_).completed() <= sendSeq_[sendsDone_]) break;
      ++sendsDone_;
    }
  }

  void waitForActivity(Clock::time_point lastMove) {
    const auto now = Clock::now();
    if (now - lastMove < e_.options_.spin) {
      sched_yield();  // spin politely: another rank on this core may be the one we wait for
      return;
    }
    if (now - lastMove > e_.options_.timeout) timeout();
    pollFds_.clear();  // reused: no allocation per sleep
    for (Connection* c : sendConns_) c->addPollFds(pollFds_);
    for (Connection* c : recvConns_) c->addPollFds(pollFds_);
    // Short sleeps keep abort and the timeout responsive.
    ::poll(pollFds_.data(), pollFds_.size(), 100);
  }

  [[noreturn]] void timeout() const {
    std::string waiting;
    if (recvsDone_ < s_.recvs.size()) {
      waiting = fmt::format("data from rank {} (receive {} of {})", s_.recvs[recvsDone_].peer,
                            recvsDone_ + 1, s_.recvs.size());
    } else {
      waiting = fmt::format("rank {} to take data (send {} of {})", s_.sends[sendsDone_].peer,
                            sendsDone_ + 1, s_.sends.size());
    }
    fail(tidalTimeout, "rank {}: {} made no progress for TIDAL_TIMEOUT={} s, waiting for {}",
         e_.rank_, what_, e_.options_.timeout.count(), waiting);
  }

  Engine& e_;
  const coll::Schedule& s_;
  const char* what_;
  const char* send_;
  char* recv_;
  std::set<Connection*> sendConns_, recvConns_;
  std::vector<uint64_t> sendSeq_, recvSeq_;
  std::vector<int> recvSlot_;
  std::vector<char> recvDone_;
  std::vector<pollfd> pollFds_;
  size_t nextSend_ = 0, sendsDone_ = 0;
  size_t nextRecvPost_ = 0, recvsDone_ = 0;
  int freeSlots_ = 0, nextSlot_ = 0;
};

void Engine::run(const coll::Schedule& schedule, const void* sendbuff, void* recvbuff,
                 const char* what) {
  scratch_.reserve(schedule.scratchBytes);
  Run(*this, schedule, sendbuff, recvbuff, what).execute();
}

}  // namespace tidal
