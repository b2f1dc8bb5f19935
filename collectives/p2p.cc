// A group's point-to-point operations as one schedule.
//
// NCCL's Send/Recv carry no tag: the k-th send from A to B matches B's k-th
// receive from A, on one communicator. Our connections keep post order per
// peer and direction, so keeping each rank's posting order per peer is all
// the matching needs. Because the counts of a pair are the two users' to get
// right, each Send is preceded by a 56-byte header (a CallSignature of kind
// Send): the receiver refuses a message longer than its receive (a
// truncation is an error naming both counts), takes a shorter one as it is,
// refuses another datatype when checking calls, and names a collective whose
// signature arrives instead. A message of at most 16 bytes of host memory
// rides inside its header: one transfer per small Send, as a collective's
// first small transfer rides inside its signature.
//
// Payload pieces are posted as such (Connection::postPayload): a transport
// may then move a piece of a message below kSingleCopyBelow (2 MiB) by one
// copy from the sender's buffer (shm pulls, TIDAL_SHM_P2P_PULL_BYTES).
//
// Every op of the group is posted at once, so any pattern completes without
// deadlock (everyone sending to everyone, rings in both directions); the
// engine moves whatever is ready on every connection in each round.
#include <cstring>

#include "collectives/ring_steps.h"
#include "core/dtype.h"
#include "core/error.h"
#include "engine/call_signature.h"

namespace tidal::coll {

namespace {

constexpr size_t kHeaderBytes = sizeof(CallSignature);
constexpr size_t kHeaderWords = kHeaderBytes / sizeof(uint64_t);
static_assert(kHeaderBytes % sizeof(uint64_t) == 0);

// A Send: its header (at `header`), then the payload in chunks unless the
// header carries it.
void appendSend(Schedule& s, int peer, BufferRef header, BufferRef payload, size_t bytes,
                size_t chunk, bool inlined) {
  s.sends.push_back({peer, header, kHeaderBytes, -1});
  if (inlined) return;
  for (size_t off = 0; off < bytes; off += chunk) {
    SendOp piece{peer, {payload.buffer, payload.offset + off}, std::min(chunk, bytes - off), -1};
    piece.payload = true;
    piece.singleCopy = bytes < kSingleCopyBelow;
    s.sends.push_back(piece);
  }
}

// A Recv of up to `bytes`: the header lands in the receive's own scratch,
// and each piece takes only what the announced size leaves for it (nothing
// when the message came inside the header).
void appendRecv(Schedule& s, int peer, BufferRef payload, size_t bytes, int32_t checkType,
                size_t chunk, const uint64_t* number) {
  const auto header = static_cast<int64_t>(s.recvs.size());
  RecvOp head{peer, {Buffer::Scratch, s.scratchBytes}, kHeaderBytes, false, {}, 0};
  head.sizeLimit = bytes;
  head.messageHeader = true;
  head.headerType = checkType;
  head.inlineTo = payload;
  if (number) {
    head.numbered = true;
    head.numberAt = addressOf(number);
  }
  s.recvs.push_back(head);
  s.scratchBytes += kHeaderBytes;
  for (size_t off = 0; off < bytes; off += chunk) {
    RecvOp piece{
        peer, {payload.buffer, payload.offset + off}, std::min(chunk, bytes - off), false, {}, 0};
    piece.sizedBy = header;
    piece.messageOffset = off;
    piece.payload = true;
    s.recvs.push_back(piece);
  }
}

size_t chunkOf(const P2pFraming& framing) { return std::max<size_t>(framing.chunkBytes, 1); }

int32_t checkTypeOf(const P2pFraming& framing, const P2pOp& op) {
  return framing.checkTypes ? static_cast<int32_t>(op.type) : -1;
}

}  // namespace

bool p2pInlined(const P2pFraming& framing, size_t bytes) {
  return framing.inlineSmall && bytes > 0 && bytes <= CallSignature::kInlineCapacity;
}

Schedule p2pSingle(const P2pOp& op, const P2pFraming& framing, const void* header,
                   const uint64_t* recvNumber) {
  Schedule s;
  s.type = tidalUint8;
  if (op.kind == P2pOp::Kind::Send) {
    appendSend(s, op.peer, addressOf(header), {Buffer::Send, 0}, op.bytes, chunkOf(framing),
               p2pInlined(framing, op.bytes));
  } else {
    appendRecv(s, op.peer, {Buffer::Recv, 0}, op.bytes, checkTypeOf(framing, op), chunkOf(framing),
               framing.checkTypes ? recvNumber : nullptr);
  }
  return s;
}

Schedule p2pGroup(int rank, const std::vector<P2pOp>& ops, const P2pFraming& framing,
                  std::vector<uint64_t>& headers) {
  Schedule s;
  s.type = tidalUint8;
  const size_t chunk = chunkOf(framing);
  // Every header is written before any address into `headers` is taken.
  // Then, after the headers, each receive's expected message number.
  size_t sends = 0, recvs = 0;
  for (const P2pOp& op : ops) {
    if (op.peer == rank) continue;
    (op.kind == P2pOp::Kind::Send ? sends : recvs) += 1;
  }
  headers.assign(sends * kHeaderWords + recvs, 0);
  size_t nextNumber = sends * kHeaderWords;
  // Self messages: the k-th self-send fills the k-th self-receive.
  std::vector<const P2pOp*> selfSends, selfRecvs;
  size_t nextHeader = 0;
  for (const P2pOp& op : ops) {
    if (op.peer == rank) {
      (op.kind == P2pOp::Kind::Send ? selfSends : selfRecvs).push_back(&op);
      continue;
    }
    if (op.kind == P2pOp::Kind::Send) {
      const bool inlined = p2pInlined(framing, op.bytes);
      const CallSignature h =
          CallSignature::sendHeader(op.bytes / typeSize(op.type), op.type, op.number,
                                    inlined ? op.buffer : nullptr, op.bytes);
      uint64_t* at = &headers[nextHeader++ * kHeaderWords];
      std::memcpy(at, &h, sizeof h);
      appendSend(s, op.peer, addressOf(at), addressOf(op.buffer), op.bytes, chunk, inlined);
    } else {
      uint64_t* number = &headers[nextNumber++];
      *number = op.number;
      appendRecv(s, op.peer, addressOf(op.buffer), op.bytes, checkTypeOf(framing, op), chunk,
                 framing.checkTypes ? number : nullptr);
    }
  }
  if (selfSends.size() != selfRecvs.size()) {
    fail(tidalInvalidUsage,
         "rank {}: the group posts {} send(s) to this rank itself but {} receive(s) from it; "
         "each self-send needs its self-receive in the same group",
         rank, selfSends.size(), selfRecvs.size());
  }
  for (size_t k = 0; k < selfSends.size(); ++k) {
    if (selfSends[k]->bytes > selfRecvs[k]->bytes) {
      fail(tidalInvalidUsage,
           "rank {}: self-send {} of the group has {} bytes but the matching self-receive only "
           "{}; it would be truncated",
           rank, k + 1, selfSends[k]->bytes, selfRecvs[k]->bytes);
    }
    if (selfSends[k]->bytes > 0)
      s.prologue.push_back(
          {addressOf(selfSends[k]->buffer), addressOf(selfRecvs[k]->buffer), selfSends[k]->bytes});
  }
  return s;
}

}  // namespace tidal::coll
