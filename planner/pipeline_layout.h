// How transformer layers are split over pipeline stages.
#pragma once

#include <vector>

#include "core/job.h"

namespace shepherd {

// Layers of each of `pp` stages:
// - `given` when not empty (parallelism.pipeline_layers; REQUIRES size pp);
// - layers / pp each when pp divides layers (Megatron's default);
// - otherwise balanced with the input embedding and the output layer each weighing one layer: layers + 2
//   units spread so stages differ by at most one unit, middle stages taking the extra units first, and the
//   first and last stages giving one unit to the embedding and output layer. Llama 3 405B (126 layers, PP 16)
//   gives 7, 8 × 14, 7: the published layout (Llama 3 paper, §3.3.2). An end stage left without a layer
//   takes one from the fullest middle stage (61 layers, PP 32: 1, 2 × 29, 1, 1).
// REQUIRES: 1 <= pp <= layers.
std::vector<int> StageLayers(int layers, int pp, const std::vector<int>& given = {});

// The most virtual stages (interleaved model chunks) a pipeline over `stage_layers` can take: the smallest
// stage's layers, where the first stage's input embedding and the last stage's output layer each count as
// one, since a chunk may hold only one of them (Megatron-Core's account_for_embedding_in_pipeline_split and
// account_for_loss_in_pipeline_split, or an "E|...|L" pipeline_model_parallel_layout). Llama 3.1 405B at
// PP 16 (7, 8 × 14, 7 layers) takes VP 8, as Megatron-Bridge runs it: 128 chunks of one unit each.
// REQUIRES: stage_layers.size() >= 2.
int MaxVirtualStages(const std::vector<int>& stage_layers);

// Whether `vpp` interleaved chunks per stage are equal: vpp divides every stage's layers (Megatron's
// num_layers_per_virtual_pipeline_stage) or every stage's units with the embedding and the output layer
// counted as above. Unequal chunks need a hand-written pipeline_model_parallel_layout, and the time model
// prices the interleaved bubble as if chunks were equal. REQUIRES: stage_layers.size() >= 2, vpp >= 1.
bool EvenVirtualStages(const std::vector<int>& stage_layers, int vpp);

}  // namespace shepherd
