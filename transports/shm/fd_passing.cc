#include "transports/shm/fd_passing.h"

#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace tidal::shm {

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = other.release();
  }
  return *this;
}

void UniqueFd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Mapping::Mapping(int fd, size_t bytes, bool prefault, const std::string& what) {
  const int flags = MAP_SHARED | (prefault ? MAP_POPULATE : 0);
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, flags, fd, 0);
  if (p == MAP_FAILED) {
    fail(tidalSystemError, "mmap of {} ({} bytes) failed: {}", what, bytes, errnoText(errno));
  }
  data_ = static_cast<char*>(p);
  bytes_ = bytes;
  if (prefault) {
    const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    const volatile char* bytesRead = data_;
    for (size_t offset = 0; offset < bytes; offset += page) (void)bytesRead[offset];
  }
}

Mapping::Mapping(Mapping&& other) noexcept : data_(other.data_), bytes_(other.bytes_) {
  other.data_ = nullptr;
  other.bytes_ = 0;
}

Mapping& Mapping::operator=(Mapping&& other) noexcept {
  if (this != &other) {
    if (data_) ::munmap(data_, bytes_);
    data_ = other.data_;
    bytes_ = other.bytes_;
    other.data_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

Mapping::~Mapping() {
  if (data_) ::munmap(data_, bytes_);
}

UniqueFd makeEventFd(const std::string& what) {
  const int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) fail(tidalSystemError, "eventfd for {} failed: {}", what, errnoText(errno));
  return UniqueFd(fd);
}

void signalEventFd(int fd) {
  const uint64_t one = 1;
  // EAGAIN means the counter is saturated, which still wakes the reader.
  while (::write(fd, &one, sizeof one) < 0 && errno == EINTR) {
  }
}

void drainEventFd(int fd) {
  uint64_t value;
  while (::read(fd, &value, sizeof value) < 0 && errno == EINTR) {
  }
}

bool sendWithFds(int socket, const void* data, size_t bytes, const std::vector<int>& fds,
                 const std::string& what) {
  iovec iov{const_cast<void*>(data), bytes};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()));
  if (!fds.empty()) {
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  for (;;) {
    const ssize_t n = ::sendmsg(socket, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0 && static_cast<size_t>(n) == bytes) return true;
    if (n >= 0) fail(tidalInternalError, "{}: sendmsg sent {} of {} bytes", what, n, bytes);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
    if (errno == EPIPE || errno == ECONNRESET) {
      fail(tidalRemoteError, "{}: the peer closed the connection ({})", what, errnoText(errno));
    }
    fail(tidalSystemError, "{}: sendmsg failed: {}", what, errnoText(errno));
  }
}

Received receiveWithFds(int socket, void* data, size_t bytes, size_t maxFds) {
  Received r;
  iovec iov{data, bytes};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  std::vector<char> control(CMSG_SPACE(sizeof(int) * maxFds));
  msg.msg_control = control.data();
  msg.msg_controllen = control.size();
  ssize_t n;
  do {
    n = ::recvmsg(socket, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) return r;
    r.status = Received::Status::Closed;  // ECONNRESET and friends: gone either way
    return r;
  }
  // Take ownership of every descriptor first, so that none leaks whatever we
  // decide about the message.
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      r.fds.emplace_back(fd);
    }
  }
  if (n == 0 && r.fds.empty()) {
    r.status = Received::Status::Closed;
    return r;
  }
  r.status = Received::Status::Message;
  r.bytes = static_cast<size_t>(n);
  r.truncated = (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0;
  return r;
}

}  // namespace tidal::shm
