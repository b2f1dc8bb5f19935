#include "bootstrap/hello_acceptor.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>

#include "core/error.h"
#include "core/log.h"

namespace tidal {

namespace {
// After this many WARNs one acceptor logs drops at TRACE only, so a flood of
// strangers cannot flood the log too.
constexpr size_t kMaxWarnings = 20;
}  // namespace

HelloAcceptor::HelloAcceptor(Socket& listener, wire::MsgType type, size_t payloadBytes,
                             const Secret& secret, std::string who)
    : listener_(listener),
      type_(type),
      payloadBytes_(payloadBytes),
      secret_(secret),
      who_(std::move(who)) {}

void HelloAcceptor::warnDropped(const SocketAddress& peer, const std::string& reason) {
  ++warnings_;
  if (warnings_ <= kMaxWarnings) {
    TIDAL_WARN(Boot, "{}: closed connection from {}: {}", who_, peer.toString(), reason);
    if (warnings_ == kMaxWarnings) {
      TIDAL_WARN(Boot, "{}: too many bad connections; further ones are logged at TRACE", who_);
    }
  } else {
    TIDAL_TRACE(Boot, "{}: closed connection from {}: {}", who_, peer.toString(), reason);
  }
}

void HelloAcceptor::drop(Pending& p, const std::string& reason) {
  warnDropped(p.peer, reason);
  p.socket.close();
}

void HelloAcceptor::acceptNew() {
  for (;;) {
    SocketAddress peer;
    Socket s = listener_.tryAccept(&peer);
    if (!s.valid()) return;
    if (pending_.size() >= kMaxPendingHellos) {
      warnDropped(peer, fmt::format("{} connections already wait to say hello", pending_.size()));
      continue;
    }
    Pending p;
    p.socket = std::move(s);
    p.peer = peer;
    p.buffer.resize(wire::kHeaderBytes + payloadBytes_);
    p.giveUp = Clock::now() + kHelloReadLimit;
    pending_.push_back(std::move(p));
  }
}

bool HelloAcceptor::readFrom(Pending& p) {
  try {
    // Read the header alone first so that a bad one is refused before we
    // wait for (or read) any payload.
    const size_t want = p.filled < wire::kHeaderBytes ? wire::kHeaderBytes : p.buffer.size();
    const size_t n = p.socket.recvSome(p.buffer.data() + p.filled, want - p.filled, who_);
    p.filled += n;
    if (n == 0) return false;
  } catch (const Error&) {
    drop(p,
         fmt::format("it closed the connection after {} bytes, before a complete hello", p.filled));
    return false;
  }
  if (p.filled == wire::kHeaderBytes) {
    const auto problem =
        wire::headerProblem(wire::decodeHeader(p.buffer.data()), type_, payloadBytes_);
    if (!problem.empty()) {
      drop(p, problem);
      return false;
    }
  }
  if (p.filled < p.buffer.size()) return false;
  Secret presented{};
  std::copy_n(p.buffer.begin() + wire::kHeaderBytes, presented.size(), presented.begin());
  if (!secretsEqual(presented, secret_)) {
    drop(p, "wrong secret (a stranger, or a rank of another job)");
    return false;
  }
  return true;
}

std::optional<AcceptedHello> HelloAcceptor::next(Deadline deadline) {
  std::vector<pollfd> fds;
  for (;;) {
    const auto now = Clock::now();
    Deadline wakeAt = deadline;
    for (auto& p : pending_) {
      if (p.giveUp <= now) {
        drop(p, fmt::format("no complete hello within {} s ({} bytes received)",
                            kHelloReadLimit.count(), p.filled));
      } else {
        wakeAt = std::min(wakeAt, p.giveUp);
      }
    }
    std::erase_if(pending_, [](const Pending& p) { return !p.socket.valid(); });
    if (now >= deadline) return std::nullopt;

    fds.clear();
    fds.push_back({listener_.fd(), POLLIN, 0});
    for (const auto& p : pending_) fds.push_back({p.socket.fd(), POLLIN, 0});
    const int r = ::poll(fds.data(), fds.size(), pollTimeoutMs(wakeAt));
    if (r < 0) {
      if (errno == EINTR) continue;
      fail(tidalSystemError, "{}: poll failed: {}", who_, errnoText(errno));
    }
    if (r == 0) continue;

    // Serve the pending connections first: fds[i + 1] belongs to pending_[i]
    // only until acceptNew() grows the vector.
    for (size_t i = 0; i < pending_.size(); ++i) {
      if (fds[i + 1].revents == 0) continue;
      Pending& p = pending_[i];
      if (readFrom(p)) {
        AcceptedHello hello;
        hello.body.assign(p.buffer.begin() + wire::kHeaderBytes + sizeof(Secret), p.buffer.end());
        hello.socket = std::move(p.socket);
        hello.peer = p.peer;
        pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
        return hello;
      }
    }
    std::erase_if(pending_, [](const Pending& p) { return !p.socket.valid(); });
    if (fds[0].revents & (POLLERR | POLLNVAL)) {
      fail(tidalSystemError, "{}: the listening socket failed", who_);
    }
    if (fds[0].revents & POLLIN) acceptNew();
  }
}

}  // namespace tidal
