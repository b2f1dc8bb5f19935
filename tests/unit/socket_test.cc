// Sockets on loopback: interface filters, address parsing, deadlines, abort.
#include "core/socket.h"

#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <net/if.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/params.h"
#include "scoped_env.h"

namespace tidal {
namespace {

using test::ScopedEnv;

tidalResult_t codeOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  return tidalSuccess;
}

TEST(InterfaceMatches, EmptySpecMatchesEverything) {
  EXPECT_TRUE(interfaceMatches("", "eth0"));
  EXPECT_TRUE(interfaceMatches("", "lo"));
}

TEST(InterfaceMatches, PrefixList) {
  EXPECT_TRUE(interfaceMatches("eth", "eth0"));
  EXPECT_TRUE(interfaceMatches("eth,ib", "ib1"));
  EXPECT_TRUE(interfaceMatches(" eth , ib ", "ib1"));
  EXPECT_FALSE(interfaceMatches("eth,ib", "lo"));
  EXPECT_FALSE(interfaceMatches("eth0", "eth"));
}

TEST(InterfaceMatches, ExcludeList) {
  EXPECT_FALSE(interfaceMatches("^docker", "docker0"));
  EXPECT_TRUE(interfaceMatches("^docker", "eth0"));
  EXPECT_FALSE(interfaceMatches("^docker,lo", "lo"));
  EXPECT_TRUE(interfaceMatches("^docker,lo", "ib0"));
}

TEST(InterfaceMatches, ExactNames) {
  EXPECT_TRUE(interfaceMatches("=eth0", "eth0"));
  EXPECT_FALSE(interfaceMatches("=eth0", "eth01"));
  EXPECT_TRUE(interfaceMatches("=eth0,ib0", "ib0"));
  EXPECT_FALSE(interfaceMatches("^=eth0", "eth0"));
  EXPECT_TRUE(interfaceMatches("^=eth0", "eth01"));
}

TEST(SocketAddress, ParsesIpv4AndIpv6) {
  const auto a = SocketAddress::parse("127.0.0.1:4312");
  EXPECT_EQ(a.family(), AF_INET);
  EXPECT_EQ(a.port(), 4312);
  EXPECT_EQ(a.toString(), "127.0.0.1:4312");
  EXPECT_TRUE(a.isLoopback());
  const auto b = SocketAddress::parse("[::1]:5");
  EXPECT_EQ(b.family(), AF_INET6);
  EXPECT_EQ(b.toString(), "[::1]:5");
  EXPECT_TRUE(b.isLoopback());
  EXPECT_TRUE(SocketAddress::parse("0.0.0.0:1").isWildcard());
  EXPECT_FALSE(a.isWildcard());
  EXPECT_TRUE(SocketAddress::parse("localhost:7").isLoopback());
}

TEST(SocketAddress, RejectsMalformed) {
  for (const char* bad : {"nohost", "1.2.3.4:", "1.2.3.4:99999", "1.2.3.4:x1", "::1:5", "[::1]5",
                          ":80", "no-such-host.invalid:80"}) {
    EXPECT_EQ(codeOf([&] { SocketAddress::parse(bad); }), tidalInvalidArgument) << bad;
  }
}

TEST(Timeout, DecimalOnlyAndBoundedSoDeadlinesCannotOverflow) {
  {
    // A leading zero is decimal, not octal (strtoll base 0 read it as 8).
    ScopedEnv t("TIDAL_TIMEOUT", "010");
    EXPECT_EQ(timeoutSeconds(), 10);
  }
  {
    ScopedEnv t("TIDAL_TIMEOUT", "0x10");
    EXPECT_EQ(timeoutSeconds(), 16);
  }
  {
    ScopedEnv t("TIDAL_TIMEOUT", "1000000000");
    EXPECT_EQ(timeoutSeconds(), 1000000000);
    EXPECT_GT(deadlineFromNow(), Clock::now() + std::chrono::hours(24 * 365));
  }
  for (const char* bad : {"9999999999", "1000000001", "0", "-5", "0x", "12s", "08x"}) {
    ScopedEnv t("TIDAL_TIMEOUT", bad);
    std::string what;
    try {
      timeoutSeconds();
    } catch (const Error& e) {
      what = e.what();
      EXPECT_EQ(e.code(), tidalInvalidArgument) << bad;
    }
    EXPECT_NE(what.find("TIDAL_TIMEOUT"), std::string::npos) << bad << ": " << what;
  }
}

TEST(SocketAddress, FamilyParameterRestrictsResolution) {
  ScopedEnv family("TIDAL_SOCKET_FAMILY", "AF_INET6");
  EXPECT_EQ(SocketAddress::parse("[::1]:7").family(), AF_INET6);
  EXPECT_EQ(codeOf([] { SocketAddress::parse("127.0.0.1:7"); }), tidalInvalidArgument);
  ScopedEnv bad("TIDAL_SOCKET_FAMILY", "AF_UNIX");
  EXPECT_EQ(codeOf([] { SocketAddress::parse("localhost:7"); }), tidalInvalidArgument);
}

TEST(LocalInterface, DefaultSkipsLoopbackWhenAnotherIsUp) {
  ScopedEnv ifname("TIDAL_SOCKET_IFNAME", nullptr);
  ScopedEnv family("TIDAL_SOCKET_FAMILY", nullptr);
  ifaddrs* list = nullptr;
  ASSERT_EQ(getifaddrs(&list), 0);
  bool otherUp = false;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP) &&
        !(i->ifa_flags & IFF_LOOPBACK) && std::strncmp(i->ifa_name, "docker", 6) != 0) {
      otherUp = true;
    }
  }
  freeifaddrs(list);
  const std::string name = localInterfaceName();
  EXPECT_NE(name.rfind("docker", 0), 0u);
  if (otherUp) {
    EXPECT_NE(name, "lo");
    EXPECT_FALSE(localInterfaceAddress().isLoopback());
  } else {
    EXPECT_EQ(name, "lo");
  }
  EXPECT_EQ(localInterfaceAddress().port(), 0);
  EXPECT_TRUE(isAddressOfThisHost(localInterfaceAddress()));
}

TEST(LocalInterface, IfnameSelectsAndRejects) {
  ScopedEnv family("TIDAL_SOCKET_FAMILY", "AF_INET");
  {
    ScopedEnv ifname("TIDAL_SOCKET_IFNAME", "=lo");
    EXPECT_EQ(localInterfaceName(), "lo");
    EXPECT_EQ(localInterfaceAddress().toString(), "127.0.0.1:0");
  }
  {
    ScopedEnv ifname("TIDAL_SOCKET_IFNAME", "=no_such_if0");
    try {
      localInterfaceAddress();
      FAIL() << "expected an error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), tidalInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("no_such_if0"), std::string::npos) << e.what();
    }
  }
  {
    ScopedEnv ifname("TIDAL_SOCKET_IFNAME", "^lo");
    try {
      EXPECT_NE(localInterfaceName(), "lo");
    } catch (const Error& e) {  // a host with nothing but loopback
      EXPECT_EQ(e.code(), tidalInvalidArgument);
    }
  }
}

TEST(LocalInterface, AddressesOfThisHost) {
  EXPECT_TRUE(isAddressOfThisHost(SocketAddress::parse("127.0.0.1:1")));
  EXPECT_FALSE(isAddressOfThisHost(SocketAddress::parse("203.0.113.77:1")));
}

struct Pair {
  Socket listener, client, server;
};

Pair connectedPair() {
  Pair p;
  p.listener = Socket::listenOn(SocketAddress::loopback(AF_INET, 0));
  p.client = Socket::connectTo(p.listener.localAddress(), deadlineIn(std::chrono::seconds(5)),
                               "test client");
  p.server = p.listener.accept(deadlineIn(std::chrono::seconds(5)), "test server");
  return p;
}

TEST(Socket, ExactLengthBothWaysLargerThanBuffers) {
  auto p = connectedPair();
  std::vector<uint8_t> a(8 << 20), b(8 << 20), ra(a.size()), rb(b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<uint8_t>(i * 7);
    b[i] = static_cast<uint8_t>(i * 13 + 1);
  }
  const auto dl = deadlineIn(std::chrono::seconds(20));
  std::thread t([&] {
    p.server.recvAll(ra.data(), ra.size(), dl, "server recv");
    p.server.sendAll(b.data(), b.size(), dl, "server send");
  });
  p.client.sendAll(a.data(), a.size(), dl, "client send");
  p.client.recvAll(rb.data(), rb.size(), dl, "client recv");
  t.join();
  EXPECT_EQ(ra, a);
  EXPECT_EQ(rb, b);
}

TEST(Socket, RecvTimesOutAtDeadline) {
  auto p = connectedPair();
  char c;
  const auto start = Clock::now();
  try {
    p.client.recvAll(&c, 1, deadlineIn(std::chrono::milliseconds(200)), "quiet peer");
    FAIL() << "expected a timeout";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), tidalTimeout);
    EXPECT_NE(std::string(e.what()).find("quiet peer"), std::string::npos);
  }
  const auto took = Clock::now() - start;
  EXPECT_GE(took, std::chrono::milliseconds(190));
  EXPECT_LT(took, std::chrono::seconds(3));
}

TEST(Socket, PeerCloseIsRemoteError) {
  auto p = connectedPair();
  p.server.close();
  char c;
  EXPECT_EQ(codeOf([&] { p.client.recvAll(&c, 1, deadlineIn(std::chrono::seconds(5)), "x"); }),
            tidalRemoteError);
}

TEST(Socket, ShutdownWakesAWaiter) {
  auto p = connectedPair();
  tidalResult_t code = tidalSuccess;
  const auto start = Clock::now();
  std::thread t([&] {
    char c;
    code = codeOf([&] { p.client.recvAll(&c, 1, deadlineIn(std::chrono::seconds(30)), "w"); });
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  p.client.shutdownBoth();
  t.join();
  EXPECT_EQ(code, tidalRemoteError);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
}

TEST(Socket, ConnectToNothingTimesOut) {
  SocketAddress addr;
  {
    Socket l = Socket::listenOn(SocketAddress::loopback(AF_INET, 0));
    addr = l.localAddress();
  }  // closed: connections are refused from now on
  const auto start = Clock::now();
  try {
    Socket::connectTo(addr, deadlineIn(std::chrono::milliseconds(300)), "absent root");
    FAIL() << "expected a timeout";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), tidalTimeout);
    EXPECT_NE(std::string(e.what()).find(addr.toString()), std::string::npos) << e.what();
  }
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(3));
}

TEST(Socket, ConnectRetriesUntilTheListenerAppears) {
  SocketAddress addr;
  {
    Socket l = Socket::listenOn(SocketAddress::loopback(AF_INET, 0));
    addr = l.localAddress();
  }
  Socket late;
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    late = Socket::listenOn(addr);
  });
  Socket c = Socket::connectTo(addr, deadlineIn(std::chrono::seconds(5)), "late listener");
  t.join();
  EXPECT_TRUE(c.valid());
}

TEST(Deadlines, TimeoutParameter) {
  ScopedEnv timeout("TIDAL_TIMEOUT", "7");
  EXPECT_EQ(timeoutSeconds(), 7);
  const auto before = Clock::now();
  const Deadline deadline = deadlineFromNow();
  EXPECT_GE(deadline - before, std::chrono::seconds(7));
  EXPECT_LT(deadline - before, std::chrono::seconds(8));
  ScopedEnv bad("TIDAL_TIMEOUT", "0");
  EXPECT_EQ(codeOf([] { deadlineFromNow(); }), tidalInvalidArgument);
}

}  // namespace
}  // namespace tidal
