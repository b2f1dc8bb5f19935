// Schedules of recent small collectives, kept so that a repeated call (the
// common case: a training step issues the same sizes every iteration) does
// not rebuild its schedule. Building one costs a few allocations and a pass
// over its ops, which is most of a small collective's CPU time on the host
// side; for large messages building is negligible next to moving the data,
// and their schedules are large, so they are not kept.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <tuple>

#include "collectives/schedule.h"

namespace tidal {

class ScheduleCache {
 public:
  // What determines a schedule on a given communicator.
  struct Key {
    int collective;  // which builder (the caller's numbering)
    size_t count;
    tidalDataType_t type;
    tidalRedOp_t op;
    int root;
    bool inPlace;
    auto tie() const { return std::tie(collective, count, type, op, root, inPlace); }
    bool operator<(const Key& other) const { return tie() < other.tie(); }
  };

  // Returns the cached schedule for `key`, building it with `build()` on a miss.
  template <typename Build>
  const coll::Schedule& get(const Key& key, Build&& build) {
    if (auto it = entries_.find(key); it != entries_.end()) return it->second;
    coll::Schedule s = build();
    if (s.sends.size() + s.recvs.size() + s.prologue.size() + s.recvCopies.size() > kMaxOps) {
      uncached_ = std::move(s);
      return uncached_;
    }
    // A job that cycles through many sizes starts over rather than growing without bound.
    if (entries_.size() >= kMaxEntries) entries_.clear();
    s.stableId = nextStableId();
    return entries_.emplace(key, std::move(s)).first->second;
  }

 private:
  static uint64_t nextStableId() {
    static std::atomic<uint64_t> last{0};
    return ++last;
  }
  static constexpr size_t kMaxOps = 1024;
  static constexpr size_t kMaxEntries = 64;
  std::map<Key, coll::Schedule> entries_;
  coll::Schedule uncached_;  // the last large schedule, valid until the next get
};

}  // namespace tidal
