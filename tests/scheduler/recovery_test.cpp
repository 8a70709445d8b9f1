// Recovery policy: rank and node faults, replacement (leaf, spine, free node, whole re-place, queue) and
// the restart budget (backoff, checkpoint choice and manual restarts: recovery_restart_test.cpp; SDC and
// loss anomalies: recovery_data_test.cpp).
// Hand-built clusters, simulated time; expected values worked out by hand in the comments.
#include <gtest/gtest.h>

#include <csignal>

#include "tests/scheduler/recovery_test_util.h"

namespace shepherd {
namespace {

using namespace testing;  // the shared fixture and builders

// A lost node is unreachable, not proven broken (a stopped agent looks the same): cordoned as suspect, it
// returns by its agent's health check; a GPU fault, the hardware's own report, fails it.
TEST_F(RecoveryTest, NodeLostCordonsTheNodeAndTakesTheSameLeafSpareFromLastKnownGood) {
  Build();
  RecoveryDecision d = Decide(MakeFinding(FindingKind::kNodeLost, {}, {"node-02"}));
  ASSERT_EQ(d.action, RecoveryDecision::kRestart) << Dump(d);
  ASSERT_EQ(d.node_actions.size(), 1u);
  EXPECT_EQ(d.node_actions[0].node, "node-02");
  EXPECT_EQ(d.node_actions[0].action, NodeActionKind::kCordon);
  EXPECT_EQ(d.replaced, std::vector<std::string>{"node-02->node-03 (leaf)"});
  ASSERT_TRUE(d.new_placement);
  EXPECT_EQ(d.new_placement->attempt, 2);
  for (int r = 0; r < 16; ++r) {  // ranks 8-15 move to node-03 and keep their GPU index
    EXPECT_EQ(d.new_placement->ranks[r].node, r < 8 ? "node-01" : "node-03") << r;
    EXPECT_EQ(d.new_placement->ranks[r].gpu, r % 8) << r;
  }
  ASSERT_TRUE(d.resume_from);
  EXPECT_EQ(d.resume_from->id, "job-1/1/40");
  EXPECT_EQ(d.not_before, kT0);  // first restart: no backoff
  EXPECT_FALSE(d.replay);
  EXPECT_EQ(d.actions, (std::vector<std::string>{"cordon node-02", "stop attempt 1",
                                                 "replace node-02 with node-03 (leaf)",
                                                 "restart from checkpoint job-1/1/40 (step 40, good)"}));
  EXPECT_EQ(Decide(MakeFinding(FindingKind::kGpuFault, {}, {"node-02"})).node_actions.at(0).action,
            NodeActionKind::kFail);
  // The cluster passed in is untouched.
  EXPECT_FALSE(cluster_.Find("node-02")->failed);
  EXPECT_EQ(cluster_.AllocatedGpus("node-02"), 8);
}

TEST_F(RecoveryTest, GpuFaultNamedByRankFailsItsNode) {
  Build();
  RecoveryDecision d = Decide(MakeFinding(FindingKind::kGpuFault, {3}, {}));  // rank 3 is on node-01
  ASSERT_EQ(d.action, RecoveryDecision::kRestart) << Dump(d);
  EXPECT_EQ(d.node_actions, (std::vector<NodeAction>{{"node-01", NodeActionKind::kFail, "gpu_fault"}}));
  EXPECT_EQ(d.replaced, std::vector<std::string>{"node-01->node-03 (leaf)"});
}

TEST_F(RecoveryTest, NoSpareInTheLeafTakesOneInTheSpine) {
  Build({"node-03"});  // leaf l0 has no spare; node-05 is the spare of the same spine
  RecoveryDecision d = Decide(MakeFinding(FindingKind::kNodeLost, {}, {"node-02"}));
  ASSERT_EQ(d.action, RecoveryDecision::kRestart) << Dump(d);
  EXPECT_EQ(d.replaced, std::vector<std::string>{"node-02->node-05 (spine)"});
}

TEST_F(RecoveryTest, RanksOnANodeAlreadyOutOfServiceMoveWithoutNewBlame) {
  Build();
  Node n = *cluster_.Find("node-02");
  n.schedulable = false;  // cordoned by an operator while the job ran
  ASSERT_TRUE(cluster_.UpsertNode(n).ok());
  RecoveryDecision d = Decide(MakeFinding(FindingKind::kHeartbeatLost, {8}, {"node-02"}));
  ASSERT_EQ(d.action, RecoveryDecision::kRestart) << Dump(d);
  EXPECT_TRUE(d.node_actions.empty());
  EXPECT_EQ(d.replaced, std::vector<std::string>{"node-02->node-03 (leaf)"});
}

TEST_F(RecoveryTest, SparesDisabledOrExhaustedFallBackToAFreeNode) {
  Build({"node-03", "node-05", "node-07"});  // no spares at all; node-04 (same spine) is free
  RecoveryDecision d = Decide(MakeFinding(FindingKind::kNodeLost, {}, {"node-02"}));
  ASSERT_EQ(d.action, RecoveryDecision::kRestart) << Dump(d);
  EXPECT_EQ(d.replaced, std::vector<std::string>{"node-02->node-04 (spine)"});
  EXPECT_TRUE(Has(d.actions, "replace node-02 with node-04 (spine; free node, not a spare)")) << Dump(d);
}

// TP 4, DP 4 on node-01 and node-02 (two TP groups each). No spares; node-03 and node-04 each have 4 GPUs
// held by another job, so no single node can take node-02's 8 ranks; but node-01 (8, once the job is
// released) + node-03 (4) + node-04 (4) hold the four TP groups of 4.
class FragmentedTest : public RecoveryTest {
 protected:
  void BuildFragmented(int other_gpus) {
    job_.plan = MakePlan(4, 1, 4);
    placement_ = Sequential(job_.plan, {"node-01", "node-02"}, 1);
    for (const char* id : {"node-01", "node-02", "node-03", "node-04"})
      ASSERT_TRUE(cluster_.UpsertNode(MakeNode(id, "s0", "l0")).ok());
    ASSERT_TRUE(cluster_.Allocate("job-1", placement_).ok());
    ASSERT_TRUE(cluster_.Allocate("job-2", Hold("node-03", other_gpus)).ok());
    Placement h4 = Hold("node-04", other_gpus);
    ASSERT_TRUE(cluster_.Allocate("job-3", h4).ok());
  }
};

TEST_F(FragmentedTest, NoSpareButFreeCapacityReplacesTheWholeJob) {
  BuildFragmented(4);
  RecoveryDecision d = Decide(MakeFinding(FindingKind::kNodeLost, {}, {"node-02"}));
  ASSERT_EQ(d.action, RecoveryDecision::kRestart) << Dump(d);
  ASSERT_TRUE(d.new_placement);
  EXPECT_EQ(d.new_placement->attempt, 2);
  ASSERT_EQ(d.new_placement->ranks.size(), 16u);
  EXPECT_EQ(NodesOf(*d.new_placement), (std::set<std::string>{"node-01", "node-03", "node-04"}));
  for (const RankSlot& s : d.new_placement->ranks) {
    if (s.node != "node-01") {
      EXPECT_GE(s.gpu, 4) << s.node << " gpu " << s.gpu << " is held by another job";
    }
  }
  EXPECT_TRUE(d.replaced.empty());
  EXPECT_TRUE(Has(d.actions, "re-place the whole job (no replacement node fits): node-01, node-03, node-04"))
      << Dump(d);
}

TEST_F(FragmentedTest, NoSpareAndNotEnoughFreeGpusQueues) {
  BuildFragmented(6);  // 8 + 2 + 2 = 12 free GPUs < 16
  RecoveryDecision d = Decide(MakeFinding(FindingKind::kNodeLost, {}, {"node-02"}));
  ASSERT_EQ(d.action, RecoveryDecision::kQueue) << Dump(d);
  EXPECT_EQ(d.reason, "waiting for capacity: no spare and not enough free GPUs");
  EXPECT_FALSE(d.new_placement);
  EXPECT_EQ(d.node_actions.size(), 1u);  // node-02 is still failed
  ASSERT_TRUE(d.resume_from);            // where the job resumes once admitted
  EXPECT_EQ(d.resume_from->id, "job-1/1/40");
}

TEST_F(RecoveryTest, AHangCulpritsNodeIsCordonedOnlyWhenTheCulpritStoppedTwice) {
  // Rank 9 (node-02) never entered the collective its group waits in (the finding's nodes list the whole
  // group's nodes). First time: restart on the same nodes, whatever the culprit was doing.
  Build();
  auto hang = [](int attempt, bool silent) {
    Finding f = MakeFinding(FindingKind::kHang, {9}, {"node-01", "node-02"}, attempt);
    if (silent) f.silent_ranks = {9};
    return f;
  };
  for (bool silent : {false, true}) {
    RecoveryDecision d = Decide(hang(1, silent));
    ASSERT_EQ(d.action, RecoveryDecision::kRestart) << Dump(d);
    EXPECT_TRUE(d.node_actions.empty()) << Dump(d);
    ASSERT_TRUE(d.new_placement);
    EXPECT_EQ(d.new_placement->ranks, placement_.ranks);
  }
  job_.attempt = 2, job_.restarts = 1;
  placement_.attempt = 2;
  // Again, while heartbeating (rank-0-only work longer than the hang timeout, a deadlock in the code): the
  // ranks leave node-02 without blame.
  std::vector<Finding> earlier = {hang(1, false)};
  RecoveryDecision busy = Decide(hang(2, false), false, earlier);
  EXPECT_TRUE(busy.node_actions.empty()) << Dump(busy);
  EXPECT_TRUE(Has(busy.actions, "avoid node-02 (no blame)")) << Dump(busy);
  EXPECT_EQ(busy.replaced, std::vector<std::string>{"node-02->node-03 (leaf)"});
  // Again, silent both times (the process or its host stopped; a silence on node-02 counts as much as
  // heartbeat_lost): node-02 is cordoned and replaced.
  earlier = {hang(1, true)};
  for (const std::vector<Finding>& before :
       {earlier, std::vector<Finding>{MakeFinding(FindingKind::kHeartbeatLost, {9}, {"node-02"})}}) {
    RecoveryDecision stopped = Decide(hang(2, true), false, before);
    ASSERT_EQ(stopped.node_actions.size(), 1u) << Dump(stopped);
    EXPECT_EQ(stopped.node_actions[0].node, "node-02");
    EXPECT_EQ(stopped.node_actions[0].action, NodeActionKind::kCordon);
    EXPECT_EQ(stopped.replaced, std::vector<std::string>{"node-02->node-03 (leaf)"});
  }
}

TEST_F(RecoveryTest, ANodeLeftWithoutBlameIsKeptWhenNoOtherNodeHasRoom) {
  // The exit recurs on node-02 (the code or the node), and the job's two nodes are the whole inventory.
  // Before, the job was queued "waiting for capacity" and then placed on node-02 again by the queue.
  Build({"node-03", "node-04", "node-05", "node-06", "node-07"});
  job_.attempt = 2, job_.restarts = 1;
  placement_.attempt = 2;
  Finding first = MakeFinding(FindingKind::kProcessExit, {12}, {"node-02"});
  first.exit_code = 1;
  Finding second = MakeFinding(FindingKind::kProcessExit, {12}, {"node-02"}, 2);
  second.exit_code = 1;
  const std::vector<Finding> earlier = {first};
  RecoveryDecision d = Decide(second, false, earlier);
  ASSERT_EQ(d.action, RecoveryDecision::kRestart) << Dump(d);
  EXPECT_TRUE(d.node_actions.empty()) << Dump(d);
  ASSERT_TRUE(d.new_placement);
  EXPECT_EQ(d.new_placement->ranks, placement_.ranks);
  EXPECT_EQ(d.new_placement->attempt, 3);
  EXPECT_TRUE(Has(d.actions, "no room without node-02: restart on it")) << Dump(d);
  EXPECT_FALSE(Has(d.actions, "queue the job: waiting for capacity: no spare and not enough free GPUs"))
      << Dump(d);
}

TEST_F(RecoveryTest, AnExitNamingNoNodeSaysSoWithoutAnEmptyList) {
  // A Slurm step that ended without naming a rank (killed at its time limit): "process_exit on : first time".
  Build();
  Finding f = MakeFinding(FindingKind::kProcessExit, {}, {});
  f.signal = 15;
  RecoveryDecision d = Decide(f);
  EXPECT_EQ(d.reason.find(" on :"), std::string::npos) << d.reason;
  EXPECT_NE(d.reason.find("process_exit: first time"), std::string::npos) << d.reason;
}

TEST_F(RecoveryTest, CommunicationFaultIsTransientFirstAndCordonedOnRecurrence) {
  Build();
  const Finding first = MakeFinding(FindingKind::kHang, {}, {"node-01", "node-02"});
  RecoveryDecision d1 = Decide(first);
  ASSERT_EQ(d1.action, RecoveryDecision::kRestart) << Dump(d1);
  EXPECT_TRUE(d1.node_actions.empty());
  ASSERT_TRUE(d1.new_placement);
  EXPECT_EQ(d1.new_placement->ranks, placement_.ranks);  // same nodes, same GPUs
  EXPECT_EQ(d1.new_placement->attempt, 2);

  // Attempt 2 hangs the same way on node-02 and node-04 (say): only node-02 recurs.
  job_.attempt = 2, job_.restarts = 1;
  placement_.attempt = 2;
  const std::vector<Finding> earlier = {first};
  RecoveryDecision d2 =
      Decide(MakeFinding(FindingKind::kHang, {}, {"node-02", "node-04"}, 2), false, earlier);
  ASSERT_EQ(d2.action, RecoveryDecision::kRestart) << Dump(d2);
  ASSERT_EQ(d2.node_actions.size(), 1u);
  EXPECT_EQ(d2.node_actions[0].node, "node-02");
  EXPECT_EQ(d2.node_actions[0].action, NodeActionKind::kCordon);
  EXPECT_EQ(d2.replaced, std::vector<std::string>{"node-02->node-03 (leaf)"});
}

TEST_F(RecoveryTest, ProcessExitBlamesTheNodeOnlyWhenItCrashesAgain) {
  Build();
  const Finding first = MakeFinding(FindingKind::kProcessExit, {12}, {"node-02"});
  RecoveryDecision d1 = Decide(first);
  ASSERT_EQ(d1.action, RecoveryDecision::kRestart) << Dump(d1);
  EXPECT_TRUE(d1.node_actions.empty());
  EXPECT_EQ(NodesOf(*d1.new_placement), (std::set<std::string>{"node-01", "node-02"}));

  job_.attempt = 2, job_.restarts = 1;
  const std::vector<Finding> earlier = {first};
  RecoveryDecision d2 = Decide(MakeFinding(FindingKind::kHeartbeatLost, {8}, {"node-02"}, 2), false, earlier);
  ASSERT_EQ(d2.node_actions.size(), 1u) << Dump(d2);
  EXPECT_EQ(d2.node_actions[0].node, "node-02");
  EXPECT_EQ(d2.node_actions[0].action, NodeActionKind::kCordon);
}

// Every rank silent while each node's agent lists its process running: the whole job was paused (SIGSTOP,
// a debugger) or froze; a restart of a paused job, then a cordon at the second pause, was the harm.
TEST_F(RecoveryTest, AWholeJobSilentWhileItsAgentsListItRunningIsRecordedOnly) {
  Build();
  vouched_ = {"node-01", "node-02"};
  std::vector<int> all(16);
  for (int r = 0; r < 16; ++r) all[r] = r;
  RecoveryDecision d = Decide(MakeFinding(FindingKind::kHeartbeatLost, all, {"node-01", "node-02"}));
  EXPECT_EQ(d.action, RecoveryDecision::kNone) << Dump(d);
  EXPECT_TRUE(d.node_actions.empty());
  EXPECT_NE(d.reason.find("paused"), std::string::npos) << d.reason;
  // Not vouched for (an agent silent too, or no longer listing them): the ranks are lost, as before.
  vouched_ = {"node-01"};
  EXPECT_EQ(Decide(MakeFinding(FindingKind::kHeartbeatLost, all, {"node-01", "node-02"})).action,
            RecoveryDecision::kRestart);
  // Another launcher's job has no agents to vouch: every rank silent at once is recorded, nothing
  // recommended (paused, frozen or cut off look the same from here).
  job_.spec.command.clear();
  job_.spec.launch_mode = LaunchMode::kExternal;
  d = Decide(MakeFinding(FindingKind::kHeartbeatLost, all, {"node-01", "node-02"}));
  EXPECT_EQ(d.action, RecoveryDecision::kNone) << Dump(d);
  EXPECT_EQ(Decide(MakeFinding(FindingKind::kHeartbeatLost, {3}, {"node-01"})).action,
            RecoveryDecision::kRestart);
}

// One rank silent twice on a node whose agent still lists its process: the process, not the node. The
// ranks move off it without blame; without the agent's word the recurrence cordons, as before.
TEST_F(RecoveryTest, ARecurringSilenceTheAgentVouchesForCordonsNothing) {
  Build();
  const std::vector<Finding> earlier = {MakeFinding(FindingKind::kHeartbeatLost, {9}, {"node-02"})};
  job_.attempt = 2, job_.restarts = 1;
  vouched_ = {"node-02"};
  RecoveryDecision d = Decide(MakeFinding(FindingKind::kHeartbeatLost, {9}, {"node-02"}, 2), false, earlier);
  ASSERT_EQ(d.action, RecoveryDecision::kRestart) << Dump(d);
  EXPECT_TRUE(d.node_actions.empty()) << Dump(d);
  EXPECT_EQ(NodesOf(*d.new_placement).count("node-02"), 0u) << Dump(d);
  vouched_.clear();
  d = Decide(MakeFinding(FindingKind::kHeartbeatLost, {9}, {"node-02"}, 2), false, earlier);
  ASSERT_EQ(d.node_actions.size(), 1u) << Dump(d);
  EXPECT_EQ(d.node_actions[0].action, NodeActionKind::kCordon);
}

// Ranks their agent stopped because the daemon's lease ran out (the daemon stalled): a restart on the same
// nodes, and such an exit never counts as an earlier loss on the node (it moved a job off a healthy node).
TEST_F(RecoveryTest, ExitsOfAnAgentsFenceBlameNothingAndAreNoRecurrence) {
  Build();
  Finding fenced = MakeFinding(FindingKind::kProcessExit, {12}, {"node-02"});
  fenced.signal = 15;
  fenced.fenced = true;
  RecoveryDecision d = Decide(fenced);
  ASSERT_EQ(d.action, RecoveryDecision::kRestart) << Dump(d);
  EXPECT_TRUE(d.node_actions.empty());
  EXPECT_EQ(NodesOf(*d.new_placement), (std::set<std::string>{"node-01", "node-02"}));
  job_.attempt = 2, job_.restarts = 1;
  const std::vector<Finding> earlier = {fenced};
  Finding again = MakeFinding(FindingKind::kProcessExit, {12}, {"node-02"}, 2);
  again.signal = 11;  // a real crash after the fence: a first loss on the node
  d = Decide(again, false, earlier);
  ASSERT_EQ(d.action, RecoveryDecision::kRestart) << Dump(d);
  EXPECT_TRUE(d.node_actions.empty()) << Dump(d);
  EXPECT_EQ(NodesOf(*d.new_placement).count("node-02"), 1u) << Dump(d);
}

// The daemon's stalls fenced the ranks: each restart was charged to max_restarts (and its backoff), and a
// healthy job failed after enough daemon stalls. A fenced restart while the daemon was late spends nothing,
// even with the budget gone; a fence without the daemon's lateness (one agent's network) still does.
TEST_F(RecoveryTest, AFencedRestartWhileTheDaemonWasLateSpendsNoRestartBudget) {
  Build();
  daemon_late_ = true;
  job_.restarts = job_.spec.policy.max_restarts;  // every restart spent
  consecutive_ = 5;                               // in a row, the last just now: a backoff is due
  last_restart_ = kT0;
  Finding fenced = MakeFinding(FindingKind::kProcessExit, {12}, {"node-02"});
  fenced.signal = 15;
  fenced.fenced = true;
  RecoveryDecision d = Decide(fenced);
  ASSERT_EQ(d.action, RecoveryDecision::kRestart) << Dump(d);
  EXPECT_FALSE(d.spends_budget);
  EXPECT_EQ(d.not_before, kT0) << Dump(d);  // no backoff either
  Finding crash = MakeFinding(FindingKind::kProcessExit, {12}, {"node-02"});
  crash.signal = 11;
  d = Decide(crash);
  EXPECT_EQ(d.action, RecoveryDecision::kFail) << Dump(d);  // a crash still finds the budget spent
  EXPECT_TRUE(d.spends_budget);
  job_.restarts = 0;
  d = Decide(crash);
  ASSERT_EQ(d.action, RecoveryDecision::kRestart) << Dump(d);
  EXPECT_GT(d.not_before, kT0) << Dump(d);  // and waits out its backoff
  daemon_late_ = false;                     // the daemon was listening: the agent's own path failed
  d = Decide(fenced);
  ASSERT_EQ(d.action, RecoveryDecision::kRestart) << Dump(d);
  EXPECT_TRUE(d.spends_budget);
  EXPECT_TRUE(d.node_actions.empty());  // still no blame
}

// One killed rank takes its peers down in their next collective: the same attempt's later losses on its
// node are that incident's cascade, not a recurrence (a probe's kill -9 of one task got its healthy node
// cordoned, and drained in Slurm). The same loss in a later attempt is a recurrence.
TEST_F(RecoveryTest, LossesOfOneAttemptAreOneIncidentNotARecurrence) {
  Build();
  Finding killed = MakeFinding(FindingKind::kHeartbeatLost, {12}, {"node-02"});
  killed.id = "f-1";
  Finding cascade = MakeFinding(FindingKind::kHeartbeatLost, {4, 8}, {"node-01", "node-02"});
  cascade.id = "f-2";
  RecoveryDecision d = Decide(cascade, false, std::vector<Finding>{killed});
  EXPECT_TRUE(d.node_actions.empty()) << Dump(d);
  EXPECT_TRUE(d.replaced.empty()) << Dump(d);

  job_.attempt = 2, job_.restarts = 1;
  placement_.attempt = 2;
  Finding again = MakeFinding(FindingKind::kHeartbeatLost, {12}, {"node-02"}, 2);
  RecoveryDecision a = Decide(again, false, std::vector<Finding>{killed, cascade});
  ASSERT_EQ(a.node_actions.size(), 1u) << Dump(a);
  EXPECT_EQ(a.node_actions[0].node, "node-02");
  EXPECT_EQ(a.node_actions[0].action, NodeActionKind::kCordon);
}

TEST_F(RecoveryTest, RecurringExitsCordonOnlyWhenTheNodeCanCauseThem) {
  // Rank 12 (node-02) exits with code 1 in attempts 1 and 2: nothing is cordoned; the ranks leave node-02
  // for the leaf spare, where the same exit would be a deterministic crash (loop_breakers_test).
  Build();
  Finding first = MakeFinding(FindingKind::kProcessExit, {12}, {"node-02"});
  first.exit_code = 1;
  job_.attempt = 2, job_.restarts = 1;
  placement_.attempt = 2;
  Finding second = MakeFinding(FindingKind::kProcessExit, {12}, {"node-02"}, 2);
  second.exit_code = 1;
  second.step = 49;
  const std::vector<Finding> earlier = {first};
  RecoveryDecision d = Decide(second, false, earlier);
  ASSERT_EQ(d.action, RecoveryDecision::kRestart) << Dump(d);
  EXPECT_TRUE(d.node_actions.empty()) << Dump(d);
  EXPECT_EQ(d.replaced, std::vector<std::string>{"node-02->node-03 (leaf)"});
  EXPECT_TRUE(Has(d.actions, "avoid node-02 (no blame)")) << Dump(d);
  EXPECT_NE(d.reason.find("ranks lost again on node-02"), std::string::npos) << d.reason;

  // Another code, a step outside crash_step_window (a port in use, then a peer that died: the e2e node-loss
  // case under load), or a signal after the clean exit: no evidence against the node, avoided.
  for (auto change : {+[](Finding* f) { f->exit_code = 2; }, +[](Finding* f) { f->step = 53; },
                      +[](Finding* f) { f->exit_code.reset(), f->signal = 9; }}) {
    Finding other = second;
    change(&other);
    RecoveryDecision c = Decide(other, false, earlier);
    EXPECT_TRUE(c.node_actions.empty()) << Dump(c);
    EXPECT_TRUE(Has(c.actions, "avoid node-02 (no blame)")) << Dump(c);
  }
  // Signals on both sides (SIGBUS, then SIGSEGV) are losses a node can cause: the recurrence cordons it.
  first.exit_code.reset(), first.signal = 7;
  second.exit_code.reset(), second.signal = 11;
  const std::vector<Finding> signalled = {first};
  RecoveryDecision c = Decide(second, false, signalled);
  ASSERT_EQ(c.node_actions.size(), 1u) << Dump(c);
  EXPECT_EQ(c.node_actions[0].node, "node-02");
  EXPECT_EQ(c.node_actions[0].action, NodeActionKind::kCordon);
}

TEST_F(RecoveryTest, RecurringKillsCordonOnlyWhenTheNodeCouldHaveSentThem) {
  // Rank 12 (node-02) is killed in attempts 1 and 2, with the same signal each time. (The same OOM kill on
  // another node is a deterministic crash: loop_breakers_test.)
  Build();
  job_.attempt = 2, job_.restarts = 1;
  placement_.attempt = 2;
  auto killed = [](int attempt, int signal, std::optional<bool> oom) {
    Finding f = MakeFinding(FindingKind::kProcessExit, {12}, {"node-02"}, attempt);
    f.signal = signal;
    f.oom_kill = oom;
    return f;
  };
  struct Case {
    int signal;
    std::optional<bool> oom_kill;
    bool cordon;
  };
  for (Case c : {Case{SIGKILL, false, false},         // a `kill -9`: the agent saw no OOM kill on the node
                 Case{SIGTERM, std::nullopt, false},  // a `kill`, a scheduler's TERM
                 Case{SIGINT, std::nullopt, false}, Case{SIGHUP, std::nullopt, false},
                 Case{SIGKILL, true, false},         // the OOM killer: the job's own memory use
                 Case{SIGKILL, std::nullopt, true},  // no agent could tell (a memory failure's, maybe)
                 Case{SIGBUS, std::nullopt, true}}) {
    const std::vector<Finding> earlier = {killed(1, c.signal, c.oom_kill)};
    RecoveryDecision d = Decide(killed(2, c.signal, c.oom_kill), false, earlier);
    ASSERT_EQ(d.action, RecoveryDecision::kRestart) << Dump(d);
    if (c.cordon) {
      ASSERT_EQ(d.node_actions.size(), 1u) << c.signal << " " << Dump(d);
      EXPECT_EQ(d.node_actions[0].node, "node-02");
      EXPECT_EQ(d.node_actions[0].action, NodeActionKind::kCordon);
    } else {
      EXPECT_TRUE(d.node_actions.empty()) << c.signal << " " << Dump(d);
      EXPECT_TRUE(Has(d.actions, "avoid node-02 (no blame)")) << c.signal << " " << Dump(d);
    }
  }
}

TEST_F(RecoveryTest, StragglerIsReportedOnly) {
  Build();
  RecoveryDecision d = Decide(MakeFinding(FindingKind::kStraggler, {5}, {"node-01"}));
  EXPECT_EQ(d.action, RecoveryDecision::kNone);
  EXPECT_TRUE(d.node_actions.empty());
  EXPECT_FALSE(d.new_placement);
  EXPECT_EQ(d.actions, std::vector<std::string>{"report only: straggler"});
}

TEST_F(RecoveryTest, StaleFindingOrStoppedJobIsIgnored) {
  Build();
  job_.attempt = 2;
  EXPECT_EQ(Decide(MakeFinding(FindingKind::kNodeLost, {}, {"node-02"}, 1)).action, RecoveryDecision::kNone);
  job_.attempt = 1;
  job_.state = JobState::kCancelled;
  EXPECT_EQ(Decide(MakeFinding(FindingKind::kNodeLost, {}, {"node-02"}, 1)).action, RecoveryDecision::kNone);
}

TEST_F(RecoveryTest, ExhaustedBudgetFailsTheJobButStillFailsTheNode) {
  Build();
  job_.restarts = 3;  // max_restarts = 3
  RecoveryDecision d = Decide(MakeFinding(FindingKind::kNodeLost, {}, {"node-02"}));
  ASSERT_EQ(d.action, RecoveryDecision::kFail) << Dump(d);
  EXPECT_EQ(d.reason.rfind("restart budget exhausted (3 of 3 restarts used)", 0), 0u) << d.reason;
  EXPECT_EQ(d.node_actions.size(), 1u);
  EXPECT_FALSE(d.new_placement);
  EXPECT_TRUE(Has(d.actions, "stop attempt 1"));
}

}  // namespace
}  // namespace shepherd
