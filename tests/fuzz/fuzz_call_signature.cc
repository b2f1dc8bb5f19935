// libFuzzer harness: a call signature as it arrives from a peer (64 bytes on
// a data connection), described and compared with this rank's own call the
// way a mismatch report does.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "engine/call_signature.h"

using namespace tidal;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  CallSignature theirs;
  std::memcpy(&theirs, data, size < sizeof theirs ? size : sizeof theirs);
  const CallSignature mine = CallSignature::make(CallKind::AllReduce, 3, 1024, tidalFloat32,
                                                 tidalSum, CallSignature::kNone);
  (void)theirs.describe();
  (void)theirs.differences(mine);
  (void)mine.differences(theirs);
  return 0;
}
