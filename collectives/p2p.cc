// A group's point-to-point operations as one schedule.
//
// NCCL's Send/Recv carry no tag: the k-th send from A to B matches B's k-th
// receive from A, on one communicator. Our connections keep post order per
// peer and direction, so keeping each rank's posting order per peer is all
// the matching needs. Because the counts of a pair are the two users' to get
// right, each Send is preceded by a size message: the receiver refuses a
// message longer than its receive (a truncation is an error naming both
// counts), and takes a shorter one as it is.
//
// Every op of the group is posted at once, so any pattern completes without
// deadlock (everyone sending to everyone, rings in both directions); the
// engine moves whatever is ready on every connection in each round.
#include "collectives/ring_steps.h"
#include "core/error.h"

namespace tidal::coll {

namespace {

// A Send: its size message (8 bytes at `size`), then the payload in chunks.
void appendSend(Schedule& s, int peer, BufferRef size, BufferRef payload, size_t bytes,
                size_t chunk) {
  s.sends.push_back({peer, size, sizeof(uint64_t), -1});
  for (size_t off = 0; off < bytes; off += chunk) {
    s.sends.push_back(
        {peer, {payload.buffer, payload.offset + off}, std::min(chunk, bytes - off), -1});
  }
}

// A Recv of up to `bytes`: the size lands in the receive's own scratch word,
// and each piece takes only what the announced size leaves for it.
void appendRecv(Schedule& s, int peer, BufferRef payload, size_t bytes, size_t chunk) {
  const auto header = static_cast<int64_t>(s.recvs.size());
  RecvOp size{peer, {Buffer::Scratch, s.scratchBytes}, sizeof(uint64_t), false, {}, 0};
  size.sizeLimit = bytes;
  s.recvs.push_back(size);
  s.scratchBytes += sizeof(uint64_t);
  for (size_t off = 0; off < bytes; off += chunk) {
    RecvOp piece{
        peer, {payload.buffer, payload.offset + off}, std::min(chunk, bytes - off), false, {}, 0};
    piece.sizedBy = header;
    piece.messageOffset = off;
    s.recvs.push_back(piece);
  }
}

}  // namespace

Schedule p2pSingle(const P2pOp& op, size_t chunkBytes, const uint64_t* sizeWord) {
  Schedule s;
  s.type = tidalUint8;
  const size_t chunk = std::max<size_t>(chunkBytes, 1);
  if (op.kind == P2pOp::Kind::Send) {
    appendSend(s, op.peer, addressOf(sizeWord), {Buffer::Send, 0}, op.bytes, chunk);
  } else {
    appendRecv(s, op.peer, {Buffer::Recv, 0}, op.bytes, chunk);
  }
  return s;
}

Schedule p2pGroup(int rank, const std::vector<P2pOp>& ops, size_t chunkBytes,
                  std::vector<uint64_t>& sizes) {
  Schedule s;
  s.type = tidalUint8;
  const size_t chunk = std::max<size_t>(chunkBytes, 1);
  sizes.clear();
  for (const P2pOp& op : ops)
    if (op.kind == P2pOp::Kind::Send && op.peer != rank) sizes.push_back(op.bytes);
  // Self messages: the k-th self-send fills the k-th self-receive.
  std::vector<const P2pOp*> selfSends, selfRecvs;
  size_t nextSize = 0;
  for (const P2pOp& op : ops) {
    if (op.peer == rank) {
      (op.kind == P2pOp::Kind::Send ? selfSends : selfRecvs).push_back(&op);
      continue;
    }
    if (op.kind == P2pOp::Kind::Send) {
      appendSend(s, op.peer, addressOf(&sizes[nextSize++]), addressOf(op.buffer), op.bytes, chunk);
    } else {
      appendRecv(s, op.peer, addressOf(op.buffer), op.bytes, chunk);
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
