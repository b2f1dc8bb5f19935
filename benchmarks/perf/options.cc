#include "options.h"

#include <array>
#include <climits>
#include <map>
#include <string>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

namespace tidal::perf {
namespace {

struct TypeInfo {
  tidalDataType_t type;
  const char* name;
  size_t size;
};

// nccl-tests order and spelling; "all" sweeps this list.
constexpr std::array<TypeInfo, tidalNumTypes> kTypes{{
    {tidalInt8, "int8", 1},
    {tidalUint8, "uint8", 1},
    {tidalInt32, "int32", 4},
    {tidalUint32, "uint32", 4},
    {tidalInt64, "int64", 8},
    {tidalUint64, "uint64", 8},
    {tidalFloat16, "half", 2},
    {tidalFloat32, "float", 4},
    {tidalFloat64, "double", 8},
    {tidalBfloat16, "bfloat16", 2},
    {tidalFloat8e4m3, "f8e4m3", 1},
    {tidalFloat8e5m2, "f8e5m2", 1},
}};

// Indexed by tidalRedOp_t; nccl-tests sweeps sum prod max min avg in that order.
constexpr std::array<const char*, tidalNumOps> kOpNames{"sum", "prod", "max", "min", "avg"};

std::map<std::string, int> typeNameMap() {
  std::map<std::string, int> names{{"all", kAll}};
  for (const TypeInfo& t : kTypes) names[t.name] = t.type;
  // Aliases people type out of habit (PyTorch / NCCL enum spellings).
  names["char"] = tidalInt8;
  names["int"] = tidalInt32;
  names["float16"] = tidalFloat16;
  names["fp16"] = tidalFloat16;
  names["float32"] = tidalFloat32;
  names["fp32"] = tidalFloat32;
  names["float64"] = tidalFloat64;
  names["fp64"] = tidalFloat64;
  names["bf16"] = tidalBfloat16;
  names["float8e4m3"] = tidalFloat8e4m3;
  names["fp8e4m3"] = tidalFloat8e4m3;
  names["e4m3"] = tidalFloat8e4m3;
  names["float8e5m2"] = tidalFloat8e5m2;
  names["fp8e5m2"] = tidalFloat8e5m2;
  names["e5m2"] = tidalFloat8e5m2;
  return names;
}

std::map<std::string, int> opNameMap() {
  std::map<std::string, int> names{{"all", kAll}};
  for (int op = 0; op < tidalNumOps; ++op) names[kOpNames[op]] = op;
  return names;
}

// Flags nccl-tests has for multi-GPU-per-process or CUDA runs. Tidal runs one
// rank per process on host memory, so only the value that means "off" or
// "one" is meaningful; anything else is rejected rather than silently ignored.
CLI::Validator onlyValue(const char* value, const char* why) {
  return CLI::Validator(
      [value, why](std::string& input) -> std::string {
        return input == value ? std::string() : fmt::format("only {} is supported: {}", value, why);
      },
      value, "ONLY");
}

}  // namespace

void addPerfOptions(CLI::App& app, PerfOptions& o) {
  const CLI::AsSizeValue sizeUnits(/*kb_is_1000=*/false);  // K/M/G are powers of 1024
  app.add_option("-b,--minbytes", o.minBytes, "Minimum message size (bytes, K/M/G suffixes)")
      ->transform(sizeUnits)
      ->capture_default_str();
  app.add_option("-e,--maxbytes", o.maxBytes, "Maximum message size (bytes, K/M/G suffixes)")
      ->transform(sizeUnits)
      ->capture_default_str();
  app.add_option("-i,--stepbytes", o.stepBytes, "Size increment when --stepfactor is 1")
      ->transform(sizeUnits)
      ->capture_default_str();
  app.add_option("-f,--stepfactor", o.stepFactor, "Size multiplication factor (1: use -i)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("-n,--iters", o.iters, "Timed iterations per size")
      ->check(CLI::Range(1, INT_MAX))
      ->capture_default_str();
  app.add_option("-w,--warmup_iters", o.warmupIters, "Warm-up iterations (at max and min size)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("-m,--agg_iters", o.aggIters, "Operations per timed iteration")
      ->check(CLI::Range(1, INT_MAX))
      ->capture_default_str();
  app.add_option("-c,--check", o.check, "Validation passes per size (0: no validation)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("-o,--op", o.op, "Reduction: sum, prod, min, max, avg or all")
      ->transform(CLI::CheckedTransformer(opNameMap(), CLI::ignore_case).description(""))
      ->type_name("OP")
      ->default_str("sum");
  app.add_option("-d,--datatype", o.datatype,
                 "Type: int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 f8e4m3 "
                 "f8e5m2 or all")
      ->transform(CLI::CheckedTransformer(typeNameMap(), CLI::ignore_case).description(""))
      ->type_name("TYPE")
      ->default_str("float");
  app.add_option("-r,--root", o.root, "Root rank for broadcast/reduce (-1: every root in turn)")
      ->check(CLI::Range(-1, INT_MAX))
      ->capture_default_str();
  app.add_option("-a,--average", o.average,
                 "Time reported: 0 rank 0, 1 average, 2 minimum, 3 maximum over ranks")
      ->check(CLI::Range(0, 3))
      ->capture_default_str();
  app.add_option("-z,--blocking", o.blocking,
                 "0 none; 1 wait and barrier after each call; 2 wait after each call; 3 wait and "
                 "barrier after each iteration, barrier not timed")
      ->check(CLI::Range(0, 3))
      ->capture_default_str();
  app.add_option("--start-together", o.startTogether,
                 "1: start every timed call at a moment all ranks agree on (their clocks must be "
                 "one: ranks of one machine) and time it from there; not with -z")
      ->check(CLI::Range(0, 1))
      ->capture_default_str();
  app.add_option("-t,--nthreads", o.nThreads, "Threads per process")
      ->check(onlyValue("1", "one rank per process"))
      ->capture_default_str();
  app.add_option("-g,--ngpus", o.nGpus, "Devices per thread")
      ->check(onlyValue("1", "one rank per process"))
      ->capture_default_str();
  app.add_option("-p,--parallel_init", o.parallelInit, "Accepted for compatibility (0/1)")
      ->check(CLI::Range(0, 1))
      ->capture_default_str();
  app.add_option("-N,--run_cycles", o.runCycles, "Repeat the whole sweep N times (0: forever)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("-C,--report_cputime", o.reportCpuTime,
                 "Report CPU time instead of wall time (0/1); equal for blocking host calls")
      ->check(CLI::Range(0, 1))
      ->capture_default_str();
  app.add_option("-W,--memory", o.memory,
                 "Buffers in host memory or in CUDA device memory (host|cuda); with cuda, "
                 "collectives are ordered on a stream (-y 1: the NULL stream)")
      ->check(CLI::IsMember({"host", "cuda"}))
      ->capture_default_str();
  app.add_option("-y,--stream_null", o.streamNull,
                 "With -W cuda: 1 orders collectives on the NULL (legacy default) stream")
      ->check(CLI::Range(0, 1))
      ->capture_default_str();
  app.add_option("-T,--timeout", o.timeout, "Accepted for compatibility (seconds)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("-G,--cudagraph", o.cudaGraph, "CUDA graph launches")
      ->check(onlyValue("0", "no CUDA graphs for host memory"))
      ->capture_default_str();
  app.add_option("-S,--report_timestamps", o.reportTimestamps,
                 "Print the local time at the end of each row (0/1)")
      ->check(CLI::Range(0, 1))
      ->capture_default_str();
  app.add_option("-J,--output_file", o.outputFile,
                 "Also write the results as JSON to this file (nccl-tests' shape; an existing "
                 "file is kept and FILE.0, FILE.1 ... is used)");
  app.add_option("-R,--local_register", o.localRegister, "Buffer registration")
      ->check(onlyValue("0", "not supported in Tidal (the perf buffers are not registered)"))
      ->capture_default_str();
  app.add_option("-x,--cta_policy", o.ctaPolicy, "NCCL CTA policy")
      ->check(onlyValue("0", "not supported in Tidal (no CTA policies)"))
      ->capture_default_str();
  app.add_option("-M,--memory_report", o.memoryReport, "GPU memory report")
      ->check(onlyValue("0", "not supported in Tidal (no GPU memory accounting)"))
      ->capture_default_str();
  app.add_option("-u,--unalign", o.unalign, "Offset buffers by this many elements")
      ->check(onlyValue("0", "not supported in Tidal (buffers are page aligned)"))
      ->capture_default_str();
  app.add_option("-I,--per_iter_timing", o.perIterTiming, "Per-iteration timing report")
      ->check(onlyValue("0", "not supported in Tidal (one time per size)"))
      ->capture_default_str();
}

std::string validateOptions(const PerfOptions& o) {
  if (o.minBytes > o.maxBytes) {
    return fmt::format("invalid sizes for 'minbytes' and 'maxbytes': {} > {}", o.minBytes,
                       o.maxBytes);
  }
  if (o.minBytes != o.maxBytes) {
    // Either step would otherwise never reach maxBytes.
    if (o.stepFactor > 1 && o.minBytes == 0) return "minbytes must be > 0 with a step factor > 1";
    if (o.stepFactor <= 1 && o.stepBytes == 0) return "stepbytes must be > 0 with step factor 1";
  }
  if (o.startTogether && o.blocking != 0) {
    return fmt::format(
        "--start-together 1 times each call from a common start; it cannot be "
        "combined with -z {}",
        o.blocking);
  }
  return {};
}

std::vector<size_t> sweepSizes(const PerfOptions& o) {
  std::vector<size_t> sizes;
  for (size_t size = o.minBytes; size <= o.maxBytes;) {
    sizes.push_back(size);
    const size_t next = o.stepFactor > 1 ? size * o.stepFactor : size + o.stepBytes;
    if (next <= size) break;  // min == max with a zero step, or overflow
    size = next;
  }
  return sizes;
}

std::string optionsBanner(const PerfOptions& o) {
  const bool byFactor = o.stepFactor > 1;
  return fmt::format(
      "# nThread {} nGpus {} minBytes {} maxBytes {} step: {}({}) warmup iters: {} iters: {} "
      "agg iters: {} validation: {} graph: {} unalign: {}",
      o.nThreads, o.nGpus, o.minBytes, o.maxBytes, byFactor ? o.stepFactor : o.stepBytes,
      byFactor ? "factor" : "bytes", o.warmupIters, o.iters, o.aggIters, o.check, o.cudaGraph,
      o.unalign);
}

const std::vector<tidalDataType_t>& allTypes() {
  static const std::vector<tidalDataType_t> types = [] {
    std::vector<tidalDataType_t> v;
    for (const TypeInfo& t : kTypes) v.push_back(t.type);
    return v;
  }();
  return types;
}

const std::vector<tidalRedOp_t>& allOps() {
  static const std::vector<tidalRedOp_t> ops{tidalSum, tidalProd, tidalMax, tidalMin, tidalAvg};
  return ops;
}

const char* typeName(tidalDataType_t type) {
  for (const TypeInfo& t : kTypes) {
    if (t.type == type) return t.name;
  }
  return "unknown";
}

const char* opName(tidalRedOp_t op) {
  return op >= 0 && op < tidalNumOps ? kOpNames[op] : "unknown";
}

size_t typeSize(tidalDataType_t type) {
  for (const TypeInfo& t : kTypes) {
    if (t.type == type) return t.size;
  }
  return 0;
}

}  // namespace tidal::perf
