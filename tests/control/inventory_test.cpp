#include "control/inventory.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "storage/store.h"
#include "tests/control/control_test_util.h"

namespace shepherd {
namespace {

using testing::MakeNode;

const Time kNow = FromUnixSeconds(1000);

class InventoryTest : public ::testing::Test {
 protected:
  NodeView Add(const Node& n, bool schedulable_given = true) {
    bool created = false;
    auto v = inv_.Upsert(n, schedulable_given, kNow, &batch_, &created);
    EXPECT_TRUE(v.ok()) << v.status().message();
    return *v;
  }
  Inventory inv_{DefaultTopologyLevels(), {.per_leaf = 1, .per_spine = 0}};
  WriteBatch batch_;
};

TEST_F(InventoryTest, ReRegistrationKeepsHealthFlagsAndCordon) {
  Add(MakeNode("n1", "l0"));
  inv_.Apply({"n1", NodeActionKind::kCordon, "hang culprit"}, "f-000007", kNow, &batch_);
  inv_.MarkAgentAttached("n1", kNow, &batch_);
  NodeView v = Add(MakeNode("n1", "l0"), /*schedulable_given=*/false);
  EXPECT_EQ(v.state, NodeState::kCordoned);
  EXPECT_EQ(v.node.reason, "hang culprit");
  EXPECT_EQ(v.node.cordon_source, "f-000007");
  EXPECT_TRUE(v.node.agent_attached);
  EXPECT_EQ(batch_.ops.size(), 4u);  // every change is in the caller's batch
}

TEST_F(InventoryTest, FailIsAStateOfItsOwnAndPatchClearsIt) {
  Add(MakeNode("n1", "l0"));
  inv_.Apply({"n1", NodeActionKind::kFail, "node_lost"}, "f-000001", kNow, &batch_);
  EXPECT_EQ(inv_.View("n1")->state, NodeState::kFailed);
  auto v = inv_.Patch("n1", {.failed = false}, kNow, &batch_);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->state, NodeState::kAvailable);
  EXPECT_EQ(v->node.reason, "");
}

// A drained node takes no new work while its ranks run on; it reads draining until the last of them ends,
// then drained, and the count by state follows.
TEST_F(InventoryTest, DrainIsDrainingWhileRanksRunThenDrained) {
  Add(MakeNode("n1", "l0"));
  Placement p;
  for (int g = 0; g < 8; ++g) p.ranks.push_back({g, "n1", g, g, 0, 0});
  ASSERT_TRUE(inv_.Allocate("job-1", p).ok());
  auto v = inv_.Patch("n1", {.drain = true, .reason = "kernel upgrade"}, kNow, &batch_);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->state, NodeState::kDraining);
  EXPECT_FALSE(v->node.schedulable);
  EXPECT_EQ(v->node.cordon_source, "operator");
  EXPECT_EQ(v->jobs, std::vector<std::string>{"job-1"});
  EXPECT_EQ(inv_.List({}).by_state.at(NodeState::kDraining), 1);
  EXPECT_EQ(inv_.cluster().UsableGpus(), 0);

  inv_.Release("job-1");
  EXPECT_EQ(inv_.View("n1")->state, NodeState::kDrained);
  EXPECT_EQ(inv_.List({.state = NodeState::kDrained}).nodes.size(), 1u);
  EXPECT_EQ(inv_.List({}).by_state.count(NodeState::kDraining), 0u);

  // A re-registration keeps the drain; a finding's cordon does not replace the operator's.
  EXPECT_EQ(Add(MakeNode("n1", "l0"), /*schedulable_given=*/false).state, NodeState::kDrained);
  inv_.Apply({"n1", NodeActionKind::kCordon, "hang culprit"}, "f-000002", kNow, &batch_);
  EXPECT_EQ(inv_.View("n1")->state, NodeState::kDrained);

  v = inv_.Patch("n1", {.schedulable = true}, kNow, &batch_);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->state, NodeState::kAvailable);
  EXPECT_FALSE(v->node.drain);
}

TEST(NodeState, DrainNamesRoundTripAndFailureWins) {
  EXPECT_EQ(NodeStateFromString("draining"), NodeState::kDraining);
  EXPECT_EQ(NodeStateFromString("drained"), NodeState::kDrained);
  Node n;
  n.schedulable = false;
  n.drain = true;
  EXPECT_EQ(StateOf(n, 1), NodeState::kDraining);
  EXPECT_EQ(StateOf(n, 0), NodeState::kDrained);
  n.failed = true;
  EXPECT_EQ(StateOf(n, 1), NodeState::kFailed);
  n.failed = false;
  n.drain = false;
  EXPECT_EQ(StateOf(n, 1), NodeState::kCordoned);  // a plain cordon is unchanged
}

TEST_F(InventoryTest, BusyNodesCannotBecomeSparesNorBeRemoved) {
  Add(MakeNode("n1", "l0"));
  Placement p;
  for (int g = 0; g < 8; ++g) p.ranks.push_back({g, "n1", g, g, 0, 0});
  ASSERT_TRUE(inv_.Allocate("job-1", p).ok());
  const Status spare = inv_.Patch("n1", {.spare = true}, kNow, &batch_).status();
  EXPECT_EQ(spare.code(), Code::kConflict);
  ASSERT_EQ(spare.fields().size(), 1u);  // named, as re-registering it a spare names it
  EXPECT_EQ(spare.fields()[0].field, "spare");
  EXPECT_EQ(inv_.Remove("n1", &batch_).status().code(), Code::kConflict);
  EXPECT_EQ(inv_.View("n1")->jobs, std::vector<std::string>{"job-1"});
  inv_.Release("job-1");
  EXPECT_TRUE(inv_.Remove("n1", &batch_).ok());
  EXPECT_FALSE(inv_.View("n1").has_value());
}

// A fleet operator restarted the daemon with its unchanged inventory file while a spare it had given to a
// job ran ranks: "node sp0 runs ranks: it cannot become a spare", exit 1, every rank fenced. It already was.
TEST_F(InventoryTest, ABusySpareRegisteredAgainAsASpareIsNoChange) {
  Add(MakeNode("sp0", "l0", /*spare=*/true));
  Placement p;
  for (int g = 0; g < 8; ++g) p.ranks.push_back({g, "sp0", g, g, 0, 0});
  ASSERT_TRUE(inv_.Allocate("job-1", p).ok());
  bool created = false;
  EXPECT_TRUE(inv_.Upsert(MakeNode("sp0", "l0", /*spare=*/true), false, kNow, &batch_, &created).ok());
  Node shrunk = MakeNode("sp0", "l0", /*spare=*/true);
  shrunk.gpus = 4;  // a real change to a busy node is still refused
  EXPECT_EQ(inv_.Upsert(shrunk, false, kNow, &batch_, &created).status().code(), Code::kConflict);
}

TEST_F(InventoryTest, ListFiltersButSummarisesTheWholeInventory) {
  Add(MakeNode("n1", "l0"));
  Add(MakeNode("n2", "l1"));
  Add(MakeNode("sp1", "l0", /*spare=*/true));
  inv_.Apply({"n2", NodeActionKind::kCordon, "x"}, "f-000002", kNow, &batch_);
  NodeList l = inv_.List({.topology = {{"leaf", "l0"}}});
  ASSERT_EQ(l.nodes.size(), 2u);
  EXPECT_EQ(l.total, 3);
  EXPECT_EQ(l.by_state.at(NodeState::kCordoned), 1);
  EXPECT_EQ(l.by_state.at(NodeState::kSpare), 1);
  EXPECT_EQ(l.usable_gpus, 8);  // n1 only: spares and cordoned nodes are not usable
  // Leaf l1 has no spare left: below the per-leaf minimum of 1.
  ASSERT_EQ(l.spare_deficits.size(), 1u);
  EXPECT_EQ(l.spare_deficits[0].label, "l1");
  EXPECT_EQ(inv_.List({.state = NodeState::kSpare}).nodes.size(), 1u);
}

// The list index (states by id, counts by state) is kept in step with every kind of change, so pages and
// the summary equal what a walk over every node gives (the expected values are counted here from View).
TEST_F(InventoryTest, ListIndexFollowsEveryChangeAndPagesInIdOrder) {
  std::vector<std::string> ids;
  for (int i = 0; i < 12; ++i) {
    ids.push_back("n" + std::to_string(100 - i * 7));  // ids not in insertion order
    Add(MakeNode(ids.back(), i % 2 ? "l1" : "l0", /*spare=*/i % 5 == 4));
  }
  Placement p;
  for (int g = 0; g < 8; ++g) p.ranks.push_back({g, ids[0], g, g, 0, 0});
  for (int g = 0; g < 4; ++g) p.ranks.push_back({8 + g, ids[1], g, g, 0, 0});
  ASSERT_TRUE(inv_.Allocate("job-1", p).ok());
  inv_.Apply({ids[2], NodeActionKind::kCordon, "hang"}, "f-000001", kNow, &batch_);
  inv_.Apply({ids[3], NodeActionKind::kFail, "node_lost"}, "f-000002", kNow, &batch_);
  ASSERT_TRUE(inv_.Patch(ids[5], {.schedulable = false}, kNow, &batch_).ok());
  ASSERT_TRUE(inv_.Remove(ids[6], &batch_).ok());
  ASSERT_TRUE(inv_.Restore(MakeNode("n0", "l1")).ok());
  auto check = [&](const char* when) {
    SCOPED_TRACE(when);
    std::map<NodeState, int> counts;
    std::vector<std::string> sorted, spares;
    for (const std::string& id : ids) {
      if (auto v = inv_.View(id)) {
        ++counts[v->state];
        sorted.push_back(id);
        if (v->node.spare) spares.push_back(id);
      }
    }
    if (auto v = inv_.View("n0")) {
      ++counts[v->state];
      sorted.push_back("n0");
    }
    std::sort(sorted.begin(), sorted.end());
    std::sort(spares.begin(), spares.end());
    EXPECT_EQ(inv_.List({}).by_state, counts);
    // Pages of 5 with the cursor give every node once, in id order.
    std::vector<std::string> paged;
    NodeFilter f{.limit = 5};
    for (int page = 0; page < 10; ++page) {
      NodeList l = inv_.List(f);
      for (const NodeView& v : l.nodes) paged.push_back(v.node.id);
      if (!l.more) break;
      f.after = l.nodes.back().node.id;
    }
    EXPECT_EQ(paged, sorted);
    std::vector<std::string> listed_spares;
    for (const NodeView& v : inv_.List({.spare = true}).nodes) listed_spares.push_back(v.node.id);
    EXPECT_EQ(listed_spares, spares);
  };
  check("after allocation, cordon, fail, patch, remove and restore");
  EXPECT_EQ(inv_.List({}).by_state.at(NodeState::kAllocated), 2);
  EXPECT_EQ(inv_.List({.state = NodeState::kFailed}).nodes.size(), 1u);
  inv_.Release("job-1");
  ASSERT_TRUE(inv_.Patch(ids[3], {.failed = false}, kNow, &batch_).ok());
  check("after release and repair");
  EXPECT_EQ(inv_.List({}).by_state.count(NodeState::kAllocated), 0u);  // no zero entries
  EXPECT_EQ(inv_.List({}).by_state.count(NodeState::kFailed), 0u);
}

TEST_F(InventoryTest, OnlyAFindingsCordonReturnsByItself) {
  Add(MakeNode("n1", "l0"));
  Add(MakeNode("n2", "l0"));
  inv_.Apply({"n1", NodeActionKind::kCordon, "hang culprit"}, "f-000003", kNow, &batch_);
  ASSERT_TRUE(inv_.Patch("n2", {.schedulable = false, .reason = "bad fan"}, kNow, &batch_).ok());
  EXPECT_EQ(inv_.View("n2")->node.cordon_source, "operator");
  EXPECT_FALSE(inv_.ReturnSuspect("n2", kNow, &batch_));  // an operator's cordon is the operator's
  // A finding against an operator-cordoned node does not take the cordon over, nor its reason (a fleet
  // operator's "bad fan" became the finding's reason under the operator's name and time).
  const std::optional<Time> at = inv_.View("n2")->node.cordoned_at;
  inv_.Apply({"n2", NodeActionKind::kCordon, "hang culprit"}, "f-000004", kNow + Seconds(5), &batch_);
  EXPECT_EQ(inv_.View("n2")->node.cordon_source, "operator");
  EXPECT_EQ(inv_.View("n2")->node.reason, "bad fan");
  EXPECT_EQ(inv_.View("n2")->node.cordoned_at, at);
  // A failure adds its flag only (a GPU fault's text was filed under the operator's name).
  inv_.Apply({"n2", NodeActionKind::kFail, "gpu_fault"}, "f-000005", kNow + Seconds(6), &batch_);
  EXPECT_TRUE(inv_.View("n2")->node.failed);
  EXPECT_EQ(inv_.View("n2")->node.reason, "bad fan");
  EXPECT_EQ(inv_.View("n2")->node.cordon_source, "operator");
  EXPECT_TRUE(inv_.ReturnSuspect("n1", kNow, &batch_));
  NodeView v = *inv_.View("n1");
  EXPECT_EQ(v.state, NodeState::kAvailable);
  EXPECT_EQ(v.node.cordon_source, "");
  EXPECT_FALSE(inv_.ReturnSuspect("n1", kNow, &batch_));  // not cordoned any more
  inv_.Apply({"n1", NodeActionKind::kFail, "gpu_fault"}, "f-000005", kNow, &batch_);
  EXPECT_FALSE(inv_.ReturnSuspect("n1", kNow, &batch_));  // failed nodes wait for an operator
}

}  // namespace
}  // namespace shepherd
