// The real shepherdd on the etcd store (real etcd members): a job survives a restart, start-up refusals,
// and `shepherdd store export|import` moving records SQLite -> etcd -> SQLite unchanged.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/json.h"
#include "net/http_client.h"
#include "tests/fakes/etcd_cluster.h"
#include "tests/integration/harness.h"

namespace shepherd::testing {
namespace {

std::string NodeBody(const std::string& id) {
  return Json{{"id", id},
              {"gpus", 8},
              {"gpu_memory_gib", 80},
              {"gpu_model", "H100"},
              {"topology", {{"spine", "s0"}, {"leaf", "l0"}}}}
      .dump();
}

std::string JobBody(int gpus) {
  return Json{
      {"name", "t"},
      {"model", {{"parameters", 1e9}, {"layers", 8}, {"hidden", 1024}, {"heads", 8}, {"seq_len", 1024}}},
      {"training", {{"global_batch_size", 64}}},
      {"parallelism", {{"tp", 8}, {"pp", 1}, {"dp", gpus / 8}}},
      {"resources", {{"gpus", gpus}}},
      {"command", {"python3", "train.py"}}}
      .dump();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Ran {
  int code = -1;
  std::string output;
};

// Runs shepherdd with `args`, waits (bounded) for its exit.
Ran Shepherdd(const std::string& dir, std::vector<std::string> args) {
  static int n = 0;
  const std::string log = dir + "/cmd-" + std::to_string(++n) + ".log";
  args.insert(args.begin(), SHEPHERDD_PATH);
  const pid_t pid = SpawnWithLog(args, log);
  Ran r;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int status = 0;
  while (std::chrono::steady_clock::now() < until) {
    if (waitpid(pid, &status, WNOHANG) == pid) {
      r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (r.code == -1) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  r.output = ReadFile(log);
  return r;
}

TEST(EtcdDaemon, AJobSubmittedSurvivesARestart) {
  EtcdCluster etcd(1);
  ASSERT_TRUE(etcd.ok()) << etcd.error();
  TempDir dir;
  std::string job_id;
  {
    Daemon d(dir.path, {"--store", etcd.store_url(), "--store-prefix", "/fleet-a"});
    ASSERT_TRUE(d.WaitReady()) << d.log();
    ASSERT_EQ(Http(d.port(), "POST", "/v1/nodes", NodeBody("n1")).status, 201);
    HttpResult job = Http(d.port(), "POST", "/v1/jobs", JobBody(8));
    ASSERT_EQ(job.status, 201) << job.body;
    job_id = Json::parse(job.body)["id"].get<std::string>();
    d.Signal(SIGTERM);
    ASSERT_EQ(d.Wait(), 0) << d.log();
    EXPECT_NE(d.log().find("prefix /fleet-a"), std::string::npos) << d.log();
  }
  Daemon again(dir.path, {"--store", etcd.store_url(), "--store-prefix", "/fleet-a"});
  ASSERT_TRUE(again.WaitReady()) << again.log();
  HttpResult got = Http(again.port(), "GET", "/v1/jobs/" + job_id);
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(Json::parse(got.body)["id"], job_id);
  EXPECT_EQ(Http(again.port(), "GET", "/v1/nodes/n1").status, 200);
  EXPECT_FALSE(std::filesystem::exists(dir.path + "/shepherd.db"));  // nothing went to SQLite
}

TEST(EtcdDaemon, StartUpRefusalsAreClearAndWriteNothing) {
  TempDir dir;
  // Unreachable: a one-line refusal naming the endpoint, in bounded time.
  Ran unreachable = Shepherdd(dir.path, {"--listen", "127.0.0.1:0", "--store", "etcd://127.0.0.1:1"});
  EXPECT_EQ(unreachable.code, 1) << unreachable.output;
  EXPECT_NE(unreachable.output.find("http://127.0.0.1:1"), std::string::npos) << unreachable.output;
  // Malformed, or given twice.
  Ran bad = Shepherdd(dir.path, {"--store", "etcd://h"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.output.find("--store 'etcd://h'"), std::string::npos) << bad.output;
  Ran both = Shepherdd(dir.path, {"--store", "sqlite://" + dir.path + "/a.db", "--db", dir.path + "/b.db"});
  EXPECT_EQ(both.code, 2);
  EXPECT_NE(both.output.find("name different databases"), std::string::npos) << both.output;
  Ran prefix = Shepherdd(dir.path, {"--store", "etcd://127.0.0.1:1", "--store-prefix", "fleet/"});
  EXPECT_EQ(prefix.code, 2);
  EXPECT_NE(prefix.output.find("--store-prefix 'fleet/'"), std::string::npos) << prefix.output;

  // Another application's keys under the prefix.
  EtcdCluster etcd(1);
  ASSERT_TRUE(etcd.ok()) << etcd.error();
  const std::string key = "/theirs/config";
  {
    auto c = net::HttpClient::Create({.base_url = etcd.endpoint(0)});
    // "/theirs/config" = "L3RoZWlycy9jb25maWc=", "v" = "dg==".
    auto r = (*c)->Request("POST", "/v3/kv/put", R"({"key":"L3RoZWlycy9jb25maWc=","value":"dg=="})",
                           std::chrono::seconds(5));
    ASSERT_TRUE(r.ok() && r->status == 200);
  }
  Ran foreign = Shepherdd(
      dir.path, {"--listen", "127.0.0.1:0", "--store", etcd.store_url(), "--store-prefix", "/theirs"});
  EXPECT_EQ(foreign.code, 1);
  EXPECT_NE(foreign.output.find("not Shepherd's"), std::string::npos) << foreign.output;
  auto c = net::HttpClient::Create({.base_url = etcd.endpoint(0)});
  // Everything under /theirs/ ("L3RoZWlycy8=" .. "L3RoZWlyczA="): still the one key.
  auto r = (*c)->Request("POST", "/v3/kv/range", R"({"key":"L3RoZWlycy8=","range_end":"L3RoZWlyczA="})",
                         std::chrono::seconds(5));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Json::parse(r->body).value("count", ""), "1") << r->body;
  (void)key;
}

// The configuration file takes the same: store, store_prefix, and findings_retention_days.
TEST(EtcdDaemon, TheConfigFileNamesTheStoreAndRetention) {
  EtcdCluster etcd(1);
  ASSERT_TRUE(etcd.ok()) << etcd.error();
  TempDir dir;
  const std::string good = dir.path + "/good.json", bad = dir.path + "/bad.json";
  std::ofstream(good) << Json{
      {"store", etcd.store_url()},
      {"store_prefix", "/from-config"},
      {"findings_retention_days",
       10}}.dump();
  Daemon d(dir.path, {"--config", good, "--store-prefix", "/from-flag"});  // a flag overrides the file
  ASSERT_TRUE(d.WaitReady()) << d.log();
  EXPECT_NE(d.log().find("prefix /from-flag"), std::string::npos) << d.log();
  std::ofstream(bad) << Json{{"store", "etcd://nowhere"}, {"findings_retention_days", -1}}.dump();
  Ran refused = Shepherdd(dir.path, {"--config", bad});
  EXPECT_EQ(refused.code, 2);
  EXPECT_NE(refused.output.find("store"), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("findings_retention_days"), std::string::npos) << refused.output;
}

// Placing a job records one node_state event per node in the job's own write: on more than 128 nodes that
// is more operations than etcd's default transaction allows. On etcd's default limits (and the daemon's) a
// 200-node job is placed, through the store's stage area, and kept.
TEST(EtcdDaemon, AJobOnMoreNodesThanOneDefaultTransactionIsPlacedOnEtcdsDefaults) {
  EtcdCluster etcd(1);
  ASSERT_TRUE(etcd.ok()) << etcd.error();
  TempDir dir;
  const std::string config = dir.path + "/config.json";
  std::ofstream(config) << Json{{"store", etcd.store_url()}}.dump();
  std::string job;
  {
    Daemon d(dir.path, {"--config", config});
    ASSERT_TRUE(d.WaitReady()) << d.log();
    for (int i = 0; i < 200; ++i)
      ASSERT_EQ(Http(d.port(), "POST", "/v1/nodes", NodeBody("n" + std::to_string(i))).status, 201);
    Json big = Json::parse(JobBody(1600));
    big["training"]["global_batch_size"] = 1600;  // divisible by dp = 200
    HttpResult submitted = Http(d.port(), "POST", "/v1/jobs", big.dump());
    ASSERT_EQ(submitted.status, 201) << submitted.body;
    job = Json::parse(submitted.body)["id"].get<std::string>();
    // The placement was larger than one transaction: staged (the counter moves when its write committed).
    int staged = 0;
    std::string metrics;
    for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
         staged < 1 && std::chrono::steady_clock::now() < until;) {
      metrics = Http(d.port(), "GET", "/metrics").body;
      const size_t at = metrics.find("\nshepherd_store_staged_batches_total ");
      ASSERT_NE(at, std::string::npos) << metrics;
      staged = std::stoi(metrics.substr(at + 37));
      if (staged < 1) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_GE(staged, 1) << metrics;
    d.Signal(SIGTERM);
    ASSERT_EQ(d.Wait(), 0);
  }
  Daemon again(dir.path, {"--config", config});
  ASSERT_TRUE(again.WaitReady()) << again.log();
  HttpResult kept = Http(again.port(), "GET", "/v1/jobs/" + job);
  ASSERT_EQ(kept.status, 200) << kept.body;
  EXPECT_EQ(Json::parse(kept.body)["attempt"], 1) << "placed at submission, and the placement was kept";
  EXPECT_NE(Json::parse(kept.body)["state"], "queued") << kept.body;
  // Below etcd's own default the key is refused by name.
  std::ofstream(config) << Json{{"store", etcd.store_url()}, {"etcd_max_txn_ops", 64}}.dump();
  Ran refused = Shepherdd(dir.path, {"--config", config});
  EXPECT_EQ(refused.code, 2);
  EXPECT_NE(refused.output.find("etcd_max_txn_ops"), std::string::npos) << refused.output;
}

TEST(StoreCommand, ExportImportRoundTripSqliteEtcdSqlite) {
  EtcdCluster etcd(1);
  ASSERT_TRUE(etcd.ok()) << etcd.error();
  TempDir dir;
  const std::string db = dir.path + "/shepherd.db";
  {
    Daemon d(dir.path);
    ASSERT_TRUE(d.WaitReady()) << d.log();
    for (const char* n : {"n1", "n2"})
      ASSERT_EQ(Http(d.port(), "POST", "/v1/nodes", NodeBody(n)).status, 201);
    for (int i = 0; i < 3; ++i) ASSERT_EQ(Http(d.port(), "POST", "/v1/jobs", JobBody(8)).status, 201);
    // A running daemon holds the database: export is refused, pointing at the online backup.
    Ran live = Shepherdd(dir.path,
                         {"store", "export", "--store", "sqlite://" + db, "--out", dir.path + "/live.jsonl"});
    EXPECT_EQ(live.code, 1);
    EXPECT_NE(live.output.find(".backup"), std::string::npos) << live.output;
    EXPECT_FALSE(std::filesystem::exists(dir.path + "/live.jsonl"));
    d.Signal(SIGTERM);
    ASSERT_EQ(d.Wait(), 0);
  }
  const std::string a = dir.path + "/a.jsonl", b = dir.path + "/b.jsonl", c = dir.path + "/c.jsonl";
  Ran e1 = Shepherdd(dir.path, {"store", "export", "--store", "sqlite://" + db, "--out", a});
  ASSERT_EQ(e1.code, 0) << e1.output;
  Ran i1 = Shepherdd(dir.path, {"store", "import", "--store", etcd.store_url(), "--in", a});
  ASSERT_EQ(i1.code, 0) << i1.output;
  Ran e2 = Shepherdd(dir.path, {"store", "export", "--store", etcd.store_url(), "--out", b});
  ASSERT_EQ(e2.code, 0) << e2.output;
  Ran i2 =
      Shepherdd(dir.path, {"store", "import", "--store", "sqlite://" + dir.path + "/copy.db", "--in", b});
  ASSERT_EQ(i2.code, 0) << i2.output;
  Ran e3 =
      Shepherdd(dir.path, {"store", "export", "--store", "sqlite://" + dir.path + "/copy.db", "--out", c});
  ASSERT_EQ(e3.code, 0) << e3.output;
  const std::string text = ReadFile(a);
  // 2 nodes, 3 jobs and whatever else the daemon keeps (its epoch, attempts): at least 5 record lines.
  EXPECT_GE(std::count(text.begin(), text.end(), '\n'), 2 + 5);
  EXPECT_NE(text.find("\"collection\":\"jobs\""), std::string::npos);
  EXPECT_EQ(ReadFile(b), text);  // same records, same order, same digest
  EXPECT_EQ(ReadFile(c), text);

  // Nothing is overwritten: a second import into etcd, an export over an existing file.
  const std::string before = ReadFile(c);
  Ran again = Shepherdd(dir.path, {"store", "import", "--store", etcd.store_url(), "--in", a});
  EXPECT_EQ(again.code, 1);
  EXPECT_NE(again.output.find("already holds"), std::string::npos) << again.output;
  Ran over = Shepherdd(dir.path, {"store", "export", "--store", etcd.store_url(), "--out", c});
  EXPECT_EQ(over.code, 1);
  EXPECT_EQ(ReadFile(c), before);
  // A missing database is not exported as an empty one (and is not created).
  Ran missing = Shepherdd(dir.path, {"store", "export", "--store", "sqlite://" + dir.path + "/typo.db",
                                     "--out", dir.path + "/typo.jsonl"});
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.output.find("no database at"), std::string::npos) << missing.output;
  EXPECT_FALSE(std::filesystem::exists(dir.path + "/typo.db"));
  // A file cut short writes nothing.
  std::ofstream(dir.path + "/cut.jsonl") << text.substr(0, text.rfind("{\"digest\""));
  Ran cut = Shepherdd(dir.path, {"store", "import", "--store", "sqlite://" + dir.path + "/cut.db", "--in",
                                 dir.path + "/cut.jsonl"});
  EXPECT_EQ(cut.code, 1);
  EXPECT_NE(cut.output.find("nothing was written"), std::string::npos) << cut.output;
  EXPECT_FALSE(std::filesystem::exists(dir.path + "/cut.db"));
}

// The daemon restarted on the imported etcd store serves what the SQLite daemon had.
TEST(StoreCommand, ADaemonOnTheImportedStoreServesTheSameJobs) {
  EtcdCluster etcd(1);
  ASSERT_TRUE(etcd.ok()) << etcd.error();
  TempDir dir;
  std::string job_id;
  {
    Daemon d(dir.path);
    ASSERT_TRUE(d.WaitReady()) << d.log();
    ASSERT_EQ(Http(d.port(), "POST", "/v1/nodes", NodeBody("n1")).status, 201);
    HttpResult job = Http(d.port(), "POST", "/v1/jobs", JobBody(8));
    ASSERT_EQ(job.status, 201);
    job_id = Json::parse(job.body)["id"].get<std::string>();
    d.Signal(SIGTERM);
    ASSERT_EQ(d.Wait(), 0);
  }
  ASSERT_EQ(Shepherdd(dir.path, {"store", "export", "--store", "sqlite://" + dir.path + "/shepherd.db",
                                 "--out", dir.path + "/x.jsonl"})
                .code,
            0);
  ASSERT_EQ(
      Shepherdd(dir.path, {"store", "import", "--store", etcd.store_url(), "--in", dir.path + "/x.jsonl"})
          .code,
      0);
  Daemon d(dir.path, {"--store", etcd.store_url()});
  ASSERT_TRUE(d.WaitReady()) << d.log();
  EXPECT_EQ(Http(d.port(), "GET", "/v1/jobs/" + job_id).status, 200);
}

}  // namespace
}  // namespace shepherd::testing
