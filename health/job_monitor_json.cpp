// JobMonitor::HealthJson: the GET /v1/jobs/{id}/health body (API.md), minus the controller's fields.
#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>

#include "health/job_monitor.h"

namespace shepherd {
namespace {

constexpr size_t kMaxListed = 100;  // rank lists in the JSON are capped; *_count fields give the totals

Json RankArray(const std::vector<int>& ranks) {
  Json a = Json::array();
  for (size_t i = 0; i < ranks.size() && i < kMaxListed; ++i) a.push_back(ranks[i]);
  return a;
}

}  // namespace

Json JobMonitor::HealthJson(Time now) const {
  const int n = layout_.world_size();
  std::vector<int> suspects;

  // Heartbeat: computed live.
  std::vector<int> lost;
  int never = 0, checkpointing = 0, evaluating = 0, finished = 0;
  double oldest_age = 0;
  std::vector<double> ages;  // seconds since each heard rank's last report
  ages.reserve(n);
  Json last_seen = Json::array();
  for (int r = 0; r < n; ++r) {
    const RankState& s = ranks_[r];
    if (!s.ever_seen()) {
      ++never;
      if (n <= kMaxRankLateness) last_seen.push_back(nullptr);
    } else {
      // Millisecond resolution keeps a 4096-rank list near 25 KB.
      const double age = std::round(std::max(0.0, ToSeconds(now - s.last_seen)) * 1000) / 1000;
      oldest_age = std::max(oldest_age, ToSeconds(now - s.last_seen));
      ages.push_back(age);
      if (n <= kMaxRankLateness) last_seen.push_back(age);
    }
    if (s.in_checkpoint_phase()) ++checkpointing;
    if (s.in_eval_phase()) ++evaluating;
    if (s.has(RankState::kFinished))
      ++finished;
    else if (!Alive(s, now))
      lost.push_back(r);
  }
  const bool starting = never == n && lost.empty();
  Json heartbeat = {{"status", !lost.empty() ? "lost"
                               : starting    ? "starting"
                                             : "ok"},
                    {"ranks", n},
                    {"ranks_reporting", n - never},
                    {"ranks_in_checkpoint_phase", checkpointing},
                    {"ranks_in_eval_phase", evaluating},
                    {"ranks_finished", finished},
                    {"lost_count", lost.size()},
                    {"lost_ranks", RankArray(lost)},
                    {"oldest_report_age_s", oldest_age},
                    {"timeout_s", ctx_.policy.heartbeat_timeout_s}};
  suspects.insert(suspects.end(), lost.begin(), lost.end());

  // Hang: as of the last Evaluate.
  Json hang = {{"status", hang_.hung || progress_hang_ ? "hung" : "ok"},
               {"timeout_s", ctx_.policy.hang_timeout_s},
               {"progress_timeout_s", ctx_.policy.progress_timeout_s}};
  if (hang_.hung) {
    Json culprits = Json::array();
    for (const HangCulprit& c : hang_.culprits) culprits.push_back({{"rank", c.rank}, {"reason", c.reason}});
    Json faults = Json::array();
    for (const CommFault& f : hang_.comm_faults)
      faults.push_back({{"group", f.group},
                        {"seq", f.seq},
                        {"ranks", RankArray(f.members)},
                        {"nodes", layout_.NodesOf(f.members)}});
    hang["kind"] = "collective";
    hang["collective"] = {{"group", hang_.oldest_group},
                          {"seq", hang_.oldest_seq},
                          {"rank", hang_.oldest_rank},
                          {"open_s", hang_.oldest_open_s}};
    hang["waiting_ranks"] = hang_.waiting_past_timeout;
    hang["culprits"] = std::move(culprits);
    hang["communication_faults"] = std::move(faults);
    hang["detail"] = hang_.detail;
    auto s = hang_.SuspectRanks();
    suspects.insert(suspects.end(), s.begin(), s.end());
  } else if (progress_hang_) {
    hang["kind"] = "no_progress";
    hang["culprits"] = RankArray(progress_suspects_);
    hang["detail"] = progress_detail_;
    suspects.insert(suspects.end(), progress_suspects_.begin(), progress_suspects_.end());
  }
  hang["job_step"] = job_step_;

  // Arrival order (as of the last window closed): the ranks named, each with its evidence.
  Json arrival_ranks = Json::array();
  std::vector<int> arrival_stragglers;
  for (const ArrivalStraggler& a : arrivals_.named()) {
    arrival_stragglers.push_back(a.rank);
    if (arrival_ranks.size() < kMaxListed)
      arrival_ranks.push_back({{"rank", a.rank},
                               {"node", layout_.node(a.rank)},
                               {"group", ToString(a.group)},
                               {"lateness_s", a.lateness_s},
                               {"share_held_up", a.share_held_up},
                               {"windows", a.windows}});
  }
  const ArrivalRule& rule = arrivals_.rule();
  Json straggler = {
      {"status", stragglers_.stragglers.empty() && arrival_stragglers.empty() ? "ok" : "stragglers"},
      {"window_steps", stragglers_.window},
      {"factor", ctx_.policy.straggler_factor},
      {"job_median_step_time_s", stragglers_.job_median_s},
      {"ranks_with_full_window", stragglers_.ranks_with_full_window},
      {"ranks", RankArray(stragglers_.stragglers)},
      {"arrival",
       {{"window_s", rule.window_s},
        {"min_windows", rule.min_windows},
        {"min_span_s", rule.min_span_s},
        {"name_share", rule.name_share},
        {"windows_closed", arrivals_.windows_closed()},
        {"stragglers", std::move(arrival_ranks)}}},
      {"action", ToString(ctx_.policy.straggler_action)}};
  suspects.insert(suspects.end(), stragglers_.stragglers.begin(), stragglers_.stragglers.end());
  suspects.insert(suspects.end(), arrival_stragglers.begin(), arrival_stragglers.end());

  // SDC.
  std::vector<int> sdc_ranks;
  for (int r = 0; r < n; ++r)
    if (ranks_[r].has(RankState::kSdcSuspected)) sdc_ranks.push_back(r);
  // Replicas that never agreed, with no majority naming odd ones out: the hashed state is not replicated
  // (buffers, a sharded optimizer the client hashed as replicated), which recovery only records. No
  // suspect, and no "sdc_suspected" for the job.
  const bool majority = last_sdc_ && std::any_of(last_sdc_->mismatches.begin(), last_sdc_->mismatches.end(),
                                                 [](const SdcMismatch& v) { return !v.majority.empty(); });
  const bool no_agreement = last_sdc_ && !last_sdc_->mismatches.empty() &&
                            std::all_of(last_sdc_->mismatches.begin(), last_sdc_->mismatches.end(),
                                        [](const SdcMismatch& v) { return v.no_agreement; });
  const bool unverified = (!ctx_.hashes_agreed || no_agreement) && !majority && !sdc_ranks.empty();
  if (unverified) sdc_ranks.clear();
  Json sdc = {{"every_steps", ctx_.policy.sdc_check_every_steps},
              {"replica_sets", layout_.replica_set_count()}};
  if (!sdc_.enabled()) {
    sdc["status"] = "skipped";
    sdc["reason"] = layout_.replica_sets_reason();
  } else {
    // Two checks' worth of steps without a single hash: nothing is compared (e.g. a hand-written
    // data-parallel all-reduce, which the zero-code client does not hash), so "ok" would say too much.
    const int every = ctx_.policy.sdc_check_every_steps;
    const bool no_hashes =
        !sdc_.any_hash() && every > 0 && job_step_ - ctx_.resume_step >= 2 * int64_t{every};
    sdc["status"] = unverified || no_hashes ? "unverified" : !sdc_ranks.empty() ? "suspected" : "ok";
    if (unverified)
      sdc["reason"] =
          no_agreement ? "no two replicas' hashes agree (one corrupt node would leave the others agreeing): "
                         "state that is not replicated, or several replicas corrupted at once; recorded, "
                         "nothing done (checkpoints since the last agreeing check are bad)"
                       : "the replicas' hashes differ and no check of this job has ever agreed: the hashed "
                         "state may not be replicated (buffers, sharded optimizer state); recorded, nothing "
                         "done";
    else if (no_hashes)
      sdc["reason"] = "no rank has reported a parameter hash by step " + std::to_string(job_step_) +
                      " (checks every " + std::to_string(every) +
                      " steps): nothing is compared (docs/integration.md says what the client hashes)";
    sdc["suspected_ranks"] = RankArray(sdc_ranks);
    sdc["last_agreed_step"] = sdc_.last_agreed_step() ? Json(*sdc_.last_agreed_step()) : Json(nullptr);
    sdc["open_checks"] = sdc_.open_checks();
    sdc["late_hashes"] = sdc_.late_hashes();
    if (last_sdc_) {
      Json mism = Json::array();
      bool replay = false;
      for (const SdcMismatch& v : last_sdc_->mismatches) {
        mism.push_back({{"suspects", RankArray(v.suspects)},
                        {"majority", RankArray(v.majority)},
                        {"needs_replay", v.needs_replay},
                        {"detail", v.detail}});
        replay |= v.needs_replay;
      }
      sdc["last_check"] = {{"step", last_sdc_->step},
                           {"complete", last_sdc_->complete},
                           {"agreed", last_sdc_->all_agreed},
                           {"missing_count", last_sdc_->missing_count},
                           {"missing_ranks", RankArray(last_sdc_->missing)},
                           {"mismatches", std::move(mism)}};
      sdc["needs_replay"] = replay && !sdc_ranks.empty();
    }
  }
  suspects.insert(suspects.end(), sdc_ranks.begin(), sdc_ranks.end());

  // Loss.
  const char* loss_status = loss_.nonfinite().open    ? "nonfinite"
                            : loss_.divergence().open ? "divergence"
                            : loss_.spike().open      ? "spike"
                            : loss_.grad_spike().open ? "grad_norm_spike"
                                                      : "ok";
  Json loss = {
      {"status", loss_status},
      {"last_loss",
       loss_.last_loss() && std::isfinite(*loss_.last_loss()) ? Json(*loss_.last_loss()) : Json(nullptr)},
      {"rolling_median", loss_.rolling_median() ? Json(*loss_.rolling_median()) : Json(nullptr)},
      {"rolling_grad_norm_max", loss_.rolling_grad_max() ? Json(*loss_.rolling_grad_max()) : Json(nullptr)},
      {"spike_factor", ctx_.policy.loss_spike_factor},
      {"aggregation", "mean of the finite per-rank losses of each step"},
      {"rolling_mad", loss_.rolling_mad() ? Json(*loss_.rolling_mad()) : Json(nullptr)},
      {"threshold", loss_.threshold() ? Json(*loss_.threshold()) : Json(nullptr)},
      {"steps_above_threshold", loss_.run_steps()},
      {"divergence_steps", ctx_.policy.loss_divergence_steps},
      {"last_final_step", loss_.last_final_step()},
      {"last_lr", loss_.last_lr() ? Json(*loss_.last_lr()) : Json(nullptr)},
      {"baseline_since_step", loss_.baseline_since_step()}};
  // Job-level incidents (spike, divergence) name no suspect rank; per-rank values (non-finite loss, a
  // grad-norm spike) do.
  for (const auto& [name, inc, rank_level] :
       {std::tuple<const char*, const LossIncident*, bool>{"nonfinite", &loss_.nonfinite(), true},
        {"spike", &loss_.spike(), false},
        {"divergence", &loss_.divergence(), false},
        {"grad_norm_spike", &loss_.grad_spike(), true}})
    if (inc->open) {
      loss[name] = {
          {"onset_step", inc->onset_step}, {"last_step", inc->last_step}, {"ranks", RankArray(inc->ranks)}};
      if (rank_level) suspects.insert(suspects.end(), inc->ranks.begin(), inc->ranks.end());
    }

  std::sort(suspects.begin(), suspects.end());
  suspects.erase(std::unique(suspects.begin(), suspects.end()), suspects.end());
  const char* status =
      hang_.hung || progress_hang_ ? "hung"
      : !sdc_ranks.empty()         ? "sdc_suspected"
      : loss_.grad_spike().open    ? "sdc_suspected"
      : !lost.empty() || !stragglers_.stragglers.empty() || !arrival_stragglers.empty() ||
              loss_.nonfinite().open || loss_.divergence().open
          ? "degraded"
      : starting ? "starting"
                 : "healthy";
  // Per-rank lateness for a rank grid; a summary for a world too large to list.
  Json ranks;
  if (n <= kMaxRankLateness) {
    ranks = {{"last_seen_s", std::move(last_seen)}};
  } else {
    auto quantile = [&](double q) -> Json {
      if (ages.empty()) return nullptr;
      const size_t k = std::min(ages.size() - 1, static_cast<size_t>(q * ages.size()));
      std::nth_element(ages.begin(), ages.begin() + k, ages.end());
      return ages[k];
    };
    const Json median = quantile(0.5), p99 = quantile(0.99);
    ranks = {{"last_seen_s", nullptr},
             {"summary",
              {{"ranks", n},
               {"never_reported", never},
               {"median_s", median},
               {"p99_s", p99},
               {"max_s", ages.empty() ? Json(nullptr) : Json(*std::max_element(ages.begin(), ages.end()))}}}};
  }
  Json out = {
      {"status", status},
      {"ranks", std::move(ranks)},
      {"checks",
       {{"heartbeat", heartbeat}, {"hang", hang}, {"straggler", straggler}, {"sdc", sdc}, {"loss", loss}}},
      {"suspects",
       {{"ranks", RankArray(suspects)},
        {"ranks_count", suspects.size()},
        {"nodes", layout_.NodesOf(suspects)}}},
      {"attempt", ctx_.attempt},
      {"ignored_reports", ignored_},
      {"evaluated_at", evaluated_at_ == Time{} ? Json(nullptr) : Json(FormatRfc3339(evaluated_at_))}};
  return out;
}

}  // namespace shepherd
