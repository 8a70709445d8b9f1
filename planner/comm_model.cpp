#include "planner/comm_model.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "planner/memory_model.h"
#include "planner/model_arch.h"
#include "planner/pipeline_layout.h"

namespace shepherd {

namespace {

// Assumptions (docs/planner.md): Megatron's default gradient bucket of 40M parameters is the part of the
// once-per-step reduction that cannot overlap; per-micro-batch ZeRO-3/FSDP traffic overlaps compute at
// 80 % (prefetch is per layer, the first gather and SM contention are not hidden).
constexpr double kBucketParams = 40e6;
constexpr double kPerMicroBatchOverlap = 0.8;
// training.moe_a2a_overlap hides this share of the all-to-all time it pairs with compute, as measured in
// Megatron-Bridge's controlled A/B (skills/nemo-mbridge-perf-expert-parallel-overlap: Qwen3-30B-A3B, 16
// H100, EP 16 over HybridEP, only the overlap changed): the step fell from 24.71 to 20.99 s, 3.72 s of the
// 8.25 s of communication kernels Nsight counted without it (9.08 ms, 0.11 %, beside compute).
constexpr double kEpOverlapHidden = 0.45;

double ActivationElementBytes(Precision p) {
  return p == Precision::kFp32 ? 4 : 2;
}

}  // namespace

double NetworkCopiesPerToken(int experts, int top_k, double domains) {
  // P(a given other domain holds none of the k experts) = C(E − E/n, k) / C(E, k).
  double none = 1;
  const double elsewhere = experts - experts / domains;
  for (int i = 0; i < top_k; ++i) none *= std::max(0.0, (elsewhere - i) / (experts - i));
  return (domains - 1) * (1 - none);
}

namespace {

int CeilLog2(int n) {
  int steps = 0;
  while ((1 << steps) < n) ++steps;
  return steps;
}

bool SequenceParallel(const Plan& p) {
  return p.sequence_parallel || p.tp == 1;
}

// Bytes of the activation tensor one rank exchanges with its TP group per collective.
double ActivationBytes(const JobSpec& spec, const Plan& plan) {
  return static_cast<double>(spec.model.seq_len) / plan.cp * plan.micro_batch_size * spec.model.hidden *
         ActivationElementBytes(spec.training.precision);
}

// Parameters of the rank of the heaviest stage (the one whose DP traffic is largest): dense, and routed
// experts (reduced over the ExpertDataParallelSize ranks).
struct RankParams {
  double dense = 0, expert = 0;
  double vocab = 0;  // of dense: the embedding and output layer, which stay 16-bit under fp8_param_gather
};
RankParams MaxStageParams(const JobSpec& spec, const Plan& plan, const std::vector<int>& layers) {
  // The middle stages differ only in their layers: of them only the first with the most can be the
  // heaviest, beside the first and the last stage (embedding, output layer, MTP). Walking every stage cost
  // the search O(pp) per candidate (a 4096-layer search spent half its time here).
  std::vector<int> stages{0};
  if (plan.pp > 2)
    stages.push_back(
        static_cast<int>(std::max_element(layers.begin() + 1, layers.end() - 1) - layers.begin()));
  if (plan.pp > 1) stages.push_back(plan.pp - 1);
  RankParams most;
  for (int i : stages) {
    const LayerParamSplit mtp = StageMtpParamsPerRank(spec.model, plan, i);
    const RankParams p{StageParamsPerRank(spec.model, plan.tp, plan.pp, i, layers[i]) + mtp.dense,
                       StageExpertParamsPerRank(spec.model, plan, layers[i]) + mtp.expert,
                       StageVocabParamsPerRank(spec.model, plan.tp, plan.pp, i)};
    if (p.dense + p.expert > most.dense + most.expert) most = p;
  }
  return most;
}

// Bytes of `params` 16-bit weights, of which `vocab` the embedding or output layer, as the data-parallel
// ranks gather them: the layers' weights in 1 byte with training.fp8_param_gather (FP8 parameters), 2 else.
double WeightBytes(const TrainingSpec& t, double params, double vocab) {
  return t.fp8_param_gather ? params + vocab : 2 * params;
}

// MoE layers among the `stage_layers` of a stage: the model's share of MoE layers.
double StageMoeLayers(const ModelSpec& m, int stage_layers) {
  return stage_layers * static_cast<double>(m.moe.count(m.layers)) / m.layers;
}

// MoE layers among a stage's `stage_layers` whose expert half (the MLP's two TP collectives of four) runs
// over the etp ranks sharing an expert instead of the tp group, on the tokens those ranks hold: all of the
// stage's MoE layers when etp ≠ tp (Megatron-Core's expert tensor parallelism), none when etp = tp.
double ExpertHalvesOffTp(const JobSpec& spec, const Plan& plan, int stage_layers) {
  return plan.expert_tp() == plan.tp ? 0 : StageMoeLayers(spec.model, stage_layers) / 2;
}

// Bytes one rank sends in one MoE all-to-all (dispatch or combine): its tokens × top_k × hidden.
double AllToAllBytes(const JobSpec& spec, const Plan& plan) {
  if (plan.ep <= 1) return 0;
  const double tokens = static_cast<double>(spec.model.seq_len) / plan.cp * plan.micro_batch_size /
                        (SequenceParallel(plan) ? plan.tp : 1);
  return tokens * spec.model.moe.top_k * spec.model.hidden * ActivationElementBytes(spec.training.precision) *
         (plan.ep - 1) / plan.ep;
}

// HBM bytes one rank moves in the forward pass of one layer and micro-batch through memory-bound
// element-wise kernels, x = s/cp · b · h elements:
//   10·x (÷ tp with sequence parallelism): two norms (read, write), two residual adds (read two, write);
//   the MLP activation on the rank's F/tp columns: GeLU 2·F/h·x (read, write), SwiGLU 3·F/h·x (read gate
//   and up, write); on MoE layers F is the activated experts' (top_k + shared)·F_e, plus the token
//   permutation for dispatch and combine, 4·top_k·x (÷ tp with sequence parallelism);
//   eager attention only (`scores`): the a/tp · s/cp · s · b score matrix is written by QKᵀ, read and
//   written by the softmax and read by AV, 4 passes (flash attention keeps it on chip);
//   FP8 only (`fp8_forward`, `fp8_backward`): Transformer Engine casts each GEMM operand it did not produce
//   in FP8 itself, reading 2 bytes and writing the FP8 copy and its transpose (Hopper's FP8 GEMMs take
//   both layouts), 4 bytes per element: forward the inputs of the attention projection (q width) and of the
//   second MLP GEMM (the norms' casts are fused into LayerNormLinear, the activation's into the MLP);
//   backward the output gradients of all four GEMMs (QKV, the projection's and the second MLP GEMM's
//   gathered to the whole h, and the first MLP GEMM's 1 or 2 × F);
//   selective recompute (`recomputed`): what runs forward again in the backward, the score matrix's passes
//   (core_attn, eager only), the two norms (layernorm), the routed experts' activation (moe_act).
struct ElementwiseBytes {
  double layer = 0, scores = 0, fp8_forward = 0, fp8_backward = 0, recomputed = 0;
};
ElementwiseBytes ElementwiseBytesPerLayer(const JobSpec& spec, const Plan& plan) {
  const ModelSpec& m = spec.model;
  const double x = static_cast<double>(m.seq_len) / plan.cp * plan.micro_batch_size * m.hidden;
  const double replicated = SequenceParallel(plan) ? plan.tp : 1;
  const double act = m.mlp == Mlp::kSwiglu ? 3 : 2;
  const double moe_share = static_cast<double>(m.moe.count(m.layers)) / m.layers;
  const double expert_ffn = m.expert_ffn();
  const double moe_width = (m.moe.top_k + m.moe.shared_experts) * expert_ffn;
  const double mlp_width = (1 - moe_share) * m.ffn() + moe_share * moe_width;
  const double bytes = ActivationElementBytes(spec.training.precision);
  ElementwiseBytes e;
  e.layer = (10 * x / replicated + act * mlp_width / m.hidden * x / plan.tp +
             moe_share * 4 * m.moe.top_k * x / replicated) *
            bytes;
  if (spec.training.attention == Attention::kEager) {
    e.scores = 4.0 * m.heads / plan.tp * m.seq_len / plan.cp * m.seq_len * plan.micro_batch_size * bytes;
  }
  if (OpCheckpointing(spec.training)) {
    e.recomputed = e.layer;  // every element-wise kernel's forward runs again
  } else if (spec.training.activation_recompute == Recompute::kSelective) {
    const RecomputeModules& r = spec.training.recompute_modules;
    e.recomputed =
        (r.core_attn ? e.scores : 0) + (r.layernorm ? 4 * x / replicated * bytes : 0) +
        (r.moe_act ? moe_share * act * m.moe.top_k * expert_ffn / m.hidden * x / plan.tp * bytes : 0) +
        (r.mlp ? (1 - moe_share) * (2 * x / replicated + act * m.ffn() / m.hidden * x / plan.tp) * bytes : 0);
  }
  if (spec.training.precision == Precision::kFp8) {
    const double tokens = x / m.hidden, fc1_out = (m.mlp == Mlp::kSwiglu ? 2 : 1) * mlp_width;
    const double fc2_outs = 1 - moe_share + moe_share * (m.moe.top_k + m.moe.shared_experts);
    e.fp8_forward = 4 * tokens * (m.o_width() + mlp_width) / plan.tp;
    e.fp8_backward =
        4 * tokens *
        ((m.q_width() + m.k_width() + m.v_width() + fc1_out) / plan.tp + (1 + fc2_outs) * m.hidden);
  }
  return e;
}

// HBM bytes the loss moves per logit, forward and backward. training.cross_entropy_fp32 (the default) is
// Megatron-Core's vocab-parallel cross-entropy (tensor_parallel/cross_entropy.py): the bf16 logits upcast
// (read 2, write 4), max (read 4), subtract, exp and divide in place (read and write 4 each), sum (read 4):
// 38 B forward; the gradient scaled in place (8) and cast back to bf16 (read 4, write 2): 14 B backward;
// 52 B. false: the loss over 16-bit logits in fused kernels (Megatron's cross_entropy_loss_fusion,
// Transformer Engine's, PyTorch's cross_entropy without an upcast): read and write each 16-bit logit
// forward and backward, 8 B.
double LossBytesPerLogit(const TrainingSpec& t) {
  return t.cross_entropy_fp32 ? 52 : 8;
}

// FSDP shards everything (ZeRO-3 traffic: gathers and reduce-scatters per micro-batch), except under a
// pipeline (torch.distributed.pipelining, as torchtitan runs it): nothing is resharded between micro-batches
// and gradients accumulate unsharded until the stage's last backward (FsdpWorkingBytes), so each parameter
// is gathered once per step and its gradient reduce-scattered once: ZeRO-1's traffic.
bool FsdpPipelined(const TrainingSpec& t, const Plan& plan) {
  return t.framework == Framework::kFsdp && plan.pp > 1;
}

int ZeroStageOf(const TrainingSpec& t, const Plan& plan) {
  if (t.framework != Framework::kFsdp) return plan.zero_stage;
  return FsdpPipelined(t, plan) ? 1 : 3;
}

}  // namespace

double RingAllReduceBytes(double bytes, int n) {
  return 2.0 * (n - 1) / n * bytes;
}

double AllGatherBytes(double bytes, int n) {
  return static_cast<double>(n - 1) / n * bytes;
}

double AllReduceSeconds(double bytes, int n, double bw, double latency) {
  if (n <= 1) return 0;
  const int steps = std::min(2 * (n - 1), 2 * CeilLog2(n));
  return RingAllReduceBytes(bytes, n) / bw + latency * steps;
}

double AllGatherSeconds(double bytes, int n, double bw, double latency) {
  if (n <= 1) return 0;
  const int steps = std::min(n - 1, CeilLog2(n));
  return AllGatherBytes(bytes, n) / bw + latency * steps;
}

double DataParallelBusBandwidth(long long span, int members_per_domain, const Hardware& hw) {
  if (span <= hw.nvlink_domain_gpus) return hw.nvlink_bytes_per_s;
  return std::min(hw.nvlink_bytes_per_s, members_per_domain * hw.ib_bytes_per_s);
}

double MatmulEfficiencyAt(double d, const Hardware& hw) {
  return hw.matmul_efficiency * d / (d + hw.matmul_half_size);
}

double MatmulEfficiency(const JobSpec& spec, const Plan& plan, const Hardware& hw) {
  const double d = static_cast<double>(spec.model.hidden) / plan.tp;
  const double tokens = static_cast<double>(spec.model.seq_len) / plan.cp * plan.micro_batch_size;
  return MatmulEfficiencyAt(std::min(d, tokens), hw);
}

double ExpertTokensPerMicroBatch(const JobSpec& spec, const Plan& plan) {
  const MoeSpec& moe = spec.model.moe;
  return static_cast<double>(spec.model.seq_len) / plan.cp * plan.micro_batch_size * plan.expert_tp() /
         plan.tp * moe.top_k * plan.ep / moe.experts;
}

double ExpertMatmulEfficiency(const JobSpec& spec, const Plan& plan, const Hardware& hw) {
  const double d = static_cast<double>(spec.model.hidden) / plan.expert_tp();
  return MatmulEfficiencyAt(std::min(d, ExpertTokensPerMicroBatch(spec, plan)), hw);
}

// Per layer and micro-batch, the collectives of its forward (2) and backward (2), and of the forward again
// on the layers full recompute runs again (an average over the stage's layers with block recompute).
double TpCollectivesPerLayer(const TrainingSpec& t, int stage_layers, int vpp) {
  // OpCheckpointing runs the output projection (its reduce) and w3 or fc2 (their gathered input) again.
  if (OpCheckpointing(t)) return 6;
  return 4 + 2 * RecomputedLayers(t, stage_layers, vpp) / stage_layers;
}

// The share of a stage's layers whose MLP selective recompute of "mlp" runs forward again: the dense ones
// (Megatron-Core leaves MoE layers to "moe"); 0 without it. Each adds its forward's FLOPs and one TP
// all-reduce's worth (the input's gather with sequence parallelism, the output's reduce) per micro-batch.
double MlpRecomputedShare(const JobSpec& spec) {
  const TrainingSpec& t = spec.training;
  if (t.activation_recompute != Recompute::kSelective || OpCheckpointing(t) || !t.recompute_modules.mlp)
    return 0;
  return 1 - static_cast<double>(spec.model.moe.count(spec.model.layers)) / spec.model.layers;
}

CommBytes EstimateCommBytes(const JobSpec& spec, const Plan& plan) {
  const ModelSpec& m = spec.model;
  const TrainingSpec& t = spec.training;
  const std::vector<int> layers = StageLayers(m.layers, plan.pp, plan.pipeline_layers);
  const int stage_layers = *std::max_element(layers.begin(), layers.end());
  const double a = ActivationBytes(spec, plan);
  const double mb = plan.micro_batches;
  CommBytes c;
  const double tp_collectives = TpCollectivesPerLayer(t, stage_layers, plan.vpp);
  const double expert_halves = ExpertHalvesOffTp(spec, plan, stage_layers);
  c.tp = mb * tp_collectives *
             ((stage_layers - expert_halves) * RingAllReduceBytes(a, plan.tp) +
              expert_halves * RingAllReduceBytes(a * plan.expert_tp() / plan.tp, plan.expert_tp())) +
         mb * stage_layers * MlpRecomputedShare(spec) * RingAllReduceBytes(a, plan.tp);
  // Each TP rank holds kv_heads/tp of the K and V heads (tp divides kv_heads) and passes only those.
  const double kv_chunk = static_cast<double>(m.seq_len) / plan.cp * plan.micro_batch_size *
                          (m.k_width() + m.v_width()) / plan.tp * ActivationElementBytes(t.precision);
  c.cp = stage_layers * mb * 3.0 * (plan.cp - 1) * kv_chunk;
  c.ep = StageMoeLayers(m, stage_layers) * mb * tp_collectives * AllToAllBytes(spec, plan);
  // Each TP rank sends its 1/tp slice (sequence parallel shards, or the scatter/gather of Narayanan et al.
  // 2021 §4.1, Megatron's default, and DeepSpeed's partitioned pipe buffers).
  c.pp = plan.pp > 1 ? 2.0 * mb * plan.vpp * a / plan.tp : 0;

  const RankParams params = MaxStageParams(spec, plan, layers);
  const int n = plan.dp * plan.cp;
  auto dp_bytes = [&](double p, double w, int n) {
    const double g = p * GradientElementBytes(t);
    switch (ZeroStageOf(t, plan)) {
      case 0:
        return RingAllReduceBytes(g, n);
      case 1:
        return AllGatherBytes(g, n) + AllGatherBytes(w, n);
      case 2:
        return mb * AllGatherBytes(g, n) + AllGatherBytes(w, n);
      default:
        return mb * (2 * AllGatherBytes(w, n) + AllGatherBytes(g, n));
    }
  };
  c.dp = dp_bytes(params.dense, WeightBytes(t, params.dense, params.vocab), n) +
         dp_bytes(params.expert, WeightBytes(t, params.expert, 0), ExpertDataParallelSize(plan));
  return c;
}

StepTime EstimateStepTime(const JobSpec& spec, const Plan& plan, const Hardware& hw) {
  const ModelSpec& m = spec.model;
  const TrainingSpec& t = spec.training;
  const std::vector<int> layers = StageLayers(m.layers, plan.pp, plan.pipeline_layers);
  // FP8 runs the transformer layers' GEMMs at the fp8 peak; attention (Transformer Engine's fused attention
  // without fp8_dot_product_attention) and the output layer (Megatron's ColumnParallelLinear) stay 16-bit.
  const double peak = t.precision == Precision::kFp8 ? hw.peak_fp8_flops * hw.fp8_gemm_ratio : hw.peak_flops;
  const double tokens = static_cast<double>(m.seq_len) * plan.micro_batch_size;  // per micro-batch
  // Routed experts run as grouped GEMMs over the tokens each expert receives (ExpertMatmulEfficiency);
  // everything else (attention projections, dense MLPs, routers, shared experts) at the dense curve.
  const LayerParamSplit split = PlannedLayerSplit(m);
  const double routed = m.moe.enabled() ? split.expert * m.moe.top_k / m.moe.experts : 0;
  const double rate = peak * MatmulEfficiency(spec, plan, hw);
  const double expert_rate = m.moe.enabled() ? peak * ExpertMatmulEfficiency(spec, plan, hw) : rate;
  // One layer's GEMM FLOPs per micro-batch, the routed experts' scaled to run at the dense rate; selective
  // recompute of MLA's up projections runs their forward (2 FLOPs per weight and token) again.
  const bool up_proj_again =
      m.mla.enabled() && t.activation_recompute == Recompute::kSelective && t.recompute_modules.mla_up_proj;
  const double up_proj_flops = up_proj_again ? 2 * tokens * MlaUpProjParams(m) : 0;
  // Selective recompute of "mlp" runs the dense layers' MLP forward (2 FLOPs per weight and token) again.
  const double mlp_again_flops =
      MlpRecomputedShare(spec) * 2 * tokens * m.hidden * m.ffn() * (m.mlp == Mlp::kSwiglu ? 3 : 2);
  // OpCheckpointing runs k, the output projection and the MLP's second matmul (w3, fc2; the activated
  // experts' on MoE layers) forward again.
  const double share = static_cast<double>(m.moe.count(m.layers)) / m.layers;
  const double op_mlp_width =
      (1 - share) * m.ffn() + share * (m.moe.top_k + m.moe.shared_experts) * m.expert_ffn();
  const double op_again_params =
      OpCheckpointing(t) ? static_cast<double>(m.hidden) * (m.k_width() + m.o_width() + op_mlp_width) : 0;
  const double layer_flops = 6 * tokens * ((split.activated - routed) + routed * rate / expert_rate) +
                             up_proj_flops + mlp_again_flops + 2 * tokens * op_again_params;
  // Flash kernels skip the masked half of causal QKᵀ and AV (3·s·(q + o) per token and layer, q = a·d the
  // width of Q and o of AV's output, not the 6·s·(q + o) = 12·s·a·d of the model-FLOP convention) and, on
  // windowed layers, all but the w keys before each query (6·w·(q + o)); eager attention computes the full
  // score matrix and masks it. Windowed layers are spread evenly.
  const bool eager = t.attention == Attention::kEager;
  const double windowed = eager ? 0 : static_cast<double>(m.windowed_layers()) / m.layers;
  const double attention_flops =
      ((eager ? 6.0 : 3.0) * m.seq_len * (1 - windowed) + 6.0 * m.window * windowed) *
      (m.q_width() + m.o_width()) * tokens;
  const double model_ranks = static_cast<double>(plan.tp) * plan.cp;
  // Memory-bound kernels run between the matmuls, not beside them: forward once, backward twice (the
  // gradient and the saved input read, the input gradient written), the forward again on a layer full
  // recompute runs again (recompute_s); selective recompute runs its modules' kernels again (hbm.recomputed).
  const ElementwiseBytes hbm = ElementwiseBytesPerLayer(spec, plan);
  const double layer_elementwise_s =
      ((hbm.layer + hbm.scores) * 3 + hbm.recomputed + hbm.fp8_forward + hbm.fp8_backward) /
      hw.hbm_bytes_per_s;
  // A layer's forward again: a third of its GEMM FLOPs (forward 2, backward 4 per weight and token), its
  // forward element-wise passes; and a third of its attention (below).
  const double refwd_elementwise_s = (hbm.layer + hbm.scores + hbm.fp8_forward) / hw.hbm_bytes_per_s;
  const double recompute_s = layer_flops / 3 / model_ranks / rate + refwd_elementwise_s;
  // Cross-entropy over the rank's s/cp · b · V/tp logits, LossBytesPerLogit each.
  const double loss_s = LossBytesPerLogit(t) * tokens / plan.cp * m.vocab / plan.tp / hw.hbm_bytes_per_s;
  // The attention kernels (QKᵀ, softmax, AV) reach their own fraction of peak, not the GEMMs'. Selective
  // recompute of core attention runs their forward, a third of their FLOPs, again on every layer.
  const double attention_rate = hw.peak_flops * hw.attention_efficiency;
  const double attention_again = CoreAttentionRecomputed(t) ? 1.0 / 3 : 0;
  const double output_layer_s =
      6.0 * m.vocab * m.hidden * tokens / model_ranks / (hw.peak_flops * MatmulEfficiency(spec, plan, hw));
  // Each multi-token-prediction depth on the last stage: its layer (the MoE kind where the model has MoE,
  // full attention), its input projection, the output layer and the loss once more (its TP, EP and
  // pipeline communication is not counted).
  double mtp_s = 0;
  if (m.mtp_layers > 0) {
    const LayerParamSplit mtp = MtpDepthSplit(m);
    const double mtp_routed = mtp.activated - mtp.dense;
    const double mtp_attention = 3.0 * (eager ? 2 : 1) * m.seq_len * (m.q_width() + m.o_width()) * tokens;
    // Block recompute (recompute_num_layers) leaves MTP layers alone (multi_token_prediction.py).
    const double recompute =
        t.activation_recompute == Recompute::kFull && t.recompute_num_layers == 0 ? 4.0 / 3 : 1;
    mtp_s = m.mtp_layers *
            ((6 * tokens * (mtp.dense + mtp_routed * rate / expert_rate) + up_proj_flops) * recompute /
                 model_ranks / rate +
             mtp_attention * (recompute + attention_again) / model_ranks / attention_rate +
             layer_elementwise_s + (recompute > 1 ? refwd_elementwise_s : 0) + output_layer_s + loss_s);
  }
  double stage_s = 0, stage_attention_s = 0;
  for (int i = 0; i < plan.pp; ++i) {
    const double recomputed = RecomputedLayers(t, layers[i], plan.vpp);
    const double attention_s =
        (layers[i] * (1 + attention_again) + recomputed / 3) * attention_flops / model_ranks / attention_rate;
    const double s = layers[i] * layer_flops / model_ranks / rate + attention_s +
                     layers[i] * layer_elementwise_s + recomputed * recompute_s +
                     (i == plan.pp - 1 ? output_layer_s + loss_s + mtp_s : 0);
    if (s > stage_s) {
      stage_s = s;
      stage_attention_s = attention_s;
    }
  }
  StepTime st;
  const double mb = plan.micro_batches;
  st.compute = mb * stage_s;
  st.bubble = static_cast<double>(plan.pp - 1) / plan.vpp * stage_s;

  const int stage_layers = *std::max_element(layers.begin(), layers.end());
  const double a = ActivationBytes(spec, plan);
  const int domain = hw.nvlink_domain_gpus;
  // Contiguous placement in rank order tp, cp, dp, pp: a group stays in one NVLink domain when its span does.
  auto bw = [&](long long span) { return span <= domain ? hw.nvlink_bytes_per_s : hw.ib_bytes_per_s; };
  auto lat = [&](long long span) { return span <= domain ? hw.nvlink_latency_s : hw.ib_latency_s; };
  const double tp_collectives = TpCollectivesPerLayer(t, stage_layers, plan.vpp);
  const int etp = plan.expert_tp();
  const double expert_halves = ExpertHalvesOffTp(spec, plan, stage_layers);
  st.tp =
      mb * tp_collectives *
          ((stage_layers - expert_halves) * AllReduceSeconds(a, plan.tp, bw(plan.tp), lat(plan.tp)) +
           expert_halves * AllReduceSeconds(a * etp / plan.tp, etp, bw(etp), lat(etp))) +
      mb * stage_layers * MlpRecomputedShare(spec) * AllReduceSeconds(a, plan.tp, bw(plan.tp), lat(plan.tp));

  const long long cp_span = static_cast<long long>(plan.tp) * plan.cp;
  const CommBytes c = EstimateCommBytes(spec, plan);
  st.cp = plan.cp > 1 ? c.cp / bw(cp_span) + stage_layers * mb * 3.0 * (plan.cp - 1) * lat(cp_span) : 0;
  const double cp_exposed = std::max(0.0, st.cp - mb * stage_attention_s);

  // MoE all-to-alls over the EP group (Megatron-Core's expert grid, etp fastest, then ep: it spans etp·ep
  // ranks, members etp apart), one latency each (NCCL sends to all peers at once), all on the critical
  // path. A rank reaches the EP peers inside its NVLink domain over NVLink and the others over the network
  // at the same time, so the slower share sets the time. DeepEP and HybridEP send each token once to every
  // other domain holding any of its experts and forward the copies over NVLink there: the network carries
  // NetworkCopiesPerToken of the k·(n − 1)/n copies the alltoall dispatcher sends, NVLink all of them.
  const long long ep_span = static_cast<long long>(etp) * plan.ep;
  const double all_to_alls = StageMoeLayers(m, stage_layers) * mb * tp_collectives;
  if (plan.ep > 1) {
    const long long local = ep_span <= domain ? plan.ep : std::max(1, domain / etp);  // incl. itself
    const double nvlink_share = static_cast<double>(local - 1) / (plan.ep - 1);
    double nvlink = c.ep * nvlink_share, network = c.ep * (1 - nvlink_share);
    if (t.moe_dispatcher != MoeDispatcher::kAllToAll && local < plan.ep) {
      const double domains = static_cast<double>(plan.ep) / local;
      nvlink = c.ep;
      network *= NetworkCopiesPerToken(m.moe.experts, m.moe.top_k, domains) /
                 (m.moe.top_k * (domains - 1) / domains);
    }
    st.ep =
        std::max(nvlink / hw.nvlink_bytes_per_s, network / hw.ib_bytes_per_s) + all_to_alls * lat(ep_span);
  }

  const long long world = plan.world_size();
  st.pp = plan.pp > 1 ? c.pp / bw(world) + 2.0 * mb * plan.vpp * lat(world) : 0;
  // Without sequence parallelism the receiving TP group all-gathers the slices back into the whole tensor.
  if (plan.pp > 1 && !SequenceParallel(plan)) {
    st.pp += 2.0 * mb * plan.vpp * AllGatherSeconds(a, plan.tp, bw(plan.tp), lat(plan.tp));
  }

  const long long dp_span = static_cast<long long>(plan.tp) * plan.cp * plan.dp;
  const int n = plan.dp * plan.cp, n_expert = ExpertDataParallelSize(plan);
  const RankParams params = MaxStageParams(spec, plan, layers);
  const double ge = GradientElementBytes(t);
  // Dense parameters over the dp·cp ranks of one TP index (tp apart: domain/tp of them share an NVLink
  // domain) plus routed experts over the expert-data-parallel ranks of one expert shard (etp·ep apart).
  const double b = DataParallelBusBandwidth(dp_span, std::max(1, domain / plan.tp), hw);
  const double be = DataParallelBusBandwidth(dp_span, std::max(1, domain / (etp * plan.ep)), hw);
  const double l = lat(dp_span);
  const double all_reduce =
      AllReduceSeconds(params.dense * ge, n, b, l) + AllReduceSeconds(params.expert * ge, n_expert, be, l);
  const double reduce =
      AllGatherSeconds(params.dense * ge, n, b, l) + AllGatherSeconds(params.expert * ge, n_expert, be, l);
  const double gather = AllGatherSeconds(WeightBytes(t, params.dense, params.vocab), n, b, l) +
                        AllGatherSeconds(WeightBytes(t, params.expert, 0), n_expert, be, l);
  double dp_exposed = 0;
  const double backward = 2.0 / 3 * stage_s, forward = stage_s / 3;
  // The last gradient bucket's reduction starts after the backward ends: never hidden.
  const double bucket_params = std::min(params.dense + params.expert, kBucketParams);
  // DeepSpeed's pipeline engine reduces gradients after the last backward (its schedule's ReduceGrads
  // step), so with pp > 1 none of it overlaps.
  const bool after_backward = t.framework == Framework::kDeepSpeed && plan.pp > 1;
  switch (ZeroStageOf(t, plan)) {
    case 0:
      st.dp = all_reduce;
      dp_exposed = std::max(st.dp - backward, AllReduceSeconds(bucket_params * ge, n, b, l));
      break;
    case 1:
      st.dp = reduce + gather;
      dp_exposed = std::max(reduce - backward, AllGatherSeconds(bucket_params * ge, n, b, l)) +
                   std::max(0.0, gather - forward);
      break;
    case 2:
      st.dp = mb * reduce + gather;
      dp_exposed =
          mb * (std::max(0.0, reduce - backward) + (1 - kPerMicroBatchOverlap) * std::min(reduce, backward)) +
          std::max(0.0, gather - forward);
      break;
    default: {
      const double per_mb = 2 * gather + reduce;
      st.dp = mb * per_mb;
      dp_exposed =
          mb * (std::max(0.0, per_mb - stage_s) + (1 - kPerMicroBatchOverlap) * std::min(per_mb, stage_s));
      break;
    }
  }
  if (after_backward) dp_exposed = std::max(dp_exposed, st.dp);
  // Pipelined FSDP reduce-scatters the stage's gradients after its last backward (the pipeline stage's
  // post-backward): not overlapped; the one gather per layer is prefetched during the first forward.
  if (FsdpPipelined(t, plan)) dp_exposed = reduce + std::max(0.0, gather - forward);
  // --tp-comm-overlap pipelines each collective's tp chunks with its GEMM: one chunk's transfer is exposed.
  const double tp_exposed = t.tp_comm_overlap && SequenceParallel(plan) ? st.tp / plan.tp : st.tp;
  // CPU activation offloading (Transformer Engine's cpu_offload.py on its own stream): each offloaded
  // layer's activations go to the host during the forward and come back during the backward, per
  // micro-batch; what a direction's copies take beyond that pass's compute is exposed.
  double offload_exposed = 0;
  if (t.cpu_offload_layers > 0) {
    const double copy = t.cpu_offload_layers * ActivationBytesPerLayer(m, t, plan) / hw.host_bytes_per_s;
    st.offload = 2 * mb * copy;
    offload_exposed = mb * (std::max(0.0, copy - forward) + std::max(0.0, copy - backward));
  }
  // training.moe_a2a_overlap, Megatron-Core's combined 1F1B (model_chunk_schedule_plan.py): each
  // steady-state forward chunk runs beside another micro-batch's backward chunk, the dispatch and combine
  // of each on the communication stream under the other's attention or expert compute. The warm-up
  // forwards and cool-down backwards run alone: on stage 0, 2(pp − 1) + (vpp − 1)·pp + 1 of the
  // micro_batches·vpp chunks each; one of each without a pipeline. Of the paired time kEpOverlapHidden is
  // hidden, of the all-to-alls or of the compute beside them, whichever is shorter.
  double ep_exposed = st.ep;
  if (t.moe_a2a_overlap && plan.ep > 1) {
    const double chunks = mb * plan.vpp;
    const double alone =
        plan.pp > 1 ? std::min(chunks, 2.0 * (plan.pp - 1) + (plan.vpp - 1.0) * plan.pp + 1) : 1;
    ep_exposed -= kEpOverlapHidden * (chunks - alone) / chunks * std::min(st.ep, st.compute);
  }
  st.exposed = tp_exposed + cp_exposed + ep_exposed + st.pp + dp_exposed + offload_exposed;
  st.step = st.compute + st.bubble + st.exposed;
  return st;
}

}  // namespace shepherd
