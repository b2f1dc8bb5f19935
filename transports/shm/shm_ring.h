// The layout of one shm connection's segment: a control page, then a byte
// ring of `slots x slotBytes`.
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
// Each counter and each sleeping flag sits on its own 128-byte line (two
// lines: adjacent-line prefetch would otherwise make them false-share).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace tidal::shm {

inline constexpr uint64_t kSegmentMagic = 0x54444c53484d3031ull;  // "TDLSHM01"
inline constexpr size_t kControlBytes = 4096;                     // data starts page aligned

struct alignas(128) RingControl {
  // Written once by the sender before the segment is shared.
  alignas(128) uint64_t magic;
  uint64_t slots;
  uint64_t slotBytes;
  // Bytes published by the sender (release) / consumed by the receiver.
  alignas(128) std::atomic<uint64_t> head;
  // The sender's last restart: the transfer that would have started at
  // stream position restartFrom starts at restartTo (the ring's beginning)
  // instead. Written before the head that covers it, on head's line, so the
  // receiver reads it with no extra cache miss. ~0 until the first restart.
  std::atomic<uint64_t> restartFrom;
  std::atomic<uint64_t> restartTo;
  alignas(128) std::atomic<uint64_t> tail;
  // Set by a side that is about to sleep in poll(); the other side, having
  // published, writes that side's eventfd only when its flag is set.
  alignas(128) std::atomic<uint32_t> receiverSleeping;
  alignas(128) std::atomic<uint32_t> senderSleeping;
};
static_assert(sizeof(RingControl) <= kControlBytes);
static_assert(std::atomic<uint64_t>::is_always_lock_free,
              "the ring's counters are shared between processes: they must be lock-free");
static_assert(std::atomic<uint32_t>::is_always_lock_free);

inline size_t segmentBytes(size_t slots, size_t slotBytes) {
  return kControlBytes + slots * slotBytes;
}

}  // namespace tidal::shm
