#include "comm/one_sided.h"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "comm/host_identity.h"
#include "core/error.h"
#include "core/log.h"

namespace tidal {

namespace {

// What every rank tells every other at init.
struct ProcessRecord {
  char hostId[kMaxHostIdBytes];
  int32_t pid;
  int32_t inboxFd;
};

}  // namespace

// What every rank tells every other when a window is registered or
// deregistered: one record for both, so that ranks out of step (one
// registering while another deregisters) exchange the same size and are
// told so.
struct OneSided::WindowRecord {
  uint64_t deregister;  // 0: registers window `number`; 1: deregisters it
  uint64_t number;
  uint64_t address;
  uint64_t bytes;
  int32_t flags;
  int32_t device;  // 1: CUDA device memory
};

OneSided::OneSided(int rank, int nranks, std::chrono::microseconds spin,
                   std::chrono::seconds timeout)
    : rank_(rank), nranks_(nranks), spin_(spin), timeout_(timeout) {}

std::string OneSided::token(int owner) const {
  return secretToHex(deriveSecret(secret_, "signal inbox", static_cast<uint64_t>(owner)));
}

void OneSided::exchange(Bootstrap& bootstrap) {
  secret_ = bootstrap.secret();
  // A rank whose inbox cannot be made (no memfd under a seccomp profile)
  // still gets a communicator: only its one-sided calls fail, saying why.
  try {
    mine_ = SignalInbox::create(rank_, nranks_, token(rank_));
  } catch (const Error& e) {
    noInbox_ = e.what();
    TIDAL_INFO(Init, "{}: one-sided calls will be refused", noInbox_);
  }
  ProcessRecord me{};
  const std::string host = localHostIdentity();
  std::memcpy(me.hostId, host.data(), std::min(host.size(), kMaxHostIdBytes - 1));
  me.pid = static_cast<int32_t>(::getpid());
  me.inboxFd = mine_.fd();
  std::vector<ProcessRecord> all(static_cast<size_t>(nranks_));
  bootstrap.allGather(&me, all.data(), sizeof(ProcessRecord));
  peers_.resize(static_cast<size_t>(nranks_));
  for (int r = 0; r < nranks_; ++r) {
    const ProcessRecord& rec = all[static_cast<size_t>(r)];
    Peer& p = peers_[static_cast<size_t>(r)];
    p.host.assign(rec.hostId, strnlen(rec.hostId, kMaxHostIdBytes));
    p.pid = rec.pid;
    p.inboxFd = rec.inboxFd;
  }
}

std::string OneSided::unreachable(int peer) const {
  const Peer& p = peers_[static_cast<size_t>(peer)];
  const Peer& me = peers_[static_cast<size_t>(rank_)];
  if (!noInbox_.empty()) return noInbox_;
  if (p.inboxFd < 0) {
    return fmt::format("rank {} has no signal inbox (its set-up failed at init; its log says why)",
                       peer);
  }
  if (p.host == me.host) return {};
  return fmt::format(
      "rank {} is on host '{}' and this rank on '{}': one-sided calls reach only ranks on the "
      "same host (a kernel copy into the peer's process and a shared signal page)",
      peer, p.host, me.host);
}

SignalInbox& OneSided::inboxOf(int peer, const char* what) {
  if (peer == rank_) return mine_;
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (!p.attached) {
    p.inbox = SignalInbox::attach(peer, nranks_, token(peer), p.pid, p.inboxFd,
                                  fmt::format("rank {}: {}", rank_, what));
    p.attached = true;
  }
  return p.inbox;
}

std::vector<WindowSpan> OneSided::gatherWindow(Bootstrap& bootstrap, const void* buff, size_t size,
                                               bool device, int flags, uint64_t number) {
  const WindowRecord me{0, number, reinterpret_cast<uint64_t>(buff), size, flags, device ? 1 : 0};
  const std::vector<WindowRecord> all = exchangeWindowRecords(bootstrap, me);
  std::vector<WindowSpan> spans;
  for (int r = 0; r < nranks_; ++r) {
    const WindowRecord& rec = all[static_cast<size_t>(r)];
    const bool symmetric = ((rec.flags | flags) & 0x01) != 0;  // TIDAL_WIN_COLL_SYMMETRIC
    if (symmetric && rec.bytes != size) {
      fail(tidalInvalidUsage,
           "rank {}: tidalCommWindowRegister: window #{} is TIDAL_WIN_COLL_SYMMETRIC but rank {} "
           "registers {} bytes and this rank {}",
           rank_, number, r, rec.bytes, size);
    }
    spans.push_back({rec.address, rec.bytes, rec.device != 0});
  }
  return spans;
}

void OneSided::agreeOnRelease(Bootstrap& bootstrap, uint64_t number) {
  exchangeWindowRecords(bootstrap, WindowRecord{1, number, 0, 0, 0, 0});
}

std::vector<OneSided::WindowRecord> OneSided::exchangeWindowRecords(Bootstrap& bootstrap,
                                                                    const WindowRecord& mine) {
  std::vector<WindowRecord> all(static_cast<size_t>(nranks_));
  bootstrap.allGather(&mine, all.data(), sizeof(WindowRecord));
  const auto says = [](const WindowRecord& rec) {
    return fmt::format("{} its window #{}", rec.deregister ? "deregisters" : "registers",
                       rec.number);
  };
  for (int r = 0; r < nranks_; ++r) {
    const WindowRecord& rec = all[static_cast<size_t>(r)];
    if (rec.number != mine.number || rec.deregister != mine.deregister) {
      fail(tidalInvalidUsage,
           "rank {}: {}: this rank {} and rank {} {}: every rank registers its windows together, "
           "in the same order, and deregisters each together",
           rank_, mine.deregister ? "tidalCommWindowDeregister" : "tidalCommWindowRegister",
           says(mine), r, says(rec));
    }
  }
  return all;
}

void OneSided::putSignal(const void* source, size_t bytes, int peer,
                         const std::vector<WindowSpan>& spans, size_t offset, const char* what) {
  const WindowSpan& span = spans[static_cast<size_t>(peer)];
  if (offset > span.bytes || bytes > span.bytes - offset) {
    fail(tidalInvalidArgument,
         "rank {}: {}: peerWinOffset {} + {} bytes is past the end of rank {}'s window ({} bytes)",
         rank_, what, offset, bytes, peer, span.bytes);
  }
  if (span.device) {
    fail(tidalInvalidUsage,
         "rank {}: {}: rank {}'s part of the window is CUDA device memory; one-sided calls write "
         "host memory only",
         rank_, what, peer);
  }
  if (const std::string why = unreachable(peer); !why.empty()) {
    fail(tidalInvalidUsage, "rank {}: {}: {}", rank_, what, why);
  }
  SignalInbox& inbox = inboxOf(peer, what);  // first: proves the pid is the peer's
  auto* target = reinterpret_cast<char*>(span.address + offset);
  if (peer == rank_) {
    if (bytes > 0) std::memmove(target, source, bytes);
  } else {
    const Peer& p = peers_[static_cast<size_t>(peer)];
    size_t done = 0;
    while (done < bytes) {
      iovec local{const_cast<char*>(static_cast<const char*>(source)) + done, bytes - done};
      iovec remote{target + done, bytes - done};
      const ssize_t n = ::process_vm_writev(p.pid, &local, 1, &remote, 1, 0);
      if (n <= 0) {
        const int err = n < 0 ? errno : EIO;
        if (err == EINTR) continue;
        fail(tidalSystemError,
             "rank {}: {}: writing {} bytes into rank {}'s window (process {}, address {}) "
             "failed after {} bytes: {}{}",
             rank_, what, bytes, peer, p.pid, static_cast<void*>(target + done), done,
             errnoText(err),
             err == EFAULT  ? " (the window's memory is no longer mapped there)"
             : err == EPERM ? " (the kernel forbids it: ranks of one user that may trace each "
                              "other are needed, see kernel.yama.ptrace_scope)"
                            : "");
      }
      done += static_cast<size_t>(n);
    }
  }
  inbox.post(rank_);
}

void OneSided::signal(int peer, const char* what) {
  if (const std::string why = unreachable(peer); !why.empty()) {
    fail(tidalInvalidUsage, "rank {}: {}: {}", rank_, what, why);
  }
  inboxOf(peer, what).post(rank_);
}

void OneSided::waitSignal(const std::vector<Wait>& waits, const char* what) {
  // Several descriptors may name one peer: their counts add up.
  std::map<int, uint64_t> wanted;
  for (const Wait& w : waits) {
    if (const std::string why = unreachable(w.peer); !why.empty()) {
      fail(tidalInvalidUsage, "rank {}: {}: {}", rank_, what, why);
    }
    wanted[w.peer] += w.count;
  }
  const auto done = [&] {
    for (const auto& [peer, count] : wanted) {
      if (mine_.arrived(peer) < peers_[static_cast<size_t>(peer)].waitedFor + count) return false;
    }
    return true;
  };
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  if (!mine_.waitUntil(done, spin_, deadline, [&] { return aborted_.load(); })) {
    std::string missing;
    for (const auto& [peer, count] : wanted) {
      const uint64_t got = mine_.arrived(peer) - peers_[static_cast<size_t>(peer)].waitedFor;
      if (got >= count) continue;
      missing += fmt::format("{}rank {}: {} of {}", missing.empty() ? "" : ", ", peer, got, count);
    }
    if (aborted_.load()) {
      fail(tidalRemoteError, "rank {}: {}: communicator aborted while waiting for signals ({})",
           rank_, what, missing);
    }
    fail(tidalTimeout,
         "rank {}: {}: signals missing after TIDAL_TIMEOUT={} s (arrived of expected: {})", rank_,
         what, timeout_.count(), missing);
  }
  for (const auto& [peer, count] : wanted) peers_[static_cast<size_t>(peer)].waitedFor += count;
}

}  // namespace tidal
