#include "planner/model_arch.h"

namespace shepherd {

namespace {

bool Bias(const ModelSpec& m) {
  return m.norm == Norm::kLayerNorm;
}

// One MLP of width f: 2·h·f (gelu) or 3·h·f (swiglu, gate and up and down), plus biases.
double MlpParams(const ModelSpec& m, double f) {
  const double h = m.hidden;
  double p = m.mlp == Mlp::kSwiglu ? 3 * h * f : 2 * h * f;
  if (Bias(m)) p += (m.mlp == Mlp::kSwiglu ? 2 * f : f) + h;
  return p;
}

// Attention and the two norms of one layer.
double AttentionAndNormParams(const ModelSpec& m) {
  const double h = m.hidden, norms = 2 * (Bias(m) ? 2 * h : h);
  if (m.mla.enabled()) return MlaDownProjParams(m) + MlaUpProjParams(m) + m.o_width() * h + norms;
  const double q = m.q_width(), k = m.k_width(), v = m.v_width();
  double attention = h * (q + k + v) + m.o_width() * h;  // Q, K, V projections and the output projection
  if (Bias(m)) attention += (q + k + v) + h;
  return attention + norms;
}

}  // namespace

double MlaDownProjParams(const ModelSpec& m) {
  const MlaSpec& a = m.mla;
  const double h = m.hidden;
  // The query latent and its norm (or nothing: queries straight from h), the K/V latent with the shared rope
  // key and the latent's norm.
  return (a.q_lora_rank > 0 ? h * a.q_lora_rank + a.q_lora_rank : 0) +
         h * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank;
}

double MlaUpProjParams(const ModelSpec& m) {
  const MlaSpec& a = m.mla;
  const double q_in = a.q_lora_rank > 0 ? a.q_lora_rank : m.hidden;
  return q_in * m.q_width() +
         static_cast<double>(a.kv_lora_rank) * m.heads * (a.qk_nope_head_dim + a.v_head_dim);
}

double LayerParams(const ModelSpec& m) {
  return AttentionAndNormParams(m) + MlpParams(m, m.ffn());
}

namespace {

// One MoE layer: attention, norms, router and shared experts (dense), its routed experts.
LayerParamSplit MoeLayerSplit(const ModelSpec& m) {
  const MoeSpec& e = m.moe;
  const double expert_mlp = MlpParams(m, m.expert_ffn());
  const double router = static_cast<double>(m.hidden) * e.experts;
  const double dense = AttentionAndNormParams(m) + router + e.shared_experts * expert_mlp;
  return {dense, e.experts * expert_mlp, dense + e.top_k * expert_mlp};
}

}  // namespace

LayerParamSplit CountLayerSplit(const ModelSpec& m) {
  const double dense_layer = LayerParams(m);
  if (!m.moe.enabled()) return {dense_layer, 0, dense_layer};
  const double moe_layers = m.moe.count(m.layers), dense_layers = m.layers - moe_layers;
  const LayerParamSplit moe = MoeLayerSplit(m);
  LayerParamSplit s;
  s.dense = (dense_layers * dense_layer + moe_layers * moe.dense) / m.layers;
  s.expert = moe_layers * moe.expert / m.layers;
  s.activated = s.dense + s.expert * m.moe.top_k / m.moe.experts;
  return s;
}

LayerParamSplit MtpDepthSplit(const ModelSpec& m) {
  const double h = m.hidden, inputs = 2 * h + 2 * h * h;  // two norms, the 2h → h projection
  LayerParamSplit s = m.moe.enabled() ? MoeLayerSplit(m) : LayerParamSplit{LayerParams(m), 0, LayerParams(m)};
  s.dense += inputs;
  s.activated += inputs;
  return s;
}

double EmbeddingParams(const ModelSpec& m) {
  const double vh = static_cast<double>(m.vocab) * m.hidden;
  const double final_norm = Bias(m) ? 2.0 * m.hidden : m.hidden;
  return vh + (m.tied_embeddings ? 0 : vh) + final_norm;
}

double CountParams(const ModelSpec& m) {
  const double mtp = m.mtp_layers == 0 ? 0 : m.mtp_layers * MtpDepthSplit(m).total();
  return m.layers * CountLayerSplit(m).total() + mtp + EmbeddingParams(m);
}

double CountActivatedParams(const ModelSpec& m) {
  const double mtp = m.mtp_layers == 0 ? 0 : m.mtp_layers * MtpDepthSplit(m).activated;
  return m.layers * CountLayerSplit(m).activated + mtp + EmbeddingParams(m);
}

LayerParamSplit PlannedLayerSplit(const ModelSpec& m) {
  LayerParamSplit s = CountLayerSplit(m);
  if (!m.parameters_given()) return s;
  const double embeddings = static_cast<double>(m.vocab) * m.hidden * (m.tied_embeddings ? 1 : 2);
  const double scale = (m.parameters - embeddings) / m.layers / s.total();
  return {s.dense * scale, s.expert * scale, s.activated * scale};
}

double ModelParams(const ModelSpec& m) {
  return m.parameters_given() ? m.parameters : CountParams(m);
}

double ModelFlopsPerToken(const ModelSpec& m) {
  const double matmul_params =
      m.layers * PlannedLayerSplit(m).activated + static_cast<double>(m.vocab) * m.hidden;
  // Attention without the causal mask: s keys per query, w on windowed layers.
  const double keys = static_cast<double>(m.layers - m.windowed_layers()) * m.seq_len +
                      static_cast<double>(m.windowed_layers()) * m.window;
  // Each multi-token-prediction depth: its layer (full attention), projection and the output layer again.
  const double mtp =
      m.mtp_layers == 0
          ? 0
          : m.mtp_layers * (6 * (MtpDepthSplit(m).activated + static_cast<double>(m.vocab) * m.hidden) +
                            6.0 * m.seq_len * (m.q_width() + m.o_width()));
  return 6 * matmul_params + 6.0 * keys * (m.q_width() + m.o_width()) + mtp;
}

ModelCounts ModelCountsOf(const ModelSpec& m) {
  ModelCounts c;
  c.layer = PlannedLayerSplit(m);
  if (m.mtp_layers > 0) c.mtp = MtpDepthSplit(m);
  c.parameters = ModelParams(m);
  c.activated = c.parameters * CountActivatedParams(m) / CountParams(m);
  c.flops_per_token = ModelFlopsPerToken(m);
  return c;
}

}  // namespace shepherd
