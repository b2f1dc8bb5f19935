// The driver shared by all *_perf programs: options, communicator, buffers,
// the size sweep, timing, validation and the nccl-tests table. Each program
// only describes its collective through the Collective interface below.
#pragma once

#include <cstddef>
#include <cstdint>

#include "data.h"
#include "tidal/tidal.h"

namespace tidal::perf {

// Element counts of one call for a message of `count` elements, laid out the
// way nccl-tests does it (the printed size is max(send, recv) bytes and the
// printed count is the call's count argument).
struct Layout {
  size_t sendCount;          // elements each rank sends
  size_t recvCount;          // elements each rank receives
  size_t paramCount;         // the count argument of the call
  size_t sendInPlaceOffset;  // in place, send = recvbuff + rank * this many elements
  size_t recvInPlaceOffset;  // in place, recv = recvbuff + rank * this many elements
};

// Everything a collective needs to set up and verify one validation pass.
struct CheckContext {
  int rank;
  int nranks;
  int root;  // -1 for collectives without one
  bool inPlace;
  Layout layout;
  Pattern pattern;
  size_t elemSize;
  void* send;      // the pointer passed as sendbuff
  void* recv;      // the pointer passed as recvbuff
  void* recvBase;  // start of the receive allocation (in-place layouts live inside it)
};

class Collective {
 public:
  virtual ~Collective() = default;

  virtual const char* name() const = 0;
  // Without an op the table prints "none" and the data uses PatternKind::kWide.
  virtual bool hasOp() const = 0;
  // Without a root the table prints -1 and -r is ignored.
  virtual bool hasRoot() const = 0;
  virtual Layout layout(size_t count, int nranks) const = 0;
  // busbw = algbw * busFactor: the share of the data each link must carry, so
  // that busbw is comparable with the link speed whatever nranks is.
  virtual double busFactor(int nranks) const = 0;
  // false: the in-place columns print N/A (point-to-point has no in-place form).
  virtual bool hasInPlace() const { return true; }

  // `stream`: a cudaStream_t with -W cuda (send and recv are then device
  // addresses), NULL for host buffers.
  virtual tidalResult_t run(const void* send, void* recv, size_t count, tidalDataType_t type,
                            tidalRedOp_t op, int root, tidalComm_t comm, void* stream) const = 0;

  // Fills inputs, and sentinels where output is expected, for a validation pass.
  virtual void prepare(const CheckContext& ctx) const = 0;
  // Wrong elements on this rank after the pass (outputs, and inputs that must
  // stay unchanged).
  virtual int64_t countWrong(const CheckContext& ctx) const = 0;
};

// main() of a *_perf program. Returns the process exit code: 0 when every
// call succeeded and every checked result was exact.
int runPerf(int argc, char** argv, const Collective& collective);

}  // namespace tidal::perf
