// A restarted Controller (Recover over the same store: a daemon restart, or a new leader taking over) is
// safe in its first minutes: no node or rank verdict before a full window of listening, a silent node's
// ranks replaced only after the lease it may still hold, an exit heard again restarts nothing twice, the
// same attempt's ranks handed out again rather than a new attempt, and no assignments version handed out
// before the epoch that keeps versions growing is durable. Simulated time (FakeClock), in-memory store.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>

#include "tests/control/controller_fixture.h"

namespace shepherd {
namespace {

class ControllerRestartTest : public ControllerTest {
 protected:
  HeartbeatAck Beat(const std::string& node, AgentHeartbeat hb = {}) {
    std::optional<Result<HeartbeatAck>> out;
    controller_->NodeHeartbeat(node, hb, [&](Result<HeartbeatAck> a) { out = std::move(a); });
    Drain();
    EXPECT_TRUE(out && out->ok()) << (out ? out->status().message() : "no answer");
    return out && out->ok() ? **out : HeartbeatAck{};
  }
  // The node's long poll, answered at once (version -1 is never the node's).
  Result<Assignments> Poll(const std::string& node) {
    std::optional<Result<Assignments>> out;
    controller_->WatchAssignments(node, -1, clock_.Now(), true, [&](Result<Assignments> a) { out = std::move(a); });
    Drain();
    if (!out) return Unavailable("not answered");
    return *out;
  }
  // The node's agent reports ranks 0..7 of the attempt running (rank `exited`: exited with code 1).
  static AgentHeartbeat Ranks(const std::string& job, int attempt, int exited = -1) {
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
  std::string SubmitOurs() {
    JobSpec s = testing::MakeSpec(8, 8);
    s.policy.restart_backoff_s = 0;
    auto est = controller_->view().PlanFor(s);
    std::optional<Result<JobView>> out;
    controller_->SubmitJob(s, *est, [&](Result<JobView> r) { out = std::move(r); });
    Drain();
    EXPECT_TRUE(out && out->ok());
    return (*out)->job.id;
  }
  // Heartbeat reports of the attempt's ranks in `ranks`, sent and received now.
  void Report(const std::string& job, int attempt, const std::vector<int>& ranks) {
    ReportBatch b;
    for (int r : ranks) {
      ::shepherd::Report x;
      x.rank = r;
      x.attempt = attempt;
      x.time = clock_.Now();
      x.kind = ReportKind::kHeartbeat;
      b.reports.emplace_back(r, x);
    }
    std::optional<Result<IngestSummary>> out;
    controller_->IngestReports(job, b, [&](Result<IngestSummary> s) { out = std::move(s); });
    Drain();
    ASSERT_TRUE(out && out->ok()) << (out ? out->status().message() : "no answer");
  }
  std::vector<Finding> Failures() {
    auto fs = controller_->view().GetFailures({});
    EXPECT_TRUE(fs.ok());
    return fs.ok() ? *fs : std::vector<Finding>{};
  }
  void Tick() {
    controller_->Tick();
    Drain();
  }
  // The daemon restarts on the same store with these options.
  void Restart(ControllerOptions o) {
    controller_ = std::make_unique<Controller>(
        store_.get(), &clock_, [this](std::function<void()> f) { posted_.push_back(std::move(f)); }, o);
    ASSERT_TRUE(controller_->Recover().ok());
    Drain();
  }
};

// The epoch record Recover writes is what keeps versions growing across restarts. A long poll answered
// before it is durable hands out a version of an epoch the next start would use again (a crash in between):
// the answer could repeat, or fall behind, what an agent holds. So polls are 503 until it is durable.
TEST_F(ControllerRestartTest, NoAssignmentsVersionIsHandedOutBeforeTheEpochIsDurable) {
  AddNode("n1", "l0");
  std::string job = SubmitOurs();
  Beat("n1", Ranks(job, 1));
  Result<Assignments> before = Poll("n1");
  ASSERT_TRUE(before.ok());
  store_->HoldWrites();  // the restarted daemon's first write (its epoch) waits on a slow disk
  controller_ = std::make_unique<Controller>(
      store_.get(), &clock_, [this](std::function<void()> f) { posted_.push_back(std::move(f)); },
      ControllerOptions{});
  ASSERT_TRUE(controller_->Recover().ok());
  Drain();
  // The agent heartbeats: the node is heard, so its poll would be answered at once.
  std::optional<Result<HeartbeatAck>> ack;
  controller_->NodeHeartbeat("n1", Ranks(job, 1), [&](Result<HeartbeatAck> a) { ack = std::move(a); });
  Drain();
  Result<Assignments> early = Poll("n1");
  ASSERT_FALSE(early.ok());
  EXPECT_EQ(early.status().code(), Code::kUnavailable);
  EXPECT_NE(early.status().message().find("epoch"), std::string::npos) << early.status().message();
  store_->ReleaseHeld();
  Drain();
  ASSERT_TRUE(ack && ack->ok());
  Result<Assignments> after = Poll("n1");
  ASSERT_TRUE(after.ok()) << after.status().message();
  EXPECT_GT(after->version / AgentBoard::kEpochStride, before->version / AgentBoard::kEpochStride);
  ASSERT_EQ(after->ranks.size(), 8u);
  EXPECT_EQ(after->ranks[0].rank.attempt, 1);
}

// A rank exits and the job restarts (attempt 2); the daemon dies before its answer acknowledged the exit,
// so the agent reports the same exit again to the restarted daemon. It is an exit of an attempt already
// replaced: no finding, no third attempt. The agent keeps running attempt 2 (no second launch).
TEST_F(ControllerRestartTest, AnExitHeardAgainAfterARestartRestartsNothing) {
  AddNode("n1", "l0");
  std::string job = SubmitOurs();
  Beat("n1", Ranks(job, 1));
  ASSERT_EQ(controller_->view().GetJob(job)->job.state, JobState::kRunning);
  AgentHeartbeat exit = Ranks(job, 1, /*exited=*/3);
  Beat("n1", exit);
  for (int i = 0; i < 5 && controller_->view().GetJob(job)->job.attempt == 1; ++i) {
    clock_.AdvanceSeconds(1);
    Beat("n1", exit);
    Tick();
  }
  ASSERT_EQ(controller_->view().GetJob(job)->job.attempt, 2);
  const size_t findings = Failures().size();
  ASSERT_EQ(findings, 1u);
  EXPECT_EQ(Failures()[0].kind, FindingKind::kProcessExit);

  Reset();  // the daemon restarts
  AgentHeartbeat again = Ranks(job, 2);
  for (const ProcessStatus& p : exit.processes)
    if (!p.running) again.processes.push_back(p);  // the exit, never acknowledged
  Beat("n1", again);
  for (int i = 0; i < 60; ++i) {
    clock_.AdvanceSeconds(1);
    Beat("n1", Ranks(job, 2));
    Report(job, 2, {0, 1, 2, 3, 4, 5, 6, 7});
    Tick();
  }
  EXPECT_EQ(controller_->view().GetJob(job)->job.attempt, 2);
  EXPECT_EQ(controller_->view().GetJob(job)->job.state, JobState::kRunning);
  EXPECT_EQ(Failures().size(), findings);
  Result<Assignments> a = Poll("n1");
  ASSERT_TRUE(a.ok());
  ASSERT_EQ(a->ranks.size(), 8u);
  EXPECT_EQ(a->ranks[0].rank.attempt, 2);  // the same attempt: what the agent runs stays as it is
}

// Last-seen times are not persisted. A rank that went silent during the outage (its last report 45 s before)
// is not judged at once: the restarted daemon cannot tell it from a rank still starting, so it gets the
// job's startup grace from the restart (at least a heartbeat timeout); its peers, which report again, are
// never judged. Then it is found, within a heartbeat timeout or two of the grace's end.
TEST_F(ControllerRestartTest, ARankSilentAcrossARestartIsJudgedOnlyAfterAFullWindow) {
  AddNode("n1", "l0");
  std::string job = SubmitOurs();
  Beat("n1", Ranks(job, 1));
  for (int i = 0; i < 5; ++i) {
    clock_.AdvanceSeconds(1);
    Beat("n1", Ranks(job, 1));
    Report(job, 1, {0, 1, 2, 3, 4, 5, 6, 7});
    Tick();
  }
  clock_.AdvanceSeconds(45);  // the daemon is down; rank 7 stops reporting meanwhile (its agent still runs it)
  Reset();
  const Time restarted = clock_.Now();
  const Policy policy = controller_->view().GetJob(job)->job.spec.policy;  // a copy: GetJob answers a temporary
  const double timeout = policy.heartbeat_timeout_s;
  const double window = std::max(policy.startup_grace_s, timeout);
  std::optional<double> found_after;
  while (!found_after && clock_.Now() - restarted < Seconds(window + 3 * timeout)) {
    clock_.AdvanceSeconds(0.5);
    Beat("n1", Ranks(job, 1));
    Report(job, 1, {0, 1, 2, 3, 4, 5, 6});
    Tick();
    for (const Finding& f : Failures())
      if (f.kind == FindingKind::kHeartbeatLost) found_after = ToSeconds(f.detected_at - restarted);
  }
  ASSERT_TRUE(found_after) << "rank 7 never found silent";
  EXPECT_GT(*found_after, window);                // a full window since the restart
  EXPECT_LE(*found_after, window + 2 * timeout);  // and then within the heartbeat rule's bound
  const std::vector<Finding> fs = Failures();
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].ranks, std::vector<int>{7});
}

// A node whose agent died during the outage: the restarted daemon does not know when it last heard it, so
// it gives the agent a full node timeout from the restart (node_lost no sooner), and the lease it granted
// before the outage may have been renewed just before the end, as far as it knows: the replacements reach
// the spare only a lease after the restart. No other node is blamed.
TEST_F(ControllerRestartTest, ANodeSilentAcrossARestartIsLostAfterAFullTimeoutAndReplacedAfterItsLease) {
  AddNode("n1", "l0");
  AddNode("n2", "l0");
  AddNode("sp", "l0", /*spare=*/true);
  std::string lost_job = SubmitOurs();
  std::string other_job = SubmitOurs();
  const std::string lost_node = controller_->view().GetJob(lost_job)->attempt->placement.ranks[0].node;
  const std::string other_node = lost_node == "n1" ? "n2" : "n1";
  ASSERT_EQ(controller_->view().GetJob(other_job)->attempt->placement.ranks[0].node, other_node);
  for (int i = 0; i < 3; ++i) {
    clock_.AdvanceSeconds(1);
    Beat(lost_node, Ranks(lost_job, 1));
    Beat(other_node, Ranks(other_job, 1));
    Beat("sp");
    Tick();
  }
  clock_.AdvanceSeconds(45);  // the daemon is down; lost_node dies meanwhile
  Reset();
  const Time restarted = clock_.Now();
  const ControllerOptions defaults;
  std::optional<double> lost_after, replaced_after;
  while (!replaced_after && clock_.Now() - restarted < Seconds(defaults.agent_lease_s + 30)) {
    clock_.AdvanceSeconds(0.5);
    Beat(other_node, Ranks(other_job, 1));
    Beat("sp");
    Tick();
    double t = ToSeconds(clock_.Now() - restarted);
    if (!lost_after && !Failures().empty()) lost_after = t;
    Result<Assignments> sp = Poll("sp");
    ASSERT_TRUE(sp.ok());
    if (!sp->ranks.empty()) replaced_after = t;
  }
  ASSERT_TRUE(lost_after && replaced_after);
  EXPECT_GE(*lost_after, defaults.node_heartbeat_timeout_s);
  EXPECT_LE(*lost_after, defaults.node_heartbeat_timeout_s + 1);
  EXPECT_GE(*replaced_after, defaults.agent_lease_s);
  EXPECT_LE(*replaced_after, defaults.agent_lease_s + 1);
  const std::vector<Finding> fs = Failures();
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].kind, FindingKind::kNodeLost);
  EXPECT_EQ(fs[0].nodes, std::vector<std::string>{lost_node});
  EXPECT_EQ(controller_->view().GetJob(lost_job)->job.attempt, 2);
  EXPECT_EQ(controller_->view().GetJob(other_job)->job.attempt, 1);  // untouched
  EXPECT_EQ(controller_->view().GetJob(other_job)->job.state, JobState::kRunning);
}

// An operator lowers the lease (75 s to 15 s) across a restart. The agents still hold the 75 s leases the
// previous run granted, until their next answer: the restarted daemon honours that for an agent it has not
// heard since (the previous run's lease is stored with its epoch), so a node lost right after the restart is
// replaced 75 s after it, not 15 s. Agents it hears get the new lease.
TEST_F(ControllerRestartTest, ALeaseLoweredAcrossARestartIsHonouredForAgentsNotHeardSince) {
  AddNode("n1", "l0");
  AddNode("sp", "l0", /*spare=*/true);
  std::string job = SubmitOurs();
  const double old_lease = ControllerOptions{}.agent_lease_s;
  EXPECT_DOUBLE_EQ(Beat("n1", Ranks(job, 1)).lease_s, old_lease);
  Beat("sp");
  clock_.AdvanceSeconds(5);  // a quick restart
  ControllerOptions lowered;
  lowered.agent_lease_s = 15;
  ASSERT_LT(lowered.agent_lease_s, old_lease);
  Restart(lowered);
  const Time restarted = clock_.Now();
  EXPECT_DOUBLE_EQ(Beat("sp").lease_s, lowered.agent_lease_s);
  std::optional<double> lost_after, replaced_after;
  while (!replaced_after && clock_.Now() - restarted < Seconds(old_lease + 30)) {
    clock_.AdvanceSeconds(0.5);
    Beat("sp");
    Tick();
    double t = ToSeconds(clock_.Now() - restarted);
    if (!lost_after && controller_->view().GetJob(job)->job.attempt == 2) lost_after = t;
    Result<Assignments> sp = Poll("sp");
    ASSERT_TRUE(sp.ok());
    if (!sp->ranks.empty()) replaced_after = t;
  }
  ASSERT_TRUE(lost_after && replaced_after);
  EXPECT_LE(*lost_after, lowered.node_heartbeat_timeout_s + 1);
  EXPECT_GE(*replaced_after, old_lease);  // n1's agent may hold the old lease until then
  EXPECT_LE(*replaced_after, old_lease + 1);
}

}  // namespace
}  // namespace shepherd
