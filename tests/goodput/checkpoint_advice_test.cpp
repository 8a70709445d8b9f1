// Checkpoint advice against the published formulas, with the numbers worked out by hand below.
#include "goodput/checkpoint_advice.h"

#include <gtest/gtest.h>

namespace shepherd {
namespace {

TEST(DalyInterval, HigherOrderFormWorkedOut) {
  // δ = 60 s, M = 3600 s: x = δ/2M = 1/120; sqrt(2δM) = sqrt(432000) = 657.2671;
  // 1 + sqrt(x)/3 + x/9 = 1 + 0.0304290 + 0.0009259 = 1.0313549; τ = 657.2671 · 1.0313549 − 60 = 617.876.
  EXPECT_NEAR(DalyInterval(60, 3600), 617.876, 0.01);
  // δ = 1800 s, M = 3 h: x = 1/12; sqrt(2δM) = 6235.38; factor 1 + 0.096225 + 0.009259 = 1.105484;
  // τ = 6893.12 − 1800 = 5093.12.
  EXPECT_NEAR(DalyInterval(1800, 10800), 5093.12, 0.01);
}

TEST(DalyInterval, SaveCostAtLeastTwiceMtbfCheckpointsEveryMtbf) {
  EXPECT_DOUBLE_EQ(DalyInterval(7200, 3600), 3600);
  EXPECT_DOUBLE_EQ(DalyInterval(10000, 3600), 3600);
}

TEST(ExpectedEttr, WithoutFailuresIsTheShareOfTimeNotSaving) {
  // M → ∞: e^{R/M} → 1 and M·(e^{(τ+δ)/M} − 1) → τ + δ, so ETTR → τ / (τ + δ) = 1000 / 1100.
  EXPECT_NEAR(ExpectedEttr(1000, 100, 300, 1e12), 1000.0 / 1100.0, 1e-6);
}

TEST(ExpectedEttr, DalysWallTimeWorkedOut) {
  // τ = 1000, δ = 100, R = 300, M = 20000: T_w/T_s = 20000 · e^{0.015} · (e^{0.055} − 1) / 1000
  // = 20000 · 1.0151131 · 0.0565406 / 1000 = 1.1479050, so ETTR = 0.871154.
  EXPECT_NEAR(ExpectedEttr(1000, 100, 300, 20000), 0.871154, 1e-5);
}

TEST(ExpectedEttr, DalysIntervalBeatsHalfAndDouble) {
  const double tau = DalyInterval(120, 11135);
  const double best = ExpectedEttr(tau, 120, 600, 11135);
  EXPECT_GT(best, ExpectedEttr(tau / 2, 120, 600, 11135));
  EXPECT_GT(best, ExpectedEttr(tau * 2, 120, 600, 11135));
}

TEST(AdviseCheckpoints, Llama3RateOnTwoThousandNodesIsOneInterruptionEveryThreeHours) {
  // 419 interruptions over 2,048 nodes × 54 days × 24 h = 2,654,208 node-hours; the whole fleet of 2,048
  // nodes sees one every 2,654,208 / 2,048 / 419 h = 3.0931 h = 11,135.08 s.
  AdviceInput in{.save_s = 60, .restart_s = 300, .load_s = 120, .nodes = 2048, .current_interval_s = 3600};
  CheckpointAdvice a = AdviseCheckpoints(in);
  EXPECT_NEAR(a.mtbf_s, 11135.08, 0.01);
  EXPECT_NEAR(a.young_interval_s, 1155.95, 0.01);  // sqrt(2 · 60 · 11135.08) = sqrt(1,336,210)
  EXPECT_LT(a.interval_s, a.young_interval_s + 60);
  ASSERT_TRUE(a.ettr_now.has_value());
  EXPECT_GT(a.ettr_advised, *a.ettr_now);  // hourly saves on a 3 h MTBF lose more than the optimum
  EXPECT_EQ(a.current_interval_s, 3600);
}

TEST(AdviseCheckpoints, NoCurrentCadenceGivesNoEttrNow) {
  CheckpointAdvice a = AdviseCheckpoints({.save_s = 30, .nodes = 16});
  EXPECT_FALSE(a.ettr_now.has_value());
  EXPECT_GT(a.ettr_advised, 0.99);  // 16 nodes: M = 3600/(16·1.5786e-4) ≈ 1,425,000 s
}

}  // namespace
}  // namespace shepherd
