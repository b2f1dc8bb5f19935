// The torch-version-specific surface of the backend, for torch 1.x (1.13):
// there a third-party backend is a c10d::ProcessGroup subclass, made by the
// function given to torch.distributed.Backend.register_backend. Everything
// here forwards to TidalBackend (backend.h), which has the same methods.
//
// For torch 2.x the same forwarding is written against c10d::Backend
// (torch/csrc/distributed/c10d/Backend.hpp) instead, and the creator is
// registered with devices=["cpu"]; docs/torch.md lists what changes.
#include <torch/csrc/utils/pybind.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <pybind11/chrono.h>

#include <memory>

#include "backend.h"

namespace tidal_torch {
namespace {

namespace py = pybind11;
using c10d::AllgatherOptions;
using c10d::AllreduceCoalescedOptions;
using c10d::AllreduceOptions;
using c10d::AllToAllOptions;
using c10d::BarrierOptions;
using c10d::BroadcastOptions;
using c10d::GatherOptions;
using c10d::ReduceOptions;
using c10d::ReduceScatterOptions;
using c10d::ScatterOptions;

class ProcessGroupTidal final : public c10d::ProcessGroup {
 public:
  ProcessGroupTidal(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                    std::chrono::milliseconds timeout)
      : ProcessGroup(rank, size), b_(std::make_unique<TidalBackend>(store, rank, size, timeout)) {
    init();
  }

  ~ProcessGroupTidal() override {
    // The backend's threads may be running a Python callback of a Future
    // (which takes the GIL): let them finish without it.
    if (Py_IsInitialized() && PyGILState_Check()) {
      py::gil_scoped_release noGil;
      b_.reset();
    } else {
      b_.reset();
    }
  }

  const std::string getBackendName() const override { return "tidal"; }

  WorkPtr broadcast(TensorList& t, const BroadcastOptions& o) override {
    return b_->broadcast(t, o);
  }
  WorkPtr allreduce(TensorList& t, const AllreduceOptions& o) override {
    return b_->allreduce(t, o);
  }
  WorkPtr allreduce_coalesced(TensorList& t, const AllreduceCoalescedOptions& o) override {
    return b_->allreduce_coalesced(t, o);
  }
  WorkPtr reduce(TensorList& t, const ReduceOptions& o) override { return b_->reduce(t, o); }
  WorkPtr allgather(std::vector<TensorList>& out, TensorList& in,
                    const AllgatherOptions& o) override {
    return b_->allgather(out, in, o);
  }
  WorkPtr _allgather_base(at::Tensor& out, at::Tensor& in, const AllgatherOptions& o) override {
    return b_->_allgather_base(out, in, o);
  }
  WorkPtr allgather_coalesced(std::vector<TensorList>& out, TensorList& in,
                              const AllgatherOptions& o) override {
    return b_->allgather_coalesced(out, in, o);
  }
  WorkPtr gather(std::vector<TensorList>& out, TensorList& in, const GatherOptions& o) override {
    return b_->gather(out, in, o);
  }
  WorkPtr scatter(TensorList& out, std::vector<TensorList>& in, const ScatterOptions& o) override {
    return b_->scatter(out, in, o);
  }
  WorkPtr reduce_scatter(TensorList& out, std::vector<TensorList>& in,
                         const ReduceScatterOptions& o) override {
    return b_->reduce_scatter(out, in, o);
  }
  WorkPtr _reduce_scatter_base(at::Tensor& out, at::Tensor& in,
                               const ReduceScatterOptions& o) override {
    return b_->_reduce_scatter_base(out, in, o);
  }
  WorkPtr alltoall_base(at::Tensor& out, at::Tensor& in, std::vector<int64_t>& outSplits,
                        std::vector<int64_t>& inSplits, const AllToAllOptions& o) override {
    return b_->alltoall_base(out, in, outSplits, inSplits, o);
  }
  WorkPtr alltoall(TensorList& out, TensorList& in, const AllToAllOptions& o) override {
    return b_->alltoall(out, in, o);
  }
  WorkPtr send(TensorList& t, int dst, int tag) override { return b_->send(t, dst, tag); }
  WorkPtr recv(TensorList& t, int src, int tag) override { return b_->recv(t, src, tag); }
  WorkPtr recvAnysource(TensorList& t, int tag) override { return b_->recvAnysource(t, tag); }
  WorkPtr barrier(const BarrierOptions& o) override { return b_->barrier(o); }

 private:
  std::unique_ptr<TidalBackend> b_;
};

}  // namespace
}  // namespace tidal_torch

PYBIND11_MODULE(_C, m) {
  namespace py = pybind11;
  using tidal_torch::ProcessGroupTidal;
  m.doc() = "Tidal as a torch.distributed backend (import tidal_torch to register it)";
  // The base class must be known to pybind11 before a subclass is declared.
  py::module_::import("torch.distributed");
  py::class_<ProcessGroupTidal, c10d::ProcessGroup, c10::intrusive_ptr<ProcessGroupTidal>>(
      m, "ProcessGroupTidal")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout) {
             return c10::make_intrusive<ProcessGroupTidal>(store, rank, size, timeout);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
           py::call_guard<py::gil_scoped_release>());
}
