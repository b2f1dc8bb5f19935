// Creates transports by name. New transports add one line here.
#include "core/error.h"
#include "transports/shm/shm_transport.h"
#include "transports/tcp/tcp_transport.h"
#include "transports/transport.h"

namespace tidal {

std::vector<std::string> availableTransports() { return {"tcp", "shm"}; }

std::unique_ptr<Transport> createTransport(const std::string& name, const TransportContext& ctx) {
  if (name == "tcp") return std::make_unique<TcpTransport>(ctx);
  if (name == "shm") return std::make_unique<shm::ShmTransport>(ctx);
  fail(tidalInvalidArgument, "rank {}: unknown transport '{}' (TIDAL_NET); available: tcp, shm",
       ctx.rank, name);
}

}  // namespace tidal
