// "launcher": "slurm" end to end: the real shepherdd --slurm launches a real PyTorch DDP job (gloo, CPU)
// on the real local Slurm cluster (tests/slurm/local_cluster.h: n0..n4, two GPUs each, leaves
// l0 = {n0,n1,n2} and l1 = {n3,n4}). Four ranks on two nodes plus one spare node, one srun step per
// attempt. Covers: a short job runs in one step and succeeds, its allocation given back; a node crash
// (slurmd, slurmstepd and the ranks killed) is named, drained in Slurm and the job resumes from its
// last-known-good checkpoint on the spare in a new step; a stopped rank (SIGSTOP) is named and a new step
// starts; a step that ends while no daemon watches is not run again; a running step outlives the daemon
// (kill -9, then SIGTERM) and the next daemon watches it instead of starting a second one; an earlier
// daemon's srun still creating its step is waited for, and an srun of an older launch order started after
// the new daemon's order never runs its command; cancelling the job cancels its allocation. Runs in
// slurm_cluster_test, after the other files.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

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

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// shepherdd --slurm that launches through Slurm; short reconcile and poll intervals, 5 s stop grace.
struct LaunchDaemon {
  TempDir dir;
  std::unique_ptr<Daemon> daemon;
  LaunchDaemon() {
    std::ofstream(dir.path + "/config.json") << Json{
        {"slurm",
         {{"slurm_conf", LocalCluster::slurm_conf()},
          {"reconcile_interval_s", 0.5},
          {"launch_poll_s", 0.3},
          {"rank_exec", SHEPHERD_SLURM_RANK_EXEC},
          // The local cluster's nodes have Gres=gpu:2 (empty device files): each step asks for both, as
          // on a real site (no cgroups here, so nothing is constrained). The rank tables go by sbcast.
          {"request_gpus", true}}},
        {"tick_interval_s", 0.2},
        {"stop_timeout_s", 5}}.dump();
    Restart();
  }
  // A new daemon on the same database and configuration (and `extra` arguments).
  void Restart(std::vector<std::string> extra = {}) {
    extra.insert(extra.begin(), {"--config", dir.path + "/config.json"});
    daemon = std::make_unique<Daemon>(dir.path, std::move(extra));
  }
  // SIGTERM (its srun steps go on); whether it exited within 30 s.
  bool Stop() {
    daemon->Signal(SIGTERM);
    return daemon->Wait(seconds(30)).has_value();
  }
  int port() const { return daemon->port(); }
  Json Get(const std::string& path) const {
    auto r = Http(port(), "GET", path);
    return r.status == 200 ? Json::parse(r.body) : Json::object();
  }
  std::string StepLog(const std::string& job, int attempt) const {
    return ReadFile(dir.path + "/slurm-steps/" + job + "-a" + std::to_string(attempt) + ".log");
  }
  // Waits until every node is imported and available in Shepherd.
  bool WaitInventory() const {
    return WaitFor(seconds(60), [&] {
      const Json nodes = Get("/v1/nodes")["nodes"];
      if (nodes.size() != 5) return false;
      for (const Json& n : nodes)
        if (n["state"] != "available") return false;
      return true;
    });
  }
  // Submits a 4-rank DDP job launched through Slurm; returns its id ("" on failure, with the answer in *why).
  // The Slurm jobs of this daemon's jobs are cancelled when the test ends, whatever failed (a leftover
  // allocation would hold its nodes from the next test).
  ~LaunchDaemon() {
    daemon.reset();
    LocalCluster::Sh({"scancel", "--jobname=shepherd-job-000001"});
  }
  std::string Submit(int steps, std::string* why) const {
    const std::string ckpt = dir.path + "/ckpt";
    Json spec = {
        {"name", "slurm-ddp"},
        {"launcher", "slurm"},
        {"model",
         {{"parameters", 1e6},
          {"layers", 2},
          {"hidden", 64},
          {"heads", 4},
          {"seq_len", 64},
          {"vocab", 1000}}},
        {"training", {{"global_batch_size", 64}, {"micro_batch_size", 1}}},
        {"parallelism", {{"tp", 1}, {"pp", 1}, {"dp", 4}, {"zero_stage", 0}}},
        {"resources", {{"gpus", 4}, {"gpus_per_node", 2}, {"gpu_memory_gib", 80}, {"spare_nodes", 1}}},
        {"command",
         {"/usr/bin/python3", SHEPHERD_SOURCE_DIR "/tests/e2e/train_ddp.py", "--steps", std::to_string(steps),
          "--step-sleep", "0.1", "--ckpt-dir", ckpt, "--ckpt-every", "5", "--sdc-every", "5", "--pg-timeout",
          "60"}},
        {"env", {{"OMP_NUM_THREADS", "1"}, {"PYTHONUNBUFFERED", "1"}}},
        {"checkpoint", {{"dir", ckpt}, {"every_steps", 5}}},
        {"policy",
         {{"heartbeat_interval_s", 0.5},
          {"heartbeat_timeout_s", 3},
          {"hang_timeout_s", 6},
          {"startup_grace_s", 90},
          {"sdc_check_every_steps", 5},
          {"good_after_steps", 3},
          {"restart_backoff_s", 1},
          {"max_restarts", 5}}}};
    auto r = Http(port(), "POST", "/v1/jobs", spec.dump());
    if (r.status != 201) {
      *why = std::to_string(r.status) + " " + r.body;
      return "";
    }
    return Json::parse(r.body)["id"];
  }
  // Waits for the daemon and the imported inventory, submits, and with `until_good` waits for a good
  // checkpoint. The job's id, or "" with what went wrong in *why.
  std::string Start(int steps, bool until_good, std::string* why) const {
    if (!daemon->WaitReady()) {
      *why = "not ready: " + daemon->log();
      return "";
    }
    if (!WaitInventory()) {
      *why = "inventory: " + Get("/v1/nodes").dump();
      return "";
    }
    std::string job = Submit(steps, why);
    if (!job.empty() && until_good && !WaitGoodCheckpoint(job)) {
      *why = "no good checkpoint: " + Diagnose(job);
      return "";
    }
    return job;
  }
  bool WaitGoodCheckpoint(const std::string& job) const {
    return WaitFor(seconds(240), [&] {
      return Get("/v1/jobs/" + job + "/checkpoints").value("last_known_good", Json()).is_string();
    });
  }
  std::string Diagnose(const std::string& job) const {
    return Get("/v1/jobs/" + job).dump() + "\n" + Get("/v1/jobs/" + job + "/failures").dump() + "\n" +
           daemon->log();
  }
};

// The Slurm job id of the allocation Shepherd holds for `job` ("" when none).
std::string AllocationOf(const LaunchDaemon& d, const std::string& job) {
  Json a = d.Get("/v1/jobs/" + job).value("slurm_allocation", Json());
  return a.is_object() ? a.value("id", "") : "";
}

bool AllocationGone(const std::string& id) {
  return LocalCluster::Sh({"squeue", "-h", "-j", id, "-t", "PENDING,RUNNING,COMPLETING", "-o", "%i"}).empty();
}

// The environment of process `pid`, "NAME=value" each (empty when it is gone).
std::set<std::string> ProcEnv(pid_t pid) {
  std::string env = ReadFile("/proc/" + std::to_string(pid) + "/environ");
  std::set<std::string> vars;
  for (std::size_t at = 0; at < env.size();) {
    std::size_t end = env.find('\0', at);
    vars.insert(env.substr(at, end - at));
    at = end == std::string::npos ? env.size() : end + 1;
  }
  return vars;
}

// The pid of rank `rank` of `job` of the daemon on `port`: a process whose environment has SHEPHERD_JOB=job,
// RANK=rank and that daemon's SHEPHERD_URL (job ids repeat across daemons on fresh databases).
pid_t RankPid(int port, const std::string& job, int rank) {
  DIR* proc = ::opendir("/proc");
  pid_t found = -1;
  for (dirent* e; proc && (e = ::readdir(proc)) && found < 0;) {
    pid_t pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    const std::set<std::string> vars = ProcEnv(pid);
    if (vars.count("SHEPHERD_JOB=" + job) && vars.count("RANK=" + std::to_string(rank)) &&
        vars.count("SHEPHERD_URL=http://127.0.0.1:" + std::to_string(port)) &&
        ReadFile("/proc/" + std::to_string(pid) + "/cmdline").find("train_ddp.py") != std::string::npos)
      found = pid;
  }
  if (proc) ::closedir(proc);
  return found;
}

// The pid of the srun process of step `name` in allocation `alloc` (-1 when there is none).
pid_t SrunPid(const std::string& alloc, const std::string& name) {
  DIR* proc = ::opendir("/proc");
  pid_t found = -1;
  for (dirent* e; proc && (e = ::readdir(proc)) && found < 0;) {
    pid_t pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    std::string cmd = ReadFile("/proc/" + std::to_string(pid) + "/cmdline");
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    if (cmd.rfind("srun ", 0) == 0 && cmd.find(" --jobid=" + alloc + " ") != std::string::npos &&
        cmd.find(" --job-name=" + name + " ") != std::string::npos)
      found = pid;
  }
  if (proc) ::closedir(proc);
  return found;
}

TEST(SlurmLaunch, ShortJobRunsAsOneStepSucceedsAndGivesItsAllocationBack) {
  REQUIRE_CLUSTER();
  LaunchDaemon d;
  std::string why;
  const std::string job = d.Start(8, /*until_good=*/false, &why);
  ASSERT_FALSE(job.empty()) << why;
  ASSERT_TRUE(WaitFor(seconds(240), [&] { return d.Get("/v1/jobs/" + job)["state"] == "succeeded"; }))
      << d.Diagnose(job);
  Json placement = d.Get("/v1/jobs/" + job + "/placement");
  EXPECT_EQ(placement["attempt"], 1) << placement.dump();
  std::set<std::string> placed;
  for (const Json& r : placement["ranks"]) placed.insert(r["node"].get<std::string>());
  EXPECT_EQ(placed.size(), 2u) << placement.dump();  // two ranks per two-GPU node
  const std::string log = d.StepLog(job, 1);
  for (int r = 0; r < 4; ++r)
    EXPECT_NE(log.find(std::to_string(r) + ": done at step 8"), std::string::npos) << log;
  // Each rank ran where Shepherd placed it (shepherd-slurm-rank refuses another node) with the agents'
  // variables; the allocation (two nodes and the spare) is cancelled once the job ended.
  const std::string alloc =
      LocalCluster::Sh({"squeue", "-h", "-n", "shepherd-" + job, "-t", "all", "-o", "%i"});
  EXPECT_TRUE(WaitFor(seconds(60), [&] {
    return LocalCluster::Sh({"squeue", "-h", "-n", "shepherd-" + job, "-o", "%i"}).empty();
  })) << LocalCluster::Sh({"squeue"});
  EXPECT_TRUE(d.Get("/v1/jobs/" + job).value("slurm_allocation", Json()).is_null()) << alloc;
}

// A node of the job crashes: its slurmd, slurmstepd and ranks are killed at once.
TEST(SlurmLaunch, NodeCrashIsNamedDrainedAndTrainingResumesOnTheSpare) {
  REQUIRE_CLUSTER();
  LaunchDaemon d;
  std::string why;
  const std::string job = d.Start(100000, /*until_good=*/true, &why);
  ASSERT_FALSE(job.empty()) << why;
  Json alloc = d.Get("/v1/jobs/" + job)["slurm_allocation"];
  ASSERT_EQ(alloc["nodes"].size(), 3u) << alloc.dump();
  Json placement = d.Get("/v1/jobs/" + job + "/placement");
  const std::string victim = placement["ranks"][3]["node"];
  std::set<std::string> before;
  for (const Json& r : placement["ranks"]) before.insert(r["node"].get<std::string>());
  std::string spare;
  for (const Json& n : alloc["nodes"])
    if (!before.count(n.get<std::string>())) spare = n;
  ASSERT_FALSE(spare.empty()) << alloc.dump();
  // Each rank sees its node's two GPUs (gpu_binding per_node): Slurm's gres/gpu plugin unsets a
  // CUDA_VISIBLE_DEVICES srun passes on a GPU node when the step asks for no GPUs, so the value comes from
  // the per-rank tables shepherd-slurm-rank applies.
  for (int r : {0, 3}) {
    const pid_t pid = RankPid(d.port(), job, r);
    ASSERT_GT(pid, 0) << "rank " << r << "\n" << d.Diagnose(job);
    EXPECT_EQ(ProcEnv(pid).count("CUDA_VISIBLE_DEVICES=0,1"), 1u) << "rank " << r;
  }

  EXPECT_FALSE(LocalCluster::CrashNode(victim).empty());
  // Whatever happens below, the node is handed back for the next tests.
  struct HandBack {
    std::string node;
    ~HandBack() {
      LocalCluster::RestartSlurmd(node);
      LocalCluster::Sh({"scontrol", "update", "NodeName=" + node, "State=RESUME"});
      WaitFor(seconds(90), [&] {
        return LocalCluster::Sh({"sinfo", "-n", node, "-h", "-o", "%T"}) == "idle";
      });
    }
  } hand_back{victim};
  // Drained in Slurm with the id and kind of the finding that blamed it, e.g. "shepherd f-000002 node_lost".
  std::string reason;
  ASSERT_TRUE(WaitFor(seconds(180),
                      [&] {
                        reason = LocalCluster::Sh({"sinfo", "-n", victim, "-h", "-o", "%E"});
                        return reason.rfind("shepherd f-", 0) == 0;
                      }))
      << reason << "\n"
      << d.Diagnose(job);
  const std::string finding = reason.substr(9, reason.find(' ', 9) - 9);
  Json named;
  const Json failures = d.Get("/v1/jobs/" + job + "/failures")["failures"];
  for (const Json& f : failures)
    if (f["id"] == finding) named = f;
  ASSERT_TRUE(named.is_object()) << finding << "\n" << d.Diagnose(job);
  EXPECT_EQ(reason, "shepherd " + finding + " " + named["kind"].get<std::string>());
  EXPECT_EQ(named["nodes"], Json::array({victim})) << named.dump();
  EXPECT_EQ(d.Get("/v1/nodes/" + victim)["state"], "failed");
  // A new step on the surviving node and the spare resumes from last-known-good.
  int attempt = 0;
  ASSERT_TRUE(WaitFor(seconds(240), [&] {
    Json j = d.Get("/v1/jobs/" + job);
    attempt = j.value("attempt", 0);
    return j["state"] == "running" && attempt >= 2 &&
           d.StepLog(job, attempt).find("resumed from step") != std::string::npos;
  })) << d.Diagnose(job);
  Json now = d.Get("/v1/jobs/" + job + "/placement");
  std::set<std::string> after;
  for (const Json& r : now["ranks"]) after.insert(r["node"].get<std::string>());
  EXPECT_EQ(after.count(victim), 0u) << now.dump();
  EXPECT_EQ(after.count(spare), 1u) << now.dump();
  const std::string alloc_id = alloc["id"];
  EXPECT_EQ(AllocationOf(d, job), alloc_id);  // the same allocation, a new step

  // Cancelling the job cancels its allocation.
  ASSERT_EQ(Http(d.port(), "POST", "/v1/jobs/" + job + "/cancel").status, 200);
  EXPECT_TRUE(WaitFor(seconds(90), [&] { return AllocationGone(alloc_id); })) << LocalCluster::Sh({"squeue"});
}

TEST(SlurmLaunch, StoppedRankIsNamedAndANewStepStarts) {
  REQUIRE_CLUSTER();
  LaunchDaemon d;
  std::string why;
  const std::string job = d.Start(100000, /*until_good=*/true, &why);
  ASSERT_FALSE(job.empty()) << why;
  const std::string node = d.Get("/v1/jobs/" + job + "/placement")["ranks"][3]["node"];
  pid_t pid = RankPid(d.port(), job, 3);
  ASSERT_GT(pid, 0);
  ASSERT_EQ(::kill(pid, SIGSTOP), 0);
  struct HandBack {  // the culprit's node is cordoned, so drained in Slurm: resumed for the next tests
    std::string node;
    ~HandBack() { LocalCluster::Sh({"scontrol", "update", "NodeName=" + node, "State=RESUME"}); }
  } hand_back{node};
  Json named;
  ASSERT_TRUE(WaitFor(seconds(120), [&] {
    const Json failures = d.Get("/v1/jobs/" + job + "/failures")["failures"];
    for (const Json& f : failures)
      if ((f["kind"] == "hang" || f["kind"] == "heartbeat_lost") && f["ranks"] == Json::array({3})) {
        named = f;
        return true;
      }
    return false;
  })) << d.Diagnose(job);
  EXPECT_EQ(named["nodes"], Json::array({node})) << named.dump();
  ASSERT_TRUE(WaitFor(seconds(240), [&] {
    Json j = d.Get("/v1/jobs/" + job);
    return j["state"] == "running" && j.value("attempt", 0) == 2 &&
           d.StepLog(job, 2).find("resumed from step") != std::string::npos;
  })) << d.Diagnose(job);
  EXPECT_NE(LocalCluster::Sh({"squeue", "-h", "-s", "-o", "%j"}).find("shepherd-a2"), std::string::npos);
  EXPECT_NE(::kill(pid, 0), 0);  // the stopped rank was killed with its step
  const std::string alloc_id = AllocationOf(d, job);
  ASSERT_EQ(Http(d.port(), "POST", "/v1/jobs/" + job + "/cancel").status, 200);
  EXPECT_TRUE(WaitFor(seconds(90), [&] { return AllocationGone(alloc_id); })) << LocalCluster::Sh({"squeue"});
}

// The daemon stops (SIGTERM; its srun and the step go on) and the step ends before a new daemon starts on
// the same database. The new daemon must not run attempt 1 again: a tester's job trained twice from step 1
// that way. The step's end is reported with its exit unknown; whatever recovery then does starts from the
// last-known-good checkpoint.
TEST(SlurmLaunch, AStepThatEndsWhileNoDaemonWatchesIsNotRunAgain) {
  REQUIRE_CLUSTER();
  LaunchDaemon d;
  std::string why;
  const std::string job = d.Start(150, /*until_good=*/true, &why);
  ASSERT_FALSE(job.empty()) << why;
  const std::string alloc_id = AllocationOf(d, job);
  ASSERT_EQ(d.StepLog(job, 1).find("done at step"), std::string::npos);  // still training
  ASSERT_TRUE(d.Stop());
  auto count = [](const std::string& text, const std::string& what) {
    int n = 0;
    for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  ASSERT_TRUE(WaitFor(seconds(240), [&] {
    return count(d.StepLog(job, 1), ": done at step 150") == 4 &&
           LocalCluster::Sh({"squeue", "-h", "-s", "-j", alloc_id, "-o", "%j"}).find("shepherd-a1") ==
               std::string::npos;
  })) << d.StepLog(job, 1);
  d.Restart();
  ASSERT_TRUE(d.daemon->WaitReady()) << d.daemon->log();
  ASSERT_TRUE(WaitFor(seconds(240), [&] { return d.Get("/v1/jobs/" + job)["state"] == "succeeded"; }))
      << d.Diagnose(job);
  EXPECT_EQ(count(d.StepLog(job, 1), "attempt 1: running steps 1..150"), 4) << d.StepLog(job, 1);
  const int attempts = d.Get("/v1/jobs/" + job).value("attempt", 0);
  for (int a = 2; a <= attempts; ++a)
    EXPECT_EQ(count(d.StepLog(job, a), "resumed from step"), 4) << d.StepLog(job, a);
  EXPECT_TRUE(WaitFor(seconds(90), [&] { return AllocationGone(alloc_id); })) << LocalCluster::Sh({"squeue"});
}

// A daemon that stopped between sbatch and recording the allocation's id (a crash, a storage stall): the
// record still wants an allocation and names no id. The next daemon finds the allocation its request made
// (sbatch's comment carries the request's name) and takes it: before, it asked a second time for the same
// nodes, and the job waited behind its own first allocation until that one's time limit. The stopped
// state is made by rewriting the record while no daemon runs, as the crash would have left it.
TEST(SlurmLaunch, AnAllocationWhoseIdWasNeverRecordedIsTakenNotAskedForTwice) {
  REQUIRE_CLUSTER();
  LaunchDaemon d;
  std::string why;
  const std::string job = d.Start(150, /*until_good=*/true, &why);
  ASSERT_FALSE(job.empty()) << why;
  const std::string alloc_id = AllocationOf(d, job);
  ASSERT_FALSE(alloc_id.empty());
  ASSERT_TRUE(d.Stop());
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((d.dir.path + "/shepherd.db").c_str(), &db), SQLITE_OK);
  const std::string sql =
      "UPDATE records SET body = json_set(body, '$.state', 'wanted', '$.id', '') "
      "WHERE collection = 'meta' AND key = 'slurm_alloc/" +
      job + "'";
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  EXPECT_EQ(sqlite3_changes(db), 1);
  sqlite3_close(db);
  d.Restart();
  ASSERT_TRUE(d.daemon->WaitReady()) << d.daemon->log();
  ASSERT_TRUE(WaitFor(seconds(60), [&] { return !AllocationOf(d, job).empty(); })) << d.Diagnose(job);
  EXPECT_EQ(AllocationOf(d, job), alloc_id);
  ASSERT_TRUE(WaitFor(seconds(240), [&] { return d.Get("/v1/jobs/" + job)["state"] == "succeeded"; }))
      << d.Diagnose(job) << LocalCluster::Sh({"squeue", "-o", "%i %j %T %k"});
  EXPECT_NE(d.daemon->log().find("allocation " + alloc_id + " of this request was submitted before"),
            std::string::npos)
      << d.daemon->log();
  EXPECT_EQ(d.daemon->log().find("requested ("), std::string::npos) << "asked for a second allocation";
}

// Slurm work survives the daemon. The daemon is killed (SIGKILL) while attempt 1's step runs, and a new one
// starts on the same address and database; later the same with SIGTERM. Each time: the step's srun (in a
// session of its own, not the daemon's) and its ranks keep running, Slurm lists the one step, the next
// daemon watches that step instead of starting another, the job stays running in attempt 1, and the ranks'
// reports reach the new daemon (the attempt's last step advances past what the old one had seen).
TEST(SlurmLaunch, ARunningStepOutlivesTheDaemonAndTheNextDaemonWatchesIt) {
  REQUIRE_CLUSTER();
  LaunchDaemon d;
  std::string why;
  const std::string job = d.Start(100000, /*until_good=*/true, &why);
  ASSERT_FALSE(job.empty()) << why;
  const std::string alloc_id = AllocationOf(d, job);
  ASSERT_FALSE(alloc_id.empty()) << d.Diagnose(job);
  const int port = d.port();
  std::vector<pid_t> ranks;
  for (int r = 0; r < 4; ++r) {
    ranks.push_back(RankPid(port, job, r));
    ASSERT_GT(ranks.back(), 0) << "rank " << r << "\n" << d.Diagnose(job);
  }
  const pid_t srun = SrunPid(alloc_id, "shepherd-a1-o1");  // attempt 1 under the daemon's launch order 1
  ASSERT_GT(srun, 0) << LocalCluster::Sh({"ps", "-ef"});
  EXPECT_EQ(::getsid(srun), srun);  // a session of its own: the daemon's group or session never reaches it
  EXPECT_NE(::getsid(srun), ::getsid(d.daemon->pid()));
  // The steps Slurm lists in the allocation, by name ("batch" is the holding script's).
  auto step_names = [&] {
    std::vector<std::string> names;
    std::stringstream lines(LocalCluster::Sh({"squeue", "-h", "-s", "-j", alloc_id, "-o", "%j"}));
    for (std::string line; std::getline(lines, line);)
      if (line.rfind("shepherd-", 0) == 0) names.push_back(line);
    return names;
  };
  auto last_step = [&] { return d.Get("/v1/jobs/" + job)["current_attempt"].value("last_step", 0); };
  ASSERT_EQ(step_names(), std::vector<std::string>{"shepherd-a1-o1"});
  const std::vector<std::string> listen = {"--listen", "127.0.0.1:" + std::to_string(port)};
  for (const int sig : {SIGKILL, SIGTERM}) {
    SCOPED_TRACE(sig == SIGKILL ? "after SIGKILL" : "after SIGTERM");
    const int seen = last_step();
    ASSERT_GT(seen, 0) << d.Diagnose(job);
    const auto signalled = std::chrono::steady_clock::now();
    d.daemon->Signal(sig);
    ASSERT_TRUE(d.daemon->Wait(seconds(30)).has_value()) << d.daemon->log();
    // No daemon runs: the step goes on.
    EXPECT_EQ(::kill(srun, 0), 0) << "srun died with the daemon";
    for (pid_t pid : ranks) EXPECT_EQ(::kill(pid, 0), 0) << "rank pid " << pid << " died with the daemon";
    EXPECT_EQ(step_names(), std::vector<std::string>{"shepherd-a1-o1"});
    d.Restart(listen);
    ASSERT_TRUE(d.daemon->WaitReady(seconds(60))) << d.daemon->log();
    ASSERT_EQ(d.port(), port);
    // The ranks' reports reach the new daemon, and it watches the step it found.
    ASSERT_TRUE(WaitFor(seconds(120), [&] { return last_step() > seen + 5; })) << d.Diagnose(job);
    std::printf(
        "[measure] %s: step reports reach the new daemon %.1f s after the signal (last step %d -> %d)\n",
        sig == SIGKILL ? "SIGKILL" : "SIGTERM",
        std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled).count(), seen,
        last_step());
    ASSERT_TRUE(WaitFor(seconds(60), [&] {
      return d.daemon->log().find("already runs (an earlier daemon's): watching it") != std::string::npos;
    })) << d.daemon->log();
    // A few more launch polls (0.3 s each) and ticks: still one step, the same attempt, every rank alive.
    const int now = last_step();
    ASSERT_TRUE(WaitFor(seconds(120), [&] { return last_step() > now + 10; })) << d.Diagnose(job);
    const Json j = d.Get("/v1/jobs/" + job);
    EXPECT_EQ(j["state"], "running") << d.Diagnose(job);
    EXPECT_EQ(j["attempt"], 1) << d.Diagnose(job);
    EXPECT_EQ(step_names(), std::vector<std::string>{"shepherd-a1-o1"});
    EXPECT_EQ(::kill(srun, 0), 0);
    for (int r = 0; r < 4; ++r) EXPECT_EQ(RankPid(port, job, r), ranks[r]) << "rank " << r;
    EXPECT_EQ(d.daemon->log().find(" runs (log "), std::string::npos) << d.daemon->log();  // started none
    EXPECT_EQ(d.Get("/v1/jobs/" + job + "/failures")["failures"].size(), 0u) << d.Diagnose(job);
  }
  EXPECT_EQ(d.StepLog(job, 2), "");  // no second attempt was ever started
  // Cancelling the job stops the adopted step and cancels the allocation.
  ASSERT_EQ(Http(d.port(), "POST", "/v1/jobs/" + job + "/cancel").status, 200);
  EXPECT_TRUE(WaitFor(seconds(90), [&] { return AllocationGone(alloc_id); })) << LocalCluster::Sh({"squeue"});
  EXPECT_TRUE(WaitFor(seconds(60), [&] {
    for (pid_t pid : ranks)
      if (::kill(pid, 0) == 0) return false;
    return true;
  }));
}

// A daemon that died while its srun was still creating the step (between srun's start and Slurm listing the
// step) leaves a successor that sees no step. Made here by stopping the daemon, cancelling the step, putting
// the job back in "launching" as the record stood before the step was known, and leaving a stand-in for
// that srun (a process named srun with its --jobid= and --job-name=) with an empty log. The next daemon
// waits for it and starts nothing while it lives; once it is gone without a task having run, the step is
// started, once.
TEST(SlurmLaunch, AnEarlierSrunStillCreatingItsStepIsWaitedFor) {
  REQUIRE_CLUSTER();
  LaunchDaemon d;
  std::string why;
  const std::string job = d.Start(100000, /*until_good=*/false, &why);
  ASSERT_FALSE(job.empty()) << why;
  ASSERT_TRUE(WaitFor(seconds(240), [&] { return d.Get("/v1/jobs/" + job)["state"] == "running"; }))
      << d.Diagnose(job);
  const std::string alloc_id = AllocationOf(d, job);
  ASSERT_FALSE(alloc_id.empty());
  auto shepherd_steps = [&] {
    std::vector<std::string> steps;  // "ID NAME" of the allocation's steps Shepherd names
    std::stringstream lines(LocalCluster::Sh({"squeue", "-h", "-s", "-j", alloc_id, "-o", "%i %j"}));
    for (std::string line; std::getline(lines, line);)
      if (line.find(" shepherd-") != std::string::npos) steps.push_back(line);
    return steps;
  };
  const std::vector<std::string> before = shepherd_steps();
  ASSERT_EQ(before.size(), 1u) << LocalCluster::Sh({"squeue", "-s"});
  ASSERT_TRUE(d.Stop());
  LocalCluster::Sh({"scancel", before[0].substr(0, before[0].find(' '))});
  ASSERT_TRUE(WaitFor(seconds(60), [&] { return shepherd_steps().empty(); }))
      << LocalCluster::Sh({"squeue", "-s"});
  // The worker named the step's allocation beside its log before starting srun.
  const std::string log = d.dir.path + "/slurm-steps/" + job + "-a1.log";
  EXPECT_EQ(ReadFile(log + ".allocation"), alloc_id + "\n");
  std::ofstream(log, std::ios::trunc).flush();  // no task of it ran
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((d.dir.path + "/shepherd.db").c_str(), &db), SQLITE_OK);
  const std::string sql =
      "UPDATE records SET body = json_set(body, '$.state', 'launching') WHERE collection = 'jobs' AND key = "
      "'" +
      job + "'";
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  EXPECT_EQ(sqlite3_changes(db), 1);
  sqlite3_close(db);
  // The earlier srun, still creating its step.
  const std::string fake = d.dir.path + "/srun";
  ASSERT_EQ(::symlink("/usr/bin/python3", fake.c_str()), 0);
  auto srun = SpawnLogged(
      {fake, "-c", "import time; time.sleep(600)", "--jobid=" + alloc_id, "--job-name=shepherd-a1"},
      CleanEnvironment(), d.dir.path + "/fake-srun.log", "");
  ASSERT_TRUE(srun.ok()) << srun.status().message();
  struct Reap {
    pid_t pid;
    ~Reap() {
      SignalGroup(pid, SIGKILL);
      WaitFor(seconds(30), [&] { return PollExit(pid).has_value(); });
    }
  } reap{*srun};
  d.Restart();
  ASSERT_TRUE(d.daemon->WaitReady()) << d.daemon->log();
  ASSERT_TRUE(WaitFor(seconds(60), [&] {
    return d.daemon->log().find("is still creating step shepherd-a1: waiting for it") != std::string::npos;
  })) << d.Diagnose(job);
  // About 15 launch polls: no step is started while that srun lives.
  EXPECT_FALSE(WaitFor(seconds(5), [&] { return !shepherd_steps().empty(); })) << d.daemon->log();
  EXPECT_EQ(d.daemon->log().find(" runs (log "), std::string::npos) << d.daemon->log();
  SignalGroup(*srun, SIGKILL);
  ASSERT_TRUE(WaitFor(seconds(30), [&] { return PollExit(*srun).has_value(); }));
  // Gone, and no task of it ran: the step is started now, once, and the job runs in attempt 1.
  ASSERT_TRUE(
      WaitFor(seconds(120),
              [&] { return shepherd_steps().size() == 1 && d.Get("/v1/jobs/" + job)["state"] == "running"; }))
      << d.Diagnose(job) << LocalCluster::Sh({"squeue", "-s"});
  EXPECT_EQ(d.Get("/v1/jobs/" + job)["attempt"], 1) << d.Diagnose(job);
  const std::string daemon_log = d.daemon->log();
  const std::size_t started = daemon_log.find(" runs (log ");
  EXPECT_NE(started, std::string::npos) << daemon_log;
  EXPECT_EQ(daemon_log.find(" runs (log ", started + 1), std::string::npos) << daemon_log;

  // The fence, made deterministic (docs/slurm.md, "One step per attempt"): the restarted daemon wrote its
  // own launch order (2) before it started its step. An srun of attempt 1 under the earlier order (1),
  // started now (as an earlier leader's srun on another host would be, had it been slow to create its
  // step), never runs its command: its wrapper asks the daemon and exits 121. The same srun under the
  // current order runs it.
  const std::vector<std::string> now_steps = shepherd_steps();
  ASSERT_EQ(now_steps.size(), 1u);
  EXPECT_NE(now_steps[0].find(" shepherd-a1-o2"), std::string::npos) << now_steps[0];
  const Json nodes = d.Get("/v1/jobs/" + job)["slurm_allocation"]["nodes"];
  ASSERT_FALSE(nodes.empty()) << d.Diagnose(job);
  const std::string node = nodes[0];
  auto by_hand = [&](int order, const std::string& marker) {
    const Envp env = {"PATH=" + std::string(std::getenv("PATH")),
                      "SLURM_CONF=" + LocalCluster::slurm_conf(),
                      "SHEPHERD_SLURM_ORDER=" + std::to_string(order),
                      "SHEPHERD_JOB=" + job,
                      "SHEPHERD_ATTEMPT=1",
                      "SHEPHERD_URL=http://127.0.0.1:" + std::to_string(d.port()),
                      "SHEPHERD_SLURM_ORDER_TIMEOUT_S=20",
                      // A one-task layout of the wrapper's older form (no rank table).
                      "SHEPHERD_SLURM_NODES=" + node, "SHEPHERD_SLURM_GPUS=0", "SHEPHERD_SLURM_COORDS=0.0.0"};
    return RunCommand({"srun", "--jobid=" + alloc_id, "--job-name=shepherd-a1-o" + std::to_string(order),
                       "--ntasks=1", "--nodelist=" + node, "--overlap", "--overcommit", SHEPHERD_SLURM_RANK_EXEC,
                       "/usr/bin/touch", marker},
                      env, std::chrono::seconds(60));
  };
  const std::string stale_marker = d.dir.path + "/stale-order-ran", current_marker = d.dir.path + "/current-ran";
  const auto stale = by_hand(1, stale_marker);
  ASSERT_TRUE(stale.ok()) << stale.status().message();
  EXPECT_NE(stale->exit_code, 0) << stale->out << stale->err;
  EXPECT_NE((stale->out + stale->err).find("exit code 121"), std::string::npos) << stale->out << stale->err;
  EXPECT_NE((stale->out + stale->err).find("launch order 1 of attempt 1 is not current"), std::string::npos)
      << stale->out << stale->err;
  EXPECT_NE(::access(stale_marker.c_str(), F_OK), 0) << "the stale order's command ran";
  const auto current = by_hand(2, current_marker);
  ASSERT_TRUE(current.ok()) << current.status().message();
  EXPECT_EQ(current->exit_code, 0) << current->out << current->err;
  EXPECT_EQ(::access(current_marker.c_str(), F_OK), 0) << current->out << current->err;
  // Neither is read as the attempt's end: the job runs on in attempt 1, its own step with it.
  EXPECT_EQ(d.Get("/v1/jobs/" + job)["state"], "running") << d.Diagnose(job);
  EXPECT_EQ(d.Get("/v1/jobs/" + job)["attempt"], 1) << d.Diagnose(job);
  ASSERT_EQ(Http(d.port(), "POST", "/v1/jobs/" + job + "/cancel").status, 200);
  EXPECT_TRUE(WaitFor(seconds(90), [&] { return AllocationGone(alloc_id); })) << LocalCluster::Sh({"squeue"});
}

}  // namespace
}  // namespace shepherd::slurm
