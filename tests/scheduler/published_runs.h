// Published training runs the planner is validated against (tests/scheduler/planner_validation_test.cpp,
// docs/planner.md "Validation"): each a layout that was run, with the throughput its authors measured, from a
// primary source. The published figures are typed in from the sources, never computed here; what a source
// does not publish (virtual stages, recompute, micro-batch) is stated per row as an assumption.
#pragma once

#include <vector>

#include "core/job.h"
#include "scheduler/planner.h"

namespace shepherd::testing {

struct PublishedRun {
  const char* name;
  const char* source;
  JobSpec spec;
  Plan layout;
  Hardware hw;
  // Model TFLOP/s per GPU in the planner's convention (Narayanan et al. 2021 without recompute, attention
  // counted without the causal mask), after the source's convention is converted (docs/planner.md).
  double published_tflops_per_gpu;
  // > 0: the source's FLOP count cannot be converted to ours (a different architecture formula), so the
  // band is checked on tokens per second per GPU, which has no convention.
  double published_tokens_per_s_per_gpu = 0;
  // Set when the prediction misses the ±25 % band for a reason the model does not capture (docs/planner.md,
  // "Known limits"); the row stays and the test requires the miss, so a fix must clear the flag.
  const char* known_miss = nullptr;
};

std::vector<PublishedRun> PublishedRuns();

}  // namespace shepherd::testing
