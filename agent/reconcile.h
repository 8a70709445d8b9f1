// The node agent's reconciler: desired rank set (the daemon's assignments answer) against the agent's
// process table, as a pure function. No processes, no clock, no I/O; the Supervisor executes the result.
//
// Rules (docs/agent-protocol.md):
//   - A running process whose (job, attempt, rank) is not desired is stopped, unless it is in `keep` (a
//     process the daemon has no record of, left alone until an operator decides: docs/agent-protocol.md).
//     The reason says "stale attempt" when the same (job, rank) is desired under another attempt, else
//     "not desired". A kept process is not desired: it still defers starts on its GPU or (job, rank).
//   - A desired rank with no entry in the table is started.
//   - A desired rank with ANY entry (running, stopping, or exited, acknowledged or not) is left alone: the
//     agent never restarts a rank whose process exited; a restart is the daemon's decision (new attempt).
//   - A start is deferred while a process that is not desired but still alive (running or stopping) holds
//     the same GPU or the same (job, rank): the new attempt must not race the old one for the device, the
//     rendezvous port or checkpoint files. It is started by a later Reconcile once that process is gone.
#pragma once

#include <sys/types.h>

#include <compare>
#include <map>
#include <string>
#include <vector>

namespace shepherd::agent {

// Identity of one rank process of one attempt.
struct RankKey {
  std::string job;
  int attempt = 0;
  int rank = 0;
  auto operator<=>(const RankKey&) const = default;
  bool operator==(const RankKey&) const = default;
};
std::string ToString(const RankKey& k);  // "job-000001/a2/r5"

// One entry of the assignments answer.
struct RankAssignment {
  RankKey key;
  int gpu = -1;                            // -1: none given
  std::vector<std::string> command;        // argv; REQUIRES non-empty
  std::map<std::string, std::string> env;  // overlaid on RankBaseEnvironment (agent/process.h)
  std::string run_as;  // the Unix user the daemon runs this job's ranks as; empty: the agent's default
};

enum class ProcessPhase { kRunning, kStopping, kExited };

// What the Supervisor knows about one process it started or adopted.
struct ActualProcess {
  RankKey key;
  int gpu = -1;
  pid_t pid = 0;
  ProcessPhase phase = ProcessPhase::kRunning;
};

struct StopAction {
  RankKey key;
  pid_t pid = 0;
  std::string reason;  // "not desired" or "stale attempt"
};

struct ReconcileActions {
  std::vector<RankAssignment> start;  // in the order of `desired`
  std::vector<StopAction> stop;       // in the order of `actual`
  std::vector<RankKey> deferred;      // desired, not started yet, see the rules above
};

// Duplicate keys in `desired` count once (the first wins). Idempotent: applying the actions and calling
// again with the updated table yields no new action until something changes.
ReconcileActions Reconcile(const std::vector<RankAssignment>& desired,
                           const std::vector<ActualProcess>& actual, const std::vector<RankKey>& keep = {});

}  // namespace shepherd::agent
