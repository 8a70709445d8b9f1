// JobMonitor's evaluation of stragglers, SDC checks and loss anomalies (heartbeats and hangs are in
// job_monitor.cpp).
#include <cmath>
#include <string>
#include <vector>

#include "health/job_monitor.h"
#include "health/text.h"

namespace shepherd {

using health_text::Fmt;
using health_text::RankList;

void JobMonitor::ObserveArrivals(const Report& r, Time /*now*/) {
  for (const GroupSummary& g : r.groups) arrivals_.Observe(r.rank, layout_.world_size(), g);
}

void JobMonitor::EvaluateArrivals(Time now, std::vector<Finding>* out) {
  std::vector<bool> named(ranks_.size(), false);
  for (const ArrivalStraggler& a : arrivals_.named()) {
    if (named[a.rank]) continue;  // named in two of its groups: one incident, the first group's evidence
    named[a.rank] = true;
    RankState& s = ranks_[a.rank];
    if (s.has(RankState::kArrivalStraggler)) continue;
    s.set(RankState::kArrivalStraggler, true);
    const std::string group = ToString(a.group);
    std::string detail = "rank " + std::to_string(a.rank) + " on " + layout_.node(a.rank) +
                         " arrived last in its " + group + " group's collectives: the others waited " +
                         Fmt(a.lateness_s) + " s per collective for it, in " +
                         Fmt(std::round(a.share_held_up * 1000) / 10) + " % of its collectives over " +
                         std::to_string(a.windows) + " windows (" + Fmt(a.span_s) + " s)";
    Finding f = MakeFinding(FindingKind::kStraggler, {a.rank}, now, std::move(detail));
    f.onset_at = now - Seconds(a.span_s);
    f.straggler = StragglerEvidence{
        .group = group, .lateness_s = a.lateness_s, .share_held_up = a.share_held_up, .windows = a.windows};
    out->push_back(std::move(f));
  }
  for (size_t r = 0; r < ranks_.size(); ++r)
    if (!named[r]) ranks_[r].set(RankState::kArrivalStraggler, false);
}

void JobMonitor::EvaluateStragglers(Time now, std::vector<Finding>* out) {
  if (arrivals_.Tick(layout_, now)) EvaluateArrivals(now, out);
  stragglers_ = AnalyzeStragglers(ranks_, ctx_.policy);
  std::vector<bool> flagged(ranks_.size(), false);
  std::vector<int> fresh;
  std::string evidence;
  for (size_t i = 0; i < stragglers_.stragglers.size(); ++i) {
    int r = stragglers_.stragglers[i];
    flagged[r] = true;
    if (ranks_[r].has(RankState::kStraggler)) continue;
    ranks_[r].set(RankState::kStraggler, true);
    fresh.push_back(r);
    if (fresh.size() <= 8)
      evidence += (fresh.size() > 1 ? ", rank " : "rank ") + std::to_string(r) + " on " + layout_.node(r) +
                  " median " + Fmt(stragglers_.median_s[i]) + " s";
  }
  for (size_t r = 0; r < ranks_.size(); ++r)
    if (!flagged[r]) ranks_[r].set(RankState::kStraggler, false);
  if (fresh.empty()) return;
  std::string detail = evidence + " against the job median " + Fmt(stragglers_.job_median_s) +
                       " s: slower than " + Fmt(ctx_.policy.straggler_factor) +
                       "x the median in most of the last " + std::to_string(stragglers_.window) + " steps";
  out->push_back(MakeFinding(FindingKind::kStraggler, std::move(fresh), now, std::move(detail)));
}

void JobMonitor::EvaluateSdc(Time now, std::vector<Finding>* out) {
  for (SdcCheckResult& res : sdc_.Resolve(ranks_, now)) {
    for (SdcMismatch& v : res.mismatches) {
      if (v.newly_suspected.empty()) continue;
      Finding f = MakeFinding(FindingKind::kSdcSuspected, v.newly_suspected, now, v.detail);
      f.sdc_verdict = v.no_agreement   ? SdcVerdict::kNoAgreement
                      : v.needs_replay ? SdcVerdict::kNeedsReplay
                                       : SdcVerdict::kMajority;
      f.step = res.step;
      f.onset_at = res.first_seen;  // the mismatching check's time
      // The corruption arose after the last check that agreed: the earliest possible onset.
      auto agreed = sdc_.last_agreed_step();
      if (agreed && *agreed < res.step) f.onset_step = *agreed + 1;
      out->push_back(std::move(f));
    }
    if (res.all_agreed) {
      ctx_.hashes_agreed = true;
      Evidence(HealthEvidence::Kind::kHashAgreed, res.step);
    }
    if (!res.mismatches.empty()) Evidence(HealthEvidence::Kind::kHashMismatch, res.step, "sdc_suspected");
    last_sdc_ = std::move(res);
  }
  sdc_suspected_count_ = 0;
  for (const RankState& s : ranks_) sdc_suspected_count_ += s.has(RankState::kSdcSuspected) ? 1 : 0;
}

void JobMonitor::EvaluateLoss(Time now, std::vector<Finding>* out) {
  struct Item {
    LossIncident* inc;
    FindingKind kind;
    bool warrants_recovery;  // only these grade checkpoints after their onset bad (kAnomaly evidence)
  };
  Item items[] = {{&loss_.mutable_nonfinite(), FindingKind::kNonfiniteLoss, true},
                  {&loss_.mutable_spike(), FindingKind::kLossSpike, false},
                  {&loss_.mutable_divergence(), FindingKind::kLossDivergence, true},
                  {&loss_.mutable_grad_spike(), FindingKind::kGradNormSpike, false}};
  for (Item& it : items) {
    LossIncident& inc = *it.inc;
    if (!inc.pending) continue;  // reported already, or never opened
    inc.pending = false;
    inc.reported = true;
    std::string detail;
    switch (it.kind) {
      case FindingKind::kNonfiniteLoss:
        detail = "loss " + Fmt(inc.value) + " first seen at step " + std::to_string(inc.onset_step);
        break;
      case FindingKind::kLossSpike:
        detail = "job-level loss " + Fmt(inc.value) + " (mean over ranks) at step " +
                 std::to_string(inc.onset_step) + " exceeds the threshold " + Fmt(inc.reference) +
                 " (rolling median and MAD, floor " + Fmt(ctx_.policy.loss_spike_factor) +
                 "x the median): a one-step outlier so far";
        break;
      case FindingKind::kLossDivergence:
        detail = "job-level loss above the threshold " + Fmt(inc.reference) + " for " +
                 std::to_string(inc.last_step - inc.onset_step + 1) + " consecutive steps (" +
                 std::to_string(inc.onset_step) + " to " + std::to_string(inc.last_step) + "; loss " +
                 Fmt(inc.value) + " at onset; divergence after " +
                 std::to_string(ctx_.policy.loss_divergence_steps) + ")";
        break;
      default:
        detail = "grad norm " + Fmt(inc.value) + " at step " + std::to_string(inc.onset_step) +
                 " exceeds 10x the rolling max " + Fmt(inc.reference) +
                 " while the loss is normal (SDC signal)";
        break;
    }
    // A non-finite loss is reported at once, from the first report showing it: other ranks' reports of
    // the same step may not have arrived yet (health's checks.loss.nonfinite.ranks keeps growing).
    detail +=
        (it.kind == FindingKind::kNonfiniteLoss ? "; reported so far by ranks " : "; reported by ranks ") +
        RankList(inc.ranks);
    Finding f = MakeFinding(it.kind, inc.ranks, inc.detected_at, std::move(detail));
    f.step = inc.last_step;
    f.onset_step = inc.onset_step;
    f.onset_at = inc.onset_at;
    out->push_back(std::move(f));
    if (it.warrants_recovery) Evidence(HealthEvidence::Kind::kAnomaly, inc.onset_step, ToString(it.kind));
  }
}

}  // namespace shepherd
