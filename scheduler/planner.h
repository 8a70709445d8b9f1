// The planner: per-GPU memory, communication volume and step time of a 3D-parallel (TP × PP × DP, with
// ZeRO) layout of a transformer job, and a search for the fastest layout that fits (`"parallelism":
// "auto"`). Pure functions of their arguments: no I/O, no clock, no threads; safe to call concurrently.
//
// The model (DESIGN.md "Planner"), in brief:
// - Model state per parameter: weights + gradients + optimizer (+ fp32 master weights for 16-bit
//   training), sharded over DP by the ZeRO stage; see scheduler/memory_model.h.
// - Parameters per rank: transformer layers split evenly over PP stages; the input embedding
//   (vocab·hidden) sits on the first stage and the untied output layer (vocab·hidden) on the last; both
//   are vocab-parallel over TP. Memory is reported for the worst stage (first or last).
// - Activations per layer from Korthikanti et al. 2022 (sequence parallelism assumed), times layers per
//   stage, times micro-batches in flight under 1F1B (the first stage holds min(pp, micro_batches)).
// - Step time: see EvaluatePlan.
#pragma once

#include <string>

#include "core/job.h"
#include "core/json.h"
#include "core/status.h"

namespace shepherd {

// What the planner assumes about the GPUs and the network. Defaults: H100 SXM in 8-GPU HGX nodes with
// one InfiniBand NDR rail per GPU.
struct Hardware {
  double gpu_memory_bytes = 80.0 * (1ull << 30);  // HBM per GPU
  int nvlink_domain_gpus = 8;         // GPUs sharing one NVLink domain (8 for HGX, 72 for NVL72); bounds TP
  double nvlink_bytes_per_s = 900e9;  // per-GPU bandwidth inside an NVLink domain
  double ib_bytes_per_s = 50e9;       // per-GPU bandwidth across NVLink domains (one 400 Gb/s rail)
  double peak_flops = 989e12;         // dense 16-bit FLOP/s per GPU (H100 bf16); used for fp32 too
  double mfu = 0.4;                   // fraction of peak the math achieves (model FLOPs utilisation)
  double memory_headroom = 0.9;       // usable fraction of gpu_memory_bytes (allocator, CUDA context, NCCL)
};

// Hardware for a request's resources: gpu_memory_gib when given (else `default_gpu_memory_gib`), an NVLink
// domain of gpus_per_node GPUs, the other fields at their defaults.
Hardware HardwareForResources(const Resources& r, double default_gpu_memory_gib = 80);

// Bytes per GPU on the worst pipeline stage.
struct MemoryBreakdown {
  double weights = 0;
  double gradients = 0;
  double optimizer = 0;       // Adam m and v, or SGD momentum (fp32)
  double master_weights = 0;  // fp32 copy of 16-bit weights; 0 for fp32 training
  double activations = 0;
  double total = 0;
};

// Bytes each rank sends per training step, by parallel axis (see scheduler/comm_model.h).
struct CommBytes {
  double tp = 0;
  double pp = 0;
  double dp = 0;
};

struct PlanEstimate {
  Plan plan;
  bool fits = false;  // memory.total <= gpu_memory_bytes · memory_headroom
  MemoryBreakdown memory;
  double gpu_memory_bytes = 0;
  double bubble_fraction = 0;  // (pp − 1) / (pp − 1 + micro_batches)
  CommBytes comm;
  double compute_time_s = 0;  // model FLOPs / (gpus · peak · mfu), without the pipeline bubble
  double comm_time_s = 0;     // all communication time, hidden or not
  double step_time_s = 0;
  std::string explanation;
};

// Checks `plan` against `spec` and `hw` and estimates it. Errors: kInvalidContent with one FieldError per
// violated rule, by request JSON path ("parallelism.tp" when it does not divide model.heads or exceeds
// the NVLink domain, "parallelism.pp" when it does not divide model.layers, "parallelism.dp" when
// tp·pp·dp != resources.gpus, "training.global_batch_size" when not divisible by micro_batch_size·dp,
// "model.*" for non-positive model sizes, ...). A plan that is valid but needs more memory than the
// GPU offers is not an error: the estimate says fits=false.
// plan.micro_batches is derived (global_batch_size / (micro_batch_size · dp)); the given value is ignored.
//
// Step time (seconds):
//   compute = flops_per_token · parameters · global_batch · seq_len / (gpus · peak_flops · mfu), with
//             flops_per_token 6 (8 with full recompute, which repeats the forward pass);
//   step    = compute / (1 − bubble) + tp_time + pp_time + max(0, dp_time − overlap),
//   overlap = the compute DP traffic can hide behind: the backward of the last micro-batch,
//             (2/3) · compute / micro_batches, for ZeRO 0/1; every backward, (2/3) · compute, for ZeRO-2;
//             all of compute for ZeRO-3 (prefetched all-gathers). TP and PP transfers are exposed.
// TP traffic moves at NVLink speed (TP never leaves a domain). DP moves at NVLink speed only when the
// whole DP group (tp·dp consecutive ranks) fits in one NVLink domain and PP only when the whole job does;
// otherwise at InfiniBand speed. Placement is assumed contiguous in rank order.
Result<PlanEstimate> EvaluatePlan(const JobSpec& spec, const Plan& plan, const Hardware& hw);

// Searches layouts and returns the fastest one that fits:
//   tp: divisors of model.heads up to hw.nvlink_domain_gpus; pp: divisors of model.layers;
//   dp = gpus / (tp·pp), integral; micro_batch_size 1, 2, 4, ... while global_batch_size divides by
//   micro_batch_size·dp and the layout fits; for each, the smallest ZeRO stage (0..3) that fits.
// Ties in step time (within 1e-9 relative) go to the lower ZeRO stage, then fewer pipeline stages, then
// smaller tp, then the larger micro-batch (better kernel efficiency, which the model does not capture).
// The explanation names the winner, the runner-up and what was rejected and why.
// When no layout fits, returns the valid layout needing the least memory per GPU (fits=false), so callers can
// show its breakdown. Errors (kInvalidContent) only when the spec itself is invalid or no layout divides the
// GPUs, layers, heads and batch at all. spec.parallelism and spec.training.micro_batch_size are ignored.
Result<PlanEstimate> AutoPlan(const JobSpec& spec, const Hardware& hw);

// spec.parallelism.automatic ? AutoPlan : EvaluatePlan of spec.parallelism with
// spec.training.micro_batch_size.
Result<PlanEstimate> PlanJob(const JobSpec& spec, const Hardware& hw);

// The POST /v1/plan answer (API.md): plan {tp, pp, dp, zero_stage, micro_batches, micro_batch_size},
// fits, memory_per_gpu_bytes {...}, gpu_memory_bytes, bubble_fraction, comm_bytes_per_step {tp, pp, dp},
// step_time_s, compute_time_s, comm_time_s, explanation.
Json ToJson(const PlanEstimate& e);

}  // namespace shepherd
