#include "transports/ofi/ofi_transport.h"

#include "core/error.h"
#include "core/log.h"
#include "core/params.h"
#include "transports/ofi/ofi_api.h"
#include "transports/ofi/ofi_connection.h"

namespace tidal::ofi {

OfiTransport::OfiTransport(const TransportContext& ctx) : ctx_(ctx) {
  if (ctx.nranks > OfiConnection::kMaxRanks) {
    fail(tidalInvalidArgument, "rank {}: ofi carries at most {} ranks in its tags, not {}",
         ctx.rank, OfiConnection::kMaxRanks, ctx.nranks);
  }
}

OfiTransport::~OfiTransport() = default;

ConnectHandle OfiTransport::listen() {
  std::string why;
  const OfiApi* api = OfiApi::load(&why);
  if (api == nullptr) fail(tidalSystemError, "rank {}: ofi (TIDAL_NET=ofi): {}", ctx_.rank, why);
  endpoint_ = std::make_unique<Endpoint>(*api, ctx_.rank, params::getString("TIDAL_OFI_PROVIDER"),
                                         params::getBool("TIDAL_OFI_REGISTER_ALWAYS"));
  TIDAL_INFO(Net, "rank {}: ofi endpoint {} ({} address bytes)", ctx_.rank, endpoint_->pathText(),
             endpoint_->address().size());
  return endpoint_->address();
}

std::unique_ptr<Connection> OfiTransport::connectSend(int peer, const ConnectHandle& peerHandle,
                                                      Deadline) {
  if (!endpoint_) {
    fail(tidalInternalError, "rank {}: ofi connect to rank {} before listen", ctx_.rank, peer);
  }
  if (peerHandle.empty() || peerHandle.size() > kMaxConnectHandleBytes) {
    fail(tidalRemoteError, "rank {}: rank {} sent an ofi address of {} bytes", ctx_.rank, peer,
         peerHandle.size());
  }
  const fi_addr_t addr = endpoint_->insertPeer(peer, peerHandle);
  return std::make_unique<OfiConnection>(
      *endpoint_, ctx_.rank, peer, OfiConnection::Direction::Send, addr,
      fmt::format("ofi {} peer={}", endpoint_->pathText(), endpoint_->peerText(addr)));
}

std::unique_ptr<Connection> OfiTransport::acceptRecv(int peer, Deadline) {
  if (!endpoint_) {
    fail(tidalInternalError, "rank {}: ofi accept from rank {} before listen", ctx_.rank, peer);
  }
  return std::make_unique<OfiConnection>(
      *endpoint_, ctx_.rank, peer, OfiConnection::Direction::Recv, FI_ADDR_UNSPEC,
      fmt::format("ofi {} tagged from rank {}", endpoint_->pathText(), peer));
}

MemoryRegistration OfiTransport::registerMemory(void* ptr, size_t bytes, MemoryKind kind) {
  if (kind != MemoryKind::Host) {
    fail(tidalInvalidUsage, "rank {}: ofi moves host memory only (no FI_HMEM support yet)",
         ctx_.rank);
  }
  return {ptr, bytes, kind, 0};
}

}  // namespace tidal::ofi
