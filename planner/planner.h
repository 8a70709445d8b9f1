// The planner: per-GPU memory, communication volume and step time of a parallel (TP × CP × PP × DP, EP,
// with ZeRO) layout of a transformer job, and a search for the fastest layout that fits (`"parallelism":
// "auto"`). Pure functions of their arguments: no I/O, no clock, no threads; safe to call concurrently.
//
// The model (DESIGN.md "Planner", docs/planner.md with sources), in brief:
// - Architecture (model_arch.h): parameters counted from layers, hidden, heads, kv_heads, head_dim,
//   ffn_hidden, mlp, norm, tied_embeddings and moe when model.parameters is absent; MoE FLOPs from
//   activated parameters.
// - Expert parallelism: routed experts split over ep ranks and sharded over etp (default tp), the etp·ep
//   grid folded into the tp·cp·dp ranks of a stage as Megatron-Core does, their state sharded over the
//   tp·cp·dp/(etp·ep) expert-data-parallel ranks; token dispatch and combine priced as all-to-alls.
// - Model state per parameter by framework (memory_model.h): Megatron (fp32 main gradients, distributed
//   optimizer), FSDP2, DeepSpeed ZeRO 0-3.
// - Stages (pipeline_layout.h): even, given, or balanced with the embedding and output layer.
// - Activations per layer from Korthikanti et al. 2022 with the real MLP width, GQA, flash attention,
//   sequence and context parallelism, times layers per stage, times micro-batches in flight under 1F1B
//   (interleaved: Megatron's factor); plus embedding, output layer and cross-entropy terms.
// - Step time: see EvaluatePlan.
#pragma once

#include <string>
#include <vector>

#include "core/job.h"
#include "core/json.h"
#include "core/status.h"
#include "planner/gpu_profiles.h"

namespace shepherd {

// What the planner assumes about the GPUs and the network. The GPU's figures default to the H100 SXM
// profile (kH100Sxm, planner/gpu_profiles.h) in 8-GPU HGX nodes with one 400 Gb/s rail per GPU;
// HardwareForResources fills them from the profile a request names.
struct Hardware {
  std::string gpu = kH100Sxm.name;
  // HBM per GPU. Default 80 GiB, the size a dry-run plan assumes (HardwareForResources'
  // default_gpu_memory_gib), not the profile's reported HBM, which only a named resources.gpu selects.
  double gpu_memory_bytes = 80.0 * (1ull << 30);
  int nvlink_domain_gpus = kH100Sxm.nvlink_domain_gpus;     // GPUs sharing one NVLink domain; bounds TP
  double nvlink_bytes_per_s = kH100Sxm.nvlink_bytes_per_s;  // achievable bus bandwidth per GPU in a domain
  double ib_bytes_per_s = kH100Sxm.net_bytes_per_s;         // achievable bus bandwidth per GPU across domains
  double nvlink_latency_s = 5e-6;                   // per step of a collective algorithm inside a domain
  double ib_latency_s = 15e-6;                      // per step across domains
  double peak_flops = kH100Sxm.peak_bf16_flops;     // dense 16-bit FLOP/s per GPU; fp32 training uses it too
  double peak_fp8_flops = kH100Sxm.peak_fp8_flops;  // dense fp8 FLOP/s (training.precision "fp8"); 0: no fp8
  double hbm_bytes_per_s = kH100Sxm.hbm_bytes_per_s;  // achievable HBM bandwidth: memory-bound kernels
  // Fraction of peak the matmuls reach when large; smaller per-GPU matmuls reach less:
  // efficiency(d) = matmul_efficiency · d / (d + matmul_half_size), d = min(hidden / tp, s/cp · b) (see
  // MatmulEfficiency, comm_model.h). Fitted on the H100 (kReferenceGemmShare); HardwareForResources scales it
  // by another GPU's GEMM share and sustained rate.
  double matmul_efficiency = 0.635;
  double matmul_half_size = 192;
  // The share of its peak an fp8 GEMM reaches over a 16-bit GEMM's share of its own (training.precision
  // "fp8": the fp8 peak times the matmul efficiency times this). Default 1; HardwareForResources sets the
  // profile's gemm_fp8 / gemm_bf16 (0.883 for the H100).
  double fp8_gemm_ratio = 1;
  // Fraction of peak the attention kernels (flash: fused QKᵀ, softmax, AV) reach.
  double attention_efficiency = kH100Sxm.attention_efficiency;
  double memory_headroom = 0.9;  // usable fraction of gpu_memory_bytes (allocator, CUDA context, NCCL)
  // Achievable GPU↔host bandwidth, one direction (CPU activation offloading).
  double host_bytes_per_s = kH100Sxm.host_bytes_per_s;
};

// Hardware for a request's resources: the resources.gpu profile (H100-80GB when empty), gpu_memory_gib when
// given (else `default_gpu_memory_gib`, else the profile's HBM), an NVLink domain of gpus_per_node GPUs
// (or the profile's domain when that is larger, e.g. GB200-NVL72).
Hardware HardwareForResources(const Resources& r, double default_gpu_memory_gib = 80);

// Bytes per GPU on the worst pipeline stage.
struct MemoryBreakdown {
  double weights = 0;
  double gradients = 0;
  double optimizer = 0;       // Adam m and v, or SGD momentum (fp32)
  double master_weights = 0;  // fp32 copy of 16-bit weights; 0 for fp32 training
  double activations = 0;     // kept for backward, including embedding, output layer and loss terms
  double working = 0;         // ZeRO-3/FSDP: unsharded parameters and gradients of the layers in flight
  double total = 0;
  int stage = 0;  // which pipeline stage this is (0-based)
};

// Bytes each rank sends per training step, by parallel axis (see planner/comm_model.h).
struct CommBytes {
  double tp = 0;
  double cp = 0;
  double ep = 0;  // MoE token dispatch and combine (all-to-all)
  double pp = 0;
  double dp = 0;
};

struct PlanEstimate {
  Plan plan;
  bool fits = false;  // memory.total <= gpu_memory_bytes · memory_headroom
  MemoryBreakdown memory;
  std::vector<int> stage_layers;  // transformer layers per pipeline stage (planner/pipeline_layout.h)
  double gpu_memory_bytes = 0;
  int nvlink_domain_gpus = 0;      // the NVLink domain the estimate assumed (Hardware::nvlink_domain_gpus)
  double usable_memory_bytes = 0;  // gpu_memory_bytes · memory_headroom: what `fits` compares against
  double bubble_fraction = 0;      // ((pp − 1)/vpp) / (micro_batches + (pp − 1)/vpp)
  CommBytes comm;
  double compute_time_s = 0;  // all micro-batches on the slowest stage, without bubble and communication
  double comm_time_s = 0;     // all communication time, hidden or not
  double exposed_comm_s = 0;  // the part of it on the critical path
  double step_time_s = 0;
  double model_parameters = 0;      // given or counted (model_arch.h)
  double activated_parameters = 0;  // used per token: model_parameters for dense models, less for MoE
  double tflops_per_gpu = 0;        // model FLOPs (no recompute) per GPU per second, in 1e12
  double mfu = 0;                   // tflops_per_gpu / peak (bf16 peak; fp8 peak for fp8 training)
  double tokens_per_s = 0;
  // What the estimate assumed: training.activation_recompute, or auto's choice when the spec names none.
  Recompute activation_recompute = Recompute::kSelective;
  // With kFull: training.recompute_num_layers, or auto's choice (0: every layer).
  int recompute_num_layers = 0;
  std::string explanation;
  // auto only, when nothing fits: the smallest power-of-two multiple of the GPU count (up to 64×) at which a
  // layout fits, 0 when none does.
  long long fits_with_gpus = 0;
};

// Checks `plan` against `spec` and `hw` and estimates it. Errors: kInvalidContent with one FieldError per
// violated rule, by request JSON path: "parallelism.tp" (does not divide model.heads or model.kv_heads, or
// exceeds the NVLink domain), "parallelism.ep" (ep > 1 without model.moe, not dividing
// model.moe.experts, or etp·ep not dividing tp·cp·dp), "parallelism.etp" (other than tp without model.moe,
// without sequence parallelism, beyond the NVLink domain, or etp·ep not dividing tp·cp·dp), "model.moe.*"
// (top_k outside 1..experts, more MoE layers than layers), "parallelism.cp" (2·cp does not divide
// model.seq_len, or training.attention is "eager": ring attention needs fused kernels), "parallelism.pp"
// (more stages than layers), "parallelism.pipeline_layers" (wrong length or sum), "parallelism.vpp" (more
// virtual stages than MaxVirtualStages allows, or vpp > 1 with pp = 1), "parallelism.zero_stage" (outside
// 0..3), "parallelism.dp" (tp·cp·pp·dp != resources.gpus), "training.global_batch_size" (not
// divisible by micro_batch_size·dp), "training.tp_comm_overlap" (tp > 1 without sequence parallelism),
// "training.moe_a2a_overlap" (ep 1, pp > 1 with vpp 1, full recompute, no model.moe, fp32, more than one MTP
// depth, a framework other than megatron), "model.*" for non-positive sizes. A valid plan that needs more
// memory than the GPU offers is not an error: fits=false. plan.micro_batches is derived; with framework
// fsdp plan.zero_stage is 3 whatever was given.
//
// Memory: planner/memory_model.h, reported for the worst stage. Time (seconds), per step:
//   stage time t_i = micro-batch FLOPs of stage i (its layers' GEMMs, the output layer on the last stage)
//                    × (4/3 with full recompute) / (gpus per stage · peak · efficiency(hidden/tp); routed
//                    experts at efficiency(min(hidden/tp, tokens per expert)), comm_model.h; the fp8
//                    peak for the layers' GEMMs with training.precision fp8, the 16-bit one otherwise)
//                  + its attention kernels at the 16-bit peak · hw.attention_efficiency (causal with
//                    flash, whole score matrix with eager attention; 4/3 with full recompute and with
//                    selective recompute of core attention, CoreAttentionRecomputed)
//                  + memory-bound element-wise kernels, fp8 casts and the loss at hw.hbm_bytes_per_s;
//   compute = micro_batches · max_i t_i;  bubble = (pp − 1)/vpp · max_i t_i;
//   step    = compute + bubble + exposed communication (planner/comm_model.h: TP exposed, 1/tp of it
//             with training.tp_comm_overlap, CP hidden behind attention, EP all-to-all exposed (less a
//             share of what the combined 1F1B pairs with compute, with training.moe_a2a_overlap), PP
//             p2p exposed, DP overlapped with backward except the last bucket (not at all in DeepSpeed
//             pipelines), ZeRO-3/FSDP gathers partly overlapped).
// tflops_per_gpu = ModelFlopsPerToken · tokens per step / (gpus · step).
Result<PlanEstimate> EvaluatePlan(const JobSpec& spec, const Plan& plan, const Hardware& hw);

// Searches layouts and returns the fastest one that fits: tp dividing heads and kv_heads within the NVLink
// domain; cp with 2·cp dividing seq_len; pp from 1 to layers (uneven stages balanced by StageLayers when pp
// does not divide layers); vpp among the divisors of the smallest stage (≤ 8); dp = gpus/(tp·cp·pp);
// for MoE models etp of tp or 1 and ep among the common divisors of model.moe.experts and tp·cp·dp/etp;
// micro_batch_size 1, 2, 4, ... (only the spec's own when it names one); the ZeRO stages the framework has
// (megatron 0-1, deepspeed 0-3, fsdp 3), smallest that fits per layout. Ties (1e-9 relative) go to lower
// ZeRO, fewer stages, smaller tp, cp, vpp, larger micro-batch. The explanation names the top three with their
// throughput and memory and why the winner won. When nothing fits, returns the valid layout needing the least
// memory (fits=false). Errors (kInvalidContent) only when the spec is invalid or no layout divides at all.
// spec.parallelism is ignored, and so is spec.training.micro_batch_size unless micro_batch_size_given.
Result<PlanEstimate> AutoPlan(const JobSpec& spec, const Hardware& hw);

// Whether spec names an explicit layout that leaves some of how it runs open: vpp (pp > 1, not deepspeed),
// zero_stage (not fsdp), training.micro_batch_size or training.activation_recompute.
bool LeavesOpen(const JobSpec& spec);

// spec.parallelism.automatic: AutoPlan. An explicit layout fixes tp, cp, pp, dp, ep, etp,
// sequence_parallel and pipeline_layers; when it LeavesOpen, the open ones are chosen as AutoPlan would
// (every valid equal-chunk vpp, ZeRO stage, power-of-two micro-batch, no, selective or full recompute: the
// fastest that fits; when none fits, the one needing the least memory, with EvaluatePlan's hints), and the
// explanation compares the choice with the layout as written (vpp 1, ZeRO-0, micro-batch 1, selective);
// otherwise EvaluatePlan. Errors: EvaluatePlan's for the layout as written.
Result<PlanEstimate> PlanJob(const JobSpec& spec, const Hardware& hw);

// The POST /v1/plan answer (API.md): plan {tp, pp, dp, zero_stage, micro_batches, micro_batch_size, cp,
// ep, vpp, sequence_parallel, pipeline_layers}, fits, memory_per_gpu_bytes {weights, ..., total, working,
// stage}, gpu_memory_bytes, bubble_fraction, comm_bytes_per_step {tp, cp, ep, pp, dp}, step_time_s,
// compute_time_s, comm_time_s, exposed_comm_s, model_parameters, activated_parameters, tflops_per_gpu, mfu,
// tokens_per_s, explanation.
Json ToJson(const PlanEstimate& e);

}  // namespace shepherd
