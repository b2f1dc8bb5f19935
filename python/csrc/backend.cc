#include "backend.h"

#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <thread>

#include "p2p_channels.h"
#include "tensors.h"

namespace tidal_torch {

using c10d::OpType;

Comm::~Comm() {
  if (comm_) tidalCommDestroy(comm_);
}

Comm& Comm::operator=(Comm&& other) noexcept {
  if (this != &other) {
    if (comm_) tidalCommDestroy(comm_);
    comm_ = other.comm_;
    other.comm_ = nullptr;
  }
  return *this;
}

void checkTidal(tidalResult_t result, tidalComm_t comm, const char* call) {
  if (result == tidalSuccess) return;
  const char* text = tidalGetLastError(comm);
  TORCH_CHECK(false, "tidal: ", call, " failed with ", tidalGetErrorString(result), ": ",
              text && *text ? text : "(no details)");
}

namespace {

// Settings Tidal reads from the environment when a communicator is made, and
// that the backend chooses for the communicators it makes, unless the user
// set them before the first group was created:
//  - TIDAL_TIMEOUT: the group's timeout, in whole seconds (at least 1);
//  - TIDAL_SPIN_US=0: a wait sleeps in poll() at once. The backend's thread
//    waits while the training thread computes on the same cores (DDP's
//    backward pass), and a spinning wait takes the CPU from it.
void setDefault(const char* name, const std::string& value) {
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  const char* now = std::getenv(name);
  if (!now || value != now) setenv(name, value.c_str(), 1);
}

void applyDefaults(std::chrono::milliseconds timeout) {
  static const bool userTimeout = std::getenv("TIDAL_TIMEOUT") != nullptr;
  static const bool userSpin = std::getenv("TIDAL_SPIN_US") != nullptr;
  if (!userTimeout) {
    const int64_t ms = std::max<int64_t>(timeout.count(), 1);
    setDefault("TIDAL_TIMEOUT", std::to_string(std::min<int64_t>((ms + 999) / 1000, 1000000000)));
  }
  if (!userSpin) setDefault("TIDAL_SPIN_US", "0");
}

size_t countOf(const at::Tensor& t) { return static_cast<size_t>(t.numel()); }

// Concatenates the tensors' elements (one dtype) into one new 1-D tensor.
at::Tensor flatten(const TensorList& tensors) {
  std::vector<at::Tensor> flat;
  flat.reserve(tensors.size());
  for (const auto& t : tensors) flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}

// Copies consecutive pieces of flat (1-D) into the tensors, from offset on.
void unflatten(const at::Tensor& flat, int64_t offset, const TensorList& tensors) {
  for (const auto& t : tensors) {
    t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
    offset += t.numel();
  }
}

// The bitwise operators, which Tidal does not have: gather every rank's
// buffer and combine here. buf (contiguous) receives the result.
void bitwiseAllReduce(tidalComm_t comm, const at::Tensor& buf, tidalDataType_t type,
                      c10d::ReduceOp::RedOpType op, int size) {
  const int64_t n = buf.numel();
  at::Tensor all = at::empty({size, n}, buf.options());
  checkTidal(tidalAllGather(buf.data_ptr(), all.data_ptr(), countOf(buf), type, comm, nullptr),
             comm, "tidalAllGather");
  at::Tensor acc = all[0].clone();
  for (int r = 1; r < size; ++r) {
    if (op == c10d::ReduceOp::BAND) {
      acc.bitwise_and_(all[r]);
    } else if (op == c10d::ReduceOp::BOR) {
      acc.bitwise_or_(all[r]);
    } else {
      acc.bitwise_xor_(all[r]);
    }
  }
  buf.view({-1}).copy_(acc);
}

void allReduceInPlace(tidalComm_t comm, const at::Tensor& buf, tidalDataType_t type,
                      const Reduction& red, int size) {
  if (red.bitwise) {
    bitwiseAllReduce(comm, buf, type, red.torchOp, size);
    return;
  }
  checkTidal(
      tidalAllReduce(buf.data_ptr(), buf.data_ptr(), countOf(buf), type, red.op, comm, nullptr),
      comm, "tidalAllReduce");
}

void checkSameKind(const at::Tensor& t, const at::Tensor& like, const std::string& where,
                   const std::string& likeName) {
  TORCH_CHECK(t.scalar_type() == like.scalar_type(), "tidal: ", where, " has dtype ",
              t.scalar_type(), " but ", likeName, " has ", like.scalar_type());
}

void checkNumel(const at::Tensor& t, int64_t numel, const std::string& where,
                const std::string& why) {
  TORCH_CHECK(t.numel() == numel, "tidal: ", where, " has ", t.numel(), " elements (shape ",
              t.sizes(), "); expected ", numel, " (", why, ")");
}

}  // namespace

Comm rendezvous(const c10::intrusive_ptr<c10d::Store>& store, const std::string& key, int rank,
                int size, std::chrono::milliseconds timeout) {
  tidalUniqueId id;
  if (rank == 0) {
    checkTidal(tidalGetUniqueId(&id), nullptr, "tidalGetUniqueId");
    const auto* bytes = reinterpret_cast<const uint8_t*>(id.internal);
    store->set(key, std::vector<uint8_t>(bytes, bytes + sizeof(id.internal)));
  } else {
    // Poll rather than block in get(): TCPStore holds its one client lock
    // for the whole of a blocking get, so two threads of this process
    // rendezvousing at once (two point-to-point channels) could each wait
    // for a key the other's set() cannot write.
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    auto pause = std::chrono::milliseconds(1);
    while (!store->check({key})) {
      TORCH_CHECK(std::chrono::steady_clock::now() < deadline, "tidal: rank ", rank, " of ", size,
                  " waited ", timeout.count(), " ms for the unique id under store key '", key,
                  "' (does rank 0 of the group run?)");
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(50));
    }
    const std::vector<uint8_t> bytes = store->get(key);
    TORCH_CHECK(bytes.size() == sizeof(id.internal), "tidal: the store's value for '", key,
                "' has ", bytes.size(), " bytes, not a unique id of ", sizeof(id.internal),
                " (another program using the key?)");
    std::memcpy(id.internal, bytes.data(), bytes.size());
  }
  applyDefaults(timeout);
  tidalComm_t comm = nullptr;
  const tidalResult_t result = tidalCommInitRank(&comm, size, id, rank);
  if (result != tidalSuccess) {
    const std::string text = tidalGetLastError(nullptr);
    if (comm) tidalCommDestroy(comm);
    TORCH_CHECK(false, "tidal: creating the communicator (rank ", rank, " of ", size,
                ") failed with ", tidalGetErrorString(result), ": ", text);
  }
  return Comm(comm);
}

TidalBackend::TidalBackend(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                           std::chrono::milliseconds timeout)
    : rank_(rank), size_(size), timeout_(timeout), store_(std::move(store)) {
  TORCH_CHECK(size >= 1, "tidal: world size ", size, " must be at least 1");
  TORCH_CHECK(rank >= 0 && rank < size, "tidal: rank ", rank, " is out of range for world size ",
              size);
  TORCH_CHECK(store_, "tidal: the store is None");
  comm_ = rendezvous(store_, "tidal_unique_id", rank, size, timeout);
  p2p_ = std::make_unique<P2PChannels>(store_, rank, size, timeout);
  queue_ = std::make_unique<WorkQueue>("tidal-torch");
}

TidalBackend::~TidalBackend() {
  queue_.reset();
  p2p_.reset();
}

WorkPtr TidalBackend::enqueue(OpType type, const char* what, TensorList outputs, Run run) {
  auto work = c10::make_intrusive<TidalWork>(rank_, type, what, std::move(outputs));
  tidalComm_t comm = comm_.get();
  queue_->push([work, comm, run = std::move(run)] {
    std::exception_ptr error;
    try {
      at::NoGradGuard noGrad;
      run(comm);
    } catch (...) {
      error = std::current_exception();
    }
    work->complete(error);
  });
  return work;
}

void TidalBackend::checkRoot(int64_t root, const char* what) const {
  TORCH_CHECK(root >= 0 && root < size_, "tidal: ", what, ": root rank ", root,
              " is out of range for a group of ", size_, " ranks");
}

WorkPtr TidalBackend::broadcast(TensorList& tensors, const c10d::BroadcastOptions& opts) {
  checkTensorList(tensors, "broadcast: tensors", 1, true);
  checkRoot(opts.rootRank, "broadcast");
  TORCH_CHECK(opts.rootTensor == 0, "tidal: broadcast: rootTensor ", opts.rootTensor,
              " must be 0 (one tensor per rank)");
  const at::Tensor t = tensors[0];
  const at::Tensor buf = contiguousInput(t);
  const auto type = tidalType(t.scalar_type(), "broadcast");
  const int root = static_cast<int>(opts.rootRank);
  return enqueue(OpType::BROADCAST, "broadcast", tensors, [t, buf, type, root](tidalComm_t comm) {
    checkTidal(
        tidalBroadcast(buf.data_ptr(), buf.data_ptr(), countOf(buf), type, root, comm, nullptr),
        comm, "tidalBroadcast");
    copyBack(buf, t);
  });
}

WorkPtr TidalBackend::allreduce(TensorList& tensors, const c10d::AllreduceOptions& opts) {
  checkTensorList(tensors, "allreduce: tensors", 1, true);
  const at::Tensor t = tensors[0];
  const Reduction red = reductionFor(opts.reduceOp, t.scalar_type(), "allreduce");
  const at::Tensor buf = contiguousInput(t);
  const auto type = tidalType(t.scalar_type(), "allreduce");
  const int size = size_;
  return enqueue(OpType::ALLREDUCE, "allreduce", tensors, [=](tidalComm_t comm) {
    allReduceInPlace(comm, buf, type, red, size);
    copyBack(buf, t);
  });
}

WorkPtr TidalBackend::allreduce_coalesced(TensorList& tensors,
                                          const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "tidal: allreduce_coalesced: tensors is empty");
  checkTensorList(tensors, "allreduce_coalesced: tensors", 0, false);
  const Reduction red =
      reductionFor(opts.reduceOp, tensors[0].scalar_type(), "allreduce_coalesced");
  const auto type = tidalType(tensors[0].scalar_type(), "allreduce_coalesced");
  const at::Tensor flat = flatten(tensors);
  const TensorList outs = tensors;
  const int size = size_;
  return enqueue(OpType::ALLREDUCE_COALESCED, "allreduce_coalesced", tensors,
                 [=](tidalComm_t comm) {
                   allReduceInPlace(comm, flat, type, red, size);
                   unflatten(flat, 0, outs);
                 });
}

WorkPtr TidalBackend::reduce(TensorList& tensors, const c10d::ReduceOptions& opts) {
  checkTensorList(tensors, "reduce: tensors", 1, true);
  checkRoot(opts.rootRank, "reduce");
  TORCH_CHECK(opts.rootTensor == 0, "tidal: reduce: rootTensor ", opts.rootTensor,
              " must be 0 (one tensor per rank)");
  const at::Tensor t = tensors[0];
  const Reduction red = reductionFor(opts.reduceOp, t.scalar_type(), "reduce");
  const auto type = tidalType(t.scalar_type(), "reduce");
  const int root = static_cast<int>(opts.rootRank);
  const bool isRoot = root == rank_;
  // Only the root's tensor changes: the others pass no receive buffer.
  const at::Tensor buf = contiguousInput(t);
  const int size = size_;
  return enqueue(OpType::REDUCE, "reduce", tensors, [=](tidalComm_t comm) {
    if (red.bitwise) {
      const at::Tensor scratch = isRoot ? buf : buf.clone();
      bitwiseAllReduce(comm, scratch, type, red.torchOp, size);
    } else {
      void* recv = isRoot ? buf.data_ptr() : nullptr;
      checkTidal(tidalReduce(buf.data_ptr(), recv, countOf(buf), type, red.op, root, comm, nullptr),
                 comm, "tidalReduce");
    }
    if (isRoot) copyBack(buf, t);
  });
}

WorkPtr TidalBackend::allgather(std::vector<TensorList>& outputs, TensorList& inputs,
                                const c10d::AllgatherOptions&) {
  checkTensorList(inputs, "allgather: inputTensors", 1, true);
  TORCH_CHECK(outputs.size() == 1, "tidal: allgather: outputTensors holds ", outputs.size(),
              " lists; expected 1 (one input tensor per rank)");
  checkTensorList(outputs[0], "allgather: outputTensors[0]", static_cast<size_t>(size_), false);
  const at::Tensor in = contiguousInput(inputs[0]);
  for (size_t r = 0; r < outputs[0].size(); ++r) {
    const std::string name = "allgather: outputTensors[0][" + std::to_string(r) + "]";
    checkSameKind(outputs[0][r], in, name, "inputTensors[0]");
    checkNumel(outputs[0][r], in.numel(), name, "the input's size");
  }
  const auto type = tidalType(in.scalar_type(), "allgather");
  const TensorList outs = outputs[0];
  const int size = size_;
  return enqueue(OpType::ALLGATHER, "allgather", outs, [=](tidalComm_t comm) {
    const at::Tensor all = at::empty({size * in.numel()}, in.options());
    checkTidal(tidalAllGather(in.data_ptr(), all.data_ptr(), countOf(in), type, comm, nullptr),
               comm, "tidalAllGather");
    unflatten(all, 0, outs);
  });
}

WorkPtr TidalBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                      const c10d::AllgatherOptions&) {
  checkTensor(input, "_allgather_base: input");
  checkTensor(output, "_allgather_base: output");
  checkSameKind(output, input, "_allgather_base: output", "input");
  checkNumel(output, input.numel() * size_, "_allgather_base: output",
             "world size x the input's elements");
  const at::Tensor in = contiguousInput(input);
  const at::Tensor out = contiguousOutput(output);
  const at::Tensor user = output;
  const auto type = tidalType(in.scalar_type(), "_allgather_base");
  return enqueue(OpType::_ALLGATHER_BASE, "_allgather_base", {output}, [=](tidalComm_t comm) {
    checkTidal(tidalAllGather(in.data_ptr(), out.data_ptr(), countOf(in), type, comm, nullptr),
               comm, "tidalAllGather");
    copyBack(out, user);
  });
}

WorkPtr TidalBackend::allgather_coalesced(std::vector<TensorList>& outputLists, TensorList& inputs,
                                          const c10d::AllgatherOptions&) {
  TORCH_CHECK(!inputs.empty(), "tidal: allgather_coalesced: inputTensors is empty");
  checkTensorList(inputs, "allgather_coalesced: inputTensors", 0, false);
  TORCH_CHECK(outputLists.size() == static_cast<size_t>(size_),
              "tidal: allgather_coalesced: outputTensorLists holds ", outputLists.size(),
              " lists; expected one per rank, ", size_);
  int64_t total = 0;
  for (const auto& t : inputs) total += t.numel();
  TensorList outs;
  for (size_t r = 0; r < outputLists.size(); ++r) {
    const std::string list = "allgather_coalesced: outputTensorLists[" + std::to_string(r) + "]";
    TORCH_CHECK(outputLists[r].size() == inputs.size(), "tidal: ", list, " holds ",
                outputLists[r].size(), " tensors; expected one per input, ", inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      const std::string name = list + "[" + std::to_string(i) + "]";
      checkTensor(outputLists[r][i], name);
      checkSameKind(outputLists[r][i], inputs[i], name, "inputTensors[" + std::to_string(i) + "]");
      checkNumel(outputLists[r][i], inputs[i].numel(), name, "its input's size");
      outs.push_back(outputLists[r][i]);
    }
  }
  const at::Tensor flat = flatten(inputs);
  const auto type = tidalType(flat.scalar_type(), "allgather_coalesced");
  const int size = size_;
  return enqueue(OpType::ALLGATHER_COALESCED, "allgather_coalesced", outs, [=](tidalComm_t comm) {
    const at::Tensor all = at::empty({size * total}, flat.options());
    checkTidal(tidalAllGather(flat.data_ptr(), all.data_ptr(), countOf(flat), type, comm, nullptr),
               comm, "tidalAllGather");
    unflatten(all, 0, outs);
  });
}

WorkPtr TidalBackend::gather(std::vector<TensorList>& outputs, TensorList& inputs,
                             const c10d::GatherOptions& opts) {
  checkTensorList(inputs, "gather: inputTensors", 1, true);
  checkRoot(opts.rootRank, "gather");
  const int root = static_cast<int>(opts.rootRank);
  const bool isRoot = root == rank_;
  const at::Tensor in = contiguousInput(inputs[0]);
  TensorList outs;
  if (isRoot) {
    TORCH_CHECK(outputs.size() == 1, "tidal: gather: outputTensors holds ", outputs.size(),
                " lists on the root; expected 1");
    checkTensorList(outputs[0], "gather: outputTensors[0]", static_cast<size_t>(size_), false);
    for (size_t r = 0; r < outputs[0].size(); ++r) {
      const std::string name = "gather: outputTensors[0][" + std::to_string(r) + "]";
      checkSameKind(outputs[0][r], in, name, "inputTensors[0]");
      checkNumel(outputs[0][r], in.numel(), name, "the input's size");
    }
    outs = outputs[0];
  } else {
    TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                "tidal: gather: outputTensors must be empty on rank ", rank_,
                ", which is not the root (", root, ")");
  }
  const auto type = tidalType(in.scalar_type(), "gather");
  const int size = size_;
  return enqueue(OpType::GATHER, "gather", outs, [=](tidalComm_t comm) {
    at::Tensor all;
    if (isRoot) all = at::empty({size * in.numel()}, in.options());
    checkTidal(tidalGather(in.data_ptr(), isRoot ? all.data_ptr() : nullptr, countOf(in), type,
                           root, comm, nullptr),
               comm, "tidalGather");
    if (isRoot) unflatten(all, 0, outs);
  });
}

WorkPtr TidalBackend::scatter(TensorList& outputs, std::vector<TensorList>& inputs,
                              const c10d::ScatterOptions& opts) {
  checkTensorList(outputs, "scatter: outputTensors", 1, true);
  checkRoot(opts.rootRank, "scatter");
  const int root = static_cast<int>(opts.rootRank);
  const bool isRoot = root == rank_;
  const at::Tensor t = outputs[0];
  at::Tensor flat;
  if (isRoot) {
    TORCH_CHECK(inputs.size() == 1, "tidal: scatter: inputTensors holds ", inputs.size(),
                " lists on the root; expected 1");
    checkTensorList(inputs[0], "scatter: inputTensors[0]", static_cast<size_t>(size_), false);
    for (size_t r = 0; r < inputs[0].size(); ++r) {
      const std::string name = "scatter: inputTensors[0][" + std::to_string(r) + "]";
      checkSameKind(inputs[0][r], t, name, "outputTensors[0]");
      checkNumel(inputs[0][r], t.numel(), name, "the output's size");
    }
    flat = flatten(inputs[0]);
  } else {
    TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                "tidal: scatter: inputTensors must be empty on rank ", rank_,
                ", which is not the root (", root, ")");
  }
  const at::Tensor out = contiguousOutput(t);
  const auto type = tidalType(t.scalar_type(), "scatter");
  return enqueue(OpType::SCATTER, "scatter", outputs, [=](tidalComm_t comm) {
    checkTidal(tidalScatter(isRoot ? flat.data_ptr() : nullptr, out.data_ptr(), countOf(out), type,
                            root, comm, nullptr),
               comm, "tidalScatter");
    copyBack(out, t);
  });
}

WorkPtr TidalBackend::reduce_scatter(TensorList& outputs, std::vector<TensorList>& inputs,
                                     const c10d::ReduceScatterOptions& opts) {
  checkTensorList(outputs, "reduce_scatter: outputTensors", 1, true);
  TORCH_CHECK(inputs.size() == 1, "tidal: reduce_scatter: inputTensors holds ", inputs.size(),
              " lists; expected 1");
  checkTensorList(inputs[0], "reduce_scatter: inputTensors[0]", static_cast<size_t>(size_), false);
  const at::Tensor t = outputs[0];
  for (size_t r = 0; r < inputs[0].size(); ++r) {
    const std::string name = "reduce_scatter: inputTensors[0][" + std::to_string(r) + "]";
    checkSameKind(inputs[0][r], t, name, "outputTensors[0]");
    checkNumel(inputs[0][r], t.numel(), name, "the output's size");
  }
  const Reduction red = reductionFor(opts.reduceOp, t.scalar_type(), "reduce_scatter");
  const auto type = tidalType(t.scalar_type(), "reduce_scatter");
  const at::Tensor flat = flatten(inputs[0]);
  const at::Tensor out = contiguousOutput(t);
  const int size = size_;
  const int rank = rank_;
  return enqueue(OpType::REDUCE_SCATTER, "reduce_scatter", outputs, [=](tidalComm_t comm) {
    if (red.bitwise) {
      bitwiseAllReduce(comm, flat, type, red.torchOp, size);
      out.view({-1}).copy_(flat.narrow(0, rank * out.numel(), out.numel()));
    } else {
      checkTidal(tidalReduceScatter(flat.data_ptr(), out.data_ptr(), countOf(out), type, red.op,
                                    comm, nullptr),
                 comm, "tidalReduceScatter");
    }
    copyBack(out, t);
  });
}

WorkPtr TidalBackend::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                           const c10d::ReduceScatterOptions& opts) {
  checkTensor(input, "_reduce_scatter_base: input");
  checkTensor(output, "_reduce_scatter_base: output");
  checkSameKind(input, output, "_reduce_scatter_base: input", "output");
  checkNumel(input, output.numel() * size_, "_reduce_scatter_base: input",
             "world size x the output's elements");
  const Reduction red = reductionFor(opts.reduceOp, output.scalar_type(), "_reduce_scatter_base");
  const auto type = tidalType(output.scalar_type(), "_reduce_scatter_base");
  const at::Tensor in = red.bitwise ? input.reshape({-1}).clone() : contiguousInput(input);
  const at::Tensor out = contiguousOutput(output);
  const at::Tensor user = output;
  const int size = size_;
  const int rank = rank_;
  return enqueue(OpType::_REDUCE_SCATTER_BASE, "_reduce_scatter_base", {output},
                 [=](tidalComm_t comm) {
                   if (red.bitwise) {
                     bitwiseAllReduce(comm, in, type, red.torchOp, size);
                     out.view({-1}).copy_(in.narrow(0, rank * out.numel(), out.numel()));
                   } else {
                     checkTidal(tidalReduceScatter(in.data_ptr(), out.data_ptr(), countOf(out),
                                                   type, red.op, comm, nullptr),
                                comm, "tidalReduceScatter");
                   }
                   copyBack(out, user);
                 });
}

namespace {

// Element counts and displacements of an alltoall_base side: splits are rows
// (dim 0) per rank; empty splits mean equal parts.
struct Splits {
  std::vector<size_t> counts;
  std::vector<size_t> displs;
};

Splits splitsOf(const at::Tensor& t, const std::vector<int64_t>& splits, int size,
                const std::string& where) {
  Splits s;
  const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  const int64_t rowElems = rows == 0 ? 0 : t.numel() / rows;
  std::vector<int64_t> parts = splits;
  if (parts.empty()) {
    TORCH_CHECK(rows % size == 0, "tidal: alltoall_base: ", where, " has ", rows,
                " rows, which do not split equally among ", size, " ranks (give split sizes)");
    parts.assign(static_cast<size_t>(size), rows / size);
  }
  TORCH_CHECK(parts.size() == static_cast<size_t>(size), "tidal: alltoall_base: ", where,
              " split sizes hold ", parts.size(), " entries; expected one per rank, ", size);
  int64_t sum = 0;
  for (size_t p = 0; p < parts.size(); ++p) {
    TORCH_CHECK(parts[p] >= 0, "tidal: alltoall_base: ", where, " split size [", p, "] is ",
                parts[p]);
    s.displs.push_back(static_cast<size_t>(sum * rowElems));
    s.counts.push_back(static_cast<size_t>(parts[p] * rowElems));
    sum += parts[p];
  }
  TORCH_CHECK(sum == rows, "tidal: alltoall_base: ", where, " split sizes add up to ", sum,
              " rows, but the tensor has ", rows);
  return s;
}

}  // namespace

WorkPtr TidalBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                    std::vector<int64_t>& outputSplits,
                                    std::vector<int64_t>& inputSplits,
                                    const c10d::AllToAllOptions&) {
  checkTensor(input, "alltoall_base: input");
  checkTensor(output, "alltoall_base: output");
  checkSameKind(output, input, "alltoall_base: output", "input");
  const Splits send = splitsOf(input, inputSplits, size_, "input");
  const Splits recv = splitsOf(output, outputSplits, size_, "output");
  const at::Tensor in = contiguousInput(input);
  const at::Tensor out = contiguousOutput(output);
  const at::Tensor user = output;
  const auto type = tidalType(input.scalar_type(), "alltoall_base");
  return enqueue(OpType::ALLTOALL_BASE, "alltoall_base", {output}, [=](tidalComm_t comm) {
    checkTidal(tidalAllToAllv(in.data_ptr(), send.counts.data(), send.displs.data(), out.data_ptr(),
                              recv.counts.data(), recv.displs.data(), type, comm, nullptr),
               comm, "tidalAllToAllv");
    copyBack(out, user);
  });
}

WorkPtr TidalBackend::alltoall(TensorList& outputs, TensorList& inputs,
                               const c10d::AllToAllOptions&) {
  checkTensorList(inputs, "alltoall: inputTensors", static_cast<size_t>(size_), false);
  checkTensorList(outputs, "alltoall: outputTensors", static_cast<size_t>(size_), false);
  checkSameKind(outputs[0], inputs[0], "alltoall: outputTensors[0]", "inputTensors[0]");
  Splits send;
  Splits recv;
  size_t sendTotal = 0;
  size_t recvTotal = 0;
  for (int p = 0; p < size_; ++p) {
    send.displs.push_back(sendTotal);
    send.counts.push_back(countOf(inputs[p]));
    sendTotal += countOf(inputs[p]);
    recv.displs.push_back(recvTotal);
    recv.counts.push_back(countOf(outputs[p]));
    recvTotal += countOf(outputs[p]);
  }
  const at::Tensor flat = flatten(inputs);
  const auto type = tidalType(flat.scalar_type(), "alltoall");
  const TensorList outs = outputs;
  return enqueue(OpType::ALLTOALL, "alltoall", outputs, [=](tidalComm_t comm) {
    const at::Tensor all = at::empty({static_cast<int64_t>(recvTotal)}, flat.options());
    checkTidal(
        tidalAllToAllv(flat.data_ptr(), send.counts.data(), send.displs.data(), all.data_ptr(),
                       recv.counts.data(), recv.displs.data(), type, comm, nullptr),
        comm, "tidalAllToAllv");
    unflatten(all, 0, outs);
  });
}

WorkPtr TidalBackend::send(TensorList& tensors, int dstRank, int tag) {
  checkTensorList(tensors, "send: tensors", 1, true);
  TORCH_CHECK(dstRank >= 0 && dstRank < size_, "tidal: send: destination rank ", dstRank,
              " is out of range for a group of ", size_, " ranks");
  TORCH_CHECK(dstRank != rank_, "tidal: send: destination rank ", dstRank,
              " is this rank; sending to itself is not supported");
  const at::Tensor buf = contiguousInput(tensors[0]);
  const auto type = tidalType(buf.scalar_type(), "send");
  return p2p_->submit(
      true, dstRank, OpType::SEND, "send", tensors, [buf, type](tidalComm_t comm, int peer) {
        checkTidal(tidalSend(buf.data_ptr(), countOf(buf), type, peer, comm, nullptr), comm,
                   "tidalSend");
      });
}

WorkPtr TidalBackend::recv(TensorList& tensors, int srcRank, int tag) {
  checkTensorList(tensors, "recv: tensors", 1, true);
  TORCH_CHECK(srcRank >= 0 && srcRank < size_, "tidal: recv: source rank ", srcRank,
              " is out of range for a group of ", size_, " ranks");
  TORCH_CHECK(srcRank != rank_, "tidal: recv: source rank ", srcRank,
              " is this rank; receiving from itself is not supported");
  const at::Tensor t = tensors[0];
  const at::Tensor buf = contiguousOutput(t);
  const auto type = tidalType(buf.scalar_type(), "recv");
  return p2p_->submit(
      false, srcRank, OpType::RECV, "recv", tensors, [t, buf, type](tidalComm_t comm, int peer) {
        checkTidal(tidalRecv(buf.data_ptr(), countOf(buf), type, peer, comm, nullptr), comm,
                   "tidalRecv");
        copyBack(buf, t);
      });
}

WorkPtr TidalBackend::recvAnysource(TensorList&, int) {
  TORCH_CHECK(false,
              "tidal: recv from any source (recv without src) is not supported; name the source "
              "rank");
}

WorkPtr TidalBackend::barrier(const c10d::BarrierOptions&) {
  P2PChannels* p2p = p2p_.get();
  const P2PChannels::Mark before = p2p->mark();
  return enqueue(OpType::BARRIER, "barrier", {}, [p2p, before](tidalComm_t comm) {
    p2p->waitFor(before);  // sends and receives issued before the barrier end first
    checkTidal(tidalBarrier(comm, nullptr), comm, "tidalBarrier");
  });
}

}  // namespace tidal_torch
