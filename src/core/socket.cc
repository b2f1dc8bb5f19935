#include "core/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <thread>

#include "core/error.h"
#include "core/log.h"
#include "core/params.h"

namespace tidal {

// ---------------------------------------------------------------------------
// Deadlines

namespace {
constexpr int64_t kMaxTimeoutSeconds = 1'000'000'000;
}  // namespace

int64_t timeoutSeconds() {
  const int64_t seconds = params::getInt("TIDAL_TIMEOUT");
  // The bound keeps every deadline representable: a steady_clock time point
  // counts nanoseconds in 64 bits, so seconds beyond ~9.2e9 would overflow
  // (and wrap to a deadline in the past: "timed out after 0 s").
  if (seconds <= 0 || seconds > kMaxTimeoutSeconds) {
    fail(tidalInvalidArgument,
         "TIDAL_TIMEOUT={} must be a positive number of seconds, at most {} (about 31 years)",
         seconds, kMaxTimeoutSeconds);
  }
  return seconds;
}

Deadline deadlineFromNow() { return Clock::now() + std::chrono::seconds(timeoutSeconds()); }

Deadline deadlineIn(std::chrono::milliseconds ms) { return Clock::now() + ms; }

int pollTimeoutMs(Deadline deadline) {
  const auto left = deadline - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  // Round up so a poll never returns just before the deadline and spins.
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<int64_t>(ms, std::numeric_limits<int>::max()));
}

namespace {

int64_t secondsSince(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - start).count();
}

// TIDAL_SOCKET_FAMILY as AF_INET / AF_INET6, or AF_UNSPEC when unset.
int familyParam() {
  std::string text = params::getString("TIDAL_SOCKET_FAMILY");
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  if (text.empty()) return AF_UNSPEC;
  if (text == "AF_INET" || text == "INET" || text == "4") return AF_INET;
  if (text == "AF_INET6" || text == "INET6" || text == "6") return AF_INET6;
  fail(tidalInvalidArgument, "TIDAL_SOCKET_FAMILY='{}' is not AF_INET or AF_INET6", text);
}

SocketAddress fromSockaddr(const sockaddr* sa) {
  SocketAddress a;
  if (sa->sa_family == AF_INET) {
    a.length = sizeof(sockaddr_in);
  } else if (sa->sa_family == AF_INET6) {
    a.length = sizeof(sockaddr_in6);
  } else {
    return a;
  }
  std::memcpy(&a.storage, sa, a.length);
  return a;
}

const sockaddr* asSockaddr(const SocketAddress& a) {
  return reinterpret_cast<const sockaddr*>(&a.storage);
}

const sockaddr_in& v4(const SocketAddress& a) {
  return *reinterpret_cast<const sockaddr_in*>(&a.storage);
}
const sockaddr_in6& v6(const SocketAddress& a) {
  return *reinterpret_cast<const sockaddr_in6*>(&a.storage);
}

bool sameIp(const SocketAddress& a, const SocketAddress& b) {
  if (a.family() != b.family()) return false;
  if (a.family() == AF_INET) return v4(a).sin_addr.s_addr == v4(b).sin_addr.s_addr;
  if (a.family() == AF_INET6) {
    return std::memcmp(&v6(a).sin6_addr, &v6(b).sin6_addr, sizeof(in6_addr)) == 0;
  }
  return false;
}

struct IfaddrsDeleter {
  void operator()(ifaddrs* p) const { freeifaddrs(p); }
};
using IfaddrsList = std::unique_ptr<ifaddrs, IfaddrsDeleter>;

IfaddrsList interfaces() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    fail(tidalSystemError, "getifaddrs failed: {}", errnoText(errno));
  }
  return IfaddrsList(list);
}

struct Candidate {
  std::string name;
  SocketAddress address;
  bool loopback = false;
};

// Interfaces that are up, with a usable IPv4/IPv6 address, in getifaddrs
// order (which lists every IPv4 address before the IPv6 ones, so "first"
// prefers IPv4 when the family is not restricted).
std::vector<Candidate> candidates(int family) {
  std::vector<Candidate> out;
  auto list = interfaces();
  for (const ifaddrs* ifa = list.get(); ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr || (ifa->ifa_flags & IFF_UP) == 0) continue;
    const int f = ifa->ifa_addr->sa_family;
    if (f != AF_INET && f != AF_INET6) continue;
    if (family != AF_UNSPEC && f != family) continue;
    SocketAddress a = fromSockaddr(ifa->ifa_addr);
    // Link-local IPv6 needs a scope that differs per host: useless for peers.
    if (f == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&v6(a).sin6_addr)) continue;
    a.setPort(0);
    out.push_back({ifa->ifa_name, a, (ifa->ifa_flags & IFF_LOOPBACK) != 0});
  }
  return out;
}

Candidate pickInterface() {
  const std::string spec = params::getString("TIDAL_SOCKET_IFNAME");
  const int family = familyParam();
  const auto all = candidates(family);
  if (!spec.empty()) {
    for (const auto& c : all) {
      if (interfaceMatches(spec, c.name)) return c;
    }
    std::string names;
    for (const auto& c : all) {
      if (names.find(c.name) == std::string::npos) names += (names.empty() ? "" : ", ") + c.name;
    }
    fail(tidalInvalidArgument,
         "TIDAL_SOCKET_IFNAME='{}' matches no interface that is up with an address{} (have: {})",
         spec, family == AF_UNSPEC ? "" : " of TIDAL_SOCKET_FAMILY",
         names.empty() ? "none" : names);
  }
  // Default: the first real interface; docker bridges are local to the host
  // and loopback only reaches ourselves, so they are the last resort.
  for (const auto& c : all) {
    if (!c.loopback && c.name.rfind("docker", 0) != 0 && c.name != "lo") return c;
  }
  for (const auto& c : all) {
    if (c.loopback) return c;
  }
  fail(tidalSystemError, "no network interface is up with an {} address",
       family == AF_INET6 ? "IPv6" : (family == AF_INET ? "IPv4" : "IPv4 or IPv6"));
}

// Splits "a,b ,c" into trimmed, non-empty items.
std::vector<std::string> splitList(const std::string& text) {
  std::vector<std::string> items;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(start, comma - start);
    const auto b = item.find_first_not_of(" \t");
    if (b != std::string::npos) {
      item = item.substr(b, item.find_last_not_of(" \t") - b + 1);
      items.push_back(item);
    }
    start = comma + 1;
  }
  return items;
}

bool retriableConnectError(int err) {
  switch (err) {
    case ECONNREFUSED:  // the peer does not listen yet
    case ETIMEDOUT:
    case ENETUNREACH:
    case EHOSTUNREACH:
    case ECONNRESET:
    case ECONNABORTED:
    case EAGAIN:  // loopback listen backlog full
    case EADDRNOTAVAIL:
    case EINTR:
      return true;
    default:
      return false;
  }
}

// One non-blocking connect attempt, waiting for completion until `until`.
// Returns 0 on success (socket in `out`) or the errno of the failure.
int connectOnce(const SocketAddress& addr, Deadline until, Socket& out) {
  Socket s(::socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!s.valid()) return errno;
  if (::connect(s.fd(), asSockaddr(addr), addr.length) != 0) {
    if (errno != EINPROGRESS) return errno;
    pollfd p{s.fd(), POLLOUT, 0};
    for (;;) {
      const int r = ::poll(&p, 1, pollTimeoutMs(until));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return errno;
      if (r == 0) return ETIMEDOUT;
      break;
    }
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
    if (err != 0) return err;
  }
  out = std::move(s);
  return 0;
}

}  // namespace

// ---------------------------------------------------------------------------
// SocketAddress

std::string SocketAddress::toString() const {
  char host[INET6_ADDRSTRLEN] = {0};
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &v4(*this).sin_addr, host, sizeof host);
    return fmt::format("{}:{}", host, port());
  }
  if (family() == AF_INET6) {
    inet_ntop(AF_INET6, &v6(*this).sin6_addr, host, sizeof host);
    return fmt::format("[{}]:{}", host, port());
  }
  return "<no address>";
}

uint16_t SocketAddress::port() const {
  if (family() == AF_INET) return ntohs(v4(*this).sin_port);
  if (family() == AF_INET6) return ntohs(v6(*this).sin6_port);
  return 0;
}

void SocketAddress::setPort(uint16_t p) {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&storage)->sin_port = htons(p);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port = htons(p);
}

bool SocketAddress::isLoopback() const {
  if (family() == AF_INET) return (ntohl(v4(*this).sin_addr.s_addr) >> 24) == 127;
  if (family() == AF_INET6) {
    const in6_addr& a = v6(*this).sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&a)) return true;
    return IN6_IS_ADDR_V4MAPPED(&a) && a.s6_addr[12] == 127;
  }
  return false;
}

bool SocketAddress::isWildcard() const {
  if (family() == AF_INET) return v4(*this).sin_addr.s_addr == htonl(INADDR_ANY);
  if (family() == AF_INET6) return IN6_IS_ADDR_UNSPECIFIED(&v6(*this).sin6_addr);
  return false;
}

bool SocketAddress::operator==(const SocketAddress& other) const {
  if (!sameIp(*this, other) || port() != other.port()) return false;
  return family() != AF_INET6 || v6(*this).sin6_scope_id == v6(other).sin6_scope_id;
}

SocketAddress SocketAddress::parse(const std::string& hostPort) {
  std::string host, portText;
  if (!hostPort.empty() && hostPort[0] == '[') {
    const auto close = hostPort.find(']');
    if (close == std::string::npos || close + 1 >= hostPort.size() || hostPort[close + 1] != ':') {
      fail(tidalInvalidArgument, "address '{}' is not [ipv6]:port", hostPort);
    }
    host = hostPort.substr(1, close - 1);
    portText = hostPort.substr(close + 2);
  } else {
    const auto colon = hostPort.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      fail(tidalInvalidArgument, "address '{}' is not host:port", hostPort);
    }
    host = hostPort.substr(0, colon);
    portText = hostPort.substr(colon + 1);
    if (host.find(':') != std::string::npos) {
      fail(tidalInvalidArgument, "address '{}': write IPv6 addresses as [addr]:port", hostPort);
    }
  }
  if (portText.empty() || portText.size() > 5 ||
      portText.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(portText) > 65535) {
    fail(tidalInvalidArgument, "address '{}': port '{}' is not a number in 0..65535", hostPort,
         portText);
  }
  const auto port = static_cast<uint16_t>(std::stoul(portText));

  addrinfo hints{};
  hints.ai_family = familyParam();
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0) {
    fail(tidalInvalidArgument, "address '{}': cannot resolve '{}': {}", hostPort, host,
         rc == EAI_SYSTEM ? errnoText(errno) : gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> guard(res, &freeaddrinfo);
  // Every rank resolves the name the same way: IPv4 first, then IPv6.
  const addrinfo* chosen = nullptr;
  for (const addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_family == AF_INET) {
      chosen = ai;
      break;
    }
    if (ai->ai_family == AF_INET6 && chosen == nullptr) chosen = ai;
  }
  if (chosen == nullptr) {
    fail(tidalInvalidArgument, "address '{}': '{}' has no IPv4/IPv6 address", hostPort, host);
  }
  SocketAddress a = fromSockaddr(chosen->ai_addr);
  a.setPort(port);
  return a;
}

SocketAddress SocketAddress::wildcard(int family, uint16_t port) {
  SocketAddress a;
  if (family == AF_INET6) {
    auto* sa = reinterpret_cast<sockaddr_in6*>(&a.storage);
    sa->sin6_family = AF_INET6;
    sa->sin6_addr = in6addr_any;
    a.length = sizeof(sockaddr_in6);
  } else {
    auto* sa = reinterpret_cast<sockaddr_in*>(&a.storage);
    sa->sin_family = AF_INET;
    sa->sin_addr.s_addr = htonl(INADDR_ANY);
    a.length = sizeof(sockaddr_in);
  }
  a.setPort(port);
  return a;
}

SocketAddress SocketAddress::loopback(int family, uint16_t port) {
  SocketAddress a = wildcard(family, port);
  if (family == AF_INET6) {
    reinterpret_cast<sockaddr_in6*>(&a.storage)->sin6_addr = in6addr_loopback;
  } else {
    reinterpret_cast<sockaddr_in*>(&a.storage)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  }
  return a;
}

// ---------------------------------------------------------------------------
// Interfaces

bool interfaceMatches(const std::string& spec, const std::string& name) {
  std::string list = spec;
  bool exclude = false, exact = false;
  if (!list.empty() && list[0] == '^') {
    exclude = true;
    list.erase(0, 1);
  }
  if (!list.empty() && list[0] == '=') {
    exact = true;
    list.erase(0, 1);
  }
  const auto items = splitList(list);
  if (items.empty()) return true;
  bool hit = false;
  for (const auto& item : items) {
    if (exact ? name == item : name.rfind(item, 0) == 0) {
      hit = true;
      break;
    }
  }
  return exclude ? !hit : hit;
}

SocketAddress localInterfaceAddress() { return pickInterface().address; }

std::string localInterfaceName() { return pickInterface().name; }

bool isAddressOfThisHost(const SocketAddress& addr) {
  if (addr.isLoopback()) return true;
  for (const auto& c : candidates(AF_UNSPEC)) {
    if (sameIp(c.address, addr)) return true;
  }
  return false;
}

// ---------------------------------------------------------------------------
// Socket

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.release();
  }
  return *this;
}

int Socket::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

void Socket::close() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

void Socket::shutdownBoth() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

void Socket::shutdownWrite() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_WR);
}

size_t Socket::discardReadable() {
  size_t dropped = 0;
  uint8_t scratch[4096];
  // Bounded: a peer that keeps sending is not worth more than 1 MiB of reads.
  while (fd_ >= 0 && dropped < (size_t{1} << 20)) {
    const ssize_t n = ::recv(fd_, scratch, sizeof scratch, MSG_DONTWAIT);
    if (n > 0) {
      dropped += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;  // nothing more yet, end of stream or an error: all the same here
  }
  return dropped;
}

void Socket::setNonBlocking() {
  const int flags = ::fcntl(fd_, F_GETFL, 0);
  if (flags < 0 || ::fcntl(fd_, F_SETFL, flags | O_NONBLOCK) != 0) {
    fail(tidalSystemError, "fcntl(O_NONBLOCK) failed: {}", errnoText(errno));
  }
}

void Socket::setNoDelay() {
  const int one = 1;
  // Best effort: small control messages should not wait for Nagle.
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

Socket Socket::listenOn(const SocketAddress& addr) {
  Socket s(::socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!s.valid()) {
    fail(tidalSystemError, "socket() for {} failed: {}", addr.toString(), errnoText(errno));
  }
  const int one = 1;
  ::setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(s.fd(), asSockaddr(addr), addr.length) != 0) {
    fail(tidalSystemError, "cannot listen on {}: bind failed: {}", addr.toString(),
         errnoText(errno));
  }
  // The kernel clamps to net.core.somaxconn; ask for plenty so that a whole
  // job connecting to the root at once is not refused.
  if (::listen(s.fd(), 16384) != 0) {
    fail(tidalSystemError, "listen on {} failed: {}", addr.toString(), errnoText(errno));
  }
  return s;
}

SocketAddress Socket::localAddress() const {
  SocketAddress a;
  a.length = sizeof a.storage;
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&a.storage), &a.length) != 0) {
    fail(tidalSystemError, "getsockname failed: {}", errnoText(errno));
  }
  return a;
}

SocketAddress Socket::peerAddress() const {
  SocketAddress a;
  a.length = sizeof a.storage;
  if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&a.storage), &a.length) != 0) {
    return SocketAddress{};
  }
  return a;
}

Socket Socket::connectTo(const SocketAddress& addr, Deadline deadline, const std::string& what) {
  const auto start = Clock::now();
  auto backoff = std::chrono::milliseconds(10);
  int lastError = 0;
  for (int attempt = 0;; ++attempt) {
    Socket s;
    lastError = connectOnce(addr, deadline, s);
    if (lastError == 0) {
      const int flags = ::fcntl(s.fd(), F_GETFL, 0);
      if (flags >= 0) ::fcntl(s.fd(), F_SETFL, flags & ~O_NONBLOCK);
      s.setNoDelay();
      return s;
    }
    if (!retriableConnectError(lastError)) {
      fail(tidalSystemError, "{}: connect to {} failed: {}", what, addr.toString(),
           errnoText(lastError));
    }
    if (Clock::now() + backoff >= deadline) break;
    TIDAL_TRACE(Net, "{}: connect to {} attempt {}: {}; retrying", what, addr.toString(), attempt,
                errnoText(lastError));
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
  }
  fail(tidalTimeout, "{}: timed out after {} s connecting to {} (last error: {})", what,
       secondsSince(start), addr.toString(), errnoText(lastError));
}

Socket Socket::tryAccept(SocketAddress* peer) {
  for (;;) {
    SocketAddress a;
    a.length = sizeof a.storage;
    const int fd = ::accept4(fd_, reinterpret_cast<sockaddr*>(&a.storage), &a.length, SOCK_CLOEXEC);
    if (fd >= 0) {
      if (peer) *peer = a;
      Socket s(fd);
      s.setNoDelay();
      return s;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Socket{};
    fail(tidalSystemError, "accept on {} failed: {}", localAddress().toString(), errnoText(errno));
  }
}

Socket Socket::accept(Deadline deadline, const std::string& what) {
  const auto start = Clock::now();
  for (;;) {
    if (Socket s = tryAccept(nullptr); s.valid()) return s;
    pollfd p{fd_, POLLIN, 0};
    const int r = ::poll(&p, 1, pollTimeoutMs(deadline));
    if (r < 0 && errno != EINTR)
      fail(tidalSystemError, "{}: poll failed: {}", what, errnoText(errno));
    if (r == 0 && Clock::now() >= deadline) {
      fail(tidalTimeout, "{}: timed out after {} s waiting for a connection", what,
           secondsSince(start));
    }
    if (r > 0 && (p.revents & (POLLERR | POLLHUP | POLLNVAL)) != 0) {
      fail(tidalRemoteError, "{}: listening socket was shut down", what);
    }
  }
}

size_t Socket::sendSome(const void* data, size_t bytes, const std::string& what) {
  for (;;) {
    const ssize_t n = ::send(fd_, data, bytes, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    if (errno == EPIPE || errno == ECONNRESET) {
      fail(tidalRemoteError, "{}: connection closed by the peer ({})", what, errnoText(errno));
    }
    fail(tidalSystemError, "{}: send failed: {}", what, errnoText(errno));
  }
}

size_t Socket::recvSome(void* data, size_t bytes, const std::string& what) {
  for (;;) {
    const ssize_t n = ::recv(fd_, data, bytes, MSG_DONTWAIT);
    if (n > 0) return static_cast<size_t>(n);
    if (n == 0) {
      if (bytes == 0) return 0;
      fail(tidalRemoteError, "{}: connection closed by the peer", what);
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    if (errno == ECONNRESET || errno == EPIPE) {
      fail(tidalRemoteError, "{}: connection reset by the peer ({})", what, errnoText(errno));
    }
    fail(tidalSystemError, "{}: recv failed: {}", what, errnoText(errno));
  }
}

namespace {

// Waits until `fd` is ready for `events` or the deadline passes; false on timeout.
bool waitReady(int fd, short events, Deadline deadline, const std::string& what) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, pollTimeoutMs(deadline));
    if (r > 0) return true;  // errors and hang-ups surface in the next send/recv
    if (r == 0) {
      if (Clock::now() >= deadline) return false;
      continue;
    }
    if (errno != EINTR) fail(tidalSystemError, "{}: poll failed: {}", what, errnoText(errno));
  }
}

}  // namespace

void Socket::sendAll(const void* data, size_t bytes, Deadline deadline, const std::string& what) {
  const auto* p = static_cast<const uint8_t*>(data);
  size_t done = 0;
  while (done < bytes) {
    const size_t n = sendSome(p + done, bytes - done, what);
    done += n;
    if (n == 0 && !waitReady(fd_, POLLOUT, deadline, what)) {
      fail(tidalTimeout, "{}: timed out sending ({} of {} bytes sent)", what, done, bytes);
    }
  }
}

void Socket::recvAll(void* data, size_t bytes, Deadline deadline, const std::string& what) {
  auto* p = static_cast<uint8_t*>(data);
  size_t done = 0;
  while (done < bytes) {
    const size_t n = recvSome(p + done, bytes - done, what);
    done += n;
    if (n == 0 && !waitReady(fd_, POLLIN, deadline, what)) {
      fail(tidalTimeout, "{}: timed out receiving ({} of {} bytes received)", what, done, bytes);
    }
  }
}

}  // namespace tidal
