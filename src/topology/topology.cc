#include "topology/topology.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"

namespace tidal::topo {

std::string Nic::name() const {
  return kind == NicKind::Rdma ? device + ":" + std::to_string(port) : device;
}

bool Topology::hasRdma() const {
  return std::any_of(nics.begin(), nics.end(),
                     [](const Nic& n) { return n.kind == NicKind::Rdma; });
}

namespace {

bool hexDigits(const std::string& s, size_t from, size_t to) {
  if (from >= to) return false;
  for (size_t i = from; i < to; ++i) {
    if (!std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  return true;
}

}  // namespace

bool looksLikeBusId(const std::string& s) {
  // DOMAIN:BB:DD.F
  const size_t c1 = s.find(':');
  if (c1 == std::string::npos || s.size() < c1 + 8) return false;
  const size_t c2 = c1 + 3, dot = c1 + 6;
  return hexDigits(s, 0, c1) && hexDigits(s, c1 + 1, c2) && s[c2] == ':' &&
         hexDigits(s, c2 + 1, dot) && s[dot] == '.' && hexDigits(s, dot + 1, s.size()) &&
         s.size() == dot + 2;
}

std::string normalizeBusId(const std::string& text, const std::string& what) {
  std::string s = text;
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  if (!looksLikeBusId(s)) {
    fail(tidalInvalidArgument, "{}: '{}' is not a PCI bus id such as 0000:18:00.0", what, text);
  }
  // CUDA prints an 8-digit domain ("00000000:18:00.0"), sysfs a 4-digit one.
  size_t colon = s.find(':');
  while (colon > 4 && s[0] == '0') {
    s.erase(0, 1);
    --colon;
  }
  return std::string(4 - std::min<size_t>(colon, 4), '0') + s;
}

}  // namespace tidal::topo
