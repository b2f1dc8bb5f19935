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
  std::vector<std::string> names = {"tcp", "shm"};
#if TIDAL_HAVE_IB
  names.push_back("ib");
#endif
#if TIDAL_HAVE_OFI
  // Offered only where wanted (ofi_transport.h): elsewhere its handle is empty.
  names.push_back("ofi");
#endif
  return names;
}

std::unique_ptr<Transport> createTransport(const std::string& name, const TransportContext& ctx) {
  if (name == "tcp") return std::make_unique<TcpTransport>(ctx);
  if (name == "shm") return std::make_unique<shm::ShmTransport>(ctx);
#if TIDAL_HAVE_IB
  if (name == "ib") return std::make_unique<ib::IbTransport>(ctx);
#endif
#if TIDAL_HAVE_OFI
  if (name == "ofi") return std::make_unique<ofi::OfiTransport>(ctx);
#endif
  std::string names;
  for (const auto& n : availableTransports()) names += (names.empty() ? "" : ", ") + n;
  fail(tidalInvalidArgument, "rank {}: unknown transport '{}' (TIDAL_NET); available: {}", ctx.rank,
       name, names);
}

}  // namespace tidal
