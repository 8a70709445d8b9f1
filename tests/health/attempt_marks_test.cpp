// AttemptMarks: the goodput marks of an attempt from its ranks' reports. Every expected value is worked out
// by hand from the times the test chooses.
#include "health/attempt_marks.h"

#include <gtest/gtest.h>

#include "tests/health/health_test_util.h"

namespace shepherd {
namespace {

using namespace shepherd::testing;

const Time kT0 = FromUnixSeconds(1'800'000'000);
Time At(double s) {
  return kT0 + Seconds(s);
}

Report InPhase(int rank, Time rank_time, Phase phase) {
  Report r = Heartbeat(rank, rank_time);
  r.phase = phase;
  return r;
}

TEST(AttemptMarksTest, StepsMarkTheFirstAndNewestStepReportOnTheDaemonClock) {
  AttemptMarks m(2, 10);
  m.OnReport(Heartbeat(0, At(0), 1), At(1));  // a heartbeat's step is no step report
  EXPECT_FALSE(m.Quick().first_step_at);
  m.OnReport(Step(0, At(100), 1), At(5));  // the rank's clock is ignored for steps: receipt counts
  m.OnReport(Step(1, At(100), 1), At(6));
  m.OnReport(Step(0, At(100), 2), At(9));
  m.OnReport(Step(1, At(100), 1), At(10));  // a late report of an older step moves nothing
  MarksSnapshot s = m.Quick();
  EXPECT_EQ(s.first_step_at, At(5));
  EXPECT_EQ(s.last_step_at, At(9));
  EXPECT_EQ(s.last_step, 2);
}

TEST(AttemptMarksTest, LoadsBeforeTheFirstStepCountTheWallTimeAnyRankWasLoading) {
  AttemptMarks m(2, 10);
  // Rank 0 loads over [0, 4] and rank 1 over [1, 5] (rank clock = daemon clock here): together 5 s.
  m.OnReport(InPhase(0, At(0), Phase::kCheckpointLoad), At(0));
  m.OnReport(InPhase(1, At(1), Phase::kCheckpointLoad), At(1));
  m.OnReport(InPhase(0, At(4), Phase::kTrain), At(4));
  m.OnReport(InPhase(1, At(5), Phase::kUnspecified), At(5));  // an older client's heartbeat: training
  m.OnReport(Step(0, At(6), 1), At(6));
  // A load after the first step is not start-up: [10, 12] adds nothing.
  m.OnReport(InPhase(0, At(10), Phase::kCheckpointLoad), At(10));
  m.OnReport(InPhase(0, At(12), Phase::kTrain), At(12));
  EXPECT_DOUBLE_EQ(m.Quick().load_s, 5.0);
  EXPECT_DOUBLE_EQ(m.Quick().save_s, 0.0);
}

TEST(AttemptMarksTest, SavesAreTimedOnTheRanksClockAndCountOnceAcrossRanks) {
  AttemptMarks m(2, 10);
  // The ranks' clocks run 100 s ahead of the daemon's: lengths come from the rank clock, placement from
  // receipt. Rank 0 saves 0.5 s and both of its phase changes arrive in one batch at daemon time 11.
  m.OnReport(InPhase(0, At(110), Phase::kCheckpointSave), At(11));
  m.OnReport(InPhase(0, At(110.5), Phase::kTrain), At(11));
  EXPECT_DOUBLE_EQ(m.Quick().save_s, 0.5);
  // Rank 1 saves 3 s from daemon time 20, rank 0 2 s from 21 (its interval [21, 23] inside [20, 23]):
  // together 3 s; the step report ends rank 1's phase (a step is training).
  m.OnReport(InPhase(1, At(120), Phase::kCheckpointSave), At(20));
  m.OnReport(InPhase(0, At(121), Phase::kCheckpointSave), At(21));
  m.OnReport(InPhase(0, At(123), Phase::kTrain), At(23));
  m.OnReport(Step(1, At(123), 7), At(23.2));
  EXPECT_DOUBLE_EQ(m.Quick().save_s, 0.5 + 3.0);
  // A heartbeat sent before rank 1's last phase change (rank time 122.9 < 123) but delivered after it
  // is stale: it reopens nothing.
  m.OnReport(InPhase(1, At(122.9), Phase::kCheckpointSave), At(24));
  m.OnReport(InPhase(1, At(130), Phase::kTrain), At(30));
  EXPECT_DOUBLE_EQ(m.Quick().save_s, 3.5);
}

TEST(AttemptMarksTest, ARanksClockCannotClaimMoreThanTheDaemonSawPlusOneHeartbeatTimeout) {
  AttemptMarks m(1, 10);
  m.OnReport(InPhase(0, At(0), Phase::kCheckpointSave), At(0));
  m.OnReport(InPhase(0, At(1000), Phase::kTrain), At(2));  // 1000 s on its clock, 2 s on ours
  EXPECT_DOUBLE_EQ(m.Quick().save_s, 2.0 + 10.0);
}

TEST(AttemptMarksTest, AnOpenPhaseCountsToTheRanksLastReportInAFullSnapshotOnly) {
  AttemptMarks m(2, 10);
  m.OnReport(InPhase(0, At(0), Phase::kCheckpointSave), At(0));
  m.OnReport(InPhase(0, At(3), Phase::kCheckpointSave), At(3));  // still saving: its last report
  m.OnReport(Heartbeat(1, At(8)), At(8));                        // another rank's report moves nothing
  EXPECT_DOUBLE_EQ(m.Quick().save_s, 0.0);
  EXPECT_DOUBLE_EQ(m.Snapshot().save_s, 3.0);
  MarksSnapshot s = m.Snapshot();
  Attempt a;
  AttemptMarks::Apply(s, &a);
  EXPECT_DOUBLE_EQ(a.save_s, 3.0);
  EXPECT_FALSE(a.first_step_at);
}

TEST(AttemptMarksTest, ARestoredAttemptContinuesFromItsRecordedMarks) {
  Attempt a;
  a.first_step_at = At(-100);
  a.last_step_at = At(-1);
  a.last_step = 40;
  a.load_s = 4;
  a.save_s = 7;
  AttemptMarks m(1, 10, &a);
  m.OnReport(InPhase(0, At(0), Phase::kCheckpointSave), At(0));
  m.OnReport(InPhase(0, At(1), Phase::kTrain), At(1));
  m.OnReport(Step(0, At(2), 41), At(2));
  MarksSnapshot s = m.Quick();
  EXPECT_EQ(s.first_step_at, At(-100));
  EXPECT_EQ(s.last_step_at, At(2));
  EXPECT_EQ(s.last_step, 41);
  EXPECT_DOUBLE_EQ(s.load_s, 4.0);
  EXPECT_DOUBLE_EQ(s.save_s, 8.0);
}

TEST(CoverageTest, OverlappingIntervalsCountOnceAndDisjointOnesWhole) {
  Coverage c;
  c.Add(At(0), At(2));
  c.Add(At(1), At(3));  // +1
  c.Add(At(5), At(6));  // +1, a new block
  c.Add(At(4), At(5));  // touches it: +1
  c.Add(At(3), At(3));  // empty
  c.Add(At(7), At(6));  // negative: nothing
  EXPECT_DOUBLE_EQ(c.seconds(), 2 + 1 + 1 + 1);
}

}  // namespace
}  // namespace shepherd
