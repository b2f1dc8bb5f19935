#include "json_report.h"

#include "core/json_quote.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>
#include <stdexcept>

#include <fmt/format.h>

#include "tidal/tidal.h"

extern char** environ;

namespace tidal::perf {
namespace {

std::string now() {
  char stamp[32];
  const std::time_t t = std::time(nullptr);
  std::tm local{};
  localtime_r(&t, &local);
  std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &local);
  return stamp;
}

std::string number(double value) {
  return std::isfinite(value) ? fmt::format("{:.6f}", value) : std::string("\"nan\"");
}

const char* boolText(bool value) { return value ? "\"true\"" : "\"false\""; }

std::string list(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? "," : "") + items[i];
  return out + "]";
}

// O_EXCL: an earlier run's file is never overwritten, the next free suffix is used.
int openNew(const std::string& path, std::string& used) {
  for (int attempt = -1; attempt < 1000; ++attempt) {
    used = attempt < 0 ? path : fmt::format("{}.{}", path, attempt);
    const int fd = ::open(used.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  errno = EEXIST;
  return -1;
}

}  // namespace

std::string jsonQuote(const std::string& text) { return tidal::jsonQuote(text); }

JsonReport::JsonReport(const std::string& path, int argc, char** argv, const PerfOptions& o)
    : cpuTime_(o.reportCpuTime != 0) {
  const int fd = openNew(path, path_);
  if (fd < 0) {
    throw std::runtime_error(fmt::format("-J/--output_file '{}': cannot create {}: {}", path, path_,
                                         std::strerror(errno)));
  }
  ::close(fd);  // reopened by finish(); the name is now ours
  std::vector<std::string> args, env;
  for (int i = 0; i < argc; ++i) args.push_back(jsonQuote(argv[i]));
  for (char** e = environ; e && *e; ++e) env.push_back(jsonQuote(*e));
  head_ = fmt::format(
      "{{\"version\":3,\"library\":\"tidal\",\"tidal_version\":{},\"start_time\":{},"
      "\"args\":{},\"env\":{},\"nccl_version\":{},\"config\":{{\"nthreads\":{},\"ngpus\":{},"
      "\"minimum_bytes\":{},\"maximum_bytes\":{},{},\"warmup_iters\":{},\"iterations\":{},"
      "\"aggregated_iterations\":{},\"validation\":{},\"graph\":{},\"blocking_collectives\":{},"
      "\"per_iter_timing\":{},\"per_iter_skip\":0,\"parallel_init\":{}",
      jsonQuote(TIDAL_RELEASE_STRING), jsonQuote(now()), list(args), list(env), TIDAL_VERSION_CODE,
      o.nThreads, o.nGpus, o.minBytes, o.maxBytes,
      o.stepFactor > 1 ? fmt::format("\"step_factor\":{}", o.stepFactor)
                       : fmt::format("\"step_bytes\":{}", o.stepBytes),
      o.warmupIters, o.iters, o.aggIters, o.check, o.cudaGraph, boolText(o.blocking != 0),
      boolText(o.perIterTiming != 0), boolText(o.parallelInit != 0));
}

void JsonReport::device(int rank, int pid, const std::string& host, const std::string& info) {
  devices_.push_back(
      fmt::format("{{\"rank\":{},\"group\":0,\"pid\":{},\"hostname\":{},\"device\":0,"
                  "\"device_hex\":\"0000:00:00\",\"device_info\":{}}}",
                  rank, pid, jsonQuote(host), jsonQuote(info)));
}

void JsonReport::rowStart(size_t bytes, size_t count, const char* type, const char* op, int root) {
  row_ = fmt::format("{{\"size\":{},\"count\":{},\"type\":{},\"redop\":{},\"root\":\"{:6d}\"",
                     bytes, count, jsonQuote(type), jsonQuote(op), root);
}

void JsonReport::rowResult(bool inPlace, double us, double algBw, double busBw,
                           std::optional<int64_t> wrong) {
  row_ += fmt::format(",\"{}\":{{\"{}\":{},\"alg_bw\":{},\"bus_bw\":{},\"nwrong\":{}}}",
                      inPlace ? "in_place" : "out_of_place", cpuTime_ ? "cpu_time" : "time",
                      number(us), number(algBw), number(busBw),
                      wrong ? number(static_cast<double>(*wrong)) : std::string("null"));
}

void JsonReport::rowEnd(int iterations, const char* name) {
  row_ += fmt::format(",\"actual_iterations\":{},\"experiment_name\":{}}}", iterations,
                      jsonQuote(name));
  rows_.push_back(std::move(row_));
  row_.clear();
}

void JsonReport::finish(int64_t failedTests, double avgBusBw, const std::string& error) {
  std::string doc = head_;
  doc += fmt::format(",\"devices\":{}}},\"results\":{}", list(devices_), list(rows_));
  doc += fmt::format(",\"out_of_bounds\":{{\"count\":{},\"okay\":{}}}", failedTests,
                     boolText(failedTests == 0));
  doc += fmt::format(",\"average_bus_bandwidth\":{{\"bandwidth\":{},\"okay\":\"unchecked\"}}",
                     number(avgBusBw));
  doc += fmt::format(",\"errors\":[{}],\"end_time\":{}}}\n",
                     error.empty() ? std::string() : jsonQuote(error), jsonQuote(now()));
  std::FILE* f = std::fopen(path_.c_str(), "w");
  const bool ok = f && std::fwrite(doc.data(), 1, doc.size(), f) == doc.size();
  if (f && std::fclose(f) != 0) f = nullptr;
  if (!ok || !f) {
    throw std::runtime_error(
        fmt::format("-J/--output_file: writing {} failed: {}", path_, std::strerror(errno)));
  }
}

}  // namespace tidal::perf
