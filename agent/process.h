// POSIX process primitives for rank supervision (Linux: /proc). Stateless functions; the Supervisor
// (agent/supervisor.h) owns the process table built from them. All are thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/child_process.h"
#include "core/status.h"

namespace shepherd::agent {

// The Unix identity ranks run as (the agent drops to it in the child, before exec).
struct RunAs {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups (initgroups-style); may be empty
  std::string user;           // for messages and the rank's USER/LOGNAME
  std::string home;           // the rank's HOME; empty: none set
};

// Looks up `user` (a name or a numeric uid) in the passwd database, with its supplementary groups.
Result<RunAs> LookUpUser(const std::string& user);

// What a rank inherits from the agent's environment (`agent_env`, an environ-style array), before the
// assignment's env is overlaid: PATH set to kRankPath, and LANG, LANGUAGE, LC_*, TZ, TMPDIR, HOME, USER,
// LOGNAME passed through; with `run_as`, USER, LOGNAME and HOME are that user's. Nothing else: the agent's
// credentials, proxies, loader and interpreter hooks never reach a rank (docs/agent-protocol.md).
inline constexpr std::string_view kRankPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
std::map<std::string, std::string> RankBaseEnvironment(char** agent_env, const std::optional<RunAs>& run_as);

struct SpawnSpec {
  std::vector<std::string> argv;           // REQUIRES non-empty; argv[0] without '/' is searched
                                           // in env's PATH if set, else in the agent's
  std::map<std::string, std::string> env;  // overlaid on RankBaseEnvironment
  std::string log_path;                    // stdout and stderr are appended here (created 0644)
  std::string cwd;                         // working directory of the child
  // Drop to this identity before exec (setgroups, setgid, setuid, then check that setuid(0) fails). When
  // set, the child is started with fork + execvpe instead of posix_spawnp; a failure to drop is an exit of
  // the child with status 126 (its reason in the log), never a rank running with the agent's identity.
  std::optional<RunAs> run_as;
};

// Starts argv[0] in a new process group whose id is the child's pid, with stdin from /dev/null, an empty
// signal mask and default dispositions (the agent blocks SIGTERM/SIGINT for sigwait). Uses posix_spawnp,
// so a missing program, a bad cwd or an unwritable log path is an error here, not an exit of the child.
// The child is the caller's child: reap it with PollChild.
Result<pid_t> SpawnProcessGroup(const SpawnSpec& spec);

// How a process ended. Both empty: unknown (an adopted process, not our child). Reap children with
// PollChildExit (core/child_process.h); signal their groups with SignalGroup.
using ExitInfo = ChildExit;

// /proc/<pid>/stat's state letter (field 3: 'R', 'S', 'T', 'Z', ...) and start time in clock ticks since
// boot (field 22); nullopt when there is no such process.
struct ProcStat {
  char state = '?';
  std::uint64_t start_time = 0;
};
std::optional<ProcStat> ReadProcStat(pid_t pid);

// Start time of `pid` (ReadProcStat); nullopt when there is no such process or it is a zombie (a zombie has
// exited; only its parent can still read its status).
std::optional<std::uint64_t> ProcessStartTime(pid_t pid);

// True when `pid` exists, is not a zombie, and started at `start_time` (so the pid was not reused).
bool ProcessAlive(pid_t pid, std::uint64_t start_time);

}  // namespace shepherd::agent
