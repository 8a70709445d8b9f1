#include "scheduler/cluster.h"

#include <gtest/gtest.h>

namespace shepherd {
namespace {

Node MakeNode(const std::string& id, const std::string& spine, const std::string& leaf, int gpus = 8) {
  Node n;
  n.id = id;
  n.hostname = id;
  n.gpus = gpus;
  n.topology = {{"spine", spine}, {"leaf", leaf}};
  return n;
}

Placement OnNode(const std::string& node, std::initializer_list<int> gpus) {
  Placement p;
  for (int g : gpus) {
    p.ranks.push_back(RankSlot{static_cast<int>(p.ranks.size()), node, g, 0, 0, 0});
  }
  return p;
}

TEST(ClusterTest, UpsertFindAndStableOrder) {
  Cluster c;
  ASSERT_TRUE(c.UpsertNode(MakeNode("b", "s0", "l0")).ok());
  ASSERT_TRUE(c.UpsertNode(MakeNode("a", "s0", "l0")).ok());
  ASSERT_TRUE(c.UpsertNode(MakeNode("c", "s0", "l1")).ok());
  ASSERT_TRUE(c.Allocate("j", OnNode("a", {0, 1})).ok());
  auto nodes = c.nodes();
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_EQ(nodes[0]->id, "b");
  EXPECT_EQ(nodes[1]->id, "a");
  EXPECT_EQ(nodes[2]->id, "c");
  ASSERT_NE(c.Find("a"), nullptr);
  EXPECT_EQ(c.Find("zz"), nullptr);
  EXPECT_EQ(c.UpsertNode(MakeNode("", "s0", "l0")).code(), Code::kInvalidArgument);
  EXPECT_EQ(c.UpsertNode(MakeNode("x", "s0", "l0", 0)).code(), Code::kInvalidArgument);
  EXPECT_EQ(c.UpsertNode(MakeNode("x", "s0", "l0", 65)).code(), Code::kInvalidArgument);
}

TEST(ClusterTest, UsableCountsSkipSpareCordonedFailed) {
  Cluster c;
  Node spare = MakeNode("spare", "s0", "l0");
  spare.spare = true;
  Node cordoned = MakeNode("cordoned", "s0", "l0");
  cordoned.schedulable = false;
  Node failed = MakeNode("failed", "s0", "l0");
  failed.failed = true;
  for (const Node& n : {MakeNode("ok", "s0", "l0", 4), spare, cordoned, failed}) {
    ASSERT_TRUE(c.UpsertNode(n).ok());
  }
  EXPECT_EQ(c.UsableGpus(), 4);
  EXPECT_EQ(c.FreeUsableGpus(), 4);
  ASSERT_TRUE(c.Allocate("j", OnNode("ok", {1, 3})).ok());
  EXPECT_EQ(c.FreeUsableGpus(), 2);
  EXPECT_EQ(c.FreeGpuMask("ok"), 0b0101u);
  EXPECT_EQ(c.AllocatedGpus("ok"), 2);
  // Cordoning the used node removes its GPUs from both counts; uncordoning brings them back.
  Node ok = *c.Find("ok");
  ok.schedulable = false;
  ASSERT_TRUE(c.UpsertNode(ok).ok());
  EXPECT_EQ(c.UsableGpus(), 0);
  EXPECT_EQ(c.FreeUsableGpus(), 0);
  EXPECT_EQ(c.AllocatedGpus("ok"), 2);  // upsert keeps the allocation
  ok.schedulable = true;
  ASSERT_TRUE(c.UpsertNode(ok).ok());
  EXPECT_EQ(c.UsableGpus(), 4);
  EXPECT_EQ(c.FreeUsableGpus(), 2);
}

TEST(ClusterTest, GpuNeverSharedAndAllocateIsAllOrNothing) {
  Cluster c;
  ASSERT_TRUE(c.UpsertNode(MakeNode("a", "s0", "l0")).ok());
  ASSERT_TRUE(c.UpsertNode(MakeNode("b", "s0", "l0")).ok());
  ASSERT_TRUE(c.Allocate("j1", OnNode("a", {0, 1, 2})).ok());
  // j2 wants b0 (free) and a2 (held by j1): refused, and b stays untouched.
  Placement p = OnNode("b", {0});
  p.ranks.push_back(RankSlot{1, "a", 2, 0, 0, 0});
  EXPECT_EQ(c.Allocate("j2", p).code(), Code::kConflict);
  EXPECT_EQ(c.FreeGpuMask("b"), 0xFFu);
  EXPECT_FALSE(c.Holds("j2"));
  // The same GPU twice in one placement.
  EXPECT_EQ(c.Allocate("j3", OnNode("b", {5, 5})).code(), Code::kConflict);
  EXPECT_EQ(c.FreeGpuMask("b"), 0xFFu);
  EXPECT_EQ(c.Allocate("j4", OnNode("nope", {0})).code(), Code::kNotFound);
  EXPECT_EQ(c.Allocate("j5", OnNode("b", {8})).code(), Code::kInvalidArgument);
  EXPECT_EQ(c.Allocate("j1", OnNode("b", {0})).code(), Code::kConflict);  // j1 already holds GPUs
  ASSERT_TRUE(c.Allocate("j6", OnNode("a", {3})).ok());
  EXPECT_EQ(c.JobsOn("a"), (std::vector<std::string>{"j1", "j6"}));
  EXPECT_EQ(c.FreeUsableGpus(), 16 - 4);
  ASSERT_TRUE(c.Release("j1").ok());
  EXPECT_EQ(c.FreeGpuMask("a"), 0xF7u);
  EXPECT_EQ(c.JobsOn("a"), (std::vector<std::string>{"j6"}));
  EXPECT_EQ(c.Release("j1").code(), Code::kNotFound);
  EXPECT_EQ(c.FreeUsableGpus(), 15);
}

TEST(ClusterTest, RemoveNodeConflictsWhileAllocatedAndKeepsOtherAllocations) {
  Cluster c;
  for (const char* id : {"a", "b", "c"}) ASSERT_TRUE(c.UpsertNode(MakeNode(id, "s0", "l0")).ok());
  ASSERT_TRUE(c.Allocate("ja", OnNode("a", {0})).ok());
  ASSERT_TRUE(c.Allocate("jc", OnNode("c", {7})).ok());
  EXPECT_EQ(c.RemoveNode("a").code(), Code::kConflict);
  EXPECT_EQ(c.RemoveNode("zz").code(), Code::kNotFound);
  ASSERT_TRUE(c.Release("ja").ok());
  ASSERT_TRUE(c.RemoveNode("a").ok());
  EXPECT_EQ(c.size(), 2);
  EXPECT_EQ(c.Find("a"), nullptr);
  EXPECT_EQ(c.nodes()[0]->id, "b");
  // jc's record survived the index shift.
  EXPECT_EQ(c.JobsOn("c"), (std::vector<std::string>{"jc"}));
  ASSERT_TRUE(c.Release("jc").ok());
  EXPECT_EQ(c.FreeGpuMask("c"), 0xFFu);
  EXPECT_EQ(c.UsableGpus(), 16);
  EXPECT_EQ(c.FreeUsableGpus(), 16);
}

TEST(ClusterTest, ShrinkingBelowHeldGpuConflicts) {
  Cluster c;
  ASSERT_TRUE(c.UpsertNode(MakeNode("a", "s0", "l0")).ok());
  ASSERT_TRUE(c.Allocate("j", OnNode("a", {6})).ok());
  EXPECT_EQ(c.UpsertNode(MakeNode("a", "s0", "l0", 4)).code(), Code::kConflict);
  EXPECT_TRUE(c.UpsertNode(MakeNode("a", "s0", "l0", 7)).ok());
  EXPECT_EQ(c.FreeGpuMask("a"), 0x3Fu);
}

TEST(ClusterTest, GroupsArePathsAndMissingLabelsAreAlone) {
  Cluster c;
  ASSERT_TRUE(c.UpsertNode(MakeNode("a", "s0", "l0")).ok());
  ASSERT_TRUE(c.UpsertNode(MakeNode("b", "s1", "l0")).ok());  // same leaf label, other spine
  ASSERT_TRUE(c.UpsertNode(MakeNode("c", "s0", "l0")).ok());
  Node d = MakeNode("d", "s0", "l0");
  d.topology.erase("leaf");
  Node e = d;
  e.id = "e";
  ASSERT_TRUE(c.UpsertNode(d).ok());
  ASSERT_TRUE(c.UpsertNode(e).ok());
  const int a = c.IndexOf("a"), b = c.IndexOf("b"), cc = c.IndexOf("c");
  const int di = c.IndexOf("d"), ei = c.IndexOf("e");
  EXPECT_NE(c.group(a, 1), c.group(b, 1));
  EXPECT_EQ(c.group(a, 1), c.group(cc, 1));
  EXPECT_EQ(c.group(a, 0), c.group(di, 0));
  EXPECT_NE(c.group(di, 1), c.group(ei, 1));
  EXPECT_NE(c.group(di, 1), c.group(a, 1));
  EXPECT_EQ(c.group_label(1, c.group(b, 1)), "l0");
  EXPECT_NE(c.domain(a), c.domain(cc));  // empty nvlink_domain: the node itself
}

// The planner plans for the GPU every usable node names, in whatever spelling (core/gpu_names.h).
TEST(ClusterTest, UsableGpuModelIsTheOneProfileEveryUsableNodeNames) {
  Cluster c;
  EXPECT_EQ(c.UsableGpuModel(), std::nullopt);  // no nodes
  Node a = MakeNode("a", "s0", "l0");
  a.gpu_model = "H100";
  Node b = MakeNode("b", "s0", "l0");
  b.gpu_model = "NVIDIA H100 80GB HBM3";
  ASSERT_TRUE(c.UpsertNode(a).ok());
  ASSERT_TRUE(c.UpsertNode(b).ok());
  EXPECT_EQ(c.UsableGpuModel(), "H100-80GB");
  Node other = MakeNode("c", "s0", "l1");
  other.gpu_model = "A100-SXM4-80GB";
  ASSERT_TRUE(c.UpsertNode(other).ok());
  EXPECT_EQ(c.UsableGpuModel(), std::nullopt);  // two profiles
  other.schedulable = false;                    // cordoned: no longer usable
  ASSERT_TRUE(c.UpsertNode(other).ok());
  EXPECT_EQ(c.UsableGpuModel(), "H100-80GB");
  b.gpu_model = "unknown";
  ASSERT_TRUE(c.UpsertNode(b).ok());
  EXPECT_EQ(c.UsableGpuModel(), std::nullopt);  // one names none
}

}  // namespace
}  // namespace shepherd
