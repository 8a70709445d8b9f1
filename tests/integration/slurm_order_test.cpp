// The launch-order fence's wrapper side (docs/slurm.md, "One step per attempt") against the real shepherdd
// on port 0: `shepherd-slurm-rank` runs its command when the daemon confirms the step's launch order, exits
// 121 without running it when the order is not the attempt's current one, and 122 after a bounded wait when
// no daemon answers. No Slurm here: the job is a "launcher": "slurm" job whose allocation record is set
// running in the database between two daemon starts (what the launch worker would have recorded); the
// daemon's Slurm configuration names no cluster, so its workers reach none and change nothing.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>
#include <vector>

#include "core/json.h"
#include "slurm/subprocess.h"
#include "tests/integration/harness.h"

namespace shepherd::testing {
namespace {

using std::chrono::seconds;

std::string SlurmJob() {
  return Json{
      {"name", "fenced"},
      {"launcher", "slurm"},
      {"model",
       {{"parameters", 1e6}, {"layers", 2}, {"hidden", 64}, {"heads", 4}, {"seq_len", 64}, {"vocab", 1000}}},
      {"training", {{"global_batch_size", 64}, {"micro_batch_size", 1}}},
      {"parallelism", {{"tp", 1}, {"pp", 1}, {"dp", 2}, {"zero_stage", 0}}},
      {"resources", {{"gpus", 2}, {"gpus_per_node", 2}, {"gpu_memory_gib", 80}}},
      {"command", {"/bin/true"}}}
      .dump();
}

struct Wrapper {
  int exit_code = -1;
  std::string output;
  double seconds = 0;
};

// Runs the wrapper as a task of `job`'s attempt 1 in allocation 41 under launch order `order`, its command
// touching `marker`.
Wrapper RunWrapper(const std::string& url, const std::string& job, int order, const std::string& marker,
                   const std::string& timeout_s = "20") {
  const slurm::Envp env = {"PATH=/usr/bin:/bin",
                           "SLURM_PROCID=0",
                           "SLURMD_NODENAME=n0",
                           "SLURM_JOB_ID=41",
                           "SHEPHERD_SLURM_NODES=n0",
                           "SHEPHERD_SLURM_GPUS=0",
                           "SHEPHERD_SLURM_COORDS=0.0.0",
                           "SHEPHERD_SLURM_ORDER=" + std::to_string(order),
                           "SHEPHERD_SLURM_ORDER_TIMEOUT_S=" + timeout_s,
                           "SHEPHERD_JOB=" + job,
                           "SHEPHERD_ATTEMPT=1",
                           "SHEPHERD_URL=" + url};
  const auto start = std::chrono::steady_clock::now();
  auto r = slurm::RunCommand({SHEPHERD_SLURM_RANK_EXEC, "/usr/bin/touch", marker}, env, seconds(120));
  Wrapper w;
  w.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!r.ok()) {
    w.output = r.status().message();
    return w;
  }
  w.exit_code = r->exit_code;
  w.output = r->out + r->err;
  return w;
}

TEST(SlurmOrder, TheWrapperRunsItsCommandOnlyUnderTheOrderTheDaemonConfirms) {
  TempDir dir;
  std::ofstream(dir.path + "/config.json") << Json{
      {"slurm",
       {{"slurm_conf", dir.path + "/no-cluster/slurm.conf"},
        {"reconcile_interval_s", 30},
        {"launch_poll_s", 30}}}}.dump();
  const std::vector<std::string> args = {"--config", dir.path + "/config.json"};
  std::string job;
  {
    Daemon d(dir.path, args);
    ASSERT_TRUE(d.WaitReady()) << d.log();
    ASSERT_EQ(Http(d.port(), "POST", "/v1/nodes",
                   Json{{"id", "n0"},
                        {"gpus", 2},
                        {"gpu_memory_gib", 80},
                        {"gpu_model", "H100"},
                        {"topology", {{"spine", "s0"}, {"leaf", "l0"}}}}
                       .dump())
                  .status,
              201);
    HttpResult created = Http(d.port(), "POST", "/v1/jobs", SlurmJob());
    ASSERT_EQ(created.status, 201) << created.body;
    job = Json::parse(created.body)["id"];
    // Placed: attempt 1 and its allocation record (wanted; no worker runs without --slurm) with order 1.
    ASSERT_TRUE(Eventually(
        [&] { return Json::parse(Http(d.port(), "GET", "/v1/jobs/" + job).body).value("attempt", 0) == 1; }));
    // Durable (the record is in the database), then the daemon is killed: its Slurm workers may be waiting
    // out their commands' timeouts against the missing cluster.
    ASSERT_TRUE(Eventually([&] {
      sqlite3* db = nullptr;
      int n = 0;
      if (sqlite3_open_v2((dir.path + "/shepherd.db").c_str(), &db, SQLITE_OPEN_READONLY, nullptr) ==
          SQLITE_OK) {
        const std::string q = "SELECT count(*) FROM records WHERE key = 'slurm_alloc/" + job +
                              "' AND json_extract(body, '$.order') = 1";
        sqlite3_exec(
            db, q.c_str(),
            [](void* out, int, char** v, char**) {
              *static_cast<int*>(out) = std::atoi(v[0]);
              return 0;
            },
            &n, nullptr);
      }
      sqlite3_close(db);
      return n == 1;
    }));
    d.Signal(SIGKILL);
    ASSERT_TRUE(d.Wait(seconds(30)).has_value());
  }
  // What the launch worker would have recorded: allocation 41 runs.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir.path + "/shepherd.db").c_str(), &db), SQLITE_OK);
  const std::string sql =
      "UPDATE records SET body = json_set(body, '$.state', 'running', '$.id', '41') WHERE key = "
      "'slurm_alloc/" +
      job + "' AND json_extract(body, '$.order') = 1 AND json_extract(body, '$.order_attempt') = 1";
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  EXPECT_EQ(sqlite3_changes(db), 1);
  sqlite3_close(db);

  Daemon d(dir.path, args);
  ASSERT_TRUE(d.WaitReady()) << d.log();
  const std::string url = "http://127.0.0.1:" + std::to_string(d.port());
  const std::string ran = dir.path + "/current-ran", stale = dir.path + "/stale-ran";
  // The current order: the command runs.
  Wrapper current = RunWrapper(url, job, 1, ran);
  EXPECT_EQ(current.exit_code, 0) << current.output;
  EXPECT_EQ(::access(ran.c_str(), F_OK), 0) << current.output;
  // An order that is not the attempt's current one: exit 121, the command not run.
  Wrapper old = RunWrapper(url, job, 2, stale);
  EXPECT_EQ(old.exit_code, 121) << old.output;
  EXPECT_NE(old.output.find("launch order 2 of attempt 1 is not current"), std::string::npos) << old.output;
  EXPECT_NE(::access(stale.c_str(), F_OK), 0);
  // A follower's redirect is followed: an unreachable first endpoint, then the daemon.
  Wrapper listed = RunWrapper("http://127.0.0.1:1," + url, job, 1, ran + "2");
  EXPECT_EQ(listed.exit_code, 0) << listed.output;
  // A bad question is refused with the field named (problem+json), and the wrapper does not run.
  HttpResult bad =
      Http(d.port(), "POST", "/v1/jobs/" + job + "/slurm-order", R"({"allocation":"41","attempt":0})");
  EXPECT_EQ(bad.status, 422) << bad.body;
  EXPECT_NE(bad.body.find("\"attempt\""), std::string::npos) << bad.body;
  EXPECT_NE(bad.body.find("\"order\""), std::string::npos) << bad.body;
  Wrapper unknown = RunWrapper(url, "job-999999", 1, stale);
  EXPECT_EQ(unknown.exit_code, 122) << unknown.output;
  EXPECT_NE(::access(stale.c_str(), F_OK), 0);
  // 32 tasks starting together (each a wrapper process asking once): every one runs its command.
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> tasks;
  std::vector<Wrapper> results(32);
  for (int i = 0; i < 32; ++i)
    tasks.emplace_back([&, i] { results[i] = RunWrapper(url, job, 1, ran + "-task" + std::to_string(i)); });
  for (std::thread& t : tasks) t.join();
  double slowest = 0;
  for (const Wrapper& w : results) {
    EXPECT_EQ(w.exit_code, 0) << w.output;
    slowest = std::max(slowest, w.seconds);
  }
  std::printf("[measure] launch-order check: one wrapper %.3f s; 32 at once %.3f s (slowest %.3f s)\n",
              current.seconds,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), slowest);
  // Nothing of this was read as the attempt's end.
  const Json j = Json::parse(Http(d.port(), "GET", "/v1/jobs/" + job).body);
  EXPECT_EQ(j["state"], "launching") << j.dump();
  EXPECT_EQ(j["attempt"], 1) << j.dump();
}

TEST(SlurmOrder, WithNoDaemonReachableTheWrapperGivesUpAfterItsTimeoutWithoutRunningTheCommand) {
  TempDir dir;
  const std::string marker = dir.path + "/ran";
  Wrapper w = RunWrapper("http://127.0.0.1:1,http://127.0.0.1:2", "job-000001", 1, marker, "2");
  EXPECT_EQ(w.exit_code, 122) << w.output;
  EXPECT_NE(w.output.find("no leader confirmed launch order 1 of attempt 1 within 2 s"), std::string::npos)
      << w.output;
  EXPECT_NE(::access(marker.c_str(), F_OK), 0);
  EXPECT_GE(w.seconds, 1.9);
  EXPECT_LT(w.seconds, 30);  // bounded
}

}  // namespace
}  // namespace shepherd::testing
