#include "core/child_process.h"

#include <signal.h>
#include <sys/wait.h>

#include <cerrno>

namespace shepherd {

std::optional<ChildExit> PollChildExit(pid_t pid) {
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == 0) return std::nullopt;
  if (r < 0) return ChildExit{};
  if (WIFEXITED(status)) return ChildExit{WEXITSTATUS(status), std::nullopt};
  if (WIFSIGNALED(status)) return ChildExit{std::nullopt, WTERMSIG(status)};
  return std::nullopt;  // stopped/continued are not reported without WUNTRACED/WCONTINUED
}

bool SignalGroup(pid_t pgid, int sig) {
  if (pgid <= 1) return false;
  return ::kill(-pgid, sig) == 0;
}

std::vector<char*> CStrings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (std::string& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace shepherd
