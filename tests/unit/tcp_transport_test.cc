// The TCP transport on real loopback sockets: striping, ordering, refusal of
// strangers on the data port, and a dead peer reported as an error.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cstring>
#include <numeric>
#include <thread>

#include "core/error.h"
#include "core/params.h"
#include "log_capture.h"
#include "net/wire.h"
#include "transport_checks.h"
#include "transports/transport.h"

namespace tidal {
namespace {

using test::drain;
using test::expectAbortEndsAccept;
using test::expectPromptConnection;
using test::LogCapture;

Secret secretOf(uint8_t b) {
  Secret s;
  s.fill(b);
  return s;
}

SocketAddress addressOf(const ConnectHandle& h) {
  SocketAddress addr;
  std::memcpy(&addr.length, h.data(), sizeof addr.length);
  std::memcpy(&addr.storage, h.data() + sizeof addr.length, addr.length);
  return addr;
}

// A tcp hello by hand, in tcp_transport.cc's format: the wire.h header, the
// secret, then version 2, socket index, socket count, from rank, to rank.
std::vector<uint8_t> tcpHello(const Secret& secret, int from, int to) {
  std::vector<uint8_t> body;
  wire::Writer w(body);
  w.bytes(secret.data(), secret.size());
  w.u16(2);  // version
  w.u16(0);  // socket index
  w.u16(1);  // of one socket
  w.u32(static_cast<uint32_t>(from));
  w.u32(static_cast<uint32_t>(to));
  const auto header =
      wire::encodeHeader(wire::MsgType::TcpHello, static_cast<uint32_t>(body.size()));
  body.insert(body.begin(), header.begin(), header.end());
  return body;
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
  LogCapture logs;
  const Deadline d = deadlineIn(std::chrono::milliseconds(10000));
  auto bad = intruder->connectSend(1, h1, d);
  auto good = t0->connectSend(1, h1, d);
  auto recv = t1->acceptRecv(0, d);
  uint32_t x = 0xfeedf00d, y = 0;
  good->post(&x, sizeof x);
  recv->post(&y, sizeof y);
  drain(*good, *recv);
  EXPECT_EQ(y, 0xfeedf00d);
  // The intruder connected from this host: its address is the listener's, another port.
  const std::string listener = addressOf(h1).toString();
  const std::string from = "closed connection from " + listener.substr(0, listener.rfind(':'));
  EXPECT_TRUE(logs.contains(from, "wrong secret")) << logs.all();
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

// A peer whose hello is still arriving when another peer's accept completes
// must not be dropped (it used to be, stranding that peer until its timeout).
TEST(TcpTransport, HalfSentHelloSurvivesAnotherPeersAccept) {
  setenv("TIDAL_NSOCKS", "1", 1);
  params::reload();
  auto t0 = createTransport("tcp", {0, 3, secretOf(9)});
  auto t1 = createTransport("tcp", {1, 3, secretOf(9)});
  const ConnectHandle h1 = t1->listen();
  unsetenv("TIDAL_NSOCKS");
  params::reload();
  const std::vector<uint8_t> hello = tcpHello(secretOf(9), 2, 1);
  const Deadline d = deadlineIn(std::chrono::milliseconds(10000));
  Socket raw = Socket::connectTo(addressOf(h1), d, "test");
  raw.sendAll(hello.data(), 10, d, "first half");
  auto good = t0->connectSend(1, h1, d);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let the half hello be accepted
  auto recv0 = t1->acceptRecv(0, d);
  raw.sendAll(hello.data() + 10, hello.size() - 10, d, "second half");
  auto recv2 = t1->acceptRecv(2, deadlineIn(std::chrono::milliseconds(3000)));
  uint32_t x = 77, y = 0;
  raw.sendAll(&x, sizeof x, d, "payload");
  recv2->post(&y, sizeof y);
  const auto until = Clock::now() + std::chrono::seconds(5);
  while (recv2->completed() < 1 && Clock::now() < until) recv2->progress();
  EXPECT_EQ(y, 77u);
}

// Strangers that connect and say nothing, trickle a few bytes or send
// garbage hold only their own slot: the real peer is served at once, long
// before kHelloReadLimit frees the silent ones.
TEST(TcpTransport, SilentStrangersDoNotStopTheRealPeer) {
  auto t0 = createTransport("tcp", {0, 2, secretOf(6)});
  auto t1 = createTransport("tcp", {1, 2, secretOf(6)});
  const ConnectHandle h1 = t1->listen();
  LogCapture logs;
  const Deadline d = deadlineIn(std::chrono::milliseconds(10000));
  Socket silent = Socket::connectTo(addressOf(h1), d, "silent stranger");
  Socket trickle = Socket::connectTo(addressOf(h1), d, "trickling stranger");
  trickle.sendAll(tcpHello(secretOf(6), 0, 1).data(), 5, d, "trickle");
  Socket garbage = Socket::connectTo(addressOf(h1), d, "garbage");
  const std::vector<uint8_t> junk(64, 0x5a);
  garbage.sendAll(junk.data(), junk.size(), d, "garbage");
  expectPromptConnection(*t0, *t1, 0, 1, h1);
  EXPECT_TRUE(logs.contains(garbage.localAddress().toString(), "magic")) << logs.all();
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

TEST(TcpTransport, AbortEndsAWaitingAccept) {
  auto t1 = createTransport("tcp", {1, 2, secretOf(3)});
  t1->listen();
  expectAbortEndsAccept(*t1, 0);
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
