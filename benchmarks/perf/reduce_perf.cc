// Reduce benchmark: the root ends with the reduction of all inputs; the other
// ranks' receive buffers must be left untouched.
#include "harness.h"

namespace tidal::perf {
namespace {

class Reduce final : public Collective {
 public:
  const char* name() const override { return "Reduce"; }
  bool hasOp() const override { return true; }
  bool hasRoot() const override { return true; }
  Layout layout(size_t count, int) const override { return {count, count, count, 0, 0}; }
  // A pipelined chain carries the whole message over every link once.
  double busFactor(int) const override { return 1.0; }

  tidalResult_t run(const void* send, void* recv, size_t count, tidalDataType_t type,
                    tidalRedOp_t op, int root, tidalComm_t comm, void* stream) const override {
    return tidalReduce(send, recv, count, type, op, root, comm, stream);
  }

  void prepare(const CheckContext& c) const override {
    if (!c.inPlace) fillSentinel(c.recv, c.layout.recvCount * c.elemSize);
    fillInput(c.send, c.layout.sendCount, c.pattern, c.rank, 0);
  }

  int64_t countWrong(const CheckContext& c) const override {
    const size_t count = c.layout.recvCount;
    int64_t wrong = 0;
    if (c.rank == c.root) {
      wrong += countWrongReduced(c.recv, count, c.pattern, 0);
    } else if (c.inPlace) {
      // sendbuff is const: a non-root's in-place buffer still holds its input.
      wrong += countWrongInput(c.recv, count, c.pattern, c.rank, 0);
    } else {
      wrong += countWrongSentinel(c.recv, count, c.elemSize);
    }
    if (!c.inPlace) wrong += countWrongInput(c.send, count, c.pattern, c.rank, 0);
    return wrong;
  }
};

}  // namespace
}  // namespace tidal::perf

int main(int argc, char** argv) { return tidal::perf::runPerf(argc, argv, tidal::perf::Reduce{}); }
