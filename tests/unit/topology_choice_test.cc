// Topology discovery and the per-rank choices on recorded server layouts
// (topology_fixtures.h). Each layout has a table: for every local rank, the
// GPU, the NICs, the class, the GDR decision and the CPU set it must get.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "core/error.h"
#include "scoped_env.h"
#include "topology/cpu_set.h"
#include "topology/detect.h"
#include "topology/nic_choice.h"
#include "topology/report.h"
#include "topology/sysfs_discovery.h"
#include "topology_fixtures.h"

namespace tidal::topo {
namespace {

using test::SysfsTree;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Expected {
  int rank;
  std::string gpu;  // bus id, "" none
  std::vector<std::string> nics;
  std::string cls;  // "-" unrestricted
  bool gdr;
  std::string cpus;
  bool warning;
};

void checkTable(const Topology& t, const ChoiceSettings& s, const std::vector<Expected>& table) {
  ASSERT_EQ(static_cast<int>(table.size()), effectiveLocalRanks(t, s)) << "one row per rank";
  for (const auto& want : table) {
    SCOPED_TRACE(fmt::format("local rank {}", want.rank));
    const RankChoice got = chooseForRank(t, want.rank, s);
    EXPECT_EQ(got.gpuBusId, want.gpu);
    EXPECT_EQ(got.nics, want.nics);
    EXPECT_EQ(got.path ? className(*got.path) : "-", want.cls);
    EXPECT_EQ(got.gdr, want.gdr) << got.gdrReason;
    EXPECT_EQ(got.cpus, want.cpus);
    EXPECT_EQ(!got.warnings.empty(), want.warning);
  }
}

PciLocation at(const std::string& path, int numa = 0) {
  PciLocation loc;
  std::stringstream in(path);
  for (std::string p; std::getline(in, p, '/');) loc.path.push_back(p);
  loc.busId = loc.path.back();
  loc.numaNode = numa;
  return loc;
}

TEST(PathClass, FromThePciPaths) {
  const auto gpu = at("pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0");
  EXPECT_EQ(classify(gpu, gpu), PathClass::LOC);
  // Sibling downstream ports of one switch.
  EXPECT_EQ(classify(gpu, at("pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:19:00.0")),
            PathClass::PIX);
  // Two functions of one card directly on a root port.
  EXPECT_EQ(classify(at("pci0000:00/0000:00:01.0/0000:01:00.0"),
                     at("pci0000:00/0000:00:01.0/0000:01:00.1")),
            PathClass::PIX);
  // A second switch below the first.
  EXPECT_EQ(classify(gpu, at("pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:02.0/0000:1a:00.0/"
                             "0000:1b:00.0/0000:1c:00.0")),
            PathClass::PXB);
  // A bridge below a downstream port is a second hop: more than one switch.
  EXPECT_EQ(classify(gpu, at("pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:03.0/0000:1d:00.0/"
                             "0000:1e:00.0")),
            PathClass::PXB);
  EXPECT_EQ(classify(gpu, at("pci0000:15/0000:15:03.0/0000:30:00.0")), PathClass::PHB);
  EXPECT_EQ(classify(gpu, at("pci0000:26/0000:26:01.0/0000:27:00.0")), PathClass::NODE);
  EXPECT_EQ(classify(gpu, at("pci0000:95/0000:95:01.0/0000:96:00.0", 1)), PathClass::SYS);
}

TEST(GdrLevel, NamesAndNcclNumbers) {
  EXPECT_EQ(parseGdrLevel("PXB"), PathClass::PXB);
  EXPECT_EQ(parseGdrLevel("phb"), PathClass::PHB);
  EXPECT_EQ(parseGdrLevel("NODE"), PathClass::NODE);
  EXPECT_EQ(parseGdrLevel("0"), PathClass::LOC);
  EXPECT_EQ(parseGdrLevel("2"), PathClass::PXB);
  EXPECT_EQ(parseGdrLevel("3"), PathClass::PHB);
  EXPECT_EQ(parseGdrLevel("4"), PathClass::SYS);
  EXPECT_EQ(parseGdrLevel("5"), PathClass::SYS);
  EXPECT_TRUE(gdrAllowed(PathClass::PXB, PathClass::PXB));
  EXPECT_FALSE(gdrAllowed(PathClass::PHB, PathClass::PXB));
  EXPECT_TRUE(gdrAllowed(PathClass::NODE, PathClass::PHB)) << "NCCL's PHB: the same NUMA node";
  EXPECT_FALSE(gdrAllowed(PathClass::SYS, PathClass::PHB));
  EXPECT_FALSE(gdrAllowed(PathClass::PIX, PathClass::LOC));
}

TEST(GdrLevel, BogusValueIsAnErrorNamingTheVariableAndValue) {
  tidal::test::ScopedEnv env("TIDAL_NET_GDR_LEVEL", "bogus");
  try {
    choiceSettingsFromParams();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), tidalInvalidArgument);
    EXPECT_THAT(e.what(), HasSubstr("TIDAL_NET_GDR_LEVEL='bogus'"));
  }
  EXPECT_THROW(parseGdrLevel("6"), Error);
  EXPECT_THROW(parseGdrLevel(""), Error);
}

TEST(CpuSet, ParsesAndPrintsCpulists) {
  const CpuSet s = CpuSet::parse("56-111,168-223\n", "test");
  EXPECT_EQ(s.text(), "56-111,168-223");
  EXPECT_TRUE(CpuSet::parse("60-61", "test").isSubsetOf(s));
  EXPECT_FALSE(CpuSet::parse("0,60", "test").isSubsetOf(s));
  EXPECT_EQ(CpuSet::parse("3,1,2,7", "test").text(), "1-3,7");
  EXPECT_THAT([] { CpuSet::parse("0-x", "local_cpulist of 0000:18:00.0"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("local_cpulist of 0000:18:00.0")));
}

TEST(Discovery, DgxH100GpusNicsAndPaths) {
  SysfsTree tree;
  test::buildDgxH100(tree);
  const Topology t = discoverFromSysfs(tree.root());
  ASSERT_EQ(t.gpus.size(), 8u) << "NVSwitches are NVIDIA devices but not GPUs";
  EXPECT_EQ(t.gpus[0].pci.busId, "0000:18:00.0");
  EXPECT_EQ(t.gpus[7].pci.busId, "0000:cb:00.0");
  EXPECT_THAT(t.gpus[0].pci.path, ElementsAre("pci0000:15", "0000:15:01.0", "0000:16:00.0",
                                              "0000:17:00.0", "0000:18:00.0"));
  EXPECT_EQ(t.gpus[5].pci.numaNode, 1);
  EXPECT_EQ(t.gpus[5].pci.cpus, "56-111,168-223");
  EXPECT_EQ(t.gpus[0].pci.linkSpeed, "32.0 GT/s PCIe");
  EXPECT_EQ(t.gpus[0].pci.linkWidth, "16");
  ASSERT_EQ(t.nics.size(), 9u) << "8 RDMA + eno1; lo and docker0 are virtual";
  EXPECT_EQ(t.nics[0].name(), "mlx5_0:1");
  EXPECT_EQ(t.nics[0].pci.busId, "0000:19:00.0");
  EXPECT_EQ(t.nics[8].name(), "eno1");
  EXPECT_EQ(t.nics[8].kind, NicKind::Ethernet);
  ASSERT_EQ(t.numa.size(), 2u);
  EXPECT_EQ(t.numa[1].cpus, "56-111,168-223");
}

TEST(Choice, DgxH100OneNicPerGpu) {
  SysfsTree tree;
  test::buildDgxH100(tree);
  const Topology t = discoverFromSysfs(tree.root());
  const std::string c0 = test::kDgxCpus[0], c1 = test::kDgxCpus[1];
  checkTable(t, {},
             {
                 {0, "0000:18:00.0", {"mlx5_0:1"}, "PIX", true, c0, false},
                 {1, "0000:29:00.0", {"mlx5_1:1"}, "PIX", true, c0, false},
                 {2, "0000:3a:00.0", {"mlx5_2:1"}, "PIX", true, c0, false},
                 {3, "0000:4b:00.0", {"mlx5_3:1"}, "PIX", true, c0, false},
                 {4, "0000:98:00.0", {"mlx5_4:1"}, "PIX", true, c1, false},
                 {5, "0000:a9:00.0", {"mlx5_5:1"}, "PIX", true, c1, false},
                 {6, "0000:ba:00.0", {"mlx5_6:1"}, "PIX", true, c1, false},
                 {7, "0000:cb:00.0", {"mlx5_7:1"}, "PIX", true, c1, false},
             });
}

TEST(Choice, DgxH100RanksBeyondTheGpusUseTheNicsOfTheirNumaNode) {
  SysfsTree tree;
  test::buildDgxH100(tree);
  const Topology t = discoverFromSysfs(tree.root());
  ChoiceSettings s;
  s.localRanks = 10;
  s.rankCpus = "60-63";
  const RankChoice c = chooseForRank(t, 9, s);
  EXPECT_EQ(c.gpu, -1);
  EXPECT_THAT(c.nics, ElementsAre("mlx5_4:1", "mlx5_5:1", "mlx5_6:1", "mlx5_7:1"));
  ASSERT_TRUE(c.path);
  EXPECT_EQ(*c.path, PathClass::NODE);
  EXPECT_FALSE(c.gdr);
  EXPECT_EQ(c.cpus, "60-63");
  s.rankCpus = "0,60";  // spans both nodes: no restriction
  EXPECT_EQ(chooseForRank(t, 9, s).nics.size(), 8u);
  EXPECT_EQ(chooseForRank(t, 7, s).nics, std::vector<std::string>{"mlx5_7:1"});
}

TEST(Choice, GpuBusIdFromCudaPicksTheRanksGpu) {
  SysfsTree tree;
  test::buildDgxH100(tree);
  const Topology t = discoverFromSysfs(tree.root());
  ChoiceSettings s;
  s.gpuBusIds = {"00000000:A9:00.0"};
  s.localRanks = 1;
  const RankChoice c = chooseForRank(t, 0, s);
  EXPECT_EQ(c.gpuBusId, "0000:a9:00.0");
  EXPECT_EQ(c.nics, std::vector<std::string>{"mlx5_5:1"});
  s.gpuBusIds = {"0000:77:00.0"};
  EXPECT_THAT([&] { chooseForRank(t, 0, s); },
              ::testing::ThrowsMessage<Error>(HasSubstr("0000:77:00.0")));
}

TEST(Choice, P5FourEfaDevicesPerGpu) {
  SysfsTree tree;
  test::buildP5(tree);
  const Topology t = discoverFromSysfs(tree.root());
  ASSERT_EQ(t.nics.size(), 32u);
  const std::string c0 = test::kP5Cpus[0], c1 = test::kP5Cpus[1];
  auto efa = [](int first) {
    std::vector<std::string> names;
    for (int b = first; b < first + 4; ++b) names.push_back(fmt::format("rdmap{}s0:1", b));
    return names;
  };
  checkTable(t, {},
             {
                 {0, "0000:13:00.0", efa(20), "PIX", true, c0, false},
                 {1, "0000:23:00.0", efa(36), "PIX", true, c0, false},
                 {2, "0000:33:00.0", efa(52), "PIX", true, c0, false},
                 {3, "0000:43:00.0", efa(68), "PIX", true, c0, false},
                 {4, "0000:93:00.0", efa(148), "PIX", true, c1, false},
                 {5, "0000:a3:00.0", efa(164), "PIX", true, c1, false},
                 {6, "0000:b3:00.0", efa(180), "PIX", true, c1, false},
                 {7, "0000:c3:00.0", efa(196), "PIX", true, c1, false},
             });
}

TEST(Choice, CrossSocketNicsAreSharedAndWarned) {
  SysfsTree tree;
  test::buildCrossSocket(tree);
  const Topology t = discoverFromSysfs(tree.root());
  const std::string c0 = test::kPcieCpus[0];
  std::vector<Expected> table = {
      {0, "0000:01:00.0", {"mlx5_0:1"}, "SYS", false, c0, true},
      {1, "0000:02:00.0", {"mlx5_1:1"}, "SYS", false, c0, true},
      {2, "0000:41:00.0", {"mlx5_0:1"}, "SYS", false, c0, true},
      {3, "0000:42:00.0", {"mlx5_1:1"}, "SYS", false, c0, true},
  };
  checkTable(t, {}, table);
  EXPECT_THAT(chooseForRank(t, 0, {}).warnings.at(0), HasSubstr("NUMA"));
  for (const char* level : {"SYS", "4", "5"}) {
    SCOPED_TRACE(level);
    ChoiceSettings s;
    s.gdrLevel = parseGdrLevel(level);
    for (auto& row : table) row.gdr = true;
    checkTable(t, s, table);
  }
  ChoiceSettings phb;
  phb.gdrLevel = PathClass::PHB;
  EXPECT_FALSE(chooseForRank(t, 0, phb).gdr);
}

TEST(Choice, DualPortCardAsTwoFunctions) {
  SysfsTree tree;
  test::buildDualPort(tree);
  const Topology t = discoverFromSysfs(tree.root());
  const std::vector<std::string> both = {"mlx5_0:1", "mlx5_1:1"};
  std::vector<Expected> table = {
      {0, "0000:43:00.0", both, "PIX", true, "0-31", false},
      {1, "0000:47:00.0", both, "PXB", true, "0-31", false},
      {2, "0000:48:00.0", both, "PHB", false, "0-31", false},
      {3, "0000:81:00.0", both, "NODE", false, "0-31", false},
  };
  checkTable(t, {}, table);
  ChoiceSettings pix;
  pix.gdrLevel = PathClass::PIX;
  table[1].gdr = false;
  checkTable(t, pix, table);
  ChoiceSettings phb;
  phb.gdrLevel = PathClass::PHB;
  for (auto& row : table) row.gdr = true;
  checkTable(t, phb, table);
}

// Two GPUs on the switch of one mlx5 device: with two ports each GPU gets
// one, with one port both get it.
TEST(Choice, OneDeviceSharedByTwoGpus) {
  for (const int ports : {2, 1}) {
    SCOPED_TRACE(fmt::format("{} port(s)", ports));
    SysfsTree tree;
    test::buildOneDevicePorts(tree, ports);
    const Topology t = discoverFromSysfs(tree.root());
    const std::string second = ports == 2 ? "mlx5_0:2" : "mlx5_0:1";
    checkTable(t, {},
               {
                   {0, "0000:03:00.0", {"mlx5_0:1"}, "PIX", true, "0-7", false},
                   {1, "0000:04:00.0", {second}, "PIX", true, "0-7", false},
               });
  }
}

TEST(Choice, NoGpuNoRdmaKeepsEveryNic) {
  SysfsTree tree;
  test::buildNoGpu(tree);
  const Topology t = discoverFromSysfs(tree.root());
  ASSERT_EQ(t.nics.size(), 1u) << "lo and ifb0 are virtual";
  EXPECT_THAT(t.nics[0].pci.path, ElementsAre("pci0000:00", "0000:00:03.0"));
  checkTable(t, {}, {{0, "", {"eth0"}, "-", false, "0-1", false}});
  ChoiceSettings two;
  two.localRanks = 2;
  checkTable(
      t, two,
      {{0, "", {"eth0"}, "-", false, "0-1", false}, {1, "", {"eth0"}, "-", false, "0-1", false}});
}

// Column `col` of the matrix row that starts with `label`.
std::string cell(const std::string& matrix, const std::string& label, size_t col) {
  std::stringstream in(matrix);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == ' ') continue;  // the header row, the legend
    std::stringstream fields(line);
    std::vector<std::string> tokens;
    for (std::string f; fields >> f;) tokens.push_back(f);
    if (!tokens.empty() && tokens[0] == label) return col < tokens.size() ? tokens[col] : "";
  }
  return "no row " + label;
}

TEST(Report, MatrixAndChoiceLines) {
  SysfsTree tree;
  test::buildDgxH100(tree);
  tidal::test::ScopedEnv sysfs("TIDAL_TOPO_SYSFS", tree.root().c_str());
  const Topology t = detectTopology().topology;
  const std::string m = topologyMatrix(t);
  // Columns: label, GPU0..GPU7 (1..8), NIC0..NIC8 (9..17), CPU, NUMA.
  EXPECT_EQ(cell(m, "GPU0", 1), "X");
  EXPECT_EQ(cell(m, "GPU0", 2), "NODE");
  EXPECT_EQ(cell(m, "GPU0", 5), "SYS");
  EXPECT_EQ(cell(m, "GPU0", 9), "PIX");
  EXPECT_EQ(cell(m, "GPU0", 10), "NODE");
  EXPECT_EQ(cell(m, "GPU5", 14), "PIX");
  EXPECT_EQ(cell(m, "GPU0", 18), "0-55,112-167");
  EXPECT_EQ(cell(m, "GPU6", 19), "1");
  EXPECT_EQ(cell(m, "NIC3", 4), "PIX");
  EXPECT_THAT(m, HasSubstr("NIC8: eno1 (ethernet, 0000:05:00.0, 32.0 GT/s PCIe x16)"));
  EXPECT_EQ(choiceLine(chooseForRank(t, 2, {})),
            "rank 2  GPU2 0000:3a:00.0  NICs mlx5_2:1  PIX  GDR on (PIX is within "
            "TIDAL_NET_GDR_LEVEL=PXB)  CPUs 0-55,112-167");
}

}  // namespace
}  // namespace tidal::topo
