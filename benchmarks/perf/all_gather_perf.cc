// AllGather benchmark: rank r's block lands at offset r in every rank's output.
// As in nccl-tests, "size" is the gathered total and "count" the per-rank count.
#include "harness.h"

namespace tidal::perf {
namespace {

class AllGather final : public Collective {
 public:
  const char* name() const override { return "AllGather"; }
  bool hasOp() const override { return false; }
  bool hasRoot() const override { return false; }
  Layout layout(size_t count, int n) const override {
    const size_t perRank = count / n;
    return {perRank, perRank * n, perRank, perRank, 0};
  }
  // Each rank receives the n-1 blocks it does not own.
  double busFactor(int n) const override { return static_cast<double>(n - 1) / n; }

  tidalResult_t run(const void* send, void* recv, size_t count, tidalDataType_t type, tidalRedOp_t,
                    int, tidalComm_t comm, void* stream) const override {
    return tidalAllGather(send, recv, count, type, comm, stream);
  }

  void prepare(const CheckContext& c) const override {
    // Sentinel first: in place, this rank's block lies inside the output.
    fillSentinel(c.recvBase, c.layout.recvCount * c.elemSize);
    fillInput(c.send, c.layout.sendCount, c.pattern, c.rank, 0);
  }

  int64_t countWrong(const CheckContext& c) const override {
    const size_t block = c.layout.sendCount;
    const auto* out = static_cast<const char*>(c.recvBase);
    int64_t wrong = 0;
    for (int r = 0; r < c.nranks; ++r) {
      wrong += countWrongInput(out + r * block * c.elemSize, block, c.pattern, r, 0);
    }
    if (!c.inPlace) wrong += countWrongInput(c.send, block, c.pattern, c.rank, 0);
    return wrong;
  }
};

}  // namespace
}  // namespace tidal::perf

int main(int argc, char** argv) {
  return tidal::perf::runPerf(argc, argv, tidal::perf::AllGather{});
}
