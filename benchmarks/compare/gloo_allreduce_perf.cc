// Gloo's ring allreduce (gloo::AllreduceRing, float sum) over its TCP
// transport, timed like all_reduce_perf and printed in the same nccl-tests
// table so that compare.sh can line the two up.
//
// Launch N processes with RANK / WORLD_SIZE (torchrun style, as tidalrun
// sets them) or under mpirun (OMPI_COMM_WORLD_*); they rendezvous through a
// gloo::rendezvous::FileStore in a directory all of them see:
//
//   for r in 0 1 2 3; do RANK=$r WORLD_SIZE=4 build/benchmarks/gloo_allreduce_perf
//     --store-dir /tmp/run1 -b 8 -e 64M -f 4 & done; wait   (one line)
//
// AllreduceRing reduces in place. The out-of-place column copies sendbuff
// into recvbuff first and then reduces in place, which is what an
// out-of-place allreduce costs a Gloo user.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gloo/allgather_ring.h>
#include <gloo/allreduce_ring.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/broadcast_one_to_all.h>
#include <gloo/config.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <CLI/CLI.hpp>

#include "options.h"
#include "report.h"
#include "timer.h"

namespace {

using tidal::perf::PerfOptions;
using tidal::perf::Reporter;

// First of the launcher variables that is set, or -1.
int envInt(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (const char* value = std::getenv(name)) return std::atoi(value);
  }
  return -1;
}

// Page-aligned, pre-faulted host buffer (same treatment as all_reduce_perf).
struct Buffer {
  explicit Buffer(size_t bytes) {
    void* p = nullptr;
    const size_t rounded = std::max<size_t>((bytes + 4095) / 4096 * 4096, 4096);
    if (posix_memalign(&p, 4096, rounded) != 0) throw std::bad_alloc();
    std::memset(p, 0, rounded);
    data.reset(static_cast<float*>(p));
  }
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> data;
};

// Small integers: every partial sum is exact in float, so the check is exact.
float inputValue(int rank, size_t i) { return static_cast<float>((i * 7 + rank * 13) % 64); }

class GlooBench {
 public:
  GlooBench(const PerfOptions& opts, std::shared_ptr<gloo::Context> ctx)
      : opts_(opts), ctx_(std::move(ctx)), reporter_(ctx_->rank == 0) {}

  int run() {
    reporter_.line(tidal::perf::optionsBanner(opts_));
    reporter_.line(fmt::format("# Peer: gloo::AllreduceRing<float> (Gloo {}.{}.{}, tcp transport)",
                               GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR, GLOO_VERSION_PATCH));
    reporter_.line("#");
    printDevices();
    reporter_.line("#");

    Buffer send(opts_.maxBytes), recv(opts_.maxBytes);
    reporter_.columnHeader("time");
    const size_t maxCount = opts_.maxBytes / sizeof(float);
    const size_t minCount = opts_.minBytes / sizeof(float);
    warmup(recv.data.get(), maxCount);
    warmup(recv.data.get(), minCount);

    for (size_t bytes : tidal::perf::sweepSizes(opts_)) {
      const size_t count = bytes / sizeof(float);
      reporter_.rowStart(count * sizeof(float), count, "float", "sum", -1);
      bench(send.data.get(), recv.data.get(), count, /*inPlace=*/false);
      bench(send.data.get(), recv.data.get(), count, /*inPlace=*/true);
      reporter_.rowEnd();
    }
    reporter_.footer(failed_, bwCount_ ? bwSum_ / bwCount_ : 0.0);
    barrier();
    return failed_ ? 1 : 0;
  }

 private:
  void warmup(float* buf, size_t count) {
    if (count == 0 || alone()) return;
    gloo::AllreduceRing<float> ring(ctx_, {buf}, static_cast<int>(count));
    for (int i = 0; i < opts_.warmupIters; ++i) ring.run();
  }

  void bench(float* send, float* recv, size_t count, bool inPlace) {
    const int rank = ctx_->rank;
    float* input = inPlace ? recv : send;
    std::optional<gloo::AllreduceRing<float>> ring;
    if (count && !alone()) ring.emplace(ctx_, std::vector<float*>{recv}, static_cast<int>(count));
    // One allreduce as nccl-tests issues them: out of place = copy + in place.
    auto once = [&] {
      if (!inPlace) std::memcpy(recv, send, count * sizeof(float));
      if (ring) ring->run();
    };

    for (size_t i = 0; i < count; ++i) input[i] = inputValue(rank, i);
    once();
    barrier();
    tidal::perf::Stopwatch watch;
    for (int iter = 0; iter < opts_.iters; ++iter) {
      for (int agg = 0; agg < opts_.aggIters; ++agg) once();
      if (opts_.blocking) barrier();
    }
    const double seconds =
        combineTimes(watch.seconds() / (static_cast<double>(opts_.iters) * opts_.aggIters));
    const double algBw = seconds > 0 ? count * sizeof(float) / 1.0e9 / seconds : 0.0;
    const int n = ctx_->size;
    const double busBw = algBw * 2.0 * (n - 1) / n;

    std::optional<int64_t> wrong;
    if (opts_.check) {
      wrong = 0;
      for (int pass = 0; pass < opts_.check && *wrong == 0; ++pass) {
        for (size_t i = 0; i < count; ++i) input[i] = inputValue(rank, i);
        once();
        double mine = 0;
        for (size_t i = 0; i < count; ++i) {
          float want = 0;
          for (int r = 0; r < n; ++r) want += inputValue(r, i);
          mine += recv[i] != want;
        }
        wrong = static_cast<int64_t>(allreduce(mine, gloo::ReductionFunction<double>::sum));
      }
      if (*wrong) ++failed_;
    }
    reporter_.rowResult(seconds * 1e6, algBw, busBw, wrong);
    bwSum_ += busBw;
    ++bwCount_;
  }

  // Gloo's algorithms need a pair to a peer, so a single rank skips them.
  bool alone() const { return ctx_->size == 1; }

  double allreduce(double value, const gloo::ReductionFunction<double>* fn) {
    if (alone()) return value;
    gloo::AllreduceRing<double> ring(ctx_, {&value}, 1, fn);
    ring.run();
    return value;
  }

  double combineTimes(double seconds) {
    switch (opts_.average) {
      case 0: {
        if (alone()) return seconds;
        gloo::BroadcastOneToAll<double> bcast(ctx_, {&seconds}, 1, 0);
        bcast.run();
        return seconds;
      }
      case 2:
        return allreduce(seconds, gloo::ReductionFunction<double>::min);
      case 3:
        return allreduce(seconds, gloo::ReductionFunction<double>::max);
      default:
        return allreduce(seconds, gloo::ReductionFunction<double>::sum) / ctx_->size;
    }
  }

  void barrier() {
    if (alone()) return;
    gloo::BarrierAllToAll b(ctx_);
    b.run();
  }

  void printDevices() {
    struct Info {
      int32_t rank;
      int32_t pid;
      char host[120];
    } mine{};
    mine.rank = ctx_->rank;
    mine.pid = static_cast<int32_t>(getpid());
    if (gethostname(mine.host, sizeof(mine.host) - 1) != 0) std::strcpy(mine.host, "unknown");
    std::vector<Info> all(ctx_->size);
    if (alone()) {
      all[0] = mine;
    } else {
      gloo::AllgatherRing<char> gather(ctx_, {reinterpret_cast<const char*>(&mine)},
                                       reinterpret_cast<char*>(all.data()), sizeof(Info));
      gather.run();
    }
    reporter_.line("# Using devices");
    for (const Info& info : all) {
      reporter_.line(tidal::perf::deviceLine(info.rank, info.pid, info.host, "host memory"));
    }
  }

  const PerfOptions& opts_;
  std::shared_ptr<gloo::Context> ctx_;
  Reporter reporter_;
  int64_t failed_ = 0;
  double bwSum_ = 0;
  int bwCount_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  PerfOptions opts;
  std::string storeDir;
  std::string hostname = "127.0.0.1";
  CLI::App app{"Gloo AllreduceRing benchmark: all_reduce_perf's flags and table."};
  tidal::perf::addPerfOptions(app, opts);
  app.add_option("--store-dir", storeDir,
                 "Rendezvous directory shared by all ranks, fresh per run "
                 "(default /tmp/gloo_allreduce_perf.$MASTER_PORT)")
      ->envname("GLOO_STORE_DIR");
  app.add_option("--hostname", hostname, "Address the TCP transport binds to")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (opts.memory != "host") {
    std::fprintf(stderr, "-W %s: this Gloo peer runs on host memory only\n", opts.memory.c_str());
    return 1;
  }
  if (const std::string error = tidal::perf::validateOptions(opts); !error.empty()) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }
  if (opts.datatype != tidalFloat || opts.op != tidalSum) {
    std::fprintf(stderr, "gloo_allreduce_perf measures float sum only (-d float -o sum)\n");
    return 1;
  }
  const int rank = envInt({"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"});
  const int size = envInt({"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"});
  if (rank < 0 || size <= 0 || rank >= size) {
    std::fprintf(stderr, "set RANK and WORLD_SIZE (or run under mpirun/srun)\n");
    return 1;
  }
  const bool defaultStore = storeDir.empty();
  if (defaultStore) {
    const char* port = std::getenv("MASTER_PORT");
    if (!port) {
      std::fprintf(stderr, "pass --store-dir (or GLOO_STORE_DIR, or MASTER_PORT)\n");
      return 1;
    }
    storeDir = std::string("/tmp/gloo_allreduce_perf.") + port;
  }
  setlinebuf(stdout);

  try {
    std::filesystem::create_directories(storeDir);
    gloo::transport::tcp::attr attr;
    attr.hostname = hostname;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    gloo::rendezvous::FileStore store(storeDir);
    context->connectFullMesh(store, device);
    GlooBench bench(opts, context);
    const int rc = bench.run();
    // run() ended with a barrier: no rank still needs the store.
    if (defaultStore && rank == 0) std::filesystem::remove_all(storeDir);
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    return 1;
  }
}
