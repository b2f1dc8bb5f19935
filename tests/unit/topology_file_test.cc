// TIDAL_TOPO_DUMP_FILE / TIDAL_TOPO_FILE: a dump of each recorded layout
// loads back as the same topology and gives every local rank the same
// choice; a missing or garbled file is an error naming the file and line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "core/error.h"
#include "scoped_env.h"
#include "topology/detect.h"
#include "topology/report.h"
#include "topology/topo_file.h"
#include "topology_fixtures.h"

namespace tidal::topo {
namespace {

using test::SysfsTree;
using ::testing::HasSubstr;

struct Layout {
  const char* name;
  std::function<void(SysfsTree&)> build;
};

class RoundTrip : public ::testing::TestWithParam<Layout> {};

TEST_P(RoundTrip, DumpLoadsBackWithTheSameChoices) {
  SysfsTree tree;
  GetParam().build(tree);
  const std::string dump = tree.root() + "/topology.txt";
  Detected fromSysfs;
  {
    tidal::test::ScopedEnv sysfs("TIDAL_TOPO_SYSFS", tree.root().c_str());
    tidal::test::ScopedEnv out("TIDAL_TOPO_DUMP_FILE", dump.c_str());
    fromSysfs = detectTopology();
  }
  ASSERT_TRUE(std::filesystem::exists(dump));
  Detected fromFile;
  {
    // The sysfs tree is gone for the second detection: the file alone counts.
    tidal::test::ScopedEnv sysfs("TIDAL_TOPO_SYSFS", "/nonexistent");
    tidal::test::ScopedEnv in("TIDAL_TOPO_FILE", dump.c_str());
    fromFile = detectTopology();
  }
  EXPECT_EQ(fromFile.source, "TIDAL_TOPO_FILE=" + dump);
  EXPECT_TRUE(fromFile.topology == fromSysfs.topology) << formatTopology(fromFile.topology);
  EXPECT_FALSE(fromSysfs.topology.nics.empty());
  const Topology& a = fromSysfs.topology;
  const Topology& b = fromFile.topology;
  ChoiceSettings s;
  s.localRanks = effectiveLocalRanks(a, s) + 1;  // one rank without a GPU too
  for (int r = 0; r < s.localRanks; ++r) {
    EXPECT_EQ(choiceLine(chooseForRank(a, r, s)), choiceLine(chooseForRank(b, r, s)));
  }
  EXPECT_EQ(topologyMatrix(a), topologyMatrix(b));
}

INSTANTIATE_TEST_SUITE_P(Layouts, RoundTrip,
                         ::testing::Values(Layout{"DgxH100", test::buildDgxH100},
                                           Layout{"P5", test::buildP5},
                                           Layout{"CrossSocket", test::buildCrossSocket},
                                           Layout{"DualPort", test::buildDualPort},
                                           Layout{"NoGpu", test::buildNoGpu}),
                         [](const auto& param) { return std::string(param.param.name); });

std::string errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), tidalInvalidArgument);
    return e.what();
  }
  return "no error";
}

TEST(TopoFile, MissingFileIsNamed) {
  tidal::test::ScopedEnv in("TIDAL_TOPO_FILE", "/nonexistent/topo.txt");
  EXPECT_THAT(errorOf([] { detectTopology(); }),
              HasSubstr("TIDAL_TOPO_FILE=/nonexistent/topo.txt: cannot open it"));
}

TEST(TopoFile, GarbledLinesAreNamedByFileAndLine) {
  const std::string good =
      "tidal-topology 1\n"
      "numa 0 0-7\n"
      "gpu 0000:03:00.0\n"
      "  path pci0000:00/0000:00:01.0/0000:03:00.0\n"
      "  numa_node 0\n";
  EXPECT_NO_THROW(parseTopology(good, "F"));
  const struct {
    std::string text;
    std::string expected;
  } cases[] = {
      {"", "F: empty"},
      {"# only a comment\n", "F: empty"},
      {"tidal-topology 2\n", "F line 1: expected the header"},
      {good + "switch 0000:01:00.0\n", "F line 6: unknown record 'switch'"},
      {good + "  numa_node zero\n", "F line 6: numa_node 'zero' is not a number"},
      {good + "  colour blue\n", "F line 6: unknown attribute 'colour'"},
      {"tidal-topology 1\n  path pci0000:00/0000:00:01.0\n", "F line 2: an attribute line"},
      {"tidal-topology 1\ngpu 0000:03:00.0\n  path pci0000:00/0000:00:04.0\n",
       "F line 3: path must run from a host bridge"},
      {"tidal-topology 1\ngpu 0000:03:00.0\nnic mlx5_0 1 rdma\n",
       "F line 3: GPU 0000:03:00.0 has no path"},
      {"tidal-topology 1\ngpu 3:00\n", "F line 2: '3:00' is not a PCI bus id"},
      {"tidal-topology 1\nnic mlx5_0 1 token-ring\n", "F line 2: NIC kind 'token-ring'"},
      {"tidal-topology 1\nnuma 0 0-x\n", "F line 2: '0-x' is not a CPU list"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    EXPECT_THAT(errorOf([&] { parseTopology(c.text, "F"); }), HasSubstr(c.expected));
  }
}

TEST(TopoFile, ErrorsFromTheVariableNameTheFile) {
  SysfsTree tree;
  const std::string file = tree.root() + "/bad.txt";
  std::ofstream(file) << "tidal-topology 1\n\ngpu 0000:03:00.0\n  link_width\tx16\n";
  tidal::test::ScopedEnv in("TIDAL_TOPO_FILE", file.c_str());
  EXPECT_THAT(errorOf([] { detectTopology(); }),
              HasSubstr("TIDAL_TOPO_FILE=" + file + " line 4: unknown attribute"));
}

TEST(TopoFile, SysfsRootWithoutDevicesIsAnError) {
  tidal::test::ScopedEnv sysfs("TIDAL_TOPO_SYSFS", "/nonexistent");
  EXPECT_THAT(errorOf([] { detectTopology(); }), HasSubstr("TIDAL_TOPO_SYSFS=/nonexistent"));
}

}  // namespace
}  // namespace tidal::topo
