// The ib transport against a real verbs device (Soft-RoCE in the VM of
// run_vm_tests.sh; any RDMA NIC elsewhere). Skipped where there is none.
//
// Two transports in one process play ranks 0 and 1: real QPs, real RDMA
// writes, the kernel driver in between. Checks data of every size class,
// striping over several QPs, the registration cache (hits inside a call,
// retirement between calls, and a freed-and-remapped buffer whose new
// contents must travel, not the old pages), size mismatches, abort, and
// the GPUDirect flush read on the loopback QP; and, where there are two
// ports, multi-rail connections (both rails, and the fallback to one).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <numeric>
#include <optional>
#include <thread>

#include "../unit/scoped_env.h"
#include "core/error.h"
#include "transports/ib/ib_transport.h"
#include "transports/ib/loopback_flush.h"

namespace tidal::ib {
namespace {

using ::testing::HasSubstr;

Secret secretOf(uint8_t b) {
  Secret s;
  s.fill(b);
  return s;
}

bool haveDevice() {
  std::string why;
  const VerbsApi* api = VerbsApi::load(&why);
  return api && !scanPorts(*api, HcaSpec{}).usable.empty();
}

#define REQUIRE_DEVICE() \
  if (!haveDevice()) GTEST_SKIP() << "no active RDMA port here"

void drain(Connection& a, Connection& b) {
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (a.completed() < a.posted() || b.completed() < b.posted()) {
    a.progress();
    b.progress();
    ASSERT_LT(Clock::now(), deadline) << "transfers did not complete";
  }
}

// Listens with TIDAL_IB_HCA set to `hca` (left as it is when nullopt).
ConnectHandle listenWith(IbTransport& t, const std::optional<std::string>& hca) {
  std::optional<test::ScopedEnv> env;
  if (hca) env.emplace("TIDAL_IB_HCA", hca->c_str());
  return t.listen();
}

// Rank 0 sends to rank 1 over one ib connection; each rank's ports may be
// chosen by its own TIDAL_IB_HCA.
struct Pair {
  std::unique_ptr<IbTransport> t0, t1;
  ConnectHandle h0, h1;
  std::unique_ptr<Connection> send, recv;
  explicit Pair(const std::optional<std::string>& hca0 = std::nullopt,
                const std::optional<std::string>& hca1 = std::nullopt) {
    t0 = std::make_unique<IbTransport>(TransportContext{0, 2, secretOf(3)});
    t1 = std::make_unique<IbTransport>(TransportContext{1, 2, secretOf(3)});
    h0 = listenWith(*t0, hca0);
    h1 = listenWith(*t1, hca1);
    const Deadline d = deadlineFromNow();
    send = t0->connectSend(1, h1, d);
    recv = t1->acceptRecv(0, d);
  }
  RegistrationCache::Stats senderStats() const { return t0->device()->cache().stats(); }
};

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 131 + seed);
  return v;
}

TEST(IbTransport, ChoosesARoceV2Ipv4GidOnEthernetPorts) {
  REQUIRE_DEVICE();
  IbTransport t(TransportContext{0, 1, secretOf(1)});
  ASSERT_FALSE(t.listen().empty());
  const IbDevice& d = *t.device();
  if (!d.ethernet()) GTEST_SKIP() << "InfiniBand port: LID routing";
  EXPECT_TRUE(d.gid().roceV2()) << d.gid().describe();
  EXPECT_TRUE(d.gid().ipv4Mapped()) << d.gid().describe();
  EXPECT_THAT(d.pathText(), HasSubstr("RoCEv2 gid"));
}

class Sizes : public ::testing::TestWithParam<const char*> {};

// Every size class, eager and clear-to-send, striped or not, both orders of
// posting; the received bytes must be the sent ones.
void exchangeEverySizeClass(Connection& send, Connection& recv) {
  const std::vector<size_t> sizes = {
      0, 1, 200, 8192, 8193, 65536, 262144, (1u << 20) + 5, 3u << 20, 300000, (1u << 18) + 1};
  std::vector<std::vector<uint8_t>> out, in;
  for (size_t i = 0; i < sizes.size(); ++i) {
    out.push_back(pattern(sizes[i], static_cast<uint8_t>(i)));
    in.emplace_back(sizes[i], 0xee);
  }
  // Receives first for half, sends first for the other half: eager data
  // may arrive before its receive is posted.
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i % 2) {
      send.post(out[i].data(), sizes[i]);
      recv.post(in[i].data(), sizes[i]);
    } else {
      recv.post(in[i].data(), sizes[i]);
      send.post(out[i].data(), sizes[i]);
    }
  }
  drain(send, recv);
  for (size_t i = 0; i < sizes.size(); ++i) EXPECT_EQ(in[i], out[i]) << "transfer " << i;
}

// More small transfers than the eager ring has slots: credits must cycle.
void exchangeManySmall(Connection& send, Connection& recv) {
  constexpr int kCount = 200;  // > 10 times the ring
  std::vector<uint32_t> out(kCount), in(kCount, 0);
  std::iota(out.begin(), out.end(), 1000u);
  for (int i = 0; i < kCount; ++i) send.post(&out[i], sizeof(uint32_t));
  for (int i = 0; i < kCount; ++i) recv.post(&in[i], sizeof(uint32_t));
  drain(send, recv);
  EXPECT_EQ(in, out);
}

TEST_P(Sizes, EverySizeClassArrivesIntactAndInOrder) {
  REQUIRE_DEVICE();
  test::ScopedEnv qps("TIDAL_IB_QPS_PER_CONNECTION", GetParam());
  Pair p;
  exchangeEverySizeClass(*p.send, *p.recv);
  EXPECT_THAT(p.send->describe(), HasSubstr(std::string(GetParam()) + " QP"));
}

INSTANTIATE_TEST_SUITE_P(QpsPerConnection, Sizes, ::testing::Values("1", "3"));

TEST(IbTransport, ManySmallTransfersCycleTheEagerRingThroughCredits) {
  REQUIRE_DEVICE();
  Pair p;
  exchangeManySmall(*p.send, *p.recv);
}

TEST(RegistrationCache, ChunksOfOneBufferHitAndIdleRetires) {
  REQUIRE_DEVICE();
  test::ScopedEnv eager("TIDAL_IB_EAGER_BYTES", "0");
  Pair p;
  constexpr size_t kChunk = 256 * 1024, kChunks = 8;
  auto out = pattern(kChunk * kChunks, 9);
  std::vector<uint8_t> in(out.size(), 0);
  for (size_t c = 0; c < kChunks; ++c) {
    p.recv->post(in.data() + c * kChunk, kChunk);
    p.send->post(out.data() + c * kChunk, kChunk);
  }
  drain(*p.send, *p.recv);
  EXPECT_EQ(in, out);
  const auto first = p.senderStats();
  EXPECT_EQ(first.misses, 1u) << "one window covers the whole 2 MiB buffer";
  EXPECT_EQ(first.hits, kChunks - 1);
  // Everything idle: the next call starts with no stale registration.
  p.recv->post(in.data(), kChunk);
  p.send->post(out.data(), kChunk);
  drain(*p.send, *p.recv);
  const auto second = p.senderStats();
  EXPECT_EQ(second.misses, 2u) << "the idle point retired the first window";
  EXPECT_GE(second.deregistrations, 1u);
}

TEST(RegistrationCache, FreedAndRemappedBufferSendsItsNewContents) {
  REQUIRE_DEVICE();
  test::ScopedEnv eager("TIDAL_IB_EAGER_BYTES", "0");
  Pair p;
  constexpr size_t kBytes = 1 << 20;
  void* a = ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(a, MAP_FAILED);
  std::memset(a, 0x11, kBytes);
  std::vector<uint8_t> in(kBytes, 0);
  p.recv->post(in.data(), kBytes);
  p.send->post(a, kBytes);
  drain(*p.send, *p.recv);
  ASSERT_EQ(in[kBytes / 2], 0x11);
  // Free it and map fresh pages at the very same address, as malloc does.
  ASSERT_EQ(::munmap(a, kBytes), 0);
  void* b = ::mmap(a, kBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  ASSERT_EQ(b, a) << "could not remap the same address";
  std::memset(b, 0x22, kBytes);
  p.recv->post(in.data(), kBytes);
  p.send->post(b, kBytes);
  drain(*p.send, *p.recv);
  EXPECT_EQ(in[0], 0x22) << "the NIC read the freed pages: a stale registration was reused";
  EXPECT_EQ(in[kBytes - 1], 0x22);
  ::munmap(b, kBytes);
}

TEST(IbTransport, SizeMismatchIsAnErrorNamingBothRanks) {
  REQUIRE_DEVICE();
  for (const char* eager : {"0", "65536"}) {
    test::ScopedEnv env("TIDAL_IB_EAGER_BYTES", eager);
    Pair p;
    std::vector<uint8_t> out(40000, 1), in(30000, 0);
    p.send->post(out.data(), out.size());
    p.recv->post(in.data(), in.size());
    try {
      drain(*p.send, *p.recv);
      FAIL() << "no error (eager " << eager << ")";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), tidalInvalidUsage) << e.what();
      EXPECT_THAT(e.what(), HasSubstr("40000"));
      EXPECT_THAT(e.what(), HasSubstr("30000"));
      EXPECT_THAT(e.what(), HasSubstr("rank"));
    }
  }
}

TEST(IbTransport, AbortEndsAWaitAtOnce) {
  REQUIRE_DEVICE();
  Pair p;
  std::vector<uint8_t> in(1 << 20);
  p.recv->post(in.data(), in.size());  // nothing will ever be sent
  p.recv->progress();
  p.recv->abort();
  try {
    p.recv->progress();
    FAIL() << "progress after abort did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), tidalRemoteError);
  }
  // The peer sees its side channel close.
  std::vector<uint8_t> out(1 << 20);
  p.send->post(out.data(), out.size());
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  bool failed = false;
  while (!failed && Clock::now() < deadline) {
    try {
      p.send->progress();
    } catch (const Error& e) {
      failed = true;
      EXPECT_THAT(e.what(), HasSubstr("rank 1"));
    }
  }
  EXPECT_TRUE(failed) << "the sender never noticed the aborted receiver";
}

TEST(LoopbackFlush, ReadsOneByteThroughTheRegistration) {
  REQUIRE_DEVICE();
  IbTransport t(TransportContext{0, 1, secretOf(1)});
  ASSERT_FALSE(t.listen().empty());
  std::vector<uint8_t> buffer(4096, 0x5a);
  const MemoryRegistration reg = t.registerMemory(buffer.data(), buffer.size(), MemoryKind::Host);
  EXPECT_NE(reg.key, 0u);
  RegistrationCache::Entry* e = t.device()->cache().acquire(buffer.data(), buffer.size());
  ASSERT_TRUE(e->pinned) << "the explicit registration serves the lookup";
  LoopbackFlush flush(*t.device());
  for (int i = 0; i < 3; ++i) flush.flush(e->mr, buffer.data() + 100);
  t.device()->cache().release(e);
  t.deregisterMemory(reg);
}

}  // namespace
}  // namespace tidal::ib

namespace tidal::ib {
namespace {

bool portActive(const std::string& device, int port) {
  std::ifstream state(sysfsPortDir(device, port) + "/state");
  std::string line;
  std::getline(state, line);
  return line.find("ACTIVE") != std::string::npos;
}

// Takes the port's network interface down under a waiting connection: the
// driver reports IBV_EVENT_PORT_ERR, and the wait must end with that error
// rather than at the timeout. Needs TIDAL_TEST_NETDEV (the interface under
// the port, which this test may take down and up: the VM sets it).
TEST(AsyncEvents, PortDownFailsAWaitingConnectionWithTheEvent) {
  REQUIRE_DEVICE();
  const char* netdev = std::getenv("TIDAL_TEST_NETDEV");
  if (netdev == nullptr) GTEST_SKIP() << "TIDAL_TEST_NETDEV not set";
  Pair p;
  const std::string device = p.t1->device()->name();
  const int port = p.t1->device()->port();
  std::vector<uint8_t> in(1 << 20);
  p.recv->post(in.data(), in.size());  // never sent: the receiver waits
  p.recv->progress();
  ASSERT_EQ(std::system(fmt::format("ip link set {} down", netdev).c_str()), 0);
  const auto start = Clock::now();
  std::string error;
  while (error.empty() && Clock::now() - start < std::chrono::seconds(20)) {
    try {
      p.recv->progress();
    } catch (const Error& e) {
      error = e.what();
    }
  }
  ASSERT_EQ(std::system(fmt::format("ip link set {} up", netdev).c_str()), 0);
  for (int i = 0; i < 100 && !portActive(device, port); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(portActive(device, port)) << "the port did not come back";
  ASSERT_FALSE(error.empty()) << "the wait did not end when the port went down";
  EXPECT_THAT(error, HasSubstr(p.t1->device()->api().eventTypeStr(IBV_EVENT_PORT_ERR)));
  EXPECT_THAT(error, HasSubstr(device));
  EXPECT_THAT(error, HasSubstr(fmt::format("port {}", port)));
}

}  // namespace
}  // namespace tidal::ib

namespace tidal::ib {
namespace {

// The first two active ports as TIDAL_IB_HCA spells them ("=rxe0:1" and
// "=rxe0:1,rxe1:1"), or nothing where there are fewer than two.
struct TwoPorts {
  std::string first, both;
  std::vector<std::string> names;  // device names, for sysfs
  std::vector<int> ports;
};
std::optional<TwoPorts> twoPorts() {
  std::string why;
  const VerbsApi* api = VerbsApi::load(&why);
  if (api == nullptr) return std::nullopt;
  const PortScan scan = scanPorts(*api, HcaSpec{});
  if (scan.usable.size() < 2) return std::nullopt;
  TwoPorts t;
  for (size_t i = 0; i < 2; ++i) {
    t.names.push_back(scan.usable[i].device);
    t.ports.push_back(scan.usable[i].port);
  }
  t.first = fmt::format("={}:{}", t.names[0], t.ports[0]);
  t.both = fmt::format("{},{}:{}", t.first, t.names[1], t.ports[1]);
  return t;
}

// Packets a port has sent: rxe's hw_counters/sent_pkts, else the IB port
// counter; nullopt where the port shows neither.
std::optional<uint64_t> packetsSent(const std::string& device, int port) {
  const std::string dir = sysfsPortDir(device, port);
  const CounterSnapshot hw = readHwCounters(dir);
  if (const auto it = hw.find("sent_pkts"); it != hw.end()) return it->second;
  std::ifstream in(dir + "/counters/port_xmit_packets");
  uint64_t v = 0;
  if (in >> v) return v;
  return std::nullopt;
}

#define REQUIRE_TWO_PORTS(var) \
  const auto var = twoPorts(); \
  if (!var) GTEST_SKIP() << "fewer than two active RDMA ports here"

// Both ranks list both ports: every connection stripes over two rails, data
// of every size class arrives intact and in order, and both ports carry it.
TEST(MultiRail, EverySizeClassCrossesBothRailsIntactAndInOrder) {
  REQUIRE_TWO_PORTS(two);
  test::ScopedEnv eager("TIDAL_IB_EAGER_BYTES", "8192");
  std::optional<uint64_t> before[2];
  for (int r = 0; r < 2; ++r) before[r] = packetsSent(two->names[r], two->ports[r]);
  {
    Pair p(two->both, two->both);
    EXPECT_EQ(p.t0->devices().size(), 2u);
    EXPECT_THAT(p.send->describe(), HasSubstr("ib 2 rails ["));
    EXPECT_THAT(p.recv->describe(), HasSubstr("ib 2 rails ["));
    EXPECT_THAT(p.send->describe(), HasSubstr(two->names[1]));
    exchangeEverySizeClass(*p.send, *p.recv);
    exchangeManySmall(*p.send, *p.recv);
    // Both directions between the same two ranks, as a ring of two has.
    auto back = p.t1->connectSend(0, p.h0, deadlineFromNow());
    auto backRecv = p.t0->acceptRecv(1, deadlineFromNow());
    exchangeEverySizeClass(*back, *backRecv);
  }
  for (int r = 0; r < 2; ++r) {
    const auto after = packetsSent(two->names[r], two->ports[r]);
    if (!before[r] || !after) continue;  // no packet counter on this port
    EXPECT_GT(*after - *before[r], 100u) << two->names[r] << " carried (almost) nothing";
  }
}

// Rank 0 offers two NICs, rank 1 one: both directions use the common rail
// (NIC 0 with NIC 0) and work as a plain connection.
TEST(MultiRail, UnequalNicListsFallBackToTheRailsBothRanksHave) {
  REQUIRE_TWO_PORTS(two);
  Pair p(two->both, two->first);
  EXPECT_EQ(p.t0->devices().size(), 2u);
  EXPECT_EQ(p.t1->devices().size(), 1u);
  EXPECT_THAT(p.send->describe(), ::testing::StartsWith("ib " + two->names[0]));
  EXPECT_THAT(p.send->describe(), ::testing::Not(HasSubstr("rails")));
  exchangeEverySizeClass(*p.send, *p.recv);
  auto back = p.t1->connectSend(0, p.h0, deadlineFromNow());
  auto backRecv = p.t0->acceptRecv(1, deadlineFromNow());
  EXPECT_THAT(backRecv->describe(), ::testing::Not(HasSubstr("rails")));
  exchangeEverySizeClass(*back, *backRecv);
}

// TIDAL_IB_MAX_RAILS=1 keeps the one-port choice even where two are listed.
TEST(MultiRail, MaxRailsOneTurnsItOff) {
  REQUIRE_TWO_PORTS(two);
  test::ScopedEnv one("TIDAL_IB_MAX_RAILS", "1");
  IbTransport t0(TransportContext{0, 2, secretOf(3)}), t1(TransportContext{1, 2, secretOf(3)});
  listenWith(t0, two->both);
  listenWith(t1, two->both);
  ASSERT_EQ(t0.devices().size(), 1u);
  ASSERT_EQ(t1.devices().size(), 1u);
  EXPECT_EQ(t0.device()->name(), two->names[0]) << "rank 0: port 0 mod 2";
  EXPECT_EQ(t1.device()->name(), two->names[1]) << "rank 1: port 1 mod 2";
}

}  // namespace
}  // namespace tidal::ib
