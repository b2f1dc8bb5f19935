// The TCP transport: the fallback that always works.
//
// Each rank listens on the interface chosen by TIDAL_SOCKET_IFNAME. A send
// connection to a peer is TIDAL_NSOCKS sockets, each opened with a hello that
// carries the job secret, both ranks and the socket's index. The one
// HelloAcceptor (net/hello_acceptor.h) reads them and refuses (WARN + close)
// strangers; this file refuses hellos that do not fit (ranks, socket count)
// and keeps waiting for the real peer.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <utility>

#include "net/hello_acceptor.h"
#include "transports/transport.h"

namespace tidal {

class TcpTransport final : public Transport {
 public:
  explicit TcpTransport(const TransportContext& ctx);
  ~TcpTransport() override;

  const char* name() const override { return "tcp"; }
  bool supports(MemoryKind kind) const override { return kind == MemoryKind::Host; }

  ConnectHandle listen() override;
  std::unique_ptr<Connection> connectSend(int peer, const ConnectHandle& peerHandle,
                                          Deadline deadline) override;
  std::unique_ptr<Connection> acceptRecv(int peer, Deadline deadline) override;

  MemoryRegistration registerMemory(void* ptr, size_t bytes, MemoryKind kind) override {
    return {ptr, bytes, kind, 0};
  }
  void deregisterMemory(const MemoryRegistration&) override {}
  void abort() override;

 private:
  // Files an authenticated socket under (rank, index) in arrived_, or
  // refuses it.
  void file(AcceptedHello& hello);
  bool complete(int peer) const;

  TransportContext ctx_;
  int nsocks_;
  Socket listener_;
  SocketAddress listenAddress_;
  // Outlives each acceptRecv call with the connections whose hello is still
  // incomplete: a peer's hello may straddle the moment another peer's
  // connection completes, and dropping it then would strand that peer.
  std::unique_ptr<HelloAcceptor> acceptor_;
  // Vetted sockets that arrived before anyone asked for them: (peer, index).
  std::map<std::pair<int, int>, Socket> arrived_;
  std::atomic<bool> aborted_{false};
};

}  // namespace tidal
