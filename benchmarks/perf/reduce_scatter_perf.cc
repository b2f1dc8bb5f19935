// ReduceScatter benchmark: rank r ends with block r of the reduction of all
// inputs. As in nccl-tests, "size" is the total input and "count" the per-rank
// output count.
#include "harness.h"

namespace tidal::perf {
namespace {

class ReduceScatter final : public Collective {
 public:
  const char* name() const override { return "ReduceScatter"; }
  bool hasOp() const override { return true; }
  bool hasRoot() const override { return false; }
  Layout layout(size_t count, int n) const override {
    const size_t perRank = count / n;
    return {perRank * n, perRank, perRank, 0, perRank};
  }
  // Each rank sends (and reduces) the n-1 blocks it does not keep.
  double busFactor(int n) const override { return static_cast<double>(n - 1) / n; }

  tidalResult_t run(const void* send, void* recv, size_t count, tidalDataType_t type,
                    tidalRedOp_t op, int, tidalComm_t comm, void* stream) const override {
    return tidalReduceScatter(send, recv, count, type, op, comm, stream);
  }

  void prepare(const CheckContext& c) const override {
    if (!c.inPlace) fillSentinel(c.recv, c.layout.recvCount * c.elemSize);
    fillInput(c.send, c.layout.sendCount, c.pattern, c.rank, 0);
  }

  int64_t countWrong(const CheckContext& c) const override {
    const size_t block = c.layout.recvCount;
    int64_t wrong = countWrongReduced(c.recv, block, c.pattern, c.rank * block);
    if (!c.inPlace) wrong += countWrongInput(c.send, c.layout.sendCount, c.pattern, c.rank, 0);
    return wrong;
  }
};

}  // namespace
}  // namespace tidal::perf

int main(int argc, char** argv) {
  return tidal::perf::runPerf(argc, argv, tidal::perf::ReduceScatter{});
}
