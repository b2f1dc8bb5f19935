// The C entry points of revoke, shrink, grow, suspend/resume and memory
// statistics (NCCL 2.27-2.30). The work is in membership.cc; here are the
// argument checks, whose messages name the argument, its value and the rank.
#include <algorithm>
#include <memory>
#include <vector>

#include "comm/api_guard.h"

using namespace tidal;

namespace {

void refuseInGroup(tidalComm_t comm, const char* fn) {
  if (group::active()) {
    fail(tidalInvalidUsage, "{}: called inside a tidalGroupStart/End group; call it outside",
         where(comm, fn));
  }
}

// A new handle around `made`, named by config's commName (else the parent's name).
tidalComm_t wrap(std::unique_ptr<Communicator> made, const InitOptions& options,
                 tidalComm_t parent) {
  auto handle = std::make_unique<tidalComm>();
  handle->name = options.name.empty() && parent ? parent->name : options.name;
  if (!handle->name.empty()) handle->prefix = fmt::format("comm '{}' ", handle->name);
  handle->impl = std::move(made);
  return handle.release();
}

}  // namespace

extern "C" {

tidalResult_t tidalCommRevoke(tidalComm_t comm, int revokeFlags) {
  constexpr const char* fn = "tidalCommRevoke";
  return guarded(comm, [&] {
    Communicator& c = checkComm(comm, fn);
    if (revokeFlags != TIDAL_REVOKE_DEFAULT) {
      fail(tidalInvalidArgument, "{}: revokeFlags {:#x} must be TIDAL_REVOKE_DEFAULT (0)",
           where(comm, fn), revokeFlags);
    }
    c.revoke();
  });
}

tidalResult_t tidalCommShrink(tidalComm_t comm, int* excludeRanksList, int excludeRanksCount,
                              tidalComm_t* newcomm, tidalConfig_t* config, int shrinkFlags) {
  constexpr const char* fn = "tidalCommShrink";
  return guarded(comm, [&] {
    Communicator& c = checkComm(comm, fn);
    if (!newcomm) fail(tidalInvalidArgument, "{}: newcomm is NULL", where(comm, fn));
    *newcomm = nullptr;
    refuseInGroup(comm, fn);
    if (shrinkFlags != TIDAL_SHRINK_DEFAULT && shrinkFlags != TIDAL_SHRINK_ABORT) {
      fail(tidalInvalidArgument,
           "{}: shrinkFlags {:#x} is neither TIDAL_SHRINK_DEFAULT (0) nor TIDAL_SHRINK_ABORT (1)",
           where(comm, fn), shrinkFlags);
    }
    const int n = c.nranks();
    if (excludeRanksCount < 0 || excludeRanksCount >= n) {
      fail(tidalInvalidArgument,
           "{}: excludeRanksCount {} is outside 0..{} (at least one of the {} ranks must stay)",
           where(comm, fn), excludeRanksCount, n - 1, n);
    }
    if (excludeRanksCount > 0 && excludeRanksList == nullptr) {
      fail(tidalInvalidArgument, "{}: excludeRanksList is NULL ({} rank(s) expected)",
           where(comm, fn), excludeRanksCount);
    }
    std::vector<int> excluded(excludeRanksList, excludeRanksList + excludeRanksCount);
    for (int i = 0; i < excludeRanksCount; ++i) {
      const int r = excluded[static_cast<size_t>(i)];
      if (r < 0 || r >= n) {
        fail(tidalInvalidArgument, "{}: excludeRanksList[{}] = {} is out of range 0..{}",
             where(comm, fn), i, r, n - 1);
      }
      if (r == c.rank()) {
        fail(tidalInvalidUsage,
             "{}: excludeRanksList[{}] is this rank ({}): excluded ranks do not call "
             "tidalCommShrink",
             where(comm, fn), i, r);
      }
    }
    std::sort(excluded.begin(), excluded.end());
    if (auto dup = std::adjacent_find(excluded.begin(), excluded.end()); dup != excluded.end()) {
      fail(tidalInvalidArgument, "{}: excludeRanksList names rank {} twice", where(comm, fn), *dup);
    }
    const InitOptions options = readConfig(config, fn, c.rank());
    if (!options.blocking) {
      fail(tidalInvalidUsage, "{}: config->blocking = 0 is not supported for shrink (rank {})", fn,
           c.rank());
    }
    std::unique_ptr<Communicator> made = c.shrink(excluded, shrinkFlags == TIDAL_SHRINK_ABORT);
    *newcomm = wrap(std::move(made), options, comm);
  });
}

tidalResult_t tidalCommGetUniqueId(tidalComm_t comm, tidalUniqueId* uniqueId) {
  constexpr const char* fn = "tidalCommGetUniqueId";
  return guarded(comm, [&] {
    Communicator& c = checkComm(comm, fn);
    if (!uniqueId) fail(tidalInvalidArgument, "{}: uniqueId is NULL", where(comm, fn));
    *uniqueId = c.growId();
  });
}

tidalResult_t tidalCommGrow(tidalComm_t comm, int nRanks, const tidalUniqueId* uniqueId, int rank,
                            tidalComm_t* newcomm, tidalConfig_t* config) {
  constexpr const char* fn = "tidalCommGrow";
  return guarded(comm, [&] {
    if (!newcomm) fail(tidalInvalidArgument, "{}: newcomm is NULL (rank {})", fn, rank);
    *newcomm = nullptr;
    refuseInGroup(comm, fn);
    if (comm == nullptr) {
      // A new rank.
      if (!uniqueId) {
        fail(tidalInvalidArgument,
             "{}: comm and uniqueId are both NULL: a new rank passes the id from "
             "tidalCommGetUniqueId (rank {})",
             fn, rank);
      }
      if (nRanks < 2) {
        fail(tidalInvalidArgument, "{}: nRanks {} must be at least 2 (rank {})", fn, nRanks, rank);
      }
      if (rank < 0 || rank >= nRanks) {
        fail(tidalInvalidArgument,
             "{}: rank {} is out of range 0..{}: a new rank passes the rank it takes", fn, rank,
             nRanks - 1);
      }
      const InitOptions options = readConfig(config, fn, rank);
      *newcomm = wrap(Communicator::joinGrowth(*uniqueId, rank, nRanks), options, nullptr);
      return;
    }
    Communicator& c = checkComm(comm, fn);
    if (rank != -1) {
      fail(tidalInvalidArgument,
           "{}: rank {} given with a communicator: members pass -1 and keep their rank",
           where(comm, fn), rank);
    }
    if (nRanks <= c.nranks()) {
      fail(tidalInvalidArgument, "{}: nRanks {} must be larger than the communicator's {} ranks",
           where(comm, fn), nRanks, c.nranks());
    }
    const InitOptions options = readConfig(config, fn, c.rank());
    *newcomm = wrap(c.grow(nRanks, uniqueId), options, comm);
  });
}

tidalResult_t tidalCommSuspend(tidalComm_t comm, int flags) {
  constexpr const char* fn = "tidalCommSuspend";
  return guarded(comm, [&] {
    Communicator& c = checkComm(comm, fn);
    if ((flags & ~TIDAL_SUSPEND_MEM) != 0) {
      fail(tidalInvalidArgument, "{}: flags {:#x} has bits other than TIDAL_SUSPEND_MEM ({:#x})",
           where(comm, fn), flags, TIDAL_SUSPEND_MEM);
    }
    if (c.suspended()) fail(tidalInvalidUsage, "{}: already suspended", where(comm, fn));
    refuseInGroup(comm, fn);
    c.suspend((flags & TIDAL_SUSPEND_MEM) != 0);
  });
}

tidalResult_t tidalCommResume(tidalComm_t comm) {
  constexpr const char* fn = "tidalCommResume";
  return guarded(comm, [&] {
    Communicator& c = checkComm(comm, fn);
    c.resume();
  });
}

tidalResult_t tidalCommMemStats(tidalComm_t comm, tidalCommMemStat_t stat, uint64_t* value) {
  constexpr const char* fn = "tidalCommMemStats";
  return guarded(comm, [&] {
    Communicator& c = checkComm(comm, fn);
    if (!value) fail(tidalInvalidArgument, "{}: value is NULL", where(comm, fn));
    const int bits = enumBits(stat);
    const Communicator::DeviceMemory m = c.deviceMemory();
    switch (bits) {
      case tidalStatGpuMemSuspend:
        *value = m.releasable;
        return;
      case tidalStatGpuMemSuspended:
        *value = c.suspended() ? 1 : 0;
        return;
      case tidalStatGpuMemPersist:
        *value = m.persistent;
        return;
      case tidalStatGpuMemTotal:
        *value = m.releasable + m.persistent;
        return;
      default:
        fail(tidalInvalidArgument, "{}: stat {} is not a tidalCommMemStat_t (valid: 0..3)",
             where(comm, fn), bits);
    }
  });
}

}  // extern "C"
