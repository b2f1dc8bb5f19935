#include "bootstrap/bootstrap.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "core/error.h"
#include "core/log.h"
#include "net/hello_acceptor.h"
#include "net/wire.h"

namespace tidal {

namespace {

using wire::MsgType;

// Hello body after the secret: rank, nranks, listen address.
constexpr size_t kHelloBodyBytes = 4 + 4 + wire::kAddressBytes;
// RingHello body after the secret: sender rank, nranks.
constexpr size_t kRingHelloBodyBytes = 4 + 4;
constexpr auto kRootVerdictGrace = std::chrono::seconds(1);

// Loopback root: a one-host job, so peers are reachable on loopback too and
// the job works without any configured interface.
SocketAddress listenAddressFor(const SocketAddress& root) {
  if (root.isLoopback()) return SocketAddress::loopback(root.family(), 0);
  return localInterfaceAddress();
}

std::vector<SocketAddress> joinAtRoot(const UniqueId& id, int rank, int nranks,
                                      const SocketAddress& me, Deadline deadline, int64_t timeout) {
  const std::string rootName = "the root (" + id.root.toString() + ")";
  const std::string what = fmt::format("bootstrap: rank {}: {}", rank, rootName);
  try {
    Socket root = Socket::connectTo(id.root, deadline, what);
    std::vector<uint8_t> hello;
    wire::Writer w(hello);
    w.bytes(id.secret.data(), id.secret.size());
    w.u32(static_cast<uint32_t>(rank));
    w.u32(static_cast<uint32_t>(nranks));
    w.address(me);
    wire::sendMessage(root, MsgType::Hello, hello.data(), hello.size(), deadline, what);

    const size_t tableBytes = static_cast<size_t>(nranks) * wire::kAddressBytes;
    // The root's own deadline started earlier than ours; wait a moment past
    // ours so that when ranks are missing, the root's verdict naming them
    // arrives instead of a bare local timeout.
    wire::recvHeader(root, MsgType::AddressTable, tableBytes, deadline + kRootVerdictGrace, what);
    std::vector<uint8_t> table(tableBytes);
    root.recvAll(table.data(), table.size(), deadline, what);
    wire::Reader r(table.data(), table.size(), what + ": address table");
    std::vector<SocketAddress> peers;
    peers.reserve(static_cast<size_t>(nranks));
    for (int i = 0; i < nranks; ++i) peers.push_back(r.address());
    return peers;
  } catch (const wire::PeerRejected&) {
    throw;
  } catch (const Error& e) {
    if (e.code() == tidalRemoteError) {
      // The root answers a wrong secret or protocol version with a Reject
      // (rethrown above); a close without one means its process is gone.
      fail(tidalRemoteError,
           "{} (no answer from the root: the process holding it, normally rank 0, most likely "
           "exited or was killed during init; see its log and exit status)",
           e.what());
    }
    if (e.code() != tidalTimeout) throw;
    fail(tidalTimeout,
         "bootstrap: rank {} timed out after {} s waiting for {} to gather all {} ranks ({})", rank,
         timeout, rootName, nranks, e.what());
  }
}

}  // namespace

std::unique_ptr<Bootstrap> Bootstrap::create(const UniqueId& id, int rank, int nranks) {
  if (nranks < 1 || nranks > wire::kMaxRanks) {
    fail(tidalInvalidArgument, "bootstrap: nranks {} is not in 1..{}", nranks, wire::kMaxRanks);
  }
  if (rank < 0 || rank >= nranks) {
    fail(tidalInvalidArgument, "bootstrap: rank {} is out of range 0..{}", rank, nranks - 1);
  }
  auto b = std::make_unique<Bootstrap>(Key{});
  b->rank_ = rank;
  b->nranks_ = nranks;
  b->secret_ = id.secret;
  b->timeoutSeconds_ = timeoutSeconds();
  const Deadline deadline = Clock::now() + std::chrono::seconds(b->timeoutSeconds_);

  // Listen before saying hello: the address goes into the hello, and the
  // neighbour may connect as soon as the root sends the table.
  Socket listener = Socket::listenOn(listenAddressFor(id.root));
  const SocketAddress me = listener.localAddress();
  b->peers_ = joinAtRoot(id, rank, nranks, me, deadline, b->timeoutSeconds_);
  TIDAL_TRACE(Boot, "bootstrap: rank {} of {} got the address table; listening on {}", rank, nranks,
              me.toString());
  if (nranks > 1) b->connectRing(listener, deadline);
  b->listener_ = std::move(listener);
  return b;
}

Bootstrap::~Bootstrap() = default;

Socket Bootstrap::duplicateListener() const {
  const int fd = ::fcntl(listener_.fd(), F_DUPFD_CLOEXEC, 0);
  if (fd < 0) {
    fail(tidalSystemError, "bootstrap: rank {}: cannot duplicate the listening socket: {}", rank_,
         errnoText(errno));
  }
  return Socket(fd);
}

std::string Bootstrap::peerName(int r) const {
  return fmt::format("rank {} ({})", r, peers_[static_cast<size_t>(r)].toString());
}

void Bootstrap::connectRing(Socket& listener, Deadline deadline) {
  const int next = (rank_ + 1) % nranks_;
  const int prev = (rank_ + nranks_ - 1) % nranks_;
  const std::string self = fmt::format("bootstrap: rank {}", rank_);

  // Connect and say hello first, then accept: connect() completes in the
  // kernel's backlog and the hello fits the socket buffer, so no rank waits
  // for its neighbour to reach accept.
  next_ = Socket::connectTo(peers_[static_cast<size_t>(next)], deadline,
                            fmt::format("{}: connecting the ring to {}", self, peerName(next)));
  std::vector<uint8_t> hello;
  wire::Writer w(hello);
  w.bytes(secret_.data(), secret_.size());
  w.u32(static_cast<uint32_t>(rank_));
  w.u32(static_cast<uint32_t>(nranks_));
  wire::sendMessage(next_, MsgType::RingHello, hello.data(), hello.size(), deadline,
                    fmt::format("{}: ring hello to {}", self, peerName(next)));

  HelloAcceptor acceptor(
      listener, MsgType::RingHello, sizeof(Secret) + kRingHelloBodyBytes, secret_,
      fmt::format("{} listener {}", self, listener.localAddress().toString()), log::Subsys::Boot);
  for (;;) {
    auto h = acceptor.next(deadline);
    if (!h) {
      fail(tidalTimeout, "{} timed out after {} s waiting for {} to connect the bootstrap ring",
           self, timeoutSeconds_, peerName(prev));
    }
    wire::Reader r(h->body.data(), h->body.size(), "ring hello");
    const auto sender = static_cast<int32_t>(r.u32());
    const auto n = static_cast<int32_t>(r.u32());
    if (sender != prev || n != nranks_) {
      const auto reason = fmt::format("ring hello from rank {} of {}, expected rank {} of {}",
                                      sender, n, prev, nranks_);
      acceptor.warnDropped(h->peer, reason);
      wire::sendReject(h->socket, tidalInvalidArgument, fmt::format("{}: {}", self, reason));
      continue;
    }
    prev_ = std::move(h->socket);
    return;
  }
}

void Bootstrap::failAborted(const char* op) const {
  fail(tidalRemoteError, "bootstrap: rank {}: {} aborted (the communicator was aborted)", rank_,
       op);
}

template <typename F>
void Bootstrap::guarded(const char* op, F&& body) {
  if (aborted_.load()) failAborted(op);
  if (!brokenBy_.empty()) {
    fail(tidalInvalidUsage, "bootstrap: rank {}: cannot run {}: an earlier operation failed: {}",
         rank_, op, brokenBy_);
  }
  try {
    body();
  } catch (const Error& e) {
    if (aborted_.load()) {
      brokenBy_ = "aborted";
      failAborted(op);
    }
    brokenBy_ = e.what();
    throw;
  }
}

// One ring step: sends `bytes` from `out` to rank+1 while receiving `bytes`
// into `in` from rank-1. Both directions progress in the same poll loop, so
// neither neighbour can be stuck behind the other's full socket buffer.
void Bootstrap::ringPass(int type, const void* out, void* in, size_t bytes, const char* op) {
  const int next = (rank_ + 1) % nranks_;
  const int prev = (rank_ + nranks_ - 1) % nranks_;
  const auto msgType = static_cast<MsgType>(type);
  const auto sendHeader = wire::encodeHeader(msgType, static_cast<uint32_t>(bytes));
  uint8_t recvHeader[wire::kHeaderBytes];
  const size_t total = wire::kHeaderBytes + bytes;
  const auto* outBytes = static_cast<const uint8_t*>(out);
  auto* inBytes = static_cast<uint8_t*>(in);
  const std::string toNext =
      fmt::format("bootstrap: rank {}: sending to {} in {}", rank_, peerName(next), op);
  const std::string fromPrev =
      fmt::format("bootstrap: rank {}: receiving from {} in {}", rank_, peerName(prev), op);
  const Deadline deadline = Clock::now() + std::chrono::seconds(timeoutSeconds_);
  size_t sent = 0, received = 0;
  while (sent < total || received < total) {
    size_t moved = 0;
    if (sent < total) {
      const size_t n =
          sent < wire::kHeaderBytes
              ? next_.sendSome(sendHeader.data() + sent, wire::kHeaderBytes - sent, toNext)
              : next_.sendSome(outBytes + (sent - wire::kHeaderBytes), total - sent, toNext);
      sent += n;
      moved += n;
    }
    if (received < total) {
      const size_t n =
          received < wire::kHeaderBytes
              ? prev_.recvSome(recvHeader + received, wire::kHeaderBytes - received, fromPrev)
              : prev_.recvSome(inBytes + (received - wire::kHeaderBytes), total - received,
                               fromPrev);
      received += n;
      moved += n;
      if (n > 0 && received == wire::kHeaderBytes) {
        const wire::Header h = wire::decodeHeader(recvHeader);
        if (h.magic == wire::kMagic && h.type == static_cast<uint16_t>(MsgType::Notice)) {
          // Left unread from a failed call of this communicator
          // (net/notice.h; a split after tidalCommRevoke meets them): the
          // operation's own message follows it.
          const wire::Notice notice = readNotice(h, deadline, fromPrev);
          TIDAL_TRACE(Boot, "{}: skipped a notice from rank {}: {}", fromPrev, notice.origin,
                      notice.text);
          received = 0;
          continue;
        }
        const auto problem = wire::headerProblem(h, msgType, bytes);
        if (!problem.empty()) {
          fail(tidalRemoteError, "{}: {} (do all ranks make the same bootstrap calls?)", fromPrev,
               problem);
        }
      }
    }
    if (moved > 0) continue;

    pollfd fds[2];
    nfds_t count = 0;
    if (sent < total) fds[count++] = {next_.fd(), POLLOUT, 0};
    if (received < total) fds[count++] = {prev_.fd(), POLLIN, 0};
    const int r = ::poll(fds, count, pollTimeoutMs(deadline));
    if (r < 0 && errno != EINTR) {
      fail(tidalSystemError, "bootstrap: rank {}: poll in {} failed: {}", rank_, op,
           errnoText(errno));
    }
    if (r == 0 && Clock::now() >= deadline) {
      if (received < total) {
        fail(tidalTimeout,
             "bootstrap: rank {} timed out after {} s waiting for {} in {} ({} of {} bytes "
             "received)",
             rank_, timeoutSeconds_, peerName(prev), op, received, total);
      }
      fail(tidalTimeout,
           "bootstrap: rank {} timed out after {} s sending to {} in {} ({} of {} bytes sent)",
           rank_, timeoutSeconds_, peerName(next), op, sent, total);
    }
  }
}

void Bootstrap::allGather(const void* mine, void* all, size_t bytes) {
  if (bytes > kMaxMessageBytes) {
    fail(tidalInvalidArgument, "bootstrap: allGather of {} bytes per rank exceeds the {} limit",
         bytes, kMaxMessageBytes);
  }
  guarded("allGather", [&] {
    auto* slots = static_cast<uint8_t*>(all);
    uint8_t* own = slots + static_cast<size_t>(rank_) * bytes;
    if (mine != own && bytes > 0) std::memmove(own, mine, bytes);
    // Step s forwards the block that arrived in step s-1 (our own at s = 0):
    // after n-1 steps every block has travelled around the ring.
    for (int step = 0; step < nranks_ - 1; ++step) {
      const int sendBlock = (rank_ - step + nranks_) % nranks_;
      const int recvBlock = (rank_ - step - 1 + nranks_) % nranks_;
      ringPass(static_cast<int>(MsgType::AllGather), slots + static_cast<size_t>(sendBlock) * bytes,
               slots + static_cast<size_t>(recvBlock) * bytes, bytes, "allGather");
    }
  });
}

void Bootstrap::barrier() {
  // n-1 empty ring steps: after step k a rank knows the k ranks before it
  // entered, so after n-1 steps everyone has.
  guarded("barrier", [&] {
    for (int step = 0; step < nranks_ - 1; ++step) {
      ringPass(static_cast<int>(MsgType::Barrier), nullptr, nullptr, 0, "barrier");
    }
  });
}

void Bootstrap::broadcast(void* data, size_t bytes, int root) {
  if (root < 0 || root >= nranks_) {
    fail(tidalInvalidArgument, "bootstrap: broadcast root {} is out of range 0..{}", root,
         nranks_ - 1);
  }
  if (bytes > kMaxMessageBytes - 4) {
    fail(tidalInvalidArgument, "bootstrap: broadcast of {} bytes exceeds the {} limit", bytes,
         kMaxMessageBytes - 4);
  }
  if (nranks_ == 1) return;
  guarded("broadcast", [&] {
    // A chain along the ring: receive all from rank-1, then pass it on.
    // One direction only, so a large payload cannot deadlock.
    const int next = (rank_ + 1) % nranks_;
    const int prev = (rank_ + nranks_ - 1) % nranks_;
    const Deadline deadline = Clock::now() + std::chrono::seconds(timeoutSeconds_);
    const auto length = static_cast<uint32_t>(bytes + 4);
    if (rank_ != root) {
      const std::string what =
          fmt::format("bootstrap: rank {}: receiving from {} in broadcast", rank_, peerName(prev));
      try {
        wire::recvHeader(prev_, MsgType::Broadcast, length, deadline, what);
        uint8_t rootField[4];
        prev_.recvAll(rootField, sizeof rootField, deadline, what);
        wire::Reader r(rootField, sizeof rootField, what);
        const auto theirRoot = static_cast<int32_t>(r.u32());
        if (theirRoot != root) {
          fail(tidalRemoteError, "{}: it broadcasts from root {}, this rank expects root {}", what,
               theirRoot, root);
        }
        prev_.recvAll(data, bytes, deadline, what);
      } catch (const Error& e) {
        if (e.code() != tidalTimeout || aborted_.load()) throw;
        fail(tidalTimeout, "bootstrap: rank {} timed out after {} s waiting for {} in broadcast",
             rank_, timeoutSeconds_, peerName(prev));
      }
    }
    if (next == root) return;
    const std::string what =
        fmt::format("bootstrap: rank {}: sending to {} in broadcast", rank_, peerName(next));
    std::vector<uint8_t> head;
    wire::Writer w(head);
    const auto header = wire::encodeHeader(MsgType::Broadcast, length);
    w.bytes(header.data(), header.size());
    w.u32(static_cast<uint32_t>(root));
    try {
      next_.sendAll(head.data(), head.size(), deadline, what);
      next_.sendAll(data, bytes, deadline, what);
    } catch (const Error& e) {
      if (e.code() != tidalTimeout || aborted_.load()) throw;
      fail(tidalTimeout, "bootstrap: rank {} timed out after {} s sending to {} in broadcast",
           rank_, timeoutSeconds_, peerName(next));
    }
  });
}

wire::Notice Bootstrap::readNotice(const wire::Header& h, Deadline deadline,
                                   const std::string& what) {
  if (h.version != wire::kVersion || h.length < wire::kNoticeFixedBytes ||
      h.length > wire::kNoticeFixedBytes + wire::kMaxNoticeTextBytes) {
    fail(tidalRemoteError, "{}: a notice of {} bytes, version {}", what, h.length, h.version);
  }
  std::vector<uint8_t> body(h.length);
  prev_.recvAll(body.data(), body.size(), deadline, what);
  return wire::decodeNotice(body.data(), body.size(), nranks_);
}

void Bootstrap::tell(const wire::Notice& notice) {
  if (nranks_ == 1 || aborted_.load() || !brokenBy_.empty()) return;
  const int next = (rank_ + 1) % nranks_;
  const std::string what =
      fmt::format("bootstrap: rank {}: telling {} why a call failed", rank_, peerName(next));
  try {
    const auto body = wire::encodeNotice(notice);
    wire::sendMessage(next_, MsgType::Notice, body.data(), body.size(),
                      Clock::now() + std::chrono::seconds(1), what);
  } catch (const Error& e) {
    // rank+1 is gone or stuck; part of the message may have left, so the
    // ring's byte stream can no longer be trusted.
    TIDAL_TRACE(Boot, "{}", e.what());
    brokenBy_ = e.what();
  }
}

std::optional<wire::Notice> Bootstrap::hear(std::chrono::milliseconds grace) {
  if (nranks_ == 1 || aborted_.load() || !brokenBy_.empty()) return std::nullopt;
  const int prev = (rank_ + nranks_ - 1) % nranks_;
  const std::string what =
      fmt::format("bootstrap: rank {}: hearing from {} why a call failed", rank_, peerName(prev));
  const Deadline deadline = Clock::now() + grace;
  // The header is peeked at, not read: anything but a notice (a ring
  // operation's message, from a rank that went on) stays for its reader.
  uint8_t header[wire::kHeaderBytes];
  for (;;) {
    const ssize_t n = ::recv(prev_.fd(), header, sizeof header, MSG_PEEK | MSG_DONTWAIT);
    if (n == static_cast<ssize_t>(sizeof header)) break;
    if (n == 0) return std::nullopt;  // rank-1 closed its end: it has gone
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return std::nullopt;
    pollfd p{prev_.fd(), POLLIN, 0};
    if (::poll(&p, 1, pollTimeoutMs(deadline)) == 0 && Clock::now() >= deadline) {
      return std::nullopt;  // silence (or a message still arriving: left for its reader)
    }
    if (n > 0) {
      // Part of a header: poll() says readable at once; let the rest come.
      if (Clock::now() >= deadline) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  const wire::Header h = wire::decodeHeader(header);
  if (h.magic != wire::kMagic || h.type != static_cast<uint16_t>(MsgType::Notice)) {
    return std::nullopt;
  }
  try {
    const Deadline bodyDeadline = std::max(deadline, Clock::now() + std::chrono::seconds(1));
    prev_.recvAll(header, sizeof header, bodyDeadline, what);
    return readNotice(h, bodyDeadline, what);
  } catch (const Error& e) {
    // rank-1 went away half-way, or sent a notice no rank sends: the ring's
    // byte stream can no longer be trusted.
    TIDAL_TRACE(Boot, "{}", e.what());
    brokenBy_ = e.what();
    return std::nullopt;
  }
}

bool Bootstrap::noticeWaiting() const {
  if (nranks_ == 1 || aborted_.load() || !brokenBy_.empty()) return false;
  uint8_t header[wire::kHeaderBytes];
  const ssize_t n = ::recv(prev_.fd(), header, sizeof header, MSG_PEEK | MSG_DONTWAIT);
  if (n != static_cast<ssize_t>(sizeof header)) return false;
  const wire::Header h = wire::decodeHeader(header);
  return h.magic == wire::kMagic && h.type == static_cast<uint16_t>(MsgType::Notice);
}

void Bootstrap::abort() {
  aborted_.store(true);
  // shutdown, not close: the descriptors stay valid for the thread blocked
  // in poll on them, which wakes with an error and sees aborted_.
  next_.shutdownBoth();
  prev_.shutdownBoth();
}

}  // namespace tidal
