#include "topology/topo_file.h"

#include <cerrno>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "topology/cpu_set.h"

namespace tidal::topo {

namespace {

constexpr const char* kHeader = "tidal-topology 1";

void formatLocation(std::ostringstream& out, const PciLocation& loc) {
  out << "  path ";
  for (size_t i = 0; i < loc.path.size(); ++i) out << (i ? "/" : "") << loc.path[i];
  out << "\n  numa_node " << loc.numaNode << "\n";
  if (!loc.cpus.empty()) out << "  local_cpulist " << loc.cpus << "\n";
  if (!loc.linkSpeed.empty()) out << "  link_speed " << loc.linkSpeed << "\n";
  if (!loc.linkWidth.empty()) out << "  link_width " << loc.linkWidth << "\n";
}

// Reads one file line by line; every error names the file and the line.
class Parser {
 public:
  explicit Parser(std::string where) : where_(std::move(where)) {}

  Topology run(const std::string& text) {
    std::istringstream in(text);
    bool header = false;
    for (std::string line; std::getline(in, line);) {
      ++lineNo_;
      line_ = line;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      const size_t start = line.find_first_not_of(" \t");
      if (start == std::string::npos || line[start] == '#') continue;
      if (!header) {
        if (line != kHeader) bad(fmt::format("expected the header '{}'", kHeader));
        header = true;
        continue;
      }
      const size_t space = line.find(' ', start);
      const std::string key = line.substr(start, space - start);
      const std::string value = space == std::string::npos ? "" : line.substr(space + 1);
      if (start > 0) {
        attribute(key, value);
      } else {
        record(key, value);
      }
    }
    if (!header) {
      lineNo_ = 0;
      bad(fmt::format("empty: no '{}' header", kHeader));
    }
    finish();
    return std::move(t_);
  }

 private:
  [[noreturn]] void bad(const std::string& why) const {
    if (lineNo_ == 0) fail(tidalInvalidArgument, "{}: {}", where_, why);
    fail(tidalInvalidArgument, "{} line {}: {}: '{}'", where_, lineNo_, why, line_);
  }

  int number(const std::string& text, const char* what) const {
    try {
      size_t used = 0;
      const int n = std::stoi(text, &used);
      if (used == text.size()) return n;
    } catch (const std::exception&) {
    }
    bad(fmt::format("{} '{}' is not a number", what, text));
  }

  void record(const std::string& key, const std::string& value) {
    finish();
    std::istringstream fields(value);
    if (key == "numa") {
      std::string id, cpus;
      fields >> id >> cpus;
      CpuSet::parse(cpus, fmt::format("{} line {}", where_, lineNo_));
      t_.numa.push_back(NumaNode{number(id, "NUMA node"), cpus});
    } else if (key == "gpu") {
      t_.gpus.emplace_back();
      current_ = &t_.gpus.back().pci;
      current_->busId = normalizeBusId(value, fmt::format("{} line {}", where_, lineNo_));
      currentName_ = "GPU " + current_->busId;
    } else if (key == "nic") {
      std::string device, port, kind, extra;
      fields >> device >> port >> kind >> extra;
      if (device.empty() || kind.empty() || !extra.empty()) bad("expected 'nic DEVICE PORT KIND'");
      Nic nic;
      nic.device = device;
      nic.port = number(port, "port");
      if (kind == "rdma") {
        nic.kind = NicKind::Rdma;
      } else if (kind == "ethernet") {
        nic.kind = NicKind::Ethernet;
      } else {
        bad(fmt::format("NIC kind '{}' is not rdma or ethernet", kind));
      }
      t_.nics.push_back(nic);
      current_ = &t_.nics.back().pci;
      currentName_ = "NIC " + nic.name();
    } else {
      bad(fmt::format("unknown record '{}' (numa, gpu, nic)", key));
    }
  }

  void attribute(const std::string& key, const std::string& value) {
    if (current_ == nullptr) bad("an attribute line before any gpu or nic record");
    if (key == "path") {
      current_->path.clear();
      std::istringstream parts(value);
      for (std::string part; std::getline(parts, part, '/');) current_->path.push_back(part);
      // A GPU record names its bus id; a NIC's is the end of its path.
      const std::string& end = current_->path.empty() ? value : current_->path.back();
      if (current_->busId.empty() && looksLikeBusId(end)) current_->busId = end;
      if (current_->path.size() < 2 || current_->path.front().rfind("pci", 0) != 0 ||
          end != current_->busId) {
        bad(fmt::format("path must run from a host bridge (pci...) to the device{}",
                        current_->busId.empty() ? "" : " " + current_->busId));
      }
    } else if (key == "numa_node") {
      current_->numaNode = number(value, "numa_node");
    } else if (key == "local_cpulist") {
      CpuSet::parse(value, fmt::format("{} line {}", where_, lineNo_));
      current_->cpus = value;
    } else if (key == "link_speed") {
      current_->linkSpeed = value;
    } else if (key == "link_width") {
      current_->linkWidth = value;
    } else {
      bad(fmt::format("unknown attribute '{}'", key));
    }
  }

  // The device above is complete: it must have said where it is.
  void finish() {
    if (current_ != nullptr && current_->path.empty()) {
      bad(fmt::format("{} has no path line before this one", currentName_));
    }
    current_ = nullptr;
  }

  std::string where_;
  Topology t_;
  PciLocation* current_ = nullptr;  // points into t_: no vector grows while set
  std::string currentName_;         // "GPU 0000:18:00.0", "NIC mlx5_0:1"
  int lineNo_ = 0;
  std::string line_;
};

}  // namespace

std::string formatTopology(const Topology& t) {
  std::ostringstream out;
  out << "# Tidal topology: written by TIDAL_TOPO_DUMP_FILE, read by TIDAL_TOPO_FILE\n"
      << kHeader << "\n";
  for (const auto& n : t.numa) out << "numa " << n.id << " " << n.cpus << "\n";
  for (const auto& g : t.gpus) {
    out << "gpu " << g.pci.busId << "\n";
    formatLocation(out, g.pci);
  }
  for (const auto& n : t.nics) {
    out << "nic " << n.device << " " << n.port << " "
        << (n.kind == NicKind::Rdma ? "rdma" : "ethernet") << "\n";
    formatLocation(out, n.pci);
  }
  return out.str();
}

Topology parseTopology(const std::string& text, const std::string& where) {
  return Parser(where).run(text);
}

void writeTopologyFile(const Topology& t, const std::string& file) {
  std::ofstream out(file);
  out << formatTopology(t);
  out.close();
  if (!out) {
    fail(tidalSystemError, "TIDAL_TOPO_DUMP_FILE={}: cannot write it: {}", file, errnoText(errno));
  }
}

Topology readTopologyFile(const std::string& file) {
  std::ifstream in(file);
  if (!in) {
    fail(tidalInvalidArgument, "TIDAL_TOPO_FILE={}: cannot open it: {}", file, errnoText(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return parseTopology(text.str(), "TIDAL_TOPO_FILE=" + file);
}

}  // namespace tidal::topo
