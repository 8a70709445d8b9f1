// The real shepherdd binary with --slurm against the real local Slurm cluster (tests/slurm/local_cluster.h):
// the inventory is imported from Slurm, Slurm's drains show up in Shepherd, and Shepherd's own cordons are
// drained in Slurm with a reason naming them; Shepherd never resumes a node an operator drained. Runs in the
// slurm_cluster_test binary (one cluster for all), after cluster_test.cpp; it leaves every node resumed.
#include <gtest/gtest.h>

#include <fstream>

#include "core/child_process.h"
#include "core/json.h"
#include "slurm/subprocess.h"
#include "tests/integration/harness.h"
#include "tests/slurm/local_cluster.h"

namespace shepherd::slurm {
namespace {

using ::shepherd::testing::Daemon;
using ::shepherd::testing::Http;
using ::shepherd::testing::TempDir;
using std::chrono::seconds;
using testing::LocalCluster;
using testing::WaitFor;

#define REQUIRE_CLUSTER()                                              \
  if (!LocalCluster::unavailable_reason().empty())                     \
    GTEST_SKIP() << "skipped: " << LocalCluster::unavailable_reason(); \
  ASSERT_TRUE(LocalCluster::start_error().empty()) << LocalCluster::start_error()

Json NodeOf(int port, const std::string& id) {
  auto r = Http(port, "GET", "/v1/nodes/" + id);
  return r.status == 200 ? Json::parse(r.body) : Json::object();
}

std::string SlurmReason(const std::string& node) {
  return LocalCluster::Sh({"sinfo", "-n", node, "-h", "-o", "%E"});
}
std::string SlurmState(const std::string& node) {
  return LocalCluster::Sh({"sinfo", "-n", node, "-h", "-o", "%T"});
}

// shepherdd --slurm with a short reconcile interval, its database in a fresh directory.
struct SlurmDaemon {
  TempDir dir;
  std::unique_ptr<Daemon> daemon;
  explicit SlurmDaemon(double tick_interval_s = 1) {
    std::ofstream(dir.path + "/config.json") << Json{
        {"slurm", {{"slurm_conf", LocalCluster::slurm_conf()}, {"reconcile_interval_s", 0.3}}},
        {"tick_interval_s", tick_interval_s}}.dump();
    daemon =
        std::make_unique<Daemon>(dir.path, std::vector<std::string>{"--config", dir.path + "/config.json"});
  }
  int port() const { return daemon->port(); }
};

TEST(SlurmDaemon, ImportsTheInventoryAndFollowsDrains) {
  REQUIRE_CLUSTER();
  SlurmDaemon d;
  ASSERT_TRUE(d.daemon->WaitReady()) << d.daemon->log();
  // Imported: five nodes with the Gres' two GPUs, CPUs' host, and the switch tree as spine/leaf.
  ASSERT_TRUE(WaitFor(seconds(30), [&] {
    auto r = Http(d.port(), "GET", "/v1/nodes");
    return r.status == 200 && Json::parse(r.body)["nodes"].size() == 5;
  })) << d.daemon->log();
  for (const char* id : {"n0", "n1", "n2", "n3", "n4"}) {
    Json n = NodeOf(d.port(), id);
    EXPECT_EQ(n["gpus"], 2) << n.dump();
    EXPECT_EQ(n["topology"]["spine"], "s0") << n.dump();
    EXPECT_EQ(n["state"], "available") << n.dump();
  }
  EXPECT_EQ(NodeOf(d.port(), "n0")["topology"]["leaf"], "l0");
  EXPECT_EQ(NodeOf(d.port(), "n4")["topology"]["leaf"], "l1");

  // An operator drains n1 in Slurm: Shepherd cordons it with Slurm's reason.
  LocalCluster::Sh({"scontrol", "update", "NodeName=n1", "State=DRAIN", "Reason=fan maintenance"});
  ASSERT_TRUE(WaitFor(seconds(20), [&] { return NodeOf(d.port(), "n1")["state"] == "cordoned"; }))
      << NodeOf(d.port(), "n1").dump();
  EXPECT_NE(NodeOf(d.port(), "n1")["reason"].get<std::string>().find("fan maintenance"), std::string::npos);

  // Returning n1 to service in Shepherd does not resume it in Slurm: the operator's drain stands, and the
  // next reconcile cordons it again.
  auto patch = Http(d.port(), "PATCH", "/v1/nodes/n1", R"({"schedulable": true})");
  ASSERT_EQ(patch.status, 200) << patch.body;
  ASSERT_TRUE(WaitFor(seconds(20), [&] { return NodeOf(d.port(), "n1")["state"] == "cordoned"; }));
  EXPECT_EQ(SlurmReason("n1"), "fan maintenance");
  EXPECT_NE(SlurmState("n1").find("drain"), std::string::npos) << SlurmState("n1");

  // The operator resumes it in Slurm: Shepherd follows.
  LocalCluster::Sh({"scontrol", "update", "NodeName=n1", "State=RESUME"});
  ASSERT_TRUE(WaitFor(seconds(20), [&] { return NodeOf(d.port(), "n1")["state"] == "available"; }))
      << NodeOf(d.port(), "n1").dump();
}

TEST(SlurmDaemon, ShepherdsCordonDrainsInSlurmAndItsReturnResumes) {
  REQUIRE_CLUSTER();
  SlurmDaemon d;
  ASSERT_TRUE(d.daemon->WaitReady()) << d.daemon->log();
  ASSERT_TRUE(WaitFor(seconds(30), [&] { return NodeOf(d.port(), "n2")["state"] == "available"; }));

  auto cordon = Http(d.port(), "PATCH", "/v1/nodes/n2", R"({"schedulable": false, "reason": "bad dimm"})");
  ASSERT_EQ(cordon.status, 200) << cordon.body;
  ASSERT_TRUE(WaitFor(seconds(20), [&] { return SlurmReason("n2") == "shepherd bad dimm"; }))
      << SlurmReason("n2") << "\n"
      << d.daemon->log();
  EXPECT_NE(SlurmState("n2").find("drain"), std::string::npos) << SlurmState("n2");
  EXPECT_EQ(NodeOf(d.port(), "n2")["state"], "cordoned");  // Shepherd's own cordon stays as it was

  // Shepherd drained it, so Shepherd may resume it once an operator returns it in Shepherd.
  auto back = Http(d.port(), "PATCH", "/v1/nodes/n2", R"({"schedulable": true})");
  ASSERT_EQ(back.status, 200) << back.body;
  ASSERT_TRUE(WaitFor(seconds(20), [&] { return SlurmState("n2") == "idle"; }))
      << SlurmState("n2") << " " << SlurmReason("n2") << "\n"
      << d.daemon->log();
  // Shepherd follows at its next reconcile (on a loaded machine Slurm may first show the node not
  // responding for a moment, which Shepherd mirrors as failed until Slurm returns it).
  EXPECT_TRUE(WaitFor(seconds(20), [&] { return NodeOf(d.port(), "n2")["state"] == "available"; }))
      << NodeOf(d.port(), "n2").dump() << "\n"
      << d.daemon->log();
}

// A job started outside Shepherd (no command) with external_remediation "slurm-drain": the rank reported
// from n3 is lost in two attempts in a row (its launcher restarted it), so recovery suspects n3; Shepherd
// cordons it and drains it in Slurm with the finding's id and kind. Nothing else is stopped or drained.
TEST(SlurmDaemon, SlurmDrainRemediationNamesTheFinding) {
  REQUIRE_CLUSTER();
  SlurmDaemon d(0.05);
  ASSERT_TRUE(d.daemon->WaitReady()) << d.daemon->log();
  ASSERT_TRUE(WaitFor(seconds(30), [&] { return NodeOf(d.port(), "n3")["state"] == "available"; }));
  auto job = Http(d.port(), "POST", "/v1/jobs", R"({"name": "srun-job", "model": {"parameters": 1e6,
      "layers": 2, "hidden": 64, "heads": 4, "seq_len": 64, "vocab": 1000}, "training": {"global_batch_size": 8},
      "parallelism": {"tp": 1, "pp": 1, "dp": 2}, "resources": {"gpus": 2, "gpus_per_node": 1},
      "policy": {"heartbeat_interval_s": 0.1, "heartbeat_timeout_s": 0.5, "startup_grace_s": 0.5,
                 "external_remediation": "slurm-drain"}})");
  ASSERT_EQ(job.status, 201) << job.body;
  const std::string id = Json::parse(job.body)["id"];
  auto report = [&](int attempt, bool both) {
    std::string body = R"({"reports": [{"rank": 0, "attempt": )" + std::to_string(attempt) +
                       R"(, "kind": "heartbeat", "node": "n0"})";
    if (both)
      body += R"(, {"rank": 1, "attempt": )" + std::to_string(attempt) +
              R"(, "kind": "heartbeat", "node": "n3"})";
    return Http(d.port(), "POST", "/v1/jobs/" + id + "/reports", body + "]}").status;
  };
  for (int attempt = 1; attempt <= 2; ++attempt) {
    ASSERT_EQ(report(attempt, true), 202) << d.daemon->log();
    // Rank 0 keeps reporting on this attempt; rank 1 (n3) is silent until it is named.
    ASSERT_TRUE(WaitFor(seconds(30), [&] {
      report(attempt, false);
      auto f = Http(d.port(), "GET", "/v1/jobs/" + id + "/failures?kind=heartbeat_lost");
      return f.status == 200 && Json::parse(f.body)["failures"].size() >= static_cast<size_t>(attempt);
    })) << d.daemon->log();
  }
  ASSERT_TRUE(WaitFor(seconds(20), [&] { return SlurmReason("n3").rfind("shepherd f-", 0) == 0; }))
      << SlurmReason("n3") << "\n"
      << d.daemon->log();
  const std::string reason = SlurmReason("n3");
  EXPECT_NE(reason.find(" heartbeat_lost"), std::string::npos) << reason;
  Json findings =
      Json::parse(Http(d.port(), "GET", "/v1/jobs/" + id + "/failures?kind=heartbeat_lost").body)["failures"];
  EXPECT_EQ(reason, "shepherd " + findings.back()["id"].get<std::string>() + " heartbeat_lost");
  EXPECT_EQ(NodeOf(d.port(), "n3")["state"], "cordoned");
  EXPECT_EQ(SlurmState("n0"), "idle");  // the node of the healthy rank is left alone
  EXPECT_EQ(Json::parse(Http(d.port(), "GET", "/v1/jobs/" + id).body)["state"], "running");

  // Hand it back: an operator returns it in Shepherd, which resumes the drain it made.
  ASSERT_EQ(Http(d.port(), "PATCH", "/v1/nodes/n3", R"({"schedulable": true})").status, 200);
  ASSERT_TRUE(WaitFor(seconds(20), [&] { return SlurmState("n3") == "idle"; })) << SlurmState("n3");
}

// A job a user launched with a plain srun (submitted to Shepherd without a command): the Python client in
// each rank takes its rank and node from Slurm's variables. Rank 1 stops itself (SIGSTOP): Shepherd names
// rank 1 on n1, and starts no step and drains nothing (external_remediation none).
TEST(SlurmDaemon, UserLaunchedSrunJobIsWatchedAndItsSilentRankNamed) {
  REQUIRE_CLUSTER();
  SlurmDaemon d(0.05);
  ASSERT_TRUE(d.daemon->WaitReady()) << d.daemon->log();
  ASSERT_TRUE(WaitFor(seconds(30), [&] { return NodeOf(d.port(), "n1")["state"] == "available"; }));
  auto job = Http(d.port(), "POST", "/v1/jobs", R"({"name": "user-srun", "model": {"parameters": 1e6,
      "layers": 2, "hidden": 64, "heads": 4, "seq_len": 64, "vocab": 1000}, "training": {"global_batch_size": 8},
      "parallelism": {"tp": 1, "pp": 1, "dp": 2}, "resources": {"gpus": 2, "gpus_per_node": 1},
      "policy": {"heartbeat_interval_s": 0.2, "heartbeat_timeout_s": 2, "startup_grace_s": 60}})");
  ASSERT_EQ(job.status, 201) << job.body;
  const std::string id = Json::parse(job.body)["id"];
  const std::string script = d.dir.path + "/rank.py";
  std::ofstream(script) << "import os, signal, time\n"
                           "from shepherd_client import ShepherdClient\n"
                           "c = ShepherdClient.from_env()\n"
                           "for step in range(1, 600):\n"
                           "    c.step(step, loss=1.0)\n"
                           "    c.flush()\n"
                           "    if c.rank == 1 and step == 3:\n"
                           "        os.kill(os.getpid(), signal.SIGSTOP)\n"
                           "    time.sleep(0.1)\n";
  const std::string url = "http://127.0.0.1:" + std::to_string(d.port());
  auto srun =
      SpawnLogged({"srun", "--job-name=user-srun", "-N2", "-n2", "-w", "n0,n1", "/usr/bin/python3", script},
                  CleanEnvironment({{"SLURM_CONF", LocalCluster::slurm_conf()},
                                    {"SHEPHERD_URL", url},
                                    {"SHEPHERD_JOB", id},
                                    {"PYTHONPATH", SHEPHERD_SOURCE_DIR "/clients/python"}}),
                  d.dir.path + "/srun.log", d.dir.path);
  ASSERT_TRUE(srun.ok()) << srun.status().message();
  Json lost;
  const bool named = WaitFor(seconds(90), [&] {
    auto f = Http(d.port(), "GET", "/v1/jobs/" + id + "/failures?kind=heartbeat_lost");
    if (f.status != 200 || Json::parse(f.body)["failures"].empty()) return false;
    lost = Json::parse(f.body)["failures"][0];
    return true;
  });
  const std::string slurm_job = LocalCluster::Sh({"squeue", "-h", "-n", "user-srun", "-o", "%i"});
  const std::string jobs = LocalCluster::Sh({"squeue", "-h", "-o", "%i"});
  const std::string n1 = SlurmState("n1");
  const Json shepherd_job = Json::parse(Http(d.port(), "GET", "/v1/jobs/" + id).body);
  LocalCluster::Sh({"scancel", slurm_job});
  SignalGroup(*srun, SIGKILL);
  WaitFor(seconds(30), [&] { return PollExit(*srun).has_value(); });
  ASSERT_TRUE(named) << d.daemon->log();
  EXPECT_EQ(lost["ranks"], Json::array({1})) << lost.dump();
  EXPECT_EQ(lost["nodes"], Json::array({"n1"})) << lost.dump();
  EXPECT_FALSE(lost["recommended_actions"].empty()) << lost.dump();
  EXPECT_EQ(jobs, slurm_job);  // no allocation or step of Shepherd's own
  EXPECT_EQ(n1.find("drain"), std::string::npos) << n1;
  EXPECT_EQ(NodeOf(d.port(), "n1")["state"], "available");
  EXPECT_EQ(shepherd_job["attempt"], 1);
  EXPECT_EQ(shepherd_job["state"], "running");
}

}  // namespace
}  // namespace shepherd::slurm
