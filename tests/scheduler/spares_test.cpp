// The spare reserve and node replacement.
#include "scheduler/spares.h"

#include <gtest/gtest.h>

#include <utility>

#include "scheduler/inventory_gen.h"
#include "scheduler/placement.h"

namespace shepherd {
namespace {

// 2 spines × 2 leaves × 3 nodes, last node of each leaf a spare:
// s0-l00: node-00001, node-00002, spare node-00003   s0-l01: 4, 5, spare 6
// s1-l00: 7, 8, spare 9                             s1-l01: 10, 11, spare 12
Cluster Build(bool nvl72 = false, int nodes_per_leaf = 3) {
  Cluster c;
  for (const Node& n : GenerateInventory({.spines = 2,
                       .leaves_per_spine = 2,
                       .nodes_per_leaf = nodes_per_leaf,
                       .spares_per_leaf = 1,
                       .nvl72 = nvl72})) {
    EXPECT_TRUE(c.UpsertNode(n).ok());
  }
  return c;
}

void SetFlag(Cluster& c, const std::string& id, bool failed) {
  Node n = *c.Find(id);
  n.failed = failed;
  ASSERT_TRUE(c.UpsertNode(n).ok());
}

// TP 8, DP 2 by hand: dp 0 on node-00001, dp 1 on node-00002.
Placement TwoNodeJob() {
  Placement p;
  for (int d = 0; d < 2; ++d) {
    for (int t = 0; t < 8; ++t) {
      p.ranks.push_back(RankSlot{t + 8 * d, d == 0 ? "node-00001" : "node-00002", t, t, 0, d});
    }
  }
  return p;
}

TEST(ReplaceNodeTest, PrefersSpareOfTheSameLeafAndKeepsGpuIndices) {
  Cluster c = Build();
  const Placement p = TwoNodeJob();
  ASSERT_TRUE(c.Allocate("j", p).ok());
  SetFlag(c, "node-00001", true);
  auto r = ReplaceNode(c, p, "node-00001");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->spare, "node-00003");
  EXPECT_EQ(r->locality, "leaf");
  EXPECT_TRUE(r->from_spare_pool);
  for (int rank = 0; rank < 8; ++rank) {
    EXPECT_EQ(r->placement.ranks[rank].node, "node-00003");
    EXPECT_EQ(r->placement.ranks[rank].gpu, rank);
  }
  for (int rank = 8; rank < 16; ++rank) EXPECT_EQ(r->placement.ranks[rank], p.ranks[rank]);
}

// TP 8, CP 2 by hand: the two CP peers of the one (pp, dp) are whole TP groups on node-00001 (cp 0) and
// node-00002 (cp 1). A failed node's TP group is whole, so it may leave the NVLink domain: the leaf's spare
// takes it (keying groups by (pp, dp) alone would see the CP pair span two nodes and find no spare).
TEST(ReplaceNodeTest, ContextParallelTpGroupsMoveWhole) {
  Cluster c = Build();
  Placement p = TwoNodeJob();
  for (RankSlot& r : p.ranks) std::swap(r.cp, r.dp);  // dp 0, cp 0/1
  ASSERT_TRUE(c.Allocate("j", p).ok());
  SetFlag(c, "node-00001", true);
  auto r = ReplaceNode(c, p, "node-00001");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->spare, "node-00003");
  EXPECT_EQ(r->locality, "leaf");
}

TEST(ReplaceNodeTest, FallsBackToSpineThenAnyThenExhausted) {
  Cluster c = Build();
  const Placement p = TwoNodeJob();
  ASSERT_TRUE(c.Allocate("j", p).ok());
  SetFlag(c, "node-00003", true);  // the leaf's own spare is gone
  auto r = ReplaceNode(c, p, "node-00001");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->spare, "node-00006");
  EXPECT_EQ(r->locality, "spine");
  SetFlag(c, "node-00006", true);
  r = ReplaceNode(c, p, "node-00001");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->spare, "node-00009");  // node-00009 and node-00012 tie: smallest id
  EXPECT_EQ(r->locality, "any");
  // node-00009 busy with another job's 2 GPUs: it cannot host 8 ranks any more.
  Placement other;
  other.ranks = {RankSlot{0, "node-00009", 0, 0, 0, 0}, RankSlot{1, "node-00009", 5, 0, 0, 0}};
  ASSERT_TRUE(c.Allocate("other", other).ok());
  r = ReplaceNode(c, p, "node-00001");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->spare, "node-00012");
  ReplaceOptions o;
  o.exclude_nodes = {"node-00012"};
  EXPECT_EQ(ReplaceNode(c, p, "node-00001", o).status().code(), Code::kResourceExhausted);
  // Fallback without spares: a free non-spare node, closest first (node-00002 is used by the job).
  o.replace_without_spare = true;
  r = ReplaceNode(c, p, "node-00001", o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->spare, "node-00004");
  EXPECT_EQ(r->locality, "spine");
  EXPECT_FALSE(r->from_spare_pool);
  o = ReplaceOptions{};
  o.use_spares = false;
  EXPECT_EQ(ReplaceNode(c, p, "node-00001", o).status().code(), Code::kResourceExhausted);
  EXPECT_EQ(ReplaceNode(c, p, "node-00005").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ReplaceNode(c, p, "nope").status().code(), Code::kNotFound);
}

TEST(ReplaceNodeTest, TakesLowestFreeGpusWhenIndicesAreBusy) {
  Cluster c = Build();
  Placement p;  // TP 4: ranks 0..3 on GPUs 4..7 of node-00001
  for (int t = 0; t < 4; ++t) p.ranks.push_back(RankSlot{t, "node-00001", 4 + t, t, 0, 0});
  Placement other;  // GPUs 4 and 5 of the spare are taken
  other.ranks = {RankSlot{0, "node-00003", 4, 0, 0, 0}, RankSlot{1, "node-00003", 5, 0, 0, 0}};
  ASSERT_TRUE(c.Allocate("other", other).ok());
  auto r = ReplaceNode(c, p, "node-00001");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->spare, "node-00003");
  // GPUs 6, 7 keep their index; the ranks on 4, 5 take the lowest free ones, 0 and 1.
  EXPECT_EQ(r->placement.ranks[0].gpu, 0);
  EXPECT_EQ(r->placement.ranks[1].gpu, 1);
  EXPECT_EQ(r->placement.ranks[2].gpu, 6);
  EXPECT_EQ(r->placement.ranks[3].gpu, 7);
}

TEST(ReplaceNodeTest, Nvl72GroupSpanningNodesStaysInItsDomain) {
  // nvl72, 19 nodes per leaf: rack r0 = 18 nodes, rack r1 = node 19 alone, the spare.
  Cluster c = Build(/*nvl72=*/true, /*nodes_per_leaf=*/19);
  Placement p;  // one TP 8 group across node-00001 and node-00002 (rack s0-l00-r0)
  for (int t = 0; t < 8; ++t)
    p.ranks.push_back(RankSlot{t, t < 4 ? "node-00001" : "node-00002", t % 4, t, 0, 0});
  // The only spare of the leaf sits in rack r1: moving there would split the group.
  EXPECT_EQ(ReplaceNode(c, p, "node-00001").status().code(), Code::kResourceExhausted);
  Node n = *c.Find("node-00003");
  n.spare = true;
  ASSERT_TRUE(c.UpsertNode(n).ok());
  auto r = ReplaceNode(c, p, "node-00001");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->spare, "node-00003");
  EXPECT_EQ(r->locality, "nvlink_domain");
  EXPECT_EQ(EvaluatePlacement(c, Plan{.tp = 8}, r->placement).tp_groups_split, 0);
}

TEST(SpareReserveTest, ReportsDeficitsPerLeafAndSpine) {
  Cluster c = Build();
  EXPECT_TRUE(CheckSpareReserve(c, 1, 2).ok());
  SpareReport r = CheckSpareReserve(c, 1, 3);
  EXPECT_EQ(r.deficits, (std::vector<SpareDeficit>{{"spine", "s0", 2, 3}, {"spine", "s1", 2, 3}}));
  SetFlag(c, "node-00003", true);
  Placement busy;  // a spare with a GPU in use is not ready
  busy.ranks = {RankSlot{0, "node-00012", 0, 0, 0, 0}};
  ASSERT_TRUE(c.Allocate("busy", busy).ok());
  r = CheckSpareReserve(c, 1, 2);
  EXPECT_EQ(
      r.deficits,
      (std::vector<SpareDeficit>{
          {"leaf", "s0-l00", 0, 1}, {"leaf", "s1-l01", 0, 1}, {"spine", "s0", 1, 2}, {"spine", "s1", 1, 2}}));
  Cluster flat({"rack"});
  Node n;
  n.id = "x";
  n.topology = {{"rack", "r1"}};
  ASSERT_TRUE(flat.UpsertNode(n).ok());
  EXPECT_EQ(CheckSpareReserve(flat, 1, 2).deficits, (std::vector<SpareDeficit>{{"rack", "r1", 0, 2}}));
}

}  // namespace
}  // namespace shepherd
