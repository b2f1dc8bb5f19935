// CPU binding decisions (topology/binding.h) and GDR per NIC
// (topology/nic_choice.h gdrForNic) on the recorded layouts of
// topology_fixtures.h, each with the exact CPU sets the rules must give.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "topology/affinity.h"
#include "topology/binding.h"
#include "topology/cpu_set.h"
#include "topology/nic_choice.h"
#include "topology/sysfs_discovery.h"
#include "topology_fixtures.h"

namespace tidal::topo {
namespace {

using test::SysfsTree;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

template <typename Build>
Topology layout(Build build) {
  SysfsTree tree;
  build(tree);
  return discoverFromSysfs(tree.root());
}

CpuSet cpus(const std::string& text) { return CpuSet::parse(text, "test"); }

// The CPU lists and descriptions of a plan, for one-line comparisons.
std::vector<std::string> texts(const std::vector<RankBinding>& plan) {
  std::vector<std::string> out;
  for (const auto& b : plan) out.push_back(b.cpus.text());
  return out;
}
std::vector<std::string> whats(const std::vector<RankBinding>& plan) {
  std::vector<std::string> out;
  for (const auto& b : plan) out.push_back(b.what);
  return out;
}

const std::vector<int> kEightGpus = {0, 1, 2, 3, 4, 5, 6, 7};

TEST(CpuSetOps, OfAndIntersection) {
  EXPECT_EQ(CpuSet::of({5, 1, 2, 1}).text(), "1-2,5");
  EXPECT_EQ(cpus("0-55,112-167").intersection(cpus("50-120")).text(), "50-55,112-120");
  EXPECT_TRUE(cpus("0-3").intersection(cpus("4-7")).empty());
  EXPECT_EQ(cpus("0-3,8").size(), 5u);
}

TEST(BindPolicyNames, RoundTripAndDefault) {
  for (const char* name : {"none", "core", "numa", "gpu"}) {
    const auto p = parseBindPolicy(name);
    ASSERT_TRUE(p) << name;
    EXPECT_STREQ(bindPolicyName(*p), name);
  }
  EXPECT_FALSE(parseBindPolicy("socket"));
  EXPECT_FALSE(parseBindPolicy("GPU"));
  EXPECT_EQ(defaultBindPolicy(layout(test::buildDgxH100)), BindPolicy::Gpu);
  EXPECT_EQ(defaultBindPolicy(layout(test::buildNoGpu)), BindPolicy::Core);
}

TEST(PlanBindings, DgxGpuPolicyGivesEachRankItsGpusSocket) {
  const Topology t = layout(test::buildDgxH100);
  const auto plan = planBindings(t, BindPolicy::Gpu, cpus("0-223"), kEightGpus);
  const std::string s0 = test::kDgxCpus[0], s1 = test::kDgxCpus[1];
  EXPECT_THAT(texts(plan), ElementsAre(s0, s0, s0, s0, s1, s1, s1, s1));
  EXPECT_EQ(plan[0].what, "CPUs 0-55,112-167 (GPU 0000:18:00.0)");
  EXPECT_EQ(plan[7].what, "CPUs 56-111,168-223 (GPU 0000:cb:00.0)");
}

TEST(PlanBindings, RanksWithoutAGpuFallBackToOneCore) {
  const Topology t = layout(test::buildDgxH100);
  // Ten local ranks: GPUs for 0-7, none for 8 and 9.
  const auto gpus = gpusOfLocalRanks(t, 10, std::nullopt, nullptr);
  EXPECT_THAT(gpus, ElementsAre(0, 1, 2, 3, 4, 5, 6, 7, -1, -1));
  const auto plan = planBindings(t, BindPolicy::Gpu, cpus("0-223"), gpus);
  EXPECT_EQ(plan[8].cpus.text(), "8");
  EXPECT_EQ(plan[8].what, "CPU 8 (no GPU)");
  EXPECT_EQ(plan[9].what, "CPU 9 (no GPU)");
}

TEST(PlanBindings, GpuCpusAreCutToTheAllowedSet) {
  const Topology t = layout(test::buildDgxH100);
  // As under `taskset -c 50-60`: socket 0 keeps 50-55, socket 1 56-60.
  const auto plan = planBindings(t, BindPolicy::Gpu, cpus("50-60"), kEightGpus);
  EXPECT_THAT(texts(plan),
              ElementsAre("50-55", "50-55", "50-55", "50-55", "56-60", "56-60", "56-60", "56-60"));
  // Only socket 0 allowed: the ranks of socket 1's GPUs get single cores.
  const auto narrow = planBindings(t, BindPolicy::Gpu, cpus("0-3"), kEightGpus);
  EXPECT_THAT(texts(narrow), ElementsAre("0-3", "0-3", "0-3", "0-3", "0", "1", "2", "3"));
  EXPECT_EQ(narrow[4].what,
            "CPU 0 (GPU 0000:98:00.0's CPUs 56-111,168-223 are outside the allowed 0-3)");
}

TEST(PlanBindings, NumaSpreadsRanksInBlocks) {
  const Topology t = layout(test::buildCrossSocket);
  const std::string s0 = test::kPcieCpus[0], s1 = test::kPcieCpus[1];
  const auto four = planBindings(t, BindPolicy::Numa, cpus("0-63"), {-1, -1, -1, -1});
  EXPECT_THAT(texts(four), ElementsAre(s0, s0, s1, s1));
  EXPECT_EQ(four[2].what, "CPUs 16-31,48-63 (NUMA node 1)");
  const auto three = planBindings(t, BindPolicy::Numa, cpus("0-63"), {-1, -1, -1});
  EXPECT_THAT(texts(three), ElementsAre(s0, s0, s1));
  const auto one = planBindings(t, BindPolicy::Numa, cpus("0-63"), {-1});
  EXPECT_THAT(texts(one), ElementsAre(s0));
  // A node with no allowed CPU takes no ranks.
  const auto cut = planBindings(t, BindPolicy::Numa, cpus("16-19"), {-1, -1});
  EXPECT_THAT(texts(cut), ElementsAre("16-19", "16-19"));
}

TEST(PlanBindings, NumaWithoutNodesIsCore) {
  const Topology none;  // nothing known
  const auto plan = planBindings(none, BindPolicy::Numa, cpus("4-5"), {-1, -1, -1});
  EXPECT_THAT(texts(plan), ElementsAre("4", "5", "4"));
  EXPECT_EQ(plan[0].what, "CPU 4 (no NUMA node known)");
}

TEST(PlanBindings, CoreAndNone) {
  const Topology t = layout(test::buildDgxH100);
  const auto core = planBindings(t, BindPolicy::Core, cpus("2,4,6"), {0, 1, 2, 3});
  EXPECT_THAT(texts(core), ElementsAre("2", "4", "6", "2"));
  EXPECT_THAT(whats(core), ElementsAre("CPU 2", "CPU 4", "CPU 6", "CPU 2"));
  const auto none = planBindings(t, BindPolicy::None, cpus("0-223"), {0, 1});
  EXPECT_THAT(texts(none), ElementsAre("", ""));
}

TEST(PlanBindings, TwoCpuFixtureReversesCore) {
  const Topology t = layout(test::buildTwoCpuHost);
  const auto gpus = gpusOfLocalRanks(t, 3, std::nullopt, nullptr);
  EXPECT_THAT(texts(planBindings(t, BindPolicy::Gpu, cpus("0-1"), gpus)),
              ElementsAre("1", "0", "0"));
  EXPECT_THAT(texts(planBindings(t, BindPolicy::Numa, cpus("0-1"), gpus)),
              ElementsAre("0", "0", "1"));
  EXPECT_THAT(texts(planBindings(t, BindPolicy::Core, cpus("0-1"), gpus)),
              ElementsAre("0", "1", "0"));
}

TEST(GpusOfLocalRanks, CudaVisibleDevicesAsCudaReadsIt) {
  const Topology t = layout(test::buildDgxH100);
  EXPECT_THAT(gpusOfLocalRanks(t, 3, "4,5", nullptr), ElementsAre(4, 5, -1));
  EXPECT_THAT(gpusOfLocalRanks(t, 2, " 7 , 0 ", nullptr), ElementsAre(7, 0));
  EXPECT_THAT(gpusOfLocalRanks(t, 2, "", nullptr), ElementsAre(-1, -1)) << "empty: no GPU";
  EXPECT_THAT(gpusOfLocalRanks(t, 3, "1,x,2", nullptr), ElementsAre(1, -1, -1))
      << "CUDA stops at the first entry that is not an index";
  EXPECT_THAT(gpusOfLocalRanks(t, 2, "3,8,2", nullptr), ElementsAre(3, -1))
      << "8 is not a GPU of this host";
  EXPECT_THAT(gpusOfLocalRanks(t, 2, "-1", nullptr), ElementsAre(-1, -1));
  std::string note;
  EXPECT_THAT(gpusOfLocalRanks(t, 2, "GPU-8f3a,GPU-11aa", &note), ElementsAre(0, 1));
  EXPECT_EQ(note,
            "CUDA_VISIBLE_DEVICES=GPU-8f3a,GPU-11aa names GPUs by UUID, which only the driver "
            "maps to bus ids: local rank i is taken to use GPU i in bus-id order");
  EXPECT_THAT(gpusOfLocalRanks(layout(test::buildNoGpu), 2, std::nullopt, nullptr),
              ElementsAre(-1, -1));
}

RankChoice choiceWithGpu(const std::string& busId, const std::string& cpuList) {
  RankChoice c;
  c.gpu = 0;
  c.gpuBusId = busId;
  c.cpus = cpuList;
  return c;
}

TEST(InitBinding, OnlyAnUnboundRankWithAGpuIsBound) {
  const RankChoice gpu = choiceWithGpu("0000:18:00.0", "0-55,112-167");
  const InitBinding b = decideInitBinding(true, gpu, cpus("0-223"), 224);
  EXPECT_EQ(b.bindTo.text(), "0-55,112-167");
  EXPECT_EQ(b.why, "bound by Tidal to GPU 0000:18:00.0's CPUs (TIDAL_BIND=auto)");

  const InitBinding off = decideInitBinding(false, gpu, cpus("0-223"), 224);
  EXPECT_TRUE(off.bindTo.empty());
  EXPECT_EQ(off.why, "not bound by Tidal: TIDAL_BIND=none");

  const InitBinding bound = decideInitBinding(true, gpu, cpus("3"), 224);
  EXPECT_TRUE(bound.bindTo.empty());
  EXPECT_EQ(bound.why, "bound before init, left as it is");

  RankChoice noGpu;
  noGpu.cpus = "0-223";
  const InitBinding cpuOnly = decideInitBinding(true, noGpu, cpus("0-223"), 224);
  EXPECT_TRUE(cpuOnly.bindTo.empty());
  EXPECT_EQ(cpuOnly.why, "not bound: no GPU");

  const InitBinding unknown =
      decideInitBinding(true, choiceWithGpu("0000:18:00.0", ""), cpus("0-223"), 224);
  EXPECT_TRUE(unknown.bindTo.empty());
  EXPECT_EQ(unknown.why, "not bound: the CPUs of GPU 0000:18:00.0 are unknown");

  // local_cpulist may name CPUs that are offline: only online ones are kept.
  const InitBinding partial =
      decideInitBinding(true, choiceWithGpu("0000:18:00.0", "0-3"), cpus("2-9"), 8);
  EXPECT_EQ(partial.bindTo.text(), "2-3");
}

TEST(InitBinding, SettingIsAutoOrNone) {
  EXPECT_TRUE(initBindingEnabled("auto"));
  EXPECT_FALSE(initBindingEnabled("none"));
  try {
    initBindingEnabled("yes");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), tidalInvalidArgument);
    EXPECT_THAT(e.what(), ::testing::HasSubstr("TIDAL_BIND='yes' is not auto or none"));
  }
}

TEST(GdrForNic, ClassOfTheGpuAndTheNicActuallyUsed) {
  const Topology t = layout(test::buildDgxH100);
  ChoiceSettings s;
  const RankChoice rank0 = chooseForRank(t, 0, s);
  const auto near = gdrForNic(t, rank0, "mlx5_0:1", PathClass::PXB);
  ASSERT_TRUE(near);
  EXPECT_TRUE(near->on);
  EXPECT_EQ(near->reason, "GPU 0000:18:00.0 - mlx5_0:1: PIX is within TIDAL_NET_GDR_LEVEL=PXB");
  const auto nodeNic = gdrForNic(t, rank0, "mlx5_1:1", PathClass::PXB);
  ASSERT_TRUE(nodeNic);
  EXPECT_FALSE(nodeNic->on);
  EXPECT_EQ(nodeNic->reason, "GPU 0000:18:00.0 - mlx5_1:1: NODE is beyond TIDAL_NET_GDR_LEVEL=PXB");
  EXPECT_TRUE(gdrForNic(t, rank0, "mlx5_1:1", PathClass::PHB)->on) << "PHB admits NODE";
  const auto far = gdrForNic(t, rank0, "mlx5_4:1", PathClass::PHB);
  EXPECT_FALSE(far->on);
  EXPECT_EQ(far->reason, "GPU 0000:18:00.0 - mlx5_4:1: SYS is beyond TIDAL_NET_GDR_LEVEL=PHB");
  const auto ethernet = gdrForNic(t, rank0, "eno1", PathClass::SYS);
  EXPECT_FALSE(ethernet->on);
  EXPECT_EQ(ethernet->reason, "GPU 0000:18:00.0 - eno1: NIC is not RDMA");
  EXPECT_FALSE(gdrForNic(t, rank0, "rxe0:1", PathClass::PXB)) << "not in the topology";
  RankChoice noGpu;
  EXPECT_FALSE(gdrForNic(t, noGpu, "mlx5_0:1", PathClass::PXB)) << "no GPU, no word";
}

TEST(GdrForNic, TwoCpuFixtureTable) {
  const Topology t = layout(test::buildTwoCpuHost);
  ChoiceSettings s;
  const RankChoice r0 = chooseForRank(t, 0, s), r1 = chooseForRank(t, 1, s);
  EXPECT_EQ(r0.gpuBusId, test::kTwoCpuGpuBus[0]);
  EXPECT_THAT(r0.nics, ElementsAre("mlx5_0:1"));
  EXPECT_TRUE(r0.gdr) << r0.gdrReason;
  EXPECT_EQ(r0.cpus, "1");
  EXPECT_EQ(r1.gpuBusId, test::kTwoCpuGpuBus[1]);
  EXPECT_THAT(r1.nics, ElementsAre("mlx5_1:1"));
  EXPECT_FALSE(r1.gdr);
  EXPECT_EQ(r1.gdrReason, "NODE is beyond TIDAL_NET_GDR_LEVEL=PXB");
  EXPECT_EQ(r1.cpus, "0");
  EXPECT_EQ(gdrForNic(t, r1, "mlx5_0:1", PathClass::SYS)->reason,
            "GPU 0000:81:00.0 - mlx5_0:1: SYS is within TIDAL_NET_GDR_LEVEL=SYS");
}

TEST(Affinity, ReadAndSetThisThread) {
  const auto before = threadAffinity();
  ASSERT_TRUE(before);
  ASSERT_FALSE(before->empty());
  EXPECT_LE(static_cast<int>(before->size()), onlineCpuCount());
  // Bind to the first CPU, read it back, restore.
  const CpuSet first = CpuSet::of({before->cpus().front()});
  ASSERT_EQ(AffinityMask(first).apply(), 0);
  EXPECT_EQ(threadAffinity()->text(), first.text());
  ASSERT_EQ(AffinityMask(*before).apply(), 0);
  EXPECT_EQ(threadAffinity()->text(), before->text());
}

}  // namespace
}  // namespace tidal::topo
