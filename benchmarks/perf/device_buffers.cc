#include "device_buffers.h"

#include <cuda_runtime.h>

#include <stdexcept>

#include <fmt/format.h>

namespace tidal::perf {
namespace {

void check(cudaError_t r, const char* what) {
  if (r != cudaSuccess) {
    throw std::runtime_error(fmt::format("{}: {}", what, cudaGetErrorString(r)));
  }
}

class CudaBuffers final : public DeviceBuffers {
 public:
  CudaBuffers(size_t bytes, bool nullStream) {
    check(cudaGetDevice(&device_), "cudaGetDevice");
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, device_), "cudaGetDeviceProperties");
    name_ = prop.name;
    check(cudaMalloc(&send_, bytes > 0 ? bytes : 1), "cudaMalloc (send)");
    check(cudaMalloc(&recv_, bytes > 0 ? bytes : 1), "cudaMalloc (recv)");
    if (!nullStream) check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "stream");
  }
  ~CudaBuffers() override {
    cudaDeviceSynchronize();
    cudaFree(send_);
    cudaFree(recv_);
    if (stream_) cudaStreamDestroy(stream_);
  }
  char* send() const override { return static_cast<char*>(send_); }
  char* recv() const override { return static_cast<char*>(recv_); }
  void* stream() const override { return stream_; }
  void upload(const void* hostSend, const void* hostRecv, size_t bytes) override {
    synchronize();
    check(cudaMemcpy(send_, hostSend, bytes, cudaMemcpyHostToDevice), "upload send");
    check(cudaMemcpy(recv_, hostRecv, bytes, cudaMemcpyHostToDevice), "upload recv");
  }
  void download(void* hostSend, void* hostRecv, size_t bytes) override {
    synchronize();
    check(cudaMemcpy(hostSend, send_, bytes, cudaMemcpyDeviceToHost), "download send");
    check(cudaMemcpy(hostRecv, recv_, bytes, cudaMemcpyDeviceToHost), "download recv");
  }
  void synchronize() override { check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }
  std::string describe() const override { return fmt::format("cuda device {} {}", device_, name_); }

 private:
  int device_ = 0;
  std::string name_;
  void* send_ = nullptr;
  void* recv_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

}  // namespace

std::unique_ptr<DeviceBuffers> DeviceBuffers::create(size_t bytes, bool nullStream) {
  return std::make_unique<CudaBuffers>(bytes, nullStream);
}

}  // namespace tidal::perf
