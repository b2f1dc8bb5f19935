// The one interface every transport implements (tcp now; shm, ib, ofi,
// cuda_ipc later). Modelled on network plugins that have worked in practice:
// connection oriented, non-blocking, registered memory.
//
// Connections are one-directional: a rank opens a send connection to a peer
// (connectSend) and the peer accepts it as a receive connection (acceptRecv).
// A ring therefore needs one of each, and two ranks that talk both ways hold
// two connections, which keeps every queue single-producer single-consumer.
//
// Ordering contract: transfers on one connection complete in the order they
// were posted, and the receiver posts exactly the same sequence of sizes as
// the sender (schedules are deterministic), so no per-message header travels.
#pragma once

#include <poll.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/memory_kind.h"
#include "core/secret.h"
#include "core/socket.h"

namespace tidal {

namespace topo {
struct Placement;  // topology/placement.h
}

// Bounded, opaque bytes a peer needs to reach our listener; exchanged through
// the bootstrap allGather.
inline constexpr size_t kMaxConnectHandleBytes = 256;
using ConnectHandle = std::vector<uint8_t>;

// Combines arriving data into place for a receive that reduces; the engine
// supplies it, so transports stay free of reduction code.
class ArrivalReducer {
 public:
  virtual ~ArrivalReducer() = default;
  // dst[i] = local[i] OP incoming[i] over `bytes` (a whole number of elements).
  virtual void combine(void* dst, const void* local, const void* incoming, size_t bytes) const = 0;
};

class Connection {
 public:
  virtual ~Connection() = default;

  virtual int peer() const = 0;
  // Queues a transfer of `bytes` from (send) or into (receive) `data`, which
  // must stay valid until completed() counts it. Never blocks.
  virtual void post(void* data, size_t bytes) = 0;
  // A Send/Recv payload piece (both sides post it this way): a transport
  // that can copy straight from the sender's buffer into the receiver's may
  // do so, when `singleCopy` (the sender's choice; the receiver learns it
  // from the transfer). Default: an ordinary post.
  virtual void postPayload(void* data, size_t bytes, bool singleCopy) {
    (void)singleCopy;
    post(data, bytes);
  }
  // Moves what can move without blocking. Returns true if any byte moved.
  // Throws tidal::Error(RemoteError) when the peer is gone.
  virtual bool progress() = 0;
  // Number of posted transfers that have fully completed, in post order.
  virtual uint64_t completed() const = 0;
  virtual uint64_t posted() const = 0;
  // Receive connections whose bytes arrive in memory this process can read
  // (shm: the ring) may reduce them straight into place instead of landing
  // them in a staging slot first: one pass over the data instead of two, and
  // no staging credit. postReduce queues such a receive: as bytes arrive,
  // reducer.combine(dst + k, local + k, incoming, n) runs over them, cut at
  // whole elements; the transfer completes when every byte is combined.
  // `local` must not change and `dst` must not be read by anyone else until
  // then.
  virtual bool canReduceOnArrival() const { return false; }
  virtual void postReduce(void* dst, const void* local, size_t bytes,
                          const ArrivalReducer& reducer);
  // File descriptors (and events) to sleep on when progress() moved nothing.
  virtual void addPollFds(std::vector<pollfd>& fds) const = 0;
  // Where the two sides wait, for a busy-polling wait that may have to move:
  // a rank in a long wait publishes the CPU it spins on (-1 once the wait is
  // over), and a connection that can see the peer's (shm: in the shared
  // segment) says whether the peer is waiting on `cpu` now. Two ranks that
  // busy-poll on one CPU hold each other off until a time slice ends
  // (Engine, "moving off a shared CPU"). Others know nothing: false.
  virtual void publishCpu(int cpu) { (void)cpu; }
  virtual bool peerWaitsOnCpu(int cpu) const {
    (void)cpu;
    return false;
  }
  // Wakes any waiter and makes later calls fail; safe from another thread.
  virtual void abort() = 0;
  // One line for logs, e.g. "tcp 10.0.0.2:4312 x2 sockets".
  virtual std::string describe() const = 0;
};

// A registered memory region. TCP needs none (the kernel copies); RDMA
// transports pin and map here.
struct MemoryRegistration {
  void* ptr = nullptr;
  size_t bytes = 0;
  MemoryKind kind = MemoryKind::Host;
  uint64_t key = 0;  // transport-specific (an rkey, ...)
};

struct TransportContext {
  int rank = 0;
  int nranks = 0;
  Secret secret{};
  // This rank's place on its host (local rank, GPU, nearest NICs, GDR by
  // distance), decided at communicator init; null when unknown.
  std::shared_ptr<const topo::Placement> placement{};
};

// What a transport keeps open after its connections are gone
// (Transport::keepOpenUntilAllDone); closed when the last holder lets go.
class KeptOpen {
 public:
  virtual ~KeptOpen() = default;
  // Does what the provider still owes the peers that are finishing
  // (acknowledgements of what they sent, queued bytes); called every few
  // milliseconds until it closes. Must not block.
  virtual void progress() = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;

  virtual const char* name() const = 0;
  // Which pointer kinds this transport moves without staging.
  virtual bool supports(MemoryKind kind) const = 0;

  // Starts listening; the handle goes to every peer through the bootstrap.
  virtual ConnectHandle listen() = 0;
  virtual std::unique_ptr<Connection> connectSend(int peer, const ConnectHandle& peerHandle,
                                                  Deadline deadline) = 0;
  virtual std::unique_ptr<Connection> acceptRecv(int peer, Deadline deadline) = 0;

  virtual MemoryRegistration registerMemory(void* ptr, size_t bytes, MemoryKind kind) = 0;
  virtual void deregisterMemory(const MemoryRegistration& registration) = 0;

  // Stops any blocking accept/connect; safe from another thread.
  virtual void abort() = 0;

  // What must stay open after this transport's connections are gone, until
  // every rank has destroyed the communicator; null for nothing. A transport
  // whose peers may drop messages that reached them unmatched once this
  // side closes returns its endpoint (comm/close_when_all_done.h).
  virtual std::shared_ptr<KeptOpen> keepOpenUntilAllDone() { return nullptr; }
};

// Creates a transport by name ("tcp"); throws InvalidArgument listing the
// available names for an unknown one.
std::unique_ptr<Transport> createTransport(const std::string& name, const TransportContext& ctx);
// Names createTransport accepts, for tidal-info and error messages.
std::vector<std::string> availableTransports();

}  // namespace tidal
