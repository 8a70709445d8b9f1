#include "slurm/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

#include "core/child_process.h"

extern char** environ;

namespace shepherd::slurm {
namespace {

using Clock = std::chrono::steady_clock;

// PATH lookup against the child's environment (execvpe would use it too, but we resolve in the parent so
// that the child does nothing but dup2 and exec after fork).
std::string Resolve(const std::string& prog, const Envp& env) {
  if (prog.find('/') != std::string::npos) return prog;
  std::string path = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";
  for (const std::string& e : env)
    if (e.rfind("PATH=", 0) == 0) path = e.substr(5);
  std::size_t pos = 0;
  while (true) {
    std::size_t c = path.find(':', pos);
    std::string dir = path.substr(pos, c == std::string::npos ? std::string::npos : c - pos);
    std::string cand = (dir.empty() ? "." : dir) + "/" + prog;
    if (::access(cand.c_str(), X_OK) == 0) return cand;
    if (c == std::string::npos) return prog;
    pos = c + 1;
  }
}

// Forks a child that sets its own process group (with `new_session`, its own session, which is also its
// own group), wires fds 0-2, and execs. Returns the pid once the child's group exists.
Result<pid_t> ForkExec(const std::vector<std::string>& argv_in, const Envp& env_in, int in_fd, int out_fd,
                       int err_fd, const std::string& cwd, bool new_session = false) {
  if (argv_in.empty()) return InvalidArgument("run: empty command");
  std::vector<std::string> argv_s = argv_in, env_s = env_in;
  std::string program = Resolve(argv_s[0], env_s);
  std::vector<char*> argv = CStrings(argv_s), envp = CStrings(env_s);
  // setsid() fails in a process that already leads a group, so the parent cannot also set the child's group
  // as it does below; it waits instead until the child closed `ready` (after setsid, before exec).
  int ready[2] = {-1, -1};
  if (new_session && ::pipe2(ready, O_CLOEXEC) != 0)
    return Internal(std::string("pipe: ") + std::strerror(errno));
  pid_t pid = ::fork();
  if (pid < 0) {
    if (new_session) {
      ::close(ready[0]);
      ::close(ready[1]);
    }
    return Internal(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {  // child: async-signal-safe calls only
    if (new_session)
      ::setsid();  // no controlling terminal, no signal sent to the parent's group or session reaches it
    else
      ::setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig : kChildDefaultSignals) ::signal(sig, SIG_DFL);
    ::dup2(in_fd, 0);
    ::dup2(out_fd, 1);
    ::dup2(err_fd, 2);
    ::close_range(3, ~0U, 0);  // no daemon socket or file leaks into a long-lived srun (closes `ready`)
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) ::_exit(127);
    ::execve(program.c_str(), argv.data(), envp.data());
    ::_exit(127);
  }
  if (!new_session) {
    ::setpgid(pid, pid);  // also from the parent: no race with an early kill(-pid)
    return pid;
  }
  ::close(ready[1]);
  char byte;
  while (::read(ready[0], &byte, 1) < 0 && errno == EINTR) {
  }
  ::close(ready[0]);
  return pid;
}

ExitStatus Decode(int status) {
  if (WIFEXITED(status)) return {WEXITSTATUS(status), 0};
  if (WIFSIGNALED(status)) return {-1, WTERMSIG(status)};
  return {-1, 0};
}

}  // namespace

bool IsSlurmInputVariable(const std::string& name) {
  return name.rfind("SLURM_", 0) == 0 || name.rfind("SBATCH_", 0) == 0 || name.rfind("SRUN_", 0) == 0 ||
         name.rfind("SALLOC_", 0) == 0;
}

Envp CleanEnvironment(const std::vector<std::pair<std::string, std::string>>& overlay) {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string entry(*e);
    std::size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    std::string key = entry.substr(0, eq);
    if (IsSlurmInputVariable(key) && key != "SLURM_CONF") continue;
    env[key] = entry.substr(eq + 1);
  }
  for (const auto& [k, v] : overlay) env[k] = v;
  Envp out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

Result<RunOutput> RunCommand(const std::vector<std::string>& argv, const Envp& env,
                             std::chrono::milliseconds timeout, std::size_t max_output) {
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return Internal(std::string("pipe: ") + std::strerror(errno));
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return Internal(std::string("pipe: ") + std::strerror(errno));
  }
  int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  auto pid = ForkExec(argv, env, null_fd, out_pipe[1], err_pipe[1], "");
  ::close(null_fd);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (!pid.ok()) {
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    return pid.status();
  }
  RunOutput result;
  Clock::time_point deadline = Clock::now() + timeout;
  struct pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_fds = 2;
  bool timed_out = false;
  char buf[8192];
  while (open_fds > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    int r = ::poll(fds, 2, static_cast<int>(std::min<long long>(left, 1000)));
    if (r < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        std::size_t room = max_output > sinks[i]->size() ? max_output - sinks[i]->size() : 0;
        sinks[i]->append(buf, std::min<std::size_t>(room, static_cast<std::size_t>(n)));
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) ::close(f.fd);
  if (timed_out) SignalGroup(*pid, SIGKILL);
  // The pipes are closed; a child that outlives its output is waited for until the deadline, then killed.
  int status = 0;
  while (true) {
    pid_t w = ::waitpid(*pid, &status, timed_out ? 0 : WNOHANG);
    if (w == *pid) break;
    if (w < 0 && errno != EINTR) return Internal(std::string("waitpid: ") + std::strerror(errno));
    if (w == 0) {
      if (Clock::now() >= deadline) {
        timed_out = true;
        SignalGroup(*pid, SIGKILL);
      } else {
        ::usleep(10000);  // polling interval while a child closed its pipes but has not exited
      }
    }
  }
  if (timed_out) return Unavailable(argv[0] + " timed out after " + std::to_string(timeout.count()) + " ms");
  ExitStatus e = Decode(status);
  result.exit_code = e.exit_code;
  result.signal = e.signal;
  if (result.exit_code == 127 && result.out.empty() && result.err.empty())
    return Internal("cannot execute " + argv[0]);
  return result;
}

Result<pid_t> SpawnLogged(const std::vector<std::string>& argv, const Envp& env, const std::string& log_path,
                          const std::string& cwd) {
  int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return Internal("open " + log_path + ": " + std::strerror(errno));
  int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  auto pid = ForkExec(argv, env, null_fd, log_fd, log_fd, cwd, /*new_session=*/true);
  ::close(null_fd);
  ::close(log_fd);
  return pid;
}

std::optional<ExitStatus> PollExit(pid_t pid) {
  std::optional<ChildExit> e = PollChildExit(pid);
  if (!e) return std::nullopt;
  return ExitStatus{e->exit_code.value_or(-1), e->signal.value_or(0)};
}

}  // namespace shepherd::slurm
