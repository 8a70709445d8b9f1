// The Controller records the goodput evidence: an attempt's marks from its ranks' reports (kept current in
// memory, persisted at most once a minute and at the attempt's end, restored after a daemon restart), a
// restart's backoff on the next attempt, and each finding's onset from the controller's own evidence.
// Expected times are the fake clock's readings the test took when it acted.
#include <gtest/gtest.h>

#include "control/records.h"
#include "tests/control/controller_fixture.h"

namespace shepherd {
namespace {

class ControllerMarksTest : public ControllerTest {
 protected:
  void Beat(const std::string& node, AgentHeartbeat hb = {}) {
    std::optional<Result<HeartbeatAck>> out;
    controller_->NodeHeartbeat(node, hb, [&](Result<HeartbeatAck> a) { out = std::move(a); });
    Drain();
    ASSERT_TRUE(out && out->ok());
  }
  // The node's agent reports ranks 0..7 of the attempt running (or rank `exited` exited with code 1).
  AgentHeartbeat Ranks(const std::string& job, int attempt, int exited = -1) {
    AgentHeartbeat hb;
    for (int r = 0; r < 8; ++r) {
      ProcessStatus p;
      p.rank = {job, attempt, r};
      p.running = r != exited;
      if (r == exited) p.exit_code = 1;
      hb.processes.push_back(p);
    }
    return hb;
  }
  std::string SubmitOurs(double backoff_s) {
    JobSpec s = testing::MakeSpec(8, 8);
    s.policy.restart_backoff_s = backoff_s;
    auto est = controller_->view().PlanFor(s);
    std::optional<Result<JobView>> out;
    controller_->SubmitJob(s, *est, [&](Result<JobView> r) { out = std::move(r); });
    Drain();
    EXPECT_TRUE(out && out->ok());
    return (*out)->job.id;
  }
  // One report per rank of attempt `attempt`, each at the rank time `rank_time` (received now).
  void Report8(const std::string& job, int attempt, ReportKind kind, Time rank_time,
               std::optional<int64_t> step = std::nullopt, Phase phase = Phase::kUnspecified) {
    ReportBatch b;
    for (int r = 0; r < 8; ++r) {
      Report x;
      x.rank = r;
      x.attempt = attempt;
      x.time = rank_time;
      x.kind = kind;
      x.step = step;
      x.phase = phase;
      if (kind == ReportKind::kCheckpoint)
        x.path = "/ckpt/step-" + std::to_string(*step) + "/rank-" + std::to_string(r);
      b.reports.emplace_back(r, x);
    }
    std::optional<Result<IngestSummary>> out;
    controller_->IngestReports(job, b, [&](Result<IngestSummary> s) { out = std::move(s); });
    Drain();
    ASSERT_TRUE(out && out->ok()) << (out ? out->status().message() : "no answer");
  }
  // The attempt as the store holds it (nullopt: not recorded).
  std::optional<Attempt> Stored(const std::string& job, int number) {
    auto snap = store_->Load();
    EXPECT_TRUE(snap.ok());
    for (const Record& r : snap->records)
      if (r.collection == Collection::kAttempts && r.key == job + "/" + std::to_string(number)) {
        auto a = AttemptFromJson(Json::parse(r.body));
        EXPECT_TRUE(a.ok());
        return *a;
      }
    return std::nullopt;
  }
  std::vector<Finding> Failures(const std::string& job, FindingKind kind) {
    FindingQuery q;
    q.job = job;
    q.kind = kind;
    auto fs = controller_->view().GetFailures(q);
    EXPECT_TRUE(fs.ok());
    return *fs;
  }
  void Second(const std::string& node) {
    clock_.AdvanceSeconds(1);
    Beat(node);
    controller_->Tick();
    Drain();
  }
};

TEST_F(ControllerMarksTest, MarksAreKeptCurrentPersistedAtMostOnceAMinuteAndSurviveARestart) {
  AddNode("n1", "l0");
  const Time started = clock_.Now();
  std::string job = SubmitOurs(0);
  Beat("n1", Ranks(job, 1));
  ASSERT_EQ(controller_->view().GetJob(job)->job.state, JobState::kRunning);
  // Every rank loads the checkpoint for 2 s, then trains; both phase changes of a 0.5 s save arrive in
  // one batch each (timed by the ranks' clocks).
  Second("n1");
  const Time load_from = clock_.Now();
  Report8(job, 1, ReportKind::kHeartbeat, load_from, std::nullopt, Phase::kCheckpointLoad);
  Second("n1");
  Second("n1");
  Report8(job, 1, ReportKind::kHeartbeat, load_from + Seconds(2), std::nullopt, Phase::kTrain);
  Second("n1");
  const Time first_step = clock_.Now();
  Report8(job, 1, ReportKind::kStep, first_step, 1);
  const JobView view = *controller_->view().GetJob(job);
  const Attempt& live = *view.attempt;
  EXPECT_EQ(live.first_step_at, first_step);  // current in memory at once
  EXPECT_DOUBLE_EQ(live.load_s, 2.0);
  Second("n1");
  Report8(job, 1, ReportKind::kHeartbeat, clock_.Now(), 1, Phase::kCheckpointSave);
  Report8(job, 1, ReportKind::kHeartbeat, clock_.Now() + Seconds(0.5), 1, Phase::kTrain);
  int64_t step = 1;
  while (clock_.Now() - started < Seconds(59)) {  // steps each second, up to a minute after the start
    Second("n1");
    Report8(job, 1, ReportKind::kStep, clock_.Now(), ++step);
  }
  EXPECT_FALSE(Stored(job, 1)->first_step_at) << "no write per report batch";
  Second("n1");  // the tick a minute after the attempt started writes its marks
  const Time written = clock_.Now();
  std::optional<Attempt> rec = Stored(job, 1);
  ASSERT_TRUE(rec && rec->first_step_at);
  EXPECT_EQ(*rec->first_step_at, first_step);
  EXPECT_EQ(rec->last_step, step);  // reported a second before the tick
  EXPECT_EQ(rec->last_step_at, written - Seconds(1));
  EXPECT_DOUBLE_EQ(rec->load_s, 2.0);
  EXPECT_DOUBLE_EQ(rec->save_s, 0.5);
  for (int i = 0; i < 30; ++i) {  // the next write is a minute later: not within these 30 s
    Report8(job, 1, ReportKind::kStep, clock_.Now(), ++step);
    Second("n1");
  }
  EXPECT_EQ(Stored(job, 1)->last_step, rec->last_step);

  // A daemon restart restores the marks with the attempt and continues from them.
  Reset();
  EXPECT_EQ(controller_->view().GetJob(job)->attempt->first_step_at, first_step);
  Beat("n1", Ranks(job, 1));
  Second("n1");
  const Time last_step = clock_.Now();
  Report8(job, 1, ReportKind::kStep, last_step, ++step);
  Second("n1");
  ASSERT_TRUE(Cancel(job).ok());
  rec = Stored(job, 1);
  ASSERT_TRUE(rec && rec->ended_at);
  EXPECT_EQ(rec->first_step_at, first_step);
  EXPECT_EQ(rec->last_step_at, last_step);  // the end writes the final marks
  EXPECT_EQ(rec->last_step, step);
  EXPECT_DOUBLE_EQ(rec->load_s, 2.0);
  EXPECT_DOUBLE_EQ(rec->save_s, 0.5);
}

TEST_F(ControllerMarksTest, ARestartWithABackoffRecordsItsNotBeforeAndExitsTheirOnset) {
  AddNode("n1", "l0");
  std::string job = SubmitOurs(/*backoff_s=*/10);
  Beat("n1", Ranks(job, 1));
  Second("n1");
  // Rank 0 exits: the first restart is immediate (no backoff before a first restart).
  const Time exit1 = clock_.Now() + Seconds(1);
  clock_.AdvanceSeconds(1);
  Beat("n1", Ranks(job, 1, /*exited=*/0));
  const Time restarted1 = clock_.Now();
  ASSERT_EQ(controller_->view().GetJob(job)->job.attempt, 2);
  EXPECT_FALSE(controller_->view().GetJob(job)->attempt->not_before);
  auto exits = Failures(job, FindingKind::kProcessExit);
  ASSERT_EQ(exits.size(), 1u);
  ASSERT_TRUE(exits[0].onset_at);
  EXPECT_EQ(*exits[0].onset_at, exit1);  // the agent's report, received then
  // Attempt 2's rank 0 exits 3 s later: the second restart waits 10 × 2^1 s from the first.
  clock_.AdvanceSeconds(3);
  Beat("n1", Ranks(job, 2, /*exited=*/0));
  EXPECT_EQ(controller_->view().GetJob(job)->job.state, JobState::kRecovering);
  for (int i = 0; i < 30 && controller_->view().GetJob(job)->job.attempt == 2; ++i) Second("n1");
  ASSERT_EQ(controller_->view().GetJob(job)->job.attempt, 3);
  const JobView view = *controller_->view().GetJob(job);
  const Attempt& a3 = *view.attempt;
  ASSERT_TRUE(a3.not_before);
  EXPECT_EQ(*a3.not_before, restarted1 + Seconds(20));
  EXPECT_GE(a3.started_at, *a3.not_before);
  EXPECT_EQ(Stored(job, 3)->not_before, restarted1 + Seconds(20));
}

TEST_F(ControllerMarksTest, ANodeLostStartsAtItsAgentsLastHeartbeat) {
  AddNode("n1", "l0");
  AddNode("sp", "l0", /*spare=*/true);
  std::string job = SubmitOurs(0);
  Beat("sp");
  Beat("n1", Ranks(job, 1));
  const Time last_heard = clock_.Now();
  for (int i = 0; i < 60 && Failures(job, FindingKind::kNodeLost).empty(); ++i) {
    clock_.AdvanceSeconds(0.5);
    Beat("sp");
    controller_->Tick();
    Drain();
  }
  auto lost = Failures(job, FindingKind::kNodeLost);
  ASSERT_EQ(lost.size(), 1u);
  ASSERT_TRUE(lost[0].onset_at);
  EXPECT_EQ(*lost[0].onset_at, last_heard);
  EXPECT_GE(lost[0].detected_at - last_heard, Seconds(ControllerOptions{}.node_heartbeat_timeout_s));
}

TEST_F(ControllerMarksTest, AnOperatorsRestartStartsAtTheRequest) {
  AddNode("n1", "l0");
  std::string job = SubmitOurs(0);
  Beat("n1", Ranks(job, 1));
  Second("n1");
  Report8(job, 1, ReportKind::kStep, clock_.Now(), 5);
  Report8(job, 1, ReportKind::kCheckpoint, clock_.Now(), 5);  // every rank's part: complete
  Second("n1");
  const Time asked = clock_.Now();
  std::optional<Result<RestartOutcome>> out;
  controller_->RestartJob(job, "latest", {}, "", "alice",
                          [&](Result<RestartOutcome> r) { out = std::move(r); });
  Drain();
  ASSERT_TRUE(out && out->ok()) << out->status().message();
  auto asked_for = Failures(job, FindingKind::kRestartRequested);
  ASSERT_EQ(asked_for.size(), 1u);
  EXPECT_EQ(asked_for[0].onset_at, asked);
  EXPECT_FALSE(controller_->view().GetJob(job)->attempt->not_before);  // a forced restart has no backoff
}

}  // namespace
}  // namespace shepherd
