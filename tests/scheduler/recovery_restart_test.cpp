// Recovery policy, restarts: backoff, which checkpoint a restart resumes from, and manual restarts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/scheduler/recovery_test_util.h"

namespace shepherd {
namespace {

using namespace testing;  // the shared fixture and builders

TEST(RestartBackoffTest, DoublesPerConsecutiveRestartAndCapsAt300s) {
  Policy p;
  p.restart_backoff_s = 5;
  const Time last = kT0;
  const Time now = kT0 + Seconds(1);
  EXPECT_EQ(RestartNotBefore(p, now, std::nullopt, 4), now);
  EXPECT_EQ(RestartNotBefore(p, now, last, 0), kT0 + Seconds(5));
  EXPECT_EQ(RestartNotBefore(p, now, last, 1), kT0 + Seconds(10));
  EXPECT_EQ(RestartNotBefore(p, now, last, 3), kT0 + Seconds(40));
  EXPECT_EQ(RestartNotBefore(p, now, last, 6), kT0 + Seconds(300));  // 320 capped
  EXPECT_EQ(RestartNotBefore(p, now, last, 5000), kT0 + Seconds(300));
  EXPECT_EQ(RestartNotBefore(p, kT0 + Seconds(400), last, 6), kT0 + Seconds(400));  // already waited
}

TEST_F(RecoveryTest, DecisionCarriesTheBackoff) {
  Build();
  last_restart_ = kT0 - Seconds(5);
  consecutive_ = 2;  // 5 · 4 = 20 s after the last restart: 15 s from now
  RecoveryDecision d = Decide(MakeFinding(FindingKind::kHeartbeatLost, {3}, {"node-01"}));
  EXPECT_EQ(d.not_before, kT0 + Seconds(15));
  EXPECT_EQ(d.actions.back(), "wait 15 s before the next attempt (backoff)");
}

TEST_F(RecoveryTest, CheckpointFallsBackFromGoodToCompleteToScratch) {
  Build();
  const Finding f = MakeFinding(FindingKind::kHeartbeatLost, {3}, {"node-01"});
  EXPECT_EQ(Decide(f).resume_from->id, "job-1/1/40");

  lkg_.reset();
  RecoveryDecision d = Decide(f);
  EXPECT_EQ(d.resume_from->id, "job-1/1/50");
  EXPECT_EQ(d.actions.back(),
            "restart from checkpoint job-1/1/50 (step 50, latest complete; no last-known-good)");

  latest_.reset();
  d = Decide(f);
  EXPECT_FALSE(d.resume_from);
  EXPECT_EQ(d.actions.back(), "restart from scratch (step 0): no last-known-good");
}

TEST_F(RecoveryTest, NeverResumesFromABadOrPendingCheckpoint) {
  Build();
  lkg_ = Ckpt(40, CheckpointStatus::kBad);
  latest_ = Ckpt(50, CheckpointStatus::kBad);
  EXPECT_FALSE(Decide(MakeFinding(FindingKind::kHeartbeatLost, {3}, {"node-01"})).resume_from);
  latest_ = Ckpt(50, CheckpointStatus::kPending);
  EXPECT_FALSE(Decide(MakeFinding(FindingKind::kHeartbeatLost, {3}, {"node-01"})).resume_from);
}

class ManualRestartTest : public RecoveryTest {
 protected:
  Result<RecoveryDecision> Restart(const std::string& from, std::vector<std::string> replace = {}) {
    return ManualRestart({.job = job_,
                          .placement = placement_,
                          .cluster = cluster_,
                          .from = from,
                          .replace_nodes = std::move(replace),
                          .reason = "operator",
                          .checkpoints = checkpoints_,
                          .now = kT0});
  }
  std::vector<Checkpoint> checkpoints_ = {
      Ckpt(20, CheckpointStatus::kGood), Ckpt(40, CheckpointStatus::kGood),
      Ckpt(60, CheckpointStatus::kComplete), Ckpt(70, CheckpointStatus::kBad),
      Ckpt(80, CheckpointStatus::kPending)};
};

TEST_F(ManualRestartTest, FromLastKnownGoodLatestOrANamedCheckpoint) {
  Build();
  job_.restarts = 3;    // the budget does not apply ...
  last_restart_ = kT0;  // ... nor does backoff
  auto d = Restart("last-known-good");
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->action, RecoveryDecision::kRestart);
  EXPECT_EQ(d->resume_from->id, "job-1/1/40");
  EXPECT_EQ(d->not_before, kT0);
  EXPECT_EQ(d->reason, "manual restart: operator");
  EXPECT_EQ(d->new_placement->ranks, placement_.ranks);
  EXPECT_EQ(d->new_placement->attempt, 2);
  EXPECT_TRUE(Has(d->actions, "stop attempt 1"));

  d = Restart("latest");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->resume_from->id, "job-1/1/60");  // newest complete or good; 70 is bad, 80 pending

  d = Restart("job-1/1/20");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->resume_from->id, "job-1/1/20");
}

TEST_F(ManualRestartTest, NoQualifyingCheckpointIsAConflict) {
  Build();
  EXPECT_EQ(Restart("job-1/1/70").status().code(), Code::kConflict);  // bad
  EXPECT_EQ(Restart("job-1/1/80").status().code(), Code::kConflict);  // pending
  EXPECT_EQ(Restart("job-1/9/99").status().code(), Code::kNotFound);
  // Each names the field: the checkpoint asked for.
  EXPECT_EQ(Restart("job-1/1/70").status().fields(),
            (std::vector<FieldError>{{"from", "checkpoint job-1/1/70 is bad"}}));
  EXPECT_EQ(Restart("job-1/9/99").status().fields(),
            (std::vector<FieldError>{{"from", "no checkpoint job-1/9/99 of job job-1"}}));
  checkpoints_ = {Ckpt(60, CheckpointStatus::kComplete)};
  EXPECT_EQ(Restart("last-known-good").status().code(), Code::kConflict);
  checkpoints_.clear();
  EXPECT_EQ(Restart("latest").status().code(), Code::kConflict);
  job_.state = JobState::kSucceeded;
  checkpoints_ = {Ckpt(40, CheckpointStatus::kGood)};
  EXPECT_EQ(Restart("latest").status().code(), Code::kConflict);
}

// Another launcher's job (no command): Shepherd stops none of its ranks, and an attempt it started would
// make every report of the real ranks an old attempt's, ignored (a tester's job went unwatched).
TEST_F(ManualRestartTest, AnotherLaunchersJobIsNotRestarted) {
  Build();
  job_.spec.command.clear();
  job_.spec.launch_mode = LaunchMode::kExternal;
  auto d = Restart("last-known-good");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), Code::kConflict);
  EXPECT_THAT(d.status().message(), ::testing::HasSubstr("launched by someone else"));
}

TEST_F(ManualRestartTest, ReplaceNodesMovesTheJobWithoutCordoning) {
  Build();
  auto d = Restart("last-known-good", {"node-02"});
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_TRUE(d->node_actions.empty());
  EXPECT_EQ(d->replaced, std::vector<std::string>{"node-02->node-03 (leaf)"});
  EXPECT_EQ(Restart("last-known-good", {"node-99"}).status().code(), Code::kNotFound);
  // A node the job does not use: 422 naming the entry (it was a 400 naming no field).
  auto unused = Restart("last-known-good", {"node-02", "node-04"});
  EXPECT_EQ(unused.status().code(), Code::kInvalidContent);
  ASSERT_EQ(unused.status().fields().size(), 1u);
  EXPECT_EQ(unused.status().fields()[0].field, "replace_nodes[1]");
}

// No spare and no free node: the restart would queue the job, to be placed on whatever frees up first (the
// node it was told to leave among them). Refused, and nothing is stopped.
TEST_F(ManualRestartTest, ReplaceNodesWithNowhereToGoIsAConflictThatStopsNothing) {
  Build({"node-03", "node-05", "node-07", "node-04", "node-06"});  // only the job's own two nodes
  auto d = Restart("last-known-good", {"node-02"});
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), Code::kConflict);
  EXPECT_NE(d.status().message().find("nothing was stopped"), std::string::npos) << d.status().message();
  EXPECT_TRUE(Restart("last-known-good").ok());  // without replace_nodes: a restart in place
}

// A restart that waited, on its placement with node-02 cordoned meanwhile: node-02 is replaced (the spare of
// its leaf). Taking a spare ahead of the queue (spares_only), a placement that needs a free non-spare node
// is the queue's: kQueue.
TEST_F(RecoveryTest, PlaceRestartReplacesNodesThatStoppedBeingUsable) {
  Build();
  Node n2 = MakeNode("node-02", "s0", "l0");
  n2.schedulable = false;
  ASSERT_TRUE(cluster_.UpsertNode(n2).ok());
  RecoveryDecision d = PlaceRestart(job_, placement_, cluster_);
  ASSERT_EQ(d.action, RecoveryDecision::kRestart) << Dump(d);
  EXPECT_EQ(NodesOf(*d.new_placement), (std::set<std::string>{"node-01", "node-03"}));
  EXPECT_EQ(PlaceRestart(job_, placement_, cluster_, {}, /*spares_only=*/true).action,
            RecoveryDecision::kRestart);
  cluster_ = Cluster();
  Build({"node-03", "node-05", "node-07"});  // no spares: node-04 or node-06 would take node-02's ranks
  ASSERT_TRUE(cluster_.UpsertNode(n2).ok());
  EXPECT_EQ(PlaceRestart(job_, placement_, cluster_).action, RecoveryDecision::kRestart);
  EXPECT_EQ(PlaceRestart(job_, placement_, cluster_, {}, /*spares_only=*/true).action,
            RecoveryDecision::kQueue);
}

}  // namespace
}  // namespace shepherd
