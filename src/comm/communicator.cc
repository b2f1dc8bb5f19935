#include "comm/communicator.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <set>
#include <thread>
#include <type_traits>

#include "collectives/any_rank.h"
#include "comm/close_when_all_done.h"
#include "comm/host_cpus.h"
#include "comm/host_identity.h"
#include "comm/rank_placement.h"
#include "comm/schedule_settings.h"
#include "comm/simulation.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/log.h"
#include "core/params.h"
#include "cuda/cuda_support.h"
#include "reduce/reduce.h"
#include "tuner/link_model.h"
#include "tuner/model_picks.h"
#include "tuner/schedule_time.h"

namespace tidal {

namespace {

EngineOptions engineOptionsFromParams(int rank) {
  const int64_t chunk = params::getInt("TIDAL_CHUNK_SIZE");
  const int64_t slots = params::getInt("TIDAL_STAGING_SLOTS");
  const int64_t spin = params::getInt("TIDAL_SPIN_US");
  const int64_t timeout = params::getInt("TIDAL_TIMEOUT");
  if (chunk < 4096 || chunk > (int64_t{1} << 30)) {
    fail(tidalInvalidArgument, "rank {}: TIDAL_CHUNK_SIZE={} is out of range 4096..1073741824",
         rank, chunk);
  }
  if (slots < 1 || slots > 64) {
    fail(tidalInvalidArgument, "rank {}: TIDAL_STAGING_SLOTS={} is out of range 1..64", rank,
         slots);
  }
  if (spin < 0 || spin > 1000000) {
    fail(tidalInvalidArgument, "rank {}: TIDAL_SPIN_US={} is out of range 0..1000000", rank, spin);
  }
  if (timeout < 1) {
    fail(tidalInvalidArgument, "rank {}: TIDAL_TIMEOUT={} must be at least 1 second", rank,
         timeout);
  }
  EngineOptions options{static_cast<size_t>(chunk), static_cast<int>(slots),
                        std::chrono::microseconds(spin), std::chrono::seconds(timeout)};
  options.moveOffSharedCpu = params::getBool("TIDAL_SPIN_MOVE");
  return options;
}

}  // namespace

std::unique_ptr<Communicator> Communicator::create(const UniqueId& id, int rank, int nranks,
                                                   DeviceFactory devices) {
  std::unique_ptr<Communicator> comm(new Communicator(rank, nranks));
  comm->devices_ = std::move(devices);
  comm->connect(id);
  return comm;
}

Communicator::~Communicator() = default;

void Communicator::connect(const UniqueId& id) {
  // docs/env.md promises a bad value is an error; logging came up on defaults.
  if (const std::string bad = log::settingsError(); !bad.empty()) {
    fail(tidalInvalidArgument, "rank {}: {}", rank_, bad);
  }
  if (rank_ == 0 && log::versionRequested()) {
    // Its own label, not a level: TIDAL_DEBUG=VERSION shows it alone, and it is no warning.
    log::version(fmt::format("Tidal version " TIDAL_RELEASE_STRING " (NCCL API {}.{}.{})",
                             TIDAL_MAJOR, TIDAL_MINOR, TIDAL_PATCH));
  }
  const EngineOptions engineOptions = engineOptionsFromParams(rank_);
  algorithms_ = AlgorithmChoice::fromParams(rank_);
  checkCalls_ = params::getBool("TIDAL_CHECK_CALLS");
  busyPollMode_ = params::getString("TIDAL_BUSY_POLL");
  if (busyPollMode_ != "auto" && busyPollMode_ != "0" && busyPollMode_ != "1") {
    fail(tidalInvalidArgument, "rank {}: TIDAL_BUSY_POLL='{}' is not one of auto, 0, 1", rank_,
         busyPollMode_);
  }
  // The flight recorder's settings, checked before anything is connected.
  const int64_t keep = params::getInt("TIDAL_FLIGHT_RECORDER");
  if (keep < 0 || keep > 65536) {
    fail(tidalInvalidArgument, "rank {}: TIDAL_FLIGHT_RECORDER={} is outside 0..65536", rank_,
         keep);
  }
  const auto recorderSize = static_cast<size_t>(keep);
  dumpOnTimeout_ = params::getBool("TIDAL_DUMP_ON_TIMEOUT");
  FlightRecorder::armSignal();
  bootstrap_ = Bootstrap::create(id, rank_, nranks_);
  checkScheduleSettingsAgree(*bootstrap_, rank_, nranks_);
  // The same id on every rank, from the secret but not revealing it.
  std::string recordName = log::threadPrefix();  // "comm 'NAME' " while a named init runs
  if (recordName.rfind("comm '", 0) == 0 && recordName.size() > 8) {
    recordName = recordName.substr(6, recordName.size() - 8);
  }
  recorder_ = std::make_unique<FlightRecorder>(
      recorderSize, rank_, nranks_,
      secretToHex(deriveSecret(bootstrap_->secret(), "flight record", 0)).substr(0, 12),
      recordName);
  // Before anything allocates: staging first touched after the binding lands
  // on the rank's NUMA node.
  placement_ = placeRank(*bootstrap_, rank_, nranks_, /*askCuda=*/!devices_);
  // After placeRank's binding: the CPUs the waits will share.
  localCpus_ = cpusOfLocalRanks(*bootstrap_, nranks_);
  engine_ = std::make_unique<Engine>(rank_, engineOptions);
  listenForFailureNotices();
  oneSided_ = std::make_unique<OneSided>(rank_, nranks_, engineOptions.spin, engineOptions.timeout);
  oneSided_->exchange(*bootstrap_);
  if (nranks_ > 1) connectPeers();
  if (hostOfRank_.empty()) hostOfRank_.assign(static_cast<size_t>(nranks_), "this host");
  connectDevices();
  barrierBuffer_.assign(static_cast<size_t>(nranks_), 0);
  TIDAL_INFO(Init,
             "rank {}/{}: communicator ready (chunk {} B, {} staging slots, reduce kernel {})",
             rank_, nranks_, engine_->options().chunkBytes, engine_->options().stagingSlots,
             reduceKernelName());
}

void Communicator::connectPeers() {
  links_ = std::make_unique<Links>(rank_, nranks_, *bootstrap_, *engine_, placement_);
  links_->exchange();
  const std::vector<std::string>& hostOfRank = links_->hostOfRank();

  // Ring and chains talk to the neighbours; recursive doubling to the
  // partners at distance 1, 2, 4, ...; the Broadcast/Reduce trees to the
  // ranks at +- 1, 2, 4, ...; hierarchical collectives to the peers
  // of both levels. Those connections are opened now (and their staging
  // pre-faulted), so that no collective pays for a connection set-up and the
  // device path can stage over them; any other peer is connected on first use.
  const int right = (rank_ + 1) % nranks_, left = (rank_ + nranks_ - 1) % nranks_;
  std::set<int> sendPeers{right}, recvPeers{left};
  for (int p : coll::recursiveDoublingPeers(rank_, nranks_)) {
    sendPeers.insert(p);
    recvPeers.insert(p);
  }
  for (int p : coll::binomialPeers(rank_, nranks_)) {
    sendPeers.insert(p);
    recvPeers.insert(p);
  }
  hostOfRank_ = hostOfRank;
  topology_ = coll::Topology::fromHostKeys(hostOfRank, rank_);
  chooseSpinMode(static_cast<int>(
      std::count(hostOfRank.begin(), hostOfRank.end(), hostOfRank[static_cast<size_t>(rank_)])));
  if (topology_.hierarchical()) {
    for (int p : coll::hierarchicalPeers(topology_)) {
      sendPeers.insert(p);
      recvPeers.insert(p);
    }
  }
  TIDAL_INFO(Init, "rank {}: {} host(s){}", rank_,
             topology_.hosts.empty() ? 0 : topology_.hosts.size(),
             topology_.hierarchical() ? ", hierarchical collectives available" : "");
  if (algorithms_.wantsModel()) useTunerModel(hostOfRank);
  links_->connect(sendPeers, recvPeers);
}

void Communicator::useTunerModel(const std::vector<std::string>& hostOfRank) {
  if (nranks_ > tuner::ModelPicks::kMaxRanks) {
    TIDAL_WARN(Init,
               "rank {}: TIDAL_TUNER=model: {} ranks are more than the model runs at init ({}); "
               "the size rules pick the algorithms",
               rank_, nranks_, tuner::ModelPicks::kMaxRanks);
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  algorithms_.useModel(std::make_shared<const tuner::ModelPicks>(
      tuner::ModelPicks::compute(tuner::hostIdsOf(hostOfRank), engine_->options().chunkBytes,
                                 tuner::LinkModel::fromParams())));
  TIDAL_INFO(Init, "rank {}: TIDAL_TUNER=model: the model's picks for {} ranks took {} ms", rank_,
             nranks_,
             std::chrono::duration_cast<std::chrono::milliseconds>(
                 std::chrono::steady_clock::now() - start)
                 .count());
}

void Communicator::connectDevices() {
  // Every rank of a job runs the same build: without CUDA support none of
  // them takes part in the device path's allGather.
  if (!cuda::built() && !devices_) {
    deviceUnavailable_ = cuda::unavailableReason();
    return;
  }
  std::unique_ptr<DeviceApi> device;
  if (devices_) {
    device = devices_();
  } else if (cuda::usable()) {
    device = cuda::createDeviceApi(cuda::currentDevice().value_or(0));
  }
  if (device) cudaDevice_ = device->device();
  DevicePathConfig config;
  config.rank = rank_;
  config.nranks = nranks_;
  config.bootstrap = bootstrap_.get();
  config.hostId = localHostIdentity();
  config.hostLinks = links_.get();
  if (links_) {
    for (const auto& [peer, c] : links_->sendConnections()) config.eagerSend.push_back(peer);
    for (const auto& [peer, c] : links_->recvConnections()) config.eagerRecv.push_back(peer);
  }
  config.options = engine_->options();
  config.ipcAllowed =
      params::getString("TIDAL_NET").empty() && !params::getBool("TIDAL_CUDA_IPC_DISABLE");
  device_ = DevicePath::create(
      config, std::move(device), cuda::unavailableReason(),
      [this](const Error& e) { breakWith(e); }, &deviceUnavailable_);
  if (!device_) {
    cudaDevice_ = -1;
    TIDAL_INFO(Init, "rank {}: no device buffers: {}", rank_, deviceUnavailable_);
  }
}

void Communicator::chooseSpinMode(int ranksOnThisHost) {
  // The CPUs this host's ranks may run on (their affinity masks together),
  // else, where a rank could not tell, the machine's online CPUs.
  const bool fromMasks = localCpus_ > 0;
  const long cpus = fromMasks ? localCpus_ : sysconf(_SC_NPROCESSORS_ONLN);
  const bool busy =
      busyPollMode_ == "auto" ? cpus > 0 && ranksOnThisHost <= cpus : busyPollMode_ == "1";
  engine_->setSpinMode(busy, ranksOnThisHost);
  TIDAL_INFO(Init, "rank {}: {} rank(s) on this host, {} CPU(s) {}: waits {}", rank_,
             ranksOnThisHost, cpus,
             fromMasks ? "in their affinity masks" : "online (a rank's mask is unknown)",
             busy ? "busy-poll, then sleep" : "yield, then sleep");
}

std::optional<CallCheck> Communicator::sign(CallKind kind, size_t count, int type, int op,
                                            int root) {
  // Numbered by execute(), under the call's lock.
  std::optional<CallCheck> check;
  if (!checkCalls_) return check;
  // Built in place (CallSignature::make is inline): this runs on every
  // small call's critical path.
  check.emplace();
  check->signature = CallSignature::make(kind, 0, count, type, op, root);
  if (root != CallSignature::kNone && nranks_ > 1) {
    check->ringNext = (rank_ + 1) % nranks_;
    check->ringPrev = (rank_ + nranks_ - 1) % nranks_;
  }
  return check;
}

coll::CollectiveArgs Communicator::args(size_t count, tidalDataType_t type, tidalRedOp_t op,
                                        int root, bool inPlace) const {
  return {rank_, nranks_, count, type, op, root, engine_->options().chunkBytes, inPlace};
}

void Communicator::breakWith(const Error& error) {
  tidalResult_t expected = tidalSuccess;
  if (broken_.compare_exchange_strong(expected, error.code())) {
    std::lock_guard lock(errorMutex_);
    brokenText_ = error.what();
  }
  closeConnections();
}

void Communicator::closeConnections() {
  // Closing our sockets makes the neighbours fail now rather than at their
  // timeout, and they in turn close theirs: the error spreads around the ring.
  if (links_) links_->abortConnections();
  if (device_) device_->abortConnections();
}

std::unique_lock<std::mutex> Communicator::enterCall(const char* what) {
  std::unique_lock lock(opMutex_, std::try_to_lock);
  if (!lock.owns_lock()) {
    fail(tidalInvalidUsage,
         "rank {}: {} called while another call is running on the same communicator "
         "(a communicator is used by one thread at a time)",
         rank_, what);
  }
  refuseIfRevokedOrSuspended(what);
  if (const tidalResult_t b = broken_.load(); b != tidalSuccess) {
    std::lock_guard elock(errorMutex_);
    fail(b, "rank {}: {} on a communicator broken by an earlier error: {}", rank_, what,
         brokenText_);
  }
  return lock;
}

void Communicator::refuseIfRevokedOrSuspended(const char* what) const {
  if (revoked_.load()) {
    fail(tidalInvalidUsage,
         "rank {}: {} on a communicator revoked by tidalCommRevoke; only tidalCommSplit, "
         "tidalCommShrink, tidalCommDestroy and tidalCommAbort may follow",
         rank_, what);
  }
  if (suspended_.load()) {
    fail(tidalInvalidUsage,
         "rank {}: {} on a suspended communicator (tidalCommSuspend); call tidalCommResume first",
         rank_, what);
  }
}

template <typename Build, typename Prepare>
void Communicator::execute(const char* what, std::optional<CallCheck> check,
                           const ScheduleCache::Key& key, const void* sendbuff, void* recvbuff,
                           const CallMemory& memory, Build&& build, Prepare&& prepare) {
  if constexpr (!std::is_invocable_v<Build>) {
    // Built per call (AllToAllv, a Send/Recv group): only this rank's part
    // is known, so the simulation times it against peers that mirror it.
    if (simulation::Recording* recording = simulation::recordingFor(this)) {
      std::vector<uint64_t> sizes;
      recording->calls.push_back(tuner::withMirroredPeers(build(sizes), rank_, nranks_));
      return;
    }
  }
  const std::unique_lock lock = enterCall(what);
  prepare();
  // Every checked collective is numbered, host or device buffers, so that a
  // mismatch report gives each rank's own call number.
  if (check) {
    check->signature.seq = collectivesCalled_++;
    check->signature.memory =
        memory.kind == MemoryKind::Cuda ? CallSignature::kDeviceMemory : CallSignature::kHostMemory;
  }
  const uint64_t recorded = recorder_->begin(what, check ? &check->signature : nullptr);
  try {
    runRecorded(what, check, key, sendbuff, recvbuff, memory, build);
  } catch (const Error& e) {
    recorder_->end(recorded, false, e.what());
    // A hang ends in a timeout on some ranks and, through them, in lost
    // connections on the others: both tell the story, so both write.
    if (dumpOnTimeout_ && (e.code() == tidalTimeout || e.code() == tidalRemoteError)) {
      recorder_->dump();
    }
    throw;
  }
  recorder_->end(recorded, memory.kind == MemoryKind::Cuda, {});
}

template <typename AnyRank>
void Communicator::collective(const char* what, std::optional<CallCheck> check,
                              const ScheduleCache::Key& key, const coll::CollectiveArgs& a,
                              const void* sendbuff, void* recvbuff, const CallMemory& memory,
                              AnyRank&& build) {
  if (simulation::Recording* recording = simulation::recordingFor(this)) {
    std::vector<coll::Topology> topologies;
    for (int r = 0; r < nranks_; ++r) {
      topologies.push_back(coll::Topology::fromHostKeys(hostOfRank_, r));
    }
    recording->calls.push_back(coll::everyRank(build, a, topologies));
    return;
  }
  execute(what, std::move(check), key, sendbuff, recvbuff, memory,
          [&] { return build(a, topology_); });
}

template <typename Build>
void Communicator::runRecorded(const char* what, std::optional<CallCheck>& check,
                               const ScheduleCache::Key& key, const void* sendbuff, void* recvbuff,
                               const CallMemory& memory, Build& build) {
  // Schedules that name host addresses (Buffer::Address) are built per call.
  constexpr bool kCached = std::is_invocable_v<Build>;
  if (memory.kind == MemoryKind::Cuda) {
    if (!device_) {
      fail(tidalInvalidUsage, "rank {}: {} on CUDA buffers, but this communicator has none: {}",
           rank_, what, deviceUnavailable_);
    }
    // Enqueued: the progress thread runs it (device_path.h); its failures
    // break the communicator from there.
    if constexpr (kCached) {
      device_->submit(memory.stream, what,
                      std::make_shared<const coll::Schedule>(schedules_.get(key, build)), sendbuff,
                      recvbuff, check);
    } else {
      // The size messages' values travel with the schedule, which names them
      // by address, until the progress thread has run it.
      struct PerCall {
        std::vector<uint64_t> sizes;
        coll::Schedule schedule;
      };
      auto owned = std::make_shared<PerCall>();
      owned->schedule = build(owned->sizes);
      device_->submit(memory.stream, what,
                      std::shared_ptr<const coll::Schedule>(owned, &owned->schedule), sendbuff,
                      recvbuff, check);
    }
    return;
  }
  // Built before the run: a schedule that cannot be built (self-sends that
  // do not pair up) is a usage error that leaves the communicator healthy.
  // build(messageSizes_) fills the size messages it names.
  coll::Schedule perCall;
  if constexpr (!kCached) perCall = build(messageSizes_);
  try {
    // Host buffers come after every stream-ordered call issued before them.
    if (device_ && !device_->idle()) device_->waitIdle(what);
    const CallCheck* checked = check ? &*check : nullptr;
    if constexpr (kCached) {
      engine_->run(schedules_.get(key, build), sendbuff, recvbuff, what, nullptr, checked);
    } else {
      engine_->run(perCall, sendbuff, recvbuff, what, nullptr, checked);
    }
  } catch (const Error& e) {
    throw shareFailure(e, what);
  }
}

// The builders a schedule-cache key can name.
enum Collective : int {
  kAllReduceRing,
  kAllReduceRecursiveDoubling,
  kAllReduceHierarchical,
  kAllGather,
  kAllGatherHierarchical,
  kReduceScatter,
  kReduceScatterHierarchical,
  kBroadcast,
  kReduce,
  kBarrier,
  kAllToAll,
  kGather,
  kScatter,
  kSend,
  kRecv,
  kAllToAllBruck,
  kGatherTree,
  kScatterTree,
  kBroadcastTree,
  kReduceTree,
  kAllReduceRabenseifner,
  kAllGatherBruck,
  kAllReduceDoubleBinaryTree,
  kReduceScatterHalving
};

void Communicator::allReduce(const void* sendbuff, void* recvbuff, size_t count,
                             tidalDataType_t type, tidalRedOp_t op, const CallMemory& memory) {
  const auto a = args(count, type, op, 0, sendbuff == recvbuff);
  const auto key = [&](int collective) {
    return ScheduleCache::Key{collective, count, type, op, 0, a.inPlace};
  };
  switch (algorithms_.allReduce(count * typeSize(type), engine_->options().chunkBytes, nranks_,
                                topology_)) {
    case AlgorithmChoice::AllReduce::RecursiveDoubling:
      collective("AllReduce", sign(CallKind::AllReduce, count, type, op, CallSignature::kNone),
                 key(kAllReduceRecursiveDoubling), a, sendbuff, recvbuff, memory,
                 coll::flat<coll::recursiveDoublingAllReduce>);
      break;
    case AlgorithmChoice::AllReduce::Hierarchical:
      collective("AllReduce", sign(CallKind::AllReduce, count, type, op, CallSignature::kNone),
                 key(kAllReduceHierarchical), a, sendbuff, recvbuff, memory,
                 coll::withHosts<coll::hierarchicalAllReduce>);
      break;
    case AlgorithmChoice::AllReduce::Rabenseifner:
      collective("AllReduce", sign(CallKind::AllReduce, count, type, op, CallSignature::kNone),
                 key(kAllReduceRabenseifner), a, sendbuff, recvbuff, memory,
                 coll::flat<coll::rabenseifnerAllReduce>);
      break;
    case AlgorithmChoice::AllReduce::DoubleBinaryTree:
      collective("AllReduce", sign(CallKind::AllReduce, count, type, op, CallSignature::kNone),
                 key(kAllReduceDoubleBinaryTree), a, sendbuff, recvbuff, memory,
                 coll::flat<coll::doubleBinaryTreeAllReduce>);
      break;
    case AlgorithmChoice::AllReduce::Ring:
      collective("AllReduce", sign(CallKind::AllReduce, count, type, op, CallSignature::kNone),
                 key(kAllReduceRing), a, sendbuff, recvbuff, memory,
                 coll::flat<coll::ringAllReduce>);
      break;
  }
}

void Communicator::allGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                             tidalDataType_t type, const CallMemory& memory) {
  const char* mySlot =
      static_cast<const char*>(recvbuff) + static_cast<size_t>(rank_) * sendcount * typeSize(type);
  const auto a = args(sendcount, type, tidalSum, 0, sendbuff == mySlot);
  const auto signature =
      sign(CallKind::AllGather, sendcount, type, CallSignature::kNone, CallSignature::kNone);
  const auto key = [&](int collective) {
    return ScheduleCache::Key{collective, sendcount, type, tidalSum, 0, a.inPlace};
  };
  switch (algorithms_.allGather(sendcount * typeSize(type), nranks_, topology_)) {
    case AlgorithmChoice::AllGather::Hierarchical:
      collective("AllGather", signature, key(kAllGatherHierarchical), a, sendbuff, recvbuff, memory,
                 coll::withHosts<coll::hierarchicalAllGather>);
      break;
    case AlgorithmChoice::AllGather::Bruck:
      collective("AllGather", signature, key(kAllGatherBruck), a, sendbuff, recvbuff, memory,
                 coll::flat<coll::bruckAllGather>);
      break;
    case AlgorithmChoice::AllGather::Ring:
      collective("AllGather", signature, key(kAllGather), a, sendbuff, recvbuff, memory,
                 coll::flat<coll::ringAllGather>);
      break;
  }
}

void Communicator::reduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                 tidalDataType_t type, tidalRedOp_t op, const CallMemory& memory) {
  const char* mySlot =
      static_cast<const char*>(sendbuff) + static_cast<size_t>(rank_) * recvcount * typeSize(type);
  const auto a = args(recvcount, type, op, 0, recvbuff == mySlot);
  const auto signature = sign(CallKind::ReduceScatter, recvcount, type, op, CallSignature::kNone);
  const auto key = [&](int collective) {
    return ScheduleCache::Key{collective, recvcount, type, op, 0, a.inPlace};
  };
  switch (algorithms_.reduceScatter(recvcount * typeSize(type), nranks_, topology_)) {
    case AlgorithmChoice::ReduceScatter::Hierarchical:
      collective("ReduceScatter", signature, key(kReduceScatterHierarchical), a, sendbuff, recvbuff,
                 memory, coll::withHosts<coll::hierarchicalReduceScatter>);
      break;
    case AlgorithmChoice::ReduceScatter::Halving:
      collective("ReduceScatter", signature, key(kReduceScatterHalving), a, sendbuff, recvbuff,
                 memory, coll::flat<coll::halvingReduceScatter>);
      break;
    case AlgorithmChoice::ReduceScatter::Ring:
      collective("ReduceScatter", signature, key(kReduceScatter), a, sendbuff, recvbuff, memory,
                 coll::flat<coll::ringReduceScatter>);
      break;
  }
}

void Communicator::broadcast(const void* sendbuff, void* recvbuff, size_t count,
                             tidalDataType_t type, int root, const CallMemory& memory) {
  const auto a = args(count, type, tidalSum, root, sendbuff == recvbuff);
  const bool tree = algorithms_.treeBroadcast(count * typeSize(type), nranks_);
  collective("Broadcast", sign(CallKind::Broadcast, count, type, CallSignature::kNone, root),
             {tree ? kBroadcastTree : kBroadcast, count, type, tidalSum, root, a.inPlace}, a,
             sendbuff, recvbuff, memory,
             [tree](const coll::CollectiveArgs& x, const coll::Topology&) {
               return tree ? coll::binomialBroadcast(x) : coll::chainBroadcast(x);
             });
}

void Communicator::reduce(const void* sendbuff, void* recvbuff, size_t count, tidalDataType_t type,
                          tidalRedOp_t op, int root, const CallMemory& memory) {
  const auto a = args(count, type, op, root, sendbuff == recvbuff);
  const bool tree = algorithms_.treeReduce(count * typeSize(type), nranks_);
  collective("Reduce", sign(CallKind::Reduce, count, type, op, root),
             {tree ? kReduceTree : kReduce, count, type, op, root, a.inPlace}, a, sendbuff,
             recvbuff, memory, [tree](const coll::CollectiveArgs& x, const coll::Topology&) {
               return tree ? coll::binomialReduce(x) : coll::chainReduce(x);
             });
}

void Communicator::barrier(const CallMemory& memory) {
  // Dissemination: ceil(log2 n) rounds of one byte, each waiting for the
  // last, so no rank leaves before every rank has arrived. The bytes (one per
  // rank, of which the schedule uses 1 + ceil(log2 n)) carry nothing; ordered
  // on a stream, they are the device path's.
  const auto a = args(barrierBuffer_.size(), tidalUint8, tidalMax, 0, true);
  void* bytes = barrierBuffer_.data();
  if (memory.kind == MemoryKind::Cuda && device_) bytes = device_->barrierBuffer();
  collective(
      "Barrier",
      sign(CallKind::Barrier, 0, CallSignature::kNone, CallSignature::kNone, CallSignature::kNone),
      {kBarrier, a.count, a.type, a.op, 0, true}, a, bytes, bytes, memory,
      coll::flat<coll::disseminationBarrier>);
}

void Communicator::allToAll(const void* sendbuff, void* recvbuff, size_t count,
                            tidalDataType_t type, const CallMemory& memory) {
  const auto a = args(count, type, tidalSum, 0, sendbuff == recvbuff);
  if (algorithms_.bruckAllToAll(count * typeSize(type), nranks_)) {
    collective("AllToAll",
               sign(CallKind::AllToAll, count, type, CallSignature::kNone, CallSignature::kNone),
               {kAllToAllBruck, count, type, tidalSum, 0, a.inPlace}, a, sendbuff, recvbuff, memory,
               coll::flat<coll::bruckAllToAll>);
    return;
  }
  collective("AllToAll",
             sign(CallKind::AllToAll, count, type, CallSignature::kNone, CallSignature::kNone),
             {kAllToAll, count, type, tidalSum, 0, a.inPlace}, a, sendbuff, recvbuff, memory,
             coll::flat<coll::pairwiseAllToAll>);
}

void Communicator::allToAllv(const void* sendbuff, void* recvbuff,
                             const coll::AllToAllvLayout& layout, tidalDataType_t type,
                             const CallMemory& memory) {
  const auto a = args(0, type, tidalSum, 0, false);
  execute("AllToAllv",
          sign(CallKind::AllToAllv, 0, type, CallSignature::kNone, CallSignature::kNone), {},
          sendbuff, recvbuff, memory,
          [&](std::vector<uint64_t>& sizes) { return coll::pairwiseAllToAllv(a, layout, sizes); });
}

void Communicator::gather(const void* sendbuff, void* recvbuff, size_t count, tidalDataType_t type,
                          int root, const CallMemory& memory) {
  const size_t block = count * typeSize(type);
  const bool inPlace = rank_ == root && sendbuff == static_cast<const char*>(recvbuff) +
                                                        block * static_cast<size_t>(root);
  const auto a = args(count, type, tidalSum, root, inPlace);
  if (algorithms_.treeGather(block, nranks_)) {
    collective("Gather", sign(CallKind::Gather, count, type, CallSignature::kNone, root),
               {kGatherTree, count, type, tidalSum, root, inPlace}, a, sendbuff, recvbuff, memory,
               coll::flat<coll::binomialGather>);
    return;
  }
  collective("Gather", sign(CallKind::Gather, count, type, CallSignature::kNone, root),
             {kGather, count, type, tidalSum, root, inPlace}, a, sendbuff, recvbuff, memory,
             coll::flat<coll::directGather>);
}

void Communicator::scatter(const void* sendbuff, void* recvbuff, size_t count, tidalDataType_t type,
                           int root, const CallMemory& memory) {
  const size_t block = count * typeSize(type);
  const bool inPlace = rank_ == root && recvbuff == static_cast<const char*>(sendbuff) +
                                                        block * static_cast<size_t>(root);
  const auto a = args(count, type, tidalSum, root, inPlace);
  if (algorithms_.treeScatter(block, nranks_)) {
    collective("Scatter", sign(CallKind::Scatter, count, type, CallSignature::kNone, root),
               {kScatterTree, count, type, tidalSum, root, inPlace}, a, sendbuff, recvbuff, memory,
               coll::flat<coll::binomialScatter>);
    return;
  }
  collective("Scatter", sign(CallKind::Scatter, count, type, CallSignature::kNone, root),
             {kScatter, count, type, tidalSum, root, inPlace}, a, sendbuff, recvbuff, memory,
             coll::flat<coll::directScatter>);
}

void Communicator::pointToPoint(const coll::P2pOp& op, const CallMemory& memory) {
  if (memory.kind == MemoryKind::Cuda || op.peer == rank_) {
    pointToPoint(std::vector<coll::P2pOp>{op}, memory);
    return;
  }
  const bool send = op.kind == coll::P2pOp::Kind::Send;
  const coll::P2pFraming framing = p2pFraming(memory);
  // The peer is the key's root; the schedule names the buffer as the run's
  // own, and the header it sends is filled per call.
  execute(
      send ? "Send" : "Recv", std::nullopt,
      {send ? kSend : kRecv, op.bytes, op.type, tidalSum, op.peer, false}, op.buffer, op.buffer,
      memory, [&] { return coll::p2pSingle(op, framing, &sendHeader_, &recvNumber_); },
      [&] {
        // Under the call's lock; building this schedule cannot fail, so the
        // message is counted now.
        const uint64_t number = messagesWith(op)++;
        if (!send) {
          recvNumber_ = number;
          return;
        }
        const bool inlined = coll::p2pInlined(framing, op.bytes);
        sendHeader_ = CallSignature::sendHeader(op.bytes / typeSize(op.type), op.type, number,
                                                inlined ? op.buffer : nullptr, op.bytes);
      });
}

uint64_t& Communicator::messagesWith(const coll::P2pOp& op) {
  if (sentTo_.empty()) {
    sentTo_.assign(static_cast<size_t>(nranks_), 0);
    receivedFrom_.assign(static_cast<size_t>(nranks_), 0);
  }
  auto& counters = op.kind == coll::P2pOp::Kind::Send ? sentTo_ : receivedFrom_;
  return counters[static_cast<size_t>(op.peer)];
}

void Communicator::pointToPoint(const std::vector<coll::P2pOp>& ops, const CallMemory& memory) {
  if (ops.empty()) return;
  const char* what = ops.size() == 1 ? (ops[0].kind == coll::P2pOp::Kind::Send ? "Send" : "Recv")
                                     : "Send/Recv group";
  const coll::P2pFraming framing = p2pFraming(memory);
  execute(what, std::nullopt, {}, nullptr, nullptr, memory, [&](std::vector<uint64_t>& headers) {
    // Built under the call's lock when the group runs. A group that sends
    // nothing gives its numbers back, so the pairs' numbering stays as it
    // was: one refused at build (self-sends that do not pair up), and one
    // only timed by tidalGroupSimulateEnd (built outside the lock, never run).
    std::vector<coll::P2pOp> numbered = ops;
    for (auto& op : numbered)
      if (op.peer != rank_) op.number = messagesWith(op)++;
    const auto giveBack = [&] {
      for (const auto& op : numbered)
        if (op.peer != rank_) --messagesWith(op);
    };
    try {
      coll::Schedule s = coll::p2pGroup(rank_, numbered, framing, headers);
      if (simulation::recordingFor(this)) giveBack();
      return s;
    } catch (...) {
      giveBack();
      throw;
    }
  });
}

coll::P2pFraming Communicator::p2pFraming(const CallMemory& memory) const {
  // Only host payloads can be copied into a header as the schedule is made.
  return {engine_->options().chunkBytes, memory.kind == MemoryKind::Host, checkCalls_};
}

void Communicator::abort() {
  engine_->abort();
  if (oneSided_) oneSided_->abort();
  if (device_) device_->abort();
  if (bootstrap_) bootstrap_->abort();
  if (links_) links_->abortTransports();
  breakWith(Error(tidalRemoteError, fmt::format("rank {}: communicator aborted", rank_)));
}

void Communicator::closeWhenAllDone() {
  if (nranks_ == 1 || !bootstrap_ || !links_) return;
  std::vector<std::shared_ptr<KeptOpen>> held = links_->keepOpenUntilAllDone();
  if (held.empty()) return;
  // Stream-ordered work still queued is part of this rank's calls, and may
  // move bytes over what is held: it ends first (as the destructor would).
  if (device_ && !device_->idle()) {
    try {
      device_->waitIdle("tidalCommDestroy");
    } catch (const Error&) {
      return;  // broken: the peers are told through the closed connections
    }
  }
  if (broken_.load() != tidalSuccess) return;
  // Nothing below uses the ring once this object is being destroyed.
  tidal::closeWhenAllDone(std::move(bootstrap_), std::move(held));
}

void Communicator::waitForCallsToLeave() const {
  while (callsInFlight_.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void Communicator::setLastError(std::string text) {
  std::lock_guard lock(errorMutex_);
  lastError_ = std::move(text);
}

const char* Communicator::lastError() const {
  std::lock_guard lock(errorMutex_);
  return lastError_.c_str();
}

}  // namespace tidal
