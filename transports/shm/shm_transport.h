// The shm transport: ranks on one host move data through shared memory.
//
// Each rank listens on a unix-domain stream socket in the abstract namespace
// (no file anywhere; the name dies with the socket), named by pid and a
// random tag. connectSend creates the connection's segment with memfd_create
// (anonymous: nothing in /dev/shm, nothing left behind even on SIGKILL),
// pre-faults it, and sends a hello - job secret, both ranks, ring geometry -
// followed by one byte with the memfd and two eventfds attached (SCM_RIGHTS).
// acceptRecv reads hellos through the one HelloAcceptor (net/hello_acceptor.h),
// which names each peer by the pid and uid SO_PEERCRED reports and refuses
// strangers with a WARN; only from a peer that presented the secret does it
// then take the descriptors, vet the segment and map it. Connections whose
// hello has not arrived yet stay with the acceptor across calls.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <string>

#include "net/hello_acceptor.h"
#include "transports/shm/fd_passing.h"
#include "transports/shm/shm_connection.h"
#include "transports/transport.h"

namespace tidal::shm {

class ShmTransport final : public Transport {
 public:
  explicit ShmTransport(const TransportContext& ctx);
  ~ShmTransport() override;

  const char* name() const override { return "shm"; }
  bool supports(MemoryKind kind) const override { return kind == MemoryKind::Host; }

  ConnectHandle listen() override;
  std::unique_ptr<Connection> connectSend(int peer, const ConnectHandle& peerHandle,
                                          Deadline deadline) override;
  std::unique_ptr<Connection> acceptRecv(int peer, Deadline deadline) override;

  // The kernel / our memcpy moves the bytes: nothing to register.
  MemoryRegistration registerMemory(void* ptr, size_t bytes, MemoryKind kind) override {
    return {ptr, bytes, kind, 0};
  }
  void deregisterMemory(const MemoryRegistration&) override {}
  void abort() override;

 private:
  // Vets an authenticated hello, takes the descriptors that follow it and
  // files the connection in arrived_, or refuses it.
  void file(AcceptedHello& hello);

  TransportContext ctx_;
  size_t slots_;
  size_t slotBytes_;
  uint64_t pullMinBytes_;         // TIDAL_SHM_PULL_BYTES
  uint64_t payloadPullMinBytes_;  // TIDAL_SHM_P2P_PULL_BYTES
  // Same host and network namespace as the listener, or connecting is moot.
  std::string hostKey_;
  std::string socketName_;
  Socket listener_;
  std::unique_ptr<HelloAcceptor> acceptor_;
  // Vetted connections that arrived before anyone asked for them.
  std::map<int, ShmConnection::Parts> arrived_;
  std::atomic<bool> aborted_{false};
};

}  // namespace tidal::shm
