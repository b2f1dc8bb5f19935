#include "tuner/schedule_time.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <iterator>
#include <map>
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

// How much of one shared link's capacity is booked over time: a step
// function, from each key until the next. Bookings end, so the last step is
// always zero.
class SharedLink {
 public:
  explicit SharedLink(double capacity) : capacity_(capacity) { used_.emplace(0.0, 0.0); }

  // The most in use over [from, from + length).
  double peak(double from, double length) const {
    double most = 0;
    for (auto it = std::prev(used_.upper_bound(from));
         it != used_.end() && it->first < from + length; ++it) {
      most = std::max(most, it->second);
    }
    return most;
  }

  // When the use next changes after `t` (the last step never changes).
  double nextChange(double t) const {
    const auto next = used_.upper_bound(t);
    return next == used_.end() ? t : next->first;
  }

  double capacity() const { return capacity_; }

  void book(double start, double rate, double length) {
    const double end = start + length;
    split(start);
    split(end);
    for (auto it = used_.find(start); it->first < end; ++it) it->second += rate;
  }

 private:
  void split(double t) {
    const auto at = std::prev(used_.upper_bound(t));
    if (at->first != t) used_.emplace_hint(std::next(at), t, at->second);
  }

  double capacity_;
  std::map<double, double> used_;  // from -> rate in use
};

// The fat tree above the hosts (link_model.h, hostsPerLeaf): each leaf's
// links to the spines as one SharedLink each way (up: leaving the leaf,
// down: entering it), with the capacity of the leaf's ranks' NICs divided by
// the oversubscription. A message between leaves books a rate on its source
// leaf's up link and its destination leaf's down link for as long as its
// bytes then take: its NIC rate where both have that much room throughout,
// else the room left, from the first moment there is any. The links' use is
// kept over time, not as a queue: the simulation is greedy (a rank that runs
// ahead books far into the future), and a message simulated later but
// flowing earlier must not wait behind it; so a non-blocking tree (1:1)
// delays nothing.
//
// Rank by rank, each message is one copy, and the first to book takes the
// room. When host 0's ranks stand for every host (RankMap's symmetric
// kinds), a message stands for one copy per host of its leaf, all at the
// same moment: the copies that leave the leaf (counted per destination)
// share its links and end together, and leaf 0 stands for every leaf. That
// needs equal leaves (large_scale.cc simulates rank by rank otherwise), and
// is a different approximation of sharing than the rank-by-rank one: they
// agree exactly where a round's copies fill the links evenly, and differ by
// up to 20% in the tests (large_scale_test) where copies finishing at
// different times let the next round start early.
class Fabric {
 public:
  Fabric(const RankMap& map, const LinkModel& m) : map_(map) {
    const int k = m.hostsPerLeaf;
    if (k <= 0 || map.nranks <= 0) return;
    on_ = true;
    k_ = k;
    const double perRank = m.network.bytesPerUs / m.oversubscription;
    std::vector<double> capacity;  // per leaf: its links to the spines, each way
    if (map.kind == RankMap::Kind::EveryRank) {
      // Hosts by first appearance; leaves of k of them.
      std::unordered_map<int, int> ordinal;
      leafOfRank_.resize(static_cast<size_t>(map.nranks));
      for (int r = 0; r < map.nranks; ++r) {
        const int host = (*map.hostOfRank)[static_cast<size_t>(r)];
        const int o = ordinal.emplace(host, static_cast<int>(ordinal.size())).first->second;
        leafOfRank_[static_cast<size_t>(r)] = o / k;
      }
      const size_t leaves = (ordinal.size() + static_cast<size_t>(k) - 1) / static_cast<size_t>(k);
      capacity.assign(leaves, 0);
      for (const int leaf : leafOfRank_) capacity[static_cast<size_t>(leaf)] += perRank;
    } else {
      hosts_ = map.nranks / map.ranksPerHost;
      capacity.assign(1, std::min(k, hosts_) * map.ranksPerHost * perRank);
      copiesLeaving_.assign(static_cast<size_t>(hosts_), -1);
    }
    for (const double c : capacity) {
      up_.emplace_back(c);
      down_.emplace_back(c);
    }
    nicBytesPerUs_ = m.network.bytesPerUs;
  }

  bool on() const { return on_; }

  // When a message of `bytes` from (simulated) rank `from` to `to`, as from's
  // schedule names it, that starts flowing at `flowing`, is through the
  // spine links; negative when it stays inside its leaf.
  double cross(int from, int to, size_t bytes, double flowing) {
    size_t up = 0, down = 0;
    double copies = 1;
    if (map_.kind == RankMap::Kind::EveryRank) {
      up = static_cast<size_t>(leafOfRank_[static_cast<size_t>(from)]);
      down = static_cast<size_t>(leafOfRank_[static_cast<size_t>(to)]);
      if (up == down) return -1;
    } else {
      copies = copiesLeavingLeaf0(to / map_.ranksPerHost);
      if (copies == 0) return -1;
    }
    // The copies flow at their NIC rate where the links have room, else at
    // what is left, from the first moment anything is left on both: a
    // rate that holds for as long as the bytes then take.
    const double wanted = copies * nicBytesPerUs_;
    const double total = static_cast<double>(bytes) * copies;
    SharedLink& u = up_[up];
    SharedLink& d = down_[down];
    const double least = wanted * 1e-6;
    double start = flowing;
    for (;;) {
      double rate = wanted;
      for (int settle = 0; settle < 64; ++settle) {
        const double length = total / rate;
        const double room =
            std::min(u.capacity() - u.peak(start, length), d.capacity() - d.peak(start, length));
        if (room >= rate * (1 - 1e-9)) break;
        rate = room;
        if (rate < least) break;
      }
      if (rate >= least) {
        const double length = total / rate;
        u.book(start, rate, length);
        d.book(start, rate, length);
        return start + length;
      }
      // Nothing left now: try again where either link's use next drops.
      const double next = std::min(u.nextChange(start), d.nextChange(start));
      start = next > start ? next : std::max(u.nextChange(start), d.nextChange(start));
    }
  }

 private:
  // Of the hosts of leaf 0, how many send their copy of host 0's message to
  // `host` out of the leaf.
  int copiesLeavingLeaf0(int host) {
    int& n = copiesLeaving_[static_cast<size_t>(host)];
    if (n >= 0) return n;
    n = 0;
    for (int h = 0; h < std::min(k_, hosts_); ++h) {
      const int dest = map_.kind == RankMap::Kind::HostXor ? (host ^ h) : (host + h) % hosts_;
      n += dest / k_ != 0;
    }
    return n;
  }

  const RankMap& map_;
  bool on_ = false;
  int k_ = 0;
  int hosts_ = 0;
  std::vector<int> leafOfRank_;     // rank by rank
  std::vector<int> copiesLeaving_;  // symmetric, per destination host; -1 unknown
  double nicBytesPerUs_ = 0;
  std::vector<SharedLink> up_, down_;
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

  Fabric fabric(map, m);
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
    double finished = flowing + occupy;
    double alpha = c.alphaUs;
    if (cls == kNetwork && fabric.on()) {
      // Between leaves, the spine links may be the slower part.
      if (const double through = fabric.cross(r, op.peer, op.bytes, flowing); through >= 0) {
        finished = std::max(finished, through);
        alpha += m.spineAlphaUs;
      }
    }
    rr.out[cls] = peer.in[cls] = finished;
    rr.lastPost = next.at;
    const double arrives = finished + alpha;
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
