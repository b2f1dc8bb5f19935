#include "harness.h"

#include <sched.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "device_buffers.h"
#include "json_report.h"
#include "options.h"
#include "report.h"
#include "timer.h"

namespace tidal::perf {
namespace {

// Exit codes shared with tidal-info and tidalrun (docs/benchmarks.md): a
// usage mistake (bad flag, bad value) is 2, a failure at run time 1.
constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

// A failed Tidal call; the message names the call, the rank and the library's
// explanation. Thrown to unwind to runPerf, which aborts the communicator.
class CallFailed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Page-aligned host memory, as a DMA-capable transport would want it.
class AlignedBuffer {
 public:
  explicit AlignedBuffer(size_t bytes) {
    void* p = nullptr;
    constexpr size_t kPage = 4096;
    const size_t rounded = std::max<size_t>((bytes + kPage - 1) / kPage * kPage, kPage);
    if (posix_memalign(&p, kPage, rounded) != 0) throw std::bad_alloc();
    ptr_.reset(static_cast<char*>(p));
    // Fault every page in now: first-touch cost must not land in the timings.
    std::memset(p, 0, rounded);
  }
  char* data() const { return ptr_.get(); }

 private:
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> ptr_;
};

// Fixed-size record all-gathered so rank 0 can list every rank.
struct RankInfo {
  int32_t rank;
  int32_t pid;
  char host[120];
  char device[64];  // "host memory" or the CUDA device (-W cuda)
};
static_assert(sizeof(RankInfo) == 192);

class Benchmark {
 public:
  Benchmark(const PerfOptions& opts, const Collective& coll, tidalComm_t comm, std::string program,
            JsonReport* json)
      : opts_(opts),
        coll_(coll),
        comm_(comm),
        reporter_(false),
        program_(std::move(program)),
        json_(json) {}

  int run();

 private:
  void check(tidalResult_t result, const std::string& what) const;
  void printDevices();
  void timeTest(tidalDataType_t type, tidalRedOp_t op, int root);
  void benchOne(tidalDataType_t type, tidalRedOp_t op, int root, const Layout& layout,
                bool inPlace);
  CheckContext context(tidalDataType_t type, tidalRedOp_t op, int root, const Layout& layout,
                       bool inPlace, uint64_t seed) const;
  void runOnce(const CheckContext& ctx) const;
  double timeBackToBack(const CheckContext& timed);
  double timeStartingTogether(const CheckContext& timed);
  double combineTimes(double seconds) const;
  int64_t sumAcrossRanks(int64_t value) const;
  void barrier() const { check(tidalBarrier(comm_, nullptr), "tidalBarrier"); }
  // With -W cuda: the device address at the offset of host pointer p in its
  // mirror buffer; the stream; copies of the mirrors to and from the device.
  void* onDevice(void* p) const;
  void* stream() const { return device_ ? device_->stream() : nullptr; }
  void upload() const {
    if (device_) device_->upload(send_->data(), recv_->data(), opts_.maxBytes);
  }
  void download() const {
    if (device_) device_->download(send_->data(), recv_->data(), opts_.maxBytes);
  }
  void synchronize() const {
    if (device_) device_->synchronize();
  }

  const PerfOptions& opts_;
  const Collective& coll_;
  tidalComm_t comm_;
  Reporter reporter_;
  std::string program_;  // the name nccl-tests prints: the program's file name
  JsonReport* json_;     // -J on rank 0, else null
  int rank_ = 0;
  int nranks_ = 1;
  std::unique_ptr<AlignedBuffer> send_;
  std::unique_ptr<AlignedBuffer> recv_;
  std::unique_ptr<DeviceBuffers> device_;  // -W cuda
  std::vector<size_t> sizes_;
  uint64_t validationSeed_ = 0;
  int64_t failedTests_ = 0;
  double busBwSum_ = 0;
  int busBwCount_ = 0;
};

void Benchmark::check(tidalResult_t result, const std::string& what) const {
  if (result == tidalSuccess) return;
  throw CallFailed(fmt::format("rank {}: {} failed: {}: {}", rank_, what,
                               tidalGetErrorString(result), tidalGetLastError(comm_)));
}

int Benchmark::run() {
  check(tidalCommUserRank(comm_, &rank_), "tidalCommUserRank");
  check(tidalCommCount(comm_, &nranks_), "tidalCommCount");
  reporter_ = Reporter(rank_ == 0);

  if (coll_.hasRoot() && opts_.root >= nranks_) {
    // Every rank got the same flags, so every rank stops here together.
    if (rank_ == 0) {
      std::fprintf(stderr, "invalid value %d for -r/--root: %d ranks (0..%d, or -1 for all)\n",
                   opts_.root, nranks_, nranks_ - 1);
    }
    return kExitUsage;
  }

  reporter_.line(versionLine());
  reporter_.line(startingLine(program_.c_str()));
  reporter_.line(optionsBanner(opts_));
  if (opts_.memory == "cuda") {
    // Every rank got the same flags, so every rank creates its buffers here.
    device_ = DeviceBuffers::create(opts_.maxBytes, opts_.streamNull != 0);
    reporter_.line(fmt::format("# Memory: cuda (device buffers, collectives ordered on {})",
                               opts_.streamNull ? "the NULL stream" : "a created stream"));
  } else {
    reporter_.line("# Memory: host (collectives block, stream NULL)");
  }
  if (opts_.blocking == 1) {
    reporter_.line("# Blocking Enabled: wait and barrier after each inner iteration (-m) ");
  } else if (opts_.blocking == 2) {
    reporter_.line("# Blocking Enabled: wait after each inner iteration (-m), no barrier ");
  } else if (opts_.blocking == 3) {
    reporter_.line(
        "# Blocking Enabled: wait and barrier after each outer iteration (-n); time excludes "
        "barrier ");
  }
  if (opts_.startTogether) {
    // The sleeps before each agreed start wake on time, not up to 50 us late.
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    reporter_.line(
        "# Start Together Enabled: each call starts at a moment all ranks agreed on (one clock: "
        "one machine), timed from it to each rank's end ");
  }
  if (opts_.parallelInit) {
    reporter_.line("# Parallel Init Enabled: threads call into tidalCommInitRank concurrently ");
  }
  reporter_.line("#");
  printDevices();

  // One allocation of the largest size for the whole run, as nccl-tests does.
  // Every layout fits: all-gather receives and reduce-scatter sends at most
  // maxBytes, and the in-place variants live inside the receive buffer.
  send_ = std::make_unique<AlignedBuffer>(opts_.maxBytes);
  recv_ = std::make_unique<AlignedBuffer>(opts_.maxBytes);
  sizes_ = sweepSizes(opts_);

  reporter_.columnHeader(opts_.reportCpuTime ? "cputime" : "time", opts_.reportTimestamps != 0);

  const std::vector<tidalDataType_t> types =
      opts_.datatype == kAll ? allTypes()
                             : std::vector<tidalDataType_t>{tidalDataType_t(opts_.datatype)};
  std::vector<tidalRedOp_t> ops{tidalSum};
  if (coll_.hasOp()) ops = opts_.op == kAll ? allOps() : std::vector{tidalRedOp_t(opts_.op)};
  std::vector<int> roots{-1};
  if (coll_.hasRoot()) {
    roots = {opts_.root};
    if (opts_.root == -1) {
      roots.clear();
      for (int r = 0; r < nranks_; ++r) roots.push_back(r);
    }
  }

  for (int cycle = 0; opts_.runCycles == 0 || cycle < opts_.runCycles; ++cycle) {
    for (tidalDataType_t type : types) {
      for (tidalRedOp_t op : ops) {
        for (int root : roots) timeTest(type, op, root);
      }
    }
  }

  const double avgBusBw = busBwCount_ ? busBwSum_ / busBwCount_ : 0.0;
  reporter_.footer(failedTests_, avgBusBw, program_.c_str());
  if (json_) json_->finish(failedTests_, avgBusBw, {});
  return failedTests_ ? kExitFailed : kExitOk;
}

void Benchmark::printDevices() {
  RankInfo mine{};
  mine.rank = rank_;
  mine.pid = static_cast<int32_t>(getpid());
  std::snprintf(mine.device, sizeof mine.device, "%s",
                device_ ? device_->describe().c_str() : "host memory");
  if (gethostname(mine.host, sizeof(mine.host) - 1) != 0) {
    std::snprintf(mine.host, sizeof(mine.host), "unknown");
  }
  // Through Tidal itself: this is also the first collective a run exercises.
  std::vector<RankInfo> all(nranks_);
  check(tidalAllGather(&mine, all.data(), sizeof(RankInfo), tidalUint8, comm_, nullptr),
        "tidalAllGather (rank info)");
  reporter_.line("# Using devices");
  for (const RankInfo& info : all) {
    reporter_.line(deviceLine(info.rank, info.pid, info.host, info.device));
    if (json_) json_->device(info.rank, info.pid, info.host, info.device);
  }
}

CheckContext Benchmark::context(tidalDataType_t type, tidalRedOp_t op, int root,
                                const Layout& layout, bool inPlace, uint64_t seed) const {
  const size_t elemSize = typeSize(type);
  CheckContext ctx{};
  ctx.rank = rank_;
  ctx.nranks = nranks_;
  ctx.root = root;
  ctx.inPlace = inPlace;
  ctx.layout = layout;
  ctx.pattern =
      Pattern{type, op, coll_.hasOp() ? patternFor(op) : PatternKind::kWide, nranks_, seed};
  ctx.elemSize = elemSize;
  ctx.recvBase = recv_->data();
  if (inPlace) {
    ctx.send = recv_->data() + layout.sendInPlaceOffset * rank_ * elemSize;
    ctx.recv = recv_->data() + layout.recvInPlaceOffset * rank_ * elemSize;
  } else {
    ctx.send = send_->data();
    ctx.recv = recv_->data();
  }
  return ctx;
}

void Benchmark::runOnce(const CheckContext& ctx) const {
  const tidalDataType_t type = ctx.pattern.type;
  const tidalResult_t result =
      coll_.run(onDevice(ctx.send), onDevice(ctx.recv), ctx.layout.paramCount, type, ctx.pattern.op,
                ctx.root, comm_, stream());
  if (result != tidalSuccess) {
    check(result, fmt::format("{}(count={}, type={}, op={}, root={}, {})", coll_.name(),
                              ctx.layout.paramCount, typeName(type), opName(ctx.pattern.op),
                              ctx.root, ctx.inPlace ? "in-place" : "out-of-place"));
  }
}

void Benchmark::timeTest(tidalDataType_t type, tidalRedOp_t op, int root) {
  const size_t elemSize = typeSize(type);
  barrier();

  // Warm up connections and caches at both ends of the sweep.
  for (size_t bytes : {opts_.maxBytes, opts_.minBytes}) {
    const CheckContext ctx =
        context(type, op, root, coll_.layout(bytes / elemSize, nranks_), false, 0);
    for (int i = 0; i < opts_.warmupIters; ++i) runOnce(ctx);
    synchronize();
  }

  for (size_t bytes : sizes_) {
    const Layout layout = coll_.layout(bytes / elemSize, nranks_);
    const size_t shownBytes = std::max(layout.sendCount, layout.recvCount) * elemSize;
    const char* shownOp = coll_.hasOp() ? opName(op) : "none";
    const int shownRoot = coll_.hasRoot() ? root : -1;
    reporter_.rowStart(shownBytes, layout.paramCount, typeName(type), shownOp, shownRoot);
    if (json_) json_->rowStart(shownBytes, layout.paramCount, typeName(type), shownOp, shownRoot);
    benchOne(type, op, root, layout, /*inPlace=*/false);
    if (coll_.hasInPlace()) {
      benchOne(type, op, root, layout, /*inPlace=*/true);
    } else {
      reporter_.rowNotRun();
    }
    reporter_.rowEnd(opts_.reportTimestamps != 0);
    if (json_) json_->rowEnd(opts_.iters, coll_.name());
  }
}

void Benchmark::benchOne(tidalDataType_t type, tidalRedOp_t op, int root, const Layout& layout,
                         bool inPlace) {
  const size_t elemSize = typeSize(type);
  // Timed runs read valid data too: NaNs or denormals could change the speed.
  const CheckContext timed = context(type, op, root, layout, inPlace, 0);
  if (opts_.check) coll_.prepare(timed);
  upload();
  runOnce(timed);
  synchronize();
  barrier();

  const double seconds =
      combineTimes(opts_.startTogether ? timeStartingTogether(timed) : timeBackToBack(timed));

  const double bytes = static_cast<double>(std::max(layout.sendCount, layout.recvCount) * elemSize);
  const double algBw = seconds > 0 ? bytes / 1.0e9 / seconds : 0.0;
  const double busBw = algBw * coll_.busFactor(nranks_);

  std::optional<int64_t> wrong;
  if (opts_.check) {
    wrong = 0;
    for (int pass = 0; pass < opts_.check && *wrong == 0; ++pass) {
      const CheckContext ctx = context(type, op, root, layout, inPlace, ++validationSeed_);
      coll_.prepare(ctx);
      upload();
      runOnce(ctx);
      download();
      const int64_t mine = coll_.countWrong(ctx);
      if (mine) {
        std::fprintf(stderr, "rank %d: %s %s %s bytes=%zu %s: %lld wrong elements\n", rank_,
                     coll_.name(), typeName(type), coll_.hasOp() ? opName(op) : "",
                     static_cast<size_t>(bytes), inPlace ? "in-place" : "out-of-place",
                     static_cast<long long>(mine));
      }
      wrong = sumAcrossRanks(mine);
    }
    if (*wrong) ++failedTests_;
  }

  reporter_.rowResult(seconds * 1.0e6, algBw, busBw, wrong);
  if (json_) json_->rowResult(inPlace, seconds * 1.0e6, algBw, busBw, wrong);
  busBwSum_ += busBw;
  ++busBwCount_;
}

// This rank's seconds per call, the calls back to back (-m, -z as nccl-tests).
double Benchmark::timeBackToBack(const CheckContext& timed) {
  // -m: that many calls per iteration, in one group (as nccl-tests), unless
  // -z 1/2 waits after each call, which a group would defer to its end.
  const bool perCallWait = opts_.blocking == 1 || opts_.blocking == 2;
  const bool grouped = opts_.aggIters > 1 && !perCallWait;
  double untimed = 0;  // -z 3: the barriers, left out of the time
  Stopwatch watch;
  for (int iter = 0; iter < opts_.iters; ++iter) {
    if (grouped) check(tidalGroupStart(), "tidalGroupStart");
    for (int agg = 0; agg < opts_.aggIters; ++agg) {
      runOnce(timed);
      if (perCallWait) synchronize();
      if (opts_.blocking == 1) barrier();
    }
    if (grouped) check(tidalGroupEnd(), "tidalGroupEnd");
    if (opts_.blocking == 3) {
      synchronize();
      const Stopwatch barrierWatch;
      barrier();
      untimed += barrierWatch.seconds();
    }
  }
  // Stream-ordered calls return at once: the time is until the stream is done.
  synchronize();
  return (watch.seconds() - untimed) / (static_cast<double>(opts_.iters) * opts_.aggIters);
}

// --start-together: this rank's mean seconds from each call's agreed start to
// its end. The ranks agree on a first start (the latest of their clocks plus
// a margin) and a period long enough for one call and the sleeps around it
// (twice the slowest rank's time for a call, plus 2 ms), then start call k
// at first + k * period: sleeping until 300 us before it (timer slack 1 ns),
// then yielding until it. A sleeper wakes late, by the kernel's default
// timer slack of 50 us and, on the project's VM, by up to hundreds of
// microseconds more; a rank that starts late still times from the agreed
// start, so any lateness left shows in its time.
double Benchmark::timeStartingTogether(const CheckContext& timed) {
  double callSeconds = steadySeconds();
  for (int agg = 0; agg < opts_.aggIters; ++agg) runOnce(timed);
  synchronize();
  callSeconds = steadySeconds() - callSeconds;
  check(tidalAllReduce(&callSeconds, &callSeconds, 1, tidalDouble, tidalMax, comm_, nullptr),
        "tidalAllReduce (start-together period)");
  const double period = 2 * callSeconds + 0.002;
  double first = steadySeconds() + period;
  check(tidalAllReduce(&first, &first, 1, tidalDouble, tidalMax, comm_, nullptr),
        "tidalAllReduce (start-together start)");
  double total = 0;
  for (int iter = 0; iter < opts_.iters; ++iter) {
    const double start = first + iter * period;
    const double early = start - 300e-6 - steadySeconds();
    if (early > 0) std::this_thread::sleep_for(std::chrono::duration<double>(early));
    while (steadySeconds() < start) sched_yield();
    for (int agg = 0; agg < opts_.aggIters; ++agg) runOnce(timed);
    synchronize();
    total += steadySeconds() - start;
  }
  return total / (static_cast<double>(opts_.iters) * opts_.aggIters);
}

void* Benchmark::onDevice(void* p) const {
  if (!device_ || p == nullptr) return p;
  auto* c = static_cast<char*>(p);
  if (c >= send_->data() && c <= send_->data() + opts_.maxBytes) {
    return device_->send() + (c - send_->data());
  }
  return device_->recv() + (c - recv_->data());
}

double Benchmark::combineTimes(double seconds) const {
  tidalRedOp_t op = tidalSum;
  switch (static_cast<Average>(opts_.average)) {
    case Average::kRank0:
      if (rank_ != 0) seconds = 0;  // a sum then yields rank 0's value everywhere
      break;
    case Average::kMean:
      break;
    case Average::kMin:
      op = tidalMin;
      break;
    case Average::kMax:
      op = tidalMax;
      break;
  }
  check(tidalAllReduce(&seconds, &seconds, 1, tidalDouble, op, comm_, nullptr),
        "tidalAllReduce (timing)");
  if (static_cast<Average>(opts_.average) == Average::kMean) seconds /= nranks_;
  return seconds;
}

int64_t Benchmark::sumAcrossRanks(int64_t value) const {
  check(tidalAllReduce(&value, &value, 1, tidalInt64, tidalSum, comm_, nullptr),
        "tidalAllReduce (wrong-element count)");
  return value;
}

// True when some launcher (tidalrun, torchrun, mpirun, srun) started us.
bool launchedByLauncher() {
  for (const char* name :
       {"TIDAL_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID", "PMIX_RANK"}) {
    if (std::getenv(name)) return true;
  }
  return false;
}

// Like nccl-tests built without MPI, a program started by hand runs as a
// single rank rather than failing for want of a launcher.
tidalResult_t initCommunicator(tidalComm_t* comm) {
  if (launchedByLauncher()) return tidalCommInitFromEnv(comm);
  tidalUniqueId id;
  if (const tidalResult_t r = tidalGetUniqueId(&id); r != tidalSuccess) return r;
  return tidalCommInitRank(comm, 1, id, 0);
}

}  // namespace

int runPerf(int argc, char** argv, const Collective& collective) {
  PerfOptions opts;
  CLI::App app{fmt::format("Tidal {} benchmark: nccl-tests flags and output.", collective.name())};
  addPerfOptions(app, opts);
  const std::string program = argc > 0 ? std::filesystem::path(argv[0]).filename().string()
                                       : std::string(collective.name());
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: error: %s (see --help)\n", program.c_str(), e.what());
    return kExitUsage;
  }
  if (const std::string error = validateOptions(opts); !error.empty()) {
    std::fprintf(stderr, "%s: error: %s\n", program.c_str(), error.c_str());
    return kExitUsage;
  }
  setlinebuf(stdout);

  tidalComm_t comm = nullptr;
  if (const tidalResult_t r = initCommunicator(&comm); r != tidalSuccess) {
    std::fprintf(stderr, "communicator init failed: %s: %s\n", tidalGetErrorString(r),
                 tidalGetLastError(nullptr));
    // A bad TIDAL_* value is a usage mistake too.
    return r == tidalInvalidArgument || r == tidalInvalidUsage ? kExitUsage : kExitFailed;
  }

  int exitCode = kExitFailed;
  try {
    int rank = 0;
    std::unique_ptr<JsonReport> json;
    if (!opts.outputFile.empty() && tidalCommUserRank(comm, &rank) == tidalSuccess && rank == 0) {
      json = std::make_unique<JsonReport>(opts.outputFile, argc, argv, opts);
      std::printf("# Writing JSON output to %s\n", json->path().c_str());
    }
    Benchmark bench(opts, collective, comm, program, json.get());
    exitCode = bench.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    // The peers may be blocked in a collective with us; abort closes our
    // connections so they fail fast instead of waiting for a timeout.
    tidalCommAbort(comm);
    return kExitFailed;
  }
  if (const tidalResult_t r = tidalCommDestroy(comm); r != tidalSuccess) {
    std::fprintf(stderr, "tidalCommDestroy failed: %s: %s\n", tidalGetErrorString(r),
                 tidalGetLastError(nullptr));
    return kExitFailed;
  }
  return exitCode;
}

}  // namespace tidal::perf
