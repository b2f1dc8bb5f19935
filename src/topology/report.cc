#include "topology/report.h"

#include <algorithm>

#include <fmt/format.h>

#include "topology/path_class.h"

namespace tidal::topo {

namespace {

std::string linkText(const PciLocation& loc) {
  if (loc.linkSpeed.empty() && loc.linkWidth.empty()) return "link unknown";
  return fmt::format("{} x{}", loc.linkSpeed.empty() ? "?" : loc.linkSpeed,
                     loc.linkWidth.empty() ? "?" : loc.linkWidth);
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ",") + s;
  return out;
}

}  // namespace

std::string topologyMatrix(const Topology& t) {
  struct Row {
    std::string label;
    const PciLocation* pci;
  };
  std::vector<Row> rows;
  for (size_t i = 0; i < t.gpus.size(); ++i) {
    rows.push_back({fmt::format("GPU{}", i), &t.gpus[i].pci});
  }
  for (size_t i = 0; i < t.nics.size(); ++i) {
    rows.push_back({fmt::format("NIC{}", i), &t.nics[i].pci});
  }
  if (rows.empty()) return "No GPU and no NIC found.\n";
  size_t labelW = 4;
  for (const auto& r : rows) labelW = std::max(labelW, r.label.size());
  size_t cpuW = std::string("CPU Affinity").size();
  for (const auto& r : rows) cpuW = std::max(cpuW, r.pci->cpus.size());

  std::string out = fmt::format("{:<{}}", "", labelW);
  for (const auto& r : rows) out += fmt::format("  {:<{}}", r.label, labelW);
  out += fmt::format("  {:<{}}  NUMA Affinity\n", "CPU Affinity", cpuW);
  for (const auto& r : rows) {
    out += fmt::format("{:<{}}", r.label, labelW);
    for (const auto& col : rows) {
      const char* cell = &col == &r ? "X" : className(classify(*r.pci, *col.pci));
      out += fmt::format("  {:<{}}", cell, labelW);
    }
    const std::string numa = r.pci->numaNode < 0 ? "N/A" : std::to_string(r.pci->numaNode);
    out += fmt::format("  {:<{}}  {}\n", r.pci->cpus.empty() ? "N/A" : r.pci->cpus, cpuW, numa);
  }
  out += "\nLegend:\n";
  for (size_t i = 0; i < t.gpus.size(); ++i) {
    out += fmt::format("  GPU{}: {} ({})\n", i, t.gpus[i].pci.busId, linkText(t.gpus[i].pci));
  }
  for (size_t i = 0; i < t.nics.size(); ++i) {
    const Nic& n = t.nics[i];
    out += fmt::format("  NIC{}: {} ({}, {}, {})\n", i, n.name(),
                       n.kind == NicKind::Rdma ? "rdma" : "ethernet", n.pci.busId, linkText(n.pci));
  }
  out +=
      "\n  X    = self\n"
      "  PIX  = through at most one PCIe switch\n"
      "  PXB  = through several PCIe switches, not the host bridge\n"
      "  PHB  = through a PCIe host bridge (the CPU's root complex)\n"
      "  NODE = across host bridges within one NUMA node\n"
      "  SYS  = across NUMA nodes (the inter-socket link)\n";
  return out;
}

std::string choiceLine(const RankChoice& c) {
  const std::string gpu =
      c.gpu < 0 ? std::string("no GPU") : fmt::format("GPU{} {}", c.gpu, c.gpuBusId);
  const std::string nics = c.nics.empty() ? "none" : joined(c.nics);
  const std::string cls = c.path ? className(*c.path) : "-";
  std::string line =
      fmt::format("rank {}  {}  NICs {}  {}  GDR {} ({})  CPUs {}", c.localRank, gpu, nics, cls,
                  c.gdr ? "on" : "off", c.gdrReason, c.cpus.empty() ? "unknown" : c.cpus);
  for (const auto& w : c.warnings) line += "\n  warning: " + w;
  return line;
}

}  // namespace tidal::topo
