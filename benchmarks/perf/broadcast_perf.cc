// Broadcast benchmark: the root's buffer is copied to every rank.
#include "harness.h"

namespace tidal::perf {
namespace {

class Broadcast final : public Collective {
 public:
  const char* name() const override { return "Broadcast"; }
  bool hasOp() const override { return false; }
  bool hasRoot() const override { return true; }
  Layout layout(size_t count, int) const override { return {count, count, count, 0, 0}; }
  // A pipelined chain carries the whole message over every link once.
  double busFactor(int) const override { return 1.0; }

  tidalResult_t run(const void* send, void* recv, size_t count, tidalDataType_t type, tidalRedOp_t,
                    int root, tidalComm_t comm, void* stream) const override {
    return tidalBroadcast(send, recv, count, type, root, comm, stream);
  }

  void prepare(const CheckContext& c) const override {
    const size_t count = c.layout.recvCount;
    if (!c.inPlace || c.rank != c.root) fillSentinel(c.recv, count * c.elemSize);
    if (c.rank == c.root) fillInput(c.send, count, c.pattern, c.root, 0);
  }

  int64_t countWrong(const CheckContext& c) const override {
    const size_t count = c.layout.recvCount;
    int64_t wrong = countWrongInput(c.recv, count, c.pattern, c.root, 0);
    if (!c.inPlace && c.rank == c.root) {
      wrong += countWrongInput(c.send, count, c.pattern, c.root, 0);
    }
    return wrong;
  }
};

}  // namespace
}  // namespace tidal::perf

int main(int argc, char** argv) {
  return tidal::perf::runPerf(argc, argv, tidal::perf::Broadcast{});
}
