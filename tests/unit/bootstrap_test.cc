// Bootstrap rendezvous and ring collectives with ranks as threads on
// loopback, and the root's behaviour towards strangers and misbehaving ranks.
#include "bootstrap/bootstrap.h"

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <optional>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "core/params.h"
#include "log_capture.h"
#include "net/wire.h"
#include "scoped_env.h"

namespace tidal {
namespace {

using namespace std::chrono_literals;

using test::LogCapture;
using test::ScopedEnv;

UniqueId freshJob() {
  UniqueId id;
  id.secret = randomSecret();
  id.root = startRoot(SocketAddress::loopback(AF_INET, 0), id.secret);
  return id;
}

struct Outcome {
  std::optional<Error> error;
};

// Runs `body` as ranks `ranks` of an `nranks` job, one thread each; returns
// each rank's error, if any.
std::vector<Outcome> runRanks(const UniqueId& id, int nranks, const std::vector<int>& ranks,
                              const std::function<void(Bootstrap&)>& body) {
  std::vector<Outcome> out(ranks.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ranks.size(); ++i) {
    threads.emplace_back([&, i] {
      try {
        auto b = Bootstrap::create(id, ranks[i], nranks);
        body(*b);
      } catch (const Error& e) {
        out[i].error = e;
      }
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

std::vector<int> allRanks(int n) {
  std::vector<int> r(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) r[static_cast<size_t>(i)] = i;
  return r;
}

void expectAllOk(const std::vector<Outcome>& outcomes) {
  for (size_t i = 0; i < outcomes.size(); ++i) {
    EXPECT_FALSE(outcomes[i].error) << "rank " << i << ": " << outcomes[i].error->what();
  }
}

uint8_t pattern(int rank, size_t i) { return static_cast<uint8_t>(rank * 31 + i * 7 + (i >> 9)); }

class BootstrapN : public testing::TestWithParam<int> {};

TEST_P(BootstrapN, AllGatherBroadcastBarrier) {
  const int n = GetParam();
  std::atomic<int> entered{0};
  auto outcomes = runRanks(freshJob(), n, allRanks(n), [&](Bootstrap& b) {
    EXPECT_EQ(b.nranks(), n);
    // Small allGather.
    std::vector<int> all(static_cast<size_t>(n), -1);
    const int mine = 1000 + b.rank();
    b.allGather(&mine, all.data(), sizeof mine);
    for (int r = 0; r < n; ++r) EXPECT_EQ(all[static_cast<size_t>(r)], 1000 + r);

    // Larger than any socket buffer, in place.
    const size_t big = (1u << 20) + 4099;
    std::vector<uint8_t> slots(big * static_cast<size_t>(n));
    uint8_t* own = slots.data() + big * static_cast<size_t>(b.rank());
    for (size_t i = 0; i < big; ++i) own[i] = pattern(b.rank(), i);
    b.allGather(own, slots.data(), big);
    for (int r = 0; r < n; ++r) {
      const uint8_t* block = slots.data() + big * static_cast<size_t>(r);
      size_t wrong = 0;
      for (size_t i = 0; i < big; ++i) wrong += block[i] != pattern(r, i);
      EXPECT_EQ(wrong, 0u) << "block of rank " << r << " on rank " << b.rank();
    }

    // Zero bytes is legal and still synchronises.
    b.allGather(nullptr, nullptr, 0);

    // Broadcast from the first and the last rank, 300 KiB.
    for (int root : {0, n - 1}) {
      std::vector<uint8_t> data(300 << 10, 0);
      if (b.rank() == root) {
        for (size_t i = 0; i < data.size(); ++i) data[i] = pattern(root + 5, i);
      }
      b.broadcast(data.data(), data.size(), root);
      size_t wrong = 0;
      for (size_t i = 0; i < data.size(); ++i) wrong += data[i] != pattern(root + 5, i);
      EXPECT_EQ(wrong, 0u) << "broadcast from " << root << " on rank " << b.rank();
    }

    // Nobody leaves the barrier before everybody entered it.
    if (b.rank() == n - 1) std::this_thread::sleep_for(100ms);
    entered.fetch_add(1);
    b.barrier();
    EXPECT_EQ(entered.load(), n) << "rank " << b.rank() << " left the barrier early";
  });
  expectAllOk(outcomes);
}

INSTANTIATE_TEST_SUITE_P(Ranks, BootstrapN, testing::Values(1, 2, 3, 5, 8));

// Several MiB per rank: more than loopback socket buffers absorb (about
// 4 MiB on Linux and gVisor), so "send everything, then receive" would
// deadlock here where the duplex ring step does not.
// A notice goes to rank+1 only; hear() returns it, an allGather after an
// unread one skips it, and a silent rank-1 (or one that already sent a ring
// operation's message, which hear() leaves unread) is heard as nothing,
// without breaking the ring.
TEST(BootstrapNotice, TravelsToTheNextRankAndLeftoversAreSkipped) {
  const int n = 3;
  std::vector<std::optional<wire::Notice>> heard(n);
  std::vector<std::vector<int>> gathered(n, std::vector<int>(n, -1));
  auto outcomes = runRanks(freshJob(), n, allRanks(n), [&](Bootstrap& b) {
    const int r = b.rank();
    // Nobody has said anything yet: silence, and the ring stays usable.
    EXPECT_FALSE(b.hear(50ms)) << "rank " << r;
    b.barrier();
    if (r == 0) b.tell({wire::Notice::Kind::Finding, 0, tidalInvalidUsage, "count differs\n!"});
    if (r == 1) heard[1] = b.hear(5000ms);
    if (r == 2) b.tell({wire::Notice::Kind::None, -1, tidalRemoteError, {}});  // to rank 0, unread
    int mine = 10 + r;
    b.allGather(&mine, gathered[static_cast<size_t>(r)].data(), sizeof(int));
  });
  expectAllOk(outcomes);
  ASSERT_TRUE(heard[1]);
  EXPECT_EQ(heard[1]->kind, wire::Notice::Kind::Finding);
  EXPECT_EQ(heard[1]->origin, 0);
  EXPECT_EQ(heard[1]->code, tidalInvalidUsage);
  EXPECT_EQ(heard[1]->text, "count differs?!");  // control characters neutralised
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(gathered[static_cast<size_t>(r)], (std::vector<int>{10, 11, 12})) << "rank " << r;
  }
}

// A stalled call peeks for rank-1's notice (noticeWaiting): nothing before
// one is told, the notice once it has arrived, still there on a second peek
// (a peek reads nothing), and nothing once hear() has taken it.
TEST(BootstrapNotice, APeekSeesANoticeWithoutTakingIt) {
  const int n = 2;
  std::vector<int> seen(n, -1), seenAgain(n, -1), afterHearing(n, -1);
  std::vector<std::optional<wire::Notice>> heard(n);
  auto outcomes = runRanks(freshJob(), n, allRanks(n), [&](Bootstrap& b) {
    const int r = b.rank();
    EXPECT_FALSE(b.noticeWaiting()) << "rank " << r;
    b.barrier();
    if (r == 0) b.tell({wire::Notice::Kind::Finding, 0, tidalInvalidUsage, "order differs"});
    if (r != 1) return;
    const auto until = std::chrono::steady_clock::now() + 5s;
    while (!b.noticeWaiting() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(1ms);
    }
    seen[1] = b.noticeWaiting();
    seenAgain[1] = b.noticeWaiting();
    heard[1] = b.hear(1000ms);
    afterHearing[1] = b.noticeWaiting();
  });
  expectAllOk(outcomes);
  EXPECT_EQ(seen[1], 1);
  EXPECT_EQ(seenAgain[1], 1);
  ASSERT_TRUE(heard[1]);
  EXPECT_EQ(heard[1]->text, "order differs");
  EXPECT_EQ(afterHearing[1], 0);
}

TEST(BootstrapNotice, DecodeRefusesWhatNoRankSends) {
  const auto good = wire::encodeNotice({wire::Notice::Kind::Revoked, 2, tidalInvalidUsage, "x"});
  EXPECT_EQ(wire::decodeNotice(good.data(), good.size(), 3).origin, 2);
  EXPECT_THROW(wire::decodeNotice(good.data(), good.size(), 2), Error);      // origin out of range
  EXPECT_THROW(wire::decodeNotice(good.data(), good.size() - 1, 3), Error);  // text cut short
  auto bad = good;
  bad[0] = 9;  // kind
  EXPECT_THROW(wire::decodeNotice(bad.data(), bad.size(), 3), Error);
  bad = good;
  bad[8] = 200;  // result code
  EXPECT_THROW(wire::decodeNotice(bad.data(), bad.size(), 3), Error);
  const auto none = wire::encodeNotice({wire::Notice::Kind::None, -1, tidalRemoteError, {}});
  EXPECT_EQ(wire::decodeNotice(none.data(), none.size(), 1).origin, -1);
  const auto finding = wire::encodeNotice({wire::Notice::Kind::Finding, -1, tidalRemoteError, {}});
  EXPECT_THROW(wire::decodeNotice(finding.data(), finding.size(), 4), Error);  // needs an origin
  const auto longText = wire::encodeNotice(
      {wire::Notice::Kind::Finding, 0, tidalInvalidUsage, std::string(10000, 'a')});
  EXPECT_EQ(wire::decodeNotice(longText.data(), longText.size(), 1).text.size(),
            wire::kMaxNoticeTextBytes);
}

TEST(Bootstrap, AllGatherLargerThanSocketBuffers) {
  ScopedEnv timeout("TIDAL_TIMEOUT", "30");
  constexpr int n = 3;
  const size_t bytes = (10u << 20) + 333;
  auto outcomes = runRanks(freshJob(), n, allRanks(n), [&](Bootstrap& b) {
    std::vector<uint8_t> mine(bytes), all(bytes * n);
    for (size_t i = 0; i < bytes; ++i) mine[i] = pattern(b.rank(), i);
    b.allGather(mine.data(), all.data(), bytes);
    for (int r = 0; r < n; ++r) {
      size_t wrong = 0;
      for (size_t i = 0; i < bytes; ++i) wrong += all[r * bytes + i] != pattern(r, i);
      EXPECT_EQ(wrong, 0u) << "block " << r << " on rank " << b.rank();
    }
  });
  expectAllOk(outcomes);
}

TEST(Bootstrap, Ipv6Loopback) {
  UniqueId id;
  id.secret = randomSecret();
  try {
    id.root = startRoot(SocketAddress::loopback(AF_INET6, 0), id.secret);
  } catch (const Error& e) {
    GTEST_SKIP() << "no IPv6 loopback here: " << e.what();
  }
  EXPECT_EQ(id.root.family(), AF_INET6);
  expectAllOk(runRanks(id, 3, allRanks(3), [](Bootstrap& b) {
    for (const auto& peer : b.peers()) EXPECT_TRUE(peer.family() == AF_INET6 && peer.isLoopback());
    int mine = b.rank() * 10, all[3];
    b.allGather(&mine, all, sizeof mine);
    EXPECT_EQ(all[0] + all[1] + all[2], 30);
  }));
}

TEST(Bootstrap, RejectsBadArguments) {
  const UniqueId id{SocketAddress::parse("127.0.0.1:1"), randomSecret()};
  for (auto [rank, n] : {std::pair{-1, 2}, {2, 2}, {0, 0}}) {
    try {
      Bootstrap::create(id, rank, n);
      FAIL() << "accepted rank " << rank << " of " << n;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), tidalInvalidArgument);
    }
  }
}

// True when the peer closes `s` within `within` (reading and discarding
// anything it sends first).
bool closedByPeer(Socket& s, std::chrono::milliseconds within) {
  const auto deadline = deadlineIn(within);
  char buf[256];
  try {
    for (;;) s.recvAll(buf, 1, deadline, "stranger");
  } catch (const Error& e) {
    return e.code() == tidalRemoteError;
  }
}

Socket strangerConnect(const SocketAddress& root) {
  return Socket::connectTo(root, deadlineIn(5s), "stranger");
}

void sendRaw(Socket& s, const std::vector<uint8_t>& bytes) {
  s.sendAll(bytes.data(), bytes.size(), deadlineIn(5s), "stranger");
}

std::vector<uint8_t> helloBytes(const Secret& secret, int rank, int nranks, uint32_t length) {
  std::vector<uint8_t> out;
  wire::Writer w(out);
  const auto header = wire::encodeHeader(wire::MsgType::Hello, length);
  w.bytes(header.data(), header.size());
  w.bytes(secret.data(), secret.size());
  w.u32(static_cast<uint32_t>(rank));
  w.u32(static_cast<uint32_t>(nranks));
  w.address(SocketAddress::parse("127.0.0.1:9"));
  return out;
}

constexpr uint32_t kHelloLength = 16 + 4 + 4 + 24;

TEST(BootstrapRoot, StrangersDoNotStopTheJob) {
  ScopedEnv timeout("TIDAL_TIMEOUT", "60");
  LogCapture logs;
  const UniqueId id = freshJob();

  Socket wrongSecret = strangerConnect(id.root);
  sendRaw(wrongSecret, helloBytes(randomSecret(), 0, 3, kHelloLength));
  Socket garbage = strangerConnect(id.root);
  sendRaw(garbage, std::vector<uint8_t>(64, 0x5a));
  Socket oversize = strangerConnect(id.root);
  sendRaw(oversize, helloBytes(id.secret, 0, 3, 0xfffffff0u));
  Socket httpProbe = strangerConnect(id.root);
  const std::string get = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  sendRaw(httpProbe, std::vector<uint8_t>(get.begin(), get.end()));
  Socket silent = strangerConnect(id.root);
  Socket halfHeader = strangerConnect(id.root);
  sendRaw(halfHeader, std::vector<uint8_t>{0x4b, 0x42, 0x44});  // three bytes, then nothing

  // The root reads the strangers' hellos before the ranks join, as it would
  // in a job a scanner found first. Without this wait the ranks could win
  // the race, and a root that has all its ranks closes a hello it never read
  // without a word (the wrong secret's line was missing once under ASan).
  const auto refused = [&] {
    return logs.contains(wrongSecret.localAddress().toString(), "wrong secret") &&
           logs.contains(garbage.localAddress().toString(), "magic") &&
           logs.contains(oversize.localAddress().toString(), "expected 48");
  };
  for (const auto until = Clock::now() + 5s; !refused() && Clock::now() < until;) {
    std::this_thread::sleep_for(10ms);
  }

  const auto start = Clock::now();
  auto outcomes = runRanks(id, 3, allRanks(3), [](Bootstrap& b) {
    int mine = b.rank(), all[3] = {-1, -1, -1};
    b.allGather(&mine, all, sizeof mine);
    EXPECT_EQ(all[0] + all[1] + all[2], 3);
  });
  expectAllOk(outcomes);
  // The silent strangers hold nothing up: far less than their read limit.
  EXPECT_LT(Clock::now() - start, 5s);

  for (Socket* s : {&wrongSecret, &garbage, &oversize, &httpProbe}) {
    EXPECT_TRUE(closedByPeer(*s, 5s));
  }
  EXPECT_TRUE(logs.contains(wrongSecret.localAddress().toString(), "wrong secret")) << logs.all();
  EXPECT_TRUE(logs.contains(garbage.localAddress().toString(), "magic")) << logs.all();
  EXPECT_TRUE(logs.contains(oversize.localAddress().toString(), "expected 48")) << logs.all();
  // The root is done: the silent connections are closed too.
  EXPECT_TRUE(closedByPeer(silent, 5s));
  EXPECT_TRUE(closedByPeer(halfHeader, 5s));
}

TEST(BootstrapRoot, RefusesDuplicateOutOfRangeAndDisagreeingRanks) {
  ScopedEnv timeout("TIDAL_TIMEOUT", "3");
  const UniqueId id = freshJob();
  auto expectReject = [](Socket& s, const std::string& reason) {
    try {
      wire::recvHeader(s, wire::MsgType::AddressTable, 2 * wire::kAddressBytes, deadlineIn(2s),
                       "fake rank");
      ADD_FAILURE() << "no reject for " << reason;
    } catch (const wire::PeerRejected& e) {
      EXPECT_EQ(e.code(), tidalInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
    }
  };
  // Out of range is refused whatever came before.
  Socket outOfRange = strangerConnect(id.root);
  sendRaw(outOfRange, helloBytes(id.secret, 2, 2, kHelloLength));
  expectReject(outOfRange, "out of range");

  // Two connections claim rank 1: the root keeps exactly one.
  Socket first = strangerConnect(id.root);
  sendRaw(first, helloBytes(id.secret, 1, 2, kHelloLength));
  Socket second = strangerConnect(id.root);
  sendRaw(second, helloBytes(id.secret, 1, 2, kHelloLength));
  int rejected = 0;
  for (Socket* s : {&first, &second}) {
    try {
      wire::recvHeader(*s, wire::MsgType::AddressTable, 2 * wire::kAddressBytes, deadlineIn(1000ms),
                       "fake rank");
    } catch (const wire::PeerRejected& e) {
      EXPECT_NE(std::string(e.what()).find("already joined"), std::string::npos) << e.what();
      ++rejected;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), tidalTimeout) << e.what();  // the one the root kept
    }
  }
  EXPECT_EQ(rejected, 1);

  Socket disagrees = strangerConnect(id.root);
  sendRaw(disagrees, helloBytes(id.secret, 0, 5, kHelloLength));
  expectReject(disagrees, "nranks=5");
}

TEST(Bootstrap, WrongSecretRankFailsWithoutHurtingTheJob) {
  ScopedEnv timeout("TIDAL_TIMEOUT", "20");
  const UniqueId id = freshJob();
  UniqueId impostor = id;
  impostor.secret[0] ^= 0xff;
  try {
    Bootstrap::create(impostor, 0, 2);
    FAIL() << "an impostor joined";
  } catch (const Error& e) {
    // The root says why it refused, so the impostor is not told to look for
    // a dead rank 0.
    EXPECT_EQ(e.code(), tidalInvalidUsage) << e.what();
    EXPECT_NE(std::string(e.what()).find("wrong secret"), std::string::npos) << e.what();
  }
  expectAllOk(runRanks(id, 2, allRanks(2), [](Bootstrap& b) { b.barrier(); }));
}

TEST(Bootstrap, WrongProtocolVersionIsToldSo) {
  ScopedEnv timeout("TIDAL_TIMEOUT", "30");
  const UniqueId id = freshJob();
  Socket older = strangerConnect(id.root);
  std::vector<uint8_t> hello = helloBytes(id.secret, 0, 2, kHelloLength);
  hello[4] ^= 0x01;  // the 16-bit version follows the 32-bit magic
  sendRaw(older, hello);
  try {
    wire::recvHeader(older, wire::MsgType::AddressTable, 2 * wire::kAddressBytes, deadlineIn(20s),
                     "older rank");
    ADD_FAILURE() << "no reject for a wrong protocol version";
  } catch (const wire::PeerRejected& e) {
    EXPECT_EQ(e.code(), tidalInvalidUsage);
    EXPECT_NE(std::string(e.what()).find("protocol version"), std::string::npos) << e.what();
  } catch (const Error& e) {
    ADD_FAILURE() << "a wrong protocol version got, instead of a reject: " << e.what();
  }
  // The root refused after reading the header alone, with the rest of the
  // hello unread. Its close must still be orderly (end of stream), not a
  // reset: a reset may discard the reject before the peer reads it.
  try {
    uint8_t byte = 0;
    older.recvAll(&byte, 1, deadlineIn(20s), "older rank");
    ADD_FAILURE() << "the root sent more after its reject";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("connection closed by the peer"), std::string::npos)
        << e.what();
  }
}

// Rank 0's process (which holds the root) is killed while rank 1 waits for
// the others: rank 1 is told the root's process is gone, at once, not to
// look for a wrong secret and not after its whole timeout.
TEST(Bootstrap, RootProcessKilledDuringInitIsNamedAsSuch) {
  ScopedEnv timeout("TIDAL_TIMEOUT", "30");
  int idPipe[2];
  ASSERT_EQ(pipe(idPipe), 0);
  const pid_t rootProcess = fork();
  ASSERT_GE(rootProcess, 0);
  if (rootProcess == 0) {
    close(idPipe[0]);
    const UniqueId id = freshJob();
    const ssize_t n = write(idPipe[1], &id, sizeof id);
    _exit(n == static_cast<ssize_t>(sizeof id) ? (pause(), 0) : 1);
  }
  close(idPipe[1]);
  UniqueId id;
  const ssize_t got = read(idPipe[0], &id, sizeof id);
  close(idPipe[0]);
  if (got != static_cast<ssize_t>(sizeof id)) {
    kill(rootProcess, SIGKILL);
    waitpid(rootProcess, nullptr, 0);
    FAIL() << "the root process did not send its unique id";
  }

  std::optional<Error> error;
  std::thread rank1([&] {
    try {
      Bootstrap::create(id, 1, 3);
    } catch (const Error& e) {
      error = e;
    }
  });
  std::this_thread::sleep_for(300ms);  // rank 1 has said hello and waits for ranks 0 and 2
  const auto killedAt = Clock::now();
  kill(rootProcess, SIGKILL);
  waitpid(rootProcess, nullptr, 0);
  rank1.join();
  ASSERT_TRUE(error) << "rank 1 joined a job whose root was killed";
  EXPECT_EQ(error->code(), tidalRemoteError) << error->what();
  EXPECT_NE(std::string(error->what()).find("exited or was killed"), std::string::npos)
      << error->what();
  EXPECT_EQ(std::string(error->what()).find("wrong secret"), std::string::npos) << error->what();
  EXPECT_LT(Clock::now() - killedAt, 10s);  // told by the close, not by its 30 s timeout
}

TEST(Bootstrap, MissingRankTimesOut) {
  ScopedEnv timeout("TIDAL_TIMEOUT", "2");
  const auto start = Clock::now();
  auto outcomes = runRanks(freshJob(), 3, {0, 1}, [](Bootstrap&) {});
  EXPECT_LT(Clock::now() - start, 8s);
  for (const auto& o : outcomes) {
    ASSERT_TRUE(o.error);
    EXPECT_EQ(o.error->code(), tidalTimeout) << o.error->what();
    EXPECT_NE(std::string(o.error->what()).find("missing rank 2"), std::string::npos)
        << o.error->what();
  }
}

TEST(Bootstrap, AbsentRootTimesOut) {
  ScopedEnv timeout("TIDAL_TIMEOUT", "1");
  UniqueId id;
  id.secret = randomSecret();
  {
    Socket l = Socket::listenOn(SocketAddress::loopback(AF_INET, 0));
    id.root = l.localAddress();
  }
  try {
    Bootstrap::create(id, 0, 2);
    FAIL() << "joined a job without a root";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), tidalTimeout);
    EXPECT_NE(std::string(e.what()).find(id.root.toString()), std::string::npos) << e.what();
  }
}

TEST(Bootstrap, SilentPeerTimesOutNamingIt) {
  ScopedEnv timeout("TIDAL_TIMEOUT", "2");
  const UniqueId id = freshJob();
  std::unique_ptr<Bootstrap> b0, b1;
  std::thread t([&] { b1 = Bootstrap::create(id, 1, 2); });
  b0 = Bootstrap::create(id, 0, 2);
  t.join();
  int mine = 0, all[2];
  const auto start = Clock::now();
  try {
    b0->allGather(&mine, all, sizeof mine);
    FAIL() << "allGather finished without rank 1";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), tidalTimeout);
    const std::string text = e.what();
    EXPECT_NE(text.find("rank 0 timed out after 2 s waiting for rank 1 ("), std::string::npos)
        << text;
    EXPECT_NE(text.find("in allGather"), std::string::npos) << text;
  }
  EXPECT_LT(Clock::now() - start, 5s);
  // The ring is out of step now; it says so instead of mis-reading bytes.
  try {
    b0->barrier();
    FAIL() << "a broken ring ran a barrier";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), tidalInvalidUsage);
  }
}

TEST(Bootstrap, AbortUnblocksAWaiter) {
  ScopedEnv timeout("TIDAL_TIMEOUT", "60");
  const UniqueId id = freshJob();
  std::unique_ptr<Bootstrap> b0, b1;
  std::thread t([&] { b1 = Bootstrap::create(id, 1, 2); });
  b0 = Bootstrap::create(id, 0, 2);
  t.join();
  std::optional<Error> error;
  const auto start = Clock::now();
  std::thread waiter([&] {
    try {
      b0->barrier();
    } catch (const Error& e) {
      error = e;
    }
  });
  std::this_thread::sleep_for(200ms);
  b0->abort();
  waiter.join();
  EXPECT_LT(Clock::now() - start, 5s);
  ASSERT_TRUE(error);
  EXPECT_EQ(error->code(), tidalRemoteError);
  EXPECT_NE(std::string(error->what()).find("aborted"), std::string::npos) << error->what();
  EXPECT_THROW(b0->allGather(nullptr, nullptr, 0), Error);
}

TEST(Bootstrap, MismatchedCallsFailFast) {
  ScopedEnv timeout("TIDAL_TIMEOUT", "30");
  const auto start = Clock::now();
  auto outcomes = runRanks(freshJob(), 2, allRanks(2), [](Bootstrap& b) {
    if (b.rank() == 0) {
      int mine = 0, all[2];
      b.allGather(&mine, all, sizeof mine);
    } else {
      int64_t mine = 0, all[2];
      b.allGather(&mine, all, sizeof mine);  // a different size
    }
  });
  EXPECT_LT(Clock::now() - start, 10s);
  for (const auto& o : outcomes) {
    ASSERT_TRUE(o.error);
    EXPECT_EQ(o.error->code(), tidalRemoteError) << o.error->what();
  }
  outcomes = runRanks(freshJob(), 2, allRanks(2), [](Bootstrap& b) {
    if (b.rank() == 0) {
      b.barrier();
    } else {
      int x = 0;
      b.broadcast(&x, sizeof x, 1);
      // Stay until rank 0 has read it: closing with rank 0's barrier message
      // unread would reset the connection under rank 0's feet.
      std::this_thread::sleep_for(1s);
    }
  });
  ASSERT_TRUE(outcomes[0].error);
  EXPECT_NE(std::string(outcomes[0].error->what()).find("broadcast"), std::string::npos)
      << outcomes[0].error->what();
}

}  // namespace
}  // namespace tidal
