// The TCP transport: the fallback that always works.
//
// Each rank listens on the interface chosen by TIDAL_SOCKET_IFNAME. A send
// connection to a peer is TIDAL_NSOCKS sockets, each opened with a hello that
// carries the job secret, both ranks and the socket's index; the acceptor
// refuses (WARN + close) anything else and keeps waiting for the real peer.
#pragma once

#include <atomic>
#include <list>
#include <map>
#include <utility>
#include <vector>

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
  struct Pending;
  // Accepts and vets connections until `peer` has all its sockets here.
  void acceptUntilComplete(int peer, Deadline deadline);
  // Reads what a pending socket has; returns true when it is finished with it
  // (vetted and filed, or refused).
  bool servicePending(Pending& pending);

  TransportContext ctx_;
  int nsocks_;
  Socket listener_;
  SocketAddress listenAddress_;
  // Vetted sockets that arrived before anyone asked for them: (peer, index).
  std::map<std::pair<int, int>, Socket> arrived_;
  // Accepted sockets whose hello is still incomplete. They outlive one
  // acceptRecv call: a peer's hello may straddle the moment another peer's
  // connection completes, and dropping it then would strand that peer.
  std::list<Pending> pending_;
  std::atomic<bool> aborted_{false};
};

}  // namespace tidal
