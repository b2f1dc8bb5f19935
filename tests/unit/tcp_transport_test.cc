// The TCP transport on real loopback sockets: striping, ordering, refusal of
// strangers on the data port, and a dead peer reported as an error.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cstring>
#include <numeric>
#include <thread>

#include "core/error.h"
#include "core/params.h"
#include "transports/transport.h"

namespace tidal {
namespace {

Secret secretOf(uint8_t b) {
  Secret s;
  s.fill(b);
  return s;
}

// Drives both connections until every posted transfer completed.
void drain(Connection& a, Connection& b) {
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (a.completed() < a.posted() || b.completed() < b.posted()) {
    a.progress();
    b.progress();
    ASSERT_LT(Clock::now(), deadline) << "transfers did not complete";
  }
}

struct Pair {
  std::unique_ptr<Transport> t0, t1;
  std::unique_ptr<Connection> send, recv;
  explicit Pair(int nsocks) {
    setenv("TIDAL_NSOCKS", std::to_string(nsocks).c_str(), 1);
    params::reload();
    t0 = createTransport("tcp", {0, 2, secretOf(7)});
    t1 = createTransport("tcp", {1, 2, secretOf(7)});
    const ConnectHandle h1 = t1->listen();
    t0->listen();
    const Deadline d = deadlineIn(std::chrono::milliseconds(10000));
    send = t0->connectSend(1, h1, d);
    recv = t1->acceptRecv(0, d);
    unsetenv("TIDAL_NSOCKS");
    params::reload();
  }
};

class TcpStriping : public ::testing::TestWithParam<int> {};

TEST_P(TcpStriping, TransfersArriveIntactAndInOrder) {
  Pair p(GetParam());
  const size_t sizes[] = {0, 1, 4095, 65536, 65537, 3 << 20, 17};
  std::vector<std::vector<uint8_t>> out, in;
  for (size_t i = 0; i < std::size(sizes); ++i) {
    out.emplace_back(sizes[i]);
    std::iota(out.back().begin(), out.back().end(), static_cast<uint8_t>(i * 31));
    in.emplace_back(sizes[i], 0);
  }
  for (size_t i = 0; i < out.size(); ++i) {
    p.send->post(out[i].data(), out[i].size());
    p.recv->post(in[i].data(), in[i].size());
  }
  drain(*p.send, *p.recv);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], in[i]) << "transfer " << i;
}

INSTANTIATE_TEST_SUITE_P(Sockets, TcpStriping, ::testing::Values(1, 2, 4));

TEST(TcpTransport, StrangerWithWrongSecretIsRefusedAndRealPeerAccepted) {
  auto t0 = createTransport("tcp", {0, 2, secretOf(1)});
  auto t1 = createTransport("tcp", {1, 2, secretOf(1)});
  auto intruder = createTransport("tcp", {0, 2, secretOf(2)});  // right ranks, wrong secret
  const ConnectHandle h1 = t1->listen();
  const Deadline d = deadlineIn(std::chrono::milliseconds(10000));
  auto bad = intruder->connectSend(1, h1, d);
  auto good = t0->connectSend(1, h1, d);
  auto recv = t1->acceptRecv(0, d);
  uint32_t x = 0xfeedf00d, y = 0;
  good->post(&x, sizeof x);
  recv->post(&y, sizeof y);
  drain(*good, *recv);
  EXPECT_EQ(y, 0xfeedf00d);
  // The intruder's sockets were closed: a send eventually fails.
  uint32_t z = 1;
  EXPECT_THROW(
      {
        for (int i = 0; i < 200; ++i) {
          bad->post(&z, sizeof z);
          bad->progress();
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
      },
      Error);
}

TEST(TcpTransport, DeadPeerIsARemoteError) {
  Pair p(2);
  std::vector<char> buf(1 << 20);
  p.recv->post(buf.data(), buf.size());
  p.send.reset();  // the sender goes away
  try {
    for (int i = 0; i < 1000; ++i) {
      p.recv->progress();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    FAIL() << "no error after the peer closed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), tidalRemoteError);
    EXPECT_NE(std::string(e.what()).find("rank 0"), std::string::npos) << e.what();
  }
}

TEST(TcpTransport, AcceptTimesOutNamingThePeer) {
  auto t1 = createTransport("tcp", {1, 2, secretOf(3)});
  t1->listen();
  try {
    t1->acceptRecv(0, deadlineIn(std::chrono::milliseconds(300)));
    FAIL() << "accept returned without a peer";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), tidalTimeout);
    EXPECT_NE(std::string(e.what()).find("rank 0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tidal
