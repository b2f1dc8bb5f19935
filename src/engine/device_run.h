// Runs one rank's schedule on device buffers, on the progress thread.
//
// The same schedules as the host engine (collectives/schedule.h), executed
// with the GPU doing the data work on the engine stream of a DeviceApi:
// prologue copies are cudaMemcpyAsync, reductions of staged receives are our
// kernels, and receives that reduce on arrival (cuda_ipc's ring, pinned
// staging) run the kernel straight on the arrived bytes.
//
// The connections it is given take device pointers: cuda_ipc between ranks
// on one host, or StagedSend/RecvConnection (staged_connection.h) over a
// host transport. Their contract, beyond transport.h's:
//  - every write they make into local memory (a receive's destination) is
//    enqueued on the engine stream, and every read of a send's source too;
//  - completed() counts a transfer once that work has finished on the GPU.
// Because the runner's own work is on the same stream, a device staging slot
// may be reused as soon as its reduction is enqueued: the next write into it
// comes later on the same stream. A run ends when a marker placed after all
// of its work has been reached, so the outputs are complete on the GPU when
// run() returns (and the stream engine releases the caller's stream).
//
// Waiting: GPU completions have no file descriptor, so when nothing moves the
// runner yields for TIDAL_SPIN_US and then sleeps 50 us at a time. No
// movement for TIDAL_TIMEOUT fails with tidalTimeout, naming what it waited
// for; `aborted` ends the run at once.
#pragma once

#include <atomic>
#include <map>
#include <vector>

#include "collectives/schedule.h"
#include "cuda/device_api.h"
#include "engine/engine.h"
#include "transports/transport.h"

namespace tidal {

class DeviceRunner {
 public:
  DeviceRunner(int rank, DeviceApi& device, EngineOptions options);

  void addSendConnection(int peer, Connection* connection) { sendTo_[peer] = connection; }
  void addRecvConnection(int peer, Connection* connection) { recvFrom_[peer] = connection; }

  // Runs `schedule` with device buffers `sendbuff` / `recvbuff`; returns when
  // the results are complete on the GPU.
  void run(const coll::Schedule& schedule, const void* sendbuff, void* recvbuff, const char* what,
           const std::atomic<bool>& aborted);

  DeviceApi& device() const { return device_; }

 private:
  class Run;
  // Combines arriving bytes with a kernel on the engine stream.
  class KernelReducer final : public ArrivalReducer {
   public:
    KernelReducer() = default;
    KernelReducer(DeviceApi* device, tidalDataType_t type, tidalRedOp_t op, int divisor)
        : device_(device), type_(type), op_(op), divisor_(divisor) {}
    void combine(void* dst, const void* local, const void* incoming, size_t bytes) const override;

   private:
    DeviceApi* device_ = nullptr;
    tidalDataType_t type_ = tidalFloat32;
    tidalRedOp_t op_ = tidalSum;
    int divisor_ = 0;
  };
  Connection& connection(const std::map<int, Connection*>& map, int peer, const char* direction,
                         const char* what) const;

  int rank_;
  DeviceApi& device_;
  EngineOptions options_;
  std::map<int, Connection*> sendTo_;
  std::map<int, Connection*> recvFrom_;
  OwnedMemory staging_;  // stagingSlots x chunkBytes of device memory
  OwnedMemory scratch_;  // grown to the largest schedule's scratchBytes
  std::vector<KernelReducer> reducers_;
};

}  // namespace tidal
