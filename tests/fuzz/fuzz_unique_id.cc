// libFuzzer harness: tidalUniqueId bytes as a launcher or a user may pass
// them (decodeUniqueId validates magic, version, family, port and secret).
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "bootstrap/unique_id.h"
#include "core/error.h"

using namespace tidal;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tidalUniqueId raw;
  std::memset(&raw, 0, sizeof raw);
  std::memcpy(raw.internal, data, size < sizeof raw.internal ? size : sizeof raw.internal);
  try {
    const UniqueId id = decodeUniqueId(raw);
    // What decodes must encode back to the same bytes' meaning.
    const UniqueId again = decodeUniqueId(encodeUniqueId(id));
    if (again.root.toString() != id.root.toString() || !secretsEqual(again.secret, id.secret)) {
      __builtin_trap();
    }
  } catch (const Error&) {
  }
  return 0;
}
