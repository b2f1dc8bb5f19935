#include "transports/ib/hw_counters.h"

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

namespace tidal::ib {

namespace {

bool isCongestionCounter(const std::string& name) {
  return name.find("cnp") != std::string::npos || name.find("ecn") != std::string::npos ||
         name.find("pfc") != std::string::npos || name.find("pause") != std::string::npos;
}

}  // namespace

CounterSnapshot readHwCounters(const std::string& portDir) {
  CounterSnapshot snap;
  std::error_code ec;
  const std::filesystem::path dir = portDir + "/hw_counters";
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (!entry.is_regular_file(ec)) continue;
    std::ifstream in(entry.path());
    uint64_t value = 0;
    if (in >> value) snap[entry.path().filename().string()] = value;
  }
  return snap;
}

std::string counterDeltaText(const CounterSnapshot& before, const CounterSnapshot& after) {
  if (after.empty()) return "the port exposes no hw_counters";
  std::string moved, congestion;
  for (const auto& [name, value] : after) {
    const auto it = before.find(name);
    const uint64_t old = it == before.end() ? 0 : it->second;
    const uint64_t delta = value >= old ? value - old : 0;
    const std::string item = fmt::format("{} +{}", name, delta);
    if (isCongestionCounter(name)) {
      congestion += (congestion.empty() ? "" : ", ") + item;
    } else if (delta != 0) {
      moved += (moved.empty() ? "" : ", ") + item;
    }
  }
  return fmt::format(
      "{}; congestion counters: {}", moved.empty() ? "no counter moved" : moved,
      congestion.empty() ? "none exposed (no CNP/ECN/PFC counters on this port)" : congestion);
}

}  // namespace tidal::ib
