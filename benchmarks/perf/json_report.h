// -J: the results as JSON, in the shape nccl-tests 2.19/2.20 writes, so that
// tools reading those files (and tools/tidal-plot) read ours too.
//
// Top level: version (3), start_time, args, env, nccl_version, config {...,
// devices [...]}, results [{size, count, type, redop, root, out_of_place
// {time|cpu_time, alg_bw, bus_bw, nwrong}, in_place {...}, actual_iterations,
// experiment_name}], out_of_bounds {count, okay}, average_bus_bandwidth
// {bandwidth, okay}, errors [], end_time. As in nccl-tests, booleans are the
// strings "true"/"false" and root is a string; Tidal adds "library": "tidal".
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "options.h"

namespace tidal::perf {

class JsonReport {
 public:
  // Opens a new file at path (path.0, path.1 ... when path exists, never
  // overwriting); the path used is path(). Throws std::runtime_error naming
  // the path when none can be created.
  JsonReport(const std::string& path, int argc, char** argv, const PerfOptions& opts);

  const std::string& path() const { return path_; }

  void device(int rank, int pid, const std::string& host, const std::string& info);
  void rowStart(size_t bytes, size_t count, const char* type, const char* op, int root);
  // inPlace false first, as in the table; nullopt wrong: no validation.
  void rowResult(bool inPlace, double microseconds, double algBw, double busBw,
                 std::optional<int64_t> wrong);
  void rowEnd(int iterations, const char* name);
  // Writes the whole document; an error is thrown naming the path.
  void finish(int64_t failedTests, double avgBusBw, const std::string& error);

 private:
  std::string path_;
  std::string head_;  // everything up to and including "config"
  std::vector<std::string> devices_;
  std::vector<std::string> rows_;
  std::string row_;
  bool cpuTime_;
};

// A JSON string literal for text (quotes, backslashes and control characters escaped).
std::string jsonQuote(const std::string& text);

}  // namespace tidal::perf
