// The cuda_ipc transport: ranks on one host move device buffers through
// device memory, never through host memory. Several ranks may share one GPU
// (NCCL refuses that with "Duplicate GPU detected"; here it is just IPC
// between processes of one device, or plain pointers between threads).
//
// Set-up: each rank listens on a loopback TCP port (the handle that travels
// through the bootstrap is that port). connectSend allocates the connection's
// ring (TIDAL_CUDA_IPC_SLOTS x TIDAL_CUDA_IPC_SLOT_BYTES of device memory on
// this rank's GPU), exports it with cudaIpcGetMemHandle and sends one hello:
// job secret, both ranks, pid, device, ring geometry, the IPC handle and the
// ring's address. acceptRecv vets hellos with the one HelloAcceptor
// (net/hello_acceptor.h): a stranger, a wrong secret or a malformed hello
// gets a WARN and is closed, and the real peer is still awaited. It then
// maps the ring: by its address when the sender is a thread of this process
// (a process cannot open its own IPC handles), with cudaIpcOpenMemHandle
// otherwise.
//
// The data path is cuda_ipc_connection.h. The socket stays open for the
// ring's counters and for noticing that the peer died.
//
// Why legacy IPC handles and not cuMem VMM handles passed as file
// descriptors: they need no driver-API calls and no descriptor passing, and
// one 64-byte handle fits in the hello. Their one documented rule that
// matters here (the exporter must not free before the importer closes) is
// kept on orderly teardown; after a crash the driver reclaims both.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <optional>

#include "core/socket.h"
#include "cuda/device_api.h"
#include "net/hello_acceptor.h"
#include "transports/cuda_ipc/cuda_ipc_connection.h"
#include "transports/transport.h"

namespace tidal::cuda_ipc {

class CudaIpcTransport final : public Transport {
 public:
  // Reads the ring geometry from TIDAL_CUDA_IPC_SLOTS / _SLOT_BYTES.
  // `device` must outlive the transport and its connections.
  CudaIpcTransport(const TransportContext& ctx, DeviceApi& device);
  ~CudaIpcTransport() override;

  const char* name() const override { return "cuda_ipc"; }
  bool supports(MemoryKind kind) const override { return kind == MemoryKind::Cuda; }

  ConnectHandle listen() override;
  std::unique_ptr<Connection> connectSend(int peer, const ConnectHandle& peerHandle,
                                          Deadline deadline) override;
  std::unique_ptr<Connection> acceptRecv(int peer, Deadline deadline) override;

  // Copies do the moving: nothing to register.
  MemoryRegistration registerMemory(void* ptr, size_t bytes, MemoryKind kind) override {
    return {ptr, bytes, kind, 0};
  }
  void deregisterMemory(const MemoryRegistration&) override {}
  void abort() override;

  // The hello after the secret (same host, so native byte order).
  struct HelloBody {
    uint32_t version;
    int32_t fromRank;
    int32_t toRank;
    int32_t pid;
    int32_t device;
    uint32_t reserved;
    uint64_t slots;
    uint64_t slotBytes;
    uint64_t ringAddress;
    IpcMemoryHandle ipc;
  };
  static_assert(sizeof(HelloBody) == 112);

 private:
  struct Arrived {
    Socket socket;
    HelloBody hello;
  };
  // The problem with a vetted hello, or nullptr when it is acceptable.
  const char* helloProblem(const HelloBody& h) const;
  // Files an authenticated hello in arrived_, or refuses it with a WARN.
  void file(AcceptedHello& hello);

  TransportContext ctx_;
  DeviceApi& device_;
  RingGeometry geometry_;
  Socket listener_;
  uint16_t port_ = 0;
  std::unique_ptr<HelloAcceptor> acceptor_;
  std::map<int, Arrived> arrived_;
  std::atomic<bool> aborted_{false};
};

}  // namespace tidal::cuda_ipc
