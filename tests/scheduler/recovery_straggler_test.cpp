// policy.straggler_action in DecideRecovery and ManualRestart: record (default), cordon_after_restart (the
// next restart, whatever its cause, forced ones too, replaces the node and leaves it cordoned, naming the
// finding), replace (a restart
// from last-known-good with a spare, never a failure or a queue for it). Pure, on the fixed clock kT0.
#include <gtest/gtest.h>

#include "tests/scheduler/recovery_test_util.h"

namespace shepherd::testing {
namespace {

// A straggler named from arrival order: rank 12 (node-02, dp 1) held up its dp group.
Finding ArrivalStraggler(int attempt = 1) {
  Finding f = MakeFinding(FindingKind::kStraggler, {12}, {"node-02"}, attempt);
  f.id = "f-000007";
  f.detail = "rank 12 on node-02 arrived last in its dp group's collectives";
  f.straggler = StragglerEvidence{.group = "dp", .lateness_s = 0.15, .share_held_up = 0.97, .windows = 20};
  return f;
}

class StragglerRecoveryTest : public RecoveryTest {};

TEST_F(StragglerRecoveryTest, RecordByDefault) {
  Build();
  ASSERT_EQ(job_.spec.policy.straggler_action, StragglerAction::kRecord);
  RecoveryDecision d = Decide(ArrivalStraggler());
  EXPECT_EQ(d.action, RecoveryDecision::kNone) << Dump(d);
  EXPECT_TRUE(d.node_actions.empty());
  EXPECT_EQ(d.actions, std::vector<std::string>{"report only: straggler"});
}

TEST_F(StragglerRecoveryTest, ReplaceRestartsFromLastKnownGoodOnASpare) {
  Build();
  job_.spec.policy.straggler_action = StragglerAction::kReplace;
  RecoveryDecision d = Decide(ArrivalStraggler());
  ASSERT_EQ(d.action, RecoveryDecision::kRestart) << Dump(d);
  ASSERT_EQ(d.node_actions.size(), 1u);
  EXPECT_EQ(d.node_actions[0].node, "node-02");
  EXPECT_EQ(d.node_actions[0].action, NodeActionKind::kCordon);
  EXPECT_EQ(d.node_actions[0].reason.rfind("straggler f-000007: ", 0), 0u) << d.node_actions[0].reason;
  ASSERT_TRUE(d.new_placement);
  const std::set<std::string> nodes = NodesOf(*d.new_placement);
  EXPECT_EQ(nodes, (std::set<std::string>{"node-01", "node-03"}));  // the spare on node-02's leaf
  ASSERT_TRUE(d.resume_from);
  EXPECT_EQ(d.resume_from->step, 40);  // last-known-good, not the later complete one
  EXPECT_TRUE(d.spends_budget);
}

TEST_F(StragglerRecoveryTest, ReplaceNeverActsOnTheStepTimeRuleNorForAnotherLauncher) {
  Build();
  job_.spec.policy.straggler_action = StragglerAction::kReplace;
  Finding step_time = MakeFinding(FindingKind::kStraggler, {12}, {"node-02"});  // no arrival evidence
  EXPECT_EQ(Decide(step_time).action, RecoveryDecision::kNone);
  job_.spec.command.clear();  // a job another launcher runs: Shepherd cannot restart it on a spare
  job_.spec.launch_mode = LaunchMode::kExternal;
  RecoveryDecision d = Decide(ArrivalStraggler());
  EXPECT_EQ(d.action, RecoveryDecision::kNone) << Dump(d);
  EXPECT_TRUE(d.node_actions.empty());
}

TEST_F(StragglerRecoveryTest, ReplaceWithoutASpareLeavesTheJobRunning) {
  // No spare and no free node: the job runs on slow rather than queueing.
  Build({"node-03", "node-04", "node-05", "node-06", "node-07"});
  job_.spec.policy.straggler_action = StragglerAction::kReplace;
  RecoveryDecision d = Decide(ArrivalStraggler());
  EXPECT_EQ(d.action, RecoveryDecision::kNone) << Dump(d);
  EXPECT_TRUE(d.node_actions.empty());
  EXPECT_EQ(d.actions, std::vector<std::string>{"record only: no spare or free node to replace node-02"});
}

TEST_F(StragglerRecoveryTest, ReplaceWithTheBudgetSpentNeverFailsTheJob) {
  Build();
  job_.spec.policy.straggler_action = StragglerAction::kReplace;
  job_.restarts = job_.spec.policy.max_restarts;
  RecoveryDecision d = Decide(ArrivalStraggler());
  EXPECT_EQ(d.action, RecoveryDecision::kNone) << Dump(d);
  EXPECT_TRUE(d.node_actions.empty());
  EXPECT_EQ(d.actions, std::vector<std::string>{"record only: restart budget spent, node-02 not replaced"});
}

TEST_F(StragglerRecoveryTest, CordonAfterRestartRecordsNowAndReplacesAtTheNextRestart) {
  Build();
  job_.spec.policy.straggler_action = StragglerAction::kCordonAfterRestart;
  const Finding straggler = ArrivalStraggler();
  RecoveryDecision d = Decide(straggler);
  EXPECT_EQ(d.action, RecoveryDecision::kNone) << Dump(d);  // never restarts for it
  EXPECT_TRUE(d.node_actions.empty());
  ASSERT_EQ(d.actions.size(), 1u);
  EXPECT_EQ(d.actions[0],
            "record: node-02 is replaced at the job's next restart and left cordoned "
            "(policy.straggler_action cordon_after_restart)");

  // Later a rank on node-01 crashes (a first rank fault: restart on the same nodes, no blame of node-01).
  Finding crash = MakeFinding(FindingKind::kProcessExit, {3}, {"node-01"});
  crash.exit_code = 1;
  const std::vector<Finding> earlier = {straggler};
  d = Decide(crash, false, earlier);
  ASSERT_EQ(d.action, RecoveryDecision::kRestart) << Dump(d);
  ASSERT_EQ(d.node_actions.size(), 1u) << Dump(d);
  EXPECT_EQ(d.node_actions[0].node, "node-02");
  EXPECT_EQ(d.node_actions[0].action, NodeActionKind::kCordon);
  EXPECT_EQ(d.node_actions[0].reason.rfind("straggler f-000007: ", 0), 0u);
  EXPECT_EQ(NodesOf(*d.new_placement), (std::set<std::string>{"node-01", "node-03"}));
  EXPECT_TRUE(Has(d.actions, "replace node-02 with node-03 (leaf)")) << Dump(d);

  // A straggler of an earlier attempt marks nothing: that attempt's restart already took it.
  job_.attempt = 2;
  placement_.attempt = 2;
  crash.attempt = 2;
  d = Decide(crash, false, earlier);
  ASSERT_EQ(d.action, RecoveryDecision::kRestart) << Dump(d);
  EXPECT_TRUE(d.node_actions.empty()) << Dump(d);
}

TEST_F(StragglerRecoveryTest, CordonAfterRestartNeverQueuesTheJob) {
  Build({"node-03", "node-04", "node-05", "node-06", "node-07"});  // nowhere to move node-02's ranks
  job_.spec.policy.straggler_action = StragglerAction::kCordonAfterRestart;
  Finding crash = MakeFinding(FindingKind::kProcessExit, {3}, {"node-01"});
  crash.exit_code = 1;
  const std::vector<Finding> earlier = {ArrivalStraggler()};
  RecoveryDecision d = Decide(crash, false, earlier);
  ASSERT_EQ(d.action, RecoveryDecision::kRestart) << Dump(d);
  EXPECT_TRUE(d.node_actions.empty()) << Dump(d);  // the mark waits for a restart with room
  EXPECT_EQ(NodesOf(*d.new_placement), (std::set<std::string>{"node-01", "node-02"}));
}

// A forced restart (POST /v1/jobs/{id}/restart) is a restart too: the policy's marks go with it.
Result<RecoveryDecision> Forced(const Job& job, const Placement& placement, const Cluster& cluster,
                                const std::vector<Finding>& earlier) {
  static const std::vector<Checkpoint> kGood = {Ckpt(40, CheckpointStatus::kGood)};
  return ManualRestart({.job = job,
                        .placement = placement,
                        .cluster = cluster,
                        .reason = "operator",
                        .checkpoints = kGood,
                        .now = kT0,
                        .earlier_findings = earlier});
}

TEST_F(StragglerRecoveryTest, CordonAfterRestartAppliesToAForcedRestart) {
  Build();
  job_.spec.policy.straggler_action = StragglerAction::kCordonAfterRestart;
  const std::vector<Finding> earlier = {ArrivalStraggler()};
  Result<RecoveryDecision> d = Forced(job_, placement_, cluster_, earlier);
  ASSERT_TRUE(d.ok()) << d.status().message();
  ASSERT_EQ(d->action, RecoveryDecision::kRestart) << Dump(*d);
  ASSERT_EQ(d->node_actions.size(), 1u) << Dump(*d);
  EXPECT_EQ(d->node_actions[0].node, "node-02");
  EXPECT_EQ(d->node_actions[0].action, NodeActionKind::kCordon);
  EXPECT_EQ(d->node_actions[0].reason.rfind("straggler f-000007: ", 0), 0u);
  EXPECT_EQ(NodesOf(*d->new_placement), (std::set<std::string>{"node-01", "node-03"}));
  EXPECT_TRUE(Has(d->actions, "replace node-02 with node-03 (leaf)")) << Dump(*d);

  // Under the default policy the same forced restart stays on its nodes and cordons nothing.
  job_.spec.policy.straggler_action = StragglerAction::kRecord;
  d = Forced(job_, placement_, cluster_, earlier);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_TRUE(d->node_actions.empty()) << Dump(*d);
  EXPECT_EQ(NodesOf(*d->new_placement), (std::set<std::string>{"node-01", "node-02"}));
}

TEST_F(StragglerRecoveryTest, AForcedRestartWithNowhereToMoveTheStragglerLeavesItsMarkWaiting) {
  Build({"node-03", "node-04", "node-05", "node-06", "node-07"});
  job_.spec.policy.straggler_action = StragglerAction::kCordonAfterRestart;
  Result<RecoveryDecision> d = Forced(job_, placement_, cluster_, {ArrivalStraggler()});
  ASSERT_TRUE(d.ok()) << d.status().message();
  ASSERT_EQ(d->action, RecoveryDecision::kRestart) << Dump(*d);
  EXPECT_TRUE(d->node_actions.empty()) << Dump(*d);
  EXPECT_EQ(NodesOf(*d->new_placement), (std::set<std::string>{"node-01", "node-02"}));
}

}  // namespace
}  // namespace shepherd::testing
