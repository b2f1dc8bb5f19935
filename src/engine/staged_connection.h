// Device buffers over a host transport (tcp, shm; verbs without GPUDirect):
// chunks travel through page-locked host staging slots, pipelined so that
// GPU copies and network transfers overlap.
//
//   send:    device --copy--> pinned slot --host transport--> peer
//   receive: peer --host transport--> pinned slot --copy or kernel--> device
//
// A transfer is cut into pieces of `pieceBytes` (the last one shorter; a
// zero-byte transfer is one empty piece). Both ends cut by the same rule, so
// the host transport sees the same sequence of sizes on both sides, as
// transport.h requires; every rank must therefore use device buffers, and
// the same TIDAL_CHUNK_SIZE (which the schedules already require).
//
// While piece k is on the wire, piece k+1 is being copied off the GPU (and
// on the receiving side piece k-1 is being copied onto it): with `slots`
// slots up to that many pieces are in flight per connection. A receive that
// reduces runs the reduction kernel straight on the pinned slot (the GPU
// reads page-locked memory directly), with no extra copy.
//
// Both adapters honour device_data_plane.h's contract: their writes into device
// memory and their reads of it are on the engine stream, and a transfer
// completes when its GPU work has finished. They do not own the host
// connection; abort() and the poll descriptors are the host connection's.
#pragma once

#include <deque>
#include <string>

#include "cuda/device_api.h"
#include "transports/transport.h"

namespace tidal {

// A connection's pinned staging: `slots` slots of `pieceBytes`, handed out
// and taken back in any order.
class PinnedSlots {
 public:
  PinnedSlots(DeviceApi& device, size_t pieceBytes, int slots);
  bool empty() const { return free_.empty(); }
  int take();
  void give(int slot) { free_.push_back(slot); }
  // Slot -1 (an empty piece) is the start of the memory: never read or written.
  char* address(int slot) const {
    return memory_.data() + static_cast<size_t>(slot < 0 ? 0 : slot) * pieceBytes_;
  }
  std::string describe() const;

 private:
  size_t pieceBytes_;
  int slots_;
  OwnedMemory memory_;
  std::vector<int> free_;
};

class StagedSendConnection final : public Connection {
 public:
  StagedSendConnection(DeviceApi& device, Connection& host, size_t pieceBytes, int slots);

  int peer() const override { return host_.peer(); }
  void post(void* data, size_t bytes) override;
  bool progress() override;
  uint64_t completed() const override { return completed_; }
  uint64_t posted() const override { return posted_; }
  void addPollFds(std::vector<pollfd>& fds) const override { host_.addPollFds(fds); }
  void abort() override { host_.abort(); }
  std::string describe() const override;

 private:
  struct Transfer {
    const char* data;
    size_t bytes;
    size_t staged = 0;  // bytes whose copy off the GPU is enqueued
    size_t pieces;      // not yet retired
    bool emptyStaged = false;
  };
  struct Piece {
    int slot;
    size_t bytes;
    uint64_t marker;  // the copy into the slot
    bool posted = false;
    uint64_t hostSeq = 0;
  };

  DeviceApi& device_;
  Connection& host_;
  size_t pieceBytes_;
  PinnedSlots slots_;
  std::deque<Transfer> transfers_;  // not yet completed, in order
  size_t nextToStage_ = 0;          // index into transfers_
  std::deque<Piece> pieces_;        // staged, in order
  uint64_t posted_ = 0;
  uint64_t completed_ = 0;
};

class StagedRecvConnection final : public Connection {
 public:
  StagedRecvConnection(DeviceApi& device, Connection& host, size_t pieceBytes, int slots);

  int peer() const override { return host_.peer(); }
  void post(void* data, size_t bytes) override;
  bool canReduceOnArrival() const override { return true; }
  void postReduce(void* dst, const void* local, size_t bytes,
                  const ArrivalReducer& reducer) override;
  bool progress() override;
  uint64_t completed() const override { return completed_; }
  uint64_t posted() const override { return posted_; }
  void addPollFds(std::vector<pollfd>& fds) const override { host_.addPollFds(fds); }
  void abort() override { host_.abort(); }
  std::string describe() const override;

 private:
  struct Transfer {
    char* dst;
    const char* local;
    const ArrivalReducer* reducer;
    size_t bytes;
    size_t requested = 0;  // bytes whose pieces are posted on the host connection
    size_t pieces;         // not yet retired
    bool emptyRequested = false;
  };
  struct Piece {
    int slot;
    size_t bytes;
    char* dst;
    const char* local;
    const ArrivalReducer* reducer;
    uint64_t hostSeq;
    bool landed = false;  // its copy / reduction is enqueued
    uint64_t marker = 0;
  };

  // Enqueues the copies (or reductions) of the pieces the host connection
  // has delivered and retires those the GPU has finished; true if any.
  bool land();

  DeviceApi& device_;
  Connection& host_;
  size_t pieceBytes_;
  PinnedSlots slots_;
  std::deque<Transfer> transfers_;
  size_t nextToRequest_ = 0;
  std::deque<Piece> pieces_;
  uint64_t posted_ = 0;
  uint64_t completed_ = 0;
};

// Pieces a transfer of `bytes` is cut into (at least one).
inline size_t stagedPieceCount(size_t bytes, size_t pieceBytes) {
  return bytes == 0 ? 1 : (bytes + pieceBytes - 1) / pieceBytes;
}

}  // namespace tidal
