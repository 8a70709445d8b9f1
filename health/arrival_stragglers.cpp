#include "health/arrival_stragglers.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace shepherd {
namespace {

// Members per group of kind g (1: nothing to compare).
int GroupSize(const RankLayout& l, GroupKind g) {
  const Plan& p = l.plan();
  switch (g) {
    case GroupKind::kTp:
      return p.tp;
    case GroupKind::kDp:
      return p.dp;
    case GroupKind::kCp:
      return p.cp;
    case GroupKind::kWorld:
      return l.world_size();
    default:
      return 1;  // pp and named groups are not judged
  }
}

// Group instance x size + position of `rank` in its group of kind g: members of one instance are
// contiguous, ordered by their coordinate along the group's axis.
int64_t Slot(const RankLayout& l, GroupKind g, int rank) {
  const Plan& p = l.plan();
  const int64_t tp = l.tp(rank), dp = l.dp(rank), cp = l.cp(rank), pp = l.pp(rank);
  switch (g) {
    case GroupKind::kTp:
      return ((pp * p.dp + dp) * p.cp + cp) * p.tp + tp;
    case GroupKind::kDp:
      return ((pp * p.cp + cp) * p.tp + tp) * p.dp + dp;
    case GroupKind::kCp:
      return ((pp * p.dp + dp) * p.tp + tp) * p.cp + cp;
    default:
      return rank;  // world
  }
}

}  // namespace

ArrivalRule ArrivalRuleFor(double summary_interval_s) {
  ArrivalRule r;
  const double interval = std::isfinite(summary_interval_s) && summary_interval_s > 0 ? summary_interval_s : 1;
  r.window_s = std::max(1.5, 1.5 * interval);
  // Twenty windows must cover the 30 s too when summaries are slow.
  r.min_span_s = std::max(30.0, (r.min_windows - 1) * r.window_s);
  return r;
}

void ArrivalStragglers::Observe(int rank, int world_size, const GroupSummary& g) {
  if (g.group_kind == GroupKind::kPp || g.group_kind == GroupKind::kOther) return;
  if (g.count <= 0 || !std::isfinite(g.wait_s) || g.wait_s < 0) return;
  if (rank < 0 || rank >= world_size) return;
  std::unique_ptr<Kind>& k = kinds_[static_cast<int>(g.group_kind)];
  if (!k) {
    k = std::make_unique<Kind>();
    k->acc.resize(world_size);
  }
  Acc& a = k->acc[rank];
  // A summary's count is bounded by what a rank can run in an interval; saturate rather than wrap.
  const uint64_t c = std::min<uint64_t>(static_cast<uint64_t>(g.count), UINT32_MAX - a.count);
  a.count += static_cast<uint32_t>(c);
  a.wait_s += static_cast<float>(g.wait_s);
}

bool ArrivalStragglers::Tick(const RankLayout& layout, Time now) {
  if (!open_ || now < window_start_) {  // first call (or a clock that went back): open a window now
    for (auto& k : kinds_)
      if (k) std::fill(k->acc.begin(), k->acc.end(), Acc{});
    window_start_ = now;
    open_ = true;
    return false;
  }
  if (ToSeconds(now - window_start_) < rule_.window_s) return false;
  for (int i = 0; i < kKnownGroupKinds; ++i)
    if (kinds_[i]) CloseKind(static_cast<GroupKind>(i), *kinds_[i], layout, window_start_);
  window_start_ = now;
  ++windows_closed_;
  named_.clear();
  for (int i = 0; i < kKnownGroupKinds; ++i) {
    if (!kinds_[i]) continue;
    for (const Run& run : kinds_[i]->runs) {
      if (!run.named) continue;
      ArrivalStraggler s;
      s.rank = run.candidate;
      s.group = static_cast<GroupKind>(i);
      s.lateness_s = run.held_collectives > 0 ? run.lateness_weighted / run.held_collectives : 0;
      s.share_held_up = run.total_collectives > 0 ? run.held_collectives / run.total_collectives : 0;
      s.windows = static_cast<int>(std::lround(run.judged));
      s.span_s = ToSeconds(now - run.since);
      named_.push_back(s);
    }
  }
  return true;
}

void ArrivalStragglers::CloseKind(GroupKind kind, Kind& k, const RankLayout& layout, Time start) {
  const int n = layout.world_size();
  const int size = GroupSize(layout, kind);
  if (size < 2 || static_cast<int>(k.acc.size()) != n) {
    std::fill(k.acc.begin(), k.acc.end(), Acc{});
    return;
  }
  const int groups = n / size;
  if (k.by_slot.empty()) {
    k.by_slot.assign(n, -1);
    for (int r = 0; r < n; ++r) k.by_slot[Slot(layout, kind, r)] = r;
    k.runs.resize(groups);
  }
  scratch_.resize(size);
  for (int g = 0; g < groups; ++g) {
    const int32_t* members = &k.by_slot[static_cast<size_t>(g) * size];
    // Judged only when every member completed a collective of the group in this window.
    bool all = true;
    int low = -1;
    float low_mean = std::numeric_limits<float>::infinity();
    for (int i = 0; i < size && all; ++i) {
      const Acc& a = k.acc[members[i]];
      if (a.count == 0) {
        all = false;
        break;
      }
      const float mean = a.wait_s / static_cast<float>(a.count);
      if (mean < low_mean) low_mean = mean, low = i;
    }
    if (!all) continue;
    int m = 0;
    for (int i = 0; i < size; ++i) {
      if (i == low) continue;
      const Acc& a = k.acc[members[i]];
      scratch_[m++] = a.wait_s / static_cast<float>(a.count);
    }
    std::nth_element(scratch_.begin(), scratch_.begin() + m / 2, scratch_.begin() + m);
    double median = scratch_[m / 2];
    if (m % 2 == 0) {  // even count: the mean of the two middle values
      const float below = *std::max_element(scratch_.begin(), scratch_.begin() + m / 2);
      median = (median + below) / 2;
    }
    const double lateness = median - low_mean;
    const bool held = lateness > std::max(rule_.abs_margin_s, rule_.rel_margin * median);
    Run& run = k.runs[g];
    const int holder = held ? members[low] : -1;
    const uint32_t cand_count = run.candidate >= 0 ? k.acc[run.candidate].count : 0;
    Judge(run, holder, cand_count, held ? k.acc[members[low]].count : 0, lateness, start);
  }
  std::fill(k.acc.begin(), k.acc.end(), Acc{});
}

void ArrivalStragglers::Judge(Run& run, int holder, uint32_t cand_count, uint32_t holder_count,
                              double lateness, Time start) {
  auto begin = [&] {
    run = Run{};
    if (holder < 0) return;
    run.candidate = holder;
    run.judged = run.held = 1;
    run.held_collectives = run.total_collectives = static_cast<float>(holder_count);
    run.lateness_weighted = static_cast<float>(lateness * holder_count);
    run.since = start;
  };
  if (run.candidate < 0) return begin();
  run.judged += 1;
  run.total_collectives += static_cast<float>(cand_count);
  if (holder == run.candidate) {
    run.held += 1;
    run.held_collectives += static_cast<float>(cand_count);
    run.lateness_weighted += static_cast<float>(lateness * cand_count);
  }
  const double share = run.held / run.judged;
  if (share < rule_.clear_share) return begin();
  if (run.judged >= 2 * rule_.min_windows) {  // keep the share about the recent windows
    run.judged /= 2, run.held /= 2;
    run.held_collectives /= 2, run.total_collectives /= 2, run.lateness_weighted /= 2;
  }
  if (!run.named && share >= rule_.name_share && run.judged >= rule_.min_windows &&
      ToSeconds(start - run.since) + rule_.window_s >= rule_.min_span_s)
    run.named = true;
  // A named rank stays named while its share stays at least clear_share (hysteresis against flapping).
}

}  // namespace shepherd
