// Published training runs the planner is validated against (tests/planner/planner_validation_test.cpp,
// docs/planner.md "Validation"): each a layout that was run, with the throughput its authors measured, from a
// primary source. The published figures are typed in from the sources, never computed here; what a source
// does not publish (virtual stages, recompute, micro-batch) is stated per row as an assumption.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "core/job.h"
#include "planner/planner.h"

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
  // How the source counts FLOPs and how its figure became published_tflops_per_gpu, when it is not our
  // convention as is (docs/planner.md's validation table shows it beside the source).
  const char* convention = nullptr;
  // The figure as the source states it (TFLOP/s per GPU, or MFU in % where noted in `convention`), when
  // published_tflops_per_gpu was converted from it; 0 when not converted.
  double published_as_stated = 0;
};

// gtest prints a row by its name.
inline void PrintTo(const PublishedRun& r, std::ostream* os) {
  *os << r.name;
}

std::vector<PublishedRun> PublishedRuns();

// The row's test name (Validation/PublishedRunTest.MatchesPublished/<name>): its name with every run of
// characters other than letters and digits turned into one '_', none at either end. "Llama3-405B 16384 GPUs
// TP8 CP1 PP16 DP128" is Llama3_405B_16384_GPUs_TP8_CP1_PP16_DP128.
std::string TestName(const PublishedRun& r);

// Whether the band is checked on tokens per second per GPU (published_tokens_per_s_per_gpu > 0) rather than
// on model TFLOP/s per GPU.
bool PublishedByTokens(const PublishedRun& r);

// Predicted over published, on tokens per second per GPU or on TFLOP/s per GPU (PublishedByTokens), for an
// estimate of the row's own layout.
double PredictedOverPublished(const PublishedRun& r, const PlanEstimate& e);

}  // namespace shepherd::testing
