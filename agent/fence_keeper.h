// Fence keeper: enforces the agent's lease from a second process, so the ranks of an agent that cannot act
// (SIGSTOPped, held in a debugger, stuck in the kernel) are still stopped when the lease the daemon granted
// runs out; the daemon starts their replacements elsewhere from then on (docs/agent-protocol.md, "Lease").
//
// The agent mirrors its lease into <state-dir>/lease (WriteLease on every renewal, write + rename;
// ClearLease when it has none or cannot write it: a missing file means nothing to enforce). The keeper, a
// child process of the agent, reads that file and <state-dir>/processes.json and takes the agent's own
// fencing steps: SIGTERM then SIGCONT to every running rank's process group at expiry - grace, SIGKILL at
// the expiry (a rank counts only while its pid is the process the agent recorded; never a process the
// agent did not list). When the agent is well both do this at the same moments: the second
// signal to a group is harmless. The keeper outlives an agent that dies or is stopped: it stops the ranks
// by the lease the agent left (when the daemon may start their replacements elsewhere) and exits then, or
// as soon as the lease file goes or changes (a new agent adopted the ranks with that lease and renewed it,
// or adopted none and removed it).
// Times are std::chrono::steady_clock (CLOCK_MONOTONIC: one clock for every process of the machine).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace shepherd::agent {

struct Lease {
  std::chrono::steady_clock::time_point until;  // SIGKILL by then
  std::chrono::milliseconds grace{0};           // SIGTERM this long before `until`
};

// <state-dir>/lease: "<until ns since the steady clock's epoch> <grace ms>\n".
Status WriteLease(const std::string& state_dir, const Lease& lease);
void ClearLease(const std::string& state_dir);
std::optional<Lease> ReadLease(const std::string& state_dir);  // nullopt: absent or malformed

// What the keeper does about `lease` at `now`, given the steps it already took for it (pure).
enum class FenceStep { kNone, kTerm, kKill };
struct FenceProgress {
  std::optional<std::chrono::steady_clock::time_point> termed, killed;  // the lease `until` each step was for
};
FenceStep NextFenceStep(const std::optional<Lease>& lease, std::chrono::steady_clock::time_point now,
                        FenceProgress& progress);

// Process groups of the ranks <state-dir>/processes.json lists as running whose pid is still the recorded
// process (same start time): running, or a zombie its stopped agent has not reaped (its group may still
// hold the rank's other processes, and its id cannot have been reused).
std::vector<pid_t> RunningRankGroups(const std::string& state_dir);

// Forks the keeper for `state_dir` (REQUIRES: the calling process has no other thread yet). The keeper
// polls every `interval` and wakes for each fencing step. Returns its pid.
Result<pid_t> StartFenceKeeper(const std::string& state_dir,
                               std::chrono::milliseconds interval = std::chrono::milliseconds(100));

}  // namespace shepherd::agent
