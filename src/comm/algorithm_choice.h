// Which algorithm a collective runs: the rules, and the settings that steer
// them (TIDAL_ALLREDUCE_ALGO, TIDAL_ALLGATHER_ALGO, TIDAL_REDUCESCATTER_ALGO,
// TIDAL_ALLREDUCE_RD_BYTES), read and checked once per communicator.
//
// The rules are the default tuning: recursive doubling for AllReduce up to
// TIDAL_ALLREDUCE_RD_BYTES (it must also fit one staging slot: it sends the
// whole buffer at once), the hierarchical schedules when ranks span equal
// hosts, else the ring. A tuner with a cost model replaces this room.
#pragma once

#include <cstddef>
#include <string>

#include "collectives/schedule.h"

namespace tidal {

class AlgorithmChoice {
 public:
  enum class AllReduce { Ring, RecursiveDoubling, Hierarchical };

  // Reads and validates the settings; throws InvalidArgument naming the
  // variable, its value and the rank.
  static AlgorithmChoice fromParams(int rank);

  AllReduce allReduce(size_t bytes, size_t chunkBytes, const coll::Topology& topology) const;
  bool hierarchicalAllGather(const coll::Topology& topology) const {
    return allGather_ != "ring" && topology.hierarchical();
  }
  bool hierarchicalReduceScatter(const coll::Topology& topology) const {
    return reduceScatter_ != "ring" && topology.hierarchical();
  }

 private:
  size_t rdMaxBytes_ = 0;
  std::string allReduce_ = "auto";
  std::string allGather_ = "auto";
  std::string reduceScatter_ = "auto";
};

}  // namespace tidal
