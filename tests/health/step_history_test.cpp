// The final-step history behind GET /v1/jobs/{id}/steps, and per-rank lateness in the health JSON.
#include <gtest/gtest.h>

#include "health/step_history.h"
#include "tests/health/health_test_util.h"

namespace shepherd {
namespace {

using namespace shepherd::testing;

TEST(StepHistoryTest, KeepsTheNewestOldestFirst) {
  StepHistory h;
  EXPECT_TRUE(h.Last(10).empty());
  for (int s = 1; s <= 3; ++s) h.Add({s, 1.0 * s, std::nullopt, Time{}});
  auto last = h.Last(2);
  ASSERT_EQ(last.size(), 2u);
  EXPECT_EQ(last[0].step, 2);
  EXPECT_EQ(last[1].step, 3);
  EXPECT_EQ(h.Last(100).size(), 3u);
}

TEST(StepHistoryTest, IsBoundedAndDropsTheOldest) {
  StepHistory h;
  const int64_t n = StepHistory::kCapacity + 123;
  for (int64_t s = 0; s < n; ++s) h.Add({s, std::nullopt, std::nullopt, Time{}});
  EXPECT_EQ(h.size(), StepHistory::kCapacity);
  auto all = h.Last(StepHistory::kCapacity);
  ASSERT_EQ(all.size(), StepHistory::kCapacity);
  EXPECT_EQ(all.front().step, 123);
  EXPECT_EQ(all.back().step, n - 1);
  for (size_t i = 1; i < all.size(); ++i) EXPECT_EQ(all[i].step, all[i - 1].step + 1);
  auto three = h.Last(3);
  EXPECT_EQ(three.front().step, n - 3);
}

TEST(StepHistoryTest, MonitorRecordsJobLossAndMedianStepTimeOfFinalSteps) {
  FakeClock clock;
  auto m = Training(MakeContext(1, 1, 3, clock.Now()));
  const Time t1 = clock.Now();
  // Step 1: losses 1, 2, 3 (mean 2); step times 0.5, 0.9, 0.6 (median 0.6).
  m->Ingest(Step(0, t1, 1, 1.0, {}, 0.5), t1);
  m->Ingest(Step(1, t1, 1, 2.0, {}, 0.9), t1);
  m->Ingest(Step(2, t1, 1, 3.0, {}, 0.6), t1);
  EXPECT_EQ(m->step_history().size(), 0u);  // not final until a later step arrives
  clock.AdvanceSeconds(2);
  m->Ingest(Step(0, clock.Now(), 2, {}, {}, 0.7), clock.Now());  // step time only
  auto h = m->step_history().Last(10);
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].step, 1);
  EXPECT_DOUBLE_EQ(*h[0].loss, 2.0);
  EXPECT_FLOAT_EQ(static_cast<float>(*h[0].step_time_s), 0.6f);
  EXPECT_EQ(h[0].time, clock.Now());
  m->Ingest(Step(0, clock.Now(), 3, 1.5), clock.Now());
  h = m->step_history().Last(10);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[1].step, 2);
  EXPECT_FALSE(h[1].loss);  // no rank sent a loss for step 2
  EXPECT_FLOAT_EQ(static_cast<float>(*h[1].step_time_s), 0.7f);
}

TEST(RankLatenessTest, SecondsSinceEachRanksLastReportNullWhenNeverHeard) {
  FakeClock clock;
  auto m = Training(MakeContext(1, 1, 4, clock.Now()));
  m->Ingest(Heartbeat(0, clock.Now()), clock.Now());
  m->Ingest(Heartbeat(1, clock.Now()), clock.Now());
  clock.AdvanceSeconds(2.5);
  m->Ingest(Heartbeat(1, clock.Now()), clock.Now());
  m->Ingest(Heartbeat(2, clock.Now()), clock.Now());
  clock.AdvanceSeconds(0.5);
  Json ranks = m->HealthJson(clock.Now())["ranks"];
  const Json& seen = ranks["last_seen_s"];
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_DOUBLE_EQ(seen[0].get<double>(), 3.0);  // the late one
  EXPECT_DOUBLE_EQ(seen[1].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(seen[2].get<double>(), 0.5);
  EXPECT_TRUE(seen[3].is_null());  // never reported
  EXPECT_FALSE(ranks.contains("summary"));
}

TEST(RankLatenessTest, AWorldOverTheLimitGetsASummary) {
  FakeClock clock;
  auto m = Training(MakeContext(1, 1, JobMonitor::kMaxRankLateness + 8, clock.Now(), 8));
  for (int r = 0; r < 100; ++r) m->Ingest(Heartbeat(r, clock.Now()), clock.Now());
  clock.AdvanceSeconds(4);
  for (int r = 100; r < JobMonitor::kMaxRankLateness + 8; ++r) m->Ingest(Heartbeat(r, clock.Now()), clock.Now());
  clock.AdvanceSeconds(1);
  Json ranks = m->HealthJson(clock.Now())["ranks"];
  EXPECT_TRUE(ranks["last_seen_s"].is_null());
  const Json& s = ranks["summary"];
  EXPECT_EQ(s["ranks"], JobMonitor::kMaxRankLateness + 8);
  EXPECT_EQ(s["never_reported"], 0);
  EXPECT_DOUBLE_EQ(s["median_s"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(s["max_s"].get<double>(), 5.0);
}

}  // namespace
}  // namespace shepherd
