#include "comm/rank_placement.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "comm/host_identity.h"
#include "core/error.h"
#include "core/log.h"
#include "core/params.h"
#include "cuda/cuda_support.h"
#include "topology/affinity.h"
#include "topology/binding.h"
#include "topology/detect.h"

namespace tidal {

namespace {

constexpr size_t kBusIdBytes = 32;  // "00000000:18:00.0" and room to spare

struct Record {
  char hostId[kMaxHostIdBytes];
  char busId[kBusIdBytes];
};

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

std::string fixedText(const char* bytes, size_t size) { return {bytes, strnlen(bytes, size)}; }

std::string cudaBusId(bool askCuda) {
  if (!askCuda || !cuda::usable()) return {};
  return cuda::pciBusId(cuda::currentDevice().value_or(0));
}

// Binds the calling thread as TIDAL_BIND says; returns what happened.
std::string bindThread(bool enabled, const topo::RankChoice& choice, int rank) {
  const auto current = topo::threadAffinity();
  if (!current) return fmt::format("affinity unreadable: {}", errnoText(errno));
  const topo::InitBinding b =
      topo::decideInitBinding(enabled, choice, *current, topo::onlineCpuCount());
  if (b.bindTo.empty()) return b.why;
  if (const int err = topo::AffinityMask(b.bindTo).apply(); err != 0) {
    TIDAL_WARN(Init, "rank {}: cannot bind to CPUs {}: {}", rank, b.bindTo.text(), errnoText(err));
    return fmt::format("binding to {} failed", b.bindTo.text());
  }
  return b.why;
}

}  // namespace

std::shared_ptr<const topo::Placement> placeRank(Bootstrap& bootstrap, int rank, int nranks,
                                                 bool askCuda) {
  // Settings first: a typo fails init on every rank alike, before any exchange.
  const topo::ChoiceSettings levelOnly = topo::choiceSettingsFromParams();
  const bool bindEnabled = topo::initBindingEnabled(params::getString("TIDAL_BIND"));

  Record mine{};
  const std::string host = localHostIdentity();
  std::memcpy(mine.hostId, host.data(), std::min(host.size(), kMaxHostIdBytes - 1));
  const std::string busId = cudaBusId(askCuda);
  std::memcpy(mine.busId, busId.data(), std::min(busId.size(), kBusIdBytes - 1));
  std::vector<Record> all(static_cast<size_t>(nranks));
  bootstrap.allGather(&mine, all.data(), sizeof(Record));

  auto p = std::make_shared<topo::Placement>();
  p->gdrLevel = levelOnly.gdrLevel;
  topo::ChoiceSettings settings = levelOnly;
  bool anyBusId = false;
  int localRanks = 0;
  for (int r = 0; r < nranks; ++r) {
    const Record& rec = all[static_cast<size_t>(r)];
    if (fixedText(rec.hostId, kMaxHostIdBytes) != host) continue;
    if (r == rank) p->localRank = localRanks;
    ++localRanks;
    settings.gpuBusIds.push_back(fixedText(rec.busId, kBusIdBytes));
    anyBusId = anyBusId || !settings.gpuBusIds.back().empty();
  }
  p->localRanks = localRanks;
  settings.localRanks = localRanks;
  if (!anyBusId) settings.gpuBusIds.clear();  // no CUDA anywhere here: local rank i, GPU i
  if (const auto cpus = topo::threadAffinity()) settings.rankCpus = cpus->text();

  try {
    auto detected = topo::detectTopology(p->localRank == 0);
    p->topology = std::move(detected.topology);
    p->source = std::move(detected.source);
    p->choice = topo::chooseForRank(p->topology, p->localRank, settings);
  } catch (const Error& e) {
    TIDAL_WARN(Init,
               "rank {}: local rank {} of {}: topology not used (NICs, GDR and CPUs keep "
               "their defaults): {}",
               rank, p->localRank, localRanks, e.what());
    return nullptr;
  }
  for (const auto& w : p->choice.warnings) TIDAL_WARN(Init, "rank {}: {}", rank, w);
  const std::string bound = bindThread(bindEnabled, p->choice, rank);
  const auto cpus = topo::threadAffinity();
  const topo::RankChoice& c = p->choice;
  TIDAL_INFO(Init,
             "rank {}: local rank {} of {}, {}, NICs {}, {}, GDR {} ({}), CPUs {} ({}); "
             "topology from {}",
             rank, p->localRank, localRanks, c.gpu < 0 ? "no GPU" : "GPU " + c.gpuBusId,
             c.nics.empty() ? "none" : joined(c.nics),
             c.path ? topo::className(*c.path) : "any class", c.gdr ? "on" : "off", c.gdrReason,
             cpus ? cpus->text() : "unknown", bound, p->source);
  return p;
}

}  // namespace tidal
