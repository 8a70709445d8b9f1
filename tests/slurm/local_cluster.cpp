#include "tests/slurm/local_cluster.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "slurm/subprocess.h"

namespace shepherd::slurm::testing {
namespace {

std::string g_dir;
std::string g_unavailable;
std::string g_start_error = "the cluster was not started";

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

Envp ClusterEnv() {
  return CleanEnvironment({{"SLURM_CONF", g_dir + "/slurm.conf"}});
}

class ClusterEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    if (::geteuid() != 0) {
      g_unavailable = "the local Slurm cluster needs root (slurmd runs job steps as their user)";
      return;
    }
    if (::access("/usr/sbin/slurmctld", X_OK) != 0 || ::access("/usr/sbin/munged", X_OK) != 0) {
      g_unavailable = "slurmctld or munged is not installed (scripts/dev.sh installs them)";
      return;
    }
    char tmpl[] = "/tmp/shepherd-slurm-XXXXXX";
    if (!::mkdtemp(tmpl)) {
      g_start_error = "mkdtemp failed";
      return;
    }
    g_dir = tmpl;
    // SHEPHERD_SLURM_CONSTRAIN_DEVICES=1 (ctest's slurm_constrain_devices_test): two nodes that confine each
    // step to the GPUs it asked for, where this host's cgroups allow it (skipped, with the reason, otherwise).
    const bool constrain = ::getenv("SHEPHERD_SLURM_CONSTRAIN_DEVICES") != nullptr;
    std::vector<std::string> argv{"bash", SHEPHERD_SOURCE_DIR "/scripts/slurm-cluster.sh", "start", g_dir,
                                  "--nodes", constrain ? "2" : "5"};
    if (constrain) argv.push_back("--constrain-devices");
    auto r = RunCommand(argv, CleanEnvironment(), std::chrono::seconds(240));
    if (r.ok() && constrain && r->err.find("cannot constrain devices here") != std::string::npos) {
      g_unavailable = r->err;
      Stop();
      return;
    }
    if (!r.ok() || !r->ok()) {
      g_start_error = "scripts/slurm-cluster.sh start failed: " + (r.ok() ? r->err : r.status().message());
      Stop();
      return;
    }
    ::mkdir((g_dir + "/work").c_str(), 0755);
    ::setenv("SLURM_CONF", (g_dir + "/slurm.conf").c_str(), 1);
    g_start_error.clear();
  }
  void TearDown() override { Stop(); }

 private:
  void Stop() {
    if (g_dir.empty()) return;
    auto r = RunCommand({"bash", SHEPHERD_SOURCE_DIR "/scripts/slurm-cluster.sh", "stop", g_dir},
                        CleanEnvironment(), std::chrono::seconds(120));
    if (!r.ok() || !r->ok()) {
      std::fprintf(stderr, "slurm-cluster.sh stop failed; logs kept in %s\n", g_dir.c_str());
      return;
    }
    if (::getenv("SHEPHERD_KEEP_SLURM_DIR")) {
      std::fprintf(stderr, "cluster directory kept: %s\n", g_dir.c_str());
      return;
    }
    (void)RunCommand({"rm", "-rf", g_dir}, CleanEnvironment(), std::chrono::seconds(60));
  }
};

const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new ClusterEnvironment);

std::string ReadLink(const std::string& path) {
  char buf[4096];
  ssize_t n = ::readlink(path.c_str(), buf, sizeof buf - 1);
  return n < 0 ? "" : std::string(buf, n);
}

std::vector<pid_t> AllPids() {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc");
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end == '\0' && pid > 0) out.push_back(static_cast<pid_t>(pid));
  }
  ::closedir(d);
  return out;
}

pid_t ParentOf(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(in, line);
  std::size_t close = line.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(line.substr(close + 2));
  std::string state;
  pid_t ppid = 0;
  rest >> state >> ppid;
  return ppid;
}

bool HoldsFile(pid_t pid, const std::string& file) {
  std::string fd_dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = ::opendir(fd_dir.c_str());
  if (!d) return false;
  bool found = false;
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] != '.' && ReadLink(fd_dir + "/" + e->d_name) == file) found = true;
  ::closedir(d);
  return found;
}

}  // namespace

const std::string& LocalCluster::unavailable_reason() {
  return g_unavailable;
}
const std::string& LocalCluster::start_error() {
  return g_start_error;
}
const std::string& LocalCluster::dir() {
  return g_dir;
}

std::string LocalCluster::Sh(const std::vector<std::string>& argv) {
  auto r = RunCommand(argv, ClusterEnv(), std::chrono::seconds(60));
  if (!r.ok()) return "<" + r.status().message() + ">";
  return Trim(r->out);
}

std::vector<pid_t> LocalCluster::CrashNode(const std::string& node) {
  std::set<pid_t> roots;
  std::ifstream pidfile(g_dir + "/run/slurmd-" + node + ".pid");
  pid_t slurmd = 0;
  if (pidfile >> slurmd && slurmd > 1) roots.insert(slurmd);
  // slurmstepd of this node: it keeps the node's slurmd log open.
  std::string log = g_dir + "/log/slurmd-" + node + ".log";
  std::vector<pid_t> all = AllPids();
  for (pid_t p : all)
    if (HoldsFile(p, log)) roots.insert(p);
  std::map<pid_t, pid_t> parent;
  for (pid_t p : all) parent[p] = ParentOf(p);
  std::vector<pid_t> victims;
  for (pid_t p : all)
    for (pid_t q = p, depth = 0; q > 1 && depth < 64; q = parent[q], ++depth)
      if (roots.count(q)) {
        victims.push_back(p);
        break;
      }
  for (pid_t p : victims) ::kill(p, SIGKILL);
  return victims;
}

bool LocalCluster::RestartSlurmd(const std::string& node) {
  auto r = RunCommand({"slurmd", "-f", slurm_conf(), "-N", node}, ClusterEnv(), std::chrono::seconds(60));
  return r.ok() && r->ok();
}

bool WaitFor(std::chrono::seconds limit, const std::function<bool()>& done) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (true) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // polling interval
  }
}

}  // namespace shepherd::slurm::testing
