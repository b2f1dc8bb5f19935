// Changing who is in a communicator, and pausing it: tidalCommRevoke,
// tidalCommShrink, tidalCommGetUniqueId + tidalCommGrow, tidalCommSuspend /
// Resume (NCCL 2.27-2.30's fault-tolerance and elasticity calls).
//
// Shrink is the one that must work when ranks are dead, so it sends nothing
// before the new communicator's own rendezvous, and that rendezvous needs no
// announcement: every rank keeps its bootstrap listener open for the
// communicator's life (Bootstrap::duplicateListener), so the survivors all
// know where the first survivor listens, and they all derive the same fresh
// secret from this communicator's secret and the number of shrinks made from
// it. The first survivor serves the new rendezvous on a duplicate of that
// listener; the others connect to it. No dead rank is ever waited for, and a
// survivor that is missing shows up as the rendezvous root's "missing rank"
// timeout, naming it. After the new communicator is made, its ranks compare
// the lists they were given and fail, naming both, when they differ.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "bootstrap/bootstrap.h"
#include "bootstrap/unique_id.h"
#include "comm/communicator.h"
#include "core/error.h"
#include "core/log.h"
#include "core/socket.h"

namespace tidal {

namespace {

// FNV-1a over the excluded ranks: what the survivors compare.
uint64_t digestOf(const std::vector<int>& ranks, int parentSize) {
  uint64_t h = 1469598103934665603ull;
  auto add = [&](uint32_t v) {
    for (int i = 0; i < 4; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  add(static_cast<uint32_t>(parentSize));
  for (int r : ranks) add(static_cast<uint32_t>(r));
  return h;
}

std::string listText(const std::vector<int>& ranks) {
  std::string out = "[";
  for (size_t i = 0; i < ranks.size() && i < 16; ++i) {
    out += (i ? "," : "") + std::to_string(ranks[i]);
  }
  if (ranks.size() > 16) out += fmt::format(",... ({} in all)", ranks.size());
  return out + "]";
}

// Takes `lock` once the call in flight on another thread (stopped by an
// abort just before) has left; throws Timeout after TIDAL_TIMEOUT.
void waitForCallToLeave(std::unique_lock<std::mutex>& lock, int rank, const char* what) {
  const auto giveUp = Clock::now() + std::chrono::seconds(timeoutSeconds());
  while (!lock.try_lock()) {
    if (Clock::now() > giveUp) {
      fail(tidalTimeout, "rank {}: {}: the call in flight did not stop within {} s", rank, what,
           timeoutSeconds());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace

std::unique_lock<std::mutex> Communicator::enterManagement(const char* what, bool allowRevoked,
                                                           bool allowBroken, bool abortFirst) {
  std::unique_lock lock(opMutex_, std::try_to_lock);
  if (!lock.owns_lock() && abortFirst) {
    // Stop whatever holds the communicator; it fails and leaves soon after.
    // The engine is not reused afterwards: only a new communicator is made.
    engine_->abort();
    if (device_) device_->abort();
    breakWith(Error(tidalRemoteError, fmt::format("rank {}: {} aborted the call", rank_, what)));
    waitForCallToLeave(lock, rank_, what);
  }
  if (!lock.owns_lock()) {
    fail(tidalInvalidUsage,
         "rank {}: {} called while another call is running on the same communicator "
         "(a communicator is used by one thread at a time{})",
         rank_, what, abortFirst ? "" : "; TIDAL_SHRINK_ABORT stops it first");
  }
  const bool revoked = revoked_.load();
  if (revoked && !allowRevoked) refuseIfRevokedOrSuspended(what);
  if (suspended_.load()) refuseIfRevokedOrSuspended(what);
  // A revoked communicator's calls broke it on purpose; what is left (the
  // bootstrap) is intact, which is all split and shrink use.
  if (const tidalResult_t b = broken_.load(); b != tidalSuccess && !allowBroken && !revoked) {
    std::lock_guard elock(errorMutex_);
    fail(b, "rank {}: {} on a communicator broken by an earlier error: {}", rank_, what,
         brokenText_);
  }
  return lock;
}

void Communicator::revoke() {
  if (revoked_.exchange(true)) return;
  TIDAL_INFO(Init, "rank {}: communicator revoked (tidalCommRevoke)", rank_);
  // As abort() does, but the bootstrap stays up for split and shrink.
  engine_->abort();
  if (device_) device_->abort();
  breakWith(Error(tidalInvalidUsage,
                  fmt::format("rank {}: the communicator was revoked (tidalCommRevoke)", rank_)));
  // Quiescent on return: a call in flight on another thread has failed and
  // left once the call lock is free (its waits end at the abort).
  std::unique_lock lock(opMutex_, std::defer_lock);
  waitForCallToLeave(lock, rank_, "tidalCommRevoke");
  // The peers' calls fail as our connections close; this tells them why
  // (failure_notice.cc), passed on around the ring.
  if (bootstrap_ && nranks_ > 1) {
    bootstrap_->tell({wire::Notice::Kind::Revoked, rank_, tidalInvalidUsage,
                      fmt::format("rank {} revoked the communicator (tidalCommRevoke)", rank_)});
  }
}

std::unique_ptr<Communicator> Communicator::shrink(const std::vector<int>& excluded,
                                                   bool abortFirst) {
  std::unique_lock lock = enterManagement("CommShrink", /*allowRevoked=*/true,
                                          /*allowBroken=*/true, abortFirst);
  if (device_ && !device_->idle()) {
    // Stream-ordered work still queued: stopped with TIDAL_SHRINK_ABORT, else
    // finished first (unless a failure already stopped it).
    if (abortFirst) {
      device_->abort();
    } else if (broken_.load() == tidalSuccess) {
      device_->waitIdle("CommShrink");
    }
  }
  std::vector<int> survivors;
  for (int r = 0; r < nranks_; ++r) {
    if (!std::binary_search(excluded.begin(), excluded.end(), r)) survivors.push_back(r);
  }
  const int leader = survivors.front();
  const auto newRank =
      static_cast<int>(std::find(survivors.begin(), survivors.end(), rank_) - survivors.begin());
  const auto newSize = static_cast<int>(survivors.size());

  UniqueId id;
  id.root = bootstrap_->peers()[static_cast<size_t>(leader)];
  id.secret = deriveSecret(bootstrap_->secret(), "tidalCommShrink", ++shrinks_);
  if (rank_ == leader) startRootOn(bootstrap_->duplicateListener(), id.root, id.secret);
  TIDAL_INFO(Init, "rank {}: shrink excluding {} -> rank {} of {} (rendezvous at rank {}, {})",
             rank_, listText(excluded), newRank, newSize, leader, id.root.toString());
  lock.unlock();

  std::unique_ptr<Communicator> made = create(id, newRank, newSize, devices_);
  // Survivors given different lists can still meet (same sizes, same first
  // survivor): compare what each was told before anyone uses the result.
  struct Told {
    uint64_t digest;
    int32_t parentRank, excludedCount;
  };
  const Told mine{digestOf(excluded, nranks_), rank_, static_cast<int32_t>(excluded.size())};
  std::vector<Told> all(static_cast<size_t>(newSize));
  made->bootstrap_->allGather(&mine, all.data(), sizeof(Told));
  for (int r = 0; r < newSize; ++r) {
    const Told& t = all[static_cast<size_t>(r)];
    if (t.digest != mine.digest) {
      fail(tidalInvalidUsage,
           "rank {}: tidalCommShrink: ranks disagree on excludeRanksList: this rank excluded {} "
           "(of {} ranks), rank {} here excluded a different list of {} rank(s); every "
           "surviving rank must pass the same list",
           rank_, listText(excluded), nranks_, t.parentRank, t.excludedCount);
    }
  }
  return made;
}

tidalUniqueId Communicator::growId() {
  std::unique_lock lock = enterManagement("CommGetUniqueId", false, false);
  if (growIdUnconsumed_) {
    fail(tidalInvalidUsage,
         "rank {}: tidalCommGetUniqueId: an earlier id has not been consumed by tidalCommGrow yet",
         rank_);
  }
  UniqueId id;
  id.secret = randomSecret();
  // Where this rank's bootstrap listens is reachable by the job's hosts.
  SocketAddress where = bootstrap_->peers()[static_cast<size_t>(rank_)];
  where.setPort(0);
  id.root = startRoot(where, id.secret);
  growIdUnconsumed_ = true;
  return encodeUniqueId(id);
}

std::unique_ptr<Communicator> Communicator::grow(int newSize, const tidalUniqueId* offered) {
  std::unique_lock lock = enterManagement("CommGrow", false, false);
  if (device_ && !device_->idle()) device_->waitIdle("CommGrow");
  struct Offer {
    int32_t has, newSize;
    tidalUniqueId id;
  };
  Offer mine{};
  mine.has = offered != nullptr;
  mine.newSize = newSize;
  if (offered) mine.id = *offered;
  std::vector<Offer> all(static_cast<size_t>(nranks_));
  bootstrap_->allGather(&mine, all.data(), sizeof(Offer));
  std::vector<int> offering;
  for (int r = 0; r < nranks_; ++r) {
    const Offer& o = all[static_cast<size_t>(r)];
    if (o.has) offering.push_back(r);
    if (o.newSize != newSize) {
      fail(tidalInvalidUsage,
           "rank {}: tidalCommGrow: nRanks {} here, but rank {} passed nRanks {}; every rank "
           "must pass the same size",
           rank_, newSize, r, o.newSize);
    }
  }
  if (offering.size() != 1) {
    fail(tidalInvalidUsage,
         "rank {}: tidalCommGrow: exactly one member must pass the id from tidalCommGetUniqueId "
         "(the others pass NULL), but {} did{}",
         rank_, offering.size(),
         offering.empty() ? "" : fmt::format(": ranks {}", listText(offering)));
  }
  if (offering.front() == rank_) {
    if (!growIdUnconsumed_) {
      fail(tidalInvalidUsage,
           "rank {}: tidalCommGrow: this rank passes a uniqueId but made none with "
           "tidalCommGetUniqueId (or it was consumed)",
           rank_);
    }
    growIdUnconsumed_ = false;
  }
  const UniqueId id = decodeUniqueId(all[static_cast<size_t>(offering.front())].id);
  TIDAL_INFO(Init, "rank {}: grow from {} to {} ranks", rank_, nranks_, newSize);
  lock.unlock();
  std::unique_ptr<Communicator> made = create(id, rank_, newSize, devices_);
  made->checkGrowth(nranks_);
  return made;
}

std::unique_ptr<Communicator> Communicator::joinGrowth(const tidalUniqueId& raw, int rank,
                                                       int newSize) {
  std::unique_ptr<Communicator> made = create(decodeUniqueId(raw), rank, newSize);
  made->checkGrowth(-1);
  return made;
}

void Communicator::checkGrowth(int oldSize) {
  // Members know the old size; a newcomer must have taken a rank past it.
  std::vector<int32_t> sizes(static_cast<size_t>(nranks_));
  const int32_t mine = oldSize;
  bootstrap_->allGather(&mine, sizes.data(), sizeof mine);
  int32_t members = -1;
  for (int32_t s : sizes) members = std::max(members, s);
  for (int r = 0; r < nranks_; ++r) {
    const int32_t s = sizes[static_cast<size_t>(r)];
    if (s >= 0 && s != members) {
      fail(tidalInvalidUsage,
           "rank {}: tidalCommGrow: members disagree on the old size ({} and {})", rank_, s,
           members);
    }
    const bool isMember = s >= 0;
    if (members >= 0 && isMember != (r < members)) {
      fail(tidalInvalidUsage,
           "rank {}: tidalCommGrow: rank {} is {} but the communicator had {} ranks: new ranks "
           "take ranks {}..{}",
           rank_, r, isMember ? "a member" : "new", members, members, nranks_ - 1);
    }
  }
}

void Communicator::suspend(bool releaseMemory) {
  std::unique_lock lock = enterManagement("CommSuspend", false, false);
  if (device_ && !device_->idle()) device_->waitIdle("CommSuspend");
  const uint64_t freed = releaseMemory && device_ ? device_->releaseScratch() : 0;
  suspended_.store(true);
  TIDAL_INFO(Init, "rank {}: suspended{}", rank_,
             releaseMemory ? fmt::format(", {} bytes of device scratch freed", freed) : "");
}

void Communicator::resume() {
  std::unique_lock lock(opMutex_, std::try_to_lock);
  if (!lock.owns_lock()) {
    fail(tidalInvalidUsage, "rank {}: tidalCommResume called while another call is running", rank_);
  }
  if (!suspended_.exchange(false)) {
    fail(tidalInvalidUsage, "rank {}: tidalCommResume on a communicator that is not suspended",
         rank_);
  }
  TIDAL_INFO(Init, "rank {}: resumed", rank_);
}

Communicator::DeviceMemory Communicator::deviceMemory() const {
  if (!device_) return {};
  DeviceMemory m;
  const uint64_t total = device_->deviceBytes();
  m.releasable = std::min(total, device_->scratchBytes());
  m.persistent = total - m.releasable;
  return m;
}

}  // namespace tidal
