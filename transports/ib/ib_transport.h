// The ib transport: InfiniBand verbs, RoCE v2 included, over libibverbs
// (dlopened: see verbs_api.h).
//
// listen() finds the active ports TIDAL_IB_HCA selects and takes this
// rank's rails among them: several where the topology's nearest NICs or
// TIDAL_IB_HCA's list give several (up to TIDAL_IB_MAX_RAILS), else the one
// port (rank % count) (device_select.h); it opens each, chooses its GID,
// and listens on one TCP side channel for all of them. Where there is no
// usable port it returns an empty handle: the communicator then does not
// offer ib for this rank, and pairs fall back to tcp; with TIDAL_NET=ib
// that is an error naming what was found. connectSend opens QPs and sends
// the hello (no waiting for the peer: the set-up finishes inside the
// connection's progress); acceptRecv vets hellos (job secret, ranks,
// geometry, rails, address family) like the tcp transport vets its
// sockets, builds the receive side and replies. With several rails on both
// ends a connection is an IbRailsConnection over the first min(both
// counts) rails, each set up by its own hello.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

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

  // The first rail's port, or null before listen() or when ib is not offered.
  IbDevice* device() const { return devices_.empty() ? nullptr : devices_.front().get(); }
  // Every rail's port, in rail order.
  const std::vector<std::shared_ptr<IbDevice>>& devices() const { return devices_; }

 private:
  // Why the vetted hello cannot be served, or empty.
  std::string helloProblem(const Hello& hello) const;
  // Files an authenticated hello in arrived_, or refuses it (WARN + reject).
  void file(AcceptedHello& hello);
  // The hello of `peer`'s rail `rail`, vetted, once it has arrived.
  AcceptedHello awaitHello(int peer, uint32_t rail, Deadline deadline);
  // The INFO line for a connection that uses fewer rails than a side offers.
  void logRailFallback(int peer, const ListenInfo& info, size_t used) const;

  TransportContext ctx_;
  ConnectionGeometry geometry_;
  QpOptions options_;
  size_t maxRails_;
  std::vector<std::shared_ptr<IbDevice>> devices_;
  Socket listener_;
  std::unique_ptr<HelloAcceptor> acceptor_;
  std::map<std::pair<int, uint32_t>, AcceptedHello> arrived_;  // by (rank, rail)
  // Explicit registrations: one per rail's device, in rail order.
  std::map<void*, std::vector<RegistrationCache::Entry*>> pinned_;
  std::atomic<bool> aborted_{false};
};

}  // namespace tidal::ib
