// The texts that describe an ib connection's path from its device (kept
// apart from protocol.cc so that the wire format's encoders and decoders
// depend on no device, and can be fuzzed alone: tests/fuzz).
#include "transports/ib/ib_device.h"
#include "transports/ib/protocol.h"

namespace tidal::ib {

std::string pathText(const IbDevice& device, ibv_mtu pathMtu) {
  return fmt::format("{} mtu {} GDR {}", device.pathText(), mtuName(pathMtu),
                     device.gpu().modeName());
}

std::string railText(const RailSlot& rail, const IbDevice& device) {
  if (rail.count <= 1) return {};
  return fmt::format(" (rail {} of {}, {}:{})", rail.index, rail.count, device.name(),
                     device.port());
}

}  // namespace tidal::ib
