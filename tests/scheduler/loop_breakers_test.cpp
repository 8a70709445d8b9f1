// Loop breakers: each rule with the history that trips it and the healthy histories that must not, plus
// the order of precedence. Policy defaults (core/job.h): crash_step_window 5, no_progress_attempts 3,
// min_progress_steps 10, poisoned_checkpoint_steps 3.
#include "scheduler/loop_breakers.h"

#include <gtest/gtest.h>

#include <csignal>
#include <string>
#include <vector>

namespace shepherd {
namespace {

Finding F(int attempt, FindingKind kind, std::optional<int64_t> step, std::vector<std::string> nodes = {"n0"},
          std::optional<int64_t> onset = {}) {
  Finding f;
  f.job = "job-1";
  f.attempt = attempt;
  f.kind = kind;
  f.step = step;
  f.onset_step = onset;
  f.nodes = std::move(nodes);
  return f;
}

Finding Exit(int attempt, std::optional<int64_t> step, std::string node, std::optional<int> code,
             std::optional<int> signal = {}) {
  Finding f = F(attempt, FindingKind::kProcessExit, step, {std::move(node)});
  f.exit_code = code;
  f.signal = signal;
  return f;
}

AttemptSummary A(int number, int64_t resume_step, std::string ckpt, std::optional<int64_t> last_step,
                 std::set<std::string> nodes = {"n0", "n1"}) {
  return {number, resume_step, std::move(ckpt), last_step, std::move(nodes)};
}

class LoopBreakersTest : public ::testing::Test {
 protected:
  LoopVerdict Check(const Finding& f) { return CheckForLoop({f, earlier_, attempts_, policy_}); }
  Policy policy_;
  std::vector<Finding> earlier_;
  std::vector<AttemptSummary> attempts_;
};

// ---- reproducible anomaly ----

TEST_F(LoopBreakersTest, NonfiniteLossAtTheSameStepAfterResumingBeforeItReproduces) {
  // Attempt 1 from scratch hit NaN at step 1234; attempt 2 resumed from 1000 (< 1234) and hit it at 1234.
  attempts_ = {A(1, 0, "", 1234), A(2, 1000, "job-1/1/1000", 1234, {"n2", "n3"})};
  earlier_ = {F(1, FindingKind::kNonfiniteLoss, 1234, {"n0"}, 1234)};
  LoopVerdict v = Check(F(2, FindingKind::kNonfiniteLoss, 1234, {"n2"}, 1234));
  EXPECT_EQ(v.kind, LoopVerdict::Kind::kReproducibleAnomaly);
  EXPECT_NE(v.reason.find("reproduced at step 1234"), std::string::npos) << v.reason;
  EXPECT_TRUE(v.bad_checkpoint.empty());
}

TEST_F(LoopBreakersTest, OnsetStepOneApartStillReproducesAndOnsetWinsOverStep) {
  // Divergence onset 500 then 501 (|501 - 500| = 1); the steps at detection (505, 506) are not compared.
  attempts_ = {A(1, 0, "", 505), A(2, 400, "job-1/1/400", 506)};
  earlier_ = {F(1, FindingKind::kLossDivergence, 505, {"n0"}, 500)};
  EXPECT_EQ(Check(F(2, FindingKind::kLossDivergence, 506, {"n0"}, 501)).kind,
            LoopVerdict::Kind::kReproducibleAnomaly);
}

TEST_F(LoopBreakersTest, AnomalyTwoStepsApartIsNotReproduced) {
  attempts_ = {A(1, 0, "", 500), A(2, 400, "job-1/1/400", 502)};
  earlier_ = {F(1, FindingKind::kLossDivergence, 500, {"n0"}, 500)};
  EXPECT_EQ(Check(F(2, FindingKind::kLossDivergence, 502, {"n0"}, 502)).kind, LoopVerdict::Kind::kNone);
}

TEST_F(LoopBreakersTest, DifferentAnomalyKindIsNotReproduced) {
  attempts_ = {A(1, 0, "", 500), A(2, 400, "job-1/1/400", 500)};
  earlier_ = {F(1, FindingKind::kLossDivergence, 500, {"n0"}, 500)};
  EXPECT_EQ(Check(F(2, FindingKind::kNonfiniteLoss, 500, {"n0"}, 500)).kind, LoopVerdict::Kind::kNone);
}

// A rank stuck in its own code at step 45, found again at step 45 after a resume from 20, on other nodes:
// the code stalls there; another restart would only move it again (six attempts in a probe).
TEST_F(LoopBreakersTest, AHangWithCulpritsAtTheSameStepAfterAResumeFromBeforeReproduces) {
  attempts_ = {A(1, 0, "", 45), A(2, 20, "job-1/1/20", 45)};
  Finding first = F(1, FindingKind::kHang, 45, {"n0"});
  first.ranks = {1};
  earlier_ = {first};
  Finding again = F(2, FindingKind::kHang, 45, {"n1"});
  again.ranks = {1};
  EXPECT_EQ(Check(again).kind, LoopVerdict::Kind::kReproducibleAnomaly);
}

// A communication fault (no culprit ranks: every member inside the collective) again at the same step: on
// the same nodes it may be their link again (recovery judges it); on other nodes the hardware changed and
// the stall did not, so it is the code. Before, a code deadlock that looked like a communication fault
// cordoned one more healthy node at each recurrence.
TEST_F(LoopBreakersTest, ACommunicationFaultAtTheSameStepOnOtherNodesReproduces) {
  attempts_ = {A(1, 0, "", 128), A(2, 100, "job-1/1/100", 128), A(3, 100, "job-1/1/100", 128)};
  earlier_ = {F(1, FindingKind::kHang, 128, {"n1", "n2"})};
  EXPECT_EQ(Check(F(2, FindingKind::kHang, 128, {"n2", "n1"})).kind, LoopVerdict::Kind::kNone);
  LoopVerdict v = Check(F(3, FindingKind::kHang, 127, {"n1", "sp0"}));
  EXPECT_EQ(v.kind, LoopVerdict::Kind::kReproducibleAnomaly);
  EXPECT_NE(v.reason.find("not the hardware"), std::string::npos) << v.reason;
  // Not at the same step, or the earlier hang named culprits: no.
  EXPECT_EQ(Check(F(3, FindingKind::kHang, 140, {"n1", "sp0"})).kind, LoopVerdict::Kind::kNone);
  earlier_[0].ranks = {1};
  EXPECT_EQ(Check(F(3, FindingKind::kHang, 128, {"n1", "sp0"})).kind, LoopVerdict::Kind::kNone);
}

// A one-step gradient-norm spike is recorded, never restarted: it is no anomaly that reproduces.
TEST_F(LoopBreakersTest, AGradNormSpikeIsNoReproducibleAnomaly) {
  attempts_ = {A(1, 0, "", 500), A(2, 400, "job-1/1/400", 500)};
  earlier_ = {F(1, FindingKind::kGradNormSpike, 500, {"n0"}, 500)};
  EXPECT_EQ(Check(F(2, FindingKind::kGradNormSpike, 500, {"n0"}, 500)).kind, LoopVerdict::Kind::kNone);
}

TEST_F(LoopBreakersTest, ResumingAtOrAfterTheStepProvesNothing) {
  // Resumed from 500 itself: the anomaly at 500 was not recomputed from an earlier state.
  attempts_ = {A(1, 0, "", 500), A(2, 500, "job-1/1/500", 520)};
  earlier_ = {F(1, FindingKind::kNonfiniteLoss, 500, {"n0"}, 500)};
  EXPECT_EQ(Check(F(2, FindingKind::kNonfiniteLoss, 500, {"n0"}, 500)).kind, LoopVerdict::Kind::kNone);
}

TEST_F(LoopBreakersTest, SdcSuspectedAndLossSpikeNeverCountAsReproducible) {
  attempts_ = {A(1, 0, "", 500), A(2, 400, "job-1/1/400", 500)};
  earlier_ = {F(1, FindingKind::kSdcSuspected, 500), F(1, FindingKind::kLossSpike, 500)};
  EXPECT_EQ(Check(F(2, FindingKind::kSdcSuspected, 500)).kind, LoopVerdict::Kind::kNone);
  EXPECT_EQ(Check(F(2, FindingKind::kLossSpike, 500)).kind, LoopVerdict::Kind::kNone);
}

TEST_F(LoopBreakersTest, SameAttemptFindingIsNotARecurrence) {
  attempts_ = {A(1, 0, "", 500)};
  earlier_ = {F(1, FindingKind::kNonfiniteLoss, 500, {"n0"}, 500)};
  EXPECT_EQ(Check(F(1, FindingKind::kNonfiniteLoss, 500, {"n0"}, 500)).kind, LoopVerdict::Kind::kNone);
}

// ---- deterministic crash ----

TEST_F(LoopBreakersTest, SameExitCodeNearTheSameStepOnAnotherNodeIsADeterministicCrash) {
  // Exit 1 at step 300 on n0, then at step 304 on n5: |304 - 300| = 4 <= 5.
  attempts_ = {A(1, 0, "", 300), A(2, 0, "", 304, {"n4", "n5"})};
  earlier_ = {Exit(1, 300, "n0", 1)};
  LoopVerdict v = Check(Exit(2, 304, "n5", 1));
  EXPECT_EQ(v.kind, LoopVerdict::Kind::kDeterministicCrash);
  EXPECT_NE(v.reason.find("exit code 1 reproduced at step 304"), std::string::npos) << v.reason;
}

TEST_F(LoopBreakersTest, CrashHealthyCounterCases) {
  attempts_ = {A(1, 0, "", 300), A(2, 0, "", 306)};
  earlier_ = {Exit(1, 300, "n0", 1)};
  EXPECT_EQ(Check(Exit(2, 306, "n5", 1)).kind, LoopVerdict::Kind::kNone);      // |306 - 300| = 6 > 5
  EXPECT_EQ(Check(Exit(2, 304, "n0", 1)).kind, LoopVerdict::Kind::kNone);      // same node: could be hardware
  EXPECT_EQ(Check(Exit(2, 304, "n5", 2)).kind, LoopVerdict::Kind::kNone);      // another exit code
  EXPECT_EQ(Check(Exit(2, 304, "n5", {}, 9)).kind, LoopVerdict::Kind::kNone);  // killed by a signal
  earlier_ = {Exit(1, 300, "n0", {}, 9)};
  EXPECT_EQ(Check(Exit(2, 304, "n5", {}, 9)).kind, LoopVerdict::Kind::kNone);  // SIGKILL twice
}

TEST_F(LoopBreakersTest, TheSameOomKillOnAnotherNodeIsADeterministicCrash) {
  // The kernel's OOM killer took rank 3 at step 45 on n0 and at step 47 on n5: the job's memory use.
  auto oom = [](int attempt, int64_t step, std::string node, std::optional<bool> judged) {
    Finding f = Exit(attempt, step, std::move(node), {}, SIGKILL);
    f.oom_kill = judged;
    return f;
  };
  attempts_ = {A(1, 40, "c", 45), A(2, 40, "c", 47, {"n4", "n5"})};
  earlier_ = {oom(1, 45, "n0", true)};
  LoopVerdict v = Check(oom(2, 47, "n5", true));
  EXPECT_EQ(v.kind, LoopVerdict::Kind::kDeterministicCrash);
  EXPECT_NE(v.reason.find("an OOM kill (the job's own memory use) reproduced at step 47 on n5"),
            std::string::npos)
      << v.reason;
  // Not when either kill was not the OOM killer's (or no agent could tell), nor on the same node.
  EXPECT_EQ(Check(oom(2, 47, "n5", false)).kind, LoopVerdict::Kind::kNone);
  EXPECT_EQ(Check(oom(2, 47, "n5", std::nullopt)).kind, LoopVerdict::Kind::kNone);
  EXPECT_EQ(Check(oom(2, 47, "n0", true)).kind, LoopVerdict::Kind::kNone);
  EXPECT_EQ(Check(oom(2, 60, "n5", true)).kind, LoopVerdict::Kind::kNone);  // 15 steps apart
}

TEST_F(LoopBreakersTest, CrashBeforeAnyStepTwiceOnDifferentNodesIsDeterministic) {
  // An exit before an attempt's first step happened where that attempt resumed.
  attempts_ = {A(1, 0, "", {}), A(2, 0, "", {})};
  earlier_ = {Exit(1, {}, "n0", 2)};
  EXPECT_EQ(Check(Exit(2, {}, "n3", 2)).kind, LoopVerdict::Kind::kDeterministicCrash);
  EXPECT_EQ(Check(Exit(2, 1, "n3", 2)).kind, LoopVerdict::Kind::kDeterministicCrash);  // step 0 and 1
  EXPECT_EQ(Check(Exit(2, 9, "n3", 2)).kind, LoopVerdict::Kind::kNone);                // 9 steps apart
  // Resumed from checkpoints 20 and 30 (both unreadable, say), each failing as it loads: not one crash at
  // one step. Before, "before any step" matched "before any step" and the job was failed as a user error.
  attempts_ = {A(1, 0, "", 35), A(2, 20, "c20", {}), A(3, 30, "c30", {})};
  earlier_ = {Exit(2, {}, "n0", 2)};
  EXPECT_EQ(Check(Exit(3, {}, "n3", 2)).kind, LoopVerdict::Kind::kNone);
}

// ---- no progress ----

TEST_F(LoopBreakersTest, ThreeAttemptsWithoutPassingResumePlusTenStop) {
  // Reached 105 < 100 + 10, 109 < 110, none < 100 + 10.
  attempts_ = {A(1, 100, "c", 105), A(2, 100, "c", 109), A(3, 100, "c", {})};
  LoopVerdict v = Check(F(3, FindingKind::kHang, 100));
  EXPECT_EQ(v.kind, LoopVerdict::Kind::kNoProgress);
  EXPECT_NE(v.reason.find("attempts 1 to 3"), std::string::npos) << v.reason;
}

TEST_F(LoopBreakersTest, ANodeThatFailedIsNoProgressVerdict) {
  // The same three attempts without progress, but this one ends because its node died: hardware, and the
  // next attempt runs elsewhere (the e2e node-loss case on a loaded machine).
  attempts_ = {A(1, 0, "", 9), A(2, 0, "", 9), A(3, 0, "", {})};
  EXPECT_EQ(Check(F(3, FindingKind::kNodeLost, {})).kind, LoopVerdict::Kind::kNone);
  EXPECT_EQ(Check(F(3, FindingKind::kGpuFault, {})).kind, LoopVerdict::Kind::kNone);
  EXPECT_EQ(Check(F(3, FindingKind::kHang, {})).kind, LoopVerdict::Kind::kNoProgress);
}

TEST_F(LoopBreakersTest, ProgressInAnyOfTheLastAttemptsOrTooFewAttemptsIsNoLoop) {
  attempts_ = {A(1, 100, "c", 105), A(2, 100, "c", 110), A(3, 100, "c", 101)};  // 110 >= 100 + 10
  EXPECT_EQ(Check(F(3, FindingKind::kHang, 101)).kind, LoopVerdict::Kind::kNone);
  attempts_ = {A(1, 100, "c", 105), A(2, 100, "c", 101)};  // 2 < 3 attempts
  EXPECT_EQ(Check(F(2, FindingKind::kHang, 101)).kind, LoopVerdict::Kind::kNone);
  // An old stuck attempt outside the last three does not count: 4 made progress (150 >= 110).
  attempts_ = {A(1, 100, "c", 105), A(2, 100, "c", 150), A(3, 140, "d", 141), A(4, 140, "d", 141)};
  EXPECT_EQ(Check(F(4, FindingKind::kHang, 141)).kind, LoopVerdict::Kind::kNone);
}

// ---- poisoned checkpoint ----

TEST_F(LoopBreakersTest, EarlyFailuresAfterLoadingTheSameCheckpointOnDifferentNodesPoisonIt) {
  // Both resumed from job-1/1/200; exits at 201 and 203 (<= 200 + 3) on {n0,n1} then {n2,n3}.
  attempts_ = {A(1, 0, "", 250), A(2, 200, "job-1/1/200", 201, {"n0", "n1"}),
               A(3, 200, "job-1/1/200", 203, {"n2", "n3"})};
  earlier_ = {Exit(2, 201, "n0", {}, 11)};
  LoopVerdict v = Check(Exit(3, 203, "n2", {}, 11));
  EXPECT_EQ(v.kind, LoopVerdict::Kind::kPoisonedCheckpoint);
  EXPECT_EQ(v.bad_checkpoint, "job-1/1/200");
}

TEST_F(LoopBreakersTest, PoisonedHealthyCounterCases) {
  earlier_ = {Exit(2, 201, "n0", {}, 11)};
  // Late failure: 204 > 200 + 3.
  attempts_ = {A(1, 0, "", 250), A(2, 200, "c200", 201, {"n0", "n1"}), A(3, 200, "c200", 204, {"n2", "n3"})};
  EXPECT_EQ(Check(Exit(3, 204, "n2", {}, 11)).kind, LoopVerdict::Kind::kNone);
  // Same nodes both times: could be the hardware.
  attempts_ = {A(1, 0, "", 250), A(2, 200, "c200", 201, {"n0", "n1"}), A(3, 200, "c200", 201, {"n0", "n1"})};
  EXPECT_EQ(Check(Exit(3, 201, "n0", {}, 11)).kind, LoopVerdict::Kind::kNone);
  // Different checkpoints.
  attempts_ = {A(1, 0, "", 250), A(2, 200, "c200", 201, {"n0", "n1"}), A(3, 150, "c150", 151, {"n2", "n3"})};
  EXPECT_EQ(Check(Exit(3, 151, "n2", {}, 11)).kind, LoopVerdict::Kind::kNone);
  // A straggler is not a failure.
  attempts_ = {A(1, 0, "", 250), A(2, 200, "c200", 201, {"n0", "n1"}), A(3, 200, "c200", 201, {"n2", "n3"})};
  EXPECT_EQ(Check(F(3, FindingKind::kStraggler, 201, {"n2"})).kind, LoopVerdict::Kind::kNone);
}

TEST_F(LoopBreakersTest, AnomalyBeforeAnyStepAfterLoadPoisonsTheCheckpoint) {
  attempts_ = {A(1, 0, "", 250), A(2, 200, "c200", {}, {"n0"}), A(3, 200, "c200", {}, {"n1"})};
  earlier_ = {F(2, FindingKind::kNonfiniteLoss, {}, {"n0"})};
  EXPECT_EQ(Check(F(3, FindingKind::kNonfiniteLoss, {}, {"n1"})).kind,
            LoopVerdict::Kind::kPoisonedCheckpoint);
}

// ---- precedence ----

TEST_F(LoopBreakersTest, PoisonedCheckpointTakesPrecedenceOverReproducibleAnomaly) {
  // NaN at 201 after loading c200 twice on different nodes: both rules match (200 < 201, 201 <= 203).
  attempts_ = {A(1, 200, "c200", 201, {"n0"}), A(2, 200, "c200", 201, {"n1"})};
  earlier_ = {F(1, FindingKind::kNonfiniteLoss, 201, {"n0"}, 201)};
  EXPECT_EQ(Check(F(2, FindingKind::kNonfiniteLoss, 201, {"n1"}, 201)).kind,
            LoopVerdict::Kind::kPoisonedCheckpoint);
  // After the demotion the next attempt resumes from c100 and hits NaN at 201 again: reproducible.
  attempts_.push_back(A(3, 100, "c100", 201, {"n2"}));
  earlier_.push_back(F(2, FindingKind::kNonfiniteLoss, 201, {"n1"}, 201));
  EXPECT_EQ(Check(F(3, FindingKind::kNonfiniteLoss, 201, {"n2"}, 201)).kind,
            LoopVerdict::Kind::kReproducibleAnomaly);
}

TEST_F(LoopBreakersTest, DeterministicCrashTakesPrecedenceOverNoProgress) {
  // Three attempts from scratch, each crashing at step 2 (< 0 + 10) with exit 1 on another node.
  attempts_ = {A(1, 0, "", 2, {"n0"}), A(2, 0, "", 2, {"n1"}), A(3, 0, "", 2, {"n2"})};
  earlier_ = {Exit(1, 2, "n0", 1), Exit(2, 2, "n1", 1)};
  EXPECT_EQ(Check(Exit(3, 2, "n2", 1)).kind, LoopVerdict::Kind::kDeterministicCrash);
  // The same history with SIGKILLs: no deterministic crash, but no progress.
  earlier_ = {Exit(1, 2, "n0", {}, 9), Exit(2, 2, "n1", {}, 9)};
  EXPECT_EQ(Check(Exit(3, 2, "n2", {}, 9)).kind, LoopVerdict::Kind::kNoProgress);
}

TEST_F(LoopBreakersTest, FirstFailureOfAHealthyJobIsNoLoop) {
  attempts_ = {A(1, 0, "", 5000)};
  EXPECT_EQ(Check(Exit(1, 5000, "n0", 1)).kind, LoopVerdict::Kind::kNone);
  EXPECT_EQ(Check(F(1, FindingKind::kNonfiniteLoss, 5000, {"n0"}, 5000)).kind, LoopVerdict::Kind::kNone);
}

}  // namespace
}  // namespace shepherd
