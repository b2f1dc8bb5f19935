#include "tensors.h"

#include <c10/util/Exception.h>

namespace tidal_torch {

tidalDataType_t tidalType(at::ScalarType type, const std::string& where) {
  switch (type) {
    case at::kFloat:
      return tidalFloat32;
    case at::kDouble:
      return tidalFloat64;
    case at::kHalf:
      return tidalFloat16;
    case at::kBFloat16:
      return tidalBfloat16;
    case at::kChar:
      return tidalInt8;
    case at::kByte:
    case at::kBool:
      return tidalUint8;
    case at::kInt:
      return tidalInt32;
    case at::kLong:
      return tidalInt64;
    default:
      TORCH_CHECK(false, "tidal: ", where, ": dtype ", c10::toString(type),
                  " is not supported (supported: float32, float64, float16, bfloat16, int8, "
                  "uint8, int32, int64, bool)");
  }
}

void checkTensor(const at::Tensor& t, const std::string& where) {
  TORCH_CHECK(t.defined(), "tidal: ", where, " is an undefined tensor");
  TORCH_CHECK(t.layout() == at::kStrided, "tidal: ", where, " is a ", t.layout(),
              " tensor; only dense (strided) tensors are supported, sparse ones are not");
  TORCH_CHECK(t.device().is_cpu(), "tidal: ", where, " is on device ", t.device(),
              "; the tidal backend takes CPU tensors only (use NCCL-style CUDA support through "
              "the C API)");
  tidalType(t.scalar_type(), where);
}

void checkTensorList(const std::vector<at::Tensor>& list, const std::string& where,
                     size_t expectedSize, bool sameShape) {
  if (expectedSize > 0) {
    TORCH_CHECK(list.size() == expectedSize, "tidal: ", where, " holds ", list.size(),
                " tensors; expected ", expectedSize);
  }
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string name = where + "[" + std::to_string(i) + "]";
    checkTensor(list[i], name);
    if (i == 0) continue;
    TORCH_CHECK(list[i].scalar_type() == list[0].scalar_type(), "tidal: ", name, " has dtype ",
                list[i].scalar_type(), " but ", where, "[0] has ", list[0].scalar_type(),
                "; all must have one dtype");
    if (sameShape) {
      TORCH_CHECK(list[i].sizes() == list[0].sizes(), "tidal: ", name, " has shape ",
                  list[i].sizes(), " but ", where, "[0] has ", list[0].sizes(),
                  "; all must have one shape");
    }
  }
}

const char* reduceOpName(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM:
      return "SUM";
    case c10d::ReduceOp::AVG:
      return "AVG";
    case c10d::ReduceOp::PRODUCT:
      return "PRODUCT";
    case c10d::ReduceOp::MIN:
      return "MIN";
    case c10d::ReduceOp::MAX:
      return "MAX";
    case c10d::ReduceOp::BAND:
      return "BAND";
    case c10d::ReduceOp::BOR:
      return "BOR";
    case c10d::ReduceOp::BXOR:
      return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM:
      return "PREMUL_SUM";
    default:
      return "UNKNOWN";
  }
}

Reduction reductionFor(const c10d::ReduceOp& op, at::ScalarType type, const std::string& where) {
  const auto kind = static_cast<c10d::ReduceOp::RedOpType>(op);
  const bool isBool = type == at::kBool;
  Reduction r;
  r.torchOp = kind;
  switch (kind) {
    case c10d::ReduceOp::SUM:
      // bool: a sum that is true when any input is, as gloo computes it.
      r.op = isBool ? tidalMax : tidalSum;
      return r;
    case c10d::ReduceOp::PRODUCT:
      r.op = isBool ? tidalMin : tidalProd;
      return r;
    case c10d::ReduceOp::MIN:
      r.op = tidalMin;
      return r;
    case c10d::ReduceOp::MAX:
      r.op = tidalMax;
      return r;
    case c10d::ReduceOp::AVG:
      TORCH_CHECK(!isBool, "tidal: ", where, ": ReduceOp.AVG is not defined for bool tensors");
      r.op = tidalAvg;
      return r;
    case c10d::ReduceOp::BAND:
    case c10d::ReduceOp::BOR:
    case c10d::ReduceOp::BXOR:
      TORCH_CHECK(isBool || at::isIntegralType(type, /*includeBool=*/false), "tidal: ", where,
                  ": ReduceOp.", reduceOpName(kind), " needs an integer or bool tensor, not ",
                  c10::toString(type));
      r.bitwise = true;
      return r;
    default:
      TORCH_CHECK(false, "tidal: ", where, ": ReduceOp.", reduceOpName(kind),
                  " is not supported (SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR are)");
  }
}

at::Tensor contiguousInput(const at::Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }

at::Tensor contiguousOutput(const at::Tensor& t) {
  return t.is_contiguous() ? t : at::empty(t.sizes(), t.options());
}

void copyBack(const at::Tensor& received, const at::Tensor& t) {
  if (!received.is_same(t)) t.copy_(received);
}

}  // namespace tidal_torch
