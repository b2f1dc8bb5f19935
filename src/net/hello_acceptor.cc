#include "net/hello_acceptor.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include "core/error.h"
#include "core/log.h"

namespace tidal {

namespace {
// After this many WARNs one acceptor logs drops at TRACE only, so a flood of
// strangers cannot flood the log too.
constexpr size_t kMaxWarnings = 20;
// serveUntil looks at the transport's abort flag at least this often.
constexpr auto kAbortCheck = std::chrono::milliseconds(100);

// Who is at the other end of an accepted connection, for logs.
std::string describePeer(const Socket& s, const SocketAddress& address) {
  if (address.family() != AF_UNIX) return address.toString();
  ucred cred{};
  socklen_t length = sizeof cred;
  if (::getsockopt(s.fd(), SOL_SOCKET, SO_PEERCRED, &cred, &length) != 0) {
    return "an unknown process";
  }
  return fmt::format("pid {} uid {}", cred.pid, cred.uid);
}

}  // namespace

HelloAcceptor::HelloAcceptor(Socket& listener, wire::MsgType type, size_t payloadBytes,
                             const Secret& secret, std::string who, log::Subsys subsys)
    : listener_(listener),
      type_(type),
      payloadBytes_(payloadBytes),
      secret_(secret),
      who_(std::move(who)),
      subsys_(subsys) {}

void HelloAcceptor::warnDropped(const std::string& peer, const std::string& reason) {
  ++warnings_;
  if (warnings_ <= kMaxWarnings) {
    TIDAL_LOG_AT(spdlog::level::warn, subsys_, "{}: closed connection from {}: {}", who_, peer,
                 reason);
    if (warnings_ == kMaxWarnings) {
      TIDAL_LOG_AT(spdlog::level::warn, subsys_,
                   "{}: too many bad connections; further ones are logged at TRACE", who_);
    }
  } else {
    TIDAL_LOG_AT(spdlog::level::trace, subsys_, "{}: closed connection from {}: {}", who_, peer,
                 reason);
  }
}

void HelloAcceptor::drop(Pending& p, const std::string& reason) {
  warnDropped(p.peer, reason);
  p.socket.close();
}

void HelloAcceptor::refuse(Pending& p, const std::string& reason, const std::string& rejectText) {
  // Logged before the peer can see the end of the stream: a peer that exits
  // as soon as it read the reject must not find this thread mid-log.
  warnDropped(p.peer, reason);
  if (!rejectText.empty()) wire::sendReject(p.socket, tidalInvalidUsage, rejectText);
  p.socket.close();
}

void HelloAcceptor::evictOne(const std::string* source, const std::string& reason) {
  // Silent connections first (a rank sends its hello with its connect), then
  // the oldest: it had the longest chance and has least time left.
  Pending* victim = nullptr;
  for (auto& p : pending_) {
    if (!p.socket.valid() || (source && p.source != *source)) continue;
    const bool better = victim == nullptr || (p.filled == 0) > (victim->filled == 0) ||
                        ((p.filled == 0) == (victim->filled == 0) && p.giveUp < victim->giveUp);
    if (better) victim = &p;
  }
  if (victim) drop(*victim, reason);
  std::erase_if(pending_, [](const Pending& p) { return !p.socket.valid(); });
}

AcceptedHello HelloAcceptor::take(Pending& p) {
  AcceptedHello hello;
  hello.body.assign(p.buffer.begin() + wire::kHeaderBytes + sizeof(Secret), p.buffer.end());
  hello.socket = std::move(p.socket);
  hello.peer = std::move(p.peer);
  hello.readLimit = p.giveUp;
  return hello;
}

void HelloAcceptor::acceptNew() {
  for (;;) {
    SocketAddress address;
    Socket s = listener_.tryAccept(&address);
    if (!s.valid()) return;
    Pending p;
    p.peer = describePeer(s, address);
    if (address.family() != AF_UNIX) {
      SocketAddress host = address;
      host.setPort(0);
      p.source = host.toString();
    }
    p.socket = std::move(s);
    p.buffer.resize(wire::kHeaderBytes + payloadBytes_);
    p.giveUp = Clock::now() + kHelloReadLimit;
    // A rank's hello is usually here already: read it now, so that it is
    // served even if a flood right behind it fills every slot.
    bool complete = readFrom(p);
    // readFrom takes the header alone first, then the rest.
    if (!complete && p.socket.valid() && p.filled == wire::kHeaderBytes) complete = readFrom(p);
    if (complete) {
      ready_.push_back(take(p));
      continue;
    }
    if (!p.socket.valid()) continue;  // refused, and logged, by readFrom
    const size_t fromSource = static_cast<size_t>(std::count_if(
        pending_.begin(), pending_.end(), [&](const Pending& q) { return q.source == p.source; }));
    if (fromSource >= kMaxPendingPerSource) {
      evictOne(&p.source, fmt::format("{} connections from {} already wait to say hello; the "
                                      "least promising makes room",
                                      fromSource, p.source.empty() ? "this host" : p.source));
    } else if (pending_.size() >= kMaxPendingHellos) {
      evictOne(nullptr, fmt::format("{} connections already wait to say hello; the least "
                                    "promising makes room",
                                    pending_.size()));
    }
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
    const wire::Header header = wire::decodeHeader(p.buffer.data());
    const auto problem = wire::headerProblem(header, type_, payloadBytes_);
    if (!problem.empty()) {
      // A Tidal peer of another protocol version is told why before the
      // close, so it does not mistake the close for a dead process; anything
      // without our magic gets nothing.
      refuse(p, problem,
             explainRefusals_ && header.magic == wire::kMagic
                 ? fmt::format("{} refused: {}", who_, problem)
                 : std::string());
      return false;
    }
  }
  if (p.filled < p.buffer.size()) return false;
  Secret presented{};
  std::copy_n(p.buffer.begin() + wire::kHeaderBytes, presented.size(), presented.begin());
  if (!secretsEqual(presented, secret_)) {
    // Saying "wrong secret" tells a stranger nothing it did not know, and
    // tells a rank holding another job's unique id exactly what happened.
    refuse(p, "wrong secret (a stranger, or a rank of another job)",
           explainRefusals_
               ? fmt::format("{} refused: wrong secret (this rank's unique id is not the one its "
                             "root was created with: a rank of another job?)",
                             who_)
               : std::string());
    return false;
  }
  return true;
}

std::optional<AcceptedHello> HelloAcceptor::next(Deadline deadline) {
  std::vector<pollfd> fds;
  for (;;) {
    if (!ready_.empty()) {
      AcceptedHello hello = std::move(ready_.front());
      ready_.erase(ready_.begin());
      return hello;
    }
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
        AcceptedHello hello = take(p);
        pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
        return hello;
      }
    }
    std::erase_if(pending_, [](const Pending& p) { return !p.socket.valid(); });
    // A listening socket reports a hang-up only once it was shut down.
    if (fds[0].revents & (POLLERR | POLLHUP | POLLNVAL)) {
      fail(tidalRemoteError, "{}: the listening socket was shut down", who_);
    }
    if (fds[0].revents & POLLIN) acceptNew();
  }
}

void HelloAcceptor::serveUntil(const std::function<bool()>& arrived,
                               const std::function<void(AcceptedHello&)>& file, Deadline deadline,
                               const std::atomic<bool>& aborted, const std::string& waitingFor) {
  while (!arrived()) {
    if (aborted.load()) {
      fail(tidalRemoteError, "{}: aborted while waiting for {}", who_, waitingFor);
    }
    if (Clock::now() > deadline) {
      fail(tidalTimeout, "{}: timed out after TIDAL_TIMEOUT={} s waiting for {}", who_,
           timeoutSeconds(), waitingFor);
    }
    std::optional<AcceptedHello> hello;
    try {
      hello = next(std::min(deadline, Clock::now() + kAbortCheck));
    } catch (const Error&) {
      if (!aborted.load()) throw;
      continue;  // the shut-down listener: reported as the abort above
    }
    if (hello) file(*hello);
  }
}

}  // namespace tidal
