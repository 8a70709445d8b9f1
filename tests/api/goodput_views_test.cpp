// The checkpoint advice's inputs as the job goodput answer measures them, and the answer's shape when
// there is none yet. Expected figures are worked by hand from the records below.
#include "api/goodput_views.h"

#include <gtest/gtest.h>

namespace shepherd {
namespace {

const Time kEpoch = FromUnixSeconds(1'800'000'000);
Time T(double s) {
  return kEpoch + Seconds(s);
}

struct Fixture {
  Job job;
  Controller::GoodputRecords r;
  JobGoodput whole;
  Fixture() {
    job.id = "job-1";
    job.state = JobState::kRunning;
    r.job = &job;
    Attempt a1;
    a1.number = 1;
    a1.save_s = 20;
    a1.ended_at = T(900);
    Attempt a2;
    a2.number = 2;
    a2.save_s = 10;
    a2.resume_checkpoint = "job-1/1/10";
    a2.load_s = 30;
    r.attempts = {a1, a2};
    r.sizes = {{32, 4}, {32, 4}};
    auto ckpt = [&](int attempt, int64_t step, double at, CheckpointStatus s) {
      Checkpoint c;
      c.attempt = attempt;
      c.step = step;
      c.created_at = T(at);
      c.status = s;
      r.checkpoints.push_back(c);
    };
    ckpt(1, 10, 50, CheckpointStatus::kGood);
    ckpt(1, 20, 80, CheckpointStatus::kComplete);
    ckpt(2, 30, 1000, CheckpointStatus::kComplete);
    ckpt(2, 40, 1600, CheckpointStatus::kGood);
    ckpt(2, 50, 2200, CheckpointStatus::kPending);  // being saved: counts for the cadence, not for δ
    whole.incidents = {{BadputCause::kNodeLost, 2}};
    whole.buckets[static_cast<int>(Bucket::kDetection)].seconds = 40;
    whole.buckets[static_cast<int>(Bucket::kRecovery)].seconds = 300;
    whole.recovery.load.seconds = 60;
  }
};

TEST(GoodputViewsTest, AdviceInputsAreTheJobsMeasurements) {
  Fixture f;
  const AdviceOrReason a = AdviceInputFor(f.r, f.whole, FleetRate{});
  ASSERT_TRUE(a.input) << a.reason;
  EXPECT_DOUBLE_EQ(a.input->save_s, 30.0 / 4);                  // (20 + 10) s over 4 checkpoints past pending
  EXPECT_DOUBLE_EQ(a.input->restart_s, (40 + 300 - 60) / 2.0);  // detection + recovery - load, per incident
  EXPECT_DOUBLE_EQ(a.input->load_s, 30);                        // attempt 2, the one that resumed
  EXPECT_DOUBLE_EQ(a.input->nodes, 4);
  ASSERT_TRUE(a.input->current_interval_s);
  EXPECT_DOUBLE_EQ(*a.input->current_interval_s, (2200 - 1000) / 2.0);  // attempt 2's three checkpoints
  EXPECT_EQ(a.rate_source, "default");
  EXPECT_DOUBLE_EQ(a.input->interruptions_per_node_hour, 419.0 / (2048.0 * 54 * 24));

  const Json j = RenderJobGoodput(f.job, f.whole, a);
  ASSERT_TRUE(j["checkpoint_advice"].is_object()) << j.dump();
  EXPECT_DOUBLE_EQ(j["checkpoint_advice"]["inputs"]["save_s"].get<double>(), 7.5);
  EXPECT_EQ(j["checkpoint_advice"]["inputs"]["rate_source"], "default");
  EXPECT_DOUBLE_EQ(j["checkpoint_advice"]["current_interval_s"].get<double>(), 600);
  EXPECT_GT(j["checkpoint_advice"]["interval_s"].get<double>(), 0);
  EXPECT_FALSE(j.contains("checkpoint_advice_reason"));
}

TEST(GoodputViewsTest, TheFleetsRateOnceItHasEnoughAndTheDefaultRestartWithoutIncidents) {
  Fixture f;
  f.whole.incidents.clear();
  f.r.attempts.back().ended_at = T(2300);  // no attempt runs: no current cadence
  const FleetRate fleet{.per_node_hour = 0.002, .incidents = 12, .node_hours = 6000, .enough = true};
  const AdviceOrReason a = AdviceInputFor(f.r, f.whole, fleet);
  ASSERT_TRUE(a.input);
  EXPECT_DOUBLE_EQ(a.input->restart_s, kDefaultRestartSeconds);
  EXPECT_EQ(a.rate_source, "fleet");
  EXPECT_DOUBLE_EQ(a.input->interruptions_per_node_hour, 0.002);
  EXPECT_FALSE(a.input->current_interval_s);
}

TEST(GoodputViewsTest, NoAdviceUntilASaveIsMeasured) {
  Fixture f;
  for (Attempt& a : f.r.attempts) a.save_s = 0;
  const AdviceOrReason a = AdviceInputFor(f.r, f.whole, FleetRate{});
  EXPECT_FALSE(a.input);
  const Json j = RenderJobGoodput(f.job, f.whole, a);
  EXPECT_TRUE(j["checkpoint_advice"].is_null());
  EXPECT_FALSE(j["checkpoint_advice_reason"].get<std::string>().empty());
  // Every bucket is listed, recovery with its parts.
  for (int b = 0; b < kBucketCount; ++b) EXPECT_TRUE(j["buckets"].contains(ToString(static_cast<Bucket>(b))));
  for (const char* p : {"stop", "wait", "launch", "load"})
    EXPECT_TRUE(j["buckets"]["recovery"]["parts"].contains(p));
}

}  // namespace
}  // namespace shepherd
