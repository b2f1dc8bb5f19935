// AllReduce benchmark: every rank ends with the reduction of all inputs.
#include "harness.h"

namespace tidal::perf {
namespace {

class AllReduce final : public Collective {
 public:
  const char* name() const override { return "AllReduce"; }
  bool hasOp() const override { return true; }
  bool hasRoot() const override { return false; }
  Layout layout(size_t count, int) const override { return {count, count, count, 0, 0}; }
  // A ring (the bandwidth-optimal schedule) moves 2(n-1)/n of the data over each link.
  double busFactor(int n) const override { return 2.0 * (n - 1) / n; }

  tidalResult_t run(const void* send, void* recv, size_t count, tidalDataType_t type,
                    tidalRedOp_t op, int, tidalComm_t comm, void* stream) const override {
    return tidalAllReduce(send, recv, count, type, op, comm, stream);
  }

  void prepare(const CheckContext& c) const override {
    if (!c.inPlace) fillSentinel(c.recv, c.layout.recvCount * c.elemSize);
    fillInput(c.send, c.layout.sendCount, c.pattern, c.rank, 0);
  }

  int64_t countWrong(const CheckContext& c) const override {
    int64_t wrong = countWrongReduced(c.recv, c.layout.recvCount, c.pattern, 0);
    if (!c.inPlace) wrong += countWrongInput(c.send, c.layout.sendCount, c.pattern, c.rank, 0);
    return wrong;
  }
};

}  // namespace
}  // namespace tidal::perf

int main(int argc, char** argv) {
  return tidal::perf::runPerf(argc, argv, tidal::perf::AllReduce{});
}
