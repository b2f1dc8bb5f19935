// Small RAII pieces the shm transport is built from: an owned file
// descriptor, an owned shared mapping, and sending / receiving a message with
// file descriptors attached (SCM_RIGHTS) over a unix-domain socket.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tidal::shm {

// Owns a file descriptor (memfd, eventfd or socket) and closes it once.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset();

 private:
  int fd_ = -1;
};

// Owns a MAP_SHARED mapping of a whole file.
class Mapping {
 public:
  Mapping() = default;
  // Maps `bytes` of `fd` read-write. `prefault` reads every page once now, so
  // the data path never pays a first access: MAP_POPULATE alone fills the
  // kernel's page tables, but under a hypervisor with shadow or nested paging
  // (the development VM) the first access of each page through a new mapping
  // still cost about 15 us: a receiver's first pass over a 2 MiB ring took
  // 235 us per 64 KiB instead of 1.6 us. Reading each page costs that once,
  // at connection set-up.
  Mapping(int fd, size_t bytes, bool prefault, const std::string& what);
  Mapping(Mapping&& other) noexcept;
  Mapping& operator=(Mapping&& other) noexcept;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping();

  char* data() const { return data_; }
  size_t size() const { return bytes_; }

 private:
  char* data_ = nullptr;
  size_t bytes_ = 0;
};

// A new eventfd, non-blocking, counter at zero.
UniqueFd makeEventFd(const std::string& what);
// Adds 1 to an eventfd's counter (wakes a poll() for POLLIN on it).
void signalEventFd(int fd);
// Reads an eventfd's counter back to zero; does nothing when it is already 0.
void drainEventFd(int fd);

// Sends `bytes` of `data` with `fds` attached in one sendmsg. Returns false
// when the socket's buffer is full (EAGAIN): try again later. On a stream
// socket a send of fewer bytes is not resumed, so keep `bytes` tiny (shm
// sends one): that is an InternalError. Throws SystemError / RemoteError
// naming `what` otherwise.
bool sendWithFds(int socket, const void* data, size_t bytes, const std::vector<int>& fds,
                 const std::string& what);

// The result of one non-blocking receive of a message with descriptors.
struct Received {
  enum class Status { Message, WouldBlock, Closed } status = Status::WouldBlock;
  size_t bytes = 0;           // message length (may exceed the buffer: truncated)
  bool truncated = false;     // message or descriptors did not fit
  std::vector<UniqueFd> fds;  // owned: closed if the caller drops them
};
Received receiveWithFds(int socket, void* data, size_t bytes, size_t maxFds);

}  // namespace tidal::shm
