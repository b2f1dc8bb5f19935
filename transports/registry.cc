// Creates transports by name. New transports add one line here.
#include "core/error.h"
#include "transports/shm/shm_transport.h"
#include "transports/tcp/tcp_transport.h"
#include "transports/transport.h"
#if TIDAL_HAVE_IB
#include "transports/ib/ib_transport.h"
#endif
#if TIDAL_HAVE_OFI
#include "transports/ofi/ofi_transport.h"
#endif

namespace tidal {

std::vector<std::string> availableTransports() {
#if TIDAL_HAVE_IB
  return {"tcp", "shm", "ib"};
#else
  return {"tcp", "shm"};
#endif
}

std::unique_ptr<Transport> createTransport(const std::string& name, const TransportContext& ctx) {
  if (name == "tcp") return std::make_unique<TcpTransport>(ctx);
  if (name == "shm") return std::make_unique<shm::ShmTransport>(ctx);
#if TIDAL_HAVE_IB
  if (name == "ib") return std::make_unique<ib::IbTransport>(ctx);
#endif
#if TIDAL_HAVE_OFI
  // Only on request (TIDAL_NET=ofi) for now: not among the transports every
  // communicator opens and chooses from per peer.
  if (name == "ofi") return std::make_unique<ofi::OfiTransport>(ctx);
#endif
  std::string names;
  for (const auto& n : availableTransports()) names += (names.empty() ? "" : ", ") + n;
#if TIDAL_HAVE_OFI
  names += ", ofi (TIDAL_NET only)";
#endif
  fail(tidalInvalidArgument, "rank {}: unknown transport '{}' (TIDAL_NET); available: {}", ctx.rank,
       name, names);
}

}  // namespace tidal
