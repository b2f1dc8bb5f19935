#include "comm/algorithm_choice.h"

#include <utility>

#include "core/error.h"
#include "core/params.h"

namespace tidal {

AlgorithmChoice AlgorithmChoice::fromParams(int rank) {
  AlgorithmChoice c;
  const int64_t rd = params::getInt("TIDAL_ALLREDUCE_RD_BYTES");
  if (rd < 0)
    fail(tidalInvalidArgument, "rank {}: TIDAL_ALLREDUCE_RD_BYTES={} is negative", rank, rd);
  c.rdMaxBytes_ = static_cast<size_t>(rd);
  c.allReduce_ = params::getString("TIDAL_ALLREDUCE_ALGO");
  if (c.allReduce_ != "auto" && c.allReduce_ != "ring" && c.allReduce_ != "rd" &&
      c.allReduce_ != "hier") {
    fail(tidalInvalidArgument,
         "rank {}: TIDAL_ALLREDUCE_ALGO='{}' is not one of auto, ring, rd, hier", rank,
         c.allReduce_);
  }
  for (auto [name, value] : {std::pair{"TIDAL_ALLGATHER_ALGO", &c.allGather_},
                             std::pair{"TIDAL_REDUCESCATTER_ALGO", &c.reduceScatter_}}) {
    *value = params::getString(name);
    if (*value != "auto" && *value != "ring" && *value != "hier") {
      fail(tidalInvalidArgument, "rank {}: {}='{}' is not one of auto, ring, hier", rank, name,
           *value);
    }
  }
  c.allToAll_ = readFlatOrRounds(rank, "TIDAL_ALLTOALL_ALGO", "pairwise", "bruck",
                                 "TIDAL_ALLTOALL_BRUCK_BYTES");
  c.gather_ =
      readFlatOrRounds(rank, "TIDAL_GATHER_ALGO", "direct", "tree", "TIDAL_GATHER_TREE_BYTES");
  c.scatter_ =
      readFlatOrRounds(rank, "TIDAL_SCATTER_ALGO", "direct", "tree", "TIDAL_SCATTER_TREE_BYTES");
  c.broadcast_ = readFlatOrRounds(rank, "TIDAL_BROADCAST_ALGO", "chain", "tree",
                                  "TIDAL_BROADCAST_TREE_BYTES", kTreeMinRanks);
  c.reduce_ = readFlatOrRounds(rank, "TIDAL_REDUCE_ALGO", "chain", "tree",
                               "TIDAL_REDUCE_TREE_BYTES", kTreeMinRanks);
  return c;
}

AlgorithmChoice::FlatOrRounds AlgorithmChoice::readFlatOrRounds(int rank, const char* algoName,
                                                                const char* flat,
                                                                const char* rounds,
                                                                const char* bytesName,
                                                                int minRanks) {
  FlatOrRounds c;
  c.minRanks = minRanks;
  const std::string algo = params::getString(algoName);
  if (algo != "auto" && algo != flat && algo != rounds) {
    fail(tidalInvalidArgument, "rank {}: {}='{}' is not one of auto, {}, {}", rank, algoName, algo,
         flat, rounds);
  }
  c.forced = algo != "auto";
  c.rounds = algo == rounds;
  const int64_t bytes = params::getInt(bytesName);
  if (bytes < 0) fail(tidalInvalidArgument, "rank {}: {}={} is negative", rank, bytesName, bytes);
  c.maxBytes = static_cast<size_t>(bytes);
  return c;
}

AlgorithmChoice::AllReduce AlgorithmChoice::allReduce(size_t bytes, size_t chunkBytes,
                                                      const coll::Topology& topology) const {
  // Recursive doubling sends the whole message in one staging slot, so it
  // must fit in a chunk.
  const bool rdFits = bytes <= chunkBytes;
  // "hier" on a single host (or uneven hosts) falls back to the ring.
  const AllReduce wide = topology.hierarchical() ? AllReduce::Hierarchical : AllReduce::Ring;
  if (allReduce_ == "rd" && rdFits) return AllReduce::RecursiveDoubling;
  if (allReduce_ == "ring") return AllReduce::Ring;
  if (allReduce_ == "hier") return wide;
  if (bytes <= rdMaxBytes_ && rdFits) return AllReduce::RecursiveDoubling;
  return wide;
}

}  // namespace tidal
