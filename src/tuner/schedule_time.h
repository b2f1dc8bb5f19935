// Predicts how long a collective takes by running every rank's real schedule
// (collectives/schedule.h) over the modelled links (link_model.h): the
// steps, bytes and dependencies come from the schedule builders themselves,
// not from a formula kept beside them, so a new algorithm is modelled the
// moment it is written.
//
// The model: each rank runs its prologue copies first. Its sends are posted
// in list order, each once the receive it waits for is done. A message of b
// bytes flows once both the sender's sending side and the receiver's
// receiving side of its link class (same host, network) are free, holds both
// for b / beta, and lands alpha after it finishes flowing; sends are served
// in the order they became ready, so a receiver fed by several senders takes
// them one after another (a tree's root, an incast). Receives complete in
// list order, each when its data has landed and the previous one is done,
// plus b / reduce rate when it reduces and the cost of the local copies made
// after it. Messages match in order per (sender, receiver), as on the wire.
// The collective ends when the last rank's last receive or send is done.
// With a fat tree in the model (LinkModel::hostsPerLeaf), a message between
// leaves also occupies its leaves' shared links to the spines (schedule_time.cc,
// Fabric): oversubscription and contention there. Not modelled: staging-slot
// limits, the engine's per-call overhead (part of alpha), and links that are
// shared in other ways (a host's ranks behind one NIC).
#pragma once

#include <string>
#include <vector>

#include "collectives/schedule.h"
#include "tuner/link_model.h"

namespace tidal::tuner {

// schedules[r] is rank r's; hostOfRank[r] says which ranks share a host.
// Throws tidalInternalError naming the ranks when the schedules do not
// match (a message nobody receives) or deadlock.
double predictMicros(const std::vector<coll::Schedule>& schedules,
                     const std::vector<int>& hostOfRank, const LinkModel& model);

// Which rank's schedule stands for which: every rank its own (the call
// above), or, on H equal hosts of P ranks whose schedules repeat from host to
// host, host 0's P schedules for all (symmetric_time.h finds out whether they
// do). Host h's rank h*P + l then behaves as rank l does, with every peer
// moved by h hosts: along the host ring (HostShift: peer + h*P mod n) or
// by XOR (HostXor: peer ^ h*P, for the log-round schedules on powers of two).
// On equal links, every rank of such a class does the same thing at the
// same time, so simulating one of each gives everyone's times.
struct RankMap {
  enum class Kind { EveryRank, HostShift, HostXor };
  Kind kind = Kind::EveryRank;
  int nranks = 0;
  int ranksPerHost = 1;                          // the symmetric kinds
  const std::vector<int>* hostOfRank = nullptr;  // EveryRank

  // The rank whose schedule stands for `rank`'s.
  int representative(int rank) const {
    return kind == Kind::EveryRank ? rank : rank % ranksPerHost;
  }
  // `rank` seen from where `viewer` stands in for its representative: the
  // peer the representative's schedule names for it.
  int seenFrom(int rank, int viewer) const {
    if (kind == Kind::EveryRank) return rank;
    const int offset = viewer - viewer % ranksPerHost;
    if (kind == Kind::HostXor) return rank ^ offset;
    return (rank - offset + nranks) % nranks;
  }
  bool sameHost(int a, int b) const {
    if (kind == Kind::EveryRank) {
      return (*hostOfRank)[static_cast<size_t>(a)] == (*hostOfRank)[static_cast<size_t>(b)];
    }
    return a / ranksPerHost == b / ranksPerHost;
  }
};

// The same over `schedules` of the representatives (map.representative's
// values: every rank, or ranks 0..P-1).
double predictMicros(const std::vector<coll::Schedule>& schedules, const RankMap& map,
                     const LinkModel& model);

// Host keys (one per rank, equal keys for ranks of one host) as the small
// ids hostOfRank above takes: each key's first rank.
std::vector<int> hostIdsOf(const std::vector<std::string>& hostKeyOfRank);

// For a call whose other ranks' parts only they know (a group's Send/Recv,
// an AllToAllv's counts): every rank's schedule, `mine` at `rank` and each
// peer doing exactly the other side of it and nothing else: receiving, in
// order, what `mine` sends it, and sending, posted at once, what `mine`
// receives from it.
std::vector<coll::Schedule> withMirroredPeers(const coll::Schedule& mine, int rank, int nranks);

}  // namespace tidal::tuner
