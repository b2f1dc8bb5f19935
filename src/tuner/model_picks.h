// The tuner's choice for one communicator (TIDAL_TUNER=model): for each
// collective the model weighs, the fastest candidate (candidates.h) at the
// sizes 8, 64, 512, ... bytes up to 1 GiB, computed once at init from the
// communicator's own placement of ranks on hosts, chunk size and link costs.
// Every rank computes the same table from the same inputs (the settings
// compared at init include TIDAL_TUNER, TIDAL_TUNER_FILE and the chunk size),
// so every rank picks the same schedule for a call.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include "tuner/candidates.h"
#include "tuner/link_model.h"

namespace tidal::tuner {

class ModelPicks {
 public:
  // The model runs every rank's schedule at every size: past this many ranks
  // that is too slow for init, and the rules decide.
  static constexpr int kMaxRanks = 64;
  static constexpr size_t kMaxBytes = size_t{1} << 30;

  // Weighs AllReduce, AllGather, Broadcast and Reduce.
  static ModelPicks compute(const std::vector<int>& hostOfRank, size_t chunkBytes,
                            const LinkModel& model);
  // The pick at the smallest tabled size >= bytes (the largest size beyond
  // it); `bytes` as the *_perf tools count them (AllGather: the whole buffer).
  const std::string& pick(Collective c, size_t bytes) const;

 private:
  std::array<std::vector<std::string>, 5> picks_;  // by Collective, by size
};

}  // namespace tidal::tuner
