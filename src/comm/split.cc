// tidalCommSplit: new communicators from a partition of this one.
//
// Two bootstrap allGathers over the parent, and nothing central: the first
// tells every rank every rank's (color, key), so each computes the same
// partition; in the second, the first member of each new group (lowest key,
// then lowest parent rank) contributes a fresh unique id with a rendezvous
// root of its own, and every member takes its group's. The new communicators
// then initialise as usual, each group on its own: they open links of their
// own (sharing the parent's connections would tie the two communicators'
// stream order together) and may be used alternately with the parent.
#include <algorithm>
#include <cstring>

#include "bootstrap/bootstrap.h"
#include "bootstrap/unique_id.h"
#include "comm/communicator.h"
#include "core/error.h"
#include "core/log.h"
#include "core/socket.h"

namespace tidal {

std::unique_ptr<Communicator> Communicator::split(int color, int key) {
  // A revoked communicator may still be split (its bootstrap is intact).
  std::unique_lock lock =
      enterManagement("CommSplit", /*allowRevoked=*/true, /*allowBroken=*/false);
  if (device_ && !device_->idle()) device_->waitIdle("CommSplit");
  struct Member {
    int32_t color, key;
  };
  std::vector<Member> members(static_cast<size_t>(nranks_));
  const Member mine{color, key};
  bootstrap_->allGather(&mine, members.data(), sizeof(Member));

  // My group, in its new rank order.
  std::vector<int> group;
  if (color >= 0) {
    for (int r = 0; r < nranks_; ++r)
      if (members[static_cast<size_t>(r)].color == color) group.push_back(r);
    std::stable_sort(group.begin(), group.end(), [&](int a, int b) {
      return members[static_cast<size_t>(a)].key < members[static_cast<size_t>(b)].key;
    });
  }
  tidalUniqueId offered;
  std::memset(&offered, 0, sizeof offered);
  if (!group.empty() && group.front() == rank_) {
    UniqueId id;
    id.secret = randomSecret();
    id.root = startRoot(localInterfaceAddress(), id.secret);
    offered = encodeUniqueId(id);
  }
  std::vector<tidalUniqueId> ids(static_cast<size_t>(nranks_));
  bootstrap_->allGather(&offered, ids.data(), sizeof(tidalUniqueId));
  if (group.empty()) return nullptr;

  const auto newRank =
      static_cast<int>(std::find(group.begin(), group.end(), rank_) - group.begin());
  const auto newSize = static_cast<int>(group.size());
  TIDAL_INFO(Init, "rank {}: split color {} key {} -> rank {} of {}", rank_, color, key, newRank,
             newSize);
  const UniqueId id = decodeUniqueId(ids[static_cast<size_t>(group.front())]);
  lock.unlock();
  return create(id, newRank, newSize, devices_);
}

}  // namespace tidal
