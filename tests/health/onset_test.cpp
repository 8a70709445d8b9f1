// Finding::onset_at from each detector's own evidence (a fake clock; the expected times are the ones the
// test sent its reports at).
#include <gtest/gtest.h>

#include <limits>

#include "tests/health/health_test_util.h"

namespace shepherd {
namespace {

using namespace shepherd::testing;

TEST(OnsetTest, HeartbeatLostStartsAtTheRanksLastReport) {
  FakeClock clock;
  auto m = Training(MakeContext(1, 1, 2, clock.Now(), /*gpus_per_node=*/1));
  clock.AdvanceSeconds(2);
  const Time last = clock.Now();  // rank 0's last report
  m->Ingest(Heartbeat(0, last, 3), last);
  m->Ingest(Heartbeat(1, last, 3), last);
  auto fs = RunTicks(*m, clock, 40, [&](Time now) { m->Ingest(Heartbeat(1, now, 3), now); });
  auto lost = OfKind(fs, FindingKind::kHeartbeatLost);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].ranks, std::vector<int>({0}));
  ASSERT_TRUE(lost[0].onset_at);
  EXPECT_EQ(*lost[0].onset_at, last);
  EXPECT_GT(lost[0].detected_at, last + Seconds(10));  // found a heartbeat timeout later at the earliest
}

TEST(OnsetTest, ARankThatNeverReportedHasNoKnownOnset) {
  FakeClock clock;
  MonitorContext c = MakeContext(1, 1, 2, clock.Now(), 1);
  auto m = MakeMonitor(c);
  auto fs = RunTicks(*m, clock, 130, [&](Time now) { m->Ingest(Heartbeat(1, now, 1), now); });
  auto lost = OfKind(fs, FindingKind::kHeartbeatLost);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_FALSE(lost[0].onset_at);
}

TEST(OnsetTest, ACollectiveHangStartsWhenTheHungCollectiveWasFirstEntered) {
  FakeClock clock;
  auto m = Training(MakeContext(1, 1, 2, clock.Now(), 1));  // ranks 0 and 1, one DP group
  for (int r = 0; r < 2; ++r) m->Ingest(InCollective(r, clock.Now(), "dp", 1, 5), clock.Now());
  clock.AdvanceSeconds(3);
  const Time entered = clock.Now();  // rank 0 enters dp#2; rank 1 never does (busy in its own code)
  auto state = [&](Time now) {
    m->Ingest(InCollective(0, now, "dp", 2, 5), now);
    m->Ingest(Heartbeat(1, now, 5), now);
  };
  state(entered);
  auto fs = RunTicks(*m, clock, 70, state);
  auto hangs = OfKind(fs, FindingKind::kHang);
  ASSERT_EQ(hangs.size(), 1u);
  EXPECT_EQ(hangs[0].ranks, std::vector<int>({1}));
  ASSERT_TRUE(hangs[0].onset_at);
  EXPECT_EQ(*hangs[0].onset_at, entered);
  EXPECT_GE(ToSeconds(hangs[0].detected_at - entered), 60.0);
}

TEST(OnsetTest, ANoProgressHangStartsAtTheLastProgress) {
  FakeClock clock;
  auto m = Training(MakeContext(1, 1, 2, clock.Now(), 1));
  clock.AdvanceSeconds(1);
  m->Ingest(Step(1, clock.Now(), 4), clock.Now());
  clock.AdvanceSeconds(2);
  const Time progress = clock.Now();  // the job step rises to 5: the last progress
  m->Ingest(Step(0, progress, 5), progress);
  // Both heartbeat on, in no collective; rank 1 lags at step 4.
  auto fs = RunTicks(*m, clock, 80, [&](Time now) {
    m->Ingest(Heartbeat(0, now, 5), now);
    m->Ingest(Heartbeat(1, now, 4), now);
  });
  auto hangs = OfKind(fs, FindingKind::kHang);
  ASSERT_EQ(hangs.size(), 1u);
  EXPECT_EQ(hangs[0].ranks, std::vector<int>({1}));
  ASSERT_TRUE(hangs[0].onset_at);
  EXPECT_EQ(*hangs[0].onset_at, progress);
}

TEST(OnsetTest, AnSdcStartsAtTheMismatchingCheck) {
  FakeClock clock;
  auto m = MakeMonitor(MakeContext(1, 1, 2, clock.Now(), 1));
  m->Ingest(Hash(0, clock.Now(), 100, "aa"), clock.Now());
  m->Ingest(Hash(1, clock.Now(), 100, "aa"), clock.Now());
  EXPECT_TRUE(m->Evaluate(clock.Now()).empty());
  clock.AdvanceSeconds(30);
  const Time check = clock.Now();  // the first hash of the mismatching check
  m->Ingest(Hash(0, check, 200, "bb"), check);
  clock.AdvanceSeconds(2);
  m->Ingest(Hash(1, clock.Now(), 200, "cc"), clock.Now());
  clock.AdvanceSeconds(3);
  auto fs = OfKind(m->Evaluate(clock.Now()), FindingKind::kSdcSuspected);
  ASSERT_EQ(fs.size(), 1u);
  ASSERT_TRUE(fs[0].onset_at);
  EXPECT_EQ(*fs[0].onset_at, check);
  EXPECT_EQ(fs[0].detected_at, check + Seconds(5));
}

// Rank 0 reports steps 1..5 with loss 2.0: the threshold is then 6 (loss_test.cpp works it out).
std::unique_ptr<JobMonitor> Warm(FakeClock& clock, int divergence_steps) {
  MonitorContext c = MakeContext(1, 1, 1, clock.Now());
  c.policy.loss_divergence_steps = divergence_steps;
  auto m = MakeMonitor(c);
  for (int s = 1; s <= 5; ++s) m->Ingest(Step(0, clock.Now(), s, 2.0, 1.0), clock.Now());
  EXPECT_TRUE(m->Evaluate(clock.Now()).empty());
  return m;
}

TEST(OnsetTest, ALossDivergenceStartsWhenItsOnsetStepWasReported) {
  FakeClock clock;
  auto m = Warm(clock, /*divergence_steps=*/3);
  std::vector<Time> reported;  // steps 6..9, 10 s apart, loss 100 (far above 6)
  for (int s = 6; s <= 9; ++s) {
    clock.AdvanceSeconds(10);
    reported.push_back(clock.Now());
    m->Ingest(Step(0, clock.Now(), s, 100.0, 1.0), clock.Now());
  }
  // Step 8 (the third above the threshold) became final when step 9 arrived: divergence from step 6.
  auto fs = m->Evaluate(clock.Now());
  auto div = OfKind(fs, FindingKind::kLossDivergence);
  ASSERT_EQ(div.size(), 1u);
  EXPECT_EQ(div[0].onset_step, 6);
  ASSERT_TRUE(div[0].onset_at);
  EXPECT_EQ(*div[0].onset_at, reported[0]);
  EXPECT_EQ(div[0].detected_at, reported[3]);
  auto spike = OfKind(fs, FindingKind::kLossSpike);
  ASSERT_EQ(spike.size(), 1u);
  EXPECT_EQ(*spike[0].onset_at, reported[0]);
}

TEST(OnsetTest, ANonFiniteLossStartsWhenItsStepWasFirstReported) {
  FakeClock clock;
  auto m = Warm(clock, 5);
  clock.AdvanceSeconds(10);
  const Time first = clock.Now();
  m->Ingest(Step(0, first, 6, 2.0, 1.0), first);  // step 6's first report: a finite loss
  clock.AdvanceSeconds(1);
  Report nan = Step(0, clock.Now(), 6, std::numeric_limits<double>::quiet_NaN(), 1.0);
  m->Ingest(nan, clock.Now());
  auto fs = OfKind(m->Evaluate(clock.Now()), FindingKind::kNonfiniteLoss);
  ASSERT_EQ(fs.size(), 1u);
  ASSERT_TRUE(fs[0].onset_at);
  EXPECT_EQ(*fs[0].onset_at, first);
}

}  // namespace
}  // namespace shepherd
