// RecoveryExecutor: carries out what the pure recovery policy (scheduler/recovery.h) decides.
// Finding → DecideRecovery → node verdicts (Inventory), the attempt stopped and the next one started now,
// after a backoff, queued, or the job failed (JobBook). What a decision means for the job's health (an SDC
// replay started or settled, a poisoned checkpoint demoted) is returned as a HealthUpdate for the health
// owner to apply: JobHealth is read here, never written. Also the user's forced restart (ManualRestart).
// Owns: per job, the restart bookkeeping: a restart waiting for its backoff, when the last automatic
// restart happened and how many came without a healthy stretch in between; the job's open incident
// (scheduler/incidents.h) with copies of the attempts it ended; a restart held by the exit hold
// (scheduler/exit_hold.h).
// Threads: changed on the control thread only (its mutators REQUIRES(kControl)); its const methods also
// run on the reader thread under the shared ControlLock (REQUIRES_SHARED(kControl), control/control_lock.h).
// Invariants: job.restarts counts every automatic restart or requeue against policy.max_restarts, except
// free restarts inside an incident; a pending restart exists only while the job is kRecovering; a held
// restart belongs to the job's current attempt (DueHolds drops it otherwise).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "control/agent_board.h"
#include "control/control_lock.h"
#include "control/inventory.h"
#include "control/job_book.h"
#include "control/job_health.h"
#include "scheduler/exit_hold.h"
#include "scheduler/incidents.h"
#include "scheduler/recovery.h"

namespace shepherd {

// Runs the site's remediation command for a finding of a job Shepherd does not launch (the daemon's
// `remediation_hook`). Must not block the control thread.
using RemediationHook = std::function<void(const Finding&)>;
// Requeues the launcher's job `job.spec.external_id` (with --slurm: `scontrol requeue <SLURM_JOB_ID>`, for
// the job's owner) for finding `f` of a job whose policy.external_remediation is "requeue". Must not block
// the control thread. The outcome comes back through Controller::OnSlurmReport.
using ExternalRequeue = std::function<void(const Job& job, const Finding& f)>;
struct RequeueOutcome {
  std::string finding;  // the finding that asked for it
  std::string job;
  std::string external_id;
  bool requeued = false;
  std::string detail;  // why not: "Slurm shows it COMPLETED", the command's error
  std::string owner;   // who submitted the Shepherd job (tokens file name; "" or "anonymous" without auth)
};

// What recovery needs of a job from the other owners, handed in by the caller with each call (the
// executor calls nothing back).
struct RecoveryContext {
  // The cluster the job's recovery sees when it is not the whole inventory (a Slurm-launched job sees only
  // its allocation, control/launch/slurm_allocations.h); nullopt: the whole inventory.
  std::optional<Cluster> allocation;
  // A job Shepherd does not launch that is bound to a Slurm job the daemon watches: the nodes Slurm lists
  // for it (nullopt: not known). Unset `slurm_bound`: the launcher's nodes are those the inventory holds
  // for the job (its placement).
  bool slurm_bound = false;
  std::optional<std::set<std::string>> slurm_nodes;
  // The agents, for the exit hold (scheduler/exit_hold.h: when each node's agent was last heard); null: no
  // exit hold.
  const AgentBoard* agents = nullptr;
};

class RecoveryExecutor {
 public:
  RecoveryExecutor(Inventory* inventory, JobBook* jobs, RemediationHook hook = nullptr)
      : inventory_(inventory), jobs_(jobs), hook_(std::move(hook)) {}

  // Decides and executes recovery for finding `f` of a job; appends the actions taken to f.actions.
  // `earlier`: the job's recent findings, for recurrence. Findings of another attempt, or of a job that is
  // not active, change nothing.
  // Jobs another launcher starts (no command) are never stopped or restarted: what Shepherd would do goes
  // to f.recommended_actions, and only policy.external_remediation is carried out (cordon the blamed nodes
  // in Shepherd's inventory, run the hook, or requeue the launcher's job); the blamed nodes are those the
  // ranks reported (`reported_nodes`, by rank; empty strings where unknown).
  // `vouched`: nodes whose agent lists the attempt's rank processes running (RecoveryInput::vouched_nodes).
  // `daemon_was_late`: RecoveryInput::daemon_was_late.
  // `may_hold`: a process_exit of a job our agents launched may wait for the exit hold; a rank fault of an
  // attempt whose restart is held joins the hold (recorded, nothing executed). False: a hold just released.
  // `ctx`: the job's allocation, its launcher's nodes and the agents (RecoveryContext).
  // Returns what the decision means for the job's health (SDC replays, a demoted checkpoint), which the
  // caller, the health owner, applies (JobHealth::Apply): recovery reads `health` and writes none of it.
  [[nodiscard]] HealthUpdate OnFinding(Finding& f, const JobHealth& health, std::span<const Finding> earlier,
                                       Time now, WriteBatch* batch, const std::vector<std::string>& reported_nodes = {},
                                       std::set<std::string> vouched = {}, bool daemon_was_late = false,
                                       bool may_hold = true, const RecoveryContext& ctx = {}) REQUIRES(kControl);

  // Incidents (scheduler/incidents.h). Puts finding `f` (its id set, its nodes final) into its job's open
  // incident or opens one, and sets f.incident. On a re-root every attempt the incident ended gets the new
  // root as ended_by (persisted in `batch`); the ids of the earlier members are returned for the caller to
  // re-point and persist.
  std::vector<std::string> AssignIncident(Finding& f, WriteBatch* batch) REQUIRES(kControl);
  // The job's open incident; nullptr when none.
  const Incident* OpenIncident(const std::string& job) const REQUIRES_SHARED(kControl);
  // The job's attempt `attempt` reported a step by `now` (the first call per attempt is its first step, as
  // far as the incident's closing rule is concerned, unless Attempt::first_step_at says earlier).
  void OnStep(const std::string& job, int attempt, Time now) REQUIRES(kControl);
  void set_incident_window(IncidentWindow w) REQUIRES(kControl) { window_ = w; }

  // The exit hold (scheduler/exit_hold.h) waits at most `node_timeout_s` for a silent agent.
  void set_exit_hold(double node_timeout_s) REQUIRES(kControl) { node_timeout_s_ = node_timeout_s; }
  struct HoldOutcome {
    std::string job;
    std::string finding;  // the held finding
    bool decide = false;  // true: decide its recovery now (OnFinding with may_hold false); false: dropped
    std::string line;     // for the held finding's actions
  };
  // Held restarts whose hold is over: every node heard from (`agents`, or the bound passed): decide; or the
  // attempt ended meanwhile (a node_lost restarted it): dropped.
  std::vector<HoldOutcome> DueHolds(Time now, const AgentBoard& agents) REQUIRES(kControl);

  // POST /v1/jobs/{id}/restart. Returns the decision executed (kRestart or kQueue) and what it means for the
  // job's health, for the caller to apply.
  struct ForcedRestart {
    RecoveryDecision decision;
    HealthUpdate health;
  };
  // `earlier`: the job's recent findings (straggler marks, RestartRequest::earlier_findings).
  Result<ForcedRestart> ForceRestart(const std::string& job, const JobHealth& health, const std::string& from,
                                        const std::vector<std::string>& replace_nodes,
                                        const std::string& reason, std::span<const Finding> earlier, Time now,
                                        WriteBatch* batch,
                                        const std::optional<Cluster>& allocation = std::nullopt)
      REQUIRES(kControl);

  // The daemon keeps the inventory in sync with Slurm (--slurm): a node cordoned for external_remediation
  // "slurm-drain" is then drained in Slurm too.
  void set_slurm(bool on) REQUIRES(kControl) { slurm_ = on; }
  // How "requeue" reaches the launcher (null: the daemon runs without --slurm; requeue is then recorded as
  // not possible).
  void set_requeue(ExternalRequeue requeue) REQUIRES(kControl) { requeue_ = std::move(requeue); }

  // Nodes of the inventory no live agent serves (read only when a restart is to be placed).
  using Unserved = std::function<std::set<std::string>()>;
  // Starts the restarts whose backoff has passed. Each had its GPUs held (JobBook::Hold); a node cordoned,
  // failed or removed meanwhile, or one no live agent serves when there is room elsewhere, is replaced
  // first, as the decision would have (PlaceRestart); with no room the job is queued.
  // `allocations`: per job, the cluster its restart sees when not the whole inventory (RecoveryContext);
  // the caller asks DueRestarts which jobs are due.
  void StartDue(Time now, WriteBatch* batch, const Unserved& unserved,
                const std::map<std::string, Cluster>& allocations = {}) REQUIRES(kControl);
  // The jobs whose backoff has passed (StartDue starts them).
  std::vector<std::string> DueRestarts(Time now) const REQUIRES_SHARED(kControl);
  // A job the queue holds after it ran (a recovery found no room, or a daemon restart cut a backoff short)
  // starts on its last placement with its unusable nodes replaced by spares once that fits: spares are
  // held aside for such restarts, which the queue (non-spare nodes, in order) never uses. Jobs our agents
  // launch only; a queued job that needs non-spare capacity waits its turn in the queue.
  void StartQueuedOnSpares(Time now, WriteBatch* batch, const ResumeChooser& resume, const Unserved& unserved)
      REQUIRES(kControl);
  // A checkpoint of the running attempt became good: the backoff starts over.
  void OnGoodProgress(const std::string& job) REQUIRES(kControl) { state_[job].consecutive_restarts = 0; }
  // The job ended or was cancelled: a pending restart is dropped.
  void Forget(const std::string& job) REQUIRES(kControl) { state_.erase(job); }

 private:
  struct PendingRestart {
    Placement placement;
    std::optional<Checkpoint> resume;
    std::string reason;
    Time not_before{};
  };
  struct HeldExit {
    std::string finding;
    int attempt = 0;
    Time exit_at{};
  };
  struct Restarts {
    std::optional<PendingRestart> pending;
    std::optional<Time> last_restart_at;
    int consecutive_restarts = 0;
    std::optional<Incident> incident;                // the open incident
    std::vector<Attempt> incident_attempts;          // the attempts it ended, as persisted (re-rooting)
    std::optional<std::pair<int, Time>> first_step;  // (attempt, when its first step was seen)
    std::optional<HeldExit> held;
  };
  // The exit hold for f (a finding of the current attempt of active job `e`): true when f waits (held now,
  // or joining the held restart); its actions say so.
  bool Hold(Finding& f, const JobEntry& e, const AgentBoard* agents) REQUIRES(kControl);
  ExitHold HoldVerdict(const JobEntry& e, Time exit_at, Time now, const AgentBoard& agents) const
      REQUIRES_SHARED(kControl);
  // Starts `job`'s next attempt on `placement`, replacing its unusable and unserved nodes (PlaceRestart),
  // or queues it. `spares_only`: only on its old nodes and spares (PlaceRestart; else nothing changes).
  bool Start(const JobEntry& e, const Placement& placement, const std::string& reason,
             const std::optional<Checkpoint>& resume, bool spares_only, Time now, WriteBatch* batch,
             const Unserved& unserved, const Cluster* allocation = nullptr) REQUIRES(kControl);
  // `source`: the finding id (or "operator") recorded on the nodes it cordons or fails. `ended_by`: the
  // incident root recorded as the ended attempt's ended_by ("" for none).
  // What it means for the job's health is added to `health`.
  void Execute(const std::string& job, const RecoveryDecision& d, bool automatic, HealthUpdate* health,
               const std::string& source, const std::string& ended_by, Time now, WriteBatch* batch)
      REQUIRES(kControl);
  // Loop breakers (scheduler/loop_breakers.h) on a restart-bearing decision: may demote a poisoned
  // checkpoint and re-decide, or turn the decision into failing the job with no blame. False: record only,
  // nothing to execute.
  // A demotion is decided on a copy of the ledger and returned in `update` for the health owner to apply.
  bool BreakLoop(Finding& f, const JobHealth& health, std::span<const Finding> earlier, Time now,
                 RecoveryInput* in, RecoveryDecision* d, HealthUpdate* update) REQUIRES(kControl);
  // A job Shepherd does not launch: record, and remediate only as its policy says.
  // external_remediation "cordon" and "slurm-drain" act only on the nodes the job's launcher lists for it
  // (Slurm's allocation of a Slurm-bound job, ctx.slurm_nodes; otherwise its placement's): a node its ranks
  // name that is not listed is never cordoned (the finding records why), so one rank cannot name any node
  // of the fleet.
  void Remediate(Finding& f, const Job& job, const RecoveryDecision& d, std::span<const Finding> earlier,
                 Time now, WriteBatch* batch, const RecoveryContext& ctx) REQUIRES(kControl);
  // external_remediation "requeue": only when recovery would restart the attempt, and once per attempt
  // (an earlier finding of the attempt that requeued it is enough); counts against policy.max_restarts.
  void Requeue(Finding& f, const Job& job, const RecoveryDecision& d, std::span<const Finding> earlier,
               WriteBatch* batch) REQUIRES(kControl);

  Inventory* inventory_;
  JobBook* jobs_;
  RemediationHook hook_;
  bool slurm_ = false;
  ExternalRequeue requeue_;
  std::map<std::string, Restarts> state_;
  IncidentWindow window_;
  double node_timeout_s_ = 10;
};

}  // namespace shepherd
