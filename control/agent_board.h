// AgentBoard: the node agents (docs/agent-protocol.md) as the daemon sees them.
// Owns: per node, the agent's last heartbeat, whether it is lost, which (job, attempt) its live ranks
// belong to and which GPU faults it already reported; per node, the assignments version and the long polls
// waiting on it; per job, the launch gate of a restarted attempt; per node, the processes its agent runs
// that the daemon has no record of (health/unknown_processes.h) and whether its agent has heartbeated since
// the daemon started.
// Threads: changed on the control thread only (its mutators REQUIRES(kControl)); its const methods also
// run on the reader thread under the shared ControlLock (REQUIRES_SHARED(kControl), control/control_lock.h).
// The board decides when a node's long polls are due (a bump, a deadline, a release) and holds them until
// its caller answers them with the node's desired ranks (AnswerDue, with the ranks the Controller composes
// from jobs and checkpoints): it calls nothing back. It withholds the ranks of jobs whose gate is closed.
// Invariants: a version only grows; every waiter is answered exactly once (on a bump, its deadline, or
// ReleaseWaiters); a gate opens once no live agent runs an older attempt of the job, or at its deadline,
// but never while a lost agent that ran an older attempt may still hold its lease (fencing: its ranks are
// stopped by the agent itself at the lease's expiry, last heartbeat + lease_s; with replicas, also
// no sooner than the gate's attempt was durable + renewal_s + lease_s, since a follower may have renewed
// the lease from a view up to renewal_s old that still assigned it the older attempt,
// daemon/follower_lease.h); a node's long poll is not answered before its agent's first heartbeat since the
// daemon started (an answer that did not know the node's processes could stop them), and an agent that cannot
// `keep` gets 503 instead of an answer while its node has undecided unknown processes (it would stop them).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "control/callbacks.h"
#include "control/control_lock.h"
#include "core/agent_protocol.h"
#include "core/time.h"
#include "health/unknown_processes.h"

namespace shepherd {

// A node's desired ranks, as the caller composes them (AnswerDue).
using AssignmentSource = std::function<std::vector<RankAssignment>(const std::string& node)>;

class AgentBoard {
 public:
  // lease_s: how long after its last heartbeat a lost agent may still run ranks (it stops them by then).
  // unknown_timeout_s: how long an unknown process is kept undecided (<= 0: until an operator decides).
  // renewal_s: replicated mode, the oldest view a follower renews a lease from (0: no follower renews).
  explicit AgentBoard(double node_timeout_s, double lease_s = 0, double unknown_timeout_s = 0,
                      double renewal_s = 0)
      : node_timeout_s_(node_timeout_s),
        lease_s_(lease_s),
        unknown_timeout_s_(unknown_timeout_s),
        renewal_s_(renewal_s) {}

  struct HeartbeatOutcome {
    bool back = false;                 // the agent had been declared lost
    std::vector<ProcessStatus> exits;  // rank processes that exited (acknowledged in the answer)
    std::vector<GpuFault> new_faults;  // GPU faults not reported before
    int health_check_passes = 0;       // consecutive passing runs of the node's health check
  };
  // `knows`: whether the daemon has a record of a running process's (job, attempt); those it has not are
  // tracked as unknown. The node's long polls are answered when this is its first heartbeat since the
  // daemon started or its keep list changed.
  // `cordoned_at`: the node's cordon, if any; passes count from a new cordon on (those before it say
  // nothing about what it was cordoned for).
  HeartbeatOutcome OnHeartbeat(const std::string& node, const AgentHeartbeat& hb, Time now,
                               const KnowsAttempt& knows, std::optional<Time> cordoned_at = std::nullopt)
      REQUIRES(kControl);
  // Agents silent for the node timeout, counted from max(last heartbeat, listening_since) (the daemon's own
  // stalls are not the agents' silence, health/lateness.h): declared lost now (once per silence). Their
  // nodes (sorted) with how long each was silent.
  std::vector<std::pair<std::string, Duration>> CheckLiveness(Time now, Time listening_since = Time{})
      REQUIRES(kControl);
  // Recovery at start-up: an attached agent gets a full timeout from now (liveness was not persisted). What
  // it runs is unknown until it heartbeats: if it is lost first, every gate waits for its lease, counted
  // from now (the previous run may have answered it just before it stopped) and as long as the longer of
  // this run's lease and `granted_lease_s`, the lease the previous run granted (a lease lowered across a
  // restart: agents still hold the old one), plus renewal_s (a follower may have renewed it that long after
  // the previous leader's last change).
  void Restore(const std::string& node, Time now, double granted_lease_s = 0) REQUIRES(kControl) {
    Agent& a = agents_[node];
    a.last_heartbeat = now;
    a.lease_until = now + Seconds(renewal_s_ + std::max(lease_s_, granted_lease_s));
    a.running_unknown = true;
  }

  // Withholds `job`'s ranks from agents until no live agent runs an attempt older than `attempt` (or
  // until `deadline`); `nodes` are bumped when the gate opens.
  void HoldLaunch(const std::string& job, int attempt, std::set<std::string> nodes, Time deadline)
      REQUIRES(kControl);
  // Withholds `job`'s ranks of `attempt` until Saved(job, attempt) (`now` there: when the attempt was
  // durable, from which a follower's renewals of older attempts end within renewal_s): the batch that records
  // the attempt is not durable yet, and ranks an agent starts for an attempt a restarted daemon never heard
  // of are unknown processes to it (a storage stall, then a crash: a false heartbeat_lost and a cordon).
  void HoldUntilSaved(const std::string& job, int attempt, const std::set<std::string>& nodes)
      REQUIRES(kControl);
  void Saved(const std::string& job, int attempt, Time now) REQUIRES(kControl);
  void DropGate(const std::string& job) REQUIRES(kControl) { gates_.erase(job); }
  // Opens due gates (bumping their nodes), drops unknown processes past their timeout from `keep` (bumping
  // their nodes) and answers long polls past their deadline: OpenGates, then ExpireUnknown, then
  // ExpireWaiters. OnTick walks every agent and long poll; a heartbeat calls OpenGates only (O(gates)).
  void OnTick(Time now) REQUIRES(kControl);
  void OpenGates(Time now) REQUIRES(kControl);
  void ExpireWaiters(Time now) REQUIRES(kControl);

  // The node's unknown processes (empty for a node never heard).
  const std::vector<UnknownProcess>& Unknown(const std::string& node) const REQUIRES_SHARED(kControl);
  // The operator's decision: the node's undecided unknown processes are dropped from `keep`, so its agent
  // stops them. Returns how many were undecided (the node is bumped when any).
  int StopUnknownProcesses(const std::string& node) REQUIRES(kControl);

  // The node's desired set changed: its version grows and its long polls are due.
  void Bump(const std::string& node) REQUIRES(kControl);
  // What the node's agent gets: `desired` (the node's desired ranks) without the ranks of gated jobs, the
  // node's version and its keep list.
  Assignments Current(const std::string& node, std::vector<RankAssignment> desired) const
      REQUIRES_SHARED(kControl);
  // Long polls due (answered by AnswerDue): whether any, and answering them, each node's `desired` asked
  // once. Every method below that may make one due says so; the caller answers before its operation ends.
  bool HasDue() const REQUIRES_SHARED(kControl) { return !due_.empty(); }
  void AnswerDue(const AssignmentSource& desired) REQUIRES(kControl);
  // Long poll: due at once when the version differs from `known` or `deadline` has passed; otherwise on
  // the next Bump or the first OnTick at or after `deadline`. Before the node's first heartbeat since the
  // daemon started it waits for that heartbeat, at most until max(deadline, now + node timeout), then
  // answers kUnavailable. `can_keep`: the agent honours `keep` (keep=1); one that does not gets
  // kUnavailable while the node has undecided unknown processes.
  void Watch(const std::string& node, int64_t known, Time deadline, Time now, bool can_keep,
             Done<Assignments> done) REQUIRES(kControl);
  // Makes every pending long poll due now (shutdown: in-flight requests must finish).
  void ReleaseWaiters() REQUIRES(kControl);
  int64_t version(const std::string& node) const REQUIRES_SHARED(kControl);
  // Versions are epoch · kEpochStride + the node's changes in this run, so they never go backwards (nor
  // repeat an answer an agent holds) across daemon restarts. REQUIRES: before any Bump.
  static constexpr int64_t kEpochStride = 1'000'000'000;
  void SetEpoch(int64_t epoch) REQUIRES(kControl) { version_base_ = epoch * kEpochStride; }
  // The node's agent has heartbeated and is not lost.
  bool Live(const std::string& node) const REQUIRES_SHARED(kControl) {
    auto it = agents_.find(node);
    return it != agents_.end() && !it->second.lost;
  }
  // The node's agent's last heartbeat; nullopt when it has not heartbeated since the daemon started, or is
  // declared lost (the exit hold, scheduler/exit_hold.h).
  std::optional<Time> LastHeard(const std::string& node) const REQUIRES_SHARED(kControl) {
    auto it = agents_.find(node);
    if (it == agents_.end() || it->second.lost || it->second.running_unknown) return std::nullopt;
    return it->second.last_heartbeat;
  }
  // The node's agent is live and its last heartbeat listed a running rank process of (job, attempt): the
  // node and the process are there, whatever the ranks' own reports say.
  bool VouchesFor(const std::string& node, const std::string& job, int attempt) const
      REQUIRES_SHARED(kControl) {
    auto it = agents_.find(node);
    if (it == agents_.end() || it->second.lost) return false;
    for (const auto& [j, a] : it->second.running)
      if (j == job && a == attempt) return true;
    return false;
  }

 private:
  struct Agent {
    Time last_heartbeat{};
    Time lease_until{};                   // the latest its ranks may run without an answer (fencing)
    std::vector<UnknownProcess> unknown;  // health/unknown_processes.h
    bool lost = false;
    // (job, attempt) of its rank processes at the last heartbeat (kept when lost: they may run to its lease)
    std::vector<std::pair<std::string, int>> running;
    bool running_unknown = false;       // restored at start-up, no heartbeat yet
    std::set<std::string> faults_seen;  // "gpu:kind" already reported
    int64_t check_seq = 0;              // the last health-check run counted
    int check_passes = 0;               // consecutive passes (since checks_since's cordon)
    std::optional<Time> checks_since;   // the cordon the passes are counted for
  };
  struct Gate {
    int attempt = 0;
    std::set<std::string> nodes;
    Time deadline{};
    bool unsaved = false;  // closed until Saved, whatever the older attempts do
    Time saved_at{};       // when Saved (unset: never waited for)
  };
  struct Waiter {
    Time deadline{};
    bool can_keep = false;
    Done<Assignments> done;
  };
  // The node's agent heartbeated since the daemon started (so its processes are known).
  bool Heard(const std::string& node) const REQUIRES_SHARED(kControl) {
    auto it = agents_.find(node);
    return it != agents_.end() && !it->second.running_unknown;
  }
  // What a waiter gets now: Current, or kUnavailable (see Watch). `desired`: the node's desired ranks.
  Result<Assignments> AnswerFor(const std::string& node, bool can_keep,
                                const std::vector<RankAssignment>& desired) const REQUIRES_SHARED(kControl);
  // The node's waiters `ws` are to be answered (by AnswerDue).
  void MakeDue(const std::string& node, std::vector<Waiter> ws) REQUIRES(kControl);
  void ExpireUnknown(Time now) REQUIRES(kControl);
  struct OlderAttempt {
    bool live = false;    // a live agent still runs it
    bool lost = false;    // a lost agent ran it
    Time fenced_until{};  // the latest lease expiry of a lost agent that ran it
  };
  OlderAttempt OlderAttemptRunning(const std::string& job, int attempt) const REQUIRES_SHARED(kControl);

  double node_timeout_s_;
  double lease_s_;
  double unknown_timeout_s_;
  double renewal_s_;
  std::map<std::string, Agent> agents_;
  std::map<std::string, Gate> gates_;
  std::map<std::string, int64_t> versions_;  // changes per node in this run
  int64_t version_base_ = 0;
  std::map<std::string, std::vector<Waiter>> waiters_;
  std::map<std::string, std::vector<Waiter>> due_;  // long polls to answer now, by node
};

}  // namespace shepherd
