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

TEST(Topology, ConfiguredLevelNamesAreMatchedFromTheLeafSwitchesUp) {
  auto switches = ParseTopology(testing::ReadTestData("topology_two_leaves.txt"));
  ASSERT_TRUE(switches.ok());
  auto named = MapTopology(*switches, {"pod", "rack"});
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(named->labels.at("n3"), (Labels{{"pod", "s0"}, {"rack", "l1"}}));
  EXPECT_EQ(named->note, "");
  // One name for two switch levels: the leaf switches; the spine is left out, and the note says so. (This
  // was an error that stopped the whole sync: no drain or outage of the cluster was mirrored after it.)
  auto fewer = MapTopology(*switches, {"rack"});
  ASSERT_TRUE(fewer.ok()) << fewer.status().message();
  EXPECT_EQ(fewer->labels.at("n3"), (Labels{{"rack", "l1"}}));
  EXPECT_NE(fewer->note.find("topology_levels"), std::string::npos) << fewer->note;
  // Three names for two levels: the top switch stands for the level above it too.
  auto more = MapTopology(*switches, {"zone", "pod", "rack"});
  ASSERT_TRUE(more.ok());
  EXPECT_EQ(more->labels.at("n0"), (Labels{{"zone", "s0"}, {"pod", "s0"}, {"rack", "l0"}}));
  EXPECT_NE(more->note.find("topology_levels"), std::string::npos) << more->note;
}

// A site's three-level tree (leaf, spine, core) under the default two names: leaf and spine are the
// switches' own, the core level is left out.
TEST(Topology, ADeeperTreeThanTheLevelNamesKeepsItsFinestLevels) {
  const char* text =
      "SwitchName=leaf-1 Level=0 LinkSpeed=1 Nodes=g[001-002]\n"
      "SwitchName=leaf-2 Level=0 LinkSpeed=1 Nodes=g[003-004]\n"
      "SwitchName=spine-1 Level=1 LinkSpeed=1 Nodes=g[001-002] Switches=leaf-1\n"
      "SwitchName=spine-2 Level=1 LinkSpeed=1 Nodes=g[003-004] Switches=leaf-2\n"
      "SwitchName=core Level=2 LinkSpeed=1 Nodes=g[001-004] Switches=spine-[1-2]\n";
  auto switches = ParseTopology(text);
  ASSERT_TRUE(switches.ok()) << switches.status().message();
  auto m = MapTopology(*switches, {"spine", "leaf"});
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->labels.at("g001"), (Labels{{"spine", "spine-1"}, {"leaf", "leaf-1"}}));
  EXPECT_EQ(m->labels.at("g004"), (Labels{{"spine", "spine-2"}, {"leaf", "leaf-2"}}));
  EXPECT_NE(m->note.find("the top switch level is left out"), std::string::npos) << m->note;
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
