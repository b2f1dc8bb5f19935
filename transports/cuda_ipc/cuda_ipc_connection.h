// One direction of a cuda_ipc connection: a byte ring in device memory that
// the sender allocated and the receiver mapped (CUDA IPC, or the plain
// pointer when both ranks are threads of one process), plus the loopback TCP
// socket the connection was set up over, which now carries the ring's two
// counters and shows the peer's death as end-of-file.
//
//   sender:   cudaMemcpyAsync(ring, src) on the engine stream; once that copy
//             has finished (a marker), send "head = H" to the receiver
//   receiver: on "head = H", cudaMemcpyAsync(dst, ring) or a reduction kernel
//             straight from the ring (reduce on arrival); once finished, send
//             "tail = T" back, which frees that ring space for the sender
//
// Counters are byte positions in the stream that only grow (64-bit), sent as
// 8-byte records; only the latest matters, so a record the socket cannot take
// now is simply sent later. The receiver reads the sender's bytes only after
// they are complete on the GPU, and the sender overwrites ring space only
// after the receiver's reads of it are complete: both sides wait for their
// own GPU work through markers before they say so.
//
// As in shm, every transfer starts at a 64-byte boundary of the stream (both
// sides skip the same padding, since both know the sizes), and the ring's
// size and publishing step are multiples of 64, so when a receive that
// reduces takes only whole 64-byte multiples short of its end, every piece it
// hands the kernel is whole elements.
//
// Completion (device_run.h's contract): a send completes when its bytes are
// published, a receive when its copies out of the ring have finished.
#pragma once

#include <atomic>
#include <deque>
#include <string>

#include "core/socket.h"
#include "cuda/device_api.h"
#include "transports/transport.h"

namespace tidal::cuda_ipc {

struct RingGeometry {
  uint64_t slots;
  uint64_t slotBytes;
  uint64_t bytes() const { return slots * slotBytes; }
};

class CudaIpcConnection final : public Connection {
 public:
  enum class Direction { Send, Recv };

  // `ring` is this side's view of the ring (owned allocation for the sender,
  // mapping for the receiver). `directAccess`: kernels here can read the ring.
  CudaIpcConnection(int selfRank, int peer, Direction direction, DeviceApi& device, Socket control,
                    OwnedMemory ring, RingGeometry geometry, bool directAccess,
                    std::string description);
  ~CudaIpcConnection() override;

  int peer() const override { return peer_; }
  void post(void* data, size_t bytes) override;
  bool canReduceOnArrival() const override { return direction_ == Direction::Recv && direct_; }
  void postReduce(void* dst, const void* local, size_t bytes,
                  const ArrivalReducer& reducer) override;
  bool progress() override;
  uint64_t completed() const override { return completed_; }
  uint64_t posted() const override { return posted_; }
  void addPollFds(std::vector<pollfd>& fds) const override;
  void abort() override;
  std::string describe() const override { return description_; }

  // Stream alignment of transfer starts (tests).
  static constexpr uint64_t kTransferAlign = 64;

 private:
  struct Piece {
    char* data;  // send: source; receive: destination
    size_t left;
    const char* local = nullptr;  // receives that reduce: the other operand
    const ArrivalReducer* reducer = nullptr;
    bool started = false;
    uint64_t doneAt = 0;  // stream position whose completion completes it
    bool enqueued = false;
  };
  struct InFlight {
    uint64_t end;  // stream position this GPU work completes
    uint64_t marker;
  };

  size_t enqueueSend();
  size_t enqueueRecv();
  // `p` is fully enqueued: it completes when the stream reaches mine_.
  void finishEnqueue(Piece& p);
  // n more bytes of `p` enqueued on the GPU (ring position mine_ .. +n).
  void advance(Piece& p, size_t n);
  // Reads the peer's counter records; notes when the peer is gone.
  void readControl();
  // Tells the peer our counter: now, or later if the socket is full.
  void sendControl(uint64_t value);
  void flushControl();
  bool retire();
  [[noreturn]] void lost(const std::string& why) const;

  int selfRank_;
  int peer_;
  Direction direction_;
  DeviceApi& device_;
  Socket control_;
  OwnedMemory ring_;
  uint64_t capacity_;
  uint64_t step_;
  bool direct_;
  std::string description_;

  std::deque<Piece> queue_;
  size_t nextToEnqueue_ = 0;  // index into queue_
  std::deque<InFlight> inFlight_;
  uint64_t posted_ = 0;
  uint64_t completed_ = 0;
  uint64_t mine_ = 0;      // stream position our enqueued GPU work reaches
  uint64_t finished_ = 0;  // stream position our finished GPU work reaches
  uint64_t theirs_ = 0;    // the peer's latest counter (sender: tail; receiver: head)
  // Our counter to the peer: the newest value, the one being written (a
  // stream socket may take a record in parts) and the last one fully sent.
  uint64_t wanted_ = 0;
  uint64_t inBuffer_ = 0;
  uint64_t sent_ = 0;
  uint8_t outgoing_[8] = {};
  size_t outgoingBytes_ = 0, outgoingSent_ = 0;
  uint8_t partial_[8] = {};  // a record split across reads
  size_t partialBytes_ = 0;
  bool peerClosed_ = false;
  std::string closedWhy_;
  uint64_t bytesMoved_ = 0;
  std::atomic<bool> aborted_{false};
};

}  // namespace tidal::cuda_ipc
