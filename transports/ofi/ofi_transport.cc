#include "transports/ofi/ofi_transport.h"

#include "core/error.h"
#include "core/log.h"
#include "core/params.h"
#include "topology/efa_devices.h"
#include "transports/ofi/ofi_api.h"
#include "transports/ofi/ofi_connection.h"

namespace tidal::ofi {

OfiTransport::OfiTransport(const TransportContext& ctx) : ctx_(ctx) {}

OfiTransport::~OfiTransport() = default;

ConnectHandle OfiTransport::listen() {
  if (params::getString("TIDAL_NET") == "ofi") {
    if (ctx_.nranks > OfiConnection::kMaxRanks) {
      fail(tidalInvalidArgument, "rank {}: ofi carries at most {} ranks in its tags, not {}",
           ctx_.rank, OfiConnection::kMaxRanks, ctx_.nranks);
    }
    openEndpoint(params::getString("TIDAL_OFI_PROVIDER"));
    return endpoint_->address();
  }
  // Offered among the others: an empty handle says "not here", and the
  // pair falls back to tcp (Links::chooseTransport).
  std::string why;
  const std::optional<std::string> provider = autoProvider(&why);
  if (!provider) {
    TIDAL_TRACE(Net, "rank {}: ofi not offered: {}", ctx_.rank, why);
    return {};
  }
  try {
    openEndpoint(*provider);
  } catch (const Error& e) {
    TIDAL_WARN(Net, "rank {}: ofi not offered ({}); tcp carries what it would have: {}", ctx_.rank,
               why, e.what());
    endpoint_.reset();
    return {};
  }
  TIDAL_INFO(Net, "rank {}: ofi offered ({})", ctx_.rank, why);
  return endpoint_->address();
}

std::optional<std::string> OfiTransport::autoProvider(std::string* why) const {
  if (ctx_.nranks > OfiConnection::kMaxRanks) {
    *why =
        fmt::format("{} ranks exceed the {} its tags carry", ctx_.nranks, OfiConnection::kMaxRanks);
    return std::nullopt;
  }
  if (std::string asked = params::getString("TIDAL_OFI_PROVIDER"); !asked.empty()) {
    *why = fmt::format("TIDAL_OFI_PROVIDER={}", asked);
    return asked;
  }
  const std::string sysfs = params::getString("TIDAL_TOPO_SYSFS");
  const std::vector<std::string> efa = topo::efaDevices(sysfs.empty() ? "/sys" : sysfs);
  if (efa.empty()) {
    *why = "no EFA adapter on this host and TIDAL_OFI_PROVIDER is unset";
    return std::nullopt;
  }
  *why = fmt::format("EFA adapter {}", efa.front());
  return std::string("efa");
}

void OfiTransport::openEndpoint(const std::string& provider) {
  std::string why;
  const OfiApi* api = OfiApi::load(&why);
  if (api == nullptr) fail(tidalSystemError, "rank {}: ofi: {}", ctx_.rank, why);
  endpoint_ = std::make_shared<Endpoint>(
      *api, ctx_.rank, provider, params::getBool("TIDAL_OFI_REGISTER_ALWAYS"),
      parseSendCompletion(params::getString("TIDAL_OFI_COMPLETION"), ctx_.rank));
  TIDAL_INFO(Net, "rank {}: ofi endpoint {} ({} address bytes)", ctx_.rank, endpoint_->pathText(),
             endpoint_->address().size());
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
