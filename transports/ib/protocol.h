// What travels between the two ends of an ib connection.
//
// The listen handle lists the rank's rails: the NICs (device:port, with
// each port's address) it stripes its connections over, in NIC order.
//
// Set-up, over a TCP side channel to the address in the listen handle, once
// per rail (rail i of this rank pairs with rail i of the peer, over the
// first min(both counts) rails; see ib_rails_connection.h):
//   sender -> receiver  IbHello: job secret, both ranks, the rail (index,
//                       count used, count the sender offers), the sender's QPs
//                       (QPN, PSN), port address (LID, GID, MTU), CTS FIFO
//                       (address, rkey) and eager geometry;
//   receiver -> sender  IbReply: the receiver's QPs, port address and eager
//                       ring (address, rkey), or a Reject with the reason;
//   sender -> receiver  one byte once the sender's QPs are ready to receive,
//                       so the receiver never sends to a QP still in INIT.
// The socket then stays open and silent: it turns readable only when the
// peer process is gone, which is how a dead peer is noticed at once.
//
// Data, on RC QPs (the immediate's top two bits say what a write is):
//   CTS      receiver -> sender: RDMA WRITE_WITH_IMM of a CtsEntry (where
//            the next large transfer goes: address, rkey, size) into slot
//            i % kFifoDepth of the sender's FIFO; imm = index.
//   DATA     sender -> receiver: RDMA WRITE_WITH_IMM of a large transfer's
//            pieces straight into the advertised buffer, striped across
//            the connection's QPs; imm = transfer sequence number.
//   EAGER    sender -> receiver: a small transfer (<= TIDAL_IB_EAGER_BYTES)
//            written, inline when it fits, into slot e % slots of the
//            receiver's eager ring without waiting for a CTS; imm = e.
//   CREDIT   receiver -> sender: zero-byte WRITE_WITH_IMM; imm = how many
//            eager slots the receiver has consumed so far.
// Sequence numbers in immediates are counters modulo 2^30; the windows in
// flight are far smaller, so both ends recover the full values.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/socket.h"
#include "transports/ib/queue_pair.h"
#include "transports/transport.h"

namespace tidal::ib {

inline constexpr int kMaxQpsPerConnection = 16;
// NICs one rank stripes over; what fits the listen handle (kMaxConnectHandleBytes).
inline constexpr size_t kMaxRails = 4;
// A rail's name in the handle ("mlx5_0:1"), for log lines; longer ones are cut.
inline constexpr size_t kRailNameBytes = 16;
inline constexpr uint32_t kFifoDepth = 32;
inline constexpr uint32_t kEagerSlots = 16;
inline constexpr uint32_t kMaxEagerBytes = 64 * 1024;

enum class ImmKind : uint32_t { Data = 0, Eager = 1, Cts = 2, Credit = 3 };
inline constexpr uint32_t kImmValueMask = (1u << 30) - 1;

inline uint32_t makeImm(ImmKind kind, uint64_t value) {
  return (static_cast<uint32_t>(kind) << 30) | (static_cast<uint32_t>(value) & kImmValueMask);
}
inline ImmKind immKind(uint32_t imm) { return static_cast<ImmKind>(imm >> 30); }
inline uint32_t immValue(uint32_t imm) { return imm & kImmValueMask; }
// The full counter nearest above `floor` whose low 30 bits are `value`.
inline uint64_t widen(uint64_t floor, uint32_t value) {
  const uint64_t base = floor & ~uint64_t{kImmValueMask};
  uint64_t v = base | value;
  if (v < floor) v += uint64_t{kImmValueMask} + 1;
  return v;
}

// One clear-to-send: where the sender writes transfer `seq`.
struct CtsEntry {
  uint64_t seq;
  uint64_t addr;
  uint64_t bytes;
  uint32_t rkey;
  uint32_t reserved;
};
static_assert(sizeof(CtsEntry) == 32);

// One NIC a rank offers: its name for messages, and where its port is.
struct RailAddress {
  std::string name;  // "rxe0:1"
  PortAddress port;
};

// The listen handle: how to reach this rank's ib side channel, and its
// rails (1..kMaxRails). Empty when this rank offers no ib (no usable device).
struct ListenInfo {
  SocketAddress sideChannel;
  std::vector<RailAddress> rails;
};
ConnectHandle encodeListenInfo(const ListenInfo& info);
ListenInfo decodeListenInfo(const ConnectHandle& handle, int selfRank, int peer);

struct ConnectionGeometry {
  uint32_t nqps = 1;
  uint32_t eagerBytes = 0;
  uint32_t eagerSlots = kEagerSlots;
};

// "rxe0:1 RoCEv2 gid 1 mtu 1024 GDR off": one rail's path.
std::string pathText(const IbDevice& device, ibv_mtu pathMtu);
// "2 QPs, eager <= 8 KiB": what every rail of a connection shares.
std::string geometryText(const ConnectionGeometry& geometry);

// Which rail of a connection a hello sets up: rail `index` of `count`
// (the NICs both ranks have), `offered` being how many the sender has.
struct RailSlot {
  uint32_t index = 0;
  uint32_t count = 1;
  uint32_t offered = 1;
};

// " (rail 1 of 2, rxe1:1)" in names of multi-rail connections; "" for one rail.
std::string railText(const RailSlot& rail, const IbDevice& device);

struct Hello {
  int32_t fromRank = 0, toRank = 0;
  RailSlot rail;
  ConnectionGeometry geometry;
  PortAddress port;
  uint64_t fifoAddr = 0;
  uint32_t fifoRkey = 0;
  std::vector<QpEndpoint> qps;
};
// Payload bytes after the job secret.
inline constexpr size_t kPortAddressBytes = 16 + 16;
inline constexpr size_t kHelloBodyBytes = 24 + kPortAddressBytes + 12 + 8 * kMaxQpsPerConnection;
std::vector<uint8_t> encodeHello(const Secret& secret, const Hello& hello);
Hello decodeHello(const std::vector<uint8_t>& body);

struct Reply {
  PortAddress port;
  uint64_t eagerAddr = 0;
  uint32_t eagerRkey = 0;
  std::vector<QpEndpoint> qps;
};
inline constexpr size_t kReplyBytes = kPortAddressBytes + 20 + 8 * kMaxQpsPerConnection;
std::vector<uint8_t> encodeReply(const Reply& reply);
Reply decodeReply(const std::vector<uint8_t>& bytes, uint32_t nqps);

}  // namespace tidal::ib
