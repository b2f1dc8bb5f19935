// Shared-memory regions that libfabric's shm provider left behind in an
// earlier process that had this process's pid.
//
// The shm provider (used directly, and by other providers such as EFA's for
// peers on the same host) names its region /dev/shm/<pid>:<uid>:<endpoint
// index>, counting endpoints from 0 in each process, and removes it when the
// endpoint closes. A process that is SIGKILLed cannot remove it; a later
// process that gets the same pid then fails fi_enable with EBUSY on the name
// it wants. Seen here: 38 such regions on a machine whose pid_max is 32768,
// and a test's init failing on one.
//
// A region with our pid and uid whose last modification is older than this
// process cannot be ours: it is removed before the endpoint is enabled. One
// modified since this process started (or less than a second before: clock
// granularity) is left alone, since it may be a live endpoint of ours
// (another communicator) or of another libfabric user in this process.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace tidal::ofi {

// Removes the regions named <pid>:<uid>:* in `dir` last modified more than a
// second before `processStart`; returns their names.
std::vector<std::string> removeStaleShmRegions(const std::string& dir, pid_t pid, uid_t uid,
                                               std::chrono::system_clock::time_point processStart);

// When this process started, on the wall clock (from /proc/self/stat's start
// time in clock ticks since boot), to within a clock tick; the epoch when
// it cannot be read (nothing then counts as stale).
std::chrono::system_clock::time_point processStartTime();

}  // namespace tidal::ofi
