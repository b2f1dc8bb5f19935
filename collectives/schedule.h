// Collective algorithms as schedules.
//
// A schedule is what one rank does in one collective, written down before any
// byte moves: local copies to do first, the ordered list of transfers it sends
// (each possibly waiting for an earlier receive to land), and the ordered
// list of transfers it receives (each either stored or reduced into place).
// The engine (src/engine) executes schedules over transports; schedules do no
// I/O and include no transport header, so the same schedules can drive a
// simulator and be unit-tested by running them in memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tidal/tidal.h"

namespace tidal::coll {

// Which buffer an offset refers to. Scratch is a per-communicator buffer of
// Schedule::scratchBytes that holds partial results a rank forwards but does
// not keep (chain Reduce, ring ReduceScatter). Address: `offset` is itself a
// host address, for point-to-point groups whose every Send and Recv names a
// buffer of its own (such schedules are built per call and never cached).
enum class Buffer : uint8_t { Send, Recv, Scratch, Address };

struct BufferRef {
  Buffer buffer;
  size_t offset;  // bytes
};

// The address `ref` names, given where a run's three buffers are (on the host
// or on a device: it is only arithmetic). Send is read-only to schedules;
// the cast lets one pointer type serve sources and destinations.
inline char* resolveBuffer(const BufferRef& ref, const void* send, void* recv, char* scratch) {
  switch (ref.buffer) {
    case Buffer::Send:
      return const_cast<char*>(static_cast<const char*>(send)) + ref.offset;
    case Buffer::Recv:
      return static_cast<char*>(recv) + ref.offset;
    case Buffer::Scratch:
      return scratch + ref.offset;
    case Buffer::Address:
      return reinterpret_cast<char*>(static_cast<uintptr_t>(ref.offset));
  }
  return nullptr;
}

// A BufferRef to a host address (Buffer::Address).
inline BufferRef addressOf(const void* p) {
  return {Buffer::Address, static_cast<size_t>(reinterpret_cast<uintptr_t>(p))};
}

struct CopyOp {
  BufferRef src;
  BufferRef dst;
  size_t bytes;
};

// A local copy made while the schedule runs: once receive `afterRecv` has
// completed (receives complete in schedule order, so every earlier one has
// too), and before that receive counts as done, so a send that waits for it
// reads what the copy wrote. Bruck AllToAll moves the blocks it forwards from
// where they landed into the next round's outgoing message this way.
struct RecvCopy {
  int64_t afterRecv;
  CopyOp copy;
};

// Messages (a Send/Recv message, an AllToAll block) below this size let the
// receiver copy their payload pieces straight out of the sender's buffer where
// the transport can (SendOp::singleCopy; shm: one kernel copy instead of two
// through the ring). From here up the ring's two copies, pipelined through a
// ring that stays in cache, were faster on the development VM (16 MiB: 12.5
// against 10.2 GB/s; docs/benchmarks.md), while below it the single copy was
// up to 1.6x faster (256 KiB).
inline constexpr size_t kSingleCopyBelow = size_t{2} << 20;

struct SendOp {
  int peer;
  BufferRef src;
  size_t bytes;
  // Index into Schedule::recvs that must have completed (and been reduced)
  // before this send may start; -1 when it depends on nothing.
  int64_t afterRecv;
  // A Send/Recv payload piece (Connection::postPayload; its receive says so
  // too), and whether the receiver may copy it straight out of this buffer.
  bool payload = false;
  bool singleCopy = false;
};

struct RecvOp {
  int peer;
  BufferRef dst;
  size_t bytes;
  // false: the data lands in dst. true: dst = localInput OP data, divided by
  // `divisor` when non-zero (avg). The engine may combine such a receive as
  // its bytes arrive (shm) when localInput is in Buffer::Send and afterSend is
  // -1, so a schedule must guarantee that such a Send region still holds the
  // caller's input whenever this receive's data can arrive (in place, Send
  // aliases Recv: no op that can complete earlier may write it). Otherwise
  // the data lands in a staging slot and is reduced in schedule order.
  bool reduce;
  BufferRef localInput;
  int divisor;
  // Index into Schedule::sends that must have completed before the data is
  // reduced into dst (the send reads what the reduction overwrites); -1: none.
  int64_t afterSend = -1;
  // Sized messages (point-to-point, AllToAllv), where the two ranks' counts
  // are not fixed by the collective and may disagree. The sender first sends
  // the message's byte count as a uint64_t (a receive with `sizeLimit` set);
  // the receiver refuses a count above sizeLimit, naming both counts, instead
  // of truncating. Each later piece of the message names that receive in
  // `sizedBy` and moves min(bytes, count - messageOffset) bytes, none when the
  // sender's message is shorter than the receive.
  static constexpr size_t kNoLimit = SIZE_MAX;
  size_t sizeLimit = kNoLimit;
  int64_t sizedBy = -1;
  size_t messageOffset = 0;
  // A point-to-point message announces itself with a 56-byte header (a
  // CallSignature of kind Send, engine/call_signature.h) instead of a bare
  // size: the count and datatype, checked against `headerType` unless that
  // is -1, and, for a message of at most 16 bytes, the message itself, which
  // the engine copies to `inlineTo` (no piece follows then).
  bool messageHeader = false;
  int32_t headerType = -1;
  BufferRef inlineTo{};
  // When set (TIDAL_CHECK_CALLS), the header's message number must equal the
  // uint64_t at `numberAt` (host memory the caller fills per call): which of
  // this rank's receives from the peer this is, counted on the communicator.
  bool numbered = false;
  BufferRef numberAt{};
  // A Send/Recv payload piece (Connection::postPayload), as its send says.
  bool payload = false;
};

struct Schedule {
  std::vector<CopyOp> prologue;
  std::vector<RecvCopy> recvCopies;  // in afterRecv order
  std::vector<SendOp> sends;
  std::vector<RecvOp> recvs;
  size_t scratchBytes = 0;
  tidalDataType_t type = tidalFloat32;
  // The op the engine applies: avg arrives here as sum, with divisors set.
  tidalRedOp_t op = tidalSum;
  // Nonzero when the schedule is kept unchanged from now on (ScheduleCache),
  // unique in the process, and kept by copies: the engine may keep what it
  // derives from the schedule (its call-signature links) under this id.
  uint64_t stableId = 0;
};

struct CollectiveArgs {
  int rank;
  int nranks;
  size_t count;  // elements: total for AllReduce/Broadcast/Reduce; per rank for AllGather (send)
                 // and ReduceScatter (recv)
  tidalDataType_t type;
  tidalRedOp_t op;
  int root;
  size_t chunkBytes;  // pipeline granularity
  bool inPlace;
};

// Ring reduce-scatter then allgather, pipelined in chunks (ring_allreduce.cc).
Schedule ringAllReduce(const CollectiveArgs& args);
// Ring allgather and reduce-scatter, pipelined in chunks (ring_allgather.cc,
// ring_reduce_scatter.cc).
Schedule ringAllGather(const CollectiveArgs& args);
Schedule ringReduceScatter(const CollectiveArgs& args);
// Recursive halving ReduceScatter (halving_reduce_scatter.cc), for small
// blocks on many ranks: log2(p) steps (two more where n is not a power of
// two) instead of the ring's n - 1. Any n. Partners: rank pairs and
// halving partners, connected on first use.
Schedule halvingReduceScatter(const CollectiveArgs& args);
// Recursive doubling (recursive_doubling.cc): log2(n) exchanges of the whole
// buffer, for small messages where latency, not bandwidth, decides. Ranks
// beyond the largest power of two fold into a partner first.
Schedule recursiveDoublingAllReduce(const CollectiveArgs& args);
// Peers a rank exchanges with in recursiveDoublingAllReduce.
std::vector<int> recursiveDoublingPeers(int rank, int nranks);
// Rabenseifner (rabenseifner_allreduce.cc), for medium messages: recursive
// halving reduce-scatter, then recursive doubling allgather, 2 log2(p) steps
// moving 2(p-1)/p of the buffer. Same partners as recursive doubling
// (recursiveDoublingPeers), same folding of the ranks beyond p. Chunked:
// every reducing receive fits one staging slot.
Schedule rabenseifnerAllReduce(const CollectiveArgs& args);
// Double binary tree (double_binary_tree.cc): half the buffer reduced up and
// broadcast down each of two complementary binary trees, pipelined in chunks:
// about chunks + 2 log2(n) chunk times. Any n. Peers: doubleBinaryTreePeers
// (double_binary_tree.h).
Schedule doubleBinaryTreeAllReduce(const CollectiveArgs& args);
// Bruck AllGather (bruck_allgather.cc), for small blocks: ceil(log2 n)
// rounds, round k sending what the rank holds to rank - 2^k. Any n. Peers:
// binomialPeers.
Schedule bruckAllGather(const CollectiveArgs& args);
// Barrier by dissemination (dissemination_barrier.cc): ceil(log2 n) rounds of
// one byte, round k to rank + 2^k. Recv is the barrier buffer of n bytes.
// Peers: binomialPeers.
Schedule disseminationBarrier(const CollectiveArgs& args);

// Which ranks share a host, for hierarchical algorithms: hosts[h] lists the
// ranks of host h in ring order; every host has the same number of ranks.
struct Topology {
  std::vector<std::vector<int>> hosts;
  int myHost = 0;
  int myLocal = 0;
  // Groups ranks by host key (first appearance order, ranks ascending);
  // returns an empty topology (hosts.empty()) when hosts differ in size.
  static Topology fromHostKeys(const std::vector<std::string>& keyOfRank, int rank);
  bool hierarchical() const { return hosts.size() > 1 && hosts[0].size() > 1; }
};

// Hierarchical AllReduce (hierarchical.cc): ring reduce-scatter inside each
// host, ring AllReduce of each shard across hosts between ranks of the same
// local index, ring allgather inside each host. Only one copy of each reduced
// byte crosses between hosts. Requires topo.hierarchical().
Schedule hierarchicalAllReduce(const CollectiveArgs& args, const Topology& topo);
// Hierarchical AllGather (hierarchical_allgather.cc): ring allgather of own
// blocks across hosts between ranks of the same local index, then ring
// allgather of those "columns" inside each host.
Schedule hierarchicalAllGather(const CollectiveArgs& args, const Topology& topo);
// Hierarchical ReduceScatter (hierarchical_reduce_scatter.cc): ring
// reduce-scatter of columns inside each host, then ring reduce-scatter of each
// host-reduced column across hosts.
Schedule hierarchicalReduceScatter(const CollectiveArgs& args, const Topology& topo);
// Peers a rank talks to in every hierarchical schedule.
std::vector<int> hierarchicalPeers(const Topology& topo);

// Pipelined chains along the ring order, starting at (Broadcast) or ending at
// (Reduce) the root (chain.cc).
Schedule chainBroadcast(const CollectiveArgs& args);
Schedule chainReduce(const CollectiveArgs& args);
// The same over a binomial tree rooted at args.root
// (binomial_broadcast_reduce.cc), for small messages: ceil(log2 n) steps
// instead of the chain's n - 1 hops, at log2(n) copies through the root's
// link. Pipelined in chunks; each reducing receive is one chunk. Any n.
Schedule binomialBroadcast(const CollectiveArgs& args);
Schedule binomialReduce(const CollectiveArgs& args);
// Every peer those two talk to, whatever the root: rank +- 2^k (mod n). The
// communicator connects them at init, so that a rank left waiting by ranks
// that disagree about the root waits on a link that closes when they break
// off (tests/integration/mismatch_test.cc, ReduceRoot).
std::vector<int> binomialPeers(int rank, int nranks);

// Point-to-point and personalised exchanges (alltoall.cc, gather_scatter.cc,
// p2p.cc).

// AllToAll: block p of sendbuff (args.count elements) goes to rank p, block q
// of recvbuff comes from rank q. Pairwise exchange with staggered partners:
// step s sends to rank+s and receives from rank-s, so no rank is everybody's
// first target. In place (sendbuff == recvbuff) the input is copied to
// scratch first.
Schedule pairwiseAllToAll(const CollectiveArgs& args);
// Bruck AllToAll (bruck_alltoall.cc), for small blocks: ceil(log2 n) rounds
// instead of n - 1 messages. Round k sends to rank-2^k, in one message, every
// block it holds whose distance j (bound for rank - j) has bit k set, and
// receives the same distances from rank+2^k; blocks that still have to travel
// are copied into the next round's message (RecvCopy). Any n, in place or not.
Schedule bruckAllToAll(const CollectiveArgs& args);
// AllToAllv: counts and displacements in elements, one per rank. Every
// message carries its size (RecvOp::sizeLimit), so ranks whose counts
// disagree fail naming both instead of corrupting.
struct AllToAllvLayout {
  std::vector<size_t> sendCounts, sendDispls, recvCounts, recvDispls;
};
// `sizes` holds the size messages' values and must outlive the run.
Schedule pairwiseAllToAllv(const CollectiveArgs& args, const AllToAllvLayout& layout,
                           std::vector<uint64_t>& sizes);
// Gather / Scatter to or from args.root, args.count elements per rank: the
// root exchanges with every rank directly (one message each, chunked).
Schedule directGather(const CollectiveArgs& args);
Schedule directScatter(const CollectiveArgs& args);
// The same over a binomial tree rooted at args.root (binomial_gather_scatter.cc),
// for small blocks: the root exchanges ceil(log2 n) messages instead of n - 1,
// inner ranks forward whole subtrees (held in scratch) in log2(n) rounds.
Schedule binomialGather(const CollectiveArgs& args);
Schedule binomialScatter(const CollectiveArgs& args);

// The point-to-point operations one rank posted in a group on one
// communicator, in the order it posted them.
struct P2pOp {
  enum class Kind : uint8_t { Send, Recv };
  Kind kind;
  int peer;
  void* buffer;  // host or device address (all ops of a schedule: one kind)
  size_t bytes;
  tidalDataType_t type = tidalUint8;  // bytes is a whole number of these
  // Which of this rank's Sends to `peer` (or Recvs from it) on the
  // communicator this is, from 0: the k-th Send from A to B is B's k-th Recv
  // from A, and the header carries the number so that the receiver checks it.
  uint64_t number = 0;
};
// How a group's messages are framed (p2p.cc).
struct P2pFraming {
  size_t chunkBytes;
  // Messages of at most 16 bytes ride inside their header (host buffers: the
  // header is built from the payload when the schedule is made).
  bool inlineSmall;
  // Receives check the sender's datatype (TIDAL_CHECK_CALLS).
  bool checkTypes;
};
// Whether a Send of `bytes` travels inside its header.
bool p2pInlined(const P2pFraming& framing, size_t bytes);
// One Send or Recv with another rank, as p2pGroup would build it, but naming
// the caller's buffer as the run's send (Send) or receive (Recv) buffer, so
// that the schedule depends only on (kind, peer, bytes, type) and can be
// kept. A Send's header is read from `header` (a 56-byte CallSignature),
// which must hold the message's header when the schedule runs; a Recv that
// checks (framing.checkTypes) reads its expected message number from
// `recvNumber` when it runs.
Schedule p2pSingle(const P2pOp& op, const P2pFraming& framing, const void* header,
                   const uint64_t* recvNumber);
// One schedule for a whole group: each Send becomes a header and its payload
// in chunks, each Recv the matching sized receives; a rank's own sends to
// itself are copied to its receives from itself in posting order.
// `headers` holds the Sends' headers (8 words each), then the Recvs'
// expected message numbers (P2pOp::number), and must outlive the run.
// Throws InvalidUsage when self-sends and self-receives do not pair up.
Schedule p2pGroup(int rank, const std::vector<P2pOp>& ops, const P2pFraming& framing,
                  std::vector<uint64_t>& headers);

}  // namespace tidal::coll
