#include "transports/tcp/tcp_transport.h"

#include <cstring>

#include "core/error.h"
#include "core/log.h"
#include "core/params.h"
#include "net/wire.h"
#include "transports/tcp/tcp_connection.h"

namespace tidal {

namespace {

// 2: the hello in wire.h framing, read by HelloAcceptor.
constexpr uint16_t kHelloVersion = 2;
constexpr int kMaxSockets = 64;

// The hello after the secret, little-endian: version u16, socket index u16,
// socket count u16, from rank u32, to rank u32.
struct Hello {
  uint16_t version = 0;
  uint16_t socketIndex = 0;
  uint16_t nsocks = 0;
  int32_t fromRank = 0;
  int32_t toRank = 0;
};
constexpr size_t kHelloBodyBytes = 3 * 2 + 2 * 4;

std::vector<uint8_t> encodeHello(const Secret& secret, const Hello& h) {
  std::vector<uint8_t> out;
  wire::Writer w(out);
  w.bytes(secret.data(), secret.size());
  w.u16(h.version);
  w.u16(h.socketIndex);
  w.u16(h.nsocks);
  w.u32(static_cast<uint32_t>(h.fromRank));
  w.u32(static_cast<uint32_t>(h.toRank));
  return out;
}

Hello decodeHello(const std::vector<uint8_t>& body) {
  wire::Reader r(body.data(), body.size(), "tcp hello");
  Hello h;
  h.version = r.u16();
  h.socketIndex = r.u16();
  h.nsocks = r.u16();
  h.fromRank = static_cast<int32_t>(r.u32());
  h.toRank = static_cast<int32_t>(r.u32());
  return h;
}

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
  acceptor_ = std::make_unique<HelloAcceptor>(
      listener_, wire::MsgType::TcpHello, sizeof(Secret) + kHelloBodyBytes, ctx_.secret,
      fmt::format("rank {} tcp listener {}", ctx_.rank, listenAddress_.toString()),
      log::Subsys::Net);
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
    const Hello hello{kHelloVersion, static_cast<uint16_t>(i), static_cast<uint16_t>(nsocks_),
                      ctx_.rank, peer};
    const std::vector<uint8_t> payload = encodeHello(ctx_.secret, hello);
    wire::sendMessage(s, wire::MsgType::TcpHello, payload.data(), payload.size(), deadline,
                      fmt::format("hello to rank {}", peer));
    sockets.push_back(std::move(s));
  }
  return std::make_unique<TcpConnection>(
      ctx_.rank, peer, TcpConnection::Direction::Send, std::move(sockets),
      fmt::format("tcp {} x{} sockets", addr.toString(), nsocks_));
}

void TcpTransport::file(AcceptedHello& accepted) {
  const Hello h = decodeHello(accepted.body);
  std::string problem;
  if (h.version != kHelloVersion) {
    problem =
        fmt::format("tcp protocol version {} (this library speaks {})", h.version, kHelloVersion);
  } else if (h.toRank != ctx_.rank || h.fromRank < 0 || h.fromRank >= ctx_.nranks ||
             h.nsocks != nsocks_ || h.socketIndex >= h.nsocks) {
    problem = fmt::format(
        "inconsistent ranks or socket count: socket {} of {} from rank {} to rank {} (check "
        "TIDAL_NSOCKS is the same everywhere)",
        h.socketIndex, h.nsocks, h.fromRank, h.toRank);
  } else if (arrived_.count({h.fromRank, h.socketIndex})) {
    problem = fmt::format("duplicate socket {} from rank {}", h.socketIndex, h.fromRank);
  }
  if (!problem.empty()) {
    acceptor_->warnDropped(accepted.peer, problem);
    return;
  }
  arrived_.emplace(std::pair<int, int>{h.fromRank, h.socketIndex}, std::move(accepted.socket));
}

bool TcpTransport::complete(int peer) const {
  for (int i = 0; i < nsocks_; ++i) {
    if (!arrived_.count({peer, i})) return false;
  }
  return true;
}

std::unique_ptr<Connection> TcpTransport::acceptRecv(int peer, Deadline deadline) {
  if (!acceptor_) {
    fail(tidalInternalError, "rank {}: tcp accept from rank {} before listen", ctx_.rank, peer);
  }
  acceptor_->serveUntil([&] { return complete(peer); }, [&](AcceptedHello& hello) { file(hello); },
                        deadline, aborted_, fmt::format("rank {} to connect", peer));
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
