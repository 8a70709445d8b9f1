// What the Controller's RecoveryExecutor does with a finding, on the simulated world: DecideRecovery with the
// loop breakers, node actions, the stop and the backoff, PlaceRestart when the restart is due, the queue,
// a failed job restarted by hand (ManualRestart), and a planned interruption's save and forced restart.
#include <algorithm>

#include "goodput/sim_world.h"

namespace shepherd::sim_internal {

void Run::Decide() {
  Finding f = std::move(pending_);
  if (f.kind == FindingKind::kGpuFault)
    TakeOut(f.nodes.front(), NodeActionKind::kFail);             // the agent's report
  std::vector<Finding> earlier(recent_.begin(), recent_.end());  // oldest first, as FindingLog::Recent
  const std::set<std::string> no_replay;
  RecoveryInput in{
      .job = job_,
      .placement = placement_,
      .cluster = cluster_,
      .finding = f,
      .last_known_good = Newest(true),
      .latest_complete = Newest(false),
      .now = At(now_),
      .last_restart_at = last_restart_at_ ? std::optional<Time>(At(*last_restart_at_)) : std::nullopt,
      .consecutive_restarts = consecutive_,
      .pending_replay_nodes = no_replay,
      .earlier_findings = earlier};
  RecoveryDecision d = DecideRecovery(in);
  if (d.action == RecoveryDecision::kRestart || d.action == RecoveryDecision::kQueue)
    BreakLoop(f, earlier, &in, &d);
  recent_.push_back(f);
  if (recent_.size() > kRecentFindings) recent_.pop_front();
  Execute(d, /*automatic=*/true);
}

void Run::Execute(const RecoveryDecision& d, bool automatic) {
  for (const NodeAction& a : d.node_actions) TakeOut(a.node, a.action);
  const double stop =
      cause_ == FaultCause::kHost
          ? std::max(in_.timing.stop_s, in_.detectors.agent_lease_s - in_.detectors.node_heartbeat_timeout_s)
          : in_.timing.stop_s;
  switch (d.action) {
    case RecoveryDecision::kNone:
      // Nothing stops: training goes on from where it is (the finding's time was lost to it).
      phase_ = Phase::kTraining;
      job_.state = JobState::kRunning;
      d0_ = frozen_done_;
      first_step_at_ = now_;
      deadline_ = kInf;
      dirty_ = true;
      return;
    case RecoveryDecision::kFail:
      (void)cluster_.Release(kJobId);
      job_.state = JobState::kFailed;
      phase_ = Phase::kFailed;
      stop_end_ = now_;
      deadline_ = now_ + stop + in_.manual_response_s;
      ++out_.manual_interventions;
      dirty_ = true;
      return;
    case RecoveryDecision::kQueue:
      (void)cluster_.Release(kJobId);
      job_.state = JobState::kQueued;
      pending_resume_ = Find(d.resume_from);
      phase_ = Phase::kQueued;
      deadline_ = kInf;
      ++out_.queued;
      break;
    case RecoveryDecision::kRestart:
      (void)cluster_.Release(kJobId);
      placement_ = *d.new_placement;
      (void)cluster_.Allocate(kJobId, placement_);  // held through the stop and the backoff
      job_.state = JobState::kRecovering;
      pending_resume_ = Find(d.resume_from);
      phase_ = Phase::kStopping;
      stop_end_ = now_ + stop;
      deadline_ = std::max(stop_end_, SecondsOf(d.not_before));
      break;
  }
  if (automatic && d.spends_budget) {
    ++job_.restarts;
    ++consecutive_;
    last_restart_at_ = now_;
  }
  dirty_ = true;
}

void Run::StartDue() {
  RecoveryDecision d = PlaceRestart(job_, placement_, cluster_);
  (void)cluster_.Release(kJobId);
  if (d.action != RecoveryDecision::kRestart) {
    job_.state = JobState::kQueued;
    phase_ = Phase::kQueued;
    deadline_ = kInf;
    ++out_.queued;
    dirty_ = true;
    return;
  }
  placement_ = std::move(*d.new_placement);
  (void)cluster_.Allocate(kJobId, placement_);
  StartAttempt(pending_resume_);
}

void Run::TryQueued() {
  RecoveryDecision d = PlaceRestart(job_, placement_, cluster_);
  if (d.action != RecoveryDecision::kRestart) return;
  placement_ = std::move(*d.new_placement);
  (void)cluster_.Allocate(kJobId, placement_);
  StartAttempt(pending_resume_);
}

void Run::ManualIntervention() {
  job_.restarts = 0;
  consecutive_ = 0;
  std::vector<Checkpoint> cps;
  for (const SimCheckpoint& c : candidates_) cps.push_back(c.record);
  RestartRequest req{.job = job_,
                     .placement = placement_,
                     .cluster = cluster_,
                     .from = "latest",
                     .reason = "restarted by hand",
                     .checkpoints = cps,
                     .now = At(now_)};
  Result<RecoveryDecision> d = ManualRestart(req);
  job_.state = JobState::kRecovering;
  if (!d.ok()) {  // no checkpoint qualifies: from scratch
    RecoveryDecision scratch = PlaceRestart(job_, placement_, cluster_);
    pending_resume_.reset();
    if (scratch.action == RecoveryDecision::kRestart) {
      placement_ = std::move(*scratch.new_placement);
      (void)cluster_.Allocate(kJobId, placement_);
      return StartAttempt(std::nullopt);
    }
    phase_ = Phase::kQueued;
    deadline_ = kInf;
    dirty_ = true;
    return;
  }
  pending_resume_ = Find(d->resume_from);
  if (d->action != RecoveryDecision::kRestart) {
    phase_ = Phase::kQueued;
    deadline_ = kInf;
    dirty_ = true;
    return;
  }
  placement_ = std::move(*d->new_placement);
  (void)cluster_.Allocate(kJobId, placement_);
  StartAttempt(pending_resume_);
}

void Run::PlannedRestart() {
  SimCheckpoint c;
  c.done_s = frozen_done_;
  c.record.step = StepOf(frozen_done_);
  c.record.attempt = job_.attempt;
  c.record.job = kJobId;
  c.record.id = std::string(kJobId) + "/" + std::to_string(job_.attempt) + "/" +
                std::to_string(c.record.step) + "-planned";
  c.record.status = CheckpointStatus::kComplete;
  c.record.ranks_reported = 1;
  c.record.created_at = At(now_);
  candidates_.push_back(c);
  std::vector<Checkpoint> cps;
  for (const SimCheckpoint& x : candidates_) cps.push_back(x.record);
  RestartRequest req{.job = job_,
                     .placement = placement_,
                     .cluster = cluster_,
                     .from = "latest",
                     .reason = "planned maintenance",
                     .checkpoints = cps,
                     .now = At(now_)};
  Result<RecoveryDecision> d = ManualRestart(req);
  if (!d.ok()) {  // cannot happen with the checkpoint just saved; keep training
    phase_ = Phase::kTraining;
    d0_ = frozen_done_;
    first_step_at_ = now_;
    deadline_ = kInf;
    return;
  }
  Execute(*d, /*automatic=*/false);
}

}  // namespace shepherd::sim_internal
