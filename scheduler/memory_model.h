// Per-GPU memory of a 3D-parallel transformer layout: model state (ZeRO paper, Rajbhandari et al. 2020)
// and activations (Korthikanti et al. 2022). Building blocks of scheduler/planner.h, exposed for tests.
// REQUIRES for every function: the plan and spec passed planner validation (positive sizes, divisibility).
#pragma once

#include "core/job.h"
#include "scheduler/planner.h"

namespace shepherd {

// Bytes per parameter held by one rank, by kind, after ZeRO sharding over `dp` ranks.
// Unsharded: 16-bit weights 2, gradients 2, fp32 master 4; fp32 weights 4, gradients 4, no master.
// Optimizer (fp32): Adam m and v 8; SGD momentum 4. ZeRO stage 1 shards optimizer and master, stage 2
// also gradients, stage 3 also weights (e.g. bf16 Adam: 16, 4 + 12/N, 2 + 14/N, 16/N).
struct StateBytesPerParam {
  double weights = 0;
  double gradients = 0;
  double optimizer = 0;
  double master_weights = 0;
  double total() const { return weights + gradients + optimizer + master_weights; }
};
StateBytesPerParam ModelStateBytesPerParam(Precision precision, Optimizer optimizer, int zero_stage, int dp);

// Parameters held by one rank of pipeline stage `stage` (0-based) before ZeRO: layers/pp transformer
// layers, plus the input embedding (vocab·hidden) on stage 0 and the untied output layer (vocab·hidden)
// on stage pp−1; all divided by tp (Megatron splits layers and the vocabulary over TP). The transformer
// layers hold parameters − 2·vocab·hidden in total.
double StageParamsPerRank(const ModelSpec& m, int tp, int pp, int stage);

// Activation bytes one transformer layer keeps for one micro-batch of `micro_batch_size` sequences on a
// rank of a TP group of `tp`, with sequence parallelism (s seq_len, b micro_batch_size, h hidden, a heads):
//   none:      s·b·h·(34 + 5·a·s/h) / tp
//   selective: s·b·h·34 / tp
//   full:      2·s·b·h            (only the layer input is kept; not split over TP)
// These are for 16-bit activations; fp32 training doubles them. The transient working set of the layer
// being recomputed or processed is left to the memory headroom.
double ActivationBytesPerLayer(const ModelSpec& m, int micro_batch_size, int tp, Recompute recompute,
                               Precision precision);

// Micro-batches whose activations stage `stage` holds at once under 1F1B: min(pp − stage, micro_batches).
int InFlightMicroBatches(int pp, int stage, int micro_batches);

// Memory of one rank of `stage`.
MemoryBreakdown StageMemory(const JobSpec& spec, const Plan& plan, int stage);

// The worst (largest total) of the first and the last stage; middle stages hold no more parameters than
// the first stage and no more micro-batches in flight, so they never exceed it.
MemoryBreakdown WorstStageMemory(const JobSpec& spec, const Plan& plan);

}  // namespace shepherd
