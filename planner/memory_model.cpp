#include "planner/memory_model.h"

#include <algorithm>

#include "planner/model_arch.h"
#include "planner/pipeline_layout.h"

namespace shepherd {

namespace {

bool Is16BitWeights(Precision p) {
  return p != Precision::kFp32;  // bf16, fp16 and fp8 training keep 16-bit weights
}

double VocabParams(const ModelSpec& m) {
  return static_cast<double>(m.vocab) * m.hidden;
}

// MLP activation units (of s'·b·h) of one MLP of width f/h = `f`, not counting input and dropout mask.
double MlpInnerUnits(Mlp mlp, double f) {
  return mlp == Mlp::kSwiglu ? 6 * f : 4 * f;
}

}  // namespace

double GradientElementBytes(const TrainingSpec& t) {
  if (t.precision == Precision::kFp32) return 4;
  if (t.grad_reduce_in_fp32) return *t.grad_reduce_in_fp32 ? 4 : 2;
  return t.framework == Framework::kDeepSpeed ? 2 : 4;
}

StateBytesPerParam ModelStateBytesPerParam(const TrainingSpec& t, int zero_stage, int shards) {
  const double n = shards;
  const bool half = Is16BitWeights(t.precision);
  StateBytesPerParam b;
  b.optimizer = (t.optimizer == Optimizer::kAdam ? 2 : 1) * (t.bf16_optimizer_states ? 2 : 4);
  if (t.framework == Framework::kFsdp) {
    b.weights = 4 / n;
    b.gradients = 4 / n;
    b.optimizer /= n;
    return b;
  }
  b.weights = half ? 2 : 4;
  b.gradients = GradientElementBytes(t);
  b.master_weights = half ? 4 : 0;
  if (zero_stage >= 1) {
    b.optimizer /= n;
    b.master_weights /= n;
  }
  if (zero_stage >= 2) b.gradients /= n;
  if (zero_stage >= 3) b.weights /= n;
  return b;
}

namespace {

// The parameters of the table's rows on one rank (LayerMemoryCostsOf): one transformer layer, one
// vocab·hidden matrix, one MTP depth; dense ones over tp, routed experts over etp·ep.
LayerParamSplit PerRank(const LayerParamSplit& s, const Plan& plan) {
  return {s.dense / plan.tp, s.expert / (static_cast<double>(plan.expert_tp()) * plan.ep), 0};
}
LayerParamSplit LayerRowParams(const ModelSpec& m, const Plan& plan) {
  return PerRank(PlannedLayerSplit(m), plan);
}
double VocabRowParams(const ModelSpec& m, int tp) {
  return VocabParams(m) / tp;
}
LayerParamSplit MtpRowParams(const ModelSpec& m, const Plan& plan) {
  return PerRank(m.mtp_layers > 0 ? MtpDepthSplit(m) : LayerParamSplit{}, plan);
}

// The vocab·hidden matrices a rank of `stage` holds (StageRows::vocab).
int VocabMatrices(const ModelSpec& m, int pp, int stage) {
  const bool last = stage == pp - 1;
  int n = stage == 0 ? 1 : 0;
  if (last && (pp > 1 || !m.tied_embeddings)) ++n;
  // Multi-token prediction embeds the next tokens on the last stage: its own copy of the embedding there.
  if (last && pp > 1 && m.mtp_layers > 0) ++n;
  return n;
}

}  // namespace

double StageLayerParamsPerRank(const ModelSpec& m, int tp, int stage_layers) {
  return stage_layers * LayerRowParams(m, Plan{.tp = tp}).dense;
}

double StageVocabParamsPerRank(const ModelSpec& m, int tp, int pp, int stage) {
  return VocabMatrices(m, pp, stage) * VocabRowParams(m, tp);
}

LayerParamSplit StageMtpParamsPerRank(const ModelSpec& m, const Plan& plan, int stage) {
  if (stage != plan.pp - 1) return {};
  const LayerParamSplit row = MtpRowParams(m, plan);
  return {m.mtp_layers * row.dense, m.mtp_layers * row.expert, 0};
}

double StageParamsPerRank(const ModelSpec& m, int tp, int pp, int stage, int stage_layers) {
  return StageLayerParamsPerRank(m, tp, stage_layers) + StageVocabParamsPerRank(m, tp, pp, stage);
}

double Fp8WeightCacheBytesPerParam(const TrainingSpec& t) {
  const bool cached =
      t.precision == Precision::kFp8 && !t.fp8_param_gather && t.framework == Framework::kMegatron;
  return cached ? 2 : 0;
}

int ExpertDataParallelSize(const Plan& plan) {
  return plan.tp * plan.cp * plan.dp / (plan.expert_tp() * plan.ep);
}

double StageExpertParamsPerRank(const ModelSpec& m, const Plan& plan, int stage_layers) {
  return stage_layers * LayerRowParams(m, plan).expert;
}

namespace {

// What one layer keeps, in units of s'·b·h at 16 bit: all of it, and the part held whole on every TP rank
// without sequence parallelism (Korthikanti eq. 2).
struct LayerUnits {
  double units = 0, whole = 0;
};

// The shapes the terms need, in units of h: the MLP width F/h, an expert's F_e/h, the share of MoE layers.
struct Widths {
  double f = 0, fe = 0, share = 0;
};

// OpCheckpointing: the layer input 2, Q, V and the attention output, the MLP's saved matmul outputs.
LayerUnits OpCheckpointingUnits(const ModelSpec& m, const Widths& w) {
  const double h = m.hidden;
  const MoeSpec& e = m.moe;
  const double dense_mlp = 2 * w.f + (m.mlp == Mlp::kSwiglu ? 2 : 0);
  const double moe_mlp = 2 * (e.top_k + e.shared_experts) * w.fe + 2;
  return {2 + 2 * (m.q_width() + m.v_width() + m.o_width()) / h + (1 - w.share) * dense_mlp +
              w.share * moe_mlp,
          2};
}

// Everything a layer keeps for its backward in 16 bit (MLA's up projections and eager attention's score
// matrix as `recomputed` leaves them), before FP8 copies and selective recompute's modules.
LayerUnits KeptUnits(const ModelSpec& m, const TrainingSpec& t, const RecomputeModules& recomputed,
                     const Widths& w) {
  const double h = m.hidden;
  const MoeSpec& e = m.moe;
  // The dropout masks after the attention and after the MLP, 1 each (none without dropout).
  const double mask = m.keeps_dropout_masks() ? 1 : 0;
  const double moe_mlp = 2 + mask + 2.0 * e.top_k + (e.top_k + e.shared_experts) * MlpInnerUnits(m.mlp, w.fe);
  const double mlp = (1 - w.share) * (2 + mask + MlpInnerUnits(m.mlp, w.f)) + w.share * moe_mlp;
  // Attention: its input 2, Q, K, V and AV's output (the projection's input) 2 per h of width each, the mask
  // (7 + 4·kv_heads/heads with dropout when the heads are h/a wide).
  const double qkv = 2 * (m.q_width() + m.k_width() + m.v_width()) / h;
  // MLA's latents, each kept as its normed up projection's input and as that norm's output.
  const double latents = m.mla.enabled() ? 4.0 * (m.mla.q_lora_rank + m.mla.kv_lora_rank) / h : 0;
  const double attention = 2 + mask + qkv + 2 * m.o_width() / h + latents;
  LayerUnits u{attention + mlp + 4, 0};
  // Megatron-Core's "mla_up_proj": Q, K and V are recomputed from the latents in the backward.
  if (recomputed.mla_up_proj && m.mla.enabled()) u.units -= qkv;
  if (t.attention == Attention::kEager && !recomputed.core_attn) {
    // The softmax output 2, with dropout its mask 1 and the dropout output 2, per a·s/h.
    u.units += (mask > 0 ? 5.0 : 2.0) * m.heads * m.seq_len / h;
  }
  // Held whole without sequence parallelism: norm inputs 4, the attention's and the MLP's inputs 2 each,
  // the dropout masks.
  u.whole = 8 + 2 * mask;
  return u;
}

// Transformer Engine's GEMMs keep an FP8 copy of their input (1 byte) for the backward. Where no other
// kernel keeps the 16-bit tensor that halves it: QKV's and the dense MLP's normed inputs (LayerNormLinear
// emits them in FP8), the experts' dispatched tokens, every second MLP GEMM's input (f units). Where one
// does, the copy is extra: the projection's input beside the attention output the attention backward keeps
// (o/h), each shared expert's input beside the router's (1).
void Fp8Copies(const ModelSpec& m, const RecomputeModules& recomputed, const Widths& w, LayerUnits* u) {
  const MoeSpec& e = m.moe;
  const double saved_whole = 1 + (1 - w.share);
  const double saved_split = (1 - w.share) * w.f +
                             w.share * (e.top_k + (e.top_k + e.shared_experts) * w.fe - e.shared_experts) -
                             m.o_width() / m.hidden;
  u->units -= saved_whole + saved_split;
  u->whole -= saved_whole;
  // Core attention recomputed: its 16-bit output is kept by nothing once the projection has its FP8 copy.
  if (recomputed.core_attn) u->units -= 2 * m.o_width() / m.hidden;
}

// What selective recompute's "layernorm", "moe_act" and "mlp" modules free.
void RecomputedModules(const ModelSpec& m, const TrainingSpec& t, const RecomputeModules& recomputed,
                       const Widths& w, LayerUnits* u) {
  const bool fp8 = t.precision == Precision::kFp8;
  if (recomputed.layernorm) {
    // The norms' outputs are recomputed from their inputs (the residual stream's 4 units stay). In 16-bit
    // that frees the attention's and the MLP's inputs; with fp8 the GEMMs keep their FP8 copies of them
    // (Fp8Copies), and only the MoE layers' router input, 16-bit, goes.
    const double freed = fp8 ? 2 * w.share : 4;
    u->units -= freed;
    u->whole -= freed;
  }
  if (recomputed.moe_act && !fp8) {
    // The routed experts' activation outputs (the second expert GEMM's input, 2·F_e/h per copy) are
    // recomputed from the first GEMM's output. With fp8 that input is only the GEMM's FP8 copy, which
    // Transformer Engine keeps: nothing more is freed.
    u->units -= w.share * m.moe.top_k * 2 * w.fe;
  }
  if (recomputed.mlp) {
    // Megatron-Core's "mlp": a dense layer's MLP module (Transformer Engine fuses its norm into fc1) is
    // checkpointed from the residual stream, which stays (the 4 units); its normed input (already gone
    // with "layernorm" in 16-bit; its FP8 copy with fp8) and its inner activations go.
    const double input = fp8 ? 1 : (recomputed.layernorm ? 0 : 2);
    u->units -= (1 - w.share) * (input + MlpInnerUnits(m.mlp, w.f) - (fp8 ? w.f : 0));
    u->whole -= (1 - w.share) * input;
  }
}

}  // namespace

double ActivationBytesPerLayer(const ModelSpec& m, const TrainingSpec& t, const Plan& plan) {
  const double h = m.hidden;
  const double sbh = static_cast<double>(m.seq_len) / plan.cp * plan.micro_batch_size * h;
  const double scale = t.precision == Precision::kFp32 ? 2 : 1;
  const double tp = plan.tp;
  const bool sp = plan.sequence_parallel || plan.tp == 1;
  if (t.activation_recompute == Recompute::kFull) return scale * sbh * 2 / (sp ? tp : 1);
  const Widths w{static_cast<double>(m.ffn()) / h, m.expert_ffn() / h,
                 static_cast<double>(m.moe.count(m.layers)) / m.layers};
  LayerUnits u;
  if (OpCheckpointing(t)) {
    u = OpCheckpointingUnits(m, w);
  } else {
    const bool selective = t.activation_recompute == Recompute::kSelective;
    const RecomputeModules none{.core_attn = false};
    const RecomputeModules& recomputed = selective ? t.recompute_modules : none;
    u = KeptUnits(m, t, recomputed, w);
    if (t.precision == Precision::kFp8) Fp8Copies(m, recomputed, w, &u);
    RecomputedModules(m, t, recomputed, w, &u);
  }
  const double per_rank = sp ? u.units / tp : u.whole + (u.units - u.whole) / tp;
  return scale * sbh * per_rank;
}

bool OpCheckpointing(const TrainingSpec& t) {
  return t.framework == Framework::kFsdp && t.activation_recompute == Recompute::kSelective;
}

bool CoreAttentionRecomputed(const TrainingSpec& t) {
  return t.activation_recompute == Recompute::kSelective && !OpCheckpointing(t) &&
         t.recompute_modules.core_attn;
}

double RecomputedLayers(const TrainingSpec& t, double stage_layers, int vpp) {
  if (t.activation_recompute != Recompute::kFull) return 0;
  if (t.recompute_num_layers == 0) return stage_layers;
  return std::min(stage_layers, static_cast<double>(vpp) * t.recompute_num_layers);
}

TrainingSpec KeptLayerTraining(const TrainingSpec& t) {
  TrainingSpec kept = t;
  kept.activation_recompute = Recompute::kNone;
  kept.recompute_num_layers = 0;
  return kept;
}

double EmbeddingActivationBytes(const ModelSpec& m, const Plan& plan) {
  const double sb = static_cast<double>(m.seq_len) / plan.cp * plan.micro_batch_size;
  return (8 * sb + (m.keeps_dropout_masks() ? sb * m.hidden : 0)) / plan.tp;
}

double OutputActivationBytes(const ModelSpec& m, const TrainingSpec& t, const Plan& plan) {
  const double sb = static_cast<double>(m.seq_len) / plan.cp * plan.micro_batch_size;
  return (4 * sb * m.hidden + LogitBytes(t) * sb * m.vocab) / plan.tp;
}

double InFlightMicroBatches(int pp, int stage, int micro_batches, int vpp, bool combined_1f1b) {
  if (vpp <= 1) return std::min(pp - stage, micro_batches);
  const double warmup_chunks = 2.0 * (pp - stage - 1) + (vpp - 1.0) * pp + (combined_1f1b ? 1 : 0);
  return std::min(warmup_chunks + 1, static_cast<double>(micro_batches) * vpp) / vpp;
}

double GatheredWorkingBytes(const TrainingSpec& t, const Plan& plan, const ParamRow& layer,
                            double stage_params, double stage_experts) {
  const bool fsdp = t.framework == Framework::kFsdp;
  if (!fsdp && (t.framework != Framework::kDeepSpeed || plan.zero_stage < 3)) return 0;
  if (fsdp && plan.pp > 1) return (stage_params + stage_experts) * (2 + GradientElementBytes(t));
  return (layer.params + layer.expert_params) * (2 * 2 + (fsdp ? 4 : GradientElementBytes(t)));
}

double GatheredWorkingBytes(const ModelSpec& m, const TrainingSpec& t, const Plan& plan, double stage_params,
                            double stage_experts) {
  const LayerParamSplit row = LayerRowParams(m, plan);
  return GatheredWorkingBytes(t, plan, ParamRow{row.dense, row.expert, {}}, stage_params, stage_experts);
}

namespace {

// Model state bytes per parameter of a layout: dense (sharded over dp·cp), routed experts (over
// ExpertDataParallelSize), and the FP8 weight cache on the layers' weights.
struct StateRates {
  StateBytesPerParam state, expert_state;
  double fp8_cache_per_param = 0;
};

// A row of `params` dense and `experts` routed-expert parameters on one rank, with their model state;
// `fp8_cached`: the layers' weights, which carry Transformer Engine's FP8 weight cache.
ParamRow RowOf(const StateRates& in, double params, double experts, bool fp8_cached) {
  ParamRow r{params, experts, {}};
  const StateBytesPerParam &b = in.state, &be = in.expert_state;
  const double fp8_cache = fp8_cached ? in.fp8_cache_per_param : 0;
  r.state.weights = params * b.weights + experts * be.weights + fp8_cache * (params + experts);
  r.state.gradients = params * b.gradients + experts * be.gradients;
  r.state.optimizer = params * b.optimizer + experts * be.optimizer;
  r.state.master_weights = params * b.master_weights + experts * be.master_weights;
  return r;
}

}  // namespace

LayerMemoryCosts LayerMemoryCostsOf(const JobSpec& spec, const Plan& plan) {
  return LayerMemoryCostsOf(spec, plan, ModelCountsOf(spec.model));
}

LayerMemoryCosts LayerMemoryCostsOf(const JobSpec& spec, const Plan& plan, const ModelCounts& counts) {
  const TrainingSpec& t = spec.training;
  const ModelSpec& m = spec.model;
  const StateRates in{ModelStateBytesPerParam(t, plan.zero_stage, plan.dp * plan.cp),
                                  ModelStateBytesPerParam(t, plan.zero_stage, ExpertDataParallelSize(plan)),
                                  Fp8WeightCacheBytesPerParam(t)};
  LayerMemoryCosts c;
  const LayerParamSplit layer = PerRank(counts.layer, plan), mtp = PerRank(counts.mtp, plan);
  c.layer = RowOf(in, layer.dense, layer.expert, true);
  c.vocab = RowOf(in, VocabRowParams(m, plan.tp), 0, false);
  c.mtp = RowOf(in, mtp.dense, mtp.expert, true);
  c.layer_activations = ActivationBytesPerLayer(m, t, plan);
  const bool full = t.activation_recompute == Recompute::kFull;
  c.kept_layer_activations = ActivationBytesPerLayer(m, full ? KeptLayerTraining(t) : t, plan);
  // Block recompute skips MTP layers (multi_token_prediction.py).
  c.mtp_layer_activations =
      ActivationBytesPerLayer(m, t.recompute_num_layers > 0 ? KeptLayerTraining(t) : t, plan);
  c.embedding_activations = EmbeddingActivationBytes(m, plan);
  c.output_activations = OutputActivationBytes(m, t, plan);
  return c;
}

StageRows StageRowsOf(const ModelSpec& m, const Plan& plan, const std::vector<int>& stage_layers, int stage) {
  return {stage_layers[stage], VocabMatrices(m, plan.pp, stage), stage == plan.pp - 1 ? m.mtp_layers : 0};
}

RankParams StageParams(const LayerMemoryCosts& c, const StageRows& rows) {
  RankParams p;
  p.vocab = rows.vocab * c.vocab.params;
  p.dense = rows.layers * c.layer.params + rows.mtp_depths * c.mtp.params + p.vocab;
  p.expert = rows.layers * c.layer.expert_params + rows.mtp_depths * c.mtp.expert_params;
  return p;
}

MemoryBreakdown StageMemory(const JobSpec& spec, const Plan& plan, const std::vector<int>& stage_layers,
                            int stage) {
  return StageMemory(spec, plan, stage_layers, stage, LayerMemoryCostsOf(spec, plan));
}

namespace {

// Model state: the sum of the stage's rows.
void AddModelState(const LayerMemoryCosts& c, const StageRows& rows, MemoryBreakdown* mem) {
  for (const auto& [row, count] : {std::pair{&c.layer, rows.layers}, std::pair{&c.vocab, rows.vocab},
                                   std::pair{&c.mtp, rows.mtp_depths}}) {
    mem->weights += count * row->state.weights;
    mem->gradients += count * row->state.gradients;
    mem->optimizer += count * row->state.optimizer;
    mem->master_weights += count * row->state.master_weights;
  }
}

// Activations: the stage's layers (those block recompute leaves alone keep everything) times the
// micro-batches in flight; the embedding's on the first stage; the output layer's and loss's, and each MTP
// depth's layer and its output layer and loss again, on the last.
double StageActivations(const TrainingSpec& t, const Plan& plan, const LayerMemoryCosts& c,
                        const StageRows& rows, int stage) {
  const double in_flight =
      InFlightMicroBatches(plan.pp, stage, plan.micro_batches, plan.vpp, t.moe_a2a_overlap);
  // With CPU activation offloading (pp 1 only) the offloaded layers' activations live on the host.
  const int resident_layers = rows.layers - t.cpu_offload_layers;
  const double recomputed = RecomputedLayers(t, resident_layers, plan.vpp);
  double bytes =
      (c.layer_activations * recomputed + c.kept_layer_activations * (resident_layers - recomputed)) *
      in_flight;
  if (stage == 0) bytes += c.embedding_activations * in_flight;
  if (stage == plan.pp - 1)
    bytes +=
        c.output_activations + rows.mtp_depths * (c.mtp_layer_activations * in_flight + c.output_activations);
  return bytes;
}

}  // namespace

MemoryBreakdown StageMemory(const JobSpec& spec, const Plan& plan, const std::vector<int>& stage_layers,
                            int stage, const LayerMemoryCosts& c) {
  const StageRows rows = StageRowsOf(spec.model, plan, stage_layers, stage);
  MemoryBreakdown mem;
  mem.stage = stage;
  AddModelState(c, rows, &mem);
  mem.activations = StageActivations(spec.training, plan, c, rows, stage);
  const RankParams params = StageParams(c, rows);
  mem.working = GatheredWorkingBytes(spec.training, plan, c.layer, params.dense, params.expert);
  mem.total =
      mem.weights + mem.gradients + mem.optimizer + mem.master_weights + mem.activations + mem.working;
  return mem;
}

MemoryBreakdown WorstStageMemory(const JobSpec& spec, const Plan& plan) {
  return WorstStageMemory(spec, plan, StageLayers(spec.model.layers, plan.pp, plan.pipeline_layers));
}

MemoryBreakdown WorstStageMemory(const JobSpec& spec, const Plan& plan, const std::vector<int>& layers) {
  return WorstStageMemory(spec, plan, layers, LayerMemoryCostsOf(spec, plan));
}

MemoryBreakdown WorstStageMemory(const JobSpec& spec, const Plan& plan, const std::vector<int>& layers,
                                 const LayerMemoryCosts& costs) {
  MemoryBreakdown worst = StageMemory(spec, plan, layers, 0, costs);
  for (int stage = 1; stage < plan.pp; ++stage) {
    // In-flight micro-batches fall with the stage index, so only a stage with more layers than every
    // earlier one, or the last stage (output layer), can be worse.
    if (stage + 1 < plan.pp && layers[stage] <= layers[stage - 1]) continue;
    MemoryBreakdown m = StageMemory(spec, plan, layers, stage, costs);
    if (m.total > worst.total) worst = m;
  }
  return worst;
}

}  // namespace shepherd
