// An eventfd owned by one object: a wakeup another thread (or this one)
// can post, to end a poll() early.
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "core/error.h"

namespace tidal::ib {

class EventFd {
 public:
  EventFd() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    if (fd_ < 0) fail(tidalSystemError, "eventfd failed: {}", errnoText(errno));
  }
  ~EventFd() { ::close(fd_); }
  EventFd(const EventFd&) = delete;
  EventFd& operator=(const EventFd&) = delete;

  int fd() const { return fd_; }
  void signal() const {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(fd_, &one, sizeof one);
  }
  void drain() const {
    uint64_t value;
    [[maybe_unused]] const ssize_t n = ::read(fd_, &value, sizeof value);
  }

 private:
  int fd_;
};

}  // namespace tidal::ib
