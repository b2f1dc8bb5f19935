#include "tuner/model_picks.h"

namespace tidal::tuner {

ModelPicks ModelPicks::compute(const std::vector<int>& hostOfRank, size_t chunkBytes,
                               const LinkModel& model) {
  ModelPicks m;
  for (const Collective c :
       {Collective::AllReduce, Collective::AllGather, Collective::Broadcast, Collective::Reduce}) {
    auto& picks = m.picks_[static_cast<size_t>(c)];
    for (size_t bytes = 8; bytes <= kMaxBytes; bytes *= 8) {
      const Estimate* best = nullptr;
      const auto estimates = estimateOnHosts(c, bytes, hostOfRank, chunkBytes, model);
      for (const auto& e : estimates) {
        if (e.applies && (!best || e.micros < best->micros)) best = &e;
      }
      picks.push_back(best ? best->algorithm : std::string());
    }
  }
  return m;
}

const std::string& ModelPicks::pick(Collective c, size_t bytes) const {
  static const std::string none;
  const auto& picks = picks_[static_cast<size_t>(c)];
  size_t i = 0;
  for (size_t size = 8; size < bytes && i + 1 < picks.size(); size *= 8) ++i;
  return i < picks.size() ? picks[i] : none;
}

}  // namespace tidal::tuner
