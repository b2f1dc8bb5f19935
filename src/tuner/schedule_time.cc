#include "tuner/schedule_time.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <queue>
#include <unordered_map>

#include "core/error.h"

namespace tidal::tuner {

namespace {

enum LinkClass : size_t { kSameHost = 0, kNetwork = 1 };

struct RankRun {
  double start = 0;        // after the prologue
  double lastPost = 0;     // sends are posted in list order
  double out[2] = {0, 0};  // per link class: when its sending side is free
  double in[2] = {0, 0};   // per link class: when its receiving side is free
  double lastSendEnd = 0;  // when its last send has arrived
  size_t nextSend = 0, doneCount = 0, nextCopy = 0;
  bool sendQueued = false;
  std::vector<double> arrival;  // per receive; < 0 while unknown
  std::vector<double> done;     // per receive, for the first doneCount
};

struct ReadySend {
  double at;
  int rank;
  bool operator>(const ReadySend& o) const { return at != o.at ? at > o.at : rank > o.rank; }
};

}  // namespace

double predictMicros(const std::vector<coll::Schedule>& ss, const std::vector<int>& hostOfRank,
                     const LinkModel& m) {
  RankMap map;
  map.nranks = static_cast<int>(ss.size());
  map.hostOfRank = &hostOfRank;
  return predictMicros(ss, map, m);
}

double predictMicros(const std::vector<coll::Schedule>& ss, const RankMap& map,
                     const LinkModel& m) {
  // n: the schedules simulated (representatives); the call has map.nranks.
  const int n = static_cast<int>(ss.size());
  // (sender as the receiver's schedule names it, receiver) -> the
  // receiver's receives from that sender, in order.
  const auto key = [n](int from, int to) { return static_cast<int64_t>(from) * n + to; };
  std::unordered_map<int64_t, std::vector<size_t>> recvsFrom;
  std::unordered_map<int64_t, size_t> matched;
  std::vector<RankRun> run(ss.size());
  for (int r = 0; r < n; ++r) {
    const coll::Schedule& s = ss[static_cast<size_t>(r)];
    RankRun& rr = run[static_cast<size_t>(r)];
    rr.arrival.assign(s.recvs.size(), -1);
    rr.done.assign(s.recvs.size(), 0);
    for (size_t i = 0; i < s.recvs.size(); ++i) recvsFrom[key(s.recvs[i].peer, r)].push_back(i);
    for (const auto& copy : s.prologue)
      rr.start += static_cast<double>(copy.bytes) / m.copyBytesPerUs;
    rr.lastPost = rr.lastSendEnd = rr.start;
    rr.out[0] = rr.out[1] = rr.in[0] = rr.in[1] = rr.start;
  }

  // Sends are taken in the order they become ready, so that a receiver's
  // side serves them first come, first served.
  std::priority_queue<ReadySend, std::vector<ReadySend>, std::greater<>> ready;
  const auto queueNextSend = [&](int r) {
    const coll::Schedule& s = ss[static_cast<size_t>(r)];
    RankRun& rr = run[static_cast<size_t>(r)];
    if (rr.sendQueued || rr.nextSend >= s.sends.size()) return;
    const int64_t after = s.sends[rr.nextSend].afterRecv;
    if (after >= static_cast<int64_t>(rr.doneCount)) return;  // not yet
    const double at =
        std::max(rr.lastPost, after < 0 ? rr.start : rr.done[static_cast<size_t>(after)]);
    rr.sendQueued = true;
    ready.push({at, r});
  };
  // Completes the receives whose data has arrived, in order, then queues the
  // send they may have released.
  const auto advance = [&](int r) {
    const coll::Schedule& s = ss[static_cast<size_t>(r)];
    RankRun& rr = run[static_cast<size_t>(r)];
    while (rr.doneCount < s.recvs.size() && rr.arrival[rr.doneCount] >= 0) {
      const size_t i = rr.doneCount;
      const coll::RecvOp& op = s.recvs[i];
      double t = std::max(rr.arrival[i], i == 0 ? rr.start : rr.done[i - 1]);
      if (op.reduce) t += static_cast<double>(op.bytes) / m.reduceBytesPerUs;
      for (; rr.nextCopy < s.recvCopies.size() &&
             s.recvCopies[rr.nextCopy].afterRecv == static_cast<int64_t>(i);
           ++rr.nextCopy) {
        t += static_cast<double>(s.recvCopies[rr.nextCopy].copy.bytes) / m.copyBytesPerUs;
      }
      rr.done[i] = t;
      ++rr.doneCount;
    }
    queueNextSend(r);
  };

  for (int r = 0; r < n; ++r) advance(r);
  while (!ready.empty()) {
    const ReadySend next = ready.top();
    ready.pop();
    const int r = next.rank;
    RankRun& rr = run[static_cast<size_t>(r)];
    rr.sendQueued = false;
    const coll::SendOp& op = ss[static_cast<size_t>(r)].sends[rr.nextSend];
    const size_t cls = map.sameHost(r, op.peer) ? kSameHost : kNetwork;
    const LinkCost& c = cls == kSameHost ? m.sameHost : m.network;
    // The receiver, or the one that stands for it: the same thing happens
    // to every rank of its class at this moment.
    const int to = map.representative(op.peer);
    const int from = map.seenFrom(r, op.peer);
    RankRun& peer = run[static_cast<size_t>(to)];
    // The bytes flow once both the sender's and the receiver's side of this
    // link class are free, at the link's bandwidth, and land alpha later.
    const double occupy = static_cast<double>(op.bytes) / c.bytesPerUs;
    const double flowing = std::max({next.at, rr.out[cls], peer.in[cls]});
    rr.out[cls] = peer.in[cls] = flowing + occupy;
    rr.lastPost = next.at;
    const double arrives = flowing + occupy + c.alphaUs;
    rr.lastSendEnd = std::max(rr.lastSendEnd, arrives);
    const auto& list = recvsFrom[key(from, to)];
    size_t& k = matched[key(from, to)];
    if (k >= list.size()) {
      fail(tidalInternalError,
           "tuner: rank {} sends rank {} a message ({} bytes) that it never receives", r, op.peer,
           op.bytes);
    }
    peer.arrival[list[k++]] = arrives;
    ++rr.nextSend;
    advance(to);
    queueNextSend(r);
  }

  double end = 0;
  for (int r = 0; r < n; ++r) {
    const coll::Schedule& s = ss[static_cast<size_t>(r)];
    const RankRun& rr = run[static_cast<size_t>(r)];
    if (rr.doneCount < s.recvs.size() || rr.nextSend < s.sends.size()) {
      fail(tidalInternalError,
           "tuner: the schedules deadlock: rank {} stops at receive {} of {} (from rank {}) and "
           "send {} of {}",
           r, rr.doneCount, s.recvs.size(),
           rr.doneCount < s.recvs.size() ? s.recvs[rr.doneCount].peer : -1, rr.nextSend,
           s.sends.size());
    }
    end = std::max({end, rr.start, rr.lastSendEnd, s.recvs.empty() ? 0.0 : rr.done.back()});
  }
  return end;
}

std::vector<int> hostIdsOf(const std::vector<std::string>& keys) {
  std::vector<int> ids;
  ids.reserve(keys.size());
  for (const auto& key : keys) {
    ids.push_back(static_cast<int>(std::find(keys.begin(), keys.end(), key) - keys.begin()));
  }
  return ids;
}

std::vector<coll::Schedule> withMirroredPeers(const coll::Schedule& mine, int rank, int nranks) {
  std::vector<coll::Schedule> all(static_cast<size_t>(nranks));
  for (const coll::SendOp& send : mine.sends) {
    if (send.peer == rank) continue;  // its own receive is in `mine`
    coll::RecvOp recv{};
    recv.peer = rank;
    recv.bytes = send.bytes;
    all.at(static_cast<size_t>(send.peer)).recvs.push_back(recv);
  }
  for (const coll::RecvOp& recv : mine.recvs) {
    if (recv.peer == rank) continue;
    all.at(static_cast<size_t>(recv.peer)).sends.push_back({rank, {}, recv.bytes, -1});
  }
  all.at(static_cast<size_t>(rank)) = mine;
  return all;
}

}  // namespace tidal::tuner
