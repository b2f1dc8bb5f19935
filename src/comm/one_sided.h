// One-sided calls between the ranks of one host: windows that every rank
// registers together, tidalPutSignal (write into a peer's window, then
// signal it), tidalSignal and tidalWaitSignal (NCCL 2.29's one-sided API).
//
// A put is truly one-sided: the origin writes into the target's window with
// process_vm_writev, one kernel copy from its buffer into the peer's, while
// the target does anything or nothing; then it adds one to its counter in the
// target's signal inbox (signal_inbox.h). The write returns before the
// signal is posted, so a target that has seen the signal sees the data. Puts
// and signals from one origin reach a target in the order they were called.
// Neither needs a progress thread, and neither ever waits for the target.
//
// Limits, each refused with an error naming it: ranks on other hosts (no
// shared page and no kernel copy reaches them; that needs an RDMA write or a
// progress thread, neither here), device memory, a context or signal index
// other than 0, and flags other than 0 (as NCCL 2.29).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "comm/registrations.h"
#include "comm/signal_inbox.h"
#include "core/secret.h"

namespace tidal {

class OneSided {
 public:
  struct Wait {
    int peer;
    uint64_t count;  // signals from peer to wait for, beyond those already waited for
  };

  // `spin`: how long a wait polls before it sleeps (TIDAL_SPIN_US); `timeout`:
  // how long tidalWaitSignal waits (TIDAL_TIMEOUT).
  OneSided(int rank, int nranks, std::chrono::microseconds spin, std::chrono::seconds timeout);

  // Collective, at init: creates this rank's inbox and learns every rank's
  // host, process and inbox.
  void exchange(Bootstrap& bootstrap);

  // Collective: every rank's span of the window this rank registers as
  // [buff, buff + size) with `flags`, the `number`th window of this
  // communicator. Fails on every rank, naming the ranks and values, when the
  // ranks disagree (different numbers: windows registered in another order;
  // TIDAL_WIN_COLL_SYMMETRIC with different sizes).
  std::vector<WindowSpan> gatherWindow(Bootstrap& bootstrap, const void* buff, size_t size,
                                       bool device, int flags, uint64_t number);
  // Collective: every rank deregisters its `number`th window together (so no
  // peer still puts into memory about to be freed); fails naming the ranks
  // when they name different windows.
  void agreeOnRelease(Bootstrap& bootstrap, uint64_t number);

  // Writes `bytes` at `source` into `peer`'s part of a window, at `offset`
  // (checked against `spans[peer]`), then signals `peer`.
  void putSignal(const void* source, size_t bytes, int peer, const std::vector<WindowSpan>& spans,
                 size_t offset, const char* what);
  void signal(int peer, const char* what);
  // Waits until every wait's signals have arrived (or the timeout, or an
  // abort), then counts them as waited for.
  void waitSignal(const std::vector<Wait>& waits, const char* what);

  // Wakes a waiter on another thread and makes it fail (tidalCommAbort).
  void abort() { aborted_.store(true); }
  // Why `peer` cannot be reached by one-sided calls, empty when it can.
  std::string unreachable(int peer) const;

 private:
  struct Peer {
    std::string host;
    int pid = 0;
    int inboxFd = -1;
    SignalInbox inbox;  // mapped on first use
    bool attached = false;
    uint64_t waitedFor = 0;  // signals from this peer already waited for
  };
  struct WindowRecord;
  // Every rank's record; fails naming the ranks unless all register, or all
  // deregister, the same window number.
  std::vector<WindowRecord> exchangeWindowRecords(Bootstrap& bootstrap, const WindowRecord& mine);
  SignalInbox& inboxOf(int peer, const char* what);
  std::string token(int owner) const;

  int rank_;
  int nranks_;
  std::chrono::microseconds spin_;
  std::chrono::seconds timeout_;
  Secret secret_{};
  SignalInbox mine_;
  std::string noInbox_;  // why this rank has no inbox; empty when it has one
  std::vector<Peer> peers_;
  std::atomic<bool> aborted_{false};
};

}  // namespace tidal
