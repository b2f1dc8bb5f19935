// Runs the collective schedules of n ranks against each other in memory (no
// transport): every send is matched with the peer's next receive from it,
// sizes must agree, dependencies must never deadlock, and the tests check
// the results.
//
// Receives complete in schedule order; a completion reduces (receives that
// reduce keep their bytes until then) and makes the RecvCopy operations that
// wait for it. Where a receive that only stores its data lands is the
// engine's race, so it is the caller's choice: OnArrival, as soon as the
// matching send is made, whether or not earlier receives have completed (the
// engine posts such receives at once), which fails a schedule whose landing
// areas overlap data it still needs; or OnCompletion, as late as possible,
// which fails one that reads data (a send, a copy) before the receive that
// brings it has completed. Scratch carries guard bytes behind
// Schedule::scratchBytes that must survive.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <vector>

#include "collectives/schedule.h"
#include "core/dtype.h"
#include "reduce/reduce.h"

namespace tidal::coll::test {

constexpr size_t kScratchGuard = 64;
constexpr char kGuardByte = 0x5a;

struct RankState {
  Schedule schedule;
  std::vector<char> send, recv, scratch;
  // Where Buffer::Send and Buffer::Recv point (in-place calls alias them
  // into one vector); null: send.data() and recv.data().
  const char* sendAt = nullptr;
  char* recvAt = nullptr;
  // Simulation state.
  size_t nextSend = 0, nextRecv = 0, nextCopy = 0;
  std::vector<char> arrived, recvDone;
  std::vector<std::vector<char>> held;  // data that lands when its receive completes
};

enum class Landing { OnArrival, OnCompletion };

inline char* resolve(RankState& s, const BufferRef& ref) {
  return resolveBuffer(ref, s.sendAt ? s.sendAt : s.send.data(),
                       s.recvAt ? s.recvAt : s.recv.data(), s.scratch.data());
}

// Executes all ranks' schedules; returns false (with a gtest failure) on a
// size mismatch, a deadlock or a scratch overrun.
inline bool simulate(std::vector<RankState>& ranks, Landing landing = Landing::OnArrival) {
  const int n = static_cast<int>(ranks.size());
  // (receiver, sender) -> that receiver's receives from that sender, in order,
  // and how many of them have been matched with a send.
  std::map<std::pair<int, int>, std::vector<size_t>> recvsFrom;
  std::map<std::pair<int, int>, size_t> matched;
  for (int me = 0; me < n; ++me) {
    auto& r = ranks[static_cast<size_t>(me)];
    r.scratch.assign(r.schedule.scratchBytes + kScratchGuard, kGuardByte);
    r.arrived.assign(r.schedule.recvs.size(), 0);
    r.recvDone.assign(r.schedule.recvs.size(), 0);
    r.held.assign(r.schedule.recvs.size(), {});
    for (size_t i = 0; i < r.schedule.recvs.size(); ++i)
      recvsFrom[{me, r.schedule.recvs[i].peer}].push_back(i);
    for (const auto& c : r.schedule.prologue)
      std::memcpy(resolve(r, c.dst), resolve(r, c.src), c.bytes);
  }
  // Delivers one send's bytes to the receive that matches it.
  const auto deliver = [&](int from, int to, const char* p, size_t bytes) {
    auto& r = ranks[static_cast<size_t>(to)];
    const auto& list = recvsFrom[{to, from}];
    size_t& k = matched[{to, from}];
    if (k >= list.size()) {
      ADD_FAILURE() << "rank " << from << " sends rank " << to << " more messages than it receives";
      return false;
    }
    const size_t i = list[k++];
    const auto& op = r.schedule.recvs[i];
    if (op.bytes != bytes) {
      ADD_FAILURE() << "rank " << to << " receive " << i << " expects " << op.bytes
                    << " bytes, rank " << from << " sent " << bytes;
      return false;
    }
    if (op.reduce || landing == Landing::OnCompletion) {
      r.held[i].assign(p, p + bytes);
    } else {
      std::memcpy(resolve(r, op.dst), p, bytes);
    }
    r.arrived[i] = 1;
    return true;
  };
  for (;;) {
    bool moved = false, done = true;
    for (int me = 0; me < n; ++me) {
      auto& r = ranks[static_cast<size_t>(me)];
      while (r.nextSend < r.schedule.sends.size()) {
        const auto& op = r.schedule.sends[r.nextSend];
        if (op.afterRecv >= 0 && !r.recvDone[static_cast<size_t>(op.afterRecv)]) break;
        if (!deliver(me, op.peer, resolve(r, op.src), op.bytes)) return false;
        ++r.nextSend;
        moved = true;
      }
      while (r.nextRecv < r.schedule.recvs.size() && r.arrived[r.nextRecv]) {
        const auto& op = r.schedule.recvs[r.nextRecv];
        // A send here "completes" when it is delivered.
        if (op.afterSend >= 0 && static_cast<size_t>(op.afterSend) >= r.nextSend) break;
        if (op.reduce) {
          reduce(resolve(r, op.dst), resolve(r, op.localInput), r.held[r.nextRecv].data(),
                 op.bytes / typeSize(r.schedule.type), r.schedule.type, r.schedule.op, op.divisor);
        } else if (landing == Landing::OnCompletion) {
          std::memcpy(resolve(r, op.dst), r.held[r.nextRecv].data(), op.bytes);
        }
        const auto& copies = r.schedule.recvCopies;
        for (; r.nextCopy < copies.size() &&
               copies[r.nextCopy].afterRecv <= static_cast<int64_t>(r.nextRecv);
             ++r.nextCopy) {
          const CopyOp& c = copies[r.nextCopy].copy;
          std::memcpy(resolve(r, c.dst), resolve(r, c.src), c.bytes);
        }
        r.recvDone[r.nextRecv++] = 1;
        moved = true;
      }
      done = done && r.nextSend == r.schedule.sends.size() && r.nextRecv == r.schedule.recvs.size();
    }
    if (done) break;
    if (!moved) {
      ADD_FAILURE() << "schedules deadlocked";
      return false;
    }
  }
  for (int me = 0; me < n; ++me) {
    const auto& r = ranks[static_cast<size_t>(me)];
    EXPECT_EQ(r.nextCopy, r.schedule.recvCopies.size()) << "rank " << me << ": copies never made";
    const bool guarded = std::all_of(r.scratch.end() - kScratchGuard, r.scratch.end(),
                                     [](char b) { return b == kGuardByte; });
    if (!guarded) {
      ADD_FAILURE() << "rank " << me << " wrote past its " << r.schedule.scratchBytes
                    << " bytes of scratch";
      return false;
    }
  }
  for (const auto& [key, list] : recvsFrom) {
    EXPECT_EQ(matched[key], list.size())
        << "rank " << key.first << " never got " << list.size() - matched[key]
        << " messages from rank " << key.second;
  }
  return true;
}

}  // namespace tidal::coll::test
