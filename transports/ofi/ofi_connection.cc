#include "transports/ofi/ofi_connection.h"

#include <algorithm>
#include <vector>

#include "core/error.h"

namespace tidal::ofi {

OfiConnection::OfiConnection(Endpoint& endpoint, int selfRank, int peer, Direction direction,
                             fi_addr_t peerAddress, std::string description)
    : endpoint_(endpoint),
      selfRank_(selfRank),
      peer_(peer),
      direction_(direction),
      peerAddress_(peerAddress),
      description_(std::move(description)) {}

OfiConnection::~OfiConnection() {
  {
    const auto lock = endpoint_.lock();
    endpoint_.transfersClosed(chunksLeft_.size());
  }
  // Cancel what is still posted: the provider must not write into a receive
  // buffer, nor complete into this object, after it is gone.
  endpoint_.forget(inFlight_);
}

uint64_t OfiConnection::tagOf(uint64_t seq) const {
  const int sender = direction_ == Direction::Send ? selfRank_ : peer_;
  const uint64_t mask = (uint64_t{1} << kSeqBits) - 1;
  return (static_cast<uint64_t>(sender) << kSeqBits) | (seq & mask);
}

void OfiConnection::post(void* data, size_t bytes) {
  const uint64_t transfer = posted_++;
  const size_t chunk = std::min(endpoint_.maxMessageBytes(), kMaxChunkBytes);
  char* p = static_cast<char*>(data);
  uint32_t chunks = 0;
  for (size_t off = 0; off < bytes; off += chunk) {
    waiting_.push_back({p + off, std::min(chunk, bytes - off), transfer, nextSeq_++});
    ++chunks;
  }
  const auto lock = endpoint_.lock();
  endpoint_.transferOpened();
  chunksLeft_.push_back(chunks);
  // Zero-byte transfers complete at once (no message travels), but only in
  // order.
  uint64_t done = completed_.load(std::memory_order_relaxed);
  while (!chunksLeft_.empty() && chunksLeft_.front() == 0) {
    chunksLeft_.pop_front();
    endpoint_.transfersClosed(1);
    ++done;
  }
  completed_.store(done, std::memory_order_release);
}

void OfiConnection::chunkDone(uint64_t transfer) {
  uint64_t done = completed_.load(std::memory_order_relaxed);
  --chunksLeft_[transfer - done];
  while (!chunksLeft_.empty() && chunksLeft_.front() == 0) {
    chunksLeft_.pop_front();
    endpoint_.transfersClosed(1);
    ++done;
  }
  completed_.store(done, std::memory_order_release);
}

void OfiConnection::onStarted(Operation& op) {
  inFlight_.insert(&op);
  inFlightCount_.store(inFlight_.size(), std::memory_order_relaxed);
}

void OfiConnection::onComplete(const Operation& op, size_t bytes) {
  inFlight_.erase(const_cast<Operation*>(&op));
  inFlightCount_.store(inFlight_.size(), std::memory_order_relaxed);
  if (op.recv && bytes != op.bytes && failure_.empty()) {
    failure_ = fmt::format(
        "a chunk of {} bytes arrived where {} were expected (the ranks disagree on the "
        "sequence of transfers)",
        bytes, op.bytes);
  }
  bytesMoved_ += bytes;
  chunkDone(op.transfer);
}

void OfiConnection::onError(const Operation& op, const std::string& why) {
  inFlight_.erase(const_cast<Operation*>(&op));
  inFlightCount_.store(inFlight_.size(), std::memory_order_relaxed);
  if (failure_.empty()) failure_ = why;
}

void OfiConnection::throwIfBroken() const {
  const char* way = direction_ == Direction::Send ? "connection to" : "connection from";
  if (aborted_.load(std::memory_order_relaxed)) {
    fail(tidalRemoteError, "rank {}: ofi {} rank {} was aborted", selfRank_, way, peer_);
  }
  std::string failure;
  uint64_t moved = 0;
  {
    const auto lock = endpoint_.lock();
    failure = failure_;
    moved = bytesMoved_;
  }
  if (!failure.empty()) {
    fail(tidalRemoteError,
         "rank {}: {} rank {} lost ({}): {} after {} bytes; the peer process exited, aborted "
         "or its host is unreachable",
         selfRank_, way, peer_, description_, failure, moved);
  }
}

bool OfiConnection::progress() {
  throwIfBroken();
  const uint64_t before = completed();
  bool moved = endpoint_.poll() > 0;
  while (!waiting_.empty()) {
    const Chunk& c = waiting_.front();
    Operation* op =
        direction_ == Direction::Send
            ? endpoint_.startSend(*this, c.data, c.bytes, peer_, peerAddress_, tagOf(c.seq),
                                  c.transfer)
            : endpoint_.startRecv(*this, c.data, c.bytes, peer_, tagOf(c.seq), c.transfer);
    if (op == nullptr) break;
    waiting_.pop_front();
    moved = true;
  }
  throwIfBroken();
  return moved || completed() != before;
}

void OfiConnection::addPollFds(std::vector<pollfd>& fds) const {
  if (waiting_.empty() && inFlightCount_.load(std::memory_order_relaxed) == 0) return;
  fds.push_back({endpoint_.waitFd(), POLLIN, 0});
}

void OfiConnection::abort() { aborted_ = true; }

}  // namespace tidal::ofi
