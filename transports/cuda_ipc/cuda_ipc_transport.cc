#include "transports/cuda_ipc/cuda_ipc_transport.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/log.h"
#include "core/params.h"
#include "net/wire.h"

namespace tidal::cuda_ipc {

namespace {

constexpr uint32_t kHelloVersion = 1;
constexpr int64_t kMaxSlots = 64;
constexpr int64_t kMinSlotBytes = 64 * 1024;
constexpr int64_t kMaxSlotBytes = int64_t{64} << 20;
constexpr size_t kPayloadBytes = sizeof(Secret) + sizeof(CudaIpcTransport::HelloBody);

}  // namespace

CudaIpcTransport::CudaIpcTransport(const TransportContext& ctx, DeviceApi& device)
    : ctx_(ctx), device_(device) {
  const int64_t slots = params::getInt("TIDAL_CUDA_IPC_SLOTS");
  const int64_t slotBytes = params::getInt("TIDAL_CUDA_IPC_SLOT_BYTES");
  if (slots < 1 || slots > kMaxSlots) {
    fail(tidalInvalidArgument, "rank {}: TIDAL_CUDA_IPC_SLOTS={} is out of range 1..{}", ctx.rank,
         slots, kMaxSlots);
  }
  if (slotBytes < kMinSlotBytes || slotBytes > kMaxSlotBytes || slotBytes % kMinSlotBytes != 0) {
    fail(tidalInvalidArgument,
         "rank {}: TIDAL_CUDA_IPC_SLOT_BYTES={} is not a multiple of {} in the range {}..{}",
         ctx.rank, slotBytes, kMinSlotBytes, kMinSlotBytes, kMaxSlotBytes);
  }
  geometry_ = {static_cast<uint64_t>(slots), static_cast<uint64_t>(slotBytes)};
}

CudaIpcTransport::~CudaIpcTransport() = default;

ConnectHandle CudaIpcTransport::listen() {
  listener_ = Socket::listenOn(SocketAddress::loopback(AF_INET, 0));
  listener_.setNonBlocking();
  port_ = listener_.localAddress().port();
  acceptor_ = std::make_unique<HelloAcceptor>(
      listener_, wire::MsgType::CudaIpcHello, kPayloadBytes, ctx_.secret,
      fmt::format("rank {} cuda_ipc listener 127.0.0.1:{}", ctx_.rank, port_), log::Subsys::Net);
  TIDAL_INFO(Net, "rank {}: cuda_ipc listening on 127.0.0.1:{}", ctx_.rank, port_);
  ConnectHandle handle(sizeof port_);
  std::memcpy(handle.data(), &port_, sizeof port_);
  return handle;
}

std::unique_ptr<Connection> CudaIpcTransport::connectSend(int peer, const ConnectHandle& peerHandle,
                                                          Deadline deadline) {
  uint16_t port = 0;
  if (peerHandle.size() != sizeof port) {
    fail(tidalInternalError, "rank {}: malformed cuda_ipc handle from rank {} ({} bytes)",
         ctx_.rank, peer, peerHandle.size());
  }
  std::memcpy(&port, peerHandle.data(), sizeof port);
  const std::string what =
      fmt::format("rank {}: cuda_ipc connection to rank {} (127.0.0.1:{})", ctx_.rank, peer, port);
  Socket socket = Socket::connectTo(SocketAddress::loopback(AF_INET, port), deadline, what);
  socket.setNoDelay();

  OwnedMemory ring = device_.allocateDevice(geometry_.bytes());
  HelloBody hello{};
  hello.version = kHelloVersion;
  hello.fromRank = ctx_.rank;
  hello.toRank = peer;
  hello.pid = static_cast<int32_t>(::getpid());
  hello.device = device_.device();
  hello.slots = geometry_.slots;
  hello.slotBytes = geometry_.slotBytes;
  hello.ringAddress = reinterpret_cast<uint64_t>(ring.data());
  hello.ipc = device_.exportMemory(ring.data());
  uint8_t payload[kPayloadBytes];
  std::memcpy(payload, ctx_.secret.data(), sizeof(Secret));
  std::memcpy(payload + sizeof(Secret), &hello, sizeof hello);
  wire::sendMessage(socket, wire::MsgType::CudaIpcHello, payload, sizeof payload, deadline, what);
  socket.setNonBlocking();
  return std::make_unique<CudaIpcConnection>(
      ctx_.rank, peer, CudaIpcConnection::Direction::Send, device_, std::move(socket),
      std::move(ring), geometry_, true,
      fmt::format("cuda_ipc ring {}x{} KiB on device {} via 127.0.0.1:{}", geometry_.slots,
                  geometry_.slotBytes >> 10, device_.device(), port));
}

const char* CudaIpcTransport::helloProblem(const HelloBody& h) const {
  if (h.version != kHelloVersion) return "protocol version mismatch";
  if (h.toRank != ctx_.rank || h.fromRank < 0 || h.fromRank >= ctx_.nranks) {
    return "inconsistent ranks";
  }
  if (h.slots < 1 || h.slots > static_cast<uint64_t>(kMaxSlots) ||
      h.slotBytes < static_cast<uint64_t>(kMinSlotBytes) ||
      h.slotBytes > static_cast<uint64_t>(kMaxSlotBytes) || h.slotBytes % kMinSlotBytes != 0) {
    return "bad ring geometry";
  }
  if (arrived_.count(h.fromRank)) return "duplicate connection for that rank";
  return nullptr;
}

void CudaIpcTransport::file(AcceptedHello& accepted) {
  HelloBody h{};
  if (accepted.body.size() != sizeof h) {
    acceptor_->warnDropped(accepted.peer, "malformed cuda_ipc hello");
    return;
  }
  std::memcpy(&h, accepted.body.data(), sizeof h);
  if (const char* problem = helloProblem(h)) {
    acceptor_->warnDropped(accepted.peer, fmt::format("claims rank {}: {}", h.fromRank, problem));
    return;
  }
  arrived_.emplace(h.fromRank, Arrived{std::move(accepted.socket), h});
}

std::unique_ptr<Connection> CudaIpcTransport::acceptRecv(int peer, Deadline deadline) {
  acceptor_->serveUntil([&] { return arrived_.count(peer) != 0; },
                        [&](AcceptedHello& hello) { file(hello); }, deadline, aborted_,
                        fmt::format("rank {} to connect", peer));
  auto it = arrived_.find(peer);
  Arrived arrived = std::move(it->second);
  arrived_.erase(it);
  const HelloBody& h = arrived.hello;
  const RingGeometry geometry{h.slots, h.slotBytes};
  OwnedMemory ring;
  const bool sameProcess = h.pid == static_cast<int32_t>(::getpid());
  if (sameProcess) {
    // A thread of this process: the address is valid here, and the
    // allocation belongs to the sending connection.
    ring = OwnedMemory(reinterpret_cast<void*>(h.ringAddress), geometry.bytes(), nullptr);
  } else {
    try {
      ring = device_.importMemory(h.ipc, geometry.bytes());
    } catch (const Error& e) {
      fail(e.code(),
           "rank {}: cannot map the cuda_ipc ring of rank {} (pid {}, device {}) on device {}: {}; "
           "TIDAL_CUDA_IPC_DISABLE=1 stages device buffers through host memory instead",
           ctx_.rank, peer, h.pid, h.device, device_.device(), e.what());
    }
  }
  // A mapped IPC allocation is reachable by kernels (opening it enabled peer
  // access). Device numbers are per process (CUDA_VISIBLE_DEVICES), so they
  // are compared only between threads of one process.
  const bool direct = sameProcess ? device_.reachPeer(h.device) : true;
  arrived.socket.setNonBlocking();
  return std::make_unique<CudaIpcConnection>(
      ctx_.rank, peer, CudaIpcConnection::Direction::Recv, device_, std::move(arrived.socket),
      std::move(ring), geometry, direct,
      fmt::format("cuda_ipc ring {}x{} KiB of rank {} ({} {}, device {}){}", geometry.slots,
                  geometry.slotBytes >> 10, peer, sameProcess ? "thread of pid" : "pid", h.pid,
                  h.device, direct ? "" : ", copied (no peer access)"));
}

void CudaIpcTransport::abort() {
  aborted_ = true;
  listener_.shutdownBoth();
}

}  // namespace tidal::cuda_ipc
