// JobHealth: the health of one job across its attempts.
// Owns: the JobMonitor of the running attempt (detectors), the job's CheckpointLedger (grades, last-known-
// good) and its SDC replay bookkeeping (nodes implicated by replays that have not yet come back clean).
// One instance per job, held by the Controller; control thread only.
// Invariants: a monitor exists only while an attempt of the job runs; it is `watching` (detectors armed)
// from the start for jobs Shepherd launches, and from the first report for jobs another launcher starts
// (DESIGN.md: detection starts when ranks first report). Every checkpoint status change is returned to the
// caller to persist.
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

  // An attempt started: a fresh monitor; `watch_now` arms detection at once (our agents launch it).
  void OnAttemptStart(const Job& job, const Attempt& attempt, bool watch_now, Time now);
  // The attempt ended: its monitor is dropped (later reports of it are refused).
  void OnAttemptEnd() {
    monitor_.reset();
    unarmed_.reset();
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
    bool urgent = false;  // an anomaly opened: evaluate now
    std::vector<CheckpointTransition> transitions;
  };
  // REQUIRES: running() (the caller answers 409 otherwise). Starts watching on the first report.
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
  bool watching() const { return monitor_ && watching_; }
  // The checkpoint a new attempt resumes from by default: last-known-good, else latest complete, else none.
  std::optional<Checkpoint> DefaultResume() const;
  const CheckpointLedger& ledger() const { return ledger_; }
  // API.md's health shape for a running attempt (the Controller adds job-level fields).
  Json MonitorJson(Time now) const;

 private:
  std::unique_ptr<JobMonitor> monitor_;
  bool watching_ = false;
  // Until the first report of a job another launcher starts: the context to arm the monitor with (the
  // monitor drops its copy of the placement).
  std::optional<MonitorContext> unarmed_;
  CheckpointLedger ledger_;
  std::set<std::string> replay_nodes_;
};

}  // namespace shepherd
