// Builders shared by the planner tests (planner_test.cpp, planner_auto_test.cpp, planner_time_test.cpp,
// planner_moe_test.cpp, planner_moe_ep_comm_test.cpp).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "planner/memory_model.h"
#include "planner/planner.h"

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

// A small MoE model: L 2, h 64, 4 heads, vocab 100, seq 32, GeLU, LayerNorm (biases), 4 experts of width
// 128, top 2, every layer MoE.
//   attention 4 · 64² + biases (3 · 64 + 64) = 16,640; norms 2 · 128 = 256; router 64 · 4 = 256;
//   expert 2 · 64 · 128 + 128 + 64 = 16,576.
//   per layer: dense 16,640 + 256 + 256 = 17,152; experts 4 · 16,576 = 66,304; activated 17,152 + 33,152 =
//   50,304. Total 2 · 83,456 + 2 · 6,400 + final norm 128 = 179,840.
inline JobSpec SmallMoe(int gpus) {
  JobSpec s = Model(0, 2, 64, 4, 32, 100, gpus, 8);
  s.model.moe = {.experts = 4, .top_k = 2, .expert_ffn_hidden = 128};
  return s;
}

// tp·dp with expert parallelism ep, no pipeline, ZeRO `zero`.
inline Plan MoeLayout(int tp, int dp, int ep, int zero) {
  Plan p = Layout(tp, 1, dp, zero);
  p.ep = ep;
  return p;
}

inline double State(const MemoryBreakdown& m) {
  return m.weights + m.gradients + m.optimizer + m.master_weights;
}

inline bool HasField(const Status& s, const std::string& field) {
  return std::any_of(s.fields().begin(), s.fields().end(),
                     [&](const FieldError& f) { return f.field == field; });
}

// A 1B-parameter job (8 layers, h 1024, 16 heads, seq 1024, vocab 1000) on 16 GPUs with round hardware
// numbers, so step times can be worked out by hand (planner_test.cpp, planner_time_test.cpp).
class SmallJob : public ::testing::Test {
 protected:
  SmallJob() : spec_(Model(1e9, 8, 1024, 16, 1024, 1000, 16, 16)) {
    hw_.gpu_memory_bytes = 80e9;
    hw_.nvlink_domain_gpus = 8;
    hw_.nvlink_bytes_per_s = 1e11;
    hw_.ib_bytes_per_s = 1e10;
    hw_.nvlink_latency_s = 0;
    hw_.ib_latency_s = 0;
    hw_.peak_flops = 1e15;
    hw_.matmul_efficiency = 0.5;
    hw_.matmul_half_size = 0;  // efficiency 0.5 at any size
    hw_.memory_headroom = 0.9;
    // Matmuls only: the memory-bound kernels have their own test (MemoryBoundKernelsTakeHbmTime), and
    // attention runs at the matmuls' 0.5.
    hw_.hbm_bytes_per_s = std::numeric_limits<double>::infinity();
    hw_.attention_efficiency = 0.5;
    // No recompute unless a test names one (selective runs the attention forward again).
    spec_.training.activation_recompute = Recompute::kNone;
  }
  JobSpec spec_;
  Hardware hw_;
};

}  // namespace shepherd::testing
