#include "health/checkpoint_ledger.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <tuple>

namespace shepherd {

void CheckpointLedger::Restore(const std::vector<Checkpoint>& records) {
  for (const Checkpoint& c : records) {
    Entry& e = entries_[{c.attempt, c.step}];
    if (e.record.status == CheckpointStatus::kPending && !e.record.id.empty()) --pending_;
    e = Entry{c, {}};
    if (c.status == CheckpointStatus::kPending) ++pending_;
  }
}

void CheckpointLedger::Unsole(const Entry& e) {
  if (e.parts != 1) return;
  auto it = sole_.find({e.record.attempt, e.first_rank});
  if (it != sole_.end() && --it->second == 0) sole_.erase(it);
}

bool CheckpointLedger::AddPart(Entry& e, int rank) {
  if (static_cast<size_t>(rank) >= e.reported.size()) e.reported.resize(rank + 1, false);
  if (e.reported[rank]) return false;
  e.reported[rank] = true;
  Unsole(e);
  if (e.parts++ == 0) {
    e.first_rank = rank;
    ++sole_[{e.record.attempt, rank}];
  }
  return true;
}

void CheckpointLedger::RestorePart(int attempt, int64_t step, int rank) {
  auto it = entries_.find({attempt, step});
  if (it == entries_.end() || it->second.record.status != CheckpointStatus::kPending || rank < 0) return;
  Entry& e = it->second;
  if (!AddPart(e, rank)) return;
  e.record.ranks_reported = std::max(e.record.ranks_reported, e.parts);
}

void CheckpointLedger::OnAttemptStart(int attempt, int64_t resume_step) {
  resume_step_[attempt] = resume_step;
}

bool CheckpointLedger::OnLineage(const Checkpoint& c) const {
  for (auto it = resume_step_.upper_bound(c.attempt); it != resume_step_.end(); ++it)
    if (c.step > it->second) return false;
  return true;
}

void CheckpointLedger::SetStatus(Entry& e, CheckpointStatus s, std::string reason, Time now,
                                 std::vector<CheckpointTransition>* out) {
  if (e.record.status == s) return;
  if (e.record.status == CheckpointStatus::kPending) {
    --pending_;
    Unsole(e);
  }
  CheckpointTransition t;
  t.from = e.record.status;
  e.record.status = s;
  e.record.reason = std::move(reason);
  e.record.updated_at = now;
  t.checkpoint = e.record;
  out->push_back(std::move(t));
}

void CheckpointLedger::Grade(Entry& e, Time now, std::vector<CheckpointTransition>* out) {
  Checkpoint& c = e.record;
  if (c.status == CheckpointStatus::kBad) return;
  auto it = evidence_.find(c.attempt);
  if (it == evidence_.end()) return;
  const AttemptEvidence& ev = it->second;
  if (ev.min_anomaly_onset && *ev.min_anomaly_onset <= c.step) {
    SetStatus(e, CheckpointStatus::kBad,
              ev.anomaly_what + " with onset at step " + std::to_string(*ev.min_anomaly_onset) +
                  ", at or before this checkpoint",
              now, out);
    return;
  }
  if (ev.corrupt_after && c.step > *ev.corrupt_after) {
    std::string since = *ev.corrupt_after < 0
                            ? "with no agreeing check before it in this attempt"
                            : "after the last agreeing check at step " + std::to_string(*ev.corrupt_after);
    SetStatus(e, CheckpointStatus::kBad,
              "param_hash mismatch at step " + std::to_string(ev.corrupt_mismatch_step) + " " + since +
                  ": parameters may be corrupt from step " + std::to_string(*ev.corrupt_after + 1),
              now, out);
    return;
  }
  if (c.status != CheckpointStatus::kComplete) return;
  auto agreed = std::lower_bound(ev.agreed.begin(), ev.agreed.end(), c.step);
  const bool hash_ok = !opt_.hash_checks || agreed != ev.agreed.end();
  const int64_t needed = c.step + opt_.good_after_steps;
  // A step at or after an anomaly's onset is not healthy, even once the incident closed again.
  const int64_t healthy =
      ev.min_anomaly_onset ? std::min(ev.healthy_through, *ev.min_anomaly_onset - 1) : ev.healthy_through;
  if (!hash_ok || healthy < needed) return;
  std::string reason = opt_.hash_checks ? "param_hash check agreed at step " + std::to_string(*agreed) + "; "
                                        : "no hash checks for this job; ";
  reason += "healthy through step " + std::to_string(healthy) + " (" + std::to_string(opt_.good_after_steps) +
            " steps after it) with no anomaly";
  SetStatus(e, CheckpointStatus::kGood, std::move(reason), now, out);
}

std::vector<CheckpointTransition> CheckpointLedger::OnCheckpointReport(int attempt, int rank, int64_t step,
                                                                       const std::string& path, Time now,
                                                                       bool replicated) {
  std::vector<CheckpointTransition> out;
  replicated = replicated && opt_.whole_state_saves;
  if (!replicated && opt_.expected_reporters > 1 && !entries_.contains({attempt, step})) {
    auto sole = sole_.find({attempt, rank});
    if (pending_ >= kMaxPending || (sole != sole_.end() && sole->second >= kMaxSolePendingPerRank)) {
      ++ignored_;
      return out;
    }
  }
  auto [it, inserted] = entries_.try_emplace({attempt, step});
  Entry& e = it->second;
  if (inserted) {
    Checkpoint& c = e.record;
    c.id = job_ + "/" + std::to_string(attempt) + "/" + std::to_string(step);
    c.job = job_;
    c.attempt = attempt;
    c.step = step;
    c.path = path;
    c.status = CheckpointStatus::kPending;
    c.reason = "waiting for " + std::to_string(opt_.expected_reporters) +
               " ranks to report (a whole-state file one rank saved is reported with scope \"replicated\")";
    c.created_at = c.updated_at = now;
    ++pending_;
  }
  Checkpoint& c = e.record;
  if (c.status != CheckpointStatus::kPending) return out;
  if (rank == 0 || replicated) {  // rank 0's part (or a whole-state file) names it
    c.path = path;
    Overwrite(e, now, &out);
  }
  const bool new_part = AddPart(e, rank);
  if (new_part) ++c.ranks_reported;
  const bool completes = replicated || c.ranks_reported >= opt_.expected_reporters;
  if (inserted || (new_part && !completes)) {  // the record (new, or a part more) and the part, to persist
    CheckpointTransition t;
    t.checkpoint = c;
    t.created = inserted;
    if (!completes) t.part = rank;
    out.push_back(std::move(t));
  }
  if (completes) {
    std::vector<int> parts;
    for (size_t r = 0; r < e.reported.size(); ++r)
      if (e.reported[r] && static_cast<int>(r) != rank) parts.push_back(static_cast<int>(r));
    e.reported = {};
    SetStatus(e, CheckpointStatus::kComplete,
              replicated ? "rank " + std::to_string(rank) + " saved the whole replicated state"
                         : "all " + std::to_string(opt_.expected_reporters) + " ranks reported their part",
              now, &out);
    out.back().settled_parts = std::move(parts);
  }
  Grade(e, now, &out);
  return out;
}

void CheckpointLedger::Overwrite(const Entry& by, Time now, std::vector<CheckpointTransition>* out) {
  for (auto& [key, e] : entries_) {
    if (&e == &by || e.record.path != by.record.path || e.record.status == CheckpointStatus::kBad) continue;
    SetStatus(e, CheckpointStatus::kBad,
              "its file " + e.record.path + " was overwritten by checkpoint " + by.record.id +
                  " (saved to the same path): it can no longer be restarted from",
              now, out);
  }
}

std::vector<CheckpointTransition> CheckpointLedger::OnEvidence(const HealthEvidence& e, Time now) {
  AttemptEvidence& ev = evidence_[e.attempt];
  switch (e.kind) {
    case HealthEvidence::Kind::kHashAgreed:
      ev.agreed.insert(std::upper_bound(ev.agreed.begin(), ev.agreed.end(), e.step), e.step);
      break;
    case HealthEvidence::Kind::kHashMismatch: {
      auto last = std::lower_bound(ev.agreed.begin(), ev.agreed.end(), e.step);
      int64_t after = last == ev.agreed.begin() ? -1 : *std::prev(last);
      if (!ev.corrupt_after || after < *ev.corrupt_after) {
        ev.corrupt_after = after;
        ev.corrupt_mismatch_step = e.step;
      }
      ev.healthy_through = std::max(ev.healthy_through, after);  // the agreement at L proves steps <= L
      break;
    }
    case HealthEvidence::Kind::kAnomaly:
      if (!ev.min_anomaly_onset || e.step < *ev.min_anomaly_onset) {
        ev.min_anomaly_onset = e.step;
        ev.anomaly_what = e.what.empty() ? "anomaly" : e.what;
      }
      break;
    case HealthEvidence::Kind::kHealthyThrough:
      ev.healthy_through = std::max(ev.healthy_through, e.step);
      break;
  }
  std::vector<CheckpointTransition> out;
  for (auto it = entries_.lower_bound({e.attempt, INT64_MIN});
       it != entries_.end() && it->first.first == e.attempt; ++it)
    Grade(it->second, now, &out);
  return out;
}

std::vector<CheckpointTransition> CheckpointLedger::Demote(const std::string& id, const std::string& reason,
                                                           Time now) {
  std::vector<CheckpointTransition> out;
  for (auto& [key, e] : entries_)
    if (e.record.id == id) SetStatus(e, CheckpointStatus::kBad, reason, now, &out);
  return out;
}

std::optional<Checkpoint> CheckpointLedger::LastKnownGood() const {
  const Checkpoint* best = nullptr;
  for (const auto& [key, e] : entries_)
    if (e.record.status == CheckpointStatus::kGood && OnLineage(e.record) &&
        (!best || std::tie(e.record.step, e.record.attempt) > std::tie(best->step, best->attempt)))
      best = &e.record;
  if (!best) return std::nullopt;
  return *best;
}

std::optional<Checkpoint> CheckpointLedger::Latest() const {
  const Checkpoint* best = nullptr;
  for (const auto& [key, e] : entries_) {
    const auto s = e.record.status;
    if ((s == CheckpointStatus::kComplete || s == CheckpointStatus::kGood) && OnLineage(e.record) &&
        (!best || std::tie(e.record.step, e.record.attempt) > std::tie(best->step, best->attempt)))
      best = &e.record;
  }
  if (!best) return std::nullopt;
  return *best;
}

std::optional<Checkpoint> CheckpointLedger::Find(const std::string& id) const {
  for (const auto& [key, e] : entries_)
    if (e.record.id == id) return e.record;
  return std::nullopt;
}

std::vector<Checkpoint> CheckpointLedger::All() const {
  std::vector<Checkpoint> out;
  for (const auto& [key, e] : entries_) out.push_back(e.record);
  return out;
}

}  // namespace shepherd
