#include "transports/shm/shm_connection.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace tidal::shm {

namespace {
// How often a connection that waits checks whether its peer is still there.
// The check is one recv(MSG_PEEK) system call; after a sleep it runs at once.
constexpr auto kPeerCheckInterval = std::chrono::milliseconds(1);
constexpr unsigned kIdleCallsPerClockRead = 64;
// A reduce reads pulled bytes through a bounce buffer this big: small enough
// to stay in L2 between the read and the reduction, large enough that the
// system call is a small part of the copy.
constexpr size_t kBounceBytes = 64 * 1024;
// A plain pull reads at most this much per system call, and a receiver pulls
// at most a ring's worth per progress() call, so that other connections get
// their turn.
constexpr size_t kPullStepBytes = 1 << 20;
}  // namespace

ShmConnection::ShmConnection(int selfRank, int peer, Direction direction, Parts parts,
                             std::string description)
    : selfRank_(selfRank),
      peer_(peer),
      direction_(direction),
      parts_(std::move(parts)),
      control_(reinterpret_cast<RingControl*>(parts_.segment.data())),
      packets_(parts_.segment.data() + kControlBytes),
      ring_(packets_ + kPacketAreaBytes),
      capacity_(control_->slots * control_->slotBytes),
      step_(control_->slotBytes),
      pullMinBytes_(control_->pullMinBytes),
      payloadPullMinBytes_(control_->payloadPullMinBytes),
      description_(std::move(description)) {
  // A connection starts on a fresh segment; the counters start where the
  // segment says (zero), whichever side we are.
  mine_ = direction_ == Direction::Send ? control_->head.load() : control_->tail.load();
  theirs_ = direction_ == Direction::Send ? control_->tail.load() : control_->head.load();
  if (direction_ == Direction::Recv) probePull();
}

ShmConnection::~ShmConnection() {
  if (direction_ == Direction::Send) control_->senderGone.store(1);
}

void ShmConnection::probePull() {
  uint32_t state = kPullNo;
  std::string how;
  if (pullMinBytes_ == 0 && payloadPullMinBytes_ == 0) {
    how =
        "copies through the ring (the sender set TIDAL_SHM_PULL_BYTES=0 and "
        "TIDAL_SHM_P2P_PULL_BYTES=0)";
  } else if (!parts_.mayPull) {
    how = "copies through the ring (TIDAL_SHM_PULL_BYTES=0 and TIDAL_SHM_P2P_PULL_BYTES=0 here)";
  } else {
    uint64_t seen = 0;
    iovec local{&seen, sizeof seen};
    iovec remote{reinterpret_cast<void*>(static_cast<uintptr_t>(control_->probeAddress)),
                 sizeof seen};
    const ssize_t n =
        parts_.peerPid > 0 ? ::process_vm_readv(parts_.peerPid, &local, 1, &remote, 1, 0) : -1;
    if (n == static_cast<ssize_t>(sizeof seen) && seen == control_->probeValue) {
      state = kPullYes;
      how = pullMinBytes_ != 0
                ? fmt::format("pulls transfers of {} bytes and more from the sender's memory",
                              pullMinBytes_)
                : fmt::format(
                      "pulls Send/Recv pieces of {} bytes and more (of messages below 2 MiB) "
                      "and AllToAll pieces of that size from the sender's memory",
                      payloadPullMinBytes_);
    } else {
      how = fmt::format(
          "copies through the ring (reading the sender's memory, pid {}, {}: single-copy "
          "pulls need process_vm_readv between the ranks)",
          parts_.peerPid, n < 0 ? errnoText(errno) : std::string("gave other bytes"));
    }
  }
  control_->pullAllowed.store(state, std::memory_order_release);
  description_ += "; " + how;
}

void ShmConnection::post(void* data, size_t bytes) {
  Piece p{static_cast<char*>(data), bytes};
  p.framed = framed(bytes);
  enqueue(p);
}

void ShmConnection::postPayload(void* data, size_t bytes, bool singleCopy) {
  Piece p{static_cast<char*>(data), bytes};
  // Framed by size on both sides; pulled at the sender's choice (its header
  // says which), or as any transfer past TIDAL_SHM_PULL_BYTES.
  p.framed = payloadFramed(bytes);
  p.pullWanted = singleCopy || framed(bytes);
  enqueue(p);
}

void ShmConnection::postReduce(void* dst, const void* local, size_t bytes,
                               const ArrivalReducer& reducer) {
  Piece p{static_cast<char*>(dst), bytes, static_cast<const char*>(local), &reducer};
  p.framed = framed(bytes);
  enqueue(p);
}

void ShmConnection::enqueue(Piece p) {
  ++posted_;
  p.packet = isPacket(p);
  queue_.push_back(p);
  popFinished();  // zero-byte transfers complete at once, but only in order
}

void ShmConnection::popFinished() {
  while (!queue_.empty() && queue_.front().left == 0) {
    queue_.pop_front();
    if (written_ > 0) --written_;
    ++completed_;
  }
}

namespace {
uint64_t alignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
}  // namespace

size_t ShmConnection::retirePulled() {
  size_t retired = 0;
  uint64_t done = 0;
  bool loaded = false;
  for (size_t i = 0; i < written_; ++i) {
    Piece& p = queue_[i];
    if (!p.pulling) continue;  // written to the ring: done
    if (!loaded) {
      done = control_->pullsDone.load(std::memory_order_acquire);
      loaded = true;
    }
    if (p.number > done) break;
    retired += p.left;
    p.data += p.left;
    p.left = 0;
    p.pulling = false;
  }
  if (retired > 0) popFinished();
  return retired;
}

void ShmConnection::writeHeader(Piece& p) {
  const bool pull =
      p.pullWanted && control_->pullAllowed.load(std::memory_order_acquire) == kPullYes;
  TransferHeader h{};
  h.mode = pull ? TransferHeader::kPull : TransferHeader::kInline;
  h.address = reinterpret_cast<uintptr_t>(p.data);
  h.bytes = p.left;
  h.number = pull ? ++pullsIssued_ : 0;
  // A header never wraps: it starts 64-aligned in a ring of whole pages.
  std::memcpy(ring_ + mine_ % capacity_, &h, sizeof h);
  mine_ += sizeof h;
  control_->head.store(mine_, std::memory_order_release);
  if (pull) {
    p.pulling = true;
    p.number = h.number;
    ++pulls_;
  }
}

size_t ShmConnection::moveSend() {
  size_t moved = retirePulled();
  while (written_ < queue_.size()) {
    Piece& p = queue_[written_];
    if (p.left == 0) {  // a zero-byte transfer behind a pulled one
      ++written_;
      continue;
    }
    if (p.packet) {
      const size_t n = p.left;
      if (!writePacket(p)) break;
      moved += n;
      ++written_;
      popFinished();
      continue;
    }
    if (!p.started) {
      uint64_t start = alignUp(mine_, kTransferAlign);
      if (start % capacity_ >= kRestartAfter) {
        // When the receiver has taken everything, start again at the ring's
        // beginning: back-to-back small transfers then keep to its first
        // pages and cache lines instead of streaming through the whole ring
        // (pages left idle while large messages ran elsewhere cost about
        // 15 us each to touch again on the development VM). Reading the
        // receiver's counter costs a cache miss, so only past kRestartAfter.
        theirs_ = control_->tail.load(std::memory_order_acquire);
        if (theirs_ == mine_) {
          const uint64_t restart = alignUp(mine_, capacity_);
          control_->restartFrom.store(start, std::memory_order_relaxed);
          control_->restartTo.store(restart, std::memory_order_relaxed);
          start = restart;  // published by the head store that follows the data
          ++restarts_;
        }
      }
      // The padding (and a header) must fit in the ring like data does.
      const uint64_t end = start + (p.framed ? sizeof(TransferHeader) : 0);
      if (end - theirs_ > capacity_) {
        theirs_ = control_->tail.load(std::memory_order_acquire);
        if (end - theirs_ > capacity_) break;
      }
      mine_ = start;
      p.started = true;
      if (p.framed) {
        writeHeader(p);
        moved += sizeof(TransferHeader);
        if (p.pulling) {
          ++written_;
          continue;
        }
      }
    }
    uint64_t space = capacity_ - (mine_ - theirs_);
    if (space == 0) {
      theirs_ = control_->tail.load(std::memory_order_acquire);
      space = capacity_ - (mine_ - theirs_);
      if (space == 0) break;
    }
    const uint64_t offset = mine_ % capacity_;
    const size_t n = std::min({static_cast<uint64_t>(p.left), space, capacity_ - offset, step_});
    std::memcpy(ring_ + offset, p.data, n);
    mine_ += n;
    control_->head.store(mine_, std::memory_order_release);
    p.data += n;
    p.left -= n;
    moved += n;
    if (p.left == 0) {
      ++written_;
      popFinished();
    }
  }
  return moved;
}

size_t ShmConnection::moveRecv() {
  size_t moved = 0;
  while (!queue_.empty()) {
    Piece& p = queue_.front();
    if (p.packet) {
      const size_t n = p.left;
      if (!readPacket(p)) break;
      moved += n;
      popFinished();
      continue;
    }
    if (!p.started) {
      // Where this transfer starts: after the sender's padding, or at the
      // ring's beginning if the sender restarted there. Which one is known
      // once the sender has published anything past the aligned position.
      // Our counter may then be ahead of what the sender has published; it
      // is stored only once data behind it is consumed.
      const uint64_t start = alignUp(mine_, kTransferAlign);
      if (theirs_ <= start) {
        theirs_ = control_->head.load(std::memory_order_acquire);
        if (theirs_ <= start) break;
      }
      mine_ = control_->restartFrom.load(std::memory_order_relaxed) == start
                  ? control_->restartTo.load(std::memory_order_relaxed)
                  : start;
      p.started = true;
      // The sender publishes a header whole, before any byte behind it.
      if (p.framed) readHeader(p);
    }
    if (p.pulling) {
      moved += pullStep(p);
      if (moved >= capacity_) break;
      continue;
    }
    // A reduce needs whole elements: short of the transfer's end it takes
    // only 64-byte multiples (piece boundaries then stay element-aligned,
    // since the transfer started 64-aligned), so it may need more than one.
    const uint64_t need = p.reducer ? std::min<uint64_t>(p.left, kTransferAlign) : 1;
    uint64_t filled = theirs_ > mine_ ? theirs_ - mine_ : 0;
    if (filled < need) {
      theirs_ = control_->head.load(std::memory_order_acquire);
      filled = theirs_ > mine_ ? theirs_ - mine_ : 0;
      if (filled < need) break;
    }
    const uint64_t offset = mine_ % capacity_;
    size_t n = std::min({static_cast<uint64_t>(p.left), filled, capacity_ - offset, step_});
    if (p.reducer) {
      if (n < p.left) n -= n % kTransferAlign;
      p.reducer->combine(p.data, p.local, ring_ + offset, n);
      p.local += n;
    } else {
      std::memcpy(p.data, ring_ + offset, n);
    }
    mine_ += n;
    control_->tail.store(mine_, std::memory_order_release);
    p.data += n;
    p.left -= n;
    moved += n;
    popFinished();
  }
  return moved;
}

bool ShmConnection::writePacket(Piece& p) {
  const size_t lines = linesOf(p.left);
  if (packetsMine_ + lines - packetsTheirs_ > kPackets) {
    packetsTheirs_ = control_->packetsTaken.load(std::memory_order_acquire);
    if (packetsMine_ + lines - packetsTheirs_ > kPackets) return false;
  }
  for (size_t i = 0; i < lines; ++i) {
    Packet& line = packetAt(packetsMine_);
    const size_t n = std::min(p.left, kLineBytes);
    std::memcpy(line.payload, p.data, n);
    ++packetsMine_;
    line.stamp.store(packetsMine_ << 8 | n, std::memory_order_release);
    p.data += n;
    p.left -= n;
  }
  return true;
}

bool ShmConnection::packetArrived(size_t bytes) const {
  // Every line is loaded before any is judged, so that the misses of a
  // transfer's lines overlap instead of following one another; the acquire
  // fence after the loads orders the payload reads behind all of them.
  const size_t lines = linesOf(bytes);
  uint64_t stamps[kMaxPacketLines];
  for (size_t i = 0; i < lines; ++i) {
    stamps[i] = packetAt(packetsMine_ + i).stamp.load(std::memory_order_relaxed);
  }
  for (size_t i = 0; i < lines; ++i) {
    if (stamps[i] >> 8 != packetsMine_ + i + 1) return false;
  }
  std::atomic_thread_fence(std::memory_order_acquire);
  for (size_t i = 0; i < lines; ++i) {
    const size_t expected = std::min(bytes - i * kLineBytes, kLineBytes);
    if ((stamps[i] & 0xff) != expected) {
      fail(tidalInternalError,
           "rank {}: shm connection from rank {}: transfer {} does not match: the sender's "
           "packet line #{} holds {} bytes where this receive of {} bytes expects {} there; the "
           "two ranks ran different schedules",
           selfRank_, peer_, completed_ + 1, packetsMine_ + i + 1, stamps[i] & 0xff, bytes,
           expected);
    }
  }
  return true;
}

bool ShmConnection::readPacket(Piece& p) {
  if (!packetArrived(p.left)) return false;
  while (p.left > 0) {
    const Packet& line = packetAt(packetsMine_);
    const size_t n = std::min(p.left, kLineBytes);
    if (p.reducer) {
      p.reducer->combine(p.data, p.local, line.payload, n);
      p.local += n;
    } else {
      std::memcpy(p.data, line.payload, n);
    }
    ++packetsMine_;
    p.data += n;
    p.left -= n;
  }
  control_->packetsTaken.store(packetsMine_, std::memory_order_release);
  // A small message is a header packet and then its payload's, written back
  // to back: asking for the next lines now overlaps their misses with the
  // header's handling instead of taking them after it.
  for (size_t i = 0; i < kMaxPacketLines; ++i) __builtin_prefetch(&packetAt(packetsMine_ + i));
  return true;
}

void ShmConnection::readHeader(Piece& p) {
  TransferHeader h;
  std::memcpy(&h, ring_ + mine_ % capacity_, sizeof h);
  if ((h.mode != TransferHeader::kInline && h.mode != TransferHeader::kPull) || h.bytes != p.left ||
      (h.mode == TransferHeader::kPull && h.number != pullsDone_ + 1)) {
    fail(tidalInternalError,
         "rank {}: shm connection from rank {}: transfer {} does not match: the sender's header "
         "says mode {:#x}, {} bytes, pull #{} where this receive expects {} bytes (pull #{}); "
         "the two ranks ran different schedules",
         selfRank_, peer_, completed_ + 1, h.mode, h.bytes, h.number, p.left, pullsDone_ + 1);
  }
  mine_ += sizeof h;
  control_->tail.store(mine_, std::memory_order_release);
  if (h.mode == TransferHeader::kPull) {
    p.pulling = true;
    p.number = h.number;
    p.remote = h.address;
  }
}

size_t ShmConnection::pullStep(Piece& p) {
  size_t n;
  if (p.reducer) {
    if (!bounce_) bounce_ = std::make_unique<char[]>(kBounceBytes);
    n = std::min(p.left, kBounceBytes);  // a multiple of 64 short of the end: whole elements
    readPeerMemory(bounce_.get(), p.remote, n);
    p.reducer->combine(p.data, p.local, bounce_.get(), n);
    p.local += n;
  } else {
    n = std::min(p.left, kPullStepBytes);
    readPeerMemory(p.data, p.remote, n);
  }
  p.data += n;
  p.remote += n;
  p.left -= n;
  if (p.left == 0) {
    // A sender that gave up (its call failed, its communicator closed) may
    // have reused its buffer while we read it: what we read is not its data.
    if (control_->senderGone.load(std::memory_order_seq_cst) != 0) {
      fail(tidalRemoteError,
           "rank {}: shm connection from rank {}: the sender gave up while this rank read its "
           "transfer ({} bytes moved); the peer's call failed or its communicator closed",
           selfRank_, peer_, bytesMoved_);
    }
    p.pulling = false;
    ++pulls_;
    control_->pullsDone.store(++pullsDone_, std::memory_order_release);
    popFinished();
  }
  return n;
}

void ShmConnection::readPeerMemory(char* into, uint64_t from, size_t bytes) {
  while (bytes > 0) {
    iovec local{into, bytes};
    iovec remote{reinterpret_cast<void*>(static_cast<uintptr_t>(from)), bytes};
    const ssize_t n = ::process_vm_readv(parts_.peerPid, &local, 1, &remote, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == ESRCH) lost("its process is gone");
    if (n <= 0) {
      fail(tidalSystemError,
           "rank {}: shm connection from rank {}: reading {} bytes at {:#x} in its process (pid "
           "{}) failed: {}; set TIDAL_SHM_PULL_BYTES=0 to copy through the ring instead",
           selfRank_, peer_, bytes, from, parts_.peerPid,
           n < 0 ? errnoText(errno) : "nothing read");
    }
    into += n;
    from += static_cast<uint64_t>(n);
    bytes -= static_cast<size_t>(n);
  }
}

void ShmConnection::wakePeer() {
  // Pairs with the fence in addPollFds: our counter store above is ordered
  // before this load of the peer's flag.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  auto& flag =
      direction_ == Direction::Send ? control_->receiverSleeping : control_->senderSleeping;
  if (flag.load(std::memory_order_relaxed) != 0 && flag.exchange(0) != 0) {
    signalEventFd(direction_ == Direction::Send ? parts_.dataReady.get() : parts_.spaceReady.get());
  }
}

bool ShmConnection::canAdvance() const {
  if (queue_.empty()) return false;
  if (direction_ == Direction::Send) {
    const Piece& front = queue_.front();
    if (front.pulling && control_->pullsDone.load(std::memory_order_acquire) >= front.number) {
      return true;
    }
    if (written_ >= queue_.size()) return false;
    if (const Piece& next = queue_[written_]; next.packet) {
      return packetsMine_ + linesOf(next.left) -
                 control_->packetsTaken.load(std::memory_order_acquire) <=
             kPackets;
    }
    return mine_ - control_->tail.load(std::memory_order_acquire) < capacity_;
  }
  const Piece& front = queue_.front();
  if (front.packet) return packetArrived(front.left);
  return front.pulling || control_->head.load(std::memory_order_acquire) > mine_;
}

bool ShmConnection::progress() {
  if (aborted_.load(std::memory_order_relaxed)) {
    fail(tidalRemoteError, "rank {}: shm connection {} rank {} was aborted", selfRank_,
         direction_ == Direction::Send ? "to" : "from", peer_);
  }
  const bool wasAsleep = asleep_;
  if (wasAsleep) {
    asleep_ = false;
    auto& flag =
        direction_ == Direction::Send ? control_->senderSleeping : control_->receiverSleeping;
    flag.store(0, std::memory_order_relaxed);
    drainEventFd(direction_ == Direction::Send ? parts_.spaceReady.get() : parts_.dataReady.get());
  }
  const size_t moved = move();
  if (moved > 0) {
    bytesMoved_ += moved;
    wakePeer();
    return true;
  }
  // Whether the peer is still there, at most every kPeerCheckInterval; the
  // clock itself is read every kIdleCallsPerClockRead idle calls only, since
  // a read costs as much as a look at the ring.
  if (!queue_.empty() && (wasAsleep || ++idleCalls_ % kIdleCallsPerClockRead == 0)) {
    const auto now = Clock::now();
    if (wasAsleep || now - lastPeerCheck_ >= kPeerCheckInterval) {
      lastPeerCheck_ = now;
      checkPeer();
    }
  }
  return false;
}

void ShmConnection::checkPeer() {
  char byte;
  ssize_t n;
  do {
    n = ::recv(parts_.socket.get(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))) return;
  const std::string why = n == 0 ? "the peer closed its end" : errnoText(errno);
  // The peer may have published its last bytes just before it exited; they
  // are still in our mapping. Only an empty (or full) ring means loss.
  const size_t moved = move();
  if (moved > 0) {
    bytesMoved_ += moved;
    wakePeer();
    return;
  }
  if (aborted_.load()) {
    fail(tidalRemoteError, "rank {}: shm connection {} rank {} was aborted", selfRank_,
         direction_ == Direction::Send ? "to" : "from", peer_);
  }
  lost(why);
}

void ShmConnection::lost(const std::string& why) const {
  fail(tidalRemoteError,
       "rank {}: shm connection {} rank {} lost ({}): {} after {} bytes with {} of {} transfers "
       "unfinished; the peer process exited, was killed or aborted",
       selfRank_, direction_ == Direction::Send ? "to" : "from", peer_, description_, why,
       bytesMoved_, posted_ - completed_, posted_);
}

void ShmConnection::addPollFds(std::vector<pollfd>& fds) const {
  if (queue_.empty()) return;
  const bool send = direction_ == Direction::Send;
  const int wakeFd = send ? parts_.spaceReady.get() : parts_.dataReady.get();
  if (!asleep_) {
    auto& flag = send ? control_->senderSleeping : control_->receiverSleeping;
    flag.store(1, std::memory_order_relaxed);
    asleep_ = true;
    // Pairs with the fence in wakePeer: either the peer sees our flag, or we
    // see its counter here and refuse to sleep.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (canAdvance()) signalEventFd(wakeFd);
  }
  fds.push_back({wakeFd, POLLIN, 0});
  // The peer never writes to this socket: it turns readable (EOF) or hangs up
  // only when the peer is gone.
  fds.push_back({parts_.socket.get(), POLLIN, 0});
}

void ShmConnection::abort() {
  aborted_ = true;
  if (direction_ == Direction::Send) control_->senderGone.store(1);
  // Wakes a poll() on this connection in our process (both eventfds: we may
  // be asleep on either) and, through the socket, tells the peer.
  signalEventFd(parts_.dataReady.get());
  signalEventFd(parts_.spaceReady.get());
  ::shutdown(parts_.socket.get(), SHUT_RDWR);
}

}  // namespace tidal::shm
