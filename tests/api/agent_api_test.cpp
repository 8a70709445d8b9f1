// The agent side of the API with simulated time: heartbeats, long-polled assignments and their env, rank
// exits, GPU faults, node loss, the launch gate between attempts, and the forced restart.
#include <gtest/gtest.h>

#include <set>

#include "tests/api/api_harness.h"

namespace shepherd::testing {
namespace {

class AgentApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* n : {"n0", "n1", "sp0"}) {
      Json node = {{"id", n},
                   {"hostname", std::string("host-") + n},
                   {"gpus", 4},
                   {"topology", {{"spine", "s0"}, {"leaf", "l0"}}},
                   {"spare", std::string(n) == "sp0"}};
      ASSERT_EQ(api_.Post("/v1/nodes", node).status, 201);
      ASSERT_EQ(Heartbeat(n, Json::array()).status, 200);
    }
    Json job = Json::parse(R"({"name": "a", "model": {"parameters": 1e8, "layers": 4, "hidden": 512,
        "heads": 8, "seq_len": 512}, "training": {"global_batch_size": 32},
        "parallelism": {"tp": 1, "pp": 1, "dp": 8}, "resources": {"gpus": 8, "gpus_per_node": 4},
        "command": ["python3", "train.py"], "env": {"FOO": "bar"},
        "policy": {"startup_grace_s": 600, "restart_backoff_s": 0}})");
    ApiReply r = api_.Post("/v1/jobs", job);
    ASSERT_EQ(r.status, 201) << r.body.dump();
    job_ = r.body["id"];
  }

  ApiReply Heartbeat(const std::string& node, const Json& processes, const Json& faults = Json::array()) {
    return api_.Post("/v1/nodes/" + node + "/heartbeat", {{"processes", processes}, {"gpu_faults", faults}});
  }
  Json Running(const std::string& node, int attempt) {
    Json procs = Json::array(), assigned = Assignments(node);
    for (const Json& r : assigned["ranks"])
      if (r["attempt"] == attempt)
        procs.push_back({{"job", r["job"]},
                         {"attempt", attempt},
                         {"rank", r["rank"]},
                         {"pid", 1000 + r["rank"].get<int>()},
                         {"state", "running"}});
    return procs;
  }
  // A node's assignments are answered once its agent has heartbeated since the daemon started.
  Json Assignments(const std::string& node) {
    if (heard_.insert(node).second) Heartbeat(node, Json::array());
    return api_.Get("/v1/nodes/" + node + "/assignments?version=-1&wait=0&keep=1").body;
  }
  Json Job() { return api_.Get("/v1/jobs/" + job_).body; }

  ApiHarness api_;
  std::string job_;
  std::set<std::string> heard_;
};

TEST_F(AgentApiTest, AssignmentsCarryTheRankEnvironment) {
  Json a = Assignments("n0");
  ASSERT_EQ(a["ranks"].size(), 4u);
  EXPECT_GT(a["version"].get<int>(), 0);
  const Json& r = a["ranks"][1];
  EXPECT_EQ(r["command"], Json::array({"python3", "train.py"}));
  const Json& env = r["env"];
  EXPECT_EQ(env["RANK"], std::to_string(r["rank"].get<int>()));
  EXPECT_EQ(env["WORLD_SIZE"], "8");
  EXPECT_EQ(env["LOCAL_RANK"], "1");
  EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "4");
  // torchrun's convention: every local rank sees the node's GPUs of the job; LOCAL_RANK indexes into them.
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "0,1,2,3");
  EXPECT_EQ(r["gpu"], 1);
  EXPECT_EQ(env["SHEPHERD_JOB"], job_);
  EXPECT_EQ(env["SHEPHERD_ATTEMPT"], "1");
  EXPECT_EQ(env["SHEPHERD_RANK_COORDS"], "0,0," + env["RANK"].get<std::string>());  // tp,pp,dp with dp = rank
  EXPECT_EQ(env["SHEPHERD_RESUME_CHECKPOINT"], "");
  EXPECT_EQ(env["FOO"], "bar");
  Json placement = api_.Get("/v1/jobs/" + job_ + "/placement").body;
  EXPECT_EQ(env["MASTER_ADDR"], "host-" + placement["ranks"][0]["node"].get<std::string>());
  EXPECT_TRUE(Assignments("sp0")["ranks"].empty());  // spares get nothing at first placement
  EXPECT_EQ(api_.Get("/v1/nodes/nope/assignments").status, 404);
  EXPECT_EQ(api_.Post("/v1/nodes/nope/heartbeat", Json::object()).status, 404);
  EXPECT_TRUE(api_.Get("/v1/nodes/n0").body["agent_attached"].get<bool>());
}

TEST_F(AgentApiTest, MalformedHeartbeatIs422NamingEveryFieldAndChangesNothing) {
  ApiReply r = api_.Post("/v1/nodes/n0/heartbeat",
                         Json::parse(R"({"processes": [{"job": "j", "attempt": 1, "rank": "x", "state": 3}],
                                         "gpu_faults": [{"gpu": "two", "kind": "xid"}, 5]})"));
  ASSERT_EQ(r.status, 422) << r.body.dump();
  std::set<std::string> fields;
  for (const Json& e : r.body["errors"]) fields.insert(e["field"]);
  EXPECT_EQ(fields, (std::set<std::string>{"processes[0].rank", "processes[0].state", "gpu_faults[0].gpu",
                                           "gpu_faults[1]"}));
  EXPECT_EQ(api_.Get("/v1/failures").body["failures"].size(), 0u);
  EXPECT_EQ(api_.Post("/v1/nodes/n0/heartbeat", {{"processes", "none"}}).status, 422);
  EXPECT_EQ(api_.Post("/v1/nodes/n0/heartbeat", Json::parse(R"({"gpu_faults": [{"gpu": null}]})")).status,
            422);
  Json null_codes = Json::parse(R"({"processes": [{"job": "j", "attempt": 1, "rank": 0, "state": "exited",
                                                   "exit_code": null, "signal": null}]})");
  EXPECT_EQ(api_.Post("/v1/nodes/n0/heartbeat", null_codes).status, 200);  // unknown code: allowed
  EXPECT_EQ(Heartbeat("n0", Running("n0", 1)).status, 200);
}

// A process entry's identifiers reach logs and listings: a job id of the id alphabet, ranks and attempts of
// int32, a documented state. And one node's list is bounded, so its heartbeat cannot hold up the control
// thread (58,000 entries took 11 s of it before).
TEST_F(AgentApiTest, ProcessEntriesAreValidatedAndBounded) {
  auto entry = [](Json change) {
    Json p = {{"job", "job-000001"}, {"attempt", 1}, {"rank", 0}, {"state", "running"}};
    p.update(change);
    return p;
  };
  const std::vector<std::pair<Json, std::string>> bad = {
      {entry({{"job", "evil\n[info] forged line"}}), "processes[0].job"},
      {entry({{"job", std::string(129, 'j')}}), "processes[0].job"},
      {entry({{"job", ""}}), "processes[0].job"},
      {entry({{"rank", -1}}), "processes[0].rank"},
      {entry({{"rank", 2147483648LL}}), "processes[0].rank"},
      {entry({{"attempt", -2147483648LL}}), "processes[0].attempt"},
      {entry({{"pid", -1}}), "processes[0].pid"},
      {entry({{"state", "zombie"}}), "processes[0].state"},
      {entry({{"state", "exited"}, {"signal", 0}}), "processes[0].signal"},
      {entry({{"error", std::string(4097, 'e')}}), "processes[0].error"},
      {entry({{"flight_recorder", Json::array({{{"path", "a\u001b[2Jb"}}})}}),
       "processes[0].flight_recorder[0].path"},
  };
  for (const auto& [p, field] : bad) {
    ApiReply r = Heartbeat("n0", Json::array({p}));
    EXPECT_EQ(r.status, 422) << p.dump();
    ASSERT_EQ(r.body["errors"].size(), 1u) << p.dump() << r.body.dump();
    EXPECT_EQ(r.body["errors"][0]["field"], field) << p.dump();
  }
  Json many = Json::array();
  for (int i = 0; i < 4097; ++i) many.push_back(entry({{"job", "x" + std::to_string(i)}}));
  ApiReply r = Heartbeat("n0", many);
  EXPECT_EQ(r.status, 422);
  ASSERT_EQ(r.body["errors"].size(), 1u) << r.body.dump().substr(0, 500);
  EXPECT_EQ(r.body["errors"][0]["field"], "processes");
  EXPECT_TRUE(api_.Get("/v1/nodes/n0").body["unknown_processes"].empty());
  many.erase(many.begin());  // 4096: accepted, each unknown process tracked once
  EXPECT_EQ(Heartbeat("n0", many).status, 200);
  EXPECT_EQ(api_.Get("/v1/nodes/n0").body["unknown_processes"].size(), 4096u);
}

// A GPU fault names one of the node's GPUs (n0 has 4) and a documented kind; anything else is 422 naming the
// entry's field, and nothing is recorded.
// A fault names a GPU the node has; its kind and detail (the site probe's words) are printable and bounded.
TEST_F(AgentApiTest, GpuFaultsNameAGpuOfTheNodeAndPrintableWords) {
  const std::vector<std::pair<Json, std::string>> bad = {
      {{{"gpu", -1}, {"kind", "xid"}}, "gpu_faults[0].gpu"},
      {{{"gpu", 4}, {"kind", "xid"}}, "gpu_faults[0].gpu"},
      {{{"gpu", 99}, {"kind", "xid"}}, "gpu_faults[0].gpu"},
      {{{"gpu", 1099511627776LL}, {"kind", "xid"}}, "gpu_faults[0].gpu"},
      {{{"gpu", 18446744073709551615ULL}, {"kind", "xid"}}, "gpu_faults[0].gpu"},
      {{{"gpu", 1.0}, {"kind", "xid"}}, "gpu_faults[0].gpu"},
      {{{"kind", "xid"}}, "gpu_faults[0].gpu"},
      {{{"gpu", 1}, {"kind", ""}}, "gpu_faults[0].kind"},
      {{{"gpu", 1}, {"kind", "xid\n79"}}, "gpu_faults[0].kind"},
      {{{"gpu", 1}, {"kind", std::string(65, 'k')}}, "gpu_faults[0].kind"},
      {{{"gpu", 1}, {"kind", 7}}, "gpu_faults[0].kind"},
      {{{"gpu", 1}, {"detail", std::string(1025, 'd')}}, "gpu_faults[0].detail"},
      {{{"gpu", 1}, {"detail", std::string("a\0b", 3)}}, "gpu_faults[0].detail"},
  };
  for (const auto& [fault, field] : bad) {
    ApiReply r = Heartbeat("n0", Json::array(), Json::array({fault}));
    EXPECT_EQ(r.status, 422) << fault.dump();
    ASSERT_EQ(r.body["errors"].size(), 1u) << fault.dump() << r.body.dump();
    EXPECT_EQ(r.body["errors"][0]["field"], field) << fault.dump();
  }
  EXPECT_TRUE(api_.Get("/v1/failures?kind=gpu_fault").body["failures"].empty());
  EXPECT_NE(api_.Get("/v1/nodes/n0").body["state"], "failed");
  // The second entry is named by its index; a kind may be omitted ("fault").
  ApiReply r = Heartbeat("n0", Json::array(), Json::array({{{"gpu", 3}}, {{"gpu", 4}, {"kind", "nvlink"}}}));
  EXPECT_EQ(r.status, 422);
  EXPECT_EQ(r.body["errors"][0]["field"], "gpu_faults[1].gpu") << r.body.dump();
  EXPECT_EQ(api_.Post("/v1/nodes/nope/heartbeat", {{"gpu_faults", Json::array({{{"gpu", 0}}})}}).status, 404);
  EXPECT_EQ(Heartbeat("n0", Running("n0", 1), Json::array({{{"gpu", 3}}})).status, 200);
  Json f = api_.Get("/v1/failures?kind=gpu_fault").body["failures"];
  ASSERT_EQ(f.size(), 1u);
  EXPECT_NE(f[0]["detail"].get<std::string>().find("GPU 3 fault"), std::string::npos) << f[0].dump();
  // A kind of the site's own naming is taken as given.
  EXPECT_EQ(
      Heartbeat("n0", Running("n0", 1), Json::array({{{"gpu", 2}, {"kind", "ecc_dbe_volatile"}}})).status,
      200);
}

TEST_F(AgentApiTest, ReasonsAreBoundedAndRefuseControlCharacters) {
  const std::string long_reason(1025, 'r');
  for (const Json& reason : {Json(std::string("bad\0fan", 7)), Json("bad\nfan"), Json("\x1b[31mred"),
                             Json(long_reason), Json(3)}) {
    ApiReply patch = api_.Call("PATCH", "/v1/nodes/n1", {{"schedulable", false}, {"reason", reason}});
    EXPECT_EQ(patch.status, 422) << reason.dump().substr(0, 40);
    EXPECT_EQ(patch.body["errors"][0]["field"], "reason");
    ApiReply restart = api_.Post("/v1/jobs/" + job_ + "/restart", {{"from", "latest"}, {"reason", reason}});
    EXPECT_EQ(restart.status, 422) << reason.dump().substr(0, 40);
    EXPECT_EQ(restart.body["errors"][0]["field"], "reason");
  }
  EXPECT_TRUE(api_.Get("/v1/nodes/n1").body["schedulable"].get<bool>());
  EXPECT_TRUE(api_.Get("/v1/jobs/" + job_ + "/failures").body["failures"].empty());
  const std::string most(1024, 'r');
  EXPECT_EQ(api_.Call("PATCH", "/v1/nodes/n1", {{"schedulable", false}, {"reason", most}}).status, 200);
  EXPECT_EQ(api_.Get("/v1/nodes/n1").body["reason"], most);
}

TEST_F(AgentApiTest, AssignmentQueryValuesMustBeWholeNumbers) {
  for (const auto& [query, field] :
       std::vector<std::pair<std::string, std::string>>{{"version=abc&wait=0", "version"},
                                                        {"version=5x&wait=0", "version"},
                                                        {"version=1&wait=abc", "wait"},
                                                        {"version=1&wait=5s", "wait"},
                                                        {"version=1&wait=nan", "wait"},
                                                        {"version=1&wait=301", "wait"}}) {
    ApiReply r = api_.Get("/v1/nodes/n0/assignments?" + query);
    EXPECT_EQ(r.status, 422) << query;
    ASSERT_EQ(r.body["errors"].size(), 1u) << query << r.body.dump();
    EXPECT_EQ(r.body["errors"][0]["field"], field) << query;
  }
  EXPECT_EQ(api_.Get("/v1/nodes/n0/assignments?version=-1&wait=0").status, 200);
}

TEST_F(AgentApiTest, LongPollAnswersOnChangeOrAtItsDeadline) {
  int64_t version = Assignments("n0")["version"];
  auto answered = std::make_shared<int>(0);
  HttpRequest req;
  req.method = "GET";
  req.target = "/v1/nodes/n0/assignments?version=" + std::to_string(version) + "&wait=10";
  api_.router_.Handle(req, [answered](HttpResponse res) { *answered = res.status; });
  api_.Drain();
  EXPECT_EQ(*answered, 0);  // nothing changed: the poll waits
  api_.clock_.AdvanceSeconds(5);
  api_.Tick();
  EXPECT_EQ(*answered, 0);
  api_.clock_.AdvanceSeconds(6);
  Heartbeat("n0", Running("n0", 1));  // keep the agents alive across the wait
  Heartbeat("n1", Running("n1", 1));
  Heartbeat("sp0", Json::array());
  api_.Tick();
  EXPECT_EQ(*answered, 200);  // deadline passed: answered with the same version
  api_.router_.Handle(req, [answered](HttpResponse res) { *answered = -res.status; });
  api_.Post("/v1/jobs/" + job_ + "/cancel", Json::object());
  EXPECT_EQ(*answered, -200);  // the cancel changed n0's desired set: answered at once
  EXPECT_TRUE(Assignments("n0")["ranks"].empty());
}

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

// The agent says which exits its fence caused (the daemon's lease ran out): the finding says so, and the
// restart stays on the same nodes; after the daemon's own stall it spends no restart budget, however often
// the daemon stalls (two stalls failed a job with max_restarts 1). Without one (the agent's own network
// path) it does, which bounds a loop on a flaky link.
TEST_F(AgentApiTest, ExitsOfAnAgentsFenceAreRecordedAsSuchAndBlameNoNode) {
  for (int attempt = 1; attempt <= 3; ++attempt) {
    api_.clock_.AdvanceSeconds(100);
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

// An agent restarted without --gpu-model, --gpu-memory-gib or an nvlink_domain reset what the inventory
// said (GB200, 186 GiB, rack r1 became unknown, 80 GiB and the node's own domain): the planner then sized
// plans by whichever process registered last. A re-registration updates only what it names.
TEST_F(AgentApiTest, ARegistrationOfAKnownNodeKeepsWhatItDoesNotName) {
  Json full = {{"id", "n9"},
               {"hostname", "host-n9"},
               {"gpus", 4},
               {"gpu_model", "GB200"},
               {"gpu_memory_gib", 186},
               {"spare", true},
               {"topology", {{"spine", "s0"}, {"leaf", "l0"}, {"nvlink_domain", "r1"}}}};
  ASSERT_EQ(api_.Post("/v1/nodes", full).status, 201);
  Json agent = {
      {"id", "n9"}, {"hostname", "host-n9"}, {"gpus", 4}, {"topology", {{"spine", "s0"}, {"leaf", "l1"}}}};
  ApiReply r = api_.Post("/v1/nodes", agent);
  ASSERT_EQ(r.status, 200) << r.body.dump();
  EXPECT_EQ(r.body["gpu_model"], "GB200");
  EXPECT_EQ(r.body["gpu_memory_gib"], 186);
  EXPECT_EQ(r.body["spare"], true);
  EXPECT_EQ(r.body["topology"]["nvlink_domain"], "r1");
  EXPECT_EQ(r.body["topology"]["leaf"], "l1");  // what it names changes
  full["gpu_memory_gib"] = 192;
  full["spare"] = false;
  r = api_.Post("/v1/nodes", full);
  EXPECT_EQ(r.body["gpu_memory_gib"], 192);
  EXPECT_EQ(r.body["spare"], false);
}

TEST_F(AgentApiTest, ForcedRestartNeedsAQualifyingCheckpoint) {
  ApiReply none = api_.Post("/v1/jobs/" + job_ + "/restart", {{"from", "last-known-good"}});
  EXPECT_EQ(none.status, 409) << none.body.dump();
  EXPECT_EQ(api_.Post("/v1/jobs/" + job_ + "/restart", {{"form", "latest"}}).status, 422);
  // replace_nodes holds node ids: no control characters, nothing a node id cannot be.
  for (const char* bad : {"n1\n[error] forged log line", "", "../n1", "n1 n2"}) {
    ApiReply r = api_.Post("/v1/jobs/" + job_ + "/restart", {{"from", "latest"}, {"replace_nodes", {bad}}});
    EXPECT_EQ(r.status, 422) << bad;
    EXPECT_EQ(r.body["errors"][0]["field"], "replace_nodes") << r.body.dump();
  }
  Json ckpt = Json::array();
  for (int r = 0; r < 8; ++r)
    ckpt.push_back({{"rank", r}, {"attempt", 1}, {"kind", "checkpoint"}, {"step", 20}, {"path", "/c/20"}});
  ASSERT_EQ(api_.Post("/v1/jobs/" + job_ + "/reports", {{"reports", ckpt}}).status, 202);
  ApiReply r = api_.Post("/v1/jobs/" + job_ + "/restart", {{"from", "latest"}, {"reason", "new data"}});
  ASSERT_EQ(r.status, 202) << r.body.dump();
  EXPECT_EQ(r.body["attempt"], 2);
  EXPECT_EQ(r.body["checkpoint"]["step"], 20);
  EXPECT_EQ(Job()["current_attempt"]["resume_step"], 20);
  Json f = api_.Get("/v1/jobs/" + job_ + "/failures").body["failures"];
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0]["kind"], "restart_requested");
  EXPECT_EQ(f[0]["detail"], "new data (requested by anonymous)");
}

}  // namespace
}  // namespace shepherd::testing
