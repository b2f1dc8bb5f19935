// The progress engine: the one interpreter of schedules. It executes one
// rank's schedule over its connections, with the data work done by a data
// plane (data_plane.h): the host plane for host buffers, the device plane
// for device buffers, where the engine runs on the stream engine's progress
// thread. Everything below holds for both.
//
// With host buffers and no stream the calling thread drives progress itself,
// so a small collective costs no thread hand-off. Receives that reduce land in
// a ring of persistent staging slots (TIDAL_STAGING_SLOTS x TIDAL_CHUNK_SIZE
// per communicator) and are reduced as soon as they complete; the slot count
// is the credit that bounds how far a receiver runs ahead. Sends wait only for
// the receive they forward, so chunks flow around the ring in a pipeline.
//
// Waiting: when nothing moves, the engine spins for TIDAL_SPIN_US (long
// enough to outlast a peer that lost its core for a scheduler time slice)
// and then sleeps in poll() on the descriptors its connections name, so a
// long wait does not burn a core (the device plane, whose GPU completions
// have no descriptor, sleeps in 50 us steps instead). How it spins depends on whether the ranks
// of this host fit its CPUs: if they do, it busy-polls with a pause
// instruction and makes no system call; if they do not, every round yields
// the CPU, because the rank it waits for may need this very core. The spin
// adapts: when waits keep ending just after the engine went to sleep (the
// peer could run only once this rank let go of the core it shares), later
// waits spin half as long, down to 50 us, and regrow when a wait ends while
// spinning.
//
// Beside a busy process, a yield hands it the core for a time slice: after
// three yields in a row kept the core away for 1 ms or more while the host
// had more runnable tasks than this communicator's ranks there, waits sleep
// without spinning for 50 ms (doubling, up to 1.6 s, while it recurs).
//
// Moving off a shared CPU: a busy-polling wait that has lasted 20 us
// publishes the CPU it spins on to its connections, and if a peer it waits
// for is waiting on that same CPU (shm can see it), this thread moves to
// another CPU of its affinity mask (cpu_move.h), at most once a millisecond;
// TIDAL_SPIN_MOVE=0 turns that off.
//
// A wait in which no byte moves for TIDAL_TIMEOUT seconds fails with
// tidalTimeout, naming the peers it waited for; abort() from another thread
// ends it at once. A wait that has made no progress for 200 ms also asks,
// every 100 ms, whether another rank has told that its call failed
// (FailureNotices); then it fails at once with tidalRemoteError: a peer that
// broke off does not always make this rank's transfers fail (a closed
// libfabric endpoint says nothing to a receive that waits for it).
//
// A run allocates nothing once the engine has seen a schedule as large: its
// bookkeeping vectors live in the engine and are reused. A receive that
// reduces through a staging slot must fit in one (TIDAL_CHUNK_SIZE); the
// schedule builders cut reducing steps to that size, and a schedule that
// does not is refused as an internal error rather than overrunning a slot.
//
// Reduce on arrival: a receive that reduces into place with the caller's
// input as its other operand, on a connection that can read its incoming
// bytes in place (shm), is combined as the bytes arrive, with no staging slot.
// Receives whose other operand is produced inside the same collective
// (recvbuff or scratch), or that must wait for a send (afterSend), keep the
// staging path: their reduction runs in schedule order, after everything
// that precedes it.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <vector>

#include "collectives/schedule.h"
#include "engine/call_signature.h"
#include "engine/cpu_move.h"
#include "engine/data_plane.h"
#include "transports/transport.h"

namespace tidal {

// Opens the connection a schedule names when the engine has none to that
// peer yet (src/comm/links.h). The engine asks for every send connection of
// a schedule before any receive connection.
class LinkOpener {
 public:
  virtual ~LinkOpener() = default;
  virtual Connection& openSend(int peer, const char* what) = 0;
  virtual Connection& openRecv(int peer, const char* what) = 0;
};

// Whether another rank has told that a call of this communicator failed
// (src/comm/failure_notice.cc: the notice it sends around the bootstrap
// ring). Asked only by waits that have stalled, from the thread that runs
// the schedule.
class FailureNotices {
 public:
  virtual ~FailureNotices() = default;
  // The rank whose notice is waiting to be read, or -1.
  virtual int toldBy() = 0;
};

struct EngineOptions {
  size_t chunkBytes;
  int stagingSlots;
  std::chrono::microseconds spin;
  std::chrono::seconds timeout;
  // true: spin with a pause instruction; false: yield the CPU every round.
  bool busyPoll = false;
  // Busy-polling, move off a CPU on which a peer waits too (TIDAL_SPIN_MOVE).
  bool moveOffSharedCpu = true;
  // This communicator's ranks on this host (0: unknown). Yielding, more
  // runnable tasks than these on the host mean a busy process is here.
  int ranksOnThisHost = 0;
};

class Engine {
 public:
  // Host buffers: the host data plane.
  Engine(int rank, EngineOptions options);
  Engine(int rank, EngineOptions options, std::unique_ptr<DataPlane> plane);

  // Connections the schedules may use; the engine does not own them.
  void addSendConnection(int peer, Connection* connection) {
    sendTo_[peer] = connection;
    state_.signaturePlan = 0;  // the kept links may name the replaced connection
  }
  void addRecvConnection(int peer, Connection* connection) {
    recvFrom_[peer] = connection;
    state_.signaturePlan = 0;
  }
  // Where connections to peers not added above come from; none: such a
  // schedule is an internal error.
  void setLinkOpener(LinkOpener* opener) { opener_ = opener; }
  // Where stalled waits learn that another rank's call failed; none: they
  // wait for their own transfers or TIDAL_TIMEOUT.
  void setFailureNotices(FailureNotices* notices) { notices_ = notices; }

  const EngineOptions& options() const { return options_; }
  void setSpinMode(bool busyPoll, int ranksOnThisHost) {
    options_.busyPoll = busyPoll;
    options_.ranksOnThisHost = ranksOnThisHost;
  }
  // Moves off a CPU shared with a waiting peer so far, and the last one.
  uint64_t cpuMoves() const { return cpuMoves_; }
  CpuMove lastCpuMove() const { return lastCpuMove_; }
  // Times waits started sleeping instead of yielding (Run::longYield): three
  // yields in a row kept the core away for 1 ms or more while more tasks
  // than this host's ranks were runnable (a busy process took it).
  uint64_t sleepWindows() const { return sleepWindows_; }

  // Runs `schedule` to completion; `what` names the collective in errors.
  // `alsoAborted`, when given, ends the run like abort() (the stream
  // engine's flag). `check`, when given, puts our call signature ahead of
  // the data on every send connection (and the ring link of a rooted collective), and
  // every receive connection's first transfer must be the peer's matching
  // signature before any data receive is posted on it (call_signature.h).
  void run(const coll::Schedule& schedule, const void* sendbuff, void* recvbuff, const char* what,
           const std::atomic<bool>* alsoAborted = nullptr, const CallCheck* check = nullptr);

  DataPlane& plane() const { return *plane_; }

  // Ends a run in progress from another thread (it throws RemoteError).
  void abort() { aborted_ = true; }

 private:
  class Run;
  Connection& sendConnection(int peer, const char* what) const;
  Connection& recvConnection(int peer, const char* what) const;
  // As above, opening the connection through the LinkOpener when missing.
  Connection& openSendConnection(int peer, const char* what);
  Connection& openRecvConnection(int peer, const char* what);

  int rank_;
  EngineOptions options_;
  std::map<int, Connection*> sendTo_;
  std::map<int, Connection*> recvFrom_;
  LinkOpener* opener_ = nullptr;
  FailureNotices* notices_ = nullptr;
  std::unique_ptr<DataPlane> plane_;
  // Bookkeeping of the current run, kept between runs so a run does not allocate.
  struct RunState {
    std::vector<Connection*> connections;
    std::vector<Connection*> sendConn, recvConn;  // per send / receive of the schedule
    std::vector<uint64_t> sendSeq, recvSeq;
    std::vector<int> recvSlot;  // staging slot, -1: none (stored, or reduced on arrival)
    std::vector<char> recvDone;
    std::vector<char> recvSkipped;       // pieces of a sized message beyond its length
    std::vector<uint64_t> sizes;         // what a size receive announced
    std::vector<PlaneReducer> reducers;  // per receive reduced on arrival
    std::vector<pollfd> pollFds;
    // Call signatures (call_signature.h): each send connection of the run
    // once, with the record it carries, and each receive connection once,
    // with the record its peer sent. The records live in the data plane's
    // signatureRecords() (page-locked on the device plane), set when the
    // run's links are known. recvOfPeer maps a peer to its index in
    // signatureRecvs (-1: none in this run).
    struct SignatureSend {
      Connection* link;
      int64_t rides;  // the send of the schedule that rides inside the record, or -1
      uint64_t seq;   // the record's transfer on `link`
      CallSignature* record;
    };
    struct SignatureRecv {
      Connection* link;
      int peer;
      uint64_t seq;
      bool matched;
      bool firstReceiveTaken;
      CallSignature* record;
      bool arrived() const { return link->completed() > seq; }
    };
    std::vector<SignatureSend> signatureSends;
    std::vector<SignatureRecv> signatureRecvs;
    std::vector<int> recvOfPeer;
    std::vector<int> sendInline;  // per send: the signatureSends index it rode in, or -1
    std::vector<int> recvInline;  // per receive: the signatureRecvs index it came in, or -1
    // The schedule (Schedule::stableId, 0: none) and ring peers that
    // signatureSends / signatureRecvs / recvOfPeer were worked out for: a run
    // of the same kept schedule with the same ring reuses them.
    uint64_t signaturePlan = 0;
    int planRingNext = -1, planRingPrev = -1;
  };
  RunState state_;
  // How long waits spin now: TIDAL_SPIN_US, or less after waits that the
  // spinning only delayed (Run::endOfWait).
  std::chrono::microseconds spin_;
  // Moves off a CPU shared with a waiting peer (Run::lookForPeerOnThisCpu).
  uint64_t cpuMoves_ = 0;
  CpuMove lastCpuMove_;
  std::chrono::steady_clock::time_point lastCpuMoveTry_{};
  // Yielding waits that found a busy process on the core sleep without
  // spinning until this time (Run::longYield); the window doubles while
  // such yields recur.
  std::chrono::steady_clock::time_point sleepInsteadOfYieldUntil_{};
  std::chrono::milliseconds sleepInsteadOfYieldWindow_{50};
  int crowdedLongYields_ = 0;  // in a row, with more runnable tasks than ranks
  uint64_t sleepWindows_ = 0;
  std::atomic<bool> aborted_{false};
};

}  // namespace tidal
