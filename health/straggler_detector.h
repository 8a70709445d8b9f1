// Straggler detection: each rank's recent step_time_s values (a fixed ring in RankState) against the job
// median over the same window.
//
// Rule: window W = Policy::straggler_window_steps clamped to [3, kMaxStragglerWindow]. The job median is
// the median of the per-rank medians of ranks with a full window (robust to the stragglers themselves).
// A rank with a full window is a straggler when more than half of its last W step times exceed
// job median × straggler_factor. One slow step therefore never flags; recovery clears the flag.
// Ranks should report their own compute time per step: a synchronous step time is equalised by the
// collectives and hides the straggler.
//
// Pure; cost O(ranks × W) per call.
#pragma once

#include <vector>

#include "core/job.h"
#include "health/rank_state.h"

namespace shepherd {

int StragglerWindow(const Policy& policy);

struct StragglerAnalysis {
  int window = 0;
  int ranks_with_full_window = 0;
  double job_median_s = 0;       // 0 when no rank has a full window
  std::vector<int> stragglers;   // ascending
  std::vector<double> median_s;  // per straggler: its own median step time
};

StragglerAnalysis AnalyzeStragglers(const std::vector<RankState>& ranks, const Policy& policy);

// Appends one sample to the rank's ring.
void RecordStepTime(RankState& s, double step_time_s);

}  // namespace shepherd
