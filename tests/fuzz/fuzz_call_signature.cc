// libFuzzer harness: a call signature as it arrives from a peer (56 bytes on
// a data connection), described and compared with this rank's own call the
// way a mismatch report does. Besides "no crash, no undefined behaviour",
// it traps when the comparison contradicts itself: a record (with the right
// magic, as every record a rank makes has) matches itself; matching is
// symmetric; and the engine's fast check (sameCall) agrees with the full one
// that writes the error text (signatureMismatch), which names this rank's
// call always and the peer's whenever the peer's is a record.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "engine/call_signature.h"

using namespace tidal;

namespace {

void require(bool condition) {
  if (!condition) __builtin_trap();
}

// v + 1, wrapping (a peer's bytes may hold INT32_MAX).
int32_t next(int32_t v) { return static_cast<int32_t>(static_cast<uint32_t>(v) + 1u); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  CallSignature theirs;
  std::memcpy(&theirs, data, size < sizeof theirs ? size : sizeof theirs);
  const CallSignature mine = CallSignature::make(CallKind::AllReduce, 3, 1024, tidalFloat32,
                                                 tidalSum, CallSignature::kNone);
  const std::string described = theirs.describe();
  require(!described.empty());
  (void)theirs.differences(mine);
  (void)mine.differences(theirs);

  const bool record = theirs.magic == CallSignature::kMagic;
  require(sameCall(theirs, theirs));
  require(theirs.differences(theirs).empty());
  if (record) require(!signatureMismatch(0, theirs, 1, theirs));

  const bool same = sameCall(mine, theirs);
  require(same == sameCall(theirs, mine));
  const auto text = signatureMismatch(0, mine, 1, theirs);
  require(same == !text.has_value());
  if (text) {
    require(text->find(mine.describe()) != std::string::npos);
    if (record) require(text->find(described) != std::string::npos);
  }

  // Every field a call is compared by, changed alone, makes a different call
  // that both checks see and the text names (a field left out of either
  // would let that disagreement through silently).
  if (record) {
    for (int field = 0; field < 7; ++field) {
      CallSignature other = theirs;
      switch (field) {
        case 0:
          other.seq += 1;
          break;
        case 1:
          other.count += 1;
          break;
        case 2:
          other.kind += 1;
          break;
        case 3:
          other.type = next(other.type);
          break;
        case 4:
          other.op = next(other.op);
          break;
        case 5:
          other.root = next(other.root);
          break;
        default:
          other.memory += 1;
          break;
      }
      require(!sameCall(theirs, other));
      require(!theirs.differences(other).empty());
      require(signatureMismatch(0, theirs, 1, other).has_value());
    }
  }
  return 0;
}
