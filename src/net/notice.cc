#include "net/notice.h"

#include <algorithm>

#include "core/error.h"
#include "net/wire.h"

namespace tidal::wire {

std::vector<uint8_t> encodeNotice(const Notice& notice) {
  const size_t textBytes = std::min(notice.text.size(), kMaxNoticeTextBytes);
  std::vector<uint8_t> body;
  body.reserve(kNoticeFixedBytes + textBytes);
  Writer w(body);
  w.u16(static_cast<uint16_t>(notice.kind));
  w.u16(0);
  w.u32(static_cast<uint32_t>(notice.origin));
  w.u32(static_cast<uint32_t>(notice.code));
  w.u32(static_cast<uint32_t>(textBytes));
  w.bytes(notice.text.data(), textBytes);
  return body;
}

Notice decodeNotice(const uint8_t* body, size_t size, int nranks) {
  Reader r(body, size, "notice");
  Notice n;
  const uint16_t kind = r.u16();
  (void)r.u16();
  const auto origin = static_cast<int32_t>(r.u32());
  const uint32_t code = r.u32();
  const uint32_t textBytes = r.u32();
  if (kind > static_cast<uint16_t>(Notice::Kind::Revoked)) {
    fail(tidalInvalidArgument, "notice: unknown kind {}", kind);
  }
  n.kind = static_cast<Notice::Kind>(kind);
  const bool noOrigin = n.kind == Notice::Kind::None && origin == -1;
  if (!noOrigin && (origin < 0 || origin >= nranks)) {
    fail(tidalInvalidArgument, "notice: origin rank {} is not in 0..{}", origin, nranks - 1);
  }
  n.origin = origin;
  if (code >= static_cast<uint32_t>(tidalNumResults)) {
    fail(tidalInvalidArgument, "notice: result code {} is not one of tidal's", code);
  }
  n.code = static_cast<tidalResult_t>(code);
  if (textBytes > kMaxNoticeTextBytes || textBytes != r.left()) {
    fail(tidalInvalidArgument, "notice: text of {} bytes where {} remain (at most {})", textBytes,
         r.left(), kMaxNoticeTextBytes);
  }
  n.text.resize(textBytes);
  r.bytes(n.text.data(), textBytes);
  for (char& c : n.text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return n;
}

}  // namespace tidal::wire
