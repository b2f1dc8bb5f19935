// SendRecv benchmark: in one group every rank sends its buffer to rank+1 and
// receives rank-1's (a ring shift), as nccl-tests' sendrecv_perf. Every link
// carries the whole message once, so busbw = algbw.
#include "harness.h"

namespace tidal::perf {
namespace {

class SendRecv final : public Collective {
 public:
  const char* name() const override { return "SendRecv"; }
  bool hasOp() const override { return false; }
  bool hasRoot() const override { return false; }
  Layout layout(size_t count, int) const override { return {count, count, count, 0, 0}; }
  double busFactor(int) const override { return 1.0; }
  // A buffer sent and received in the same group is not a defined operation.
  bool hasInPlace() const override { return false; }

  tidalResult_t run(const void* send, void* recv, size_t count, tidalDataType_t type, tidalRedOp_t,
                    int, tidalComm_t comm, void* stream) const override {
    int rank = 0, n = 1;
    tidalCommUserRank(comm, &rank);
    tidalCommCount(comm, &n);
    tidalGroupStart();
    tidalSend(send, count, type, (rank + 1) % n, comm, stream);
    tidalRecv(recv, count, type, (rank + n - 1) % n, comm, stream);
    return tidalGroupEnd();
  }

  void prepare(const CheckContext& c) const override {
    if (!c.inPlace) fillSentinel(c.recvBase, c.layout.recvCount * c.elemSize);
    fillInput(c.send, c.layout.sendCount, c.pattern, c.rank, 0);
  }

  int64_t countWrong(const CheckContext& c) const override {
    const int left = (c.rank + c.nranks - 1) % c.nranks;
    return countWrongInput(c.recv, c.layout.recvCount, c.pattern, left, 0);
  }
};

}  // namespace
}  // namespace tidal::perf

int main(int argc, char** argv) {
  return tidal::perf::runPerf(argc, argv, tidal::perf::SendRecv{});
}
