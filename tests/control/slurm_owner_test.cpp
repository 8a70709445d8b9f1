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
  EXPECT_EQ(o.jobs[0].step->name, "shepherd-a1");
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

}  // namespace
}  // namespace shepherd
