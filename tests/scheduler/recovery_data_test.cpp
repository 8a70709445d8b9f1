// Recovery policy for what the job's numbers say: SDC verdicts (majority, replay, no agreement, never
// agreed), replays and their recurrence, and loss and gradient anomalies (restart points never at or after
// an onset). Rank and node faults: recovery_test.cpp. Hand-built clusters, simulated time.
#include <gtest/gtest.h>

#include "tests/scheduler/recovery_test_util.h"

namespace shepherd {
namespace {

using namespace testing;  // the shared fixture and builders

// Replicas that have never agreed at any check hash state that is not replicated (BatchNorm buffers in a
// probe's script): no replay, no cordon, recorded. With a majority, or after an agreeing check, as before.
TEST_F(RecoveryTest, NoMajorityWhileNoCheckEverAgreedIsRecordedOnly) {
  Build();
  hashes_agreed_ = false;
  RecoveryDecision d = Decide(MakeFinding(FindingKind::kSdcSuspected, {0, 8}, {"node-01", "node-02"}), true);
  EXPECT_EQ(d.action, RecoveryDecision::kNone) << Dump(d);
  EXPECT_TRUE(d.node_actions.empty());
  EXPECT_FALSE(d.replay);
  replay_nodes_ = {"node-01", "node-02"};  // even as a recurrence after a replay
  d = Decide(MakeFinding(FindingKind::kSdcSuspected, {0, 8}, {"node-01", "node-02"}), true);
  EXPECT_TRUE(d.node_actions.empty()) << Dump(d);
  hashes_agreed_ = true;  // a recurrence that counts: the replay sets one of them aside
  d = Decide(MakeFinding(FindingKind::kSdcSuspected, {0, 8}, {"node-01", "node-02"}), true);
  EXPECT_EQ(d.set_aside, "node-01") << Dump(d);
}

// No two of 3+ replicas agree (verdict no_agreement): not replicated state, recorded, even after checks that
// agreed and as a recurrence on replayed nodes (a tester's healthy ZeroRedundancyOptimizer jobs got five
// nodes cordoned).
TEST_F(RecoveryTest, NoTwoReplicasAgreeingIsRecordedOnly) {
  Build();
  Finding f = MakeFinding(FindingKind::kSdcSuspected, {0, 8}, {"node-01", "node-02"});
  f.sdc_verdict = SdcVerdict::kNoAgreement;
  for (bool recurring : {false, true}) {  // after checks that agreed, and as a recurrence on replayed nodes
    replay_nodes_ = recurring ? std::set<std::string>{"node-01", "node-02"} : std::set<std::string>{};
    RecoveryDecision d = Decide(f, true);
    EXPECT_EQ(d.action, RecoveryDecision::kNone) << Dump(d);
    EXPECT_TRUE(d.node_actions.empty()) << Dump(d);
    EXPECT_FALSE(d.replay);
    EXPECT_TRUE(Has(d.actions, "record only: no two replicas agree (state that is not replicated)"))
        << Dump(d);
  }
}

// Two replicas mismatch, then again on the replay: each node was there both times, and cordoning both
// cordoned a healthy one. The next replay moves one of them off (no blame); a recurrence there names the
// other.
TEST_F(RecoveryTest, TwoReplicaSdcRecurringIsToldApartByAReplayWithoutOneOfThem) {
  Build();
  lkg_ = Ckpt(40, CheckpointStatus::kGood);
  latest_ = Ckpt(50, CheckpointStatus::kComplete);
  Finding f = MakeFinding(FindingKind::kSdcSuspected, {0, 8}, {"node-01", "node-02"});
  f.onset_step = 41;  // the last agreeing check was at step 40
  RecoveryDecision d1 = Decide(f, /*needs_replay=*/true);
  ASSERT_EQ(d1.action, RecoveryDecision::kRestart) << Dump(d1);
  EXPECT_TRUE(d1.replay);
  EXPECT_FALSE(d1.set_aside);
  EXPECT_TRUE(d1.node_actions.empty());
  EXPECT_EQ(d1.replay_nodes, (std::vector<std::string>{"node-01", "node-02"}));
  EXPECT_EQ(d1.new_placement->ranks, placement_.ranks);
  EXPECT_EQ(d1.resume_from->id, "job-1/1/40");
  replay_nodes_.insert(d1.replay_nodes.begin(), d1.replay_nodes.end());

  // The replay (attempt 2, same nodes) mismatches again: persistent, on one of the two.
  job_.attempt = 2, job_.restarts = 1;
  placement_.attempt = 2;
  RecoveryDecision d2 =
      Decide(MakeFinding(FindingKind::kSdcSuspected, {0, 8}, {"node-01", "node-02"}, 2), true);
  ASSERT_EQ(d2.action, RecoveryDecision::kRestart) << Dump(d2);
  EXPECT_TRUE(d2.node_actions.empty()) << Dump(d2);
  EXPECT_FALSE(d2.sdc_settled);
  EXPECT_TRUE(d2.replay);
  EXPECT_EQ(d2.set_aside, "node-01");
  EXPECT_EQ(d2.replay_nodes, (std::vector<std::string>{"node-02"}));
  EXPECT_EQ(d2.replaced, (std::vector<std::string>{"node-01->node-03 (leaf)"}));
  EXPECT_EQ(d2.resume_from->id, "job-1/1/40");
  EXPECT_TRUE(
      Has(d2.actions, "replay without node-01: a check that agrees confirms it, a recurrence clears it"))
      << Dump(d2);

  // That replay mismatches too (node-03 and node-02 now): node-01 goes back unblamed, and node-02 is moved
  // off in turn. Recurring without it would not name it (replicas that diverge by design recur anyway): only
  // the mismatch stopping without it does (JobHealth's sdc_confirmed).
  replay_nodes_ = {"node-02"};  // JobHealth drops the node set aside
  set_aside_replay_ = true;
  job_.attempt = 3, job_.restarts = 2;
  placement_ = *d2.new_placement;
  cluster_ = Cluster();
  Build();
  RecoveryDecision d3 =
      Decide(MakeFinding(FindingKind::kSdcSuspected, {0, 8}, {"node-03", "node-02"}, 3), true);
  ASSERT_EQ(d3.action, RecoveryDecision::kRestart) << Dump(d3);
  EXPECT_TRUE(d3.node_actions.empty()) << Dump(d3);
  EXPECT_EQ(d3.set_aside, "node-02");
  EXPECT_TRUE(d3.replay_nodes.empty());
  EXPECT_EQ(d3.replaced, (std::vector<std::string>{"node-02->node-05 (spine)"}));

  // Recurring with both original nodes moved off: the code, not a node. Recorded, nothing cordoned.
  replay_nodes_.clear();
  job_.attempt = 4, job_.restarts = 3;
  placement_ = *d3.new_placement;
  cluster_ = Cluster();
  Build();
  RecoveryDecision d4 =
      Decide(MakeFinding(FindingKind::kSdcSuspected, {0, 8}, {"node-03", "node-05"}, 4), true);
  EXPECT_EQ(d4.action, RecoveryDecision::kNone) << Dump(d4);
  EXPECT_TRUE(d4.node_actions.empty()) << Dump(d4);
  EXPECT_TRUE(d4.sdc_settled);
  EXPECT_TRUE(
      Has(d4.actions,
          "record only: the mismatch recurred with every suspect node moved off (the code, not a node)"))
      << Dump(d4);
}

// With no node to take one suspect's ranks, nothing can tell them apart: both are cordoned, saying why.
TEST_F(RecoveryTest, TwoReplicaSdcRecurringWithNoRoomToSetOneAsideCordonsBoth) {
  Build({"node-03", "node-04", "node-05", "node-06", "node-07"});
  replay_nodes_ = {"node-01", "node-02"};
  RecoveryDecision d = Decide(MakeFinding(FindingKind::kSdcSuspected, {0, 8}, {"node-01", "node-02"}), true);
  EXPECT_FALSE(d.replay);
  EXPECT_FALSE(d.set_aside);
  EXPECT_TRUE(d.sdc_settled);
  ASSERT_EQ(d.node_actions.size(), 2u) << Dump(d);
  EXPECT_NE(d.node_actions[0].reason.find("no node to replay without it: unproven"), std::string::npos)
      << d.node_actions[0].reason;
  EXPECT_EQ(d.action, RecoveryDecision::kQueue) << Dump(d);
}

// The replay without node-01 agreed (JobHealth's sdc_confirmed names node-01, which runs no rank now): it is
// cordoned, and the job, healthy on its replacement, runs on.
TEST_F(RecoveryTest, AConfirmedSdcOnANodeTheJobNoLongerUsesCordonsItAndRestartsNothing) {
  Build();
  RecoveryDecision d = Decide(MakeFinding(FindingKind::kSdcConfirmed, {}, {"node-05"}), false);
  EXPECT_EQ(d.action, RecoveryDecision::kNone) << Dump(d);
  ASSERT_EQ(d.node_actions.size(), 1u);
  EXPECT_EQ(d.node_actions[0].node, "node-05");
  EXPECT_TRUE(d.sdc_settled);
  EXPECT_FALSE(d.new_placement);
  EXPECT_EQ(d.actions, (std::vector<std::string>{"cordon node-05"}));
  // On a node the job runs on: cordon, replace, restart.
  d = Decide(MakeFinding(FindingKind::kSdcConfirmed, {}, {"node-02"}), false);
  EXPECT_EQ(d.action, RecoveryDecision::kRestart) << Dump(d);
}

TEST_F(RecoveryTest, SdcRecurringOnOneNodeOfAnEarlierReplayMovesThatNodeOff) {
  Build();
  replay_nodes_ = {"node-02", "node-06"};
  RecoveryDecision d = Decide(MakeFinding(FindingKind::kSdcSuspected, {0, 8}, {"node-01", "node-02"}), true);
  EXPECT_TRUE(d.replay);
  EXPECT_TRUE(d.node_actions.empty()) << Dump(d);
  EXPECT_EQ(d.set_aside, "node-02");
}

TEST_F(RecoveryTest, CleanReplayMakesTheSdcTransient) {
  Build();
  replay_nodes_.clear();  // the replay came back clean (JobHealth forgets its nodes)
  // A later mismatch on the same nodes starts a new replay instead of cordoning.
  RecoveryDecision d = Decide(MakeFinding(FindingKind::kSdcSuspected, {0, 8}, {"node-01", "node-02"}), true);
  EXPECT_TRUE(d.replay) << Dump(d);
  EXPECT_TRUE(d.node_actions.empty());
}

TEST_F(RecoveryTest, MajorityVoteSdcCordonsTheMinorityNode) {
  // TP 4, DP 4: ranks 0-7 (dp 0, 1) on node-01, ranks 8-15 (dp 2, 3) on node-02. Replica set tp = 1:
  // ranks 1, 5, 9, 13; rank 13 (node-02) disagrees with the other three.
  job_.plan = MakePlan(4, 1, 4);
  placement_ = Sequential(job_.plan, {"node-01", "node-02"}, 1);
  Build();
  RecoveryDecision d =
      Decide(MakeFinding(FindingKind::kSdcSuspected, {13}, {"node-02"}), /*needs_replay=*/false);
  ASSERT_EQ(d.action, RecoveryDecision::kRestart) << Dump(d);
  EXPECT_FALSE(d.replay);
  ASSERT_EQ(d.node_actions.size(), 1u);
  EXPECT_EQ(d.node_actions[0].node, "node-02");
  EXPECT_EQ(d.node_actions[0].action, NodeActionKind::kCordon);
  EXPECT_EQ(d.resume_from->id, "job-1/1/40");
}

TEST_F(RecoveryTest, SdcConfirmedCordons) {
  Build();
  RecoveryDecision d = Decide(MakeFinding(FindingKind::kSdcConfirmed, {}, {"node-01"}));
  EXPECT_EQ(d.node_actions, (std::vector<NodeAction>{{"node-01", NodeActionKind::kCordon, "sdc_confirmed"}}));
}

TEST_F(RecoveryTest, LossSpikeIsRecordedOnly) {
  Build();
  Finding f = MakeFinding(FindingKind::kLossSpike, {0, 1, 2}, {"node-01"});
  f.onset_step = 45;
  RecoveryDecision d = Decide(f);
  EXPECT_EQ(d.action, RecoveryDecision::kNone);
  EXPECT_TRUE(d.node_actions.empty());
  EXPECT_FALSE(d.new_placement);
  EXPECT_FALSE(d.resume_from);
  EXPECT_EQ(d.actions, std::vector<std::string>{"record only: loss spike (one-step outlier)"});
}

// One outlier batch under gradient clipping: a restart replayed it and a reproducible-anomaly check failed
// a healthy job. Corrupted parameters show in the replicas' hashes instead.
TEST_F(RecoveryTest, GradNormSpikeIsRecordedOnly) {
  Build();
  Finding f = MakeFinding(FindingKind::kGradNormSpike, {1}, {"node-01"});
  f.onset_step = 120;
  RecoveryDecision d = Decide(f);
  EXPECT_EQ(d.action, RecoveryDecision::kNone);
  EXPECT_TRUE(d.node_actions.empty());
  EXPECT_FALSE(d.resume_from);
  EXPECT_EQ(d.actions, std::vector<std::string>{"record only: gradient-norm spike"});
}

TEST_F(RecoveryTest, LossDivergenceRestartsFromLastKnownGoodWithoutBlame) {
  Build();
  Finding f = MakeFinding(FindingKind::kLossDivergence, {0, 1, 2}, {"node-01"});
  f.onset_step = 45;
  RecoveryDecision d = Decide(f);
  ASSERT_EQ(d.action, RecoveryDecision::kRestart) << Dump(d);
  EXPECT_TRUE(d.node_actions.empty());
  EXPECT_EQ(d.new_placement->ranks, placement_.ranks);
  EXPECT_EQ(d.resume_from->id, "job-1/1/40");
}

TEST_F(RecoveryTest, LossAnomalyNeverResumesAtOrAfterItsOnset) {
  Build();
  lkg_.reset();
  latest_ = Ckpt(50, CheckpointStatus::kComplete);  // complete, but not yet graded bad
  Finding f = MakeFinding(FindingKind::kNonfiniteLoss, {0}, {"node-01"});
  f.onset_step = 45;
  RecoveryDecision d = Decide(f);
  EXPECT_FALSE(d.resume_from);
  EXPECT_EQ(
      d.actions.back(),
      "restart from scratch (step 0): no last-known-good; latest complete job-1/1/50 is at or after the "
      "anomaly onset");
}

TEST_F(RecoveryTest, LossDivergenceNeverResumesAtOrAfterItsOnset) {
  Build();
  lkg_ = Ckpt(50, CheckpointStatus::kGood);  // good, but the divergence began at 45
  latest_ = Ckpt(50, CheckpointStatus::kGood);
  Finding f = MakeFinding(FindingKind::kLossDivergence, {0}, {"node-01"});
  f.onset_step = 45;
  RecoveryDecision d = Decide(f);
  ASSERT_EQ(d.action, RecoveryDecision::kRestart) << Dump(d);
  EXPECT_FALSE(d.resume_from);
}

}  // namespace
}  // namespace shepherd
