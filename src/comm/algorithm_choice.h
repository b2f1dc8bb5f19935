// Which algorithm a collective runs: the rules, and the settings that steer
// them (TIDAL_ALLREDUCE_ALGO, TIDAL_ALLGATHER_ALGO, TIDAL_REDUCESCATTER_ALGO,
// TIDAL_ALLREDUCE_RD_BYTES, TIDAL_ALLREDUCE_RABENSEIFNER_BYTES,
// TIDAL_ALLGATHER_BRUCK_BYTES, TIDAL_REDUCESCATTER_HALVING_BYTES, TIDAL_ALLTOALL_ALGO,
// TIDAL_ALLTOALL_BRUCK_BYTES, TIDAL_GATHER_ALGO, TIDAL_GATHER_TREE_BYTES, TIDAL_SCATTER_ALGO,
// TIDAL_SCATTER_TREE_BYTES, TIDAL_BROADCAST_ALGO, TIDAL_BROADCAST_TREE_BYTES,
// TIDAL_REDUCE_ALGO, TIDAL_REDUCE_TREE_BYTES, TIDAL_TUNER), read and checked
// once per communicator.
//
// The rules are the default tuning: recursive doubling for AllReduce up to
// TIDAL_ALLREDUCE_RD_BYTES (it must also fit one staging slot: it sends the
// whole buffer at once), the hierarchical schedules when ranks span equal
// hosts, then Rabenseifner up to TIDAL_ALLREDUCE_RABENSEIFNER_BYTES from
// kLogStepsMinRanks ranks, else the ring. AllGather: the hierarchical
// schedule when ranks span equal hosts, Bruck for blocks up to
// TIDAL_ALLGATHER_BRUCK_BYTES from kLogStepsMinRanks ranks, else the ring.
// ReduceScatter likewise: hierarchical, recursive halving for blocks up to
// TIDAL_REDUCESCATTER_HALVING_BYTES from kLogStepsMinRanks ranks, else the ring.
// (Below 4 ranks the log-step schedules take as many steps as the ring, or
// one more to fold a third rank in.) The double binary tree AllReduce is
// only taken when forced (TIDAL_ALLREDUCE_ALGO=tree): on this project's
// machines it has not been measured faster than the ring, and choosing it
// by rank count and size is the tuner's job. AllToAll, Gather and Scatter
// take their log2(n)-round schedules (Bruck, binomial tree) for blocks up to their *_BYTES setting,
// and only from kLogRoundsMinRanks ranks: they save message start-ups at the price of dependent
// rounds, and with the ranks of one host the start-ups of messages posted all at once cost less
// than rounds do (pairwise and direct post everything at once). Broadcast and Reduce take the
// binomial tree for messages up to their *_TREE_BYTES from kTreeMinRanks ranks: their other
// algorithm, the chain, is itself n - 1 dependent hops, and from 3 ranks on
// the tree is shallower (at 3 the root's two sends overlap where the chain's
// two hops wait on each other; at 2 both are the same single hop). With
// TIDAL_TUNER=model the tuner's predictions (src/tuner/model_picks.h) replace
// these rules for AllReduce, AllGather, Broadcast and Reduce wherever no
// *_ALGO setting forces one.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "collectives/schedule.h"
#include "tuner/model_picks.h"

namespace tidal {

class AlgorithmChoice {
 public:
  enum class AllReduce { Ring, RecursiveDoubling, Hierarchical, Rabenseifner, DoubleBinaryTree };
  enum class AllGather { Ring, Hierarchical, Bruck };
  enum class ReduceScatter { Ring, Hierarchical, Halving };
  // Under auto, fewer ranks keep the ring for AllReduce (beyond recursive
  // doubling) and AllGather.
  static constexpr int kLogStepsMinRanks = 4;
  // Under auto, fewer ranks keep pairwise AllToAll and direct Gather/Scatter.
  static constexpr int kLogRoundsMinRanks = 16;
  // Under auto, fewer ranks keep the chain Broadcast and Reduce.
  static constexpr int kTreeMinRanks = 3;

  // Reads and validates the settings; throws InvalidArgument naming the
  // variable, its value and the rank.
  static AlgorithmChoice fromParams(int rank);

  // TIDAL_TUNER=model: the tuner's model (src/tuner/model_picks.h) picks
  // AllReduce, AllGather, Broadcast and Reduce where no *_ALGO setting
  // forces them, instead of the size rules below.
  bool wantsModel() const { return tuner_ == "model"; }
  void useModel(std::shared_ptr<const tuner::ModelPicks> picks) { model_ = std::move(picks); }

  AllReduce allReduce(size_t bytes, size_t chunkBytes, int nranks,
                      const coll::Topology& topology) const;
  // Block bytes: what each rank contributes.
  AllGather allGather(size_t blockBytes, int nranks, const coll::Topology& topology) const;
  // Block bytes: what each rank receives.
  ReduceScatter reduceScatter(size_t blockBytes, int nranks, const coll::Topology& topology) const;
  // Block bytes: per peer (AllToAll), per rank (Gather, Scatter).
  bool bruckAllToAll(size_t blockBytes, int nranks) const {
    return allToAll_.logRounds(blockBytes, nranks);
  }
  bool treeGather(size_t blockBytes, int nranks) const {
    return gather_.logRounds(blockBytes, nranks);
  }
  bool treeScatter(size_t blockBytes, int nranks) const {
    return scatter_.logRounds(blockBytes, nranks);
  }
  // Message bytes (count * type size).
  bool treeBroadcast(size_t bytes, int nranks) const {
    if (!broadcast_.forced && model_)
      return model_->pick(tuner::Collective::Broadcast, bytes) == "tree";
    return broadcast_.logRounds(bytes, nranks);
  }
  bool treeReduce(size_t bytes, int nranks) const {
    if (!reduce_.forced && model_) return model_->pick(tuner::Collective::Reduce, bytes) == "tree";
    return reduce_.logRounds(bytes, nranks);
  }

 private:
  // A choice between posting everything at once ("flat") and log2(n) rounds.
  struct FlatOrRounds {
    bool forced = false;  // the *_ALGO setting names one of the two
    bool rounds = false;  // and it is the log2(n)-round one
    size_t maxBytes = 0;
    int minRanks = kLogRoundsMinRanks;  // under auto
    bool logRounds(size_t blockBytes, int nranks) const {
      if (forced) return rounds;
      return blockBytes <= maxBytes && nranks >= minRanks;
    }
  };
  static FlatOrRounds readFlatOrRounds(int rank, const char* algoName, const char* flat,
                                       const char* rounds, const char* bytesName,
                                       int minRanks = kLogRoundsMinRanks);

  size_t rdMaxBytes_ = 0;
  size_t rabenseifnerMaxBytes_ = 0;
  size_t bruckAllGatherMaxBytes_ = 0;
  size_t halvingReduceScatterMaxBytes_ = 0;
  std::string allReduce_ = "auto";
  std::string allGather_ = "auto";
  std::string reduceScatter_ = "auto";
  std::string tuner_ = "rules";
  std::shared_ptr<const tuner::ModelPicks> model_;
  FlatOrRounds allToAll_, gather_, scatter_, broadcast_, reduce_;
};

}  // namespace tidal
