#include "control/job_health.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace shepherd {
namespace {

CheckpointLedger::Options LedgerOptions(const Job& job) {
  CheckpointLedger::Options o;
  o.expected_reporters = job.plan.world_size();
  o.good_after_steps = job.spec.policy.good_after_steps;
  o.hash_checks = job.plan.dp > 1 && job.plan.zero_stage < 3;
  o.whole_state_saves = job.plan.zero_stage < 3;
  return o;
}

}  // namespace

JobHealth::JobHealth(const Job& job)
    : external_(job.spec.launch_mode == LaunchMode::kExternal), ledger_(job.id, LedgerOptions(job)) {}

void JobHealth::Restore(const std::vector<Checkpoint>& checkpoints,
                        const std::vector<std::pair<int, int64_t>>& resumes,
                        const std::vector<CheckpointPart>& parts) {
  ledger_.Restore(checkpoints);
  for (const CheckpointPart& p : parts) ledger_.RestorePart(p.attempt, p.step, p.rank);
  std::vector<std::pair<int, int64_t>> sorted = resumes;
  std::sort(sorted.begin(), sorted.end());
  for (auto [attempt, step] : sorted) ledger_.OnAttemptStart(attempt, step);
}

void JobHealth::OnAttemptStart(const Job& job, const Attempt& a, Launch launch, Time now) {
  ledger_.OnAttemptStart(a.number, a.resume_step);
  attempt_started_at_ = now;
  marks_.emplace(job.plan.world_size(), job.spec.policy.heartbeat_timeout_s, &a);
  marks_written_at_ = now;
  MonitorContext ctx;
  ctx.job = job.id;
  ctx.attempt = a.number;
  ctx.started_at = now;
  ctx.plan = job.plan;
  ctx.placement = a.placement;
  ctx.policy = job.spec.policy;
  ctx.hashes_agreed = HashesEverAgreed();
  ctx.resume_step = a.resume_step;
  ctx.steps_known = job.spec.launch_mode != LaunchMode::kExternal;
  unlaunched_.clear();
  rank_nodes_.clear();
  external_pending_ = launch == Launch::kExternal;
  AttemptSummary summary{a.number, a.resume_step, a.resume_checkpoint, std::nullopt, {}};
  for (const RankSlot& r : a.placement.ranks) summary.nodes.insert(r.node);
  attempts_.push_back(std::move(summary));
  if (launch == Launch::kByAgents) {
    for (const RankSlot& r : a.placement.ranks) {
      unlaunched_.insert(r.node);
      rank_nodes_.push_back(r.node);
    }
  }
  unarmed_.reset();
  if (launch != Launch::kRecovered) unarmed_ = ctx;
  auto m = JobMonitor::Create(std::move(ctx));
  if (!m.ok()) {
    spdlog::error("job {}: cannot monitor attempt {}: {}", job.id, a.number, m.status().message());
    monitor_.reset();
    return;
  }
  monitor_ = std::move(m).value();
}

void JobHealth::Arm(Time now) {
  if (!unarmed_) return;
  unarmed_->started_at = now;
  if (auto m = JobMonitor::Create(std::move(*unarmed_)); m.ok()) monitor_ = std::move(m).value();
  unarmed_.reset();
}

bool JobHealth::OnNodeLaunched(const std::string& node, Time now) {
  if (!monitor_ || !unlaunched_.erase(node) || !unlaunched_.empty()) return false;
  Arm(now);
  return true;
}

Status JobHealth::CheckSteps(const ReportBatch& batch) const {
  if (!monitor_) return Status::Ok();
  const std::optional<int64_t> limit = monitor_->MaxAcceptedStep();
  if (!limit) return Status::Ok();
  for (const auto& [index, r] : batch.reports)
    if (r.attempt == monitor_->context().attempt && r.step && *r.step > *limit) {
      const std::string field = "reports[" + std::to_string(index) + "].step";
      const std::string why = "is more than " + std::to_string(JobMonitor::kMaxStepLead) +
                              " steps beyond the highest step of the attempt (at most " +
                              std::to_string(*limit) + ")";
      return InvalidContent(field + ": " + why, {{field, why}});
    }
  return Status::Ok();
}

JobHealth::IngestOutcome JobHealth::Ingest(const ReportBatch& batch, Time now) {
  IngestOutcome out;
  out.rejected = batch.rejected;
  if (!watching()) {
    // A report proves its rank (so its node) started; another launcher's job, that every rank did.
    if (external_pending_ && !batch.reports.empty()) {
      external_pending_ = false;
      Arm(now);
    }
    for (const auto& [index, r] : batch.reports)
      if (r.attempt == monitor_->context().attempt && r.rank >= 0 &&
          r.rank < static_cast<int>(rank_nodes_.size()))
        unlaunched_.erase(rank_nodes_[r.rank]);
    if (unarmed_ && unlaunched_.empty() && !external_pending_) Arm(now);
    out.launched_now = watching();
  }
  const bool finished_before = monitor_->AllFinished();
  for (const auto& [index, r] : batch.reports) {
    IngestResult in = monitor_->Ingest(r, now);
    if (!in.status.ok()) {
      out.rejected.push_back({index, in.status.message()});
      continue;
    }
    ++out.accepted;
    if (in.ignored) {
      ++out.ignored;
      if (in.ignored_reason) ++out.ignored_by_reason[static_cast<int>(*in.ignored_reason)];
      continue;
    }
    out.urgent = out.urgent || in.urgent;
    marks_->OnReport(r, now);
    if (r.kind == ReportKind::kCheckpoint) {
      const uint64_t ignored_before = ledger_.ignored_reports();
      auto ts = ledger_.OnCheckpointReport(r.attempt, r.rank, *r.step, r.path, now, r.replicated);
      if (ledger_.ignored_reports() != ignored_before) ++out.ignored;  // beyond the ledger's bounds
      out.transitions.insert(out.transitions.end(), ts.begin(), ts.end());
    }
  }
  out.all_finished = !finished_before && monitor_->AllFinished();
  std::sort(out.rejected.begin(), out.rejected.end(),
            [](const ReportBatch::Rejected& a, const ReportBatch::Rejected& b) { return a.index < b.index; });
  return out;
}

JobHealth::Evaluation JobHealth::Evaluate(Time now, Time listening_since) {
  Evaluation out;
  if (suspended_ && suspended_until_ && now >= *suspended_until_) Resume(*suspended_until_);
  if (!watching() || suspended_) return out;
  out.findings = monitor_->Evaluate(now, std::max(listening_since, resumed_at_));
  const int attempt = monitor_->context().attempt;
  for (const HealthEvidence& ev : monitor_->TakeEvidence()) {
    for (CheckpointTransition& t : ledger_.OnEvidence(ev, now)) {
      if (t.checkpoint.status == CheckpointStatus::kGood && t.checkpoint.attempt == attempt)
        out.good_progress = true;
      out.transitions.push_back(std::move(t));
    }
    if (ev.kind == HealthEvidence::Kind::kHashAgreed) hashes_agreed_ = true;
    const bool replaying = !replay_nodes_.empty() || set_aside_;
    if (ev.kind == HealthEvidence::Kind::kHashAgreed && replaying && ev.step >= replay_step_) {
      Finding f;
      f.job = monitor_->context().job;
      f.attempt = attempt;
      f.step = ev.step;
      f.detected_at = now;
      const std::string agree = "the replay's parameter hashes agree at step " + std::to_string(ev.step);
      if (set_aside_) {  // the mismatch came back with it and stops without it
        f.kind = FindingKind::kSdcConfirmed;
        f.nodes = {*set_aside_};
        f.detail = agree + " with the ranks of " + *set_aside_ + " moved off it, after the mismatch " +
                   "recurred on a replay with it: " + *set_aside_ + " corrupts";
      } else {
        f.kind = FindingKind::kSdcTransient;
        f.nodes.assign(replay_nodes_.begin(), replay_nodes_.end());
        f.detail = agree + ": the earlier mismatch was transient; no node is blamed";
      }
      EndReplay();
      out.findings.push_back(std::move(f));
    }
  }
  return out;
}

std::vector<AttemptSummary> JobHealth::AttemptHistory() const {
  std::vector<AttemptSummary> out = attempts_;
  if (monitor_ && !out.empty() && monitor_->JobStep() >= 0) out.back().last_step = monitor_->JobStep();
  return out;
}

void JobHealth::OnRankExitedOk(int attempt, int rank, Time now) {
  if (!monitor_ || monitor_->context().attempt != attempt) return;
  Report r;
  r.rank = rank;
  r.attempt = attempt;
  r.time = now;
  r.kind = ReportKind::kFinished;
  monitor_->Ingest(r, now);
}

std::vector<std::string> JobHealth::ReportedNodes() const {
  std::vector<std::string> out;
  if (!monitor_) return out;
  out.resize(monitor_->layout().world_size());
  for (size_t r = 0; r < out.size(); ++r)
    if (auto n = monitor_->ReportedNode(static_cast<int>(r))) out[r] = *n;
  return out;
}

std::optional<Checkpoint> JobHealth::DefaultResume() const {
  if (auto lkg = ledger_.LastKnownGood()) return lkg;
  return ledger_.Latest();
}

Json JobHealth::MonitorJson(Time now) const {
  Json out = monitor_->HealthJson(now);
  if (!watching() || suspended_) {  // ranks not known to run, or stopped by Slurm: none lost or suspected
    out["status"] = suspended_ ? "suspended" : external_pending_ ? "waiting_for_first_report" : "launching";
    out["checks"]["heartbeat"]["status"] = out["status"];
    out["checks"]["heartbeat"]["lost_count"] = 0;
    out["checks"]["heartbeat"]["lost_ranks"] = Json::array();
    out["suspects"] = {{"ranks", Json::array()}, {"ranks_count", 0}, {"nodes", Json::array()}};
  }
  // Another launcher's job: the suspects' hosts as their ranks reported them (as findings name them).
  if (external_ && !out["suspects"]["ranks"].empty()) {
    const std::vector<std::string> reported = ReportedNodes();
    std::set<std::string> nodes;
    for (const Json& r : out["suspects"]["ranks"])
      if (const int i = r.get<int>(); i >= 0 && i < static_cast<int>(reported.size()) && !reported[i].empty())
        nodes.insert(reported[i]);
    out["suspects"]["nodes"] = std::vector<std::string>(nodes.begin(), nodes.end());
  }
  // An SDC replay under way: what it recomputes, on which suspects, and the node it runs without.
  if (!replay_nodes_.empty() || set_aside_) {
    Json replay = {{"nodes", replay_nodes_}, {"step", replay_step_}};
    if (set_aside_) replay["set_aside"] = *set_aside_;
    out["checks"]["sdc"]["replay"] = std::move(replay);
  }
  return out;
}

}  // namespace shepherd
