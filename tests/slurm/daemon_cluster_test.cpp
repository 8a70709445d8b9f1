// The real shepherdd binary with --slurm against the real local Slurm cluster (tests/slurm/local_cluster.h):
// the inventory is imported from Slurm, Slurm's drains show up in Shepherd, and Shepherd's own cordons are
// drained in Slurm with a reason naming them; Shepherd never resumes a node an operator drained. Runs in the
// slurm_cluster_test binary (one cluster for all), after cli_cluster_test.cpp; it leaves every node resumed.
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

// The id of the Shepherd job bound to Slurm job `slurm_job` (external_id), "" while there is none.
// `scontrol show job ID --oneliner`, or what went wrong.
std::string ShowJob(const std::string& id) {
  auto r =
      RunCommand({"scontrol", "show", "job", id, "--oneliner"},
                 CleanEnvironment({{"SLURM_CONF", LocalCluster::slurm_conf()}}), std::chrono::seconds(30));
  if (!r.ok()) return "<" + r.status().message() + ">";
  return r->exit_code == 0 ? r->out : "<exit " + std::to_string(r->exit_code) + ": " + r->err + ">";
}

std::string BoundJob(int port, const std::string& slurm_job) {
  auto r = Http(port, "GET", "/v1/jobs?external_id=" + slurm_job);
  if (r.status != 200) return "";
  Json jobs = Json::parse(r.body)["jobs"];
  return jobs.size() == 1 ? jobs[0]["id"].get<std::string>() : "";
}

// A job a user launched with a plain srun, never submitted to Shepherd: the Python client in each rank takes
// its rank, node and SLURM_JOB_ID from Slurm's variables, and the first report creates the Shepherd job
// bound to that Slurm job (2 ranks from SLURM_NTASKS, named by SLURM_JOB_NAME). Rank 1 stops itself
// (SIGSTOP): Shepherd names rank 1 on n1, and starts no step and drains nothing (external_remediation none).
TEST(SlurmDaemon, UserLaunchedSrunJobIsWatchedAndItsSilentRankNamed) {
  REQUIRE_CLUSTER();
  SlurmDaemon d(0.05);
  ASSERT_TRUE(d.daemon->WaitReady()) << d.daemon->log();
  ASSERT_TRUE(WaitFor(seconds(30), [&] { return NodeOf(d.port(), "n1")["state"] == "available"; }));
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
  auto srun = SpawnLogged(
      {"srun", "--job-name=user-srun", "-N2", "-n2", "-w", "n0,n1", "/usr/bin/python3", script},
      CleanEnvironment({{"SLURM_CONF", LocalCluster::slurm_conf()},
                        {"SHEPHERD_URL", url},
                        {"SHEPHERD_POLICY", R"({"heartbeat_interval_s": 0.2, "heartbeat_timeout_s": 2,
                                                "startup_grace_s": 60})"},
                        {"PYTHONPATH", SHEPHERD_SOURCE_DIR "/clients/python"}}),
      d.dir.path + "/srun.log", d.dir.path);
  ASSERT_TRUE(srun.ok()) << srun.status().message();
  std::string slurm_job, id;
  const bool bound = WaitFor(seconds(60), [&] {
    slurm_job = LocalCluster::Sh({"squeue", "-h", "-n", "user-srun", "-o", "%i"});
    id = slurm_job.empty() ? "" : BoundJob(d.port(), slurm_job);
    return !id.empty();
  });
  Json lost;
  const bool named = bound && WaitFor(seconds(90), [&] {
                       auto f = Http(d.port(), "GET", "/v1/jobs/" + id + "/failures?kind=heartbeat_lost");
                       if (f.status != 200 || Json::parse(f.body)["failures"].empty()) return false;
                       lost = Json::parse(f.body)["failures"][0];
                       return true;
                     });
  const std::string jobs = LocalCluster::Sh({"squeue", "-h", "-o", "%i"});
  const std::string n1 = SlurmState("n1");
  const Json shepherd_job =
      bound ? Json::parse(Http(d.port(), "GET", "/v1/jobs/" + id).body) : Json::object();
  const Json all_jobs = Json::parse(Http(d.port(), "GET", "/v1/jobs").body)["jobs"];
  if (!slurm_job.empty()) LocalCluster::Sh({"scancel", slurm_job});
  // Cancelled in Slurm: the watched job ends in Shepherd too, and gives its slots back.
  Json ended;
  const bool cancelled = bound && WaitFor(seconds(60), [&] {
                           ended = Json::parse(Http(d.port(), "GET", "/v1/jobs/" + id).body);
                           return ended["state"] != "running";
                         });
  SignalGroup(*srun, SIGKILL);
  WaitFor(seconds(30), [&] { return PollExit(*srun).has_value(); });
  ASSERT_TRUE(bound) << "no job bound to Slurm job '" << slurm_job << "'\n" << d.daemon->log();
  ASSERT_TRUE(named) << d.daemon->log();
  EXPECT_EQ(all_jobs.size(), 1u) << all_jobs.dump();  // created once, by the first report
  EXPECT_EQ(shepherd_job["spec"]["external_id"], slurm_job);
  EXPECT_EQ(shepherd_job["spec"]["name"], "user-srun");
  EXPECT_EQ(shepherd_job["plan"]["dp"], 2);
  EXPECT_EQ(lost["ranks"], Json::array({1})) << lost.dump();
  EXPECT_EQ(lost["nodes"], Json::array({"n1"})) << lost.dump();
  EXPECT_FALSE(lost["recommended_actions"].empty()) << lost.dump();
  EXPECT_EQ(jobs, slurm_job);  // no allocation or step of Shepherd's own
  EXPECT_EQ(n1.find("drain"), std::string::npos) << n1;
  EXPECT_EQ(NodeOf(d.port(), "n1")["state"], "available");
  EXPECT_EQ(shepherd_job["attempt"], 1);
  EXPECT_EQ(shepherd_job["state"], "running");
  EXPECT_TRUE(cancelled) << ended.dump();
  EXPECT_EQ(ended["state"], "cancelled") << ended.dump();
  EXPECT_EQ(ended["reason"].get<std::string>().rfind("slurm job " + slurm_job + " is CANCELLED", 0), 0u)
      << ended.dump();
}

// `sbatch --requeue` of `wrap` on n2 and n3 (2 tasks) as job `name`, its ranks reporting to `d` under policy
// external_remediation "requeue" (heartbeat timeout 2 s); output in d's directory. The Slurm job id, or ""
// (with the failure recorded).
std::string SbatchRequeueable(const SlurmDaemon& d, const std::string& name, const std::string& wrap) {
  auto sbatch = RunCommand(
      {"sbatch", "--parsable", "--requeue", "--job-name=" + name, "-N2", "-n2", "-w", "n2,n3",
       "--output=" + d.dir.path + "/slurm-%j.out", "--wrap", wrap},
      CleanEnvironment({{"SLURM_CONF", LocalCluster::slurm_conf()},
                        {"SHEPHERD_URL", "http://127.0.0.1:" + std::to_string(d.port())},
                        {"SHEPHERD_POLICY", R"({"heartbeat_interval_s": 0.2, "heartbeat_timeout_s": 2,
                                                "startup_grace_s": 60, "external_remediation": "requeue"})"},
                        {"PYTHONPATH", SHEPHERD_SOURCE_DIR "/clients/python"}}),
      std::chrono::seconds(30));
  if (!sbatch.ok() || sbatch->exit_code != 0) {
    ADD_FAILURE() << (sbatch.ok() ? sbatch->err : sbatch.status().message());
    return "";
  }
  std::string id = sbatch->out;
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
  return id;
}

// external_remediation "requeue": an sbatch job (--requeue) whose rank 1 hangs in its first run. Its first
// report created the Shepherd job with the policy the client sent; the silence is a finding whose
// recommendation is a restart, so Shepherd runs `scontrol requeue` once; Slurm runs the batch script again
// with SLURM_RESTART_COUNT=1, the ranks report attempt 2, Shepherd follows, and the job completes.
TEST(SlurmDaemon, RequeueRemediationRequeuesAHungBatchJobOnce) {
  REQUIRE_CLUSTER();
  SlurmDaemon d(0.05);
  ASSERT_TRUE(d.daemon->WaitReady()) << d.daemon->log();
  ASSERT_TRUE(WaitFor(seconds(30), [&] {
    return NodeOf(d.port(), "n2")["state"] == "available" && NodeOf(d.port(), "n3")["state"] == "available";
  }));
  const std::string script = d.dir.path + "/rank.py";
  std::ofstream(script) << "import os, signal, time\n"
                           "from shepherd_client import ShepherdClient\n"
                           "c = ShepherdClient.from_env()\n"
                           "first_run = os.environ.get('SLURM_RESTART_COUNT', '0') == '0'\n"
                           "for step in range(1, 600 if first_run else 31):\n"
                           "    c.step(step, loss=1.0)\n"
                           "    c.flush()\n"
                           "    if first_run and c.rank == 1 and step == 3:\n"
                           "        os.kill(os.getpid(), signal.SIGSTOP)\n"
                           "    time.sleep(0.1)\n"
                           "c.close()\n";
  const std::string slurm_job = SbatchRequeueable(d, "requeue-me", "srun /usr/bin/python3 " + script);
  ASSERT_FALSE(slurm_job.empty());

  std::string id, slurm_view;
  Json job;
  // Bound, requeued, and back as attempt 2 that runs to its end (the ranks exit 0). Slurm holds a requeued
  // batch job back for two minutes (Reason=BeginTime); this waits for that. (Starting it at once with
  // `scontrol update StartTime=now` passed once and failed twice here: the second run never reported.)
  const bool followed = WaitFor(seconds(240), [&] {
    if (id.empty()) id = BoundJob(d.port(), slurm_job);
    if (id.empty()) return false;
    job = Json::parse(Http(d.port(), "GET", "/v1/jobs/" + id).body);
    return job["attempt"] == 2;
  });
  const bool done = followed && WaitFor(seconds(60), [&] {
                      slurm_view = ShowJob(slurm_job);
                      return slurm_view.find("JobState=COMPLETED") != std::string::npos;
                    });
  // Slurm's COMPLETED ends the Shepherd job, which gives its slots back.
  const bool ended = done && WaitFor(seconds(30), [&] {
                       job = Json::parse(Http(d.port(), "GET", "/v1/jobs/" + id).body);
                       return job["state"] == "succeeded";
                     });
  if (!done) LocalCluster::Sh({"scancel", slurm_job});
  std::string output;
  std::ifstream out_file(d.dir.path + "/slurm-" + slurm_job + ".out");
  std::getline(out_file, output, '\0');
  ASSERT_TRUE(followed) << "slurm job '" << slurm_job << "': " << ShowJob(slurm_job) << "\n"
                        << output << "\n"
                        << job.dump() << "\n"
                        << d.daemon->log();
  EXPECT_TRUE(done) << slurm_view;
  EXPECT_TRUE(ended) << job.dump();
  EXPECT_EQ(job["reason"], "slurm job " + slurm_job + " is COMPLETED (exit code 0:0)") << job.dump();
  EXPECT_EQ(job["restarts"], 1);  // the requeue happened, and is counted
  EXPECT_NE(slurm_view.find("Restarts=1 "), std::string::npos) << slurm_view;  // requeued exactly once
  Json findings = Json::parse(Http(d.port(), "GET", "/v1/jobs/" + id + "/failures").body)["failures"];
  // The finding that requeued it is about attempt 1 (rank 1's silence or hang).
  ASSERT_FALSE(findings.empty());
  EXPECT_EQ(findings[0]["attempt"], 1) << findings.dump();
  EXPECT_NE(findings[0]["actions"].dump().find("requeue Slurm job " + slurm_job + " "), std::string::npos)
      << findings.dump();
  // Requeued once: the finished second run goes silent too, but a job Slurm no longer runs is left alone.
  const std::string log = d.daemon->log();
  const std::string requeued = "slurm: requeued job " + slurm_job + " ";
  EXPECT_NE(log.find(requeued), std::string::npos) << log;
  EXPECT_EQ(log.find(requeued, log.find(requeued) + 1), std::string::npos) << log;
  for (const char* n : {"n2", "n3"}) EXPECT_EQ(SlurmState(n).find("drain"), std::string::npos) << n;
}

// external_remediation "requeue" with a batch script that runs on after its srun (post-processing): the
// finished ranks fall silent while Slurm shows the job RUNNING. Every rank silent at once is recorded with
// nothing recommended, so nothing is requeued (were one rank left, no step runs tasks: still not requeued);
// the job ends as succeeded when the script does.
TEST(SlurmDaemon, FinishedRanksOfABatchScriptThatRunsOnAreNotRequeued) {
  REQUIRE_CLUSTER();
  SlurmDaemon d(0.05);
  ASSERT_TRUE(d.daemon->WaitReady()) << d.daemon->log();
  ASSERT_TRUE(WaitFor(seconds(30), [&] {
    return NodeOf(d.port(), "n2")["state"] == "available" && NodeOf(d.port(), "n3")["state"] == "available";
  }));
  const std::string script = d.dir.path + "/rank.py";
  std::ofstream(script) << "import time\n"
                           "from shepherd_client import ShepherdClient\n"
                           "c = ShepherdClient.from_env()\n"
                           "for step in range(1, 11):\n"
                           "    c.step(step, loss=1.0)\n"
                           "    c.flush()\n"
                           "    time.sleep(0.1)\n"
                           "c.close()\n";
  const std::string done = d.dir.path + "/postprocessing-done";
  const std::string slurm_job =
      SbatchRequeueable(d, "post-process", "srun /usr/bin/python3 " + script + "; sleep 12; touch " + done);
  ASSERT_FALSE(slurm_job.empty());

  std::string id;
  Json job;
  const bool ended = WaitFor(seconds(120), [&] {
    if (id.empty()) id = BoundJob(d.port(), slurm_job);
    if (id.empty()) return false;
    job = Json::parse(Http(d.port(), "GET", "/v1/jobs/" + id).body);
    // Ended: not "launching" (it was, before the ranks' first report) nor "running".
    return job["state"] == "succeeded" || job["state"] == "failed" || job["state"] == "cancelled";
  });
  const std::string slurm_view = ShowJob(slurm_job);
  if (!ended) LocalCluster::Sh({"scancel", slurm_job});
  ASSERT_TRUE(ended) << slurm_view << "\n" << job.dump() << "\n" << d.daemon->log();
  EXPECT_EQ(job["state"], "succeeded") << job.dump();
  EXPECT_EQ(job["restarts"], 0);
  EXPECT_EQ(job["attempt"], 1);
  EXPECT_NE(slurm_view.find("Restarts=0 "), std::string::npos) << slurm_view;
  EXPECT_TRUE(std::ifstream(done).good());  // the post-processing ran to its end
  Json findings = Json::parse(Http(d.port(), "GET", "/v1/jobs/" + id + "/failures").body)["failures"];
  ASSERT_FALSE(findings.empty()) << "the finished ranks' silence was never judged: " << d.daemon->log();
  EXPECT_NE(findings[0]["recommended_actions"].dump().find("record only: every rank silent at once"),
            std::string::npos)
      << findings.dump();
  EXPECT_EQ(findings[0]["actions"].dump().find("requeue Slurm job"), std::string::npos) << findings.dump();
  EXPECT_EQ(d.daemon->log().find("slurm: requeued job " + slurm_job + " "), std::string::npos);
}

}  // namespace
}  // namespace shepherd::slurm
