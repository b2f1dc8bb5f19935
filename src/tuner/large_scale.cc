#include "tuner/large_scale.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <set>
#include <vector>

#include "core/error.h"

namespace tidal::tuner {

namespace {

bool powerOfTwo(int v) { return v > 0 && (v & (v - 1)) == 0; }

// Every rank's topology differs from rank 0's only in where the rank is:
// built once, then moved from rank to rank.
class LayoutTopology {
 public:
  explicit LayoutTopology(HostLayout layout) : perHost_(layout.ranksPerHost) {
    std::vector<std::string> keys;
    keys.reserve(static_cast<size_t>(layout.nranks()));
    for (int r = 0; r < layout.nranks(); ++r) keys.push_back(fmt::format("h{}", r / perHost_));
    topology_ = coll::Topology::fromHostKeys(keys, 0);
  }
  const coll::Topology& of(int rank) {
    topology_.myHost = rank / perHost_;
    topology_.myLocal = rank % perHost_;
    return topology_;
  }

 private:
  int perHost_;
  coll::Topology topology_;
};

// Where rank x's peers are when it is host 0's rank `x % P` moved `host` hosts.
int moved(RankMap::Kind kind, int peer, int host, HostLayout layout) {
  const int offset = host * layout.ranksPerHost;
  if (kind == RankMap::Kind::HostXor) return peer ^ offset;
  return (peer + offset) % layout.nranks();
}

// The first way `other` (rank x) differs from `rep` moved to x's host, or "".
std::string firstDifference(const coll::Schedule& rep, const coll::Schedule& other,
                            RankMap::Kind kind, int host, HostLayout layout) {
  if (rep.sends.size() != other.sends.size() || rep.recvs.size() != other.recvs.size() ||
      rep.recvCopies.size() != other.recvCopies.size() ||
      rep.prologue.size() != other.prologue.size()) {
    return fmt::format(
        "{} sends, {} receives, {} local copies where its host 0 counterpart has "
        "{}, {}, {}",
        other.sends.size(), other.recvs.size(), other.recvCopies.size() + other.prologue.size(),
        rep.sends.size(), rep.recvs.size(), rep.recvCopies.size() + rep.prologue.size());
  }
  for (size_t i = 0; i < rep.sends.size(); ++i) {
    const auto &a = rep.sends[i], &b = other.sends[i];
    if (b.peer != moved(kind, a.peer, host, layout) || a.bytes != b.bytes ||
        a.afterRecv != b.afterRecv) {
      return fmt::format("send {} goes to rank {} ({} bytes, after receive {})", i, b.peer, b.bytes,
                         b.afterRecv);
    }
  }
  for (size_t i = 0; i < rep.recvs.size(); ++i) {
    const auto &a = rep.recvs[i], &b = other.recvs[i];
    if (b.peer != moved(kind, a.peer, host, layout) || a.bytes != b.bytes || a.reduce != b.reduce ||
        a.afterSend != b.afterSend) {
      return fmt::format("receive {} comes from rank {} ({} bytes)", i, b.peer, b.bytes);
    }
  }
  for (size_t i = 0; i < rep.recvCopies.size(); ++i) {
    if (rep.recvCopies[i].afterRecv != other.recvCopies[i].afterRecv ||
        rep.recvCopies[i].copy.bytes != other.recvCopies[i].copy.bytes) {
      return fmt::format("local copy {} differs", i);
    }
  }
  for (size_t i = 0; i < rep.prologue.size(); ++i) {
    if (rep.prologue[i].bytes != other.prologue[i].bytes) {
      return fmt::format("prologue copy {} differs", i);
    }
  }
  return "";
}

const char* kindName(RankMap::Kind kind) {
  switch (kind) {
    case RankMap::Kind::HostShift:
      return "host shift";
    case RankMap::Kind::HostXor:
      return "host xor";
    case RankMap::Kind::EveryRank:
      break;
  }
  return "every rank";
}

void checkLayout(HostLayout layout) {
  if (layout.hosts < 1 || layout.ranksPerHost < 1) {
    fail(tidalInvalidArgument, "tuner: {} hosts of {} ranks: both must be at least 1", layout.hosts,
         layout.ranksPerHost);
  }
}

// hostSymmetryOf's work on a topology the caller keeps; leaves host 0's
// schedules in `reps` for the caller to simulate.
std::optional<RankMap::Kind> symmetryOf(const coll::AnyRankBuilder& build,
                                        coll::CollectiveArgs args, HostLayout layout,
                                        LayoutTopology& topology, std::vector<coll::Schedule>& reps,
                                        std::string* why) {
  const int P = layout.ranksPerHost, H = layout.hosts;
  args.nranks = layout.nranks();
  reps.clear();
  for (int l = 0; l < P; ++l) {
    args.rank = l;
    reps.push_back(build(args, topology.of(l)));
  }
  // The hosts compared with host 0: neighbours, the middle, the last.
  std::set<int> samples;
  for (const int h : {1, 2, H / 2, H - 1})
    if (h > 0 && h < H) samples.insert(h);
  std::vector<RankMap::Kind> kinds{RankMap::Kind::HostShift};
  if (powerOfTwo(P) && powerOfTwo(H)) kinds.push_back(RankMap::Kind::HostXor);
  std::string differences;
  for (const RankMap::Kind kind : kinds) {
    std::string difference;
    for (const int h : samples) {
      for (int l = 0; l < P && difference.empty(); ++l) {
        args.rank = h * P + l;
        const std::string d = firstDifference(reps[static_cast<size_t>(l)],
                                              build(args, topology.of(args.rank)), kind, h, layout);
        if (!d.empty()) difference = fmt::format("rank {}: {}", args.rank, d);
      }
      if (!difference.empty()) break;
    }
    if (difference.empty()) return kind;
    differences +=
        fmt::format("{}{}: {}", differences.empty() ? "" : "; ", kindName(kind), difference);
  }
  if (why) *why = differences;
  return std::nullopt;
}

// Host 0's ranks simulated for all, when the schedules repeat.
std::optional<double> predictBySymmetry(const coll::AnyRankBuilder& build,
                                        const coll::CollectiveArgs& args, HostLayout layout,
                                        LayoutTopology& topology, const LinkModel& model,
                                        std::string* why, RankMap::Kind* kind) {
  std::vector<coll::Schedule> reps;
  const auto found = symmetryOf(build, args, layout, topology, reps, why);
  if (!found) return std::nullopt;
  RankMap map;
  map.kind = *kind = *found;
  map.nranks = layout.nranks();
  map.ranksPerHost = layout.ranksPerHost;
  return predictMicros(reps, map, model);
}

size_t operationsOf(const coll::Schedule& s) { return s.sends.size() + s.recvs.size(); }

}  // namespace

std::optional<RankMap::Kind> hostSymmetryOf(const coll::AnyRankBuilder& build,
                                            coll::CollectiveArgs args, HostLayout layout,
                                            std::string* why) {
  checkLayout(layout);
  LayoutTopology topology(layout);
  std::vector<coll::Schedule> reps;
  return symmetryOf(build, args, layout, topology, reps, why);
}

LargeScalePrediction predictAtScale(const coll::AnyRankBuilder& build, coll::CollectiveArgs args,
                                    HostLayout layout, const LinkModel& model, CountIs countIs,
                                    size_t operationBudget) {
  checkLayout(layout);
  const int n = layout.nranks();
  args.nranks = n;
  std::string why;
  RankMap::Kind kind{};
  LayoutTopology topology(layout);
  // Under a fat tree whose last leaf is short, host 0's leaf does not stand
  // for every leaf: rank by rank first, one host for all only beyond the
  // budget, and said to be approximate.
  const bool unequalLeaves = model.hostsPerLeaf > 0 && layout.hosts % model.hostsPerLeaf != 0;
  if (layout.hosts > 1 && !unequalLeaves) {
    if (const auto micros = predictBySymmetry(build, args, layout, topology, model, &why, &kind))
      return {micros, kindName(kind)};
  }
  // Rank by rank, when that fits the budget: judged from host 0's ranks and
  // the last rank before anything else is built.
  size_t most = 0;
  for (const int r : {0, layout.ranksPerHost - 1, n - 1}) {
    args.rank = r;
    most = std::max(most, operationsOf(build(args, topology.of(r))));
  }
  if (most * static_cast<size_t>(n) <= operationBudget) {
    std::vector<coll::Schedule> all;
    all.reserve(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      args.rank = r;
      all.push_back(build(args, topology.of(r)));
    }
    std::vector<int> hostOf(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) hostOf[static_cast<size_t>(r)] = r / layout.ranksPerHost;
    return {predictMicros(all, hostOf, model), "every rank"};
  }
  if (layout.hosts > 1 && unequalLeaves) {
    if (const auto micros = predictBySymmetry(build, args, layout, topology, model, &why, &kind)) {
      return {micros,
              fmt::format("{}, approximate (the last leaf holds {} of {} hosts; leaf 0 "
                          "stood for all)",
                          kindName(kind), layout.hosts % model.hostsPerLeaf, model.hostsPerLeaf)};
    }
  }
  // Too many: a size that does not cut evenly over the ranks (a ring's
  // segments of unequal length, empty ones skipped) breaks the repetition;
  // the next size up that cuts evenly is predicted instead, and says so.
  const size_t evenCount =
      (args.count + static_cast<size_t>(n) - 1) / static_cast<size_t>(n) * static_cast<size_t>(n);
  if (countIs == CountIs::Whole && layout.hosts > 1 && evenCount != args.count) {
    coll::CollectiveArgs even = args;
    even.count = evenCount;
    std::string evenWhy;
    if (const auto micros =
            predictBySymmetry(build, even, layout, topology, model, &evenWhy, &kind)) {
      return {micros, fmt::format("{} at {} elements (the next count that cuts evenly over the "
                                  "ranks)",
                                  kindName(kind), evenCount)};
    }
  }
  return {
      std::nullopt,
      fmt::format("not simulated: no host symmetry ({}), and about {} operations rank by "
                  "rank, over the budget of {} (a larger chunk size cuts them)",
                  why.empty() ? "one host" : why, most * static_cast<size_t>(n), operationBudget)};
}

}  // namespace tidal::tuner
