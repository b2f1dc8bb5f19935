// The shm transport with real threads and forked processes: byte-exact
// delivery across slot boundaries and ring wrap-around, no lost wakeups when
// both sides sleep in poll(), strangers refused, a killed peer reported
// quickly, and nothing ever created in /dev/shm.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <functional>
#include <numeric>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>

#include "core/error.h"
#include "log_capture.h"
#include "net/wire.h"
#include "scoped_env.h"
#include "shm_test_support.h"
#include "transport_checks.h"
#include "transports/shm/shm_connection.h"
#include "transports/transport.h"

namespace tidal {
namespace {

using test::drain;
using test::driveUntilDone;
using test::expectAbortEndsAccept;
using test::expectPromptConnection;
using test::Int64Sum;
using test::LogCapture;
using test::pattern;
using test::ScopedEnv;
using test::secretOf;
using test::ShmPair;
using namespace std::chrono_literals;

std::set<std::string> devShmEntries() {
  std::set<std::string> names;
  if (DIR* d = ::opendir("/dev/shm")) {
    while (dirent* e = ::readdir(d)) names.insert(e->d_name);
    ::closedir(d);
  }
  return names;
}

std::string selfMaps() {
  std::ifstream in("/proc/self/maps");
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Connects to the shm listener behind `h` ("<host key> <abstract name>") as a
// stranger would, without the transport.
Socket rawConnect(const ConnectHandle& h) {
  const std::string text(h.begin(), h.end());
  const std::string name = text.substr(text.find(' ') + 1);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  const auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  Socket s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (::connect(s.fd(), reinterpret_cast<const sockaddr*>(&addr), length) != 0) {
    throw std::runtime_error("rawConnect: " + std::string(std::strerror(errno)));
  }
  return s;
}

// An shm hello by hand, in shm_transport.cc's format: the wire.h header, the
// secret, then version 8, from rank, to rank, slots, slot bytes.
std::vector<uint8_t> shmHello(const Secret& secret, int from, int to) {
  std::vector<uint8_t> body;
  wire::Writer w(body);
  w.bytes(secret.data(), secret.size());
  w.u16(8);
  w.u32(static_cast<uint32_t>(from));
  w.u32(static_cast<uint32_t>(to));
  w.u32(8);
  w.u32(262144);
  const auto header =
      wire::encodeHeader(wire::MsgType::ShmHello, static_cast<uint32_t>(body.size()));
  body.insert(body.begin(), header.begin(), header.end());
  return body;
}

void sendRaw(Socket& s, const std::vector<uint8_t>& bytes) {
  s.sendAll(bytes.data(), bytes.size(), deadlineIn(5000ms), "stranger");
}

// The WARN lines name a unix-socket peer by the pid and uid the kernel reports.
std::string thisProcess() { return fmt::format("pid {} uid {}", ::getpid(), ::getuid()); }

// (slots, slot bytes)
class ShmGeometry : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(ShmGeometry, TransfersArriveIntactAndInOrder) {
  const auto [slots, slotBytes] = GetParam();
  ScopedEnv s1("TIDAL_SHM_SLOTS", std::to_string(slots).c_str());
  ScopedEnv s2("TIDAL_SHM_SLOT_BYTES", std::to_string(slotBytes).c_str());
  ScopedEnv ring("TIDAL_SHM_PULL_BYTES", "0");  // the ring itself (pulls: shm_pull_test)
  ShmPair p;
  const size_t slot = static_cast<size_t>(slotBytes);
  const size_t sizes[] = {0, 1, 4095, slot - 1, slot, slot + 1, 0, 3 << 20, 17, 0};
  std::vector<std::vector<uint8_t>> out, in;
  for (size_t i = 0; i < std::size(sizes); ++i) {
    out.push_back(pattern(sizes[i], static_cast<uint8_t>(i * 31 + 1)));
    in.emplace_back(sizes[i], 0);
  }
  for (size_t i = 0; i < out.size(); ++i) {
    p.send->post(out[i].data(), out[i].size());
    p.recv->post(in[i].data(), in[i].size());
  }
  EXPECT_EQ(p.recv->completed(), 1u) << "a leading zero-byte transfer completes at once";
  drain(*p.send, *p.recv);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], in[i]) << "transfer " << i;
}

INSTANTIATE_TEST_SUITE_P(Rings, ShmGeometry,
                         ::testing::Values(std::make_pair(8, 262144), std::make_pair(2, 4096),
                                           std::make_pair(3, 65536)));

TEST(ShmTransport, ManySmallTransfersWrapTheRing) {
  ScopedEnv s1("TIDAL_SHM_SLOTS", "2");
  ScopedEnv s2("TIDAL_SHM_SLOT_BYTES", "4096");
  ShmPair p;
  std::mt19937 rng(42);
  std::vector<std::vector<uint8_t>> out, in;
  for (int i = 0; i < 20000; ++i) {
    out.push_back(pattern(rng() % 300, static_cast<uint8_t>(i)));
    in.emplace_back(out.back().size(), 0);
  }
  // Post in waves so the receiver often finds a half-filled ring.
  size_t posted = 0;
  while (posted < out.size()) {
    for (size_t k = 0; k < 97 && posted < out.size(); ++k, ++posted) {
      p.send->post(out[posted].data(), out[posted].size());
      p.recv->post(in[posted].data(), in[posted].size());
    }
    p.send->progress();
    p.recv->progress();
  }
  drain(*p.send, *p.recv);
  for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], in[i]) << "transfer " << i;
}

// Transfers of 1 to 224 bytes travel as packets of one to four cache lines:
// the sender fills the packet area's lines and then waits until the
// receiver has taken some, while a 225-byte transfer between them still goes
// through the ring in its place in the order. A receive that expects another
// size than the packet holds is refused, naming both.
TEST(ShmTransport, SmallTransfersTravelAsPacketsWithinTheirArea) {
  ShmPair p;
  constexpr size_t kSent = 3 * shm::kPackets + 5;
  std::vector<std::vector<uint8_t>> out, in;
  size_t linesUsed = 0, fit = 0;
  bool full = false;
  for (size_t i = 0; i < kSent; ++i) {
    const bool ring = i == 10;
    const size_t n = ring ? shm::kMaxPacketBytes + 1 : 1 + (i * 37) % shm::kMaxPacketBytes;
    out.push_back(pattern(n, static_cast<uint8_t>(i * 7 + 1)));
    in.emplace_back(n, 0);
    p.send->post(out[i].data(), n);
    const size_t lines = ring ? 0 : (n + shm::kLineBytes - 1) / shm::kLineBytes;
    if (!full && linesUsed + lines <= shm::kPackets) {
      linesUsed += lines;
      ++fit;
    } else {
      full = true;
    }
  }
  for (int i = 0; i < 10; ++i) p.send->progress();
  // What fits in the area's lines, the ring transfer among it included, is
  // written; the first packet that does not fit waits, and everything after it.
  EXPECT_EQ(p.send->completed(), fit);
  EXPECT_GT(linesUsed, shm::kPackets - shm::kMaxPacketLines);
  for (size_t i = 0; i < kSent; ++i) p.recv->post(in[i].data(), in[i].size());
  drain(*p.send, *p.recv);
  for (size_t i = 0; i < kSent; ++i) ASSERT_EQ(out[i], in[i]) << "transfer " << i;

  uint64_t word = 42;
  std::vector<uint8_t> wrong(16);
  p.send->post(&word, sizeof word);
  p.recv->post(wrong.data(), wrong.size());
  p.send->progress();
  try {
    for (int i = 0; i < 100; ++i) p.recv->progress();
    FAIL() << "a 16-byte receive took an 8-byte packet";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("holds 8 bytes where this receive of 16 bytes expects 16"),
              std::string::npos)
        << e.what();
  }
}

// A sender whose packet lines are all unread sleeps in poll() (no spinning)
// and must be woken by the receiver taking them; the receiver, also on its
// own thread, sleeps whenever nothing has arrived. A lost wakeup on either
// side shows up as a poll timeout.
TEST(ShmTransport, ASenderWaitingForPacketLinesIsWoken) {
  ShmPair p;
  constexpr int kRounds = 40;
  constexpr size_t kPerRound = 3 * shm::kPackets;  // three times the lines, one each
  std::vector<uint64_t> out(kRounds * kPerRound), in(out.size(), 0);
  std::iota(out.begin(), out.end(), uint64_t{1});
  const Deadline d = deadlineIn(20000ms);
  int stallsSend = 0, stallsRecv = 0;
  std::thread sender([&] {
    try {
      for (int r = 0; r < kRounds; ++r) {
        for (size_t i = 0; i < kPerRound; ++i) {
          p.send->post(&out[r * kPerRound + i], sizeof(uint64_t));
        }
        stallsSend += driveUntilDone(*p.send, d);
      }
    } catch (const std::exception& e) {
      ADD_FAILURE() << "sender: " << e.what();
    }
  });
  try {
    for (int r = 0; r < kRounds; ++r) {
      // Late, so that the sender has filled every line and gone to sleep.
      std::this_thread::sleep_for(2ms);
      for (size_t i = 0; i < kPerRound; ++i) {
        p.recv->post(&in[r * kPerRound + i], sizeof(uint64_t));
      }
      stallsRecv += driveUntilDone(*p.recv, d);
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << "receiver: " << e.what();
    p.send->abort();
  }
  sender.join();
  EXPECT_EQ(stallsSend, 0);
  EXPECT_EQ(stallsRecv, 0);
  EXPECT_EQ(in, out);
}

// Receives that reduce on arrival, mixed with plain transfers of odd sizes
// (which leave the stream unaligned), on a ring small enough that reduces
// wrap around it; both sides on their own thread, sleeping in poll(). Every
// sum must be exact, and no side may stall or spin forever on a piece that
// is not yet a whole element.
// With TIDAL_SHM_PULL_BYTES set, the large ones are pulled instead (through
// the bounce buffer, still in whole elements) between the small ones that
// cross the ring.
// (slots, slot bytes, most int64 elements in a large reduce, pull threshold)
class ShmReduceOnArrival : public ::testing::TestWithParam<std::tuple<int, int, int, int>> {};

TEST_P(ShmReduceOnArrival, AfterUnalignedTransfers) {
  const auto [slots, slotBytes, largest, pullBytes] = GetParam();
  ScopedEnv s1("TIDAL_SHM_SLOTS", std::to_string(slots).c_str());
  ScopedEnv s2("TIDAL_SHM_SLOT_BYTES", std::to_string(slotBytes).c_str());
  ScopedEnv pull("TIDAL_SHM_PULL_BYTES", std::to_string(pullBytes).c_str());
  if (pullBytes > 0 && !test::pullRefusedHere().empty()) {
    GTEST_SKIP() << "process_vm_readv is refused here: " << test::pullRefusedHere();
  }
  ShmPair p;
  ASSERT_TRUE(p.recv->canReduceOnArrival());
  ASSERT_FALSE(p.send->canReduceOnArrival());
  std::mt19937 rng(7);
  constexpr int kTransfers = 400;
  std::vector<std::vector<int64_t>> out, local, result;
  std::vector<std::vector<uint8_t>> oddOut, oddIn;
  for (int i = 0; i < kTransfers; ++i) {
    const size_t n =
        (i % 5 == 0) ? largest / 2 + rng() % (largest / 2) : rng() % 200;  // large: many pieces
    out.emplace_back(n);
    local.emplace_back(n);
    for (size_t k = 0; k < n; ++k) {
      out.back()[k] = static_cast<int64_t>(rng());
      local.back()[k] = static_cast<int64_t>(rng()) * 3;
    }
    result.emplace_back(n, 0);
    oddOut.push_back(pattern(1 + rng() % 13, static_cast<uint8_t>(i)));
    oddIn.emplace_back(oddOut.back().size(), 0);
  }
  Int64Sum sum;
  const Deadline d = deadlineIn(20000ms);
  int stallsSend = 0, stallsRecv = 0;
  std::thread sender([&] {
    try {
      for (int i = 0; i < kTransfers; ++i) {
        p.send->post(oddOut[i].data(), oddOut[i].size());
        p.send->post(out[i].data(), out[i].size() * sizeof(int64_t));
      }
      stallsSend = driveUntilDone(*p.send, d);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "sender: " << e.what();
    }
  });
  try {
    for (int i = 0; i < kTransfers; ++i) {
      p.recv->post(oddIn[i].data(), oddIn[i].size());
      p.recv->postReduce(result[i].data(), local[i].data(), result[i].size() * sizeof(int64_t),
                         sum);
    }
    stallsRecv = driveUntilDone(*p.recv, d);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "receiver: " << e.what();
    p.send->abort();  // lets the sender's wait end instead of running into its deadline
  }
  sender.join();
  EXPECT_EQ(stallsSend, 0);
  EXPECT_EQ(stallsRecv, 0);
  for (int i = 0; i < kTransfers; ++i) {
    ASSERT_EQ(oddIn[i], oddOut[i]) << "plain transfer " << i;
    for (size_t k = 0; k < out[i].size(); ++k) {
      ASSERT_EQ(result[i][k], local[i][k] + out[i][k]) << "reduce " << i << " element " << k;
    }
  }
  EXPECT_GT(sum.pieces_.load(), kTransfers / 5) << "large reduces arrive in several pieces";
  uint64_t pulled = 0;
  for (const auto& o : out)
    pulled += pullBytes > 0 && o.size() * sizeof(int64_t) >= size_t(pullBytes);
  const auto* receiver = dynamic_cast<const shm::ShmConnection*>(p.recv.get());
  ASSERT_NE(receiver, nullptr);
  EXPECT_EQ(receiver->pulls(), pulled);
}

// A small ring that large reduces wrap several times, and the default ring,
// where a sender that finds it empty restarts at its beginning.
INSTANTIATE_TEST_SUITE_P(Rings, ShmReduceOnArrival,
                         ::testing::Values(std::make_tuple(2, 4096, 6000, 0),
                                           std::make_tuple(8, 262144, 100000, 0),
                                           std::make_tuple(2, 4096, 6000, 4096),
                                           std::make_tuple(8, 262144, 100000, 4096)));

// Transfers that each finish before the next starts (as in a latency-bound
// collective) leave the ring empty: past its first 64 KiB the sender restarts
// at the beginning, and the receiver must follow, for plain transfers and
// reduces alike.
TEST(ShmTransport, SenderRestartsAtTheRingsBeginningWhenEmpty) {
  ShmPair p;  // default ring: 8 x 256 KiB
  std::mt19937 rng(3);
  Int64Sum sum;
  for (int i = 0; i < 200; ++i) {
    const size_t n = 1 + rng() % 12000;  // up to ~94 KiB
    std::vector<int64_t> out(n), local(n), result(n, 0);
    for (size_t k = 0; k < n; ++k) {
      out[k] = static_cast<int64_t>(rng());
      local[k] = static_cast<int64_t>(k);
    }
    p.send->post(out.data(), n * sizeof(int64_t));
    if (i % 2) {
      p.recv->postReduce(result.data(), local.data(), n * sizeof(int64_t), sum);
    } else {
      p.recv->post(result.data(), n * sizeof(int64_t));
    }
    drain(*p.send, *p.recv);
    for (size_t k = 0; k < n; ++k) {
      ASSERT_EQ(result[k], out[k] + (i % 2 ? local[k] : 0)) << "transfer " << i << " element " << k;
    }
  }
  const auto* sender = dynamic_cast<const shm::ShmConnection*>(p.send.get());
  ASSERT_NE(sender, nullptr);
  EXPECT_GT(sender->restarts(), 50u);
}

// Each side sees the CPU the other waits on (Connection::publishCpu), and
// nothing before its first wait (not even CPU 0, which the zeroed segment
// would say) or once it said the wait is over.
TEST(ShmTransport, EachSideSeesTheCpuTheOtherWaitsOn) {
  ShmPair p;
  for (int cpu = 0; cpu < 4; ++cpu) {
    EXPECT_FALSE(p.send->peerWaitsOnCpu(cpu)) << cpu;
    EXPECT_FALSE(p.recv->peerWaitsOnCpu(cpu)) << cpu;
  }
  p.send->publishCpu(3);
  EXPECT_TRUE(p.recv->peerWaitsOnCpu(3));
  EXPECT_FALSE(p.recv->peerWaitsOnCpu(2));
  EXPECT_FALSE(p.send->peerWaitsOnCpu(3));  // its own CPU, not the peer's
  p.recv->publishCpu(0);
  EXPECT_TRUE(p.send->peerWaitsOnCpu(0));
  EXPECT_TRUE(p.recv->peerWaitsOnCpu(3));
  p.send->publishCpu(-1);
  EXPECT_FALSE(p.recv->peerWaitsOnCpu(3));
  EXPECT_FALSE(p.recv->peerWaitsOnCpu(-1));
}

// Both sides on their own thread, each sleeping in poll() as soon as it
// cannot move (no spinning): a lost wakeup shows up as a poll timeout.
TEST(ShmTransport, ThreadsSleepingInPollLoseNoWakeups) {
  ScopedEnv s1("TIDAL_SHM_SLOTS", "2");
  ScopedEnv s2("TIDAL_SHM_SLOT_BYTES", "4096");
  ShmPair ab, ba;  // ab: rank 0 -> 1; ba built the same way, used as 1 -> 0 for the reply
  constexpr int kRounds = 3000;
  int stallsA = 0, stallsB = 0;
  std::vector<uint8_t> big = pattern(64 << 10, 3), bigIn(big.size());
  const Deadline d = deadlineIn(20000ms);
  // A side that stalls gives up after a few; its partner then runs into the
  // deadline. Either way the test fails in seconds, not minutes.
  auto guarded = [](const std::function<void()>& body) {
    try {
      body();
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what();
    }
  };
  std::thread a([&] {
    guarded([&] {
      for (int i = 0; i < kRounds && stallsA < 5; ++i) {
        uint32_t x = static_cast<uint32_t>(i), y = 0;
        ab.send->post(&x, sizeof x);
        stallsA += driveUntilDone(*ab.send, d);
        ba.recv->post(&y, sizeof y);
        stallsA += driveUntilDone(*ba.recv, d);
        if (y != x + 1) ADD_FAILURE() << "round " << i << ": got " << y;
      }
      ab.send->post(big.data(), big.size());  // 16 ring-fulls: the sender sleeps on space
      stallsA += driveUntilDone(*ab.send, d);
    });
  });
  std::thread b([&] {
    guarded([&] {
      for (int i = 0; i < kRounds && stallsB < 5; ++i) {
        uint32_t x = 0;
        ab.recv->post(&x, sizeof x);
        stallsB += driveUntilDone(*ab.recv, d);
        ++x;
        ba.send->post(&x, sizeof x);
        stallsB += driveUntilDone(*ba.send, d);
      }
      ab.recv->post(bigIn.data(), bigIn.size());
      stallsB += driveUntilDone(*ab.recv, d);
    });
  });
  a.join();
  b.join();
  EXPECT_EQ(stallsA, 0);
  EXPECT_EQ(stallsB, 0);
  EXPECT_TRUE(big == bigIn) << "the 64 KiB transfer arrived damaged";
}

// Across processes, as ranks run: through the ring, and pulled out of the
// child's memory by its parent (TIDAL_SHM_PULL_BYTES: the parameter).
class ShmForkedSender : public ::testing::TestWithParam<int> {};

TEST_P(ShmForkedSender, DeliversToParent) {
  const int pullBytes = GetParam();
  ScopedEnv pull("TIDAL_SHM_PULL_BYTES", std::to_string(pullBytes).c_str());
  if (pullBytes > 0 && !test::pullRefusedHere().empty()) {
    GTEST_SKIP() << "process_vm_readv is refused here: " << test::pullRefusedHere();
  }
  auto t1 = createTransport("shm", {1, 2, secretOf(5)});
  const ConnectHandle h1 = t1->listen();
  const std::vector<uint8_t> data = pattern(3 << 20, 9);
  // The sender posts once the receiver has accepted (and probed whether it
  // may pull): a transfer that starts before that crosses the ring, which
  // is correct but not what this case is about.
  int accepted[2];
  ASSERT_EQ(::pipe(accepted), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int rc = 1;
    try {
      auto t0 = createTransport("shm", {0, 2, secretOf(5)});
      auto send = t0->connectSend(1, h1, deadlineIn(10000ms));
      char go = 0;
      if (::read(accepted[0], &go, 1) != 1) ::_exit(2);
      std::vector<uint8_t> copy = data;
      send->post(copy.data(), copy.size());
      driveUntilDone(*send, deadlineIn(20000ms));
      rc = 0;  // exits at once: through the ring, the tail of the data is only there
    } catch (...) {
    }
    ::_exit(rc);
  }
  auto recv = t1->acceptRecv(0, deadlineIn(10000ms));
  ASSERT_EQ(::write(accepted[1], "g", 1), 1);
  std::vector<uint8_t> in(data.size());
  recv->post(in.data(), in.size());
  driveUntilDone(*recv, deadlineIn(20000ms));
  int status = 0;
  ::waitpid(child, &status, 0);
  ::close(accepted[0]);
  ::close(accepted[1]);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(data, in);
  const auto* receiver = dynamic_cast<const shm::ShmConnection*>(recv.get());
  ASSERT_NE(receiver, nullptr);
  EXPECT_EQ(receiver->pulls(), pullBytes > 0 ? 1u : 0u) << recv->describe();
}

INSTANTIATE_TEST_SUITE_P(RingAndPull, ShmForkedSender, ::testing::Values(0, 65536));

TEST(ShmTransport, StrangerWithWrongSecretIsRefusedAndRealPeerAccepted) {
  auto t0 = createTransport("shm", {0, 2, secretOf(1)});
  auto t1 = createTransport("shm", {1, 2, secretOf(1)});
  auto intruder = createTransport("shm", {0, 2, secretOf(2)});  // right ranks, wrong secret
  const ConnectHandle h1 = t1->listen();
  LogCapture logs;
  const Deadline d = deadlineIn(10000ms);
  auto bad = intruder->connectSend(1, h1, d);
  auto good = t0->connectSend(1, h1, d);
  auto recv = t1->acceptRecv(0, d);
  uint32_t x = 0xfeedf00d, y = 0;
  good->post(&x, sizeof x);
  recv->post(&y, sizeof y);
  drain(*good, *recv);
  EXPECT_EQ(y, 0xfeedf00d);
  EXPECT_TRUE(logs.contains("closed connection from " + thisProcess(), "wrong secret"))
      << logs.all();
  // The intruder's socket was closed: once its ring is full it learns so.
  std::vector<uint8_t> lots(8 << 20);
  bad->post(lots.data(), lots.size());
  try {
    driveUntilDone(*bad, deadlineIn(5000ms));
    FAIL() << "the refused sender completed 8 MiB";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), tidalRemoteError);
    EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
  }
}

// Strangers on the shm listener that stay silent, trickle, send garbage or a
// wrong secret hold only their own slot: the real peer is served at once,
// long before kHelloReadLimit frees the silent ones, and each refusal is a
// WARN naming the process.
TEST(ShmTransport, SilentStrangersDoNotStopTheRealPeer) {
  auto t0 = createTransport("shm", {0, 2, secretOf(8)});
  auto t1 = createTransport("shm", {1, 2, secretOf(8)});
  const ConnectHandle h1 = t1->listen();
  LogCapture logs;
  Socket silent = rawConnect(h1);
  Socket trickle = rawConnect(h1);
  const std::vector<uint8_t> hello = shmHello(secretOf(8), 0, 1);
  sendRaw(trickle, std::vector<uint8_t>(hello.begin(), hello.begin() + 7));
  Socket garbage = rawConnect(h1);
  sendRaw(garbage, std::vector<uint8_t>(64, 0x5a));
  Socket wrongSecret = rawConnect(h1);
  sendRaw(wrongSecret, shmHello(secretOf(9), 0, 1));
  expectPromptConnection(*t0, *t1, 0, 1, h1);
  EXPECT_TRUE(logs.contains("closed connection from " + thisProcess(), "magic")) << logs.all();
  EXPECT_TRUE(logs.contains("closed connection from " + thisProcess(), "wrong secret"))
      << logs.all();
}

// The descriptors are taken only after a hello with the secret, and a hello
// without them is refused rather than waited for past its read limit.
TEST(ShmTransport, HelloWithoutItsDescriptorsIsRefused) {
  auto t1 = createTransport("shm", {1, 2, secretOf(3)});
  const ConnectHandle h1 = t1->listen();
  LogCapture logs;
  {
    Socket liar = rawConnect(h1);
    sendRaw(liar, shmHello(secretOf(3), 0, 1));
  }  // closed before any descriptors
  EXPECT_THROW(t1->acceptRecv(0, deadlineIn(500ms)), Error);
  EXPECT_TRUE(logs.contains("claims rank 0", "before the descriptors")) << logs.all();
}

// Forks a peer that connects to us (or accepts us), moves one word, and then
// waits to be killed.
class ShmPeerDeath : public ::testing::TestWithParam<bool> {};

TEST_P(ShmPeerDeath, KilledPeerIsARemoteErrorNotAHang) {
  const bool weSend = GetParam();
  int pipefd[2];
  ASSERT_EQ(::pipe(pipefd), 0);
  auto self = createTransport("shm", {weSend ? 0 : 1, 2, secretOf(4)});
  const ConnectHandle mine = self->listen();
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    try {
      auto t = createTransport("shm", {weSend ? 1 : 0, 2, secretOf(4)});
      uint32_t word = 42;
      std::unique_ptr<Connection> c;
      if (weSend) {  // the child receives: it listens and tells us where
        const ConnectHandle h = t->listen();
        const uint32_t n = static_cast<uint32_t>(h.size());
        if (::write(pipefd[1], &n, sizeof n) < 0 || ::write(pipefd[1], h.data(), n) < 0) _exit(1);
        c = t->acceptRecv(0, deadlineIn(10000ms));
      } else {
        c = t->connectSend(1, mine, deadlineIn(10000ms));
      }
      c->post(&word, sizeof word);
      driveUntilDone(*c, deadlineIn(10000ms));
      ::pause();
    } catch (...) {
    }
    ::_exit(1);
  }
  std::unique_ptr<Connection> c;
  if (weSend) {
    uint32_t n = 0;
    ASSERT_EQ(::read(pipefd[0], &n, sizeof n), static_cast<ssize_t>(sizeof n));
    ConnectHandle h(n);
    ASSERT_EQ(::read(pipefd[0], h.data(), n), static_cast<ssize_t>(n));
    c = self->connectSend(1, h, deadlineIn(10000ms));
  } else {
    c = self->acceptRecv(0, deadlineIn(10000ms));
  }
  uint32_t word = weSend ? 42 : 0;
  c->post(&word, sizeof word);
  driveUntilDone(*c, deadlineIn(10000ms));
  EXPECT_EQ(word, 42u);
  // Now wait for something the child will never do (the sender: more than
  // the ring holds), and kill it while we sleep in poll().
  std::vector<uint8_t> lots(16 << 20);
  c->post(lots.data(), lots.size());
  std::thread killer([child] {
    std::this_thread::sleep_for(200ms);
    ::kill(child, SIGKILL);
  });
  const auto start = Clock::now();
  try {
    driveUntilDone(*c, deadlineIn(5000ms));
    ADD_FAILURE() << "completed a transfer the dead peer never took part in";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), tidalRemoteError);
    EXPECT_NE(std::string(e.what()).find(weSend ? "to rank 1" : "from rank 0"), std::string::npos)
        << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();  // the test's own deadline: a hang
  }
  const auto waited = Clock::now() - start;
  killer.join();
  ::waitpid(child, nullptr, 0);
  ::close(pipefd[0]);
  ::close(pipefd[1]);
  EXPECT_LT(waited, 1500ms) << "death noticed only after "
                            << std::chrono::duration_cast<std::chrono::milliseconds>(waited).count()
                            << " ms";
}

INSTANTIATE_TEST_SUITE_P(Sides, ShmPeerDeath, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& side) {
                           return side.param ? "WeSend" : "WeReceive";
                         });

TEST(ShmTransport, AbortWakesASleepingReceiver) {
  ShmPair p;
  uint32_t y = 0;
  p.recv->post(&y, sizeof y);
  std::thread aborter([&] {
    std::this_thread::sleep_for(100ms);
    p.recv->abort();
  });
  const auto start = Clock::now();
  int stalls = 0;
  EXPECT_THROW(stalls = driveUntilDone(*p.recv, deadlineIn(5000ms)), Error);
  aborter.join();
  EXPECT_EQ(stalls, 0);
  EXPECT_LT(Clock::now() - start, 1000ms);
}

TEST(ShmTransport, SegmentsAreMemfdsAndNothingLandsInDevShm) {
  const std::set<std::string> before = devShmEntries();
  {
    ShmPair p;
    const std::string maps = selfMaps();
    EXPECT_NE(maps.find("memfd:tidal-shm-0-to-1"), std::string::npos)
        << "the segment is not a memfd mapping";
    EXPECT_EQ(maps.find("/dev/shm/"), std::string::npos) << "a /dev/shm file is mapped";
    uint64_t x = 5, y = 0;
    p.send->post(&x, sizeof x);
    p.recv->post(&y, sizeof y);
    drain(*p.send, *p.recv);
  }
  for (const auto& name : devShmEntries()) {
    EXPECT_TRUE(before.count(name)) << "/dev/shm/" << name << " appeared";
  }
  EXPECT_EQ(selfMaps().find("memfd:tidal-shm"), std::string::npos) << "a segment leaked";
}

TEST(ShmTransport, AbortEndsAWaitingAccept) {
  auto t1 = createTransport("shm", {1, 2, secretOf(3)});
  t1->listen();
  expectAbortEndsAccept(*t1, 0);
}

TEST(ShmTransport, AcceptTimesOutNamingThePeer) {
  auto t1 = createTransport("shm", {1, 2, secretOf(3)});
  t1->listen();
  try {
    t1->acceptRecv(0, deadlineIn(300ms));
    FAIL() << "accept returned without a peer";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), tidalTimeout);
    EXPECT_NE(std::string(e.what()).find("rank 0"), std::string::npos) << e.what();
  }
}

TEST(ShmTransport, BadGeometryIsRejected) {
  ScopedEnv s("TIDAL_SHM_SLOT_BYTES", "100");
  EXPECT_THROW(createTransport("shm", {0, 2, secretOf(1)}), Error);
}

}  // namespace
}  // namespace tidal
