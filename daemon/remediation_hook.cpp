#include "daemon/remediation_hook.h"

#include <signal.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "core/json.h"

extern char** environ;

namespace shepherd {
namespace {

void RunOnce(const std::vector<std::string>& argv, const std::string& input, const std::string& id,
             double timeout_s) {
  int fds[2];
  if (pipe(fds) != 0) return spdlog::error("remediation hook for {}: pipe failed", id);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[0], STDIN_FILENO);
  posix_spawn_file_actions_addclose(&actions, fds[1]);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[0]);
  if (rc != 0) {
    close(fds[1]);
    return spdlog::error("remediation hook for {}: cannot start {}: {}", id, argv[0], strerror(rc));
  }
  signal(SIGPIPE, SIG_IGN);  // a hook that does not read its input must not kill the daemon
  for (size_t off = 0; off < input.size();) {
    ssize_t n = write(fds[1], input.data() + off, input.size() - off);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  close(fds[1]);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return spdlog::error("remediation hook for {}: killed after {:.0f} s", id, timeout_s);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
    spdlog::info("remediation hook for {}: done", id);
  else
    spdlog::error("remediation hook for {}: exit status {}", id, status);
}

}  // namespace

RemediationHook MakeProcessHook(std::vector<std::string> argv, double timeout_s) {
  return [argv = std::move(argv), timeout_s](const Finding& f) {
    std::thread([argv, input = ToJson(f).dump(), id = f.id, timeout_s] {
      RunOnce(argv, input, id, timeout_s);
    }).detach();
  };
}

}  // namespace shepherd
