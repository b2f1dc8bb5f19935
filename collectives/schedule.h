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
// not keep (chain Reduce, ring ReduceScatter).
enum class Buffer : uint8_t { Send, Recv, Scratch };

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
  }
  return nullptr;
}

struct CopyOp {
  BufferRef src;
  BufferRef dst;
  size_t bytes;
};

struct SendOp {
  int peer;
  BufferRef src;
  size_t bytes;
  // Index into Schedule::recvs that must have completed (and been reduced)
  // before this send may start; -1 when it depends on nothing.
  int64_t afterRecv;
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
};

struct Schedule {
  std::vector<CopyOp> prologue;
  std::vector<SendOp> sends;
  std::vector<RecvOp> recvs;
  size_t scratchBytes = 0;
  tidalDataType_t type = tidalFloat32;
  // The op the engine applies: avg arrives here as sum, with divisors set.
  tidalRedOp_t op = tidalSum;
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
// Recursive doubling (recursive_doubling.cc): log2(n) exchanges of the whole
// buffer, for small messages where latency, not bandwidth, decides. Ranks
// beyond the largest power of two fold into a partner first.
Schedule recursiveDoublingAllReduce(const CollectiveArgs& args);
// Peers a rank exchanges with in recursiveDoublingAllReduce.
std::vector<int> recursiveDoublingPeers(int rank, int nranks);

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

}  // namespace tidal::coll
