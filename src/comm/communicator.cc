#include "comm/communicator.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <thread>

#include "comm/host_identity.h"
#include "comm/schedule_settings.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/log.h"
#include "core/params.h"
#include "cuda/cuda_support.h"
#include "reduce/reduce.h"

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
  return {static_cast<size_t>(chunk), static_cast<int>(slots), std::chrono::microseconds(spin),
          std::chrono::seconds(timeout)};
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
  if (rank_ == 0 && log::versionRequested()) {
    // Printed through the logger at WARN so that TIDAL_DEBUG=VERSION shows it alone.
    log::logger().warn("Tidal version " TIDAL_RELEASE_STRING " (NCCL API {}.{}.{})", TIDAL_MAJOR,
                       TIDAL_MINOR, TIDAL_PATCH);
  }
  engine_ = std::make_unique<Engine>(rank_, engineOptionsFromParams(rank_));
  const int64_t rd = params::getInt("TIDAL_ALLREDUCE_RD_BYTES");
  if (rd < 0)
    fail(tidalInvalidArgument, "rank {}: TIDAL_ALLREDUCE_RD_BYTES={} is negative", rank_, rd);
  rdMaxBytes_ = static_cast<size_t>(rd);
  algo_ = params::getString("TIDAL_ALLREDUCE_ALGO");
  if (algo_ != "auto" && algo_ != "ring" && algo_ != "rd" && algo_ != "hier") {
    fail(tidalInvalidArgument,
         "rank {}: TIDAL_ALLREDUCE_ALGO='{}' is not one of auto, ring, rd, hier", rank_, algo_);
  }
  for (auto [name, value] : {std::pair{"TIDAL_ALLGATHER_ALGO", &allGatherAlgo_},
                             std::pair{"TIDAL_REDUCESCATTER_ALGO", &reduceScatterAlgo_}}) {
    *value = params::getString(name);
    if (*value != "auto" && *value != "ring" && *value != "hier") {
      fail(tidalInvalidArgument, "rank {}: {}='{}' is not one of auto, ring, hier", rank_, name,
           *value);
    }
  }
  busyPollMode_ = params::getString("TIDAL_BUSY_POLL");
  if (busyPollMode_ != "auto" && busyPollMode_ != "0" && busyPollMode_ != "1") {
    fail(tidalInvalidArgument, "rank {}: TIDAL_BUSY_POLL='{}' is not one of auto, 0, 1", rank_,
         busyPollMode_);
  }
  bootstrap_ = Bootstrap::create(id, rank_, nranks_);
  checkScheduleSettingsAgree(*bootstrap_, rank_, nranks_);
  if (nranks_ > 1) connectPeers();
  connectDevices();
  barrierBuffer_.assign(static_cast<size_t>(nranks_), 0);
  TIDAL_INFO(Init,
             "rank {}/{}: communicator ready (chunk {} B, {} staging slots, reduce kernel {})",
             rank_, nranks_, engine_->options().chunkBytes, engine_->options().stagingSlots,
             reduceKernelName());
}

// What every rank tells every other at init: where it is and how to reach it
// over each transport it listens on. Fixed-size slots keep the exchange one
// bounded allGather.
struct Communicator::PeerRecord {
  char hostId[kMaxHostIdBytes];
  uint32_t transportCount;
  struct Slot {
    uint16_t length;
    uint8_t bytes[kMaxConnectHandleBytes];
  } handles[kMaxTransports];
};

std::string Communicator::chooseTransport(int peer, const std::vector<PeerRecord>& records) const {
  if (!forcedNet_.empty()) return forcedNet_;
  const bool sameHost =
      std::strncmp(records[static_cast<size_t>(rank_)].hostId,
                   records[static_cast<size_t>(peer)].hostId, kMaxHostIdBytes) == 0;
  if (sameHost && !shmDisabled_ && transports_.count("shm")) return "shm";
  // A transport whose listen() returned an empty handle is not offered by
  // that rank (ib without an active RDMA port): both ends must offer it.
  const auto offers = [&](int r, const std::string& name) {
    const auto it = std::find(transportOrder_.begin(), transportOrder_.end(), name);
    if (it == transportOrder_.end()) return false;
    const auto index = static_cast<size_t>(it - transportOrder_.begin());
    return records[static_cast<size_t>(r)].handles[index].length > 0;
  };
  if (offers(rank_, "ib") && offers(peer, "ib")) return "ib";
  return "tcp";
}

void Communicator::connectPeers() {
  forcedNet_ = params::getString("TIDAL_NET");
  shmDisabled_ = params::getBool("TIDAL_SHM_DISABLE");
  const std::vector<std::string> names =
      forcedNet_.empty() ? availableTransports() : std::vector<std::string>{forcedNet_};
  if (names.size() > kMaxTransports) {
    fail(tidalInternalError, "rank {}: {} transports exceed the {} bootstrap slots", rank_,
         names.size(), kMaxTransports);
  }
  PeerRecord mine{};
  const std::string host = localHostIdentity();
  std::memcpy(mine.hostId, host.data(), host.size());
  mine.transportCount = static_cast<uint32_t>(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    auto t = createTransport(names[i], {rank_, nranks_, bootstrap_->secret()});
    const ConnectHandle h = t->listen();
    if (h.size() > kMaxConnectHandleBytes) {
      fail(tidalInternalError, "rank {}: {} handle of {} bytes is too large", rank_, names[i],
           h.size());
    }
    mine.handles[i].length = static_cast<uint16_t>(h.size());
    std::memcpy(mine.handles[i].bytes, h.data(), h.size());
    transportOrder_.push_back(names[i]);
    transports_[names[i]] = std::move(t);
  }
  std::vector<PeerRecord> records(static_cast<size_t>(nranks_));
  bootstrap_->allGather(&mine, records.data(), sizeof(PeerRecord));
  for (int r = 0; r < nranks_; ++r) {
    const PeerRecord& rec = records[static_cast<size_t>(r)];
    if (rec.transportCount != mine.transportCount) {
      fail(tidalInvalidUsage,
           "rank {}: rank {} offers {} transports and this rank {}: set TIDAL_NET the same on "
           "every rank",
           rank_, r, rec.transportCount, mine.transportCount);
    }
  }
  auto handleOf = [&](int peer, const std::string& name) {
    const size_t index = static_cast<size_t>(
        std::find(transportOrder_.begin(), transportOrder_.end(), name) - transportOrder_.begin());
    const auto& slot = records[static_cast<size_t>(peer)].handles[index];
    if (slot.length > kMaxConnectHandleBytes) {
      fail(tidalRemoteError, "rank {}: rank {} sent a malformed {} handle", rank_, peer, name);
    }
    return ConnectHandle(slot.bytes, slot.bytes + slot.length);
  };

  // Ring and chains talk to the neighbours; recursive doubling to the
  // partners at distance 1, 2, 4, ... Connect sends to all of them first
  // (a connect completes in the peer's listen backlog), then accept.
  const int right = (rank_ + 1) % nranks_, left = (rank_ + nranks_ - 1) % nranks_;
  std::set<int> sendPeers{right}, recvPeers{left};
  for (int p : coll::recursiveDoublingPeers(rank_, nranks_)) {
    sendPeers.insert(p);
    recvPeers.insert(p);
  }
  std::vector<std::string> hostOfRank;
  for (const auto& rec : records)
    hostOfRank.emplace_back(rec.hostId, strnlen(rec.hostId, kMaxHostIdBytes));
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
  const Deadline deadline = deadlineFromNow();
  for (int peer : sendPeers) {
    const std::string name = chooseTransport(peer, records);
    auto& c = sendTo_[peer];
    c = transports_.at(name)->connectSend(peer, handleOf(peer, name), deadline);
    engine_->addSendConnection(peer, c.get());
    TIDAL_INFO(Init, "rank {} -> {}: {}", rank_, peer, c->describe());
  }
  for (int peer : recvPeers) {
    const std::string name = chooseTransport(peer, records);
    auto& c = recvFrom_[peer];
    c = transports_.at(name)->acceptRecv(peer, deadline);
    engine_->addRecvConnection(peer, c.get());
    TIDAL_INFO(Init, "rank {} <- {}: {}", rank_, peer, c->describe());
  }
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
  config.hostSend = &sendTo_;
  config.hostRecv = &recvFrom_;
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
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  const bool busy =
      busyPollMode_ == "auto" ? cpus > 0 && ranksOnThisHost <= cpus : busyPollMode_ == "1";
  engine_->setBusyPoll(busy);
  TIDAL_INFO(Init, "rank {}: {} rank(s) on this host, {} CPU(s): waits {}", rank_, ranksOnThisHost,
             cpus, busy ? "busy-poll, then sleep" : "yield, then sleep");
}

Communicator::AllReduceAlgo Communicator::chooseAllReduce(size_t bytes) const {
  // Recursive doubling sends the whole message in one staging slot, so it
  // must fit in a chunk.
  const bool rdFits = bytes <= engine_->options().chunkBytes;
  if (algo_ == "rd" && rdFits) return AllReduceAlgo::RecursiveDoubling;
  if (algo_ == "ring") return AllReduceAlgo::Ring;
  if (algo_ == "hier") {
    return topology_.hierarchical() ? AllReduceAlgo::Hierarchical : AllReduceAlgo::Ring;
  }
  if (bytes <= rdMaxBytes_ && rdFits) return AllReduceAlgo::RecursiveDoubling;
  return topology_.hierarchical() ? AllReduceAlgo::Hierarchical : AllReduceAlgo::Ring;
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
  // Closing our sockets makes the neighbours fail now rather than at their
  // timeout, and they in turn close theirs: the error spreads around the ring.
  for (auto& [peer, c] : sendTo_) c->abort();
  for (auto& [peer, c] : recvFrom_) c->abort();
  if (device_) device_->abortConnections();
}

template <typename Build>
void Communicator::execute(const char* what, const ScheduleCache::Key& key, const void* sendbuff,
                           void* recvbuff, const CallMemory& memory, Build&& build) {
  std::unique_lock lock(opMutex_, std::try_to_lock);
  if (!lock.owns_lock()) {
    fail(tidalInvalidUsage,
         "rank {}: {} called while another call is running on the same communicator "
         "(a communicator is used by one thread at a time)",
         rank_, what);
  }
  if (const tidalResult_t b = broken_.load(); b != tidalSuccess) {
    std::lock_guard elock(errorMutex_);
    fail(b, "rank {}: {} on a communicator broken by an earlier error: {}", rank_, what,
         brokenText_);
  }
  if (memory.kind == MemoryKind::Cuda) {
    if (!device_) {
      fail(tidalInvalidUsage, "rank {}: {} on CUDA buffers, but this communicator has none: {}",
           rank_, what, deviceUnavailable_);
    }
    // Enqueued: the progress thread runs it (device_path.h); its failures
    // break the communicator from there.
    device_->submit(memory.stream, what, schedules_.get(key, build), sendbuff, recvbuff);
    return;
  }
  try {
    // Host buffers come after every stream-ordered call issued before them.
    if (device_ && !device_->idle()) device_->waitIdle(what);
    engine_->run(schedules_.get(key, build), sendbuff, recvbuff, what);
  } catch (const Error& e) {
    breakWith(e);
    throw;
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
  kBarrier
};

void Communicator::allReduce(const void* sendbuff, void* recvbuff, size_t count,
                             tidalDataType_t type, tidalRedOp_t op, const CallMemory& memory) {
  const auto a = args(count, type, op, 0, sendbuff == recvbuff);
  const auto key = [&](int collective) {
    return ScheduleCache::Key{collective, count, type, op, 0, a.inPlace};
  };
  switch (chooseAllReduce(count * typeSize(type))) {
    case AllReduceAlgo::RecursiveDoubling:
      execute("AllReduce", key(kAllReduceRecursiveDoubling), sendbuff, recvbuff, memory,
              [&] { return coll::recursiveDoublingAllReduce(a); });
      break;
    case AllReduceAlgo::Hierarchical:
      execute("AllReduce", key(kAllReduceHierarchical), sendbuff, recvbuff, memory,
              [&] { return coll::hierarchicalAllReduce(a, topology_); });
      break;
    case AllReduceAlgo::Ring:
      execute("AllReduce", key(kAllReduceRing), sendbuff, recvbuff, memory,
              [&] { return coll::ringAllReduce(a); });
      break;
  }
}

bool Communicator::useHierarchical(const std::string& algo) const {
  // "hier" on a single host (or uneven hosts) falls back to the ring, as for AllReduce.
  return algo != "ring" && topology_.hierarchical();
}

void Communicator::allGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                             tidalDataType_t type, const CallMemory& memory) {
  const char* mySlot =
      static_cast<const char*>(recvbuff) + static_cast<size_t>(rank_) * sendcount * typeSize(type);
  const auto a = args(sendcount, type, tidalSum, 0, sendbuff == mySlot);
  if (useHierarchical(allGatherAlgo_)) {
    execute("AllGather", {kAllGatherHierarchical, sendcount, type, tidalSum, 0, a.inPlace},
            sendbuff, recvbuff, memory, [&] { return coll::hierarchicalAllGather(a, topology_); });
    return;
  }
  execute("AllGather", {kAllGather, sendcount, type, tidalSum, 0, a.inPlace}, sendbuff, recvbuff,
          memory, [&] { return coll::ringAllGather(a); });
}

void Communicator::reduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                 tidalDataType_t type, tidalRedOp_t op, const CallMemory& memory) {
  const char* mySlot =
      static_cast<const char*>(sendbuff) + static_cast<size_t>(rank_) * recvcount * typeSize(type);
  const auto a = args(recvcount, type, op, 0, recvbuff == mySlot);
  if (useHierarchical(reduceScatterAlgo_)) {
    execute("ReduceScatter", {kReduceScatterHierarchical, recvcount, type, op, 0, a.inPlace},
            sendbuff, recvbuff, memory,
            [&] { return coll::hierarchicalReduceScatter(a, topology_); });
    return;
  }
  execute("ReduceScatter", {kReduceScatter, recvcount, type, op, 0, a.inPlace}, sendbuff, recvbuff,
          memory, [&] { return coll::ringReduceScatter(a); });
}

void Communicator::broadcast(const void* sendbuff, void* recvbuff, size_t count,
                             tidalDataType_t type, int root, const CallMemory& memory) {
  const auto a = args(count, type, tidalSum, root, sendbuff == recvbuff);
  execute("Broadcast", {kBroadcast, count, type, tidalSum, root, a.inPlace}, sendbuff, recvbuff,
          memory, [&] { return coll::chainBroadcast(a); });
}

void Communicator::reduce(const void* sendbuff, void* recvbuff, size_t count, tidalDataType_t type,
                          tidalRedOp_t op, int root, const CallMemory& memory) {
  const auto a = args(count, type, op, root, sendbuff == recvbuff);
  execute("Reduce", {kReduce, count, type, op, root, a.inPlace}, sendbuff, recvbuff, memory,
          [&] { return coll::chainReduce(a); });
}

void Communicator::barrier(const CallMemory& memory) {
  // An AllReduce of one byte per rank: every exchange carries data, so no
  // rank leaves before every rank has arrived. Ordered on a stream, the
  // bytes are the device path's.
  const auto a = args(barrierBuffer_.size(), tidalUint8, tidalMax, 0, true);
  void* bytes = barrierBuffer_.data();
  if (memory.kind == MemoryKind::Cuda && device_) bytes = device_->barrierBuffer();
  execute("Barrier", {kBarrier, a.count, a.type, a.op, 0, true}, bytes, bytes, memory,
          [&] { return coll::recursiveDoublingAllReduce(a); });
}

void Communicator::abort() {
  engine_->abort();
  if (device_) device_->abort();
  if (bootstrap_) bootstrap_->abort();
  for (auto& [name, t] : transports_) t->abort();
  breakWith(Error(tidalRemoteError, fmt::format("rank {}: communicator aborted", rank_)));
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
