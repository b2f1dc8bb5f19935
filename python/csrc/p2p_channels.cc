#include "p2p_channels.h"

#include <ATen/core/grad_mode.h>

namespace tidal_torch {

struct P2PChannels::Channel {
  int src = 0;
  int dst = 0;
  Comm comm;  // made by the first task
  std::exception_ptr initError;
  uint64_t issued = 0;  // tasks queued, and tasks ended (under mutex_)
  uint64_t ended = 0;
  std::unique_ptr<WorkQueue> queue;  // last: its thread ends before comm goes
};

P2PChannels::P2PChannels(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                         std::chrono::milliseconds timeout)
    : store_(std::move(store)), rank_(rank), size_(size), timeout_(timeout) {}

P2PChannels::~P2PChannels() = default;

P2PChannels::Channel& P2PChannels::channel(bool sending, int peer) {
  const auto key = sending ? std::pair{rank_, peer} : std::pair{peer, rank_};
  auto& slot = channels_[key];
  if (!slot) {
    slot = std::make_unique<Channel>();
    slot->src = key.first;
    slot->dst = key.second;
    slot->queue = std::make_unique<WorkQueue>("tidal-p2p");
  }
  return *slot;
}

c10::intrusive_ptr<TidalWork> P2PChannels::submit(bool sending, int peer, c10d::OpType type,
                                                  const char* what, TensorList outputs, Run run) {
  auto work = c10::make_intrusive<TidalWork>(rank_, type, what, std::move(outputs));
  std::lock_guard lock(mutex_);
  Channel& ch = channel(sending, peer);
  ++ch.issued;
  // In the channel's communicator the sender is rank 0, the receiver rank 1.
  const int me = sending ? 0 : 1;
  ch.queue->push([this, &ch, work, me, run = std::move(run)] {
    std::exception_ptr error;
    try {
      if (!ch.comm.get() && !ch.initError) {
        try {
          const std::string key =
              "tidal_p2p_" + std::to_string(ch.src) + "_" + std::to_string(ch.dst);
          ch.comm = rendezvous(store_, key, me, 2, timeout_);
        } catch (...) {
          ch.initError = std::current_exception();
        }
      }
      if (ch.initError) std::rethrow_exception(ch.initError);
      at::NoGradGuard noGrad;
      run(ch.comm.get(), 1 - me);
    } catch (...) {
      error = std::current_exception();
    }
    work->complete(error);
    {
      std::lock_guard done(mutex_);
      ++ch.ended;
    }
    ended_.notify_all();
  });
  return work;
}

P2PChannels::Mark P2PChannels::mark() {
  std::lock_guard lock(mutex_);
  Mark m;
  for (auto& [key, ch] : channels_) m.emplace_back(ch.get(), ch->issued);
  return m;
}

void P2PChannels::waitFor(const Mark& mark) {
  std::unique_lock lock(mutex_);
  for (const auto& [id, issued] : mark) {
    const auto* ch = static_cast<const Channel*>(id);
    ended_.wait(lock, [&] { return ch->ended >= issued; });
  }
}

}  // namespace tidal_torch
