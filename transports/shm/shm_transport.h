// The shm transport: ranks on one host move data through shared memory.
//
// Each rank listens on a unix-domain SOCK_SEQPACKET socket in the abstract
// namespace (no file anywhere; the name dies with the socket), named by pid
// and a random tag. connectSend creates the connection's segment with
// memfd_create (anonymous: nothing in /dev/shm, nothing left behind even on
// SIGKILL), pre-faults it, and sends one hello message - job secret, both
// ranks, ring geometry - with the memfd and two eventfds attached
// (SCM_RIGHTS). acceptRecv vets the hello like tcp does (a stranger gets a
// WARN and is closed; the real peer is still awaited) and maps the segment.
// A SEQPACKET message arrives whole or not at all, so a hello is never seen
// half-read; sockets whose hello has not arrived yet are kept across calls.
#pragma once

#include <atomic>
#include <list>
#include <map>
#include <string>

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
  struct Pending;
  // Reads a pending socket's hello if it came; returns true when finished
  // with it (vetted and filed in arrived_, or refused).
  bool servicePending(Pending& pending);

  TransportContext ctx_;
  size_t slots_;
  size_t slotBytes_;
  // Same host and network namespace as the listener, or connecting is moot.
  std::string hostKey_;
  std::string socketName_;
  UniqueFd listener_;
  std::list<Pending> pending_;
  // Vetted connections that arrived before anyone asked for them.
  std::map<int, ShmConnection::Parts> arrived_;
  std::atomic<bool> aborted_{false};
};

}  // namespace tidal::shm
