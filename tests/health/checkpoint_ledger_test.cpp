#include "health/checkpoint_ledger.h"

#include <gtest/gtest.h>

#include "tests/fakes/fake_clock.h"

namespace shepherd {
namespace {

using Kind = HealthEvidence::Kind;

class LedgerTest : public ::testing::Test {
 protected:
  CheckpointLedger ledger_{"job-1",
                           {/*expected_reporters=*/4, /*good_after_steps=*/10, /*hash_checks=*/true}};
  FakeClock clock_;

  std::vector<CheckpointTransition> SaveAll(int attempt, int64_t step) {
    std::vector<CheckpointTransition> all;
    for (int r = 0; r < 4; ++r)
      for (auto& t :
           ledger_.OnCheckpointReport(attempt, r, step, "/ckpt/" + std::to_string(step), clock_.Now()))
        all.push_back(t);
    return all;
  }
  std::vector<CheckpointTransition> Ev(Kind k, int64_t step, int attempt = 1, const char* what = "") {
    return ledger_.OnEvidence({k, attempt, step, what}, clock_.Now());
  }
  CheckpointStatus StatusOf(const std::string& id) { return ledger_.Find(id)->status; }
};

TEST_F(LedgerTest, PendingThenCompleteThenGood) {
  auto t = ledger_.OnCheckpointReport(1, 0, 100, "/ckpt/100", clock_.Now());
  ASSERT_EQ(t.size(), 1u);
  EXPECT_TRUE(t[0].created);
  EXPECT_EQ(t[0].checkpoint.id, "job-1/1/100");
  EXPECT_EQ(t[0].checkpoint.status, CheckpointStatus::kPending);
  EXPECT_EQ(t[0].part, 0);
  EXPECT_TRUE(
      ledger_.OnCheckpointReport(1, 0, 100, "/ckpt/100", clock_.Now()).empty());  // repeat counts once
  // Each further part is persisted with the record (its count), the status unchanged.
  for (int rank : {1, 2}) {
    t = ledger_.OnCheckpointReport(1, rank, 100, "/ckpt/100", clock_.Now());
    ASSERT_EQ(t.size(), 1u);
    EXPECT_FALSE(t[0].created);
    EXPECT_EQ(t[0].part, rank);
    EXPECT_EQ(t[0].checkpoint.status, CheckpointStatus::kPending);
    EXPECT_EQ(t[0].checkpoint.ranks_reported, rank + 1);
  }
  EXPECT_FALSE(ledger_.Latest());
  t = ledger_.OnCheckpointReport(1, 3, 100, "/ckpt/100", clock_.Now());
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].from, CheckpointStatus::kPending);
  EXPECT_EQ(t[0].checkpoint.status, CheckpointStatus::kComplete);
  EXPECT_EQ(t[0].checkpoint.ranks_reported, 4);
  EXPECT_FALSE(t[0].part);
  EXPECT_EQ(t[0].settled_parts, (std::vector<int>{0, 1, 2}));  // their records may go
  EXPECT_EQ(ledger_.Latest()->step, 100);
  EXPECT_FALSE(ledger_.LastKnownGood());

  EXPECT_TRUE(Ev(Kind::kHealthyThrough, 105).empty());
  EXPECT_TRUE(Ev(Kind::kHashAgreed, 100).empty());  // 105 < 100 + K
  t = Ev(Kind::kHealthyThrough, 110);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].checkpoint.status, CheckpointStatus::kGood);
  EXPECT_NE(t[0].checkpoint.reason.find("agreed at step 100"), std::string::npos) << t[0].checkpoint.reason;
  EXPECT_EQ(ledger_.LastKnownGood()->id, "job-1/1/100");
}

// The attack: one rank reports `checkpoint` for ever-new steps, each a pending entry (and a record) for ever.
// A rank may be the only reporter of kMaxSolePendingPerRank pending checkpoints of an attempt; beyond, its
// new ones are ignored and counted. Checkpoints other ranks take part in complete and grade as before.
TEST_F(LedgerTest, OneRanksEverNewCheckpointsAreBoundedAndOthersStillComplete) {
  const int cap = CheckpointLedger::kMaxSolePendingPerRank;
  for (int64_t step = 1000; step < 1000 + 10 * cap; ++step)
    ledger_.OnCheckpointReport(1, 3, step, "/forged/" + std::to_string(step), clock_.Now());
  EXPECT_EQ(ledger_.pending(), static_cast<size_t>(cap));
  EXPECT_EQ(ledger_.ignored_reports(), static_cast<uint64_t>(9 * cap));
  EXPECT_EQ(ledger_.All().size(), static_cast<size_t>(cap));
  // The other ranks' checkpoint, rank 3's part included, completes and becomes good.
  auto t = SaveAll(1, 100);
  ASSERT_FALSE(t.empty());
  EXPECT_EQ(t.back().checkpoint.status, CheckpointStatus::kComplete);
  Ev(Kind::kHashAgreed, 100);
  Ev(Kind::kHealthyThrough, 110);
  EXPECT_EQ(ledger_.LastKnownGood()->id, "job-1/1/100");
  // A forged entry another rank joins no longer counts as rank 3's alone: rank 3 may open one more.
  ledger_.OnCheckpointReport(1, 0, 1000, "/forged/1000", clock_.Now());
  EXPECT_FALSE(ledger_.OnCheckpointReport(1, 3, 5000, "/forged/5000", clock_.Now()).empty());
  EXPECT_TRUE(ledger_.OnCheckpointReport(1, 3, 5001, "/forged/5001", clock_.Now()).empty());
  // A new attempt's ranks start afresh.
  EXPECT_FALSE(ledger_.OnCheckpointReport(2, 3, 6000, "/ckpt/6000", clock_.Now()).empty());
  // After a restart the restored parts count again.
  CheckpointLedger restarted("job-1", {4, 10, true});
  std::vector<Checkpoint> records = ledger_.All();
  restarted.Restore(records);
  for (const Checkpoint& c : records)
    if (c.status == CheckpointStatus::kPending)
      restarted.RestorePart(c.attempt, c.step, c.attempt == 1 && c.step == 1000 ? 0 : 3);
  EXPECT_EQ(restarted.pending(), ledger_.pending());
  EXPECT_TRUE(restarted.OnCheckpointReport(1, 3, 7000, "/forged/7000", clock_.Now()).empty());
  EXPECT_EQ(restarted.ignored_reports(), 1u);
}

// The job as a whole holds at most kMaxPending pending checkpoints (a token for any rank of the job may
// speak for many ranks).
TEST_F(LedgerTest, AJobHoldsAtMostKMaxPendingPendingCheckpoints) {
  CheckpointLedger wide("job-1", {1 << 20, 10, true});
  const int ranks =
      static_cast<int>(CheckpointLedger::kMaxPending) / CheckpointLedger::kMaxSolePendingPerRank + 8;
  for (int rank = 0; rank < ranks; ++rank)
    for (int i = 0; i < CheckpointLedger::kMaxSolePendingPerRank; ++i)
      wide.OnCheckpointReport(1, rank, int64_t{rank} * 100 + i, "/p/" + std::to_string(rank * 100 + i),
                              clock_.Now());
  EXPECT_EQ(wide.pending(), CheckpointLedger::kMaxPending);
  EXPECT_EQ(wide.ignored_reports(), uint64_t{8} * CheckpointLedger::kMaxSolePendingPerRank);
}

// A tester's 4-rank checkpoint: three ranks reported, the daemon restarted, the fourth reported: it stayed
// pending at 2 of 4 forever (the parts were not persisted). The restored parts count, once each.
TEST_F(LedgerTest, PartsRestoredAfterARestartCompleteTheCheckpoint) {
  std::vector<CheckpointTransition> persisted;
  for (int rank : {0, 1, 2})
    for (auto& t : ledger_.OnCheckpointReport(1, rank, 100, "/ckpt/100", clock_.Now()))
      persisted.push_back(t);
  CheckpointLedger restarted("job-1", {4, 10, true});
  restarted.Restore({persisted.back().checkpoint});
  for (const auto& t : persisted)
    if (t.part) restarted.RestorePart(1, 100, *t.part);
  restarted.RestorePart(1, 100, 2);  // a part seen twice counts once
  EXPECT_TRUE(restarted.OnCheckpointReport(1, 1, 100, "/ckpt/100", clock_.Now()).empty());  // reported before
  auto t = restarted.OnCheckpointReport(1, 3, 100, "/ckpt/100", clock_.Now());
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].checkpoint.status, CheckpointStatus::kComplete);
  EXPECT_EQ(t[0].checkpoint.ranks_reported, 4);
}

// A tester's script saved "last.pt" (temp file + os.replace) every 10 steps: 10, 20, 30 good, 50 bad (a
// divergence at 47), all at one path. Recovery restarted "from checkpoint 30 (good)", and the rank loaded
// the diverged state of step 50 from that path. A later save to the same path makes the earlier ones bad.
TEST_F(LedgerTest, ACheckpointWhoseFileALaterSaveOverwroteIsNoRestartPoint) {
  CheckpointLedger ddp("job-1", {/*expected_reporters=*/2, /*good_after_steps=*/10, /*hash_checks=*/false});
  auto save = [&](int64_t step, const char* path) {
    return ddp.OnCheckpointReport(1, 0, step, path, clock_.Now(), /*replicated=*/true);
  };
  save(10, "/ckpt/step10.pt");
  save(20, "/ckpt/last.pt");
  ddp.OnEvidence({HealthEvidence::Kind::kHealthyThrough, 1, 35, ""}, clock_.Now());
  ASSERT_EQ(ddp.LastKnownGood()->step, 20);
  auto t = save(30, "/ckpt/last.pt");
  ASSERT_FALSE(t.empty());
  EXPECT_EQ(t.front().checkpoint.id, "job-1/1/20");
  EXPECT_EQ(t.front().checkpoint.status, CheckpointStatus::kBad);
  EXPECT_NE(t.front().checkpoint.reason.find("overwritten by checkpoint job-1/1/30"), std::string::npos)
      << t.front().checkpoint.reason;
  EXPECT_EQ(ddp.LastKnownGood()->step, 10);  // its own file is intact
  EXPECT_EQ(ddp.Latest()->step, 30);         // what last.pt holds now
  // Another rank's part of a sharded save names nothing: only rank 0's part (or a whole-state file) does.
  CheckpointLedger sharded("job-1", {2, 10, false});
  sharded.OnCheckpointReport(1, 0, 10, "/ckpt/rank0.pt", clock_.Now());
  sharded.OnCheckpointReport(1, 1, 10, "/ckpt/rank1.pt", clock_.Now());
  EXPECT_TRUE(sharded.OnCheckpointReport(1, 1, 20, "/ckpt/rank1.pt", clock_.Now()).size() == 1u);
  EXPECT_EQ(sharded.Find("job-1/1/10")->status, CheckpointStatus::kComplete);
}

// An ML engineer's ZeRO-3 job (zero_stage 3 in its spec) saved step_N/rank_R.pt per rank; the client called
// rank 0's file the whole state, the checkpoint was complete from one shard, and a restart from it failed
// twice on the missing rank_1.pt. In a sharded job "replicated" is that rank's part only.
TEST_F(LedgerTest, InAShardedJobAReplicatedReportIsOneRanksPart) {
  CheckpointLedger zero3(
      "job-1",
      {.expected_reporters = 2, .good_after_steps = 10, .hash_checks = false, .whole_state_saves = false});
  auto t = zero3.OnCheckpointReport(1, 0, 10, "/ckpt/step_10/rank_0.pt", clock_.Now(), /*replicated=*/true);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].checkpoint.status, CheckpointStatus::kPending);
  EXPECT_FALSE(zero3.Latest());
  t = zero3.OnCheckpointReport(1, 1, 10, "/ckpt/step_10/rank_1.pt", clock_.Now(), /*replicated=*/true);
  EXPECT_EQ(t.back().checkpoint.status, CheckpointStatus::kComplete);
}

TEST_F(LedgerTest, OneReplicatedSaveCompletesTheCheckpoint) {
  auto t = ledger_.OnCheckpointReport(1, 0, 100, "/ckpt/100.pt", clock_.Now(), /*replicated=*/true);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_TRUE(t[0].created);
  EXPECT_EQ(t[1].checkpoint.status, CheckpointStatus::kComplete);
  EXPECT_EQ(t[1].checkpoint.path, "/ckpt/100.pt");
  EXPECT_EQ(StatusOf("job-1/1/100"), CheckpointStatus::kComplete);
  // Without the flag one report of four leaves it pending.
  ledger_.OnCheckpointReport(1, 0, 110, "/ckpt/110.pt", clock_.Now());
  EXPECT_EQ(StatusOf("job-1/1/110"), CheckpointStatus::kPending);
}

TEST_F(LedgerTest, GoodNeedsAnAgreeingCheckAtOrAfterItsStep) {
  SaveAll(1, 100);
  Ev(Kind::kHashAgreed, 50);
  Ev(Kind::kHealthyThrough, 150);
  EXPECT_EQ(StatusOf("job-1/1/100"), CheckpointStatus::kComplete);
  EXPECT_EQ(Ev(Kind::kHashAgreed, 200).size(), 1u);
  EXPECT_EQ(StatusOf("job-1/1/100"), CheckpointStatus::kGood);
}

TEST_F(LedgerTest, BadWhenAnAnomalyOnsetPrecedesIt) {
  SaveAll(1, 100);
  SaveAll(1, 200);
  auto t = Ev(Kind::kAnomaly, 150, 1, "nonfinite_loss");
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].checkpoint.id, "job-1/1/200");
  EXPECT_EQ(t[0].checkpoint.status, CheckpointStatus::kBad);
  EXPECT_EQ(t[0].checkpoint.reason, "nonfinite_loss with onset at step 150, at or before this checkpoint");
  EXPECT_EQ(StatusOf("job-1/1/100"), CheckpointStatus::kComplete);
  // A checkpoint saved after the onset is bad as soon as it completes.
  auto later = SaveAll(1, 300);
  EXPECT_EQ(later.back().checkpoint.status, CheckpointStatus::kBad);
  EXPECT_EQ(ledger_.Latest()->step, 100);
  // Another attempt's evidence does not touch attempt 1, nor attempt 1's evidence attempt 2.
  SaveAll(2, 400);
  EXPECT_EQ(StatusOf("job-1/2/400"), CheckpointStatus::kComplete);
}

TEST_F(LedgerTest, BadBetweenTheLastAgreeingAndAMismatchingHashCheck) {
  SaveAll(1, 50);
  SaveAll(1, 100);
  SaveAll(1, 150);
  SaveAll(1, 250);
  Ev(Kind::kHashAgreed, 100);
  auto t = Ev(Kind::kHashMismatch, 300);
  // The mismatch also proves steps up to the last agreement (100) healthy: 50 + 10 <= 100 with the
  // agreement at 100 >= 50 makes 50 good (first, in step order); 150 and 250 are bad.
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].checkpoint.id, "job-1/1/50");
  EXPECT_EQ(t[0].checkpoint.status, CheckpointStatus::kGood);
  t.erase(t.begin());
  EXPECT_EQ(t[0].checkpoint.id, "job-1/1/150");
  EXPECT_EQ(t[1].checkpoint.id, "job-1/1/250");
  EXPECT_EQ(t[0].checkpoint.status, CheckpointStatus::kBad);
  EXPECT_NE(t[0].checkpoint.reason.find("mismatch at step 300 after the last agreeing check at step 100"),
            std::string::npos)
      << t[0].checkpoint.reason;
  EXPECT_EQ(StatusOf("job-1/1/50"), CheckpointStatus::kGood);
  EXPECT_EQ(StatusOf("job-1/1/100"), CheckpointStatus::kComplete);  // 100 + 10 > 100 proven so far
  Ev(Kind::kHealthyThrough, 400);
  EXPECT_EQ(StatusOf("job-1/1/100"), CheckpointStatus::kGood);  // its own check agreed
  EXPECT_EQ(StatusOf("job-1/1/150"), CheckpointStatus::kBad);
  EXPECT_EQ(ledger_.LastKnownGood()->step, 100);
}

TEST_F(LedgerTest, RestartFromAnOlderCheckpointAbandonsTheLaterBranch) {
  SaveAll(1, 100);
  SaveAll(1, 200);
  Ev(Kind::kHashAgreed, 200);
  Ev(Kind::kHealthyThrough, 250);
  EXPECT_EQ(ledger_.LastKnownGood()->step, 200);
  ledger_.OnAttemptStart(2, 100);  // the user forced a restart from step 100
  EXPECT_EQ(ledger_.LastKnownGood()->step, 100);
  SaveAll(2, 150);
  EXPECT_EQ(ledger_.Latest()->id, "job-1/2/150");
}

TEST(LedgerNoHashTest, WithoutHashChecksHealthyStepsSuffice) {
  CheckpointLedger ledger("job-2", {2, 5, /*hash_checks=*/false});
  Time now{};
  ledger.OnCheckpointReport(1, 0, 10, "/c", now);
  ledger.OnCheckpointReport(1, 1, 10, "/c", now);
  auto t = ledger.OnEvidence({Kind::kHealthyThrough, 1, 15, ""}, now);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].checkpoint.status, CheckpointStatus::kGood);
}

TEST_F(LedgerTest, MismatchAfterAnAgreementProvesTheStepsUpToItHealthy) {
  // Checkpoint 100; agreement at 120; mismatch at 130 (last agreement L = 120). Healthy through 120 is
  // proven by the mismatch itself: 120 >= 100 + 10, so 100 is good with no HealthyThrough evidence at all.
  SaveAll(1, 100);
  SaveAll(1, 125);
  Ev(Kind::kHashAgreed, 120);
  auto t = Ev(Kind::kHashMismatch, 130, 1, "sdc_suspected");
  EXPECT_EQ(StatusOf("job-1/1/100"), CheckpointStatus::kGood);
  EXPECT_EQ(StatusOf("job-1/1/125"), CheckpointStatus::kBad);  // 125 > L = 120
  EXPECT_EQ(ledger_.LastKnownGood()->id, "job-1/1/100");
}

TEST_F(LedgerTest, DemoteMakesAGoodCheckpointBadAndFallsBackToThePreviousGood) {
  SaveAll(1, 100);
  SaveAll(1, 200);
  Ev(Kind::kHashAgreed, 200);
  Ev(Kind::kHealthyThrough, 210);  // 100 + 10 and 200 + 10 <= 210, agreement at 200 >= both: both good
  ASSERT_EQ(ledger_.LastKnownGood()->id, "job-1/1/200");
  auto t = ledger_.Demote("job-1/1/200", "poisoned: two resumes failed within 3 steps", clock_.Now());
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].from, CheckpointStatus::kGood);
  EXPECT_EQ(t[0].checkpoint.status, CheckpointStatus::kBad);
  EXPECT_EQ(t[0].checkpoint.reason, "poisoned: two resumes failed within 3 steps");
  EXPECT_EQ(ledger_.LastKnownGood()->id, "job-1/1/100");
  EXPECT_TRUE(ledger_.Demote("job-1/1/200", "again", clock_.Now()).empty());  // already bad
  EXPECT_TRUE(ledger_.Demote("job-1/1/999", "unknown", clock_.Now()).empty());
  EXPECT_TRUE(Ev(Kind::kHashAgreed, 300).empty());  // evidence never revives it
  EXPECT_EQ(StatusOf("job-1/1/200"), CheckpointStatus::kBad);
}

}  // namespace
}  // namespace shepherd
