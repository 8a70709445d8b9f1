// JobHealth: the health of one job across its attempts.
// Owns: the JobMonitor of the running attempt (detectors), the job's CheckpointLedger (grades, last-known-
// good) and its SDC replay bookkeeping (nodes implicated by replays that have not yet come back clean).
// One instance per job, held by the Controller.
// Threads: changed on the control thread only (its mutators REQUIRES(kControl)); its const methods also
// run on the reader thread under the shared ControlLock (REQUIRES_SHARED(kControl), control/control_lock.h).
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

#include "control/control_lock.h"
#include "control/records.h"
#include "core/job.h"
#include "core/json.h"
#include "health/attempt_marks.h"
#include "health/checkpoint_ledger.h"
#include "health/job_monitor.h"
#include "health/report.h"
#include "scheduler/loop_breakers.h"

namespace shepherd {

// What recovery decided for a job's SDC replay bookkeeping and its checkpoints. RecoveryExecutor returns
// it and writes none of it; the job's health owner carries it out (JobHealth::Apply), in this order.
struct HealthUpdate {
  struct Demotion {
    std::string checkpoint;  // a loop breaker found it poisoned: it becomes bad
    std::string reason;
  };
  struct Replay {  // an SDC replay started (OnReplayStarted)
    std::vector<std::string> nodes;
    std::optional<int64_t> step;
    std::optional<std::string> set_aside;
  };
  std::optional<Demotion> demote;
  bool end_replay = false;  // the SDC is settled (EndReplay)
  std::optional<Replay> replay;
  bool empty() const { return !demote && !end_replay && !replay; }
};

class JobHealth {
 public:
  explicit JobHealth(const Job& job);

  enum class Launch {
    kByAgents,   // armed once every node of the placement confirmed its ranks started
    kExternal,   // armed at the first report
    kRecovered,  // armed now (a running attempt found at daemon start-up)
  };
  // An attempt started: a fresh monitor, armed as `launch` says.
  void OnAttemptStart(const Job& job, const Attempt& attempt, Launch launch, Time now) REQUIRES(kControl);
  // The node's agent reported processes of the current attempt. True when this launched the attempt.
  bool OnNodeLaunched(const std::string& node, Time now) REQUIRES(kControl);
  // Attempt `attempt` ended: the step it reached is kept for the loop breakers, its monitor is dropped
  // (later reports of it are refused). Nothing when a later attempt is already the current one.
  void OnAttemptEnd(int attempt) REQUIRES(kControl) {
    if (attempts_.empty() || attempts_.back().number != attempt) return;
    if (monitor_ && monitor_->JobStep() >= 0) attempts_.back().last_step = monitor_->JobStep();
    if (monitor_ && monitor_->StepTimeSeconds() > 0) ended_step_time_s_ = monitor_->StepTimeSeconds();
    monitor_.reset();
    unarmed_.reset();
    unlaunched_.clear();
    external_pending_ = false;
  }
  // The goodput marks (health/attempt_marks.h) of attempt `attempt`, when it is the latest attempt this
  // daemon saw start (they outlive its monitor until the next attempt starts). `full`: open checkpoint
  // phases counted too (O(world size)); otherwise O(1).
  std::optional<MarksSnapshot> Marks(int attempt, bool full) const REQUIRES_SHARED(kControl) {
    if (!marks_ || attempts_.empty() || attempts_.back().number != attempt) return std::nullopt;
    return full ? marks_->Snapshot() : marks_->Quick();
  }
  // The running attempt's marks are due to be persisted: at most once per `every_s` (the first time
  // `every_s` after the attempt started here). Records `now` as the write when true.
  bool MarksDue(Time now, double every_s) REQUIRES(kControl) {
    if (!monitor_ || ToSeconds(now - marks_written_at_) < every_s) return false;
    marks_written_at_ = now;
    return true;
  }
  // The job ended: replay bookkeeping is dropped.
  void OnJobEnd() REQUIRES(kControl) { EndReplay(); }
  // Recovery at start-up: stored checkpoints and the resume steps of the job's past attempts.
  void Restore(const std::vector<Checkpoint>& checkpoints,
               const std::vector<std::pair<int, int64_t>>& resumes,
               const std::vector<CheckpointPart>& parts = {}) REQUIRES(kControl);

  struct IngestOutcome {
    int accepted = 0;  // includes ignored
    int ignored = 0;   // another attempt's reports; checkpoints beyond the ledger's bounds; refused below
    uint64_t ignored_by_reason[kIgnoredReasons] = {};  // part of `ignored`, by IgnoredReason
    std::vector<ReportBatch::Rejected> rejected;
    bool urgent = false;        // an anomaly opened: evaluate now
    bool launched_now = false;  // these reports launched the attempt
    bool all_finished = false;  // with these reports every rank of the attempt has reported `finished`
    std::vector<CheckpointTransition> transitions;
  };
  // kInvalidContent naming `reports[i].step` for the first report of the running attempt whose step is
  // beyond JobMonitor::MaxAcceptedStep: the caller refuses the whole batch before Ingest, so it changes
  // nothing. OK when no attempt is running.
  Status CheckSteps(const ReportBatch& batch) const REQUIRES_SHARED(kControl);
  // REQUIRES: running() (the caller answers 409 otherwise). A report launches its rank's node (every node,
  // for a job another launcher starts).
  IngestOutcome Ingest(const ReportBatch& batch, Time now) REQUIRES(kControl);

  struct Evaluation {
    std::vector<Finding> findings;  // new incidents, ids empty
    std::vector<CheckpointTransition> transitions;
    bool good_progress = false;  // a checkpoint of the running attempt became good
  };
  // Runs the detectors (nothing before watching) and forwards their evidence to the ledger. A clean hash
  // check after an SDC replay yields an sdc_transient finding (sdc_confirmed naming the node the replay
  // set aside, if any) and clears the replay nodes.
  // `listening_since`: health/lateness.h (silence counts from there at the earliest).
  // Nothing is judged while the job is suspended as a whole (a Slurm allocation suspended); once it runs
  // again, silence counts from then (`listening_since` is raised to the resume).
  Evaluation Evaluate(Time now, Time listening_since = Time{}) REQUIRES(kControl);
  // `until`: the suspension ends by itself then, as a Resume(until) would (a hold on evidence that should
  // be confirmed by then); none: until Resume.
  void Suspend(std::optional<Time> until = std::nullopt) REQUIRES(kControl) {
    suspended_ = true;
    suspended_until_ = until;
  }
  void Resume(Time now) REQUIRES(kControl) {
    suspended_ = false;
    suspended_until_.reset();
    resumed_at_ = now;
  }
  bool suspended() const REQUIRES_SHARED(kControl) { return suspended_; }

  // An SDC replay was started on `nodes` (recovery's decision) to recompute the mismatch at `step`: only a
  // check that agrees at or after that step says it was transient (the replay agrees before it anyway).
  // `set_aside`: a suspect whose ranks this replay moved off; such a check then confirms it (sdc_confirmed)
  // instead, and it is no longer a replay node.
  void OnReplayStarted(const std::vector<std::string>& nodes, std::optional<int64_t> step = std::nullopt,
                       std::optional<std::string> set_aside = std::nullopt) REQUIRES(kControl) {
    if (set_aside) {
      replay_nodes_.erase(*set_aside);
      set_aside_ = std::move(set_aside);
    }
    replay_nodes_.insert(nodes.begin(), nodes.end());
    if (step) replay_step_ = std::max(replay_step_, *step);
  }
  // The SDC is settled (its node cordoned): a later agreeing check is no verdict on the replay.
  void EndReplay() REQUIRES(kControl) {
    replay_nodes_.clear();
    set_aside_.reset();
    replay_step_ = -1;
  }
  const std::set<std::string>& pending_replay_nodes() const REQUIRES_SHARED(kControl) {
    return replay_nodes_;
  }
  // A replay that moved a suspect's ranks off is under way.
  bool set_aside_replay() const REQUIRES_SHARED(kControl) { return set_aside_.has_value(); }
  // Some hash check agreed across all replicas (this run), or a checkpoint was graded good.
  bool HashesEverAgreed() const REQUIRES_SHARED(kControl) {
    return hashes_agreed_ || ledger_.LastKnownGood().has_value();
  }

  // Every attempt this daemon has seen start, oldest first, with the highest step reached (loop breakers).
  std::vector<AttemptSummary> AttemptHistory() const REQUIRES_SHARED(kControl);
  // Carries out recovery's decision (HealthUpdate): the checkpoint transitions a demotion made, for the
  // caller to persist.
  std::vector<CheckpointTransition> Apply(const HealthUpdate& u, Time now) REQUIRES(kControl) {
    std::vector<CheckpointTransition> out;
    if (u.demote) out = Demote(u.demote->checkpoint, u.demote->reason, now);
    if (u.end_replay) EndReplay();
    if (u.replay) OnReplayStarted(u.replay->nodes, u.replay->step, u.replay->set_aside);
    return out;
  }
  // A loop breaker found checkpoint `id` poisoned: it becomes bad (transitions for the caller to persist).
  std::vector<CheckpointTransition> Demote(const std::string& id, const std::string& reason, Time now)
      REQUIRES(kControl) {
    return ledger_.Demote(id, reason, now);
  }
  // The agent saw `rank` of `attempt` exit 0: it finished (as a `finished` report says), so its silence
  // from now on is no lost heartbeat. Other attempts: nothing.
  void OnRankExitedOk(int attempt, int rank, Time now) REQUIRES(kControl);
  // The highest step rank `rank` reported in the running attempt.
  std::optional<int64_t> RankStep(int rank) const REQUIRES_SHARED(kControl) {
    return monitor_ ? monitor_->RankStep(rank) : std::nullopt;
  }
  // The node each rank reported (`node` on its reports), by rank; "" where unknown.
  std::vector<std::string> ReportedNodes() const REQUIRES_SHARED(kControl);

  // The highest step any rank reported in the latest attempt (this daemon saw start) that reported one
  // (running: so far); -1 when none did.
  int64_t LatestStep() const REQUIRES_SHARED(kControl) {
    if (monitor_ && monitor_->JobStep() >= 0) return monitor_->JobStep();
    for (auto it = attempts_.rbegin(); it != attempts_.rend(); ++it)
      if (it->last_step) return *it->last_step;
    return -1;
  }
  // JobMonitor::StepTimeSeconds of the running attempt, else as the latest attempt that had one ended with
  // it; 0 when none.
  double StepTimeSeconds() const REQUIRES_SHARED(kControl) {
    const double now = monitor_ ? monitor_->StepTimeSeconds() : 0;
    return now > 0 ? now : ended_step_time_s_;
  }
  bool running() const REQUIRES_SHARED(kControl) { return monitor_ != nullptr; }
  // The running attempt's monitor, for read-only views; null when none runs.
  const JobMonitor* monitor() const REQUIRES_SHARED(kControl) { return monitor_.get(); }
  // Every rank of the running attempt has reported `finished` (a normal end of its script).
  bool all_finished() const REQUIRES_SHARED(kControl) { return monitor_ && monitor_->AllFinished(); }
  bool watching() const REQUIRES_SHARED(kControl) {
    return monitor_ && unlaunched_.empty() && !external_pending_;
  }
  // Nodes whose ranks are not confirmed started yet (agent-launched attempts), sorted.
  std::vector<std::string> unlaunched_nodes() const REQUIRES_SHARED(kControl) {
    return {unlaunched_.begin(), unlaunched_.end()};
  }
  Time attempt_started_at() const REQUIRES_SHARED(kControl) { return attempt_started_at_; }
  // The checkpoint a new attempt resumes from by default: last-known-good, else latest complete, else none.
  std::optional<Checkpoint> DefaultResume() const REQUIRES_SHARED(kControl);
  const CheckpointLedger& ledger() const REQUIRES_SHARED(kControl) { return ledger_; }
  // API.md's health shape for a running attempt (the Controller adds job-level fields).
  Json MonitorJson(Time now) const REQUIRES_SHARED(kControl);

 private:
  // Arms the monitor: detection (and the startup grace) starts at `now`.
  void Arm(Time now) REQUIRES(kControl);

  std::unique_ptr<JobMonitor> monitor_;
  std::optional<AttemptMarks> marks_;  // of the latest attempt started here (attempts_.back())
  Time marks_written_at_{};
  // Until launched: the context to arm the monitor with (the monitor drops its copy of the placement).
  std::optional<MonitorContext> unarmed_;
  std::set<std::string> unlaunched_;      // agent-launched: nodes not yet confirmed
  const bool external_;                   // another launcher's job: its hosts are the ones its ranks report
  bool external_pending_ = false;         // another launcher's: no report yet
  std::vector<std::string> rank_nodes_;   // node of each rank (placement), to confirm nodes from reports
  std::vector<AttemptSummary> attempts_;  // history for the loop breakers; last_step set when each ends
  Time attempt_started_at_{};
  double ended_step_time_s_ = 0;  // StepTimeSeconds of the latest ended attempt that had one
  CheckpointLedger ledger_;
  std::set<std::string> replay_nodes_;
  std::optional<std::string> set_aside_;  // the suspect the running replay moved off
  int64_t replay_step_ = -1;              // the mismatch a replay recomputes (OnReplayStarted)
  bool hashes_agreed_ = false;            // a kHashAgreed evidence was seen
  bool suspended_ = false;
  std::optional<Time> suspended_until_;
  Time resumed_at_{};
};

}  // namespace shepherd
