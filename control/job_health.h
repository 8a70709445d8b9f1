// JobHealth: the health of one job across its attempts.
// Owns: the JobMonitor of the running attempt (detectors), the job's CheckpointLedger (grades, last-known-
// good) and its SDC replay bookkeeping (nodes implicated by replays that have not yet come back clean).
// One instance per job, held by the Controller; control thread only.
// Launch: an attempt's detectors are armed only once its ranks were launched, so ranks never launched are
// never judged. For jobs our agents launch: once every node of the placement confirmed (its agent reported
// the attempt's processes, or one of its ranks reported). For jobs another launcher starts: at the first
// report. A daemon restart re-arms a running attempt at once (grace counts from recovery).
// Invariants: a monitor exists only while an attempt of the job is active; detection (Evaluate) runs only
// when launched. Every checkpoint status change is returned to the caller to persist.
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/job.h"
#include "core/json.h"
#include "health/checkpoint_ledger.h"
#include "health/job_monitor.h"
#include "health/report.h"

namespace shepherd {

class JobHealth {
 public:
  explicit JobHealth(const Job& job);

  enum class Launch {
    kByAgents,   // armed once every node of the placement confirmed its ranks started
    kExternal,   // armed at the first report
    kRecovered,  // armed now (a running attempt found at daemon start-up)
  };
  // An attempt started: a fresh monitor, armed as `launch` says.
  void OnAttemptStart(const Job& job, const Attempt& attempt, Launch launch, Time now);
  // The node's agent reported processes of the current attempt. True when this launched the attempt.
  bool OnNodeLaunched(const std::string& node, Time now);
  // The attempt ended: its monitor is dropped (later reports of it are refused).
  void OnAttemptEnd() {
    monitor_.reset();
    unarmed_.reset();
    unlaunched_.clear();
    external_pending_ = false;
  }
  // The job ended: replay bookkeeping is dropped.
  void OnJobEnd() { replay_nodes_.clear(); }
  // Recovery at start-up: stored checkpoints and the resume steps of the job's past attempts.
  void Restore(const std::vector<Checkpoint>& checkpoints,
               const std::vector<std::pair<int, int64_t>>& resumes);

  struct IngestOutcome {
    int accepted = 0;  // includes ignored
    int ignored = 0;   // another attempt's reports
    std::vector<ReportBatch::Rejected> rejected;
    bool urgent = false;        // an anomaly opened: evaluate now
    bool launched_now = false;  // these reports launched the attempt
    std::vector<CheckpointTransition> transitions;
  };
  // REQUIRES: running() (the caller answers 409 otherwise). A report launches its rank's node (every node,
  // for a job another launcher starts).
  IngestOutcome Ingest(const ReportBatch& batch, Time now);

  struct Evaluation {
    std::vector<Finding> findings;  // new incidents, ids empty
    std::vector<CheckpointTransition> transitions;
    bool good_progress = false;  // a checkpoint of the running attempt became good
  };
  // Runs the detectors (nothing before watching) and forwards their evidence to the ledger. A clean hash
  // check after an SDC replay yields an sdc_transient finding and clears the replay nodes.
  Evaluation Evaluate(Time now);

  // An SDC replay was started on `nodes` (recovery's decision).
  void OnReplayStarted(const std::vector<std::string>& nodes) {
    replay_nodes_.insert(nodes.begin(), nodes.end());
  }
  const std::set<std::string>& pending_replay_nodes() const { return replay_nodes_; }

  bool running() const { return monitor_ != nullptr; }
  bool watching() const { return monitor_ && unlaunched_.empty() && !external_pending_; }
  // Nodes whose ranks are not confirmed started yet (agent-launched attempts), sorted.
  std::vector<std::string> unlaunched_nodes() const { return {unlaunched_.begin(), unlaunched_.end()}; }
  Time attempt_started_at() const { return attempt_started_at_; }
  // The checkpoint a new attempt resumes from by default: last-known-good, else latest complete, else none.
  std::optional<Checkpoint> DefaultResume() const;
  const CheckpointLedger& ledger() const { return ledger_; }
  // API.md's health shape for a running attempt (the Controller adds job-level fields).
  Json MonitorJson(Time now) const;

 private:
  // Arms the monitor: detection (and the startup grace) starts at `now`.
  void Arm(Time now);

  std::unique_ptr<JobMonitor> monitor_;
  // Until launched: the context to arm the monitor with (the monitor drops its copy of the placement).
  std::optional<MonitorContext> unarmed_;
  std::set<std::string> unlaunched_;     // agent-launched: nodes not yet confirmed
  bool external_pending_ = false;        // another launcher's: no report yet
  std::vector<std::string> rank_nodes_;  // node of each rank (placement), to confirm nodes from reports
  Time attempt_started_at_{};
  CheckpointLedger ledger_;
  std::set<std::string> replay_nodes_;
};

}  // namespace shepherd
