#include "health/job_monitor.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "health/text.h"

namespace shepherd {
using health_text::Fmt;
using health_text::RankList;

Result<std::unique_ptr<JobMonitor>> JobMonitor::Create(MonitorContext context) {
  auto layout = RankLayout::Build(context.plan, context.placement, /*hybrid_shard_size=*/0);
  if (!layout.ok()) return layout.status();
  return std::unique_ptr<JobMonitor>(new JobMonitor(std::move(context), std::move(layout).value()));
}

JobMonitor::JobMonitor(MonitorContext ctx, RankLayout layout)
    : ctx_(std::move(ctx)),
      layout_(std::move(layout)),
      ranks_(layout_.world_size()),
      named_(layout_.world_size()),
      sdc_(layout_, ctx_.policy.hang_timeout_s),
      loss_(ctx_.policy.loss_spike_factor, ctx_.policy.loss_divergence_steps),
      arrivals_(ArrivalRuleFor(ctx_.policy.heartbeat_interval_s)) {
  ctx_.placement.ranks.clear();  // the layout holds what is needed; do not keep a second copy per rank
  ctx_.placement.ranks.shrink_to_fit();
}

double JobMonitor::SilenceAllowance(const RankState& s) const {
  return ctx_.policy.heartbeat_timeout_s * (s.in_checkpoint_phase() ? kCheckpointAllowance : 1);
}

bool JobMonitor::Alive(const RankState& s, Time now) const {
  const double allowance = SilenceAllowance(s);
  if (ToSeconds(now - listening_since_) <= allowance) return true;  // the daemon has not listened long enough
  if (!s.ever_seen()) return ToSeconds(now - ctx_.started_at) <= ctx_.policy.startup_grace_s;
  return ToSeconds(now - s.last_seen) <= allowance;
}

Result<uint32_t> JobMonitor::NamedGroupOf(int rank, const CollectiveInfo& c) {
  if (c.group_kind != GroupKind::kOther) return uint32_t{0};
  if (c.members.empty()) return named_.Find(c.group, rank);
  if (c.members.back() >= layout_.world_size()) {
    std::string m = "rank " + std::to_string(c.members.back()) + " is outside the job's " +
                    std::to_string(layout_.world_size()) + " ranks";
    return InvalidContent("members: " + m, {{"members", m}});
  }
  return named_.Learn(c.group, rank, c.members);
}

void JobMonitor::EnterCollective(int rank, const CollectiveInfo& c, uint32_t named, Time report_time,
                                 Time now) {
  RankState& s = ranks_[rank];
  if (named) named_.Entered(named, rank, c.seq);
  if (s.has(RankState::kInCollective) && s.collective_group == c.group_kind && s.collective_seq == c.seq &&
      s.named_group == named)
    return;
  // `since` and `time` share the rank's clock: carry the age over to ours so clock skew cancels.
  double age = c.since ? std::max(0.0, ToSeconds(report_time - *c.since)) : 0.0;
  s.set(RankState::kInCollective, true);
  s.collective_group = c.group_kind;
  s.collective_seq = c.seq;
  s.named_group = named;
  s.p2p = c.op == "send" || c.op == "isend"   ? RankState::P2p::kSend
          : c.op == "recv" || c.op == "irecv" ? RankState::P2p::kRecv
                                              : RankState::P2p::kNone;
  s.collective_since = now - Seconds(age);
  if (c.group_kind != GroupKind::kOther) {
    int64_t& entered = s.entered_seq[static_cast<int>(c.group_kind)];
    entered = std::max(entered, c.seq);
  }
  last_progress_ = now;
}

void JobMonitor::LeaveCollective(RankState& s, Time now) {
  if (!s.has(RankState::kInCollective)) return;
  s.set(RankState::kInCollective, false);
  last_progress_ = now;
}

IngestResult JobMonitor::Ingest(const Report& r, Time now) {
  IngestResult res;
  if (r.attempt != ctx_.attempt) {
    ++ignored_;
    res.ignored = true;
    return res;
  }
  if (r.rank < 0 || r.rank >= layout_.world_size()) {
    std::string m = "rank " + std::to_string(r.rank) + " is outside the job's " +
                    std::to_string(layout_.world_size()) + " ranks";
    res.status = InvalidContent("rank: " + m, {{"rank", m}});
    return res;
  }
  std::vector<uint32_t> summary_named;
  if (r.kind == ReportKind::kSummary) {
    if (std::optional<IgnoredReason> why = CheckSummary(r, &summary_named)) {
      // Its content is not used, but it came from the rank (or its agent): the rank is alive. A client that
      // restarted its counters is not a lost rank; a rank stuck in a collective is still named by its peers.
      RankState& s = ranks_[r.rank];
      s.last_seen = now;
      s.set(RankState::kHeartbeatLost, false);
      ++ignored_;
      res.ignored = true;
      res.ignored_reason = why;
      return res;
    }
  }
  uint32_t named = 0;
  if (r.collective) {
    Result<uint32_t> g = NamedGroupOf(r.rank, *r.collective);
    if (!g.ok()) {
      res.status = g.status();
      return res;
    }
    named = *g;
  }
  RankState& s = ranks_[r.rank];
  s.last_seen = now;
  if (!r.node.empty()) RecordNode(s, r.node);
  s.set(RankState::kHeartbeatLost, false);
  // A finished rank's later reports (its helper heartbeats through the interpreter's exit) change nothing.
  if (s.has(RankState::kFinished)) return res;
  if (r.step && *r.step > s.step) {
    s.step = *r.step;
    if (s.step > job_step_) {
      if (job_step_ >= 0) stepped_ = true;
      job_step_ = s.step;
      last_progress_ = now;
    }
  }
  if (r.kind == ReportKind::kStep) stepped_ = true;
  switch (r.kind) {
    case ReportKind::kHeartbeat:
      s.phase = r.phase;
      if (s.in_checkpoint_phase() || s.in_eval_phase()) s.busy_seen = last_busy_ = now;
      if (r.collective) {
        s.set(RankState::kHeartbeatCollectives, true);
        EnterCollective(r.rank, *r.collective, named, r.time, now);
      } else if (s.has(RankState::kHeartbeatCollectives)) {
        LeaveCollective(s, now);
      }
      break;
    case ReportKind::kSummary:
      IngestSummary(r, summary_named, now);
      ObserveArrivals(r, now);
      break;
    case ReportKind::kStep:
      if (s.phase != Phase::kUnspecified && s.phase != Phase::kTrain) s.phase = Phase::kTrain;
      if (r.step_time_s) {
        RecordStepTime(s, *r.step_time_s);
        last_step_time_s_ = *r.step_time_s;
      }
      res.urgent = loss_.OnStep(r.rank, r.step.value_or(s.step), r.loss, r.grad_norm, r.lr, now, r.step_time_s);
      break;
    case ReportKind::kCollective:
      if (!r.collective) break;
      if (r.collective_state == CollectiveState::kStarted) {
        EnterCollective(r.rank, *r.collective, named, r.time, now);
      } else {
        if (r.collective->group_kind != GroupKind::kOther) {
          int64_t& entered = s.entered_seq[static_cast<int>(r.collective->group_kind)];
          entered = std::max(entered, r.collective->seq);
        } else if (named) {
          named_.Entered(named, r.rank, r.collective->seq);
        }
        if (s.has(RankState::kInCollective) && s.collective_group == r.collective->group_kind &&
            s.collective_seq == r.collective->seq && s.named_group == named)
          LeaveCollective(s, now);
        last_progress_ = now;
      }
      break;
    case ReportKind::kParamHash:
      if (r.step) sdc_.OnHash(ranks_, r.rank, *r.step, HashDigest(r.hash), now);
      break;
    case ReportKind::kCheckpoint:
      break;  // the controller routes checkpoint reports to the CheckpointLedger
    case ReportKind::kFinished:
      s.set(RankState::kFinished, true);
      s.phase = Phase::kTrain;
      LeaveCollective(s, now);
      ++finished_;
      break;
  }
  return res;
}

std::optional<IgnoredReason> JobMonitor::CheckSummary(const Report& r, std::vector<uint32_t>* named) {
  const RankState& s = ranks_[r.rank];
  named->assign(r.groups.size(), 0);
  for (size_t i = 0; i < r.groups.size(); ++i) {
    const GroupSummary& g = r.groups[i];
    if (g.group_kind != GroupKind::kOther) {  // members from placement; any `members` sent are not used
      if (g.completed < s.completed_seq[static_cast<int>(g.group_kind)]) return IgnoredReason::kSeqBackwards;
      continue;
    }
    if (!g.members.empty()) {
      if (g.members.back() >= layout_.world_size() ||
          !std::binary_search(g.members.begin(), g.members.end(), r.rank) ||
          !named_.Check(g.group, r.rank, g.members).ok())
        return IgnoredReason::kGroupMembership;
    }
    if (uint32_t id = named_.Find(g.group, r.rank); id && g.completed < named_.CompletedSeq(id, r.rank))
      return IgnoredReason::kSeqBackwards;
  }
  // Every check passed: learn the named groups whose members came along (Check said Learn cannot refuse).
  for (size_t i = 0; i < r.groups.size(); ++i) {
    const GroupSummary& g = r.groups[i];
    if (g.group_kind != GroupKind::kOther) continue;
    Result<uint32_t> id = g.members.empty() ? Result<uint32_t>(named_.Find(g.group, r.rank))
                                            : named_.Learn(g.group, r.rank, g.members);
    (*named)[i] = id.ok() ? *id : 0;
  }
  return std::nullopt;
}

void JobMonitor::IngestSummary(const Report& r, const std::vector<uint32_t>& named, Time now) {
  RankState& s = ranks_[r.rank];
  s.phase = r.phase;
  if (s.in_checkpoint_phase() || s.in_eval_phase()) s.busy_seen = last_busy_ = now;
  s.set(RankState::kHeartbeatCollectives, true);  // a summary lists every open collective: none is "none"
  bool progressed = false;
  size_t oldest = r.groups.size();
  Time oldest_since{};
  for (size_t i = 0; i < r.groups.size(); ++i) {
    const GroupSummary& g = r.groups[i];
    const int64_t reached = std::max(g.completed, g.open ? g.open->seq : int64_t{-1});
    if (g.group_kind != GroupKind::kOther) {
      const int k = static_cast<int>(g.group_kind);
      progressed = progressed || g.completed > s.completed_seq[k] || reached > s.entered_seq[k];
      s.completed_seq[k] = std::max(s.completed_seq[k], g.completed);
      s.entered_seq[k] = std::max(s.entered_seq[k], reached);
    } else if (named[i]) {
      progressed = progressed || g.completed > named_.CompletedSeq(named[i], r.rank) ||
                   reached > named_.EnteredSeq(named[i], r.rank);
      named_.Completed(named[i], r.rank, g.completed);
      named_.Entered(named[i], r.rank, reached);
    }
    progressed = progressed || g.count > 0;
    if (!g.open) continue;
    // The oldest open collective by entry time (rank's clock; without `since`: the report's time).
    const Time since = g.open->since.value_or(r.time);
    if (oldest == r.groups.size() || since < oldest_since) {
      oldest = i;
      oldest_since = since;
    }
  }
  if (oldest < r.groups.size())
    EnterCollective(r.rank, *r.groups[oldest].open, named[oldest], r.time, now);
  else
    LeaveCollective(s, now);
  if (progressed) last_progress_ = now;
}


void JobMonitor::RecordNode(RankState& s, const std::string& node) {
  if (s.node != 0 && node_names_[s.node - 1] == node) return;  // the common case: unchanged
  auto it = node_index_.find(node);
  if (it == node_index_.end()) {
    if (node_names_.size() >= UINT16_MAX) return;
    node_names_.push_back(node);
    it = node_index_.emplace(node, static_cast<uint16_t>(node_names_.size())).first;
  }
  s.node = it->second;
}

std::optional<std::string> JobMonitor::ReportedNode(int rank) const {
  if (rank < 0 || rank >= layout_.world_size() || ranks_[rank].node == 0) return std::nullopt;
  return node_names_[ranks_[rank].node - 1];
}

std::optional<int64_t> JobMonitor::MaxAcceptedStep() const {
  if (job_step_ < 0 && !ctx_.steps_known) return std::nullopt;
  return std::max(job_step_, ctx_.resume_step) + kMaxStepLead;
}

std::optional<int64_t> JobMonitor::RankStep(int rank) const {
  if (rank < 0 || rank >= layout_.world_size() || ranks_[rank].step < 0) return std::nullopt;
  return ranks_[rank].step;
}

Finding JobMonitor::MakeFinding(FindingKind kind, std::vector<int> ranks, Time now,
                                std::string detail) const {
  Finding f;
  f.job = ctx_.job;
  f.attempt = ctx_.attempt;
  f.kind = kind;
  f.nodes = layout_.NodesOf(ranks);
  f.ranks = std::move(ranks);
  if (job_step_ >= 0) f.step = job_step_;
  f.detected_at = now;
  f.detail = std::move(detail);
  return f;
}

void JobMonitor::Evidence(HealthEvidence::Kind kind, int64_t step, std::string what) {
  evidence_.push_back({kind, ctx_.attempt, step, std::move(what)});
}

std::vector<HealthEvidence> JobMonitor::TakeEvidence() {
  return std::exchange(evidence_, {});
}

std::vector<Finding> JobMonitor::Evaluate(Time now, Time listening_since) {
  std::vector<Finding> out;
  std::vector<bool> alive;
  evaluated_at_ = now;
  listening_since_ = listening_since;
  EvaluateHeartbeats(now, &alive, &out);
  EvaluateHang(now, alive, &out);
  EvaluateStragglers(now, &out);
  EvaluateSdc(now, &out);
  EvaluateLoss(now, &out);
  // Healthy through the lowest step every rank passed, but never at or after the onset of an open loss
  // incident (a spike run may still become a divergence) and, while SDC is suspected, never past the last
  // check that agreed. Bounded by step evidence only, so paced and burst reports give the same bound.
  int64_t healthy = min_step_;
  for (const LossIncident* inc :
       {&loss_.nonfinite(), &loss_.spike(), &loss_.divergence(), &loss_.grad_spike()})
    if (inc->open) healthy = std::min(healthy, inc->onset_step - 1);
  if (sdc_suspected_count_ > 0) healthy = std::min(healthy, sdc_.last_agreed_step().value_or(-1));
  if (healthy > healthy_through_) {
    healthy_through_ = healthy;
    Evidence(HealthEvidence::Kind::kHealthyThrough, healthy);
  }
  return out;
}

void JobMonitor::EvaluateHeartbeats(Time now, std::vector<bool>* alive, std::vector<Finding>* out) {
  const int n = layout_.world_size();
  alive->assign(n, false);
  std::vector<int> newly_lost;
  lost_count_ = never_reported_ = checkpointing_ = evaluating_ = 0;
  min_step_ = -1;
  bool all_have_step = true;
  // A rank gone silent is lost once another is seen alive a heartbeat timeout after its silence began (the
  // job goes on without it), or once every rank is silent (one finding: recovery sees the whole job paused
  // or frozen). Until then its peers may be going silent too: a whole job paused node by node, whose first
  // rank was blamed and moved when the next stopped a second later.
  const double window = ctx_.policy.heartbeat_timeout_s;
  std::optional<Time> newest_alive;
  for (int r = 0; r < n; ++r) {
    const RankState& s = ranks_[r];
    if (!s.has(RankState::kFinished) && s.ever_seen() && Alive(s, now) &&
        (!newest_alive || s.last_seen > *newest_alive))
      newest_alive = s.last_seen;
  }
  auto judged_now = [&](const RankState& s) {
    return !s.ever_seen() || !newest_alive || ToSeconds(*newest_alive - s.last_seen) >= window ||
           ToSeconds(now - s.last_seen) > window + SilenceAllowance(s);
  };
  for (int r = 0; r < n; ++r) {
    RankState& s = ranks_[r];
    const bool finished = s.has(RankState::kFinished);  // silent by choice: neither alive nor lost
    const bool ok = finished || Alive(s, now);
    (*alive)[r] = !finished && ok && s.ever_seen();
    if (!s.ever_seen()) ++never_reported_;
    if (s.in_checkpoint_phase() && ok) ++checkpointing_;
    if (s.in_eval_phase() && ok && s.ever_seen()) ++evaluating_;
    if (s.step < 0)
      all_have_step = false;
    else if (min_step_ < 0 || s.step < min_step_)
      min_step_ = s.step;
    if (ok || (!s.has(RankState::kHeartbeatLost) && !judged_now(s))) continue;
    ++lost_count_;
    if (!s.has(RankState::kHeartbeatLost)) {
      s.set(RankState::kHeartbeatLost, true);
      newly_lost.push_back(r);
    }
  }
  if (!all_have_step) min_step_ = -1;
  if (newly_lost.empty()) return;
  std::string detail;
  const RankState& first = ranks_[newly_lost.front()];
  if (first.ever_seen())
    detail = "no report for " + Fmt(ToSeconds(now - first.last_seen)) + " s from rank " +
             std::to_string(newly_lost.front()) + " (heartbeat timeout " +
             Fmt(ctx_.policy.heartbeat_timeout_s) + " s" +
             (first.in_checkpoint_phase() ? " x10 while in a checkpoint phase" : "") + ")";
  else
    detail = "rank " + std::to_string(newly_lost.front()) + " never reported within the " +
             Fmt(ctx_.policy.startup_grace_s) + " s startup grace";
  detail += "; newly lost ranks: " + RankList(newly_lost);
  // Onset: the earliest last report among them (none: a rank that never reported has no known onset).
  std::optional<Time> onset;
  for (int r : newly_lost)
    if (ranks_[r].ever_seen() && (!onset || ranks_[r].last_seen < *onset)) onset = ranks_[r].last_seen;
  Finding f = MakeFinding(FindingKind::kHeartbeatLost, std::move(newly_lost), now, std::move(detail));
  f.onset_at = onset;
  out->push_back(std::move(f));
}

void JobMonitor::EvaluateHang(Time now, const std::vector<bool>& alive, std::vector<Finding>* out) {
  // What the daemon knows of open collectives is stale until it has listened for a heartbeat window (the
  // reports that close them may still be queued): no hang opens before; open ones stay as they were.
  if (ToSeconds(now - listening_since_) <= ctx_.policy.heartbeat_timeout_s) return;
  // Startup (see the header): peers may wait in the first collective while a rank compiles or loads.
  if (!stepped_ &&
      ToSeconds(now - ctx_.started_at) <= ctx_.policy.startup_grace_s + ctx_.policy.hang_timeout_s)
    return;
  const bool was_hung = hang_.hung;
  hang_ = AnalyzeHang(layout_, ranks_, named_, ctx_.policy.heartbeat_timeout_s, alive,
                      ctx_.policy.hang_timeout_s, now);
  // Peers waiting in a collective for ranks that heartbeat saying they are saving a checkpoint or evaluating
  // (rank 0 saving alone while the others wait at a barrier) are not hung until the phase allowance is
  // spent too; nor for a hang timeout after the phase ended (the saver renames its file and walks to the
  // barrier: the collective was open past the timeout all along). A silent culprit is not excused: silence
  // inside the allowance is a stopped process.
  auto busy = [&](const RankState& r) {  // heartbeating (no allowance) in or just out of a busy phase
    const bool just_busy =
        r.busy_seen != Time{} && ToSeconds(now - r.busy_seen) <= ctx_.policy.hang_timeout_s;
    return ToSeconds(now - r.last_seen) <= ctx_.policy.heartbeat_timeout_s &&
           (r.in_checkpoint_phase() || r.in_eval_phase() || just_busy);
  };
  // A culprit waiting in a group whose members are unknown may be waiting for anyone: while some rank is
  // busy saving or evaluating, that rank may be the one it waits for.
  // Walked only for such a culprit (the tick path stays one pass over the ranks otherwise).
  std::optional<bool> someone_busy;
  auto anyone_busy = [&] {
    if (!someone_busy) someone_busy = std::any_of(ranks_.begin(), ranks_.end(), busy);
    return *someone_busy;
  };
  const bool culprits_busy =
      !hang_.culprits.empty() &&
      std::all_of(hang_.culprits.begin(), hang_.culprits.end(), [&](const HangCulprit& c) {
        const RankState& r = ranks_[c.rank];
        const bool unknown_wait =
            r.has(RankState::kInCollective) && r.collective_group == GroupKind::kOther && r.named_group == 0;
        return busy(r) || (unknown_wait && !c.stopped && anyone_busy());
      });
  if (hang_.hung && culprits_busy && hang_.oldest_open_s <= ctx_.policy.hang_timeout_s * kCheckpointAllowance)
    hang_ = HangAnalysis{};
  if (hang_.hung && !was_hung) {
    // Culprit ranks; for a communication fault no rank is at fault: the finding names the stuck groups'
    // nodes only (the recovery policy treats a first communication fault as transient).
    Finding f = MakeFinding(FindingKind::kHang, hang_.SuspectRanks(), now, hang_.detail);
    f.onset_at = now - Seconds(hang_.oldest_open_s);  // the hung collective's start (its first entry)
    if (hang_.culprits.empty()) f.ranks.clear();
    for (const HangCulprit& c : hang_.culprits)
      if (c.stopped) f.silent_ranks.push_back(c.rank);
    out->push_back(std::move(f));
  }

  // Hang outside collectives.
  const bool was_progress_hang = progress_hang_;
  Time ref = stepped_ ? last_progress_
                      : std::max(last_progress_, ctx_.started_at + Seconds(ctx_.policy.startup_grace_s));
  ref = std::max({ref, listening_since_, last_busy_});  // a checkpoint or eval phase is not idleness
  double allowance =
      ctx_.policy.hang_timeout_s * (checkpointing_ > 0 || evaluating_ > 0 ? kCheckpointAllowance : 1);
  double idle = ToSeconds(now - ref);
  bool any_alive = std::find(alive.begin(), alive.end(), true) != alive.end();
  // Once a rank has finished, the training loop is over: the others' work after it (an export, an upload)
  // makes no steps, and no step progress says nothing.
  progress_hang_ = !hang_.hung && any_alive && finished_ == 0 && idle > allowance;
  if (!progress_hang_) return;
  progress_suspects_.clear();
  int64_t lo = -1;
  for (int r = 0; r < layout_.world_size(); ++r)
    if (alive[r] && (lo < 0 || ranks_[r].step < lo)) lo = ranks_[r].step;
  if (lo < job_step_)
    for (int r = 0; r < layout_.world_size(); ++r)
      if (alive[r] && ranks_[r].step == lo) progress_suspects_.push_back(r);
  // Every live rank at the same step, heartbeating, in no collective: they are all busy with something the
  // client does not see (an EMA model's evaluation, an export) as often as stuck. Only a long stall acts.
  if (progress_suspects_.empty()) {
    allowance = std::max(allowance, ctx_.policy.progress_timeout_s);
    progress_hang_ = idle > allowance;
    if (!progress_hang_) return;
  }
  progress_detail_ = "no step progress (job step " + std::to_string(job_step_) +
                     ") and no collective activity for " + Fmt(idle) + " s (timeout " + Fmt(allowance) +
                     " s) while ranks still heartbeat";
  progress_detail_ +=
      progress_suspects_.empty()
          ? "; every live rank is at the same step: a job-wide hang outside collectives"
          : "; lagging at step " + std::to_string(lo) + ": ranks " + RankList(progress_suspects_);
  if (!was_progress_hang) {
    Finding f = MakeFinding(FindingKind::kHang, progress_suspects_, now, progress_detail_);
    f.onset_at = ref;  // the last progress (or the end of the startup grace, of a busy phase)
    out->push_back(std::move(f));
  }
}

}  // namespace shepherd
