// One direction of an ofi link to a peer: tagged messages on the rank's one
// RDM endpoint (ofi_endpoint.h).
//
// RDM endpoints promise no order between messages unless the provider says
// so (EFA gives send-after-send only, and rxd retransmits over a lossy
// network), so nothing here relies on arrival order. A transfer is cut into
// chunks of at most the provider's max_msg_size (and kMaxChunkBytes), and
// every chunk travels as a tagged message whose tag is (sender rank,
// sequence number of the chunk on this connection). Sender and receiver cut
// the same sequence of sizes the same way, so each receive matches exactly
// its own chunk whatever order the provider delivers them in; completions
// are then counted back into post order.
#pragma once

#include <rdma/fabric.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <set>
#include <string>

#include "transports/ofi/ofi_endpoint.h"
#include "transports/transport.h"

namespace tidal::ofi {

class OfiConnection final : public Connection, private CompletionSink {
 public:
  enum class Direction { Send, Recv };
  // Tags: rank in the bits above kSeqBits, the chunk's sequence below.
  static constexpr int kSeqBits = 40;
  static constexpr int kMaxRanks = 1 << 20;
  static constexpr size_t kMaxChunkBytes = size_t{4} << 20;

  // `peerAddress` is the peer in the endpoint's address vector (sends);
  // receives match on the tag alone.
  OfiConnection(Endpoint& endpoint, int selfRank, int peer, Direction direction,
                fi_addr_t peerAddress, std::string description);
  ~OfiConnection() override;

  int peer() const override { return peer_; }
  void post(void* data, size_t bytes) override;
  bool progress() override;
  uint64_t completed() const override { return completed_.load(std::memory_order_acquire); }
  uint64_t posted() const override { return posted_; }
  void addPollFds(std::vector<pollfd>& fds) const override;
  void abort() override;
  std::string describe() const override { return description_; }

 private:
  struct Chunk {
    char* data;
    size_t bytes;
    uint64_t transfer;
    uint64_t seq;
  };

  void onStarted(Operation& op) override;
  void onComplete(const Operation& op, size_t bytes) override;
  void onError(const Operation& op, const std::string& why) override;
  void chunkDone(uint64_t transfer);
  void throwIfBroken() const;
  uint64_t tagOf(uint64_t seq) const;

  Endpoint& endpoint_;
  int selfRank_;
  int peer_;
  Direction direction_;
  fi_addr_t peerAddress_;
  std::string description_;
  uint64_t posted_ = 0;
  std::atomic<uint64_t> completed_{0};
  uint64_t nextSeq_ = 0;
  // Chunks not yet handed to the provider (its queues were full).
  std::deque<Chunk> waiting_;
  // Guarded by the endpoint's mutex (completions may be read by another
  // connection's progress()).
  std::set<Operation*> inFlight_;
  // chunksLeft_[i] counts unfinished chunks of transfer completed_ + i.
  std::deque<uint32_t> chunksLeft_;
  uint64_t bytesMoved_ = 0;
  std::string failure_;                   // set by onError, thrown by the next progress()
  std::atomic<size_t> inFlightCount_{0};  // inFlight_.size(), for addPollFds
  std::atomic<bool> aborted_{false};
};

}  // namespace tidal::ofi
