// Startup safety on the real daemon: its own stall blames no node, the --db directory must exist,
// assignment versions grow across restarts, an undecodable record is named and --salvage moves it aside.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/json.h"
#include "tests/integration/harness.h"

namespace shepherd::testing {
namespace {

using namespace std::chrono_literals;

Json J(const HttpResult& r) {
  return Json::parse(r.body.empty() ? "null" : r.body);
}

std::string NodeBody(const std::string& id) {
  return Json{{"id", id}, {"gpus", 8}, {"topology", {{"spine", "s0"}, {"leaf", "l0"}}}}.dump();
}

std::string JobBody() {
  return Json{
      {"name", "t"},
      {"model", {{"parameters", 1e9}, {"layers", 8}, {"hidden", 1024}, {"heads", 8}, {"seq_len", 1024}}},
      {"training", {{"global_batch_size", 64}}},
      {"parallelism", {{"tp", 8}, {"pp", 1}, {"dp", 1}}},
      {"resources", {{"gpus", 8}}},
      {"command", {"python3", "train.py"}}}
      .dump();
}

std::string Sql(const std::string& db, const std::string& sql) {
  std::string cmd = "sqlite3 '" + db + "' \"" + sql + "\" 2>&1";
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[512];
    while (size_t n = std::fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
    ::pclose(p);
  }
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

TEST(StartupSafety, AMissingDbDirectoryIsRefusedNamingIt) {
  TempDir dir;
  const std::string missing = dir.path + "/not-mounted";
  Daemon d(dir.path, {"--db", missing + "/shepherd.db"});
  EXPECT_FALSE(d.WaitReady(20s));
  auto code = d.Wait();
  ASSERT_TRUE(code.has_value());
  EXPECT_NE(*code, 0);
  EXPECT_NE(d.log().find(missing), std::string::npos) << d.log();
  EXPECT_FALSE(std::filesystem::exists(missing));
}

TEST(StartupSafety, AssignmentVersionsGrowAcrossRestarts) {
  TempDir dir;
  int64_t before = 0;
  {
    Daemon d(dir.path);
    ASSERT_TRUE(d.WaitReady()) << d.log();
    ASSERT_EQ(Http(d.port(), "POST", "/v1/nodes", NodeBody("n1")).status, 201);
    ASSERT_EQ(Http(d.port(), "POST", "/v1/jobs", JobBody()).status, 201);
    ASSERT_EQ(Http(d.port(), "POST", "/v1/nodes/n1/heartbeat", "{}").status, 200);  // assignments follow it
    before = J(Http(d.port(), "GET", "/v1/nodes/n1/assignments?version=-1&wait=0"))["version"];
    EXPECT_GT(before, 0);
    d.Signal(SIGTERM);
    ASSERT_EQ(d.Wait(), 0);
  }
  Daemon d(dir.path);
  ASSERT_TRUE(d.WaitReady()) << d.log();
  ASSERT_EQ(Http(d.port(), "POST", "/v1/nodes/n1/heartbeat", "{}").status, 200);
  Json a = J(Http(d.port(), "GET", "/v1/nodes/n1/assignments?version=-1&wait=0"));
  EXPECT_GT(a["version"].get<int64_t>(), before);
  EXPECT_EQ(a["ranks"].size(), 8u);  // the same desired set, under a version the agent has never seen
}

TEST(StartupSafety, AnUndecodableRecordIsNamedAndSalvageMovesItAside) {
  TempDir dir;
  const std::string db = dir.path + "/shepherd.db";
  {
    Daemon d(dir.path);
    ASSERT_TRUE(d.WaitReady()) << d.log();
    ASSERT_EQ(Http(d.port(), "POST", "/v1/nodes", NodeBody("n1")).status, 201);
    ASSERT_EQ(Http(d.port(), "POST", "/v1/nodes", NodeBody("n2")).status, 201);
    d.Signal(SIGTERM);
    ASSERT_EQ(d.Wait(), 0);
  }
  ASSERT_EQ(Sql(db, "UPDATE records SET body = '{\\\"id\\\": 7' WHERE collection = 'nodes' AND key = 'n2'"),
            "");
  {
    Daemon d(dir.path);
    EXPECT_FALSE(d.WaitReady(20s));
    auto code = d.Wait();
    ASSERT_TRUE(code.has_value());
    EXPECT_NE(*code, 0);
    EXPECT_NE(d.log().find("record nodes/n2 cannot be decoded"), std::string::npos) << d.log();
    EXPECT_NE(d.log().find("--salvage"), std::string::npos) << d.log();
  }
  EXPECT_EQ(Sql(db, "SELECT count(*) FROM records WHERE collection = 'nodes'"), "2");  // nothing touched
  Daemon d(dir.path, {"--salvage"});
  ASSERT_TRUE(d.WaitReady()) << d.log();
  EXPECT_EQ(Http(d.port(), "GET", "/v1/nodes/n1").status, 200);
  EXPECT_EQ(Http(d.port(), "GET", "/v1/nodes/n2").status, 404);
  d.Signal(SIGTERM);
  ASSERT_EQ(d.Wait(), 0);
  EXPECT_EQ(Sql(db, "SELECT collection || '/' || key || ' ' || body FROM records_quarantine"),
            "nodes/n2 {\"id\": 7");
}

// A lease the agents cannot keep (they SIGTERM 2 s before its end and heartbeat every second) would fence
// every healthy agent: refused at start, naming the field.
TEST(StartupSafety, ALeaseTooShortForHealthyAgentsIsRefused) {
  TempDir dir;
  const std::string config = dir.path + "/config.json";
  std::ofstream(config) << R"({"agent_lease_s": 2})";
  Daemon d(dir.path, {"--config", config});
  EXPECT_FALSE(d.WaitReady(20s));
  auto code = d.Wait();
  ASSERT_TRUE(code.has_value());
  EXPECT_NE(*code, 0);
  EXPECT_NE(d.log().find("agent_lease_s"), std::string::npos) << d.log();
  EXPECT_NE(d.log().find("agent_lease_s must be between 3"), std::string::npos) << d.log();
}

// SIGSTOP of the daemon for longer than the node timeout: after SIGCONT no finding, no cordon, no restart.
// A node that then stays silent while the daemon listens is still found (the test can see a finding).
TEST(SelfAwareness, ADaemonStallBlamesNoNode) {
  TempDir dir;
  const std::string config = dir.path + "/config.json";
  std::ofstream(config)
      << R"({"node_heartbeat_timeout_s": 2, "tick_interval_s": 0.2, "lateness_threshold_s": 0.5})";
  Daemon d(dir.path, {"--config", config});
  ASSERT_TRUE(d.WaitReady()) << d.log();
  const int port = d.port();
  ASSERT_EQ(Http(port, "POST", "/v1/nodes", NodeBody("n1")).status, 201);
  HttpResult job = Http(port, "POST", "/v1/jobs", JobBody());
  ASSERT_EQ(job.status, 201) << job.body;
  const std::string id = J(job)["id"];
  Json running = Json::array();
  for (int r = 0; r < 8; ++r)
    running.push_back({{"job", id}, {"attempt", 1}, {"rank", r}, {"pid", 1000 + r}, {"state", "running"}});
  const std::string hb = Json{
      {"agent", {{"pid", 1}, {"started_at", "2026-11-21T07:00:00.000Z"}}},
      {"processes", running}}.dump();
  std::atomic<bool> beating{true}, stop{false};
  std::thread agent([&] {  // n1's agent: a heartbeat every 200 ms while `beating`
    while (!stop) {
      if (beating) Http(port, "POST", "/v1/nodes/n1/heartbeat", hb);
      std::this_thread::sleep_for(200ms);
    }
  });
  ASSERT_TRUE(Eventually([&] { return J(Http(port, "GET", "/v1/jobs/" + id))["state"] == "running"; }));
  const double stalls_before = Metric(port, "shepherd_stalls_total");

  d.Signal(SIGSTOP);
  std::this_thread::sleep_for(3500ms);  // the stall itself (longer than the 2 s node timeout)
  d.Signal(SIGCONT);
  // Bounded wait until the daemon has listened, healthy, for two full windows since the stall.
  ASSERT_TRUE(Eventually([&] { return Metric(port, "shepherd_stalls_total") > stalls_before; }));
  ASSERT_TRUE(Eventually([&] { return Metric(port, "shepherd_listening_seconds") > 4; }));
  EXPECT_EQ(J(Http(port, "GET", "/v1/failures"))["failures"].size(), 0u)
      << Http(port, "GET", "/v1/failures").body;
  EXPECT_EQ(J(Http(port, "GET", "/v1/nodes/n1"))["state"], "allocated");
  Json j = J(Http(port, "GET", "/v1/jobs/" + id));
  EXPECT_EQ(j["attempt"], 1);
  EXPECT_EQ(j["state"], "running");

  beating = false;  // now n1 really goes silent while the daemon listens
  EXPECT_TRUE(Eventually([&] {
    Json f = J(Http(port, "GET", "/v1/failures"));
    return f["failures"].size() == 1 && f["failures"][0]["kind"] == "node_lost";
  }));
  stop = true;
  agent.join();
}

}  // namespace
// A fleet operator's daemon would not start again with an inventory file that changed a node its ranks
// ran on (exit 1, so every agent's lease ran out and the fleet's ranks were stopped), nor with the unchanged
// file once a spare ran ranks. The node keeps its stored record, named in the log; the rest of the file
// applies.
TEST(StartupSafety, AnInventoryFileChangingABusyNodeKeepsItAsStoredAndStarts) {
  TempDir dir;
  const std::string inv = dir.path + "/inventory.json";
  auto write = [&](int n0_gpus, bool with_n1) {
    Json nodes = Json::array(
        {{{"id", "n0"}, {"gpus", n0_gpus}, {"topology", {{"spine", "s0"}, {"leaf", "l0"}}}},
         {{"id", "sp0"}, {"gpus", 8}, {"spare", true}, {"topology", {{"spine", "s0"}, {"leaf", "l0"}}}}});
    if (with_n1)
      nodes.push_back({{"id", "n1"}, {"gpus", 8}, {"topology", {{"spine", "s0"}, {"leaf", "l1"}}}});
    std::ofstream(inv) << Json{{"nodes", nodes}}.dump();
  };
  write(8, false);
  {
    Daemon d(dir.path, {"--inventory", inv});
    ASSERT_TRUE(d.WaitReady()) << d.log();
    HttpResult job = Http(d.port(), "POST", "/v1/jobs", JobBody());
    ASSERT_EQ(job.status, 201) << job.body;
    ASSERT_EQ(J(Http(d.port(), "GET", "/v1/nodes/n0"))["state"], "allocated");
    d.Signal(SIGTERM);
    ASSERT_EQ(d.Wait(), 0);
  }
  write(4, true);  // n0 shrinks under its ranks; n1 is new
  Daemon d(dir.path, {"--inventory", inv});
  ASSERT_TRUE(d.WaitReady()) << d.log();
  EXPECT_EQ(J(Http(d.port(), "GET", "/v1/nodes/n0"))["gpus"], 8);
  EXPECT_EQ(Http(d.port(), "GET", "/v1/nodes/n1").status, 200);
  EXPECT_NE(d.log().find("node n0 kept as stored"), std::string::npos) << d.log();
}

// A typo in the inventory file (an unknown topology level, a string GPU count) made the daemon exit 1 on
// its next restart: every agent's lease ran out and every job of the fleet was stopped. With nodes stored,
// the file not loading is an error in the log and the stored inventory stays as it was; a first start (no
// stored nodes) still refuses it.
TEST(StartupSafety, AnInventoryFileThatDoesNotLoadKeepsTheStoredInventory) {
  TempDir dir;
  const std::string inv = dir.path + "/inventory.json";
  std::ofstream(inv) << R"({"nodes": [{"id": "n0", "gpus": 8, "topology": {"spine": "s0", "leaf": "l0"}}]})";
  {
    Daemon d(dir.path, {"--inventory", inv});
    ASSERT_TRUE(d.WaitReady()) << d.log();
    ASSERT_EQ(Http(d.port(), "POST", "/v1/jobs", JobBody()).status, 201);
    d.Signal(SIGTERM);
    ASSERT_EQ(d.Wait(), 0);
  }
  std::ofstream(inv)
      << R"({"nodes": [{"id": "n0", "gpus": "8", "topology": {"spine": "s0", "rack": "r1"}}]})";
  {
    Daemon d(dir.path, {"--inventory", inv});
    ASSERT_TRUE(d.WaitReady()) << d.log();
    Json n0 = J(Http(d.port(), "GET", "/v1/nodes/n0"));
    EXPECT_EQ(n0["state"], "allocated") << n0.dump();
    EXPECT_EQ(n0["topology"]["leaf"], "l0");
    EXPECT_NE(d.log().find("not applied, the 1 stored nodes kept as they are"), std::string::npos) << d.log();
    d.Signal(SIGTERM);
    ASSERT_EQ(d.Wait(), 0);
  }
  TempDir first;
  Daemon fresh(first.path, {"--inventory", inv});
  EXPECT_FALSE(fresh.WaitReady(20s));
  EXPECT_EQ(fresh.Wait(), 1);
  EXPECT_NE(fresh.log().find("rack"), std::string::npos) << fresh.log();
}

// `shepherdd gen-inventory` writes "schedulable": true into every node, and the file is re-applied at every
// start: a tester's node cordoned for bad ECC was schedulable again after a daemon restart. A registration
// never lifts a cordon; PATCH does.
TEST(StartupSafety, ARestartWithTheInventoryFileKeepsACordon) {
  TempDir dir;
  const std::string inv = dir.path + "/inventory.json";
  std::ofstream(inv) << R"({"nodes": [{"id": "n0", "gpus": 8, "schedulable": true,
      "topology": {"spine": "s0", "leaf": "l0"}}]})";
  {
    Daemon d(dir.path, {"--inventory", inv});
    ASSERT_TRUE(d.WaitReady()) << d.log();
    HttpResult cordon =
        Http(d.port(), "PATCH", "/v1/nodes/n0", R"({"schedulable": false, "reason": "bad ECC"})");
    ASSERT_EQ(cordon.status, 200) << cordon.body;
    d.Signal(SIGTERM);
    ASSERT_EQ(d.Wait(), 0);
  }
  Daemon d(dir.path, {"--inventory", inv});
  ASSERT_TRUE(d.WaitReady()) << d.log();
  Json n0 = J(Http(d.port(), "GET", "/v1/nodes/n0"));
  EXPECT_EQ(n0["state"], "cordoned") << n0.dump();
  EXPECT_EQ(n0["schedulable"], false);
  EXPECT_EQ(n0["reason"], "bad ECC");
  EXPECT_EQ(Http(d.port(), "PATCH", "/v1/nodes/n0", R"({"schedulable": true})").status, 200);
  EXPECT_EQ(J(Http(d.port(), "GET", "/v1/nodes/n0"))["state"], "available");
}

}  // namespace shepherd::testing
