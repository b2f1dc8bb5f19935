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
      hostSend_(config.hostSend),
      hostRecv_(config.hostRecv),
      device_(std::move(device)) {}

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
  path->connect(records, std::move(onFailure));
  return path;
}

void DevicePath::connect(const std::vector<Record>& records,
                         StreamEngine::FailureHandler onFailure) {
  runner_ = std::make_unique<DeviceRunner>(rank_, *device_, options_);
  const Record& mine = records[static_cast<size_t>(rank_)];
  auto viaIpc = [&](int peer) {
    const Record& theirs = records[static_cast<size_t>(peer)];
    return mine.ipc && theirs.ipc && std::strncmp(mine.hostId, theirs.hostId, kMaxHostIdBytes) == 0;
  };
  auto ipcHandle = [&](int peer) {
    ConnectHandle h(sizeof(uint16_t));
    std::memcpy(h.data(), &records[static_cast<size_t>(peer)].ipcPort, h.size());
    return h;
  };
  const std::map<int, std::unique_ptr<Connection>> kNone;  // one rank: no peers
  const Deadline deadline = deadlineFromNow();
  // Sends first: a connect and its hello complete in the peer's backlog.
  for (const auto& [peer, host] : hostSend_ ? *hostSend_ : kNone) {
    std::unique_ptr<Connection> c =
        viaIpc(peer) ? ipc_->connectSend(peer, ipcHandle(peer), deadline)
                     : std::make_unique<StagedSendConnection>(*device_, *host, options_.chunkBytes,
                                                              options_.stagingSlots);
    TIDAL_INFO(Init, "rank {} -> {} (device buffers): {}", rank_, peer, c->describe());
    runner_->addSendConnection(peer, c.get());
    sendTo_[peer] = std::move(c);
  }
  for (const auto& [peer, host] : hostRecv_ ? *hostRecv_ : kNone) {
    std::unique_ptr<Connection> c =
        viaIpc(peer) ? ipc_->acceptRecv(peer, deadline)
                     : std::make_unique<StagedRecvConnection>(*device_, *host, options_.chunkBytes,
                                                              options_.stagingSlots);
    TIDAL_INFO(Init, "rank {} <- {} (device buffers): {}", rank_, peer, c->describe());
    runner_->addRecvConnection(peer, c.get());
    recvFrom_[peer] = std::move(c);
  }
  barrier_ = device_->allocateDevice(static_cast<size_t>(nranks_));
  streams_ =
      std::make_unique<StreamEngine>(rank_, *device_, std::move(onFailure), options_.timeout);
  TIDAL_INFO(Init, "rank {}: device buffers on {}", rank_, device_->describe());
}

void DevicePath::submit(void* stream, const char* what, const coll::Schedule& schedule,
                        const void* sendbuff, void* recvbuff) {
  streams_->submit(stream, what,
                   [this, schedule, sendbuff, recvbuff, what](const std::atomic<bool>& aborted) {
                     runner_->run(schedule, sendbuff, recvbuff, what, aborted);
                   });
}

void DevicePath::abortConnections() {
  for (auto& [peer, c] : sendTo_) c->abort();
  for (auto& [peer, c] : recvFrom_) c->abort();
}

void DevicePath::abort() {
  streams_->abort();
  if (ipc_) ipc_->abort();
  abortConnections();
}

}  // namespace tidal
