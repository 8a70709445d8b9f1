// The evidence agents attach to findings, through router + controller with simulated time: the end of a
// failed rank's log (`log_tail`) and PyTorch flight-recorder dumps, which join the process_exit finding of
// the exit that lists them and the latest hang finding of their attempt (docs/agent-protocol.md).
#include <gtest/gtest.h>

#include "tests/api/api_harness.h"

namespace shepherd::testing {
namespace {

// n0, n1 (4 GPUs each) and the spare sp0; a DP = 8 job, ranks 0-3 on n0 and 4-7 on n1.
class EvidenceApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* n : {"n0", "n1", "sp0"}) {
      Json node = {{"id", n},
                   {"gpus", 4},
                   {"topology", {{"spine", "s0"}, {"leaf", "l0"}}},
                   {"spare", std::string(n) == "sp0"}};
      ASSERT_EQ(api_.Post("/v1/nodes", node).status, 201);
    }
    Json job = Json::parse(R"({"name": "e", "model": {"parameters": 1e8, "layers": 4, "hidden": 512,
        "heads": 8, "seq_len": 512}, "training": {"global_batch_size": 32},
        "parallelism": {"tp": 1, "pp": 1, "dp": 8}, "resources": {"gpus": 8, "gpus_per_node": 4},
        "command": ["python3", "train.py"],
        "policy": {"startup_grace_s": 600, "restart_backoff_s": 0, "heartbeat_timeout_s": 10,
                   "hang_timeout_s": 60}})");
    ApiReply r = api_.Post("/v1/jobs", job);
    ASSERT_EQ(r.status, 201) << r.body.dump();
    job_ = r.body["id"];
  }

  ApiReply AgentHeartbeat(const std::string& node, const Json& processes) {
    return api_.Post("/v1/nodes/" + node + "/heartbeat",
                     {{"processes", processes}, {"gpu_faults", Json::array()}});
  }
  Json Process(int attempt, int rank, const Json& extra = Json::object()) {
    Json p = {{"job", job_}, {"attempt", attempt}, {"rank", rank}, {"pid", 100 + rank}, {"state", "running"}};
    p.update(extra);
    return p;
  }
  static Json Dump(const std::string& path, uint64_t size) { return {{"path", path}, {"size", size}}; }
  // Every agent reports its attempt-1 ranks running.
  void AgentsRunning() {
    for (const char* n : {"n0", "n1"}) {
      Json procs = Json::array();
      for (int r = 0; r < 4; ++r) procs.push_back(Process(1, std::string(n) == "n0" ? r : 4 + r));
      ASSERT_EQ(AgentHeartbeat(n, procs).status, 200);
    }
    ASSERT_EQ(AgentHeartbeat("sp0", Json::array()).status, 200);
  }
  std::vector<Json> OfKind(const std::string& kind) {
    Json all = api_.Get("/v1/failures?kind=" + kind + "&job=" + job_).body["failures"];
    return std::vector<Json>(all.begin(), all.end());
  }
  // After a first step (the startup grace ends), ranks 0-6 wait in DP all-reduce seq 5; rank 7 heartbeats
  // inside no collective: after the 60 s hang timeout rank 7 is the culprit. Agents heartbeat every
  // simulated second.
  void HangOnRank7() {
    Json steps = Json::array();
    for (int r = 0; r < 8; ++r) steps.push_back({{"rank", r}, {"attempt", 1}, {"kind", "step"}, {"step", 1}});
    ASSERT_EQ(api_.Post("/v1/jobs/" + job_ + "/reports", {{"reports", steps}}).status, 202);
    Json since = ToUnixSeconds(api_.clock_.Now());
    for (int s = 0; s < 65 && OfKind("hang").empty(); ++s) {
      Json batch = Json::array();
      for (int r = 0; r < 8; ++r) {
        Json hb = {{"rank", r}, {"attempt", 1}, {"kind", "heartbeat"}, {"step", 1}};
        if (r != 7) hb["collective"] = {{"seq", 5}, {"op", "all_reduce"}, {"group", "dp"}, {"since", since}};
        batch.push_back(hb);
      }
      ASSERT_EQ(api_.Post("/v1/jobs/" + job_ + "/reports", {{"reports", batch}}).status, 202);
      AgentsRunning();
      api_.clock_.AdvanceSeconds(1);
      api_.Tick();
    }
  }

  ApiHarness api_;
  std::string job_;
};

TEST_F(EvidenceApiTest, FlightRecorderDumpsOfTheHungAttemptJoinItsHangFinding) {
  AgentsRunning();
  // A dump listed before anything hung has no finding to join.
  Json early = Process(1, 0, {{"flight_recorder", Json::array({Dump("/fr/a1-r0/nccl_trace_rank_0", 10)})}});
  ASSERT_EQ(AgentHeartbeat("n0", Json::array({early})).status, 200);
  HangOnRank7();
  auto hangs = OfKind("hang");
  ASSERT_EQ(hangs.size(), 1u);
  EXPECT_EQ(hangs[0]["ranks"], Json::array({7}));
  EXPECT_FALSE(hangs[0].contains("flight_recorder"));
  EXPECT_EQ(api_.Get("/v1/jobs/" + job_).body["attempt"], 2);  // restarted off n1

  // The hung attempt's ranks are stopped: rank 7 exits (SIGTERM) with its dump, rank 0 still stops and
  // lists its dump, now grown. Reported twice: no duplicates.
  Json exit7 = Process(1, 7,
                       {{"state", "exited"},
                        {"exit_code", nullptr},
                        {"signal", 15},
                        {"flight_recorder", Json::array({Dump("/fr/a1-r7/nccl_trace_rank_7", 300)})}});
  Json stop0 = Process(1, 0, {{"flight_recorder", Json::array({Dump("/fr/a1-r0/nccl_trace_rank_0", 50)})}});
  for (int twice = 0; twice < 2; ++twice) {
    ASSERT_EQ(AgentHeartbeat("n1", Json::array({exit7})).status, 200);
    ASSERT_EQ(AgentHeartbeat("n0", Json::array({stop0})).status, 200);
  }
  hangs = OfKind("hang");
  ASSERT_EQ(hangs.size(), 1u);
  EXPECT_EQ(hangs[0]["flight_recorder"],
            Json::array({Dump("/fr/a1-r7/nccl_trace_rank_7", 300), Dump("/fr/a1-r0/nccl_trace_rank_0", 50)}));
  // The old attempt's exit is no finding of its own.
  EXPECT_TRUE(OfKind("process_exit").empty());
  // Dumps of attempt 2, which has not hung, join nothing.
  Json a2 = Process(2, 0, {{"flight_recorder", Json::array({Dump("/fr/a2-r0/nccl_trace_rank_0", 5)})}});
  ASSERT_EQ(AgentHeartbeat("n0", Json::array({a2})).status, 200);
  EXPECT_EQ(OfKind("hang")[0]["flight_recorder"].size(), 2u);
}

TEST_F(EvidenceApiTest, OnlyTheRanksOwnNodeAddsItsDumpsAtMostFourPerRank) {
  AgentsRunning();
  HangOnRank7();
  ASSERT_EQ(OfKind("hang").size(), 1u);
  // Rank 7 of the hung attempt ran on n1: neither the spare (now running attempt 2) nor n0 speaks for it.
  Json foreign = Process(1, 7, {{"flight_recorder", Json::array({Dump("/fr/forged", 1)})}});
  ASSERT_EQ(AgentHeartbeat("sp0", Json::array({foreign})).status, 200);
  ASSERT_EQ(AgentHeartbeat("n0", Json::array({foreign})).status, 200);
  EXPECT_FALSE(OfKind("hang")[0].contains("flight_recorder"));
  // n1 lists rank 7 twice, with six dumps each time: the first four are kept.
  Json dumps = Json::array();
  for (int d = 0; d < 6; ++d) dumps.push_back(Dump("/fr/a1-r7/trace_" + std::to_string(d), 1));
  Json p = Process(1, 7, {{"flight_recorder", dumps}});
  ASSERT_EQ(AgentHeartbeat("n1", Json::array({p, p})).status, 200);
  Json kept = OfKind("hang")[0]["flight_recorder"];
  ASSERT_EQ(kept.size(), 4u) << kept.dump();
  EXPECT_EQ(kept[3]["path"], "/fr/a1-r7/trace_3");
  // A dump already kept still has its size updated.
  Json grown = Process(1, 7, {{"flight_recorder", Json::array({Dump("/fr/a1-r7/trace_0", 99)})}});
  ASSERT_EQ(AgentHeartbeat("n1", Json::array({grown})).status, 200);
  EXPECT_EQ(OfKind("hang")[0]["flight_recorder"][0]["size"], 99);
}

TEST_F(EvidenceApiTest, AFailedExitCarriesTheLogTailAndItsDumps) {
  AgentsRunning();
  const std::string tail = "Traceback (most recent call last):\n  File \"train.py\", line 9\nValueError: bad";
  Json exited = Process(1, 2,
                        {{"state", "exited"},
                         {"exit_code", 1},
                         {"signal", nullptr},
                         {"log_tail", tail},
                         {"flight_recorder", Json::array({Dump("/fr/a1-r2/nccl_trace_rank_2", 7)})}});
  ASSERT_EQ(AgentHeartbeat("n0", Json::array({exited})).status, 200);
  auto exits = OfKind("process_exit");
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0]["exit_code"], 1);
  EXPECT_EQ(exits[0]["log_tail"], tail);
  EXPECT_EQ(exits[0]["flight_recorder"], Json::array({Dump("/fr/a1-r2/nccl_trace_rank_2", 7)}));
}

// Findings are readable by any viewer: a credential a rank printed (another job's token read from
// /proc/*/environ) or a dump path naming one is redacted before the daemon stores it, whatever the agent did.
TEST_F(EvidenceApiTest, TokensInAnExitsTextNeverReachTheFinding) {
  AgentsRunning();
  const std::string token(64, 'c');
  Json exited = Process(1, 2,
                        {{"state", "exited"},
                         {"exit_code", 1},
                         {"signal", nullptr},
                         {"error", "spawn: Bearer " + token},
                         {"log_tail", "stolen SHEPHERD_TOKEN=Zm9vYmFyYmF6cXV4eHl6\nalso " + token},
                         {"flight_recorder", Json::array({Dump("/fr/" + token + "/nccl_trace_rank_2", 7)})}});
  ASSERT_EQ(AgentHeartbeat("n0", Json::array({exited})).status, 200);
  auto exits = OfKind("process_exit");
  ASSERT_EQ(exits.size(), 1u);
  const std::string text = exits[0].dump();
  EXPECT_EQ(text.find(token), std::string::npos) << text;
  EXPECT_EQ(text.find("Zm9vYmFyYmF6cXV4eHl6"), std::string::npos) << text;
  EXPECT_EQ(exits[0]["log_tail"], "stolen SHEPHERD_TOKEN=[redacted]\nalso [redacted]");
  EXPECT_EQ(exits[0]["flight_recorder"], Json::array({Dump("/fr/[redacted]/nccl_trace_rank_2", 7)}));
}

TEST_F(EvidenceApiTest, MalformedEvidenceIs422NamingTheField) {
  Json bad = Json::array({Process(1, 0, {{"log_tail", 5}}),
                          Process(1, 1, {{"flight_recorder", Json::array({Json{{"size", 1}}, Json(3)})}}),
                          Process(1, 2, {{"flight_recorder", "x"}}),
                          Process(1, 3, {{"log_tail", std::string(16385, 'x')}})});
  ApiReply r = AgentHeartbeat("n0", bad);
  ASSERT_EQ(r.status, 422) << r.body.dump();
  std::set<std::string> fields;
  for (const Json& e : r.body["errors"]) fields.insert(e["field"]);
  EXPECT_EQ(fields, (std::set<std::string>{"processes[0].log_tail", "processes[1].flight_recorder[0].path",
                                           "processes[1].flight_recorder[1]", "processes[2].flight_recorder",
                                           "processes[3].log_tail"}));
  EXPECT_EQ(api_.Get("/v1/jobs/" + job_).body["state"], "launching") << "nothing changed";
}

}  // namespace
}  // namespace shepherd::testing
