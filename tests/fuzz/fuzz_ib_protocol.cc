// libFuzzer harness: the ib transport's set-up messages as a peer or a
// stranger could send them: the listen handle (through the bootstrap), the
// hello and the reply (over the side channel, after the secret).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "transports/ib/protocol.h"

using namespace tidal;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::vector<uint8_t> bytes(data + 1, data + size);
  try {
    switch (data[0] % 3) {
      case 0: {
        const ib::ListenInfo info = ib::decodeListenInfo(ConnectHandle(bytes), 0, 1);
        (void)ib::encodeListenInfo(info);
        break;
      }
      case 1: {
        const ib::Hello h = ib::decodeHello(bytes);
        (void)ib::geometryText(h.geometry);
        break;
      }
      default:
        (void)ib::decodeReply(bytes, static_cast<uint32_t>(data[0] >> 2));
        break;
    }
  } catch (const Error&) {
  }
  return 0;
}
