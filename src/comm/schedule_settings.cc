#include "comm/schedule_settings.h"

#include <array>
#include <cstring>

#include "core/error.h"
#include "core/params.h"

namespace tidal {

namespace {

constexpr std::array<const char*, 24> kNames = {
    "TIDAL_CHUNK_SIZE",
    "TIDAL_STAGING_SLOTS",
    "TIDAL_ALLREDUCE_RD_BYTES",
    "TIDAL_ALLREDUCE_RABENSEIFNER_BYTES",
    "TIDAL_ALLGATHER_BRUCK_BYTES",
    "TIDAL_REDUCESCATTER_HALVING_BYTES",
    "TIDAL_TUNER",
    "TIDAL_TUNER_FILE",
    "TIDAL_ALLREDUCE_ALGO",
    "TIDAL_ALLGATHER_ALGO",
    "TIDAL_REDUCESCATTER_ALGO",
    "TIDAL_ALLTOALL_ALGO",
    "TIDAL_ALLTOALL_BRUCK_BYTES",
    "TIDAL_GATHER_ALGO",
    "TIDAL_GATHER_TREE_BYTES",
    "TIDAL_SCATTER_ALGO",
    "TIDAL_SCATTER_TREE_BYTES",
    "TIDAL_BROADCAST_ALGO",
    "TIDAL_BROADCAST_TREE_BYTES",
    "TIDAL_REDUCE_ALGO",
    "TIDAL_REDUCE_TREE_BYTES",
    "TIDAL_NET",
    "TIDAL_SHM_DISABLE",
    "TIDAL_CHECK_CALLS",
};

// One value per setting, fixed width so the exchange is one bounded allGather.
// Longer values are cut; the cut text still differs where values do in
// practice (names of algorithms and transports are short).
constexpr size_t kValueBytes = 48;
struct Record {
  char values[kNames.size()][kValueBytes];
};

std::string valueOf(const char* name) {
  for (const auto& d : params::definitions()) {
    if (d.name != std::string_view(name)) continue;
    switch (d.kind) {
      case params::Kind::Int:
        return std::to_string(params::getInt(name));
      case params::Kind::Bool:
        return params::getBool(name) ? "1" : "0";
      default:
        return params::getString(name);
    }
  }
  fail(tidalInternalError, "schedule setting {} is not a declared parameter", name);
}

std::string text(const char (&value)[kValueBytes]) {
  return std::string(value, strnlen(value, kValueBytes));
}

}  // namespace

std::vector<std::pair<std::string, std::string>> scheduleSettings() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const char* name : kNames) out.emplace_back(name, valueOf(name));
  return out;
}

void checkScheduleSettingsAgree(Bootstrap& bootstrap, int rank, int nranks) {
  Record mine{};
  const auto settings = scheduleSettings();
  for (size_t i = 0; i < settings.size(); ++i) {
    std::strncpy(mine.values[i], settings[i].second.c_str(), kValueBytes - 1);
  }
  std::vector<Record> all(static_cast<size_t>(nranks));
  bootstrap.allGather(&mine, all.data(), sizeof(Record));
  for (size_t i = 0; i < kNames.size(); ++i) {
    for (int r = 0; r < nranks; ++r) {
      if (std::strncmp(all[static_cast<size_t>(r)].values[i], mine.values[i], kValueBytes) == 0) {
        continue;
      }
      fail(tidalInvalidUsage,
           "rank {}: {}={} here but rank {} has {}={}; settings that decide schedules must be "
           "equal on every rank",
           rank, kNames[i], text(mine.values[i]), r, kNames[i],
           text(all[static_cast<size_t>(r)].values[i]));
    }
  }
}

}  // namespace tidal
