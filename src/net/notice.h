// A notice: what a rank tells the next rank around the bootstrap ring when a
// call of its communicator fails, so that every rank learns why, not only
// the ranks that saw it happen.
//
// Why: when ranks disagree about a call, only the ranks that compare the two
// call signatures can name the mismatch; the others merely lose a connection
// as those ranks break off. A rank that found such a fault itself tells
// rank+1 (a Finding); a rank whose call failed on a lost connection or a
// timeout waits briefly for rank-1's notice and passes on a Finding it hears,
// so the explanation travels the ring behind the failure. Every failing rank
// sends exactly one notice (None when it has nothing to tell), so a rank
// waiting for its neighbour's word is answered in milliseconds, not at the
// end of the wait. A Revoked notice says a peer called tidalCommRevoke.
//
// Body (little-endian, after the wire header of type Notice): kind u16,
// reserved u16, origin rank i32, result code u32, text length u32, text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tidal/tidal.h"

namespace tidal::wire {

struct Notice {
  enum class Kind : uint16_t {
    None = 0,     // this rank's call failed; it has nothing to explain it
    Finding = 1,  // `origin` found the ranks' calls disagree: `text` says how
    Revoked = 2,  // `origin` revoked the communicator (tidalCommRevoke)
  };
  Kind kind = Kind::None;
  int32_t origin = -1;
  tidalResult_t code = tidalSuccess;
  std::string text;
};

inline constexpr size_t kNoticeFixedBytes = 16;
inline constexpr size_t kMaxNoticeTextBytes = 4096;

// The body; text longer than kMaxNoticeTextBytes is cut.
std::vector<uint8_t> encodeNotice(const Notice& notice);
// Throws InvalidArgument naming what is wrong: a length that does not add
// up, an unknown kind, an origin outside 0..nranks-1 (-1 for None), a
// result code outside tidal's. Control characters in the text become '?',
// so a peer's text cannot forge log lines.
Notice decodeNotice(const uint8_t* body, size_t size, int nranks);

}  // namespace tidal::wire
