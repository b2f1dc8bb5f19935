// AllToAll benchmark: block p of every rank's input lands in rank p's output.
// As in nccl-tests, "size" is one rank's whole buffer and "count" its element
// count; each of the n blocks holds count / n elements.
#include "harness.h"

namespace tidal::perf {
namespace {

class AllToAll final : public Collective {
 public:
  const char* name() const override { return "AlltoAll"; }
  bool hasOp() const override { return false; }
  bool hasRoot() const override { return false; }
  Layout layout(size_t count, int n) const override {
    const size_t total = count / n * n;
    return {total, total, total / n, 0, 0};
  }
  // Each rank sends and receives n-1 of its n blocks over the links.
  double busFactor(int n) const override { return static_cast<double>(n - 1) / n; }

  tidalResult_t run(const void* send, void* recv, size_t count, tidalDataType_t type, tidalRedOp_t,
                    int, tidalComm_t comm, void* stream) const override {
    return tidalAlltoAll(send, recv, count, type, comm, stream);
  }

  void prepare(const CheckContext& c) const override {
    const size_t block = c.layout.paramCount;
    if (!c.inPlace) fillSentinel(c.recvBase, c.layout.recvCount * c.elemSize);
    // Block p holds this rank's pattern at p's offset, so the receiver can
    // tell whose block landed where.
    for (int p = 0; p < c.nranks; ++p) {
      fillInput(static_cast<char*>(c.send) + p * block * c.elemSize, block, c.pattern, c.rank,
                p * block);
    }
  }

  int64_t countWrong(const CheckContext& c) const override {
    const size_t block = c.layout.paramCount;
    const auto* out = static_cast<const char*>(c.recv);
    int64_t wrong = 0;
    for (int q = 0; q < c.nranks; ++q) {
      wrong += countWrongInput(out + q * block * c.elemSize, block, c.pattern, q, c.rank * block);
    }
    return wrong;
  }
};

}  // namespace
}  // namespace tidal::perf

int main(int argc, char** argv) {
  return tidal::perf::runPerf(argc, argv, tidal::perf::AllToAll{});
}
