// The Controller and its agents: assignment versions, unknown processes, leases, the daemon's own lateness,
// node loss, and where jobs our agents launch are placed.
#include <gtest/gtest.h>

#include <cstdio>

#include "tests/control/controller_fixture.h"

namespace shepherd {

// ---- Fencing, epochs and the daemon's own lateness

class ControllerAgentsTest : public ControllerTest {
 protected:
  // As AssignmentsOf: an empty heartbeat first when the node was not heard since the controller started.
  Assignments Poll(const std::string& node) {
    std::optional<Result<Assignments>> out;
    controller_->WatchAssignments(node, -1, clock_.Now(), true,
                                  [&](Result<Assignments> a) { out = std::move(a); });
    Drain();
    if (!out) Beat(node);
    EXPECT_TRUE(out && out->ok());
    return out && out->ok() ? **out : Assignments{};
  }
  HeartbeatAck Beat(const std::string& node, AgentHeartbeat hb = {}) {
    std::optional<Result<HeartbeatAck>> out;
    controller_->NodeHeartbeat(node, hb, [&](Result<HeartbeatAck> a) { out = std::move(a); });
    Drain();
    EXPECT_TRUE(out && out->ok());
    return out && out->ok() ? **out : HeartbeatAck{};
  }
  // Our agents launch it: the node's agent reports the attempt's 8 ranks running.
  AgentHeartbeat Running(const std::string& job, int attempt) {
    AgentHeartbeat hb;
    for (int r = 0; r < 8; ++r) hb.processes.push_back({{job, attempt, r}, true, {}, {}, ""});
    return hb;
  }
  std::string SubmitLaunched() {
    JobSpec s = testing::MakeSpec(8, 8);
    s.policy.restart_backoff_s = 0;
    auto est = controller_->view().PlanFor(s);
    std::optional<Result<JobView>> out;
    controller_->SubmitJob(s, *est, [&](Result<JobView> r) { out = std::move(r); });
    Drain();
    EXPECT_TRUE(out && out->ok());
    return (*out)->job.id;
  }
};

TEST_F(ControllerAgentsTest, AssignmentVersionsNeverGoBackwardsAcrossRestarts) {
  AddNode("n1", "l0");
  SubmitLaunched();
  int64_t before = Poll("n1").version;
  EXPECT_GT(before, 0);
  Reset();  // the daemon restarts on the same store
  int64_t after = Poll("n1").version;
  EXPECT_GT(after, before);
  Reset();
  EXPECT_GT(Poll("n1").version, after);
}

// Unknown processes: what the daemon has no record of is kept, shown and stopped only when decided; what it
// knows is never unknown.
TEST_F(ControllerAgentsTest, ProcessesOfUnknownJobsOrAttemptsAreKeptUntilDecided) {
  AddNode("n1", "l0");
  std::string job = SubmitLaunched();
  AgentHeartbeat hb = Running(job, 1);
  hb.processes.push_back({{job, 0, 0}, true, {}, {}, ""});           // an older attempt: known (fencing)
  hb.processes.push_back({{job, 2, 0}, true, {}, {}, ""});           // an attempt never started
  hb.processes.push_back({{"job-999999", 1, 3}, true, {}, {}, ""});  // a job it has no record of
  Beat("n1", hb);
  Assignments a = Poll("n1");
  EXPECT_EQ(a.ranks.size(), 8u);
  EXPECT_EQ(a.keep, (std::vector<RankRef>{{job, 2, 0}, {"job-999999", 1, 3}}));
  ASSERT_EQ(controller_->view().GetNode("n1")->unknown_processes.size(), 2u);
  EXPECT_EQ(controller_->view().ListNodes({}).nodes.at(0).unknown_processes.size(), 2u);
  std::optional<Result<NodeView>> stopped;
  controller_->StopUnknownProcesses("n1", [&](Result<NodeView> v) { stopped = std::move(v); });
  Drain();
  ASSERT_TRUE(stopped && stopped->ok());
  EXPECT_TRUE((*stopped)->unknown_processes.at(0).stopping);
  EXPECT_TRUE(Poll("n1").keep.empty());
  EXPECT_EQ(controller_->view().GetJob(job)->job.attempt, 1);  // its own job is untouched
}

TEST_F(ControllerAgentsTest, HeartbeatAnswerGrantsTheLease) {
  AddNode("n1", "l0");
  EXPECT_DOUBLE_EQ(Beat("n1").lease_s, ControllerOptions{}.agent_lease_s);
}

TEST_F(ControllerAgentsTest, ALostNodesRanksAreReplacedOnlyAfterItsLease) {
  AddNode("n1", "l0");
  AddNode("sp", "l0", /*spare=*/true);
  std::string job = SubmitLaunched();
  Beat("sp");
  Beat("n1", Running(job, 1));
  ASSERT_EQ(controller_->view().GetJob(job)->job.state, JobState::kRunning);
  Time last_heard = clock_.Now();  // n1 goes silent: partitioned, its ranks may still run
  const double lease = ControllerOptions{}.agent_lease_s;
  std::optional<double> lost_after, replaced_after;
  while (!replaced_after && clock_.Now() - last_heard < Seconds(lease + 30)) {
    clock_.AdvanceSeconds(0.5);
    Beat("sp");  // the spare's agent is healthy
    controller_->Tick();
    Drain();
    double t = ToSeconds(clock_.Now() - last_heard);
    if (!lost_after && controller_->view().GetJob(job)->job.attempt == 2) lost_after = t;
    if (!Poll("sp").ranks.empty()) replaced_after = t;
  }
  ASSERT_TRUE(lost_after && replaced_after);
  std::printf("node lost %.1f s after its last heartbeat; replacement ranks handed out after %.1f s\n",
              *lost_after, *replaced_after);
  EXPECT_LE(*lost_after, ControllerOptions{}.node_heartbeat_timeout_s + 1);  // recovery decided at once
  EXPECT_GE(*replaced_after, lease);  // but its ranks reach the spare only once n1's lease expired
  EXPECT_LE(*replaced_after, lease + 1);
  Assignments a = Poll("sp");
  EXPECT_EQ(a.ranks.front().rank.attempt, 2);
}

TEST_F(ControllerAgentsTest, AStalledControlThreadBlamesNoNode) {
  ControllerOptions o;
  o.late_after_s = 2;
  controller_ = std::make_unique<Controller>(
      store_.get(), &clock_, [this](std::function<void()> f) { posted_.push_back(std::move(f)); }, o);
  ASSERT_TRUE(controller_->Recover().ok());
  Drain();
  AddNode("n1", "l0");
  AddNode("n2", "l0");
  std::string job = SubmitLaunched();
  for (int i = 0; i < 15; ++i) {
    clock_.AdvanceSeconds(1);
    Beat("n1", Running(job, 1));
    Beat("n2");
    controller_->Tick();
    Drain();
  }
  ASSERT_EQ(controller_->view().GetJob(job)->job.state, JobState::kRunning);
  clock_.AdvanceSeconds(12);  // SIGSTOP: on SIGCONT n2's heartbeat is served before n1's and the tick
  Beat("n2");
  Beat("n1", Running(job, 1));
  for (int i = 0; i < 30; ++i) {
    clock_.AdvanceSeconds(1);
    Beat("n1", Running(job, 1));
    Beat("n2");
    controller_->Tick();
    Drain();
  }
  EXPECT_EQ(controller_->view().GetJob(job)->job.attempt, 1);
  EXPECT_TRUE(controller_->view().GetFailures({})->empty());
  EXPECT_EQ(controller_->view().lateness().stalls, 1u);
  // A node silent while the daemon listens is still lost.
  for (int i = 0; i < 12; ++i) {
    clock_.AdvanceSeconds(1);
    Beat("n2");
    controller_->Tick();
    Drain();
  }
  auto failures = *controller_->view().GetFailures({});
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].kind, FindingKind::kNodeLost);
  EXPECT_EQ(failures[0].nodes, std::vector<std::string>{"n1"});
}

// A watched job (no command: its own launcher runs its ranks) holds slots on n1 as bookkeeping only: n1's
// agent falling silent says nothing about the job's ranks, and nothing is recorded against the job or the
// nodes its ranks said they ran on. The agent-launched job on the same node is judged as always.
TEST_F(ControllerAgentsTest, AnAgentsSilenceIsNoFindingOfAJobItDoesNotRun) {
  AddNode("n1", "l0");
  AddNode("n2", "l0");
  auto watched = Submit(8);
  ASSERT_TRUE(watched.ok()) << watched.status().message();
  ASSERT_EQ(watched->attempt->placement.ranks[0].node, "n1");
  std::string launched = SubmitLaunched();
  ASSERT_EQ(controller_->view().GetJob(launched)->attempt->placement.ranks[0].node, "n2");
  Beat("n1");
  Beat("n2", Running(launched, 1));
  for (int i = 0; i < 30; ++i) {  // n1's agent is silent for 30 s; n2's is healthy
    clock_.AdvanceSeconds(1);
    Beat("n2", Running(launched, 1));
    controller_->Tick();
    Drain();
  }
  FindingQuery of_watched;
  of_watched.job = watched->job.id;
  EXPECT_TRUE(controller_->view().GetFailures(of_watched)->empty());
  EXPECT_EQ(controller_->view().GetNode("n1")->state, NodeState::kAllocated);  // not cordoned, not failed
  EXPECT_EQ(controller_->view().GetJob(launched)->job.attempt, 1);
}

// A first deployment: the inventory file lists n1 before its agent runs, n2's agent is up. A job our agents
// launch went to n1 (first in order) and waited its whole launch timeout there; it goes to n2, and to a node
// without a live agent only when it fits nowhere else.
TEST_F(ControllerAgentsTest, AJobOurAgentsLaunchPrefersNodesWithALiveAgent) {
  AddNode("n1", "l0");
  AddNode("n2", "l0");
  Beat("n2");
  std::string first = SubmitLaunched();
  EXPECT_EQ(controller_->view().GetJob(first)->attempt->placement.ranks[0].node, "n2");
  std::string second = SubmitLaunched();  // n2 is full: n1 it is, rather than waiting in the queue
  EXPECT_EQ(controller_->view().GetJob(second)->attempt->placement.ranks[0].node, "n1");
}

}  // namespace shepherd
