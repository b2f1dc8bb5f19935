// Recorded server layouts as sysfs trees, built at test time in a temporary
// directory: just the files topology discovery reads, with the links shaped
// as the kernel makes them (bus/pci/devices/X -> ../../../devices/pci.../X,
// class/infiniband/D/device -> ../../../devices/pci.../X, class/net/IF ->
// ../../devices/.../net/IF with device -> ../../../X).
//
// The layouts follow the public descriptions of each machine; bus numbers
// are made up but shaped as on the real thing (a PCIe switch is an upstream
// port with its downstream ports on the bus below).
#pragma once

#include <fmt/format.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace tidal::topo::test {

class SysfsTree {
 public:
  SysfsTree() {
    char tmpl[] = "/tmp/topology_fixture_XXXXXX";
    root_ = ::mkdtemp(tmpl);
    std::filesystem::create_directories(root_ + "/devices/system/node");
  }
  ~SysfsTree() { std::filesystem::remove_all(root_); }
  SysfsTree(const SysfsTree&) = delete;
  SysfsTree& operator=(const SysfsTree&) = delete;

  const std::string& root() const { return root_; }

  void numa(int id, const std::string& cpus) {
    write(fmt::format("devices/system/node/node{}/cpulist", id), cpus);
  }

  // `path` runs from the host bridge to the device:
  // "pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0".
  // Every bridge on the way becomes a PCI function of its own (class 0x0604).
  void pci(const std::string& path, int vendor, int cls, int numa, const std::string& cpus) {
    const auto parts = split(path);
    std::string sofar = parts.front();
    for (size_t i = 1; i < parts.size(); ++i) {
      sofar += "/" + parts[i];
      const bool last = i + 1 == parts.size();
      if (!last && std::filesystem::exists(root_ + "/devices/" + sofar)) continue;
      function(sofar, last ? vendor : 0x1000, last ? cls : 0x060400, numa, cpus);
    }
  }

  void gpu(const std::string& path, int numa, const std::string& cpus) {
    pci(path, 0x10de, 0x030200, numa, cpus);  // NVIDIA, 3D controller
  }

  // An RDMA device (Mellanox 0x15b3 or Amazon EFA 0x1d0f) with its ports.
  void rdma(const std::string& name, const std::string& path, int numa, const std::string& cpus,
            int ports = 1, int vendor = 0x15b3) {
    pci(path, vendor, 0x020700, numa, cpus);
    const std::string dir = root_ + "/class/infiniband/" + name;
    std::filesystem::create_directories(dir);
    std::filesystem::create_symlink("../../../devices/" + path, dir + "/device");
    for (int p = 1; p <= ports; ++p)
      std::filesystem::create_directories(fmt::format("{}/ports/{}", dir, p));
  }

  // An Ethernet interface whose `device` is devices/<devicePath> (a PCI
  // function, or a virtio device below one); devicePath "" is virtual.
  void net(const std::string& name, const std::string& devicePath) {
    std::filesystem::create_directories(root_ + "/class/net");
    const std::string at = devicePath.empty() ? "virtual" : devicePath;
    const std::string dir = fmt::format("devices/{}/net/{}", at, name);
    std::filesystem::create_directories(root_ + "/" + dir);
    std::filesystem::create_symlink("../../" + dir, root_ + "/class/net/" + name);
    if (devicePath.empty()) return;
    const std::string leaf = split(devicePath).back();
    std::filesystem::create_symlink("../../../" + leaf, root_ + "/" + dir + "/device");
  }

 private:
  static std::vector<std::string> split(const std::string& path) {
    std::vector<std::string> parts;
    size_t at = 0;
    for (size_t slash; (slash = path.find('/', at)) != std::string::npos; at = slash + 1) {
      parts.push_back(path.substr(at, slash - at));
    }
    parts.push_back(path.substr(at));
    return parts;
  }

  void write(const std::string& relative, const std::string& text) {
    const std::filesystem::path file = root_ + "/" + relative;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file) << text << "\n";
  }

  void function(const std::string& path, int vendor, int cls, int numa, const std::string& cpus) {
    const std::string dir = "devices/" + path;
    write(dir + "/vendor", fmt::format("0x{:04x}", vendor));
    write(dir + "/class", fmt::format("0x{:06x}", cls));
    write(dir + "/numa_node", std::to_string(numa));
    write(dir + "/local_cpulist", cpus);
    write(dir + "/current_link_speed", "32.0 GT/s PCIe");
    write(dir + "/current_link_width", "16");
    std::filesystem::create_directories(root_ + "/bus/pci/devices");
    std::filesystem::create_symlink("../../../" + dir,
                                    root_ + "/bus/pci/devices/" + split(path).back());
  }

  std::string root_;
};

inline std::string bus(int b, int dev = 0, int fn = 0) {
  return fmt::format("0000:{:02x}:{:02x}.{}", b, dev, fn);
}

// Two sockets, 8 GPUs, each behind its own PCIe switch (root port 01.0,
// upstream port on bus hb+1, downstream ports on bus hb+2, GPU on hb+3) on
// its own host bridge hb; GPUs 0-3 on NUMA 0. `addNics(gpu, sw, hb, node)`
// puts that GPU's NICs on the switch `sw`: downstream port k at
// sw/bus(hb + 2, k) with k >= 1.
template <typename AddNics>
void buildEightGpuServer(SysfsTree& t, const char* const (&cpus)[2], const int (&hostBridges)[8],
                         AddNics addNics) {
  t.numa(0, cpus[0]);
  t.numa(1, cpus[1]);
  for (int i = 0; i < 8; ++i) {
    const int hb = hostBridges[i], node = i / 4;
    const std::string sw = fmt::format("pci0000:{:02x}/{}/{}", hb, bus(hb, 1), bus(hb + 1));
    t.gpu(fmt::format("{}/{}/{}", sw, bus(hb + 2, 0), bus(hb + 3)), node, cpus[node]);
    addNics(i, sw, hb, node);
  }
}

// DGX H100: 2 sockets (56 cores, 2 threads each), 8 GPUs and 8 ConnectX-7,
// GPU i and mlx5_i behind one PCIe switch on their own host bridge; GPUs 0-3
// on NUMA 0, 4-7 on NUMA 1. Also two NVSwitches (NVIDIA, not GPUs), a
// management NIC and virtual interfaces, which the choices must ignore.
inline constexpr const char* kDgxCpus[2] = {"0-55,112-167", "56-111,168-223"};
inline void buildDgxH100(SysfsTree& t) {
  constexpr int kHostBridges[8] = {0x15, 0x26, 0x37, 0x48, 0x95, 0xa6, 0xb7, 0xc8};
  buildEightGpuServer(
      t, kDgxCpus, kHostBridges, [&](int i, const std::string& sw, int hb, int node) {
        t.rdma(fmt::format("mlx5_{}", i), fmt::format("{}/{}/{}", sw, bus(hb + 2, 1), bus(hb + 4)),
               node, kDgxCpus[node]);
      });
  t.pci("pci0000:00/0000:00:01.0/" + bus(0x02), 0x10de, 0x068000, 0, kDgxCpus[0]);  // NVSwitch
  t.pci("pci0000:00/0000:00:01.1/" + bus(0x03), 0x10de, 0x068000, 0, kDgxCpus[0]);
  t.pci("pci0000:00/0000:00:1c.0/" + bus(0x05), 0x8086, 0x020000, 0, kDgxCpus[0]);
  t.net("eno1", "pci0000:00/0000:00:1c.0/" + bus(0x05));
  t.net("lo", "");
  t.net("docker0", "");
}

// AWS p5.48xlarge: 2 sockets (48 cores, 2 threads each), 8 H100 and 32 EFA
// devices, 4 behind each GPU's PCIe switch (each on a downstream port).
// EFA names are rdmap<bus in decimal>s0.
inline constexpr const char* kP5Cpus[2] = {"0-47,96-143", "48-95,144-191"};
inline void buildP5(SysfsTree& t) {
  constexpr int kHostBridges[8] = {0x10, 0x20, 0x30, 0x40, 0x90, 0xa0, 0xb0, 0xc0};
  buildEightGpuServer(t, kP5Cpus, kHostBridges, [&](int, const std::string& sw, int hb, int node) {
    for (int k = 0; k < 4; ++k) {
      const int b = hb + 4 + k;
      t.rdma(fmt::format("rdmap{}s0", b), fmt::format("{}/{}/{}", sw, bus(hb + 2, k + 1), bus(b)),
             node, kP5Cpus[node], 1, 0x1d0f);
    }
  });
}

// A 2-socket PCIe server: 4 GPUs on socket 0 (two host bridges, a root port
// each), both NICs on socket 1 (a host bridge each).
inline constexpr const char* kPcieCpus[2] = {"0-15,32-47", "16-31,48-63"};
inline void buildCrossSocket(SysfsTree& t) {
  t.numa(0, kPcieCpus[0]);
  t.numa(1, kPcieCpus[1]);
  t.gpu("pci0000:00/0000:00:01.0/" + bus(0x01), 0, kPcieCpus[0]);
  t.gpu("pci0000:00/0000:00:03.0/" + bus(0x02), 0, kPcieCpus[0]);
  t.gpu("pci0000:40/0000:40:01.0/" + bus(0x41), 0, kPcieCpus[0]);
  t.gpu("pci0000:40/0000:40:03.0/" + bus(0x42), 0, kPcieCpus[0]);
  t.rdma("mlx5_0", "pci0000:80/0000:80:01.0/" + bus(0x81), 1, kPcieCpus[1]);
  t.rdma("mlx5_1", "pci0000:c0/0000:c0:01.0/" + bus(0xc1), 1, kPcieCpus[1]);
}

// One socket, one dual-port ConnectX card shown as two PCI functions
// (mlx5_0 = 44:00.0, mlx5_1 = 44:00.1) behind a switch. GPU0 on the same
// switch (PIX), GPU1 behind a second switch below it (PXB), GPU2 on another
// root port (PHB), GPU3 on another host bridge (NODE).
inline void buildDualPort(SysfsTree& t) {
  const char* cpus = "0-31";
  t.numa(0, cpus);
  const std::string sw = "pci0000:40/0000:40:01.1/" + bus(0x41);
  t.gpu(fmt::format("{}/{}/{}", sw, bus(0x42, 0), bus(0x43)), 0, cpus);
  t.rdma("mlx5_0", fmt::format("{}/{}/{}", sw, bus(0x42, 1), bus(0x44, 0, 0)), 0, cpus);
  t.rdma("mlx5_1", fmt::format("{}/{}/{}", sw, bus(0x42, 1), bus(0x44, 0, 1)), 0, cpus);
  t.gpu(fmt::format("{}/{}/{}/{}/{}", sw, bus(0x42, 2), bus(0x45), bus(0x46), bus(0x47)), 0, cpus);
  t.gpu("pci0000:40/0000:40:03.1/" + bus(0x48), 0, cpus);
  t.gpu("pci0000:80/0000:80:01.1/" + bus(0x81), 0, cpus);
}

// One mlx5 device with `ports` ports and two GPUs on its switch.
inline void buildOneDevicePorts(SysfsTree& t, int ports) {
  t.numa(0, "0-7");
  const std::string sw = "pci0000:00/0000:00:01.0/" + bus(0x01);
  t.gpu(fmt::format("{}/{}/{}", sw, bus(0x02, 0), bus(0x03)), 0, "0-7");
  t.gpu(fmt::format("{}/{}/{}", sw, bus(0x02, 1), bus(0x04)), 0, "0-7");
  t.rdma("mlx5_0", fmt::format("{}/{}/{}", sw, bus(0x02, 2), bus(0x05)), 0, "0-7", ports);
}

// A small two-socket host whose CPU numbers exist on any machine with two
// CPUs, for the tests that really bind (tidalrun, init): CPU 0 is NUMA node
// 0, CPU 1 node 1. GPU0 (03:00.0) and mlx5_0 share a switch on node 1; GPU1
// (81:00.0) is on node 0 with mlx5_1 behind another host bridge (NODE). So
// GPU binding gives local rank 0 CPU 1 and rank 1 CPU 0, the reverse of core.
inline constexpr const char* kTwoCpuGpuBus[2] = {"0000:03:00.0", "0000:81:00.0"};
inline void buildTwoCpuHost(SysfsTree& t) {
  t.numa(0, "0");
  t.numa(1, "1");
  const std::string sw = "pci0000:00/0000:00:01.0/" + bus(0x01);
  t.gpu(fmt::format("{}/{}/{}", sw, bus(0x02, 0), bus(0x03)), 1, "1");
  t.rdma("mlx5_0", fmt::format("{}/{}/{}", sw, bus(0x02, 1), bus(0x04)), 1, "1");
  t.gpu("pci0000:80/0000:80:01.0/" + bus(0x81), 0, "0");
  t.rdma("mlx5_1", "pci0000:c0/0000:c0:01.0/" + bus(0xc1), 0, "0");
}

// A VM like the CI machine: no GPU, no RDMA device, one virtio NIC and
// virtual interfaces, numa_node -1.
inline void buildNoGpu(SysfsTree& t) {
  t.numa(0, "0-1");
  t.pci("pci0000:00/0000:00:03.0", 0x1af4, 0x020000, -1, "0-1");
  std::filesystem::create_directories(t.root() + "/devices/pci0000:00/0000:00:03.0/virtio2");
  t.net("eth0", "pci0000:00/0000:00:03.0/virtio2");
  t.net("lo", "");
  t.net("ifb0", "");
}

}  // namespace tidal::topo::test
