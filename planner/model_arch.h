// Parameter and FLOP counts of a decoder-only transformer from its architecture (ModelSpec).
// Conventions (docs/planner.md): biases and LayerNorm's β only for norm = layernorm (GPT style), none for
// rmsnorm (Llama style); no learned position embeddings (RoPE/ALiBi); two norms per layer plus a final one.
// Mixture of experts (model.moe): a MoE layer has the dense layer's attention and norms, a router
// (hidden·experts, no bias) and experts + shared_experts MLPs of expert_ffn_hidden width instead of the MLP.
// REQUIRES: positive layers, hidden, heads; heads divides hidden unless head_dim is given; kv() divides
// heads.
#pragma once

#include "core/job.h"

namespace shepherd {

// Parameters of one layer, averaged over the layers (dense and MoE layers differ), split by how
// parallelism holds them.
struct LayerParamSplit {
  double dense = 0;      // attention, norms, dense MLPs, routers, shared experts: replicated across ep
  double expert = 0;     // routed experts: split over ep
  double activated = 0;  // what one token uses: dense + expert · top_k / experts
  double total() const { return dense + expert; }
};

// Parameters of one dense transformer layer: attention h·(a·d + 2·kv·d) + a·d·h (a heads of width d =
// head_dim, default h/a; under MLA MlaDownProjParams + MlaUpProjParams + a·d_v·h), MLP 2·h·F
// (gelu) or 3·h·F (swiglu), norms, biases.
double LayerParams(const ModelSpec& m);
// Multi-head latent attention (model.mla): the down projections into the query latent (h·q_lora, with its
// norm) and the K/V latent plus the shared rope key (h·(kv_lora + d_rope), with the latent's norm); the up
// projections q_lora·a·(d_nope + d_rope) (h·a·(d_nope + d_rope) without a query latent) and
// kv_lora·a·(d_nope + d_v). REQUIRES: m.mla.enabled().
double MlaDownProjParams(const ModelSpec& m);
double MlaUpProjParams(const ModelSpec& m);
// The architecture's per-layer split (counted).
LayerParamSplit CountLayerSplit(const ModelSpec& m);
// One multi-token-prediction depth (model.mtp_layers): one transformer layer, of the MoE kind when model.moe
// is set (the last layer's kind in the published MoE models), the norms of its two inputs (2h) and the
// projection of their concatenation (2h·h); it shares the embedding and the output layer. Counted from the
// architecture also when model.parameters is given.
LayerParamSplit MtpDepthSplit(const ModelSpec& m);
// Input embedding vocab·h, plus the output layer vocab·h unless tied, plus the final norm.
double EmbeddingParams(const ModelSpec& m);
// layers · CountLayerSplit().total() + mtp_layers · MtpDepthSplit().total() + EmbeddingParams.
double CountParams(const ModelSpec& m);
// Parameters one token uses: layers · CountLayerSplit().activated (+ the MTP depths') + EmbeddingParams
// (equal to CountParams for a dense model).
double CountActivatedParams(const ModelSpec& m);
// The per-layer split the planner uses: CountLayerSplit scaled so that layers · total() =
// model.parameters − embeddings (vocab·h, twice unless tied) when model.parameters is given.
LayerParamSplit PlannedLayerSplit(const ModelSpec& m);
// The parameter count the planner uses: the given model.parameters, else CountParams.
double ModelParams(const ModelSpec& m);

// What every candidate of a model reads of its architecture, counted once per model (ModelCountsOf) and
// passed to each estimate of a search.
struct ModelCounts {
  LayerParamSplit layer;         // PlannedLayerSplit
  LayerParamSplit mtp;           // MtpDepthSplit; zero without model.mtp_layers
  double parameters = 0;         // ModelParams
  double activated = 0;          // parameters · CountActivatedParams / CountParams
  double flops_per_token = 0;    // ModelFlopsPerToken
};
ModelCounts ModelCountsOf(const ModelSpec& m);

// Model FLOPs per trained token (forward and backward, no recompute), Megatron-LM's convention
// (Narayanan et al. 2021, eq. 3, per token): 6·(layers·A + vocab·h) + 12·layers·seq·a·d with A =
// PlannedLayerSplit().activated, i.e. every matmul weight a token meets (for MoE only its top_k routed
// experts), the output layer, and the attention scores QKᵀ and AV counted without a causal mask; under
// MLA QKᵀ is a·(d_nope + d_rope) wide and AV a·d_v: 6·layers·seq·(q_width + o_width); each MTP depth adds
// 6·(MtpDepthSplit().activated + vocab·h) + 6·seq·(q_width + o_width).
double ModelFlopsPerToken(const ModelSpec& m);

}  // namespace shepherd
