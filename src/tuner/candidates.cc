#include "tuner/candidates.h"

#include "collectives/any_rank.h"
#include "collectives/double_binary_tree.h"
#include "collectives/schedule.h"
#include "core/error.h"
#include "tuner/schedule_time.h"

namespace tidal::tuner {

const char* collectiveName(Collective c) {
  switch (c) {
    case Collective::AllReduce:
      return "AllReduce";
    case Collective::AllGather:
      return "AllGather";
    case Collective::ReduceScatter:
      return "ReduceScatter";
    case Collective::Broadcast:
      return "Broadcast";
    case Collective::Reduce:
      return "Reduce";
  }
  return "?";
}

using coll::flat;
using coll::withHosts;

std::vector<Candidate> candidatesFor(Collective c) {
  switch (c) {
    case Collective::AllReduce:
      return {{"ring", flat<coll::ringAllReduce>},
              {"rd", flat<coll::recursiveDoublingAllReduce>, false, true},
              {"rabenseifner", flat<coll::rabenseifnerAllReduce>},
              {"tree", flat<coll::doubleBinaryTreeAllReduce>},
              {"hier", withHosts<coll::hierarchicalAllReduce>, true}};
    case Collective::AllGather:
      return {{"ring", flat<coll::ringAllGather>},
              {"bruck", flat<coll::bruckAllGather>},
              {"hier", withHosts<coll::hierarchicalAllGather>, true}};
    case Collective::ReduceScatter:
      return {{"ring", flat<coll::ringReduceScatter>},
              {"halving", flat<coll::halvingReduceScatter>},
              {"hier", withHosts<coll::hierarchicalReduceScatter>, true}};
    case Collective::Broadcast:
      return {{"chain", flat<coll::chainBroadcast>}, {"tree", flat<coll::binomialBroadcast>}};
    case Collective::Reduce:
      return {{"chain", flat<coll::chainReduce>}, {"tree", flat<coll::binomialReduce>}};
  }
  return {};
}

size_t elementsFor(Collective c, size_t bytes, int nranks) {
  const bool blocks = c == Collective::AllGather || c == Collective::ReduceScatter;
  return blocks ? bytes / static_cast<size_t>(nranks) : bytes;
}

std::vector<Estimate> estimate(Collective c, size_t bytes, Placement p, size_t chunkBytes,
                               const LinkModel& model) {
  if (p.nranks < 1 || p.ranksPerHost < 1) {
    fail(tidalInvalidArgument, "tuner: {} ranks, {} per host: both must be at least 1", p.nranks,
         p.ranksPerHost);
  }
  std::vector<int> hostOf;
  for (int r = 0; r < p.nranks; ++r) hostOf.push_back(r / p.ranksPerHost);
  return estimateOnHosts(c, bytes, hostOf, chunkBytes, model);
}

std::vector<Estimate> estimateOnHosts(Collective c, size_t bytes, const std::vector<int>& hostOf,
                                      size_t chunkBytes, const LinkModel& model) {
  const int nranks = static_cast<int>(hostOf.size());
  if (nranks < 1) fail(tidalInvalidArgument, "tuner: no ranks");
  const size_t count = elementsFor(c, bytes, nranks);
  std::vector<std::string> keys;
  for (const int h : hostOf) keys.push_back("h" + std::to_string(h));
  // Each rank's view of the hosts, made once for every candidate (only the
  // hierarchical ones read it).
  std::vector<coll::Topology> topologies;
  for (int r = 0; r < nranks; ++r) topologies.push_back(coll::Topology::fromHostKeys(keys, r));
  const bool hierarchical = topologies[0].hierarchical();
  const coll::CollectiveArgs args{0, nranks, count, tidalUint8, tidalSum, 0, chunkBytes, false};
  std::vector<Estimate> out;
  for (const Candidate& cand : candidatesFor(c)) {
    if ((cand.oneChunk && bytes > chunkBytes) || (cand.hierarchical && !hierarchical)) {
      out.push_back({cand.name, false, 0});
      continue;
    }
    out.push_back({cand.name, true,
                   predictMicros(coll::everyRank(cand.build, args, topologies), hostOf, model)});
  }
  return out;
}

}  // namespace tidal::tuner
