// The real daemon: endpoints, durability across kill -9, the database lock, inventory files, auth, SIGTERM.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "core/json.h"
#include "tests/integration/harness.h"

namespace shepherd::testing {
namespace {

std::string NodeBody(const std::string& id, const std::string& leaf, bool spare = false) {
  return Json{{"id", id},
              {"gpus", 8},
              {"gpu_memory_gib", 80},
              {"gpu_model", "H100"},
              {"topology", {{"spine", "s0"}, {"leaf", leaf}}},
              {"spare", spare}}
      .dump();
}

std::string JobBody(int gpus, int tp = 8) {
  return Json{
      {"name", "t"},
      {"model", {{"parameters", 1e9}, {"layers", 8}, {"hidden", 1024}, {"heads", 8}, {"seq_len", 1024}}},
      {"training", {{"global_batch_size", 64}}},
      {"parallelism", {{"tp", tp}, {"pp", 1}, {"dp", gpus / tp}}},
      {"resources", {{"gpus", gpus}}},
      {"command", {"python3", "train.py"}}}
      .dump();
}

Json J(const HttpResult& r) {
  return Json::parse(r.body);
}

TEST(Daemon, ServiceEndpoints) {
  TempDir dir;
  Daemon d(dir.path);
  ASSERT_TRUE(d.WaitReady()) << d.log();
  EXPECT_EQ(Http(d.port(), "GET", "/healthz").status, 200);
  EXPECT_EQ(Http(d.port(), "GET", "/readyz").status, 200);
  HttpResult m = Http(d.port(), "GET", "/metrics");
  EXPECT_EQ(m.status, 200);
  EXPECT_NE(m.body.find("shepherd_build_info"), std::string::npos);
  EXPECT_NE(m.body.find("shepherd_http_requests_total{route=\"/healthz\",method=\"GET\",status=\"200\"} 1"),
            std::string::npos)
      << m.body;
  EXPECT_NE(m.body.find("shepherd_http_request_duration_seconds_bucket"), std::string::npos);
}

// A storage stall shows on /metrics: another connection (an operator's sqlite3 in BEGIN IMMEDIATE) holds the
// database's write lock, a node registration waits for it, and the oldest uncommitted write's age grows;
// once the lock goes the write commits and the gauges return to 0.
TEST(Daemon, MetricsShowAStorageStallWhileItLasts) {
  TempDir dir;
  Daemon d(dir.path);
  ASSERT_TRUE(d.WaitReady()) << d.log();
  auto gauge = [&](const std::string& name) {
    const std::string body = Http(d.port(), "GET", "/metrics").body;
    const size_t at = body.find("\n" + name + " ");
    return at == std::string::npos ? -1.0 : std::stod(body.substr(at + name.size() + 2));
  };
  // The start-up write (the daemon's epoch) may still be committing when the port is open.
  EXPECT_TRUE(Eventually([&] { return gauge("shepherd_storage_writes_in_flight") == 0; }));
  EXPECT_EQ(gauge("shepherd_storage_oldest_write_seconds"), 0);
  EXPECT_EQ(gauge("shepherd_storage_failed"), 0);
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open((dir.path + "/shepherd.db").c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  int put_status = 0;
  std::thread put([&] { put_status = Http(d.port(), "POST", "/v1/nodes", NodeBody("n1", "l0")).status; });
  EXPECT_TRUE(Eventually([&] { return gauge("shepherd_storage_oldest_write_seconds") >= 1; }))
      << Http(d.port(), "GET", "/metrics").body;
  EXPECT_GE(gauge("shepherd_storage_writes_in_flight"), 1);
  EXPECT_EQ(sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(other);
  put.join();
  EXPECT_EQ(put_status, 201);
  EXPECT_TRUE(Eventually([&] { return gauge("shepherd_storage_writes_in_flight") == 0; }));
  EXPECT_EQ(gauge("shepherd_storage_oldest_write_seconds"), 0);
  EXPECT_EQ(Http(d.port(), "GET", "/v1/nodes/n1").status, 200);
}

// With Slurm launching on, a rank wrapper this host cannot execute is named in the log at start-up (srun
// would fail every task of a "launcher": "slurm" job); the daemon still serves.
TEST(Daemon, WarnsWhenTheSlurmRankWrapperIsNotExecutableHere) {
  TempDir dir;
  const std::string config = dir.path + "/shepherd.json";
  std::ofstream(config) << Json{{"slurm",
                                 {{"rank_exec", dir.path + "/no-such-shepherd-slurm-rank"},
                                  {"slurm_conf", dir.path + "/no-slurm.conf"},
                                  {"command_timeout_s", 1}}}}
                               .dump();
  Daemon d(dir.path, {"--config", config});
  ASSERT_TRUE(d.WaitReady()) << d.log();
  // The Slurm workers start just after the port file is written.
  const std::string warning = "no-such-shepherd-slurm-rank is not an executable here";
  EXPECT_TRUE(Eventually([&] { return d.log().find(warning) != std::string::npos; })) << d.log();
  EXPECT_EQ(Http(d.port(), "GET", "/healthz").status, 200);
}

// spdlog reads a level name it does not know as "off": a typo in log_level ran the daemon without a single
// log line, errors included. It is refused like any other invalid setting.
TEST(Daemon, AnUnknownLogLevelIsRefused) {
  TempDir dir;
  const std::string config = dir.path + "/shepherd.json";
  std::ofstream(config) << R"({"log_level": "verbose"})";
  Daemon from_file(dir.path, {"--config", config});
  EXPECT_EQ(from_file.Wait(), 2);
  EXPECT_NE(from_file.log().find("log_level"), std::string::npos) << from_file.log();
  Daemon from_flag(dir.path, {"--log-level", "WARN"});
  EXPECT_EQ(from_flag.Wait(), 2);
  EXPECT_NE(from_flag.log().find("must be one of trace, debug"), std::string::npos) << from_flag.log();
  const int agent =
      std::system((std::string(SHEPHERDD_PATH) +
                   " agent --server http://127.0.0.1:1 --node-id n0 --gpus 1 --log-level verbose "
                   "--state-dir " +
                   dir.path + "/agent >/dev/null 2>&1")
                      .c_str());
  EXPECT_TRUE(WIFEXITED(agent) && WEXITSTATUS(agent) == 2) << agent;
  Daemon fine(dir.path, {"--log-level", "warn"});
  EXPECT_TRUE(fine.WaitReady()) << fine.log();
}

// --advertise-url (what replicas' units pass; the config key advertise_url) takes one http(s) URL; anything
// else is refused at start naming the flag.
TEST(Daemon, AdvertiseUrlFlagTakesOneHttpUrl) {
  TempDir dir;
  for (const char* bad :
       {"shepherd.internal:8080", "ftp://shepherd.internal", "http://", "http://a:8080,http://b:8080"}) {
    Daemon refused(dir.path, {"--advertise-url", bad});
    EXPECT_EQ(refused.Wait(), 2) << bad;
    EXPECT_NE(refused.log().find("--advertise-url must be one http:// or https:// URL"), std::string::npos)
        << refused.log();
  }
  Daemon fine(dir.path, {"--advertise-url", "http://shepherd.internal:8080"});
  EXPECT_TRUE(fine.WaitReady()) << fine.log();
}

TEST(Daemon, NodeLifecycle) {
  TempDir dir;
  Daemon d(dir.path);
  ASSERT_TRUE(d.WaitReady()) << d.log();
  HttpResult created = Http(d.port(), "POST", "/v1/nodes", NodeBody("node-0001", "l03"));
  ASSERT_EQ(created.status, 201) << created.body;
  EXPECT_EQ(J(created)["state"], "available");
  EXPECT_EQ(J(created)["topology"]["nvlink_domain"], "node-0001");
  EXPECT_EQ(Http(d.port(), "POST", "/v1/nodes", NodeBody("node-0001", "l03")).status, 200);
  ASSERT_EQ(Http(d.port(), "POST", "/v1/nodes", NodeBody("node-0002", "l04", true)).status, 201);
  Json leaf = J(Http(d.port(), "GET", "/v1/nodes?leaf=l03"));
  ASSERT_EQ(leaf["nodes"].size(), 1u);
  EXPECT_EQ(leaf["nodes"][0]["id"], "node-0001");
  Json spares = J(Http(d.port(), "GET", "/v1/nodes?state=spare"));
  ASSERT_EQ(spares["nodes"].size(), 1u);
  EXPECT_EQ(spares["nodes"][0]["id"], "node-0002");
  HttpResult cordon = Http(d.port(), "PATCH", "/v1/nodes/node-0001", R"({"schedulable": false})");
  ASSERT_EQ(cordon.status, 200) << cordon.body;
  EXPECT_EQ(J(cordon)["state"], "cordoned");
  HttpResult bad = Http(d.port(), "PATCH", "/v1/nodes/node-0001", R"({"schedulable": "no", "colour": 1})");
  EXPECT_EQ(bad.status, 422);
  EXPECT_EQ(J(bad)["errors"].size(), 2u);
  EXPECT_EQ(Http(d.port(), "DELETE", "/v1/nodes/node-0001").status, 200);
  EXPECT_EQ(Http(d.port(), "GET", "/v1/nodes/node-0001").status, 404);
  HttpResult invalid = Http(d.port(), "POST", "/v1/nodes", R"({"id": "x y", "gpus": -1})");
  EXPECT_EQ(invalid.status, 422);
  std::set<std::string> fields;
  Json invalid_body = J(invalid);
  for (auto& e : invalid_body["errors"]) fields.insert(e["field"]);
  EXPECT_EQ(fields, (std::set<std::string>{"id", "gpus", "topology"}));
}

TEST(Daemon, JobLifecycleQueueAndPlacement) {
  TempDir dir;
  Daemon d(dir.path);
  ASSERT_TRUE(d.WaitReady()) << d.log();
  Http(d.port(), "POST", "/v1/nodes", NodeBody("n1", "l0"));
  Http(d.port(), "POST", "/v1/nodes", NodeBody("n2", "l0"));
  HttpResult a = Http(d.port(), "POST", "/v1/jobs", JobBody(16));
  ASSERT_EQ(a.status, 201) << a.body;
  EXPECT_EQ(J(a)["state"], "launching");
  std::string a_id = J(a)["id"];
  EXPECT_EQ(a_id.rfind("job-", 0), 0u);
  EXPECT_EQ(J(a)["plan"]["tp"], 8);
  HttpResult placement = Http(d.port(), "GET", "/v1/jobs/" + a_id + "/placement");
  ASSERT_EQ(placement.status, 200);
  Json p = J(placement);
  EXPECT_EQ(p["attempt"], 1);
  ASSERT_EQ(p["ranks"].size(), 16u);
  EXPECT_EQ(p["ranks"][9]["tp"], 1);  // rank 9 = tp 1 + 8·dp 1
  EXPECT_EQ(p["ranks"][9]["dp"], 1);
  EXPECT_EQ(p["quality"]["tp_groups_split"], 0);
  EXPECT_EQ(p["quality"]["cross_leaf_edges"], 0);
  HttpResult b = Http(d.port(), "POST", "/v1/jobs", JobBody(8));
  ASSERT_EQ(b.status, 201);
  EXPECT_EQ(J(b)["state"], "queued");
  EXPECT_EQ(Http(d.port(), "POST", "/v1/jobs/" + a_id + "/cancel").status, 200);
  EXPECT_EQ(Http(d.port(), "POST", "/v1/jobs/" + a_id + "/cancel").status, 409);
  EXPECT_EQ(J(Http(d.port(), "GET", "/v1/jobs/" + std::string(J(b)["id"])))["state"], "launching");
  EXPECT_EQ(J(Http(d.port(), "GET", "/v1/jobs?state=cancelled"))["jobs"].size(), 1u);
  EXPECT_EQ(Http(d.port(), "GET", "/v1/jobs/job-999999").status, 404);
}

// A job whose explicit layout leaves how it runs open: 7B on 8 GPUs at tp 1, dp 8 needs 126 GB per GPU of
// model state as written (ZeRO-0: 18 B per parameter); the ZeRO stage is chosen, the job is admitted, and
// its spec records what it runs with, as its plan does.
TEST(Daemon, AJobRunsWithWhatItsLayoutLeftOpenChosen) {
  TempDir dir;
  Daemon d(dir.path);
  ASSERT_TRUE(d.WaitReady()) << d.log();
  Http(d.port(), "POST", "/v1/nodes", NodeBody("n1", "l0"));
  Json body = Json::parse(R"({"name": "seven", "model": {"parameters": 7e9, "layers": 32, "hidden": 4096,
      "heads": 32, "seq_len": 4096, "vocab": 32000}, "training": {"global_batch_size": 64},
      "parallelism": {"tp": 1, "pp": 1, "dp": 8}, "resources": {"gpus": 8}, "command": ["python3", "t.py"]})");
  HttpResult created = Http(d.port(), "POST", "/v1/jobs", body.dump());
  ASSERT_EQ(created.status, 201) << created.body;
  const Json job = J(created);
  EXPECT_GE(job["plan"]["zero_stage"].get<int>(), 1) << created.body;
  EXPECT_EQ(job["plan"]["tp"], 1);
  EXPECT_EQ(job["plan"]["dp"], 8);
  EXPECT_EQ(job["spec"]["parallelism"]["zero_stage"], job["plan"]["zero_stage"]);
  EXPECT_EQ(job["spec"]["training"]["micro_batch_size"], job["plan"]["micro_batch_size"]);
  // Named, ZeRO-0 is kept, and that does not fit.
  body["parallelism"]["zero_stage"] = 0;
  EXPECT_EQ(Http(d.port(), "POST", "/v1/jobs", body.dump()).status, 422);
}

TEST(Daemon, InvalidJobsAre422WithEveryField) {
  TempDir dir;
  Daemon d(dir.path);
  ASSERT_TRUE(d.WaitReady()) << d.log();
  Http(d.port(), "POST", "/v1/nodes", NodeBody("n1", "l0"));
  Json bad = Json::parse(JobBody(8));
  bad["parallelism"]["tp"] = 3;
  bad["training"]["precision"] = "fp4";
  HttpResult r = Http(d.port(), "POST", "/v1/jobs", bad.dump());
  EXPECT_EQ(r.status, 422);
  std::set<std::string> fields;
  Json body = J(r);
  for (auto& e : body["errors"]) fields.insert(e["field"]);
  EXPECT_TRUE(fields.count("parallelism.tp")) << r.body;
  EXPECT_TRUE(fields.count("training.precision")) << r.body;
  // 70B with ZeRO-3 over 8 GPUs needs 140 GB per GPU: 422 with the breakdown.
  Json big = Json::parse(R"({"name": "big", "model": {"parameters": 70e9, "layers": 80, "hidden": 8192,
      "heads": 64, "seq_len": 4096, "vocab": 128256}, "training": {"global_batch_size": 64},
      "parallelism": {"tp": 1, "pp": 1, "dp": 8, "zero_stage": 3}, "resources": {"gpus": 8}})");
  HttpResult nofit = Http(d.port(), "POST", "/v1/jobs", big.dump());
  EXPECT_EQ(nofit.status, 422);
  EXPECT_FALSE(J(nofit)["plan"]["fits"].get<bool>());
  EXPECT_GT(J(nofit)["plan"]["memory_per_gpu_bytes"]["total"].get<double>(), 140e9);
  // The detail compares with what is usable, 90 % of 80 GiB (it quoted the whole HBM).
  EXPECT_NE(
      J(nofit)["detail"].get<std::string>().find("more than the 77309411328 usable of the GPU's 85899345920"),
      std::string::npos)
      << nofit.body;
  HttpResult huge = Http(d.port(), "POST", "/v1/jobs", JobBody(64));
  EXPECT_EQ(huge.status, 422);
  EXPECT_EQ(J(huge)["errors"][0]["field"], "resources.gpus");
  HttpResult plan = Http(d.port(), "POST", "/v1/plan", big.dump());
  ASSERT_EQ(plan.status, 200) << plan.body;
  EXPECT_FALSE(J(plan)["fits"].get<bool>());
  EXPECT_TRUE(J(plan).contains("explanation"));
  // A dry run of a whole job body checks its job-only sections as a submit would (they were ignored).
  Json dry = Json::parse(JobBody(8));
  dry["policy"] = {{"bogus", 1}, {"max_restarts", -5}};
  dry["checkpoint"]["every_steps"] = -1;
  HttpResult checked = Http(d.port(), "POST", "/v1/plan", dry.dump());
  ASSERT_EQ(checked.status, 422) << checked.body;
  std::set<std::string> dry_fields;
  const Json dry_body = J(checked);
  for (auto& e : dry_body["errors"]) dry_fields.insert(e["field"]);
  EXPECT_EQ(dry_fields,
            (std::set<std::string>{"policy.bogus", "policy.max_restarts", "checkpoint.every_steps"}))
      << checked.body;
  EXPECT_EQ(Http(d.port(), "POST", "/v1/plan", Json::parse(JobBody(8)).dump()).status, 200);
}

TEST(Daemon, KillNineKeepsEveryAcknowledgedRecord) {
  TempDir dir;
  std::vector<std::string> jobs;
  std::string auto_job, auto_explanation;
  {
    Daemon d(dir.path);
    ASSERT_TRUE(d.WaitReady()) << d.log();
    for (int i = 0; i < 40; ++i)
      ASSERT_EQ(
          Http(d.port(), "POST", "/v1/nodes", NodeBody("n" + std::to_string(i), "l" + std::to_string(i % 4)))
              .status,
          201);
    ASSERT_EQ(Http(d.port(), "PATCH", "/v1/nodes/n7", R"({"schedulable": false})").status, 200);
    for (int i = 0; i < 6; ++i) {
      HttpResult r = Http(d.port(), "POST", "/v1/jobs", JobBody(64));
      ASSERT_EQ(r.status, 201) << r.body;
      jobs.push_back(J(r)["id"]);
    }
    ASSERT_EQ(Http(d.port(), "POST", "/v1/jobs/" + jobs[0] + "/cancel").status, 200);
    Json automatic = Json::parse(JobBody(64));
    automatic["parallelism"] = "auto";
    HttpResult a = Http(d.port(), "POST", "/v1/jobs", automatic.dump());
    ASSERT_EQ(a.status, 201) << a.body;
    auto_job = J(a)["id"];
    auto_explanation = J(a)["estimate"]["explanation"];
    ASSERT_NE(auto_explanation.find("Top candidates"), std::string::npos) << auto_explanation;
    d.Signal(SIGKILL);
    ASSERT_EQ(d.Wait(), 128 + SIGKILL);
  }
  Daemon d(dir.path);
  ASSERT_TRUE(d.WaitReady()) << d.log();
  Json nodes = J(Http(d.port(), "GET", "/v1/nodes"));
  EXPECT_EQ(nodes["nodes"].size(), 40u);
  EXPECT_EQ(J(Http(d.port(), "GET", "/v1/nodes/n7"))["state"], "cordoned");
  EXPECT_EQ(J(Http(d.port(), "GET", "/v1/jobs/" + jobs[0]))["state"], "cancelled");
  int running = 0;
  for (size_t i = 1; i < jobs.size(); ++i) {
    HttpResult r = Http(d.port(), "GET", "/v1/jobs/" + jobs[i]);
    ASSERT_EQ(r.status, 200);
    running += J(r)["state"] == "launching";
  }
  EXPECT_EQ(running, 4);  // launching (no agents here): 39 schedulable nodes × 8 GPUs hold four 64-GPU jobs
  // The auto search's answer (its candidates) is kept: evaluating the stored plan again cannot give it.
  EXPECT_EQ(J(Http(d.port(), "GET", "/v1/jobs/" + auto_job))["estimate"]["explanation"], auto_explanation);
}

// A fleet operator's probe: three of four ranks reported their part of checkpoint 10, the daemon restarted,
// the fourth reported: the checkpoint stayed pending at 2 of 4 for good (the parts lived in memory only).
TEST(Daemon, ACheckpointsReportedPartsSurviveAKillNine) {
  TempDir dir;
  std::string job;
  auto part = [&](int rank) {
    return Json{{"reports",
                 {{{"rank", rank},
                   {"attempt", 1},
                   {"kind", "checkpoint"},
                   {"step", 10},
                   {"path", "/ckpt/10/rank" + std::to_string(rank)}}}}}
        .dump();
  };
  {
    Daemon d(dir.path);
    ASSERT_TRUE(d.WaitReady()) << d.log();
    ASSERT_EQ(Http(d.port(), "POST", "/v1/nodes", NodeBody("n0", "l0")).status, 201);
    Json external = Json::parse(JobBody(4, 1));
    external.erase("command");  // another launcher's job: its ranks report, nothing is launched
    HttpResult r = Http(d.port(), "POST", "/v1/jobs", external.dump());
    ASSERT_EQ(r.status, 201) << r.body;
    job = J(r)["id"];
    for (int rank : {0, 1, 2})
      ASSERT_EQ(Http(d.port(), "POST", "/v1/jobs/" + job + "/reports", part(rank)).status, 202);
    Json c = J(Http(d.port(), "GET", "/v1/jobs/" + job + "/checkpoints"))["checkpoints"][0];
    ASSERT_EQ(c["ranks_reported"], 3) << c.dump();
    d.Signal(SIGKILL);
    ASSERT_EQ(d.Wait(), 128 + SIGKILL);
  }
  Daemon d(dir.path);
  ASSERT_TRUE(d.WaitReady()) << d.log();
  Json c = J(Http(d.port(), "GET", "/v1/jobs/" + job + "/checkpoints"))["checkpoints"][0];
  EXPECT_EQ(c["ranks_reported"], 3) << c.dump();
  EXPECT_EQ(c["path"], "/ckpt/10/rank0") << c.dump();
  ASSERT_EQ(Http(d.port(), "POST", "/v1/jobs/" + job + "/reports", part(1)).status, 202);  // again: once
  ASSERT_EQ(Http(d.port(), "POST", "/v1/jobs/" + job + "/reports", part(3)).status, 202);
  c = J(Http(d.port(), "GET", "/v1/jobs/" + job + "/checkpoints"))["checkpoints"][0];
  EXPECT_EQ(c["status"], "complete") << c.dump();
  EXPECT_EQ(c["ranks_reported"], 4) << c.dump();
}

TEST(Daemon, SecondDaemonOnTheSameDatabaseIsRefused) {
  TempDir dir;
  Daemon first(dir.path);
  ASSERT_TRUE(first.WaitReady()) << first.log();
  TempDir other;
  Daemon second(other.path, {"--db", dir.path + "/shepherd.db"});
  EXPECT_FALSE(second.WaitReady(std::chrono::seconds(20)));
  auto code = second.Wait();
  ASSERT_TRUE(code.has_value());
  EXPECT_NE(*code, 0);
  EXPECT_NE(second.log().find("in use"), std::string::npos) << second.log();
  EXPECT_EQ(Http(first.port(), "GET", "/readyz").status, 200);
}

TEST(Daemon, InventoryFileAndAuth) {
  TempDir dir;
  std::string inv = dir.path + "/inventory.json";
  std::string gen =
      std::string(SHEPHERDD_PATH) +
      " gen-inventory --spines 2 --leaves-per-spine 2 --nodes-per-leaf 3 --spares-per-leaf 1 -o " + inv;
  ASSERT_EQ(std::system(gen.c_str()), 0);
  std::string tokens = dir.path + "/tokens.json";
  {
    std::ofstream(tokens)
        << R"({"tokens": [{"token": "sekrit-0123456789abcdef", "role": "viewer", "name": "v"}]})";
  }
  ::chmod(tokens.c_str(), 0600);
  Daemon d(dir.path, {"--inventory", inv, "--tokens-file", tokens});
  ASSERT_TRUE(d.WaitReady()) << d.log();
  EXPECT_EQ(Http(d.port(), "GET", "/v1/nodes").status, 401);
  Connection wrong(d.port());
  ASSERT_TRUE(wrong.Send("GET /v1/nodes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong\r\n\r\n"));
  EXPECT_EQ(wrong.Read().status, 401);
  Connection c(d.port());
  ASSERT_TRUE(
      c.Send("GET /v1/nodes?state=spare HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
             "sekrit-0123456789abcdef\r\n\r\n"));
  HttpResult r = c.Read();
  ASSERT_EQ(r.status, 200);
  Json j = J(r);
  EXPECT_EQ(j["nodes"].size(), 4u);  // one spare per leaf, 4 leaves
  EXPECT_EQ(j["summary"]["nodes"], 12);
  EXPECT_EQ(j["summary"]["usable_gpus"], 64);                // 8 non-spare nodes × 8
  EXPECT_EQ(Http(d.port(), "GET", "/healthz").status, 200);  // probes need no token
}

TEST(Daemon, SpareReserveBelowMinimumIsReported) {
  TempDir dir;
  std::string inv = dir.path + "/inventory.json", cfg = dir.path + "/config.json";
  std::string gen =
      std::string(SHEPHERDD_PATH) +
      " gen-inventory --spines 1 --leaves-per-spine 2 --nodes-per-leaf 3 --spares-per-leaf 1 -o " + inv;
  ASSERT_EQ(std::system(gen.c_str()), 0);
  std::ofstream(cfg) << R"({"min_spares_per_leaf": 2, "min_spares_per_spine": 1})";
  Daemon d(dir.path, {"--inventory", inv, "--config", cfg});
  ASSERT_TRUE(d.WaitReady()) << d.log();
  Json summary = J(Http(d.port(), "GET", "/v1/nodes"))["summary"];
  ASSERT_EQ(summary["spare_deficits"].size(), 2u);  // both leaves have 1 spare of 2; the spine's 2 are enough
  EXPECT_EQ(summary["spare_deficits"][0]["level"], "leaf");
  EXPECT_EQ(summary["spare_deficits"][0]["have"], 1);
  EXPECT_EQ(summary["spare_deficits"][0]["want"], 2);
  EXPECT_NE(Http(d.port(), "GET", "/metrics").body.find("shepherd_spare_deficits 2"), std::string::npos);
}

TEST(Daemon, SigtermDrainsAndExitsZero) {
  TempDir dir;
  Daemon d(dir.path);
  ASSERT_TRUE(d.WaitReady()) << d.log();
  Connection idle(d.port());
  ASSERT_TRUE(idle.Send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_EQ(idle.Read().status, 200);
  d.Signal(SIGTERM);
  EXPECT_TRUE(idle.WaitClosed());  // idle keep-alive connections are closed
  EXPECT_EQ(d.Wait(), 0) << d.log();
  EXPECT_NE(d.log().find("shutting down: SIGTERM"), std::string::npos);
}

}  // namespace
}  // namespace shepherd::testing
