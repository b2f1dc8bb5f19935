// Host identity decides shm versus tcp; it must be stable, bounded, and
// overridable.
#include <gtest/gtest.h>
#include <unistd.h>

#include "comm/host_identity.h"
#include "scoped_env.h"

namespace tidal {
namespace {

TEST(HostIdentity, OverrideWins) {
  test::ScopedEnv env("TIDAL_HOSTID", "rack7-node3");
  EXPECT_EQ(localHostIdentity(), "rack7-node3");
}

TEST(HostIdentity, DefaultIsStableBoundedAndNamesTheNetworkNamespace) {
  test::ScopedEnv env("TIDAL_HOSTID", nullptr);
  const std::string a = localHostIdentity(), b = localHostIdentity();
  EXPECT_EQ(a, b);
  EXPECT_FALSE(a.empty());
  EXPECT_LT(a.size(), kMaxHostIdBytes);
  char ns[64] = {0};
  if (readlink("/proc/self/ns/net", ns, sizeof ns - 1) > 0) {
    EXPECT_NE(a.find("net:["), std::string::npos) << a;
  }
}

TEST(HostIdentity, LongOverrideIsTruncatedToTheSlot) {
  const std::string longId(200, 'x');
  test::ScopedEnv env("TIDAL_HOSTID", longId.c_str());
  EXPECT_EQ(localHostIdentity().size(), kMaxHostIdBytes - 1);
}

}  // namespace
}  // namespace tidal
