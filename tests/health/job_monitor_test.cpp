// JobMonitor: heartbeats, grace, attempts, stragglers, JSON shape, memory per rank.
#include "health/job_monitor.h"

#include <gtest/gtest.h>

#include "tests/health/health_test_util.h"

namespace shepherd {
namespace {

using namespace shepherd::testing;

TEST(JobMonitorTest, HeartbeatLostOncePerIncidentAndReopensAfterRecovery) {
  FakeClock clock;
  auto m = MakeMonitor(MakeContext(1, 1, 2, clock.Now(), 1));
  for (int r = 0; r < 2; ++r) m->Ingest(Heartbeat(r, clock.Now()), clock.Now());
  clock.AdvanceSeconds(10);
  m->Ingest(Heartbeat(0, clock.Now()), clock.Now());
  EXPECT_TRUE(m->Evaluate(clock.Now()).empty());  // rank 1 silent exactly 10 s: not yet stale
  clock.AdvanceSeconds(1);
  m->Ingest(Heartbeat(0, clock.Now()), clock.Now());
  auto fs = m->Evaluate(clock.Now());
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].kind, FindingKind::kHeartbeatLost);
  EXPECT_EQ(fs[0].ranks, std::vector<int>({1}));
  EXPECT_EQ(fs[0].nodes, std::vector<std::string>({"n1"}));
  EXPECT_EQ(fs[0].detected_at, clock.Now());
  EXPECT_NE(fs[0].detail.find("no report for 11 s from rank 1"), std::string::npos) << fs[0].detail;
  clock.AdvanceSeconds(5);
  m->Ingest(Heartbeat(0, clock.Now()), clock.Now());
  EXPECT_TRUE(m->Evaluate(clock.Now()).empty());
  EXPECT_EQ(m->HealthJson(clock.Now())["checks"]["heartbeat"]["lost_ranks"], Json::array({1}));
  m->Ingest(Heartbeat(1, clock.Now()), clock.Now());  // back: incident cleared
  EXPECT_TRUE(m->Evaluate(clock.Now()).empty());
  clock.AdvanceSeconds(11);
  m->Ingest(Heartbeat(0, clock.Now()), clock.Now());
  EXPECT_EQ(m->Evaluate(clock.Now()).size(), 1u);  // reopened
}

// A job paused node by node (SIGSTOP to each node's ranks in turn, a second or two apart): its first rank
// was found lost alone, and recovery moved it as a fault, when the rest went silent a second later. A rank's
// silence is judged once a peer is seen a timeout after it began, or once every rank is silent: then one
// finding names them all (recovery: the whole job paused, nothing stopped, when every agent lists them).
TEST(JobMonitorTest, RanksGoingSilentOneAfterAnotherAreOneWholeJobSilence) {
  FakeClock clock;
  const Time t0 = clock.Now();
  auto m = MakeMonitor(MakeContext(1, 1, 3, clock.Now(), 1));
  std::vector<Finding> lost;
  for (int t = 0; t <= 30; ++t) {
    for (int r = 0; r < 3; ++r)
      if (t <= 5 + 2 * r) m->Ingest(Heartbeat(r, clock.Now()), clock.Now());  // rank r stops at 5 + 2r s
    for (Finding& f : m->Evaluate(clock.Now())) lost.push_back(std::move(f));
    clock.AdvanceSeconds(1);
  }
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].ranks, std::vector<int>({0, 1, 2}));
  EXPECT_EQ(lost[0].detected_at, t0 + Seconds(20));  // rank 2, the last, silent 11 s
}

// One rank silent while its peers go on (they heartbeat from inside the collective it never joined): found
// as soon as it is stale, as before.
TEST(JobMonitorTest, ARankSilentWhileItsPeersGoOnIsFoundAtItsTimeout) {
  FakeClock clock;
  const Time t0 = clock.Now();
  auto m = MakeMonitor(MakeContext(1, 1, 3, clock.Now(), 1));
  std::vector<Finding> lost;
  for (int t = 0; t <= 30 && lost.empty(); ++t) {
    for (int r = 0; r < 3; ++r)
      if (r != 1 || t <= 5) m->Ingest(Heartbeat(r, clock.Now()), clock.Now());
    lost = m->Evaluate(clock.Now());
    if (lost.empty()) clock.AdvanceSeconds(1);
  }
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].ranks, std::vector<int>({1}));
  EXPECT_EQ(lost[0].detected_at, t0 + Seconds(16));
}

// A silence is held back at most one more timeout: here the peer is silent too, but within its checkpoint
// allowance (10 x), so not every rank is silent and no peer is seen after; rank 0 is judged at its cap.
TEST(JobMonitorTest, ASilenceIsHeldBackAtMostATimeout) {
  FakeClock clock;
  const Time t0 = clock.Now();
  auto m = MakeMonitor(MakeContext(1, 1, 2, clock.Now(), 1));
  std::vector<Finding> lost;
  for (int t = 0; t <= 40; ++t) {
    if (t <= 5) m->Ingest(Heartbeat(0, clock.Now()), clock.Now());
    if (t <= 6) {
      Report saving = Heartbeat(1, clock.Now());
      saving.phase = Phase::kCheckpointSave;
      m->Ingest(saving, clock.Now());
    }
    for (Finding& f : m->Evaluate(clock.Now())) lost.push_back(std::move(f));
    clock.AdvanceSeconds(1);
  }
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].ranks, std::vector<int>({0}));
  EXPECT_EQ(lost[0].detected_at, t0 + Seconds(26));  // silent 21 s: past its timeout and one more
}

TEST(JobMonitorTest, StartupGraceUntilTheFirstReport) {
  FakeClock clock;
  auto m = MakeMonitor(MakeContext(1, 1, 2, clock.Now(), 1));
  clock.AdvanceSeconds(120);
  m->Ingest(Heartbeat(0, clock.Now()), clock.Now());
  EXPECT_TRUE(m->Evaluate(clock.Now()).empty());
  EXPECT_EQ(m->HealthJson(clock.Now())["checks"]["heartbeat"]["ranks_reporting"], 1);
  clock.AdvanceSeconds(1);
  m->Ingest(Heartbeat(0, clock.Now()), clock.Now());
  auto fs = m->Evaluate(clock.Now());
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].ranks, std::vector<int>({1}));
  EXPECT_NE(fs[0].detail.find("never reported"), std::string::npos);
}

TEST(JobMonitorTest, ReportsOfAnotherAttemptAreIgnoredAndCounted) {
  FakeClock clock;
  auto m = MakeMonitor(MakeContext(1, 1, 2, clock.Now()));
  Report old = Step(0, clock.Now(), 5, std::numeric_limits<double>::quiet_NaN());
  old.attempt = 0;
  auto r = m->Ingest(old, clock.Now());
  EXPECT_TRUE(r.status.ok());
  EXPECT_TRUE(r.ignored);
  EXPECT_FALSE(r.urgent);
  EXPECT_EQ(m->ignored_reports(), 1u);
  EXPECT_TRUE(m->Evaluate(clock.Now()).empty());
  Json h = m->HealthJson(clock.Now());
  EXPECT_EQ(h["ignored_reports"], 1);
  EXPECT_EQ(h["checks"]["heartbeat"]["ranks_reporting"], 0);
}

TEST(JobMonitorTest, RankOutsideTheWorldIsAnError) {
  FakeClock clock;
  auto m = MakeMonitor(MakeContext(1, 1, 2, clock.Now()));
  auto r = m->Ingest(Heartbeat(2, clock.Now()), clock.Now());
  EXPECT_FALSE(r.status.ok());
  EXPECT_EQ(r.status.fields().at(0).field, "rank");
}

// How far a step may lead: a million beyond the highest step reported, or beyond the resume step before
// any; no bound for an attempt another launcher started until its first step.
TEST(JobMonitorTest, StepsMayLeadTheJobByAtMostTheBound) {
  FakeClock clock;
  MonitorContext c = MakeContext(1, 1, 2, clock.Now());
  c.steps_known = true;
  c.resume_step = 500;
  auto ours = MakeMonitor(c);
  EXPECT_EQ(ours->MaxAcceptedStep(), 500 + JobMonitor::kMaxStepLead);
  ASSERT_TRUE(ours->Ingest(Step(0, clock.Now(), 800), clock.Now()).status.ok());
  EXPECT_EQ(ours->MaxAcceptedStep(), 800 + JobMonitor::kMaxStepLead);
  c.steps_known = false;
  c.resume_step = 0;
  auto watched = MakeMonitor(c);
  EXPECT_FALSE(watched->MaxAcceptedStep());
  ASSERT_TRUE(watched->Ingest(Step(1, clock.Now(), 2'000'000), clock.Now()).status.ok());
  EXPECT_EQ(watched->MaxAcceptedStep(), 2'000'000 + JobMonitor::kMaxStepLead);
}

TEST(JobMonitorTest, PlacementMustMatchThePlan) {
  FakeClock clock;
  MonitorContext c = MakeContext(2, 1, 2, clock.Now());
  c.placement.ranks[3].tp = 0;  // duplicates rank 2's coordinates
  auto m = JobMonitor::Create(c);
  EXPECT_FALSE(m.ok());
}

TEST(JobMonitorTest, PersistentStragglerIsFlaggedWithItsNodeOneSlowStepIsNot) {
  FakeClock clock;
  auto m = MakeMonitor(MakeContext(1, 1, 3, clock.Now(), 1));  // window 5, factor 1.5
  std::vector<Finding> all;
  for (int s = 1; s <= 5; ++s) {
    clock.AdvanceSeconds(1);
    m->Ingest(Step(0, clock.Now(), s, {}, {}, s == 3 ? 4.0 : 1.0), clock.Now());  // one slow step
    m->Ingest(Step(1, clock.Now(), s, {}, {}, 1.0), clock.Now());
    m->Ingest(Step(2, clock.Now(), s, {}, {}, s >= 3 ? 1.6 : 1.4), clock.Now());  // slow in 3 of 5
    for (auto& f : m->Evaluate(clock.Now())) all.push_back(f);
  }
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].kind, FindingKind::kStraggler);
  EXPECT_EQ(all[0].ranks, std::vector<int>({2}));
  EXPECT_EQ(all[0].nodes, std::vector<std::string>({"n2"}));
  EXPECT_NE(all[0].detail.find("job median 1 s"), std::string::npos) << all[0].detail;
  Json s = m->HealthJson(clock.Now())["checks"]["straggler"];
  EXPECT_EQ(s["ranks"], Json::array({2}));
  EXPECT_DOUBLE_EQ(s["job_median_step_time_s"].get<double>(), 1.0);
  // Still slow: same incident.
  clock.AdvanceSeconds(1);
  for (int r = 0; r < 3; ++r) m->Ingest(Step(r, clock.Now(), 6, {}, {}, r == 2 ? 1.6 : 1.0), clock.Now());
  EXPECT_TRUE(m->Evaluate(clock.Now()).empty());
}

TEST(JobMonitorTest, HealthJsonShape) {
  FakeClock clock;
  auto m = MakeMonitor(MakeContext(2, 2, 2, clock.Now()));
  for (int r = 0; r < 8; ++r) m->Ingest(Heartbeat(r, clock.Now(), 1), clock.Now());
  m->Evaluate(clock.Now());
  Json h = m->HealthJson(clock.Now());
  EXPECT_EQ(h["status"], "healthy");
  EXPECT_EQ(h["attempt"], 1);
  for (const char* check : {"heartbeat", "hang", "straggler", "sdc", "loss"}) {
    ASSERT_TRUE(h["checks"].contains(check)) << check;
    EXPECT_TRUE(h["checks"][check].contains("status")) << check;
  }
  EXPECT_TRUE(h["suspects"]["ranks"].is_array());
  EXPECT_TRUE(h["suspects"]["nodes"].is_array());
  EXPECT_EQ(h["checks"]["sdc"]["replica_sets"], 4);  // (pp, tp) pairs, 2 dp replicas each
}

TEST(JobMonitorTest, HealthyStepsBecomeEvidence) {
  FakeClock clock;
  auto m = MakeMonitor(MakeContext(1, 1, 2, clock.Now()));
  m->Ingest(Step(0, clock.Now(), 12), clock.Now());
  m->Ingest(Step(1, clock.Now(), 11), clock.Now());
  m->Evaluate(clock.Now());
  auto ev = m->TakeEvidence();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, HealthEvidence::Kind::kHealthyThrough);
  EXPECT_EQ(ev[0].step, 11);
  EXPECT_EQ(ev[0].attempt, 1);
}

TEST(JobMonitorTest, MemoryPerRankStaysUnderOneKiB) {
  // Per rank: its RankState, and in the layout its coordinates (12 bytes), node index (4), coordinate
  // index (4) and replica-set order (4).
  const size_t per_rank = sizeof(RankState) + 12 + 4 + 4 + 4;
  EXPECT_LE(per_rank, 1024u);
  std::printf("JobMonitor bytes per rank: %zu (RankState %zu)\n", per_rank, sizeof(RankState));
  // A 131,072-rank job builds and evaluates.
  FakeClock clock;
  MonitorContext c = MakeContext(8, 16, 1024, clock.Now());
  c.policy.startup_grace_s = 1e9;
  auto m = MakeMonitor(c);
  ASSERT_EQ(m->layout().world_size(), 131072);
  EXPECT_TRUE(m->Evaluate(clock.Now()).empty());
}

TEST(JobMonitorTest, ReportedNodeRankStepAndJobStep) {
  FakeClock clock;
  auto m = MakeMonitor(MakeContext(1, 1, 3, clock.Now()));
  EXPECT_EQ(m->JobStep(), -1);
  EXPECT_FALSE(m->RankStep(0));
  EXPECT_FALSE(m->ReportedNode(0));
  Report a = Step(0, clock.Now(), 7);
  a.node = "host-a";
  m->Ingest(a, clock.Now());
  Report b = Heartbeat(1, clock.Now(), 5);
  b.node = "host-a";  // interned once, shared
  m->Ingest(b, clock.Now());
  m->Ingest(Step(0, clock.Now(), 6), clock.Now());  // no node: keeps host-a; a lower step: keeps 7
  EXPECT_EQ(m->ReportedNode(0), "host-a");
  EXPECT_EQ(m->ReportedNode(1), "host-a");
  EXPECT_FALSE(m->ReportedNode(2));
  EXPECT_FALSE(m->ReportedNode(3));  // outside the world
  EXPECT_FALSE(m->ReportedNode(-1));
  Report moved = Heartbeat(1, clock.Now());
  moved.node = "host-b";
  m->Ingest(moved, clock.Now());
  EXPECT_EQ(m->ReportedNode(1), "host-b");
  EXPECT_EQ(m->RankStep(0), 7);
  EXPECT_EQ(m->RankStep(1), 5);
  EXPECT_FALSE(m->RankStep(2));
  EXPECT_EQ(m->JobStep(), 7);
}

}  // namespace
}  // namespace shepherd
