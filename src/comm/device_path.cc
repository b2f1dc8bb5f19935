#include "comm/device_path.h"

#include <cstring>

#include "comm/host_identity.h"
#include "core/error.h"
#include "core/log.h"
#include "engine/staged_connection.h"
#include "transports/cuda_ipc/cuda_ipc_transport.h"

namespace tidal {

namespace {
constexpr auto kTeardownDrain = std::chrono::seconds(10);
}  // namespace

// What every rank tells every other about its device side.
struct DevicePath::Record {
  char hostId[kMaxHostIdBytes];
  int32_t usable;  // 1: this rank has a device path
  int32_t ipc;     // 1: it listens for cuda_ipc connections
  int32_t device;
  uint16_t ipcPort;  // its cuda_ipc handle (a loopback port)
  uint16_t reserved;
};

DevicePath::DevicePath(const DevicePathConfig& config, std::unique_ptr<DeviceApi> device)
    : rank_(config.rank),
      nranks_(config.nranks),
      options_(config.options),
      hostLinks_(config.hostLinks),
      metered_(new MeteredDeviceApi(std::move(device))),
      device_(metered_) {}

DevicePath::~DevicePath() {
  streams_.reset();  // finishes queued work (bounded), joins the progress thread
  // Connections and staging memory must outlive the GPU work that uses them.
  if (device_ && !device_->drain(kTeardownDrain)) {
    TIDAL_WARN(Coll, "rank {}: GPU work still runs {} s into teardown", rank_,
               kTeardownDrain.count());
  }
}

std::unique_ptr<DevicePath> DevicePath::create(const DevicePathConfig& config,
                                               std::unique_ptr<DeviceApi> device,
                                               const std::string& unusableReason,
                                               StreamEngine::FailureHandler onFailure,
                                               std::string* unavailable) {
  std::unique_ptr<DevicePath> path;
  if (device) path.reset(new DevicePath(config, std::move(device)));
  Record mine{};
  std::strncpy(mine.hostId, config.hostId.c_str(), kMaxHostIdBytes - 1);
  mine.usable = path != nullptr;
  mine.device = path ? path->device_->device() : -1;
  if (path && config.ipcAllowed && config.nranks > 1) {
    path->ipc_ = std::make_unique<cuda_ipc::CudaIpcTransport>(
        TransportContext{config.rank, config.nranks, config.bootstrap->secret()}, *path->device_);
    const ConnectHandle h = path->ipc_->listen();
    std::memcpy(&mine.ipcPort, h.data(), sizeof mine.ipcPort);
    mine.ipc = 1;
  }
  std::vector<Record> records(static_cast<size_t>(config.nranks));
  if (config.nranks > 1) {
    config.bootstrap->allGather(&mine, records.data(), sizeof(Record));
  } else {
    records[0] = mine;
  }
  for (int r = 0; r < config.nranks; ++r) {
    if (!records[static_cast<size_t>(r)].usable) {
      *unavailable = r == config.rank ? fmt::format("this rank cannot use CUDA: {}", unusableReason)
                                      : fmt::format("rank {} cannot use CUDA", r);
      return nullptr;
    }
  }
  path->connect(std::move(records), config, std::move(onFailure));
  return path;
}

bool DevicePath::viaIpc(int peer) const {
  const Record& mine = records_[static_cast<size_t>(rank_)];
  const Record& theirs = records_[static_cast<size_t>(peer)];
  return mine.ipc && theirs.ipc && std::strncmp(mine.hostId, theirs.hostId, kMaxHostIdBytes) == 0;
}

void DevicePath::requireLink(int peer, const char* what) const {
  if (peer < 0 || peer >= nranks_ || !hostLinks_) {
    fail(tidalInternalError, "rank {}: {} on device buffers names rank {}, which has no link",
         rank_, what, peer);
  }
}

Connection& DevicePath::openSend(int peer, const char* what) {
  if (auto it = sendTo_.find(peer); it != sendTo_.end()) return *it->second;
  requireLink(peer, what);
  std::unique_ptr<Connection> c;
  if (viaIpc(peer)) {
    ConnectHandle h(sizeof(uint16_t));
    std::memcpy(h.data(), &records_[static_cast<size_t>(peer)].ipcPort, h.size());
    c = ipc_->connectSend(peer, h, deadlineFromNow());
  } else {
    c = std::make_unique<StagedSendConnection>(*device_, hostLinks_->openSend(peer, what),
                                               options_.chunkBytes, options_.stagingSlots);
  }
  TIDAL_INFO(Init, "rank {} -> {} (device buffers): {}", rank_, peer, c->describe());
  engine_->addSendConnection(peer, c.get());
  std::lock_guard lock(mutex_);
  return *(sendTo_[peer] = std::move(c));
}

Connection& DevicePath::openRecv(int peer, const char* what) {
  if (auto it = recvFrom_.find(peer); it != recvFrom_.end()) return *it->second;
  requireLink(peer, what);
  std::unique_ptr<Connection> c = viaIpc(peer) ? ipc_->acceptRecv(peer, deadlineFromNow())
                                               : std::make_unique<StagedRecvConnection>(
                                                     *device_, hostLinks_->openRecv(peer, what),
                                                     options_.chunkBytes, options_.stagingSlots);
  TIDAL_INFO(Init, "rank {} <- {} (device buffers): {}", rank_, peer, c->describe());
  engine_->addRecvConnection(peer, c.get());
  std::lock_guard lock(mutex_);
  return *(recvFrom_[peer] = std::move(c));
}

void DevicePath::connect(std::vector<Record> records, const DevicePathConfig& config,
                         StreamEngine::FailureHandler onFailure) {
  records_ = std::move(records);
  EngineOptions options = options_;
  options.busyPoll = false;  // the progress thread is an extra thread: it yields
  engine_ = std::make_unique<Engine>(
      rank_, options,
      std::make_unique<DeviceDataPlane>(
          *device_, options_.chunkBytes * static_cast<size_t>(options_.stagingSlots),
          options_.timeout));
  engine_->setLinkOpener(this);
  // Sends first: a connect and its hello complete in the peer's backlog.
  for (int peer : config.eagerSend) openSend(peer, "init");
  for (int peer : config.eagerRecv) openRecv(peer, "init");
  barrier_ = device_->allocateDevice(static_cast<size_t>(nranks_));
  streams_ =
      std::make_unique<StreamEngine>(rank_, *device_, std::move(onFailure), options_.timeout);
  TIDAL_INFO(Init, "rank {}: device buffers on {}", rank_, device_->describe());
}

void DevicePath::submit(void* stream, const char* what,
                        std::shared_ptr<const coll::Schedule> schedule, const void* sendbuff,
                        void* recvbuff, std::optional<CallCheck> check) {
  streams_->submit(stream, what,
                   [this, schedule = std::move(schedule), sendbuff, recvbuff, what,
                    check](const std::atomic<bool>& aborted) {
                     engine_->run(*schedule, sendbuff, recvbuff, what, &aborted,
                                  check ? &*check : nullptr);
                   });
}

uint64_t DevicePath::scratchBytes() const {
  return engine_ ? static_cast<const DeviceDataPlane&>(engine_->plane()).scratchBytes() : 0;
}

uint64_t DevicePath::releaseScratch() {
  const uint64_t bytes = scratchBytes();
  // Only while idle (the caller waited): the progress thread touches the
  // scratch only inside a run, and the next run grows it back.
  if (engine_) static_cast<DeviceDataPlane&>(engine_->plane()).releaseScratch();
  return bytes;
}

void DevicePath::abortConnections() {
  std::lock_guard lock(mutex_);
  for (auto& [peer, c] : sendTo_) c->abort();
  for (auto& [peer, c] : recvFrom_) c->abort();
}

void DevicePath::abort() {
  streams_->abort();
  if (engine_) engine_->abort();
  if (ipc_) ipc_->abort();
  abortConnections();
}

}  // namespace tidal
