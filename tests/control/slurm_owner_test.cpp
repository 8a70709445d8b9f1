// SlurmOwner (control/launch/slurm_owner.h) on its own: it changes the Inventory and JobBook it is given and
// returns, as effects in order, what only the Controller does. The Controller's use of it is covered by
// controller_slurm_launch_test.cpp and controller_slurm_recover_test.cpp.
#include "control/launch/slurm_owner.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "tests/control/control_test_util.h"

namespace shepherd {
namespace {

using testing::MakeNode;
using testing::MakeSpec;
using Kind = SlurmEffect::Kind;

const Time kNow = FromUnixSeconds(1000);

class SlurmOwnerTest : public ::testing::Test {
 protected:
  SlurmOwnerTest() {
    bool created = false;
    for (const char* id : {"n0", "n1", "n2"})
      (void)inv_.Upsert(MakeNode(id, "l0"), true, kNow, &batch_, &created);
  }
  // A 16-GPU job launched through Slurm, placed (attempt 1) and its allocation wanted.
  std::string Placed() {
    JobSpec spec = MakeSpec(16, 8);
    spec.launch_mode = LaunchMode::kSlurm;
    spec.resources.spare_nodes = 1;
    auto est = jobs_.PlanFor(spec);
    EXPECT_TRUE(est.ok()) << est.status().message();
    auto id = jobs_.Submit(spec, *est, kNow, &batch_);
    EXPECT_TRUE(id.ok());
    jobs_.Schedule([](const std::string&) { return std::optional<Checkpoint>(); }, kNow, &batch_);
    for (const AttemptEvent& ev : jobs_.TakeEvents()) {
      owner_.AttemptStarted(ev.job, ev.attempt);
      owner_.Settle(ev, kNow, &batch_);
    }
    return *id;
  }
  std::vector<std::string> PlacedNodes(const std::string& id) {
    std::vector<std::string> out;
    for (const RankSlot& r : jobs_.Find(id)->attempt->placement.ranks)
      if (std::find(out.begin(), out.end(), r.node) == out.end()) out.push_back(r.node);
    return out;
  }

  Inventory inv_{DefaultTopologyLevels(), {}};
  JobBook jobs_{&inv_, 80};
  FindingLog findings_;
  SlurmOwner owner_{&inv_, &jobs_, &findings_, 80};
  WriteBatch batch_;
};

TEST_F(SlurmOwnerTest, AStepEndNamingALostNodeAndAFailedTaskIsReturnedAsEffectsInSrunsOrder) {
  const std::string id = Placed();
  const std::vector<std::string> placed = PlacedNodes(id);
  ASSERT_EQ(placed.size(), 2u);
  SlurmAllocationRecord wanted = *owner_.Find(id);
  EXPECT_EQ(wanted.nodes.size(), 3u);  // the placement's two nodes and the spare
  EXPECT_EQ(owner_
                .OnLaunchEvent({.kind = SlurmLaunchEvent::Kind::kSubmitted, .job = id, .allocation = "41"},
                               nullptr, kNow, &batch_)
                .size(),
            0u);
  EXPECT_EQ(owner_
                .OnLaunchEvent({.kind = SlurmLaunchEvent::Kind::kAllocated,
                                .job = id,
                                .allocation = "41",
                                .nodes = wanted.nodes},
                               nullptr, kNow, &batch_)
                .size(),
            1u);  // the re-placement inside an adopted allocation, which the owner checks when applied

  // Rank 8 is the first on the second node (TP 8): srun names the first node lost and rank 8's exit.
  SlurmLaunchEvent ended{.kind = SlurmLaunchEvent::Kind::kStepEnded, .job = id, .attempt = 1};
  ended.exit.exit_code = 1;
  ended.log = slurm::ParseStepLog("srun: error: Node failure on " + placed[0] +
                                  "\nsrun: error: " + placed[1] + ": task 8: Exited with exit code 3\n");
  std::vector<SlurmEffect> effects = owner_.OnLaunchEvent(ended, nullptr, kNow, &batch_);
  ASSERT_EQ(effects.size(), 2u);
  EXPECT_EQ(effects[0].kind, Kind::kFinding);
  EXPECT_EQ(effects[0].attempt, 1);
  EXPECT_EQ(effects[0].finding.kind, FindingKind::kNodeLost);
  EXPECT_EQ(effects[0].finding.nodes, std::vector<std::string>{placed[0]});
  EXPECT_EQ(effects[0].finding.ranks, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(effects[1].kind, Kind::kRankExit);
  EXPECT_EQ(effects[1].node, placed[1]);
  EXPECT_EQ(effects[1].process.rank.rank, 8);
  EXPECT_EQ(effects[1].process.exit_code, 3);
  EXPECT_TRUE(findings_.Recent(id, 10).empty());  // recorded by the Controller, not here
  EXPECT_EQ(jobs_.Find(id)->job.attempt, 1);

  // A stale event (an older attempt's step) gives nothing to do.
  ended.attempt = 0;
  EXPECT_TRUE(owner_.OnLaunchEvent(ended, nullptr, kNow, &batch_).empty());
}

TEST_F(SlurmOwnerTest, NoStepIsOrderedBeforeTheAttemptIsDurableNorSbatchBeforeTheRequestIs) {
  const std::string id = Placed();
  const std::vector<std::string> requests = owner_.TakeNewRequests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0], owner_.Find(id)->request);
  SlurmOrders o = owner_.Orders({}, 30);
  ASSERT_EQ(o.jobs.size(), 1u);
  EXPECT_FALSE(o.jobs[0].allocation_durable);
  owner_.Saved({}, requests);
  EXPECT_TRUE(owner_.Orders({}, 30).jobs[0].allocation_durable);

  (void)owner_.OnLaunchEvent({.kind = SlurmLaunchEvent::Kind::kAllocated,
                              .job = id,
                              .allocation = "41",
                              .nodes = owner_.Find(id)->nodes},
                             nullptr, kNow, &batch_);
  EXPECT_FALSE(owner_.Orders({}, 30).jobs[0].step_wanted);  // attempt 1 is not durable yet
  owner_.Saved({{id, 1}}, {});
  o = owner_.Orders({}, 30);
  ASSERT_TRUE(o.jobs[0].step_wanted);
  ASSERT_TRUE(o.jobs[0].step);
  // Named by its launch order, written with the attempt's start and this daemon's once that is durable.
  EXPECT_EQ(o.jobs[0].step->name, "shepherd-a1-o1");
  EXPECT_EQ(o.jobs[0].order, 1);
  EXPECT_TRUE(o.jobs[0].order_mine);
  EXPECT_EQ(o.jobs[0].step->env.at("SHEPHERD_SLURM_ORDER"), "1");
  EXPECT_EQ(o.jobs[0].step->job_id, "41");
  EXPECT_EQ(o.jobs[0].step->gpus_per_node, 8);
  EXPECT_FALSE(owner_.Orders({{id, 1}}, 30).jobs[0].step);  // the worker started it: no spec again
}

TEST_F(SlurmOwnerTest, AnAllocationNotStartedOnACordonedNodeIsBlocked) {
  const std::string id = Placed();
  EXPECT_TRUE(owner_.Blocked().empty());
  const std::string node = owner_.Find(id)->nodes.back();
  ASSERT_TRUE(inv_.Patch(node, {.schedulable = false, .reason = "maintenance"}, kNow, &batch_).ok());
  std::vector<BlockedSlurmAllocation> blocked = owner_.Blocked();
  ASSERT_EQ(blocked.size(), 1u);
  EXPECT_EQ(blocked[0].job, id);
  EXPECT_EQ(blocked[0].unusable, std::set<std::string>{node});
  EXPECT_EQ(blocked[0].reason,
            "re-placed before its Slurm allocation started: " + node + " no longer usable");
}

// The latest record `key` the batch writes (what a store would hold once it is durable).
Record Latest(const WriteBatch& batch, const std::string& key) {
  Record out;
  for (const WriteBatch::Op& op : batch.ops)
    if (!op.erase && op.record.key == key) out = op.record;
  return out;
}

// The launch-order fence (docs/slurm.md, "One step per attempt"): a daemon starts a step only under an order
// it wrote and that is durable; a daemon that finds an attempt started by another writes a new order first,
// and from then the older order is no longer current (its ranks' wrappers do not run their commands).
TEST_F(SlurmOwnerTest, ANewLeaderWritesItsOwnLaunchOrderBeforeAnyStepAndTheOldOneIsNoLongerCurrent) {
  const std::string id = Placed();
  owner_.Saved({}, owner_.TakeNewRequests());
  (void)owner_.OnLaunchEvent({.kind = SlurmLaunchEvent::Kind::kAllocated,
                              .job = id,
                              .allocation = "41",
                              .nodes = owner_.Find(id)->nodes},
                             nullptr, kNow, &batch_);
  owner_.Saved({{id, 1}}, {});
  ASSERT_TRUE(owner_.Orders({}, 30).jobs[0].order_mine);
  EXPECT_TRUE(owner_.OrderCurrent(id, "41", 1, 1));
  EXPECT_FALSE(owner_.OrderCurrent(id, "42", 1, 1));  // another allocation
  EXPECT_FALSE(owner_.OrderCurrent(id, "41", 2, 1));  // another attempt
  EXPECT_FALSE(owner_.OrderCurrent(id, "41", 1, 2));  // an order never written
  EXPECT_FALSE(owner_.OrderCurrent("job-none", "41", 1, 1));

  // Another daemon takes over: it restores the durable record and holds no order of its own.
  SlurmOwner next(&inv_, &jobs_, &findings_, 80);
  ASSERT_TRUE(*next.Restore(Latest(batch_, SlurmAllocations::kKeyPrefix + id)));
  SlurmOrders o = next.Orders({}, 30);
  ASSERT_TRUE(o.jobs[0].step_wanted);
  EXPECT_EQ(o.jobs[0].order, 1);
  EXPECT_FALSE(o.jobs[0].order_mine);  // the worker starts nothing: it asks for an order of its own
  EXPECT_TRUE(next.OrderCurrent(id, "41", 1, 1));

  const SlurmLaunchEvent want{.kind = SlurmLaunchEvent::Kind::kOrderWanted, .job = id, .attempt = 1};
  WriteBatch b;
  EXPECT_TRUE(next.OnLaunchEvent(want, nullptr, kNow, &b).empty());
  EXPECT_FALSE(b.empty());  // the order is written
  // From the moment it is decided, the old order is no longer current; the new one is not the worker's
  // until it is durable, and asking again meanwhile writes no third.
  EXPECT_FALSE(next.OrderCurrent(id, "41", 1, 1));
  EXPECT_TRUE(next.OrderCurrent(id, "41", 1, 2));
  (void)next.OnLaunchEvent(want, nullptr, kNow, &b);
  o = next.Orders({}, 30);
  EXPECT_EQ(o.jobs[0].order, 2);
  EXPECT_FALSE(o.jobs[0].order_mine);
  next.Saved({}, next.TakeNewRequests());
  o = next.Orders({}, 30);
  EXPECT_EQ(o.jobs[0].order, 2);
  EXPECT_TRUE(o.jobs[0].order_mine);
  ASSERT_TRUE(o.jobs[0].step);
  EXPECT_EQ(o.jobs[0].step->name, "shepherd-a1-o2");
  EXPECT_EQ(o.jobs[0].step->env.at("SHEPHERD_SLURM_ORDER"), "2");
  // Its durable, unused order is not replaced; one the worker used (its srun was fenced off) is.
  (void)next.OnLaunchEvent(want, nullptr, kNow, &b);
  EXPECT_EQ(next.Orders({}, 30).jobs[0].order, 2);
  SlurmLaunchEvent used = want;
  used.order = 2;
  (void)next.OnLaunchEvent(used, nullptr, kNow, &b);
  EXPECT_EQ(next.Orders({}, 30).jobs[0].order, 3);
  // The record carries the order: a third daemon restores order 3, and orders never repeat.
  SlurmOwner third(&inv_, &jobs_, &findings_, 80);
  ASSERT_TRUE(*third.Restore(Latest(b, SlurmAllocations::kKeyPrefix + id)));
  EXPECT_TRUE(third.OrderCurrent(id, "41", 1, 3));
  EXPECT_FALSE(third.Orders({}, 30).jobs[0].order_mine);
}

TEST_F(SlurmOwnerTest, ARecordOfAnOlderDaemonHasNoLaunchOrderAndNoneIsCurrent) {
  const std::string id = Placed();
  SlurmOwner next(&inv_, &jobs_, &findings_, 80);
  ASSERT_TRUE(*next.Restore(Record{Collection::kMeta, SlurmAllocations::kKeyPrefix + id, id,
                                   R"({"state":"running","id":"41","nodes":["n0","n1","n2"],"adopted":false})"}));
  EXPECT_EQ(next.Find(id)->order, 0);
  EXPECT_EQ(next.Orders({}, 30).jobs[0].order, 0);
  EXPECT_FALSE(next.Orders({}, 30).jobs[0].order_mine);
  EXPECT_FALSE(next.OrderCurrent(id, "41", 1, 0));
}

}  // namespace
}  // namespace shepherd
