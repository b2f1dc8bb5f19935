#include "transports/tcp/tcp_transport.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <list>
#include <thread>

#include "core/error.h"
#include "core/log.h"
#include "core/params.h"
#include "transports/tcp/tcp_connection.h"

namespace tidal {

namespace {

constexpr uint32_t kHelloMagic = 0x5444444cu;  // "TDDL"
constexpr uint16_t kHelloVersion = 1;
constexpr int kMaxSockets = 64;
// A connection that has not said hello within this long is dropped, so a
// silent stranger cannot hold up the real peers.
constexpr auto kHelloPatience = std::chrono::seconds(5);

struct Hello {
  uint32_t magic;
  uint16_t version;
  uint16_t socketIndex;
  uint16_t nsocks;
  uint16_t reserved;
  int32_t fromRank;
  int32_t toRank;
  uint8_t secret[16];
};
static_assert(sizeof(Hello) == 36);

ConnectHandle encodeAddress(const SocketAddress& addr) {
  ConnectHandle h(sizeof(addr.length) + addr.length);
  std::memcpy(h.data(), &addr.length, sizeof(addr.length));
  std::memcpy(h.data() + sizeof(addr.length), &addr.storage, addr.length);
  return h;
}

SocketAddress decodeAddress(const ConnectHandle& h, int selfRank, int peer) {
  SocketAddress addr;
  if (h.size() < sizeof(addr.length)) {
    fail(tidalInternalError, "rank {}: tcp handle of rank {} is {} bytes", selfRank, peer,
         h.size());
  }
  std::memcpy(&addr.length, h.data(), sizeof(addr.length));
  if (addr.length == 0 || addr.length > sizeof(addr.storage) ||
      h.size() != sizeof(addr.length) + addr.length) {
    fail(tidalInternalError, "rank {}: malformed tcp handle from rank {}", selfRank, peer);
  }
  std::memcpy(&addr.storage, h.data() + sizeof(addr.length), addr.length);
  return addr;
}

}  // namespace

struct TcpTransport::Pending {
  Socket socket;
  std::string from;
  Hello hello{};
  size_t have = 0;
  Clock::time_point since = Clock::now();
};

TcpTransport::~TcpTransport() = default;

TcpTransport::TcpTransport(const TransportContext& ctx) : ctx_(ctx) {
  const int64_t n = params::getInt("TIDAL_NSOCKS");
  if (n < 1 || n > kMaxSockets) {
    fail(tidalInvalidArgument, "rank {}: TIDAL_NSOCKS={} is out of range 1..{}", ctx.rank, n,
         kMaxSockets);
  }
  nsocks_ = static_cast<int>(n);
}

ConnectHandle TcpTransport::listen() {
  listener_ = Socket::listenOn(localInterfaceAddress());
  listener_.setNonBlocking();
  listenAddress_ = listener_.localAddress();
  TIDAL_INFO(Net, "rank {}: tcp listening on {} ({})", ctx_.rank, listenAddress_.toString(),
             localInterfaceName());
  return encodeAddress(listenAddress_);
}

std::unique_ptr<Connection> TcpTransport::connectSend(int peer, const ConnectHandle& peerHandle,
                                                      Deadline deadline) {
  const SocketAddress addr = decodeAddress(peerHandle, ctx_.rank, peer);
  std::vector<Socket> sockets;
  for (int i = 0; i < nsocks_; ++i) {
    Socket s = Socket::connectTo(addr, deadline, fmt::format("rank {} data listener", peer));
    s.setNoDelay();
    Hello hello{kHelloMagic,
                kHelloVersion,
                static_cast<uint16_t>(i),
                static_cast<uint16_t>(nsocks_),
                0,
                ctx_.rank,
                peer,
                {}};
    std::memcpy(hello.secret, ctx_.secret.data(), sizeof hello.secret);
    s.sendAll(&hello, sizeof hello, deadline, fmt::format("hello to rank {}", peer));
    sockets.push_back(std::move(s));
  }
  return std::make_unique<TcpConnection>(
      ctx_.rank, peer, TcpConnection::Direction::Send, std::move(sockets),
      fmt::format("tcp {} x{} sockets", addr.toString(), nsocks_));
}

bool TcpTransport::servicePending(Pending& p) {
  auto* bytes = reinterpret_cast<char*>(&p.hello);
  while (p.have < sizeof(Hello)) {
    const ssize_t n = ::recv(p.socket.fd(), bytes + p.have, sizeof(Hello) - p.have, MSG_DONTWAIT);
    if (n > 0) {
      p.have += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EINTR)) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (Clock::now() - p.since > kHelloPatience) {
        TIDAL_WARN(Net, "rank {}: dropped connection from {}: no hello within {} s", ctx_.rank,
                   p.from, kHelloPatience.count());
        return true;
      }
      return false;
    }
    TIDAL_WARN(Net, "rank {}: dropped connection from {}: closed before its hello", ctx_.rank,
               p.from);
    return true;
  }
  const Hello& h = p.hello;
  Secret secret;
  std::memcpy(secret.data(), h.secret, secret.size());
  const char* problem = nullptr;
  if (h.magic != kHelloMagic) {
    problem = "not a Tidal data connection (bad magic)";
  } else if (h.version != kHelloVersion) {
    problem = "protocol version mismatch";
  } else if (!secretsEqual(secret, ctx_.secret)) {
    problem = "wrong job secret";
  } else if (h.toRank != ctx_.rank || h.fromRank < 0 || h.fromRank >= ctx_.nranks ||
             h.nsocks != nsocks_ || h.socketIndex >= h.nsocks) {
    problem = "inconsistent ranks or socket count (check TIDAL_NSOCKS is the same everywhere)";
  }
  if (problem) {
    TIDAL_WARN(Net, "rank {}: refused connection from {}: {}", ctx_.rank, p.from, problem);
    return true;
  }
  auto key = std::make_pair(static_cast<int>(h.fromRank), static_cast<int>(h.socketIndex));
  if (arrived_.count(key)) {
    TIDAL_WARN(Net, "rank {}: refused duplicate socket {} from rank {} ({})", ctx_.rank,
               h.socketIndex, h.fromRank, p.from);
    return true;
  }
  arrived_.emplace(key, std::move(p.socket));
  return true;
}

void TcpTransport::acceptUntilComplete(int peer, Deadline deadline) {
  auto& pending = pending_;
  auto complete = [&] {
    for (int i = 0; i < nsocks_; ++i) {
      if (!arrived_.count({peer, i})) return false;
    }
    return true;
  };
  while (!complete()) {
    if (aborted_)
      fail(tidalRemoteError, "rank {}: aborted while accepting rank {}", ctx_.rank, peer);
    if (Clock::now() > deadline) {
      fail(tidalTimeout,
           "rank {}: timed out after TIDAL_TIMEOUT={} s waiting for rank {} to connect to {}",
           ctx_.rank, params::getInt("TIDAL_TIMEOUT"), peer, listenAddress_.toString());
    }
    std::vector<pollfd> fds{{listener_.fd(), POLLIN, 0}};
    for (auto& p : pending) fds.push_back({p.socket.fd(), POLLIN, 0});
    ::poll(fds.data(), fds.size(), 100);
    for (;;) {
      sockaddr_storage from{};
      socklen_t len = sizeof from;
      const int fd = ::accept(listener_.fd(), reinterpret_cast<sockaddr*>(&from), &len);
      if (fd < 0) break;
      SocketAddress addr;
      addr.storage = from;
      addr.length = len;
      pending.push_back(Pending{Socket(fd), addr.toString()});
    }
    for (auto it = pending.begin(); it != pending.end();) {
      it = servicePending(*it) ? pending.erase(it) : std::next(it);
    }
  }
}

std::unique_ptr<Connection> TcpTransport::acceptRecv(int peer, Deadline deadline) {
  acceptUntilComplete(peer, deadline);
  std::vector<Socket> sockets;
  for (int i = 0; i < nsocks_; ++i) {
    auto it = arrived_.find({peer, i});
    it->second.setNoDelay();
    sockets.push_back(std::move(it->second));
    arrived_.erase(it);
  }
  return std::make_unique<TcpConnection>(
      ctx_.rank, peer, TcpConnection::Direction::Recv, std::move(sockets),
      fmt::format("tcp {} x{} sockets", listenAddress_.toString(), nsocks_));
}

void TcpTransport::abort() {
  aborted_ = true;
  listener_.shutdownBoth();
}

}  // namespace tidal
