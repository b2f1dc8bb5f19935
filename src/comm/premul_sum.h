// Reduction operators made by tidalRedOpCreatePreMulSum: result = sum over
// ranks of scalar * x_rank.
//
// Each operator belongs to one communicator and one datatype. Ids come from
// one process-wide counter (tidalNumOps, tidalNumOps + 1, ...) and are never
// reused, so an id of another communicator, or one already destroyed, is told
// apart from a live one of this communicator and named in the error.
//
// A call with such an operator (api_redop.cc) scales this rank's input into a
// temporary buffer and runs the built-in Sum on it: the schedules, the engine
// and the transports never see a custom operator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>

#include "core/dtype.h"
#include "tidal/tidal.h"

namespace tidal {

struct PreMulSumOp {
  tidalDataType_t type = tidalFloat32;
  tidalScalarResidence_t residence = tidalScalarHostImmediate;
  // Host-immediate: the scalar's bytes, captured at creation.
  alignas(8) unsigned char scalar[8] = {};
  // Device: where the scalar is read from at each call.
  const void* deviceScalar = nullptr;
};

// The live operators of one communicator.
class RedOpTable {
 public:
  RedOpTable() = default;
  ~RedOpTable();
  RedOpTable(const RedOpTable&) = delete;
  RedOpTable& operator=(const RedOpTable&) = delete;

  // A fresh id; throws InvalidUsage once ids up to tidalMaxRedOp are spent.
  tidalRedOp_t add(const PreMulSumOp& op);
  std::optional<PreMulSumOp> find(tidalRedOp_t op) const;
  bool remove(tidalRedOp_t op);

 private:
  mutable std::mutex mutex_;
  std::map<int, PreMulSumOp> ops_;
};

// True when some communicator of this process has `op` live (to tell a
// foreign operator from a destroyed or never-created one).
bool redOpLiveElsewhere(tidalRedOp_t op);

// Operator values that are not built-in (the C API sends them to api_redop.cc).
// By reference: a caller's negative op is read as bits (enumBits), not loaded.
inline bool isPreMulSumOp(const tidalRedOp_t& op) { return enumBits(op) >= tidalNumOps; }

// dst[i] = scalar * src[i] for `count` elements of op.type, scalar given as
// bytes of that type. Integers wrap (unsigned arithmetic), float16/bfloat16
// multiply in float32 and round once to nearest-even, float/double natively.
void scaleHost(void* dst, const void* src, size_t count, tidalDataType_t type,
               const unsigned char* scalar);

tidalResult_t preMulSumAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                 tidalDataType_t datatype, tidalRedOp_t op, tidalComm_t comm,
                                 void* stream);
tidalResult_t preMulSumReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                     tidalDataType_t datatype, tidalRedOp_t op, tidalComm_t comm,
                                     void* stream);
tidalResult_t preMulSumReduce(const void* sendbuff, void* recvbuff, size_t count,
                              tidalDataType_t datatype, tidalRedOp_t op, int root, tidalComm_t comm,
                              void* stream);

}  // namespace tidal
