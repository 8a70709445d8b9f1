#include "scheduler/placement.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "scheduler/inventory_gen.h"

namespace shepherd {
namespace {

Cluster Build(const InventoryShape& shape) {
  Cluster c;
  for (const Node& n : GenerateInventory(shape)) EXPECT_TRUE(c.UpsertNode(n).ok());
  return c;
}

Plan MakePlan(int tp, int pp, int dp) {
  Plan p;
  p.tp = tp, p.pp = pp, p.dp = dp;
  return p;
}

Placement MustPlace(const Cluster& c, const Plan& plan) {
  auto r = Place(c, plan);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : Placement{};
}

// Every rank on its own free GPU of a usable node; TP groups in one NVLink domain.
void ExpectValid(const Cluster& c, const Plan& plan, const Placement& p) {
  ASSERT_EQ(p.ranks.size(), static_cast<size_t>(plan.world_size()));
  std::set<std::pair<std::string, int>> seen;
  for (const RankSlot& r : p.ranks) {
    const Node* n = c.Find(r.node);
    ASSERT_NE(n, nullptr);
    EXPECT_TRUE(IsUsable(*n)) << r.node;
    EXPECT_TRUE(c.FreeGpuMask(r.node) >> r.gpu & 1) << r.node << " gpu " << r.gpu;
    EXPECT_TRUE(seen.insert({r.node, r.gpu}).second);
  }
  EXPECT_EQ(EvaluatePlacement(c, plan, p).tp_groups_split, 0);
}

TEST(PlaceTest, RankOrderIsTpThenDpThenPp) {
  Cluster c = Build({.spines = 1, .leaves_per_spine = 1, .nodes_per_leaf = 2, .spares_per_leaf = 0});
  const Plan plan = MakePlan(2, 2, 2);
  Placement p = MustPlace(c, plan);
  ExpectValid(c, plan, p);
  for (int r = 0; r < 8; ++r) EXPECT_EQ(p.ranks[r].rank, r);
  // rank = tp + TP·(dp + DP·pp), by hand: 5 = 1 + 2·(0 + 2·1), 6 = 0 + 2·(1 + 2·1), 3 = 1 + 2·(1 + 0).
  EXPECT_EQ((std::vector<int>{p.ranks[5].tp, p.ranks[5].dp, p.ranks[5].pp}), (std::vector<int>{1, 0, 1}));
  EXPECT_EQ((std::vector<int>{p.ranks[6].tp, p.ranks[6].dp, p.ranks[6].pp}), (std::vector<int>{0, 1, 1}));
  EXPECT_EQ((std::vector<int>{p.ranks[3].tp, p.ranks[3].dp, p.ranks[3].pp}), (std::vector<int>{1, 1, 0}));
}

// Places a context-parallel plan, checks it as ExpectValid does and every rank's coordinates against
// rank = tp + TP·(cp + CP·(dp + DP·pp)).
Placement PlaceContextParallel(const Cluster& c, int tp, int pp, int dp, int cp) {
  Plan plan = MakePlan(tp, pp, dp);
  plan.cp = cp;
  Placement p = MustPlace(c, plan);
  ExpectValid(c, plan, p);
  for (const RankSlot& r : p.ranks) EXPECT_EQ(r.rank, r.tp + tp * (r.cp + cp * (r.dp + dp * r.pp)));
  return p;
}

// TP 2 × CP 4 = 8 ranks fit one 8-GPU node: each (pp, dp) unit lands on one node, its ring-attention peers
// on NVLink.
TEST(PlaceTest, ContextParallelPeersShareTheNvlinkDomainWhenTheyFit) {
  Cluster c = Build({.spines = 1, .leaves_per_spine = 2, .nodes_per_leaf = 2, .spares_per_leaf = 0});
  const Placement p = PlaceContextParallel(c, 2, 2, 2, 4);
  std::map<std::pair<int, int>, std::set<std::string>> nodes_of_unit;  // (pp, dp) -> nodes
  std::set<std::tuple<int, int, int, int>> coords;
  for (const RankSlot& r : p.ranks) {
    nodes_of_unit[{r.pp, r.dp}].insert(r.node);
    coords.insert({r.tp, r.cp, r.dp, r.pp});
  }
  EXPECT_EQ(coords.size(), 32u);  // every coordinate once
  for (const auto& [unit, nodes] : nodes_of_unit) EXPECT_EQ(nodes.size(), 1u);
  // By hand: rank 13 = 1 + 2·(2 + 4·1) → tp 1, cp 2, dp 1, pp 0.
  EXPECT_EQ((std::vector<int>{p.ranks[13].tp, p.ranks[13].cp, p.ranks[13].dp, p.ranks[13].pp}),
            (std::vector<int>{1, 2, 1, 0}));
}

// TP 8 × CP 2 = 16 ranks exceed an 8-GPU node: TP groups stay whole on one node each, the two CP peers of
// a (pp, dp) sit in the same leaf (laid out like consecutive data-parallel replicas).
TEST(PlaceTest, ContextParallelBeyondTheDomainKeepsTpWholeAndCpInTheLeaf) {
  Cluster c = Build({.spines = 1, .leaves_per_spine = 2, .nodes_per_leaf = 4, .spares_per_leaf = 0});
  const Placement p = PlaceContextParallel(c, 8, 1, 4, 2);
  std::map<std::tuple<int, int, int>, std::set<std::string>> tp_nodes;  // (cp, dp, pp) -> nodes
  std::map<std::pair<int, int>, std::set<std::string>> cp_leaves;       // (dp, pp) -> leaves
  for (const RankSlot& r : p.ranks) {
    tp_nodes[{r.cp, r.dp, r.pp}].insert(r.node);
    const int i = c.IndexOf(r.node);
    cp_leaves[{r.dp, r.pp}].insert(std::to_string(c.group(i, 1)));
  }
  EXPECT_EQ(tp_nodes.size(), 8u);
  for (const auto& [unit, nodes] : tp_nodes) EXPECT_EQ(nodes.size(), 1u);
  for (const auto& [unit, leaves] : cp_leaves) EXPECT_EQ(leaves.size(), 1u);
}

TEST(PlaceTest, TpGroupsNeverSplitOnFragmentedInventory) {
  Cluster c = Build({.spines = 1, .leaves_per_spine = 1, .nodes_per_leaf = 4, .spares_per_leaf = 0});
  // Leave 3, 5, 3, 5 free GPUs on node-00001..4 (scattered indices).
  Placement busy;
  const std::vector<std::vector<int>> held = {{0, 2, 4, 6, 7}, {1, 3, 5}, {0, 1, 3, 5, 7}, {2, 4, 6}};
  for (int i = 0; i < 4; ++i) {
    for (int g : held[i]) busy.ranks.push_back(RankSlot{0, "node-0000" + std::to_string(i + 1), g, 0, 0, 0});
  }
  ASSERT_TRUE(c.Allocate("busy", busy).ok());
  EXPECT_EQ(c.FreeUsableGpus(), 16);
  // TP 4: only node-00002 and node-00004 hold a whole group (5 free each): room for 2 groups.
  const Plan two = MakePlan(4, 1, 2);
  Placement p = MustPlace(c, two);
  ExpectValid(c, two, p);
  std::set<std::string> nodes;
  for (const RankSlot& r : p.ranks) nodes.insert(r.node);
  EXPECT_EQ(nodes, (std::set<std::string>{"node-00002", "node-00004"}));
  // 12 GPUs <= 16 free, but a third group of 4 would have to be split: refused, not split.
  EXPECT_EQ(Place(c, MakePlan(4, 1, 3)).status().code(), Code::kResourceExhausted);
  // TP 2: floor(3/2)+floor(5/2)+floor(3/2)+floor(5/2) = 6 groups.
  const Plan six = MakePlan(2, 3, 2);
  ExpectValid(c, six, MustPlace(c, six));
  EXPECT_EQ(Place(c, MakePlan(2, 7, 1)).status().code(), Code::kResourceExhausted);
}

TEST(PlaceTest, Nvl72GroupsSpanNodesOfOneDomainOnly) {
  // 1 leaf of 36 four-GPU nodes: racks s0-l00-r0 (nodes 1..18) and s0-l00-r1 (19..36), 72 GPUs each.
  Cluster c =
      Build({.spines = 1, .leaves_per_spine = 1, .nodes_per_leaf = 36, .spares_per_leaf = 0, .nvl72 = true});
  const Plan plan = MakePlan(8, 1, 9);  // 72 GPUs: exactly one rack
  Placement p = MustPlace(c, plan);
  ExpectValid(c, plan, p);
  std::set<std::string> domains;
  for (const RankSlot& r : p.ranks) domains.insert(c.Find(r.node)->nvlink_domain);
  EXPECT_EQ(domains.size(), 1u);
  // Take 2 GPUs of rack r0: it now holds floor(70/8) = 8 groups; 9 groups fit only in r1 (best fit).
  Placement busy;
  busy.ranks = {RankSlot{0, "node-00001", 0, 0, 0, 0}, RankSlot{1, "node-00001", 1, 0, 0, 0}};
  ASSERT_TRUE(c.Allocate("busy", busy).ok());
  p = MustPlace(c, plan);
  ExpectValid(c, plan, p);
  for (const RankSlot& r : p.ranks) EXPECT_EQ(c.Find(r.node)->nvlink_domain, "s0-l00-r1");
  // 17 groups: 8 in r0 + 9 in r1; 18 groups (144 GPUs) do not fit in the 142 free ones.
  const Plan seventeen = MakePlan(8, 1, 17);
  ExpectValid(c, seventeen, MustPlace(c, seventeen));
  EXPECT_EQ(Place(c, MakePlan(8, 1, 18)).status().code(), Code::kResourceExhausted);
  // TP 16 spans 4 nodes of a rack; TP 16 cannot fit an 8-GPU HGX node at all.
  const Plan tp16 = MakePlan(16, 1, 4);
  ExpectValid(c, tp16, MustPlace(c, tp16));
  Cluster hgx = Build({.spines = 1, .leaves_per_spine = 1, .nodes_per_leaf = 4, .spares_per_leaf = 0});
  EXPECT_EQ(Place(hgx, MakePlan(16, 1, 1)).status().code(), Code::kInvalidContent);
}

TEST(PlaceTest, SkipsSpareCordonedFailedAndExcludedNodes) {
  Cluster c = Build({.spines = 1, .leaves_per_spine = 1, .nodes_per_leaf = 5, .spares_per_leaf = 1});
  Node n2 = *c.Find("node-00002"), n3 = *c.Find("node-00003");
  n2.schedulable = false;
  n3.failed = true;
  ASSERT_TRUE(c.UpsertNode(n2).ok());
  ASSERT_TRUE(c.UpsertNode(n3).ok());
  // Usable: node-00001 and node-00004 (node-00005 is the spare).
  const Plan plan = MakePlan(8, 1, 2);
  Placement p = MustPlace(c, plan);
  ExpectValid(c, plan, p);
  std::set<std::string> nodes;
  for (const RankSlot& r : p.ranks) nodes.insert(r.node);
  EXPECT_EQ(nodes, (std::set<std::string>{"node-00001", "node-00004"}));
  EXPECT_EQ(Place(c, MakePlan(8, 1, 3)).status().code(), Code::kInvalidContent);
  PlaceOptions o;
  o.exclude_nodes = {"node-00004"};
  auto r = Place(c, plan, o);
  EXPECT_EQ(r.status().code(), Code::kResourceExhausted);
}

TEST(PlaceTest, ExhaustedNowVersusLargerThanInventory) {
  Cluster c = Build({.spines = 1, .leaves_per_spine = 1, .nodes_per_leaf = 2, .spares_per_leaf = 0});
  ASSERT_TRUE(c.Allocate("a", MustPlace(c, MakePlan(8, 1, 1))).ok());
  EXPECT_EQ(Place(c, MakePlan(8, 1, 2)).status().code(), Code::kResourceExhausted);
  EXPECT_EQ(Place(c, MakePlan(8, 1, 3)).status().code(), Code::kInvalidContent);
  EXPECT_EQ(Place(c, MakePlan(0, 1, 1)).status().code(), Code::kInvalidArgument);
}

TEST(PlaceTest, JobsPlacedAndReleasedInSequenceNeverShareGpus) {
  // 2 leaves × 4 usable nodes = 64 GPUs.
  Cluster c = Build({.spines = 1, .leaves_per_spine = 2, .nodes_per_leaf = 5, .spares_per_leaf = 1});
  EXPECT_EQ(c.UsableGpus(), 64);
  const Plan a = MakePlan(4, 2, 3), b = MakePlan(8, 2, 1), d = MakePlan(2, 2, 4);  // 24, 16, 16 GPUs
  Placement pa = MustPlace(c, a);
  ASSERT_TRUE(c.Allocate("a", pa).ok());
  Placement pb = MustPlace(c, b);
  ExpectValid(c, b, pb);
  ASSERT_TRUE(c.Allocate("b", pb).ok());
  Placement pd = MustPlace(c, d);
  ExpectValid(c, d, pd);
  ASSERT_TRUE(c.Allocate("d", pd).ok());
  EXPECT_EQ(c.FreeUsableGpus(), 64 - 24 - 16 - 16);
  std::set<std::pair<std::string, int>> used;
  for (const Placement* p : {&pa, &pb, &pd}) {
    for (const RankSlot& r : p->ranks) EXPECT_TRUE(used.insert({r.node, r.gpu}).second);
  }
  EXPECT_EQ(Place(c, b).status().code(), Code::kResourceExhausted);  // 8 free, 16 wanted
  EXPECT_EQ(c.Allocate("a2", pa).code(), Code::kConflict);
  ASSERT_TRUE(c.Release("a").ok());
  EXPECT_EQ(c.FreeUsableGpus(), 32);
  const Plan e = MakePlan(8, 2, 2);  // 32 GPUs: everything left
  Placement pe = MustPlace(c, e);
  ExpectValid(c, e, pe);
  ASSERT_TRUE(c.Allocate("e", pe).ok());
  EXPECT_EQ(c.FreeUsableGpus(), 0);
  ASSERT_TRUE(c.Release("b").ok());
  ASSERT_TRUE(c.Release("d").ok());
  ASSERT_TRUE(c.Release("e").ok());
  EXPECT_EQ(c.FreeUsableGpus(), 64);
}

TEST(PlaceTest, JobThatFitsOneLeafStaysInsideIt) {
  Cluster c = Build({.spines = 1, .leaves_per_spine = 2, .nodes_per_leaf = 5, .spares_per_leaf = 1});
  const Plan plan = MakePlan(8, 2, 2);  // 32 GPUs = the 4 usable nodes of one leaf
  Placement p = MustPlace(c, plan);
  ExpectValid(c, plan, p);
  PlacementQuality q = EvaluatePlacement(c, plan, p);
  EXPECT_EQ(q.cross_leaf_edges, 0);
  EXPECT_EQ(q.cross_spine_edges, 0);
}

TEST(PlaceTest, BestFitKeepsAnEmptyLeafWhole) {
  Cluster c = Build({.spines = 1, .leaves_per_spine = 2, .nodes_per_leaf = 5, .spares_per_leaf = 1});
  // Fill two nodes of the second leaf (s0-l01 = node-00006..09); a first-fit would start in s0-l00.
  Placement busy;
  for (const char* n : {"node-00006", "node-00007"}) {
    for (int g = 0; g < 8; ++g) busy.ranks.push_back(RankSlot{0, n, g, 0, 0, 0});
  }
  ASSERT_TRUE(c.Allocate("busy", busy).ok());
  const Plan plan = MakePlan(8, 1, 2);
  Placement p = MustPlace(c, plan);
  for (const RankSlot& r : p.ranks) EXPECT_EQ(c.Find(r.node)->topology.at("leaf"), "s0-l01");
  for (const char* n : {"node-00001", "node-00002", "node-00003", "node-00004"}) {
    EXPECT_EQ(c.FreeGpuMask(n), 0xFFu);
  }
}

TEST(PlaceTest, LayoutMinimisesCrossSpineEdges) {
  // 2 spines × 2 leaves × 4 usable nodes; TP 8, PP 4, DP 4 fills all 16 nodes, one TP group per node.
  Cluster c = Build({.spines = 2, .leaves_per_spine = 2, .nodes_per_leaf = 5, .spares_per_leaf = 1});
  const Plan plan = MakePlan(8, 4, 4);
  Placement p = MustPlace(c, plan);
  ExpectValid(c, plan, p);
  PlacementQuality q = EvaluatePlacement(c, plan, p);
  // By hand. Stage-major (stages 0-1 on one spine, 2-3 on the other, one stage per leaf): only the
  // PP edges 1->2 cross the spine, 4 dp × 8 tp = 32; every PP edge crosses a leaf, 3 × 4 × 8 = 96.
  // Pipelines of replicas {0,1} | {2,3} per spine would cut each of the 4 pp × 8 tp DP rings twice: 64.
  EXPECT_EQ(q.cross_spine_edges, 32);
  EXPECT_EQ(q.cross_leaf_edges, 96);
  EXPECT_EQ(q.tp_groups_split, 0);
}

TEST(PlaceTest, WorksWithThreeLevelsAndWithOne) {
  // zone > spine > leaf, 2 zones × 1 spine × 1 leaf × 2 nodes; and a flat "rack" level.
  Cluster deep({"zone", "spine", "leaf"}), flat({"rack"});
  for (int i = 0; i < 4; ++i) {
    Node n;
    n.id = "n" + std::to_string(i);
    n.topology = {
        {"zone", i < 2 ? "z0" : "z1"}, {"spine", "s"}, {"leaf", "l"}, {"rack", i < 2 ? "r0" : "r1"}};
    ASSERT_TRUE(deep.UpsertNode(n).ok());
    ASSERT_TRUE(flat.UpsertNode(n).ok());
  }
  const Plan plan = MakePlan(8, 2, 1);  // 2 nodes: fits one zone / one rack
  for (const Cluster* c : {&deep, &flat}) {
    Placement p = MustPlace(*c, plan);
    ExpectValid(*c, plan, p);
    EXPECT_EQ(EvaluatePlacement(*c, plan, p).cross_leaf_edges, 0);
    EXPECT_EQ(EvaluatePlacement(*c, plan, p).cross_spine_edges, 0);
  }
  // (z0, s, l) and (z1, s, l) are different leaves: one PP edge per tp rank crosses zone and leaf.
  Placement split = MustPlace(deep, MakePlan(8, 1, 1));
  split.ranks.clear();
  for (int pp = 0; pp < 2; ++pp) {
    for (int t = 0; t < 8; ++t)
      split.ranks.push_back(RankSlot{t + 8 * pp, pp == 0 ? "n0" : "n2", t, t, pp, 0});
  }
  PlacementQuality q = EvaluatePlacement(deep, plan, split);
  EXPECT_EQ(q.cross_leaf_edges, 8);
  EXPECT_EQ(q.cross_spine_edges, 8);
}

TEST(EvaluatePlacementTest, CountsEdgesOfAHandBuiltPlacement) {
  // n1 (s0, leaf a), n2 (s0, leaf b), n3 (s1, leaf c). TP 2, PP 2, DP 3.
  Cluster c;
  for (auto [id, spine, leaf] : {std::tuple{"n1", "s0", "a"}, {"n2", "s0", "b"}, {"n3", "s1", "c"}}) {
    Node n;
    n.id = id;
    n.topology = {{"spine", spine}, {"leaf", leaf}};
    ASSERT_TRUE(c.UpsertNode(n).ok());
  }
  const Plan plan = MakePlan(2, 2, 3);
  // (pp, dp) -> nodes of tp 0 and tp 1. The group (1, 2) is split across n2 and n3.
  const std::map<std::pair<int, int>, std::pair<std::string, std::string>> where = {
      {{0, 0}, {"n1", "n1"}}, {{0, 1}, {"n1", "n1"}}, {{0, 2}, {"n2", "n2"}},
      {{1, 0}, {"n3", "n3"}}, {{1, 1}, {"n2", "n2"}}, {{1, 2}, {"n2", "n3"}}};
  Placement p;
  p.ranks.resize(12);
  int gpu = 0;
  for (const auto& [key, nodes] : where) {
    for (int t = 0; t < 2; ++t) {
      const int rank = t + 2 * (key.second + 3 * key.first);
      p.ranks[rank] =
          RankSlot{rank, t == 0 ? nodes.first : nodes.second, gpu++ % 8, t, key.first, key.second};
    }
  }
  // DP rings (0-1, 1-2, 2-0). pp 0, per tp: n1 n1 n2 -> 2 cross-leaf. pp 1 tp 0: n3 n2 n2 -> 2 cross-spine;
  // pp 1 tp 1: n3 n2 n3 -> 2 cross-spine. DP: leaf 2+2+2+2 = 8, spine 4.
  // PP (pp 0 -> 1): dp 0: n1->n3 spine ×2; dp 1: n1->n2 leaf ×2; dp 2: tp 0 n2->n2, tp 1 n2->n3 spine.
  // PP: spine 3, leaf 5. Totals: leaf 13, spine 7; bytes (dp 10, pp 1): leaf 8·10+5 = 85, spine 4·10+3 = 43.
  PlacementQuality q = EvaluatePlacement(c, plan, p, 10.0, 1.0);
  EXPECT_EQ(q.tp_groups_split, 1);
  EXPECT_EQ(q.cross_leaf_edges, 13);
  EXPECT_EQ(q.cross_spine_edges, 7);
  EXPECT_DOUBLE_EQ(q.cross_leaf_bytes_per_step, 85.0);
  EXPECT_DOUBLE_EQ(q.cross_spine_bytes_per_step, 43.0);
}

TEST(EvaluatePlacementTest, TwoReplicasMakeOneDpEdge) {
  Cluster c;
  for (auto [id, leaf] : {std::pair{"n1", "a"}, {"n2", "b"}}) {
    Node n;
    n.id = id;
    n.topology = {{"spine", "s0"}, {"leaf", leaf}};
    ASSERT_TRUE(c.UpsertNode(n).ok());
  }
  Placement p;
  p.ranks = {RankSlot{0, "n1", 0, 0, 0, 0}, RankSlot{1, "n2", 0, 0, 0, 1}};
  PlacementQuality q = EvaluatePlacement(c, MakePlan(1, 1, 2), p);
  EXPECT_EQ(q.cross_leaf_edges, 1);
  EXPECT_EQ(q.cross_spine_edges, 0);
}

}  // namespace
}  // namespace shepherd
