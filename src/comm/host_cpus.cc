#include "comm/host_cpus.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "comm/host_identity.h"
#include "topology/affinity.h"
#include "topology/cpu_set.h"

namespace tidal {

namespace {

constexpr size_t kMaxCpus = 1024;

struct Record {
  char hostId[kMaxHostIdBytes];
  uint8_t known;  // 0: this rank's mask is not in `mask`
  uint8_t mask[kMaxCpus / 8];
};

}  // namespace

int cpusOfLocalRanks(Bootstrap& bootstrap, int nranks) {
  Record mine{};
  const std::string host = localHostIdentity();
  std::memcpy(mine.hostId, host.data(), std::min(host.size(), kMaxHostIdBytes - 1));
  if (const auto cpus = topo::threadAffinity()) {
    mine.known = 1;
    for (const int c : cpus->cpus()) {
      if (c < 0 || static_cast<size_t>(c) >= kMaxCpus) {
        mine.known = 0;
        break;
      }
      mine.mask[c / 8] = static_cast<uint8_t>(mine.mask[c / 8] | (1u << (c % 8)));
    }
  }
  std::vector<Record> all(static_cast<size_t>(nranks));
  bootstrap.allGather(&mine, all.data(), sizeof(Record));
  topo::CpuSet both;
  for (int r = 0; r < nranks; ++r) {
    const Record& rec = all[static_cast<size_t>(r)];
    if (std::strncmp(rec.hostId, mine.hostId, kMaxHostIdBytes) != 0) continue;
    if (!rec.known) return 0;
    std::vector<int> cpus;
    for (size_t c = 0; c < kMaxCpus; ++c) {
      if (rec.mask[c / 8] & (1u << (c % 8))) cpus.push_back(static_cast<int>(c));
    }
    both.add(topo::CpuSet::of(std::move(cpus)));
  }
  return static_cast<int>(both.size());
}

}  // namespace tidal
