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

// The nccl-tests release whose output layout ours follows; scripts match the
// "# nccl-tests version" line, so it names that release and then Tidal's.
inline constexpr const char* kNcclTestsVersion = "2.20.0";

// One "#  Rank  0 Group  0 Pid ... device  0 [0000:00:00] NAME" line. Host
// memory has no PCI address, so the bracket holds zeros in nccl-tests' shape.
std::string deviceLine(int rank, int pid, const char* hostname, const char* deviceName);

// `value` right-aligned in `width` columns with two decimals, fewer when they
// do not fit, exponent notation as the last resort (nccl-tests' rule).
std::string formatFit(double value, int width);

// Formats a time in microseconds in 7 columns with as many decimals as fit.
std::string formatTime(double microseconds);

// "# nccl-tests version ... nccl-headers=N nccl-library=N" and
// "# Collective test starting: PROGRAM", the first two lines nccl-tests prints.
std::string versionLine();
std::string startingLine(const char* program);

class Reporter {
 public:
  explicit Reporter(bool enabled) : enabled_(enabled) {}

  // Prints a line followed by a newline (header lines, device lines, notes).
  void line(const std::string& text) const;

  // "#" then the three-line column header; timeLabel is "time" or "cputime";
  // timestamps adds the -S column.
  void columnHeader(const char* timeLabel, bool timestamps = false) const;

  // Starts a row: size in bytes, element count, type, op ("none" when the
  // collective has none) and root (-1 when it has none).
  void rowStart(size_t bytes, size_t count, const char* type, const char* op, int root) const;

  // One out-of-place or in-place group; wrong == nullopt prints "N/A" (no check).
  void rowResult(double microseconds, double algBw, double busBw,
                 std::optional<int64_t> wrong) const;

  // A group that was not run (a collective with no in-place form): N/A throughout.
  void rowNotRun() const;

  // Ends a row; with -S, after the row's local time in nccl-tests' format.
  void rowEnd(bool timestamp = false) const;

  // "# Out of bounds values : N OK|FAILED", "# Avg bus bandwidth    : X", "#";
  // with a program name also "# Collective test concluded: NAME", "#" and the
  // empty line nccl-tests ends with when no error is left to report.
  void footer(int64_t failedTests, double avgBusBw, const char* program = nullptr) const;

 private:
  bool enabled_;
};

}  // namespace tidal::perf
