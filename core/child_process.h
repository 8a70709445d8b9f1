// Process-group helpers shared by the node agent (agent/process.cpp) and the Slurm CLI wrappers
// (slurm/subprocess.cpp): both start children in their own process group, signal the whole group, and
// reap them without blocking. POSIX; no state.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace shepherd {

// Signals a child must start with at their default disposition (the parent may ignore or block them).
inline constexpr int kChildDefaultSignals[] = {SIGTERM, SIGINT,  SIGHUP,  SIGPIPE,
                                               SIGCHLD, SIGQUIT, SIGUSR1, SIGUSR2};

// How a child ended. Both empty: unknown (not our child, or already reaped elsewhere).
struct ChildExit {
  std::optional<int> exit_code;
  std::optional<int> signal;
};

// waitpid(pid, WNOHANG), retried on EINTR: nullopt while the child runs; ChildExit{} when pid is not (or no
// longer) our child. Reaps the child once it ended: do not poll a pid again after it returned a value.
std::optional<ChildExit> PollChildExit(pid_t pid);

// kill(-pgid, sig). False when the group does not exist (ESRCH) or pgid <= 1 (never "every process" or
// init's group by accident).
bool SignalGroup(pid_t pgid, int sig);

// argv/envp for exec: pointers into `v` (which must outlive the result), null-terminated.
std::vector<char*> CStrings(std::vector<std::string>& v);

}  // namespace shepherd
