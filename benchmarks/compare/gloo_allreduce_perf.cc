// Gloo's ring allreduce (gloo::AllreduceRing, float sum) or, with
// --collective alltoall, gloo::alltoall (float), over its TCP transport, timed
// like all_reduce_perf / alltoall_perf and printed in the same nccl-tests
// table so that compare.sh can line them up.
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
//
// gloo::alltoall needs distinct input and output buffers. Its out-of-place
// column is the call itself; its in-place column copies recvbuff to a scratch
// buffer first, which is what an in-place alltoall costs a Gloo user. Sizes
// follow alltoall_perf: "size" is one rank's whole buffer (count / n * n
// floats), the count column is one block (count / n), busbw = algbw (n-1)/n.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gloo/allgather_ring.h>
#include <gloo/allreduce_ring.h>
#include <gloo/alltoall.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/broadcast_one_to_all.h>
#include <gloo/config.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <CLI/CLI.hpp>

#include "host_buffer.h"
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

using Buffer = tidal::compare::HostBuffer<float>;

// Small integers: every partial sum is exact in float, so the check is exact.
float inputValue(int rank, size_t i) { return static_cast<float>((i * 7 + rank * 13) % 64); }

// AllToAll input of rank r at index i: the sender and the place both show.
float exchangeValue(int rank, size_t i) { return static_cast<float>(rank * 4096 + i % 4093); }

enum class Kind { kAllreduce, kAlltoall };

class GlooBench {
 public:
  GlooBench(const PerfOptions& opts, Kind kind, std::shared_ptr<gloo::Context> ctx)
      : opts_(opts), kind_(kind), ctx_(std::move(ctx)), reporter_(ctx_->rank == 0) {}

  int run() {
    reporter_.line(tidal::perf::optionsBanner(opts_));
    reporter_.line(
        fmt::format("# Peer: {} (Gloo {}.{}.{}, tcp transport)",
                    isAlltoall() ? "gloo::alltoall<float>" : "gloo::AllreduceRing<float>",
                    GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR, GLOO_VERSION_PATCH));
    reporter_.line("#");
    printDevices();

    Buffer send(opts_.maxBytes), recv(opts_.maxBytes);
    if (isAlltoall()) scratch_.emplace(opts_.maxBytes);
    reporter_.columnHeader("time");
    warmup(send.data.get(), recv.data.get(), bufferCount(opts_.maxBytes / sizeof(float)));
    warmup(send.data.get(), recv.data.get(), bufferCount(opts_.minBytes / sizeof(float)));

    for (size_t bytes : tidal::perf::sweepSizes(opts_)) {
      const size_t count = bufferCount(bytes / sizeof(float));
      reporter_.rowStart(count * sizeof(float), isAlltoall() ? count / ctx_->size : count, "float",
                         isAlltoall() ? "none" : "sum", -1);
      bench(send.data.get(), recv.data.get(), count, /*inPlace=*/false);
      bench(send.data.get(), recv.data.get(), count, /*inPlace=*/true);
      reporter_.rowEnd();
    }
    reporter_.footer(failed_, bwCount_ ? bwSum_ / bwCount_ : 0.0);
    barrier();
    return failed_ ? 1 : 0;
  }

 private:
  bool isAlltoall() const { return kind_ == Kind::kAlltoall; }

  // Elements in one rank's buffer for `count` elements asked for: AllToAll
  // sends whole blocks of count / n.
  size_t bufferCount(size_t count) const {
    return isAlltoall() ? count / ctx_->size * ctx_->size : count;
  }

  void warmup(float* send, float* recv, size_t count) {
    if (count == 0 || alone()) return;
    const std::function<void()> once = operation(send, recv, count, /*inPlace=*/false);
    for (int i = 0; i < opts_.warmupIters; ++i) once();
  }

  // One call as nccl-tests issues it, on `count` elements of send / recv.
  std::function<void()> operation(float* send, float* recv, size_t count, bool inPlace) {
    const size_t bytes = count * sizeof(float);
    if (isAlltoall()) {
      if (count == 0 || alone()) return [=] { std::memcpy(recv, send, inPlace ? 0 : bytes); };
      float* input = inPlace ? scratch_->data.get() : send;
      auto options = std::make_shared<gloo::AlltoallOptions>(ctx_);
      options->setInput(input, count);
      options->setOutput(recv, count);
      // In place = copy the input aside + out of place.
      return [=] {
        if (inPlace) std::memcpy(input, recv, bytes);
        gloo::alltoall(*options);
      };
    }
    std::shared_ptr<gloo::AllreduceRing<float>> ring;
    if (count && !alone()) {
      ring = std::make_shared<gloo::AllreduceRing<float>>(ctx_, std::vector<float*>{recv},
                                                          static_cast<int>(count));
    }
    // Out of place = copy + in place.
    return [=] {
      if (!inPlace) std::memcpy(recv, send, bytes);
      if (ring) ring->run();
    };
  }

  void fill(float* input, size_t count) const {
    const int rank = ctx_->rank;
    for (size_t i = 0; i < count; ++i) {
      input[i] = isAlltoall() ? exchangeValue(rank, i) : inputValue(rank, i);
    }
  }

  // What element i of rank `rank`'s output must hold.
  float expected(size_t i, size_t count) const {
    const int n = ctx_->size;
    if (isAlltoall()) {
      const size_t block = count / n;
      return exchangeValue(static_cast<int>(i / block), ctx_->rank * block + i % block);
    }
    float want = 0;
    for (int r = 0; r < n; ++r) want += inputValue(r, i);
    return want;
  }

  void bench(float* send, float* recv, size_t count, bool inPlace) {
    float* input = inPlace ? recv : send;
    const std::function<void()> once = operation(send, recv, count, inPlace);

    fill(input, count);
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
    const double busBw = algBw * (isAlltoall() ? 1.0 : 2.0) * (n - 1) / n;

    std::optional<int64_t> wrong;
    if (opts_.check) {
      wrong = 0;
      for (int pass = 0; pass < opts_.check && *wrong == 0; ++pass) {
        fill(input, count);
        once();
        double mine = 0;
        for (size_t i = 0; i < count; ++i) mine += recv[i] != expected(i, count);
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
  Kind kind_;
  std::shared_ptr<gloo::Context> ctx_;
  std::optional<Buffer> scratch_;  // AllToAll's in-place input copy
  Reporter reporter_;
  int64_t failed_ = 0;
  double bwSum_ = 0;
  int bwCount_ = 0;
};

// Sets `name.<rank>` in the store, then waits until every rank has set its.
void meetInStore(gloo::rendezvous::Store& store, const std::string& name, int rank, int size) {
  store.set(fmt::format("{}.{}", name, rank), {1});
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(fmt::format("{}.{}", name, r));
  store.wait(keys);
}

}  // namespace

int main(int argc, char** argv) {
  PerfOptions opts;
  std::string storeDir;
  std::string hostname = "127.0.0.1";
  std::string collective = "allreduce";
  CLI::App app{"Gloo AllreduceRing / alltoall benchmark: the *_perf flags and table."};
  tidal::perf::addPerfOptions(app, opts);
  app.add_option("--collective", collective, "What to time (-C is nccl-tests' report_cputime)")
      ->check(CLI::IsMember({"allreduce", "alltoall"}))
      ->capture_default_str();
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
  if (opts.startTogether) {
    std::fprintf(stderr, "--start-together: this Gloo peer times calls back to back only\n");
    return 1;
  }
  if (opts.datatype != tidalFloat || opts.op != tidalSum) {
    std::fprintf(stderr, "gloo_allreduce_perf measures float (sum) only (-d float -o sum)\n");
    return 1;
  }
  const Kind kind = collective == "alltoall" ? Kind::kAlltoall : Kind::kAllreduce;
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
    GlooBench bench(opts, kind, context);
    const int rc = bench.run();
    // A rank that closes its connections while a peer still waits for the
    // completion of its last send fails that peer ("Connection closed by
    // peer"), so the ranks meet once more through the store, which needs no
    // connection, before any of them tears its connections down.
    meetInStore(store, "done", rank, size);
    if (defaultStore && rank == 0) {
      // Every rank has seen all "done" keys once each has set its "left".
      std::vector<std::string> left;
      for (int r = 1; r < size; ++r) left.push_back(fmt::format("left.{}", r));
      if (!left.empty()) store.wait(left);
      std::filesystem::remove_all(storeDir);
    } else if (defaultStore) {
      store.set(fmt::format("left.{}", rank), {1});
    }
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    return 1;
  }
}
