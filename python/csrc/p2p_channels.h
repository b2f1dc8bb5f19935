// Point-to-point for the backend: one two-rank communicator, and one thread,
// per direction and peer.
//
// torch lets a rank post isend and irecv in any order and wait for them
// later; Tidal's tidalSend/tidalRecv outside a group block until the peer
// takes part. Running them on the collectives' thread, in issue order, would
// deadlock the common exchange in which two ranks both send first. So each
// direction (this rank -> peer, peer -> this rank) has its own communicator
// and thread: a send waits only for the matching receive, and messages of
// one direction stay in order (tags are not used to match).
//
// A channel's communicator is made on first use, on the channel's thread,
// through the group's store (the sending rank puts the unique id), so a job
// that never sends pays nothing.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "backend.h"

namespace tidal_torch {

class P2PChannels {
 public:
  P2PChannels(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
              std::chrono::milliseconds timeout);
  ~P2PChannels();

  // run gets the channel's communicator and the peer's rank in it.
  using Run = std::function<void(tidalComm_t comm, int peer)>;
  // Queues run on the channel to (sending) or from peer.
  c10::intrusive_ptr<TidalWork> submit(bool sending, int peer, c10d::OpType type, const char* what,
                                       TensorList outputs, Run run);
  // What every channel has been given so far; waitFor(mark()) returns once
  // all of it has ended (a barrier's first step).
  using Mark = std::vector<std::pair<const void*, uint64_t>>;
  Mark mark();
  void waitFor(const Mark& mark);

 private:
  struct Channel;
  Channel& channel(bool sending, int peer);

  c10::intrusive_ptr<c10d::Store> store_;
  const int rank_;
  const int size_;
  const std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::condition_variable ended_;                                     // a channel's task has ended
  std::map<std::pair<int, int>, std::unique_ptr<Channel>> channels_;  // (src, dst)
};

}  // namespace tidal_torch
