// The shared part of the "launcher": "slurm" cluster tests (launch_cluster_test.cpp and
// launch_restart_cluster_test.cpp): LaunchDaemon, a real shepherdd --slurm on the real local Slurm cluster
// (tests/slurm/local_cluster.h) that submits a 4-rank PyTorch DDP job (gloo, CPU; two ranks on each of two
// nodes plus one spare node), and what the tests read of Slurm and /proc (AllocationOf, AllocationGone,
// ProcEnv, RankPid, SrunPid, ReadFile). Needs SHEPHERD_SOURCE_DIR and SHEPHERD_SLURM_RANK_EXEC defined.
#pragma once

#include <dirent.h>
#include <signal.h>
#include <sys/types.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/json.h"
#include "tests/integration/harness.h"
#include "tests/slurm/local_cluster.h"

namespace shepherd::slurm::testing {

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// shepherdd --slurm that launches through Slurm; short reconcile and poll intervals, 5 s stop grace.
struct LaunchDaemon {
  ::shepherd::testing::TempDir dir;
  std::unique_ptr<::shepherd::testing::Daemon> daemon;
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
    daemon = std::make_unique<::shepherd::testing::Daemon>(dir.path, std::move(extra));
  }
  // SIGTERM (its srun steps go on); whether it exited within 30 s.
  bool Stop() {
    daemon->Signal(SIGTERM);
    return daemon->Wait(std::chrono::seconds(30)).has_value();
  }
  int port() const { return daemon->port(); }
  Json Get(const std::string& path) const {
    auto r = ::shepherd::testing::Http(port(), "GET", path);
    return r.status == 200 ? Json::parse(r.body) : Json::object();
  }
  std::string StepLog(const std::string& job, int attempt) const {
    return ReadFile(dir.path + "/slurm-steps/" + job + "-a" + std::to_string(attempt) + ".log");
  }
  // Waits until every node is imported and available in Shepherd.
  bool WaitInventory() const {
    return WaitFor(std::chrono::seconds(60), [&] {
      const Json nodes = Get("/v1/nodes")["nodes"];
      if (nodes.size() != 5) return false;
      for (const Json& n : nodes)
        if (n["state"] != "available") return false;
      return true;
    });
  }
  // The Slurm jobs of this daemon's jobs are cancelled when the test ends, whatever failed (a leftover
  // allocation would hold its nodes from the next test).
  ~LaunchDaemon() {
    daemon.reset();
    LocalCluster::Sh({"scancel", "--jobname=shepherd-job-000001"});
  }
  // Submits a 4-rank DDP job launched through Slurm; returns its id ("" on failure, with the answer in *why).
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
    auto r = ::shepherd::testing::Http(port(), "POST", "/v1/jobs", spec.dump());
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
    return WaitFor(std::chrono::seconds(240), [&] {
      return Get("/v1/jobs/" + job + "/checkpoints").value("last_known_good", Json()).is_string();
    });
  }
  std::string Diagnose(const std::string& job) const {
    return Get("/v1/jobs/" + job).dump() + "\n" + Get("/v1/jobs/" + job + "/failures").dump() + "\n" +
           daemon->log();
  }
};

// The Slurm job id of the allocation Shepherd holds for `job` ("" when none).
inline std::string AllocationOf(const LaunchDaemon& d, const std::string& job) {
  Json a = d.Get("/v1/jobs/" + job).value("slurm_allocation", Json());
  return a.is_object() ? a.value("id", "") : "";
}

inline bool AllocationGone(const std::string& id) {
  return LocalCluster::Sh({"squeue", "-h", "-j", id, "-t", "PENDING,RUNNING,COMPLETING", "-o", "%i"}).empty();
}

// The environment of process `pid`, "NAME=value" each (empty when it is gone).
inline std::set<std::string> ProcEnv(pid_t pid) {
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
inline pid_t RankPid(int port, const std::string& job, int rank) {
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
inline pid_t SrunPid(const std::string& alloc, const std::string& name) {
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

}  // namespace shepherd::slurm::testing
