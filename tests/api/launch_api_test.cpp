// Honest launch state through the API with simulated time: a job is running only once its ranks were
// launched; ranks never launched are never lost, blamed or restarted; a launch that no agent takes is
// re-placed onto nodes with live agents, or waits, saying why.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "tests/api/api_harness.h"

namespace shepherd::testing {
namespace {

class LaunchApiTest : public ::testing::Test {
 protected:
  ApiReply AddNode(const std::string& id, bool spare = false) {
    return api_.Post("/v1/nodes", {{"id", id},
                                   {"hostname", id},
                                   {"gpus", 4},
                                   {"topology", {{"spine", "s0"}, {"leaf", "l0"}}},
                                   {"spare", spare}});
  }
  ApiReply Heartbeat(const std::string& node, const Json& processes = Json::array()) {
    return api_.Post("/v1/nodes/" + node + "/heartbeat",
                     {{"processes", processes}, {"gpu_faults", Json::array()}});
  }
  // The processes the node's agent runs: every rank assigned to it, all running.
  Json Running(const std::string& node) {
    Json procs = Json::array();
    if (heard_.insert(node).second) Heartbeat(node);  // assignments follow the node's first heartbeat
    const Json assigned = api_.Get("/v1/nodes/" + node + "/assignments?version=-1&wait=0&keep=1").body;
    for (const Json& r : assigned["ranks"])
      procs.push_back(
          {{"job", r["job"]}, {"attempt", r["attempt"]}, {"rank", r["rank"]}, {"state", "running"}});
    return procs;
  }
  std::string Submit(int gpus, int gpus_per_node = 4) {
    Json job = {
        {"name", "l"},
        {"model", {{"parameters", 1e8}, {"layers", 4}, {"hidden", 512}, {"heads", 8}, {"seq_len", 512}}},
        {"training", {{"global_batch_size", 32}}},
        {"parallelism", {{"tp", 1}, {"pp", 1}, {"dp", gpus}}},
        {"resources", {{"gpus", gpus}, {"gpus_per_node", gpus_per_node}}},
        {"command", {"python3", "train.py"}},
        {"policy", {{"heartbeat_timeout_s", 10}, {"startup_grace_s", 30}, {"launch_timeout_s", 60}}}};
    ApiReply r = api_.Post("/v1/jobs", job);
    EXPECT_EQ(r.status, 201) << r.body.dump();
    return r.body["id"];
  }
  Json Job(const std::string& id) { return api_.Get("/v1/jobs/" + id).body; }
  // `seconds` simulated seconds, ticking each second; `beat` nodes' agents heartbeat every second.
  void Run(int seconds, const std::vector<std::string>& beat = {}) {
    for (int i = 0; i < seconds; ++i) {
      for (const std::string& n : beat) ASSERT_EQ(Heartbeat(n, Running(n)).status, 200);
      api_.clock_.AdvanceSeconds(1);
      api_.Tick();
    }
  }

  ApiHarness api_;
  std::set<std::string> heard_;  // nodes that heartbeated
};

TEST_F(LaunchApiTest, WithoutAgentsNothingIsLaunchedJudgedOrBlamedHoweverLong) {
  // The README tour: a demo inventory, no agents, a job with a command.
  for (const char* n : {"n0", "n1"}) ASSERT_EQ(AddNode(n).status, 201);
  ASSERT_EQ(AddNode("sp0", /*spare=*/true).status, 201);
  std::string job = Submit(8);
  Json j = Job(job);
  EXPECT_EQ(j["state"], "launching");
  EXPECT_EQ(j["plan"]["pipeline_layers"], Json::array({4}));  // always listed, here the default: 4 layers
  EXPECT_EQ(j["launch"]["status"], "waiting_for_agents");
  EXPECT_EQ(j["launch"]["nodes_without_agent"], Json::array({"n0", "n1"}));
  Run(600);  // ten minutes
  EXPECT_TRUE(api_.Get("/v1/failures").body["failures"].empty());
  for (const char* n : {"n0", "n1", "sp0"}) {
    Json node = api_.Get(std::string("/v1/nodes/") + n).body;
    EXPECT_TRUE(node["schedulable"].get<bool>()) << n;
    EXPECT_FALSE(node["failed"].get<bool>()) << n;
  }
  j = Job(job);
  EXPECT_EQ(j["state"], "launching");
  EXPECT_EQ(j["attempt"], 1);
  EXPECT_EQ(j["restarts"], 0);
  EXPECT_NE(j["reason"].get<std::string>().find("waiting for agents"), std::string::npos) << j["reason"];
}

TEST_F(LaunchApiTest, RunningOnlyOnceEveryNodesAgentStartedItsRanks) {
  for (const char* n : {"n0", "n1"}) {
    ASSERT_EQ(AddNode(n).status, 201);
    ASSERT_EQ(Heartbeat(n).status, 200);
  }
  std::string job = Submit(8);
  EXPECT_EQ(Job(job)["launch"]["status"], "starting");
  ASSERT_EQ(Heartbeat("n0", Running("n0")).status, 200);
  Json j = Job(job);
  EXPECT_EQ(j["state"], "launching");
  EXPECT_EQ(j["launch"]["nodes_waiting"], Json::array({"n1"}));
  ASSERT_EQ(Heartbeat("n1", Running("n1")).status, 200);
  j = Job(job);
  EXPECT_EQ(j["state"], "running");
  EXPECT_EQ(j["launch"]["status"], "launched");
  // From now on the ranks are judged: silent ranks are lost after the startup grace (30 s) from launch.
  Run(29, {"n0", "n1"});
  EXPECT_TRUE(api_.Get("/v1/failures?kind=heartbeat_lost").body["failures"].empty());
  Run(3, {"n0", "n1"});
  EXPECT_EQ(api_.Get("/v1/failures?kind=heartbeat_lost").body["failures"].size(), 1u);
}

TEST_F(LaunchApiTest, RanksOfALaunchedNodeReportingDoNotArmAJobWhoseOtherNodeNeverStarted) {
  ASSERT_EQ(AddNode("n0").status, 201);
  ASSERT_EQ(Heartbeat("n0").status, 200);
  ASSERT_EQ(AddNode("n1").status, 201);  // no agent: its ranks never start
  std::string job = Submit(8);
  for (int s = 0; s < 200; ++s) {
    Json reports = Json::array();
    for (const Json& p : Running("n0"))
      reports.push_back({{"rank", p["rank"]}, {"attempt", 1}, {"kind", "heartbeat"}});
    ASSERT_EQ(api_.Post("/v1/jobs/" + job + "/reports", {{"reports", reports}}).status, 202);
    Run(1, {"n0"});
  }
  EXPECT_TRUE(api_.Get("/v1/failures").body["failures"].empty()) << api_.Get("/v1/failures").body.dump();
  EXPECT_EQ(Job(job)["state"], "launching");
  EXPECT_TRUE(api_.Get("/v1/nodes/n1").body["schedulable"].get<bool>());
}

TEST_F(LaunchApiTest, LaunchTimeoutReplacesOntoNodesWithLiveAgentsWithoutBlameOrRestartCount) {
  ASSERT_EQ(AddNode("n1").status, 201);  // no agent
  std::string job = Submit(4);
  EXPECT_EQ(api_.Get("/v1/jobs/" + job + "/placement").body["ranks"][0]["node"], "n1");
  ASSERT_EQ(AddNode("n0").status, 201);
  Run(59, {"n0"});
  EXPECT_EQ(Job(job)["attempt"], 1);
  Run(3, {"n0"});  // past the 60 s launch timeout: re-placed on n0, whose agent then starts the ranks
  Json j = Job(job);
  EXPECT_EQ(j["attempt"], 2);
  EXPECT_EQ(j["state"], "running");
  EXPECT_EQ(j["restarts"], 0);
  EXPECT_NE(j["current_attempt"]["reason"].get<std::string>().find("launch timeout"), std::string::npos);
  EXPECT_EQ(api_.Get("/v1/jobs/" + job + "/placement").body["ranks"][0]["node"], "n0");
  EXPECT_TRUE(api_.Get("/v1/failures").body["failures"].empty());
  EXPECT_TRUE(api_.Get("/v1/nodes/n1").body["schedulable"].get<bool>());
}

// Who launches a job is named in every job answer: the submit answer, GET and the list, for each mode. The
// launch's progress (status, nodes) stays beside it.
TEST(LaunchModeApi, EveryJobAnswerNamesItsLaunchMode) {
  ControllerOptions o;
  o.slurm = true;  // a daemon started with --slurm, so "launcher": "slurm" is taken
  ApiHarness api(o);
  for (const char* n : {"n0", "n1"})
    ASSERT_EQ(
        api.Post("/v1/nodes",
                 {{"id", n}, {"hostname", n}, {"gpus", 4}, {"topology", {{"spine", "s0"}, {"leaf", "l0"}}}})
            .status,
        201);
  auto body = [](const char* name) {
    return Json{
        {"name", name},
        {"model", {{"parameters", 1e8}, {"layers", 4}, {"hidden", 512}, {"heads", 8}, {"seq_len", 512}}},
        {"training", {{"global_batch_size", 32}}},
        {"parallelism", {{"tp", 1}, {"pp", 1}, {"dp", 4}}},
        {"resources", {{"gpus", 4}, {"gpus_per_node", 4}, {"spare_nodes", 0}}}};
  };
  Json agents = body("a");
  agents["command"] = {"python3", "train.py"};
  Json slurm = body("s");
  slurm["command"] = {"python3", "train.py"};
  slurm["launcher"] = "slurm";
  Json external = body("e");
  const std::pair<Json, std::string> cases[] = {{agents, "agents"}, {slurm, "slurm"}, {external, "external"}};
  std::map<std::string, std::string> mode_of;
  for (const auto& [job, mode] : cases) {
    ApiReply r = api.Post("/v1/jobs", job);
    ASSERT_EQ(r.status, 201) << r.body.dump();
    EXPECT_EQ(r.body["launch"]["mode"], mode) << r.body.dump();
    const std::string id = r.body["id"];
    EXPECT_EQ(api.Get("/v1/jobs/" + id).body["launch"]["mode"], mode);
    mode_of[id] = mode;
  }
  // The agents' job waits for agents: its progress is shown with the mode.
  Json a = api.Get("/v1/jobs/" + mode_of.begin()->first).body;
  EXPECT_EQ(a["launch"]["mode"], "agents");
  EXPECT_EQ(a["launch"]["status"], "waiting_for_agents");
  const Json list = api.Get("/v1/jobs").body;
  ASSERT_EQ(list["jobs"].size(), 3u) << list.dump();
  for (const Json& j : list["jobs"]) EXPECT_EQ(j["launch"]["mode"], mode_of.at(j["id"])) << j.dump();
}

}  // namespace
}  // namespace shepherd::testing
