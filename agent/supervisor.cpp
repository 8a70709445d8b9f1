#include "agent/supervisor.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "agent/rank_files.h"
#include "core/redact.h"

namespace shepherd::agent {
namespace fs = std::filesystem;

namespace {

Json OptionalInt(const std::optional<int>& v) {
  return v ? Json(*v) : Json(nullptr);
}
std::optional<int> IntOrNull(const Json& j, const char* f) {
  if (j.contains(f) && j[f].is_number_integer()) return j[f].get<int>();
  return std::nullopt;
}

// The `oom_kill` line of /proc/vmstat; empty when the file or the line is missing.
std::optional<std::uint64_t> ReadOomKills(const std::string& path) {
  std::ifstream in(path);
  std::string name;
  std::uint64_t value = 0;
  while (in >> name >> value)
    if (name == "oom_kill") return value;
  return std::nullopt;
}

// The Python client's progress page, /dev/shm/shepherd-<job>-a<attempt>-r<rank>-<pid>.page: its helper
// removes the name when it exits, but not when the rank's group is killed with it (SIGKILL), and pages of
// stopped ranks piled up in /dev/shm. The rank is gone here and so is its helper.
void RemoveProgressPages(const RankKey& key) {
  const std::string prefix =
      "shepherd-" + key.job + "-a" + std::to_string(key.attempt) + "-r" + std::to_string(key.rank) + "-";
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) == 0 && name.size() > 5 && name.compare(name.size() - 5, 5, ".page") == 0)
      std::filesystem::remove(entry.path(), ec);
  }
}

// The value of `name` in the environment process `pid` started with (/proc/<pid>/environ); "" when unset
// or unreadable.
std::string EnvironmentValue(pid_t pid, const std::string& name) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  const std::string prefix = name + "=";
  std::string entry;
  while (std::getline(in, entry, '\0'))
    if (entry.rfind(prefix, 0) == 0) return entry.substr(prefix.size());
  return "";
}

}  // namespace

Result<std::unique_ptr<Supervisor>> Supervisor::Open(const SupervisorOptions& options) {
  std::error_code ec;
  fs::create_directories(fs::path(options.state_dir) / "logs", ec);
  if (ec) return Internal("agent state dir " + options.state_dir + ": " + ec.message());
  std::unique_ptr<Supervisor> s(new Supervisor(options));
  s->Load();
  s->Save();
  return s;
}

Supervisor::~Supervisor() = default;

std::string Supervisor::log_path(const RankKey& key) const {
  std::string job = key.job;
  for (char& c : job)
    if (c == '/' || c == '\0') c = '_';
  return (fs::path(options_.state_dir) / "logs" /
          (job + "-a" + std::to_string(key.attempt) + "-r" + std::to_string(key.rank) + ".log"))
      .string();
}

void Supervisor::Load() {
  std::string path = (fs::path(options_.state_dir) / "processes.json").string();
  std::ifstream in(path);
  if (!in) return;
  std::stringstream ss;
  ss << in.rdbuf();
  Result<Json> j = ParseJsonText(ss.str());
  if (!j.ok() || !j->is_object() || !j->contains("processes") || !(*j)["processes"].is_array()) {
    spdlog::warn("agent: ignoring malformed {}", path);
    return;
  }
  for (const Json& e : (*j)["processes"]) {
    TrackedProcess p;
    if (!e.is_object() || !e.contains("job") || !e["job"].is_string()) continue;
    p.key = {e["job"].get<std::string>(), IntOrNull(e, "attempt").value_or(0),
             IntOrNull(e, "rank").value_or(0)};
    p.gpu = IntOrNull(e, "gpu").value_or(-1);
    p.pid = IntOrNull(e, "pid").value_or(0);
    p.start_time = e.value("start_time", std::uint64_t{0});
    p.adopted = true;
    if (e.value("state", "") == "running") {
      if (ProcessAlive(p.pid, p.start_time)) {
        p.token = EnvironmentValue(p.pid, "SHEPHERD_TOKEN");  // redacted from what it leaves, as before
        spdlog::info("agent: adopted {} pid {}", ToString(p.key), p.pid);
      } else {
        p.phase = ProcessPhase::kExited;  // ended while no agent watched: code unknown
        spdlog::info("agent: {} pid {} ended while the agent was down", ToString(p.key), p.pid);
      }
    } else {
      p.phase = ProcessPhase::kExited;
      p.exit = {IntOrNull(e, "exit_code"), IntOrNull(e, "signal")};
      if (e.contains("oom_kill") && e["oom_kill"].is_boolean()) p.oom_kill = e["oom_kill"].get<bool>();
      p.error = e.value("error", "");
      p.log_tail = e.value("log_tail", "");
      p.acked = e.value("acked", false);
    }
    p.dump_prefix = e.value("dump_prefix", "");
    p.dump_pipe = e.value("dump_pipe", "");
    p.relay_dir = e.value("relay_dir", "");
    p.fenced = e.value("fenced", false);
    // Written by agents before ranks had their own users: the identity every rank then ran as.
    p.uid = e.contains("uid") && e["uid"].is_number_unsigned()
                ? e["uid"].get<uid_t>()
                : (options_.run_as ? options_.run_as->uid : ::geteuid());
    table_.push_back(std::move(p));
  }
}

void Supervisor::Save() const {
  Json procs = Json::array();
  for (const TrackedProcess& p : table_) {
    Json e = {{"job", p.key.job},
              {"attempt", p.key.attempt},
              {"rank", p.key.rank},
              {"gpu", p.gpu},
              {"pid", p.pid},
              {"start_time", p.start_time},
              {"state", p.phase == ProcessPhase::kExited ? "exited" : "running"},
              {"dump_prefix", p.dump_prefix},
              {"dump_pipe", p.dump_pipe},
              {"relay_dir", p.relay_dir},
              {"uid", p.uid}};
    if (p.fenced) e["fenced"] = true;
    if (p.phase == ProcessPhase::kExited) {
      e["exit_code"] = OptionalInt(p.exit.exit_code);
      e["signal"] = OptionalInt(p.exit.signal);
      if (p.oom_kill) e["oom_kill"] = *p.oom_kill;
      e["error"] = p.error;
      e["log_tail"] = p.log_tail;
      e["acked"] = p.acked;
    }
    procs.push_back(std::move(e));
  }
  fs::path path = fs::path(options_.state_dir) / "processes.json";
  fs::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << Json{{"processes", procs}}.dump(2) << "\n";
    if (!out) {
      spdlog::error("agent: cannot write {}", tmp.string());
      return;
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) spdlog::error("agent: cannot replace {}: {}", path.string(), ec.message());
}

void Supervisor::SetDesired(std::vector<RankAssignment> desired, SteadyTime now, std::vector<RankKey> keep) {
  desired_ = std::move(desired);
  keep_ = std::move(keep);
  Reconcile(now);
}

void Supervisor::StopAll(SteadyTime now, std::optional<std::chrono::milliseconds> grace) {
  SetDesired({}, now);
  if (!grace) return;
  for (TrackedProcess& p : table_) {
    if (p.phase != ProcessPhase::kStopping) continue;
    p.fenced = true;
    if (p.kill_at && *p.kill_at > now + *grace) p.kill_at = now + *grace;
  }
  Save();
}

void Supervisor::Reconcile(SteadyTime now) {
  if (!desired_) return;
  std::vector<ActualProcess> actual;
  for (const TrackedProcess& p : table_) actual.push_back({p.key, p.gpu, p.pid, p.phase});
  ReconcileActions actions = agent::Reconcile(*desired_, actual, keep_);
  for (const StopAction& s : actions.stop) {
    for (TrackedProcess& p : table_)
      if (p.key == s.key && p.pid == s.pid && p.phase == ProcessPhase::kRunning) BeginStop(&p, s.reason, now);
  }
  for (const RankAssignment& a : actions.start) Start(a);
  if (!actions.stop.empty() || !actions.start.empty()) Save();
}

void Supervisor::Start(const RankAssignment& a) {
  SpawnSpec spec;
  spec.argv = a.command;
  spec.env = a.env;
  spec.log_path = log_path(a.key);
  spec.run_as = options_.run_as;
  std::string refused;
  if (!a.run_as.empty()) {
    auto allowed = std::find_if(options_.allowed_run_as.begin(), options_.allowed_run_as.end(),
                                [&](const RunAs& u) { return u.user == a.run_as; });
    if (allowed != options_.allowed_run_as.end()) {
      spec.run_as = *allowed;
    } else {
      refused = "the job's ranks run as user " + a.run_as +
                ", which is not one this agent may run ranks as (its --run-as users): not started";
    }
  }
  auto wd = a.env.find("SHEPHERD_WORKDIR");
  spec.cwd = wd != a.env.end() && !wd->second.empty() ? wd->second : options_.state_dir;
  TrackedProcess p;
  p.key = a.key;
  p.gpu = a.gpu;
  p.uid = spec.run_as ? spec.run_as->uid : ::geteuid();
  if (auto t = a.env.find("SHEPHERD_TOKEN"); t != a.env.end()) p.token = t->second;
  if (!spec.env.count("TORCH_FR_DUMP_TEMP_FILE") || !spec.env.count("TORCH_NCCL_DEBUG_INFO_PIPE_FILE")) {
    fs::path dir = fs::path(options_.state_dir) / "flight-recorder" /
                   (a.key.job + "-a" + std::to_string(a.key.attempt) + "-r" + std::to_string(a.key.rank));
    std::error_code ec;
    fs::create_directories(dir, ec);
    // The rank writes its dumps (and PyTorch makes its pipe) there: under --run-as it must own it.
    if (!ec && spec.run_as) (void)!::chown(dir.c_str(), spec.run_as->uid, spec.run_as->gid);
    if (!ec) {
      spec.env.try_emplace("TORCH_FR_DUMP_TEMP_FILE", (dir / "nccl_trace_rank_").string());
      spec.env.try_emplace("TORCH_NCCL_DEBUG_INFO_PIPE_FILE", (dir / "nccl_trace_pipe_").string());
    }
  }
  // The rank's reports go through the agent's heartbeats (agent/relay.h); without the directory it posts
  // them itself, as a rank no agent started does.
  if (refused.empty()) {
    std::optional<RelayOwner> owner;
    if (spec.run_as) owner = RelayOwner{spec.run_as->uid, spec.run_as->gid};
    if (Result<std::string> dir = MakeRelayDir(options_.state_dir, a.key, owner); dir.ok()) {
      p.relay_dir = *dir;
      spec.env.insert_or_assign("SHEPHERD_RELAY_DIR", *dir);
    } else {
      spdlog::warn("agent: {}: {}: the rank posts its reports itself", ToString(a.key),
                   dir.status().message());
      spec.env.erase("SHEPHERD_RELAY_DIR");
    }
  }
  if (auto fr = spec.env.find("TORCH_FR_DUMP_TEMP_FILE"); fr != spec.env.end()) p.dump_prefix = fr->second;
  if (auto pipe = spec.env.find("TORCH_NCCL_DEBUG_INFO_PIPE_FILE"); pipe != spec.env.end())
    p.dump_pipe = pipe->second;
  Result<pid_t> pid =
      !refused.empty() ? Result<pid_t>(InvalidArgument(refused))
      : options_.gpus > 0 && a.gpu >= options_.gpus
          ? Result<pid_t>(InvalidArgument("GPU " + std::to_string(a.gpu) + " is not one of this agent's " +
                                          std::to_string(options_.gpus) + " GPUs (--gpus " +
                                          std::to_string(options_.gpus) +
                                          "): the daemon's record of the node has more; not started"))
          : SpawnProcessGroup(spec);
  if (!pid.ok()) {
    spdlog::error("agent: cannot start {}: {}", ToString(a.key), pid.status().message());
    p.phase = ProcessPhase::kExited;
    p.error = Redact(p, pid.status().message());
    ++new_exits_;
  } else {
    p.pid = *pid;
    // A child that already exited (zombie) has no readable start time; waitpid still reaps it.
    p.start_time = ProcessStartTime(p.pid).value_or(0);
    spdlog::info("agent: started {} pid {} gpu {}", ToString(a.key), p.pid, a.gpu);
  }
  table_.push_back(std::move(p));
}

void Supervisor::BeginStop(TrackedProcess* p, const std::string& reason, SteadyTime now) {
  spdlog::info("agent: stopping {} pid {} ({})", ToString(p->key), p->pid, reason);
  p->phase = ProcessPhase::kStopping;
  if (options_.dump_wait.count() > 0 && PokeDumpPipes(p->dump_pipe, p->uid) > 0) {
    spdlog::info("agent: asked {} for a flight-recorder dump; SIGTERM in {} ms", ToString(p->key),
                 options_.dump_wait.count());
    p->term_at = now + options_.dump_wait;
    return;
  }
  Terminate(p, now);
}

void Supervisor::Terminate(TrackedProcess* p, SteadyTime now) {
  SignalGroup(p->pid, SIGTERM);
  SignalGroup(p->pid, SIGCONT);
  p->term_at.reset();
  p->kill_at = now + options_.stop_grace;
}

std::string Supervisor::Redact(const TrackedProcess& p, std::string_view text) const {
  std::vector<std::string> secrets = options_.secrets;
  if (!p.token.empty()) secrets.push_back(p.token);
  return RedactSecrets(text, secrets);
}

std::vector<DumpFile> Supervisor::Dumps(const TrackedProcess& p) const {
  std::vector<DumpFile> dumps = FindDumps(p.dump_prefix, p.uid);
  for (DumpFile& d : dumps) d.path = Redact(p, d.path);
  return dumps;
}

void Supervisor::SampleOomKills(SteadyTime now) {
  std::optional<std::uint64_t> count = ReadOomKills(options_.vmstat_path);
  if (count && oom_kills_ && *count > *oom_kills_) oom_rose_at_ = now;
  oom_kills_ = count;
}

bool Supervisor::Reap(TrackedProcess* p, SteadyTime now) {
  if (p->phase == ProcessPhase::kExited) return false;
  if (p->adopted) {
    if (ProcessAlive(p->pid, p->start_time)) return false;
    p->exit = {};  // not our child: the code is unknown
  } else {
    std::optional<ExitInfo> info = PollChildExit(p->pid);
    if (!info) return false;
    p->exit = *info;
  }
  // A SIGKILL the agent did not send itself (a stop escalates to one) may be the kernel's OOM killer.
  if (p->exit.signal == SIGKILL && p->phase == ProcessPhase::kRunning && oom_kills_)
    p->oom_kill = oom_rose_at_ && now - *oom_rose_at_ <= kOomKillWindow;
  p->phase = ProcessPhase::kExited;
  p->kill_at.reset();
  p->term_at.reset();
  SignalGroup(p->pid, SIGKILL);  // leftovers of the rank's group (workers, shells' children)
  RemoveProgressPages(p->key);
  p->dumps = Dumps(*p);
  if (p->exit.exit_code != 0) p->log_tail = Redact(*p, ReadLogTail(log_path(p->key)));
  std::string how = p->exit.exit_code ? "exited with code " + std::to_string(*p->exit.exit_code)
                    : p->exit.signal  ? "killed by signal " + std::to_string(*p->exit.signal)
                                      : "exited (code unknown: not our child)";
  spdlog::info("agent: {} pid {} {}", ToString(p->key), p->pid, how);
  return true;
}

int Supervisor::Poll(SteadyTime now) {
  SampleOomKills(now);
  bool changed = false;
  for (TrackedProcess& p : table_) {
    if (Reap(&p, now)) {
      ++new_exits_;
      changed = true;
    } else if (p.phase == ProcessPhase::kStopping && p.term_at && now >= *p.term_at) {
      Terminate(&p, now);
    } else if (p.phase == ProcessPhase::kStopping && p.kill_at && now >= *p.kill_at) {
      spdlog::warn("agent: {} pid {} ignored SIGTERM for the grace period: SIGKILL", ToString(p.key), p.pid);
      SignalGroup(p.pid, SIGKILL);
      p.kill_at.reset();
    }
  }
  if (desired_) {
    std::set<RankKey> wanted;
    for (const RankAssignment& a : *desired_) wanted.insert(a.key);
    std::size_t before = table_.size();
    std::erase_if(table_, [&](const TrackedProcess& p) {
      // Its relayed reports go first (each heartbeat answered 200 deletes what it carried).
      if (p.phase != ProcessPhase::kExited || !p.acked || wanted.count(p.key) ||
          HasRelayFiles(p.relay_dir, p.uid))
        return false;
      RemoveRelayDir(p.relay_dir);
      return true;
    });
    changed |= table_.size() != before;
  }
  if (changed) Save();
  Reconcile(now);
  int n = new_exits_;
  new_exits_ = 0;
  return n;
}

std::vector<ProcessReport> Supervisor::Report() const {
  std::vector<ProcessReport> out;
  for (const TrackedProcess& p : table_) {
    if (p.phase != ProcessPhase::kExited) {
      out.push_back({p.key, p.pid, true, std::nullopt, std::nullopt, "", "", Dumps(p)});
    } else if (!p.acked) {
      out.push_back({p.key, p.pid, false, p.exit.exit_code, p.exit.signal, p.error, p.log_tail, p.dumps,
                     p.oom_kill, p.fenced});
    }
  }
  return out;
}

std::vector<Supervisor::Relayed> Supervisor::ReadRelayed() {
  std::vector<const TrackedProcess*> order;
  for (const TrackedProcess& p : table_)
    if (!p.relay_dir.empty() && p.phase != ProcessPhase::kExited) order.push_back(&p);
  for (const TrackedProcess& p : table_)
    if (!p.relay_dir.empty() && p.phase == ProcessPhase::kExited) order.push_back(&p);
  std::vector<Relayed> out;
  if (order.empty()) return out;
  // Running ranks first; among them the start moves on by one each heartbeat.
  std::size_t running = 0;
  while (running < order.size() && order[running]->phase != ProcessPhase::kExited) ++running;
  if (running > 1) {
    std::rotate(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(relay_cursor_ % running),
                order.begin() + static_cast<std::ptrdiff_t>(running));
    ++relay_cursor_;
  }
  std::size_t bytes = 0;
  for (const TrackedProcess* p : order) {
    if (out.size() >= kRelayMaxRanks || bytes >= kRelayMaxHeartbeatBytes) break;
    RelayRead read = ReadRelayDir(p->relay_dir, p->uid, kRelayMaxReports, kRelayMaxBytes,
                                  kRelayMaxHeartbeatBytes - bytes);
    relay_malformed_ += static_cast<std::uint64_t>(read.malformed);
    if (read.malformed > 0)
      spdlog::warn("agent: {}: {} relayed report files deleted unread ({} in all)", ToString(p->key),
                   read.malformed, relay_malformed_);
    if (read.files.empty()) continue;
    bytes += read.bytes;
    out.push_back({p->key, std::move(read)});
  }
  return out;
}

void Supervisor::AckExits(const std::vector<RankKey>& keys) {
  bool changed = false;
  for (const RankKey& k : keys) {
    for (TrackedProcess& p : table_) {
      if (p.key == k && p.phase == ProcessPhase::kExited && !p.acked) {
        p.acked = true;
        changed = true;
      }
    }
  }
  if (changed) Save();
}

}  // namespace shepherd::agent
