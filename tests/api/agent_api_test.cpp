// The agent side of the API with simulated time: heartbeats and their validation, long-polled assignments
// and their env, node registration, and the forced restart. Faults and recovery: agent_faults_api_test.cpp.
#include <gtest/gtest.h>

#include "tests/api/agent_api_fixture.h"

namespace shepherd::testing {
namespace {

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
  for (std::size_t i = 0; i <= kMaxHeartbeatProcesses; ++i)
    many.push_back(entry({{"job", "x" + std::to_string(i)}}));
  ApiReply r = Heartbeat("n0", many);
  EXPECT_EQ(r.status, 422);
  ASSERT_EQ(r.body["errors"].size(), 1u) << r.body.dump().substr(0, 500);
  EXPECT_EQ(r.body["errors"][0]["field"], "processes");
  EXPECT_TRUE(api_.Get("/v1/nodes/n0").body["unknown_processes"].empty());
  many.erase(many.begin());  // at the bound: accepted, each unknown process tracked once
  EXPECT_EQ(Heartbeat("n0", many).status, 200);
  EXPECT_EQ(api_.Get("/v1/nodes/n0").body["unknown_processes"].size(), kMaxHeartbeatProcesses);
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
