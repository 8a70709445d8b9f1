// Builders shared by the planner tests (planner_test.cpp, planner_auto_test.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <string>

#include "scheduler/memory_model.h"
#include "scheduler/planner.h"

namespace shepherd::testing {

inline constexpr double kGiB = 1024.0 * 1024 * 1024;

// Relative equality for figures worked out by hand.
#define EXPECT_REL(actual, expected) EXPECT_NEAR((actual), (expected), 1e-12 * std::abs(expected))

inline JobSpec Model(double params, int layers, int hidden, int heads, int seq, int vocab, int gpus,
                     int batch) {
  JobSpec s;
  s.model = {params, layers, hidden, heads, seq, vocab};
  s.training.global_batch_size = batch;
  s.resources.gpus = gpus;
  return s;
}

// DESIGN.md's worked figures are the ZeRO paper's byte counts: DeepSpeed's.
inline JobSpec DeepSpeedModel(double params, int layers, int hidden, int heads, int seq, int vocab, int gpus,
                              int batch) {
  JobSpec s = Model(params, layers, hidden, heads, seq, vocab, gpus, batch);
  s.training.framework = Framework::kDeepSpeed;
  return s;
}

// Sequence parallelism on whenever tp > 1, as PlanJob defaults it.
inline Plan Layout(int tp, int pp, int dp, int zero, int mbs = 1) {
  return Plan{.tp = tp,
              .pp = pp,
              .dp = dp,
              .zero_stage = zero,
              .micro_batches = 0,
              .micro_batch_size = mbs,
              .sequence_parallel = tp > 1,
              .pipeline_layers = {}};
}

inline double State(const MemoryBreakdown& m) {
  return m.weights + m.gradients + m.optimizer + m.master_weights;
}

inline bool HasField(const Status& s, const std::string& field) {
  return std::any_of(s.fields().begin(), s.fields().end(),
                     [&](const FieldError& f) { return f.field == field; });
}

}  // namespace shepherd::testing
