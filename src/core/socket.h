// Thin RAII layer over BSD sockets shared by the bootstrap and the TCP
// transport: addresses, interface selection, listen/connect/accept with
// deadlines, and exact-length I/O that gives up at a deadline or on abort.
//
// I/O never blocks in the kernel: every send/recv uses MSG_DONTWAIT and waits
// in poll() with the time left to the deadline, so a silent peer costs at most
// the deadline, and shutdownBoth() from another thread wakes the waiter.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tidal {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// Deadline TIDAL_TIMEOUT seconds from now.
Deadline deadlineFromNow();
Deadline deadlineIn(std::chrono::milliseconds ms);
// TIDAL_TIMEOUT in seconds (validated: a positive integer), for messages.
int64_t timeoutSeconds();
// Milliseconds left to `deadline` for poll(): 0 once passed, rounded up.
int pollTimeoutMs(Deadline deadline);

// An IPv4 or IPv6 socket address, trivially copyable so it can travel in the
// unique id and in bootstrap messages.
struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;

  std::string toString() const;  // "1.2.3.4:5" or "[::1]:5"
  int family() const { return storage.ss_family; }
  uint16_t port() const;
  void setPort(uint16_t port);
  bool isLoopback() const;  // 127.0.0.0/8 or ::1 (also ::ffff:127.x)
  bool isWildcard() const;  // 0.0.0.0 or ::
  // Same family, address and port (and IPv6 scope).
  bool operator==(const SocketAddress& other) const;
  // Parses "host:port", "[v6]:port"; host may be a name. Throws InvalidArgument.
  // With TIDAL_SOCKET_FAMILY set, names resolve in that family only.
  static SocketAddress parse(const std::string& hostPort);
  // The any-address of `family` (AF_INET/AF_INET6) with `port`.
  static SocketAddress wildcard(int family, uint16_t port);
  // The loopback address of `family` with `port`.
  static SocketAddress loopback(int family, uint16_t port);
};

// The address peers should use to reach this host, chosen by
// TIDAL_SOCKET_IFNAME / TIDAL_SOCKET_FAMILY (see docs/env.md). Port 0.
SocketAddress localInterfaceAddress();
// Name of the interface localInterfaceAddress() picked, for logs.
std::string localInterfaceName();
// True if `name` passes the TIDAL_SOCKET_IFNAME-style filter `spec`
// ("eth,ib" prefixes; "^docker" excludes; "=eth0" exact; "^=eth0" excludes
// exactly eth0). An empty spec matches every name. Exposed for tests.
bool interfaceMatches(const std::string& spec, const std::string& name);
// True if `addr`'s IP (port ignored) is loopback or assigned to an interface
// of this host that is up.
bool isAddressOfThisHost(const SocketAddress& addr);

// Owns a file descriptor.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& other) noexcept : fd_(other.release()) {}
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() { close(); }

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();
  void close();
  // shutdown(SHUT_RDWR): wakes any thread blocked in poll on it.
  void shutdownBoth();
  // shutdown(SHUT_WR): the peer reads what was sent, then end of stream.
  void shutdownWrite();
  // Reads and drops whatever has arrived, without waiting; returns the bytes
  // dropped. Used before closing a refused connection (see wire::sendReject).
  size_t discardReadable();

  void setNonBlocking();
  void setNoDelay();

  // Listens on `addr` (port 0 = any free port); backlog large enough for a job.
  static Socket listenOn(const SocketAddress& addr);
  SocketAddress localAddress() const;
  SocketAddress peerAddress() const;

  // Connects with retries until `deadline` (the peer may not listen yet).
  // Throws Timeout / SystemError naming `what` (e.g. "bootstrap root 1.2.3.4:5").
  static Socket connectTo(const SocketAddress& addr, Deadline deadline, const std::string& what);
  // Waits for one connection until `deadline`. The result is blocking-mode.
  Socket accept(Deadline deadline, const std::string& what);
  // One accept that does not wait: an invalid Socket when none is pending.
  // `peer` receives the remote address.
  Socket tryAccept(SocketAddress* peer);

  // Exact-length I/O that waits in poll() up to `deadline`; throws Timeout,
  // RemoteError (peer closed) or SystemError, naming `what`.
  void sendAll(const void* data, size_t bytes, Deadline deadline, const std::string& what);
  void recvAll(void* data, size_t bytes, Deadline deadline, const std::string& what);

  // Non-waiting partial I/O for callers that multiplex several sockets in one
  // poll(): returns the bytes moved, 0 when the socket would block. Throws
  // RemoteError when the peer closed or reset the connection (recvSome with
  // bytes > 0 reading end-of-stream), SystemError otherwise.
  size_t sendSome(const void* data, size_t bytes, const std::string& what);
  size_t recvSome(void* data, size_t bytes, const std::string& what);

 private:
  int fd_ = -1;
};

}  // namespace tidal
