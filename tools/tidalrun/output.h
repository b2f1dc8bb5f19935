// Forwarding a rank's stdout/stderr to tidalrun's own, one whole line at a time.
//
// Every rank writes into its own pipe; tidalrun reads them all and writes each
// complete line with a single write(), so lines of different ranks never mix
// inside a line, whatever the ranks' buffering. A line longer than kMaxLine is
// passed on in pieces (bounding memory beats keeping a runaway line whole).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tidalrun {

// Writes all of data to fd, waiting out EINTR and EAGAIN (fd may be
// non-blocking). Returns false when the reader has gone (EPIPE) or fd fails.
bool writeAll(int fd, std::string_view data);

class LineForwarder {
 public:
  static constexpr size_t kMaxLine = 64 * 1024;

  // prefix: put before every line ("[3] " for --tag-output, or empty).
  LineForwarder(int outFd, std::string prefix) : fd_(outFd), prefix_(std::move(prefix)) {}

  // Consumes what was read from the rank; writes the lines it completes.
  void feed(std::string_view data);
  // The rank closed the stream: write a trailing partial line, ended by '\n'
  // so the next rank's line starts on a line of its own.
  void finish();
  // The reader of the output went away (tidalrun | head); see Job::readStream.
  bool broken() const { return broken_; }

 private:
  void emit(const std::string& text);

  int fd_;
  std::string prefix_;
  std::string pending_;   // bytes after the last '\n' seen
  bool midLine_ = false;  // part of the current line was already written
  bool broken_ = false;   // the reader of fd_ has gone; drop output
};

}  // namespace tidalrun
