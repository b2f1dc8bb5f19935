// A set of CPU numbers in the kernel's cpulist form ("0-55,112-167"), as
// local_cpulist and node*/cpulist show it and sched_setaffinity takes it.
#pragma once

#include <string>
#include <vector>

namespace tidal::topo {

class CpuSet {
 public:
  CpuSet() = default;
  // Throws InvalidArgument naming `what` (the file or variable it came from)
  // and the text when it is not a cpulist.
  static CpuSet parse(const std::string& text, const std::string& what);
  // The set of these CPU numbers (any order, duplicates allowed).
  static CpuSet of(std::vector<int> cpus);

  const std::vector<int>& cpus() const { return cpus_; }  // sorted, unique
  size_t size() const { return cpus_.size(); }

  bool empty() const { return cpus_.empty(); }
  bool contains(int cpu) const;
  bool intersects(const CpuSet& other) const;
  bool isSubsetOf(const CpuSet& other) const;
  void add(const CpuSet& other);
  CpuSet intersection(const CpuSet& other) const;
  // Canonical cpulist: sorted ranges, "" for the empty set.
  std::string text() const;
  bool operator==(const CpuSet&) const = default;

 private:
  std::vector<int> cpus_;  // sorted, unique
};

}  // namespace tidal::topo
