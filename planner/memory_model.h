// Per-GPU memory of a parallel transformer layout: model state by framework (ZeRO paper, Rajbhandari et al.
// 2020; Megatron-LM's distributed optimizer; FSDP2) and activations (Korthikanti et al. 2022, extended to
// GQA, gated MLPs, flash attention and context parallelism). Building blocks of planner/planner.h,
// exposed for tests. Formulas with sources: docs/planner.md.
// REQUIRES for every function: the plan and spec passed planner validation (positive sizes, divisibility).
// Pure values and functions: safe on any thread.
#pragma once

#include <vector>

#include "core/job.h"
#include "planner/model_arch.h"
#include "planner/planner.h"

namespace shepherd {

// Bytes per parameter held by one rank, by kind, after sharding over `shards` ranks (dp·cp).
// deepspeed (ZeRO paper): 16-bit weights 2, gradients 2, fp32 master 4; fp32 weights 4, gradients 4,
//   no master. Stage 1 shards optimizer and master, 2 also gradients, 3 also weights
//   (bf16 Adam: 16, 4 + 12/N, 2 + 14/N, 16/N).
// megatron: like deepspeed but gradients are fp32 main gradients (4): 18 B/param for bf16 Adam; stage 1
//   is the distributed optimizer, sharding master and optimizer: 6 + 12/N. Stages 2 and 3 do not exist.
// fsdp (FSDP2 with bf16 compute): fp32 parameters (4, also the master copy), fp32 gradients (4) and the
//   optimizer, all sharded: 16/N for Adam, whatever zero_stage says; the unsharded working set is
//   GatheredWorkingBytes.
// Optimizer state (fp32): Adam m and v 8; SGD momentum 4; half that with t.bf16_optimizer_states. fp8
// training keeps 16-bit weights (2 B, or FP8 ones with their transpose, also 2 B), plus
// Fp8WeightCacheBytesPerParam on the layers' weights. Megatron and DeepSpeed gradients take
// GradientElementBytes(t) (training.grad_reduce_in_fp32); fsdp's stay fp32 like its sharded parameters.
struct StateBytesPerParam {
  double weights = 0;
  double gradients = 0;
  double optimizer = 0;
  double master_weights = 0;
  double total() const { return weights + gradients + optimizer + master_weights; }
};
StateBytesPerParam ModelStateBytesPerParam(const TrainingSpec& t, int zero_stage, int shards);
// Bytes of one gradient element as kept and reduced across data-parallel ranks: 4 with
// training.grad_reduce_in_fp32 true or fp32 training, 2 with it false; absent, the framework's default:
// megatron 4 (fp32 main gradients), fsdp 4 (FSDP2 reduce_dtype fp32, as torchtitan sets it), deepspeed the
// training precision's (2 for 16-bit, the ZeRO paper's).
double GradientElementBytes(const TrainingSpec& t);

// Parameters held by one rank of pipeline stage `stage` (0-based) holding `stage_layers` transformer layers,
// except routed experts (StageExpertParamsPerRank): those layers, plus the input embedding (vocab·hidden) on
// stage 0 and the output layer (vocab·hidden) on stage pp−1 (with tied embeddings and pp > 1 the last stage
// still holds a copy, as Megatron does; with pp = 1 tied embeddings are held once); all divided by tp.
// Per-layer parameters: PlannedLayerSplit().dense (model_arch.h; (parameters − embeddings)/layers for a dense
// model with model.parameters given).
double StageParamsPerRank(const ModelSpec& m, int tp, int pp, int stage, int stage_layers);
// Routed-expert parameters held by one rank of a stage with `stage_layers` layers:
// stage_layers · PlannedLayerSplit().expert / (etp · ep) (expert tensor parallel etp, = tp by default).
// Their model state is sharded over the ExpertDataParallelSize ranks. 0 for a dense model.
double StageExpertParamsPerRank(const ModelSpec& m, const Plan& plan, int stage_layers);
// StageParamsPerRank's two parts: the transformer layers' dense parameters, and the embedding and output
// layer.
double StageLayerParamsPerRank(const ModelSpec& m, int tp, int stage_layers);
// (With model.mtp_layers and pp > 1 the last stage holds a second embedding, the MTP depths' own.)
double StageVocabParamsPerRank(const ModelSpec& m, int tp, int pp, int stage);
// The multi-token-prediction depths' parameters (model_arch.h MtpDepthSplit) per rank of `stage`: on the last
// stage only, dense ones / tp and routed experts / (etp · ep) (`activated` unused: 0).
LayerParamSplit StageMtpParamsPerRank(const ModelSpec& m, const Plan& plan, int stage);
// Bytes per layer parameter (dense and routed experts; not the embedding, output layer, which Megatron keeps
// outside Transformer Engine) of Transformer Engine's cached FP8 weight and its transpose, beside the 16-bit
// weights: 2 with precision fp8 under framework megatron (Megatron-Core passes is_first_microbatch, so the
// cast weights persist across micro-batches) unless fp8_param_gather (the weights are FP8 themselves, 1 B
// plus the 1 B transpose, as many bytes as the 16-bit weights counted); else 0.
double Fp8WeightCacheBytesPerParam(const TrainingSpec& t);
// Ranks holding the same expert shard, over which the experts' gradients are reduced and their optimizer
// state sharded: tp·cp·dp/(etp·ep) (Megatron-Core's expert data parallel size; dp·cp/ep when etp = tp).
int ExpertDataParallelSize(const Plan& plan);

// Activation bytes one transformer layer keeps for one micro-batch on one rank. With s' = seq_len/cp,
// b micro_batch_size, h hidden, a heads of width d (head_dim, default h/a), k kv_heads, F ffn width, t tp, in
// units of s'·b·h at 16 bit (Korthikanti et al. 2022 §4.1, re-derived term by term):
//   attention  3 + 4(a + k)·d/h (QKV input 2, Q 2·a·d/h, K and V 2·k·d/h each, projection input 2·a·d/h,
//              dropout mask 1; 7 + 4k/a when d = h/a)
//              + 5·a·s/h   only for eager attention (scores, softmax, dropout; flash keeps none; 2·a·s/h,
//                          the softmax output, without dropout)
//   MLP        3 + 4F/h    gelu (input 2, fc1 output 2F/h, GeLU output 2F/h, dropout mask 1)
//              3 + 6F/h    swiglu (input 2, gate and up outputs 4F/h, product 2F/h, dropout mask 1)
//   norms      4
// A MoE layer's MLP (Megatron's token dispatch, balanced routing assumed): input 2, the top_k dispatched
// copies of each token 2k, each used expert's MLP internals (gelu 4Fe/h, swiglu 6Fe/h) for the top_k routed
// and the shared experts, dropout mask 1; averaged over the layers by the share of MoE layers.
// fp8 (Transformer Engine keeps FP8 copies of GEMM inputs, 1 byte): QKV's and the dense MLP's inputs 1 unit
// each, every second MLP GEMM's input F/h (F_e/h per used expert), the dispatched tokens k; plus the
// projection's FP8 input q/h beside the 16-bit attention output and a shared expert's 1 beside the router's.
// With sequence parallelism everything is divided by t; without, 10 units (norm inputs, attention and MLP
// inputs, dropout masks; 8 + the MoE share with fp8) stay whole and the rest is divided by t (Korthikanti
// eq. 2). Without dropout (!m.keeps_dropout_masks()) the two dropout masks are not kept. With F = 4h,
// g = 1 and gelu this is 34 + 5as/h (eq. 1). selective recompute drops the 5as/h term (and with fp8 the
// 16-bit attention output, 2o/h); full recompute keeps only the layer input, 2 units, divided by t with
// sequence parallelism; OpCheckpointing keeps the layer input 2, Q 2q/h, V 2v/h, the attention output 2o/h
// and the MLP's saved matmul outputs (SwiGLU 2F/h + 2, GeLU 2F/h; MoE 2(k + S)F_e/h + 2), divided as
// above. fp32 doubles everything.
double ActivationBytesPerLayer(const ModelSpec& m, const TrainingSpec& t, const Plan& plan);

// Whether `t` is selective recompute under FSDP2: torchtitan's per-op selective activation checkpointing
// (activation_checkpoint.mode "selective", selective_ac_option "op"; parallelize.py's _save_list): each
// layer keeps its input and the outputs of every other matmul in order (q and v; then w1 and w2 of a SwiGLU
// MLP, fc1 of a GeLU one) and of the attention kernel; the norms, the activation, rope and the other
// matmuls (k, the output projection, w3 or fc2) run forward again in the backward. MoE layers are taken
// the same way over the activated experts (their first matmul's outputs and the combined output kept).
bool OpCheckpointing(const TrainingSpec& t);

// Whether `t` runs the attention kernels' forward again in the backward: Megatron-Core's selective recompute
// with "core_attn" (transformer/attention.py checkpoint_core_attention), fused attention or not; its config
// warns that with fused attention this keeps nearly nothing less (flash saves Q, K, V and the output, which
// the projection keeps as its input anyway; with fp8 the projection keeps only its FP8 copy, so the 16-bit
// output goes).
bool CoreAttentionRecomputed(const TrainingSpec& t);

// Of a stage's `stage_layers` transformer layers, how many full recompute runs again: none without it; all
// with recompute_num_layers 0; else the first N of each of its vpp chunks (Megatron-Core's block method,
// recompute.py), min(stage_layers, vpp·N) with the chunks equal. The others keep their activations as
// without recompute (ActivationBytesPerLayer with Recompute::kNone: KeptLayerTraining).
double RecomputedLayers(const TrainingSpec& t, double stage_layers, int vpp);
// `t` for the layers block recompute leaves alone: no recompute.
TrainingSpec KeptLayerTraining(const TrainingSpec& t);

// Activation bytes of the embedding (stage 0) and of the output layer plus cross-entropy (last stage) per
// micro-batch, after Megatron-LM's estimator: embedding 8·s'·b (token and position ids) + s'·b·h (dropout
// mask, kept only with dropout); output 4·s'·b·h + LogitBytes·s'·b·vocab (the loss's saved softmax); both
// divided by tp.
double EmbeddingActivationBytes(const ModelSpec& m, const Plan& plan);
double OutputActivationBytes(const ModelSpec& m, const TrainingSpec& t, const Plan& plan);
// Bytes per logit the cross-entropy keeps: 4 with training.cross_entropy_fp32 (the default), else 2.
inline double LogitBytes(const TrainingSpec& t) {
  return t.cross_entropy_fp32 ? 4 : 2;
}

// Micro-batches whose activations stage `stage` holds at once under 1F1B: min(pp − stage, micro_batches).
// With vpp > 1, Megatron-Core's interleaved schedule (schedules.py, get_pp_rank_microbatches, with the
// default microbatch_group_size_per_vp_stage = pp) runs 2·(pp − stage − 1) + (vpp − 1)·pp warm-up chunks
// and holds one more in 1F1B, at most all micro_batches·vpp chunks; a chunk is 1/vpp of the stage. On
// stage 0 that is pp + (pp − 1)/vpp, Korthikanti et al. 2022 §4.2.3's factor; when every chunk is in the
// warm-up (micro_batches close to pp) it is all micro_batches. `combined_1f1b` (training.moe_a2a_overlap):
// the interleaved schedule runs one more warm-up chunk so that each steady-state forward and backward pair
// is independent (schedules.py); without a pipeline the paired forward fills layers as the backward frees
// them, so the count is unchanged.
double InFlightMicroBatches(int pp, int stage, int micro_batches, int vpp = 1, bool combined_1f1b = false);

// The unsharded working set of fully sharded parameters (FSDP2, DeepSpeed's ZeRO-3: both gather a layer's
// weights to compute it), per rank; 0 otherwise. Megatron's ZeRO-3 (Megatron-FSDP) gathers too but is not
// charged: with it the published Llama 3 70B FSDP row on GB200 would not fit (docs/planner.md, Known
// limits). pp 1 (any pp for deepspeed, which refuses ZeRO-3 with a pipeline): bf16 parameters of two layers
// (the one computing and the one prefetched) and the gradients of one layer before its reduce-scatter
// (fp32 for fsdp, else GradientElementBytes)
// (divided by tp; routed experts by etp·ep instead). FSDP with pp > 1 (torch.distributed.pipelining, as
// torchtitan runs FSDP with a pipeline): nothing is resharded between micro-batches (torchtitan's default
// reshard_after_forward = not pp_enabled; the pipeline stage turns reshard_after_backward and gradient
// sync off until the last backward), so the whole stage's parameters (`stage_params`, `stage_experts`:
// per rank, as StageMemory counts them) stay unsharded in bf16 and its gradients accumulate unsharded in
// the reduction's dtype (FSDP2 upcasts them to reduce_dtype: GradientElementBytes).
double GatheredWorkingBytes(const ModelSpec& m, const TrainingSpec& t, const Plan& plan,
                            double stage_params = 0, double stage_experts = 0);

// Model state bytes one rank holds for some parameters: weights (with Transformer Engine's FP8 weight cache
// on the layers' weights), gradients, optimizer state, fp32 master weights.
struct StateBytes {
  double weights = 0, gradients = 0, optimizer = 0, master_weights = 0;
};

// What one row of a candidate's table holds on one rank: dense parameters (model state sharded over dp·cp),
// routed-expert parameters (over ExpertDataParallelSize) and their model state.
struct ParamRow {
  double params = 0;
  double expert_params = 0;
  StateBytes state;
};

// Parameters of the rank of one stage: dense (vocab included), routed experts, and of dense the embedding
// and output layer (which stay 16-bit under fp8_param_gather).
struct RankParams {
  double dense = 0, expert = 0;
  double vocab = 0;
};

// The memory part of a candidate's table (planner/layout_costs.h): per row on one rank, the parameters
// and their model state, and the activations kept per micro-batch. Every row is the same on every stage; a
// stage's memory is the sum of its rows (StageMemory): its layers, its vocab·hidden matrices, its MTP
// depths, times the micro-batches in flight for activations.
struct LayerMemoryCosts {
  ParamRow layer;                     // one transformer layer (PlannedLayerSplit, averaged over the layers)
  ParamRow vocab;                     // one vocab·hidden matrix: the embedding, the output layer
  ParamRow mtp;                       // one multi-token-prediction depth (MtpDepthSplit; its layer's weights)
  double layer_activations = 0;       // a layer's kept bytes under the training's recompute
  double kept_layer_activations = 0;  // a layer block recompute leaves alone (full: KeptLayerTraining)
  double mtp_layer_activations = 0;   // an MTP depth's layer (block recompute skips them)
  double embedding_activations = 0;   // the first stage's, per micro-batch in flight
  double output_activations = 0;      // the output layer and loss, on the last stage
};
LayerMemoryCosts LayerMemoryCostsOf(const JobSpec& spec, const Plan& plan);
LayerMemoryCosts LayerMemoryCostsOf(const JobSpec& spec, const Plan& plan, const ModelCounts& counts);

// How many of each row one rank of `stage` holds: its transformer layers, its vocab·hidden matrices (the
// embedding on stage 0; the output layer on the last, unless tied with pp = 1; with MTP and pp > 1 the
// last stage's own embedding copy) and the MTP depths (last stage).
struct StageRows {
  int layers = 0;
  int vocab = 0;
  int mtp_depths = 0;
};
StageRows StageRowsOf(const ModelSpec& m, const Plan& plan, const std::vector<int>& stage_layers, int stage);
// The parameters of those rows: the table's sum.
RankParams StageParams(const LayerMemoryCosts& c, const StageRows& rows);
// GatheredWorkingBytes from the table's layer row and the stage's parameters (StageParams).
double GatheredWorkingBytes(const TrainingSpec& t, const Plan& plan, const ParamRow& layer,
                            double stage_params, double stage_experts);

// Memory of one rank of `stage` given the stages' layer counts (and the layout's LayerMemoryCostsOf).
MemoryBreakdown StageMemory(const JobSpec& spec, const Plan& plan, const std::vector<int>& stage_layers,
                            int stage);
MemoryBreakdown StageMemory(const JobSpec& spec, const Plan& plan, const std::vector<int>& stage_layers,
                            int stage, const LayerMemoryCosts& costs);

// The worst (largest total) stage, with MemoryBreakdown::stage saying which.
MemoryBreakdown WorstStageMemory(const JobSpec& spec, const Plan& plan);
// The same over stages already laid out (StageLayers of the plan), and with the layout's memory costs.
MemoryBreakdown WorstStageMemory(const JobSpec& spec, const Plan& plan, const std::vector<int>& stage_layers);
MemoryBreakdown WorstStageMemory(const JobSpec& spec, const Plan& plan, const std::vector<int>& stage_layers,
                                 const LayerMemoryCosts& costs);

}  // namespace shepherd
