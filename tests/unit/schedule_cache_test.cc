// The schedule cache returns what its builder made, builds once per key, and
// keeps neither large schedules nor an unbounded number of entries.
#include "comm/schedule_cache.h"

#include <gtest/gtest.h>

namespace tidal {
namespace {

coll::Schedule scheduleWithOps(size_t sends, int peer) {
  coll::Schedule s;
  for (size_t i = 0; i < sends; ++i) s.sends.push_back({peer, {coll::Buffer::Send, i}, 4, -1});
  return s;
}

ScheduleCache::Key key(size_t count, bool inPlace = false) {
  return {0, count, tidalFloat32, tidalSum, 0, inPlace};
}

TEST(ScheduleCache, BuildsOncePerKey) {
  ScheduleCache cache;
  int builds = 0;
  auto build = [&] {
    ++builds;
    return scheduleWithOps(3, 1);
  };
  const coll::Schedule& a = cache.get(key(10), build);
  const coll::Schedule& b = cache.get(key(10), build);
  EXPECT_EQ(&a, &b);
  EXPECT_EQ(builds, 1);
  EXPECT_EQ(a.sends.size(), 3u);
  // Any field of the key makes a different schedule.
  cache.get(key(10, true), build);
  cache.get(key(11), build);
  cache.get({1, 10, tidalFloat32, tidalSum, 0, false}, build);
  cache.get({0, 10, tidalFloat64, tidalSum, 0, false}, build);
  cache.get({0, 10, tidalFloat32, tidalMax, 0, false}, build);
  cache.get({0, 10, tidalFloat32, tidalSum, 1, false}, build);
  EXPECT_EQ(builds, 7);
}

TEST(ScheduleCache, ReturnsWhatTheBuilderMade) {
  ScheduleCache cache;
  EXPECT_EQ(cache.get(key(1), [] { return scheduleWithOps(2, 5); }).sends[1].peer, 5);
  EXPECT_EQ(cache.get(key(2), [] { return scheduleWithOps(4, 7); }).sends[3].peer, 7);
  EXPECT_EQ(cache.get(key(1), [] { return scheduleWithOps(9, 9); }).sends.size(), 2u);
}

TEST(ScheduleCache, LargeSchedulesAreRebuiltEachTime) {
  ScheduleCache cache;
  int builds = 0;
  auto build = [&] {
    ++builds;
    return scheduleWithOps(5000, 2);
  };
  EXPECT_EQ(cache.get(key(1), build).sends.size(), 5000u);
  EXPECT_EQ(cache.get(key(1), build).sends.size(), 5000u);
  EXPECT_EQ(builds, 2);
}

TEST(ScheduleCache, StaysBoundedWhenSizesKeepChanging) {
  ScheduleCache cache;
  int builds = 0;
  auto build = [&] {
    ++builds;
    return scheduleWithOps(1, 0);
  };
  for (size_t count = 0; count < 1000; ++count) cache.get(key(count), build);
  EXPECT_EQ(builds, 1000);
  // The first keys were dropped when the cache started over, so they are built again...
  cache.get(key(0), build);
  EXPECT_EQ(builds, 1001);
  // ...while the most recent one is still there.
  cache.get(key(999), build);
  EXPECT_EQ(builds, 1001);
}

}  // namespace
}  // namespace tidal
