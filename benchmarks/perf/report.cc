#include "report.h"

#include <cstdio>
#include <ctime>

#include <fmt/format.h>

#include "tidal/tidal.h"

namespace tidal::perf {

std::string deviceLine(int rank, int pid, const char* hostname, const char* deviceName) {
  return fmt::format("#  Rank {:2d} Group {:2d} Pid {:6d} on {:>10} device {:2d} [0000:00:00] {}",
                     rank, 0, pid, hostname, 0, deviceName);
}

std::string formatFit(double value, int width) {
  // Fixed width whatever the magnitude, so columns stay aligned.
  const auto w = static_cast<size_t>(width);
  for (int decimals : {2, 1, 0}) {
    std::string text = fmt::format("{:{}.{}f}", value, width, decimals);
    if (text.size() <= w) return text;
  }
  return fmt::format("{:{}.{}e}", value, width, width >= 7 ? 1 : 0);
}

std::string formatTime(double us) { return formatFit(us, 7); }

std::string versionLine() {
  // nccl-headers / nccl-library: the NCCL API level Tidal implements.
  return fmt::format("# nccl-tests version {} (Tidal {}) nccl-headers={} nccl-library={}",
                     kNcclTestsVersion, TIDAL_RELEASE_STRING, TIDAL_VERSION_CODE,
                     TIDAL_VERSION_CODE);
}

std::string startingLine(const char* program) {
  return fmt::format("# Collective test starting: {}", program);
}

void Reporter::line(const std::string& text) const {
  if (!enabled_) return;
  std::fputs(text.c_str(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

void Reporter::columnHeader(const char* timeLabel, bool timestamps) const {
  if (!enabled_) return;
  fmt::print("#\n");
  fmt::print(
      "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}           out-of-place                       "
      "in-place          \n",
      "", "", "", "", "");
  // The timestamp column is 19 wide (YYYY-mm-dd HH:MM:SS), empty without -S.
  const int stampWidth = timestamps ? 19 : 0;
  fmt::print(
      "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  "
      "{:>6} {:>{}}\n",
      "size", "count", "type", "redop", "root", timeLabel, "algbw", "busbw", "#wrong", timeLabel,
      "algbw", "busbw", "#wrong", timestamps ? "timestamp" : "", stampWidth);
  fmt::print(
      "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  "
      "{:>6} {:>{}}\n",
      "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
      "", timestamps ? "%Y-%m-%d %H:%M:%S" : "", stampWidth);
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
  const std::string wrongText = wrong ? fmt::format("  {:6d}", *wrong) : std::string("    N/A");
  fmt::print("  {}  {}  {}{}", formatTime(us), formatFit(algBw, 6), formatFit(busBw, 6), wrongText);
  std::fflush(stdout);
}

void Reporter::rowNotRun() const {
  if (!enabled_) return;
  fmt::print("  {:>7}  {:>6}  {:>6}  {:>6}", "N/A", "N/A", "N/A", "N/A");
  std::fflush(stdout);
}

void Reporter::rowEnd(bool timestamp) const {
  if (!enabled_) return;
  if (timestamp) {
    char stamp[32];
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &local);
    fmt::print("{:>21}", stamp);
  }
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

void Reporter::footer(int64_t failedTests, double avgBusBw, const char* program) const {
  if (!enabled_) return;
  fmt::print("# Out of bounds values : {} {}\n", failedTests, failedTests ? "FAILED" : "OK");
  fmt::print("# Avg bus bandwidth    : {:g} \n", avgBusBw);
  fmt::print("#\n");
  if (program) fmt::print("# Collective test concluded: {}\n#\n\n", program);
  std::fflush(stdout);
}

}  // namespace tidal::perf
