#include "control/job_health.h"

#include <gtest/gtest.h>

#include "tests/fakes/fake_clock.h"
#include "tests/health/health_test_util.h"

namespace shepherd {
namespace {

using namespace shepherd::testing;

// DP = 4 (TP 1), two ranks per node: ranks 0, 1 on n0 and 2, 3 on n1.
struct Fixture {
  explicit Fixture(Time now) {
    MonitorContext c = MakeContext(1, 1, 4, now, /*gpus_per_node=*/2);
    job.id = c.job;
    job.plan = c.plan;
    job.spec.policy = c.policy;
    attempt.job = job.id;
    attempt.number = 1;
    attempt.placement = c.placement;
  }
  Job job;
  Attempt attempt;
};

ReportBatch Batch(std::vector<Report> rs) {
  ReportBatch b;
  for (size_t i = 0; i < rs.size(); ++i) b.reports.emplace_back(i, rs[i]);
  return b;
}

TEST(JobHealthTest, AJobAnotherLauncherStartsIsWatchedFromItsFirstReport) {
  FakeClock clock;
  Fixture fx(clock.Now());
  JobHealth h(fx.job);
  h.OnAttemptStart(fx.job, fx.attempt, JobHealth::Launch::kExternal, clock.Now());
  clock.AdvanceSeconds(3600);  // nobody reported for an hour: nothing is judged
  EXPECT_TRUE(h.Evaluate(clock.Now()).findings.empty());
  EXPECT_FALSE(h.watching());
  h.Ingest(Batch({Heartbeat(0, clock.Now())}), clock.Now());
  EXPECT_TRUE(h.watching());
  // The startup grace (120 s) counts from the first report: rank 0 keeps beating, ranks 1-3 stay silent.
  for (int i = 0; i < 23; ++i) {
    clock.AdvanceSeconds(5);
    h.Ingest(Batch({Heartbeat(0, clock.Now())}), clock.Now());
    for (const Finding& f : h.Evaluate(clock.Now()).findings)
      ADD_FAILURE() << ToString(f.kind) << ": " << f.detail;
  }
  clock.AdvanceSeconds(6);  // 121 s after the first report
  h.Ingest(Batch({Heartbeat(0, clock.Now())}), clock.Now());
  auto fs = h.Evaluate(clock.Now()).findings;
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].kind, FindingKind::kHeartbeatLost);
  EXPECT_EQ(fs[0].ranks, (std::vector<int>{1, 2, 3}));
}

TEST(JobHealthTest, IngestKeepsEachRejectionAtItsIndex) {
  FakeClock clock;
  Fixture fx(clock.Now());
  JobHealth h(fx.job);
  h.OnAttemptStart(fx.job, fx.attempt, JobHealth::Launch::kRecovered, clock.Now());
  ReportBatch b = Batch({Heartbeat(0, clock.Now()), Heartbeat(9, clock.Now()), Heartbeat(1, clock.Now())});
  b.rejected.push_back({3, "kind: unknown"});  // refused by the parser in api/
  Report old = Heartbeat(2, clock.Now());
  old.attempt = 0;
  b.reports.emplace_back(4, old);
  JobHealth::IngestOutcome out = h.Ingest(b, clock.Now());
  EXPECT_EQ(out.accepted, 3);  // ranks 0 and 1, and the old attempt's (ignored)
  EXPECT_EQ(out.ignored, 1);
  ASSERT_EQ(out.rejected.size(), 2u);
  EXPECT_EQ(out.rejected[0].index, 1u);  // rank 9 is outside the world of 4
  EXPECT_EQ(out.rejected[1].index, 3u);
}

TEST(JobHealthTest, TwoTwoSplitNeedsAReplayAndACleanReplayIsTransient) {
  FakeClock clock;
  Fixture fx(clock.Now());
  JobHealth h(fx.job);
  h.OnAttemptStart(fx.job, fx.attempt, JobHealth::Launch::kRecovered, clock.Now());
  const char* hashes[] = {"aa", "aa", "bb", "bb"};
  std::vector<Report> rs;
  for (int r = 0; r < 4; ++r) rs.push_back(Hash(r, clock.Now(), 100, hashes[r]));
  h.Ingest(Batch(rs), clock.Now());
  auto ev = h.Evaluate(clock.Now());
  ASSERT_EQ(ev.findings.size(), 1u);
  const Finding& f = ev.findings[0];
  EXPECT_EQ(f.kind, FindingKind::kSdcSuspected);
  EXPECT_EQ(f.sdc_verdict, SdcVerdict::kNeedsReplay);  // 2-2: no majority at DP = 4
  EXPECT_EQ(f.ranks, (std::vector<int>{0, 1, 2, 3}));

  // The replay (attempt 2, same nodes) agrees at its check: transient, and the replay nodes are forgotten.
  h.OnReplayStarted({"n0", "n1"});
  Attempt a2 = fx.attempt;
  a2.number = 2;
  h.OnAttemptStart(fx.job, a2, JobHealth::Launch::kRecovered, clock.Now());
  rs.clear();
  for (int r = 0; r < 4; ++r) {
    Report x = Hash(r, clock.Now(), 100, "aa");
    x.attempt = 2;
    rs.push_back(x);
  }
  h.Ingest(Batch(rs), clock.Now());
  ev = h.Evaluate(clock.Now());
  ASSERT_EQ(ev.findings.size(), 1u);
  EXPECT_EQ(ev.findings[0].kind, FindingKind::kSdcTransient);
  EXPECT_EQ(ev.findings[0].nodes, (std::vector<std::string>{"n0", "n1"}));
  EXPECT_TRUE(h.pending_replay_nodes().empty());
}

// The replay resumes from before the mismatch (step 100): its checks before 100 agree as they did the first
// time and prove nothing. Only a check at or after 100 that agrees makes it transient; a probe's persistent
// fault was declared transient at step 90 on every replay and looped.
TEST(JobHealthTest, OnlyAReplaysCheckAtOrAfterTheMismatchMakesItTransient) {
  FakeClock clock;
  Fixture fx(clock.Now());
  JobHealth h(fx.job);
  h.OnReplayStarted({"n0", "n1"}, 100);
  Attempt a2 = fx.attempt;
  a2.number = 2;
  h.OnAttemptStart(fx.job, a2, JobHealth::Launch::kRecovered, clock.Now());
  auto agree_at = [&](int64_t step) {
    std::vector<Report> rs;
    for (int r = 0; r < 4; ++r) {
      Report x = Hash(r, clock.Now(), step, "aa");
      x.attempt = 2;
      rs.push_back(x);
    }
    h.Ingest(Batch(rs), clock.Now());
    return h.Evaluate(clock.Now()).findings;
  };
  EXPECT_TRUE(agree_at(90).empty());
  EXPECT_EQ(h.pending_replay_nodes(), (std::set<std::string>{"n0", "n1"}));
  auto fs = agree_at(100);
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].kind, FindingKind::kSdcTransient);
  EXPECT_TRUE(h.pending_replay_nodes().empty());
}

}  // namespace
}  // namespace shepherd
