#include "transports/cuda_ipc/cuda_ipc_connection.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/log.h"

namespace tidal::cuda_ipc {

namespace {
uint64_t alignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
constexpr auto kTeardownDrain = std::chrono::seconds(5);
}  // namespace

CudaIpcConnection::CudaIpcConnection(int selfRank, int peer, Direction direction, DeviceApi& device,
                                     Socket control, OwnedMemory ring, RingGeometry geometry,
                                     bool directAccess, std::string description)
    : selfRank_(selfRank),
      peer_(peer),
      direction_(direction),
      device_(device),
      control_(std::move(control)),
      ring_(std::move(ring)),
      capacity_(geometry.bytes()),
      step_(geometry.slotBytes),
      direct_(directAccess),
      description_(std::move(description)) {}

CudaIpcConnection::~CudaIpcConnection() {
  // Copies into or out of the ring may still run (after an error): the ring
  // must outlive them.
  if (!inFlight_.empty()) device_.drain(kTeardownDrain);
  // A send completes once its bytes are published, not once the receiver
  // has copied them out, and the ring is this side's memory: freeing it
  // while the receiver still reads it (a rank that destroys its
  // communicator right after a Send) would hand the receiver freed memory.
  // So wait, bounded, until the receiver's tail has caught up with what we
  // published, or it has closed its end, unless we were aborted.
  if (direction_ != Direction::Send || aborted_.load()) return;
  const auto giveUp = Clock::now() + kTeardownDrain;
  readControl();
  while (theirs_ < sent_ && !peerClosed_) {
    if (Clock::now() > giveUp) {
      TIDAL_WARN(Net,
                 "rank {}: cuda_ipc connection to rank {} closes with {} published bytes the "
                 "receiver has not taken after {} s",
                 selfRank_, peer_, sent_ - theirs_, kTeardownDrain.count());
      return;
    }
    pollfd p{control_.fd(), POLLIN, 0};
    ::poll(&p, 1, 10);
    readControl();
  }
}

void CudaIpcConnection::post(void* data, size_t bytes) {
  ++posted_;
  queue_.push_back({static_cast<char*>(data), bytes});
}

void CudaIpcConnection::postReduce(void* dst, const void* local, size_t bytes,
                                   const ArrivalReducer& reducer) {
  ++posted_;
  queue_.push_back({static_cast<char*>(dst), bytes, static_cast<const char*>(local), &reducer});
}

void CudaIpcConnection::finishEnqueue(Piece& p) {
  p.doneAt = mine_;
  p.started = p.enqueued = true;
  ++nextToEnqueue_;
}

void CudaIpcConnection::advance(Piece& p, size_t n) {
  mine_ += n;
  p.data += n;
  p.left -= n;
  inFlight_.push_back({mine_, device_.mark()});  // this piece's GPU work ends here
  if (p.left == 0) finishEnqueue(p);
}

size_t CudaIpcConnection::enqueueSend() {
  size_t moved = 0;
  while (nextToEnqueue_ < queue_.size()) {
    Piece& p = queue_[nextToEnqueue_];
    if (!p.started) {
      if (p.left == 0) {  // takes no stream position: done once what precedes it is
        finishEnqueue(p);
        continue;
      }
      const uint64_t start = alignUp(mine_, kTransferAlign);
      if (start - theirs_ >= capacity_) break;  // the padding must fit like data
      mine_ = start;
      p.started = true;
    }
    const uint64_t space = capacity_ - (mine_ - theirs_);
    if (space == 0) break;
    const uint64_t offset = mine_ % capacity_;
    const size_t n = std::min({static_cast<uint64_t>(p.left), space, capacity_ - offset, step_});
    device_.copy(ring_.data() + offset, p.data, n);
    advance(p, n);
    moved += n;
  }
  return moved;
}

size_t CudaIpcConnection::enqueueRecv() {
  size_t moved = 0;
  while (nextToEnqueue_ < queue_.size()) {
    Piece& p = queue_[nextToEnqueue_];
    if (!p.started) {
      if (p.left == 0) {
        finishEnqueue(p);
        continue;
      }
      const uint64_t start = alignUp(mine_, kTransferAlign);
      if (theirs_ <= start) break;  // no byte of this transfer has arrived
      mine_ = start;
      p.started = true;
    }
    // A reduction takes whole 64-byte multiples short of the transfer's end,
    // so every piece it gets is whole elements (see the header).
    const uint64_t need = p.reducer ? std::min<uint64_t>(p.left, kTransferAlign) : 1;
    const uint64_t filled = theirs_ > mine_ ? theirs_ - mine_ : 0;
    if (filled < need) break;
    const uint64_t offset = mine_ % capacity_;
    size_t n = std::min({static_cast<uint64_t>(p.left), filled, capacity_ - offset, step_});
    const char* incoming = ring_.data() + offset;
    if (p.reducer) {
      if (n < p.left) n -= n % kTransferAlign;
      p.reducer->combine(p.data, p.local, incoming, n);
      p.local += n;
    } else {
      device_.copy(p.data, incoming, n);
    }
    advance(p, n);
    moved += n;
  }
  return moved;
}

void CudaIpcConnection::readControl() {
  if (peerClosed_) return;
  uint8_t buffer[512];
  for (;;) {
    const ssize_t n = ::recv(control_.fd(), buffer, sizeof buffer, MSG_DONTWAIT);
    if (n > 0) {
      for (ssize_t i = 0; i < n; ++i) {
        partial_[partialBytes_++] = buffer[i];
        if (partialBytes_ == sizeof partial_) {
          uint64_t value;
          std::memcpy(&value, partial_, sizeof value);
          theirs_ = std::max(theirs_, value);
          partialBytes_ = 0;
        }
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    // End of file or a reset: the peer is gone. What it published before is
    // still usable (its ring stays mapped); progress() decides whether the
    // rest of our work needed it.
    peerClosed_ = true;
    closedWhy_ = n == 0 ? "the peer closed its end" : errnoText(errno);
    return;
  }
}

void CudaIpcConnection::sendControl(uint64_t value) {
  wanted_ = std::max(wanted_, value);
  flushControl();
}

void CudaIpcConnection::flushControl() {
  while (!peerClosed_) {
    if (outgoingBytes_ == 0) {
      // Only the newest counter matters: whatever was not sent yet is replaced.
      if (wanted_ <= sent_) return;
      std::memcpy(outgoing_, &wanted_, sizeof wanted_);
      outgoingBytes_ = sizeof wanted_;
      outgoingSent_ = 0;
      inBuffer_ = wanted_;
    }
    const ssize_t n = ::send(control_.fd(), outgoing_ + outgoingSent_,
                             outgoingBytes_ - outgoingSent_, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      outgoingSent_ += static_cast<size_t>(n);
      if (outgoingSent_ == outgoingBytes_) {
        sent_ = inBuffer_;
        outgoingBytes_ = 0;
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    peerClosed_ = true;
    closedWhy_ = errnoText(errno);
  }
}

bool CudaIpcConnection::retire() {
  bool any = false;
  while (!inFlight_.empty() && device_.reached(inFlight_.front().marker)) {
    finished_ = inFlight_.front().end;
    inFlight_.pop_front();
    any = true;
  }
  if (finished_ > wanted_) sendControl(finished_);
  // Sends complete once the receiver has been told; receives once their
  // copies out of the ring have finished.
  const uint64_t done = direction_ == Direction::Send ? sent_ : finished_;
  while (!queue_.empty() && queue_.front().enqueued && done >= queue_.front().doneAt) {
    queue_.pop_front();
    --nextToEnqueue_;
    ++completed_;
    any = true;
  }
  return any;
}

bool CudaIpcConnection::progress() {
  if (aborted_.load(std::memory_order_relaxed)) {
    fail(tidalRemoteError, "rank {}: cuda_ipc connection {} rank {} was aborted", selfRank_,
         direction_ == Direction::Send ? "to" : "from", peer_);
  }
  if (queue_.empty() && inFlight_.empty() && outgoingBytes_ == 0 && wanted_ <= sent_) return false;
  readControl();
  flushControl();
  const size_t moved = direction_ == Direction::Send ? enqueueSend() : enqueueRecv();
  bytesMoved_ += moved;
  const bool any = retire() || moved > 0;
  if (peerClosed_ && !any) {
    // Waiting on our own GPU work is not waiting on the peer; waiting for
    // its data, its ring space or to tell it our counter is.
    const bool needsPeer = nextToEnqueue_ < queue_.size() ||
                           (direction_ == Direction::Send && inFlight_.empty() && !queue_.empty());
    if (needsPeer) lost(closedWhy_);
  }
  return any;
}

void CudaIpcConnection::lost(const std::string& why) const {
  fail(tidalRemoteError,
       "rank {}: cuda_ipc connection {} rank {} lost ({}): {} after {} bytes with {} of {} "
       "transfers unfinished; the peer process exited, was killed or aborted",
       selfRank_, direction_ == Direction::Send ? "to" : "from", peer_, description_, why,
       bytesMoved_, posted_ - completed_, posted_);
}

void CudaIpcConnection::addPollFds(std::vector<pollfd>& fds) const {
  if (queue_.empty() && inFlight_.empty()) return;
  fds.push_back({control_.fd(), POLLIN, 0});
}

void CudaIpcConnection::abort() {
  aborted_ = true;
  control_.shutdownBoth();
}

}  // namespace tidal::cuda_ipc
