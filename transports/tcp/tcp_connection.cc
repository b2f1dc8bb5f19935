#include "transports/tcp/tcp_connection.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>

#include "core/error.h"

namespace tidal {

namespace {
// Below this a transfer goes whole on one socket: striping tiny messages only
// adds system calls.
constexpr size_t kStripeMinBytes = 64 * 1024;
constexpr size_t kStripeAlign = 4096;
// Queued pieces one sendmsg / recvmsg covers at most.
constexpr size_t kMaxGather = 64;
}  // namespace

TcpConnection::TcpConnection(int selfRank, int peer, Direction direction,
                             std::vector<Socket> sockets, std::string description)
    : selfRank_(selfRank),
      peer_(peer),
      direction_(direction),
      description_(std::move(description)) {
  for (auto& s : sockets) {
    s.setNonBlocking();
    lanes_.push_back(Lane{std::move(s), {}});
  }
}

void TcpConnection::post(void* data, size_t bytes) {
  const uint64_t seq = posted_++;
  char* p = static_cast<char*>(data);
  const size_t nlanes = lanes_.size();
  if (bytes == 0) {
    piecesLeft_.push_back(0);
  } else if (bytes < kStripeMinBytes || nlanes == 1) {
    piecesLeft_.push_back(1);
    lanes_[seq % nlanes].queue.push_back({p, bytes, seq});
  } else {
    size_t piece = (bytes + nlanes - 1) / nlanes;
    piece = (piece + kStripeAlign - 1) / kStripeAlign * kStripeAlign;
    uint32_t pieces = 0;
    for (size_t off = 0, lane = 0; off < bytes; off += piece, ++lane) {
      const size_t len = std::min(piece, bytes - off);
      lanes_[lane].queue.push_back({p + off, len, seq});
      ++pieces;
    }
    piecesLeft_.push_back(pieces);
  }
  // Zero-byte transfers complete at once, but only in order.
  while (!piecesLeft_.empty() && piecesLeft_.front() == 0) {
    piecesLeft_.pop_front();
    ++completed_;
  }
}

void TcpConnection::pieceDone(uint64_t seq) {
  --piecesLeft_[seq - completed_];
  while (!piecesLeft_.empty() && piecesLeft_.front() == 0) {
    piecesLeft_.pop_front();
    ++completed_;
  }
}

void TcpConnection::lost(const std::string& why) const {
  fail(tidalRemoteError,
       "rank {}: {} rank {} lost ({}): {} after {} bytes; the peer process exited, "
       "aborted or its host is unreachable",
       selfRank_, direction_ == Direction::Send ? "connection to" : "connection from", peer_,
       description_, why, bytesMoved_);
}

size_t TcpConnection::drive(Lane& lane) {
  size_t moved = 0;
  while (!lane.queue.empty()) {
    // Every queued piece (up to kMaxGather) in one system call: a call
    // signature and the small transfer queued behind it leave as one
    // segment, so the peer wakes once for both, not twice; a receive reads
    // what has arrived into as many posted pieces as it fills.
    iovec iov[kMaxGather];
    size_t count = 0;
    for (auto it = lane.queue.begin(); it != lane.queue.end() && count < kMaxGather; ++it) {
      iov[count++] = {it->data, it->left};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = count;
    ssize_t n;
    if (direction_ == Direction::Send) {
      n = ::sendmsg(lane.socket.fd(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    } else {
      n = ::recvmsg(lane.socket.fd(), &msg, MSG_DONTWAIT);
      if (n == 0) lost("peer closed the connection");
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      lost(errnoText(errno));
    }
    moved += static_cast<size_t>(n);
    for (auto left = static_cast<size_t>(n); left > 0;) {
      Piece& piece = lane.queue.front();
      const size_t take = std::min(left, piece.left);
      piece.data += take;
      piece.left -= take;
      left -= take;
      if (piece.left == 0) {
        const uint64_t seq = piece.seq;
        lane.queue.pop_front();
        pieceDone(seq);
      }
    }
  }
  return moved;
}

bool TcpConnection::progress() {
  size_t moved = 0;
  for (auto& lane : lanes_) moved += drive(lane);
  bytesMoved_ += moved;
  return moved > 0;
}

void TcpConnection::addPollFds(std::vector<pollfd>& fds) const {
  const short events = direction_ == Direction::Send ? POLLOUT : POLLIN;
  for (const auto& lane : lanes_) {
    if (!lane.queue.empty()) fds.push_back({lane.socket.fd(), events, 0});
  }
}

void TcpConnection::abort() {
  for (auto& lane : lanes_) lane.socket.shutdownBoth();
}

}  // namespace tidal
