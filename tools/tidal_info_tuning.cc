// tidal-info --tuning: the tuner's model (src/tuner) over a hypothetical job,
// as a table by size: each candidate algorithm's predicted time, the
// fastest, and what the library's rules (src/comm/algorithm_choice.h) pick
// today under the current environment. The model runs every rank's real
// schedule, so large rank counts take a while; it is capped at 1024 ranks.
#include "tidal_info_tuning.h"

#include <cstdio>
#include <string>
#include <vector>

#include "collectives/schedule.h"
#include "comm/algorithm_choice.h"
#include "core/error.h"
#include "core/params.h"
#include "tuner/candidates.h"
#include "tuner/link_model.h"

namespace {

using tidal::tuner::Collective;

// What the library picks today for this call, named as the candidates are.
std::string ruleChoice(const tidal::AlgorithmChoice& rules, Collective c, size_t bytes, int nranks,
                       const tidal::coll::Topology& topology, size_t chunkBytes) {
  using AR = tidal::AlgorithmChoice::AllReduce;
  using AG = tidal::AlgorithmChoice::AllGather;
  using RS = tidal::AlgorithmChoice::ReduceScatter;
  switch (c) {
    case Collective::AllReduce:
      switch (rules.allReduce(bytes, chunkBytes, nranks, topology)) {
        case AR::Ring:
          return "ring";
        case AR::RecursiveDoubling:
          return "rd";
        case AR::Hierarchical:
          return "hier";
        case AR::Rabenseifner:
          return "rabenseifner";
        case AR::DoubleBinaryTree:
          return "tree";
      }
      break;
    case Collective::AllGather:
      switch (rules.allGather(bytes / static_cast<size_t>(nranks), nranks, topology)) {
        case AG::Ring:
          return "ring";
        case AG::Hierarchical:
          return "hier";
        case AG::Bruck:
          return "bruck";
      }
      break;
    case Collective::ReduceScatter:
      switch (rules.reduceScatter(bytes / static_cast<size_t>(nranks), nranks, topology)) {
        case RS::Ring:
          return "ring";
        case RS::Hierarchical:
          return "hier";
        case RS::Halving:
          return "halving";
      }
      break;
    case Collective::Broadcast:
      return rules.treeBroadcast(bytes, nranks) ? "tree" : "chain";
    case Collective::Reduce:
      return rules.treeReduce(bytes, nranks) ? "tree" : "chain";
  }
  return "?";
}

}  // namespace

int printTuning(const TuningOptions& o) {
  try {
    const tidal::tuner::LinkModel model = tidal::tuner::LinkModel::fromParams();
    const auto chunkBytes = static_cast<size_t>(tidal::params::getInt("TIDAL_CHUNK_SIZE"));
    const tidal::AlgorithmChoice rules = tidal::AlgorithmChoice::fromParams(0);
    const int perHost = (o.nranks + o.hosts - 1) / o.hosts;
    std::vector<std::string> keys;
    for (int r = 0; r < o.nranks; ++r) keys.push_back("h" + std::to_string(r / perHost));
    const auto topology = tidal::coll::Topology::fromHostKeys(keys, 0);
    const std::string file = tidal::params::getString("TIDAL_TUNER_FILE");
    std::printf(
        "Predicted time in microseconds (src/tuner: every rank's schedule run over modelled "
        "links)\n%d ranks on %d host(s), %d per host; chunk %zu B; links from %s:\n"
        "  same host: alpha %.2f us, %.0f MB/s; network: alpha %.2f us, %.0f MB/s; "
        "reduce %.0f MB/s; copy %.0f MB/s\n",
        o.nranks, o.hosts, perHost, chunkBytes,
        file.empty() ? "the defaults" : ("TIDAL_TUNER_FILE=" + file).c_str(),
        model.sameHost.alphaUs, model.sameHost.bytesPerUs, model.network.alphaUs,
        model.network.bytesPerUs, model.reduceBytesPerUs, model.copyBytesPerUs);
    for (const Collective c :
         {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
          Collective::Broadcast, Collective::Reduce}) {
      if (!o.collective.empty() && o.collective != tidal::tuner::collectiveName(c)) continue;
      std::printf("\n%s\n", tidal::tuner::collectiveName(c));
      bool header = false;
      for (size_t bytes = o.minBytes; bytes <= o.maxBytes; bytes *= o.stepFactor) {
        const auto estimates =
            tidal::tuner::estimate(c, bytes, {o.nranks, perHost}, chunkBytes, model);
        if (!header) {
          std::printf("%12s", "bytes");
          for (const auto& e : estimates) std::printf(" %13s", e.algorithm.c_str());
          std::printf(" %13s %13s\n", "model picks", "rules pick");
          header = true;
        }
        std::printf("%12zu", bytes);
        const tidal::tuner::Estimate* best = nullptr;
        for (const auto& e : estimates) {
          if (!e.applies) {
            std::printf(" %13s", "-");
            continue;
          }
          std::printf(" %13.1f", e.micros);
          if (!best || e.micros < best->micros) best = &e;
        }
        std::printf(" %13s %13s\n", best ? best->algorithm.c_str() : "-",
                    ruleChoice(rules, c, bytes, o.nranks, topology, chunkBytes).c_str());
      }
    }
    return 0;
  } catch (const tidal::Error& e) {
    std::fprintf(stderr, "tidal-info: error: %s\n", e.what());
    return 1;
  }
}
