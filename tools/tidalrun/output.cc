#include "tidalrun/output.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>

namespace tidalrun {

bool writeAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n >= 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, -1);
      continue;
    }
    return false;  // EPIPE (SIGPIPE is blocked in tidalrun) or a real error
  }
  return true;
}

void LineForwarder::feed(std::string_view data) {
  pending_.append(data);
  const auto lastNewline = pending_.rfind('\n');
  std::string out;
  if (lastNewline != std::string::npos) {
    // All complete lines go out in one write: fewer syscalls, and a reader
    // sees them together.
    size_t begin = 0;
    while (begin <= lastNewline) {
      const size_t end = pending_.find('\n', begin);
      if (!midLine_) out += prefix_;
      midLine_ = false;
      out.append(pending_, begin, end - begin + 1);
      begin = end + 1;
    }
    pending_.erase(0, lastNewline + 1);
  }
  if (pending_.size() >= kMaxLine) {
    if (!midLine_) out += prefix_;
    out += pending_;
    pending_.clear();
    midLine_ = true;
  }
  if (!out.empty()) emit(out);
}

void LineForwarder::finish() {
  if (pending_.empty() && !midLine_) return;
  std::string out;
  if (!midLine_) out += prefix_;
  out += pending_;
  out += '\n';
  pending_.clear();
  midLine_ = false;
  emit(out);
}

void LineForwarder::emit(const std::string& text) {
  if (broken_) return;
  if (!writeAll(fd_, text)) broken_ = true;
}

}  // namespace tidalrun
