// TidalBackend: torch.distributed's collectives over one Tidal communicator.
//
// This class holds everything that does not depend on which torch base class
// the backend is registered as (c10d::ProcessGroup in torch 1.x,
// c10d::Backend in 2.x): its methods have c10d's names and arguments, and
// the version file (process_group_v1.cc) only forwards to them.
//
//  - Rendezvous: rank 0 makes a unique id and puts it in the c10d Store torch
//    hands the backend (a PrefixStore per group, so every group has its own
//    key); the others read it, and all call tidalCommInitRank.
//  - Timeout: the group's timeout bounds every wait of the communicator
//    (Tidal's TIDAL_TIMEOUT, applied per communicator); a TIDAL_TIMEOUT set
//    in the environment wins.
//  - Collectives run on the backend's own thread in issue order (WorkQueue);
//    each method checks its arguments, makes contiguous buffers where the
//    caller's are not, and returns a TidalWork at once.
//  - send/recv use one extra two-rank communicator and thread per direction
//    and peer (P2PChannels), so that a rank can send and receive at once
//    in any order, as torch's isend/irecv allow.
#pragma once

#include <ATen/ATen.h>
#include <tidal/tidal.h>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "work.h"

namespace tidal_torch {

using WorkPtr = c10::intrusive_ptr<c10d::Work>;
using TensorList = std::vector<at::Tensor>;

// A communicator that is destroyed with its owner.
class Comm {
 public:
  Comm() = default;
  explicit Comm(tidalComm_t comm) : comm_(comm) {}
  ~Comm();
  Comm(Comm&& other) noexcept : comm_(other.comm_) { other.comm_ = nullptr; }
  Comm& operator=(Comm&& other) noexcept;
  tidalComm_t get() const { return comm_; }

 private:
  tidalComm_t comm_ = nullptr;
};

// Creates a communicator of size ranks through store: rank 0 puts a fresh
// unique id under key, the others wait for it (the store's own timeout bounds
// that). timeout: the communicator's TIDAL_TIMEOUT.
Comm rendezvous(const c10::intrusive_ptr<c10d::Store>& store, const std::string& key, int rank,
                int size, std::chrono::milliseconds timeout);

// Throws a RuntimeError naming call, the result and Tidal's text for comm.
void checkTidal(tidalResult_t result, tidalComm_t comm, const char* call);

class P2PChannels;

class TidalBackend {
 public:
  TidalBackend(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
               std::chrono::milliseconds timeout);
  ~TidalBackend();

  int rank() const { return rank_; }
  int size() const { return size_; }

  WorkPtr broadcast(TensorList& tensors, const c10d::BroadcastOptions& opts);
  WorkPtr allreduce(TensorList& tensors, const c10d::AllreduceOptions& opts);
  WorkPtr allreduce_coalesced(TensorList& tensors, const c10d::AllreduceCoalescedOptions& opts);
  WorkPtr reduce(TensorList& tensors, const c10d::ReduceOptions& opts);
  WorkPtr allgather(std::vector<TensorList>& outputs, TensorList& inputs,
                    const c10d::AllgatherOptions& opts);
  WorkPtr _allgather_base(at::Tensor& output, at::Tensor& input,
                          const c10d::AllgatherOptions& opts);
  WorkPtr allgather_coalesced(std::vector<TensorList>& outputLists, TensorList& inputs,
                              const c10d::AllgatherOptions& opts);
  WorkPtr gather(std::vector<TensorList>& outputs, TensorList& inputs,
                 const c10d::GatherOptions& opts);
  WorkPtr scatter(TensorList& outputs, std::vector<TensorList>& inputs,
                  const c10d::ScatterOptions& opts);
  WorkPtr reduce_scatter(TensorList& outputs, std::vector<TensorList>& inputs,
                         const c10d::ReduceScatterOptions& opts);
  WorkPtr _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                               const c10d::ReduceScatterOptions& opts);
  WorkPtr alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& outputSplits,
                        std::vector<int64_t>& inputSplits, const c10d::AllToAllOptions& opts);
  WorkPtr alltoall(TensorList& outputs, TensorList& inputs, const c10d::AllToAllOptions& opts);
  WorkPtr send(TensorList& tensors, int dstRank, int tag);
  WorkPtr recv(TensorList& tensors, int srcRank, int tag);
  WorkPtr recvAnysource(TensorList& tensors, int tag);
  WorkPtr barrier(const c10d::BarrierOptions& opts);

 private:
  using Run = std::function<void(tidalComm_t)>;
  // Queues run on the backend's thread; outputs are the Work's result.
  WorkPtr enqueue(c10d::OpType type, const char* what, TensorList outputs, Run run);
  void checkRoot(int64_t root, const char* what) const;

  const int rank_;
  const int size_;
  const std::chrono::milliseconds timeout_;
  c10::intrusive_ptr<c10d::Store> store_;
  Comm comm_;
  std::unique_ptr<P2PChannels> p2p_;
  // Last member: destroyed first, so its thread ends before the communicator.
  std::unique_ptr<WorkQueue> queue_;
};

}  // namespace tidal_torch
