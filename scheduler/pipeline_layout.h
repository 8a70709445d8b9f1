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
//   gives 7, 8 × 14, 7: the published layout (Llama 3 paper, §3.3.2).
// REQUIRES: 1 <= pp <= layers.
std::vector<int> StageLayers(int layers, int pp, const std::vector<int>& given = {});

}  // namespace shepherd
