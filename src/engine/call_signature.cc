#include "engine/call_signature.h"

#include <fmt/format.h>

#include <cstring>

#include "core/dtype.h"

namespace tidal {

const char* callKindName(CallKind kind) {
  switch (kind) {
    case CallKind::AllReduce:
      return "AllReduce";
    case CallKind::AllGather:
      return "AllGather";
    case CallKind::ReduceScatter:
      return "ReduceScatter";
    case CallKind::Broadcast:
      return "Broadcast";
    case CallKind::Reduce:
      return "Reduce";
    case CallKind::Barrier:
      return "Barrier";
    case CallKind::AllToAll:
      return "AllToAll";
    case CallKind::AllToAllv:
      return "AllToAllv";
    case CallKind::Gather:
      return "Gather";
    case CallKind::Scatter:
      return "Scatter";
    case CallKind::Send:
      return "Send";
  }
  return "an unknown collective";
}

CallSignature CallSignature::sendHeader(uint64_t count, tidalDataType_t type, uint64_t number,
                                        const void* inlined, size_t inlineBytes) {
  CallSignature s = make(CallKind::Send, number, count, type, kNone, kNone);
  if (inlined && inlineBytes > 0 && inlineBytes <= kInlineCapacity) {
    std::memcpy(s.inlineData, inlined, inlineBytes);
    s.inlineBytes = static_cast<uint8_t>(inlineBytes);
  }
  return s;
}

namespace {

// Names of values that came off the wire: anything may be there.
std::string typeText(int32_t type) {
  return isValidType(type) ? typeName(static_cast<tidalDataType_t>(type))
                           : fmt::format("datatype {}", type);
}

std::string opText(int32_t op) {
  // PreMulSum operators are per-communicator handles above the built-in ones.
  if (op >= tidalNumOps) return fmt::format("premulsum op {}", op);
  return isValidOp(op) ? opName(static_cast<tidalRedOp_t>(op)) : fmt::format("op {}", op);
}

}  // namespace

std::string CallSignature::describe() const {
  std::string s = fmt::format("{}(", callKindName(static_cast<CallKind>(kind)));
  const char* sep = "";
  auto add = [&](const std::string& part) {
    s += sep;
    s += part;
    sep = ", ";
  };
  if (static_cast<CallKind>(kind) != CallKind::Barrier &&
      static_cast<CallKind>(kind) != CallKind::AllToAllv)
    add(fmt::format("count {}", count));
  if (type != kNone) add(typeText(type));
  if (op != kNone) add(opText(op));
  if (root != kNone) add(fmt::format("root {}", root));
  if (memory == kDeviceMemory) add("device buffers");
  if (memory != kDeviceMemory && memory != kHostMemory) add(fmt::format("memory kind {}", memory));
  return s + ")";
}

std::string CallSignature::differences(const CallSignature& other) const {
  std::string out;
  auto note = [&](bool differs, const char* what) {
    if (!differs) return;
    if (!out.empty()) out += ", ";
    out += what;
  };
  note(kind != other.kind, "collective");
  note(seq != other.seq, "call number");
  note(count != other.count, "count");
  note(type != other.type, "datatype");
  note(op != other.op, "op");
  note(root != other.root, "root");
  note(memory != other.memory, "host or device buffers");
  return out;
}

std::optional<std::string> signatureMismatch(int self, const CallSignature& mine, int peer,
                                             const CallSignature& theirs) {
  if (theirs.magic != CallSignature::kMagic) {
    return fmt::format(
        "rank {} called {} as call #{}, but what rank {} sent first on this link is not a "
        "collective's signature: rank {} is not in the same collective (it is in a Send/Recv, "
        "or called fewer or more collectives than rank {} before this one), or it disabled the "
        "check with TIDAL_CHECK_CALLS=0",
        self, mine.describe(), mine.seq + 1, peer, peer, self);
  }
  if (sameCall(mine, theirs)) return std::nullopt;
  if (static_cast<CallKind>(theirs.kind) == CallKind::Send) {
    return fmt::format(
        "rank {} sent a message, {}, where rank {} called {} as call #{}: the two ranks' calls "
        "are out of step (a Send/Recv against a collective)",
        peer, theirs.describe(), self, mine.describe(), mine.seq + 1);
  }
  const std::string differs = mine.differences(theirs);
  if (differs.empty()) return std::nullopt;
  return fmt::format(
      "mismatched collective: rank {} called {} as call #{}; rank {} called {} as call #{} (they "
      "differ in: {})",
      peer, theirs.describe(), theirs.seq + 1, self, mine.describe(), mine.seq + 1, differs);
}

}  // namespace tidal
