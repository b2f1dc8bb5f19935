// Call signatures: what a rank believes the current collective is, sent ahead
// of its data on every link the collective uses.
//
// Collectives whose sizes follow from their arguments carry no per-message
// header (transport.h's ordering contract), so two ranks that disagree about
// a call (count, datatype, op, root, which collective, or how many calls came
// before) would otherwise read each other's bytes as data: success with wrong
// results, and every later call on those connections out of step. With
// checking on (TIDAL_CHECK_CALLS, the default), the engine sends this record
// as the first transfer of the call on each send connection and receives the
// peer's as the first transfer on each receive connection; it posts no data
// receive on a connection before the peer's record matched its own, so a
// mismatch is named on both sides' terms and the caller's buffers are not
// written with the other call's bytes.
//
// The record is fixed size, so the streams stay in step whatever the peer
// called: a record that arrives where data was expected (or data where a
// record was) shows as a bad magic value and is reported as such. The first
// eight bytes double as a marker that a sized receive (Send/Recv) recognises:
// a collective's record read as a message size is named as one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "tidal/tidal.h"

namespace tidal {

// Which collective a signature describes; the values travel on the wire.
enum class CallKind : uint32_t {
  AllReduce = 1,
  AllGather,
  ReduceScatter,
  Broadcast,
  Reduce,
  Barrier,
  AllToAll,
  AllToAllv,
  Gather,
  Scatter,
  // Not a collective: the header of a point-to-point message (sendHeader()).
  Send,
};

const char* callKindName(CallKind kind);

struct CallSignature {
  // "TIDALSIG" read as a little-endian integer; never a plausible message size.
  static constexpr uint64_t kMagic = 0x4749534c41444954ULL;
  // Wire fields not used by a collective hold these values.
  static constexpr int32_t kNone = -1;

  uint64_t magic = kMagic;
  uint64_t seq = 0;    // checked collectives called on this communicator before this one
                       // (shown 1-based: "call #1" is the first)
  uint64_t count = 0;  // elements, as the collective's count argument means them
  int32_t op = kNone;
  int32_t root = kNone;
  int16_t type = kNone;
  uint8_t kind = 0;  // CallKind
  // Where the caller's buffers are: 0 host memory, 1 device (CUDA) memory.
  // Part of the call: every rank of a collective must pass the same kind
  // (a device rank's connections cut transfers into staged pieces).
  uint8_t memory = 0;
  // Not part of the call: the sender's first data transfer on this link,
  // carried here when it is small and ready at the start (inlineBytes > 0),
  // so that a small collective moves one transfer per link, as it would
  // unchecked, and its data arrives with the record it is checked against.
  uint8_t inlineBytes = 0;
  uint8_t reserved[3] = {};
  static constexpr size_t kInlineCapacity = 16;
  unsigned char inlineData[kInlineCapacity] = {};

  static CallSignature make(CallKind kind, uint64_t seq, uint64_t count, int type, int op,
                            int root) {
    CallSignature s;
    s.seq = seq;
    s.count = count;
    s.kind = static_cast<uint8_t>(kind);
    s.type = static_cast<int16_t>(type);
    s.op = op;
    s.root = root;
    return s;
  }
  // The header that goes ahead of each Send's payload (collectives/p2p.cc):
  // the message's count and datatype, so that the receiver refuses a message
  // longer than its receive and (when checking calls) one of another
  // datatype, and recognises a collective's signature arriving instead. A
  // message of at most kInlineCapacity bytes of host memory travels inside
  // the header (`inlined`), so a small Send is one transfer. seq is the
  // message's number among the sender's Sends to this peer (P2pOp::number).
  static CallSignature sendHeader(uint64_t count, tidalDataType_t type, uint64_t number,
                                  const void* inlined, size_t inlineBytes);

  static constexpr uint8_t kHostMemory = 0;
  static constexpr uint8_t kDeviceMemory = 1;

  // "AllReduce(count 200, float32, sum)", with ", device buffers" when they
  // are. The inline data is not described,
  // nor compared by differences().
  std::string describe() const;
  // The fields in which `other` differs from this one, as "count, op", or
  // empty when the two describe the same call.
  std::string differences(const CallSignature& other) const;
};
// 56 bytes: on shm a transfer of at most 56 bytes travels as one cache-line
// packet with its sequence stamp (transports/shm/shm_ring.h), so a record and
// its inline data reach the peer in one cache-line transfer.
static_assert(sizeof(CallSignature) == 56, "a call signature is 56 bytes on the wire");

// One checked call as the engine runs it. A collective with a root also
// exchanges signatures around the ring (each rank sends to ringNext and
// receives from ringPrev, on top of its schedule's links): ranks that
// disagree about the root may otherwise have nothing to compare (two ranks
// that each think they are Reduce's root both only receive), and the ring
// makes some rank compare with a rank whose call differs whenever any does.
struct CallCheck {
  CallSignature signature;
  int ringNext = -1;  // -1: no ring exchange
  int ringPrev = -1;
};

// Whether two records describe the same call (what signatureMismatch checks
// first): inline, for the engine's per-call path, which must not pay for a
// function returning text when, as nearly always, the calls match.
inline bool sameCall(const CallSignature& a, const CallSignature& b) {
  return a.magic == b.magic && a.kind == b.kind && a.seq == b.seq && a.count == b.count &&
         a.type == b.type && a.op == b.op && a.root == b.root && a.memory == b.memory;
}

// Rank `self` ran `mine`; rank `peer` sent `theirs`. Empty when they match;
// otherwise the whole error text, naming both calls.
std::optional<std::string> signatureMismatch(int self, const CallSignature& mine, int peer,
                                             const CallSignature& theirs);

}  // namespace tidal
