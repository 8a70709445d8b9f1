// Controller: carrying out recovery decisions (scheduler/recovery.h) for findings and forced restarts.
#include <spdlog/spdlog.h>

#include "daemon/controller.h"

namespace shepherd {

void Controller::EndAttempt(JobEntry& e, Time now, WriteBatch* batch) {
  if (!e.attempt) return;
  e.monitor.reset();
  if (cluster_.Holds(e.job.id)) (void)cluster_.Release(e.job.id);
  if (!e.attempt->ended_at) {
    e.attempt->ended_at = now;
    batch->Put(AttemptRecord(*e.attempt));
  }
  BumpAssignments(e.attempt->placement);  // its ranks leave the desired sets: agents stop them
}

void Controller::OnFinding(JobEntry& e, Finding& f, WriteBatch* batch) {
  if (e.job.state != JobState::kRunning || !e.attempt || f.attempt != e.attempt->number) return;
  std::vector<Finding> earlier;
  for (const Finding& x : findings_)
    if (x.job == e.job.id) earlier.push_back(x);
  if (earlier.size() > 64) earlier.erase(earlier.begin(), earlier.end() - 64);
  CheckpointLedger& ledger = Ledger(e);
  RecoveryInput in{e.job,
                   e.attempt->placement,
                   cluster_,
                   f,
                   f.kind == "sdc_suspected" && e.job.plan.dp == 2 && e.job.plan.zero_stage < 3,
                   ledger.LastKnownGood(),
                   ledger.Latest(),
                   clock_->Now(),
                   e.last_restart_at,
                   e.consecutive_restarts,
                   sdc_history_,
                   earlier};
  RecoveryDecision d = DecideRecovery(in);
  if (d.action == RecoveryDecision::kNone && d.node_actions.empty()) return;
  Execute(e, d, /*automatic=*/true, batch);
  f.actions.insert(f.actions.end(), d.actions.begin(), d.actions.end());
}

void Controller::Execute(JobEntry& e, const RecoveryDecision& d, bool automatic, WriteBatch* batch) {
  Time now = clock_->Now();
  for (const NodeAction& a : d.node_actions) {
    const Node* old = cluster_.Find(a.node);
    if (!old) continue;
    Node n = *old;
    if (a.action == "fail")
      n.failed = true;
    else
      n.schedulable = false;
    n.reason = a.reason;
    n.updated_at = now;
    (void)cluster_.UpsertNode(n);
    batch->Put(NodeRecord(n));
  }
  switch (d.action) {
    case RecoveryDecision::kNone:
      return;
    case RecoveryDecision::kFail:
      EndAttempt(e, now, batch);
      e.job.state = JobState::kFailed;
      e.job.reason = d.reason;
      sdc_history_.Forget(e.job.id);
      break;
    case RecoveryDecision::kQueue:
      EndAttempt(e, now, batch);
      e.job.state = JobState::kQueued;
      e.job.reason = d.reason;
      break;
    case RecoveryDecision::kRestart: {
      EndAttempt(e, now, batch);
      if (d.replay) sdc_history_.OnReplayStarted(e.job.id, d.replay_nodes);
      if (d.not_before <= now) {
        if (!StartAttempt(e, *d.new_placement, d.reason, batch, d.resume_from).ok()) {
          e.job.state = JobState::kQueued;  // the placement went stale; place it anew
          e.job.reason = "re-placing after recovery";
        }
      } else {
        e.job.state = JobState::kRecovering;
        e.job.reason = d.reason + " (backoff until " + FormatRfc3339(d.not_before) + ")";
        e.pending_restart = JobEntry::PendingRestart{*d.new_placement, d.resume_from, d.reason, d.not_before};
      }
      break;
    }
  }
  if (automatic && d.action != RecoveryDecision::kFail) {
    ++e.job.restarts;
    ++e.consecutive_restarts;
    e.last_restart_at = now;
  }
  e.job.updated_at = now;
  batch->Put(JobRecord(e.job));
  ScheduleQueued(batch);
  spdlog::warn("job {}: recovery: {}", e.job.id, d.reason);
}

void Controller::StartDueRestarts(Time now, WriteBatch* batch) {
  for (auto& [id, e] : jobs_) {
    if (!e.pending_restart || e.pending_restart->not_before > now) continue;
    JobEntry::PendingRestart p = std::move(*e.pending_restart);
    e.pending_restart.reset();
    if (e.job.state != JobState::kRecovering) continue;  // cancelled meanwhile
    if (!StartAttempt(e, std::move(p.placement), p.reason, batch, p.resume).ok()) {
      e.job.state = JobState::kQueued;  // its spare was taken meanwhile: place it anew
      e.job.reason = "re-placing after recovery";
      batch->Put(JobRecord(e.job));
    }
  }
  ScheduleQueued(batch);
}

void Controller::RestartJob(const std::string& id, std::string from, std::vector<std::string> replace_nodes,
                            std::string reason, Done<Json> done) {
  if (Status s = CheckWritable(); !s.ok()) return done(s);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return done(NotFound("no job " + id));
  JobEntry& e = it->second;
  if (!e.attempt) return done(Conflict("job " + id + " has never run"));
  std::vector<Checkpoint> cps = e.ledger ? e.ledger->All() : std::vector<Checkpoint>{};
  RestartRequest req{e.job, e.attempt->placement, cluster_,
                     from,  replace_nodes,        reason.empty() ? "forced by user" : reason,
                     cps,   clock_->Now()};
  Result<RecoveryDecision> d = ManualRestart(req);
  if (!d.ok()) return done(d.status());
  WriteBatch batch;
  Execute(e, *d, /*automatic=*/false, &batch);
  Finding f;
  f.job = id;
  f.attempt = e.attempt->number - (d->action == RecoveryDecision::kRestart ? 1 : 0);
  f.kind = "restart_requested";
  f.nodes = replace_nodes;
  f.detected_at = clock_->Now();
  f.detail = req.reason;
  f.actions = d->actions;
  RecordFinding(std::move(f), &batch);
  Json out = {{"attempt", e.job.attempt},
              {"state", ToString(e.job.state)},
              {"checkpoint", d->resume_from ? ToJson(*d->resume_from) : Json(nullptr)}};
  Commit(std::move(batch), [out = std::move(out), done = std::move(done)](Status s) mutable {
    if (!s.ok()) return done(s);
    done(std::move(out));
  });
}

}  // namespace shepherd
