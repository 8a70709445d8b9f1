// Parameter and FLOP counts of a decoder-only transformer from its architecture (ModelSpec).
// Conventions (docs/planner.md): biases and LayerNorm's β only for norm = layernorm (GPT style), none for
// rmsnorm (Llama style); no learned position embeddings (RoPE/ALiBi); two norms per layer plus a final one.
// REQUIRES: positive layers, hidden, heads; heads divides hidden; kv() divides heads.
#pragma once

#include "core/job.h"

namespace shepherd {

// Parameters of one transformer layer: attention h·(h + 2·kv·d) + h·h (d = h/heads), MLP 2·h·F (gelu) or
// 3·h·F (swiglu), norms, biases.
double LayerParams(const ModelSpec& m);
// Input embedding vocab·h, plus the output layer vocab·h unless tied, plus the final norm.
double EmbeddingParams(const ModelSpec& m);
// layers · LayerParams + EmbeddingParams.
double CountParams(const ModelSpec& m);
// Parameters of one layer as the planner uses them: (model.parameters − embeddings)/layers when
// model.parameters is given (embeddings: vocab·h, twice unless tied), else LayerParams.
double PlannedLayerParams(const ModelSpec& m);
// The parameter count the planner uses: the given model.parameters, else CountParams.
double ModelParams(const ModelSpec& m);

// Model FLOPs per trained token (forward and backward, no recompute), Megatron-LM's convention
// (Narayanan et al. 2021, eq. 3, per token): 6·(layers·P + vocab·h) + 12·layers·seq·h with P =
// PlannedLayerParams, i.e. every
// matmul weight, the output layer, and the attention scores QKᵀ and AV counted without a causal mask.
double ModelFlopsPerToken(const ModelSpec& m);

}  // namespace shepherd
