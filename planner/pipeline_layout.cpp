#include "planner/pipeline_layout.h"

#include <algorithm>

namespace shepherd {

std::vector<int> StageLayers(int layers, int pp, const std::vector<int>& given) {
  if (!given.empty()) return given;
  if (layers % pp == 0 || pp == 1) return std::vector<int>(pp, layers / pp);
  const int units = layers + 2;
  std::vector<int> stage(pp, units / pp);
  int extra = units % pp;
  // Extra units go to the middle stages first (the end stages also hold the embedding or output layer).
  for (int i = 1; i + 1 < pp && extra > 0; ++i, --extra) ++stage[i];
  if (extra > 0) {
    ++stage[0];
    --extra;
  }
  if (extra > 0) ++stage[pp - 1];
  stage[0] -= 1;
  stage[pp - 1] -= 1;
  // An end stage whose share the embedding or the output layer filled (61 layers over 32 stages gave the
  // last one none) takes a layer from the fullest middle stage: every stage holds one, as an explicit
  // pipeline_layers must (a layout from auto is accepted when sent back).
  for (int end : {0, pp - 1})
    if (stage[end] == 0) {
      --*std::max_element(stage.begin() + 1, stage.end() - 1);
      ++stage[end];
    }
  return stage;
}

int MaxVirtualStages(const std::vector<int>& stage_layers) {
  const size_t last = stage_layers.size() - 1;
  int fewest = stage_layers[0] + 1;
  for (size_t i = 1; i < last; ++i) fewest = std::min(fewest, stage_layers[i]);
  return std::min(fewest, stage_layers[last] + 1);
}

bool EvenVirtualStages(const std::vector<int>& stage_layers, int vpp) {
  const size_t last = stage_layers.size() - 1;
  bool layers = true, units = true;
  for (size_t i = 0; i <= last; ++i) {
    layers = layers && stage_layers[i] % vpp == 0;
    units = units && (stage_layers[i] + (i == 0 || i == last ? 1 : 0)) % vpp == 0;
  }
  return layers || units;
}

}  // namespace shepherd
