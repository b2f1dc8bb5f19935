// libFuzzer harness: the bootstrap's wire format as a stranger could send it.
// A message header (decodeHeader + headerProblem against every message type),
// the root's hello body (rank, nranks, listen address) and an address table,
// read with wire::Reader, and a ring notice's body (wire::decodeNotice). A parser may refuse
// (tidal::Error); it must never crash, read out of bounds or invoke undefined behaviour.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "net/notice.h"
#include "net/wire.h"

using namespace tidal;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size >= wire::kHeaderBytes) {
    const wire::Header h = wire::decodeHeader(data);
    for (uint16_t t = 0; t <= 14; ++t) {
      (void)wire::headerProblem(h, static_cast<wire::MsgType>(t), h.length);
      (void)wire::headerProblem(h, static_cast<wire::MsgType>(t), size - wire::kHeaderBytes);
    }
    (void)wire::typeName(h.type);
  }
  try {
    // A notice from rank-1 of a 4-rank ring, its body after the header.
    const size_t skip = size >= wire::kHeaderBytes ? wire::kHeaderBytes : 0;
    (void)wire::decodeNotice(data + skip, size - skip, 4).text.size();
  } catch (const Error&) {
  }
  try {
    wire::Reader r(data, size, "fuzz hello");
    (void)r.u32();  // rank
    (void)r.u32();  // nranks
    (void)r.address().toString();
  } catch (const Error&) {
  }
  try {
    // An address table: as many addresses as the bytes hold, then a tail.
    wire::Reader r(data, size, "fuzz table");
    while (r.left() >= wire::kAddressBytes) (void)r.address().toString();
    uint8_t tail[wire::kAddressBytes];
    r.bytes(tail, r.left());
    (void)r.u16();
  } catch (const Error&) {
  }
  return 0;
}
