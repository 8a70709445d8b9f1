#include "planner/comm_model.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "planner/layout_costs.h"
#include "planner/memory_model.h"
#include "planner/model_arch.h"
#include "planner/pipeline_layout.h"

namespace shepherd {

namespace planner_internal {

double ActivationElementBytes(Precision p) {
  return p == Precision::kFp32 ? 4 : 2;
}

}  // namespace planner_internal

using namespace planner_internal;

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

}  // namespace

namespace planner_internal {

bool SequenceParallel(const Plan& p) {
  return p.sequence_parallel || p.tp == 1;
}

// Bytes of the activation tensor one rank exchanges with its TP group per collective.
double ActivationBytes(const JobSpec& spec, const Plan& plan) {
  return static_cast<double>(spec.model.seq_len) / plan.cp * plan.micro_batch_size * spec.model.hidden *
         ActivationElementBytes(spec.training.precision);
}

RankParams MaxStageParams(const JobSpec& spec, const Plan& plan, const std::vector<int>& layers,
                          const LayerMemoryCosts& costs) {
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
    const RankParams p = StageParams(costs, StageRowsOf(spec.model, plan, layers, i));
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

}  // namespace planner_internal

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

namespace planner_internal {

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

// Bytes per axis from the layout part of the table (see EstimateCommBytes, comm_model.h).
CommBytes CommBytesOf(const JobSpec& spec, const Plan& plan, const LayoutCosts& lc) {
  const ModelSpec& m = spec.model;
  const TrainingSpec& t = spec.training;
  const int stage_layers = lc.max_stage_layers;
  const double a = lc.activation_bytes;
  const double mb = plan.micro_batches;
  const LayerBytes& row = lc.bytes;
  CommBytes c;
  const double tp_collectives = lc.tp_collectives;
  const double expert_halves = lc.expert_halves;
  c.tp = mb * tp_collectives * ((stage_layers - expert_halves) * row.tp + expert_halves * row.tp_expert) +
         mb * stage_layers * lc.mlp_again * row.tp;
  c.cp = stage_layers * mb * 3.0 * (plan.cp - 1) * row.cp;
  c.ep = StageMoeLayers(m, stage_layers) * mb * tp_collectives * row.ep;
  // Each TP rank sends its 1/tp slice (sequence parallel shards, or the scatter/gather of Narayanan et al.
  // 2021 §4.1, Megatron's default, and DeepSpeed's partitioned pipe buffers).
  c.pp = plan.pp > 1 ? 2.0 * mb * plan.vpp * a / plan.tp : 0;

  const RankParams& params = lc.params;
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

// The bytes of one collective of each kind (LayerBytes).
LayerBytes LayerBytesOf(const JobSpec& spec, const Plan& plan, double activation_bytes) {
  const ModelSpec& m = spec.model;
  const double a = activation_bytes;
  LayerBytes b;
  b.tp = RingAllReduceBytes(a, plan.tp);
  b.tp_expert = RingAllReduceBytes(a * plan.expert_tp() / plan.tp, plan.expert_tp());
  // Each TP rank holds kv_heads/tp of the K and V heads (tp divides kv_heads) and passes only those.
  b.cp = static_cast<double>(m.seq_len) / plan.cp * plan.micro_batch_size * (m.k_width() + m.v_width()) /
         plan.tp * ActivationElementBytes(spec.training.precision);
  b.ep = AllToAllBytes(spec, plan);
  return b;
}

LayoutCosts LayoutCostsOf(const JobSpec& spec, const Plan& plan, const ModelCounts& counts) {
  LayoutCosts lc;
  lc.model = counts;
  lc.stage_layers = StageLayers(spec.model.layers, plan.pp, plan.pipeline_layers);
  lc.max_stage_layers = *std::max_element(lc.stage_layers.begin(), lc.stage_layers.end());
  lc.tokens = static_cast<double>(spec.model.seq_len) * plan.micro_batch_size;
  lc.activation_bytes = ActivationBytes(spec, plan);
  lc.tp_collectives = TpCollectivesPerLayer(spec.training, lc.max_stage_layers, plan.vpp);
  lc.expert_halves = ExpertHalvesOffTp(spec, plan, lc.max_stage_layers);
  lc.mlp_again = MlpRecomputedShare(spec);
  lc.bytes = LayerBytesOf(spec, plan, lc.activation_bytes);
  lc.memory = LayerMemoryCostsOf(spec, plan, counts);
  lc.params = MaxStageParams(spec, plan, lc.stage_layers, lc.memory);
  lc.comm = CommBytesOf(spec, plan, lc);
  return lc;
}

}  // namespace planner_internal

CommBytes EstimateCommBytes(const JobSpec& spec, const Plan& plan) {
  return LayoutCostsOf(spec, plan, ModelCountsOf(spec.model)).comm;
}

}  // namespace shepherd
