// One libfabric RDM endpoint of a rank: fabric, domain, completion queue,
// address vector and endpoint, chosen by fi_getinfo and shared by every
// connection of one transport.
//
// Everything here is what EFA asks of a caller, done on every provider so
// that the code tested on tcp;ofi_rxm, udp;ofi_rxd and shm is the code that
// runs on EFA: a reliable-datagram (FI_EP_RDM) endpoint with tagged
// messages; mode FI_CONTEXT / FI_CONTEXT2 honoured (every operation carries
// an Operation whose first member is an fi_context2 the provider may use);
// FI_MR_LOCAL registration with FI_MR_PROV_KEY / FI_MR_ENDPOINT handled;
// manual progress (poll() drives it); the number of operations in flight
// bounded by the provider's tx and rx queue sizes; the RNR retry option set
// before the endpoint is enabled where the provider has it (efa).
//
// Thread safety: one mutex serialises every call into libfabric, so the
// domain is asked for FI_THREAD_DOMAIN only.
//
// Every call on the data path is watched (core/stuck_call_watch.h): one that
// has not returned after TIDAL_TIMEOUT ends the process with a report,
// because nothing can interrupt it (the shm provider's locks in shared
// memory stay held when their holder is killed).
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "core/stuck_call_watch.h"
#include "transports/ofi/ofi_api.h"
#include "transports/registration_cache.h"
#include "transports/transport.h"

namespace tidal::ofi {

class CompletionSink;

// FI_MR_LOCAL registrations, cached (transports/registration_cache.h).
using RegistrationCache = tidal::RegistrationCache<fid_mr>;

// One send or receive in flight. `context` must stay first: with mode
// FI_CONTEXT/FI_CONTEXT2 the provider owns the fi_context2 the op_context
// pointer points at until the completion is read.
struct Operation {
  fi_context2 context{};
  CompletionSink* sink = nullptr;  // null once its connection is gone
  uint64_t transfer = 0;           // the sink's transfer index
  size_t bytes = 0;
  RegistrationCache::Entry* registration = nullptr;  // FI_MR_LOCAL: the buffer's window
  bool recv = false;
};

// Where an endpoint delivers completions (a connection). Called under the
// endpoint's mutex, from whichever connection polled, so a sink's state that
// these touch is guarded by that mutex (Endpoint::Lock).
class CompletionSink {
 public:
  virtual void onStarted(Operation& op) = 0;
  virtual void onComplete(const Operation& op, size_t bytes) = 0;
  virtual void onError(const Operation& op, const std::string& why) = 0;

 protected:
  ~CompletionSink() = default;
};

// When a send counts as complete (TIDAL_OFI_COMPLETION). The engine
// progresses a manual-progress provider only inside a call, so a send must
// not complete while its data still needs this process: that is what
// FI_TRANSMIT_COMPLETE promises. Some providers' own default already does:
// net reports a send once all of it is written to the kernel's socket, and
// its FI_TRANSMIT_COMPLETE costs a round trip more (it waits for the peer's
// acknowledgement): a 2-rank 8-byte AllReduce took 22 us with it, 12 without.
enum class SendCompletion {
  Auto,      // the provider's default where it is known to suffice (net), else Transmit
  Transmit,  // FI_TRANSMIT_COMPLETE where the provider offers it
  Provider,  // the provider's default, whatever it means
};
// "auto", "transmit" or "provider"; throws InvalidArgument naming the
// variable, the value and the rank otherwise.
SendCompletion parseSendCompletion(const std::string& text, int rank);

class Endpoint final : public KeptOpen {
 public:
  // Opens the endpoint on the first fi_info that fi_getinfo offers for
  // `provider` ("" lets libfabric choose; FI_PROVIDER filters as usual).
  // Throws InvalidArgument naming the provider and listing the ones offered
  // when there is none. `registerAlways` registers every buffer even where
  // the provider does not ask for FI_MR_LOCAL (to exercise EFA's path).
  Endpoint(const OfiApi& api, int rank, const std::string& provider, bool registerAlways,
           SendCompletion completion);
  ~Endpoint() override;
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  // This endpoint's address (fi_getname): the connect handle.
  ConnectHandle address() const { return address_; }
  // Inserts a peer's address into the address vector (once per peer).
  // Throws RemoteError naming the peer when the address is refused.
  fi_addr_t insertPeer(int peer, const ConnectHandle& handle);
  // "tcp;ofi_rxm fabric=192.0.2.0/24 domain=eth0 addr=FI_SOCKADDR_IN mr=[...]".
  const std::string& pathText() const { return pathText_; }
  // The provider's printable form of a peer's address.
  std::string peerText(fi_addr_t addr);
  // The largest message one operation may carry (fi_info's max_msg_size).
  size_t maxMessageBytes() const { return maxMessageBytes_; }

  // Start a tagged send to / receive from rank `peer`. Null when the
  // provider has no room now (queue full, or -FI_EAGAIN): call poll() and
  // try again. Throws on any other error.
  Operation* startSend(CompletionSink& sink, const void* buf, size_t bytes, int peer,
                       fi_addr_t dest, uint64_t tag, uint64_t transfer);
  Operation* startRecv(CompletionSink& sink, void* buf, size_t bytes, int peer, uint64_t tag,
                       uint64_t transfer);
  // Reads the completion queue (this is what makes a manual-progress
  // provider move) and delivers what it finds. Returns completions read.
  int poll();
  // Kept open after a destroy (OfiTransport::keepOpenUntilAllDone): reads
  // the completion queue, so that a manual-progress provider still sends
  // the acknowledgements its peers wait for.
  void progress() override { poll(); }
  // Transfers (Connection::post) of every connection that have not finished;
  // called with lock() held. One opened while none is open starts new
  // traffic, between calls or at a step of one: the registration cache
  // retires its transient windows first (registration_cache.h).
  void transferOpened();
  void transfersClosed(size_t n);
  // A connection that goes away cancels what it still has in flight; the
  // operations stay here until the provider gives them back.
  void forget(const std::set<Operation*>& ops);
  // Holds the mutex that completions are delivered under, for a sink that
  // changes the state its callbacks read.
  std::unique_lock<std::mutex> lock() { return std::unique_lock(mutex_); }
  // A descriptor poll() can sleep on: the completion queue's wait fd when
  // fi_trywait says sleeping is safe, one that is always readable when it
  // says not, and a timer that fires after kProgressStep when the CQ has no
  // wait fd (see waitFd in the .cc).
  int waitFd();
  // The registration cache's counts; null where buffers are not registered.
  const RegistrationStats* registrationStats() const { return cache_ ? &cache_->stats() : nullptr; }

 private:
  void close();
  Operation* acquire(CompletionSink& sink, size_t bytes, uint64_t transfer, bool recv);
  // startSend/startRecv's shared part: queue room, the operation, its memory
  // descriptor, then `postCall(desc, op)` (fi_tsend or fi_trecv).
  template <typename PostCall>
  Operation* start(CompletionSink& sink, const void* buf, size_t bytes, uint64_t transfer,
                   bool recv, PostCall&& postCall);
  void release(Operation* op);
  void* describeMemory(Operation& op, const void* buf, size_t bytes);
  fid_mr* registerWindow(uintptr_t start, uintptr_t end, bool writable, int& err);
  [[noreturn]] void failCall(const char* call, int ret) const;

  const OfiApi& api_;
  int rank_;
  bool registerAlways_;
  fi_info* info_ = nullptr;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_av* av_ = nullptr;
  fid_ep* ep_ = nullptr;
  int cqFd_ = -1;     // the CQ's wait fd, -1 without one
  int readyFd_ = -1;  // an eventfd that is always readable
  int stepFd_ = -1;   // a timerfd, armed by waitFd when the CQ's fd cannot be slept on
  ConnectHandle address_;
  std::string pathText_;
  size_t maxMessageBytes_ = 0;
  bool localMr_ = false;  // register and pass descriptors
  // Sends complete once the peer's provider has the data (FI_TRANSMIT_COMPLETE);
  // false: the provider's default (SendCompletion).
  bool transmitComplete_ = false;
  size_t txCapacity_ = 0, rxCapacity_ = 0;
  size_t txInFlight_ = 0, rxInFlight_ = 0;
  uint64_t nextKey_ = 1;
  std::unique_ptr<RegistrationCache> cache_;  // with localMr_
  size_t openTransfers_ = 0;                  // see transferOpened
  std::map<int, fi_addr_t> peers_;
  std::vector<std::unique_ptr<Operation>> operations_;
  std::vector<Operation*> free_;
  std::mutex mutex_;
  // Watches the calls above; destroyed after close() ran in ~Endpoint.
  std::unique_ptr<StuckCallWatch> watch_;
};

}  // namespace tidal::ofi
