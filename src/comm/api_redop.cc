// tidalRedOpCreatePreMulSum / tidalRedOpDestroy, and the AllReduce, Reduce and
// ReduceScatter calls that name such an operator (premul_sum.h): this rank's
// input is scaled into a temporary buffer, then the built-in Sum runs on it.
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/api_guard.h"
#include "comm/premul_sum.h"

using namespace tidal;

namespace {

// The operator `op` of comm for `type`, or an error naming op (and why).
PreMulSumOp lookupOp(tidalComm_t comm, const char* fn, tidalRedOp_t op, tidalDataType_t type) {
  const std::optional<PreMulSumOp> found = comm->redOps.find(op);
  if (!found) {
    if (static_cast<int>(op) >= tidalMaxRedOp || static_cast<int>(op) < tidalNumOps) {
      fail(tidalInvalidArgument,
           "{}: op {} is not a tidalRedOp_t (valid: 0..{}, or {}..{} made by "
           "tidalRedOpCreatePreMulSum)",
           where(comm, fn), static_cast<int>(op), tidalNumOps - 1, static_cast<int>(tidalNumOps),
           static_cast<int>(tidalMaxRedOp) - 1);
    }
    fail(tidalInvalidArgument, "{}: op {} {}", where(comm, fn), static_cast<int>(op),
         redOpLiveElsewhere(op) ? "was created on another communicator"
                                : "is not a live operator of this communicator (never created "
                                  "by tidalRedOpCreatePreMulSum, or destroyed)");
  }
  if (found->type != type) {
    fail(tidalInvalidArgument, "{}: op {} was created for datatype {} ({}), not {} ({})",
         where(comm, fn), static_cast<int>(op), static_cast<int>(found->type),
         typeName(found->type), static_cast<int>(type), typeName(type));
  }
  return *found;
}

// Validates a PreMulSum call on `inputBytes` of input (comm and datatype are
// checked already) and returns the input scaled by the operator's scalar,
// ready for the built-in Sum.
std::vector<unsigned char> scaledInput(tidalComm_t comm, const char* fn, const void* sendbuff,
                                       size_t inputCount, size_t inputBytes,
                                       tidalDataType_t datatype, tidalRedOp_t op, void* stream,
                                       std::initializer_list<BufferArg> buffers) {
  const PreMulSumOp p = lookupOp(comm, fn, op, datatype);
  checkBuffer(comm, fn, "sendbuff", sendbuff, inputBytes);
  for (const BufferArg& b : buffers) checkBuffer(comm, fn, b.name, b.pointer, b.bytes);
  const CallMemory memory = checkMemory(comm, fn, stream, buffers);
  if (memory.kind != MemoryKind::Host) {
    fail(tidalInvalidUsage,
         "{}: op {} (PreMulSum) on CUDA buffers is not supported yet; use host buffers or "
         "scale the input and use tidalSum",
         where(comm, fn), static_cast<int>(op));
  }
  unsigned char scalar[8] = {};
  if (p.residence == tidalScalarDevice) {
    cuda::copyToHost(scalar, p.deviceScalar, typeSize(datatype));
  } else {
    std::memcpy(scalar, p.scalar, sizeof scalar);
  }
  std::vector<unsigned char> scaled(inputBytes);
  if (inputCount > 0) scaleHost(scaled.data(), sendbuff, inputCount, datatype, scalar);
  return scaled;
}

// The shared part of the three calls: checks comm and datatype, lets `sizes`
// check the call's own arguments and return (input elements, recvbuff bytes),
// scales the input, then hands it to `run` (the call with tidalSum).
template <typename Sizes, typename Run>
tidalResult_t runScaled(const char* fn, tidalComm_t comm, const void* sendbuff, void* recvbuff,
                        tidalDataType_t datatype, tidalRedOp_t op, void* stream, Sizes&& sizes,
                        Run&& run) {
  std::vector<unsigned char> scaled;
  const tidalResult_t r = guarded(comm, [&] {
    Communicator& c = checkComm(comm, fn);
    checkType(comm, fn, datatype);
    const auto [inputCount, recvBytes] = sizes(c);
    const size_t inputBytes = inputCount * typeSize(datatype);
    scaled = scaledInput(comm, fn, sendbuff, inputCount, inputBytes, datatype, op, stream,
                         {{"sendbuff", sendbuff, inputBytes}, {"recvbuff", recvbuff, recvBytes}});
  });
  if (r != tidalSuccess) return r;
  if (group::active()) {
    // Inside a group the Sum only runs at tidalGroupEnd: the group keeps the
    // scaled input alive until then.
    auto kept = std::make_shared<std::vector<unsigned char>>(std::move(scaled));
    group::keepAlive(kept);
    return run(kept->data());
  }
  return run(scaled.data());
}

}  // namespace

namespace tidal {

tidalResult_t preMulSumAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                 tidalDataType_t datatype, tidalRedOp_t op, tidalComm_t comm,
                                 void* stream) {
  constexpr const char* fn = "tidalAllReduce";
  return runScaled(
      fn, comm, sendbuff, recvbuff, datatype, op, stream,
      [&](Communicator&) {
        return std::pair{count, checkBytes(comm, fn, "count", count, 1, datatype)};
      },
      [&](const void* scaled) {
        return tidalAllReduce(scaled, recvbuff, count, datatype, tidalSum, comm, stream);
      });
}

tidalResult_t preMulSumReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                     tidalDataType_t datatype, tidalRedOp_t op, tidalComm_t comm,
                                     void* stream) {
  constexpr const char* fn = "tidalReduceScatter";
  return runScaled(
      fn, comm, sendbuff, recvbuff, datatype, op, stream,
      [&](Communicator& c) {
        const size_t n = static_cast<size_t>(c.nranks());
        const size_t sendBytes = checkBytes(comm, fn, "recvcount", recvcount, n, datatype);
        return std::pair{recvcount * n, sendBytes / n};
      },
      [&](const void* scaled) {
        return tidalReduceScatter(scaled, recvbuff, recvcount, datatype, tidalSum, comm, stream);
      });
}

tidalResult_t preMulSumReduce(const void* sendbuff, void* recvbuff, size_t count,
                              tidalDataType_t datatype, tidalRedOp_t op, int root, tidalComm_t comm,
                              void* stream) {
  constexpr const char* fn = "tidalReduce";
  return runScaled(
      fn, comm, sendbuff, recvbuff, datatype, op, stream,
      [&](Communicator& c) {
        checkRoot(comm, fn, root);
        const size_t bytes = checkBytes(comm, fn, "count", count, 1, datatype);
        return std::pair{count, c.rank() == root ? bytes : size_t{0}};
      },
      [&](const void* scaled) {
        return tidalReduce(scaled, recvbuff, count, datatype, tidalSum, root, comm, stream);
      });
}

}  // namespace tidal

extern "C" {

tidalResult_t tidalRedOpCreatePreMulSum(tidalRedOp_t* op, void* scalar, tidalDataType_t datatype,
                                        tidalScalarResidence_t residence, tidalComm_t comm) {
  constexpr const char* fn = "tidalRedOpCreatePreMulSum";
  return guarded(comm, [&] {
    checkComm(comm, fn);
    if (!op) fail(tidalInvalidArgument, "{}: op is NULL", where(comm, fn));
    checkType(comm, fn, datatype);
    if (!scalar) fail(tidalInvalidArgument, "{}: scalar is NULL", where(comm, fn));
    // Read as bits first: a caller's residence outside the enum is named,
    // never loaded (enumBits).
    const int residenceBits = enumBits(residence);
    if (residenceBits != tidalScalarDevice && residenceBits != tidalScalarHostImmediate) {
      fail(tidalInvalidArgument,
           "{}: residence {} is not a tidalScalarResidence_t (0: tidalScalarDevice, 1: "
           "tidalScalarHostImmediate)",
           where(comm, fn), residenceBits);
    }
    PreMulSumOp p;
    p.type = datatype;
    p.residence = residence;
    if (residence == tidalScalarHostImmediate) {
      std::memcpy(p.scalar, scalar, typeSize(datatype));
    } else if (residence == tidalScalarDevice) {
      if (!cuda::usable()) {
        fail(tidalInvalidUsage,
             "{}: residence tidalScalarDevice needs a device scalar, but {}; use "
             "tidalScalarHostImmediate",
             where(comm, fn), cuda::unavailableReason());
      }
      if (cuda::classify(scalar).kind != MemoryKind::Cuda) {
        fail(tidalInvalidArgument,
             "{}: scalar {} is host memory, but residence is tidalScalarDevice; use "
             "tidalScalarHostImmediate",
             where(comm, fn), static_cast<const void*>(scalar));
      }
      p.deviceScalar = scalar;
    }
    *op = comm->redOps.add(p);
  });
}

tidalResult_t tidalRedOpDestroy(tidalRedOp_t op, tidalComm_t comm) {
  constexpr const char* fn = "tidalRedOpDestroy";
  return guarded(comm, [&] {
    checkComm(comm, fn);
    if (!isPreMulSumOp(op)) {
      fail(tidalInvalidArgument,
           "{}: op {} is not one made by tidalRedOpCreatePreMulSum (built-in operators are not "
           "destroyed)",
           where(comm, fn), static_cast<int>(op));
    }
    if (!comm->redOps.remove(op)) {
      fail(tidalInvalidArgument, "{}: op {} {}", where(comm, fn), static_cast<int>(op),
           redOpLiveElsewhere(op) ? "was created on another communicator"
                                  : "is not a live operator of this communicator (never "
                                    "created, or already destroyed)");
    }
  });
}

}  // extern "C"
