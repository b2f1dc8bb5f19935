// What the backend accepts as a buffer, and how torch's types and reduction
// operators map onto Tidal's. Every refusal is a RuntimeError that names the
// call, the argument and the value.
#pragma once

#include <ATen/ATen.h>
#include <tidal/tidal.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <string>
#include <vector>

namespace tidal_torch {

// Tidal's datatype for a torch dtype. bool travels as uint8 (0 or 1).
tidalDataType_t tidalType(at::ScalarType type, const std::string& where);

// t must be a dense CPU tensor of a supported dtype. where: "allreduce:
// tensors[0]", used in the message.
void checkTensor(const at::Tensor& t, const std::string& where);

// Checks a list argument: not empty when it must hold one tensor per rank or
// one in all, each tensor as checkTensor, all of one dtype and, when
// sameShape, one shape.
void checkTensorList(const std::vector<at::Tensor>& list, const std::string& where,
                     size_t expectedSize, bool sameShape);

// How one reduction runs: through a Tidal operator, or, for the bitwise
// operators Tidal has not got, gathered and combined here.
struct Reduction {
  bool bitwise = false;
  tidalRedOp_t op = tidalSum;
  c10d::ReduceOp::RedOpType torchOp = c10d::ReduceOp::SUM;
};

// The reduction for op on tensors of type; refuses what cannot be done
// (AVG of bool, bitwise operators on floating types, PREMUL_SUM).
Reduction reductionFor(const c10d::ReduceOp& op, at::ScalarType type, const std::string& where);

const char* reduceOpName(c10d::ReduceOp::RedOpType op);

// A contiguous tensor with t's values: t itself when it is contiguous.
at::Tensor contiguousInput(const at::Tensor& t);
// A contiguous tensor to receive into for output t: t itself when it is
// contiguous, else a new one to copy into t afterwards (copyBack).
at::Tensor contiguousOutput(const at::Tensor& t);
void copyBack(const at::Tensor& received, const at::Tensor& t);

// The pointer Tidal gets for a tensor; numel() == 0 may give nullptr, which
// Tidal accepts with a count of 0.
inline void* dataOf(const at::Tensor& t) { return t.data_ptr(); }

}  // namespace tidal_torch
