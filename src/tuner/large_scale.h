// Predictions at rank counts too large to hold every rank's schedule
// (tools/tidal-sim: up to the 16,384 ranks of the seed's cluster).
//
// A ring AllReduce at 16,384 ranks has 2 x 16,383 steps per rank, so the
// whole call is about half a billion operations: too many to build, let
// alone to simulate. But on equal hosts most schedules repeat from host to
// host: host h's rank l does what host 0's rank l does, with every peer moved
// by h hosts (around the host ring for the rings and the hierarchy, by XOR
// for the log-round schedules on powers of two). Where that holds, host 0's
// schedules are simulated alone (schedule_time.h, RankMap), which costs what
// one host's ranks cost, and gives every rank's times because on equal links
// every rank of a class does the same thing at the same moment.
//
// Whether a builder's schedules repeat is not assumed from its name: host 0's
// schedules are compared, operation by operation (peers, bytes,
// dependencies, local copies), with those of ranks on a few other hosts
// (hosts 1, 2, the middle one and the last). A schedule that does not repeat
// (a tree, which has a root; a ring whose segments differ in size) is
// simulated rank by rank when its operations fit a budget; beyond it, a size
// that merely does not cut evenly over the ranks is predicted at the next
// one that does (said in the method), and anything else is not predicted,
// with the reason.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "collectives/any_rank.h"
#include "tuner/link_model.h"
#include "tuner/schedule_time.h"

namespace tidal::tuner {

struct HostLayout {
  int hosts;
  int ranksPerHost;
  int nranks() const { return hosts * ranksPerHost; }
};

struct LargeScalePrediction {
  std::optional<double> micros;  // absent: not predicted (see why)
  // How: "host shift" / "host xor" (host 0's schedules stood for all),
  // "every rank", or what stopped it.
  std::string method;
};

// Operations (sends plus receives, over all ranks) that "every rank" may
// build before it gives up.
inline constexpr size_t kEveryRankOperationBudget = 12'000'000;

// How args.count relates to the ranks: the whole buffer, cut over them
// (AllReduce, Broadcast, Reduce), or each rank's block (AllGather,
// ReduceScatter), which no rounding may multiply by n.
enum class CountIs { Whole, PerRank };

// Predicts the call `build` makes with `args` (args.rank and args.nranks are
// set here) on `layout`. Throws InvalidArgument for an empty layout.
LargeScalePrediction predictAtScale(const coll::AnyRankBuilder& build, coll::CollectiveArgs args,
                                    HostLayout layout, const LinkModel& model,
                                    CountIs countIs = CountIs::Whole,
                                    size_t operationBudget = kEveryRankOperationBudget);

// Which symmetry, if any, the schedules of `build` have on `layout`
// (nullopt: none; `why` says which rank's schedule differs and where).
// Exposed for tests.
std::optional<RankMap::Kind> hostSymmetryOf(const coll::AnyRankBuilder& build,
                                            coll::CollectiveArgs args, HostLayout layout,
                                            std::string* why);

}  // namespace tidal::tuner
