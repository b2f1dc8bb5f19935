// The layout of one shm connection's segment: a control page, the packet
// area (kPackets cache lines), then a byte ring of `slots x slotBytes`.
//
// Packets: a transfer of 1 to kMaxPacketBytes bytes (a call signature with
// its inline data, a small message's header or payload) does not go through
// the byte ring. It takes the next 1 to kMaxPacketLines of the area's
// kPackets 64-byte lines, kLineBytes (56) of its bytes in each, and in each
// line's last 8 bytes a stamp: the line's number (from 1, counting lines)
// and how many of the transfer's bytes it holds, stored after them. The
// receiver watches the transfer's lines, all of them in each look, so the
// cache misses overlap and a small transfer reaches it in about one
// cache-line transfer; through the ring it takes two in a row (the head
// counter's line, then the data's). A stamp is only ever written by the
// transfer that owns the line, so a stale line (zero, or a number kPackets
// back) can never pass for the expected one. Both sides tell a packet from a
// ring transfer, and how many lines it takes, by its size, which they agree
// on (transport.h). The receiver counts the lines it has taken in
// `packetsTaken`; the sender reuses a line only once that count says it was
// read.
//
// The ring is single-producer single-consumer. `head` counts bytes the sender
// has published, `tail` bytes the receiver has consumed; both only grow (64
// bits never wrap), so `head - tail` is the fill and no slot needs a length:
// the receiver posts exactly the sizes the sender posts (transport.h), so the
// byte stream needs no framing and small transfers pack tightly. "Slot" is the
// publishing step: the sender copies at most one slot's worth before it
// publishes `head`, so the receiver can copy out a large transfer while the
// sender is still copying it in.
//
// Large transfers (at least `pullMinBytes`, or Send/Recv payload pieces of at
// least `payloadPullMinBytes`) start with a 64-byte
// TransferHeader. It says whether the bytes follow in the ring (inline) or
// stay in the sender's buffer for the receiver to read straight out of the
// sender's address space with process_vm_readv (pull): one copy from buffer
// to buffer instead of one into the ring and one out of it. A pulled
// transfer completes for the sender when `pullsDone` reaches its number.
//
// Each counter and each sleeping flag sits on its own 128-byte line (two
// lines: adjacent-line prefetch would otherwise make them false-share).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace tidal::shm {

inline constexpr uint64_t kSegmentMagic = 0x54444c53484d3031ull;  // "TDLSHM01"
inline constexpr size_t kControlBytes = 4096;                     // data starts page aligned

// Packets (above): 128 lines, two pages, so that back-to-back small
// transfers cycle through the same few cache lines.
inline constexpr size_t kPacketBytes = 64;
inline constexpr size_t kLineBytes = kPacketBytes - sizeof(uint64_t);
inline constexpr size_t kPackets = 128;
inline constexpr size_t kPacketAreaBytes = kPackets * kPacketBytes;
// Eight lines (448 bytes): a small message's payload and an AllToAll block
// of a few hundred bytes go as packets too. Measured on the 2-core VM, four
// lines and eight gave the same latency up to 224 bytes, and eight took
// about 0.05 us off 256-byte Send/Recv and 512-byte AllToAll.
inline constexpr size_t kMaxPacketLines = 8;
inline constexpr size_t kMaxPacketBytes = kMaxPacketLines * kLineBytes;

struct alignas(kPacketBytes) Packet {
  unsigned char payload[kLineBytes];
  // (line number << 8) | bytes in this line, stored (release) after them.
  std::atomic<uint64_t> stamp;
};
static_assert(sizeof(Packet) == kPacketBytes);
static_assert(kLineBytes % 8 == 0, "a line holds whole elements of every datatype");

inline uint64_t packetStamp(uint64_t number, size_t bytes) { return number << 8 | bytes; }

struct alignas(128) RingControl {
  // Written once by the sender before the segment is shared.
  alignas(128) uint64_t magic;
  uint64_t slots;
  uint64_t slotBytes;
  // Transfers of at least this many bytes carry a TransferHeader; 0: none.
  uint64_t pullMinBytes;
  // Send/Recv payload pieces (Connection::postPayload) of at least this many
  // bytes carry one too, whatever pullMinBytes says; 0: none.
  uint64_t payloadPullMinBytes;
  // Where the receiver proves it can read the sender's memory: the 8 bytes
  // at probeAddress in the sender's process hold probeValue (random).
  uint64_t probeAddress;
  uint64_t probeValue;
  // Bytes published by the sender (release) / consumed by the receiver.
  alignas(128) std::atomic<uint64_t> head;
  // The sender's last restart: the transfer that would have started at
  // stream position restartFrom starts at restartTo (the ring's beginning)
  // instead. Written before the head that covers it, on head's line, so the
  // receiver reads it with no extra cache miss. ~0 until the first restart.
  std::atomic<uint64_t> restartFrom;
  std::atomic<uint64_t> restartTo;
  alignas(128) std::atomic<uint64_t> tail;
  // Pulled transfers the receiver has finished reading, on tail's line.
  std::atomic<uint64_t> pullsDone;
  // Packets the receiver has taken (read and done with), on tail's line.
  std::atomic<uint64_t> packetsTaken;
  // Set once by the receiver after its probe: kPullUnknown until then.
  std::atomic<uint32_t> pullAllowed;
  // Set by a sender that gives up (abort, close): its buffers may change
  // from now on, so a pull in progress must not complete.
  alignas(128) std::atomic<uint32_t> senderGone;
  // Set by a side that is about to sleep in poll(); the other side, having
  // published, writes that side's eventfd only when its flag is set.
  alignas(128) std::atomic<uint32_t> receiverSleeping;
  alignas(128) std::atomic<uint32_t> senderSleeping;
  // The CPU each side is in a long wait on, -1 when it is not waiting (set
  // before the segment is shared), written only on a change
  // (Connection::publishCpu): a side that finds the other waiting on its own
  // CPU moves to another one.
  alignas(128) std::atomic<int32_t> senderCpu;
  std::atomic<int32_t> receiverCpu;
};
static_assert(sizeof(RingControl) <= kControlBytes);
static_assert(std::atomic<uint64_t>::is_always_lock_free,
              "the ring's counters are shared between processes: they must be lock-free");
static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(std::atomic<int32_t>::is_always_lock_free);

enum PullState : uint32_t { kPullUnknown = 0, kPullYes = 1, kPullNo = 2 };

// The first 64 bytes of a transfer of at least pullMinBytes.
struct TransferHeader {
  static constexpr uint64_t kInline = 0x54444c494e4c4e31ull;  // "TDLINLN1": bytes follow
  static constexpr uint64_t kPull = 0x54444c50554c4c31ull;    // "TDLPULL1": read them
  uint64_t mode;
  uint64_t address;  // the sender's buffer (pull)
  uint64_t bytes;    // must equal the receive's size
  uint64_t number;   // the sender's count of pulled transfers, from 1 (pull)
  uint64_t reserved[4];
};
static_assert(sizeof(TransferHeader) == 64);

inline size_t segmentBytes(size_t slots, size_t slotBytes) {
  return kControlBytes + kPacketAreaBytes + slots * slotBytes;
}

}  // namespace tidal::shm
