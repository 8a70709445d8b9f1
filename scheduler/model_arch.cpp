#include "scheduler/model_arch.h"

namespace shepherd {

double LayerParams(const ModelSpec& m) {
  const double h = m.hidden;
  const double d = h / m.heads;
  const double kv = m.kv() * d;  // width of K and of V
  const double f = m.ffn();
  const bool bias = m.norm == Norm::kLayerNorm;
  double attention = h * (h + 2 * kv) + h * h;
  if (bias) attention += (h + 2 * kv) + h;
  double mlp = m.mlp == Mlp::kSwiglu ? 3 * h * f : 2 * h * f;
  if (bias) mlp += (m.mlp == Mlp::kSwiglu ? 2 * f : f) + h;
  const double norms = 2 * (bias ? 2 * h : h);
  return attention + mlp + norms;
}

double EmbeddingParams(const ModelSpec& m) {
  const double vh = static_cast<double>(m.vocab) * m.hidden;
  const double final_norm = m.norm == Norm::kLayerNorm ? 2.0 * m.hidden : m.hidden;
  return vh + (m.tied_embeddings ? 0 : vh) + final_norm;
}

double CountParams(const ModelSpec& m) {
  return m.layers * LayerParams(m) + EmbeddingParams(m);
}

double PlannedLayerParams(const ModelSpec& m) {
  if (!m.parameters_given()) return LayerParams(m);
  const double embeddings = static_cast<double>(m.vocab) * m.hidden * (m.tied_embeddings ? 1 : 2);
  return (m.parameters - embeddings) / m.layers;
}

double ModelParams(const ModelSpec& m) {
  return m.parameters_given() ? m.parameters : CountParams(m);
}

double ModelFlopsPerToken(const ModelSpec& m) {
  const double matmul_params = m.layers * PlannedLayerParams(m) + static_cast<double>(m.vocab) * m.hidden;
  return 6 * matmul_params + 12.0 * m.layers * m.seq_len * m.hidden;
}

}  // namespace shepherd
