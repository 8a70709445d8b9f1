// One fault, one incident: grouping, re-rooting and the budget rule (scheduler/incidents.h), the exit hold
// (scheduler/exit_hold.h), and the free restart in the recovery policy. Times are kT0 plus hand-picked
// offsets; every expected value is written out here, never taken from the code under test.
#include "scheduler/incidents.h"

#include <gtest/gtest.h>

#include <cstdio>

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "recovery_test_util.h"
#include "scheduler/exit_hold.h"

namespace shepherd::testing {
namespace {

Time At(double s) {
  return kT0 + Seconds(s);
}

Finding F(const std::string& id, FindingKind kind, int attempt, double at, std::vector<std::string> nodes) {
  Finding f;
  f.id = id;
  f.job = "job-1";
  f.attempt = attempt;
  f.kind = kind;
  f.nodes = std::move(nodes);
  f.detected_at = At(at);
  return f;
}

const IncidentWindow kWindow{.join_window_s = 15, .grace_s = 30};
const std::set<std::string> kAttempt1Nodes = {"n0", "n1"};

// Classifies f against *open, applies it, and returns the verdict (f.incident set as the caller would).
IncidentVerdict Add(Finding& f, std::optional<Incident>* open, int current_attempt,
                    std::optional<Time> trained = std::nullopt, std::vector<std::string>* repointed = nullptr,
                    const std::set<std::string>& nodes = kAttempt1Nodes) {
  IncidentVerdict v =
      ClassifyFinding(f, open->has_value() ? &**open : nullptr, current_attempt, trained, kWindow);
  f.incident = v.incident;
  std::vector<std::string> r = Admit(f, v, nodes, open);
  if (repointed) *repointed = r;
  return v;
}

// ---- grouping and re-rooting ----

TEST(IncidentsTest, PeersExitsThenTheNodeLostAreOneIncidentRootedAtTheNode) {
  // n1 dies at t=0: the exits of n0's ranks are reported at +0.8 s and +0.9 s, n1 is declared lost at
  // +10.5 s. All of attempt 1, which still runs (the exits' restart is held).
  std::optional<Incident> open;
  Finding exit_a = F("f-1", FindingKind::kProcessExit, 1, 0.8, {"n0"});
  Finding exit_b = F("f-2", FindingKind::kProcessExit, 1, 0.9, {"n0"});
  Finding lost = F("f-3", FindingKind::kNodeLost, 1, 10.5, {"n1"});
  EXPECT_EQ(Add(exit_a, &open, 1).kind, IncidentVerdict::Kind::kOpen);
  EXPECT_EQ(exit_a.incident, "f-1");
  EXPECT_EQ(Add(exit_b, &open, 1).kind, IncidentVerdict::Kind::kJoin);
  EXPECT_EQ(exit_b.incident, "f-1");
  std::vector<std::string> repointed;
  EXPECT_EQ(Add(lost, &open, 1, std::nullopt, &repointed).kind, IncidentVerdict::Kind::kReroot);
  EXPECT_EQ(lost.incident, "f-3");
  EXPECT_EQ(repointed, (std::vector<std::string>{"f-1", "f-2"}));
  EXPECT_EQ(open->root, "f-3");
  EXPECT_EQ(open->root_kind, FindingKind::kNodeLost);
  EXPECT_EQ(open->members, (std::vector<std::string>{"f-1", "f-2", "f-3"}));
}

TEST(IncidentsTest, TheNodeLostOfTheAttemptTheExitsStartedRerootsToo) {
  // No hold (a Slurm job): the exit restarted at once into attempt 2, on the same nodes; the node is found
  // lost in attempt 2, before it trained. It names n1, a node of the root's attempt: the better root.
  std::optional<Incident> open;
  Finding exit = F("f-1", FindingKind::kProcessExit, 1, 0.8, {"n0"});
  Add(exit, &open, 1);
  OnIncidentEndedAttempt(&*open, 1, /*restarted=*/true, /*spent=*/true, {"n0", "n1"});
  Finding late_exit = F("f-2", FindingKind::kProcessExit, 1, 1.2, {"n0"});  // attempt 1's echo
  EXPECT_EQ(Add(late_exit, &open, 2).kind, IncidentVerdict::Kind::kJoin);
  Finding lost = F("f-3", FindingKind::kNodeLost, 2, 10.5, {"n1"});
  std::vector<std::string> repointed;
  EXPECT_EQ(Add(lost, &open, 2, std::nullopt, &repointed, {"n0", "n1"}).kind, IncidentVerdict::Kind::kReroot);
  EXPECT_EQ(repointed, (std::vector<std::string>{"f-1", "f-2"}));
  EXPECT_EQ(open->root, "f-3");
}

TEST(IncidentsTest, ANodeLostOnANodeTheRootsAttemptDidNotUseIsNoBetterRoot) {
  std::optional<Incident> open;
  Finding exit = F("f-1", FindingKind::kProcessExit, 1, 0.8, {"n0"});
  Add(exit, &open, 1);
  Finding lost = F("f-2", FindingKind::kNodeLost, 1, 5, {"n9"});  // joins (within the window), not root
  EXPECT_EQ(Add(lost, &open, 1).kind, IncidentVerdict::Kind::kJoin);
  EXPECT_EQ(lost.incident, "f-1");
  EXPECT_EQ(open->root, "f-1");
}

TEST(IncidentsTest, ARankFaultNeverRerootsANodeFault) {
  std::optional<Incident> open;
  Finding lost = F("f-1", FindingKind::kNodeLost, 1, 0, {"n1"});
  Add(lost, &open, 1);
  Finding exit = F("f-2", FindingKind::kProcessExit, 1, 0.5, {"n0"});
  EXPECT_EQ(Add(exit, &open, 1).kind, IncidentVerdict::Kind::kJoin);
  EXPECT_EQ(exit.incident, "f-1");
  Finding gpu = F("f-3", FindingKind::kGpuFault, 1, 1, {"n1"});  // a node fault over a node fault: joins
  EXPECT_EQ(Add(gpu, &open, 1).kind, IncidentVerdict::Kind::kJoin);
  EXPECT_EQ(open->root, "f-1");
}

TEST(IncidentsTest, AFindingOfTheRootsRunningAttemptPastTheWindowIsANewIncident) {
  std::optional<Incident> open;
  Finding hb = F("f-1", FindingKind::kHeartbeatLost, 1, 0, {"n0"});  // recorded only (paused), no restart
  Add(hb, &open, 1);
  Finding within = F("f-2", FindingKind::kHang, 1, 15, {"n0"});  // exactly the window: joins
  EXPECT_EQ(Add(within, &open, 1).kind, IncidentVerdict::Kind::kJoin);
  Finding later = F("f-3", FindingKind::kProcessExit, 1, 30.5, {"n0"});  // 15.5 s after the newest member
  EXPECT_EQ(Add(later, &open, 1).kind, IncidentVerdict::Kind::kOpen);
  EXPECT_EQ(later.incident, "f-3");
  EXPECT_EQ(open->root, "f-3");
}

TEST(IncidentsTest, TheIncidentClosesGraceSecondsAfterTheAttemptItStartedTrained) {
  std::optional<Incident> open;
  Finding lost = F("f-1", FindingKind::kNodeLost, 1, 10, {"n1"});
  Add(lost, &open, 1);
  OnIncidentEndedAttempt(&*open, 1, true, true, {"n0", "sp0"});
  // Attempt 2 starts at 10 s and reports its first step at 18 s.
  Finding before_step = F("f-2", FindingKind::kProcessExit, 2, 14, {"n0"});
  EXPECT_EQ(Add(before_step, &open, 2).kind, IncidentVerdict::Kind::kJoin);
  Finding in_grace = F("f-3", FindingKind::kHang, 2, 48, {"sp0"});  // 18 + 30: still the fault's
  EXPECT_EQ(Add(in_grace, &open, 2, At(18)).kind, IncidentVerdict::Kind::kJoin);
  Finding after = F("f-4", FindingKind::kProcessExit, 2, 48.5, {"n0"});
  EXPECT_EQ(Add(after, &open, 2, At(18)).kind, IncidentVerdict::Kind::kOpen);
  EXPECT_EQ(after.incident, "f-4");
}

TEST(IncidentsTest, AnAttemptTheIncidentDidNotStartOpensANewOne) {
  std::optional<Incident> open;
  Finding exit = F("f-1", FindingKind::kProcessExit, 1, 0, {"n0"});
  Add(exit, &open, 1);
  OnIncidentEndedAttempt(&*open, 1, true, true, {"n0", "n1"});
  // A person forced attempt 3 meanwhile: its findings are not this fault's.
  Finding f = F("f-2", FindingKind::kProcessExit, 3, 2, {"n0"});
  EXPECT_EQ(Add(f, &open, 3).kind, IncidentVerdict::Kind::kOpen);
}

TEST(IncidentsTest, OtherKindsAreTheirOwnIncidentAndLeaveTheOpenOneAlone) {
  std::optional<Incident> open;
  Finding exit = F("f-1", FindingKind::kProcessExit, 1, 0, {"n0"});
  Add(exit, &open, 1);
  for (FindingKind k : {FindingKind::kStraggler, FindingKind::kSdcSuspected, FindingKind::kLossDivergence,
                        FindingKind::kRestartRequested}) {
    Finding f = F("f-x", k, 1, 1, {"n1"});
    EXPECT_EQ(Add(f, &open, 1).kind, IncidentVerdict::Kind::kAlone) << ToString(k);
    EXPECT_EQ(f.incident, "f-x");
  }
  EXPECT_EQ(open->root, "f-1");
  EXPECT_EQ(open->members, (std::vector<std::string>{"f-1"}));
}

// ---- budget ----

TEST(IncidentsTest, OnlyANodeFaultOnTheIncidentsNodesRestartsForFreeAfterItSpent) {
  std::optional<Incident> open;
  Finding exit = F("f-1", FindingKind::kProcessExit, 1, 0.8, {"n0"});
  Add(exit, &open, 1);
  EXPECT_FALSE(RestartIsFree(*open, exit));  // the first restart spends
  OnIncidentEndedAttempt(&*open, 1, true, /*spent=*/true, {"n0", "n1"});
  Finding lost = F("f-2", FindingKind::kNodeLost, 2, 10.5, {"n1"});
  Add(lost, &open, 2);
  EXPECT_TRUE(RestartIsFree(*open, lost));
  Finding again = F("f-3", FindingKind::kProcessExit, 2, 11, {"n0"});  // a rank fault again: spends
  Add(again, &open, 2);
  EXPECT_FALSE(RestartIsFree(*open, again));
  Finding elsewhere = F("f-4", FindingKind::kNodeLost, 2, 11.5, {"n7"});  // not the incident's node
  Add(elsewhere, &open, 2);
  EXPECT_FALSE(RestartIsFree(*open, elsewhere));
  Finding other = F("f-5", FindingKind::kNodeLost, 2, 11.6, {"n1"});
  other.incident = "f-0";  // of another incident
  EXPECT_FALSE(RestartIsFree(*open, other));
}

TEST(IncidentsTest, NothingIsFreeBeforeTheIncidentSpentItsUnit) {
  std::optional<Incident> open;
  Finding hb = F("f-1", FindingKind::kHeartbeatLost, 1, 0, {"n1"});
  Add(hb, &open, 1);
  Finding lost = F("f-2", FindingKind::kNodeLost, 1, 10, {"n1"});
  Add(lost, &open, 1);
  EXPECT_FALSE(RestartIsFree(*open, lost));
  OnIncidentEndedAttempt(&*open, 1, true, /*spent=*/false, {"n0", "sp0"});  // e.g. a fence: spent nothing
  EXPECT_FALSE(RestartIsFree(*open, lost));
}

class FreeRestartTest : public RecoveryTest {};

TEST_F(FreeRestartTest, AFreeRestartSpendsNoBudgetWaitsNoBackoffAndIgnoresAnExhaustedBudget) {
  // job-1 on node-01, node-02 (the fixture); node-02 lost inside an incident that already restarted it.
  Build();
  job_.restarts = 3;  // max_restarts 3: a restart that spends would fail the job
  Finding lost = MakeFinding(FindingKind::kNodeLost, {8, 9, 10, 11, 12, 13, 14, 15}, {"node-02"});
  lost.incident = lost.id;
  auto decide = [&](bool free) {
    return DecideRecovery({.job = job_,
                           .placement = placement_,
                           .cluster = cluster_,
                           .finding = lost,
                           .last_known_good = lkg_,
                           .latest_complete = latest_,
                           .now = kT0,
                           .last_restart_at = kT0 - Seconds(1),
                           .consecutive_restarts = 3,
                           .pending_replay_nodes = replay_nodes_,
                           .free_restart = free});
  };
  RecoveryDecision d = decide(true);
  ASSERT_EQ(d.action, RecoveryDecision::kRestart) << Dump(d);
  EXPECT_FALSE(d.spends_budget);
  EXPECT_EQ(d.not_before, kT0);  // no backoff (5 s · 2^3 after kT0 - 1 s otherwise)
  EXPECT_TRUE(Has(d.actions, "spend no restart budget: incident " + lost.id + " already spent it"))
      << Dump(d);
  EXPECT_EQ(NodesOf(*d.new_placement), (std::set<std::string>{"node-01", "node-03"}));
  EXPECT_EQ(decide(false).action, RecoveryDecision::kFail);
}

// ---- the exit hold ----

ExitHoldInput Hold(double now, std::map<std::string, std::optional<Time>> heard) {
  return {
      .exit_at = At(1), .last_heard = std::move(heard), .now = At(now), .node_timeout_s = 10, .margin_s = 3};
}

TEST(ExitHoldTest, HoldsWhileANodeOfTheAttemptWasNotHeardSinceTheExit) {
  // The exit was reported at 1 s by n0's agent; n1's agent last heartbeated at 0.4 s.
  ExitHold h = DecideExitHold(Hold(1, {{"n0", At(1)}, {"n1", At(0.4)}}));
  EXPECT_TRUE(h.hold);
  EXPECT_EQ(h.waiting_for, (std::vector<std::string>{"n1"}));
  EXPECT_EQ(h.until, At(14));  // 1 + 10 + 3
}

TEST(ExitHoldTest, EveryNodeHeardSinceTheExitDecidesNow) {
  ExitHold h = DecideExitHold(Hold(1.5, {{"n0", At(1)}, {"n1", At(1.4)}}));
  EXPECT_FALSE(h.hold);
  EXPECT_TRUE(h.waiting_for.empty());
}

TEST(ExitHoldTest, ANodeNeverHeardOrLostKeepsTheHoldUntilItsBoundThenDecides) {
  EXPECT_TRUE(DecideExitHold(Hold(13.9, {{"n0", At(1)}, {"n1", std::nullopt}})).hold);
  ExitHold h = DecideExitHold(Hold(14, {{"n0", At(1)}, {"n1", std::nullopt}}));
  EXPECT_FALSE(h.hold);
  EXPECT_EQ(h.waiting_for, (std::vector<std::string>{"n1"}));
  EXPECT_NE(h.reason.find("decided without it"), std::string::npos) << h.reason;
}

TEST(ExitHoldTest, TheReasonNamesAFewOfThousandsOfWaitedForNodesAndTheirCount) {
  // 2,048 nodes of a fleet job not heard from since the exit (a network partition, say).
  std::map<std::string, std::optional<Time>> heard{{"a-reporter", At(1)}};
  for (int i = 0; i < 2048; ++i) {
    char name[16];
    std::snprintf(name, sizeof name, "node-%05d", i);
    heard[name] = At(0.5);
  }
  for (double now : {1.0, 14.0}) {  // holding, then decided without them
    ExitHold h = DecideExitHold(Hold(now, heard));
    EXPECT_EQ(h.hold, now < 14);
    EXPECT_EQ(h.waiting_for.size(), 2048u);  // every one, for the decision
    EXPECT_LT(h.reason.size(), 300u) << h.reason;
    EXPECT_NE(h.reason.find("2048 nodes (node-00000, node-00001, node-00002 and 2045 more)"), std::string::npos)
        << h.reason;
  }
  // Three or fewer are all named.
  ExitHold few = DecideExitHold(Hold(1, {{"n0", At(1)}, {"n1", At(0.4)}, {"n2", std::nullopt}, {"n3", At(0)}}));
  EXPECT_EQ(few.reason.rfind("hold the restart until n1, n2, n3 are heard from", 0), 0u) << few.reason;
}

TEST(ExitHoldTest, AHeartbeatAtTheExitsOwnTimeCounts) {
  // The agent that reported the exit is heard at that very moment.
  EXPECT_FALSE(DecideExitHold(Hold(1, {{"n0", At(1)}})).hold);
}

}  // namespace
}  // namespace shepherd::testing
