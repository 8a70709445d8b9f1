// Loss and grad-norm anomalies through JobMonitor, judged at job level on final steps (a step is final once
// a later step is reported). Healthy noisy training is tested as carefully as the faults.
#include <gtest/gtest.h>

#include <limits>

#include "tests/health/health_test_util.h"

namespace shepherd {
namespace {

using namespace shepherd::testing;

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

// Rank 0 reports steps 1..5 with loss 2.0 and grad norm 1.0. Window after step 5 is final: five 2.0s,
// median 2, MAD 0, threshold T = 2 + max(6 × 1.4826 × 0, (3 − 1) × 2) = 6.
std::unique_ptr<JobMonitor> Warm(FakeClock& clock, int divergence_steps = 5) {
  MonitorContext c = MakeContext(1, 1, 1, clock.Now());
  c.policy.loss_divergence_steps = divergence_steps;
  auto m = MakeMonitor(c);
  for (int s = 1; s <= 5; ++s) m->Ingest(Step(0, clock.Now(), s, 2.0, 1.0), clock.Now());
  EXPECT_TRUE(m->Evaluate(clock.Now()).empty());
  return m;
}

std::vector<HealthEvidence> AnomalyEvidence(JobMonitor& m) {
  std::vector<HealthEvidence> out;
  for (auto& e : m.TakeEvidence())
    if (e.kind == HealthEvidence::Kind::kAnomaly) out.push_back(e);
  return out;
}

TEST(LossTest, NonFiniteLossRecordsItsOnsetOnce) {
  FakeClock clock;
  auto m = Warm(clock);
  auto r = m->Ingest(Step(0, clock.Now(), 7, kNan, 1.0), clock.Now());
  EXPECT_TRUE(r.urgent);                                       // at once, not at the step's finalization
  m->Ingest(Step(0, clock.Now(), 6, kNan, 1.0), clock.Now());  // a late report shows it began earlier
  auto fs = m->Evaluate(clock.Now());
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].kind, FindingKind::kNonfiniteLoss);
  EXPECT_EQ(fs[0].onset_step, 6);
  EXPECT_EQ(fs[0].ranks, std::vector<int>({0}));
  m->Ingest(Step(0, clock.Now(), 8, kNan, 1.0), clock.Now());
  EXPECT_TRUE(m->Evaluate(clock.Now()).empty());  // same incident
  auto ev = AnomalyEvidence(*m);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].step, 6);
  EXPECT_EQ(ev[0].what, "nonfinite_loss");
  EXPECT_EQ(m->HealthJson(clock.Now())["checks"]["loss"]["status"], "nonfinite");
}

TEST(LossTest, OneStepOutlierIsALossSpikeThatGradesNothingBad) {
  FakeClock clock;
  auto m = Warm(clock);
  m->Ingest(Step(0, clock.Now(), 6, 5.9, 1.0), clock.Now());  // 5.9 <= T = 6: normal
  m->Ingest(Step(0, clock.Now(), 7, 6.5, 1.0), clock.Now());  // step 6 final; window median still 2
  EXPECT_TRUE(m->Evaluate(clock.Now()).empty());              // step 7 not final yet
  m->Ingest(Step(0, clock.Now(), 8, 2.1, 1.0), clock.Now());  // step 7 final: 6.5 > 6
  auto fs = m->Evaluate(clock.Now());
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].kind, FindingKind::kLossSpike);
  EXPECT_EQ(fs[0].onset_step, 7);
  EXPECT_NE(fs[0].detail.find("threshold 6"), std::string::npos) << fs[0].detail;
  EXPECT_TRUE(AnomalyEvidence(*m).empty());  // a one-step outlier never grades checkpoints bad
  EXPECT_EQ(m->HealthJson(clock.Now())["checks"]["loss"]["status"], "spike");
  EXPECT_EQ(m->HealthJson(clock.Now())["status"], "healthy");
  m->Ingest(Step(0, clock.Now(), 9, 2.0, 1.0), clock.Now());  // step 8 final and normal: cleared
  EXPECT_TRUE(m->Evaluate(clock.Now()).empty());
  EXPECT_EQ(m->HealthJson(clock.Now())["checks"]["loss"]["status"], "ok");
  m->Ingest(Step(0, clock.Now(), 10, 9.0, 1.0), clock.Now());
  m->Ingest(Step(0, clock.Now(), 11, 2.0, 1.0), clock.Now());
  EXPECT_EQ(m->Evaluate(clock.Now()).size(), 1u);  // reopened
}

TEST(LossTest, LossAboveTheThresholdForNStepsIsDivergenceWithTheRunsFirstStepAsOnset) {
  FakeClock clock;
  auto m = Warm(clock, /*divergence_steps=*/3);
  // Steps 6, 7, 8 at 8.0 > 6 (values above T stay out of the window, so T stays 6).
  for (int s = 6; s <= 9; ++s) m->Ingest(Step(0, clock.Now(), s, 8.0, 1.0), clock.Now());  // 6..8 final
  auto fs = m->Evaluate(clock.Now());
  ASSERT_EQ(fs.size(), 2u);
  EXPECT_EQ(fs[0].kind, FindingKind::kLossSpike);
  EXPECT_EQ(fs[1].kind, FindingKind::kLossDivergence);
  EXPECT_EQ(fs[1].onset_step, 6);
  EXPECT_EQ(fs[1].step, 8);
  auto ev = AnomalyEvidence(*m);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].step, 6);
  EXPECT_EQ(ev[0].what, "loss_divergence");
  EXPECT_EQ(m->HealthJson(clock.Now())["checks"]["loss"]["status"], "divergence");
  EXPECT_EQ(m->HealthJson(clock.Now())["checks"]["loss"]["divergence"]["onset_step"], 6);
}

// An SGDR schedule (CosineAnnealingWarmRestarts) raises the learning rate from near zero back to its peak,
// and the loss of a small model rises for a while: before, that was loss_divergence, a restart, then a
// "reproducible anomaly" that failed the healthy job.
TEST(LossTest, ALossRiseAfterTheLearningRateRoseStartsANewBaselineNotADivergence) {
  auto run = [](bool lr_rises, int last_step, double (*loss_at)(int)) {
    FakeClock clock;
    MonitorContext c = MakeContext(1, 1, 1, clock.Now());
    c.policy.loss_divergence_steps = 3;
    auto m = MakeMonitor(c);
    std::vector<Finding> found;
    for (int s = 1; s <= last_step; ++s) {
      Report r = Step(0, clock.Now(), s, loss_at(s), 1.0);
      r.lr = s <= 20 ? 1e-3 / s : lr_rises ? 1e-3 : 1e-3 / 20;  // decays to 5e-5, then back to 1e-3 at 21
      m->Ingest(r, clock.Now());
      clock.Advance(std::chrono::seconds(1));
      for (Finding& f : m->Evaluate(clock.Now())) found.push_back(f);
    }
    return std::tuple{std::move(found), AnomalyEvidence(*m), m->HealthJson(clock.Now())["checks"]["loss"]};
  };
  // Steps 1-20 at 2.0 (median 2, T = 2 + 2 × 2 = 6), then 7.0: above T.
  auto restart = [](int s) { return s <= 20 ? 2.0 : 7.0; };
  auto [found, evidence, loss] = run(true, 31, restart);  // steps 21-30 final
  EXPECT_TRUE(found.empty()) << found.size() << " " << ToString(found[0].kind);
  EXPECT_TRUE(evidence.empty());
  EXPECT_EQ(loss["baseline_since_step"], 21);
  EXPECT_EQ(loss["status"], "ok");
  EXPECT_EQ(loss["rolling_median"], 7.0);  // the new level: 10 steps at 7.0
  // The same losses with the learning rate held: a divergence from step 21, as before.
  auto [held, held_evidence, held_loss] = run(false, 31, restart);
  ASSERT_EQ(held.size(), 2u);
  EXPECT_EQ(held[1].kind, FindingKind::kLossDivergence);
  EXPECT_EQ(held[1].onset_step, 21);
  EXPECT_EQ(held_evidence.size(), 1u);
  EXPECT_EQ(held_loss["baseline_since_step"], -1);
  // After the new baseline (median 7, T = 7 + 2 × 7 = 21) a divergence is still found: 30.0 from step 31.
  auto [later, later_evidence, later_loss] = run(true, 34, [](int s) {
    return s <= 20 ? 2.0 : s <= 30 ? 7.0 : 30.0;
  });  // 31-33 final
  ASSERT_EQ(later.size(), 2u);
  EXPECT_EQ(later[1].kind, FindingKind::kLossDivergence);
  EXPECT_EQ(later[1].onset_step, 31);
  EXPECT_EQ(later_evidence.size(), 1u);
}

TEST(LossTest, TwoOutliersSeparatedByANormalStepAreNotDivergence) {
  FakeClock clock;
  auto m = Warm(clock, /*divergence_steps=*/2);
  const double losses[] = {8.0, 2.0, 8.0, 2.0, 2.0};  // steps 6..10; 6 and 8 above T = 6, never 2 in a row
  for (int i = 0; i < 5; ++i) m->Ingest(Step(0, clock.Now(), 6 + i, losses[i], 1.0), clock.Now());
  auto fs = m->Evaluate(clock.Now());
  ASSERT_EQ(fs.size(), 1u);  // the second outlier reopens the spike, evaluated once here
  EXPECT_EQ(fs[0].kind, FindingKind::kLossSpike);
  EXPECT_TRUE(AnomalyEvidence(*m).empty());
}

TEST(LossTest, NoisyPerRankLossesOfHealthyTrainingGiveNoFinding) {
  // 8 ranks, each step one rank reports 10x the others (small per-rank batches): per-rank losses 1.0 and
  // 10.0. Job-level mean (7 × 1 + 10) / 8 = 2.125 every step; the max of one rank (10) would be 10x a
  // median of 1 and trip the old rule every step.
  FakeClock clock;
  auto m = MakeMonitor(MakeContext(1, 1, 8, clock.Now()));
  std::vector<Finding> all;
  for (int s = 1; s <= 200; ++s) {
    for (int r = 0; r < 8; ++r)
      m->Ingest(Step(r, clock.Now(), s, r == s % 8 ? 10.0 : 1.0, 1.0 + 0.1 * ((s + r) % 3), 1.0),
                clock.Now());
    clock.AdvanceSeconds(1);
    for (auto& f : m->Evaluate(clock.Now())) all.push_back(f);
  }
  EXPECT_TRUE(all.empty()) << ToString(all[0].kind) << ": " << all[0].detail;
  EXPECT_TRUE(AnomalyEvidence(*m).empty());
  EXPECT_EQ(m->HealthJson(clock.Now())["checks"]["loss"]["last_loss"], 2.125);
}

TEST(LossTest, NoisyJobLevelLossRaisesTheThresholdAboveTheFloor) {
  // Job-level losses alternate 2 and 4. At step 41 the window holds steps 9..40: 16 twos, 16 fours; the
  // (upper) median, index 16 of 32 sorted, is 4; deviations 16 × 2 and 16 × 0 → MAD 2.
  // T = 4 + max(6 × 1.4826 × 2 = 17.79, (3 − 1) × 4 = 8) = 21.79. A 15.0 is above the floor alone
  // (4 + 8 = 12) but within the noise: no finding.
  FakeClock clock;
  auto m = MakeMonitor(MakeContext(1, 1, 1, clock.Now()));
  for (int s = 1; s <= 40; ++s) m->Ingest(Step(0, clock.Now(), s, s % 2 ? 2.0 : 4.0, 1.0), clock.Now());
  m->Ingest(Step(0, clock.Now(), 41, 15.0, 1.0), clock.Now());
  m->Ingest(Step(0, clock.Now(), 42, 2.0, 1.0), clock.Now());
  EXPECT_TRUE(m->Evaluate(clock.Now()).empty());
  auto loss = m->HealthJson(clock.Now())["checks"]["loss"];
  EXPECT_EQ(loss["rolling_mad"], 2.0);
  EXPECT_NEAR(loss["threshold"].get<double>(), 21.7912, 1e-3);
}

TEST(LossTest, NearConstantLossUsesTheFloorNotAZeroMad) {
  // Loss 2.000 ± 0.001: MAD about 0.001, so without a floor T would be 2.009 and a 2.5 a spike. With the
  // floor T = 2 + 2 × 2 = 6 (approximately): 2.5 is normal.
  FakeClock clock;
  auto m = MakeMonitor(MakeContext(1, 1, 1, clock.Now()));
  for (int s = 1; s <= 20; ++s)
    m->Ingest(Step(0, clock.Now(), s, 2.0 + (s % 2 ? 0.001 : -0.001), 1.0), clock.Now());
  m->Ingest(Step(0, clock.Now(), 21, 2.5, 1.0), clock.Now());
  m->Ingest(Step(0, clock.Now(), 22, 2.0, 1.0), clock.Now());
  EXPECT_TRUE(m->Evaluate(clock.Now()).empty());
}

// Recorded, not an anomaly that warrants recovery (an outlier batch under clipping): no kAnomaly evidence,
// so no checkpoint after it is graded bad.
TEST(LossTest, GradNormSpikeWithNormalLossIsRecordedWithoutAnomalyEvidence) {
  FakeClock clock;
  auto m = Warm(clock);
  m->Ingest(Step(0, clock.Now(), 6, 2.0, 9.9), clock.Now());    // 9.9 < 10 × 1.0
  m->Ingest(Step(0, clock.Now(), 7, 2.0, 120.0), clock.Now());  // rolling max is now 9.9; 120 > 99
  EXPECT_TRUE(m->Evaluate(clock.Now()).empty());                // step 7 not final yet
  m->Ingest(Step(0, clock.Now(), 8, 2.0, 1.0), clock.Now());
  auto fs = m->Evaluate(clock.Now());
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].kind, FindingKind::kGradNormSpike);
  EXPECT_EQ(fs[0].onset_step, 7);
  EXPECT_TRUE(AnomalyEvidence(*m).empty());
  EXPECT_EQ(m->HealthJson(clock.Now())["status"], "sdc_suspected");
}

TEST(LossTest, GradNormSpikeWithAbnormalLossIsNotAGradNormFinding) {
  FakeClock clock;
  auto m = Warm(clock);
  m->Ingest(Step(0, clock.Now(), 6, kNan, 500.0), clock.Now());
  m->Ingest(Step(0, clock.Now(), 7, 2.0, 1.0), clock.Now());
  auto fs = m->Evaluate(clock.Now());
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].kind, FindingKind::kNonfiniteLoss);
}

}  // namespace
}  // namespace shepherd
