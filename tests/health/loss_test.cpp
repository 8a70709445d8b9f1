// Loss and grad-norm anomalies through JobMonitor.
#include <gtest/gtest.h>

#include <limits>

#include "tests/health/health_test_util.h"

namespace shepherd {
namespace {

using namespace shepherd::testing;

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

// Rank 0 reports steps 1..5 with loss 2.0 and grad norm 1.0; steps 1..5 become final at step 6.
std::unique_ptr<JobMonitor> Warm(FakeClock& clock) {
  auto m = MakeMonitor(MakeContext(1, 1, 1, clock.Now()));
  for (int s = 1; s <= 5; ++s) m->Ingest(Step(0, clock.Now(), s, 2.0, 1.0), clock.Now());
  EXPECT_TRUE(m->Evaluate(clock.Now()).empty());
  return m;
}

TEST(LossTest, NonFiniteLossRecordsItsOnsetOnce) {
  FakeClock clock;
  auto m = Warm(clock);
  auto r = m->Ingest(Step(0, clock.Now(), 7, kNan, 1.0), clock.Now());
  EXPECT_TRUE(r.urgent);
  m->Ingest(Step(0, clock.Now(), 6, kNan, 1.0), clock.Now());  // a late report shows it began earlier
  auto fs = m->Evaluate(clock.Now());
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].kind, FindingKind::kNonfiniteLoss);
  EXPECT_EQ(fs[0].onset_step, 6);
  EXPECT_EQ(fs[0].ranks, std::vector<int>({0}));
  m->Ingest(Step(0, clock.Now(), 8, kNan, 1.0), clock.Now());
  EXPECT_TRUE(m->Evaluate(clock.Now()).empty());  // same incident
  auto ev = m->TakeEvidence();
  ASSERT_FALSE(ev.empty());
  EXPECT_EQ(ev.back().kind, HealthEvidence::Kind::kAnomaly);
  EXPECT_EQ(ev.back().step, 6);
  EXPECT_EQ(m->HealthJson(clock.Now())["checks"]["loss"]["status"], "nonfinite");
}

TEST(LossTest, SpikeAboveMedianTimesFactorAndItsClearing) {
  FakeClock clock;
  auto m = Warm(clock);
  m->Ingest(Step(0, clock.Now(), 6, 5.9, 1.0), clock.Now());  // 5.9 < 2.0 × 3: normal
  EXPECT_TRUE(m->Evaluate(clock.Now()).empty());
  m->Ingest(Step(0, clock.Now(), 7, 6.5, 1.0), clock.Now());  // > 6.0: spike
  auto fs = m->Evaluate(clock.Now());
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].kind, FindingKind::kLossSpike);
  EXPECT_EQ(fs[0].onset_step, 7);
  EXPECT_NE(fs[0].detail.find("rolling median 2"), std::string::npos) << fs[0].detail;
  m->Ingest(Step(0, clock.Now(), 8, 2.1, 1.0), clock.Now());  // normal
  m->Ingest(Step(0, clock.Now(), 9, 2.0, 1.0), clock.Now());  // step 8 final and normal: cleared
  EXPECT_TRUE(m->Evaluate(clock.Now()).empty());
  EXPECT_EQ(m->HealthJson(clock.Now())["checks"]["loss"]["status"], "ok");
  m->Ingest(Step(0, clock.Now(), 10, 9.0, 1.0), clock.Now());
  EXPECT_EQ(m->Evaluate(clock.Now()).size(), 1u);  // reopened
}

TEST(LossTest, GradNormSpikeWithNormalLossIsAnSdcSignal) {
  FakeClock clock;
  auto m = Warm(clock);
  m->Ingest(Step(0, clock.Now(), 6, 2.0, 9.9), clock.Now());  // 9.9 < 10 × 1.0
  EXPECT_TRUE(m->Evaluate(clock.Now()).empty());
  m->Ingest(Step(0, clock.Now(), 7, 2.0, 120.0), clock.Now());  // rolling max is now 9.9; 120 > 99
  auto fs = m->Evaluate(clock.Now());
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].kind, FindingKind::kGradNormSpike);
  EXPECT_EQ(fs[0].onset_step, 7);
  EXPECT_EQ(m->HealthJson(clock.Now())["status"], "sdc_suspected");
}

TEST(LossTest, GradNormSpikeWithAbnormalLossIsNotAGradNormFinding) {
  FakeClock clock;
  auto m = Warm(clock);
  m->Ingest(Step(0, clock.Now(), 6, kNan, 500.0), clock.Now());
  auto fs = m->Evaluate(clock.Now());
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].kind, FindingKind::kNonfiniteLoss);
}

}  // namespace
}  // namespace shepherd
