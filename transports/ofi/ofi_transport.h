// The ofi transport: libfabric's reliable-datagram endpoints, the way EFA is
// reached on AWS (docs/transports.md, "ofi").
//
// One RDM endpoint per rank and communicator (ofi_endpoint.h); its address
// (fi_getname) is the connect handle. A send connection inserts the peer's
// address into the address vector; a receive connection needs no address,
// because every chunk is matched by its tag (ofi_connection.h). So connect
// and accept never wait for the peer: the first message does.
//
// Forced with TIDAL_NET=ofi; TIDAL_OFI_PROVIDER (else libfabric's own
// FI_PROVIDER) picks the provider. Without TIDAL_NET it is offered only where
// it is wanted: TIDAL_OFI_PROVIDER is set, or the host has an EFA adapter
// (then with the efa provider); elsewhere listen() returns an empty handle
// without loading libfabric, and a provider that cannot be opened makes it
// step aside with a warning (tcp carries the traffic). Host memory only.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "transports/ofi/ofi_endpoint.h"
#include "transports/transport.h"

namespace tidal::ofi {

class OfiTransport final : public Transport {
 public:
  explicit OfiTransport(const TransportContext& ctx);
  ~OfiTransport() override;

  const char* name() const override { return "ofi"; }
  bool supports(MemoryKind kind) const override { return kind == MemoryKind::Host; }

  ConnectHandle listen() override;
  std::unique_ptr<Connection> connectSend(int peer, const ConnectHandle& peerHandle,
                                          Deadline deadline) override;
  std::unique_ptr<Connection> acceptRecv(int peer, Deadline deadline) override;

  // Host memory needs no up-front registration: with FI_MR_LOCAL each
  // operation registers what it moves (Endpoint::describeMemory).
  MemoryRegistration registerMemory(void* ptr, size_t bytes, MemoryKind kind) override;
  void deregisterMemory(const MemoryRegistration&) override {}
  void abort() override {}
  // The endpoint: libfabric 1.17's net provider drops the messages a peer
  // saved from this endpoint, unmatched, when it closes.
  std::shared_ptr<KeptOpen> keepOpenUntilAllDone() override { return endpoint_; }

 private:
  // The provider to open when the communicator chose transports itself,
  // or nullopt when ofi is not to be offered (with the reason in *why).
  std::optional<std::string> autoProvider(std::string* why) const;
  void openEndpoint(const std::string& provider);

  TransportContext ctx_;
  std::shared_ptr<Endpoint> endpoint_;
};

}  // namespace tidal::ofi
