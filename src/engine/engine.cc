#include "engine/engine.h"

#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include "core/cpu_relax.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/log.h"
#include "engine/host_data_plane.h"
#include "engine/runnable_tasks.h"

namespace tidal {

Engine::Engine(int rank, EngineOptions options)
    : Engine(rank, options,
             std::make_unique<HostDataPlane>(options.chunkBytes *
                                             static_cast<size_t>(options.stagingSlots))) {}

Engine::Engine(int rank, EngineOptions options, std::unique_ptr<DataPlane> plane)
    : rank_(rank), options_(options), plane_(std::move(plane)), spin_(options.spin) {}

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

Connection& Engine::openSendConnection(int peer, const char* what) {
  if (auto it = sendTo_.find(peer); it != sendTo_.end()) return *it->second;
  if (!opener_) return sendConnection(peer, what);  // reports the missing connection
  return opener_->openSend(peer, what);
}

Connection& Engine::openRecvConnection(int peer, const char* what) {
  if (auto it = recvFrom_.find(peer); it != recvFrom_.end()) return *it->second;
  if (!opener_) return recvConnection(peer, what);
  return opener_->openRecv(peer, what);
}

namespace {
// See Run::endOfWait.
constexpr auto kShortSleep = std::chrono::microseconds(100);
constexpr auto kMinSpin = std::chrono::microseconds(50);
// Idle rounds between clock reads while spinning.
constexpr unsigned kRoundsPerClockRead = 16;
// A busy-polling wait this long tells its peers where it spins and looks for
// one waiting on the same CPU (Run::lookForPeerOnThisCpu): far shorter than
// what such a pair costs per hop (the spin, 50 us and more), far longer than
// a hop between ranks on two CPUs, so that short waits never pay for it.
constexpr auto kSharedCpuCheckAfter = std::chrono::microseconds(20);
// At most one move per engine in this time, so that a scheduler that keeps
// putting the ranks back together cannot make every wait a migration.
constexpr auto kMinCpuMoveInterval = std::chrono::milliseconds(1);
// A yield that kept the core away this long handed it to a busy process
// for a time slice (Run::longYield); one rank handing it to another costs
// microseconds, a big reduction on that rank a few hundred.
constexpr auto kLongYield = std::chrono::microseconds(1000);
constexpr int kCrowdedLongYields = 3;
constexpr auto kMinSleepInsteadOfYield = std::chrono::milliseconds(50);
constexpr auto kMaxSleepInsteadOfYield = std::chrono::milliseconds(1600);
// A sleep step of a plane whose completions have no descriptor.
constexpr auto kSleepStep = std::chrono::microseconds(50);
// After a failure, how long a run waits for its own GPU work (a peer's
// record on its way out of a ring) before it gives up explaining the
// failure by a mismatch. Small copies take microseconds; a hung GPU must
// not hold the error back.
constexpr auto kOwnWorkWait = std::chrono::seconds(1);
// A wait stalled this long asks, at most once per kNoticeCheckEvery, whether
// another rank told that its call failed (FailureNotices): one system call
// (a peek at a socket) per check, and none in waits that move.
constexpr auto kNoticeCheckAfter = std::chrono::milliseconds(200);
constexpr auto kNoticeCheckEvery = std::chrono::milliseconds(100);
}  // namespace

// The state of one schedule's execution.
class Engine::Run {
 public:
  Run(Engine& engine, const coll::Schedule& s, const void* sendbuff, void* recvbuff,
      const char* what, const std::atomic<bool>* alsoAborted, const CallCheck* check)
      : e_(engine),
        plane_(*engine.plane_),
        s_(s),
        what_(what),
        alsoAborted_(alsoAborted),
        send_(static_cast<const char*>(sendbuff)),
        recv_(static_cast<char*>(recvbuff)),
        scratch_(plane_.scratch(s.scratchBytes)),
        staging_(plane_.staging()),
        st_(engine.state_),
        check_(check) {
    st_.sendSeq.assign(s.sends.size(), 0);
    st_.recvSeq.assign(s.recvs.size(), 0);
    st_.recvSlot.assign(s.recvs.size(), -1);
    st_.recvDone.assign(s.recvs.size(), 0);
    st_.recvSkipped.assign(s.recvs.size(), 0);
    st_.sizes.assign(s.recvs.size(), 0);
    st_.reducers.resize(std::max(st_.reducers.size(), s.recvs.size()));
    // Every connection the schedule touches, once each (a handful: a linear
    // scan beats a set, and allocates nothing once the vector has grown).
    st_.connections.clear();
    auto note = [this](Connection* c) {
      if (std::find(st_.connections.begin(), st_.connections.end(), c) == st_.connections.end())
        st_.connections.push_back(c);
    };
    // Sends first: opening a send connection never waits for the peer, so
    // ranks that open links to each other in this run cannot deadlock.
    // Each op's connection is looked up once here, not in every round.
    st_.sendConn.clear();
    st_.recvConn.clear();
    for (const auto& op : s.sends) {
      st_.sendConn.push_back(&e_.openSendConnection(op.peer, what));
      note(st_.sendConn.back());
    }
    if (check_ && check_->ringNext >= 0) note(&e_.openSendConnection(check_->ringNext, what));
    for (const auto& op : s.recvs) {
      st_.recvConn.push_back(&e_.openRecvConnection(op.peer, what));
      note(st_.recvConn.back());
    }
    if (check_ && check_->ringPrev >= 0) note(&e_.openRecvConnection(check_->ringPrev, what));
    freeSlots_ = e_.options_.stagingSlots;
    if (check_) noteSignatureLinks();
  }

  // A run that ends (or throws) in a long wait tells its peers it no longer
  // waits on its CPU.
  ~Run() { stopPublishingCpu(); }
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;

  void execute() {
    // The prologue first: a send that rides inside a signature is read when
    // the signature is posted, and may read what the prologue copies.
    for (const auto& c : s_.prologue) plane_.copy(resolve(c.dst), resolve(c.src), c.bytes);
    if (!check_) return loop();
    try {
      postSignatures();
      loop();
    } catch (const Error&) {
      // A peer that found the mismatch first breaks off its connections, and
      // our own sends can fail on that before we read its signature: the
      // mismatch, when its record is here, says more than the lost link.
      st_.signaturePlan = 0;  // its per-run state is not reset
      explainWithSignatures();
      throw;
    }
  }

 private:
  void loop() {
    // Read at the first idle round, not here: a small call that never waits
    // (its data is there, or goes out at once) then reads no clock at all,
    // and a read costs as much as a round (about 20 ns here).
    Clock::time_point lastMove;
    lastMoveUnknown_ = true;
    while (sendsDone_ < s_.sends.size() || recvsDone_ < s_.recvs.size() || !signaturesSettled()) {
      checkAborted();
      bool moved = postSends();
      moved |= postRecvs();
      for (Connection* c : st_.connections) moved |= c->progress();
      // A signature that progress() just brought may carry the data of the
      // receive behind it: taken in this round, not the next. Only a round
      // that moved something can have brought one (completions change only
      // in post and progress), so idle rounds, which are most rounds of a
      // wait, skip it.
      if (check_ && moved) {
        if (nextRecvPost_ < s_.recvs.size()) moved |= postRecvs();
        if (!signaturesCompared_) moved |= checkArrivedSignatures();
      }
      moved |= completeRecvs();
      moved |= completeSends();
      if (moved) {
        // The clock is read once per wait, not once per round: a round that
        // moved bytes only marks the time as unknown, and the first idle
        // round after it reads it (a clock read costs as much as a round).
        // Only a wait that went to sleep needs the time it ended (endOfWait);
        // one that ended while spinning, the usual end of a small call's
        // wait, reads no clock here, where the call's answer is waiting.
        if (waited_ && sleptAt_) {
          lastMove = Clock::now();
          endOfWait(lastMove);
        } else {
          if (waited_) endOfWait(Clock::time_point{});
          lastMoveUnknown_ = true;
        }
        continue;
      }
      waitForActivity(lastMove);
    }
    // Everything the plane was given, the reductions of the last receives
    // included, must have finished before the caller may use the outputs.
    const uint64_t end = plane_.markEnd();
    if (plane_.finished(end)) return;
    lastMoveUnknown_ = true;
    while (!plane_.finished(end)) {
      checkAborted();
      waitForActivity(lastMove);
    }
  }

  void checkAborted() const {
    if (e_.aborted_.load(std::memory_order_relaxed) ||
        (alsoAborted_ && alsoAborted_->load(std::memory_order_relaxed))) {
      fail(tidalRemoteError, "rank {}: {}{} aborted (tidalCommAbort or an earlier error)", e_.rank_,
           what_, plane_.where());
    }
  }

  // The connections the signatures travel on, each once: every send
  // connection carries ours, every receive connection brings the peer's.
  void noteSignatureLinks() {
    if (s_.stableId != 0 && st_.signaturePlan == s_.stableId &&
        st_.planRingNext == check_->ringNext && st_.planRingPrev == check_->ringPrev) {
      // The last run was this kept schedule on the same links: only what
      // changes per run is reset (a small call repeated in a loop is the
      // case where this bookkeeping is a visible part of the call). The
      // records stay where they were placed (the plane's area only moves when
      // a larger run asks for more, which works out a plan of its own), and
      // which sends ride inline follows from the schedule and the plane
      // alone. recvInline is all -1 again: a successful run resets each
      // entry as it delivers it, and a failed run forgets the plan
      // (execute()).
      for (auto& l : st_.signatureSends) *l.record = check_->signature;
      for (auto& r : st_.signatureRecvs) r.matched = r.firstReceiveTaken = false;
      return;
    }
    st_.signaturePlan = 0;  // until the links below are complete
    // The previous run's peers are forgotten (the map is reused, not
    // reallocated, and a run that failed half-way left its entries).
    for (const auto& r : st_.signatureRecvs) st_.recvOfPeer[static_cast<size_t>(r.peer)] = -1;
    st_.signatureSends.clear();
    st_.signatureRecvs.clear();
    st_.sendInline.assign(s_.sends.size(), -1);
    st_.recvInline.assign(s_.recvs.size(), -1);
    // Only sends the first postSends() would post read their bytes when the
    // signatures are posted, as they would have been read then: those before
    // the first that waits. A link's first send rides along when it is one
    // of those, small, and in host memory.
    size_t ready = 0;
    while (ready < s_.sends.size() && s_.sends[ready].afterRecv < 0) ++ready;
    const bool hostBuffers = plane_.buffersInHostMemory();
    auto sendTo = [&](Connection* c, int64_t firstSend) {
      for (const auto& l : st_.signatureSends)
        if (l.link == c) return;
      int64_t rides = -1;
      if (firstSend >= 0 && hostBuffers && static_cast<size_t>(firstSend) < ready) {
        const size_t bytes = s_.sends[static_cast<size_t>(firstSend)].bytes;
        if (bytes > 0 && bytes <= CallSignature::kInlineCapacity) {
          rides = firstSend;
          st_.sendInline[static_cast<size_t>(firstSend)] =
              static_cast<int>(st_.signatureSends.size());
        }
      }
      st_.signatureSends.push_back({c, rides, 0, nullptr});
    };
    auto recvFrom = [this](Connection* c, int peer) {
      const auto p = static_cast<size_t>(peer);
      if (st_.recvOfPeer.size() <= p) st_.recvOfPeer.resize(p + 1, -1);
      if (st_.recvOfPeer[p] >= 0) return;
      st_.recvOfPeer[p] = static_cast<int>(st_.signatureRecvs.size());
      st_.signatureRecvs.push_back({c, peer, 0, false, false, nullptr});
    };
    for (size_t i = 0; i < s_.sends.size(); ++i) sendTo(st_.sendConn[i], static_cast<int64_t>(i));
    if (check_->ringNext >= 0) sendTo(&e_.sendConnection(check_->ringNext, what_), -1);
    for (size_t i = 0; i < s_.recvs.size(); ++i) recvFrom(st_.recvConn[i], s_.recvs[i].peer);
    if (check_->ringPrev >= 0)
      recvFrom(&e_.recvConnection(check_->ringPrev, what_), check_->ringPrev);
    // Each link's record in the plane's memory; ours filled in.
    CallSignature* records =
        plane_.signatureRecords(st_.signatureSends.size() + st_.signatureRecvs.size());
    for (auto& l : st_.signatureSends) {
      l.record = records++;
      *l.record = check_->signature;
    }
    for (auto& r : st_.signatureRecvs) r.record = records++;
    st_.signaturePlan = s_.stableId;
    st_.planRingNext = check_->ringNext;
    st_.planRingPrev = check_->ringPrev;
  }

  // Ours ahead of any data we send, the peers' ahead of any data we take.
  // Nothing waits on our signature's sends: each connection's data sends
  // follow it, and the run waits for those (signaturesSettled for the rest).
  void postSignatures() {
    for (auto& l : st_.signatureSends) {
      // The link's first send, when it rides along (noteSignatureLinks): its
      // bytes are final now, the prologue ran.
      if (l.rides >= 0) {
        const auto& op = s_.sends[static_cast<size_t>(l.rides)];
        std::memcpy(l.record->inlineData, resolve(op.src), op.bytes);
        l.record->inlineBytes = static_cast<uint8_t>(op.bytes);
      }
      l.seq = l.link->posted();
      l.link->post(l.record, sizeof(CallSignature));
    }
    for (auto& r : st_.signatureRecvs) {
      r.seq = r.link->posted();
      r.link->post(r.record, sizeof(CallSignature));
    }
  }

  // Whether data from `peer` may be received: its signature has arrived and
  // matched ours. A mismatch fails the run before any of its bytes land.
  bool peerSignatureMatched(int peer) {
    auto& r = st_.signatureRecvs[static_cast<size_t>(st_.recvOfPeer[static_cast<size_t>(peer)])];
    if (r.matched) return true;
    if (!r.arrived()) return false;
    failOnMismatch(r);
    r.matched = true;
    return true;
  }

  // Compares every signature that has arrived, not only those of the peers
  // whose data is next: ranks that disagree about the root of a tree wait on
  // peers that never send to them, and the ring signature (which carries no
  // data) is then the only one that can tell, before the data is done.
  bool checkArrivedSignatures() {
    if (signaturesCompared_) return false;
    bool all = true, moved = false;
    for (auto& r : st_.signatureRecvs) {
      if (r.matched) continue;
      if (!r.arrived()) {
        all = false;
        continue;
      }
      failOnMismatch(r);
      r.matched = true;
      moved = true;
    }
    signaturesCompared_ = all;
    return moved;
  }

  void failOnMismatch(const RunState::SignatureRecv& r) const {
    if (sameCall(check_->signature, *r.record)) return;
    if (auto text = signatureMismatch(e_.rank_, check_->signature, r.peer, *r.record))
      fail(tidalInvalidUsage, "rank {}: {}: {}", e_.rank_, what_, *text);
  }

  // The receive at nextRecvPost_, when it is the first from its peer and the
  // peer's signature carried its data: nothing to post, it is complete.
  bool takeInline(const coll::RecvOp& op) {
    const int index = st_.recvOfPeer[static_cast<size_t>(op.peer)];
    auto& r = st_.signatureRecvs[static_cast<size_t>(index)];
    if (r.firstReceiveTaken) return false;
    r.firstReceiveTaken = true;
    if (r.record->inlineBytes == 0) return false;
    if (op.sizedBy >= 0 || op.bytes != r.record->inlineBytes ||
        r.record->inlineBytes > CallSignature::kInlineCapacity) {
      fail(tidalInvalidUsage,
           "rank {}: {}: rank {} sent {} bytes with its call signature where this rank's first "
           "receive from it takes {}: the two ranks' schedules differ (are TIDAL_* settings "
           "equal on every rank?)",
           e_.rank_, what_, op.peer, r.record->inlineBytes, op.bytes);
    }
    st_.recvInline[nextRecvPost_] = index;
    st_.recvSeq[nextRecvPost_] = r.seq;
    ++nextRecvPost_;
    return true;
  }

  // Lands (or reduces) a receive's data that came inside the signature.
  void deliverInline(size_t i) {
    const auto& op = s_.recvs[i];
    const unsigned char* data =
        st_.signatureRecvs[static_cast<size_t>(st_.recvInline[i])].record->inlineData;
    if (op.reduce) {
      plane_.reduce(resolve(op.dst), resolve(op.localInput), data, op.bytes / typeSize(s_.type),
                    s_.type, s_.op, op.divisor);
    } else {
      plane_.copy(resolve(op.dst), data, op.bytes);
    }
  }

  // Whether every signature of this run has gone out and every peer's has
  // arrived and matched. Data transfers imply it on the links they use; the
  // ring links of a rooted collective carry nothing else, and the run must
  // not end with their transfers pending.
  bool signaturesSettled() {
    if (!check_ || signaturesSettled_) return true;
    for (const auto& r : st_.signatureRecvs)
      if (!peerSignatureMatched(r.peer)) return false;
    for (const auto& l : st_.signatureSends)
      if (l.link->completed() <= l.seq) return false;
    signaturesSettled_ = true;
    return true;
  }

  // After a failure: a peer's signature that arrived (or arrives in what the
  // transport already holds) and does not match is the better explanation.
  // On device links a record's bytes can be here while the copy out of the
  // ring still runs on our GPU: that is our own work, so it is waited for
  // (bounded) before the record counts as missing. Nothing waits on a peer.
  void explainWithSignatures() {
    bool ownWorkDone = false;
    for (const auto& r : st_.signatureRecvs) {
      if (r.matched) continue;
      settle(r);
      if (!r.arrived() && !ownWorkDone) {
        waitForOwnWork();
        ownWorkDone = true;
        settle(r);
      }
      if (r.arrived()) failOnMismatch(r);
    }
  }

  // A few progress rounds on a signature's link; a link that fails still
  // retires what it had (progress() completes before it throws).
  static void settle(const RunState::SignatureRecv& r) {
    for (int round = 0; round < 4 && !r.arrived(); ++round) {
      try {
        r.link->progress();
      } catch (const Error&) {
        return;  // the link is gone; whatever arrived before it went is counted
      }
    }
  }

  void waitForOwnWork() {
    try {
      const uint64_t token = plane_.markEnd();
      const auto giveUp = Clock::now() + kOwnWorkWait;
      while (!plane_.finished(token) && Clock::now() < giveUp)
        std::this_thread::sleep_for(kSleepStep);
    } catch (const Error&) {
      // A failed GPU stream: the original failure stands.
    }
  }

  char* resolve(const coll::BufferRef& ref) const {
    return coll::resolveBuffer(ref, send_, recv_, scratch_);
  }

  char* slotAddress(int slot) const {
    return staging_ + static_cast<size_t>(slot) * e_.options_.chunkBytes;
  }

  bool postSends() {
    const size_t first = nextSend_;
    while (nextSend_ < s_.sends.size()) {
      const auto& op = s_.sends[nextSend_];
      if (op.afterRecv >= 0 && !st_.recvDone[static_cast<size_t>(op.afterRecv)]) break;
      if (check_ && st_.sendInline[nextSend_] >= 0) {
        // Went with the signature: done when that transfer is.
        st_.sendSeq[nextSend_] =
            st_.signatureSends[static_cast<size_t>(st_.sendInline[nextSend_])].seq;
        ++nextSend_;
        continue;
      }
      Connection& c = *st_.sendConn[nextSend_];
      st_.sendSeq[nextSend_] = c.posted();
      if (op.payload) {
        c.postPayload(resolve(op.src), op.bytes, op.singleCopy);
      } else {
        c.post(resolve(op.src), op.bytes);
      }
      ++nextSend_;
    }
    return nextSend_ != first;
  }

  bool postRecvs() {
    const size_t first = nextRecvPost_;
    while (nextRecvPost_ < s_.recvs.size()) {
      const auto& op = s_.recvs[nextRecvPost_];
      if (check_) {
        if (!peerSignatureMatched(op.peer)) break;
        if (takeInline(op)) continue;
      }
      Connection& c = *st_.recvConn[nextRecvPost_];
      size_t bytes = op.bytes;
      if (op.sizedBy >= 0) {
        // A piece of a sized message: its length is known once the size arrived.
        if (!st_.recvDone[static_cast<size_t>(op.sizedBy)]) break;
        const uint64_t total = messageSize(static_cast<size_t>(op.sizedBy));
        bytes =
            total > op.messageOffset ? std::min<uint64_t>(op.bytes, total - op.messageOffset) : 0;
        if (bytes == 0) {  // the sender's message is shorter: nothing comes for this piece
          st_.recvSkipped[nextRecvPost_] = 1;
          ++nextRecvPost_;
          continue;
        }
      }
      void* target;
      if (op.reduce && reducesOnArrival(op, c)) {
        auto& reducer = st_.reducers[nextRecvPost_];
        reducer = PlaneReducer(&plane_, s_.type, s_.op, op.divisor);
        st_.recvSeq[nextRecvPost_] = c.posted();
        c.postReduce(resolve(op.dst), resolve(op.localInput), op.bytes, reducer);
        ++nextRecvPost_;
        continue;
      }
      if (op.reduce) {
        if (op.bytes > e_.options_.chunkBytes) {
          fail(tidalInternalError,
               "rank {}: {}{}: a reducing receive of {} bytes exceeds the {}-byte staging slot",
               e_.rank_, what_, plane_.where(), op.bytes, e_.options_.chunkBytes);
        }
        if (freeSlots_ == 0) break;  // no credit: wait for a reduction to free one
        const int slot = nextSlot_;
        nextSlot_ = (nextSlot_ + 1) % e_.options_.stagingSlots;
        --freeSlots_;
        st_.recvSlot[nextRecvPost_] = slot;
        target = slotAddress(slot);
      } else {
        target = resolve(op.dst);
      }
      st_.recvSeq[nextRecvPost_] = c.posted();
      if (op.payload) {
        c.postPayload(target, bytes, false);
      } else {
        c.post(target, bytes);
      }
      ++nextRecvPost_;
    }
    return nextRecvPost_ != first;
  }

  // Read once, when the size's receive completes (it may be device memory).
  uint64_t messageSize(size_t sizeRecv) const { return st_.sizes[sizeRecv]; }

  // A size message announced more bytes than the receive has room for.
  void checkMessageSize(size_t i) {
    const auto& op = s_.recvs[i];
    if (op.messageHeader) return takeMessageHeader(i);
    st_.sizes[i] = plane_.readSize(resolve(op.dst));
    const uint64_t total = messageSize(i);
    if (total <= op.sizeLimit) return;
    if (total == CallSignature::kMagic) {
      fail(tidalInvalidUsage,
           "rank {}: {}: rank {} is in another call (its call signature or message header arrived "
           "where this rank's receive from it expected a message size): the two ranks' calls are "
           "out of step",
           e_.rank_, what_, op.peer);
    }
    fail(tidalInvalidUsage,
         "rank {}: {}: a receive of {} bytes from rank {} matched a send of {} bytes from rank {}; "
         "it would be truncated (the receive's count is too small, or the two ranks posted their "
         "operations to each other in different orders)",
         e_.rank_, what_, op.sizeLimit, op.peer, total, op.peer);
  }

  // A Send's header arrived (collectives/p2p.cc): check it against this
  // receive, deliver a message that came inside it, and size the pieces.
  void takeMessageHeader(size_t i) {
    const auto& op = s_.recvs[i];
    CallSignature h;
    plane_.readBack(&h, resolve(op.dst), sizeof h);
    if (h.magic != CallSignature::kMagic) {
      fail(tidalInvalidUsage,
           "rank {}: {}: what rank {} sent where this rank's receive from it expected a message "
           "header is not one: the two ranks' streams are out of step",
           e_.rank_, what_, op.peer);
    }
    if (static_cast<CallKind>(h.kind) != CallKind::Send) {
      fail(tidalInvalidUsage,
           "rank {}: {}: rank {} called {} as its call #{} where this rank receives a message "
           "from it: the two ranks' calls are out of step (a Send/Recv against a collective)",
           e_.rank_, what_, op.peer, h.describe(), h.seq + 1);
    }
    if (op.numbered) {
      uint64_t expected = 0;
      std::memcpy(&expected, resolve(op.numberAt), sizeof expected);
      if (h.seq != expected) {
        fail(tidalInvalidUsage,
             "rank {}: {}: rank {} sent its Send #{} to this rank where this rank's Recv #{} from "
             "it expected its Send #{}: the two ranks' Send/Recv between them are out of step "
             "(TIDAL_CHECK_CALLS=0 turns this check off)",
             e_.rank_, what_, op.peer, h.seq + 1, expected + 1, expected + 1);
      }
    }
    if (!isValidType(h.type) ||
        h.count > SIZE_MAX / typeSize(static_cast<tidalDataType_t>(h.type))) {
      fail(tidalInvalidUsage, "rank {}: {}: rank {} sent a message header that is not valid: {}",
           e_.rank_, what_, op.peer, h.describe());
    }
    const auto type = static_cast<tidalDataType_t>(h.type);
    const uint64_t total = h.count * typeSize(type);
    if (op.headerType >= 0 && h.type != op.headerType) {
      fail(tidalInvalidUsage,
           "rank {}: {}: rank {} sent {} element(s) of {} ({} bytes), but this rank receives {} "
           "from it: the datatypes differ (TIDAL_CHECK_CALLS=0 turns this check off)",
           e_.rank_, what_, op.peer, h.count, typeName(type), total,
           typeName(static_cast<tidalDataType_t>(op.headerType)));
    }
    if (total > op.sizeLimit) {
      fail(tidalInvalidUsage,
           "rank {}: {}: a receive of {} bytes from rank {} matched a send of {} bytes from rank "
           "{}; it would be truncated (the receive's count is too small, or the two ranks posted "
           "their operations to each other in different orders)",
           e_.rank_, what_, op.sizeLimit, op.peer, total, op.peer);
    }
    if (h.inlineBytes == 0) {
      st_.sizes[i] = total;
      return;
    }
    if (h.inlineBytes != total || total > CallSignature::kInlineCapacity) {
      fail(tidalInvalidUsage,
           "rank {}: {}: rank {} sent a message header whose {} inline bytes are not its {}-byte "
           "message",
           e_.rank_, what_, op.peer, h.inlineBytes, total);
    }
    // Copied from where the header landed (device scratch on the device
    // plane), in the plane's order; no piece follows.
    plane_.copy(resolve(op.inlineTo), resolve(op.dst) + offsetof(CallSignature, inlineData), total);
    st_.sizes[i] = 0;
  }

  bool completeRecvs() {
    bool any = false;
    while (recvsDone_ < nextRecvPost_) {
      const auto& op = s_.recvs[recvsDone_];
      if (!st_.recvSkipped[recvsDone_] &&
          st_.recvConn[recvsDone_]->completed() <= st_.recvSeq[recvsDone_])
        break;
      if (op.afterSend >= 0 && !sendComplete(static_cast<size_t>(op.afterSend))) break;
      if (check_ && st_.recvInline[recvsDone_] >= 0) {
        deliverInline(recvsDone_);
        st_.recvInline[recvsDone_] = -1;  // (noteSignatureLinks)
      }
      if (op.sizeLimit != coll::RecvOp::kNoLimit) checkMessageSize(recvsDone_);
      // Only receives that reduce and were not reduced on arrival hold a slot.
      if (const int slot = st_.recvSlot[recvsDone_]; slot >= 0) {
        plane_.reduce(resolve(op.dst), resolve(op.localInput), slotAddress(slot),
                      op.bytes / typeSize(s_.type), s_.type, s_.op, op.divisor);
        // Slots are used and freed in FIFO order. On the device plane the
        // next write into this slot comes later on the same stream.
        ++freeSlots_;
      }
      for (; nextCopy_ < s_.recvCopies.size() &&
             s_.recvCopies[nextCopy_].afterRecv <= static_cast<int64_t>(recvsDone_);
           ++nextCopy_) {
        // Made (on the device plane: enqueued) before any send that waits
        // for this receive reads what it wrote.
        const auto& c = s_.recvCopies[nextCopy_].copy;
        plane_.copy(resolve(c.dst), resolve(c.src), c.bytes);
      }
      st_.recvDone[recvsDone_] = 1;
      ++recvsDone_;
      any = true;
    }
    return any;
  }

  // Safe only when the other operand is the caller's input, which nothing in
  // the collective writes before this receive, and nothing waits on a send.
  static bool reducesOnArrival(const coll::RecvOp& op, const Connection& c) {
    return op.afterSend < 0 && op.localInput.buffer == coll::Buffer::Send && c.canReduceOnArrival();
  }

  bool sendComplete(size_t i) const {
    return i < nextSend_ && st_.sendConn[i]->completed() > st_.sendSeq[i];
  }

  bool completeSends() {
    const size_t first = sendsDone_;
    while (sendsDone_ < nextSend_) {
      if (st_.sendConn[sendsDone_]->completed() <= st_.sendSeq[sendsDone_]) break;
      ++sendsDone_;
    }
    return sendsDone_ != first;
  }

  // Adapts the spin to how waits end. A wait that ended while spinning
  // keeps (or regrows) the full TIDAL_SPIN_US. One that ended within
  // kShortSleep of going to sleep means the peer could run only once we
  // stopped spinning, typically because it shares our core (unbound ranks):
  // spinning then only delays it, so the next waits spin half as long, down
  // to kMinSpin. `now`, when the wait ended, matters only if it slept.
  void endOfWait(Clock::time_point now) {
    waited_ = false;
    stopPublishingCpu();
    auto& spin = e_.spin_;
    if (!sleptAt_) {
      spin = std::min(e_.options_.spin, std::max(spin * 2, kMinSpin));
    } else if (now - *sleptAt_ < kShortSleep) {
      spin = std::max(std::min(kMinSpin, e_.options_.spin), spin / 2);
    }
    sleptAt_.reset();
  }

  // One round of waiting without sleeping.
  void spinOnce() const {
    if (e_.options_.busyPoll) {
      // The ranks fit the CPUs: watch memory, never yield. A yield costs a
      // system call, and when other work is runnable the scheduler gives
      // it our core for a whole time slice (milliseconds), which is what
      // made small collectives take hundreds of microseconds beside a
      // busy process (docs/architecture.md, "Spin on memory").
      cpuRelax();
    } else {
      // More ranks than CPUs: the rank we wait for may need this very core.
      const Clock::time_point before = Clock::now();
      sched_yield();
      const Clock::time_point after = Clock::now();
      if (after - before >= kLongYield) longYield(after);
    }
  }

  // A yield that gave the core away for a long time. When more tasks are
  // runnable on the host than this job has ranks here, at three such yields
  // in a row, something else is busy (runnable_tasks.h; a lone count above
  // the ranks is common without one: 4% of long yields of 8 quiet ranks on
  // 2 CPUs, the ranks' own short-lived threads and the kernel's), and each
  // yield hands it a whole time slice, milliseconds per hop. A rank that
  // sleeps instead leaves the run queue and, woken by its peer, runs again
  // soon (a sleeper is owed CPU time). So waits sleep without spinning for a
  // while: 50 ms, doubled (up to 1.6 s) each time the first such finding
  // after a window is made right after it, back to 50 ms when it is not.
  void longYield(Clock::time_point now) const {
    const int ranks = e_.options_.ranksOnThisHost;
    if (ranks <= 0) return;
    auto& crowded = e_.crowdedLongYields_;
    crowded = runnableTasksOnHost() > ranks ? crowded + 1 : 0;
    if (crowded < kCrowdedLongYields) return;
    crowded = 0;
    auto& window = e_.sleepInsteadOfYieldWindow_;
    const bool probeFailed = now < e_.sleepInsteadOfYieldUntil_ + window;
    window = probeFailed ? std::min(window * 2, kMaxSleepInsteadOfYield) : kMinSleepInsteadOfYield;
    e_.sleepInsteadOfYieldUntil_ = now + window;
    ++e_.sleepWindows_;
  }

  // Tells this run's peers the CPU it spins on and, when one of them waits
  // on that same CPU, moves this thread to another CPU of its mask (see the
  // header, "moving off a shared CPU"). Two ranks busy-polling on one CPU
  // cannot both run: each hop would cost the waiting side's whole spin.
  // Whichever of the two runs finds the other and moves; the other is not
  // running then, so they never both move at once.
  void lookForPeerOnThisCpu(Clock::time_point now) {
    const int cpu = sched_getcpu();
    if (cpu < 0) return;
    publishingCpu_ = true;
    int sharedWith = -1;
    for (Connection* c : st_.connections) {
      c->publishCpu(cpu);
      if (sharedWith < 0 && c->peerWaitsOnCpu(cpu)) sharedWith = c->peer();
    }
    if (sharedWith < 0 || !e_.options_.moveOffSharedCpu ||
        now - e_.lastCpuMoveTry_ < kMinCpuMoveInterval) {
      return;
    }
    e_.lastCpuMoveTry_ = now;
    const CpuMove move = moveOffCpu(cpu);
    if (move.from < 0) return;
    ++e_.cpuMoves_;
    e_.lastCpuMove_ = move;
    for (Connection* c : st_.connections) c->publishCpu(move.to);
    // The 1st, 2nd, 4th, 8th... move: the log says it happens without
    // growing with it.
    if ((e_.cpuMoves_ & (e_.cpuMoves_ - 1)) == 0) {
      TIDAL_INFO(Coll,
                 "rank {}: moved off CPU {} to CPU {}, where rank {} waited too (move {} of this "
                 "communicator; TIDAL_SPIN_MOVE=0 turns moves off)",
                 e_.rank_, move.from, move.to, sharedWith, e_.cpuMoves_);
    }
  }

  void stopPublishingCpu() {
    if (!publishingCpu_) return;
    publishingCpu_ = false;
    for (Connection* c : st_.connections) c->publishCpu(-1);
  }

  void waitForActivity(Clock::time_point& lastMove) {
    // Spinning, the clock is read every kRoundsPerClockRead rounds only.
    if (waited_ && spinning_ && ++idleRounds_ % kRoundsPerClockRead != 0) {
      spinOnce();
      return;
    }
    waited_ = true;
    const auto now = Clock::now();
    if (lastMoveUnknown_) {
      lastMove = now;
      lastMoveUnknown_ = false;
    }
    spinning_ =
        now - lastMove < e_.spin_ && (e_.options_.busyPoll || now >= e_.sleepInsteadOfYieldUntil_);
    if (spinning_) {
      if (e_.options_.busyPoll && now - lastMove >= kSharedCpuCheckAfter) lookForPeerOnThisCpu(now);
      spinOnce();
      return;
    }
    if (now - lastMove > e_.options_.timeout) timeout();
    if (e_.notices_ && now - lastMove >= kNoticeCheckAfter &&
        now - lastNoticeCheck_ >= kNoticeCheckEvery) {
      lastNoticeCheck_ = now;
      if (const int teller = e_.notices_->toldBy(); teller >= 0) {
        fail(tidalRemoteError,
             "rank {}: {}{} stopped waiting for {}: rank {} told that a call of this "
             "communicator failed",
             e_.rank_, what_, plane_.where(), waitingFor(), teller);
      }
    }
    if (!sleptAt_) sleptAt_ = now;
    if (!plane_.wakesOnDescriptors()) {
      std::this_thread::sleep_for(kSleepStep);
      return;
    }
    st_.pollFds.clear();  // reused: no allocation per sleep
    for (Connection* c : st_.connections) c->addPollFds(st_.pollFds);
    // Short sleeps keep abort and the timeout responsive.
    ::poll(st_.pollFds.data(), st_.pollFds.size(), 100);
  }

  // A peer whose signature this run still waits for, or -1.
  int firstMissingSignature() const {
    if (!check_) return -1;
    for (const auto& r : st_.signatureRecvs)
      if (!r.arrived()) return r.peer;
    return -1;
  }

  // A peer this run's own signature has not finished going to, or -1.
  int firstUnsentSignature() const {
    if (!check_) return -1;
    for (const auto& l : st_.signatureSends)
      if (l.link->completed() <= l.seq) return l.link->peer();
    return -1;
  }

  // What a stalled wait waits for, for its error.
  std::string waitingFor() const {
    if (const int peer = firstMissingSignature(); peer >= 0) {
      return fmt::format("rank {} to call {} (its call signature has not arrived)", peer,
                         check_->signature.describe());
    }
    if (sendsDone_ == s_.sends.size() && recvsDone_ == s_.recvs.size()) {
      // Every byte of the call moved and the peers' signatures came: what
      // is left is the transport's completion of ours (udp;ofi_rxd was seen
      // to withhold it), or else the device plane's stream.
      if (const int to = firstUnsentSignature(); to >= 0) {
        return fmt::format(
            "the transport to complete this rank's call signature to rank {} (every other "
            "transfer of the call is done)",
            to);
      }
      return "the GPU to finish the engine stream";
    }
    if (recvsDone_ < s_.recvs.size()) {
      return fmt::format("data from rank {} (receive {} of {})", s_.recvs[recvsDone_].peer,
                         recvsDone_ + 1, s_.recvs.size());
    }
    return fmt::format("rank {} to take data (send {} of {})", s_.sends[sendsDone_].peer,
                       sendsDone_ + 1, s_.sends.size());
  }

  [[noreturn]] void timeout() const {
    fail(tidalTimeout, "rank {}: {}{} made no progress for TIDAL_TIMEOUT={} s, waiting for {}",
         e_.rank_, what_, plane_.where(), e_.options_.timeout.count(), waitingFor());
  }

  Engine& e_;
  DataPlane& plane_;
  const coll::Schedule& s_;
  const char* what_;
  const std::atomic<bool>* alsoAborted_;
  const char* send_;
  char* recv_;
  char* scratch_;
  char* staging_;
  RunState& st_;
  const CallCheck* check_;
  bool signaturesSettled_ = false;
  bool signaturesCompared_ = false;  // every peer's signature arrived and matched
  size_t nextSend_ = 0, sendsDone_ = 0;
  size_t nextRecvPost_ = 0, recvsDone_ = 0;
  size_t nextCopy_ = 0;  // next of Schedule::recvCopies
  int freeSlots_ = 0, nextSlot_ = 0;
  bool waited_ = false;           // waitForActivity ran since the last move
  bool spinning_ = false;         // the last clock read was within the spin
  bool lastMoveUnknown_ = false;  // a round moved since lastMove was read
  bool publishingCpu_ = false;    // this wait told its peers its CPU
  unsigned idleRounds_ = 0;
  std::optional<Clock::time_point> sleptAt_;  // this wait's first sleep
  Clock::time_point lastNoticeCheck_{};       // see kNoticeCheckAfter
};

void Engine::run(const coll::Schedule& schedule, const void* sendbuff, void* recvbuff,
                 const char* what, const std::atomic<bool>* alsoAborted, const CallCheck* check) {
  Run(*this, schedule, sendbuff, recvbuff, what, alsoAborted, check).execute();
}

}  // namespace tidal
