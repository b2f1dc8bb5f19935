// The algorithms the tuner weighs for each collective, and their predicted
// times (schedule_time.h) for a size and a placement of ranks on hosts. The
// names are the values of the TIDAL_<COLL>_ALGO settings that force them.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "collectives/any_rank.h"
#include "tuner/link_model.h"

namespace tidal::tuner {

enum class Collective { AllReduce, AllGather, ReduceScatter, Broadcast, Reduce };
const char* collectiveName(Collective c);

// nranks ranks placed host by host, ranksPerHost on each (the last host may
// have fewer: then no hierarchical candidate).
struct Placement {
  int nranks;
  int ranksPerHost;
};

struct Estimate {
  std::string algorithm;
  bool applies;   // false: this size or placement rules the algorithm out
  double micros;  // when it applies
};

// One algorithm the tuner weighs: the builder whose schedules it runs.
struct Candidate {
  const char* name;
  coll::AnyRankBuilder build;
  bool hierarchical = false;  // applies only where hosts have equal rank counts
  bool oneChunk = false;      // applies only to messages of at most one chunk
};
// Every candidate for `c`, in a fixed order.
std::vector<Candidate> candidatesFor(Collective c);
// The element count (uint8 elements: schedules cut by bytes, whatever the
// type) of a call of `bytes` as below.
size_t elementsFor(Collective c, size_t bytes, int nranks);

// `bytes` is the size the *_perf tools print: the message for AllReduce,
// Broadcast and Reduce, the whole gathered (scattered) buffer for AllGather
// (ReduceScatter), whose blocks are bytes / nranks. Every candidate, in a
// fixed order, whether it applies or not; throws InvalidArgument for nranks < 1 or
// ranksPerHost < 1.
std::vector<Estimate> estimate(Collective c, size_t bytes, Placement placement, size_t chunkBytes,
                               const LinkModel& model);
// The same for ranks on the hosts hostOfRank names (equal ids: one host).
std::vector<Estimate> estimateOnHosts(Collective c, size_t bytes,
                                      const std::vector<int>& hostOfRank, size_t chunkBytes,
                                      const LinkModel& model);

}  // namespace tidal::tuner
