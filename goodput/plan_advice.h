// Checkpoint advice for a plan that has not run yet: POST /v1/plan's `checkpoint_advice`. Pure.
//
// Inputs, in order of preference:
//   save cost δ   checkpoint.save_s when the user measured it; else estimated: the model's training state
//                 (kCheckpointBytesPerParameter per parameter: bf16 weights, fp32 master weights, Adam m
//                 and v) written by every node in parallel at kCheckpointWriteBytesPerSecondPerNode (a
//                 sharded, distributed checkpoint such as torch.distributed.checkpoint or Megatron's
//                 dist-ckpt). Not modelled: asynchronous saves (their blocking part is smaller), storage
//                 contention across jobs, compression.
//   load cost     equal to δ (reading is not slower than writing on the parallel file systems we know)
//   restart cost  kDefaultRestartSeconds: detection with the default timeouts plus stop, launch and
//                 initialisation; the goodput answer of a running job uses its measured figure instead
//   nodes         ceil(GPUs / gpus_per_node)
//   rate          the fleet's measured interruptions per node-hour when it has enough history, else Llama 3's
//   cadence now   checkpoint.every_steps × the estimated step time, when the job promises periodic saves
#pragma once

#include "core/job.h"
#include "goodput/checkpoint_advice.h"
#include "planner/planner.h"

namespace shepherd {

inline constexpr double kCheckpointBytesPerParameter = 14;
inline constexpr double kCheckpointWriteBytesPerSecondPerNode = 2e9;
inline constexpr double kDefaultRestartSeconds = 60;

struct PlanAdvice {
  CheckpointAdvice advice;
  bool save_estimated = false;  // δ was estimated from the model size, not given
};

// REQUIRES interruptions_per_node_hour > 0, estimate from EvaluatePlan/PlanJob for `spec`.
PlanAdvice AdviseForPlan(const JobSpec& spec, const PlanEstimate& estimate, double interruptions_per_node_hour);

// The JSON of `checkpoint_advice` (docs/api.md): interval_s, young_interval_s, current_interval_s (null
// when unknown), ettr_now (null when unknown), ettr_advised, mtbf_s, and inputs {save_s, restart_s, load_s,
// nodes, interruptions_per_node_hour}. The caller adds what it knows of the sources.
Json ToJson(const CheckpointAdvice& a);

}  // namespace shepherd
