// The ib transport: InfiniBand verbs, RoCE v2 included, over libibverbs
// (dlopened: see verbs_api.h).
//
// listen() finds the active ports TIDAL_IB_HCA selects and takes port
// (rank % count), chooses its GID (device_select.h), opens it and listens
// on a TCP side channel. Where there is no usable port it returns an empty
// handle: the communicator then does not offer ib for this rank, and pairs
// fall back to tcp; with TIDAL_NET=ib that is an error naming what was
// found. connectSend opens QPs and sends the hello (no waiting for the peer:
// the set-up finishes inside the connection's progress); acceptRecv vets
// hellos (job secret, ranks, geometry, address family) like the tcp
// transport vets its sockets, builds the receive side and replies.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <optional>

#include "net/hello_acceptor.h"
#include "transports/ib/ib_device.h"
#include "transports/ib/protocol.h"
#include "transports/transport.h"

namespace tidal::ib {

class IbTransport final : public Transport {
 public:
  explicit IbTransport(const TransportContext& ctx);
  ~IbTransport() override;

  const char* name() const override { return "ib"; }
  bool supports(MemoryKind kind) const override;

  ConnectHandle listen() override;
  std::unique_ptr<Connection> connectSend(int peer, const ConnectHandle& peerHandle,
                                          Deadline deadline) override;
  std::unique_ptr<Connection> acceptRecv(int peer, Deadline deadline) override;

  MemoryRegistration registerMemory(void* ptr, size_t bytes, MemoryKind kind) override;
  void deregisterMemory(const MemoryRegistration& registration) override;
  void abort() override;

  // The opened port, or null before listen() or when ib is not offered.
  IbDevice* device() const { return device_.get(); }

 private:
  // Why the vetted hello cannot be served, or empty.
  std::string helloProblem(const Hello& hello) const;
  // Files an authenticated hello in arrived_, or refuses it (WARN + reject).
  void file(AcceptedHello& hello);

  TransportContext ctx_;
  ConnectionGeometry geometry_;
  QpOptions options_;
  std::shared_ptr<IbDevice> device_;
  Socket listener_;
  std::unique_ptr<HelloAcceptor> acceptor_;
  std::map<int, AcceptedHello> arrived_;
  std::map<void*, RegistrationCache::Entry*> pinned_;
  std::atomic<bool> aborted_{false};
};

}  // namespace tidal::ib
