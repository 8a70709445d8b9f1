#include "control/recovery_executor.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "control/launch/launcher.h"
#include "control/records.h"
#include "scheduler/loop_breakers.h"

namespace shepherd {

HealthUpdate RecoveryExecutor::OnFinding(Finding& f, const JobHealth& health, std::span<const Finding> earlier,
                                         Time now, WriteBatch* batch, const std::vector<std::string>& reported_nodes,
                                 std::set<std::string> vouched, bool daemon_was_late, bool may_hold,
                                 const RecoveryContext& ctx) {
  const JobEntry* e = jobs_->Find(f.job);
  HealthUpdate update;
  if (!e || !IsActive(e->job.state) || !e->attempt || f.attempt != e->attempt->number) return update;
  const Launcher& launcher = LauncherFor(e->job);
  const bool external = !launcher.StartsAttempts();  // remediated as its policy says, never restarted
  if (may_hold && launcher.AgentsStartRanks() && Hold(f, *e, ctx.agents)) return update;
  // A job we did not place for real: blame follows the nodes its ranks reported, never our placement.
  const bool by_reports = launcher.BlamesReportedNodes();
  Placement reported = e->attempt->placement;
  if (by_reports)
    for (RankSlot& r : reported.ranks)
      r.node = r.rank < static_cast<int>(reported_nodes.size()) ? reported_nodes[r.rank] : "";
  const Restarts& st = state_[f.job];
  RecoveryInput in{.job = e->job,
                   .placement = by_reports ? reported : e->attempt->placement,
                   .cluster = ctx.allocation ? *ctx.allocation : inventory_->cluster(),
                   .finding = f,
                   .last_known_good = health.ledger().LastKnownGood(),
                   .latest_complete = health.ledger().Latest(),
                   .now = now,
                   .last_restart_at = st.last_restart_at,
                   .consecutive_restarts = st.consecutive_restarts,
                   .pending_replay_nodes = health.pending_replay_nodes(),
                   .earlier_findings = earlier,
                   .vouched_nodes = std::move(vouched),
                   .set_aside_replay = health.set_aside_replay(),
                   .hashes_ever_agreed = health.HashesEverAgreed(),
                   .daemon_was_late = daemon_was_late,
                   .free_restart = st.incident && RestartIsFree(*st.incident, f)};
  RecoveryDecision d = DecideRecovery(in);
  if (external) {
    Remediate(f, e->job, d, earlier, now, batch, ctx);
    return update;
  }
  if ((d.action == RecoveryDecision::kRestart || d.action == RecoveryDecision::kQueue) &&
      !BreakLoop(f, health, earlier, now, &in, &d, &update))
    return update;
  if (d.action == RecoveryDecision::kNone && d.node_actions.empty()) {
    if (d.sdc_settled) {  // the replay's answer: nothing to do, and why
      update.end_replay = true;
      f.actions.insert(f.actions.end(), d.actions.begin(), d.actions.end());
    }
    return update;
  }
  Execute(f.job, d, /*automatic=*/true, &update, f.id, f.incident.empty() ? f.id : f.incident, now, batch);
  f.actions.insert(f.actions.end(), d.actions.begin(), d.actions.end());
  return update;
}

bool RecoveryExecutor::Hold(Finding& f, const JobEntry& e, const AgentBoard* agents) {
  Restarts& st = state_[f.job];
  if (st.held && st.held->attempt == f.attempt && IsRankFaultKind(f.kind)) {
    f.actions.push_back("restart held with " + st.held->finding + " (waiting to hear from every node)");
    return true;
  }
  if (f.kind != FindingKind::kProcessExit || f.fenced || !agents) return false;
  ExitHold h = HoldVerdict(e, f.detected_at, f.detected_at, *agents);
  if (!h.hold) return false;
  st.held = HeldExit{f.id, f.attempt, f.detected_at};
  f.actions.push_back(h.reason);
  return true;
}

ExitHold RecoveryExecutor::HoldVerdict(const JobEntry& e, Time exit_at, Time now,
                                       const AgentBoard& agents) const {
  ExitHoldInput in{.exit_at = exit_at, .now = now, .node_timeout_s = node_timeout_s_};
  for (const RankSlot& r : e.attempt->placement.ranks)
    if (!in.last_heard.count(r.node)) in.last_heard[r.node] = agents.LastHeard(r.node);
  return DecideExitHold(in);
}

std::vector<RecoveryExecutor::HoldOutcome> RecoveryExecutor::DueHolds(Time now, const AgentBoard& agents) {
  std::vector<HoldOutcome> out;
  for (auto& [job, st] : state_) {
    if (!st.held) continue;
    const JobEntry* e = jobs_->Find(job);
    if (!e || !IsActive(e->job.state) || !e->attempt || e->attempt->number != st.held->attempt) {
      std::string line = "restart not held any more: ";
      if (e && IsActive(e->job.state) && e->attempt)  // another attempt runs: a later finding restarted it
        line += "attempt " + std::to_string(st.held->attempt) + " was ended meanwhile" +
                (st.incident ? " (incident " + st.incident->root + ")" : std::string());
      else
        line += std::string("the job is ") + (e ? ToString(e->job.state) : "gone");
      out.push_back({job, st.held->finding, false, line});
      st.held.reset();
      continue;
    }
    ExitHold h = HoldVerdict(*e, st.held->exit_at, now, agents);
    if (h.hold) continue;
    out.push_back({job, st.held->finding, true, "hold over: " + h.reason});
    st.held.reset();
  }
  return out;
}

std::vector<std::string> RecoveryExecutor::AssignIncident(Finding& f, WriteBatch* batch) {
  const JobEntry* e = jobs_->Find(f.job);
  Restarts& st = state_[f.job];
  std::optional<Time> trained;
  if (e && e->attempt) {
    if (st.first_step && st.first_step->first == e->attempt->number) trained = st.first_step->second;
    if (e->attempt->first_step_at && (!trained || *e->attempt->first_step_at < *trained))
      trained = e->attempt->first_step_at;
  }
  const IncidentVerdict v = ClassifyFinding(f, st.incident ? &*st.incident : nullptr,
                                            e ? e->job.attempt : f.attempt, trained, window_);
  f.incident = v.incident;
  std::set<std::string> nodes;  // of f's attempt
  const Placement* p = e && e->attempt && e->attempt->number == f.attempt      ? &e->attempt->placement
                       : e && e->previous && e->previous->attempt == f.attempt ? &*e->previous
                                                                               : nullptr;
  if (p)
    for (const RankSlot& r : p->ranks) nodes.insert(r.node);
  if (v.kind == IncidentVerdict::Kind::kOpen) st.incident_attempts.clear();
  std::vector<std::string> repointed = Admit(f, v, nodes, &st.incident);
  if (v.kind != IncidentVerdict::Kind::kReroot) return repointed;
  JobEntry* m = jobs_->Mutable(f.job);
  for (Attempt& a : st.incident_attempts) {
    a.ended_by = f.id;
    if (m->attempt && m->attempt->number == a.number) {
      m->attempt->ended_by = f.id;
      batch->Put(AttemptRecord(*m->attempt));
    } else {
      batch->Put(AttemptRecord(a));
    }
  }
  return repointed;
}

const Incident* RecoveryExecutor::OpenIncident(const std::string& job) const {
  auto it = state_.find(job);
  return it == state_.end() || !it->second.incident ? nullptr : &*it->second.incident;
}

void RecoveryExecutor::OnStep(const std::string& job, int attempt, Time now) {
  auto it = state_.find(job);
  if (it == state_.end() || !it->second.incident) return;  // only an open incident needs to know
  auto& first = it->second.first_step;
  if (!first || first->first != attempt) first = std::make_pair(attempt, now);
}

Result<RecoveryExecutor::ForcedRestart> RecoveryExecutor::ForceRestart(const std::string& job,
                                                                       const JobHealth& health,
                                                        const std::string& from,
                                                        const std::vector<std::string>& replace_nodes,
                                                        const std::string& reason,
                                                        std::span<const Finding> earlier, Time now,
                                                        WriteBatch* batch,
                                                        const std::optional<Cluster>& allocation) {
  const JobEntry* e = jobs_->Find(job);
  if (!e) return NotFound("no job " + job);
  if (!e->attempt) return Conflict("job " + job + " has never run");
  std::vector<Checkpoint> cps = health.ledger().All();
  RestartRequest req{e->job,  e->attempt->placement, allocation ? *allocation : inventory_->cluster(),
                     from,    replace_nodes,         reason,
                     cps,     now};
  req.earlier_findings = earlier;
  Result<RecoveryDecision> d = ManualRestart(req);
  if (!d.ok()) return d.status();
  ForcedRestart out{std::move(d).value(), {}};
  Execute(job, out.decision, /*automatic=*/false, &out.health, "operator", "", now, batch);
  return out;
}

void RecoveryExecutor::Execute(const std::string& job, const RecoveryDecision& d, bool automatic,
                               HealthUpdate* health, const std::string& source, const std::string& ended_by,
                               Time now, WriteBatch* batch) {
  for (const NodeAction& a : d.node_actions) inventory_->Apply(a, source, now, batch);
  if (d.sdc_settled) health->end_replay = true;
  Restarts& st = state_[job];
  // The attempt this decision ends, as its record is written (with ended_by), for re-rooting later.
  std::optional<Attempt> ending;
  if (JobEntry* m = jobs_->Mutable(job); d.action != RecoveryDecision::kNone && m->attempt) {
    if (!m->attempt->ended_at) m->attempt->ended_by = ended_by;
    ending = *m->attempt;
    if (!ending->ended_at) ending->ended_at = now;
  }
  switch (d.action) {
    case RecoveryDecision::kNone:
      return;
    case RecoveryDecision::kFail:
      jobs_->EndAttempt(job, now, batch);
      jobs_->SetState(job, JobState::kFailed, d.reason, now, batch);  // Settle ends its health
      st.pending.reset();
      break;
    case RecoveryDecision::kQueue:
      jobs_->EndAttempt(job, now, batch);
      jobs_->SetState(job, JobState::kQueued, d.reason, now, batch);
      break;
    case RecoveryDecision::kRestart:
      jobs_->EndAttempt(job, now, batch);
      if (d.replay) health->replay = HealthUpdate::Replay{d.replay_nodes, d.replay_step, d.set_aside};
      if (d.not_before > now) {
        jobs_->SetNextNotBefore(job, d.not_before);
        jobs_->SetState(job, JobState::kRecovering,
                        d.reason + " (backoff until " + FormatRfc3339(d.not_before) + ")", now, batch);
        // Its GPUs wait with it: a queued job placed there meanwhile left it to queue behind that job, and
        // a decision made meanwhile counted on them as free.
        if (Status s = jobs_->Hold(job, *d.new_placement); !s.ok())
          spdlog::warn("job {}: GPUs not held during the backoff: {}", job, s.message());
        st.pending = PendingRestart{*d.new_placement, d.resume_from, d.reason, d.not_before};
      } else if (!jobs_->StartAttempt(job, *d.new_placement, d.reason, d.resume_from, now, batch).ok()) {
        jobs_->SetState(job, JobState::kQueued, "re-placing after recovery", now, batch);
      }
      break;
  }
  if (automatic && d.action != RecoveryDecision::kFail && d.spends_budget) {
    JobEntry* e = jobs_->Mutable(job);
    ++e->job.restarts;
    ++st.consecutive_restarts;
    st.last_restart_at = now;
    jobs_->Persist(job, batch);
  }
  if (automatic && ending && st.incident && st.incident->root == ended_by) {
    std::set<std::string> next;
    if (d.new_placement)
      for (const RankSlot& r : d.new_placement->ranks) next.insert(r.node);
    OnIncidentEndedAttempt(&*st.incident, ending->number, d.action != RecoveryDecision::kFail,
                           d.spends_budget, next);
    st.incident_attempts.push_back(std::move(*ending));
  }
  spdlog::warn("job {}: recovery: {}", job, d.reason);
}

bool RecoveryExecutor::BreakLoop(Finding& f, const JobHealth& health, std::span<const Finding> earlier, Time now,
                                 RecoveryInput* in, RecoveryDecision* d, HealthUpdate* update) {
  const Policy& policy = in->job.spec.policy;
  const std::vector<AttemptSummary> attempts = health.AttemptHistory();
  LoopVerdict v = CheckForLoop({f, earlier, attempts, policy});
  switch (v.kind) {
    case LoopVerdict::Kind::kNone:
      return true;
    case LoopVerdict::Kind::kPoisonedCheckpoint: {
      // Decided on a copy: the ledger is the health owner's to change (JobHealth::Apply).
      CheckpointLedger after = health.ledger();
      after.Demote(v.bad_checkpoint, v.reason, now);
      update->demote = HealthUpdate::Demotion{v.bad_checkpoint, v.reason};
      in->last_known_good = after.LastKnownGood();
      in->latest_complete = after.Latest();
      *d = DecideRecovery(*in);  // resume from the previous good checkpoint
      d->actions.insert(d->actions.begin(), "demote checkpoint " + v.bad_checkpoint + ": " + v.reason);
      return true;
    }
    case LoopVerdict::Kind::kReproducibleAnomaly:
      if (policy.on_reproducible_anomaly == OnReproducible::kRecord) {
        f.actions.push_back("record only (on_reproducible_anomaly: record): " + v.reason);
        return false;
      }
      [[fallthrough]];
    case LoopVerdict::Kind::kDeterministicCrash:
    case LoopVerdict::Kind::kNoProgress:
      // The data, the code or the job, not the hardware: no node is blamed and no restart follows.
      d->action = RecoveryDecision::kFail;
      d->node_actions.clear();
      d->new_placement.reset();
      d->reason = v.reason;
      d->actions = {"stop attempt " + std::to_string(in->job.attempt),
                    std::string("fail the job: ") + v.reason};
      return true;
  }
  return true;
}

void RecoveryExecutor::Remediate(Finding& f, const Job& job, const RecoveryDecision& d,
                                 std::span<const Finding> earlier, Time now, WriteBatch* batch,
                                 const RecoveryContext& ctx) {
  const Policy& policy = job.spec.policy;
  f.recommended_actions = d.actions;
  switch (policy.external_remediation) {
    case ExternalRemediation::kNone:
      if (!d.actions.empty())
        f.actions.push_back("none: the job is not launched by Shepherd (recommendations recorded)");
      return;
    case ExternalRemediation::kCordon:
    case ExternalRemediation::kSlurmDrain: {
      std::optional<std::set<std::string>> listed = ctx.slurm_nodes;
      if (!ctx.slurm_bound) {
        listed.reset();
        if (const JobEntry* e = jobs_->Find(job.id); e && e->attempt) {
          listed.emplace();
          for (const RankSlot& r : e->attempt->placement.ranks) listed->insert(r.node);
        }
      }
      for (NodeAction a : d.node_actions) {
        if (a.node.empty() || !inventory_->Find(a.node)) {
          f.actions.push_back("cannot cordon " +
                              (a.node.empty() ? std::string("an unreported node") : a.node) +
                              ": not in Shepherd's inventory");
          continue;
        }
        if (!listed || !listed->contains(a.node)) {
          f.actions.push_back("would cordon " + a.node + ", not done: " +
                              (listed ? "not among the nodes the job's launcher lists for it"
                                      : "the job's launcher lists no nodes for it yet") +
                              " (its ranks' reports alone do not say where they run)");
          continue;
        }
        a.action = NodeActionKind::kCordon;  // Shepherd only cordons what it does not run
        a.reason = "external job " + f.job + ": " + a.reason;
        inventory_->Apply(a, f.id, now, batch);
        if (policy.external_remediation == ExternalRemediation::kCordon)
          f.actions.push_back("cordon " + a.node + " (external_remediation: cordon)");
        else if (slurm_)
          f.actions.push_back("cordon " + a.node +
                              " and drain it in Slurm (external_remediation: slurm-drain)");
        else
          f.actions.push_back("cordon " + a.node +
                              " (external_remediation: slurm-drain; the daemon runs without --slurm: not "
                              "drained in Slurm)");
      }
      return;
    }
    case ExternalRemediation::kHook:
      if (!hook_) {
        f.actions.push_back("no remediation hook is configured: nothing run");
        return;
      }
      hook_(f);
      f.actions.push_back("ran the site's remediation hook");
      return;
    case ExternalRemediation::kRequeue:
      return Requeue(f, job, d, earlier, batch);
  }
}

void RecoveryExecutor::Requeue(Finding& f, const Job& job, const RecoveryDecision& d,
                               std::span<const Finding> earlier, WriteBatch* batch) {
  const std::string what = "requeue Slurm job " + job.spec.external_id;
  if (d.action == RecoveryDecision::kFail) {
    // The restart budget is spent, or the job loops: requeueing would not help. Slurm runs the job on; it
    // stays watched.
    f.actions.push_back("none: not requeued (" + d.reason + ")");
    return;
  }
  if (d.action != RecoveryDecision::kRestart) {
    if (!d.actions.empty())
      f.actions.push_back("none: recovery would not restart the job (external_remediation: requeue)");
    return;
  }
  // Once per attempt: a requeue asked for, unless its outcome came back saying it did not happen.
  auto asked = [&](const Finding& x) {
    bool requeue = false, not_done = false;
    for (const std::string& a : x.actions) {
      requeue = requeue || a.rfind(what + " ", 0) == 0;
      not_done = not_done || a.rfind("not requeued: ", 0) == 0;
    }
    return x.attempt == f.attempt && requeue && !not_done;
  };
  for (const Finding& x : earlier)
    if (asked(x)) {
      f.actions.push_back("none: " + x.id + " already requeued attempt " + std::to_string(f.attempt));
      return;
    }
  if (!requeue_) {
    f.actions.push_back("cannot " + what + ": the daemon runs without --slurm");
    return;
  }
  requeue_(job, f);
  f.actions.push_back(what +
                      " if Slurm shows it running (external_remediation: requeue; its ranks return as "
                      "attempt " +
                      std::to_string(f.attempt + 1) + ")");
  JobEntry* e = jobs_->Mutable(job.id);
  ++e->job.restarts;
  jobs_->Persist(job.id, batch);
}

std::vector<std::string> RecoveryExecutor::DueRestarts(Time now) const {
  std::vector<std::string> out;
  for (const auto& [job, st] : state_)
    if (st.pending && st.pending->not_before <= now) out.push_back(job);
  return out;
}

void RecoveryExecutor::StartDue(Time now, WriteBatch* batch, const Unserved& unserved,
                                const std::map<std::string, Cluster>& allocations) {
  for (auto& [job, st] : state_) {
    if (!st.pending || st.pending->not_before > now) continue;
    PendingRestart p = std::move(*st.pending);
    st.pending.reset();
    const JobEntry* e = jobs_->Find(job);
    if (!e || e->job.state != JobState::kRecovering) continue;  // cancelled meanwhile
    auto a = allocations.find(job);
    Start(*e, p.placement, p.reason, p.resume, /*spares_only=*/false, now, batch, unserved,
          a == allocations.end() ? nullptr : &a->second);
  }
}

void RecoveryExecutor::StartQueuedOnSpares(Time now, WriteBatch* batch, const ResumeChooser& resume,
                                           const Unserved& unserved) {
  std::vector<const JobEntry*> queued;
  for (const auto& [seq, id] : jobs_->queued())
    if (const JobEntry* e = jobs_->Find(id); e->attempt && LauncherFor(e->job).AgentsStartRanks())
      queued.push_back(e);
  if (queued.empty()) return;
  const Cluster& c = inventory_->cluster();
  const std::vector<const Node*> nodes = c.nodes();
  const bool free_spare = std::any_of(nodes.begin(), nodes.end(), [&](const Node* n) {
    return n->spare && n->schedulable && !n->failed && c.FreeGpuMask(n->id) != 0;
  });
  if (!free_spare) return;
  for (const JobEntry* e : queued)
    Start(*e, e->attempt->placement, "on a spare after recovery", resume(e->job.id), /*spares_only=*/true,
          now, batch, unserved);
}

bool RecoveryExecutor::Start(const JobEntry& e, const Placement& placement, const std::string& reason,
                             const std::optional<Checkpoint>& resume, bool spares_only, Time now,
                             WriteBatch* batch, const Unserved& unserved, const Cluster* allocation) {
  const std::string job = e.job.id;
  const Cluster& c = allocation ? *allocation : inventory_->cluster();
  // Nodes to leave if there is room: no live agent serves them, or (its GPUs released while it queued)
  // another job took them.
  std::set<std::string> avoid;
  const bool ours = LauncherFor(e.job).AgentsStartRanks();  // an agent's silence loses its ranks
  std::set<std::string> lost = ours && unserved ? unserved() : std::set<std::string>{};
  const bool held = c.Holds(job);
  for (const RankSlot& r : placement.ranks)
    if (lost.count(r.node) != 0 || (!held && (c.FreeGpuMask(r.node) & (uint64_t{1} << r.gpu)) == 0))
      avoid.insert(r.node);
  RecoveryDecision d = PlaceRestart(e.job, placement, c, avoid, spares_only);
  if (spares_only && d.action != RecoveryDecision::kRestart) return false;  // it stays queued
  if (d.action != RecoveryDecision::kRestart && !avoid.empty() && held)
    d = PlaceRestart(e.job, placement, c);  // no room without the unserved: start there all the same
  jobs_->EndAttempt(job, now, batch);       // the GPUs it held for the restart
  if (d.action != RecoveryDecision::kRestart) {
    jobs_->SetState(job, JobState::kQueued, "re-placing after recovery: " + d.reason, now, batch);
    return false;
  }
  std::string why = reason;
  for (const std::string& line : d.actions) why += "; " + line;
  if (!jobs_->StartAttempt(job, std::move(*d.new_placement), why, resume, now, batch).ok()) {
    jobs_->SetState(job, JobState::kQueued, "re-placing after recovery", now, batch);
    return false;
  }
  return true;
}

}  // namespace shepherd
