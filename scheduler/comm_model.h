// Communication volume, pipeline bubble and step time of a 3D-parallel transformer layout. Building
// blocks of scheduler/planner.h, exposed for tests.
// REQUIRES for every function taking a plan: the plan and spec passed planner validation.
#pragma once

#include "core/job.h"
#include "scheduler/planner.h"

namespace shepherd {

// Idle fraction of a 1F1B pipeline with `stages` stages and `micro_batches` micro-batches:
// (S − 1) / (S − 1 + M).
double BubbleFraction(int stages, int micro_batches);

// Bytes each of `n` ranks sends in a ring all-reduce of a `bytes`-sized buffer: 2·(n − 1)/n · bytes.
double RingAllReduceBytes(double bytes, int n);
// Bytes each of `n` ranks sends in a ring all-gather or reduce-scatter: (n − 1)/n · bytes.
double AllGatherBytes(double bytes, int n);

// Bytes one rank sends per step (global_batch / (micro_batch_size · dp) micro-batches), by axis:
//   tp: per layer of its stage and per micro-batch, ring all-reduces of the activation tensor
//       (seq_len · micro_batch_size · hidden · 2 bytes; 4 for fp32): two in forward and two in backward,
//       plus two more with full recompute (the forward runs twice). Sequence parallelism replaces each
//       all-reduce by a reduce-scatter and an all-gather, which move the same bytes.
//   pp: one activation tensor per micro-batch forward and one gradient backward, for a middle stage
//       (the first and last stages send half of that); 0 when pp = 1.
//   dp: over the rank's parameters (worst stage; G bytes at 16-bit or fp32 size), with N = dp and
//       M = micro-batches, (N − 1)/N · G times
//         2       for ZeRO 0 and 1 (one gradient all-reduce, or reduce-scatter plus parameter all-gather);
//         M + 1   for ZeRO-2 (sharded gradients are reduce-scattered after every micro-batch);
//         2M + 1  for ZeRO-3 (parameters all-gathered for every forward and backward, gradients
//                 reduce-scattered once), i.e. 1.5× DDP's traffic at M = 1.
CommBytes EstimateCommBytes(const JobSpec& spec, const Plan& plan);

// Seconds of one training step, see EvaluatePlan in scheduler/planner.h for the model.
struct StepTime {
  double compute = 0;  // without bubble
  double tp = 0, pp = 0, dp = 0;
  double dp_exposed = 0;  // dp not hidden behind compute (see EvaluatePlan)
  double step = 0;
  double comm() const { return tp + pp + dp; }
};
StepTime EstimateStepTime(const JobSpec& spec, const Plan& plan, const CommBytes& comm, double bubble,
                          const Hardware& hw);

}  // namespace shepherd
