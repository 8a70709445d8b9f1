#include "slurm/topology.h"

#include <gtest/gtest.h>

#include "tests/slurm/testdata.h"

namespace shepherd::slurm {
namespace {

using Labels = std::map<std::string, std::string>;

TEST(Topology, TwoLeavesUnderOneSpineFromScontrol) {
  auto switches = ParseTopology(testing::ReadTestData("topology_two_leaves.txt"));
  ASSERT_TRUE(switches.ok()) << switches.status().message();
  ASSERT_EQ(switches->size(), 3u);
  EXPECT_EQ((*switches)[2].name, "s0");
  EXPECT_EQ((*switches)[2].level, 1);
  EXPECT_EQ((*switches)[2].switches, (std::vector<std::string>{"l0", "l1"}));
  EXPECT_EQ((*switches)[2].nodes, (std::vector<std::string>{"n0", "n1", "n2", "n3", "n4"}));

  auto m = MapTopology(*switches);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->levels, (TopologyLevels{"spine", "leaf"}));
  ASSERT_EQ(m->labels.size(), 5u);
  EXPECT_EQ(m->labels.at("n0"), (Labels{{"spine", "s0"}, {"leaf", "l0"}}));
  EXPECT_EQ(m->labels.at("n2"), (Labels{{"spine", "s0"}, {"leaf", "l0"}}));
  EXPECT_EQ(m->labels.at("n3"), (Labels{{"spine", "s0"}, {"leaf", "l1"}}));
  EXPECT_EQ(m->labels.at("n4"), (Labels{{"spine", "s0"}, {"leaf", "l1"}}));
}

TEST(Topology, ConfiguredLevelNamesMustMatchTheDepth) {
  auto switches = ParseTopology(testing::ReadTestData("topology_two_leaves.txt"));
  ASSERT_TRUE(switches.ok());
  auto named = MapTopology(*switches, {"pod", "rack"});
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(named->labels.at("n3"), (Labels{{"pod", "s0"}, {"rack", "l1"}}));
  EXPECT_EQ(MapTopology(*switches, {"rack"}).status().code(), Code::kInvalidContent);
}

TEST(Topology, NoSwitchesGiveOneLevelAndNoLabels) {
  auto switches = ParseTopology("");
  ASSERT_TRUE(switches.ok());
  auto m = MapTopology(*switches);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->levels, (TopologyLevels{"leaf"}));
  EXPECT_TRUE(m->labels.empty());
}

// An unbalanced tree (hand-written in scontrol's format): leaf l2 hangs directly off the level-2 core c0,
// and node x9 is attached to spine s1 without a leaf.
TEST(Topology, UnbalancedBranchesRepeatTheFinerLabel) {
  const char* text =
      "SwitchName=l0 Level=0 LinkSpeed=1 Nodes=a[0-1]\n"
      "SwitchName=l2 Level=0 LinkSpeed=1 Nodes=b0\n"
      "SwitchName=s1 Level=1 LinkSpeed=1 Nodes=a[0-1],x9 Switches=l0\n"
      "SwitchName=c0 Level=2 LinkSpeed=1 Nodes=a[0-1],b0,x9 Switches=s1,l2\n";
  auto switches = ParseTopology(text);
  ASSERT_TRUE(switches.ok()) << switches.status().message();
  auto m = MapTopology(*switches);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->levels, (TopologyLevels{"core", "spine", "leaf"}));
  EXPECT_EQ(m->labels.at("a1"), (Labels{{"core", "c0"}, {"spine", "s1"}, {"leaf", "l0"}}));
  EXPECT_EQ(m->labels.at("b0"), (Labels{{"core", "c0"}, {"spine", "l2"}, {"leaf", "l2"}}));
  EXPECT_EQ(m->labels.at("x9"), (Labels{{"core", "c0"}, {"spine", "s1"}}));
}

TEST(Topology, RejectsABadLevel) {
  EXPECT_EQ(ParseTopology("SwitchName=l0 Level=x Nodes=n0\n").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ParseTopology("SwitchName=l0 Level=0 Nodes=n[0-\n").status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace shepherd::slurm
