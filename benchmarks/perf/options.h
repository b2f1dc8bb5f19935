// Command-line options of the *_perf benchmarks, with the flags and defaults
// of NVIDIA's nccl-tests so that scripts written for those run unchanged.
//
// The parsing is shared with the compare/ peers (Gloo), which is why this
// header depends only on the enums of the public C header, not on libtidal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tidal/tidal.h"

namespace CLI {
class App;
}

namespace tidal::perf {

// -d all / -o all / -r -1 select every type, op or root.
inline constexpr int kAll = -1;

// How per-rank times are combined into the one printed (-a).
enum class Average { kRank0 = 0, kMean = 1, kMin = 2, kMax = 3 };

struct PerfOptions {
  size_t minBytes = 32 * 1024 * 1024;
  size_t maxBytes = 32 * 1024 * 1024;
  size_t stepBytes = 1024 * 1024;
  size_t stepFactor = 1;
  int iters = 20;
  int warmupIters = 5;
  int aggIters = 1;
  int check = 1;  // validation passes per size; 0 disables validation
  int op = tidalSum;
  int datatype = tidalFloat;
  int root = 0;
  int average = static_cast<int>(Average::kMean);
  // -z: 0 none; 1 wait and barrier after each call (each of -m); 2 wait after
  // each call, no barrier; 3 wait and barrier after each iteration (-n), the
  // barrier left out of the time (nccl-tests 2.19's levels).
  int blocking = 0;
  // --start-together 1 (not in nccl-tests): every timed call starts at a
  // moment all ranks agreed on, read from CLOCK_MONOTONIC, and is timed from
  // that moment to each rank's end; so one call's time, with no overlap of
  // back-to-back calls and no skew left by a barrier. Only where the ranks
  // share one clock: processes of one machine (namespaced hosts included).
  int startTogether = 0;
  int nThreads = 1;
  int nGpus = 1;
  int parallelInit = 0;
  int runCycles = 1;  // 0: run forever
  int reportCpuTime = 0;
  int streamNull = 0;
  int timeout = 0;
  int cudaGraph = 0;
  int reportTimestamps = 0;  // -S: a local time stamp at the end of each row
  std::string outputFile;    // -J: also write the results as JSON there
  // Flags of nccl-tests for GPU-only features; only the "off" value is taken.
  int localRegister = 0;  // -R
  int ctaPolicy = 0;      // -x
  int memoryReport = 0;   // -M
  int unalign = 0;        // -u
  int perIterTiming = 0;  // -I
  // -W: where the buffers live, "host" or "cuda" (device memory of the
  // current device, collectives ordered on a stream). nccl-tests has no such
  // flag (its buffers are always on the GPU) and uses -G for CUDA graphs.
  std::string memory = "host";
};

// Registers every nccl-tests flag on app, writing into opts. Parsing errors and
// unsupported values (e.g. -t 2) are reported by CLI11 as usual.
void addPerfOptions(CLI::App& app, PerfOptions& opts);

// Message describing a combination CLI11 cannot check per flag (minBytes >
// maxBytes, zero step); empty when the options are consistent.
std::string validateOptions(const PerfOptions& opts);

// The message sizes swept, minBytes .. maxBytes by factor or by increment.
std::vector<size_t> sweepSizes(const PerfOptions& opts);

// The first header line of nccl-tests ("# nThread 1 nGpus 1 minBytes ...").
std::string optionsBanner(const PerfOptions& opts);

// Types and ops in nccl-tests order, and their names as nccl-tests prints them.
const std::vector<tidalDataType_t>& allTypes();
const std::vector<tidalRedOp_t>& allOps();
const char* typeName(tidalDataType_t type);
const char* opName(tidalRedOp_t op);
size_t typeSize(tidalDataType_t type);

}  // namespace tidal::perf
