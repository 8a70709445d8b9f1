#include "agent/health_check.h"

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/time.h"

extern char** environ;

namespace shepherd::agent {

HealthCheckResult RunHealthCheck(const std::string& command, std::chrono::milliseconds timeout) {
  HealthCheckResult r;
  int fds[2];
  if (pipe(fds) != 0) {
    r.output = "pipe failed";
    r.at = FormatRfc3339(std::chrono::system_clock::now());
    return r;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);  // its own group: a timeout kills all of it
  posix_spawnattr_setpgroup(&attr, 0);
  const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
  pid_t pid = 0;
  int rc = posix_spawn(&pid, "/bin/sh", &actions, &attr, const_cast<char**>(argv), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    r.output = "cannot start /bin/sh";
    r.at = FormatRfc3339(std::chrono::system_clock::now());
    return r;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool timed_out = false;
  for (;;) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n <= 0) break;  // EOF: the command closed its output (normally: it exited)
    r.output.append(buf, static_cast<size_t>(n));
    if (r.output.size() > 512) r.output.erase(0, r.output.size() - 512);
  }
  close(fds[0]);
  int status = 0;
  if (timed_out) {
    kill(-pid, SIGKILL);
    waitpid(pid, &status, 0);
    r.output += "\n(timed out after " + std::to_string(timeout.count() / 1000) + " s)";
  } else {
    while (waitpid(pid, &status, WNOHANG) == 0) {  // output closed; the exit follows at once
      if (std::chrono::steady_clock::now() > deadline) {
        kill(-pid, SIGKILL);
        waitpid(pid, &status, 0);
        timed_out = true;
        break;
      }
      usleep(10000);
    }
  }
  r.ok = !timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  r.at = FormatRfc3339(std::chrono::system_clock::now());
  return r;
}

HealthCheck::HealthCheck(std::string command, std::chrono::milliseconds interval,
                         std::chrono::milliseconds timeout)
    : command_(std::move(command)), interval_(interval), timeout_(timeout), thread_([this] { Loop(); }) {}

HealthCheck::~HealthCheck() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::optional<HealthCheckResult> HealthCheck::Latest() const {
  std::lock_guard lock(mu_);
  return latest_;
}

void HealthCheck::Loop() {
  int64_t seq = 0;
  std::unique_lock lock(mu_);
  while (!stop_) {
    lock.unlock();
    HealthCheckResult r = RunHealthCheck(command_, timeout_);
    r.seq = ++seq;
    lock.lock();
    latest_ = std::move(r);
    cv_.wait_for(lock, interval_, [this] { return stop_; });
  }
}

}  // namespace shepherd::agent
