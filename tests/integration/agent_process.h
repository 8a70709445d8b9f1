// A real node agent (`shepherdd agent`) for integration tests, and helpers about its rank processes.
#pragma once

#include <signal.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/json.h"
#include "tests/integration/harness.h"

namespace shepherd::testing {

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A real node agent (`shepherdd agent`) in its own process; SIGKILLed with its ranks at the end.
class AgentProcess {
 public:
  // `server`: the --server list; empty: the daemon on `port`.
  AgentProcess(int port, const std::string& dir, std::vector<std::string> extra = {}, std::string server = "")
      : state_dir_(dir + "/agent"), log_(dir + "/agent.log") {
    if (server.empty()) server = "http://127.0.0.1:" + std::to_string(port);
    // clang-format off
    std::vector<std::string> args = {
        SHEPHERDD_PATH, "agent", "--server", server, "--node-id", "n1",
        "--gpus", "2", "--topology", "spine=s0,leaf=l0", "--state-dir", state_dir_, "--heartbeat-interval",
        "0.2", "--stop-grace", "2", "--long-poll-wait", "5", "--allow-root-ranks"};
    // clang-format on
    args.insert(args.end(), extra.begin(), extra.end());
    pid_ = SpawnWithLog(std::move(args), log_);
  }
  ~AgentProcess() {
    for (pid_t p : RankPids()) kill(-p, SIGKILL);  // each rank leads its own process group
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  // Pids of the rank processes the agent runs (its processes.json).
  std::set<pid_t> RankPids() const {
    std::set<pid_t> out;
    Json procs = Json::parse(ReadFile(state_dir_ + "/processes.json"), nullptr, false);
    if (procs.is_object() && procs.contains("processes")) procs = procs["processes"];
    if (!procs.is_array()) return out;
    for (const Json& p : procs)
      if (p.value("state", "") == "running") out.insert(p.value("pid", 0));
    return out;
  }
  std::string log() const { return ReadFile(log_); }
  pid_t pid() const { return pid_; }
  // The pid of the fence keeper it forked (from its log); 0 until logged.
  pid_t KeeperPid() const {
    std::string text = log();
    std::size_t at = text.find("fence keeper pid ");
    return at == std::string::npos ? 0 : std::atoi(text.c_str() + at + 17);
  }

 private:
  std::string state_dir_, log_;
  pid_t pid_ = -1;
};

inline bool Alive(pid_t pid) {
  // Not a zombie either: the agent reaps its ranks.
  std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = stat.rfind(')');
  return paren != std::string::npos && stat.size() > paren + 2 && stat[paren + 2] != 'Z';
}

}  // namespace shepherd::testing
