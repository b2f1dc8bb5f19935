// The ib transport's decisions that need no device: port and rail selection
// (TIDAL_IB_HCA, topology), multi-rail striping and completion order, the
// handle's rail list, GID choice over a GID table laid out like sysfs,
// address ranges, sequence widening; and, on a machine without an active
// RDMA port (CI), that TIDAL_NET=ib fails fast with a clear error while the
// default choice falls back to the other transports.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../integration/job_fork.h"
#include "../unit/scoped_env.h"
#include "../unit/scripted_connection.h"
#include "core/error.h"
#include "tidal/tidal.h"
#include "transports/ib/device_select.h"
#include "transports/ib/gpu_direct.h"
#include "transports/ib/hw_counters.h"
#include "transports/ib/ib_device.h"
#include "transports/ib/ib_rails_connection.h"
#include "transports/ib/protocol.h"
#include "transports/ib/rail_striping.h"
#include "transports/ib/verbs_api.h"

namespace tidal::ib {
namespace {

using ::testing::HasSubstr;

// A verbs table over two fake devices: an EFA-like one (node type
// unspecified) and an InfiniBand HCA that cannot be opened. Only the device
// list and names are real calls; opening records which device was tried.
struct FakeVerbs {
  static inline ibv_device devices[2]{};
  static inline ibv_device* list[3]{};
  static inline std::vector<std::string> opened;
  static ibv_device** getDeviceList(int* count) {
    *count = 2;
    return list;
  }
  static void freeDeviceList(ibv_device**) {}
  static const char* getDeviceName(ibv_device* d) { return d->name; }
  static ibv_context* openDevice(ibv_device* d) {
    opened.emplace_back(d->name);
    return nullptr;  // "cannot open": the scan notes it and goes on
  }
  static VerbsApi api() {
    std::snprintf(devices[0].name, sizeof devices[0].name, "rdmap0s6");
    devices[0].node_type = IBV_NODE_UNSPECIFIED;
    std::snprintf(devices[1].name, sizeof devices[1].name, "mlx5_0");
    devices[1].node_type = IBV_NODE_CA;
    list[0] = &devices[0];
    list[1] = &devices[1];
    list[2] = nullptr;
    opened.clear();
    VerbsApi a{};
    a.getDeviceList = getDeviceList;
    a.freeDeviceList = freeDeviceList;
    a.getDeviceName = getDeviceName;
    a.openDevice = openDevice;
    return a;
  }
};

// EFA's queue pairs are SRD, not RC: ib must leave such a device alone (the
// ofi transport drives it), say so, and still look at the others.
TEST(PortScan, DevicesOfUnspecifiedNodeTypeLikeEfaAreSkippedUnopened) {
  const auto root =
      std::filesystem::temp_directory_path() / ("tidal-fake-sysfs-" + std::to_string(::getpid()));
  std::filesystem::create_directories(root / "class" / "infiniband_verbs");
  const VerbsApi api = FakeVerbs::api();
  const PortScan scan = scanPorts(api, HcaSpec{}, root.string());
  std::filesystem::remove_all(root);
  EXPECT_TRUE(scan.usable.empty());
  EXPECT_EQ(FakeVerbs::opened, std::vector<std::string>{"mlx5_0"});
  EXPECT_NE(scan.seen.find("rdmap0s6 (not InfiniBand or RoCE: node type unspecified, as EFA's; "
                           "TIDAL_NET=ofi drives EFA)"),
            std::string::npos)
      << scan.seen;
  EXPECT_NE(scan.seen.find("mlx5_0 (cannot open"), std::string::npos) << scan.seen;
}

TEST(HcaSpec, PrefixesPortsExclusionAndExact) {
  const HcaSpec any = parseHcaSpec("");
  EXPECT_TRUE(hcaMatches(any, "mlx5_0", 1));

  const HcaSpec some = parseHcaSpec("mlx5_0:1,mlx5_1");
  EXPECT_TRUE(hcaMatches(some, "mlx5_0", 1));
  EXPECT_FALSE(hcaMatches(some, "mlx5_0", 2));
  EXPECT_TRUE(hcaMatches(some, "mlx5_1", 2));
  EXPECT_TRUE(hcaMatches(some, "mlx5_10", 1)) << "names are prefixes unless '='";
  EXPECT_FALSE(hcaMatches(some, "rxe0", 1));

  const HcaSpec exact = parseHcaSpec("=mlx5_1");
  EXPECT_TRUE(hcaMatches(exact, "mlx5_1", 1));
  EXPECT_FALSE(hcaMatches(exact, "mlx5_10", 1));

  const HcaSpec notThese = parseHcaSpec("^mlx5_2,rxe");
  EXPECT_TRUE(hcaMatches(notThese, "mlx5_0", 1));
  EXPECT_FALSE(hcaMatches(notThese, "mlx5_2", 1));
  EXPECT_FALSE(hcaMatches(notThese, "rxe0", 1));

  const HcaSpec notExactly = parseHcaSpec("^=mlx5_1");
  EXPECT_TRUE(hcaMatches(notExactly, "mlx5_10", 1));
  EXPECT_FALSE(hcaMatches(notExactly, "mlx5_1", 1));
}

TEST(HcaSpec, BadPortIsAnErrorNamingTheVariable) {
  try {
    parseHcaSpec("mlx5_0:x");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), tidalInvalidArgument);
    EXPECT_THAT(e.what(), HasSubstr("TIDAL_IB_HCA"));
    EXPECT_THAT(e.what(), HasSubstr("mlx5_0:x"));
  }
}

TEST(PortChoice, TopologyPreferenceFirstElseRankModPorts) {
  const std::vector<std::string> usable = {"mlx5_0:1", "mlx5_1:1", "mlx5_2:1", "mlx5_3:1"};
  EXPECT_EQ(pickPort(usable, {"mlx5_2:1"}, 0), 2u);
  EXPECT_EQ(pickPort(usable, {"mlx5_2:1"}, 5), 2u);
  EXPECT_EQ(pickPort(usable, {"mlx5_1:1", "mlx5_3:1"}, 0), 1u);
  EXPECT_EQ(pickPort(usable, {"mlx5_1:1", "mlx5_3:1"}, 1), 3u);
  EXPECT_EQ(pickPort(usable, {"eth0"}, 5), 1u) << "nothing preferred is usable: rank mod ports";
  EXPECT_EQ(pickPort(usable, {}, 2), 2u);
}

TEST(RailChoice, SeveralOnlyWhereMeantForThisRankElseOnePortAsBefore) {
  const std::vector<std::string> usable = {"mlx5_0:1", "mlx5_1:1", "mlx5_2:1", "mlx5_3:1"};
  using V = std::vector<size_t>;
  // The topology's nearest NICs for this rank: all of them.
  EXPECT_EQ(pickRails(usable, {{"mlx5_1:1", "mlx5_3:1"}, true, false}, 5, 4), (V{1, 3}));
  EXPECT_EQ(pickRails(usable, {{"mlx5_1:1", "eth0"}, true, false}, 5, 4), (V{1}));
  // Every NIC because nothing restricted it: one port, as pickPort.
  EXPECT_EQ(pickRails(usable, {usable, false, false}, 5, 4), (V{1}));
  EXPECT_EQ(pickRails(usable, {}, 2, 4), (V{2}));
  // TIDAL_IB_HCA's list: every usable port it selected.
  EXPECT_EQ(pickRails(usable, {{}, false, true}, 3, 4), (V{0, 1, 2, 3}));
  // More than TIDAL_IB_MAX_RAILS: a window per rank, in NIC order.
  EXPECT_EQ(pickRails(usable, {{}, false, true}, 0, 2), (V{0, 1}));
  EXPECT_EQ(pickRails(usable, {{}, false, true}, 1, 2), (V{2, 3}));
  EXPECT_EQ(pickRails(usable, {{}, false, true}, 1, 3), (V{0, 1, 3})) << "3, 0, 1 wrapped";
  // TIDAL_IB_MAX_RAILS=1: exactly the old choice.
  EXPECT_EQ(pickRails(usable, {{}, false, true}, 3, 1), (V{3}));
  EXPECT_EQ(pickRails(usable, {{"mlx5_1:1", "mlx5_3:1"}, true, false}, 1, 1), (V{3}));
}

TEST(RailStriping, LargeTransfersSplitOverEveryRailSmallOnesRotate) {
  RailStriper one(1);
  for (size_t bytes : {size_t{0}, size_t{8}, size_t{16} << 20}) {
    const RailPlan p = one.plan(bytes);
    ASSERT_EQ(p.count, 1u);
    EXPECT_EQ(p.pieces[0].rail, 0u);
    EXPECT_EQ(p.pieces[0].bytes, bytes);
  }
  RailStriper two(2);
  for (uint32_t expect : {0u, 1u, 0u, 1u}) {  // whole transfers take turns
    const RailPlan p = two.plan(2 * kRailPieceMinBytes - 1);
    ASSERT_EQ(p.count, 1u);
    EXPECT_EQ(p.pieces[0].rail, expect);
    EXPECT_EQ(p.pieces[0].offset, 0u);
  }
  for (uint32_t rails = 2; rails <= kMaxRails; ++rails) {
    RailStriper s(rails);
    for (size_t bytes : {rails * kRailPieceMinBytes, rails * kRailPieceMinBytes + 1,
                         size_t{(1u << 20) + 5}, size_t{3} << 20, size_t{512 * 1024 + 12}}) {
      if (bytes < rails * kRailPieceMinBytes) continue;
      const RailPlan p = s.plan(bytes);
      ASSERT_EQ(p.count, rails) << bytes << " bytes over " << rails;
      size_t next = 0;
      for (uint32_t i = 0; i < p.count; ++i) {
        EXPECT_EQ(p.pieces[i].rail, i);
        EXPECT_EQ(p.pieces[i].offset, next) << "pieces cover the transfer in order";
        EXPECT_EQ(p.pieces[i].offset % kRailPieceAlign, 0u);
        EXPECT_GT(p.pieces[i].bytes, 0u);
        next += p.pieces[i].bytes;
      }
      EXPECT_EQ(next, bytes);
    }
  }
}

using test::ScriptedConnection;

TEST(RailsConnection, TransfersCompleteInPostOrderWhicheverRailIsFaster) {
  auto a = std::make_shared<ScriptedConnection::Script>();
  auto b = std::make_shared<ScriptedConnection::Script>();
  std::vector<std::unique_ptr<Connection>> rails;
  rails.push_back(std::make_unique<ScriptedConnection>(a));
  rails.push_back(std::make_unique<ScriptedConnection>(b));
  IbRailsConnection c(std::move(rails), "two rails");
  std::vector<char> buf(1 << 20);
  c.post(buf.data(), 100);      // whole, rail 0
  c.post(buf.data(), 200);      // whole, rail 1
  c.post(buf.data(), 1 << 20);  // split: rail 0 [0, 512 KiB), rail 1 [512 KiB, 1 MiB)
  c.post(buf.data() + 8, 300);  // whole, rail 0 again
  ASSERT_EQ(a->posts.size(), 3u);
  ASSERT_EQ(b->posts.size(), 2u);
  EXPECT_EQ(a->posts[1].first, buf.data());
  EXPECT_EQ(a->posts[1].second, size_t{512} << 10);
  EXPECT_EQ(b->posts[1].first, buf.data() + (512 << 10));
  EXPECT_EQ(b->posts[1].second, size_t{512} << 10);
  EXPECT_EQ(a->posts[2].first, buf.data() + 8);
  b->completeUpTo = 2;  // rail 1 has finished all of its pieces first
  c.progress();
  EXPECT_EQ(c.completed(), 0u) << "transfer 0 is still on rail 0";
  a->completeUpTo = 1;
  EXPECT_TRUE(c.progress());
  EXPECT_EQ(c.completed(), 2u) << "transfers 0 and 1; 2 waits for its rail-0 piece";
  a->completeUpTo = 3;
  c.progress();
  EXPECT_EQ(c.completed(), 4u);
  EXPECT_EQ(c.posted(), 4u);
  EXPECT_EQ(c.peer(), 7);
  EXPECT_EQ(c.describe(), "two rails");
}

TEST(Protocol, HandleListsRailsAndHelloCarriesTheRail) {
  ListenInfo info;
  info.sideChannel = SocketAddress::parse("10.1.2.3:4000");
  for (size_t r = 0; r < kMaxRails; ++r) {
    RailAddress rail;
    rail.name = r == 3 ? "a_very_long_device_name:1" : fmt::format("mlx5_{}:1", r);
    rail.port.lid = static_cast<uint16_t>(10 + r);
    rail.port.mtu = IBV_MTU_4096;
    rail.port.gid[15] = static_cast<uint8_t>(r);
    info.rails.push_back(rail);
  }
  const ConnectHandle h = encodeListenInfo(info);
  EXPECT_LE(h.size(), kMaxConnectHandleBytes);
  const ListenInfo back = decodeListenInfo(h, 0, 1);
  ASSERT_EQ(back.rails.size(), kMaxRails);
  EXPECT_EQ(back.rails[1].name, "mlx5_1:1");
  EXPECT_EQ(back.rails[3].name, std::string("a_very_long_device_name:1").substr(0, 15));
  EXPECT_EQ(back.rails[2].port.lid, 12);
  EXPECT_EQ(back.rails[2].port.gid[15], 2);
  info.rails.clear();
  try {
    decodeListenInfo(encodeListenInfo(info), 0, 1);
    FAIL() << "a handle without rails was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("rank 0: ib handle of rank 1 lists 0 rails"));
  }
  Hello hello;
  hello.fromRank = 2;
  hello.toRank = 5;
  hello.rail = {1, 2, 3};
  const auto bytes = encodeHello(Secret{}, hello);
  ASSERT_EQ(bytes.size(), sizeof(Secret) + kHelloBodyBytes);
  const Hello decoded = decodeHello({bytes.begin() + sizeof(Secret), bytes.end()});
  EXPECT_EQ(decoded.rail.index, 1u);
  EXPECT_EQ(decoded.rail.count, 2u);
  EXPECT_EQ(decoded.rail.offered, 3u);
}

// A port directory laid out like /sys/class/infiniband/DEV/ports/P.
class FakePort {
 public:
  FakePort() {
    char tmpl[] = "/tmp/ib_select_test_XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    std::filesystem::create_directories(dir_ + "/gids");
    std::filesystem::create_directories(dir_ + "/gid_attrs/types");
  }
  ~FakePort() { std::filesystem::remove_all(dir_); }
  // type "" leaves the type file out (an unused entry: reading it fails).
  void add(int index, const std::string& gid, const std::string& type) {
    std::ofstream(fmt::format("{}/gids/{}", dir_, index)) << gid << "\n";
    if (!type.empty())
      std::ofstream(fmt::format("{}/gid_attrs/types/{}", dir_, index)) << type << "\n";
  }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

constexpr const char* kZero = "0000:0000:0000:0000:0000:0000:0000:0000";

// The table Soft-RoCE shows for an interface with 10.77.0.1 and a global
// IPv6 address, RoCE v1 and v2 entries interleaved as on mlx5.
void fillTypicalTable(FakePort& p) {
  p.add(0, "fe80:0000:0000:0000:1489:51ff:fe85:f6fa", "IB/RoCE v1");
  p.add(1, "fe80:0000:0000:0000:1489:51ff:fe85:f6fa", "RoCE v2");
  p.add(2, "fd00:0000:0000:0000:0000:0000:0000:0007", "IB/RoCE v1");
  p.add(3, "fd00:0000:0000:0000:0000:0000:0000:0007", "RoCE v2");
  p.add(4, "0000:0000:0000:0000:0000:ffff:0a4d:0001", "IB/RoCE v1");
  p.add(5, "0000:0000:0000:0000:0000:ffff:0a4d:0001", "RoCE v2");
  p.add(6, kZero, "");
}

TEST(GidChoice, PrefersRoceV2WithAnIpv4Address) {
  FakePort port;
  fillTypicalTable(port);
  const auto table = readGidTable(port.dir());
  ASSERT_EQ(table.size(), 7u);
  EXPECT_TRUE(table[6].type.empty());
  const GidEntry g = chooseRoceGid(table, GidPolicy{}, "rxe0 port 1", 0);
  EXPECT_EQ(g.index, 5);
  EXPECT_EQ(g.address(), "::ffff:10.77.0.1");
}

TEST(GidChoice, FamilyAndRangeNarrowTheChoice) {
  FakePort port;
  fillTypicalTable(port);
  const auto table = readGidTable(port.dir());
  GidPolicy v6;
  v6.family = AF_INET6;
  EXPECT_EQ(chooseRoceGid(table, v6, "rxe0 port 1", 0).index, 3) << "global before link-local";
  GidPolicy linkLocal;
  linkLocal.range = parseAddressRange("fe80::/10");
  EXPECT_EQ(chooseRoceGid(table, linkLocal, "rxe0 port 1", 0).index, 1);
  GidPolicy inRange;
  inRange.range = parseAddressRange("10.77.0.0/16");
  EXPECT_EQ(chooseRoceGid(table, inRange, "rxe0 port 1", 0).index, 5);
  GidPolicy nowhere;
  nowhere.range = parseAddressRange("192.168.0.0/16");
  nowhere.rangeText = "192.168.0.0/16";
  try {
    chooseRoceGid(table, nowhere, "rxe0 port 1", 3);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), tidalInvalidArgument);
    EXPECT_THAT(e.what(), HasSubstr("rank 3"));
    EXPECT_THAT(e.what(), HasSubstr("rxe0 port 1"));
    EXPECT_THAT(e.what(), HasSubstr("TIDAL_IB_ADDR_RANGE=192.168.0.0/16"));
    EXPECT_THAT(e.what(), HasSubstr("5 ::ffff:10.77.0.1 (RoCE v2)")) << "lists what there is";
    EXPECT_THAT(e.what(), HasSubstr("TIDAL_IB_GID_INDEX"));
  }
}

TEST(GidChoice, OverrideIsCheckedAndTheErrorSaysWhatToSet) {
  FakePort port;
  fillTypicalTable(port);
  const auto table = readGidTable(port.dir());
  GidPolicy pick;
  pick.overrideIndex = 2;
  EXPECT_EQ(chooseRoceGid(table, pick, "rxe0 port 1", 0).index, 2) << "the user's choice wins";
  for (int bad : {6, 40}) {
    GidPolicy p;
    p.overrideIndex = bad;
    try {
      chooseRoceGid(table, p, "rxe0 port 1", 1);
      FAIL() << "no error for index " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), tidalInvalidArgument);
      EXPECT_THAT(e.what(), HasSubstr(fmt::format("TIDAL_IB_GID_INDEX={}", bad)));
      EXPECT_THAT(e.what(), HasSubstr("rxe0 port 1"));
      EXPECT_THAT(e.what(), HasSubstr("::ffff:10.77.0.1"));
    }
  }
}

TEST(GidChoice, BadSettingsNameTheVariable) {
  {
    test::ScopedEnv env("TIDAL_IB_ADDR_FAMILY", "AF_UNIX");
    EXPECT_THROW(gidPolicyFromParams(0), Error);
  }
  for (const char* bad : {"10.0.0.0", "10.0.0.0/33", "nonsense/8", "fd00::/x"}) {
    try {
      parseAddressRange(bad);
      FAIL() << bad;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("TIDAL_IB_ADDR_RANGE")) << bad;
    }
  }
}

TEST(Protocol, ImmediateCountersWidenAcrossTheWrap) {
  const uint64_t wrap = uint64_t{kImmValueMask} + 1;
  EXPECT_EQ(widen(0, 0), 0u);
  EXPECT_EQ(widen(5, 7), 7u);
  EXPECT_EQ(widen(wrap - 2, immValue(makeImm(ImmKind::Data, wrap + 1))), wrap + 1);
  EXPECT_EQ(immKind(makeImm(ImmKind::Credit, 12345)), ImmKind::Credit);
  EXPECT_EQ(immValue(makeImm(ImmKind::Credit, 12345)), 12345u);
}

bool hostHasActiveRdmaPort() {
  std::string why;
  const VerbsApi* api = VerbsApi::load(&why);
  return api && !scanPorts(*api, HcaSpec{}).usable.empty();
}

int initAndReport(int) {
  tidalComm_t comm;
  const tidalResult_t r = tidalCommInitFromEnv(&comm);
  if (r == tidalSuccess) {
    tidalCommDestroy(comm);
    return 0;
  }
  const std::string text = tidalGetLastError(nullptr);
  if (r != tidalInvalidUsage) return 2;
  return text.find("TIDAL_NET=ib") != std::string::npos &&
                 text.find("no usable RDMA port") != std::string::npos
             ? 1
             : 3;
}

TEST(NoRdmaHere, ForcingIbFailsAtInitWithAClearError) {
  if (hostHasActiveRdmaPort()) GTEST_SKIP() << "this host has an active RDMA port";
  const auto start = std::chrono::steady_clock::now();
  test::ForkedJob job(2, initAndReport, {{"TIDAL_NET", "ib"}, {"TIDAL_TIMEOUT", "60"}});
  const auto status = job.wait(std::chrono::seconds(50));
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(status[r] != -1 && WIFEXITED(status[r])) << "rank " << r << " hung or crashed";
    EXPECT_EQ(WEXITSTATUS(status[r]), 1) << "rank " << r << " (0: init succeeded, 2: wrong "
                                         << "code, 3: unclear text)";
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30))
      << "must fail at once, not at TIDAL_TIMEOUT";
}

TEST(NoRdmaHere, DefaultChoiceFallsBackAndWorks) {
  if (hostHasActiveRdmaPort()) GTEST_SKIP() << "this host has an active RDMA port";
  // Two "hosts" on one machine: without ib the pair must pick tcp.
  test::ForkedJob job(
      2,
      [](int rank) {
        setenv("TIDAL_HOSTID", rank == 0 ? "hostA" : "hostB", 1);
        tidalComm_t comm;
        if (tidalCommInitFromEnv(&comm) != tidalSuccess) return 1;
        int v = rank + 1;
        if (tidalAllReduce(&v, &v, 1, tidalInt32, tidalSum, comm, nullptr) != tidalSuccess)
          return 2;
        tidalCommDestroy(comm);
        return v == 3 ? 0 : 3;
      },
      {{"TIDAL_TIMEOUT", "60"}});
  const auto status = job.wait(std::chrono::seconds(50));
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(status[r] != -1 && WIFEXITED(status[r])) << "rank " << r;
    EXPECT_EQ(WEXITSTATUS(status[r]), 0) << "rank " << r;
  }
}

}  // namespace
}  // namespace tidal::ib

namespace tidal::ib {
namespace {

TEST(IbSettings, OutOfRangeValuesAreErrorsNamingTheVariable) {
  struct Case {
    const char* name;
    const char* value;
  };
  for (const Case& c :
       {Case{"TIDAL_IB_QPS_PER_CONNECTION", "0"}, Case{"TIDAL_IB_QPS_PER_CONNECTION", "17"},
        Case{"TIDAL_IB_EAGER_BYTES", "70000"}, Case{"TIDAL_IB_SL", "16"},
        Case{"TIDAL_IB_TC", "256"}, Case{"TIDAL_IB_TIMEOUT", "0"}, Case{"TIDAL_IB_RETRY_CNT", "8"},
        Case{"TIDAL_IB_MAX_RAILS", "0"}, Case{"TIDAL_IB_MAX_RAILS", "5"}}) {
    test::ScopedEnv env(c.name, c.value);
    try {
      createTransport("ib", {2, 4, Secret{}});
      ADD_FAILURE() << c.name << "=" << c.value << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), tidalInvalidArgument);
      EXPECT_THAT(e.what(), HasSubstr(fmt::format("{}={}", c.name, c.value)));
      EXPECT_THAT(e.what(), HasSubstr("rank 2"));
    }
  }
}

TEST(GpuDirectDetection, SettingsAndWhatThisMachineHas) {
  std::string why;
  const VerbsApi* api = VerbsApi::load(&why);
  if (api == nullptr) GTEST_SKIP() << why;
  EXPECT_THROW(GpuDirect::detect(*api, "yes", 0), Error);
  const GpuDirect off = GpuDirect::detect(*api, "0", 0);
  EXPECT_EQ(off.mode(), GpuDirect::Mode::Off);
  EXPECT_STREQ(off.modeName(), "off");
  const GpuDirect automatic = GpuDirect::detect(*api, "auto", 0);
  if (automatic.mode() != GpuDirect::Mode::Off) {
    GTEST_SKIP() << "this machine has GPUDirect: " << automatic.reason();
  }
  // No GPU here: auto says why and stages; 1 refuses with the same reason.
  EXPECT_THAT(automatic.reason(), HasSubstr("staged through host memory"));
  try {
    GpuDirect::detect(*api, "1", 5);
    FAIL() << "TIDAL_GDR=1 accepted without GPUDirect";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), tidalInvalidArgument);
    EXPECT_THAT(e.what(), HasSubstr("rank 5: TIDAL_GDR=1"));
  }
}

TEST(GpuDirectDetection, TopologyDistanceTurnsAutoOff) {
  std::string why;
  const VerbsApi* api = VerbsApi::load(&why);
  if (api == nullptr) GTEST_SKIP() << why;
  const GdrDistance far{false,
                        "GPU 0000:18:00.0 - mlx5_4:1: SYS is beyond TIDAL_NET_GDR_LEVEL=PXB"};
  // auto: off for the distance, before asking the driver, whatever it could do.
  const GpuDirect automatic = GpuDirect::detect(*api, "auto", 0, far);
  EXPECT_EQ(automatic.mode(), GpuDirect::Mode::Off);
  EXPECT_EQ(automatic.reason(),
            "GPU 0000:18:00.0 - mlx5_4:1: SYS is beyond TIDAL_NET_GDR_LEVEL=PXB; GPU buffers are "
            "staged through host memory");
  EXPECT_EQ(GpuDirect::detect(*api, "0", 0, far).reason(), "TIDAL_GDR=0");
  // Within the level the distance does not decide: what the machine has does.
  const GdrDistance near{true,
                         "GPU 0000:18:00.0 - mlx5_0:1: PIX is within TIDAL_NET_GDR_LEVEL=PXB"};
  const GpuDirect plain = GpuDirect::detect(*api, "auto", 0);
  const GpuDirect withNear = GpuDirect::detect(*api, "auto", 0, near);
  EXPECT_EQ(withNear.mode(), plain.mode());
  if (plain.mode() == GpuDirect::Mode::Off) {
    EXPECT_EQ(withNear.reason(), plain.reason()) << "no GPUDirect here: the distance is moot";
  } else {
    EXPECT_EQ(withNear.reason(), plain.reason() + "; " + near.reason);
    const GpuDirect forced = GpuDirect::detect(*api, "1", 0, far);
    EXPECT_NE(forced.mode(), GpuDirect::Mode::Off) << "TIDAL_GDR=1 overrides the distance";
    EXPECT_EQ(forced.reason(), plain.reason() + "; TIDAL_GDR=1 overrides " + far.reason);
  }
}

TEST(HwCounters, DeltaNamesWhatMovedAndTheCongestionCounters) {
  const CounterSnapshot before{
      {"np_cnp_sent", 5}, {"rcvd_pkts", 100}, {"local_ack_timeout_err", 2}};
  const CounterSnapshot after{{"np_cnp_sent", 9}, {"rcvd_pkts", 150}, {"local_ack_timeout_err", 2}};
  const std::string text = counterDeltaText(before, after);
  EXPECT_THAT(text, HasSubstr("rcvd_pkts +50"));
  EXPECT_THAT(text, HasSubstr("congestion counters: np_cnp_sent +4"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("local_ack_timeout_err")))
      << "unmoved, not congestion";
  EXPECT_THAT(counterDeltaText({}, {}), HasSubstr("no hw_counters"));
}

}  // namespace
}  // namespace tidal::ib
