#include "topology/cpu_set.h"

#include <algorithm>
#include <charconv>
#include <iterator>
#include <utility>

#include "core/error.h"

namespace tidal::topo {

namespace {

// The kernel never prints more than this; a larger number is a typo, and
// expanding "0-4000000000" would allocate gigabytes.
constexpr int kMaxCpu = 1 << 16;

bool parseNumber(std::string_view s, int& out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size() && out >= 0 && out < kMaxCpu;
}

}  // namespace

CpuSet CpuSet::parse(const std::string& text, const std::string& what) {
  CpuSet set;
  std::string_view rest = text;
  while (!rest.empty() && (rest.back() == '\n' || rest.back() == ' ')) rest.remove_suffix(1);
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const size_t dash = item.find('-');
    int first = 0, last = 0;
    const bool ok = dash == std::string_view::npos
                        ? parseNumber(item, first) && parseNumber(item, last)
                        : parseNumber(item.substr(0, dash), first) &&
                              parseNumber(item.substr(dash + 1), last) && first <= last;
    if (!ok) {
      fail(tidalInvalidArgument, "{}: '{}' is not a CPU list such as 0-55,112-167 (bad item '{}')",
           what, text, item);
    }
    for (int cpu = first; cpu <= last; ++cpu) set.cpus_.push_back(cpu);
  }
  return of(std::move(set.cpus_));
}

CpuSet CpuSet::of(std::vector<int> cpus) {
  CpuSet set;
  set.cpus_ = std::move(cpus);
  std::sort(set.cpus_.begin(), set.cpus_.end());
  set.cpus_.erase(std::unique(set.cpus_.begin(), set.cpus_.end()), set.cpus_.end());
  return set;
}

bool CpuSet::contains(int cpu) const { return std::binary_search(cpus_.begin(), cpus_.end(), cpu); }

bool CpuSet::intersects(const CpuSet& other) const {
  return std::any_of(cpus_.begin(), cpus_.end(), [&](int c) { return other.contains(c); });
}

bool CpuSet::isSubsetOf(const CpuSet& other) const {
  return std::includes(other.cpus_.begin(), other.cpus_.end(), cpus_.begin(), cpus_.end());
}

void CpuSet::add(const CpuSet& other) {
  std::vector<int> merged;
  std::set_union(cpus_.begin(), cpus_.end(), other.cpus_.begin(), other.cpus_.end(),
                 std::back_inserter(merged));
  cpus_ = std::move(merged);
}

CpuSet CpuSet::intersection(const CpuSet& other) const {
  CpuSet both;
  std::set_intersection(cpus_.begin(), cpus_.end(), other.cpus_.begin(), other.cpus_.end(),
                        std::back_inserter(both.cpus_));
  return both;
}

std::string CpuSet::text() const {
  std::string out;
  for (size_t i = 0; i < cpus_.size();) {
    size_t j = i;
    while (j + 1 < cpus_.size() && cpus_[j + 1] == cpus_[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus_[i]);
    if (j > i) out += '-' + std::to_string(cpus_[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace tidal::topo
