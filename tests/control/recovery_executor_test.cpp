#include "control/recovery_executor.h"

#include <gtest/gtest.h>

#include "tests/control/control_test_util.h"
#include "tests/fakes/fake_clock.h"

namespace shepherd {
namespace {

using testing::MakeNode;
using testing::MakeSpec;

// Nodes n0, n1 (2 GPUs each) and spare sp0 under one leaf; job: DP = 4, TP = 1 → ranks 0, 1 on n0, 2, 3 on
// n1.
class RecoveryExecutorTest : public ::testing::Test {
 protected:
  RecoveryExecutorTest() {
    bool created = false;
    for (const char* id : {"n0", "n1"})
      (void)inv_.Upsert(MakeNode(id, "l0", false, 2), true, Now(), &b_, &created);
    (void)inv_.Upsert(MakeNode("sp0", "l0", true, 2), true, Now(), &b_, &created);
    JobSpec spec = MakeSpec(4, 1);
    spec.policy.restart_backoff_s = 5;
    auto est = jobs_.PlanFor(spec);
    job_ = *jobs_.Submit(spec, *est, Now(), &b_);
    jobs_.Schedule([](const std::string&) { return std::nullopt; }, Now(), &b_);
    health_ = std::make_unique<JobHealth>(jobs_.Find(job_)->job);
    health_->OnAttemptStart(jobs_.Find(job_)->job, *jobs_.Find(job_)->attempt, JobHealth::Launch::kRecovered,
                            Now());
  }
  Time Now() const { return clock_.Now(); }
  Finding Make(FindingKind kind, std::vector<int> ranks, std::vector<std::string> nodes) {
    Finding f;
    f.id = "f-1";
    f.job = job_;
    f.attempt = jobs_.Find(job_)->job.attempt;
    f.kind = kind;
    f.ranks = std::move(ranks);
    f.nodes = std::move(nodes);
    f.detected_at = Now();
    return f;
  }
  const Node& NodeOf(const std::string& id) { return *inv_.Find(id); }
  // Every rank of the running attempt reports the same parameter hash at `step`.
  ReportBatch Hashes(int64_t step, const std::string& hash) {
    ReportBatch b;
    for (int r = 0; r < 4; ++r) {
      Report h;
      h.rank = r;
      h.attempt = jobs_.Find(job_)->job.attempt;
      h.time = Now();
      h.kind = ReportKind::kParamHash;
      h.step = step;
      h.hash = hash;
      b.reports.emplace_back(r, h);
    }
    return b;
  }
  // A 2-2 split at step 10 (replicated hashes agreed at step 5), replayed on the same nodes, recurs on the
  // replay: the next attempt runs without n0 (its ranks on the spare), nothing cordoned.
  void RecurOnAReplay() {
    health_->Ingest(Hashes(5, "aa"), Now());
    ReportBatch steps = Hashes(12, "");  // the first attempt got somewhere (no loop breaker's "no progress")
    for (auto& [i, r] : steps.reports) r.kind = ReportKind::kHeartbeat;
    health_->Ingest(steps, Now());
    health_->Evaluate(Now());
    for (int attempt = 1; attempt <= 2; ++attempt) {
      Finding f = Make(FindingKind::kSdcSuspected, {0, 1, 2, 3}, {"n0", "n1"});
      f.sdc_verdict = SdcVerdict::kNeedsReplay;
      f.step = 10;
      f.id = "f-" + std::to_string(attempt);
      health_->Apply(rec_.OnFinding(f, *health_, {}, Now(), &b_), Now());
      clock_.AdvanceSeconds(60);  // the second restart backs off
      rec_.StartDue(Now(), &b_, nullptr);
      health_->OnAttemptEnd(attempt);
      health_->OnAttemptStart(jobs_.Find(job_)->job, *jobs_.Find(job_)->attempt,
                              JobHealth::Launch::kRecovered, Now());
    }
    ASSERT_EQ(jobs_.Find(job_)->job.attempt, 3);
    ASSERT_EQ(PlacedNodes(), (std::set<std::string>{"sp0", "n1"}));
    ASSERT_TRUE(NodeOf("n0").schedulable);
    ASSERT_TRUE(NodeOf("n1").schedulable);
    ASSERT_EQ(health_->pending_replay_nodes(), (std::set<std::string>{"n1"}));
    // The health answer says what the replay is doing.
    Json replay = health_->MonitorJson(Now())["checks"]["sdc"]["replay"];
    EXPECT_EQ(replay["nodes"], Json::array({"n1"})) << replay.dump();
    EXPECT_EQ(replay["set_aside"], "n0") << replay.dump();
    EXPECT_EQ(replay["step"], 10) << replay.dump();
  }
  // The replay without n0 (attempt 3 on sp0 and n1) mismatches again: n1's ranks move to n0 (attempt 4).
  void RecurWithoutN0() {
    Finding f = Make(FindingKind::kSdcSuspected, {0, 1, 2, 3}, {"sp0", "n1"});
    f.sdc_verdict = SdcVerdict::kNeedsReplay;
    f.step = 10;
    f.id = "f-3";
    health_->Apply(rec_.OnFinding(f, *health_, {}, Now(), &b_), Now());
    clock_.AdvanceSeconds(60);
    rec_.StartDue(Now(), &b_, nullptr);
    ASSERT_EQ(jobs_.Find(job_)->job.attempt, 4);
    for (const char* n : {"n0", "n1", "sp0"}) ASSERT_TRUE(NodeOf(n).schedulable) << n;
    ASSERT_EQ(PlacedNodes(), (std::set<std::string>{"sp0", "n0"}));
    ASSERT_TRUE(health_->set_aside_replay());
    health_->OnAttemptEnd(3);
    health_->OnAttemptStart(jobs_.Find(job_)->job, *jobs_.Find(job_)->attempt, JobHealth::Launch::kRecovered,
                            Now());
  }
  std::set<std::string> PlacedNodes() {
    std::set<std::string> out;
    for (const RankSlot& r : jobs_.Find(job_)->attempt->placement.ranks) out.insert(r.node);
    return out;
  }

  FakeClock clock_;
  Inventory inv_{DefaultTopologyLevels(), {}};
  JobBook jobs_{&inv_, 80};
  RecoveryExecutor rec_{&inv_, &jobs_};
  std::unique_ptr<JobHealth> health_;
  std::string job_;
  WriteBatch b_;
};

// Recovery reads the job's health and writes none of it: the replay it decides comes back for the health
// owner to apply.
TEST_F(RecoveryExecutorTest, AReplayIsReturnedForTheHealthOwnerAndNotWrittenByRecovery) {
  health_->Ingest(Hashes(5, "aa"), Now());
  health_->Evaluate(Now());
  ASSERT_TRUE(health_->HashesEverAgreed());
  Finding f = Make(FindingKind::kSdcSuspected, {0, 1, 2, 3}, {"n0", "n1"});
  f.sdc_verdict = SdcVerdict::kNeedsReplay;
  f.step = 10;
  const HealthUpdate update = rec_.OnFinding(f, *health_, {}, Now(), &b_);
  EXPECT_EQ(jobs_.Find(job_)->job.attempt, 2);  // the replay attempt started
  EXPECT_TRUE(health_->pending_replay_nodes().empty());  // not written by recovery
  ASSERT_TRUE(update.replay.has_value());
  EXPECT_EQ(std::set<std::string>(update.replay->nodes.begin(), update.replay->nodes.end()),
            (std::set<std::string>{"n0", "n1"}));
  EXPECT_EQ(update.replay->step, std::optional<int64_t>(10));
  EXPECT_FALSE(update.demote.has_value());
  EXPECT_TRUE(health_->Apply(update, Now()).empty());
  EXPECT_EQ(health_->pending_replay_nodes(), (std::set<std::string>{"n0", "n1"}));
}

TEST_F(RecoveryExecutorTest, TwoTwoSplitAtDpFourIsReplayedOnTheSameNodesWithoutCordon) {
  // An earlier check agreed (replicas that never agreed are recorded only: NoMajority... in recovery_test).
  health_->Ingest(Hashes(5, "aa"), Now());
  health_->Evaluate(Now());
  ASSERT_TRUE(health_->HashesEverAgreed());
  // The verdict travels on the finding (the detector's), whatever DP is.
  Finding f = Make(FindingKind::kSdcSuspected, {0, 1, 2, 3}, {"n0", "n1"});
  f.sdc_verdict = SdcVerdict::kNeedsReplay;
  health_->Apply(rec_.OnFinding(f, *health_, {}, Now(), &b_), Now());
  EXPECT_TRUE(NodeOf("n0").schedulable);
  EXPECT_TRUE(NodeOf("n1").schedulable);
  for (const std::string& a : f.actions) EXPECT_EQ(a.find("cordon"), std::string::npos) << a;
  EXPECT_EQ(jobs_.Find(job_)->job.attempt, 2);
  EXPECT_EQ(PlacedNodes(), (std::set<std::string>{"n0", "n1"}));
  EXPECT_EQ(health_->pending_replay_nodes(), (std::set<std::string>{"n0", "n1"}));
  // The replay's check names rank 3 by majority: n1 is cordoned, and the replay is over (it stayed "under
  // way", and a later agreeing check called the cordoned node's mismatch transient).
  health_->OnAttemptStart(jobs_.Find(job_)->job, *jobs_.Find(job_)->attempt, JobHealth::Launch::kRecovered,
                          Now());
  Finding m = Make(FindingKind::kSdcSuspected, {3}, {"n1"});
  m.id = "f-2";
  m.sdc_verdict = SdcVerdict::kMajority;
  health_->Apply(rec_.OnFinding(m, *health_, {}, Now(), &b_), Now());
  EXPECT_FALSE(NodeOf("n1").schedulable);
  EXPECT_TRUE(health_->pending_replay_nodes().empty());
  EXPECT_FALSE(health_->MonitorJson(Now())["checks"]["sdc"].contains("replay"));
}

// Without n0 the replay's hashes agree past the mismatch: n0 is confirmed and cordoned; the job runs on.
TEST_F(RecoveryExecutorTest, AReplayWithoutOneSuspectThatAgreesConfirmsIt) {
  RecurOnAReplay();
  health_->Ingest(Hashes(10, "cc"), Now());
  JobHealth::Evaluation ev = health_->Evaluate(Now());
  ASSERT_EQ(ev.findings.size(), 1u);
  Finding& f = ev.findings[0];
  EXPECT_EQ(f.kind, FindingKind::kSdcConfirmed);
  EXPECT_EQ(f.nodes, (std::vector<std::string>{"n0"}));
  f.id = "f-2";
  health_->Apply(rec_.OnFinding(f, *health_, {}, Now(), &b_), Now());
  EXPECT_FALSE(NodeOf("n0").schedulable);
  EXPECT_TRUE(NodeOf("n1").schedulable);
  EXPECT_EQ(jobs_.Find(job_)->job.attempt, 3);  // not restarted
  EXPECT_EQ(f.actions, (std::vector<std::string>{"cordon n0"}));
  EXPECT_TRUE(health_->pending_replay_nodes().empty());
}

// Without n0 the mismatch recurs (spare and n1): n0 is cleared, and n1 is moved off in turn (no cordon
// yet: a recurrence names no node). Without n1 the hashes agree: n1 is confirmed and cordoned.
TEST_F(RecoveryExecutorTest, AReplayWithoutEachSuspectInTurnNamesTheOneWithoutWhichItStops) {
  RecurOnAReplay();
  RecurWithoutN0();
  health_->Ingest(Hashes(10, "cc"), Now());
  JobHealth::Evaluation ev = health_->Evaluate(Now());
  ASSERT_EQ(ev.findings.size(), 1u);
  EXPECT_EQ(ev.findings[0].kind, FindingKind::kSdcConfirmed);
  EXPECT_EQ(ev.findings[0].nodes, (std::vector<std::string>{"n1"}));
  ev.findings[0].id = "f-4";
  health_->Apply(rec_.OnFinding(ev.findings[0], *health_, {}, Now(), &b_), Now());
  EXPECT_FALSE(NodeOf("n1").schedulable);
  EXPECT_TRUE(NodeOf("n0").schedulable);
  EXPECT_EQ(jobs_.Find(job_)->job.attempt, 4);
}

// Replicas that diverge by design (custom averaging between syncs) recur with every suspect moved off:
// recorded, nothing cordoned (by elimination, before, the second node was), and the question is closed: a
// later agreeing check says nothing about it.
TEST_F(RecoveryExecutorTest, AMismatchRecurringWithEverySuspectMovedOffCordonsNothing) {
  RecurOnAReplay();
  RecurWithoutN0();
  Finding f = Make(FindingKind::kSdcSuspected, {0, 1, 2, 3}, {"sp0", "n0"});
  f.sdc_verdict = SdcVerdict::kNeedsReplay;
  f.step = 10;
  f.id = "f-4";
  health_->Apply(rec_.OnFinding(f, *health_, {}, Now(), &b_), Now());
  for (const char* n : {"n0", "n1", "sp0"}) EXPECT_TRUE(NodeOf(n).schedulable) << n;
  EXPECT_EQ(jobs_.Find(job_)->job.attempt, 4);  // runs on
  EXPECT_EQ(f.actions, (std::vector<std::string>{
                           "record only: the mismatch recurred with every suspect node moved off (the code, "
                           "not a node)"}));
  EXPECT_TRUE(health_->pending_replay_nodes().empty());
  EXPECT_FALSE(health_->set_aside_replay());
  health_->Ingest(Hashes(20, "cc"), Now());
  EXPECT_TRUE(health_->Evaluate(Now()).findings.empty());
}

TEST_F(RecoveryExecutorTest, MajorityVerdictCordonsTheCulpritsNodeAndUsesTheSpare) {
  Finding f = Make(FindingKind::kSdcSuspected, {3}, {"n1"});
  f.sdc_verdict = SdcVerdict::kMajority;
  health_->Apply(rec_.OnFinding(f, *health_, {}, Now(), &b_), Now());
  EXPECT_FALSE(NodeOf("n1").schedulable);
  EXPECT_EQ(PlacedNodes(), (std::set<std::string>{"n0", "sp0"}));
  EXPECT_EQ(jobs_.Find(job_)->job.restarts, 1);
}

TEST_F(RecoveryExecutorTest, NodeLostCordonsTheNodeAndASecondRestartWaitsForTheBackoff) {
  Finding lost = Make(FindingKind::kNodeLost, {2, 3}, {"n1"});
  health_->Apply(rec_.OnFinding(lost, *health_, {}, Now(), &b_), Now());
  EXPECT_FALSE(NodeOf("n1").schedulable);
  EXPECT_FALSE(NodeOf("n1").failed);  // suspect, not failed: it may have lost only its agent
  EXPECT_EQ(jobs_.Find(job_)->job.state, JobState::kLaunching);
  EXPECT_EQ(jobs_.Find(job_)->job.attempt, 2);
  // A rank of the new attempt exits right away: the second automatic restart backs off (5 s · 2).
  Finding exit = Make(FindingKind::kProcessExit, {0}, {"n0"});
  health_->Apply(rec_.OnFinding(exit, *health_, {}, Now(), &b_), Now());
  EXPECT_EQ(jobs_.Find(job_)->job.state, JobState::kRecovering);
  clock_.AdvanceSeconds(9);
  rec_.StartDue(Now(), &b_, nullptr);
  EXPECT_EQ(jobs_.Find(job_)->job.state, JobState::kRecovering);
  clock_.AdvanceSeconds(1);
  rec_.StartDue(Now(), &b_, nullptr);
  EXPECT_EQ(jobs_.Find(job_)->job.state, JobState::kLaunching);
  EXPECT_EQ(jobs_.Find(job_)->job.attempt, 3);
}

// A restart waiting for its backoff keeps its GPUs (a queued job took them, and the restart queued behind
// it), and a node cordoned meanwhile is replaced when it starts (it started on the cordoned node).
TEST_F(RecoveryExecutorTest, ARestartInBackoffHoldsItsGpusAndLeavesANodeCordonedMeanwhile) {
  Finding first = Make(FindingKind::kProcessExit, {0}, {"n0"});
  first.id = "f-1";
  health_->Apply(rec_.OnFinding(first, *health_, {}, Now(), &b_), Now());
  ASSERT_EQ(jobs_.Find(job_)->job.attempt, 2);
  Finding second = Make(FindingKind::kProcessExit, {0}, {"n0"});
  second.id = "f-2";
  health_->Apply(rec_.OnFinding(second, *health_, {}, Now(), &b_), Now());
  ASSERT_EQ(jobs_.Find(job_)->job.state, JobState::kRecovering);
  EXPECT_EQ(inv_.cluster().JobsOn("n1"), (std::vector<std::string>{job_}));  // held
  EXPECT_EQ(inv_.cluster().FreeGpuMask("n1"), 0u);
  ASSERT_TRUE(inv_.Patch("n1", {.schedulable = false, .reason = "bad fan"}, Now(), &b_).ok());
  clock_.AdvanceSeconds(60);
  rec_.StartDue(Now(), &b_, nullptr);
  const JobEntry* e = jobs_.Find(job_);
  ASSERT_EQ(e->job.state, JobState::kLaunching) << e->job.reason;
  EXPECT_EQ(e->job.attempt, 3);
  EXPECT_EQ(PlacedNodes(), (std::set<std::string>{"n0", "sp0"}));
  EXPECT_NE(e->attempt->reason.find("replace n1 with sp0"), std::string::npos) << e->attempt->reason;
  EXPECT_EQ(NodeOf("n1").reason, "bad fan");
  // Cancelled while it waits, a restart lets its GPUs go.
  for (const char* id : {"f-3", "f-4"}) {  // the second one within the backoff
    Finding f = Make(FindingKind::kProcessExit, {0}, {"n0"});
    f.id = id;
    health_->Apply(rec_.OnFinding(f, *health_, {}, Now(), &b_), Now());
  }
  ASSERT_EQ(jobs_.Find(job_)->job.state, JobState::kRecovering);
  ASSERT_TRUE(inv_.cluster().Holds(job_));
  ASSERT_TRUE(jobs_.Cancel(job_, Now(), &b_).ok());
  EXPECT_FALSE(inv_.cluster().Holds(job_));
}

// A job queued by its recovery (no spare then) takes the spare once it frees: the queue never would.
TEST_F(RecoveryExecutorTest, AJobQueuedByItsRecoveryTakesTheSpareOnceItFrees) {
  Placement other;
  for (int g = 0; g < 2; ++g) other.ranks.push_back({.rank = g, .node = "sp0", .gpu = g});
  ASSERT_TRUE(inv_.Allocate("other", other).ok());
  Finding lost = Make(FindingKind::kNodeLost, {2, 3}, {"n1"});
  health_->Apply(rec_.OnFinding(lost, *health_, {}, Now(), &b_), Now());
  ASSERT_EQ(jobs_.Find(job_)->job.state, JobState::kQueued);
  auto resume = [](const std::string&) { return std::optional<Checkpoint>(); };
  rec_.StartQueuedOnSpares(Now(), &b_, resume, nullptr);
  EXPECT_EQ(jobs_.Find(job_)->job.state, JobState::kQueued);  // the spare is busy
  inv_.Release("other");
  rec_.StartQueuedOnSpares(Now(), &b_, resume, nullptr);
  ASSERT_EQ(jobs_.Find(job_)->job.state, JobState::kLaunching) << jobs_.Find(job_)->job.reason;
  EXPECT_EQ(PlacedNodes(), (std::set<std::string>{"n0", "sp0"}));
  // Queued again on that placement (a daemon restart cut a backoff short): the spare it ran on counts as
  // one (it stayed queued beside its own free spare).
  jobs_.EndAttempt(job_, Now(), &b_);
  jobs_.SetState(job_, JobState::kQueued, "restart pending when the daemon restarted", Now(), &b_);
  rec_.StartQueuedOnSpares(Now(), &b_, resume, nullptr);
  ASSERT_EQ(jobs_.Find(job_)->job.state, JobState::kLaunching) << jobs_.Find(job_)->job.reason;
  EXPECT_EQ(jobs_.Find(job_)->job.attempt, 3);
  EXPECT_EQ(PlacedNodes(), (std::set<std::string>{"n0", "sp0"}));
}

TEST_F(RecoveryExecutorTest, AnAnomalyReproducingAtTheSameStepFailsTheJobWithoutBlame) {
  Finding first = Make(FindingKind::kNonfiniteLoss, {0, 1, 2, 3}, {"n0", "n1"});
  first.step = first.onset_step = 20;
  health_->Apply(rec_.OnFinding(first, *health_, {}, Now(), &b_), Now());
  ASSERT_EQ(jobs_.Find(job_)->job.attempt, 2);  // restarted from scratch (no checkpoint yet)
  health_->OnAttemptStart(jobs_.Find(job_)->job, *jobs_.Find(job_)->attempt, JobHealth::Launch::kRecovered,
                          Now());
  clock_.AdvanceSeconds(60);
  Finding again = Make(FindingKind::kNonfiniteLoss, {0, 1, 2, 3}, {"n0", "n1"});
  again.step = again.onset_step = 21;  // within ±1: the data or the code
  std::vector<Finding> earlier = {first};
  health_->Apply(rec_.OnFinding(again, *health_, earlier, Now(), &b_), Now());
  EXPECT_EQ(jobs_.Find(job_)->job.state, JobState::kFailed);
  EXPECT_NE(jobs_.Find(job_)->job.reason.find("20"), std::string::npos) << jobs_.Find(job_)->job.reason;
  EXPECT_EQ(jobs_.Find(job_)->job.attempt, 2);
  EXPECT_TRUE(NodeOf("n0").schedulable);
  EXPECT_TRUE(NodeOf("n1").schedulable);
}

TEST_F(RecoveryExecutorTest, AReproducibleAnomalyMayOnlyBeRecorded) {
  JobEntry* e = jobs_.Mutable(job_);
  e->job.spec.policy.on_reproducible_anomaly = OnReproducible::kRecord;
  Finding first = Make(FindingKind::kNonfiniteLoss, {0}, {"n0"});
  first.step = first.onset_step = 20;
  health_->Apply(rec_.OnFinding(first, *health_, {}, Now(), &b_), Now());
  health_->OnAttemptStart(jobs_.Find(job_)->job, *jobs_.Find(job_)->attempt, JobHealth::Launch::kRecovered,
                          Now());
  Finding again = Make(FindingKind::kNonfiniteLoss, {0}, {"n0"});
  again.step = again.onset_step = 20;
  std::vector<Finding> earlier = {first};
  health_->Apply(rec_.OnFinding(again, *health_, earlier, Now(), &b_), Now());
  EXPECT_EQ(jobs_.Find(job_)->job.state, JobState::kLaunching);  // still its attempt 2: nothing stopped
  EXPECT_EQ(jobs_.Find(job_)->job.attempt, 2);
  ASSERT_FALSE(again.actions.empty());
  EXPECT_NE(again.actions[0].find("record only"), std::string::npos);
}

TEST_F(RecoveryExecutorTest, StragglerIsReportedAndChangesNothing) {
  Finding f = Make(FindingKind::kStraggler, {1}, {"n0"});
  health_->Apply(rec_.OnFinding(f, *health_, {}, Now(), &b_), Now());
  EXPECT_EQ(jobs_.Find(job_)->job.attempt, 1);
  EXPECT_EQ(jobs_.Find(job_)->job.restarts, 0);
  EXPECT_TRUE(NodeOf("n0").schedulable);
}

TEST_F(RecoveryExecutorTest, ForcedRestartWithoutACheckpointIsAConflict) {
  auto d = rec_.ForceRestart(job_, *health_, "last-known-good", {}, "test", {}, Now(), &b_);
  EXPECT_EQ(d.status().code(), Code::kConflict);
  EXPECT_EQ(jobs_.Find(job_)->job.attempt, 1);
}

}  // namespace
}  // namespace shepherd
