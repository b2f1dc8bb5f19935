#include "report.h"

#include <cstdio>

#include <fmt/format.h>

namespace tidal::perf {

std::string deviceLine(int rank, int pid, const char* hostname, const char* deviceName) {
  return fmt::format("#  Rank {:2d} Group {:2d} Pid {:6d} on {:>10} device {:2d} [0x{:02x}] {}",
                     rank, 0, pid, hostname, 0, 0, deviceName);
}

std::string formatTime(double us) {
  // Fixed width 7 whatever the magnitude: fewer decimals as the value grows.
  if (us >= 10000.0) return fmt::format("{:7.0f}", us);
  if (us >= 100.0) return fmt::format("{:7.1f}", us);
  return fmt::format("{:7.2f}", us);
}

void Reporter::line(const std::string& text) const {
  if (!enabled_) return;
  std::fputs(text.c_str(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

void Reporter::columnHeader(const char* timeLabel) const {
  if (!enabled_) return;
  fmt::print(
      "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}           out-of-place                       "
      "in-place          \n",
      "", "", "", "", "");
  fmt::print(
      "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6} {:>6}  {:>7}  {:>6}  {:>6} "
      "{:>6}\n",
      "size", "count", "type", "redop", "root", timeLabel, "algbw", "busbw", "#wrong", timeLabel,
      "algbw", "busbw", "#wrong");
  fmt::print(
      "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>5}  {:>7}  {:>6}  {:>6}  "
      "{:>5}\n",
      "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
      "");
  std::fflush(stdout);
}

void Reporter::rowStart(size_t bytes, size_t count, const char* type, const char* op,
                        int root) const {
  if (!enabled_) return;
  fmt::print("{:12d}  {:12d}  {:>8}  {:>6}  {:6d}", bytes, count, type, op, root);
  std::fflush(stdout);
}

void Reporter::rowResult(double us, double algBw, double busBw,
                         std::optional<int64_t> wrong) const {
  if (!enabled_) return;
  const std::string wrongText = wrong ? fmt::format("{:5d}", *wrong) : std::string("  N/A");
  fmt::print("  {}  {:6.2f}  {:6.2f}  {}", formatTime(us), algBw, busBw, wrongText);
  std::fflush(stdout);
}

void Reporter::rowNotRun() const {
  if (!enabled_) return;
  fmt::print("  {:>8}  {:>6}  {:>6}  {:>5}", "N/A", "N/A", "N/A", "N/A");
  std::fflush(stdout);
}

void Reporter::rowEnd() const {
  if (!enabled_) return;
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

void Reporter::footer(int64_t failedTests, double avgBusBw) const {
  if (!enabled_) return;
  fmt::print("# Out of bounds values : {} {}\n", failedTests, failedTests ? "FAILED" : "OK");
  fmt::print("# Avg bus bandwidth    : {:g} \n", avgBusBw);
  fmt::print("#\n");
  std::fflush(stdout);
}

}  // namespace tidal::perf
