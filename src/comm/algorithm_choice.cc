#include "comm/algorithm_choice.h"

#include <initializer_list>
#include <string>
#include <utility>

#include "core/error.h"
#include "core/params.h"

namespace tidal {

namespace {

size_t readBytes(int rank, const char* name) {
  const int64_t bytes = params::getInt(name);
  if (bytes < 0) fail(tidalInvalidArgument, "rank {}: {}={} is negative", rank, name, bytes);
  return static_cast<size_t>(bytes);
}

std::string readAlgorithm(int rank, const char* name, std::initializer_list<const char*> names) {
  std::string value = params::getString(name);
  std::string list;
  for (const char* n : names) {
    if (value == n) return value;
    list += list.empty() ? n : std::string(", ") + n;
  }
  fail(tidalInvalidArgument, "rank {}: {}='{}' is not one of {}", rank, name, value, list);
}

}  // namespace

AlgorithmChoice AlgorithmChoice::fromParams(int rank) {
  AlgorithmChoice c;
  c.rdMaxBytes_ = readBytes(rank, "TIDAL_ALLREDUCE_RD_BYTES");
  c.rabenseifnerMaxBytes_ = readBytes(rank, "TIDAL_ALLREDUCE_RABENSEIFNER_BYTES");
  c.bruckAllGatherMaxBytes_ = readBytes(rank, "TIDAL_ALLGATHER_BRUCK_BYTES");
  c.allReduce_ = readAlgorithm(rank, "TIDAL_ALLREDUCE_ALGO",
                               {"auto", "ring", "rd", "hier", "rabenseifner", "tree"});
  c.allGather_ = readAlgorithm(rank, "TIDAL_ALLGATHER_ALGO", {"auto", "ring", "hier", "bruck"});
  c.halvingReduceScatterMaxBytes_ = readBytes(rank, "TIDAL_REDUCESCATTER_HALVING_BYTES");
  c.reduceScatter_ =
      readAlgorithm(rank, "TIDAL_REDUCESCATTER_ALGO", {"auto", "ring", "hier", "halving"});
  c.tuner_ = readAlgorithm(rank, "TIDAL_TUNER", {"rules", "model"});
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

AlgorithmChoice::AllReduce AlgorithmChoice::allReduce(size_t bytes, size_t chunkBytes, int nranks,
                                                      const coll::Topology& topology) const {
  // Recursive doubling sends the whole message in one staging slot, so it
  // must fit in a chunk.
  const bool rdFits = bytes <= chunkBytes;
  // "hier" on a single host (or uneven hosts) falls back to the ring.
  const AllReduce wide = topology.hierarchical() ? AllReduce::Hierarchical : AllReduce::Ring;
  // Forced "rd" beyond a chunk takes what auto takes beyond its rules.
  if (allReduce_ == "rd") return rdFits ? AllReduce::RecursiveDoubling : wide;
  if (allReduce_ == "ring") return AllReduce::Ring;
  if (allReduce_ == "hier") return wide;
  if (allReduce_ == "rabenseifner") return AllReduce::Rabenseifner;
  if (allReduce_ == "tree") return AllReduce::DoubleBinaryTree;
  if (model_) {
    const std::string& pick = model_->pick(tuner::Collective::AllReduce, bytes);
    if (pick == "rd" && rdFits) return AllReduce::RecursiveDoubling;
    if (pick == "ring") return AllReduce::Ring;
    if (pick == "rabenseifner") return AllReduce::Rabenseifner;
    if (pick == "tree") return AllReduce::DoubleBinaryTree;
    if (pick == "hier") return wide;
  }
  if (bytes <= rdMaxBytes_ && rdFits) return AllReduce::RecursiveDoubling;
  if (wide == AllReduce::Ring && bytes <= rabenseifnerMaxBytes_ && nranks >= kLogStepsMinRanks)
    return AllReduce::Rabenseifner;
  return wide;
}

AlgorithmChoice::AllGather AlgorithmChoice::allGather(size_t blockBytes, int nranks,
                                                      const coll::Topology& topology) const {
  if (allGather_ == "ring") return AllGather::Ring;
  if (allGather_ == "bruck") return AllGather::Bruck;
  if (allGather_ == "auto" && model_) {
    const std::string& pick =
        model_->pick(tuner::Collective::AllGather, blockBytes * static_cast<size_t>(nranks));
    if (pick == "ring") return AllGather::Ring;
    if (pick == "bruck") return AllGather::Bruck;
    if (pick == "hier" && topology.hierarchical()) return AllGather::Hierarchical;
  }
  if (topology.hierarchical()) return AllGather::Hierarchical;  // "hier" or auto
  if (allGather_ == "auto" && blockBytes <= bruckAllGatherMaxBytes_ && nranks >= kLogStepsMinRanks)
    return AllGather::Bruck;
  return AllGather::Ring;
}

AlgorithmChoice::ReduceScatter AlgorithmChoice::reduceScatter(
    size_t blockBytes, int nranks, const coll::Topology& topology) const {
  if (reduceScatter_ == "ring") return ReduceScatter::Ring;
  if (reduceScatter_ == "halving") return ReduceScatter::Halving;
  if (topology.hierarchical()) return ReduceScatter::Hierarchical;  // "hier" or auto
  if (reduceScatter_ == "auto" && blockBytes <= halvingReduceScatterMaxBytes_ &&
      nranks >= kLogStepsMinRanks)
    return ReduceScatter::Halving;
  return ReduceScatter::Ring;
}

}  // namespace tidal
