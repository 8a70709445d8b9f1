#include "agent/fence_keeper.h"

#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "agent/process.h"
#include "core/child_process.h"
#include "core/json.h"

namespace shepherd::agent {
namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

std::string LeasePath(const std::string& state_dir) {
  return (fs::path(state_dir) / "lease").string();
}

void SignalAll(const std::vector<pid_t>& groups, int sig) {
  for (pid_t g : groups) {
    SignalGroup(g, sig);
    if (sig == SIGTERM) SignalGroup(g, SIGCONT);  // a SIGSTOPped rank gets to act on the TERM
  }
}

// True when `pid` is still the process the agent recorded (same start time, /proc/<pid>/stat field 22),
// running or exited but not yet reaped by its (stopped) agent: either way its process group id cannot have
// been reused, and the group may hold more of the rank's processes.
bool IsRecordedLeader(pid_t pid, std::uint64_t start_time) {
  if (pid <= 1) return false;
  std::optional<ProcStat> s = ReadProcStat(pid);  // a zombie counts: its group id is not reused yet
  return s && s->start_time == start_time;
}

// The keeper's loop (in the child: no logging, no threads). While the agent lives it enforces whatever
// lease the file holds. Once the agent is gone (crashed, killed, stopped for good) it enforces the lease
// the agent left and returns when that is done, or when the file changes or goes (a new agent renewed the
// lease it adopted the ranks with, or adopted none and removed it): the daemon hands a silent node's ranks to
// other agents only once its lease has expired, so the ranks must be stopped by then even without an agent.
void KeepFence(const std::string& state_dir, pid_t agent, std::chrono::milliseconds interval) {
  FenceProgress progress;
  std::optional<Lease> left;  // the agent's last lease, once the agent is gone
  for (;;) {
    std::optional<Lease> lease = ReadLease(state_dir);
    if (::getppid() != agent) {
      if (!left) left = lease;
      if (!left || !lease || lease->until != left->until || progress.killed == left->until) return;
    }
    switch (NextFenceStep(lease, Clock::now(), progress)) {
      case FenceStep::kTerm:
        SignalAll(RunningRankGroups(state_dir), SIGTERM);
        break;
      case FenceStep::kKill:
        SignalAll(RunningRankGroups(state_dir), SIGKILL);
        break;
      case FenceStep::kNone:
        break;
    }
    Clock::time_point wake = Clock::now() + interval;
    if (lease && progress.termed != lease->until)
      wake = std::min(wake, lease->until - lease->grace);
    else if (lease && progress.killed != lease->until)
      wake = std::min(wake, lease->until);
    std::this_thread::sleep_until(wake);
  }
}

}  // namespace

Status WriteLease(const std::string& state_dir, const Lease& lease) {
  std::string path = LeasePath(state_dir), tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << std::chrono::duration_cast<std::chrono::nanoseconds>(lease.until.time_since_epoch()).count() << ' '
        << lease.grace.count() << '\n';
    out.flush();
    if (!out) return Internal("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return Internal("cannot rename " + tmp + ": " + std::strerror(errno));
  return Status::Ok();
}

void ClearLease(const std::string& state_dir) {
  std::error_code ec;
  fs::remove(LeasePath(state_dir), ec);
}

std::optional<Lease> ReadLease(const std::string& state_dir) {
  std::ifstream in(LeasePath(state_dir));
  long long until_ns = 0, grace_ms = -1;
  if (!(in >> until_ns >> grace_ms) || grace_ms < 0) return std::nullopt;
  return Lease{Clock::time_point(std::chrono::nanoseconds(until_ns)), std::chrono::milliseconds(grace_ms)};
}

FenceStep NextFenceStep(const std::optional<Lease>& lease, Clock::time_point now, FenceProgress& progress) {
  if (!lease) return FenceStep::kNone;
  if (now >= lease->until && progress.killed != lease->until) {
    progress.killed = progress.termed = lease->until;
    return FenceStep::kKill;
  }
  if (now >= lease->until - lease->grace && progress.termed != lease->until) {
    progress.termed = lease->until;
    return FenceStep::kTerm;
  }
  return FenceStep::kNone;
}

std::vector<pid_t> RunningRankGroups(const std::string& state_dir) {
  std::ifstream in((fs::path(state_dir) / "processes.json").string());
  std::stringstream ss;
  ss << in.rdbuf();
  Result<Json> j = ParseJsonText(ss.str());
  std::vector<pid_t> out;
  if (!j.ok() || !j->is_object() || !j->contains("processes") || !(*j)["processes"].is_array()) return out;
  for (const Json& e : (*j)["processes"]) {
    if (!e.is_object() || e.value("state", "") != "running") continue;
    const Json& pid = e.contains("pid") ? e["pid"] : Json();
    const Json& start = e.contains("start_time") ? e["start_time"] : Json();
    if (!pid.is_number_integer() || !start.is_number_unsigned()) continue;
    if (IsRecordedLeader(pid.get<pid_t>(), start.get<std::uint64_t>())) out.push_back(pid.get<pid_t>());
  }
  return out;
}

Result<pid_t> StartFenceKeeper(const std::string& state_dir, std::chrono::milliseconds interval) {
  pid_t agent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) return Internal(std::string("fork of the fence keeper: ") + std::strerror(errno));
  if (pid > 0) return pid;
  ::prctl(PR_SET_NAME, "shepherd-fence");
  KeepFence(state_dir, agent, interval);
  ::_exit(0);
}

}  // namespace shepherd::agent
