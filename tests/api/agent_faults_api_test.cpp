// The agent side of the API with simulated time, when things go wrong: GPU faults, silent agents and node
// loss, rank exits (clean, crashed, fenced, killed by hand), paused jobs, and how cordoned nodes return.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "tests/api/agent_api_fixture.h"

namespace shepherd::testing {
namespace {

TEST_F(AgentApiTest, GpuFaultFailsTheNodeAndTheSpareTakesItsRanksAfterTheOldRanksStop) {
  Json n0_running = Running("n0", 1), n1_running = Running("n1", 1);
  Heartbeat("n1", n1_running);
  ApiReply r = Heartbeat("n0", n0_running, Json::array({{{"gpu", 2}, {"kind", "ecc_uncorrectable"}}}));
  ASSERT_EQ(r.status, 200);
  Json f = api_.Get("/v1/failures?kind=gpu_fault").body["failures"];
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0]["nodes"], Json::array({"n0"}));
  EXPECT_NE(f[0]["actions"].dump().find("replace n0 with sp0"), std::string::npos) << f[0].dump();
  EXPECT_EQ(api_.Get("/v1/nodes/n0").body["state"], "failed");
  EXPECT_EQ(Job()["attempt"], 2);
  // n0 and n1 still run attempt-1 ranks: attempt 2 is withheld from every agent.
  EXPECT_TRUE(Assignments("sp0")["ranks"].empty());
  EXPECT_TRUE(Assignments("n1")["ranks"].empty());
  Heartbeat("n0", Json::array());  // n0's agent stopped its ranks; n1's not yet
  api_.Tick();
  EXPECT_TRUE(Assignments("sp0")["ranks"].empty());
  Heartbeat("n1", Json::array());
  api_.Tick();
  EXPECT_EQ(Assignments("sp0")["ranks"].size(), 4u);
  EXPECT_EQ(Assignments("n1")["ranks"][0]["attempt"], 2);
}

// A GPU fault on a node no job of ours runs on (the spare, idle) fails it all the same: it was ignored, and
// the next job placed there (a prober's restart in backoff started on such a node).
TEST_F(AgentApiTest, AGpuFaultOnAnIdleNodeFailsIt) {
  ASSERT_EQ(
      Heartbeat("sp0", Json::array(), Json::array({{{"gpu", 1}, {"kind", "xid"}, {"detail", "79"}}})).status,
      200);
  Json n = api_.Get("/v1/nodes/sp0").body;
  EXPECT_EQ(n["state"], "failed") << n.dump();
  EXPECT_EQ(n["cordon"]["source"], "agent") << n.dump();
  EXPECT_NE(n["reason"].get<std::string>().find("GPU 1 xid: 79"), std::string::npos) << n.dump();
  EXPECT_EQ(Job()["attempt"], 1);  // the job on n0 and n1 is untouched
}

TEST_F(AgentApiTest, SilentAgentMeansNodeLost) {
  for (int s = 0; s < 12; ++s) {
    api_.clock_.AdvanceSeconds(1);
    Heartbeat("n0", Running("n0", 1));
    Heartbeat("sp0", Json::array());
    api_.Tick();
  }
  Json f = api_.Get("/v1/failures?kind=node_lost").body["failures"];
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0]["nodes"], Json::array({"n1"}));
  EXPECT_EQ(f[0]["ranks"].size(), 4u);
  EXPECT_EQ(api_.Get("/v1/nodes/n1").body["state"], "cordoned");  // suspect: its agent may just be down
}

// A fleet operator killed a node (its agent and its ranks at once, default timeouts): heartbeat_lost
// restarted the job in place, onto the dead node, and node_lost stopped that attempt in the same instant and
// moved it: two restarts for one fault. The node's verdict comes first now.
TEST_F(AgentApiTest, ANodeThatDiesWithItsRanksIsOneRestartOntoTheSpare) {
  auto reports = [&](int first, int last) {
    Json batch = Json::array();
    for (int r = first; r <= last; ++r)
      batch.push_back({{"rank", r}, {"attempt", Job()["attempt"]}, {"kind", "heartbeat"}, {"step", 5}});
    api_.Post("/v1/jobs/" + job_ + "/reports", {{"reports", batch}});
  };
  for (int s = 0; s < 40; ++s) {
    api_.clock_.AdvanceSeconds(1);
    const int attempt = Job()["attempt"];
    Heartbeat("n0", Running("n0", attempt));
    Heartbeat("sp0", Running("sp0", attempt));
    reports(0, 3);
    if (s < 5) {  // then n1 dies: ranks 4-7 fall silent, and its agent half a second later
      reports(4, 7);
      if (s == 4) api_.clock_.AdvanceSeconds(0.5);
      Heartbeat("n1", Running("n1", attempt));
    } else if (attempt > 1) {
      reports(4, 7);  // the moved ranks report from the spare
    }
    api_.Tick();
  }
  EXPECT_EQ(Job()["attempt"], 2) << api_.Get("/v1/failures?job=" + job_).body.dump();
  EXPECT_EQ(api_.Get("/v1/nodes/n1").body["state"], "cordoned");
  Json lost = api_.Get("/v1/failures?kind=node_lost").body["failures"];
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0]["attempt"], 1);
}

// One fault, one incident (docs/recovery.md): n1 dies with its ranks; n0's ranks exit non-zero 0.8 s later
// (their collectives failed), n1 is declared lost after the node timeout (10 s). The exits' restart is held
// for n1, so the job restarts once, onto the spare, and the exits are members of the node_lost incident.
TEST_F(AgentApiTest, PeersExitsThenTheNodeLostAreOneIncidentAndOneRestart) {
  Heartbeat("n1", Running("n1", 1));  // n1's last word, at t
  Heartbeat("n0", Running("n0", 1));
  api_.clock_.AdvanceSeconds(0.8);
  Json exits = Json::array();
  for (const Json& p : Running("n0", 1)) {
    Json e = p;
    e["state"] = "exited";
    e["exit_code"] = 1;
    exits.push_back(e);
  }
  Heartbeat("n0", exits);
  Json held = api_.Get("/v1/failures?kind=process_exit").body["failures"];
  ASSERT_EQ(held.size(), 4u);
  EXPECT_EQ(Job()["attempt"], 1) << held.dump();  // held: n1 was not heard from after the exits
  EXPECT_NE(held[0]["actions"].dump().find("hold the restart until n1"), std::string::npos) << held[0].dump();
  for (const Json& f : held) EXPECT_EQ(f["incident"], held[0]["id"]);
  for (int s = 0; s < 10; ++s) {  // n0 and the spare keep heartbeating; n1 stays silent
    api_.clock_.AdvanceSeconds(1);
    Heartbeat("n0", Json::array());
    Heartbeat("sp0", Json::array());
    api_.Tick();
  }
  Json lost = api_.Get("/v1/failures?kind=node_lost").body["failures"];
  ASSERT_EQ(lost.size(), 1u);
  const std::string root = lost[0]["id"];
  EXPECT_EQ(lost[0]["incident"], root);
  EXPECT_EQ(Job()["attempt"], 2);
  EXPECT_EQ(Job()["restarts"], 1);
  const Json exits_after = api_.Get("/v1/failures?kind=process_exit").body["failures"];
  ASSERT_EQ(exits_after.size(), 4u);
  for (const Json& f : exits_after) {
    EXPECT_EQ(f["incident"], root) << f.dump();
    EXPECT_EQ(f["attempt"], 1);
  }
  EXPECT_NE(exits_after[0]["actions"].dump().find("restart not held any more: attempt 1 was ended meanwhile "
                                                  "(incident " +
                                                  root + ")"),
            std::string::npos)
      << exits_after[0].dump();
  std::set<std::string> nodes;
  const Json placement = api_.Get("/v1/jobs/" + job_ + "/placement").body;
  for (const Json& r : placement["ranks"]) nodes.insert(r["node"]);
  EXPECT_EQ(nodes, (std::set<std::string>{"n0", "sp0"}));
}

// A user error with every agent alive: the exit waits only for n1's next heartbeat (0.5 s later here).
TEST_F(AgentApiTest, AnExitWithEveryAgentAliveRestartsAtTheNextHeartbeatOfTheOthers) {
  Heartbeat("n1", Running("n1", 1));
  api_.clock_.AdvanceSeconds(0.3);
  Json exit = Running("n0", 1)[0];
  exit["state"] = "exited";
  exit["exit_code"] = 1;
  Heartbeat("n0", Json::array({exit}));
  EXPECT_EQ(Job()["attempt"], 1);
  api_.clock_.AdvanceSeconds(0.5);
  Heartbeat("n1", Running("n1", 1));
  EXPECT_EQ(Job()["attempt"], 2);
  EXPECT_EQ(Job()["restarts"], 1);
  Json f = api_.Get("/v1/failures?kind=process_exit").body["failures"];
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0]["incident"], f[0]["id"]);
  EXPECT_NE(f[0]["actions"].dump().find("hold over: every node of the attempt was heard from"),
            std::string::npos)
      << f[0].dump();
  std::set<std::string> nodes;
  const Json placement = api_.Get("/v1/jobs/" + job_ + "/placement").body;
  for (const Json& r : placement["ranks"]) nodes.insert(r["node"]);
  EXPECT_EQ(nodes, (std::set<std::string>{"n0", "n1"}));  // a first exit: the same nodes, no blame
}

// The heartbeat that ends a hold also reports a GPU fault of that node: the fault is the incident's root and
// its one restart (off the node); the held exit does not restart the job onto the node first.
TEST_F(AgentApiTest, AGpuFaultInTheHeartbeatThatEndsTheHoldIsTheOneRestartAndTheRoot) {
  Heartbeat("n1", Running("n1", 1));
  api_.clock_.AdvanceSeconds(0.3);
  Json exit = Running("n0", 1)[0];
  exit["state"] = "exited";
  exit["exit_code"] = 1;
  Heartbeat("n0", Json::array({exit}));
  api_.clock_.AdvanceSeconds(0.5);
  Heartbeat("n1", Running("n1", 1), Json::array({{{"gpu", 0}, {"kind", "xid"}, {"detail", "79"}}}));
  EXPECT_EQ(Job()["attempt"], 2);
  EXPECT_EQ(Job()["restarts"], 1);
  const Json gpu = api_.Get("/v1/failures?kind=gpu_fault").body["failures"];
  const Json exits = api_.Get("/v1/failures?kind=process_exit").body["failures"];
  ASSERT_EQ(gpu.size(), 1u);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(gpu[0]["incident"], gpu[0]["id"]);
  EXPECT_EQ(exits[0]["incident"], gpu[0]["id"]) << exits[0].dump();
  EXPECT_EQ(api_.Get("/v1/nodes/n1").body["state"], "failed");
  std::set<std::string> nodes;
  const Json placement = api_.Get("/v1/jobs/" + job_ + "/placement").body;
  for (const Json& r : placement["ranks"]) nodes.insert(r["node"]);
  EXPECT_EQ(nodes, (std::set<std::string>{"n0", "sp0"}));
}

TEST_F(AgentApiTest, RankExitsAreFindingsAndCleanExitsFinishTheJob) {
  Json exited = Json::array(
      {{{"job", job_}, {"attempt", 1}, {"rank", 0}, {"pid", 5}, {"state", "exited"}, {"exit_code", 1}}});
  std::string node = api_.Get("/v1/jobs/" + job_ + "/placement").body["ranks"][0]["node"];
  ApiReply r = Heartbeat(node, exited);
  EXPECT_EQ(r.body["ack_exits"].size(), 1u);
  Json f = api_.Get("/v1/failures?kind=process_exit").body["failures"];
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0]["ranks"], Json::array({0}));
  EXPECT_NE(f[0]["detail"].get<std::string>().find("exited with code 1"), std::string::npos);
  EXPECT_EQ(Job()["attempt"], 2);  // restarted (first crash: same nodes, no blame)
  // Attempt 2 finishes: every rank exits 0.
  for (const char* n : {"n0", "n1"}) Heartbeat(n, Json::array());
  api_.Tick();
  for (const char* n : {"n0", "n1"}) {
    Json done = Json::array(), assigned = Assignments(n);
    for (const Json& a : assigned["ranks"])
      done.push_back(
          {{"job", job_}, {"attempt", 2}, {"rank", a["rank"]}, {"state", "exited"}, {"exit_code", 0}});
    ASSERT_EQ(done.size(), 4u);
    Heartbeat(n, done);
  }
  EXPECT_EQ(Job()["state"], "succeeded");
  EXPECT_EQ(api_.Get("/v1/nodes").body["summary"]["free_usable_gpus"], 8);
}

// Three kills in a row (restart_backoff_s 0: every restart starts its attempt at once). Attempts 1 and 2
// trained 25 steps each; attempt 3 is killed at its third step. Before, an attempt ended and the next
// started in one pass lost the ended attempt's last step, so all three looked stuck and the job was failed
// "no progress across restarts" after two restarts.
TEST_F(AgentApiTest, AttemptsThatTrainedBeforeTheirRankWasKilledCountAsProgress) {
  for (int attempt = 1; attempt <= 3; ++attempt) {
    std::set<std::string> nodes;
    const Json placement = api_.Get("/v1/jobs/" + job_ + "/placement").body;
    for (const Json& r : placement["ranks"]) nodes.insert(r["node"]);
    for (const std::string& n : nodes) Heartbeat(n, Json::array());  // the older ranks are gone
    api_.Tick();
    for (const std::string& n : nodes) ASSERT_EQ(Heartbeat(n, Running(n, attempt)).status, 200);
    ASSERT_EQ(Job()["state"], "running") << Job().dump();
    for (int step = 1; step <= (attempt < 3 ? 25 : 3); ++step) {
      Json reports = Json::array();
      for (int r = 0; r < 8; ++r)
        reports.push_back({{"rank", r}, {"attempt", attempt}, {"kind", "step"}, {"step", step}});
      ASSERT_EQ(api_.Post("/v1/jobs/" + job_ + "/reports", {{"reports", reports}}).status, 202);
    }
    const int rank = attempt == 2 ? 4 : 0;  // n0, n1, n0: no node twice in a row
    const std::string node = api_.Get("/v1/jobs/" + job_ + "/placement").body["ranks"][rank]["node"];
    Heartbeat(node, Json::array({{{"job", job_},
                                  {"attempt", attempt},
                                  {"rank", rank},
                                  {"state", "exited"},
                                  {"exit_code", nullptr},
                                  {"signal", 9}}}));
    Json j = Job();
    ASSERT_NE(j["state"], "failed") << j.dump();
    ASSERT_EQ(j["attempt"], attempt + 1) << j.dump();
  }
  Json last = api_.Get("/v1/failures?kind=process_exit").body["failures"];
  ASSERT_EQ(last.size(), 3u);
  for (const Json& a : last.back()["actions"])
    EXPECT_EQ(a.get<std::string>().find("no progress"), std::string::npos) << a;
}

// Ranks that finish at different times: the early ones exit 0 and fall silent while their peers save or
// tear down for longer than the heartbeat timeout. That is no lost rank (it restarted a finished job and
// then cordoned its nodes), and the job succeeds when the last rank exits 0.
TEST_F(AgentApiTest, RanksThatExitedCleanlyBeforeTheirPeersAreNotLost) {
  auto report_from = [&](int first, int last) {
    Json reports = Json::array();
    for (int r = first; r <= last; ++r)
      reports.push_back({{"rank", r}, {"attempt", 1}, {"kind", "heartbeat"}});
    return api_.Post("/v1/jobs/" + job_ + "/reports", {{"reports", reports}});
  };
  auto exits = [&](const std::string& node) {
    Json done = Json::array(), assigned = Assignments(node);
    for (const Json& a : assigned["ranks"])
      done.push_back(
          {{"job", job_}, {"attempt", 1}, {"rank", a["rank"]}, {"state", "exited"}, {"exit_code", 0}});
    return done;
  };
  const std::string early = api_.Get("/v1/jobs/" + job_ + "/placement").body["ranks"][0]["node"];
  const std::string late = early == "n0" ? "n1" : "n0";
  Json late_running = Running(late, 1);
  ASSERT_EQ(Heartbeat(early, Running(early, 1)).status, 200);
  ASSERT_EQ(Heartbeat(late, late_running).status, 200);
  ASSERT_EQ(report_from(0, 7).status, 202);
  ASSERT_EQ(Heartbeat(early, exits(early)).status, 200);
  int first_late = 8;
  for (const Json& r : late_running) first_late = std::min(first_late, r["rank"].get<int>());
  for (int s = 0; s < 30; ++s) {
    api_.clock_.AdvanceSeconds(1);
    Heartbeat(early, Json::array());
    Heartbeat(late, late_running);
    Heartbeat("sp0", Json::array());
    ASSERT_EQ(report_from(first_late, first_late + 3).status, 202);
    api_.Tick();
  }
  EXPECT_TRUE(api_.Get("/v1/failures").body["failures"].empty()) << api_.Get("/v1/failures").body.dump();
  EXPECT_EQ(Job()["attempt"], 1);
  Heartbeat(late, exits(late));
  EXPECT_EQ(Job()["state"], "succeeded");
  EXPECT_EQ(api_.Get("/v1/nodes").body["summary"]["by_state"].count("cordoned"), 0u);
}

// The whole job paused (SIGSTOP of every rank, a debugger) while the agents keep listing its processes:
// recorded, nothing stopped, nothing cordoned, however often it happens.
TEST_F(AgentApiTest, AWholeJobPausedWhileItsAgentsListItRunningIsRecordedOnly) {
  Json running[2] = {Running("n0", 1), Running("n1", 1)};
  ASSERT_EQ(Heartbeat("n0", running[0]).status, 200);
  ASSERT_EQ(Heartbeat("n1", running[1]).status, 200);
  for (int pause = 0; pause < 2; ++pause) {
    Json reports = Json::array();
    for (int r = 0; r < 8; ++r) reports.push_back({{"rank", r}, {"attempt", 1}, {"kind", "heartbeat"}});
    ASSERT_EQ(api_.Post("/v1/jobs/" + job_ + "/reports", {{"reports", reports}}).status, 202);
    for (int s = 0; s < 25; ++s) {  // 25 s of silence from every rank, past the 10 s heartbeat timeout
      api_.clock_.AdvanceSeconds(1);
      Heartbeat("n0", running[0]);
      Heartbeat("n1", running[1]);
      Heartbeat("sp0", Json::array());
      api_.Tick();
    }
  }
  Json f = api_.Get("/v1/failures?kind=heartbeat_lost").body["failures"];
  ASSERT_EQ(f.size(), 2u) << f.dump();
  for (const Json& x : f) {
    EXPECT_EQ(x["ranks"].size(), 8u);
    EXPECT_EQ(x["actions"].dump().find("stop attempt"), std::string::npos) << x.dump();
    EXPECT_EQ(x["actions"].dump().find("cordon"), std::string::npos) << x.dump();
  }
  EXPECT_EQ(Job()["attempt"], 1);
  EXPECT_EQ(Job()["state"], "running");
  EXPECT_EQ(api_.Get("/v1/nodes").body["summary"]["by_state"].count("cordoned"), 0u);
}

// Paused node by node: n0's ranks stopped 3 s before n1's (a tester's SIGSTOPs 1-2 s apart had n0's ranks
// found lost alone, the job restarted and n0 left for the spare). One whole-job silence, recorded only.
TEST_F(AgentApiTest, AJobPausedNodeByNodeIsOneWholeJobPauseRecordedOnly) {
  Json running[2] = {Running("n0", 1), Running("n1", 1)};
  for (int s = 0; s < 30; ++s) {
    Json reports = Json::array();
    for (int r = 0; r < 8; ++r) {
      const bool on_n0 = api_.Get("/v1/jobs/" + job_ + "/placement").body["ranks"][r]["node"] == "n0";
      if (s < (on_n0 ? 3 : 6)) reports.push_back({{"rank", r}, {"attempt", 1}, {"kind", "heartbeat"}});
    }
    if (!reports.empty())
      ASSERT_EQ(api_.Post("/v1/jobs/" + job_ + "/reports", {{"reports", reports}}).status, 202);
    Heartbeat("n0", running[0]);
    Heartbeat("n1", running[1]);
    Heartbeat("sp0", Json::array());
    api_.Tick();
    api_.clock_.AdvanceSeconds(1);
  }
  Json f = api_.Get("/v1/failures?kind=heartbeat_lost").body["failures"];
  ASSERT_EQ(f.size(), 1u) << f.dump();
  EXPECT_EQ(f[0]["ranks"].size(), 8u);
  EXPECT_EQ(f[0]["actions"].dump().find("stop attempt"), std::string::npos) << f[0].dump();
  EXPECT_EQ(Job()["attempt"], 1);
  EXPECT_EQ(Job()["state"], "running");
}

// The agent says which exits its fence caused (the daemon's lease ran out): the finding says so, and the
// restart stays on the same nodes; after the daemon's own stall it spends no restart budget, however often
// the daemon stalls (two stalls failed a job with max_restarts 1). Without one (the agent's own network
// path) it does, which bounds a loop on a flaky link.
TEST_F(AgentApiTest, ExitsOfAnAgentsFenceAreRecordedAsSuchAndBlameNoNode) {
  // Each fence comes this long after the one before: past the two leases in which a fence counts as the
  // daemon's lateness, so only a stall just before it makes it free.
  const double apart_s = 2 * ControllerOptions{}.agent_lease_s + 10;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    api_.clock_.AdvanceSeconds(apart_s);
    if (attempt <= 2) api_.controller_->ObserveLateness(Seconds(20), Duration{});  // the daemon stalled
    std::string node = api_.Get("/v1/jobs/" + job_ + "/placement").body["ranks"][0]["node"];
    Json exited = Json::array({{{"job", job_},
                                {"attempt", attempt},
                                {"rank", 0},
                                {"state", "exited"},
                                {"exit_code", nullptr},
                                {"signal", 15},
                                {"fenced", true}}});
    ASSERT_EQ(Heartbeat(node, exited).status, 200);
    EXPECT_EQ(Job()["attempt"], attempt + 1);
    EXPECT_EQ(api_.Get("/v1/jobs/" + job_ + "/placement").body["ranks"][0]["node"], node);
    EXPECT_EQ(Job()["restarts"], attempt <= 2 ? 0 : 1);
  }
  Json f = api_.Get("/v1/failures?kind=process_exit").body["failures"];
  ASSERT_EQ(f.size(), 3u);
  for (const Json& x : f) {
    EXPECT_EQ(x["fenced"], true);
    EXPECT_NE(x["detail"].get<std::string>().find("stopped by its agent"), std::string::npos) << x.dump();
    EXPECT_EQ(x["actions"].dump().find("avoid"), std::string::npos) << x.dump();
  }
  EXPECT_EQ(api_.Post("/v1/nodes/n0/heartbeat",
                      {{"processes",
                        Json::array({{{"job", "j"}, {"attempt", 1}, {"rank", 0}, {"fenced", "yes"}}})}})
                .status,
            422);
}

TEST_F(AgentApiTest, AKillByHandInTwoAttemptsCordonsNothing) {
  // Rank 0 is killed with SIGKILL in attempts 1 and 2 on the same node. The agent says whether the node's
  // kernel had just OOM-killed a process: a `kill -9` (oom_kill false) is no evidence against the node.
  // (Two OOM kills, or kills no agent could judge, do cordon it: recovery_test.)
  auto kill_twice = [&](int first_attempt, bool oom) {
    std::string node = api_.Get("/v1/jobs/" + job_ + "/placement").body["ranks"][0]["node"];
    for (int attempt : {first_attempt, first_attempt + 1}) {
      for (const char* n : {"n0", "n1"}) Heartbeat(n, Json::array());
      api_.Tick();
      Heartbeat(node, Json::array({{{"job", job_},
                                    {"attempt", attempt},
                                    {"rank", 0},
                                    {"state", "exited"},
                                    {"exit_code", nullptr},
                                    {"signal", SIGKILL},
                                    {"oom_kill", oom}}}));
    }
    return node;
  };
  const std::string by_hand = kill_twice(1, false);
  Json failures = api_.Get("/v1/failures?kind=process_exit").body["failures"];
  ASSERT_EQ(failures.size(), 2u);
  EXPECT_EQ(failures[1]["oom_kill"], false) << failures.dump();
  EXPECT_NE(failures[1]["detail"].get<std::string>().find("killed by signal 9 (not an OOM kill)"),
            std::string::npos)
      << failures.dump();
  Json n = api_.Get("/v1/nodes/" + by_hand).body;
  EXPECT_TRUE(n["cordon"].is_null()) << n.dump();  // the ranks moved off it, without blame
  EXPECT_TRUE(n["schedulable"].get<bool>()) << n.dump();
  const std::string& node = by_hand;
  // A heartbeat's oom_kill is a boolean.
  ApiReply bad =
      api_.Post("/v1/nodes/" + node + "/heartbeat", {{"processes", Json::array({{{"job", job_},
                                                                                 {"attempt", 5},
                                                                                 {"rank", 0},
                                                                                 {"state", "exited"},
                                                                                 {"signal", SIGKILL},
                                                                                 {"oom_kill", "yes"}}})}});
  EXPECT_EQ(bad.status, 422);
  EXPECT_EQ(bad.body["errors"][0]["field"], "processes[0].oom_kill") << bad.body.dump();
}

TEST_F(AgentApiTest, CordonRecordsItsSourceAndASuspectReturnsAfterPassingItsHealthCheck) {
  // Rank 0 dies of SIGBUS in attempt 1 and of SIGSEGV in attempt 2 on the same node: the recurrence cordons
  // it. (A clean exit, an exit code, is never evidence against a node: recovery_test.)
  std::string node = api_.Get("/v1/jobs/" + job_ + "/placement").body["ranks"][0]["node"];
  for (int attempt : {1, 2}) {
    for (const char* n : {"n0", "n1"}) Heartbeat(n, Json::array());
    api_.Tick();
    Json exit = {{"job", job_}, {"attempt", attempt}, {"rank", 0}, {"state", "exited"}};
    exit.update(Json{{"exit_code", nullptr}, {"signal", attempt == 1 ? 7 : 11}});
    Heartbeat(node, Json::array({exit}));
  }
  Json n = api_.Get("/v1/nodes/" + node).body;
  ASSERT_EQ(n["state"], "cordoned") << n.dump();
  Json failures = api_.Get("/v1/failures?kind=process_exit").body["failures"];
  ASSERT_EQ(failures.size(), 2u);
  EXPECT_EQ(n["cordon"]["source"], failures[1]["id"]);  // the finding that cordoned it
  // An operator cordons the other node: that one never returns by itself.
  const std::string other = node == "n0" ? "n1" : "n0";
  ASSERT_EQ(api_.Call("PATCH", "/v1/nodes/" + other, {{"schedulable", false}, {"reason", "bad fan"}}).status,
            200);
  EXPECT_EQ(api_.Get("/v1/nodes/" + other).body["cordon"]["source"], "operator");
  auto check = [&](const std::string& nd, int seq, bool ok) {
    ASSERT_EQ(api_.Post("/v1/nodes/" + nd + "/heartbeat",
                        {{"processes", Json::array()},
                         {"health_check", {{"seq", seq}, {"ok", ok}, {"output", ""}}}})
                  .status,
              200);
  };
  check(node, 1, true);
  check(node, 1, true);   // the same run, counted once
  check(node, 2, false);  // a failure starts the count over
  check(node, 3, true);
  check(node, 4, true);
  EXPECT_EQ(api_.Get("/v1/nodes/" + node).body["state"], "cordoned");
  check(node, 5, true);  // three passes in a row
  n = api_.Get("/v1/nodes/" + node).body;
  EXPECT_TRUE(n["schedulable"].get<bool>()) << n.dump();
  EXPECT_TRUE(n["cordon"].is_null());
  for (int seq = 1; seq <= 5; ++seq) check(other, seq, true);
  EXPECT_EQ(api_.Get("/v1/nodes/" + other).body["state"], "cordoned");
  // And an operator returns a node with PATCH.
  ASSERT_EQ(api_.Call("PATCH", "/v1/nodes/" + other, {{"schedulable", true}}).status, 200);
  EXPECT_TRUE(api_.Get("/v1/nodes/" + other).body["cordon"].is_null());
}

// Passes counted before a cordon say nothing about what the node was cordoned for: a prober's node, checked
// every second, returned 17 ms after its cordon (its streak of passes was already long enough).
TEST_F(AgentApiTest, HealthCheckPassesBeforeACordonDoNotReturnTheNode) {
  std::string node = api_.Get("/v1/jobs/" + job_ + "/placement").body["ranks"][0]["node"];
  auto check = [&](int seq) {
    ASSERT_EQ(api_.Post("/v1/nodes/" + node + "/heartbeat",
                        {{"processes", Json::array()},
                         {"health_check", {{"seq", seq}, {"ok", true}, {"output", ""}}}})
                  .status,
              200);
  };
  for (int seq = 1; seq <= 5; ++seq) check(seq);
  for (int attempt : {1, 2}) {  // SIGBUS, then SIGSEGV on the same node: cordoned
    for (const char* n : {"n0", "n1"}) Heartbeat(n, Json::array());
    api_.Tick();
    Json exit = {{"job", job_}, {"attempt", attempt}, {"rank", 0}, {"state", "exited"}};
    exit.update(Json{{"exit_code", nullptr}, {"signal", attempt == 1 ? 7 : 11}});
    Heartbeat(node, Json::array({exit}));
  }
  ASSERT_EQ(api_.Get("/v1/nodes/" + node).body["state"], "cordoned");
  check(6);
  check(7);
  EXPECT_EQ(api_.Get("/v1/nodes/" + node).body["state"], "cordoned");
  check(8);  // the third pass since the cordon
  EXPECT_TRUE(api_.Get("/v1/nodes/" + node).body["schedulable"].get<bool>());
}

}  // namespace
}  // namespace shepherd::testing
