// Controller: rank reports, health evaluation, checkpoints and findings.
#include <spdlog/spdlog.h>

#include <cstdio>

#include "daemon/controller.h"

namespace shepherd {

void Controller::StartMonitor(JobEntry& e, Time started_at) {
  MonitorContext ctx;
  ctx.job = e.job.id;
  ctx.attempt = e.attempt->number;
  ctx.started_at = started_at;
  ctx.plan = e.job.plan;
  ctx.placement = e.attempt->placement;
  ctx.policy = e.job.spec.policy;
  auto m = JobMonitor::Create(std::move(ctx));
  if (!m.ok()) {
    spdlog::error("job {}: cannot monitor attempt {}: {}", e.job.id, e.attempt->number, m.status().message());
    e.monitor.reset();
    return;
  }
  e.monitor = std::move(m).value();
  // Jobs the agents launch are watched from the start (startup grace); jobs started by another launcher
  // from their first report (DESIGN.md: detection starts when ranks first report).
  e.monitor_started = !e.job.spec.command.empty();
  Ledger(e).OnAttemptStart(e.attempt->number, e.attempt->resume_step);
}

CheckpointLedger& Controller::Ledger(JobEntry& e) {
  if (!e.ledger) {
    CheckpointLedger::Options o;
    o.expected_reporters = e.job.plan.world_size();
    o.good_after_steps = e.job.spec.policy.good_after_steps;
    o.hash_checks = e.job.plan.dp > 1 && e.job.plan.zero_stage < 3;
    e.ledger = std::make_unique<CheckpointLedger>(e.job.id, o);
  }
  return *e.ledger;
}

void Controller::PersistTransitions(const std::vector<CheckpointTransition>& ts, WriteBatch* batch) {
  for (const auto& t : ts) {
    batch->Put({Collection::kCheckpoints, t.checkpoint.id, t.checkpoint.job, ToJson(t.checkpoint).dump()});
    if (!t.created)
      spdlog::info("checkpoint {} {} -> {}: {}", t.checkpoint.id, ToString(t.from),
                   ToString(t.checkpoint.status), t.checkpoint.reason);
  }
}

void Controller::RecordFinding(Finding f, WriteBatch* batch) {
  char id[32];
  std::snprintf(id, sizeof id, "f-%06lld", static_cast<long long>(next_finding_seq_++));
  f.id = id;
  ++finding_counts_[f.kind];
  if (auto it = jobs_.find(f.job); it != jobs_.end()) OnFinding(it->second, f, batch);
  spdlog::warn("finding {} {} job {} attempt {}: {}", f.id, f.kind, f.job, f.attempt, f.detail);
  batch->Put({Collection::kFindings, f.id, f.job, ToJson(f).dump()});
  findings_.push_back(std::move(f));
}

void Controller::EvaluateJob(JobEntry& e, Time now, WriteBatch* batch) {
  if (!e.monitor || !e.monitor_started) return;
  std::vector<Finding> findings = e.monitor->Evaluate(now);
  int attempt = e.attempt->number;
  for (const HealthEvidence& ev : e.monitor->TakeEvidence()) {
    std::vector<CheckpointTransition> ts = Ledger(e).OnEvidence(ev, now);
    for (const CheckpointTransition& t : ts)
      if (t.checkpoint.status == CheckpointStatus::kGood && t.checkpoint.attempt == attempt)
        e.consecutive_restarts = 0;  // the attempt made good progress: the backoff starts over
    PersistTransitions(ts, batch);
    if (ev.kind == HealthEvidence::Kind::kHashAgreed && !sdc_history_.ReplayNodes(e.job.id).empty()) {
      std::vector<std::string> nodes = sdc_history_.OnReplayClean(e.job.id);
      Finding f;
      f.job = e.job.id;
      f.attempt = attempt;
      f.kind = "sdc_transient";
      f.nodes = nodes;
      f.step = ev.step;
      f.detected_at = now;
      f.detail = "the replay's parameter hashes agree at step " + std::to_string(ev.step) +
                 ": the earlier mismatch was transient; no node is blamed";
      RecordFinding(std::move(f), batch);
    }
  }
  // Recovery may end the attempt (and its monitor) while these are recorded.
  for (Finding& f : findings) RecordFinding(std::move(f), batch);
}

void Controller::IngestReports(const std::string& job_id, const Json& body, Done<Json> done) {
  if (Status s = CheckWritable(); !s.ok()) return done(s);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return done(NotFound("no job " + job_id));
  JobEntry& e = it->second;
  if (!body.is_object() || !body.contains("reports") || !body["reports"].is_array())
    return done(InvalidContent("the body must be {\"reports\": [...]}", {{"reports", "must be an array"}}));
  if (!e.monitor)
    return done(Conflict("job " + job_id + " is " + ToString(e.job.state) + ": no attempt is running"));
  Time now = clock_->Now();
  if (!e.monitor_started) {
    // A job started by another launcher is watched from its first report: grace counts from now.
    StartMonitor(e, now);
    e.monitor_started = true;
  }
  const Json& reports = body["reports"];
  Json rejected = Json::array();
  int accepted = 0, ignored = 0;
  bool urgent = false;
  WriteBatch batch;
  for (size_t i = 0; i < reports.size(); ++i) {
    Result<Report> r = ParseReport(reports[i], now);
    if (!r.ok()) {
      rejected.push_back({{"index", i}, {"error", r.status().message()}});
      continue;
    }
    IngestResult in = e.monitor->Ingest(*r, now);
    if (!in.status.ok()) {
      rejected.push_back({{"index", i}, {"error", in.status.message()}});
      continue;
    }
    ++accepted;
    if (in.ignored) {
      ++ignored;
      continue;
    }
    urgent = urgent || in.urgent;
    if (r->kind == ReportKind::kCheckpoint)
      PersistTransitions(
          Ledger(e).OnCheckpointReport(r->attempt, r->rank, *r->step, r->path, now, r->replicated), &batch);
  }
  report_counts_["accepted"] += accepted - ignored;
  report_counts_["ignored"] += ignored;
  report_counts_["rejected"] += rejected.size();
  if (urgent) EvaluateJob(e, now, &batch);
  Json out = {{"accepted", accepted}, {"rejected", std::move(rejected)}, {"ignored", ignored}};
  if (batch.empty()) return done(std::move(out));
  Commit(std::move(batch), [out = std::move(out), done = std::move(done)](Status s) mutable {
    if (!s.ok()) return done(s);
    done(std::move(out));
  });
}

void Controller::Tick() {
  if (!CheckWritable().ok()) return;
  Time now = clock_->Now();
  WriteBatch batch;
  for (auto& [id, e] : jobs_) EvaluateJob(e, now, &batch);
  CheckAgents(now, &batch);
  StartDueRestarts(now, &batch);
  if (!batch.empty()) Commit(std::move(batch), [](Status) {});
}

Result<Json> Controller::GetHealth(const std::string& id) const {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return NotFound("no job " + id);
  const JobEntry& e = it->second;
  Time now = clock_->Now();
  Json out;
  if (e.monitor && e.job.state == JobState::kRunning) {
    out = e.monitor->HealthJson(now);
    if (!e.monitor_started) out["status"] = "waiting_for_first_report";
  } else {
    out = {{"status", ToString(e.job.state)},
           {"checks", Json::object()},
           {"suspects", {{"ranks", Json::array()}, {"nodes", Json::array()}}}};
  }
  std::optional<Checkpoint> lkg = e.ledger ? e.ledger->LastKnownGood() : std::nullopt;
  out["last_known_good_checkpoint"] = lkg ? ToJson(*lkg) : Json(nullptr);
  out["attempt"] = e.job.attempt;
  out["job_state"] = ToString(e.job.state);
  out["updated_at"] = FormatRfc3339(now);
  return out;
}

Result<Json> Controller::GetCheckpoints(const std::string& id) const {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return NotFound("no job " + id);
  Json items = Json::array();
  if (it->second.ledger)
    for (const Checkpoint& c : it->second.ledger->All()) items.push_back(ToJson(c));
  std::optional<Checkpoint> lkg = it->second.ledger ? it->second.ledger->LastKnownGood() : std::nullopt;
  return Json{{"checkpoints", std::move(items)}, {"last_known_good", lkg ? Json(lkg->id) : Json(nullptr)}};
}

Result<Json> Controller::GetFailures(const FailureFilter& f) const {
  if (f.job && !jobs_.count(*f.job)) return NotFound("no job " + *f.job);
  Json items = Json::array();
  for (const Finding& x : findings_) {
    if (f.job && x.job != *f.job) continue;
    if (f.kind && x.kind != *f.kind) continue;
    if (f.since && x.detected_at < *f.since) continue;
    items.push_back(ToJson(x));
  }
  return Json{{"failures", std::move(items)}};
}

}  // namespace shepherd
