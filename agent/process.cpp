#include "agent/process.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <sstream>

extern char** environ;

namespace shepherd::agent {
namespace {

// posix_spawn's attribute and file-action objects, destroyed on every path.
struct SpawnObjects {
  posix_spawnattr_t attr;
  posix_spawn_file_actions_t actions;
  SpawnObjects() {
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_init(&actions);
  }
  ~SpawnObjects() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
  SpawnObjects(const SpawnObjects&) = delete;
  SpawnObjects& operator=(const SpawnObjects&) = delete;
};

std::vector<std::string> MergedEnvironment(const SpawnSpec& spec) {
  std::map<std::string, std::string> merged = RankBaseEnvironment(environ, spec.run_as);
  for (const auto& [k, v] : spec.env) merged[k] = v;
  std::vector<std::string> out;
  out.reserve(merged.size());
  for (const auto& [k, v] : merged) out.push_back(k + "=" + v);
  return out;
}

// argv[0] as execvp would find it under the CHILD's PATH (the overlay's when it sets one, else kRankPath;
// relative PATH entries count from the child's cwd). posix_spawnp would search the agent's PATH instead.
std::string ResolveProgram(const SpawnSpec& spec) {
  const std::string& prog = spec.argv[0];
  if (prog.find('/') != std::string::npos) return prog;
  auto path = spec.env.find("PATH");
  std::string_view dirs = path != spec.env.end() ? std::string_view(path->second) : kRankPath;
  while (true) {
    std::size_t colon = dirs.find(':');
    std::string dir(dirs.substr(0, colon));
    if (dir.empty()) dir = ".";
    std::string candidate = dir + "/" + prog;
    if (candidate[0] != '/' && !spec.cwd.empty()) candidate = spec.cwd + "/" + candidate;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    if (colon == std::string_view::npos) return prog;
    dirs.remove_prefix(colon + 1);
  }
}

// The child side of a privilege-dropping spawn: only async-signal-safe calls until exec.
[[noreturn]] void ChildDropAndExec(const SpawnSpec& spec, int log_fd, const char* program, char** argv,
                                   char** envp) {
  auto fail = [&](const char* what) {
    const char* e = std::strerror(errno);
    (void)!::write(STDERR_FILENO, "shepherd agent: cannot ", 23);
    (void)!::write(STDERR_FILENO, what, std::strlen(what));
    (void)!::write(STDERR_FILENO, ": ", 2);
    (void)!::write(STDERR_FILENO, e, std::strlen(e));
    (void)!::write(STDERR_FILENO, "\n", 1);
    ::_exit(126);
  };
  ::setpgid(0, 0);
  sigset_t empty;
  sigemptyset(&empty);
  ::sigprocmask(SIG_SETMASK, &empty, nullptr);
  for (int sig : kChildDefaultSignals) ::signal(sig, SIG_DFL);
  int in = ::open("/dev/null", O_RDONLY);
  if (in >= 0) ::dup2(in, STDIN_FILENO);
  ::dup2(log_fd, STDOUT_FILENO);
  ::dup2(log_fd, STDERR_FILENO);
  if (!spec.cwd.empty() && ::chdir(spec.cwd.c_str()) != 0) fail("chdir");
  const RunAs& u = *spec.run_as;
  if (::setgroups(u.groups.size(), u.groups.data()) != 0) fail("setgroups");
  if (::setgid(u.gid) != 0) fail("setgid");
  if (::setuid(u.uid) != 0) fail("setuid");
  if (u.uid != 0 && ::setuid(0) == 0) {
    errno = EPERM;
    fail("drop privileges for good (setuid(0) succeeded after the drop)");
  }
  ::execvpe(program, argv, envp);
  ::_exit(127);
}

Result<pid_t> SpawnDroppingPrivileges(const SpawnSpec& spec) {
  int log_fd = ::open(spec.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return Internal("spawn: open log " + spec.log_path + ": " + std::strerror(errno));
  // The rank (another user) appends to its own log.
  (void)!::fchown(log_fd, spec.run_as->uid, spec.run_as->gid);
  std::vector<std::string> argv_s = spec.argv;
  std::vector<std::string> env_s = MergedEnvironment(spec);
  std::vector<char*> argv = CStrings(argv_s);
  std::vector<char*> envp = CStrings(env_s);
  std::string program = ResolveProgram(spec);
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log_fd);
    return Internal(std::string("spawn: fork: ") + std::strerror(errno));
  }
  if (pid == 0) ChildDropAndExec(spec, log_fd, program.c_str(), argv.data(), envp.data());
  ::setpgid(pid, pid);  // also in the child: whichever runs first
  ::close(log_fd);
  return pid;
}

}  // namespace

std::map<std::string, std::string> RankBaseEnvironment(char** agent_env, const std::optional<RunAs>& run_as) {
  std::map<std::string, std::string> out = {{"PATH", std::string(kRankPath)}};
  for (char** e = agent_env; e && *e; ++e) {
    std::string_view entry(*e);
    std::size_t eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    std::string_view name = entry.substr(0, eq);
    const bool passed = name == "LANG" || name == "LANGUAGE" || name == "TZ" || name == "TMPDIR" ||
                        name == "HOME" || name == "USER" || name == "LOGNAME" || name.starts_with("LC_");
    if (passed) out[std::string(name)] = std::string(entry.substr(eq + 1));
  }
  if (run_as) {  // the rank's own identity, not the agent's
    out["USER"] = out["LOGNAME"] = run_as->user;
    if (!run_as->home.empty())
      out["HOME"] = run_as->home;
    else
      out.erase("HOME");
  }
  return out;
}

Result<RunAs> LookUpUser(const std::string& user) {
  struct passwd pw {};
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  const bool numeric = !user.empty() && user.find_first_not_of("0123456789") == std::string::npos;
  int rc = numeric ? ::getpwuid_r(static_cast<uid_t>(std::stoul(user)), &pw, buf.data(), buf.size(), &found)
                   : ::getpwnam_r(user.c_str(), &pw, buf.data(), buf.size(), &found);
  if (rc != 0 || !found) return InvalidArgument("no such user: " + user);
  RunAs r;
  r.uid = pw.pw_uid;
  r.gid = pw.pw_gid;
  r.user = pw.pw_name;
  r.home = pw.pw_dir ? pw.pw_dir : "";
  int n = 64;
  std::vector<gid_t> groups(n);
  if (::getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &n) < 0) {
    groups.resize(n);
    if (::getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &n) < 0) n = 0;
  }
  groups.resize(n);
  r.groups = std::move(groups);
  return r;
}

Result<pid_t> SpawnProcessGroup(const SpawnSpec& spec) {
  if (spec.argv.empty()) return InvalidArgument("spawn: empty command");
  if (spec.run_as) return SpawnDroppingPrivileges(spec);
  SpawnObjects o;
  sigset_t empty, defaults;
  sigemptyset(&empty);
  sigemptyset(&defaults);
  for (int sig : kChildDefaultSignals) sigaddset(&defaults, sig);
  posix_spawnattr_setsigmask(&o.attr, &empty);
  posix_spawnattr_setsigdefault(&o.attr, &defaults);
  posix_spawnattr_setpgroup(&o.attr, 0);
  posix_spawnattr_setflags(&o.attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  // Open the log in the parent: an unwritable path is reported here, with its errno, not as an exit.
  int log_fd = ::open(spec.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return Internal("spawn: open log " + spec.log_path + ": " + std::strerror(errno));
  posix_spawn_file_actions_addopen(&o.actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&o.actions, log_fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&o.actions, log_fd, STDERR_FILENO);
  if (!spec.cwd.empty()) posix_spawn_file_actions_addchdir_np(&o.actions, spec.cwd.c_str());

  std::vector<std::string> argv_s = spec.argv;
  std::vector<std::string> env_s = MergedEnvironment(spec);
  std::vector<char*> argv = CStrings(argv_s);
  std::vector<char*> envp = CStrings(env_s);
  pid_t pid = 0;
  std::string program = ResolveProgram(spec);
  int rc = posix_spawnp(&pid, program.c_str(), &o.actions, &o.attr, argv.data(), envp.data());
  ::close(log_fd);
  if (rc != 0) return Internal("spawn " + spec.argv[0] + ": " + std::strerror(rc));
  return pid;
}

std::optional<ProcStat> ReadProcStat(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  // "pid (comm) state ppid ..." where comm may contain spaces and parentheses: parse after the last ')'.
  std::size_t close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(line.substr(close + 1));
  std::string state;
  if (!(fields >> state) || state.empty()) return std::nullopt;
  std::string skip;
  for (int field = 4; field < 22; ++field) fields >> skip;  // ppid (4) .. itrealvalue (21)
  std::uint64_t start = 0;
  if (!(fields >> start)) return std::nullopt;
  return ProcStat{state[0], start};
}

std::optional<std::uint64_t> ProcessStartTime(pid_t pid) {
  std::optional<ProcStat> s = ReadProcStat(pid);
  if (!s || s->state == 'Z' || s->state == 'X') return std::nullopt;
  return s->start_time;
}

bool ProcessAlive(pid_t pid, std::uint64_t start_time) {
  if (pid <= 0) return false;
  auto t = ProcessStartTime(pid);
  return t && *t == start_time;
}

}  // namespace shepherd::agent
