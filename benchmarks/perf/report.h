// The result table, laid out column for column like nccl-tests so that tools
// which parse nccl-tests output (and compare/compare.sh) read ours too.
//
// Only rank 0 constructs a printing Reporter; the others get a silent one, so
// the benchmark code calls it unconditionally.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace tidal::perf {

// One "#  Rank  0 Group  0 Pid ..." line.
std::string deviceLine(int rank, int pid, const char* hostname, const char* deviceName);

// Formats a time in microseconds in 7 columns with as many decimals as fit.
std::string formatTime(double microseconds);

class Reporter {
 public:
  explicit Reporter(bool enabled) : enabled_(enabled) {}

  // Prints a line followed by a newline (header lines, device lines, notes).
  void line(const std::string& text) const;

  // The three-line column header; timeLabel is "time" or "cputime".
  void columnHeader(const char* timeLabel) const;

  // Starts a row: size in bytes, element count, type, op ("none" when the
  // collective has none) and root (-1 when it has none).
  void rowStart(size_t bytes, size_t count, const char* type, const char* op, int root) const;

  // One out-of-place or in-place group; wrong == nullopt prints "N/A" (no check).
  void rowResult(double microseconds, double algBw, double busBw,
                 std::optional<int64_t> wrong) const;

  // A group that was not run (a collective with no in-place form): N/A throughout.
  void rowNotRun() const;

  void rowEnd() const;

  // "# Out of bounds values : N OK|FAILED", "# Avg bus bandwidth    : X", "#".
  void footer(int64_t failedTests, double avgBusBw) const;

 private:
  bool enabled_;
};

}  // namespace tidal::perf
