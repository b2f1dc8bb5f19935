#include "transports/ib/device_select.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/params.h"

namespace tidal::ib {

namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\n") - b + 1);
}

bool readLine(const std::string& path, std::string& out) {
  std::ifstream in(path);
  if (!in) return false;
  std::string line;
  if (!std::getline(in, line)) return false;  // sysfs read errors (EINVAL) end up here
  out = trim(line);
  return true;
}

}  // namespace

HcaSpec parseHcaSpec(const std::string& text) {
  HcaSpec spec;
  std::string rest = trim(text);
  if (!rest.empty() && rest[0] == '^') {
    spec.exclude = true;
    rest.erase(0, 1);
  }
  if (!rest.empty() && rest[0] == '=') {
    spec.exact = true;
    rest.erase(0, 1);
  }
  std::stringstream in(rest);
  for (std::string item; std::getline(in, item, ',');) {
    item = trim(item);
    if (item.empty()) continue;
    HcaSpec::Item parsed;
    const auto colon = item.find(':');
    parsed.name = item.substr(0, colon);
    if (colon != std::string::npos) {
      const std::string port = item.substr(colon + 1);
      char* end = nullptr;
      const long p = std::strtol(port.c_str(), &end, 10);
      if (port.empty() || *end != '\0' || p < 1 || p > 255) {
        fail(tidalInvalidArgument,
             "TIDAL_IB_HCA='{}': '{}' is not DEVICE or DEVICE:PORT (port 1..255)", text, item);
      }
      parsed.port = static_cast<int>(p);
    }
    if (parsed.name.empty()) {
      fail(tidalInvalidArgument, "TIDAL_IB_HCA='{}': '{}' names no device", text, item);
    }
    spec.items.push_back(parsed);
  }
  return spec;
}

bool hcaMatches(const HcaSpec& spec, const std::string& device, int port) {
  if (spec.items.empty()) return !spec.exclude;
  bool listed = false;
  for (const auto& item : spec.items) {
    const bool nameOk = spec.exact ? device == item.name : device.rfind(item.name, 0) == 0;
    if (nameOk && (item.port == 0 || item.port == port)) listed = true;
  }
  return listed != spec.exclude;
}

size_t pickPort(const std::vector<std::string>& usable, const std::vector<std::string>& preferred,
                int rank) {
  std::vector<size_t> pool;
  for (size_t i = 0; i < usable.size(); ++i) {
    if (std::find(preferred.begin(), preferred.end(), usable[i]) != preferred.end()) {
      pool.push_back(i);
    }
  }
  const auto r = static_cast<size_t>(rank);
  return pool.empty() ? r % usable.size() : pool[r % pool.size()];
}

std::vector<size_t> pickRails(const std::vector<std::string>& usable, const RailSource& source,
                              int rank, size_t maxRails) {
  std::vector<size_t> pool;
  if (source.listed) {
    for (size_t i = 0; i < usable.size(); ++i) pool.push_back(i);
  } else if (source.nearest) {
    for (size_t i = 0; i < usable.size(); ++i) {
      const auto& p = source.preferred;
      if (std::find(p.begin(), p.end(), usable[i]) != p.end()) pool.push_back(i);
    }
  }
  if (pool.size() < 2 || maxRails < 2) return {pickPort(usable, source.preferred, rank)};
  if (pool.size() <= maxRails) return pool;
  std::vector<size_t> window;
  const size_t start = static_cast<size_t>(rank) * maxRails;
  for (size_t k = 0; k < maxRails; ++k) window.push_back(pool[(start + k) % pool.size()]);
  std::sort(window.begin(), window.end());  // rails in NIC order, so index i means NIC i
  return window;
}

bool GidEntry::empty() const {
  return std::all_of(raw.begin(), raw.end(), [](uint8_t b) { return b == 0; });
}

bool GidEntry::ipv4Mapped() const {
  static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::equal(kMapped, kMapped + 12, raw.begin());
}

bool GidEntry::linkLocal() const { return raw[0] == 0xfe && (raw[1] & 0xc0) == 0x80; }

std::string GidEntry::address() const {
  char text[INET6_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET6, raw.data(), text, sizeof text);
  return text;
}

std::string GidEntry::describe() const {
  return fmt::format("{} {} ({})", index, address(), type.empty() ? "unused" : type);
}

std::vector<GidEntry> readGidTable(const std::string& portDir) {
  std::vector<GidEntry> table;
  for (int i = 0;; ++i) {
    std::string text;
    if (!readLine(fmt::format("{}/gids/{}", portDir, i), text)) break;
    GidEntry e;
    e.index = i;
    if (::inet_pton(AF_INET6, text.c_str(), e.raw.data()) != 1) e.raw.fill(0);
    // Unused entries fail to read their type (EINVAL): leave it empty.
    if (!readLine(fmt::format("{}/gid_attrs/types/{}", portDir, i), e.type)) e.type.clear();
    table.push_back(e);
  }
  return table;
}

bool AddressRange::contains(const std::array<uint8_t, 16>& address) const {
  for (int bit = 0; bit < bits; ++bit) {
    const int byte = bit / 8, mask = 0x80 >> (bit % 8);
    if ((address[byte] & mask) != (prefix[byte] & mask)) return false;
  }
  return true;
}

AddressRange parseAddressRange(const std::string& text) {
  const auto slash = text.find('/');
  auto bad = [&](const char* why) {
    fail(tidalInvalidArgument,
         "TIDAL_IB_ADDR_RANGE='{}' is not a CIDR range such as 10.0.0.0/8 or fd00::/8: {}", text,
         why);
  };
  if (slash == std::string::npos) bad("no /prefix length");
  const std::string addr = trim(text.substr(0, slash));
  const std::string len = trim(text.substr(slash + 1));
  char* end = nullptr;
  const long bits = std::strtol(len.c_str(), &end, 10);
  if (len.empty() || *end != '\0') bad("the prefix length is not a number");
  AddressRange r;
  in_addr v4{};
  if (::inet_pton(AF_INET, addr.c_str(), &v4) == 1) {
    if (bits < 0 || bits > 32) bad("an IPv4 prefix length is 0..32");
    r.prefix[10] = r.prefix[11] = 0xff;
    std::memcpy(r.prefix.data() + 12, &v4, 4);
    r.bits = 96 + static_cast<int>(bits);
  } else if (::inet_pton(AF_INET6, addr.c_str(), r.prefix.data()) == 1) {
    if (bits < 0 || bits > 128) bad("an IPv6 prefix length is 0..128");
    r.bits = static_cast<int>(bits);
  } else {
    bad("the address does not parse");
  }
  return r;
}

GidPolicy gidPolicyFromParams(int rank) {
  GidPolicy p;
  const int64_t index = params::getInt("TIDAL_IB_GID_INDEX");
  if (index < -1 || index > 65535) {
    fail(tidalInvalidArgument,
         "rank {}: TIDAL_IB_GID_INDEX={} is out of range (-1 for automatic, else 0..65535)", rank,
         index);
  }
  p.overrideIndex = static_cast<int>(index);
  p.familyText = params::getString("TIDAL_IB_ADDR_FAMILY");
  if (p.familyText == "AF_INET") {
    p.family = AF_INET;
  } else if (p.familyText == "AF_INET6") {
    p.family = AF_INET6;
  } else if (!p.familyText.empty()) {
    fail(tidalInvalidArgument, "rank {}: TIDAL_IB_ADDR_FAMILY='{}' is not AF_INET or AF_INET6",
         rank, p.familyText);
  }
  p.rangeText = params::getString("TIDAL_IB_ADDR_RANGE");
  if (!p.rangeText.empty()) p.range = parseAddressRange(p.rangeText);
  return p;
}

namespace {

std::string tableText(const std::vector<GidEntry>& table) {
  std::string s;
  for (const auto& e : table) {
    if (e.empty() || e.type.empty()) continue;
    if (!s.empty()) s += ", ";
    s += e.describe();
  }
  return s.empty() ? "none" : s;
}

// Lower is better; nullopt when the policy rules the entry out.
std::optional<int> rank(const GidEntry& e, const GidPolicy& p) {
  if (e.empty() || !e.roceV2()) return std::nullopt;
  if (p.range && !p.range->contains(e.raw)) return std::nullopt;
  const bool v4 = e.ipv4Mapped();
  if (p.family == AF_INET && !v4) return std::nullopt;
  if (p.family == AF_INET6 && v4) return std::nullopt;
  if (v4) return 0;
  return e.linkLocal() ? 2 : 1;  // global IPv6 before link-local
}

}  // namespace

GidEntry chooseRoceGid(const std::vector<GidEntry>& table, const GidPolicy& policy,
                       const std::string& where, int rankId) {
  if (policy.overrideIndex >= 0) {
    const auto it = std::find_if(table.begin(), table.end(), [&](const GidEntry& e) {
      return e.index == policy.overrideIndex;
    });
    std::string problem;
    if (it == table.end()) {
      problem = fmt::format("the GID table has {} entries", table.size());
    } else if (it->empty() || it->type.empty()) {
      problem = fmt::format("entry {} is unused (address {})", it->index, it->address());
    }
    if (!problem.empty()) {
      fail(tidalInvalidArgument,
           "rank {}: TIDAL_IB_GID_INDEX={} is not a usable GID on {}: {}. Usable GIDs there: {}. "
           "Set TIDAL_IB_GID_INDEX to one of them, or unset it to pick a RoCE v2 GID with an "
           "IPv4 address automatically",
           rankId, policy.overrideIndex, where, problem, tableText(table));
    }
    return *it;
  }
  const GidEntry* best = nullptr;
  int bestRank = 0;
  for (const auto& e : table) {
    const auto r = rank(e, policy);
    if (r && (best == nullptr || *r < bestRank)) {
      best = &e;
      bestRank = *r;
    }
  }
  if (best == nullptr) {
    fail(tidalInvalidArgument,
         "rank {}: {} has no RoCE v2 GID{}{}{}. GIDs there: {}. Set TIDAL_IB_GID_INDEX to the "
         "index to use, or adjust TIDAL_IB_ADDR_FAMILY / TIDAL_IB_ADDR_RANGE",
         rankId, where, policy.family == AF_INET6 ? " with an IPv6 address" : "",
         policy.family == AF_INET ? " with an IPv4 address" : "",
         policy.range ? fmt::format(" inside TIDAL_IB_ADDR_RANGE={}", policy.rangeText) : "",
         tableText(table));
  }
  return *best;
}

}  // namespace tidal::ib
