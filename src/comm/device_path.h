// The communicator's device-buffer half: its GPU (a DeviceApi), the progress
// thread that runs stream-ordered collectives (StreamEngine), the engine that
// interprets schedules on device buffers (engine.h over a DeviceDataPlane)
// and the connections device buffers travel over.
//
// Which connection serves a peer: cuda_ipc when both ranks are on one host
// and both allow it (TIDAL_CUDA_IPC_DISABLE unset and TIDAL_NET unset on
// both); otherwise the pair's host connection (tcp, shm, ...) with the data
// staged through pinned host memory (staged_connection.h). Like the host
// links, device connections open on first use: the peers the host links
// opened eagerly at init (ring, recursive doubling and hierarchical peers)
// get theirs at init, any other peer when a schedule first names it (this
// object is the device engine's LinkOpener; the host connection under a
// staged one comes from the host links, opened then if need be).
//
// Set-up is collective: one bootstrap allGather tells every rank whether
// every other rank can use CUDA, where it is, and its cuda_ipc listener. If
// any rank cannot, no rank builds a device path, and device buffers are
// refused with the name of a rank that lacks CUDA.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "collectives/schedule.h"
#include "cuda/device_api.h"
#include "cuda/metered_device_api.h"
#include "engine/device_data_plane.h"
#include "engine/engine.h"
#include "engine/stream_engine.h"
#include "transports/transport.h"

namespace tidal {

namespace cuda_ipc {
class CudaIpcTransport;
}

struct DevicePathConfig {
  int rank = 0;
  int nranks = 1;
  Bootstrap* bootstrap = nullptr;  // required when nranks > 1
  std::string hostId;              // localHostIdentity(), or a test's
  // The host links: the connections staged device transfers travel over.
  LinkOpener* hostLinks = nullptr;  // required when nranks > 1
  // Peers whose device connections open at init (the host links' eager set).
  std::vector<int> eagerSend, eagerRecv;
  EngineOptions options{};
  bool ipcAllowed = true;  // this rank's TIDAL_CUDA_IPC_DISABLE / TIDAL_NET
};

class DevicePath final : public LinkOpener {
 public:
  // Collective when nranks > 1: every rank calls it, with `device` null where
  // CUDA is not usable (`unusableReason` says why). Returns null when some
  // rank has no device, with the reason in *unavailable.
  static std::unique_ptr<DevicePath> create(const DevicePathConfig& config,
                                            std::unique_ptr<DeviceApi> device,
                                            const std::string& unusableReason,
                                            StreamEngine::FailureHandler onFailure,
                                            std::string* unavailable);
  ~DevicePath() override;
  DevicePath(const DevicePath&) = delete;
  DevicePath& operator=(const DevicePath&) = delete;

  int device() const { return device_->device(); }
  std::string describe() const { return device_->describe(); }

  // Enqueues `schedule` on device buffers, ordered on `stream`; returns at
  // once. The schedule (and whatever it names by address, such as the
  // values of a group's size messages) is kept until the run ends. `check`,
  // when given, is the call's signature (Engine::run), sent and compared
  // from page-locked host memory when the run starts on the progress thread.
  void submit(void* stream, const char* what, std::shared_ptr<const coll::Schedule> schedule,
              const void* sendbuff, void* recvbuff, std::optional<CallCheck> check);
  // Blocks until every submitted collective has finished (see StreamEngine).
  void waitIdle(const char* what) { streams_->waitIdle(what); }
  bool idle() const { return streams_->finished() == streams_->submitted(); }
  // Device memory allocated for this path and still live (tidalCommMemStats),
  // and the part of it that is the engine's scratch, which releaseScratch()
  // frees while idle (tidalCommSuspend with TIDAL_SUSPEND_MEM).
  uint64_t deviceBytes() const { return metered_->liveDeviceBytes(); }
  uint64_t scratchBytes() const;
  uint64_t releaseScratch();
  // Closes the device connections so peers fail fast (after a failure).
  void abortConnections();
  // tidalCommAbort: stops the progress thread's work and releases streams.
  void abort();

  // Device memory for the stream-ordered Barrier: one byte per rank.
  void* barrierBuffer() const { return barrier_.data(); }

  // LinkOpener, on the progress thread: the device connection to `peer`.
  Connection& openSend(int peer, const char* what) override;
  Connection& openRecv(int peer, const char* what) override;

 private:
  DevicePath(const DevicePathConfig& config, std::unique_ptr<DeviceApi> device);
  struct Record;
  void connect(std::vector<Record> records, const DevicePathConfig& config,
               StreamEngine::FailureHandler onFailure);
  bool viaIpc(int peer) const;
  // Throws InternalError when a schedule names a peer this path cannot reach.
  void requireLink(int peer, const char* what) const;

  int rank_;
  int nranks_;
  EngineOptions options_;
  // The communicator's host links (they outlive this object).
  LinkOpener* hostLinks_;
  std::vector<Record> records_;
  // Declaration order is teardown order reversed: the progress thread stops
  // first, then the engine and connections go, the device last.
  // The device behind a meter that counts its allocations (device_ owns it).
  MeteredDeviceApi* metered_;
  std::unique_ptr<DeviceApi> device_;
  std::unique_ptr<cuda_ipc::CudaIpcTransport> ipc_;
  // Guards the maps' shape: connections open on the progress thread while
  // abortConnections() may close them from another.
  std::mutex mutex_;
  std::map<int, std::unique_ptr<Connection>> sendTo_;
  std::map<int, std::unique_ptr<Connection>> recvFrom_;
  std::unique_ptr<Engine> engine_;
  OwnedMemory barrier_;
  std::unique_ptr<StreamEngine> streams_;
};

}  // namespace tidal
