// One direction of a same-host connection: a shared byte ring (shm_ring.h)
// in a memfd segment, two eventfds for sleeping, and the unix socket the
// connection was set up over, kept open only so that the peer's death shows
// up as end-of-file on it.
//
// Data path: post() queues (pointer, bytes); progress() copies between the
// queued buffers and the ring in steps of at most one slot, publishing the
// counter after each step. Nothing on the data path makes a system call
// unless the other side said it is asleep. Every transfer starts at a
// 64-byte boundary of the byte stream (both sides skip the same padding), so
// a piece cut at the wrap-around or at a slot step is a whole number of
// elements: that is what lets a receive reduce straight out of the ring
// (postReduce) instead of copying into a staging slot first. A sender that
// finds the ring empty at a transfer start past its first 64 KiB restarts at
// the ring's beginning and says so in the control page, so runs of small
// transfers keep to the same few pages.
//
// Pull: a transfer of at least the segment's pullMinBytes starts with a
// TransferHeader (shm_ring.h). Where the receiver proved at set-up that it
// can read the sender's memory (process_vm_readv: same user, no seccomp or
// Yama rule against it), the header carries the sender's buffer address and
// the receiver copies the bytes straight out of it, into place or, for a
// reduce, through a cache-sized bounce buffer; the sender's transfer then
// completes when the receiver says it has read it (pullsDone). The sender
// does not wait for that before publishing its next transfers. Elsewhere the
// header says "inline" and the bytes follow in the ring as before.
//
// Packets: a transfer of at most kMaxPacketBytes goes through the packet
// area instead of the ring (shm_ring.h): a few cache lines, watched by the
// receiver, carry the bytes and the stamps that say they are there.
//
// Wakeups: a side that cannot proceed (sender: ring or packet lines full;
// receiver: nothing arrived) sets its sleeping flag in addPollFds(), re-reads the ring, and
// sleeps on its eventfd. The other side publishes, issues a seq_cst fence and
// reads the flag; if it is set it clears it and writes the eventfd. The
// fences on both sides order "flag store, counter load" against "counter
// store, flag load", so at least one side sees the other: no lost wakeup.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "transports/shm/fd_passing.h"
#include "transports/shm/shm_ring.h"
#include "transports/transport.h"

namespace tidal::shm {

class ShmConnection final : public Connection {
 public:
  enum class Direction { Send, Recv };

  struct Parts {
    UniqueFd socket;      // the set-up connection, watched for the peer's death
    Mapping segment;      // control page + ring
    UniqueFd dataReady;   // the receiver sleeps on it
    UniqueFd spaceReady;  // the sender sleeps on it
    // Receiver only: the sender's pid as this process sees it (SO_PEERCRED),
    // and whether this rank allows pulls (TIDAL_SHM_PULL_BYTES != 0).
    pid_t peerPid = 0;
    bool mayPull = false;
  };

  ShmConnection(int selfRank, int peer, Direction direction, Parts parts, std::string description);
  // A sender's buffers may change once it is gone: tells a pulling receiver.
  ~ShmConnection() override;

  int peer() const override { return peer_; }
  void post(void* data, size_t bytes) override;
  void postPayload(void* data, size_t bytes, bool singleCopy) override;
  bool canReduceOnArrival() const override { return direction_ == Direction::Recv; }
  void postReduce(void* dst, const void* local, size_t bytes,
                  const ArrivalReducer& reducer) override;
  bool progress() override;
  uint64_t completed() const override { return completed_; }
  uint64_t posted() const override { return posted_; }
  void addPollFds(std::vector<pollfd>& fds) const override;
  void publishCpu(int cpu) override {
    // Written only on a change: the peer reads this line while it waits.
    if (myCpu().load(std::memory_order_relaxed) != cpu)
      myCpu().store(cpu, std::memory_order_relaxed);
  }
  bool peerWaitsOnCpu(int cpu) const override {
    return cpu >= 0 && theirCpu().load(std::memory_order_relaxed) == cpu;
  }
  void abort() override;
  std::string describe() const override { return description_; }
  // Times this sender restarted at the ring's beginning (tests, logs).
  uint64_t restarts() const { return restarts_; }
  // Transfers this connection moved by pull (tests, logs).
  uint64_t pulls() const { return pulls_; }

 private:
  struct Piece {
    char* data;
    size_t left;
    // Receives that reduce: data[i] = local[i] OP incoming[i] (reducer set).
    const char* local = nullptr;
    const ArrivalReducer* reducer = nullptr;
    bool packet = false;     // moves as a packet (isPacket), not through the ring
    bool started = false;    // its start has been aligned in the stream
    bool framed = false;     // a TransferHeader leads it (framed() or payloadFramed())
    bool pullWanted = true;  // sender: pull it when the receiver may (else inline)
    // Pulled: the sender waits for pullsDone to reach `number`; the receiver
    // reads from `remote` in the sender's process.
    bool pulling = false;
    uint64_t number = 0;
    uint64_t remote = 0;
  };
  // Transfers start at this alignment of the byte stream.
  static constexpr uint64_t kTransferAlign = 64;
  // A sender that finds the ring empty at a transfer start this far into the
  // ring restarts at its beginning (RingControl::restartFrom).
  static constexpr uint64_t kRestartAfter = 64 * 1024;

  // Queues a piece whose framing post*() decided; whether it is a packet
  // follows from that and its size.
  void enqueue(Piece p);
  // Copies what fits; returns bytes moved.
  size_t moveSend();
  size_t moveRecv();
  // Sender: publishes p's header, pull or inline. Receiver: reads it.
  void writeHeader(Piece& p);
  void readHeader(Piece& p);
  // Sender: marks pulled pieces the receiver has finished; bytes retired.
  size_t retirePulled();
  // Receiver: reads the next part of a pulled transfer; bytes read.
  size_t pullStep(Piece& p);
  void readPeerMemory(char* into, uint64_t from, size_t bytes);
  // Receiver: whether the sender's memory can be read, decided once.
  void probePull();
  size_t move() { return direction_ == Direction::Send ? moveSend() : moveRecv(); }
  void popFinished();
  // Whether a transfer of `bytes` carries a TransferHeader.
  bool framed(size_t bytes) const { return pullMinBytes_ != 0 && bytes >= pullMinBytes_; }
  // Whether a transfer goes as a packet: small, and not framed (a framed
  // transfer is far larger; the check keeps the two kinds apart whatever
  // TIDAL_SHM_PULL_BYTES says).
  static bool isPacket(const Piece& p) {
    return !p.framed && p.left > 0 && p.left <= kMaxPacketBytes;
  }
  static size_t linesOf(size_t bytes) { return (bytes + kLineBytes - 1) / kLineBytes; }
  Packet& packetAt(uint64_t index) const {
    return reinterpret_cast<Packet*>(packets_)[index % kPackets];
  }
  // Sender: writes p as the next packet; false while its lines are unread.
  bool writePacket(Piece& p);
  // Receiver: whether the packet of `bytes` that starts at the next line has
  // arrived whole (throws if a line says another size).
  bool packetArrived(size_t bytes) const;
  // Receiver: takes the next packet into p; false until it has arrived.
  bool readPacket(Piece& p);
  // Whether a Send/Recv payload piece of `bytes` carries one.
  bool payloadFramed(size_t bytes) const {
    return framed(bytes) || (payloadPullMinBytes_ != 0 && bytes >= payloadPullMinBytes_);
  }
  // Wakes the other side if it said it sleeps.
  void wakePeer();
  std::atomic<int32_t>& myCpu() const {
    return direction_ == Direction::Send ? control_->senderCpu : control_->receiverCpu;
  }
  std::atomic<int32_t>& theirCpu() const {
    return direction_ == Direction::Send ? control_->receiverCpu : control_->senderCpu;
  }
  // True when the ring lets the queued work advance right now.
  bool canAdvance() const;
  // Throws RemoteError if the set-up socket shows the peer is gone.
  void checkPeer();
  [[noreturn]] void lost(const std::string& why) const;

  int selfRank_;
  int peer_;
  Direction direction_;
  Parts parts_;
  RingControl* control_;
  char* packets_;
  char* ring_;
  uint64_t capacity_;
  uint64_t step_;
  // The segment's pullMinBytes and payloadPullMinBytes (written once by the
  // sender before sharing).
  uint64_t pullMinBytes_;
  uint64_t payloadPullMinBytes_;
  std::string description_;

  std::deque<Piece> queue_;
  // Sender: pieces at the queue's front fully written to the ring or whose
  // pull header is published; the next one to move is queue_[written_].
  size_t written_ = 0;
  uint64_t pullsIssued_ = 0;  // sender
  uint64_t pullsDone_ = 0;    // receiver
  uint64_t pulls_ = 0;
  std::unique_ptr<char[]> bounce_;  // receiver: pulled bytes on their way to a reduce
  uint64_t posted_ = 0;
  uint64_t completed_ = 0;
  uint64_t bytesMoved_ = 0;
  uint64_t restarts_ = 0;
  // Our own counter (head for the sender, tail for the receiver) and the
  // last value seen of the other side's, re-read only when ours says stop.
  uint64_t mine_ = 0;
  uint64_t theirs_ = 0;
  // Packet lines written (sender) or taken (receiver), and the sender's last
  // look at packetsTaken, re-read only when the lines it needs seem in use.
  uint64_t packetsMine_ = 0;
  uint64_t packetsTheirs_ = 0;
  // Set by addPollFds when it raised our sleeping flag.
  mutable bool asleep_ = false;
  Clock::time_point lastPeerCheck_{};
  unsigned idleCalls_ = 0;  // progress() calls that moved nothing
  std::atomic<bool> aborted_{false};
};

}  // namespace tidal::shm
