// A communicator: one rank's membership in a group, its connections, its
// engine, and its health.
//
// Lifecycle: create() rendezvous through the bootstrap, exchanges every
// rank's transport handles (links.h) and opens, eagerly, the connections
// every collective uses (ring and chain neighbours, recursive doubling
// partners, hierarchical peers); any other peer (AllToAll, Gather, Send/Recv)
// is connected the first time a schedule names it. A collective that fails
// marks the communicator broken (its asyncError), and aborts every connection so that neighbours
// fail fast instead of waiting out their timeout; later calls return the same error.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "collectives/schedule.h"
#include "comm/algorithm_choice.h"
#include "comm/call_memory.h"
#include "comm/device_path.h"
#include "comm/flight_recorder.h"
#include "comm/links.h"
#include "comm/one_sided.h"
#include "comm/schedule_cache.h"
#include "core/error.h"
#include "engine/engine.h"
#include "transports/transport.h"

namespace tidal {

class Communicator {
 public:
  // Where the device path's GPU comes from. Default: the real device current
  // on this thread, when CUDA is usable. Tests pass a test double.
  using DeviceFactory = std::function<std::unique_ptr<DeviceApi>()>;
  static std::unique_ptr<Communicator> create(const UniqueId& id, int rank, int nranks,
                                              DeviceFactory devices = {});
  ~Communicator();

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }

  // `memory` (call_memory.h): host buffers run now on the calling thread;
  // CUDA buffers are enqueued on memory.stream and the call returns at once.
  void allReduce(const void* sendbuff, void* recvbuff, size_t count, tidalDataType_t type,
                 tidalRedOp_t op, const CallMemory& memory = {});
  void allGather(const void* sendbuff, void* recvbuff, size_t sendcount, tidalDataType_t type,
                 const CallMemory& memory = {});
  void reduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, tidalDataType_t type,
                     tidalRedOp_t op, const CallMemory& memory = {});
  void broadcast(const void* sendbuff, void* recvbuff, size_t count, tidalDataType_t type, int root,
                 const CallMemory& memory = {});
  void reduce(const void* sendbuff, void* recvbuff, size_t count, tidalDataType_t type,
              tidalRedOp_t op, int root, const CallMemory& memory = {});
  void barrier(const CallMemory& memory = {});
  // Personalised exchanges, on host buffers (counts per rank, in elements).
  void allToAll(const void* sendbuff, void* recvbuff, size_t count, tidalDataType_t type,
                const CallMemory& memory = {});
  void allToAllv(const void* sendbuff, void* recvbuff, const coll::AllToAllvLayout& layout,
                 tidalDataType_t type, const CallMemory& memory = {});
  void gather(const void* sendbuff, void* recvbuff, size_t count, tidalDataType_t type, int root,
              const CallMemory& memory = {});
  void scatter(const void* sendbuff, void* recvbuff, size_t count, tidalDataType_t type, int root,
               const CallMemory& memory = {});
  // A group's Send/Recv on this communicator, all at once, all on `memory` (one kind, one stream).
  void pointToPoint(const std::vector<coll::P2pOp>& ops, const CallMemory& memory);
  // One Send or Recv outside a group: on host buffers with another rank, a
  // cached schedule (no build per call), otherwise a group of one.
  void pointToPoint(const coll::P2pOp& op, const CallMemory& memory);
  // How many messages of `op`'s kind this rank has had with its peer (the
  // next one's number; P2pOp::number).
  uint64_t& messagesWith(const coll::P2pOp& op);

  // One-sided calls (one_sided.h, windows.cc), between ranks of one host.
  // registerWindow is collective: this rank's part of the communicator's
  // next window, and every rank's (sets *number). deregisterWindow too.
  std::vector<WindowSpan> registerWindow(const void* buff, size_t size, bool device, int flags,
                                         uint64_t* number);
  void deregisterWindow(uint64_t number);
  void putSignal(const void* source, size_t bytes, int peer, const std::vector<WindowSpan>& spans,
                 size_t offset);
  void signal(int peer);
  void waitSignal(const std::vector<OneSided::Wait>& waits);

  // tidalGroupSimulateEnd (group.h, simulation.cc): how long `calls` (a
  // group's collectives on this communicator, in order) and then `p2p` (its
  // Send/Recv, one schedule) would take, in microseconds, were they run now.
  // Nothing runs and nothing is sent. Each call's schedule is built for
  // every rank, as this communicator would run it, and timed by the tuner's
  // model (src/tuner/schedule_time.h; TIDAL_TUNER_FILE sets its links); a
  // Send/Recv group or an AllToAllv, whose peers' parts only they know, is
  // timed with each peer doing just the other side of this rank's.
  double simulate(const std::vector<std::function<void()>>& calls,
                  const std::vector<coll::P2pOp>& p2p, const CallMemory& p2pMemory);

  // tidalCommSplit (collective over this communicator): ranks of the same
  // color >= 0 form a new communicator, ordered by (key, rank here); a
  // negative color takes part and gets null.
  std::unique_ptr<Communicator> split(int color, int key);

  // Fault tolerance and membership (membership.cc; docs/api.md "Revoke,
  // shrink, grow").
  // tidalCommRevoke (local): what is in flight fails now, peers' calls fail
  // through the closed connections, every later call is refused; split and
  // shrink still work (they use only the bootstrap).
  void revoke();
  bool revoked() const { return revoked_.load(); }
  // tidalCommShrink, called by the ranks not in `excluded` (sorted, distinct,
  // never this rank): a new communicator of those ranks in their order here,
  // made without a message to anyone, so it works when excluded ranks are
  // dead and this communicator is broken or revoked. `abortFirst`
  // (TIDAL_SHRINK_ABORT) stops calls in flight on other threads first.
  std::unique_ptr<Communicator> shrink(const std::vector<int>& excluded, bool abortFirst);
  // tidalCommGetUniqueId: the id new ranks join with in tidalCommGrow; its
  // rendezvous root runs in this process. One unconsumed id at a time.
  tidalUniqueId growId();
  // tidalCommGrow on a member (collective over this communicator): `offered`
  // is the growId() result on the one member that made it, null on the
  // others. Members keep their ranks; new ranks take newSize - nranks() more.
  std::unique_ptr<Communicator> grow(int newSize, const tidalUniqueId* offered);
  // tidalCommGrow on a new rank: joins the members of `id` as `rank` of `newSize`.
  static std::unique_ptr<Communicator> joinGrowth(const tidalUniqueId& id, int rank, int newSize);

  // tidalCommSuspend / Resume / MemStats. Suspended, every call but these,
  // queries and teardown is refused; with `releaseMemory` the device path's
  // scratch (the only device memory not shared with a peer) is freed and
  // grows back on first use after resume.
  void suspend(bool releaseMemory);
  void resume();
  bool suspended() const { return suspended_.load(); }
  struct DeviceMemory {
    uint64_t releasable = 0;  // freed by suspend(true)
    uint64_t persistent = 0;  // staging, connection rings, barrier bytes
  };
  DeviceMemory deviceMemory() const;

  // The CUDA device this communicator was created on (-1: none), and why
  // device buffers cannot be used (empty when they can).
  int cudaDevice() const { return cudaDevice_; }
  const std::string& deviceUnavailable() const { return deviceUnavailable_; }

  // NCCL's state after a revoke: tidalSuccess once it is done (calls are
  // still refused, naming the revoke).
  tidalResult_t asyncError() const { return revoked_.load() ? tidalSuccess : broken_.load(); }

  // Stops everything in flight and makes later calls fail; safe from another
  // thread. The caller still owns (and later deletes) the object.
  void abort();
  // tidalCommDestroy's first step, after every call has left: hands what a
  // transport must keep open, with the bootstrap ring, to a close that waits
  // for every rank to destroy the communicator too
  // (comm/close_when_all_done.h). Not after a failure: the links are gone.
  void closeWhenAllDone();

  // Counts API calls inside the communicator so that destroy and abort free
  // it only after every call (possibly on other threads) has left.
  class CallScope {
   public:
    explicit CallScope(Communicator& c) : c_(c) { ++c_.callsInFlight_; }
    ~CallScope() { --c_.callsInFlight_; }
    CallScope(const CallScope&) = delete;
    CallScope& operator=(const CallScope&) = delete;

   private:
    Communicator& c_;
  };
  // Waits until no other call is inside (the caller's own scope is not
  // counted: destroy/abort do not open one).
  void waitForCallsToLeave() const;

  // Per-communicator last error text (tidalGetLastError).
  void setLastError(std::string text);
  const char* lastError() const;

 private:
  Communicator(int rank, int nranks) : rank_(rank), nranks_(nranks) {}
  void connect(const UniqueId& id);
  // Every call's entry: takes the communicator for this call (one thread at
  // a time) and refuses a communicator broken by an earlier error.
  std::unique_lock<std::mutex> enterCall(const char* what);
  // For split, shrink, grow and suspend: the call's lock, taking over a
  // revoked (split, shrink) or broken (shrink) communicator as allowed.
  // With `abortFirst`, a call in flight on another thread is stopped and
  // waited for (bounded by TIDAL_TIMEOUT) instead of refused.
  std::unique_lock<std::mutex> enterManagement(const char* what, bool allowRevoked,
                                               bool allowBroken, bool abortFirst = false);
  // After a grow's rendezvous: members (oldSize >= 0) hold ranks below the
  // old size and newcomers (-1) the ranks past it, or every rank fails.
  void checkGrowth(int oldSize);
  // Refuses a call on a revoked or suspended communicator.
  void refuseIfRevokedOrSuspended(const char* what) const;
  // Runs the schedule `build()` makes (or the cached one for `key`) with the
  // communicator locked for this call.
  // `prepare` runs once the call holds the communicator, before the schedule
  // runs (it fills what a cached schedule reads, such as sendHeader_).
  // `check`: the collective's signature (sign()), numbered here and checked
  // against each peer's on host buffers; none for Send/Recv, whose messages
  // carry headers of their own (collectives/p2p.cc).
  template <typename Build, typename Prepare = void (*)()>
  void execute(
      const char* what, std::optional<CallCheck> check, const ScheduleCache::Key& key,
      const void* sendbuff, void* recvbuff, const CallMemory& memory, Build&& build,
      Prepare&& prepare = [] {});
  // A collective: execute() with this rank's schedule from `build`, an
  // AnyRankBuilder (collectives/any_rank.h) given `a` and topology_; while
  // the communicator simulates (simulate()), every rank's schedule from it
  // is recorded instead and nothing runs.
  template <typename AnyRank>
  void collective(const char* what, std::optional<CallCheck> check, const ScheduleCache::Key& key,
                  const coll::CollectiveArgs& a, const void* sendbuff, void* recvbuff,
                  const CallMemory& memory, AnyRank&& build);
  // execute()'s run, between the flight recorder's begin and end.
  template <typename Build>
  void runRecorded(const char* what, std::optional<CallCheck>& check, const ScheduleCache::Key& key,
                   const void* sendbuff, void* recvbuff, const CallMemory& memory, Build& build);
  // Builds the device path (collective): device buffers' connections and
  // progress thread, or the reason there is none.
  void connectDevices();
  coll::CollectiveArgs args(size_t count, tidalDataType_t type, tidalRedOp_t op, int root,
                            bool inPlace) const;
  void breakWith(const Error& error);
  // What breakWith does to the peers: our connections close, so the ranks
  // waiting on us fail now and, closing theirs, pass the failure on.
  void closeConnections();
  // Breaks the communicator after a call on host buffers failed with `e`,
  // and shares why with the other ranks (failure_notice.cc): returns the
  // error the caller gets, which names a peer's finding when one explains
  // this rank's lost connection or timeout.
  Error shareFailure(const Error& e, const char* what);
  // Lets the engine's stalled waits end when rank-1 has told that its call
  // failed (failure_notice.cc), instead of at TIDAL_TIMEOUT.
  void listenForFailureNotices();
  // This rank's next collective as its peers must see it (call_signature.h),
  // with the ring neighbours a rooted collective also checks with; numbered
  // by execute(); none when TIDAL_CHECK_CALLS=0.
  std::optional<CallCheck> sign(CallKind kind, size_t count, int type, int op, int root);
  // How this call's Send/Recv messages are framed (collectives/p2p.cc).
  coll::P2pFraming p2pFraming(const CallMemory& memory) const;
  // Busy-poll when this host's ranks fit the CPUs they may run on, else
  // yield (TIDAL_BUSY_POLL; host_cpus.h).
  void chooseSpinMode(int ranksOnThisHost);

  int rank_;
  int nranks_;
  std::unique_ptr<Bootstrap> bootstrap_;
  // Local rank, GPU, NICs, GDR and CPUs (rank_placement.h); null if unknown.
  std::shared_ptr<const topo::Placement> placement_;
  // Transports and connections to every peer (links.h).
  void connectPeers();
  // TIDAL_TUNER=model: the tuner's picks for this placement (up to its rank cap).
  void useTunerModel(const std::vector<std::string>& hostOfRank);
  std::unique_ptr<Links> links_;
  AlgorithmChoice algorithms_;
  std::string busyPollMode_ = "auto";
  // CPUs in this host's ranks' affinity masks together; 0: unknown.
  int localCpus_ = 0;
  coll::Topology topology_;
  // Every rank's host key (links.h), by rank: what topology_ was made from.
  std::vector<std::string> hostOfRank_;
  std::unique_ptr<Engine> engine_;
  // The engine's FailureNotices, read from bootstrap_.
  std::unique_ptr<FailureNotices> ringNotices_;
  std::unique_ptr<OneSided> oneSided_;  // signal inboxes and peers' processes
  uint64_t windowsRegistered_ = 0;      // window numbers so far (under opMutex_)
  ScheduleCache schedules_;             // used only under opMutex_
  std::vector<uint8_t> barrierBuffer_;
  std::vector<uint64_t> messageSizes_;  // size messages of the sized schedule running now
  CallSignature sendHeader_;            // the header of a single Send running now
  uint64_t recvNumber_ = 0;             // the message number a single Recv expects now
  // Send/Recv messages to and from each peer so far (P2pOp::number), under opMutex_.
  std::vector<uint64_t> sentTo_, receivedFrom_;
  bool checkCalls_ = true;                    // TIDAL_CHECK_CALLS
  uint64_t collectivesCalled_ = 0;            // checked collectives run so far (under opMutex_)
  std::unique_ptr<FlightRecorder> recorder_;  // the last calls (flight_recorder.h)
  bool dumpOnTimeout_ = false;                // TIDAL_DUMP_ON_TIMEOUT

  std::mutex opMutex_;
  std::atomic<int> callsInFlight_{0};
  std::atomic<tidalResult_t> broken_{tidalSuccess};
  std::atomic<bool> revoked_{false};
  std::atomic<bool> suspended_{false};
  uint64_t shrinks_ = 0;  // shrinks made from here: each has its own secret
  bool growIdUnconsumed_ = false;
  std::string brokenText_;
  mutable std::mutex errorMutex_;
  std::string lastError_;

  // Device buffers (device_path.h). Last, so that it goes first: its
  // progress thread uses the connections above.
  DeviceFactory devices_;
  int cudaDevice_ = -1;
  std::string deviceUnavailable_;
  std::unique_ptr<DevicePath> device_;
};

}  // namespace tidal
